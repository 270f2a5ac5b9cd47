/*
 * scheduler.h - continuous batching: the one driver of `gpt --batch` and
 * `gpt serve`.
 *
 * The words, the same everywhere:
 *   request     one input: a line of --batch, the body of an HTTP request
 *   completion  one of a request's n continuations (seeds seed, seed + 1, ...)
 *   candidate   one answer of a multiple-choice request, scored, never continued
 * A completion and a candidate are each one Sequence (engine.h). The
 * front-end makes a request's sequences (sequence_init) and hands them to
 * the scheduler in arrival order; the scheduler runs them and tells the
 * front-end what happened through its hooks; the front-end frees them.
 *
 * scheduler_step() is one turn of the loop:
 *   1. drop the sequences whose request the front-end wants dropped (the
 *      client went away, Ctrl-C, a sibling failed): hooks.dropped;
 *   2. admit waiting sequences in arrival order while fewer than `parallel`
 *      run and the KV pool can promise each every block it may need
 *      (engine_admit; a prompt that starts like an earlier one shares its
 *      blocks); the first that must wait holds back the ones after it, so
 *      none starves. One that can never fit is refused; one that cannot fit
 *      with nothing running would wait for ever, and is refused too;
 *   3. one engine_step over every running sequence; then, in running order,
 *      hooks.stepped for each (its new text is in seq->out), and for each
 *      that stopped, its blocks back to the pool at once (sequence_release:
 *      the place and the blocks go to the next waiting one) and hooks.ended.
 * Every sequence handed to scheduler_add gets exactly one hooks.ended.
 *
 * A sequence's tokens do not depend on what else is in the step (forward.h),
 * so the order of admission changes the speed, never a result: each
 * completion is what `gpt -p PROMPT -s SEED` gives.
 *
 * Scoring (score.h) needs no scheduler: the front-end's one engine thread
 * runs it between two steps, on the same threads.
 */
#ifndef GPT_SCHEDULER_H
#define GPT_SCHEDULER_H

#include <stddef.h>

#include "base/error.h"
#include "engine.h"

// Why a sequence left the scheduler.
typedef enum {
    SCHED_STOPPED,   // it stopped by itself: seq->stop says why (STOP_ERROR: seq->error)
    SCHED_DROPPED,   // its request was dropped (hooks.dropped, or scheduler_drop_all)
    SCHED_REFUSED,   // it alone needs more than the KV pool: err says why
    SCHED_NO_ROOM,   // the pool cannot take it even with nothing running
    SCHED_FAILED,    // the step could not run: err says why (every running sequence ends so)
} SchedEnd;

// The front-end's side. request and index are what it gave scheduler_add.
// Each hook may be NULL.
typedef struct {
    void *ctx;
    // Before each step, for each sequence: whether its request is to be dropped.
    int (*dropped)(void *ctx, void *request);
    // A waiting sequence got its blocks and runs from the next step.
    void (*admitted)(void *ctx, void *request, size_t index, Sequence *seq);
    // After a step, for each sequence that ran in it.
    void (*stepped)(void *ctx, void *request, size_t index, Sequence *seq);
    // It left the scheduler (its blocks are back in the pool); the front-end
    // may free it now. err: with SCHED_REFUSED and SCHED_FAILED, else NULL.
    void (*ended)(void *ctx, void *request, size_t index, Sequence *seq, SchedEnd why, const GptError *err);
} SchedulerHooks;

typedef struct {
    Sequence *seq;
    void *request;
    size_t index;
} SchedEntry;

typedef struct {
    Engine *engine;            // the front-end's; must outlive the scheduler
    size_t parallel;           // sequences one step may run (<= the engine's max_seqs)
    SchedulerHooks hooks;
    SchedEntry *waiting;       // in arrival order
    size_t n_waiting, waiting_cap;
    SchedEntry *running;       // (parallel)
    size_t n_running;
    Sequence **step_seqs;      // (parallel) one step's sequences
    // what the steps cost (the engine counts the steps and tokens)
    size_t prefill_steps;
    double busy_seconds;       // wall time in engine_step
    double prefill_seconds;    // ... of the steps that prefilled (and decoded beside it)
    double last_step_end;      // now_seconds() when the last step ended
} Scheduler;

// 0, or -1 with err set (out of memory).
int scheduler_init(Scheduler *s, Engine *e, size_t parallel, const SchedulerHooks *hooks, GptError *err);
// NULL-safe, idempotent. Sequences still held are not ended: drop them first.
void scheduler_free(Scheduler *s);
// Sequence `index` of `request` waits for admission behind those added
// before it. seq is sequence_init'ed and not admitted; it stays the
// front-end's memory. 0, or -1 with err set (out of memory: not added).
int scheduler_add(Scheduler *s, void *request, size_t index, Sequence *seq, GptError *err);
// Sequences waiting or running.
size_t scheduler_held(const Scheduler *s);
// One turn: drop, admit, step, report. 0; or -1 with err set when the step
// could not run (every running sequence has ended with SCHED_FAILED; the
// waiting ones stay).
int scheduler_step(Scheduler *s, GptError *err);
// Every waiting and running sequence ends with SCHED_DROPPED.
void scheduler_drop_all(Scheduler *s);

#endif

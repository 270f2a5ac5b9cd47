/*
 * scheduler.c - continuous batching (scheduler.h): the waiting queue in
 * arrival order, admission under `parallel` and the KV pool's promise, one
 * engine step over every running sequence, and the hooks that tell the
 * front-end.
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/grow.h"

int scheduler_init(Scheduler *s, Engine *e, size_t parallel, const SchedulerHooks *hooks, GptError *err) {
    memset(s, 0, sizeof *s);
    s->engine = e;
    s->parallel = parallel;
    if (hooks) s->hooks = *hooks;
    s->running = calloc(parallel ? parallel : 1, sizeof *s->running);
    s->step_seqs = calloc(parallel ? parallel : 1, sizeof *s->step_seqs);
    if (!s->running || !s->step_seqs) {
        scheduler_free(s);
        return gpt_error(err, "out of memory");
    }
    return 0;
}

void scheduler_free(Scheduler *s) {
    if (!s) return;
    free(s->waiting);
    free(s->running);
    free(s->step_seqs);
    s->waiting = s->running = NULL;
    s->step_seqs = NULL;
    s->n_waiting = s->n_running = s->waiting_cap = 0;
}

int scheduler_add(Scheduler *s, void *request, size_t index, Sequence *seq, GptError *err) {
    if (grow_array(&s->waiting, &s->waiting_cap, s->n_waiting + 1, sizeof *s->waiting) != 0)
        return gpt_error(err, "out of memory");
    s->waiting[s->n_waiting++] = (SchedEntry){seq, request, index};
    return 0;
}

size_t scheduler_held(const Scheduler *s) { return s->n_waiting + s->n_running; }

// The sequence leaves: its blocks back to the pool, then the front-end is told.
static void end(Scheduler *s, const SchedEntry *x, SchedEnd why, const GptError *err) {
    sequence_release(x->seq, s->engine);
    if (s->hooks.ended) s->hooks.ended(s->hooks.ctx, x->request, x->index, x->seq, why, err);
}

static int is_dropped(const Scheduler *s, const SchedEntry *x) {
    return s->hooks.dropped && s->hooks.dropped(s->hooks.ctx, x->request);
}

// 1. Drops the sequences of the requests the front-end wants dropped.
static void drop_requests(Scheduler *s) {
    SchedEntry *lists[2] = {s->waiting, s->running};
    size_t *counts[2] = {&s->n_waiting, &s->n_running};
    for (int l = 0; l < 2; l++) {
        size_t kept = 0;
        for (size_t i = 0; i < *counts[l]; i++) {
            SchedEntry x = lists[l][i];
            if (is_dropped(s, &x)) end(s, &x, SCHED_DROPPED, NULL);
            else lists[l][kept++] = x;
        }
        *counts[l] = kept;
    }
}

// 2. Admits waiting sequences in arrival order; the first that must wait
// holds back the rest.
static void admit_waiting(Scheduler *s) {
    size_t taken = 0;
    GptError err = {{0}};
    while (taken < s->n_waiting && s->n_running < s->parallel) {
        SchedEntry x = s->waiting[taken];
        if (is_dropped(s, &x)) {  // a sibling failed in this turn
            taken++;
            end(s, &x, SCHED_DROPPED, NULL);
            continue;
        }
        int a = engine_admit(s->engine, x.seq, &err);
        if (a == 0) break;
        taken++;
        if (a < 0) {
            end(s, &x, SCHED_REFUSED, &err);
            continue;
        }
        s->running[s->n_running++] = x;
        if (s->hooks.admitted) s->hooks.admitted(s->hooks.ctx, x.request, x.index, x.seq);
    }
    // With nothing running every block not cached for sharing is free: a
    // sequence that still cannot be admitted never will be.
    if (!s->n_running && taken < s->n_waiting) end(s, &s->waiting[taken++], SCHED_NO_ROOM, NULL);
    if (!taken) return;  // (waiting may still be NULL)
    memmove(s->waiting, s->waiting + taken, (s->n_waiting - taken) * sizeof *s->waiting);
    s->n_waiting -= taken;
}

int scheduler_step(Scheduler *s, GptError *err) {
    drop_requests(s);
    admit_waiting(s);
    if (!s->n_running) return 0;
    // 3. one step of every running sequence
    Engine *e = s->engine;
    for (size_t i = 0; i < s->n_running; i++) s->step_seqs[i] = s->running[i].seq;
    size_t prefilled = e->prefill_tokens;
    double t0 = now_seconds();
    int rc = engine_step(e, s->step_seqs, s->n_running, err);
    s->last_step_end = now_seconds();
    double seconds = s->last_step_end - t0;
    s->busy_seconds += seconds;
    // the prefill rate is over the steps that prefilled, as a single run's is
    if (e->prefill_tokens > prefilled) {
        s->prefill_seconds += seconds;
        s->prefill_steps++;
    }
    if (rc != 0) {
        for (size_t i = 0; i < s->n_running; i++) end(s, &s->running[i], SCHED_FAILED, err);
        s->n_running = 0;
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < s->n_running; i++) {
        SchedEntry x = s->running[i];
        if (s->hooks.stepped) s->hooks.stepped(s->hooks.ctx, x.request, x.index, x.seq);
        if (x.seq->stop) end(s, &x, SCHED_STOPPED, NULL);
        else s->running[kept++] = x;
    }
    s->n_running = kept;
    return 0;
}

void scheduler_drop_all(Scheduler *s) {
    for (size_t i = 0; i < s->n_waiting; i++) end(s, &s->waiting[i], SCHED_DROPPED, NULL);
    for (size_t i = 0; i < s->n_running; i++) end(s, &s->running[i], SCHED_DROPPED, NULL);
    s->n_waiting = s->n_running = 0;
}

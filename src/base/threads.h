/*
 * threads.h - a pool of threads that stay alive between calls, for the
 * kernels that split one product across cores (matmul.c, forward.c).
 *
 * threadpool_run() splits one task into n_threads parts and returns when all
 * have run: a fork-join with no thread created per call; threadpool_run_parts()
 * into any number of parts, which the threads take as they come free. The caller runs
 * part 0 and then any part no worker has claimed yet, so a worker the
 * machine does not schedule in time (another process on its core) does not
 * hold up the run. Each part must therefore depend on its index alone (its
 * share of the work, its per-index scratch), never on which thread runs it. Between tasks a worker spins for a short while
 * (a decode step runs about 50 tasks in a few milliseconds, and waking a
 * sleeping thread costs tens of microseconds), then sleeps on a condition
 * variable, so an idle pool takes no CPU from anyone else (a BLAS's own
 * threads, other processes).
 *
 * A NULL pool is a pool of one thread: the task runs on the caller.
 */
#ifndef GPT_THREADS_H
#define GPT_THREADS_H

#include "base/error.h"

#include <pthread.h>

// pthread_create(thread, NULL, start, arg), the new thread with every
// signal blocked but those of a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGTRAP, SIGSYS): a signal sent to the process then waits for the thread
// that takes it on purpose (the main thread's handler, gpt chat's pselect,
// gpt serve's sigwait), and is never consumed by a worker while that
// thread has it blocked. Every thread gpt starts is started so.
int thread_start(pthread_t *thread, void *(*start)(void *), void *arg);

typedef struct ThreadPool ThreadPool;

// task(arg, part, n_threads) runs once for each part 0 <= part < n_threads,
// on some thread of the pool (the caller, or a worker).
typedef void (*ThreadTask)(void *arg, int thread, int n_threads);

// A pool of n_threads threads in all (n_threads - 1 are created; 1 creates
// none). Returns NULL with err set on failure.
ThreadPool *threadpool_create(int n_threads, GptError *err);
void threadpool_free(ThreadPool *p);  // NULL-safe; joins the workers
int threadpool_size(const ThreadPool *p);  // 1 for NULL
// Runs every part of task and waits for all of them. Not reentrant: one
// caller at a time, and a task must not call threadpool_run on its pool.
void threadpool_run(ThreadPool *p, ThreadTask task, void *arg);

// task(arg, part, n_parts, thread) runs once for each part 0 <= part <
// n_parts, any number of parts per thread: the threads claim them one at a
// time, in order, whichever is free (a thread that is busy or not scheduled
// leaves its share to the others). `thread` (0 .. n_threads - 1) names the
// thread that runs the part, for scratch of its own: no two parts run at
// once on one thread. What a part computes must depend on its index alone.
// n_parts < 2^31. The same rules as threadpool_run otherwise.
typedef void (*PartTask)(void *arg, int part, int n_parts, int thread);
void threadpool_run_parts(ThreadPool *p, PartTask task, void *arg, int n_parts);

// Solo: the caller runs every part itself and leaves the workers asleep,
// for a machine too busy to give them a core in time (a worker descheduled
// in the middle of its part holds the whole run up for a time slice). The
// parts and their bits are the same; only who runs them changes. Off at
// creation; the engine turns it on and off by measurement (engine.c).
void threadpool_set_solo(ThreadPool *p, int solo);  // NULL-safe
int threadpool_is_solo(const ThreadPool *p);

// What the pool's runs cost their caller, counted by the caller (no
// atomics): runs (fork-joins: a decode step of GPT-2 has about 60), the
// parts in them and those the caller ran itself, and the runs at whose end
// the caller, out of parts to claim, waited for a part another thread was
// still running, with the time it waited. A NULL pool or one of one thread
// counts nothing (its runs are plain calls).
typedef struct {
    size_t runs, parts, caller_parts;
    size_t late_runs;
    double wait_seconds;
    size_t solo_runs;  // runs in solo mode (their parts all the caller's)
} ThreadPoolStats;
ThreadPoolStats threadpool_stats(const ThreadPool *p);

// The range [*begin, *end) of n items that thread `thread` of n_threads
// takes, in chunks that are multiples of `grain` (but the last): an even
// split that depends only on n, grain and n_threads.
void thread_range(size_t n, size_t grain, int thread, int n_threads, size_t *begin, size_t *end);

#endif

/*
 * threads.h - a pool of threads that stay alive between calls, for the
 * kernels that split one product across cores (matmul.c, forward.c).
 *
 * threadpool_run() hands one task to every thread of the pool (the caller is
 * thread 0) and returns when all have finished it: a fork-join with no
 * thread created per call. Between tasks a worker spins for a short while
 * (a decode step runs about 50 tasks in a few milliseconds, and waking a
 * sleeping thread costs tens of microseconds), then sleeps on a condition
 * variable, so an idle pool takes no CPU from anyone else (a BLAS's own
 * threads, other processes).
 *
 * A NULL pool is a pool of one thread: the task runs on the caller.
 */
#ifndef GPT_THREADS_H
#define GPT_THREADS_H

#include "error.h"

typedef struct ThreadPool ThreadPool;

// task(arg, thread, n_threads) runs once on each thread, 0 <= thread < n_threads.
typedef void (*ThreadTask)(void *arg, int thread, int n_threads);

// A pool of n_threads threads in all (n_threads - 1 are created; 1 creates
// none). Returns NULL with err set on failure.
ThreadPool *threadpool_create(int n_threads, GptError *err);
void threadpool_free(ThreadPool *p);  // NULL-safe; joins the workers
int threadpool_size(const ThreadPool *p);  // 1 for NULL
// Runs task on every thread and waits for all of them. Not reentrant: one
// caller at a time, and a task must not call threadpool_run on its pool.
void threadpool_run(ThreadPool *p, ThreadTask task, void *arg);

// The range [*begin, *end) of n items that thread `thread` of n_threads
// takes, in chunks that are multiples of `grain` (but the last): an even
// split that depends only on n, grain and n_threads.
void thread_range(size_t n, size_t grain, int thread, int n_threads, size_t *begin, size_t *end);

#endif

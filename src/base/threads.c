/* threads.c - see threads.h. */
#include "base/threads.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

// Spins before a worker sleeps (each a pause instruction, ~10-40 ns).
enum { SPIN_ITERATIONS = 20000 };

// How a run is shared out. threadpool_run's parts are its thread indices 0
// .. n_threads - 1: each is a function of (arg, index, n_threads) alone
// (every caller splits its work by index and keeps per-index scratch), so
// any thread may run any part, as long as each part runs once;
// threadpool_run_parts' parts are any number, and the task is told which
// thread runs each. The caller and the workers claim parts in order until
// none is left: a worker that is slow to start (asleep, or not scheduled
// because the machine is busy) does not hold up the run; its parts run on
// the others instead, the same bits either way. A claim is a
// compare-and-swap on one word that holds the run's generation (high 32
// bits) and the next unclaimed part (low 32), so a worker that wakes after
// its run has ended cannot claim a part of the next run for the old task.

int thread_start(pthread_t *thread, void *(*start)(void *), void *arg) {
    sigset_t all, old;
    sigfillset(&all);
    const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_BLOCK, &all, &old);  // the new thread inherits the mask
    int rc = pthread_create(thread, NULL, start, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

typedef struct {
    ThreadPool *pool;
    int index;
} Worker;

struct ThreadPool {
    int n_threads;
    pthread_t *threads;
    Worker *workers;
    // The runs' tasks, by generation: run g's in runs[g % 2], rewritten only
    // when run g + 2 starts. A worker late out of run g may still read its
    // entry after run g + 1 has begun (and finds no part left to claim);
    // by run g + 2 its claim can no longer succeed (see run_parts).
    struct {
        ThreadTask task;     // threadpool_run's, or NULL
        PartTask part_task;  // threadpool_run_parts', or NULL
        atomic_int n_parts;  // atomic: a late worker may read it as run g + 2 writes it
        void *arg;
    } runs[2];
    _Atomic uint64_t work;   // generation << 32 | next part to claim
    atomic_int finished;     // parts done in the current run
    atomic_int stop;
    pthread_mutex_t lock;    // guards sleepers and the condition variable
    pthread_cond_t wake;
    int sleepers;
    ThreadPoolStats stats;   // the caller's own counts (threadpool_stats)
    int solo;                // every part on the caller (threadpool_set_solo)
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline unsigned generation_of(uint64_t w) { return (unsigned)(w >> 32); }

// Claims and runs, on thread `thread`, the parts of generation gen that are
// left; returns when none is, with how many it ran.
static int run_parts(ThreadPool *p, unsigned gen, int thread) {
    int ran = 0;
    uint64_t w = atomic_load_explicit(&p->work, memory_order_acquire);
    for (;;) {
        if (generation_of(w) != gen) return ran;
        // This run's entry: while the word still says run gen, run gen + 1
        // has not begun, so the entry holds run gen's task (only gen + 2
        // rewrites it); the claim below succeeds only if the word still does.
        const int n_parts = atomic_load_explicit(&p->runs[gen % 2].n_parts, memory_order_relaxed);
        if ((int)(uint32_t)w >= n_parts) return ran;
        if (!atomic_compare_exchange_weak_explicit(&p->work, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;  // w now holds the word as it is
        // A part of this run is claimed and not done, so the run (its task
        // and arg) lasts until we are finished with it.
        int part = (int)(uint32_t)w;
        if (p->runs[gen % 2].part_task) p->runs[gen % 2].part_task(p->runs[gen % 2].arg, part, n_parts, thread);
        else p->runs[gen % 2].task(p->runs[gen % 2].arg, part, p->n_threads);
        atomic_fetch_add_explicit(&p->finished, 1, memory_order_release);
        ran++;
        w = atomic_load_explicit(&p->work, memory_order_acquire);
    }
}

static void *worker_main(void *arg) {
    Worker *w = arg;
    ThreadPool *p = w->pool;
    // Generation 0 is the pool's state when the worker was created; reading
    // the counter here instead would miss a run started before this thread.
    unsigned seen = 0;
    for (;;) {
        unsigned gen = seen;
        for (int i = 0; i < SPIN_ITERATIONS; i++) {
            gen = generation_of(atomic_load_explicit(&p->work, memory_order_acquire));
            if (gen != seen || atomic_load_explicit(&p->stop, memory_order_relaxed)) break;
            cpu_relax();
        }
        if (gen == seen) {
            pthread_mutex_lock(&p->lock);
            p->sleepers++;
            while ((gen = generation_of(atomic_load_explicit(&p->work, memory_order_acquire))) == seen &&
                   !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->lock);
            p->sleepers--;
            pthread_mutex_unlock(&p->lock);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = gen;
        run_parts(p, gen, w->index);
    }
}

ThreadPool *threadpool_create(int n_threads, GptError *err) {
    if (n_threads < 1) n_threads = 1;
    ThreadPool *p = calloc(1, sizeof *p);
    if (!p) {
        gpt_error(err, "threads: out of memory");
        return NULL;
    }
    p->n_threads = n_threads;
    atomic_init(&p->work, (uint64_t)0);
    atomic_init(&p->finished, 0);
    atomic_init(&p->stop, 0);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->workers = calloc((size_t)n_threads, sizeof *p->workers);
    if (!p->threads || !p->workers) {
        threadpool_free(p);
        gpt_error(err, "threads: out of memory");
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        p->workers[i] = (Worker){p, i};
        if (thread_start(&p->threads[i], worker_main, &p->workers[i]) != 0) {
            p->n_threads = i;  // join the ones that started
            threadpool_free(p);
            gpt_error(err, "threads: cannot start thread %d of %d", i + 1, n_threads);
            return NULL;
        }
    }
    return p;
}

void threadpool_free(ThreadPool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++)
        if (p->threads) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p->workers);
    free(p);
}

int threadpool_size(const ThreadPool *p) { return p ? p->n_threads : 1; }

// One run of n_parts parts: the workers woken, the caller claiming parts
// with them, then waiting until every part is done.
static void run(ThreadPool *p, ThreadTask task, PartTask part_task, void *arg, int n_parts) {
    if (p->solo) {  // the workers are not woken: the caller runs the parts in order
        for (int i = 0; i < n_parts; i++)
            if (part_task) part_task(arg, i, n_parts, 0);
            else task(arg, i, p->n_threads);
        p->stats.runs++;
        p->stats.solo_runs++;
        p->stats.parts += (size_t)n_parts;
        p->stats.caller_parts += (size_t)n_parts;
        return;
    }
    // the new generation, nothing claimed yet
    unsigned gen = generation_of(atomic_load_explicit(&p->work, memory_order_relaxed)) + 1;
    p->runs[gen % 2].task = task;
    p->runs[gen % 2].part_task = part_task;
    atomic_store_explicit(&p->runs[gen % 2].n_parts, n_parts, memory_order_relaxed);
    p->runs[gen % 2].arg = arg;
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->lock);
    atomic_store_explicit(&p->work, (uint64_t)gen << 32, memory_order_release);
    if (p->sleepers) pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    p->stats.runs++;
    p->stats.parts += (size_t)n_parts;
    p->stats.caller_parts += (size_t)run_parts(p, gen, 0);
    if (atomic_load_explicit(&p->finished, memory_order_acquire) == n_parts) return;
    // the join: the parts others claimed are still running
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; atomic_load_explicit(&p->finished, memory_order_acquire) < n_parts; i++)
        if (i < SPIN_ITERATIONS) cpu_relax();
        else sched_yield();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    p->stats.late_runs++;
    p->stats.wait_seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

ThreadPoolStats threadpool_stats(const ThreadPool *p) { return p ? p->stats : (ThreadPoolStats){0}; }

void threadpool_set_solo(ThreadPool *p, int solo) {
    if (p && p->n_threads > 1) p->solo = solo != 0;
}

int threadpool_is_solo(const ThreadPool *p) { return p && p->solo; }

void threadpool_run(ThreadPool *p, ThreadTask task, void *arg) {
    if (!p || p->n_threads == 1) {
        task(arg, 0, 1);
        return;
    }
    run(p, task, NULL, arg, p->n_threads);
}

void threadpool_run_parts(ThreadPool *p, PartTask task, void *arg, int n_parts) {
    if (!p || p->n_threads == 1) {
        for (int i = 0; i < n_parts; i++) task(arg, i, n_parts, 0);
        return;
    }
    if (n_parts > 0) run(p, NULL, task, arg, n_parts);
}

void thread_range(size_t n, size_t grain, int thread, int n_threads, size_t *begin, size_t *end) {
    if (grain == 0) grain = 1;
    size_t chunks = (n + grain - 1) / grain;
    size_t per = chunks / (size_t)n_threads, extra = chunks % (size_t)n_threads;
    size_t t = (size_t)thread;
    size_t c0 = t * per + (t < extra ? t : extra);
    size_t c1 = c0 + per + (t < extra ? 1 : 0);
    *begin = c0 * grain < n ? c0 * grain : n;
    *end = c1 * grain < n ? c1 * grain : n;
}

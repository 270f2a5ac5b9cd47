/*
 * test_threads.c - the thread pool (threads.h): every part of a task runs
 * exactly once per threadpool_run, whichever thread claims it, over many
 * runs of uneven parts, with more threads than cores and with another
 * process keeping the cores busy (so that workers are often not scheduled
 * when a run starts, and the caller claims their parts); and thread_range
 * cuts n items into an even, complete, ordered split. threadpool_run_parts:
 * every one of any number of parts (0, fewer than the threads, many more)
 * runs exactly once, on a thread index in range, and never two at once on
 * one thread index (what per-thread scratch relies on).
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "base/threads.h"

enum { MAX_PARTS = 16, RUNS = 4000 };

typedef struct {
    atomic_int ran[MAX_PARTS];  // times each part ran in this run
    int run;                    // which run, for the uneven work
    atomic_int bad_index;       // a part index outside [0, n_threads)
    volatile double sink;
} Job;

// Part i does an amount of work that depends on (run, i): some parts are
// far longer than others, as the last share of a matmul can be.
static void part(void *arg, int i, int n_threads) {
    Job *j = arg;
    if (i < 0 || i >= n_threads || i >= MAX_PARTS) {
        atomic_fetch_add(&j->bad_index, 1);
        return;
    }
    atomic_fetch_add(&j->ran[i], 1);
    int spins = ((j->run * 7 + i * 13) % 5 == 0) ? 20000 : 200;
    double x = 0;
    for (int k = 0; k < spins; k++) x += k * 1e-9;
    j->sink = x;
}

static void check_pool(int n_threads, const char *what) {
    GptError err = {{0}};
    ThreadPool *p = threadpool_create(n_threads, &err);
    CHECK(p != NULL, "%s: %s", what, err.msg);
    if (!p) return;
    CHECK(threadpool_size(p) == n_threads, "%s: size %d", what, threadpool_size(p));
    Job j;
    memset(&j, 0, sizeof j);
    int wrong = 0;
    for (int r = 0; r < RUNS; r++) {
        for (int i = 0; i < MAX_PARTS; i++) atomic_store(&j.ran[i], 0);
        j.run = r;
        threadpool_run(p, part, &j);
        // threadpool_run has returned: every part ran once, none is still running
        for (int i = 0; i < n_threads; i++) wrong += atomic_load(&j.ran[i]) != 1;
        // every few runs a pause, so that the workers fall asleep and must be woken
        if (r % 500 == 499) nanosleep(&(struct timespec){.tv_nsec = 3000000}, NULL);
    }
    CHECK(wrong == 0 && atomic_load(&j.bad_index) == 0, "%s: %d parts ran other than once, %d bad indices", what,
          wrong, atomic_load(&j.bad_index));
    threadpool_free(p);
}

// ---- threadpool_run_parts

enum { MAX_MANY = 300, MAX_POOL = 8 };

typedef struct {
    atomic_int ran[MAX_MANY];
    atomic_int busy[MAX_POOL];  // parts running now on each thread index
    atomic_int bad;             // a part or thread index out of range, or two parts at once on one thread
    int n_threads, run;
    volatile double sink;
} ManyJob;

static void many_part(void *arg, int i, int n_parts, int thread) {
    ManyJob *j = arg;
    if (i < 0 || i >= n_parts || i >= MAX_MANY || thread < 0 || thread >= j->n_threads) {
        atomic_fetch_add(&j->bad, 1);
        return;
    }
    if (atomic_fetch_add(&j->busy[thread], 1) != 0) atomic_fetch_add(&j->bad, 1);
    atomic_fetch_add(&j->ran[i], 1);
    int spins = ((j->run * 7 + i * 13) % 11 == 0) ? 2000 : 10;
    double x = 0;
    for (int k = 0; k < spins; k++) x += k * 1e-9;
    j->sink = x;
    atomic_fetch_sub(&j->busy[thread], 1);
}

static void check_parts(int n_threads, const char *what) {
    GptError err = {{0}};
    ThreadPool *p = threadpool_create(n_threads, &err);
    CHECK(p != NULL, "%s: %s", what, err.msg);
    if (!p) return;
    static ManyJob j;
    memset(&j, 0, sizeof j);
    j.n_threads = n_threads;
    // Runs back to back, few parts then many: a worker late out of a run of
    // few parts must not claim a part of it against the next run's count
    // (it once did, in matmul's use, and crashed). The counts add up over a
    // round of runs and are checked after it.
    const int counts[] = {1, MAX_MANY, 0, 2, 37, 1, 3, 5, MAX_MANY, 16, 2, MAX_MANY};
    enum { N_COUNTS = sizeof counts / sizeof counts[0] };
    int wrong = 0;
    for (int round = 0; round < RUNS / 16; round++) {
        for (int i = 0; i < MAX_MANY; i++) atomic_store(&j.ran[i], 0);
        int want[MAX_MANY] = {0};
        for (int r = 0; r < N_COUNTS; r++) {
            j.run = round * N_COUNTS + r;
            threadpool_run_parts(p, many_part, &j, counts[r]);
            for (int i = 0; i < counts[r]; i++) want[i]++;
        }
        for (int i = 0; i < MAX_MANY; i++) wrong += atomic_load(&j.ran[i]) != want[i];
        if (round % 50 == 49) nanosleep(&(struct timespec){.tv_nsec = 3000000}, NULL);
        // the two kinds of run in turn on one pool
        Job k;
        memset(&k, 0, sizeof k);
        threadpool_run(p, part, &k);
        for (int i = 0; i < n_threads; i++) wrong += atomic_load(&k.ran[i]) != 1;
    }
    CHECK(wrong == 0 && atomic_load(&j.bad) == 0, "%s: %d parts ran other than once, %d bad indices or overlaps",
          what, wrong, atomic_load(&j.bad));
    // the caller's counts: every run and part of the rounds above (a pool
    // of one thread counts nothing: its runs are plain calls)
    ThreadPoolStats st = threadpool_stats(p);
    size_t runs = 0, parts = 0;
    for (int r = 0; r < N_COUNTS; r++) runs += counts[r] > 0, parts += (size_t)counts[r];
    runs = (runs + 1) * (RUNS / 16);
    parts = (parts + (size_t)n_threads) * (RUNS / 16);
    CHECK(n_threads == 1 ? st.runs == 0 && st.parts == 0
                         : st.runs == runs && st.parts == parts && st.caller_parts <= st.parts &&
                               st.late_runs <= st.runs && st.wait_seconds >= 0,
          "%s: stats %zu runs (want %zu), %zu parts (want %zu), %zu by the caller, %zu late, %g s", what, st.runs,
          n_threads == 1 ? (size_t)0 : runs, st.parts, n_threads == 1 ? (size_t)0 : parts, st.caller_parts,
          st.late_runs, st.wait_seconds);
    threadpool_free(p);
}

static void test_thread_range(void) {
    for (size_t n = 0; n < 200; n += 7)
        for (int t = 1; t <= 5; t++) {
            size_t next = 0;
            int ok = 1;
            for (int i = 0; i < t; i++) {
                size_t b, e;
                thread_range(n, 16, i, t, &b, &e);
                ok &= b == next && e >= b && (e == n || (e - b) % 16 == 0);
                next = e;
            }
            CHECK(ok && next == n, "thread_range(%zu, 16, ., %d) does not cut [0, n) in order", n, t);
        }
}

// Solo mode: the caller runs every part, each once, and counts them so;
// a pool of one thread has no mode to change.
static void check_solo(void) {
    GptError err = {{0}};
    ThreadPool *p = threadpool_create(2, &err), *one = threadpool_create(1, &err);
    CHECK(p && one, "pools: %s", err.msg);
    if (!p || !one) {
        threadpool_free(p);
        threadpool_free(one);
        return;
    }
    static ManyJob j;
    memset(&j, 0, sizeof j);
    j.n_threads = 2;
    threadpool_set_solo(one, 1);
    CHECK(!threadpool_is_solo(one) && !threadpool_is_solo(p), "a new pool, or one of one thread, is not solo");
    int wrong = 0;
    for (int round = 0; round < 100; round++) {
        threadpool_set_solo(p, round % 3 != 0);  // in and out of it, as the engine does
        for (int i = 0; i < MAX_MANY; i++) atomic_store(&j.ran[i], 0);
        j.run = round;
        threadpool_run_parts(p, many_part, &j, 37);
        for (int i = 0; i < 37; i++) wrong += atomic_load(&j.ran[i]) != 1;
        Job k;
        memset(&k, 0, sizeof k);
        threadpool_run(p, part, &k);
        for (int i = 0; i < 2; i++) wrong += atomic_load(&k.ran[i]) != 1;
    }
    ThreadPoolStats st = threadpool_stats(p);
    // 66 rounds solo, 2 runs each, every part the caller's
    CHECK(wrong == 0 && atomic_load(&j.bad) == 0 && st.runs == 200 && st.solo_runs == 132 && st.parts == 100 * 39,
          "solo: %d parts ran other than once, %d bad; %zu runs, %zu solo, %zu parts", wrong, atomic_load(&j.bad),
          st.runs, st.solo_runs, st.parts);
    threadpool_set_solo(NULL, 1);  // NULL-safe
    threadpool_free(p);
    threadpool_free(one);
}

// SigBlk of /proc/self/task/TID/status: the thread's blocked signals, bit
// sig - 1 for each.
static unsigned long long blocked_signals(const char *tid) {
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
    FILE *f = fopen(path, "r");
    unsigned long long mask = 0;
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "SigBlk:", 7)) mask = strtoull(line + 7, NULL, 16);
    fclose(f);
    return mask;
}

// A pool's workers block every signal but a fault's (thread_start), so
// that a SIGINT the main thread has blocked for a moment (gpt chat checks
// its flag so, then waits in pselect) stays pending for it instead of
// being taken by a worker. The main thread's own mask is as it was.
static void check_worker_signals(void) {
    GptError err = {0};
    ThreadPool *p = threadpool_create(3, &err);
    CHECK(p != NULL, "threadpool_create: %s", err.msg);
    char self[32];
    snprintf(self, sizeof self, "%d", (int)getpid());
    const unsigned long long bit_int = 1ull << (SIGINT - 1), bit_term = 1ull << (SIGTERM - 1),
                             bit_usr1 = 1ull << (SIGUSR1 - 1), bit_segv = 1ull << (SIGSEGV - 1);
    int workers = 0;
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL, "opendir /proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        unsigned long long m = blocked_signals(e->d_name);
        // a thread glibc is still starting has every signal blocked, SIGSEGV
        // too, until it sets the mask it inherited: wait for that (10 s at most)
        for (int tries = 0; (m & bit_segv) && tries < 10000; tries++) {
            nanosleep(&(struct timespec){0, 1000000}, NULL);
            m = blocked_signals(e->d_name);
        }
        if (!strcmp(e->d_name, self)) {
            CHECK(!(m & bit_int) && !(m & bit_term), "the main thread's mask is kept (%llx)", m);
            continue;
        }
        workers++;
        CHECK((m & bit_int) && (m & bit_term) && (m & bit_usr1) && !(m & bit_segv),
               "worker %s blocks SIGINT, SIGTERM, SIGUSR1 and not SIGSEGV (SigBlk %llx)", e->d_name, m);
    }
    if (d) closedir(d);
    CHECK(workers == 2, "2 workers found in /proc/self/task (%d)", workers);
    threadpool_free(p);
}

int main(void) {
    test_thread_range();
    check_worker_signals();
    check_solo();
    check_pool(1, "1 thread");
    check_pool(2, "2 threads");
    check_pool(7, "7 threads (more than cores)");
    check_parts(1, "parts, 1 thread");
    check_parts(2, "parts, 2 threads");
    check_parts(7, "parts, 7 threads");
    // Another process spinning on every core: workers are descheduled at
    // the start of many runs, and the caller claims their parts.
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    pid_t busy[8];
    int n_busy = 0;
    for (long c = 0; c < cores && n_busy < 8; c++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(60);  // ends it even if this test dies before it kills it
            for (volatile unsigned long x = 0;; x++) {
            }
        }
        if (pid > 0) busy[n_busy++] = pid;
    }
    check_pool(2, "2 threads, cores busy");
    check_pool(4, "4 threads, cores busy");
    check_parts(3, "parts, 3 threads, cores busy");
    for (int i = 0; i < n_busy; i++) {
        kill(busy[i], SIGKILL);
        waitpid(busy[i], NULL, 0);
    }
    return check_exit("test_threads");
}

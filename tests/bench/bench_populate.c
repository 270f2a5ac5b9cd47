/*
 * bench_populate.c - the rate at which this machine makes a mapped file's
 * pages readable: the weights' first pass that a process of gpt pays once
 * (src/base/fileio.c, file_prefetch), measured alone in a process of its
 * own (the first read of a page is paid once per process).
 *
 *     bench_populate FILE populate [THREADS]
 *         ->  "bytes N threads T pass W populate P first_read R again A"
 *     bench_populate FILE fault
 *         ->  "bytes N threads 1 pass W again A"
 *
 * populate: as prefetch_main does, each 2 MiB chunk of a fresh read-only
 * mapping through MADV_POPULATE_READ, then one byte of each of its pages
 * read (on a VM with shadow page tables the first read is paid there, not
 * in the populate); THREADS (1 to 64, default 1) threads take every
 * THREADS-th chunk. W: the wall of the whole pass, seconds, its rate N / W;
 * P and R: the first thread's time in the populates and in the reads.
 * fault: no advice, one byte of each page read on one thread (the page
 * faults' rate). again: one byte of each page read once more, every page
 * already there (the floor of a pass). The file should be in the page
 * cache (read it once before): what is measured is the mapping, not the
 * disk. Exit status 1 on an unreadable file or a failed mmap, 2 on bad
 * arguments.
 */
#define _GNU_SOURCE  // madvise, MADV_POPULATE_READ
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"

enum { CHUNK = 2 << 20, MAX_THREADS = 64 };  // CHUNK: prefetch_main's

typedef struct {
    const volatile unsigned char *data;
    size_t size, page;
    int thread, n_threads, populate;
    double populate_s, read_s;  // out
    unsigned sum;               // out: keeps the reads
} Pass;

// One byte of each page of data[from, to), summed.
static unsigned read_pages(const volatile unsigned char *data, size_t from, size_t to, size_t page) {
    unsigned sum = 0;
    for (size_t i = from; i < to; i += page) sum += data[i];
    return sum;
}

// Every n_threads-th chunk from the thread-th: populated, then read.
static void *pass_main(void *arg) {
    Pass *p = arg;
    for (size_t at = (size_t)p->thread * CHUNK; at < p->size; at += (size_t)p->n_threads * CHUNK) {
        size_t end = p->size - at < CHUNK ? p->size : at + CHUNK;
        double t0 = now_seconds();
#ifdef MADV_POPULATE_READ
        // the mapping starts on a page and chunks are whole pages
        if (p->populate) (void)madvise((void *)(uintptr_t)(p->data + at), end - at, MADV_POPULATE_READ);
#endif
        double t1 = now_seconds();
        p->sum += read_pages(p->data, at, end, p->page);
        p->populate_s += t1 - t0;
        p->read_s += now_seconds() - t1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int populate = argc >= 3 && !strcmp(argv[2], "populate");
    int n_threads = argc == 4 ? atoi(argv[3]) : 1;
    if (argc < 3 || argc > 4 || (!populate && (strcmp(argv[2], "fault") || argc != 3)) || n_threads < 1 ||
        n_threads > MAX_THREADS) {
        fprintf(stderr, "usage: bench_populate FILE populate [THREADS(1-%d)] | bench_populate FILE fault\n",
                MAX_THREADS);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        fprintf(stderr, "bench_populate: %s: cannot read it, or it is empty\n", argv[1]);
        return 1;
    }
    size_t size = (size_t)st.st_size, page = (size_t)sysconf(_SC_PAGESIZE);
    const unsigned char *data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED) {
        fprintf(stderr, "bench_populate: %s: mmap failed\n", argv[1]);
        return 1;
    }
    Pass passes[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    for (int i = 0; i < n_threads; i++)
        passes[i] = (Pass){.data = data, .size = size, .page = page, .thread = i, .n_threads = n_threads,
                           .populate = populate};
    double t0 = now_seconds();
    int started = 1;
    for (int i = 1; i < n_threads && started == i; i++)
        if (pthread_create(&threads[i], NULL, pass_main, &passes[i]) == 0) started++;
    if (started < n_threads) {  // the chunks of the threads that did not start are not read: no pass
        fprintf(stderr, "bench_populate: could not start %d threads\n", n_threads);
        return 1;
    }
    pass_main(&passes[0]);
    for (int i = 1; i < n_threads; i++) pthread_join(threads[i], NULL);
    double t1 = now_seconds();
    unsigned sum = read_pages(data, 0, size, page);
    double t2 = now_seconds();
    for (int i = 0; i < n_threads; i++) sum += passes[i].sum;
    if (populate)
        printf("bytes %zu threads %d pass %.6f populate %.6f first_read %.6f again %.6f\n", size, n_threads, t1 - t0,
               passes[0].populate_s, passes[0].read_s, t2 - t1);
    else
        printf("bytes %zu threads 1 pass %.6f again %.6f\n", size, t1 - t0, t2 - t1);
    munmap((void *)(uintptr_t)data, size);
    (void)sum;  // the reads are volatile: kept without it
    return 0;
}

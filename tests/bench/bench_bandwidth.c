/*
 * bench_bandwidth.c - the memory read bandwidth now, on 1 and 2 threads: the
 * read loop of bench_util.h over 1 GiB, best of 3 passes each.
 *
 *   bench_bandwidth    ->  "read bandwidth 1 thread 27.9 GB/s, 2 threads 54.1 GB/s"
 *
 * On a shared VM the 2-thread figure changes from minute to minute (on a
 * 2-vCPU Zen 4, 34 or 54 GB/s, by where the host runs the vCPUs), and a
 * decode of one sequence follows it. make bench measures it beside each
 * decode it holds against the bandwidth, not once at the start.
 */
#include "bench_util.h"

int main(void) {
    size_t n_words = ((size_t)1 << 30) / sizeof(uint64_t);
    uint64_t *buf = malloc(n_words * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "bench_bandwidth: out of memory for 1 GiB\n");
        return 1;
    }
    for (size_t i = 0; i < n_words; i++) buf[i] = i;
    double one = read_bandwidth(buf, n_words, 1, 3), two = read_bandwidth(buf, n_words, 2, 3);
    printf("read bandwidth 1 thread %.1f GB/s, 2 threads %.1f GB/s\n", one, two);
    free(buf);
    return 0;
}

/*
 * bench_util.h - what the benches share: the CPU's name, and a read loop
 * that measures the read bandwidth over a buffer of a given size (far past
 * the caches for memory, or a model's working set, which may fit in the
 * last-level cache). Header-only; included by bench_model.c and bench_demo.c.
 */
#ifndef GPT_BENCH_UTIL_H
#define GPT_BENCH_UTIL_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

// "AMD EPYC (family 25, model 17, stepping 1)", from /proc/cpuinfo; "unknown"
// where there is none.
static inline void cpu_description(char *buf, size_t n) {
    char name[128] = "unknown", family[16] = "?", model[16] = "?", stepping[16] = "?";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            char *colon = strchr(line, ':');
            if (!colon) continue;
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t') v++;
            v[strcspn(v, "\n")] = '\0';
            size_t k = (size_t)(colon - line);
            while (k > 0 && (line[k - 1] == ' ' || line[k - 1] == '\t')) k--;
            line[k] = '\0';
            if (!strcmp(line, "model name")) snprintf(name, sizeof name, "%s", v);
            else if (!strcmp(line, "cpu family")) snprintf(family, sizeof family, "%s", v);
            else if (!strcmp(line, "model")) snprintf(model, sizeof model, "%s", v);
            else if (!strcmp(line, "stepping")) snprintf(stepping, sizeof stepping, "%s", v);
            else if (line[0] == '\0') break;  // the end of the first processor
        }
        fclose(f);
    }
    snprintf(buf, n, "%s (family %s, model %s, stepping %s)", name, family, model, stepping);
}

// The size in bytes of the last-level cache (sysfs), 0 if unknown.
static inline size_t llc_bytes(void) {
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], s[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(s, sizeof s, f)) {
            char *end;
            size_t v = strtoull(s, &end, 10);
            if (*end == 'K') v <<= 10;
            else if (*end == 'M') v <<= 20;
            if (v > best) best = v;
        }
        fclose(f);
    }
    return best;
}

typedef struct {
    const uint64_t *data;
    size_t n;
    int passes;
    uint64_t sum;
} ReadJob;

static inline void *read_job(void *arg) {
    ReadJob *j = arg;
    // Four independent sums so the loop is limited by loads, not by one
    // dependency chain; integer adds vectorise without reassociation worries.
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (int p = 0; p < j->passes; p++) {
        for (size_t i = 0; i + 4 <= j->n; i += 4) {
            a += j->data[i];
            b += j->data[i + 1];
            c += j->data[i + 2];
            d += j->data[i + 3];
        }
        __asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d));  // each pass reads again
    }
    j->sum = a ^ b ^ c ^ d;
    return NULL;
}

// GB/s reading n words of buf on `threads` threads (each its share, `passes`
// times over), best of `reps`.
static inline double read_bandwidth_passes(const uint64_t *buf, size_t n, int threads, int passes, int reps) {
    double best = 0;
    for (int rep = 0; rep < reps; rep++) {
        pthread_t tid[64];
        ReadJob jobs[64];
        double t0 = now_seconds();
        for (int i = 0; i < threads; i++) {
            jobs[i] = (ReadJob){buf + n / (size_t)threads * (size_t)i, n / (size_t)threads, passes, 0};
            pthread_create(&tid[i], NULL, read_job, &jobs[i]);
        }
        uint64_t sink = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            sink ^= jobs[i].sum;
        }
        double dt = now_seconds() - t0;
        if (sink == 42) printf(" ");  // keep the sums alive
        double gbs = (double)passes * (double)(n * sizeof *buf) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

static inline double read_bandwidth(const uint64_t *buf, size_t n, int threads, int reps) {
    return read_bandwidth_passes(buf, n, threads, 1, reps);
}

#endif

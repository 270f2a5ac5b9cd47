/*
 * bench_tokenizer.c - tokenizer speed: load time, encode MB/s on English-like
 * prose and on C source, decode MB/s, and the times of the three inputs that
 * are quadratic in naive BPE. Prints numbers only; asserts nothing on time.
 * Run from the repository root (reads models/ and src/).
 *
 * Times are this thread's CPU time (the machine may be shared with other
 * work, which would inflate wall-clock times), encode the best of 5 runs.
 * The piece cache makes verbatim repetition optimistic, so both inputs are
 * varied: the prose is generated from a seeded RNG (common words mixed with
 * made-up ones), and each copy of the source has some letters changed.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fileio.h"
#include "model/tokenizer.h"

#define TARGET_BYTES (4u << 20)

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 88172645463325252ULL;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        while (b->n + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 1 << 16;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            fprintf(stderr, "bench_tokenizer: out of memory\n");
            exit(1);
        }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }

static Buf make_prose(void) {
    static const char *const words[] = {
        "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
        "by", "on", "not", "he", "she", "this", "are", "or", "his", "from", "at", "which", "but",
        "have", "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her",
        "has", "there", "been", "if", "more", "when", "will", "would", "who", "so", "no", "time",
        "people", "water", "history", "village", "government", "question", "morning", "river",
        "remembered", "carefully", "understanding", "mountain", "letter", "beautiful", "children",
        "language", "however", "although", "important", "different", "between", "through",
        "without", "evening", "because", "thought", "country", "another", "nothing", "several",
        "whispered", "kitchen", "window", "garden", "station", "journey", "problem", "reason",
        "it's", "don't", "they're", "we'll", "I've", "couldn't", "Mrs.", "Dr.", "London", "Paris",
        "September", "Tuesday", "engineering", "mathematics", "unexpectedly", "neighbourhood"};
    static const char *const syl[] = {"ka", "lor", "en", "mi", "ta", "ver", "os", "qui", "bra",
                                      "nel", "st", "ou", "ph", "re", "dy", "x", "an", "tion"};
    static const char *const punct[] = {",", ",", ";", ":", " -", "", "", "", "", "", "", ""};
    Buf b = {0};
    int start = 1;
    while (b.n < TARGET_BYTES) {
        char w[64];
        uint32_t r = rng() % 100;
        if (r < 80) {
            snprintf(w, sizeof w, "%s", words[rng() % (sizeof words / sizeof *words)]);
        } else if (r < 95) {  // a made-up word
            w[0] = '\0';
            for (uint32_t k = 1 + rng() % 4; k; k--)
                strcat(w, syl[rng() % (sizeof syl / sizeof *syl)]);
        } else {
            snprintf(w, sizeof w, "%u", rng() % (r < 98 ? 100 : 100000));
        }
        if (start && w[0] >= 'a' && w[0] <= 'z') w[0] = (char)(w[0] - 'a' + 'A');
        if (!start) puts_(&b, " ");
        puts_(&b, w);
        start = 0;
        uint32_t e = rng() % 100;
        if (e < 7) {
            puts_(&b, e < 5 ? "." : e < 6 ? "?" : "!");
            start = 1;
            if (rng() % 6 == 0) puts_(&b, "\n\n");
        } else {
            puts_(&b, punct[rng() % (sizeof punct / sizeof *punct)]);
        }
    }
    return b;
}

static Buf make_code(void) {
    Buf src = {0};
    DIR *d = opendir("src");
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t n = strlen(e->d_name);
            if (n < 3 || (strcmp(e->d_name + n - 2, ".c") && strcmp(e->d_name + n - 2, ".h")))
                continue;
            char path[1024];
            snprintf(path, sizeof path, "src/%s", e->d_name);
            char *data;
            size_t len;
            GptError err;
            if (file_read_all(path, &data, &len, &err) == 0) {
                put(&src, data, len);
                free(data);
            }
        }
        closedir(d);
    }
    if (src.n == 0) puts_(&src, "int main(void) { return 0; }\n");
    // Copies with about one letter in 40 changed, so identifiers vary.
    Buf b = {0};
    while (b.n < TARGET_BYTES) {
        size_t start = b.n;
        put(&b, src.p, src.n);
        for (size_t i = start; i < b.n; i++)
            if (b.p[i] >= 'a' && b.p[i] <= 'z' && rng() % 40 == 0) b.p[i] = (char)('a' + rng() % 26);
    }
    free(src.p);
    return b;
}

static void bench_encode(Tokenizer *t, const char *name, const Buf *b) {
    int32_t *ids;
    size_t n;
    GptError err;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        if (tokenizer_encode(t, b->p, b->n, 0, &ids, &n, &err)) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
            exit(1);
        }
        double dt = now() - t0;
        if (dt < best) best = dt;
        if (rep < 4) free(ids);
    }
    printf("encode %-6s %8.2f MB  %8zu tokens  %7.1f MB/s  (%.2f bytes/token)\n", name,
           (double)b->n / 1e6, n, (double)b->n / 1e6 / best, (double)b->n / (double)n);
    char *out;
    size_t out_len;
    double t0 = now();
    tokenizer_decode(t, ids, n, &out, &out_len, &err);
    double dt = now() - t0;
    printf("decode %-6s %7.1f MB/s  round trip %s\n", name, (double)out_len / 1e6 / dt,
           out_len == b->n && memcmp(out, b->p, b->n) == 0 ? "ok" : "DIFFERS");
    free(out);
    free(ids);
}

int main(void) {
    GptError err;
    double t0 = now();
    Tokenizer *t = tokenizer_load("models", &err);
    if (!t) {
        fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
        return 1;
    }
    printf("load (vocab.json + merges.txt) %.1f ms\n", 1e3 * (now() - t0));

    Buf prose = make_prose(), code = make_code();
    bench_encode(t, "prose", &prose);
    bench_encode(t, "code", &code);
    free(prose.p);
    free(code.p);

    struct {
        const char *unit;
        size_t reps;
    } in[] = {{"a", 100000}, {" ", 100000}, {"ab", 50000}};
    for (size_t c = 0; c < 3; c++) {
        Buf b = {0};
        for (size_t i = 0; i < in[c].reps; i++) puts_(&b, in[c].unit);
        int32_t *ids;
        size_t n;
        t0 = now();
        if (tokenizer_encode(t, b.p, b.n, 0, &ids, &n, &err)) {
            fprintf(stderr, "bench_tokenizer: %s\n", err.msg);
            return 1;
        }
        printf("pathological \"%s\" x %zu: %.2f ms, %zu tokens\n", in[c].unit, in[c].reps,
               1e3 * (now() - t0), n);
        free(ids);
        free(b.p);
    }
    tokenizer_free(t);
    return 0;
}

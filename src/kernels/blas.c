/*
 * blas.c - the OpenBLAS backend (see blas.h).
 */
#include "kernels/blas.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "model/dtype.h"
#include "kernels/matmul.h"  // Product

// OpenBLAS's own calls (cblas.h declares them in OpenBLAS's copy)
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);
char *openblas_get_config(void);
// OpenBLAS's, exported but in no header: ends its threads (its fork handler
// calls it); a BLAS without it is used with its threads left asleep.
int blas_thread_shutdown_(void);

// OpenBLAS is opened at its first use (blas_load), not linked: loading it
// costs every run of gpt ~13 ms of CPU (its relocations and the threads its
// constructor starts), which only --blas needs. The table is written once,
// under pthread_once, and only read after: the process's one copy of the
// library, as the dynamic linker's own tables are.
static struct {
    __typeof__(cblas_sgemm) *sgemm;
    __typeof__(openblas_set_num_threads) *set_num_threads;
    __typeof__(openblas_get_corename) *get_corename;
    __typeof__(openblas_get_config) *get_config;
    __typeof__(blas_thread_shutdown_) *thread_shutdown;  // NULL where the library lacks it
    char error[256];
} lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

// The library's names, Debian's soname first.
static const char *const LIB_NAMES[] = {"libopenblas.so.0", "libopenblas.so"};

static void lib_open(void) {
    void *h = NULL;
    for (size_t i = 0; i < sizeof LIB_NAMES / sizeof *LIB_NAMES && !h; i++) h = dlopen(LIB_NAMES[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(lib.error, sizeof lib.error, "cannot load OpenBLAS (%s): %s", LIB_NAMES[0], why ? why : "not found");
        return;
    }
    // dlsym returns void *: POSIX guarantees it converts to a function pointer
    *(void **)&lib.set_num_threads = dlsym(h, "openblas_set_num_threads");
    *(void **)&lib.get_corename = dlsym(h, "openblas_get_corename");
    *(void **)&lib.get_config = dlsym(h, "openblas_get_config");
    *(void **)&lib.thread_shutdown = dlsym(h, "blas_thread_shutdown_");
    void *sgemm = dlsym(h, "cblas_sgemm");
    if (!sgemm || !lib.set_num_threads || !lib.get_corename || !lib.get_config) {
        snprintf(lib.error, sizeof lib.error, "%s lacks cblas_sgemm or openblas_set_num_threads", LIB_NAMES[0]);
        return;  // the handle stays open: nothing of it is used
    }
    // our pool's threads call it; its own threads, started by its
    // constructor, would only spin beside them
    lib.set_num_threads(1);
    if (lib.thread_shutdown) lib.thread_shutdown();
    *(void **)&lib.sgemm = sgemm;  // last: set means usable
}

int blas_load(GptError *err) {
    pthread_once(&lib_once, lib_open);
    return lib.sgemm ? 0 : gpt_error(err, "--blas: %s", lib.error);
}

const char *blas_describe(char *buf, size_t cap) {
    if (blas_load(NULL) != 0) snprintf(buf, cap, "OpenBLAS (not loaded: %s)", lib.error);
    else snprintf(buf, cap, "%s (core %s)", lib.get_config(), lib.get_corename());
    return buf;
}

// Outputs [n0, n1) of the product: W's rows n0..n1-1 are contiguous, and
// out's columns n0..n1-1 are a (T, n1-n0) block with rows N apart.
static void product_part(void *arg, int thread, int n_threads) {
    const Product *j = arg;
    size_t K = j->W->n_in, N = j->W->n_out, n0, n1;
    thread_range(N, 16, thread, n_threads, &n0, &n1);
    if (n0 >= n1) return;
    float *out = j->out + n0;
    // out(T, n1-n0) = inp(T,K) @ W[n0:n1](n1-n0, K)^T (+ out)
    lib.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->T, (int)(n1 - n0), (int)K, 1.0f, j->inp, (int)K,
                (const float *)j->W->data + n0 * K, (int)K, j->accumulate ? 1.0f : 0.0f, out, (int)N);
    if (j->bias)
        for (size_t t = 0; t < j->T; t++)
            for (size_t n = n0; n < n1; n++) j->out[t * N + n] += j->bias[n];
}

void blas_product(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate,
                  ThreadPool *pool) {
    Product job = {out, inp, W, bias, T, accumulate};
    threadpool_run(pool, product_part, &job);
}

int blas_matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate,
                ThreadPool *pool) {
    if (W->dtype != DTYPE_F32 || T < BLAS_MIN_ROWS) return 0;
    blas_product(out, inp, W, bias, T, accumulate, pool);
    return 1;
}

size_t blas_attention_floats(size_t n, size_t n_keys, size_t head_size, int n_threads) {
    return (n * n_keys + 2 * n_keys * head_size) * (size_t)(n_threads < 1 ? 1 : n_threads);
}

// Position u's key and value of (layer, head) from the cache, as float32.
static void gather(float *keys, float *values, const KVCache *c, size_t layer, size_t head, size_t n_keys) {
    size_t HS = c->head_size;
    for (size_t u = 0; u < n_keys; u++) {
        size_t b = u / KV_BLOCK, slot = u % KV_BLOCK;
        const void *kb = kvcache_block_keys(c, b, layer, head), *vb = kvcache_block_values(c, b, layer, head);
        for (size_t d = 0; d < HS; d++) {
            // keys (HS, 16) transposed, values (16, HS)
            if (c->dtype == DTYPE_F16) {
                keys[u * HS + d] = f16_to_f32(((const uint16_t *)kb)[d * KV_BLOCK + slot]);
                values[u * HS + d] = f16_to_f32(((const uint16_t *)vb)[slot * HS + d]);
            } else {
                keys[u * HS + d] = ((const float *)kb)[d * KV_BLOCK + slot];
                values[u * HS + d] = ((const float *)vb)[slot * HS + d];
            }
        }
    }
}

typedef struct {
    float *attn;
    const float *qkv;
    const KVCache *c;
    size_t layer, n, C;
    float scale;
    float *scratch;
} AttentionJob;

// The heads of thread `thread`'s share, in its own part of the scratch.
static void attention_part(void *arg, int thread, int n_threads) {
    const AttentionJob *j = arg;
    const KVCache *c = j->c;
    size_t HS = c->head_size, NH = c->n_head, P = c->n_tokens, n = j->n, C = j->C, Tk = P + n;
    float *S = j->scratch + (size_t)thread * blas_attention_floats(n, Tk, HS, 1);
    float *keys = S + n * Tk, *values = keys + Tk * HS;
    size_t h0, h1;
    thread_range(NH, 1, thread, n_threads, &h0, &h1);
    for (size_t h = h0; h < h1; h++) {
        gather(keys, values, c, j->layer, h, Tk);
        // S(n,Tk) = Q(n,HS) @ K(Tk,HS)^T * scale; Q's rows are 3C apart
        lib.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)Tk, (int)HS, j->scale, j->qkv + h * HS,
                    (int)(3 * C), keys, (int)HS, 0.0f, S, (int)Tk);
        for (size_t t = 0; t < n; t++) {
            float *row = S + t * Tk;
            size_t seen = P + t + 1;  // keys 0 .. P + t; the rest masked
            for (size_t u = seen; u < Tk; u++) row[u] = -INFINITY;
            // the softmax over the whole row: a masked key's exp(-inf) is exactly 0
            float max = row[0];
            for (size_t u = 1; u < Tk; u++) max = row[u] > max ? row[u] : max;
            float sum = 0.0f;
            for (size_t u = 0; u < Tk; u++) sum += row[u] = expf(row[u] - max);
            for (size_t u = 0; u < Tk; u++) row[u] /= sum;
        }
        // O(n,HS) = S(n,Tk) @ V(Tk,HS), into attn's rows (C apart)
        lib.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)HS, (int)Tk, 1.0f, S, (int)Tk, values,
                    (int)HS, 0.0f, j->attn + h * HS, (int)C);
    }
}

void blas_attention(float *attn, const float *qkv, const KVCache *c, size_t layer, size_t n, size_t C,
                    float scale, float *scratch, ThreadPool *pool) {
    AttentionJob job = {attn, qkv, c, layer, n, C, scale, scratch};
    threadpool_run(pool, attention_part, &job);
}

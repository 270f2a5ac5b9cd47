/*
 * blas.h - OpenBLAS as a backend for the prefill (gpt --blas): the float32
 * products of calls with many rows, and a long chunk's attention, through
 * cblas_sgemm, on our pool's threads: OpenBLAS runs single-threaded inside
 * each part (a product's columns, attention's heads, split as our kernels
 * split them), so no second set of threads spins or waits beside ours.
 *
 * This is the design's original path, kept as a real, tested option: an
 * independent check of our kernels (the reference tests pass through it
 * too) and a yardstick. It is outside the bitwise promise of matmul.h and
 * attention.h: OpenBLAS picks its kernels by CPU and blocks the product by
 * its row count, so a row's bits depend on the call it is in (measured: rows
 * 0..M-1 of one cblas_sgemm differ in the last bits from the same rows in a
 * bigger call). Decode steps (one row per sequence) and calls below
 * BLAS_MIN_ROWS rows never come here, so speculation's verify steps (at most
 * 33 rows) keep their bits and stay exact against a plain run that also
 * used --blas; what changes is the prefill's rounding.
 *
 *   attention per head, for the n queries of a chunk at positions P..P+n-1:
 *     S(n, P+n) = Q(n, HS) @ K(P+n, HS)^T / sqrt(HS)     one sgemm
 *     S[t][u] = -inf for u > P + t                        the causal mask, before the softmax
 *     S = softmax(S) by rows (a row always keeps u <= P + t: never all -inf)
 *     O(n, HS) = S(n, P+n) @ V(P+n, HS)                   one sgemm
 */
#ifndef GPT_BLAS_H
#define GPT_BLAS_H

#include <stddef.h>

#include "model/dtype.h"
#include "model/kvcache.h"
#include "base/error.h"
#include "base/threads.h"

// Calls with at least this many rows go to OpenBLAS (measured: below it our
// kernels are as fast or faster, and it keeps every verify step of
// speculative decoding, at most 33 rows, on our kernels).
enum { BLAS_MIN_ROWS = 64 };

// Opens OpenBLAS (libopenblas.so.0) the first time, on its own threads'
// behalf set to run each call on the thread that calls it (blas_matmul and
// blas_attention split the work over our pool instead; its own threads are
// ended). Thread-safe. 0, or -1 with err set ("--blas: cannot load
// OpenBLAS ..."). Every other function here needs it done first.
int blas_load(GptError *err);
// "OpenBLAS <version> (<core>)", for reports; buf of cap bytes.
const char *blas_describe(char *buf, size_t cap);

// out(T, N) = inp(T, K) @ W^T + bias (accumulate: out +=), through
// cblas_sgemm, when W is float32 and T >= BLAS_MIN_ROWS: returns 1. Else
// does nothing and returns 0 (the caller runs matmul()). Each thread of
// pool (NULL: the caller alone) takes a range of the N outputs.
int blas_matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate,
                ThreadPool *pool);

// The same product through OpenBLAS whatever T is (W float32): what
// blas_matmul runs, and what bench_blas times below the threshold.
void blas_product(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate,
                  ThreadPool *pool);

// Scratch floats blas_attention needs for n queries over n_keys keys, on
// n_threads threads (each its own).
size_t blas_attention_floats(size_t n, size_t n_keys, size_t head_size, int n_threads);
// One layer's attention for n new queries of one sequence (n >=
// BLAS_MIN_ROWS), every head: q(t) = qkv + t * 3C + h * HS, the keys and
// values from cache c (already holding positions 0 .. P + n - 1, P =
// c->n_tokens), out(t) = attn + t * C + h * HS. The heads are split over
// the threads of pool (NULL: one); scratch holds blas_attention_floats(n,
// P + n, HS, threadpool_size(pool)). scale multiplies q . k (attention.h).
void blas_attention(float *attn, const float *qkv, const KVCache *c, size_t layer, size_t n, size_t C,
                    float scale, float *scratch, ThreadPool *pool);

#endif

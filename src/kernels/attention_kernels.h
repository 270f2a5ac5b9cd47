/*
 * attention_kernels.h - the vector versions of attention_query (attention.h)
 * and what they share. Internal to the library (and its tests): forward.c
 * calls attention_query, which picks one of these (cpu.h says where the
 * versions of an operation live).
 *
 * Each does exactly attention_query_reference's operations (attention.c):
 * every lane of a vector is one of the reference's scalar chains, fused
 * multiply-adds where it uses fmaf, plain adds and multiplies where it uses
 * those, exp_approx's operations one by one (vecmath.h). They only
 * interleave chains that are independent (several key blocks at once, the 4
 * partial value sums). So every version gives the same bits.
 *
 * Prefetching: a block holds every layer and head, so the keys of one
 * (layer, head) lie in 4 KB runs (f32; 2 KB for f16) some 1.15 MB apart,
 * and the hardware prefetchers start cold at every run. The vector versions
 * ask for the next blocks' keys while they multiply these, and for the
 * values two blocks ahead. Decode reads the sequence's whole cache once per
 * token, so its bound is the cache's bytes / memory bandwidth (attention.c);
 * the prefetch is what brings a cache that is not in L3 near it (the
 * measurements: docs/performance.md).
 */
#ifndef GPT_ATTENTION_KERNELS_H
#define GPT_ATTENTION_KERNELS_H

#include <stddef.h>

#include "kernels/attention.h"
#include "model/kvcache.h"

// attention_query's contract, with a head size that is a multiple of 16 (at
// most 256), on a CPU that runs the ISA (attention_avx512.c,
// attention_avx2.c; x86-64 only).
void attention_query_avx512(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                            size_t n_keys, float scale, float *scores);
void attention_query_avx2(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                          size_t n_keys, float scale, float *scores);

// attention_queries' contract, the same way.
void attention_queries_avx512(float *out, size_t out_stride, const float *q, size_t q_stride, size_t nq,
                              const KVCache *c, size_t layer, size_t head, size_t n_keys, float scale, float *scores);
void attention_queries_avx2(float *out, size_t out_stride, const float *q, size_t q_stride, size_t nq,
                            const KVCache *c, size_t layer, size_t head, size_t n_keys, float scale, float *scores);

#if defined(__x86_64__)
#include <immintrin.h>

// Block b's keys of (layer, head), or NULL past the last block (what the
// next key blocks are, for prefetching).
static inline const char *keys_to_prefetch(const KVCache *c, size_t b, size_t n_blocks, size_t layer, size_t head) {
    return b < n_blocks ? (const char *)kvcache_block_keys(c, b, layer, head) : NULL;
}

// The cache line of keys that element d of a key block starts, once per
// line (a row of 16 keys is 64 bytes in f32, 32 in f16).
static inline void prefetch_key_row(const char *keys, size_t d, size_t elem_size) {
    size_t off = d * KV_BLOCK * elem_size;
    if (keys && off % 64 == 0) _mm_prefetch(keys + off, _MM_HINT_T1);
}

// Position t + 2 blocks' value row, when there is one. (Written so that
// gcc 12 keeps it: with an early return, or a loop over a row pointer,
// -O2 deleted the whole loop of prefetches.)
static inline void prefetch_value_row(const KVCache *c, size_t t, size_t n_keys, size_t layer, size_t head) {
    size_t row_bytes = c->head_size * kv_elem_size(c->dtype);
    if (t + 2 * KV_BLOCK < n_keys)
        for (size_t off = 0; off < row_bytes; off += 64)
            _mm_prefetch((const char *)kvcache_block_values(c, t / KV_BLOCK + 2, layer, head) +
                             (t % KV_BLOCK) * row_bytes + off,
                         _MM_HINT_T1);
}
#endif

#endif

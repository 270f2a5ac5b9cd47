/*
 * attention_avx2.c - attention_query in AVX2 with FMA and F16C
 * (attention_kernels.h): the AVX-512 version's arithmetic with a 16-lane
 * vector as two halves. Scores 2 key blocks at a time; the max in scalar
 * (exact in any order), the numerators and lane sums by 8s, the tail of
 * fewer than 16 keys lane by lane as the reference does it.
 */
#include "attention_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "cpu.h"
#include "vecmath.h"

// 8 keys (or values) of the cache at element i, as float32.
INLINE_AVX2 __m256 load_kv8(const void *base, size_t i, int half) {
    if (half) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    return _mm256_loadu_ps((const float *)base + i);
}

TARGET_AVX2 void attention_query_avx2(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                                     size_t n_keys, float *scores) {
    size_t HS = c->head_size, n_blocks = (n_keys + KV_BLOCK - 1) / KV_BLOCK;
    int half = c->dtype == DTYPE_F16;
    const __m256 scale = _mm256_set1_ps(1.0f / sqrtf((float)HS));
    size_t b = 0;
    for (; b + 2 <= n_blocks; b += 2) {
        const void *k0 = kvcache_block_keys(c, b, layer, head), *k1 = kvcache_block_keys(c, b + 1, layer, head);
        const char *next0 = keys_to_prefetch(c, b + 2, n_blocks, layer, head);
        const char *next1 = keys_to_prefetch(c, b + 3, n_blocks, layer, head);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t d = 0; d < HS; d++) {
            prefetch_key_row(next0, d, half ? 2 : 4);
            prefetch_key_row(next1, d, half ? 2 : 4);
            __m256 qd = _mm256_set1_ps(q[d]);
            a0 = _mm256_fmadd_ps(qd, load_kv8(k0, d * KV_BLOCK, half), a0);
            a1 = _mm256_fmadd_ps(qd, load_kv8(k0, d * KV_BLOCK + 8, half), a1);
            a2 = _mm256_fmadd_ps(qd, load_kv8(k1, d * KV_BLOCK, half), a2);
            a3 = _mm256_fmadd_ps(qd, load_kv8(k1, d * KV_BLOCK + 8, half), a3);
        }
        _mm256_storeu_ps(scores + b * KV_BLOCK, _mm256_mul_ps(a0, scale));
        _mm256_storeu_ps(scores + b * KV_BLOCK + 8, _mm256_mul_ps(a1, scale));
        _mm256_storeu_ps(scores + (b + 1) * KV_BLOCK, _mm256_mul_ps(a2, scale));
        _mm256_storeu_ps(scores + (b + 1) * KV_BLOCK + 8, _mm256_mul_ps(a3, scale));
    }
    for (; b < n_blocks; b++) {
        const void *k0 = kvcache_block_keys(c, b, layer, head);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (size_t d = 0; d < HS; d++) {
            __m256 qd = _mm256_set1_ps(q[d]);
            a0 = _mm256_fmadd_ps(qd, load_kv8(k0, d * KV_BLOCK, half), a0);
            a1 = _mm256_fmadd_ps(qd, load_kv8(k0, d * KV_BLOCK + 8, half), a1);
        }
        _mm256_storeu_ps(scores + b * KV_BLOCK, _mm256_mul_ps(a0, scale));
        _mm256_storeu_ps(scores + b * KV_BLOCK + 8, _mm256_mul_ps(a1, scale));
    }
    // softmax: the max is exact in any order; numerators and lane sums by 8s
    float max = -INFINITY;
    for (size_t t = 0; t < n_keys; t++) max = scores[t] > max ? scores[t] : max;
    __m256 maxv = _mm256_set1_ps(max), lo = _mm256_setzero_ps(), hi = lo;
    size_t full = n_keys / KV_BLOCK * KV_BLOCK;
    for (size_t t = 0; t < full; t += KV_BLOCK) {
        __m256 e0 = exp_approx_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + t), maxv));
        __m256 e1 = exp_approx_avx2(_mm256_sub_ps(_mm256_loadu_ps(scores + t + 8), maxv));
        _mm256_storeu_ps(scores + t, e0);
        _mm256_storeu_ps(scores + t + 8, e1);
        lo = _mm256_add_ps(lo, e0);
        hi = _mm256_add_ps(hi, e1);
    }
    float lane[KV_BLOCK];
    _mm256_storeu_ps(lane, lo);
    _mm256_storeu_ps(lane + 8, hi);
    for (size_t t = full; t < n_keys; t++) {  // the tail, lane by lane, as the reference
        scores[t] = exp_approx(scores[t] - max);
        lane[t % KV_BLOCK] = lane[t % KV_BLOCK] + scores[t];
    }
    const __m256 inv = _mm256_set1_ps(1.0f / lane16_sum(lane));
    enum { MAXV = 32 };
    __m256 o[4][MAXV];
    size_t nv = HS / 8;
    for (int r = 0; r < 4; r++)
        for (size_t v = 0; v < nv; v++) o[r][v] = _mm256_setzero_ps();
    for (size_t t = 0; t < n_keys; t++) {
        const void *vb = kvcache_block_values(c, t / KV_BLOCK, layer, head);
        size_t row = (t % KV_BLOCK) * HS;
        prefetch_value_row(c, t, n_keys, layer, head);
        __m256 e = _mm256_set1_ps(scores[t]);
        int r = (int)(t % 4);
        for (size_t v = 0; v < nv; v++) o[r][v] = _mm256_fmadd_ps(e, load_kv8(vb, row + 8 * v, half), o[r][v]);
    }
    for (size_t v = 0; v < nv; v++) {
        __m256 s = _mm256_add_ps(_mm256_add_ps(o[0][v], o[1][v]), _mm256_add_ps(o[2][v], o[3][v]));
        _mm256_storeu_ps(out + 8 * v, _mm256_mul_ps(s, inv));
    }
}

// One query at a time (the AVX-512 version blocks them).
TARGET_AVX2 void attention_queries_avx2(float *out, size_t out_stride, const float *q, size_t q_stride, size_t nq,
                                       const KVCache *c, size_t layer, size_t head, size_t n_keys, float *scores) {
    for (size_t i = 0; i < nq; i++)
        attention_query_avx2(out + i * out_stride, q + i * q_stride, c, layer, head, n_keys + i, scores);
}

#endif

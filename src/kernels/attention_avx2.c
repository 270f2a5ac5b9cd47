/*
 * attention_avx2.c - attention_query in AVX2 with FMA and F16C
 * (attention_kernels.h): the AVX-512 version's arithmetic with a 16-lane
 * vector as two halves. Scores 2 key blocks at a time; the max in scalar
 * (exact in any order), the numerators and lane sums by 8s, the tail of
 * fewer than 16 keys lane by lane as the reference does it.
 */
#include "kernels/attention_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu.h"
#include "kernels/vecmath.h"

// 8 keys (or values) of the cache at element i, as float32.
#define AI INLINE_AVX2

AI __m256 load_kv8(const void *base, size_t i, int half) {
    if (half) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    return _mm256_loadu_ps((const float *)base + i);
}

// The softmax numerators exp(s_t - max s) of n_keys scores, in place, and
// 1 / their sum: the max is exact in any order; numerators and lane sums by
// 8s, the tail of fewer than 16 lane by lane as the reference does it.
AI float softmax_numerators(float *scores, size_t n_keys) {
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
    return 1.0f / lane16_sum(lane);
}

TARGET_AVX2 void attention_query_avx2(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                                     size_t n_keys, float scale, float *scores) {
    size_t HS = c->head_size, n_blocks = (n_keys + KV_BLOCK - 1) / KV_BLOCK;
    int half = c->dtype == DTYPE_F16;
    const __m256 scale_v = _mm256_set1_ps(scale);
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
        _mm256_storeu_ps(scores + b * KV_BLOCK, _mm256_mul_ps(a0, scale_v));
        _mm256_storeu_ps(scores + b * KV_BLOCK + 8, _mm256_mul_ps(a1, scale_v));
        _mm256_storeu_ps(scores + (b + 1) * KV_BLOCK, _mm256_mul_ps(a2, scale_v));
        _mm256_storeu_ps(scores + (b + 1) * KV_BLOCK + 8, _mm256_mul_ps(a3, scale_v));
    }
    for (; b < n_blocks; b++) {
        const void *k0 = kvcache_block_keys(c, b, layer, head);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        for (size_t d = 0; d < HS; d++) {
            __m256 qd = _mm256_set1_ps(q[d]);
            a0 = _mm256_fmadd_ps(qd, load_kv8(k0, d * KV_BLOCK, half), a0);
            a1 = _mm256_fmadd_ps(qd, load_kv8(k0, d * KV_BLOCK + 8, half), a1);
        }
        _mm256_storeu_ps(scores + b * KV_BLOCK, _mm256_mul_ps(a0, scale_v));
        _mm256_storeu_ps(scores + b * KV_BLOCK + 8, _mm256_mul_ps(a1, scale_v));
    }
    const __m256 inv = _mm256_set1_ps(softmax_numerators(scores, n_keys));
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

// ---- a block of queries (attention_queries) ----------------------------------
//
// The AVX-512 version's scheme (attention_avx512.c) in 16 registers: scores
// as a tile of the queries x 1 key block (2 vectors each), the values in 4
// passes (one per partial sum) of the queries x 16 dimensions.

enum { QMAX = ATTENTION_QUERY_BLOCK };

AI void score_tile(int NQ, const float *q, size_t q_stride, const KVCache *c, size_t layer, size_t head, size_t b,
                   int half, float *scores, size_t ld, __m256 scale) {
    const size_t HS = c->head_size;
    const void *k = kvcache_block_keys(c, b, layer, head);
    __m256 acc[QMAX][2];
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (size_t d = 0; d < HS; d++) {
        const __m256 k0 = load_kv8(k, d * KV_BLOCK, half), k1 = load_kv8(k, d * KV_BLOCK + 8, half);
#pragma GCC unroll 8
        for (int i = 0; i < NQ; i++) {
            const __m256 qd = _mm256_set1_ps(q[(size_t)i * q_stride + d]);
            acc[i][0] = _mm256_fmadd_ps(qd, k0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(qd, k1, acc[i][1]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++) {
        _mm256_storeu_ps(scores + (size_t)i * ld + b * KV_BLOCK, _mm256_mul_ps(acc[i][0], scale));
        _mm256_storeu_ps(scores + (size_t)i * ld + b * KV_BLOCK + 8, _mm256_mul_ps(acc[i][1], scale));
    }
}

// Partial sum r (positions t = r mod 4, in turn) of the NQ queries over
// dimensions g .. g + 15, into part[i][0 .. 16); query i sees n0 + i keys.
AI void value_pass(int NQ, const KVCache *c, size_t layer, size_t head, int half, const float *scores, size_t ld,
                   size_t n0, size_t r, size_t g, float part[QMAX][16]) {
    const size_t HS = c->head_size;
    __m256 acc[QMAX][2];
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (size_t t = r; t < n0 + (size_t)NQ - 1; t += 4) {
        const void *vb = kvcache_block_values(c, t / KV_BLOCK, layer, head);
        const size_t row = (t % KV_BLOCK) * HS + g;
        const __m256 v0 = load_kv8(vb, row, half), v1 = load_kv8(vb, row + 8, half);
#pragma GCC unroll 8
        for (int i = 0; i < NQ; i++) {
            if (t >= n0 + (size_t)i) continue;  // a position only the later queries see
            const __m256 e = _mm256_set1_ps(scores[(size_t)i * ld + t]);
            acc[i][0] = _mm256_fmadd_ps(e, v0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(e, v1, acc[i][1]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++) {
        _mm256_storeu_ps(part[i], acc[i][0]);
        _mm256_storeu_ps(part[i] + 8, acc[i][1]);
    }
}

AI void queries(int NQ, int half, float *out, size_t out_stride, const float *q, size_t q_stride, const KVCache *c,
                size_t layer, size_t head, size_t n0, float scale, float *scores) {
    const size_t HS = c->head_size, n_max = n0 + (size_t)NQ - 1;
    const size_t n_blocks = (n_max + KV_BLOCK - 1) / KV_BLOCK, ld = n_blocks * KV_BLOCK;
    const __m256 scale_v = _mm256_set1_ps(scale);
    for (size_t b = 0; b < n_blocks; b++) score_tile(NQ, q, q_stride, c, layer, head, b, half, scores, ld, scale_v);
    __m256 inv[QMAX];
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++) inv[i] = _mm256_set1_ps(softmax_numerators(scores + (size_t)i * ld, n0 + (size_t)i));
    float part[4][QMAX][16];
    for (size_t g = 0; g < HS; g += 16) {
        for (size_t r = 0; r < 4; r++) value_pass(NQ, c, layer, head, half, scores, ld, n0, r, g, part[r]);
#pragma GCC unroll 8
        for (int i = 0; i < NQ; i++)
            for (size_t h = 0; h < 16; h += 8) {
                const __m256 s01 = _mm256_add_ps(_mm256_loadu_ps(part[0][i] + h), _mm256_loadu_ps(part[1][i] + h));
                const __m256 s23 = _mm256_add_ps(_mm256_loadu_ps(part[2][i] + h), _mm256_loadu_ps(part[3][i] + h));
                const __m256 s = _mm256_add_ps(s01, s23);  // (0 + 1) + (2 + 3)
                _mm256_storeu_ps(out + (size_t)i * out_stride + g + h, _mm256_mul_ps(s, inv[i]));
            }
    }
}

TARGET_AVX2 void attention_queries_avx2(float *out, size_t out_stride, const float *q, size_t q_stride, size_t nq,
                                       const KVCache *c, size_t layer, size_t head, size_t n_keys, float scale, float *scores) {
    const int half = c->dtype == DTYPE_F16;  // a constant in each instance
    switch (nq * 2 + (size_t)half) {
    case 8: queries(4, 0, out, out_stride, q, q_stride, c, layer, head, n_keys, scale, scores); break;
    case 9: queries(4, 1, out, out_stride, q, q_stride, c, layer, head, n_keys, scale, scores); break;
    case 6: queries(3, 0, out, out_stride, q, q_stride, c, layer, head, n_keys, scale, scores); break;
    case 7: queries(3, 1, out, out_stride, q, q_stride, c, layer, head, n_keys, scale, scores); break;
    case 4: queries(2, 0, out, out_stride, q, q_stride, c, layer, head, n_keys, scale, scores); break;
    case 5: queries(2, 1, out, out_stride, q, q_stride, c, layer, head, n_keys, scale, scores); break;
    default:  // one query, or a block wider than the 4 these tiles take: one at a time
        for (size_t i = 0; i < nq; i++)
            attention_query_avx2(out + i * out_stride, q + i * q_stride, c, layer, head, n_keys + i, scale, scores);
    }
}
#endif

/*
 * attention_avx512.c - attention_query in AVX-512 (attention_kernels.h): a
 * key block's 16 positions are one zmm, so every lane of a vector is one
 * position of the reference's loops over t. Scores 4 key blocks at a time
 * (4 independent chains over d); the sum of exponentials in one vector
 * (lane l: t = l, l + 16, ..., in turn), whose lanes are the reference's 16;
 * the values as 4 partial sums (t mod 4) of HS / 16 vectors each.
 */
#include "attention_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "cpu.h"
#include "vecmath.h"

// 16 keys (or values) of the cache at element i, as float32.
INLINE_AVX512 __m512 load_kv16(const void *base, size_t i, int half) {
    if (half) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
    return _mm512_loadu_ps((const float *)base + i);
}

TARGET_AVX512 void attention_query_avx512(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                                         size_t n_keys, float *scores) {
    size_t HS = c->head_size, n_blocks = (n_keys + KV_BLOCK - 1) / KV_BLOCK;
    int half = c->dtype == DTYPE_F16;
    const __m512 scale = _mm512_set1_ps(1.0f / sqrtf((float)HS));
    // scores, 4 blocks at a time (4 independent chains over d)
    size_t b = 0;
    for (; b + 4 <= n_blocks; b += 4) {
        const void *k0 = kvcache_block_keys(c, b, layer, head), *k1 = kvcache_block_keys(c, b + 1, layer, head);
        const void *k2 = kvcache_block_keys(c, b + 2, layer, head), *k3 = kvcache_block_keys(c, b + 3, layer, head);
        const char *next[4];
        for (size_t i = 0; i < 4; i++) next[i] = keys_to_prefetch(c, b + 4 + i, n_blocks, layer, head);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t d = 0; d < HS; d++) {
            for (int i = 0; i < 4; i++) prefetch_key_row(next[i], d, half ? 2 : 4);
            __m512 qd = _mm512_set1_ps(q[d]);
            a0 = _mm512_fmadd_ps(qd, load_kv16(k0, d * KV_BLOCK, half), a0);
            a1 = _mm512_fmadd_ps(qd, load_kv16(k1, d * KV_BLOCK, half), a1);
            a2 = _mm512_fmadd_ps(qd, load_kv16(k2, d * KV_BLOCK, half), a2);
            a3 = _mm512_fmadd_ps(qd, load_kv16(k3, d * KV_BLOCK, half), a3);
        }
        _mm512_storeu_ps(scores + b * KV_BLOCK, _mm512_mul_ps(a0, scale));
        _mm512_storeu_ps(scores + (b + 1) * KV_BLOCK, _mm512_mul_ps(a1, scale));
        _mm512_storeu_ps(scores + (b + 2) * KV_BLOCK, _mm512_mul_ps(a2, scale));
        _mm512_storeu_ps(scores + (b + 3) * KV_BLOCK, _mm512_mul_ps(a3, scale));
    }
    for (; b < n_blocks; b++) {
        const void *k0 = kvcache_block_keys(c, b, layer, head);
        __m512 a0 = _mm512_setzero_ps();
        for (size_t d = 0; d < HS; d++) a0 = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), load_kv16(k0, d * KV_BLOCK, half), a0);
        _mm512_storeu_ps(scores + b * KV_BLOCK, _mm512_mul_ps(a0, scale));
    }
    // softmax numerators and their sum (lane l: t = l, l + 16, ..., in turn)
    size_t full = n_keys / KV_BLOCK * KV_BLOCK;
    __mmask16 tail = (__mmask16)((1u << (n_keys - full)) - 1u);
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (size_t t = 0; t < full; t += KV_BLOCK) m = _mm512_max_ps(m, _mm512_loadu_ps(scores + t));
    if (tail) m = _mm512_mask_max_ps(m, tail, m, _mm512_maskz_loadu_ps(tail, scores + full));
    __m512 maxv = _mm512_set1_ps(_mm512_reduce_max_ps(m));
    __m512 sum = _mm512_setzero_ps();
    for (size_t t = 0; t < full; t += KV_BLOCK) {
        __m512 e = exp_approx_avx512(_mm512_sub_ps(_mm512_loadu_ps(scores + t), maxv));
        _mm512_storeu_ps(scores + t, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
        __m512 e = exp_approx_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, scores + full), maxv));
        _mm512_mask_storeu_ps(scores + full, tail, e);
        sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    float lane[KV_BLOCK];
    _mm512_storeu_ps(lane, sum);
    const __m512 inv = _mm512_set1_ps(1.0f / lane16_sum(lane));
    // values: 4 partial sums (t mod 4) of HS / 16 vectors each
    enum { MAXV = 16 };  // HS <= 256
    __m512 o[4][MAXV];
    size_t nv = HS / 16;
    for (int r = 0; r < 4; r++)
        for (size_t v = 0; v < nv; v++) o[r][v] = _mm512_setzero_ps();
    for (size_t t = 0; t < n_keys; t++) {
        const void *vb = kvcache_block_values(c, t / KV_BLOCK, layer, head);
        size_t row = (t % KV_BLOCK) * HS;
        prefetch_value_row(c, t, n_keys, layer, head);
        __m512 e = _mm512_set1_ps(scores[t]);
        int r = (int)(t % 4);
        for (size_t v = 0; v < nv; v++) o[r][v] = _mm512_fmadd_ps(e, load_kv16(vb, row + 16 * v, half), o[r][v]);
    }
    for (size_t v = 0; v < nv; v++) {
        __m512 s = _mm512_add_ps(_mm512_add_ps(o[0][v], o[1][v]), _mm512_add_ps(o[2][v], o[3][v]));
        _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(s, inv));
    }
}

#endif

/*
 * attention_avx512.c - attention_query in AVX-512 (attention_kernels.h): a
 * key block's 16 positions are one zmm, so every lane of a vector is one
 * position of the reference's loops over t. Scores 4 key blocks at a time
 * (4 independent chains over d); the sum of exponentials in one vector
 * (lane l: t = l, l + 16, ..., in turn), whose lanes are the reference's 16;
 * the values as 4 partial sums (t mod 4) of HS / 16 vectors each.
 *
 * attention_queries_avx512: a block of up to 4 queries (a prefill's
 * consecutive tokens) shares every load of keys and values. Scores as a
 * tile of queries x 4 key blocks; each query's softmax alone; the values in
 * 4 passes, one per partial sum r (positions t = r mod 4, in turn), each a
 * tile of queries x 4 vectors of dimensions, so the 4 sums never need
 * registers at once. The few positions only the block's later queries see
 * are added to those alone. Each query's operations are the single query's
 * (the same bits). One query at a time is bound by loading its keys and
 * values (one load per FMA); a block of 4 loads each once for 4 queries,
 * so a prefill's attention runs near the FMA rate instead (the
 * measurements: docs/performance.md).
 */
#include "kernels/attention_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu.h"
#include "kernels/vecmath.h"

// 16 keys (or values) of the cache at element i, as float32.
#define AI INLINE_AVX512

AI __m512 load_kv16(const void *base, size_t i, int half) {
    if (half) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
    return _mm512_loadu_ps((const float *)base + i);
}

// The softmax numerators exp(s_t - max s) of n_keys scores, in place, and
// 1 / their sum (lane l: t = l, l + 16, ..., in turn; then the fixed tree).
AI float softmax_numerators(float *scores, size_t n_keys) {
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
    return 1.0f / lane16_sum(lane);
}

TARGET_AVX512 void attention_query_avx512(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                                         size_t n_keys, float scale, float *scores) {
    size_t HS = c->head_size, n_blocks = (n_keys + KV_BLOCK - 1) / KV_BLOCK;
    int half = c->dtype == DTYPE_F16;
    const __m512 scale_v = _mm512_set1_ps(scale);
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
        _mm512_storeu_ps(scores + b * KV_BLOCK, _mm512_mul_ps(a0, scale_v));
        _mm512_storeu_ps(scores + (b + 1) * KV_BLOCK, _mm512_mul_ps(a1, scale_v));
        _mm512_storeu_ps(scores + (b + 2) * KV_BLOCK, _mm512_mul_ps(a2, scale_v));
        _mm512_storeu_ps(scores + (b + 3) * KV_BLOCK, _mm512_mul_ps(a3, scale_v));
    }
    for (; b < n_blocks; b++) {
        const void *k0 = kvcache_block_keys(c, b, layer, head);
        __m512 a0 = _mm512_setzero_ps();
        for (size_t d = 0; d < HS; d++) a0 = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), load_kv16(k0, d * KV_BLOCK, half), a0);
        _mm512_storeu_ps(scores + b * KV_BLOCK, _mm512_mul_ps(a0, scale_v));
    }
    const __m512 inv = _mm512_set1_ps(softmax_numerators(scores, n_keys));
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

// ---- a block of queries ------------------------------------------------------

enum { QMAX = 8, KB = 4 };  // ATTENTION_QUERY_BLOCK <= QMAX
_Static_assert((int)ATTENTION_QUERY_BLOCK <= (int)QMAX, "attention_queries_avx512 takes at most 8 queries");
// Tile widths by the number of queries (at most 28 accumulators): key
// blocks per score tile, vectors of dimensions per value pass.
#define SCORE_KB(NQ) ((NQ) <= 6 ? 4 : 3)
#define VALUE_NV(NQ) ((NQ) <= 6 ? 4 : 2)

// Scores of NQ queries (q + i q_stride) against the KBN key blocks from b:
// NQ x KBN accumulators, every key vector loaded once for the NQ queries.
// Each is the single-query loop's chain (q[d] k[d] over d in turn, then
// times scale).
AI void score_tile(int NQ, int KBN, const float *q, size_t q_stride, const KVCache *c, size_t layer, size_t head,
                   size_t b, size_t n_blocks, int half, float *scores, size_t ld, __m512 scale) {
    const size_t HS = c->head_size;
    const void *k[KB];
    const char *next[KB];
#pragma GCC unroll 4
    for (int j = 0; j < KBN; j++) {
        k[j] = kvcache_block_keys(c, b + (size_t)j, layer, head);
        next[j] = keys_to_prefetch(c, b + (size_t)KBN + (size_t)j, n_blocks, layer, head);
    }
    __m512 acc[QMAX][KB];
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++)
#pragma GCC unroll 4
        for (int j = 0; j < KBN; j++) acc[i][j] = _mm512_setzero_ps();
    for (size_t d = 0; d < HS; d++) {
        __m512 kv[KB];
#pragma GCC unroll 4
        for (int j = 0; j < KBN; j++) {
            prefetch_key_row(next[j], d, half ? 2 : 4);
            kv[j] = load_kv16(k[j], d * KV_BLOCK, half);
        }
#pragma GCC unroll 8
        for (int i = 0; i < NQ; i++) {
            const __m512 qd = _mm512_set1_ps(q[(size_t)i * q_stride + d]);
#pragma GCC unroll 4
            for (int j = 0; j < KBN; j++) acc[i][j] = _mm512_fmadd_ps(qd, kv[j], acc[i][j]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++)
#pragma GCC unroll 4
        for (int j = 0; j < KBN; j++)
            _mm512_storeu_ps(scores + (size_t)i * ld + (b + (size_t)j) * KV_BLOCK, _mm512_mul_ps(acc[i][j], scale));
}

// One pass of the value sums: partial sum r (the positions t = r mod 4, in
// turn) of NQ queries over the NV vectors of dimensions from g, into
// part[i][0 .. 16 NV). Query i has n0 + i keys: positions below n0 serve
// every query, the few after only those that see them.
// Position t's value row (dimensions g .. g + 16 NV at row of block vb)
// times each query's weight, into its accumulators.
AI void value_row(int NQ, int NV, __m512 acc[QMAX][4], const void *vb, size_t row, int half, const float *scores,
                  size_t ld, size_t t) {
    __m512 vv[4];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) vv[v] = load_kv16(vb, row + 16 * (size_t)v, half);
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++) {
        const __m512 e = _mm512_set1_ps(scores[(size_t)i * ld + t]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(e, vv[v], acc[i][v]);
    }
}

// One pass of the value sums: partial sum r (the positions t = r mod 4, in
// turn) of NQ queries over the NV vectors of dimensions from g, into
// part[i][0 .. 16 NV). Query i has n0 + i keys: positions below n0 serve
// every query, the few after only those that see them.
AI void value_pass(int NQ, int NV, const KVCache *c, size_t layer, size_t head, int half, const float *scores,
                   size_t ld, size_t n0, size_t r, size_t g, float part[QMAX][64]) {
    const size_t HS = c->head_size;
    __m512 acc[QMAX][4];
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();
    size_t t = r;
    // whole blocks: rows r, r + 4, r + 8, r + 12 of each
    for (size_t b = 0; (b + 1) * KV_BLOCK <= n0; b++, t += KV_BLOCK) {
        const void *vb = kvcache_block_values(c, b, layer, head);
#pragma GCC unroll 4
        for (size_t s = 0; s < KV_BLOCK; s += 4) value_row(NQ, NV, acc, vb, (r + s) * HS + g, half, scores, ld, t + s);
    }
    for (; t < n0; t += 4)
        value_row(NQ, NV, acc, kvcache_block_values(c, t / KV_BLOCK, layer, head), (t % KV_BLOCK) * HS + g, half,
                  scores, ld, t);
    for (; t < n0 + (size_t)NQ - 1; t += 4) {  // the positions only later queries see
        const void *vb = kvcache_block_values(c, t / KV_BLOCK, layer, head);
        const size_t row = (t % KV_BLOCK) * HS + g;
        __m512 vv[4];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) vv[v] = load_kv16(vb, row + 16 * (size_t)v, half);
#pragma GCC unroll 8
        for (int i = 0; i < NQ; i++) {
            if (t >= n0 + (size_t)i) continue;
            const __m512 e = _mm512_set1_ps(scores[(size_t)i * ld + t]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(e, vv[v], acc[i][v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(part[i] + 16 * v, acc[i][v]);
}

AI void queries(int NQ, int half, float *out, size_t out_stride, const float *q, size_t q_stride, const KVCache *c,
                size_t layer, size_t head, size_t n0, float scale, float *scores) {
    const size_t HS = c->head_size, n_max = n0 + (size_t)NQ - 1;
    const size_t n_blocks = (n_max + KV_BLOCK - 1) / KV_BLOCK, ld = n_blocks * KV_BLOCK;
    const __m512 scale_v = _mm512_set1_ps(scale);
    size_t b = 0;
    for (; b + SCORE_KB(NQ) <= n_blocks; b += SCORE_KB(NQ))
        score_tile(NQ, SCORE_KB(NQ), q, q_stride, c, layer, head, b, n_blocks, half, scores, ld, scale_v);
    switch (n_blocks - b) {
    case 3: score_tile(NQ, 3, q, q_stride, c, layer, head, b, n_blocks, half, scores, ld, scale_v); break;
    case 2: score_tile(NQ, 2, q, q_stride, c, layer, head, b, n_blocks, half, scores, ld, scale_v); break;
    case 1: score_tile(NQ, 1, q, q_stride, c, layer, head, b, n_blocks, half, scores, ld, scale_v); break;
    default: break;
    }
    __m512 inv[QMAX];
#pragma GCC unroll 8
    for (int i = 0; i < NQ; i++) inv[i] = _mm512_set1_ps(softmax_numerators(scores + (size_t)i * ld, n0 + (size_t)i));
    float part[4][QMAX][64] __attribute__((aligned(64)));
    for (size_t g = 0; g < HS; g += 16 * VALUE_NV(NQ)) {
        const int nv = HS - g >= 16 * VALUE_NV(NQ) ? VALUE_NV(NQ) : (int)((HS - g) / 16);
        for (size_t r = 0; r < 4; r++) switch (nv) {
            case 4: value_pass(NQ, 4, c, layer, head, half, scores, ld, n0, r, g, part[r]); break;
            case 3: value_pass(NQ, 3, c, layer, head, half, scores, ld, n0, r, g, part[r]); break;
            case 2: value_pass(NQ, 2, c, layer, head, half, scores, ld, n0, r, g, part[r]); break;
            default: value_pass(NQ, 1, c, layer, head, half, scores, ld, n0, r, g, part[r]); break;
            }
#pragma GCC unroll 8
        for (int i = 0; i < NQ; i++)
            for (int v = 0; v < nv; v++) {
                const __m512 s01 = _mm512_add_ps(_mm512_load_ps(part[0][i] + 16 * v), _mm512_load_ps(part[1][i] + 16 * v));
                const __m512 s23 = _mm512_add_ps(_mm512_load_ps(part[2][i] + 16 * v), _mm512_load_ps(part[3][i] + 16 * v));
                const __m512 s = _mm512_add_ps(s01, s23);  // (0 + 1) + (2 + 3)
                _mm512_storeu_ps(out + (size_t)i * out_stride + g + 16 * (size_t)v, _mm512_mul_ps(s, inv[i]));
            }
    }
}

TARGET_AVX512 void attention_queries_avx512(float *out, size_t out_stride, const float *q, size_t q_stride, size_t nq,
                                           const KVCache *c, size_t layer, size_t head, size_t n_keys, float scale, float *scores) {
    const int half = c->dtype == DTYPE_F16;  // a constant in each instance: no test in the loops
#define QUERIES(NQ, HALF) queries(NQ, HALF, out, out_stride, q, q_stride, c, layer, head, n_keys, scale, scores)
    switch (nq * 2 + (size_t)half) {
    case 16: if (ATTENTION_QUERY_BLOCK >= 8) QUERIES(8, 0); break;
    case 17: if (ATTENTION_QUERY_BLOCK >= 8) QUERIES(8, 1); break;
    case 14: if (ATTENTION_QUERY_BLOCK >= 7) QUERIES(7, 0); break;
    case 15: if (ATTENTION_QUERY_BLOCK >= 7) QUERIES(7, 1); break;
    case 12: if (ATTENTION_QUERY_BLOCK >= 6) QUERIES(6, 0); break;
    case 13: if (ATTENTION_QUERY_BLOCK >= 6) QUERIES(6, 1); break;
    case 10: if (ATTENTION_QUERY_BLOCK >= 5) QUERIES(5, 0); break;
    case 11: if (ATTENTION_QUERY_BLOCK >= 5) QUERIES(5, 1); break;
    case 8: if (ATTENTION_QUERY_BLOCK >= 4) QUERIES(4, 0); break;
    case 9: if (ATTENTION_QUERY_BLOCK >= 4) QUERIES(4, 1); break;
    case 6: if (ATTENTION_QUERY_BLOCK >= 3) QUERIES(3, 0); break;
    case 7: if (ATTENTION_QUERY_BLOCK >= 3) QUERIES(3, 1); break;
    case 4: if (ATTENTION_QUERY_BLOCK >= 2) QUERIES(2, 0); break;
    case 5: if (ATTENTION_QUERY_BLOCK >= 2) QUERIES(2, 1); break;
    default:  // one query (or, against the contract, more than the tiles take): one at a time
        for (size_t i = 0; i < nq; i++)
            attention_query_avx512(out + i * out_stride, q + i * q_stride, c, layer, head, n_keys + i, scale, scores);
    }
#undef QUERIES
}

#endif

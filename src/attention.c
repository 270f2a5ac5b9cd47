/*
 * attention.c - see attention.h.
 *
 * attention_query_reference is the definition, written plainly. The fast
 * versions (AVX-512, AVX2 with F16C and FMA, each function compiled for its
 * ISA with a target attribute and chosen at run time like matmul's kernels)
 * do exactly its operations: every lane of a vector is one of the
 * reference's scalar chains, fused multiply-adds where it uses fmaf, plain
 * adds and multiplies where it uses those, exp_approx's operations one by
 * one. They only interleave chains that are independent (4 key blocks at
 * once, the 4 partial value sums). So every version gives the same bits.
 *
 * Napkin math: a decode step reads, per layer and head, the n keys and
 * values of its sequence: 2 x n x HS elements; 66 MB per token for GPT-2
 * 124M at 900 positions in float32, 33 MB in float16. A prefill of T tokens
 * does T^2/2 x HS x 2 multiply-adds per head and layer: 2.4 GFLOP for 512
 * tokens of GPT-2 124M, 3% of the matmuls' 87.
 *
 * Prefetching: a block holds every layer and head, so the keys of one
 * (layer, head) lie in 4 KB runs (f32; 2 KB for f16) some 1.15 MB apart,
 * and the hardware prefetchers start cold at every run. The vector versions
 * ask for the next blocks' keys while they multiply these, and for the
 * values two blocks ahead. Decode at 900 positions, all 144 heads, cache
 * not in L3 (Zen 4, 1 thread): f32 16 -> 25 GB/s, f16 15-18 -> 25 GB/s.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "forward.h"  // exp_approx

// 16 lanes added up as a fixed tree: (0..7)+(8..15), then halves again.
static float lane_sum(float *lane) {
    for (int i = 0; i < 8; i++) lane[i] = lane[i] + lane[i + 8];
    for (int i = 0; i < 4; i++) lane[i] = lane[i] + lane[i + 4];
    for (int i = 0; i < 2; i++) lane[i] = lane[i] + lane[i + 2];
    return lane[0] + lane[1];
}

// One element of the cache.
static float kv_at(const KVCache *c, const void *base, size_t i) {
    return c->dtype == DTYPE_F16 ? f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

void attention_query_reference(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                               size_t n_keys, float *scores) {
    size_t HS = c->head_size;
    const float scale = 1.0f / sqrtf((float)HS);  // 1/sqrt(d_head), not 1/sqrt(C)
    // scores: q . k_t, d in turn, then scaled
    for (size_t t = 0; t < n_keys; t++) {
        const void *kb = kvcache_block_keys(c, t / KV_BLOCK, layer, head);
        float s = 0.0f;
        for (size_t d = 0; d < HS; d++) s = fmaf(q[d], kv_at(c, kb, d * KV_BLOCK + t % KV_BLOCK), s);
        scores[t] = s * scale;
    }
    // softmax numerators, their sum in 16 lanes (t mod 16), a fixed tree
    float max = -INFINITY;
    for (size_t t = 0; t < n_keys; t++) max = scores[t] > max ? scores[t] : max;
    float lane[KV_BLOCK] = {0};
    for (size_t t = 0; t < n_keys; t++) {
        scores[t] = exp_approx(scores[t] - max);
        lane[t % KV_BLOCK] = lane[t % KV_BLOCK] + scores[t];
    }
    float inv = 1.0f / lane_sum(lane);
    // values: four partial sums by t mod 4, (0 + 1) + (2 + 3), times 1/sum
    for (size_t d = 0; d < HS; d++) {
        float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (size_t t = 0; t < n_keys; t++) {
            const void *vb = kvcache_block_values(c, t / KV_BLOCK, layer, head);
            o[t % 4] = fmaf(scores[t], kv_at(c, vb, (t % KV_BLOCK) * HS + d), o[t % 4]);
        }
        out[d] = ((o[0] + o[1]) + (o[2] + o[3])) * inv;
    }
}

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

// ---------------------------------------------------------------------------
// AVX-512: a key block's 16 positions are one zmm

#define TGT512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

// 16 keys (or values) of the cache at element i, as float32.
static inline __attribute__((always_inline)) TGT512 __m512 load16_512(const void *base, size_t i, int half) {
    if (half) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
    return _mm512_loadu_ps((const float *)base + i);
}

// exp_approx on 16 lanes, its operations one by one.
static inline __attribute__((always_inline)) TGT512 __m512 exp16_512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));  // x < -87 ? -87 : x (x is never NaN here)
    x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
    __m512 n = _mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _mm512_set1_ps(0.5f));
    n = _mm512_roundscale_ps(n, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693359375f)));
    r = _mm512_add_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(2.12194440e-4f)));
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(p, r), r), r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

TGT512 static void attention_avx512(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
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
            a0 = _mm512_fmadd_ps(qd, load16_512(k0, d * KV_BLOCK, half), a0);
            a1 = _mm512_fmadd_ps(qd, load16_512(k1, d * KV_BLOCK, half), a1);
            a2 = _mm512_fmadd_ps(qd, load16_512(k2, d * KV_BLOCK, half), a2);
            a3 = _mm512_fmadd_ps(qd, load16_512(k3, d * KV_BLOCK, half), a3);
        }
        _mm512_storeu_ps(scores + b * KV_BLOCK, _mm512_mul_ps(a0, scale));
        _mm512_storeu_ps(scores + (b + 1) * KV_BLOCK, _mm512_mul_ps(a1, scale));
        _mm512_storeu_ps(scores + (b + 2) * KV_BLOCK, _mm512_mul_ps(a2, scale));
        _mm512_storeu_ps(scores + (b + 3) * KV_BLOCK, _mm512_mul_ps(a3, scale));
    }
    for (; b < n_blocks; b++) {
        const void *k0 = kvcache_block_keys(c, b, layer, head);
        __m512 a0 = _mm512_setzero_ps();
        for (size_t d = 0; d < HS; d++) a0 = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), load16_512(k0, d * KV_BLOCK, half), a0);
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
        __m512 e = exp16_512(_mm512_sub_ps(_mm512_loadu_ps(scores + t), maxv));
        _mm512_storeu_ps(scores + t, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (tail) {
        __m512 e = exp16_512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, scores + full), maxv));
        _mm512_mask_storeu_ps(scores + full, tail, e);
        sum = _mm512_mask_add_ps(sum, tail, sum, e);
    }
    float lane[KV_BLOCK];
    _mm512_storeu_ps(lane, sum);
    const __m512 inv = _mm512_set1_ps(1.0f / lane_sum(lane));
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
        for (size_t v = 0; v < nv; v++) o[r][v] = _mm512_fmadd_ps(e, load16_512(vb, row + 16 * v, half), o[r][v]);
    }
    for (size_t v = 0; v < nv; v++) {
        __m512 s = _mm512_add_ps(_mm512_add_ps(o[0][v], o[1][v]), _mm512_add_ps(o[2][v], o[3][v]));
        _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(s, inv));
    }
}

// ---------------------------------------------------------------------------
// AVX2: the same, a 16-lane vector as two halves

#define TGT2 __attribute__((target("avx2,fma,f16c")))

static inline __attribute__((always_inline)) TGT2 __m256 load8_2(const void *base, size_t i, int half) {
    if (half) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    return _mm256_loadu_ps((const float *)base + i);
}

static inline __attribute__((always_inline)) TGT2 __m256 exp8_2(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    __m256 n = _mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _mm256_set1_ps(0.5f));
    n = _mm256_floor_ps(n);
    __m256 r = _mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(0.693359375f)));
    r = _mm256_add_ps(r, _mm256_mul_ps(n, _mm256_set1_ps(2.12194440e-4f)));
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_add_ps(_mm256_mul_ps(p, r), _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(p, r), r), r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

TGT2 static void attention_avx2(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
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
            a0 = _mm256_fmadd_ps(qd, load8_2(k0, d * KV_BLOCK, half), a0);
            a1 = _mm256_fmadd_ps(qd, load8_2(k0, d * KV_BLOCK + 8, half), a1);
            a2 = _mm256_fmadd_ps(qd, load8_2(k1, d * KV_BLOCK, half), a2);
            a3 = _mm256_fmadd_ps(qd, load8_2(k1, d * KV_BLOCK + 8, half), a3);
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
            a0 = _mm256_fmadd_ps(qd, load8_2(k0, d * KV_BLOCK, half), a0);
            a1 = _mm256_fmadd_ps(qd, load8_2(k0, d * KV_BLOCK + 8, half), a1);
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
        __m256 e0 = exp8_2(_mm256_sub_ps(_mm256_loadu_ps(scores + t), maxv));
        __m256 e1 = exp8_2(_mm256_sub_ps(_mm256_loadu_ps(scores + t + 8), maxv));
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
    const __m256 inv = _mm256_set1_ps(1.0f / lane_sum(lane));
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
        for (size_t v = 0; v < nv; v++) o[r][v] = _mm256_fmadd_ps(e, load8_2(vb, row + 8 * v, half), o[r][v]);
    }
    for (size_t v = 0; v < nv; v++) {
        __m256 s = _mm256_add_ps(_mm256_add_ps(o[0][v], o[1][v]), _mm256_add_ps(o[2][v], o[3][v]));
        _mm256_storeu_ps(out + 8 * v, _mm256_mul_ps(s, inv));
    }
}
#endif

void attention_query(MatmulIsa isa, float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                     size_t n_keys, float *scores) {
#if defined(__x86_64__)
    // the vector versions need HS to be a multiple of 16 (GPT-2's is 64)
    if (c->head_size % 16 == 0) {
        if (isa == MATMUL_AVX512) return attention_avx512(out, q, c, layer, head, n_keys, scores);
        if (isa == MATMUL_AVX2) return attention_avx2(out, q, c, layer, head, n_keys, scores);
    }
#endif
    (void)isa;
    attention_query_reference(out, q, c, layer, head, n_keys, scores);
}

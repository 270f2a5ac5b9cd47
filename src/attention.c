/*
 * attention.c - see attention.h.
 *
 * The loops are plain C over 16 lanes with fmaf, compiled three times
 * (target_clones: AVX-512, AVX2+FMA, and baseline x86-64, chosen when the
 * program starts). fmaf is exact on every one of them (one rounding), and
 * nothing else is fused or reordered (-ffp-contract=off, no -ffast-math),
 * so all three give the same bits as attention_query_reference.
 *
 * Napkin math: a decode step reads, per layer and head, the n keys and
 * values of its sequence: 2 x n x HS elements; 66 MB per token for GPT-2
 * 124M at 900 positions in float32, 33 MB in float16.
 */
#include "attention.h"

#include <math.h>
#include <string.h>

#include "forward.h"  // exp_approx

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SIMD_CLONES
#endif

// Element i of a key or value array of the cache's dtype. With F16C the
// compiler turns the _Float16 conversion into one instruction; elsewhere
// f16_to_f32 does it by hand (the same value: the widening is exact).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__)
#define HALF_TO_FLOAT(p, i) ((float)((const _Float16 *)(p))[i])
#else
#define HALF_TO_FLOAT(p, i) f16_to_f32(((const uint16_t *)(p))[i])
#endif

// 16 lanes added up as a fixed tree: (0..7)+(8..15), then halves again.
static inline float lane_sum(float *lane) {
    for (int i = 0; i < 8; i++) lane[i] = lane[i] + lane[i + 8];
    for (int i = 0; i < 4; i++) lane[i] = lane[i] + lane[i + 4];
    for (int i = 0; i < 2; i++) lane[i] = lane[i] + lane[i + 2];
    return lane[0] + lane[1];
}

// Scores of the 16 positions of one key block: s[l] = sum_d q[d] k[d][l].
#define BLOCK_SCORES(ELEM)                                                                \
    do {                                                                                  \
        for (int l = 0; l < KV_BLOCK; l++) acc[l] = 0.0f;                                 \
        for (size_t d = 0; d < HS; d++)                                                   \
            for (int l = 0; l < KV_BLOCK; l++) acc[l] = fmaf(q[d], ELEM(kb, d * KV_BLOCK + l), acc[l]); \
    } while (0)
#define F32_AT(p, i) (((const float *)(p))[i])

// The softmax weights' numerators and their sum, in place over scores.
static inline float softmax_numerators(float *scores, size_t n) {
    float max = -INFINITY;
    for (size_t t = 0; t < n; t++) max = scores[t] > max ? scores[t] : max;
    for (size_t t = 0; t < n; t++) scores[t] = exp_approx(scores[t] - max);
    float lane[KV_BLOCK] = {0};
    for (size_t t = 0; t < n; t++) lane[t % KV_BLOCK] += scores[t];
    return lane_sum(lane);
}

SIMD_CLONES
void attention_query(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                     size_t n_keys, float *scores) {
    size_t HS = c->head_size, n_blocks = (n_keys + KV_BLOCK - 1) / KV_BLOCK;
    const float scale = 1.0f / sqrtf((float)HS);  // 1/sqrt(d_head), not 1/sqrt(C)
    float acc[KV_BLOCK];
    for (size_t b = 0; b < n_blocks; b++) {
        const void *kb = kvcache_block_keys(c, b, layer, head);
        if (c->dtype == DTYPE_F16) BLOCK_SCORES(HALF_TO_FLOAT);
        else BLOCK_SCORES(F32_AT);
        for (int l = 0; l < KV_BLOCK; l++) scores[b * KV_BLOCK + l] = acc[l] * scale;
    }
    float inv = 1.0f / softmax_numerators(scores, n_keys);
    // out = sum_t e_t v_t, t in order, then one scaling
    float o[256];  // HS <= 256 (checked by forward_state_init)
    for (size_t d = 0; d < HS; d++) o[d] = 0.0f;
    for (size_t t = 0; t < n_keys; t++) {
        const void *vb = kvcache_block_values(c, t / KV_BLOCK, layer, head);
        size_t row = (t % KV_BLOCK) * HS;
        float e = scores[t];
        if (c->dtype == DTYPE_F16)
            for (size_t d = 0; d < HS; d++) o[d] = fmaf(e, HALF_TO_FLOAT(vb, row + d), o[d]);
        else
            for (size_t d = 0; d < HS; d++) o[d] = fmaf(e, F32_AT(vb, row + d), o[d]);
    }
    for (size_t d = 0; d < HS; d++) out[d] = o[d] * inv;
}

// One element of the cache, plainly.
static float kv_at(const KVCache *c, const void *base, size_t i) {
    return c->dtype == DTYPE_F16 ? f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

void attention_query_reference(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                               size_t n_keys, float *scores) {
    size_t HS = c->head_size;
    const float scale = 1.0f / sqrtf((float)HS);
    for (size_t t = 0; t < n_keys; t++) {
        const void *kb = kvcache_block_keys(c, t / KV_BLOCK, layer, head);
        float s = 0.0f;
        for (size_t d = 0; d < HS; d++) s = fmaf(q[d], kv_at(c, kb, d * KV_BLOCK + t % KV_BLOCK), s);
        scores[t] = s * scale;
    }
    float max = -INFINITY;
    for (size_t t = 0; t < n_keys; t++) max = fmaxf(max, scores[t]);
    float lane[KV_BLOCK] = {0};
    for (size_t t = 0; t < n_keys; t++) {
        scores[t] = exp_approx(scores[t] - max);
        lane[t % KV_BLOCK] += scores[t];
    }
    float inv = 1.0f / lane_sum(lane);
    for (size_t d = 0; d < HS; d++) {
        float o = 0.0f;
        for (size_t t = 0; t < n_keys; t++) {
            const void *vb = kvcache_block_values(c, t / KV_BLOCK, layer, head);
            o = fmaf(scores[t], kv_at(c, vb, (t % KV_BLOCK) * HS + d), o);
        }
        out[d] = o * inv;
    }
}

/*
 * attention.c - see attention.h.
 *
 * attention_query_reference is the definition, written plainly. The fast
 * versions, AVX-512 and AVX2 with F16C and FMA, each in its own file
 * (attention_kernels.h; cpu.h says where the versions of an operation
 * live), do exactly its operations and give the same bits; attention_query
 * picks one.
 *
 * Napkin math: a decode step reads, per layer and head, the n keys and
 * values of its sequence: 2 x n x HS elements; 66 MB per token for GPT-2
 * 124M at 900 positions in float32, 33 MB in float16. A prefill of T tokens
 * does T^2/2 x HS x 2 multiply-adds per head and layer: 2.4 GFLOP for 512
 * tokens of GPT-2 124M, 3% of the matmuls' 87.
 */
#include "kernels/attention.h"

#include <math.h>
#include <string.h>

#include "kernels/attention_kernels.h"
#include "kernels/vecmath.h"

// One element of the cache.
static float kv_at(const KVCache *c, const void *base, size_t i) {
    return c->dtype == DTYPE_F16 ? f16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

void attention_query_reference(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                               size_t n_keys, float scale, float *scores) {
    size_t HS = c->head_size;
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
    float inv = 1.0f / lane16_sum(lane);
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

void attention_query(CpuIsa isa, float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                     size_t n_keys, float scale, float *scores) {
#if defined(__x86_64__)
    // the vector versions need HS to be a multiple of 16 (GPT-2's is 64)
    if (c->head_size % 16 == 0) {
        if (isa == CPU_AVX512) return attention_query_avx512(out, q, c, layer, head, n_keys, scale, scores);
        if (isa == CPU_AVX2) return attention_query_avx2(out, q, c, layer, head, n_keys, scale, scores);
    }
#endif
    (void)isa;
    attention_query_reference(out, q, c, layer, head, n_keys, scale, scores);
}

void attention_queries(CpuIsa isa, float *out, size_t out_stride, const float *q, size_t q_stride, size_t nq,
                       const KVCache *c, size_t layer, size_t head, size_t n_keys, float scale, float *scores) {
#if defined(__x86_64__)
    if (c->head_size % 16 == 0) {
        if (isa == CPU_AVX512)
            return attention_queries_avx512(out, out_stride, q, q_stride, nq, c, layer, head, n_keys, scale, scores);
        if (isa == CPU_AVX2)
            return attention_queries_avx2(out, out_stride, q, q_stride, nq, c, layer, head, n_keys, scale, scores);
    }
#endif
    (void)isa;
    for (size_t i = 0; i < nq; i++)
        attention_query_reference(out + i * out_stride, q + i * q_stride, c, layer, head, n_keys + i, scale, scores);
}

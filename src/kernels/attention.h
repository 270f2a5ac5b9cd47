/*
 * attention.h - causal self-attention of one head for one query over a
 * sequence's KV cache, in one fixed order of operations.
 *
 * For the query q at position p of a sequence, with the keys and values of
 * positions 0..p in its cache (kvcache.h):
 *
 *   s_t  = (q . k_t) * scale              t = 0..p   (later keys are never read:
 *   w_t  = exp(s_t - max s) / sum exp              the causal mask is the loop's end)
 *   out  = sum_t w_t v_t
 *
 * Every sum is taken in an order fixed by the query and the cache alone:
 *   q . k_t       d = 0..HS-1 in turn, one fused multiply-add each
 *   max           exact in any order
 *   sum exp       16 lanes (t mod 16), added up as a fixed tree
 *   sum w_t v_t   per output dimension, four partial sums (t mod 4), each
 *                 over its t in turn, added as (0 + 1) + (2 + 3), then
 *                 times 1/sum
 * so a query's result is the same bits whether it is computed in a prefill
 * of 500 tokens, in a decode step, alone or beside other sequences: what
 * batching and prefix sharing rely on.
 */
#ifndef GPT_ATTENTION_H
#define GPT_ATTENTION_H

#include <stddef.h>

#include "kernels/cpu.h"
#include "model/kvcache.h"

// scale is what the model multiplies q . k by: 1/sqrt(HS) for GPT-2
// (gpt2_attn_scale, model.h, for the configurations that differ).
//
// out (HS) = attention of q (HS) over positions [0, n_keys) of cache c,
// layer and head given, with isa's vector code (cpu.h; one the CPU
// supports; a head size not a multiple of 16 runs the reference). scores:
// scratch of round_up(n_keys, 16) floats.
void attention_query(CpuIsa isa, float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                     size_t n_keys, float scale, float *scores);

// Queries that share keys: the most attention_queries takes at once.
enum { ATTENTION_QUERY_BLOCK = 4 };

// attention_query for nq (1..ATTENTION_QUERY_BLOCK) consecutive queries of
// one sequence and head: out_i (HS, at out + i out_stride) = attention of
// q_i (at q + i q_stride) over positions [0, n_keys + i), i < nq. The same
// bits as nq calls of attention_query (each query's order of operations is
// the one above); the block loads each key and value once for all its
// queries (a prefill's chunk). scores: scratch of nq x round_up(n_keys + nq
// - 1, 16) floats.
void attention_queries(CpuIsa isa, float *out, size_t out_stride, const float *q, size_t q_stride, size_t nq,
                       const KVCache *c, size_t layer, size_t head, size_t n_keys, float scale, float *scores);

// The same, written plainly: the definition, which every vector version
// (attention_kernels.h) matches bit for bit.
void attention_query_reference(float *out, const float *q, const KVCache *c, size_t layer, size_t head,
                               size_t n_keys, float scale, float *scores);

#endif

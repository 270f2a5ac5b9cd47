/*
 * forward.h - the GPT-2 transformer: from token ids to logits.
 *
 * One call runs a batch of sequences, each with its own KV cache and its own
 * number of new tokens: a prompt being prefilled (many tokens) and sequences
 * being decoded (one token each) can share a call. The new tokens of every
 * sequence are stacked into one (T, C) activation so that every weight matrix
 * is read once per call, by one matmul; only attention runs per sequence.
 *
 * Every row is computed by the same operations in the same order whatever
 * else is in the call (matmul.h, attention.h): a sequence's logits are the
 * same bits alone or in a batch, prefilled in one piece or in chunks.
 *
 * Logits are computed only for the positions that ask for them: the last new
 * token of a sequence (generation) or all of them (scoring).
 */
#ifndef GPT_FORWARD_H
#define GPT_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/activation.h"
#include "kernels/cpu.h"
#include "base/error.h"
#include "model/kvcache.h"
#include "kernels/matmul.h"
#include "model/lora.h"
#include "model/model.h"
#include "base/threads.h"

typedef enum { LOGITS_NONE, LOGITS_LAST, LOGITS_ALL } LogitsWanted;

typedef struct {
    const int32_t *tokens;  // (n_tokens) new tokens, at positions cache->n_tokens...
    size_t n_tokens;
    KVCache *cache;         // appended to; must have room for n_tokens more
    LogitsWanted want;
    size_t logits_row;      // out: row of ForwardState.logits holding this
                            // sequence's first requested logits
    const LoraWeights *lora;  // an adapter applied at run time to this sequence's rows, or NULL:
                              // each matrix it changes gives W x + b + scale B (A x), the
                              // low-rank product row by row (the same bits whatever else runs)
    // Hidden states (embeddings, gpt embed --hidden-states): copies, the
    // computation is the same with or without them. NULL: not wanted.
    float *hidden;          // out: (n_tokens, C) ln_f of each new token's residual stream (the final hidden state)
    float *residual;        // out: the residual stream of each new token before block 0 (k = 0) and after
                            // each block l (k = l + 1): token t of k at residual + k * residual_stride + t * C
    size_t residual_stride; // floats from one k's rows to the next's (at least n_tokens * C)
} SeqInput;

// Scratch memory for gpt2_forward, allocated once for the largest call.
typedef struct {
    size_t max_tokens;      // Tmax: new tokens in one call, all sequences together
    size_t max_ctx;         // positions a sequence may attend over
    size_t max_logit_rows;  // logit rows one call may ask for
    ThreadPool *pool;       // the threads the work is split over (not owned; NULL: one)
    CpuIsa isa;             // the kernels matmul and attention run: cpu_best_isa() at init
    MatmulPlan plan;        // the variant of each product (tune.h); all zero at init: the default
    float *x;        // (Tmax, C)    the residual stream
    float *ln;       // (Tmax, C)    layernorm output
    float *qkv;      // (Tmax, 3C)   queries, keys, values of the new tokens
    float *attn;     // (Tmax, C)    attention output, heads side by side
    float *fc;       // (Tmax, F)    MLP hidden layer (F = gpt2_mlp_width)
    float *scores;   // (threads, ATTENTION_QUERY_BLOCK x max_ctx rounded up to 16) attention weights per thread
    float *logits;   // (max_logit_rows, V)
    float *matmul_scratch;          // (threads, matmul_scratch_floats) matmul's per-thread scratch
    size_t matmul_scratch_floats;   // per thread: a group of min(Tmax, MATMUL_GROUP) rows of max(F, C)
    float *block;    // the one allocation the pointers above live in
    int use_blas;    // products of many float32 rows, and long chunks' attention, through OpenBLAS (blas.h)
    float *blas_scratch;  // (blas_attention_floats(max_tokens, max_ctx, HS)) with use_blas
    size_t bytes;    // of block and blas_scratch: what the state allocated
    // run-time adapters' scratch, grown by the first call that needs it
    float *lora_u;         // (lora_u_cap) A x of each adapted row
    size_t lora_u_cap;
    void *lora_rows;       // (max_tokens) the rows one product adapts
} ForwardState;

// pool (may be NULL) is used by every call; it must outlive the state.
int forward_state_init(ForwardState *s, const GPT2Config *cfg, size_t max_tokens,
                       size_t max_ctx, size_t max_logit_rows, ThreadPool *pool, GptError *err);
void forward_state_free(ForwardState *s);  // NULL-safe, idempotent
// From now on, calls with many rows run their float32 products and their
// attention through OpenBLAS (blas.h: outside the bitwise promise). 0, or
// -1 with err set (out of memory for its scratch).
int forward_state_use_blas(ForwardState *s, const GPT2Config *cfg, GptError *err);

// Runs the new tokens of n_seqs sequences through the model, appends their
// keys and values to each sequence's cache, and writes the requested logits
// into s->logits (seqs[i].logits_row says where). Returns 0, or -1 with err
// set: a token id outside the vocabulary, a cache or the context
// overflowing, more tokens or logit rows than the state was sized for (then
// no cache has been changed); or a NaN or infinity in the activations, which
// only a damaged model gives (then err names the layer, and the caches hold
// the new positions).
int gpt2_forward(const Model *m, ForwardState *s, SeqInput *seqs, size_t n_seqs,
                 GptError *err);

// Kernels, exposed for the tests. Sizes last, outputs first (llm.c's order).
void layernorm_forward(float *out, const float *inp, const float *weight,
                       const float *bias, size_t T, size_t C, float eps);
// f (activation.h) over x(n) on every thread of the pool, an equal share
// each (element by element: the same bits however it is cut).
void activation_pool(ThreadPool *pool, ActivationFn f, float *x, size_t n);

#endif

/*
 * embed.h - embeddings and hidden states: the model's final hidden state
 * (after ln_f, transformers' GPT2Model last_hidden_state) pooled over a
 * text's tokens into one vector (POST /v1/embeddings, /api/embed, gpt
 * embed), and the residual stream before and after each block
 * (gpt embed --hidden-states).
 *
 * A text runs alone, in chunks, through its own cache (forward.h's rows
 * are the same bits whatever else is in a call and however a prefill is
 * cut): its vector is the same bits whatever else a request or a batch
 * holds. No sampling, no logits.
 */
#ifndef GPT_EMBED_H
#define GPT_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/threads.h"
#include "forward.h"
#include "kernels/matmul.h"
#include "model/model.h"

// How the tokens' hidden states become one vector. GPT-2 is causal: the
// last token's state is the only one that has seen the whole text (LAST),
// MEAN averages every token's state, each of which saw only what came
// before it.
typedef enum { POOLING_MEAN, POOLING_LAST } Pooling;
// "mean" or "last" -> *out: 0, or -1 for another name.
int pooling_from_name(const char *name, Pooling *out);
const char *pooling_name(Pooling p);

// How to run: zeros are the defaults (F32 cache, one thread, the default variants).
typedef struct {
    const Model *model;
    ThreadPool *pool;            // NULL: one thread
    DType kv_dtype;              // F32 or F16
    const MatmulPlan *plan;      // NULL: the default (the same bits)
} EmbedConfig;

enum { EMBED_CHUNK = 128 };  // tokens per forward call

// The hidden states of ids (n, 1 <= n <= the context): hidden (n, C) gets
// ln_f of each token's residual stream; residual (NULL: not wanted) gets
// (L + 1, n, C): the stream before block 0, then after each block l at
// k = l + 1 (TransformerLens: blocks.l.hook_resid_pre is k = l,
// blocks.l.hook_resid_post k = l + 1). 0, or -1 with err set.
int embed_hidden(const EmbedConfig *cfg, const int32_t *ids, size_t n, float *hidden, float *residual,
                 GptError *err);

// out (C) = the pooled vector of hidden (n, C): the mean over the tokens
// (summed in double in token order) or the last token's; with normalize,
// divided by its L2 norm (in double; a zero vector stays zero).
void embed_pool(float *out, const float *hidden, size_t n, size_t C, Pooling pooling, int normalize);

// embed_hidden then embed_pool: out (C). 0, or -1 with err set.
int embed_tokens(const EmbedConfig *cfg, const int32_t *ids, size_t n, Pooling pooling, int normalize, float *out,
                 GptError *err);

#endif

/*
 * embed.c - embeddings and hidden states (embed.h): one text through the
 * model alone, in chunks, with the hidden states copied out of the forward
 * pass (SeqInput.hidden, .residual), then pooled.
 */
#include "embed.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int pooling_from_name(const char *name, Pooling *out) {
    if (!strcmp(name, "mean")) *out = POOLING_MEAN;
    else if (!strcmp(name, "last")) *out = POOLING_LAST;
    else return -1;
    return 0;
}

const char *pooling_name(Pooling p) { return p == POOLING_LAST ? "last" : "mean"; }

int embed_hidden(const EmbedConfig *cfg, const int32_t *ids, size_t n, float *hidden, float *residual,
                 GptError *err) {
    const Model *m = cfg->model;
    const GPT2Config *c = &m->config;
    size_t C = (size_t)c->n_embd;
    if (n < 1) return gpt_error(err, "the text is empty");
    if (n > (size_t)c->n_ctx) return gpt_error(err, "the text is %zu tokens; the model's context holds %d", n, c->n_ctx);
    KVCache cache = {0};
    ForwardState fs = {0};
    int rc = -1;
    if (kvcache_init(&cache, c, cfg->kv_dtype, n, err) != 0 ||
        forward_state_init(&fs, c, n < EMBED_CHUNK ? n : EMBED_CHUNK, n, 1, cfg->pool, err) != 0)
        goto done;
    if (cfg->plan) fs.plan = *cfg->plan;
    for (size_t start = 0, len; start < n; start += len) {
        len = n - start < EMBED_CHUNK ? n - start : EMBED_CHUNK;
        SeqInput seq = {.tokens = ids + start, .n_tokens = len, .cache = &cache, .want = LOGITS_NONE,
                        .hidden = hidden + start * C, .residual = residual ? residual + start * C : NULL,
                        .residual_stride = n * C};
        if (gpt2_forward(m, &fs, &seq, 1, err) != 0) goto done;
    }
    rc = 0;
done:
    forward_state_free(&fs);
    kvcache_free(&cache);
    return rc;
}

void embed_pool(float *out, const float *hidden, size_t n, size_t C, Pooling pooling, int normalize) {
    if (pooling == POOLING_LAST) {
        memcpy(out, hidden + (n - 1) * C, C * sizeof *out);
    } else {
        for (size_t i = 0; i < C; i++) {
            double sum = 0.0;
            for (size_t t = 0; t < n; t++) sum += hidden[t * C + i];
            out[i] = (float)(sum / (double)n);
        }
    }
    if (!normalize) return;
    double sq = 0.0;
    for (size_t i = 0; i < C; i++) sq += (double)out[i] * out[i];
    if (sq == 0.0) return;
    double norm = sqrt(sq);
    for (size_t i = 0; i < C; i++) out[i] = (float)(out[i] / norm);
}

int embed_tokens(const EmbedConfig *cfg, const int32_t *ids, size_t n, Pooling pooling, int normalize, float *out,
                 GptError *err) {
    size_t C = (size_t)cfg->model->config.n_embd;
    float *hidden = n ? malloc(n * C * sizeof *hidden) : NULL;
    if (n && !hidden) return gpt_error(err, "out of memory for %zu tokens' hidden states", n);
    int rc = embed_hidden(cfg, ids, n, hidden, NULL, err);
    if (rc == 0) embed_pool(out, hidden, n, C, pooling, normalize);
    free(hidden);
    return rc;
}

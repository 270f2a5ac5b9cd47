/*
 * model.c - the GPT-2 tensor table, the configuration's validation, and the
 * Model's weights: filling them from a format's tensors and freeing them.
 * See model.h. It reads no file and knows no format: loader.c and the format
 * files (safetensors.c, modelbin.c, llmc.c) do that.
 */
#include "model.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

// Upper bounds that catch a corrupt config long before a size overflows:
// GPT-2 XL is 48 layers, 1600 channels, 25 heads, 1024 positions, 50257 tokens.
#define MAX_LAYERS 1024
#define MAX_EMBD 65536
#define MAX_HEADS 1024
#define MAX_CTX (1 << 20)
#define MAX_VOCAB (1 << 24)

int gpt2_config_validate(const GPT2Config *c, const char *what, GptError *err) {
    if (c->n_layer <= 0 || c->n_layer > MAX_LAYERS)
        return gpt_error(err, "%s: n_layer %d must be in [1, %d]", what, c->n_layer, MAX_LAYERS);
    if (c->n_head <= 0 || c->n_head > MAX_HEADS)
        return gpt_error(err, "%s: n_head %d must be in [1, %d]", what, c->n_head, MAX_HEADS);
    if (c->n_embd <= 0 || c->n_embd > MAX_EMBD)
        return gpt_error(err, "%s: n_embd %d must be in [1, %d]", what, c->n_embd, MAX_EMBD);
    if (c->n_embd % c->n_head != 0)
        return gpt_error(err, "%s: n_embd %d is not a multiple of n_head %d", what, c->n_embd,
                         c->n_head);
    if (c->n_ctx <= 0 || c->n_ctx > MAX_CTX)
        return gpt_error(err, "%s: n_positions %d must be in [1, %d]", what, c->n_ctx, MAX_CTX);
    if (c->vocab_size <= 0 || c->vocab_size > MAX_VOCAB)
        return gpt_error(err, "%s: vocab_size %d must be in [1, %d]", what, c->vocab_size,
                         MAX_VOCAB);
    // !(x > 0) also rejects NaN
    if (!(c->ln_eps > 0.0f) || !(c->ln_eps < 1.0f))
        return gpt_error(err, "%s: layer_norm_epsilon %g must be in (0, 1)", what, (double)c->ln_eps);
    return 0;
}

// ---------------------------------------------------------------------------
// the table (model.h), as arrays

typedef struct {
    const char *name, *llmc_name;
    size_t offset;  // of the field in GPT2Weights (head, tail) or GPT2Layer
    TensorKind kind;
} Row;

#define HEAD_ROW(name, llmc, field, kind, rows, cols) {name, llmc, offsetof(GPT2Weights, field), TENSOR_##kind},
#define LAYER_ROW(name, llmc, field, kind, rows, cols) {name, llmc, offsetof(GPT2Layer, field), TENSOR_##kind},
static const Row HEAD[] = {GPT2_HEAD_TENSORS(HEAD_ROW)};
static const Row LAYER[] = {GPT2_LAYER_TENSORS(LAYER_ROW)};
static const Row TAIL[] = {GPT2_TAIL_TENSORS(HEAD_ROW)};
#undef HEAD_ROW
#undef LAYER_ROW

enum { N_HEAD = sizeof HEAD / sizeof *HEAD, N_TAIL = sizeof TAIL / sizeof *TAIL };
_Static_assert(sizeof LAYER / sizeof *LAYER == GPT2_TENSORS_PER_LAYER, "GPT2_TENSORS_PER_LAYER");

// The shape of row k of one part of the table: the table's expressions in
// C, V and T, evaluated for a configuration.
#define DIMS(name, llmc, field, kind, rows, cols) \
    if (k == i++) {                               \
        dims[0] = rows;                           \
        dims[1] = cols;                           \
    }
static void head_dims(size_t k, size_t C, size_t V, size_t T, size_t dims[2]) {
    size_t i = 0;
    GPT2_HEAD_TENSORS(DIMS)
    (void)V, (void)T;
}
static void layer_dims(size_t k, size_t C, size_t dims[2]) {
    size_t i = 0;
    GPT2_LAYER_TENSORS(DIMS)
}
static void tail_dims(size_t k, size_t C, size_t dims[2]) {
    size_t i = 0;
    GPT2_TAIL_TENSORS(DIMS)
}
#undef DIMS

size_t gpt2_n_tensors(const GPT2Config *c) {
    return N_HEAD + GPT2_TENSORS_PER_LAYER * (size_t)c->n_layer + N_TAIL;
}

// Which row of which part tensor i is.
static const Row *locate(const GPT2Config *c, size_t i, int *part, size_t *k, int *layer) {
    size_t n_layer_tensors = GPT2_TENSORS_PER_LAYER * (size_t)c->n_layer;
    *layer = -1;
    if (i < N_HEAD) {
        *part = 0, *k = i;
        return &HEAD[i];
    }
    if (i < N_HEAD + n_layer_tensors) {
        *part = 1, *k = (i - N_HEAD) % GPT2_TENSORS_PER_LAYER;
        *layer = (int)((i - N_HEAD) / GPT2_TENSORS_PER_LAYER);
        return &LAYER[*k];
    }
    *part = 2, *k = i - N_HEAD - n_layer_tensors;
    return &TAIL[*k];
}

void gpt2_tensor_spec(const GPT2Config *c, size_t i, TensorSpec *out) {
    memset(out, 0, sizeof *out);
    int part, layer;
    size_t k;
    const Row *r = locate(c, i, &part, &k, &layer);
    size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size, T = (size_t)c->n_ctx;
    if (part == 0) head_dims(k, C, V, T, out->dims);
    else if (part == 1) layer_dims(k, C, out->dims);
    else tail_dims(k, C, out->dims);
    if (layer >= 0) snprintf(out->name, sizeof out->name, "h.%d.%s", layer, r->name);
    else snprintf(out->name, sizeof out->name, "%s", r->name);
    out->llmc_name = r->llmc_name;
    out->kind = r->kind;
    out->ndim = out->dims[1] ? 2 : 1;
    out->numel = out->dims[0] * (out->dims[1] ? out->dims[1] : 1);
    out->layer = layer;
    out->index_in_layer = part == 1 ? k : 0;
}

void gpt2_tensor_name(const GPT2Config *c, size_t i, char *buf, size_t n) {
    TensorSpec s;
    gpt2_tensor_spec(c, i, &s);
    snprintf(buf, n, "%s", s.name);
}

int gpt2_tensor_shape(const GPT2Config *c, size_t i, size_t dims[2]) {
    TensorSpec s;
    gpt2_tensor_spec(c, i, &s);
    dims[0] = s.dims[0];
    dims[1] = s.dims[1];
    return s.ndim;
}

long gpt2_tensor_index(const GPT2Config *c, const char *name, long *layer_out) {
    *layer_out = -1;
    for (size_t k = 0; k < N_HEAD; k++)
        if (!strcmp(name, HEAD[k].name)) return (long)k;
    size_t tail0 = N_HEAD + GPT2_TENSORS_PER_LAYER * (size_t)c->n_layer;
    for (size_t k = 0; k < N_TAIL; k++)
        if (!strcmp(name, TAIL[k].name)) return (long)(tail0 + k);
    // "h." digits "." suffix; no leading zero ("h.01." is no layer's name)
    if (strncmp(name, "h.", 2) != 0 || name[2] < '0' || name[2] > '9') return -1;
    if (name[2] == '0' && name[3] >= '0' && name[3] <= '9') return -1;
    const char *p = name + 2;
    long layer = 0;
    while (*p >= '0' && *p <= '9') {
        layer = layer * 10 + (*p++ - '0');
        if (layer > 1000000) return -1;
    }
    if (*p++ != '.') return -1;
    for (size_t k = 0; k < GPT2_TENSORS_PER_LAYER; k++) {
        if (!strcmp(p, LAYER[k].name)) {
            *layer_out = layer;
            if (layer >= c->n_layer) return -1;
            return (long)(N_HEAD + GPT2_TENSORS_PER_LAYER * (size_t)layer + k);
        }
    }
    return -1;
}

// ---------------------------------------------------------------------------
// the weights

// Where tensor i's field is: a Weight for MATRIX / EMBEDDING rows, a
// const float * for VECTOR rows.
static void *field_of(GPT2Weights *w, const GPT2Config *c, size_t i, TensorKind *kind) {
    int part, layer;
    size_t k;
    const Row *r = locate(c, i, &part, &k, &layer);
    *kind = r->kind;
    char *base = part == 1 ? (char *)&w->layers[layer] : (char *)w;
    return base + r->offset;
}

int model_set_weights(Model *m, const TensorRef *t, const char *path, GptError *err) {
    const GPT2Config *c = &m->config;
    GPT2Weights *w = &m->weights;
    free(w->layers);
    w->layers = calloc((size_t)c->n_layer, sizeof *w->layers);
    if (!w->layers) return gpt_error(err, "%s: out of memory", path);
    size_t n = gpt2_n_tensors(c);
    m->n_params = 0;
    m->weight_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        TensorSpec s;
        gpt2_tensor_spec(c, i, &s);
        TensorKind kind;
        void *f = field_of(w, c, i, &kind);
        if (!dtype_name(t[i].dtype) || !t[i].data || (kind == TENSOR_VECTOR && t[i].dtype != DTYPE_F32))
            return gpt_error(err, "%s: tensor %s: no usable data (dtype %d)", path, s.name, (int)t[i].dtype);
        if (kind == TENSOR_VECTOR) {
            *(const float **)f = t[i].data;
        } else {
            // HF stores c_attn & co. as (in, out); wte's rows are the outputs
            // of the tied output layer.
            Weight *wt = f;
            wt->dtype = t[i].dtype;
            wt->data = t[i].data;
            wt->layout = kind == TENSOR_EMBEDDING ? WEIGHT_OUT_IN : WEIGHT_IN_OUT;
            wt->n_in = kind == TENSOR_EMBEDDING ? s.dims[1] : s.dims[0];
            wt->n_out = kind == TENSOR_EMBEDDING ? s.dims[0] : s.dims[1];
        }
        m->n_params += s.numel;
        m->weight_bytes += s.numel * dtype_size(t[i].dtype);
    }
    return 0;
}

TensorRef model_tensor(const Model *m, size_t i) {
    TensorKind kind;
    void *f = field_of((GPT2Weights *)&m->weights, &m->config, i, &kind);
    if (kind == TENSOR_VECTOR) return (TensorRef){DTYPE_F32, *(const float **)f};
    const Weight *wt = f;
    return (TensorRef){wt->dtype, wt->data};
}

void model_free(Model *m) {
    if (!m) return;
    free(m->weights.layers);
    free(m->owned);
    file_unmap(&m->map);
    tokenizer_free(m->tokenizer);  // set only by a model.bin that carries one
    memset(m, 0, sizeof *m);
}

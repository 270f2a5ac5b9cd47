/*
 * model.c - the GPT-2 tensor table, the configuration's validation, and the
 * Model's weights: filling them from a format's tensors and freeing them.
 * See model.h. It reads no file and knows no format: loader.c and the format
 * files (safetensors.c, modelbin.c, llmc.c) do that.
 */
#include "model/model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/bytes.h"
#include "base/memory.h"
#include "model/tokenizer.h"

// Upper bounds that catch a corrupt config long before a size overflows:
// GPT-2 XL is 48 layers, 1600 channels, 25 heads, 1024 positions, 50257 tokens.
#define MAX_LAYERS 1024
#define MAX_EMBD 65536
#define MAX_HEADS 1024
#define MAX_CTX (1 << 20)
#define MAX_VOCAB (1 << 24)
#define MAX_INNER (1 << 20)

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
    if (c->n_inner < 0 || c->n_inner > MAX_INNER)
        return gpt_error(err, "%s: n_inner %d must be in [1, %d] (or unset: 4 * n_embd)", what, c->n_inner,
                         MAX_INNER);
    if ((unsigned)c->activation >= ACTIVATION_COUNT)
        return gpt_error(err, "%s: activation %d is not one gpt knows", what, (int)c->activation);
    if ((c->attn_unscaled | c->attn_by_layer | c->untied_output) & ~1)
        return gpt_error(err, "%s: an attention or output flag is not 0 or 1", what);
    return 0;
}

size_t gpt2_mlp_width(const GPT2Config *c) {
    return c->n_inner > 0 ? (size_t)c->n_inner : 4 * (size_t)c->n_embd;
}

float gpt2_attn_scale(const GPT2Config *c, size_t layer) {
    float scale = c->attn_unscaled ? 1.0f : 1.0f / sqrtf((float)(c->n_embd / c->n_head));
    return c->attn_by_layer ? scale / (float)(layer + 1) : scale;
}

// transformers' names (ACT2FN), and what each computes (model.h)
static const struct {
    const char *name;
    Activation a;
} ACTIVATION_NAMES[] = {
    {"gelu_new", ACTIVATION_GELU_TANH},   {"gelu_pytorch_tanh", ACTIVATION_GELU_TANH},
    {"gelu_fast", ACTIVATION_GELU_TANH},  {"gelu", ACTIVATION_GELU_ERF},
    {"quick_gelu", ACTIVATION_QUICK_GELU}, {"relu", ACTIVATION_RELU},
    {"silu", ACTIVATION_SILU},            {"swish", ACTIVATION_SILU},
};

int activation_from_name(const char *name) {
    for (size_t i = 0; i < sizeof ACTIVATION_NAMES / sizeof *ACTIVATION_NAMES; i++)
        if (!strcmp(name, ACTIVATION_NAMES[i].name)) return (int)ACTIVATION_NAMES[i].a;
    return -1;
}

const char *activation_name(Activation a) {
    // the first name of each in the list above
    for (size_t i = 0; i < sizeof ACTIVATION_NAMES / sizeof *ACTIVATION_NAMES; i++)
        if (ACTIVATION_NAMES[i].a == a) return ACTIVATION_NAMES[i].name;
    return "?";
}

const Weight *gpt2_output_weight(const GPT2Weights *w, const GPT2Config *c) {
    return c->untied_output ? &w->lm_head : &w->wte;
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
static const Row TAIL[] = {GPT2_TAIL_TENSORS(HEAD_ROW) GPT2_OUTPUT_TENSORS(HEAD_ROW)};
#undef HEAD_ROW
#undef LAYER_ROW

// TAIL's last row is the untied output layer's, in the table only when untied
enum { N_HEAD = sizeof HEAD / sizeof *HEAD, N_TAIL_ROWS = sizeof TAIL / sizeof *TAIL };
static size_t n_tail(const GPT2Config *c) { return N_TAIL_ROWS - (c->untied_output ? 0 : 1); }
_Static_assert(sizeof LAYER / sizeof *LAYER == GPT2_TENSORS_PER_LAYER, "GPT2_TENSORS_PER_LAYER");

// The shape of row k of one part of the table: the table's expressions in
// C, V, T and F, evaluated for a configuration.
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
static void layer_dims(size_t k, size_t C, size_t F, size_t dims[2]) {
    size_t i = 0;
    GPT2_LAYER_TENSORS(DIMS)
}
static void tail_dims(size_t k, size_t C, size_t V, size_t dims[2]) {
    size_t i = 0;
    GPT2_TAIL_TENSORS(DIMS)
    GPT2_OUTPUT_TENSORS(DIMS)
}
#undef DIMS

size_t gpt2_n_tensors(const GPT2Config *c) {
    return N_HEAD + GPT2_TENSORS_PER_LAYER * (size_t)c->n_layer + n_tail(c);
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
    size_t C = (size_t)c->n_embd, V = (size_t)c->vocab_size, T = (size_t)c->n_ctx, F = gpt2_mlp_width(c);
    if (part == 0) head_dims(k, C, V, T, out->dims);
    else if (part == 1) layer_dims(k, C, F, out->dims);
    else tail_dims(k, C, V, out->dims);
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
    for (size_t k = 0; k < n_tail(c); k++)
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

TensorLayout gpt2_hf_layout(TensorKind k) { return k == TENSOR_MATRIX ? LAYOUT_IN_OUT : LAYOUT_OUT_IN; }

// ---------------------------------------------------------------------------
// the weights

// Rows converted at a time: the float32 staging block stays in cache.
enum { PACK_ROWS = 32 };

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

// A matrix's shape as a Weight sees it: n_out rows of n_in.
static void matrix_shape(const TensorSpec *s, size_t *n_out, size_t *n_in) {
    int in_first = s->kind == TENSOR_MATRIX;  // HF (in, out)
    *n_in = in_first ? s->dims[0] : s->dims[1];
    *n_out = in_first ? s->dims[1] : s->dims[0];
}

// Elements [at, at + n) of an array of dtype dt (F32, F16, BF16) at
// possibly unaligned bytes p, as float32.
static void elements(float *out, const unsigned char *p, DType dt, size_t at, size_t n) {
    if (dt == DTYPE_F32) {
        memcpy(out, p + 4 * at, 4 * n);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        const unsigned char *e = p + 2 * (at + k);
        uint16_t h = (uint16_t)(e[0] | e[1] << 8);
        out[k] = dt == DTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
}

enum { TILE = 32 };

// Matrix t (any dtype but Q8, Q4 and Q6) stored (in, out), transposed into float32
// rows: out (n_out, n_in). In TILE x TILE tiles, so that both the source's
// rows and the destination's are read and written in runs.
static void transpose_rows(float *out, const TensorRef *t, size_t n_out, size_t n_in) {
    float tile[TILE][TILE];
    for (size_t i0 = 0; i0 < n_in; i0 += TILE) {
        size_t ni = n_in - i0 < TILE ? n_in - i0 : TILE;
        for (size_t j0 = 0; j0 < n_out; j0 += TILE) {
            size_t nj = n_out - j0 < TILE ? n_out - j0 : TILE;
            for (size_t i = 0; i < ni; i++) elements(tile[i], t->data, t->dtype, (i0 + i) * n_out + j0, nj);
            for (size_t j = 0; j < nj; j++)
                for (size_t i = 0; i < ni; i++) out[(j0 + j) * n_in + i0 + i] = tile[i][j];
        }
    }
}

// Output rows [j0, j0 + rows) of matrix t (n_out x n_in, stored one row
// per output) as float32 into out (rows, n_in).
static void matrix_rows(float *out, const TensorRef *t, size_t n_out, size_t n_in, size_t j0, size_t rows) {
    const unsigned char *p = t->data;
    if (dtype_is_blocked(t->dtype)) {
        Weight w = weight_view(t->dtype, p, n_out, n_in);
        for (size_t r = 0; r < rows; r++) weight_row(out + r * n_in, &w, j0 + r);
    } else {
        for (size_t r = 0; r < rows; r++) elements(out + r * n_in, p, t->dtype, (j0 + r) * n_in, n_in);
    }
}

// ---------------------------------------------------------------------------
// merging low-rank changes (MatrixDelta): W' = W + sum of scale * B @ A

// The changes of one matrix, widened to float64 once.
typedef struct {
    size_t n;               // changes
    const MatrixDelta **d;  // (n)
    double **a, **b;        // (n) each: A (r, n_in), B (n_out, r)
    double *acc, *ba;       // (n_in) each: a row of W', a row of B @ A
} Merge;

static void merge_free(Merge *mg) {
    for (size_t k = 0; k < mg->n; k++) free(mg->a[k]), free(mg->b[k]);
    free(mg->d), free(mg->a), free(mg->b), free(mg->acc), free(mg->ba);
    memset(mg, 0, sizeof *mg);
}

// Widens the n F32, F16 or BF16 values at possibly unaligned p into out.
static void widen(double *out, const void *p, DType dt, size_t n) {
    float buf[PACK_ROWS];
    for (size_t at = 0; at < n; at += PACK_ROWS) {
        size_t m = n - at < PACK_ROWS ? n - at : PACK_ROWS;
        elements(buf, p, dt, at, m);
        for (size_t k = 0; k < m; k++) out[at + k] = buf[k];
    }
}

// The changes of a model: WeightOptions.deltas_for's answer.
typedef struct {
    const MatrixDelta *d;
    size_t n;
} Deltas;

// The changes ds makes to tensor `name` (n_out, n_in), widened; mg->n 0
// when none. -1 when out of memory.
static int merge_init(Merge *mg, const Deltas *ds, const char *name, size_t n_in) {
    memset(mg, 0, sizeof *mg);
    size_t n = 0;
    for (size_t k = 0; k < ds->n; k++) n += !strcmp(ds->d[k].name, name);
    if (!n) return 0;
    mg->d = calloc(n, sizeof *mg->d);
    mg->a = calloc(n, sizeof *mg->a);
    mg->b = calloc(n, sizeof *mg->b);
    mg->acc = malloc(n_in * sizeof *mg->acc);
    mg->ba = malloc(n_in * sizeof *mg->ba);
    mg->n = n;
    if (!mg->d || !mg->a || !mg->b || !mg->acc || !mg->ba) {
        merge_free(mg);
        return -1;
    }
    n = 0;
    for (size_t k = 0; k < ds->n; k++) {
        const MatrixDelta *d = &ds->d[k];
        if (strcmp(d->name, name)) continue;
        size_t na = d->a_dims[0] * d->a_dims[1], nb = d->b_dims[0] * d->b_dims[1];
        mg->d[n] = d;
        mg->a[n] = malloc(na * sizeof(double));
        mg->b[n] = malloc(nb * sizeof(double));
        if (!mg->a[n] || !mg->b[n]) {
            merge_free(mg);
            return -1;
        }
        widen(mg->a[n], d->a, d->a_dtype, na);
        widen(mg->b[n], d->b, d->b_dtype, nb);
        n++;
    }
    return 0;
}

// Rows [j0, j0 + rows) of W, float32 in w (rows, n_in), become W's rows
// with the changes added: each weight W[j][k] + sum over the changes, in
// their order, of scale * sum over t < r (ascending) of B[j][t] A[t][k],
// all in float64, rounded once to float32. Returns the count of merged
// weights float32 cannot hold (infinite or NaN).
static size_t merge_rows(float *w, const Merge *mg, size_t j0, size_t rows, size_t n_in) {
    size_t bad = 0;
    for (size_t j = 0; j < rows; j++) {
        float *row = w + j * n_in;
        for (size_t k = 0; k < n_in; k++) mg->acc[k] = row[k];
        for (size_t c = 0; c < mg->n; c++) {
            size_t r = mg->d[c]->r;
            const double *b = mg->b[c] + (j0 + j) * r;
            for (size_t k = 0; k < n_in; k++) mg->ba[k] = 0;
            // each k on its own: vector lanes keep every weight's order of operations
            double *restrict ba = mg->ba, *restrict acc = mg->acc;
            for (size_t t = 0; t < r; t++) {
                const double *restrict a = mg->a[c] + t * n_in;
#pragma omp simd
                for (size_t k = 0; k < n_in; k++) ba[k] += b[t] * a[k];
            }
            double scale = mg->d[c]->scale;
#pragma omp simd
            for (size_t k = 0; k < n_in; k++) acc[k] += scale * ba[k];
        }
        for (size_t k = 0; k < n_in; k++) {
            row[k] = (float)mg->acc[k];
            bad += !isfinite(row[k]);
        }
    }
    return bad;
}

// Every change of ds names a matrix of c and fits its shape; 0, or -1 with
// err naming the change's source.
static int check_deltas(const Deltas *ds, const GPT2Config *c, GptError *err) {
    for (size_t k = 0; k < ds->n; k++) {
        const MatrixDelta *d = &ds->d[k];
        long layer;
        long i = gpt2_tensor_index(c, d->name, &layer);
        size_t mod = strlen(d->name) - (sizeof ".weight" - 1);  // the module's name, for messages
        if (i < 0 && layer >= 0)
            return gpt_error(err, "%s: changes %.*s, but the base model has %d layers", d->source, (int)mod, d->name,
                             c->n_layer);
        TensorSpec s;
        if (i >= 0) gpt2_tensor_spec(c, (size_t)i, &s);
        if (i < 0 || s.kind != TENSOR_MATRIX)
            return gpt_error(err, "%s: changes %s, which is not a matrix of a GPT-2 layer", d->source, d->name);
        size_t n_out, n_in;
        matrix_shape(&s, &n_out, &n_in);
        if (d->a_dims[0] != d->r || d->a_dims[1] != n_in)
            return gpt_error(err,
                             "%s: %.*s.lora_A.weight has shape [%zu,%zu]; rank %zu and the base model imply "
                             "[%zu,%zu]",
                             d->source, (int)mod, d->name, d->a_dims[0], d->a_dims[1], d->r, d->r, n_in);
        if (d->b_dims[0] != n_out || d->b_dims[1] != d->r)
            return gpt_error(err,
                             "%s: %.*s.lora_B.weight has shape [%zu,%zu]; rank %zu and the base model imply "
                             "[%zu,%zu]",
                             d->source, (int)mod, d->name, d->b_dims[0], d->b_dims[1], d->r, n_out, d->r);
    }
    return 0;
}

// Writes matrix t into dst as `dt`, one row per output, with the changes
// mg merged (none when mg->n is 0). staging holds n_out * n_in floats for
// an (in, out) source converted to another dtype, else PACK_ROWS * n_in.
// Returns the count of weights Q8, Q4 or Q6 (or, merged, float32) could
// not hold.
static size_t pack_matrix(unsigned char *dst, DType dt, const TensorRef *t, size_t n_out, size_t n_in, const Merge *mg,
                          float *staging) {
    if (t->layout == LAYOUT_IN_OUT) {
        float *rows = dt == DTYPE_F32 ? (float *)(void *)dst : staging;
        transpose_rows(rows, t, n_out, n_in);
        size_t bad = mg->n ? merge_rows(rows, mg, 0, n_out, n_in) : 0;
        if (bad) return bad;
        return dt != DTYPE_F32 ? weight_encode(dst, dt, rows, n_out, n_in) : 0;
    }
    size_t bad = 0;
    for (size_t j0 = 0; j0 < n_out; j0 += PACK_ROWS) {
        size_t rows = n_out - j0 < PACK_ROWS ? n_out - j0 : PACK_ROWS;
        matrix_rows(staging, t, n_out, n_in, j0, rows);
        size_t merged_bad = mg->n ? merge_rows(staging, mg, j0, rows, n_in) : 0;
        bad += merged_bad ? merged_bad : weight_encode_rows(dst, dt, staging, j0, rows, n_out, n_in);
    }
    return bad;
}

// Is tensor t, named `name`, usable in place as kind `kind` in dtype dt
// (and not changed by ds)?
static int in_place(const TensorRef *t, TensorKind kind, DType dt, const char *name, const Deltas *ds) {
    if ((uintptr_t)t->data % 4 != 0 || t->dtype != dt) return 0;
    for (size_t k = 0; k < ds->n; k++)
        if (!strcmp(ds->d[k].name, name)) return 0;
    return kind == TENSOR_VECTOR || t->layout == LAYOUT_OUT_IN;
}

// --dtype q4 is a mix, as llama.cpp's are (README, docs/model-format.md).
// Q6: wte, which is also the output layer (31% of 124M's weights, and the
// one matrix whose error reaches the logits directly; llama.cpp's Q4_0 and
// Q4_K_M keep theirs in Q6_K); every matrix of the first layer, whose
// errors every later layer carries on; and every layer's attention output
// projection (attn.c_proj, the smallest matrix). Q4: the rest. Which
// matrices: the most mean KL from float32 saved per byte read a token,
// measured with scripts/q4_study.c and test_accuracy (the numbers:
// docs/model-format.md). A token of 124M then reads 83.0 MB, 1.59 times
// fewer bytes than Q8's 131.7 MB, and pure Q6 (--dtype q6, 101 MB) is the
// accurate choice between. --dtype q4-pure (WeightOptions.q4_pure) keeps
// none: every matrix Q4.
static int q4_keeps_q6(const TensorSpec *s) {
    char attn_proj[64];
    snprintf(attn_proj, sizeof attn_proj, "h.%d.attn.c_proj.weight", s->layer);
    return s->kind == TENSOR_EMBEDDING || s->layer == 0 || !strcmp(s->name, attn_proj);
}

// What matrix s stored as `stored` becomes under o (--dtype q4-pure: Q4
// for every one).
static DType matrix_target(const WeightOptions *o, const TensorSpec *s, DType stored) {
    if (!o || o->matrix_dtype < 0) return stored;
    if (o->matrix_dtype == DTYPE_Q4 && !o->q4_pure && q4_keeps_q6(s)) return DTYPE_Q6;
    return (DType)o->matrix_dtype;
}

static const char Q4_PURE_NAME[] = "q4-pure";

int weight_options_from_name(const char *name, WeightOptions *o) {
    if (!strcasecmp(name, Q4_PURE_NAME)) {
        *o = (WeightOptions){.matrix_dtype = DTYPE_Q4, .q4_pure = 1};
        return 0;
    }
    int dt = dtype_from_name(name);
    if (dt < 0) return -1;
    *o = (WeightOptions){.matrix_dtype = dt};
    return 0;
}

const char *weight_options_name(const WeightOptions *o) {
    static const char *const names[DTYPE_COUNT] = {"f32", "f16", "bf16", "q8", "q4", "q6"};
    if (o->matrix_dtype < 0 || o->matrix_dtype >= DTYPE_COUNT) return "stored";
    return o->matrix_dtype == DTYPE_Q4 && o->q4_pure ? Q4_PURE_NAME : names[o->matrix_dtype];
}

int model_set_weights(Model *m, const TensorRef *t, const WeightOptions *o, const char *path, GptError *err) {
    const GPT2Config *c = &m->config;
    GPT2Weights *w = &m->weights;
    free(w->layers);
    w->layers = calloc((size_t)c->n_layer, sizeof *w->layers);
    if (!w->layers) return gpt_error(err, "%s: out of memory", path);
    size_t n = gpt2_n_tensors(c);
    Deltas ds = {0};
    if (o && o->deltas_for && o->deltas_for(o->deltas_ctx, c, &ds.d, &ds.n, err) != 0) return -1;
    if (check_deltas(&ds, c, err) != 0) return -1;
    DType *target = calloc(n, sizeof *target);
    if (!target) return gpt_error(err, "%s: out of memory", path);
    // What each tensor becomes, and how much must be converted.
    size_t owned_bytes = 0, staging_floats = 1;
    for (size_t i = 0; i < n; i++) {
        TensorSpec s;
        gpt2_tensor_spec(c, i, &s);
        if (!dtype_name(t[i].dtype) || !t[i].data) {
            free(target);
            return gpt_error(err, "%s: tensor %s: no usable data (dtype %d)", path, s.name, (int)t[i].dtype);
        }
        if (s.kind == TENSOR_VECTOR) {
            target[i] = DTYPE_F32;
            if (dtype_is_blocked(t[i].dtype)) {
                free(target);
                return gpt_error(err, "%s: tensor %s: a vector cannot be stored as %s", path, s.name,
                                 dtype_name(t[i].dtype));
            }
        } else {
            target[i] = matrix_target(o, &s, t[i].dtype);
            if (dtype_is_blocked(t[i].dtype) && t[i].layout != LAYOUT_OUT_IN) {
                free(target);
                return gpt_error(err, "%s: tensor %s: %s must be stored (out, in)", path, s.name,
                                 dtype_name(t[i].dtype));
            }
            size_t n_out, n_in;
            matrix_shape(&s, &n_out, &n_in);
            size_t need = t[i].layout == LAYOUT_IN_OUT && target[i] != DTYPE_F32 ? n_out * n_in : PACK_ROWS * n_in;
            if (need > staging_floats) staging_floats = need;
        }
        if (!in_place(&t[i], s.kind, target[i], s.name, &ds)) {
            size_t n_out, n_in;
            if (s.kind == TENSOR_VECTOR) n_out = 1, n_in = s.numel;
            else matrix_shape(&s, &n_out, &n_in);
            owned_bytes += round_up(weight_bytes(target[i], n_out, n_in), 64);
        }
    }
    float *staging = NULL;
    unsigned char *dst = NULL;
    if (owned_bytes) {
        free(m->owned);
        m->owned = memory_alloc_large(owned_bytes);
        staging = malloc(staging_floats * sizeof *staging);
        if (!m->owned || !staging) {
            free(staging);
            free(target);
            return gpt_error(err, "%s: out of memory for %zu MB of weights", path, owned_bytes >> 20);
        }
        dst = m->owned;
    }
    m->n_params = m->weight_bytes = m->decode_bytes = 0;
    int uses_map = 0;
    for (size_t i = 0; i < n; i++) {
        TensorSpec s;
        gpt2_tensor_spec(c, i, &s);
        TensorKind kind;
        void *f = field_of(w, c, i, &kind);
        size_t n_out = 1, n_in = s.numel;
        if (kind != TENSOR_VECTOR) matrix_shape(&s, &n_out, &n_in);
        size_t bytes = weight_bytes(target[i], n_out, n_in);
        const void *data = t[i].data;
        if (!in_place(&t[i], kind, target[i], s.name, &ds)) {
            if (kind == TENSOR_VECTOR) {
                elements((float *)(void *)dst, data, t[i].dtype, 0, s.numel);
            } else {
                Merge mg;
                if (merge_init(&mg, &ds, s.name, n_in) != 0) {
                    free(staging);
                    free(target);
                    return gpt_error(err, "%s: out of memory merging adapters into %s", path, s.name);
                }
                size_t bad = pack_matrix(dst, target[i], &t[i], n_out, n_in, &mg, staging);
                size_t merged = mg.n;
                merge_free(&mg);
                if (bad) {
                    DType dt = target[i];
                    free(staging);
                    free(target);
                    if (merged)
                        return gpt_error(err,
                                         "%s: tensor %s with the adapters merged holds %zu NaN or infinite "
                                         "weights, which %s cannot hold",
                                         path, s.name, bad, dtype_name(dt));
                    return gpt_error(err, "%s: tensor %s holds %zu NaN or infinite weights, which %s cannot hold "
                                          "(the model is damaged)", path, s.name, bad, dtype_name(dt));
                }
            }
            // The source will not be read again: its pages can leave memory.
            const unsigned char *src = data;
            if (m->map.data && src >= m->map.data && src < m->map.data + m->map.size) {
                size_t src_bytes = s.kind == TENSOR_VECTOR || dtype_is_blocked(t[i].dtype)
                                       ? weight_bytes(t[i].dtype, n_out, n_in)
                                       : s.numel * dtype_size(t[i].dtype);
                file_release(&m->map, (size_t)(src - m->map.data), src_bytes);
            }
            data = dst;
            dst += round_up(bytes, 64);
        } else if (m->map.data && (const unsigned char *)data >= m->map.data &&
                   (const unsigned char *)data < m->map.data + m->map.size) {
            uses_map = 1;
        }
        if (kind == TENSOR_VECTOR) *(const float **)f = data;
        else *(Weight *)f = weight_view(target[i], data, n_out, n_in);
        m->n_params += s.numel;
        m->weight_bytes += bytes;
        // decode reads every weight once, but only one row of wpe, and
        // one of wte when it is not also the output layer
        if (i == 1) m->decode_bytes += s.dims[1] * sizeof(float);
        else if (i == 0 && c->untied_output) m->decode_bytes += weight_bytes(target[i], 1, n_in);
        else m->decode_bytes += bytes;
    }
    free(staging);
    free(target);
    if (!uses_map) file_unmap(&m->map);  // nothing points into it any more
    // Weights read in place, none copied out (whose pages were released):
    // the first step reads all of the mapping, so it is brought in now, in
    // the background, while the caller builds the tokenizer and reads the
    // prompt (fileio.h). It costs no memory the first step would not take
    // but wpe's rows past the prompt's positions.
    else if (!owned_bytes) file_prefetch(&m->map);
    return 0;
}

TensorRef model_tensor(const Model *m, size_t i) {
    TensorKind kind;
    void *f = field_of((GPT2Weights *)&m->weights, &m->config, i, &kind);
    if (kind == TENSOR_VECTOR) return (TensorRef){DTYPE_F32, LAYOUT_OUT_IN, *(const float **)f};
    const Weight *wt = f;
    return (TensorRef){wt->dtype, LAYOUT_OUT_IN, wt->data};
}

void model_set_q8_int8(Model *m) {
    for (size_t i = 0; i < gpt2_n_tensors(&m->config); i++) {
        TensorKind kind;
        void *f = field_of(&m->weights, &m->config, i, &kind);
        Weight *wt = f;
        if (kind != TENSOR_VECTOR && wt->dtype == DTYPE_Q8) wt->q8_int8 = 1;
    }
}

int model_q8_int8(const Model *m) {
    for (size_t i = 0; i < gpt2_n_tensors(&m->config); i++) {
        TensorKind kind;
        const Weight *wt = field_of((GPT2Weights *)&m->weights, &m->config, i, &kind);
        if (kind != TENSOR_VECTOR && wt->dtype == DTYPE_Q8 && wt->q8_int8) return 1;
    }
    return 0;
}

size_t model_tensor_bytes(const Model *m, size_t i) {
    TensorKind kind;
    void *f = field_of((GPT2Weights *)&m->weights, &m->config, i, &kind);
    TensorSpec s;
    gpt2_tensor_spec(&m->config, i, &s);
    if (kind == TENSOR_VECTOR) return s.numel * sizeof(float);
    const Weight *wt = f;
    return weight_bytes(wt->dtype, wt->n_out, wt->n_in);
}

// A layer's four matrices in the table's order, and their names.
static const Weight *layer_matrix(const GPT2Layer *y, int k) {
    return k == 0 ? &y->qkv_w : k == 1 ? &y->attn_proj_w : k == 2 ? &y->fc_w : &y->fc_proj_w;
}
static const char *const LAYER_MATRIX_NAMES[4] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};

const char *model_matrix_dtypes(const Model *m, char *buf, size_t cap) {
    const GPT2Weights *w = &m->weights;
    int L = w->layers ? m->config.n_layer : 0, other = -1, lo = -1, hi = -1, regular = 1;
    DType body = L > 0 ? w->layers[L - 1].fc_w.dtype : w->wte.dtype;  // c_fc: the largest
    // the whole layers in another dtype than body's: one run, one dtype
    for (int l = 0; l < L && regular; l++) {
        DType d = layer_matrix(&w->layers[l], 0)->dtype;
        int whole = 1;
        for (int k = 1; k < 4; k++) whole &= layer_matrix(&w->layers[l], k)->dtype == d;
        if (!whole || d == body) continue;
        regular = (other < 0 || (int)d == other) && (hi < 0 || l == hi + 1);
        other = (int)d, hi = l, lo = lo < 0 ? l : lo;
    }
    // outside that run, each kind of matrix all in body's dtype, or all in the other
    int kind_other[4] = {0};
    for (int k = 0; k < 4 && regular; k++) {
        int n_other = 0, n = 0;
        for (int l = 0; l < L; l++) {
            if (l >= lo && l <= hi) continue;
            DType d = layer_matrix(&w->layers[l], k)->dtype;
            if (d != body && other >= 0 && (int)d != other) regular = 0;
            if (d != body) other = (int)d, n_other++;
            n++;
        }
        if (n_other && n_other != n) regular = 0;
        kind_other[k] = n_other > 0;
    }
    int wte_differs = w->wte.dtype != body;
    if (wte_differs && other >= 0 && (int)w->wte.dtype != other) regular = 0;
    if (!regular) return snprintf(buf, cap, "mixed"), buf;
    // all Q4: said so, since "Q4" alone would read as --dtype q4's mix
    if (other < 0 && !wte_differs)
        return snprintf(buf, cap, "%s%s", dtype_name(body), body == DTYPE_Q4 ? " (every matrix)" : ""), buf;
    if (other < 0)  // wte alone
        return snprintf(buf, cap, "%s (wte %s)", dtype_name(body), dtype_name(w->wte.dtype)), buf;
    // "Q4 (Q6: wte, h.0, attn.c_proj)"
    size_t at = (size_t)snprintf(buf, cap, "%s (%s:", dtype_name(body), dtype_name((DType)other));
    const char *sep = " ";
    if (wte_differs && at < cap) at += (size_t)snprintf(buf + at, cap - at, "%swte", sep), sep = ", ";
    if (hi >= 0 && lo == hi && at < cap) at += (size_t)snprintf(buf + at, cap - at, "%sh.%d", sep, lo), sep = ", ";
    else if (hi >= 0 && at < cap) at += (size_t)snprintf(buf + at, cap - at, "%sh.%d-%d", sep, lo, hi), sep = ", ";
    for (int k = 0; k < 4; k++)
        if (kind_other[k] && at < cap)
            at += (size_t)snprintf(buf + at, cap - at, "%s%s", sep, LAYER_MATRIX_NAMES[k]), sep = ", ";
    if (at < cap) snprintf(buf + at, cap - at, ")");
    return buf;
}

void model_free(Model *m) {
    if (!m) return;
    free(m->weights.layers);
    free(m->owned);
    file_unmap(&m->map);
    tokenizer_free(m->tokenizer);  // set only by a model.bin that carries one
    memset(m, 0, sizeof *m);
}

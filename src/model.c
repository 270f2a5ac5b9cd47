/*
 * model.c - opens a GPT-2 checkpoint, checks it against its configuration and
 * leaves float32 weights for the forward pass. See model.h for the contract.
 *
 * What it does: recognises the input by content (model_sniff), reads
 * config.json, parses the safetensors header with cJSON, validates every
 * tensor (present, dtype, shape, byte range) before touching its data, then
 * either points the weights straight into the read-only mapping (float32 and
 * 4-byte aligned, the common case for files we write) or copies them once
 * into one 64-byte-aligned block (unaligned data as in the published gpt2
 * file, whose data starts at byte 14,291; F16/BF16 widened to float32).
 *
 * What it does not: run anything, own a KV cache, or print. gpt's model.bin
 * and llm.c checkpoints are recognised here but loaded by modelbin.c.
 *
 * Header policy: keys may carry a "transformer." prefix (GPT2LMHeadModel
 * files) or not (GPT2Model files). Ignored: "__metadata__", the causal-mask
 * buffers h.N.attn.bias / h.N.attn.masked_bias, and lm_head.weight (tied to
 * wte; accepted only when it is (V, C), since anything else means the file is
 * not the model the config describes); an ignored entry's data_offsets must
 * still lie inside the data region, and no two weights may share bytes. Any
 * other tensor is an error: an extra
 * layer or an unknown weight means config and file disagree, and silently
 * running a different model than the one on disk would be worse than failing.
 */
#include "model.h"

#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memory.h"
#include "modelbin.h"
#include "tokenizer.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "model.c reads little-endian safetensors data in place: port the loads first"
#endif

// Upper bounds that catch a corrupt config long before a size overflows:
// GPT-2 XL is 48 layers, 1600 channels, 25 heads, 1024 positions, 50257 tokens.
#define MAX_LAYERS 1024
#define MAX_EMBD 65536
#define MAX_HEADS 1024
#define MAX_CTX (1 << 20)
#define MAX_VOCAB (1 << 24)
#define MAX_HEADER_BYTES ((size_t)100 << 20)  // safetensors' own limit
#define LLMC_MAGIC 20240326u

static const char PREFIX[] = "transformer.";

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}

static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

ModelKind model_sniff(const unsigned char *head, size_t n, size_t file_size) {
    // safetensors: the length is checked against the file by the loader, so
    // that a truncated file gets a precise message instead of "unknown".
    if (n >= 9 && head[8] == '{') {
        uint64_t len = le64(head);
        if (len >= 2 && len < MAX_HEADER_BYTES) return MODEL_KIND_SAFETENSORS;
    }
    // llm.c: 256 int32 header, magic first (versions 3 = f32, 5 = bf16)
    if (n >= 4 && file_size >= 1024 && le32(head) == LLMC_MAGIC) return MODEL_KIND_LLMC;
    // gpt's model.bin: 8 magic bytes; modelbin.c checks everything else
    if (n >= MODELBIN_MAGIC_LEN && memcmp(head, MODELBIN_MAGIC, MODELBIN_MAGIC_LEN) == 0)
        return MODEL_KIND_GPTBIN;
    return MODEL_KIND_UNKNOWN;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---------------------------------------------------------------------------
// config.json

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

// An integer field: present, a number, integral and in int range.
static int json_int(const cJSON *root, const char *key, int *out, int required, const char *what,
                    GptError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) {
        if (required) return gpt_error(err, "%s: %s is missing", what, key);
        return 1;  // absent: caller keeps its default
    }
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || d != floor(d) || d < -2147483648.0 || d > 2147483647.0)
        return gpt_error(err, "%s: %s must be an integer", what, key);
    *out = (int)d;
    return 0;
}

static int read_config(const char *path, GPT2Config *c, GptError *err) {
    char *text;
    size_t len;
    if (file_read_all(path, &text, &len, err) != 0) return -1;
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return gpt_error(err, "%s: not a JSON object", path);
    }
    int rc = -1;
    memset(c, 0, sizeof *c);
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "model_type")) &&
        (!cJSON_IsString(v) || strcmp(v->valuestring, "gpt2") != 0)) {
        gpt_error(err, "%s: model_type %s is not gpt2", path,
                  cJSON_IsString(v) ? v->valuestring : "(not a string)");
        goto done;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "activation_function"))) {
        // gelu_pytorch_tanh is the same tanh approximation under another name
        if (!cJSON_IsString(v) ||
            (strcmp(v->valuestring, "gelu_new") != 0 && strcmp(v->valuestring, "gelu_pytorch_tanh") != 0)) {
            gpt_error(err, "%s: activation_function %s is not supported (gpt implements gelu_new, the tanh approximation)",
                      path, cJSON_IsString(v) ? v->valuestring : "(not a string)");
            goto done;
        }
    }
    if (json_int(root, "n_layer", &c->n_layer, 1, path, err) < 0 ||
        json_int(root, "n_head", &c->n_head, 1, path, err) < 0 ||
        json_int(root, "n_embd", &c->n_embd, 1, path, err) < 0 ||
        json_int(root, "vocab_size", &c->vocab_size, 1, path, err) < 0)
        goto done;
    // n_positions is the real limit; very old configs only have n_ctx
    int r = json_int(root, "n_positions", &c->n_ctx, 0, path, err);
    if (r < 0) goto done;
    if (r == 1 && json_int(root, "n_ctx", &c->n_ctx, 1, path, err) < 0) {
        gpt_error(err, "%s: n_positions (or n_ctx) is missing or not an integer", path);
        goto done;
    }
    int n_inner = 0;
    r = json_int(root, "n_inner", &n_inner, 0, path, err);
    if (r < 0) goto done;
    // n_embd is not validated yet: 4 * n_embd may not fit an int
    if (r == 0 && n_inner != 4LL * c->n_embd) {
        gpt_error(err, "%s: n_inner %d is not 4 * n_embd (%lld); gpt supports only that MLP width", path,
                  n_inner, 4LL * c->n_embd);
        goto done;
    }
    c->ln_eps = 1e-5f;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v)) {
            gpt_error(err, "%s: layer_norm_epsilon must be a number", path);
            goto done;
        }
        c->ln_eps = (float)v->valuedouble;
    }
    rc = gpt2_config_validate(c, path, err);
done:
    cJSON_Delete(root);
    return rc;
}

// ---------------------------------------------------------------------------
// safetensors

// The tensors gpt needs, in the canonical order of the file we generate:
// slot 0 wte, 1 wpe, then 12 per layer (2 + 12*l + k), then ln_f weight, bias.
enum { PER_LAYER = 12 };
static const char *const LAYER_NAMES[PER_LAYER] = {
    "ln_1.weight",        "ln_1.bias",          "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias",   "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",      "mlp.c_proj.weight",  "mlp.c_proj.bias",
};

typedef enum { DT_F32, DT_F16, DT_BF16 } DType;

typedef struct {
    const char *key;      // as stored in the file (points into the cJSON tree)
    DType dtype;
    size_t begin, end;    // byte range inside the data region
    size_t dims[2];       // the shape the config implies
    int ndim;
} Slot;

typedef struct {
    int L;
    size_t C, T, V;
    size_t n_slots;  // 4 + 12 L
} Shapes;

static size_t slot_numel(const Slot *s) { return s->ndim == 1 ? s->dims[0] : s->dims[0] * s->dims[1]; }

// The canonical (unprefixed) name of a slot, for messages about missing ones.
static void slot_name(const Shapes *sh, size_t i, char *buf, size_t n) {
    if (i == 0) snprintf(buf, n, "wte.weight");
    else if (i == 1) snprintf(buf, n, "wpe.weight");
    else if (i == sh->n_slots - 2) snprintf(buf, n, "ln_f.weight");
    else if (i == sh->n_slots - 1) snprintf(buf, n, "ln_f.bias");
    else snprintf(buf, n, "h.%zu.%s", (i - 2) / PER_LAYER, LAYER_NAMES[(i - 2) % PER_LAYER]);
}

static void slot_shape(const Shapes *sh, size_t i, Slot *s) {
    size_t C = sh->C;
    s->ndim = 1;
    s->dims[1] = 0;
    if (i == 0 || i == 1) {
        s->ndim = 2;
        s->dims[0] = i == 0 ? sh->V : sh->T;
        s->dims[1] = C;
        return;
    }
    if (i >= sh->n_slots - 2) {
        s->dims[0] = C;
        return;
    }
    switch ((i - 2) % PER_LAYER) {
    case 2: s->ndim = 2; s->dims[0] = C; s->dims[1] = 3 * C; break;  // c_attn (C, 3C)
    case 3: s->dims[0] = 3 * C; break;
    case 4: s->ndim = 2; s->dims[0] = C; s->dims[1] = C; break;      // attn c_proj (C, C)
    case 8: s->ndim = 2; s->dims[0] = C; s->dims[1] = 4 * C; break;  // c_fc (C, 4C)
    case 9: s->dims[0] = 4 * C; break;
    case 10: s->ndim = 2; s->dims[0] = 4 * C; s->dims[1] = C; break; // mlp c_proj (4C, C)
    default: s->dims[0] = C; break;                                  // ln_*, *_proj.bias
    }
}

// Matches an unprefixed name to a slot. Returns the slot index, or -2 for a
// tensor to ignore, or -1 for one gpt does not know; *layer_out gets the layer
// number of an h.N name (for the "layer beyond n_layer" message), else -1.
static long match_name(const Shapes *sh, const char *name, long *layer_out) {
    *layer_out = -1;
    if (!strcmp(name, "wte.weight")) return 0;
    if (!strcmp(name, "wpe.weight")) return 1;
    if (!strcmp(name, "ln_f.weight")) return (long)sh->n_slots - 2;
    if (!strcmp(name, "ln_f.bias")) return (long)sh->n_slots - 1;
    if (strncmp(name, "h.", 2) != 0 || name[2] < '0' || name[2] > '9') return -1;
    if (name[2] == '0' && name[3] >= '0' && name[3] <= '9') return -1;  // "h.01." is no layer's name
    const char *p = name + 2;
    long layer = 0;
    while (*p >= '0' && *p <= '9') {
        layer = layer * 10 + (*p++ - '0');
        if (layer > 1000000) return -1;
    }
    if (*p++ != '.') return -1;
    if (!strcmp(p, "attn.bias") || !strcmp(p, "attn.masked_bias")) return -2;
    for (int k = 0; k < PER_LAYER; k++) {
        if (!strcmp(p, LAYER_NAMES[k])) {
            *layer_out = layer;
            if (layer >= sh->L) return -1;
            return 2 + PER_LAYER * layer + k;
        }
    }
    return -1;
}

// A non-negative integer that a double holds exactly.
static int json_size(const cJSON *v, size_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (d < 0 || d != floor(d) || d > 9007199254740992.0) return -1;
    *out = (size_t)d;
    return 0;
}

static void format_shape(char *buf, size_t n, const size_t *dims, int ndim) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, "%s%zu", d ? "," : "", dims[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

// Reads an entry's data_offsets [begin, end) and checks that they lie in the
// data region. Every entry is checked, the ignored ones too.
static int entry_range(const cJSON *e, const char *key, size_t data_size, const char *path, size_t *begin,
                       size_t *end, GptError *err) {
    const cJSON *offs = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "data_offsets") : NULL;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        json_size(cJSON_GetArrayItem(offs, 0), begin) != 0 || json_size(cJSON_GetArrayItem(offs, 1), end) != 0)
        return gpt_error(err, "%s: tensor %s: data_offsets is not a pair of sizes", path, key);
    if (*begin > *end || *end > data_size)
        return gpt_error(err, "%s: tensor %s has data_offsets [%zu,%zu] outside the data region of %zu bytes%s",
                         path, key, *begin, *end, data_size,
                         *end > data_size ? " (is the file truncated?)" : "");
    return 0;
}

typedef struct {
    size_t begin, end;
    const char *key;
} Range;

static int range_cmp(const void *a, const void *b) {
    const Range *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

// No two weights gpt uses may share bytes: a file whose tensors overlap is
// damaged or forged, and would give one weight another's values. (The
// ignored entries, a tied lm_head.weight say, are only checked to lie inside
// the data region.)
static int check_no_overlap(Range *r, size_t n, const char *path, GptError *err) {
    qsort(r, n, sizeof *r, range_cmp);
    for (size_t i = 1; i < n; i++)
        if (r[i].begin < r[i - 1].end && r[i].begin < r[i].end)
            return gpt_error(err, "%s: tensors %s and %s share bytes of the data region", path, r[i - 1].key,
                             r[i].key);
    return 0;
}

// Validates one header entry against the shape it must have and the data
// region's size; fills dtype and byte range. `key` is the name as stored.
static int check_entry(const cJSON *e, const char *key, const size_t *dims, int ndim, size_t data_size,
                       const char *path, DType *dtype, size_t *begin, size_t *end, GptError *err) {
    if (!cJSON_IsObject(e)) return gpt_error(err, "%s: tensor %s: header entry is not an object", path, key);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsString(dt)) return gpt_error(err, "%s: tensor %s has no dtype", path, key);
    size_t es;
    if (!strcmp(dt->valuestring, "F32")) *dtype = DT_F32, es = 4;
    else if (!strcmp(dt->valuestring, "F16")) *dtype = DT_F16, es = 2;
    else if (!strcmp(dt->valuestring, "BF16")) *dtype = DT_BF16, es = 2;
    else
        return gpt_error(err, "%s: tensor %s has dtype %.16s; gpt reads F32, F16 or BF16", path, key,
                         dt->valuestring);

    char want[64], got[256];
    format_shape(want, sizeof want, dims, ndim);
    if (!cJSON_IsArray(shape)) return gpt_error(err, "%s: tensor %s has no shape, config implies %s", path, key, want);
    int nd = cJSON_GetArraySize(shape);
    size_t got_dims[8] = {0};
    int ok = nd == ndim;
    for (int d = 0; d < nd && d < 8; d++) {
        if (json_size(cJSON_GetArrayItem(shape, d), &got_dims[d]) != 0)
            return gpt_error(err, "%s: tensor %s: shape holds a value that is not a size", path, key);
        if (d < ndim && got_dims[d] != dims[d]) ok = 0;
    }
    if (!ok) {
        format_shape(got, sizeof got, got_dims, nd < 8 ? nd : 8);
        return gpt_error(err, "%s: tensor %s has shape %s, config implies %s", path, key, got, want);
    }

    if (entry_range(e, key, data_size, path, begin, end, err) != 0) return -1;
    size_t need = es;
    for (int d = 0; d < ndim; d++) need *= dims[d];
    if (*end - *begin != need)
        return gpt_error(err, "%s: tensor %s has %zu bytes of data; %s %s needs %zu", path, key, *end - *begin,
                         dt->valuestring, want, need);
    return 0;
}

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13);  // inf, nan
    } else if (exp != 0) {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        // subnormal half: normalise into a float32 exponent
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FFu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// Copies n values of dtype dt from possibly unaligned bytes src into dst.
static void widen(float *dst, const unsigned char *src, size_t n, DType dt) {
    if (dt == DT_F32) {
        memcpy(dst, src, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        if (dt == DT_F16) {
            dst[i] = f16_to_f32(h);
        } else {
            uint32_t bits = (uint32_t)h << 16;  // bf16 is the top half of a float32
            memcpy(&dst[i], &bits, 4);
        }
    }
}

// Points the weights at `ptr[slot]`.
static int assign(Model *m, const Shapes *sh, const float *const *ptr, GptError *err, const char *path) {
    GPT2Weights *w = &m->weights;
    w->layers = calloc((size_t)sh->L, sizeof *w->layers);
    if (!w->layers) return gpt_error(err, "%s: out of memory", path);
    w->wte = ptr[0];
    w->wpe = ptr[1];
    for (int l = 0; l < sh->L; l++) {
        const float *const *p = ptr + 2 + (size_t)PER_LAYER * (size_t)l;
        GPT2Layer *y = &w->layers[l];
        y->ln1_w = p[0];
        y->ln1_b = p[1];
        y->qkv_w = p[2];
        y->qkv_b = p[3];
        y->attn_proj_w = p[4];
        y->attn_proj_b = p[5];
        y->ln2_w = p[6];
        y->ln2_b = p[7];
        y->fc_w = p[8];
        y->fc_b = p[9];
        y->fc_proj_w = p[10];
        y->fc_proj_b = p[11];
    }
    w->lnf_w = ptr[sh->n_slots - 2];
    w->lnf_b = ptr[sh->n_slots - 1];
    return 0;
}

// The canonical tensor list, public for modelbin.c (see model.h).
static Shapes shapes_of(const GPT2Config *c) {
    Shapes sh = {c->n_layer, (size_t)c->n_embd, (size_t)c->n_ctx, (size_t)c->vocab_size,
                 4 + PER_LAYER * (size_t)c->n_layer};
    return sh;
}

size_t gpt2_n_tensors(const GPT2Config *c) { return shapes_of(c).n_slots; }

void gpt2_tensor_name(const GPT2Config *c, size_t i, char *buf, size_t n) {
    Shapes sh = shapes_of(c);
    slot_name(&sh, i, buf, n);
}

int gpt2_tensor_shape(const GPT2Config *c, size_t i, size_t dims[2]) {
    Shapes sh = shapes_of(c);
    Slot s;
    slot_shape(&sh, i, &s);
    dims[0] = s.dims[0];
    dims[1] = s.dims[1];
    return s.ndim;
}

const float *model_tensor(const Model *m, size_t i) {
    const GPT2Weights *w = &m->weights;
    size_t n = gpt2_n_tensors(&m->config);
    if (i == 0) return w->wte;
    if (i == 1) return w->wpe;
    if (i == n - 2) return w->lnf_w;
    if (i == n - 1) return w->lnf_b;
    const GPT2Layer *y = &w->layers[(i - 2) / PER_LAYER];
    const float *p[PER_LAYER] = {y->ln1_w, y->ln1_b, y->qkv_w, y->qkv_b, y->attn_proj_w, y->attn_proj_b,
                                 y->ln2_w, y->ln2_b, y->fc_w, y->fc_b, y->fc_proj_w, y->fc_proj_b};
    return p[(i - 2) % PER_LAYER];
}

int model_set_weights(Model *m, const float *const *ptr, const char *path, GptError *err) {
    Shapes sh = shapes_of(&m->config);
    return assign(m, &sh, ptr, err, path);
}

// Loads the safetensors file already mapped in m->map, with the config read.
static int load_safetensors(Model *m, const char *path, GptError *err) {
    const unsigned char *file = m->map.data;
    size_t size = m->map.size;
    if (size < 8) return gpt_error(err, "%s: file too short (%zu bytes) for a safetensors header", path, size);
    uint64_t hlen = le64(file);
    if (hlen > size - 8)
        return gpt_error(err, "%s: header length %llu runs past the end of the file (%zu bytes; is it truncated?)",
                         path, (unsigned long long)hlen, size);
    if (hlen < 2 || hlen >= MAX_HEADER_BYTES)
        return gpt_error(err, "%s: header length %llu is not plausible", path, (unsigned long long)hlen);
    const unsigned char *data = file + 8 + hlen;
    size_t data_size = size - 8 - (size_t)hlen;

    cJSON *hdr = cJSON_ParseWithLength((const char *)file + 8, (size_t)hlen);
    if (!hdr || !cJSON_IsObject(hdr)) {
        cJSON_Delete(hdr);
        return gpt_error(err, "%s: the safetensors header is not valid JSON", path);
    }

    const GPT2Config *c = &m->config;
    Shapes sh = {c->n_layer, (size_t)c->n_embd, (size_t)c->n_ctx, (size_t)c->vocab_size,
                 4 + PER_LAYER * (size_t)c->n_layer};
    Slot *slots = calloc(sh.n_slots, sizeof *slots);
    const float **ptr = calloc(sh.n_slots, sizeof *ptr);
    Range *ranges = NULL;
    int rc = -1;
    if (!slots || !ptr) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < sh.n_slots; i++) slot_shape(&sh, i, &slots[i]);

    size_t n_entries = (size_t)cJSON_GetArraySize(hdr), n_ranges = 0;
    ranges = calloc(n_entries ? n_entries : 1, sizeof *ranges);
    if (!ranges) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    for (const cJSON *e = hdr->child; e; e = e->next) {
        const char *key = e->string;
        if (!strcmp(key, "__metadata__")) continue;
        const char *name = strncmp(key, PREFIX, sizeof PREFIX - 1) == 0 ? key + sizeof PREFIX - 1 : key;
        DType dt;
        size_t b, en;
        if (entry_range(e, key, data_size, path, &b, &en, err) != 0) goto done;
        if (!strcmp(name, "lm_head.weight")) {
            // tied to wte: we always use wte, but a different shape means
            // the file is not the model the config describes
            size_t dims[2] = {sh.V, sh.C};
            if (check_entry(e, key, dims, 2, data_size, path, &dt, &b, &en, err) != 0) goto done;
            continue;
        }
        long layer;
        long i = match_name(&sh, name, &layer);
        if (i == -2) continue;
        if (i == -1) {
            if (layer >= 0)
                gpt_error(err, "%s: tensor %s is in layer %ld, but config n_layer is %d", path, key, layer, sh.L);
            else
                gpt_error(err, "%s: tensor %s is not a GPT-2 weight", path, key);
            goto done;
        }
        Slot *s = &slots[i];
        if (s->key) {
            gpt_error(err, "%s: tensor %s appears twice (as %s and %s)", path, name, s->key, key);
            goto done;
        }
        s->key = key;
        if (check_entry(e, key, s->dims, s->ndim, data_size, path, &s->dtype, &s->begin, &s->end, err) != 0)
            goto done;
        ranges[n_ranges++] = (Range){s->begin, s->end, key};
    }

    if (check_no_overlap(ranges, n_ranges, path, err) != 0) goto done;

    // Everything present? Float32 and 4-byte aligned in memory?
    int in_place = 1;
    size_t n_params = 0, owned_floats = 0;
    for (size_t i = 0; i < sh.n_slots; i++) {
        if (!slots[i].key) {
            char name[96];
            slot_name(&sh, i, name, sizeof name);
            gpt_error(err, "%s: tensor %s is missing", path, name);
            goto done;
        }
        size_t n = slot_numel(&slots[i]);
        n_params += n;
        owned_floats += (n + 15) / 16 * 16;  // each tensor on a 64-byte boundary
        if (slots[i].dtype != DT_F32 || (uintptr_t)(data + slots[i].begin) % 4 != 0) in_place = 0;
    }

    if (in_place) {
        for (size_t i = 0; i < sh.n_slots; i++) ptr[i] = (const float *)(const void *)(data + slots[i].begin);
    } else {
        // One allocation, filled once: unaligned float32 cannot be read in
        // place without undefined behaviour, and F16/BF16 need widening.
        m->owned = memory_alloc_large(owned_floats * sizeof(float));
        if (!m->owned) {
            gpt_error(err, "%s: out of memory for %zu MB of weights", path, owned_floats * 4 >> 20);
            goto done;
        }
        float *dst = m->owned;
        for (size_t i = 0; i < sh.n_slots; i++) {
            size_t n = slot_numel(&slots[i]);
            widen(dst, data + slots[i].begin, n, slots[i].dtype);
            file_release(&m->map, (size_t)(data - m->map.data) + slots[i].begin,
                         slots[i].end - slots[i].begin);
            ptr[i] = dst;
            dst += (n + 15) / 16 * 16;
        }
    }
    if (assign(m, &sh, ptr, err, path) != 0) goto done;
    if (!in_place) file_unmap(&m->map);  // nothing points into it any more
    m->n_params = n_params;
    m->weight_bytes = n_params * sizeof(float);
    snprintf(m->source_kind, sizeof m->source_kind, "safetensors");
    rc = 0;
done:
    cJSON_Delete(hdr);
    free(slots);
    free(ptr);
    free(ranges);
    return rc;
}

// ---------------------------------------------------------------------------

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

// config.json in the directory that holds `file`.
static char *config_beside(const char *file) {
    const char *slash = strrchr(file, '/');
    if (!slash) return join(".", "config.json");
    size_t n = (size_t)(slash - file);
    char *dir = malloc(n + 2);
    if (!dir) return NULL;
    memcpy(dir, file, n ? n : 1);  // "/x" -> "/"
    dir[n ? n : 1] = '\0';
    char *p = join(dir, "config.json");
    free(dir);
    return p;
}

int model_load(Model *m, const char *path, GptError *err) {
    double t0 = now_seconds();
    memset(m, 0, sizeof *m);
    char *st_path = NULL, *cfg_path = NULL;
    int rc = -1;
    int is_dir = path_is_dir(path);

    if (is_dir) {
        st_path = join(path, "model.safetensors");
        cfg_path = join(path, "config.json");
        if (!st_path || !cfg_path) {
            gpt_error(err, "%s: out of memory", path);
            goto done;
        }
        if (!path_exists(st_path)) {
            gpt_error(err, "%s: not a GPT-2 checkpoint (expected a directory with config.json and "
                           "model.safetensors, a .safetensors file, or a gpt model.bin)", path);
            goto done;
        }
    } else {
        st_path = malloc(strlen(path) + 1);
        if (!st_path) {
            gpt_error(err, "%s: out of memory", path);
            goto done;
        }
        strcpy(st_path, path);
    }
    if (file_map(st_path, &m->map, err) != 0) goto done;

    ModelKind kind = model_sniff(m->map.data, m->map.size, m->map.size);
    if (kind == MODEL_KIND_GPTBIN || kind == MODEL_KIND_LLMC) {
        // One file that holds its own configuration: modelbin.c validates it
        // and sets the weights (and, for model.bin, the tokenizer).
        if ((kind == MODEL_KIND_GPTBIN ? modelbin_load_mapped(m, st_path, err)
                                       : llmc_load_mapped(m, st_path, err)) != 0)
            goto done;
        m->load_seconds = now_seconds() - t0;
        rc = 0;
        goto done;
    }
    if (kind != MODEL_KIND_SAFETENSORS && !(is_dir && m->map.size < 9)) {
        // A directory's model.safetensors is one by name: too short a file
        // gets the loader's precise message; anything else is unknown.
        if (is_dir)
            gpt_error(err, "%s: not a safetensors file", st_path);
        else
            gpt_error(err, "%s: not a GPT-2 checkpoint (expected a directory with config.json and "
                           "model.safetensors, a .safetensors file, or a gpt model.bin)", path);
        goto done;
    }
    if (!cfg_path) cfg_path = config_beside(st_path);
    if (!cfg_path) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    if (!path_exists(cfg_path)) {
        gpt_error(err, "%s: no config.json beside it (looked for %s)", st_path, cfg_path);
        goto done;
    }
    if (read_config(cfg_path, &m->config, err) != 0) goto done;
    if (load_safetensors(m, st_path, err) != 0) goto done;
    m->load_seconds = now_seconds() - t0;
    rc = 0;
done:
    free(st_path);
    free(cfg_path);
    if (rc != 0) model_free(m);
    return rc;
}

void model_free(Model *m) {
    if (!m) return;
    free(m->weights.layers);
    free(m->owned);
    file_unmap(&m->map);
    tokenizer_free(m->tokenizer);  // set only by a model.bin that carries one
    memset(m, 0, sizeof *m);
}

/*
 * safetensors.c - Hugging Face checkpoints: config.json and model.safetensors
 * (SAFETENSORS_FORMAT, formats.h).
 *
 * What it does: reads config.json, parses the safetensors header with cJSON,
 * validates every entry (present, dtype, shape from the tensor table, byte
 * range) before touching its data, then hands the tensors, as they lie in
 * the mapping, to model_set_weights (model.h), which uses what it can in
 * place and converts the rest once.
 *
 * Header policy: keys may carry a "transformer." prefix (GPT2LMHeadModel
 * files) or not (GPT2Model files). Ignored: "__metadata__", the causal-mask
 * buffers h.N.attn.bias / h.N.attn.masked_bias, and lm_head.weight when the
 * config ties it to wte (accepted only when it is (V, C), since anything
 * else means the file is not the model the config describes; with
 * tie_word_embeddings false it is the output layer, and required); an
 * ignored entry's data_offsets must
 * still lie inside the data region, and no two weights may share bytes. Any
 * other tensor is an error: an extra layer or an unknown weight means config
 * and file disagree, and silently running a different model than the one on
 * disk would be worse than failing.
 */
#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/fileio.h"
#include "model/formats.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c reads little-endian float data in place: port the loads first"
#endif

static const char PREFIX[] = "transformer.";

#define MAX_HEADER_BYTES ((size_t)100 << 20)  // safetensors' own limit

// ---------------------------------------------------------------------------
// config.json

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

// A boolean field: absent or null keeps *out; 0, or -1 if not true/false.
static int json_bool(const cJSON *root, const char *key, int *out, const char *what, GptError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return gpt_error(err, "%s: %s must be true or false", what, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

// The keys of transformers' GPT2Config (and PretrainedConfig) that would
// change the computation in a way gpt does not implement, with the value
// that is GPT-2's (and so accepted): any other refuses the file
// (docs/model-format.md, "Configurations"). A boolean that must be false,
// or a list or object that must be empty.
static const char *const MUST_BE_FALSE[] = {"add_cross_attention", "is_encoder_decoder"};
static const char *const MUST_BE_EMPTY[] = {"pruned_heads", "quantization_config"};

static int refuse_unsupported(const cJSON *root, const char *path, GptError *err) {
    for (size_t i = 0; i < sizeof MUST_BE_FALSE / sizeof *MUST_BE_FALSE; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, MUST_BE_FALSE[i]);
        if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v))
            return gpt_error(err, "%s: %s is %s; gpt runs only GPT-2 language models without it", path,
                             MUST_BE_FALSE[i], cJSON_IsTrue(v) ? "true" : "not false");
    }
    for (size_t i = 0; i < sizeof MUST_BE_EMPTY / sizeof *MUST_BE_EMPTY; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, MUST_BE_EMPTY[i]);
        if (v && !cJSON_IsNull(v) && !((cJSON_IsObject(v) || cJSON_IsArray(v)) && !v->child))
            return gpt_error(err, "%s: %s is set; gpt reads only whole, unquantized Hugging Face checkpoints", path,
                             MUST_BE_EMPTY[i]);
    }
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
    if (refuse_unsupported(root, path, err) != 0) goto done;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "activation_function")) && !cJSON_IsNull(v)) {
        int a = cJSON_IsString(v) ? activation_from_name(v->valuestring) : -1;
        if (a < 0) {
            gpt_error(err, "%s: activation_function %s is not one gpt implements (gelu_new, gelu_pytorch_tanh, "
                           "gelu_fast, gelu, quick_gelu, relu, silu, swish)",
                      path, cJSON_IsString(v) ? v->valuestring : "(not a string)");
            goto done;
        }
        c->activation = (Activation)a;
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
    // n_inner null or absent: 4 * n_embd (c->n_inner 0)
    r = json_int(root, "n_inner", &c->n_inner, 0, path, err);
    if (r < 0) goto done;
    if (r == 0 && c->n_inner <= 0) {
        gpt_error(err, "%s: n_inner %d must be positive (or null: 4 * n_embd)", path, c->n_inner);
        goto done;
    }
    if (c->n_inner == 4LL * c->n_embd) c->n_inner = 0;
    c->ln_eps = 1e-5f;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v)) {
            gpt_error(err, "%s: layer_norm_epsilon must be a number", path);
            goto done;
        }
        c->ln_eps = (float)v->valuedouble;
    }
    // The attention's two scaling flags and the output layer (transformers'
    // defaults: scaled, not by layer, tied). reorder_and_upcast_attn only
    // asks for the scores and the softmax in float32, which gpt always
    // computes them in: accepted, true or false.
    int scaled = 1, by_layer = 0, tied = 1, upcast = 0;
    if (json_bool(root, "scale_attn_weights", &scaled, path, err) != 0 ||
        json_bool(root, "scale_attn_by_inverse_layer_idx", &by_layer, path, err) != 0 ||
        json_bool(root, "tie_word_embeddings", &tied, path, err) != 0 ||
        json_bool(root, "reorder_and_upcast_attn", &upcast, path, err) != 0)
        goto done;
    c->attn_unscaled = !scaled;
    c->attn_by_layer = by_layer;
    c->untied_output = !tied;
    rc = gpt2_config_validate(c, path, err);
done:
    cJSON_Delete(root);
    return rc;
}

// ---------------------------------------------------------------------------
// the header

// One tensor the file must hold: the table's shape, and what the file says.
typedef struct {
    const char *key;      // as stored in the file (points into the cJSON tree)
    DType dtype;
    size_t begin, end;    // byte range inside the data region
    TensorSpec spec;      // the shape the config implies
} Slot;

// A non-negative integer that a double holds exactly.
static int json_size(const cJSON *v, size_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (d < 0 || d != floor(d) || d > 9007199254740992.0) return -1;
    *out = (size_t)d;
    return 0;
}

static void format_dims(char *buf, size_t n, const size_t *dims, int ndim) {
    uint64_t d64[8];
    for (int d = 0; d < ndim && d < 8; d++) d64[d] = dims[d];
    shape_string(buf, n, d64, ndim < 8 ? ndim : 8, ",");
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
// An entry's dtype: F32, F16 or BF16.
static int entry_dtype(const cJSON *e, const char *key, const char *path, DType *dtype, GptError *err) {
    if (!cJSON_IsObject(e)) return gpt_error(err, "%s: tensor %s: header entry is not an object", path, key);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt)) return gpt_error(err, "%s: tensor %s has no dtype", path, key);
    if (!strcmp(dt->valuestring, "F32")) *dtype = DTYPE_F32;
    else if (!strcmp(dt->valuestring, "F16")) *dtype = DTYPE_F16;
    else if (!strcmp(dt->valuestring, "BF16")) *dtype = DTYPE_BF16;
    else
        return gpt_error(err, "%s: tensor %s has dtype %.16s; gpt reads F32, F16 or BF16", path, key,
                         dt->valuestring);
    return 0;
}

static int check_entry(const cJSON *e, const char *key, const size_t *dims, int ndim, size_t data_size,
                       const char *path, DType *dtype, size_t *begin, size_t *end, GptError *err) {
    if (entry_dtype(e, key, path, dtype, err) != 0) return -1;
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");

    char want[64], got[256];
    format_dims(want, sizeof want, dims, ndim);
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
        format_dims(got, sizeof got, got_dims, nd);
        return gpt_error(err, "%s: tensor %s has shape %s, config implies %s", path, key, got, want);
    }

    if (entry_range(e, key, data_size, path, begin, end, err) != 0) return -1;
    size_t need = dtype_size(*dtype);
    for (int d = 0; d < ndim; d++) need *= dims[d];
    if (*end - *begin != need)
        return gpt_error(err, "%s: tensor %s has %zu bytes of data; %s %s needs %zu", path, key, *end - *begin,
                         dt->valuestring, want, need);
    return 0;
}

// The causal-mask buffers older transformers versions saved with every
// layer: "h.N.attn.bias" and "h.N.attn.masked_bias" (N without a leading 0).
static int is_mask_buffer(const char *name) {
    if (strncmp(name, "h.", 2) != 0 || name[2] < '0' || name[2] > '9') return 0;
    if (name[2] == '0' && name[3] >= '0' && name[3] <= '9') return 0;
    const char *p = name + 2;
    long layer = 0;
    while (*p >= '0' && *p <= '9') {
        layer = layer * 10 + (*p++ - '0');
        if (layer > 1000000) return 0;
    }
    return !strcmp(p, ".attn.bias") || !strcmp(p, ".attn.masked_bias");
}

// An 8-byte little-endian header length, then the header's JSON object. The
// length is checked against the file by loading, so that a truncated file
// gets a precise message instead of "unknown".
static int safetensors_sniff(const unsigned char *head, size_t n, size_t file_size) {
    (void)file_size;
    if (n < 9 || head[8] != '{') return 0;
    uint64_t len = rd64(head);
    return len >= 2 && len < MAX_HEADER_BYTES;
}

// Reads the Hugging Face config.json beside the file into m->config, then
// the safetensors file already mapped in m->map.
int safetensors_header(const unsigned char *file, size_t size, const char *path, cJSON **hdr,
                       const unsigned char **data, size_t *data_size, GptError *err) {
    *hdr = NULL;
    if (size < 8) return gpt_error(err, "%s: file too short (%zu bytes) for a safetensors header", path, size);
    uint64_t hlen = rd64(file);
    if (hlen > size - 8)
        return gpt_error(err, "%s: header length %llu runs past the end of the file (%zu bytes; is it truncated?)",
                         path, (unsigned long long)hlen, size);
    if (hlen < 2 || hlen >= MAX_HEADER_BYTES)
        return gpt_error(err, "%s: header length %llu is not plausible", path, (unsigned long long)hlen);
    *data = file + 8 + hlen;
    *data_size = size - 8 - (size_t)hlen;
    *hdr = cJSON_ParseWithLength((const char *)file + 8, (size_t)hlen);
    if (!*hdr || !cJSON_IsObject(*hdr)) {
        cJSON_Delete(*hdr);
        *hdr = NULL;
        return gpt_error(err, "%s: the safetensors header is not valid JSON", path);
    }
    return 0;
}

int safetensors_entry(const cJSON *e, size_t data_size, const char *path, SafetensorsEntry *out, GptError *err) {
    const char *key = e->string;
    memset(out, 0, sizeof *out);
    if (entry_dtype(e, key, path, &out->dtype, err) != 0) return -1;
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (nd < 0 || nd > 8) return gpt_error(err, "%s: tensor %s has no shape of at most 8 dimensions", path, key);
    size_t need = dtype_size(out->dtype);
    for (int d = 0; d < nd; d++) {
        if (json_size(cJSON_GetArrayItem(shape, d), &out->dims[d]) != 0)
            return gpt_error(err, "%s: tensor %s: shape holds a value that is not a size", path, key);
        if (out->dims[d] && need > SIZE_MAX / out->dims[d])
            return gpt_error(err, "%s: tensor %s: shape too large", path, key);
        need *= out->dims[d];
    }
    out->ndim = nd;
    size_t begin, end;
    if (entry_range(e, key, data_size, path, &begin, &end, err) != 0) return -1;
    if (end - begin != need)
        return gpt_error(err, "%s: tensor %s has %zu bytes of data; its dtype and shape need %zu", path, key,
                         end - begin, need);
    out->begin = begin;
    return 0;
}

static int load_mapped(Model *m, const char *path, const char *config_path, const WeightOptions *o, GptError *err) {
    if (read_config(config_path, &m->config, err) != 0) return -1;
    const unsigned char *data;
    size_t data_size;
    cJSON *hdr;
    if (safetensors_header(m->map.data, m->map.size, path, &hdr, &data, &data_size, err) != 0) return -1;

    const GPT2Config *c = &m->config;
    size_t n_slots = gpt2_n_tensors(c);
    Slot *slots = calloc(n_slots, sizeof *slots);
    TensorRef *refs = calloc(n_slots, sizeof *refs);
    Range *ranges = NULL;
    int rc = -1;
    if (!slots || !refs) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < n_slots; i++) gpt2_tensor_spec(c, i, &slots[i].spec);

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
        if (!strcmp(name, "lm_head.weight") && !c->untied_output) {
            // tied to wte: we use wte, but a different shape means the
            // file is not the model the config describes
            size_t dims[2] = {(size_t)c->vocab_size, (size_t)c->n_embd};
            if (check_entry(e, key, dims, 2, data_size, path, &dt, &b, &en, err) != 0) goto done;
            continue;
        }
        if (is_mask_buffer(name)) continue;
        long layer;
        long i = gpt2_tensor_index(c, name, &layer);
        if (i < 0) {
            if (layer >= 0)
                gpt_error(err, "%s: tensor %s is in layer %ld, but config n_layer is %d", path, key, layer,
                          c->n_layer);
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
        if (check_entry(e, key, s->spec.dims, s->spec.ndim, data_size, path, &s->dtype, &s->begin, &s->end,
                        err) != 0)
            goto done;
        ranges[n_ranges++] = (Range){s->begin, s->end, key};
    }

    if (check_no_overlap(ranges, n_ranges, path, err) != 0) goto done;

    // Everything present? Then the tensors are handed over as they lie in
    // the mapping: model_set_weights uses aligned float32 vectors in place
    // and converts the rest (unaligned data, as in the published gpt2 file
    // whose data starts at byte 14,291; F16/BF16 vectors; matrices, which
    // Hugging Face stores (in, out)).
    for (size_t i = 0; i < n_slots; i++) {
        if (!slots[i].key) {
            gpt_error(err, "%s: tensor %s is missing", path, slots[i].spec.name);
            goto done;
        }
        refs[i] = (TensorRef){slots[i].dtype, gpt2_hf_layout(slots[i].spec.kind), data + slots[i].begin};
    }
    if (model_set_weights(m, refs, o, path, err) != 0) goto done;
    rc = 0;
done:
    cJSON_Delete(hdr);
    free(slots);
    free(refs);
    free(ranges);
    return rc;
}

static int safetensors_load(Model *m, const char *path, const WeightOptions *o, GptError *err) {
    char *cfg_path = path_sibling(path, "config.json");
    if (!cfg_path) return gpt_error(err, "%s: out of memory", path);
    int rc = path_exists(cfg_path) ? load_mapped(m, path, cfg_path, o, err)
                                   : gpt_error(err, "%s: no config.json beside it (looked for %s)", path, cfg_path);
    free(cfg_path);
    return rc;
}

// ---------------------------------------------------------------------------
// inspect

// A JSON number as a size; 0 for anything else.
static uint64_t json_u64(const cJSON *v) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9007199254740992.0) return 0;
    return (uint64_t)v->valuedouble;
}

// Every entry of the header, as stored (loading validated it).
static int safetensors_list(const unsigned char *file, size_t size, ModelInfo *info, GptError *err) {
    (void)size;  // the header was validated against it by loading
    uint64_t hlen = rd64(file);
    cJSON *hdr = cJSON_ParseWithLength((const char *)file + 8, (size_t)hlen);
    if (!hdr) return gpt_error(err, "%s: the safetensors header is not valid JSON", info->file);
    size_t cap = 0;
    int rc = 0;
    info->data_offset = 8 + (size_t)hlen;
    for (const cJSON *e = hdr->child; e && rc == 0; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        // loading checks the ignored entries' offsets only: read every
        // field defensively
        uint64_t dims[8] = {0};
        int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : 0;
        for (int d = 0; d < nd && d < 8; d++) dims[d] = json_u64(cJSON_GetArrayItem(shape, d));
        uint64_t b = cJSON_IsArray(offs) ? json_u64(cJSON_GetArrayItem(offs, 0)) : 0;
        uint64_t en = cJSON_IsArray(offs) ? json_u64(cJSON_GetArrayItem(offs, 1)) : 0;
        if (en < b) en = b;
        if (model_info_add(info, &cap, e->string, cJSON_IsString(dt) ? dt->valuestring : "?", nd, dims,
                           info->data_offset + b, en - b) != 0)
            rc = gpt_error(err, "%s: out of memory", info->file);
    }
    cJSON_Delete(hdr);
    return rc;
}

const ModelFormat SAFETENSORS_FORMAT = {"safetensors", safetensors_sniff, safetensors_load, safetensors_list};

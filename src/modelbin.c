/*
 * modelbin.c - gpt's one-file model.bin (write, validate, map), llm.c
 * checkpoints, and the tensor listing behind `gpt inspect`.
 *
 * What it does not: parse argv or print (main.c), find tokenizer files
 * (main.c), read safetensors weights (model.c; the converter gets a loaded
 * Model and writes what it holds).
 *
 * model.bin, format version 1 (docs/model-format.md says the same at length).
 * Every integer is a fixed-width little-endian integer; offsets are absolute
 * byte offsets in the file unless said otherwise.
 *
 *   header, 128 bytes:
 *      0  u8[8]  magic "GPT2BIN\0"
 *      8  u32    format version (1)
 *     12  u32    header bytes (128)
 *     16  u32    n_layer          20  u32 n_head        24  u32 n_embd
 *     28  u32    n_ctx            32  u32 vocab_size    36  f32 layer_norm_epsilon
 *     40  u32    n_tokens (tokenizer vocabulary; = vocab_size)
 *     44  u32    n_merges         48  u32 n_tensors (= 4 + 12 n_layer)
 *     52  u32    reserved, 0
 *     56  u64    index_offset     (n_tokens + 1) u32 string offsets, 4-aligned
 *     64  u64    strings_offset   72  u64 strings_bytes
 *     80  u64    merges_offset    n_merges x (i32 left id, i32 right id), 4-aligned
 *     88  u64    table_offset     n_tensors x 128-byte entries, 8-aligned
 *     96  u64    data_offset      a multiple of 4096
 *    104  u64    data_bytes
 *    112  u64    file_bytes       = data_offset + data_bytes = the file's size
 *    120  u64    reserved, 0
 *   tokenizer: token id i is strings[index[i] .. index[i+1]-1), its
 *      vocab.json form (e.g. "Ġthe") in UTF-8 followed by one NUL, so the
 *      strings are used in place; index[0] = 0, index[n_tokens] =
 *      strings_bytes. Merge rank r joins tokens merges[r].
 *   tensor table entry, 128 bytes:
 *      0  char[64] name, NUL-padded ("wte.weight", "h.0.ln_1.weight", ...)
 *     64  u32    dtype (0 F32, 1 F16, 2 BF16; this build reads F32)
 *     68  u32    ndim (1..4)      72  u64[4] dims (unused ones 0)
 *    104  u64    offset, relative to data_offset, a multiple of 64
 *    112  u64    nbytes           120  u64 reserved, 0
 *   Tensors appear in the canonical order of model.h (gpt2_tensor_name),
 *   matrices in Hugging Face's Conv1D (in, out) layout, data row-major.
 *
 * Loading is an mmap plus validation of the header, the table and the
 * tokenizer tables: every section and tensor must lie inside the file, the
 * file must be as long as the header says, every shape must be the one the
 * configuration implies. Weights are then pointers into the mapping; the data
 * region starts on a page and each tensor on 64 bytes, so float32 tensors are
 * aligned in place without a copy.
 *
 * llm.c checkpoints (karpathy/llm.c gpt2_124M.bin): a 256 x int32 header
 * (magic 20240326, version 3 = float32, maxT, V, L, NH, C, padded V), then
 * the parameters grouped by kind across layers, matrices as (out, in), wte
 * padded to padded-V rows. We copy them once into our layout.
 */
#define _POSIX_C_SOURCE 200809L
#include "modelbin.h"

#include <cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "model.bin is little-endian and its float32 data is used in place: port the loads first"
#endif

#define LLMC_MAGIC 20240326u
#define LLMC_HEADER_BYTES 1024u
#define MAX_TOKENS (1u << 24)
#define MAX_MERGES (1u << 24)
#define NAME_BYTES 64

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void wr32(unsigned char *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (unsigned char)(v >> (8 * k));
}

static void wr64(unsigned char *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// [off, off + len) inside [0, limit), written so that nothing overflows.
static int inside(uint64_t off, uint64_t len, uint64_t limit) { return off <= limit && len <= limit - off; }

static const char *dtype_name(uint32_t dt) {
    switch (dt) {
    case MODELBIN_F32: return "F32";
    case MODELBIN_F16: return "F16";
    case MODELBIN_BF16: return "BF16";
    default: return NULL;
    }
}

// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1, cp = c & 0x1F, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2, cp = c & 0x0F, min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= k) return 0;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += k + 1;
    }
    return 1;
}

static size_t numel(const size_t *dims, int ndim) { return ndim == 1 ? dims[0] : dims[0] * dims[1]; }

static void shape_str(char *buf, size_t n, const uint64_t *dims, int ndim) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%llu", d ? "," : "", (unsigned long long)dims[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

// ---------------------------------------------------------------------------
// model.bin: reading

typedef struct {
    uint32_t version, header_bytes;
    uint32_t n_layer, n_head, n_embd, n_ctx, vocab_size;
    float ln_eps;
    uint32_t n_tokens, n_merges, n_tensors, reserved32;
    uint64_t index_offset, strings_offset, strings_bytes, merges_offset, table_offset;
    uint64_t data_offset, data_bytes, file_bytes, reserved64;
} BinHeader;

static void header_read(const unsigned char *p, BinHeader *h) {
    h->version = rd32(p + 8);
    h->header_bytes = rd32(p + 12);
    h->n_layer = rd32(p + 16);
    h->n_head = rd32(p + 20);
    h->n_embd = rd32(p + 24);
    h->n_ctx = rd32(p + 28);
    h->vocab_size = rd32(p + 32);
    uint32_t eps = rd32(p + 36);
    memcpy(&h->ln_eps, &eps, 4);
    h->n_tokens = rd32(p + 40);
    h->n_merges = rd32(p + 44);
    h->n_tensors = rd32(p + 48);
    h->reserved32 = rd32(p + 52);
    h->index_offset = rd64(p + 56);
    h->strings_offset = rd64(p + 64);
    h->strings_bytes = rd64(p + 72);
    h->merges_offset = rd64(p + 80);
    h->table_offset = rd64(p + 88);
    h->data_offset = rd64(p + 96);
    h->data_bytes = rd64(p + 104);
    h->file_bytes = rd64(p + 112);
    h->reserved64 = rd64(p + 120);
}

static void header_write(unsigned char *p, const BinHeader *h) {
    memset(p, 0, MODELBIN_HEADER_BYTES);
    memcpy(p, MODELBIN_MAGIC, MODELBIN_MAGIC_LEN);
    wr32(p + 8, h->version);
    wr32(p + 12, h->header_bytes);
    wr32(p + 16, h->n_layer);
    wr32(p + 20, h->n_head);
    wr32(p + 24, h->n_embd);
    wr32(p + 28, h->n_ctx);
    wr32(p + 32, h->vocab_size);
    uint32_t eps;
    memcpy(&eps, &h->ln_eps, 4);
    wr32(p + 36, eps);
    wr32(p + 40, h->n_tokens);
    wr32(p + 44, h->n_merges);
    wr32(p + 48, h->n_tensors);
    wr64(p + 56, h->index_offset);
    wr64(p + 64, h->strings_offset);
    wr64(p + 72, h->strings_bytes);
    wr64(p + 80, h->merges_offset);
    wr64(p + 88, h->table_offset);
    wr64(p + 96, h->data_offset);
    wr64(p + 104, h->data_bytes);
    wr64(p + 112, h->file_bytes);
}

// Magic, version, sizes, configuration and section bounds: everything the
// header alone can tell. *c gets the configuration.
static int header_check(const unsigned char *file, size_t size, const char *path, BinHeader *h,
                        GptError *err) {
    if (size < MODELBIN_MAGIC_LEN || memcmp(file, MODELBIN_MAGIC, MODELBIN_MAGIC_LEN) != 0)
        return gpt_error(err, "%s: not a gpt model.bin (bad magic)", path);
    if (size < MODELBIN_HEADER_BYTES)
        return gpt_error(err, "%s: file is %zu bytes, shorter than the %u-byte model.bin header (truncated?)",
                         path, size, MODELBIN_HEADER_BYTES);
    header_read(file, h);
    if (h->version != MODELBIN_VERSION)
        return gpt_error(err, "%s: model.bin format version %u; this gpt reads version %u", path, h->version,
                         MODELBIN_VERSION);
    if (h->header_bytes != MODELBIN_HEADER_BYTES || h->reserved32 != 0 || h->reserved64 != 0)
        return gpt_error(err, "%s: damaged model.bin header (header size %u, reserved fields not zero?)", path,
                         h->header_bytes);
    if (h->file_bytes != size)
        return gpt_error(err, "%s: file is %zu bytes, its header says %llu (%s)", path, size,
                         (unsigned long long)h->file_bytes,
                         h->file_bytes > size ? "truncated?" : "trailing bytes: damaged?");
    return 0;
}

static int config_check(const BinHeader *h, const char *path, GPT2Config *c, GptError *err) {
    const uint32_t v[5] = {h->n_layer, h->n_head, h->n_embd, h->n_ctx, h->vocab_size};
    static const char *const names[5] = {"n_layer", "n_head", "n_embd", "n_ctx", "vocab_size"};
    for (int k = 0; k < 5; k++)
        if (v[k] > INT32_MAX) return gpt_error(err, "%s: %s %u is not a GPT-2 size", path, names[k], v[k]);
    c->n_layer = (int)h->n_layer;
    c->n_head = (int)h->n_head;
    c->n_embd = (int)h->n_embd;
    c->n_ctx = (int)h->n_ctx;
    c->vocab_size = (int)h->vocab_size;
    c->ln_eps = h->ln_eps;
    if (gpt2_config_validate(c, path, err) != 0) return -1;
    size_t want = gpt2_n_tensors(c);
    if (h->n_tensors != want)
        return gpt_error(err, "%s: the header lists %u tensors; a %d-layer GPT-2 has %zu", path, h->n_tensors,
                         c->n_layer, want);
    if (h->n_tokens != h->vocab_size)
        return gpt_error(err, "%s: the tokenizer has %u tokens, the model's vocabulary %u", path, h->n_tokens,
                         h->vocab_size);
    if (h->n_tokens == 0 || h->n_tokens > MAX_TOKENS || h->n_merges > MAX_MERGES)
        return gpt_error(err, "%s: %u tokens and %u merges is not a plausible tokenizer", path, h->n_tokens,
                         h->n_merges);
    // Sections: the metadata before the data region, the data region to the end.
    uint64_t meta = h->data_offset;
    if (h->data_offset % MODELBIN_DATA_ALIGN != 0 || h->data_offset < MODELBIN_HEADER_BYTES ||
        !inside(h->data_offset, h->data_bytes, h->file_bytes) || h->data_offset + h->data_bytes != h->file_bytes)
        return gpt_error(err, "%s: data region [%llu, +%llu) is not a page-aligned tail of the file", path,
                         (unsigned long long)h->data_offset, (unsigned long long)h->data_bytes);
    struct {
        const char *what;
        uint64_t off, len, align;
    } sec[4] = {
        {"token index", h->index_offset, ((uint64_t)h->n_tokens + 1) * 4, 4},
        {"token strings", h->strings_offset, h->strings_bytes, 1},
        {"merges", h->merges_offset, (uint64_t)h->n_merges * 8, 4},
        {"tensor table", h->table_offset, (uint64_t)h->n_tensors * MODELBIN_ENTRY_BYTES, 8},
    };
    for (int k = 0; k < 4; k++) {
        if (sec[k].off < MODELBIN_HEADER_BYTES || !inside(sec[k].off, sec[k].len, meta) ||
            sec[k].off % sec[k].align != 0)
            return gpt_error(err, "%s: %s at [%llu, +%llu) lies outside the metadata [%u, %llu) or is misaligned",
                             path, sec[k].what, (unsigned long long)sec[k].off, (unsigned long long)sec[k].len,
                             MODELBIN_HEADER_BYTES, (unsigned long long)meta);
    }
    // The sections may not share bytes: a writer lays them out one after
    // another, so an overlap means a damaged or forged header.
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            if (sec[a].len && sec[b].len && sec[a].off < sec[b].off + sec[b].len &&
                sec[b].off < sec[a].off + sec[a].len)
                return gpt_error(err, "%s: %s and %s overlap", path, sec[a].what, sec[b].what);
    return 0;
}

// Validates every table entry; ptr[i] gets tensor i's data.
static int table_check(const unsigned char *file, const BinHeader *h, const GPT2Config *c, const char *path,
                       const float **ptr, size_t *n_params, GptError *err) {
    const unsigned char *data = file + h->data_offset;
    uint64_t prev_end = 0;
    *n_params = 0;
    for (size_t i = 0; i < h->n_tensors; i++) {
        const unsigned char *e = file + h->table_offset + i * MODELBIN_ENTRY_BYTES;
        char want_name[96], name[NAME_BYTES + 1];
        gpt2_tensor_name(c, i, want_name, sizeof want_name);
        memcpy(name, e, NAME_BYTES);
        name[NAME_BYTES] = '\0';
        const unsigned char *nul = memchr(e, 0, NAME_BYTES);
        int padded = nul != NULL;
        for (const unsigned char *q = nul; padded && q < e + NAME_BYTES; q++) padded = *q == 0;
        if (!padded)
            return gpt_error(err, "%s: tensor %zu: name field is not a NUL-padded string (expected %s)", path, i,
                             want_name);
        if (strcmp(name, want_name) != 0)
            return gpt_error(err, "%s: tensor %zu is named '%.64s', expected %s", path, i, name, want_name);
        uint32_t dt = rd32(e + 64), ndim = rd32(e + 68);
        uint64_t off = rd64(e + 104), nbytes = rd64(e + 112);
        if (dt != MODELBIN_F32) {
            if (dtype_name(dt))
                return gpt_error(err, "%s: tensor %s has dtype %s; this build reads only F32 tensors from a model.bin",
                                 path, name, dtype_name(dt));
            return gpt_error(err, "%s: tensor %s has unknown dtype %u (known: 0 F32, 1 F16, 2 BF16)", path, name, dt);
        }
        size_t dims[2];
        int nd = gpt2_tensor_shape(c, i, dims);
        uint64_t got[4];
        int ok = ndim == (uint32_t)nd;
        for (int d = 0; d < 4; d++) {
            got[d] = rd64(e + 72 + 8 * (size_t)d);
            if (d < nd ? got[d] != dims[d] : got[d] != 0) ok = 0;
        }
        if (rd64(e + 120) != 0) return gpt_error(err, "%s: tensor %s: reserved field is not zero", path, name);
        if (!ok) {
            char gs[128], ws[64];
            uint64_t w64[2] = {dims[0], dims[1]};
            int shown = ndim <= 4 ? (int)ndim : 4;  // and any stray dims beyond ndim
            for (int d = shown; d < 4; d++)
                if (got[d]) shown = d + 1;
            shape_str(gs, sizeof gs, got, shown);
            shape_str(ws, sizeof ws, w64, nd);
            return gpt_error(err, "%s: tensor %s has shape %s (ndim %u), config implies %s", path, name, gs, ndim, ws);
        }
        size_t n = numel(dims, nd);
        if (nbytes != (uint64_t)n * 4)
            return gpt_error(err, "%s: tensor %s has %llu bytes; F32 of its shape needs %zu", path, name,
                             (unsigned long long)nbytes, n * 4);
        if (off % MODELBIN_TENSOR_ALIGN != 0 || !inside(off, nbytes, h->data_bytes))
            return gpt_error(err, "%s: tensor %s at data offset %llu (+%llu bytes) lies outside the data region of "
                             "%llu bytes or is not 64-byte aligned", path, name, (unsigned long long)off,
                             (unsigned long long)nbytes, (unsigned long long)h->data_bytes);
        if (off < prev_end)
            return gpt_error(err, "%s: tensor %s overlaps the tensor before it", path, name);
        prev_end = off + nbytes;
        ptr[i] = (const float *)(const void *)(data + off);
        *n_params += n;
    }
    return 0;
}

// Checks the stored tables and builds the tokenizer from them in place.
static Tokenizer *tokenizer_check(const unsigned char *file, const BinHeader *h, const char *path,
                                  GptError *err) {
    const unsigned char *idx = file + h->index_offset;
    const unsigned char *str = file + h->strings_offset;
    size_t n = h->n_tokens;
    const char **strings = malloc(n * sizeof *strings);
    Tokenizer *t = NULL;
    if (!strings) {
        gpt_error(err, "%s: out of memory", path);
        return NULL;
    }
    if (rd32(idx) != 0 || rd32(idx + 4 * n) != h->strings_bytes) {
        gpt_error(err, "%s: token index does not span the strings section (%u..%u, %llu bytes)", path, rd32(idx),
                  rd32(idx + 4 * n), (unsigned long long)h->strings_bytes);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t b = rd32(idx + 4 * i), e = rd32(idx + 4 * i + 4);
        // b < e <= strings_bytes: e is checked against the next start, the
        // last one against strings_bytes above.
        if ((uint64_t)e <= (uint64_t)b + 1 || e > h->strings_bytes) {
            gpt_error(err, "%s: token %zu: string bounds [%u, %u) are not a non-empty NUL-terminated string", path, i,
                      b, e);
            goto done;
        }
        size_t len = (size_t)(e - b) - 1;
        if (str[b + len] != 0 || memchr(str + b, 0, len) != NULL || !utf8_valid(str + b, len)) {
            gpt_error(err, "%s: token %zu: string is not valid UTF-8 ending in one NUL", path, i);
            goto done;
        }
        strings[i] = (const char *)str + b;
    }
    const int32_t(*merges)[2] = (const int32_t(*)[2])(const void *)(file + h->merges_offset);
    for (size_t r = 0; r < h->n_merges; r++) {
        for (int k = 0; k < 2; k++) {
            if (merges[r][k] < 0 || (uint32_t)merges[r][k] >= h->n_tokens) {
                gpt_error(err, "%s: merge %zu references token id %d outside the vocabulary of %u", path, r,
                          (int)merges[r][k], h->n_tokens);
                goto done;
            }
        }
    }
    t = tokenizer_from_tables(n, strings, h->n_merges, merges, err);
    if (!t) {
        GptError inner = *err;
        gpt_error(err, "%s: stored tokenizer: %s", path, inner.msg);
    }
done:
    free(strings);
    return t;
}

int modelbin_load_mapped(Model *m, const char *path, GptError *err) {
    const unsigned char *file = m->map.data;
    size_t size = m->map.size;
    BinHeader h;
    if (header_check(file, size, path, &h, err) != 0) return -1;
    if (config_check(&h, path, &m->config, err) != 0) return -1;
    size_t nt = h.n_tensors;
    const float **ptr = calloc(nt, sizeof *ptr);
    if (!ptr) return gpt_error(err, "%s: out of memory", path);
    size_t n_params;
    int rc = -1;
    if (table_check(file, &h, &m->config, path, ptr, &n_params, err) != 0) goto done;
    m->tokenizer = tokenizer_check(file, &h, path, err);
    if (!m->tokenizer) goto done;
    if (model_set_weights(m, ptr, path, err) != 0) goto done;
    m->n_params = n_params;
    m->weight_bytes = n_params * sizeof(float);
    snprintf(m->source_kind, sizeof m->source_kind, "model.bin");
    rc = 0;
done:
    free(ptr);
    return rc;
}

// ---------------------------------------------------------------------------
// model.bin: writing

typedef struct {
    FILE *f;
    uint64_t pos;  // bytes written so far: the layout is checked against it
    int failed;
} Out;

static void out_bytes(Out *o, const void *p, size_t n) {
    if (o->failed || n == 0) return;
    if (fwrite(p, 1, n, o->f) != n) o->failed = 1;
    o->pos += n;
}

static void out_pad_to(Out *o, uint64_t target) {
    static const unsigned char zeros[4096];
    while (!o->failed && o->pos < target) {
        uint64_t n = target - o->pos;
        out_bytes(o, zeros, n < sizeof zeros ? (size_t)n : sizeof zeros);
    }
}

int modelbin_write(const Model *m, const Tokenizer *tok, const char *out_path, size_t *bytes_out,
                   GptError *err) {
    const GPT2Config *c = &m->config;
    size_t V = tokenizer_vocab_size(tok);
    if (V != (size_t)c->vocab_size)
        return gpt_error(err, "%s: the model's vocabulary has %d tokens, the tokenizer %zu", out_path,
                         c->vocab_size, V);
    size_t n_merges = tokenizer_n_merges(tok);
    if (n_merges > MAX_MERGES) return gpt_error(err, "%s: %zu merges is more than a model.bin holds", out_path, n_merges);

    BinHeader h = {0};
    h.version = MODELBIN_VERSION;
    h.header_bytes = MODELBIN_HEADER_BYTES;
    h.n_layer = (uint32_t)c->n_layer;
    h.n_head = (uint32_t)c->n_head;
    h.n_embd = (uint32_t)c->n_embd;
    h.n_ctx = (uint32_t)c->n_ctx;
    h.vocab_size = (uint32_t)c->vocab_size;
    h.ln_eps = c->ln_eps;
    h.n_tokens = (uint32_t)V;
    h.n_merges = (uint32_t)n_merges;
    h.n_tensors = (uint32_t)gpt2_n_tensors(c);
    for (size_t i = 0; i < V; i++) {
        const char *s = tokenizer_token_string(tok, (int32_t)i);
        size_t len = strlen(s);
        // what the loader would refuse, refused now
        if (len == 0 || !utf8_valid((const unsigned char *)s, len))
            return gpt_error(err, "%s: token %zu: string is empty or not valid UTF-8", out_path, i);
        h.strings_bytes += len + 1;
    }
    if (h.strings_bytes > UINT32_MAX) return gpt_error(err, "%s: token strings exceed 4 GiB", out_path);
    h.index_offset = MODELBIN_HEADER_BYTES;
    h.strings_offset = h.index_offset + ((uint64_t)V + 1) * 4;
    h.merges_offset = align_up(h.strings_offset + h.strings_bytes, 8);
    h.table_offset = align_up(h.merges_offset + 8 * (uint64_t)n_merges, MODELBIN_TENSOR_ALIGN);
    h.data_offset = align_up(h.table_offset + (uint64_t)h.n_tensors * MODELBIN_ENTRY_BYTES, MODELBIN_DATA_ALIGN);
    uint64_t data_end = 0;
    for (size_t i = 0; i < h.n_tensors; i++) {
        size_t dims[2];
        int nd = gpt2_tensor_shape(c, i, dims);
        data_end = align_up(data_end, MODELBIN_TENSOR_ALIGN) + (uint64_t)numel(dims, nd) * 4;
    }
    h.data_bytes = data_end;
    h.file_bytes = h.data_offset + h.data_bytes;

    size_t plen = strlen(out_path) + 16;
    char *tmp = malloc(plen);
    if (!tmp) return gpt_error(err, "%s: out of memory", out_path);
    snprintf(tmp, plen, "%s.tmp-XXXXXX", out_path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        gpt_error(err, "%s: cannot create a temporary file beside it: %s", out_path, strerror(errno));
        free(tmp);
        return -1;
    }
    Out o = {fdopen(fd, "wb"), 0, 0};
    int rc = -1;
    if (!o.f) {
        gpt_error(err, "%s: %s", tmp, strerror(errno));
        close(fd);
        goto fail;
    }
    fchmod(fd, 0644);  // mkstemp's 0600 would make a model private to its writer

    unsigned char buf[MODELBIN_ENTRY_BYTES > MODELBIN_HEADER_BYTES ? MODELBIN_ENTRY_BYTES : MODELBIN_HEADER_BYTES];
    header_write(buf, &h);
    out_bytes(&o, buf, MODELBIN_HEADER_BYTES);
    uint32_t at = 0;
    for (size_t i = 0; i <= V; i++) {
        unsigned char b[4];
        wr32(b, at);
        out_bytes(&o, b, 4);
        if (i < V) at += (uint32_t)strlen(tokenizer_token_string(tok, (int32_t)i)) + 1;
    }
    for (size_t i = 0; i < V; i++) {
        const char *s = tokenizer_token_string(tok, (int32_t)i);
        out_bytes(&o, s, strlen(s) + 1);
    }
    out_pad_to(&o, h.merges_offset);
    for (size_t r = 0; r < n_merges; r++) {
        int32_t a, b;
        tokenizer_merge_pair(tok, r, &a, &b);
        unsigned char p[8];
        wr32(p, (uint32_t)a);
        wr32(p + 4, (uint32_t)b);
        out_bytes(&o, p, 8);
    }
    out_pad_to(&o, h.table_offset);
    uint64_t off = 0;
    for (size_t i = 0; i < h.n_tensors; i++) {
        size_t dims[2];
        int nd = gpt2_tensor_shape(c, i, dims);
        memset(buf, 0, sizeof buf);
        gpt2_tensor_name(c, i, (char *)buf, NAME_BYTES);
        wr32(buf + 64, MODELBIN_F32);
        wr32(buf + 68, (uint32_t)nd);
        for (int d = 0; d < nd; d++) wr64(buf + 72 + 8 * d, dims[d]);
        off = align_up(off, MODELBIN_TENSOR_ALIGN);
        uint64_t nbytes = (uint64_t)numel(dims, nd) * 4;
        wr64(buf + 104, off);
        wr64(buf + 112, nbytes);
        out_bytes(&o, buf, MODELBIN_ENTRY_BYTES);
        off += nbytes;
    }
    out_pad_to(&o, h.data_offset);
    for (size_t i = 0; i < h.n_tensors; i++) {
        size_t dims[2];
        int nd = gpt2_tensor_shape(c, i, dims);
        out_pad_to(&o, h.data_offset + align_up(o.pos - h.data_offset, MODELBIN_TENSOR_ALIGN));
        out_bytes(&o, model_tensor(m, i), numel(dims, nd) * sizeof(float));
    }
    if (o.failed || fflush(o.f) != 0 || fsync(fileno(o.f)) != 0) {
        gpt_error(err, "%s: write error: %s", tmp, strerror(errno));
        goto fail;
    }
    if (o.pos != h.file_bytes) {
        gpt_error(err, "%s: wrote %llu bytes, the layout says %llu (a bug in modelbin.c)", tmp,
                  (unsigned long long)o.pos, (unsigned long long)h.file_bytes);
        goto fail;
    }
    FILE *f = o.f;
    o.f = NULL;
    if (fclose(f) != 0) {
        gpt_error(err, "%s: write error: %s", tmp, strerror(errno));
        goto fail;
    }
    if (rename(tmp, out_path) != 0) {
        gpt_error(err, "%s: cannot rename %s to it: %s", out_path, tmp, strerror(errno));
        goto fail;
    }
    if (bytes_out) *bytes_out = (size_t)h.file_bytes;
    rc = 0;
    goto done;
fail:
    if (o.f) fclose(o.f);
    unlink(tmp);
done:
    free(tmp);
    return rc;
}

// ---------------------------------------------------------------------------
// llm.c

// llm.c's parameter tensors in file order; the 12 per-layer kinds are in the
// same order as ours (model.h), each grouped across layers.
static const char *const LLMC_NAMES[16] = {"wte",  "wpe",      "ln1w",     "ln1b", "qkvw", "qkvb",
                                           "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                           "fcprojw",  "fcprojb",  "lnfw", "lnfb"};

typedef struct {
    GPT2Config c;
    uint32_t version;
    size_t Vp;         // padded vocabulary rows of wte
    size_t n_floats;   // parameters in the file, padding included
} LlmcHeader;

static int llmc_header(const unsigned char *file, size_t size, const char *path, LlmcHeader *h, GptError *err) {
    if (size < LLMC_HEADER_BYTES)
        return gpt_error(err, "%s: file is %zu bytes, shorter than llm.c's %u-byte header", path, size,
                         LLMC_HEADER_BYTES);
    int32_t v[8];
    for (int k = 0; k < 8; k++) v[k] = (int32_t)rd32(file + 4 * k);
    if ((uint32_t)v[0] != LLMC_MAGIC) return gpt_error(err, "%s: not an llm.c checkpoint (bad magic)", path);
    h->version = (uint32_t)v[1];
    if (v[1] != 3)
        return gpt_error(err, "%s: llm.c checkpoint version %d%s; gpt reads version 3 (float32)", path, v[1],
                         v[1] == 5 ? " (bfloat16)" : "");
    GPT2Config *c = &h->c;
    c->n_ctx = v[2];
    c->vocab_size = v[3];
    c->n_layer = v[4];
    c->n_head = v[5];
    c->n_embd = v[6];
    c->ln_eps = 1e-5f;  // llm.c's layernorm uses 1e-5, as GPT-2 does
    if (gpt2_config_validate(c, path, err) != 0) return -1;
    if (v[7] < v[3] || v[7] - v[3] > (1 << 20))
        return gpt_error(err, "%s: padded vocabulary %d is not %d or a little more", path, v[7], v[3]);
    h->Vp = (size_t)v[7];
    size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer, T = (size_t)c->n_ctx;
    // sizes are bounded by gpt2_config_validate: nothing here overflows 64 bits
    h->n_floats = h->Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
    uint64_t want = LLMC_HEADER_BYTES + 4 * (uint64_t)h->n_floats;
    if (size != want)
        return gpt_error(err, "%s: file is %zu bytes; an llm.c checkpoint of the shape its header gives is %llu (%s)",
                         path, size, (unsigned long long)want, size < want ? "truncated?" : "damaged?");
    return 0;
}

// dst(in, out) = src(out, in)^T, in blocks that stay in cache.
static void transpose(float *dst, const float *src, size_t in, size_t out) {
    enum { B = 32 };
    for (size_t o0 = 0; o0 < out; o0 += B)
        for (size_t i0 = 0; i0 < in; i0 += B)
            for (size_t o = o0; o < out && o < o0 + B; o++)
                for (size_t i = i0; i < in && i < i0 + B; i++) dst[i * out + o] = src[o * in + i];
}

int llmc_load_mapped(Model *m, const char *path, GptError *err) {
    LlmcHeader h;
    if (llmc_header(m->map.data, m->map.size, path, &h, err) != 0) return -1;
    m->config = h.c;
    const GPT2Config *c = &m->config;
    size_t nt = gpt2_n_tensors(c), L = (size_t)c->n_layer;
    size_t total = 0, n_params = 0;
    for (size_t i = 0; i < nt; i++) {
        size_t dims[2];
        size_t n = numel(dims, gpt2_tensor_shape(c, i, dims));
        n_params += n;
        total += (n + 15) / 16 * 16;  // each tensor on 64 bytes
    }
    const float **ptr = calloc(nt, sizeof *ptr);
    m->owned = memory_alloc_large(total * sizeof(float));
    if (!ptr || !m->owned) {
        free(ptr);
        return gpt_error(err, "%s: out of memory for %zu MB of weights", path, total * 4 >> 20);
    }
    // the mapping is page-aligned and the header 1024 bytes: floats in place
    const float *src = (const float *)(const void *)(m->map.data + LLMC_HEADER_BYTES);
    float *dst = m->owned;
    size_t C = (size_t)c->n_embd;
    for (size_t i = 0; i < nt; i++) {
        size_t dims[2];
        int nd = gpt2_tensor_shape(c, i, dims);
        size_t n = numel(dims, nd);
        const float *from;
        if (i == 0) {
            from = src;  // the first V of Vp rows
        } else if (i == 1) {
            from = src + h.Vp * C;
        } else if (i >= nt - 2) {
            from = src + h.n_floats - (nt - i) * C;  // lnfw, lnfb end the file
        } else {
            // kind k of layer l: skip all layers of the kinds before k
            size_t k = (i - 2) % 12, l = (i - 2) / 12, base = h.Vp * C + (size_t)c->n_ctx * C;
            for (size_t j = 0; j < k; j++) {
                size_t d[2];
                base += L * numel(d, gpt2_tensor_shape(c, 2 + j, d));
            }
            from = src + base + l * n;
        }
        if (nd == 2 && i >= 2) transpose(dst, from, dims[0], dims[1]);
        else memcpy(dst, from, n * sizeof(float));
        file_release(&m->map, (size_t)((const unsigned char *)from - m->map.data), n * sizeof(float));
        ptr[i] = dst;
        dst += (n + 15) / 16 * 16;
    }
    int rc = model_set_weights(m, ptr, path, err);
    free(ptr);
    if (rc != 0) return -1;
    file_unmap(&m->map);  // nothing points into it any more
    m->n_params = n_params;
    m->weight_bytes = n_params * sizeof(float);
    snprintf(m->source_kind, sizeof m->source_kind, "llm.c");
    return 0;
}

// ---------------------------------------------------------------------------
// inspect

static int add_info(ModelInfo *info, size_t *cap, const char *name, const char *dtype, int ndim,
                    const uint64_t *dims, uint64_t offset, uint64_t nbytes) {
    if (info->n_tensors == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        TensorInfo *t = realloc(info->tensors, nc * sizeof *t);
        if (!t) return -1;
        info->tensors = t;
        *cap = nc;
    }
    TensorInfo *t = &info->tensors[info->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim > 8 ? 8 : ndim;
    for (int d = 0; d < t->ndim; d++) t->dims[d] = dims[d];
    t->offset = offset;
    t->nbytes = nbytes;
    return 0;
}

static int by_offset(const void *a, const void *b) {
    uint64_t x = ((const TensorInfo *)a)->offset, y = ((const TensorInfo *)b)->offset;
    return x < y ? -1 : x > y;
}

// A JSON number as a size; 0 for anything else.
static uint64_t json_u64(const cJSON *v) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9007199254740992.0) return 0;
    return (uint64_t)v->valuedouble;
}

// The safetensors header, already validated by model_load.
static int list_safetensors(const unsigned char *file, size_t size, ModelInfo *info, GptError *err) {
    uint64_t hlen = rd64(file);
    cJSON *hdr = cJSON_ParseWithLength((const char *)file + 8, (size_t)hlen);
    if (!hdr) return gpt_error(err, "%s: the safetensors header is not valid JSON", info->file);
    size_t cap = 0;
    int rc = 0;
    info->data_offset = 8 + (size_t)hlen;
    (void)size;
    for (const cJSON *e = hdr->child; e && rc == 0; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) continue;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        // model_load skips the entries it ignores (mask buffers) unchecked:
        // read every field defensively
        uint64_t dims[8] = {0};
        int nd = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : 0;
        for (int d = 0; d < nd && d < 8; d++) dims[d] = json_u64(cJSON_GetArrayItem(shape, d));
        uint64_t b = cJSON_IsArray(offs) ? json_u64(cJSON_GetArrayItem(offs, 0)) : 0;
        uint64_t en = cJSON_IsArray(offs) ? json_u64(cJSON_GetArrayItem(offs, 1)) : 0;
        if (en < b) en = b;
        if (add_info(info, &cap, e->string, cJSON_IsString(dt) ? dt->valuestring : "?", nd, dims,
                     info->data_offset + b, en - b) != 0)
            rc = gpt_error(err, "%s: out of memory", info->file);
    }
    cJSON_Delete(hdr);
    return rc;
}

static int list_modelbin(const unsigned char *file, ModelInfo *info, GptError *err) {
    BinHeader h;
    header_read(file, &h);
    info->version = h.version;
    info->data_offset = (size_t)h.data_offset;
    size_t cap = 0;
    for (size_t i = 0; i < h.n_tensors; i++) {
        const unsigned char *e = file + h.table_offset + i * MODELBIN_ENTRY_BYTES;
        uint64_t dims[4];
        for (int d = 0; d < 4; d++) dims[d] = rd64(e + 72 + 8 * d);
        const char *dt = dtype_name(rd32(e + 64));
        if (add_info(info, &cap, (const char *)e, dt ? dt : "?", (int)rd32(e + 68), dims,
                     h.data_offset + rd64(e + 104), rd64(e + 112)) != 0)
            return gpt_error(err, "%s: out of memory", info->file);
    }
    return 0;
}

static int list_llmc(const unsigned char *file, size_t size, ModelInfo *info, GptError *err) {
    LlmcHeader h;
    if (llmc_header(file, size, info->file, &h, err) != 0) return -1;
    info->version = h.version;
    info->data_offset = LLMC_HEADER_BYTES;
    uint64_t L = (uint64_t)h.c.n_layer, C = (uint64_t)h.c.n_embd, T = (uint64_t)h.c.n_ctx;
    // as llm.c stores them: matrices (L, out, in)
    const uint64_t shapes[16][4] = {
        {2, h.Vp, C, 0}, {2, T, C, 0},     {2, L, C, 0},     {2, L, C, 0},
        {3, L, 3 * C, C}, {2, L, 3 * C, 0}, {3, L, C, C},     {2, L, C, 0},
        {2, L, C, 0},     {2, L, C, 0},     {3, L, 4 * C, C}, {2, L, 4 * C, 0},
        {3, L, C, 4 * C}, {2, L, C, 0},     {1, C, 0, 0},     {1, C, 0, 0},
    };
    uint64_t off = LLMC_HEADER_BYTES;
    size_t cap = 0;
    for (int k = 0; k < 16; k++) {
        int nd = (int)shapes[k][0];
        const uint64_t *dims = &shapes[k][1];
        uint64_t n = 1;
        for (int d = 0; d < nd; d++) n *= dims[d];
        if (add_info(info, &cap, LLMC_NAMES[k], "F32", nd, dims, off, 4 * n) != 0)
            return gpt_error(err, "%s: out of memory", info->file);
        off += 4 * n;
    }
    return 0;
}

int model_inspect(const char *path, ModelInfo *info, GptError *err) {
    memset(info, 0, sizeof *info);
    Model m;
    if (model_load(&m, path, err) != 0) return -1;
    info->config = m.config;
    info->n_params = m.n_params;
    snprintf(info->kind, sizeof info->kind, "%s", m.source_kind);
    if (m.tokenizer) {
        info->n_tokens = tokenizer_vocab_size(m.tokenizer);
        info->n_merges = tokenizer_n_merges(m.tokenizer);
    }
    model_free(&m);
    if (path_is_dir(path)) snprintf(info->file, sizeof info->file, "%s/model.safetensors", path);
    else snprintf(info->file, sizeof info->file, "%s", path);
    MappedFile f;
    if (file_map(info->file, &f, err) != 0) return -1;
    info->file_bytes = f.size;
    int rc;
    if (!strcmp(info->kind, "model.bin")) rc = list_modelbin(f.data, info, err);
    else if (!strcmp(info->kind, "llm.c")) rc = list_llmc(f.data, f.size, info, err);
    else rc = list_safetensors(f.data, f.size, info, err);
    file_unmap(&f);
    if (rc == 0) qsort(info->tensors, info->n_tensors, sizeof *info->tensors, by_offset);
    else model_info_free(info);
    return rc;
}

void model_info_free(ModelInfo *info) {
    if (!info) return;
    free(info->tensors);
    info->tensors = NULL;
    info->n_tensors = 0;
}

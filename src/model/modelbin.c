/*
 * modelbin.c - gpt's one-file model.bin: validate and map (loading), write
 * (`gpt convert`), list (`gpt inspect`); MODELBIN_FORMAT (formats.h) is the
 * first and the last. docs/model-format.md describes the format, field by
 * field; this file follows it.
 *
 * Loading is an mmap plus validation of the header, the table and the
 * tokenizer tables: every section and tensor must lie inside the file, the
 * file must be as long as the header says, every tensor must be the one the
 * tensor table (model.h) names at its place, with the shape the configuration
 * implies. Weights are then pointers into the mapping; the data region starts
 * on a page and each tensor on 64 bytes, so float32 tensors are aligned in
 * place without a copy.
 *
 * What it does not: parse argv or print (src/cli), find tokenizer files
 * (src/cli/locate.c), read other formats (the converter gets a loaded Model
 * and writes what it holds).
 */
#include "model/modelbin.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/fileio.h"
#include "model/formats.h"
#include "model/tokenizer.h"
#include "base/utf8.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "model.bin is little-endian and its float32 data is used in place: port the loads first"
#endif

#define MAX_TOKENS (1u << 24)
#define MAX_MERGES (1u << 24)
#define NAME_BYTES 64

// ---------------------------------------------------------------------------
// model.bin: the header and a tensor table entry, each described once

// The header, field by field: what BinHeader holds and where each field
// lies in the file, once (docs/model-format.md, "Header"). X(type, field,
// byte offset); the 8 magic bytes are at 0, and the fields end at
// MODELBIN_HEADER_BYTES. Reading and writing both walk this table.
#define BIN_HEADER_FIELDS(X)              \
    X(uint32_t, version, 8)               \
    X(uint32_t, header_bytes, 12)         \
    X(uint32_t, n_layer, 16)              \
    X(uint32_t, n_head, 20)               \
    X(uint32_t, n_embd, 24)               \
    X(uint32_t, n_ctx, 28)                \
    X(uint32_t, vocab_size, 32)           \
    X(float, ln_eps, 36)                  \
    X(uint32_t, n_tokens, 40)             \
    X(uint32_t, n_merges, 44)             \
    X(uint32_t, n_tensors, 48)            \
    X(uint32_t, flags, 52)                \
    X(uint64_t, index_offset, 56)         \
    X(uint64_t, strings_offset, 64)       \
    X(uint64_t, strings_bytes, 72)        \
    X(uint64_t, merges_offset, 80)        \
    X(uint64_t, table_offset, 88)         \
    X(uint64_t, data_offset, 96)          \
    X(uint64_t, data_bytes, 104)          \
    X(uint64_t, file_bytes, 112)          \
    X(uint32_t, n_inner, 120)             \
    X(uint32_t, activation, 124)

#define HEADER_MEMBER(type, field, at) type field;
typedef struct {
    BIN_HEADER_FIELDS(HEADER_MEMBER)
} BinHeader;
#undef HEADER_MEMBER

// Where each field lies: in the file (4 or 8 little-endian bytes; a float
// as its bits) and in BinHeader.
typedef struct {
    size_t at, bytes, member;
} HeaderField;
#define HEADER_FIELD(type, field, at) {at, sizeof(type), offsetof(BinHeader, field)},
static const HeaderField HEADER[] = {BIN_HEADER_FIELDS(HEADER_FIELD)};
#undef HEADER_FIELD
enum { N_HEADER_FIELDS = sizeof HEADER / sizeof *HEADER };

static void header_read(const unsigned char *p, BinHeader *h) {
    for (size_t i = 0; i < N_HEADER_FIELDS; i++) {
        char *member = (char *)h + HEADER[i].member;
        if (HEADER[i].bytes == 4) {
            uint32_t v = rd32(p + HEADER[i].at);
            memcpy(member, &v, 4);
        } else {
            uint64_t v = rd64(p + HEADER[i].at);
            memcpy(member, &v, 8);
        }
    }
}

static void header_write(unsigned char *p, const BinHeader *h) {
    memset(p, 0, MODELBIN_HEADER_BYTES);
    memcpy(p, MODELBIN_MAGIC, MODELBIN_MAGIC_LEN);
    for (size_t i = 0; i < N_HEADER_FIELDS; i++) {
        const char *member = (const char *)h + HEADER[i].member;
        if (HEADER[i].bytes == 4) {
            uint32_t v;
            memcpy(&v, member, 4);
            wr32(p + HEADER[i].at, v);
        } else {
            uint64_t v;
            memcpy(&v, member, 8);
            wr64(p + HEADER[i].at, v);
        }
    }
}

// One entry of the tensor table (MODELBIN_ENTRY_BYTES, docs/model-format.md,
// "Tensor table"), at these byte offsets. Version 1 has a reserved u64 at
// 120; version 2 the layout there, and a reserved u32 at 124.
enum {
    ENTRY_NAME = 0,       // NAME_BYTES, NUL-padded
    ENTRY_DTYPE = 64,     // u32, dtype.h's code
    ENTRY_NDIM = 68,      // u32
    ENTRY_DIMS = 72,      // 4 x u64, Hugging Face's order; 0 past ndim
    ENTRY_OFFSET = 104,   // u64, from the start of the data region
    ENTRY_NBYTES = 112,   // u64
    ENTRY_LAYOUT = 120,   // u32 (version 2): 0 (in, out), 1 (out, in)
    ENTRY_RESERVED = 124, // u32 (version 2)
};

typedef struct {
    uint32_t dtype, ndim, layout;
    uint64_t dims[4], offset, nbytes;
    uint64_t reserved;  // must be 0: the version's reserved field
} BinEntry;

// Entry e of a file of the given version (the name is read where it is
// checked).
static void entry_read(const unsigned char *e, uint32_t version, BinEntry *t) {
    t->dtype = rd32(e + ENTRY_DTYPE);
    t->ndim = rd32(e + ENTRY_NDIM);
    for (int d = 0; d < 4; d++) t->dims[d] = rd64(e + ENTRY_DIMS + 8 * (size_t)d);
    t->offset = rd64(e + ENTRY_OFFSET);
    t->nbytes = rd64(e + ENTRY_NBYTES);
    t->layout = version >= 2 ? rd32(e + ENTRY_LAYOUT) : 0;
    t->reserved = version >= 2 ? rd32(e + ENTRY_RESERVED) : rd64(e + ENTRY_LAYOUT);
}

// A version-2 entry named `name`, its reserved field zero.
static void entry_write(unsigned char *e, const char *name, const BinEntry *t) {
    memset(e, 0, MODELBIN_ENTRY_BYTES);
    snprintf((char *)e + ENTRY_NAME, NAME_BYTES, "%s", name);
    wr32(e + ENTRY_DTYPE, t->dtype);
    wr32(e + ENTRY_NDIM, t->ndim);
    for (int d = 0; d < 4; d++) wr64(e + ENTRY_DIMS + 8 * (size_t)d, t->dims[d]);
    wr64(e + ENTRY_OFFSET, t->offset);
    wr64(e + ENTRY_NBYTES, t->nbytes);
    wr32(e + ENTRY_LAYOUT, t->layout);
}

// ---------------------------------------------------------------------------
// model.bin: reading

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
    if (h->version < 1 || h->version > MODELBIN_VERSION)
        return gpt_error(err, "%s: model.bin format version %u; this gpt reads versions 1 to %u", path, h->version,
                         MODELBIN_VERSION);
    // versions 1 and 2: flags, n_inner and activation were reserved, zero
    int v3 = h->version >= 3;
    if (h->header_bytes != MODELBIN_HEADER_BYTES || (!v3 && (h->flags || h->n_inner || h->activation)) ||
        (h->flags & ~(uint32_t)MODELBIN_FLAGS_KNOWN) != 0)
        return gpt_error(err, "%s: damaged model.bin header (header size %u, reserved fields or flags not zero?)",
                         path, h->header_bytes);
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
    if (h->version >= 3) {  // before: GPT-2's MLP and attention, tied (every field 0)
        if (h->n_inner == 0 || h->n_inner > INT32_MAX)
            return gpt_error(err, "%s: n_inner %u is not an MLP width", path, h->n_inner);
        if (h->activation >= ACTIVATION_COUNT)
            return gpt_error(err, "%s: activation %u is not one this gpt knows (a newer gpt's file?)", path,
                             h->activation);
        c->n_inner = h->n_inner == 4ull * h->n_embd ? 0 : (int)h->n_inner;
        c->activation = (Activation)h->activation;
        c->attn_unscaled = (h->flags & MODELBIN_ATTN_UNSCALED) != 0;
        c->attn_by_layer = (h->flags & MODELBIN_ATTN_BY_LAYER) != 0;
        c->untied_output = (h->flags & MODELBIN_UNTIED_OUTPUT) != 0;
    }
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
        !range_inside(h->data_offset, h->data_bytes, h->file_bytes) || h->data_offset + h->data_bytes != h->file_bytes)
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
        if (sec[k].off < MODELBIN_HEADER_BYTES || !range_inside(sec[k].off, sec[k].len, meta) ||
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

// Validates every table entry against the tensor table; t[i] gets tensor
// i's data.
static int table_check(const unsigned char *file, const BinHeader *h, const GPT2Config *c, const char *path,
                       TensorRef *t, GptError *err) {
    const unsigned char *data = file + h->data_offset;
    uint64_t prev_end = 0;
    for (size_t i = 0; i < h->n_tensors; i++) {
        const unsigned char *e = file + h->table_offset + i * MODELBIN_ENTRY_BYTES;
        TensorSpec spec;
        gpt2_tensor_spec(c, i, &spec);
        const char *want_name = spec.name;
        char name[NAME_BYTES + 1];
        memcpy(name, e + ENTRY_NAME, NAME_BYTES);
        name[NAME_BYTES] = '\0';
        const unsigned char *nul = memchr(e + ENTRY_NAME, 0, NAME_BYTES);
        int padded = nul != NULL;
        for (const unsigned char *q = nul; padded && q < e + ENTRY_NAME + NAME_BYTES; q++) padded = *q == 0;
        if (!padded)
            return gpt_error(err, "%s: tensor %zu: name field is not a NUL-padded string (expected %s)", path, i,
                             want_name);
        if (strcmp(name, want_name) != 0)
            return gpt_error(err, "%s: tensor %zu is named '%.64s', expected %s", path, i, name, want_name);
        BinEntry en;
        entry_read(e, h->version, &en);
        uint32_t dt = en.dtype, ndim = en.ndim, layout = en.layout;
        uint64_t off = en.offset, nbytes = en.nbytes;
        if (en.reserved != 0)
            return gpt_error(err, "%s: tensor %s: reserved field is not zero", path, name);
        if (!dtype_name((DType)dt))
            return gpt_error(err, "%s: tensor %s has unknown dtype %u (known: 0 F32, 1 F16, 2 BF16, 3 Q8, 4 Q4, 5 Q6)", path,
                             name, dt);
        if (spec.kind == TENSOR_VECTOR && dt != DTYPE_F32)
            return gpt_error(err, "%s: tensor %s has dtype %s; norms, biases and wpe are stored as F32", path, name,
                             dtype_name((DType)dt));
        if (layout > 1 || (layout == 1 && spec.kind != TENSOR_MATRIX))
            return gpt_error(err, "%s: tensor %s: layout %u; %s", path, name, layout,
                             spec.kind == TENSOR_MATRIX ? "0 (in, out) or 1 (out, in)" : "it has only layout 0");
        // A matrix's rows: Hugging Face's (in, out) unless transposed; wte
        // is (out, in) as stored.
        TensorLayout tl = layout ? LAYOUT_OUT_IN : gpt2_hf_layout(spec.kind);
        if (dtype_is_blocked((DType)dt) && tl != LAYOUT_OUT_IN)
            return gpt_error(err, "%s: tensor %s: %s is stored one row per output (layout 1)", path, name,
                             dtype_name((DType)dt));
        const size_t *dims = spec.dims;
        int nd = spec.ndim;
        const uint64_t *got = en.dims;
        int ok = ndim == (uint32_t)nd;
        for (int d = 0; d < 4; d++)
            if (d < nd ? got[d] != dims[d] : got[d] != 0) ok = 0;
        if (!ok) {
            char gs[128], ws[64];
            uint64_t w64[2] = {dims[0], dims[1]};
            int shown = ndim <= 4 ? (int)ndim : 4;  // and any stray dims beyond ndim
            for (int d = shown; d < 4; d++)
                if (got[d]) shown = d + 1;
            shape_string(gs, sizeof gs, got, shown, ",");
            shape_string(ws, sizeof ws, w64, nd, ",");
            return gpt_error(err, "%s: tensor %s has shape %s (ndim %u), config implies %s", path, name, gs, ndim, ws);
        }
        size_t n_out = spec.kind == TENSOR_MATRIX ? spec.dims[1] : spec.dims[0];
        size_t need = spec.kind == TENSOR_VECTOR ? spec.numel * sizeof(float)
                                                 : weight_bytes((DType)dt, n_out, spec.numel / n_out);
        if (nbytes != (uint64_t)need)
            return gpt_error(err, "%s: tensor %s has %llu bytes; %s of its shape needs %zu", path, name,
                             (unsigned long long)nbytes, dtype_name((DType)dt), need);
        if (off % MODELBIN_TENSOR_ALIGN != 0 || !range_inside(off, nbytes, h->data_bytes))
            return gpt_error(err, "%s: tensor %s at data offset %llu (+%llu bytes) lies outside the data region of "
                             "%llu bytes or is not 64-byte aligned", path, name, (unsigned long long)off,
                             (unsigned long long)nbytes, (unsigned long long)h->data_bytes);
        if (off < prev_end)
            return gpt_error(err, "%s: tensor %s overlaps the tensor before it", path, name);
        prev_end = off + nbytes;
        t[i] = (TensorRef){(DType)dt, tl, data + off};
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

// The 8 magic bytes; the load checks everything else.
static int modelbin_sniff(const unsigned char *head, size_t n, size_t file_size) {
    (void)file_size;
    return n >= MODELBIN_MAGIC_LEN && memcmp(head, MODELBIN_MAGIC, MODELBIN_MAGIC_LEN) == 0;
}

// Validates the model.bin mapped in m->map, hands its tensors to
// model_set_weights (in place, unless converted) and builds m->tokenizer
// from the stored tables.
static int modelbin_load(Model *m, const char *path, const WeightOptions *o, GptError *err) {
    const unsigned char *file = m->map.data;
    size_t size = m->map.size;
    BinHeader h;
    if (header_check(file, size, path, &h, err) != 0) return -1;
    if (config_check(&h, path, &m->config, err) != 0) return -1;
    TensorRef *t = calloc(h.n_tensors, sizeof *t);
    if (!t) return gpt_error(err, "%s: out of memory", path);
    int rc = -1;
    if (table_check(file, &h, &m->config, path, t, err) != 0) goto done;
    // the weights first: their pages come in (model_set_weights' prefetch)
    // while the tokenizer is built
    if (model_set_weights(m, t, o, path, err) != 0) goto done;
    m->tokenizer = tokenizer_check(file, &h, path, err);
    if (!m->tokenizer) goto done;
    rc = 0;
done:
    free(t);
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

// OUT must be a new name or a regular file that may be replaced, and not one
// of the files being read. *replace says whether it exists; *mode gets the
// mode the new file takes (an existing OUT's, else 0644).
static int check_out(const char *out_path, const ModelbinWriteOptions *o, int *replace, mode_t *mode,
                     GptError *err) {
    struct stat out;
    *replace = 0;
    *mode = 0644;
    if (stat(out_path, &out) != 0) {
        if (errno == ENOENT) return 0;
        return gpt_error(err, "%s: %s", out_path, strerror(errno));
    }
    if (!S_ISREG(out.st_mode))
        return gpt_error(err, "%s: not a regular file; a model.bin is written to a regular file or a new name",
                         out_path);
    for (size_t i = 0; o && i < o->n_inputs; i++) {
        struct stat in;
        if (stat(o->inputs[i], &in) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino)
            return gpt_error(err, "%s: is %s, which is being converted: writing it would destroy the input",
                             out_path, o->inputs[i]);
    }
    if (!o || !o->replace) return gpt_error(err, "%s: exists (--force replaces it)", out_path);
    *replace = 1;
    *mode = out.st_mode & 07777;
    return 0;
}

int modelbin_check_out(const char *out_path, const ModelbinWriteOptions *o, GptError *err) {
    int replace;
    mode_t mode;
    return check_out(out_path, o, &replace, &mode, err);
}

static int cancelled(const ModelbinWriteOptions *o) { return o && o->cancel && *o->cancel; }

int modelbin_write(const Model *m, const Tokenizer *tok, const char *out_path, size_t *bytes_out,
                   GptError *err) {
    return modelbin_write_with(m, tok, out_path, NULL, bytes_out, err);
}

int modelbin_write_with(const Model *m, const Tokenizer *tok, const char *out_path, const ModelbinWriteOptions *wo,
                        size_t *bytes_out, GptError *err) {
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
    h.n_inner = (uint32_t)gpt2_mlp_width(c);
    h.activation = (uint32_t)c->activation;
    h.flags = (c->attn_unscaled ? MODELBIN_ATTN_UNSCALED : 0) | (c->attn_by_layer ? MODELBIN_ATTN_BY_LAYER : 0) |
              (c->untied_output ? MODELBIN_UNTIED_OUTPUT : 0);
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
    // Each tensor as the model holds it: its dtype, numel elements.
    uint64_t data_end = 0;
    for (size_t i = 0; i < h.n_tensors; i++)
        data_end = align_up(data_end, MODELBIN_TENSOR_ALIGN) + model_tensor_bytes(m, i);
    h.data_bytes = data_end;
    h.file_bytes = h.data_offset + h.data_bytes;

    int replace;
    mode_t mode;
    if (check_out(out_path, wo, &replace, &mode, err) != 0) return -1;
    NewFile nf;
    if (newfile_open(&nf, out_path, mode, err) != 0) return -1;
    Out o = {fdopen(nf.fd, "wb"), 0, 0};
    int rc = -1;
    if (!o.f) {
        gpt_error(err, "%s: %s", out_path, strerror(errno));
        goto fail;
    }
    nf.fd = -1;  // the FILE has it now

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
        TensorSpec spec;
        gpt2_tensor_spec(c, i, &spec);
        BinEntry en = {0};
        en.dtype = (uint32_t)model_tensor(m, i).dtype;
        en.ndim = (uint32_t)spec.ndim;
        // the model holds c_attn & co. one row per output: transposed
        en.layout = spec.kind == TENSOR_MATRIX ? 1u : 0u;
        for (int d = 0; d < spec.ndim; d++) en.dims[d] = spec.dims[d];
        off = align_up(off, MODELBIN_TENSOR_ALIGN);
        en.offset = off;
        en.nbytes = model_tensor_bytes(m, i);
        entry_write(buf, spec.name, &en);
        out_bytes(&o, buf, MODELBIN_ENTRY_BYTES);
        off += en.nbytes;
    }
    out_pad_to(&o, h.data_offset);
    for (size_t i = 0; i < h.n_tensors; i++) {
        if (cancelled(wo)) {
            gpt_error(err, "%s: interrupted; nothing was written", out_path);
            goto fail;
        }
        out_pad_to(&o, h.data_offset + align_up(o.pos - h.data_offset, MODELBIN_TENSOR_ALIGN));
        out_bytes(&o, model_tensor(m, i).data, (size_t)model_tensor_bytes(m, i));
        if (wo && wo->progress) wo->progress(wo->progress_ctx, i + 1, h.n_tensors, o.pos - h.data_offset, h.data_bytes);
    }
    if (o.failed || fflush(o.f) != 0 || fsync(fileno(o.f)) != 0) {
        gpt_error(err, "%s: write error: %s", out_path, strerror(errno));
        goto fail;
    }
    if (o.pos != h.file_bytes) {
        gpt_error(err, "%s: wrote %llu bytes, the layout says %llu (a bug in modelbin.c)", out_path,
                  (unsigned long long)o.pos, (unsigned long long)h.file_bytes);
        goto fail;
    }
    // the FILE's descriptor goes back to nf, which names the file and closes it
    nf.fd = dup(fileno(o.f));
    fclose(o.f);
    o.f = NULL;
    if (nf.fd < 0) {
        gpt_error(err, "%s: %s", out_path, strerror(errno));
        goto fail;
    }
    if (cancelled(wo)) {
        gpt_error(err, "%s: interrupted; nothing was written", out_path);
        goto fail;
    }
    if (newfile_commit(&nf, out_path, replace, err) != 0) return -1;
    if (bytes_out) *bytes_out = (size_t)h.file_bytes;
    return 0;
fail:
    if (o.f) fclose(o.f);
    newfile_abort(&nf);
    return rc;
}

// ---------------------------------------------------------------------------
// inspect

static int modelbin_list(const unsigned char *file, size_t size, ModelInfo *info, GptError *err) {
    (void)size;  // validated by loading
    BinHeader h;
    header_read(file, &h);
    info->version = h.version;
    info->data_offset = (size_t)h.data_offset;
    size_t cap = 0;
    for (size_t i = 0; i < h.n_tensors; i++) {
        const unsigned char *e = file + h.table_offset + i * MODELBIN_ENTRY_BYTES;
        BinEntry en;
        entry_read(e, h.version, &en);
        const char *dt = dtype_name((DType)en.dtype);
        if (model_info_add(info, &cap, (const char *)e + ENTRY_NAME, dt ? dt : "?", (int)en.ndim, en.dims,
                           h.data_offset + en.offset, en.nbytes) != 0)
            return gpt_error(err, "%s: out of memory", info->file);
        info->tensors[info->n_tensors - 1].transposed = en.layout == 1;
    }
    return 0;
}

const ModelFormat MODELBIN_FORMAT = {"model.bin", modelbin_sniff, modelbin_load, modelbin_list};

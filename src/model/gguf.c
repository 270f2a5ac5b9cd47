/*
 * gguf.c - llama.cpp's GGUF files of GPT-2 models (GGUF_FORMAT, formats.h):
 * recognise, load and list.
 *
 * The file (ggml's docs/gguf.md; versions 2 and 3, little-endian): "GGUF",
 * a u32 version, u64 counts of tensors and of metadata entries, the metadata
 * (a key, a typed value), the tensor infos (name, dims in ggml's order with
 * ne[0] the contiguous one, a ggml type, an offset into the data), then,
 * from the next multiple of general.alignment (32 when absent), the data.
 * Every count, length, offset and size is checked against the bytes that are
 * left before it is used, in 64-bit arithmetic that cannot overflow, and the
 * counts are also capped, so that memory stays bounded by the file and the
 * model it describes; a damaged file gets one line naming the file and the
 * field or tensor.
 *
 * What gpt takes from it: general.architecture must be "gpt2"; the shape
 * from gpt2.block_count, .embedding_length, .feed_forward_length,
 * .attention.head_count, .context_length and .attention.layer_norm_epsilon
 * (all required, as llama.cpp requires them); the vocabulary size from
 * token_embd's rows. llama.cpp's gpt2 graph is GPT-2's own (GELU in its tanh
 * form, scores scaled by 1/sqrt(HS)), which is GPT2Config's zero. The tensors
 * map one to one onto the table of model.h (NAMES below): each must be
 * there, and no other may be. A matrix with ne = [in, out] is stored one row
 * per output, LAYOUT_OUT_IN; wte and wpe are (rows, C), as in Hugging Face.
 * `output.weight` is the untied output layer (lm_head) unless its bytes are
 * token_embd's (llama.cpp's older converters wrote GPT-2's tied matrix
 * twice): then the model is the same with a tied output, and one copy is read.
 *
 * The types: F32, F16 and BF16 are used as they lie (in place when aligned).
 * Q8_0 and Q4_0 hold exactly what our Q8 and Q4 hold (an f16 scale per block
 * of 32, then int8, or the same nibble order), so they are rearranged into
 * them (the scales after the quants, dtype.h), value for value. Q4_1, Q5_0,
 * Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K are dequantized into float32 by the
 * arithmetic of ggml's reference dequantization, operation for operation
 * (the build has no contraction), so each float is the one llama.cpp's
 * reference gives. A vector (a norm, a bias, wpe) in a block type becomes
 * float32 too. Any other type is refused by name.
 *
 * The tokenizer, when the file has one: tokenizer.ggml.model "gpt2",
 * tokenizer.ggml.pre absent or "gpt-2" (another pre-tokenizer splits text
 * differently), .tokens (vocab.json's strings, in id order, one per row of
 * token_embd) and .merges ("a b", by rank). .token_type, .bos_token_id and
 * .eos_token_id are checked but not used: the end of text is <|endoftext|>,
 * as with config.json.
 *
 * A LoRA adapter in this format (general.type "adapter") is not a model:
 * gguf_lora_read (formats.h) checks its metadata and lists its tensors for
 * lora.c, which says what they change.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/memory.h"
#include "base/utf8.h"
#include "model/formats.h"
#include "model/tokenizer.h"
#include "model/tokenizer_build.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c reads little-endian data in place: port the loads first"
#endif

// Caps on what a file may declare: far above any GPT-2 (12 L + 7 tensors,
// about 30 metadata entries), far below what could exhaust memory.
#define MAX_TENSORS 65536u
#define MAX_KV 65536u
#define MAX_NAME 64  // ggml's GGML_MAX_NAME, the terminating NUL included
#define MAX_DIMS 4   // ggml's GGML_MAX_DIMS
#define DEFAULT_ALIGNMENT 32u

// ---------------------------------------------------------------------------
// ggml's tensor types

typedef void (*DequantFn)(float *y, const unsigned char *block);

typedef struct {
    const char *name;
    uint32_t block;      // elements per block (1 for F32, F16, BF16)
    uint32_t bytes;      // bytes per block
    DequantFn dequant;   // into float32, for the types read that way
} GgmlType;

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static float half(const unsigned char *p) { return f16_to_f32(rd16(p)); }

// Each function takes one block and writes its `block` floats in order,
// with ggml's reference arithmetic: an int converted to float, times the
// float scale, then minus or plus the float minimum, each rounded.

// Q4_0: f16 d, 16 bytes: low nibbles are elements 0..15, high ones 16..31.
static void dequant_q4_0(float *y, const unsigned char *b) {
    const float d = half(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 15) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

// Q4_1: f16 d, f16 m, nibbles as Q4_0's, unsigned: q d + m.
static void dequant_q4_1(float *y, const unsigned char *b) {
    const float d = half(b), m = half(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 15) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

// Q5_0: f16 d, a u32 of fifth bits (bit j for element j), nibbles as Q4_0's.
static void dequant_q5_0(float *y, const unsigned char *b) {
    const float d = half(b);
    const uint32_t qh = rd32(b + 2);
    for (int j = 0; j < 16; j++) {
        int x0 = (int)((b[6 + j] & 15) | ((qh >> j) << 4 & 16)) - 16;
        int x1 = (int)((b[6 + j] >> 4) | ((qh >> (j + 12)) & 16)) - 16;
        y[j] = (float)x0 * d;
        y[j + 16] = (float)x1 * d;
    }
}

// Q5_1: f16 d, f16 m, then as Q5_0, unsigned: q d + m.
static void dequant_q5_1(float *y, const unsigned char *b) {
    const float d = half(b), m = half(b + 2);
    const uint32_t qh = rd32(b + 4);
    for (int j = 0; j < 16; j++) {
        unsigned x0 = (b[8 + j] & 15u) | ((qh >> j) << 4 & 16u);
        unsigned x1 = (b[8 + j] >> 4) | ((qh >> (j + 12)) & 16u);
        y[j] = (float)x0 * d + m;
        y[j + 16] = (float)x1 * d + m;
    }
}

// Q8_0: f16 d, 32 int8 (read this way only for vectors; matrices become Q8).
static void dequant_q8_0(float *y, const unsigned char *b) {
    const float d = half(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

// The K-quants: super-blocks of 256. In each, sub-block s of 16 or 32
// elements (in order) has its own scale (and minimum), quantized against
// the super-block's f16 d (and dmin).

// Q2_K (84 bytes): scales[16] (4-bit scale | 4-bit min << 4), qs[64], d,
// dmin. Element e: sub-block e / 16; 2 bits of qs[32 (e / 128) + e % 32] at
// bit 2 ((e % 128) / 32). y = (d sc) q - (dmin m).
static void dequant_q2_k(float *y, const unsigned char *b) {
    const float d = half(b + 80), dmin = half(b + 82);
    for (int e = 0; e < 256; e++) {
        const unsigned sc = b[e / 16], q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3u;
        const float dl = d * (float)(sc & 15u), ml = dmin * (float)(sc >> 4);
        y[e] = dl * (float)q - ml;
    }
}

// The 6-bit scale of sub-block is (0..15) of Q3_K's 12 scale bytes: its low
// 4 bits in a nibble of bytes 0..7, its top 2 bits in bytes 8..11.
static int q3k_scale(const unsigned char *s, int is) {
    int low = is < 8 ? s[is] & 15 : s[is - 8] >> 4;
    int top = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
    return (low | top << 4) - 32;
}

// Q3_K (110 bytes): hmask[32], qs[64], scales[12], d. Element e: sub-block
// e / 16; low 2 bits as Q2_K's; the third bit is bit (e / 32) of
// hmask[e % 32], and a clear bit subtracts 4. y = (d (sc - 32)) q.
static void dequant_q3_k(float *y, const unsigned char *b) {
    const float d = half(b + 108);
    for (int e = 0; e < 256; e++) {
        const float dl = d * (float)q3k_scale(b + 96, e / 16);
        int q = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        q -= (b[e % 32] >> (e / 32) & 1) ? 0 : 4;
        y[e] = dl * (float)q;
    }
}

// The 6-bit scale and minimum of sub-block j (0..7) of Q4_K and Q5_K.
static void k4_scale_min(const unsigned char *s, int j, unsigned *sc, unsigned *m) {
    if (j < 4) {
        *sc = s[j] & 63u;
        *m = s[j + 4] & 63u;
    } else {
        *sc = (s[j + 4] & 15u) | (unsigned)(s[j - 4] >> 6) << 4;
        *m = (unsigned)(s[j + 4] >> 4) | (unsigned)(s[j] >> 6) << 4;
    }
}

// Q4_K (144 bytes): d, dmin, scales[12], qs[128]. Sub-blocks of 32;
// element e: qs[32 (e / 64) + e % 32], low nibble for an even sub-block,
// high for an odd one. y = (d sc) q - (dmin m).
// Q5_K (176 bytes): d, dmin, scales[12], qh[32], qs[128]: Q4_K's nibbles,
// plus 16 when bit s (the sub-block) of qh[l] is set.
// Both: qs the nibbles, qh the fifth bits (NULL for Q4_K).
static void dequant_k_nibbles(float *y, const unsigned char *b, const unsigned char *qh,
                              const unsigned char *qs) {
    const float d = half(b), dmin = half(b + 2);
    for (int s = 0; s < 8; s++) {
        unsigned sc, m;
        k4_scale_min(b + 4, s, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            unsigned q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15u;
            if (qh)
                q += (qh[l] >> s & 1u) ? 16u : 0u;
            y[32 * s + l] = d1 * (float)q - m1;
        }
    }
}

static void dequant_q4_k(float *y, const unsigned char *b) {
    dequant_k_nibbles(y, b, NULL, b + 16);
}

static void dequant_q5_k(float *y, const unsigned char *b) {
    dequant_k_nibbles(y, b, b + 16, b + 48);
}

// Q6_K (210 bytes): ql[128], qh[64], int8 scales[16], d. In each half h of
// 128 elements, element 32 k + l (k = 0..3, l < 32) has its low 4 bits in
// ql[64 h + l + 32 (k % 2)] (low nibble for k < 2, high for k >= 2) and its
// top 2 in qh[32 h + l] at bit 2 k; q - 32; sub-block e / 16.
// y = (d sc) q.
static void dequant_q6_k(float *y, const unsigned char *b) {
    const float d = half(b + 208);
    for (int e = 0; e < 256; e++) {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        const unsigned low = (b[64 * h + l + 32 * (k % 2)] >> (4 * (k / 2))) & 15u;
        const unsigned top = (b[128 + 32 * h + l] >> (2 * k)) & 3u;
        const int q = (int)(low | top << 4) - 32;
        y[e] = d * (float)(int8_t)b[192 + e / 16] * (float)q;
    }
}

// ggml's type codes (ggml.h); the names of the ones gpt does not read are
// here for the message. Codes 4, 5 and 31 and up that are not listed were
// removed from ggml or are unknown.
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q8_0 = 8, T_BF16 = 30, N_TYPES = 40 };
static const GgmlType TYPES[N_TYPES] = {
    [0] = {"F32", 1, 4, NULL},
    [1] = {"F16", 1, 2, NULL},
    [2] = {"Q4_0", 32, 18, dequant_q4_0},
    [3] = {"Q4_1", 32, 20, dequant_q4_1},
    [6] = {"Q5_0", 32, 22, dequant_q5_0},
    [7] = {"Q5_1", 32, 24, dequant_q5_1},
    [8] = {"Q8_0", 32, 34, dequant_q8_0},
    [9] = {"Q8_1", 0, 0, NULL},
    [10] = {"Q2_K", 256, 84, dequant_q2_k},
    [11] = {"Q3_K", 256, 110, dequant_q3_k},
    [12] = {"Q4_K", 256, 144, dequant_q4_k},
    [13] = {"Q5_K", 256, 176, dequant_q5_k},
    [14] = {"Q6_K", 256, 210, dequant_q6_k},
    [15] = {"Q8_K", 0, 0, NULL},
    [16] = {"IQ2_XXS", 0, 0, NULL},
    [17] = {"IQ2_XS", 0, 0, NULL},
    [18] = {"IQ3_XXS", 0, 0, NULL},
    [19] = {"IQ1_S", 0, 0, NULL},
    [20] = {"IQ4_NL", 0, 0, NULL},
    [21] = {"IQ3_S", 0, 0, NULL},
    [22] = {"IQ2_S", 0, 0, NULL},
    [23] = {"IQ4_XS", 0, 0, NULL},
    [24] = {"I8", 0, 0, NULL},
    [25] = {"I16", 0, 0, NULL},
    [26] = {"I32", 0, 0, NULL},
    [27] = {"I64", 0, 0, NULL},
    [28] = {"F64", 0, 0, NULL},
    [29] = {"IQ1_M", 0, 0, NULL},
    [30] = {"BF16", 1, 2, NULL},
    [34] = {"TQ1_0", 0, 0, NULL},
    [35] = {"TQ2_0", 0, 0, NULL},
    [39] = {"MXFP4", 0, 0, NULL},
};
#define TYPES_READ "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K"

static const GgmlType *ggml_type(uint32_t t) { return t < N_TYPES && TYPES[t].block ? &TYPES[t] : NULL; }
static const char *ggml_type_name(uint32_t t) { return t < N_TYPES && TYPES[t].name ? TYPES[t].name : NULL; }
// The types used as they lie: our F32, F16, BF16.
static int is_float_type(uint32_t t) { return t == T_F32 || t == T_F16 || t == T_BF16; }
static DType float_dtype(uint32_t t) { return t == T_F32 ? DTYPE_F32 : t == T_F16 ? DTYPE_F16 : DTYPE_BF16; }

// ---------------------------------------------------------------------------
// reading the header

// GGUF's value types.
enum { V_U8, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STRING, V_ARRAY, V_U64, V_I64, V_F64, N_VTYPES };
static const uint8_t VALUE_BYTES[N_VTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const VALUE_NAMES[N_VTYPES] = {"uint8", "int8",  "uint16", "int16",  "uint32", "int32", "float32",
                                                  "bool",  "string", "array", "uint64", "int64", "float64"};

typedef struct {
    const unsigned char *p;
    size_t len;
} Str;

// One metadata entry: where its value is in the file.
typedef struct {
    Str key;
    uint32_t type;      // V_*
    uint32_t elem;      // V_ARRAY: its elements' type
    uint64_t count;     // V_ARRAY: its length
    size_t at;          // the value, or an array's first element
} Kv;

typedef struct {
    Str name;
    uint32_t n_dims;
    uint64_t ne[MAX_DIMS];  // 1 past n_dims
    uint32_t type;
    uint64_t offset;        // from the start of the data
    uint64_t nbytes;
} TensorInfoG;

typedef struct {
    const unsigned char *file;
    size_t size;
    uint32_t version;
    uint64_t alignment;
    size_t data_start;          // absolute
    Kv *kv;
    size_t n_kv;
    TensorInfoG *t;
    size_t n_t;
} Gguf;

static void gguf_free(Gguf *g) {
    free(g->kv);
    free(g->t);
    g->kv = NULL;
    g->t = NULL;
}

// A name from the file, for a message: at most 63 bytes, anything but
// printable ASCII as '?'.
static const char *printable(char *buf, size_t cap, Str s) {
    size_t n = 0;
    for (size_t i = 0; i < s.len && n + 4 < cap; i++) buf[n++] = s.p[i] >= 32 && s.p[i] < 127 ? (char)s.p[i] : '?';
    if (n < s.len && n + 3 < cap) memcpy(buf + n, "...", 3), n += 3;
    buf[n] = '\0';
    return buf;
}

static int str_is(Str s, const char *z) { return s.len == strlen(z) && !memcmp(s.p, z, s.len); }

typedef struct {
    const unsigned char *p;
    size_t size, pos;
} Cursor;

// The next n bytes, or NULL (and nothing consumed) if fewer are left.
static const unsigned char *take(Cursor *c, uint64_t n) {
    if (n > c->size - c->pos) return NULL;
    const unsigned char *q = c->p + c->pos;
    c->pos += (size_t)n;
    return q;
}
static int get_u32(Cursor *c, uint32_t *v) {
    const unsigned char *q = take(c, 4);
    if (!q) return -1;
    *v = rd32(q);
    return 0;
}
static int get_u64(Cursor *c, uint64_t *v) {
    const unsigned char *q = take(c, 8);
    if (!q) return -1;
    *v = rd64(q);
    return 0;
}
// A string: u64 length, then its bytes (no terminator).
static int get_str(Cursor *c, Str *s) {
    size_t at = c->pos;
    uint64_t n;
    if (get_u64(c, &n) != 0 || !(s->p = take(c, n))) {
        c->pos = at;
        return -1;
    }
    s->len = (size_t)n;
    return 0;
}

// "PATH: WHAT runs past the end of the file at byte N (S bytes; truncated?)"
static int past_end(GptError *err, const char *path, const Cursor *c, const char *what) {
    return gpt_error(err, "%s: %s runs past the end of the file at byte %zu (%zu bytes; truncated?)", path, what,
                     c->pos, c->size);
}

// Skips `count` values of type `type` (not arrays). 0, or -1 with err set
// naming `what`.
static int skip_values(Cursor *c, uint32_t type, uint64_t count, const char *path, const char *what,
                       GptError *err) {
    if (type >= N_VTYPES) return gpt_error(err, "%s: %s has value type %u, which GGUF does not define", path, what, type);
    if (type == V_ARRAY) return gpt_error(err, "%s: %s is an array of arrays, which gpt does not read", path, what);
    if (type != V_STRING) {
        if (count > (c->size - c->pos) / VALUE_BYTES[type]) return past_end(err, path, c, what);
        c->pos += (size_t)count * VALUE_BYTES[type];
        return 0;
    }
    // each string takes 8 bytes at least: a count beyond that is a lie
    if (count > (c->size - c->pos) / 8) return past_end(err, path, c, what);
    for (uint64_t i = 0; i < count; i++) {
        Str s;
        if (get_str(c, &s) != 0) return past_end(err, path, c, what);
    }
    return 0;
}

static int key_cmp(const void *a, const void *b) {
    const Kv *x = a, *y = b;
    size_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
    int r = memcmp(x->key.p, y->key.p, n);
    return r ? r : (x->key.len > y->key.len) - (x->key.len < y->key.len);
}

static const Kv *find_kv(const Gguf *g, const char *key) {
    Kv k = {.key = {(const unsigned char *)key, strlen(key)}};
    return g->n_kv ? bsearch(&k, g->kv, g->n_kv, sizeof *g->kv, key_cmp) : NULL;
}

// The metadata: each entry's key and value, skipped over; sorted by key
// afterwards (for lookups), two equal keys refused.
static int read_metadata(Gguf *g, Cursor *c, uint64_t n_kv, const char *path, GptError *err) {
    char what[160], name[80];
    for (size_t i = 0; i < n_kv; i++) {
        Kv *kv = &g->kv[i];
        snprintf(what, sizeof what, "metadata entry %zu's key", i);
        if (get_str(c, &kv->key) != 0) return past_end(err, path, c, what);
        snprintf(what, sizeof what, "metadata %s", printable(name, sizeof name, kv->key));
        if (get_u32(c, &kv->type) != 0) return past_end(err, path, c, what);
        if (kv->type == V_ARRAY) {
            if (get_u32(c, &kv->elem) != 0 || get_u64(c, &kv->count) != 0) return past_end(err, path, c, what);
            kv->at = c->pos;
            if (skip_values(c, kv->elem, kv->count, path, what, err) != 0) return -1;
        } else {
            kv->at = c->pos;
            if (skip_values(c, kv->type, 1, path, what, err) != 0) return -1;
        }
        g->n_kv = i + 1;
    }
    qsort(g->kv, g->n_kv, sizeof *g->kv, key_cmp);
    for (size_t i = 1; i < g->n_kv; i++)
        if (!key_cmp(&g->kv[i - 1], &g->kv[i]))
            return gpt_error(err, "%s: metadata %s appears twice", path, printable(name, sizeof name, g->kv[i].key));
    return 0;
}

// An integer entry of any integer type, in [lo, hi]. 1 if absent (v
// untouched), 0 if read, -1 with err set.
static int kv_int(const Gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *v, const char *path,
                  GptError *err) {
    const Kv *kv = find_kv(g, key);
    if (!kv) return 1;
    const unsigned char *p = g->file + kv->at;
    int64_t x = 0;
    uint64_t u = 0;
    int is_unsigned = 1;
    switch (kv->type) {
    case V_U8: u = p[0]; break;
    case V_I8: x = (int8_t)p[0], is_unsigned = 0; break;
    case V_U16: u = rd16(p); break;
    case V_I16: x = (int16_t)rd16(p), is_unsigned = 0; break;
    case V_U32: u = rd32(p); break;
    case V_I32: x = (int32_t)rd32(p), is_unsigned = 0; break;
    case V_U64: u = rd64(p); break;
    case V_I64: x = (int64_t)rd64(p), is_unsigned = 0; break;
    default:
        return gpt_error(err, "%s: metadata %s is a %s, not an integer", path, key,
                         kv->type < N_VTYPES ? VALUE_NAMES[kv->type] : "?");
    }
    if (is_unsigned) {
        if (u > (uint64_t)hi)
            return gpt_error(err, "%s: metadata %s is %llu, out of range [%lld, %lld]", path, key, (unsigned long long)u,
                             (long long)lo, (long long)hi);
        x = (int64_t)u;
    }
    if (x < lo || x > hi)
        return gpt_error(err, "%s: metadata %s is %lld, out of range [%lld, %lld]", path, key, (long long)x,
                         (long long)lo, (long long)hi);
    *v = x;
    return 0;
}

// A required integer entry that fits an int.
static int kv_need_int(const Gguf *g, const char *key, int *v, const char *path, GptError *err) {
    int64_t x;
    int r = kv_int(g, key, 0, INT32_MAX, &x, path, err);
    if (r == 1) return gpt_error(err, "%s: metadata %s is missing", path, key);
    if (r == 0) *v = (int)x;
    return r;
}

// A string entry. 1 if absent, 0 if read, -1 with err set.
static int kv_string(const Gguf *g, const char *key, Str *s, const char *path, GptError *err) {
    const Kv *kv = find_kv(g, key);
    if (!kv) return 1;
    if (kv->type != V_STRING)
        return gpt_error(err, "%s: metadata %s is a %s, not a string", path, key,
                         kv->type < N_VTYPES ? VALUE_NAMES[kv->type] : "?");
    s->len = (size_t)rd64(g->file + kv->at);  // read whole when skipped over
    s->p = g->file + kv->at + 8;
    return 0;
}

// An array entry of elements of type elem. 1 if absent, 0, -1 with err set.
static int kv_array(const Gguf *g, const char *key, uint32_t elem, const Kv **out, const char *path, GptError *err) {
    const Kv *kv = find_kv(g, key);
    if (!kv) return 1;
    if (kv->type != V_ARRAY || kv->elem != elem)
        return gpt_error(err, "%s: metadata %s is not an array of %s", path, key, VALUE_NAMES[elem]);
    *out = kv;
    return 0;
}

// Elements (numel) and bytes of a tensor info, checked: dims non-negative,
// no product past 2^63, ne[0] whole blocks.
static int tensor_size(TensorInfoG *t, const GgmlType *ty, const char *path, const char *name, GptError *err) {
    uint64_t numel = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] > (uint64_t)INT64_MAX || (t->ne[d] && numel > (uint64_t)INT64_MAX / t->ne[d]))
            return gpt_error(err, "%s: tensor %s: its dims multiply past 2^63", path, name);
        numel *= t->ne[d];
    }
    if (t->ne[0] % ty->block)
        return gpt_error(err, "%s: tensor %s: a row of %llu is not whole %s blocks of %u", path, name,
                         (unsigned long long)t->ne[0], ty->name, ty->block);
    uint64_t blocks = numel / ty->block;
    if (blocks > (uint64_t)INT64_MAX / ty->bytes)
        return gpt_error(err, "%s: tensor %s: its bytes count past 2^63", path, name);
    t->nbytes = blocks * ty->bytes;
    return 0;
}

typedef struct {
    uint64_t begin, end;
    size_t i;
} Span;

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

// The tensor infos, each validated against the data region (no two
// sharing bytes).
static int read_tensor_infos(Gguf *g, Cursor *c, uint64_t n_t, const char *path, GptError *err) {
    char what[160], name[80];
    for (size_t i = 0; i < n_t; i++) {
        TensorInfoG *t = &g->t[i];
        snprintf(what, sizeof what, "tensor info %zu's name", i);
        if (get_str(c, &t->name) != 0) return past_end(err, path, c, what);
        printable(name, sizeof name, t->name);
        if (t->name.len == 0 || t->name.len >= MAX_NAME || memchr(t->name.p, 0, t->name.len))
            return gpt_error(err, "%s: tensor info %zu: name \"%s\" is not 1 to %d bytes without a NUL", path, i,
                             name, MAX_NAME - 1);
        snprintf(what, sizeof what, "tensor %s's info", name);
        if (get_u32(c, &t->n_dims) != 0) return past_end(err, path, c, what);
        if (t->n_dims > MAX_DIMS)
            return gpt_error(err, "%s: tensor %s has %u dims; GGUF allows at most %d", path, name, t->n_dims,
                             MAX_DIMS);
        for (uint32_t d = 0; d < MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            if (get_u64(c, &t->ne[d]) != 0) return past_end(err, path, c, what);
        if (get_u32(c, &t->type) != 0 || get_u64(c, &t->offset) != 0) return past_end(err, path, c, what);
        g->n_t = i + 1;
    }
    uint64_t start = align_up(c->pos, g->alignment);
    if (start > c->size && g->n_t == 0) start = c->size;  // no data, so no padding needed
    if (start > c->size)
        return gpt_error(err, "%s: the tensor data would start at byte %llu, past the end of the file (%zu bytes; "
                              "truncated?)", path, (unsigned long long)start, c->size);
    g->data_start = (size_t)start;
    uint64_t data_size = c->size - g->data_start;
    Span *spans = malloc((g->n_t ? g->n_t : 1) * sizeof *spans);
    if (!spans) return gpt_error(err, "%s: out of memory", path);
    int rc = -1;
    for (size_t i = 0; i < g->n_t; i++) {
        TensorInfoG *t = &g->t[i];
        printable(name, sizeof name, t->name);
        const GgmlType *ty = ggml_type(t->type);
        if (!ty) {
            const char *tn = ggml_type_name(t->type);
            if (tn) gpt_error(err, "%s: tensor %s has type %s, which gpt does not read (it reads " TYPES_READ ")",
                              path, name, tn);
            else gpt_error(err, "%s: tensor %s has type %u, which is no ggml type gpt knows (it reads " TYPES_READ ")",
                           path, name, t->type);
            goto done;
        }
        if (tensor_size(t, ty, path, name, err) != 0) goto done;
        if (t->offset % g->alignment) {
            gpt_error(err, "%s: tensor %s: offset %llu is not a multiple of the alignment %llu", path, name,
                      (unsigned long long)t->offset, (unsigned long long)g->alignment);
            goto done;
        }
        if (!range_inside(t->offset, t->nbytes, data_size)) {
            gpt_error(err, "%s: tensor %s: its %llu bytes at offset %llu run past the data region of %llu bytes "
                           "(truncated, or a bad offset?)", path, name, (unsigned long long)t->nbytes,
                      (unsigned long long)t->offset, (unsigned long long)data_size);
            goto done;
        }
        spans[i] = (Span){t->offset, t->offset + t->nbytes, i};
    }
    qsort(spans, g->n_t, sizeof *spans, span_cmp);
    for (size_t i = 1; i < g->n_t; i++)
        if (spans[i].begin < spans[i - 1].end && spans[i].begin < spans[i].end) {
            char other[80];
            gpt_error(err, "%s: tensors %s and %s share bytes of the data region", path,
                      printable(other, sizeof other, g->t[spans[i - 1].i].name),
                      printable(name, sizeof name, g->t[spans[i].i].name));
            goto done;
        }
    rc = 0;
done:
    free(spans);
    return rc;
}

// Parses and validates the structure of a GGUF file: header, metadata,
// general.alignment, tensor infos and their data ranges. Nothing about GPT-2
// yet. 0, or -1 with err set (g freed).
static int gguf_parse(Gguf *g, const unsigned char *file, size_t size, const char *path, GptError *err) {
    memset(g, 0, sizeof *g);
    g->file = file;
    g->size = size;
    Cursor c = {file, size, 0};
    uint64_t n_t, n_kv;
    if (size < 4 || memcmp(file, "GGUF", 4) != 0) return gpt_error(err, "%s: not a GGUF file (bad magic)", path);
    c.pos = 4;
    if (get_u32(&c, &g->version) != 0) return past_end(err, path, &c, "the GGUF header");
    if (g->version == 1)
        return gpt_error(err, "%s: GGUF version 1 (32-bit counts, 2023) is not read; gpt reads versions 2 and 3", path);
    if (g->version >= 0x01000000u && (g->version >> 24) <= 3)
        return gpt_error(err, "%s: a big-endian GGUF file; gpt reads little-endian ones", path);
    if (g->version != 2 && g->version != 3)
        return gpt_error(err, "%s: GGUF version %u; gpt reads versions 2 and 3", path, g->version);
    if (get_u64(&c, &n_t) != 0 || get_u64(&c, &n_kv) != 0) return past_end(err, path, &c, "the GGUF header");
    if (n_t > MAX_TENSORS)
        return gpt_error(err, "%s: tensor_count %llu is more than gpt reads (%u)", path, (unsigned long long)n_t,
                         MAX_TENSORS);
    if (n_kv > MAX_KV)
        return gpt_error(err, "%s: metadata_kv_count %llu is more than gpt reads (%u)", path,
                         (unsigned long long)n_kv, MAX_KV);
    // an entry takes 12 bytes at least (key length, type), a tensor info 24
    if (n_kv > (size - c.pos) / 12 || n_t > (size - c.pos - 12 * n_kv) / 24)
        return gpt_error(err, "%s: the header's %llu tensors and %llu metadata entries cannot fit in the file's %zu "
                              "bytes (truncated?)", path, (unsigned long long)n_t, (unsigned long long)n_kv, size);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->t = calloc(n_t ? n_t : 1, sizeof *g->t);
    if (!g->kv || !g->t) {
        gguf_free(g);
        return gpt_error(err, "%s: out of memory", path);
    }
    g->alignment = DEFAULT_ALIGNMENT;
    int64_t a;
    int r;
    if (read_metadata(g, &c, n_kv, path, err) != 0 ||
        (r = kv_int(g, "general.alignment", 1, INT32_MAX, &a, path, err)) < 0)
        goto fail;
    if (r == 0) {
        if (a & (a - 1)) {
            gpt_error(err, "%s: metadata general.alignment %lld is not a power of two", path, (long long)a);
            goto fail;
        }
        g->alignment = (uint64_t)a;
    }
    if (read_tensor_infos(g, &c, n_t, path, err) != 0) goto fail;
    return 0;
fail:
    gguf_free(g);
    return -1;
}

// ---------------------------------------------------------------------------
// GPT-2's tensors

// llama.cpp's names of GPT-2's tensors and the table's (model.h), inside a
// layer ("blk.N." and "h.N.") or not. A matrix is ne = [in, out].
static const struct {
    const char *gguf, *hf;
    int in_layer;
} NAMES[] = {
    {"token_embd.weight", "wte.weight", 0},        {"position_embd.weight", "wpe.weight", 0},
    {"attn_norm.weight", "ln_1.weight", 1},        {"attn_norm.bias", "ln_1.bias", 1},
    {"attn_qkv.weight", "attn.c_attn.weight", 1},  {"attn_qkv.bias", "attn.c_attn.bias", 1},
    {"attn_output.weight", "attn.c_proj.weight", 1}, {"attn_output.bias", "attn.c_proj.bias", 1},
    {"ffn_norm.weight", "ln_2.weight", 1},         {"ffn_norm.bias", "ln_2.bias", 1},
    {"ffn_up.weight", "mlp.c_fc.weight", 1},       {"ffn_up.bias", "mlp.c_fc.bias", 1},
    {"ffn_down.weight", "mlp.c_proj.weight", 1},   {"ffn_down.bias", "mlp.c_proj.bias", 1},
    {"output_norm.weight", "ln_f.weight", 0},      {"output_norm.bias", "ln_f.bias", 0},
    {"output.weight", "lm_head.weight", 0},
};

// The table's name of GGUF tensor name s into hf (cap bytes); 0, or -1 if it
// is no GPT-2 tensor's name. "blk.N." needs N without a leading zero.
static int hf_name(Str s, char *hf, size_t cap) {
    char z[MAX_NAME];
    memcpy(z, s.p, s.len);  // s.len < MAX_NAME, no NUL inside (checked by the parse)
    z[s.len] = '\0';
    const char *rest = z;
    long layer = -1;
    if (!strncmp(z, "blk.", 4)) {
        const char *p = z + 4;
        if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
        for (layer = 0; *p >= '0' && *p <= '9' && layer <= 1000000; p++) layer = layer * 10 + (*p - '0');
        if (*p != '.' || layer > 1000000) return -1;
        rest = p + 1;
    }
    for (size_t k = 0; k < sizeof NAMES / sizeof *NAMES; k++) {
        if ((layer >= 0) != NAMES[k].in_layer || strcmp(rest, NAMES[k].gguf) != 0) continue;
        if (layer >= 0) snprintf(hf, cap, "h.%ld.%s", layer, NAMES[k].hf);
        else snprintf(hf, cap, "%s", NAMES[k].hf);
        return 0;
    }
    return -1;
}

static const TensorInfoG *find_tensor(const Gguf *g, const char *name) {
    for (size_t i = 0; i < g->n_t; i++)
        if (str_is(g->t[i].name, name)) return &g->t[i];
    return NULL;
}

static const unsigned char *tensor_data(const Gguf *g, const TensorInfoG *t) {
    return g->file + g->data_start + t->offset;
}

// The configuration: the metadata's shape, token_embd's rows, and whether
// output.weight is an output layer of its own.
static int read_config(const Gguf *g, GPT2Config *c, const char *path, GptError *err) {
    Str arch;
    char buf[80];
    int r = kv_string(g, "general.architecture", &arch, path, err);
    if (r < 0) return -1;
    if (r == 1) return gpt_error(err, "%s: metadata general.architecture is missing", path);
    Str type;
    if (kv_string(g, "general.type", &type, path, err) == 0 && str_is(type, "adapter"))
        return gpt_error(err, "%s: general.type is \"adapter\": a LoRA adapter, which is applied with --lora", path);
    if (!str_is(arch, "gpt2"))
        return gpt_error(err, "%s: general.architecture is \"%s\"; gpt runs only GPT-2 (\"gpt2\")", path,
                         printable(buf, sizeof buf, arch));
    memset(c, 0, sizeof *c);  // GPT-2's activation and attention, tied output
    int heads_kv = 0;
    if (kv_need_int(g, "gpt2.block_count", &c->n_layer, path, err) != 0 ||
        kv_need_int(g, "gpt2.embedding_length", &c->n_embd, path, err) != 0 ||
        kv_need_int(g, "gpt2.feed_forward_length", &c->n_inner, path, err) != 0 ||
        kv_need_int(g, "gpt2.attention.head_count", &c->n_head, path, err) != 0 ||
        kv_need_int(g, "gpt2.context_length", &c->n_ctx, path, err) != 0)
        return -1;
    int64_t x;
    if ((r = kv_int(g, "gpt2.attention.head_count_kv", 0, INT32_MAX, &x, path, err)) < 0) return -1;
    if (r == 0 && (heads_kv = (int)x) != c->n_head)
        return gpt_error(err, "%s: gpt2.attention.head_count_kv %d differs from head_count %d; GPT-2 has one key "
                              "and value head per query head", path, heads_kv, c->n_head);
    const Kv *eps = find_kv(g, "gpt2.attention.layer_norm_epsilon");
    if (!eps) return gpt_error(err, "%s: metadata gpt2.attention.layer_norm_epsilon is missing", path);
    if (eps->type == V_F32) {
        uint32_t u = rd32(g->file + eps->at);
        memcpy(&c->ln_eps, &u, 4);
    } else if (eps->type == V_F64) {
        uint64_t u = rd64(g->file + eps->at);
        double d;
        memcpy(&d, &u, 8);
        c->ln_eps = (float)d;
    } else {
        return gpt_error(err, "%s: metadata gpt2.attention.layer_norm_epsilon is not a float", path);
    }
    if (c->n_embd > 0 && (int64_t)c->n_inner == 4LL * c->n_embd) c->n_inner = 0;  // model.h: 0 is 4 C
    else if (c->n_inner == 0)
        return gpt_error(err, "%s: metadata gpt2.feed_forward_length is 0", path);
    const TensorInfoG *wte = find_tensor(g, "token_embd.weight");
    if (!wte) return gpt_error(err, "%s: tensor token_embd.weight is missing", path);
    if (wte->n_dims != 2 || wte->ne[1] > INT32_MAX)
        return gpt_error(err, "%s: tensor token_embd.weight is not a matrix of at most 2^31 rows", path);
    c->vocab_size = (int)wte->ne[1];
    // An output layer of its own, unless it is token_embd again.
    const TensorInfoG *out = find_tensor(g, "output.weight");
    c->untied_output = out && !(out->type == wte->type && out->nbytes == wte->nbytes &&
                                 !memcmp(out->ne, wte->ne, sizeof out->ne) &&
                                 !memcmp(tensor_data(g, out), tensor_data(g, wte), (size_t)wte->nbytes));
    return gpt2_config_validate(c, path, err);
}

// A tensor matched to the table: ne in ggml's order from the table's
// Hugging Face shape. A MATRIX (in, out) is ne = [in, out]; wte, wpe and
// lm_head (rows, C) are ne = [C, rows]; a vector ne = [n].
static void expected_ne(const TensorSpec *s, uint64_t ne[MAX_DIMS]) {
    for (int d = 0; d < MAX_DIMS; d++) ne[d] = 1;
    if (s->ndim == 1) ne[0] = s->dims[0];
    else if (s->kind == TENSOR_MATRIX) ne[0] = s->dims[0], ne[1] = s->dims[1];
    else ne[0] = s->dims[1], ne[1] = s->dims[0];
}

// Every tensor of the file given its slot of the table (slot[i] for table
// index i), its shape checked; none missing, none unknown, none twice.
static int match_tensors(const Gguf *g, const GPT2Config *c, const TensorInfoG **slot, const char *path,
                         GptError *err) {
    char hf[96], name[80];
    size_t n = gpt2_n_tensors(c);
    for (size_t i = 0; i < g->n_t; i++) {
        const TensorInfoG *t = &g->t[i];
        printable(name, sizeof name, t->name);
        if (hf_name(t->name, hf, sizeof hf) != 0)
            return gpt_error(err, "%s: tensor %s is not a GPT-2 tensor", path, name);
        if (!c->untied_output && !strcmp(hf, "lm_head.weight")) continue;  // token_embd's bytes again
        long layer;
        long k = gpt2_tensor_index(c, hf, &layer);
        if (k < 0)
            return gpt_error(err, "%s: tensor %s is in layer %ld, but gpt2.block_count is %d", path, name, layer,
                             c->n_layer);
        if (slot[k]) return gpt_error(err, "%s: tensor %s appears twice", path, name);
        slot[k] = t;
        TensorSpec s;
        gpt2_tensor_spec(c, (size_t)k, &s);
        uint64_t want[MAX_DIMS];
        expected_ne(&s, want);
        if (memcmp(want, t->ne, sizeof want) != 0) {
            char got_s[96], want_s[96];
            shape_string(got_s, sizeof got_s, t->ne, t->n_dims ? (int)t->n_dims : 1, ",");
            shape_string(want_s, sizeof want_s, want, s.ndim, ",");
            return gpt_error(err, "%s: tensor %s has ne %s, the metadata implies %s (ggml order)", path, name, got_s,
                             want_s);
        }
    }
    for (size_t k = 0; k < n; k++) {
        if (slot[k]) continue;
        TensorSpec s;
        gpt2_tensor_spec(c, k, &s);
        for (size_t j = 0; j < sizeof NAMES / sizeof *NAMES; j++) {
            const char *suffix = s.layer >= 0 ? strchr(strchr(s.name, '.') + 1, '.') + 1 : s.name;
            if (!strcmp(suffix, NAMES[j].hf) && (s.layer >= 0) == NAMES[j].in_layer) {
                if (s.layer >= 0) return gpt_error(err, "%s: tensor blk.%d.%s is missing", path, s.layer, NAMES[j].gguf);
                return gpt_error(err, "%s: tensor %s is missing", path, NAMES[j].gguf);
            }
        }
        return gpt_error(err, "%s: tensor %s is missing", path, s.name);
    }
    return 0;
}

// ---------------------------------------------------------------------------
// the tokenizer

// The Tokenizer of the tokenizer.ggml.* entries into *out, or NULL when the
// file has none. 0, or -1 with err set.
static int read_tokenizer(const Gguf *g, size_t V, Tokenizer **out, const char *path, GptError *err) {
    *out = NULL;
    const Kv *tokens = NULL, *merges = NULL, *types = NULL;
    int r = kv_array(g, "tokenizer.ggml.tokens", V_STRING, &tokens, path, err);
    if (r != 0) return r < 0 ? -1 : 0;
    char buf[80], src[1100];
    Str s;
    if ((r = kv_string(g, "tokenizer.ggml.model", &s, path, err)) < 0) return -1;
    if (r == 1) return gpt_error(err, "%s: metadata tokenizer.ggml.model is missing (GPT-2's is \"gpt2\")", path);
    if (!str_is(s, "gpt2"))
        return gpt_error(err, "%s: tokenizer.ggml.model is \"%s\"; gpt reads GPT-2's byte-level BPE (\"gpt2\")", path,
                         printable(buf, sizeof buf, s));
    if ((r = kv_string(g, "tokenizer.ggml.pre", &s, path, err)) < 0) return -1;
    if (r == 0 && !str_is(s, "gpt-2"))
        return gpt_error(err, "%s: tokenizer.ggml.pre is \"%s\"; gpt splits text as GPT-2 does (\"gpt-2\")", path,
                         printable(buf, sizeof buf, s));
    if (tokens->count != V)
        return gpt_error(err, "%s: tokenizer.ggml.tokens has %llu tokens, token_embd.weight %zu rows", path,
                         (unsigned long long)tokens->count, V);
    if ((r = kv_array(g, "tokenizer.ggml.token_type", V_I32, &types, path, err)) < 0) return -1;
    if (r == 0 && types->count != V)
        return gpt_error(err, "%s: tokenizer.ggml.token_type has %llu entries for %zu tokens", path,
                         (unsigned long long)types->count, V);
    const char *ids[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"};
    for (int k = 0; k < 2; k++) {
        int64_t id;
        if (kv_int(g, ids[k], 0, (int64_t)V - 1, &id, path, err) < 0) return -1;
    }
    if ((r = kv_array(g, "tokenizer.ggml.merges", V_STRING, &merges, path, err)) != 0)
        return r < 0 ? -1 : gpt_error(err, "%s: tokenizer.ggml.tokens without tokenizer.ggml.merges", path);

    // The strings NUL-terminated, in one block: the file's bytes plus one
    // per token (the strings were measured against the file by the parse).
    Cursor c = {g->file, g->size, tokens->at};
    size_t total = 0;
    for (size_t i = 0; i < V; i++) {
        get_str(&c, &s);
        total += s.len + 1;
    }
    char *arena = malloc(total);
    const char **strings = malloc(V * sizeof *strings);
    Tokenizer *t = NULL;
    int rc = -1;
    if (!arena || !strings) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    c.pos = tokens->at;
    for (size_t i = 0, at = 0; i < V; i++) {
        get_str(&c, &s);
        if (s.len == 0 || memchr(s.p, 0, s.len) || !utf8_valid(s.p, s.len)) {
            gpt_error(err, "%s: tokenizer.ggml.tokens[%zu] is not a non-empty UTF-8 string without a NUL", path, i);
            goto done;
        }
        memcpy(arena + at, s.p, s.len);
        arena[at + s.len] = '\0';
        strings[i] = arena + at;
        at += s.len + 1;
    }
    snprintf(src, sizeof src, "%s: tokenizer.ggml.tokens", path);
    if (!(t = tokenizer_new_vocab(src, V, strings, err))) goto done;
    if (tokenizer_index_strings(t, src, err) != 0) goto done;
    snprintf(src, sizeof src, "%s: tokenizer.ggml.merges", path);
    if (tokenizer_alloc_merges(t, (size_t)merges->count, src, err) != 0) goto done;
    c.pos = merges->at;
    for (size_t rank = 0; rank < merges->count; rank++) {
        get_str(&c, &s);
        const unsigned char *sp = memchr(s.p, ' ', s.len);
        snprintf(src, sizeof src, "%s: tokenizer.ggml.merges[%zu]", path, rank);
        if (!sp || sp == s.p || sp == s.p + s.len - 1 || memchr(sp + 1, ' ', s.len - (size_t)(sp - s.p) - 1)) {
            gpt_error(err, "%s: not two tokens separated by one space", src);
            goto done;
        }
        size_t la = (size_t)(sp - s.p), lb = s.len - la - 1;
        int32_t a = tokenizer_string_id(t, (const char *)s.p, la), b = tokenizer_string_id(t, (const char *)sp + 1, lb);
        if (a < 0 || b < 0) {
            gpt_error(err, "%s: names a token that is not in tokenizer.ggml.tokens", src);
            goto done;
        }
        if (tokenizer_add_merge(t, rank, a, b, err) != 0) {
            GptError inner = *err;
            gpt_error(err, "%s: %s", src, inner.msg);
            goto done;
        }
    }
    tokenizer_finish(t);
    *out = t;
    t = NULL;
    rc = 0;
done:
    tokenizer_free(t);
    free(arena);
    free(strings);
    return rc;
}

// ---------------------------------------------------------------------------
// the weights

/*
 * Tensors that cannot be used as they lie in the mapping go through one
 * staging block: Q8_0 and Q4_0 rearranged into our Q8 and Q4, the other
 * block types (and any vector in a block type) dequantized into float32.
 * model_set_weights (model.h) uses a tensor in place when it is 4-byte
 * aligned and already what it should become, and copies the others into
 * its own block, which replaces m->owned. Two cases, so that the staging
 * block is never both pointed into and freed:
 *   - nothing to convert (no --dtype): every tensor is made usable in place
 *     (F16 and BF16 vectors widened, unaligned tensors copied, into the
 *     staging block too), model_set_weights allocates nothing, and the
 *     staging block becomes m->owned: the model's memory is what it holds;
 *   - a conversion asked for: the staged tensors are handed over 2 bytes
 *     past 4-byte alignment (so none is used in place: model_set_weights
 *     copies each once), and the staging block is freed afterwards.
 */
typedef struct {
    int staged;         // goes through the staging block
    DType dtype;        // what the staged copy is
    size_t bytes;       // its size
    size_t at;          // its offset in the staging block
} Stage;

// Does tensor t (table kind `kind`) go through the staging block, and as what?
static void plan_stage(Stage *st, const TensorInfoG *t, const unsigned char *data, TensorKind kind, int keep_all) {
    size_t numel = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    size_t n_in = (size_t)t->ne[0], n_out = numel / (n_in ? n_in : 1);
    memset(st, 0, sizeof *st);
    if (is_float_type(t->type)) {
        // in the mapping, unless aligned or widened it could be used in place
        DType dt = float_dtype(t->type);
        if (!keep_all) return;
        if (kind == TENSOR_VECTOR && dt != DTYPE_F32) *st = (Stage){1, DTYPE_F32, numel * 4, 0};
        else if ((uintptr_t)data % 4) *st = (Stage){1, dt, (size_t)t->nbytes, 0};
        return;
    }
    if (kind != TENSOR_VECTOR && t->type == T_Q8_0) *st = (Stage){1, DTYPE_Q8, weight_bytes(DTYPE_Q8, n_out, n_in), 0};
    else if (kind != TENSOR_VECTOR && t->type == T_Q4_0)
        *st = (Stage){1, DTYPE_Q4, weight_bytes(DTYPE_Q4, n_out, n_in), 0};
    else *st = (Stage){1, DTYPE_F32, numel * 4, 0};
}

// Writes tensor t (data in the file) into dst as st->dtype (Stage).
static void stage_tensor(unsigned char *dst, const Stage *st, const TensorInfoG *t, const unsigned char *data) {
    size_t numel = (size_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    size_t K = (size_t)t->ne[0], rows = numel / (K ? K : 1);
    const GgmlType *ty = ggml_type(t->type);
    if (is_float_type(t->type)) {
        if (st->dtype != DTYPE_F32 || t->type == T_F32) {  // a copy, as stored
            memcpy(dst, data, (size_t)t->nbytes);
            return;
        }
        for (size_t i = 0; i < numel; i++) {  // an F16 or BF16 vector, widened
            float f = t->type == T_F16 ? half(data + 2 * i) : bf16_to_f32(rd16(data + 2 * i));
            memcpy(dst + 4 * i, &f, 4);
        }
        return;
    }
    if (st->dtype == DTYPE_Q8 || st->dtype == DTYPE_Q4) {
        // ggml's block: f16 d, then 32 int8 (Q8_0) or 16 bytes of nibbles
        // (Q4_0, already our Q4's order); ours: all the quants, then all
        // the scales (dtype.h). K is whole blocks of 32.
        size_t nb = K / 32, qbytes = st->dtype == DTYPE_Q8 ? 32 : 16;
        unsigned char *scales = dst + rows * nb * qbytes;
        for (size_t b = 0; b < rows * nb; b++) {
            const unsigned char *blk = data + b * ty->bytes;
            memcpy(dst + b * qbytes, blk + 2, qbytes);
            memcpy(scales + 2 * b, blk, 2);  // both little-endian u16
        }
        return;
    }
    float y[256];
    for (size_t b = 0; b < numel / ty->block; b++) {
        ty->dequant(y, data + b * ty->bytes);
        memcpy(dst + 4 * ty->block * b, y, 4 * ty->block);
    }
}

// Hands the matched tensors to model_set_weights through the staging block
// (above). 0, or -1 with err set.
static int set_weights(Model *m, const Gguf *g, const TensorInfoG *const *slot, const WeightOptions *o,
                       const char *path, GptError *err) {
    const GPT2Config *c = &m->config;
    size_t n = gpt2_n_tensors(c), total = 0;
    int keep_all = !o || o->matrix_dtype < 0, rc = -1;
    const size_t skew = keep_all ? 0 : 2;  // 2 past 4-byte alignment: never used in place
    Stage *st = calloc(n, sizeof *st);
    TensorRef *refs = calloc(n, sizeof *refs);
    unsigned char *block = NULL;
    if (!st || !refs) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        TensorSpec s;
        gpt2_tensor_spec(c, i, &s);
        plan_stage(&st[i], slot[i], tensor_data(g, slot[i]), s.kind, keep_all);
        if (!st[i].staged) continue;
        st[i].at = total + skew;
        // sizes are bounded by the validated configuration: no overflow
        total += round_up(st[i].bytes + skew, 64);
    }
    if (total && !(block = memory_alloc_large(total))) {
        gpt_error(err, "%s: out of memory for %zu MB of weights", path, total >> 20);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const unsigned char *data = tensor_data(g, slot[i]);
        TensorSpec s;
        gpt2_tensor_spec(c, i, &s);
        if (st[i].staged) {
            stage_tensor(block + st[i].at, &st[i], slot[i], data);
            refs[i] = (TensorRef){st[i].dtype, LAYOUT_OUT_IN, block + st[i].at};
        } else {
            refs[i] = (TensorRef){float_dtype(slot[i]->type), LAYOUT_OUT_IN, data};
        }
    }
    if (model_set_weights(m, refs, o, path, err) != 0) goto done;
    if (keep_all && block) {
        // every tensor was usable in place, so model_set_weights allocated
        // nothing (m->owned NULL): the staging block is the model's
        if (m->owned) {
            gpt_error(err, "%s: internal error: a staged tensor was copied", path);
            goto done;
        }
        m->owned = block;
        block = NULL;
    }
    rc = 0;
done:
    free(block);
    free(st);
    free(refs);
    return rc;
}

// ---------------------------------------------------------------------------
// the format

// "GGUF"; the load checks everything else, and names a version or an
// endianness it does not read.
static int gguf_sniff(const unsigned char *head, size_t n, size_t file_size) {
    (void)file_size;
    return n >= 4 && !memcmp(head, "GGUF", 4);
}

static int gguf_load(Model *m, const char *path, const WeightOptions *o, GptError *err) {
    Gguf g;
    if (gguf_parse(&g, m->map.data, m->map.size, path, err) != 0) return -1;
    const TensorInfoG **slot = NULL;
    int rc = -1;
    if (read_config(&g, &m->config, path, err) != 0) goto done;
    slot = calloc(gpt2_n_tensors(&m->config), sizeof *slot);
    if (!slot) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    // the tokenizer before the weights: model_set_weights may unmap the file
    if (match_tensors(&g, &m->config, slot, path, err) != 0 ||
        read_tokenizer(&g, (size_t)m->config.vocab_size, &m->tokenizer, path, err) != 0 ||
        set_weights(m, &g, slot, o, path, err) != 0)
        goto done;
    rc = 0;
done:
    free(slot);
    gguf_free(&g);
    return rc;
}

// Every tensor as the file stores it: its GGUF name and type; matrices in
// Hugging Face's (in, out) order, marked stored (out, in); the others as
// their rows and columns.
static int gguf_list(const unsigned char *file, size_t size, ModelInfo *info, GptError *err) {
    Gguf g;
    if (gguf_parse(&g, file, size, info->file, err) != 0) return -1;
    info->version = g.version;
    info->data_offset = g.data_start;
    size_t cap = 0;
    int rc = 0;
    for (size_t i = 0; i < g.n_t && rc == 0; i++) {
        const TensorInfoG *t = &g.t[i];
        char name[MAX_NAME], hf[96];
        memcpy(name, t->name.p, t->name.len);
        name[t->name.len] = '\0';
        int nd = t->n_dims ? (int)t->n_dims : 1, matrix = 0;
        uint64_t dims[MAX_DIMS];
        if (hf_name(t->name, hf, sizeof hf) == 0) {
            const char *w = strrchr(hf, '.');
            matrix = nd == 2 && w && !strcmp(w, ".weight") && (strstr(hf, ".attn.") || strstr(hf, ".mlp."));
        }
        for (int d = 0; d < nd; d++) dims[d] = matrix ? t->ne[d] : t->ne[nd - 1 - d];
        if (model_info_add(info, &cap, name, ggml_type_name(t->type), nd, dims, g.data_start + t->offset,
                           t->nbytes) != 0)
            rc = gpt_error(err, "%s: out of memory", info->file);
        else info->tensors[info->n_tensors - 1].transposed = matrix;
    }
    gguf_free(&g);
    return rc;
}

const ModelFormat GGUF_FORMAT = {"GGUF", gguf_sniff, gguf_load, gguf_list};

// ---------------------------------------------------------------------------
// llama.cpp's LoRA adapters (formats.h): the metadata that makes a file one,
// and its tensors, each 2-D and F32, F16 or BF16. What they mean is lora.c's.

// A required string entry equal to want: 0, or -1 with err naming the key.
static int kv_want(const Gguf *g, const char *key, const char *want, const char *why, const char *path,
                   GptError *err) {
    Str s;
    char buf[80];
    int r = kv_string(g, key, &s, path, err);
    if (r < 0) return -1;
    if (r == 1) return gpt_error(err, "%s: metadata %s is missing (%s)", path, key, why);
    if (!str_is(s, want))
        return gpt_error(err, "%s: metadata %s is \"%s\", not \"%s\" (%s)", path, key, printable(buf, sizeof buf, s),
                         want, why);
    return 0;
}

int gguf_lora_read(const unsigned char *file, size_t size, const char *path, float *alpha,
                   const unsigned char **data, GgufLoraTensor **out, size_t *n, GptError *err) {
    Gguf g;
    *out = NULL;
    *n = 0;
    if (gguf_parse(&g, file, size, path, err) != 0) return -1;
    int rc = -1;
    char name[80];
    if (kv_want(&g, "general.type", "adapter", "a LoRA adapter's; a GGUF model is loaded with -m", path, err) != 0 ||
        kv_want(&g, "adapter.type", "lora", "gpt reads LoRA adapters only", path, err) != 0 ||
        kv_want(&g, "general.architecture", "gpt2", "an adapter of a GPT-2", path, err) != 0)
        goto done;
    const Kv *a = find_kv(&g, "adapter.lora.alpha");
    if (!a) {
        gpt_error(err, "%s: metadata adapter.lora.alpha is missing", path);
        goto done;
    }
    if (a->type != V_F32) {
        gpt_error(err, "%s: metadata adapter.lora.alpha is a %s, not a float32", path,
                  a->type < N_VTYPES ? VALUE_NAMES[a->type] : "?");
        goto done;
    }
    uint32_t u = rd32(g.file + a->at);
    memcpy(alpha, &u, 4);
    if (!isfinite(*alpha)) {
        gpt_error(err, "%s: metadata adapter.lora.alpha is not a finite number", path);
        goto done;
    }
    *out = calloc(g.n_t ? g.n_t : 1, sizeof **out);
    if (!*out) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < g.n_t; i++) {
        const TensorInfoG *t = &g.t[i];
        printable(name, sizeof name, t->name);
        if (t->n_dims != 2) {
            gpt_error(err, "%s: tensor %s has %u dims; a LoRA matrix has 2", path, name, t->n_dims);
            goto done;
        }
        if (!is_float_type(t->type)) {
            gpt_error(err, "%s: tensor %s has type %s; gpt reads adapters in F32, F16 or BF16", path, name,
                      ggml_type_name(t->type));
            goto done;
        }
        GgufLoraTensor *o = &(*out)[i];
        memcpy(o->name, t->name.p, t->name.len);  // < MAX_NAME, no NUL inside (the parse's checks)
        o->name[t->name.len] = '\0';
        o->dtype = float_dtype(t->type);
        o->ne[0] = t->ne[0], o->ne[1] = t->ne[1];
        o->begin = (size_t)t->offset;
    }
    *data = g.file + g.data_start;
    *n = g.n_t;
    rc = 0;
done:
    if (rc != 0) {
        free(*out);
        *out = NULL;
    }
    gguf_free(&g);
    return rc;
}

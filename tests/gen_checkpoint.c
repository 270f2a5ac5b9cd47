/*
 * gen_checkpoint.c - writes the deterministic GPT-2 test checkpoints of
 * tests/fixtures/FORMULA.md (the copy in the shared fixtures), so that the
 * tests run on a machine that has only this project.
 *
 *   gen_checkpoint OUT_DIR [--layers 12 --embd 768 --heads 12 --ctx 1024
 *                  --vocab 50257] [--prefix transformer.] [--unaligned-data]
 *                  [--mask-buffers] [--dtype F32|F16|BF16]
 *                  [--tokenizer-dir models | --no-tokenizer]
 *   gen_checkpoint --llmc OUT_FILE [same shape flags]
 *
 * The first form writes OUT_DIR/config.json and OUT_DIR/model.safetensors in
 * Hugging Face layout, byte for byte what make_checkpoint.py writes for F32
 * (same key order, same "__metadata__", same header padding), and copies
 * vocab.json and merges.txt from the tokenizer directory. F16 and BF16 store
 * the same values rounded to nearest-even; they exist for loader tests and
 * have no published hash.
 *
 * The second form writes the same model as an llm.c checkpoint (the
 * gpt2_124M.bin layout of karpathy/llm.c, version 3 = float32): a 256-int32
 * header, then the parameters in llm.c's order with its [out, in] matrices,
 * i.e. HF's Conv1D weights transposed, and wte padded to a multiple of 128
 * rows with zeros. Converting it back gives exactly the same model.
 *
 * Every value is a pure function of (tensor name, element index), so data is
 * streamed through one small buffer: nothing is held in memory whole.
 * This is a test tool, not library code: it prints and exits.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formula.h"

// ---------------------------------------------------------------------------
// The formula

// What kind of tensor decides the scale (FORMULA.md's table).
typedef enum { K_WTE, K_WPE, K_LN_W, K_LN_B, K_BIAS, K_W_IN, K_W_OUT, K_MASK } Kind;

// Element i of the tensor whose unprefixed name hashes to h. Every step is
// exact in float32 except the final 1 + 0.125u, which rounds exactly as
// numpy's float32 add does (SSE arithmetic, round to nearest-even).
static float value(uint64_t h, Kind kind, uint64_t i) {
    float u = formula_uniform(h, i);
    switch (kind) {
    case K_WTE: return 0.25f * u;
    case K_LN_W: return 1.0f + 0.125f * u;
    case K_W_OUT: return 0.03125f * u;
    default: return 0.0625f * u;  // wpe, ln bias, biases, w_in
    }
}

// ---------------------------------------------------------------------------
// The tensors, in the order of make_checkpoint.py

typedef struct {
    char name[64];    // without prefix: the hash always uses this
    size_t shape[4];
    int ndim;
    Kind kind;
    int layer;        // for masks
} Tensor;

typedef struct {
    Tensor *t;
    size_t n, cap;
} TensorList;

static void add(TensorList *l, Kind kind, int ndim, size_t d0, size_t d1, const char *fmt, int layer) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->t = realloc(l->t, l->cap * sizeof *l->t);
        if (!l->t) {
            fprintf(stderr, "gen_checkpoint: out of memory\n");
            exit(1);
        }
    }
    Tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, fmt, layer);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->kind = kind;
    t->layer = layer;
}

static size_t numel(const Tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static TensorList gpt2_tensors(int L, size_t C, size_t T, size_t V, int masks) {
    TensorList l = {0};
    add(&l, K_WTE, 2, V, C, "wte.weight", 0);
    add(&l, K_WPE, 2, T, C, "wpe.weight", 0);
    for (int i = 0; i < L; i++) {
        add(&l, K_LN_W, 1, C, 0, "h.%d.ln_1.weight", i);
        add(&l, K_LN_B, 1, C, 0, "h.%d.ln_1.bias", i);
        add(&l, K_W_IN, 2, C, 3 * C, "h.%d.attn.c_attn.weight", i);
        add(&l, K_BIAS, 1, 3 * C, 0, "h.%d.attn.c_attn.bias", i);
        add(&l, K_W_OUT, 2, C, C, "h.%d.attn.c_proj.weight", i);
        add(&l, K_BIAS, 1, C, 0, "h.%d.attn.c_proj.bias", i);
        add(&l, K_LN_W, 1, C, 0, "h.%d.ln_2.weight", i);
        add(&l, K_LN_B, 1, C, 0, "h.%d.ln_2.bias", i);
        add(&l, K_W_IN, 2, C, 4 * C, "h.%d.mlp.c_fc.weight", i);
        add(&l, K_BIAS, 1, 4 * C, 0, "h.%d.mlp.c_fc.bias", i);
        add(&l, K_W_OUT, 2, 4 * C, C, "h.%d.mlp.c_proj.weight", i);
        add(&l, K_BIAS, 1, C, 0, "h.%d.mlp.c_proj.bias", i);
    }
    add(&l, K_LN_W, 1, C, 0, "ln_f.weight", 0);
    add(&l, K_LN_B, 1, C, 0, "ln_f.bias", 0);
    if (masks) {
        // h.N.attn.bias: the causal tril mask [1,1,T,T] the published file has
        for (int i = 0; i < L; i++) {
            Tensor *t;
            add(&l, K_MASK, 4, 1, 1, "h.%d.attn.bias", i);
            t = &l.t[l.n - 1];
            t->shape[2] = T;
            t->shape[3] = T;
        }
    }
    return l;
}

// ---------------------------------------------------------------------------
// Output encodings

typedef enum { DT_F32, DT_F16, DT_BF16 } DType;

static uint32_t f32_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

// float32 -> IEEE half, round to nearest-even, subnormals and overflow handled
// (the values here are small, but a converter that is right only for them
// would be a trap for whoever reuses it).
static uint16_t f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t man = x & 0x7FFFFFu;
    if (exp == 0xFF) return (uint16_t)(sign | 0x7C00u | (man ? 0x200u : 0));  // inf/nan
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7C00u);  // overflow -> inf
    if (e <= 0) {
        // subnormal half (or zero): shift the full significand right
        if (e < -10) return sign;  // below half the smallest subnormal
        uint32_t m = man | 0x800000u;
        int shift = 14 - e;  // 24-bit significand -> 10-bit subnormal field
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);  // a carry into the exponent is correct
    }
    uint32_t half = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++;  // may carry to inf: correct
    return (uint16_t)(sign | half);
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet nan
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static size_t dtype_size(DType dt) { return dt == DT_F32 ? 4 : 2; }
static const char *dtype_name(DType dt) {
    return dt == DT_F32 ? "F32" : dt == DT_F16 ? "F16" : "BF16";
}

// Little-endian stores, whatever the host.
static void put_le(unsigned char *p, uint32_t v, size_t n) {
    for (size_t k = 0; k < n; k++) p[k] = (unsigned char)(v >> (8 * k));
}

// A buffered writer: values go in one at a time, bytes come out in 1 MiB runs.
typedef struct {
    FILE *f;
    const char *path;
    DType dt;
    unsigned char buf[1 << 20];
    size_t n;
} Writer;

static void flush(Writer *w) {
    if (w->n && fwrite(w->buf, 1, w->n, w->f) != w->n) {
        fprintf(stderr, "gen_checkpoint: %s: write error: %s\n", w->path, strerror(errno));
        exit(1);
    }
    w->n = 0;
}

static inline void put(Writer *w, float v) {
    if (w->n + 4 > sizeof w->buf) flush(w);
    unsigned char *p = w->buf + w->n;
    switch (w->dt) {
    case DT_F32: put_le(p, f32_bits(v), 4); break;
    case DT_F16: put_le(p, f32_to_f16(v), 2); break;
    case DT_BF16: put_le(p, f32_to_bf16(v), 2); break;
    }
    w->n += dtype_size(w->dt);
}

static void write_tensor(Writer *w, const Tensor *t) {
    if (t->kind == K_MASK) {
        size_t T = t->shape[3];
        for (size_t r = 0; r < T; r++)
            for (size_t c = 0; c < T; c++) put(w, c <= r ? 1.0f : 0.0f);
        return;
    }
    uint64_t h = fnv1a64(t->name);
    size_t n = numel(t);
    for (size_t i = 0; i < n; i++) put(w, value(h, t->kind, i));
}

// HF Conv1D weight W (rows, cols) written as llm.c's (cols, rows): W^T.
static void write_transposed(Writer *w, const Tensor *t) {
    uint64_t h = fnv1a64(t->name);
    size_t rows = t->shape[0], cols = t->shape[1];
    for (size_t o = 0; o < cols; o++)
        for (size_t i = 0; i < rows; i++) put(w, value(h, t->kind, (uint64_t)(i * cols + o)));
}

// ---------------------------------------------------------------------------
// A growing string for the JSON header

typedef struct {
    char *s;
    size_t n, cap;
} Str;

static void sappend(Str *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sappend(Str *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) exit(1);
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = (b->cap + (size_t)k + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s) {
            fprintf(stderr, "gen_checkpoint: out of memory\n");
            exit(1);
        }
    }
}

// ---------------------------------------------------------------------------

typedef struct {
    int layers, embd, heads, ctx, vocab;
    const char *prefix;
    int unaligned, masks, no_tokenizer;
    DType dt;
    const char *tokenizer_dir;
} Options;

static FILE *open_out(const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "gen_checkpoint: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    return f;
}

static void close_out(FILE *f, const char *path) {
    if (fclose(f) != 0) {
        fprintf(stderr, "gen_checkpoint: %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void write_safetensors(const char *path, const Options *o) {
    size_t C = (size_t)o->embd, T = (size_t)o->ctx, V = (size_t)o->vocab;
    TensorList l = gpt2_tensors(o->layers, C, T, V, o->masks);
    size_t es = dtype_size(o->dt);

    // The header exactly as Python's json.dumps(header, separators=(",", ":"))
    Str hb = {0};
    size_t off = 0;
    sappend(&hb, "{");
    for (size_t k = 0; k < l.n; k++) {
        const Tensor *t = &l.t[k];
        size_t nb = numel(t) * es;
        sappend(&hb, "%s\"%s%s\":{\"dtype\":\"%s\",\"shape\":[", k ? "," : "", o->prefix, t->name,
                dtype_name(o->dt));
        for (int d = 0; d < t->ndim; d++) sappend(&hb, "%s%zu", d ? "," : "", t->shape[d]);
        sappend(&hb, "],\"data_offsets\":[%zu,%zu]}", off, off + nb);
        off += nb;
    }
    sappend(&hb, ",\"__metadata__\":{\"format\":\"pt\"}}");
    // Padding with spaces: to 8 bytes, or so that the data starts at 3 mod 8
    // as in the published gpt2 file (8 + 14283 = 14291).
    size_t want = o->unaligned ? (3 + 16 - (8 + hb.n) % 8) % 8 : (8 - hb.n % 8) % 8;
    for (size_t k = 0; k < want; k++) sappend(&hb, " ");

    FILE *f = open_out(path);
    static Writer w;  // 1 MiB buffer: static keeps it off the stack
    w.f = f;
    w.path = path;
    w.dt = o->dt;
    w.n = 0;
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)hb.n >> (8 * k));
    if (fwrite(len8, 1, 8, f) != 8 || fwrite(hb.s, 1, hb.n, f) != hb.n) {
        fprintf(stderr, "gen_checkpoint: %s: write error\n", path);
        exit(1);
    }
    for (size_t k = 0; k < l.n; k++) write_tensor(&w, &l.t[k]);
    flush(&w);
    close_out(f, path);
    free(hb.s);
    free(l.t);
}

static void write_config(const char *path, const Options *o) {
    // json.dump(config, f, indent=2) of make_checkpoint.py, key for key
    FILE *f = open_out(path);
    fprintf(f,
            "{\n"
            "  \"architectures\": [\n"
            "    \"GPT2LMHeadModel\"\n"
            "  ],\n"
            "  \"model_type\": \"gpt2\",\n"
            "  \"activation_function\": \"gelu_new\",\n"
            "  \"layer_norm_epsilon\": 1e-05,\n"
            "  \"n_ctx\": %d,\n"
            "  \"n_positions\": %d,\n"
            "  \"n_embd\": %d,\n"
            "  \"n_head\": %d,\n"
            "  \"n_layer\": %d,\n"
            "  \"vocab_size\": %d,\n"
            "  \"bos_token_id\": 50256,\n"
            "  \"eos_token_id\": 50256,\n"
            "  \"attn_pdrop\": 0.0,\n"
            "  \"embd_pdrop\": 0.0,\n"
            "  \"resid_pdrop\": 0.0,\n"
            "  \"tie_word_embeddings\": true\n"
            "}",
            o->ctx, o->ctx, o->embd, o->heads, o->layers, o->vocab);
    close_out(f, path);
}

static void copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) {
        fprintf(stderr, "gen_checkpoint: %s: %s (use --tokenizer-dir DIR or --no-tokenizer)\n", from,
                strerror(errno));
        exit(1);
    }
    FILE *out = open_out(to);
    char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (fwrite(buf, 1, n, out) != n) {
            fprintf(stderr, "gen_checkpoint: %s: write error\n", to);
            exit(1);
        }
    }
    if (ferror(in)) {
        fprintf(stderr, "gen_checkpoint: %s: read error\n", from);
        exit(1);
    }
    fclose(in);
    close_out(out, to);
}

static void write_llmc(const char *path, const Options *o) {
    size_t C = (size_t)o->embd, T = (size_t)o->ctx, V = (size_t)o->vocab;
    int L = o->layers;
    size_t Vp = (V + 127) / 128 * 128;  // llm.c pads the vocabulary to 128
    TensorList l = gpt2_tensors(L, C, T, V, 0);
    // per-layer tensor k of layer i sits at l.t[2 + 12 * i + k]
    enum { LN1W, LN1B, QKVW, QKVB, APW, APB, LN2W, LN2B, FCW, FCB, FPW, FPB };

    int32_t hdr[256] = {0};
    hdr[0] = 20240326;  // magic
    hdr[1] = 3;         // version 3: float32 parameters
    hdr[2] = o->ctx;
    hdr[3] = o->vocab;
    hdr[4] = L;
    hdr[5] = o->heads;
    hdr[6] = o->embd;
    hdr[7] = (int32_t)Vp;
    unsigned char hb[1024];
    for (int k = 0; k < 256; k++) put_le(hb + 4 * k, (uint32_t)hdr[k], 4);

    FILE *f = open_out(path);
    static Writer w;
    w.f = f;
    w.path = path;
    w.dt = DT_F32;
    w.n = 0;
    if (fwrite(hb, 1, sizeof hb, f) != sizeof hb) {
        fprintf(stderr, "gen_checkpoint: %s: write error\n", path);
        exit(1);
    }
    write_tensor(&w, &l.t[0]);                          // wte (V, C)
    for (size_t k = V * C; k < Vp * C; k++) put(&w, 0.0f);  // padded rows
    write_tensor(&w, &l.t[1]);                          // wpe (maxT, C)
    // llm.c groups each kind across layers; matrices are [out, in].
    static const int order[12] = {LN1W, LN1B, QKVW, QKVB, APW, APB, LN2W, LN2B, FCW, FCB, FPW, FPB};
    for (int k = 0; k < 12; k++) {
        for (int i = 0; i < L; i++) {
            const Tensor *t = &l.t[2 + 12 * (size_t)i + (size_t)order[k]];
            if (t->ndim == 2) write_transposed(&w, t);
            else write_tensor(&w, t);
        }
    }
    write_tensor(&w, &l.t[2 + 12 * (size_t)L]);      // lnfw
    write_tensor(&w, &l.t[2 + 12 * (size_t)L + 1]);  // lnfb
    flush(&w);
    close_out(f, path);
    free(l.t);
}

static void usage(void) {
    fprintf(stderr,
            "usage: gen_checkpoint OUT_DIR [--layers N --embd C --heads H --ctx T --vocab V]\n"
            "                      [--prefix P] [--unaligned-data] [--mask-buffers]\n"
            "                      [--dtype F32|F16|BF16] [--tokenizer-dir DIR | --no-tokenizer]\n"
            "       gen_checkpoint --llmc OUT_FILE [--layers ... --vocab V]\n");
    exit(2);
}

static int int_arg(const char *flag, const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v <= 0 || v > (1L << 24)) {
        fprintf(stderr, "gen_checkpoint: %s %s: must be a positive integer\n", flag, s);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    Options o = {12, 768, 12, 1024, 50257, "", 0, 0, 0, DT_F32, "models"};
    const char *out = NULL;
    int llmc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--unaligned-data")) o.unaligned = 1;
        else if (!strcmp(a, "--mask-buffers")) o.masks = 1;
        else if (!strcmp(a, "--no-tokenizer")) o.no_tokenizer = 1;
        else if (!strcmp(a, "--llmc")) llmc = 1;
        else if (a[0] == '-' && a[1] == '-') {
            if (!next) usage();
            i++;
            if (!strcmp(a, "--layers")) o.layers = int_arg(a, next);
            else if (!strcmp(a, "--embd")) o.embd = int_arg(a, next);
            else if (!strcmp(a, "--heads")) o.heads = int_arg(a, next);
            else if (!strcmp(a, "--ctx")) o.ctx = int_arg(a, next);
            else if (!strcmp(a, "--vocab")) o.vocab = int_arg(a, next);
            else if (!strcmp(a, "--prefix")) o.prefix = next;
            else if (!strcmp(a, "--tokenizer-dir")) o.tokenizer_dir = next;
            else if (!strcmp(a, "--dtype")) {
                if (!strcmp(next, "F32")) o.dt = DT_F32;
                else if (!strcmp(next, "F16")) o.dt = DT_F16;
                else if (!strcmp(next, "BF16")) o.dt = DT_BF16;
                else usage();
            } else usage();
        } else if (!out) out = a;
        else usage();
    }
    if (!out) usage();
    if (o.embd % o.heads) {
        fprintf(stderr, "gen_checkpoint: --embd %d is not a multiple of --heads %d\n", o.embd, o.heads);
        return 2;
    }
    if (strlen(o.prefix) > 32) usage();
    if (llmc) {
        if (o.dt != DT_F32 || o.masks || o.unaligned || *o.prefix) {
            fprintf(stderr, "gen_checkpoint: --llmc takes only the shape flags\n");
            return 2;
        }
        write_llmc(out, &o);
        return 0;
    }
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "gen_checkpoint: %s: %s\n", out, strerror(errno));
        return 1;
    }
    size_t plen = strlen(out) + 64 + (o.tokenizer_dir ? strlen(o.tokenizer_dir) : 0);
    char *p = malloc(plen), *q = malloc(plen);
    if (!p || !q) return 1;
    snprintf(p, plen, "%s/model.safetensors", out);
    write_safetensors(p, &o);
    snprintf(p, plen, "%s/config.json", out);
    write_config(p, &o);
    if (!o.no_tokenizer) {
        static const char *files[2] = {"vocab.json", "merges.txt"};
        for (int k = 0; k < 2; k++) {
            snprintf(p, plen, "%s/%s", o.tokenizer_dir, files[k]);
            snprintf(q, plen, "%s/%s", out, files[k]);
            copy_file(p, q);
        }
    }
    free(p);
    free(q);
    return 0;
}

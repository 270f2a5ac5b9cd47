/*
 * test_model_load.c - model_load() on the generated checkpoints of
 * tests/make_checkpoints.sh ($CKPT_DIR, default build/ckpt), and on broken
 * copies of the tiny one written into a temporary directory.
 *
 * The expected weight values are computed here from FORMULA.md, independently
 * of the generator (they share only the hash, tests/formula.h; the
 * generator's output is checked against the published sha256 sums): a
 * loader that reads the wrong bytes, the wrong tensor or the wrong layout
 * cannot agree with them. Comparisons are exact: loading
 * must not change a single bit (F16/BF16: the value rounded to nearest-even,
 * widened back exactly).
 */
#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "formula.h"
#include "paths.h"
#include "kernels/matmul.h"
#include "model/loader.h"
#include "model/model.h"


// ---------------------------------------------------------------------------
// FORMULA.md

// Scale by name: ln weights are 1 + 0.125u, the rest s*u (FORMULA.md's table).
static float formula(const char *name, size_t i) {
    float u = formula_uniform(fnv1a64(name), i);
    const char *dot = strrchr(name, '.');
    int is_ln = strstr(name, "ln_") != NULL;
    if (!strcmp(name, "wte.weight")) return 0.25f * u;
    if (is_ln && !strcmp(dot, ".weight")) return 1.0f + 0.125f * u;
    if (strstr(name, "c_proj.weight")) return 0.03125f * u;
    return 0.0625f * u;
}

typedef enum { AS_F32, AS_F16, AS_BF16 } Rounding;

static float rounded(float v, Rounding r) {
    if (r == AS_F16) return (float)(_Float16)v;  // the compiler's RNE conversion
    if (r == AS_BF16) {
        uint32_t b;
        memcpy(&b, &v, 4);
        b += 0x7FFFu + ((b >> 16) & 1u);
        b &= 0xFFFF0000u;
        memcpy(&v, &b, 4);
    }
    return v;
}

// Compares n values of tensor `name` (every `stride`-th element plus the
// last) with the formula; reports the first mismatch. Returns mismatches.
static size_t check_tensor(const float *p, const char *name, size_t n, size_t stride, Rounding r) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i += stride) {
        if (i + stride >= n) i = n - 1;  // always include the last element
        float want = rounded(formula(name, i), r);
        if (memcmp(&p[i], &want, 4) != 0) {
            if (!bad)
                fprintf(stderr, "  %s[%zu]: expected %.9g, got %.9g\n", name, i, (double)want, (double)p[i]);
            bad++;
        }
    }
    return bad;
}

// The same for a matrix held as a Weight, whatever its dtype: element k of
// Hugging Face's storage order is (in i, out j) with k = i * n_out + j for
// c_attn & co. (stored (in, out)) and (out j, in i) with k = j * n_in + i
// for wte (stored (V, C)).
static size_t check_weight(const Weight *w, const char *name, int hf_in_out, size_t stride, Rounding r) {
    size_t bad = 0, n = w->n_in * w->n_out;
    for (size_t k = 0; k < n; k += stride) {
        if (k + stride >= n) k = n - 1;
        size_t i = hf_in_out ? k / w->n_out : k % w->n_in, j = hf_in_out ? k % w->n_out : k / w->n_in;
        float want = rounded(formula(name, k), r), got = weight_at(w, i, j);
        if (memcmp(&got, &want, 4) != 0) {
            if (!bad) fprintf(stderr, "  %s[%zu]: expected %.9g, got %.9g\n", name, k, (double)want, (double)got);
            bad++;
        }
    }
    return bad;
}

// Every tensor of a loaded model against the formula.
static void check_weights(const Model *m, size_t stride, Rounding r, const char *what) {
    const GPT2Config *c = &m->config;
    size_t C = (size_t)c->n_embd, T = (size_t)c->n_ctx;
    size_t bad = 0;
    char name[64];
    bad += check_weight(&m->weights.wte, "wte.weight", 0, stride, r);
    bad += check_tensor(m->weights.wpe, "wpe.weight", T * C, stride, r);
    for (int l = 0; l < c->n_layer; l++) {
        const GPT2Layer *y = &m->weights.layers[l];
        struct {
            const float *p;
            const char *suffix;
            size_t n;
        } t[8] = {
            {y->ln1_w, "ln_1.weight", C},   {y->ln1_b, "ln_1.bias", C},
            {y->qkv_b, "attn.c_attn.bias", 3 * C}, {y->attn_proj_b, "attn.c_proj.bias", C},
            {y->ln2_w, "ln_2.weight", C},   {y->ln2_b, "ln_2.bias", C},
            {y->fc_b, "mlp.c_fc.bias", 4 * C}, {y->fc_proj_b, "mlp.c_proj.bias", C},
        };
        for (int k = 0; k < 8; k++) {
            snprintf(name, sizeof name, "h.%d.%s", l, t[k].suffix);
            bad += check_tensor(t[k].p, name, t[k].n, stride, r);
        }
        struct {
            const Weight *w;
            const char *suffix;
        } mats[4] = {{&y->qkv_w, "attn.c_attn.weight"}, {&y->attn_proj_w, "attn.c_proj.weight"},
                     {&y->fc_w, "mlp.c_fc.weight"}, {&y->fc_proj_w, "mlp.c_proj.weight"}};
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "h.%d.%s", l, mats[k].suffix);
            bad += check_weight(mats[k].w, name, 1, stride, r);
        }
    }
    bad += check_tensor(m->weights.lnf_w, "ln_f.weight", C, 1, r);
    bad += check_tensor(m->weights.lnf_b, "ln_f.bias", C, 1, r);
    CHECK(bad == 0, "%s: %zu weight values differ from FORMULA.md", what, bad);
}

static size_t gpt2_params(size_t L, size_t C, size_t T, size_t V) {
    return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C;
}

// ---------------------------------------------------------------------------
// Good checkpoints

static void test_tiny(void) {
    Model m;
    GptError err = {""};
    const char *dir = ckpt("tiny");
    int rc = model_load(&m, dir, &err);
    CHECK(rc == 0, "model_load(%s): %s", dir, err.msg);
    if (rc != 0) return;
    GPT2Config c = m.config;
    CHECK(c.n_layer == 2 && c.n_embd == 64 && c.n_head == 4 && c.n_ctx == 128 && c.vocab_size == 50257,
          "tiny config: L %d C %d NH %d T %d V %d", c.n_layer, c.n_embd, c.n_head, c.n_ctx, c.vocab_size);
    CHECK(c.ln_eps == 1e-5f, "ln_eps %g", (double)c.ln_eps);
    size_t want = gpt2_params(2, 64, 128, 50257);
    CHECK(m.n_params == want, "tiny n_params %zu, expected %zu", m.n_params, want);
    CHECK(m.weight_bytes == 4 * want, "weight_bytes %zu", m.weight_bytes);
    CHECK(!strcmp(m.source_kind, "safetensors"), "source_kind %s", m.source_kind);
    // aligned float32: what is stored as gpt holds it is used in place (the
    // vectors, and wte, whose rows are tokens); c_attn & co., stored (in,
    // out), are transposed once into the owned block
    CHECK(m.map.data != NULL && m.owned != NULL, "tiny: map %p, owned %p", (const void *)m.map.data,
          (void *)m.owned);
    CHECK((const unsigned char *)m.weights.wte.data >= m.map.data &&
              (const unsigned char *)m.weights.wte.data < m.map.data + m.map.size &&
              (const unsigned char *)m.weights.layers[1].ln2_b >= m.map.data &&
              (const unsigned char *)m.weights.layers[1].ln2_b < m.map.data + m.map.size,
          "wte and the vectors do not point into the mapping");
    CHECK(m.weights.layers[0].qkv_w.data == m.owned && m.weights.layers[0].qkv_w.dtype == DTYPE_F32,
          "h.0's c_attn should be the first tensor of the owned block");
    CHECK(m.load_seconds >= 0 && m.load_seconds < 60, "load_seconds %g", m.load_seconds);
    check_weights(&m, 1, AS_F32, "tiny");

    // The same file by path, and with the "transformer." prefix: same weights.
    const char *variants[2] = {ckpt("tiny/model.safetensors"), ckpt("tiny-prefix")};
    for (int v = 0; v < 2; v++) {
        Model m2;
        rc = model_load(&m2, variants[v], &err);
        CHECK(rc == 0, "model_load(%s): %s", variants[v], err.msg);
        if (rc != 0) continue;
        CHECK(m2.n_params == m.n_params, "%s: n_params %zu", variants[v], m2.n_params);
        int same = memcmp(m2.weights.wte.data, m.weights.wte.data, 50257 * 64 * 4) == 0 &&
                   memcmp(m2.weights.layers[1].fc_proj_w.data, m.weights.layers[1].fc_proj_w.data, 256 * 64 * 4) == 0 &&
                   memcmp(m2.weights.lnf_b, m.weights.lnf_b, 64 * 4) == 0;
        CHECK(same, "%s: weights differ from tiny's", variants[v]);
        check_weights(&m2, 7, AS_F32, variants[v]);
        model_free(&m2);
    }
    model_free(&m);
    model_free(&m);  // idempotent
    CHECK(m.weights.layers == NULL && m.map.data == NULL, "model_free left pointers behind");
    model_free(NULL);
}

static void test_half(const char *name, Rounding r) {
    Model m;
    GptError err = {""};
    const char *dir = ckpt(name);
    int rc = model_load(&m, dir, &err);
    CHECK(rc == 0, "model_load(%s): %s", dir, err.msg);
    if (rc != 0) return;
    // matrices keep their two bytes; vectors are widened to float32
    DType want = r == AS_F16 ? DTYPE_F16 : DTYPE_BF16;
    CHECK(m.weights.wte.dtype == want && m.weights.layers[1].fc_proj_w.dtype == want, "%s: matrices are %s, %s",
          name, dtype_name(m.weights.wte.dtype), dtype_name(m.weights.layers[1].fc_proj_w.dtype));
    CHECK(m.weight_bytes == 4 * (128 * 64 + 2 * 13 * 64 + 2 * 64) + 2 * (50257 * 64 + 2 * 12 * 64 * 64),
          "%s: weight_bytes %zu", name, m.weight_bytes);
    CHECK(m.owned != NULL && (uintptr_t)m.owned % 64 == 0, "%s: owned block not 64-byte aligned", name);
    CHECK(m.n_params == gpt2_params(2, 64, 128, 50257), "%s: n_params %zu", name, m.n_params);
    check_weights(&m, 1, r, name);
    model_free(&m);
}

static void test_124m(void) {
    Model m;
    GptError err = {""};
    const char *dir = ckpt("gpt2-124M-shaped");
    int rc = model_load(&m, dir, &err);
    CHECK(rc == 0, "model_load(%s): %s", dir, err.msg);
    if (rc != 0) return;
    GPT2Config c = m.config;
    CHECK(c.n_layer == 12 && c.n_embd == 768 && c.n_head == 12 && c.n_ctx == 1024 && c.vocab_size == 50257,
          "124M config: L %d C %d NH %d T %d V %d", c.n_layer, c.n_embd, c.n_head, c.n_ctx, c.vocab_size);
    CHECK(m.n_params == 124439808u, "124M n_params %zu, expected 124439808", m.n_params);
    CHECK(m.weight_bytes == 4u * 124439808u, "weight_bytes %zu", m.weight_bytes);
    // The data starts at 3 mod 8: the loader must copy, and align the copy.
    CHECK(m.owned != NULL, "unaligned 124M file should be copied");
    CHECK(m.owned == NULL || (uintptr_t)m.owned % 64 == 0, "owned block not 64-byte aligned");
    CHECK(((uintptr_t)m.weights.wte.data | (uintptr_t)m.weights.layers[5].fc_w.data | (uintptr_t)m.weights.lnf_b) % 4 == 0,
          "weights not float-aligned");

    // A few values by hand (FORMULA.md), then a sample of every tensor.
    float w0 = weight_at(&m.weights.wte, 0, 0), want0 = formula("wte.weight", 0);
    CHECK(w0 == want0, "wte[0] = %.9g, expected %.9g", (double)w0, (double)want0);
    float wl = weight_at(&m.weights.layers[11].fc_proj_w, 4 * 768 - 1, 767);
    float wantl = formula("h.11.mlp.c_proj.weight", 4 * 768 * 768 - 1);
    CHECK(wl == wantl, "h.11.mlp.c_proj.weight[last] = %.9g, expected %.9g", (double)wl, (double)wantl);
    float f5 = m.weights.lnf_w[5], want5 = formula("ln_f.weight", 5);
    CHECK(f5 == want5, "ln_f.weight[5] = %.9g, expected %.9g", (double)f5, (double)want5);
    CHECK(fabsf(f5 - 1.0f) <= 0.125f, "ln_f.weight[5] = %g is not 1 + 0.125u", (double)f5);
    check_weights(&m, 997, AS_F32, "gpt2-124M-shaped");
    if (getenv("VERBOSE")) printf("  124M loaded in %.3f s\n", m.load_seconds);
    model_free(&m);
}

// ---------------------------------------------------------------------------
// --dtype q4-pure: every matrix Q4, wte (the embedding and output layer) too

// An IEEE half as float, by hand (scales are finite).
static float half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e ? ldexpf((float)(m | 1024), e - 25) : ldexpf((float)m, -24);
    return h & 0x8000 ? -v : v;
}

// Element i of row j of a Q4 matrix, plainly from its bytes (dtype.h's
// layout): the quants of all rows, 16 bytes a block of 32 (low nibbles the
// first 16 levels, high nibbles the next 16, each level + 8), then the f16
// scales of all rows, one a block; the element is level * scale.
static float q4_plain(const Weight *w, size_t j, size_t i) {
    size_t blocks = (w->n_in + 31) / 32;
    const unsigned char *q = w->data, *row = q + j * blocks * 16 + i / 32 * 16;
    const unsigned char *sc = q + w->n_out * blocks * 16 + 2 * (j * blocks + i / 32);
    int byte = row[i % 32 % 16], level = (i % 32 < 16 ? byte & 15 : byte >> 4) - 8;
    return half_value((uint16_t)(sc[0] | sc[1] << 8)) * (float)level;
}

// Matrix w (Q4) holds the Q4 quantization of FORMULA.md's values: its
// bytes, row by row, are q4_quantize_row's of the float32 row. Returns the
// rows that differ.
static size_t q4_rows_from_formula(const Weight *w, const char *name, int hf_in_out) {
    size_t K = w->n_in, rb = q4_row_bytes(K), nb = (K + 31) / 32, bad = 0;
    float *x = malloc(K * sizeof *x);
    uint8_t *q = malloc(rb);
    uint16_t *sc = malloc(nb * sizeof *sc);
    for (size_t j = 0; j < w->n_out; j++) {
        for (size_t i = 0; i < K; i++) x[i] = formula(name, hf_in_out ? i * w->n_out + j : j * K + i);
        q4_quantize_row(q, sc, x, K);
        bad += memcmp(q, (const uint8_t *)w->data + j * rb, rb) != 0 || memcmp(sc, w->scales + j * nb, nb * 2) != 0;
    }
    free(x);
    free(q);
    free(sc);
    return bad;
}

static void test_q4_pure(void) {
    // the names: case-insensitive, q4 the mix, q4-pure every matrix
    WeightOptions o = {.matrix_dtype = -1};
    CHECK(weight_options_from_name("Q4-Pure", &o) == 0 && o.matrix_dtype == DTYPE_Q4 && o.q4_pure,
          "Q4-Pure: dtype %d pure %d", o.matrix_dtype, o.q4_pure);
    CHECK(weight_options_from_name("q4", &o) == 0 && o.matrix_dtype == DTYPE_Q4 && !o.q4_pure, "q4: pure %d",
          o.q4_pure);
    CHECK(weight_options_from_name("BF16", &o) == 0 && o.matrix_dtype == DTYPE_BF16 && !o.q4_pure, "BF16");
    CHECK(weight_options_from_name("q6", &o) == 0 && o.matrix_dtype == DTYPE_Q6 && !o.q4_pure &&
              !strcmp(weight_options_name(&o), "q6"),
          "q6: dtype %d pure %d", o.matrix_dtype, o.q4_pure);
    const char *bad_names[] = {"q4pure", "q4-", "q4-pure ", "q8-pure", "", "int4"};
    for (size_t k = 0; k < sizeof bad_names / sizeof *bad_names; k++) {
        WeightOptions b = {.matrix_dtype = 7, .q4_pure = 3};
        CHECK(weight_options_from_name(bad_names[k], &b) == -1 && b.matrix_dtype == 7 && b.q4_pure == 3,
              "'%s' taken for a weight dtype", bad_names[k]);
    }
    CHECK(!strcmp(weight_options_name(&(WeightOptions){.matrix_dtype = DTYPE_Q4, .q4_pure = 1}), "q4-pure") &&
              !strcmp(weight_options_name(&(WeightOptions){.matrix_dtype = DTYPE_Q4}), "q4") &&
              !strcmp(weight_options_name(&(WeightOptions){.matrix_dtype = -1}), "stored"),
          "weight_options_name");

    Model m, mix;
    GptError err = {""};
    weight_options_from_name("q4-pure", &o);
    int rc = model_load_with(&m, ckpt("tiny"), &o, &err);
    CHECK(rc == 0, "tiny as q4-pure: %s", err.msg);
    if (rc != 0) return;
    const GPT2Config *c = &m.config;
    size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer, V = (size_t)c->vocab_size;
    // every matrix Q4 and quantized from the file's float32 values
    size_t bad = q4_rows_from_formula(&m.weights.wte, "wte.weight", 0), n_q4 = m.weights.wte.dtype == DTYPE_Q4;
    for (size_t l = 0; l < L; l++) {
        const GPT2Layer *y = &m.weights.layers[l];
        const Weight *mats[4] = {&y->qkv_w, &y->attn_proj_w, &y->fc_w, &y->fc_proj_w};
        const char *suffix[4] = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"};
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof name, "h.%zu.%s", l, suffix[k]);
            n_q4 += mats[k]->dtype == DTYPE_Q4;
            if (mats[k]->dtype == DTYPE_Q4) bad += q4_rows_from_formula(mats[k], name, 1);
        }
    }
    CHECK(n_q4 == 1 + 4 * L, "q4-pure: %zu of %zu matrices are Q4", n_q4, 1 + 4 * L);
    CHECK(bad == 0, "q4-pure: %zu rows are not the Q4 of the file's values", bad);
    // bytes: a Q4 row of K takes K / 2 of nibbles and K / 16 of f16 scales
    // (K a multiple of 32 here), the vectors 4 an element
    size_t q4 = V * (C / 2 + C / 16) + L * (3 * C + C + 4 * C) * (C / 2 + C / 16) + L * C * (2 * C + C / 4);
    size_t vectors = 4 * (128 * C + L * 13 * C + 2 * C);
    CHECK(m.weight_bytes == q4 + vectors, "q4-pure weight_bytes %zu, want %zu", m.weight_bytes, q4 + vectors);
    char dts[32];
    CHECK(!strcmp(model_matrix_dtypes(&m, dts, sizeof dts), "Q4 (every matrix)"), "q4-pure matrices '%s'", dts);

    // the embedding's row lookup of a Q4 wte: level * scale, exactly, for
    // the first, last and some tokens between
    const int32_t tokens[] = {0, 1, 31, 198, 12345, 50255, 50256};
    float *row = malloc(C * sizeof *row);
    size_t wrong = 0;
    for (size_t t = 0; m.weights.wte.dtype == DTYPE_Q4 && t < sizeof tokens / sizeof *tokens; t++) {
        weight_row(row, &m.weights.wte, (size_t)tokens[t]);
        for (size_t i = 0; i < C; i++) {
            float want = q4_plain(&m.weights.wte, (size_t)tokens[t], i);
            if (memcmp(&row[i], &want, 4) != 0 && !wrong++)
                fprintf(stderr, "  wte row %d [%zu]: %.9g, dequantized %.9g\n", tokens[t], i, (double)row[i],
                        (double)want);
        }
    }
    CHECK(wrong == 0, "the embedding lookup of a Q4 wte: %zu values differ from the dequantized rows", wrong);
    free(row);

    // the mix, for contrast: wte, layer 0 and every attn.c_proj in Q6
    weight_options_from_name("q4", &o);
    rc = model_load_with(&mix, ckpt("tiny"), &o, &err);
    CHECK(rc == 0, "tiny as q4: %s", err.msg);
    if (rc == 0) {
        CHECK(mix.weights.wte.dtype == DTYPE_Q6 && mix.weights.layers[0].fc_w.dtype == DTYPE_Q6 &&
                  mix.weights.layers[1].attn_proj_w.dtype == DTYPE_Q6 && mix.weights.layers[1].fc_w.dtype == DTYPE_Q4,
              "q4's mix: wte %s, h.0 c_fc %s, h.1 c_proj %s, h.1 c_fc %s", dtype_name(mix.weights.wte.dtype),
              dtype_name(mix.weights.layers[0].fc_w.dtype), dtype_name(mix.weights.layers[1].attn_proj_w.dtype),
              dtype_name(mix.weights.layers[1].fc_w.dtype));
        CHECK(!strcmp(model_matrix_dtypes(&mix, dts, sizeof dts), "Q4 (Q6: wte, h.0, attn.c_proj)"), "q4 matrices '%s'",
              dts);
        CHECK(mix.weight_bytes > m.weight_bytes, "the mix (%zu bytes) should be larger than q4-pure (%zu)",
              mix.weight_bytes, m.weight_bytes);
        model_free(&mix);
    }
    model_free(&m);
}

// The llm.c variant is loaded by llmc.c; here we check that it is
// recognised, and that the generator wrote what llm.c expects, so that the
// loader's author can trust the fixture.
static void test_llmc_fixture(void) {
    const char *path = ckpt("tiny-llmc.bin");
    MappedFile f;
    GptError err = {""};
    int rc = file_map(path, &f, &err);
    CHECK(rc == 0, "%s", err.msg);
    if (rc != 0) return;
    CHECK(model_sniff(f.data, f.size, f.size) == MODEL_KIND_LLMC, "%s not recognised as llm.c", path);
    int32_t h[8];
    memcpy(h, f.data, sizeof h);
    CHECK(h[0] == 20240326 && h[1] == 3 && h[2] == 128 && h[3] == 50257 && h[4] == 2 && h[5] == 4 && h[6] == 64 &&
              h[7] == 50304,
          "llm.c header %d %d %d %d %d %d %d %d", h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]);
    size_t C = 64, L = 2, Vp = 50304, T = 128;
    size_t want_size = 1024 + 4 * (Vp * C + T * C + L * (12 * C * C + 13 * C) + 2 * C);
    CHECK(f.size == want_size, "%s: %zu bytes, expected %zu", path, f.size, want_size);
    if (f.size == want_size) {
        const unsigned char *p = f.data + 1024;
        float v;
        memcpy(&v, p + 4 * (50256 * C + 63), 4);  // last real wte value
        CHECK(v == formula("wte.weight", 50256 * C + 63), "llm.c wte last = %g", (double)v);
        memcpy(&v, p + 4 * (50257 * C), 4);  // first padded row
        CHECK(v == 0.0f, "llm.c padded wte row not zero: %g", (double)v);
        // qkvw (L, 3C, C) = c_attn.weight^T: element [l=1][o=5][i=7] is HF [7][5]
        size_t qkvw = Vp * C + T * C + 2 * L * C;
        memcpy(&v, p + 4 * (qkvw + 1 * 3 * C * C + 5 * C + 7), 4);
        CHECK(v == formula("h.1.attn.c_attn.weight", 7 * 3 * C + 5), "llm.c qkvw[1][5][7] = %g", (double)v);
        // lnfb is last
        memcpy(&v, f.data + f.size - 4, 4);
        CHECK(v == formula("ln_f.bias", C - 1), "llm.c lnfb[last] = %g", (double)v);
    }
    // What the loader says about it.
    Model m;
    rc = model_load(&m, path, &err);
    CHECK(rc != 0 ? strstr(err.msg, "llm.c") != NULL : 1, "llm.c message: %s", err.msg);
    model_free(&m);
    file_unmap(&f);
}

// ---------------------------------------------------------------------------
// Broken checkpoints, made from tiny in a temp dir

static char tmpdir[64];
static unsigned char *tiny_bytes;
static size_t tiny_size;
static char *tiny_config;

static int write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

// Writes tmpdir/NAME/{config.json, model.safetensors} with the header
// replaced by `header` (NULL: keep it) and the file cut at `cut` bytes (0: whole).
static const char *make_case(const char *name, const char *header, size_t cut, const char *config) {
    static char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
    mkdir(dir, 0777);
    uint64_t old_len;
    memcpy(&old_len, tiny_bytes, 8);
    const unsigned char *data = tiny_bytes + 8 + old_len;
    size_t data_size = tiny_size - 8 - (size_t)old_len;
    size_t hlen = header ? strlen(header) : (size_t)old_len;
    size_t total = 8 + hlen + data_size;
    unsigned char *buf = malloc(total);
    uint64_t h64 = hlen;
    memcpy(buf, &h64, 8);
    memcpy(buf + 8, header ? (const void *)header : (const void *)(tiny_bytes + 8), hlen);
    memcpy(buf + 8 + hlen, data, data_size);
    write_file(path_in(dir, "model.safetensors"), buf, cut ? cut : total);
    free(buf);
    if (config) write_file(path_in(dir, "config.json"), config, strlen(config));
    return dir;
}

typedef void (*Edit)(cJSON *hdr);

// tiny's header, parsed, edited, printed back.
static char *edited_header(Edit edit) {
    uint64_t len;
    memcpy(&len, tiny_bytes, 8);
    cJSON *h = cJSON_ParseWithLength((const char *)tiny_bytes + 8, (size_t)len);
    edit(h);
    char *s = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    return s;
}

static void set_offsets(cJSON *h, const char *key, double b, double e) {
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(h, key), "data_offsets");
    cJSON_ReplaceItemInArray(o, 0, cJSON_CreateNumber(b));
    cJSON_ReplaceItemInArray(o, 1, cJSON_CreateNumber(e));
}
static void edit_offset_past_end(cJSON *h) { set_offsets(h, "ln_f.bias", 13300000, 13300256); }
static void edit_offset_short(cJSON *h) {
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "h.1.ln_2.bias"), "data_offsets");
    double b = cJSON_GetArrayItem(o, 0)->valuedouble;
    set_offsets(h, "h.1.ln_2.bias", b, b + 252);
}
static void edit_missing(cJSON *h) { cJSON_DeleteItemFromObject(h, "h.1.mlp.c_fc.bias"); }
static void edit_dtype(cJSON *h) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, "h.0.attn.c_attn.bias"), "dtype", cJSON_CreateString("I32"));
}
static void edit_shape(cJSON *h) {
    cJSON *s = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "h.1.mlp.c_fc.weight"), "shape");
    cJSON_ReplaceItemInArray(s, 1, cJSON_CreateNumber(255));
}
static void edit_unknown(cJSON *h) {
    cJSON *e = cJSON_Duplicate(cJSON_GetObjectItem(h, "ln_f.bias"), 1);
    cJSON_AddItemToObject(h, "h.0.attn.rotary", e);
}
static void edit_extra_layer(cJSON *h) {
    cJSON *e = cJSON_Duplicate(cJSON_GetObjectItem(h, "h.1.ln_1.bias"), 1);
    cJSON_AddItemToObject(h, "h.2.ln_1.bias", e);
}
static void edit_duplicate(cJSON *h) {
    cJSON *e = cJSON_Duplicate(cJSON_GetObjectItem(h, "wpe.weight"), 1);
    cJSON_AddItemToObject(h, "transformer.wpe.weight", e);
}
static void edit_lm_head_bad(cJSON *h) {
    cJSON *e = cJSON_Duplicate(cJSON_GetObjectItem(h, "wpe.weight"), 1);
    cJSON_AddItemToObject(h, "lm_head.weight", e);
}
static void edit_lm_head_ok(cJSON *h) {
    cJSON *e = cJSON_Duplicate(cJSON_GetObjectItem(h, "wte.weight"), 1);
    cJSON_AddItemToObject(h, "lm_head.weight", e);
    cJSON *m = cJSON_Duplicate(cJSON_GetObjectItem(h, "h.0.ln_1.weight"), 1);
    cJSON_AddItemToObject(h, "h.0.attn.masked_bias", m);  // ignored buffer
}

static void edit_leading_zero(cJSON *h) {
    cJSON *e = cJSON_DetachItemFromObject(h, "h.1.ln_1.bias");
    cJSON_AddItemToObject(h, "h.01.ln_1.bias", e);
}
static void edit_overlap(cJSON *h) {
    // h.0.ln_1.bias moved onto the bytes of h.0.ln_1.weight (same size)
    cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(h, "h.0.ln_1.weight"), "data_offsets");
    set_offsets(h, "h.0.ln_1.bias", cJSON_GetArrayItem(o, 0)->valuedouble, cJSON_GetArrayItem(o, 1)->valuedouble);
}
static void edit_mask_past_end(cJSON *h) {
    cJSON *m = cJSON_Duplicate(cJSON_GetObjectItem(h, "h.0.ln_1.weight"), 1);
    cJSON_AddItemToObject(h, "h.0.attn.bias", m);  // an ignored buffer, but its bytes must exist
    set_offsets(h, "h.0.attn.bias", 13300000, 13300256);
}

static void expect_fail(const char *dir, const char *load_path, const char *needle1, const char *needle2,
                        const char *what) {
    Model m;
    GptError err = {""};
    int rc = model_load(&m, load_path ? load_path : dir, &err);
    CHECK(rc != 0, "%s: model_load succeeded, expected an error", what);
    CHECK(strstr(err.msg, needle1) && (!needle2 || strstr(err.msg, needle2)),
          "%s: message \"%s\" lacks \"%s\"%s%s", what, err.msg, needle1, needle2 ? " / " : "",
          needle2 ? needle2 : "");
    CHECK(m.weights.layers == NULL && m.owned == NULL && m.map.data == NULL, "%s: failed load left resources", what);
    CHECK(strchr(err.msg, '\n') == NULL, "%s: message has a newline", what);
    if (getenv("VERBOSE")) printf("  %-26s %s\n", what, err.msg);
    model_free(&m);
}

static const char *with_config(const char *needle, const char *replacement) {
    // tiny's config.json with one line replaced
    static char buf[4096];
    const char *at = strstr(tiny_config, needle);
    if (!at) return tiny_config;
    size_t pre = (size_t)(at - tiny_config);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)pre, tiny_config, replacement, at + strlen(needle));
    return buf;
}

static void test_errors(void) {
    GptError err = {""};
    size_t cfg_len;
    const char *tiny_st = ckpt("tiny/model.safetensors");
    MappedFile f;
    if (file_map(tiny_st, &f, &err) != 0 ||
        file_read_all(ckpt("tiny/config.json"), &tiny_config, &cfg_len, &err) != 0) {
        CHECK(0, "cannot read tiny: %s", err.msg);
        return;
    }
    tiny_size = f.size;
    tiny_bytes = malloc(f.size);
    memcpy(tiny_bytes, f.data, f.size);
    file_unmap(&f);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_model_load.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    const char *d;
    char *h;

    // The unedited copy loads (the harness itself is right).
    d = make_case("ok", NULL, 0, tiny_config);
    Model m;
    int rc = model_load(&m, d, &err);
    CHECK(rc == 0, "copy of tiny: %s", err.msg);
    model_free(&m);

    d = make_case("truncated", NULL, tiny_size - 1000, tiny_config);
    expect_fail(d, NULL, "outside the data region", "is the file truncated?", "truncated file");
    d = make_case("truncated-header", NULL, 100, tiny_config);
    expect_fail(d, NULL, "header length", "model.safetensors", "file cut inside the header");
    d = make_case("tiny-file", NULL, 5, tiny_config);
    expect_fail(d, NULL, "too short", NULL, "5-byte file");

    // Header edits, each refused with a message that names the tensor.
    struct {
        const char *name;
        Edit edit;
        const char *needle1, *needle2, *what;
    } edits[] = {
        {"offset-past-end", edit_offset_past_end,
         "tensor ln_f.bias has data_offsets [13300000,13300256] outside", NULL, "offset past end"},
        {"offset-mismatch", edit_offset_short,
         "tensor h.1.ln_2.bias has 252 bytes of data", "needs 256", "end-begin mismatch"},
        {"missing", edit_missing, "tensor h.1.mlp.c_fc.bias is missing", NULL, "missing tensor"},
        {"dtype", edit_dtype, "tensor h.0.attn.c_attn.bias has dtype I32", NULL, "wrong dtype"},
        {"shape", edit_shape,
         "model.safetensors: tensor h.1.mlp.c_fc.weight has shape [64,255], config implies [64,256]", NULL, "wrong shape"},
        {"unknown", edit_unknown, "tensor h.0.attn.rotary is not a GPT-2 weight", NULL, "unknown tensor"},
        {"extra-layer", edit_extra_layer,
         "tensor h.2.ln_1.bias is in layer 2, but config n_layer is 2", NULL, "extra layer"},
        {"duplicate", edit_duplicate, "wpe.weight appears twice", NULL, "duplicate tensor"},
        {"lm-head-bad", edit_lm_head_bad,
         "tensor lm_head.weight has shape [128,64], config implies [50257,64]", NULL, "bad lm_head"},
        {"leading-zero", edit_leading_zero,
         "tensor h.01.ln_1.bias is not a GPT-2 weight", NULL, "layer number with a leading zero"},
        {"overlap", edit_overlap, "h.0.ln_1.bias", "share bytes of the data region", "overlapping tensors"},
        {"mask-past-end", edit_mask_past_end,
         "tensor h.0.attn.bias has data_offsets [13300000,13300256] outside", NULL, "ignored buffer past the end"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        h = edited_header(edits[i].edit);
        d = make_case(edits[i].name, h, 0, tiny_config);
        expect_fail(d, NULL, edits[i].needle1, edits[i].needle2, edits[i].what);
        free(h);
    }
    h = edited_header(edit_lm_head_ok);
    d = make_case("lm-head-ok", h, 0, tiny_config);
    rc = model_load(&m, d, &err);
    CHECK(rc == 0, "tied lm_head.weight and masked_bias should be accepted: %s", err.msg);
    if (rc == 0) CHECK(m.n_params == gpt2_params(2, 64, 128, 50257), "lm_head counted: %zu", m.n_params);
    model_free(&m);
    free(h);

    // header length larger than the file
    d = make_case("hlen-huge", NULL, 0, tiny_config);
    {
        unsigned char *b = malloc(tiny_size);
        memcpy(b, tiny_bytes, tiny_size);
        uint64_t big = tiny_size + 10;
        memcpy(b, &big, 8);
        write_file(path_in(d, "model.safetensors"), b, tiny_size);
        free(b);
    }
    expect_fail(d, NULL, "header length", "runs past the end of the file", "header length > file");

    d = make_case("bad-json", "{\"wte.weight\":{\"dtype\":\"F32\",", 0, tiny_config);
    expect_fail(d, NULL, "not valid JSON", "model.safetensors", "malformed JSON header");
    d = make_case("not-object", "{}", 0, tiny_config);
    expect_fail(d, NULL, "tensor wte.weight is missing", NULL, "empty header");

    // config.json problems
    d = make_case("no-config", NULL, 0, NULL);
    expect_fail(d, NULL, "config.json", NULL, "missing config.json (dir)");
    expect_fail(d, path_in(d, "model.safetensors"), "no config.json beside it", NULL, "missing config.json (file)");
    struct {
        const char *name, *from, *to, *needle;
    } cfg[] = {
        {"cfg-heads", "\"n_head\": 4", "\"n_head\": 5", "n_embd 64 is not a multiple of n_head 5"},
        {"cfg-zero", "\"n_layer\": 2", "\"n_layer\": 0", "n_layer 0"},
        {"cfg-neg", "\"vocab_size\": 50257", "\"vocab_size\": -3", "vocab_size -3"},
        {"cfg-float", "\"n_embd\": 64", "\"n_embd\": 64.5", "n_embd must be an integer"},
        {"cfg-missing", "\"n_embd\": 64,", "", "n_embd is missing"},
        {"cfg-act", "\"gelu_new\"", "\"tanh\"", "activation_function tanh is not one gpt implements"},
        {"cfg-act-type", "\"gelu_new\"", "7", "activation_function (not a string) is not one gpt implements"},
        {"cfg-cross", "\"n_embd\": 64", "\"n_embd\": 64, \"add_cross_attention\": true", "add_cross_attention is true"},
        {"cfg-pruned", "\"n_embd\": 64", "\"n_embd\": 64, \"pruned_heads\": {\"0\": [1]}", "pruned_heads is set"},
        {"cfg-quant", "\"n_embd\": 64", "\"n_embd\": 64, \"quantization_config\": {\"bits\": 4}",
         "quantization_config is set"},
        {"cfg-flag", "\"n_embd\": 64", "\"n_embd\": 64, \"scale_attn_weights\": 0", "scale_attn_weights must be true or false"},
        {"cfg-untied", "\"n_embd\": 64", "\"n_embd\": 64, \"tie_word_embeddings\": false", "tensor lm_head.weight is missing"},
        {"cfg-inner-neg", "\"n_embd\": 64", "\"n_embd\": 64, \"n_inner\": -4", "n_inner -4 must be positive"},
        {"cfg-inner-wide", "\"n_embd\": 64", "\"n_embd\": 64, \"n_inner\": 2000000", "n_inner 2000000 must be in [1, 1048576]"},
        {"cfg-eps", "1e-05", "-1", "layer_norm_epsilon"},
        {"cfg-type", "\"model_type\": \"gpt2\"", "\"model_type\": \"llama\"", "model_type llama"},
        // the GPT-2 family's relatives (docs/models.md)
        {"cfg-gptj", "\"model_type\": \"gpt2\"", "\"model_type\": \"gptj\"", "model_type gptj is not gpt2"},
        {"cfg-bigcode", "\"model_type\": \"gpt2\"", "\"model_type\": \"gpt_bigcode\"", "model_type gpt_bigcode is not gpt2"},
        {"cfg-json", "{", "[", "config.json: not a JSON object"},
        {"cfg-layers", "\"n_layer\": 2", "\"n_layer\": 3", "tensor h.2.ln_1.weight is missing"},
        {"cfg-ctx", "\"n_positions\": 128", "\"n_positions\": 127", "tensor wpe.weight has shape [128,64], config implies [127,64]"},
        // another MLP width: the file's tensors must have it
        {"cfg-inner", "\"n_embd\": 64", "\"n_embd\": 64, \"n_inner\": 100",
         "tensor h.0.mlp.c_fc.weight has shape [64,256], config implies [64,100]"},
    };
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++) {
        d = make_case(cfg[k].name, NULL, 0, with_config(cfg[k].from, cfg[k].to));
        expect_fail(d, NULL, cfg[k].needle, NULL, cfg[k].name);
    }
    // gelu_pytorch_tanh is the same function; n_positions may fall back to n_ctx
    d = make_case("cfg-tanh", NULL, 0, with_config("\"gelu_new\"", "\"gelu_pytorch_tanh\""));
    rc = model_load(&m, d, &err);
    CHECK(rc == 0, "gelu_pytorch_tanh: %s", err.msg);
    model_free(&m);
    d = make_case("cfg-nctx", NULL, 0, with_config("\"n_positions\": 128,", ""));
    rc = model_load(&m, d, &err);
    CHECK(rc == 0 && m.config.n_ctx == 128, "n_ctx fallback: %s", err.msg);
    model_free(&m);

    // Not a checkpoint at all; a path that does not exist; an empty directory.
    write_file(path_in(tmpdir, "junk.txt"), "hello, world\n", 13);
    expect_fail(NULL, path_in(tmpdir, "junk.txt"), "junk.txt: not a GPT-2 checkpoint", "an llm.c checkpoint",
                "junk file");
    // llama.cpp's GGUF (magic, version 3, no tensors, no metadata): read as
    // one, and refused for what it lacks (tests/cli_gguf.sh runs whole ones)
    write_file(path_in(tmpdir, "gpt2.gguf"), "GGUF\x03\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 24);
    expect_fail(NULL, path_in(tmpdir, "gpt2.gguf"), "gpt2.gguf: metadata general.architecture is missing", NULL,
                "GGUF file");
    expect_fail(NULL, path_in(tmpdir, "nope"), "nope", NULL, "nonexistent path");
    d = make_case("empty-dir", NULL, 0, NULL);
    unlink(path_in(d, "model.safetensors"));
    expect_fail(d, NULL, "not a GPT-2 checkpoint", NULL, "empty dir");

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(system(cmd) == 0, "cannot remove %s", tmpdir);
    free(tiny_bytes);
    free(tiny_config);
}

static void test_config_validate(void) {
    GptError err = {""};
    GPT2Config ok = {.n_layer = 12, .n_head = 12, .n_embd = 768, .n_ctx = 1024, .vocab_size = 50257, .ln_eps = 1e-5f};
    CHECK(gpt2_config_validate(&ok, "x", &err) == 0, "valid config rejected: %s", err.msg);
    GPT2Config c = ok;
    c.n_head = 7;
    CHECK(gpt2_config_validate(&c, "cfg", &err) != 0 && strstr(err.msg, "cfg: n_embd 768 is not a multiple of n_head 7"),
          "%s", err.msg);
    c = ok;
    c.n_ctx = 0;
    CHECK(gpt2_config_validate(&c, "cfg", &err) != 0 && strstr(err.msg, "n_positions 0"), "%s", err.msg);
    c = ok;
    c.ln_eps = NAN;
    CHECK(gpt2_config_validate(&c, "cfg", &err) != 0 && strstr(err.msg, "layer_norm_epsilon"), "%s", err.msg);
    c = ok;
    c.vocab_size = 1 << 30;
    CHECK(gpt2_config_validate(&c, "cfg", &err) != 0 && strstr(err.msg, "vocab_size"), "%s", err.msg);
    c = ok;
    c.n_layer = -1;
    CHECK(gpt2_config_validate(&c, "cfg", &err) != 0 && strstr(err.msg, "n_layer -1"), "%s", err.msg);
}

static void test_sniff(void) {
    unsigned char st[16] = {6, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' '};
    CHECK(model_sniff(st, 14, 14) == MODEL_KIND_SAFETENSORS, "safetensors not recognised");
    CHECK(model_sniff(st, 8, 14) == MODEL_KIND_UNKNOWN, "8 bytes cannot be judged");
    unsigned char huge[9] = {0, 0, 0, 0, 0, 0, 0, 0x40, '{'};  // a 2^62-byte header
    CHECK(model_sniff(huge, 9, 1 << 20) == MODEL_KIND_UNKNOWN, "absurd header length accepted");
    unsigned char llmc[4] = {0xC6, 0xD7, 0x34, 0x01};  // 20240326 little-endian
    CHECK(model_sniff(llmc, 4, 4096) == MODEL_KIND_LLMC, "llm.c magic not recognised");
    CHECK(model_sniff(llmc, 4, 100) == MODEL_KIND_UNKNOWN, "llm.c file shorter than its header accepted");
    CHECK(model_sniff((const unsigned char *)"hello, world", 12, 12) == MODEL_KIND_UNKNOWN, "text accepted");
    CHECK(model_sniff(NULL, 0, 0) == MODEL_KIND_UNKNOWN, "empty input");
}

// file_prefetch: the mapping reads the same bytes while and after its pages
// are brought in; a second call starts nothing; file_unmap stops and joins
// the thread whether it has finished or not (ASan/TSan runs see the rest).
static void test_prefetch(void) {
    const char *path = ckpt("tiny-llmc.bin");
    GptError err = {""};
    char *copy = NULL;
    size_t len = 0;
    if (file_read_all(path, &copy, &len, &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    for (int round = 0; round < 2; round++) {
        MappedFile f;
        if (file_map(path, &f, &err) != 0) {
            CHECK(0, "%s", err.msg);
            break;
        }
        CHECK(f.prefetch == NULL, "%s: a fresh mapping has a prefetch", path);
        file_prefetch(&f);
        FilePrefetch *first = f.prefetch;
        CHECK(first != NULL, "%s: file_prefetch started no thread", path);
        file_prefetch(&f);
        CHECK(f.prefetch == first, "%s: a second file_prefetch started another thread", path);
        // round 0 reads the whole mapping alongside the thread; round 1
        // unmaps at once, while the thread is (likely) still running
        if (round == 0) CHECK(f.size == len && memcmp(f.data, copy, len) == 0, "%s: the mapping reads wrong bytes", path);
        file_unmap(&f);
        CHECK(f.data == NULL && f.prefetch == NULL, "%s: file_unmap left the mapping or its prefetch", path);
        file_unmap(&f);  // idempotent
    }
    free(copy);
}

int main(void) {
    test_prefetch();
    test_config_validate();
    test_sniff();
    test_tiny();
    test_half("tiny-f16", AS_F16);
    test_half("tiny-bf16", AS_BF16);
    test_q4_pure();
    test_llmc_fixture();
    test_errors();
    test_124m();
    return check_exit("test_model_load");
}

/*
 * q4_study.c - what 4-bit formats and mixes would cost in accuracy, before
 * any kernel exists for them (issue 17): every matrix of a float32 model is
 * fake-quantized (quantized, then dequantized back to float32, in memory
 * after loading) as a rule list says, and each variant is scored against
 * float32 with tests/test_accuracy.c's protocol (KL of each position's
 * next-token distribution, top-1 agreement, 40 greedy tokens of each
 * reference prompt: tests/greedy.h), plus the bytes a decode step would read.
 *
 * Not part of `make test` (a study, not a check). Build and run:
 *   make && cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Isrc -Itests \
 *       $(pkg-config --cflags libcjson) scripts/q4_study.c build/libgpt.a \
 *       $(pkg-config --libs libcjson libutf8proc openblas) -lpthread -lm -o build/q4_study
 *   CKPT_DIR=... build/q4_study [--demo] [--windows N] [--no-greedy] RULES...
 * RULES is one variant: comma-separated SEL:FMT, later ones win, starting
 * from all:f32. SEL: all, wte, qkv, proj, fc, fcproj, optionally @A-B
 * (layers A..B) or @more (llama.cpp's use_more_bits layers: the first and
 * last eighth and every third between). FMT:
 *   f32     as loaded
 *   q8      Q8_0: blocks of 32, d = max|w| / 127 (f16), 8.5 bits
 *   q4      Q4_0-like as src/model/dtype.c quantizes it (whatever it does now)
 *   q4m8    Q4_0-like, d = m / -8 (m: the signed weight of largest
 *           magnitude), 4.5 bits (the scale rule before this study)
 *   q4mse   Q4_0-like, d chosen per block from candidates m / (-8 +- 1),
 *           m / (7 +- 1) by least squares, then f16, least squared error
 *   q4_1    blocks of 32, w = d q + min, q in 0..15, d and min f16
 *           searched as llama.cpp's make_qkx2_quants, 5 bits
 *   q4k     super-blocks of 256 (or the row, if shorter) of 8 blocks of
 *           32 with 6-bit scales and mins, f16 super scales, 4.5 bits
 * Example: all:q4m8,wte:q8 (--dtype q4 before this study).
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "forward.h"
#include "greedy.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "paths.h"
#include "base/threads.h"
#include "model/tokenizer.h"

enum { MAXV = 16, CHUNK = 128 };

static float f16r(float x) { return f16_to_f32(f32_to_f16(x)); }
static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

// ---- formats: each fake-quantizes one row x (K) in place -----------------

static void fq_q8(float *x, size_t K) {
    for (size_t b = 0; b < K; b += 32) {
        size_t n = K - b < 32 ? K - b : 32;
        float a = 0;
        for (size_t i = 0; i < n; i++) a = fmaxf(a, fabsf(x[b + i]));
        float d = f16r(a / 127.0f);
        for (size_t i = 0; i < n; i++) x[b + i] = d > 0 ? d * clampf(rintf(x[b + i] / d), -127, 127) : 0;
    }
}

static void fq_q4m8(float *x, size_t K) {
    for (size_t b = 0; b < K; b += 32) {
        size_t n = K - b < 32 ? K - b : 32;
        float m = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(x[b + i]) > fabsf(m)) m = x[b + i];
        float d = f16r(m / -8.0f);
        for (size_t i = 0; i < n; i++) x[b + i] = d != 0 ? d * clampf(rintf(x[b + i] / d), -8, 7) : 0;
    }
}

// The library's own Q4 (src/model/dtype.c), through weight_encode and weight_row.
static void fq_q4lib(float *x, size_t K) {
    size_t bytes = weight_bytes(DTYPE_Q4, 1, K);
    unsigned char *buf = malloc(bytes);
    weight_encode(buf, DTYPE_Q4, x, 1, K);
    Weight w = weight_view(DTYPE_Q4, buf, 1, K);
    weight_row(x, &w, 0);
    free(buf);
}

// Squared error of x (n) on the grid d * clamp(round(x / d), lo, hi).
static double grid_err(const float *x, size_t n, float d, float lo, float hi) {
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        float q = d != 0 ? clampf(rintf(x[i] / d), lo, hi) : 0;
        double r = x[i] - d * q;
        e += r * r;
    }
    return e;
}

static void fq_q4mse(float *x, size_t K) {
    for (size_t b = 0; b < K; b += 32) {
        size_t n = K - b < 32 ? K - b : 32;
        float *v = x + b, m = 0;
        for (size_t i = 0; i < n; i++)
            if (fabsf(v[i]) > fabsf(m)) m = v[i];
        if (m == 0) continue;
        float best = f16r(m / -8.0f);
        double best_e = grid_err(v, n, best, -8, 7);
        for (int side = 0; side < 2; side++)
            for (int is = -10; is <= 10; is++) {
                float d = side ? m / (7.0f + 0.1f * is) : m / (-8.0f + 0.1f * is);
                // least squares d for the levels d picks, twice
                for (int it = 0; it < 2; it++) {
                    double lx = 0, l2 = 0;
                    for (size_t i = 0; i < n; i++) {
                        float q = clampf(rintf(v[i] / d), -8, 7);
                        lx += (double)q * v[i], l2 += (double)q * q;
                    }
                    if (l2 > 0) d = (float)(lx / l2);
                }
                d = f16r(d);
                double e = grid_err(v, n, d, -8, 7);
                if (e < best_e) best_e = e, best = d;
            }
        for (size_t i = 0; i < n; i++) v[i] = best * clampf(rintf(v[i] / best), -8, 7);
    }
}

// make_qkx2_quants-like: x (n) ~ s * q - mn, q in 0..nmax, s >= 0, mn >= 0.
static void fit_min(const float *x, size_t n, int nmax, float *s_out, float *mn_out) {
    float lo = x[0], hi = x[0];
    for (size_t i = 1; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    if (lo > 0) lo = 0;
    if (hi == lo) {
        *s_out = 0, *mn_out = -lo;
        return;
    }
    double best_e = INFINITY;
    float bs = (hi - lo) / nmax, bm = -lo;
    for (int is = -1; is <= 20; is++) {
        float iscale = is < 0 ? nmax / (hi - lo) : (-1.0f + 0.1f * is + nmax) / (hi - lo);
        double sl = 0, sl2 = 0, slx = 0, sx = 0;
        for (size_t i = 0; i < n; i++) {
            float l = clampf(rintf(iscale * (x[i] - lo)), 0, (float)nmax);
            sl += l, sl2 += l * l, slx += l * x[i], sx += x[i];
        }
        double D = n * sl2 - sl * sl, s, mn;  // x ~ s l + mn0
        if (D <= 0) continue;
        s = (n * slx - sl * sx) / D;
        mn = (sl2 * sx - sl * slx) / D;
        if (mn > 0) mn = 0, s = sl2 > 0 ? slx / sl2 : 0;
        if (s <= 0) continue;
        double e = 0;
        for (size_t i = 0; i < n; i++) {
            float l = clampf(rintf((x[i] - (float)mn) / (float)s), 0, (float)nmax);
            double r = x[i] - (s * l + mn);
            e += r * r;
        }
        if (e < best_e) best_e = e, bs = (float)s, bm = (float)-mn;
    }
    *s_out = bs, *mn_out = bm;
}

static void fq_q4_1(float *x, size_t K) {
    for (size_t b = 0; b < K; b += 32) {
        size_t n = K - b < 32 ? K - b : 32;
        float s, mn;
        fit_min(x + b, n, 15, &s, &mn);
        s = f16r(s), mn = f16r(mn);
        for (size_t i = 0; i < n; i++)
            x[b + i] = s > 0 ? s * clampf(rintf((x[b + i] + mn) / s), 0, 15) - mn : -mn;
    }
}

static void fq_q4k(float *x, size_t K) {
    for (size_t sb = 0; sb < K; sb += 256) {
        size_t ns = K - sb < 256 ? K - sb : 256, nb = (ns + 31) / 32;
        float s[8], mn[8], smax = 0, mmax = 0;
        for (size_t j = 0; j < nb; j++) {
            size_t n = ns - 32 * j < 32 ? ns - 32 * j : 32;
            fit_min(x + sb + 32 * j, n, 15, &s[j], &mn[j]);
            smax = fmaxf(smax, s[j]), mmax = fmaxf(mmax, mn[j]);
        }
        float d = f16r(smax / 63), dm = f16r(mmax / 63);
        for (size_t j = 0; j < nb; j++) {
            size_t n = ns - 32 * j < 32 ? ns - 32 * j : 32;
            float ls = d > 0 ? clampf(rintf(s[j] / d), 0, 63) : 0, lm = dm > 0 ? clampf(rintf(mn[j] / dm), 0, 63) : 0;
            float sc = d * ls, off = dm * lm;
            float *v = x + sb + 32 * j;
            for (size_t i = 0; i < n; i++) v[i] = sc > 0 ? sc * clampf(rintf((v[i] + off) / sc), 0, 15) - off : -off;
        }
    }
}

typedef struct {
    const char *name;
    void (*row)(float *, size_t);
    double (*bytes)(size_t n_out, size_t n_in);
} Format;

static double b_f32(size_t o, size_t i) { return 4.0 * o * i; }
static double b_q8(size_t o, size_t i) { return o * ((i + 31) / 32) * 34.0; }
static double b_q4(size_t o, size_t i) { return o * ((i + 31) / 32) * 18.0; }
static double b_q4_1(size_t o, size_t i) { return o * ((i + 31) / 32) * 20.0; }
static double b_q4k(size_t o, size_t i) {
    size_t full = i / 256, rest = i % 256;  // a short super-block: its quants, 4 bytes, 12 bits per block
    return o * (full * 144.0 + (rest ? rest / 2.0 + 4 + (rest + 31) / 32 * 1.5 : 0));
}

static const Format FORMATS[] = {
    {"f32", NULL, b_f32},       {"q8", fq_q8, b_q8},       {"q4", fq_q4lib, b_q4},  {"q4m8", fq_q4m8, b_q4},
    {"q4mse", fq_q4mse, b_q4},  {"q4_1", fq_q4_1, b_q4_1}, {"q4k", fq_q4k, b_q4k},
};

static const Format *format_named(const char *s, size_t n) {
    for (size_t f = 0; f < sizeof FORMATS / sizeof *FORMATS; f++)
        if (strlen(FORMATS[f].name) == n && !strncmp(FORMATS[f].name, s, n)) return &FORMATS[f];
    return NULL;
}

// llama.cpp's use_more_bits(i, n)
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// The format rules give matrix `sel` ("wte", "qkv", ...) of layer `layer`.
static const Format *format_for(const char *rules, const char *sel, int layer, int n_layer) {
    const Format *f = &FORMATS[0];
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", rules);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon) fprintf(stderr, "bad rule %s\n", tok), exit(2);
        *colon = 0;
        char *at = strchr(tok, '@');
        int lo = 0, hi = 1 << 20, more = 0;
        if (at) {
            *at = 0;
            if (!strcmp(at + 1, "more")) more = 1;
            else if (sscanf(at + 1, "%d-%d", &lo, &hi) != 2) fprintf(stderr, "bad layers %s\n", at + 1), exit(2);
        }
        const Format *g = format_named(colon + 1, strlen(colon + 1));
        if (!g) fprintf(stderr, "unknown format %s\n", colon + 1), exit(2);
        int sel_ok = !strcmp(tok, "all") || !strcmp(tok, sel);
        if (at && layer < 0) sel_ok = 0;
        int layer_ok = !at || (more ? more_bits(layer, n_layer) : layer >= lo && layer <= hi);
        if (sel_ok && layer_ok) f = g;
    }
    return f;
}

// Fake-quantizes W (F32) as f, in place if the model owns it, else in a copy
// (kept in *copies). Returns the bytes the format would take.
static double apply(Model *m, Weight *W, const Format *f, void **copy) {
    double bytes = f->bytes(W->n_out, W->n_in);
    if (!f->row) return bytes;
    float *data = (float *)W->data;
    unsigned char *own = m->owned;
    if (!own || (unsigned char *)data < own || (unsigned char *)data >= own + m->weight_bytes) {
        data = malloc(W->n_out * W->n_in * sizeof *data);
        memcpy(data, W->data, W->n_out * W->n_in * sizeof *data);
        *copy = data;
        W->data = data;
    }
    for (size_t j = 0; j < W->n_out; j++) f->row(data + j * W->n_in, W->n_in);
    return bytes;
}

typedef struct {
    char rules[512];
    Model model;
    void *copies[4 * 64 + 1];
    double bytes;  // a decode step's reads: matrices as the formats say, vectors, one wpe row
    double kl_sum, kl_max;
    size_t positions, top1;
    int greedy;
} Variant;

static void prepare(Variant *v, const char *path) {
    GptError err = {{0}};
    WeightOptions o = {.matrix_dtype = DTYPE_F32};
    if (model_load_with(&v->model, path, &o, &err) != 0) fprintf(stderr, "%s\n", err.msg), exit(1);
    Model *m = &v->model;
    const GPT2Config *c = &m->config;
    GPT2Weights *w = &m->weights;
    size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer, k = 0;
    v->bytes = apply(m, &w->wte, format_for(v->rules, "wte", -1, (int)L), &v->copies[k++]);
    v->bytes += 4.0 * C;  // one wpe row
    for (size_t l = 0; l < L; l++) {
        GPT2Layer *y = &w->layers[l];
        v->bytes += apply(m, &y->qkv_w, format_for(v->rules, "qkv", (int)l, (int)L), &v->copies[k++]);
        v->bytes += apply(m, &y->attn_proj_w, format_for(v->rules, "proj", (int)l, (int)L), &v->copies[k++]);
        v->bytes += apply(m, &y->fc_w, format_for(v->rules, "fc", (int)l, (int)L), &v->copies[k++]);
        v->bytes += apply(m, &y->fc_proj_w, format_for(v->rules, "fcproj", (int)l, (int)L), &v->copies[k++]);
        v->bytes += 4.0 * (4 * C + 3 * C + C + 4 * C + C);  // ln_1, ln_2, the four biases
    }
    v->bytes += 4.0 * 2 * C;  // ln_f
}

static ThreadPool *pool;

// log-softmax in double: lp (V)
static void log_softmax(double *lp, const float *x, size_t V) {
    double max = -INFINITY, sum = 0;
    for (size_t i = 0; i < V; i++) max = x[i] > max ? x[i] : max;
    for (size_t i = 0; i < V; i++) sum += exp((double)x[i] - max);
    double lse = max + log(sum);
    for (size_t i = 0; i < V; i++) lp[i] = (double)x[i] - lse;
}

// As test_accuracy's score_window: v[0] is the float32 baseline.
static void score_window(Variant *v, int nv, const int32_t *ids, size_t n) {
    const GPT2Config *c = &v[0].model.config;
    size_t V = (size_t)c->vocab_size;
    GptError err = {{0}};
    ForwardState fs[MAXV];
    KVCache kv[MAXV];
    double *lp = malloc(V * sizeof *lp), *lq = malloc(V * sizeof *lq), *p = malloc(V * sizeof *p);
    for (int k = 0; k < nv; k++)
        if (forward_state_init(&fs[k], c, CHUNK, n, CHUNK, pool, &err) != 0 ||
            kvcache_init(&kv[k], c, DTYPE_F32, n, &err) != 0)
            fprintf(stderr, "%s\n", err.msg), exit(1);
    for (size_t start = 0; start < n; start += CHUNK) {
        size_t len = n - start < CHUNK ? n - start : CHUNK;
        for (int k = 0; k < nv; k++) {
            SeqInput s = {.tokens = ids + start, .n_tokens = len, .cache = &kv[k], .want = LOGITS_ALL};
            if (gpt2_forward(&v[k].model, &fs[k], &s, 1, &err) != 0) fprintf(stderr, "%s\n", err.msg), exit(1);
        }
        for (size_t t = 0; t < len; t++) {
            const float *ref = fs[0].logits + t * V;
            log_softmax(lp, ref, V);
            for (size_t i = 0; i < V; i++) p[i] = exp(lp[i]);
            size_t top = argmax(ref, V);
            for (int k = 1; k < nv; k++) {
                const float *got = fs[k].logits + t * V;
                log_softmax(lq, got, V);
                double kl = 0;
                for (size_t i = 0; i < V; i++)
                    if (p[i] > 0) kl += p[i] * (lp[i] - lq[i]);
                v[k].kl_sum += kl;
                v[k].kl_max = kl > v[k].kl_max ? kl : v[k].kl_max;
                v[k].positions++;
                v[k].top1 += argmax(got, V) == top;
            }
        }
    }
    for (int k = 0; k < nv; k++) forward_state_free(&fs[k]), kvcache_free(&kv[k]);
    free(lp), free(lq), free(p);
}

int main(int argc, char **argv) {
    int demo = 0, greedy = 1, nv = 1;
    size_t max_windows = (size_t)-1;
    static Variant v[MAXV];
    snprintf(v[0].rules, sizeof v[0].rules, "all:f32");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--demo")) demo = 1;
        else if (!strcmp(argv[i], "--no-greedy")) greedy = 0;
        else if (!strcmp(argv[i], "--windows") && i + 1 < argc) max_windows = (size_t)atol(argv[++i]);
        else if (nv < MAXV) snprintf(v[nv++].rules, sizeof v[0].rules, "%s", argv[i]);
    }
    const char *path = demo ? "models/demo.bin" : ckpt("gpt2-124M-shaped");
    const char *texts_124m[] = {"tests/fixtures/GPL-3.txt", NULL};
    const char *texts_demo[] = {"tests/fixtures/heldout/sotu-2021.txt", "tests/fixtures/heldout/revelation.txt",
                                "tests/fixtures/heldout/moby-dick-134-135.txt", NULL};
    const char **texts = demo ? texts_demo : texts_124m;
    GptError err = {{0}};
    pool = threadpool_create(2, &err);
    for (int k = 0; k < nv; k++) prepare(&v[k], path);
    size_t window = demo ? (size_t)v[0].model.config.n_ctx : 1024, windows = 0;
    Tokenizer *tok = tokenizer_load("models", &err);
    if (!tok) fprintf(stderr, "%s\n", err.msg), exit(1);
    for (int t = 0; texts[t]; t++) {
        char *text;
        size_t len, n_ids;
        int32_t *ids;
        if (file_read_all(texts[t], &text, &len, &err) != 0 || tokenizer_encode(tok, text, len, 0, &ids, &n_ids, &err) != 0)
            fprintf(stderr, "%s\n", err.msg), exit(1);
        for (size_t w = 0; (w + 1) * window <= n_ids && windows < max_windows; w++, windows++)
            score_window(v, nv, ids + w * window, window), fprintf(stderr, "window %zu\n", windows + 1);
        free(text), free(ids);
    }
    int n_prompts = 0;
    if (greedy) {
        char *refs_text;
        size_t refs_len;
        if (file_read_all(demo ? "tests/fixtures/demo_refs.json" : "tests/fixtures/public_refs.json", &refs_text,
                          &refs_len, &err) != 0)
            fprintf(stderr, "%s\n", err.msg), exit(1);
        cJSON *refs = cJSON_Parse(refs_text);
        const cJSON *cases = demo ? cJSON_GetObjectItem(refs, "prompts")
                                  : cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), "gpt2-124M-shaped");
        n_prompts = cJSON_GetArraySize(cases);
        for (int k = 0; k < nv; k++)
            if ((v[k].greedy = greedy_matches(&v[k].model, DTYPE_F32, pool, cases, &err)) < 0)
                fprintf(stderr, "%s\n", err.msg), exit(1);
        cJSON_Delete(refs);
        free(refs_text);
    }
    double q8_bytes;
    {
        Variant all_q8 = {0};
        snprintf(all_q8.rules, sizeof all_q8.rules, "all:q8");
        // bytes only: the same sum without loading again
        const GPT2Config *c = &v[0].model.config;
        size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer, V = (size_t)c->vocab_size;
        q8_bytes = b_q8(V, C) + 4.0 * C + 4.0 * 2 * C +
                   L * (b_q8(3 * C, C) + b_q8(C, C) + b_q8(4 * C, C) + b_q8(C, 4 * C) + 4.0 * 14 * C);
        (void)all_q8;
    }
    printf("%s: %zu positions in %zu windows of %zu; greedy: 40 tokens of %d prompts\n", demo ? "demo" : "124M-shaped",
           v[1].positions, windows, window, n_prompts);
    printf("%-58s %10s %10s %8s %7s %10s %8s\n", "variant", "mean KL", "max KL", "top-1", "greedy", "MB/token",
           "q8/this");
    for (int k = 0; k < nv; k++)
        printf("%-58s %10.3g %10.3g %7.2f%% %3d/%-3d %10.2f %8.3f\n", v[k].rules,
               k ? v[k].kl_sum / (double)v[k].positions : 0, v[k].kl_max,
               k ? 100.0 * (double)v[k].top1 / (double)v[k].positions : 100.0, v[k].greedy, n_prompts,
               v[k].bytes / 1e6, q8_bytes / v[k].bytes);
    for (int k = 0; k < nv; k++) {
        for (size_t c = 0; c < sizeof v[k].copies / sizeof *v[k].copies; c++) free(v[k].copies[c]);
        model_free(&v[k].model);
    }
    tokenizer_free(tok);
    threadpool_free(pool);
    return 0;
}

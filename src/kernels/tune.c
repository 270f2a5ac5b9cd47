/*
 * tune.c - see tune.h: the variants timed on a model's products, and the
 * wisdom file that keeps the choice.
 *
 * The wisdom file is text:
 *
 *   gpt-wisdom 1
 *   key <the key, as tune_model makes it>
 *   <dtype> <K> <N> <variant name>      one line per product
 *
 * Anything else (another first line, another key, a line that does not
 * parse, a variant this build does not have) and the file is ignored as a
 * whole. It is written to a temporary file beside it and renamed, so a
 * reader never sees half of one.
 */
#include "kernels/tune.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"

// The measuring stops after this many rounds, or after the first round
// that ends past TUNE_BUDGET_S.
enum { TUNE_ROUNDS = 5 };
#define TUNE_BUDGET_S 1.0
// Outputs of a product timed at most: the output layer's 50257 rows would
// take most of the budget and tell nothing the first 2304 (qkv's) do not.
enum { TUNE_MAX_N = 2304 };
// Another variant replaces the default only when it takes less than this
// share of the default's time: within it, the difference is noise.
#define TUNE_MARGIN 0.97

int tune_mode_parse(const char *s, TuneMode *mode) {
    static const char *const names[] = {"off", "on", "force"};
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, names[i]) == 0) {
            *mode = (TuneMode)i;
            return 0;
        }
    return -1;
}

int tune_mode_from_env(TuneMode dflt, TuneMode *mode) {
    const char *v = getenv("GPT_TUNE");
    *mode = dflt;
    if (!v || !*v) return 0;
    return tune_mode_parse(v, mode);
}

// What CPUID can say before anything is measured: the ISA and its FMA width
// (how many accumulators fit the registers). A tile needs at least FMA pipes
// x FMA latency independent accumulators (2 x 4 = 8) to keep the pipes
// busy, and few loads per FMA. With AVX2 (16 ymm): float weights 4x3h (12
// accumulators of one half of the lanes, 7 loads per 12 FMAs), the
// quantized ones 1x6 (one weight row unpacked per 6 rows of activations, so
// the unpacking is shared by 6 FMAs). The cache sizes did not decide
// between the shapes on the products of GPT-2 124M. With AVX-512 (32 zmm),
// its first, 4x4 (16 accumulators, 8 loads per 16 FMAs), the shape the
// tiles had before there were variants; but on AMD from family 26 (Zen 5:
// two 512-bit FMA pipes, where Zen 4 splits a zmm FMA over its two 256-bit
// ones), float weights take 6x4w (24 accumulators, 10 loads per 24 FMAs,
// and weight rows up to 24 KiB unblocked: matmul_avx512.c's napkin bound).
// The timings behind them: docs/performance.md.
int tune_default_variant(const CpuInfo *c, CpuIsa isa, DType dt) {
    if (isa == CPU_AVX512 && strcmp(c->vendor, "AuthenticAMD") == 0 && c->family >= 26 && !dtype_is_blocked(dt)) {
        int v = matmul_variant_find(isa, "6x4w");
        return v < 0 ? 0 : v;
    }
    if (isa != CPU_AVX2 || c->fma_bits < 256) return 0;
    int v = matmul_variant_find(isa, dtype_is_blocked(dt) ? "1x6" : "4x3h");
    return v < 0 ? 0 : v;
}

// ----------------------------------------------------------------------------
// the products

// The products of m: each role's distinct (dtype, K, N) over the layers,
// in the order of the first layer they appear in; their count.
static int list_products(const Model *m, const Weight *w[TUNE_PRODUCTS_MAX], TuneProduct p[TUNE_PRODUCTS_MAX]) {
    static const char *const names[5] = {"qkv", "attn_proj", "fc", "fc_proj", "logits"};
    int n = 0;
    for (int l = 0; l < m->config.n_layer; l++) {
        const GPT2Layer *ly = &m->weights.layers[l];
        const Weight *ws[5] = {&ly->qkv_w, &ly->attn_proj_w, &ly->fc_w, &ly->fc_proj_w, &m->weights.wte};
        for (int r = 0; r < 5; r++) {
            int seen = 0;
            for (int i = 0; i < n; i++)
                seen |= p[i].dtype == ws[r]->dtype && p[i].K == ws[r]->n_in && p[i].N == ws[r]->n_out;
            if (seen || n == TUNE_PRODUCTS_MAX) continue;
            w[n] = ws[r];
            memset(&p[n], 0, sizeof p[n]);
            p[n].name = names[r];
            p[n].dtype = ws[r]->dtype;
            p[n].K = ws[r]->n_in;
            p[n].N = ws[r]->n_out;
            n++;
        }
    }
    return n;
}

static void plan_from(MatmulPlan *plan, CpuIsa isa, int fallback, const TuneProduct *p, int n) {
    memset(plan, 0, sizeof *plan);
    plan->isa = isa;
    plan->fallback = fallback;
    for (int i = 0; i < n && i < MATMUL_PLAN_MAX; i++)
        plan->choice[plan->n++] = (MatmulChoice){p[i].dtype, p[i].K, p[i].N, p[i].variant};
}

// Times every variant on every product (TUNE_ROWS rows of made-up
// activations, the product's first TUNE_MAX_N outputs), interleaved, best
// of the rounds; sets each product's variant (its default on entry) to the
// fastest, if that beats the default by TUNE_MARGIN. 0, or -1 (out of
// memory: nothing set).
static int measure(const Weight *const *w, TuneProduct *p, int n_products, ThreadPool *pool, CpuIsa isa,
                   int n_variants, double *seconds) {
    size_t Kmax = 0, Nmax = 0;
    for (int i = 0; i < n_products; i++) {
        if (p[i].K > Kmax) Kmax = p[i].K;
        size_t n = p[i].N < TUNE_MAX_N ? p[i].N : TUNE_MAX_N;
        if (n > Nmax) Nmax = n;
    }
    const int threads = threadpool_size(pool);
    const size_t per_thread = matmul_scratch_floats(MATMUL_GROUP, Kmax);
    float *inp = malloc(TUNE_ROWS * Kmax * sizeof *inp), *out = malloc(TUNE_ROWS * Nmax * sizeof *out);
    float *scratch = aligned_alloc(64, (size_t)threads * per_thread * sizeof(float));
    if (!inp || !out || !scratch) {
        free(inp), free(out), free(scratch);
        return -1;
    }
    uint32_t r = 12345;  // a fixed spread of activations in [-2, 2)
    for (size_t i = 0; i < TUNE_ROWS * Kmax; i++) {
        r = r * 1664525u + 1013904223u;
        inp[i] = (float)(r >> 8) * 0x1p-22f - 2.0f;
    }
    double best[TUNE_PRODUCTS_MAX][MATMUL_VARIANTS_MAX];
    for (int i = 0; i < n_products; i++)
        for (int v = 0; v < n_variants; v++) best[i][v] = 1e30;
    const double t0 = now_seconds();
    for (int round = 0; round < TUNE_ROUNDS && (round == 0 || now_seconds() - t0 < TUNE_BUDGET_S); round++)
        for (int i = 0; i < n_products; i++) {
            Weight view = *w[i];  // its first rows: the same layout, fewer of them
            if (view.n_out > TUNE_MAX_N) view.n_out = TUNE_MAX_N;
            for (int v = 0; v < n_variants; v++) {
                // Q8 x int8 (--q8-act int8) has one arrangement per ISA, as Q4 on AVX-512
                if (!matmul_variant_applies(isa, v, p[i].dtype) || (v != 0 && weight_is_grouped(w[i]))) continue;
                MatmulPlan forced = {isa, v, 0, {{0}}};
                MatmulContext ctx = {pool, scratch, per_thread, isa, &forced};
                double s = now_seconds();
                // out(TUNE_ROWS, N') = inp(TUNE_ROWS, K) @ W'(N', K)^T
                matmul(out, inp, &view, NULL, TUNE_ROWS, 0, &ctx);
                s = now_seconds() - s;
                if (s < best[i][v]) best[i][v] = s;
            }
        }
    *seconds = now_seconds() - t0;
    for (int i = 0; i < n_products; i++) {
        const double flops = 2.0 * TUNE_ROWS * (double)p[i].K * (double)(p[i].N < TUNE_MAX_N ? p[i].N : TUNE_MAX_N);
        const int dflt = p[i].variant;  // the default, kept unless another is clearly faster (timing noise)
        for (int v = 0; v < n_variants; v++) {
            p[i].gflops[v] = best[i][v] > 0 && best[i][v] < 1e30 ? flops / best[i][v] * 1e-9 : 0.0;
            if (best[i][v] < best[i][p[i].variant] && best[i][v] < TUNE_MARGIN * best[i][dflt]) p[i].variant = v;
        }
    }
    free(inp), free(out), free(scratch);
    return 0;
}

// ----------------------------------------------------------------------------
// wisdom

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

// The cache directory (…/gpt) into dir; 0, or -1 when neither
// $XDG_CACHE_HOME nor $HOME says where.
static int cache_dir(char *dir, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(dir, cap, "%s/gpt", xdg);
    else if (home && home[0]) n = snprintf(dir, cap, "%s/.cache/gpt", home);
    else return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

// The wisdom file at rep->path, open and past its first two lines, if they
// are the format's and rep->key's; else NULL (missing, corrupt, stale).
static FILE *wisdom_open(const TuneReport *rep) {
    FILE *f = fopen(rep->path, "r");
    if (!f) return NULL;
    char line[512];
    size_t n = strlen(rep->key);
    if (fgets(line, sizeof line, f) && strcmp(line, "gpt-wisdom 1\n") == 0 && fgets(line, sizeof line, f) &&
        strncmp(line, "key ", 4) == 0 && strncmp(line + 4, rep->key, n) == 0 && strcmp(line + 4 + n, "\n") == 0)
        return f;
    fclose(f);
    return NULL;
}

// One product's line: "<dtype> <K> <N> <variant>\n"; 0, or -1 if it is not one.
static int wisdom_line(const char *line, CpuIsa isa, DType *dt, size_t *K, size_t *N, int *variant) {
    char dts[16], name[16], end;
    int d;
    if (sscanf(line, "%15s %zu %zu %15s%c", dts, K, N, name, &end) != 5 || end != '\n' ||
        (d = dtype_from_name(dts)) < 0 || (*variant = matmul_variant_find(isa, name)) < 0)
        return -1;
    *dt = (DType)d;
    return 0;
}

// The product of rep's that (dt, K, N) is, or -1.
static int product_of(const TuneReport *rep, DType dt, size_t K, size_t N) {
    for (int i = 0; i < rep->n_products; i++)
        if (rep->product[i].dtype == dt && rep->product[i].K == K && rep->product[i].N == N) return i;
    return -1;
}

// Reads the choices of rep's products from rep->path: 1 if the file holds
// every one under rep->key, else 0 (missing, corrupt, stale, incomplete).
static int wisdom_read(TuneReport *rep) {
    FILE *f = wisdom_open(rep);
    if (!f) return 0;
    char line[512];
    int ok = 1, found[TUNE_PRODUCTS_MAX] = {0}, chosen[TUNE_PRODUCTS_MAX] = {0};
    while (ok && fgets(line, sizeof line, f)) {
        DType dt;
        size_t K, N;
        int v, i;
        ok = wisdom_line(line, rep->isa, &dt, &K, &N, &v) == 0;
        if (ok && (i = product_of(rep, dt, K, N)) >= 0) found[i] = 1, chosen[i] = v;
    }
    fclose(f);
    for (int i = 0; i < rep->n_products; i++) ok = ok && found[i];
    if (ok)
        for (int i = 0; i < rep->n_products; i++) rep->product[i].variant = chosen[i];
    return ok;
}

// The lines of the wisdom file already there (under the same key) for
// products other than rep's (another model's shapes) into f, so that models
// of one dtype share a file without undoing each other's choices.
static void wisdom_copy_others(const TuneReport *rep, FILE *f) {
    FILE *old = wisdom_open(rep);
    if (!old) return;
    char line[512];
    for (int kept = 0; kept < 64 && fgets(line, sizeof line, old);) {
        DType dt;
        size_t K, N;
        int v;
        if (wisdom_line(line, rep->isa, &dt, &K, &N, &v) != 0) break;
        if (product_of(rep, dt, K, N) < 0) fputs(line, f), kept++;
    }
    fclose(old);
}

static int make_dir(const char *path) { return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1; }

// Writes rep's choices to rep->path (its directory made if need be): 0, or
// -1 with rep->note saying why not.
static int wisdom_write(TuneReport *rep, const char *dir) {
    char parent[4000], tmp[4200];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) *slash = 0;
    if ((slash && make_dir(parent) != 0) || make_dir(dir) != 0) {
        snprintf(rep->note, sizeof rep->note, "wisdom not saved: %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", rep->path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        snprintf(rep->note, sizeof rep->note, "wisdom not saved: %s: %s", tmp, strerror(errno));
        return -1;
    }
    fprintf(f, "gpt-wisdom 1\nkey %s\n", rep->key);
    wisdom_copy_others(rep, f);
    for (int i = 0; i < rep->n_products; i++) {
        const TuneProduct *p = &rep->product[i];
        fprintf(f, "%s %zu %zu %s\n", dtype_name(p->dtype), p->K, p->N, matmul_variant_name(rep->isa, p->variant));
    }
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, rep->path) != 0) {
        snprintf(rep->note, sizeof rep->note, "wisdom not saved: %s: %s", rep->path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// tune_model

void tune_model(const Model *m, ThreadPool *pool, TuneMode mode, const char *version, MatmulPlan *plan,
                TuneReport *rep) {
    memset(rep, 0, sizeof *rep);
    CpuInfo cpu;
    cpu_info(&cpu);
    rep->isa = cpu_best_isa();
    rep->n_variants = matmul_variant_count(rep->isa);
    const int dflt = tune_default_variant(&cpu, rep->isa, DTYPE_F32);  // of a product not in the plan
    const Weight *w[TUNE_PRODUCTS_MAX];
    rep->n_products = list_products(m, w, rep->product);
    for (int i = 0; i < rep->n_products; i++)
        rep->product[i].variant = tune_default_variant(&cpu, rep->isa, rep->product[i].dtype);
    snprintf(rep->source, sizeof rep->source, "default");
    char desc[256], dts[32], dir[4000];
    cpu_describe(&cpu, desc, sizeof desc);
    // the variant count: wisdom chosen among fewer variants is stale
    snprintf(rep->key, sizeof rep->key, "%s; threads %d; dtype %s%s; variants %d; gpt %s", desc,
             threadpool_size(pool), model_matrix_dtypes(m, dts, sizeof dts),
             model_q8_int8(m) ? " x int8" : "", rep->n_variants, version);
    if (mode == TUNE_OFF || rep->n_variants < 2) {
        snprintf(rep->note, sizeof rep->note, "%s", mode == TUNE_OFF ? "tuning off" : "one variant on this CPU");
        plan_from(plan, rep->isa, dflt, rep->product, rep->n_products);
        return;
    }
    int have_dir = cache_dir(dir, sizeof dir) == 0;
    if (have_dir)
        snprintf(rep->path, sizeof rep->path, "%s/wisdom-%016llx", dir, (unsigned long long)fnv1a(rep->key));
    if (have_dir && mode == TUNE_ON && wisdom_read(rep)) {
        snprintf(rep->source, sizeof rep->source, "wisdom");
        plan_from(plan, rep->isa, dflt, rep->product, rep->n_products);
        return;
    }
    if (measure(w, rep->product, rep->n_products, pool, rep->isa, rep->n_variants, &rep->seconds) != 0) {
        snprintf(rep->note, sizeof rep->note, "out of memory to measure the variants");
        plan_from(plan, rep->isa, dflt, rep->product, rep->n_products);
        return;
    }
    snprintf(rep->source, sizeof rep->source, "measured");
    if (!have_dir) snprintf(rep->note, sizeof rep->note, "wisdom not saved: neither XDG_CACHE_HOME nor HOME is set");
    else wisdom_write(rep, dir);
    plan_from(plan, rep->isa, dflt, rep->product, rep->n_products);
}

void tune_print(const TuneReport *rep, FILE *f) {
    for (int i = 0; i < rep->n_products; i++) {
        const TuneProduct *p = &rep->product[i];
        fprintf(f, "  %-9s (%s %zux%zu): %s", p->name, dtype_name(p->dtype), p->K, p->N,
                matmul_variant_name(rep->isa, p->variant));
        if (p->gflops[p->variant] > 0) {
            int faster = 0;  // a variant measured faster than the one kept
            fprintf(f, " %.1f GFLOP/s  [", p->gflops[p->variant]);
            for (int v = 0, first = 1; v < rep->n_variants; v++)
                if (v != p->variant && p->gflops[v] > 0) {  // 0: not measured (matmul_variant_applies)
                    fprintf(f, "%s%s %.1f", first ? "" : ", ", matmul_variant_name(rep->isa, v), p->gflops[v]);
                    first = 0;
                    faster |= p->gflops[v] > p->gflops[p->variant];
                }
            fprintf(f, "]");
            // measure keeps the fastest, or the default when none beats it
            // by TUNE_MARGIN: a faster one shown means the default was kept
            if (faster) fprintf(f, "  (kept the default: none %.0f%% faster)", (1.0 - TUNE_MARGIN) * 100.0);
        }
        fprintf(f, "\n");
    }
}

/*
 * test_sampler.c - the sampler against independent computations:
 *   - the RNG against the published xoshiro256** and splitmix64 vectors;
 *   - each filter on small distributions whose answer is worked out by hand
 *     from Hugging Face's definitions (see the comments at each case);
 *   - the fast path (heap top-k, prefiltered top-p) against a plain
 *     full-sort reference written here, on random 50257-wide logits;
 *   - empirical frequencies against softmax(l / T), within 5 sigma;
 *   - logit_bias and the presence/frequency penalties: the adjusted logits
 *     bit for bit against their formula evaluated here (in double, rounded
 *     to float once), -100 never drawn and +100 always, counts over the
 *     generated ids only, and the fast path against the reference with them.
 * All sampling uses fixed seeds, so a run is reproducible; the 5-sigma bounds
 * are what a correct sampler could fail with probability ~1e-6 per count.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu.h"
#include "kernels/sampler_kernels.h"
#include "sampler.h"

#define GPT2_V 50257

static SamplerParams params(float temp, int k, float p, float min_p,
                            float pen, uint64_t seed) {
    return (SamplerParams){.temperature = temp, .top_k = k, .top_p = p,
                           .min_p = min_p, .repeat_penalty = pen,
                           .seed = seed};
}

static Sampler make(SamplerParams p, size_t V) {
    Sampler s;
    GptError err = {{0}};
    int rc = sampler_init(&s, &p, V, &err);
    CHECK(rc == 0, "sampler_init failed: %s", err.msg);
    if (rc != 0) exit(1);
    return s;
}

// A test-local RNG for building inputs, independent of the one under test.
static uint64_t lcg_state = 12345;
static double test_uniform(void) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(lcg_state >> 11) * 0x1.0p-53;
}
static double test_gauss(void) {
    double u1 = test_uniform(), u2 = test_uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// ---------------------------------------------------------------------------
// The reference: every step spelled out with full sorts, as in HF.

typedef struct { double logit, weight; int32_t id; } RefItem;

static int ref_cmp_desc(const void *pa, const void *pb) {
    const RefItem *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}
static int cmp_float_desc(const void *pa, const void *pb) {
    float a = *(const float *)pa, b = *(const float *)pb;
    return (a < b) - (a > b);
}

// Fills ids/weights (ascending id) with the kept tokens; returns the count.
// The logits after logit_bias, the repetition penalty and the presence/
// frequency penalties (counted over hist[np..nh), the generated ids), each
// written as its formula, the counts by a plain scan.
static void ref_adjust(float *l, size_t V, const SamplerParams *P, const int32_t *hist, size_t nh, size_t np) {
    for (size_t i = 0; i < P->n_bias; i++) l[P->bias[i].id] = (float)((double)l[P->bias[i].id] + P->bias[i].bias);
    for (size_t i = 0; i < nh; i++) {
        int32_t id = hist[i];
        if (id < 0 || (size_t)id >= V) continue;
        int dup = 0;
        for (size_t j = 0; j < i; j++) dup |= hist[j] == id;
        if (dup) continue;
        l[id] = l[id] < 0 ? l[id] * P->repeat_penalty : l[id] / P->repeat_penalty;
    }
    if (P->presence_penalty == 0 && P->frequency_penalty == 0) return;
    for (size_t i = np; i < nh; i++) {
        int32_t id = hist[i];
        if (id < 0 || (size_t)id >= V) continue;
        int dup = 0;
        for (size_t j = np; j < i; j++) dup |= hist[j] == id;
        if (dup) continue;
        double count = 0;
        for (size_t j = np; j < nh; j++) count += hist[j] == id;
        l[id] = (float)((double)l[id] - (count * (double)P->frequency_penalty + (double)P->presence_penalty));
    }
}

static size_t ref_distribution_np(const float *logits_in, size_t V,
                                  const SamplerParams *P, const int32_t *hist,
                                  size_t nh, size_t np, int32_t *ids, double *weights) {
    float *l = malloc(V * sizeof *l);
    memcpy(l, logits_in, V * sizeof *l);
    ref_adjust(l, V, P, hist, nh, np);
    float lmax = -INFINITY;
    size_t imax = 0;
    for (size_t i = 0; i < V; i++)
        if (l[i] > lmax) { lmax = l[i]; imax = i; }
    if (P->temperature == 0) {
        ids[0] = (int32_t)imax;
        weights[0] = 1.0;
        free(l);
        return 1;
    }
    float thr = -INFINITY;
    if (P->top_k > 0 && (size_t)P->top_k < V) {
        float *sorted = malloc(V * sizeof *sorted);
        memcpy(sorted, l, V * sizeof *sorted);
        qsort(sorted, V, sizeof *sorted, cmp_float_desc);
        thr = sorted[P->top_k - 1];
        free(sorted);
    }
    RefItem *it = malloc(V * sizeof *it);
    size_t n = 0;
    double z = 0;
    for (size_t i = 0; i < V; i++) {
        if (!(l[i] >= thr)) continue;
        double sl = ((double)l[i] - lmax) / (double)P->temperature;
        double w = exp(sl);
        if (w > 0) { it[n++] = (RefItem){sl, w, (int32_t)i}; z += w; }
    }
    char *keep = calloc(V, 1);
    for (size_t i = 0; i < n; i++) keep[it[i].id] = 1;
    if (P->top_p < 1.0f) {
        qsort(it, n, sizeof *it, ref_cmp_desc);
        double before = 0;
        for (size_t j = 0; j < n; j++) {
            keep[it[j].id] = j == 0 || before < P->top_p - SAMPLER_TOP_P_EPS;
            before += it[j].weight / z;
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < V; i++) {
        if (!keep[i]) continue;
        double w = exp(((double)l[i] - lmax) / (double)P->temperature);
        if (P->min_p > 0 && w < P->min_p) continue;  // max weight is exp(0)
        ids[m] = (int32_t)i;
        weights[m++] = w;
    }
    free(keep);
    free(it);
    free(l);
    return m;
}

static size_t ref_distribution(const float *logits_in, size_t V, const SamplerParams *P, const int32_t *hist,
                               size_t nh, int32_t *ids, double *weights) {
    return ref_distribution_np(logits_in, V, P, hist, nh, nh, ids, weights);
}

static int32_t pick(const int32_t *ids, const double *w, size_t n, double u) {
    double z = 0, cum = 0;
    for (size_t i = 0; i < n; i++) z += w[i];
    for (size_t i = 0; i < n; i++) {
        cum += w[i];
        if (u * z < cum) return ids[i];
    }
    return ids[n - 1];
}

// ---------------------------------------------------------------------------

static void test_rng(void) {
    // Published: rand_xoshiro's `reference` test, from Vigna's C code.
    SamplerRng r = {{1, 2, 3, 4}};
    const uint64_t want[10] = {
        11520ULL, 0ULL, 1509978240ULL, 1215971899390074240ULL,
        1216172134540287360ULL, 607988272756665600ULL,
        16172922978634559625ULL, 8476171486693032832ULL,
        10595114339597558777ULL, 2904607092377533576ULL};
    for (int i = 0; i < 10; i++) {
        uint64_t got = sampler_rng_next(&r);
        CHECK(got == want[i], "xoshiro256** output %d: got %llu want %llu", i,
              (unsigned long long)got, (unsigned long long)want[i]);
    }
    // Published splitmix64 outputs from state 0; seeding fills s[0..3] with
    // them, which pins the seed -> sequence mapping on every machine.
    const uint64_t sm[4] = {0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL,
                            0x06c45d188009454fULL, 0xf88bb8a8724c81ecULL};
    SamplerRng r0;
    sampler_rng_seed(&r0, 0);
    for (int i = 0; i < 4; i++)
        CHECK(r0.s[i] == sm[i], "seed 0 state[%d]: got %016llx want %016llx",
              i, (unsigned long long)r0.s[i], (unsigned long long)sm[i]);
    double lo = 1, hi = 0;
    for (int i = 0; i < 100000; i++) {
        double u = sampler_rng_uniform(&r0);
        if (u < lo) lo = u;
        if (u > hi) hi = u;
    }
    CHECK(lo >= 0 && hi < 1 && lo < 1e-3 && hi > 1 - 1e-3,
          "uniform range [%g, %g]", lo, hi);
    uint64_t a = sampler_random_seed(), b = sampler_random_seed();
    CHECK(a != b, "two OS seeds are equal: %llu", (unsigned long long)a);
}

static void check_invalid(SamplerParams p, const char *want) {
    GptError err = {{0}};
    int rc = sampler_params_validate(&p, &err);
    CHECK(rc == -1 && strcmp(err.msg, want) == 0,
          "validate: rc %d, message \"%s\", want \"%s\"", rc, err.msg, want);
}

static void test_validate(void) {
    SamplerParams ok = params(0.8f, 40, 0.95f, 0.05f, 1.1f, 7);
    GptError err = {{0}};
    CHECK(sampler_params_validate(&ok, &err) == 0, "valid params: %s", err.msg);
    SamplerParams edge = params(0, 0, 1.0f, 0, 1.0f, 0);
    CHECK(sampler_params_validate(&edge, &err) == 0, "edge params: %s", err.msg);
    edge.min_p = 1.0f;
    CHECK(sampler_params_validate(&edge, &err) == 0, "min-p 1: %s", err.msg);

    check_invalid(params(1, 0, 1.5f, 0, 1, 0), "top_p 1.5: must be in (0, 1]");
    check_invalid(params(1, 0, 0.0f, 0, 1, 0), "top_p 0: must be in (0, 1]");
    check_invalid(params(-1, 0, 1, 0, 1, 0), "temperature -1: must be >= 0");
    check_invalid(params(NAN, 0, 1, 0, 1, 0), "temperature nan: must be >= 0");
    check_invalid(params(INFINITY, 0, 1, 0, 1, 0), "temperature inf: must be finite");
    check_invalid(params(1, -3, 1, 0, 1, 0), "top_k -3: must be >= 0");
    check_invalid(params(1, 0, 1, 2, 1, 0), "min_p 2: must be in [0, 1]");
    check_invalid(params(1, 0, 1, -0.5f, 1, 0), "min_p -0.5: must be in [0, 1]");
    check_invalid(params(1, 0, 1, 0, 0, 0), "repeat_penalty 0: must be > 0");
    check_invalid(params(1, 0, 1, 0, INFINITY, 0),
                  "repeat_penalty inf: must be finite");

    SamplerParams pen = params(1, 0, 1, 0, 1, 0);
    pen.presence_penalty = 2.5f;
    check_invalid(pen, "presence_penalty 2.5: must be in [-2, 2]");
    pen.presence_penalty = -2.0f, pen.frequency_penalty = NAN;
    check_invalid(pen, "frequency_penalty nan: must be in [-2, 2]");
    pen.frequency_penalty = 2.0f;
    CHECK(sampler_params_validate(&pen, &err) == 0, "penalties -2 and 2: %s", err.msg);
    pen.n_bias = 2;
    pen.bias[0] = (SamplerBias){.id = 7, .bias = 100};
    pen.bias[1] = (SamplerBias){.id = 8, .bias = -100.5f};
    check_invalid(pen, "logit_bias: token 8: bias -100.5 must be in [-100, 100]");
    pen.bias[1] = (SamplerBias){.id = -3, .bias = 1};
    check_invalid(pen, "logit_bias: token id -3: must be >= 0");
    pen.bias[1] = (SamplerBias){.id = 7, .bias = 1};
    check_invalid(pen, "logit_bias: token id 7 given twice");
    pen.n_bias = SAMPLER_BIAS_MAX + 1;
    check_invalid(pen, "logit_bias: 301 entries: at most 300");
    pen.n_bias = 1;
    pen.bias[0] = (SamplerBias){.id = 10, .bias = 1};

    Sampler s;
    CHECK(sampler_init(&s, &pen, 10, &err) == -1 &&
              !strcmp(err.msg, "logit_bias: token id 10: must be below the vocabulary size 10"),
          "init with a bias past the vocabulary: \"%s\"", err.msg);
    sampler_free(&s);
    SamplerScratch sc;
    CHECK(sampler_scratch_init(&sc, 10, &err) == 0, "%s", err.msg);
    CHECK(sampler_init_shared(&s, &pen, &sc, &err) == -1 && strstr(err.msg, "below the vocabulary size 10"),
          "shared init with a bias past the vocabulary: \"%s\"", err.msg);
    sampler_scratch_free(&sc);
    SamplerParams bad = params(1, 0, 1.5f, 0, 1, 0);
    CHECK(sampler_init(&s, &bad, 10, &err) == -1 &&
              strcmp(err.msg, "top_p 1.5: must be in (0, 1]") == 0,
          "init with bad params: \"%s\"", err.msg);
    sampler_free(&s);
    CHECK(sampler_init(&s, &ok, 0, &err) == -1 && strstr(err.msg, "vocabulary"),
          "init with V = 0: \"%s\"", err.msg);
    sampler_free(&s);
    sampler_free(&s);
    sampler_free(NULL);
}

static void test_greedy(void) {
    Sampler s = make(params(0, 0, 1, 0, 1, 1), 6);
    float l[6] = {1, 3, -2, 3, 2.5f, 3};
    SamplerRng before = s.rng;
    int32_t t = sampler_sample(&s, l, NULL, 0);
    CHECK(t == 1, "argmax with ties at 1, 3, 5: got %d want 1", t);
    CHECK(memcmp(&before, &s.rng, sizeof before) == 0,
          "greedy consumed the RNG");
    sampler_free(&s);

    // The penalty applies before argmax: 2 / 1.5 = 1.33 < 1.9.
    s = make(params(0, 0, 1, 0, 1.5f, 1), 3);
    float a[3] = {2.0f, 1.9f, 0};
    int32_t h0[] = {0};
    t = sampler_sample(&s, a, h0, 1);
    CHECK(t == 1, "penalized positive argmax: got %d want 1", t);
    // Negative logits are multiplied: -1 * 1.5 = -1.5 < -1.2.
    float b[3] = {-1.0f, -1.2f, -3};
    t = sampler_sample(&s, b, h0, 1);
    CHECK(t == 1, "penalized negative argmax: got %d want 1", t);
    sampler_free(&s);

    // Unusable logits.
    s = make(params(1, 0, 1, 0, 1, 1), 3);
    float nan3[3] = {NAN, NAN, NAN}, ninf3[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK(sampler_sample(&s, nan3, NULL, 0) == -1, "all NaN should give -1");
    CHECK(sampler_sample(&s, ninf3, NULL, 0) == -1, "all -inf should give -1");
    float pinf3[3] = {0, INFINITY, 1};
    CHECK(sampler_sample(&s, pinf3, NULL, 0) == -1, "a +inf logit should give -1");
    int nan_picked = 0;
    for (int i = 0; i < 200; i++) {
        float m[3] = {NAN, 0.0f, -INFINITY};
        nan_picked |= sampler_sample(&s, m, NULL, 0) != 1;
    }
    CHECK(!nan_picked, "a NaN or -inf token was drawn");
    sampler_free(&s);
}

static void test_repeat_penalty(void) {
    // CTRL rule, each distinct id once: 2 -> 2/2, -1 -> -1*2, 0 stays 0,
    // ids 1 and 3 untouched; 99 and -1 are out of range and ignored.
    Sampler s = make(params(1, 0, 1, 0, 2.0f, 1), 5);
    float l[5] = {2, 1, -1, 0.5f, 0};
    const float want[5] = {1, 1, -2, 0.5f, 0};
    int32_t hist[] = {0, 0, 2, 2, 2, 4, 99, -1, 0};
    const SamplerCand *c;
    double z;
    size_t n = sampler_distribution(&s, l, hist, 9, &c, &z);
    for (int i = 0; i < 5; i++)
        CHECK(l[i] == want[i], "penalized logit %d: got %g want %g", i, l[i],
              want[i]);
    double zs = 0;
    for (int i = 0; i < 5; i++) zs += exp(want[i]);
    CHECK(n == 5, "kept %zu, want 5", n);
    for (size_t i = 0; i < n && i < 5; i++) {
        double p = c[i].weight / z, q = exp(want[c[i].id]) / zs;
        CHECK(fabs(p - q) < 1e-12, "id %d: p %.15g want %.15g", c[i].id, p, q);
    }
    // A second call with the same history penalizes again from the new
    // logits: the sampler kept no memory of the first (seen[] was cleared).
    float l2[5] = {2, 1, -1, 0.5f, 0};
    sampler_distribution(&s, l2, hist, 9, &c, &z);
    CHECK(l2[0] == 1 && l2[2] == -2, "second call: %g %g", l2[0], l2[2]);
    sampler_free(&s);
}

// ---------------------------------------------------------------------------
// logit_bias and OpenAI's presence/frequency penalties

static int same_bits(const float *a, const float *b, size_t n, size_t *at) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a) != 0) {
            *at = i;
            return 0;
        }
    return 1;
}

static void test_penalties_by_hand(void) {
    // prompt {0, 1, 1}, generated {2, 3, 3, 3, 1}: id 0 is the prompt's
    // alone (no penalty), 1 and 2 were generated once: -(0.25 + 0.5), 3
    // three times: -(3 x 0.25 + 0.5); 4 and 5 never.
    SamplerParams P = params(1, 0, 1, 0, 1, 1);
    P.presence_penalty = 0.5f, P.frequency_penalty = 0.25f;
    Sampler s = make(P, 6);
    int32_t hist[] = {0, 1, 1, 2, 3, 3, 3, 1};
    float l[6] = {0}, raw[6] = {0};
    const float want[6] = {0, -0.75f, -0.75f, -1.25f, 0, 0};
    const SamplerCand *c;
    double z;
    sampler_distribution(&s, l, hist, 3, &c, &z);  // the first draw: its history is the prompt
    size_t at = 0;
    CHECK(same_bits(s.own.adjusted, raw, 6, &at), "nothing generated yet: logit %zu is %g", at, s.own.adjusted[at]);
    sampler_distribution(&s, l, hist, 8, &c, &z);
    for (int i = 0; i < 6; i++)
        CHECK(s.own.adjusted[i] == want[i], "penalized logit %d: got %g want %g", i, s.own.adjusted[i], want[i]);
    CHECK(same_bits(l, raw, 6, &at), "the caller's logits changed at %zu: %g", at, l[at]);
    // the counts were cleared: the same call gives the same logits
    sampler_distribution(&s, l, hist, 8, &c, &z);
    CHECK(same_bits(s.own.adjusted, want, 6, &at), "second call: logit %zu is %g", at, s.own.adjusted[at]);
    // a prompt set explicitly: all eight ids are the prompt's
    sampler_set_prompt(&s, 8);
    sampler_distribution(&s, l, hist, 8, &c, &z);
    CHECK(same_bits(s.own.adjusted, raw, 6, &at), "all prompt: logit %zu is %g", at, s.own.adjusted[at]);
    sampler_free(&s);

    // the bias first, then the repetition penalty (CTRL: 2 + 1 = 3, / 2),
    // then the presence penalty: (3 / 2) - 1 = 0.5
    P = params(0, 0, 1, 0, 2, 1);
    P.presence_penalty = 1;
    P.n_bias = 2;
    P.bias[0] = (SamplerBias){.id = 4, .bias = 1};
    P.bias[1] = (SamplerBias){.id = 0, .bias = -100};
    s = make(P, 6);
    sampler_set_prompt(&s, 0);
    float m[6] = {5, 0, 0, 0, 2, 0.25f};
    int32_t h4[] = {4};
    int32_t t = sampler_sample(&s, m, h4, 1);
    CHECK(s.own.adjusted[4] == 0.5f && s.own.adjusted[0] == -95.0f, "bias, penalty, presence: %g %g",
          s.own.adjusted[4], s.own.adjusted[0]);
    CHECK(t == 4, "greedy after the adjustments: %d, want 4 (0.5 > 0.25)", t);
    sampler_free(&s);
}

// The adjusted logits bit for bit against ref_adjust, on random logits,
// biases and histories.
static void test_adjusted_vs_formula(void) {
    const size_t V = 1000;
    float *l = malloc(V * sizeof *l), *raw = malloc(V * sizeof *l), *want = malloc(V * sizeof *l);
    int32_t hist[400];
    int bad = 0, cases = 0;
    for (int r = 0; r < 50; r++) {
        for (size_t i = 0; i < V; i++) raw[i] = (float)(3 * test_gauss() - (r % 3 ? 0 : 60));
        SamplerParams P = params(0.8f, 0, 1, 0, r % 2 ? 1.0f : 1.25f, (uint64_t)r);
        P.presence_penalty = (float)(4 * test_uniform() - 2);
        P.frequency_penalty = r % 5 == 0 ? 0.0f : (float)(4 * test_uniform() - 2);
        while (P.n_bias < (size_t)(r * 6 % SAMPLER_BIAS_MAX)) {
            int32_t id = (int32_t)(test_uniform() * V);
            int dup = 0;
            for (size_t j = 0; j < P.n_bias; j++) dup |= P.bias[j].id == id;
            if (!dup) P.bias[P.n_bias++] = (SamplerBias){.id = id, .bias = (float)(200 * test_uniform() - 100)};
        }
        if (P.n_bias > 2) P.bias[0].bias = -100, P.bias[1].bias = 100;
        size_t nh = 50 + (size_t)r * 7, np = (size_t)r * 3;
        for (size_t i = 0; i < nh; i++)  // the generated ids crowd a few tokens: counts up to dozens
            hist[i] = (int32_t)(test_uniform() * (i < np ? V : 40));
        hist[nh - 1] = -1;  // out of range: ignored
        Sampler s = make(P, V);
        sampler_set_prompt(&s, np);
        memcpy(l, raw, V * sizeof *l);
        const SamplerCand *c;
        double z;
        sampler_distribution(&s, l, hist, nh, &c, &z);
        memcpy(want, raw, V * sizeof *l);
        ref_adjust(want, V, &P, hist, nh, np);
        size_t at = 0;
        if (!same_bits(s.own.adjusted, want, V, &at)) {
            bad++;
            fprintf(stderr, "  case %d: logit %zu is %.9g, the formula gives %.9g\n", r, at, s.own.adjusted[at],
                    want[at]);
        }
        if (!same_bits(l, raw, V, &at)) bad++;
        cases++;
        sampler_free(&s);
    }
    CHECK(bad == 0, "%d of %d cases: the adjusted logits differ from the formula's", bad, cases);
    free(l);
    free(raw);
    free(want);
}

// -100 is never drawn and +100 always, greedy and sampled, over many seeds.
static void test_ban_and_force(void) {
    const size_t V = 64;
    float base[64];
    size_t top = 0, low = 0;
    for (size_t i = 0; i < V; i++) {
        base[i] = (float)(2 * test_gauss());
        if (base[i] > base[top]) top = i;
        if (base[i] < base[low]) low = i;
    }
    for (int force = 0; force < 2; force++) {
        size_t target = force ? low : top;
        int wrong = 0, draws = 0;
        for (uint64_t seed = 0; seed < 200; seed++) {
            for (int t = 0; t < 3; t++) {
                SamplerParams P = params(t == 0 ? 0.0f : t == 1 ? 1.0f : 1.5f, 0, seed % 2 ? 0.95f : 1.0f, 0, 1, seed);
                P.n_bias = 1;
                P.bias[0] = (SamplerBias){.id = (int32_t)target, .bias = force ? 100.0f : -100.0f};
                Sampler s = make(P, V);
                for (int k = 0; k < 50; k++) {
                    float x[64];
                    memcpy(x, base, sizeof x);
                    int32_t got = sampler_sample(&s, x, NULL, 0);
                    wrong += force ? got != (int32_t)target : got == (int32_t)target;
                    draws++;
                }
                sampler_free(&s);
            }
        }
        CHECK(wrong == 0, "logit_bias %s on token %zu: %d of %d draws %s it", force ? "+100" : "-100", target, wrong,
              draws, force ? "missed" : "drew");
    }
}

// Shuffled ids so that id order and probability order differ.
static void set_probs(float *l, const int *ids, const double *p, size_t n) {
    for (size_t i = 0; i < n; i++) l[ids[i]] = (float)log(p[i]);
}

static int kept_set_is(Sampler *s, const float *logits, size_t V,
                       const int *want, size_t nwant) {
    float *l = malloc(V * sizeof *l);
    memcpy(l, logits, V * sizeof *l);
    const SamplerCand *c;
    double z;
    size_t n = sampler_distribution(s, l, NULL, 0, &c, &z);
    int ok = n == nwant;
    for (size_t i = 0; ok && i < n; i++) {
        int found = 0;
        for (size_t j = 0; j < nwant; j++) found |= c[i].id == want[j];
        ok = found;
    }
    // And the plain reference agrees.
    int32_t *ids = malloc(V * sizeof *ids);
    double *w = malloc(V * sizeof *w);
    size_t m = ref_distribution(logits, V, &s->params, NULL, 0, ids, w);
    ok = ok && m == n;
    for (size_t i = 0; ok && i < n; i++) ok = ids[i] == c[i].id;
    if (!ok) {
        fprintf(stderr, "  kept:");
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", c[i].id);
        fprintf(stderr, "\n  reference:");
        for (size_t i = 0; i < m; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    free(w);
    free(l);
    return ok;
}

static void test_top_k(void) {
    // k larger than V and k == V keep everything.
    float l5[5] = {0.5f, -1, 2, 0, 1};
    int all[5] = {0, 1, 2, 3, 4};
    Sampler s = make(params(1, 10, 1, 0, 1, 1), 5);
    CHECK(kept_set_is(&s, l5, 5, all, 5), "top-k 10 > V = 5");
    sampler_free(&s);
    s = make(params(1, 5, 1, 0, 1, 1), 5);
    CHECK(kept_set_is(&s, l5, 5, all, 5), "top-k 5 == V");
    sampler_free(&s);
    s = make(params(1, 2, 1, 0, 1, 1), 5);
    int two[2] = {2, 4};
    CHECK(kept_set_is(&s, l5, 5, two, 2), "top-k 2");
    sampler_free(&s);
    // HF: scores < (k-th largest) are removed, so ties with it stay.
    float lt[5] = {3, 2, 2, 1, 0};
    int tie[3] = {0, 1, 2};
    s = make(params(1, 2, 1, 0, 1, 1), 5);
    CHECK(kept_set_is(&s, lt, 5, tie, 3), "top-k 2 with a tie at the 2nd");
    sampler_free(&s);

    // top-k 1 equals greedy, for any temperature and seed (continuous random
    // logits: no ties at the top).
    const size_t V = 1000;
    float *l = malloc(V * sizeof *l);
    const float temps[] = {0.05f, 0.7f, 1.0f, 5.0f};
    int bad = 0;
    for (int ti = 0; ti < 4; ti++)
        for (uint64_t seed = 1; seed <= 5; seed++) {
            Sampler sk = make(params(temps[ti], 1, 1, 0, 1, seed), V);
            Sampler sg = make(params(0, 0, 1, 0, 1, seed), V);
            for (int r = 0; r < 20; r++) {
                for (size_t i = 0; i < V; i++) l[i] = (float)test_gauss();
                float l2[1000];
                memcpy(l2, l, sizeof l2);
                int32_t a = sampler_sample(&sk, l, NULL, 0);
                int32_t b = sampler_sample(&sg, l2, NULL, 0);
                if (a != b) bad++;
            }
            sampler_free(&sk);
            sampler_free(&sg);
        }
    CHECK(bad == 0, "top-k 1 differed from greedy %d times of 400", bad);
    free(l);
}

static void test_top_p(void) {
    // Probabilities 0.4, 0.3, 0.2, 0.1 on ids 2, 0, 3, 1.
    float l[4];
    int ids[4] = {2, 0, 3, 1};
    double p[4] = {0.4, 0.3, 0.2, 0.1};
    set_probs(l, ids, p, 4);
    struct { float top_p; int want[4]; size_t n; } cases[] = {
        {0.6f, {2, 0}, 2},        // mass before id 3 is 0.7 >= 0.6
        {0.7f, {2, 0}, 2},        // exactly 0.7 before id 3: not < p
        {0.71f, {2, 0, 3}, 3},
        {0.4f, {2}, 1},           // exactly 0.4 before id 0
        {0.41f, {2, 0}, 2},
        {0.05f, {2}, 1},          // at least one
        {0.9f, {2, 0, 3}, 3},     // 0.9 before id 1
        {0.95f, {2, 0, 3, 1}, 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Sampler s = make(params(1, 0, cases[i].top_p, 0, 1, 1), 4);
        CHECK(kept_set_is(&s, l, 4, cases[i].want, cases[i].n),
              "top-p %g on 0.4/0.3/0.2/0.1", cases[i].top_p);
        sampler_free(&s);
    }

    // Dyadic probabilities, so that the masses before each token are exact
    // sums: 0.5 (id 3), 0.25 (id 0), 0.125 (ids 1 and 2, a tie broken by id).
    float d[4];
    int did[4] = {3, 0, 1, 2};
    double dp[4] = {0.5, 0.25, 0.125, 0.125};
    set_probs(d, did, dp, 4);
    struct { float top_p; int want[4]; size_t n; } dcases[] = {
        {0.5f, {3}, 1},
        {0.75f, {3, 0}, 2},
        {0.875f, {3, 0, 1}, 3},   // the tie: id 1 before id 2
        {0.876f, {3, 0, 1, 2}, 4},
        {1.0f, {3, 0, 1, 2}, 4},
    };
    for (size_t i = 0; i < sizeof dcases / sizeof dcases[0]; i++) {
        Sampler s = make(params(1, 0, dcases[i].top_p, 0, 1, 1), 4);
        CHECK(kept_set_is(&s, d, 4, dcases[i].want, dcases[i].n),
              "top-p %g on 0.5/0.25/0.125/0.125", dcases[i].top_p);
        sampler_free(&s);
    }

    // Sampling: only the nucleus {2, 0} of 0.4/0.3/0.2/0.1 with p = 0.6 is
    // ever drawn, in the ratio 4:3.
    Sampler s = make(params(1, 0, 0.6f, 0, 1, 99), 4);
    const int N = 40000;
    int count[4] = {0};
    for (int i = 0; i < N; i++) {
        float x[4];
        memcpy(x, l, sizeof x);
        count[sampler_sample(&s, x, NULL, 0)]++;
    }
    CHECK(count[1] == 0 && count[3] == 0, "outside the nucleus: id 1 %d, id 3 %d",
          count[1], count[3]);
    double q2 = 0.4 / 0.7, sig = sqrt(N * q2 * (1 - q2));
    CHECK(fabs(count[2] - N * q2) < 5 * sig && count[0] > 0,
          "nucleus frequencies: id 2 %d (want %.0f +- %.0f), id 0 %d", count[2],
          N * q2, 5 * sig, count[0]);
    sampler_free(&s);
}

static void test_min_p(void) {
    // Probabilities 0.5, 0.25, 0.15, 0.1 on ids 1, 3, 0, 2.
    float l[4];
    int ids[4] = {1, 3, 0, 2};
    double p[4] = {0.5, 0.25, 0.15, 0.1};
    set_probs(l, ids, p, 4);
    struct { float min_p; int want[4]; size_t n; } cases[] = {
        {0.35f, {1, 3}, 2},       // drop below 0.175
        {0.25f, {1, 3, 0}, 3},    // drop below 0.125
        {0.1f, {1, 3, 0, 2}, 4},  // drop below 0.05
        {1.0f, {1}, 1},           // only the max
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Sampler s = make(params(1, 0, 1, cases[i].min_p, 1, 1), 4);
        CHECK(kept_set_is(&s, l, 4, cases[i].want, cases[i].n),
              "min-p %g on 0.5/0.25/0.15/0.1", cases[i].min_p);
        sampler_free(&s);
    }
    // The renormalized probabilities: 0.5 / 0.75 and 0.25 / 0.75. The logits
    // are float32 logs, good to ~1e-7 relative.
    Sampler s = make(params(1, 0, 1, 0.35f, 1, 1), 4);
    const SamplerCand *c;
    double z;
    float x[4];
    memcpy(x, l, sizeof x);
    size_t n = sampler_distribution(&s, x, NULL, 0, &c, &z);
    CHECK(n == 2 && c[0].id == 1 && fabs(c[0].weight / z - 2.0 / 3) < 1e-6 &&
              fabs(c[1].weight / z - 1.0 / 3) < 1e-6,
          "min-p 0.35 distribution: n %zu, p %g %g", n, c[0].weight / z,
          n > 1 ? c[1].weight / z : 0.0);
    sampler_free(&s);
    // A tie at the max keeps both.
    float t[3] = {1, 1, 0};
    int both[2] = {0, 1};
    s = make(params(1, 0, 1, 1.0f, 1, 1), 3);
    CHECK(kept_set_is(&s, t, 3, both, 2), "min-p 1 with a tie at the max");
    sampler_free(&s);
}

static void test_determinism(void) {
    const size_t V = 100;
    float base[100];
    for (size_t i = 0; i < V; i++) base[i] = (float)(0.3 * test_gauss());
    int32_t a[1000], b[1000], c[1000];
    Sampler s1 = make(params(1, 0, 0.95f, 0, 1, 42), V);
    Sampler s2 = make(params(1, 0, 0.95f, 0, 1, 42), V);
    Sampler s3 = make(params(1, 0, 0.95f, 0, 1, 43), V);
    for (int i = 0; i < 1000; i++) {
        float x[100];
        memcpy(x, base, sizeof x);
        a[i] = sampler_sample(&s1, x, NULL, 0);
        memcpy(x, base, sizeof x);
        b[i] = sampler_sample(&s2, x, NULL, 0);
        memcpy(x, base, sizeof x);
        c[i] = sampler_sample(&s3, x, NULL, 0);
    }
    int same = 0, diff = 0;
    for (int i = 0; i < 1000; i++) {
        same += a[i] == b[i];
        diff += a[i] != c[i];
    }
    CHECK(same == 1000, "same seed: %d of 1000 equal", same);
    // ~100 near-uniform tokens: two seeds agree ~1% of the time.
    CHECK(diff > 900, "different seeds: only %d of 1000 differ", diff);
    sampler_free(&s1);
    sampler_free(&s2);
    sampler_free(&s3);
}

// Draws N tokens and checks each count against N * softmax(l / T) (5 sigma).
static void check_frequencies(const float *l, size_t V, float T, int N,
                              uint64_t seed) {
    Sampler s = make(params(T, 0, 1, 0, 1, seed), V);
    int *count = calloc(V, sizeof *count);
    for (int i = 0; i < N; i++) {
        float x[16];
        memcpy(x, l, V * sizeof *x);
        count[sampler_sample(&s, x, NULL, 0)]++;
    }
    double zs = 0;
    for (size_t i = 0; i < V; i++) zs += exp(l[i] / (double)T);
    for (size_t i = 0; i < V; i++) {
        double p = exp(l[i] / (double)T) / zs;
        double sig = sqrt(N * p * (1 - p));
        CHECK(fabs(count[i] - N * p) <= 5 * sig + 1,
              "T %g id %zu: count %d, want %.1f +- %.1f", T, i, count[i], N * p,
              5 * sig);
    }
    free(count);
    sampler_free(&s);
}

static void test_frequencies(void) {
    const float l[6] = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.5f};
    check_frequencies(l, 6, 1.0f, 200000, 5);
    check_frequencies(l, 6, 0.5f, 100000, 6);
    check_frequencies(l, 6, 2.5f, 100000, 7);
}

// The fast path against the full-sort reference on GPT-2-sized logits.
typedef struct {
    float *logits, *work;
    int32_t *ids, hist[300];
    double *w;
    int configs, mismatches, pick_mismatches;
    size_t max_kept;
    size_t np;  // hist[0..np) is the prompt: the presence/frequency penalties count hist[np..300)
} Compare;

static void compare_config(Compare *cmp, int dist, SamplerParams P) {
    const size_t V = GPT2_V;
    Sampler s = make(P, V);
    sampler_set_prompt(&s, cmp->np);
    memcpy(cmp->work, cmp->logits, V * sizeof *cmp->work);
    const SamplerCand *cand;
    double z;
    size_t n = sampler_distribution(&s, cmp->work, cmp->hist, 300, &cand, &z);
    size_t m = ref_distribution_np(cmp->logits, V, &P, cmp->hist, 300, cmp->np, cmp->ids, cmp->w);
    // Same weights bit for bit up to exp's own rounding: 1e-12 relative.
    int ok = n == m;
    for (size_t i = 0; ok && i < n; i++)
        ok = cand[i].id == cmp->ids[i] &&
             fabs(cand[i].weight - cmp->w[i]) <= 1e-12 * cmp->w[i];
    if (!ok) {
        cmp->mismatches++;
        fprintf(stderr, "  dist %d T %g k %d p %g min-p %g pen %g presence %g frequency %g bias %zu: kept %zu, "
                "reference %zu\n", dist, P.temperature, P.top_k, P.top_p,
                P.min_p, P.repeat_penalty, P.presence_penalty, P.frequency_penalty, P.n_bias, n, m);
    }
    if (n > cmp->max_kept) cmp->max_kept = n;
    for (int r = 0; r < 8; r++) {
        double u = r == 0 ? 0.0 : r == 1 ? 1 - 0x1.0p-53 : test_uniform();
        memcpy(cmp->work, cmp->logits, V * sizeof *cmp->work);
        int32_t got = sampler_sample_u(&s, cmp->work, cmp->hist, 300, u);
        if (got != pick(cmp->ids, cmp->w, m, u)) cmp->pick_mismatches++;
    }
    sampler_free(&s);
    cmp->configs++;
}

// With logit_bias and the presence/frequency penalties: the ten largest
// logits banned (-100), fifty ids nudged in [-5, 5] and one raised by 8, or
// forced (+100); hist[150..300) generated, with ids repeated in it.
static void compare_adjusted(Compare *cmp, int dist) {
    const size_t V = GPT2_V;
    SamplerParams B = params(1, 0, 1, 0, 1, 0);
    for (int b = 0; b < 10; b++) {  // the b-th largest, by a scan
        long best = -1;
        for (size_t i = 0; i < V; i++) {
            int taken = 0;
            for (int j = 0; j < b; j++) taken |= B.bias[j].id == (int32_t)i;
            if (!taken && (best < 0 || cmp->logits[i] > cmp->logits[best])) best = (long)i;
        }
        B.bias[B.n_bias++] = (SamplerBias){.id = (int32_t)best, .bias = -100};
    }
    while (B.n_bias < 61) {
        int32_t id = (int32_t)(test_uniform() * V);
        int dup = 0;
        for (size_t j = 0; j < B.n_bias; j++) dup |= B.bias[j].id == id;
        if (!dup) B.bias[B.n_bias++] = (SamplerBias){.id = id, .bias = (float)(10 * test_uniform() - 5)};
    }
    B.bias[60].bias = 8;
    size_t np = cmp->np;
    cmp->np = 150;
    const float temps[] = {0.7f, 1.3f};
    const int ks[] = {0, 40};
    const float ps[] = {1.0f, 0.9f};
    for (int set = 0; set < 3; set++) {
        SamplerParams P = B;
        if (set == 1) P.n_bias = 0;  // the penalties alone
        if (set != 0) P.presence_penalty = set == 1 ? 0.7f : -1.5f, P.frequency_penalty = set == 1 ? 0.4f : 2.0f;
        if (set == 2) P.bias[60].bias = 100, P.repeat_penalty = 1.3f;
        for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
        for (int c = 0; c < 2; c++) {
            P.temperature = temps[a], P.top_k = ks[b], P.top_p = ps[c], P.min_p = c ? 0.05f : 0;
            P.seed = (uint64_t)cmp->configs;
            compare_config(cmp, dist, P);
        }
        P.temperature = 0;  // greedy
        compare_config(cmp, dist, P);
    }
    cmp->np = np;
}

static void test_fast_vs_reference(void) {
    const size_t V = GPT2_V;
    Compare cmp = {0};
    cmp.logits = malloc(V * sizeof *cmp.logits);
    cmp.work = malloc(V * sizeof *cmp.work);
    cmp.ids = malloc(V * sizeof *cmp.ids);
    cmp.w = malloc(V * sizeof *cmp.w);
    for (int i = 0; i < 300; i++)
        cmp.hist[i] = (int32_t)(test_uniform() * (i < 150 ? 2000 : V));
    for (int i = 0; i < 40; i++) cmp.hist[150 + i] = cmp.hist[i];  // repeats
    for (int i = 0; i < 30; i++) cmp.hist[250 + i] = cmp.hist[200 + i % 7];  // repeats among the generated
    cmp.np = 300;  // all of it the prompt, until the bias and penalty cases

    const float temps[] = {0.7f, 1.3f};
    const int ks[] = {0, 1, 40, 60000};
    const float ps[] = {1.0f, 0.9f, 0.5f};
    const float mps[] = {0.0f, 0.05f};
    const float pens[] = {1.0f, 1.3f};
    for (int dist = 0; dist < 3; dist++) {
        for (size_t i = 0; i < V; i++) {
            double g = test_gauss();
            if (dist == 0) cmp.logits[i] = (float)(0.5 * g);          // flat
            else if (dist == 1) cmp.logits[i] = (float)(3 * g - 80);  // GPT-2-like
            else cmp.logits[i] = (float)(round(4 * g) / 4);           // many ties
        }
        if (dist == 1)
            for (int j = 0; j < 20; j++)
                cmp.logits[(size_t)(test_uniform() * V)] = (float)(-60 + j * 0.5);
        for (int a = 0; a < 2; a++)
        for (int b = 0; b < 4; b++)
        for (int c = 0; c < 3; c++)
        for (int d = 0; d < 2; d++)
        for (int e = 0; e < 2; e++)
            compare_config(&cmp, dist, params(temps[a], ks[b], ps[c], mps[d],
                                              pens[e], (uint64_t)cmp.configs));
        // Extremes: weights that underflow to 0 (T 0.01), a nearly uniform
        // distribution (T 20), nuclei that take almost everything (p near 1)
        // or almost nothing.
        const float xt[] = {0.01f, 20.0f};
        const float xp[] = {0.999999f, 0.99f, 1e-7f};
        for (int a = 0; a < 2; a++)
        for (int c = 0; c < 3; c++)
            compare_config(&cmp, dist, params(xt[a], 0, xp[c], 0, 1,
                                              (uint64_t)cmp.configs));
        compare_adjusted(&cmp, dist);
    }
    CHECK(cmp.mismatches == 0, "%d of %d configurations kept a different set",
          cmp.mismatches, cmp.configs);
    CHECK(cmp.pick_mismatches == 0, "%d of %d draws picked a different token",
          cmp.pick_mismatches, cmp.configs * 8);
    CHECK(cmp.max_kept > 10000, "no configuration kept a large set (max %zu): "
          "the comparison did not exercise big candidate lists", cmp.max_kept);
    free(cmp.logits);
    free(cmp.work);
    free(cmp.ids);
    free(cmp.w);
}

// A grammar's mask applied to the logits: the AVX-512 code against the
// reference, bitwise, over ragged lengths (a partial last word, fewer than
// 64) and words of none, all and random bits; and the reference against
// its definition.
static void test_mask_logits(void) {
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    size_t checked = 0;
    for (size_t n = 1; n <= 300; n += n < 70 ? 1 : 37) {
        float *l = malloc(n * sizeof *l), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
        uint64_t *mask = calloc((n + 63) / 64, sizeof *mask);
        if (!l || !want || !got || !mask) abort();
        for (size_t i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            l[i] = (float)((int64_t)(rng >> 33) % 2001 - 1000) / 16.0f;
        }
        for (size_t w = 0; w < (n + 63) / 64; w++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            mask[w] = w % 3 == 0 ? rng : w % 3 == 1 ? ~0ull : 0;
        }
        sampler_mask_logits(l, mask, n, want);
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            ok &= (mask[i / 64] >> (i % 64) & 1) ? want[i] == l[i] : want[i] == -INFINITY;
        CHECK(ok, "mask_logits n=%zu: the reference against the definition", n);
        if (cpu_isa_supported(CPU_AVX512)) {
            memset(got, 0, n * sizeof *got);
            sampler_mask_logits_avx512(l, mask, n, got);
            CHECK(memcmp(got, want, n * sizeof *got) == 0, "mask_logits n=%zu: avx512 against the reference", n);
        }
        checked++;
        free(l);
        free(want);
        free(got);
        free(mask);
    }
    CHECK(checked > 70, "mask_logits: %zu lengths", checked);
}

int main(void) {
    test_rng();
    test_validate();
    test_greedy();
    test_repeat_penalty();
    test_penalties_by_hand();
    test_adjusted_vs_formula();
    test_ban_and_force();
    test_top_k();
    test_top_p();
    test_min_p();
    test_determinism();
    test_frequencies();
    test_fast_vs_reference();
    test_mask_logits();
    return check_exit("test_sampler");
}

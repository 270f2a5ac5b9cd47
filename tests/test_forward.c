/*
 * test_forward.c - the forward pass against Hugging Face transformers.
 *
 * Reference data (tests/fixtures/public_refs.json and the .f32 logits files)
 * was produced by transformers in float64 on the deterministic checkpoints
 * that tests/make_checkpoints.sh regenerates into $CKPT_DIR. Checked here:
 *   - the kernels on tiny inputs against plain double-precision formulas;
 *   - last-position logits of every public prompt, both models (all 50257);
 *   - the log-probability of every prompt token and their sum;
 *   - the 40 greedy tokens, generated through the KV cache one at a time;
 *   - decoding step by step gives the logits of one full pass;
 *   - a batch of sequences gives what each sequence gives alone;
 *   - bad input is refused before any cache changes.
 *
 * Tolerances. transformers' own float32 run differs from its float64 run by
 * about 2e-5 (124M) and 2e-6 (tiny) on these logits
 * (fp32_vs_fp64_max_abs_diff_last). We allow 1e-3 and 1e-4: a real bug
 * (a wrong scale, mask or layer order) moves logits by 1e-1 or more, while
 * summation order in BLAS moves them by ~1e-5.
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "paths.h"
#include "base/fileio.h"
#include "kernels/attention.h"
#include "kernels/cpu.h"
#include "forward.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/model.h"
#include "kernels/vecmath.h"

// ---------------------------------------------------------------------------
// kernels

static void test_kernels(void) {
    // layernorm of two rows against the formula in double
    float x[2][5] = {{1, 2, 3, 4, 5}, {-3, 0.5f, 100, 7, -0.25f}};
    float w[5] = {1, 0.5f, -1, 2, 1}, b[5] = {0, 1, 0, -1, 0.5f}, y[2][5];
    layernorm_forward(&y[0][0], &x[0][0], w, b, 2, 5, 1e-5f);
    for (int t = 0; t < 2; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < 5; i++) mean += x[t][i];
        mean /= 5;
        for (int i = 0; i < 5; i++) var += (x[t][i] - mean) * (x[t][i] - mean);
        var /= 5;
        for (int i = 0; i < 5; i++) {
            double want = (x[t][i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
            CHECK(fabs(y[t][i] - want) < 1e-5, "layernorm[%d][%d] = %g, want %g", t, i, y[t][i], want);
        }
    }
    // exp_approx against exp in double over its whole range
    double worst_rel = 0, worst_x = 0;
    for (float v = -87.0f; v <= 88.0f; v += 0.00137f) {
        double want = exp((double)v);
        double rel = fabs(exp_approx(v) - want) / want;
        if (rel > worst_rel) {
            worst_rel = rel;
            worst_x = v;
        }
    }
    CHECK(worst_rel < 2e-7, "exp_approx: relative error %.3g at x = %g", worst_rel, worst_x);
    CHECK(exp_approx(0.0f) == 1.0f, "exp_approx(0) = %.9g", exp_approx(0.0f));
    CHECK(exp_approx(-1000.0f) > 0.0f && exp_approx(-1000.0f) < 1e-37f, "exp_approx(-1000) = %g",
          exp_approx(-1000.0f));
    // gelu_new
    // gelu_new, in its tanh form, in double, over [-12, 12) and at the ends
    enum { NG = 24002 };
    static float g[NG], in[NG];
    for (int i = 0; i < NG - 2; i++) in[i] = -12.0f + (float)i * 0.001f;
    in[NG - 2] = -100.0f;
    in[NG - 1] = 100.0f;
    memcpy(g, in, sizeof g);
    activation_gelu_tanh(g, NG);
    double worst = 0;
    int worst_i = 0;
    for (int i = 0; i < NG; i++) {
        double v = in[i];
        double want = 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
        double err = fabs(g[i] - want) / (fabs(want) > 1 ? fabs(want) : 1);
        if (err > worst) {
            worst = err;
            worst_i = i;
        }
    }
    CHECK(worst < 1e-6, "gelu(%g) = %.9g, want %.9g", in[worst_i], g[worst_i],
          0.5 * in[worst_i] * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (in[worst_i] + 0.044715 * in[worst_i] * in[worst_i] * in[worst_i]))));
}

// ---------------------------------------------------------------------------
// helpers

typedef struct {
    Model model;
    ForwardState fs;
    KVCache cache;
} Runner;

static int runner_open(Runner *r, const char *name, size_t max_tokens) {
    char path[2048];
    snprintf(path, sizeof path, "%s", ckpt(name));
    GptError err = {{0}};
    memset(r, 0, sizeof *r);
    if (model_load(&r->model, path, &err) != 0) {
        CHECK(0, "load %s: %s", path, err.msg);
        return -1;
    }
    size_t ctx = (size_t)r->model.config.n_ctx;
    if (forward_state_init(&r->fs, &r->model.config, max_tokens, ctx, max_tokens, NULL, &err) != 0 ||
        kvcache_init(&r->cache, &r->model.config, DTYPE_F32, ctx, &err) != 0) {
        CHECK(0, "init %s: %s", name, err.msg);
        return -1;
    }
    return 0;
}

static void runner_close(Runner *r) {
    kvcache_free(&r->cache);
    forward_state_free(&r->fs);
    model_free(&r->model);
}

static size_t json_ids(const cJSON *arr, int32_t *out, size_t cap) {
    size_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (n < cap) out[n] = (int32_t)it->valuedouble;
        n++;
    }
    return n;
}

static int argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int)best;
}

static double log_softmax_at(const float *x, size_t n, int target) {
    double max = -INFINITY, sum = 0;
    for (size_t i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    for (size_t i = 0; i < n; i++) sum += exp(x[i] - max);
    return x[target] - max - log(sum);
}

// ---------------------------------------------------------------------------
// against transformers

static void test_reference_model(const cJSON *refs, const char *name, double logit_tol) {
    Runner r;
    if (runner_open(&r, name, 64) != 0) {
        runner_close(&r);
        return;
    }
    size_t V = (size_t)r.model.config.vocab_size;
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/public_last_logits_%s.f32", name);
    char *all_logits = NULL;
    size_t all_len = 0;
    GptError err = {{0}};
    CHECK(file_read_all(path, &all_logits, &all_len, &err) == 0, "%s", err.msg);

    const cJSON *cases = cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), name);
    CHECK(cJSON_GetArraySize(cases) == 10, "%s: %d reference prompts, want 10", name,
          cJSON_GetArraySize(cases));
    const cJSON *c;
    int index = 0;
    cJSON_ArrayForEach(c, cases) {
        int32_t ids[64];
        size_t n = json_ids(cJSON_GetObjectItem(c, "ids"), ids, 64);
        int offset = cJSON_GetObjectItem(c, "last_logits_offset")->valueint;
        kvcache_reset(&r.cache);

        // One pass over the prompt, logits at every position.
        SeqInput seq = {.tokens = ids, .n_tokens = n, .cache = &r.cache, .want = LOGITS_ALL};
        if (gpt2_forward(&r.model, &r.fs, &seq, 1, &err) != 0) {
            CHECK(0, "%s prompt %d: %s", name, index, err.msg);
            continue;
        }
        const float *last = r.fs.logits + (n - 1) * V;
        if (all_logits && all_len >= ((size_t)offset + 1) * V * 4) {
            double max_diff = 0;
            size_t worst = 0;
            for (size_t i = 0; i < V; i++) {
                float want;
                memcpy(&want, all_logits + ((size_t)offset * V + i) * 4, 4);
                double d = fabs((double)last[i] - want);
                if (d > max_diff) {
                    max_diff = d;
                    worst = i;
                }
            }
            CHECK(max_diff <= logit_tol, "%s prompt %d: last logits off by %.3g at id %zu (tolerance %g)",
                  name, index, max_diff, worst, logit_tol);
        }
        int32_t top10[10];
        json_ids(cJSON_GetObjectItem(c, "last_top10_ids"), top10, 10);
        CHECK(argmax(last, V) == top10[0], "%s prompt %d: argmax %d, want %d", name, index,
              argmax(last, V), top10[0]);

        // Log-probability of each prompt token given the ones before it.
        const cJSON *lps = cJSON_GetObjectItem(c, "prompt_token_logprobs");
        double sum = 0, worst_lp = 0;
        for (size_t t = 1; t < n; t++) {
            double lp = log_softmax_at(r.fs.logits + (t - 1) * V, V, ids[t]);
            double want = cJSON_GetArrayItem(lps, (int)(t - 1))->valuedouble;
            if (fabs(lp - want) > worst_lp) worst_lp = fabs(lp - want);
            sum += lp;
        }
        double want_sum = cJSON_GetObjectItem(c, "prompt_logprob_sum")->valuedouble;
        CHECK(worst_lp < 1e-3, "%s prompt %d: a token log-prob off by %g", name, index, worst_lp);
        CHECK(fabs(sum - want_sum) < 1e-2, "%s prompt %d: log-prob sum %.6f, want %.6f", name, index,
              sum, want_sum);

        // 40 greedy tokens through the KV cache, one token per call.
        int32_t greedy[40];
        size_t n_greedy = json_ids(cJSON_GetObjectItem(c, "greedy_ids"), greedy, 40);
        kvcache_reset(&r.cache);
        SeqInput prefill = {.tokens = ids, .n_tokens = n, .cache = &r.cache, .want = LOGITS_LAST};
        int ok = gpt2_forward(&r.model, &r.fs, &prefill, 1, &err) == 0;
        size_t same = 0;
        for (size_t g = 0; ok && g < n_greedy; g++) {
            int32_t next = (int32_t)argmax(r.fs.logits, V);
            if (next != greedy[g]) break;
            same++;
            SeqInput step = {.tokens = &next, .n_tokens = 1, .cache = &r.cache, .want = LOGITS_LAST};
            ok = gpt2_forward(&r.model, &r.fs, &step, 1, &err) == 0;
        }
        CHECK(ok && same == 40 && n_greedy == 40,
              "%s prompt %d: greedy ids match for %zu of %zu steps%s%s", name, index, same, n_greedy,
              ok ? "" : ": ", ok ? "" : err.msg);
        index++;
    }
    free(all_logits);
    runner_close(&r);
}

// ---------------------------------------------------------------------------
// the cache and batching

static void test_cache_equals_full_pass(const char *name) {
    Runner r;
    if (runner_open(&r, name, 128) != 0) {
        runner_close(&r);
        return;
    }
    size_t V = (size_t)r.model.config.vocab_size;
    // 100 tokens: more than one block of queries in the prefill (QUERY_BLOCK).
    enum { N = 100 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (int32_t)((i * 7919 + 13) % (int)V);
    GptError err = {{0}};

    // One pass over all N tokens...
    SeqInput full = {.tokens = ids, .n_tokens = N, .cache = &r.cache, .want = LOGITS_ALL};
    CHECK(gpt2_forward(&r.model, &r.fs, &full, 1, &err) == 0, "%s", err.msg);
    float *expected = malloc(N * V * sizeof(float));
    memcpy(expected, r.fs.logits, N * V * sizeof(float));
    CHECK(r.cache.n_tokens == N, "cache holds %zu positions, want %d", r.cache.n_tokens, N);

    // ...equals a prefill of 5 then a chunk of 11 then one token at a time.
    kvcache_reset(&r.cache);
    double max_diff = 0;
    size_t pos = 0;
    while (pos < N) {
        size_t len = pos == 0 ? 5 : pos == 5 ? 11 : 1;
        SeqInput s = {.tokens = ids + pos, .n_tokens = len, .cache = &r.cache, .want = LOGITS_ALL};
        if (gpt2_forward(&r.model, &r.fs, &s, 1, &err) != 0) {
            CHECK(0, "%s", err.msg);
            break;
        }
        for (size_t t = 0; t < len; t++)
            for (size_t i = 0; i < V; i++) {
                double d = fabs(r.fs.logits[t * V + i] - expected[(pos + t) * V + i]);
                if (d > max_diff) max_diff = d;
            }
        pos += len;
    }
    CHECK(max_diff < 1e-4, "%s: step-by-step logits differ from the full pass by %g", name, max_diff);

    // Two sequences in one call (one prefilling 7 tokens, one decoding a
    // single token over a 30-token cache) give what each gives alone.
    KVCache other;
    CHECK(kvcache_init(&other, &r.model.config, DTYPE_F32, 128, &err) == 0, "%s", err.msg);
    kvcache_reset(&r.cache);
    SeqInput a0 = {.tokens = ids, .n_tokens = 30, .cache = &r.cache, .want = LOGITS_NONE};
    CHECK(gpt2_forward(&r.model, &r.fs, &a0, 1, &err) == 0, "%s", err.msg);
    SeqInput batch[2] = {
        {.tokens = ids + 30, .n_tokens = 1, .cache = &r.cache, .want = LOGITS_LAST},
        {.tokens = ids + 10, .n_tokens = 7, .cache = &other, .want = LOGITS_ALL},
    };
    CHECK(gpt2_forward(&r.model, &r.fs, batch, 2, &err) == 0, "%s", err.msg);
    CHECK(batch[0].logits_row == 0 && batch[1].logits_row == 1, "logit rows %zu, %zu",
          batch[0].logits_row, batch[1].logits_row);
    double d_a = 0;
    for (size_t i = 0; i < V; i++) {
        double d = fabs(r.fs.logits[i] - expected[30 * V + i]);
        if (d > d_a) d_a = d;
    }
    CHECK(d_a < 1e-4, "batched decode differs from the single pass by %g", d_a);
    float *b_logits = malloc(7 * V * sizeof(float));
    memcpy(b_logits, r.fs.logits + V, 7 * V * sizeof(float));
    kvcache_reset(&other);
    SeqInput b_alone = {.tokens = ids + 10, .n_tokens = 7, .cache = &other, .want = LOGITS_ALL};
    CHECK(gpt2_forward(&r.model, &r.fs, &b_alone, 1, &err) == 0, "%s", err.msg);
    double d_b = 0;
    for (size_t i = 0; i < 7 * V; i++) {
        double d = fabs(r.fs.logits[i] - b_logits[i]);
        if (d > d_b) d_b = d;
    }
    CHECK(d_b < 1e-4, "batched prefill differs from the prefill alone by %g", d_b);

    // Refusals leave the caches as they were.
    size_t held = r.cache.n_tokens;
    int32_t bad = (int32_t)V;
    SeqInput s_bad = {.tokens = &bad, .n_tokens = 1, .cache = &r.cache, .want = LOGITS_LAST};
    CHECK(gpt2_forward(&r.model, &r.fs, &s_bad, 1, &err) != 0 && strstr(err.msg, "outside the vocabulary"),
          "token id V must be refused: %s", err.msg);
    KVCache small;
    CHECK(kvcache_init(&small, &r.model.config, DTYPE_F32, 4, &err) == 0, "%s", err.msg);
    SeqInput s_big = {.tokens = ids, .n_tokens = 5, .cache = &small, .want = LOGITS_LAST};
    CHECK(gpt2_forward(&r.model, &r.fs, &s_big, 1, &err) != 0 && strstr(err.msg, "exceed"),
          "5 tokens into a 4-position cache must be refused: %s", err.msg);
    SeqInput s_many = {.tokens = ids, .n_tokens = 99, .cache = &other, .want = LOGITS_ALL};
    other.n_tokens = 0;
    SeqInput pair[2] = {s_many, {.tokens = ids, .n_tokens = 30, .cache = &r.cache, .want = LOGITS_NONE}};
    CHECK(gpt2_forward(&r.model, &r.fs, pair, 2, &err) != 0, "129 tokens into a 128-token scratch must be refused");
    CHECK(r.cache.n_tokens == held && small.n_tokens == 0 && other.n_tokens == 0,
          "a refused call changed a cache");
    kvcache_free(&small);
    CHECK(kvcache_init(&small, &r.model.config, DTYPE_F32, (size_t)r.model.config.n_ctx + 1, &err) != 0,
          "a cache beyond the context must be refused");
    kvcache_free(&other);
    free(b_logits);
    free(expected);
    runner_close(&r);
}

// Every vector version of attention_query gives the reference's bits, for
// any number of keys (whole blocks of 16 and ragged tails), F32 and F16
// caches, and a decode-like query after a prefill-like one.
static void test_attention_isas(void) {
    GPT2Config cfg = {.n_layer = 2, .n_head = 3, .n_embd = 3 * 64, .n_ctx = 300, .vocab_size = 10, .ln_eps = 1e-5f};
    GptError err = {{0}};
    uint64_t st = 12345;
    for (int dt = 0; dt < 2; dt++) {
        KVCache c;
        CHECK(kvcache_init(&c, &cfg, dt ? DTYPE_F16 : DTYPE_F32, 300, &err) == 0, "%s", err.msg);
        float k[64], v[64], q[64], want[64], got[64], scores[304];
        for (size_t pos = 0; pos < 300; pos++)
            for (size_t l = 0; l < 2; l++)
                for (size_t h = 0; h < 3; h++) {
                    for (int d = 0; d < 64; d++) {
                        st = st * 6364136223846793005ull + 1442695040888963407ull;
                        k[d] = (float)((st >> 40) & 0xFFFF) / 8192.0f - 4.0f;
                        v[d] = (float)((st >> 20) & 0xFFFF) / 32768.0f - 1.0f;
                    }
                    kvcache_store(&c, l, h, pos, k, v);
                }
        for (int d = 0; d < 64; d++) q[d] = 0.05f * (float)(d % 11) - 0.2f;
        int mismatches = 0;
        const size_t counts[] = {1, 2, 15, 16, 17, 31, 33, 64, 65, 100, 255, 300};
        for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
            attention_query_reference(want, q, &c, 1, 2, counts[i], 0.125f, scores);
            // every vector version this CPU runs (the scalar one is the reference)
            for (int isa = CPU_AVX2; isa < CPU_ISA_COUNT; isa++) {
                if (!cpu_isa_supported((CpuIsa)isa)) continue;
                attention_query((CpuIsa)isa, got, q, &c, 1, 2, counts[i], 0.125f, scores);
                if (memcmp(got, want, sizeof got) != 0) {
                    if (!mismatches++)
                        CHECK(0, "%s cache, %zu keys, isa %d: out[0] %.9g, reference %.9g", dt ? "F16" : "F32",
                              counts[i], isa, got[0], want[0]);
                }
            }
        }
        CHECK(mismatches == 0, "%s cache: %d attention results differ from the reference", dt ? "F16" : "F32",
              mismatches);
        kvcache_free(&c);
    }
}

// attention_queries (a block of consecutive queries sharing the loads of
// keys and values) gives, for every query, attention_query_reference's
// bits: every ISA, F32 and F16 caches, head sizes of one and of several
// groups of dimensions (64, 80), blocks of 1 .. ATTENTION_QUERY_BLOCK
// queries whose key counts start at 1, odd counts, block edges and run to
// the cache's end.
static void test_attention_query_blocks(void) {
    GptError err = {{0}};
    uint64_t st = 777;
    const size_t head_sizes[] = {64, 80};
    for (size_t hs_i = 0; hs_i < 2; hs_i++)
        for (int dt = 0; dt < 2; dt++) {
            size_t HS = head_sizes[hs_i], N = 300;
            GPT2Config cfg = {.n_layer = 2, .n_head = 3, .n_embd = (int)(3 * HS), .n_ctx = (int)N, .vocab_size = 10,
                              .ln_eps = 1e-5f, .attn_by_layer = hs_i == 1};
            // GPT-2's 1/sqrt(HS), and layer 1's of scale_attn_by_inverse_layer_idx
            float scale = gpt2_attn_scale(&cfg, 1);
            KVCache c;
            CHECK(kvcache_init(&c, &cfg, dt ? DTYPE_F16 : DTYPE_F32, N, &err) == 0, "%s", err.msg);
            float k[80], v[80];
            for (size_t pos = 0; pos < N; pos++)
                for (size_t l = 0; l < 2; l++)
                    for (size_t h = 0; h < 3; h++) {
                        for (size_t d = 0; d < HS; d++) {
                            st = st * 6364136223846793005ull + 1442695040888963407ull;
                            k[d] = (float)((st >> 40) & 0xFFFF) / 8192.0f - 4.0f;
                            v[d] = (float)((st >> 20) & 0xFFFF) / 32768.0f - 1.0f;
                        }
                        kvcache_store(&c, l, h, pos, k, v);
                    }
            // the block's queries a row of 3 HS + 5 floats apart, the outputs 2 HS + 3
            enum { QB = ATTENTION_QUERY_BLOCK };
            size_t q_stride = 3 * HS + 5, out_stride = 2 * HS + 3;
            float *q = malloc(QB * q_stride * sizeof(float)), *got = malloc(QB * out_stride * sizeof(float));
            float want[80], *scores = malloc(QB * 304 * sizeof(float));
            for (size_t i = 0; i < QB * q_stride; i++) q[i] = 0.05f * (float)(i % 13) - 0.3f;
            int mismatches = 0;
            const size_t counts[] = {1, 2, 3, 5, 14, 15, 16, 17, 31, 33, 64, 65, 100, 254, 297, 300};
            for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
                for (size_t nq = 1; nq <= QB && counts[ci] + nq - 1 <= N; nq++)
                    for (int isa = CPU_SCALAR; isa < CPU_ISA_COUNT; isa++) {
                        if (!cpu_isa_supported((CpuIsa)isa)) continue;
                        attention_queries((CpuIsa)isa, got, out_stride, q, q_stride, nq, &c, 1, 2, counts[ci], scale, scores);
                        for (size_t i = 0; i < nq; i++) {
                            attention_query_reference(want, q + i * q_stride, &c, 1, 2, counts[ci] + i, scale, scores);
                            if (memcmp(got + i * out_stride, want, HS * sizeof(float)) != 0 && !mismatches++)
                                CHECK(0, "HS %zu, %s cache, isa %d, %zu queries from %zu keys: query %zu out[0] %.9g, "
                                         "reference %.9g",
                                      HS, dt ? "F16" : "F32", isa, nq, counts[ci], i, got[i * out_stride], want[0]);
                        }
                    }
            CHECK(mismatches == 0, "HS %zu, %s cache: %d blocks of queries differ from the reference", HS,
                  dt ? "F16" : "F32", mismatches);
            free(q);
            free(got);
            free(scores);
            kvcache_free(&c);
        }
}

// Batch invariance of one model in one weight type (--dtype's names) and
// KV type: a sequence's logits are the same bits alone and beside up to 15
// others, prefilled in one piece or in chunks of 7 beside them (its prompt's
// last logits too), then decoded in batches that grow and shrink.
static void check_batch_invariance(const char *model, const char *path, const char *weights, DType kvt,
                                   ThreadPool *pool) {
    GptError err = {{0}};
    WeightOptions wo;
    Model m;
    CHECK(weight_options_from_name(weights, &wo) == 0, "%s: not a weight type", weights);
    if (model_load_with(&m, path, &wo, &err) != 0) {
        CHECK(0, "%s %s: %s", model, weights, err.msg);
        return;
    }
    if (wo.q4_pure)  // every matrix Q4, the output layer too (the mix keeps it in Q6)
        CHECK(m.weights.wte.dtype == DTYPE_Q4 && m.weights.layers[0].qkv_w.dtype == DTYPE_Q4,
              "%s %s: wte %s, h.0 c_attn %s", model, weights, dtype_name(m.weights.wte.dtype),
              dtype_name(m.weights.layers[0].qkv_w.dtype));
    size_t V = (size_t)m.config.vocab_size;
    enum { B = 16, P = 20, STEPS = 3 };
    ForwardState fs;
    KVCache caches[B];
    int32_t prompt[B][P], next[B];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < P; i++) prompt[b][i] = (int32_t)((b * 7919 + i * 104729 + 13) % 50257);
    float *alone = malloc((STEPS + 1) * V * sizeof *alone);
    CHECK(forward_state_init(&fs, &m.config, B * P, 64, B, pool, &err) == 0, "%s", err.msg);
    // sequence 0 alone: its prompt in one piece, then STEPS tokens
    CHECK(kvcache_init(&caches[0], &m.config, kvt, 64, &err) == 0, "%s", err.msg);
    SeqInput s0 = {.tokens = prompt[0], .n_tokens = P, .cache = &caches[0], .want = LOGITS_LAST};
    CHECK(gpt2_forward(&m, &fs, &s0, 1, &err) == 0, "%s", err.msg);
    memcpy(alone, fs.logits + s0.logits_row * V, V * sizeof(float));
    for (int st = 0; st < STEPS; st++) {
        next[0] = (int32_t)(1000 + st);
        SeqInput d = {.tokens = &next[0], .n_tokens = 1, .cache = &caches[0], .want = LOGITS_LAST};
        CHECK(gpt2_forward(&m, &fs, &d, 1, &err) == 0, "%s", err.msg);
        memcpy(alone + (st + 1) * V, fs.logits + d.logits_row * V, V * sizeof(float));
    }
    kvcache_free(&caches[0]);
    // the same among 15 others: prompts in chunks of 7 beside them
    for (int b = 0; b < B; b++) CHECK(kvcache_init(&caches[b], &m.config, kvt, 64, &err) == 0, "%s", err.msg);
    int prompt_same = 1;
    for (int at = 0; at < P; at += 7) {
        SeqInput in[B];
        for (int b = 0; b < B; b++)
            in[b] = (SeqInput){.tokens = prompt[b] + at, .n_tokens = (size_t)(P - at < 7 ? P - at : 7),
                               .cache = &caches[b], .want = LOGITS_LAST};
        CHECK(gpt2_forward(&m, &fs, in, B, &err) == 0, "%s", err.msg);
        if (at + 7 >= P) prompt_same &= memcmp(fs.logits + in[0].logits_row * V, alone, V * sizeof(float)) == 0;
    }
    CHECK(prompt_same, "%s, %s weights, %s KV: the prompt's logits beside 15 others differ from alone", model,
          weights, dtype_name(kvt));
    for (int st = 0; st < STEPS; st++) {
        SeqInput in[B];
        for (int b = 0; b < B; b++) {
            next[b] = b ? (int32_t)(2000 + 31 * b + st) : (int32_t)(1000 + st);
            in[b] = (SeqInput){.tokens = &next[b], .n_tokens = 1, .cache = &caches[b], .want = LOGITS_LAST};
        }
        // the batch grows and shrinks: 16, then 5, then 9 sequences
        size_t n = st == 0 ? B : st == 1 ? 5 : 9;
        CHECK(gpt2_forward(&m, &fs, in, n, &err) == 0, "%s", err.msg);
        CHECK(memcmp(fs.logits + in[0].logits_row * V, alone + (st + 1) * V, V * sizeof(float)) == 0,
              "%s, %s weights, %s KV: step %d's logits among %zu sequences differ from alone", model, weights,
              dtype_name(kvt), st, n);
    }
    for (int b = 0; b < B; b++) kvcache_free(&caches[b]);
    forward_state_free(&fs);
    free(alone);
    model_free(&m);
}

// Every weight type with both KV types on tiny, on 2 threads; q4-pure and
// q4 (Q4 and Q6 products over the whole vocabulary) also on the
// 124M-shaped checkpoint.
static void test_batch_invariance(void) {
    static const char *const weights[] = {"f32", "f16", "bf16", "q8", "q6", "q4", "q4-pure"};
    GptError err = {{0}};
    ThreadPool *pool = threadpool_create(2, &err);
    for (size_t w = 0; w < sizeof weights / sizeof *weights; w++)
        for (int kv = 0; kv < 2; kv++)
            check_batch_invariance("tiny", ckpt("tiny"), weights[w], kv ? DTYPE_F16 : DTYPE_F32, pool);
    check_batch_invariance("gpt2-124M-shaped", ckpt("gpt2-124M-shaped"), "q4-pure", DTYPE_F32, pool);
    check_batch_invariance("gpt2-124M-shaped", ckpt("gpt2-124M-shaped"), "q4", DTYPE_F32, pool);
    threadpool_free(pool);
}

static void test_kv_bytes(void) {
    GPT2Config gpt2 = {.n_layer = 12, .n_head = 12, .n_embd = 768, .n_ctx = 1024, .vocab_size = 50257};
    CHECK(kvcache_bytes_per_token(&gpt2, DTYPE_F32) == 73728, "124M: %zu B/token, want 2*12*12*64*4 = 73728",
          kvcache_bytes_per_token(&gpt2, DTYPE_F32));
    CHECK(kvcache_bytes_per_token(&gpt2, DTYPE_F32) * 1024 == 72u * 1024 * 1024, "124M full context must be 72 MiB");
    GPT2Config xl = {.n_layer = 48, .n_head = 25, .n_embd = 1600, .n_ctx = 1024, .vocab_size = 50257};
    CHECK(kvcache_bytes_per_token(&xl, DTYPE_F32) == 2u * 48 * 1600 * 4, "XL: %zu B/token", kvcache_bytes_per_token(&xl, DTYPE_F32));
    GptError err = {{0}};
    KVCache c;
    CHECK(kvcache_init(&c, &gpt2, DTYPE_F32, 100, &err) == 0, "%s", err.msg);
    CHECK(kvcache_bytes_allocated(&c) == 112 * 73728, "100 positions allocate %zu B, want 7 blocks of 16",
          kvcache_bytes_allocated(&c));
    kvcache_free(&c);
    kvcache_free(&c);  // idempotent
}

int main(void) {
    test_kernels();
    test_kv_bytes();
    test_attention_isas();
    test_attention_query_blocks();
    test_batch_invariance();
    char *text = NULL;
    size_t len;
    GptError err = {{0}};
    if (file_read_all("tests/fixtures/public_refs.json", &text, &len, &err) != 0) {
        CHECK(0, "%s", err.msg);
        return check_exit("test_forward");
    }
    cJSON *refs = cJSON_Parse(text);
    CHECK(refs != NULL, "tests/fixtures/public_refs.json does not parse");
    test_reference_model(refs, "tiny", 1e-4);
    test_reference_model(refs, "gpt2-124M-shaped", 1e-3);
    test_cache_equals_full_pass("tiny");
    test_cache_equals_full_pass("gpt2-124M-shaped");
    cJSON_Delete(refs);
    free(text);
    return check_exit("test_forward");
}

/*
 * bench_model.c - how fast the forward pass is, and how fast it could be,
 * measured in one run (the machines are shared and noisy: every speed is
 * reported beside a bound measured in the same run, and the variants are
 * measured in interleaved rounds, best of the rounds).
 *
 *   bench_model MODEL_DIR
 *
 * BENCH_DTYPES (environment), e.g. "q8,q4,q4-pure": bench only these dtypes
 * (--dtype's names, comma separated, any case; the sgemm bound still uses
 * the F32 weights, and the long-context line runs only with F32 among them).
 * Unset: all of them.
 *
 * Bounds:
 *   - memory read bandwidth: a plain read loop over 1 GiB (far past any
 *     cache), 1 and 2 threads. Decode of one sequence reads every weight
 *     once per token, and the KV cache of its context, so its bound is
 *     bandwidth / (weight bytes + KV bytes) per token, for each dtype;
 *   - OpenBLAS sgemm doing a prefill's products (every layer's four, the
 *     model's own weights, T = 512 rows), for prefill: sgemm's rate / 2 x
 *     (matmul parameters) FLOP per token. Measured in 3 rounds interleaved
 *     with our prefills, best of each.
 * Ours, for each weight dtype (f32, f16, bf16, q8, q6, q4, q4-pure, converted at
 * load), 1 and 2 threads:
 *   - decode of one sequence: 128 tokens after a 64-token prompt;
 *   - aggregate decode of B = 1, 2, 4, 8, 16 sequences stepping together
 *     (one forward call per step: each weight read serves B tokens);
 *   - prefill of 512 tokens (interleaved with the sgemm passes above);
 * and decode at a 900-token context with an F32 and an F16 KV cache; and
 * each of a layer's four F32 products alone against sgemm on its shape.
 * Taken apart, for F32: a token of the prefill (its products at the rates
 * measured, and the rest), and a step of 16 sequences decoding together
 * (decode_parts: the layers' products, the output layer, attention, the
 * rest, sgemm on the same 16-row products, and the sampling the engine
 * does after the step), each with the bound that counts what is not a
 * product.
 * Prints numbers; asserts nothing about time.
 */
#include <cblas.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "forward.h"
#include "kernels/attention.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "sampler.h"
#include "base/threads.h"
#include "kernels/tune.h"

#include "bench_util.h"

char *openblas_get_corename(void);

static void die(const GptError *err) {
    fprintf(stderr, "bench: %s\n", err->msg);
    exit(1);
}

// OpenBLAS sgemm doing a prefill's products: every layer's four, in the
// model's order, T rows each (weights (N, K), as gpt holds them), one pass.
// The same shapes and the same weights a prefill of T tokens reads, so
// that neither side finds the other's weights in a cache it did not fill.
typedef struct {
    const Model *m;
    size_t T;
    float *x, *y;
} SgemmPass;

static void sgemm_pass_init(SgemmPass *p, const Model *m, size_t T) {
    size_t C = (size_t)m->config.n_embd;
    p->m = m;
    p->T = T;
    p->x = aligned_alloc(64, T * 4 * C * sizeof(float));
    p->y = aligned_alloc(64, T * 4 * C * sizeof(float));
    for (size_t i = 0; i < T * 4 * C; i++) p->x[i] = 0.001f * (float)(i % 97);
    memset(p->y, 0, T * 4 * C * sizeof(float));
}

// GFLOP/s of one pass.
static double sgemm_pass_gflops(const SgemmPass *p) {
    double flops = 0, t0 = now_seconds();
    for (int l = 0; l < p->m->config.n_layer; l++) {
        const GPT2Layer *lw = &p->m->weights.layers[l];
        const Weight *w[4] = {&lw->qkv_w, &lw->attn_proj_w, &lw->fc_w, &lw->fc_proj_w};
        for (int s = 0; s < 4; s++) {
            int K = (int)w[s]->n_in, N = (int)w[s]->n_out;
            // y(T,N) = x(T,K) @ W(N,K)^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p->T, N, K, 1.0f, p->x, K, w[s]->data, K, 0.0f,
                        p->y, N);
            flops += 2.0 * (double)p->T * K * N;
        }
    }
    return flops / (now_seconds() - t0) / 1e9;
}

static void sgemm_pass_free(SgemmPass *p) {
    free(p->x);
    free(p->y);
}

// Each of a layer's four products alone, ours against sgemm on the same
// shape and weights (layer 0's, F32, T rows), interleaved, best of 3 each:
// where the prefill falls short of the bound, which shape it is (on a new
// CPU, the one whose tiles want changing). GFLOP/s into ours[4] (plan's
// variants), dflt[4] (the default variant), blas[4].
static void products_by_shape(const Model *m, ThreadPool *pool, size_t T, const MatmulPlan *plan, double ours[4],
                              double dflt[4], double blas[4]) {
    const GPT2Layer *lw = &m->weights.layers[0];
    const Weight *w[4] = {&lw->qkv_w, &lw->attn_proj_w, &lw->fc_w, &lw->fc_proj_w};
    size_t C = (size_t)m->config.n_embd, n_threads = (size_t)threadpool_size(pool);
    size_t per_thread = matmul_scratch_floats(MATMUL_GROUP, 4 * C);
    float *scratch = aligned_alloc(64, n_threads * per_thread * sizeof(float));
    float *x = aligned_alloc(64, T * 4 * C * sizeof(float)), *y = aligned_alloc(64, T * 4 * C * sizeof(float));
    for (size_t i = 0; i < T * 4 * C; i++) x[i] = 0.001f * (float)(i % 97);
    const MatmulContext ctx = {pool, scratch, per_thread, cpu_best_isa(), plan},
                        ctx0 = {pool, scratch, per_thread, cpu_best_isa(), NULL};
    for (int s = 0; s < 4; s++) {
        size_t K = w[s]->n_in, N = w[s]->n_out;
        double flops = 2.0 * (double)T * (double)K * (double)N;
        ours[s] = dflt[s] = blas[s] = 0;
        matmul(y, x, w[s], NULL, T, 0, &ctx);  // untimed: the weights into the caches, as for sgemm
        for (int round = 0; round < 5; round++) {
            double t0 = now_seconds();
            matmul(y, x, w[s], NULL, T, 0, &ctx);
            double t1 = now_seconds();
            // y(T,N) = x(T,K) @ W(N,K)^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)N, (int)K, 1.0f, x, (int)K,
                        w[s]->data, (int)K, 0.0f, y, (int)N);
            double t2 = now_seconds();
            matmul(y, x, w[s], NULL, T, 0, &ctx0);
            double t3 = now_seconds();
            if (flops / (t1 - t0) / 1e9 > ours[s]) ours[s] = flops / (t1 - t0) / 1e9;
            if (flops / (t2 - t1) / 1e9 > blas[s]) blas[s] = flops / (t2 - t1) / 1e9;
            if (flops / (t3 - t2) / 1e9 > dflt[s]) dflt[s] = flops / (t3 - t2) / 1e9;
        }
    }
    free(scratch), free(x), free(y);
}

// ---------------------------------------------------------------------------
// our forward pass

static int32_t token_at(size_t i, size_t salt) { return (int32_t)((i * 2654435761u + salt * 7919u) % 50000); }

// Decode tok/s of B sequences stepping together: prompts of `prompt` tokens,
// then `steps` steps of one token each. kv: the caches' element type.
// plan: the matmul variants (tune.h), NULL for the default ones.
static double decode_tok_s(const Model *m, ThreadPool *pool, size_t B, size_t prompt, size_t steps, DType kv,
                           const MatmulPlan *plan) {
    GptError err = {{0}};
    size_t cap = prompt + steps;
    KVCache *caches = calloc(B, sizeof *caches);
    SeqInput *seqs = calloc(B, sizeof *seqs);
    int32_t *ids = malloc(prompt * sizeof *ids), *next = malloc(B * sizeof *next);
    ForwardState fs;
    if (forward_state_init(&fs, &m->config, B > prompt ? B : prompt, cap, B, pool, &err) != 0) die(&err);
    if (plan) fs.plan = *plan;
    for (size_t b = 0; b < B; b++) {
        if (kvcache_init(&caches[b], &m->config, kv, cap, &err) != 0) die(&err);
        for (size_t i = 0; i < prompt; i++) ids[i] = token_at(i, b);
        SeqInput p = {.tokens = ids, .n_tokens = prompt, .cache = &caches[b], .want = LOGITS_LAST};
        if (gpt2_forward(m, &fs, &p, 1, &err) != 0) die(&err);
    }
    double t0 = now_seconds();
    for (size_t s = 0; s < steps; s++) {
        for (size_t b = 0; b < B; b++) {
            next[b] = token_at(prompt + s, b);
            seqs[b] = (SeqInput){.tokens = &next[b], .n_tokens = 1, .cache = &caches[b], .want = LOGITS_LAST};
        }
        if (gpt2_forward(m, &fs, seqs, B, &err) != 0) die(&err);
    }
    double tok_s = (double)(B * steps) / (now_seconds() - t0);
    for (size_t b = 0; b < B; b++) kvcache_free(&caches[b]);
    forward_state_free(&fs);
    free(caches);
    free(seqs);
    free(ids);
    free(next);
    return tok_s;
}

// Where a step of B sequences decoding together goes: the step itself
// (gpt2_forward, one new token each, every sequence at a context of CTX
// positions) and its parts alone, through the same code the step runs on
// the same weights and the same threads (the products with the step's
// plan), interleaved in rounds, best of the rounds for each:
//   - products: the 12 layers' four products of B rows (matmul, fc's GELU
//     made inside it by matmul_then, as the step does);
//   - output: the logits, B rows x V against the output layer (V, C);
//   - attention: each (sequence, head) of each layer over its cache
//     (attention_queries, one part a thread, as the step deals them out);
//   - the rest: the step less those three (embedding, layer norms, the
//     keys and values into the caches, the finiteness checks, the threads'
//     joins);
//   - sgemm, the same products and output layer through OpenBLAS (B rows,
//     the model's weights, as sgemm_pass does for the prefill);
//   - sampling: the engine's step after the forward (engine.c), one
//     sampler_sample per sequence on the main thread with gpt's default
//     parameters (temperature 1, no filter), over the step's logits. The
//     aggregate decode above (decode_tok_s) does not sample: its step is
//     the forward alone, and so is the step here.
// Seconds per step, each the best of `rounds`.
typedef struct {
    double step, products, output, attention, sgemm, sgemm_output, sample;
} StepParts;

typedef struct {
    const SeqInput *seqs;
    size_t n_seqs, layer, C, NH, n_keys, scores_stride;
    float *out, *scores;
    const float *qkv;
    float scale;
    CpuIsa isa;
} DecodeAttention;

// As forward.c's attention_part for one new token a sequence: items
// (sequence, head) dealt out one by one to the parts.
static void decode_attention_part(void *arg, int part, int n_parts, int thread) {
    const DecodeAttention *j = arg;
    size_t HS = j->C / j->NH;
    float *scores = j->scores + (size_t)thread * j->scores_stride;
    for (size_t i = 0, item = 0; i < j->n_seqs; i++)
        for (size_t h = 0; h < j->NH; h++, item++) {
            if (item % (size_t)n_parts != (size_t)part) continue;
            attention_queries(j->isa, j->out + i * j->C + h * HS, j->C, j->qkv + i * 3 * j->C + h * HS, 3 * j->C, 1,
                              j->seqs[i].cache, j->layer, h, j->n_keys, j->scale, scores);
        }
}

static double min_time(double best, double t) { return best == 0 || t < best ? t : best; }

static void decode_parts(const Model *m, ThreadPool *pool, size_t B, size_t ctx, const MatmulPlan *plan, int rounds,
                         StepParts *best) {
    GptError err = {{0}};
    const GPT2Config *cfg = &m->config;
    const GPT2Weights *w = &m->weights;
    size_t C = (size_t)cfg->n_embd, NH = (size_t)cfg->n_head, L = (size_t)cfg->n_layer, V = (size_t)cfg->vocab_size;
    size_t F = gpt2_mlp_width(cfg);
    KVCache *caches = calloc(B, sizeof *caches);
    SeqInput *seqs = calloc(B, sizeof *seqs);
    int32_t *ids = malloc(ctx * sizeof *ids), *next = malloc(B * sizeof *next);
    ForwardState fs;
    if (forward_state_init(&fs, &cfg[0], B > ctx ? B : ctx, ctx, B, pool, &err) != 0) die(&err);
    if (plan) fs.plan = *plan;
    for (size_t b = 0; b < B; b++) {
        if (kvcache_init(&caches[b], cfg, DTYPE_F32, ctx, &err) != 0) die(&err);
        for (size_t i = 0; i < ctx; i++) ids[i] = token_at(i, b);
        SeqInput p = {.tokens = ids, .n_tokens = ctx, .cache = &caches[b], .want = LOGITS_LAST};
        if (gpt2_forward(m, &fs, &p, 1, &err) != 0) die(&err);
    }
    // the products' own activations (benign values) and outputs
    float *in = aligned_alloc(64, round_up(B * F * sizeof(float), 64));
    float *out = aligned_alloc(64, round_up(B * F * sizeof(float), 64));
    float *attn = aligned_alloc(64, round_up(B * C * sizeof(float), 64));
    float *logits = aligned_alloc(64, round_up(B * V * sizeof(float), 64));
    float *copy = malloc(B * V * sizeof *copy);
    for (size_t i = 0; i < B * F; i++) in[i] = 0.001f * (float)(i % 97);
    const MatmulContext mm = {pool, fs.matmul_scratch, fs.matmul_scratch_floats, fs.isa, &fs.plan};
    const ActivationFn act = activation_kernel(cfg->activation);
    const Weight *wout = gpt2_output_weight(w, cfg);
    SamplerParams sp = {.temperature = 1.0f, .top_p = 1.0f, .repeat_penalty = 1.0f, .seed = 1};
    Sampler *samplers = calloc(B, sizeof *samplers);
    SamplerScratch shared;
    if (sampler_scratch_init(&shared, V, &err) != 0) die(&err);
    for (size_t b = 0; b < B; b++)
        if (sampler_init_shared(&samplers[b], &sp, &shared, &err) != 0) die(&err);
    *best = (StepParts){0};
    for (int round = 0; round < rounds; round++) {
        // the step: every sequence back to ctx - 1 positions, one token each
        for (size_t b = 0; b < B; b++) {
            caches[b].n_tokens = ctx - 1;
            next[b] = token_at(ctx + (size_t)round, b);
            seqs[b] = (SeqInput){.tokens = &next[b], .n_tokens = 1, .cache = &caches[b], .want = LOGITS_LAST};
        }
        double t0 = now_seconds();
        if (gpt2_forward(m, &fs, seqs, B, &err) != 0) die(&err);
        double t1 = now_seconds();
        best->step = min_time(best->step, t1 - t0);
        memcpy(copy, fs.logits, B * V * sizeof *copy);
        // the products
        t0 = now_seconds();
        for (size_t l = 0; l < L; l++) {
            const GPT2Layer *lw = &w->layers[l];
            matmul(out, in, &lw->qkv_w, lw->qkv_b, B, 0, &mm);
            matmul(out, in, &lw->attn_proj_w, lw->attn_proj_b, B, 1, &mm);
            matmul_then(out, in, &lw->fc_w, lw->fc_b, B, 0, &mm, act);
            matmul(out, in, &lw->fc_proj_w, lw->fc_proj_b, B, 1, &mm);
        }
        t1 = now_seconds();
        best->products = min_time(best->products, t1 - t0);
        // the output layer
        t0 = now_seconds();
        matmul(logits, in, wout, NULL, B, 0, &mm);
        t1 = now_seconds();
        best->output = min_time(best->output, t1 - t0);
        // attention, over the caches the step has just filled (ctx positions)
        t0 = now_seconds();
        for (size_t l = 0; l < L; l++) {
            DecodeAttention job = {seqs, B, l, C, NH, ctx, ATTENTION_QUERY_BLOCK * round_up(fs.max_ctx, 16),
                                   attn, fs.scores, fs.qkv, gpt2_attn_scale(cfg, l), fs.isa};
            threadpool_run_parts(pool, decode_attention_part, &job, threadpool_size(pool));
        }
        t1 = now_seconds();
        best->attention = min_time(best->attention, t1 - t0);
        // sampling, as the engine's step does after the forward
        t0 = now_seconds();
        for (size_t b = 0; b < B; b++)
            if (sampler_sample(&samplers[b], copy + b * V, &next[b], 1) < 0) {
                fprintf(stderr, "bench: the sampler found no usable logit\n");
                exit(1);
            }
        t1 = now_seconds();
        best->sample = min_time(best->sample, t1 - t0);
        // sgemm on the same products and output layer
        t0 = now_seconds();
        for (size_t l = 0; l < L; l++) {
            const GPT2Layer *lw = &w->layers[l];
            const Weight *ws[4] = {&lw->qkv_w, &lw->attn_proj_w, &lw->fc_w, &lw->fc_proj_w};
            for (int s = 0; s < 4; s++) {
                int K = (int)ws[s]->n_in, N = (int)ws[s]->n_out;
                // out(B,N) = in(B,K) @ W(N,K)^T
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, N, K, 1.0f, in, K, ws[s]->data, K,
                            0.0f, out, N);
            }
        }
        t1 = now_seconds();
        // logits(B,V) = in(B,C) @ out(V,C)^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)V, (int)C, 1.0f, in, (int)C, wout->data,
                    (int)C, 0.0f, logits, (int)V);
        double t2 = now_seconds();
        best->sgemm = min_time(best->sgemm, t1 - t0);
        best->sgemm_output = min_time(best->sgemm_output, t2 - t1);
    }
    for (size_t b = 0; b < B; b++) {
        sampler_free(&samplers[b]);
        kvcache_free(&caches[b]);
    }
    sampler_scratch_free(&shared);
    forward_state_free(&fs);
    free(samplers), free(caches), free(seqs), free(ids), free(next);
    free(in), free(out), free(attn), free(logits), free(copy);
}

// A prefill of T tokens into an empty cache, its state kept between runs
// (the first run, untimed, touches the scratch and the cache).
typedef struct {
    const Model *m;
    size_t T;
    KVCache cache;
    ForwardState fs;
    int32_t *ids;
} PrefillRun;

static void prefill_run(PrefillRun *p) {
    GptError err = {{0}};
    kvcache_reset(&p->cache);
    SeqInput seq = {.tokens = p->ids, .n_tokens = p->T, .cache = &p->cache, .want = LOGITS_LAST};
    if (gpt2_forward(p->m, &p->fs, &seq, 1, &err) != 0) die(&err);
}

static void prefill_init(PrefillRun *p, const Model *m, ThreadPool *pool, size_t T, const MatmulPlan *plan) {
    GptError err = {{0}};
    p->m = m;
    p->T = T;
    if (kvcache_init(&p->cache, &m->config, DTYPE_F32, T, &err) != 0 ||
        forward_state_init(&p->fs, &m->config, T, T, 1, pool, &err) != 0)
        die(&err);
    if (plan) p->fs.plan = *plan;
    p->ids = malloc(T * sizeof *p->ids);
    for (size_t i = 0; i < T; i++) p->ids[i] = token_at(i, 0);
    prefill_run(p);
}

static double prefill_tok_s(PrefillRun *p) {
    double t0 = now_seconds();
    prefill_run(p);
    return (double)p->T / (now_seconds() - t0);
}

static void prefill_free(PrefillRun *p) {
    free(p->ids);
    forward_state_free(&p->fs);
    kvcache_free(&p->cache);
}

enum { N_DT = 7, PROMPT = 64, DECODE = 128, PREFILL = 512, LONG_CTX = 900 };
// the weight dtypes as --dtype names them (f32 first: the sgemm bound's)
static const char *const DTYPES[N_DT] = {"f32", "f16", "bf16", "q8", "q6", "q4", "q4-pure"};

// Whether BENCH_DTYPES (unset: every dtype) names dtype `name`.
static int dtype_selected(const char *name) {
    const char *list = getenv("BENCH_DTYPES");
    if (!list || !*list) return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save))
        if (!strcasecmp(tok, name)) return 1;
    return 0;
}

// The matmul variants (tune.h) of each dtype's products, on 1 and 2
// threads: the CPU as CPUID tells it, each product's chosen variant with
// its GFLOP/s and the others' beside it (measured now, as `gpt --tune
// force` does), and a prefill of PREFILL_TUNED tokens with the default
// variants and with the chosen ones (interleaved, best of 3 rounds).
enum { PREFILL_TUNED = 128 };
// plans[t - 1][d]: the plan chosen for dtype d on t threads.
static void bench_variants(Model *models, const int *on, int n_dt, const char *const *names, MatmulPlan plans[2][N_DT]) {
    CpuInfo ci;
    char line[256];
    cpu_info(&ci);
    cpu_describe(&ci, line, sizeof line);
    printf("cpuid: %s\n", line);
    for (int t = 1; t <= 2; t++) {
        GptError err = {{0}};
        ThreadPool *pool = threadpool_create(t, &err);
        if (!pool) die(&err);
        for (int d = 0; d < n_dt; d++) {
            if (!on[d]) continue;
            MatmulPlan plan;
            TuneReport rep;
            tune_model(&models[d], pool, TUNE_FORCE, "bench", &plan, &rep);
            plans[t - 1][d] = plan;
            PrefillRun dflt, tuned;
            prefill_init(&dflt, &models[d], pool, PREFILL_TUNED, NULL);
            prefill_init(&tuned, &models[d], pool, PREFILL_TUNED, &plan);
            double a = 0, b = 0;
            for (int round = 0; round < 3; round++) {
                double x = prefill_tok_s(&dflt), y = prefill_tok_s(&tuned);
                if (x > a) a = x;
                if (y > b) b = y;
            }
            prefill_free(&dflt);
            prefill_free(&tuned);
            printf("variants %s, %d thread%s: chosen in %.2f s; prefill %d tokens %.0f tok/s default, %.0f tuned "
                   "(%.2fx)\n", names[d], t, t == 1 ? "" : "s", rep.seconds, PREFILL_TUNED, a, b, a > 0 ? b / a : 0);
            tune_print(&rep, stdout);
        }
        threadpool_free(pool);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_model MODEL_DIR\n");
        return 2;
    }
    GptError err = {{0}};
    Model models[N_DT];
    int on[N_DT];
    for (int d = 0; d < N_DT; d++) {
        on[d] = dtype_selected(DTYPES[d]);
        if (!on[d] && d != 0) continue;  // F32 always: the sgemm bound reads its weights
        WeightOptions o;
        if (weight_options_from_name(DTYPES[d], &o) != 0) return 2;
        if (model_load_with(&models[d], argv[1], &o, &err) != 0) die(&err);
    }
    const GPT2Config *c = &models[0].config;
    size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer;
    double flops_per_token = 2.0 * 12.0 * (double)C * (double)C * (double)L;
    // a decoded token also multiplies by the tied output layer (V, C)
    double flops_per_decoded = flops_per_token + 2.0 * (double)c->vocab_size * (double)C;
    size_t kv_per_token = kvcache_bytes_per_token(c, DTYPE_F32);
    size_t n_words = ((size_t)1 << 30) / sizeof(uint64_t);
    uint64_t *buf = malloc(n_words * sizeof *buf);
    for (size_t i = 0; i < n_words; i++) buf[i] = i;

    char cpu[256];
    cpu_description(cpu, sizeof cpu);
    printf("cpu: %s\n", cpu);
    printf("model: %s, %zu params; kernels %s; OpenBLAS core %s (the sgemm bound)\n", argv[1], models[0].n_params,
           matmul_isa_in_use(), openblas_get_corename());
    MatmulPlan plans[2][N_DT];
    bench_variants(models, on, N_DT, DTYPES, plans);
    for (int t = 1; t <= 2; t++) {
        GptError perr = {{0}};
        ThreadPool *pool = threadpool_create(t, &perr);
        if (!pool) die(&perr);
        openblas_set_num_threads(t);
        double bw = read_bandwidth(buf, n_words, t, 5);
        // sgemm's prefill products and each dtype's prefill of 512 tokens,
        // interleaved, best of 3 rounds (the bound and what it bounds
        // measured in the same moments)
        // Each dtype's products run the variants its tuning above chose (as
        // gpt's do); F32's also with the default variant (4x4), interleaved.
        double gflops = 0, pre[N_DT] = {0}, pre_default = 0;
        {
            SgemmPass sp;
            PrefillRun runs[N_DT], dflt;
            sgemm_pass_init(&sp, &models[0], PREFILL);
            for (int d = 0; d < N_DT; d++)
                if (on[d]) prefill_init(&runs[d], &models[d], pool, PREFILL, &plans[t - 1][d]);
            if (on[0]) prefill_init(&dflt, &models[0], pool, PREFILL, NULL);
            for (int round = 0; round < 3; round++) {
                double g = sgemm_pass_gflops(&sp);
                if (g > gflops) gflops = g;
                for (int d = 0; d < N_DT; d++) {
                    if (!on[d]) continue;
                    double v = prefill_tok_s(&runs[d]);
                    if (v > pre[d]) pre[d] = v;
                }
                if (on[0]) {
                    double v = prefill_tok_s(&dflt);
                    if (v > pre_default) pre_default = v;
                }
            }
            for (int d = 0; d < N_DT; d++)
                if (on[d]) prefill_free(&runs[d]);
            if (on[0]) prefill_free(&dflt);
            sgemm_pass_free(&sp);
        }
        double prefill_bound = gflops * 1e9 / flops_per_token;
        // decode of one sequence, dtypes interleaved, best of 3 rounds; the
        // bandwidth again in between, the best of all of it taken
        double dec[N_DT] = {0};
        for (int round = 0; round < 3; round++) {
            for (int d = 0; d < N_DT; d++) {
                if (!on[d]) continue;
                double v = decode_tok_s(&models[d], pool, 1, PROMPT, DECODE, DTYPE_F32, &plans[t - 1][d]);
                if (v > dec[d]) dec[d] = v;
            }
            double again = read_bandwidth(buf, n_words, t, 1);
            if (again > bw) bw = again;
        }
        printf("\nthreads %d: read bandwidth %.1f GB/s; sgemm %.1f GFLOP/s -> prefill bound %.0f tok/s\n", t, bw, gflops,
               prefill_bound);
        printf("  %-7s %12s %10s %10s %6s %12s %s\n", "dtype", "bytes/token", "bound", "decode", "frac", "prefill 512",
               "aggregate decode tok/s, B = 1 2 4 8 16");
        for (int d = 0; d < N_DT; d++) {
            if (!on[d]) continue;
            const Model *m = &models[d];
            // weights, plus the KV cache of the average context (64..192)
            double bytes = (double)m->decode_bytes + (double)kv_per_token * (PROMPT + DECODE / 2);
            double bound = bw * 1e9 / bytes;
            printf("  %-7s %12.0f %8.1f/s %8.1f/s %5.0f%% %8.0f tok/s %3.0f%%", DTYPES[d], bytes, bound,
                   dec[d], 100 * dec[d] / bound, pre[d], 100 * pre[d] / prefill_bound);
            const size_t Bs[] = {1, 2, 4, 8, 16};
            double agg[5];
            for (size_t i = 0; i < 5; i++) {
                agg[i] = decode_tok_s(m, pool, Bs[i], 16, 32, DTYPE_F32, &plans[t - 1][d]);
                printf(" %6.1f", agg[i]);
            }
            // Batched decode is compute-bound: at most the sgemm rate over
            // the flops of a decoded token (matrices and output layer).
            // Its other ceiling: one step reads the weights once for all 16
            // tokens, and each sequence's cache (16 + 32 / 2 positions on average).
            double compute = gflops * 1e9 / flops_per_decoded;
            double step_bytes = (double)m->decode_bytes + 16.0 * (double)kv_per_token * (16 + 32 / 2);
            double memory = 16.0 * bw * 1e9 / step_bytes;
            double ceiling = compute < memory ? compute : memory;
            printf("  (B=4 %.1fx, B=16 %.1fx B=1; B=16 = %.0f%% of the lower ceiling %.0f tok/s, %s; compute %.0f, "
                   "memory %.0f)\n",
                   agg[2] / agg[0], agg[4] / agg[0], 100 * agg[4] / ceiling, ceiling,
                   compute < memory ? "compute" : "memory", compute, memory);
        }
        if (on[0]) {
            // the default variant beside the tuned one (the table's)
            double b16 = decode_tok_s(&models[0], pool, 16, 16, 32, DTYPE_F32, NULL);
            double compute = gflops * 1e9 / flops_per_decoded;
            double step_bytes = (double)models[0].decode_bytes + 16.0 * (double)kv_per_token * (16 + 32 / 2);
            double memory = 16.0 * bw * 1e9 / step_bytes;
            printf("  f32 with the default variant (%s) for every product: prefill 512 %.0f tok/s %.0f%% of the bound; "
                   "B=16 %.1f tok/s %.0f%% of the lower ceiling\n",
                   matmul_variant_name(cpu_best_isa(), 0), pre_default, 100 * pre_default / prefill_bound, b16,
                   100 * b16 / (compute < memory ? compute : memory));
            // Where the 16-sequence step goes, and the bound that counts
            // what is not a product: the products and the output layer at
            // the lower ceiling (its time for 16 tokens), plus attention and
            // the rest as measured. (The memory ceiling's bytes hold the
            // caches' reads too, which attention's time holds again: 19 MB
            // of the step's 517 MB, so that bound is low by at most 4%.)
            {
                enum { B = 16, CTX = 16 + 32 / 2 };
                StepParts sp;
                decode_parts(&models[0], pool, B, CTX, &plans[t - 1][0], 7, &sp);
                double rest = sp.step - sp.products - sp.output - sp.attention;
                double ceil_step = B / (compute < memory ? compute : memory);
                double run = B / sp.step;
                double bound = B / (ceil_step + sp.attention + (rest > 0 ? rest : 0));
                double bound_sgemm = B / (sp.sgemm + sp.sgemm_output + sp.attention + (rest > 0 ? rest : 0));
                static const char *const part_names[5] = {"the layers' products", "the output layer",
                                                          "attention", "the rest", "sampling"};
                double parts[5] = {sp.products, sp.output, sp.attention, rest, sp.sample};
                int top = 0;
                for (int i = 1; i < 5; i++)
                    if (parts[i] > parts[top]) top = i;
                // f32: 4 bytes of weight per multiply-add of a row, B rows
                double fl_prod = flops_per_token * B, fl_out = 2.0 * (double)c->vocab_size * (double)C * B;
                printf("  f32 %d sequences, a step (context %d, best of 7 interleaved): %.2f ms = products %.2f ms "
                       "(%.0f GFLOP/s, %.1f GB/s of weights) + output layer %.2f ms (%.0f GFLOP/s, %.1f GB/s) + "
                       "attention %.2f ms + the rest %.2f ms%s; sgemm on the same %d rows: "
                       "products %.2f ms, output layer %.2f ms; sampling (the engine's step, not this one) %.2f ms; "
                       "largest: %s, %.0f%% of the step\n",
                       B, CTX, 1e3 * sp.step, 1e3 * sp.products, fl_prod / sp.products / 1e9,
                       2.0 * fl_prod / B / sp.products / 1e9, 1e3 * sp.output, fl_out / sp.output / 1e9,
                       2.0 * fl_out / B / sp.output / 1e9, 1e3 * sp.attention, 1e3 * rest,
                       rest < 0 ? " (a noisy round: the parts alone took longer than the step)" : "", B,
                       1e3 * sp.sgemm, 1e3 * sp.sgemm_output, 1e3 * sp.sample, part_names[top],
                       100 * parts[top] / sp.step);
                printf("  f32 %d sequences: with the products and output layer at the %s ceiling (%.2f ms a step) "
                       "and this attention and rest the bound is %.0f tok/s and the run (%.0f tok/s) is %.0f%% of it; "
                       "with sgemm's %d-row products instead, %.0f tok/s (%.0f%%)\n",
                       B, compute < memory ? "compute" : "memory", 1e3 * ceil_step, bound, run, 100 * run / bound, B,
                       bound_sgemm, 100 * run / bound_sgemm);
                // At B rows a weight serves 2B flops for its 4 bytes, read
                // from memory once a step: the two ceilings are close, and
                // a kernel that does not overlap its reads with its FMAs
                // pays their sum.
                printf("  f32 %d sequences: products and output layer %.2f ms a step against compute %.2f ms (sgemm's "
                       "rate) and memory %.2f ms (the read bandwidth): %.2fx the larger, %.2f of their sum\n",
                       B, 1e3 * (sp.products + sp.output), 1e3 * B / compute, 1e3 * B / memory,
                       (sp.products + sp.output) / (B / (compute < memory ? compute : memory)),
                       (sp.products + sp.output) / (B / compute + B / memory));
            }
            static const char *const names[4] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
            double ours[4], dflt[4], blas[4];
            products_by_shape(&models[0], pool, PREFILL, &plans[t - 1][0], ours, dflt, blas);
            printf("  f32 products alone (layer 0, T = %d), GFLOP/s ours (tuned) / ours (%s) / sgemm:", PREFILL,
                   matmul_variant_name(cpu_best_isa(), 0));
            for (int s = 0; s < 4; s++)
                printf(" %s %.0f / %.0f / %.0f (%.2f, %.2f)", names[s], ours[s], dflt[s], blas[s], ours[s] / blas[s],
                       dflt[s] / blas[s]);
            printf("\n");
            // What else stops the prefill: a token's time is its products'
            // (at the rates just measured) and the rest of the layers
            // (attention, norms, GELU, packing), which sgemm's bound leaves
            // out. With the rest as measured and the products at sgemm's
            // rate, the bound that counts the rest.
            const double kn[4] = {3.0 * C * C, 1.0 * C * C, 4.0 * C * C, 4.0 * C * C};
            double t_ours = 0, t_blas = 0;
            for (int s = 0; s < 4; s++) {
                t_ours += 2.0 * kn[s] * (double)L / (ours[s] * 1e9);
                t_blas += 2.0 * kn[s] * (double)L / (blas[s] * 1e9);
            }
            double rest = 1.0 / pre[0] - t_ours;
            if (rest < 0)  // a product alone was held up more than the prefill was
                printf("  f32 prefill 512, a token: products %.3f ms alone, over the whole prefill's %.3f ms: "
                       "a noisy round, no bound of the rest\n", 1e3 * t_ours, 1e3 / pre[0]);
            else
                printf("  f32 prefill 512, a token: products %.3f ms (at the rates above), the rest %.3f ms (%.0f%%); "
                   "with sgemm's products and this rest the bound is %.0f tok/s: ours %.0f%% of it\n",
                   1e3 * t_ours, 1e3 * rest, 100 * rest * pre[0], 1.0 / (t_blas + rest),
                   100 * pre[0] * (t_blas + rest));
        }
        // a long context: the KV cache read joins the weights
        if (!on[0]) {
            threadpool_free(pool);
            continue;
        }
        double kv32 = 0, kv16 = 0;
        for (int round = 0; round < 2; round++) {
            double a = decode_tok_s(&models[0], pool, 1, LONG_CTX, 64, DTYPE_F32, &plans[t - 1][0]);
            double b = decode_tok_s(&models[0], pool, 1, LONG_CTX, 64, DTYPE_F16, &plans[t - 1][0]);
            if (a > kv32) kv32 = a;
            if (b > kv16) kv16 = b;
        }
        double ctx = LONG_CTX + 32;
        double bound32 = bw * 1e9 / ((double)models[0].decode_bytes + ctx * (double)kv_per_token);
        double bound16 = bw * 1e9 / ((double)models[0].decode_bytes + ctx * (double)kv_per_token / 2);
        printf("  F32 weights at a %d-token context: F32 KV %.1f tok/s (%.0f%% of %.1f), F16 KV %.1f tok/s (%.0f%% of %.1f)\n",
               LONG_CTX, kv32, 100 * kv32 / bound32, bound32, kv16, 100 * kv16 / bound16, bound16);
        threadpool_free(pool);
    }
    free(buf);
    for (int d = 0; d < N_DT; d++)
        if (on[d] || d == 0) model_free(&models[d]);
    return 0;
}

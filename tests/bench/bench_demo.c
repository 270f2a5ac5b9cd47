/*
 * bench_demo.c - the demo model (models/demo.bin, the model gpt runs when no
 * GPT-2 is installed: 8 layers of 128 channels, 2 heads, context 256, the
 * vocabulary of 50257, F16): decode of one sequence beside its bounds, and
 * where the time of one decode step goes.
 *
 *   bench_demo MODEL.bin [ROUNDS]
 *   bench_demo MODEL.bin --parts N    each part of a step N times on one
 *                                     thread, the engine N steps, nothing
 *                                     else: for valgrind --tool=callgrind,
 *                                     whose instruction counts per part_*
 *                                     function cross-check the shares
 *
 * A model this small reads about 16 MB per token, which can stay in the
 * last-level cache, and does 16 MFLOP per token, 80% of it in the output
 * layer (50257 x 128). So its bounds, measured here in the same run:
 *   - bandwidth: bytes read per token (weights + the KV cache of the average
 *     context) over the read bandwidth of a buffer that size (from the cache
 *     where it fits), and over the memory's (a 1 GiB buffer);
 *   - compute: flops per token over the cores' matmul rate, the better of
 *     our F16 matmul on the output layer with 32 rows (one pass over the
 *     weights serves 32 tokens, so it is not limited by reading them) and
 *     OpenBLAS sgemm on the same shape at 256 rows;
 * and the one that applies is the lowest of those the working set allows
 * (the cache's bandwidth if it fits in the last-level cache, else memory's).
 *
 * The breakdown of a step times the parts of gpt2_forward by calling the
 * same library functions the forward pass calls, on its buffers, with its
 * pool (the library itself has no timers): the output layer, the blocks'
 * matmuls, attention, layernorms and GELU; the rest of gpt2_forward
 * (embedding, KV store, the finiteness checks) is what the parts leave of
 * the whole call. Then the sampler on real logits, the engine's own work
 * per step (engine_step less gpt2_forward and the sampler), and the thread
 * pool's synchronisation (an empty task through the pool as many times as a
 * step runs one). Variants are interleaved, best of the rounds.
 * Prints numbers; asserts nothing about time.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "forward.h"
#include "engine.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "logprobs.h"
#include "sampler.h"
#include "base/threads.h"

#include "bench_util.h"

char *openblas_get_corename(void);

static void die(const GptError *err) {
    fprintf(stderr, "bench_demo: %s\n", err->msg);
    exit(1);
}

enum { PROMPT = 16, STEPS = 200, CTX = PROMPT + STEPS / 2, MM_ROWS = 32, SGEMM_ROWS = 256 };

static int32_t token_at(size_t i) { return (int32_t)((i * 2654435761u + 7919u) % 50000); }

// ---------------------------------------------------------------------------
// bounds

// GFLOP/s of our matmul on the output layer (V, C) with `rows` rows.
static double ours_gflops(const Model *m, ThreadPool *pool, size_t rows) {
    size_t C = (size_t)m->config.n_embd, V = (size_t)m->config.vocab_size;
    GptError err = {{0}};
    ForwardState fs;
    if (forward_state_init(&fs, &m->config, rows, 1, rows, pool, &err) != 0) die(&err);
    for (size_t i = 0; i < rows * C; i++) fs.ln[i] = 0.01f * (float)(i % 89) - 0.4f;
    const MatmulContext mm = {pool, fs.matmul_scratch, fs.matmul_scratch_floats, fs.isa, &fs.plan};
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_seconds();
        matmul(fs.logits, fs.ln, &m->weights.wte, NULL, rows, 0, &mm);
        double dt = now_seconds() - t0;
        if (dt < best) best = dt;
    }
    forward_state_free(&fs);
    return 2.0 * (double)rows * (double)C * (double)V / best / 1e9;
}

// GFLOP/s of sgemm on the output layer's shape (float32 copy of wte).
static double sgemm_gflops(const float *wte32, size_t V, size_t C, size_t rows) {
    float *x = aligned_alloc(64, rows * C * sizeof(float));
    float *y = aligned_alloc(64, rows * V * sizeof(float));
    for (size_t i = 0; i < rows * C; i++) x[i] = 0.01f * (float)(i % 89) - 0.4f;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_seconds();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)V, (int)C, 1.0f, x, (int)C, wte32,
                    (int)C, 0.0f, y, (int)V);
        double dt = now_seconds() - t0;
        if (dt < best) best = dt;
    }
    free(x);
    free(y);
    return 2.0 * (double)rows * (double)C * (double)V / best / 1e9;
}

// ---------------------------------------------------------------------------
// decode: gpt2_forward alone, one sequence, PROMPT then STEPS tokens

static double decode_tok_s(const Model *m, ThreadPool *pool) {
    GptError err = {{0}};
    KVCache cache;
    ForwardState fs;
    if (kvcache_init(&cache, &m->config, DTYPE_F32, PROMPT + STEPS, &err) != 0 ||
        forward_state_init(&fs, &m->config, PROMPT, PROMPT + STEPS, 1, pool, &err) != 0)
        die(&err);
    int32_t ids[PROMPT + STEPS];
    for (size_t i = 0; i < PROMPT + STEPS; i++) ids[i] = token_at(i);
    SeqInput p = {.tokens = ids, .n_tokens = PROMPT, .cache = &cache, .want = LOGITS_LAST};
    if (gpt2_forward(m, &fs, &p, 1, &err) != 0) die(&err);
    double t0 = now_seconds();
    for (size_t s = 0; s < STEPS; s++) {
        SeqInput q = {.tokens = &ids[PROMPT + s], .n_tokens = 1, .cache = &cache, .want = LOGITS_LAST};
        if (gpt2_forward(m, &fs, &q, 1, &err) != 0) die(&err);
    }
    double tok_s = STEPS / (now_seconds() - t0);
    forward_state_free(&fs);
    kvcache_free(&cache);
    return tok_s;
}

// The engine's own costs per decode step, greedy, from its own timers:
// *book, engine_step less gpt2_forward and sample_next (the batch, the
// cache's growth, the timers); *sample, sample_next (the sampler, the
// token's text, the stop checks). Returns the engine's decode tok/s.
static double engine_costs(const Model *m, ThreadPool *pool, double *book, double *sample) {
    GptError err = {{0}};
    Engine e;
    Sequence s;
    int32_t ids[PROMPT];
    for (size_t i = 0; i < PROMPT; i++) ids[i] = token_at(i);
    EngineConfig ec = {.max_seqs = 1, .max_step_tokens = PROMPT, .kv_dtype = DTYPE_F32, .pool = pool};
    GenParams gp = {.sampling = {.temperature = 0, .top_p = 1, .repeat_penalty = 1, .seed = 1},
                    .max_new = STEPS + 1, .ignore_eos = 1};
    if (engine_init(&e, m, m->tokenizer, &ec, &err) != 0 || sequence_init(&s, &e, ids, PROMPT, &gp, &err) != 0 ||
        engine_admit(&e, &s, &err) != 1)
        die(&err);
    Sequence *batch[1] = {&s};
    if (engine_step(&e, batch, 1, &err) != 0) die(&err);  // the prompt
    double fwd0 = e.forward_seconds, dec0 = s.decode_seconds, t0 = now_seconds();
    size_t steps = 0;
    while (!s.stop) {
        if (engine_step(&e, batch, 1, &err) != 0) die(&err);
        steps++;
    }
    double wall = now_seconds() - t0, fwd = e.forward_seconds - fwd0, dec = s.decode_seconds - dec0;
    *book = (wall - dec) / (double)steps;
    *sample = (dec - fwd) / (double)steps;
    sequence_free(&s, &e);
    engine_free(&e);
    return (double)steps / wall;
}

// ---------------------------------------------------------------------------
// the parts of one decode step, at a context of CTX positions

typedef struct {
    const Model *m;
    ThreadPool *pool;
    ForwardState fs;
    KVCache cache;
    MatmulContext mm;
    int32_t token;
    float *logits;       // (V) the logits of a real step, for the sampler
    float *work;         // (V) the sampler's copy
    int32_t hist[CTX];
    Sampler samplers[8];
    int n_samplers;
} Step;

static void part_forward(Step *b) {
    GptError err = {{0}};
    b->cache.n_tokens = CTX;  // the same position every time: the cache is overwritten in place
    SeqInput q = {.tokens = &b->token, .n_tokens = 1, .cache = &b->cache, .want = LOGITS_LAST};
    if (gpt2_forward(b->m, &b->fs, &q, 1, &err) != 0) die(&err);
}

static void part_output(Step *b) {
    const GPT2Weights *w = &b->m->weights;
    matmul(b->fs.logits, b->fs.ln, &w->wte, NULL, 1, 0, &b->mm);
}

static void matmuls_of(Step *b, int which) {  // which: 0..3 one kind, -1 all four
    const GPT2Weights *w = &b->m->weights;
    ForwardState *s = &b->fs;
    for (int l = 0; l < b->m->config.n_layer; l++) {
        const GPT2Layer *lw = &w->layers[l];
        if (which < 0 || which == 0) matmul(s->qkv, s->ln, &lw->qkv_w, lw->qkv_b, 1, 0, &b->mm);
        if (which < 0 || which == 1) matmul(s->x, s->attn, &lw->attn_proj_w, lw->attn_proj_b, 1, 1, &b->mm);
        if (which < 0 || which == 2) matmul(s->fc, s->ln, &lw->fc_w, lw->fc_b, 1, 0, &b->mm);
        if (which < 0 || which == 3) matmul(s->x, s->fc, &lw->fc_proj_w, lw->fc_proj_b, 1, 1, &b->mm);
    }
}
static void part_matmuls(Step *b) { matmuls_of(b, -1); }
static void part_qkv(Step *b) { matmuls_of(b, 0); }
static void part_proj(Step *b) { matmuls_of(b, 1); }
static void part_fc(Step *b) { matmuls_of(b, 2); }
static void part_fcproj(Step *b) { matmuls_of(b, 3); }

// attention as gpt2_forward runs it for one token: (head) pairs dealt to
// the threads one by one
typedef struct {
    Step *b;
    size_t layer;
} AttnJob;

static void attn_task(void *arg, int thread, int n_threads) {
    const AttnJob *j = arg;
    const ForwardState *s = &j->b->fs;
    size_t C = (size_t)j->b->m->config.n_embd, NH = (size_t)j->b->m->config.n_head, HS = C / NH;
    float *scores = s->scores + (size_t)thread * round_up(s->max_ctx, 16);
    for (size_t h = (size_t)thread; h < NH; h += (size_t)n_threads)
        attention_query(s->isa, s->attn + h * HS, s->qkv + h * HS, &j->b->cache, j->layer, h, CTX + 1,
                        gpt2_attn_scale(&j->b->m->config, j->layer), scores);
}

static void part_attention(Step *b) {
    for (size_t l = 0; l < (size_t)b->m->config.n_layer; l++) {
        AttnJob j = {b, l};
        threadpool_run(b->pool, attn_task, &j);
    }
}


static void part_norms(Step *b) {
    const GPT2Config *c = &b->m->config;
    const GPT2Weights *w = &b->m->weights;
    ForwardState *s = &b->fs;
    size_t C = (size_t)c->n_embd;
    for (int l = 0; l < c->n_layer; l++) {
        const GPT2Layer *lw = &w->layers[l];
        layernorm_forward(s->ln, s->x, lw->ln1_w, lw->ln1_b, 1, C, c->ln_eps);
        layernorm_forward(s->ln, s->x, lw->ln2_w, lw->ln2_b, 1, C, c->ln_eps);
        activation_pool(b->pool, activation_kernel(b->m->config.activation), s->fc, gpt2_mlp_width(&b->m->config));
    }
    layernorm_forward(s->ln, s->x, w->lnf_w, w->lnf_b, 1, C, c->ln_eps);
}

static void empty_task(void *arg, int thread, int n_threads) {
    (void)arg;
    (void)thread;
    (void)n_threads;
}

// as many pool runs as a decode step makes: 6 a layer (4 matmuls,
// attention, GELU) and the output layer
static void part_pool(Step *b) {
    int runs = 6 * b->m->config.n_layer + 1;
    for (int i = 0; i < runs; i++) threadpool_run(b->pool, empty_task, NULL);
}

// one draw with sampler k on the step's logits (the penalty changes the
// history's logits in place: they are put back)
static void sample_with(Step *b, int k) {
    Sampler *s = &b->samplers[k];
    int32_t t = sampler_sample(s, b->work, b->hist, CTX);
    if (t < 0) exit(3);
    if (s->params.repeat_penalty != 1.0f)
        for (size_t i = 0; i < CTX; i++) b->work[b->hist[i]] = b->logits[b->hist[i]];
}
static void part_s0(Step *b) { sample_with(b, 0); }
static void part_s1(Step *b) { sample_with(b, 1); }
static void part_s2(Step *b) { sample_with(b, 2); }
static void part_s3(Step *b) { sample_with(b, 3); }
static void part_s4(Step *b) { sample_with(b, 4); }
static void part_s5(Step *b) { sample_with(b, 5); }

// --logprobs 5: the log-softmax and the 5 most likely of the step's logits
static void part_logprobs(Step *b) {
    LogitsSummary s;
    logits_summarize(b->logits, (size_t)b->m->config.vocab_size, 5, b->fs.isa, &s);
    if (!(s.log_sum == s.log_sum)) exit(3);
}

static const SamplerParams SAMPLERS[] = {
    {.temperature = 0, .top_p = 1, .repeat_penalty = 1},                                    // --temp 0
    {.temperature = 1, .top_p = 1, .repeat_penalty = 1},                                    // the default
    {.temperature = 1, .top_k = 40, .top_p = 1, .repeat_penalty = 1},                       // --top-k 40
    {.temperature = 1, .top_p = 0.9f, .repeat_penalty = 1},                                 // --top-p 0.9
    {.temperature = 0.8f, .top_k = 50, .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.1f},
    {.temperature = 1, .top_p = 1, .repeat_penalty = 1.3f},                                 // --repeat-penalty 1.3
};
static const char *SAMPLER_NAMES[] = {
    "sampler, greedy (--temp 0)",
    "sampler, default (temperature 1)",
    "sampler, --top-k 40",
    "sampler, --top-p 0.9",
    "sampler, T 0.8 top-k 50 top-p 0.95 min-p 0.05 penalty 1.1",
    "sampler, --repeat-penalty 1.3",
};
enum { N_SAMPLERS = 6 };

typedef struct {
    const char *name;
    void (*run)(Step *);
    int batch;  // calls per timing
} Part;

enum { P_FORWARD, P_OUTPUT, P_MATMULS, P_QKV, P_PROJ, P_FC, P_FCPROJ, P_ATTN, P_NORMS, P_POOL, P_LOGPROBS, P_SAMPLER0 };
static const Part PARTS[] = {
    {"gpt2_forward, one token", part_forward, 10},
    {"output layer: matmul 50257 x 128", part_output, 10},
    {"blocks: matmuls", part_matmuls, 10},
    {"  qkv 384 x 128, x 8", part_qkv, 20},
    {"  attn proj 128 x 128, x 8", part_proj, 20},
    {"  fc 512 x 128, x 8", part_fc, 20},
    {"  fc proj 128 x 512, x 8", part_fcproj, 20},
    {"blocks: attention", part_attention, 20},
    {"blocks: layernorm, GELU; ln_f", part_norms, 20},
    {"pool: empty runs, as many as a step", part_pool, 20},
    {"log-probabilities, --logprobs 5 (logprobs.h)", part_logprobs, 10},
    {"", part_s0, 10}, {"", part_s1, 5}, {"", part_s2, 5}, {"", part_s3, 5}, {"", part_s4, 5}, {"", part_s5, 5},
};
enum { N_PARTS = sizeof PARTS / sizeof *PARTS };

static void step_init(Step *b, const Model *m, ThreadPool *pool) {
    GptError err = {{0}};
    memset(b, 0, sizeof *b);
    b->m = m;
    b->pool = pool;
    size_t V = (size_t)m->config.vocab_size;
    if (kvcache_init(&b->cache, &m->config, DTYPE_F32, CTX + 1, &err) != 0 ||
        forward_state_init(&b->fs, &m->config, CTX, CTX + 1, 1, pool, &err) != 0)
        die(&err);
    b->mm = (MatmulContext){pool, b->fs.matmul_scratch, b->fs.matmul_scratch_floats, b->fs.isa, NULL};  // the default variants
    for (size_t i = 0; i < CTX; i++) b->hist[i] = token_at(i);
    SeqInput p = {.tokens = b->hist, .n_tokens = CTX, .cache = &b->cache, .want = LOGITS_LAST};
    if (gpt2_forward(m, &b->fs, &p, 1, &err) != 0) die(&err);
    b->token = token_at(CTX);
    part_forward(b);
    b->logits = malloc(V * sizeof *b->logits);
    b->work = malloc(V * sizeof *b->work);
    memcpy(b->logits, b->fs.logits, V * sizeof *b->logits);
    memcpy(b->work, b->fs.logits, V * sizeof *b->work);
    for (int k = 0; k < N_SAMPLERS; k++) {
        SamplerParams sp = SAMPLERS[k];
        sp.seed = 42 + (uint64_t)k;
        if (sampler_init(&b->samplers[k], &sp, V, &err) != 0) die(&err);
    }
}

static void step_free(Step *b) {
    for (int k = 0; k < N_SAMPLERS; k++) sampler_free(&b->samplers[k]);
    free(b->logits);
    free(b->work);
    forward_state_free(&b->fs);
    kvcache_free(&b->cache);
}

// ---------------------------------------------------------------------------

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_demo MODEL.bin [ROUNDS | --parts N]\n");
        return 2;
    }
    int parts_only = argc > 3 && !strcmp(argv[2], "--parts");
    int rounds = parts_only ? atoi(argv[3]) : argc > 2 ? atoi(argv[2]) : 5;
    if (rounds < 1) rounds = 1;
    GptError err = {{0}};
    Model m;
    if (model_load(&m, argv[1], &err) != 0) die(&err);
    if (!m.tokenizer) {
        fprintf(stderr, "bench_demo: %s stores no tokenizer (the engine needs one)\n", argv[1]);
        return 1;
    }
    if (parts_only) {
        Step b;
        step_init(&b, &m, NULL);
        for (int p = 0; p < N_PARTS; p++)
            for (int k = 0; k < rounds; k++) PARTS[p].run(&b);
        double bk, sn;
        engine_costs(&m, NULL, &bk, &sn);
        step_free(&b);
        model_free(&m);
        return 0;
    }
    const GPT2Config *c = &m.config;
    size_t C = (size_t)c->n_embd, L = (size_t)c->n_layer, V = (size_t)c->vocab_size;
    double flops = 2.0 * 12.0 * (double)C * (double)C * (double)L + 2.0 * (double)V * (double)C;
    double kv = (double)kvcache_bytes_per_token(c, DTYPE_F32) * CTX;  // the average context's
    double bytes = (double)m.decode_bytes + kv;
    size_t llc = llc_bytes();
    int fits = llc && bytes < 0.75 * (double)llc;  // the rest of the process needs some of it too

    char cpu[256];
    cpu_description(cpu, sizeof cpu);
    printf("cpu: %s; last-level cache %.0f MiB; kernels %s; OpenBLAS core %s\n", cpu, (double)llc / 1048576.0,
           matmul_isa_in_use(), openblas_get_corename());
    printf("model: %s, %zu params (%d layers, %d heads, %zu channels, context %d, vocab %zu), matrices %s\n", argv[1],
           m.n_params, c->n_layer, c->n_head, C, c->n_ctx, V, dtype_name(m.weights.wte.dtype));
    printf("per token: %.1f MB read (weights %.1f MB + KV %.2f MB at the average context, %d), %.1f MFLOP (%.0f%% in "
           "the output layer); %s the last-level cache\n",
           bytes / 1e6, (double)m.decode_bytes / 1e6, kv / 1e6, CTX, flops / 1e6,
           100 * 2.0 * (double)V * (double)C / flops, fits ? "fits in" : "does not fit in");

    // buffers for the bounds
    size_t ws_words = round_up((size_t)bytes / sizeof(uint64_t), 8);
    size_t mem_words = ((size_t)1 << 30) / sizeof(uint64_t);
    uint64_t *ws = malloc(ws_words * sizeof *ws), *mem = malloc(mem_words * sizeof *mem);
    for (size_t i = 0; i < ws_words; i++) ws[i] = i;
    for (size_t i = 0; i < mem_words; i++) mem[i] = i;
    int passes = (int)(1e9 / bytes) + 1;  // about 1 GB read
    float *wte32 = malloc(V * C * sizeof *wte32);
    for (size_t i = 0; i < V; i++) weight_row(wte32 + i * C, &m.weights.wte, i);

    ThreadPool *pools[3] = {NULL, NULL, NULL};
    for (int t = 1; t <= 2; t++)
        if (!(pools[t] = threadpool_create(t, &err))) die(&err);

    // decode and the bounds, interleaved, best of the rounds
    double dec[3] = {0}, bw_ws[3] = {0}, bw_mem[3] = {0}, ours[3] = {0}, sg[3] = {0};
    for (int r = 0; r < rounds; r++)
        for (int t = 1; t <= 2; t++) {
            double v;
            if ((v = decode_tok_s(&m, pools[t])) > dec[t]) dec[t] = v;
            if ((v = read_bandwidth_passes(ws, ws_words, t, passes, 1)) > bw_ws[t]) bw_ws[t] = v;
            if ((v = read_bandwidth(mem, mem_words, t, 1)) > bw_mem[t]) bw_mem[t] = v;
            if ((v = ours_gflops(&m, pools[t], MM_ROWS)) > ours[t]) ours[t] = v;
            openblas_set_num_threads(t);
            if ((v = sgemm_gflops(wte32, V, C, SGEMM_ROWS)) > sg[t]) sg[t] = v;
        }
    double bound[3] = {0};
    const char *which[3] = {NULL};
    printf("\ndecode of one sequence (gpt2_forward, %d-token prompt, %d tokens), best of %d rounds:\n", PROMPT, STEPS,
           rounds);
    for (int t = 1; t <= 2; t++) {
        double b_ws = bw_ws[t] * 1e9 / bytes, b_mem = bw_mem[t] * 1e9 / bytes;
        double rate = ours[t] > sg[t] ? ours[t] : sg[t];
        double b_fl = rate * 1e9 / flops;
        double b_bw = fits ? b_ws : b_mem;
        bound[t] = b_bw < b_fl ? b_bw : b_fl;
        which[t] = b_bw < b_fl ? (fits ? "bandwidth from the cache" : "memory bandwidth") : "compute";
        printf("  threads %d: %.0f tok/s = %.0f%% of its bound, %.0f tok/s (%s)\n", t, dec[t], 100 * dec[t] / bound[t],
               bound[t], which[t]);
        printf("    bandwidth: %.1f MB/token over %.1f GB/s (a buffer that size) = %.0f tok/s; over the memory's %.1f "
               "GB/s (1 GiB) = %.0f tok/s\n",
               bytes / 1e6, bw_ws[t], b_ws, bw_mem[t], b_mem);
        printf("    compute: %.1f MFLOP/token over %.1f GFLOP/s (ours, F16, output layer, %d rows; sgemm %d rows %.1f) "
               "= %.0f tok/s\n",
               flops / 1e6, rate, MM_ROWS, SGEMM_ROWS, sg[t], b_fl);
    }
    free(wte32);
    free(mem);
    free(ws);

    // the parts of a step, both thread counts interleaved
    Step steps[3];
    for (int t = 1; t <= 2; t++) step_init(&steps[t], &m, pools[t]);
    double best[3][N_PARTS];
    for (int t = 1; t <= 2; t++)
        for (int p = 0; p < N_PARTS; p++) best[t][p] = 1e30;
    for (int r = 0; r < 6 * rounds; r++)
        for (int t = 1; t <= 2; t++)
            for (int p = 0; p < N_PARTS; p++) {
                double t0 = now_seconds();
                for (int k = 0; k < PARTS[p].batch; k++) PARTS[p].run(&steps[t]);
                double dt = (now_seconds() - t0) / PARTS[p].batch;
                if (dt < best[t][p]) best[t][p] = dt;
            }
    // the engine's own costs: its bookkeeping, and sample_next less the
    // sampler alone (the token's text, the stop checks)
    double book[3], detok[3], eng_tok_s[3] = {0};
    for (int t = 1; t <= 2; t++) book[t] = detok[t] = 1e30;
    for (int r = 0; r < rounds; r++)
        for (int t = 1; t <= 2; t++) {
            double bk, sn, ts = engine_costs(&m, pools[t], &bk, &sn);
            if (bk < book[t]) book[t] = bk;
            if (sn - best[t][P_SAMPLER0] < detok[t]) detok[t] = sn - best[t][P_SAMPLER0];
            if (ts > eng_tok_s[t]) eng_tok_s[t] = ts;
        }
    double eng[3];
    for (int t = 1; t <= 2; t++) eng[t] = book[t] + detok[t];

    printf("\none decode step at a context of %d, microseconds (best of %d rounds) and share of the step "
           "(greedy / default sampling):\n",
           CTX, 6 * rounds);
    printf("  %-58s %22s %22s\n", "", "1 thread", "2 threads");
    double total[3][2];
    for (int t = 1; t <= 2; t++) {
        total[t][0] = best[t][P_FORWARD] + best[t][P_SAMPLER0] + eng[t];
        total[t][1] = best[t][P_FORWARD] + best[t][P_SAMPLER0 + 1] + eng[t];
    }
    // a row: its time and its share of each step
    #define ROW(name, v1, v2)                                                                                    \
        printf("  %-58s %8.1f %5.1f%% %5.1f%%  %8.1f %5.1f%% %5.1f%%\n", name, (v1) * 1e6, 100 * (v1) / total[1][0], \
               100 * (v1) / total[1][1], (v2) * 1e6, 100 * (v2) / total[2][0], 100 * (v2) / total[2][1])
    for (int p = P_OUTPUT; p <= P_NORMS; p++) ROW(PARTS[p].name, best[1][p], best[2][p]);
    double rest[3];
    for (int t = 1; t <= 2; t++)
        rest[t] = best[t][P_FORWARD] - best[t][P_OUTPUT] - best[t][P_MATMULS] - best[t][P_ATTN] - best[t][P_NORMS];
    ROW("the rest of gpt2_forward (embedding, KV store, checks)", rest[1], rest[2]);
    ROW("= gpt2_forward", best[1][P_FORWARD], best[2][P_FORWARD]);
    for (int k = 0; k < N_SAMPLERS; k++) ROW(SAMPLER_NAMES[k], best[1][P_SAMPLER0 + k], best[2][P_SAMPLER0 + k]);
    ROW("engine: the batch, cache growth, timers", book[1], book[2]);
    ROW("engine: the token's text, stop checks", detok[1], detok[2]);
    ROW("pool synchronisation (in the parts above)", best[1][P_POOL], best[2][P_POOL]);
    ROW(PARTS[P_LOGPROBS].name, best[1][P_LOGPROBS], best[2][P_LOGPROBS]);
    printf("  %-58s %8.1f %13.1f  %8.1f %13.1f\n", "= the step, greedy / default sampling", total[1][0] * 1e6,
           total[1][1] * 1e6, total[2][0] * 1e6, total[2][1] * 1e6);
    printf("  %-58s %8.0f %13.0f  %8.0f %13.0f\n", "  tok/s", 1 / total[1][0], 1 / total[1][1], 1 / total[2][0],
           1 / total[2][1]);
    printf("  (the engine, greedy, measured end to end: %.0f tok/s on 1 thread, %.0f on 2; the sampler per logit: "
           "greedy %.2f ns, default %.2f ns)\n",
           eng_tok_s[1], eng_tok_s[2], best[1][P_SAMPLER0] * 1e9 / (double)V, best[1][P_SAMPLER0 + 1] * 1e9 / (double)V);
    printf("bound: 1 thread %.0f tok/s (%s), 2 threads %.0f tok/s (%s)\n", bound[1], which[1], bound[2], which[2]);
    for (int t = 1; t <= 2; t++) step_free(&steps[t]);
    for (int t = 1; t <= 2; t++) threadpool_free(pools[t]);
    model_free(&m);
    return 0;
}

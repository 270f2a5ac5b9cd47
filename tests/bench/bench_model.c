/*
 * bench_model.c - how fast the forward pass is, and how fast it could be.
 *
 *   bench_model MODEL_DIR [threads...]      (default threads: 1 2)
 *
 * For each thread count, measured in the same run:
 *   - the machine's memory read bandwidth, and the decode speed it allows
 *     when every float32 weight is read once per token: bandwidth / weight
 *     bytes. The bandwidth is the better of a plain read loop over a 1 GiB
 *     buffer (far past any cache) and what sgemv itself reached streaming
 *     the weights, so the bound is never below what was achieved;
 *   - OpenBLAS sgemm GFLOP/s on the layer shapes at T = 512, and the prefill
 *     speed that allows: GFLOP/s / (2 x matmul parameters per token);
 *   - OpenBLAS sgemv alone over one token's matrix products (tok/s);
 *   - our prefill of a 512-token prompt (best of 3) and our decode of 128
 *     tokens after it;
 *   - decode of B sequences stepping together (one forward call per step):
 *     each weight read then serves B tokens.
 * Prints numbers; asserts nothing about time.
 */
#include <cblas.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "clock.h"
#include "forward.h"
#include "kvcache.h"
#include "loader.h"
#include "model.h"


// ---------------------------------------------------------------------------
// memory read bandwidth

typedef struct {
    const uint64_t *data;
    size_t n;
    uint64_t sum;
} ReadJob;

static void *read_job(void *arg) {
    ReadJob *j = arg;
    // Four independent sums so the loop is limited by loads, not by one
    // dependency chain; integer adds vectorise without reassociation worries.
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= j->n; i += 4) {
        a += j->data[i];
        b += j->data[i + 1];
        c += j->data[i + 2];
        d += j->data[i + 3];
    }
    j->sum = a ^ b ^ c ^ d;
    return NULL;
}

static double read_bandwidth(const uint64_t *buf, size_t n, int threads) {
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        pthread_t tid[64];
        ReadJob jobs[64];
        double t0 = now_seconds();
        for (int i = 0; i < threads; i++) {
            jobs[i] = (ReadJob){buf + n / (size_t)threads * (size_t)i, n / (size_t)threads, 0};
            pthread_create(&tid[i], NULL, read_job, &jobs[i]);
        }
        uint64_t sink = 0;
        for (int i = 0; i < threads; i++) {
            pthread_join(tid[i], NULL);
            sink ^= jobs[i].sum;
        }
        double dt = now_seconds() - t0;
        if (sink == 42) printf(" ");  // keep the sums alive
        double gbs = (double)(n * sizeof *buf) / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

// ---------------------------------------------------------------------------
// BLAS on the layer shapes

// GFLOP/s of sgemm over one layer's four products at T tokens.
static double sgemm_gflops(const Model *m, size_t T) {
    size_t C = (size_t)m->config.n_embd;
    float *x = aligned_alloc(64, T * 4 * C * sizeof(float));
    float *y = aligned_alloc(64, T * 4 * C * sizeof(float));
    for (size_t i = 0; i < T * 4 * C; i++) x[i] = 0.001f * (float)(i % 97);
    const GPT2Layer *l = &m->weights.layers[0];
    struct { const float *w; size_t k, n; } shapes[4] = {
        {l->qkv_w.data, C, 3 * C}, {l->attn_proj_w.data, C, C}, {l->fc_w.data, C, 4 * C}, {l->fc_proj_w.data, 4 * C, C}};
    double flops = 0, best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = now_seconds();
        flops = 0;
        for (int s = 0; s < 4; s++) {
            // y(T,n) = x(T,k) @ W(k,n)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)shapes[s].n,
                        (int)shapes[s].k, 1.0f, x, (int)shapes[s].k, shapes[s].w, (int)shapes[s].n,
                        0.0f, y, (int)shapes[s].n);
            flops += 2.0 * (double)T * (double)shapes[s].k * (double)shapes[s].n;
        }
        double dt = now_seconds() - t0;
        if (dt < best) best = dt;
    }
    free(x);
    free(y);
    return flops / best / 1e9;
}

// Tokens per second of sgemv alone over every matrix one decode step reads:
// 4 per layer and the (V, C) output layer (49 for GPT-2 124M).
static double sgemv_tok_s(const Model *m) {
    size_t C = (size_t)m->config.n_embd, V = (size_t)m->config.vocab_size;
    float *x = calloc(4 * C, sizeof(float)), *y = calloc(V, sizeof(float));
    double best = 1e30;
    for (int rep = 0; rep < 10; rep++) {
        double t0 = now_seconds();
        for (int L = 0; L < m->config.n_layer; L++) {
            const GPT2Layer *l = &m->weights.layers[L];
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)C, (int)(3 * C), 1, l->qkv_w.data, (int)(3 * C), x, 1, 0, y, 1);
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)C, (int)C, 1, l->attn_proj_w.data, (int)C, x, 1, 0, y, 1);
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)C, (int)(4 * C), 1, l->fc_w.data, (int)(4 * C), x, 1, 0, y, 1);
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)(4 * C), (int)C, 1, l->fc_proj_w.data, (int)C, x, 1, 0, y, 1);
        }
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)V, (int)C, 1, m->weights.wte.data, (int)C, x, 1, 0, y, 1);
        double dt = now_seconds() - t0;
        if (dt < best) best = dt;
    }
    free(x);
    free(y);
    return 1.0 / best;
}

// ---------------------------------------------------------------------------
// our forward pass

static int argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int)best;
}

static void run_forward(const Model *m, size_t prompt_len, size_t n_decode, double *prefill_tok_s,
                        double *decode_tok_s) {
    GptError err = {{0}};
    KVCache cache;
    ForwardState fs;
    size_t cap = prompt_len + n_decode;
    if (kvcache_init(&cache, &m->config, DTYPE_F32, cap, &err) != 0 ||
        forward_state_init(&fs, &m->config, prompt_len, cap, 1, NULL, &err) != 0) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
    int32_t *ids = malloc(cap * sizeof *ids);
    for (size_t i = 0; i < prompt_len; i++) ids[i] = (int32_t)((i * 2654435761u) % 50000);
    // One untimed run warms the pages and the BLAS threads.
    SeqInput warm = {.tokens = ids, .n_tokens = 8, .cache = &cache, .want = LOGITS_LAST};
    gpt2_forward(m, &fs, &warm, 1, &err);
    kvcache_reset(&cache);

    // Prefill: the best of three, the machine being shared.
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        kvcache_reset(&cache);
        double t0 = now_seconds();
        SeqInput seq = {.tokens = ids, .n_tokens = prompt_len, .cache = &cache, .want = LOGITS_LAST};
        if (gpt2_forward(m, &fs, &seq, 1, &err) != 0) {
            fprintf(stderr, "bench: %s\n", err.msg);
            exit(1);
        }
        if (now_seconds() - t0 < best) best = now_seconds() - t0;
    }
    *prefill_tok_s = (double)prompt_len / best;
    double t0 = now_seconds();
    for (size_t i = 0; i < n_decode; i++) {
        int32_t next = argmax(fs.logits, (size_t)m->config.vocab_size);
        SeqInput step = {.tokens = &next, .n_tokens = 1, .cache = &cache, .want = LOGITS_LAST};
        if (gpt2_forward(m, &fs, &step, 1, &err) != 0) {
            fprintf(stderr, "bench: %s\n", err.msg);
            exit(1);
        }
    }
    *decode_tok_s = (double)n_decode / (now_seconds() - t0);
    free(ids);
    forward_state_free(&fs);
    kvcache_free(&cache);
}

// Aggregate decode tokens per second when B sequences step together: one
// gpt2_forward call per step carries one new token of each, so each weight
// matrix is read once for B tokens (sgemm with M = B instead of sgemv).
static double batched_decode_tok_s(const Model *m, size_t B, size_t prompt_len, size_t steps) {
    GptError err = {{0}};
    size_t cap = prompt_len + steps;
    KVCache *caches = calloc(B, sizeof *caches);
    SeqInput *seqs = calloc(B, sizeof *seqs);
    int32_t *ids = malloc(prompt_len * sizeof *ids), *next = malloc(B * sizeof *next);
    ForwardState fs;
    if (forward_state_init(&fs, &m->config, B > prompt_len ? B : prompt_len, cap, B, NULL, &err) != 0) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
    for (size_t b = 0; b < B; b++) {
        if (kvcache_init(&caches[b], &m->config, DTYPE_F32, cap, &err) != 0) {
            fprintf(stderr, "bench: %s\n", err.msg);
            exit(1);
        }
        for (size_t i = 0; i < prompt_len; i++) ids[i] = (int32_t)((i * 2654435761u + b * 7919u) % 50000);
        SeqInput p = {.tokens = ids, .n_tokens = prompt_len, .cache = &caches[b], .want = LOGITS_LAST};
        gpt2_forward(m, &fs, &p, 1, &err);
        next[b] = (int32_t)argmax(fs.logits, (size_t)m->config.vocab_size);
    }
    double t0 = now_seconds();
    for (size_t s = 0; s < steps; s++) {
        for (size_t b = 0; b < B; b++)
            seqs[b] = (SeqInput){.tokens = &next[b], .n_tokens = 1, .cache = &caches[b], .want = LOGITS_LAST};
        if (gpt2_forward(m, &fs, seqs, B, &err) != 0) {
            fprintf(stderr, "bench: %s\n", err.msg);
            exit(1);
        }
        for (size_t b = 0; b < B; b++)
            next[b] = (int32_t)argmax(fs.logits + seqs[b].logits_row * (size_t)m->config.vocab_size,
                                      (size_t)m->config.vocab_size);
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

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_model MODEL_DIR [threads...]\n");
        return 2;
    }
    Model m;
    GptError err = {{0}};
    if (model_load(&m, argv[1], &err) != 0) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    int thread_counts[16] = {1, 2}, n_counts = 2;
    if (argc > 2) {
        n_counts = 0;
        for (int i = 2; i < argc && n_counts < 16; i++) thread_counts[n_counts++] = atoi(argv[i]);
    }
    const size_t prompt_len = 512, n_decode = 128;
    size_t C = (size_t)m.config.n_embd, L = (size_t)m.config.n_layer;
    // Multiply-adds per token in the layers' matmuls (12 C^2 per layer); the
    // logits of the last position only are a rounding error at T = 512.
    double flops_per_token = 2.0 * 12.0 * (double)C * (double)C * (double)L;

    size_t n_words = ((size_t)1 << 30) / sizeof(uint64_t);
    uint64_t *buf = malloc(n_words * sizeof *buf);
    for (size_t i = 0; i < n_words; i++) buf[i] = i;

    printf("model: %s (%s), %zu params, %.1f MB float32 read per decoded token\n", argv[1],
           m.source_kind, m.n_params, (double)m.weight_bytes / 1e6);
    for (int k = 0; k < n_counts; k++) {
        int t = thread_counts[k];
        openblas_set_num_threads(t);
        double bw_loop = read_bandwidth(buf, n_words, t);
        double gflops = sgemm_gflops(&m, prompt_len);
        double prefill_bound = gflops * 1e9 / flops_per_token;
        double gemv = sgemv_tok_s(&m);
        double bw_gemv = gemv * (double)m.weight_bytes / 1e9;
        double bw = bw_loop > bw_gemv ? bw_loop : bw_gemv;
        double bound = bw * 1e9 / (double)m.weight_bytes;
        double prefill, decode;
        run_forward(&m, prompt_len, n_decode, &prefill, &decode);
        printf("threads %d:\n", t);
        printf("  memory read bandwidth      %8.1f GB/s  (read loop %.1f, sgemv %.1f) -> float32 decode bound %.1f tok/s\n",
               bw, bw_loop, bw_gemv, bound);
        printf("  sgemm on layer shapes      %8.1f GFLOP/s -> prefill bound %.1f tok/s (T=%zu)\n", gflops,
               prefill_bound, prompt_len);
        printf("  sgemv alone, one token     %8.1f tok/s  (the %d matrices of one decode step)\n", gemv,
               4 * m.config.n_layer + 1);
        printf("  gpt prefill (%zu tokens)   %8.1f tok/s  = %3.0f%% of the sgemm bound\n", prompt_len, prefill,
               100.0 * prefill / prefill_bound);
        printf("  gpt decode (%zu tokens)    %8.1f tok/s  = %3.0f%% of the bandwidth bound\n", n_decode, decode,
               100.0 * decode / bound);
        printf("  batched decode (tokens of all sequences per second, 64-token prompts, 32 steps):\n   ");
        const size_t batches[] = {1, 4, 16};
        for (size_t b = 0; b < sizeof batches / sizeof *batches; b++)
            printf("  B=%zu %.1f tok/s", batches[b], batched_decode_tok_s(&m, batches[b], 64, 32));
        printf("\n");
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("bench process peak RSS: %.1f MiB (includes the 1 GiB bandwidth buffer)\n",
           (double)ru.ru_maxrss / 1024.0);
    free(buf);
    model_free(&m);
    return 0;
}

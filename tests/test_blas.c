/*
 * test_blas.c - the OpenBLAS backend (blas.h, gpt --blas) against the plain
 * references, on ragged shapes:
 *   - blas_matmul against matmul_reference (the double-summed loop): a
 *     relative error of at most 1e-5 of the row's magnitude; calls it must
 *     leave to our kernels (fewer than BLAS_MIN_ROWS rows, a matrix not
 *     float32) are left alone;
 *   - blas_attention against attention_query_reference, query by query,
 *     for chunks that start the sequence and chunks after cached positions,
 *     F32 and F16 caches: within 1e-5;
 *   - the whole model: a 200-token prefill of the demo model (as float32)
 *     through OpenBLAS gives last-token logits within 1e-4 of our kernels',
 *     and not the same bits (so the test knows the path ran).
 * The references of transformers themselves are held to --blas in
 * test_demo (the held-out windows' log-probabilities).
 */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/attention.h"
#include "kernels/blas.h"
#include "check.h"
#include "forward.h"
#include "model/loader.h"
#include "kernels/matmul.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float uniform(void) {  // [-1, 1)
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// Each test runs on no pool (the caller alone) and on a pool of 3 threads,
// which splits the outputs and the heads.
static void test_matmul_shapes(ThreadPool *pool) {
    const size_t shapes[][3] = {{64, 17, 33}, {65, 64, 64}, {100, 3, 129}, {127, 31, 768}, {64, 1, 1}, {130, 50, 7}};
    int left_alone = 1;
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        size_t T = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *x = malloc(T * K * sizeof *x), *w = malloc(N * K * sizeof *w), *b = malloc(N * sizeof *b);
        float *out = malloc(T * N * sizeof *out), *ref = malloc(T * N * sizeof *ref);
        for (size_t i = 0; i < T * K; i++) x[i] = uniform();
        for (size_t i = 0; i < N * K; i++) w[i] = uniform();
        for (size_t i = 0; i < N; i++) b[i] = uniform();
        Weight W = {.dtype = DTYPE_F32, .n_in = K, .n_out = N, .data = w};
        for (int acc = 0; acc < 2; acc++) {
            for (size_t i = 0; i < T * N; i++) out[i] = ref[i] = uniform();
            CHECK(blas_matmul(out, x, &W, acc ? NULL : b, T, acc, pool) == 1, "T %zu: not taken", T);
            matmul_reference(ref, x, &W, acc ? NULL : b, T, acc);
            for (size_t i = 0; i < T * N; i++) {
                double d = fabs(out[i] - ref[i]) / (sqrt((double)K) + fabs(ref[i]));
                if (d > worst) worst = d;
            }
        }
        // fewer rows, or another dtype: ours
        float before = out[0];
        left_alone &= blas_matmul(out, x, &W, b, BLAS_MIN_ROWS - 1, 0, pool) == 0 && out[0] == before;
        Weight half = W;
        half.dtype = DTYPE_F16;
        left_alone &= blas_matmul(out, x, &half, b, T, 0, pool) == 0 && out[0] == before;
        free(x), free(w), free(b), free(out), free(ref);
    }
    CHECK(worst < 1e-5, "blas_matmul: relative error %.3g", worst);
    CHECK(left_alone, "blas_matmul took a call it must leave to our kernels");
    printf("blas_matmul, %d threads: %zu shapes, worst relative error %.3g\n", threadpool_size(pool),
           sizeof shapes / sizeof *shapes, worst);
}

static void test_attention(ThreadPool *pool) {
    GPT2Config cfg = {.n_layer = 2, .n_head = 3, .n_embd = 3 * 64, .n_ctx = 300, .vocab_size = 10};
    size_t C = (size_t)cfg.n_embd, HS = 64;
    double worst = 0;
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t P = 0; P <= 70; P += 70) {
            size_t n = 90, Tk = P + n;
            KVCache c;
            GptError err = {{0}};
            if (kvcache_init(&c, &cfg, f16 ? DTYPE_F16 : DTYPE_F32, Tk, &err) != 0) {
                CHECK(0, "%s", err.msg);
                return;
            }
            float *qkv = malloc(n * 3 * C * sizeof *qkv), *attn = malloc(n * C * sizeof *attn);
            float *scratch = malloc(blas_attention_floats(n, Tk, HS, threadpool_size(pool)) * sizeof *scratch);
            float kv[2][64], want[64], *scores = malloc((Tk + 16) * sizeof *scores);
            for (size_t pos = 0; pos < Tk; pos++)
                for (size_t h = 0; h < 3; h++) {
                    for (size_t d = 0; d < HS; d++) kv[0][d] = 2 * uniform(), kv[1][d] = uniform();
                    kvcache_store(&c, 1, h, pos, kv[0], kv[1]);
                }
            for (size_t i = 0; i < n * 3 * C; i++) qkv[i] = 2 * uniform();
            c.n_tokens = P;  // the chunk's own keys are stored; P came before
            // GPT-2's 1/sqrt(HS); with the f16 cache scale_attn_by_inverse_layer_idx's of layer 1
            float scale = f16 ? 0.125f / 2 : 0.125f;
            blas_attention(attn, qkv, &c, 1, n, C, scale, scratch, pool);
            for (size_t t = 0; t < n; t++)
                for (size_t h = 0; h < 3; h++) {
                    attention_query_reference(want, qkv + t * 3 * C + h * HS, &c, 1, h, P + t + 1, scale, scores);
                    for (size_t d = 0; d < HS; d++) {
                        double e = fabs(attn[t * C + h * HS + d] - want[d]);
                        if (e > worst) worst = e;
                    }
                }
            free(qkv), free(attn), free(scratch), free(scores);
            kvcache_free(&c);
        }
    CHECK(worst < 1e-5, "blas_attention: off by %.3g", worst);
    printf("blas_attention, %d threads: chunks of 90 at 0 and 70 cached, F32 and F16: worst %.3g\n",
           threadpool_size(pool), worst);
}

static void test_model(void) {
    Model m;
    GptError err = {{0}};
    WeightOptions f32 = {.matrix_dtype = DTYPE_F32};
    if (model_load_with(&m, "models/demo.bin", &f32, &err) != 0) {
        CHECK(0, "%s", err.msg);
        return;
    }
    size_t n = 200, V = (size_t)m.config.vocab_size;
    int32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919) % 50000);
    float *logits[2];
    for (int b = 0; b < 2; b++) {
        KVCache c;
        ForwardState fs;
        logits[b] = malloc(V * sizeof(float));
        if (kvcache_init(&c, &m.config, DTYPE_F32, n, &err) || forward_state_init(&fs, &m.config, n, n, 1, NULL, &err) ||
            (b && forward_state_use_blas(&fs, &m.config, &err))) {
            CHECK(0, "%s", err.msg);
            return;
        }
        SeqInput s = {.tokens = ids, .n_tokens = n, .cache = &c, .want = LOGITS_LAST};
        CHECK(gpt2_forward(&m, &fs, &s, 1, &err) == 0, "forward: %s", err.msg);
        memcpy(logits[b], fs.logits, V * sizeof(float));
        forward_state_free(&fs);
        kvcache_free(&c);
    }
    double worst = 0;
    for (size_t i = 0; i < V; i++) worst = fmax(worst, fabs(logits[0][i] - logits[1][i]));
    CHECK(worst < 1e-4, "demo prefill of %zu: OpenBLAS's logits off ours by %.3g", n, worst);
    CHECK(memcmp(logits[0], logits[1], V * sizeof(float)) != 0, "OpenBLAS gave our kernels' bits: did it run?");
    printf("demo model, prefill of %zu tokens: OpenBLAS's last logits within %.3g of ours\n", n, worst);
    free(logits[0]), free(logits[1]), free(ids);
    model_free(&m);
}

// The threads of this process (/proc/self/task), or -1 where there is no /proc.
static int threads_of_this_process(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

// blas_load opens OpenBLAS (not linked: gpt does not load it unless --blas)
// and ends the threads its constructor starts (one per core but one): the
// process has the threads it had, and OpenBLAS still computes (every test
// after this one runs on it).
static void test_load(void) {
    int before = threads_of_this_process();
    GptError err = {{0}};
    CHECK(blas_load(&err) == 0, "blas_load: %s", err.msg);
    CHECK(blas_load(&err) == 0, "blas_load again: %s", err.msg);
    int after = threads_of_this_process();
    char name[256];
    printf("test_blas: %s; threads of this process: %d before blas_load, %d after\n",
           blas_describe(name, sizeof name), before, after);
    if (before >= 0) CHECK(after == before, "blas_load must leave OpenBLAS's threads ended: %d threads, %d before", after, before);
}

int main(void) {
    test_load();
    GptError err = {{0}};
    ThreadPool *pool = threadpool_create(3, &err);
    CHECK(pool != NULL, "%s", err.msg);
    test_matmul_shapes(NULL);
    test_attention(NULL);
    if (pool) {
        test_matmul_shapes(pool);
        test_attention(pool);
    }
    threadpool_free(pool);
    test_model();
    return check_exit("test_blas");
}

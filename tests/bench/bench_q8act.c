/*
 * bench_q8act.c - Q8's two arithmetics (matmul_kernels.h) side by side on
 * GPT-2 124M's four layer products (768x2304, 768x768, 768x3072,
 * 3072x768): int16 activations (vpmaddwd, the default) against int8 ones
 * (Weight.q8_int8, --q8-act int8: vpdpbusd with AVX512-VNNI), 512 rows (a
 * prefill of 512 tokens) at 1 and 2 threads through matmul(); then the
 * single-thread kernels alone (matmul_rows_route, one group of 32 rows), so
 * that int8 with VNNI and without stand beside int16, and AVX2's two; interleaved, best of
 * the rounds. Then each one's product error against matmul_reference (the
 * same weights, summed in double): the activations' rounding (2^-15 against
 * 2^-8 of a block's largest input) on the 768x768 product.
 *
 *   bench_q8act [rounds]        (default 7)
 *
 * Napkin (matmul_kernels.h, "NAPKIN"): per 128 products of one output,
 * int16 is 12 vector operations (4 x vpmaddwd, vcvtdq2ps, vfmadd), int8
 * with VNNI 5 (2 x vpdpbusd, vcvtdq2ps, vmulps, vfmadd), so up to 2.4x.
 * Prints numbers; asserts nothing about time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/threads.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"

#include "bench_util.h"

enum { N_SHAPES = 4, T_PREFILL = 512 };
static const size_t SHAPES[N_SHAPES][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};  // K, N

// Seconds for the four products at T rows through matmul().
static double products_seconds(size_t T, float *out, const float *x, const Weight *W, const float *bias,
                               const MatmulContext *mm) {
    double t0 = now_seconds();
    for (int s = 0; s < N_SHAPES; s++) matmul(out, x, &W[s], bias, T, 0, mm);
    return now_seconds() - t0;
}

// Seconds for the four products' kernels on one group of rows, one thread.
static double kernel_seconds(CpuIsa isa, int vnni, size_t B, float *out, const float *x, const Weight *W, const float *bias,
                             float *scratch) {
    double t0 = now_seconds();
    for (int s = 0; s < N_SHAPES; s++)
        matmul_rows_route(isa, vnni, 0, out, x, &W[s], bias, B, 0, W[s].n_out, 0, scratch);
    return now_seconds() - t0;
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 7;
    char cpu[256];
    cpu_description(cpu, sizeof cpu);
    const CpuIsa isa = cpu_best_isa();
    const int vnni = isa == CPU_AVX512 && cpu_has_avx512_vnni();
    printf("cpu: %s; kernels %s%s\n", cpu, cpu_isa_name(isa), vnni ? " with VNNI" : "");
    float *x = aligned_alloc(64, T_PREFILL * 3072 * sizeof(float));
    float *out = aligned_alloc(64, T_PREFILL * 3072 * sizeof(float));
    float *bias = malloc(3072 * sizeof(float));
    Weight W[2][N_SHAPES];  // [int8][shape]: the same bytes
    unsigned state = 12345;
    for (size_t i = 0; i < T_PREFILL * 3072; i++) {  // activations of a few scales, as a layer's are
        state = state * 1103515245u + 12345u;
        x[i] = ((float)(state >> 8) / 16777216.0f - 0.5f) * (i % 61 == 0 ? 20.0f : 1.0f);
    }
    for (size_t i = 0; i < 3072; i++) bias[i] = 0.01f * (float)(i % 7);
    for (int s = 0; s < N_SHAPES; s++) {
        size_t K = SHAPES[s][0], N = SHAPES[s][1];
        float *w = malloc(K * N * sizeof(float));
        for (size_t i = 0; i < K * N; i++) {
            state = state * 1103515245u + 12345u;
            w[i] = ((float)(state >> 8) / 16777216.0f - 0.5f) * 0.1f;
        }
        void *bytes = aligned_alloc(64, (weight_bytes(DTYPE_Q8, N, K) + 63) / 64 * 64);
        weight_encode(bytes, DTYPE_Q8, w, N, K);
        W[0][s] = weight_view(DTYPE_Q8, bytes, N, K);
        W[1][s] = W[0][s];
        W[1][s].q8_int8 = 1;
        free(w);
    }
    double flops_per_row = 0;
    for (int s = 0; s < N_SHAPES; s++) flops_per_row += 2.0 * (double)SHAPES[s][0] * (double)SHAPES[s][1];

    for (int t = 1; t <= 2; t++) {
        GptError err = {{0}};
        ThreadPool *pool = threadpool_create(t, &err);
        if (!pool) {
            fprintf(stderr, "bench_q8act: %s\n", err.msg);
            return 1;
        }
        size_t per = matmul_scratch_floats(MATMUL_GROUP, 3072);
        float *scratch = aligned_alloc(64, (size_t)t * per * sizeof(float));
        MatmulContext mm = {pool, scratch, per, isa, NULL};
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < rounds; r++)
            for (int a = 0; a < 2; a++) {
                double sec = products_seconds(T_PREFILL, out, x, W[a], bias, &mm);
                if (sec < best[a]) best[a] = sec;
            }
        double g16 = flops_per_row * T_PREFILL / best[0] / 1e9, g8 = flops_per_row * T_PREFILL / best[1] / 1e9;
        printf("threads %d, %d rows, best of %d: Q8 int16 %.1f GOP/s, Q8 x int8 %.1f GOP/s: %.2fx\n", t, T_PREFILL,
               rounds, g16, g8, g8 / g16);
        free(scratch);
        threadpool_free(pool);
    }

    if (isa == CPU_AVX512) {  // the kernels alone, one thread, one group of 32 rows
        size_t per = matmul_scratch_floats(MATMUL_GROUP, 3072);
        float *scratch = aligned_alloc(64, per * sizeof(float));
        double best[3] = {1e30, 1e30, 1e30};  // int16, int8 without VNNI, int8 with VNNI
        for (int r = 0; r < 4 * rounds; r++)
            for (int a = 0; a < 3; a++) {
                if (a == 2 && !vnni) continue;
                double sec = kernel_seconds(CPU_AVX512, a == 2, MATMUL_GROUP, out, x, W[a > 0], bias, scratch);
                if (sec < best[a]) best[a] = sec;
            }
        double g[3];
        for (int a = 0; a < 3; a++) g[a] = flops_per_row * MATMUL_GROUP / best[a] / 1e9;
        printf("kernels alone (avx512, 4x4 tiles, 32 rows, one thread): int16 %.1f, int8 no VNNI %.1f (%.2fx)", g[0],
               g[1], g[1] / g[0]);
        if (vnni) printf(", int8 VNNI %.1f GOP/s (%.2fx)", g[2], g[2] / g[0]);
        printf("\n");
        free(scratch);
    }
    if (cpu_isa_supported(CPU_AVX2)) {  // AVX2's: int16 against int8 (vpmaddubsw + vpmaddwd)
        size_t per = matmul_scratch_floats(MATMUL_GROUP, 3072);
        float *scratch = aligned_alloc(64, per * sizeof(float));
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < 4 * rounds; r++)
            for (int a = 0; a < 2; a++) {
                double sec = kernel_seconds(CPU_AVX2, 0, MATMUL_GROUP, out, x, W[a], bias, scratch);
                if (sec < best[a]) best[a] = sec;
            }
        double g16 = flops_per_row * MATMUL_GROUP / best[0] / 1e9, g8 = flops_per_row * MATMUL_GROUP / best[1] / 1e9;
        printf("kernels alone (avx2, default tiles, 32 rows, one thread): int16 %.1f, int8 %.1f GOP/s (%.2fx)\n", g16,
               g8, g8 / g16);
        free(scratch);
    }

    // the product error: 768x768, 64 rows, against the double reference
    {
        enum { T = 64 };
        const size_t N = SHAPES[1][1], K = SHAPES[1][0];
        float *ref = malloc(T * N * sizeof(float));
        matmul_reference(ref, x, &W[0][1], NULL, T, 0);
        for (int a = 0; a < 2; a++) {
            matmul(out, x, &W[a][1], NULL, T, 0, NULL);
            double se = 0, sr = 0, worst = 0;
            for (size_t i = 0; i < T * N; i++) {
                double e = (double)out[i] - ref[i];
                se += e * e, sr += (double)ref[i] * ref[i];
                if (fabs(e) > worst) worst = fabs(e);
            }
            printf("Q8 %s: product error against the reference on the same weights: rms %.3g relative, max %.3g\n",
                   a ? "x int8" : "int16", sqrt(se / sr), worst);
        }
        (void)K;
        free(ref);
    }
    for (int s = 0; s < N_SHAPES; s++) free((void *)W[0][s].data);
    free(x), free(out), free(bias);
    return 0;
}

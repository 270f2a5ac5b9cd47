/*
 * bench_blas.c - where --blas should start: our float32 matmul() against
 * blas_matmul() (OpenBLAS sgemm on our threads) on GPT-2 124M's four layer
 * products, by row count T, at 1 and 2 threads; interleaved, best of the
 * rounds. blas.h's BLAS_MIN_ROWS is the row count from which OpenBLAS is
 * taken; this prints the measurement it is chosen by.
 *
 *   bench_blas
 *
 * Bound (napkin): both run the same 2 T K N flops; in the row counts below
 * 64 a product is mostly the weights' read (T 16: 16 rows x 2 flops per
 * weight of 4 bytes = 8 flops a byte, under what a core's FMAs do), so the
 * two should be level there, and OpenBLAS's packing only pays beyond.
 * Prints numbers; asserts nothing about time.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernels/blas.h"
#include "base/clock.h"
#include "kernels/matmul.h"
#include "base/threads.h"

#include "bench_util.h"

char *openblas_get_corename(void);

enum { N_SHAPES = 4, MAX_T = 512, ROUNDS = 5 };
static const size_t SHAPES[N_SHAPES][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};  // K, N

// Seconds for the four products at T rows, ours (blas 0) or OpenBLAS's.
static double products_seconds(int blas, size_t T, float *out, const float *x, const Weight *W, const float *bias,
                               const MatmulContext *mm, ThreadPool *pool) {
    double t0 = now_seconds();
    for (int s = 0; s < N_SHAPES; s++)
        if (blas) blas_product(out, x, &W[s], bias, T, 0, pool);
        else matmul(out, x, &W[s], bias, T, 0, mm);
    return now_seconds() - t0;
}

int main(void) {
    char cpu[256];
    cpu_description(cpu, sizeof cpu);
    printf("cpu: %s; kernels %s; OpenBLAS core %s\n", cpu, matmul_isa_in_use(), openblas_get_corename());
    GptError err = {{0}};
    if (blas_load(&err) != 0) {
        fprintf(stderr, "bench_blas: %s\n", err.msg);
        return 1;
    }
    float *x = aligned_alloc(64, MAX_T * 3072 * sizeof(float));
    float *out = aligned_alloc(64, MAX_T * 3072 * sizeof(float));
    float *bias = malloc(3072 * sizeof(float));
    Weight W[N_SHAPES];
    for (size_t i = 0; i < MAX_T * 3072; i++) x[i] = 0.001f * (float)(i % 97) - 0.05f;
    for (size_t i = 0; i < 3072; i++) bias[i] = 0.01f * (float)(i % 7);
    for (int s = 0; s < N_SHAPES; s++) {
        size_t K = SHAPES[s][0], N = SHAPES[s][1];
        float *w = aligned_alloc(64, K * N * sizeof(float));
        for (size_t i = 0; i < K * N; i++) w[i] = 0.0001f * (float)(i % 1013) - 0.05f;
        W[s] = (Weight){.dtype = DTYPE_F32, .n_in = K, .n_out = N, .data = w};
    }
    double flops_per_row = 0;
    for (int s = 0; s < N_SHAPES; s++) flops_per_row += 2.0 * (double)SHAPES[s][0] * (double)SHAPES[s][1];
    const size_t Ts[] = {16, 32, 48, 64, 96, 128, 256, 512};
    for (int t = 1; t <= 2; t++) {
        GptError err = {{0}};
        ThreadPool *pool = threadpool_create(t, &err);
        if (!pool) {
            fprintf(stderr, "bench_blas: %s\n", err.msg);
            return 1;
        }
        size_t per = matmul_scratch_floats(MATMUL_GROUP, 3072);
        float *scratch = aligned_alloc(64, (size_t)t * per * sizeof(float));
        MatmulContext mm = {pool, scratch, per, cpu_best_isa(), NULL};
        printf("threads %d: GFLOP/s of the four layer products (768x2304, 768x768, 768x3072, 3072x768), best of %d\n", t,
               ROUNDS);
        printf("  %5s %8s %8s %7s\n", "rows", "ours", "OpenBLAS", "ratio");
        size_t first_win = 0;
        for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
            size_t T = Ts[i];
            double best[2] = {1e30, 1e30};
            for (int r = 0; r < ROUNDS; r++)
                for (int b = 0; b < 2; b++) {
                    double sec = products_seconds(b, T, out, x, W, bias, &mm, pool);
                    if (sec < best[b]) best[b] = sec;
                }
            double ours = flops_per_row * (double)T / best[0] / 1e9, theirs = flops_per_row * (double)T / best[1] / 1e9;
            printf("  %5zu %8.1f %8.1f %6.2fx\n", T, ours, theirs, theirs / ours);
            if (!first_win && theirs > ours) first_win = T;
        }
        if (first_win) printf("  OpenBLAS first ahead at %zu rows; --blas takes calls of %d rows or more\n", first_win, BLAS_MIN_ROWS);
        else printf("  OpenBLAS ahead at no row count here; --blas takes calls of %d rows or more\n", BLAS_MIN_ROWS);
        free(scratch);
        threadpool_free(pool);
    }
    for (int s = 0; s < N_SHAPES; s++) free((void *)W[s].data);
    free(x), free(out), free(bias);
    return 0;
}

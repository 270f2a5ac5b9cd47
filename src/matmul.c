/*
 * matmul.c - see matmul.h.
 *
 * Napkin math for the bound: a product reads every element of W once; with
 * one row of inp (decode) that is all the work there is, so its speed limit
 * is memory bandwidth / bytes of W. With T rows (prefill) each element of W
 * does T multiply-adds, and sgemm's compute rate is the limit.
 */
#include "matmul.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

float weight_at(const Weight *W, size_t i, size_t j) {
    switch (W->dtype) {
    case DTYPE_F32: return ((const float *)W->data)[j * W->n_in + i];
    case DTYPE_F16: return f16_to_f32(((const uint16_t *)W->data)[j * W->n_in + i]);
    case DTYPE_BF16: return bf16_to_f32(((const uint16_t *)W->data)[j * W->n_in + i]);
    case DTYPE_Q8: {
        size_t K_pad = q8_row_quants(W->n_in);
        float d = f16_to_f32(W->scales[j * (K_pad / Q8_BLOCK) + i / Q8_BLOCK]);
        return d * (float)((const int8_t *)W->data)[j * K_pad + i];
    }
    }
    return 0.0f;
}

void matmul_reference(float *out, const float *inp, const Weight *W, const float *bias,
                      size_t T, int accumulate) {
    size_t K = W->n_in, N = W->n_out;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < N; j++) {
            double sum = bias ? bias[j] : 0.0;
            for (size_t i = 0; i < K; i++) sum += (double)inp[t * K + i] * weight_at(W, i, j);
            out[t * N + j] = (float)(accumulate ? out[t * N + j] + sum : sum);
        }
}

void weight_row(float *out, const Weight *W, size_t row) {
    size_t K = W->n_in;
    if (W->dtype == DTYPE_F32) {
        memcpy(out, (const float *)W->data + row * K, K * sizeof *out);
        return;
    }
    for (size_t i = 0; i < K; i++) out[i] = weight_at(W, i, row);
}

// out(T, n) += inp(T, K) @ w(n, K)^T for a float32 block of n rows of W
// whose own rows are K apart; out's rows are ldo apart.
static void blas_rows(float *out, size_t ldo, const float *inp, const float *w, size_t T, size_t K, size_t n,
                      float beta) {
    if (T == 1)
        // out(n) = w(n,K) @ inp(K)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)K, 1.0f, w, (int)K, inp, 1, beta, out, 1);
    else
        // out(T,n) = inp(T,K) @ w(n,K)^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)n, (int)K, 1.0f, inp, (int)K, w,
                    (int)K, beta, out, (int)ldo);
}

// Rows of a reduced-precision W widened to float32 at a time.
enum { PANEL_ROWS = 256 };

void matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T,
            int accumulate, ThreadPool *pool) {
    (void)pool;
    size_t K = W->n_in, N = W->n_out;
    // The bias goes in first, and BLAS adds the product to it (beta = 1).
    float beta = accumulate ? 1.0f : 0.0f;
    if (bias) {
        for (size_t t = 0; t < T; t++) {
            float *row = out + t * N;
            if (accumulate)
#pragma omp simd
                for (size_t j = 0; j < N; j++) row[j] += bias[j];
            else
                memcpy(row, bias, N * sizeof *row);
        }
        beta = 1.0f;
    }
    if (W->dtype == DTYPE_F32) {
        blas_rows(out, N, inp, W->data, T, K, N, beta);
        return;
    }
    // Other dtypes: a panel of rows widened to float32, then BLAS on it.
    float *panel = malloc(PANEL_ROWS * K * sizeof *panel);
    if (!panel) {
        matmul_reference(out, inp, W, NULL, T, beta != 0.0f);
        return;
    }
    for (size_t j0 = 0; j0 < N; j0 += PANEL_ROWS) {
        size_t n = N - j0 < PANEL_ROWS ? N - j0 : PANEL_ROWS;
        for (size_t r = 0; r < n; r++) weight_row(panel + r * K, W, j0 + r);
        if (T == 1) blas_rows(out + j0, N, inp, panel, 1, K, n, beta);
        else blas_rows(out + j0, N, inp, panel, T, K, n, beta);
    }
    free(panel);
}

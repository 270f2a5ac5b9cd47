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
#include <string.h>

float weight_at(const Weight *W, size_t i, size_t j) {
    size_t at = W->layout == WEIGHT_IN_OUT ? i * W->n_out + j : j * W->n_in + i;
    switch (W->dtype) {
    case DTYPE_F32: return ((const float *)W->data)[at];
    case DTYPE_F16: return f16_to_f32(((const uint16_t *)W->data)[at]);
    case DTYPE_BF16: return bf16_to_f32(((const uint16_t *)W->data)[at]);
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
    if (W->dtype == DTYPE_F32 && W->layout == WEIGHT_OUT_IN) {
        memcpy(out, (const float *)W->data + row * K, K * sizeof *out);
        return;
    }
    for (size_t i = 0; i < K; i++) out[i] = weight_at(W, i, row);
}

void matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T,
            int accumulate) {
    size_t K = W->n_in, N = W->n_out;
    if (W->dtype != DTYPE_F32) {
        matmul_reference(out, inp, W, bias, T, accumulate);
        return;
    }
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
    const float *w = W->data;
    if (W->layout == WEIGHT_IN_OUT) {
        // One row is a matrix-vector product: sgemv streams W once, which is
        // all decode can do, and skips sgemm's packing of a one-row operand.
        if (T == 1)
            // out(N) = W(K,N)^T @ inp(K)
            cblas_sgemv(CblasRowMajor, CblasTrans, (int)K, (int)N, 1.0f, w, (int)N, inp, 1, beta,
                        out, 1);
        else
            // out(T,N) = inp(T,K) @ W(K,N)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)N, (int)K, 1.0f,
                        inp, (int)K, w, (int)N, beta, out, (int)N);
    } else {
        if (T == 1)
            // out(N) = W(N,K) @ inp(K)
            cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)K, 1.0f, w, (int)K, inp, 1, beta,
                        out, 1);
        else
            // out(T,N) = inp(T,K) @ W(N,K)^T
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)N, (int)K, 1.0f, inp,
                        (int)K, w, (int)K, beta, out, (int)N);
    }
}

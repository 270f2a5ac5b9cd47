/*
 * matmul_scalar.c - the canonical arithmetic of matmul_kernels.h in plain C:
 * the kernel for CPUs without AVX2 (and for every CPU that is not x86-64),
 * and the executable specification the SIMD kernels match bit for bit.
 *
 * It follows the specification literally (16 lanes, one fmaf per lane and
 * step, zeros past K, the fixed tree), only blocked so that 16 widened
 * weights serve up to SCALAR_ROWS batch rows. fmaf is one rounding whatever
 * the hardware (a library call where there is no FMA instruction), and
 * -ffp-contract=off keeps the compiler from fusing anything else.
 */
#include "matmul_kernels.h"

#include <math.h>
#include <stdint.h>

enum { LANES = 16, SCALAR_ROWS = 8 };

// w(n, k0 .. k0 + 15) as exact float32, +0 past K.
static void widen16(float *w, const Weight *W, size_t n, size_t k0) {
    size_t K = W->n_in, m = K - k0 < LANES ? K - k0 : LANES;
    switch (W->dtype) {
    case DTYPE_F32: {
        const float *row = (const float *)W->data + n * K + k0;
        for (size_t l = 0; l < m; l++) w[l] = row[l];
        break;
    }
    case DTYPE_F16: {
        const uint16_t *row = (const uint16_t *)W->data + n * K + k0;
        for (size_t l = 0; l < m; l++) w[l] = f16_to_f32(row[l]);
        break;
    }
    case DTYPE_BF16: {
        const uint16_t *row = (const uint16_t *)W->data + n * K + k0;
        for (size_t l = 0; l < m; l++) w[l] = bf16_to_f32(row[l]);
        break;
    }
    case DTYPE_Q8: {
        size_t Kp = q8_row_quants(K);
        const int8_t *q = (const int8_t *)W->data + n * Kp + k0;
        // k0 is a multiple of 16, so the 16 lanes lie in one block of 32
        float d = f16_to_f32(W->scales[n * (Kp / Q8_BLOCK) + k0 / Q8_BLOCK]);
        for (size_t l = 0; l < m; l++) w[l] = (float)q[l] * d;  // exact
        break;
    }
    }
    for (size_t l = m; l < LANES; l++) w[l] = 0.0f;
}

void matmul_rows_scalar(float *out, const float *inp, const Weight *W, const float *bias,
                        size_t B, size_t n0, size_t n1, int accumulate) {
    size_t K = W->n_in, N = W->n_out;
    for (size_t n = n0; n < n1; n++)
        for (size_t b0 = 0; b0 < B; b0 += SCALAR_ROWS) {
            size_t nb = B - b0 < SCALAR_ROWS ? B - b0 : SCALAR_ROWS;
            float lane[SCALAR_ROWS][LANES] = {{0.0f}};
            float w[LANES];
            for (size_t k0 = 0; k0 < K; k0 += LANES) {
                widen16(w, W, n, k0);
                size_t m = K - k0 < LANES ? K - k0 : LANES;
                for (size_t b = 0; b < nb; b++) {
                    const float *x = inp + (b0 + b) * K + k0;
                    for (size_t l = 0; l < LANES; l++)
                        lane[b][l] = fmaf(w[l], l < m ? x[l] : 0.0f, lane[b][l]);
                }
            }
            for (size_t b = 0; b < nb; b++) {
                float *v = lane[b];
                for (int i = 0; i < 8; i++) v[i] = v[i] + v[i + 8];  // the fixed tree
                for (int i = 0; i < 4; i++) v[i] = v[i] + v[i + 4];
                for (int i = 0; i < 2; i++) v[i] = v[i] + v[i + 2];
                float s = v[0] + v[1];
                if (bias) s = s + bias[n];
                float *o = out + (b0 + b) * N + n;
                *o = accumulate ? *o + s : s;
            }
        }
}

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
#include "kernels/matmul_kernels.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/vecmath.h"

// The largest |x| of a block's m inputs; *finite: 0 if any is NaN or infinite.
static float block_amax(const float *x, size_t m, int *finite) {
    float amax = 0.0f;
    *finite = 1;
    for (size_t k = 0; k < m; k++) {
        float a = fabsf(x[k]);
        if (!(a <= FLT_MAX)) *finite = 0;  // NaN or infinite
        else if (a > amax) amax = a;
    }
    return amax;
}

float q8_quantize_x_block(int16_t *q, const float *x, size_t m) {
    int finite;
    const float amax = block_amax(x, m, &finite);
    for (size_t k = 0; k < Q8_BLOCK; k++) q[k] = 0;
    if (!finite) return NAN;
    if (amax < Q8_X_TINY) return 0.0f;
    const float inv = 32767.0f / amax;
    for (size_t k = 0; k < m; k++) q[k] = (int16_t)lrintf(x[k] * inv);  // |.| <= 32767
    return amax / 32767.0f;
}

float q4_quantize_x_block(int8_t *q, const float *x, size_t m) {
    int finite;
    const float amax = block_amax(x, m, &finite);
    for (size_t k = 0; k < Q4_BLOCK; k++) q[k] = 0;
    if (!finite) return NAN;
    if (amax < Q8_X_TINY) return 0.0f;
    const float inv = 127.0f / amax;
    for (size_t k = 0; k < m; k++) q[k] = (int8_t)lrintf(x[k] * inv);  // |.| <= 127
    return amax / 127.0f;
}

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
    case DTYPE_Q8:
    case DTYPE_Q4:
    case DTYPE_Q6: break;  // matmul_rows_blocked, matmul_rows_grouped
    }
    for (size_t l = m; l < LANES; l++) w[l] = 0.0f;
}

// The fixed tree, the bias, the old value: the end of every output.
static void finish(float *o, float *v, const float *bias, size_t n, int accumulate) {
    float s = lane16_sum(v);
    if (bias) s = s + bias[n];
    *o = accumulate ? *o + s : s;
}

// Block j of weight row n as its 32 integers: Q8's int8 as stored, Q4's
// nibbles and Q6's 6-bit values unpacked (q4_value, q6_value).
static void weight_block(int32_t *q, const Weight *W, size_t n, size_t j) {
    if (W->dtype == DTYPE_Q8) {
        const int8_t *row = (const int8_t *)W->data + n * q8_row_quants(W->n_in) + j * Q8_BLOCK;
        for (size_t i = 0; i < Q8_BLOCK; i++) q[i] = row[i];
    } else if (W->dtype == DTYPE_Q6) {
        const uint8_t *group = (const uint8_t *)W->data + n * q6_row_bytes(W->n_in) + j / 4 * Q6_GROUP_BYTES;
        for (size_t e = 0; e < Q6_BLOCK; e++) q[e] = q6_value(group, j % 4, e);
    } else {
        const uint8_t *blk = (const uint8_t *)W->data + n * q4_row_bytes(W->n_in) + j * (Q4_BLOCK / 2);
        for (size_t i = 0; i < Q4_BLOCK; i++) q[i] = q4_value(blk, i);
    }
}

// Q8: with scratch, every row's activations are quantized once, into
// scratch; without, each block again for every output (slow, same bits).
static void matmul_rows_blocked(float *out, const float *inp, const Weight *W, const float *bias,
                                size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    const size_t K = W->n_in, N = W->n_out, Kq = q8_row_quants(K), nb = Kq / Q8_BLOCK;
    int16_t *xq = (int16_t *)(void *)scratch;
    float *dx = scratch ? (float *)(void *)((char *)scratch + q8_x_scales_offset(B, K)) : NULL;
    for (size_t b = 0; scratch && b < B; b++)
        for (size_t j = 0; j < nb; j++) {
            size_t k = j * Q8_BLOCK, m = K - k < Q8_BLOCK ? K - k : Q8_BLOCK;
            dx[b * nb + j] = q8_quantize_x_block(xq + b * Kq + k, inp + b * K + k, m);
        }
    for (size_t n = n0; n < n1; n++) {
        const uint16_t *dw = W->scales + n * nb;
        for (size_t b = 0; b < B; b++) {
            float lane[LANES] = {0.0f};
            for (size_t j = 0; j < nb; j++) {
                size_t k = j * Q8_BLOCK, m = K - k < Q8_BLOCK ? K - k : Q8_BLOCK;
                int16_t own[Q8_BLOCK];
                int32_t q[Q8_BLOCK];
                weight_block(q, W, n, j);
                const int16_t *x = xq ? xq + b * Kq + k : own;
                float d = dx ? dx[b * nb + j] : q8_quantize_x_block(own, inp + b * K + k, m);
                float s = f16_to_f32(dw[j]) * d;
                for (size_t l = 0; l < LANES; l++) {
                    int32_t p = (int32_t)x[2 * l] * q[2 * l] + (int32_t)x[2 * l + 1] * q[2 * l + 1];
                    lane[l] = fmaf((float)p, s, lane[l]);
                }
            }
            finish(out + b * N + n, lane, bias, n, accumulate);
        }
    }
}

// Q4, Q6 and Q8 x int8 (matmul_kernels.h: int8 activations, a lane per
// quarter block, 4 blocks a step; only the weights' values differ). With scratch, every
// row's activations are quantized once (int8 [b][Kq], then the scales
// [b][block] 64-byte aligned); without, each block again for every output.
static void matmul_rows_grouped(float *out, const float *inp, const Weight *W, const float *bias, size_t B,
                           size_t n0, size_t n1, int accumulate, float *scratch) {
    const size_t K = W->n_in, N = W->n_out, Kq = q8_row_quants(K), nb = Kq / Q8_BLOCK, G = q4_groups(K);
    int8_t *xq = (int8_t *)(void *)scratch;
    float *dx = scratch ? (float *)(void *)((char *)scratch + (B * Kq + 63) / 64 * 64) : NULL;
    for (size_t b = 0; scratch && b < B; b++)
        for (size_t j = 0; j < nb; j++) {
            size_t k = j * Q4_BLOCK, m = K - k < Q4_BLOCK ? K - k : Q4_BLOCK;
            dx[b * nb + j] = q4_quantize_x_block(xq + b * Kq + k, inp + b * K + k, m);
        }
    for (size_t n = n0; n < n1; n++) {
        const uint16_t *dw = W->scales + n * nb;
        for (size_t b = 0; b < B; b++) {
            float lane[LANES] = {0.0f};
            for (size_t g = 0; g < G; g++) {
                int32_t q[4][Q4_BLOCK];
                int8_t own[4][Q4_BLOCK];
                const int8_t *x[4];
                float d[4];
                for (size_t i = 0; i < 4; i++) {  // blocks 4g .. 4g+3: past nb, q = xq = 0, dw = dx = 0
                    size_t j = 4 * g + i, k = j * Q4_BLOCK, m = j < nb ? (K - k < Q4_BLOCK ? K - k : Q4_BLOCK) : 0;
                    if (j < nb) weight_block(q[i], W, n, j);
                    else memset(q[i], 0, sizeof q[i]);
                    if (xq && j < nb) x[i] = xq + b * Kq + k, d[i] = dx[b * nb + j];
                    else if (j < nb) x[i] = own[i], d[i] = q4_quantize_x_block(own[i], inp + b * K + k, m);
                    else x[i] = memset(own[i], 0, sizeof own[i]), d[i] = 0.0f;
                }
                for (size_t l = 0; l < LANES; l++) {
                    const size_t i = l / 4, e = 4 * (l % 4), j = 4 * g + i;
                    int32_t p = 0;
                    for (size_t t = 0; t < 4; t++)
                        p += (int32_t)x[i][e + t] * q[i][e + t] + (int32_t)x[i][16 + e + t] * q[i][16 + e + t];
                    const float s = (j < nb ? f16_to_f32(dw[j]) : 0.0f) * d[i];
                    lane[l] = fmaf((float)p, s, lane[l]);
                }
            }
            finish(out + b * N + n, lane, bias, n, accumulate);
        }
    }
}

void matmul_rows_scalar(float *out, const float *inp, const Weight *W, const float *bias,
                        size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    if (weight_is_grouped(W)) {  // Q4, Q6, Q8 x int8
        matmul_rows_grouped(out, inp, W, bias, B, n0, n1, accumulate, scratch);
        return;
    }
    if (W->dtype == DTYPE_Q8) {
        matmul_rows_blocked(out, inp, W, bias, B, n0, n1, accumulate, scratch);
        return;
    }
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
            for (size_t b = 0; b < nb; b++) finish(out + (b0 + b) * N + n, lane[b], bias, n, accumulate);
        }
}

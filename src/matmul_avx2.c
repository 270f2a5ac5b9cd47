/*
 * matmul_avx2.c - AVX2 + FMA + F16C kernels (matmul_kernels.h). Every
 * function carries __attribute__((target("avx2,fma,f16c"))), so the file
 * builds with plain -O2 for baseline x86-64; matmul.c calls in here only
 * where the CPU supports it.
 *
 * To be bitwise identical to the AVX-512 and scalar kernels, each (b, n)
 * accumulator is the 16 canonical lanes held as a (lo, hi) pair of ymm:
 * lo accumulates k = k0+0..7 and hi k = k0+8..15. The reduction starts with
 * lo + hi (= lane i + lane i+8), the first level of the canonical tree. K
 * tail: the < 16 weights and activations left are copied (exactly widened)
 * into zero-padded 16-float buffers and processed as one more full step.
 *
 * Blocking: a tile of R weight rows x C batch rows = 2 R C ymm accumulators
 * (of 16 registers). Simpler than the AVX-512 kernels (no activation
 * packing, one tile shape): the fallback for CPUs without AVX-512. The R
 * rows of a tile come from R equal, far-apart parts of [n0, n1): R
 * independent linear streams, which the hardware prefetcher follows far
 * better than R adjacent rows (see matmul_avx512.c).
 */
#include "matmul_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#define TGT2 __attribute__((target("avx2,fma,f16c")))
#define AI static inline __attribute__((always_inline)) TGT2

enum { A2_R = 2, A2_C = 3 };  // tile: weight rows x batch rows

// 8 weights at element k of a row as exact float32 (d8: the Q8 block scale).
AI __m256 load_w8(DType dt, const char *row, size_t k, __m256 d8) {
    switch (dt) {
    case DTYPE_F32: return _mm256_loadu_ps((const float *)(const void *)row + k);
    case DTYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)row + k)));
    case DTYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)row + k))),
            16));
    case DTYPE_Q8: break;
    }
    __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)((const int8_t *)row + k)));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(q), d8);  // exact
}

AI __m256 load_d(DType dt, const uint16_t *drow, size_t k) {
    if (dt != DTYPE_Q8) return _mm256_setzero_ps();
    return _mm256_set1_ps(_cvtsh_ss(drow[k / Q8_BLOCK]));
}

// The exact float value of weight k of a row (for the tail buffers).
AI float w_scalar(DType dt, const char *row, const uint16_t *drow, size_t k) {
    switch (dt) {
    case DTYPE_F32: return ((const float *)(const void *)row)[k];
    case DTYPE_F16: return _cvtsh_ss(((const uint16_t *)(const void *)row)[k]);
    case DTYPE_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)(const void *)row)[k] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case DTYPE_Q8: break;
    }
    return (float)((const int8_t *)row)[k] * _cvtsh_ss(drow[k / Q8_BLOCK]);
}

// The canonical tree on (lo, hi): lo + hi, then 8 -> 4 -> 2 -> 1.
AI float hsum(__m256 lo, __m256 hi) {
    __m256 t = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

// Weight rows n, n + rs, ... (R of them) x batch rows [b0, b0 + C).
AI void tile(DType dt, int R, int C, const WD *W, size_t n, size_t rs, size_t b0, float *out,
             const float *inp, const float *bias, int accumulate) {
    const size_t K = W->K, N = W->N;
    const char *wr[A2_R];
    const uint16_t *dr[A2_R];
    const float *xr[A2_C];
    __m256 acc[A2_R][A2_C][2];

#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        wr[r] = W->w + (n + (size_t)r * rs) * W->ldw * esize(dt);
        dr[r] = dt == DTYPE_Q8 ? W->d + (n + (size_t)r * rs) * W->ldd : NULL;
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) xr[c] = inp + (b0 + (size_t)c) * K;
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[r][c][0] = acc[r][c][1] = _mm256_setzero_ps();

    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {  // canonical lanes 8h .. 8h+7
            const size_t kh = k + 8 * (size_t)h;
            __m256 wv[A2_R];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) wv[r] = load_w8(dt, wr[r], kh, load_d(dt, dr[r], kh));
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const __m256 xv = _mm256_loadu_ps(xr[c] + kh);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++) acc[r][c][h] = _mm256_fmadd_ps(wv[r], xv, acc[r][c][h]);
            }
        }
    }
    if (k < K) {  // K tail: one more full step on zero-padded copies
        float wt[A2_R][16], xt[A2_C][16];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            for (size_t l = 0; l < 16; l++) wt[r][l] = k + l < K ? w_scalar(dt, wr[r], dr[r], k + l) : 0.0f;
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            for (size_t l = 0; l < 16; l++) xt[c][l] = k + l < K ? xr[c][k + l] : 0.0f;
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
            for (int c = 0; c < C; c++) {
                const __m256 xv = _mm256_loadu_ps(xt[c] + 8 * h);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                    acc[r][c][h] = _mm256_fmadd_ps(_mm256_loadu_ps(wt[r] + 8 * h), xv, acc[r][c][h]);
            }
    }

#pragma GCC unroll 4
    for (int c = 0; c < C; c++)
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            float s = hsum(acc[r][c][0], acc[r][c][1]);
            if (bias) s = s + bias[n + (size_t)r * rs];
            float *o = out + (b0 + (size_t)c) * N + n + (size_t)r * rs;
            *o = accumulate ? *o + s : s;
        }
}

// R weight rows (rs apart) for all B batch rows, in chunks of A2_C.
AI void rows(DType dt, int R, const WD *W, size_t n, size_t rs, float *out, const float *inp,
             const float *bias, size_t B, int accumulate) {
    size_t b = 0;
    for (; b + A2_C <= B; b += A2_C) tile(dt, R, A2_C, W, n, rs, b, out, inp, bias, accumulate);
    switch (B - b) {  // batch tail: the same arithmetic per element, a smaller tile
    case 2: tile(dt, R, 2, W, n, rs, b, out, inp, bias, accumulate); break;
    case 1: tile(dt, R, 1, W, n, rs, b, out, inp, bias, accumulate); break;
    default: break;
    }
}

AI void run(DType dt, const WD *W, float *out, const float *inp, const float *bias, size_t B,
            size_t n0, size_t n1, int accumulate) {
    const size_t part = (n1 - n0) / A2_R;
    size_t n = n0;
    for (; n < n0 + part; n++) rows(dt, A2_R, W, n, part, out, inp, bias, B, accumulate);
    for (n = n0 + part * A2_R; n < n1; n++) rows(dt, 1, W, n, 1, out, inp, bias, B, accumulate);
}

// One instance per dtype, so that every switch on dt above folds away.
#define RUN_DTYPE(name, dt)                                                                          \
    TGT2 static void name(const WD *W, float *out, const float *inp, const float *bias, size_t B,   \
                          size_t n0, size_t n1, int accumulate) {                                   \
        run(dt, W, out, inp, bias, B, n0, n1, accumulate);                                          \
    }
RUN_DTYPE(run_f32, DTYPE_F32)
RUN_DTYPE(run_f16, DTYPE_F16)
RUN_DTYPE(run_bf16, DTYPE_BF16)
RUN_DTYPE(run_q8, DTYPE_Q8)
#undef RUN_DTYPE

TGT2 void matmul_rows_avx2(float *out, const float *inp, const Weight *W, const float *bias,
                           size_t B, size_t n0, size_t n1, int accumulate) {
    if (n0 >= n1 || B == 0) return;
    const WD d = weight_walk(W);
    switch (W->dtype) {
    case DTYPE_F32: run_f32(&d, out, inp, bias, B, n0, n1, accumulate); break;
    case DTYPE_F16: run_f16(&d, out, inp, bias, B, n0, n1, accumulate); break;
    case DTYPE_BF16: run_bf16(&d, out, inp, bias, B, n0, n1, accumulate); break;
    case DTYPE_Q8: run_q8(&d, out, inp, bias, B, n0, n1, accumulate); break;
    }
}

#else  // not x86-64: never chosen (matmul_isa_supported says 0); the same bits anyway

void matmul_rows_avx2(float *out, const float *inp, const Weight *W, const float *bias,
                      size_t B, size_t n0, size_t n1, int accumulate) {
    matmul_rows_scalar(out, inp, W, bias, B, n0, n1, accumulate);
}

#endif

/*
 * matmul_avx2.c - AVX2 + FMA + F16C kernels (matmul_kernels.h). Every
 * function carries cpu.h's TARGET_AVX2, so the file builds with plain -O2
 * for baseline x86-64 (and to nothing elsewhere); matmul.c calls in here
 * only where the CPU supports it.
 *
 * To be bitwise identical to the AVX-512 and scalar kernels, each (b, n)
 * accumulator is the 16 canonical lanes held as a (lo, hi) pair of ymm:
 * lo accumulates k = k0+0..7 and hi k = k0+8..15. The reduction starts with
 * lo + hi (= lane i + lane i+8), the first level of the canonical tree. K
 * tail: the < 16 weights and activations left are copied (exactly widened)
 * into zero-padded 16-float buffers and processed as one more full step.
 *
 * Q4: a group of 4 blocks is a (lo, hi) pair of 32-byte halves; each
 * half's nibbles times the int8 activations by vpmaddubsw + vpmaddwd(1),
 * the integers AVX-512 gets (the Q4 section). Q6 the same, each half's
 * nibbles joined by their top 2 bits from the group's last 32 bytes.
 *
 * Blocking: a tile of R weight rows x C batch rows = 2 R C ymm accumulators
 * (of 16 registers). Simpler than the AVX-512 kernels (no activation
 * packing, one tile shape): the fallback for CPUs without AVX-512. The R
 * rows of a tile come from R equal, far-apart parts of [n0, n1): R
 * independent linear streams, which the hardware prefetcher follows far
 * better than R adjacent rows (see matmul_avx512.c).
 */
#include "kernels/matmul_kernels.h"

#if defined(__x86_64__)

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu.h"

#define AI INLINE_AVX2

// Tile shapes (weight rows R x batch rows C, 2 R C ymm accumulators) go up
// to these; each variant (matmul_kernels.h's MATMUL_AVX2_VARIANTS) is one.
enum { A2_R = 4, A2_C = 6 };

// 8 weights at element k of a row as exact float32 (F32, F16, BF16).
AI __m256 load_w8(DType dt, const char *row, size_t k) {
    switch (dt) {
    case DTYPE_F32: return _mm256_loadu_ps((const float *)(const void *)row + k);
    case DTYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)row + k)));
    case DTYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)((const uint16_t *)(const void *)row + k))),
            16));
    default: break;  // Q8, Q4, Q6: tile_blocked, tile_q4
    }
    return _mm256_setzero_ps();
}

// The exact float value of weight k of a row (for the tail buffers).
AI float w_scalar(DType dt, const char *row, size_t k) {
    switch (dt) {
    case DTYPE_F32: return ((const float *)(const void *)row)[k];
    case DTYPE_F16: return _cvtsh_ss(((const uint16_t *)(const void *)row)[k]);
    case DTYPE_BF16: {
        uint32_t u = (uint32_t)((const uint16_t *)(const void *)row)[k] << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case DTYPE_Q8:
    case DTYPE_Q4:
    case DTYPE_Q6: break;
    }
    return 0.0f;
}

// The canonical tree on (lo, hi): lo + hi, then 8 -> 4 -> 2 -> 1.
AI float hsum(__m256 lo, __m256 hi) {
    __m256 t = _mm256_add_ps(lo, hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

// The end of output (b, j) from its two halves: the canonical tree, + bias,
// + the old value.
AI void finish_output(__m256 lo, __m256 hi, size_t b, size_t j, size_t N, float *out, const float *bias,
                      int accumulate) {
    float s = hsum(lo, hi);
    if (bias) s = s + bias[j];
    float *o = out + b * N + j;
    *o = accumulate ? *o + s : s;
}

// The end of every output of a tile (weight rows n, n + rs, ... x batch
// rows b0 ..).
AI void finish_tile(int R, int C, __m256 acc[A2_R][A2_C][2], size_t n, size_t rs, size_t b0, size_t N, float *out,
                    const float *bias, int accumulate) {
#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            finish_output(acc[r][c][0], acc[r][c][1], b0 + (size_t)c, n + (size_t)r * rs, N, out, bias, accumulate);
}

// The rows of a float tile: weight rows n, n + rs, ... (R) and batch rows
// b0 .. b0 + C - 1 of inp.
AI void tile_rows(DType dt, int R, int C, const WD *W, size_t n, size_t rs, size_t b0, const float *inp,
                  const char **wr, const float **xr) {
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) wr[r] = W->w + (n + (size_t)r * rs) * W->ldw * esize(dt);
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) xr[c] = inp + (b0 + (size_t)c) * W->K;
}

// Weight rows n, n + rs, ... (R of them) x batch rows [b0, b0 + C).
AI void tile(DType dt, int R, int C, const WD *W, size_t n, size_t rs, size_t b0, float *out,
             const float *inp, const float *bias, int accumulate) {
    const size_t K = W->K, N = W->N;
    const char *wr[A2_R];
    const float *xr[A2_C];
    __m256 acc[A2_R][A2_C][2];

    tile_rows(dt, R, C, W, n, rs, b0, inp, wr, xr);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c][0] = acc[r][c][1] = _mm256_setzero_ps();

    size_t k = 0;
    for (; k + 16 <= K; k += 16) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {  // canonical lanes 8h .. 8h+7
            const size_t kh = k + 8 * (size_t)h;
            __m256 wv[A2_R];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) wv[r] = load_w8(dt, wr[r], kh);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const __m256 xv = _mm256_loadu_ps(xr[c] + kh);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++) acc[r][c][h] = _mm256_fmadd_ps(wv[r], xv, acc[r][c][h]);
            }
        }
    }
    if (k < K) {  // K tail: one more full step on zero-padded copies
        float wt[A2_R][16], xt[A2_C][16];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            for (size_t l = 0; l < 16; l++) wt[r][l] = k + l < K ? w_scalar(dt, wr[r], k + l) : 0.0f;
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            for (size_t l = 0; l < 16; l++) xt[c][l] = k + l < K ? xr[c][k + l] : 0.0f;
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const __m256 xv = _mm256_loadu_ps(xt[c] + 8 * h);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++)
                    acc[r][c][h] = _mm256_fmadd_ps(_mm256_loadu_ps(wt[r] + 8 * h), xv, acc[r][c][h]);
            }
    }

    finish_tile(R, C, acc, n, rs, b0, N, out, bias, accumulate);
}

// The same outputs, one half of the canonical lanes at a time: lanes 0..7
// (k0+0..7) and 8..15 (k0+8..15) are independent sums until the tree, so a
// tile can run all its lo accumulators over a block of K, then all its hi
// ones over the same block (now in L1), with R C accumulators live instead
// of 2 R C: tiles of 12 outputs, 7 loads per 12 FMAs (3x4), where
// tile() fits at most 6. The weights are held (R vectors) when R <= C, else
// the activations (C vectors): R C + min(R, C) + 1 <= 16 registers. The
// accumulators go to memory between blocks of A2_KB inputs (both halves'
// rows of the tile fit in L1: (R + C) A2_KB floats, 14 KiB at 3x4).
enum { A2_HR = 6, A2_HC = 6, A2_KB = 512 };
AI void tile_halves(DType dt, int R, int C, const WD *W, size_t n, size_t rs, size_t b0, float *out,
                    const float *inp, const float *bias, int accumulate) {
    const size_t K = W->K, N = W->N, K16 = K / 16 * 16;
    const char *wr[A2_HR];
    const float *xr[A2_HC];
    __m256 saved[2][A2_HR][A2_HC];  // each half's accumulators between blocks

    tile_rows(dt, R, C, W, n, rs, b0, inp, wr, xr);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) saved[0][r][c] = saved[1][r][c] = _mm256_setzero_ps();

    for (size_t kb = 0; kb < K16; kb += A2_KB) {
        const size_t ke = K16 - kb > A2_KB ? kb + A2_KB : K16;
        for (int h = 0; h < 2; h++) {  // canonical lanes 8h .. 8h+7
            __m256 acc[A2_HR][A2_HC];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
#pragma GCC unroll 8
                for (int c = 0; c < C; c++) acc[r][c] = saved[h][r][c];
            for (size_t k = kb + 8 * (size_t)h; k < ke; k += 16) {
                if (R <= C) {  // hold the weights
                    __m256 wv[A2_HR];
#pragma GCC unroll 8
                    for (int r = 0; r < R; r++) wv[r] = load_w8(dt, wr[r], k);
#pragma GCC unroll 8
                    for (int c = 0; c < C; c++) {
                        const __m256 xv = _mm256_loadu_ps(xr[c] + k);
#pragma GCC unroll 8
                        for (int r = 0; r < R; r++) acc[r][c] = _mm256_fmadd_ps(wv[r], xv, acc[r][c]);
                    }
                } else {  // hold the activations
                    __m256 xv[A2_HC];
#pragma GCC unroll 8
                    for (int c = 0; c < C; c++) xv[c] = _mm256_loadu_ps(xr[c] + k);
#pragma GCC unroll 8
                    for (int r = 0; r < R; r++) {
                        const __m256 wv = load_w8(dt, wr[r], k);
#pragma GCC unroll 8
                        for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
                    }
                }
            }
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
#pragma GCC unroll 8
                for (int c = 0; c < C; c++) saved[h][r][c] = acc[r][c];
        }
    }
    if (K16 < K) {  // K tail: one more full step on zero-padded copies
        float wt[16], xt[A2_HC][16];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++)
            for (size_t l = 0; l < 16; l++) xt[c][l] = K16 + l < K ? xr[c][K16 + l] : 0.0f;
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            for (size_t l = 0; l < 16; l++) wt[l] = K16 + l < K ? w_scalar(dt, wr[r], K16 + l) : 0.0f;
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++)
#pragma GCC unroll 8
                for (int c = 0; c < C; c++)
                    saved[h][r][c] = _mm256_fmadd_ps(_mm256_loadu_ps(wt + 8 * h), _mm256_loadu_ps(xt[c] + 8 * h),
                                                     saved[h][r][c]);
        }
    }

#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            finish_output(saved[0][r][c], saved[1][r][c], b0 + (size_t)c, n + (size_t)r * rs, N, out, bias, accumulate);
}

// ---- packed: one lane at a time ------------------------------------------
// Each of an output's 16 canonical lanes is a sum of its own, over k = l,
// l + 16, l + 32, ... in order, until the tree. Taken one lane at a time,
// a product is 16 small matrix products with the batch rows along the
// vector: 6 weight rows x 16 batch rows of lane l in 12 accumulators, per
// step 2 loads of activations and 6 broadcast weights for 12 FMAs, as an
// sgemm kernel does. The activations are packed once per call, lane by lane
// (x_t below), and reused by every weight row; each tile's 6 weight rows
// are widened to float once per block of A2_PKB inputs (w_t) and reused by
// every batch row. F32's rows are read in place instead (they need no
// widening, so a copy only costs), but not in a block that runs past K, a
// tile past n1, or rows a multiple of 4 KiB apart: those fall into the same
// sets of L1, and are copied. The lanes' sums wait in scratch (lanes_t) for
// the tree.
enum { A2_PR = 6, A2_PB = 16, A2_PKB = 768 };  // 768: w_t is 6 x 768 floats, 18 KiB, in L1 beside x_t's stream

// Where the packed kernel keeps things in scratch, in floats.
typedef struct {
    size_t Kc, Bp;     // steps of 16 inputs; batch rows rounded up to A2_PB
    size_t x_t;        // [b tile][lane][step][A2_PB]: x(b, 16 step + lane), 0 past B and K
    size_t w_t;        // [A2_PR][A2_PKB]: a tile's weight rows over one block, 0 past K and N
    size_t lanes_t;    // [b tile][lane][A2_PR][A2_PB]: the lanes' running sums
    size_t total;
} PackedLayout;

static inline PackedLayout packed_layout(size_t B, size_t K) {
    PackedLayout l;
    l.Kc = (K + 15) / 16;
    l.Bp = (B + A2_PB - 1) / A2_PB * A2_PB;
    l.x_t = 0;
    l.w_t = l.Bp * l.Kc * 16;
    l.lanes_t = l.w_t + (size_t)A2_PR * A2_PKB;
    l.total = l.lanes_t + l.Bp * 16 * A2_PR;
    return l;
}

size_t matmul_avx2_packed_floats(size_t B, size_t K) { return packed_layout(B, K).total; }

// The 12 accumulators of lane l, weight rows 0..5 x batch rows bt*16 ..
// +15, over the steps [s0, s1) of a block; wt: the block's first input of
// weight row 0, row r at wt + r * ws.
AI void packed_lane(const float *xl, const float *wt, size_t ws, size_t s0, size_t s1, int l, float *lanes,
                    int first) {
    __m256 acc[A2_PR][2];
#pragma GCC unroll 8
    for (int r = 0; r < A2_PR; r++)
        for (int h = 0; h < 2; h++)
            acc[r][h] = first ? _mm256_setzero_ps() : _mm256_load_ps(lanes + r * A2_PB + 8 * h);
    for (size_t s = s0; s < s1; s++) {
        const __m256 x0 = _mm256_load_ps(xl + s * A2_PB), x1 = _mm256_load_ps(xl + s * A2_PB + 8);
        const float *w = wt + (s - s0) * 16 + l;
#pragma GCC unroll 8
        for (int r = 0; r < A2_PR; r++) {
            const __m256 wv = _mm256_broadcast_ss(w + r * ws);
            acc[r][0] = _mm256_fmadd_ps(wv, x0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(wv, x1, acc[r][1]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < A2_PR; r++)
        for (int h = 0; h < 2; h++) _mm256_store_ps(lanes + r * A2_PB + 8 * h, acc[r][h]);
}

// v[j][l] -> v[l][j] (data moves only).
AI void transpose8(__m256 v[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

// Outputs [n0, n1) of the B rows of inp, packed; scratch as packed_layout
// says (64-byte aligned).
AI void run_packed(DType dt, const WD *W, float *out, const float *inp, const float *bias, size_t B, size_t n0,
                   size_t n1, int accumulate, float *scratch) {
    const size_t K = W->K, N = W->N;
    const PackedLayout L = packed_layout(B, K);
    float *xt = scratch + L.x_t, *wt = scratch + L.w_t, *lanes = scratch + L.lanes_t;
    const size_t n_bt = L.Bp / A2_PB;
    // the activations, lane by lane: x_t[bt][l][s][j] = x(16 bt + j, 16 s + l),
    // in 8 x 8 blocks (8 rows' 8 inputs -> 8 lanes' 8 rows), 0 past B and K
    for (size_t bt = 0; bt < n_bt; bt++)
        for (size_t st = 0; st < L.Kc; st++)
            for (size_t j0 = 0; j0 < A2_PB; j0 += 8)
                for (size_t l0 = 0; l0 < 16; l0 += 8) {
                    const size_t b0 = bt * A2_PB + j0, k0 = 16 * st + l0;
                    float *dst = xt + ((bt * 16 + l0) * L.Kc + st) * A2_PB + j0;  // lane l0, row j0
                    if (b0 + 8 <= B && k0 + 8 <= K) {
                        __m256 v[8];
                        for (int j = 0; j < 8; j++) v[j] = _mm256_loadu_ps(inp + (b0 + (size_t)j) * K + k0);
                        transpose8(v);
                        for (int l = 0; l < 8; l++) _mm256_store_ps(dst + (size_t)l * L.Kc * A2_PB, v[l]);
                    } else {
                        for (size_t l = 0; l < 8; l++)
                            for (size_t j = 0; j < 8; j++)
                                dst[l * L.Kc * A2_PB + j] = b0 + j < B && k0 + l < K ? inp[(b0 + j) * K + k0 + l] : 0.0f;
                    }
                }
    for (size_t n = n0; n < n1; n += A2_PR) {
        const int rows = n1 - n < A2_PR ? (int)(n1 - n) : A2_PR;
        for (size_t s0 = 0; s0 < L.Kc; s0 += A2_PKB / 16) {
            const size_t s1 = L.Kc - s0 < A2_PKB / 16 ? L.Kc : s0 + A2_PKB / 16, k0 = 16 * s0, kn = 16 * (s1 - s0);
            // this block of the tile's weight rows as floats, 0 past K and past
            // n1: F32's own rows where they have all of it
            const float *wb = wt;
            size_t ws = A2_PKB;
            if (dt == DTYPE_F32 && rows == A2_PR && k0 + kn <= K && W->ldw * sizeof(float) % 4096 != 0) {
                wb = (const float *)(const void *)W->w + n * W->ldw + k0;
                ws = W->ldw;
            }
            for (int r = 0; r < A2_PR && wb == wt; r++) {
                float *dst = wt + r * A2_PKB;
                const char *row = r < rows ? W->w + (n + (size_t)r) * W->ldw * esize(dt) : NULL;
                size_t k = 0;
                if (row)
                    for (; k + 8 <= kn && k0 + k + 8 <= K; k += 8) _mm256_store_ps(dst + k, load_w8(dt, row, k0 + k));
                for (; k < kn; k++) dst[k] = row && k0 + k < K ? w_scalar(dt, row, k0 + k) : 0.0f;
            }
            // the next block's weights (this tile's, or the next tile's first),
            // fetched a share at a time while this one is worked on: a block
            // is too short a stream for the hardware prefetcher
            size_t pn = n, pk = k0 + kn;
            if (pk >= K) pn = n + A2_PR, pk = 0;
            const size_t p_rows = pn < n1 ? (n1 - pn < A2_PR ? n1 - pn : A2_PR) : 0;
            const size_t p_bytes = (K - pk < A2_PKB ? K - pk : A2_PKB) * esize(dt);
            const size_t row_lines = (p_bytes + 63) / 64, p_lines = p_rows * row_lines;
            const size_t per = (p_lines + n_bt * 16 - 1) / (n_bt * 16);
            size_t pr = 0, pc = 0;  // the next line to fetch: row pr, line pc of it
            for (size_t bt = 0; bt < n_bt; bt++)
                for (int l = 0; l < 16; l++) {
                    for (size_t e = 0; e < per && pr < p_rows; e++) {
                        _mm_prefetch(W->w + ((pn + pr) * W->ldw + pk) * esize(dt) + 64 * pc, _MM_HINT_T0);
                        if (++pc == row_lines) pc = 0, pr++;
                    }
                    packed_lane(xt + (bt * 16 + (size_t)l) * L.Kc * A2_PB, wb, ws, s0, s1, l,
                                lanes + (bt * 16 + (size_t)l) * A2_PR * A2_PB, s0 == 0);
                }
        }
        // the canonical tree, 16 batch rows at a time: lane i + lane i+8, ...
        for (size_t bt = 0; bt < n_bt; bt++)
            for (int r = 0; r < rows; r++)
                for (int h = 0; h < 2; h++) {
                    __m256 t[16];
#pragma GCC unroll 16
                    for (int i = 0; i < 16; i++)
                        t[i] = _mm256_load_ps(lanes + ((bt * 16 + (size_t)i) * A2_PR + (size_t)r) * A2_PB + 8 * h);
#pragma GCC unroll 4
                    for (int w = 8; w >= 1; w /= 2)
#pragma GCC unroll 8
                        for (int i = 0; i < w; i++) t[i] = _mm256_add_ps(t[i], t[i + w]);
                    float s8[8];
                    _mm256_storeu_ps(s8, t[0]);
                    for (int j = 0; j < 8; j++) {
                        const size_t b = bt * A2_PB + 8 * (size_t)h + (size_t)j;
                        if (b >= B) break;
                        float v = s8[j];
                        if (bias) v = v + bias[n + (size_t)r];
                        float *o = out + b * N + n + (size_t)r;
                        *o = accumulate ? *o + v : v;
                    }
                }
    }
}

// ---- Q8 ----------------------------------------------------------------------
// A block's 16 canonical lanes as (lo, hi): vpmaddwd on inputs 0..15 gives
// lanes 0..7, on inputs 16..31 lanes 8..15.

// The m <= 32 inputs of a block at x as four vectors v (zeros past m);
// returns their largest |x| (exact in any order) and sets *bad when one is
// NaN or infinite. Q8's and Q4's quantizers start with it.
AI float load_x_block(const float *x, size_t m, __m256 v[4], int *bad) {
    float buf[Q8_BLOCK] = {0.0f};
    memcpy(buf, x, m * sizeof *x);
    const __m256 sign = _mm256_set1_ps(-0.0f), big = _mm256_set1_ps(FLT_MAX);
    __m256 amax = _mm256_setzero_ps();
    *bad = 0;
#pragma GCC unroll 8
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(buf + 8 * i);
        const __m256 a = _mm256_andnot_ps(sign, v[i]);
        *bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, big, _CMP_NLE_UQ));
        amax = _mm256_max_ps(amax, a);
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    return _mm_cvtss_f32(_mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1)));
}

// q8_quantize_x_block() for one block of m <= 32 inputs, into dst[0 .. 32).
AI float quantize_x_block(int16_t *dst, const float *x, size_t m) {
    __m256 v[4];
    int bad;
    const float am = load_x_block(x, m, v, &bad);
    if (bad || am < Q8_X_TINY) {
        memset(dst, 0, Q8_BLOCK * sizeof *dst);
        return bad ? NAN : 0.0f;
    }
    const __m256 inv = _mm256_set1_ps(32767.0f / am);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(v[2 * h], inv));
        const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(v[2 * h + 1], inv));
        // packs works within 128-bit lanes: put the 64-bit pieces back in order
        _mm256_storeu_si256((__m256i *)(void *)(dst + 16 * h), _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8));
    }
    return am / 32767.0f;
}

// The start of a quantized tile (Q8, Q4, Q6): the bytes (wr) and block
// scales (dr) of weight rows n, n + rs, ... (R), and its accumulators zeroed.
AI void start_quant_tile(int R, int C, const WD *W, size_t n, size_t rs, const uint8_t *wr[A2_R],
                         const uint16_t *dr[A2_R], __m256 acc[A2_R][A2_C][2]) {
    const size_t nb = W->ldd;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        wr[r] = (const uint8_t *)W->w + (n + (size_t)r * rs) * W->ldw;
        dr[r] = W->d + (n + (size_t)r * rs) * nb;
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) acc[r][c][0] = acc[r][c][1] = _mm256_setzero_ps();
}

// Block j of a Q8 weight row as two halves of 16 int16 (k 0..15 in h[0],
// 16..31 in h[1]).
AI void load_block(const uint8_t *row, size_t j, __m256i h[2]) {
    h[0] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(row + j * Q8_BLOCK)));
    h[1] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(row + j * Q8_BLOCK + 16)));
}

// Weight rows n, n + rs, ... (R) x batch rows [b0, b0 + C), with the rows'
// quantized activations (xq, Kq apart) and scales (dx, nb apart).
AI void tile_blocked(DType dt, int R, int C, const WD *W, size_t n, size_t rs, size_t b0, float *out,
                     const int16_t *xq, const float *dx, const float *bias, int accumulate) {
    (void)dt;  // Q8 (Q4 has its own tiles)
    const size_t N = W->N, Kq = W->Kq, nb = W->ldd;
    const uint8_t *wr[A2_R];
    const uint16_t *dr[A2_R];
    __m256 acc[A2_R][A2_C][2];
    start_quant_tile(R, C, W, n, rs, wr, dr, acc);
    for (size_t j = 0; j < nb; j++) {
        __m256i wv[A2_R][2];
        float dw[A2_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            dw[r] = _cvtsh_ss(dr[r][j]);
            load_block(wr[r], j, wv[r]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            const int16_t *x = xq + (b0 + (size_t)c) * Kq + j * Q8_BLOCK;
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)x);
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 16));
            const float d = dx[(b0 + (size_t)c) * nb + j];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m256 s = _mm256_set1_ps(dw[r] * d);
                acc[r][c][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(wv[r][0], x0)), s, acc[r][c][0]);
                acc[r][c][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(wv[r][1], x1)), s, acc[r][c][1]);
            }
        }
    }
    finish_tile(R, C, acc, n, rs, b0, N, out, bias, accumulate);
}

// Quantizes inp (B, K) into scratch: row b's int16 values at b * Kq, then
// the scales, row-major [b][block].
TARGET_AVX2 static void quantize_x(float *scratch, const float *inp, size_t B, const WD *W) {
    const size_t K = W->K, Kq = W->Kq, nb = W->ldd;
    int16_t *xq = (int16_t *)(void *)scratch;
    float *dx = (float *)(void *)((char *)scratch + q8_x_scales_offset(B, K));
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < nb; j++) {
            const size_t k = j * Q8_BLOCK;
            dx[b * nb + j] = quantize_x_block(xq + b * Kq + k, inp + b * K + k, K - k < Q8_BLOCK ? K - k : Q8_BLOCK);
        }
}

// ---- Q4 ----------------------------------------------------------------------
// A group of 4 blocks (64 bytes of a weight row) as the canonical (lo, hi):
// the group's first 32 bytes (blocks 0, 1) give lanes 0..7, the next 32
// (blocks 2, 3) lanes 8..15; dword d of vpmaddubsw + vpmaddwd(1) of a half's
// low nibbles with Q4XGroup.lo (high with hi) is lane 8h + d
// (matmul_kernels.h).

// Block i of group g from the m <= 32 inputs at x (m = 0: past the row:
// zeros), as q4_quantize_x_block; corr for the stored values' offset.
AI void quantize_q4_block(Q4XGroup *g, int i, const float *x, size_t m, int32_t offset) {
    __m256 v[4];
    int bad;
    const float am = load_x_block(x, m, v, &bad);
    int32_t q[Q4_BLOCK] = {0};
    float dx = bad ? NAN : 0.0f;
    if (!bad && am >= Q8_X_TINY) {
        const __m256 inv = _mm256_set1_ps(127.0f / am);
#pragma GCC unroll 8
        for (int t = 0; t < 4; t++)
            _mm256_storeu_si256((__m256i *)(void *)(q + 8 * t), _mm256_cvtps_epi32(_mm256_mul_ps(v[t], inv)));
        dx = am / 127.0f;
    }
    for (int e = 0; e < 16; e++) g->lo[16 * i + e] = (int8_t)q[e], g->hi[16 * i + e] = (int8_t)q[16 + e];
    for (int t = 0; t < 4; t++) {
        int32_t sum = 0;
        for (int e = 4 * t; e < 4 * t + 4; e++) sum += q[e] + q[16 + e];
        g->corr[4 * i + t] = -offset * sum;
        g->dx[4 * i + t] = dx;
    }
}

// Quantizes inp (B, K) into scratch: row b's groups at b * G.
TARGET_AVX2 static void quantize_x_q4(Q4XGroup *xg, const float *inp, size_t B, size_t K, int32_t offset) {
    const size_t nb = q8_row_quants(K) / Q8_BLOCK, G = q4_groups(K);
    for (size_t b = 0; b < B; b++)
        for (size_t g = 0; g < G; g++)
            for (int i = 0; i < 4; i++) {
                const size_t j = 4 * g + (size_t)i, k = j * Q8_BLOCK;
                quantize_q4_block(xg + b * G + g, i, inp + b * K + k, j >= nb ? 0 : K - k < Q8_BLOCK ? K - k : Q8_BLOCK,
                                  offset);
            }
}

// Half h of a Q6 group (dtype.h) as Q4's pair of 32-byte halves: v, the
// half's 32 bytes of low 4 bits; top, the group's 32 bytes of top 2 bits
// (bits 2h .. 2h+1 of each byte belong to the low nibbles of this half,
// bits 4 + 2h .. 5 + 2h to its high ones), shifted into bits 4-5.
AI void unpack_q6_half(int h, __m256i v, __m256i top, __m256i *wlo, __m256i *whi) {
    const __m256i nib = _mm256_set1_epi8(15), bits = _mm256_set1_epi8(0x30);
    const __m256i tlo = h ? _mm256_slli_epi16(top, 2) : _mm256_slli_epi16(top, 4);
    const __m256i thi = h ? _mm256_srli_epi16(top, 2) : top;
    *wlo = _mm256_or_si256(_mm256_and_si256(v, nib), _mm256_and_si256(tlo, bits));
    *whi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), nib), _mm256_and_si256(thi, bits));
}

// Weight rows n, n + rs, ... (R) x batch rows [b0, b0 + C), the rows'
// activation groups at xg (G apart); dt Q4 or Q6, or Q8 for Q8 x int8
// (matmul_kernels.h): a group 128 bytes of a row, half h blocks 2h and
// 2h+1, whose inputs 0..15 (16..31) are one vpermq2x128 of the two blocks
// away; |q| unsigned times the activations with q's sign (vpsignb), the
// pairs within int16 (2 * 128 * 127), summed in int32, no offset.
AI void tile_q4(DType dt, int R, int C, const WD *W, size_t n, size_t rs, size_t b0, float *out,
                const Q4XGroup *xg, const float *bias, int accumulate) {
    const size_t N = W->N, nb = W->ldd, G = (nb + 3) / 4;
    const size_t gb = dt == DTYPE_Q6 ? Q6_GROUP_BYTES : dt == DTYPE_Q8 ? 4 * Q8_BLOCK : 64;
    const uint8_t *wr[A2_R];
    const uint16_t *dr[A2_R];
    __m256 acc[A2_R][A2_C][2];
    const __m256i nib = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const __m256i quarter[2] = {_mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3)};
    start_quant_tile(R, C, W, n, rs, wr, dr, acc);
    for (size_t g = 0; g < G; g++) {
        const size_t in = nb - 4 * g < 4 ? nb - 4 * g : 4;  // blocks of the group in the row
        uint8_t wt[A2_R][4 * Q8_BLOCK];
        __m128 dw4[A2_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (in == 4) {  // the four scales straight from the row (a copy through the stack stalls decode)
                dw4[r] = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(const void *)(dr[r] + 4 * g)));
            } else {
                uint16_t d16[8] = {0};
                memcpy(d16, dr[r] + 4 * g, in * sizeof *d16);
                dw4[r] = _mm_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)d16));
            }
            if (in < 4 && dt != DTYPE_Q6) {  // zeros past the row, not read (Q6 is stored in whole groups)
                memset(wt[r], 0, sizeof wt[r]);
                memcpy(wt[r], wr[r] + gb * g, gb / 4 * in);
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {  // canonical lanes 8h .. 8h+7
            __m256i wlo[A2_R], whi[A2_R];
            __m256 dw[A2_R];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                if (dt == DTYPE_Q8) {  // signed: the signs go to the activations below
                    const uint8_t *src = (in == 4 ? wr[r] + gb * g : wt[r]) + 64 * h;
                    const __m256i b0v = _mm256_loadu_si256((const __m256i *)(const void *)src);
                    const __m256i b1v = _mm256_loadu_si256((const __m256i *)(const void *)(src + 32));
                    wlo[r] = _mm256_permute2x128_si256(b0v, b1v, 0x20);
                    whi[r] = _mm256_permute2x128_si256(b0v, b1v, 0x31);
                } else if (dt == DTYPE_Q6) {
                    const uint8_t *src = wr[r] + gb * g;
                    unpack_q6_half(h, _mm256_loadu_si256((const __m256i *)(const void *)(src + 32 * h)),
                                   _mm256_loadu_si256((const __m256i *)(const void *)(src + 64)), &wlo[r], &whi[r]);
                } else {
                    const uint8_t *src = in == 4 ? wr[r] + 64 * g : wt[r];
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(src + 32 * h));
                    wlo[r] = _mm256_and_si256(v, nib);
                    whi[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
                }
                dw[r] = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dw4[r]), quarter[h]);
            }
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                const Q4XGroup *x = xg + (b0 + (size_t)c) * G + g;
                const __m256i xlo = _mm256_load_si256((const __m256i *)(const void *)(x->lo + 32 * h));
                const __m256i xhi = _mm256_load_si256((const __m256i *)(const void *)(x->hi + 32 * h));
                const __m256i corr = _mm256_load_si256((const __m256i *)(const void *)(x->corr + 8 * h));
                const __m256 dx = _mm256_load_ps(x->dx + 8 * h);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++) {
                    if (dt == DTYPE_Q8) {  // |q| x (xq with q's sign): q xq, pairs <= 32512
                        const __m256i plo = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(_mm256_abs_epi8(wlo[r]), _mm256_sign_epi8(xlo, wlo[r])), ones);
                        const __m256i phi = _mm256_madd_epi16(
                            _mm256_maddubs_epi16(_mm256_abs_epi8(whi[r]), _mm256_sign_epi8(xhi, whi[r])), ones);
                        const __m256i p = _mm256_add_epi32(_mm256_add_epi32(plo, corr), phi);
                        acc[r][c][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw[r], dx), acc[r][c][h]);
                        continue;
                    }
                    // |u x| <= 15 * 127 (Q6: 63 * 127): the pairs, and the sum of two, fit int16 exactly
                    const __m256i t = _mm256_add_epi16(_mm256_maddubs_epi16(wlo[r], xlo), _mm256_maddubs_epi16(whi[r], xhi));
                    const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(t, ones), corr);
                    acc[r][c][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw[r], dx), acc[r][c][h]);
                }
            }
        }
    }
    finish_tile(R, C, acc, n, rs, b0, N, out, bias, accumulate);
}

// R Q4 weight rows (rs apart) for all B batch rows, in chunks of C.
AI void rows_q4(DType dt, int R, int C, const WD *W, size_t n, size_t rs, float *out, const Q4XGroup *xg,
                const float *bias, size_t B, int accumulate) {
    size_t b = 0;
    for (; b + (size_t)C <= B; b += (size_t)C) tile_q4(dt, R, C, W, n, rs, b, out, xg, bias, accumulate);
    switch (B - b) {  // a tail of fewer than C rows (the cases C cannot have fold away)
    case 5: if (C > 5) tile_q4(dt, R, 5, W, n, rs, b, out, xg, bias, accumulate); break;
    case 4: if (C > 4) tile_q4(dt, R, 4, W, n, rs, b, out, xg, bias, accumulate); break;
    case 3: if (C > 3) tile_q4(dt, R, 3, W, n, rs, b, out, xg, bias, accumulate); break;
    case 2: if (C > 2) tile_q4(dt, R, 2, W, n, rs, b, out, xg, bias, accumulate); break;
    case 1: if (C > 1) tile_q4(dt, R, 1, W, n, rs, b, out, xg, bias, accumulate); break;
    default: break;
    }
}

AI void run_q4(DType dt, int R, int C, const WD *W, float *out, const float *inp, const float *bias, size_t B,
               size_t n0, size_t n1, int accumulate, float *scratch) {
    Q4XGroup *xg = (Q4XGroup *)(void *)scratch;
    quantize_x_q4(xg, inp, B, W->K, dt == DTYPE_Q8 ? 0 : q4_offset(dt));  // Q8 x int8: signed weights
    const size_t part = (n1 - n0) / (size_t)R;
    size_t n = n0;
    for (; n < n0 + part; n++) rows_q4(dt, R, C, W, n, part, out, xg, bias, B, accumulate);
    for (n = n0 + part * (size_t)R; n < n1; n++) rows_q4(dt, 1, C, W, n, 1, out, xg, bias, B, accumulate);
}

// ---- drivers ---------------------------------------------------------------

// The tile at batch row b0 (xq, dx: Q8's and Q4's quantized activations,
// else unused); H: a half of the lanes at a time (tile_halves).
AI void tile_at(DType dt, int R, int C, int H, const WD *W, size_t n, size_t rs, size_t b0, float *out,
                const float *inp, const int16_t *xq, const float *dx, const float *bias, int accumulate) {
    if (dtype_is_blocked(dt)) tile_blocked(dt, R, C, W, n, rs, b0, out, xq, dx, bias, accumulate);
    else if (H) tile_halves(dt, R, C, W, n, rs, b0, out, inp, bias, accumulate);
    else tile(dt, R, C, W, n, rs, b0, out, inp, bias, accumulate);
}

// R weight rows (rs apart) for all B batch rows, in chunks of C.
AI void rows(DType dt, int R, int C, int H, const WD *W, size_t n, size_t rs, float *out, const float *inp,
             const int16_t *xq, const float *dx, const float *bias, size_t B, int accumulate) {
    size_t b = 0;
    for (; b + (size_t)C <= B; b += (size_t)C) tile_at(dt, R, C, H, W, n, rs, b, out, inp, xq, dx, bias, accumulate);
    switch (B - b) {  // batch tail: the same arithmetic per element, a smaller tile (cases C cannot have fold away)
    case 5: if (C > 5) tile_at(dt, R, 5, H, W, n, rs, b, out, inp, xq, dx, bias, accumulate); break;
    case 4: if (C > 4) tile_at(dt, R, 4, H, W, n, rs, b, out, inp, xq, dx, bias, accumulate); break;
    case 3: if (C > 3) tile_at(dt, R, 3, H, W, n, rs, b, out, inp, xq, dx, bias, accumulate); break;
    case 2: if (C > 2) tile_at(dt, R, 2, H, W, n, rs, b, out, inp, xq, dx, bias, accumulate); break;
    case 1: if (C > 1) tile_at(dt, R, 1, H, W, n, rs, b, out, inp, xq, dx, bias, accumulate); break;
    default: break;
    }
}

// Q8 and Q4 need scratch (matmul_rows in matmul.c sees to it); the others read inp.
// R x C (H): the variant's tile.
AI void run(DType dt, int R, int C, int H, const WD *W, float *out, const float *inp, const float *bias, size_t B,
            size_t n0, size_t n1, int accumulate, float *scratch) {
    if (dtype_is_grouped(dt)) {  // their own tiles (the Q4 section)
        run_q4(dt, R, C, W, out, inp, bias, B, n0, n1, accumulate, scratch);
        return;
    }
    const int16_t *xq = NULL;
    const float *dx = NULL;
    if (dtype_is_blocked(dt)) {
        quantize_x(scratch, inp, B, W);
        xq = (const int16_t *)(const void *)scratch;
        dx = (const float *)(const void *)((const char *)scratch + q8_x_scales_offset(B, W->K));
    }
    const size_t part = (n1 - n0) / (size_t)R;
    size_t n = n0;
    for (; n < n0 + part; n++) rows(dt, R, C, H, W, n, part, out, inp, xq, dx, bias, B, accumulate);
    for (n = n0 + part * (size_t)R; n < n1; n++) rows(dt, 1, C, H, W, n, 1, out, inp, xq, dx, bias, B, accumulate);
}

// matmul_rows_avx2_RxC[h], one per variant: run with its tile for
// W's dtype, one instance each (matmul_kernels.h). The quantized dtypes
// have their own tiles: under a halves variant they run the default, 2x3.
#define A2_VARIANT(R, C, H)                                                                                 \
    AI void run_##R##x##C##H(DType dt, const WD *W, float *out, const float *inp, const float *bias, size_t B, \
                             size_t n0, size_t n1, int accumulate, float *scratch) {                       \
        const char kind = #H[0];                                                                            \
        if (kind && dtype_is_blocked(dt)) run(dt, 2, 3, 0, W, out, inp, bias, B, n0, n1, accumulate, scratch); \
        else if (kind == 'p' && scratch) run_packed(dt, W, out, inp, bias, B, n0, n1, accumulate, scratch);  \
        else if (kind == 'p') run(dt, 4, 3, 1, W, out, inp, bias, B, n0, n1, accumulate, scratch);         \
        else run(dt, R, C, kind == 'h', W, out, inp, bias, B, n0, n1, accumulate, scratch);                \
    }                                                                                                       \
    MATMUL_ROWS_PER_DTYPE_RUN(matmul_rows_avx2_##R##x##C##H, TARGET_AVX2, run_##R##x##C##H)
MATMUL_AVX2_VARIANTS(A2_VARIANT)

// Q8 x int8 (matmul_kernels.h): Q4's tiles of the default variant, 2 x 3.
TARGET_AVX2 void matmul_rows_avx2_q8_int8(float *out, const float *inp, const Weight *W, const float *bias, size_t B,
                                          size_t n0, size_t n1, int accumulate, float *scratch) {
    if (n0 >= n1 || B == 0) return;
    const WD d = weight_walk(W);
    run_q4(DTYPE_Q8, 2, 3, &d, out, inp, bias, B, n0, n1, accumulate, scratch);
}

#else
size_t matmul_avx2_packed_floats(size_t B, size_t K) { (void)B, (void)K; return 0; }  // no AVX2 kernels here
#endif

/*
 * matmul_kernels.h - the row-range kernels behind matmul() (matmul.h), one
 * per instruction set, and the choice between them. Internal to the library
 * (and its tests): forward.c calls matmul(), never these.
 *
 *   matmul_rows(isa, out, inp, W, bias, B, n0, n1, accumulate, scratch)
 *
 * computes, for the B rows of inp and the outputs n in [n0, n1) only (the
 * caller splits N across threads; other columns of out are not touched):
 *
 *   out[b*N + n] = (accumulate ? out[b*N + n] : 0) + bias[n] + sum_k inp[b*K + k] * w(n, k)
 *
 * with K = W->n_in, N = W->n_out; inp is (B, K), out (B, N), bias (N) or
 * NULL. Activations and sums are float32; W is read once per call for all B
 * rows (rows beyond a tile's batch rows re-read it from cache, not memory).
 *
 * scratch: 64-byte aligned, at least matmul_scratch_floats(B, K) floats,
 * used by this call alone (the AVX-512 kernels repack the activations into
 * one linear stream there), or NULL: inp is then read in place. The result
 * is the same bits either way; only the speed differs.
 *
 * ---------------------------------------------------------------------------
 * CANONICAL ARITHMETIC (batch invariance and cross-ISA equality)
 * ---------------------------------------------------------------------------
 * Let w(n,k) be the EXACT float32 value of the stored weight:
 *   F32: the float; F16: IEEE half -> float (exact); BF16: bits << 16 (exact);
 *   Q8:  (float)q * d with d the f16 scale of the 32-block (exact: |q| <= 127
 *        has 7 significant bits, d has 11, the product fits in 24).
 * For every single output element (b, n), every kernel performs exactly:
 *
 *   float lane[16] = {+0.0f, ...};
 *   for (k0 = 0; k0 < K; k0 += 16)                       // K rounded up to 16
 *     for (l = 0; l < 16; l++)                           // elements k >= K are
 *       lane[l] = fmaf(w(n,k0+l), x(b,k0+l), lane[l]);   //   w = x = +0.0f
 *   for (i = 0; i < 8; i++) lane[i] = lane[i] + lane[i+8];   // fixed tree
 *   for (i = 0; i < 4; i++) lane[i] = lane[i] + lane[i+4];
 *   for (i = 0; i < 2; i++) lane[i] = lane[i] + lane[i+2];
 *   float s = lane[0] + lane[1];
 *   if (bias) s = s + bias[n];
 *   out = accumulate ? out + s : s;
 *
 * The SIMD kernels register-block over several W rows and several batch
 * rows, but each (b, n) accumulator is one 16-lane vector (AVX-512: one zmm;
 * AVX2: a lo/hi pair of ymm) updated by exactly this FMA sequence, reduced by
 * exactly this tree, and the K tail is a zero-masked / zero-padded load of
 * the same width for every (b, n). Tile sizes only change which registers
 * hold which (b, n) and the order in which *independent* elements are
 * computed, never the operations for one element. Hence results are bitwise
 * identical for any B, any batch neighbours, any [n0, n1) split, with or
 * without scratch, and across scalar / AVX2 / AVX-512 (and compilers). Q8 is
 * "dequantize, then FMA", not "sum a block, then multiply by d": the same
 * cost at B = 1, cheaper at large B, and no extra rounding, so a Q8 matrix
 * gives the bits of the F32 kernel on its dequantized weights. NaN payloads
 * are the only thing not pinned down.
 *
 * Error bound that follows (the tests hold every kernel to it):
 *   |y - exact| <= (m + 1) 2^-24 (sum_k |x_k w_k| + |bias| + |old out|),
 *   m = ceil(K / 16) + 4 + 2   (FMAs per lane, tree adds, bias and out adds)
 * i.e. 3.3e-6 relative at K = 768, 1.2e-5 at K = 3072.
 *
 * BUILD REQUIREMENTS: -ffp-contract=off and never -ffast-math (the Makefile
 * says so), else the compiler may fuse or reassociate the scalar code and
 * break the guarantee. The SIMD files carry __attribute__((target(...))) on
 * every function, so plain -O2 for baseline x86-64 builds them; they are
 * called only where matmul_isa_supported() says so.
 */
#ifndef GPT_MATMUL_KERNELS_H
#define GPT_MATMUL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "matmul.h"  // matmul_scratch_floats

// See the top of this file. isa must be supported (an unsupported one runs
// the scalar kernel: the same bits).
void matmul_rows(MatmulIsa isa, float *out, const float *inp, const Weight *W, const float *bias,
                 size_t B, size_t n0, size_t n1, int accumulate, float *scratch);

// The per-ISA kernels matmul_rows dispatches to (same contract; the SIMD
// ones only on a CPU that supports them).
void matmul_rows_scalar(float *out, const float *inp, const Weight *W, const float *bias,
                        size_t B, size_t n0, size_t n1, int accumulate);
void matmul_rows_avx2(float *out, const float *inp, const Weight *W, const float *bias,
                      size_t B, size_t n0, size_t n1, int accumulate);
void matmul_rows_avx512(float *out, const float *inp, const Weight *W, const float *bias,
                        size_t B, size_t n0, size_t n1, int accumulate, float *scratch);

// A weight matrix as the SIMD kernels walk it: row n at w + n * ldw * esize
// (ldw = K, or K_pad for Q8), Q8 scales ldd per row at d.
typedef struct {
    const char *w;
    const uint16_t *d;
    size_t N, K, ldw, ldd;
} WD;

static inline WD weight_walk(const Weight *W) {
    WD d = {(const char *)W->data, NULL, W->n_out, W->n_in, W->n_in, 0};
    if (W->dtype == DTYPE_Q8) {
        d.ldw = q8_row_quants(W->n_in);
        d.d = W->scales;
        d.ldd = d.ldw / Q8_BLOCK;
    }
    return d;
}

// Bytes of one stored element of a row (a Q8 row: one int8 per element).
static inline size_t esize(DType dt) { return dt == DTYPE_F32 ? 4 : dt == DTYPE_Q8 ? 1 : 2; }

#endif

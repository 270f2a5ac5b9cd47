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
 * one linear stream there; every kernel puts Q8's int16 and Q4's and Q6's
 * int8 activations there), or NULL: inp is then read in place, and Q8, Q4
 * and Q6 run
 * the scalar kernel, which quantizes each block of activations again for
 * every output. The result is the same bits either way; only the speed
 * differs.
 *
 * ---------------------------------------------------------------------------
 * CANONICAL ARITHMETIC (batch invariance and cross-ISA equality)
 * ---------------------------------------------------------------------------
 * F32, F16, BF16. Let w(n,k) be the EXACT float32 value of the stored
 * weight (F16: IEEE half -> float; BF16: bits << 16; both exact). For every
 * single output element (b, n), every kernel performs exactly:
 *
 *   float lane[16] = {+0.0f, ...};
 *   for (k0 = 0; k0 < K; k0 += 16)                       // K rounded up to 16
 *     for (l = 0; l < 16; l++)                           // elements k >= K are
 *       lane[l] = fmaf(w(n,k0+l), x(b,k0+l), lane[l]);   //   w = x = +0.0f
 *   TAIL(lane)
 *
 *   TAIL:  for (i = 0; i < 8; i++) lane[i] = lane[i] + lane[i+8];  // fixed tree
 *          for (i = 0; i < 4; i++) lane[i] = lane[i] + lane[i+4];
 *          for (i = 0; i < 2; i++) lane[i] = lane[i] + lane[i+2];
 *          float s = lane[0] + lane[1];
 *          if (bias) s = s + bias[n];
 *          out = accumulate ? out + s : s;
 *
 * Q8 (int8 q(n,k), an f16 scale dw(n,j) per block j of 32 inputs). The
 * activations are quantized too, per row b and block j, to int16, by
 * q8_quantize_x_block() below (the definition):
 *   amax = max |x| over the block's (at most 32) inputs;
 *   any input NaN or infinite: dx = NaN, xq = 0 (the outputs become NaN);
 *   amax < 2^-96 (all zero): dx = 0, xq = 0;
 *   else inv = 32767.0f / amax, dx = amax / 32767.0f (two float divisions),
 *        xq[k] = round-half-even(x[k] * inv) (a float product), |xq| <= 32767;
 *   xq = 0 past K.
 * Then, for every output element (b, n):
 *
 *   float lane[16] = {+0.0f, ...};
 *   for (j = 0; j < ceil(K/32); j++) {
 *     float s = dw(n,j) * dx(b,j);                       // one float product
 *     for (l = 0; l < 16; l++) {                         // k = 32j + 2l, +1
 *       int32 p = xq(b,k) q(n,k) + xq(b,k+1) q(n,k+1);   // exact integers
 *       lane[l] = fmaf((float)p, s, lane[l]);            // (float)p exact:
 *     }                                                  //   |p| < 2^24
 *   }
 *   TAIL(lane)
 *
 * Q4 (4-bit q(n,k) in [-8, 7], an f16 scale dw(n,j) per block j of 32).
 * Its activations are int8, per row b and block j, by q4_quantize_x_block()
 * below (the definition): q8_quantize_x_block's rules with 127 for 32767
 *   (inv = 127.0f / amax, dx = amax / 127.0f, xq[k] = round-half-even(x[k] * inv),
 *   |xq| <= 127; NaN or infinite: dx = NaN, xq = 0; amax < 2^-96: dx = 0, xq = 0).
 * The blocks go in groups of 4 (group g: blocks 4g .. 4g+3; blocks past
 * ceil(K/32) have q = xq = 0 and dw = dx = +0), a lane per quarter block:
 * lane l of group g takes block j = 4g + l/4 and, with e = 4 (l % 4), the
 * 8 inputs i = e .. e+3 and 16+e .. 16+e+3 of it (k = 32j + i). For every
 * output element (b, n):
 *
 *   float lane[16] = {+0.0f, ...};
 *   for (g = 0; g < ceil(ceil(K/32) / 4); g++)
 *     for (l = 0; l < 16; l++) {
 *       j = 4g + l/4;
 *       int32 p = sum over its 8 inputs k of xq(b,k) q(n,k);   // exact integers,
 *       float s = dw(n,j) * dx(b,j);                          //   |p| <= 8128
 *       lane[l] = fmaf((float)p, s, lane[l]);
 *     }
 *   TAIL(lane)
 *
 * Why this shape: a 64-byte load of a weight row is 4 blocks; its low
 * nibbles (one AND) are their inputs 0..15 and its high nibbles (shift,
 * AND) their inputs 16..31, and 4 adjacent bytes of each, an int32 lane of
 * vpdpbusd (AVX512-VNNI: unsigned nibble x signed int8, 4 products summed)
 * or of vpmaddubsw + vpmaddwd(1) (AVX-512 without VNNI, AVX2), belong to
 * one quarter of one block. The stored nibble is q + 8: p = sum u xq - 8
 * sum xq, the second term made with the activations (once per row) and
 * the accumulator's start. All integer sums are exact, so how a kernel
 * adds them up is free; the floats are fixed above.
 *
 * Q6 (6-bit q(n,k) in [-32, 31], an f16 scale dw(n,j) per block j of 32):
 * exactly Q4's arithmetic, lanes, groups and int8 activations
 * (q4_quantize_x_block), with these q: |p| <= 8 * 32 * 127 = 32512. A
 * group's 96 stored bytes (dtype.h) unpack, with a shift and two masks more
 * than Q4's 64, into the same two vectors of unsigned bytes, u = q + 32
 * (6 bits), in the order Q4's nibbles are in; the offset's correction is
 * -32 sum xq. Unsigned u times signed xq stays exact in every instruction:
 * vpdpbusd sums 4 in int32, and vpmaddubsw's pairs and the sum of two of
 * them stay within int16 (4 * 63 * 127 = 32004).
 *
 * Q8 x int8 (Weight.q8_int8: an explicit choice, --q8-act int8; never
 * picked by a measurement, since its bits differ from Q8's): exactly Q4's
 * arithmetic, lanes, groups and int8 activations (q4_quantize_x_block),
 * with q the stored int8 of Q8 (block j: bytes 32j .. 32j+31 of the row),
 * so |p| <= 8 * 128 * 127 = 130048 < 2^24, exact in float. A group is 128
 * bytes of a row, two 64-byte loads [blocks 0 1] [blocks 2 3]; one 128-bit
 * shuffle each (vshufi64x2) makes Q4's two vectors, inputs 0..15 and
 * 16..31 of the 4 blocks. With VNNI, u = q ^ 0x80 = q + 128 (unsigned) and
 * the correction -128 sum xq (made with the activations); without, the
 * signs move to the activations (|q| unsigned times +-xq: vpmaddubsw's
 * pairs stay within int16, 2 * 128 * 127 = 32512). The integers are the
 * same either way.
 *
 * NAPKIN (compute-bound prefill, per 128 products of one (b, n)): int16
 * Q8 is 4 x (vpmaddwd of 32 products, vcvtdq2ps, vfmadd); Q8 x int8 with
 * VNNI is 2 vpdpbusd (64 products and the accumulate each), vcvtdq2ps,
 * vmulps (the lanes' dw dx), vfmadd. The integer multiplies run on the
 * pipes of the FMAs (AMD's guide for Zen 4: FP0 and FP1; Zen 5 keeps
 * two), so those two pipes see 8 operations against 4: int8 can be 2x at
 * most; the rest (per weight row of a tile 2 shuffles and 2 XORs, per
 * batch row 4 loads, the conversions) runs beside them. Measured on Zen
 * 5 (bench_q8act, docs/performance.md): 1.7x for the 4x4 kernels alone.
 *
 * So a Q8 block costs one integer multiply-add of 32 pairs (vpmaddwd), one
 * conversion and one FMA per 16 lanes, instead of widening 32 weights to
 * float and two FMAs: decode at the memory bound on one core (see the
 * bench). The int16 activations lose at most half a step of amax/32767 per
 * input, 2^-15 of the block's largest input: 1/258 of what the int8 weights
 * already lose (int8 activations, llama.cpp's Q8_0 x Q8_0, lose 2^-8, 128
 * times more; their measured product error: README).
 *
 * The SIMD kernels register-block over several W rows and several batch
 * rows, but each (b, n) accumulator is one 16-lane vector (AVX-512: one zmm;
 * AVX2: a lo/hi pair of ymm) updated by exactly this sequence, reduced by
 * exactly this tree, and the K tail is a zero-masked / zero-padded load of
 * the same width for every (b, n). Tile sizes only change which registers
 * hold which (b, n) and the order in which *independent* elements are
 * computed, never the operations for one element. The activations of a row
 * are quantized from that row alone. Hence results are bitwise identical
 * for any B, any batch neighbours, any [n0, n1) split, with or without
 * scratch, and across scalar / AVX2 / AVX-512 (and compilers). NaN payloads
 * are the only thing not pinned down.
 *
 * Error bound that follows (the tests hold every kernel to it):
 *   |y - exact| <= (m + 1) 2^-24 (sum_k |x_k w_k| + |bias| + |old out|),
 *   m = ceil(K / 16) + 4 + 2   (FMAs per lane, tree adds, bias and out adds)
 * i.e. 3.3e-6 relative at K = 768, 1.2e-5 at K = 3072; for Q8 add
 *   2^-15 sum_k |w_k| amax(block of k)   (the int16 activations)
 * and one more rounding (s) to m; for Q4 (and Q8 x int8) the same with 1/254 (half a step
 * of amax/127) for 2^-15: its int8 activations lose 1/254 of the block's
 * largest input, small beside its 4-bit weights' own error (one step in 16
 * of the block's largest weight; measured: test_accuracy, README); for Q6
 * as for Q4 (its weights' step: one in 64).
 *
 * BUILD REQUIREMENTS: -ffp-contract=off and never -ffast-math (the Makefile
 * says so), else the compiler may fuse or reassociate the scalar code and
 * break the guarantee. The SIMD files carry cpu.h's TARGET_AVX2 or
 * TARGET_AVX512 on every function, so plain -O2 for baseline x86-64 builds
 * them; they are called only where cpu_isa_supported() says so.
 */
#ifndef GPT_MATMUL_KERNELS_H
#define GPT_MATMUL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "model/dtype.h"
#include "kernels/matmul.h"  // matmul_scratch_floats

// See the top of this file. isa must be supported (an unsupported one runs
// the scalar kernel: the same bits).
void matmul_rows(CpuIsa isa, float *out, const float *inp, const Weight *W, const float *bias,
                 size_t B, size_t n0, size_t n1, int accumulate, float *scratch);

// The per-ISA kernels matmul_rows dispatches to (same contract; the SIMD
// ones, x86-64 only, on a CPU that supports them, and for Q8, Q4 and Q6
// only with scratch).
void matmul_rows_scalar(float *out, const float *inp, const Weight *W, const float *bias,
                        size_t B, size_t n0, size_t n1, int accumulate, float *scratch);
// AVX2 has a kernel per variant (below), matmul_rows_avx2_RxC[h].
#define MATMUL_AVX2_FN(R, C, H) matmul_rows_avx2_##R##x##C##H
#define MATMUL_AVX2_DECLARE(R, C, H)                                                                         \
    void MATMUL_AVX2_FN(R, C, H)(float *out, const float *inp, const Weight *W, const float *bias, size_t B,  \
                                 size_t n0, size_t n1, int accumulate, float *scratch);
void matmul_rows_avx512(float *out, const float *inp, const Weight *W, const float *bias,
                        size_t B, size_t n0, size_t n1, int accumulate, float *scratch);
// The same with AVX512-VNNI for Q4's and Q6's products (vpdpbusd; the same bits):
// what matmul_rows runs for CPU_AVX512 where cpu_has_avx512_vnni().
void matmul_rows_avx512_vnni(float *out, const float *inp, const Weight *W, const float *bias,
                             size_t B, size_t n0, size_t n1, int accumulate, float *scratch);
// Q8 x int8 (W->q8_int8) with AVX2, and with AVX-512, VNNI (vnni = 1: the
// CPU must have it) or not: the same bits as the scalar kernel.
void matmul_rows_avx2_q8_int8(float *out, const float *inp, const Weight *W, const float *bias, size_t B,
                              size_t n0, size_t n1, int accumulate, float *scratch);
void matmul_rows_avx512_q8_int8(int vnni, float *out, const float *inp, const Weight *W, const float *bias,
                                size_t B, size_t n0, size_t n1, int accumulate, float *scratch);
// VARIANTS. A variant is a way to arrange a kernel's work: which (b, n)
// accumulators a register tile holds, so how often each weight and each
// activation is loaded. Every variant of an ISA obeys the arithmetic above,
// so all give the same bits (test_matmul checks each against the scalar
// kernel); only the speed differs, and which is fastest depends on the CPU
// (registers, load ports, cache sizes), so tune.h measures them. AVX2's are
// tile shapes, X(R, C, H): R weight rows x C batch rows (R far-apart
// weight rows: R linear streams), and H empty for 2 R C of its 16 ymm
// accumulators (both halves of each output's 16 lanes at once) or h for R C
// (one half at a time, over blocks of K that stay in L1; float weights
// only: the quantized ones run the default under it), or p (below). The
// variant's name is R "x" C H, e.g. 3x2, 3x4h; the first is the default
// (calls of fewer than MATMUL_PLAN_MIN_ROWS rows run it). AVX-512's,
// X(R, C, KB, S): the compute-bound tiles (calls of MATMUL_PLAN_MIN_ROWS rows or
// more) of R adjacent weight rows x C batch rows, R C of its 32 zmm
// accumulators, for F32, F16, BF16 and Q8 (Q4 and Q6 run the default under
// each), the float weights' rows in k-blocks of KB KiB where a tile's R rows
// are longer (0: 12 KiB; 1024: never, for GPT-2's shapes), named R "x" C S
// (6x4w: 24 KiB; 4x4f: whole rows); 4x4, the first, is matmul_rows_avx512's.
// Which fits which core: matmul_avx512.c's napkin bound. Scalar has one variant.
#define MATMUL_AVX2_VARIANTS(X) X(2, 3, ) X(1, 6, ) X(3, 2, ) X(2, 2, ) X(4, 1, ) X(3, 4, h) X(4, 3, h) X(2, 6, h) X(6, 16, p)
// 6x16p: one lane of the 16 at a time, 6 weight rows x 16 batch rows, the
// activations packed lane by lane in scratch (matmul_avx2.c, "packed");
// float weights only, and with scratch (else 4x3h). Its scratch in floats:
size_t matmul_avx2_packed_floats(size_t B, size_t K);
enum { MATMUL_AVX2_VARIANT_COUNT = 9 };
_Static_assert((int)MATMUL_AVX2_VARIANT_COUNT <= (int)MATMUL_VARIANTS_MAX, "matmul.h holds every variant");
MATMUL_AVX2_VARIANTS(MATMUL_AVX2_DECLARE)
#define MATMUL_AVX512_VARIANTS(X) X(4, 4, 0, ) X(6, 4, 0, ) X(4, 6, 0, ) X(6, 4, 24, w) X(4, 6, 24, w) X(8, 3, 24, w) \
    X(4, 4, 1024, f)
#define MATMUL_AVX512_FN(R, C, S) matmul_rows_avx512_##R##x##C##S
#define MATMUL_AVX512_DECLARE(R, C, KB, S)                                                                   \
    void MATMUL_AVX512_FN(R, C, S)(float *out, const float *inp, const Weight *W, const float *bias, size_t B, \
                                   size_t n0, size_t n1, int accumulate, float *scratch);
enum { MATMUL_AVX512_VARIANT_COUNT = 7 };
_Static_assert((int)MATMUL_AVX512_VARIANT_COUNT <= (int)MATMUL_VARIANTS_MAX, "matmul.h holds every variant");
MATMUL_AVX512_VARIANTS(MATMUL_AVX512_DECLARE)

// matmul_rows with the AVX-512 route named (vnni: 1 for the VNNI kernel,
// which the CPU must then support), so that tests run both, and the variant
// (0 .. matmul_variant_count(isa) - 1; another runs the default, 0).
void matmul_rows_route(CpuIsa isa, int vnni, int variant, float *out, const float *inp, const Weight *W,
                       const float *bias, size_t B, size_t n0, size_t n1, int accumulate, float *scratch);

// Q8's activations: quantizes the m <= Q8_BLOCK inputs at x into q[0 ..
// Q8_BLOCK) (zeros past m) and returns the block's scale dx, exactly as the
// canonical arithmetic above says. The SIMD kernels have their own, with
// the same results (test_matmul checks).
float q8_quantize_x_block(int16_t *q, const float *x, size_t m);

// Q4's activations (int8, the same rules with 127): into q[0 .. Q4_BLOCK).
float q4_quantize_x_block(int8_t *q, const float *x, size_t m);

// The smallest block maximum that is quantized; below it the block is zero.
#define Q8_X_TINY 0x1p-96f

// Q4's (and Q6's) groups of 4 blocks in a row of K inputs: ceil(ceil(K/32) / 4).
static inline size_t q4_groups(size_t K) { return (q8_row_quants(K) / Q8_BLOCK + 3) / 4; }

// How the SIMD kernels keep one row's Q4 (or Q6) activations of group g in
// scratch (a kernel places the groups of a call's rows in an order of its
// choosing): 256 bytes, the vector operands of the canonical lanes as they
// are used.
typedef struct {
    int8_t lo[64];    // lo[16 i + e] = xq(block 4g + i, input e),      e < 16
    int8_t hi[64];    // hi[16 i + e] = xq(block 4g + i, input 16 + e)
    int32_t corr[16]; // -o x the sum of lane l's 8 activations, o the stored
                      // values' offset (q4_offset(): Q4 8, Q6 32)
    float dx[16];     // dx(block 4g + l/4) of lane l
} Q4XGroup;
_Static_assert(sizeof(Q4XGroup) == 256, "a Q4 activation group is 4 cache lines");

// What a grouped dtype stores for q = 0: Q4 q + 8, Q6 q + 32; and what
// Q8 x int8's VNNI kernel makes of it (q ^ 0x80 = q + 128).
static inline int32_t q4_offset(DType dt) { return dt == DTYPE_Q6 ? 32 : dt == DTYPE_Q8 ? 128 : 8; }

// Where Q8 kernels keep a call's quantized activations in scratch: the
// int16 values first (B x q8_row_quants(K), in a layout of each kernel's
// choosing), then the float scales, row-major [b][block], at this offset
// in bytes (a multiple of 64).
static inline size_t q8_x_scales_offset(size_t B, size_t K) { return B * q8_row_quants(K) * sizeof(int16_t); }

// A weight matrix as the SIMD kernels walk it: row n at w + n * ldw * esize
// (ldw = K; for Q8 K_pad, for Q4 K_pad / 2 bytes, for Q6 q6_row_bytes(K)),
// Q8, Q4 and Q6 scales ldd per
// row at d (ldd = K_pad / 32 blocks); Kq = K_pad, the int16 activations of
// a row.
typedef struct {
    const char *w;
    const uint16_t *d;
    size_t N, K, ldw, ldd, Kq;
} WD;

static inline WD weight_walk(const Weight *W) {
    WD d = {(const char *)W->data, NULL, W->n_out, W->n_in, W->n_in, 0, q8_row_quants(W->n_in)};
    if (dtype_is_blocked(W->dtype)) {
        d.ldw = W->dtype == DTYPE_Q8 ? q8_row_quants(W->n_in)
                : W->dtype == DTYPE_Q4 ? q4_row_bytes(W->n_in)
                                       : q6_row_bytes(W->n_in);
        d.d = W->scales;
        d.ldd = d.Kq / Q8_BLOCK;
    }
    return d;
}

// Bytes of one stored element of a row (a Q8 row: one int8 per element; a
// Q4 or Q6 row is walked in bytes too, ldw of them).
static inline size_t esize(DType dt) { return dt == DTYPE_F32 ? 4 : dtype_is_blocked(dt) ? 1 : 2; }

// The entry point of a SIMD kernel file, written once. The file defines
//   run(dt, W, out, inp, bias, B, n0, n1, accumulate, scratch)
// (always inline, W a WD); this makes one instance of it per dtype, so that
// every switch on dt inside folds away, and `name` (matmul_rows_avx2, ...),
// with matmul_rows' contract, which picks the instance for W's dtype.
// target: the file's cpu.h target attribute.
// MATMUL_ROWS_PER_DTYPE_RUN: the same with another function than run (a
// file with several variants defines one per variant).
#define MATMUL_ROWS_PER_DTYPE(name, target) MATMUL_ROWS_PER_DTYPE_RUN(name, target, run)
#define MATMUL_RUN_INSTANCE(fn, dt, target, run)                                                        \
    target static void fn(const WD *W, float *out, const float *inp, const float *bias, size_t B,      \
                          size_t n0, size_t n1, int accumulate, float *scratch) {                      \
        run(dt, W, out, inp, bias, B, n0, n1, accumulate, scratch);                                    \
    }
#define MATMUL_ROWS_PER_DTYPE_RUN(name, target, run)                                                    \
    MATMUL_RUN_INSTANCE(name##_f32, DTYPE_F32, target, run)                                             \
    MATMUL_RUN_INSTANCE(name##_f16, DTYPE_F16, target, run)                                             \
    MATMUL_RUN_INSTANCE(name##_bf16, DTYPE_BF16, target, run)                                           \
    MATMUL_RUN_INSTANCE(name##_q8, DTYPE_Q8, target, run)                                               \
    MATMUL_RUN_INSTANCE(name##_q4, DTYPE_Q4, target, run)                                               \
    MATMUL_RUN_INSTANCE(name##_q6, DTYPE_Q6, target, run)                                               \
    target void name(float *out, const float *inp, const Weight *W, const float *bias, size_t B,       \
                     size_t n0, size_t n1, int accumulate, float *scratch) {                           \
        if (n0 >= n1 || B == 0) return;                                                                \
        const WD d = weight_walk(W);                                                                   \
        switch (W->dtype) {                                                                            \
        case DTYPE_F32: name##_f32(&d, out, inp, bias, B, n0, n1, accumulate, scratch); break;         \
        case DTYPE_F16: name##_f16(&d, out, inp, bias, B, n0, n1, accumulate, scratch); break;         \
        case DTYPE_BF16: name##_bf16(&d, out, inp, bias, B, n0, n1, accumulate, scratch); break;       \
        case DTYPE_Q8: name##_q8(&d, out, inp, bias, B, n0, n1, accumulate, scratch); break;           \
        case DTYPE_Q4: name##_q4(&d, out, inp, bias, B, n0, n1, accumulate, scratch); break;           \
        case DTYPE_Q6: name##_q6(&d, out, inp, bias, B, n0, n1, accumulate, scratch); break;           \
        }                                                                                              \
    }

#endif

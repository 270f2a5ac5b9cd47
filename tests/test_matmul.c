/*
 * test_matmul.c - matmul() and its kernels (matmul_kernels.h) against
 * matmul_reference(), the plain loop summed in double, on ragged shapes: K
 * and N that are not multiples of any vector width or of Q8's block, one row
 * and many, every dtype, with and without bias, = and +=. Both sides read the
 * same encoded weights, so the tolerance is float32 summation's in every
 * dtype, plus, for Q8, Q4 and Q6, the rounding of the activations to int16 and
 * int8 (half a step of the block's max |x| / 32767, / 127); the encodings themselves are
 * checked against their rounding bounds.
 *
 * 1. matmul() vs matmul_reference: a relative error of at most
 *    4e-6 sqrt(K) + 1e-6 of sum |x w| (far above float32 summation in any
 *    order, far below a wrong index or a missing term).
 * 2. The sweep (every dtype, K in {1, 7, 15, ..., 770}, N up to 300 and odd,
 *    B = 1..16 and 100):
 *    (a) every kernel within the rigorous bound of the canonical arithmetic
 *        (matmul_kernels.h): (m + 1) 2^-24 (sum |x w| + |bias| + |old out|),
 *        m = ceil(K/16) + 6 (Q8, Q4, Q6: + 1, and + 2^-15 sum |w| amax(block),
 *        Q4 and Q6 2^-7: twice the half steps);
 *        their activations include all-zero, tiny (below 2^-96: counted as
 *        zero), subnormal and huge blocks;
 *    Q8 x int8 (Weight.q8_int8: Q4's arithmetic on Q8's weights) is swept as
 *    a dtype of its own, its bound Q4's;
 *    (b) every supported ISA (AVX-512: Q4, Q6 and Q8 x int8 with VNNI and without, where the
 *        CPU has it), with and without scratch, bitwise equal to CPU_SCALAR; F16/BF16 bitwise equal to the F32 kernel on their
 *        dequantized weights; matmul() on a 2-thread pool the same bits;
 *        a NaN or infinite activation makes its row's outputs NaN (Q8, Q4, Q6)
 *        and no other row's;
 *    (c) batch invariance, bitwise: a row computed alone equals its row in
 *        random batches (rows repeated, any position), computed in random
 *        [n0, n1) pieces (the columns outside a piece untouched), with and
 *        without scratch, and through matmul() with T > MATMUL_GROUP on a
 *        2-thread pool.
 * A case (dtype, K, N, B) is one check per property, over every route,
 * variant and scratch choice: its message names the first that differs
 * and how many do.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "forward.h"
#include "kernels/matmul.h"
#include "kernels/matmul_kernels.h"
#include "base/threads.h"

// Q8 x int8 (Weight.q8_int8) swept as a dtype past the others.
#define Q8_INT8 ((DType)DTYPE_COUNT)

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static float uniform(void) {  // [-1, 1)
    return (float)((next_random() >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static size_t below(size_t n) { return (size_t)(next_random() >> 11) % n; }

// |x| @ |W| + |bias| (+ |out| when accumulating): the scale of each result.
static double magnitude(const float *inp, const Weight *W, const float *bias, const float *prev,
                        size_t t, size_t j) {
    double m = bias ? fabs(bias[j]) : 0.0;
    if (prev) m += fabs(prev[t * W->n_out + j]);
    for (size_t i = 0; i < W->n_in; i++) m += fabs((double)inp[t * W->n_in + i] * weight_at(W, i, j));
    return m;
}

// Q8, Q4 and Q6 only: 2^-15 sum_k |w_k| max|x| over k's block, the most that rounding
// row t of inp to int16 can move output j (matmul_kernels.h; a block whose
// max |x| is below Q8_X_TINY counts as zero: all of it); else 0.
static double q8_activation_error(const float *inp, const Weight *W, size_t t, size_t j) {
    if (!dtype_is_blocked(W->dtype)) return 0.0;
    double e = 0.0;
    for (size_t k0 = 0; k0 < W->n_in; k0 += Q8_BLOCK) {
        double amax = 0.0, wsum = 0.0;
        for (size_t k = k0; k < W->n_in && k < k0 + Q8_BLOCK; k++) {
            amax = fmax(amax, fabs(inp[t * W->n_in + k]));
            wsum += fabs(weight_at(W, k, j));
        }
        // Q8: half a step of amax / 32767, Q4, Q6, Q8 x int8: of amax / 127 (twice that, for slack)
        e += wsum * amax * (amax < Q8_X_TINY ? 1.0 : weight_is_grouped(W) ? 0x1p-7 : 0x1p-15);
    }
    return e;
}

// dt Q8_INT8: Q8 x int8 (Weight.q8_int8).
static void check_shape(DType dt, size_t T, size_t K, size_t N, int with_bias, int accumulate) {
    const int i8 = dt == Q8_INT8;
    if (i8) dt = DTYPE_Q8;
    float *w = malloc(K * N * sizeof *w), *inp = malloc(T * K * sizeof *inp);
    float *bias = malloc(N * sizeof *bias), *fast = malloc(T * N * sizeof *fast);
    float *ref = malloc(T * N * sizeof *ref), *prev = malloc(T * N * sizeof *prev);
    unsigned char *bytes = malloc(weight_bytes(dt, N, K));
    for (size_t i = 0; i < K * N; i++) w[i] = uniform();
    for (size_t i = 0; i < T * K; i++) inp[i] = uniform();
    for (size_t i = 0; i < N; i++) bias[i] = uniform();
    for (size_t i = 0; i < T * N; i++) prev[i] = uniform();
    memcpy(fast, prev, T * N * sizeof *fast);
    memcpy(ref, prev, T * N * sizeof *ref);
    weight_encode(bytes, dt, w, N, K);
    Weight W = weight_view(dt, bytes, N, K);
    W.q8_int8 = i8;
    const float *b = with_bias ? bias : NULL;
    matmul(fast, inp, &W, b, T, accumulate, NULL);
    matmul_reference(ref, inp, &W, b, T, accumulate);
    double worst = 0;
    size_t worst_at = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < N; j++) {
            double mag = magnitude(inp, &W, b, accumulate ? prev : NULL, t, j);
            double err = (fabs((double)fast[t * N + j] - ref[t * N + j]) - q8_activation_error(inp, &W, t, j)) /
                         (mag + 1e-30);
            if (err > worst) worst = err, worst_at = t * N + j;
        }
    double tol = 4e-6 * sqrt((double)K) + 1e-6;
    CHECK(worst <= tol, "%s T %zu K %zu N %zu bias %d acc %d: relative error %.3g at %zu (tolerance %.3g)",
          i8 ? "Q8 x int8" : dtype_name(dt), T, K, N, with_bias, accumulate, worst, worst_at, tol);
    free(w), free(inp), free(bias), free(fast), free(ref), free(prev), free(bytes);
}

// The scale search of Q4 (or Q6) against brute force: on random blocks, no
// candidate m / c (c = -L + 0.025 L k, k = -5..5, rounded to f16: Q4 -9,
// -8.8, ..., -7, Q6 -36, -35.2, ..., -28) has less squared error than the
// chosen scale, which is one of them. The block is read back through
// weight_at (d q).
static void check_scale_search(DType dt, uint64_t rng) {
    const float L = dt == DTYPE_Q6 ? 32.0f : 8.0f;
    float v[32];
    unsigned char bytes[Q6_GROUP_BYTES + 8];
    for (int blk = 0; blk < 200; blk++) {
        float m = 0;
        for (int i = 0; i < 32; i++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            v[i] = (float)((double)(rng >> 11) * 0x1p-53 * 2 - 1) * (blk % 2 ? 1.0f : (float)(i % 5));
            if (fabsf(v[i]) > fabsf(m)) m = v[i];
        }
        weight_encode(bytes, dt, v, 1, 32);
        Weight W = weight_view(dt, bytes, 1, 32);
        double d = f16_to_f32(W.scales[0]), chosen = 0, best = INFINITY;
        int is_candidate = 0;
        for (int i = 0; i < 32; i++) chosen += (v[i] - weight_at(&W, (size_t)i, 0)) * (v[i] - weight_at(&W, (size_t)i, 0));
        for (int k = -5; k <= 5; k++) {
            double c = f16_to_f32(f32_to_f16(m / (-L + 0.025f * L * (float)k))), e = 0;
            for (int i = 0; i < 32; i++) {
                double r = rint(v[i] / c);
                r = r > L - 1 ? L - 1 : r < -L ? -L : r;
                e += (v[i] - c * r) * (v[i] - c * r);
            }
            best = e < best ? e : best;
            is_candidate |= c == d;
        }
        CHECK(is_candidate && chosen <= best * (1 + 1e-5), "%s block %d: scale %g (a candidate: %d), squared error %g, "
              "a candidate's %g", dtype_name(dt), blk, d, is_candidate, chosen, best);
    }
}

// weight_at, weight_row and the encodings read back what was written.
static void test_encodings(void) {
    enum { K = 37, N = 3 };
    float w[N * K];
    for (size_t i = 0; i < N * K; i++) w[i] = uniform();
    for (int d = 0; d < DTYPE_COUNT; d++) {
        unsigned char bytes[N * K * 4];
        weight_encode(bytes, (DType)d, w, N, K);
        Weight W = weight_view((DType)d, bytes, N, K);
        float row[K];
        weight_row(row, &W, 2);
        double worst = 0;
        for (size_t i = 0; i < K; i++) {
            CHECK(row[i] == weight_at(&W, i, 2), "%s: weight_row %.9g expected to equal weight_at %.9g at %zu",
                  dtype_name((DType)d), row[i], weight_at(&W, i, 2), i);
            worst = fmax(worst, fabs(row[i] - w[2 * K + i]));
        }
        // rounding: F32 exact; F16 half an ulp (2^-11 relative); BF16 2^-8;
        // Q8 half a step of max|w| / 127 per block (|w| < 1 here); Q4
        // 2/9 of max|w| (its scale can be m / -9, dtype.h: a weight near
        // -m, of the other sign than the block's extreme m, is clamped to 7
        // steps of |m| / 9); Q6 5/36 (m / -36: 31 steps of |m| / 36)
        double bound[DTYPE_COUNT] = {0, 0x1p-11, 0x1p-8, 0.5 / 127 + 1e-6, 2.0 / 9 + 1e-6, 5.0 / 36 + 1e-6};
        CHECK(worst <= bound[d], "%s: encoded row off by %g (bound %g)", dtype_name((DType)d), worst, bound[d]);
    }
    // exact halves: 1, -2, the largest, the smallest subnormal; ties to even
    CHECK(f32_to_f16(1.0f) == 0x3C00 && f32_to_f16(-2.0f) == 0xC000 && f32_to_f16(65504.0f) == 0x7BFF &&
              f32_to_f16(0x1p-24f) == 0x0001 && f32_to_f16(65520.0f) == 0x7C00,
          "f32_to_f16 of 1, -2, 65504, 2^-24, 65520: 3c00 c000 7bff 0001 7c00 expected, got %04x %04x %04x %04x %04x",
          f32_to_f16(1.0f), f32_to_f16(-2.0f), f32_to_f16(65504.0f), f32_to_f16(0x1p-24f), f32_to_f16(65520.0f));
    CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3C00 && f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02,
          "f32_to_f16 ties to even: 3c00 3c02 expected, got %04x %04x", f32_to_f16(1.0f + 0x1p-11f),
          f32_to_f16(1.0f + 3 * 0x1p-11f));
    CHECK(f32_to_bf16(1.0f) == 0x3F80 && f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80 &&
              f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82,
          "f32_to_bf16 rounding: 3f80 3f80 3f82 expected, got %04x %04x %04x", f32_to_bf16(1.0f),
          f32_to_bf16(1.0f + 0x1p-8f), f32_to_bf16(1.0f + 3 * 0x1p-8f));
    uint32_t bad = 0x10000;
    for (uint32_t h = 0; h < 0x10000 && bad == 0x10000; h++) {
        float f = f16_to_f32((uint16_t)h);
        if (f == f && f32_to_f16(f) != h) bad = h;  // every half but NaN round-trips
    }
    CHECK(bad == 0x10000, "f16 -> f32 -> f16 must round-trip every half; %04x came back as %04x", bad,
          bad < 0x10000 ? f32_to_f16(f16_to_f32((uint16_t)bad)) : 0);
    // Q8: zeros, a padded tail, the clamp
    float z[40] = {0};
    int8_t q[64];
    uint16_t sc[2];
    z[39] = -3.0f;
    CHECK(q8_quantize_row(q, sc, z, 40) == 0, "q8 of finite weights reports non-finite ones");
    CHECK(q[0] == 0 && q[39] == -127 && q[40] == 0 && q[63] == 0 && sc[0] == 0 && f16_to_f32(sc[1]) * 127 > 2.99f,
          "q8 of zeros and a padded tail: q 0 -127 0 0, scales 0 and 3/127 expected, got q %d %d %d %d scales %g %g",
          q[0], q[39], q[40], q[63], f16_to_f32(sc[0]), f16_to_f32(sc[1]));
    // NaN and infinities have no int8 value: counted, stored as 0, the
    // block's scale from its finite weights
    z[1] = NAN, z[2] = INFINITY, z[3] = -INFINITY, z[4] = 2.0f;
    CHECK(q8_quantize_row(q, sc, z, 40) == 3 && q[1] == 0 && q[2] == 0 && q[4] == 127 && f16_to_f32(sc[0]) * 127 > 1.99f,
          "q8 of non-finite weights: 3 counted, q 0 0 127 expected, got q %d %d %d, scale %g", q[1], q[2], q[4],
          f16_to_f32(sc[0]));
    float huge[32];
    for (int i = 0; i < 32; i++) huge[i] = 3e38f;
    CHECK(q8_quantize_row(q, sc, huge, 32) == 0 && f16_to_f32(sc[0]) == 65504.0f && q[0] == 127,
          "q8 of weights beyond f16's range: scale 65504 and q 127 expected, got %g and %d", f16_to_f32(sc[0]), q[0]);

    // Q4: the layout (byte i: value i + 8 low, value i + 16 + 8 high), the
    // scale m / -8 (the largest magnitude maps to -8 exactly), rounding
    // and the clamp at 7, zeros, a padded tail
    float v[40] = {0};
    uint8_t q4[32];
    for (int i = 0; i < 32; i++) v[i] = (float)(i % 16) - 8.0f;  // -8 .. 7, twice: d = -8 / -8 = 1
    v[5] = 2.4f, v[21] = -2.6f, v[39] = 4.0f;                    // round to 2 and -3; block 1: d = -0.5
    CHECK(q4_quantize_row(q4, sc, v, 40) == 0, "q4 of finite weights reports non-finite ones");
    CHECK(f16_to_f32(sc[0]) == 1.0f && f16_to_f32(sc[1]) == -0.5f && q4[0] == (0 | 0 << 4) &&
              q4[5] == (10 | 5 << 4) && q4[15] == (15 | 15 << 4) && q4[16] == (8 | 8 << 4) && q4[23] == (0 | 8 << 4),
          "q4 of a known block: scales 1 -0.5, bytes 00 5a ff 88 80 expected, got scales %g %g bytes %02x %02x %02x "
          "%02x %02x", f16_to_f32(sc[0]), f16_to_f32(sc[1]), q4[0], q4[5], q4[15], q4[16], q4[23]);
    // m = -1: m / -8 would leave 0.99 at 7.92 steps (clamped to 7) and every
    // odd sixteenth on a tie; the least squared error is m / -7.4, where m
    // is 7.4 steps (to -7), 0.5 3.7 (to 4) and 0.99 7.33 (to 7)
    for (int i = 0; i < 32; i++) v[i] = i == 3 ? -1.0f : 1.0f / 16 * (float)(i % 9);
    v[7] = 0.99f;
    q4_quantize_row(q4, sc, v, 32);
    CHECK(sc[0] == f32_to_f16(-1.0f / -7.4f) && q4_value(q4, 3) == -7 && q4_value(q4, 7) == 7 &&
              q4_value(q4, 8) == 4 && q4_value(q4, 17) == 4,
          "q4 rounding: scale 1/7.4, -7 7 4 4 expected at 3 7 8 17, got %g, %d %d %d %d", f16_to_f32(sc[0]),
          q4_value(q4, 3), q4_value(q4, 7), q4_value(q4, 8), q4_value(q4, 17));
    check_scale_search(DTYPE_Q4, 7);
    v[1] = NAN, v[2] = INFINITY;
    CHECK(q4_quantize_row(q4, sc, v, 32) == 2 && q4_value(q4, 1) == 0 && q4_value(q4, 2) == 0,
          "q4 of non-finite weights: 2 counted and stored as 0 expected, got %d %d", q4_value(q4, 1),
          q4_value(q4, 2));
    for (int i = 0; i < 32; i++) huge[i] = -3e38f;
    CHECK(q4_quantize_row(q4, sc, huge, 32) == 0 && f16_to_f32(sc[0]) == 65504.0f && q4_value(q4, 0) == -8,
          "q4 of weights beyond f16's range: scale 65504 (m / -8 > 0) and -8 expected, got %g and %d",
          f16_to_f32(sc[0]), q4_value(q4, 0));

    // Q4's int8 activations (matmul_kernels.h): amax 2 -> xq = x * 63.5 rounded
    // half to even, dx = 2 / 127; zeros past m; a NaN: dx NaN, xq 0; all
    // below 2^-96: dx 0.
    int8_t xq[Q4_BLOCK];
    const float xs[5] = {2.0f, -1.0f, 0.5f, 1.0f / 127, -2.0f};  // -63.5 -> -64, 31.75 -> 32, 0.5 -> 0
    float dx = q4_quantize_x_block(xq, xs, 5);
    CHECK(dx == 2.0f / 127.0f && xq[0] == 127 && xq[1] == -64 && xq[2] == 32 && xq[3] == 0 && xq[4] == -127 &&
              xq[5] == 0 && xq[31] == 0,
          "q4 activations of a known block: dx 2/127 and 127 -64 32 0 -127 0 0 expected, got %.9g and %d %d %d %d %d "
          "%d %d", dx, xq[0], xq[1], xq[2], xq[3], xq[4], xq[5], xq[31]);
    const float with_nan[2] = {1.0f, NAN}, tiny[2] = {1e-30f, -1e-30f};
    dx = q4_quantize_x_block(xq, with_nan, 2);
    CHECK(dx != dx && xq[0] == 0, "q4 activations with a NaN: dx NaN and xq 0 expected, got %g and %d", dx, xq[0]);
    dx = q4_quantize_x_block(xq, tiny, 2);
    CHECK(dx == 0.0f && xq[0] == 0, "q4 activations below 2^-96: dx 0 and xq 0 expected, got %g and %d", dx, xq[0]);

    // Q6: the layout (dtype.h) written from first principles and read back
    // by q6_value; a padded group; the scale search against brute force;
    // non-finite weights
    {
        enum { K6 = 100 };  // 4 blocks, the last of 4 weights: one group
        float w6[K6];
        uint8_t q6[2 * Q6_GROUP_BYTES];
        uint16_t s6[8];
        for (int i = 0; i < K6; i++) w6[i] = (float)((i * 37) % 64 - 32);  // every level, -32 .. 31, scale 1
        w6[0] = -32.0f;
        CHECK(q6_row_bytes(K6) == Q6_GROUP_BYTES && q6_row_bytes(512) == 4 * Q6_GROUP_BYTES &&
                  q6_row_bytes(513) == 5 * Q6_GROUP_BYTES && weight_bytes(DTYPE_Q6, 3, 768) == 3 * (576 + 48),
              "q6 sizes: 96 384 480 1872 expected, got %zu %zu %zu %zu", q6_row_bytes(K6), q6_row_bytes(512),
              q6_row_bytes(513), weight_bytes(DTYPE_Q6, 3, 768));
        CHECK(q6_quantize_row(q6, s6, w6, K6) == 0, "q6 of finite weights reports non-finite ones");
        int wrong = -1;
        for (int k = 0; k < 128 && wrong < 0; k++) {
            const int i = k / 32, e = k % 32, m = 16 * i + e % 16, high = e >= 16;
            // by hand: the low nibble of byte m (or its high nibble), the
            // 2 bits of byte 64 + m % 32 at 4 high + 2 (m >= 32)
            const int u = (high ? q6[m] >> 4 : q6[m] & 15) | ((q6[64 + m % 32] >> (4 * high + 2 * (m >= 32))) & 3) << 4;
            const float d = f16_to_f32(s6[i]);
            int level = k < K6 ? (int)lrintf(w6[k] / d) : 0;
            level = level > 31 ? 31 : level < -32 ? -32 : level;
            if (u - 32 != level || q6_value(q6, (size_t)i, (size_t)e) != level) wrong = k;
        }
        CHECK(wrong < 0, "q6 layout: value %d read back wrong", wrong);
        CHECK(f16_to_f32(s6[0]) == 1.0f && q6_value(q6, 0, 0) == -32, "q6 scale m / -32 = 1 and -32 expected, got %g %d",
              f16_to_f32(s6[0]), q6_value(q6, 0, 0));
        // weight_encode writes the same bytes, and weight_at reads them back
        uint8_t enc[Q6_GROUP_BYTES + 8];
        weight_encode(enc, DTYPE_Q6, w6, 1, K6);
        Weight W6 = weight_view(DTYPE_Q6, enc, 1, K6);
        int off = -1;
        for (int k = 0; k < K6 && off < 0; k++)
            if (weight_at(&W6, (size_t)k, 0) != f16_to_f32(s6[k / 32]) * (float)q6_value(q6, (size_t)k / 32, (size_t)k % 32))
                off = k;
        CHECK(off < 0 && !memcmp(enc, q6, Q6_GROUP_BYTES), "q6: weight_encode and weight_at disagree with q6_quantize_row at %d", off);
        check_scale_search(DTYPE_Q6, 11);
        w6[1] = NAN, w6[2] = -INFINITY;
        CHECK(q6_quantize_row(q6, s6, w6, 32) == 2 && q6_value(q6, 0, 1) == 0 && q6_value(q6, 0, 2) == 0,
              "q6 of non-finite weights: 2 counted and stored as 0 expected, got %d %d", q6_value(q6, 0, 1),
              q6_value(q6, 0, 2));
        int pad = 0;
        for (int e = 0; e < 32; e++) pad |= q6_value(q6, 1, (size_t)e) | q6_value(q6, 3, (size_t)e);
        CHECK(pad == 0, "q6: the blocks past the row must hold 0");
    }
}

// ----------------------------------------------------------------------------
// the sweep

enum { MAX_B = 100 };  // the largest batch the sweep runs (> MATMUL_GROUP)
_Static_assert(MAX_B > MATMUL_GROUP + 5, "the sweep must run batches of several groups");

// A matrix in one dtype and the exact float value of each of its weights.
typedef struct {
    DType dt;
    size_t N, K;
    unsigned char *bytes;
    Weight W;
    float *deq;  // (N, K)
    Weight Wdeq;  // deq as an F32 Weight
} Mat;

// dt Q8_INT8: Q8 x int8 (Weight.q8_int8).
static void mat_make(Mat *m, DType dt, size_t N, size_t K) {
    const int i8 = dt == Q8_INT8;
    if (i8) dt = DTYPE_Q8;
    float *w = malloc(N * K * sizeof *w);
    for (size_t n = 0; n < N; n++) {
        // a scale per row over a wide range; some all-zero rows and blocks
        float scale = ldexpf(1.0f, (int)below(20) - 10);
        int zero_row = below(23) == 0;
        for (size_t k = 0; k < K; k++)
            w[n * K + k] = zero_row || (k / 32) % 7 == 5 ? 0.0f : uniform() * scale;
    }
    m->dt = dt, m->N = N, m->K = K;
    m->bytes = malloc(weight_bytes(dt, N, K));
    weight_encode(m->bytes, dt, w, N, K);
    m->W = weight_view(dt, m->bytes, N, K);
    m->W.q8_int8 = i8;
    m->deq = malloc(N * K * sizeof *m->deq);
    int same = 1;
    for (size_t n = 0; n < N; n++) {
        weight_row(m->deq + n * K, &m->W, n);
        for (size_t k = 0; k < K; k++) same &= m->deq[n * K + k] == weight_at(&m->W, k, n);
    }
    CHECK(same, "%s K %zu N %zu: weight_row must give weight_at's values, it differs",
          dtype_name(dt), K, N);
    m->Wdeq = weight_view(DTYPE_F32, m->deq, N, K);
    free(w);
}

// The matrix's arithmetic, for messages.
static const char *mat_label(const Mat *m) { return m->W.q8_int8 ? "Q8 x int8" : dtype_name(m->dt); }

static void mat_free(Mat *m) { free(m->bytes), free(m->deq); }

// Buffers shared by the sweep, sized for the largest shape.
typedef struct {
    float *x, *bias, *old, *ref, *scalar, *y, *scratch;
    ThreadPool *pool;
} Bufs;

// Bufs for up to MAX_B rows of Kmax inputs and Nmax outputs, a random bias
// and a pool of 2 threads.
static void bufs_alloc(Bufs *u, size_t Kmax, size_t Nmax) {
    GptError err;
    u->x = malloc(MAX_B * Kmax * sizeof(float));
    u->bias = malloc(Nmax * sizeof(float));
    u->old = malloc(MAX_B * Nmax * sizeof(float));
    u->ref = malloc(MAX_B * Nmax * sizeof(float));
    u->scalar = malloc(MAX_B * Nmax * sizeof(float));
    u->y = malloc(MAX_B * Nmax * sizeof(float));
    // 2 threads' worth for matmul(); a single kernel call uses the first
    size_t per_thread = matmul_scratch_floats(MAX_B, Kmax);
    u->scratch = aligned_alloc(64, 2 * per_thread * sizeof(float));
    u->pool = threadpool_create(2, &err);
    CHECK(u->pool != NULL, "a pool of 2 threads expected, got none");
    for (size_t i = 0; i < Nmax; i++) u->bias[i] = uniform();
}

static void bufs_free(Bufs *u) {
    threadpool_free(u->pool);
    free(u->x), free(u->bias), free(u->old), free(u->ref), free(u->scalar), free(u->y), free(u->scratch);
}

// The kernels the tests run, "routes": 0 .. CPU_ISA_COUNT-1 the ISAs as
// matmul_rows picks them (AVX-512 with VNNI for Q4 where the CPU has it),
// and ROUTE_OTHER_VNNI: AVX-512 with the other Q4 route (without VNNI on a
// CPU with it; with it, unsupported, on one without).
enum { ROUTE_OTHER_VNNI = CPU_ISA_COUNT, N_ROUTES };
static CpuIsa route_isa(int route) { return route == ROUTE_OTHER_VNNI ? CPU_AVX512 : (CpuIsa)route; }
static int route_vnni(int route) {
    int has = cpu_isa_supported(CPU_AVX512) && cpu_has_avx512_vnni();
    return route == CPU_AVX512 ? has : route == ROUTE_OTHER_VNNI ? !has : 0;
}
static int route_supported(int route) {
    return cpu_isa_supported(route_isa(route)) && (!route_vnni(route) || cpu_has_avx512_vnni());
}
// Variant v of a route's kernels (matmul_kernels.h: every one the same bits).
static void rows_variant_on(int route, int v, float *out, const float *inp, const Weight *W, const float *bias,
                            size_t B, size_t n0, size_t n1, int accumulate, float *scratch) {
    matmul_rows_route(route_isa(route), route_vnni(route), v, out, inp, W, bias, B, n0, n1, accumulate, scratch);
}
static void rows_on(int route, float *out, const float *inp, const Weight *W, const float *bias, size_t B,
                    size_t n0, size_t n1, int accumulate, float *scratch) {
    rows_variant_on(route, 0, out, inp, W, bias, B, n0, n1, accumulate, scratch);
}
static int route_variants(int route) { return matmul_variant_count(route_isa(route)); }
static const char *isa_label(int route) {
    if (route_isa(route) == CPU_AVX512) return route_vnni(route) ? "avx512 (vnni)" : "avx512 (no vnni)";
    return cpu_isa_name((CpuIsa)route);
}

// Index of the first float where a and b differ (bitwise), or n if none.
static size_t first_difference(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a)) return i;
    return n;
}

// A differing way of computing a case, for its one check's message: the
// first of them, and how many differ.
typedef struct {
    int ways, differ;
    char first[256];
} Ways;

// Counts one way; where it differs (out at d < n), the first is named.
static void way_seen(Ways *w, size_t d, size_t n, const float *got, const float *want, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void way_seen(Ways *w, size_t d, size_t n, const float *got, const float *want, const char *fmt, ...) {
    w->ways++;
    if (d == n || w->differ++) return;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(w->first, sizeof w->first, fmt, ap);
    va_end(ap);
    if (len >= 0 && (size_t)len < sizeof w->first)
        snprintf(w->first + len, sizeof w->first - (size_t)len, " at %zu: %.9g, want %.9g", d, got[d], want[d]);
}

// (a) and (b) for one batch size: a check for the bound, one for every way
// that must give the scalar bits, and, for Q8, Q4 and Q6, one for NaN.
static void check_batch(const Mat *m, size_t B, Bufs *u) {
    const size_t N = m->N, K = m->K;
    const int use_bias = B % 3 != 0, acc = B % 2 == 1;
    const float *bias = use_bias ? u->bias : NULL;
    for (size_t i = 0; i < B * K; i++) u->x[i] = uniform() * (below(4) == 0 ? 100.0f : 1.0f);
    if (dtype_is_blocked(m->dt))  // blocks that are zero, tiny, subnormal, huge
        for (size_t b = 0; b < B; b++)
            for (size_t k0 = 0; k0 < K; k0 += Q8_BLOCK) {
                static const float scale[] = {0.0f, 1e-30f, 1e-40f, 1e30f};
                size_t kind = below(16);
                if (kind < 4)
                    for (size_t k = k0; k < K && k < k0 + Q8_BLOCK; k++) u->x[b * K + k] *= scale[kind];
            }
    for (size_t i = 0; i < B * N; i++) u->old[i] = uniform();
    memcpy(u->ref, u->old, B * N * sizeof(float));
    matmul_reference(u->ref, u->x, &m->W, bias, B, acc);
    // the canonical bits: the scalar kernel, its activations quantized once
    // into scratch (without, below, it quantizes them again for every output)
    memcpy(u->scalar, u->old, B * N * sizeof(float));
    matmul_rows(CPU_SCALAR, u->scalar, u->x, &m->W, bias, B, 0, N, acc, u->scratch);

    // (a) the bound, on the canonical (scalar) result
    const double m_chain = (double)((K + 15) / 16) + 4 + 2 + dtype_is_blocked(m->dt);
    double worst = 0, worst_err = 0, worst_tol = 0;
    size_t worst_at = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t n = 0; n < N; n++) {
            double mag = (use_bias ? fabs(bias[n]) : 0.0) + (acc ? fabs(u->old[b * N + n]) : 0.0);
            for (size_t k = 0; k < K; k++) mag += fabs((double)u->x[b * K + k] * m->deq[n * K + k]);
            double tol = ((m_chain + 1) * 0x1p-24 * mag + q8_activation_error(u->x, &m->W, b, n)) * 1.0001 + 1e-30;
            double err = fabs((double)u->scalar[b * N + n] - u->ref[b * N + n]);
            if (err / tol > worst) worst = err / tol, worst_err = err, worst_tol = tol, worst_at = b * N + n;
        }
    CHECK(worst <= 1.0, "%s K %zu N %zu B %zu: error within the canonical bound expected, got %.3g > %.3g at %zu",
          mat_label(m), K, N, B, worst_err, worst_tol, worst_at);

    // (b) the scalar bits from every way: the scalar kernel without scratch,
    // every ISA and every variant of it with and without scratch, F16 and
    // BF16 as the F32 kernel on the dequantized weights, and matmul() on 2
    // threads with scratch. Q8, Q4 and Q6 without scratch quantize a row's
    // activations again for every output, in every route (matmul.c sends
    // them to the scalar kernel): those ways run at B <= 4 only.
    const int slow_ways = !dtype_is_blocked(m->dt) || B <= 4;
    Ways w = {0, 0, ""};
    const size_t n_out = B * N;
    if (slow_ways) {
        memcpy(u->y, u->old, n_out * sizeof(float));
        matmul_rows(CPU_SCALAR, u->y, u->x, &m->W, bias, B, 0, N, acc, NULL);
        way_seen(&w, first_difference(u->y, u->scalar, n_out), n_out, u->y, u->scalar, "scalar without scratch");
    }
    for (int isa = CPU_AVX2; isa < N_ROUTES; isa++) {
        if (!route_supported(isa)) continue;
        for (int v = 0; v < route_variants(isa); v++)
            for (int s = !slow_ways; s < 2; s++) {
                memcpy(u->y, u->old, n_out * sizeof(float));
                rows_variant_on(isa, v, u->y, u->x, &m->W, bias, B, 0, N, acc, s ? u->scratch : NULL);
                way_seen(&w, first_difference(u->y, u->scalar, n_out), n_out, u->y, u->scalar, "%s variant %s%s",
                         isa_label(isa), matmul_variant_name(route_isa(isa), v), s ? " with scratch" : "");
            }
    }
    if (m->dt == DTYPE_F16 || m->dt == DTYPE_BF16) {
        memcpy(u->y, u->old, n_out * sizeof(float));
        matmul_rows(CPU_SCALAR, u->y, u->x, &m->Wdeq, bias, B, 0, N, acc, NULL);
        way_seen(&w, first_difference(u->y, u->scalar, n_out), n_out, u->y, u->scalar,
                 "the F32 kernel on the dequantized weights");
    }
    MatmulContext ctx = {u->pool, u->scratch, matmul_scratch_floats(MATMUL_GROUP, K), cpu_best_isa(), NULL};
    memcpy(u->y, u->old, n_out * sizeof(float));
    matmul(u->y, u->x, &m->W, bias, B, acc, &ctx);
    way_seen(&w, first_difference(u->y, u->scalar, n_out), n_out, u->y, u->scalar, "matmul() on 2 threads");
    CHECK(w.differ == 0, "%s K %zu N %zu B %zu: every way must give the scalar bits; %d of %d differ, first %s",
          mat_label(m), K, N, B, w.differ, w.ways, w.first);

    // Q8, Q4: a NaN or an infinity in row 0 (B > 1) makes every output of
    // row 0 NaN, in every ISA, and leaves the other rows' bits alone
    if (dtype_is_blocked(m->dt) && B > 1) {
        u->x[below(K)] = below(2) ? NAN : -INFINITY;
        int bad_isa = -1, routes = 0, bad = 0;
        size_t bad_finite = 0, bad_other = 0;
        for (int isa = 0; isa < N_ROUTES; isa++) {
            if (!route_supported(isa)) continue;
            memcpy(u->y, u->old, n_out * sizeof(float));
            rows_on(isa, u->y, u->x, &m->W, bias, B, 0, N, acc, u->scratch);
            size_t finite = 0;
            for (size_t n = 0; n < N; n++) finite += u->y[n] == u->y[n];
            size_t other = first_difference(u->y + N, u->scalar + N, (B - 1) * N);
            routes++;
            if ((finite != 0 || other != (B - 1) * N) && !bad++) bad_isa = isa, bad_finite = finite, bad_other = other;
        }
        CHECK(bad == 0, "%s K %zu N %zu B %zu: a non-finite activation in row 0 must make its %zu outputs NaN and no "
              "other, in every ISA; %d of %d differ, first %s: %zu finite, other rows differ at %zu", mat_label(m), K,
              N, B, N, bad, routes, bad ? isa_label(bad_isa) : "", bad_finite, bad_other);
    }
}

// The first row b of y (T, N) that differs from alone[idx[b]], or T; *col
// and the two values say where and what.
static size_t first_bad_row(const float *y, const float *alone, const size_t *idx, size_t T, size_t N,
                            size_t *col, float *got, float *want) {
    for (size_t b = 0; b < T; b++) {
        size_t c = first_difference(y + b * N, alone + idx[b] * N, N);
        if (c < N) {
            *col = c, *got = y[b * N + c], *want = alone[idx[b] * N + c];
            return b;
        }
    }
    *col = 0, *got = *want = 0.0f;
    return T;
}

enum { POOL = 16 };  // the rows that check_invariance's batches repeat

// Route isa's batch of T rows idx of rows (POOL, K) into u->y, for batch
// size B of check_invariance: B odd whole, B even in random pieces [n0, n1)
// (then 0 when a piece wrote past n1), B 17 T = MAX_B rows through matmul()
// on 2 threads. Returns 1, and *how says which.
static int invariance_run(const Mat *m, int isa, size_t B, size_t T, const size_t *idx, const float *rows,
                          Bufs *u, const char **how) {
    const size_t N = m->N, K = m->K;
    for (size_t b = 0; b < T; b++) memcpy(u->x + b * K, rows + idx[b] * K, K * sizeof(float));
    memset(u->y, 0xff, T * N * sizeof(float));  // NaN sentinel
    if (B == 17) {
        *how = "matmul() T 100, 2 threads";
        MatmulContext ctx = {u->pool, u->scratch, matmul_scratch_floats(MATMUL_GROUP, K), cpu_best_isa(), NULL};
        matmul(u->y, u->x, &m->W, u->bias, T, 0, &ctx);
        return 1;
    }
    if (B % 2) {
        *how = B % 4 == 1 ? "whole, scratch" : "whole, no scratch";
        rows_variant_on(isa, (int)B % route_variants(isa), u->y, u->x, &m->W, u->bias, B, 0, N, 0,
                        B % 4 == 1 ? u->scratch : NULL);
        return 1;
    }
    *how = B % 4 == 0 ? "in pieces, scratch" : "in pieces, no scratch";
    int untouched = 1;
    for (size_t n0 = 0, n1; n0 < N; n0 = n1) {
        size_t len = 1 + (below(3) == 0 ? below(5) : below(N - n0 < 300 ? N - n0 : 300));
        n1 = n0 + len < N ? n0 + len : N;
        rows_variant_on(isa, (int)(B / 2) % route_variants(isa), u->y, u->x, &m->W, u->bias, B, n0, n1, 0,
                        B % 4 == 0 ? u->scratch : NULL);
        for (size_t b = 0; b < B; b++)  // columns past the piece still hold the sentinel
            for (size_t n = n1; n < N; n++) {
                uint32_t v;
                memcpy(&v, u->y + b * N + n, sizeof v);
                untouched &= v == 0xffffffffu;
            }
    }
    if (!untouched) *how = B % 4 == 0 ? "in pieces, scratch: wrote past a piece's n1" :
                                        "in pieces, no scratch: wrote past a piece's n1";
    return untouched;
}

// (c) batch invariance, for each batch size one check over the routes
// (every supported ISA; the other Q4 route only where they differ; scalar
// not where big): every row equals the same row computed alone by that
// route, and a piece [n0, n1) leaves the other columns alone.
static void check_invariance(const Mat *m, int big, Bufs *u) {
    const size_t N = m->N, K = m->K;
    int routes[N_ROUTES], n_routes = 0;
    for (int isa = 0; isa < N_ROUTES; isa++)
        if (route_supported(isa) && (isa != CPU_SCALAR || !big) &&
            (isa != ROUTE_OTHER_VNNI || weight_is_grouped(&m->W)))
            routes[n_routes++] = isa;
    float *rows = malloc(POOL * K * sizeof *rows), *alone = malloc(N_ROUTES * POOL * N * sizeof *alone);
    size_t idx[MAX_B];
    for (size_t i = 0; i < POOL * K; i++) rows[i] = uniform();
    for (int r = 0; r < n_routes; r++)
        for (size_t p = 0; p < POOL; p++)
            rows_on(routes[r], alone + (r * POOL + p) * N, rows + p * K, &m->W, u->bias, 1, 0, N, 0, NULL);
    for (size_t B = 2; B <= 17; B++) {
        // B = 17 stands for a batch past the kernels' 16: T = 100 through
        // matmul() on the best ISA alone
        size_t T = B == 17 ? MAX_B : B;
        for (size_t b = 0; b < T; b++) idx[b] = below(POOL);  // repeats allowed
        Ways w = {0, 0, ""};
        for (int r = 0; r < n_routes; r++) {
            if (B == 17 && routes[r] != (int)cpu_best_isa()) continue;
            const char *how;
            int untouched = invariance_run(m, routes[r], B, T, idx, rows, u, &how);
            size_t col;
            float got, want;
            const float *own = alone + (size_t)r * POOL * N;
            size_t bad = first_bad_row(u->y, own, idx, T, N, &col, &got, &want);
            w.ways++;
            if ((bad < T || !untouched) && !w.differ++)
                snprintf(w.first, sizeof w.first, "%s (%s): row %zu column %zu is %.9g, alone %.9g",
                         isa_label(routes[r]), how, bad, col, got, want);
        }
        CHECK(w.differ == 0, "%s K %zu N %zu B %zu: every row must equal the same row computed alone; %d of %d "
              "routes differ, first %s", mat_label(m), K, N, T, w.differ, w.ways, w.first);
    }
    // matmul() with no context, and with scratch too small to use: same bits
    int best = -1;
    for (int r = 0; r < n_routes; r++)
        if (routes[r] == (int)cpu_best_isa()) best = r;
    if (best >= 0) {
        size_t T = MAX_B;
        for (size_t b = 0; b < T; b++) idx[b] = below(POOL);
        for (size_t b = 0; b < T; b++) memcpy(u->x + b * K, rows + idx[b] * K, K * sizeof(float));
        MatmulContext small = {u->pool, u->scratch, 16, cpu_best_isa(), NULL};
        Ways w = {0, 0, ""};
        for (int c = 0; c < 2; c++) {
            matmul(u->y, u->x, &m->W, u->bias, T, 0, c ? &small : NULL);
            size_t col;
            float got, want;
            size_t bad = first_bad_row(u->y, alone + (size_t)best * POOL * N, idx, T, N, &col, &got, &want);
            w.ways++;
            if (bad < T && !w.differ++)
                snprintf(w.first, sizeof w.first, "%s: row %zu column %zu is %.9g, alone %.9g",
                         c ? "with too little scratch" : "on one thread", bad, col, got, want);
        }
        CHECK(w.differ == 0, "%s K %zu N %zu: matmul() T %zu on one thread and with too little scratch must give "
              "each row's bits alone; %d of %d differ, first %s", mat_label(m), K, N, T, w.differ, w.ways, w.first);
    }
    free(rows), free(alone);
}

static void sweep(void) {
    static const size_t Ks[] = {1, 7, 15, 16, 17, 31, 32, 33, 100, 768, 770};
    static const size_t Ns[] = {1, 3, 17, 64, 100, 301};
    // batch sizes: every tile shape and tail of every kernel, and a big one
    static const size_t Bs_all[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, MATMUL_GROUP + 1, MAX_B};
    static const size_t Bs_big[] = {1, 2, 4, 5, 11, 16, MATMUL_GROUP + 5};
    Bufs u;
    bufs_alloc(&u, 770, 301);

    for (int d = 0; d <= (int)Q8_INT8; d++)  // and Q8 x int8
        for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
                Mat m;
                size_t K = Ks[ki], N = Ns[ni];
                mat_make(&m, (DType)d, N, K);
                int big = K * N > 20000;
                const size_t *Bs = big ? Bs_big : Bs_all;
                size_t nB = big ? sizeof Bs_big / sizeof *Bs_big : sizeof Bs_all / sizeof *Bs_all;
                for (size_t i = 0; i < nB; i++) check_batch(&m, Bs[i], &u);
                check_invariance(&m, big, &u);
                mat_free(&m);
            }
    bufs_free(&u);
}

// Long rows (K up to fc_proj's 3072, on and off a multiple of 16) at the
// batch sizes whose AVX-512 tiles are 4 x 4 (their outputs reduced 16 at a
// time), with their 1..3-row tails and a second group: every ISA the
// scalar bits, F32, F16, BF16, and Q4 and Q6 (whole and partial groups).
// From K = 769 (F32) and 1537 (F16, BF16) those tiles run in k-blocks, the
// accumulators of up to 8 chunks of 4 rows kept between blocks: 71 rows are
// two such runs of 8 chunks and one of a chunk and a 3-row tail.
static void test_long_rows(void) {
    static const size_t Ks[] = {769, 1000, 1536, 1543, 3072};
    static const size_t Ns[] = {4, 9, 37};
    static const size_t Bs[] = {8, 9, 10, 11, 13, 16, 31, MATMUL_GROUP, MATMUL_GROUP + 3, 2 * MATMUL_GROUP + 7};
    Bufs u;
    bufs_alloc(&u, 3072, 37);
    const DType dts[] = {DTYPE_F32, DTYPE_F16, DTYPE_BF16, DTYPE_Q4, DTYPE_Q6, Q8_INT8};
    for (size_t d = 0; d < sizeof dts / sizeof *dts; d++)
        for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
            for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++) {
                Mat m;
                mat_make(&m, dts[d], Ns[ni], Ks[ki]);
                for (size_t i = 0; i < sizeof Bs / sizeof *Bs; i++) check_batch(&m, Bs[i], &u);
                mat_free(&m);
            }
    bufs_free(&u);
}

// matmul() cuts its work into parts the threads take as they come free
// (matmul.c: a slice of W per thread for one group of rows, slices of each
// group for a few groups, whole groups for many): for every way of cutting
// (1, 2 and 3 threads; T from 1 row to 10 groups) each row's bits are the
// scalar kernel's, and matmul_then(activation_gelu_tanh) gives exactly those of
// activation_gelu_tanh over the scalar output.
static void test_parts_and_then(void) {
    enum { K = 100, N = 67, TMAX = 10 * MATMUL_GROUP };
    static const size_t Ts[] = {1, 5, MATMUL_GROUP, MATMUL_GROUP + 1, 100, 7 * MATMUL_GROUP + 3, TMAX};
    const DType dts[] = {DTYPE_F32, DTYPE_Q8, DTYPE_Q4, DTYPE_Q6, Q8_INT8};
    GptError err = {{0}};
    float *x = malloc(TMAX * K * sizeof *x), *bias = malloc(N * sizeof *bias);
    float *want = malloc(TMAX * N * sizeof *want), *got = malloc(TMAX * N * sizeof *got);
    size_t per_thread = matmul_scratch_floats(MATMUL_GROUP, K);
    float *scratch = aligned_alloc(64, 3 * per_thread * sizeof(float));
    for (size_t i = 0; i < TMAX * K; i++) x[i] = 3.0f * uniform();
    for (size_t i = 0; i < N; i++) bias[i] = uniform();
    for (int threads = 1; threads <= 3; threads++) {
        ThreadPool *pool = threadpool_create(threads, &err);
        CHECK(pool != NULL, "a pool of %d threads expected: %s", threads, err.msg);
        if (!pool) continue;
        MatmulContext ctx = {pool, scratch, per_thread, cpu_best_isa(), NULL};
        for (size_t d = 0; d < sizeof dts / sizeof *dts; d++) {
            Mat m;
            mat_make(&m, dts[d], N, K);
            for (size_t i = 0; i < sizeof Ts / sizeof *Ts; i++) {
                size_t T = Ts[i];
                // a plan naming each variant in turn (matmul.h): the same bits
                MatmulPlan plan = {ctx.isa, (int)(i + d) % matmul_variant_count(ctx.isa), 0, {{0}}};
                ctx.plan = &plan;
                matmul_rows(CPU_SCALAR, want, x, &m.W, bias, T, 0, N, 0, NULL);
                memset(got, 0xff, T * N * sizeof *got);
                matmul(got, x, &m.W, bias, T, 0, &ctx);
                size_t at = first_difference(got, want, T * N);
                CHECK(at == T * N, "%s T %zu, %d threads, variant %s: matmul() must give the scalar bits; at %zu %.9g, "
                      "want %.9g", mat_label(&m), T, threads, matmul_variant_name(ctx.isa, plan.fallback), at,
                      at < T * N ? got[at] : 0.0, at < T * N ? want[at] : 0.0);
                activation_gelu_tanh(want, T * N);
                memset(got, 0xff, T * N * sizeof *got);
                matmul_then(got, x, &m.W, bias, T, 0, &ctx, activation_gelu_tanh);
                at = first_difference(got, want, T * N);
                CHECK(at == T * N, "%s T %zu, %d threads: matmul_then(gelu) must give gelu of the scalar bits; "
                      "at %zu %.9g, want %.9g", mat_label(&m), T, threads, at, at < T * N ? got[at] : 0.0,
                      at < T * N ? want[at] : 0.0);
            }
            mat_free(&m);
        }
        threadpool_free(pool);
    }
    free(x), free(bias), free(want), free(got), free(scratch);
}

int main(void) {
    printf("matmul kernels: %s (supported:", matmul_isa_in_use());
    for (int isa = 0; isa < N_ROUTES; isa++)
        if (route_supported(isa)) printf(" %s", isa_label(isa));
    printf(")\n");
    test_encodings();
    const size_t Ts[] = {1, 2, 3, 7, 17};
    const size_t Ks[] = {1, 7, 33, 100, 768};
    const size_t Ns[] = {1, 5, 31, 129};
    for (int d = 0; d <= (int)Q8_INT8; d++)  // and Q8 x int8
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
                    check_shape((DType)d, Ts[a], Ks[k], Ns[n], (int)((a + k + n) % 2), (int)((a + n) % 3 == 0));
    sweep();
    test_long_rows();
    test_parts_and_then();
    return check_exit("test_matmul");
}

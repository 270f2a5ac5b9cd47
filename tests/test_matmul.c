/*
 * test_matmul.c - every fast matmul path against matmul_reference(), the
 * plain loop summed in double, on ragged shapes: K and N that are not
 * multiples of any vector width or of Q8's block, one row and several,
 * every dtype, with and without bias, = and +=. Both sides read the same
 * encoded weights, so the tolerance is float32 summation's in every dtype;
 * the encodings themselves are checked against their rounding bounds.
 *
 * Tolerance. A float32 dot product of K terms carries a rounding error of
 * at most about K * 2^-24 times sum |x_k w_k| (the worst case; a blocked or
 * pairwise sum does far better). We allow 4e-6 * sqrt(K) + 1e-6 of that
 * magnitude, well above what float32 summation in any order reaches on
 * these random inputs and far below a wrong index or a missing term (which
 * moves a result by a whole term, about 1/K of the magnitude or more).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "matmul.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float uniform(void) {  // [-1, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

// |x| @ |W| + |bias| (+ |out| when accumulating): the scale of each result.
static double magnitude(const float *inp, const Weight *W, const float *bias, const float *prev,
                        size_t t, size_t j) {
    double m = bias ? fabs(bias[j]) : 0.0;
    if (prev) m += fabs(prev[t * W->n_out + j]);
    for (size_t i = 0; i < W->n_in; i++) m += fabs((double)inp[t * W->n_in + i] * weight_at(W, i, j));
    return m;
}

static void check_shape(DType dt, size_t T, size_t K, size_t N, int with_bias, int accumulate) {
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
    const float *b = with_bias ? bias : NULL;
    matmul(fast, inp, &W, b, T, accumulate, NULL);
    matmul_reference(ref, inp, &W, b, T, accumulate);
    double worst = 0;
    size_t worst_at = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t j = 0; j < N; j++) {
            double mag = magnitude(inp, &W, b, accumulate ? prev : NULL, t, j);
            double err = fabs((double)fast[t * N + j] - ref[t * N + j]) / (mag + 1e-30);
            if (err > worst) worst = err, worst_at = t * N + j;
        }
    double tol = 4e-6 * sqrt((double)K) + 1e-6;
    CHECK(worst <= tol, "%s T %zu K %zu N %zu bias %d acc %d: relative error %.3g at %zu (tolerance %.3g)",
          dtype_name(dt), T, K, N, with_bias, accumulate, worst, worst_at, tol);
    free(w), free(inp), free(bias), free(fast), free(ref), free(prev), free(bytes);
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
            CHECK(row[i] == weight_at(&W, i, 2), "%s: weight_row and weight_at differ at %zu", dtype_name((DType)d), i);
            worst = fmax(worst, fabs(row[i] - w[2 * K + i]));
        }
        // rounding: F32 exact; F16 half an ulp (2^-11 relative); BF16 2^-8;
        // Q8 half a step of max|w| / 127 per block (|w| < 1 here)
        double bound[DTYPE_COUNT] = {0, 0x1p-11, 0x1p-8, 0.5 / 127 + 1e-6};
        CHECK(worst <= bound[d], "%s: encoded row off by %g (bound %g)", dtype_name((DType)d), worst, bound[d]);
    }
    // exact halves: 1, -2, the largest, the smallest subnormal; ties to even
    CHECK(f32_to_f16(1.0f) == 0x3C00 && f32_to_f16(-2.0f) == 0xC000 && f32_to_f16(65504.0f) == 0x7BFF &&
              f32_to_f16(0x1p-24f) == 0x0001 && f32_to_f16(65520.0f) == 0x7C00,
          "f32_to_f16 of exact values");
    CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3C00 && f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3C02,
          "f32_to_f16 ties to even");
    CHECK(f32_to_bf16(1.0f) == 0x3F80 && f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80 &&
              f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82,
          "f32_to_bf16 rounding");
    int all = 1;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = f16_to_f32((uint16_t)h);
        if (f == f && f32_to_f16(f) != h) all = 0;  // every half but NaN round-trips
    }
    CHECK(all, "f16 -> f32 -> f16 must round-trip every half");
    // Q8: zeros, a padded tail, the clamp
    float z[40] = {0};
    int8_t q[64];
    uint16_t sc[2];
    z[39] = -3.0f;
    q8_quantize_row(q, sc, z, 40);
    CHECK(q[0] == 0 && q[39] == -127 && q[40] == 0 && q[63] == 0 && sc[0] == 0 && f16_to_f32(sc[1]) * 127 > 2.99f,
          "q8 of zeros and a padded tail: q %d %d %d scale %g", q[0], q[39], q[40], f16_to_f32(sc[1]));
}

int main(void) {
    test_encodings();
    const size_t Ts[] = {1, 2, 3, 7, 17};
    const size_t Ks[] = {1, 7, 33, 100, 768};
    const size_t Ns[] = {1, 5, 31, 129};
    for (int d = 0; d < DTYPE_COUNT; d++)
        for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
            for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
                for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
                    check_shape((DType)d, Ts[a], Ks[k], Ns[n], (int)((a + k + n) % 2), (int)((a + n) % 3 == 0));
    return check_exit("test_matmul");
}

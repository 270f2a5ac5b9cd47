/*
 * test_matmul.c - every fast matmul path against matmul_reference(), the
 * plain loop summed in double, on ragged shapes: K and N that are not
 * multiples of any vector width, one row and several, both layouts, with
 * and without bias, = and +=.
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

static void check_shape(size_t T, size_t K, size_t N, WeightLayout layout, int with_bias, int accumulate) {
    float *w = malloc(K * N * sizeof *w), *inp = malloc(T * K * sizeof *inp);
    float *bias = malloc(N * sizeof *bias), *fast = malloc(T * N * sizeof *fast);
    float *ref = malloc(T * N * sizeof *ref), *prev = malloc(T * N * sizeof *prev);
    for (size_t i = 0; i < K * N; i++) w[i] = uniform();
    for (size_t i = 0; i < T * K; i++) inp[i] = uniform();
    for (size_t i = 0; i < N; i++) bias[i] = uniform();
    for (size_t i = 0; i < T * N; i++) prev[i] = uniform();
    memcpy(fast, prev, T * N * sizeof *fast);
    memcpy(ref, prev, T * N * sizeof *ref);
    Weight W = {.dtype = DTYPE_F32, .layout = layout, .n_in = K, .n_out = N, .data = w};
    const float *b = with_bias ? bias : NULL;
    matmul(fast, inp, &W, b, T, accumulate);
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
    CHECK(worst <= tol, "T %zu K %zu N %zu %s bias %d acc %d: relative error %.3g at %zu (tolerance %.3g)", T, K,
          N, layout == WEIGHT_IN_OUT ? "in,out" : "out,in", with_bias, accumulate, worst, worst_at, tol);
    free(w), free(inp), free(bias), free(fast), free(ref), free(prev);
}

// weight_at and weight_row read the same element in either layout.
static void test_layouts(void) {
    enum { K = 5, N = 3 };
    float in_out[K * N], out_in[N * K];
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < N; j++) in_out[i * N + j] = out_in[j * K + i] = (float)(10 * i + j);
    Weight a = {DTYPE_F32, WEIGHT_IN_OUT, K, N, in_out}, b = {DTYPE_F32, WEIGHT_OUT_IN, K, N, out_in};
    int same = 1;
    for (size_t i = 0; i < K; i++)
        for (size_t j = 0; j < N; j++) same &= weight_at(&a, i, j) == (float)(10 * i + j) && weight_at(&b, i, j) == (float)(10 * i + j);
    CHECK(same, "weight_at disagrees between the layouts");
    float ra[K], rb[K];
    weight_row(ra, &a, 2);
    weight_row(rb, &b, 2);
    CHECK(memcmp(ra, rb, sizeof ra) == 0 && rb[4] == 42.0f, "weight_row(2): %g %g", ra[4], rb[4]);
    // half types widen exactly
    uint16_t h[2] = {0x3C00, 0xC000}, bf[2] = {0x3F80, 0xC000};  // 1, -2 in each
    Weight wh = {DTYPE_F16, WEIGHT_OUT_IN, 2, 1, h}, wb = {DTYPE_BF16, WEIGHT_OUT_IN, 2, 1, bf};
    CHECK(weight_at(&wh, 0, 0) == 1.0f && weight_at(&wh, 1, 0) == -2.0f, "f16 widening");
    CHECK(weight_at(&wb, 0, 0) == 1.0f && weight_at(&wb, 1, 0) == -2.0f, "bf16 widening");
}

int main(void) {
    test_layouts();
    const size_t Ts[] = {1, 2, 3, 7, 17};
    const size_t Ks[] = {1, 7, 33, 100, 768};
    const size_t Ns[] = {1, 5, 31, 129};
    for (size_t a = 0; a < sizeof Ts / sizeof *Ts; a++)
        for (size_t k = 0; k < sizeof Ks / sizeof *Ks; k++)
            for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
                for (int layout = 0; layout < 2; layout++)
                    check_shape(Ts[a], Ks[k], Ns[n], (WeightLayout)layout, (int)((a + k + n) % 2),
                                (int)((a + n) % 3 == 0));
    return check_exit("test_matmul");
}

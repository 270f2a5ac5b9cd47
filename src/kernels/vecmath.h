/*
 * vecmath.h - the float maths that more than one kernel shares, each
 * function in every width it is used in: e^x (exp_approx: GELU in
 * forward.c, the softmax in attention) and the fixed 16-lane sum tree
 * (attention, matmul). Header-only: everything inlines into its kernel.
 *
 * The widths do the same operations in the same order, so a lane of a
 * vector result is the scalar result, bit for bit: what lets attention's
 * vector versions match its reference exactly (attention.h). Written once
 * where the language allows: the polynomial of exp_approx is one macro
 * body for float and for vectors of floats (GCC's vector extensions, whose
 * operators are one IEEE operation per lane and, under -ffp-contract=off,
 * never fused); only the clamp, the floor and 2^n need each ISA's words.
 */
#ifndef GPT_VECMATH_H
#define GPT_VECMATH_H

#include <math.h>
#include <stdint.h>

#include "kernels/cpu.h"

// e^r and its reduced argument r = x - n ln2, for n = round(x / ln2) and
// |r| <= ln2/2: the part of exp_approx every width shares, for T = float or
// a vector of floats. ln2 is split in two parts (0.693359375, exact in a
// few bits, minus 2.12194440e-4); a degree-6 polynomial for e^r.
// EXP_APPROX_POLY_INTO writes it into out as statements (for code that
// keeps its vectors out of function arguments, whose ABI differs by ISA:
// logprobs.c); EXP_APPROX_POLY makes a function of it.
#define EXP_APPROX_POLY_INTO(out, T, x, n)                                              \
    do {                                                                                \
        T r_ = (x) - (n) * 0.693359375f + (n) * 2.12194440e-4f; /* x - n ln2 */         \
        T p_ = r_ * 1.9875691500e-4f + 1.3981999507e-3f;                                \
        p_ = p_ * r_ + 8.3334519073e-3f;                                                \
        p_ = p_ * r_ + 4.1665795894e-2f;                                                \
        p_ = p_ * r_ + 1.6666665459e-1f;                                                \
        p_ = p_ * r_ + 5.0000001201e-1f;                                                \
        (out) = p_ * r_ * r_ + r_ + 1.0f; /* e^r */                                     \
    } while (0)
#define EXP_APPROX_POLY(name, T, attrs)                                                 \
    attrs T name(T x, T n) {                                                            \
        T e;                                                                            \
        EXP_APPROX_POLY_INTO(e, T, x, n);                                               \
        return e;                                                                       \
    }

EXP_APPROX_POLY(exp_approx_poly, float, static inline)

// e^x in float32, written so that the compiler can vectorise loops over it
// (libm's expf is a call per element). Range reduction x = n ln2 + r with ln2
// split in two parts, a degree-6 polynomial for e^r on |r| <= ln2/2, and 2^n
// put straight into the exponent bits. Inputs are clamped to [-87, 88], where
// 2^n is a normal float: e^-87 = 1.6e-38 stands in for anything smaller, so
// callers that need an exact 0 (masked attention) must say so themselves.
// Relative error below 1e-7 over the whole range (checked in the tests);
// exp_approx(NaN) is NaN, exp_approx(+inf) e^88, exp_approx(-inf) e^-87.
static inline float exp_approx(float x) {
    // NaN gives NaN, and never reaches the integer conversion below (which
    // would be undefined); +-inf are clamped like any large number.
    float in = x;
    int nan = x != x;
    x = nan ? 0.0f : x;
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    float n = floorf(x * 1.44269504088896341f + 0.5f);  // round(x / ln2)
    float p = exp_approx_poly(x, n);
    union {
        uint32_t bits;
        float value;
    } two_n = {.bits = (uint32_t)((int32_t)n + 127) << 23};  // 2^n, n in [-126, 127]
    return nan ? in : p * two_n.value;
}

// The sum of 16 lanes as a fixed tree: (0..7) + (8..15), then halves again
// (lane is overwritten). The tree matmul_kernels.h's canonical arithmetic
// and attention.h's sum of exponentials are defined with.
static inline float lane16_sum(float *lane) {
    for (int i = 0; i < 8; i++) lane[i] = lane[i] + lane[i + 8];
    for (int i = 0; i < 4; i++) lane[i] = lane[i] + lane[i + 4];
    for (int i = 0; i < 2; i++) lane[i] = lane[i] + lane[i + 2];
    return lane[0] + lane[1];
}

#if defined(__x86_64__)
#include <immintrin.h>

// exp_approx on 16 and on 8 lanes, its operations one by one. The inputs of
// the kernels that call these are never NaN, so the clamp is a max and a min.
EXP_APPROX_POLY(exp_approx_poly_avx512, __m512, INLINE_AVX512)
EXP_APPROX_POLY(exp_approx_poly_avx2, __m256, INLINE_AVX2)

INLINE_AVX512 __m512 exp_approx_avx512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
    __m512 n = _mm512_roundscale_ps(x * 1.44269504088896341f + 0.5f, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    return exp_approx_poly_avx512(x, n) * _mm512_castsi512_ps(e);
}

INLINE_AVX2 __m256 exp_approx_avx2(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_floor_ps(x * 1.44269504088896341f + 0.5f);
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
    return exp_approx_poly_avx2(x, n) * _mm256_castsi256_ps(e);
}
#endif

#endif

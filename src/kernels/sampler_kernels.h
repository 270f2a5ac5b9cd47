/*
 * sampler_kernels.h - the vector code behind the sampler's approximate
 * draws (sampler.c, "decided from approximate weights"): the weights
 * exp(x) of many scaled logits at once and their sum, within 1e-12 of
 * libm's each, in AVX-512 (sampler_avx512.c) and AVX2 (sampler_avx2.c),
 * x86-64 only. Internal to the library: sampler.c picks one from the CpuIsa
 * its scratch found (cpu.h says where the versions of an operation live),
 * or none, and then every draw is exact.
 *
 * The vector exp(x), for x in [-708, 0], 8 (AVX-512) or 4 (AVX2) at a time:
 * x = k ln2 + r with |r| <= ln2/2 (Cody-Waite, ln2 in two parts, with fused
 * multiply-adds), exp(r) by its Taylor polynomial of degree 11 (truncation
 * < 1e-14 relative), times 2^k built in the exponent bits: within 2e-14 of
 * exp(x). x = (l - lmax) * (1/T) instead of libm's (l - lmax) / T differs by
 * at most 3 roundings of x, 3 x 708 x 2^-53 = 2.4e-13 relative in the
 * weight: with libm's own error (an ulp), within the 1e-12 sampler.c's
 * bound assumes.
 */
#ifndef GPT_SAMPLER_KERNELS_H
#define GPT_SAMPLER_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define APPROX_FLOOR (-708.0) // below: weight 0 (libm's is < 4e-308)

// The approximate weights of l[0..n) (scaled: (l - lmax) * inv_t): their
// sum, and each in out if not NULL.
double sampler_approx_weights_avx512(const float *l, size_t n, double lmax, double inv_t, double *out);
double sampler_approx_weights_avx2(const float *l, size_t n, double lmax, double inv_t, double *out);
// The approximate weights of exact scaled logits sl[0..n) into out; their sum.
double sampler_approx_sl_avx512(const double *sl, size_t n, double *out);
double sampler_approx_sl_avx2(const double *sl, size_t n, double *out);

// out[i] := l[i] where bit i of mask (word i / 64, bit i % 64) is set,
// -inf where it is not, for i < n: a grammar's mask, applied before
// everything else the sampler does. The reference (here, in C: sampler.c's
// and the vector code's tail) and AVX-512's (a masked load of 16 lanes);
// bitwise equal. Napkin: n floats read and written, 400 KB for GPT-2: ~10
// us at cache speed, against ~100 us for the reference's 64 selects a word.
void sampler_mask_logits_avx512(const float *l, const uint64_t *mask, size_t n, float *out);
static inline void sampler_mask_logits(const float *l, const uint64_t *mask, size_t n, float *out) {
    // by mask word: a word of none or all (most of a grammar's mask) is one
    // fill or copy of 64; the others a select on the bits, not a branch (a
    // grammar's bits are as good as random to a branch predictor): x where
    // the bit is set, -inf's bits where it is not
    uint32_t ninf;
    float neg = -INFINITY;
    memcpy(&ninf, &neg, sizeof ninf);
    for (size_t i = 0; i < n; i += 64) {
        uint64_t m = mask[i / 64];
        size_t k = n - i < 64 ? n - i : 64;
        if (m == 0) {
            for (size_t j = 0; j < k; j++) out[i + j] = -INFINITY;
        } else if (m == ~0ull) {
            memcpy(out + i, l + i, k * sizeof *out);
        } else {
            uint32_t x[64];
            memcpy(x, l + i, k * sizeof *x);
            for (size_t j = 0; j < k; j++) {
                uint32_t keep = 0u - (uint32_t)((m >> j) & 1);
                x[j] = (x[j] & keep) | (ninf & ~keep);
            }
            memcpy(out + i, x, k * sizeof *x);
        }
    }
}

// The weight of one scaled logit x <= 0 where the vector code cannot take it
// (the tail of a block): libm's, exactly, with the floor.
static inline double approx_one(float l, double lmax, double inv_t) {
    double x = ((double)l - lmax) * inv_t;
    return x >= APPROX_FLOOR ? exp(x) : 0.0;  // NaN fails the >=
}

// The constants of the vector exp (see the top of this file).
#define EXP_LOG2E 1.4426950408889634
#define EXP_LN2HI 0x1.62e42fefa39efp-1
#define EXP_LN2LO 0x1.abc9e3b39803fp-56
#define EXP_SHIFT 0x1.8p52
enum { EXP_DEGREE = 11 };

// The Taylor coefficient 1/i! of exp(r), i <= EXP_DEGREE.
static inline double exp_taylor(int i) {
    static const double coef[EXP_DEGREE + 1] = {
        1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320, 1.0 / 362880,
        1.0 / 3628800, 1.0 / 39916800,
    };
    return coef[i];
}

#endif

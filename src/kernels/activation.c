/*
 * activation.c - the MLP's activations as vectorisable elementwise loops,
 * and their double-precision reference (activation.h).
 *
 * Each kernel is a plain loop under `#pragma omp simd` with CPU_CLONES: no
 * libm call inside (erf, exp and the rest are written out below), no
 * contraction (the build has -ffp-contract=off), so each ISA's version does
 * the same IEEE operations per element and gives the baseline's bits.
 *
 * GELU's tanh form keeps float maths: it is the kernel GPT-2 has always run,
 * and its bits are the outputs of every GPT-2 checkpoint. The others compute
 * in double and round once to float, so their error is the rounding (half an
 * ulp) plus the approximations' 1e-13 or so: no ulps to argue about, and no
 * cancellation in the negative tail, where the result is small and must be
 * small in relative terms too, down to the subnormals.
 *
 * Napkin math: elementwise, one read and one write of 4 bytes per element
 * and 20 (relu 1, tanh form ~25 float) to ~70 (erf form, in double) flops;
 * the matmul that makes each element did 2 C = 1536 (GPT-2 small) flops, so
 * even the erf form costs under 5% of the MLP's first product, and applied
 * by matmul_then on a part still in cache, no memory traffic of its own.
 */
#include "kernels/activation.h"

#include <math.h>
#include <stdint.h>

#include "kernels/cpu.h"
#include "kernels/vecmath.h"

// ----------------------------------------------------------------------------
// double-precision helpers, inlined into each simd loop

// e^y in double for y in [-700, 700] (callers clamp; NaN never comes in).
// y = n ln2 + r with n = round(y / ln2) and |r| <= ln2/2; ln2 in two parts,
// the first with 29 significant bits so that n * LN2_HI is exact for
// |n| < 2^24; e^r by its Taylor series to r^11 (the remainder, r^12/12! e^r,
// is below 9e-15 relative); 2^n put into the exponent bits. n is rounded by
// adding 1.5 * 2^52, which leaves it in the low bits of the sum: no
// float-to-integer conversion, which AVX2 lacks for doubles.
static inline double exp_wide(double y) {
    const double magic = 6755399441055744.0;            // 1.5 * 2^52
    const double ln2_hi = 0.6931471806019545;            // 0x1.62e42ffp-1
    const double ln2_lo = -4.2009150726810846e-11;       // ln2 - ln2_hi
    double k = y * 1.4426950408889634 + magic;           // n + magic, exactly
    double n = k - magic;
    double r = y - n * ln2_hi - n * ln2_lo;
    double p = 1.0 / 39916800.0;                         // 1/11!
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r * r + r + 1.0;
    union {
        double d;
        uint64_t u;
    } kb = {.d = k}, two_n;
    two_n.u = (kb.u + 1023) << 52;  // the low bits of k are n (two's complement)
    return p * two_n.d;
}

// erfc(a) for a in [0, 10.6], relative error about 1e-13: e^(-a^2) times the
// scaled erfcx(a) = e^(a^2) erfc(a), which is smooth and bounded (1 at 0,
// about 1 / (a sqrt(pi)) far out). erfcx is a degree-16 polynomial in
// t = (a - 3.5) / (a + 3.5), which maps [0, inf) onto [-1, 1): the
// Chebyshev interpolant of erfcx on t in [-1, t(10.6)], its relative error
// 1.1e-13 there (fitted for this file; the fit is the usual Chebyshev
// sampling, the change of variable as in Schonfelder's expansions).
// erfc itself never loses digits to cancellation: for a > 0 it is a product.
static inline double erfc_wide(double a) {
    double t = (a - 3.5) / (a + 3.5);
    double g = 1.1026795668140975e-07;
    g = g * t + 8.2907221912048149e-08;
    g = g * t + -1.6900210683745382e-06;
    g = g * t + -1.4882186145693533e-06;
    g = g * t + 1.3523103279040572e-05;
    g = g * t + -4.6744484331172737e-06;
    g = g * t + -0.00010814679369310736;
    g = g * t + 0.00028854262826437279;
    g = g * t + 0.00026739552782128719;
    g = g * t + -0.0042422355348640372;
    g = g * t + 0.016976760028655204;
    g = g * t + -0.045436761478198043;
    g = g * t + 0.094427806947907478;
    g = g * t + -0.16133852475317773;
    g = g * t + 0.23313048159956162;
    g = g * t + -0.28926504483288751;
    g = g * t + 0.15529365560889657;
    return exp_wide(-(a * a)) * g;
}

// x / (1 + e^(-s x)) in double, rounded once: x sigmoid(s x). Below
// x = cut the true value is under half the smallest subnormal, so -0 (and
// -inf gives -0, not -inf / inf). A NaN comes back as itself.
static inline float x_sigmoid(float x, double s, float cut) {
    double y = -s * (double)x;
    y = y != y ? 0.0 : y;
    y = y < -700.0 ? -700.0 : y;
    y = y > 700.0 ? 700.0 : y;
    float r = (float)((double)x / (1.0 + exp_wide(y)));
    r = x < cut ? -0.0f : r;
    return x != x ? x : r;
}

// ----------------------------------------------------------------------------
// the kernels

// GPT-2's "gelu_new": 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// Since 1 + tanh(u) = 2 / (1 + exp(-2u)), this is x / (1 + exp(-2u)): the
// same function with one exp instead of a tanh, and no cancellation near
// u = 0. Below x = -10.03 exp_approx saturates at e^88 and the result is
// x / 1.65e38 rather than x e^(2u): 0 to float precision while |x| is
// moderate, but not for |x| beyond 1e30 (gelu(-3e38) = -1.8, gelu(-inf) =
// -inf). Kept as it is: these are GPT-2's bits, and an MLP input is never
// near that.
CPU_CLONES void activation_gelu_tanh(float *x, size_t n) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        float u = sqrt_2_over_pi * (v + 0.044715f * v * v * v);
        x[i] = v / (1.0f + exp_approx(-2.0f * u));
    }
}

// "gelu": x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2).
// With a = |x| / sqrt 2: Phi = 0.5 erfc(a) for x < 0 (small in relative
// terms, never 1 minus something), 1 - 0.5 erfc(a) for x >= 0 (in [0.5, 1]).
// a is clamped at 10.6 (x = 14.99), where erfc's fit ends: beyond it Phi is
// 1 to double precision for x > 0, and for x < -14.5 the result is below half
// the smallest subnormal, so -0.
CPU_CLONES void activation_gelu_erf(float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        double xd = v;
        double a = fabs(xd) * 0.7071067811865476;  // |x| / sqrt 2
        a = a != a ? 0.0 : a;
        a = a > 10.6 ? 10.6 : a;
        double e = erfc_wide(a);
        double phi = xd >= 0.0 ? 1.0 - 0.5 * e : 0.5 * e;
        float r = (float)(xd * phi);
        r = v < -14.5f ? -0.0f : r;
        x[i] = v != v ? v : r;
    }
}

// "quick_gelu": x sigmoid(1.702 x), with 1.702 in double. Below x = -70,
// -0 (the true value is under 1e-48 by then).
CPU_CLONES void activation_quick_gelu(float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = x_sigmoid(x[i], 1.702, -70.0f);
}

// "relu": max(x, 0), written so that NaN stays NaN (the comparison is false).
CPU_CLONES void activation_relu(float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = x[i] < 0.0f ? 0.0f : x[i];
}

// "silu" (swish): x sigmoid(x). Below x = -110, -0 (110 e^-110 is 1.9e-46).
CPU_CLONES void activation_silu(float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = x_sigmoid(x[i], 1.0, -110.0f);
}

ActivationFn activation_kernel(Activation a) {
    switch (a) {
    case ACTIVATION_GELU_TANH: return activation_gelu_tanh;
    case ACTIVATION_GELU_ERF: return activation_gelu_erf;
    case ACTIVATION_QUICK_GELU: return activation_quick_gelu;
    case ACTIVATION_RELU: return activation_relu;
    case ACTIVATION_SILU: return activation_silu;
    case ACTIVATION_COUNT: break;
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// the reference

double activation_reference(Activation a, double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x > 0 ? x : (a == ACTIVATION_RELU ? 0.0 : -0.0);
    switch (a) {
    case ACTIVATION_GELU_TANH: {
        // 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u))
        double u = sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x);
        return x / (1.0 + exp(-2.0 * u));
    }
    case ACTIVATION_GELU_ERF:  // 0.5 x (1 + erf(x / sqrt 2))
        return 0.5 * x * erfc(-x / sqrt(2.0));
    case ACTIVATION_QUICK_GELU: return x / (1.0 + exp(-1.702 * x));
    case ACTIVATION_RELU: return x < 0 ? 0.0 : x;
    case ACTIVATION_SILU: return x / (1.0 + exp(-x));
    case ACTIVATION_COUNT: break;
    }
    return NAN;
}

/*
 * activation.h - the MLP's activations (model.h's Activation), each an
 * in-place elementwise kernel over floats, and a plain double-precision
 * reference of each for the tests.
 *
 * Every kernel is one loop, element by element, marked CPU_CLONES (cpu.h):
 * its AVX-512 and AVX2 versions give the baseline's bits, and any split of an
 * array into pieces gives the bits of the whole. So matmul_then() may apply
 * one to each part of a product as it is made.
 *
 * What each gives (errors measured by tests/test_activation.c against
 * activation_reference, in ulps of the float result where it is normal):
 *   GELU_TANH   GPT-2's gelu_new, the kernel forward.c has always run (its
 *               bits are GPT-2's outputs: never change them). float maths.
 *   GELU_ERF    x Phi(x), in double inside, rounded once: within 0.51 ulp.
 *   QUICK_GELU  x sigmoid(1.702 x), the same way: within 0.51 ulp.
 *   RELU        x < 0 ? 0 : x, exact (NaN stays NaN, -0 stays -0).
 *   SILU        x sigmoid(x), the same way: within 0.51 ulp.
 * The last three go smoothly to 0 in the negative tail (subnormal results
 * rounded once, not flushed) and give -0 at -inf, +inf at +inf; a NaN comes
 * back as the same NaN.
 */
#ifndef GPT_ACTIVATION_H
#define GPT_ACTIVATION_H

#include <stddef.h>

#include "model/model.h"

// x(n) <- f(x), element by element, in place. Any n, including 0.
typedef void (*ActivationFn)(float *x, size_t n);

// The kernel of a; NULL for a code outside [0, ACTIVATION_COUNT).
ActivationFn activation_kernel(Activation a);

// The kernels themselves (what activation_kernel returns).
void activation_gelu_tanh(float *x, size_t n);
void activation_gelu_erf(float *x, size_t n);
void activation_quick_gelu(float *x, size_t n);
void activation_relu(float *x, size_t n);
void activation_silu(float *x, size_t n);

// f(x) of a in double with libm, by transformers' formula, written where
// needed in a form without cancellation (x / (1 + e^-2u) for the tanh form,
// x erfc(-x / sqrt 2) / 2 for the erf form) so that it is accurate in
// relative terms far into the negative tail too. Its limits at +-inf:
// +inf and -0 (relu: +inf and 0). NaN for an unknown a.
double activation_reference(Activation a, double x);

#endif

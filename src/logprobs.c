/*
 * logprobs.c - log-probabilities from a row of logits. See logprobs.h.
 *
 * The exp pass is one function body (sum_exp_lanes) in GCC's vector
 * extensions, inlined into two wrappers compiled for plain x86-64 and for
 * AVX2 (which AVX-512 machines run too): an 8-lane vector of floats is one
 * ymm register or two xmm, but each lane does the same IEEE operations in
 * the same order (no contraction: -ffp-contract=off), so both give the same
 * bits and the plain one is the reference the other is tested against.
 * Vectors never cross a function call (their ABI differs by ISA): the
 * helpers take pointers and are always inlined. The other pass (the
 * largest logits) is exact in any order: plain loops the compiler
 * vectorises for each ISA (CPU_CLONES).
 */
#include "logprobs.h"

#include <math.h>
#include <string.h>

#include "kernels/vecmath.h"

typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
typedef double f64x4 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));

#define ROUND_SHIFT 12582912.0f  // 1.5 * 2^23: y + it - it rounds y to an integer
#define EXP_FLOOR (-87.0f)       // below: the term counts 0 (e^-87 = 1.6e-38; the sum is >= 1)

// Adds the 8 terms exp(l[j] - max) to the lanes of acc (lane j), 0 where
// l[j] - max is below EXP_FLOOR or NaN. e^x as vecmath.h's exp_approx
// (x = n ln2 + r, its polynomial for e^r, 2^n made in the exponent bits),
// n rounded to nearest: within 1e-7 relative.
static inline __attribute__((always_inline)) void add_terms(f32x8 *acc, const float *l, float max) {
    f32x8 x;
    memcpy(&x, l, sizeof x);
    x = x - max;
    i32x8 in_range = x >= EXP_FLOOR;  // all ones or zero; NaN: zero
    f32x8 shifted = x * 1.44269504088896341f + ROUND_SHIFT;  // n = round(x / ln2) in the low bits
    f32x8 n = shifted - ROUND_SHIFT, e;
    EXP_APPROX_POLY_INTO(e, f32x8, x, n);
    i32x8 two_n = ((i32x8)shifted + 127) << 23;  // n + 127 into the exponent field
    e = e * (f32x8)two_n;
    *acc += (f32x8)((i32x8)e & in_range);
}

// Adds the 8 float lanes of part to the 8 double lanes lo (0-3), hi (4-7).
static inline __attribute__((always_inline)) void add_wide(f64x4 *lo, f64x4 *hi, const f32x8 *part) {
    f32x4 a, b;
    memcpy(&a, part, sizeof a);
    memcpy(&b, (const float *)part + 4, sizeof b);
    *lo += __builtin_convertvector(a, f64x4);
    *hi += __builtin_convertvector(b, f64x4);
}

enum { WIDE_EVERY = 64 };  // logits summed in float before the sums go to double

// The sum of exp(l[j] - max) over l[0..n): logit j in lane j % 8; each
// lane sums 8 terms (64 logits) in float, then adds that to its double (a
// float sum of 8 terms <= 1 loses at most 8 roundings: with the terms' own
// error, the sum is within 1e-6 relative); a last partial vector padded
// with -inf, whose terms are 0; the lanes added in a fixed tree at the end.
static inline __attribute__((always_inline)) double sum_exp_lanes(const float *l, size_t n, float max) {
    f64x4 lo = {0}, hi = {0};
    f32x8 part = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        add_terms(&part, l + i, max);
        if ((i + 8) % WIDE_EVERY == 0) {
            add_wide(&lo, &hi, &part);
            part = (f32x8){0};
        }
    }
    if (i < n) {
        float tail[8];
        for (size_t j = 0; j < 8; j++) tail[j] = i + j < n ? l[i + j] : -INFINITY;
        add_terms(&part, tail, max);
    }
    add_wide(&lo, &hi, &part);
    double lane[8];
    memcpy(lane, &lo, sizeof lo);
    memcpy(lane + 4, &hi, sizeof hi);
    for (int k = 0; k < 4; k++) lane[k] = lane[k] + lane[k + 4];
    for (int k = 0; k < 2; k++) lane[k] = lane[k] + lane[k + 2];
    return lane[0] + lane[1];
}

static double sum_exp_plain(const float *l, size_t n, float max) { return sum_exp_lanes(l, n, max); }
#if defined(__x86_64__)
TARGET_AVX2 static double sum_exp_avx2(const float *l, size_t n, float max) { return sum_exp_lanes(l, n, max); }
#endif

double logits_sum_exp(const float *l, size_t n, float max, CpuIsa isa) {
#if defined(__x86_64__)
    // AVX-512 machines run the AVX2 version: 4-lane vectors are ymm there too
    if (isa >= CPU_AVX2) return sum_exp_avx2(l, n, max);
#endif
    (void)isa;
    return sum_exp_plain(l, n, max);
}

// The largest of l[0..V); *bad says whether one is NaN or +inf (the
// order of a max does not change it, so the vector code keeps the bits).
CPU_CLONES static float row_max(const float *l, size_t V, int *bad) {
    float m = -INFINITY;
    int b = 0;
#pragma omp simd reduction(max : m) reduction(| : b)
    for (size_t i = 0; i < V; i++) {
        m = l[i] > m ? l[i] : m;
        b |= !(l[i] < INFINITY);
    }
    *bad = b;
    return m;
}

enum { TOP_BLOCK = 64 };  // logits compared with the N-th so far at once

CPU_CLONES size_t logits_top(const float *l, size_t V, size_t n, int32_t *ids) {
    size_t k = 0;  // ids[0..k): the largest so far, in order
    if (n > V) n = V;
    for (size_t i = 0; i < V && n; i += TOP_BLOCK) {
        size_t end = i + TOP_BLOCK < V ? i + TOP_BLOCK : V;
        if (k == n) {  // full: a block counts only if one of it beats the last
            float last = l[ids[n - 1]];
            int beats = 0;
#pragma omp simd reduction(| : beats)
            for (size_t j = i; j < end; j++) beats |= l[j] > last;
            if (!beats) continue;
        }
        for (size_t j = i; j < end; j++) {
            float v = l[j];
            if (v != v || (k == n && !(v > l[ids[n - 1]]))) continue;
            size_t at = k < n ? k++ : n - 1;  // a new place, or the last one's
            for (; at > 0 && v > l[ids[at - 1]]; at--) ids[at] = ids[at - 1];
            ids[at] = (int32_t)j;  // after every equal one: a lower id goes first
        }
    }
    return k;
}

void logits_summarize(const float *row, size_t V, size_t n_top, CpuIsa isa, LogitsSummary *s) {
    int bad;
    float max = row_max(row, V, &bad);
    s->max = max;
    s->n_top = n_top ? logits_top(row, V, n_top < LOGPROBS_TOP_MAX ? n_top : LOGPROBS_TOP_MAX, s->top) : 0;
    // a NaN or +inf logit, or a row of -inf: no distribution
    s->log_sum = bad || !(max > -INFINITY) ? NAN : log(logits_sum_exp(row, V, max, isa));
}

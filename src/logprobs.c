/*
 * logprobs.c - log-probabilities from a row of logits. See logprobs.h.
 *
 * The exp pass is one function body (sum_exp_lanes) in GCC's vector
 * extensions, inlined into three wrappers compiled for plain x86-64, AVX2
 * and AVX-512: an 8-lane vector of doubles is one zmm register, two ymm or
 * four xmm, but each lane does the same IEEE operations in the same order
 * (no contraction: -ffp-contract=off), so the three give the same bits and
 * the plain one is the reference the others are tested against.
 */
#include "logprobs.h"

#include <math.h>
#include <string.h>

// Four doubles: one ymm register (AVX2, and AVX-512's ymm form), two xmm
// in plain x86-64. Two of them make the eight lanes.
typedef double f64x4 __attribute__((vector_size(32)));
typedef int64_t i64x4 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));

#define LN2_HI 0x1.62e42feep-1         // 6.93147180369123816490e-01
#define LN2_LO 0x1.a39ef35793c76p-33   // 1.90821492927058770002e-10
#define LOG2_E 1.4426950408889634
#define ROUND_SHIFT 0x1.8p52           // x + 1.5 * 2^52 - 1.5 * 2^52 rounds x to an integer
#define EXP_FLOOR (-708.0)

// (By pointer: a vector passed by value would have an ABI per target.)
static inline __attribute__((always_inline)) void exp_lanes(f64x4 *e) {
    f64x4 x = *e;
    f64x4 shifted = x * LOG2_E + ROUND_SHIFT;  // k in the low bits of the mantissa
    f64x4 k = shifted - ROUND_SHIFT;
    f64x4 r = (x - k * LN2_HI) - k * LN2_LO;
    f64x4 p = r * (1.0 / 362880) + 1.0 / 40320;
    p = p * r + 1.0 / 5040;
    p = p * r + 1.0 / 720;
    p = p * r + 1.0 / 120;
    p = p * r + 1.0 / 24;
    p = p * r + 1.0 / 6;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    i64x4 two_k = ((i64x4)shifted + 1023) << 52;  // k + 1023 into the exponent field
    *e = p * (f64x4)two_k;
}

// Adds exp(l[j] - max) of four logits to the lanes of acc, 0 where
// l[j] - max is below EXP_FLOOR or NaN.
static inline __attribute__((always_inline)) void add_terms(f64x4 *acc, const float *l, double max) {
    f32x4 v;
    memcpy(&v, l, sizeof v);
    f64x4 x = __builtin_convertvector(v, f64x4) - max, e = x;
    i64x4 in_range = x >= EXP_FLOOR;  // all ones or zero; NaN: zero
    exp_lanes(&e);
    *acc += (f64x4)((i64x4)e & in_range);
}

// The sum of exp(l[j] - max) over l[0..n): logit j in lane j % 8 (lanes
// 0-3 in lo, 4-7 in hi; a last partial block padded with -inf, whose
// terms are 0), the lanes added in a fixed tree at the end.
static inline __attribute__((always_inline)) double sum_exp_lanes(const float *l, size_t n, double max) {
    f64x4 lo = {0}, hi = {0};
    for (size_t i = 0; i < n; i += 8) {
        float block[8];
        if (i + 8 <= n) {
            memcpy(block, l + i, sizeof block);
        } else {
            for (size_t j = 0; j < 8; j++) block[j] = i + j < n ? l[i + j] : -INFINITY;
        }
        add_terms(&lo, block, max);
        add_terms(&hi, block + 4, max);
    }
    double lane[8];
    memcpy(lane, &lo, sizeof lo);
    memcpy(lane + 4, &hi, sizeof hi);
    for (int i = 0; i < 4; i++) lane[i] = lane[i] + lane[i + 4];
    for (int i = 0; i < 2; i++) lane[i] = lane[i] + lane[i + 2];
    return lane[0] + lane[1];
}

static double sum_exp_plain(const float *l, size_t n, double max) { return sum_exp_lanes(l, n, max); }
#if defined(__x86_64__)
TARGET_AVX2 static double sum_exp_avx2(const float *l, size_t n, double max) { return sum_exp_lanes(l, n, max); }
#endif

double logits_sum_exp(const float *l, size_t n, double max, CpuIsa isa) {
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

size_t logits_top(const float *l, size_t V, size_t n, int32_t *ids) {
    size_t k = 0;  // ids[0..k): the largest so far, in order
    if (n > V) n = V;
    for (size_t i = 0; i < V && n; i += 16) {
        size_t end = i + 16 < V ? i + 16 : V;
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

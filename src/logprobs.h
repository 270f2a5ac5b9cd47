/*
 * logprobs.h - log-probabilities from one row of logits: the chosen token's
 * and the most likely tokens', under the model's own distribution (the
 * log-softmax of the raw logits, before any temperature, penalty or
 * filter of the sampler).
 *
 *     log p(i) = (l_i - max) - log(sum_j exp(l_j - max))      in double
 *
 * Two passes over the row (V = 50257 for GPT-2), both vector code:
 *   1. the largest logit and the N most likely ids (N <= LOGPROBS_TOP_MAX),
 *      blocks of 64 logits skipped unless one beats the N-th so far;
 *   2. the sum of exp(l_j - max), eight lanes: logit j goes to lane j % 8,
 *      e^x is exp_approx's (vecmath.h: within 1e-7), each lane sums 64
 *      logits' terms in float and then in double, and the lanes are added
 *      in one fixed tree at the end: within 1e-6 of the exact sum, so a
 *      log-probability is within 1e-6 of the exact log-softmax of the
 *      float32 logits (whose own rounding moves it more).
 * The exp pass is written once in GCC's vector extensions and compiled for
 * AVX2 (AVX-512 machines run it too) and plain x86-64: every lane does the
 * same IEEE operations in the same order, so both give the same bits, as
 * the matmul kernels do. A log-probability is therefore a
 * function of the row's bits alone: a row computed alone, in a batch, in
 * a speculative check or by --score gives the same number everywhere.
 *
 * Cost, napkin: pass 2 is about 20 vector operations per 8 logits, 6,300
 * vectors for GPT-2's vocabulary: ~0.13 M operations, tens of microseconds
 * on one core; pass 1 a compare per 16 logits. A decode step of GPT-2 124M
 * reads 80-500 MB of weights, milliseconds at a core's memory bandwidth,
 * so the two passes add under 1%; on the demo model, whose weights are a
 * small fraction of that, they add a few percent.
 */
#ifndef GPT_LOGPROBS_H
#define GPT_LOGPROBS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"

// The most alternatives a token's report may list (OpenAI's limit, too).
enum { LOGPROBS_TOP_MAX = 20 };

// What the log-probabilities of one row need: log p(i) = logprob_of(s, row, i).
typedef struct {
    double max;        // the largest logit
    double log_sum;    // log(sum_j exp(l_j - max)); NaN when a logit is NaN or +inf
    size_t n_top;      // ids in top
    int32_t top[LOGPROBS_TOP_MAX];  // the most likely first; equal logits by ascending id
} LogitsSummary;

// Summarizes row[0..V) with its n_top (<= LOGPROBS_TOP_MAX, <= V) most
// likely ids, using isa's version of the exp pass (every isa gives the
// same bits).
void logits_summarize(const float *row, size_t V, size_t n_top, CpuIsa isa, LogitsSummary *s);

// log p(id) under the row s summarizes: always this expression, so that
// every caller (generation, --score, choices) gets the same bits.
static inline double logprob_of(const LogitsSummary *s, const float *row, int32_t id) {
    return ((double)row[id] - s->max) - s->log_sum;
}

// The parts, for tests: the sum of exp(l_j - max) over l[0..n) (terms with
// l_j - max below -87 or NaN count 0) in isa's version (isa must be
// supported), and the n largest of l[0..V) by value, ties by ascending id,
// NaN never (returns how many it found: n, or fewer when NaN fill the row).
double logits_sum_exp(const float *l, size_t n, float max, CpuIsa isa);
size_t logits_top(const float *l, size_t V, size_t n, int32_t *ids);

#endif

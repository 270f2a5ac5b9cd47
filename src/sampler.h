/*
 * sampler.h - logits -> next token id; owns its RNG state.
 *
 * The order of logits processing is Hugging Face transformers' (generate with
 * do_sample=True): repetition penalty, temperature, top-k, top-p, min-p, then
 * one draw from the renormalized distribution. temperature 0 means greedy
 * argmax (after the repetition penalty; the lowest id wins a tie).
 *
 * Semantics, filter by filter (l = logit after the penalty, s = l / T):
 *   repetition penalty  for every DISTINCT id in the history, l > 0 becomes
 *                       l / penalty, l < 0 becomes l * penalty (CTRL rule).
 *   top-k               keep every token whose logit is >= the k-th largest
 *                       (HF keeps all tokens tied with the k-th, so ties at
 *                       the boundary can keep more than k); k > V means V.
 *   top-p               order tokens by probability, descending, ties by
 *                       ascending id; keep a token while the probability mass
 *                       strictly before it is < p - SAMPLER_TOP_P_EPS (the
 *                       token that crosses p is kept, the one after a mass of
 *                       exactly p is not); the most probable always stays.
 *   min-p               drop tokens whose probability is < min_p * the largest
 *                       probability (the largest always stays).
 * The draw walks the kept tokens in ascending id order, so a given uniform
 * number picks one well-defined token (see sampler_sample_u).
 *
 * The sampler does no I/O; sampler_random_seed reads the OS entropy source,
 * which is the one exception and never fails (it falls back to time ^ pid).
 */
#ifndef GPT_SAMPLER_H
#define GPT_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cpu.h"
#include "base/error.h"

// The tolerance of the top-p boundary. Probabilities come from float32 logits
// whose own rounding moves them by ~1e-7 relative, so a mass that is exactly p
// in decimal (0.5 + 0.25 against p = 0.75) lands a few 1e-8 either side of p;
// without a tolerance the boundary token would be kept or dropped by noise.
#define SAMPLER_TOP_P_EPS 1e-6

typedef struct {
    float temperature;     // 0 = greedy, must be >= 0 and finite
    int top_k;             // 0 = off, must be >= 0
    float top_p;           // 1.0 = off, must be in (0, 1]
    float min_p;           // 0 = off, must be in [0, 1]
    float repeat_penalty;  // 1.0 = off, must be > 0 and finite
    uint64_t seed;
} SamplerParams;

// xoshiro256** (Blackman & Vigna), seeded through splitmix64: small, fast,
// and bit-for-bit the same on every machine. Never all-zero once seeded.
typedef struct {
    uint64_t s[4];
} SamplerRng;

// One token that survived the filters. weight = exp(logit) is unnormalized;
// its probability is weight / (sum of the weights of the kept tokens).
typedef struct {
    double logit;   // (l - max l) / T after the penalty, <= 0
    double weight;  // exp(logit), > 0
    int32_t id;
} SamplerCand;

// The large working memory of a draw, about 53 bytes per vocabulary entry
// (2.7 MB for GPT-2). Its contents do not outlive a call, so one scratch
// serves every sequence of an engine, one draw at a time.
typedef struct {
    size_t vocab_size;     // V
    CpuIsa isa;            // the vector code of the approximate draws:
                           // cpu_best_isa() at init
    SamplerCand *cand;     // (V) the kept tokens, ascending id
    SamplerCand *sorted;   // (V) top-p scratch: the candidates it partitions
    float *heap;           // (V) top-k scratch: min-heap of the k largest
    uint8_t *seen;         // (V) repetition penalty: ids already penalized
    size_t bytes;          // of the four
} SamplerScratch;

// Allocates the scratch for a vocabulary of vocab_size (1 .. INT32_MAX).
// Returns 0, or -1 with err set and *s left safe to sampler_scratch_free.
int sampler_scratch_init(SamplerScratch *s, size_t vocab_size, GptError *err);
// NULL-safe and idempotent.
void sampler_scratch_free(SamplerScratch *s);

// One sequence's sampler: its parameters and its RNG (small), and the
// scratch it draws with (shared, or its own).
typedef struct {
    SamplerParams params;
    SamplerRng rng;
    SamplerScratch *shared;   // a scratch shared with other samplers, or NULL
    SamplerScratch own;       // used when shared is NULL
} Sampler;

// Checks every field; on error names the parameter and the rule, e.g.
// "top_p 1.5: must be in (0, 1]" (a front-end names its own flags). Returns
// 0 or -1.
int sampler_params_validate(const SamplerParams *p, GptError *err);

// Validates p, copies it, seeds the RNG from p->seed and allocates a scratch
// of its own for a vocabulary of vocab_size (1 .. INT32_MAX). Returns 0, or
// -1 with err set and *s left safe to sampler_free.
int sampler_init(Sampler *s, const SamplerParams *p, size_t vocab_size,
                 GptError *err);

// The same, drawing with a scratch shared with other samplers (it must
// outlive this one). Allocates nothing.
int sampler_init_shared(Sampler *s, const SamplerParams *p, SamplerScratch *scratch,
                        GptError *err);

// Releases its own scratch, if any. NULL-safe and idempotent.
void sampler_free(Sampler *s);

// Picks the next token. logits (V) receive the repetition penalty in place;
// history holds every id so far (prompt + generated, may be NULL when
// n_history is 0; ids outside [0, V) are ignored). Consumes exactly one
// uniform number from the RNG when temperature > 0, none when greedy.
// Returns the id, or -1 when no logit is usable: all NaN or -inf, or any
// +inf (which would make every other weight 0 and inf - inf NaN).
int32_t sampler_sample(Sampler *s, float *logits, const int32_t *history,
                       size_t n_history);

// sampler_sample with the uniform number u in [0, 1) given instead of drawn:
// the RNG is not touched. For tests and for callers with their own RNG.
int32_t sampler_sample_u(Sampler *s, float *logits, const int32_t *history,
                         size_t n_history, double u);

// Applies the penalty and the filters and exposes the resulting distribution:
// *out points at the kept tokens in ascending id order (inside s, valid until
// the next call), *total is the sum of their weights. Greedy gives the argmax
// alone with weight 1. Returns the number kept, 0 when no logit is usable
// (as for sampler_sample).
size_t sampler_distribution(Sampler *s, float *logits, const int32_t *history,
                            size_t n_history, const SamplerCand **out,
                            double *total);

// A seed from the OS (/dev/urandom; time ^ pid if that fails), for runs
// without -s.
uint64_t sampler_random_seed(void);

// The generator itself, exposed for tests against published vectors.
void sampler_rng_seed(SamplerRng *r, uint64_t seed);
uint64_t sampler_rng_next(SamplerRng *r);
double sampler_rng_uniform(SamplerRng *r);  // [0, 1), 53 bits

// One splitmix64 step: advances *state and returns the next output.
uint64_t sampler_splitmix64(uint64_t *state);

#endif

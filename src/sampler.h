/*
 * sampler.h - logits -> next token id; owns its RNG state.
 *
 * The order of logits processing: a grammar's mask (Sampler.mask: every
 * token the grammar cannot read gets -inf, so that no bias, penalty or
 * temperature can bring it back and the filters and the draw see exactly
 * the grammar's tokens, as an ordinary distribution), OpenAI's logit_bias, the repetition
 * penalty, OpenAI's presence and frequency penalties, then Hugging Face
 * transformers' (generate with do_sample=True): temperature, top-k, top-p,
 * min-p, then one draw from the renormalized distribution. temperature 0
 * means greedy argmax (after the bias and the penalties; the lowest id wins
 * a tie). The bias comes first because it is a property of the request
 * ("never this token"), not of the text so far, and every penalty then sees
 * the logit the user asked for; the repetition penalty's CTRL rule divides
 * or multiplies, and the presence/frequency penalties subtract, so the
 * subtraction goes last, where an OpenAI client's penalty of 0.5 lowers the
 * logit by exactly 0.5 per rule. This is vLLM's order (logits processors,
 * then repetition, frequency, presence) and llama.cpp's (logit-bias, then
 * penalties).
 *
 * Semantics, step by step (l = logit after the adjustments, s = l / T):
 *   logit_bias          l[id] += bias for each entry (bias in [-100, 100]):
 *                       -100 makes a token weigh exp(-100 / T) of what it
 *                       did (a ban at any ordinary temperature), +100 all
 *                       but forces it.
 *   repetition penalty  for every DISTINCT id in the history, l > 0 becomes
 *                       l / penalty, l < 0 becomes l * penalty (CTRL rule).
 *   presence/frequency  l[t] -= count[t] * frequency_penalty
 *                              + (count[t] > 0) * presence_penalty,
 *                       count[t] the times t was GENERATED in this completion
 *                       (the prompt does not count; OpenAI's rule), computed
 *                       in double and rounded to float once.
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

// The most logit_bias entries a sampler takes. They live inside
// SamplerParams (8 bytes each), which is copied into every sequence and
// every queued completion of a request (a server's request may hold 64):
// the bound keeps that at 2.4 KB, and a list of words to ban or favour
// rarely needs more tokens.
#define SAMPLER_BIAS_MAX 300

// The presence and frequency penalties' range (OpenAI's).
#define SAMPLER_PENALTY_MAX 2.0f
// logit_bias's range (OpenAI's).
#define SAMPLER_BIAS_LIMIT 100.0f

// One logit_bias entry: bias added to the logit of token id.
typedef struct {
    int32_t id;  // >= 0, below the vocabulary (sampler_init checks it)
    float bias;  // in [-100, 100]
} SamplerBias;

typedef struct {
    float temperature;     // 0 = greedy, must be >= 0 and finite
    int top_k;             // 0 = off, must be >= 0
    float top_p;           // 1.0 = off, must be in (0, 1]
    float min_p;           // 0 = off, must be in [0, 1]
    float repeat_penalty;  // 1.0 = off, must be > 0 and finite
    uint64_t seed;
    float presence_penalty;   // 0 = off, in [-2, 2]
    float frequency_penalty;  // 0 = off, in [-2, 2]
    size_t n_bias;            // logit_bias entries, 0 .. SAMPLER_BIAS_MAX
    SamplerBias bias[SAMPLER_BIAS_MAX];  // (n_bias) distinct ids, in any order
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

// The large working memory of a draw, about 61 bytes per vocabulary entry
// (3.1 MB for GPT-2). Its contents do not outlive a call, so one scratch
// serves every sequence of an engine, one draw at a time.
typedef struct {
    size_t vocab_size;     // V
    CpuIsa isa;            // the vector code of the approximate draws:
                           // cpu_best_isa() at init
    SamplerCand *cand;     // (V) the kept tokens, ascending id
    SamplerCand *sorted;   // (V) top-p scratch: the candidates it partitions
    float *heap;           // (V) top-k scratch: min-heap of the k largest
    uint8_t *seen;         // (V) repetition penalty: ids already penalized
    float *adjusted;       // (V) the logits after logit_bias and the penalties
    uint32_t *count;       // (V) presence/frequency: times each id was generated
    size_t bytes;          // of the six
    void *block;           // the six, one after another (memory_reserve)
    size_t block_bytes;
} SamplerScratch;

// Allocates the scratch for a vocabulary of vocab_size (1 .. INT32_MAX).
// Returns 0, or -1 with err set and *s left safe to sampler_scratch_free.
int sampler_scratch_init(SamplerScratch *s, size_t vocab_size, GptError *err);
// NULL-safe and idempotent.
void sampler_scratch_free(SamplerScratch *s);

// Sampler.n_prompt before the first draw: that draw's history is the prompt.
#define SAMPLER_PROMPT_UNSET SIZE_MAX

// One sequence's sampler: its parameters and its RNG (small), and the
// scratch it draws with (shared, or its own).
typedef struct {
    SamplerParams params;
    SamplerRng rng;
    size_t n_prompt;          // history[0..n_prompt) is the prompt, which the
                              // presence/frequency penalties do not count
                              // (SAMPLER_PROMPT_UNSET: the first draw's history)
    SamplerScratch *shared;   // a scratch shared with other samplers, or NULL
    SamplerScratch own;       // used when shared is NULL
    const uint64_t *mask;     // a grammar's allowed tokens for the next draw
                              // (bit i of word i/64), or NULL: all. The
                              // caller sets it before a draw and owns it.
} Sampler;

// Checks every field; on error names the parameter and the rule, e.g.
// "top_p 1.5: must be in (0, 1]" (a front-end names its own flags; the
// message starts with the field's name: "presence_penalty 3: must be in
// [-2, 2]", "logit_bias: token 7: bias 120 must be in [-100, 100]").
// logit_bias ids are checked against the vocabulary by sampler_init.
// Returns 0 or -1.
int sampler_params_validate(const SamplerParams *p, GptError *err);

// Validates p (logit_bias ids below vocab_size too: "logit_bias: token id
// 50300: must be below the vocabulary size 50257"), copies it, seeds the RNG
// from p->seed and allocates a scratch of its own for a vocabulary of
// vocab_size (1 .. INT32_MAX). Returns 0, or -1 with err set and *s left
// safe to sampler_free.
int sampler_init(Sampler *s, const SamplerParams *p, size_t vocab_size,
                 GptError *err);

// The same, drawing with a scratch shared with other samplers (it must
// outlive this one). Allocates nothing.
int sampler_init_shared(Sampler *s, const SamplerParams *p, SamplerScratch *scratch,
                        GptError *err);

// Releases its own scratch, if any. NULL-safe and idempotent.
void sampler_free(Sampler *s);

// Says that the first n_prompt ids of every history are the prompt, which
// the presence/frequency penalties do not count. Without this call, the
// history of the first draw is taken as the prompt (the engine's first draw
// of a sequence comes right after its prompt).
void sampler_set_prompt(Sampler *s, size_t n_prompt);

// Picks the next token. With the repetition penalty as the only adjustment,
// logits (V) receive it in place; with logit_bias or a presence/frequency
// penalty, every adjustment is made on a copy in the scratch and logits are
// left as they were (so a caller's raw row stays raw). history holds every
// id so far (prompt + generated, may be NULL when n_history is 0; ids
// outside [0, V) are ignored); the ids after the prompt (n_prompt) are the
// generated ones. Consumes exactly one
// uniform number from the RNG when temperature > 0, none when greedy.
// Returns the id, or -1 when no logit is usable: all NaN or -inf, or any
// +inf (which would make every other weight 0 and inf - inf NaN).
int32_t sampler_sample(Sampler *s, float *logits, const int32_t *history,
                       size_t n_history);

// sampler_sample with the uniform number u in [0, 1) given instead of drawn:
// the RNG is not touched. For tests and for callers with their own RNG.
int32_t sampler_sample_u(Sampler *s, float *logits, const int32_t *history,
                         size_t n_history, double u);

// Applies the bias, the penalties and the filters (logits as for
// sampler_sample) and exposes the resulting distribution:
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

/*
 * speculate.h - drafts for speculative decoding: cheap guesses of the next
 * tokens, which the model checks all at once (engine_step_verify,
 * engine.h).
 *
 * Decoding one sequence is bound by memory bandwidth: every token reads
 * every weight once. Checking k guesses costs one step of k + 1 rows, which
 * reads the weights once too, so every accepted guess is a weight read
 * saved. What the text is never depends on the draft: the model picks every
 * token itself, exactly as the plain run does; a good draft only makes it
 * faster. Two drafts:
 *
 *   a draft model  a smaller or lower-precision model with the same
 *                  vocabulary (the model itself in q8, distilgpt2 for
 *                  gpt2). It keeps its own KV cache, in step with the
 *                  sequence, and samples its guesses with the sequence's
 *                  sampler settings and the very uniform numbers the
 *                  sequence will draw (sequence_next_uniforms): where both
 *                  distributions put that number on the same token, the
 *                  guess is the model's pick. Its acceptance is about one
 *                  minus the total-variation distance of the two.
 *   prompt lookup  the tokens that followed the last earlier occurrence of
 *                  the last n tokens, in the prompt or the text so far
 *                  ("prompt lookup decoding"): costs nothing, and pays off
 *                  when the output copies its input.
 *
 * A sequence whose output matches a grammar (GenParams.grammar) is drafted
 * under the same constraint (DraftGrammar): a copy of its matcher goes
 * along the guesses, the draft model draws each guess with the mask of the
 * state the guesses before it lead to (as the sequence will draw that
 * token, so the coupling above holds between the two masked
 * distributions), and prompt lookup's guesses end before the first one the
 * grammar cannot read. Guessing ends at <|endoftext|> (never a guess: the
 * row before it draws the end anyway) and after a guess past which no byte
 * can follow (the sequence stops there). The check needs nothing of this:
 * each row of a verify step draws with the sequence's own mask, after the
 * tokens accepted before it, exactly as the plain run's step does, so a
 * guess the grammar forbids is merely rejected; masking the guesses only
 * makes them right more often.
 *
 *     Draft d;  draft_init_model(&d, draft_model, &sampling, positions, pool, &err);
 *     while (!s.stop) speculate_step(&engine, &s, &d, 4, &err);
 *     draft_free(&d);
 */
#ifndef GPT_SPECULATE_H
#define GPT_SPECULATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "forward.h"
#include "engine.h"
#include "grammar/grammar.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "sampler.h"

typedef struct {
    const Model *model;     // the draft model; NULL for prompt lookup
    size_t lookup_n;        // prompt lookup: the n-gram it looks for
    ForwardState fs;        // the draft model's scratch
    KVCache cache;          // its keys and values for the sequence's tokens
    Sampler sampler;        // the sequence's settings, its own scratch
    int32_t *history;       // (max_positions + max_guesses) the tokens and the guesses so far
    double *uniforms;       // (max_guesses) the numbers the guesses are sampled with
    int32_t *guesses;       // (max_guesses) one step's guesses
    size_t max_positions, max_guesses;
    double seconds;         // wall time spent guessing
    size_t guesses_run;     // tokens the draft model ran (its prefill included)
    size_t shifts_seen;     // the sequence's context shifts its cache follows
    // a constrained sequence's guesses (DraftGrammar)
    GrammarMatcher *grammar;  // the sequence's state, advanced along the guesses
    uint64_t *mask;           // (mask_words) the allowed tokens of a guess's draw
    size_t mask_words;
} Draft;

// The constraint on a sequence's output, for its guesses: its grammar's
// state after its tokens so far, the masker its draws use (the same one, so
// that the masks the guesses cost are in its cache when the check draws),
// the tokenizer whose bytes the grammar reads, <|endoftext|> (-1: none) and
// the vocabulary (the draft model's, which must be the sequence's).
typedef struct {
    const GrammarMatcher *state;
    GrammarMasker *masker;
    const Tokenizer *tok;
    int32_t eos;
    size_t vocab;
} DraftGrammar;

// A draft model for sequences of at most max_positions tokens that sample
// with p, guessing at most max_guesses tokens a step. The model must have
// the vocabulary of the model it drafts for (the caller checks the
// tokenizer). Returns 0, or -1 with err set and *d safe to draft_free.
int draft_init_model(Draft *d, const Model *draft, const SamplerParams *p, size_t max_positions,
                     size_t max_guesses, ThreadPool *pool, GptError *err);
// Prompt lookup of n-grams of n >= 1 tokens.
int draft_init_lookup(Draft *d, size_t n, size_t max_positions, size_t max_guesses, GptError *err);
void draft_free(Draft *d);  // NULL-safe, idempotent

// Up to k guesses (k <= max_guesses) of the tokens that follow
// tokens[0..n), written to out; u[i] is the uniform number the sequence will
// sample token n + i with; g the constraint on the output, or NULL. Returns
// how many (0 when it has none: past the draft model's context, no earlier
// occurrence of the n-gram, no token the grammar allows), or -1 with err
// set. A grammar's bound met on a guess's state ends the guesses, never the
// run: the sequence may never reach that state.
int draft_propose(Draft *d, const int32_t *tokens, size_t n, size_t k, const double *u, const DraftGrammar *g,
                  int32_t *out, GptError *err);

// One decoding step of s with at most k guesses from d (an ordinary
// engine_step while s reads its prompt). The time spent guessing counts as
// the sequence's decode time. A sequence with a grammar is drafted under it
// (DraftGrammar, from the sequence's matcher and masker). Returns 0, or -1
// with err set.
int speculate_step(Engine *e, Sequence *s, Draft *d, size_t k, GptError *err);

#endif

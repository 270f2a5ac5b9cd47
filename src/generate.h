/*
 * generate.h - the generation engine: sequences in flight, each advanced one
 * step at a time, and scoring.
 *
 * A Sequence is one prompt being continued: its token ids, its KV cache, its
 * sampler (parameters and RNG state), its UTF-8 token stream, its limits and
 * why it stopped. An Engine holds what the sequences share: the model, the
 * forward pass's scratch and the sampler's large scratch.
 *
 * engine_step() advances a set of sequences together: it builds one batch
 * of new tokens (the next chunk of each prompt still being read, the last
 * sampled token of each sequence being decoded), runs the model once over
 * all of it, samples each sequence whose logits are ready, and leaves each
 * sequence's new text in seq->out. Every weight is read once per step, for
 * all sequences.
 *
 *     Engine e;  Sequence s;
 *     engine_init(&e, model, tok, 1, n_prompt, &err);
 *     sequence_init(&s, &e, ids, n_prompt, &params, &err);
 *     while (!s.stop) { engine_step(&e, &(Sequence *){&s}, 1, &err); print(s.out, s.out_len); }
 *     sequence_free(&s);  engine_free(&e);
 *
 * A sequence's result does not depend on the others in the step: each has
 * its own cache, sampler and RNG, and the sampler's scratch holds nothing
 * from one draw to the next.
 */
#ifndef GPT_GENERATE_H
#define GPT_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "forward.h"
#include "kvcache.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

typedef enum {
    STOP_NONE = 0,   // still running
    STOP_EOS,        // sampled <|endoftext|> (not part of the output)
    STOP_LENGTH,     // generated max_new tokens
    STOP_CONTEXT,    // the next token would need a position past the context
    STOP_ERROR,      // the model gave no usable logits: seq->error says more
} StopReason;

// "eos", "length", "context", "error"; "" for STOP_NONE.
const char *stop_reason_name(StopReason r);

typedef struct {
    SamplerParams sampling;  // including the seed
    size_t max_new;          // tokens to generate at most
    int ignore_eos;          // keep going after <|endoftext|>
} GenParams;

typedef struct {
    int32_t *tokens;        // (capacity + 1) the prompt, then the generated ids
    size_t n_tokens;        // prompt + generated so far
    size_t n_prompt;
    KVCache cache;          // cache.n_tokens: positions run through the model
    Sampler sampler;        // parameters and RNG; draws with the engine's scratch
    TokenStream stream;     // generated ids -> whole UTF-8 characters
    size_t max_new, n_generated;
    int ignore_eos;
    StopReason stop;
    GptError error;         // with STOP_ERROR
    int32_t last_token;     // sampled by the last step, -1 if none
    char *out;              // the text the last step completed (not NUL-terminated)
    size_t out_len, out_cap;
    // what this sequence cost
    size_t prefill_tokens, decode_tokens;    // tokens run through the model
    double prefill_seconds, decode_seconds;  // wall time of the steps that did so
} Sequence;

typedef struct {
    const Model *model;
    const Tokenizer *tok;
    int32_t eot;              // <|endoftext|>, -1 if the tokenizer has none
    ForwardState fs;
    SamplerScratch scratch;   // shared by every sequence's sampler
    DType kv_dtype;           // the sequences' caches: F32 or F16
    SeqInput *inputs;         // (max_seqs) one step's batch
    size_t *which;            // (max_seqs) the sequence of each input
    unsigned char *prefilling;  // (max_seqs) per sequence: still reading its prompt
    size_t max_seqs;          // sequences one step may advance
    size_t max_step_tokens;   // new tokens one step may run: prompts are read
                              // in chunks that fit beside the decodes
} Engine;

// Sets up an engine for steps of up to max_seqs sequences and max_step_tokens
// new tokens (>= max_seqs), KV caches of kv_dtype (F32 or F16), the work
// split over pool (NULL: one thread; it must outlive the engine). Returns 0,
// or -1 with err set.
int engine_init(Engine *e, const Model *m, const Tokenizer *tok, size_t max_seqs,
                size_t max_step_tokens, DType kv_dtype, ThreadPool *pool, GptError *err);
void engine_free(Engine *e);  // NULL-safe, idempotent

// Prepares a sequence to continue prompt[0..n_prompt) (1 <= n_prompt <= the
// context): copies the prompt, allocates a cache for the prompt and up to
// max_new tokens (at most the context), seeds its sampler. Returns 0, or -1
// with err set and *s safe to sequence_free.
int sequence_init(Sequence *s, const Engine *e, const int32_t *prompt, size_t n_prompt,
                  const GenParams *p, GptError *err);
void sequence_free(Sequence *s);  // NULL-safe, idempotent

// Advances every sequence of seqs[0..n) that has not stopped by one step
// (n <= max_seqs). Afterwards each has out/out_len (the text completed now,
// the flushed tail when it stopped), last_token, and stop. A sequence stops
// with STOP_ERROR alone when its logits are unusable. Returns 0, or -1 with
// err set when the step could not run at all (nothing has changed then).
int engine_step(Engine *e, Sequence *const *seqs, size_t n, GptError *err);

// Scoring: logprobs[i] = log p(ids[i + 1] | ids[0..i]) for i < n - 1, in
// double, the text run through the model in chunks of SCORE_CHUNK tokens
// with a KV cache of kv_dtype, over pool (may be NULL). *seconds (may be
// NULL) gets the wall time, *kv_bytes (may be NULL) the cache it allocated.
// n must be in [1, the context]. Returns 0 or -1.
enum { SCORE_CHUNK = 128 };
int score_tokens(const Model *m, const int32_t *ids, size_t n, DType kv_dtype, ThreadPool *pool,
                 double *logprobs, double *seconds, size_t *kv_bytes, GptError *err);

#endif

/*
 * engine.h - the generation engine: sequences in flight, each advanced one
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
 *     engine_init(&e, model, tok, &(EngineConfig){.max_seqs = 1, .max_step_tokens = n_prompt}, &err);
 *     sequence_init(&s, &e, ids, n_prompt, &params, &err);
 *     engine_admit(&e, &s, &err);
 *     while (!s.stop) { engine_step(&e, &(Sequence *){&s}, 1, &err); print(s.out, s.out_len); }
 *     sequence_free(&s, &e);  engine_free(&e);
 *
 * A sequence's result does not depend on the others in the step, on how
 * its prompt was cut into chunks, or on whether part of its prompt came
 * from another sequence's blocks: every row is computed in the same order of
 * operations (forward.h), each sequence has its own sampler and RNG, and the
 * sampler's scratch holds nothing from one draw to the next.
 */
#ifndef GPT_ENGINE_H
#define GPT_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "forward.h"
#include "model/kvcache.h"
#include "logprobs.h"
#include "model/model.h"
#include "sampler.h"
#include "model/tokenizer.h"
#include "grammar/grammar.h"

typedef enum {
    STOP_NONE = 0,   // still running
    STOP_EOS,        // sampled <|endoftext|> (not part of the output)
    STOP_LENGTH,     // generated max_new tokens
    STOP_CONTEXT,    // the next token would need a position past the context (and no --context-shift)
    STOP_STRING,     // the text reached one of its stop strings (not part of the output)
    STOP_ERROR,      // the model gave no usable logits: seq->error says more
    STOP_GRAMMAR,    // the grammar accepted the text and no byte can follow
} StopReason;

// Why a sequence ended, in one table (sequence.c) that every front-end
// reads: its name (--json's "stop_reason": "eos", "length", "context",
// "stop", "error", "grammar"; "" for STOP_NONE), and OpenAI's finish_reason
// for it (the server's: eos, stop and grammar -> "stop"; length and context
// -> "length", both being "no more room"; error -> "error", the server's
// mark of a failed choice, never sent as a finish_reason: serve/api.c's
// choice_finish sends the error object instead). A front-end adds
// "interrupted" (Ctrl-C, SIGTERM past the grace) under both names.
const char *stop_reason_name(StopReason r);
const char *stop_reason_finish(StopReason r);

typedef struct {
    SamplerParams sampling;  // including the seed
    size_t max_new;          // tokens to generate at most
    int ignore_eos;          // keep going after <|endoftext|>
    const char *const *stops;  // stop when the text contains one of these (copied)
    size_t n_stops;
    // Log-probabilities (logprobs.h): with `logprobs`, each generated token's
    // under the model's distribution at its position (the raw logits' log-
    // softmax: before the penalty, temperature and filters, which never
    // change), with the top_logprobs most likely tokens there; and with
    // logprobs_from >= 1, the prompt's tokens from that one on too (their
    // rows then run with logits: EngineConfig.prompt_logit_rows). Computing
    // them never changes which token is drawn.
    int logprobs;
    size_t top_logprobs;     // 0 .. LOGPROBS_TOP_MAX
    size_t logprobs_from;    // the first prompt token reported (>= 1); 0: none of the prompt's
    // Past the context (context_shift): when the next token would need a
    // position past it, the model's window starts again from the first
    // `keep` tokens of the prompt (at most the prompt, at most half the
    // context) and the most recent tokens up to half the context, computed
    // anew as a prompt (one prefill: GPT-2's positions are absolute, so no
    // cache can be moved). What follows is exactly what a fresh run from
    // those ids would generate with the sampler's state carried over: its
    // RNG where it was, the repetition penalty over every token so far.
    int context_shift;
    size_t keep;
    // A grammar (src/grammar/grammar.h) the output must match, or NULL: each
    // draw sees only the tokens whose bytes the grammar can read next
    // (Sampler.mask), <|endoftext|> only where the text so far is a sentence,
    // and the sequence stops with STOP_GRAMMAR once no byte can follow. Both
    // are the caller's and must outlive the sequence; vocab is the trie of
    // the engine's tokenizer (sequence_grammar_vocab).
    const Grammar *grammar;
    const GrammarVocab *grammar_vocab;
    // An adapter applied at run time to this sequence alone (forward.h,
    // SeqInput.lora), or NULL; the caller's, outliving the sequence. Its
    // prompts share computed blocks only with the same adapter's.
    const LoraWeights *lora;
} GenParams;

// One token's log-probability and the most likely tokens at its position,
// most likely first (equal logits by ascending id).
typedef struct {
    int32_t id;
    double logprob;
    size_t n_top;
    int32_t top_ids[LOGPROBS_TOP_MAX];
    double top_logprobs[LOGPROBS_TOP_MAX];
} TokenLogprob;

// The grammar maskers of an engine's sequences, one per (grammar,
// vocabulary) in use (sequence.c): the sequences of one grammar draw their
// masks from one cache, made once for all of them. A mask is a function of
// the matcher's state alone, so what else runs changes no mask; only the
// thread that runs the engine's steps (which samples) touches them.
typedef struct GrammarShare GrammarShare;

typedef struct {
    int32_t *tokens;        // (tokens_cap) the prompt, then the generated ids
    size_t n_tokens;        // prompt + generated so far
    size_t tokens_cap;
    size_t n_prompt;
    KVCache cache;          // cache.n_tokens: positions run through the model (or shared)
    Sampler sampler;        // parameters and RNG; draws with the engine's scratch
    TokenStream stream;     // generated ids -> whole UTF-8 characters
    size_t max_new, n_generated;
    int ignore_eos;
    int admitted;           // has its blocks (engine_admit); only then does it step
    StopReason stop;
    GptError error;         // with STOP_ERROR
    int32_t last_token;     // sampled by the last step, -1 if none
    char *out;              // the text the last step completed (not NUL-terminated)
    size_t out_len, out_cap;
    char **stops;           // (n_stops) its stop strings
    size_t n_stops, max_stop_len;
    char *held;             // text held back: it may be the start of a stop string
    size_t held_len;
    // log-probabilities (GenParams.logprobs): lp[i] is token lp_from + i's,
    // for every token from lp_from (the prompt's first reported, or n_prompt)
    // to the last appended
    int logprobs;
    size_t top_logprobs, lp_from;
    TokenLogprob *lp;
    size_t n_lp, lp_cap;
    // --context-shift (GenParams.context_shift): once shifted, the model's
    // window is win[0..win_len), no longer tokens[0..n_tokens)
    int context_shift;
    size_t keep;
    int32_t *win;           // (n_ctx + 1) NULL until the first shift
    size_t win_len;
    size_t win_prompt;      // its first win_prompt ids are prefilled (the kept ones)
    int shift_due;          // the window is full: the next step shifts it
    size_t shifts, shift_tokens;  // shifts made, and the positions they recomputed
    // what this sequence cost
    size_t positions;       // positions its cache holds (held when it stopped)
    size_t prefix_reused;   // prompt positions shared from other sequences' blocks
    size_t kv_reserved;     // blocks promised to it and not taken yet, plus taken
    size_t kv_shared_blocks;  // whole blocks it shares (taken from no reservation)
    size_t prefill_tokens, decode_tokens;    // tokens run through the model
    double prefill_seconds, decode_seconds;  // wall time of the steps that did so
    size_t decode_steps;    // model calls it decoded in (one token each, or a verify step's rows)
    // speculative decoding (engine_step_verify)
    size_t verify_steps;    // decode steps that checked proposals
    size_t proposed, accepted;  // proposals checked, and those the model picked too
    // a grammar (GenParams.grammar): its state, masks and this draw's mask
    GrammarMatcher *grammar;
    GrammarMasker *masker;  // the engine's for this grammar (GrammarShare), shared
    GrammarShare *grammar_share;  // the engine's, which holds masker for it
    uint64_t *mask;         // (GRAMMAR_MASK_WORDS(V))
    const LoraWeights *lora;  // GenParams.lora
} Sequence;

typedef struct {
    size_t max_seqs;          // sequences one step may advance
    size_t max_step_tokens;   // new tokens one step may run (>= max_seqs): prompts
                              // are read in chunks that fit beside the decodes
    DType kv_dtype;           // the caches: F32 or F16
    size_t kv_blocks;         // the pool every sequence's cache draws on, in blocks
                              // of KV_BLOCK positions; 0: max_seqs full contexts
    int share_prefixes;       // prompts that start alike share computed blocks
    int share_outputs;        // with share_prefixes: a sequence released remembers its whole
                              // window (prompt and generated tokens) for later prompts, not
                              // only its prompt, so that the next turn of a chat, whose
                              // prompt continues it, shares those blocks too
    size_t max_verify;        // proposals engine_step_verify may check at once (0: none)
    int use_blas;             // long prefill chunks through OpenBLAS (blas.h; not bitwise)
    size_t prompt_logit_rows; // prompt rows one step may run with logits, for the
                              // prompts' log-probabilities (GenParams.logprobs_from);
                              // 0: no sequence may ask for them
    ThreadPool *pool;         // threads for the model (NULL: one); must outlive the engine
    const MatmulPlan *plan;   // the matmul variants (tune.h), copied; NULL: the default
} EngineConfig;

// One thread or all of them, chosen while decoding by measurement: on a
// machine where another process keeps a core busy, a worker descheduled in
// the middle of its part holds every one of a token's ~60 runs up, and the
// pool's threads can decode slower than the caller alone. Now and then a few decode steps try the other mode
// (threadpool_set_solo); the faster stays. Only who runs the parts changes,
// never the bits.
typedef struct {
    int probing;              // these steps try the other mode
    unsigned left;            // steps before the next probe, or before the probe's verdict
    unsigned period;          // steps between probes (doubles while the mode holds)
    double seconds[2];        // time of the steps measured: [0] the mode's, [1] the probe's
    unsigned steps[2];
    size_t rows;              // the rows of the steps measured (another count starts again)
    size_t solo_steps;        // decode steps run solo, for --stats
} ThreadChoice;

typedef struct {
    const Model *model;
    const Tokenizer *tok;
    int32_t eot;              // <|endoftext|>, -1 if the tokenizer has none
    GrammarShare *grammar_share;
    EngineConfig cfg;
    ForwardState fs;
    SamplerScratch scratch;   // shared by every sequence's sampler
    KVPool *kv;               // the blocks of every sequence's cache
    int32_t *verify_tokens;   // (max_verify + 1) a verify step's input
    float *raw_logits;        // (vocab) a row before the repetition penalty, for its log-probabilities
    SeqInput *inputs;         // (max_seqs) one step's batch
    size_t *which;            // (max_seqs) the sequence of each input
    unsigned char *prefilling;  // (max_seqs) per sequence: still reading its prompt
    ThreadChoice threads;     // one thread or all, while decoding
    // totals over the engine's life
    size_t prefill_tokens, decode_tokens, prefix_tokens_reused, steps;
    double forward_seconds;
} Engine;

// Sets up an engine as cfg says. Returns 0, or -1 with err set.
int engine_init(Engine *e, const Model *m, const Tokenizer *tok, const EngineConfig *cfg, GptError *err);
void engine_free(Engine *e);  // NULL-safe, idempotent; free the sequences first
// The memory the engine allocated for its steps (the forward pass's scratch
// with its logit rows, the sampler's, the batch's records), sized by the
// config, not by what runs: the KV pool and the model are not in it.
size_t engine_buffer_bytes(const Engine *e);

// The ids a prompt starts generation from: its tokens, or <|endoftext|>
// alone for an empty prompt (GPT-2 was trained with it between documents,
// so an empty prompt starts a new one). *ids is malloc'd. 0, or -1 with err
// set.
int prompt_tokens(Tokenizer *tok, const char *text, size_t len, int special, int32_t **ids, size_t *n,
                  GptError *err);
// Multiple choice: the tokens of prompt + choice, tokenized as one text,
// and *first, where the choice's tokens begin: the tokens whose bytes all
// lie in the prompt are its context, and the first token that holds a byte
// of the choice is the choice's first (a token across the boundary, such
// as " yes" of "Answer:" + " yes" when the prompt ends in a space, belongs
// to the choice: its log-probability covers that byte of the prompt too).
// This is lm-evaluation-harness's rule (tokenize the whole, split where the
// context ends), with the straddling token given to the choice. When no
// token lies wholly in the prompt (an empty prompt), <|endoftext|> is put
// before them, as generation does for an empty prompt, and *first is 1.
// Log-probabilities of ids[first..n) are the choice's, each the one
// --score gives that token of the same ids. *ids is malloc'd; 0, or -1 with
// err set (an empty choice).
int candidate_tokens(Tokenizer *tok, const char *prompt, size_t prompt_len, const char *choice, size_t choice_len,
                  int special, int32_t **ids, size_t *n, size_t *first, GptError *err);
// Whether a prompt of n tokens fits the model's context: 0, or -1 with err
// set ("the prompt is N tokens; the model's context holds C").
int check_prompt_length(const GPT2Config *c, size_t n, GptError *err);
// The positions a sequence of n_prompt tokens and up to max_new new ones
// can use: the prompt and the new tokens, at most the context. Its cache
// takes that many positions' blocks at most.
size_t sequence_positions(const GPT2Config *c, size_t n_prompt, size_t max_new);
// The KV pool for a budget of budget_bytes (0: the default, 1 GiB but at
// most 2 x max_seqs full contexts: room for the running sequences and for
// the prefixes of finished ones), in blocks, at most KVPOOL_MAX_BLOCKS; 0
// when the budget is less than one block. A budget is an upper limit: the
// pool takes memory only as its blocks are used (kvpool_create), so a
// budget larger than the machine's memory runs and holds at most what the
// machine has.
size_t kv_blocks_for_budget(const GPT2Config *c, DType kv_dtype, size_t budget_bytes, size_t max_seqs);

// Prepares a sequence to continue prompt[0..n_prompt) (1 <= n_prompt <= the
// context): copies the prompt, seeds its sampler, and gives it an empty
// cache on the engine's pool for the prompt and up to max_new tokens (at
// most the context). It steps once engine_admit has given it its blocks.
// Returns 0, or -1 with err set and *s safe to sequence_free.
int sequence_init(Sequence *s, const Engine *e, const int32_t *prompt, size_t n_prompt,
                  const GenParams *p, GptError *err);
// Gives its blocks back to the pool. NULL-safe, idempotent.
void sequence_free(Sequence *s, Engine *e);

// The trie of tok's tokens' bytes for a model of V tokens (ids the
// tokenizer lacks are never allowed), for GenParams.grammar_vocab (the
// caller's to grammar_vocab_free). NULL with err set on failure.
GrammarVocab *sequence_grammar_vocab(const Tokenizer *tok, size_t V, GptError *err);
// An engine's shared maskers (engine_init, engine_free: every masker, with
// any sequence not freed first). NULL on allocation failure.
GrammarShare *grammar_share_new(void);
void grammar_share_free(GrammarShare *sh);
// What an engine's maskers hold now (for /metrics): their number, how many
// no sequence holds (kept for the next request of the same grammar), the
// bytes of their caches, and the mask walks they have computed and served
// from a cache in all (a freed masker's are gone from the sums). Call it
// from the thread that runs the engine's steps.
typedef struct {
    size_t maskers, idle, cache_bytes;
    uint64_t computed, cached;
} GrammarShareStats;
GrammarShareStats grammar_share_stats(const GrammarShare *sh);
// The ids the model's window holds (the prompt and what followed, or after
// a context shift the kept ones and what followed): *n of them.
const int32_t *sequence_context(const Sequence *s, size_t *n);
// Gives its blocks (and what is left of the promise) back to the pool, and
// keeps the rest; engine_step does it when a sequence stops, so that its
// place goes to the next one at once. Idempotent.
void sequence_release(Sequence *s, Engine *e);

// Admits s: promises it every block it can need, so that it never waits once
// running, shares what it can of its prompt with earlier prompts' blocks,
// and takes the blocks for the rest of its prompt. Returns 1 when admitted,
// 0 when it must wait (the pool is short, or another sequence is computing
// the prefix it would share: try again after the next step), -1 with err set
// when it can never fit (it alone needs more than the pool).
int engine_admit(Engine *e, Sequence *s, GptError *err);

// Advances every admitted sequence of seqs[0..n) that has not stopped by one
// step (n <= max_seqs). Afterwards each has out/out_len (the text completed
// now, the flushed tail when it stopped), last_token, and stop. A sequence
// stops with STOP_ERROR alone when the sampler finds its logits unusable.
// Returns 0, or -1 with err set when the step could not run, or when the
// forward pass met a non-finite value (it checks every layer and the logits
// of the whole step): the sequences in the step may then have advanced
// their caches, and are fit only for sequence_free.
int engine_step(Engine *e, Sequence *const *seqs, size_t n, GptError *err);

// Speculative decoding. A draft (speculate.h) guesses the next k tokens of a
// decoding sequence; engine_step_verify runs the model once over the last
// sampled token and the k guesses (k + 1 rows, which cost little more than
// one in a memory-bound step) and then, row by row, does exactly what k + 1
// plain steps would: the sequence's own sampler picks from the row's logits
// (same filters, same history, the RNG's next uniform number, and the
// grammar's mask after the tokens picked before it), the pick is
// appended and the stop conditions checked. A guess is accepted while it
// equals the model's pick; the first pick that differs, or the pick after k
// accepted guesses, ends the step, and the cache is cut back to the
// positions of the tokens kept. Since every row has the bits of a one-token
// step (forward.h), the tokens, the text and the RNG stream are the plain
// run's, whatever the draft guessed.

// Proposals the next step of s can check: one less than the tokens it may
// still emit (max_new, the context), at most cfg.max_verify; 0 while it
// reads its prompt or has stopped.
size_t sequence_verify_room(const Sequence *s, const Engine *e);
// The uniform numbers s's sampler will draw for its next n tokens (zeros
// when greedy), without drawing them: a draft samples its guesses with the
// same numbers, so that it guesses the model's pick wherever the two
// distributions put that number on the same token.
void sequence_next_uniforms(const Sequence *s, double *u, size_t n);
// One step of s alone with guesses draft[0..k), k <= sequence_verify_room
// (k = 0, or a sequence still reading its prompt: an ordinary engine_step).
// Afterwards s is as after engine_step, having emitted 1 to k + 1 tokens;
// s->accepted and s->proposed count the guesses. Returns 0, or -1 with err
// set (as engine_step).
int engine_step_verify(Engine *e, Sequence *s, const int32_t *draft, size_t k, GptError *err);

// A sequence's own steps, for the engine (engine.c; defined in sequence.c).
// The model's window: its ids, their count, and how many of them are a
// prompt to prefill (the prompt, or after a context shift the kept ids).
const int32_t *sequence_window_ids(const Sequence *s);
size_t sequence_window_len(const Sequence *s);
size_t sequence_window_prompt(const Sequence *s);
// Text on its way out (held back while it may be the start of a stop
// string): 0, 1 when a stop string was found (the text ends before it), -1
// out of memory.
int sequence_emit(Sequence *s, const char *p, size_t n);
// s stops for why: the token stream's tail flushed through sequence_emit
// (STOP_NONE: sequence_interrupt's, which lets out what s held and no more).
void sequence_stop(Sequence *s, StopReason why);
// A run stopped from outside (Ctrl-C) between steps: s->out becomes what
// s held back, which no stop string followed (the unfinished bytes of its
// last character, and the text that might have begun a stop string), so
// that the text so far is all of it. s->stop stays STOP_NONE (STOP_STRING
// when those bytes complete a stop string; STOP_ERROR out of memory).
// Nothing for a sequence that stopped by itself.
void sequence_interrupt(Sequence *s);
// Appends the log-probability of token id under the row summarized by sum
// (whose raw logits are row). 0, or -1 out of memory.
int sequence_add_logprob(Sequence *s, const LogitsSummary *sum, const float *row, int32_t id);

#endif

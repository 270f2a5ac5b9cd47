/*
 * grammar.h - GBNF grammars compiled to a pushdown automaton over bytes,
 * and the token masks it gives a sampler.
 *
 * The language is llama.cpp's GBNF (docs/grammars.md): rules `name ::= ...`,
 * alternatives `|`, sequences, groups `( )`, `*`, `+`, `?`, `{m}`, `{m,n}`,
 * `{m,}`, string literals "..." with escapes (\n \r \t \\ \" \[ \] \xHH
 * \uHHHH \UHHHHHHHH), character classes [a-z] and [^...] over Unicode code
 * points (ranges, escapes), `.` (any code point), `#` comments to the end of
 * the line. The start rule is `root`.
 *
 * What it compiles to: every terminal is a set of BYTES (a 256-bit class);
 * a class of code points becomes the alternatives of its UTF-8 byte
 * sequences, so the automaton reads exactly the UTF-8 encodings of the
 * code points the grammar names. A rule reference pushes a return position;
 * the matcher keeps the set of stacks (positions) that are alive after the
 * bytes read so far (llama.cpp's design), so ambiguity costs stacks, bounded.
 *
 * Errors at compile time, one line naming LINE:COLUMN of the grammar text:
 * a syntax error says what was expected ("3:14: expected ')' or an
 * alternative, got '}'"); an undefined rule names the reference; left
 * recursion (a rule that can reach itself without reading a byte) names the
 * rule; a grammar whose root derives no finite string says so. Each bound of
 * GrammarLimits gives its own message.
 *
 * Immutability: a Grammar is read-only after grammar_compile and may be
 * shared by any number of matchers and threads. A GrammarMatcher is one
 * sequence's state: not thread-safe, cheap to copy (grammar_matcher_copy).
 * A GrammarVocab (the vocabulary's token bytes as a trie) is read-only too.
 * The mask caches live in a GrammarMasker, one per (grammar, vocab) pair,
 * not thread-safe: an engine's sequences of one grammar share one, used by
 * the thread that runs its steps (engine.h, GrammarShare).
 *
 * The library never prints; every failure returns -1 or NULL with err set.
 */
#ifndef GPT_GRAMMAR_H
#define GPT_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

// Bounds on what grammar_compile accepts (for grammars from anyone).
// grammar_limits_default() gives the values below; 0 in a field means the
// default too.
typedef struct {
    size_t max_text;        // bytes of grammar text (default 1 MiB)
    size_t max_elements;    // automaton positions after expansion (default 1<<20)
    size_t max_depth;       // nesting of groups in the text (default 64)
    size_t max_repeat;      // m and n of {m,n} (default 10000)
    size_t max_stacks;      // live stacks of a matcher after any byte (default 4096); the
                            // expansion of the stacks for one byte takes at most 16x as many steps
    size_t max_stack_depth; // positions on one stack, and rules entered in a row without reading
                            // a byte (default 4096)
    size_t max_cache_bytes; // a GrammarMasker's caches: masks by stack suffix and the walk's automaton,
                            // half each (default 64 MiB)
    size_t max_mask_work;   // stacks advanced and made while computing one mask (default 1<<26:
                            // an ambiguous grammar's many stacks times the trie's nodes would
                            // otherwise hold the engine's step for seconds per token)
    double max_compile_ms;  // wall time of grammar_compile (default 1000)
} GrammarLimits;

GrammarLimits grammar_limits_default(void);

typedef struct Grammar Grammar;

// Compiles GBNF text (len bytes, need not be NUL-terminated) whose start rule
// is `root`. limits may be NULL (the defaults). Returns the grammar, or NULL
// with err set: "LINE:COL: what was expected" or the rule and the bound.
Grammar *grammar_compile(const char *text, size_t len, const GrammarLimits *limits,
                         GptError *err);
// One more holder of g (returned): a cache that outlives the request that
// compiled g (GrammarShare, engine.h). Thread-safe.
Grammar *grammar_ref(const Grammar *g);
// Drops one holder; the last frees. NULL-safe.
void grammar_free(Grammar *g);
// True when a and b are the same automaton with the same limits (two
// compilations of one text, or of texts that compile alike): a matcher of
// one is a matcher of the other, position for position, so they may share
// a GrammarMasker.
bool grammar_same(const Grammar *a, const Grammar *b);

// The number of automaton positions (for --stats and the bounds' tests).
size_t grammar_size(const Grammar *g);

// One sequence's position in the language: the set of live stacks.
typedef struct GrammarMatcher GrammarMatcher;

// A matcher at the start (nothing read). Returns NULL with err set on
// allocation failure or when the start already exceeds a bound.
GrammarMatcher *grammar_matcher_new(const Grammar *g, GptError *err);
// A matcher in the same state as m (for speculative drafts). NULL on failure.
GrammarMatcher *grammar_matcher_copy(const GrammarMatcher *m, GptError *err);
// Makes dst the state of src (same grammar). Returns 0 or -1 (allocation).
int grammar_matcher_assign(GrammarMatcher *dst, const GrammarMatcher *src, GptError *err);
void grammar_matcher_free(GrammarMatcher *m);

// Reads n bytes. Returns 0 when the automaton is alive after them; -1 when
// a byte cannot be read (the matcher is left as it was before the call, err
// set: "byte 0x7d at offset N is not allowed") or a bound is exceeded.
int grammar_matcher_feed(GrammarMatcher *m, const uint8_t *bytes, size_t n, GptError *err);
// True when the bytes read so far are a sentence of the language.
bool grammar_matcher_can_end(const GrammarMatcher *m);
// True when no further byte can be read (then can_end is true).
bool grammar_matcher_is_done(const GrammarMatcher *m);

// Whole-string match (tests, the schema converters' tests): 1 when s[0..n)
// is in the language, 0 when not, -1 on a bound or allocation (err set).
int grammar_match(const Grammar *g, const char *s, size_t n, GptError *err);

// The vocabulary as a trie of token byte strings. token_bytes[i] holds
// token i's bytes (token_len[i] of them; a token of length 0, such as
// <|endoftext|> given as empty, is never allowed by a mask: its id is the
// caller's end-of-text, see grammar_masker_fill). V tokens.
typedef struct GrammarVocab GrammarVocab;
GrammarVocab *grammar_vocab_new(const uint8_t *const *token_bytes, const size_t *token_len,
                                size_t V, GptError *err);
// The same, each token's bytes from bytes_of(ctx, id, &len) (NULL: none;
// read during the call only): no arrays of V made.
typedef const uint8_t *(*GrammarTokenBytes)(const void *ctx, size_t id, size_t *len);
GrammarVocab *grammar_vocab_new_from(GrammarTokenBytes bytes_of, const void *ctx, size_t V, GptError *err);
void grammar_vocab_free(GrammarVocab *v);
size_t grammar_vocab_size(const GrammarVocab *v);

// Mask words for a vocabulary of V: bit i of word i/64 is token i.
#define GRAMMAR_MASK_WORDS(V) (((V) + 63) / 64)

// Computes masks for one grammar over one vocabulary, caching them by state.
typedef struct GrammarMasker GrammarMasker;
// eos_id: the end-of-text token (-1: none), allowed exactly when the matcher
// can end. limits: for max_cache_bytes (NULL: the defaults).
GrammarMasker *grammar_masker_new(const Grammar *g, const GrammarVocab *v, int32_t eos_id,
                                  const GrammarLimits *limits, GptError *err);
void grammar_masker_free(GrammarMasker *mk);

// mask (GRAMMAR_MASK_WORDS(V) words) := the tokens whose whole byte string
// the matcher can read from its state (any tokenization, not only the
// canonical one), plus eos_id when it can end. Returns the number of allowed
// tokens (0: none, the caller's error), or -1 with err set on a bound.
long grammar_masker_fill(GrammarMasker *mk, const GrammarMatcher *m, uint64_t *mask,
                         GptError *err);

// Statistics of a masker: stack suffixes walked and served from the cache
// (a fill takes one per live stack), trie nodes visited, cache bytes,
// masks filled.
typedef struct {
    uint64_t computed, cached, nodes_visited;
    size_t cache_bytes;
    uint64_t fills;
} GrammarMaskerStats;
GrammarMaskerStats grammar_masker_stats(const GrammarMasker *mk);

#endif

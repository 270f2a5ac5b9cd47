/*
 * grammar_impl.h - the compiled form of a Grammar, shared by the compiler
 * (grammar.c), the matcher (grammar_match.c) and the masker
 * (grammar_mask.c and its parts), and the matcher's sets of stacks, which
 * the masker's automaton advances too. Not for users of the module: they
 * include grammar.h.
 */
#ifndef GPT_GRAMMAR_IMPL_H
#define GPT_GRAMMAR_IMPL_H

#include "grammar/grammar.h"

enum { EL_END = 0, EL_BYTES = 1, EL_RULE = 2 };

typedef struct {
    uint32_t type;   // EL_END, EL_BYTES (value: a class), EL_RULE (value: a rule)
    uint32_t value;
} GElem;

// A set of bytes: bit b of bits[b / 64].
typedef struct {
    uint64_t bits[4];
} GClass;

static inline int gclass_has(const GClass *c, unsigned b) { return (int)(c->bits[b >> 6] >> (b & 63)) & 1; }

struct Grammar {
    GElem *el;                // (n_el) every alternative, each ended by EL_END
    size_t n_el;
    uint32_t *alts;           // the first element of each live alternative
    uint32_t *rule_alt_start; // (n_rules + 1) rule r's alternatives: alts[start[r] .. start[r+1])
    size_t n_rules;
    char **names;             // (n_rules) for messages
    GClass *classes;          // (n_classes)
    size_t n_classes;
    uint32_t root;
    GrammarLimits lim;
    uint64_t hash;            // of the automaton and the limits (grammar_same)
    _Atomic size_t refs;      // holders (grammar_ref); freed by the last grammar_free
};

GrammarLimits grammar_limits_resolve(const GrammarLimits *in);

/* ---- sets of stacks (grammar_match.c says what they are) ---- */

typedef struct {
    uint32_t off, len;  // positions pool[off .. off+len), top last
    uint64_t hash;
} StackRef;

typedef struct {
    uint32_t *pool;
    size_t n_pool, cap_pool;
    StackRef *st;
    size_t n, cap;
} StackSet;

// A work buffer for stacks_expand: each level copies its stack (bounded by
// max_stack_depth) so that alternatives do not see each other's writes.
// steps counts the stacks_expand calls of one normalization (a byte read,
// or the start), bounded by EXPAND_STEPS: a rule reached through k nested
// optional rules continues k + 1 ways, so a run of n such elements has
// (k + 1)^n paths to the same stacks (("a"?)?){50}, with no byte read in
// between. The depth of its recursion is bounded by max_stack_depth on its
// own: a rule that ends its alternative replaces the stack's top instead of
// growing it, so the stack's length does not bound the recursion (a run of
// nullable elements recurses once per element).
typedef struct {
    uint32_t *buf;
    size_t n, cap;
    size_t steps;
} Work;
#define EXPAND_STEPS(g) (16 * (g)->lim.max_stacks)

static inline uint64_t hash_positions(const uint32_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static inline void stacks_clear(StackSet *s) {
    s->n_pool = 0;
    s->n = 0;
}

// It holds the empty stack: what was read is a sentence.
static inline int stacks_can_end(const StackSet *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->st[i].len == 0) return 1;
    return 0;
}

void stacks_free(StackSet *s);
// Adds the stack p[0..n) unless an equal one is there. 0, or -1 with err.
int stacks_add(StackSet *s, const uint32_t *p, size_t n, const GrammarLimits *lim, GptError *err);
int stacks_copy(StackSet *dst, const StackSet *src, GptError *err);
// Normalizes the stack w->buf[off .. off+n), which ends at w->n, into out.
int stacks_expand(const Grammar *g, StackSet *out, Work *w, size_t off, size_t n, size_t depth, GptError *err);
// out := the states of in after reading byte b. out is cleared first.
int stacks_advance(const Grammar *g, const StackSet *in, unsigned b, StackSet *out, Work *w, GptError *err);
// The bytes any stack of s can read next (a union of top classes).
void stacks_first(const Grammar *g, const StackSet *s, GClass *c);

// The matcher's state (grammar_masker_fill reads it).
const StackSet *grammar_matcher_stacks(const GrammarMatcher *m);

#endif

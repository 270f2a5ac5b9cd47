/*
 * grammar_impl.h - the compiled form of a Grammar, shared by the compiler
 * (grammar.c) and the matcher and masker (grammar_match.c). Not for users
 * of the module: they include grammar.h.
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

#endif

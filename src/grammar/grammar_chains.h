/*
 * grammar_chains.h - counted repetitions (X{m,n}) and runs of equal
 * elements, found in a compiled grammar (grammar_chains.c): each position
 * moved to a representative that reads every string of up to rho bytes
 * alike, so that the masker (grammar_mask.c) walks a repetition once
 * instead of once per count. Not for users of the module: they include
 * grammar.h.
 */
#ifndef GPT_GRAMMAR_CHAINS_H
#define GPT_GRAMMAR_CHAINS_H

#include "grammar/grammar_impl.h"

typedef struct {
    // for each position its representative (itself when none) and the bytes
    // rho within which the two read alike (UINT32_MAX: itself); both NULL
    // when the grammar has nothing to move
    uint32_t *pos, *rem;
    uint32_t *key;  // (cap_key) a key moved to its representatives (chains_move)
    size_t cap_key;
} Chains;

// c := the grammar's chains and runs (c zeroed before). 0, or -1: out of memory.
int chains_find(Chains *c, const Grammar *g);
void chains_free(Chains *c);

// Position p's representative.
static inline uint32_t chains_rep(const Chains *c, uint32_t p) { return c->pos ? c->pos[p] : p; }

// c->key := the key p[0..n) moved, each position to its representative, and
// *least := the least rho of its positions (UINT32_MAX: none moves; so
// when the grammar has no chains, and then c->key is not written).
// 0, or -1: out of memory. p may be c->key.
int chains_move(Chains *c, const uint32_t *p, size_t n, uint32_t *least);

#endif

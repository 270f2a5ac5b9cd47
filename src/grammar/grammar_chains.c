/*
 * grammar_chains.c - counted repetitions, found by their shape (Chains,
 * grammar_chains.h).
 *
 * X{m,n} compiles to m copies of X and then n - m nested rules
 * opt_k ::= X opt_{k-1} | "" (opt_1 ::= X | ""; grammar.c). Each count
 * would make a new key of the masker's cache and a cold walk of nearly the
 * whole trie (a maxLength string, a regex's word count). Two kinds of
 * positions are moved to a representative, each with rho, a byte count
 * within which the two read alike (ml: a lower bound on the bytes of a
 * string X derives, minlen_el):
 *   - a chain is any such nest of rules whose X is the same element,
 *     found by shape whoever wrote it. opt_k's rest derives X^c for c <= k,
 *     so a position inside the copy of opt_j (its X, or the return to
 *     opt_{j-1}) and the same place in the chain's top opt_K (K >= j)
 *     differ only in the copies they allow after it: j - 1 against K - 1.
 *     A string of L bytes read (or popped after) from the top's touches at
 *     most (L - 1) / max(ml, 1) + 1 copies past the current one (a copy
 *     that reads no byte can be left out: opt_{k-1} derives a subset of
 *     opt_k), and every string read from opt_j is read from opt_K; so rho
 *     = (j - 2) * max(ml, 1) + 1, moved for j >= 3.
 *   - a run of m equal elements X in one alternative (the m copies), ml >=
 *     1: from its (i+1)-th element, m - i copies of at least ml bytes come
 *     before anything after the run, so a string of at most (m - i) * ml -
 *     1 bytes stays inside the run, as it does from the first: rho = that,
 *     with the first as the representative.
 * A suffix key's positions moved alike (chains_move) read every string of
 * at most rho bytes alike, rho the least of the moved positions': the same
 * tokens of at most rho bytes, the same pops at trie depths up to rho. So
 * the key's entry is the moved key's for those, and only deeper trie
 * nodes need a walk of the key's own (grammar_mask.c, suffix_entry): a
 * chain's top is walked once instead of once per count.
 */
#include "grammar/grammar_chains.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

// Rule r has the shape of a counted repetition's link: two alternatives,
// one empty and one `x r'` (*down := r') or `x` (*down := -1), x one
// element. *xpos := the position of x.
static int chain_shape(const Grammar *g, uint32_t r, uint32_t *xpos, int64_t *down) {
    if (g->rule_alt_start[r + 1] - g->rule_alt_start[r] != 2) return 0;
    uint32_t a0 = g->alts[g->rule_alt_start[r]], a1 = g->alts[g->rule_alt_start[r] + 1], p;
    if (g->el[a0].type != EL_END && g->el[a1].type == EL_END) p = a0;
    else if (g->el[a0].type == EL_END && g->el[a1].type != EL_END) p = a1;
    else return 0;
    if (g->el[p + 1].type == EL_END) *down = -1;
    else if (g->el[p + 1].type == EL_RULE && g->el[p + 2].type == EL_END) *down = g->el[p + 1].value;
    else return 0;
    *xpos = p;
    return 1;
}

// A lower bound on the bytes of any string an element derives (the least
// is what a lower bound is safe for: it makes rho smaller, chains_find).
// A rule under way (a cycle through bytes) and recursion past depth 256
// count 0; a bound found under such an assumption stays a lower bound.
#define ML_UNKNOWN UINT32_MAX
#define ML_BUSY (UINT32_MAX - 1)
#define ML_CAP (1u << 20)
static uint32_t minlen_rule(const Grammar *g, uint32_t r, uint32_t *memo, int depth);
static uint32_t minlen_el(const Grammar *g, GElem e, uint32_t *memo, int depth) {
    return e.type == EL_BYTES ? 1 : e.type == EL_RULE ? minlen_rule(g, e.value, memo, depth + 1) : 0;
}
static uint32_t minlen_rule(const Grammar *g, uint32_t r, uint32_t *memo, int depth) {
    if (memo[r] == ML_BUSY || depth > 256) return 0;
    if (memo[r] != ML_UNKNOWN) return memo[r];
    memo[r] = ML_BUSY;
    uint32_t best = ML_CAP;
    for (uint32_t a = g->rule_alt_start[r]; a < g->rule_alt_start[r + 1]; a++)
        if (g->el[g->alts[a]].type == EL_END) best = 0;  // an empty alternative: no recursion
    for (uint32_t a = g->rule_alt_start[r]; a < g->rule_alt_start[r + 1] && best; a++) {
        uint32_t sum = 0;
        for (uint32_t p = g->alts[a]; g->el[p].type != EL_END && sum < best; p++) {
            sum += minlen_el(g, g->el[p], memo, depth);
            if (sum > ML_CAP) sum = ML_CAP;
        }
        if (sum < best) best = sum;
    }
    memo[r] = best;
    return best;
}


// Makes pos and rem (each position itself, no bound) for n positions. -1: memory.
static int chain_maps(Chains *c, size_t n) {
    if (c->pos) return 0;
    c->pos = malloc(n * sizeof *c->pos);
    c->rem = malloc(n * sizeof *c->rem);
    if (!c->pos || !c->rem) return -1;
    for (size_t i = 0; i < n; i++) {
        c->pos[i] = (uint32_t)i;
        c->rem[i] = UINT32_MAX;
    }
    return 0;
}

// chains_find's arrays, one entry per rule.
typedef struct {
    uint32_t *delta;  // 0 not seen, UINT32_MAX not a chain, else the copies it allows
    uint32_t *xpos;   // a chain rule's X (chain_shape)
    uint32_t *path, *top;
    int64_t *up;      // the rule whose down it is: -1 none, -2 more than one
    uint8_t *mark;
    uint32_t *ml;     // minlen_rule's memo
} ChainScan;

// Each rule's delta (the copies of X it allows, as the depth of its nest
// of links) and xpos: down the links from each rule, the rules passed
// take their depths from where the walk stopped.
static void chain_depths(const Grammar *g, ChainScan *s) {
    for (size_t r = 0; r < g->n_rules; r++) {
        size_t n = 0;
        uint32_t cur = (uint32_t)r, base;
        for (;;) {
            uint32_t xp, dxp;
            int64_t dn, ddn;
            if (s->delta[cur]) { base = s->delta[cur]; break; }
            if (s->mark[cur] || !chain_shape(g, cur, &xp, &dn)) { base = UINT32_MAX; break; }  // a cycle, or no chain
            s->mark[cur] = 1;
            s->path[n++] = cur;
            s->xpos[cur] = xp;
            if (dn < 0) { base = 0; break; }
            if (!chain_shape(g, (uint32_t)dn, &dxp, &ddn) || g->el[dxp].type != g->el[xp].type ||
                g->el[dxp].value != g->el[xp].value) {
                base = UINT32_MAX;
                break;
            }
            cur = (uint32_t)dn;
        }
        for (size_t i = n; i-- > 0;) {
            if (base != UINT32_MAX) base = base + 1 < UINT32_MAX ? base + 1 : UINT32_MAX;
            s->delta[s->path[i]] = base;
        }
    }
}

// Each chain rule's top: up while one rule leads down to it; a rule's
// top once known is kept (mark), so each rule is passed once.
static void chain_tops(const Grammar *g, ChainScan *s) {
    size_t R = g->n_rules;
    for (size_t r = 0; r < R; r++) s->up[r] = -1;
    for (size_t r = 0; r < R; r++) {
        if (s->delta[r] == UINT32_MAX || s->delta[r] < 2) continue;
        uint32_t dn = g->el[s->xpos[r] + 1].value;
        s->up[dn] = s->up[dn] == -1 ? (int64_t)r : -2;
    }
    memset(s->mark, 0, R);
    for (size_t r = 0; r < R; r++) {
        if (s->delta[r] == UINT32_MAX || s->delta[r] < 2 || s->mark[r]) continue;
        size_t n = 0;
        uint32_t t = (uint32_t)r;
        while (!s->mark[t] && s->up[t] >= 0) {
            s->path[n++] = t;
            t = (uint32_t)s->up[t];
        }
        uint32_t known = s->mark[t] ? s->top[t] : t;
        if (!s->mark[t]) {
            s->mark[t] = 1;
            s->top[t] = t;
        }
        for (size_t i = 0; i < n; i++) {
            s->mark[s->path[i]] = 1;
            s->top[s->path[i]] = known;
        }
    }
}

// Moves the positions of each chain rule below its top (delta >= 3) to the
// top's. -1: out of memory.
static int move_chains(Chains *c, const Grammar *g, ChainScan *s) {
    for (size_t r = 0; r < g->n_rules; r++) s->ml[r] = ML_UNKNOWN;
    for (size_t r = 0; r < g->n_rules; r++) {
        if (s->delta[r] == UINT32_MAX || s->delta[r] < 3 || s->top[r] == r) continue;
        // j - 1 = delta - 1 copies after the current: rho = (j - 2) * minlen + 1
        // (a string of L bytes touches at most (L - 1) / minlen + 1 copies past the current)
        uint64_t x = minlen_el(g, g->el[s->xpos[r]], s->ml, 0), rho = (uint64_t)(s->delta[r] - 2) * (x ? x : 1) + 1;
        if (chain_maps(c, g->n_el)) return -1;
        for (uint32_t o = 0; o < 2; o++) {  // X, and the return to the rule below
            c->pos[s->xpos[r] + o] = s->xpos[s->top[r]] + o;
            c->rem[s->xpos[r] + o] = rho < UINT32_MAX ? (uint32_t)rho : UINT32_MAX - 1;
        }
    }
    return 0;
}

// Runs of equal elements in an alternative: from the (i+1)-th of m, m - i
// copies of at least minlen bytes each come before anything after the
// run. ml: minlen_rule's memo. -1: out of memory.
static int move_runs(Chains *c, const Grammar *g, uint32_t *ml) {
    for (size_t a = 0; a < (size_t)g->rule_alt_start[g->n_rules]; a++) {
        for (uint32_t p = g->alts[a]; g->el[p].type != EL_END;) {
            uint32_t q = p + 1;
            while (g->el[q].type == g->el[p].type && g->el[q].value == g->el[p].value) q++;
            uint64_t x = q - p >= 2 ? minlen_el(g, g->el[p], ml, 0) : 0;
            if (x) {
                if (chain_maps(c, g->n_el)) return -1;
                for (uint32_t i = p + 1; i < q; i++) {
                    uint64_t rho = (uint64_t)(q - i) * x - 1;
                    c->pos[i] = p;
                    c->rem[i] = rho < UINT32_MAX ? (uint32_t)rho : UINT32_MAX - 1;
                }
            }
            p = q;
        }
    }
    return 0;
}

int chains_find(Chains *c, const Grammar *g) {
    size_t R = g->n_rules ? g->n_rules : 1;
    ChainScan s = {calloc(R, sizeof *s.delta), calloc(R, sizeof *s.xpos), malloc(R * sizeof *s.path),
                   malloc(R * sizeof *s.top), malloc(R * sizeof *s.up), calloc(R, 1), malloc(R * sizeof *s.ml)};
    int rc = -1;
    if (s.delta && s.xpos && s.path && s.top && s.up && s.mark && s.ml) {
        chain_depths(g, &s);
        chain_tops(g, &s);
        rc = move_chains(c, g, &s) || move_runs(c, g, s.ml) ? -1 : 0;
    }
    if (rc) chains_free(c);
    free(s.delta);
    free(s.xpos);
    free(s.path);
    free(s.top);
    free(s.up);
    free(s.mark);
    free(s.ml);
    return rc;
}

void chains_free(Chains *c) {
    free(c->pos);
    free(c->rem);
    free(c->key);
    memset(c, 0, sizeof *c);
}

int chains_move(Chains *c, const uint32_t *p, size_t n, uint32_t *least) {
    *least = UINT32_MAX;
    if (!c->pos) return 0;
    if (grow_array(&c->key, &c->cap_key, n, sizeof *c->key)) return -1;
    for (size_t i = 0; i < n; i++) {
        c->key[i] = c->pos[p[i]];  // p may be c->key: the rho read is the moved position's then
        if (c->rem[p[i]] < *least) *least = c->rem[p[i]];
    }
    return 0;
}

/*
 * grammar_mask.c - the token masks (grammar.h: GrammarMasker): the tokens
 * whose whole byte string a matcher can read from its state. This file is
 * the walk and the fill; the four parts they use are each a file with its
 * own struct, and this comment is their map: the trie (grammar_trie.c),
 * the mask cache (grammar_cache.c), counted repetitions (grammar_chains.c)
 * and the lazy automaton (grammar_dfa.c).
 *
 * Masks: the vocabulary is a trie of the tokens' byte strings (the trie:
 * grammar_trie.c, GrammarVocab). From a state, a depth-first walk reads
 * each edge's byte into the state of its parent node; an edge whose byte
 * no top class holds is dead with its whole subtree (pruned at the first
 * byte), and every token that ends at a live node is allowed.
 *
 * Napkin (the bound): a walk visits at most the trie's nodes, which are at
 * most the vocabulary's total bytes (GPT-2: 50,257 tokens, ~330K bytes,
 * ~260K nodes); a state inside a JSON string keeps nearly all of them, a
 * state before a key or a number prunes all but a few hundred at the first
 * byte. At a few ns a node a full walk is ~1 ms, above a small model's
 * step (0.6 ms on the demo model), so most masks must come from a cache and
 * a walk's per-node cost must not grow with the stacks.
 *
 * Three mechanisms over the trie make that so:
 *   - the mask cache, by stack suffix (xgrammar's idea; grammar_cache.c,
 *     MaskCache): the mask of a set of stacks is the union of its stacks'
 *     masks. A stack's tokens are those read whole by its suffix alone
 *     (its top, or the top few positions), which do not depend on what
 *     lies below, plus, below each trie node where the suffix's last frame
 *     has ended (a "pop"), the walk of that subtree from the stack below
 *     the suffix, which is the real context (continue_pops). A token read
 *     exactly to the pop is allowed in every context: every alternative
 *     the compiler keeps derives a string, so the stack below continues.
 *     Of a pop's edges only those whose byte the stack below reads can
 *     continue, and a word, a number or a name pops after each of its
 *     bytes while what follows it reads a space, a quote or a comma: an
 *     entry keeps only those edges, and is keyed by the suffix's positions
 *     and the bytes the stack below reads (the first bytes of its
 *     normalized stacks). It costs V/8 bytes of mask (6.3 KB for GPT-2)
 *     + 4 per suffix position + 8 per kept edge + 88. The suffix starts as
 *     the top alone and grows by one position for a top whose pops,
 *     continued, visit more than DEEPEN_NODES nodes, or whose walk records
 *     more than DEEPEN_NODES pops with such an edge (either is given up at
 *     once for the longer key, in the same fill): a character class inside
 *     a string, where the key must hold the string's frame, so that only a
 *     closing quote pops. A position's suffix length is learned once for
 *     all the copies of a counted repetition (stack_mask).
 *   - counted repetitions (grammar_chains.c, Chains): X{m,n} (m copies,
 *     then n - m nested optional rules, grammar.c) would make every count a
 *     new key and a cold walk of nearly the whole trie (a maxLength string,
 *     a regex's word count). A key is moved to its repetition's
 *     representative (the chain's top, the run's first copy), which reads
 *     every string of at most rho bytes alike; the key's entry takes the
 *     representative's tokens and pops no deeper than rho (a length compare
 *     per token: from_moved) and walks only the trie's subtrees deeper than
 *     rho itself (each node knows its subtree's height). The entry is an
 *     ordinary one (the same bytes); the representative's entry is one
 *     more, once per repetition.
 *   - a lazy DFA for the walks themselves (grammar_dfa.c, Dfa): a state is
 *     a set of stacks, and its transition on a byte is computed once
 *     (stacks_advance) and kept, so a walk through states seen before costs
 *     a table look-up per node whatever the number of stacks. 1 KiB of
 *     transitions plus 4 bytes per stack position and 16 per stack per
 *     state. A subtree whose byte classes a state reads whole is allowed
 *     without a walk (walk_dfa).
 * The suffix entries take at most half of max_cache_bytes (emptied when
 * they would pass it), the automaton the other half (emptied at the start
 * of a fill once near its half; past it in a walk, the walk goes on over
 * the stacks themselves: walk_below). Results never depend on what the
 * caches hold: a mask is a function of the matcher's state. The work bound
 * (max_mask_work) counts what each walk would cost with nothing kept:
 * each transition it takes, once, whether computed or kept, and each
 * suffix entry's walk (with its representative's) whether served or
 * computed. So it does not depend on the caches either: a mask refused by
 * a new masker is refused by one that has served others. (Two things
 * still learn: a position's suffix length, and past the automaton's
 * memory bound, a walk on the stacks charges every node. Both give the
 * same mask; the work counted can differ.)
 *
 * A walk's parameters and what it took are a Walk, made by the one who
 * starts it: a suffix's walk (suffix_entry) records its pops and may skip
 * the subtrees its representative answered; a walk below the pops
 * (continue_pops) may give up after DEEPEN_NODES nodes.
 */
#include "grammar/grammar_cache.h"
#include "grammar/grammar_chains.h"
#include "grammar/grammar_dfa.h"
#include "grammar/grammar_trie.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

// A suffix's pop edges (CacheEntry.pops): n pairs in e.
typedef struct {
    uint32_t *e;
    size_t n, cap;
} PopList;

struct GrammarMasker {
    const Grammar *g;
    const GrammarVocab *v;  // the trie
    int32_t eos;
    GrammarLimits lim;
    Chains chains;          // counted repetitions
    MaskCache cache;        // the suffixes' walks
    Dfa dfa;                // the walks' automaton
    uint16_t *key_depth;    // (g->n_el) the suffix length used for a stack with this top (0: 1),
                            // by its representative (chains_rep)
    // the stack under way: the stack below its suffix, normalized (below_of),
    // where its pops continue, and the bytes it reads (part of the key)
    StackSet below;
    GClass relevant;
    uint32_t relevant_classes;  // the byte classes that hold one of them
    // the walks' scratch
    StackSet *level;        // (max_len + 1) the stacks at each depth of a walk past the automaton's bound
    StackSet start;         // a suffix's walk starts here
    StackSet cont;          // the stack below after one byte, past the automaton's bound (continue_pops)
    Work w;
    uint64_t *tmp_mask;     // (W) a suffix's walk's mask before it is kept
    PopList pops;           // its pop edges before they are kept
    GrammarMaskerStats stats;
};

// A walk of the trie under way (walk_dfa, walk_below): its parameters, set
// by the one who starts it, and what it took.
typedef struct {
    uint64_t *mask;       // the tokens it reads whole go here
    PopList *pops;        // a suffix's walk: its pops with an edge the stack below reads go here; NULL: none
    size_t prune;         // subtrees no deeper than this are skipped: the representative's (suffix_entry)
    size_t pop_limit;     // more than this many pops kept give up (WALK_DEEPER); 0: none
    size_t n_relevant;    // the pops kept so far
    uint64_t node_limit;  // a walk past this stats.nodes_visited gives up (WALK_DEEPER); 0: none
    size_t work;          // the stack steps it took
    GptError *err;
} Walk;

// A walk that gives up: its suffix is too short (stack_mask).
#define WALK_DEEPER 1
// A stack whose pops visit more than this many trie nodes to continue
// (of ~260K for GPT-2) uses one more position of itself as its key from
// then on: its top's frame ends inside most tokens (a character of a
// string), so the key must hold the frame that does not (the string).
#define DEEPEN_NODES 2048
// A moved key's rho is at most this (the trie's heights are kept to 16 bits).
#define PRUNE_MAX 60000
// Where a subtree's tokens end (TrieNode.first_tok) is not known: the walk
// of a pop edge's child (continue_pops) knows no sibling after it.
#define SPAN_UNKNOWN UINT32_MAX

GrammarMasker *grammar_masker_new(const Grammar *g, const GrammarVocab *v, int32_t eos_id,
                                  const GrammarLimits *limits, GptError *err) {
    GrammarMasker *mk = calloc(1, sizeof *mk);
    if (!mk) return gpt_error(err, "grammar: out of memory"), NULL;
    mk->g = g;
    mk->v = v;
    mk->eos = eos_id;
    mk->lim = grammar_limits_resolve(limits ? limits : &g->lim);
    mk->level = calloc(v->max_len + 1, sizeof *mk->level);
    mk->tmp_mask = malloc(GRAMMAR_MASK_WORDS(v->V) * sizeof *mk->tmp_mask);
    mk->key_depth = calloc(g->n_el ? g->n_el : 1, sizeof *mk->key_depth);
    if (!mk->level || !mk->tmp_mask || !mk->key_depth ||
        cache_init(&mk->cache, GRAMMAR_MASK_WORDS(v->V), mk->lim.max_cache_bytes / 2) ||
        dfa_init(&mk->dfa, g, v, mk->lim.max_cache_bytes / 2, mk->lim.max_mask_work) || chains_find(&mk->chains, g)) {
        grammar_masker_free(mk);
        return gpt_error(err, "grammar: out of memory"), NULL;
    }
    return mk;
}

void grammar_masker_free(GrammarMasker *mk) {
    if (!mk) return;
    cache_free(&mk->cache);
    dfa_free(&mk->dfa);
    chains_free(&mk->chains);
    if (mk->level)
        for (size_t i = 0; i <= mk->v->max_len; i++) stacks_free(&mk->level[i]);
    free(mk->level);
    stacks_free(&mk->start);
    stacks_free(&mk->below);
    stacks_free(&mk->cont);
    free(mk->w.buf);
    free(mk->tmp_mask);
    free(mk->pops.e);
    free(mk->key_depth);
    free(mk);
}

GrammarMaskerStats grammar_masker_stats(const GrammarMasker *mk) {
    GrammarMaskerStats s = mk->stats;
    s.cache_bytes = mk->cache.bytes + mk->dfa.bytes;
    return s;
}

/* ---- the walk ---- */

// Keeps the edges out of a pop at trie node `node` (at depth, with
// children) whose byte the stack below reads (mk->relevant) in w->pops.
// 0, WALK_DEEPER when more than w->pop_limit pops have one, or -1 with err.
static int record_pop(GrammarMasker *mk, Walk *w, uint32_t node, size_t depth) {
    const TrieNode *t = &mk->v->nodes[node];
    PopList *pl = w->pops;
    size_t kept = pl->n;
    for (uint32_t e = t->first_edge; e < t->first_edge + t->n_edges; e++) {
        const TrieEdge *E = &mk->v->edges[e];
        if (!gclass_has(&mk->relevant, E->byte)) continue;
        if (grow_array(&pl->e, &pl->cap, 2 * pl->n + 2, sizeof *pl->e))
            return gpt_error(w->err, "grammar: out of memory");
        pl->e[2 * pl->n] = E->child;
        pl->e[2 * pl->n + 1] = (uint32_t)(depth + 1) << 8 | E->byte;
        pl->n++;
    }
    if (pl->n > kept && w->pop_limit && ++w->n_relevant > w->pop_limit) return WALK_DEEPER;
    return 0;
}

// The DFS of the trie below node (at depth bytes), in state cur, on the
// stacks themselves (past the automaton's memory bound): every token below
// whose bytes cur reads whole goes into w->mask; with w->pops, a child with
// children where a stack has emptied is recorded (record_pop).
static int walk_below(GrammarMasker *mk, Walk *w, uint32_t node, size_t depth, const StackSet *cur) {
    const GrammarVocab *v = mk->v;
    const TrieNode *t = &v->nodes[node];
    GClass first;
    stacks_first(mk->g, cur, &first);
    for (uint32_t e = t->first_edge; e < t->first_edge + t->n_edges; e++) {
        const TrieEdge *E = &v->edges[e];
        if (!gclass_has(&first, E->byte)) continue;  // the dead subtree, pruned at its first byte
        if (w->prune && depth + 1 + v->height[E->child] <= w->prune) continue;  // the representative's (suffix_entry)
        if (++mk->stats.nodes_visited > w->node_limit && w->node_limit) return WALK_DEEPER;
        StackSet *nx = &mk->level[depth + 1];
        if (stacks_advance(mk->g, cur, E->byte, nx, &mk->w, w->err)) return -1;
        // each stack read, and the stacks made, each compared with those before it
        if (mask_charge(&w->work, cur->n + nx->n * (nx->n + 1) / 2, mk->lim.max_mask_work, w->err)) return -1;
        if (nx->n == 0) continue;
        const TrieNode *c = &v->nodes[E->child];
        trie_allow_tokens(v, c, w->mask);
        if (!c->n_edges) continue;
        if (w->pops && depth + 1 > w->prune && stacks_can_end(nx)) {
            int rc = record_pop(mk, w, E->child, depth + 1);
            if (rc) return rc;
        }
        int rc = walk_below(mk, w, E->child, depth + 1, nx);
        if (rc) return rc;
    }
    return 0;
}

// The bits set in x (a popcount inline: the default build's target has
// no instruction for it, and __builtin_popcountll calls libgcc).
static inline uint32_t count_bits(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    return (uint32_t)((((x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full) * 0x0101010101010101ull) >> 56);
}

// mask |= the tokens toks[lo .. hi) (a subtree's) of at most max_len bytes
// (all of them when all_short).
static void allow_span(const GrammarVocab *v, uint32_t lo, uint32_t hi, size_t max_len, int all_short,
                       uint64_t *mask) {
    const uint32_t *toks = v->toks;
    const uint16_t *len = v->len_at;
    if (all_short) {
        for (uint32_t k = lo; k < hi; k++) mask[toks[k] >> 6] |= 1ull << (toks[k] & 63);
    } else {
        for (uint32_t k = lo; k < hi; k++)
            mask[toks[k] >> 6] |= (uint64_t)(len[k] <= max_len) << (toks[k] & 63);
    }
}

// walk_below's work through the automaton: the same DFS from state id, each
// transition computed once for all walks; past the automaton's bound the
// subtree is walked on the stacks themselves (walk_below).
// tok_end: where node's subtree's tokens end in toks (or SPAN_UNKNOWN).
static int walk_dfa(GrammarMasker *mk, Walk *w, uint32_t node, uint32_t tok_end, size_t depth, int32_t id) {
    const GrammarVocab *v = mk->v;
    const TrieNode *t = &v->nodes[node];
    GClass first = mk->dfa.ds[id].first;
    for (uint32_t e = t->first_edge; e < t->first_edge + t->n_edges; e++) {
        const TrieEdge *E = &v->edges[e];
        // the child's subtree's tokens end where its next sibling's begin
        uint32_t child_end = e + 1 < t->first_edge + t->n_edges ? v->nodes[E[1].child].first_tok : tok_end;
        if (!gclass_has(&first, E->byte)) continue;  // the dead subtree, pruned at its first byte
        if (w->prune && depth + 1 + v->height[E->child] <= w->prune) continue;  // the representative's (suffix_entry)
        if (++mk->stats.nodes_visited > w->node_limit && w->node_limit) return WALK_DEEPER;
        int32_t nx = dfa_next(&mk->dfa, id, E->byte, &w->work, w->err);
        if (nx == D_ERR) return -1;
        if (nx == D_DEAD) continue;
        const TrieNode *c = &v->nodes[E->child];
        if (!c->n_edges) {
            trie_allow_tokens(v, c, w->mask);
            continue;
        }
        // a subtree whose bytes' classes the state reads to its depth, in
        // any order, is allowed whole without a walk; one whose classes it
        // reads to a depth and then none of them, up to that depth. (A
        // suffix's walk keeps no pop edge in the first: the tokens below
        // such an edge are the subtree's, all allowed already; nor in the
        // second where the stack below reads none of its classes.) Tried
        // where the subtree's tokens are at least the class steps the proof
        // may take: a thinner subtree is walked for less
        uint32_t classes = E->below, need = v->height[E->child], upto;
        if (nx >= 0 && child_end != SPAN_UNKNOWN && v->max_len <= UINT16_MAX &&  // (heights and lengths whole)
            child_end - c->first_tok >= need * count_bits(classes)) {
            int shown = dfa_reads_upto(&mk->dfa, nx, classes, need, &upto, &w->work, w->err);
            if (shown < 0) return -1;
            if (shown && (upto == need || !w->pops || !(classes & mk->relevant_classes))) {
                allow_span(v, c->first_tok, child_end, depth + 1 + upto, upto == need, w->mask);
                continue;
            }
        }
        trie_allow_tokens(v, c, w->mask);
        int can_end = nx == D_FULL ? stacks_can_end(&mk->dfa.next) : mk->dfa.ds[nx].can_end;
        if (w->pops && depth + 1 > w->prune && can_end) {
            int rc = record_pop(mk, w, E->child, depth + 1);
            if (rc) return rc;
        }
        int rc;
        if (nx == D_FULL)
            rc = stacks_copy(&mk->level[depth + 1], &mk->dfa.next, w->err)
                     ? -1
                     : walk_below(mk, w, E->child, depth + 1, &mk->level[depth + 1]);
        else
            rc = walk_dfa(mk, w, E->child, child_end, depth + 1, nx);
        if (rc) return rc;
    }
    return 0;
}

/* ---- a stack's tokens ---- */

// mk->tmp_mask and mk->pops |= the representative's entry e's tokens and
// pops no deeper than rho, which the moved key reads alike (grammar_chains.c).
static int from_moved(GrammarMasker *mk, const CacheEntry *e, size_t rho, GptError *err) {
    // its mask's tokens no longer than rho: the long ones cleared from a
    // copy, or the short ones taken into the empty mask, whichever are
    // fewer (the ids by length, longest first)
    const GrammarVocab *v = mk->v;
    size_t W = GRAMMAR_MASK_WORDS(v->V);
    size_t n_long = rho < v->max_len ? v->n_longer[rho] : 0;
    if (n_long <= v->V - n_long) {
        memcpy(mk->tmp_mask, e->mask, W * sizeof *mk->tmp_mask);
        for (size_t i = 0; i < n_long; i++) mk->tmp_mask[v->longest[i] >> 6] &= ~(1ull << (v->longest[i] & 63));
    } else {
        for (size_t i = n_long; i < v->V; i++)
            mk->tmp_mask[v->longest[i] >> 6] |= e->mask[v->longest[i] >> 6] & 1ull << (v->longest[i] & 63);
    }
    // a pop at depth <= rho: an edge whose child is at most rho + 1 deep
    PopList *pl = &mk->pops;
    if (grow_array(&pl->e, &pl->cap, 2 * e->n_pops + 2, sizeof *pl->e)) return gpt_error(err, "grammar: out of memory");
    for (size_t i = 0; i < e->n_pops; i++)
        if (e->pops[2 * i + 1] >> 8 <= rho + 1) {
            pl->e[2 * pl->n] = e->pops[2 * i];
            pl->e[2 * pl->n + 1] = e->pops[2 * i + 1];
            pl->n++;
        }
    return 0;
}

// out := the walk of the suffix p[0..n) (its top a byte position) before
// the bytes mk->relevant, from the cache or computed (and kept when it
// fits). out's arrays are the cache's or the masker's scratch: valid until
// the next call. 0; WALK_DEEPER when its walk records more than pop_limit
// pops (0: no limit), out->work the work it took; or -1 with err.
static int suffix_entry(GrammarMasker *mk, const uint32_t *p, size_t n, size_t pop_limit, CacheEntry *out,
                        GptError *err) {
    uint64_t h = cache_hash(p, n, &mk->relevant);
    const CacheEntry *e = cache_find(&mk->cache, h, p, n, &mk->relevant);
    if (e) {
        mk->stats.cached++;
        *out = *e;
        return 0;
    }
    // the key moved to its representatives (grammar_chains.c), and rho
    uint32_t least;
    if (chains_move(&mk->chains, p, n, &least)) return gpt_error(err, "grammar: out of memory");
    size_t rho = least == UINT32_MAX ? 0 : least < PRUNE_MAX ? least : PRUNE_MAX;
    CacheEntry moved = {0};
    if (rho) {
        int rc = suffix_entry(mk, mk->chains.key, n, pop_limit, &moved, err);  // its key moves no further
        if (rc) {
            out->work = moved.work;
            return rc;
        }
        if (moved.mask == mk->tmp_mask) rho = 0;  // not kept (over the bound): walk the key whole
    }
    memset(mk->tmp_mask, 0, GRAMMAR_MASK_WORDS(mk->v->V) * sizeof *mk->tmp_mask);
    mk->pops.n = 0;
    if (rho && from_moved(mk, &moved, rho, err)) return -1;
    // the rest: the deeper nodes, walked from the key itself
    Walk w = {.mask = mk->tmp_mask, .pops = &mk->pops, .prune = rho, .pop_limit = pop_limit, .err = err};
    stacks_clear(&mk->start);
    if (stacks_add(&mk->start, p, n, &mk->g->lim, err)) return -1;
    dfa_begin_walk(&mk->dfa);
    int32_t id = dfa_state(&mk->dfa, &mk->start, err);
    int rc = id == D_ERR    ? -1
             : id == D_FULL ? walk_below(mk, &w, 0, 0, &mk->start)
                            : walk_dfa(mk, &w, 0, (uint32_t)mk->v->V, 0, id);
    if (rc) {
        out->work = w.work;
        return rc;
    }
    mk->stats.computed++;
    // its work includes the representative's, whether walked now or
    // before: the bound does not depend on what the cache holds
    *out = (CacheEntry){h, (uint32_t *)p, n, mk->relevant, mk->tmp_mask, mk->pops.e, mk->pops.n, w.work + moved.work};
    e = cache_keep(&mk->cache, out);
    if (e) *out = *e;
    return 0;
}

// mk->below := the stack under the suffix p[0 .. k - d), as the matcher
// continues it once the suffix's last frame ends (stacks_advance), and
// mk->relevant := the bytes it reads. 0, or -1 with err.
static int below_of(GrammarMasker *mk, const uint32_t *p, size_t k, size_t d, GptError *err) {
    stacks_clear(&mk->below);
    mk->w.steps = 0;
    if (grow_array(&mk->w.buf, &mk->w.cap, k - d, sizeof *mk->w.buf)) return gpt_error(err, "grammar: out of memory");
    memcpy(mk->w.buf, p, (k - d) * sizeof *p);
    mk->w.n = k - d;
    if (stacks_expand(mk->g, &mk->below, &mk->w, 0, k - d, 0, err)) return -1;
    stacks_first(mk->g, &mk->below, &mk->relevant);
    mk->relevant_classes = 0;
    for (unsigned b = 0; b < 256; b++)
        if (gclass_has(&mk->relevant, b)) mk->relevant_classes |= 1u << mk->v->byte_class[b];
    return 0;
}

// w->mask |= the walks below the pops of entry e from mk->below (its
// context), through the pop edges whose byte it reads. 0; WALK_DEEPER when
// they visit more than w->node_limit nodes (then the key is too short: a
// character of a string whose pops each continue the string); or -1 with
// err.
static int continue_pops(GrammarMasker *mk, Walk *w, const CacheEntry *e) {
    dfa_begin_walk(&mk->dfa);
    int32_t id = dfa_state(&mk->dfa, &mk->below, w->err);
    if (id == D_ERR) return -1;
    for (size_t i = 0; i < e->n_pops; i++) {
        uint32_t child = e->pops[2 * i], depth = e->pops[2 * i + 1] >> 8, b = e->pops[2 * i + 1] & 255;
        if (++mk->stats.nodes_visited > w->node_limit && w->node_limit) return WALK_DEEPER;
        int32_t nx;
        if (id == D_FULL) {  // past the automaton's bound: on the stacks, charged as walk_below charges a node
            if (stacks_advance(mk->g, &mk->below, b, &mk->cont, &mk->w, w->err) ||
                mask_charge(&w->work, mk->below.n + mk->cont.n * (mk->cont.n + 1) / 2, mk->lim.max_mask_work, w->err))
                return -1;
            nx = mk->cont.n ? D_FULL : D_DEAD;
        } else if ((nx = dfa_next(&mk->dfa, id, b, &w->work, w->err)) == D_ERR ||
                   (nx == D_FULL && stacks_copy(&mk->cont, &mk->dfa.next, w->err))) {  // the automaton filled up here
            return -1;
        }
        if (nx == D_DEAD) continue;
        const TrieNode *c = &mk->v->nodes[child];
        trie_allow_tokens(mk->v, c, w->mask);
        int rc = !c->n_edges    ? 0
                 : nx == D_FULL ? walk_below(mk, w, child, depth, &mk->cont)
                                : walk_dfa(mk, w, child, SPAN_UNKNOWN, depth, nx);
        if (rc) return rc;
    }
    return 0;
}

// mask |= the tokens the stack p[0..k) reads whole: its suffix's cached
// tokens, and below each of the suffix's pops the walk of the stack under
// the suffix (the real context), only through the edges of the bytes it
// reads. *total: the fill's work so far.
static int stack_mask(GrammarMasker *mk, const uint32_t *p, size_t k, uint64_t *mask, size_t *total,
                      GptError *err) {
    size_t W = GRAMMAR_MASK_WORDS(mk->v->V), max = mk->lim.max_mask_work;
    uint32_t top = chains_rep(&mk->chains, p[k - 1]);  // one depth for a chain's copies
    size_t d = mk->key_depth[top] ? mk->key_depth[top] : 1;
    if (d > k) d = k;
    CacheEntry e;
    for (;;) {  // a key whose pops, continued, visit more than DEEPEN_NODES nodes is given up for a longer one
        for (;;) {  // a key whose walk pops at more than DEEPEN_NODES nodes that the stack below continues is
                    // given up for a longer one
            if (d < k ? below_of(mk, p, k, d, err)
                      : (memset(&mk->relevant, 0, sizeof mk->relevant), mk->relevant_classes = 0, 0))
                return -1;
            int rc = suffix_entry(mk, p + k - d, d, d < k && d < UINT16_MAX ? DEEPEN_NODES : 0, &e, err);
            if (rc < 0) return -1;
            if (rc == 0) break;
            if (mask_charge(total, e.work, max, err)) return -1;
            mk->key_depth[top] = (uint16_t)++d;
        }
        if (mask_charge(total, e.work, max, err)) return -1;
        for (size_t i = 0; i < W; i++) mask[i] |= e.mask[i];
        if (!e.n_pops || d == k) return 0;  // a whole stack that pops has accepted: nothing follows
        Walk w = {.mask = mask, .node_limit = d < UINT16_MAX ? mk->stats.nodes_visited + DEEPEN_NODES : 0, .err = err};
        int rc = continue_pops(mk, &w, &e);
        if (rc < 0 || mask_charge(total, w.work, max, err)) return -1;
        if (rc == 0) return 0;
        // given up: what it added is this stack's, and the longer key's adds the rest
        mk->key_depth[top] = (uint16_t)++d;
    }
}

long grammar_masker_fill(GrammarMasker *mk, const GrammarMatcher *m, uint64_t *mask, GptError *err) {
    size_t W = GRAMMAR_MASK_WORDS(mk->v->V);
    memset(mask, 0, W * sizeof *mask);
    size_t total = 0;
    const StackSet *s = grammar_matcher_stacks(m);
    if (mk->dfa.bytes > mk->lim.max_cache_bytes / 2 - mk->lim.max_cache_bytes / 8)  // near its bound
        dfa_clear(&mk->dfa);
    for (size_t i = 0; i < s->n; i++)
        if (s->st[i].len && stack_mask(mk, s->pool + s->st[i].off, s->st[i].len, mask, &total, err)) return -1;
    // the walks' masks may hold the end token where its bytes are read: it
    // is allowed by the state alone
    if (mk->eos >= 0 && (size_t)mk->eos < mk->v->V) {
        mask[mk->eos >> 6] &= ~(1ull << (mk->eos & 63));
        if (stacks_can_end(s)) mask[mk->eos >> 6] |= 1ull << (mk->eos & 63);
    }
    mk->stats.fills++;
    long n = 0;
    for (size_t i = 0; i < W; i++) n += (long)count_bits(mask[i]);
    return n;
}

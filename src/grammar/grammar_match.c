/*
 * grammar_match.c - a Grammar's matcher over bytes, the vocabulary trie and
 * the token masks (grammar.h).
 *
 * A matcher's state is a set of stacks. A stack is a list of positions in
 * the grammar's elements, its top last; a normalized stack's top is an
 * EL_BYTES element (the next byte it can read), and the empty stack has
 * accepted. Normalizing (expand) replaces a top EL_RULE by its return
 * position (unless that is EL_END) and one stack per alternative of the
 * rule, until every top is a byte (llama.cpp's advance_stack). Reading byte
 * b keeps the stacks whose top class holds b, each with its top advanced,
 * normalized again; equal stacks are kept once. The grammar has no left
 * recursion (grammar.c refuses it), so expansion ends.
 *
 * Masks: the vocabulary is a trie of the tokens' byte strings. From a
 * state, a depth-first walk reads each edge's byte into the state of its
 * parent node; an edge whose byte no top class holds is dead with its whole
 * subtree (pruned at the first byte), and every token that ends at a live
 * node is allowed.
 *
 * Napkin (the bound): a walk visits at most the trie's nodes, which are at
 * most the vocabulary's total bytes (GPT-2: 50,257 tokens, ~330K bytes,
 * ~260K nodes); a state inside a JSON string keeps nearly all of them, a
 * state before a key or a number prunes all but a few hundred at the first
 * byte. At a few ns a node a full walk is ~1 ms, above a small model's
 * step (0.6 ms on the demo model), so most masks must come from a cache and
 * a walk's per-node cost must not grow with the stacks.
 *
 * Two caches make that so:
 *   - by stack suffix (xgrammar's idea): the mask of a set of stacks is the
 *     union of its stacks' masks. A stack's tokens are those read whole by
 *     its suffix alone (its top, or the top few positions), which do not
 *     depend on what lies below, plus, below each trie node where the
 *     suffix's last frame has ended (a "pop"), the walk of that subtree
 *     from the stack below the suffix, which is the real context. A
 *     token read exactly to the pop is allowed in every context: every
 *     alternative the compiler keeps derives a string, so the stack below
 *     continues. Of a pop's edges only those whose byte the stack below
 *     reads can continue, and a word, a number or a name pops after each
 *     of its bytes while what follows it reads a space, a quote or a comma:
 *     an entry keeps only those edges, and is keyed by the suffix's
 *     positions and the bytes the stack below reads (the first bytes of
 *     its normalized stacks). It costs V/8 bytes of mask (6.3 KB for
 *     GPT-2) + 4 per suffix position + 8 per kept edge + 88. The suffix
 *     starts as the top alone and grows by one position for a top whose
 *     pops, continued, visit more than DEEPEN_NODES nodes, or whose walk
 *     records more than DEEPEN_NODES pops with such an edge (either is
 *     given up at once for the longer key, in the same fill): a character
 *     class inside a string, where the key must hold the string's frame,
 *     so that only a closing quote pops. A position's suffix length is
 *     learned once for all the copies of a counted repetition.
 *   - counted repetitions (X{m,n}: m copies, then n - m nested optional
 *     rules, grammar.c) would make every count a new key and a cold walk
 *     of nearly the whole trie (a maxLength string, a regex's word count).
 *     A key is moved to its repetition's representative (the chain's top,
 *     the run's first copy: chains_find), which reads every string of at
 *     most rho bytes alike; the key's entry takes the representative's
 *     tokens and pops no deeper than rho (a length compare per token) and
 *     walks only the trie's subtrees deeper than rho itself (each node
 *     knows its subtree's height). The entry is an ordinary one (the same
 *     bytes); the representative's entry is one more, once per repetition.
 *   - a lazy DFA for the walks themselves: a state is a set of stacks, and
 *     its transition on a byte is computed once (set_advance) and kept, so
 *     a walk through states seen before costs a table look-up per node
 *     whatever the number of stacks. 1 KiB of transitions plus 4 bytes per
 *     stack position and 16 per stack per state.
 * The suffix entries take at most half of max_cache_bytes (emptied when
 * they would pass it), the automaton the other half (emptied at the start
 * of a fill once near its half; past it in a walk, the walk goes on over
 * the stacks themselves). Results never depend on what the caches hold: a
 * mask is a function of the matcher's state. The work bound
 * (max_mask_work) counts what each walk would cost with nothing kept:
 * each transition it takes, once, whether computed or kept, and each
 * suffix entry's walk (with its representative's) whether served or
 * computed. So it does not depend on the caches either: a mask refused by
 * a new masker is refused by one that has served others. (Two things
 * still learn: a position's suffix length, and past the automaton's
 * memory bound, a walk on the stacks charges every node. Both give the
 * same mask; the work counted can differ.)
 */
#include "grammar/grammar_chains.h"
#include "grammar/grammar_trie.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/memory.h"

/* ---- sets of stacks ---- */

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

static void set_clear(StackSet *s) {
    s->n_pool = 0;
    s->n = 0;
}

static void set_free(StackSet *s) {
    free(s->pool);
    free(s->st);
    memset(s, 0, sizeof *s);
}

static uint64_t hash_positions(const uint32_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

// Adds the stack p[0..n) unless an equal one is there. 0, or -1 with err.
static int set_add(StackSet *s, const uint32_t *p, size_t n, const GrammarLimits *lim, GptError *err) {
    uint64_t h = hash_positions(p, n);
    for (size_t i = 0; i < s->n; i++)
        if (s->st[i].hash == h && s->st[i].len == n &&
            (n == 0 || memcmp(s->pool + s->st[i].off, p, n * sizeof *p) == 0))  // no pool for empty stacks
            return 0;
    if (s->n >= lim->max_stacks)
        return gpt_error(err, "grammar: more than %zu live stacks (the bound; the grammar is too ambiguous)",
                         lim->max_stacks);
    if (grow_array(&s->st, &s->cap, s->n + 1, sizeof *s->st) ||
        grow_array(&s->pool, &s->cap_pool, s->n_pool + n, sizeof *s->pool))
        return gpt_error(err, "grammar: out of memory");
    if (n) memcpy(s->pool + s->n_pool, p, n * sizeof *p);
    s->st[s->n++] = (StackRef){(uint32_t)s->n_pool, (uint32_t)n, h};
    s->n_pool += n;
    return 0;
}

static int set_copy(StackSet *dst, const StackSet *src, GptError *err) {
    set_clear(dst);
    if (grow_array(&dst->st, &dst->cap, src->n, sizeof *dst->st) ||
        grow_array(&dst->pool, &dst->cap_pool, src->n_pool, sizeof *dst->pool))
        return gpt_error(err, "grammar: out of memory");
    if (src->n) memcpy(dst->st, src->st, src->n * sizeof *src->st);
    if (src->n_pool) memcpy(dst->pool, src->pool, src->n_pool * sizeof *src->pool);
    dst->n = src->n;
    dst->n_pool = src->n_pool;
    return 0;
}

// A work buffer for expand: each level copies its stack (bounded by
// max_stack_depth) so that alternatives do not see each other's writes.
// steps counts the expand calls of one normalization (a byte read, or the
// start), bounded by EXPAND_STEPS: a rule reached through k nested
// optional rules continues k + 1 ways, so a run of n such elements has
// (k + 1)^n paths to the same stacks (("a"?)?){50}, with no byte read
// in between. The depth of expand's recursion is bounded by
// max_stack_depth on its own: a rule that ends its alternative replaces the
// stack's top instead of growing it, so the stack's length does not bound
// the recursion (a run of nullable elements recurses once per element).
typedef struct {
    uint32_t *buf;
    size_t n, cap;
    size_t steps;
} Work;
#define EXPAND_STEPS(g) (16 * (g)->lim.max_stacks)

// Normalizes the stack w->buf[off .. off+n), which ends at w->n, into out
// (see the file's comment). Each alternative gets its own copy above it,
// since expansion writes; offsets, not pointers, because the buffer grows.
static int expand(const Grammar *g, StackSet *out, Work *w, size_t off, size_t n, size_t depth, GptError *err) {
    if (++w->steps > EXPAND_STEPS(g))
        return gpt_error(err, "grammar: more than %zu expansion steps for one byte (the bound; the grammar is too "
                         "ambiguous)", EXPAND_STEPS(g));
    if (depth > g->lim.max_stack_depth)
        return gpt_error(err, "grammar: rules nested more than %zu deep without reading a byte (the bound)",
                         g->lim.max_stack_depth);
    if (n == 0 || g->el[w->buf[off + n - 1]].type == EL_BYTES)
        return set_add(out, w->buf + off, n, &g->lim, err);
    if (n + 1 > g->lim.max_stack_depth)
        return gpt_error(err, "grammar: a stack deeper than %zu positions (the bound)", g->lim.max_stack_depth);
    uint32_t top = w->buf[off + n - 1];
    uint32_t r = g->el[top].value;
    size_t base = w->n;
    if (grow_array(&w->buf, &w->cap, base + n + 1, sizeof *w->buf)) return gpt_error(err, "grammar: out of memory");
    for (uint32_t a = g->rule_alt_start[r]; a < g->rule_alt_start[r + 1]; a++) {
        uint32_t *q = w->buf + base;
        memcpy(q, w->buf + off, (n - 1) * sizeof *q);
        size_t m = n - 1;
        if (g->el[top + 1].type != EL_END) q[m++] = top + 1;
        uint32_t start = g->alts[a];
        if (g->el[start].type != EL_END) q[m++] = start;
        w->n = base + m;
        int rc = expand(g, out, w, base, m, depth + 1, err);
        w->n = base;
        if (rc) return -1;
    }
    return 0;
}

// out := the states of in after reading byte b. out is cleared first.
static int set_advance(const Grammar *g, const StackSet *in, unsigned b, StackSet *out, Work *w,
                       GptError *err) {
    set_clear(out);
    w->steps = 0;
    for (size_t i = 0; i < in->n; i++) {
        const StackRef *s = &in->st[i];
        if (s->len == 0) continue;
        const uint32_t *p = in->pool + s->off;
        uint32_t top = p[s->len - 1];
        if (!gclass_has(&g->classes[g->el[top].value], b)) continue;
        if (grow_array(&w->buf, &w->cap, s->len + 1, sizeof *w->buf)) return gpt_error(err, "grammar: out of memory");
        memcpy(w->buf, p, (s->len - 1) * sizeof *p);
        size_t m = s->len - 1;
        if (g->el[top + 1].type != EL_END) w->buf[m++] = top + 1;
        w->n = m;
        if (expand(g, out, w, 0, m, 0, err)) return -1;
    }
    return 0;
}

// The bytes any stack of s can read next (a union of top classes).
static void set_first(const Grammar *g, const StackSet *s, GClass *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < s->n; i++) {
        if (s->st[i].len == 0) continue;
        const GClass *t = &g->classes[g->el[s->pool[s->st[i].off + s->st[i].len - 1]].value];
        for (int k = 0; k < 4; k++) c->bits[k] |= t->bits[k];
    }
}

static int set_can_end(const StackSet *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->st[i].len == 0) return 1;
    return 0;
}

/* ---- matcher ---- */

struct GrammarMatcher {
    const Grammar *g;
    StackSet cur, next;
    Work w;
};

GrammarMatcher *grammar_matcher_new(const Grammar *g, GptError *err) {
    GrammarMatcher *m = calloc(1, sizeof *m);
    if (!m) return gpt_error(err, "grammar: out of memory"), NULL;
    m->g = g;
    // the root's alternatives, each a stack of its first position
    for (uint32_t a = g->rule_alt_start[g->root]; a < g->rule_alt_start[g->root + 1]; a++) {
        uint32_t pos = g->alts[a];
        size_t n = 0;
        if (grow_array(&m->w.buf, &m->w.cap, 1, sizeof *m->w.buf)) {
            grammar_matcher_free(m);
            return gpt_error(err, "grammar: out of memory"), NULL;
        }
        if (g->el[pos].type != EL_END) m->w.buf[n++] = pos;
        m->w.n = n;
        if (expand(g, &m->cur, &m->w, 0, n, 0, err)) {
            grammar_matcher_free(m);
            return NULL;
        }
    }
    return m;
}

GrammarMatcher *grammar_matcher_copy(const GrammarMatcher *src, GptError *err) {
    GrammarMatcher *m = calloc(1, sizeof *m);
    if (!m) return gpt_error(err, "grammar: out of memory"), NULL;
    m->g = src->g;
    if (set_copy(&m->cur, &src->cur, err)) {
        grammar_matcher_free(m);
        return NULL;
    }
    return m;
}

int grammar_matcher_assign(GrammarMatcher *dst, const GrammarMatcher *src, GptError *err) {
    dst->g = src->g;
    return set_copy(&dst->cur, &src->cur, err);
}

void grammar_matcher_free(GrammarMatcher *m) {
    if (!m) return;
    set_free(&m->cur);
    set_free(&m->next);
    free(m->w.buf);
    free(m);
}

// Reads n bytes: 0 alive, 1 dead at a byte (m unchanged, *at its offset),
// -1 a bound or memory (m unchanged, err set).
static int feed(GrammarMatcher *m, const uint8_t *bytes, size_t n, size_t *at, GptError *err) {
    if (n == 0) return 0;
    StackSet save = {0};
    if (set_copy(&save, &m->cur, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        int rc = set_advance(m->g, &m->cur, bytes[i], &m->next, &m->w, err);
        if (rc == 0 && m->next.n == 0) {
            *at = i;
            rc = 1;
        }
        if (rc) {
            StackSet t = m->cur;
            m->cur = save;
            set_free(&t);
            return rc;
        }
        StackSet t = m->cur;
        m->cur = m->next;
        m->next = t;
    }
    set_free(&save);
    return 0;
}

int grammar_matcher_feed(GrammarMatcher *m, const uint8_t *bytes, size_t n, GptError *err) {
    size_t at = 0;
    int rc = feed(m, bytes, n, &at, err);
    if (rc == 1) return gpt_error(err, "grammar: byte 0x%02x at offset %zu is not allowed", bytes[at], at);
    return rc;
}

bool grammar_matcher_can_end(const GrammarMatcher *m) { return set_can_end(&m->cur); }

bool grammar_matcher_is_done(const GrammarMatcher *m) {
    for (size_t i = 0; i < m->cur.n; i++)
        if (m->cur.st[i].len != 0) return false;
    return m->cur.n > 0;
}

int grammar_match(const Grammar *g, const char *s, size_t n, GptError *err) {
    GrammarMatcher *m = grammar_matcher_new(g, err);
    if (!m) return -1;
    size_t at;
    int rc = feed(m, (const uint8_t *)s, n, &at, err);
    int ok = rc == 0 ? grammar_matcher_can_end(m) : rc == 1 ? 0 : -1;
    grammar_matcher_free(m);
    return ok;
}

/* ---- masks ---- */

// A stack suffix's walk: the tokens read whole from the suffix alone (a
// token read up to the point where the suffix's last frame ends is read
// whole in every context: the grammar's alternatives all derive a string,
// so the stack below continues), and the trie nodes with children at which
// the suffix has popped: below them the context decides.
typedef struct {
    uint64_t hash;
    uint32_t *key;     // (key_len) the suffix's positions, top last
    size_t key_len;
    GClass below;      // part of the key: the bytes the stack below the suffix reads
    uint64_t *mask;    // (GRAMMAR_MASK_WORDS(V)) NULL: a free slot
    // the edges out of the trie nodes where the suffix popped whose byte
    // the stack below reads: pairs (child, its depth << 8 | the byte). The
    // others are never walked (most pops of a word or a number continue
    // only with bytes of the word or number), so they are not kept.
    uint32_t *pops;
    size_t n_pops;     // edges
    size_t work;       // the stack steps its walk took (charged on every use)
} CacheEntry;

// A state of the walk's automaton. 1.2 KiB (its transitions, 1 KiB) plus its stacks.
typedef struct {
    StackSet set;
    uint64_t hash;
    GClass first;        // the bytes it can read
    int can_end;         // it holds the empty stack
    int32_t next[256];   // D_UNKNOWN, D_DEAD or the state after the byte
    uint64_t walk;       // the last walk that took a transition from here (GrammarMasker.walk)
    uint64_t charged[4]; // the bytes whose transitions that walk was charged for
    // class_target's answers in walk class_walk (kept a walk, so that each
    // walk takes, and is charged for, the transitions it asks of)
    uint64_t class_walk, class_known;
    int32_t class_to[N_BYTE_CLASSES];
    uint64_t alike_known, alike;  // the classes whose bytes all go to one state (or none)
    uint32_t dead, dead_known;    // the classes of which it reads no byte
} DState;
#define D_UNKNOWN (-1)
#define D_DEAD (-2)
#define D_FULL (-3)  // not made: the automaton is at its memory bound
#define D_ERR (-4)

struct GrammarMasker {
    const Grammar *g;
    const GrammarVocab *v;
    int32_t eos;
    GrammarLimits lim;
    StackSet *level;   // (max_len + 1) the state at each depth of a walk
    StackSet start;    // a suffix's walk starts here
    StackSet below;    // the stack below a suffix, normalized: where its pops continue
    Work w;
    CacheEntry *cache; // open addressing, n_slots (a power of two)
    size_t n_slots, n_used, cache_bytes;
    // the entries' masks, keys and pops, one after another (emptied with
    // the cache): reserved address space on huge pages, since a fresh 4 KiB
    // page is a fault (microseconds on a virtual machine) and a one-process
    // run's masks are mostly new (docs/performance.md)
    unsigned char *store;
    size_t store_used, store_cap;
    void *reserved;      // the cache's table and its store
    uint64_t *tmp_mask;  // (W) the walk's mask before it is kept
    uint32_t *pops;      // the walk's pop edges (CacheEntry) before they are kept
    size_t n_pops, cap_pops;
    GClass relevant;     // the bytes the stack below a suffix reads: the pop edges kept
    uint32_t relevant_classes;  // the byte classes that hold one of them
    size_t n_relevant;   // pops with such an edge in the walk under way
    StackSet cont;       // the stack below after one byte, past the automaton's bound (stack_mask)
    uint16_t *key_depth; // (g->n_el) the suffix length used for a stack with this top (0: 1),
                         // by its representative (chains_rep)
    int record;          // the walk is a suffix's: record its pops
    Chains chains;       // counted repetitions (grammar_chains.c)
    size_t prune;        // a derived walk's (suffix_entry): subtrees no deeper than this are skipped
    size_t pop_limit;    // a suffix walk with more pops than this that the stack below
                         // continues (a child in relevant) gives up (WALK_DEEPER); 0: none
    // the walk's automaton, made as it is walked (a lazy DFA): a state is a
    // set of stacks, its transition on a byte computed once (set_advance)
    DState *ds;          // (cap_ds) reserved whole: the states that fit in the automaton's bound
    size_t n_ds, cap_ds, ds_bytes;
    int32_t *dslot;      // (n_dslots, a power of two) states by hash, -1 free
    size_t n_dslots;
    StackSet dnext;      // a transition being computed
    GrammarMaskerStats stats;
    size_t work;         // stack steps of the walk under way
    uint64_t walk;       // the walk under way, numbered: a transition is charged once a walk (dfa_next)
    uint64_t node_limit; // a walk past this nodes_visited gives up (WALK_DEEPER); 0: none
};

// Cache slots: a table of this many, emptied when half full or past
// max_cache_bytes.
#define MASK_SLOTS 4096
// A stack whose pops visit more than this many trie nodes to continue
// (of ~260K for GPT-2) uses one more position of itself as its key from
// then on: its top's frame ends inside most tokens (a character of a
// string), so the key must hold the frame that does not (the string).
#define DEEPEN_NODES 2048

GrammarMasker *grammar_masker_new(const Grammar *g, const GrammarVocab *v, int32_t eos_id,
                                  const GrammarLimits *limits, GptError *err) {
    GrammarMasker *mk = calloc(1, sizeof *mk);
    if (!mk) return gpt_error(err, "grammar: out of memory"), NULL;
    mk->g = g;
    mk->v = v;
    mk->eos = eos_id;
    mk->lim = grammar_limits_resolve(limits ? limits : &g->lim);
    mk->level = calloc(v->max_len + 1, sizeof *mk->level);
    mk->n_slots = MASK_SLOTS;
    mk->tmp_mask = malloc(GRAMMAR_MASK_WORDS(v->V) * sizeof *mk->tmp_mask);
    mk->key_depth = calloc(g->n_el ? g->n_el : 1, sizeof *mk->key_depth);
    // the table, then the store, in one reservation (zero-filled: the table starts empty)
    size_t table = (mk->n_slots * sizeof *mk->cache + 63) & ~(size_t)63;
    mk->store_cap = mk->lim.max_cache_bytes / 2;
    mk->reserved = memory_reserve(table + mk->store_cap);
    mk->cache = mk->reserved ? (CacheEntry *)mk->reserved : NULL;
    mk->store = mk->reserved ? (unsigned char *)mk->reserved + table : NULL;
    if (mk->store) memory_poison(mk->store, mk->store_cap);  // its entries are made usable as they are kept
    mk->cap_ds = mk->lim.max_cache_bytes / 2 / sizeof(DState) + 1;
    mk->ds = memory_reserve(mk->cap_ds * sizeof(DState));
    if (!mk->level || !mk->cache || !mk->tmp_mask || !mk->key_depth || !mk->store || !mk->ds ||
        chains_find(&mk->chains, g)) {
        grammar_masker_free(mk);
        return gpt_error(err, "grammar: out of memory"), NULL;
    }
    return mk;
}

static void cache_clear(GrammarMasker *mk) {
    memset(mk->cache, 0, mk->n_slots * sizeof *mk->cache);
    mk->n_used = 0;
    mk->cache_bytes = 0;
    memory_poison(mk->store, mk->store_used);
    mk->store_used = 0;
}

static void dfa_clear(GrammarMasker *mk) {
    for (size_t i = 0; i < mk->n_ds; i++) set_free(&mk->ds[i].set);
    mk->n_ds = 0;
    mk->ds_bytes = 0;
    if (mk->dslot)
        for (size_t i = 0; i < mk->n_dslots; i++) mk->dslot[i] = -1;
}

void grammar_masker_free(GrammarMasker *mk) {
    if (!mk) return;
    if (mk->store) memory_unpoison(mk->store, mk->store_cap);  // poisoned past its kept entries
    memory_release(mk->reserved, (mk->n_slots * sizeof *mk->cache + 63) / 64 * 64 + mk->store_cap);
    if (mk->level)
        for (size_t i = 0; i <= mk->v->max_len; i++) set_free(&mk->level[i]);
    free(mk->level);
    set_free(&mk->start);
    set_free(&mk->below);
    free(mk->w.buf);
    free(mk->tmp_mask);
    free(mk->pops);
    set_free(&mk->cont);
    free(mk->key_depth);
    chains_free(&mk->chains);
    dfa_clear(mk);
    memory_release(mk->ds, mk->cap_ds * sizeof(DState));
    free(mk->dslot);
    set_free(&mk->dnext);
    free(mk);
}

GrammarMaskerStats grammar_masker_stats(const GrammarMasker *mk) {
    GrammarMaskerStats s = mk->stats;
    s.cache_bytes = mk->cache_bytes + mk->ds_bytes;
    return s;
}

// A suffix walk that gives up: its key is too short (stack_mask).
#define WALK_DEEPER 1

// Keeps the edges out of a pop at trie node `node` (at depth, with
// children) whose byte the stack below reads (mk->relevant) in mk->pops.
// 0, WALK_DEEPER when more than pop_limit pops have one, or -1 with err.
static int record_pop(GrammarMasker *mk, uint32_t node, size_t depth, GptError *err) {
    const TrieNode *t = &mk->v->nodes[node];
    size_t kept = mk->n_pops;
    for (uint32_t e = t->first_edge; e < t->first_edge + t->n_edges; e++) {
        const TrieEdge *E = &mk->v->edges[e];
        if (!gclass_has(&mk->relevant, E->byte)) continue;
        if (grow_array(&mk->pops, &mk->cap_pops, 2 * mk->n_pops + 2, sizeof *mk->pops))
            return gpt_error(err, "grammar: out of memory");
        mk->pops[2 * mk->n_pops] = E->child;
        mk->pops[2 * mk->n_pops + 1] = (uint32_t)(depth + 1) << 8 | E->byte;
        mk->n_pops++;
    }
    if (mk->n_pops > kept && mk->pop_limit && ++mk->n_relevant > mk->pop_limit) return WALK_DEEPER;
    return 0;
}

// The DFS of the trie below node (at depth bytes), in state cur, on the
// stacks themselves (past the automaton's memory bound): every
// token below whose bytes cur reads whole goes into mask. With mk->record,
// a child with children where a stack has emptied is kept in mk->pops.
static int walk_below(GrammarMasker *mk, uint32_t node, size_t depth, const StackSet *cur, uint64_t *mask,
                      GptError *err) {
    const GrammarVocab *v = mk->v;
    const TrieNode *t = &v->nodes[node];
    GClass first;
    set_first(mk->g, cur, &first);
    for (uint32_t e = t->first_edge; e < t->first_edge + t->n_edges; e++) {
        const TrieEdge *E = &v->edges[e];
        if (!gclass_has(&first, E->byte)) continue;  // the dead subtree, pruned at its first byte
        if (mk->prune && depth + 1 + v->height[E->child] <= mk->prune) continue;  // the moved key's (suffix_entry)
        if (++mk->stats.nodes_visited > mk->node_limit && mk->node_limit) return WALK_DEEPER;
        StackSet *nx = &mk->level[depth + 1];
        if (set_advance(mk->g, cur, E->byte, nx, &mk->w, err)) return -1;
        // each stack read, and the stacks made, each compared with those before it
        mk->work += cur->n + nx->n * (nx->n + 1) / 2;
        if (mk->work > mk->lim.max_mask_work)
            return gpt_error(err, "grammar: one token mask took more than %zu stack steps (the bound; the grammar "
                                  "is too ambiguous)", mk->lim.max_mask_work);
        if (nx->n == 0) continue;
        const TrieNode *c = &v->nodes[E->child];
        trie_allow_tokens(mk->v, c, mask);
        if (!c->n_edges) continue;
        if (mk->record && depth + 1 > mk->prune && set_can_end(nx)) {
            int rc = record_pop(mk, E->child, depth + 1, err);
            if (rc) return rc;
        }
        int rc = walk_below(mk, E->child, depth + 1, nx, mask, err);
        if (rc) return rc;
    }
    return 0;
}

static uint64_t set_hash(const StackSet *s) {
    uint64_t h = 1469598103934665603ull ^ s->n;
    for (size_t i = 0; i < s->n; i++) h = (h ^ s->st[i].hash) * 1099511628211ull;
    return h;
}

static int set_equal(const StackSet *a, const StackSet *b) {
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const StackRef *x = &a->st[i], *y = &b->st[i];
        if (x->hash != y->hash || x->len != y->len ||
            (x->len && memcmp(a->pool + x->off, b->pool + y->off, x->len * sizeof *a->pool)))
            return 0;
    }
    return 1;
}

// The automaton's state for the stacks s: found, or made (a copy). D_FULL
// when it would pass the automaton's share of max_cache_bytes (half), D_ERR
// with err set.
static int32_t dfa_state(GrammarMasker *mk, const StackSet *s, GptError *err) {
    uint64_t h = set_hash(s);
    if (mk->n_dslots) {
        for (size_t i = (size_t)h & (mk->n_dslots - 1);; i = (i + 1) & (mk->n_dslots - 1)) {
            int32_t id = mk->dslot[i];
            if (id < 0) break;
            if (mk->ds[id].hash == h && set_equal(&mk->ds[id].set, s)) return id;
        }
    }
    size_t bytes = sizeof(DState) + s->n * sizeof(StackRef) + s->n_pool * sizeof(uint32_t) + 2 * sizeof(int32_t);
    if (mk->ds_bytes + bytes > mk->lim.max_cache_bytes / 2 || mk->n_ds >= INT32_MAX / 2) return D_FULL;
    if (2 * (mk->n_ds + 1) > mk->n_dslots) {  // the table doubles, every state placed again
        size_t n = mk->n_dslots ? 2 * mk->n_dslots : 1024;
        int32_t *t = malloc(n * sizeof *t);
        if (!t) return gpt_error(err, "grammar: out of memory"), D_ERR;
        for (size_t i = 0; i < n; i++) t[i] = -1;
        for (size_t k = 0; k < mk->n_ds; k++) {
            size_t i = (size_t)mk->ds[k].hash & (n - 1);
            while (t[i] >= 0) i = (i + 1) & (n - 1);
            t[i] = (int32_t)k;
        }
        free(mk->dslot);
        mk->dslot = t;
        mk->n_dslots = n;
    }
    if (mk->n_ds >= mk->cap_ds) return D_FULL;
    DState *d = &mk->ds[mk->n_ds];
    memset(&d->set, 0, sizeof d->set);
    if (set_copy(&d->set, s, err)) {
        set_free(&d->set);
        return D_ERR;
    }
    d->hash = h;
    set_first(mk->g, s, &d->first);
    d->can_end = set_can_end(s);
    memset(d->next, 0xff, sizeof d->next);  // D_UNKNOWN
    d->walk = 0;  // walks are numbered from 1
    memset(d->charged, 0, sizeof d->charged);
    d->class_walk = 0;
    d->alike_known = d->alike = 0;
    d->dead = d->dead_known = 0;
    size_t i = (size_t)h & (mk->n_dslots - 1);
    while (mk->dslot[i] >= 0) i = (i + 1) & (mk->n_dslots - 1);
    mk->dslot[i] = (int32_t)mk->n_ds;
    mk->ds_bytes += bytes;
    return (int32_t)mk->n_ds++;
}

// The state after byte b from state id (which can read b): D_DEAD, a state,
// D_FULL (then mk->dnext holds the stacks), or D_ERR.
static int32_t dfa_next(GrammarMasker *mk, int32_t id, unsigned b, GptError *err) {
    int32_t nx = mk->ds[id].next[b];
    if (nx == D_UNKNOWN) {
        if (set_advance(mk->g, &mk->ds[id].set, b, &mk->dnext, &mk->w, err)) return D_ERR;
        nx = mk->dnext.n ? dfa_state(mk, &mk->dnext, err) : D_DEAD;
        if (nx == D_ERR) return D_ERR;
        if (nx != D_FULL) mk->ds[id].next[b] = nx;
    }
    // each stack read, and the stacks made, each compared with those before
    // it: charged once a walk, whether computed now or kept, so that the
    // bound counts what the walk would cost with nothing kept (a new
    // masker computes each transition once), whatever the automaton holds
    DState *d = &mk->ds[id];
    if (d->walk != mk->walk) {
        d->walk = mk->walk;
        memset(d->charged, 0, sizeof d->charged);
    }
    if (nx != D_FULL && (d->charged[b >> 6] >> (b & 63) & 1)) return nx;
    d->charged[b >> 6] |= 1ull << (b & 63);
    size_t made = nx == D_FULL ? mk->dnext.n : nx == D_DEAD ? 0 : mk->ds[nx].set.n;
    mk->work += d->set.n + made * (made + 1) / 2;
    if (mk->work > mk->lim.max_mask_work)
        return gpt_error(err, "grammar: one token mask took more than %zu stack steps (the bound; the grammar is too "
                              "ambiguous)", mk->lim.max_mask_work), D_ERR;
    return nx;
}

// How many of the bytes of class k c holds.
enum { RANGE_NONE, RANGE_SOME, RANGE_ALL };
static int gclass_holds(const GClass *c, const GClass *k) {
    int some = 0, all = 1;
    for (int w = 0; w < 4; w++) {
        some |= (c->bits[w] & k->bits[w]) != 0;
        all &= (c->bits[w] & k->bits[w]) == k->bits[w];
    }
    return all ? RANGE_ALL : some ? RANGE_SOME : RANGE_NONE;
}

// The state to which state id takes every byte of class k, when that is one
// state of the automaton; D_DEAD when not (a byte it cannot read, two
// states, or past the automaton's bound); D_ERR with err.
static int32_t class_target(GrammarMasker *mk, int32_t id, unsigned k, GptError *err) {
    DState *d = &mk->ds[id];
    if (d->class_walk != mk->walk) {
        d->class_walk = mk->walk;
        d->class_known = 0;
    }
    if (d->class_known >> k & 1) return d->class_to[k];
    // a transition depends only on which stacks' top classes hold the byte
    // (set_advance): when each holds all of the class or none of it, the
    // class's bytes go where its first byte goes
    const GClass *bytes = &mk->v->class_bytes[k];
    if (!(d->alike_known >> k & 1)) {  // a property of the state: found once
        int alike = gclass_holds(&d->first, bytes) == RANGE_ALL;
        for (size_t i = 0; i < d->set.n && alike; i++) {
            const StackRef *st = &d->set.st[i];
            if (st->len)
                alike = gclass_holds(&mk->g->classes[mk->g->el[d->set.pool[st->off + st->len - 1]].value], bytes) !=
                        RANGE_SOME;
        }
        d->alike_known |= 1ull << k;
        d->alike |= (uint64_t)alike << k;
    }
    int alike = d->alike >> k & 1;
    int32_t to = D_DEAD;
    if (alike) {
        to = dfa_next(mk, id, mk->v->class_first[k], err);  // may move mk->ds
        if (to == D_ERR) return D_ERR;
        if (to < 0) to = D_DEAD;
    }
    d = &mk->ds[id];
    if (to >= 0)  // the same transitions, known now
        for (unsigned b = 0; b < 256; b++)
            if (gclass_has(bytes, b)) d->next[b] = to;
    d->class_known |= 1ull << k;
    d->class_to[k] = to;
    return to;
}

// The classes of which state id reads no byte.
static uint32_t dead_classes(GrammarMasker *mk, int32_t id) {
    DState *d = &mk->ds[id];
    if (!d->dead_known) {  // a property of the state: found once
        for (unsigned k = 0; k < N_BYTE_CLASSES; k++)
            if (gclass_holds(&d->first, &mk->v->class_bytes[k]) == RANGE_NONE) d->dead |= 1u << k;
        d->dead_known = 1;
    }
    return d->dead;
}

// How many bytes of the classes `classes` state id reads, in any order, up
// to need: 1 and *upto = need when it reads every such string of up to need
// bytes (each step takes all those classes to one state; a state that
// returns to itself reads any length); 1 and *upto = r < need when it reads
// every such string of up to r bytes and none longer (after r, none of the
// classes); 0 when neither is shown; -1 with err. At most need * |classes|
// class_target calls.
static int reads_upto(GrammarMasker *mk, int32_t id, uint32_t classes, uint32_t need, uint32_t *upto,
                      GptError *err) {
    *upto = need;
    for (uint32_t step = 0; step < need; step++) {
        if (!(classes & ~dead_classes(mk, id))) {
            *upto = step;
            return 1;
        }
        int32_t to = D_DEAD;
        for (uint32_t c = classes; c; c &= c - 1) {
            int32_t t = class_target(mk, id, (unsigned)__builtin_ctz(c), err);
            if (t == D_ERR) return -1;
            if (t < 0 || (to >= 0 && t != to)) return 0;
            to = t;
        }
        if (to == id) return 1;
        id = to;
    }
    return 1;
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
static void allow_span(const GrammarMasker *mk, uint32_t lo, uint32_t hi, size_t max_len, int all_short,
                       uint64_t *mask) {
    const uint32_t *toks = mk->v->toks;
    const uint16_t *len = mk->v->len_at;
    if (all_short) {
        for (uint32_t k = lo; k < hi; k++) mask[toks[k] >> 6] |= 1ull << (toks[k] & 63);
    } else {
        for (uint32_t k = lo; k < hi; k++)
            mask[toks[k] >> 6] |= (uint64_t)(len[k] <= max_len) << (toks[k] & 63);
    }
}

// Where a subtree's tokens end (TrieNode.first_tok) is not known: the walk
// of a pop edge's child (continue_pops) knows no sibling after it.
#define SPAN_UNKNOWN UINT32_MAX

// walk's work through the automaton: the same DFS from state id, each
// transition computed once for all walks; past the automaton's bound the
// subtree is walked on the stacks themselves (walk).
// tok_end: where node's subtree's tokens end in toks (or SPAN_UNKNOWN).
static int walk_dfa(GrammarMasker *mk, uint32_t node, uint32_t tok_end, size_t depth, int32_t id, uint64_t *mask,
                    GptError *err) {
    const GrammarVocab *v = mk->v;
    const TrieNode *t = &v->nodes[node];
    GClass first = mk->ds[id].first;
    for (uint32_t e = t->first_edge; e < t->first_edge + t->n_edges; e++) {
        const TrieEdge *E = &v->edges[e];
        // the child's subtree's tokens end where its next sibling's begin
        uint32_t child_end = e + 1 < t->first_edge + t->n_edges ? v->nodes[E[1].child].first_tok : tok_end;
        if (!gclass_has(&first, E->byte)) continue;  // the dead subtree, pruned at its first byte
        if (mk->prune && depth + 1 + v->height[E->child] <= mk->prune) continue;  // the moved key's (suffix_entry)
        if (++mk->stats.nodes_visited > mk->node_limit && mk->node_limit) return WALK_DEEPER;
        int32_t nx = dfa_next(mk, id, E->byte, err);
        if (nx == D_ERR) return -1;
        if (nx == D_DEAD) continue;
        const TrieNode *c = &v->nodes[E->child];
        if (!c->n_edges) {
            trie_allow_tokens(mk->v, c, mask);
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
            int shown = reads_upto(mk, nx, classes, need, &upto, err);
            if (shown < 0) return -1;
            if (shown && (upto == need || !mk->record || !(classes & mk->relevant_classes))) {
                allow_span(mk, c->first_tok, child_end, depth + 1 + upto, upto == need, mask);
                continue;
            }
        }
        trie_allow_tokens(mk->v, c, mask);
        int can_end = nx == D_FULL ? set_can_end(&mk->dnext) : mk->ds[nx].can_end;
        if (mk->record && depth + 1 > mk->prune && can_end) {
            int rc = record_pop(mk, E->child, depth + 1, err);
            if (rc) return rc;
        }
        int rc;
        if (nx == D_FULL)
            rc = set_copy(&mk->level[depth + 1], &mk->dnext, err) ? -1
                 : walk_below(mk, E->child, depth + 1, &mk->level[depth + 1], mask, err);
        else
            rc = walk_dfa(mk, E->child, child_end, depth + 1, nx, mask, err);
        if (rc) return rc;
    }
    return 0;
}

// A walk from the stacks s at trie node `node`: through the automaton.
static int walk_from(GrammarMasker *mk, uint32_t node, size_t depth, const StackSet *s, uint64_t *mask,
                     GptError *err) {
    int32_t id = dfa_state(mk, s, err);
    if (id == D_ERR) return -1;
    if (id == D_FULL) return walk_below(mk, node, depth, s, mask, err);
    return walk_dfa(mk, node, node ? SPAN_UNKNOWN : (uint32_t)mk->v->V, depth, id, mask, err);
}

// A derived walk's rho is at most this (the trie's heights are kept to 16 bits).
#define PRUNE_MAX 60000

// out := the walk of the suffix p[0..n) (its top a byte position), from the
// cache or computed (and kept when it fits). out's arrays are the cache's
// or the masker's scratch: valid until the next call.
static int suffix_entry(GrammarMasker *mk, const uint32_t *p, size_t n, size_t pop_limit, CacheEntry *out,
                        GptError *err) {
    size_t W = GRAMMAR_MASK_WORDS(mk->v->V);
    uint64_t h = hash_positions(p, n);
    for (int i = 0; i < 4; i++) h = (h ^ mk->relevant.bits[i]) * 1099511628211ull;
    size_t slot = (size_t)h & (mk->n_slots - 1);
    while (mk->cache[slot].mask) {
        CacheEntry *c = &mk->cache[slot];
        if (c->hash == h && c->key_len == n && memcmp(c->key, p, n * sizeof *p) == 0 &&
            memcmp(&c->below, &mk->relevant, sizeof c->below) == 0) {
            mk->stats.cached++;
            *out = *c;
            return 0;
        }
        slot = (slot + 1) & (mk->n_slots - 1);
    }
    // the key moved to its chains' tops (chains_find), and rho
    size_t rho = 0, moved_work = 0;
    CacheEntry ce = {0};
    {
        uint32_t least;
        if (chains_move(&mk->chains, p, n, &least)) return gpt_error(err, "grammar: out of memory");
        rho = least == UINT32_MAX ? 0 : least < PRUNE_MAX ? least : PRUNE_MAX;
        if (rho) {
            int rc = suffix_entry(mk, mk->chains.key, n, pop_limit, &ce, err);  // its key moves no further
            if (rc) return rc;
            // its work is part of this entry's, whether it was walked now or
            // before: the bound does not depend on what the cache holds
            moved_work = ce.work;
            if (ce.mask == mk->tmp_mask) rho = 0;  // not kept (over the bound): walk the key whole
        }
    }
    memset(mk->tmp_mask, 0, W * sizeof *mk->tmp_mask);
    mk->n_pops = 0;
    if (rho) {  // the moved key's tokens and pops no deeper than rho
        // its mask's tokens no longer than rho: the long ones cleared from a
        // copy, or the short ones taken into the empty mask, whichever are
        // fewer (the ids by length, longest first)
        const GrammarVocab *v = mk->v;
        size_t n_long = rho < v->max_len ? v->n_longer[rho] : 0;
        if (n_long <= v->V - n_long) {
            memcpy(mk->tmp_mask, ce.mask, W * sizeof *mk->tmp_mask);
            for (size_t i = 0; i < n_long; i++) mk->tmp_mask[v->longest[i] >> 6] &= ~(1ull << (v->longest[i] & 63));
        } else {
            for (size_t i = n_long; i < v->V; i++)
                mk->tmp_mask[v->longest[i] >> 6] |= ce.mask[v->longest[i] >> 6] & 1ull << (v->longest[i] & 63);
        }
        // a pop at depth <= rho: an edge whose child is at most rho + 1 deep
        if (grow_array(&mk->pops, &mk->cap_pops, 2 * ce.n_pops + 2, sizeof *mk->pops))
            return gpt_error(err, "grammar: out of memory");
        for (size_t i = 0; i < ce.n_pops; i++)
            if (ce.pops[2 * i + 1] >> 8 <= rho + 1) {
                mk->pops[2 * mk->n_pops] = ce.pops[2 * i];
                mk->pops[2 * mk->n_pops + 1] = ce.pops[2 * i + 1];
                mk->n_pops++;
            }
    }
    set_clear(&mk->start);
    if (set_add(&mk->start, p, n, &mk->g->lim, err)) return -1;
    mk->work = 0;
    mk->walk++;
    mk->record = 1;
    mk->prune = rho;  // the rest: the deeper nodes, walked from the key itself
    mk->pop_limit = pop_limit;
    mk->n_relevant = 0;
    int rc = walk_from(mk, 0, 0, &mk->start, mk->tmp_mask, err);
    mk->prune = 0;
    mk->pop_limit = 0;
    if (rc) return rc;
    mk->work += moved_work;
    mk->stats.computed++;
    *out = (CacheEntry){h, NULL, n, mk->relevant, mk->tmp_mask, mk->pops, mk->n_pops, mk->work};
    // keep it: empty the cache first when it would pass its bound or its
    // table would be more than half full (the table does not grow)
    size_t bytes = W * sizeof *mk->tmp_mask + (n + 2 * mk->n_pops) * sizeof *p + sizeof(CacheEntry);
    if (bytes > mk->lim.max_cache_bytes / 2) return 0;
    if (mk->cache_bytes + bytes > mk->lim.max_cache_bytes / 2 || 2 * (mk->n_used + 1) > mk->n_slots) cache_clear(mk);
    // a free slot (the moved key's entry may have taken the one found above)
    for (slot = (size_t)h & (mk->n_slots - 1); mk->cache[slot].mask; slot = (slot + 1) & (mk->n_slots - 1)) {}
    // its mask, key and pops in the store (each entry's start 64-byte
    // aligned; what it holds is at most cache_bytes, which counts more per
    // entry than the alignment takes)
    size_t stored = (W * sizeof(uint64_t) + (n + 2 * mk->n_pops) * sizeof *p + 63) & ~(size_t)63;
    if (stored > mk->store_cap - mk->store_used) return 0;  // not kept; out is right
    uint64_t *m = (uint64_t *)(void *)(mk->store + mk->store_used);
    uint32_t *key = (uint32_t *)(void *)(m + W), *pops = key + n;
    memory_unpoison(m, W * sizeof *m + (n + 2 * mk->n_pops) * sizeof *p);
    mk->store_used += stored;
    memcpy(key, p, n * sizeof *p);
    if (mk->n_pops) memcpy(pops, mk->pops, 2 * mk->n_pops * sizeof *p);  // no pops: mk->pops may be NULL
    memcpy(m, mk->tmp_mask, W * sizeof *m);
    CacheEntry *c = &mk->cache[slot];
    *c = (CacheEntry){h, key, n, mk->relevant, m, pops, mk->n_pops, mk->work};
    mk->n_used++;
    mk->cache_bytes += bytes;
    *out = *c;
    return 0;
}

// The work of one fill, bounded by max_mask_work.
static int charge(GrammarMasker *mk, size_t *total, size_t work, GptError *err) {
    *total += work;
    if (*total > mk->lim.max_mask_work)
        return gpt_error(err, "grammar: one token mask took more than %zu stack steps (the bound; the grammar is "
                              "too ambiguous)", mk->lim.max_mask_work);
    return 0;
}

// mk->below := the stack under the suffix p[0 .. k - d), as the matcher
// continues it once the suffix's last frame ends (set_advance), and
// mk->relevant := the bytes it reads. 0, or -1 with err.
static int below_of(GrammarMasker *mk, const uint32_t *p, size_t k, size_t d, GptError *err) {
    set_clear(&mk->below);
    mk->w.steps = 0;
    if (grow_array(&mk->w.buf, &mk->w.cap, k - d, sizeof *mk->w.buf)) return gpt_error(err, "grammar: out of memory");
    memcpy(mk->w.buf, p, (k - d) * sizeof *p);
    mk->w.n = k - d;
    if (expand(mk->g, &mk->below, &mk->w, 0, k - d, 0, err)) return -1;
    set_first(mk->g, &mk->below, &mk->relevant);
    mk->relevant_classes = 0;
    for (unsigned b = 0; b < 256; b++)
        if (gclass_has(&mk->relevant, b)) mk->relevant_classes |= 1u << mk->v->byte_class[b];
    return 0;
}

// mask |= the walks below the pops of entry e from mk->below (its
// context), through the pop edges whose byte it reads. 0; WALK_DEEPER when
// give_up and they visit more than DEEPEN_NODES nodes (then the key is too
// short: a character of a string whose pops each continue the string); or
// -1 with err. mk->work holds the work.
static int continue_pops(GrammarMasker *mk, const CacheEntry *e, uint64_t *mask, int give_up, GptError *err) {
    const GrammarVocab *v = mk->v;
    mk->work = 0;
    mk->walk++;
    mk->record = 0;
    mk->node_limit = give_up ? mk->stats.nodes_visited + DEEPEN_NODES : 0;
    int32_t id = dfa_state(mk, &mk->below, err);
    int rc = id == D_ERR ? -1 : 0;
    for (size_t i = 0; i < e->n_pops && !rc; i++) {
        uint32_t child = e->pops[2 * i], depth = e->pops[2 * i + 1] >> 8, b = e->pops[2 * i + 1] & 255;
        if (++mk->stats.nodes_visited > mk->node_limit && mk->node_limit) {
            rc = WALK_DEEPER;
            break;
        }
        int32_t nx;
        if (id == D_FULL) {  // past the automaton's bound: on the stacks, charged as walk_below charges a node
            if (set_advance(mk->g, &mk->below, b, &mk->cont, &mk->w, err)) {
                rc = -1;
                break;
            }
            mk->work += mk->below.n + mk->cont.n * (mk->cont.n + 1) / 2;
            if (mk->work > mk->lim.max_mask_work) {
                rc = gpt_error(err, "grammar: one token mask took more than %zu stack steps (the bound; the "
                                    "grammar is too ambiguous)", mk->lim.max_mask_work);
                break;
            }
            nx = mk->cont.n ? D_FULL : D_DEAD;
        } else if ((nx = dfa_next(mk, id, b, err)) == D_ERR ||
                   (nx == D_FULL && set_copy(&mk->cont, &mk->dnext, err))) {  // D_FULL: the automaton filled up here
            rc = -1;
            break;
        }
        if (nx == D_DEAD) continue;
        const TrieNode *c = &v->nodes[child];
        trie_allow_tokens(mk->v, c, mask);
        if (c->n_edges)
            rc = nx == D_FULL ? walk_below(mk, child, depth, &mk->cont, mask, err)
                              : walk_dfa(mk, child, SPAN_UNKNOWN, depth, nx, mask, err);
    }
    mk->node_limit = 0;
    return rc;
}

// mask |= the tokens the stack p[0..k) reads whole: its suffix's cached
// tokens, and below each of the suffix's pops the walk of the stack under
// the suffix (the real context), only through the edges of the bytes it
// reads.
static int stack_mask(GrammarMasker *mk, const uint32_t *p, size_t k, uint64_t *mask, size_t *total,
                      GptError *err) {
    const GrammarVocab *v = mk->v;
    size_t W = GRAMMAR_MASK_WORDS(v->V);
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
            if (charge(mk, total, mk->work, err)) return -1;
            mk->key_depth[top] = (uint16_t)++d;
        }
        if (charge(mk, total, e.work, err)) return -1;
        for (size_t i = 0; i < W; i++) mask[i] |= e.mask[i];
        if (!e.n_pops || d == k) return 0;  // a whole stack that pops has accepted: nothing follows
        int rc = continue_pops(mk, &e, mask, d < UINT16_MAX, err);
        if (rc < 0 || charge(mk, total, mk->work, err)) return -1;
        if (rc == 0) return 0;
        // given up: what it added is this stack's, and the longer key's adds the rest
        mk->key_depth[top] = (uint16_t)++d;
    }
}

long grammar_masker_fill(GrammarMasker *mk, const GrammarMatcher *m, uint64_t *mask, GptError *err) {
    size_t W = GRAMMAR_MASK_WORDS(mk->v->V);
    memset(mask, 0, W * sizeof *mask);
    size_t total = 0;
    const StackSet *s = &m->cur;
    if (mk->ds_bytes > mk->lim.max_cache_bytes / 2 - mk->lim.max_cache_bytes / 8) dfa_clear(mk);  // near its bound
    for (size_t i = 0; i < s->n; i++)
        if (s->st[i].len && stack_mask(mk, s->pool + s->st[i].off, s->st[i].len, mask, &total, err)) return -1;
    if (mk->eos >= 0 && (size_t)mk->eos < mk->v->V) {  // by the state alone, whatever a walk read
        mask[mk->eos >> 6] &= ~(1ull << (mk->eos & 63));
        if (set_can_end(s)) mask[mk->eos >> 6] |= 1ull << (mk->eos & 63);
    }
    mk->stats.fills++;
    long n = 0;
    for (size_t i = 0; i < W; i++) n += (long)count_bits(mask[i]);
    return n;
}

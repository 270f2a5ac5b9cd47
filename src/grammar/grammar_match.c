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
#include "grammar/grammar_impl.h"

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

/* ---- the vocabulary trie ---- */

typedef struct {
    uint32_t first_edge, n_edges;  // edges[first_edge ..), sorted by byte
    // tokens ending here: toks[first_tok .. first_tok + n_tok). The nodes
    // are made in preorder from the sorted tokens, and a node's own tokens
    // sort before its descendants', so its subtree's tokens are
    // toks[first_tok ..) up to the next node's first_tok outside the
    // subtree (its next sibling's, or its parent's end): first_tok is set
    // where n_tok is 0 too
    uint32_t first_tok, n_tok;
} TrieNode;

typedef struct {
    uint32_t child;
    uint32_t byte : 8;
    uint32_t below : 24;  // the byte classes on the edges below child (bit k: class k)
} TrieEdge;

// Byte classes for the subtrees' summaries (TrieEdge.below): lowercase
// letters, uppercase, digits, the controls (0x00-0x1f, 0x7f), UTF-8
// continuation bytes (0x80-0xbf), lead bytes (0xc0-0xff), the space and
// the punctuation of JSON and of common text and code alone, the rest of
// the punctuation together: 24, to fit beside an edge's byte. An
// automaton's state often takes every byte of a class to one state (a
// string's character, a word's letter).
#define N_BYTE_CLASSES 24

struct GrammarVocab {
    size_t V;
    TrieNode *nodes;
    size_t n_nodes;
    TrieEdge *edges;
    uint32_t *toks;
    size_t max_len;
    uint16_t *height;   // (n_nodes) the depth of a node's deepest descendant less its own (at most 65535)
    uint16_t *len_at;   // (V) toks[k]'s length in bytes (at most 65535)
    void *block;        // the arrays above, one after another (grammar_vocab_new_from)
    size_t block_bytes;
    uint8_t byte_class[256];
    GClass class_bytes[N_BYTE_CLASSES];
    uint8_t class_first[N_BYTE_CLASSES];  // its least byte
    uint32_t *longest;  // (V) the token ids, longest first
    uint32_t *n_longer; // (max_len + 1) the tokens longer than L bytes: longest[0 .. n_longer[L])
};

// A token for sorting by bytes (then id).
typedef struct {
    const uint8_t *b;
    size_t len;
    uint32_t id;
} SortTok;

static int tok_cmp(const void *x, const void *y) {
    const SortTok *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->b, b->b, n) : 0;
    if (c) return c;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

// Sorts t[0..n), which agree on their first `depth` bytes, by bytes then
// id: a most-significant-byte radix pass per depth (stable, so tokens of
// equal bytes keep the id order they came in), small ranges by insertion.
// O(total bytes + 258 per range of 32 or more): GPT-2's vocabulary sorts in
// ~1 ms where qsort's comparisons took ~15 ms.
static void tok_sort(SortTok *t, SortTok *tmp, size_t n, size_t depth) {
    if (n < 32) {
        for (size_t i = 1; i < n; i++) {
            SortTok x = t[i];
            size_t j = i;
            for (; j > 0 && tok_cmp(&t[j - 1], &x) > 0; j--) t[j] = t[j - 1];
            t[j] = x;
        }
        return;
    }
    size_t start[258] = {0};  // bucket 0: tokens that end at depth; 1 + b: next byte b
    for (size_t i = 0; i < n; i++) start[(t[i].len == depth ? 0 : 1 + t[i].b[depth]) + 1]++;
    for (int k = 1; k < 258; k++) start[k] += start[k - 1];
    size_t at[257];
    memcpy(at, start, sizeof at);
    for (size_t i = 0; i < n; i++) tmp[at[t[i].len == depth ? 0 : 1 + t[i].b[depth]]++] = t[i];
    memcpy(t, tmp, n * sizeof *t);
    for (int k = 1; k < 257; k++)
        if (start[k + 1] - start[k] > 1) tok_sort(t + start[k], tmp, start[k + 1] - start[k], depth + 1);
}

// v's byte classes (N_BYTE_CLASSES, above).
static void byte_classes(GrammarVocab *v) {
    static const char alone[] = " \"\\.,:{}[]-'()/_+";  // 17 classes of one byte
    memset(v->class_bytes, 0, sizeof v->class_bytes);
    for (unsigned b = 0; b < 256; b++) {
        const char *a = b ? strchr(alone, (int)b) : NULL;
        unsigned k = b >= 'a' && b <= 'z'   ? 0
                     : b >= 'A' && b <= 'Z' ? 1
                     : b >= '0' && b <= '9' ? 2
                     : b < 0x20 || b == 0x7f ? 3
                     : b >= 0xc0            ? 5
                     : b >= 0x80            ? 4
                     : a                    ? 6 + (unsigned)(a - alone)
                                            : N_BYTE_CLASSES - 1;  // !#$%&*;<=>?@^`|~
        v->byte_class[b] = (uint8_t)k;
        v->class_bytes[k].bits[b >> 6] |= 1ull << (b & 63);
    }
    for (int k = 0; k < N_BYTE_CLASSES; k++) {
        unsigned b = 0;
        while (!gclass_has(&v->class_bytes[k], b)) b++;
        v->class_first[k] = (uint8_t)b;
    }
}

// The block's parts (one reservation: zero-filled, taken as touched, on
// huge pages where the kernel gives them; a fresh 4 KiB page is a fault).
static size_t part(size_t *at, size_t bytes) {
    size_t start = *at;
    *at += (bytes + 63) & ~(size_t)63;
    return start;
}

GrammarVocab *grammar_vocab_new_from(GrammarTokenBytes bytes_of, const void *ctx, size_t V, GptError *err) {
    if (V == 0 || V > INT32_MAX) return gpt_error(err, "grammar: vocabulary of %zu tokens", V), NULL;
    // the tokens to sort and the sort's scratch, in one allocation (2.4 MB
    // for GPT-2: on huge pages, a few faults instead of 600)
    GrammarVocab *v = calloc(1, sizeof *v);
    SortTok *t = V <= SIZE_MAX / (2 * sizeof *t) ? memory_alloc_large(2 * V * sizeof *t) : NULL;
    uint32_t *path = NULL;
    if (!v || !t) goto oom;
    v->V = V;
    size_t total = 0;  // the tokens' bytes: at most one node each, and the root
    for (size_t i = 0; i < V; i++) {
        size_t len = 0;
        const uint8_t *b = bytes_of(ctx, i, &len);
        if (!b) len = 0;
        t[i] = (SortTok){b, len, (uint32_t)i};
        if (len > v->max_len) v->max_len = len;
        if (len > SIZE_MAX / 64 - total - 1) goto oom;
        total += len;
    }
    if (total + 1 > UINT32_MAX) goto oom;
    // every array of the trie in one block, the nodes sized for the most
    // there can be (what is not touched takes no memory): 7 MB for GPT-2
    size_t cap = total + 1, at = 0, p_nodes = part(&at, cap * sizeof *v->nodes),
           p_edges = part(&at, cap * sizeof *v->edges), p_height = part(&at, cap * sizeof *v->height),
           p_toks = part(&at, V * sizeof *v->toks), p_len = part(&at, V * sizeof *v->len_at),
           p_longest = part(&at, V * sizeof *v->longest),
           p_longer = part(&at, (v->max_len + 1) * sizeof *v->n_longer);
    unsigned char *block = v->block = memory_reserve(at);
    if (!block) goto oom;
    v->block_bytes = at;
    v->nodes = (TrieNode *)(void *)(block + p_nodes);
    v->edges = (TrieEdge *)(void *)(block + p_edges);
    v->height = (uint16_t *)(void *)(block + p_height);
    v->toks = (uint32_t *)(void *)(block + p_toks);
    v->len_at = (uint16_t *)(void *)(block + p_len);
    v->longest = (uint32_t *)(void *)(block + p_longest);
    v->n_longer = (uint32_t *)(void *)(block + p_longer);
    tok_sort(t, t + V, V, 0);  // t came in id order
    // A node per distinct prefix: in byte order, a token's prefixes not
    // made yet are those past its common prefix with the token before it
    // (common[i], in the sort's scratch). So one pass counts the nodes and
    // each node's children, and a second, which makes the same nodes in
    // the same order (a parent before its children, children in byte
    // order), writes the edges.
    uint32_t *common = (uint32_t *)(void *)(t + V);
    size_t n_nodes = 1;
    for (size_t i = 0; i < V; i++) {
        v->toks[i] = t[i].id;
        v->len_at[i] = (uint16_t)(t[i].len > UINT16_MAX ? UINT16_MAX : t[i].len);
        size_t c = 0;
        if (i) {
            size_t m = t[i - 1].len < t[i].len ? t[i - 1].len : t[i].len;
            while (c < m && t[i - 1].b[c] == t[i].b[c]) c++;
        }
        common[i] = (uint32_t)c;
        n_nodes += t[i].len - c;
    }
    path = malloc((v->max_len + 1) * sizeof *path);  // the current token's prefixes' nodes, by length
    if (!path) goto oom;
    v->n_nodes = n_nodes;
    memory_poison(v->nodes + n_nodes, (cap - n_nodes) * sizeof *v->nodes);  // never made: never read
    memory_poison(v->edges + n_nodes, (cap - n_nodes) * sizeof *v->edges);
    memory_poison(v->height + n_nodes, (cap - n_nodes) * sizeof *v->height);
    for (int pass = 0; pass < 2; pass++) {
        uint32_t next = 1;
        path[0] = 0;
        for (size_t i = 0; i < V; i++) {
            for (size_t d = common[i]; d < t[i].len; d++) {
                TrieNode *parent = &v->nodes[path[d]];
                if (pass) v->edges[parent->first_edge + parent->n_edges] = (TrieEdge){.child = next, .byte = t[i].b[d]};
                parent->n_edges++;
                path[d + 1] = next++;
            }
            TrieNode *end = &v->nodes[path[t[i].len]];  // tokens of the same bytes are neighbours
            if (!pass && !end->n_tok++) end->first_tok = (uint32_t)i;
        }
        for (size_t x = 0, e = 0; !pass && x < n_nodes; x++) {  // each node's edges after the last's
            v->nodes[x].first_edge = (uint32_t)e;
            e += v->nodes[x].n_edges;
            v->nodes[x].n_edges = 0;
        }
    }
    free(path);
    path = NULL;
    // the ids by length, longest first (a counting sort of the sorted
    // tokens; start[L]: where the next id of L bytes goes)
    size_t *start = calloc(v->max_len + 1, sizeof *start);
    if (!start) goto oom;
    for (size_t i = 0; i < V; i++) start[t[i].len]++;  // those of each length, for now
    for (size_t L = v->max_len + 1, above = 0; L-- > 0;) {
        size_t here = start[L];
        v->n_longer[L] = (uint32_t)above;
        start[L] = above;
        above += here;
    }
    for (size_t i = 0; i < V; i++) v->longest[start[t[i].len]++] = t[i].id;
    free(start);
    free(t);
    t = NULL;
    byte_classes(v);
    // a child's index is above its parent's (made after it), so one pass from the
    // last node up sees every child before its parent; a node without
    // tokens of its own starts its subtree's at its first child's
    for (size_t i = v->n_nodes; i-- > 0;) {
        TrieNode *x = &v->nodes[i];
        uint32_t h = 0;
        for (uint32_t e = x->first_edge; e < x->first_edge + x->n_edges; e++) {
            TrieEdge *E = &v->edges[e];
            const TrieNode *c = &v->nodes[E->child];
            if (v->height[E->child] + 1u > h) h = v->height[E->child] + 1u;
            uint32_t below = 0;  // the classes below the child: on its edges and below them
            for (uint32_t f = c->first_edge; f < c->first_edge + c->n_edges; f++)
                below |= 1u << v->byte_class[v->edges[f].byte] | v->edges[f].below;
            E->below = below;
        }
        if (!x->n_tok && x->n_edges) x->first_tok = v->nodes[v->edges[x->first_edge].child].first_tok;
        v->height[i] = (uint16_t)(h > UINT16_MAX ? UINT16_MAX : h);
    }
    return v;
oom:
    free(t);
    free(path);
    grammar_vocab_free(v);
    return gpt_error(err, "grammar: out of memory for the vocabulary trie"), NULL;
}

// grammar_vocab_new's arrays, read by grammar_vocab_new_from.
typedef struct {
    const uint8_t *const *bytes;
    const size_t *len;
} TokenArrays;

static const uint8_t *array_token(const void *ctx, size_t id, size_t *len) {
    const TokenArrays *a = ctx;
    *len = a->len[id];
    return a->bytes[id];
}

GrammarVocab *grammar_vocab_new(const uint8_t *const *token_bytes, const size_t *token_len, size_t V,
                                GptError *err) {
    TokenArrays a = {token_bytes, token_len};
    return grammar_vocab_new_from(array_token, &a, V, err);
}

void grammar_vocab_free(GrammarVocab *v) {
    if (!v) return;
    if (v->block) memory_unpoison(v->block, v->block_bytes);  // the capacity tails were poisoned
    memory_release(v->block, v->block_bytes);
    free(v);
}

size_t grammar_vocab_size(const GrammarVocab *v) { return v ? v->V : 0; }

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
    uint16_t *key_depth; // (g->n_el) the suffix length used for a stack with this top (0: 1), by chain_pos
    int record;          // the walk is a suffix's: record its pops
    // counted repetitions (chains_find): NULL when the grammar has none;
    // else for each position its representative (itself when none) and the
    // bytes rho within which the two read alike (UINT32_MAX: itself)
    uint32_t *chain_pos, *chain_rem;
    uint32_t *ckey;      // a suffix's key in its chains' top rules
    size_t cap_ckey;
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

// Makes chain_pos and chain_rem (each position itself, no bound). -1: memory.
static int chain_maps(GrammarMasker *mk) {
    if (mk->chain_pos) return 0;
    size_t n = mk->g->n_el;
    mk->chain_pos = malloc(n * sizeof *mk->chain_pos);
    mk->chain_rem = malloc(n * sizeof *mk->chain_rem);
    if (!mk->chain_pos || !mk->chain_rem) return -1;
    for (size_t i = 0; i < n; i++) {
        mk->chain_pos[i] = (uint32_t)i;
        mk->chain_rem[i] = UINT32_MAX;
    }
    return 0;
}

// Counted repetitions. X{m,n} compiles to m copies of X and then n - m
// nested rules opt_k ::= X opt_{k-1} | "" (opt_1 ::= X | ""; grammar.c).
// Two kinds of positions are moved to a representative, each with rho, a
// byte count within which the two read alike (ml: a lower bound on the
// bytes of a string X derives, minlen_el):
//   - a chain is any such nest of rules whose X is the same element,
//     found by shape whoever wrote it. opt_k's rest derives X^c for c <= k,
//     so a position inside the copy of opt_j (its X, or the return to
//     opt_{j-1}) and the same place in the chain's top opt_K (K >= j)
//     differ only in the copies they allow after it: j - 1 against K - 1.
//     A string of L bytes read (or popped after) from the top's touches at
//     most (L - 1) / max(ml, 1) + 1 copies past the current one (a copy
//     that reads no byte can be left out: opt_{k-1} derives a subset of
//     opt_k), and every string read from opt_j is read from opt_K; so rho
//     = (j - 2) * max(ml, 1) + 1, moved for j >= 3.
//   - a run of m equal elements X in one alternative (the m copies), ml >=
//     1: from its (i+1)-th element, m - i copies of at least ml bytes come
//     before anything after the run, so a string of at most (m - i) * ml -
//     1 bytes stays inside the run, as it does from the first: rho = that,
//     with the first as the representative.
// A suffix key's positions moved alike (ckey) read every string of at most
// rho bytes alike, rho the least of the moved positions': the same tokens
// of at most rho bytes, the same pops at trie depths up to rho. So the
// key's entry is the moved key's for those, and only deeper trie nodes
// need a walk of the key's own (suffix_entry): a chain's top is walked
// once instead of once per count. chain_pos and chain_rem as in
// GrammarMasker; both NULL when nothing moves. -1: out of memory.
static int chains_find(GrammarMasker *mk) {
    const Grammar *g = mk->g;
    size_t R = g->n_rules ? g->n_rules : 1;
    uint32_t *delta = calloc(R, sizeof *delta);  // 0 not seen, UINT32_MAX not a chain, else the copies it allows
    uint32_t *xpos = calloc(R, sizeof *xpos), *path = malloc(R * sizeof *path), *top = malloc(R * sizeof *top);
    int64_t *up = malloc(R * sizeof *up);  // the rule whose down it is: -1 none, -2 more than one
    uint8_t *mark = calloc(R, 1);
    uint32_t *ml = malloc(R * sizeof *ml);
    int rc = -1;
    if (!delta || !xpos || !path || !top || !up || !mark || !ml) goto out;
    R = g->n_rules;
    for (size_t r = 0; r < R; r++) {
        size_t n = 0;
        uint32_t cur = (uint32_t)r, base;
        for (;;) {
            uint32_t xp, dxp;
            int64_t dn, ddn;
            if (delta[cur]) { base = delta[cur]; break; }
            if (mark[cur] || !chain_shape(g, cur, &xp, &dn)) { base = UINT32_MAX; break; }  // a cycle, or no chain
            mark[cur] = 1;
            path[n++] = cur;
            xpos[cur] = xp;
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
            delta[path[i]] = base;
        }
    }
    for (size_t r = 0; r < R; r++) up[r] = -1;
    for (size_t r = 0; r < R; r++) {
        if (delta[r] == UINT32_MAX || delta[r] < 2) continue;
        uint32_t dn = g->el[xpos[r] + 1].value;
        up[dn] = up[dn] == -1 ? (int64_t)r : -2;
    }
    // each chain rule's top: up while one rule leads down to it; a rule's
    // top once known is kept (mark), so each rule is passed once
    memset(mark, 0, R);
    for (size_t r = 0; r < R; r++) {
        if (delta[r] == UINT32_MAX || delta[r] < 2 || mark[r]) continue;
        size_t n = 0;
        uint32_t t = (uint32_t)r;
        while (!mark[t] && up[t] >= 0) {
            path[n++] = t;
            t = (uint32_t)up[t];
        }
        uint32_t known = mark[t] ? top[t] : t;
        if (!mark[t]) {
            mark[t] = 1;
            top[t] = t;
        }
        for (size_t i = 0; i < n; i++) {
            mark[path[i]] = 1;
            top[path[i]] = known;
        }
    }
    for (size_t r = 0; r < R; r++) ml[r] = ML_UNKNOWN;
    for (size_t r = 0; r < R; r++) {
        if (delta[r] == UINT32_MAX || delta[r] < 3 || top[r] == r) continue;
        // j - 1 = delta - 1 copies after the current: rho = (j - 2) * minlen + 1
        // (a string of L bytes touches at most (L - 1) / minlen + 1 copies past the current)
        uint64_t x = minlen_el(g, g->el[xpos[r]], ml, 0), rho = (uint64_t)(delta[r] - 2) * (x ? x : 1) + 1;
        if (chain_maps(mk)) goto out;
        for (uint32_t o = 0; o < 2; o++) {  // X, and the return to the rule below
            mk->chain_pos[xpos[r] + o] = xpos[top[r]] + o;
            mk->chain_rem[xpos[r] + o] = rho < UINT32_MAX ? (uint32_t)rho : UINT32_MAX - 1;
        }
    }
    // runs of equal elements in an alternative: from the (i+1)-th of m, m - i
    // copies of at least minlen bytes each come before anything after the run
    for (size_t a = 0; a < (size_t)g->rule_alt_start[R]; a++) {
        for (uint32_t p = g->alts[a]; g->el[p].type != EL_END;) {
            uint32_t q = p + 1;
            while (g->el[q].type == g->el[p].type && g->el[q].value == g->el[p].value) q++;
            uint64_t x = q - p >= 2 ? minlen_el(g, g->el[p], ml, 0) : 0;
            if (x) {
                if (chain_maps(mk)) goto out;
                for (uint32_t i = p + 1; i < q; i++) {
                    uint64_t rho = (uint64_t)(q - i) * x - 1;
                    mk->chain_pos[i] = p;
                    mk->chain_rem[i] = rho < UINT32_MAX ? (uint32_t)rho : UINT32_MAX - 1;
                }
            }
            p = q;
        }
    }
    rc = 0;
out:
    if (rc) {
        free(mk->chain_pos);
        free(mk->chain_rem);
        mk->chain_pos = mk->chain_rem = NULL;
    }
    free(delta);
    free(xpos);
    free(path);
    free(top);
    free(up);
    free(mark);
    free(ml);
    return rc;
}

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
    if (!mk->level || !mk->cache || !mk->tmp_mask || !mk->key_depth || !mk->store || !mk->ds || chains_find(mk)) {
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
    free(mk->chain_pos);
    free(mk->chain_rem);
    free(mk->ckey);
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

// mask |= the tokens that end at trie node c. (The walks' masks may hold
// the end token where its bytes are read; grammar_masker_fill clears it
// and allows it by the matcher's state alone.)
static inline void allow_tokens_at(const GrammarMasker *mk, const TrieNode *c, uint64_t *mask) {
    for (uint32_t k = 0; k < c->n_tok; k++) {
        uint32_t id = mk->v->toks[c->first_tok + k];
        mask[id >> 6] |= 1ull << (id & 63);
    }
}

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
        allow_tokens_at(mk, c, mask);
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
            allow_tokens_at(mk, c, mask);
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
        allow_tokens_at(mk, c, mask);
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
    if (mk->chain_pos) {
        if (grow_array(&mk->ckey, &mk->cap_ckey, n, sizeof *mk->ckey)) return gpt_error(err, "grammar: out of memory");
        uint32_t least = UINT32_MAX;
        for (size_t i = 0; i < n; i++) {
            mk->ckey[i] = mk->chain_pos[p[i]];
            if (mk->chain_rem[p[i]] < least) least = mk->chain_rem[p[i]];
        }
        rho = least == UINT32_MAX ? 0 : least < PRUNE_MAX ? least : PRUNE_MAX;
        if (rho) {
            int rc = suffix_entry(mk, mk->ckey, n, pop_limit, &ce, err);  // its key moves no further
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
        allow_tokens_at(mk, c, mask);
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
    uint32_t top = mk->chain_pos ? mk->chain_pos[p[k - 1]] : p[k - 1];  // one depth for a chain's copies
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

/*
 * grammar_match.c - a Grammar's matcher over bytes (grammar.h), and the
 * sets of stacks it is made of (grammar_impl.h), which the masker's
 * automaton advances too. The masks are grammar_mask.c's.
 *
 * A matcher's state is a set of stacks. A stack is a list of positions in
 * the grammar's elements, its top last; a normalized stack's top is an
 * EL_BYTES element (the next byte it can read), and the empty stack has
 * accepted. Normalizing (stacks_expand) replaces a top EL_RULE by its return
 * position (unless that is EL_END) and one stack per alternative of the
 * rule, until every top is a byte (llama.cpp's advance_stack). Reading byte
 * b keeps the stacks whose top class holds b, each with its top advanced,
 * normalized again; equal stacks are kept once. The grammar has no left
 * recursion (grammar.c refuses it), so expansion ends.
 */
#include "grammar/grammar_impl.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

/* ---- sets of stacks ---- */

void stacks_free(StackSet *s) {
    free(s->pool);
    free(s->st);
    memset(s, 0, sizeof *s);
}

int stacks_add(StackSet *s, const uint32_t *p, size_t n, const GrammarLimits *lim, GptError *err) {
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

int stacks_copy(StackSet *dst, const StackSet *src, GptError *err) {
    stacks_clear(dst);
    if (grow_array(&dst->st, &dst->cap, src->n, sizeof *dst->st) ||
        grow_array(&dst->pool, &dst->cap_pool, src->n_pool, sizeof *dst->pool))
        return gpt_error(err, "grammar: out of memory");
    if (src->n) memcpy(dst->st, src->st, src->n * sizeof *src->st);
    if (src->n_pool) memcpy(dst->pool, src->pool, src->n_pool * sizeof *src->pool);
    dst->n = src->n;
    dst->n_pool = src->n_pool;
    return 0;
}

// Normalizes the stack w->buf[off .. off+n), which ends at w->n, into out
// (see the file's comment). Each alternative gets its own copy above it,
// since expansion writes; offsets, not pointers, because the buffer grows.
int stacks_expand(const Grammar *g, StackSet *out, Work *w, size_t off, size_t n, size_t depth, GptError *err) {
    if (++w->steps > EXPAND_STEPS(g))
        return gpt_error(err, "grammar: more than %zu expansion steps for one byte (the bound; the grammar is too "
                         "ambiguous)", EXPAND_STEPS(g));
    if (depth > g->lim.max_stack_depth)
        return gpt_error(err, "grammar: rules nested more than %zu deep without reading a byte (the bound)",
                         g->lim.max_stack_depth);
    if (n == 0 || g->el[w->buf[off + n - 1]].type == EL_BYTES)
        return stacks_add(out, w->buf + off, n, &g->lim, err);
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
        int rc = stacks_expand(g, out, w, base, m, depth + 1, err);
        w->n = base;
        if (rc) return -1;
    }
    return 0;
}

int stacks_advance(const Grammar *g, const StackSet *in, unsigned b, StackSet *out, Work *w, GptError *err) {
    stacks_clear(out);
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
        if (stacks_expand(g, out, w, 0, m, 0, err)) return -1;
    }
    return 0;
}

void stacks_first(const Grammar *g, const StackSet *s, GClass *c) {
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < s->n; i++) {
        if (s->st[i].len == 0) continue;
        const GClass *t = &g->classes[g->el[s->pool[s->st[i].off + s->st[i].len - 1]].value];
        for (int k = 0; k < 4; k++) c->bits[k] |= t->bits[k];
    }
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
        if (stacks_expand(g, &m->cur, &m->w, 0, n, 0, err)) {
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
    if (stacks_copy(&m->cur, &src->cur, err)) {
        grammar_matcher_free(m);
        return NULL;
    }
    return m;
}

int grammar_matcher_assign(GrammarMatcher *dst, const GrammarMatcher *src, GptError *err) {
    dst->g = src->g;
    return stacks_copy(&dst->cur, &src->cur, err);
}

void grammar_matcher_free(GrammarMatcher *m) {
    if (!m) return;
    stacks_free(&m->cur);
    stacks_free(&m->next);
    free(m->w.buf);
    free(m);
}

// Reads n bytes: 0 alive, 1 dead at a byte (m unchanged, *at its offset),
// -1 a bound or memory (m unchanged, err set).
static int feed(GrammarMatcher *m, const uint8_t *bytes, size_t n, size_t *at, GptError *err) {
    if (n == 0) return 0;
    StackSet save = {0};
    if (stacks_copy(&save, &m->cur, err)) return -1;
    for (size_t i = 0; i < n; i++) {
        int rc = stacks_advance(m->g, &m->cur, bytes[i], &m->next, &m->w, err);
        if (rc == 0 && m->next.n == 0) {
            *at = i;
            rc = 1;
        }
        if (rc) {
            StackSet t = m->cur;
            m->cur = save;
            stacks_free(&t);
            return rc;
        }
        StackSet t = m->cur;
        m->cur = m->next;
        m->next = t;
    }
    stacks_free(&save);
    return 0;
}

int grammar_matcher_feed(GrammarMatcher *m, const uint8_t *bytes, size_t n, GptError *err) {
    size_t at = 0;
    int rc = feed(m, bytes, n, &at, err);
    if (rc == 1) return gpt_error(err, "grammar: byte 0x%02x at offset %zu is not allowed", bytes[at], at);
    return rc;
}

bool grammar_matcher_can_end(const GrammarMatcher *m) { return stacks_can_end(&m->cur); }

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

const StackSet *grammar_matcher_stacks(const GrammarMatcher *m) { return &m->cur; }

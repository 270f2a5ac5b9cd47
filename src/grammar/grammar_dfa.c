/*
 * grammar_dfa.c - the masker's lazy automaton over sets of stacks (Dfa,
 * grammar_dfa.h; grammar_mask.c says where it serves). A state is a set
 * of stacks, found by hash; its transition on a byte is computed once
 * (stacks_advance) and kept in the state's table of 256. 1 KiB of
 * transitions plus 4 bytes per stack position and 16 per stack per
 * state, within max_bytes: past it no state is made (D_FULL) and the
 * caller goes on over the stacks themselves. A state also learns, once,
 * which byte classes (grammar_trie.h) it reads none of and which it takes
 * whole to one state: what lets a walk allow a subtree without visiting
 * it (dfa_reads_upto).
 */
#include "grammar/grammar_dfa.h"

#include <stdlib.h>
#include <string.h>

#include "base/memory.h"

int dfa_init(Dfa *d, const Grammar *g, const GrammarVocab *v, size_t max_bytes, size_t max_work) {
    memset(d, 0, sizeof *d);
    d->g = g;
    d->v = v;
    d->max_bytes = max_bytes;
    d->max_work = max_work;
    d->cap = max_bytes / sizeof(DState) + 1;
    d->ds = memory_reserve(d->cap * sizeof(DState));
    return d->ds ? 0 : -1;
}

void dfa_clear(Dfa *d) {
    for (size_t i = 0; i < d->n; i++) stacks_free(&d->ds[i].set);
    d->n = 0;
    d->bytes = 0;
    if (d->slot)
        for (size_t i = 0; i < d->n_slots; i++) d->slot[i] = -1;
}

void dfa_free(Dfa *d) {
    if (d->ds) dfa_clear(d);
    memory_release(d->ds, d->cap * sizeof(DState));
    free(d->slot);
    stacks_free(&d->next);
    free(d->w.buf);
    memset(d, 0, sizeof *d);
}

int mask_charge(size_t *work, size_t add, size_t max, GptError *err) {
    *work += add;
    if (*work > max)
        return gpt_error(err, "grammar: one token mask took more than %zu stack steps (the bound; the grammar is too "
                              "ambiguous)", max);
    return 0;
}

static uint64_t stacks_hash(const StackSet *s) {
    uint64_t h = 1469598103934665603ull ^ s->n;
    for (size_t i = 0; i < s->n; i++) h = (h ^ s->st[i].hash) * 1099511628211ull;
    return h;
}

static int stacks_equal(const StackSet *a, const StackSet *b) {
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const StackRef *x = &a->st[i], *y = &b->st[i];
        if (x->hash != y->hash || x->len != y->len ||
            (x->len && memcmp(a->pool + x->off, b->pool + y->off, x->len * sizeof *a->pool)))
            return 0;
    }
    return 1;
}

int32_t dfa_state(Dfa *d, const StackSet *s, GptError *err) {
    uint64_t h = stacks_hash(s);
    if (d->n_slots) {
        for (size_t i = (size_t)h & (d->n_slots - 1);; i = (i + 1) & (d->n_slots - 1)) {
            int32_t id = d->slot[i];
            if (id < 0) break;
            if (d->ds[id].hash == h && stacks_equal(&d->ds[id].set, s)) return id;
        }
    }
    size_t bytes = sizeof(DState) + s->n * sizeof(StackRef) + s->n_pool * sizeof(uint32_t) + 2 * sizeof(int32_t);
    if (d->bytes + bytes > d->max_bytes || d->n >= INT32_MAX / 2) return D_FULL;
    if (2 * (d->n + 1) > d->n_slots) {  // the table doubles, every state placed again
        size_t n = d->n_slots ? 2 * d->n_slots : 1024;
        int32_t *t = malloc(n * sizeof *t);
        if (!t) return gpt_error(err, "grammar: out of memory"), D_ERR;
        for (size_t i = 0; i < n; i++) t[i] = -1;
        for (size_t k = 0; k < d->n; k++) {
            size_t i = (size_t)d->ds[k].hash & (n - 1);
            while (t[i] >= 0) i = (i + 1) & (n - 1);
            t[i] = (int32_t)k;
        }
        free(d->slot);
        d->slot = t;
        d->n_slots = n;
    }
    if (d->n >= d->cap) return D_FULL;
    DState *x = &d->ds[d->n];
    memset(&x->set, 0, sizeof x->set);
    if (stacks_copy(&x->set, s, err)) {
        stacks_free(&x->set);
        return D_ERR;
    }
    x->hash = h;
    stacks_first(d->g, s, &x->first);
    x->can_end = stacks_can_end(s);
    memset(x->next, 0xff, sizeof x->next);  // D_UNKNOWN
    x->walk = 0;  // walks are numbered from 1
    memset(x->charged, 0, sizeof x->charged);
    x->class_walk = 0;
    x->alike_known = x->alike = 0;
    x->dead = x->dead_known = 0;
    size_t i = (size_t)h & (d->n_slots - 1);
    while (d->slot[i] >= 0) i = (i + 1) & (d->n_slots - 1);
    d->slot[i] = (int32_t)d->n;
    d->bytes += bytes;
    return (int32_t)d->n++;
}

int32_t dfa_next_slow(Dfa *d, int32_t id, unsigned b, size_t *work, GptError *err) {
    int32_t nx = d->ds[id].next[b];
    if (nx == D_UNKNOWN) {
        if (stacks_advance(d->g, &d->ds[id].set, b, &d->next, &d->w, err)) return D_ERR;
        nx = d->next.n ? dfa_state(d, &d->next, err) : D_DEAD;
        if (nx == D_ERR) return D_ERR;
        if (nx != D_FULL) d->ds[id].next[b] = nx;
    }
    // each stack read, and the stacks made, each compared with those before
    // it: charged once a walk, whether computed now or kept, so that the
    // bound counts what the walk would cost with nothing kept (a new
    // masker computes each transition once), whatever the automaton holds
    DState *x = &d->ds[id];
    if (x->walk != d->walk) {
        x->walk = d->walk;
        memset(x->charged, 0, sizeof x->charged);
    }
    if (nx != D_FULL && (x->charged[b >> 6] >> (b & 63) & 1)) return nx;
    x->charged[b >> 6] |= 1ull << (b & 63);
    size_t made = nx == D_FULL ? d->next.n : nx == D_DEAD ? 0 : d->ds[nx].set.n;
    return mask_charge(work, x->set.n + made * (made + 1) / 2, d->max_work, err) ? D_ERR : nx;
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
static int32_t class_target(Dfa *dfa, int32_t id, unsigned k, size_t *work, GptError *err) {
    DState *d = &dfa->ds[id];
    if (d->class_walk != dfa->walk) {
        d->class_walk = dfa->walk;
        d->class_known = 0;
    }
    if (d->class_known >> k & 1) return d->class_to[k];
    // a transition depends only on which stacks' top classes hold the byte
    // (stacks_advance): when each holds all of the class or none of it, the
    // class's bytes go where its first byte goes
    const GClass *bytes = &dfa->v->class_bytes[k];
    if (!(d->alike_known >> k & 1)) {  // a property of the state: found once
        int alike = gclass_holds(&d->first, bytes) == RANGE_ALL;
        for (size_t i = 0; i < d->set.n && alike; i++) {
            const StackRef *st = &d->set.st[i];
            if (st->len)
                alike = gclass_holds(&dfa->g->classes[dfa->g->el[d->set.pool[st->off + st->len - 1]].value], bytes) !=
                        RANGE_SOME;
        }
        d->alike_known |= 1ull << k;
        d->alike |= (uint64_t)alike << k;
    }
    int alike = d->alike >> k & 1;
    int32_t to = D_DEAD;
    if (alike) {
        to = dfa_next(dfa, id, dfa->v->class_first[k], work, err);
        if (to == D_ERR) return D_ERR;
        if (to < 0) to = D_DEAD;
    }
    d = &dfa->ds[id];
    if (to >= 0)  // the same transitions, known now
        for (unsigned b = 0; b < 256; b++)
            if (gclass_has(bytes, b)) d->next[b] = to;
    d->class_known |= 1ull << k;
    d->class_to[k] = to;
    return to;
}

// The classes of which state id reads no byte.
static uint32_t dead_classes(Dfa *dfa, int32_t id) {
    DState *d = &dfa->ds[id];
    if (!d->dead_known) {  // a property of the state: found once
        for (unsigned k = 0; k < N_BYTE_CLASSES; k++)
            if (gclass_holds(&d->first, &dfa->v->class_bytes[k]) == RANGE_NONE) d->dead |= 1u << k;
        d->dead_known = 1;
    }
    return d->dead;
}

int dfa_reads_upto(Dfa *d, int32_t id, uint32_t classes, uint32_t need, uint32_t *upto, size_t *work,
                   GptError *err) {
    *upto = need;
    for (uint32_t step = 0; step < need; step++) {
        if (!(classes & ~dead_classes(d, id))) {
            *upto = step;
            return 1;
        }
        int32_t to = D_DEAD;
        for (uint32_t c = classes; c; c &= c - 1) {
            int32_t t = class_target(d, id, (unsigned)__builtin_ctz(c), work, err);
            if (t == D_ERR) return -1;
            if (t < 0 || (to >= 0 && t != to)) return 0;
            to = t;
        }
        if (to == id) return 1;
        id = to;
    }
    return 1;
}

/*
 * grammar_dfa.h - the masker's lazy automaton over sets of stacks
 * (grammar_dfa.c): a state is a set of stacks, its transition on a byte
 * computed once (stacks_advance) and kept, so that a walk of the trie
 * (grammar_mask.c) through states seen before costs a table look-up per
 * node whatever the number of stacks. Not for users of the module: they
 * include grammar.h.
 */
#ifndef GPT_GRAMMAR_DFA_H
#define GPT_GRAMMAR_DFA_H

#include "grammar/grammar_impl.h"
#include "grammar/grammar_trie.h"

// A state of the automaton. 1.2 KiB (its transitions, 1 KiB) plus its stacks.
typedef struct {
    StackSet set;
    uint64_t hash;
    GClass first;        // the bytes it can read
    int can_end;         // it holds the empty stack
    int32_t next[256];   // D_UNKNOWN, D_DEAD or the state after the byte
    uint64_t walk;       // the last walk that took a transition from here (Dfa.walk)
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

typedef struct {
    const Grammar *g;
    const GrammarVocab *v;  // its byte classes
    size_t max_bytes;       // the bound on bytes (its share of max_cache_bytes)
    size_t max_work;        // a walk's bound (max_mask_work)
    DState *ds;             // (cap) reserved whole: the states that fit in max_bytes
    size_t n, cap, bytes;
    int32_t *slot;          // (n_slots, a power of two) states by hash, -1 free
    size_t n_slots;
    StackSet next;          // a transition being computed: D_FULL's stacks
    Work w;
    uint64_t walk;          // the walk under way, numbered: a transition is charged once a walk
} Dfa;

// The automaton of g over v's byte classes, empty, within max_bytes.
// 0, or -1: out of memory.
int dfa_init(Dfa *d, const Grammar *g, const GrammarVocab *v, size_t max_bytes, size_t max_work);
void dfa_free(Dfa *d);
// Forgets every state.
void dfa_clear(Dfa *d);
// A new walk: each transition it takes is charged once (dfa_next).
static inline void dfa_begin_walk(Dfa *d) { d->walk++; }

// *work += add, checked against the bound max: 0, or -1 with err.
int mask_charge(size_t *work, size_t add, size_t max, GptError *err);

// The state for the stacks s: found, or made (a copy). D_FULL when it
// would pass max_bytes, D_ERR with err set.
int32_t dfa_state(Dfa *d, const StackSet *s, GptError *err);
// The state after byte b from state id (which can read b): D_DEAD, a state,
// D_FULL (then d->next holds the stacks), or D_ERR. Charges *work for the
// transition once a walk, whether computed now or kept: the bound counts
// what the walk would cost with nothing kept, whatever the automaton holds.
// dfa_next_slow does it all; dfa_next answers inline a transition known and
// charged in this walk already (most of a walk's), and calls it otherwise.
int32_t dfa_next_slow(Dfa *d, int32_t id, unsigned b, size_t *work, GptError *err);
static inline int32_t dfa_next(Dfa *d, int32_t id, unsigned b, size_t *work, GptError *err) {
    const DState *x = &d->ds[id];
    int32_t nx = x->next[b];  // D_FULL is never kept
    if (nx != D_UNKNOWN && x->walk == d->walk && (x->charged[b >> 6] >> (b & 63) & 1)) return nx;
    return dfa_next_slow(d, id, b, work, err);
}
// How many bytes of the byte classes `classes` state id reads, in any
// order, up to need: 1 and *upto = need when it reads every such string of
// up to need bytes (each step takes all those classes to one state; a
// state that returns to itself reads any length); 1 and *upto = r < need
// when it reads every such string of up to r bytes and none longer (after
// r, none of the classes); 0 when neither is shown; -1 with err. At most
// need * |classes| transitions, charged to *work.
int dfa_reads_upto(Dfa *d, int32_t id, uint32_t classes, uint32_t need, uint32_t *upto, size_t *work,
                   GptError *err);

#endif

/*
 * grammar_trie.h - the vocabulary as a trie of the tokens' byte strings
 * (GrammarVocab, made by grammar_vocab_new in grammar_trie.c), as the
 * masker (grammar_mask.c) walks it. Not for users of the module: they
 * include grammar.h.
 */
#ifndef GPT_GRAMMAR_TRIE_H
#define GPT_GRAMMAR_TRIE_H

#include "grammar/grammar_impl.h"

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
    TrieNode *nodes;    // node 0 is the root
    size_t n_nodes;
    TrieEdge *edges;
    uint32_t *toks;     // (V) the token ids sorted by bytes
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

// mask |= the tokens that end at trie node c.
static inline void trie_allow_tokens(const GrammarVocab *v, const TrieNode *c, uint64_t *mask) {
    for (uint32_t k = 0; k < c->n_tok; k++) {
        uint32_t id = v->toks[c->first_tok + k];
        mask[id >> 6] |= 1ull << (id & 63);
    }
}

#endif

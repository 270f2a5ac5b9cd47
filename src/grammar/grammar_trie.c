/*
 * grammar_trie.c - the vocabulary as a trie of the tokens' byte strings
 * (GrammarVocab, grammar_trie.h), which the masker walks (grammar_mask.c
 * says how). A node per distinct prefix of a token, made in preorder from
 * the tokens sorted by bytes, so that a subtree's tokens are one run of
 * the sorted ids; each edge knows the byte classes below it and each node
 * its subtree's height, and the ids are kept by length too: what lets a
 * walk allow a subtree, or the tokens up to a length, without visiting it.
 */
#include "grammar/grammar_trie.h"

#include <stdlib.h>
#include <string.h>

#include "base/memory.h"

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

// Every array of the trie in one block, the nodes sized for the most there
// can be (total bytes, and the root; what is not touched takes no memory):
// 7 MB for GPT-2. -1: out of memory.
static int trie_reserve(GrammarVocab *v, size_t total) {
    size_t V = v->V, cap = total + 1, at = 0, p_nodes = part(&at, cap * sizeof *v->nodes),
           p_edges = part(&at, cap * sizeof *v->edges), p_height = part(&at, cap * sizeof *v->height),
           p_toks = part(&at, V * sizeof *v->toks), p_len = part(&at, V * sizeof *v->len_at),
           p_longest = part(&at, V * sizeof *v->longest),
           p_longer = part(&at, (v->max_len + 1) * sizeof *v->n_longer);
    unsigned char *block = v->block = memory_reserve(at);
    if (!block) return -1;
    v->block_bytes = at;
    v->nodes = (TrieNode *)(void *)(block + p_nodes);
    v->edges = (TrieEdge *)(void *)(block + p_edges);
    v->height = (uint16_t *)(void *)(block + p_height);
    v->toks = (uint32_t *)(void *)(block + p_toks);
    v->len_at = (uint16_t *)(void *)(block + p_len);
    v->longest = (uint32_t *)(void *)(block + p_longest);
    v->n_longer = (uint32_t *)(void *)(block + p_longer);
    return 0;
}

// A node per distinct prefix: in byte order, a token's prefixes not made
// yet are those past its common prefix with the token before it
// (common[i]). So one pass counts the nodes and each node's children, and
// a second, which makes the same nodes in the same order (a parent before
// its children, children in byte order), writes the edges. t: the tokens
// sorted; cap: the nodes reserved. -1: out of memory.
static int trie_link(GrammarVocab *v, const SortTok *t, uint32_t *common, size_t cap) {
    size_t V = v->V, n_nodes = 1;
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
    uint32_t *path = malloc((v->max_len + 1) * sizeof *path);  // the current token's prefixes' nodes, by length
    if (!path) return -1;
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
    return 0;
}

// The ids by length, longest first (a counting sort of the sorted tokens;
// start[L]: where the next id of L bytes goes). -1: out of memory.
static int trie_by_length(GrammarVocab *v, const SortTok *t) {
    size_t *start = calloc(v->max_len + 1, sizeof *start);
    if (!start) return -1;
    for (size_t i = 0; i < v->V; i++) start[t[i].len]++;  // those of each length, for now
    for (size_t L = v->max_len + 1, above = 0; L-- > 0;) {
        size_t here = start[L];
        v->n_longer[L] = (uint32_t)above;
        start[L] = above;
        above += here;
    }
    for (size_t i = 0; i < v->V; i++) v->longest[start[t[i].len]++] = t[i].id;
    free(start);
    return 0;
}

// Each edge's classes below it, each node's height, and a node without
// tokens of its own starts its subtree's at its first child's. A child's
// index is above its parent's (made after it), so one pass from the last
// node up sees every child before its parent.
static void trie_summaries(GrammarVocab *v) {
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
}

GrammarVocab *grammar_vocab_new_from(GrammarTokenBytes bytes_of, const void *ctx, size_t V, GptError *err) {
    if (V == 0 || V > INT32_MAX) return gpt_error(err, "grammar: vocabulary of %zu tokens", V), NULL;
    // the tokens to sort and the sort's scratch, in one allocation (2.4 MB
    // for GPT-2: on huge pages, a few faults instead of 600)
    GrammarVocab *v = calloc(1, sizeof *v);
    SortTok *t = V <= SIZE_MAX / (2 * sizeof *t) ? memory_alloc_large(2 * V * sizeof *t) : NULL;
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
    if (total + 1 > UINT32_MAX || trie_reserve(v, total)) goto oom;
    tok_sort(t, t + V, V, 0);  // t came in id order
    uint32_t *common = (uint32_t *)(void *)(t + V);  // in the sort's scratch
    if (trie_link(v, t, common, total + 1) || trie_by_length(v, t)) goto oom;
    free(t);
    byte_classes(v);
    trie_summaries(v);
    return v;
oom:
    free(t);
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

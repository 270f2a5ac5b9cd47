/*
 * tokenizer.c - GPT-2 byte-level BPE, identical to tiktoken's "gpt2" encoding.
 *
 * Layout of a Tokenizer:
 *   - every token's vocab.json string and raw bytes, in two arenas;
 *   - a hash table from a token's bytes back to its id (and, only while a
 *     file reader resolves merges by name, one from its string);
 *   - the merge list as given (rank -> left/right id), for the model file,
 *     and each token's rank: that of the merge that creates it;
 *   - a direct-mapped cache of pair ranks, (left id, right id) -> (rank,
 *     merged id), filled as BPE asks;
 *   - a direct-mapped cache of recently encoded pieces, and scratch buffers.
 *
 * tiktoken's rule, which we follow, is not quite "apply the listed merges":
 * it merges any two adjacent parts whose concatenated bytes form a token,
 * lowest-ranked result first, and it takes a whole piece as one token
 * whenever the piece is a token. So a pair's rank is found by looking up the
 * two parts' bytes together in the bytes table (pair_rank_plain), not in the
 * listed pairs, and is the rank of the merge that creates that token. (For
 * GPT-2 a token's rank is its id - 256, as in tiktoken.)
 *
 * Building does only what every start needs (the arenas, the bytes table, the
 * ranks): no table of every pair (GPT-2 has 108,299 splits of a token into two
 * mergeable tokens, 4 MiB of table, where a prompt looks up a few hundred),
 * and no string table unless merges are named by string.
 *
 * A Tokenizer is built in the steps of tokenizer_build.h, here; the files
 * it is read from (vocab.json + merges.txt, tokenizer.json) are parsed in
 * tokenizer_files.c, UTF-8 is decoded by utf8.h.
 *
 * Not here: special tokens other than <|endoftext|>, normalisation (GPT-2
 * has none).
 */
#include "model/tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/grow.h"
#include "base/memory.h"
#include "model/tokenizer_build.h"
#include "base/utf8.h"

// ---------------------------------------------------------------- hashing

static uint64_t mix64(uint64_t h) {
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 29;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 32;
    return h;
}

// Fast enough on short keys (pieces average ~5 bytes), reads 8 at a time.
static uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 33;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return mix64(h ^ w);
}

// An open-addressing table from a key (a token's string or its bytes) to the
// token's id. A slot holds id + 1 (0 = empty) and 32 bits of the hash, side
// by side so a probe touches one cache line, and most non-matching keys are
// skipped without comparing them.
typedef struct {
    uint32_t id1;
    uint32_t hash32;
} IdSlot;
typedef struct {
    IdSlot *slots;
    size_t mask;
} IdTable;

// The pair cache behind BPE: (left << 32 | right) -> rank and merged id,
// direct-mapped by hash; a slot holds the last pair that mapped to it.
// Lookups hit it for all but the pairs a text meets first (tokens are below
// 2^31, so key + 1 neither overflows nor is 0 = empty).
#define PAIR_CACHE_SLOTS 16384  // 256 KiB
typedef struct {
    uint64_t key1;    // key + 1; 0 when unused
    uint32_t rank;    // NO_RANK: the pair does not merge
    int32_t merged;
} PairSlot;

// The piece cache: direct-mapped by hash. Short pieces only; a piece whose
// encoding does not fit is simply not cached.
#define CACHE_SLOTS 8192
#define CACHE_KEY_MAX 22  // with the rest: a 64-byte slot
#define CACHE_IDS_MAX 8
typedef struct {
    uint64_t hash;
    uint8_t klen;    // 0 = empty (empty pieces never occur)
    uint8_t nids;
    unsigned char key[CACHE_KEY_MAX];
    int32_t ids[CACHE_IDS_MAX];
} CacheSlot;

struct Tokenizer {
    size_t n_vocab;
    // One block, `hot`, holds what a lookup by bytes touches (see
    // tokenizer_new_vocab): the bytes table, then the four arrays.
    void *hot;
    IdTable by_bytes;         // slots in hot
    uint32_t *byte_off;       // (n_vocab + 1) in hot: token id's bytes are [off[id], off[id+1])
    uint32_t *rank_of;        // (n_vocab) in hot: rank of the merge making the token; NO_RANK if none
    uint32_t *str_off;        // (n_vocab) in hot
    unsigned char *byte_arena;  // in hot
    char *str_arena;          // all token strings, NUL-terminated (total < 4 GiB)
    size_t max_token_bytes;
    IdTable by_string;        // empty (slots NULL) except while a reader resolves merges
    int32_t byte_token[256];  // the token of each single byte
    size_t n_merges;
    int32_t (*merges)[2];     // (n_merges) as given
    PairSlot *pair_cache;     // (PAIR_CACHE_SLOTS)
    int32_t eot;
    // Encoding state: the cache and scratch, reused across calls.
    CacheSlot *cache;
    size_t scratch_cap;       // bytes of the largest piece the scratch fits
    int32_t *s_tok;
    uint32_t *s_next, *s_prev;
    uint64_t *s_heap;
    unsigned char *s_cat;     // (max_token_bytes) a pair's bytes, joined
};
#define NO_RANK UINT32_MAX

static size_t pow2_at_least(size_t n) {
    size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

static const unsigned char *tok_bytes(const Tokenizer *t, uint32_t id, size_t *len) {
    *len = t->byte_off[id + 1] - t->byte_off[id];
    return t->byte_arena + t->byte_off[id];
}

// Slots for n keys: at most half full.
static size_t idtable_cap(size_t n) { return pow2_at_least(2 * n); }

static int idtable_init(IdTable *tab, size_t n) {
    size_t cap = idtable_cap(n);
    tab->slots = calloc(cap, sizeof *tab->slots);
    tab->mask = cap - 1;
    return tab->slots ? 0 : -1;
}

static void idtable_free(IdTable *tab) {
    free(tab->slots);
    tab->slots = NULL;
}

// 1 if token id's key (its bytes, or with by_bytes == 0 its string) is key[0..len).
static inline int key_is(const Tokenizer *t, int by_bytes, uint32_t id, const unsigned char *key,
                         size_t len) {
    if (by_bytes) {
        size_t n;
        const unsigned char *b = tok_bytes(t, id, &n);
        return n == len && memcmp(b, key, len) == 0;
    }
    const char *s = t->str_arena + t->str_off[id];
    return strncmp(s, (const char *)key, len) == 0 && s[len] == '\0';
}

// Returns the id stored under key (hash h), or -1. by_bytes selects the key kind.
static int32_t idtable_find(const Tokenizer *t, const IdTable *tab, int by_bytes,
                            const unsigned char *key, size_t len, uint64_t h) {
    uint32_t h32 = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & tab->mask;; i = (i + 1) & tab->mask) {
        uint32_t v = tab->slots[i].id1;
        if (v == 0) return -1;
        if (tab->slots[i].hash32 == h32 && key_is(t, by_bytes, v - 1, key, len)) return (int32_t)(v - 1);
    }
}

// Inserts id unless the key is already present (then the first id stays):
// one probe sequence, which ends at the key or at the free slot it takes.
static void idtable_add(Tokenizer *t, IdTable *tab, int by_bytes, const unsigned char *key,
                        size_t len, uint32_t id) {
    uint64_t h = hash_bytes(key, len);
    uint32_t h32 = (uint32_t)(h >> 32);
    size_t i = (size_t)h & tab->mask;
    for (; tab->slots[i].id1 != 0; i = (i + 1) & tab->mask)
        if (tab->slots[i].hash32 == h32 && key_is(t, by_bytes, tab->slots[i].id1 - 1, key, len)) return;
    tab->slots[i].id1 = id + 1;
    tab->slots[i].hash32 = h32;
}

// The rank of merging left and right (both mergeable, as every part BPE holds
// is), NO_RANK if they do not merge; *merged set when they do. tiktoken's
// rule itself: the two parts' bytes together must be a token made by a merge.
// That token is the first with those bytes (the one tokenizer_add_merge gave
// its rank), and only a first id can be mergeable, so this is exactly what a
// table of every split of every merged token would answer.
static uint32_t pair_rank_plain(Tokenizer *t, int32_t left, int32_t right, int32_t *merged) {
    size_t la, lb;
    const unsigned char *a = tok_bytes(t, (uint32_t)left, &la);
    const unsigned char *b = tok_bytes(t, (uint32_t)right, &lb);
    if (la + lb > t->max_token_bytes) return NO_RANK;  // longer than any token
    memcpy(t->s_cat, a, la);
    memcpy(t->s_cat + la, b, lb);
    int32_t m = idtable_find(t, &t->by_bytes, 1, t->s_cat, la + lb, hash_bytes(t->s_cat, la + lb));
    if (m < 0 || t->rank_of[m] == NO_RANK) return NO_RANK;
    *merged = m;
    return t->rank_of[m];
}

// pair_rank_plain through the pair cache.
static inline uint32_t pair_rank(Tokenizer *t, int32_t left, int32_t right, int32_t *merged) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    PairSlot *s = &t->pair_cache[mix64(key) & (PAIR_CACHE_SLOTS - 1)];
    if (s->key1 != key + 1) {
        s->key1 = key + 1;
        s->merged = -1;
        s->rank = pair_rank_plain(t, left, right, &s->merged);
    }
    *merged = s->merged;
    return s->rank;
}

// ---------------------------------------------------------------- bytes as characters

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves,
// the other 68 bytes for U+0100 + k, in byte order.
static int32_t byte_to_cp(unsigned b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (int32_t)b;
    int32_t k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) k++;
    return 256 + k;
}

// ---------------------------------------------------------------- building

// Character classes of the pre-tokenizer.
enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE };

static int cp_class(int32_t cp) {
    if (cp < 0) return C_OTHER;  // not UTF-8: punctuation-like, like U+FFFD
    if ((cp >= 9 && cp <= 13) || cp == 0x85) return C_SPACE;
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return C_LETTER;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return C_NUMBER;
    // White_Space (what the regex crate's \s means) is exactly Zs, Zl, Zp
    // and the controls above.
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
        return C_SPACE;
    default:
        return C_OTHER;
    }
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    idtable_free(&t->by_string);
    // every other block it owns (NULL where building stopped early)
    void *blocks[] = {t->hot, t->str_arena, t->merges,
                      t->pair_cache, t->cache, t->s_tok, t->s_next, t->s_prev, t->s_heap, t->s_cat};
    for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++) free(blocks[i]);
    free(t);
}

// Step 1 (tokenizer_build.h): the vocabulary.
Tokenizer *tokenizer_new_vocab(const char *src, size_t n_vocab, const char *const *strings, GptError *err) {
    if (n_vocab == 0 || n_vocab > (size_t)INT32_MAX - 1) {
        gpt_error(err, "%s: vocabulary size %zu out of range", src, n_vocab);
        return NULL;
    }
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t) goto oom;
    t->n_vocab = n_vocab;
    t->eot = -1;
    size_t total = 0;
    for (size_t i = 0; i < n_vocab; i++) {
        if (!strings[i]) {
            gpt_error(err, "%s: token id %zu has no string", src, i);
            tokenizer_free(t);
            return NULL;
        }
        total += strlen(strings[i]) + 1;
    }
    if (total > UINT32_MAX) {
        gpt_error(err, "%s: token strings total %zu bytes, more than 4 GiB", src, total);
        tokenizer_free(t);
        return NULL;
    }
    // The hot block: bytes table, byte_off, rank_of, str_off, bytes (a
    // token's bytes are never longer than its string). Building inserts every
    // token and looks up every merge at random places in it; on 4 KiB pages
    // each first touch is a fault and most lookups a TLB miss, so a block of
    // 1 MiB or more is rounded up to whole 2 MiB huge pages (GPT-2's is 1.93
    // MiB: 2 MiB, one fault).
    size_t cap = idtable_cap(n_vocab);
    size_t hot = cap * sizeof(IdSlot) + (3 * n_vocab + 1) * sizeof(uint32_t) + total;
    if (hot >= (1u << 20)) hot = (hot + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    t->hot = memory_alloc_large(hot);
    t->str_arena = malloc(total);
    // The caches are zero pages until encoding touches them.
    t->cache = calloc(CACHE_SLOTS, sizeof *t->cache);
    t->pair_cache = calloc(PAIR_CACHE_SLOTS, sizeof *t->pair_cache);
    if (!t->hot || !t->str_arena || !t->cache || !t->pair_cache) goto oom;
    t->by_bytes.slots = t->hot;
    t->by_bytes.mask = cap - 1;
    memset(t->by_bytes.slots, 0, cap * sizeof(IdSlot));
    t->byte_off = (uint32_t *)(t->by_bytes.slots + cap);
    t->rank_of = t->byte_off + n_vocab + 1;
    t->str_off = t->rank_of + n_vocab;
    t->byte_arena = (unsigned char *)(t->str_off + n_vocab);

    int16_t cp_to_byte[324];
    for (size_t i = 0; i < 324; i++) cp_to_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) cp_to_byte[byte_to_cp(b)] = (int16_t)b;

    size_t so = 0, bo = 0;
    for (size_t id = 0; id < n_vocab; id++) {
        size_t len = strlen(strings[id]);
        const unsigned char *s = (const unsigned char *)strings[id];
        memcpy(t->str_arena + so, s, len + 1);
        t->str_off[id] = (uint32_t)so;
        so += len + 1;
        // The bytes: each character of the string stands for one byte. A
        // string with a character outside that alphabet (an added token
        // written as plain text) stands for its own UTF-8 bytes.
        t->byte_off[id] = (uint32_t)bo;
        size_t nb = 0, i = 0;
        int plain = 0;
        while (i < len) {
            int32_t cp;
            size_t k = utf8_decode(s + i, len - i, &cp);
            if (cp < 0 || cp >= 324 || cp_to_byte[cp] < 0) {
                plain = 1;
                break;
            }
            t->byte_arena[bo + nb++] = (unsigned char)cp_to_byte[cp];
            i += k;
        }
        if (plain) {
            memcpy(t->byte_arena + bo, s, len);
            nb = len;
        }
        bo += nb;
        if (nb > t->max_token_bytes) t->max_token_bytes = nb;
        t->rank_of[id] = NO_RANK;
    }
    t->byte_off[n_vocab] = (uint32_t)bo;
    if (!(t->s_cat = malloc(t->max_token_bytes ? t->max_token_bytes : 1))) goto oom;
    for (size_t id = 0; id < n_vocab; id++) {
        size_t n;
        const unsigned char *b = tok_bytes(t, (uint32_t)id, &n);
        idtable_add(t, &t->by_bytes, 1, b, n, (uint32_t)id);
    }
    for (unsigned b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        t->byte_token[b] = idtable_find(t, &t->by_bytes, 1, &c, 1, hash_bytes(&c, 1));
        if (t->byte_token[b] < 0) {
            gpt_error(err, "%s: no token for byte 0x%02x", src, b);
            tokenizer_free(t);
            return NULL;
        }
    }
    // The first token whose string is "<|endoftext|>" is the first whose
    // bytes are: printable ASCII stands for itself, and a string written as
    // plain text (its own UTF-8) has a character outside that alphabet.
    static const unsigned char eot_str[] = "<|endoftext|>";
    t->eot = idtable_find(t, &t->by_bytes, 1, eot_str, sizeof eot_str - 1,
                          hash_bytes(eot_str, sizeof eot_str - 1));
    return t;
oom:
    gpt_error(err, "%s: out of memory", src);
    tokenizer_free(t);
    return NULL;
}

int tokenizer_index_strings(Tokenizer *t, const char *src, GptError *err) {
    if (t->by_string.slots) return 0;
    if (idtable_init(&t->by_string, t->n_vocab)) return gpt_error(err, "%s: out of memory", src);
    for (size_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->str_arena + t->str_off[id];
        idtable_add(t, &t->by_string, 0, (const unsigned char *)s, strlen(s), (uint32_t)id);
    }
    return 0;
}

int32_t tokenizer_string_id(const Tokenizer *t, const char *s, size_t len) {
    const unsigned char *key = (const unsigned char *)s;
    if (!t->by_string.slots) return -1;
    return idtable_find(t, &t->by_string, 0, key, len, hash_bytes(key, len));
}

// Step 2: merge `rank` joins left and right; records it.
int tokenizer_add_merge(Tokenizer *t, size_t rank, int32_t left, int32_t right, GptError *err) {
    if (left < 0 || (size_t)left >= t->n_vocab || right < 0 || (size_t)right >= t->n_vocab)
        return gpt_error(err, "merge names token id out of range (%d, %d)", (int)left, (int)right);
    size_t la, lb;
    const unsigned char *a = tok_bytes(t, (uint32_t)left, &la);
    const unsigned char *b = tok_bytes(t, (uint32_t)right, &lb);
    // An empty token (a "" key) merges into nothing new.
    if (la == 0 || lb == 0)
        return gpt_error(err, "merge '%s %s' names an empty token", t->str_arena + t->str_off[left],
                         t->str_arena + t->str_off[right]);
    unsigned char stackbuf[256];
    unsigned char *cat = la + lb <= sizeof stackbuf ? stackbuf : malloc(la + lb);
    if (!cat) return gpt_error(err, "out of memory");
    memcpy(cat, a, la);
    memcpy(cat + la, b, lb);
    int32_t merged = idtable_find(t, &t->by_bytes, 1, cat, la + lb, hash_bytes(cat, la + lb));
    if (cat != stackbuf) free(cat);
    if (merged < 0)
        return gpt_error(err, "merge '%s %s' makes a token that is not in the vocabulary",
                         t->str_arena + t->str_off[left], t->str_arena + t->str_off[right]);
    t->merges[rank][0] = left;
    t->merges[rank][1] = right;
    if (t->rank_of[merged] == NO_RANK) t->rank_of[merged] = (uint32_t)rank;
    return 0;
}

// A token tiktoken would consider a BPE unit: a single byte's token or the
// result of a merge.
static int mergeable(const Tokenizer *t, int32_t id) {
    size_t n = t->byte_off[id + 1] - t->byte_off[id];
    return t->rank_of[id] != NO_RANK || (n == 1 && t->byte_token[t->byte_arena[t->byte_off[id]]] == id);
}

// Step 3: the string table served only the readers.
void tokenizer_finish(Tokenizer *t) { idtable_free(&t->by_string); }

// Before step 2: the merge list.
int tokenizer_alloc_merges(Tokenizer *t, size_t n_merges, const char *src, GptError *err) {
    if (n_merges >= NO_RANK) return gpt_error(err, "%s: too many merges (%zu)", src, n_merges);
    t->n_merges = n_merges;
    t->merges = malloc((n_merges ? n_merges : 1) * sizeof *t->merges);
    if (!t->merges) return gpt_error(err, "%s: out of memory", src);
    return 0;
}

Tokenizer *tokenizer_from_tables(size_t n_vocab, const char *const *token_strings,
                                 size_t n_merges, const int32_t (*merge_pairs)[2],
                                 GptError *err) {
    const char *src = "tokenizer tables";
    Tokenizer *t = tokenizer_new_vocab(src, n_vocab, token_strings, err);
    if (!t) return NULL;
    if (tokenizer_alloc_merges(t, n_merges, src, err)) goto fail;
    for (size_t r = 0; r < n_merges; r++) {
        if (tokenizer_add_merge(t, r, merge_pairs[r][0], merge_pairs[r][1], err)) {
            GptError inner = *err;
            gpt_error(err, "%s: merge %zu: %s", src, r, inner.msg);
            goto fail;
        }
    }
    tokenizer_finish(t);
    return t;
fail:
    tokenizer_free(t);
    return NULL;
}

// ---------------------------------------------------------------- accessors

size_t tokenizer_vocab_size(const Tokenizer *t) { return t->n_vocab; }
size_t tokenizer_n_merges(const Tokenizer *t) { return t->n_merges; }
int32_t tokenizer_eot_id(const Tokenizer *t) { return t->eot; }
size_t tokenizer_max_token_bytes(const Tokenizer *t) { return t->max_token_bytes; }

const char *tokenizer_token_string(const Tokenizer *t, int32_t id) {
    if (id < 0 || (size_t)id >= t->n_vocab) return NULL;
    return t->str_arena + t->str_off[id];
}

void tokenizer_merge_pair(const Tokenizer *t, size_t rank, int32_t *left_id, int32_t *right_id) {
    if (rank >= t->n_merges) {
        *left_id = *right_id = -1;
        return;
    }
    *left_id = t->merges[rank][0];
    *right_id = t->merges[rank][1];
}

const unsigned char *tokenizer_token_bytes(const Tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || (size_t)id >= t->n_vocab) {
        *len = 0;
        return NULL;
    }
    return tok_bytes(t, (uint32_t)id, len);
}

// ---------------------------------------------------------------- encoding

typedef struct {
    int32_t *ids;
    size_t n, cap;
} IdVec;

// Makes room for `more` ids.
static int idvec_reserve(IdVec *v, size_t more) {
    return more > SIZE_MAX - v->n ? -1 : grow_array(&v->ids, &v->cap, v->n + more, sizeof *v->ids);
}

static inline int idvec_push(IdVec *v, int32_t id) {
    if (v->n == v->cap && idvec_reserve(v, 1)) return -1;
    v->ids[v->n++] = id;
    return 0;
}

static int ensure_scratch(Tokenizer *t, size_t n) {
    if (n <= t->scratch_cap) return 0;
    size_t cap = n < 256 ? 256 : n;
    int32_t *tok = realloc(t->s_tok, cap * sizeof *tok);
    if (tok) t->s_tok = tok;
    uint32_t *nx = realloc(t->s_next, cap * sizeof *nx);
    if (nx) t->s_next = nx;
    uint32_t *pv = realloc(t->s_prev, cap * sizeof *pv);
    if (pv) t->s_prev = pv;
    // Each merge pushes at most two pairs: n - 1 initial + 2 (n - 1).
    uint64_t *hp = realloc(t->s_heap, 3 * cap * sizeof *hp);
    if (hp) t->s_heap = hp;
    if (!tok || !nx || !pv || !hp) return -1;
    t->scratch_cap = cap;
    return 0;
}

// Min-heap of (rank << 32 | position): lowest rank first, leftmost on a tie,
// which is the order tiktoken's scan merges in.
static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

// BPE on one piece of n >= 2 bytes: a linked list of parts over byte
// positions, and a heap of candidate merges checked lazily when popped (a
// stale entry no longer matches the pair at its position). O(n log n).
static int bpe_piece(Tokenizer *t, const unsigned char *p, size_t n, IdVec *out) {
    if (ensure_scratch(t, n)) return -1;
    int32_t *tok = t->s_tok;
    uint32_t *next = t->s_next, *prev = t->s_prev;
    uint64_t *heap = t->s_heap;
    size_t nh = 0;
    const uint32_t end = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        tok[i] = t->byte_token[p[i]];
        next[i] = (uint32_t)i + 1;
        prev[i] = (uint32_t)i - 1;  // wraps to UINT32_MAX for the first
    }
    int32_t merged;
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = pair_rank(t, tok[i], tok[i + 1], &merged);
        if (r != NO_RANK) heap_push(heap, &nh, (uint64_t)r << 32 | i);
    }
    while (nh) {
        uint64_t e = heap_pop(heap, &nh);
        uint32_t r = (uint32_t)(e >> 32), i = (uint32_t)e;
        if (tok[i] < 0) continue;
        uint32_t j = next[i];
        if (j == end) continue;
        if (pair_rank(t, tok[i], tok[j], &merged) != r) continue;
        tok[i] = merged;
        tok[j] = -1;
        next[i] = next[j];
        if (next[j] != end) prev[next[j]] = i;
        int32_t m2;
        if (prev[i] != UINT32_MAX) {
            uint32_t rr = pair_rank(t, tok[prev[i]], tok[i], &m2);
            if (rr != NO_RANK) heap_push(heap, &nh, (uint64_t)rr << 32 | prev[i]);
        }
        if (next[i] != end) {
            uint32_t rr = pair_rank(t, tok[i], tok[next[i]], &m2);
            if (rr != NO_RANK) heap_push(heap, &nh, (uint64_t)rr << 32 | i);
        }
    }
    for (uint32_t i = 0; i != end; i = next[i])
        if (idvec_push(out, tok[i])) return -1;
    return 0;
}

// One piece of the pre-tokenizer: from the cache, else a whole token if it
// is one (tiktoken's shortcut), else BPE. The cache comes first and holds
// single-token pieces too: one probe into it is cheaper than the id table.
static int encode_piece(Tokenizer *t, const unsigned char *p, size_t n, IdVec *out) {
    if (n == 1) return idvec_push(out, t->byte_token[p[0]]);
    uint64_t h = hash_bytes(p, n);
    CacheSlot *slot = NULL;
    if (n <= CACHE_KEY_MAX) {
        slot = &t->cache[(h >> 7) & (CACHE_SLOTS - 1)];
        if (slot->klen == n && slot->hash == h && memcmp(slot->key, p, n) == 0) {
            if (out->n + slot->nids > out->cap && idvec_reserve(out, slot->nids)) return -1;
            memcpy(out->ids + out->n, slot->ids, slot->nids * sizeof *out->ids);
            out->n += slot->nids;
            return 0;
        }
    }
    size_t start = out->n;
    int32_t id = idtable_find(t, &t->by_bytes, 1, p, n, h);
    if (id >= 0 && mergeable(t, id)) {
        if (idvec_push(out, id)) return -1;
    } else if (bpe_piece(t, p, n, out)) {
        return -1;
    }
    size_t got = out->n - start;
    if (slot && got <= CACHE_IDS_MAX) {
        slot->hash = h;
        slot->klen = (uint8_t)n;
        slot->nids = (uint8_t)got;
        memcpy(slot->key, p, n);
        memcpy(slot->ids, out->ids + start, got * sizeof *out->ids);
    }
    return 0;
}

// Class of the character at s[i] (of n), and its length in bytes.
static inline int char_at(const unsigned char *s, size_t n, size_t i, size_t *len) {
    // ASCII: letters, digits, the six white-space controls + space, other.
    static const unsigned char ascii[128] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0,
        0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
        0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
        1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
    };
    unsigned char c = s[i];
    if (c < 0x80) {
        *len = 1;
        return ascii[c];
    }
    int32_t cp;
    *len = utf8_decode(s + i, n - i, &cp);
    if (cp < 0) *len = 1;  // each stray byte is its own "other" character
    return cp_class(cp);
}

// Length of the pre-tokenizer piece starting at s[i] (i < n), per
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// tried in that order at i, as the regex engine does.
static size_t next_piece(const unsigned char *s, size_t n, size_t i) {
    size_t start = i, len;
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char a = s[i + 1], b = i + 2 < n ? s[i + 2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    int cls = char_at(s, n, i, &len);
    if (s[i] == ' ' && i + 1 < n) {
        size_t l2;
        int c2 = char_at(s, n, i + 1, &l2);
        if (c2 != C_SPACE) {
            cls = c2;  // " ?X+": the space leads a run of X
            i += 1;
            len = l2;
        }
    }
    if (cls != C_SPACE) {
        i += len;
        while (i < n && char_at(s, n, i, &len) == cls) i += len;
        return i - start;
    }
    // White space: the whole run if it ends the text; else all but its last
    // character, which goes with what follows ("\s+(?!\S)"); a single white-
    // space character before a non-space stands alone ("\s+").
    size_t last = i;
    i += len;
    while (i < n && char_at(s, n, i, &len) == C_SPACE) {
        last = i;
        i += len;
    }
    if (i == n || last == start) return i - start;
    return last - start;
}

static int encode_ordinary(Tokenizer *t, const unsigned char *s, size_t n, IdVec *out) {
    for (size_t i = 0; i < n;) {
        size_t k = next_piece(s, n, i);
        if (encode_piece(t, s + i, k, out)) return -1;
        i += k;
    }
    return 0;
}

// First occurrence of needle (nl >= 1 bytes) in hay, or NULL.
static const unsigned char *find(const unsigned char *hay, size_t n, const unsigned char *needle,
                                 size_t nl) {
    for (const unsigned char *p = hay; nl && (size_t)(hay + n - p) >= nl;) {
        p = memchr(p, needle[0], (size_t)(hay + n - p) - nl + 1);
        if (!p) return NULL;
        if (memcmp(p, needle, nl) == 0) return p;
        p++;
    }
    return NULL;
}

int tokenizer_encode(Tokenizer *t, const char *text, size_t len, int allow_special,
                     int32_t **ids, size_t *n_ids, GptError *err) {
    *ids = NULL;
    *n_ids = 0;
    if (len > UINT32_MAX - 1)
        return gpt_error(err, "tokenizer_encode: text of %zu bytes is too long", len);
    IdVec v = {NULL, 0, 0};
    const unsigned char *s = (const unsigned char *)text;
    int failed = 0;
    if (allow_special && t->eot >= 0) {
        const char *sp = t->str_arena + t->str_off[t->eot];
        size_t sl = strlen(sp), i = 0;
        // The text between special tokens is encoded as if it were all there
        // is, which is what tiktoken does (it matters for "\s+(?!\S)").
        while (!failed && i < len) {
            const unsigned char *hit = find(s + i, len - i, (const unsigned char *)sp, sl);
            size_t stop = hit ? (size_t)(hit - s) : len;
            failed = encode_ordinary(t, s + i, stop - i, &v);
            if (!failed && hit) failed = idvec_push(&v, t->eot);
            i = hit ? stop + sl : len;
        }
    } else {
        failed = encode_ordinary(t, s, len, &v);
    }
    if (!failed && !v.ids) failed = idvec_reserve(&v, 1);  // *ids is never NULL on success
    if (failed) {
        free(v.ids);
        return gpt_error(err, "tokenizer_encode: out of memory");
    }
    *ids = v.ids;
    *n_ids = v.n;
    return 0;
}

// ---------------------------------------------------------------- decoding

int tokenizer_decode(const Tokenizer *t, const int32_t *ids, size_t n, char **out,
                     size_t *out_len, GptError *err) {
    *out = NULL;
    *out_len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_vocab)
            return gpt_error(err, "tokenizer_decode: id %d at position %zu is outside the vocabulary (0..%zu)",
                             (int)ids[i], i, t->n_vocab - 1);
        total += t->byte_off[ids[i] + 1] - t->byte_off[ids[i]];
    }
    char *buf = malloc(total + 1);
    if (!buf) return gpt_error(err, "tokenizer_decode: out of memory");
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const unsigned char *b = tok_bytes(t, (uint32_t)ids[i], &len);
        memcpy(buf + o, b, len);
        o += len;
    }
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    return 0;
}

void token_stream_init(TokenStream *s) { memset(s, 0, sizeof *s); }

void token_stream_free(TokenStream *s) {
    if (!s) return;
    free(s->buf);
    memset(s, 0, sizeof *s);
}

int token_stream_push_bytes(TokenStream *s, const unsigned char *bytes, size_t len,
                            const char **out, size_t *out_len, GptError *err) {
    *out = "";
    *out_len = 0;
    // Worst case every byte (held ones included) becomes a 3-byte U+FFFD.
    if (len > (SIZE_MAX - 16) / 3 || grow_array(&s->buf, &s->cap, 3 * (len + s->n_pending) + 1, 1) != 0)
        return gpt_error(err, "token_stream_push: out of memory");
    size_t o = 0, i = 0;
    // First complete (or give up on) the held prefix, byte by byte.
    while (s->n_pending && i < len) {
        s->pending[s->n_pending++] = bytes[i++];
        int32_t cp;
        size_t k = utf8_decode(s->pending, s->n_pending, &cp);
        if (cp == UTF8_INCOMPLETE) continue;  // still a valid prefix
        if (cp >= 0) {
            memcpy(s->buf + o, s->pending, k);
            o += k;
            s->n_pending = 0;
        } else {
            // pending[0..k) can never complete; the byte that broke it starts
            // over (it may begin a new character).
            memcpy(s->buf + o, UTF8_REPLACEMENT, 3);
            o += 3;
            i -= s->n_pending - k;
            s->n_pending = 0;
        }
    }
    while (i < len) {
        int32_t cp;
        size_t k = utf8_decode(bytes + i, len - i, &cp);
        if (cp >= 0) {
            memcpy(s->buf + o, bytes + i, k);
            o += k;
        } else if (cp == UTF8_INVALID) {
            memcpy(s->buf + o, UTF8_REPLACEMENT, 3);
            o += 3;
        } else {
            memcpy(s->pending, bytes + i, k);
            s->n_pending = k;
        }
        i += k;
    }
    *out = s->buf;
    *out_len = o;
    return 0;
}

int token_stream_push(TokenStream *s, const Tokenizer *t, int32_t id, const char **out,
                      size_t *out_len, GptError *err) {
    size_t len;
    const unsigned char *b = tokenizer_token_bytes(t, id, &len);
    if (!b) {
        *out = "";
        *out_len = 0;
        return gpt_error(err, "token_stream_push: id %d is outside the vocabulary (0..%zu)",
                         (int)id, t->n_vocab - 1);
    }
    return token_stream_push_bytes(s, b, len, out, out_len, err);
}

void token_stream_flush(TokenStream *s, const char **out, size_t *out_len) {
    if (s->n_pending) {
        *out = UTF8_REPLACEMENT;
        *out_len = 3;
    } else {
        *out = "";
        *out_len = 0;
    }
    s->n_pending = 0;
}

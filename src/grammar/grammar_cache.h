/*
 * grammar_cache.h - the masker's cache of stack suffixes' walks
 * (grammar_cache.c; grammar_mask.c says what an entry holds and why). Not
 * for users of the module: they include grammar.h.
 */
#ifndef GPT_GRAMMAR_CACHE_H
#define GPT_GRAMMAR_CACHE_H

#include "grammar/grammar_impl.h"

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

// Entries by key, in a table of MASK_SLOTS, emptied when half full or past
// max_bytes; their masks, keys and pops one after another in a store of
// reserved address space (emptied with the table), on huge pages, since a
// fresh 4 KiB page is a fault (microseconds on a virtual machine) and a
// one-process run's masks are mostly new (docs/performance.md).
typedef struct {
    CacheEntry *slot;  // open addressing, n_slots (a power of two)
    size_t n_slots, n_used, bytes;
    unsigned char *store;
    size_t store_used, store_cap;
    void *reserved;    // the table and its store
    size_t max_bytes;  // the bound on bytes (its share of max_cache_bytes)
    size_t W;          // the masks' words
} MaskCache;

// An empty cache of masks of W words within max_bytes. 0, or -1: out of memory.
int cache_init(MaskCache *c, size_t W, size_t max_bytes);
void cache_free(MaskCache *c);
// The hash of the key (positions p[0..n), and the bytes below).
uint64_t cache_hash(const uint32_t *p, size_t n, const GClass *below);
// The entry of that key (h its hash), or NULL.
const CacheEntry *cache_find(const MaskCache *c, uint64_t h, const uint32_t *p, size_t n, const GClass *below);
// Keeps a copy of e (its key, mask and pops) when it fits, emptying the
// cache first when it would pass max_bytes or its table would be more than
// half full: the copy, or NULL when not kept.
const CacheEntry *cache_keep(MaskCache *c, const CacheEntry *e);

#endif

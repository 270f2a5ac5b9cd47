/*
 * grammar_cache.c - the masker's cache of stack suffixes' walks (MaskCache,
 * grammar_cache.h): open addressing by the key's hash, the entries' arrays
 * in one store. An entry costs V/8 bytes of mask (6.3 KB for GPT-2) + 4
 * per key position + 8 per kept pop edge + the entry itself; the table
 * does not grow, and the cache is emptied whole when an entry would pass
 * its bound.
 */
#include "grammar/grammar_cache.h"

#include <string.h>

#include "base/memory.h"

// Slots of the table: emptied when half full.
#define MASK_SLOTS 4096

static size_t table_bytes(size_t n_slots) { return (n_slots * sizeof(CacheEntry) + 63) & ~(size_t)63; }

int cache_init(MaskCache *c, size_t W, size_t max_bytes) {
    memset(c, 0, sizeof *c);
    c->n_slots = MASK_SLOTS;
    c->W = W;
    c->max_bytes = max_bytes;
    // the table, then the store, in one reservation (zero-filled: the table starts empty)
    c->store_cap = max_bytes;
    c->reserved = memory_reserve(table_bytes(c->n_slots) + c->store_cap);
    if (!c->reserved) return -1;
    c->slot = (CacheEntry *)c->reserved;
    c->store = (unsigned char *)c->reserved + table_bytes(c->n_slots);
    memory_poison(c->store, c->store_cap);  // its entries are made usable as they are kept
    return 0;
}

void cache_free(MaskCache *c) {
    if (c->reserved) {
        memory_unpoison(c->store, c->store_cap);  // poisoned past its kept entries
        memory_release(c->reserved, table_bytes(c->n_slots) + c->store_cap);
    }
    memset(c, 0, sizeof *c);
}

static void cache_clear(MaskCache *c) {
    memset(c->slot, 0, c->n_slots * sizeof *c->slot);
    c->n_used = 0;
    c->bytes = 0;
    memory_poison(c->store, c->store_used);
    c->store_used = 0;
}

uint64_t cache_hash(const uint32_t *p, size_t n, const GClass *below) {
    uint64_t h = hash_positions(p, n);
    for (int i = 0; i < 4; i++) h = (h ^ below->bits[i]) * 1099511628211ull;
    return h;
}

const CacheEntry *cache_find(const MaskCache *c, uint64_t h, const uint32_t *p, size_t n, const GClass *below) {
    for (size_t slot = (size_t)h & (c->n_slots - 1); c->slot[slot].mask; slot = (slot + 1) & (c->n_slots - 1)) {
        const CacheEntry *e = &c->slot[slot];
        if (e->hash == h && e->key_len == n && memcmp(e->key, p, n * sizeof *p) == 0 &&
            memcmp(&e->below, below, sizeof e->below) == 0)
            return e;
    }
    return NULL;
}

const CacheEntry *cache_keep(MaskCache *c, const CacheEntry *e) {
    size_t W = c->W, n = e->key_len;
    size_t bytes = W * sizeof *e->mask + (n + 2 * e->n_pops) * sizeof *e->key + sizeof(CacheEntry);
    if (bytes > c->max_bytes) return NULL;
    if (c->bytes + bytes > c->max_bytes || 2 * (c->n_used + 1) > c->n_slots) cache_clear(c);
    size_t slot = (size_t)e->hash & (c->n_slots - 1);
    while (c->slot[slot].mask) slot = (slot + 1) & (c->n_slots - 1);
    // its mask, key and pops in the store (each entry's start 64-byte
    // aligned; what it holds is at most bytes, which counts more per entry
    // than the alignment takes)
    size_t stored = (W * sizeof(uint64_t) + (n + 2 * e->n_pops) * sizeof *e->key + 63) & ~(size_t)63;
    if (stored > c->store_cap - c->store_used) return NULL;
    uint64_t *m = (uint64_t *)(void *)(c->store + c->store_used);
    uint32_t *key = (uint32_t *)(void *)(m + W), *pops = key + n;
    memory_unpoison(m, W * sizeof *m + (n + 2 * e->n_pops) * sizeof *key);
    c->store_used += stored;
    memcpy(key, e->key, n * sizeof *key);
    if (e->n_pops) memcpy(pops, e->pops, 2 * e->n_pops * sizeof *pops);  // no pops: e->pops may be NULL
    memcpy(m, e->mask, W * sizeof *m);
    CacheEntry *kept = &c->slot[slot];
    *kept = *e;
    kept->key = key;
    kept->mask = m;
    kept->pops = pops;
    c->n_used++;
    c->bytes += bytes;
    return kept;
}

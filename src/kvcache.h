/*
 * kvcache.h - the keys and values a sequence has seen, and what they cost.
 *
 * At decode time one new query attends over every cached key and value, so
 * the cache is laid out for that read: per layer and head, the keys of all
 * positions are one contiguous (capacity, HS) block, and so are the values.
 * Attention of head h is then two plain matmuls over contiguous memory.
 *
 *   k: (L, NH, capacity, HS)      v: (L, NH, capacity, HS)
 *
 * Memory per token: 2 (K and V) x L x NH x HS x sizeof(float); for GPT-2
 * 124M 2 x 12 x 12 x 64 x 4 = 73,728 bytes. The cache is allocated for what a
 * run can use (prompt + new tokens, capped at the context), not always for the
 * full context. This module only stores; forward.c writes and reads.
 */
#ifndef GPT_KVCACHE_H
#define GPT_KVCACHE_H

#include <stddef.h>

#include "error.h"
#include "model.h"

typedef struct {
    size_t n_layer, n_head, head_size;  // L, NH, HS
    size_t capacity;   // positions it can hold
    size_t n_tokens;   // positions held: the next token's position
    float *k;          // (L, NH, capacity, HS)
    float *v;          // (L, NH, capacity, HS)
} KVCache;

// Allocates a cache for `capacity` positions (1 <= capacity <= n_ctx).
// Returns 0 or -1 with err set.
int kvcache_init(KVCache *c, const GPT2Config *cfg, size_t capacity, GptError *err);
// NULL-safe, idempotent.
void kvcache_free(KVCache *c);
// Forget every position (the memory stays).
void kvcache_reset(KVCache *c);

// Bytes one position costs: 2 * L * NH * HS * sizeof(float).
size_t kvcache_bytes_per_token(const GPT2Config *cfg);
// Bytes this cache allocated (capacity positions).
size_t kvcache_bytes_allocated(const KVCache *c);

// The (capacity, HS) key / value block of one layer and head.
static inline float *kvcache_keys(const KVCache *c, size_t layer, size_t head) {
    return c->k + ((layer * c->n_head + head) * c->capacity) * c->head_size;
}
static inline float *kvcache_values(const KVCache *c, size_t layer, size_t head) {
    return c->v + ((layer * c->n_head + head) * c->capacity) * c->head_size;
}

#endif

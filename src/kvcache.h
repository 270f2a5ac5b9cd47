/*
 * kvcache.h - the keys and values a sequence has seen, and what they cost.
 *
 * Positions are stored in blocks of KV_BLOCK = 16. A block holds those 16
 * positions for every layer and head, and within it each (layer, head) has
 *   keys   (HS, 16)   transposed: the 16 positions' values of dimension d
 *                     side by side, so that 16 scores are one vector sum
 *   values (16, HS)   one row per position
 * A sequence's cache is a table of blocks (block i holds positions
 * [16 i, 16 i + 16)). The blocks may lie anywhere: a cache of its own
 * (kvcache_init) or, later, a pool shared by many sequences.
 *
 * Elements are float32, or float16 (KV_F16: half the bytes, converted on
 * every read and write). Memory per position: 2 (K and V) x L x NH x HS x
 * element size; for GPT-2 124M 2 x 12 x 12 x 64 x 4 = 73,728 bytes in
 * float32, 36,864 in float16. This module only stores and counts; forward.c
 * and attention.c write and read.
 */
#ifndef GPT_KVCACHE_H
#define GPT_KVCACHE_H

#include <stddef.h>

#include "dtype.h"
#include "error.h"
#include "model.h"

enum { KV_BLOCK = 16 };

typedef struct {
    size_t n_layer, n_head, head_size;  // L, NH, HS
    DType dtype;         // DTYPE_F32 or DTYPE_F16
    size_t capacity;     // positions it may hold
    size_t n_tokens;     // positions held: the next token's position
    size_t block_bytes;  // one block: KV_BLOCK positions, every layer and head
    unsigned char **blocks;  // (ceil(capacity / KV_BLOCK)) the block of positions [16 i, 16 i + 16)
    unsigned char *own;  // the blocks' memory, when the cache has its own
} KVCache;

// Allocates a cache of its own for `capacity` positions (1 <= capacity <=
// n_ctx) of element type dtype (F32 or F16), rounded up to whole blocks.
// Returns 0 or -1 with err set.
int kvcache_init(KVCache *c, const GPT2Config *cfg, DType dtype, size_t capacity, GptError *err);
// NULL-safe, idempotent.
void kvcache_free(KVCache *c);
// Forget every position (the memory stays).
void kvcache_reset(KVCache *c);

// Bytes one position costs: 2 * L * NH * HS * element size.
size_t kvcache_bytes_per_token(const GPT2Config *cfg, DType dtype);
// Bytes this cache allocated (whole blocks).
size_t kvcache_bytes_allocated(const KVCache *c);
// Bytes of one element of dtype (4 or 2).
static inline size_t kv_elem_size(DType dtype) { return dtype == DTYPE_F16 ? 2 : 4; }

// The keys (HS, 16) and values (16, HS) of one layer and head in block b.
static inline void *kvcache_block_keys(const KVCache *c, size_t b, size_t layer, size_t head) {
    size_t per_head = 2 * KV_BLOCK * c->head_size * kv_elem_size(c->dtype);
    return c->blocks[b] + (layer * c->n_head + head) * per_head;
}
static inline void *kvcache_block_values(const KVCache *c, size_t b, size_t layer, size_t head) {
    return (unsigned char *)kvcache_block_keys(c, b, layer, head) +
           KV_BLOCK * c->head_size * kv_elem_size(c->dtype);
}

// Writes position pos's key k (HS) and value v (HS) of one layer and head.
void kvcache_store(KVCache *c, size_t layer, size_t head, size_t pos, const float *k, const float *v);

#endif

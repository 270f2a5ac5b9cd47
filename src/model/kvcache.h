/*
 * kvcache.h - the keys and values a sequence has seen, where they live, and
 * what they cost.
 *
 * Positions are stored in blocks of KV_BLOCK = 16. A block holds those 16
 * positions for every layer and head, and within it each (layer, head) has
 *   keys   (HS, 16)   transposed: the 16 positions' values of dimension d
 *                     side by side, so that 16 scores are one vector sum
 *   values (16, HS)   one row per position
 * A sequence's cache is a table of blocks: block i holds its positions
 * [16 i, 16 i + 16). The blocks come from a KVPool, a budget of blocks that
 * many sequences draw on as they grow; a pool can also remember which
 * tokens a block holds, so that a prompt starting with the same tokens as an
 * earlier one shares its blocks instead of computing them again (prefix
 * sharing; reference counts, and a copy where a shared block would be
 * written). kvcache_init makes a cache with a small pool of its own.
 *
 * Elements are float32, or float16 (half the bytes, converted on every read
 * and write). Memory per position: 2 (K and V) x L x NH x HS x element
 * size; for GPT-2 124M 2 x 12 x 12 x 64 x 4 = 73,728 bytes in float32,
 * 36,864 in float16. This module only stores and counts; forward.c and
 * attention.c write and read, the engine decides who gets which block.
 */
#ifndef GPT_KVCACHE_H
#define GPT_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "model/dtype.h"
#include "base/error.h"
#include "model/model.h"

enum { KV_BLOCK = 16 };

typedef struct KVPool KVPool;

typedef struct {
    size_t n_layer, n_head, head_size;  // L, NH, HS
    DType dtype;         // DTYPE_F32 or DTYPE_F16
    size_t block_bytes;  // one block: KV_BLOCK positions, every layer and head
    size_t capacity;     // positions it may hold now (its blocks x KV_BLOCK, at most max_positions)
    size_t max_positions;
    size_t n_tokens;     // positions held: the next token's position
    unsigned char **blocks;  // (max_blocks) the memory of block i
    uint32_t *block_ids;     // (max_blocks) block i's number in the pool
    size_t n_blocks, max_blocks;
    KVPool *pool;            // where the blocks come from
    KVPool *own_pool;        // the pool kvcache_init made, else NULL
    uint64_t salt;           // prefix sharing joins caches of one salt only: what else
                             // than the tokens decides the positions (a run-time
                             // adapter); 0: the base model's
} KVCache;

// A cache with a pool of its own for `capacity` positions (1 <= capacity <=
// n_ctx) of element type dtype (F32 or F16), its blocks taken at once.
// Returns 0 or -1 with err set.
int kvcache_init(KVCache *c, const GPT2Config *cfg, DType dtype, size_t capacity, GptError *err);
// Gives the blocks back to the pool (and frees an own pool). NULL-safe,
// idempotent.
void kvcache_free(KVCache *c);
// Forget every position (the blocks stay).
void kvcache_reset(KVCache *c);

// Bytes one position costs: 2 * L * NH * HS * element size.
size_t kvcache_bytes_per_token(const GPT2Config *cfg, DType dtype);
// Bytes of the blocks this cache holds.
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

// ---------------------------------------------------------------------------
// the pool

// The most blocks a pool holds: their numbers are 32-bit.
#define KVPOOL_MAX_BLOCKS ((size_t)UINT32_MAX - 1)

// A pool of n_blocks (1..KVPOOL_MAX_BLOCKS) blocks for caches of this
// configuration and dtype. Its memory is address space, reserved at once
// and taken up only as blocks are first used: n_blocks is an upper limit,
// and a pool far larger than what its caches use costs what they use.
KVPool *kvpool_create(const GPT2Config *cfg, DType dtype, size_t n_blocks, GptError *err);
void kvpool_free(KVPool *p);  // NULL-safe; every cache of the pool must be freed first

typedef struct {
    size_t block_bytes, n_blocks;
    size_t held;          // blocks some sequence holds now
    size_t peak_held;     // the most held at once
    size_t cached;        // blocks no sequence holds that still remember a prompt's tokens
    size_t reserved;      // blocks promised to running sequences (kvpool_reserve)
    size_t touched;       // blocks ever used: the part of the pool that has taken memory
} KVPoolStats;
KVPoolStats kvpool_stats(const KVPool *p);

// Blocks a new sequence could be promised: those nobody holds or reserved.
size_t kvpool_available(const KVPool *p);
// Promises n blocks (a sequence's worst case, so that it never waits once
// running); 0, or -1 if fewer are available. kvpool_unreserve gives back
// what is left of a promise.
int kvpool_reserve(KVPool *p, size_t n);
void kvpool_unreserve(KVPool *p, size_t n);

// An empty cache drawing on pool p, for up to max_positions positions. 0 or
// -1 with err set.
int kvcache_attach(KVCache *c, KVPool *p, size_t max_positions, GptError *err);
// Takes blocks from the pool until the cache can hold `positions`; they
// come out of the caller's reservation. 0, or -1 if the pool has none left.
int kvcache_grow(KVCache *c, size_t positions);

// Prefix sharing. A pool remembers, for every block a prompt fills, the
// tokens it holds (and, by a chain of hashes, all the prompt's tokens before
// it), for as long as the block is not given to another sequence.
// kvcache_share_prefix looks for the longest run of tokens[0..n - 1) whose
// positions such blocks hold, computed, and attaches it to the empty cache
// c: whole blocks are shared (reference counts); a block that matches only
// in part is copied into a block of c's own (copy on write, one block of the
// caller's reservation). The last token is always left to compute (its
// logits are needed). Sets c->n_tokens to the positions matched and returns
// it; *shared_blocks gets the whole blocks shared. When a longer match is
// being computed right now by another sequence, it attaches nothing, sets
// *wait and returns 0: the caller should try again after that sequence's
// next step, rather than compute the same positions twice.
size_t kvcache_share_prefix(KVCache *c, const int32_t *tokens, size_t n, size_t *shared_blocks, int *wait);
// Records that c's blocks hold prompt tokens [0, n) (which the caller runs
// through the model), so that later prompts can share them.
void kvcache_register_prompt(KVCache *c, const int32_t *tokens, size_t n);
// Records that c now holds computed positions [0, c->n_tokens).
void kvcache_mark_filled(KVCache *c);

// Cuts c back to its first n positions (n <= c->n_tokens): what comes after
// is forgotten and will be written again (speculative decoding drops the
// positions of rejected proposals this way). c keeps its blocks, but every
// block from the one holding position n on that is shared with another
// cache is first replaced by one of its own, with the kept positions copied
// (copy on write, as kvcache_share_prefix does). Those blocks come from the
// pool's unpromised ones (a sequence's promise did not count shared
// blocks); *copies gets how many. Returns 0, or -1 when the pool has too
// few (then c is unchanged).
int kvcache_truncate(KVCache *c, size_t n, size_t *copies);

#endif

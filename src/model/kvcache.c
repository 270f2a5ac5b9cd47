/*
 * kvcache.c - see kvcache.h.
 *
 * The pool keeps, per block: a reference count (the caches that hold it),
 * how many of its positions are computed, and, when a prompt filled it, the
 * prompt's tokens in it with two hashes: of all the prompt's tokens before
 * the block (parent) and through it (key). A prompt matches a chain of
 * blocks if each block's parent is the hash of everything matched before it
 * and its tokens are the prompt's next ones; a 64-bit chained hash makes a
 * false match of two different histories about 2^-64 likely.
 *
 * Free blocks: never registered ones first (those given back, then those
 * never used, in the order of their numbers); then registered ones that no
 * sequence holds (a prefix a later prompt may still share), the least
 * recently used first.
 *
 * The pool's memory and its per-block records are address space, reserved
 * at once and taken up as blocks are first used (memory_reserve): blocks
 * from n_used on have never been touched, so a budget far above what a run
 * uses costs nothing, and the searches below look at used blocks alone.
 */
#include "model/kvcache.h"

#include <stdlib.h>
#include <string.h>

#include "base/memory.h"

enum { NO_BLOCK = UINT32_MAX };

typedef struct {
    uint32_t refs;           // caches holding the block
    uint16_t filled;         // positions computed, 0..KV_BLOCK
    uint16_t n_known;        // prompt tokens registered in it, 0 = not registered
    int32_t tokens[KV_BLOCK];
    uint64_t parent, key;    // hash of the prompt before the block / through it
    uint64_t last_use;       // for eviction
} BlockInfo;

struct KVPool {
    size_t n_layer, n_head, head_size, block_bytes;
    DType dtype;
    size_t n_blocks;
    size_t n_used;           // blocks ever taken: 0..n_used-1; the rest untouched
    unsigned char *mem;      // n_blocks * block_bytes
    BlockInfo *info;         // (n_blocks)
    uint32_t *free_list;     // (n_blocks) used, unregistered blocks nobody holds
    size_t n_free;
    size_t held, peak_held, reserved;
    uint64_t tick;
};

size_t kvcache_bytes_per_token(const GPT2Config *cfg, DType dtype) {
    size_t head_size = (size_t)cfg->n_embd / (size_t)cfg->n_head;
    return 2 * (size_t)cfg->n_layer * (size_t)cfg->n_head * head_size * kv_elem_size(dtype);
}

// ---------------------------------------------------------------------------
// the pool

KVPool *kvpool_create(const GPT2Config *cfg, DType dtype, size_t n_blocks, GptError *err) {
    if (dtype != DTYPE_F32 && dtype != DTYPE_F16) {
        gpt_error(err, "kvcache: element type %s; the cache holds F32 or F16",
                  dtype_name(dtype) ? dtype_name(dtype) : "?");
        return NULL;
    }
    if (n_blocks < 1 || n_blocks > KVPOOL_MAX_BLOCKS) {
        gpt_error(err, "kvcache: a pool of %zu blocks", n_blocks);
        return NULL;
    }
    KVPool *p = calloc(1, sizeof *p);
    if (!p) {
        gpt_error(err, "kvcache: out of memory");
        return NULL;
    }
    p->n_layer = (size_t)cfg->n_layer;
    p->n_head = (size_t)cfg->n_head;
    p->head_size = (size_t)cfg->n_embd / (size_t)cfg->n_head;
    p->dtype = dtype;
    p->block_bytes = kvcache_bytes_per_token(cfg, dtype) * KV_BLOCK;
    p->n_blocks = n_blocks;
    // Reserved, not allocated: a page takes memory when a block first uses
    // it (a position is written before it is read: attention reads only the
    // positions a query may see). The records start zeroed, as calloc's.
    if (n_blocks > SIZE_MAX / p->block_bytes) {
        gpt_error(err, "kvcache: %zu blocks of %zu bytes exceed the address space", n_blocks, p->block_bytes);
        free(p);
        return NULL;
    }
    p->mem = memory_reserve(n_blocks * p->block_bytes);
    p->info = memory_reserve(n_blocks * sizeof *p->info);
    p->free_list = memory_reserve(n_blocks * sizeof *p->free_list);
    if (!p->mem || !p->info || !p->free_list) {
        gpt_error(err, "kvcache: cannot reserve the address space of %zu blocks of %zu bytes", n_blocks,
                  p->block_bytes);
        kvpool_free(p);
        return NULL;
    }
    return p;
}

void kvpool_free(KVPool *p) {
    if (!p) return;
    memory_release(p->mem, p->n_blocks * p->block_bytes);
    memory_release(p->info, p->n_blocks * sizeof *p->info);
    memory_release(p->free_list, p->n_blocks * sizeof *p->free_list);
    free(p);
}

static size_t evictable(const KVPool *p) {
    size_t n = 0;
    for (size_t i = 0; i < p->n_used; i++) n += p->info[i].refs == 0 && p->info[i].n_known > 0;
    return n;
}

KVPoolStats kvpool_stats(const KVPool *p) {
    KVPoolStats s = {p->block_bytes, p->n_blocks, p->held, p->peak_held, evictable(p), p->reserved, p->n_used};
    return s;
}

size_t kvpool_available(const KVPool *p) {
    size_t unheld = p->n_blocks - p->held;
    return unheld > p->reserved ? unheld - p->reserved : 0;
}

int kvpool_reserve(KVPool *p, size_t n) {
    if (n > kvpool_available(p)) return -1;
    p->reserved += n;
    return 0;
}

void kvpool_unreserve(KVPool *p, size_t n) { p->reserved -= n < p->reserved ? n : p->reserved; }

static void unregister(BlockInfo *b) {
    b->n_known = 0;
    b->parent = b->key = 0;
}

// A block for a cache to write: a never-registered free one (one given back,
// else the lowest never used: a small run touches only the start of the
// memory), else the least recently used registered one nobody holds (its
// prefix is forgotten).
static uint32_t take_block(KVPool *p) {
    uint32_t id = NO_BLOCK;
    if (p->n_free) {
        id = p->free_list[--p->n_free];
    } else if (p->n_used < p->n_blocks) {
        id = (uint32_t)p->n_used++;
    } else {
        uint64_t oldest = UINT64_MAX;
        for (size_t i = 0; i < p->n_used; i++)
            if (p->info[i].refs == 0 && p->info[i].n_known > 0 && p->info[i].last_use < oldest)
                oldest = p->info[i].last_use, id = (uint32_t)i;
        if (id == NO_BLOCK) return NO_BLOCK;
        unregister(&p->info[id]);
    }
    BlockInfo *b = &p->info[id];
    b->refs = 1;
    b->filled = 0;
    p->held++;
    if (p->held > p->peak_held) p->peak_held = p->held;
    return id;
}

static void hold_block(KVPool *p, uint32_t id) {
    if (p->info[id].refs++ == 0) {
        p->held++;
        if (p->held > p->peak_held) p->peak_held = p->held;
    }
}

static void release_block(KVPool *p, uint32_t id) {
    BlockInfo *b = &p->info[id];
    if (--b->refs > 0) return;
    p->held--;
    b->last_use = ++p->tick;
    // A registered block keeps what it knows only as far as it is computed.
    if (b->n_known > b->filled) b->n_known = b->filled;
    if (b->n_known == 0) {
        unregister(b);
        p->free_list[p->n_free++] = id;
    }
}

// ---------------------------------------------------------------------------
// caches

static void add_block(KVCache *c, uint32_t id) {
    c->block_ids[c->n_blocks] = id;
    c->blocks[c->n_blocks] = c->pool->mem + (size_t)id * c->pool->block_bytes;
    c->n_blocks++;
    size_t cap = c->n_blocks * KV_BLOCK;
    c->capacity = cap < c->max_positions ? cap : c->max_positions;
}

int kvcache_attach(KVCache *c, KVPool *p, size_t max_positions, GptError *err) {
    memset(c, 0, sizeof *c);
    c->n_layer = p->n_layer;
    c->n_head = p->n_head;
    c->head_size = p->head_size;
    c->dtype = p->dtype;
    c->block_bytes = p->block_bytes;
    c->pool = p;
    c->max_positions = max_positions;
    c->max_blocks = (max_positions + KV_BLOCK - 1) / KV_BLOCK;
    c->blocks = malloc((c->max_blocks ? c->max_blocks : 1) * sizeof *c->blocks);
    c->block_ids = malloc((c->max_blocks ? c->max_blocks : 1) * sizeof *c->block_ids);
    if (!c->blocks || !c->block_ids) {
        kvcache_free(c);
        return gpt_error(err, "kvcache: out of memory");
    }
    return 0;
}

int kvcache_grow(KVCache *c, size_t positions) {
    if (positions > c->max_positions) return -1;
    while (c->n_blocks * KV_BLOCK < positions) {
        uint32_t id = take_block(c->pool);
        if (id == NO_BLOCK) return -1;
        kvpool_unreserve(c->pool, 1);
        add_block(c, id);
    }
    return 0;
}

int kvcache_init(KVCache *c, const GPT2Config *cfg, DType dtype, size_t capacity, GptError *err) {
    memset(c, 0, sizeof *c);
    if (capacity < 1 || capacity > (size_t)cfg->n_ctx)
        return gpt_error(err, "kvcache: capacity %zu outside [1, %d]", capacity, cfg->n_ctx);
    size_t n_blocks = (capacity + KV_BLOCK - 1) / KV_BLOCK;
    KVPool *p = kvpool_create(cfg, dtype, n_blocks, err);
    if (!p) return -1;
    if (kvcache_attach(c, p, capacity, err) != 0) {
        kvpool_free(p);
        return -1;
    }
    c->own_pool = p;
    kvpool_reserve(p, n_blocks);
    kvcache_grow(c, capacity);  // cannot fail: the pool is exactly this big
    return 0;
}

void kvcache_free(KVCache *c) {
    if (!c) return;
    for (size_t i = 0; c->pool && i < c->n_blocks; i++) release_block(c->pool, c->block_ids[i]);
    kvpool_free(c->own_pool);
    free(c->blocks);
    free(c->block_ids);
    memset(c, 0, sizeof *c);
}

void kvcache_reset(KVCache *c) { c->n_tokens = 0; }

size_t kvcache_bytes_allocated(const KVCache *c) { return c->n_blocks * c->block_bytes; }

void kvcache_store(KVCache *c, size_t layer, size_t head, size_t pos, const float *k, const float *v) {
    size_t HS = c->head_size, b = pos / KV_BLOCK, slot = pos % KV_BLOCK;
    void *kb = kvcache_block_keys(c, b, layer, head), *vb = kvcache_block_values(c, b, layer, head);
    if (c->dtype == DTYPE_F16) {
        uint16_t *kk = kb, *vv = (uint16_t *)vb + slot * HS;
        for (size_t d = 0; d < HS; d++) kk[d * KV_BLOCK + slot] = f32_to_f16(k[d]);
        for (size_t d = 0; d < HS; d++) vv[d] = f32_to_f16(v[d]);
    } else {
        float *kk = kb;
        for (size_t d = 0; d < HS; d++) kk[d * KV_BLOCK + slot] = k[d];
        memcpy((float *)vb + slot * HS, v, HS * sizeof(float));
    }
}

// ---------------------------------------------------------------------------
// prefix sharing

static uint64_t chain_hash(uint64_t parent, const int32_t *tokens, size_t n) {
    uint64_t h = parent ^ 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)tokens[i];
        h *= 0x100000001B3ull;  // FNV-1a step, then splitmix's finaliser below
        h ^= h >> 29;
    }
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

enum { ROOT = 0x2545F4914F6CDD1Dull };

// The registered block under `parent` sharing the longest run with
// tokens[0..n) (n <= KV_BLOCK), counting its known tokens only, or, with
// computed_only, its computed ones. *len gets the run.
static uint32_t best_child(const KVPool *p, uint64_t parent, const int32_t *tokens, size_t n, int computed_only,
                           size_t *len) {
    uint32_t best = NO_BLOCK;
    *len = 0;
    for (size_t i = 0; i < p->n_used; i++) {
        const BlockInfo *b = &p->info[i];
        if (!b->n_known || b->parent != parent) continue;
        size_t limit = computed_only && b->filled < b->n_known ? b->filled : b->n_known;
        if (limit > n) limit = n;
        size_t k = 0;
        while (k < limit && b->tokens[k] == tokens[k]) k++;
        if (k > *len) *len = k, best = (uint32_t)i;
    }
    return best;
}

// Positions of tokens[0..n) that registered blocks hold (computed_only: and
// have computed); *full_blocks gets the whole blocks of the run.
static size_t match(const KVPool *p, uint64_t root, const int32_t *tokens, size_t n, int computed_only,
                    uint32_t *chain, size_t *full_blocks) {
    uint64_t h = root;
    size_t m = 0;
    *full_blocks = 0;
    while (m < n) {
        size_t len, want = n - m < KV_BLOCK ? n - m : KV_BLOCK;
        uint32_t id = best_child(p, h, tokens + m, want, computed_only, &len);
        if (id == NO_BLOCK || len == 0) break;
        chain[*full_blocks] = id;
        m += len;
        if (len < KV_BLOCK) break;
        h = p->info[id].key;
        (*full_blocks)++;
    }
    return m;
}

size_t kvcache_share_prefix(KVCache *c, const int32_t *tokens, size_t n, size_t *shared_blocks, int *wait) {
    KVPool *p = c->pool;
    *shared_blocks = 0;
    *wait = 0;
    if (n < 2 || c->n_blocks || !p) return 0;
    size_t limit = n - 1;  // the last token's logits are needed: it is computed
    uint32_t *chain = malloc((limit / KV_BLOCK + 1) * sizeof *chain);
    if (!chain) return 0;
    size_t full_known, full;
    size_t known = match(p, ROOT ^ c->salt, tokens, limit, 0, chain, &full_known);
    size_t done = match(p, ROOT ^ c->salt, tokens, limit, 1, chain, &full);
    if (known > done) {
        *wait = 1;  // another sequence is computing more of it right now
        free(chain);
        return 0;
    }
    if (done > c->max_positions) done = 0;
    size_t n_whole = done / KV_BLOCK;
    for (size_t i = 0; i < n_whole; i++) {
        hold_block(p, chain[i]);
        p->info[chain[i]].last_use = ++p->tick;
        add_block(c, chain[i]);
    }
    size_t part = done % KV_BLOCK;
    if (part) {
        // copy on write: the first `part` positions of a block someone else
        // may still write past, into a block of our own
        uint32_t src = chain[n_whole], id = take_block(p);
        if (id == NO_BLOCK) {
            done -= part;
        } else {
            kvpool_unreserve(p, 1);
            memcpy(p->mem + (size_t)id * p->block_bytes, p->mem + (size_t)src * p->block_bytes, p->block_bytes);
            p->info[id].filled = (uint16_t)part;
            p->info[src].last_use = ++p->tick;
            add_block(c, id);
        }
    }
    free(chain);
    c->n_tokens = done;
    *shared_blocks = n_whole;
    return done;
}

void kvcache_register_prompt(KVCache *c, const int32_t *tokens, size_t n) {
    KVPool *p = c->pool;
    uint64_t h = ROOT ^ c->salt;
    for (size_t b = 0; b * KV_BLOCK < n && b < c->n_blocks; b++) {
        BlockInfo *info = &p->info[c->block_ids[b]];
        size_t k = n - b * KV_BLOCK < KV_BLOCK ? n - b * KV_BLOCK : KV_BLOCK;
        // shared blocks are registered already, by their owner; ours get
        // our tokens (a copied block: the copied ones and the rest of ours)
        if (info->refs == 1 && info->n_known < k) {
            memcpy(info->tokens, tokens + b * KV_BLOCK, k * sizeof *tokens);
            info->n_known = (uint16_t)k;
            info->parent = h;
        }
        if (k < KV_BLOCK) break;
        info->key = chain_hash(h, tokens + b * KV_BLOCK, KV_BLOCK);
        h = info->key;
    }
}

void kvcache_mark_filled(KVCache *c) {
    for (size_t b = 0; b < c->n_blocks; b++) {
        BlockInfo *info = &c->pool->info[c->block_ids[b]];
        size_t f = c->n_tokens > b * KV_BLOCK ? c->n_tokens - b * KV_BLOCK : 0;
        if (f > KV_BLOCK) f = KV_BLOCK;
        if (f > info->filled) info->filled = (uint16_t)f;
    }
}

int kvcache_truncate(KVCache *c, size_t n, size_t *copies) {
    KVPool *p = c->pool;
    *copies = 0;
    if (n > c->n_tokens) return -1;
    // Blocks from the one position n falls in onwards will be written again.
    size_t edge = n / KV_BLOCK, shared = 0;
    for (size_t b = edge; b < c->n_blocks; b++) shared += p->info[c->block_ids[b]].refs > 1;
    if (shared > kvpool_available(p)) return -1;
    for (size_t b = edge; b < c->n_blocks; b++) {
        uint32_t id = c->block_ids[b];
        if (p->info[id].refs > 1) {
            // copy on write: a block of our own, with the kept positions
            uint32_t own = take_block(p);  // cannot fail: counted as available above
            size_t keep = n > b * KV_BLOCK ? n - b * KV_BLOCK : 0;
            memcpy(p->mem + (size_t)own * p->block_bytes, p->mem + (size_t)id * p->block_bytes,
                   keep ? p->block_bytes : 0);
            p->info[own].filled = (uint16_t)keep;
            release_block(p, id);
            c->block_ids[b] = own;
            c->blocks[b] = p->mem + (size_t)own * p->block_bytes;
            (*copies)++;
            continue;
        }
        // Our own: it knows nothing past n any more, so that no prompt
        // shares positions that will be written again.
        BlockInfo *info = &p->info[id];
        size_t keep = n > b * KV_BLOCK ? n - b * KV_BLOCK : 0;
        if (info->filled > keep) info->filled = (uint16_t)keep;
        if (info->n_known > keep) info->n_known = (uint16_t)keep;
        if (!info->n_known) info->parent = info->key = 0;
    }
    c->n_tokens = n;
    return 0;
}

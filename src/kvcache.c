/* kvcache.c - see kvcache.h. */
#include "kvcache.h"

#include <stdlib.h>
#include <string.h>

#include "memory.h"

size_t kvcache_bytes_per_token(const GPT2Config *cfg, DType dtype) {
    size_t head_size = (size_t)cfg->n_embd / (size_t)cfg->n_head;
    return 2 * (size_t)cfg->n_layer * (size_t)cfg->n_head * head_size * kv_elem_size(dtype);
}

int kvcache_init(KVCache *c, const GPT2Config *cfg, DType dtype, size_t capacity, GptError *err) {
    memset(c, 0, sizeof *c);
    if (capacity < 1 || capacity > (size_t)cfg->n_ctx)
        return gpt_error(err, "kvcache: capacity %zu outside [1, %d]", capacity, cfg->n_ctx);
    if (dtype != DTYPE_F32 && dtype != DTYPE_F16)
        return gpt_error(err, "kvcache: element type %s; the cache holds F32 or F16",
                         dtype_name(dtype) ? dtype_name(dtype) : "?");
    c->n_layer = (size_t)cfg->n_layer;
    c->n_head = (size_t)cfg->n_head;
    c->head_size = (size_t)cfg->n_embd / (size_t)cfg->n_head;
    c->dtype = dtype;
    c->capacity = capacity;
    c->block_bytes = kvcache_bytes_per_token(cfg, dtype) * KV_BLOCK;
    size_t n_blocks = (capacity + KV_BLOCK - 1) / KV_BLOCK;
    c->blocks = malloc(n_blocks * sizeof *c->blocks);
    // Not zeroed: a position is written before it is read (attention reads
    // only the positions a query may see), and untouched pages cost nothing.
    c->own = memory_alloc_large(n_blocks * c->block_bytes);
    if (!c->blocks || !c->own) {
        kvcache_free(c);
        return gpt_error(err, "kvcache: out of memory for %zu positions", capacity);
    }
    for (size_t b = 0; b < n_blocks; b++) c->blocks[b] = c->own + b * c->block_bytes;
    return 0;
}

void kvcache_free(KVCache *c) {
    if (!c) return;
    free(c->own);
    free(c->blocks);
    memset(c, 0, sizeof *c);
}

void kvcache_reset(KVCache *c) { c->n_tokens = 0; }

size_t kvcache_bytes_allocated(const KVCache *c) {
    return (c->capacity + KV_BLOCK - 1) / KV_BLOCK * c->block_bytes;
}

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

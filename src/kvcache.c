/* kvcache.c - see kvcache.h. */
#include "kvcache.h"

#include "memory.h"

#include <stdlib.h>
#include <string.h>

size_t kvcache_bytes_per_token(const GPT2Config *cfg) {
    size_t head_size = (size_t)cfg->n_embd / (size_t)cfg->n_head;
    return 2 * (size_t)cfg->n_layer * (size_t)cfg->n_head * head_size * sizeof(float);
}

int kvcache_init(KVCache *c, const GPT2Config *cfg, size_t capacity, GptError *err) {
    memset(c, 0, sizeof *c);
    if (capacity < 1 || capacity > (size_t)cfg->n_ctx)
        return gpt_error(err, "kvcache: capacity %zu outside [1, %d]", capacity, cfg->n_ctx);
    c->n_layer = (size_t)cfg->n_layer;
    c->n_head = (size_t)cfg->n_head;
    c->head_size = (size_t)cfg->n_embd / (size_t)cfg->n_head;
    c->capacity = capacity;
    size_t floats = c->n_layer * c->n_head * capacity * c->head_size;
    // One block for K and V: half each. Not zeroed: a position is written
    // before it is read, and untouched pages cost nothing.
    float *block = memory_alloc_large(2 * floats * sizeof(float));
    if (!block) return gpt_error(err, "kvcache: out of memory for %zu positions", capacity);
    c->k = block;
    c->v = block + floats;
    return 0;
}

void kvcache_free(KVCache *c) {
    if (!c) return;
    free(c->k);  // c->v lies in the same block
    memset(c, 0, sizeof *c);
}

void kvcache_reset(KVCache *c) { c->n_tokens = 0; }

size_t kvcache_bytes_allocated(const KVCache *c) {
    return 2 * c->n_layer * c->n_head * c->capacity * c->head_size * sizeof(float);
}

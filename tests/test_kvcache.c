/*
 * test_kvcache.c - src/model/kvcache.c alone: what a position costs, where
 * a key and a value are stored, the pool's promises, prefix sharing and
 * copy on write.
 *
 * The references: the formula of the KV cache (bytes per token = 2 x
 * n_layer x n_head x head_size x bytes per element; GPT-2 124M in float32
 * 73,728 B, in float16 36,864 B), the layout kvcache.h documents (keys
 * (HS, 16) transposed, values (16, HS) by position, in blocks of 16
 * positions), and float16's exact values for the numbers stored.
 */
#include <math.h>

#include "check.h"
#include "model/kvcache.h"

static GPT2Config config(int n_layer, int n_head, int n_embd, int n_ctx) {
    return (GPT2Config){.n_layer = n_layer, .n_head = n_head, .n_embd = n_embd, .n_ctx = n_ctx, .vocab_size = 50257};
}

static void test_bytes(void) {
    GPT2Config gpt2 = config(12, 12, 768, 1024);
    CHECK(kvcache_bytes_per_token(&gpt2, DTYPE_F32) == 73728, "124M f32: %zu", kvcache_bytes_per_token(&gpt2, DTYPE_F32));
    CHECK(kvcache_bytes_per_token(&gpt2, DTYPE_F16) == 36864, "124M f16: %zu", kvcache_bytes_per_token(&gpt2, DTYPE_F16));
    // 2 x L x NH x HS x element, for shapes other than 124M's (HS = n_embd / n_head)
    const int shapes[][3] = {{24, 16, 1024}, {2, 4, 64}, {1, 1, 8}, {36, 20, 1280}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        GPT2Config c = config(shapes[i][0], shapes[i][1], shapes[i][2], 256);
        size_t want = 2u * (size_t)c.n_layer * (size_t)c.n_embd * 4;  // NH x HS = n_embd
        CHECK(kvcache_bytes_per_token(&c, DTYPE_F32) == want && kvcache_bytes_per_token(&c, DTYPE_F16) == want / 2,
              "L %d NH %d C %d: %zu, want %zu", c.n_layer, c.n_head, c.n_embd, kvcache_bytes_per_token(&c, DTYPE_F32),
              want);
    }
    // a cache holds whole blocks of 16 positions
    KVCache kv;
    GptError err = {{0}};
    const size_t caps[] = {1, 15, 16, 17, 1024};
    for (size_t i = 0; i < sizeof caps / sizeof *caps; i++) {
        CHECK(kvcache_init(&kv, &gpt2, DTYPE_F32, caps[i], &err) == 0, "init %zu: %s", caps[i], err.msg);
        size_t blocks = (caps[i] + 15) / 16;
        CHECK(kv.block_bytes == 16 * 73728 && kvcache_bytes_allocated(&kv) == blocks * 16 * 73728 &&
                  kv.capacity == caps[i] && kv.n_tokens == 0,
              "capacity %zu: %zu bytes, capacity %zu", caps[i], kvcache_bytes_allocated(&kv), kv.capacity);
        kvcache_free(&kv);
    }
    CHECK(kvcache_init(&kv, &gpt2, DTYPE_F32, 1025, &err) == -1 && strstr(err.msg, "capacity 1025 outside [1, 1024]"),
          "capacity past the context: %s", err.msg);
    CHECK(kvcache_init(&kv, &gpt2, DTYPE_F32, 0, &err) == -1, "capacity 0");
}

// k and v of position pos at (layer, head) are read back from the layout
// kvcache.h documents; values exact in float16 (small multiples of 1/4).
static void test_layout(DType dtype) {
    GPT2Config c = config(3, 2, 16, 64);  // HS 8
    KVCache kv;
    GptError err = {{0}};
    CHECK(kvcache_init(&kv, &c, dtype, 40, &err) == 0, "init: %s", err.msg);
    const size_t HS = 8;
    for (size_t pos = 0; pos < 40; pos++)
        for (size_t l = 0; l < 3; l++)
            for (size_t h = 0; h < 2; h++) {
                float k[8], v[8];
                for (size_t d = 0; d < HS; d++) {
                    k[d] = (float)((pos * 64 + l * 16 + h * 8 + d) % 512) / 4;  // at most 127.75: exact in f16
                    v[d] = -k[d];
                }
                kvcache_store(&kv, l, h, pos, k, v);
            }
    int bad = 0;
    for (size_t pos = 0; pos < 40 && !bad; pos++)
        for (size_t l = 0; l < 3; l++)
            for (size_t h = 0; h < 2; h++) {
                size_t b = pos / 16, slot = pos % 16;
                const void *kb = kvcache_block_keys(&kv, b, l, h), *vb = kvcache_block_values(&kv, b, l, h);
                for (size_t d = 0; d < HS; d++) {
                    float want = (float)((pos * 64 + l * 16 + h * 8 + d) % 512) / 4, key, value;
                    if (dtype == DTYPE_F16) {
                        key = f16_to_f32(((const uint16_t *)kb)[d * 16 + slot]);   // keys (HS, 16)
                        value = f16_to_f32(((const uint16_t *)vb)[slot * HS + d]); // values (16, HS)
                    } else {
                        key = ((const float *)kb)[d * 16 + slot];
                        value = ((const float *)vb)[slot * HS + d];
                    }
                    if (key != want || value != -want) bad = 1;
                }
            }
    CHECK(!bad, "%s: a key or value not where kvcache.h puts it", dtype == DTYPE_F16 ? "f16" : "f32");
    kvcache_free(&kv);
}

static void test_pool(void) {
    GPT2Config c = config(2, 2, 8, 128);
    GptError err = {{0}};
    KVPool *p = kvpool_create(&c, DTYPE_F32, 4, &err);
    CHECK(p != NULL, "pool: %s", err.msg);
    if (!p) return;
    CHECK(kvpool_available(p) == 4 && kvpool_reserve(p, 3) == 0 && kvpool_available(p) == 1 &&
              kvpool_reserve(p, 2) == -1,
          "promises: available %zu", kvpool_available(p));
    KVCache a, b;
    CHECK(kvcache_attach(&a, p, 128, &err) == 0 && kvcache_grow(&a, 33) == 0 && a.n_blocks == 3 && a.capacity == 48,
          "grow to 33: %zu blocks", a.n_blocks);
    KVPoolStats s = kvpool_stats(p);
    CHECK(s.held == 3 && s.reserved == 0 && s.peak_held == 3 && kvpool_available(p) == 1, "held %zu reserved %zu",
          s.held, s.reserved);
    // past max_positions, or past the pool: refused
    CHECK(kvcache_grow(&a, 129) == -1, "grow past max_positions");
    CHECK(kvcache_attach(&b, p, 128, &err) == 0 && kvpool_reserve(p, 1) == 0 && kvcache_grow(&b, 16) == 0 &&
              kvcache_grow(&b, 17) == -1,
          "the fifth block of a pool of four");
    kvcache_free(&a);
    s = kvpool_stats(p);
    CHECK(s.held == 1 && s.peak_held == 4 && kvpool_available(p) == 3, "after free: held %zu peak %zu", s.held,
          s.peak_held);
    kvcache_free(&b);
    kvpool_free(p);
}

// Stores position-dependent keys for tokens[0..n) into c (n_tokens n).
static void fill(KVCache *c, size_t n, float base) {
    float k[4], v[4];
    for (size_t pos = 0; pos < n; pos++)
        for (size_t l = 0; l < c->n_layer; l++)
            for (size_t h = 0; h < c->n_head; h++) {
                for (size_t d = 0; d < 4; d++) k[d] = v[d] = base + (float)(pos * 8 + d);
                kvcache_store(c, l, h, pos, k, v);
            }
    c->n_tokens = n;
}

static float key_at(const KVCache *c, size_t pos) {
    return ((const float *)kvcache_block_keys(c, pos / 16, 0, 0))[pos % 16];  // d = 0
}

static void test_sharing(void) {
    GPT2Config c = config(2, 2, 8, 256);  // HS 4
    GptError err = {{0}};
    KVPool *p = kvpool_create(&c, DTYPE_F32, 16, &err);
    if (!p) return;
    int32_t tokens[64];
    for (int i = 0; i < 64; i++) tokens[i] = 1000 + i;
    KVCache a, b, d;
    kvcache_attach(&a, p, 256, &err);
    kvpool_reserve(p, 3);
    kvcache_grow(&a, 40);
    kvcache_register_prompt(&a, tokens, 40);
    fill(&a, 40, 0);
    kvcache_mark_filled(&a);
    // the same 40 tokens: the last is computed, so 39 positions match: two
    // whole blocks shared, 7 positions copied into a block of b's own
    size_t shared;
    int wait;
    kvcache_attach(&b, p, 256, &err);
    kvpool_reserve(p, 3);
    size_t got = kvcache_share_prefix(&b, tokens, 40, &shared, &wait);
    CHECK(got == 39 && shared == 2 && !wait && b.n_tokens == 39 && b.n_blocks == 3, "40 tokens: %zu, %zu shared", got,
          shared);
    CHECK(b.blocks[0] == a.blocks[0] && b.blocks[1] == a.blocks[1] && b.blocks[2] != a.blocks[2],
          "whole blocks the same memory, the partial one a copy");
    CHECK(key_at(&b, 35) == key_at(&a, 35) && key_at(&b, 38) == 38 * 8, "the copied positions' keys");
    // a prompt that differs at token 20: one whole block and 4 positions
    int32_t other[64];
    memcpy(other, tokens, sizeof other);
    other[20] = 7;
    kvcache_attach(&d, p, 256, &err);
    kvpool_reserve(p, 3);
    got = kvcache_share_prefix(&d, other, 30, &shared, &wait);
    CHECK(got == 20 && shared == 1, "differs at 20: %zu matched, %zu shared", got, shared);
    // truncating b into a shared block copies it first (copy on write): a's
    // keys stay as they were when b writes again
    size_t copies = 0;
    CHECK(kvcache_truncate(&b, 10, &copies) == 0 && copies == 2 && b.n_tokens == 10 && b.blocks[0] != a.blocks[0],
          "truncate to 10: %zu copies", copies);
    fill(&b, 16, 5000);
    CHECK(key_at(&a, 12) == 12 * 8 && key_at(&b, 12) == 5000 + 12 * 8, "a's block untouched by b's writes");
    kvcache_free(&a);
    kvcache_free(&b);
    kvcache_free(&d);
    kvpool_free(p);
}

int main(void) {
    test_bytes();
    test_layout(DTYPE_F32);
    test_layout(DTYPE_F16);
    test_pool();
    test_sharing();
    return check_exit("test_kvcache");
}

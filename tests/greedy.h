/*
 * greedy.h - the greedy half of the accuracy protocol, shared by
 * tests/test_accuracy.c (the check) and scripts/q4_study.c (the study): 40
 * greedy tokens of each reference prompt, one token at a time through the
 * KV cache, against the reference's. Header-only.
 */
#ifndef GPT_TEST_GREEDY_H
#define GPT_TEST_GREEDY_H

#include <cJSON.h>

#include "forward.h"
#include "model/kvcache.h"
#include "base/threads.h"

enum { GREEDY_MAX_PROMPT = 216, GREEDY_TOKENS = 40 };

// The index of the largest of x[0..n) (the first, on a tie).
static inline size_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// How many prompts of cases (objects with "ids" and "greedy_ids") give
// exactly their 40 "greedy_ids" when m decodes greedily with a KV cache of
// kv_dtype. A prompt with no room for 40 tokens in the context is not
// counted. Returns the count, or -1 with err set if the state cannot be
// allocated.
static inline int greedy_matches(Model *m, DType kv_dtype, ThreadPool *pool, const cJSON *cases, GptError *err) {
    const GPT2Config *c = &m->config;
    size_t V = (size_t)c->vocab_size;
    ForwardState fs;
    KVCache kv;
    int matches = 0;
    size_t longest = GREEDY_MAX_PROMPT + GREEDY_TOKENS;
    size_t ctx = (size_t)c->n_ctx < longest ? (size_t)c->n_ctx : longest;
    if (forward_state_init(&fs, c, GREEDY_MAX_PROMPT, ctx, 1, pool, err) != 0) return -1;
    if (kvcache_init(&kv, c, kv_dtype, ctx, err) != 0) {
        forward_state_free(&fs);
        return -1;
    }
    const cJSON *cs;
    cJSON_ArrayForEach(cs, cases) {
        int32_t ids[GREEDY_MAX_PROMPT], want[GREEDY_TOKENS];
        size_t n = 0, n_want = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(cs, "ids")) {
            if (n < GREEDY_MAX_PROMPT) ids[n++] = (int32_t)it->valueint;
        }
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(cs, "greedy_ids")) {
            if (n_want < GREEDY_TOKENS) want[n_want++] = (int32_t)it->valueint;
        }
        kvcache_reset(&kv);
        if (n + GREEDY_TOKENS > ctx) continue;
        SeqInput s = {.tokens = ids, .n_tokens = n, .cache = &kv, .want = LOGITS_LAST};
        int ok = gpt2_forward(m, &fs, &s, 1, err) == 0;
        size_t same = 0;
        for (size_t g = 0; ok && g < n_want; g++) {
            int32_t next = (int32_t)argmax(fs.logits, V);
            if (next != want[g]) break;
            same++;
            SeqInput step = {.tokens = &next, .n_tokens = 1, .cache = &kv, .want = LOGITS_LAST};
            ok = gpt2_forward(m, &fs, &step, 1, err) == 0;
        }
        matches += ok && same == GREEDY_TOKENS && n_want == GREEDY_TOKENS;
    }
    forward_state_free(&fs);
    kvcache_free(&kv);
    return matches;
}

#endif

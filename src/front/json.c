/*
 * json.c - the JSON both front-ends write about tokens: ids, exact 64-bit
 * integers, and log-probabilities in OpenAI's legacy completions shape
 * (the command's --json --logprobs, gpt serve's "logprobs").
 *
 * The numbers come from the engine (engine.h, logprobs.h): each token's
 * log-probability under the model's own distribution at its position, the
 * log-softmax of the raw logits, and the most likely tokens there.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"
#include "base/utf8.h"

cJSON *u64_json(uint64_t v) {
    char digits[32];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(digits);
}

cJSON *floats_json(const float *v, size_t n) {
    char *text = malloc(n * 16 + 3), *p = text;
    if (!text) return NULL;
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        // the fewest digits (6 to 9; 9 always do) that read back as v[i]
        int len = 0;
        for (int digits = 6; digits <= 9; digits++) {
            len = snprintf(p + (i > 0), 16, "%.*g", digits, (double)v[i]);
            if (strtof(p + (i > 0), NULL) == v[i]) break;
        }
        if (i > 0) *p = ',';
        p += len + (i > 0);
    }
    *p++ = ']';
    *p = '\0';
    cJSON *raw = cJSON_CreateRaw(text);
    free(text);
    return raw;
}

cJSON *ids_json(const int32_t *ids, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

// A token's text for JSON: its bytes when they are UTF-8, else
// "bytes:\xHH..." (as OpenAI writes a token that holds part of a
// character), so that every key is valid JSON and tells its bytes. buf
// holds at least 6 + 4 x the token's length + 1.
static const char *token_text(const Tokenizer *tok, int32_t id, char *buf, size_t cap) {
    size_t len;
    const unsigned char *b = tokenizer_token_bytes(tok, id, &len);
    if (!b) len = 0;
    if (len < cap && (!b || utf8_valid(b, len))) {
        if (len) memcpy(buf, b, len);
        buf[len] = '\0';
        return buf;
    }
    size_t at = (size_t)snprintf(buf, cap, "bytes:");
    for (size_t i = 0; i < len && at + 5 <= cap; i++) at += (size_t)snprintf(buf + at, cap - at, "\\x%02x", b[i]);
    return buf;
}

enum { TOKEN_TEXT_CAP = 1024 };  // GPT-2's longest token is 128 bytes

size_t tokens_bytes(const Tokenizer *tok, const int32_t *ids, size_t n) {
    size_t bytes = 0, len;
    for (size_t i = 0; i < n; i++)
        if (tokenizer_token_bytes(tok, ids[i], &len)) bytes += len;
    return bytes;
}

cJSON *logprobs_json(const Tokenizer *tok, const int32_t *ids, size_t n, const TokenLogprob *lp, size_t first,
                     size_t offset) {
    cJSON *root = cJSON_CreateObject(), *texts = cJSON_CreateArray(), *lps = cJSON_CreateArray(),
          *tops = cJSON_CreateArray(), *offsets = cJSON_CreateArray(), *top_ids = cJSON_CreateArray();
    char buf[TOKEN_TEXT_CAP];
    for (size_t i = 0; i < n; i++) {
        const TokenLogprob *t = i >= first ? &lp[i - first] : NULL;
        cJSON_AddItemToArray(texts, cJSON_CreateString(token_text(tok, ids[i], buf, sizeof buf)));
        cJSON_AddItemToArray(lps, t ? exact_json(t->logprob) : cJSON_CreateNull());
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)offset));
        offset += tokens_bytes(tok, &ids[i], 1);
        if (!t) {
            cJSON_AddItemToArray(tops, cJSON_CreateNull());
            cJSON_AddItemToArray(top_ids, cJSON_CreateNull());
            continue;
        }
        cJSON *top = cJSON_CreateObject();
        for (size_t k = 0; k < t->n_top; k++)
            cJSON_AddItemToObject(top, token_text(tok, t->top_ids[k], buf, sizeof buf), exact_json(t->top_logprobs[k]));
        cJSON_AddItemToArray(tops, top);
        cJSON_AddItemToArray(top_ids, ids_json(t->top_ids, t->n_top));
    }
    cJSON_AddItemToObject(root, "tokens", texts);
    cJSON_AddItemToObject(root, "token_logprobs", lps);
    cJSON_AddItemToObject(root, "top_logprobs", tops);
    cJSON_AddItemToObject(root, "text_offset", offsets);
    cJSON_AddItemToObject(root, "token_ids", ids_json(ids, n));
    cJSON_AddItemToObject(root, "top_ids", top_ids);
    return root;
}

// {"token", "logprob", "bytes": [...]} of one id.
static cJSON *chat_token_json(const Tokenizer *tok, int32_t id, double logprob) {
    char buf[TOKEN_TEXT_CAP];
    size_t len;
    const unsigned char *b = tokenizer_token_bytes(tok, id, &len);
    cJSON *o = cJSON_CreateObject(), *bytes = cJSON_CreateArray();
    cJSON_AddStringToObject(o, "token", token_text(tok, id, buf, sizeof buf));
    cJSON_AddItemToObject(o, "logprob", exact_json(logprob));
    for (size_t i = 0; b && i < len; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber(b[i]));
    cJSON_AddItemToObject(o, "bytes", bytes);
    return o;
}

cJSON *chat_logprobs_json(const Tokenizer *tok, const TokenLogprob *lp, size_t n) {
    cJSON *root = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(root, "content");
    for (size_t i = 0; i < n; i++) {
        cJSON *t = chat_token_json(tok, lp[i].id, lp[i].logprob), *top = cJSON_AddArrayToObject(t, "top_logprobs");
        for (size_t k = 0; k < lp[i].n_top; k++)
            cJSON_AddItemToArray(top, chat_token_json(tok, lp[i].top_ids[k], lp[i].top_logprobs[k]));
        cJSON_AddItemToArray(content, t);
    }
    cJSON_AddNullToObject(root, "refusal");
    return root;
}

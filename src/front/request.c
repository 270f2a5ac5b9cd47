/*
 * request.c - the JSON of a request, besides its settings (settings.c):
 * the two checks of a JSON text that a `gpt --batch --jsonl` line and a
 * `gpt serve` body both make first (why it does not parse, and where it
 * holds a NUL: refused, never cut), a prompt of token ids, and the numbers
 * both write exactly (a seed, a log-probability).
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"

// Whether byte n of a JSON text is inside a string (after an unescaped '"').
static int inside_string(const char *s, size_t n) {
    int in = 0;
    for (size_t i = 0; i < n; i++) {
        if (in && s[i] == '\\') i++;
        else if (s[i] == '"') in = !in;
    }
    return in;
}

// Inside a string it is the string that is bad (a bad escape, a lone
// surrogate such as \ud800), which "invalid JSON" alone would hide.
void json_parse_error(const char *text, size_t len, const char *end, char *msg, size_t cap) {
    if (!end || end < text || end > text + len) {
        snprintf(msg, cap, "invalid JSON");
        return;
    }
    long at = (long)(end - text);
    if (inside_string(text, (size_t)at))
        snprintf(msg, cap, "invalid JSON string at byte %ld (a bad escape or an unpaired surrogate)", at);
    else snprintf(msg, cap, "invalid JSON at byte %ld", at);
}

long nul_at(const char *text, size_t len, int json) {
    const char *raw = memchr(text, '\0', len);
    if (raw) return raw - text;
    // a backslash is only ever inside a JSON string, escaping what follows it
    for (size_t i = 0; json && i + 1 < len; i++) {
        if (text[i] != '\\') continue;
        if (i + 6 <= len && !memcmp(text + i + 1, "u0000", 5)) return (long)i;
        i++;  // the escaped character: "\\u0000" is a backslash, then text
    }
    return -1;
}

cJSON *seed_json(uint64_t seed) {
    char digits[32];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)seed);
    return seed < (1ull << 53) ? cJSON_CreateRaw(digits) : cJSON_CreateString(digits);
}

cJSON *exact_json(double v) {
    if (!isfinite(v)) return cJSON_CreateNull();
    char buf[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

int json_token_ids(const cJSON *a, size_t vocab, const char *field, int32_t **ids, size_t *n, char *msg, size_t cap) {
    *ids = NULL;
    *n = 0;
    size_t count = cJSON_IsArray(a) ? (size_t)cJSON_GetArraySize(a) : 0;
    if (!(*ids = malloc((count ? count : 1) * sizeof **ids))) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    size_t i = 0;
    for (const cJSON *it = count ? a->child : NULL; it; it = it->next, i++) {
        double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!(v >= 0 && v < (double)vocab && v == floor(v))) {
            snprintf(msg, cap, "%s: element %zu is not a token id in [0, %zu)", field, i, vocab);
            free(*ids);
            *ids = NULL;
            return -1;
        }
        (*ids)[i] = (int32_t)v;
    }
    *n = i;
    return 0;
}

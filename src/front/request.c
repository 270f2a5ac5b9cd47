/*
 * request.c - the JSON fields of a generation request, read with one set of
 * rules and messages for every front-end that takes them: a `gpt --batch
 * --jsonl` line and a `gpt serve` request body. Also the two checks of a
 * JSON text both make first: why it does not parse, and where it holds a
 * NUL (refused, never cut).
 *
 * cJSON keeps a number only as a double, which holds every integer below
 * 2^53 but also turns 4503599627370497.5 into ...498 and
 * 1.00000000000000000001 into 1: where the exact value matters (a seed),
 * the number is read from its text, which the walkers below find. They walk
 * a text that cJSON has parsed, so the JSON is known to be valid.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"

static int json_number(const cJSON *v, double *out) {
    if (!cJSON_IsNumber(v)) return -1;
    *out = v->valuedouble;
    return 0;
}

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

// The index of the first byte at or after i that is not white space (cJSON
// takes any byte up to 32 as white space).
static size_t skip_space(const char *s, size_t i, size_t len) {
    while (i < len && (unsigned char)s[i] <= 32) i++;
    return i;
}

// The end of the JSON value that starts at s[i].
static size_t skip_value(const char *s, size_t i, size_t len) {
    int depth = 0, in_string = 0;
    for (; i < len; i++) {
        char ch = s[i];
        if (in_string) {
            if (ch == '\\') i++;
            else if (ch == '"' && (in_string = 0, depth == 0)) return i + 1;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (depth == 0) return i;  // the end of the object around a number
            if (--depth == 0) return i + 1;
        } else if (depth == 0 && (ch == ',' || (unsigned char)ch <= 32)) {
            return i;
        }
    }
    return i;
}

// The text of the value of member k (from 0, in the order of the text, which
// is cJSON's order of an object's children) of the object in s[0..len).
// 0, or -1 if it has fewer members.
static int member_text(const char *s, size_t len, size_t k, const char **value, size_t *value_len) {
    size_t i = skip_space(s, 0, len) + 1;  // past the '{'
    for (size_t m = 0;; m++) {
        i = skip_space(s, i, len);
        if (i >= len || s[i] == '}') return -1;
        i = skip_space(s, skip_value(s, i, len), len) + 1;  // the key, the ':'
        i = skip_space(s, i, len);
        size_t end = skip_value(s, i, len);
        if (m == k) {
            *value = s + i;
            *value_len = end - i;
            return 0;
        }
        i = skip_space(s, end, len);
        if (i < len && s[i] == ',') i++;
    }
}

// A JSON number's text as an integer below 2^53, exactly: digits alone (no
// sign, fraction or exponent, which a double would round). 0 or -1.
static int exact_seed(const char *text, size_t n, uint64_t *seed) {
    char digits[24];
    if (n == 0 || n >= sizeof digits) return -1;
    for (size_t i = 0; i < n; i++)
        if (text[i] < '0' || text[i] > '9') return -1;
    memcpy(digits, text, n);
    digits[n] = '\0';
    return parse_u64(digits, seed) == 0 && *seed < (1ull << 53) ? 0 : -1;
}

// OpenAI's logit_bias: {"token id": bias}, the id a decimal string (digits
// alone: "007" is 7, as Python's int() reads it), the bias a number in
// [-100, 100]; at most SAMPLER_BIAS_MAX entries, no id twice. {} and null
// are no bias (LangChain sends {} on every call). It replaces the
// defaults' bias whole. 0, or -1 with the reason in msg.
static int logit_bias_from_json(GenFields *g, const cJSON *f, char *msg, size_t cap) {
    SamplerParams *sp = &g->params->sampling;
    if (cJSON_IsNull(f)) {
        sp->n_bias = 0;
        return 0;
    }
    if (!cJSON_IsObject(f)) {
        snprintf(msg, cap, "logit_bias must be an object {\"token id\": bias}");
        return -1;
    }
    // ids at or past the vocabulary, or past int32 when it is not known
    // (then the sequence refuses them when it starts)
    unsigned long long limit = g->vocab_size ? (unsigned long long)g->vocab_size : (unsigned long long)INT32_MAX;
    SamplerBias bias[SAMPLER_BIAS_MAX];
    size_t n = 0;
    for (const cJSON *e = f->child; e; e = e->next) {
        const char *key = e->string;
        size_t len = strlen(key);
        int digits = len > 0 && len <= 10;
        for (size_t i = 0; digits && i < len; i++) digits = key[i] >= '0' && key[i] <= '9';
        unsigned long long id = digits ? strtoull(key, NULL, 10) : 0;
        if (!digits || id >= limit) {
            snprintf(msg, cap, "logit_bias: key \"%.40s\" is not a token id (a decimal integer in [0, %llu))", key,
                     limit);
            return -1;
        }
        double d;
        if (json_number(e, &d) || !(fabs(d) <= SAMPLER_BIAS_LIMIT)) {
            snprintf(msg, cap, "logit_bias: token %llu: the bias must be a number in [-100, 100]", id);
            return -1;
        }
        if (n == SAMPLER_BIAS_MAX) {
            snprintf(msg, cap, "logit_bias: at most %d entries", SAMPLER_BIAS_MAX);
            return -1;
        }
        for (size_t j = 0; j < n; j++)
            if (bias[j].id == (int32_t)id) {
                snprintf(msg, cap, "logit_bias: token id %llu given twice", id);
                return -1;
            }
        bias[n++] = (SamplerBias){.id = (int32_t)id, .bias = (float)d};
    }
    memcpy(sp->bias, bias, n * sizeof *bias);
    sp->n_bias = n;
    return 0;
}

// The output's grammar from field f (k: its name as messages give it),
// kind's text in text[0..len). 0, or -1 with the reason in msg.
static int set_grammar(GenFields *g, const char *k, ConstraintKind kind, const char *text, size_t len, char *msg,
                       size_t cap) {
    if (g->grammar) {
        snprintf(msg, cap, "%s: grammar, json_schema, regex and response_format exclude each other (%s came first)",
                 k, g->grammar_field);
        return -1;
    }
    GptError err = {{0}};
    if (!(g->grammar = constraint_compile(kind, text, len, k, &err))) {
        snprintf(msg, cap, "%s", err.msg);
        return -1;
    }
    g->grammar_field = kind == CONSTRAINT_GRAMMAR ? "grammar" : kind == CONSTRAINT_REGEX ? "regex"
                       : !strncmp(k, "response_format", 15)   ? "response_format"
                                                              : "json_schema";
    g->params->grammar = g->grammar;
    return 0;
}

// A schema (an object, or true/false) as JSON text for the translator.
static int schema_field(GenFields *g, const char *k, const cJSON *schema, char *msg, size_t cap) {
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema)) {
        snprintf(msg, cap, "%s must be a JSON Schema (an object)", k);
        return -1;
    }
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    int rc = set_grammar(g, k, CONSTRAINT_JSON_SCHEMA, text, strlen(text), msg, cap);
    free(text);
    return rc;
}

// OpenAI's response_format: {"type": "text"} (nothing asked), {"type":
// "json_object"}, {"type": "json_schema", "json_schema": {"name",
// "schema", "strict", "description"}}. strict is taken as given: the
// output always matches the schema. 0, or -1 with the reason in msg.
static int response_format(GenFields *g, const cJSON *f, char *msg, size_t cap) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(f, "type"), *js = NULL;
    if (!cJSON_IsObject(f) || !cJSON_IsString(type)) {
        snprintf(msg, cap, "response_format must be an object {\"type\": \"text\", \"json_object\" or "
                           "\"json_schema\"}");
        return -1;
    }
    const char *t = type->valuestring;
    if (strcmp(t, "text") && strcmp(t, "json_object") && strcmp(t, "json_schema")) {
        snprintf(msg, cap, "response_format.type \"%.40s\" is not text, json_object or json_schema", t);
        return -1;
    }
    for (const cJSON *e = f->child; e; e = e->next) {
        if (!strcmp(e->string, "type")) continue;
        if (!strcmp(e->string, "json_schema") && !strcmp(t, "json_schema")) {
            js = e;
            continue;
        }
        snprintf(msg, cap, "response_format: unknown field \"%.40s\" for type %s", e->string, t);
        return -1;
    }
    if (!strcmp(t, "text")) return 0;
    if (!strcmp(t, "json_object"))
        return set_grammar(g, "response_format", CONSTRAINT_JSON_OBJECT, NULL, 0, msg, cap);
    if (!cJSON_IsObject(js)) {
        snprintf(msg, cap, "response_format.json_schema must be an object {\"name\", \"schema\", \"strict\"}");
        return -1;
    }
    const cJSON *schema = NULL;
    for (const cJSON *e = js->child; e; e = e->next) {
        const char *k = e->string;
        if (!strcmp(k, "schema")) schema = e;
        else if ((!strcmp(k, "name") || !strcmp(k, "description")) && !cJSON_IsString(e)) {
            snprintf(msg, cap, "response_format.json_schema.%s must be a string", k);
            return -1;
        } else if (!strcmp(k, "strict") && !cJSON_IsBool(e) && !cJSON_IsNull(e)) {
            snprintf(msg, cap, "response_format.json_schema.strict must be true or false");
            return -1;
        } else if (strcmp(k, "name") && strcmp(k, "description") && strcmp(k, "strict")) {
            snprintf(msg, cap, "response_format.json_schema: unknown field \"%.40s\"", k);
            return -1;
        }
    }
    // OpenAI's default schema is none: any JSON, but gpt asks for one
    if (!schema) {
        snprintf(msg, cap, "response_format.json_schema has no \"schema\"");
        return -1;
    }
    return schema_field(g, "response_format.json_schema.schema", schema, msg, cap);
}

int gen_field_from_json(GenFields *g, const cJSON *f, const char *text, size_t len, size_t member, char *msg,
                        size_t cap) {
    const char *k = f->string;
    GenParams *p = g->params;
    SamplerParams *sp = &p->sampling;
    double d;
    if (!strcmp(k, "max_tokens")) {
        double most = g->max_tokens_limit ? (double)g->max_tokens_limit : 1e9;
        if (json_number(f, &d) || d != floor(d) || d < 0) {
            snprintf(msg, cap, "max_tokens must be an integer >= 0");
            return -1;
        }
        if (d > most) {
            snprintf(msg, cap, "max_tokens must be at most %.0f", most);
            return -1;
        }
        p->max_new = (size_t)d;
    } else if (!strcmp(k, "top_k")) {
        if (json_number(f, &d) || d != floor(d) || d < 0 || d > 2147483647.0) {
            snprintf(msg, cap, "top_k must be an integer >= 0");
            return -1;
        }
        sp->top_k = (int)d;
    } else if (!strcmp(k, "temperature") || !strcmp(k, "top_p") || !strcmp(k, "min_p") ||
               !strcmp(k, "repeat_penalty")) {
        if (json_number(f, &d) || !isfinite(d) || fabs(d) > 3e38) {
            snprintf(msg, cap, "%s must be a number", k);
            return -1;
        }
        float *dst = !strcmp(k, "temperature") ? &sp->temperature
                     : !strcmp(k, "top_p")     ? &sp->top_p
                     : !strcmp(k, "min_p")     ? &sp->min_p
                                               : &sp->repeat_penalty;
        *dst = (float)d;
    } else if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
        // OpenAI's: logit -= count * frequency + (count > 0) * presence,
        // over the tokens generated so far (sampler.h)
        if (json_number(f, &d) || !(fabs(d) <= SAMPLER_PENALTY_MAX)) {
            snprintf(msg, cap, "%s must be a number in [-2, 2]", k);
            return -1;
        }
        *(!strcmp(k, "presence_penalty") ? &sp->presence_penalty : &sp->frequency_penalty) = (float)d;
    } else if (!strcmp(k, "logit_bias")) {
        if (logit_bias_from_json(g, f, msg, cap) != 0) return -1;
    } else if (!strcmp(k, "seed")) {
        // a number below 2^53, or digits in a string, read from the text:
        // from 2^53 on a JSON number is not exact in most JSON tools (a
        // double rounds 2^53 + 1 to 2^53), so it may not be what its
        // writer meant; a fraction is no seed, however close to one
        uint64_t seed = 0;
        const char *v;
        size_t v_len;
        int bad;
        if (cJSON_IsString(f)) bad = parse_u64(f->valuestring, &seed) != 0;
        else bad = !cJSON_IsNumber(f) || member_text(text, len, member, &v, &v_len) != 0 ||
                   exact_seed(v, v_len, &seed) != 0;
        if (bad) {
            snprintf(msg, cap, "seed must be an integer below 2^53 written in digits (no fraction or exponent; a "
                               "JSON number from 2^53 on is rounded), or a string of digits up to 2^64 - 1");
            return -1;
        }
        sp->seed = seed;
        g->seed_given = 1;
    } else if (!strcmp(k, "logprobs")) {
        // OpenAI's meaning: the chosen token's log-probability and the N
        // most likely (logprobs.h); null: none
        if (cJSON_IsNull(f)) {
            p->logprobs = 0;
        } else if (json_number(f, &d) || d != floor(d) || d < 0 || d > LOGPROBS_TOP_MAX) {
            snprintf(msg, cap, "logprobs must be an integer in [0, %d] (or null)", LOGPROBS_TOP_MAX);
            return -1;
        } else {
            p->logprobs = 1;
            p->top_logprobs = (size_t)d;
        }
    } else if (!strcmp(k, "context_shift") || !strcmp(k, "ignore_eos")) {
        if (!cJSON_IsBool(f)) {
            snprintf(msg, cap, "%s must be true or false", k);
            return -1;
        }
        *(!strcmp(k, "context_shift") ? &p->context_shift : &p->ignore_eos) = cJSON_IsTrue(f);
    } else if (!strcmp(k, "keep")) {
        if (json_number(f, &d) || d != floor(d) || d < 0 || d > 1e9) {
            snprintf(msg, cap, "keep must be an integer >= 0");
            return -1;
        }
        p->keep = (size_t)d;
    } else if (!strcmp(k, "stop")) {
        p->n_stops = 0;
        cJSON_Delete(*g->stop_json);
        *g->stop_json = cJSON_Duplicate(f, 1);
        const cJSON *it = *g->stop_json;
        if (!it) {
            snprintf(msg, cap, "out of memory");
            return -1;
        }
        if (cJSON_IsArray(it)) {
            it = it->child;
        } else if (!cJSON_IsString(it)) {
            snprintf(msg, cap, "stop must be a string or an array of strings");
            return -1;
        }
        for (; it; it = cJSON_IsArray(*g->stop_json) ? it->next : NULL) {
            if (!cJSON_IsString(it) || !*it->valuestring) {
                snprintf(msg, cap, "stop must be a string or an array of non-empty strings");
                return -1;
            }
            if (p->n_stops == MAX_STOPS) {
                snprintf(msg, cap, "stop: at most %d strings", MAX_STOPS);
                return -1;
            }
            g->stops[p->n_stops++] = it->valuestring;
        }
        p->stops = g->stops;
    } else if (!strcmp(k, "grammar") || !strcmp(k, "regex")) {
        if (!cJSON_IsString(f)) {
            snprintf(msg, cap, "%s must be a string (%s)", k,
                     !strcmp(k, "regex") ? "a regular expression" : "GBNF text");
            return -1;
        }
        if (set_grammar(g, k, !strcmp(k, "regex") ? CONSTRAINT_REGEX : CONSTRAINT_GRAMMAR, f->valuestring,
                        strlen(f->valuestring), msg, cap) != 0)
            return -1;
    } else if (!strcmp(k, "json_schema")) {
        if (schema_field(g, k, f, msg, cap) != 0) return -1;
    } else if (!strcmp(k, "response_format")) {
        if (response_format(g, f, msg, cap) != 0) return -1;
    } else {
        return 0;
    }
    return 1;
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

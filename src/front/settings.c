/*
 * settings.c - the generation settings, in one table: for each its flag,
 * its JSON key, its kind and range, where it is taken (gpt's command line,
 * gpt chat's, a --batch --jsonl line, a gpt serve body), the field it sets
 * and its help. Every front-end reads a setting through this table, so a
 * value has one range and one message wherever it is given, and the help
 * texts, the manual's table, docs/usage.md's table and the completion's
 * lists are printed from it (settings_doc; `make docs` writes them and
 * tests/check_settings.sh holds the files to it).
 *
 * A value read from argv is text ("--temp 0.7"); from JSON it is a JSON
 * value ("temperature": 0.7). Both meet the same range; the messages name
 * the flag as typed with its value ("--temp x: must be a number >= 0") or
 * the field ("temperature must be a number >= 0").
 */
#include <cJSON.h>
#include <ctype.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"

#define NO_MAX INFINITY  // a number's range without an upper end

// The table. Its order is the order of --help and of the generated docs.
static const Setting SETTINGS[] = {
    {SETTING_MAX_TOKENS, "max-tokens", 'n', "N", "max_tokens", VALUE_INTEGER, 0, 1e9, 0, IN_ALL,
     "tokens to generate (default 256)",
     "tokens per answer at most (default 256)"},
    {SETTING_TEMPERATURE, "temp", 0, "T", "temperature", VALUE_NUMBER, 0, NO_MAX, 0, IN_ALL,
     "temperature, 0 = greedy (default 1.0)", NULL},
    {SETTING_TOP_K, "top-k", 0, "K", "top_k", VALUE_INTEGER, 0, INT32_MAX, 0, IN_ALL,
     "keep the K most likely tokens, 0 = off (default 0)", NULL},
    {SETTING_TOP_P, "top-p", 0, "P", "top_p", VALUE_NUMBER, 0, 1, 1, IN_ALL,
     "keep the smallest set reaching probability P, in (0,1] (default 1.0)", NULL},
    {SETTING_MIN_P, "min-p", 0, "P", "min_p", VALUE_NUMBER, 0, 1, 0, IN_ALL,
     "drop tokens below P x the top probability, 0 = off (default 0)", NULL},
    {SETTING_REPEAT_PENALTY, "repeat-penalty", 0, "R", "repeat_penalty", VALUE_NUMBER, 0, NO_MAX, 1, IN_ALL,
     "CTRL repetition penalty over the prompt and the output, 1.0 = off\n(default 1.0)", NULL},
    {SETTING_PRESENCE_PENALTY, "presence-penalty", 0, "X", "presence_penalty", VALUE_NUMBER, -SAMPLER_PENALTY_MAX,
     SAMPLER_PENALTY_MAX, 0, IN_ALL,
     "subtract X, in [-2, 2], from the logit of every token already\ngenerated (OpenAI's presence penalty; "
     "default 0)", NULL},
    {SETTING_FREQUENCY_PENALTY, "frequency-penalty", 0, "X", "frequency_penalty", VALUE_NUMBER,
     -SAMPLER_PENALTY_MAX, SAMPLER_PENALTY_MAX, 0, IN_ALL,
     "subtract X, in [-2, 2], times the times a token was generated\nfrom its logit (OpenAI's frequency penalty; "
     "default 0)", NULL},
    {SETTING_LOGIT_BIAS, "logit-bias", 0, "BIAS", "logit_bias", VALUE_BIAS, -SAMPLER_BIAS_LIMIT,
     SAMPLER_BIAS_LIMIT, 0, IN_ALL,
     "ID=B: add B, in [-100, 100], to the logit of token ID\n(repeatable, up to 300 tokens): -100 bans it, 100 "
     "all but\nforces it. The order: the bias, --repeat-penalty, then the\npresence and frequency penalties, then "
     "--temp and the filters",
     "ID=B: add B, in [-100, 100], to token ID's logit (repeatable)"},
    {SETTING_SEED, "seed", 's', "N", "seed", VALUE_SEED, 0, 0, 0, IN_ALL,
     "random seed (default: random below 2^53, shown by --stats)",
     "answer k (from 0) samples with seed N + k (default: random\nbelow 2^53, shown on a terminal and in --json)"},
    {SETTING_GRAMMAR, "grammar", 0, "FILE", "grammar", VALUE_CONSTRAINT, 0, 0, 0, IN_GPT | IN_JSONL | IN_SERVE,
     "the output matches the GBNF grammar in FILE, or FILE itself when\nit holds ::= (docs/grammars.md); the stop "
     "reason is \"grammar\"\nwhen nothing more can follow; with --draft/--lookup the\nguesses are masked too (same "
     "text)", NULL},
    {SETTING_JSON_SCHEMA, "json-schema", 0, "SCHEMA", "json_schema", VALUE_CONSTRAINT, 0, 0, 0,
     IN_GPT | IN_JSONL | IN_SERVE,
     "the output is an instance of the JSON Schema in the file SCHEMA,\nor SCHEMA itself when it starts with {, "
     "written compactly\n(docs/json-schema.md: the subset, what is refused)", NULL},
    {SETTING_JSON_OBJECT, "json-object", 0, NULL, NULL, VALUE_CONSTRAINT, 0, 0, 0, IN_GPT,
     "the output is a JSON object, written compactly", NULL},
    {SETTING_REGEX, "regex", 0, "RE", "regex", VALUE_CONSTRAINT, 0, 0, 0, IN_GPT | IN_JSONL | IN_SERVE,
     "the output matches the regular expression RE whole\n(Python's re.fullmatch; the subset in "
     "docs/json-schema.md);\n--grammar, --json-schema, --json-object and --regex exclude\neach other; in --batch "
     "they are every line's default", NULL},
    {SETTING_RESPONSE_FORMAT, NULL, 0, NULL, "response_format", VALUE_CONSTRAINT, 0, 0, 0, IN_JSONL | IN_SERVE,
     "OpenAI's: {\"type\": \"json_object\"} (--json-object), {\"type\": \"json_schema\", \"json_schema\": "
     "{\"name\", \"schema\", \"strict\"}}, or {\"type\": \"text\"} (nothing)", NULL},
    {SETTING_STOP, "stop", 0, "STR", "stop", VALUE_STOP, 0, 0, 0, IN_ALL,
     "stop when the text contains STR (repeatable); STR is not output:\nthe text ends before it, but tokens and "
     "logprobs keep the token\nthat carried it (--json, --per-token: the tokens as generated);\nC escapes in STR: "
     "\\n \\t \\r \\\\ \\\" \\xHH (not \\x00)",
     "an answer also ends at STR (repeatable; C escapes as gpt's)"},
    {SETTING_IGNORE_EOS, "ignore-eos", 0, NULL, "ignore_eos", VALUE_SWITCH, 0, 0, 0, IN_ALL,
     "keep going after <|endoftext|>", "an answer goes on after <|endoftext|>"},
    {SETTING_CONTEXT_SHIFT, "context-shift", 0, NULL, "context_shift", VALUE_SWITCH, 0, 0, 0, IN_ALL,
     "past the context, go on: the window starts again from the\n--keep first prompt tokens and the latest, half "
     "the context in\nall, computed anew (exactly a fresh run from those tokens with\nthe sampler's state carried "
     "over); without it generation stops",
     "when the conversation leaves an answer less than -n tokens\n(at most half the context), drop its oldest "
     "messages; an\nanswer past the context goes on as gpt's --context-shift"},
    {SETTING_KEEP, "keep", 0, "N", "keep", VALUE_INTEGER, 0, 1e9, 0, IN_ALL,
     "the prompt tokens every shift keeps (default 0; at most half\nthe context; more than the prompt: the "
     "prompt)", "the prompt tokens an answer's shift keeps (default 0)"},
    {SETTING_N, "completions", 0, "N", "n", VALUE_INTEGER, 1, SETTINGS_N_MAX, 0, IN_GPT | IN_JSONL | IN_SERVE,
     "N continuations of the prompt, with --json (needed): a list\n\"completions\" (1 to 64, default 1); seeds -s, -s + 1, "
     "...: each\nthe run with its seed; the prompt computed once; in --batch\nevery line's (a --jsonl line's "
     "\"n\"), listed when more than\none (not with --text)", NULL},
    {SETTING_ECHO, "echo", 0, NULL, "echo", VALUE_SWITCH, 0, 0, 0, IN_GPT | IN_JSONL | IN_SERVE,
     "print the prompt before the continuation (--json: the text\nstarts with it; with --logprobs, its tokens get "
     "theirs too)", NULL},
    {SETTING_LOGPROBS, "logprobs", 0, "N", "logprobs", VALUE_INTEGER, 0, LOGPROBS_TOP_MAX, 0,
     IN_GPT | IN_JSONL | IN_SERVE,
     "each generated token's log-probability and the N most likely\ntokens' (N in [0, 20]) under the model's distribution: the\n"
     "log-softmax of the raw logits, before the bias, the penalties,\n--temp and the filters; in --json, else as "
     "--per-token's lines", NULL},
};
enum { N_SETTINGS = sizeof SETTINGS / sizeof *SETTINGS };
_Static_assert((int)N_SETTINGS == (int)SETTING_COUNT, "a row for every SettingId");
_Static_assert((int)SETTING_CODE_BASE + (int)SETTING_COUNT <= (int)OPT_SHARED, "the settings' codes run into the shared ones");

const Setting *setting_at(size_t i) { return i < N_SETTINGS ? &SETTINGS[i] : NULL; }

const Setting *setting_of(SettingId id) {
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (SETTINGS[i].id == id) return &SETTINGS[i];
    return NULL;
}

const Setting *setting_by_key(const char *key) {
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (SETTINGS[i].key && !strcmp(SETTINGS[i].key, key)) return &SETTINGS[i];
    return NULL;
}

const Setting *setting_by_flag(const char *flag) {
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (SETTINGS[i].flag && !strcmp(SETTINGS[i].flag, flag)) return &SETTINGS[i];
    return NULL;
}

void settings_defaults(GenSettings *g) {
    memset(g, 0, sizeof *g);
    g->params = (GenParams){.sampling = {.temperature = 1.0f, .top_p = 1.0f, .repeat_penalty = 1.0f},
                            .max_new = 256};
    g->n = 1;
}

// ----------------------------------------------------------------------------
// the range of a value, in words

// "an integer in [0, 20]", "a number >= 0", "a number in (0, 1]": what a
// value of s must be.
void setting_range(const Setting *s, char *buf, size_t cap) {
    const char *what = s->kind == VALUE_INTEGER ? "an integer" : "a number";
    if (s->hi == NO_MAX) snprintf(buf, cap, "%s %s %g", what, s->lo_open ? ">" : ">=", s->lo);
    else snprintf(buf, cap, "%s in %c%.15g, %.15g]", what, s->lo_open ? '(' : '[', s->lo, s->hi);
}

static int in_range(const Setting *s, double v) {
    return (s->lo_open ? v > s->lo : v >= s->lo) && v <= s->hi && isfinite(v);
}

// ----------------------------------------------------------------------------
// writing a value into its field: the one place each setting's field is named

static int fail(char *msg, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static void set_value(GenSettings *g, SettingId id, double v) {
    GenParams *p = &g->params;
    SamplerParams *sp = &p->sampling;
    switch (id) {
    case SETTING_MAX_TOKENS: p->max_new = (size_t)v; break;
    case SETTING_TEMPERATURE: sp->temperature = (float)v; break;
    case SETTING_TOP_K: sp->top_k = (int)v; break;
    case SETTING_TOP_P: sp->top_p = (float)v; break;
    case SETTING_MIN_P: sp->min_p = (float)v; break;
    case SETTING_REPEAT_PENALTY: sp->repeat_penalty = (float)v; break;
    case SETTING_PRESENCE_PENALTY: sp->presence_penalty = (float)v; break;
    case SETTING_FREQUENCY_PENALTY: sp->frequency_penalty = (float)v; break;
    case SETTING_IGNORE_EOS: p->ignore_eos = v != 0; break;
    case SETTING_CONTEXT_SHIFT: p->context_shift = v != 0; break;
    case SETTING_KEEP: p->keep = (size_t)v; break;
    case SETTING_N: g->n = (size_t)v; break;
    case SETTING_ECHO: g->echo = v != 0; break;
    case SETTING_LOGPROBS:  // OpenAI's meaning: the chosen token's and the N most likely
        p->logprobs = 1;
        p->top_logprobs = (size_t)v;
        break;
    default: break;
    }
}

// One more logit bias, given as `name` (the flag or field) with the argv
// word `item` (NULL from JSON): 0, or -1 with the reason.
static int add_bias(GenSettings *g, const char *name, const char *item, unsigned long long id, double b, char *msg,
                    size_t cap) {
    SamplerParams *sp = &g->params.sampling;
    if (!(fabs(b) <= SAMPLER_BIAS_LIMIT))
        return item ? fail(msg, cap, "%s %s: the bias must be a number in [-100, 100]", name, item)
                    : fail(msg, cap, "%s: token %llu: the bias must be a number in [-100, 100]", name, id);
    for (size_t i = 0; i < sp->n_bias; i++)
        if (sp->bias[i].id == (int32_t)id) return fail(msg, cap, "%s: token %llu is given twice", name, id);
    if (sp->n_bias == SAMPLER_BIAS_MAX) return fail(msg, cap, "%s: at most %d tokens", name, SAMPLER_BIAS_MAX);
    sp->bias[sp->n_bias++] = (SamplerBias){.id = (int32_t)id, .bias = (float)b};
    return 0;
}

// One more stop string (s lives as long as the settings are used).
static int add_stop(GenSettings *g, const char *name, const char *s, char *msg, size_t cap) {
    if (!*s) return fail(msg, cap, "%s: an empty stop string would stop at once", name);
    if (g->params.n_stops == MAX_STOPS) return fail(msg, cap, "%s: at most %d strings", name, MAX_STOPS);
    g->stops[g->params.n_stops++] = s;
    g->params.stops = g->stops;
    return 0;
}

// The output's constraint, one of four however given (name as given, for
// the message): 0, or -1.
static int claim_constraint(GenSettings *g, const char *name, char *msg, size_t cap) {
    if (*g->constraint_by)
        return fail(msg, cap, "%s and %s exclude each other (the output matches one grammar)", g->constraint_by,
                    name);
    snprintf(g->constraint_by, sizeof g->constraint_by, "%s", name);
    return 0;
}

// ----------------------------------------------------------------------------
// from argv

// --stop's C escapes: the escape at r (a backslash), its length (2, or 4
// for \xHH) with its byte in *byte, or 0 if it is none. \x00 is none: it
// would end the string.
static int escape_at(const char *r, char *byte) {
    static const char from[] = "ntr\\\"", to[] = "\n\t\r\\\"";
    const char *known = r[1] ? strchr(from, r[1]) : NULL;
    if (known) {
        *byte = to[known - from];
        return 2;
    }
    if (r[1] != 'x' || !isxdigit((unsigned char)r[2]) || !isxdigit((unsigned char)r[3])) return 0;
    char hex[3] = {r[2], r[3], 0};
    *byte = (char)strtol(hex, NULL, 16);
    return *byte ? 4 : 0;
}

// s with its C escapes read, in place (a byte takes less room than its
// escape), once every escape is known to be one; else -1 with *bad at the
// first that is not, s untouched. So --stop "\n\n" means what a JSON
// "stop": "\n\n" means.
static int unescape(char *s, const char **bad) {
    char byte;
    for (const char *r = s; (r = strchr(r, '\\')); r += 2)
        if (!escape_at(r, &byte)) {
            *bad = r;
            return -1;
        }
    char *w = s;
    for (const char *r = s; *r;) {
        int n = *r == '\\' ? escape_at(r, &byte) : 0;
        *w++ = n ? byte : *r;
        r += n ? n : 1;
    }
    *w = '\0';
    return 0;
}

static int bias_from_arg(GenSettings *g, const char *flag, const char *v, char *msg, size_t cap) {
    const char *eq = strchr(v, '=');
    char id_text[16];
    long id;
    float b;
    if (!eq || eq == v || (size_t)(eq - v) >= sizeof id_text)
        return fail(msg, cap, "%s %s: must be ID=BIAS (a token id, then a number in [-100, 100])", flag, v);
    memcpy(id_text, v, (size_t)(eq - v));
    id_text[eq - v] = '\0';
    if (parse_long(id_text, &id) != 0 || id < 0 || id >= INT32_MAX)
        return fail(msg, cap, "%s %s: the token id must be an integer in [0, %ld)", flag, v, (long)INT32_MAX);
    if (parse_decimal(eq + 1, &b) != 0) b = NAN;
    return add_bias(g, flag, v, (unsigned long long)id, b, msg, cap);
}

int setting_from_arg(GenSettings *g, const Setting *s, const char *flag, char *v, char *msg, size_t cap) {
    char range[64];
    setting_range(s, range, sizeof range);
    long n;
    float f;
    int rc;
    const char *bad;
    switch (s->kind) {
    case VALUE_SWITCH:
        set_value(g, s->id, 1);
        return 0;
    case VALUE_INTEGER:  // one beyond long is beyond every range
        if (parse_long(v, &n) != 0 || !in_range(s, (double)n)) return fail(msg, cap, "%s %s: must be %s", flag, v, range);
        set_value(g, s->id, (double)n);
        return 0;
    case VALUE_NUMBER:  // past float (1e50, 1e-400): out of range, whatever the setting's range
        rc = parse_decimal(v, &f);
        if (rc == -2) return fail(msg, cap, "%s %s: out of range (a float)", flag, v);
        if (rc != 0 || !in_range(s, f)) return fail(msg, cap, "%s %s: must be %s", flag, v, range);
        set_value(g, s->id, f);
        return 0;
    case VALUE_SEED:
        if (parse_u64(v, &g->params.sampling.seed) != 0)
            return fail(msg, cap, "%s %s: must be an integer in [0, 2^64)", flag, v);
        g->seed_given = 1;
        return 0;
    case VALUE_BIAS: return bias_from_arg(g, flag, v, msg, cap);
    case VALUE_STOP:
        if (unescape(v, &bad) != 0)
            return fail(msg, cap, "%s %s: '%.*s' is not an escape (\\n \\t \\r \\\\ \\\" or \\xHH, not \\x00)", flag,
                        v, bad[1] == 'x' ? 4 : 2, bad);
        return add_stop(g, flag, v, msg, cap);
    case VALUE_CONSTRAINT:
        if (claim_constraint(g, flag, msg, cap) != 0) return -1;
        g->constraint = s->id == SETTING_GRAMMAR ? CONSTRAINT_GRAMMAR
                        : s->id == SETTING_REGEX ? CONSTRAINT_REGEX
                        : s->id == SETTING_JSON_OBJECT ? CONSTRAINT_JSON_OBJECT
                                                       : CONSTRAINT_JSON_SCHEMA;
        g->constraint_text = v;
        return 0;
    }
    return fail(msg, cap, "%s: not a setting", flag);
}

// ----------------------------------------------------------------------------
// from JSON
//
// cJSON keeps a number only as a double, which holds every integer below
// 2^53 but also turns 4503599627370497.5 into ...498: where the exact value
// matters (a seed), the number is read from its text, which the walkers
// below find. They walk a text that cJSON has parsed, so the JSON is known
// to be valid.

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
// defaults' bias whole.
static int bias_from_json(GenSettings *g, const GenLimits *lim, const cJSON *f, char *msg, size_t cap) {
    g->params.sampling.n_bias = 0;
    if (cJSON_IsNull(f)) return 0;
    if (!cJSON_IsObject(f)) return fail(msg, cap, "logit_bias must be an object {\"token id\": bias}");
    // ids at or past the vocabulary, or past int32 when it is not known
    // (then the sequence refuses them when it starts)
    unsigned long long limit = lim->vocab_size ? (unsigned long long)lim->vocab_size : (unsigned long long)INT32_MAX;
    for (const cJSON *e = f->child; e; e = e->next) {
        const char *key = e->string;
        size_t len = strlen(key);
        int digits = len > 0 && len <= 10;
        for (size_t i = 0; digits && i < len; i++) digits = key[i] >= '0' && key[i] <= '9';
        unsigned long long id = digits ? strtoull(key, NULL, 10) : 0;
        if (!digits || id >= limit)
            return fail(msg, cap, "logit_bias: key \"%.40s\" is not a token id (a decimal integer in [0, %llu))", key,
                        limit);
        if (add_bias(g, "logit_bias", NULL, id, cJSON_IsNumber(e) ? e->valuedouble : NAN, msg, cap) != 0) return -1;
    }
    return 0;
}

static int stop_from_json(GenSettings *g, const cJSON *f, char *msg, size_t cap) {
    g->params.n_stops = 0;
    cJSON_Delete(g->stop_json);
    if (!(g->stop_json = cJSON_Duplicate(f, 1))) return fail(msg, cap, "out of memory");
    const cJSON *it = g->stop_json;
    if (cJSON_IsArray(it)) it = it->child;
    else if (!cJSON_IsString(it)) return fail(msg, cap, "stop must be a string or an array of strings");
    for (; it; it = cJSON_IsArray(g->stop_json) ? it->next : NULL) {
        if (!cJSON_IsString(it) || !*it->valuestring)
            return fail(msg, cap, "stop must be a string or an array of non-empty strings");
        if (add_stop(g, "stop", it->valuestring, msg, cap) != 0) return -1;
    }
    return 0;
}

// The output's grammar from field `name`: kind's text[0..len).
static int set_grammar(GenSettings *g, const char *name, ConstraintKind kind, const char *text, size_t len,
                       char *msg, size_t cap) {
    const char *field = strchr(name, '.') ? "response_format" : name;
    if (claim_constraint(g, field, msg, cap) != 0) return -1;
    GptError err = {{0}};
    if (!(g->grammar = constraint_compile(kind, text, len, name, &err))) return fail(msg, cap, "%s", err.msg);
    g->params.grammar = g->grammar;
    return 0;
}

// A schema (an object, or true/false) as JSON text for the translator.
static int schema_field(GenSettings *g, const char *name, const cJSON *schema, char *msg, size_t cap) {
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return fail(msg, cap, "%s must be a JSON Schema (an object)", name);
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return fail(msg, cap, "out of memory");
    int rc = set_grammar(g, name, CONSTRAINT_JSON_SCHEMA, text, strlen(text), msg, cap);
    free(text);
    return rc;
}

// OpenAI's response_format: {"type": "text"} (nothing asked), {"type":
// "json_object"}, {"type": "json_schema", "json_schema": {"name",
// "schema", "strict", "description"}}. strict is taken as given: the
// output always matches the schema.
static int response_format(GenSettings *g, const cJSON *f, char *msg, size_t cap) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(f, "type"), *js = NULL;
    if (!cJSON_IsObject(f) || !cJSON_IsString(type))
        return fail(msg, cap, "response_format must be an object {\"type\": \"text\", \"json_object\" or "
                              "\"json_schema\"}");
    const char *t = type->valuestring;
    if (strcmp(t, "text") && strcmp(t, "json_object") && strcmp(t, "json_schema"))
        return fail(msg, cap, "response_format.type \"%.40s\" is not text, json_object or json_schema", t);
    for (const cJSON *e = f->child; e; e = e->next) {
        if (!strcmp(e->string, "type")) continue;
        if (!strcmp(e->string, "json_schema") && !strcmp(t, "json_schema")) {
            js = e;
            continue;
        }
        return fail(msg, cap, "response_format: unknown field \"%.40s\" for type %s", e->string, t);
    }
    if (!strcmp(t, "text")) return 0;
    if (!strcmp(t, "json_object")) return set_grammar(g, "response_format", CONSTRAINT_JSON_OBJECT, NULL, 0, msg, cap);
    if (!cJSON_IsObject(js))
        return fail(msg, cap, "response_format.json_schema must be an object {\"name\", \"schema\", \"strict\"}");
    const cJSON *schema = NULL;
    for (const cJSON *e = js->child; e; e = e->next) {
        const char *k = e->string;
        if (!strcmp(k, "schema")) schema = e;
        else if ((!strcmp(k, "name") || !strcmp(k, "description")) && !cJSON_IsString(e))
            return fail(msg, cap, "response_format.json_schema.%s must be a string", k);
        else if (!strcmp(k, "strict") && !cJSON_IsBool(e) && !cJSON_IsNull(e))
            return fail(msg, cap, "response_format.json_schema.strict must be true or false");
        else if (strcmp(k, "name") && strcmp(k, "description") && strcmp(k, "strict"))
            return fail(msg, cap, "response_format.json_schema: unknown field \"%.40s\"", k);
    }
    // OpenAI's default schema is none: any JSON, but gpt asks for one
    if (!schema) return fail(msg, cap, "response_format.json_schema has no \"schema\"");
    return schema_field(g, "response_format.json_schema.schema", schema, msg, cap);
}

static int constraint_from_json(GenSettings *g, const Setting *s, const cJSON *f, char *msg, size_t cap) {
    switch (s->id) {
    case SETTING_JSON_SCHEMA: return schema_field(g, s->key, f, msg, cap);
    case SETTING_RESPONSE_FORMAT: return response_format(g, f, msg, cap);
    default:
        if (!cJSON_IsString(f))
            return fail(msg, cap, "%s must be a string (%s)", s->key,
                        s->id == SETTING_REGEX ? "a regular expression" : "GBNF text");
        return set_grammar(g, s->key, s->id == SETTING_REGEX ? CONSTRAINT_REGEX : CONSTRAINT_GRAMMAR, f->valuestring,
                           strlen(f->valuestring), msg, cap);
    }
}

// A seed: a number below 2^53, or digits in a string, read from the text:
// from 2^53 on a JSON number is not exact in most JSON tools (a double
// rounds 2^53 + 1 to 2^53), so it may not be what its writer meant; a
// fraction is no seed, however close to one.
static int seed_from_json(GenSettings *g, const cJSON *f, const char *text, size_t len, size_t member, char *msg,
                          size_t cap) {
    uint64_t seed = 0;
    const char *v;
    size_t v_len;
    int bad;
    if (cJSON_IsString(f)) bad = parse_u64(f->valuestring, &seed) != 0;
    else bad = !cJSON_IsNumber(f) || member_text(text, len, member, &v, &v_len) != 0 ||
               exact_seed(v, v_len, &seed) != 0;
    if (bad)
        return fail(msg, cap, "seed must be an integer below 2^53 written in digits (no fraction or exponent; a JSON "
                              "number from 2^53 on is rounded), or a string of digits up to 2^64 - 1");
    g->params.sampling.seed = seed;
    g->seed_given = 1;
    return 0;
}

int setting_from_json(GenSettings *g, const GenLimits *lim, const cJSON *f, const char *text, size_t len,
                      size_t member, char *msg, size_t cap) {
    const Setting *s = setting_by_key(f->string);
    if (!s || !(s->in & (IN_JSONL | IN_SERVE))) return 0;
    char range[64];
    setting_range(s, range, sizeof range);
    double d = cJSON_IsNumber(f) ? f->valuedouble : NAN;
    int rc = 0;
    switch (s->kind) {
    case VALUE_SWITCH:
        if (!cJSON_IsBool(f)) return fail(msg, cap, "%s must be true or false", s->key);
        set_value(g, s->id, cJSON_IsTrue(f));
        break;
    case VALUE_INTEGER:
        if (s->id == SETTING_LOGPROBS && cJSON_IsNull(f)) {  // OpenAI's null: none
            g->params.logprobs = 0;
            break;
        }
        if (s->id == SETTING_MAX_TOKENS && lim->max_tokens_limit && lim->max_tokens_limit < s->hi) {
            Setting limited = *s;  // the server's --max-tokens
            limited.hi = (double)lim->max_tokens_limit;
            setting_range(&limited, range, sizeof range);
            if (!in_range(&limited, d)) return fail(msg, cap, "%s must be %s", f->string, range);
        }
        if (!in_range(s, d) || d != floor(d))
            return fail(msg, cap, "%s must be %s%s", f->string, range, s->id == SETTING_LOGPROBS ? " (or null)" : "");
        set_value(g, s->id, d);
        break;
    case VALUE_NUMBER:
        if (isfinite(d) && fabs(d) > FLT_MAX) return fail(msg, cap, "%s %g: out of range (a float)", s->key, d);
        if (!in_range(s, d)) return fail(msg, cap, "%s must be %s", s->key, range);
        set_value(g, s->id, d);
        break;
    case VALUE_SEED: rc = seed_from_json(g, f, text, len, member, msg, cap); break;
    case VALUE_BIAS: rc = bias_from_json(g, lim, f, msg, cap); break;
    case VALUE_STOP: rc = stop_from_json(g, f, msg, cap); break;
    case VALUE_CONSTRAINT: rc = constraint_from_json(g, s, f, msg, cap); break;
    }
    if (rc != 0) return -1;
    g->given[s->id] = 1;
    return 1;
}

// ----------------------------------------------------------------------------
// the rules between settings, each in one place

int settings_check_keep(const GenSettings *g, int keep_given, int json, size_t n_ctx, char *msg, size_t cap) {
    const char *keep = json ? "keep" : "--keep", *shift = json ? "context_shift" : "--context-shift";
    if (keep_given && !g->params.context_shift)
        return fail(msg, cap, "%s needs %s (it says what a shift keeps)", keep, shift);
    if (n_ctx && g->params.context_shift && g->params.keep > n_ctx / 2)
        return fail(msg, cap, "%s %zu: more than half the model's context (%zu): a shift keeps half", keep,
                    g->params.keep, n_ctx / 2);
    return 0;
}

// ----------------------------------------------------------------------------
// the help

// Appends to out[*len..cap), counting what it would need past cap.
static void put(char *out, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < cap ? out + *len : NULL, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) *len += (size_t)n;
}

// --help's layout: the option in columns 0..25, its text from column 26
// (on the next line when the option is longer than 24 columns).
enum { HELP_TEXT_COLUMN = 26 };

size_t help_entry(char letter, const char *flag, const char *arg, const char *help, char *out, size_t cap) {
    size_t len = 0;
    char label[64];
    int n = letter ? snprintf(label, sizeof label, "  -%c, --%s", letter, flag)
                   : snprintf(label, sizeof label, "      --%s", flag);
    if (arg) n += snprintf(label + n, sizeof label - (size_t)n, " %s", arg);
    if (n <= HELP_TEXT_COLUMN - 2) put(out, cap, &len, "%-*s", HELP_TEXT_COLUMN, label);
    else put(out, cap, &len, "%s\n%*s", label, HELP_TEXT_COLUMN, "");
    for (const char *line = help; *line;) {
        size_t end = strcspn(line, "\n");
        put(out, cap, &len, "%.*s\n", (int)end, line);
        line += end;
        if (*line == '\n' && *++line) put(out, cap, &len, "%*s", HELP_TEXT_COLUMN, "");
    }
    return len;
}

size_t settings_help(unsigned in, char *out, size_t cap) {
    size_t len = 0;
    if (cap) *out = '\0';
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const Setting *s = &SETTINGS[i];
        if (!(s->in & in) || !s->flag) continue;
        const char *help = in == IN_CHAT && s->chat_help ? s->chat_help : s->help;
        len += help_entry(s->letter, s->flag, s->arg, help, len < cap ? out + len : NULL, len < cap ? cap - len : 0);
    }
    return len;
}

// ----------------------------------------------------------------------------
// getopt's entries

int setting_code(const Setting *s) { return s->letter ? s->letter : SETTING_CODE_BASE + (int)s->id; }

const Setting *setting_by_code(int code) {
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (SETTINGS[i].flag && setting_code(&SETTINGS[i]) == code) return &SETTINGS[i];
    return NULL;
}

size_t settings_options(unsigned in, struct option *out, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < N_SETTINGS && n < cap; i++) {
        const Setting *s = &SETTINGS[i];
        if (s->flag && (s->in & in))
            out[n++] = (struct option){s->flag, s->arg ? required_argument : no_argument, 0, setting_code(s)};
    }
    return n;
}

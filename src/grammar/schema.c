/*
 * schema.c - a JSON Schema -> GBNF text (the subset, the serialization and
 * the bounds are in schema.h). One pass over the parsed schema: each
 * subschema becomes a rule `r-N ::= ...` (a $ref target `def-N`, compiled
 * once however often it is referred to, so recursive schemas stay finite),
 * and the shared pieces (any value, a string's character, a date) are
 * written once at the end, when used.
 */
#include "grammar/schema.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/utf8.h"
#include "grammar/regex.h"

// the shared rules, written at the end when a flag is set
enum {
    P_VALUE = 1, P_OBJECT = 2, P_ARRAY = 4, P_STRING = 8, P_CHAR = 16, P_NUMBER = 32,
    P_INTEGER = 64, P_DATE = 128, P_TIME = 256, P_DATETIME = 512, P_UUID = 1024,
};

// the JSON types, as "type" names them
enum { T_NULL = 1, T_BOOLEAN = 2, T_OBJECT = 4, T_ARRAY = 8, T_NUMBER = 16, T_STRING = 32, T_INTEGER = 64, T_ALL = 127 };
static const char *const type_names[] = {"null", "boolean", "object", "array", "number", "string", "integer"};

typedef struct {
    const cJSON *node;
    char name[24];
} RefRule;

typedef struct {
    const cJSON *root;
    GText rules;  // every rule but root, in the order made
    unsigned prims;
    int nrules, depth;
    RefRule *refs;
    size_t nrefs, caprefs;
    char ptr[200];  // the JSON pointer of the subschema being compiled
    size_t plen;
    GptError *err;
} Sc;

static int sc_fail(Sc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sc_fail(Sc *c, const char *fmt, ...) {
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gpt_error(c->err, "json-schema: #%s: %s", c->ptr, msg);
}

// appends "/seg" (escaped as a JSON pointer: ~0 ~1) and returns the length
// to restore; a pointer past the buffer ends in "..."
static size_t ptr_push(Sc *c, const char *seg) {
    size_t old = c->plen, cap = sizeof c->ptr - 4;
    if (old >= cap) return old;  // already cut, ends in "..."
    char buf[sizeof c->ptr];
    size_t k = 0;
    buf[k++] = '/';
    for (const char *p = seg; *p && k < sizeof buf - 2; p++) {
        if (*p == '~' || *p == '/') buf[k++] = '~', buf[k++] = *p == '~' ? '0' : '1';
        else buf[k++] = *p;
    }
    if (c->plen + k > cap) {
        size_t room = cap > c->plen ? cap - c->plen : 0;
        memcpy(c->ptr + c->plen, buf, room);
        memcpy(c->ptr + c->plen + room, "...", 4);
        c->plen += room + 3;
    } else {
        memcpy(c->ptr + c->plen, buf, k);
        c->plen += k;
        c->ptr[c->plen] = '\0';
    }
    return old;
}
static void ptr_pop(Sc *c, size_t old) {
    c->plen = old;
    c->ptr[old] = '\0';
}
static size_t ptr_push_index(Sc *c, const char *key, int i) {
    char b[32];
    snprintf(b, sizeof b, "%d", i);
    size_t old = ptr_push(c, key);
    ptr_push(c, b);
    return old;
}

static const char *const annotations[] = {
    "$schema", "$id", "$comment", "title", "description", "default", "examples",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", NULL,
};
static const char *const assertions[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems",
    "minItems", "maxItems", "enum", "const", "minLength", "maxLength", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "pattern", "anyOf", "oneOf", "$ref", "format", NULL,
};
static const char *const string_kw[] = {"minLength", "maxLength", "pattern", "format", NULL};
static const char *const number_kw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};
static const char *const array_kw[] = {"items", "prefixItems", "minItems", "maxItems", NULL};
static const char *const object_kw[] = {"properties", "required", "additionalProperties", NULL};

static int in_list(const char *k, const char *const *list) {
    for (; *list; list++)
        if (strcmp(k, *list) == 0) return 1;
    return 0;
}
static const cJSON *kw(const cJSON *s, const char *k) { return cJSON_GetObjectItemCaseSensitive(s, k); }
static int has_any(const cJSON *s, const char *const *list) {
    for (; *list; list++)
        if (kw(s, *list)) return 1;
    return 0;
}
// the first assertion keyword of s other than those of `allowed`, or NULL
static const char *other_assertion(const cJSON *s, const char *const *allowed) {
    for (const cJSON *k = s->child; k; k = k->next)
        if (in_list(k->string, assertions) && !in_list(k->string, allowed)) return k->string;
    return NULL;
}

static void put_repeat(GText *t, const char *elem, long lo, long hi) {  // hi -1: no bound
    if (hi == 0) {
        gtext_puts(t, "\"\"");
        return;
    }
    gtext_puts(t, elem);
    if (lo == 0 && hi == -1) gtext_puts(t, "*");
    else if (lo == 1 && hi == -1) gtext_puts(t, "+");
    else if (lo == 0 && hi == 1) gtext_puts(t, "?");
    else if (hi == -1) gtext_printf(t, "{%ld,}", lo);
    else if (lo == hi) { if (lo != 1) gtext_printf(t, "{%ld}", lo); }
    else gtext_printf(t, "{%ld,%ld}", lo, hi);
}

// a count keyword: absent (*out unchanged), or an integer in [0, GRAMMAR_MAX_REPEAT]
static int read_count(Sc *c, const cJSON *s, const char *k, long *out) {
    const cJSON *v = kw(s, k);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble))
        return sc_fail(c, "%s: must be a non-negative integer", k);
    if (v->valuedouble > GRAMMAR_MAX_REPEAT)
        return sc_fail(c, "%s: %.17g is above the bound of %d", k, v->valuedouble, GRAMMAR_MAX_REPEAT);
    *out = (long)v->valuedouble;
    return 0;
}

static int compile(Sc *c, const cJSON *s, GText *out);

// s as a rule of its own; its name into name[24]
static int compile_rule(Sc *c, const cJSON *s, char name[24]) {
    GText body = {0};
    if (compile(c, s, &body)) return gtext_free(&body), -1;
    snprintf(name, 24, "r-%d", ++c->nrules);
    gtext_printf(&c->rules, "%s ::= ", name);
    gtext_put(&c->rules, body.s ? body.s : "", body.n);
    gtext_puts(&c->rules, "\n");
    if (body.failed) c->rules.failed = body.failed;
    gtext_free(&body);
    return 0;
}

/* ---- $ref --------------------------------------------------------------- */

// the node a local reference ("#", "#/$defs/a", "#/properties/x/items")
// points to, or NULL
static const cJSON *resolve(const cJSON *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const char *p = ref + 1;
    const cJSON *n = root;
    while (*p) {
        if (*p != '/') return NULL;
        p++;
        char seg[256];
        size_t k = 0;
        while (*p && *p != '/') {
            char ch = *p++;
            if (ch == '~') {
                if (*p == '0') ch = '~';
                else if (*p == '1') ch = '/';
                else return NULL;
                p++;
            } else if (ch == '%') {
                return NULL;
            }
            if (k + 1 >= sizeof seg) return NULL;
            seg[k++] = ch;
        }
        seg[k] = '\0';
        if (cJSON_IsArray(n)) {
            char *end;
            long i = strtol(seg, &end, 10);
            if (!k || *end || i < 0 || i > 100000) return NULL;
            n = cJSON_GetArrayItem(n, (int)i);
        } else if (cJSON_IsObject(n)) {
            n = cJSON_GetObjectItemCaseSensitive(n, seg);
        } else {
            return NULL;
        }
        if (!n) return NULL;
    }
    return n;
}

static int compile_ref(Sc *c, const cJSON *s, GText *out) {
    const char *other = other_assertion(s, (const char *const[]){"$ref", NULL});
    if (other) return sc_fail(c, "$ref beside %s is not supported", other);
    const cJSON *r = kw(s, "$ref");
    if (!cJSON_IsString(r)) return sc_fail(c, "$ref: must be a string");
    const cJSON *t = resolve(c->root, r->valuestring);
    if (!t) return sc_fail(c, "$ref: \"%.80s\" is not a local JSON pointer (#/$defs/NAME) to a schema here", r->valuestring);
    // a chain of references that comes back without a value between: no language
    const cJSON *u = t;
    for (int i = 0; i <= SCHEMA_MAX_DEPTH && cJSON_IsObject(u) && cJSON_IsString(kw(u, "$ref")); i++) {
        u = resolve(c->root, kw(u, "$ref")->valuestring);
        if (u == t || i == SCHEMA_MAX_DEPTH) return sc_fail(c, "$ref: \"%.80s\" refers to itself through $ref alone", r->valuestring);
    }
    for (size_t i = 0; i < c->nrefs; i++)
        if (c->refs[i].node == t) return gtext_puts(out, c->refs[i].name), 0;
    if (grow_array(&c->refs, &c->caprefs, c->nrefs + 1, sizeof *c->refs)) return sc_fail(c, "out of memory");
    RefRule *rr = &c->refs[c->nrefs++];
    rr->node = t;
    snprintf(rr->name, sizeof rr->name, "def-%zu", c->nrefs);
    char name[24];
    memcpy(name, rr->name, sizeof name);  // rr moves if refs grows
    // errors inside the target name its own pointer
    char saved[sizeof c->ptr];
    size_t saved_len = c->plen;
    memcpy(saved, c->ptr, sizeof saved);
    snprintf(c->ptr, sizeof c->ptr, "%s", r->valuestring + 1);
    c->plen = strlen(c->ptr);
    GText body = {0};
    int rc = compile(c, t, &body);
    memcpy(c->ptr, saved, sizeof saved);
    c->plen = saved_len;
    if (rc) return gtext_free(&body), -1;
    gtext_printf(&c->rules, "%s ::= ", name);
    gtext_put(&c->rules, body.s ? body.s : "", body.n);
    gtext_puts(&c->rules, "\n");
    if (body.failed) c->rules.failed = body.failed;
    gtext_free(&body);
    gtext_puts(out, name);
    return 0;
}

/* ---- types -------------------------------------------------------------- */

static int read_types(Sc *c, const cJSON *s, unsigned *mask) {
    const cJSON *t = kw(s, "type");
    *mask = T_ALL;
    if (!t) return 0;
    *mask = 0;
    const cJSON *one = t;
    if (cJSON_IsArray(t)) {
        one = t->child;
        if (!one) return sc_fail(c, "type: an empty list allows nothing");
    }
    for (; one; one = cJSON_IsArray(t) ? one->next : NULL) {
        unsigned bit = 0;
        for (int i = 0; i < 7; i++)
            if (cJSON_IsString(one) && strcmp(one->valuestring, type_names[i]) == 0) bit = 1u << i;
        if (!bit) return sc_fail(c, "type: must be one of null, boolean, object, array, number, string, integer or a list of them");
        if (*mask & bit) return sc_fail(c, "type: \"%s\" twice", one->valuestring);
        *mask |= bit;
    }
    return 0;
}

// whether value v is of a type in mask (an integer: a number whose value is whole)
static int value_has_type(const cJSON *v, unsigned mask) {
    if (cJSON_IsNull(v)) return mask & T_NULL;
    if (cJSON_IsBool(v)) return mask & T_BOOLEAN;
    if (cJSON_IsObject(v)) return mask & T_OBJECT;
    if (cJSON_IsArray(v)) return mask & T_ARRAY;
    if (cJSON_IsString(v)) return mask & T_STRING;
    if (cJSON_IsNumber(v)) return (mask & T_NUMBER) || ((mask & T_INTEGER) && v->valuedouble == floor(v->valuedouble));
    return 0;
}

// The types a value valid under s may have, for oneOf's disjointness: from
// type, enum/const, $ref, anyOf/oneOf; everything else may be anything.
// An integer is a number too: T_NUMBER stands for both.
static unsigned value_types(Sc *c, const cJSON *s, int depth) {
    if (cJSON_IsFalse(s)) return 0;
    if (!cJSON_IsObject(s) || depth > 8) return T_ALL;
    for (int hops = 0; hops < SCHEMA_MAX_DEPTH && cJSON_IsString(kw(s, "$ref")); hops++) {
        const cJSON *t = resolve(c->root, kw(s, "$ref")->valuestring);
        if (!t) return T_ALL;
        if (!cJSON_IsObject(t)) return cJSON_IsFalse(t) ? 0 : T_ALL;
        s = t;
    }
    unsigned m = T_ALL;
    const cJSON *e = kw(s, "const") ? kw(s, "const") : kw(s, "enum");
    if (e) {
        m = 0;
        for (const cJSON *v = kw(s, "const") ? e : cJSON_IsArray(e) ? e->child : NULL; v; v = kw(s, "const") ? NULL : v->next)
            for (unsigned bit = 1; bit < T_INTEGER; bit <<= 1)
                if (value_has_type(v, bit)) m |= bit;
    }
    unsigned tm;
    GptError quiet;
    GptError *saved = c->err;
    c->err = &quiet;
    if (read_types(c, s, &tm) == 0) m &= tm;
    c->err = saved;
    if (m & T_NUMBER) m |= T_INTEGER;  // a number may be whole
    const cJSON *l = kw(s, "anyOf") ? kw(s, "anyOf") : kw(s, "oneOf");
    if (cJSON_IsArray(l)) {
        unsigned u = 0;
        for (const cJSON *b = l->child; b; b = b->next) u |= value_types(c, b, depth + 1);
        m &= u;
    }
    return m;
}

static int compile_enum(Sc *c, const cJSON *s, unsigned mask, GText *out) {
    int is_const = kw(s, "const") != NULL;
    if (is_const && kw(s, "enum")) return sc_fail(c, "enum beside const is not supported");
    const char *k = is_const ? "const" : "enum";
    const char *other = other_assertion(s, (const char *const[]){"type", "enum", "const", NULL});
    if (other) return sc_fail(c, "%s beside %s is not supported", k, other);
    const cJSON *e = kw(s, k);
    if (!is_const && (!cJSON_IsArray(e) || !e->child)) return sc_fail(c, "enum: must be a non-empty array");
    int n = 0;
    gtext_puts(out, "( ");
    for (const cJSON *v = is_const ? e : e->child; v; v = is_const ? NULL : v->next) {
        if (!value_has_type(v, mask)) continue;
        char *text = cJSON_PrintUnformatted(v);
        if (!text) return sc_fail(c, "%s: out of memory", k);
        if (n++) gtext_puts(out, " | ");
        gtext_literal(out, text, strlen(text));
        cJSON_free(text);
    }
    gtext_puts(out, " )");
    if (!n) return sc_fail(c, "%s: no value of the type allowed", k);
    return 0;
}

/* ---- integers ----------------------------------------------------------- */

static int all_of(const char *s, int n, char d) {
    for (int i = 0; i < n; i++)
        if (s[i] != d) return 0;
    return 1;
}

static void put_digits_any(GText *t, int n) {
    if (n == 1) gtext_puts(t, " [0-9]");
    else if (n > 1) gtext_printf(t, " [0-9]{%d}", n);
}

// the decimal strings of n digits from a to b (a <= b, same length n)
static void same_len(GText *t, const char *a, const char *b, int n) {
    if (n == 0) {
        gtext_puts(t, "\"\"");
        return;
    }
    if (a[0] == b[0]) {
        gtext_printf(t, "\"%c\"", a[0]);
        if (n > 1) {
            gtext_puts(t, " ( ");
            same_len(t, a + 1, b + 1, n - 1);
            gtext_puts(t, " )");
        }
        return;
    }
    char lo = a[0], hi = b[0];
    int first = 1;
    char nines[20], zeros[20];
    memset(nines, '9', sizeof nines), memset(zeros, '0', sizeof zeros);
    gtext_puts(t, "( ");
    if (!all_of(a + 1, n - 1, '0')) {  // a[0] followed by a[1..] up to 9...9
        gtext_printf(t, "\"%c\" ( ", lo);
        same_len(t, a + 1, nines, n - 1);
        gtext_puts(t, " )");
        lo++;
        first = 0;
    }
    char top = all_of(b + 1, n - 1, '9') ? hi : (char)(hi - 1);
    if (lo <= top) {
        if (!first) gtext_puts(t, " | ");
        if (lo == top) gtext_printf(t, "\"%c\"", lo);
        else gtext_printf(t, "[%c-%c]", lo, top);
        put_digits_any(t, n - 1);
        first = 0;
    }
    if (top != hi) {  // b[0] followed by 0...0 up to b[1..]
        if (!first) gtext_puts(t, " | ");
        gtext_printf(t, "\"%c\" ( ", hi);
        same_len(t, zeros, b + 1, n - 1);
        gtext_puts(t, " )");
    }
    gtext_puts(t, " )");
}

// the decimals (no leading zero) of lo..hi, 0 <= lo <= hi <= SCHEMA_INT_LIMIT
static void uint_range(GText *t, long long lo, long long hi) {
    char a[24], b[24];
    int la = snprintf(a, sizeof a, "%lld", lo);
    int lb = snprintf(b, sizeof b, "%lld", hi);
    gtext_puts(t, "( ");
    for (int d = la; d <= lb; d++) {
        char x[24], y[24];
        if (d == la) memcpy(x, a, sizeof x);
        else x[0] = d == 1 ? '0' : '1', memset(x + 1, '0', (size_t)d - 1), x[d] = '\0';
        if (d == lb) memcpy(y, b, sizeof y);
        else memset(y, '9', (size_t)d), y[d] = '\0';
        if (d > la) gtext_puts(t, " | ");
        same_len(t, x, y, d);
    }
    gtext_puts(t, " )");
}

static int read_bound(Sc *c, const cJSON *s, const char *k, int up, int excl, int *has, long long *v) {
    const cJSON *x = kw(s, k);
    if (!x) return 0;
    if (!cJSON_IsNumber(x)) return sc_fail(c, "%s: must be a number", k);
    double d = x->valuedouble;
    if (!(fabs(d) <= (double)SCHEMA_MAX_INT)) return sc_fail(c, "%s: %.17g is beyond the bound of +-10^15", k, d);
    long long b = up ? (excl ? (long long)ceil(d) - 1 : (long long)floor(d))
                     : (excl ? (long long)floor(d) + 1 : (long long)ceil(d));
    if (!*has || (up ? b < *v : b > *v)) *v = b;
    *has = 1;
    return 0;
}

static int compile_integer(Sc *c, const cJSON *s, GText *out) {
    int hl = 0, hh = 0;
    long long lo = 0, hi = 0;
    if (read_bound(c, s, "minimum", 0, 0, &hl, &lo) || read_bound(c, s, "exclusiveMinimum", 0, 1, &hl, &lo) ||
        read_bound(c, s, "maximum", 1, 0, &hh, &hi) || read_bound(c, s, "exclusiveMaximum", 1, 1, &hh, &hi))
        return -1;
    if (!hl && !hh) {
        c->prims |= P_INTEGER;
        gtext_puts(out, "integer");
        return 0;
    }
    if (hl && hh && lo > hi) return sc_fail(c, "minimum above maximum: no integer between");
    int n = 0;
    gtext_puts(out, "( ");
    if (!hl || lo < 0) {  // negatives: magnitudes from max(1, -hi) to -lo
        long long m1 = hh && hi < 0 ? -hi : 1;
        gtext_puts(out, "\"-\" ");
        uint_range(out, m1, hl ? -lo : SCHEMA_INT_LIMIT);
        n++;
    }
    if ((!hl || lo <= 0) && (!hh || hi >= 0)) {
        gtext_puts(out, n++ ? " | \"0\"" : "\"0\"");
    }
    if (!hh || hi > 0) {
        if (n++) gtext_puts(out, " | ");
        uint_range(out, hl && lo > 1 ? lo : 1, hh ? hi : SCHEMA_INT_LIMIT);
    }
    gtext_puts(out, " )");
    return 0;
}

/* ---- strings, arrays, objects ------------------------------------------- */

static int compile_string(Sc *c, const cJSON *s, GText *out) {
    const cJSON *pat = kw(s, "pattern"), *fmt = kw(s, "format");
    int lens = kw(s, "minLength") || kw(s, "maxLength");
    if (fmt) {
        if (pat || lens) return sc_fail(c, "format beside %s is not supported", pat ? "pattern" : "minLength/maxLength");
        if (!cJSON_IsString(fmt)) return sc_fail(c, "format: must be a string");
        static const char *const names[] = {"date", "time", "date-time", "uuid"};
        static const unsigned flags[] = {P_DATE, P_TIME, P_DATETIME | P_DATE | P_TIME, P_UUID};
        for (int i = 0; i < 4; i++)
            if (strcmp(fmt->valuestring, names[i]) == 0) {
                c->prims |= flags[i];
                gtext_printf(out, "\"\\\"\" %s \"\\\"\"", names[i]);
                return 0;
            }
        return sc_fail(c, "format \"%.40s\" is not supported (date, time, date-time, uuid are)", fmt->valuestring);
    }
    if (pat) {
        if (lens)
            return sc_fail(c, "pattern beside minLength/maxLength is not supported: bound the length in the pattern "
                              "(^[a-z]{2,8}$)");
        if (!cJSON_IsString(pat)) return sc_fail(c, "pattern: must be a string");
        char what[sizeof c->ptr + 32];
        snprintf(what, sizeof what, "json-schema: #%s/pattern", c->ptr);
        gtext_puts(out, "\"\\\"\" ( ");
        if (regex_emit(out, pat->valuestring, strlen(pat->valuestring), 1, what, c->err)) return -1;
        gtext_puts(out, " ) \"\\\"\"");
        return 0;
    }
    long lo = 0, hi = -1;
    if (read_count(c, s, "minLength", &lo) || read_count(c, s, "maxLength", &hi)) return -1;
    if (hi >= 0 && hi < lo) return sc_fail(c, "maxLength below minLength: no string");
    if (lo == 0 && hi < 0) {
        c->prims |= P_STRING;
        gtext_puts(out, "string");
        return 0;
    }
    c->prims |= P_CHAR;
    gtext_puts(out, "\"\\\"\" ");
    put_repeat(out, "char", lo, hi);
    gtext_puts(out, " \"\\\"\"");
    return 0;
}

static int compile_array(Sc *c, const cJSON *s, GText *out) {
    long lo = 0, hi = -1;
    if (read_count(c, s, "minItems", &lo) || read_count(c, s, "maxItems", &hi)) return -1;
    if (hi >= 0 && hi < lo) return sc_fail(c, "maxItems below minItems: no array");
    const cJSON *items = kw(s, "items"), *prefix = kw(s, "prefixItems");
    if (items && cJSON_IsArray(items)) return sc_fail(c, "items: an array of schemas (draft 7 tuples) is not supported; use prefixItems");
    if (prefix && !cJSON_IsArray(prefix)) return sc_fail(c, "prefixItems: must be an array of schemas");
    if (!prefix && !items && lo == 0 && hi < 0) {
        c->prims |= P_ARRAY;
        gtext_puts(out, "array");
        return 0;
    }
    char item[24] = "value";
    int item_ok = 1;  // items other than false
    if (!items || cJSON_IsTrue(items)) {
        c->prims |= P_VALUE;
    } else if (cJSON_IsFalse(items)) {
        item_ok = 0;
    } else {
        size_t old = ptr_push(c, "items");
        int rc = compile_rule(c, items, item);
        ptr_pop(c, old);
        if (rc) return -1;
    }
    gtext_puts(out, "\"[\" ");
    int np = prefix ? cJSON_GetArraySize(prefix) : 0, open = 0, k = 0;
    for (const cJSON *p = prefix ? prefix->child : NULL; p && (hi < 0 || k < hi); p = p->next, k++) {
        if (cJSON_IsFalse(p)) {  // no item k: the array ends before it
            if (lo > k) return sc_fail(c, "prefixItems: item %d is false and minItems is %ld", k, lo);
            hi = k;
            break;
        }
        char name[24];
        size_t old = ptr_push_index(c, "prefixItems", k);
        int rc = compile_rule(c, p, name);
        ptr_pop(c, old);
        if (rc) return -1;
        if (k >= lo) gtext_puts(out, "( "), open++;
        if (k) gtext_puts(out, "\",\" ");
        gtext_printf(out, "%s ", name);
    }
    if (k == np || (hi >= 0 && k >= hi)) {  // the items after the prefix
        long tlo = lo > k ? lo - k : 0, thi = hi < 0 ? -1 : hi - k;
        if (!item_ok) {
            if (tlo > 0) return sc_fail(c, "minItems %ld with items false after %d prefixItems: no array", lo, k);
        } else if (thi != 0) {
            if (k > 0) {
                char elem[40];
                snprintf(elem, sizeof elem, "( \",\" %s )", item);
                put_repeat(out, elem, tlo, thi);
                gtext_puts(out, " ");
            } else {
                char elem[40];
                snprintf(elem, sizeof elem, "( \",\" %s )", item);
                if (tlo == 0) gtext_puts(out, "( ");
                gtext_printf(out, "%s ", item);
                if (thi != 1) put_repeat(out, elem, tlo > 0 ? tlo - 1 : 0, thi < 0 ? -1 : thi - 1);
                if (tlo == 0) gtext_puts(out, " )?");
                gtext_puts(out, " ");
            }
        }
    }
    for (; open; open--) gtext_puts(out, ")? ");
    gtext_puts(out, "\"]\"");
    return 0;
}

static void put_key(GText *t, const char *key) {  // "\"key\":" as a compact JSON writes it
    GText k = {0};
    gtext_puts(&k, "\"");
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (*p < 0x20 || *p == '"' || *p == '\\') {
            char e[8];
            switch (*p) {
            case '"': strcpy(e, "\\\""); break;
            case '\\': strcpy(e, "\\\\"); break;
            case 8: strcpy(e, "\\b"); break;
            case 9: strcpy(e, "\\t"); break;
            case 10: strcpy(e, "\\n"); break;
            case 12: strcpy(e, "\\f"); break;
            case 13: strcpy(e, "\\r"); break;
            default: snprintf(e, sizeof e, "\\u%04x", *p);
            }
            gtext_puts(&k, e);
        } else {
            gtext_put(&k, (const char *)p, 1);
        }
    }
    gtext_puts(&k, "\":");
    gtext_literal(t, k.s ? k.s : "", k.n);
    if (k.failed) t->failed = k.failed;
    gtext_free(&k);
}

static int compile_object(Sc *c, const cJSON *s, GText *out) {
    const cJSON *props = kw(s, "properties"), *req = kw(s, "required"), *add = kw(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return sc_fail(c, "properties: must be an object");
    if (req && !cJSON_IsArray(req)) return sc_fail(c, "required: must be an array of strings");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) return sc_fail(c, "required: must be an array of strings");
        const cJSON *p = props ? kw(props, r->valuestring) : NULL;
        if (!p) return sc_fail(c, "required: \"%.60s\" is not in properties", r->valuestring);
        if (cJSON_IsFalse(p)) return sc_fail(c, "required: \"%.60s\" has the schema false", r->valuestring);
        for (const cJSON *q = req->child; q != r; q = q->next)
            if (strcmp(q->valuestring, r->valuestring) == 0) return sc_fail(c, "required: \"%.60s\" twice", r->valuestring);
    }
    // additionalProperties: absent with properties, or false: no other key;
    // absent without properties (any object), true or a schema: other keys
    int nprops = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) nprops++;
    char extra[24] = "";
    if (add ? !cJSON_IsFalse(add) : nprops == 0) {
        if (nprops) return sc_fail(c, "additionalProperties other than false beside properties is not supported");
        if (!add || cJSON_IsTrue(add)) {
            c->prims |= P_VALUE;
            strcpy(extra, "value");
        } else {
            size_t old = ptr_push(c, "additionalProperties");
            int rc = compile_rule(c, add, extra);
            ptr_pop(c, old);
            if (rc) return -1;
        }
        c->prims |= P_STRING;
        gtext_printf(out, "\"{\" ( string \":\" %s ( \",\" string \":\" %s )* )? \"}\"", extra, extra);
        return 0;
    }
    // properties p1..pn in order: first_i (nothing before) and rest_i (something before)
    int n = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) n++;
    if (n == 0) {
        gtext_puts(out, "\"{}\"");
        return 0;
    }
    char first[24] = "", rest[24] = "";  // the rules for i + 1; "" when i == n
    const cJSON **list = malloc((size_t)n * sizeof *list);
    if (!list) return sc_fail(c, "out of memory");
    int i = 0;
    for (const cJSON *p = props->child; p; p = p->next) list[i++] = p;
    for (i = n - 1; i >= 0; i--) {
        const cJSON *p = list[i];
        if (cJSON_IsFalse(p)) continue;  // not required (checked above): never written
        int required = 0;
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (strcmp(r->valuestring, p->string) == 0) required = 1;
        char val[24];
        size_t old = ptr_push(c, "properties");
        ptr_push(c, p->string);
        int rc = compile_rule(c, p, val);
        ptr_pop(c, old);
        if (rc) return free(list), -1;
        GText kv = {0};
        put_key(&kv, p->string);
        gtext_printf(&kv, " %s", val);
        char nf[24], nr[24];
        snprintf(nr, sizeof nr, "r-%d", ++c->nrules);
        snprintf(nf, sizeof nf, "r-%d", ++c->nrules);
        // rest_i ::= ( "," kv )? rest_{i+1}     first_i ::= kv rest_{i+1} | first_{i+1}
        // (the ( )? and the | first_{i+1} only when p_i is optional)
        const char *kvs = kv.s ? kv.s : "";
        gtext_printf(&c->rules, "%s ::= ", nr);
        if (required) gtext_printf(&c->rules, "\",\" %s", kvs);
        else gtext_printf(&c->rules, "( \",\" %s )?", kvs);
        gtext_printf(&c->rules, "%s%s\n", rest[0] ? " " : "", rest);
        gtext_printf(&c->rules, "%s ::= %s%s%s", nf, kvs, rest[0] ? " " : "", rest);
        if (!required) gtext_printf(&c->rules, " | %s", first[0] ? first : "\"\"");
        gtext_puts(&c->rules, "\n");
        if (kv.failed) c->rules.failed = kv.failed;
        gtext_free(&kv);
        memcpy(first, nf, sizeof first);
        memcpy(rest, nr, sizeof rest);
    }
    free(list);
    gtext_printf(out, "\"{\" %s \"}\"", first[0] ? first : "\"\"");
    return 0;
}

/* ---- one subschema ------------------------------------------------------ */

static int compile(Sc *c, const cJSON *s, GText *out) {
    if (cJSON_IsTrue(s)) {
        c->prims |= P_VALUE;
        gtext_puts(out, "value");
        return 0;
    }
    if (cJSON_IsFalse(s)) return sc_fail(c, "the schema false allows no value here");
    if (!cJSON_IsObject(s)) return sc_fail(c, "a schema must be an object, true or false");
    if (c->depth >= SCHEMA_MAX_DEPTH) return sc_fail(c, "subschemas nested deeper than %d", SCHEMA_MAX_DEPTH);
    c->depth++;
    int rc = -1;
    for (const cJSON *k = s->child; k; k = k->next)
        if (!in_list(k->string, annotations) && !in_list(k->string, assertions)) {
            sc_fail(c, "%.60s is not supported", k->string);
            goto out;
        }
    if (kw(s, "$ref")) {
        rc = compile_ref(c, s, out);
        goto out;
    }
    const cJSON *any = kw(s, "anyOf"), *one = kw(s, "oneOf");
    if (any || one) {
        const char *k = any ? "anyOf" : "oneOf";
        const char *other = other_assertion(s, (const char *const[]){k, NULL});
        if (other) {
            sc_fail(c, "%s beside %s is not supported", k, other);
            goto out;
        }
        const cJSON *list = any ? any : one;
        if (!cJSON_IsArray(list) || !list->child) {
            sc_fail(c, "%s: must be a non-empty array of schemas", k);
            goto out;
        }
        if (one) {  // exact as an alternation only when no value is in two branches
            int i = 0;
            for (const cJSON *a = list->child; a; a = a->next, i++) {
                int j = i + 1;
                for (const cJSON *b = a->next; b; b = b->next, j++)
                    if (value_types(c, a, 0) & value_types(c, b, 0)) {
                        sc_fail(c, "oneOf: branches %d and %d may both hold a value (only branches of different types are supported; anyOf takes any)", i, j);
                        goto out;
                    }
            }
        }
        int i = 0, n = 0;
        gtext_puts(out, "( ");
        for (const cJSON *b = list->child; b; b = b->next, i++) {
            if (cJSON_IsFalse(b)) continue;
            char name[24];
            size_t old = ptr_push_index(c, k, i);
            int r = compile_rule(c, b, name);
            ptr_pop(c, old);
            if (r) goto out;
            gtext_printf(out, "%s%s", n++ ? " | " : "", name);
        }
        gtext_puts(out, " )");
        if (!n) {
            sc_fail(c, "%s: every branch is false", k);
            goto out;
        }
        rc = 0;
        goto out;
    }
    unsigned mask;
    if (read_types(c, s, &mask)) goto out;
    if (kw(s, "enum") || kw(s, "const")) {
        rc = compile_enum(c, s, mask, out);
        goto out;
    }
    if ((mask & T_NUMBER) && has_any(s, number_kw)) {
        const char *k = NULL;
        for (const char *const *p = number_kw; *p; p++)
            if (kw(s, *p)) {
                k = *p;
                break;
            }
        sc_fail(c, "%s on numbers is not supported (give \"type\": \"integer\")", k);
        goto out;
    }
    if (mask == T_ALL && !has_any(s, string_kw) && !has_any(s, array_kw) && !has_any(s, object_kw)) {
        c->prims |= P_VALUE;
        gtext_puts(out, "value");
        rc = 0;
        goto out;
    }
    int n = 0;
    gtext_puts(out, "( ");
    for (unsigned bit = 1; bit <= T_INTEGER; bit <<= 1) {
        if (!(mask & bit)) continue;
        if (bit == T_INTEGER && (mask & T_NUMBER)) continue;  // number holds them
        if (n++) gtext_puts(out, " | ");
        int r = 0;
        switch (bit) {
        case T_NULL: gtext_puts(out, "\"null\""); break;
        case T_BOOLEAN: gtext_puts(out, "( \"true\" | \"false\" )"); break;
        case T_NUMBER: c->prims |= P_NUMBER, gtext_puts(out, "number"); break;
        case T_INTEGER: r = compile_integer(c, s, out); break;
        case T_STRING: r = compile_string(c, s, out); break;
        case T_ARRAY: r = compile_array(c, s, out); break;
        case T_OBJECT: r = compile_object(c, s, out); break;
        }
        if (r) goto out;
    }
    gtext_puts(out, " )");
    rc = 0;
out:
    c->depth--;
    return rc;
}

/* ---- the shared rules ----------------------------------------------------- */

// A JSON number of at most SCHEMA_DIGITS digits before its exponent (a 0
// before the point not counted: each digit is significant) and at most
// SCHEMA_EXP_DIGITS in it: below 10^17 * 10^99, so every one parses as a
// finite double, and a run ends its number within 23 bytes. After the
// integer part's k-th digit, either its fraction of up to SCHEMA_DIGITS - k
// digits or its next digit: nested, so that one stack reads each digit.
static void put_number(GText *t) {
    gtext_printf(t, "number ::= \"-\"? ( \"0\" ( \".\" [0-9]{1,%d} )? | [1-9] ", SCHEMA_DIGITS);
    for (int left = SCHEMA_DIGITS - 1; left > 0; left--) gtext_printf(t, "( \".\" [0-9]{1,%d} | [0-9] ", left);
    for (int left = SCHEMA_DIGITS - 1; left > 0; left--) gtext_puts(t, ")? ");
    gtext_printf(t, ") ( [eE] [-+]? [0-9]{1,%d} )?\n", SCHEMA_EXP_DIGITS);
}

static void put_prims(GText *t, unsigned p) {
    if (p & (P_OBJECT | P_ARRAY)) p |= P_VALUE;
    if (p & P_VALUE) p |= P_OBJECT | P_ARRAY | P_STRING | P_NUMBER;
    if (p & (P_STRING)) p |= P_CHAR;
    if (p & P_VALUE) gtext_puts(t, "value ::= object | array | string | number | \"true\" | \"false\" | \"null\"\n");
    if (p & P_OBJECT) gtext_puts(t, "object ::= \"{\" ( string \":\" value ( \",\" string \":\" value )* )? \"}\"\n");
    if (p & P_ARRAY) gtext_puts(t, "array ::= \"[\" ( value ( \",\" value )* )? \"]\"\n");
    if (p & P_STRING) gtext_puts(t, "string ::= \"\\\"\" char* \"\\\"\"\n");
    if (p & P_CHAR) {
        gtext_puts(t, "char ::= ");
        regex_json_char(t);
        gtext_puts(t, "\n");
    }
    if (p & P_NUMBER) put_number(t);
    if (p & P_INTEGER) gtext_printf(t, "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,%d} )\n", SCHEMA_DIGITS - 1);
    if (p & P_DATETIME) gtext_puts(t, "date-time ::= date [Tt] time\n");
    if (p & P_DATE)
        gtext_puts(t, "date ::= [0-9]{4} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )"
                      " | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" )"
                      " | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )"
                      // February 29 in a leap year: a multiple of 4 that ends in 01-99, or of 400
                      " | [0-9] [0-9] ( \"0\" [48] | [2468] [048] | [13579] [26] ) \"-02-29\""
                      " | ( \"0\" [048] | [2468] [048] | [13579] [26] ) \"00-02-29\"\n");
    if (p & P_TIME)
        gtext_puts(t, "time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]+ )?"
                      " ( [Zz] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n");
    if (p & P_UUID)
        gtext_puts(t, "uuid ::= [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}\n");
}

char *schema_to_gbnf(const char *json, size_t n, GptError *err) {
    if (n > SCHEMA_MAX_BYTES) {
        gpt_error(err, "json-schema: %zu bytes, above the bound of %u", n, SCHEMA_MAX_BYTES);
        return NULL;
    }
    if (!utf8_valid((const unsigned char *)json, n)) {
        gpt_error(err, "json-schema: not valid UTF-8");
        return NULL;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, n, &end, 0);
    if (!root) {
        size_t at = end && end >= json ? (size_t)(end - json) : 0;
        gpt_error(err, "json-schema: not JSON (at byte %zu)", at);
        return NULL;
    }
    for (const char *p = end; p < json + n; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            gpt_error(err, "json-schema: text after the schema (at byte %zu)", (size_t)(p - json));
            return NULL;
        }
    Sc c = {.root = root, .err = err};
    GText body = {0}, t = {0};
    char *res = NULL;
    // "#" refers to root itself
    if (grow_array(&c.refs, &c.caprefs, 1, sizeof *c.refs)) {
        gpt_error(err, "json-schema: out of memory");
        goto out;
    }
    c.refs[0].node = root;
    strcpy(c.refs[0].name, "root");
    c.nrefs = 1;
    if (compile(&c, root, &body)) goto out;
    gtext_puts(&t, "root ::= ");
    gtext_put(&t, body.s ? body.s : "", body.n);
    gtext_puts(&t, "\n");
    gtext_put(&t, c.rules.s ? c.rules.s : "", c.rules.n);
    put_prims(&t, c.prims);
    if (t.failed || body.failed || c.rules.failed) {
        int f = t.failed | body.failed | c.rules.failed;
        gpt_error(err, "json-schema: %s", f & 2 ? "its grammar exceeds the bound of 1 MiB" : "out of memory");
        goto out;
    }
    res = t.s;
    t.s = NULL;
out:
    gtext_free(&t);
    gtext_free(&body);
    gtext_free(&c.rules);
    free(c.refs);
    cJSON_Delete(root);
    return res;
}

char *schema_json_object_gbnf(GptError *err) {
    GText t = {0};
    gtext_puts(&t, "root ::= object\n");
    put_prims(&t, P_VALUE);
    if (t.failed) {
        gtext_free(&t);
        gpt_error(err, "json-object: out of memory");
        return NULL;
    }
    return t.s;
}

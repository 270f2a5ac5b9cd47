/*
 * regex.c - a regular expression -> GBNF text (the subset and bounds are in
 * regex.h). A recursive descent over the expression that writes GBNF as it
 * goes: each atom is written where it stands and wrapped in ( ) when a
 * quantifier follows; a class is a set of code point ranges, written as a
 * GBNF class of its ranges (negation is computed here, over U+0000..U+10FFFF
 * less the surrogates, which UTF-8 cannot hold).
 */
#include "grammar/regex.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/utf8.h"

/* ---- GBNF text ---------------------------------------------------------- */

void gtext_put(GText *t, const char *s, size_t n) {
    if (t->failed) return;
    if (t->n + n + 1 > GRAMMAR_MAX_TEXT) {
        t->failed = 2;
        return;
    }
    if (grow_array(&t->s, &t->cap, t->n + n + 1, 1)) {
        t->failed = 1;
        return;
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = '\0';
}

void gtext_puts(GText *t, const char *s) { gtext_put(t, s, strlen(s)); }

void gtext_printf(GText *t, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof buf) {  // our formats are short; never silently cut
        t->failed = 2;
        return;
    }
    gtext_put(t, buf, (size_t)k);
}

void gtext_literal(GText *t, const char *s, size_t n) {
    gtext_put(t, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            gtext_put(t, e, 2);
        } else if (c >= 0x20 && c < 0x7F) {
            gtext_put(t, (const char *)&c, 1);
        } else if (c < 0x80) {
            gtext_printf(t, "\\x%02X", c);
        } else {  // a byte of a UTF-8 sequence: the grammar text is UTF-8
            gtext_put(t, (const char *)&c, 1);
        }
    }
    gtext_put(t, "\"", 1);
}

void gtext_insert(GText *t, size_t at, const char *s) {
    size_t k = strlen(s), old = t->n;
    gtext_put(t, s, k);  // grows by k (its bytes are overwritten below)
    if (t->failed) return;
    memmove(t->s + at + k, t->s + at, old - at);
    memcpy(t->s + at, s, k);
}

void gtext_free(GText *t) {
    free(t->s);
    t->s = NULL;
    t->n = t->cap = 0;
}

/* ---- sets of code points ------------------------------------------------ */

#define CP_MAX 0x10FFFF

typedef struct {
    uint32_t (*r)[2];  // [lo, hi] inclusive, sorted and disjoint after cset_norm
    size_t n, cap;
    int failed;
} CSet;

static void cset_add(CSet *s, uint32_t lo, uint32_t hi) {
    if (s->failed) return;
    if (grow_array(&s->r, &s->cap, s->n + 1, sizeof *s->r)) {
        s->failed = 1;
        return;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
}

static int range_cmp(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

// sorts and merges overlapping or touching ranges
static void cset_norm(CSet *s) {
    if (s->failed || s->n == 0) return;
    qsort(s->r, s->n, sizeof *s->r, range_cmp);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[k][1] + 1) {
            if (s->r[i][1] > s->r[k][1]) s->r[k][1] = s->r[i][1];
        } else {
            k++;
            s->r[k][0] = s->r[i][0];
            s->r[k][1] = s->r[i][1];
        }
    }
    s->n = k + 1;
}

// s := every code point UTF-8 can hold that s (normalized) lacks
static void cset_negate(CSet *s) {
    CSet o = {0};
    uint32_t next = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i][0] > next) cset_add(&o, next, s->r[i][0] - 1);
        next = s->r[i][1] + 1;
    }
    if (next <= CP_MAX) cset_add(&o, next, CP_MAX);
    o.failed |= s->failed;
    free(s->r);
    *s = o;
}

// removes the surrogates D800..DFFF (normalized in, normalized out)
static void cset_drop_surrogates(CSet *s) {
    CSet o = {0};
    for (size_t i = 0; i < s->n; i++) {
        uint32_t lo = s->r[i][0], hi = s->r[i][1];
        if (hi < 0xD800 || lo > 0xDFFF) {
            cset_add(&o, lo, hi);
            continue;
        }
        if (lo < 0xD800) cset_add(&o, lo, 0xD7FF);
        if (hi > 0xDFFF) cset_add(&o, 0xE000, hi);
    }
    o.failed |= s->failed;
    free(s->r);
    *s = o;
}

static int cset_has(const CSet *s, uint32_t c) {
    for (size_t i = 0; i < s->n; i++)
        if (c >= s->r[i][0] && c <= s->r[i][1]) return 1;
    return 0;
}

// a code point inside a GBNF class: letters and digits as they are, the
// rest as \xHH, \uHHHH or \UHHHHHHHH (code points, not bytes)
static void put_class_cp(GText *t, uint32_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        char ch = (char)c;
        gtext_put(t, &ch, 1);
    } else if (c < 0x80) {
        gtext_printf(t, "\\x%02X", (unsigned)c);
    } else if (c < 0x10000) {
        gtext_printf(t, "\\u%04X", (unsigned)c);
    } else {
        gtext_printf(t, "\\U%08X", (unsigned)c);
    }
}

static void put_cp_literal(GText *t, uint32_t c) {
    unsigned char b[4];
    size_t n;
    if (c < 0x80) b[0] = (unsigned char)c, n = 1;
    else if (c < 0x800) b[0] = (unsigned char)(0xC0 | c >> 6), b[1] = (unsigned char)(0x80 | (c & 0x3F)), n = 2;
    else if (c < 0x10000)
        b[0] = (unsigned char)(0xE0 | c >> 12), b[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)),
        b[2] = (unsigned char)(0x80 | (c & 0x3F)), n = 3;
    else
        b[0] = (unsigned char)(0xF0 | c >> 18), b[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F)),
        b[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F)), b[3] = (unsigned char)(0x80 | (c & 0x3F)), n = 4;
    gtext_literal(t, (const char *)b, n);
}

// the set (normalized, non-empty) as one GBNF element matching one of its
// code points as raw UTF-8
static void put_set_raw(GText *t, const CSet *s) {
    if (s->n == 1 && s->r[0][0] == s->r[0][1]) {
        put_cp_literal(t, s->r[0][0]);
        return;
    }
    gtext_puts(t, "[");
    for (size_t i = 0; i < s->n; i++) {
        put_class_cp(t, s->r[i][0]);
        if (s->r[i][1] != s->r[i][0]) {
            gtext_puts(t, "-");
            put_class_cp(t, s->r[i][1]);
        }
    }
    gtext_puts(t, "]");
}

// How a compact JSON string writes code point c (< 0x20, " or \), as
// Python's json.dumps and cJSON do: \" \\ \b \t \n \f \r, else \u00xx.
static void json_escape_of(uint32_t c, char out[8]) {
    switch (c) {
    case '"': strcpy(out, "\\\""); return;
    case '\\': strcpy(out, "\\\\"); return;
    case 8: strcpy(out, "\\b"); return;
    case 9: strcpy(out, "\\t"); return;
    case 10: strcpy(out, "\\n"); return;
    case 12: strcpy(out, "\\f"); return;
    case 13: strcpy(out, "\\r"); return;
    default: snprintf(out, 8, "\\u%04x", (unsigned)c);
    }
}

// The set (normalized, non-empty) as one GBNF element matching one of its
// code points as written inside a compact JSON string.
static void put_set_json(GText *t, const CSet *s) {
    CSet plain = {0};
    for (size_t i = 0; i < s->n; i++) {  // s less 00..1F, " and \ .
        uint32_t lo = s->r[i][0], hi = s->r[i][1];
        if (lo < 0x20) lo = 0x20;
        for (uint32_t c = lo; c <= hi && !plain.failed;) {
            if (c == '"' || c == '\\') {
                c++;
                continue;
            }
            uint32_t e = hi;
            if (c < '"' && e >= '"') e = '"' - 1;
            else if (c < '\\' && e >= '\\') e = '\\' - 1;
            cset_add(&plain, c, e);
            if (e == CP_MAX) break;
            c = e + 1;
        }
    }
    int nalt = plain.n > 0;
    uint32_t specials[34];
    size_t ns = 0;
    for (uint32_t c = 0; c < 0x20; c++)
        if (cset_has(s, c)) specials[ns++] = c;
    if (cset_has(s, '"')) specials[ns++] = '"';
    if (cset_has(s, '\\')) specials[ns++] = '\\';
    nalt += (int)ns;
    if (nalt > 1) gtext_puts(t, "( ");
    int first = 1;
    if (plain.n) {
        put_set_raw(t, &plain);
        first = 0;
    }
    for (size_t i = 0; i < ns; i++) {
        char e[8];
        json_escape_of(specials[i], e);
        if (!first) gtext_puts(t, " | ");
        gtext_literal(t, e, strlen(e));
        first = 0;
    }
    if (nalt > 1) gtext_puts(t, " )");
    if (plain.failed) t->failed = 1;
    free(plain.r);
}

void regex_json_char(GText *t) {
    // any character: [^"\\\x00-\x1F] | "\\" [short escapes] | "\\u00" ...
    gtext_puts(t, "( [^\\x22\\x5C\\x00-\\x1F] | \"\\\\\" [\\x22\\x5Cbfnrt] | \"\\\\u00\" ( \"0\" [0-7bef] | \"1\" [0-9a-f] ) )");
}

/* ---- the parser --------------------------------------------------------- */

typedef struct {
    const char *s;  // the expression
    size_t n, i;    // its length, the read position
    int json;       // write characters as JSON string content
    int depth;
    GText *out;
    const char *what;
    GptError *err;
} Re;

static int re_fail(Re *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int re_fail(Re *r, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gpt_error(r->err, "%s: at byte %zu: %s", r->what, r->i, msg);
}

static int peek(const Re *r) { return r->i < r->n ? (unsigned char)r->s[r->i] : -1; }

// one UTF-8 character of the expression; -1 on invalid UTF-8 (err set)
static int64_t next_cp(Re *r) {
    int32_t cp;
    size_t k = utf8_decode((const unsigned char *)r->s + r->i, r->n - r->i, &cp);
    if (cp < 0) return re_fail(r, "invalid UTF-8"), -1;
    r->i += k;
    return cp;
}

static void set_add_class(CSet *s, int which) {  // \d \w \s, ASCII
    switch (which) {
    case 'd': cset_add(s, '0', '9'); break;
    case 'w':
        cset_add(s, '0', '9'), cset_add(s, 'A', 'Z'), cset_add(s, 'a', 'z'), cset_add(s, '_', '_');
        break;
    case 's': cset_add(s, '\t', '\r'), cset_add(s, ' ', ' '); break;
    }
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// After a backslash (consumed). Returns the code point it stands for, or
// -2 with the class it names added to *cls (\d \D ...), or -1 on error.
static int64_t parse_escape(Re *r, CSet *cls, int in_class) {
    size_t at = r->i - 1;
    if (r->i >= r->n) return r->i = at, re_fail(r, "\\ at the end"), -1;
    int c = (unsigned char)r->s[r->i++];
    switch (c) {
    case 'd': case 'w': case 's':
        set_add_class(cls, c);
        return -2;
    case 'D': case 'W': case 'S': {
        CSet t = {0};
        set_add_class(&t, c + 'a' - 'A');
        cset_norm(&t);
        cset_negate(&t);
        for (size_t i = 0; i < t.n; i++) cset_add(cls, t.r[i][0], t.r[i][1]);
        cls->failed |= t.failed;
        free(t.r);
        return -2;
    }
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0':
        if (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '7')
            return r->i = at, re_fail(r, "octal escapes are not supported (write \\xHH)"), -1;
        return 0;
    case 'x': case 'u': case 'U': {
        int k = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int j = 0; j < k; j++) {
            int h = r->i < r->n ? hexval((unsigned char)r->s[r->i]) : -1;
            if (h < 0) return r->i = at, re_fail(r, "\\%c needs %d hex digits", c, k), -1;
            v = v * 16 + (uint32_t)h;
            r->i++;
        }
        if (v > CP_MAX || (v >= 0xD800 && v <= 0xDFFF))
            return r->i = at, re_fail(r, "\\%c%0*X is not a character UTF-8 can hold", c, k, (unsigned)v), -1;
        return v;
    }
    case 'b':
        if (in_class) return 8;
        return r->i = at, re_fail(r, "\\b (word boundary) is not supported"), -1;
    default:
        if (c < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) && c >= 0x20)
            return c;  // \. \* \\ \- ...: the punctuation itself
        if (c >= '1' && c <= '9') return r->i = at, re_fail(r, "backreference \\%c is not supported", c), -1;
        if (c >= 0x20 && c < 0x7F) return r->i = at, re_fail(r, "\\%c is not supported", c), -1;
        return r->i = at, re_fail(r, "a \\ before this character is not supported"), -1;
    }
}

static void put_set(Re *r, CSet *s) {
    if (r->json) put_set_json(r->out, s);
    else put_set_raw(r->out, s);
}

static int put_single(Re *r, uint32_t c) {
    CSet s = {0};
    cset_add(&s, c, c);
    if (s.failed) return gpt_error(r->err, "%s: out of memory", r->what);
    put_set(r, &s);
    free(s.r);
    return 0;
}

// [ ... ] with the [ consumed
static int parse_class(Re *r) {
    size_t at = r->i - 1;
    int neg = 0;
    if (peek(r) == '^') neg = 1, r->i++;
    if (peek(r) == ']') return re_fail(r, "a ] first in a class is ambiguous (write \\])");
    CSet s = {0};
    int ok = 0;
    for (;;) {
        if (r->i >= r->n) {
            r->i = at;
            re_fail(r, "[ without its ]");
            goto out;
        }
        if (r->s[r->i] == ']') {
            r->i++;
            break;
        }
        int64_t lo;
        if (r->s[r->i] == '\\') {
            r->i++;
            lo = parse_escape(r, &s, 1);
        } else {
            lo = next_cp(r);
        }
        if (lo == -1) goto out;
        if (lo == -2) continue;
        if (peek(r) == '-' && r->i + 1 < r->n && r->s[r->i + 1] != ']') {
            r->i++;
            int64_t hi;
            if (r->s[r->i] == '\\') {
                r->i++;
                hi = parse_escape(r, &s, 1);
            } else {
                hi = next_cp(r);
            }
            if (hi == -1) goto out;
            if (hi == -2) {
                re_fail(r, "a range cannot end in a class like \\d");
                goto out;
            }
            if (hi < lo) {
                re_fail(r, "range out of order");
                goto out;
            }
            cset_add(&s, (uint32_t)lo, (uint32_t)hi);
        } else {
            cset_add(&s, (uint32_t)lo, (uint32_t)lo);
        }
    }
    cset_norm(&s);
    if (neg) cset_negate(&s);
    cset_drop_surrogates(&s);
    if (s.failed) {
        gpt_error(r->err, "%s: out of memory", r->what);
        goto out;
    }
    if (s.n == 0) {
        r->i = at;
        re_fail(r, "the class matches no character");
        goto out;
    }
    put_set(r, &s);
    ok = 1;
out:
    free(s.r);
    return ok ? 0 : -1;
}

static int parse_alt(Re *r, double *size, int *top_alt, int *empty);

// One atom, written at the end of r->out; *size: the elements it unrolls to;
// *empty: whether it can match the empty string (a group).
static int parse_atom(Re *r, double *size, int *empty) {
    int c = peek(r);
    *size = 1;
    *empty = 0;
    if (c == '(') {
        size_t at = r->i;
        r->i++;
        if (peek(r) == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') {
                r->i += 2;
            } else {
                r->i = at;
                return re_fail(r, "only ( ) and (?: ) groups are supported (no lookaround, flags or names)");
            }
        }
        if (++r->depth > REGEX_MAX_DEPTH) return re_fail(r, "groups nested deeper than %d", REGEX_MAX_DEPTH);
        gtext_puts(r->out, "( ");
        int alt = 0;
        if (parse_alt(r, size, &alt, empty)) return -1;
        gtext_puts(r->out, " )");
        r->depth--;
        if (peek(r) != ')') {
            r->i = at;
            return re_fail(r, "( without its )");
        }
        r->i++;
        return 0;
    }
    if (c == '[') {
        r->i++;
        return parse_class(r);
    }
    if (c == '.') {
        r->i++;
        CSet s = {0};
        cset_add(&s, '\n', '\n');
        cset_negate(&s);
        cset_drop_surrogates(&s);
        if (s.failed) return free(s.r), gpt_error(r->err, "%s: out of memory", r->what);
        put_set(r, &s);
        free(s.r);
        return 0;
    }
    if (c == '\\') {
        r->i++;
        CSet s = {0};
        int64_t v = parse_escape(r, &s, 0);
        if (v == -1) return free(s.r), -1;
        if (v == -2) {
            cset_norm(&s);
            cset_drop_surrogates(&s);
            if (s.failed) return free(s.r), gpt_error(r->err, "%s: out of memory", r->what);
            put_set(r, &s);
            free(s.r);
            return 0;
        }
        free(s.r);
        return put_single(r, (uint32_t)v);
    }
    if (c == '*' || c == '+' || c == '?') return re_fail(r, "%c follows nothing it could repeat", c);
    if (c == '{') return re_fail(r, "a bare { (write \\{ for the character)");
    if (c == '}') return re_fail(r, "a bare } (write \\} for the character)");
    if (c == ']') return re_fail(r, "a bare ] (write \\] for the character)");
    if (c == '^') return re_fail(r, "^ is supported only as the first character");
    if (c == '$') return re_fail(r, "$ is supported only as the last character");
    int64_t cp = next_cp(r);
    if (cp < 0) return -1;
    return put_single(r, (uint32_t)cp);
}

// {m}, {m,}, {m,n} after the { (consumed); *hi = -1 for no upper bound
static int parse_count(Re *r, long *lo, long *hi) {
    size_t at = r->i - 1;
    long v[2] = {0, -1};
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            if (peek(r) == '}') {
                v[1] = v[0];
                break;
            }
            if (peek(r) != ',') goto bad;
            r->i++;
            if (peek(r) == '}') {
                v[1] = -1;
                break;
            }
        }
        if (peek(r) < '0' || peek(r) > '9') goto bad;
        long x = 0;
        while (peek(r) >= '0' && peek(r) <= '9') {
            x = x * 10 + (r->s[r->i++] - '0');
            if (x > GRAMMAR_MAX_REPEAT) {
                r->i = at;
                return re_fail(r, "a count above %d", GRAMMAR_MAX_REPEAT);
            }
        }
        v[k] = x;
    }
    if (peek(r) != '}') goto bad;
    r->i++;
    if (v[1] >= 0 && v[1] < v[0]) {
        r->i = at;
        return re_fail(r, "{m,n} with n below m");
    }
    *lo = v[0], *hi = v[1];
    return 0;
bad:
    r->i = at;
    return re_fail(r, "a { that is not {m}, {m,} or {m,n} (write \\{ for the character)");
}

// A sequence of atoms; *empty: whether it can match the empty string.
static int parse_seq(Re *r, double *size, int *empty) {
    *size = 0;
    *empty = 1;
    int first = 1;
    while (r->i < r->n && peek(r) != '|' && peek(r) != ')') {
        if (!first) gtext_puts(r->out, " ");
        first = 0;
        size_t start = r->out->n;
        double sz;
        int atom_empty;
        if (parse_atom(r, &sz, &atom_empty)) return -1;
        int c = peek(r);
        if (c == '*' || c == '+' || c == '?' || c == '{') {
            long lo = 0, hi = -1;
            size_t q = r->i;
            r->i++;
            if (c == '{') {
                if (parse_count(r, &lo, &hi)) return -1;
            } else {
                lo = c == '+', hi = c == '?' ? 1 : -1;
            }
            if (peek(r) == '?') r->i++;  // lazy: the same strings
            else if (peek(r) == '+') return re_fail(r, "possessive quantifiers are not supported");
            c = peek(r);
            if (c == '*' || c == '+' || c == '?' || c == '{')
                return re_fail(r, "a quantifier after a quantifier (group the first: (a{2})*)");
            // the grammar engine refuses a repetition that can go on without
            // reading a byte (left recursion), which X* with X nullable is
            if (hi == -1 && atom_empty) {
                r->i = q;
                return re_fail(r, "an unbounded repetition of a group that can match the empty string ((a|)*, "
                               "(a*)+) is not supported: leave the empty match out ((a)* for (a|)* or (a*)+)");
            }
            if (lo == 0) atom_empty = 1;
            gtext_insert(r->out, start, "( ");
            if (hi == -1 && lo == 0) gtext_puts(r->out, " )*");
            else if (hi == -1 && lo == 1) gtext_puts(r->out, " )+");
            else if (hi == 1 && lo == 0) gtext_puts(r->out, " )?");
            else if (hi == -1) gtext_printf(r->out, " ){%ld,}", lo);
            else if (hi == lo) gtext_printf(r->out, " ){%ld}", lo);
            else gtext_printf(r->out, " ){%ld,%ld}", lo, hi);
            long times = hi > lo ? hi : lo;
            sz *= (double)(times > 1 ? times : 1);
        }
        *empty &= atom_empty;
        *size += sz;
        if (*size > GRAMMAR_MAX_EXPANSION)
            return re_fail(r, "its quantifiers unroll to more than %d elements", GRAMMAR_MAX_EXPANSION);
    }
    if (first) gtext_puts(r->out, "\"\"");
    return 0;
}

// Alternatives; *empty: whether one of them can match the empty string.
static int parse_alt(Re *r, double *size, int *top_alt, int *empty) {
    if (parse_seq(r, size, empty)) return -1;
    while (peek(r) == '|') {
        r->i++;
        *top_alt = 1;
        gtext_puts(r->out, " | ");
        double sz;
        int seq_empty;
        if (parse_seq(r, &sz, &seq_empty)) return -1;
        *empty |= seq_empty;
        *size += sz;
        if (*size > GRAMMAR_MAX_EXPANSION)
            return re_fail(r, "its quantifiers unroll to more than %d elements", GRAMMAR_MAX_EXPANSION);
    }
    return 0;
}

// a $ at the end that is not escaped (an odd number of \ before it escapes it)
static int ends_in_anchor(const char *s, size_t n) {
    if (n == 0 || s[n - 1] != '$') return 0;
    size_t k = 0;
    while (k + 1 < n && s[n - 2 - k] == '\\') k++;
    return k % 2 == 0;
}

int regex_emit(GText *out, const char *re, size_t n, int json_string, const char *what, GptError *err) {
    if (n > REGEX_MAX_BYTES)
        return gpt_error(err, "%s: %zu bytes, above the bound of %d", what, n, REGEX_MAX_BYTES);
    int head = n > 0 && re[0] == '^';
    int tail = ends_in_anchor(re, n) && n - head > 0;
    Re r = {.s = re + head, .n = n - head - tail, .json = json_string, .out = out, .what = what, .err = err};
    size_t start = out->n;
    if (json_string && !head) {
        regex_json_char(out);
        gtext_puts(out, "* ");
    }
    size_t body = out->n;
    double size;
    int alt = 0, empty;
    if (parse_alt(&r, &size, &alt, &empty)) return -1;
    if (r.i < r.n) {  // a ) without its (
        r.i += (size_t)head;
        return re_fail(&r, ") without its (");
    }
    if (json_string && alt && (head || tail)) {
        r.i = 0;
        return re_fail(&r, "^ or $ with | outside a group (write ^(a|b)$)");
    }
    if (alt) {
        gtext_insert(out, body, "( ");
        gtext_puts(out, " )");
    }
    if (json_string && !tail) {
        gtext_puts(out, " ");
        regex_json_char(out);
        gtext_puts(out, "*");
    }
    (void)start;
    if (out->failed)
        return gpt_error(err, "%s: %s", what, out->failed == 1 ? "out of memory" : "its grammar exceeds the bound of 1 MiB");
    return 0;
}

char *regex_to_gbnf(const char *re, size_t n, GptError *err) {
    GText t = {0};
    gtext_puts(&t, "root ::= ");
    if (regex_emit(&t, re, n, 0, "--regex", err)) {
        gtext_free(&t);
        return NULL;
    }
    gtext_puts(&t, "\n");
    if (t.failed) {
        gtext_free(&t);
        gpt_error(err, "--regex: out of memory");
        return NULL;
    }
    return t.s;
}

/*
 * grammar.c - GBNF text -> a pushdown automaton over bytes (grammar.h).
 *
 * The compiled form: a flat array of elements. A rule is a list of
 * alternatives; an alternative is a run of elements ended by EL_END. An
 * element is EL_BYTES (one byte out of a 256-bit class), EL_RULE (a
 * reference) or EL_END. Groups, repetitions and non-ASCII character
 * classes become synthetic rules while parsing:
 *     X*      R ::= X R | ""          X?   R ::= X | ""
 *     X+      R ::= X R | X           X{m,n}  X...X (m) then n-m nested X?
 * A class of code points becomes one alternative per UTF-8 byte-range
 * sequence of its code points (utf8_ranges below), so the automaton reads
 * the UTF-8 encodings of exactly those code points.
 *
 * After parsing: undefined rules are errors at their first reference;
 * alternatives that can derive no finite string are dropped (so every live
 * stack can still reach an accepting state), and a root left without
 * alternatives is "matches no string"; a rule that reaches itself through
 * rules that can be empty before reading a byte is left recursion (the
 * matcher's expansion would not end), an error naming the rule.
 *
 * The matcher (grammar_matcher.c) keeps a set of stacks of positions.
 */
#include "grammar/grammar_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/grow.h"
#include "base/utf8.h"

GrammarLimits grammar_limits_default(void) {
    GrammarLimits l = {
        .max_text = 1u << 20,
        .max_elements = 1u << 20,
        .max_depth = 64,
        .max_repeat = 10000,
        .max_stacks = 4096,
        .max_stack_depth = 4096,
        .max_cache_bytes = 64u << 20,
        .max_mask_work = 1u << 26,
        .max_compile_ms = 1000.0,
    };
    return l;
}

GrammarLimits grammar_limits_resolve(const GrammarLimits *in) {
    GrammarLimits d = grammar_limits_default();
    if (!in) return d;
    GrammarLimits l = *in;
    if (!l.max_text) l.max_text = d.max_text;
    if (!l.max_elements) l.max_elements = d.max_elements;
    if (!l.max_depth) l.max_depth = d.max_depth;
    if (!l.max_repeat) l.max_repeat = d.max_repeat;
    if (!l.max_stacks) l.max_stacks = d.max_stacks;
    if (!l.max_stack_depth) l.max_stack_depth = d.max_stack_depth;
    if (!l.max_cache_bytes) l.max_cache_bytes = d.max_cache_bytes;
    if (!l.max_mask_work) l.max_mask_work = d.max_mask_work;
    if (!(l.max_compile_ms > 0)) l.max_compile_ms = d.max_compile_ms;
    return l;
}

/* ---- the parser's working form ---- */

typedef struct {
    GElem *el;
    size_t n, cap;
} Alt;

typedef struct {
    char *name;        // NUL-terminated
    int defined;       // 1 once `name ::=` was read
    int line, col;     // definition (or first reference)
    int ref_line, ref_col;  // first reference
    int referenced;
    Alt *alts;
    size_t n_alts, cap_alts;
} PRule;

typedef struct {
    const char *s;
    size_t len, pos;
    GrammarLimits lim;
    double t0;
    GptError *err;
    PRule *rules;
    size_t n_rules, cap_rules;
    GClass *classes;
    size_t n_classes, cap_classes;
    size_t n_elements;  // total so far, for max_elements
    size_t depth;
    int any_rule;       // the rule of `.`, -1 until needed
} Parser;

static void pos_of(const Parser *p, size_t pos, int *line, int *col) {
    int l = 1, c = 1;
    for (size_t i = 0; i < pos && i < p->len; i++) {
        if (p->s[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)p->s[i] & 0xC0) != 0x80) {
            c++;
        }
    }
    *line = l;
    *col = c;
}

static void describe(const Parser *p, size_t pos, char *buf, size_t n) {
    if (pos >= p->len) {
        snprintf(buf, n, "the end of the grammar");
        return;
    }
    unsigned char c = (unsigned char)p->s[pos];
    if (c == '\n') snprintf(buf, n, "a line break");
    else if (c >= 0x20 && c < 0x7f) snprintf(buf, n, "'%c'", c);
    else snprintf(buf, n, "byte 0x%02x", c);
}

// "LINE:COL: expected WHAT, got X"
static int expected(Parser *p, size_t pos, const char *what) {
    int l, c;
    char got[32];
    pos_of(p, pos, &l, &c);
    describe(p, pos, got, sizeof got);
    return gpt_error(p->err, "%d:%d: expected %s, got %s", l, c, what, got);
}

static int error_at(Parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int error_at(Parser *p, size_t pos, const char *fmt, ...) {
    int l, c;
    pos_of(p, pos, &l, &c);
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gpt_error(p->err, "%d:%d: %s", l, c, msg);
}

static int out_of_memory(Parser *p) { return gpt_error(p->err, "grammar: out of memory"); }

static int check_time(Parser *p) {
    if ((now_seconds() - p->t0) * 1000.0 > p->lim.max_compile_ms)
        return gpt_error(p->err, "grammar: compiling took longer than %.0f ms (the bound)",
                         p->lim.max_compile_ms);
    return 0;
}

static int alt_push(Parser *p, Alt *a, GElem e) {
    if (p->n_elements >= p->lim.max_elements)
        return gpt_error(p->err, "grammar: more than %zu automaton positions (the bound)",
                         p->lim.max_elements);
    if (grow_array(&a->el, &a->cap, a->n + 1, sizeof *a->el)) return out_of_memory(p);
    a->el[a->n++] = e;
    p->n_elements++;
    return 0;
}

static int rule_add_alt(Parser *p, int r, Alt *a) {
    PRule *R = &p->rules[r];
    if (grow_array(&R->alts, &R->cap_alts, R->n_alts + 1, sizeof *R->alts)) return out_of_memory(p);
    R->alts[R->n_alts++] = *a;
    memset(a, 0, sizeof *a);
    return 0;
}

// A new rule; name NULL makes a synthetic one named after its parent.
static int new_rule(Parser *p, const char *name, size_t name_len, size_t pos) {
    if (grow_array(&p->rules, &p->cap_rules, p->n_rules + 1, sizeof *p->rules)) return out_of_memory(p);
    PRule *R = &p->rules[p->n_rules];
    memset(R, 0, sizeof *R);
    int l, c;
    pos_of(p, pos, &l, &c);
    R->line = R->ref_line = l;
    R->col = R->ref_col = c;
    if (name) {
        R->name = malloc(name_len + 1);
        if (!R->name) return out_of_memory(p);
        memcpy(R->name, name, name_len);
        R->name[name_len] = 0;
    } else {
        R->name = malloc(48);
        if (!R->name) return out_of_memory(p);
        snprintf(R->name, 48, "(the part at %d:%d)", l, c);
        R->defined = 1;
    }
    return (int)p->n_rules++;
}

static int find_rule(Parser *p, const char *name, size_t n, size_t pos, int define) {
    for (size_t i = 0; i < p->n_rules; i++)
        if (strlen(p->rules[i].name) == n && memcmp(p->rules[i].name, name, n) == 0) return (int)i;
    int r = new_rule(p, name, n, pos);
    (void)define;
    return r;
}

static int new_class(Parser *p, const GClass *c) {
    if (grow_array(&p->classes, &p->cap_classes, p->n_classes + 1, sizeof *p->classes))
        return out_of_memory(p);
    p->classes[p->n_classes] = *c;
    return (int)p->n_classes++;
}

static void class_set(GClass *c, unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++) c->bits[b >> 6] |= 1ull << (b & 63);
}

static int push_byte_range(Parser *p, Alt *a, unsigned lo, unsigned hi) {
    GClass c = {{0}};
    class_set(&c, lo, hi);
    int k = new_class(p, &c);
    if (k < 0) return -1;
    return alt_push(p, a, (GElem){EL_BYTES, (uint32_t)k});
}

/* ---- whitespace, names, escapes ---- */

// Skips spaces, tabs, comments; line breaks too when newline_ok.
static void skip_space(Parser *p, int newline_ok) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\r' || (newline_ok && c == '\n')) {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\n') p->pos++;
        } else {
            break;
        }
    }
}

static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

static size_t word_len(const Parser *p, size_t pos) {
    size_t n = 0;
    while (pos + n < p->len && is_word(p->s[pos + n])) n++;
    return n;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Reads one character of a literal or class at p->pos (an escape or one
// UTF-8 character) into *cp. Returns 0 or -1 (err set).
static int read_char(Parser *p, int32_t *cp) {
    size_t at = p->pos;
    if (p->pos >= p->len) return expected(p, at, "a character");
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c == '\\') {
        if (p->pos + 1 >= p->len) return expected(p, p->pos + 1, "an escape");
        char e = p->s[p->pos + 1];
        int digits = 0;
        switch (e) {
        case 'n': *cp = '\n'; p->pos += 2; return 0;
        case 'r': *cp = '\r'; p->pos += 2; return 0;
        case 't': *cp = '\t'; p->pos += 2; return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/':
            *cp = (unsigned char)e;
            p->pos += 2;
            return 0;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            return expected(p, p->pos + 1, "an escape (n r t \\ \" [ ] - ^ xHH uHHHH UHHHHHHHH)");
        }
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            size_t q = p->pos + 2 + (size_t)i;
            int h = q < p->len ? hex_value(p->s[q]) : -1;
            if (h < 0) return expected(p, q, "a hexadecimal digit");
            v = v * 16 + (uint32_t)h;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return error_at(p, at, "\\%c%0*X is not a Unicode scalar value", e, digits, v);
        *cp = (int32_t)v;
        p->pos += 2 + (size_t)digits;
        return 0;
    }
    if (c == '\n') return expected(p, at, "a character (a line break must be written \\n)");
    int32_t v;
    size_t n = utf8_decode((const unsigned char *)p->s + p->pos, p->len - p->pos, &v);
    if (v < 0) return error_at(p, at, "invalid UTF-8 in the grammar");
    *cp = v;
    p->pos += n;
    return 0;
}

static size_t utf8_put(uint32_t cp, unsigned char *b) {
    if (cp < 0x80) { b[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { b[0] = (unsigned char)(0xC0 | cp >> 6); b[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | cp >> 18);
    b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- code point classes -> UTF-8 byte sequences ---- */

typedef struct {
    uint32_t lo, hi;
} Range;

// One byte-range sequence of a class: n ranges, one per byte.
typedef struct {
    int n;
    unsigned char lo[4], hi[4];
} Seq;

typedef struct {
    Seq *s;
    size_t n, cap;
} SeqList;

static int seq_emit(SeqList *l, uint32_t lo, uint32_t hi) {
    unsigned char a[4], b[4];
    size_t n = utf8_put(lo, a);
    utf8_put(hi, b);
    if (grow_array(&l->s, &l->cap, l->n + 1, sizeof *l->s)) return -1;
    Seq *s = &l->s[l->n++];
    s->n = (int)n;
    for (size_t i = 0; i < n; i++) {
        s->lo[i] = a[i];
        s->hi[i] = b[i];
    }
    return 0;
}

// [lo, hi] of one encoded length into byte-range sequences: split until,
// for every i, the low 6*i bits run over their whole range (the rule of
// Rust's regex-syntax Utf8Sequences), then each byte position is a range.
static int utf8_split(SeqList *l, uint32_t lo, uint32_t hi) {
    static const uint32_t len_max[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (int k = 0; k < 3; k++) {  // ranges that cross an encoded length
        if (lo <= len_max[k] && hi > len_max[k])
            return utf8_split(l, lo, len_max[k]) || utf8_split(l, len_max[k] + 1, hi) ? -1 : 0;
    }
    if (hi < 0x80) return seq_emit(l, lo, hi);
    for (int i = 1; i < 4; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) return utf8_split(l, lo, lo | m) || utf8_split(l, (lo | m) + 1, hi) ? -1 : 0;
            if ((hi & m) != m) return utf8_split(l, lo, (hi & ~m) - 1) || utf8_split(l, hi & ~m, hi) ? -1 : 0;
        }
    }
    return seq_emit(l, lo, hi);
}

static int range_cmp(const void *a, const void *b) {
    const Range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

// ranges (n, any order, overlapping allowed) -> sorted, merged, surrogates
// removed; complemented over the scalar values when negate.
static size_t normalize_ranges(Range *r, size_t n, int negate, Range *out) {
    if (n) qsort(r, n, sizeof *r, range_cmp);  // r is NULL for an empty class
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && r[i].lo <= out[m - 1].hi + 1) {
            if (r[i].hi > out[m - 1].hi) out[m - 1].hi = r[i].hi;
        } else {
            out[m++] = r[i];
        }
    }
    if (negate) {  // complement in place via a copy
        Range tmp[m + 1];
        size_t k = 0;
        uint32_t next = 0;
        for (size_t i = 0; i < m; i++) {
            if (out[i].lo > next) tmp[k++] = (Range){next, out[i].lo - 1};
            next = out[i].hi + 1;
        }
        if (next <= 0x10FFFF) tmp[k++] = (Range){next, 0x10FFFF};
        memcpy(out, tmp, k * sizeof *tmp);
        m = k;
    }
    return m;
}

// A class of code point ranges as the next symbol of alternative a: one
// EL_BYTES when every code point is ASCII, else a synthetic rule with one
// alternative per byte-range sequence. Surrogates are never matched.
static int push_class(Parser *p, Alt *a, Range *r, size_t n, int negate, size_t pos) {
    Range *norm = malloc((n + 2) * sizeof *norm * 2 + 4 * sizeof *norm);
    if (!norm) return out_of_memory(p);
    size_t m = normalize_ranges(r, n, negate, norm);
    // drop the surrogates D800-DFFF: split a range across them
    Range *clean = malloc((2 * m + 1) * sizeof *clean);
    if (!clean) {
        free(norm);
        return out_of_memory(p);
    }
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t lo = norm[i].lo, hi = norm[i].hi;
        if (hi < 0xD800 || lo > 0xDFFF) {
            clean[k++] = norm[i];
            continue;
        }
        if (lo < 0xD800) clean[k++] = (Range){lo, 0xD7FF};
        if (hi > 0xDFFF) clean[k++] = (Range){0xE000, hi};
    }
    free(norm);
    SeqList l = {0};
    int rc = 0;
    for (size_t i = 0; i < k && rc == 0; i++) rc = utf8_split(&l, clean[i].lo, clean[i].hi);
    free(clean);
    if (rc) {
        free(l.s);
        return out_of_memory(p);
    }
    if (l.n == 0) {  // matches nothing: an empty class element
        free(l.s);
        GClass c = {{0}};
        int ci = new_class(p, &c);
        return ci < 0 ? -1 : alt_push(p, a, (GElem){EL_BYTES, (uint32_t)ci});
    }
    int ascii = 1;
    for (size_t i = 0; i < l.n; i++) ascii &= l.s[i].n == 1;
    if (ascii) {
        GClass c = {{0}};
        for (size_t i = 0; i < l.n; i++) class_set(&c, l.s[i].lo[0], l.s[i].hi[0]);
        free(l.s);
        int ci = new_class(p, &c);
        return ci < 0 ? -1 : alt_push(p, a, (GElem){EL_BYTES, (uint32_t)ci});
    }
    int rr = new_rule(p, NULL, 0, pos);
    if (rr < 0) {
        free(l.s);
        return -1;
    }
    for (size_t i = 0; i < l.n; i++) {
        Alt alt = {0};
        for (int j = 0; j < l.s[i].n; j++)
            if (push_byte_range(p, &alt, l.s[i].lo[j], l.s[i].hi[j])) {
                free(alt.el);
                free(l.s);
                return -1;
            }
        if (alt_push(p, &alt, (GElem){EL_END, 0}) || rule_add_alt(p, rr, &alt)) {
            free(alt.el);
            free(l.s);
            return -1;
        }
    }
    free(l.s);
    return alt_push(p, a, (GElem){EL_RULE, (uint32_t)rr});
}

/* ---- the grammar's syntax ---- */

static int parse_alternatives(Parser *p, int rule, int nested);

static int parse_literal(Parser *p, Alt *a) {
    p->pos++;  // the opening quote
    for (;;) {
        if (p->pos >= p->len) return expected(p, p->pos, "'\"' to close the string");
        if (p->s[p->pos] == '"') {
            p->pos++;
            return 0;
        }
        int32_t cp;
        if (read_char(p, &cp)) return -1;
        unsigned char b[4];
        size_t n = utf8_put((uint32_t)cp, b);
        for (size_t i = 0; i < n; i++)
            if (push_byte_range(p, a, b[i], b[i])) return -1;
    }
}

static int parse_class(Parser *p, Alt *a) {
    size_t start = p->pos++;
    int negate = 0;
    if (p->pos < p->len && p->s[p->pos] == '^') {
        negate = 1;
        p->pos++;
    }
    Range *r = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (p->pos >= p->len) {
            free(r);
            return expected(p, p->pos, "']' to close the character class");
        }
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        int32_t lo, hi;
        if (read_char(p, &lo)) {
            free(r);
            return -1;
        }
        hi = lo;
        if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            p->pos++;
            size_t at = p->pos;
            if (read_char(p, &hi)) {
                free(r);
                return -1;
            }
            if (hi < lo) {
                free(r);
                return error_at(p, at, "range end U+%04X is below its start U+%04X", (unsigned)hi,
                                (unsigned)lo);
            }
        }
        if (grow_array(&r, &cap, n + 1, sizeof *r)) {
            free(r);
            return out_of_memory(p);
        }
        r[n++] = (Range){(uint32_t)lo, (uint32_t)hi};
    }
    int rc = push_class(p, a, r, n, negate, start);
    free(r);
    return rc;
}

// The element run [from, a->n) as one element: itself when it is one,
// else a synthetic rule holding it (so a repetition repeats the symbol).
static int symbol_as_one(Parser *p, Alt *a, size_t from, size_t pos, GElem *out) {
    if (a->n - from == 1) {
        *out = a->el[from];
        a->n = from;
        p->n_elements--;
        return 0;
    }
    int rr = new_rule(p, NULL, 0, pos);
    if (rr < 0) return -1;
    Alt alt = {0};
    for (size_t i = from; i < a->n; i++)
        if (alt_push(p, &alt, a->el[i])) {
            free(alt.el);
            return -1;
        }
    p->n_elements -= a->n - from;
    a->n = from;
    if (alt_push(p, &alt, (GElem){EL_END, 0}) || rule_add_alt(p, rr, &alt)) {
        free(alt.el);
        return -1;
    }
    *out = (GElem){EL_RULE, (uint32_t)rr};
    return 0;
}

// R ::= x R | ""  (star) or R ::= x | "" (opt) or R ::= x R | x (plus)
static int rep_rule(Parser *p, GElem x, int kind, size_t pos, GElem *out) {
    int rr = new_rule(p, NULL, 0, pos);
    if (rr < 0) return -1;
    Alt a1 = {0}, a2 = {0};
    int rc = alt_push(p, &a1, x);
    if (!rc && kind != '?') rc = alt_push(p, &a1, (GElem){EL_RULE, (uint32_t)rr});
    if (!rc) rc = alt_push(p, &a1, (GElem){EL_END, 0});
    if (!rc) rc = rule_add_alt(p, rr, &a1);
    if (!rc && kind == '+') rc = alt_push(p, &a2, x);
    if (!rc) rc = alt_push(p, &a2, (GElem){EL_END, 0});
    if (!rc) rc = rule_add_alt(p, rr, &a2);
    free(a1.el);
    free(a2.el);
    *out = (GElem){EL_RULE, (uint32_t)rr};
    return rc;
}

static int parse_number(Parser *p, size_t *v) {
    size_t at = p->pos, n = 0;
    if (p->pos >= p->len || p->s[p->pos] < '0' || p->s[p->pos] > '9') return expected(p, at, "a number");
    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        n = n * 10 + (size_t)(p->s[p->pos] - '0');
        if (n > p->lim.max_repeat)
            return error_at(p, at, "repetition count above %zu (the bound)", p->lim.max_repeat);
        p->pos++;
    }
    *v = n;
    return 0;
}

// The postfix operator at p->pos on the symbol [from, a->n).
static int parse_postfix(Parser *p, Alt *a, size_t from, size_t sym_pos) {
    char c = p->s[p->pos];
    size_t op_pos = p->pos;
    GElem x, r;
    if (c == '*' || c == '+' || c == '?') {
        p->pos++;
        if (symbol_as_one(p, a, from, sym_pos, &x) || rep_rule(p, x, c, op_pos, &r)) return -1;
        return alt_push(p, a, r);
    }
    // {m}, {m,}, {m,n}
    size_t m, n = 0;
    int unbounded = 0;
    p->pos++;
    skip_space(p, 0);
    if (parse_number(p, &m)) return -1;
    skip_space(p, 0);
    if (p->pos < p->len && p->s[p->pos] == ',') {
        p->pos++;
        skip_space(p, 0);
        if (p->pos < p->len && p->s[p->pos] == '}') {
            unbounded = 1;
        } else {
            size_t at = p->pos;
            if (parse_number(p, &n)) return -1;
            if (n < m) return error_at(p, at, "repetition {%zu,%zu}: the maximum is below the minimum", m, n);
        }
        skip_space(p, 0);
    } else {
        n = m;
    }
    if (p->pos >= p->len || p->s[p->pos] != '}') return expected(p, p->pos, "'}' to close the repetition");
    p->pos++;
    if (symbol_as_one(p, a, from, sym_pos, &x)) return -1;
    for (size_t i = 0; i < m; i++) {
        if (alt_push(p, a, x)) return -1;
        if ((i & 1023) == 0 && check_time(p)) return -1;
    }
    if (unbounded) {
        if (rep_rule(p, x, '*', op_pos, &r)) return -1;
        return alt_push(p, a, r);
    }
    if (n > m) {  // opt_k ::= x opt_{k-1} | "" nested, n - m deep
        GElem inner = {EL_END, 0};
        for (size_t k = 0; k < n - m; k++) {
            int rr = new_rule(p, NULL, 0, op_pos);
            if (rr < 0) return -1;
            Alt a1 = {0}, a2 = {0};
            int rc = alt_push(p, &a1, x);
            if (!rc && inner.type == EL_RULE) rc = alt_push(p, &a1, inner);
            if (!rc) rc = alt_push(p, &a1, (GElem){EL_END, 0});
            if (!rc) rc = rule_add_alt(p, rr, &a1);
            if (!rc) rc = alt_push(p, &a2, (GElem){EL_END, 0});
            if (!rc) rc = rule_add_alt(p, rr, &a2);
            free(a1.el);
            free(a2.el);
            if (rc) return -1;
            inner = (GElem){EL_RULE, (uint32_t)rr};
            if ((k & 1023) == 0 && check_time(p)) return -1;
        }
        return alt_push(p, a, inner);
    }
    return 0;
}

// Looks ahead: a rule definition `name ::=` starts at p->pos.
static int at_definition(Parser *p) {
    size_t save = p->pos, n = word_len(p, p->pos);
    if (n == 0) return 0;
    p->pos += n;
    skip_space(p, 0);
    int yes = p->pos + 2 < p->len + 0 && p->len - p->pos >= 3 && memcmp(p->s + p->pos, "::=", 3) == 0;
    p->pos = save;
    return yes;
}

// A sequence into a; ends before '|', ')', the end, or (top level) a line
// break followed by a new definition or the end.
static int parse_sequence(Parser *p, Alt *a, int nested) {
    for (;;) {
        skip_space(p, nested);
        if (!nested && p->pos < p->len && p->s[p->pos] == '\n') {
            // a line break at the top level: the rule goes on only when the
            // next line continues it (an alternative or more elements)
            size_t save = p->pos;
            skip_space(p, 1);
            if (p->pos >= p->len || at_definition(p)) {
                p->pos = save;
                return 0;
            }
        }
        if (p->pos >= p->len) return 0;
        char c = p->s[p->pos];
        size_t from = a->n, sym_pos = p->pos;
        if (c == '|' || c == ')') return 0;
        if (c == '"') {
            if (parse_literal(p, a)) return -1;
        } else if (c == '[') {
            if (parse_class(p, a)) return -1;
        } else if (c == '.') {
            p->pos++;
            Range any = {0, 0x10FFFF};
            if (p->any_rule >= 0) {
                if (alt_push(p, a, (GElem){EL_RULE, (uint32_t)p->any_rule})) return -1;
            } else {
                if (push_class(p, a, &any, 1, 0, sym_pos)) return -1;
                p->any_rule = (int)a->el[a->n - 1].value;
            }
        } else if (c == '(') {
            p->pos++;
            if (++p->depth > p->lim.max_depth)
                return error_at(p, sym_pos, "groups nested deeper than %zu (the bound)", p->lim.max_depth);
            int rr = new_rule(p, NULL, 0, sym_pos);
            if (rr < 0 || parse_alternatives(p, rr, 1)) return -1;
            p->depth--;
            skip_space(p, 1);
            if (p->pos >= p->len || p->s[p->pos] != ')') return expected(p, p->pos, "')' or an alternative '|'");
            p->pos++;
            if (alt_push(p, a, (GElem){EL_RULE, (uint32_t)rr})) return -1;
        } else if (is_word(c)) {
            size_t n = word_len(p, p->pos);
            int r = find_rule(p, p->s + p->pos, n, p->pos, 0);
            if (r < 0) return -1;
            if (!p->rules[r].referenced) {
                int l, cc;
                pos_of(p, p->pos, &l, &cc);
                p->rules[r].referenced = 1;
                p->rules[r].ref_line = l;
                p->rules[r].ref_col = cc;
            }
            p->pos += n;
            if (alt_push(p, a, (GElem){EL_RULE, (uint32_t)r})) return -1;
        } else {
            return expected(p, p->pos, nested ? "an element, '|' or ')'" : "an element, '|' or a line break");
        }
        // postfix operators, any number (x** is (x*)*)
        while (p->pos < p->len && (p->s[p->pos] == '*' || p->s[p->pos] == '+' || p->s[p->pos] == '?' ||
                                   p->s[p->pos] == '{')) {
            if (parse_postfix(p, a, from, sym_pos)) return -1;
        }
        if (check_time(p)) return -1;
    }
}

static int parse_alternatives(Parser *p, int rule, int nested) {
    for (;;) {
        Alt a = {0};
        if (parse_sequence(p, &a, nested) || alt_push(p, &a, (GElem){EL_END, 0}) ||
            rule_add_alt(p, rule, &a)) {
            free(a.el);
            return -1;
        }
        skip_space(p, nested);
        if (p->pos < p->len && p->s[p->pos] == '|') {
            p->pos++;
            skip_space(p, 1);
            continue;
        }
        return 0;
    }
}

static int parse_grammar(Parser *p) {
    for (;;) {
        skip_space(p, 1);
        if (p->pos >= p->len) return 0;
        size_t at = p->pos, n = word_len(p, p->pos);
        if (n == 0) return expected(p, at, "a rule name");
        int r = find_rule(p, p->s + at, n, at, 1);
        if (r < 0) return -1;
        if (p->rules[r].defined) {
            return error_at(p, at, "rule '%s' is defined twice (first at %d:%d)", p->rules[r].name,
                            p->rules[r].line, p->rules[r].col);
        }
        p->rules[r].defined = 1;
        pos_of(p, at, &p->rules[r].line, &p->rules[r].col);
        p->pos += n;
        skip_space(p, 0);
        if (p->len - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3) != 0) return expected(p, p->pos, "'::='");
        p->pos += 3;
        skip_space(p, 1);
        if (parse_alternatives(p, r, 0)) return -1;
        skip_space(p, 0);
        if (p->pos < p->len && p->s[p->pos] != '\n') {
            return expected(p, p->pos, p->s[p->pos] == ')' ? "a line break ('(' missing?)" : "a line break");
        }
    }
}

/* ---- checks after parsing ---- */

// productive[r]: r derives some finite byte string. Alternatives that use an
// unproductive rule or an empty class are dead.
static int alt_productive(const Parser *p, const Alt *a, const uint8_t *prod) {
    for (size_t i = 0; i + 1 < a->n; i++) {
        const GElem *e = &a->el[i];
        if (e->type == EL_RULE && !prod[e->value]) return 0;
        if (e->type == EL_BYTES) {
            const GClass *c = &p->classes[e->value];
            if (!(c->bits[0] | c->bits[1] | c->bits[2] | c->bits[3])) return 0;
        }
    }
    return 1;
}

static int check_left_recursion(Parser *p, const uint8_t *nullable, uint8_t *color, int r,
                                size_t depth) {
    if (color[r] == 2) return 0;
    if (color[r] == 1) {
        PRule *R = &p->rules[r];
        if (R->name[0] == '(')
            return gpt_error(p->err, "%d:%d: left recursion: %s can repeat without reading a byte "
                                     "(a repetition of something that can be empty?)", R->line, R->col,
                             R->name);
        return gpt_error(p->err, "%d:%d: left recursion: rule '%s' reaches itself without reading a byte",
                         R->line, R->col, R->name);
    }
    if (depth > 100000) return gpt_error(p->err, "grammar: rules nested too deeply");
    color[r] = 1;
    PRule *R = &p->rules[r];
    for (size_t a = 0; a < R->n_alts; a++) {
        Alt *A = &R->alts[a];
        for (size_t i = 0; i + 1 < A->n; i++) {
            if (A->el[i].type != EL_RULE) break;
            if (check_left_recursion(p, nullable, color, (int)A->el[i].value, depth + 1)) return -1;
            if (!nullable[A->el[i].value]) break;
        }
    }
    color[r] = 2;
    return 0;
}

static int check_and_build(Parser *p, Grammar *g, int root) {
    size_t nr = p->n_rules;
    for (size_t r = 0; r < nr; r++) {
        if (!p->rules[r].defined)
            return gpt_error(p->err, "%d:%d: undefined rule '%s'", p->rules[r].ref_line, p->rules[r].ref_col,
                             p->rules[r].name);
    }
    uint8_t *prod = calloc(nr, 1), *nullable = calloc(nr, 1), *color = calloc(nr, 1);
    int rc = -1;
    if (!prod || !nullable || !color) {
        out_of_memory(p);
        goto done;
    }
    for (int changed = 1; changed;) {  // least fixpoints
        changed = 0;
        for (size_t r = 0; r < nr; r++) {
            PRule *R = &p->rules[r];
            for (size_t a = 0; a < R->n_alts; a++) {
                Alt *A = &R->alts[a];
                if (!prod[r] && alt_productive(p, A, prod)) prod[r] = changed = 1;
                if (!nullable[r]) {
                    int all = 1;
                    for (size_t i = 0; i + 1 < A->n && all; i++)
                        all = A->el[i].type == EL_RULE && nullable[A->el[i].value];
                    if (all) nullable[r] = changed = 1;
                }
            }
        }
        if (check_time(p)) goto done;
    }
    if (!prod[root]) {
        gpt_error(p->err, "%d:%d: the grammar matches no string: rule 'root' derives no finite text",
                  p->rules[root].line, p->rules[root].col);
        goto done;
    }
    for (size_t r = 0; r < nr; r++)
        if (check_left_recursion(p, nullable, color, (int)r, 0)) goto done;
    // flatten: the live alternatives of each rule
    g->n_rules = nr;
    g->rule_alt_start = calloc(nr + 1, sizeof *g->rule_alt_start);
    size_t n_alts = 0, n_el = 0;
    for (size_t r = 0; r < nr; r++)
        for (size_t a = 0; a < p->rules[r].n_alts; a++)
            if (alt_productive(p, &p->rules[r].alts[a], prod)) {
                n_alts++;
                n_el += p->rules[r].alts[a].n;
            }
    g->alts = malloc((n_alts ? n_alts : 1) * sizeof *g->alts);
    g->el = malloc((n_el ? n_el : 1) * sizeof *g->el);
    g->names = calloc(nr, sizeof *g->names);
    if (!g->rule_alt_start || !g->alts || !g->el || !g->names) {
        out_of_memory(p);
        goto done;
    }
    size_t ai = 0, ei = 0;
    for (size_t r = 0; r < nr; r++) {
        g->rule_alt_start[r] = (uint32_t)ai;
        for (size_t a = 0; a < p->rules[r].n_alts; a++) {
            Alt *A = &p->rules[r].alts[a];
            if (!alt_productive(p, A, prod)) continue;
            g->alts[ai++] = (uint32_t)ei;
            memcpy(g->el + ei, A->el, A->n * sizeof *A->el);
            ei += A->n;
        }
        g->names[r] = p->rules[r].name;
        p->rules[r].name = NULL;
    }
    g->rule_alt_start[nr] = (uint32_t)ai;
    g->n_el = n_el;
    g->classes = p->classes;
    g->n_classes = p->n_classes;
    p->classes = NULL;
    g->root = (uint32_t)root;
    rc = 0;
done:
    free(prod);
    free(nullable);
    free(color);
    return rc;
}

static void parser_free(Parser *p) {
    for (size_t r = 0; r < p->n_rules; r++) {
        free(p->rules[r].name);
        for (size_t a = 0; a < p->rules[r].n_alts; a++) free(p->rules[r].alts[a].el);
        free(p->rules[r].alts);
    }
    free(p->rules);
    free(p->classes);
}

// The arrays grammar_same compares (the names only name rules in messages).
static size_t n_alts_of(const Grammar *g) { return g->rule_alt_start[g->n_rules]; }

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t grammar_hash(const Grammar *g) {
    uint64_t h = 1469598103934665603ull;
    h = hash_bytes(h, g->el, g->n_el * sizeof *g->el);
    h = hash_bytes(h, g->alts, n_alts_of(g) * sizeof *g->alts);
    h = hash_bytes(h, g->rule_alt_start, (g->n_rules + 1) * sizeof *g->rule_alt_start);
    h = hash_bytes(h, g->classes, g->n_classes * sizeof *g->classes);
    return hash_bytes(h, &g->root, sizeof g->root);
}

bool grammar_same(const Grammar *a, const Grammar *b) {
    if (a == b) return true;
    return a->hash == b->hash && a->n_el == b->n_el && a->n_rules == b->n_rules &&
           a->n_classes == b->n_classes && a->root == b->root &&
           memcmp(&a->lim, &b->lim, sizeof a->lim) == 0 &&
           memcmp(a->el, b->el, a->n_el * sizeof *a->el) == 0 &&
           memcmp(a->rule_alt_start, b->rule_alt_start, (a->n_rules + 1) * sizeof *a->rule_alt_start) == 0 &&
           memcmp(a->alts, b->alts, n_alts_of(a) * sizeof *a->alts) == 0 &&
           memcmp(a->classes, b->classes, a->n_classes * sizeof *a->classes) == 0;
}

Grammar *grammar_compile(const char *text, size_t len, const GrammarLimits *limits, GptError *err) {
    Parser p = {.s = text, .len = len, .lim = grammar_limits_resolve(limits), .t0 = now_seconds(),
                .err = err, .any_rule = -1};
    if (len > p.lim.max_text)
        return gpt_error(err, "grammar: %zu bytes, more than %zu (the bound)", len, p.lim.max_text), NULL;
    Grammar *g = calloc(1, sizeof *g);
    if (!g) return gpt_error(err, "grammar: out of memory"), NULL;
    g->refs = 1;  // the caller's, also on the failure paths below (grammar_free)
    g->lim = p.lim;
    int root = -1;
    if (parse_grammar(&p) == 0) {
        for (size_t r = 0; r < p.n_rules; r++)
            if (strcmp(p.rules[r].name, "root") == 0) root = (int)r;
        if (root < 0 || !p.rules[root].defined)
            gpt_error(err, "grammar: no rule 'root' (the start rule) is defined");
        else if (check_and_build(&p, g, root) == 0) {
            parser_free(&p);
            g->hash = grammar_hash(g);
            return g;
        }
    }
    parser_free(&p);
    grammar_free(g);
    return NULL;
}

Grammar *grammar_ref(const Grammar *g) {
    Grammar *held = (Grammar *)g;  // its count of holders is not part of the automaton
    held->refs++;
    return held;
}

void grammar_free(Grammar *g) {
    if (!g || --g->refs > 0) return;
    if (g->names)
        for (size_t r = 0; r < g->n_rules; r++) free(g->names[r]);
    free(g->names);
    free(g->rule_alt_start);
    free(g->alts);
    free(g->el);
    free(g->classes);
    free(g);
}

size_t grammar_size(const Grammar *g) { return g ? g->n_el : 0; }

/*
 * regex.h - a regular expression -> GBNF text (llama.cpp's dialect, as
 * grammar.h reads it), for --regex (the whole output matches) and for JSON
 * Schema's "pattern" (schema.c: the characters of a JSON string's content).
 *
 * The subset (docs/json-schema.md), each with Python's re.fullmatch(RE, s,
 * re.ASCII) meaning, which is what tests/test_regex.c compares against:
 *   literals (UTF-8), `.` (any character but \n), classes [a-z0-9_] and
 *   [^...] with ranges and escapes, escapes \d \D \w \W \s \S (ASCII sets),
 *   \n \r \t \f \v \0 \xHH \uHHHH \UHHHHHHHH and \ before any ASCII
 *   punctuation, groups ( ) and (?: ), alternation |, quantifiers * + ?
 *   {m} {m,} {m,n} (a lazy ? after one is accepted: the language is the
 *   same), ^ as the first and $ as the last character of the whole
 *   expression.
 * Everything else is refused with the byte offset and the construct:
 * backreferences, lookaround, \b \B \A \Z, flags (?i), named groups,
 * possessive quantifiers, a bare { or a ] first in a class (write \{, \]),
 * and *, + or {m,} on a group that can match the empty string ((a|)*,
 * (a*)+: the grammar engine refuses a repetition that can go on without
 * reading a byte; (a)* is the same language).
 *
 * Bounds (untrusted input, gpt serve): REGEX_MAX_BYTES of expression,
 * REGEX_MAX_DEPTH nested groups, each count of {m,n} at most
 * GRAMMAR_MAX_REPEAT, the product of the counts of nested quantifiers (what
 * a grammar engine that unrolls them would build) at most
 * GRAMMAR_MAX_EXPANSION, and the GBNF text at most GRAMMAR_MAX_TEXT bytes.
 */
#ifndef GPT_REGEX_H
#define GPT_REGEX_H

#include <stddef.h>

#include "base/error.h"

#define REGEX_MAX_BYTES 4096
#define REGEX_MAX_DEPTH 64
#define GRAMMAR_MAX_REPEAT 1024        // any count: {m,n}, maxLength, maxItems
#define GRAMMAR_MAX_EXPANSION 65536    // product of nested quantifiers' counts
#define GRAMMAR_MAX_TEXT (1u << 20)    // bytes of GBNF text made

// A GBNF text being written: malloc'd, NUL-terminated. Once a write fails
// (out of memory, or past GRAMMAR_MAX_TEXT) `failed` stays set and further
// writes do nothing; the caller checks it once at the end.
typedef struct {
    char *s;
    size_t n, cap;
    int failed;  // 1 out of memory, 2 past GRAMMAR_MAX_TEXT
} GText;

void gtext_put(GText *t, const char *s, size_t n);
void gtext_puts(GText *t, const char *s);
void gtext_printf(GText *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// a GBNF string literal "..." matching exactly bytes s[0..n)
void gtext_literal(GText *t, const char *s, size_t n);
// inserts s at offset `at` (<= t->n)
void gtext_insert(GText *t, size_t at, const char *s);
void gtext_free(GText *t);

// Writes to `out` one GBNF expression (no rule name) for re[0..n).
// json_string: the expression matches the characters as they appear inside
// a JSON string written compactly (" and \ escaped as \" and \\, control
// characters as \n \r \t \b \f or \u00XX, everything else as itself), and a
// leading ^ / trailing $ anchor it; without them it may match anywhere
// (JSON Schema's "pattern" searches). Without json_string, the expression
// matches the text whole. `what` names the expression in errors
// ("--regex", "#/properties/id/pattern"). Returns 0, or -1 with err set.
int regex_emit(GText *out, const char *re, size_t n, int json_string, const char *what, GptError *err);

// One GBNF element: any one character as a compact JSON string writes it
// (see regex_emit), the `char` of schema.c's strings.
void regex_json_char(GText *t);

// The GBNF grammar `root ::= ...` whose language is the strings re matches
// whole (re.fullmatch). Returns malloc'd text, or NULL with err set.
char *regex_to_gbnf(const char *re, size_t n, GptError *err);

#endif

/*
 * utf8.h - UTF-8, strictly (Unicode's Table 3-7: no overlong forms, no
 * surrogates, nothing above U+10FFFF): one character at a time, a whole
 * string's validity, and any bytes made valid. The one decoder gpt has: the
 * tokenizer's pre-tokenizer, its vocabulary and its streaming decoder, and
 * model.bin's token strings use it.
 *
 * Invalid input is measured in "maximal subparts" (Unicode 3.9, U+FFFD
 * substitution): the longest prefix of a sequence that could still begin a
 * valid character, or one byte if none; Python's
 * bytes.decode("utf-8", "replace") writes one U+FFFD for each, as
 * utf8_replace_invalid does.
 */
#ifndef GPT_UTF8_H
#define GPT_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT "\xEF\xBF\xBD"  // U+FFFD, 3 bytes

// What utf8_decode says instead of a code point.
enum {
    UTF8_INVALID = -1,     // a maximal subpart that can never be completed
    UTF8_INCOMPLETE = -2,  // a valid prefix cut short by the end of the buffer
};

// Reads one UTF-8 sequence from s[0..n), n >= 1. Returns its length with
// *cp the code point; or, if s does not start with a whole valid sequence,
// the length of the maximal subpart there (at least 1) with *cp
// UTF8_INVALID or UTF8_INCOMPLETE. Inline: the tokenizer calls it for every
// character it encodes.
static inline size_t utf8_decode(const unsigned char *s, size_t n, int32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    int32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
        v = (int32_t)(c & 0x1F);
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        v = (int32_t)(c & 0x0F);
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        v = (int32_t)(c & 0x07);
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *cp = UTF8_INVALID;
        return 1;
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= n) {
            *cp = UTF8_INCOMPLETE;
            return i;
        }
        unsigned b = s[i];
        if (b < lo || b > hi) {
            *cp = UTF8_INVALID;
            return i;
        }
        lo = 0x80;
        hi = 0xBF;
        v = (v << 6) | (int32_t)(b & 0x3F);
    }
    *cp = v;
    return need;
}

// 1 if s[0..n) is all valid UTF-8 (NUL bytes included), else 0.
int utf8_valid(const unsigned char *s, size_t n);

// s[0..n) with each maximal invalid subpart, an incomplete sequence at the
// end too, replaced by U+FFFD: valid UTF-8, malloc'd and NUL-terminated
// (the caller frees), *out_len (may be NULL) its length without the NUL.
// NULL when out of memory.
char *utf8_replace_invalid(const unsigned char *s, size_t n, size_t *out_len);

#endif

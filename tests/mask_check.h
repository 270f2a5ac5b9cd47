/*
 * mask_check.h - a GrammarMasker's masks against their definition, along
 * texts: at every prefix of a text the grammar accepts, token t is allowed
 * iff a copy of the matcher reads all of t's bytes, and the end token iff
 * the matcher can end. One masker serves every prefix of every text given
 * to it, so a cache entry made in one state is served in the others: a
 * key that misses part of the state (the stack below a string, a count
 * of a repetition, the nesting) gives some state another state's mask.
 * The vocabulary: the 256 single bytes and strings that straddle JSON's
 * pieces and the regex tests' words (a key's end, a value's start, a
 * closing quote and what follows it, nested brackets).
 */
#ifndef GPT_TEST_MASK_CHECK_H
#define GPT_TEST_MASK_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "grammar/grammar.h"

static const char *const MASK_WORDS[] = {
    "{\"", "\":", "\": ", "\": \"", "\"}", "\"]", "\",", "\", \"", "},", "}]", "}}", "]}", "[{\"", "[[", "]]",
    "ab", "abc", "abc\"", "foo", "bar\"", "true", "true,", "false", "null", "null}", " {", " \"", " [", "12",
    "1.5", "-1", "0,", "1]", "e+", "\\\"", "\\u00", "\xc3\xa9", "\xc3", "{\"a\": 1}", "[1, 2]", "\"a\"",
    "\"foo\": \"bar\"", " the", "The", " cat", "ing", ".", " a", "Ab", "x.", "aaaaaaaa", "      ",
    // longer than the counts of the ragged repetitions' tests (grammar_chains.c moves a count's
    // key to its chain's top and trusts it only for tokens of at most rho bytes)
    "aaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaa", "aaaaa\"", "aaaaaaaaa\"}", "abababababab", "ababab\"", "ababab.",
    "ab ab ab ab", " ab ab", "ab.", " ab.", " abcd", " abcdefgh", "abcd abcd abcd.", "aaaa aaaa aaaa aaaa",
    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", "a\xc3\xa9" "a\xc3\xa9\"", "\\n\\n\\n", "a\\\"a\\\"a\"",
    "bbbbbbbbbbbb.", "abababab", "bbbb", "ab)", "abc)", "ab]", "ab,ab", "abc,", "ab ab (", "c.",
    // every count: runs of 2 to 24 bytes, and of 2 to 9 words
    "aa", "aaa", "aaaa", "aaaaa", "aaaaaa", "aaaaaaa", "aaaaaaaaa", "aaaaaaaaaa", "aaaaaaaaaaa", "aaaaaaaaaaaaa",
    "aaaaaaaaaaaaaa", "aaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaa",
    "aaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaa",
    "aaaaaaaaaaaaaaaaaaaaaaaa", " a a", " a a a", " a a a a", " a a a a a", " a a a a a a", " a a a a a a a",
    " a a a a a a a a", " a a a a a a a a a", "ababababab", "ababababababab", "abababababababab", "bbbbb", "bbbbbb",
    "bbbbbbb", "bbbbbbbb", "bbbbbbbbb", "bbbbbbbbbb", "xx", "xxx", "xxxx", "xxxxx", "xxxxxx"};

typedef struct {
    const uint8_t **tb;
    size_t *tl;
    size_t V;
    int32_t eos;  // the last id, of no bytes
} MaskVocab;

static MaskVocab mask_vocab(void) {
    static uint8_t bytes[256];
    size_t nw = sizeof MASK_WORDS / sizeof *MASK_WORDS;
    MaskVocab mv = {malloc((256 + nw + 1) * sizeof *mv.tb), malloc((256 + nw + 1) * sizeof *mv.tl), 256 + nw + 1, 0};
    if (!mv.tb || !mv.tl) abort();
    for (int i = 0; i < 256; i++) {
        bytes[i] = (uint8_t)i;
        mv.tb[i] = &bytes[i];
        mv.tl[i] = 1;
    }
    for (size_t i = 0; i < nw; i++) {
        mv.tb[256 + i] = (const uint8_t *)MASK_WORDS[i];
        mv.tl[256 + i] = strlen(MASK_WORDS[i]);
    }
    mv.tb[mv.V - 1] = (const uint8_t *)"";
    mv.tl[mv.V - 1] = 0;
    mv.eos = (int32_t)(mv.V - 1);
    return mv;
}

static void mask_vocab_free(MaskVocab *mv) {
    free(mv->tb);
    free(mv->tl);
}

// CHECKs mk's mask against the definition at every prefix of text[0..n)
// (which g accepts, or its prefix does: it stops at the first byte refused).
// mk is g's over mv. Returns the states checked.
static size_t masks_along(GrammarMasker *mk, const Grammar *g, const MaskVocab *mv, const char *text, size_t n,
                          const char *what) {
    GptError err = {{0}};
    GrammarMatcher *m = grammar_matcher_new(g, &err), *c = grammar_matcher_new(g, &err);
    uint64_t *mask = calloc(GRAMMAR_MASK_WORDS(mv->V), sizeof *mask);
    CHECK(m && c && mask, "%s: setup: %s", what, err.msg);
    size_t states = 0;
    int bad = 0;
    for (size_t at = 0; m && c && mask && at <= n && !bad; at++) {
        long got_n = grammar_masker_fill(mk, m, mask, &err);
        CHECK(got_n >= 0, "%s: fill after %zu bytes: %s", what, at, err.msg);
        long want_n = 0;
        for (size_t t = 0; t < mv->V; t++) {
            int want;
            if ((int32_t)t == mv->eos) {
                want = grammar_matcher_can_end(m);
            } else {
                want = mv->tl[t] > 0 && grammar_matcher_assign(c, m, &err) == 0 &&
                       grammar_matcher_feed(c, mv->tb[t], mv->tl[t], &err) == 0;
            }
            int got = (int)(mask[t >> 6] >> (t & 63)) & 1;
            want_n += want;
            if (got != want && bad++ < 3)
                CHECK(0, "%s after \"%.*s\": token %zu (%.*s) want %d got %d", what, (int)at, text, t,
                      (int)mv->tl[t], (const char *)mv->tb[t], want, got);
        }
        CHECK(bad || got_n == want_n, "%s after \"%.*s\": %ld allowed, want %ld", what, (int)at, text, got_n, want_n);
        states++;
        if (at < n && grammar_matcher_feed(m, (const uint8_t *)text + at, 1, &err) != 0) break;
    }
    free(mask);
    grammar_matcher_free(m);
    grammar_matcher_free(c);
    return states;
}

#endif

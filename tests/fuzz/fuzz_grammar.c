/*
 * fuzz_grammar.c - the GBNF compiler and the automaton it builds
 * (src/grammar/grammar.h) on any input: the grammar text up to the first
 * NUL byte, then the bytes fed to the matcher (none when there is no NUL).
 * The compiler runs with its default bounds, except the compile time,
 * which is 200 ms here (not 1000) so that a slow input costs less; the
 * bounds are what gpt applies to a grammar from anyone.
 *
 * Checked:
 *   - a refused grammar has a message of one line;
 *   - a compiled one: the bytes are fed one at a time until one is refused;
 *     a refusal leaves the matcher as it was (it goes on reading what it
 *     could read before); is_done implies can_end and refuses every byte;
 *     grammar_match on the bytes read agrees with the matcher;
 *   - the mask of a small vocabulary (the 256 single bytes, some longer
 *     strings, and an empty end-of-text token) at the start and after each
 *     of the first two bytes is its definition: token t is allowed exactly
 *     when a copy of the matcher reads all of t's bytes, end-of-text
 *     exactly when the matcher can end (a bound met on the way excuses the
 *     token it was met on). Asked twice, the cached mask is the same.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "grammar/grammar.h"

// The vocabulary: 256 byte tokens, these, and end-of-text (empty) last.
static const char *const LONG_TOKENS[] = {
    "{\"", "\":", "\",\"", "true", "false", "null", "  ", "\n", "\r\n", "ab", "abc", "\xC3\xA9",
    "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "-1", "0.5", "1e", "[]", "{}", "},{", "\\\"", "\\u00", "::=", "# x",
};
enum { N_LONG = sizeof LONG_TOKENS / sizeof *LONG_TOKENS, V = 256 + N_LONG + 1, EOS = V - 1, MASK_STATES = 2 };

static GrammarVocab *vocab;
static const uint8_t *token_bytes[V];
static size_t token_len[V];
static uint8_t single[256];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int b = 0; b < 256; b++) {
        single[b] = (uint8_t)b;
        token_bytes[b] = &single[b];
        token_len[b] = 1;
    }
    for (int i = 0; i < N_LONG; i++) {
        token_bytes[256 + i] = (const uint8_t *)LONG_TOKENS[i];
        token_len[256 + i] = strlen(LONG_TOKENS[i]);
    }
    token_bytes[EOS] = (const uint8_t *)"";
    token_len[EOS] = 0;
    GptError err = {{0}};
    vocab = grammar_vocab_new(token_bytes, token_len, V, &err);
    if (!vocab) fuzz_fail("grammar_vocab_new: %s", err.msg);
    return 0;
}

static int is_refusal(const char *msg) { return strstr(msg, "is not allowed") != NULL; }

// The mask of m's state against feeding each token to a copy.
static void check_mask(GrammarMasker *mk, const GrammarMatcher *m) {
    static uint64_t mask[GRAMMAR_MASK_WORDS(V)], again[GRAMMAR_MASK_WORDS(V)];
    GptError err = {{0}};
    long n = grammar_masker_fill(mk, m, mask, &err);
    if (n < 0) {
        if (!err.msg[0]) fuzz_fail("grammar_masker_fill failed without a message");
        return;  // a bound
    }
    long count = 0;
    for (int t = 0; t < V; t++) {
        int allowed = (int)(mask[t / 64] >> (t % 64)) & 1;
        count += allowed;
        if (t == EOS) {
            if (allowed != (int)grammar_matcher_can_end(m))
                fuzz_fail("mask: end-of-text %d, can_end %d", allowed, (int)grammar_matcher_can_end(m));
            continue;
        }
        GrammarMatcher *c = grammar_matcher_copy(m, &err);
        if (!c) fuzz_fail("grammar_matcher_copy: %s", err.msg);
        err.msg[0] = '\0';
        int rc = grammar_matcher_feed(c, token_bytes[t], token_len[t], &err);
        grammar_matcher_free(c);
        if (rc != 0 && !is_refusal(err.msg)) continue;  // a bound: no answer to compare
        if (allowed != (rc == 0))
            fuzz_fail("mask: token %d (%zu bytes) allowed %d, but feeding it %s", t, token_len[t], allowed,
                      rc == 0 ? "works" : err.msg);
    }
    if (count != n) fuzz_fail("grammar_masker_fill said %ld tokens, the mask has %ld", n, count);
    if (grammar_masker_fill(mk, m, again, &err) != n || memcmp(mask, again, sizeof mask) != 0)
        fuzz_fail("the mask asked again differs");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t text_len = nul ? (size_t)(nul - data) : size;
    const uint8_t *bytes = nul ? nul + 1 : data + size;
    size_t n_bytes = (size_t)(data + size - bytes);
    GrammarLimits lim = grammar_limits_default();
    lim.max_compile_ms = 200;
    GptError err = {{0}};
    Grammar *g = grammar_compile((const char *)data, text_len, &lim, &err);
    if (!g) {
        if (!err.msg[0] || strchr(err.msg, '\n')) fuzz_fail("a refused grammar's message: \"%s\"", err.msg);
        return 0;
    }
    GrammarMatcher *m = grammar_matcher_new(g, &err);
    if (!m) {
        if (!err.msg[0]) fuzz_fail("grammar_matcher_new failed without a message");
        grammar_free(g);
        return 0;
    }
    GrammarMasker *mk = grammar_masker_new(g, vocab, EOS, NULL, &err);
    if (!mk) fuzz_fail("grammar_masker_new: %s", err.msg);
    check_mask(mk, m);
    uint8_t *taken = malloc(n_bytes + 1);  // the bytes the matcher took, for grammar_match
    if (!taken) fuzz_fail("out of memory");
    size_t read = 0;
    int bound = 0;
    for (size_t i = 0; i < n_bytes; i++) {
        int done = grammar_matcher_is_done(m), can_end = grammar_matcher_can_end(m);
        if (done && !can_end) fuzz_fail("is_done without can_end after %zu bytes", read);
        err.msg[0] = '\0';
        if (grammar_matcher_feed(m, &bytes[i], 1, &err) != 0) {
            if (!is_refusal(err.msg)) {
                bound = 1;
                break;
            }
            // refused: the state is as before
            if (grammar_matcher_is_done(m) != done || grammar_matcher_can_end(m) != can_end)
                fuzz_fail("a refused byte changed the matcher");
            continue;
        }
        if (done) fuzz_fail("a matcher that was done read byte 0x%02x", bytes[i]);
        taken[read++] = bytes[i];
        if (read <= MASK_STATES) check_mask(mk, m);
    }
    if (!bound) {
        int can_end = grammar_matcher_can_end(m);
        int whole = grammar_match(g, (const char *)taken, read, &err);
        if (whole >= 0 && whole != can_end)
            fuzz_fail("grammar_match of the %zu bytes read says %d, the matcher can_end %d", read, whole, can_end);
    }
    free(taken);
    grammar_masker_free(mk);
    grammar_matcher_free(m);
    grammar_free(g);
    return 0;
}

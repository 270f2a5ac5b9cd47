/*
 * fuzz_tokenizer.c - the shipped GPT-2 tokenizer (models/vocab.json +
 * merges.txt, loaded once) on any bytes:
 *   - decode(encode(bytes)) == bytes, with and without special tokens;
 *   - every id is in the vocabulary; <|endoftext|> appears only with special
 *     tokens on, once per literal "<|endoftext|>" in the text;
 *   - encoding twice (the second time from the piece cache) gives the same ids;
 *   - the streaming decoder, fed one token at a time and flushed, gives what
 *     Python's bytes.decode("utf-8", "replace") gives for the bulk decode
 *     (a reference implementation below), and is valid UTF-8.
 * The tokenizer files are found as $GPT_FUZZ_TOKENIZER, else models/ (run
 * from the repository root, as `make fuzz` does).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/tokenizer.h"

static Tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("GPT_FUZZ_TOKENIZER");
    if (!dir || !*dir) dir = "models";
    GptError err;
    tok = tokenizer_load(dir, &err);
    if (!tok) fuzz_fail("%s (set GPT_FUZZ_TOKENIZER to the directory of vocab.json + merges.txt)", err.msg);
    return 0;
}

// Python's bytes.decode("utf-8", "replace"): each maximal subpart of an
// ill-formed sequence becomes one U+FFFD (Unicode 3.9, Table 3-7 ranges).
// out needs 3 * n bytes.
static size_t utf8_replace(const unsigned char *s, size_t n, unsigned char *out) {
    size_t o = 0, i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t need = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) need = 1;
        else if (c >= 0xC2 && c <= 0xDF) need = 2;
        else if (c == 0xE0) need = 3, lo = 0xA0;
        else if (c == 0xED) need = 3, hi = 0x9F;
        else if (c >= 0xE1 && c <= 0xEF) need = 3;
        else if (c == 0xF0) need = 4, lo = 0x90;
        else if (c == 0xF4) need = 4, hi = 0x8F;
        else if (c >= 0xF1 && c <= 0xF3) need = 4;
        size_t k = 1;  // bytes of a valid prefix
        if (need > 1) {
            for (; k < need && i + k < n; k++) {
                unsigned b = s[i + k];
                if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
            }
        }
        if (need && k == need) {
            memcpy(out + o, s + i, need);
            o += need;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += k;
    }
    return o;
}

static int utf8_valid(const unsigned char *s, size_t n) {
    unsigned char *tmp = malloc(3 * n + 1);
    if (!tmp) fuzz_fail("out of memory");
    size_t m = utf8_replace(s, n, tmp);
    int ok = m == n && memcmp(tmp, s, n) == 0;
    free(tmp);
    return ok;
}

static size_t count_eot(const uint8_t *s, size_t n) {
    static const char eot[] = "<|endoftext|>";
    size_t k = sizeof eot - 1, count = 0;
    for (size_t i = 0; i + k <= n;) {
        if (!memcmp(s + i, eot, k)) count++, i += k;
        else i++;
    }
    return count;
}

static void check(const uint8_t *data, size_t size, int special) {
    GptError err;
    int32_t *ids, *again;
    size_t n_ids, n_again;
    if (tokenizer_encode(tok, (const char *)data, size, special, &ids, &n_ids, &err) != 0)
        fuzz_fail("encode: %s", err.msg);
    if (!ids) fuzz_fail("encode gave NULL ids");
    size_t V = tokenizer_vocab_size(tok), n_eot = 0;
    int32_t eot = tokenizer_eot_id(tok);
    for (size_t i = 0; i < n_ids; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= V) fuzz_fail("id %d at %zu is outside the vocabulary", ids[i], i);
        n_eot += ids[i] == eot;
    }
    size_t want_eot = special ? count_eot(data, size) : 0;
    if (n_eot != want_eot) fuzz_fail("%zu <|endoftext|> tokens, expected %zu (special %d)", n_eot, want_eot, special);
    if (n_ids > size) fuzz_fail("%zu tokens for %zu bytes", n_ids, size);

    if (tokenizer_encode(tok, (const char *)data, size, special, &again, &n_again, &err) != 0)
        fuzz_fail("second encode: %s", err.msg);
    if (n_again != n_ids || memcmp(again, ids, n_ids * sizeof *ids) != 0)
        fuzz_fail("encoding twice gave different ids (special %d)", special);
    free(again);

    char *text;
    size_t len;
    if (tokenizer_decode(tok, ids, n_ids, &text, &len, &err) != 0) fuzz_fail("decode: %s", err.msg);
    if (len != size || memcmp(text, data, size) != 0 || text[len] != '\0')
        fuzz_fail("decode(encode(%zu bytes)) gave %zu bytes that differ (special %d)", size, len, special);

    // The stream, one token at a time, then flushed.
    unsigned char *want = malloc(3 * size + 1), *got = malloc(3 * size + 4);
    if (!want || !got) fuzz_fail("out of memory");
    size_t n_want = utf8_replace((const unsigned char *)text, len, want), n_got = 0;
    TokenStream ts;
    token_stream_init(&ts);
    for (size_t i = 0; i < n_ids; i++) {
        const char *s;
        size_t n;
        if (token_stream_push(&ts, tok, ids[i], &s, &n, &err) != 0) fuzz_fail("stream: %s", err.msg);
        if (n_got + n > 3 * size + 4) fuzz_fail("stream gave more than 3 bytes per input byte");
        memcpy(got + n_got, s, n);
        n_got += n;
    }
    const char *s;
    size_t n;
    token_stream_flush(&ts, &s, &n);
    if (n_got + n > 3 * size + 4) fuzz_fail("stream gave more than 3 bytes per input byte");
    memcpy(got + n_got, s, n);
    n_got += n;
    // An id outside the vocabulary is refused and leaves the stream as it was.
    if (token_stream_push(&ts, tok, (int32_t)V, &s, &n, &err) == 0) fuzz_fail("stream took id %zu", V);
    token_stream_free(&ts);
    if (n_got != n_want || memcmp(got, want, n_want) != 0)
        fuzz_fail("stream gave %zu bytes, bytes.decode(\"utf-8\", \"replace\") %zu (special %d)", n_got, n_want,
                  special);
    if (!utf8_valid(got, n_got)) fuzz_fail("stream output is not valid UTF-8");
    free(want);
    free(got);
    free(text);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check(data, size, 0);
    check(data, size, 1);
    return 0;
}

/*
 * fuzz_tokenizer_files.c - the tokenizer's file readers. An input with a NUL
 * byte is vocab.json (before the first NUL) and merges.txt (after it), read
 * by tokenizer_load_files; an input without one is a tokenizer.json, read by
 * tokenizer_load_json. A tokenizer that loads must give every token's bytes
 * and string, merges inside the vocabulary, and the round trip
 * decode(encode(text)) == text on a fixed text and the input's first bytes
 * (fuzz_common.h). vocab.json is read twice, directly and through cJSON
 * (tokenizer_load_files_with): the two must agree, message for message.
 */
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/tokenizer_build.h"

// The direct read (t, err) against the one through cJSON.
static void check_same_as_cjson(const char *vocab, const char *merges, const Tokenizer *t,
                                const GptError *err) {
    GptError e2 = {{0}};
    Tokenizer *p = tokenizer_load_files_with(vocab, merges, 1, &e2);
    if (!t || !p) {
        if (t || p || strcmp(err->msg, e2.msg) != 0)
            fuzz_fail("vocab.json read directly and through cJSON disagree");
        tokenizer_free(p);
        return;
    }
    if (tokenizer_vocab_size(t) != tokenizer_vocab_size(p) || tokenizer_eot_id(t) != tokenizer_eot_id(p))
        fuzz_fail("vocab.json read directly and through cJSON: sizes differ");
    for (size_t i = 0; i < tokenizer_vocab_size(t); i++)
        if (strcmp(tokenizer_token_string(t, (int32_t)i), tokenizer_token_string(p, (int32_t)i)) != 0)
            fuzz_fail("vocab.json read directly and through cJSON: a token string differs");
    tokenizer_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char a[1024], b[1024];
    GptError err = {{0}};
    Tokenizer *t;
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        size_t n = (size_t)(nul - data);
        fuzz_write(a, sizeof a, "vocab.json", data, n);
        fuzz_write(b, sizeof b, "merges.txt", nul + 1, size - n - 1);
        t = tokenizer_load_files(a, b, &err);
        check_same_as_cjson(a, b, t, &err);
    } else {
        fuzz_write(a, sizeof a, "tokenizer.json", data, size);
        t = tokenizer_load_json(a, &err);
    }
    if (!t) {
        if (!err.msg[0]) fuzz_fail("a tokenizer failed to load without a message");
        if (fuzz_verbose()) fprintf(stderr, "load: %s\n", err.msg);
        return 0;
    }
    if (fuzz_verbose()) fprintf(stderr, "load: ok, %zu tokens\n", tokenizer_vocab_size(t));
    fuzz_check_tokenizer(t, data, size);
    tokenizer_free(t);
    return 0;
}

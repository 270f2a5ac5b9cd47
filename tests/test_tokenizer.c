/*
 * test_tokenizer.c - the BPE tokenizer against ids produced by other
 * implementations: tests/fixtures/public_refs.json ("tokenizer", from
 * tiktoken / Hugging Face) and tests/fixtures/tiktoken_cases.json (from the
 * npm tiktoken package, OpenAI's tokenizer compiled to WASM; see
 * models/README.md). Plus: loading from a tokenizer.json in both merge
 * syntaxes, error messages, randomized byte round trips, the streaming
 * decoder, and the pathological long pieces.
 *
 * Run from the repository root. Extra case files (same format as
 * tiktoken_cases.json) may be given as arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "base/fileio.h"
#include "base/grow.h"
#include "model/tokenizer.h"
#include "model/tokenizer_build.h"
#include "base/utf8.h"

// ---------------------------------------------------------------- helpers

static void print_ids(FILE *f, const int32_t *ids, size_t n) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++) fprintf(f, i ? ", %d" : "%d", (int)ids[i]);
    fputc(']', f);
}

// The first 60 bytes of s, escaped, for messages.
static const char *show(const char *s, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n && i < 60 && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    if (n > 60 && o + 4 < cap) o += (size_t)snprintf(buf + o, cap - o, "...");
    buf[o] = '\0';
    return buf;
}

// Reads a JSON array of numbers into a malloc'd array.
static int32_t *json_ids(const cJSON *arr, size_t *n) {
    *n = (size_t)cJSON_GetArraySize(arr);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) ids[i++] = (int32_t)e->valuedouble;
    return ids;
}

static int same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

// Encodes text and compares with `want`; prints both on a mismatch.
static void check_encode(Tokenizer *t, const char *text, size_t len, int special,
                         const int32_t *want, size_t n_want, const char *where) {
    int32_t *got;
    size_t n_got;
    GptError err = {""};
    int rc = tokenizer_encode(t, text, len, special, &got, &n_got, &err);
    CHECK(rc == 0, "%s: encode failed: %s", where, err.msg);
    if (rc) return;
    int ok = same_ids(got, n_got, want, n_want);
    char buf[512];
    CHECK(ok, "%s: encode(\"%s\", special=%d) differs", where, show(text, len, buf, sizeof buf),
          special);
    if (!ok) {
        fprintf(stderr, "  expected: ");
        print_ids(stderr, want, n_want);
        fprintf(stderr, "\n  got:      ");
        print_ids(stderr, got, n_got);
        fputc('\n', stderr);
    }
    free(got);
}

// Every case of a JSON array {text, ids_text, ids_special[, decoded]}.
static void check_case_array(Tokenizer *t, const cJSON *cases, const char *path) {
    size_t k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        char where[600];
        snprintf(where, sizeof where, "%s case %zu", path, k++);
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
        if (!cJSON_IsString(text)) {
            CHECK(0, "%s: no text", where);
            continue;
        }
        const char *s = text->valuestring;
        size_t len = strlen(s);
        // A text with NUL bytes also comes as hex, since cJSON strings end at NUL.
        char *from_hex = NULL;
        const cJSON *hex = cJSON_GetObjectItemCaseSensitive(c, "text_hex");
        if (cJSON_IsString(hex)) {
            len = strlen(hex->valuestring) / 2;
            from_hex = malloc(len + 1);
            for (size_t i = 0; i < len; i++) {
                unsigned v;
                sscanf(hex->valuestring + 2 * i, "%2x", &v);
                from_hex[i] = (char)v;
            }
            from_hex[len] = '\0';
            s = from_hex;
        }
        size_t n_text, n_special;
        int32_t *ids_text = json_ids(cJSON_GetObjectItemCaseSensitive(c, "ids_text"), &n_text);
        int32_t *ids_special =
            json_ids(cJSON_GetObjectItemCaseSensitive(c, "ids_special"), &n_special);
        check_encode(t, s, len, 0, ids_text, n_text, where);
        check_encode(t, s, len, 1, ids_special, n_special, where);
        // Decoding the reference ids gives back the text (or "decoded").
        const cJSON *dec = cJSON_GetObjectItemCaseSensitive(c, "decoded");
        const char *want = cJSON_IsString(dec) ? dec->valuestring : s;
        size_t want_len = cJSON_IsString(dec) ? strlen(want) : len;
        char *out;
        size_t out_len;
        GptError err = {""};
        int rc = tokenizer_decode(t, ids_text, n_text, &out, &out_len, &err);
        char b1[512], b2[512];
        CHECK(rc == 0 && out_len == want_len && memcmp(out, want, out_len) == 0,
              "%s: decode: expected \"%s\", got \"%s\" %s", where,
              show(want, want_len, b1, sizeof b1), rc ? "" : show(out, out_len, b2, sizeof b2),
              err.msg);
        free(out);
        rc = tokenizer_decode(t, ids_special, n_special, &out, &out_len, &err);
        CHECK(rc == 0 && out_len == len && memcmp(out, s, len) == 0,
              "%s: decode(ids_special) is not the text", where);
        free(out);
        free(ids_text);
        free(ids_special);
        free(from_hex);
    }
}

static cJSON *read_json(const char *path) {
    char *data;
    size_t len;
    GptError err = {""};
    if (file_read_all(path, &data, &len, &err)) {
        CHECK(0, "cannot read %s: %s", path, err.msg);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(data, len);
    free(data);
    CHECK(root != NULL, "%s: malformed JSON", path);
    return root;
}

static void check_case_file(Tokenizer *t, const char *path, const char *member) {
    cJSON *root = read_json(path);
    if (!root) return;
    const cJSON *cases = member ? cJSON_GetObjectItemCaseSensitive(root, member) : root;
    CHECK(cJSON_IsArray(cases) && cJSON_GetArraySize(cases) > 0, "%s: no cases", path);
    int before = check_failed;
    check_case_array(t, cases, path);
    printf("%s: %d cases checked, %d failures\n", path, cJSON_GetArraySize(cases),
           check_failed - before);
    cJSON_Delete(root);
}

static int write_file(const char *path, const char *data) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    fputs(data, f);
    return fclose(f);
}

// ---------------------------------------------------------------- loading

// Writes t's tables as a tokenizer.json, merges as "a b" or ["a", "b"].
static void write_tokenizer_json(const Tokenizer *t, const char *path, int array_merges) {
    cJSON *root = cJSON_CreateObject();
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (size_t id = 0; id < tokenizer_vocab_size(t); id++)
        cJSON_AddNumberToObject(vocab, tokenizer_token_string(t, (int32_t)id), (double)id);
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    for (size_t r = 0; r < tokenizer_n_merges(t); r++) {
        int32_t a, b;
        tokenizer_merge_pair(t, r, &a, &b);
        const char *sa = tokenizer_token_string(t, a), *sb = tokenizer_token_string(t, b);
        if (array_merges) {
            const char *pair[2] = {sa, sb};
            cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pair, 2));
        } else {
            char *m = malloc(strlen(sa) + strlen(sb) + 2);
            sprintf(m, "%s %s", sa, sb);
            cJSON_AddItemToArray(merges, cJSON_CreateString(m));
            free(m);
        }
    }
    char *s = cJSON_PrintUnformatted(root);
    CHECK(s && write_file(path, s) == 0, "cannot write %s", path);
    free(s);
    cJSON_Delete(root);
}

static const char *const sample_texts[] = {
    "Hello world! It's 2024; we'll see.\n\n  indented\tline\r\n",
    "naïve café 東京 Привет 🤖🚀 \u00a0x\u3000y",
    "<|endoftext|>The end. <|endoftext|>",
    "def f(x):\n    return x ** 2  # square\n",
};

// Another tokenizer must encode and decode exactly like the reference one.
static void check_same_as(Tokenizer *ref, Tokenizer *t, const char *what) {
    CHECK(tokenizer_vocab_size(t) == tokenizer_vocab_size(ref) &&
              tokenizer_n_merges(t) == tokenizer_n_merges(ref) &&
              tokenizer_eot_id(t) == tokenizer_eot_id(ref),
          "%s: sizes differ", what);
    for (size_t k = 0; k < sizeof sample_texts / sizeof *sample_texts; k++) {
        for (int special = 0; special < 2; special++) {
            int32_t *want;
            size_t n_want;
            GptError err = {""};
            const char *s = sample_texts[k];
            if (tokenizer_encode(ref, s, strlen(s), special, &want, &n_want, &err)) {
                CHECK(0, "%s", err.msg);
                continue;
            }
            check_encode(t, s, strlen(s), special, want, n_want, what);
            free(want);
        }
    }
}

static void test_other_loaders(Tokenizer *ref) {
    char dir[] = "/tmp/test_tokenizer_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char path[256];
    GptError err = {""};
    for (int array_merges = 0; array_merges < 2; array_merges++) {
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        write_tokenizer_json(ref, path, array_merges);
        Tokenizer *t = tokenizer_load(path, &err);  // the file itself
        CHECK(t != NULL, "tokenizer_load(%s): %s", path, err.msg);
        if (t) check_same_as(ref, t, array_merges ? "tokenizer.json [a, b]" : "tokenizer.json \"a b\"");
        tokenizer_free(t);
        t = tokenizer_load(dir, &err);  // the directory holding it
        CHECK(t != NULL, "tokenizer_load(%s): %s", dir, err.msg);
        if (t) check_same_as(ref, t, "tokenizer.json via directory");
        tokenizer_free(t);
    }
    unlink(path);
    rmdir(dir);

    // From tables, as the model file stores them.
    size_t nv = tokenizer_vocab_size(ref), nm = tokenizer_n_merges(ref);
    const char **strings = malloc(nv * sizeof *strings);
    int32_t(*pairs)[2] = malloc(nm * sizeof *pairs);
    for (size_t i = 0; i < nv; i++) strings[i] = tokenizer_token_string(ref, (int32_t)i);
    for (size_t r = 0; r < nm; r++) tokenizer_merge_pair(ref, r, &pairs[r][0], &pairs[r][1]);
    Tokenizer *t = tokenizer_from_tables(nv, strings, nm, (const int32_t(*)[2])pairs, &err);
    CHECK(t != NULL, "tokenizer_from_tables: %s", err.msg);
    if (t) check_same_as(ref, t, "tokenizer_from_tables");
    tokenizer_free(t);
    // A merge naming an id outside the vocabulary.
    pairs[5][1] = (int32_t)nv + 3;
    t = tokenizer_from_tables(nv, strings, nm, (const int32_t(*)[2])pairs, &err);
    CHECK(t == NULL && strstr(err.msg, "merge 5"), "bad merge id: got \"%s\"", err.msg);
    free(strings);
    free(pairs);
}

// A tiny vocabulary: byte b's token (in GPT-2's alphabet) has id b, then the
// extra tokens.
static char *tiny_vocab_json(const char *extra) {
    size_t cap = 8192, o = 0;
    char *s = malloc(cap);
    o += (size_t)snprintf(s + o, cap - o, "{");
    int id = 0;
    for (unsigned b = 0; b < 256; b++) {
        // GPT-2's bytes_to_unicode, written out independently here.
        unsigned cp;
        if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) {
            cp = b;
        } else {
            unsigned k = 0;
            for (unsigned x = 0; x < b; x++)
                k += !((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE));
            cp = 256 + k;
        }
        if (cp == '"' || cp == '\\')
            o += (size_t)snprintf(s + o, cap - o, "\"\\%c\": %d, ", (char)cp, id++);
        else
            o += (size_t)snprintf(s + o, cap - o, "\"\\u%04x\": %d, ", cp, id++);
    }
    o += (size_t)snprintf(s + o, cap - o, "%s}", extra);
    return s;
}

static void expect_load_error(const char *vocab, const char *merges, const char *want,
                              const char *what) {
    GptError err = {""};
    Tokenizer *t = tokenizer_load_files(vocab, merges, &err);
    CHECK(t == NULL && strstr(err.msg, want) != NULL, "%s: expected an error containing \"%s\", got \"%s\"",
          what, want, err.msg);
    tokenizer_free(t);
}

static void test_errors(Tokenizer *ref) {
    GptError err = {""};
    Tokenizer *t = tokenizer_load("/nonexistent/dir", &err);
    CHECK(t == NULL && strstr(err.msg, "/nonexistent/dir"), "missing path: \"%s\"", err.msg);
    t = tokenizer_load("tests", &err);  // a directory without the files
    CHECK(t == NULL && strstr(err.msg, "tests"), "empty dir: \"%s\"", err.msg);

    char dir[] = "/tmp/test_tokenizer_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char v[128], m[128], j[128];
    snprintf(v, sizeof v, "%s/vocab.json", dir);
    snprintf(m, sizeof m, "%s/merges.txt", dir);
    snprintf(j, sizeof j, "%s/tok.json", dir);

    // A well-formed tiny tokenizer first, so the error cases differ in one thing.
    char *good = tiny_vocab_json("\"he\": 256, \"ll\": 257, \"hell\": 258, \"<|endoftext|>\": 259");
    write_file(v, good);
    write_file(m, "#version: 0.2\nh e\nl l\nhe ll\n");
    t = tokenizer_load_files(v, m, &err);
    CHECK(t != NULL, "tiny tokenizer: %s", err.msg);
    if (t) {
        int32_t *ids;
        size_t n;
        CHECK(tokenizer_encode(t, "hello<|endoftext|>", 18, 1, &ids, &n, &err) == 0, "%s", err.msg);
        // The tiny vocabulary gives byte b the id b: 'o' is 111.
        int32_t want[] = {258, 111, 259};
        CHECK(same_ids(ids, n, want, 3), "tiny tokenizer: hello<|endoftext|> gave %zu ids: %d %d %d", n,
              (int)ids[0], n > 1 ? (int)ids[1] : -1, n > 2 ? (int)ids[2] : -1);
        free(ids);
        CHECK(tokenizer_eot_id(t) == 259, "tiny eot id %d", (int)tokenizer_eot_id(t));
    }
    tokenizer_free(t);

    write_file(m, "#version: 0.2\nh e\nl l\nhe xyz\n");
    expect_load_error(v, m, ":4: merge names unknown token 'xyz'", "unknown merge token");
    write_file(m, "h e\nl l ll\n");
    expect_load_error(v, m, ":2: expected two tokens", "three-token merge line");
    write_file(m, "h e\nl l\nh l\n");
    expect_load_error(v, m, ":3: merge 'h l' makes a token that is not in the vocabulary",
                      "merge result not in vocabulary");
    write_file(m, "h e\n");
    expect_load_error(v, "/nonexistent/merges.txt", "/nonexistent/merges.txt", "missing merges");
    expect_load_error("/nonexistent/vocab.json", m, "/nonexistent/vocab.json", "missing vocab");

    write_file(v, "[1, 2, 3]");
    expect_load_error(v, m, "not a JSON object", "vocab is an array");
    write_file(v, "{\"a\": 1, ");
    expect_load_error(v, m, "malformed JSON", "truncated vocab");
    free(good);
    good = tiny_vocab_json("\"foo\": 99999");
    write_file(v, good);
    expect_load_error(v, m, "entry \"foo\" id 99999 out of range", "vocab id out of range");
    free(good);
    good = tiny_vocab_json("\"foo\": 255");
    write_file(v, good);
    expect_load_error(v, m, "id 255 given to both", "duplicate id");
    free(good);
    write_file(v, "{\"a\": 0}");
    expect_load_error(v, m, "no token for byte 0x00", "vocab without byte tokens");

    write_file(j, "{\"model\": {\"vocab\": {\"a\": 0}, \"merges\": [\"a\"]");
    t = tokenizer_load(j, &err);
    CHECK(t == NULL && strstr(err.msg, "malformed JSON"), "bad tokenizer.json: \"%s\"", err.msg);
    write_file(j, "{\"model\": {\"type\": \"BPE\"}}");
    t = tokenizer_load(j, &err);
    CHECK(t == NULL && strstr(err.msg, "model.vocab: not a JSON object"), "no vocab: \"%s\"", err.msg);
    good = tiny_vocab_json("\"he\": 256");
    char *doc = malloc(strlen(good) + 200);
    sprintf(doc, "{\"model\": {\"type\": \"BPE\", \"vocab\": %s, \"merges\": [[\"h\", \"e\"], [\"q\", \"zz\"]]}}", good);
    write_file(j, doc);
    t = tokenizer_load(j, &err);
    CHECK(t == NULL && strstr(err.msg, "model.merges[1]: merge names unknown token 'zz'"),
          "tokenizer.json unknown merge: \"%s\"", err.msg);
    free(good);
    free(doc);
    // A merge of two empty tokens (a "" key, possible only in tokenizer.json's
    // array form) once counted -1 splits and overflowed the pair buffer:
    // "aa" and "bb" have one split each, "" minus one.
    good = tiny_vocab_json("\"\": 256, \"aa\": 257, \"bb\": 258");
    doc = malloc(strlen(good) + 200);
    sprintf(doc, "{\"model\": {\"vocab\": %s, \"merges\": [[\"a\", \"a\"], [\"b\", \"b\"], [\"\", \"\"]]}}", good);
    write_file(j, doc);
    t = tokenizer_load(j, &err);
    CHECK(t == NULL && strstr(err.msg, "model.merges[2]: merge ' ' names an empty token"),
          "tokenizer.json empty merge: \"%s\"", err.msg);
    tokenizer_free(t);
    free(good);
    free(doc);
    unlink(v);
    unlink(m);
    unlink(j);
    rmdir(dir);

    // Decoding an id outside the vocabulary names it and its position.
    int32_t bad[] = {15496, 50257, 995};
    char *out;
    size_t n;
    CHECK(tokenizer_decode(ref, bad, 3, &out, &n, &err) == -1 && strstr(err.msg, "50257") &&
              strstr(err.msg, "position 1"),
          "decode bad id: \"%s\"", err.msg);
    int32_t neg = -1;
    CHECK(tokenizer_decode(ref, &neg, 1, &out, &n, &err) == -1, "decode -1 accepted");
    size_t len;
    CHECK(tokenizer_token_bytes(ref, 50257, &len) == NULL && tokenizer_token_bytes(ref, -1, &len) == NULL,
          "token_bytes out of range");
    TokenStream ts;
    token_stream_init(&ts);
    const char *s;
    CHECK(token_stream_push(&ts, ref, 99999, &s, &n, &err) == -1 && strstr(err.msg, "99999"),
          "stream bad id: \"%s\"", err.msg);
    token_stream_free(&ts);
}

// ---------------------------------------------------------------- round trips

static uint64_t rng_state = 0x243F6A8885A308D3ULL;
static uint32_t rng(void) {  // xorshift64*
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}

static size_t put_cp(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

// Appends one random chunk; *valid is cleared if it is not valid UTF-8.
static size_t random_chunk(char *o, int *valid) {
    static const uint32_t spaces[] = {' ', '\t', '\n', '\r', 0x0B, 0x0C, 0x85, 0xA0, 0x1680,
                                      0x2000, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
                                      0x3000, 0x200B, 0x180E};
    static const uint32_t ranges[][2] = {
        {0x20, 0x7E}, {0xA0, 0x2FF}, {0x300, 0x36F}, {0x370, 0x52F}, {0x590, 0x6FF},
        {0x900, 0x97F}, {0xE00, 0xE7F}, {0x1100, 0x11FF}, {0x1E00, 0x1FFF}, {0x2000, 0x2BFF},
        {0x3000, 0x30FF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0xE000, 0xE0FF}, {0xFB00, 0xFFFD},
        {0x10000, 0x1FFFF}, {0x1F300, 0x1FAFF}, {0x20000, 0x2A6DF}, {0xE0000, 0xE007F},
        {0x10FF00, 0x10FFFF}};
    static const char *const emoji[] = {
        "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",  // family ZWJ
        "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",                                              // thumbs up, skin tone
        "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88",                      // rainbow flag
        "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",                                              // FR flag
        "e\xCC\x81", "a\xCC\x88\xCC\x81", "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D",
        "'s", "'LL", " 're", "<|endoftext|>", "<|endoftext|", "12,345.67", "\r\n",
    };
    size_t o_len = 0;
    switch (rng() % 8) {
    case 0:  // random bytes, NUL and invalid UTF-8 included
        for (uint32_t n = 1 + rng() % 8; n; n--) o[o_len++] = (char)(rng() & 0xFF);
        *valid = 0;
        break;
    case 1: {  // broken sequences: lone surrogates, truncations, overlongs
        static const char *const bad[] = {"\xED\xA0\x80", "\xED\xBF\xBF", "\xE2\x82", "\xF0\x9F\x98",
                                          "\xC0\xAF", "\xF5\x80\x80\x80", "\x80", "\xFF", "\xC3"};
        const char *b = bad[rng() % (sizeof bad / sizeof *bad)];
        memcpy(o, b, strlen(b));
        o_len = strlen(b);
        *valid = 0;
        break;
    }
    case 2:  // a run of mixed white space
        for (uint32_t n = 1 + rng() % 12; n; n--)
            o_len += put_cp(o + o_len, spaces[rng() % (sizeof spaces / sizeof *spaces)]);
        break;
    case 3:
        {
            const char *e = emoji[rng() % (sizeof emoji / sizeof *emoji)];
            memcpy(o, e, strlen(e));
            o_len = strlen(e);
        }
        break;
    default:  // code points from many scripts (no surrogates: not in the ranges)
        for (uint32_t n = 1 + rng() % 6; n; n--) {
            const uint32_t *r = ranges[rng() % (sizeof ranges / sizeof *ranges)];
            o_len += put_cp(o + o_len, r[0] + rng() % (r[1] - r[0] + 1));
        }
    }
    return o_len;
}

// Python's bytes.decode("utf-8", "replace") for the cases the stream must
// match: what the stream prints for ids split at every possible point.
static void stream_decode(const Tokenizer *t, const int32_t *ids, size_t n, char **out,
                          size_t *out_len) {
    TokenStream ts;
    token_stream_init(&ts);
    size_t cap = 64, o = 0;
    char *buf = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        const char *s;
        size_t k;
        GptError err = {""};
        if (i < n) {
            if (token_stream_push(&ts, t, ids[i], &s, &k, &err)) {
                CHECK(0, "stream: %s", err.msg);
                k = 0;
            }
        } else {
            token_stream_flush(&ts, &s, &k);
        }
        while (o + k + 1 > cap) buf = realloc(buf, cap *= 2);
        memcpy(buf + o, s, k);
        o += k;
    }
    token_stream_free(&ts);
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
}

static void test_round_trips(Tokenizer *t) {
    char *text = malloc(1 << 16);
    int fails = 0;
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = 0;
        int valid = 1;
        for (uint32_t n = rng() % 30; n; n--) len += random_chunk(text + len, &valid);
        for (int special = 0; special < 2; special++) {
            int32_t *ids;
            size_t n;
            GptError err = {""};
            if (tokenizer_encode(t, text, len, special, &ids, &n, &err)) {
                CHECK(0, "round trip %d: %s", iter, err.msg);
                continue;
            }
            char *out;
            size_t out_len;
            int rc = tokenizer_decode(t, ids, n, &out, &out_len, &err);
            char b[512];
            int ok = rc == 0 && out_len == len && memcmp(out, text, len) == 0;
            if (!ok && fails++ < 10)
                CHECK(ok, "round trip %d (special=%d): \"%s\" does not come back", iter, special,
                      show(text, len, b, sizeof b));
            else
                CHECK(ok, "round trip");
            if (rc == 0 && valid) {
                char *sout;
                size_t slen;
                stream_decode(t, ids, n, &sout, &slen);
                CHECK(slen == out_len && memcmp(sout, out, slen) == 0,
                      "round trip %d: streaming decode differs from bulk for \"%s\"", iter,
                      show(text, len, b, sizeof b));
                free(sout);
            }
            if (rc == 0) free(out);
            free(ids);
        }
    }
    free(text);
}

// The stream against Python's bytes.decode("utf-8", "replace") (results
// taken from CPython 3.11), fed in every split of the bytes.
static void test_stream_replacement(void) {
    static const struct {
        const char *in;
        const char *want;
    } cases[] = {
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},  // lone surrogate: 3
        {"\xE2\x82" "A", "\xEF\xBF\xBD" "A"},                      // truncated, then ASCII
        {"\xE2\x82", "\xEF\xBF\xBD"},                              // truncated at the end
        {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
        {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},  // overlong: 2
        {"\xFF\xFE" "x", "\xEF\xBF\xBD\xEF\xBF\xBD" "x"},
        {"\xE2\x82\xE2\x82\xAC", "\xEF\xBF\xBD\xE2\x82\xAC"},  // broken, then a whole euro
        {"a\x80" "b", "a\xEF\xBF\xBD" "b"},
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = strlen(cases[c].in);
        // Every way to cut the input into two pushes.
        for (size_t cut = 0; cut <= n; cut++) {
            TokenStream ts;
            token_stream_init(&ts);
            char got[64];
            size_t o = 0;
            const char *s;
            size_t k;
            GptError err;
            token_stream_push_bytes(&ts, (const unsigned char *)cases[c].in, cut, &s, &k, &err);
            memcpy(got + o, s, k);
            o += k;
            token_stream_push_bytes(&ts, (const unsigned char *)cases[c].in + cut, n - cut, &s, &k,
                                    &err);
            memcpy(got + o, s, k);
            o += k;
            token_stream_flush(&ts, &s, &k);
            memcpy(got + o, s, k);
            o += k;
            token_stream_free(&ts);
            char b1[256], b2[256];
            CHECK(o == strlen(cases[c].want) && memcmp(got, cases[c].want, o) == 0,
                  "stream case %zu cut %zu: expected \"%s\", got \"%s\"", c, cut,
                  show(cases[c].want, strlen(cases[c].want), b1, sizeof b1), show(got, o, b2, sizeof b2));
        }
        // utf8.h in one call: the same replacement, and valid only when
        // nothing is replaced
        size_t m;
        char *whole = utf8_replace_invalid((const unsigned char *)cases[c].in, n, &m);
        char b1[256], b2[256];
        CHECK(whole && m == strlen(cases[c].want) && memcmp(whole, cases[c].want, m) == 0 && whole[m] == 0,
              "utf8_replace_invalid case %zu: expected \"%s\", got \"%s\"", c,
              show(cases[c].want, strlen(cases[c].want), b1, sizeof b1), whole ? show(whole, m, b2, sizeof b2) : "NULL");
        free(whole);
        int same = strcmp(cases[c].in, cases[c].want) == 0;
        CHECK(utf8_valid((const unsigned char *)cases[c].in, n) == same, "utf8_valid case %zu: %d, expected %d", c,
              !same, same);
    }
    // Output never stalls: an invalid byte comes out at once.
    TokenStream ts;
    token_stream_init(&ts);
    const char *s;
    size_t k;
    GptError err;
    token_stream_push_bytes(&ts, (const unsigned char *)"\xE2\x82", 2, &s, &k, &err);
    CHECK(k == 0, "incomplete sequence should be held");
    token_stream_push_bytes(&ts, (const unsigned char *)"\xFF", 1, &s, &k, &err);
    CHECK(k == 6, "held + invalid byte should give two U+FFFD at once, got %zu bytes", k);
    token_stream_free(&ts);
    token_stream_free(&ts);  // idempotent
}

// ---------------------------------------------------------------- long pieces

// What tiktoken (npm) gives for the three inputs that are slow in naive BPE:
// "a" x 100000 -> 25000 x 24794 ("aaaa"), " " x 100000 -> 100000 x 220 ("Ġ":
// GPT-2 has no multi-space tokens), "ab" x 50000 -> 50000 x 397 ("ab").
static void test_pathological(Tokenizer *t) {
    struct {
        const char *unit;
        size_t reps;
        int32_t id;
        size_t n;
    } in[] = {{"a", 100000, 24794, 25000}, {" ", 100000, 220, 100000}, {"ab", 50000, 397, 50000}};
    for (size_t c = 0; c < 3; c++) {
        size_t ul = strlen(in[c].unit), len = ul * in[c].reps;
        char *text = malloc(len);
        for (size_t i = 0; i < in[c].reps; i++) memcpy(text + i * ul, in[c].unit, ul);
        int32_t *ids;
        size_t n;
        GptError err = {""};
        if (tokenizer_encode(t, text, len, 0, &ids, &n, &err)) {
            CHECK(0, "pathological %zu: %s", c, err.msg);
            free(text);
            continue;
        }
        char *out;
        size_t out_len;
        CHECK(tokenizer_decode(t, ids, n, &out, &out_len, &err) == 0 && out_len == len &&
                  memcmp(out, text, len) == 0,
              "pathological %zu: round trip", c);
        free(out);
        size_t same = 0;
        while (same < n && ids[same] == in[c].id) same++;
        CHECK(n == in[c].n && same == n,
              "pathological \"%s\" x %zu: expected %zu x %d, got %zu ids (first %zu match; id there %d)",
              in[c].unit, in[c].reps, in[c].n, (int)in[c].id, n, same, same < n ? (int)ids[same] : -1);
        free(ids);
        free(text);
    }
}

// grow.h's contract, which the tokenizer's id vectors and stream grow by:
// at least what is asked, twice the old size, 16 at the least; a size
// beyond size_t refused with the array untouched.
static void test_grow_array(void) {
    int32_t *a = NULL;
    size_t cap = 0;
    CHECK(grow_array(&a, &cap, 1, sizeof *a) == 0 && a && cap == 16, "grow to 1: cap %zu", cap);
    a[15] = 7;
    CHECK(grow_array(&a, &cap, 16, sizeof *a) == 0 && cap == 16, "no growth needed: cap %zu", cap);
    CHECK(grow_array(&a, &cap, 17, sizeof *a) == 0 && cap == 32 && a[15] == 7, "double: cap %zu", cap);
    CHECK(grow_array(&a, &cap, 1000, sizeof *a) == 0 && cap == 1000 && a[15] == 7, "to need: cap %zu", cap);
    int32_t *before = a;
    CHECK(grow_array(&a, &cap, SIZE_MAX / 2, sizeof *a) == -1 && a == before && cap == 1000,
          "an overflowing size must be refused, the array kept");
    free(a);
}

// Two loads of the same files must agree: both fail with the same message,
// or both give the same tokens (strings, merges, eot).
static void check_same_load(Tokenizer *a, const GptError *ea, Tokenizer *b, const GptError *eb,
                            const char *what) {
    if (!a || !b) {
        CHECK(!a && !b && strcmp(ea->msg, eb->msg) == 0, "%s: \"%s\" against \"%s\"", what,
              a ? "(loaded)" : ea->msg, b ? "(loaded)" : eb->msg);
        return;
    }
    size_t n = tokenizer_vocab_size(a), bad = 0;
    CHECK(n == tokenizer_vocab_size(b) && tokenizer_n_merges(a) == tokenizer_n_merges(b) &&
              tokenizer_eot_id(a) == tokenizer_eot_id(b),
          "%s: sizes differ", what);
    if (n != tokenizer_vocab_size(b)) return;
    for (size_t i = 0; i < n; i++)
        bad += strcmp(tokenizer_token_string(a, (int32_t)i), tokenizer_token_string(b, (int32_t)i)) != 0;
    for (size_t r = 0; r < tokenizer_n_merges(a) && r < tokenizer_n_merges(b); r++) {
        int32_t la, ra, lb, rb;
        tokenizer_merge_pair(a, r, &la, &ra);
        tokenizer_merge_pair(b, r, &lb, &rb);
        bad += la != lb || ra != rb;
    }
    CHECK(bad == 0, "%s: %zu tokens or merges differ", what, bad);
}

// vocab.json's common form is read directly, anything else through cJSON
// (tokenizer_files.c): the reference. Both must agree on GPT-2's files and
// on each odd entry below, accepted or refused.
static void test_vocab_fast(Tokenizer *ref) {
    GptError e1 = {""}, e2 = {""};
    Tokenizer *plain = tokenizer_load_files_with("models/vocab.json", "models/merges.txt", 1, &e2);
    check_same_load(ref, &e1, plain, &e2, "GPT-2 vocab.json, direct and through cJSON");
    tokenizer_free(plain);

    char dir[] = "/tmp/test_tokenizer_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char v[128], m[128];
    snprintf(v, sizeof v, "%s/vocab.json", dir);
    snprintf(m, sizeof m, "%s/merges.txt", dir);
    write_file(m, "h e\n");
    static const char *const extras[] = {
        "\"he\": 256, \"<|endoftext|>\": 257",
        "\"h\\u00e9\": 256, \"\\u00C9\\u0120\": 257",
        "\"\\ud83d\\ude00\": 256",          // a surrogate pair
        "\"\\ud83d\": 256",                   // a lone high surrogate
        "\"\\ud83dx\\ude00\": 256",
        "\"\\ude00x\": 256",                  // a lone low surrogate
        "\"a\\u0000b\": 256",                 // NUL ends cJSON's string
        "\"x\\/y\\b\\f\\n\\r\\t\\\"\\\\\": 256",
        "\"x\\q\": 256",                      // no such escape
        "\"\\u12g4\": 256",
        "\"\xC3\xA9\": 256, \"\xFF\xFE\": 257",  // raw UTF-8, raw bytes that are not
        "\"a\tb\": 256",                       // a raw control character
        "\"x\": 0256",
        "\"x\": 0, \"y\": 256",
        "\"x\": 256.0",
        "\"x\": 2.56e2",
        "\"x\": -1",
        "\"x\": \"256\"",
        "\"x\": [256]",
        "\"x\":\f256",
        "\"x\"\n:\r\n256\t",
        "\"x\": 1234567890",
        "\"x\": 256, \"x\": 257",             // one string twice: the first id
        "\"x\": 256}, trailing text",
        "\"x\": 256,",
        "\"x\": 256 \"y\": 257",
        "\"x\" 256",
        "",
    };
    for (size_t k = 0; k < sizeof extras / sizeof *extras; k++) {
        char *text = tiny_vocab_json(extras[k]);
        write_file(v, text);
        free(text);
        e1.msg[0] = e2.msg[0] = '\0';
        Tokenizer *a = tokenizer_load_files_with(v, m, 0, &e1);
        Tokenizer *b = tokenizer_load_files_with(v, m, 1, &e2);
        char what[128];
        snprintf(what, sizeof what, "vocab.json with %s", extras[k]);
        check_same_load(a, &e1, b, &e2, what);
        tokenizer_free(a);
        tokenizer_free(b);
    }
    // Empty, and not an object.
    static const char *const whole[] = {"{}", " { } ", "[]", "", "{\"a\": 0"};
    for (size_t k = 0; k < sizeof whole / sizeof *whole; k++) {
        write_file(v, whole[k]);
        e1.msg[0] = e2.msg[0] = '\0';
        Tokenizer *a = tokenizer_load_files_with(v, m, 0, &e1);
        Tokenizer *b = tokenizer_load_files_with(v, m, 1, &e2);
        check_same_load(a, &e1, b, &e2, whole[k]);
        tokenizer_free(a);
        tokenizer_free(b);
    }
    unlink(v);
    unlink(m);
    rmdir(dir);
}

int main(int argc, char **argv) {
    test_grow_array();
    GptError err = {""};
    Tokenizer *t = tokenizer_load("models", &err);
    CHECK(t != NULL, "tokenizer_load(models): %s", err.msg);
    if (!t) return check_exit("test_tokenizer");
    CHECK(tokenizer_vocab_size(t) == 50257, "vocab size %zu", tokenizer_vocab_size(t));
    CHECK(tokenizer_n_merges(t) == 50000, "merges %zu", tokenizer_n_merges(t));
    CHECK(tokenizer_eot_id(t) == 50256, "eot %d", (int)tokenizer_eot_id(t));
    CHECK(strcmp(tokenizer_token_string(t, 262), "\xC4\xA0the") == 0, "token 262 is \"%s\"",
          tokenizer_token_string(t, 262));
    int32_t l, r;
    tokenizer_merge_pair(t, 0, &l, &r);
    CHECK(strcmp(tokenizer_token_string(t, l), "\xC4\xA0") == 0 &&
              strcmp(tokenizer_token_string(t, r), "t") == 0,
          "merge 0 is %d %d", (int)l, (int)r);

    check_case_file(t, "tests/fixtures/public_refs.json", "tokenizer");
    check_case_file(t, "tests/fixtures/tiktoken_cases.json", NULL);
    for (int i = 1; i < argc; i++) check_case_file(t, argv[i], NULL);
    test_other_loaders(t);
    test_vocab_fast(t);
    test_errors(t);
    test_round_trips(t);
    test_stream_replacement();
    test_pathological(t);
    tokenizer_free(t);
    return check_exit("test_tokenizer");
}

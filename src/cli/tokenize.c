/*
 * tokenize.c - `gpt --tokenize` (text on stdin -> ids on stdout) and
 * `gpt --detokenize` (ids -> the exact bytes they stand for).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileio.h"
#include "loader.h"

int run_tokenize(const Options *o) {
    Model m = {0};
    const char *model_path = o->model_path;
    GptError err = {{0}};
    // A model file may carry its own tokenizer; a directory is looked into.
    if (model_path && !o->tokenizer_path && !path_is_dir(model_path)) {
        if (model_load(&m, model_path, &err) != 0) return report_error(&err);
    }
    int owned = 0, rc = EXIT_RUNTIME;
    char *input = NULL;
    int32_t *ids = NULL;
    char *text = NULL;
    Tokenizer *tok = open_tokenizer(o->tokenizer_path, &m, model_path, &owned, &err);
    if (!tok) {
        report_error(&err);
        goto done;
    }
    size_t len;
    if (file_read_stream(stdin, "stdin", &input, &len, &err) != 0) {
        report_error(&err);
        goto done;
    }
    if (o->tokenize) {
        size_t n;
        if (tokenizer_encode(tok, input, len, o->special, &ids, &n, &err) != 0) {
            report_error(&err);
            goto done;
        }
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        printf("\n");
    } else {
        size_t n = 0, cap = 1024;
        ids = malloc(cap * sizeof *ids);
        if (!ids) goto done;
        const char *p = input;
        for (;;) {
            while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') p++;
            if (p >= input + len) break;
            const char *start = p;
            while (p < input + len && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' &&
                   *p != ',')
                p++;
            char word[32];
            size_t wl = (size_t)(p - start);
            long id;
            snprintf(word, sizeof word, "%.*s", (int)(wl < 31 ? wl : 31), start);
            // a NUL would end `word` early: "5\0x" is not the id 5
            if (wl >= sizeof word || memchr(start, '\0', wl) || parse_long(word, &id) != 0) {
                fprintf(stderr, "gpt: --detokenize: stdin: '%.*s' is not a token id\n",
                        (int)(wl < 40 ? wl : 40), start);
                goto done;
            }
            if (id < 0 || (size_t)id >= tokenizer_vocab_size(tok)) {
                fprintf(stderr, "gpt: --detokenize: token id %ld outside the vocabulary [0, %zu)\n",
                        id, tokenizer_vocab_size(tok));
                goto done;
            }
            if (n == cap) {
                int32_t *bigger = realloc(ids, 2 * cap * sizeof *ids);
                if (!bigger) goto done;
                ids = bigger;
                cap *= 2;
            }
            ids[n++] = (int32_t)id;
        }
        size_t text_len;
        if (tokenizer_decode(tok, ids, n, &text, &text_len, &err) != 0) {
            fprintf(stderr, "gpt: --detokenize: %s\n", err.msg);
            goto done;
        }
        fwrite(text, 1, text_len, stdout);
    }
    rc = fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
done:
    free(input);
    free(ids);
    free(text);
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}

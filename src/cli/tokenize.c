/*
 * tokenize.c - `gpt --tokenize` (text -> ids) and `gpt --detokenize` (ids
 * -> the exact bytes they stand for). The text or the ids come from -p or
 * stdin; a stdin text loses one final newline, as a prompt does.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "base/fileio.h"
#include "base/grow.h"
#include "model/loader.h"

// Appends id to ids, growing it. 0 or -1.
static int push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id) {
    if (grow_array(ids, cap, *n + 1, sizeof **ids) != 0) return -1;
    (*ids)[(*n)++] = id;
    return 0;
}

// Token ids from text: a JSON array of integers (what --json and --tokenize
// --json print), or integers separated by white space and commas.
static int parse_ids(const char *input, size_t len, size_t vocab, int32_t **ids, size_t *n_ids) {
    size_t n = 0, cap = 0;
    *ids = NULL;
    const char *p = input;
    while (p < input + len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    if (p < input + len && *p == '[') {
        cJSON *a = cJSON_ParseWithLength(input, len);
        if (!cJSON_IsArray(a)) {
            cJSON_Delete(a);
            runtime_error(NULL, "--detokenize: the input starts with '[' but is not a JSON array");
            return -1;
        }
        const cJSON *it;
        size_t i = 0;
        cJSON_ArrayForEach(it, a) {
            double d = it->valuedouble;
            // range first: a double beyond long's range must not be cast
            if (!cJSON_IsNumber(it) || d < 0 || d >= (double)vocab || d != floor(d)) {
                char *s = cJSON_PrintUnformatted(it);
                runtime_error(NULL, "--detokenize: element %zu (%.40s) is not a token id in [0, %zu)", i,
                              s ? s : "?", vocab);
                free(s);
                cJSON_Delete(a);
                return -1;
            }
            if (push_id(ids, &n, &cap, (int32_t)d) != 0) {
                cJSON_Delete(a);
                return -1;
            }
            i++;
        }
        cJSON_Delete(a);
        *n_ids = n;
        return 0;
    }
    for (;;) {
        while (p < input + len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',')) p++;
        if (p >= input + len) break;
        const char *start = p;
        while (p < input + len && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != ',') p++;
        char word[32];
        size_t wl = (size_t)(p - start);
        long id;
        snprintf(word, sizeof word, "%.*s", (int)(wl < 31 ? wl : 31), start);
        // a NUL would end `word` early: "5\0x" is not the id 5
        if (wl >= sizeof word || memchr(start, '\0', wl) || parse_long(word, &id) != 0) {
            runtime_error(NULL, "--detokenize: '%.*s' is not a token id", (int)(wl < 40 ? wl : 40), start);
            return -1;
        }
        if (id < 0 || (size_t)id >= vocab) {
            runtime_error(NULL, "--detokenize: token id %ld outside the vocabulary [0, %zu)", id, vocab);
            return -1;
        }
        if (push_id(ids, &n, &cap, (int32_t)id) != 0) return -1;
    }
    *n_ids = n;
    return 0;
}

int run_tokenize(const Options *o) {
    Model m = {0};
    // The model named as every mode names it, by -m or else $GPT_MODEL, must
    // be there (a stale $GPT_MODEL was ignored here once, and an error in
    // generation); without either, GPT-2's tokenizer, which every model the
    // search finds (GPT-2 or the demo model) uses.
    const char *env = getenv("GPT_MODEL");
    const char *model_path = o->model_path ? o->model_path : env && *env ? env : NULL;
    const char *named_by = o->model_path ? "" : " (the model named by $GPT_MODEL)";
    GptError err = {{0}};
    if (model_path && !path_exists(model_path)) {
        runtime_error(NULL, "%s: No such file or directory%s", model_path, named_by);
        return EXIT_RUNTIME;
    }
    // A model file may carry its own tokenizer; a directory is looked into.
    if (model_path && !o->tokenizer_path && !path_is_dir(model_path) && model_load(&m, model_path, &err) != 0) {
        if (!*named_by) return report_error(&err);
        runtime_error(NULL, "%s%s", err.msg, named_by);
        return EXIT_RUNTIME;
    }
    int owned = 0, rc = EXIT_RUNTIME;
    char *input = NULL, *text = NULL;
    int32_t *ids = NULL;
    size_t len, n = 0;
    Tokenizer *tok = open_tokenizer(o->tokenizer_path, &m, model_path, &owned, &err);
    if (!tok) {
        report_error(&err);
        goto done;
    }
    if (read_prompt(o, &input, &len) != 0) goto done;
    if (o->mode == MODE_TOKENIZE) {
        if (tokenizer_encode(tok, input, len, o->special, &ids, &n, &err) != 0) {
            report_error(&err);
            goto done;
        }
        int bad = out_write(o->json ? "[" : "", o->json);
        for (size_t i = 0; i < n && !bad; i++) bad = out_printf(i ? (o->json ? ",%d" : " %d") : "%d", (int)ids[i]);
        if (bad || out_write(o->json ? "]\n" : "\n", o->json ? 2 : 1) != 0) goto done;
    } else {
        if (parse_ids(input, len, tokenizer_vocab_size(tok), &ids, &n) != 0) goto done;
        size_t text_len;
        if (tokenizer_decode(tok, ids, n, &text, &text_len, &err) != 0) {
            runtime_error(NULL, "--detokenize: %s", err.msg);
            goto done;
        }
        if (out_write(text, text_len) != 0 || out_end_text() != 0) goto done;
    }
    rc = out_flush() == 0 ? EXIT_OK : EXIT_RUNTIME;
done:
    free(input);
    free(ids);
    free(text);
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}

/*
 * tokenizer_files.c - reading a tokenizer from its files: OpenAI's
 * vocab.json + merges.txt, Hugging Face's tokenizer.json, or a directory
 * holding either (tokenizer.h's tokenizer_load*). Each file is parsed and
 * checked here, entry by entry, with errors that name the file and the line
 * or entry; the Tokenizer is then built by tokenizer_build.h's steps, as
 * tokenizer_from_tables builds it from tables.
 *
 * Not here: the Tokenizer itself, BPE, decoding (tokenizer.c).
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "model/tokenizer.h"
#include "model/tokenizer_build.h"

// Reads a vocab object {"token": id, ...} into a dense array of strings
// (pointing into the cJSON tree). `what` names it in errors.
static const char **vocab_strings(const cJSON *vocab, const char *what, size_t *n_vocab,
                                  GptError *err) {
    if (!cJSON_IsObject(vocab)) {
        gpt_error(err, "%s: not a JSON object", what);
        return NULL;
    }
    size_t n = (size_t)cJSON_GetArraySize(vocab);
    if (n == 0) {
        gpt_error(err, "%s: empty vocabulary", what);
        return NULL;
    }
    const char **strings = calloc(n, sizeof *strings);
    if (!strings) {
        gpt_error(err, "%s: out of memory", what);
        return NULL;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        double d = e->valuedouble;
        if (!cJSON_IsNumber(e)) {
            gpt_error(err, "%s: entry \"%s\" is not an integer id", what, e->string);
            free(strings);
            return NULL;
        }
        if (!(d >= 0 && d < (double)n) || d != (double)(size_t)d) {
            gpt_error(err, "%s: entry \"%s\" id %.17g out of range (vocabulary has %zu entries)",
                      what, e->string, d, n);
            free(strings);
            return NULL;
        }
        size_t id = (size_t)d;
        if (strings[id]) {
            gpt_error(err, "%s: id %zu given to both \"%s\" and \"%s\"", what, id, strings[id],
                      e->string);
            free(strings);
            return NULL;
        }
        strings[id] = e->string;
    }
    *n_vocab = n;
    return strings;
}

static cJSON *parse_json_file(const char *path, GptError *err) {
    char *data;
    size_t len;
    if (file_read_all(path, &data, &len, err)) return NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!root) {
        size_t off = end ? (size_t)(end - data) : 0;
        size_t line = 1;
        for (size_t i = 0; i < off && i < len; i++) line += data[i] == '\n';
        gpt_error(err, "%s:%zu: malformed JSON", path, line);
    }
    free(data);
    return root;
}

Tokenizer *tokenizer_load_files(const char *vocab_json, const char *merges_txt, GptError *err) {
    cJSON *root = parse_json_file(vocab_json, err);
    if (!root) return NULL;
    size_t n_vocab;
    const char **strings = vocab_strings(root, vocab_json, &n_vocab, err);
    Tokenizer *t = strings ? tokenizer_new_vocab(vocab_json, n_vocab, strings, err) : NULL;
    free(strings);
    cJSON_Delete(root);
    if (!t) return NULL;
    if (tokenizer_index_strings(t, vocab_json, err)) goto fail;

    char *data;
    size_t len;
    if (file_read_all(merges_txt, &data, &len, err)) goto fail;
    // Pass 1 counts the merge lines, pass 2 resolves them.
    for (int pass = 0; pass < 2; pass++) {
        size_t n = 0, lineno = 0;
        for (char *p = data, *end = data + len; p < end;) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            char *eol = nl ? nl : end;
            lineno++;
            char *line = p;
            size_t ll = (size_t)(eol - p);
            p = nl ? nl + 1 : end;
            if (ll && line[ll - 1] == '\r') ll--;
            if (ll == 0) continue;
            if (lineno == 1 && ll >= 8 && memcmp(line, "#version", 8) == 0) continue;
            if (pass == 0) {
                n++;
                continue;
            }
            char *sp = memchr(line, ' ', ll);
            if (!sp || sp == line || sp == line + ll - 1 || memchr(sp + 1, ' ', (size_t)(line + ll - sp - 1))) {
                gpt_error(err, "%s:%zu: expected two tokens separated by one space", merges_txt, lineno);
                goto fail_data;
            }
            size_t la = (size_t)(sp - line), lb = ll - la - 1;
            int32_t a = tokenizer_string_id(t, line, la), b = tokenizer_string_id(t, sp + 1, lb);
            if (a < 0 || b < 0) {
                gpt_error(err, "%s:%zu: merge names unknown token '%.*s'", merges_txt, lineno,
                          (int)(a < 0 ? la : lb), a < 0 ? line : sp + 1);
                goto fail_data;
            }
            if (tokenizer_add_merge(t, n, a, b, err)) {
                GptError inner = *err;
                gpt_error(err, "%s:%zu: %s", merges_txt, lineno, inner.msg);
                goto fail_data;
            }
            n++;
        }
        if (pass == 0 && tokenizer_alloc_merges(t, n, merges_txt, err)) goto fail_data;
    }
    free(data);
    tokenizer_finish(t);
    return t;
fail_data:
    free(data);
fail:
    tokenizer_free(t);
    return NULL;
}

Tokenizer *tokenizer_load_json(const char *path, GptError *err) {
    cJSON *root = parse_json_file(path, err);
    if (!root) return NULL;
    Tokenizer *t = NULL;
    const char **strings = NULL;
    char what[600];
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) {
        gpt_error(err, "%s: no \"model\" object", path);
        goto done;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (type && !(cJSON_IsString(type) && strcmp(type->valuestring, "BPE") == 0)) {
        gpt_error(err, "%s: model.type is not \"BPE\"", path);
        goto done;
    }
    snprintf(what, sizeof what, "%s: model.vocab", path);
    size_t n_vocab;
    strings = vocab_strings(cJSON_GetObjectItemCaseSensitive(model, "vocab"), what, &n_vocab, err);
    if (!strings) goto done;
    t = tokenizer_new_vocab(path, n_vocab, strings, err);
    if (!t) goto done;
    if (tokenizer_index_strings(t, path, err)) goto fail;
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsArray(merges)) {
        gpt_error(err, "%s: model.merges is not an array", path);
        goto fail;
    }
    if (tokenizer_alloc_merges(t, (size_t)cJSON_GetArraySize(merges), path, err)) goto fail;
    size_t r = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        const char *sa, *sb;
        size_t la, lb;
        char *sp;
        // Older files write "a b", newer ones ["a", "b"].
        if (cJSON_IsString(m) && (sp = strchr(m->valuestring, ' ')) && !strchr(sp + 1, ' ') &&
            sp != m->valuestring && sp[1]) {
            sa = m->valuestring;
            la = (size_t)(sp - sa);
            sb = sp + 1;
            lb = strlen(sb);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
            sa = cJSON_GetArrayItem(m, 0)->valuestring;
            sb = cJSON_GetArrayItem(m, 1)->valuestring;
            la = strlen(sa);
            lb = strlen(sb);
        } else {
            gpt_error(err, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", path, r);
            goto fail;
        }
        int32_t a = tokenizer_string_id(t, sa, la), b = tokenizer_string_id(t, sb, lb);
        if (a < 0 || b < 0) {
            gpt_error(err, "%s: model.merges[%zu]: merge names unknown token '%.*s'", path, r,
                      (int)(a < 0 ? la : lb), a < 0 ? sa : sb);
            goto fail;
        }
        if (tokenizer_add_merge(t, r, a, b, err)) {
            GptError inner = *err;
            gpt_error(err, "%s: model.merges[%zu]: %s", path, r, inner.msg);
            goto fail;
        }
        r++;
    }
    tokenizer_finish(t);
    goto done;
fail:
    tokenizer_free(t);
    t = NULL;
done:
    free(strings);
    cJSON_Delete(root);
    return t;
}

// 1 if the last component of path is `name`.
static int named(const char *path, const char *name) {
    const char *slash = strrchr(path, '/');
    return !strcmp(slash ? slash + 1 : path, name);
}

Tokenizer *tokenizer_load(const char *path, GptError *err) {
    if (!path_is_dir(path)) {
        if (!path_exists(path)) {
            gpt_error(err, "%s: No such file or directory", path);  // as strerror says it
            return NULL;
        }
        if (!named(path, "vocab.json") && !named(path, "merges.txt")) return tokenizer_load_json(path, err);
        // one of a pair: the pair, if its other half is beside it
        char *vocab = path_sibling(path, "vocab.json"), *merges = path_sibling(path, "merges.txt");
        Tokenizer *t = NULL;
        if (!vocab || !merges)
            gpt_error(err, "%s: out of memory", path);
        else if (path_exists(vocab) && path_exists(merges))
            t = tokenizer_load_files(vocab, merges, err);
        else
            gpt_error(err, "%s: a %s needs %s beside it (or pass the directory, or a tokenizer.json)", path,
                      named(path, "vocab.json") ? "vocab.json" : "merges.txt",
                      named(path, "vocab.json") ? "merges.txt" : "vocab.json");
        free(vocab);
        free(merges);
        return t;
    }
    char *vocab = path_join(path, "vocab.json"), *merges = path_join(path, "merges.txt");
    char *json = path_join(path, "tokenizer.json");
    Tokenizer *t = NULL;
    if (!vocab || !merges || !json)
        gpt_error(err, "%s: out of memory", path);
    else if (path_exists(vocab) && path_exists(merges))
        t = tokenizer_load_files(vocab, merges, err);
    else if (path_exists(json))
        t = tokenizer_load_json(json, err);
    else
        gpt_error(err, "%s: holds neither vocab.json + merges.txt nor tokenizer.json", path);
    free(vocab);
    free(merges);
    free(json);
    return t;
}

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
#include <stdint.h>
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

// data[0..len) as JSON; NULL with err naming path and the line.
static cJSON *parse_json(const char *path, const char *data, size_t len, GptError *err) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(data, len, &end, 0);
    if (!root) {
        size_t off = end ? (size_t)(end - data) : 0;
        size_t line = 1;
        for (size_t i = 0; i < off && i < len; i++) line += data[i] == '\n';
        gpt_error(err, "%s:%zu: malformed JSON", path, line);
    }
    return root;
}

static cJSON *parse_json_file(const char *path, GptError *err) {
    char *data;
    size_t len;
    if (file_read_all(path, &data, &len, err)) return NULL;
    cJSON *root = parse_json(path, data, len, err);
    free(data);
    return root;
}

// ---------------------------------------------------------------- vocab.json, the common form

// A vocab.json is one flat object, {"token": id, ...}. cJSON builds a node
// per entry (a malloc, a strtod) and was 87 M of the 172 M instructions of
// loading GPT-2's files; this reads the common form straight into
// strings[id]. Anything else (other whitespace or values, a number that is
// not a plain non-negative integer, an id out of range or given twice, a
// control character, an escape it does not decode as cJSON does: \u0000,
// a lone surrogate) makes it give up, and the caller reads the file with
// cJSON (vocab_strings), whose messages name the problem: the two agree
// on every file this accepts (tests/test_tokenizer.c compares them).

typedef struct {
    char *arena;          // the decoded strings, NUL-terminated
    const char **strings; // (n) into arena
    size_t n;
} FastVocab;

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

// 4 hex digits at p (p + 4 <= end), or -1.
static long hex4(const char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

// The string whose opening quote is at *pp, decoded to o (NUL-terminated);
// *pp moves past the closing quote. The bytes written, or -1 to give up.
static long fast_string(const char **pp, const char *end, char *o) {
    const char *p = *pp + 1;
    char *o0 = o;
    for (;;) {
        if (p >= end) return -1;
        unsigned char c = (unsigned char)*p++;
        if (c == '"') break;
        if (c < 0x20) return -1;
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        if (p >= end) return -1;
        switch (*p++) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            if (end - p < 4) return -1;
            long cp = hex4(p);
            p += 4;
            if (cp <= 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return -1;
                long lo = hex4(p + 2);
                if (lo < 0xDC00 || lo > 0xDFFF) return -1;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xC0 | cp >> 6);
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xE0 | cp >> 12);
                *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *o++ = (char)(0xF0 | cp >> 18);
                *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
                *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            return -1;
        }
    }
    *o++ = '\0';
    *pp = p;
    return (long)(o - o0);
}

// 1 and v filled when data[0..len) is the common form; 0 to give up (also
// when out of memory: cJSON then says so).
static int vocab_fast(const char *data, size_t len, FastVocab *v) {
    const char *p = data, *end = data + len;
    // Each entry is at least `"":0,` (5 bytes); its decoded string with its
    // NUL is never longer than its quoted form.
    size_t max_n = len / 5 + 1, n = 0, ao = 0;
    char *arena = malloc(len + 1);
    uint32_t *ids = malloc(max_n * sizeof *ids), *offs = malloc(max_n * sizeof *offs);
    const char **strings = NULL;
    if (!arena || !ids || !offs || len > UINT32_MAX) goto give_up;
    p = skip_ws(p, end);
    if (p == end || *p++ != '{') goto give_up;
    for (;;) {
        p = skip_ws(p, end);
        if (p == end || *p != '"') goto give_up;
        long k = fast_string(&p, end, arena + ao);
        if (k < 0) goto give_up;
        p = skip_ws(p, end);
        if (p == end || *p++ != ':') goto give_up;
        p = skip_ws(p, end);
        // A plain integer: 0, or 1-9 digits not starting with 0.
        if (p == end || *p < '0' || *p > '9') goto give_up;
        uint32_t id = 0;
        int digits = 0;
        while (p < end && *p >= '0' && *p <= '9' && digits < 10) id = id * 10 + (uint32_t)(*p++ - '0'), digits++;
        if (digits > 9 || (digits > 1 && p[-digits] == '0')) goto give_up;
        offs[n] = (uint32_t)ao;
        ids[n++] = id;
        ao += (size_t)k;
        p = skip_ws(p, end);
        if (p == end) goto give_up;
        if (*p == '}') break;
        if (*p++ != ',' || n == max_n) goto give_up;
    }
    // What follows the object is ignored, as cJSON_ParseWithLengthOpts does.
    strings = calloc(n, sizeof *strings);
    if (!strings) goto give_up;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= n || strings[ids[i]]) goto give_up;
        strings[ids[i]] = arena + offs[i];
    }
    free(ids);
    free(offs);
    *v = (FastVocab){arena, strings, n};
    return 1;
give_up:
    free(arena);
    free(ids);
    free(offs);
    free(strings);
    return 0;
}

// Step 1 from a vocab.json: the common form directly, else through cJSON.
// plain_json: always through cJSON (the reference, for tests).
static Tokenizer *vocab_json_tokenizer(const char *vocab_json, int plain_json, GptError *err) {
    char *data;
    size_t len;
    if (file_read_all(vocab_json, &data, &len, err)) return NULL;
    FastVocab v;
    if (!plain_json && vocab_fast(data, len, &v)) {
        free(data);
        Tokenizer *t = tokenizer_new_vocab(vocab_json, v.n, v.strings, err);
        free(v.strings);
        free(v.arena);
        return t;
    }
    cJSON *root = parse_json(vocab_json, data, len, err);
    free(data);
    if (!root) return NULL;
    size_t n_vocab;
    const char **strings = vocab_strings(root, vocab_json, &n_vocab, err);
    Tokenizer *t = strings ? tokenizer_new_vocab(vocab_json, n_vocab, strings, err) : NULL;
    free(strings);
    cJSON_Delete(root);
    return t;
}

Tokenizer *tokenizer_load_files(const char *vocab_json, const char *merges_txt, GptError *err) {
    return tokenizer_load_files_with(vocab_json, merges_txt, 0, err);
}

Tokenizer *tokenizer_load_files_with(const char *vocab_json, const char *merges_txt, int plain_json,
                                     GptError *err) {
    Tokenizer *t = vocab_json_tokenizer(vocab_json, plain_json, err);
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

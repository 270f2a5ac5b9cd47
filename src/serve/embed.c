/*
 * embed.c - the embedding endpoints' JSON: POST /v1/embeddings in OpenAI's
 * shape and POST /api/embed in Ollama's, read into one REQUEST_EMBED that
 * the engine thread runs (requests.c: embed_tokens, embed.h, one input at
 * a time, alone: an input's vector is the same bits whatever else the
 * request or the server holds).
 *
 *   /v1/embeddings  input: a string, an array of strings, an array of
 *                   token ids or an array of such arrays; encoding_format
 *                   "float" (default) or "base64" (the float32 bytes,
 *                   little-endian, as OpenAI's); "normalize": false keeps
 *                   the raw pooled vector (default: unit length, as
 *                   OpenAI's); model and user taken, dimensions refused (a
 *                   vector is the model's C wide; gpt shortens none)
 *   /api/embed      input: a string or an array of strings; truncate
 *                   (default true: an input longer than the context keeps
 *                   its first tokens; false: refused); vectors of unit
 *                   length, as Ollama's; model, keep_alive and options taken
 *
 * An empty input (a text of no tokens, an empty array) and one longer than
 * the context are 400s naming "input". The pooling is the server's
 * (--pooling). Nothing here touches the engine or a socket.
 */
#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

// The most inputs one request may hold (OpenAI's limit).
enum { MAX_INPUTS = 2048 };

// The inputs of "input": how many (0: not one of the shapes), and whether
// each is text (else token ids). A single string or id array is one input.
static size_t count_inputs(const cJSON *in, int ollama, int *single) {
    *single = cJSON_IsString(in);
    if (*single) return 1;
    if (!cJSON_IsArray(in) || !in->child) return 0;
    const cJSON *first = in->child;
    if (cJSON_IsNumber(first) && !ollama) {
        *single = 1;
        return 1;
    }
    size_t n = 0;
    for (const cJSON *e = first; e; e = e->next, n++)
        if (!(cJSON_IsString(e) || (!ollama && cJSON_IsArray(e))) || cJSON_IsString(e) != cJSON_IsString(first))
            return 0;
    return n;
}

// Input i (one string, or an array of ids) into req's prompt i. 0 or the status.
static int read_input(Server *s, ApiRequest *req, size_t i, const cJSON *e, int ollama, int truncate, char **msg,
                      char *param) {
    const GPT2Config *cfg = &s->session.model.config;
    char label[48];  // what the messages call it
    snprintf(label, sizeof label, req->n_prompts > 1 ? "input[%zu]" : "input", i);
    if (cJSON_IsString(e)) {
        GptError err = {{0}};
        pthread_mutex_lock(&s->tok_lock);
        int rc = tokenizer_encode(s->session.tok, e->valuestring, strlen(e->valuestring), 0, &req->prompt_ids[i],
                                  &req->prompt_lens[i], &err);
        pthread_mutex_unlock(&s->tok_lock);
        if (rc != 0) return api_fail(500, msg, param, NULL, "%s", err.msg);
    } else {
        char why[160];
        if (json_token_ids(e, (size_t)cfg->vocab_size, label, &req->prompt_ids[i], &req->prompt_lens[i], why,
                           sizeof why) != 0)
            return strcmp(why, "out of memory") ? api_fail(400, msg, param, "input", "%s", why)
                                                 : api_fail(500, msg, param, NULL, "out of memory");
    }
    size_t n = req->prompt_lens[i];
    if (n == 0) return api_fail(400, msg, param, "input", "%s is empty: it has no tokens to embed", label);
    if (n > (size_t)cfg->n_ctx && ollama && truncate) req->prompt_lens[i] = (size_t)cfg->n_ctx;  // its first tokens
    else if (n > (size_t)cfg->n_ctx)
        return api_fail(400, msg, param, "input", "%s is %zu tokens; the model's context holds %d%s", label, n,
                    cfg->n_ctx, ollama ? " (\"truncate\": true keeps its first tokens)" : "");
    return 0;
}

int embed_request(Server *s, int ollama, const char *body, size_t len, ApiRequest **out, char **msg, char *param) {
    *out = NULL;
    *param = '\0';
    int status = 400;
    cJSON *o = api_body(body, len, &status, msg, param);
    if (!o) return status;
    const cJSON *input = NULL;
    int base64 = 0, normalize = 1, truncate = 1;
    ApiRequest *req = NULL;
    status = 0;
    for (const cJSON *f = o->child; f && !status; f = f->next) {
        const char *k = f->string;
        if (!strcmp(k, "input")) input = f;
        else if (cJSON_IsNull(f)) continue;
        else if (!strcmp(k, "model") || (!ollama && !strcmp(k, "user")) || (ollama && !strcmp(k, "keep_alive"))) {
            if (!cJSON_IsString(f) && !(ollama && cJSON_IsNumber(f)))
                status = api_fail(400, msg, param, k, "%s must be a string", k);
        } else if (!strcmp(k, "dimensions")) {
            status = api_fail(400, msg, param, k, "dimensions: gpt gives the model's whole vectors (%d numbers) and "
                          "shortens none; leave dimensions out", s->session.model.config.n_embd);
        } else if (!ollama && !strcmp(k, "encoding_format")) {
            if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") && strcmp(f->valuestring, "base64")))
                status = api_fail(400, msg, param, k, "encoding_format must be \"float\" or \"base64\"");
            else base64 = !strcmp(f->valuestring, "base64");
        } else if ((!ollama && !strcmp(k, "normalize")) || (ollama && !strcmp(k, "truncate"))) {
            if (!cJSON_IsBool(f)) status = api_fail(400, msg, param, k, "%s must be true or false", k);
            else *(ollama ? &truncate : &normalize) = cJSON_IsTrue(f);
        } else if (ollama && !strcmp(k, "options")) {
            if (!cJSON_IsObject(f)) status = api_fail(400, msg, param, k, "options must be an object");
        } else {
            status = api_fail(400, msg, param, k, "unknown field \"%.40s\"", k);
        }
    }
    if (status) goto done;
    int single;
    size_t n = input ? count_inputs(input, ollama, &single) : 0;
    if (!input || cJSON_IsNull(input)) {
        status = api_fail(400, msg, param, "input", "input is missing: the text (or texts) to embed");
        goto done;
    }
    if (cJSON_IsArray(input) && !input->child) {
        status = api_fail(400, msg, param, "input", "input is an empty array: nothing to embed");
        goto done;
    }
    if (n == 0) {
        status = api_fail(400, msg, param, "input",
                      ollama ? "input must be a string or an array of strings"
                             : "input must be a string, an array of strings, an array of token ids or an array "
                               "of arrays of token ids");
        goto done;
    }
    if (n > MAX_INPUTS) {
        status = api_fail(400, msg, param, "input", "input holds %zu inputs; one request takes at most %d", n, MAX_INPUTS);
        goto done;
    }
    if (!(req = api_request_new(n))) {
        status = api_fail(500, msg, param, NULL, "out of memory");
        goto done;
    }
    req->kind = REQUEST_EMBED;
    req->ollama = ollama;
    req->normalize = ollama || normalize;
    req->base64 = base64;
    const cJSON *e = single ? input : input->child;
    for (size_t i = 0; i < n && !status; i++, e = single ? NULL : e->next)
        status = read_input(s, req, i, e, ollama, truncate, msg, param);
    if (status) goto done;
    *out = req;
    req = NULL;
done:
    api_request_free(req);
    cJSON_Delete(o);
    return status;
}

// v (n float32) as base64 of its little-endian bytes (malloc'd), as OpenAI's.
static char *base64_floats(const float *v, size_t n) {
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t bytes = 4 * n;
    unsigned char *b = malloc(bytes ? bytes : 1);
    char *out = malloc((bytes + 2) / 3 * 4 + 1), *p = out;
    if (!b || !out) {
        free(b);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int j = 0; j < 4; j++) b[4 * i + (size_t)j] = (unsigned char)(u >> (8 * j));
    }
    for (size_t i = 0; i < bytes; i += 3) {
        uint32_t w = (uint32_t)b[i] << 16 | (i + 1 < bytes ? (uint32_t)b[i + 1] << 8 : 0) |
                     (i + 2 < bytes ? b[i + 2] : 0);
        *p++ = digits[w >> 18 & 63];
        *p++ = digits[w >> 12 & 63];
        *p++ = i + 1 < bytes ? digits[w >> 6 & 63] : '=';
        *p++ = i + 2 < bytes ? digits[w & 63] : '=';
    }
    *p = '\0';
    free(b);
    return out;
}

char *embed_response(Server *s, const ApiRequest *req) {
    size_t C = (size_t)s->session.model.config.n_embd, tokens = 0;
    for (size_t i = 0; i < req->n_prompts; i++) tokens += req->prompt_lens[i];
    cJSON *r = cJSON_CreateObject();
    if (req->ollama) {
        cJSON_AddStringToObject(r, "model", s->model_name);
        cJSON *a = cJSON_AddArrayToObject(r, "embeddings");
        for (size_t i = 0; i < req->n_prompts; i++) cJSON_AddItemToArray(a, floats_json(req->embeddings + i * C, C));
        cJSON_AddNumberToObject(r, "prompt_eval_count", (double)tokens);
        return json_text(r);
    }
    cJSON_AddStringToObject(r, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(r, "data");
    for (size_t i = 0; i < req->n_prompts; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "object", "embedding");
        cJSON_AddNumberToObject(d, "index", (double)i);
        if (req->base64) {
            char *b = base64_floats(req->embeddings + i * C, C);
            cJSON_AddItemToObject(d, "embedding", b ? cJSON_CreateString(b) : NULL);
            free(b);
        } else {
            cJSON_AddItemToObject(d, "embedding", floats_json(req->embeddings + i * C, C));
        }
        cJSON_AddItemToArray(data, d);
    }
    cJSON_AddStringToObject(r, "model", s->model_name);
    cJSON *u = cJSON_AddObjectToObject(r, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)tokens);
    return json_text(r);
}

/*
 * ollama.c - Ollama's API (under /api/) as views of the same requests as the
 * OpenAI endpoints. A body of /api/generate or /api/chat becomes the OpenAI
 * body it means, which completion_request or chat_request reads with the
 * one settings table (src/front/settings.c): every range and message is
 * the table's, renamed to the Ollama field the client sent
 * ("options.temperature must be a number >= 0"). The answers are written
 * from the same finished ApiRequest, in Ollama's shapes: one JSON object,
 * or (Ollama's default) NDJSON lines, the last with "done": true.
 *
 *   /api/generate  the prompt continued as it is (the template
 *                  "{{ .Prompt }}", what Ollama's base-model files use): a
 *                  seeded answer is `gpt -p PROMPT -s SEED`'s
 *   /api/chat      the messages under the server's --chat-template, as
 *                  /v1/chat/completions renders them (the same bits)
 *   options        num_predict (-1, -2: to the end of the context),
 *                  temperature, top_k, top_p, min_p, seed (-1: drawn), stop,
 *                  repeat_penalty, presence_penalty, frequency_penalty
 *                  mapped; num_ctx up to the model's context accepted (the
 *                  context is the model's), above it refused; the options
 *                  of how a model runs (num_gpu, num_thread, ...) accepted
 *                  and ignored; mirostat, typical_p, tfs_z at their "off"
 *                  values only; any other refused by name
 *
 * The rest (what is refused, and why) is docs/serving.md's. Nothing here
 * touches the engine or a socket.
 */
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"
#include "base/clock.h"
#include "base/utf8.h"

// Ollama's field for each OpenAI field a translated body may be refused
// for: the message and the param name what the client sent.
static const struct {
    const char *openai, *ollama;
} FIELD_NAMES[] = {
    {"max_tokens", "options.num_predict"},
    {"temperature", "options.temperature"},
    {"top_k", "options.top_k"},
    {"top_p", "options.top_p"},
    {"min_p", "options.min_p"},
    {"seed", "options.seed"},
    {"stop", "options.stop"},
    {"repeat_penalty", "options.repeat_penalty"},
    {"presence_penalty", "options.presence_penalty"},
    {"frequency_penalty", "options.frequency_penalty"},
    {"json_schema", "format"},
    {"response_format", "format"},
};

// The options of how a model runs, not of what it writes: accepted, ignored.
static const char *const IGNORED_OPTIONS[] = {"num_batch", "num_gpu",   "main_gpu", "num_thread", "numa",
                                              "use_mmap",  "use_mlock", "low_vram", "f16_kv",     "vocab_only"};

// Samplers gpt has not: accepted at the value that turns them off.
static const struct {
    const char *name;
    double off;
} OFF_OPTIONS[] = {{"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}};

static const char OLLAMA_PREFIX[] = "/api/";

OllamaRoute ollama_route(const char *path) {
    static const struct {
        const char *path;
        OllamaRoute route;
    } routes[] = {
        {"/api/version", OLLAMA_VERSION}, {"/api/tags", OLLAMA_TAGS},         {"/api/ps", OLLAMA_PS},
        {"/api/show", OLLAMA_SHOW},       {"/api/generate", OLLAMA_GENERATE}, {"/api/chat", OLLAMA_CHAT},
        {"/api/embed", OLLAMA_EMBED},
        {"/api/pull", OLLAMA_MANAGE},     {"/api/push", OLLAMA_MANAGE},       {"/api/create", OLLAMA_MANAGE},
        {"/api/delete", OLLAMA_MANAGE},   {"/api/copy", OLLAMA_MANAGE},
    };
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
        if (!strcmp(path, routes[i].path)) return routes[i].route;
    // /api/blobs/DIGEST: a model's layers, pushed before /api/create
    if (!strncmp(path, "/api/blobs/", 11)) return OLLAMA_MANAGE;
    return OLLAMA_NONE;
}

int ollama_path(const char *path) { return !strncmp(path, OLLAMA_PREFIX, sizeof OLLAMA_PREFIX - 1); }

char *ollama_error_json(const char *msg) {
    cJSON *r = cJSON_CreateObject();
    char *m = utf8_replace_invalid((const unsigned char *)msg, strlen(msg), NULL);
    cJSON_AddStringToObject(r, "error", m ? m : "out of memory");
    free(m);
    return json_text(r);
}

// ----------------------------------------------------------------------------
// the model, as Ollama describes one

// Now as RFC 3339 with nanoseconds, as Go writes a time: "2026-12-07T20:52:39.123456789Z".
static void now_rfc3339(char *buf, size_t cap) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", gmtime_r(&ts.tv_sec, &tm));
    snprintf(buf, cap, "%s.%09ldZ", day, ts.tv_nsec);
}

static void time_rfc3339(time_t t, char *buf, size_t cap) {
    struct tm tm;
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
}

// "124.44M", "1.56B": the parameters as Ollama's parameter_size writes them.
static void parameter_size(size_t n, char *buf, size_t cap) {
    if (n >= 1000000000) snprintf(buf, cap, "%.2fB", (double)n / 1e9);
    else snprintf(buf, cap, "%.2fM", (double)n / 1e6);
}

// "details": the file's format, GPT-2's family, the size, the weights' dtype.
static cJSON *details_json(Server *s) {
    const Model *m = &s->session.model;
    char size[32], dtypes[128];
    parameter_size(m->n_params, size, sizeof size);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", m->source_kind);
    cJSON_AddStringToObject(d, "family", "gpt2");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "families"), cJSON_CreateString("gpt2"));
    cJSON_AddStringToObject(d, "parameter_size", size);
    cJSON_AddStringToObject(d, "quantization_level", model_matrix_dtypes(m, dtypes, sizeof dtypes));
    return d;
}

// The file's digest as Ollama names a model's: "sha256:" and 64 hex digits.
// gpt hashes no file (a 6 GB one would take seconds at each start): the
// digest is FNV-1a over the name, the size and the mtime, four times with
// four seeds, which tells two files apart as a list needs.
static void model_digest(Server *s, char *buf, size_t cap) {
    char key[4200];
    int n = snprintf(key, sizeof key, "%s:%zu:%ld", s->session.model_path, s->model_bytes, (long)s->model_mtime);
    size_t at = (size_t)snprintf(buf, cap, "sha256:");
    for (uint64_t seed = 0; seed < 4; seed++) {
        uint64_t h = 1469598103934665603ull ^ seed;
        for (int i = 0; i < n; i++) h = (h ^ (unsigned char)key[i]) * 1099511628211ull;
        at += (size_t)snprintf(buf + at, at < cap ? cap - at : 0, "%016llx", (unsigned long long)h);
    }
}

// The served model as a line of /api/tags (ps 0) or /api/ps (ps 1).
static cJSON *model_entry(Server *s, int ps) {
    char when[40], digest[80];
    model_digest(s, digest, sizeof digest);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", s->model_name);
    cJSON_AddStringToObject(m, "model", s->model_name);
    if (!ps) {
        time_rfc3339(s->model_mtime, when, sizeof when);
        cJSON_AddStringToObject(m, "modified_at", when);
    }
    cJSON_AddNumberToObject(m, "size", (double)(ps ? s->session.model.weight_bytes : s->model_bytes));
    cJSON_AddStringToObject(m, "digest", digest);
    cJSON_AddItemToObject(m, "details", details_json(s));
    if (ps) {
        cJSON_AddStringToObject(m, "expires_at", "9999-12-31T23:59:59Z");  // never: gpt serve holds its one model
        cJSON_AddNumberToObject(m, "size_vram", 0);
        cJSON_AddNumberToObject(m, "context_length", s->session.model.config.n_ctx);
    }
    return m;
}

char *ollama_version_response(void) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "version", GPT_VERSION);
    return json_text(r);
}

char *ollama_models_response(Server *s, int ps) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "models"), model_entry(s, ps));
    return json_text(r);
}

// A model name as a client sends it: the served one, with or without Ollama's ":latest".
static int names_model(Server *s, const char *name) {
    size_t n = strlen(s->model_name);
    return !strncmp(name, s->model_name, n) && (!name[n] || !strcmp(name + n, ":latest"));
}

char *ollama_show_response(Server *s, const char *body, size_t len, int *status, char **msg) {
    *status = 400;
    cJSON *o = cJSON_ParseWithLength(body, len);
    const cJSON *name = NULL;
    for (const cJSON *f = cJSON_IsObject(o) ? o->child : NULL; f; f = f->next) {
        if (!strcmp(f->string, "model") || !strcmp(f->string, "name")) name = f;  // "name": the old field
        else if (strcmp(f->string, "verbose") && strcmp(f->string, "system") && strcmp(f->string, "template") &&
                 strcmp(f->string, "options")) {
            char m[200];
            snprintf(m, sizeof m, "unknown field \"%.40s\" (/api/show takes model)", f->string);
            *msg = strdup(m);
            cJSON_Delete(o);
            return NULL;
        }
    }
    char m[400];
    if (!cJSON_IsObject(o) || !cJSON_IsString(name)) {
        *msg = strdup("the body must be a JSON object with \"model\": the model's name");
        cJSON_Delete(o);
        return NULL;
    }
    if (!names_model(s, name->valuestring)) {
        snprintf(m, sizeof m, "model '%.200s' not found (this server has '%.100s')", name->valuestring, s->model_name);
        *msg = strdup(m);
        *status = 404;
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_Delete(o);
    const GPT2Config *c = &s->session.model.config;
    cJSON *r = cJSON_CreateObject();
    char modelfile[4400];  // the path: at most 4095 bytes (Session.model_path)
    snprintf(modelfile, sizeof modelfile,
             "# gpt serves %s; it runs no Modelfile\nFROM %s\nTEMPLATE \"{{ .Prompt }}\"\n", s->model_name,
             s->session.model_path);
    cJSON_AddStringToObject(r, "modelfile", modelfile);
    cJSON_AddStringToObject(r, "parameters", "");
    cJSON_AddStringToObject(r, "template", "{{ .Prompt }}");
    cJSON_AddItemToObject(r, "details", details_json(s));
    cJSON *info = cJSON_AddObjectToObject(r, "model_info");
    cJSON_AddStringToObject(info, "general.architecture", "gpt2");
    cJSON_AddNumberToObject(info, "general.parameter_count", (double)s->session.model.n_params);
    cJSON_AddNumberToObject(info, "gpt2.context_length", c->n_ctx);
    cJSON_AddNumberToObject(info, "gpt2.embedding_length", c->n_embd);
    cJSON_AddNumberToObject(info, "gpt2.block_count", c->n_layer);
    cJSON_AddNumberToObject(info, "gpt2.attention.head_count", c->n_head);
    cJSON_AddNumberToObject(info, "gpt2.vocab_size", c->vocab_size);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "capabilities"), cJSON_CreateString("completion"));
    char when[40];
    time_rfc3339(s->model_mtime, when, sizeof when);
    cJSON_AddStringToObject(r, "modified_at", when);
    *status = 200;
    return json_text(r);
}

// ----------------------------------------------------------------------------
// a body, as the OpenAI body it means

// The option f (of "options") into the OpenAI body o. 0, or the status.
static int read_option(Server *s, const cJSON *f, cJSON *o, char **msg, char *param) {
    const char *k = f->string;
    const int n_ctx = s->session.model.config.n_ctx;
    char field[80];
    snprintf(field, sizeof field, "options.%.60s", k);
    // past a double (1e400): cJSON would write it as null, which reads as not given
    if (cJSON_IsNumber(f) && !isfinite(f->valuedouble))
        return api_fail(400, msg, param, field, "%s: out of range (beyond a double)", field);
    if (!strcmp(k, "num_ctx")) {
        double v = cJSON_IsNumber(f) ? f->valuedouble : NAN;
        if (!(v >= 1) || v != floor(v)) return api_fail(400, msg, param, field, "options.num_ctx must be a positive integer");
        if (v > n_ctx)
            return api_fail(400, msg, param, field, "options.num_ctx %.0f: more than the model's context (%d tokens)", v,
                          n_ctx);
        return 0;
    }
    // seed -1: Ollama's "random", as no seed
    if (!strcmp(k, "seed") && cJSON_IsNumber(f) && f->valuedouble == -1) return 0;
    if (!strcmp(k, "num_predict")) {
        // -1 (Ollama's default) and -2 (fill the context): to the end of the context, as a chat's default
        if (cJSON_IsNumber(f) && (f->valuedouble == -1 || f->valuedouble == -2)) return 0;
        cJSON_AddItemToObject(o, "max_tokens", cJSON_Duplicate(f, 1));
        return 0;
    }
    for (size_t i = 0; i < sizeof FIELD_NAMES / sizeof *FIELD_NAMES; i++)
        if (!strncmp(FIELD_NAMES[i].ollama, "options.", 8) && !strcmp(FIELD_NAMES[i].ollama + 8, k)) {
            cJSON_AddItemToObject(o, FIELD_NAMES[i].openai, cJSON_Duplicate(f, 1));
            return 0;
        }
    for (size_t i = 0; i < sizeof IGNORED_OPTIONS / sizeof *IGNORED_OPTIONS; i++)
        if (!strcmp(k, IGNORED_OPTIONS[i])) return 0;
    for (size_t i = 0; i < sizeof OFF_OPTIONS / sizeof *OFF_OPTIONS; i++)
        if (!strcmp(k, OFF_OPTIONS[i].name)) {
            if (cJSON_IsNumber(f) && f->valuedouble == OFF_OPTIONS[i].off) return 0;
            return api_fail(400, msg, param, field, "%s: gpt has no such sampler (only %g, off, is taken)", field,
                          OFF_OPTIONS[i].off);
        }
    return api_fail(400, msg, param, field,
                  "%s is not an option gpt takes (it maps num_predict, temperature, top_k, top_p, "
                  "min_p, seed, stop, repeat_penalty, presence_penalty, frequency_penalty, num_ctx)",
                  field);
}

// "format": "json" (any JSON object), a JSON Schema (an object), or "" (none).
static int read_format(const cJSON *f, cJSON *o, char **msg, char *param) {
    if (cJSON_IsString(f) && !*f->valuestring) return 0;
    if (cJSON_IsString(f) && !strcmp(f->valuestring, "json")) {
        cJSON *rf = cJSON_AddObjectToObject(o, "response_format");
        cJSON_AddStringToObject(rf, "type", "json_object");
        return 0;
    }
    if (cJSON_IsObject(f)) {
        cJSON_AddItemToObject(o, "json_schema", cJSON_Duplicate(f, 1));
        return 0;
    }
    return api_fail(400, msg, param, "format", "format must be \"json\" or a JSON Schema (an object)");
}

// A field that must be empty (absent, null, "", [] or false) for gpt to answer
// as Ollama would: 1 if f is empty.
static int empty(const cJSON *f) {
    return cJSON_IsNull(f) || cJSON_IsFalse(f) || (cJSON_IsString(f) && !*f->valuestring) ||
           (cJSON_IsArray(f) && !f->child);
}

// Ollama's messages as OpenAI's: images, tool_calls and thinking dropped
// when empty (clients send them so), refused when not.
static int read_messages(const cJSON *f, cJSON *o, char **msg, char *param) {
    cJSON *m = cJSON_Duplicate(f, 1);
    cJSON_AddItemToObject(o, "messages", m);
    size_t i = 0;
    for (cJSON *e = cJSON_IsArray(m) ? m->child : NULL; e; e = e->next, i++) {
        static const char *const extra[] = {"images", "tool_calls", "thinking", "tool_name"};
        for (size_t x = 0; x < sizeof extra / sizeof *extra && cJSON_IsObject(e); x++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, extra[x]);
            if (!v) continue;
            if (!empty(v))
                return api_fail(400, msg, param, "messages",
                              "messages[%zu].%s: gpt takes text messages alone (GPT-2 reads "
                              "no images and calls no tools)",
                              i, extra[x]);
            cJSON_DeleteItemFromObjectCaseSensitive(e, extra[x]);
        }
    }
    return 0;
}

// The fields of Ollama's body b into the OpenAI body o. 0, or the status.
static int translate(Server *s, int chat, const cJSON *b, cJSON *o, int *stream, int *load_only, char **msg,
                     char *param) {
    int has_prompt = 0;
    *stream = 1;  // Ollama streams unless told not to
    for (const cJSON *f = b->child; f; f = f->next) {
        const char *k = f->string;
        int status = 0;
        if (!strcmp(k, "model")) {
            cJSON_AddItemToObject(o, "model", cJSON_Duplicate(f, 1));
        } else if (!strcmp(k, "stream")) {
            if (!cJSON_IsBool(f) && !cJSON_IsNull(f)) return api_fail(400, msg, param, k, "stream must be true or false");
            if (cJSON_IsBool(f)) *stream = cJSON_IsTrue(f);
        } else if (!strcmp(k, "keep_alive")) {
            // how long Ollama keeps a model loaded: gpt serve holds its one model till it stops
        } else if (!strcmp(k, "format")) {
            if (!cJSON_IsNull(f)) status = read_format(f, o, msg, param);
        } else if (!strcmp(k, "options")) {
            if (!cJSON_IsObject(f) && !cJSON_IsNull(f))
                return api_fail(400, msg, param, k, "options must be an object {\"temperature\": 0.8, ...}");
            for (const cJSON *e = cJSON_IsObject(f) ? f->child : NULL; e && !status; e = e->next) {
                if (cJSON_IsNull(e)) continue;
                status = read_option(s, e, o, msg, param);
            }
        } else if (!strcmp(k, "think")) {
            if (!empty(f)) return api_fail(400, msg, param, k, "think: GPT-2 is no thinking model (only false is taken)");
        } else if (chat && !strcmp(k, "messages")) {
            if (cJSON_IsArray(f) && !f->child) *load_only = 1;
            status = read_messages(f, o, msg, param);
        } else if (chat && !strcmp(k, "tools")) {
            if (!empty(f)) return api_fail(400, msg, param, k, "tools: gpt serve calls no tools (docs/serving.md)");
        } else if (!chat && !strcmp(k, "prompt")) {
            if (!cJSON_IsString(f)) return api_fail(400, msg, param, k, "prompt must be a string");
            if (!*f->valuestring) *load_only = 1;
            cJSON_AddItemToObject(o, "prompt", cJSON_Duplicate(f, 1));
            has_prompt = 1;
        } else if (!chat && !strcmp(k, "raw")) {
            // raw: the prompt as it is, which is what /api/generate always continues
            if (!cJSON_IsBool(f) && !cJSON_IsNull(f)) return api_fail(400, msg, param, k, "raw must be true or false");
        } else if (!chat && !strcmp(k, "system")) {
            if (!empty(f))
                return api_fail(400, msg, param, k,
                              "system: /api/generate continues the prompt as it is (its template is "
                              "{{ .Prompt }}); send the system message in /api/chat's messages, or in the prompt");
        } else if (!chat && !strcmp(k, "template")) {
            if (!empty(f) && !(cJSON_IsString(f) && !strcmp(f->valuestring, "{{ .Prompt }}")))
                return api_fail(400, msg, param, k,
                              "template: gpt runs no Go templates (/api/generate's is {{ .Prompt }}: "
                              "render the text into the prompt, and send \"raw\": true)");
        } else if (!chat && !strcmp(k, "suffix")) {
            if (!empty(f))
                return api_fail(400, msg, param, k,
                              "suffix is not supported: GPT-2 has no infilling (it continues a prompt, "
                              "it cannot fill in before a suffix)");
        } else if (!chat && !strcmp(k, "images")) {
            if (!empty(f)) return api_fail(400, msg, param, k, "images: GPT-2 reads text alone");
        } else if (!chat && !strcmp(k, "context")) {
            if (!empty(f))
                return api_fail(400, msg, param, k,
                              "context: gpt keeps no conversation of token ids (Ollama's context is "
                              "deprecated): send the whole text in the prompt, or use /api/chat");
        } else {
            return api_fail(400, msg, param, k, "unknown field \"%.40s\"", k);
        }
        if (status) return status;
    }
    if (!chat && !has_prompt) *load_only = 1;
    if (chat && !cJSON_GetObjectItemCaseSensitive(o, "messages"))
        return api_fail(400, msg, param, "messages", "no \"messages\" field");
    if (!cJSON_GetObjectItemCaseSensitive(
            o, "max_tokens")) {  // Ollama's default: to the end of the context (and the server's --max-tokens)
        size_t n_ctx = (size_t)s->session.model.config.n_ctx;
        cJSON_AddNumberToObject(o, "max_tokens", (double)(s->limits.max_tokens < n_ctx ? s->limits.max_tokens : n_ctx));
    }
    return 0;
}

// An error of the OpenAI reader, renamed to the Ollama field it came from.
static void rename_field(char **msg, char *param) {
    for (size_t i = 0; i < sizeof FIELD_NAMES / sizeof *FIELD_NAMES; i++) {
        if (strcmp(param, FIELD_NAMES[i].openai)) continue;
        size_t n = strlen(FIELD_NAMES[i].openai);
        if (*msg && !strncmp(*msg, FIELD_NAMES[i].openai, n)) {
            const char *rest = *msg + n;
            int predict = !strcmp(param, "max_tokens");
            size_t cap = strlen(FIELD_NAMES[i].ollama) + strlen(rest) + 64;
            char *m = malloc(cap);
            if (m) {
                snprintf(m, cap, "%s%s%s", FIELD_NAMES[i].ollama, rest,
                         predict ? " (or -1: to the end of the context)" : "");
                free(*msg);
                *msg = m;
            }
        }
        snprintf(param, PARAM_CAP, "%s", FIELD_NAMES[i].ollama);
        return;
    }
}

int ollama_request(Server *s, int chat, const char *body, size_t len, ApiRequest **out, int *stream, char **load,
                   char **msg, char *param) {
    *out = NULL;
    *load = NULL;
    *param = '\0';
    // the body's own faults (not JSON, NULs, text after it) as the OpenAI readers word them: a
    // string read here would end at a \u0000, and the body made of it would not say so
    const char *end = body;
    cJSON *b = nul_at(body, len, 1) < 0 ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
    while (b && end < body + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
    if (!cJSON_IsObject(b) || end < body + len) {
        cJSON_Delete(b);
        int ignored;
        return (chat ? chat_request : completion_request)(s, body, len, out, &ignored, msg, param);
    }
    cJSON *o = cJSON_CreateObject();
    int load_only = 0;
    int status = o ? translate(s, chat, b, o, stream, &load_only, msg, param) : 500;
    if (status == 500) *msg = strdup("out of memory");
    cJSON_Delete(b);
    if (!status && load_only) {
        // an empty prompt or conversation: Ollama's "load the model", answered at once
        cJSON *r = cJSON_CreateObject();
        char when[48];
        now_rfc3339(when, sizeof when);
        cJSON_AddStringToObject(r, "model", s->model_name);
        cJSON_AddStringToObject(r, "created_at", when);
        if (chat) {
            cJSON *m = cJSON_AddObjectToObject(r, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            cJSON_AddStringToObject(m, "content", "");
        } else {
            cJSON_AddStringToObject(r, "response", "");
        }
        cJSON_AddTrueToObject(r, "done");
        cJSON_AddStringToObject(r, "done_reason", "load");
        cJSON_Delete(o);
        if (!(*load = json_text(r))) return (*msg = strdup("out of memory")), 500;
        return 0;
    }
    char *text = status ? NULL : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (status) return status;
    if (!text) return (*msg = strdup("out of memory")), 500;
    int ignored;
    status = (chat ? chat_request : completion_request)(s, text, strlen(text), out, &ignored, msg, param);
    free(text);
    if (status) rename_field(msg, param);
    else (*out)->ollama = 1;
    return status;
}

// ----------------------------------------------------------------------------
// answers

static double nanoseconds(double seconds) { return seconds > 0 ? (double)(long long)(seconds * 1e9) : 0; }

// The head of every answer: the model, when, and the text (a chat's as its message).
static cJSON *answer_head(Server *s, const ApiRequest *req, const char *text, size_t n) {
    char when[48];
    now_rfc3339(when, sizeof when);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "model", answered_model(s, req));
    cJSON_AddStringToObject(r, "created_at", when);
    char *t = malloc(n + 1);
    if (t) {
        if (n) memcpy(t, text, n);
        t[n] = '\0';
    }
    if (req->chat) {
        cJSON *m = cJSON_AddObjectToObject(r, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        cJSON_AddStringToObject(m, "content", t ? t : "");
    } else {
        cJSON_AddStringToObject(r, "response", t ? t : "");
    }
    free(t);
    return r;
}

// The last object's fields: done, why, the counts and the durations in
// nanoseconds (the prompt's from the arrival to the first token, queueing
// included; the generation's from the first token to the last; load 0:
// the model is loaded when the server starts), and gpt's own: the seed and
// its stop reason (engine.h's: "eos", "stop", "length", "context", "grammar").
static void add_done(cJSON *r, const ApiRequest *req, const ApiChoice *c) {
    double now = now_seconds(), first = c->t_first > 0 ? c->t_first : now, last = c->t_last > 0 ? c->t_last : now;
    cJSON_AddTrueToObject(r, "done");
    cJSON_AddStringToObject(r, "done_reason", c->finish ? c->finish : "stop");
    cJSON_AddNumberToObject(r, "total_duration", nanoseconds(now - req->arrived));
    cJSON_AddNumberToObject(r, "load_duration", 0);
    cJSON_AddNumberToObject(r, "prompt_eval_count", (double)req->prompt_lens[0]);
    cJSON_AddNumberToObject(r, "prompt_eval_duration", nanoseconds(first - req->arrived));
    cJSON_AddNumberToObject(r, "eval_count", (double)c->n_tokens);
    cJSON_AddNumberToObject(r, "eval_duration", nanoseconds(last - first));
    cJSON_AddItemToObject(r, "seed", seed_json(req->seed));
    if (c->stop_reason) cJSON_AddStringToObject(r, "stop_reason", c->stop_reason);
}

char *ollama_response(Server *s, const ApiRequest *req) {
    const ApiChoice *c = &req->completions[0];
    cJSON *r = answer_head(s, req, c->text, c->text_len);
    add_done(r, req, c);
    return json_text(r);
}

char *ollama_chunk(Server *s, ApiRequest *req, size_t k, int *finished) {
    ApiChoice *c = &req->completions[k];
    *finished = c->sent_finish;
    if (c->sent_finish) return NULL;
    size_t new_text = c->text_len - c->sent_text;
    if (new_text) {
        cJSON *r = answer_head(s, req, c->text + c->sent_text, new_text);
        cJSON_AddFalseToObject(r, "done");
        c->sent_text = c->text_len;
        return json_text(r);
    }
    if (!c->finish) return NULL;
    c->sent_finish = *finished = 1;
    if (!strcmp(c->finish, "error")) return NULL;  // http.c sends the error's line
    cJSON *r = answer_head(s, req, "", 0);
    add_done(r, req, c);
    return json_text(r);
}

/*
 * api.c - the JSON of gpt serve's endpoints: request bodies read into Requests
 * with the command's rules (src/front/request.c reads the generation
 * fields with --batch --jsonl's rules and messages; sampler_params_validate
 * checks their ranges as -p does), and finished Requests written in OpenAI's
 * shapes. Nothing here touches the engine or a socket.
 *
 * A request with several prompts, or n > 1, has a choice for each prompt
 * and each of its n: choice p * n + i of prompt p. Its seed is the
 * request's "seed" (or one drawn below 2^53, as the command draws it) plus
 * its index, so that choice k is exactly `gpt -p PROMPT -s SEED+k`.
 * With best_of > n, best_of completions are computed for each prompt
 * (completion p * best_of + i has the seed SEED + p * best_of + i) and the
 * n of the highest mean log-probability per generated token are its
 * choices, best first, each with its own seed: `gpt -p PROMPT -s` that seed
 * repeats it.
 */
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/kvcache.h"
#include "serve.h"
#include "base/utf8.h"


// The most completions one request may have (prompts x n).
enum { MAX_CHOICES = 64, MAX_N = SETTINGS_N_MAX };

int api_fail(int status, char **msg, char *param, const char *p, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    *msg = strdup(buf);
    snprintf(param, PARAM_CAP, "%s", p ? p : "");  // p may be the body's, which is freed
    return status;
}

cJSON *api_body(const char *body, size_t len, int *status, char **msg, char *param) {
    long nul = nul_at(body, len, 1);
    if (nul >= 0) {
        *status = api_fail(400, msg, param, NULL,
                       "a NUL byte (or \\u0000) at byte %ld of the body: gpt takes none (-p could not repeat it)", nul);
        return NULL;
    }
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!o) {
        char why[256];
        json_parse_error(body, len, end, why, sizeof why);
        *status = api_fail(400, msg, param, NULL, "%s", why);
        return NULL;
    }
    while (end < body + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
    if (!cJSON_IsObject(o) || end < body + len) {
        *status = api_fail(400, msg, param, NULL, cJSON_IsObject(o) ? "text after the JSON object, at byte %ld"
                                                                : "the body must be a JSON object", (long)(end - body));
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

// A JSON integer in [lo, hi]: 0 or -1.
static int json_int(const cJSON *f, double lo, double hi, long *out) {
    if (!cJSON_IsNumber(f) || f->valuedouble != floor(f->valuedouble) || f->valuedouble < lo ||
        f->valuedouble > hi)
        return -1;
    *out = (long)f->valuedouble;
    return 0;
}

// Token ids from a JSON array (json_token_ids), or the 400 naming field.
static int json_ids(const cJSON *a, size_t vocab, int32_t **ids, size_t *n, char **msg, char *param,
                    const char *field) {
    char why[160];
    if (json_token_ids(a, vocab, field, ids, n, why, sizeof why) != 0)
        return strcmp(why, "out of memory") ? api_fail(400, msg, param, field, "%s", why)
                                             : api_fail(500, msg, param, NULL, "out of memory");
    return 0;
}

static int encode_locked(Server *s, const char *text, size_t len, int empty_is_eot, int32_t **ids, size_t *n,
                         GptError *err) {
    pthread_mutex_lock(&s->tok_lock);
    int rc = empty_is_eot ? prompt_tokens(s->session.tok, text, len, 0, ids, n, err)
                          : tokenizer_encode(s->session.tok, text, len, 0, ids, n, err);
    pthread_mutex_unlock(&s->tok_lock);
    return rc;
}

// The field a sampler_params_validate message is about: its first word.
static const char *sampling_param(const char *m) {
    static const char *const names[] = {"temperature", "top_k", "top_p", "min_p", "repeat_penalty",
                                        "presence_penalty", "frequency_penalty", "logit_bias"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strncmp(m, names[i], strlen(names[i]))) return names[i];
    return NULL;
}

// What a completion body says, as read by read_completion_fields.
typedef struct {
    GenSettings gs;            // the settings over the endpoint's defaults (settings.c)
    GenLimits limits;          // the server's --max-tokens, the model's vocabulary
    const cJSON *prompt;
    const cJSON *messages;     // a chat's
    int chat;                  // /v1/chat/completions: messages, its logprobs and max_completion_tokens
    int max_given;             // max_tokens or max_completion_tokens was given
    size_t best_of;            // completions computed per prompt (0: gs.n)
    int stream;
    int stream_options, include_usage;  // stream_options given (not null); its include_usage
    size_t top_logprobs;       // a chat's top_logprobs
    int top_given;
    int lora_given;            // "lora" was given: it, not "model", picks the adapter
    const ServeAdapter *adapter;  // the adapter picked, or NULL: the base
    const cJSON *tools, *tool_choice, *parallel_tool_calls;  // a chat's (tools.c)
    // the functions an answer calls (tools_read's), or NULL
    char **tool_names;
    size_t n_tools;
} CompletionBody;

// stream_options: {"include_usage": true or false}, or null. 0, or the status.
static int read_stream_options(const cJSON *f, CompletionBody *b, char **msg, char *param) {
    if (!cJSON_IsObject(f))
        return api_fail(400, msg, param, "stream_options", "stream_options must be an object ({\"include_usage\": true})");
    for (const cJSON *o = f->child; o; o = o->next) {
        if (!strcmp(o->string, "include_usage") && (cJSON_IsBool(o) || cJSON_IsNull(o))) {
            b->include_usage = cJSON_IsTrue(o);
        } else if (!strcmp(o->string, "include_usage")) {
            return api_fail(400, msg, param, "stream_options", "stream_options.include_usage must be true or false");
        } else {
            return api_fail(400, msg, param, "stream_options", "stream_options: unknown field \"%.40s\" (gpt knows "
                        "include_usage)", o->string);
        }
    }
    b->stream_options = 1;
    return 0;
}

// A field of a chat body that the completions body has not, or has in
// another shape: messages; max_completion_tokens (max_tokens' new name);
// logprobs, a boolean here, with top_logprobs (0 to 20) the alternatives.
// (response_format is request.c's, as on /v1/completions.) 1 when it was
// one (*status set on a bad value), 0 when it is not.
static int read_chat_field(CompletionBody *b, const cJSON *f, const char *body, size_t len, size_t member,
                           int *status, char **msg, char *param) {
    const char *k = f->string;
    char why[512];
    if (!strcmp(k, "messages")) {
        b->messages = f;
    } else if (!strcmp(k, "tools")) {
        b->tools = f;
    } else if (!strcmp(k, "tool_choice")) {
        b->tool_choice = f;
    } else if (!strcmp(k, "parallel_tool_calls")) {
        b->parallel_tool_calls = f;
    } else if (!strcmp(k, "max_completion_tokens")) {
        cJSON alias = *f;  // max_tokens' rules, under this name
        alias.string = (char *)"max_tokens";
        if (setting_from_json(&b->gs, &b->limits, &alias, body, len, member, why, sizeof why) < 0)
            *status = api_fail(400, msg, param, k, "max_completion_tokens%s", why + strlen("max_tokens"));
        b->max_given = 1;
    } else if (!strcmp(k, "logprobs")) {
        if (!cJSON_IsBool(f)) *status = api_fail(400, msg, param, k, "logprobs must be true or false");
        b->gs.params.logprobs = cJSON_IsTrue(f);
    } else if (!strcmp(k, "top_logprobs")) {
        long top;
        if (json_int(f, 0, LOGPROBS_TOP_MAX, &top) != 0)
            *status = api_fail(400, msg, param, k, "top_logprobs must be an integer in [0, %d]", LOGPROBS_TOP_MAX);
        else b->top_logprobs = (size_t)top, b->top_given = 1;
    } else {
        return 0;
    }
    return 1;
}

// A chat's tools (tools.c): the answer's grammar a call of one of the
// functions, which excludes the other constraints. 0, or the status.
static int read_tools(CompletionBody *b, char **msg, char *param) {
    char why[512], *schema;
    const char *at;
    if (tools_read(b->tools, b->tool_choice, b->parallel_tool_calls, &schema, &b->tool_names, &b->n_tools, why,
                   sizeof why, &at) != 0)
        return api_fail(400, msg, param, at, "%s", why);
    if (!schema) return 0;
    if (*b->gs.constraint_by) {
        free(schema);
        return api_fail(400, msg, param, "tools", "tools (an answer that calls one) and %s exclude each other",
                    b->gs.constraint_by);
    }
    cJSON *alias = cJSON_Parse(schema);  // the calls' schema, under json_schema's rules
    free(schema);
    if (!alias) return api_fail(500, msg, param, NULL, "out of memory");
    alias->string = (char *)"json_schema";
    int rc = setting_from_json(&b->gs, &b->limits, alias, "", 0, 0, why, sizeof why);
    alias->string = NULL;
    cJSON_Delete(alias);
    if (rc < 0) return api_fail(400, msg, param, "tools", "tools: %s", why + (strncmp(why, "json_schema: ", 13) ? 0 : 13));
    snprintf(b->gs.constraint_by, sizeof b->gs.constraint_by, "tools");
    return 0;
}

// The fields of body's object o into b, each checked. 0, or the status of
// the first error with *msg and param set.
// "model" or "user" (strings; a model that names an adapter is that
// adapter, any other name the base) or "lora" (an adapter's name, "" the
// base; it wins over model). 0, or the status.
static int read_adapter_field(Server *s, const cJSON *f, CompletionBody *b, char **msg, char *param) {
    const char *k = f->string;
    if (strcmp(k, "lora") != 0) {
        if (!cJSON_IsString(f)) return api_fail(400, msg, param, k, "%s must be a string", k);
        const ServeAdapter *a = !strcmp(k, "model") ? serve_adapter(s, f->valuestring) : NULL;
        if (a && !b->lora_given) b->gs.params.lora = &a->w, b->adapter = a;
        return 0;
    }
    if (!cJSON_IsString(f)) return api_fail(400, msg, param, k, "lora must be a string: an adapter's name");
    const ServeAdapter *a = serve_adapter(s, f->valuestring);
    if (!a && *f->valuestring)
        return api_fail(400, msg, param, k, "lora \"%.60s\": no adapter of that name (gpt serve --lora NAME=PATH)",
                        f->valuestring);
    b->gs.params.lora = a ? &a->w : NULL;
    b->adapter = a;
    b->lora_given = 1;
    return 0;
}

static int read_completion_fields(Server *s, const cJSON *o, const char *body, size_t len, CompletionBody *b,
                                  char **msg, char *param) {
    const GPT2Config *cfg = &s->session.model.config;
    int status = 0;
    char why[512];
    size_t member = 0;
    for (const cJSON *f = o->child; f && !status; f = f->next, member++) {
        const char *k = f->string;
        if (cJSON_IsNull(f)) continue;  // null: as if absent (clients send it for what they leave unset)
        if (b->chat) {
            int chat_known = read_chat_field(b, f, body, len, member, &status, msg, param);
            if (chat_known) continue;
        }
        if (b->chat && (!strcmp(k, "echo"))) {
            status = api_fail(400, msg, param, k, "%s is a field of /v1/completions, not of /v1/chat/completions", k);
            continue;
        }
        int known = setting_from_json(&b->gs, &b->limits, f, body, len, member, why, sizeof why);
        if (known > 0 && !strcmp(k, "max_tokens")) b->max_given = 1;
        if (known < 0) status = api_fail(400, msg, param, k, "%s", why);
        if (known) continue;
        if (!strcmp(k, "prompt") && !b->chat) {
            b->prompt = f;
        } else if (!strcmp(k, "model") || !strcmp(k, "user") || !strcmp(k, "lora")) {
            status = read_adapter_field(s, f, b, msg, param);
        } else if (b->chat && (!strcmp(k, "best_of") || !strcmp(k, "suffix"))) {
            status = api_fail(400, msg, param, k, "%s is a field of /v1/completions, not of /v1/chat/completions", k);
        } else if (!strcmp(k, "best_of")) {
            long best_of;
            if (json_int(f, 1, MAX_N, &best_of) != 0)
                status = api_fail(400, msg, param, k, "best_of must be an integer in [1, %d]", MAX_N);
            else b->best_of = (size_t)best_of;
        } else if (!strcmp(k, "stream_options")) {
            status = read_stream_options(f, b, msg, param);
        } else if (!strcmp(k, "suffix")) {
            // "" says what absent says; anything else asks for infilling
            if (!cJSON_IsString(f) || *f->valuestring)
                status = api_fail(400, msg, param, k, "suffix is not supported: GPT-2 has no infilling (it continues a "
                                                  "prompt, it cannot fill in before a suffix)");
        } else if (!strcmp(k, "stream")) {
            if (!cJSON_IsBool(f)) status = api_fail(400, msg, param, k, "%s must be true or false", k);
            b->stream = cJSON_IsTrue(f);
        } else {
            status = api_fail(400, msg, param, k, "unknown field \"%.40s\"", k);
        }
    }
    if (status) return status;
    if (b->chat && !b->messages) return api_fail(400, msg, param, "messages", "no \"messages\" field");
    if (!b->chat && !b->prompt) return api_fail(400, msg, param, "prompt", "no \"prompt\" field");
    if (b->stream_options && !b->stream)
        return api_fail(400, msg, param, "stream_options", "stream_options is only allowed with \"stream\": true");
    if (!b->best_of) b->best_of = b->gs.n;
    if (b->best_of < b->gs.n)
        return api_fail(400, msg, param, "best_of", "best_of %zu is less than n %zu: best_of must be >= n", b->best_of,
                    b->gs.n);
    if (b->best_of > b->gs.n && b->stream)
        return api_fail(400, msg, param, "best_of", "best_of %zu (more than n %zu) cannot be streamed: the best are known "
                    "at the end", b->best_of, b->gs.n);
    if (settings_check_keep(&b->gs, b->gs.given[SETTING_KEEP], 1, (size_t)cfg->n_ctx, why, sizeof why) != 0)
        return api_fail(400, msg, param, "keep", "%s", why);
    if (b->chat && (status = read_tools(b, msg, param))) return status;
    if (b->chat) {
        if (b->top_given && !b->gs.params.logprobs)
            return api_fail(400, msg, param, "top_logprobs", "top_logprobs needs \"logprobs\": true");
        b->gs.params.top_logprobs = b->top_logprobs;
        // OpenAI's default: as long as the context allows (and --max-tokens)
        if (!b->max_given)
            b->gs.params.max_new = s->limits.max_tokens < (size_t)cfg->n_ctx ? s->limits.max_tokens : (size_t)cfg->n_ctx;
    }
    // echo: the prompt's tokens get their log-probabilities too, from its
    // second (the first has none)
    if (b->gs.echo && b->gs.params.logprobs) b->gs.params.logprobs_from = 1;
    GptError err = {{0}};
    if (sampler_params_validate(&b->gs.params.sampling, &err) != 0)
        return api_fail(400, msg, param, sampling_param(err.msg), "%s", err.msg);
    return 0;
}

// Whether a prompt of n_ids tokens fits the context, and with max_tokens
// the KV pool (one that alone needs more than the pool could never run).
// 0, or the status.
static int check_fits(Server *s, size_t n_ids, const CompletionBody *b, char **msg, char *param) {
    const GPT2Config *cfg = &s->session.model.config;
    GptError err = {{0}};
    if (check_prompt_length(cfg, n_ids, &err) != 0)
        return api_fail(400, msg, param, b->chat ? "messages" : "prompt", "%s", err.msg);
    size_t blocks = (sequence_positions(cfg, n_ids, b->gs.params.max_new) + KV_BLOCK - 1) / KV_BLOCK;
    if (blocks > s->kv_blocks)
        return api_fail(400, msg, param, "max_tokens",
                    "the prompt and max_tokens need %zu KV blocks; the server's --kv-budget holds %zu", blocks,
                    s->kv_blocks);
    return 0;
}

// Prompt p of req from `it`, a string or an array of token ids: its tokens,
// its text for echo, and the checks that it fits. 0, or the status.
static int read_prompt(Server *s, ApiRequest *req, size_t p, const cJSON *it, int is_string, const CompletionBody *b,
                       char **msg, char *param) {
    const GPT2Config *cfg = &s->session.model.config;
    int32_t **ids = &req->prompt_ids[p];
    size_t *n_ids = &req->prompt_lens[p];
    GptError err = {{0}};
    int status;
    if (is_string) {
        const char *text = it->valuestring;
        if (encode_locked(s, text, strlen(text), 1, ids, n_ids, &err) != 0)
            return api_fail(500, msg, param, NULL, "%s", err.msg);
        // a JSON string is UTF-8: bytes of the body that are not show as U+FFFD
        if (b->gs.echo && !(req->echo[p] = utf8_replace_invalid((const unsigned char *)text, strlen(text), NULL)))
            return api_fail(500, msg, param, NULL, "out of memory");
    } else {
        if ((status = json_ids(it, (size_t)cfg->vocab_size, ids, n_ids, msg, param, "prompt"))) return status;
        if (*n_ids == 0) return api_fail(400, msg, param, "prompt", "prompt has an empty array of token ids");
        if (b->gs.echo) {
            char *bytes;
            size_t n_bytes;
            if (tokenizer_decode(s->session.tok, *ids, *n_ids, &bytes, &n_bytes, &err) != 0)
                return api_fail(400, msg, param, "prompt", "%s", err.msg);
            req->echo[p] = utf8_replace_invalid((unsigned char *)bytes, n_bytes, NULL);
            free(bytes);
        }
    }
    return check_fits(s, *n_ids, b, msg, param);
}

// The request of b's prompts: a string, strings, token ids, or arrays of
// token ids. 0 with *out, or the status.
static int read_prompts(Server *s, const CompletionBody *b, ApiRequest **out, char **msg, char *param) {
    const cJSON *prompt = b->prompt;
    const cJSON *first = cJSON_IsArray(prompt) ? prompt->child : NULL;
    int one_string = cJSON_IsString(prompt), one_ids = first && cJSON_IsNumber(first);
    size_t n_prompts = one_string || one_ids ? 1 : (size_t)cJSON_GetArraySize(prompt);
    if (!one_string && !cJSON_IsArray(prompt))
        return api_fail(400, msg, param, "prompt", "prompt must be a string, an array of strings, an array of token ids "
                                               "or an array of arrays of token ids");
    if (n_prompts == 0) return api_fail(400, msg, param, "prompt", "prompt is an empty array");
    if (n_prompts * (size_t)b->best_of > MAX_CHOICES)
        return api_fail(400, msg, param, b->best_of > b->gs.n ? "best_of" : "n", "%zu prompts x %s %zu is more than %d "
                    "completions", n_prompts, b->best_of > b->gs.n ? "best_of" : "n", b->best_of, MAX_CHOICES);
    ApiRequest *req = api_request_new(n_prompts);
    if (!req) return api_fail(500, msg, param, NULL, "out of memory");
    const cJSON *it = one_string || one_ids ? prompt : first;
    int status = 0;
    for (size_t p = 0; p < n_prompts && !status; p++, it = it->next) {
        int is_string = cJSON_IsString(it) && (one_string || cJSON_IsString(first));
        int is_ids = cJSON_IsArray(it) && (one_ids || cJSON_IsArray(first));
        if (is_string || is_ids) status = read_prompt(s, req, p, it, is_string, b, msg, param);
        else
            status = api_fail(400, msg, param, "prompt", "prompt %zu: an array of prompts holds strings alone, or "
                                                     "arrays of token ids alone", p);
    }
    if (status) {
        api_request_free(req);
        return status;
    }
    *out = req;
    return 0;
}

// req's completions: best_of per prompt, seeds seed, seed + 1, ...; the stop
// strings copied into req (the completions' params point at them). 0 or -1.
static int make_completions(ApiRequest *req, CompletionBody *b) {
    if (b->gs.params.n_stops) {
        req->stop_strings = calloc(b->gs.params.n_stops, sizeof *req->stop_strings);
        for (size_t i = 0; req->stop_strings && i < b->gs.params.n_stops; i++, req->n_stops++)
            if (!(req->stop_strings[i] = strdup(b->gs.stops[i]))) break;
        if (req->n_stops != b->gs.params.n_stops) return -1;
        b->gs.params.stops = (const char *const *)req->stop_strings;
    }
    req->seed = b->gs.seed_given ? b->gs.params.sampling.seed : draw_seed();
    req->adapter = b->adapter ? b->adapter->name : NULL;
    req->n = b->gs.n;
    req->best_of = (size_t)b->best_of;
    req->show_logprobs = b->gs.params.logprobs;
    req->include_usage = b->include_usage;
    req->n_completions = req->n_prompts * req->best_of;
    req->completions = calloc(req->n_completions, sizeof *req->completions);
    if (!req->completions) return -1;
    for (size_t k = 0; k < req->n_completions; k++) {
        ApiChoice *c = &req->completions[k];
        c->prompt = k / req->best_of;
        c->ids = req->prompt_ids[c->prompt];
        c->n_ids = req->prompt_lens[c->prompt];
        c->params = b->gs.params;
        c->params.sampling.seed = req->seed + k;
        // the ranking's log-probabilities (computing them changes no token)
        if (req->best_of > req->n) c->params.logprobs = 1;
    }
    return 0;
}

// The request of a chat body b: its messages under the server's template,
// one prompt; the template's stops after the request's. 0 with *out, or
// the status.
static int read_conversation(Server *s, CompletionBody *b, ApiRequest **out, char **msg, char *param) {
    const ChatTemplate *t = &s->chat_template;
    ChatConversation conv;
    char why[512];
    if (chat_conversation_from_json(b->messages, &conv, why, sizeof why) != 0)
        return api_fail(400, msg, param, "messages", "%s", why);
    if (b->gs.params.n_stops + t->n_stops > MAX_STOPS) {
        chat_conversation_free(&conv);
        return api_fail(400, msg, param, "stop", "stop: %zu strings and the chat template's %zu are more than %d",
                    b->gs.params.n_stops, t->n_stops, MAX_STOPS);
    }
    for (size_t i = 0; i < t->n_stops; i++) b->gs.stops[b->gs.params.n_stops++] = t->stops[i];
    b->gs.params.stops = b->gs.stops;
    ApiRequest *req = api_request_new(1);
    GptError err = {{0}};
    int status = 0;
    if (!req) status = api_fail(500, msg, param, NULL, "out of memory");
    if (!status) {
        pthread_mutex_lock(&s->tok_lock);
        int rc = chat_tokens(s->session.tok, t, conv.m, conv.n, 1, &req->prompt_ids[0], &req->prompt_lens[0], &err);
        pthread_mutex_unlock(&s->tok_lock);
        if (rc != 0) status = api_fail(500, msg, param, NULL, "%s", err.msg);
    }
    chat_conversation_free(&conv);
    if (!status) status = check_fits(s, req->prompt_lens[0], b, msg, param);
    if (status) {
        api_request_free(req);
        return status;
    }
    req->chat = 1;
    *out = req;
    return 0;
}

// The request of a completions body (chat 0: its prompts) or a chat body
// (chat 1: its messages under the server's template), read by the same
// field table; a completion's max_tokens defaults to 16 as OpenAI's, a
// chat's to the end of the context. 0 with *out and *stream, or the status.
static int body_request(Server *s, int chat, const char *body, size_t len, ApiRequest **out, int *stream, char **msg,
                        char *param) {
    *out = NULL;
    *stream = 0;
    *param = '\0';
    int status = 400;
    cJSON *o = api_body(body, len, &status, msg, param);
    if (!o) return status;
    CompletionBody b = {.chat = chat,
                        .limits = {.max_tokens_limit = s->limits.max_tokens,
                                   .vocab_size = (size_t)s->session.model.config.vocab_size}};
    settings_defaults(&b.gs);
    b.gs.params.max_new = chat ? 0 : 16;
    b.gs.params.grammar_vocab = s->grammar_vocab;
    ApiRequest *req = NULL;
    status = read_completion_fields(s, o, body, len, &b, msg, param);
    if (!status) status = chat ? read_conversation(s, &b, &req, msg, param) : read_prompts(s, &b, &req, msg, param);
    if (!status && make_completions(req, &b) != 0) status = api_fail(500, msg, param, NULL, "out of memory");
    if (!status) {
        req->grammar = b.gs.grammar;  // the completions' params point at it
        req->grammar_field = !b.gs.grammar ? NULL : b.n_tools ? "tools" : setting_by_key(b.gs.constraint_by)->key;
        req->tool_names = b.tool_names, req->n_tools = b.n_tools;
        b.tool_names = NULL, b.n_tools = 0;
        b.gs.grammar = NULL;
        *out = req;
        *stream = b.stream;
        req = NULL;
    }
    api_request_free(req);
    grammar_free(b.gs.grammar);
    for (size_t i = 0; i < b.n_tools; i++) free(b.tool_names[i]);
    free(b.tool_names);
    cJSON_Delete(b.gs.stop_json);
    cJSON_Delete(o);
    return status;
}

int completion_request(Server *s, const char *body, size_t len, ApiRequest **out, int *stream, char **msg,
                       char *param) {
    return body_request(s, 0, body, len, out, stream, msg, param);
}

int chat_request(Server *s, const char *body, size_t len, ApiRequest **out, int *stream, char **msg, char *param) {
    return body_request(s, 1, body, len, out, stream, msg, param);
}

char *apply_template_response(Server *s, const char *body, size_t len, int *status, char **msg, char *param) {
    *param = '\0';
    *status = 400;
    cJSON *o = api_body(body, len, status, msg, param);
    if (!o) return NULL;
    const cJSON *messages = NULL;
    *status = 0;
    for (const cJSON *f = o->child; f && !*status; f = f->next) {
        if (!strcmp(f->string, "messages")) messages = f;
        else if (strcmp(f->string, "model") != 0)
            *status = api_fail(400, msg, param, f->string, "unknown field \"%.40s\" (apply-template takes messages)",
                           f->string);
    }
    ChatConversation conv = {0};
    char why[512], *text = NULL, *out = NULL;
    size_t n;
    GptError err = {{0}};
    if (!*status && !messages) *status = api_fail(400, msg, param, "messages", "no \"messages\" field");
    if (!*status && chat_conversation_from_json(messages, &conv, why, sizeof why) != 0)
        *status = api_fail(400, msg, param, "messages", "%s", why);
    if (!*status && chat_render(&s->chat_template, conv.m, conv.n, 1, &text, &n, &err) != 0)
        *status = api_fail(500, msg, param, NULL, "%s", err.msg);
    if (!*status) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "prompt", text);
        out = json_text(r);
        *status = 200;
    }
    free(text);
    chat_conversation_free(&conv);
    cJSON_Delete(o);
    return out;
}

// prepend_eos: <|endoftext|> before the text's tokens, the context of its
// first token (gpt --score --prepend-eos). 0, or the status.
static int prepend_eot(Server *s, ApiRequest *req, char **msg, char *param) {
    size_t n = req->prompt_lens[0];
    int32_t eot = tokenizer_eot_id(s->session.tok), *with = eot >= 0 ? malloc((n + 1) * sizeof *with) : NULL;
    if (!with)
        return eot < 0 ? api_fail(400, msg, param, "prepend_eos", "the tokenizer has no <|endoftext|>")
                       : api_fail(500, msg, param, NULL, "out of memory");
    with[0] = eot;
    memcpy(with + 1, req->prompt_ids[0], n * sizeof *with);
    free(req->prompt_ids[0]);
    req->prompt_ids[0] = with;
    req->prompt_lens[0] = n + 1;
    return 0;
}

int score_request(Server *s, const char *body, size_t len, ApiRequest **out, char **msg, char *param) {
    *out = NULL;
    *param = '\0';
    int status = 400;
    cJSON *o = api_body(body, len, &status, msg, param);
    if (!o) return status;
    const GPT2Config *cfg = &s->session.model.config;
    const cJSON *prompt = NULL;
    long stride = 0;
    int prepend_eos = 0;
    GptError err = {{0}};
    ApiRequest *req = NULL;
    status = 0;
    for (const cJSON *f = o->child; f && !status; f = f->next) {
        const char *k = f->string;
        if (cJSON_IsNull(f)) continue;
        if (!strcmp(k, "prompt")) prompt = f;
        else if (!strcmp(k, "model")) {
            if (!cJSON_IsString(f)) status = api_fail(400, msg, param, k, "model must be a string");
            else if (serve_adapter(s, f->valuestring))
                status = api_fail(400, msg, param, k, "model \"%.60s\" is an adapter applied at run time; /v1/score "
                              "scores with the base (gpt --score --lora PATH scores with one merged)", f->valuestring);
        } else if (!strcmp(k, "stride")) {
            if (json_int(f, 1, cfg->n_ctx, &stride) != 0)
                status = api_fail(400, msg, param, k, "stride must be an integer in [1, %d] (the context)", cfg->n_ctx);
        } else if (!strcmp(k, "prepend_eos")) {
            if (!cJSON_IsBool(f)) status = api_fail(400, msg, param, k, "prepend_eos must be true or false");
            prepend_eos = cJSON_IsTrue(f);
        } else status = api_fail(400, msg, param, k, "unknown field \"%.40s\"", k);
    }
    if (status) goto done;
    if (!cJSON_IsString(prompt) && !cJSON_IsArray(prompt)) {
        status = api_fail(400, msg, param, "prompt", "prompt must be a string or an array of token ids");
        goto done;
    }
    if (!(req = api_request_new(1))) {
        status = api_fail(500, msg, param, NULL, "out of memory");
        goto done;
    }
    req->kind = REQUEST_SCORE;
    req->stride = (size_t)stride;
    if (cJSON_IsString(prompt)) {
        if (encode_locked(s, prompt->valuestring, strlen(prompt->valuestring), 0, &req->prompt_ids[0],
                          &req->prompt_lens[0], &err) != 0) {
            status = api_fail(500, msg, param, NULL, "%s", err.msg);
            goto done;
        }
    } else if ((status = json_ids(prompt, (size_t)cfg->vocab_size, &req->prompt_ids[0], &req->prompt_lens[0], msg, param,
                                  "prompt"))) {
        goto done;
    }
    size_t n = req->prompt_lens[0];
    if (n == 0) {
        status = api_fail(400, msg, param, "prompt", "the text is empty");
        goto done;
    }
    if (prepend_eos && (status = prepend_eot(s, req, msg, param))) goto done;
    n = req->prompt_lens[0];
    if (n > (size_t)cfg->n_ctx && !stride) {
        status = api_fail(400, msg, param, "prompt", "the text is %zu tokens; the model's context holds %d (\"stride\" "
                                                 "scores longer texts in windows)", n, cfg->n_ctx);
        goto done;
    }
    *out = req;
    req = NULL;
done:
    api_request_free(req);
    cJSON_Delete(o);
    return status;
}

// ----------------------------------------------------------------------------
// responses

char *json_text(cJSON *root) {
    char *s = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}

// "usage": the prompts' tokens and those of every completion computed (best_of's left out ones too).
static void add_usage(cJSON *r, const ApiRequest *req) {
    size_t prompt_tokens = 0, completion_tokens = 0;
    for (size_t p = 0; p < req->n_prompts; p++) prompt_tokens += req->prompt_lens[p];
    for (size_t k = 0; k < req->n_completions; k++) completion_tokens += req->completions[k].n_tokens;
    cJSON *u = cJSON_AddObjectToObject(r, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(prompt_tokens + completion_tokens));
}

const char *answered_model(const Server *s, const ApiRequest *req) {
    return req->adapter ? req->adapter : s->model_name;
}

// chunk: the head of a stream's event (a chat's object differs).
static cJSON *response_head(Server *s, const ApiRequest *req, const char *id, long created, int chunk) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddStringToObject(r, "object", !req->chat ? "text_completion" : chunk ? "chat.completion.chunk"
                                                                             : "chat.completion");
    cJSON_AddNumberToObject(r, "created", (double)created);
    cJSON_AddStringToObject(r, "model", answered_model(s, req));
    cJSON_AddItemToObject(r, "seed", seed_json(req->seed));
    return r;
}

// The log-probabilities of choice c's tokens from..to (positions in its
// prompt and generated ids together), as `gpt --json --logprobs N` writes
// them (with --echo from 0, else from the prompt's end); NULL without
// "logprobs". Tokens whose log-probability has not come yet are left out.
// Under Server.lock.
static cJSON *choice_logprobs(Server *s, const ApiRequest *req, const ApiChoice *c, size_t from, size_t to) {
    if (!req->show_logprobs) return NULL;
    size_t start = req->echo[c->prompt] ? 0 : c->n_ids;  // text_offset counts from here
    if (to > c->lp_from + c->n_lp) to = c->lp_from + c->n_lp;
    if (to < from) to = from;
    int32_t *ids = malloc((to - start + 1) * sizeof *ids);
    if (!ids) return NULL;
    for (size_t t = start; t < to; t++) ids[t - start] = t < c->n_ids ? c->ids[t] : c->tokens[t - c->n_ids];
    // ids[from - start] has lp[i - first] from i = first on
    size_t first = from < c->lp_from ? c->lp_from - from : 0;
    const TokenLogprob *lp = to > from && from > c->lp_from ? c->lp + (from - c->lp_from) : c->lp;
    cJSON *o = logprobs_json(s->session.tok, ids + (from - start), to - from, lp, first,
                             tokens_bytes(s->session.tok, ids, from - start));
    free(ids);
    return o;
}

// A choice's finish_reason: NULL while it runs, and for one that failed.
// "error" is none of OpenAI's finish reasons: a failed request is a 500
// with the error object, and a stream that fails after its 200 went out
// sends the error object as an event instead (http.c), as OpenAI and
// llama.cpp do; the failed choice's text so far is sent without a finish.
static const char *choice_finish(const ApiChoice *c) {
    return c->finish && strcmp(c->finish, "error") ? c->finish : NULL;
}

// The fields a completion's and a chat's choice share, added to c in this
// order: logprobs (NULL: null), finish_reason (null while done is NULL or
// has not finished), the seed of completion k (the request's + k), the ids
// of tokens; once done has finished, gpt's own "stop_reason" (which tells
// "context" from "length", "eos" from "stop" and "grammar") and
// "seq_tokens", the positions its KV cache held, as `gpt --json`'s
// stats.seq_tokens.
static void add_choice_fields(cJSON *c, const ApiRequest *req, size_t k, const int32_t *tokens, size_t n_tokens,
                              cJSON *logprobs, const ApiChoice *done) {
    const char *finish = done ? choice_finish(done) : NULL;
    if (logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs);
    else cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToObject(c, "seed", seed_json(req->seed + k));
    cJSON_AddItemToObject(c, "tokens", ids_json(tokens, n_tokens));
    if (finish) {
        cJSON_AddStringToObject(c, "stop_reason", done->stop_reason ? done->stop_reason : finish);
        if (done->stop_reason) cJSON_AddNumberToObject(c, "seq_tokens", (double)done->seq_tokens);
    }
}

// Choice `index`, completion `done` (its seed: the request's + its index);
// logprobs NULL: null.
static cJSON *choice_json(const ApiRequest *req, size_t index, const ApiChoice *done, const char *text,
                          const int32_t *tokens, size_t n_tokens, cJSON *logprobs) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "text", text);
    cJSON_AddNumberToObject(c, "index", (double)index);
    add_choice_fields(c, req, (size_t)(done - req->completions), tokens, n_tokens, logprobs, done);
    return c;
}

// The chat log-probabilities of choice c's generated tokens from..to
// (counted from its first generated token; those whose numbers have not
// come yet are left out); NULL without "logprobs". Under Server.lock.
static cJSON *chat_choice_logprobs(Server *s, const ApiRequest *req, const ApiChoice *c, size_t from, size_t to) {
    if (!req->show_logprobs) return NULL;
    // lp[i] is position lp_from + i of the prompt and generated ids
    size_t first = c->n_ids + from >= c->lp_from ? c->n_ids + from - c->lp_from : 0;
    size_t last = c->n_ids + to >= c->lp_from ? c->n_ids + to - c->lp_from : 0;
    if (last > c->n_lp) last = c->n_lp;
    if (first > last) first = last;
    return chat_logprobs_json(s->session.tok, last > first ? c->lp + first : NULL, last - first);
}

// A chat choice: "message" (whole) or "delta" (a stream's piece: role is
// NULL after the first) with text; logprobs NULL: null; done NULL but in the
// last piece. Beside OpenAI's fields, gpt's as in a completion's choice: its
// seed, the ids of its tokens (in a stream, those since the last event),
// and once finished its stop_reason and seq_tokens.
static cJSON *chat_choice_json(const ApiRequest *req, size_t index, size_t k, const char *key, const char *role,
                               const char *text, const int32_t *tokens, size_t n_tokens, cJSON *logprobs,
                               const ApiChoice *done) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", (double)index);
    cJSON *m = cJSON_AddObjectToObject(c, key);
    if (role) cJSON_AddStringToObject(m, "role", role);
    if (text) cJSON_AddStringToObject(m, "content", text);
    add_choice_fields(c, req, k, tokens, n_tokens, logprobs, done);
    return c;
}

char *copy_text(const char *p, size_t n) {
    char *t = malloc(n + 1);
    if (!t) return NULL;
    if (n) memcpy(t, p, n);
    t[n] = '\0';
    return t;
}

// A tool call's answer (tools.c): content null and the call in tool_calls
// (none while its function's name is not whole), finish_reason
// "tool_calls" once the call is whole; one cut short keeps the choice's
// finish_reason, its arguments as far as they came.
static void add_tool_call(cJSON *choice, const char *key, const ApiRequest *req, const ApiChoice *c, const char *id,
                          size_t k) {
    const char *name;
    size_t end;
    int whole;
    size_t head = tool_call_args(req, c, &name, &end, &whole);
    cJSON *m = cJSON_GetObjectItemCaseSensitive(choice, key);
    cJSON_AddNullToObject(m, "content");
    if (head)
        cJSON_AddItemToArray(cJSON_AddArrayToObject(m, "tool_calls"),
                             tool_call_json(id, k, name, c->text + head, end - head, 0));
    if (whole && choice_finish(c)) cJSON_ReplaceItemInObject(choice, "finish_reason", cJSON_CreateString("tool_calls"));
}

static char *chat_response(Server *s, const ApiRequest *req, const char *id, long created) {
    cJSON *r = response_head(s, req, id, created, 0);
    cJSON *choices = cJSON_AddArrayToObject(r, "choices");
    for (size_t k = 0; k < req->n_completions; k++) {
        const ApiChoice *c = &req->completions[k];
        char *text = copy_text(c->text, c->text_len);
        if (!text) {
            cJSON_Delete(r);
            return NULL;
        }
        cJSON *lp = chat_choice_logprobs(s, req, c, 0, c->n_tokens);
        cJSON *choice = chat_choice_json(req, k, k, "message", "assistant", req->n_tools ? NULL : text, c->tokens,
                                         c->n_tokens, lp, c);
        cJSON_AddItemToArray(choices, choice);
        free(text);
        if (req->n_tools) add_tool_call(choice, "message", req, c, id, k);
    }
    add_usage(r, req);
    return json_text(r);
}

// A tool call's stream (tools.c) for choice k: the role first, then the
// call's id, type and name once the name is whole, with the arguments so
// far, then each new piece of them (the call's closing brace held back),
// then the finish reason ("tool_calls" for a whole call) with an empty
// delta. sent_text: 0 until the name went, then the end of the arguments
// sent. NULL when there is nothing new.
static char *tool_chunk(Server *s, ApiRequest *req, size_t k, const char *id, long created, int *finished) {
    ApiChoice *c = &req->completions[k];
    const char *name;
    size_t end;
    int whole, first = !c->sent_echo;
    size_t head = tool_call_args(req, c, &name, &end, &whole);
    size_t from = c->sent_text ? c->sent_text : head;
    int news = head && (!c->sent_text || end > from);
    if (!first && !news && !c->finish) return NULL;
    int finish_now = c->finish && !news && !first;
    if (finish_now && !choice_finish(c)) {  // a failed choice: no finish_reason
        c->sent_finish = *finished = 1;
        return NULL;
    }
    cJSON *r = response_head(s, req, id, created, 1);
    cJSON *choices = cJSON_AddArrayToObject(r, "choices");
    cJSON *choice = chat_choice_json(req, k, k, "delta", first ? "assistant" : NULL, NULL,
                                     c->tokens ? c->tokens + c->sent_tokens : NULL,
                                     finish_now ? 0 : c->n_tokens - c->sent_tokens, NULL, finish_now ? c : NULL);
    cJSON_AddItemToArray(choices, choice);
    cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
    if (first) cJSON_AddNullToObject(delta, "content");
    if (news)
        cJSON_AddItemToArray(cJSON_AddArrayToObject(delta, "tool_calls"),
                             tool_call_json(id, k, c->sent_text ? NULL : name, c->text + from, end - from, 1));
    if (finish_now && whole) cJSON_ReplaceItemInObject(choice, "finish_reason", cJSON_CreateString("tool_calls"));
    if (req->include_usage) cJSON_AddNullToObject(r, "usage");
    c->sent_echo = 1;
    if (news) c->sent_text = end;
    if (!finish_now) c->sent_tokens = c->n_tokens;
    if (finish_now) c->sent_finish = *finished = 1;
    return json_text(r);
}

// A chat stream's next event for choice k: the role first (with the text
// so far), then each new piece of text (whole UTF-8 characters), then the
// finish reason with an empty delta; NULL when there is nothing new.
static char *chat_chunk(Server *s, ApiRequest *req, size_t k, const char *id, long created, int *finished) {
    ApiChoice *c = &req->completions[k];
    if (req->n_tools) return tool_chunk(s, req, k, id, created, finished);
    size_t new_text = c->text_len - c->sent_text;
    int first = !c->sent_echo;  // sent_echo: the role has been sent
    if (!first && !new_text && !c->finish) return NULL;
    // the finish alone once the text is out: an empty delta, as OpenAI's
    int finish_now = c->finish && !new_text && !first;
    if (finish_now && !choice_finish(c)) {  // a failed choice: no finish_reason
        c->sent_finish = *finished = 1;
        return NULL;
    }
    char *text = finish_now ? NULL : copy_text(new_text ? c->text + c->sent_text : "", new_text);
    if (!finish_now && !text) return NULL;
    cJSON *r = response_head(s, req, id, created, 1);
    cJSON *choices = cJSON_AddArrayToObject(r, "choices");
    cJSON *lp = finish_now ? NULL : chat_choice_logprobs(s, req, c, c->sent_tokens, c->n_tokens);
    cJSON_AddItemToArray(choices, chat_choice_json(req, k, k, "delta", first ? "assistant" : NULL, text,
                                                   c->tokens ? c->tokens + c->sent_tokens : NULL,
                                                   finish_now ? 0 : c->n_tokens - c->sent_tokens,
                                                   lp, finish_now ? c : NULL));
    if (req->include_usage) cJSON_AddNullToObject(r, "usage");
    free(text);
    c->sent_echo = 1;
    c->sent_text = c->text_len;
    if (!finish_now) c->sent_tokens = c->n_tokens;
    if (finish_now) c->sent_finish = *finished = 1;
    return json_text(r);
}

// The mean log-probability per generated token of completion c, best_of's
// measure; -infinity for one with no tokens (it ranks last).
static double mean_logprob(const ApiChoice *c) {
    double sum = 0.0;
    size_t n = 0;
    for (size_t i = 0; i < c->n_lp; i++)
        if (c->lp_from + i >= c->n_ids) sum += c->lp[i].logprob, n++;
    return n ? sum / (double)n : -INFINITY;
}

// The completions answered, in order: with best_of > n, the n best of each
// prompt's best_of (the highest mean log-probability first, equal ones in
// seed order); else every one. picked has req->n_prompts * req->n.
static void pick_choices(const ApiRequest *req, size_t *picked) {
    for (size_t p = 0; p < req->n_prompts; p++) {
        size_t *out = picked + p * req->n;
        double best[MAX_N];
        size_t order[MAX_N];
        for (size_t i = 0; i < req->best_of; i++) {
            size_t k = p * req->best_of + i, at = i;
            double m = req->best_of > req->n ? mean_logprob(&req->completions[k]) : 0.0;
            // insertion: after every one not worse (NaN ranks below all)
            while (at > 0 && (m > best[at - 1] || (isnan(best[at - 1]) && !isnan(m)))) {
                best[at] = best[at - 1];
                order[at] = order[at - 1];
                at--;
            }
            best[at] = m;
            order[at] = k;
        }
        for (size_t i = 0; i < req->n; i++) out[i] = order[i];
    }
}

char *completion_response(Server *s, const ApiRequest *req, const char *id, long created) {
    if (req->chat) return chat_response(s, req, id, created);
    cJSON *r = response_head(s, req, id, created, 0);
    cJSON *completions = cJSON_AddArrayToObject(r, "choices");
    size_t picked[MAX_CHOICES];
    pick_choices(req, picked);
    for (size_t i = 0; i < req->n_prompts * req->n; i++) {
        size_t k = picked[i];
        const ApiChoice *c = &req->completions[k];
        const char *echo = req->echo[c->prompt];
        size_t echo_len = echo ? strlen(echo) : 0;
        char *text = malloc(echo_len + c->text_len + 1);
        if (!text) {
            cJSON_Delete(r);
            return NULL;
        }
        if (echo_len) memcpy(text, echo, echo_len);
        if (c->text_len) memcpy(text + echo_len, c->text, c->text_len);
        text[echo_len + c->text_len] = '\0';
        cJSON *lp = choice_logprobs(s, req, c, echo ? 0 : c->n_ids, c->n_ids + c->n_tokens);
        cJSON_AddItemToArray(completions, choice_json(req, i, c, text, c->tokens, c->n_tokens, lp));
        free(text);
    }
    add_usage(r, req);
    return json_text(r);
}

char *usage_chunk(Server *s, const ApiRequest *req, const char *id, long created) {
    cJSON *r = response_head(s, req, id, created, 1);
    cJSON_AddArrayToObject(r, "choices");
    add_usage(r, req);
    return json_text(r);
}

char *completion_chunk(Server *s, ApiRequest *req, size_t k, const char *id, long created, int *finished) {
    ApiChoice *c = &req->completions[k];
    *finished = c->sent_finish;
    if (c->sent_finish) return NULL;
    if (req->chat) return chat_chunk(s, req, k, id, created, finished);
    const char *echo = c->sent_echo ? NULL : req->echo[c->prompt];
    size_t new_text = c->text_len - c->sent_text, echo_len = echo ? strlen(echo) : 0;
    // a piece of text (whole UTF-8 characters: the engine's stream holds a
    // partial one back), and the tokens since the last piece; or the end.
    // The echoed prompt's log-probabilities come with its first token.
    if (!new_text && !echo_len && !c->finish) return NULL;
    if (echo && c->params.logprobs && !c->n_tokens && !c->finish) return NULL;
    if (!new_text && !echo_len && !choice_finish(c)) {  // a failed choice: no finish_reason
        c->sent_finish = *finished = 1;
        return NULL;
    }
    char *text = malloc(echo_len + new_text + 1);
    if (!text) return NULL;
    if (echo_len) memcpy(text, echo, echo_len);
    if (new_text) memcpy(text + echo_len, c->text + c->sent_text, new_text);  // no text yet: c->text is NULL
    text[echo_len + new_text] = '\0';
    cJSON *r = response_head(s, req, id, created, 1);
    cJSON *completions = cJSON_AddArrayToObject(r, "choices");
    cJSON *lp = choice_logprobs(s, req, c, echo ? 0 : c->n_ids + c->sent_tokens, c->n_ids + c->n_tokens);
    cJSON_AddItemToArray(completions, choice_json(req, k, c, text, c->tokens + c->sent_tokens,
                                                  c->n_tokens - c->sent_tokens, lp));
    if (req->include_usage) cJSON_AddNullToObject(r, "usage");  // as OpenAI's: null but in the last
    free(text);
    c->sent_echo = 1;
    c->sent_text = c->text_len;
    c->sent_tokens = c->n_tokens;
    if (c->finish) c->sent_finish = *finished = 1;
    return json_text(r);
}

char *score_response(Server *s, const ApiRequest *req) {
    size_t n = req->prompt_lens[0];
    double sum = 0.0;
    for (size_t i = 0; i + 1 < n; i++) sum += req->logprobs[i];  // as gpt --score adds them
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "object", "score");
    cJSON_AddStringToObject(r, "model", s->model_name);
    cJSON_AddItemToObject(r, "tokens", ids_json(req->prompt_ids[0], n));
    cJSON *lp = cJSON_AddArrayToObject(r, "logprobs");  // lined up with tokens: the first's is null
    cJSON_AddItemToArray(lp, cJSON_CreateNull());
    for (size_t i = 0; i + 1 < n; i++) cJSON_AddItemToArray(lp, exact_json(req->logprobs[i]));
    cJSON_AddItemToObject(r, "sum", exact_json(sum));
    if (n > 1 && isfinite(sum)) cJSON_AddItemToObject(r, "perplexity", exact_json(exp(-sum / (double)(n - 1))));
    else cJSON_AddNullToObject(r, "perplexity");
    cJSON_AddNumberToObject(r, "windows", (double)req->windows);
    return json_text(r);
}

// Two shapes: llama.cpp's {"content", "special"} -> {"tokens"}, and vLLM's
// {"prompt", "add_special_tokens", "model"} -> {"tokens", "count",
// "max_model_len"}. GPT-2's tokenizer adds no special tokens, so
// add_special_tokens changes nothing; "<|endoftext|>" in the text is the
// special token only with llama.cpp's "special": true.
char *tokenize_response(Server *s, const char *body, size_t len, int *status, char **msg, char *param) {
    *param = '\0';
    *status = 400;
    cJSON *o = api_body(body, len, status, msg, param);
    if (!o) return NULL;
    const cJSON *content = NULL, *prompt = NULL;
    int special = 0;
    *status = 0;
    for (const cJSON *f = o->child; f && !*status; f = f->next) {
        if (!strcmp(f->string, "content")) content = f;
        else if (!strcmp(f->string, "prompt")) prompt = f;
        else if (!strcmp(f->string, "special") && cJSON_IsBool(f)) special = cJSON_IsTrue(f);
        else if (!strcmp(f->string, "add_special_tokens") && cJSON_IsBool(f)) continue;
        else if (!strcmp(f->string, "model") && cJSON_IsString(f)) continue;
        else if (!strcmp(f->string, "special") || !strcmp(f->string, "add_special_tokens"))
            *status = api_fail(400, msg, param, f->string, "%s must be true or false", f->string);
        else if (!strcmp(f->string, "model"))
            *status = api_fail(400, msg, param, f->string, "model must be a string");
        else *status = api_fail(400, msg, param, f->string, "unknown field \"%.40s\"", f->string);
    }
    if (!*status && content && prompt)
        *status = api_fail(400, msg, param, "prompt", "content (llama.cpp's) and prompt (vLLM's): send one");
    const cJSON *text = prompt ? prompt : content;
    if (!*status && !cJSON_IsString(text))
        *status = api_fail(400, msg, param, prompt ? "prompt" : "content", "%s must be a string (the text to tokenize)",
                       prompt ? "prompt" : "content");
    char *out = NULL;
    if (!*status) {
        int32_t *ids = NULL;
        size_t n = 0;
        GptError err = {{0}};
        pthread_mutex_lock(&s->tok_lock);
        int rc = tokenizer_encode(s->session.tok, text->valuestring, strlen(text->valuestring), special, &ids, &n,
                                  &err);
        pthread_mutex_unlock(&s->tok_lock);
        if (rc != 0) *status = api_fail(500, msg, param, NULL, "%s", err.msg);
        else {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddItemToObject(r, "tokens", ids_json(ids, n));
            if (prompt) {
                cJSON_AddNumberToObject(r, "count", (double)n);
                cJSON_AddNumberToObject(r, "max_model_len", s->session.model.config.n_ctx);
            }
            out = json_text(r);
            *status = 200;
        }
        free(ids);
    }
    cJSON_Delete(o);
    return out;
}

// GPT-2's tokenizer as vLLM's GET /tokenizer_info describes one (the
// fields of its tokenizer_config.json): what lm-evaluation-harness's remote
// tokenizer reads. No chat_template: gpt runs no Jinja (docs/chat.md).
char *tokenizer_info_response(Server *s) {
    const int32_t eot = tokenizer_eot_id(s->session.tok);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "tokenizer_class", "GPT2Tokenizer");
    if (eot >= 0) {
        // GPT-2's one special token is its bos, eos and unk
        cJSON_AddStringToObject(r, "bos_token", "<|endoftext|>");
        cJSON_AddStringToObject(r, "eos_token", "<|endoftext|>");
        cJSON_AddStringToObject(r, "unk_token", "<|endoftext|>");
    } else {
        cJSON_AddNullToObject(r, "bos_token");
        cJSON_AddNullToObject(r, "eos_token");
        cJSON_AddNullToObject(r, "unk_token");
    }
    cJSON_AddNullToObject(r, "pad_token");
    cJSON_AddFalseToObject(r, "add_bos_token");
    cJSON_AddFalseToObject(r, "add_prefix_space");
    cJSON_AddNumberToObject(r, "model_max_length", s->session.model.config.n_ctx);
    cJSON_AddNumberToObject(r, "vocab_size", tokenizer_vocab_size(s->session.tok));
    return json_text(r);
}

char *detokenize_response(Server *s, const char *body, size_t len, int *status, char **msg,
                          char *param) {
    *param = '\0';
    *status = 400;
    cJSON *o = api_body(body, len, status, msg, param);
    if (!o) return NULL;
    const cJSON *tokens = NULL;
    *status = 0;
    for (const cJSON *f = o->child; f && !*status; f = f->next) {
        if (!strcmp(f->string, "tokens")) tokens = f;
        else if (!strcmp(f->string, "model") && cJSON_IsString(f)) continue;
        else *status = api_fail(400, msg, param, f->string, "unknown field \"%.40s\"", f->string);
    }
    if (!*status && !cJSON_IsArray(tokens))
        *status = api_fail(400, msg, param, "tokens", "tokens must be an array of token ids");
    char *out = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (!*status && !(*status = json_ids(tokens, tokenizer_vocab_size(s->session.tok), &ids, &n, msg, param,
                                         "tokens"))) {
        char *bytes = NULL;
        size_t n_bytes;
        GptError err = {{0}};
        if (tokenizer_decode(s->session.tok, ids, n, &bytes, &n_bytes, &err) != 0) {
            *status = api_fail(400, msg, param, "tokens", "%s", err.msg);
        } else {
            // a JSON string is UTF-8: bytes that are not show as U+FFFD
            char *text = utf8_replace_invalid((unsigned char *)bytes, n_bytes, NULL);
            cJSON *r = cJSON_CreateObject();
            // llama.cpp's answer is "content", vLLM's "prompt": both, the same text
            cJSON_AddStringToObject(r, "content", text ? text : "");
            cJSON_AddStringToObject(r, "prompt", text ? text : "");
            out = json_text(r);
            free(text);
            *status = 200;
        }
        free(bytes);
    }
    free(ids);
    cJSON_Delete(o);
    return out;
}

const ServeAdapter *serve_adapter(const Server *s, const char *name) {
    for (size_t i = 0; i < s->n_adapters; i++)
        if (!strcmp(s->adapters[i].name, name)) return &s->adapters[i];
    return NULL;
}

// The served model, or an adapter of it (its "parent"), as OpenAI's model object.
static cJSON *model_json(Server *s, const char *id) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->started);
    cJSON_AddStringToObject(m, "owned_by", "gpt");
    if (id != s->model_name) cJSON_AddStringToObject(m, "parent", s->model_name);
    return m;
}

char *models_response(Server *s) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(r, "data");
    cJSON_AddItemToArray(data, model_json(s, s->model_name));
    for (size_t i = 0; i < s->n_adapters; i++) cJSON_AddItemToArray(data, model_json(s, s->adapters[i].name));
    return json_text(r);
}

char *model_response(Server *s, const char *id, int *status) {
    const ServeAdapter *a = serve_adapter(s, id);
    if (a || !strcmp(id, s->model_name)) {
        *status = 200;
        return json_text(model_json(s, a ? a->name : s->model_name));
    }
    *status = 404;
    char msg[400];
    snprintf(msg, sizeof msg, "The model '%.200s' does not exist (this server has '%.100s')", id, s->model_name);
    return error_json(404, msg, "model");
}

// A copy of text in valid UTF-8 (a field's name may not be: a message
// that names it must still be JSON any reader takes); NULL: "".
static char *valid_utf8(const char *text) {
    return text ? utf8_replace_invalid((const unsigned char *)text, strlen(text), NULL) : NULL;
}

char *error_json(int status, const char *msg, const char *param) {
    const char *type = status == 401 ? "authentication_error" : status >= 500 ? "server_error"
                                                                              : "invalid_request_error";
    const char *code = status == 401   ? "invalid_api_key"
                       : status == 404 && param && !strcmp(param, "model") ? "model_not_found"
                       : status == 404 ? "not_found"
                       : status == 405 ? "method_not_allowed"
                       : status == 413 ? "request_too_large"
                       : status == 503 ? "overloaded"
                                       : NULL;
    char *message = valid_utf8(msg), *field = param && *param ? valid_utf8(param) : NULL;
    cJSON *r = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(r, "error");
    cJSON_AddStringToObject(e, "message", message ? message : "");
    cJSON_AddStringToObject(e, "type", type);
    if (field) cJSON_AddStringToObject(e, "param", field);
    else cJSON_AddNullToObject(e, "param");
    free(message);
    free(field);
    if (code) cJSON_AddStringToObject(e, "code", code);
    else cJSON_AddNullToObject(e, "code");
    return json_text(r);
}

// The process's resident memory (/proc/self/statm), 0 where it cannot be read.
static size_t resident_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    int ok = f && fscanf(f, "%lu %lu", &size, &resident) == 2;
    if (f) fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? (size_t)resident * (size_t)page : 0;
}

char *metrics_text(Server *s) {
    size_t cap = 16384, len = 0;
    char *t = malloc(cap);
    if (!t) return NULL;
#define PUT(...) (len += (size_t)snprintf(t + len, len < cap ? cap - len : 0, __VA_ARGS__))
    size_t rss = resident_bytes();  // a file read: before the lock
    pthread_mutex_lock(&s->lock);
    const Metrics *m = &s->metrics;
    PUT("# HELP gpt_requests_total HTTP requests answered, by status.\n# TYPE gpt_requests_total counter\n");
    for (int i = 0; i < N_STATUS && m->status[i]; i++)
        PUT("gpt_requests_total{status=\"%d\"} %llu\n", m->status[i], (unsigned long long)m->requests[i]);
    PUT("# HELP gpt_prompt_tokens_total Prompt tokens of the requests accepted.\n"
        "# TYPE gpt_prompt_tokens_total counter\ngpt_prompt_tokens_total %llu\n",
        (unsigned long long)m->prompt_tokens);
    PUT("# HELP gpt_generated_tokens_total Tokens generated.\n# TYPE gpt_generated_tokens_total counter\n"
        "gpt_generated_tokens_total %llu\n", (unsigned long long)m->generated_tokens);
    PUT("# HELP gpt_generated_tokens_per_second Tokens generated per second of the engine's steps.\n"
        "# TYPE gpt_generated_tokens_per_second gauge\ngpt_generated_tokens_per_second %.1f\n",
        m->busy_seconds > 0 ? (double)m->generated_tokens / m->busy_seconds : 0.0);
    PUT("# HELP gpt_prefix_tokens_reused_total Prompt tokens shared from earlier prompts' KV blocks.\n"
        "# TYPE gpt_prefix_tokens_reused_total counter\ngpt_prefix_tokens_reused_total %llu\n",
        (unsigned long long)m->prefix_reused);
    PUT("# HELP gpt_requests_cancelled_total Requests whose client went away before the end.\n"
        "# TYPE gpt_requests_cancelled_total counter\ngpt_requests_cancelled_total %llu\n",
        (unsigned long long)m->cancelled);
    PUT("# HELP gpt_sequences_running Sequences in the engine's steps.\n# TYPE gpt_sequences_running gauge\n"
        "gpt_sequences_running %zu\n", m->running);
    PUT("# HELP gpt_sequences_queued Sequences waiting for a place or for KV blocks.\n"
        "# TYPE gpt_sequences_queued gauge\ngpt_sequences_queued %zu\n", m->queued);
    PUT("# HELP gpt_kv_blocks_used KV-cache blocks held by sequences.\n# TYPE gpt_kv_blocks_used gauge\n"
        "gpt_kv_blocks_used %zu\n", m->kv_blocks_used);
    PUT("# HELP gpt_kv_blocks KV-cache blocks of the budget (--kv-budget).\n# TYPE gpt_kv_blocks gauge\n"
        "gpt_kv_blocks %zu\n", s->kv_blocks);
    PUT("# HELP gpt_kv_bytes_per_token Bytes of KV cache one position takes (--kv-type).\n"
        "# TYPE gpt_kv_bytes_per_token gauge\ngpt_kv_bytes_per_token %zu\n",
        kvcache_bytes_per_token(&s->session.model.config, s->limits.kv_dtype));
    PUT("# HELP gpt_kv_blocks_touched KV-cache blocks ever used: the part of the budget that has taken memory.\n"
        "# TYPE gpt_kv_blocks_touched gauge\ngpt_kv_blocks_touched %zu\n", m->kv_blocks_touched);
    PUT("# HELP gpt_grammar_maskers Compiled grammars' mask caches the engine holds (a request's grammar, JSON "
        "schema or regex; the same one shares its cache with later requests).\n"
        "# TYPE gpt_grammar_maskers gauge\ngpt_grammar_maskers %zu\n", m->grammar.maskers);
    PUT("# HELP gpt_grammar_maskers_idle Of gpt_grammar_maskers, those no request uses now (at most 4 are kept).\n"
        "# TYPE gpt_grammar_maskers_idle gauge\ngpt_grammar_maskers_idle %zu\n", m->grammar.idle);
    PUT("# HELP gpt_grammar_cache_bytes Bytes of the grammar maskers' caches (at most 16 MiB each).\n"
        "# TYPE gpt_grammar_cache_bytes gauge\ngpt_grammar_cache_bytes %zu\n", m->grammar.cache_bytes);
    PUT("# HELP gpt_grammar_mask_walks Walks of the vocabulary computed for the maskers held, and those served "
        "from their caches.\n# TYPE gpt_grammar_mask_walks gauge\n"
        "gpt_grammar_mask_walks{from=\"computed\"} %llu\ngpt_grammar_mask_walks{from=\"cache\"} %llu\n",
        (unsigned long long)m->grammar.computed, (unsigned long long)m->grammar.cached);
    PUT("# HELP gpt_model_bytes Bytes of the model's weights as held in memory (mapped or converted).\n"
        "# TYPE gpt_model_bytes gauge\ngpt_model_bytes %zu\n", s->session.model.weight_bytes);
    PUT("# HELP gpt_engine_buffer_bytes Bytes of the engine's step buffers (activations, logit rows, sampler), "
        "sized by --parallel.\n# TYPE gpt_engine_buffer_bytes gauge\ngpt_engine_buffer_bytes %zu\n", s->engine_bytes);
    for (int h = 0; h < N_HISTOGRAMS; h++) {
        const Histogram *hist = &m->latency[h];
        const char *name = LATENCY_HISTOGRAMS[h].name;
        PUT("# HELP %s %s\n# TYPE %s histogram\n", name, LATENCY_HISTOGRAMS[h].help, name);
        uint64_t below = 0;
        for (int i = 0; i < N_BUCKETS; i++) {
            below += hist->counts[i];
            PUT("%s_bucket{le=\"%g\"} %llu\n", name, LATENCY_HISTOGRAMS[h].le[i], (unsigned long long)below);
        }
        PUT("%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)hist->count,
            name, hist->sum, name, (unsigned long long)hist->count);
    }
    if (rss)
        PUT("# HELP process_resident_memory_bytes Resident memory of the server process.\n"
            "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %zu\n", rss);
    pthread_mutex_unlock(&s->lock);
#undef PUT
    if (len >= cap) {  // cannot happen with 10 statuses and 4 histograms (about 9 KB); never a cut line
        free(t);
        return NULL;
    }
    return t;
}

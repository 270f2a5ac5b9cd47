/*
 * responses.c - OpenAI's Responses API (POST /v1/responses), stateless, as a
 * view of the chat endpoint. A body becomes the chat body it means, which
 * chat_request reads with the one settings table (src/front/settings.c):
 * every range and message is the table's, renamed to the field the client
 * sent ("max_output_tokens must be an integer in [0, 4096]"). So a seeded
 * answer is /v1/chat/completions' for the same conversation, bit for bit.
 *
 *   input              a string (one user message), or a list of messages
 *                      {role, content}: content a string or a list of
 *                      {"type": "input_text" or "output_text", "text"} parts
 *   instructions       a system message before them
 *   max_output_tokens  the chat body's max_tokens; temperature, top_p, seed
 *                      and gpt's own settings (top_k, stop, ...) as there
 *   text.format        {"type": "text"}, {"type": "json_object"}, {"type":
 *                      "json_schema", "name", "schema", "strict"}: the chat
 *                      body's response_format
 *   stream             the Responses events (responses_chunk)
 *
 * What needs a state gpt serve does not keep (store: true,
 * previous_response_id, background: true, conversation), tools, and every
 * unknown field are refused by name. The answers are written from the
 * finished ApiRequest in the Responses shapes. Nothing here touches the
 * engine or a socket.
 */
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "base/grow.h"

// The chat body's fields that a Responses body names otherwise: an error of
// the chat reader names what the client sent (the first match of the
// message is renamed; the longer name first).
static const struct {
    const char *chat, *responses;
} FIELD_NAMES[] = {
    {"max_tokens", "max_output_tokens"},
    {"response_format.json_schema.", "text.format."},
    {"response_format", "text.format"},
    {"messages", "input"},
};

// The table's fields that the Responses API has under another name, or not
// at all: refused with the name to use.
static const struct {
    const char *key, *instead;
} CHAT_ONLY[] = {
    {"max_tokens", "max_output_tokens"},
    {"response_format", "text.format"},
    {"n", "one request per answer"},
    {"echo", "nothing: the answer is the output alone"},
    {"logprobs", "nothing: gpt answers no log-probabilities here"},
};

// ----------------------------------------------------------------------------
// a body, as the chat body it means

// Empty as the Responses API's defaults are: absent, null, false, [] or {}.
static int empty(const cJSON *f) {
    return !f || cJSON_IsNull(f) || cJSON_IsFalse(f) || ((cJSON_IsArray(f) || cJSON_IsObject(f)) && !f->child);
}

// Part k of input item i (a text part) into the chat message's parts.
static int read_part(const cJSON *p, size_t i, size_t k, cJSON *parts, char **msg, char *param) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type"), *text = NULL;
    if (!cJSON_IsObject(p) || !cJSON_IsString(type))
        return api_fail(400, msg, param, "input",
                      "input[%zu].content[%zu] must be an object {\"type\": \"input_text\", "
                      "\"text\": ...}",
                      i, k);
    const char *t = type->valuestring;
    if (strcmp(t, "input_text") && strcmp(t, "output_text"))
        return api_fail(400, msg, param, "input",
                      "input[%zu].content[%zu]: part type \"%.40s\" is not supported (GPT-2 "
                      "reads text alone: input_text, or an answer's output_text)",
                      i, k, t);
    for (const cJSON *f = p->child; f; f = f->next) {
        if (!strcmp(f->string, "text")) text = f;
        // an answer sent back as it came: its annotations and log-probabilities change no text
        else if (!strcmp(t, "output_text") && (!strcmp(f->string, "annotations") || !strcmp(f->string, "logprobs"))) {
            if (!cJSON_IsArray(f) && !cJSON_IsNull(f))
                return api_fail(400, msg, param, "input", "input[%zu].content[%zu].%s must be an array", i, k, f->string);
        } else if (strcmp(f->string, "type"))
            return api_fail(400, msg, param, "input", "input[%zu].content[%zu]: unknown field \"%.40s\"", i, k, f->string);
    }
    if (!cJSON_IsString(text))
        return api_fail(400, msg, param, "input", "input[%zu].content[%zu].text must be a string", i, k);
    cJSON *part = cJSON_CreateObject();
    cJSON_AddItemToArray(parts, part);
    cJSON_AddStringToObject(part, "type", "text");
    cJSON_AddStringToObject(part, "text", text->valuestring);
    return 0;
}

// Input item i, a message, appended to the chat body's messages. 0, or the status.
static int read_item(const cJSON *x, size_t i, cJSON *messages, char **msg, char *param) {
    const cJSON *role = NULL, *content = NULL;
    if (!cJSON_IsObject(x))
        return api_fail(400, msg, param, "input", "input[%zu] must be an object {\"role\", \"content\"}", i);
    for (const cJSON *f = x->child; f; f = f->next) {
        const char *k = f->string;
        if (!strcmp(k, "role")) role = f;
        else if (!strcmp(k, "content")) content = f;
        else if (!strcmp(k, "type")) {
            if (!cJSON_IsString(f))
                return api_fail(400, msg, param, "input", "input[%zu].type must be a string (\"message\")", i);
            if (strcmp(f->valuestring, "message"))
                return api_fail(400, msg, param, "input",
                              "input[%zu].type \"%.40s\": gpt takes messages alone (no tool "
                              "calls, their outputs, reasoning or references)",
                              i, f->valuestring);
        } else if (!strcmp(k, "id") || !strcmp(k, "status")) {
            // an output item sent back as it came: its id and status change no text
            if (!cJSON_IsString(f) && !cJSON_IsNull(f))
                return api_fail(400, msg, param, "input", "input[%zu].%s must be a string", i, k);
        } else {
            return api_fail(400, msg, param, "input",
                          "input[%zu]: unknown field \"%.40s\" (gpt takes type, role, content, "
                          "id, status)",
                          i, k);
        }
    }
    static const char *const roles[] = {"user", "assistant", "system", "developer"};
    int known = 0;
    for (size_t r = 0; cJSON_IsString(role) && r < sizeof roles / sizeof *roles; r++)
        known |= !strcmp(role->valuestring, roles[r]);
    if (!known)
        return api_fail(400, msg, param, "input",
                      "input[%zu].role must be \"user\", \"assistant\", \"system\" or "
                      "\"developer\"",
                      i);
    if (!cJSON_IsString(content) && !cJSON_IsArray(content))
        return api_fail(400, msg, param, "input", "input[%zu].content must be a string or an array of input_text parts", i);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(messages, m);
    cJSON_AddStringToObject(m, "role", role->valuestring);
    if (cJSON_IsString(content)) {
        cJSON_AddStringToObject(m, "content", content->valuestring);
        return 0;
    }
    cJSON *parts = cJSON_AddArrayToObject(m, "content");
    size_t k = 0;
    for (const cJSON *p = content->child; p; p = p->next, k++) {
        if (k == CHAT_MAX_PARTS)
            return api_fail(400, msg, param, "input", "input[%zu].content: more than %d parts", i, CHAT_MAX_PARTS);
        int status = read_part(p, i, k, parts, msg, param);
        if (status) return status;
    }
    return 0;
}

// The chat body's messages: instructions (a system message), then input's.
static int read_input(const cJSON *input, const cJSON *instructions, cJSON *o, char **msg, char *param) {
    cJSON *messages = cJSON_AddArrayToObject(o, "messages");
    if (instructions) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddItemToArray(messages, m);
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", instructions->valuestring);
    }
    if (!input) return api_fail(400, msg, param, "input", "no \"input\" field");
    if (cJSON_IsString(input)) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddItemToArray(messages, m);
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", input->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(input))
        return api_fail(400, msg, param, "input", "input must be a string or an array of messages {\"role\", \"content\"}");
    size_t n = (size_t)cJSON_GetArraySize(input);
    if (n == 0) return api_fail(400, msg, param, "input", "input is empty: a conversation has at least one message");
    if (n + (instructions != NULL) > CHAT_MAX_MESSAGES)
        return api_fail(400, msg, param, "input", "input: %zu messages; a conversation holds at most %d", n,
                      CHAT_MAX_MESSAGES - (instructions != NULL));
    size_t i = 0;
    for (const cJSON *x = input->child; x; x = x->next, i++) {
        int status = read_item(x, i, messages, msg, param);
        if (status) return status;
    }
    return 0;
}

// text: {"format": {...}, "verbosity"}; format into the chat body's
// response_format (the Responses shape has the schema's fields at its top).
static int read_text(const cJSON *f, cJSON *o, char **msg, char *param) {
    if (!cJSON_IsObject(f)) return api_fail(400, msg, param, "text", "text must be an object {\"format\": {\"type\": ...}}");
    for (const cJSON *e = f->child; e; e = e->next) {
        if (!strcmp(e->string, "verbosity")) {
            // the default, which changes nothing; another asks a model to write more or less
            if (!cJSON_IsNull(e) && !(cJSON_IsString(e) && !strcmp(e->valuestring, "medium")))
                return api_fail(400, msg, param, "text.verbosity",
                              "text.verbosity: only \"medium\" is taken (GPT-2 "
                              "cannot be asked to write more or less)");
        } else if (strcmp(e->string, "format")) {
            return api_fail(400, msg, param, "text", "text: unknown field \"%.40s\" (gpt takes format)", e->string);
        }
    }
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(f, "format");
    if (empty(format)) return 0;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(format, "type");
    if (!cJSON_IsObject(format) || !cJSON_IsString(type))
        return api_fail(400, msg, param, "text.format",
                      "text.format must be an object {\"type\": \"text\", \"json_object\" "
                      "or \"json_schema\"}");
    const char *t = type->valuestring;
    cJSON *rf = cJSON_AddObjectToObject(o, "response_format");
    cJSON_AddStringToObject(rf, "type", t);
    if (strcmp(t, "json_schema")) {
        // text and json_object have no other field: response_format's reader says so
        for (const cJSON *e = format->child; e; e = e->next)
            if (strcmp(e->string, "type")) cJSON_AddItemToObject(rf, e->string, cJSON_Duplicate(e, 1));
        return 0;
    }
    cJSON *js = cJSON_AddObjectToObject(rf, "json_schema");
    for (const cJSON *e = format->child; e; e = e->next)
        if (strcmp(e->string, "type")) cJSON_AddItemToObject(js, e->string, cJSON_Duplicate(e, 1));
    return 0;
}

// The fields that need a state gpt serve does not keep, or a tool: each
// refused unless it is empty. 1 when f was one of them (*status set when it
// is refused), else 0.
static int read_stateful(const cJSON *f, int *status, char **msg, char *param) {
    const char *k = f->string;
    if (!strcmp(k, "store")) {
        if (!cJSON_IsBool(f) && !cJSON_IsNull(f)) *status = api_fail(400, msg, param, k, "store must be true or false");
        else if (cJSON_IsTrue(f))
            *status = api_fail(400, msg, param, k,
                             "store: gpt serve keeps no responses (it is stateless): send \"store\": "
                             "false, and the whole conversation in each request's input");
    } else if (!strcmp(k, "previous_response_id") || !strcmp(k, "conversation")) {
        if (!cJSON_IsNull(f))
            *status = api_fail(400, msg, param, k,
                             "%s: gpt serve keeps no responses or conversations (it is stateless): "
                             "send the whole conversation in input",
                             k);
    } else if (!strcmp(k, "background")) {
        if (!cJSON_IsBool(f) && !cJSON_IsNull(f)) *status = api_fail(400, msg, param, k, "background must be true or false");
        else if (cJSON_IsTrue(f))
            *status = api_fail(400, msg, param, k,
                             "background: gpt serve answers while the client waits (it keeps no "
                             "responses to poll): send \"background\": false, or \"stream\": true");
    } else if (!strcmp(k, "tools")) {
        const cJSON *type = NULL;
        size_t i = 0;
        for (const cJSON *t = cJSON_IsArray(f) ? f->child : NULL; t && !type; t = t->next, i++) {
            type = cJSON_GetObjectItemCaseSensitive(t, "type");
            if (!cJSON_IsString(type) || !strcmp(type->valuestring, "function")) type = NULL;
        }
        if (!cJSON_IsArray(f) && !cJSON_IsNull(f)) *status = api_fail(400, msg, param, k, "tools must be an array");
        else if (type)
            *status = api_fail(400, msg, param, k,
                             "tools[%zu]: the built-in tool \"%.40s\" is not served: gpt serve runs "
                             "no tools (web search, file search, code, computer)",
                             i - 1, type->valuestring);
        else if (!empty(f))
            *status = api_fail(400, msg, param, k,
                             "tools: /v1/responses calls no functions (/v1/chat/completions does, "
                             "with tool_choice \"required\")");
    } else if (!strcmp(k, "tool_choice")) {
        // without tools: "none" and "auto" both mean text
        if (!cJSON_IsNull(f) &&
            !(cJSON_IsString(f) && (!strcmp(f->valuestring, "none") || !strcmp(f->valuestring, "auto"))))
            *status = api_fail(400, msg, param, k,
                             "tool_choice: there are no tools to choose (only \"auto\" and \"none\" "
                             "are taken)");
    } else if (!strcmp(k, "include")) {
        if (!empty(f) || cJSON_IsFalse(f))
            *status = api_fail(400, msg, param, k, "include: gpt adds nothing to an answer (only [] is taken)");
    } else if (!strcmp(k, "reasoning")) {
        int none = cJSON_IsNull(f) || cJSON_IsObject(f);
        for (const cJSON *e = cJSON_IsObject(f) ? f->child : NULL; e; e = e->next) none &= cJSON_IsNull(e);
        if (!none) *status = api_fail(400, msg, param, k, "reasoning: GPT-2 is no reasoning model (only null is taken)");
    } else if (!strcmp(k, "truncation")) {
        if (!cJSON_IsNull(f) && !(cJSON_IsString(f) && !strcmp(f->valuestring, "disabled")))
            *status = api_fail(400, msg, param, k,
                             "truncation: only \"disabled\" is taken (an input longer than the "
                             "context is refused)");
    } else {
        return 0;
    }
    return 1;
}

// metadata: at most 16 string values (keys up to 64 bytes, values up to
// 512), repeated in the answer, as OpenAI's.
static int read_metadata(const cJSON *f, char **msg, char *param) {
    if (!cJSON_IsObject(f)) return api_fail(400, msg, param, "metadata", "metadata must be an object of strings");
    int n = 0;
    for (const cJSON *e = f->child; e; e = e->next, n++) {
        if (n == 16) return api_fail(400, msg, param, "metadata", "metadata: more than 16 keys");
        if (strlen(e->string) > 64) return api_fail(400, msg, param, "metadata", "metadata: a key longer than 64 bytes");
        if (!cJSON_IsString(e) || strlen(e->valuestring) > 512)
            return api_fail(400, msg, param, "metadata", "metadata.%.64s must be a string of at most 512 bytes", e->string);
    }
    return 0;
}

// The seed, checked by the table on the body's own text (a number is read
// from its digits), into o as those digits: a number printed again could
// take an exponent, which the table refuses.
static int read_seed(Server *s, const cJSON *f, const char *body, size_t len, size_t member, cJSON *o, char **msg,
                     char *param) {
    GenSettings g;
    GenLimits lim = {.max_tokens_limit = s->limits.max_tokens,
                     .vocab_size = (size_t)s->session.model.config.vocab_size};
    char why[512], digits[24];
    settings_defaults(&g);
    if (setting_from_json(&g, &lim, f, body, len, member, why, sizeof why) < 0)
        return api_fail(400, msg, param, "seed", "%s", why);
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)g.params.sampling.seed);
    cJSON_AddStringToObject(o, "seed", digits);
    return 0;
}

// What the answer repeats of the request, as OpenAI's response object
// does: the given values, or what the defaults are.
static cJSON *repeated_fields(const cJSON *b) {
    static const struct {
        const char *key, *absent;  // absent: the JSON of the default
    } fields[] = {
        {"instructions", "null"},
        {"max_output_tokens", "null"},
        {"metadata", "{}"},
        {"parallel_tool_calls", "true"},
        {"previous_response_id", "null"},
        {"reasoning", "{\"effort\":null,\"summary\":null}"},
        {"store", "false"},
        {"temperature", "1"},
        {"text", "{\"format\":{\"type\":\"text\"}}"},
        {"tool_choice", "\"auto\""},
        {"tools", "[]"},
        {"top_p", "1"},
        {"truncation", "\"disabled\""},
    };
    cJSON *r = cJSON_CreateObject();
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(b, fields[i].key);
        int given = f && !cJSON_IsNull(f) && strcmp(fields[i].key, "reasoning");
        cJSON_AddItemToObject(r, fields[i].key, given ? cJSON_Duplicate(f, 1) : cJSON_Parse(fields[i].absent));
    }
    return r;
}

// Whether v holds a number past a double (1e400): cJSON would write it
// as null, which the chat body would read as not given.
static int beyond_double(const cJSON *v) {
    if (cJSON_IsNumber(v)) return !isfinite(v->valuedouble);
    for (const cJSON *e = cJSON_IsArray(v) || cJSON_IsObject(v) ? v->child : NULL; e; e = e->next)
        if (beyond_double(e)) return 1;
    return 0;
}

// One field of the body b into the chat body o. 0, or the status.
static int read_field(Server *s, const cJSON *f, const char *body, size_t len, size_t member, cJSON *o, int *stream,
                      char **msg, char *param) {
    const char *k = f->string;
    int status = 0;
    if (beyond_double(f))
        return api_fail(400, msg, param, !strcmp(k, "text") ? "text.format" : k, "%s: a number out of range (beyond a double)",
                      k);
    if (read_stateful(f, &status, msg, param)) return status;
    if (cJSON_IsNull(f)) return 0;  // as if absent (clients send it for what they leave unset)
    if (!strcmp(k, "input") || !strcmp(k, "instructions")) {
        if (!strcmp(k, "instructions") && !cJSON_IsString(f))
            return api_fail(400, msg, param, k, "instructions must be a string (a system message)");
        return 0;  // read_input's, once every field is read
    }
    if (!strcmp(k, "max_output_tokens")) {
        cJSON_AddItemToObject(o, "max_tokens", cJSON_Duplicate(f, 1));
    } else if (!strcmp(k, "seed")) {
        return read_seed(s, f, body, len, member, o, msg, param);
    } else if (!strcmp(k, "stream")) {
        if (!cJSON_IsBool(f)) return api_fail(400, msg, param, k, "stream must be true or false");
        *stream = cJSON_IsTrue(f);
    } else if (!strcmp(k, "text")) {
        return read_text(f, o, msg, param);
    } else if (!strcmp(k, "metadata")) {
        return read_metadata(f, msg, param);
    } else if (!strcmp(k, "parallel_tool_calls")) {
        if (!cJSON_IsBool(f)) return api_fail(400, msg, param, k, "parallel_tool_calls must be true or false");
    } else if (!strcmp(k, "model") || !strcmp(k, "user")) {
        cJSON_AddItemToObject(o, k, cJSON_Duplicate(f, 1));  // the chat body checks them
    } else if (!strcmp(k, "safety_identifier") || !strcmp(k, "prompt_cache_key")) {
        // who asks, and a hint for OpenAI's cache: gpt shares any common prefix anyway
        if (!cJSON_IsString(f)) return api_fail(400, msg, param, k, "%s must be a string", k);
    } else if (setting_by_key(k) && (setting_by_key(k)->in & IN_SERVE)) {
        for (size_t i = 0; i < sizeof CHAT_ONLY / sizeof *CHAT_ONLY; i++)
            if (!strcmp(k, CHAT_ONLY[i].key))
                return api_fail(400, msg, param, k, "%s is a field of /v1/chat/completions; /v1/responses takes %s", k,
                              CHAT_ONLY[i].instead);
        cJSON_AddItemToObject(o, k, cJSON_Duplicate(f, 1));  // gpt's own settings, as the chat body has them
    } else {
        return api_fail(400, msg, param, k, "unknown field \"%.40s\"", k);
    }
    return 0;
}

// An error of the chat reader, renamed to the field of the Responses body it came from.
static void rename_field(char **msg, char *param) {
    for (size_t i = 0; i < sizeof FIELD_NAMES / sizeof *FIELD_NAMES; i++) {
        const char *hit = *msg ? strstr(*msg, FIELD_NAMES[i].chat) : NULL;
        if (hit) {
            size_t n = strlen(FIELD_NAMES[i].chat), cap = strlen(*msg) + strlen(FIELD_NAMES[i].responses) + 1;
            char *m = malloc(cap);
            if (m) {
                snprintf(m, cap, "%.*s%s%s", (int)(hit - *msg), *msg, FIELD_NAMES[i].responses, hit + n);
                free(*msg);
                *msg = m;
            }
            break;
        }
    }
    for (size_t i = 0; i < sizeof FIELD_NAMES / sizeof *FIELD_NAMES; i++)
        if (!strcmp(param, FIELD_NAMES[i].chat)) {
            snprintf(param, PARAM_CAP, "%s", FIELD_NAMES[i].responses);
            return;
        }
}

int responses_request(Server *s, const char *body, size_t len, ApiRequest **out, int *stream, char **msg, char *param) {
    *out = NULL;
    *stream = 0;
    *param = '\0';
    // the body's own faults (not JSON, NULs, text after it) as the chat reader words them
    const char *end = body;
    cJSON *b = nul_at(body, len, 1) < 0 ? cJSON_ParseWithLengthOpts(body, len, &end, 0) : NULL;
    while (b && end < body + len && (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) end++;
    if (!cJSON_IsObject(b) || end < body + len) {
        cJSON_Delete(b);
        int ignored;
        return chat_request(s, body, len, out, &ignored, msg, param);
    }
    cJSON *o = cJSON_CreateObject();
    int status = o ? 0 : 500;
    size_t member = 0;
    for (const cJSON *f = b->child; f && !status; f = f->next, member++)
        status = read_field(s, f, body, len, member, o, stream, msg, param);
    if (!status) {
        const cJSON *instructions = cJSON_GetObjectItemCaseSensitive(b, "instructions");
        status = read_input(cJSON_GetObjectItemCaseSensitive(b, "input"),
                            cJSON_IsString(instructions) ? instructions : NULL, o, msg, param);
    }
    char *text = status ? NULL : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (status == 500 || (!status && !text)) {
        cJSON_Delete(b);
        free(text);
        return (*msg = strdup("out of memory")), 500;
    }
    if (!status) {
        int ignored;
        status = chat_request(s, text, strlen(text), out, &ignored, msg, param);
        if (status) rename_field(msg, param);
    }
    free(text);
    if (!status && !((*out)->responses = repeated_fields(b))) {
        api_request_free(*out);
        *out = NULL;
        status = 500, *msg = strdup("out of memory");
    }
    cJSON_Delete(b);
    return status;
}

// ----------------------------------------------------------------------------
// answers


// The answer's status: in_progress while it runs, completed at its end
// (<|endoftext|>, a stop, a grammar's end), incomplete at max_output_tokens
// or the context's end (incomplete_details.reason "max_output_tokens") or
// when a shutdown's grace ran out ("interrupted"), failed.
static const char *status_of(const ApiChoice *c, const char **reason) {
    *reason = NULL;
    if (!c->finish) return "in_progress";
    if (!strcmp(c->finish, "stop")) return "completed";
    if (!strcmp(c->finish, "error")) return "failed";
    *reason = !strcmp(c->finish, "length") ? "max_output_tokens" : c->finish;
    return "incomplete";
}

// {"type": "output_text", "text", "annotations": []}
static cJSON *text_part(const char *text, size_t n) {
    char *t = copy_text(text, n);
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddStringToObject(p, "text", t ? t : "");
    cJSON_AddArrayToObject(p, "annotations");
    free(t);
    return p;
}

// The answer's one output item, a message: its id is the response's with
// msg_ for resp_; content NULL: none yet.
static cJSON *message_item(const char *id, const char *status, cJSON *content) {
    char item_id[48];
    snprintf(item_id, sizeof item_id, "msg_%s", id + strlen("resp_"));
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", item_id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "status", status);
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON *parts = cJSON_AddArrayToObject(m, "content");
    if (content) cJSON_AddItemToArray(parts, content);
    return m;
}

// The response object: in progress (whole 0: no output, no usage), or
// whole once it has finished. Beside OpenAI's fields, gpt's as a chat
// answer has them: the seed, and at the end the ids of the tokens and gpt's
// stop_reason. Under Server.lock.
static cJSON *response_json(Server *s, const ApiRequest *req, const char *id, long created, int whole) {
    const ApiChoice *c = &req->completions[0];
    const char *reason = NULL, *status = whole ? status_of(c, &reason) : "in_progress";
    whole = whole && c->finish;
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "id", id);
    cJSON_AddStringToObject(r, "object", "response");
    cJSON_AddNumberToObject(r, "created_at", (double)created);
    cJSON_AddStringToObject(r, "status", status);
    cJSON_AddFalseToObject(r, "background");
    if (!strcmp(status, "failed")) {
        cJSON *e = cJSON_AddObjectToObject(r, "error");
        cJSON_AddStringToObject(e, "code", req->status >= 500 ? "server_error" : "invalid_request_error");
        cJSON_AddStringToObject(e, "message", req->error ? req->error : "failed");
    } else {
        cJSON_AddNullToObject(r, "error");
    }
    if (reason) cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "incomplete_details"), "reason", reason);
    else cJSON_AddNullToObject(r, "incomplete_details");
    cJSON_AddStringToObject(r, "model", answered_model(s, req));
    cJSON *output = cJSON_AddArrayToObject(r, "output");
    if (whole) {
        const char *item_status = !strcmp(status, "completed") ? "completed" : "incomplete";
        cJSON_AddItemToArray(output, message_item(id, item_status, text_part(c->text, c->text_len)));
        cJSON *u = cJSON_AddObjectToObject(r, "usage");
        cJSON_AddNumberToObject(u, "input_tokens", (double)req->prompt_lens[0]);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens",
                                (double)c->cached_tokens);
        cJSON_AddNumberToObject(u, "output_tokens", (double)c->n_tokens);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
        cJSON_AddNumberToObject(u, "total_tokens", (double)(req->prompt_lens[0] + c->n_tokens));
    } else {
        cJSON_AddNullToObject(r, "usage");
    }
    for (const cJSON *f = req->responses->child; f; f = f->next)
        cJSON_AddItemToObject(r, f->string, cJSON_Duplicate(f, 1));
    cJSON_AddItemToObject(r, "seed", seed_json(req->seed));
    if (whole) {
        cJSON_AddItemToObject(r, "tokens", ids_json(c->tokens, c->n_tokens));
        if (c->stop_reason) cJSON_AddStringToObject(r, "stop_reason", c->stop_reason);
    }
    return r;
}

char *responses_response(Server *s, const ApiRequest *req, const char *id, long created) {
    return json_text(response_json(s, req, id, created, 1));
}

// A stream's events so far, as server-sent events.
typedef struct {
    ApiRequest *req;
    const char *id;
    char *buf;
    size_t len, cap;
    int bad;
} Events;

// An event of the given type: {"type", "sequence_number"} to add fields to.
static cJSON *event_new(Events *ev, const char *type) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNumberToObject(e, "sequence_number", (double)ev->req->events++);
    return e;
}

// An event about the message's content part: its item_id, output_index and content_index.
static cJSON *part_event(Events *ev, const char *type) {
    char item_id[48];
    snprintf(item_id, sizeof item_id, "msg_%s", ev->id + strlen("resp_"));
    cJSON *e = event_new(ev, type);
    cJSON_AddStringToObject(e, "item_id", item_id);
    cJSON_AddNumberToObject(e, "output_index", 0);
    cJSON_AddNumberToObject(e, "content_index", 0);
    return e;
}

// "event: TYPE\ndata: JSON\n\n", e deleted.
static void event_put(Events *ev, cJSON *e) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type");
    char *data = cJSON_PrintUnformatted(e);
    size_t n = data ? strlen(type->valuestring) + strlen(data) + 17 : 0;
    if (!data || grow_array(&ev->buf, &ev->cap, ev->len + n + 1, 1) != 0) ev->bad = 1;
    else
        ev->len +=
            (size_t)snprintf(ev->buf + ev->len, ev->cap - ev->len, "event: %s\ndata: %s\n\n", type->valuestring, data);
    free(data);
    cJSON_Delete(e);
}

// An event that carries the response object (whole or in progress).
static void response_event(Events *ev, Server *s, const char *type, long created, int whole) {
    cJSON *e = event_new(ev, type);
    cJSON_AddItemToObject(e, "response", response_json(s, ev->req, ev->id, created, whole));
    event_put(ev, e);
}

// The head: the response created and in progress, its message and its
// content part added, empty.
static void head_events(Events *ev, Server *s, long created) {
    response_event(ev, s, "response.created", created, 0);
    response_event(ev, s, "response.in_progress", created, 0);
    cJSON *e = event_new(ev, "response.output_item.added");
    cJSON_AddNumberToObject(e, "output_index", 0);
    cJSON_AddItemToObject(e, "item", message_item(ev->id, "in_progress", NULL));
    event_put(ev, e);
    e = part_event(ev, "response.content_part.added");
    cJSON_AddItemToObject(e, "part", text_part("", 0));
    event_put(ev, e);
}

// The end: the text whole, its part and message done, the response
// completed (or incomplete); a failed one's response.failed.
static void end_events(Events *ev, Server *s, const ApiChoice *c, long created) {
    const char *reason, *status = status_of(c, &reason);
    if (!strcmp(status, "failed")) {
        response_event(ev, s, "response.failed", created, 1);
        return;
    }
    char *text = copy_text(c->text, c->text_len);
    cJSON *e = part_event(ev, "response.output_text.done");
    cJSON_AddStringToObject(e, "text", text ? text : "");
    cJSON_AddArrayToObject(e, "logprobs");
    event_put(ev, e);
    free(text);
    e = part_event(ev, "response.content_part.done");
    cJSON_AddItemToObject(e, "part", text_part(c->text, c->text_len));
    event_put(ev, e);
    e = event_new(ev, "response.output_item.done");
    cJSON_AddNumberToObject(e, "output_index", 0);
    cJSON_AddItemToObject(e, "item",
                          message_item(ev->id, !strcmp(status, "completed") ? "completed" : "incomplete",
                                       text_part(c->text, c->text_len)));
    event_put(ev, e);
    response_event(ev, s, !strcmp(status, "completed") ? "response.completed" : "response.incomplete", created, 1);
}

char *responses_chunk(Server *s, ApiRequest *req, const char *id, long created, int *finished) {
    ApiChoice *c = &req->completions[0];
    *finished = c->sent_finish;
    if (c->sent_finish) return NULL;
    Events ev = {.req = req, .id = id};
    if (!c->sent_echo) head_events(&ev, s, created);  // sent_echo: the head has been sent
    c->sent_echo = 1;
    if (c->text_len > c->sent_text) {
        char *delta = copy_text(c->text + c->sent_text, c->text_len - c->sent_text);
        cJSON *e = part_event(&ev, "response.output_text.delta");
        cJSON_AddStringToObject(e, "delta", delta ? delta : "");
        cJSON_AddArrayToObject(e, "logprobs");
        event_put(&ev, e);
        free(delta);
        c->sent_text = c->text_len;
    }
    if (c->finish) {
        end_events(&ev, s, c, created);
        c->sent_finish = *finished = 1;
    }
    if (ev.bad) {
        free(ev.buf);
        return NULL;
    }
    return ev.buf;
}

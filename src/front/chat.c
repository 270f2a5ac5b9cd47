/*
 * chat.c - chat templates: the built-ins, the template file, and rendering
 * a conversation into one prompt (chat.h).
 */
#include "front/chat.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/utf8.h"

static const char *const ROLE_NAMES[CHAT_ROLES] = {"system", "user", "assistant"};

int chat_role_from_name(const char *name) {
    for (int r = 0; r < CHAT_ROLES; r++)
        if (!strcmp(name, ROLE_NAMES[r])) return r;
    return -1;
}

const char *chat_role_name(ChatRole r) { return (unsigned)r < CHAT_ROLES ? ROLE_NAMES[r] : "?"; }

// A built-in: the strings of each role (system, user, assistant), the
// generation prompt and the stops (NULL-terminated).
typedef struct {
    const char *name;
    const char *prefix[CHAT_ROLES], *suffix[CHAT_ROLES];
    const char *generation_prompt;
    const char *stops[4];
} BuiltinTemplate;

static const BuiltinTemplate BUILTINS[] = {
    {"gpt2", {"", "", ""}, {"<|endoftext|>", "<|endoftext|>", "<|endoftext|>"}, "", {NULL}},
    {"transcript",
     {"System: ", "User: ", "Assistant: "},
     {"\n\n", "\n", "\n"},
     "Assistant:",
     {"\nUser:", "\nSystem:", NULL}},
    {"chatml",
     {"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"},
     {"<|im_end|>\n", "<|im_end|>\n", "<|im_end|>\n"},
     "<|im_start|>assistant\n",
     {"<|im_end|>", NULL}},
};

void chat_template_free(ChatTemplate *t) {
    if (!t) return;
    for (int r = 0; r < CHAT_ROLES; r++) free(t->prefix[r]), free(t->suffix[r]);
    free(t->generation_prompt);
    for (size_t i = 0; i < t->n_stops; i++) free(t->stops[i]);
    memset(t, 0, sizeof *t);
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

// Every string of t allocated? 0, or -1 (then t is freed).
static int all_allocated(ChatTemplate *t, GptError *err) {
    int ok = t->generation_prompt != NULL;
    for (int r = 0; r < CHAT_ROLES; r++) ok &= t->prefix[r] != NULL && t->suffix[r] != NULL;
    for (size_t i = 0; i < t->n_stops; i++) ok &= t->stops[i] != NULL;
    if (ok) return 0;
    chat_template_free(t);
    return gpt_error(err, "chat template: out of memory");
}

static int open_builtin(const BuiltinTemplate *b, ChatTemplate *t, GptError *err) {
    snprintf(t->name, sizeof t->name, "%s", b->name);
    for (int r = 0; r < CHAT_ROLES; r++) t->prefix[r] = dup_or_empty(b->prefix[r]), t->suffix[r] = dup_or_empty(b->suffix[r]);
    t->generation_prompt = dup_or_empty(b->generation_prompt);
    for (size_t i = 0; b->stops[i]; i++) t->stops[t->n_stops++] = strdup(b->stops[i]);
    return all_allocated(t, err);
}

// A string member of o named key (absent or null: ""), valid UTF-8, into
// *out (allocated). 0, or -1 with err naming path and key.
static int string_member(const cJSON *o, const char *key, const char *where, char **out, const char *path,
                         GptError *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v))
        return gpt_error(err, "%s: %s%s must be a string", path, where, key);
    const char *s = v && cJSON_IsString(v) ? v->valuestring : "";
    if (!utf8_valid((const unsigned char *)s, strlen(s)))
        return gpt_error(err, "%s: %s%s is not valid UTF-8", path, where, key);
    *out = strdup(s);
    return *out ? 0 : gpt_error(err, "%s: out of memory", path);
}

// The members of o must all be in names (n of them). 0, or -1 with err
// naming the member and the ones there may be (the message points to what
// an installed gpt has: its manual, not the sources).
static int only_members(const cJSON *o, const char *const *names, size_t n, const char *where, const char *path,
                        GptError *err) {
    for (const cJSON *m = o->child; m; m = m->next) {
        size_t i = 0;
        while (i < n && strcmp(m->string, names[i]) != 0) i++;
        if (i < n) continue;
        char list[128] = "";
        for (i = 0; i < n; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? (i + 1 < n ? ", " : " or ") : "",
                     names[i]);
        return gpt_error(err, "%s: unknown member %s\"%.40s\" (%s may have %s; man gpt, --chat-template)", path, where,
                         m->string, *where ? "a role" : "a template", list);
    }
    return 0;
}

static int read_template(const cJSON *root, const char *path, ChatTemplate *t, GptError *err) {
    static const char *const TOP[] = {"system", "user", "assistant", "generation_prompt", "stop"};
    static const char *const ROLE[] = {"prefix", "suffix"};
    if (!cJSON_IsObject(root)) return gpt_error(err, "%s: a chat template is a JSON object", path);
    if (only_members(root, TOP, 5, "", path, err) != 0) return -1;
    for (int r = 0; r < CHAT_ROLES; r++) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, ROLE_NAMES[r]);
        char where[32];
        snprintf(where, sizeof where, "%s.", ROLE_NAMES[r]);
        if (o && !cJSON_IsNull(o) && !cJSON_IsObject(o))
            return gpt_error(err, "%s: %s must be an object {\"prefix\", \"suffix\"}", path, ROLE_NAMES[r]);
        const cJSON *src = o && cJSON_IsObject(o) ? o : NULL;
        if (src && only_members(src, ROLE, 2, where, path, err) != 0) return -1;
        if (string_member(src, "prefix", where, &t->prefix[r], path, err) != 0 ||
            string_member(src, "suffix", where, &t->suffix[r], path, err) != 0)
            return -1;
    }
    if (string_member(root, "generation_prompt", "", &t->generation_prompt, path, err) != 0) return -1;
    const cJSON *stop = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (stop && !cJSON_IsNull(stop)) {
        if (!cJSON_IsArray(stop)) return gpt_error(err, "%s: stop must be an array of strings", path);
        for (const cJSON *s = stop->child; s; s = s->next) {
            if (t->n_stops == MAX_STOPS) return gpt_error(err, "%s: more than %d stop strings", path, MAX_STOPS);
            if (!cJSON_IsString(s) || !s->valuestring[0] ||
                !utf8_valid((const unsigned char *)s->valuestring, strlen(s->valuestring)))
                return gpt_error(err, "%s: stop[%zu] must be a non-empty UTF-8 string", path, t->n_stops);
            if (!(t->stops[t->n_stops++] = strdup(s->valuestring))) return gpt_error(err, "%s: out of memory", path);
        }
    }
    return 0;
}

int chat_template_open(const char *spec, ChatTemplate *t, GptError *err) {
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < sizeof BUILTINS / sizeof *BUILTINS; i++)
        if (!strcmp(spec, BUILTINS[i].name)) return open_builtin(&BUILTINS[i], t, err);
    char *text;
    size_t len;
    if (file_read_all(spec, &text, &len, err) != 0) {
        // a word that is no file and no built-in: say which names exist
        if (!strchr(spec, '/') && !strchr(spec, '.'))
            return gpt_error(err, "chat template %s: no such built-in (" CHAT_TEMPLATE_NAMES ") or file", spec);
        return -1;
    }
    if (len > CHAT_TEMPLATE_MAX_BYTES) {
        free(text);
        return gpt_error(err, "%s: %zu bytes; a chat template file holds at most %d", spec, len,
                         CHAT_TEMPLATE_MAX_BYTES);
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root)
        return gpt_error(err, "%s: not valid JSON (a chat template is a JSON object: man gpt, --chat-template)", spec);
    snprintf(t->name, sizeof t->name, "%s", spec);
    int rc = read_template(root, spec, t, err);
    cJSON_Delete(root);
    if (rc != 0) {
        chat_template_free(t);
        return -1;
    }
    return 0;
}

// Appends n bytes of s to the buffer (*buf, *len, *cap). 0, or -1.
static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (n > SIZE_MAX / 2 - *len - 1) return -1;
    if (*len + n + 1 > *cap) {
        size_t want = (*len + n + 1) * 2;
        char *p = realloc(*buf, want);
        if (!p) return -1;
        *buf = p, *cap = want;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

// The bytes of message m's prefix that come before it: the whole prefix,
// less its final space when the content starts with one, so that an answer
// generated after "Assistant:" and sent back with its leading space renders
// as it was generated, not after "Assistant: " and two spaces.
static size_t prefix_len(const char *prefix, const ChatMessage *m) {
    size_t n = strlen(prefix);
    return n && prefix[n - 1] == ' ' && m->len && m->content[0] == ' ' ? n - 1 : n;
}

int chat_render(const ChatTemplate *t, const ChatMessage *m, size_t n, int add_generation_prompt, char **out,
                size_t *out_len, GptError *err) {
    *out = NULL, *out_len = 0;
    if (n > CHAT_MAX_MESSAGES)
        return gpt_error(err, "%zu messages; a conversation holds at most %d", n, CHAT_MAX_MESSAGES);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int bad = append(&buf, &len, &cap, "", 0);
    for (size_t i = 0; i < n && !bad; i++) {
        ChatRole r = m[i].role;
        if ((unsigned)r >= CHAT_ROLES) {
            free(buf);
            return gpt_error(err, "message %zu: no such role", i);
        }
        bad |= append(&buf, &len, &cap, t->prefix[r], prefix_len(t->prefix[r], &m[i]));
        bad |= append(&buf, &len, &cap, m[i].content, m[i].len);
        bad |= append(&buf, &len, &cap, t->suffix[r], strlen(t->suffix[r]));
    }
    if (add_generation_prompt && !bad)
        bad |= append(&buf, &len, &cap, t->generation_prompt, strlen(t->generation_prompt));
    if (bad) {
        free(buf);
        return gpt_error(err, "chat: out of memory rendering %zu messages", n);
    }
    *out = buf, *out_len = len;
    return 0;
}

// The ids under construction, and the ordinary text not yet encoded.
typedef struct {
    Tokenizer *tok;
    int32_t *ids;
    size_t n, cap;
    char *text;
    size_t len, text_cap;
    int bad;
} ChatEncoder;

static void encoder_text(ChatEncoder *e, const char *s, size_t n) {
    if (!e->bad && append(&e->text, &e->len, &e->text_cap, s, n) != 0) e->bad = 1;
}

static void encoder_id(ChatEncoder *e, int32_t id) {
    if (e->bad) return;
    if (e->n == e->cap) {
        size_t want = e->cap ? 2 * e->cap : 64;
        int32_t *p = realloc(e->ids, want * sizeof *p);
        if (!p) {
            e->bad = 1;
            return;
        }
        e->ids = p, e->cap = want;
    }
    e->ids[e->n++] = id;
}

// The ordinary text gathered so far, encoded whole, onto the ids.
static void encoder_flush(ChatEncoder *e, GptError *err) {
    if (e->bad || !e->len) return;
    int32_t *ids;
    size_t n;
    if (tokenizer_encode(e->tok, e->text, e->len, 0, &ids, &n, err) != 0) {
        e->bad = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) encoder_id(e, ids[i]);
    free(ids);
    e->len = 0;
}

// A template's string less its last `drop` bytes (0, or prefix_len's final
// space): each literal <|endoftext|> the special token.
static void encoder_template(ChatEncoder *e, const char *s, size_t drop, GptError *err) {
    static const char eot[] = "<|endoftext|>";
    int32_t id = tokenizer_eot_id(e->tok);
    for (const char *hit; id >= 0 && (hit = strstr(s, eot)); s = hit + sizeof eot - 1) {
        encoder_text(e, s, (size_t)(hit - s));
        encoder_flush(e, err);
        encoder_id(e, id);
    }
    encoder_text(e, s, strlen(s) - drop);
}

int chat_tokens(Tokenizer *tok, const ChatTemplate *t, const ChatMessage *m, size_t n, int add_generation_prompt,
                int32_t **ids, size_t *n_ids, GptError *err) {
    *ids = NULL, *n_ids = 0;
    if (n > CHAT_MAX_MESSAGES)
        return gpt_error(err, "%zu messages; a conversation holds at most %d", n, CHAT_MAX_MESSAGES);
    ChatEncoder e = {.tok = tok};
    for (size_t i = 0; i < n && !e.bad; i++) {
        ChatRole r = m[i].role;
        if ((unsigned)r >= CHAT_ROLES) {
            free(e.text);
            free(e.ids);
            return gpt_error(err, "message %zu: no such role", i);
        }
        encoder_template(&e, t->prefix[r], strlen(t->prefix[r]) - prefix_len(t->prefix[r], &m[i]), err);
        encoder_text(&e, m[i].content, m[i].len);
        encoder_template(&e, t->suffix[r], 0, err);
    }
    if (add_generation_prompt) encoder_template(&e, t->generation_prompt, 0, err);
    encoder_flush(&e, err);
    // an empty prompt starts a new document, as prompt_tokens's
    if (!e.n && tokenizer_eot_id(tok) >= 0) encoder_id(&e, tokenizer_eot_id(tok));
    free(e.text);
    if (e.bad || !e.n) {
        free(e.ids);
        return err->msg[0] ? -1 : gpt_error(err, e.n ? "chat: out of memory" : "chat: an empty prompt and no <|endoftext|>");
    }
    *ids = e.ids, *n_ids = e.n;
    return 0;
}

void chat_conversation_free(ChatConversation *c) {
    if (!c) return;
    for (size_t i = 0; c->m && i < c->n; i++) free((char *)c->m[i].content);
    free(c->m);
    c->m = NULL, c->n = 0;
}

// Message i's content: a string, or an array of text parts joined, into
// *m (allocated). 0, or -1 with msg.
static int content_from_json(const cJSON *v, size_t i, ChatMessage *m, char *msg, size_t cap) {
    char *buf = NULL;
    size_t len = 0, bcap = 0;
    if (cJSON_IsString(v)) {
        if (append(&buf, &len, &bcap, v->valuestring, strlen(v->valuestring)) != 0) goto oom;
    } else if (cJSON_IsArray(v)) {
        size_t k = 0;
        if (append(&buf, &len, &bcap, "", 0) != 0) goto oom;
        for (const cJSON *p = v->child; p; p = p->next, k++) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
            const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
            if (k == CHAT_MAX_PARTS) {
                snprintf(msg, cap, "messages[%zu].content: more than %d parts", i, CHAT_MAX_PARTS);
                goto fail;
            }
            if (!cJSON_IsObject(p) || !cJSON_IsString(type)) {
                snprintf(msg, cap, "messages[%zu].content[%zu] must be an object {\"type\": \"text\", \"text\": ...}", i,
                         k);
                goto fail;
            }
            if (strcmp(type->valuestring, "text") != 0) {
                snprintf(msg, cap, "messages[%zu].content[%zu]: part type \"%.40s\" is not supported (GPT-2 reads "
                         "text alone: type \"text\")", i, k, type->valuestring);
                goto fail;
            }
            for (const cJSON *f = p->child; f; f = f->next)
                if (strcmp(f->string, "type") && strcmp(f->string, "text")) {
                    snprintf(msg, cap, "messages[%zu].content[%zu]: unknown field \"%.40s\"", i, k, f->string);
                    goto fail;
                }
            if (!cJSON_IsString(text)) {
                snprintf(msg, cap, "messages[%zu].content[%zu].text must be a string", i, k);
                goto fail;
            }
            if (append(&buf, &len, &bcap, text->valuestring, strlen(text->valuestring)) != 0) goto oom;
        }
    } else {
        snprintf(msg, cap, "messages[%zu].content must be a string or an array of text parts", i);
        return -1;
    }
    m->content = buf, m->len = len;
    return 0;
oom:
    snprintf(msg, cap, "out of memory");
fail:
    free(buf);
    return -1;
}

// An assistant message's tool_calls appended to its content (buf), each
// as gpt serve's tool calls are generated (src/serve/tools.c):
// {"name":NAME,"arguments":ARGUMENTS}, the arguments' text as sent. 0, or
// -1 with msg.
static int tool_calls_from_json(const cJSON *v, size_t i, char **buf, size_t *len, size_t *bcap, char *msg,
                                size_t cap) {
    if (!cJSON_IsArray(v)) {
        snprintf(msg, cap,
                 "messages[%zu].tool_calls must be an array of {\"id\", \"type\": \"function\", "
                 "\"function\": {\"name\", \"arguments\"}}",
                 i);
        return -1;
    }
    size_t k = 0;
    for (const cJSON *t = v->child; t; t = t->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (k == CHAT_MAX_PARTS) {
            snprintf(msg, cap, "messages[%zu].tool_calls: more than %d calls", i, CHAT_MAX_PARTS);
            return -1;
        }
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsString(name) || !cJSON_IsString(args)) {
            snprintf(msg, cap,
                     "messages[%zu].tool_calls[%zu] must be {\"id\", \"type\": \"function\", "
                     "\"function\": {\"name\": a string, \"arguments\": a string}}",
                     i, k);
            return -1;
        }
        cJSON *quoted = cJSON_CreateString(name->valuestring);
        char *q = quoted ? cJSON_PrintUnformatted(quoted) : NULL;
        cJSON_Delete(quoted);
        int bad = !q || append(buf, len, bcap, "{\"name\":", 8) || append(buf, len, bcap, q, strlen(q)) ||
                  append(buf, len, bcap, ",\"arguments\":", 13) ||
                  append(buf, len, bcap, args->valuestring, strlen(args->valuestring)) ||
                  append(buf, len, bcap, "}", 1);
        free(q);
        if (bad) {
            snprintf(msg, cap, "out of memory");
            return -1;
        }
    }
    return 0;
}

// Message i's fields (x an object of role, content, name, tool_calls,
// tool_call_id; those absent NULL). 0, or -1 with msg.
static int message_fields(const cJSON *x, size_t i, const cJSON **role, const cJSON **content, const cJSON **calls,
                          const cJSON **call_id, char *msg, size_t cap) {
    if (!cJSON_IsObject(x)) {
        snprintf(msg, cap, "messages[%zu] must be an object {\"role\", \"content\"}", i);
        return -1;
    }
    for (const cJSON *f = x->child; f; f = f->next) {
        if (!strcmp(f->string, "role")) *role = f;
        else if (!strcmp(f->string, "content")) *content = f;
        else if (!strcmp(f->string, "tool_calls")) *calls = f;
        else if (!strcmp(f->string, "tool_call_id")) *call_id = f;
        else if (!strcmp(f->string, "name")) {
            if (!cJSON_IsString(f)) {
                snprintf(msg, cap, "messages[%zu].name must be a string", i);
                return -1;
            }
        } else {
            snprintf(msg, cap,
                     "messages[%zu]: unknown field \"%.40s\" (gpt takes role, content, name, tool_calls, "
                     "tool_call_id)",
                     i, f->string);
            return -1;
        }
    }
    return 0;
}

int chat_conversation_from_json(const cJSON *a, ChatConversation *c, char *msg, size_t cap) {
    memset(c, 0, sizeof *c);
    if (!cJSON_IsArray(a)) {
        snprintf(msg, cap, "messages must be an array of {\"role\", \"content\"} objects");
        return -1;
    }
    size_t n = 0;
    for (const cJSON *x = a->child; x; x = x->next) n++;
    if (n == 0) {
        snprintf(msg, cap, "messages is empty: a conversation has at least one message");
        return -1;
    }
    if (n > CHAT_MAX_MESSAGES) {
        snprintf(msg, cap, "messages: %zu messages; a conversation holds at most %d", n, CHAT_MAX_MESSAGES);
        return -1;
    }
    if (!(c->m = calloc(n, sizeof *c->m))) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    size_t i = 0;
    for (const cJSON *x = a->child; x; x = x->next, i++) {
        const cJSON *role = NULL, *content = NULL, *calls = NULL, *call_id = NULL;
        int bad = message_fields(x, i, &role, &content, &calls, &call_id, msg, cap) != 0;
        int r = -1, tool = 0;
        if (!bad && !cJSON_IsString(role)) bad = 1, snprintf(msg, cap, "messages[%zu].role must be a string", i);
        if (!bad) {
            // a tool's result: the templates have no tool role, so it renders as a user message
            tool = !strcmp(role->valuestring, "tool");
            r = !strcmp(role->valuestring, "developer") ? (int)CHAT_SYSTEM
                : tool                                  ? (int)CHAT_USER
                                                        : chat_role_from_name(role->valuestring);
            if (r < 0)
                bad = 1, snprintf(msg, cap,
                                  "messages[%zu].role: \"%.40s\" is not a role gpt takes (system, user, "
                                  "assistant, tool)",
                                  i, role->valuestring);
        }
        if (!bad && tool && !cJSON_IsString(call_id))
            bad = 1, snprintf(msg, cap,
                              "messages[%zu].role \"tool\": a tool's result needs its tool_call_id (a "
                              "string)",
                              i);
        if (!bad && !tool && call_id)
            bad = 1, snprintf(msg, cap, "messages[%zu].tool_call_id: only a tool's result has one", i);
        if (!bad && calls && r != CHAT_ASSISTANT)
            bad = 1, snprintf(msg, cap, "messages[%zu].tool_calls: only an assistant's message has them", i);
        // an assistant's calls may come without content (null)
        if (!bad && calls && (!content || cJSON_IsNull(content))) content = NULL;
        else if (!bad && !content) bad = 1, snprintf(msg, cap, "messages[%zu] has no content", i);
        if (!bad) {
            c->m[i].role = (ChatRole)r;
            bad = content ? content_from_json(content, i, &c->m[i], msg, cap) != 0
                          : (c->m[i].content = calloc(1, 1)) == NULL && (snprintf(msg, cap, "out of memory"), 1);
        }
        if (!bad && calls) {
            char *buf = (char *)c->m[i].content;
            size_t len = c->m[i].len, bcap = len + 1;
            bad = tool_calls_from_json(calls, i, &buf, &len, &bcap, msg, cap) != 0;
            c->m[i].content = buf, c->m[i].len = len;
            if (bad) free(buf);  // message i is not counted in c->n: freed here
        }
        c->n = i + (bad ? 0 : 1);
        if (bad) {
            chat_conversation_free(c);
            return -1;
        }
    }
    return 0;
}

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

// The members of o must all be in names (n of them). 0, or -1.
static int only_members(const cJSON *o, const char *const *names, size_t n, const char *where, const char *path,
                        GptError *err) {
    for (const cJSON *m = o->child; m; m = m->next) {
        size_t i = 0;
        while (i < n && strcmp(m->string, names[i]) != 0) i++;
        if (i == n) return gpt_error(err, "%s: unknown member %s\"%.40s\" (chat.h lists the template's members)", path,
                                     where, m->string);
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
    if (!root) return gpt_error(err, "%s: not valid JSON (a chat template is a JSON object: chat.h)", spec);
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
        bad |= append(&buf, &len, &cap, t->prefix[r], strlen(t->prefix[r]));
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

/*
 * tools.c - function tools on /v1/chat/completions, as calls that always
 * parse. GPT-2's chat templates do not say how a model calls a tool, so a
 * call cannot be told from text: gpt makes the whole answer one call, with
 * tool_choice "required" (any of the functions) or {"type": "function",
 * "function": {"name"}} (that one). The answer's grammar is the JSON Schema
 *
 *     {"anyOf": [{"type": "object", "properties": {"name": {"const": NAME},
 *                 "arguments": PARAMETERS}, "required": ["name", "arguments"]}, ...]}
 *
 * (one branch per function), compiled by the one schema compiler, so the
 * text is exactly {"name":"NAME","arguments":{...}} written compactly, and
 * the arguments are an instance of that function's parameters. The answer
 * gives them as OpenAI's tool_calls[0].function.arguments, the JSON text as
 * generated. tool_choice "auto" (OpenAI's default with tools) is refused,
 * "none" sends no tool to the model; parallel_tool_calls true is taken and
 * one call is made.
 *
 * Nothing here touches the engine or a socket; api.c reads the body and
 * writes the answers with these.
 */
#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

// The most functions a request may offer, as OpenAI's.
enum { MAX_TOOLS = 128, MAX_NAME = 64 };

static int fail(char *msg, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *msg, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
    return -1;
}

// A function's name as OpenAI takes one: 1 to 64 of a-z, A-Z, 0-9, _ and -
// (so its JSON string is itself between quotes).
static int good_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MAX_NAME) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

// Each "$ref": "#..." under v made to point into the branch at `at` ("#/anyOf/3/properties/arguments"):
// a function's parameters are a schema of their own, whose "#" is their root.
static int move_refs(cJSON *v, const char *at) {
    for (cJSON *e = cJSON_IsArray(v) || cJSON_IsObject(v) ? v->child : NULL; e; e = e->next) {
        if (cJSON_IsObject(v) && !strcmp(e->string, "$ref") && cJSON_IsString(e) && e->valuestring[0] == '#') {
            size_t n = strlen(at) + strlen(e->valuestring);
            char *ref = malloc(n);
            if (!ref) return -1;
            snprintf(ref, n, "%s%s", at, e->valuestring + 1);
            cJSON *moved = cJSON_CreateString(ref);
            free(ref);
            if (!moved || !cJSON_ReplaceItemViaPointer(v, e, moved)) return -1;
            e = moved;
        } else if (move_refs(e, at) != 0) {
            return -1;
        }
    }
    return 0;
}

// Function i of tools (t, an object {"type": "function", "function": {"name",
// "description", "parameters", "strict"}}): its name, and its branch of the
// schema (whole: the root, else anyOf's branch `branch`). 0 or -1.
static int read_function(const cJSON *t, size_t i, long branch, const char **name, cJSON **schema, char *msg,
                         size_t cap) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function"), *params = NULL, *nm = NULL;
    if (!cJSON_IsObject(t) || !cJSON_IsString(type))
        return fail(msg, cap, "tools[%zu] must be an object {\"type\": \"function\", \"function\": {...}}", i);
    if (strcmp(type->valuestring, "function"))
        return fail(msg, cap, "tools[%zu].type \"%.40s\": gpt calls functions alone", i, type->valuestring);
    for (const cJSON *e = t->child; e; e = e->next)
        if (strcmp(e->string, "type") && strcmp(e->string, "function"))
            return fail(msg, cap, "tools[%zu]: unknown field \"%.40s\"", i, e->string);
    if (!cJSON_IsObject(fn))
        return fail(msg, cap, "tools[%zu].function must be an object {\"name\", \"parameters\"}", i);
    for (const cJSON *e = fn->child; e; e = e->next) {
        const char *k = e->string;
        if (!strcmp(k, "name")) nm = e;
        else if (!strcmp(k, "parameters")) params = e;
        else if (!strcmp(k, "description") && !cJSON_IsString(e) && !cJSON_IsNull(e))
            return fail(msg, cap, "tools[%zu].function.description must be a string", i);
        else if (!strcmp(k, "strict") && !cJSON_IsBool(e) && !cJSON_IsNull(e))
            return fail(msg, cap, "tools[%zu].function.strict must be true or false", i);
        else if (strcmp(k, "description") && strcmp(k, "strict"))
            return fail(msg, cap, "tools[%zu].function: unknown field \"%.40s\"", i, k);
    }
    if (!cJSON_IsString(nm) || !good_name(nm->valuestring))
        return fail(msg, cap, "tools[%zu].function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -", i);
    if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
        return fail(msg, cap, "tools[%zu].function.parameters must be a JSON Schema (an object)", i);
    *name = nm->valuestring;
    // no parameters: the function takes none, {}
    cJSON *args = params && cJSON_IsObject(params) ? cJSON_Duplicate(params, 1)
                                                   : cJSON_Parse("{\"type\":\"object\",\"properties\":{}}");
    char at[64];
    if (branch < 0) snprintf(at, sizeof at, "#/properties/arguments");
    else snprintf(at, sizeof at, "#/anyOf/%ld/properties/arguments", branch);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "object");
    cJSON *props = cJSON_AddObjectToObject(s, "properties");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(props, "name"), "const", *name);
    cJSON_AddItemToObject(props, "arguments", args);
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString("arguments"));
    *schema = s;
    if (!args || move_refs(args, at) != 0) return fail(msg, cap, "out of memory");
    return 0;
}

// tool_choice: the function it names (*one), or every one ("required");
// "none" sends none (*off). 0 or -1.
static int read_choice(const cJSON *choice, int *off, const char **one, char *msg, size_t cap) {
    *off = 0, *one = NULL;
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "required")) return 0;
    if (cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")) return (*off = 1), 0;
    if (!choice || cJSON_IsNull(choice) || (cJSON_IsString(choice) && !strcmp(choice->valuestring, "auto")))
        return fail(msg, cap,
                    "tool_choice \"auto\" (the default with tools) needs a chat template that says how a "
                    "model calls a tool, and GPT-2's do not: send \"required\" (the answer is a call of one of the "
                    "tools) or {\"type\": \"function\", \"function\": {\"name\": ...}}, or \"none\"");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(choice, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(choice, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    if (!cJSON_IsObject(choice) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
        !cJSON_IsString(name))
        return fail(msg, cap,
                    "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                    "\"function\": {\"name\": ...}}");
    *one = name->valuestring;
    return 0;
}

int tools_read(const cJSON *tools, const cJSON *choice, const cJSON *parallel, char **schema, char ***names,
               size_t *n_names, char *msg, size_t cap, const char **param) {
    *schema = NULL, *names = NULL, *n_names = 0;
    *param = "tools";
    if (parallel && !cJSON_IsNull(parallel) && !cJSON_IsBool(parallel))
        return (*param = "parallel_tool_calls"), fail(msg, cap, "parallel_tool_calls must be true or false");
    if (!tools || cJSON_IsNull(tools) || (cJSON_IsArray(tools) && !tools->child)) {
        if (choice && !cJSON_IsNull(choice) && !(cJSON_IsString(choice) && !strcmp(choice->valuestring, "none")))
            return (*param = "tool_choice"), fail(msg, cap, "tool_choice without tools: there is nothing to call");
        return 0;
    }
    if (!cJSON_IsArray(tools)) return fail(msg, cap, "tools must be an array of {\"type\": \"function\", ...}");
    size_t n = (size_t)cJSON_GetArraySize(tools);
    if (n > MAX_TOOLS) return fail(msg, cap, "tools: %zu functions; gpt takes at most %d", n, MAX_TOOLS);
    int off;
    const char *one;
    if (read_choice(choice, &off, &one, msg, cap) != 0) return (*param = "tool_choice"), -1;
    cJSON *root = cJSON_CreateObject(), *branches = one ? NULL : cJSON_AddArrayToObject(root, "anyOf");
    char **list = calloc(n, sizeof *list);
    size_t i = 0, k = 0;
    int found = 0, rc = root && list ? 0 : fail(msg, cap, "out of memory");
    for (const cJSON *t = tools->child; t && !rc; t = t->next, i++) {
        const char *name = NULL;
        cJSON *branch = NULL;
        rc = read_function(t, i, one ? -1 : (long)k, &name, &branch, msg, cap);
        for (size_t j = 0; !rc && j < k; j++)
            if (!strcmp(list[j], name)) rc = fail(msg, cap, "tools[%zu].function.name \"%s\" is given twice", i, name);
        // with a named choice, the others are checked and left out
        int taken = !rc && (!one || !strcmp(one, name));
        if (!rc && !(list[k++] = strdup(name))) rc = fail(msg, cap, "out of memory");
        if (taken && one) {
            cJSON_Delete(root);
            root = branch;
            found = 1;
        } else if (taken) {
            cJSON_AddItemToArray(branches, branch);
        } else {
            cJSON_Delete(branch);
        }
    }
    if (!rc && one && !found)
        rc = ((*param = "tool_choice"),
              fail(msg, cap, "tool_choice names \"%.64s\", which is not one of the tools", one));
    if (!rc && !off && !(*schema = cJSON_PrintUnformatted(root))) rc = fail(msg, cap, "out of memory");
    cJSON_Delete(root);
    if (rc || off) {
        for (size_t j = 0; j < k; j++) free(list[j]);
        free(list);
        return rc;
    }
    *names = list, *n_names = k;
    return 0;
}

size_t tool_call_head(const ApiRequest *req, const char *text, size_t len, const char **name) {
    for (size_t i = 0; i < req->n_tools; i++) {
        char head[MAX_NAME + 40];
        int n = snprintf(head, sizeof head, "{\"name\":\"%s\",\"arguments\":", req->tool_names[i]);
        if (len >= (size_t)n && !memcmp(text, head, (size_t)n)) {
            *name = req->tool_names[i];
            return (size_t)n;
        }
    }
    *name = NULL;
    return 0;
}

// The call of choice c as its text is now: its head and the end of its arguments (0: no name yet).
size_t tool_call_args(const ApiRequest *req, const ApiChoice *c, const char **name, size_t *end, int *whole) {
    size_t head = tool_call_head(req, c->text, c->text_len, name);
    *whole = 0, *end = head;
    if (!head) return 0;
    // whole: the grammar ended it, {"name":...,"arguments":ARGS} with ARGS an instance
    cJSON *o = c->finish ? cJSON_ParseWithLength(c->text, c->text_len) : NULL;
    *whole = cJSON_IsObject(o);
    cJSON_Delete(o);
    if (*whole) *end = c->text_len - 1;      // less the call's closing brace
    else if (c->finish) *end = c->text_len;  // cut: every byte after the head is argument
    else {
        // while it runs, the last character may be the call's closing brace: held back
        size_t e = c->text_len;
        while (e > head && ((unsigned char)c->text[e - 1] & 0xC0) == 0x80) e--;
        *end = e > head ? e - 1 : head;
    }
    return head;
}

cJSON *tool_call_json(const char *id, size_t k, const char *name, const char *args, size_t n, int index) {
    char call_id[64];
    snprintf(call_id, sizeof call_id, "call_%s_%zu", strchr(id, '-') ? strchr(id, '-') + 1 : id, k);
    char *a = malloc(n + 1);
    if (a) {
        if (n) memcpy(a, args, n);
        a[n] = '\0';
    }
    cJSON *t = cJSON_CreateObject();
    if (index) cJSON_AddNumberToObject(t, "index", 0);
    if (name) {
        cJSON_AddStringToObject(t, "id", call_id);
        cJSON_AddStringToObject(t, "type", "function");
    }
    cJSON *f = cJSON_AddObjectToObject(t, "function");
    if (name) cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "arguments", a ? a : "");
    free(a);
    return t;
}

/*
 * conversation.c - a conversation as the command's input: with
 * --chat-template, -p (or stdin) is OpenAI's messages, a JSON array of
 * {"role", "content"} (or an object {"messages": [...]}), rendered with the
 * template (src/front/chat.h) into the prompt that generation continues,
 * its stops added to --stop's; `gpt --apply-template` prints that prompt.
 * A seeded answer is then gpt serve's /v1/chat/completions answer to the
 * same messages with the same template, bit for bit.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "front/chat.h"

// The messages of text[0..len) into *c, the template o names into *t. 0,
// or -1 after reporting (one line naming the option or the field).
static int open_conversation(const Options *o, const char *text, size_t len, ChatTemplate *t, ChatConversation *c) {
    GptError err = {{0}};
    const char *spec = o->chat_template ? o->chat_template : "gpt2";
    memset(c, 0, sizeof *c);
    if (chat_template_open(spec, t, &err) != 0) {
        runtime_error(NULL, "--chat-template %s: %s", spec, err.msg);
        return -1;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        char why[256];
        json_parse_error(text, len, end, why, sizeof why);
        runtime_error(NULL, "the conversation (a JSON array of messages): %s", why);
        chat_template_free(t);
        return -1;
    }
    const cJSON *messages = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "messages") : root;
    char msg[512];
    int rc = chat_conversation_from_json(messages, c, msg, sizeof msg);
    cJSON_Delete(root);
    if (rc != 0) {
        runtime_error(NULL, "the conversation: %s", msg);
        chat_template_free(t);
        return -1;
    }
    return 0;
}

int conversation_prompt(Options *o, Tokenizer *tok, char **text, size_t *len, ChatTemplate *t, int32_t **ids,
                        size_t *n) {
    ChatConversation c;
    if (open_conversation(o, *text, *len, t, &c) != 0) return -1;
    GptError err = {{0}};
    char *rendered = NULL;
    size_t rendered_len = 0;
    int rc = chat_tokens(tok, t, c.m, c.n, 1, ids, n, &err);
    if (rc == 0 && (rc = chat_render(t, c.m, c.n, 1, &rendered, &rendered_len, &err)) != 0) {
        free(*ids);
        *ids = NULL;
    }
    chat_conversation_free(&c);
    if (rc != 0) {
        report_error(&err);
        chat_template_free(t);
        return -1;
    }
    if (o->n_stops + t->n_stops > MAX_STOPS) {
        runtime_error(NULL, "--stop: %zu strings and the chat template's %zu are more than %d", o->n_stops,
                      t->n_stops, MAX_STOPS);
        free(rendered);
        free(*ids);
        *ids = NULL;
        chat_template_free(t);
        return -1;
    }
    for (size_t i = 0; i < t->n_stops; i++) o->stops[o->n_stops++] = t->stops[i];
    free(*text);
    *text = rendered, *len = rendered_len;
    return 0;
}

int run_apply_template(const Options *o) {
    char *text;
    size_t len;
    if (read_prompt(o, &text, &len) != 0) return EXIT_RUNTIME;
    ChatTemplate t;
    ChatConversation c;
    int rc = open_conversation(o, text, len, &t, &c);
    free(text);
    if (rc != 0) return EXIT_RUNTIME;
    char *out = NULL;
    size_t n = 0;
    GptError err = {{0}};
    rc = chat_render(&t, c.m, c.n, 1, &out, &n, &err) != 0 ? report_error(&err)
         : out_write(out, n) != 0 || out_flush() != 0 ? EXIT_RUNTIME
                                                       : EXIT_OK;
    free(out);
    chat_conversation_free(&c);
    chat_template_free(&t);
    return rc;
}

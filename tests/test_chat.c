/*
 * test_chat.c - chat templates (src/front/chat.c): each built-in renders a
 * conversation as its format defines it (ChatML as OpenAI documented it,
 * DialoGPT's turns each closed by <|endoftext|>, the plain transcript), a
 * template file gives exactly its strings, and every malformed file, an
 * unknown name and too many messages get one line naming what is wrong;
 * chat_tokens gives tokenizer_encode's ids of the rendered text with the
 * template's <|endoftext|> special and the content's plain; OpenAI's
 * messages are read from JSON, and each malformed one named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "check.h"
#include "front/chat.h"

static char dir[] = "/tmp/test_chat.XXXXXX";

static const char *path_in(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void write_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(text, 1, n, f) == n, "cannot write %s", path);
    if (f) fclose(f);
}

static const ChatMessage CONVERSATION[] = {
    {CHAT_SYSTEM, "Be brief.", 9},
    {CHAT_USER, "Hi", 2},
    {CHAT_ASSISTANT, "Hello!", 6},
    {CHAT_USER, "Name a colour.", 14},
};
enum { N_CONVERSATION = sizeof CONVERSATION / sizeof *CONVERSATION };

// template `spec` renders CONVERSATION as want (with the generation prompt)
// and has the stops listed (NULL-terminated)
static void expect_render(const char *spec, const char *want, const char *const *stops) {
    ChatTemplate t;
    GptError err = {{0}};
    if (chat_template_open(spec, &t, &err) != 0) {
        CHECK(0, "%s: %s", spec, err.msg);
        return;
    }
    char *out;
    size_t len;
    CHECK(chat_render(&t, CONVERSATION, N_CONVERSATION, 1, &out, &len, &err) == 0, "%s: %s", spec, err.msg);
    CHECK(out && len == strlen(want) && !strcmp(out, want), "%s renders\n%s\nwant\n%s", spec, out ? out : "(null)",
          want);
    free(out);
    size_t n = 0;
    while (stops[n]) n++;
    CHECK(t.n_stops == n, "%s: %zu stops, want %zu", spec, t.n_stops, n);
    for (size_t i = 0; i < n && i < t.n_stops; i++)
        CHECK(!strcmp(t.stops[i], stops[i]), "%s: stop %zu is %s, want %s", spec, i, t.stops[i], stops[i]);
    // without the generation prompt: the messages alone
    CHECK(chat_render(&t, CONVERSATION, N_CONVERSATION, 0, &out, &len, &err) == 0, "%s", err.msg);
    size_t gp = strlen(t.generation_prompt);
    CHECK(out && len + gp == strlen(want) && !strncmp(out, want, len), "%s without the generation prompt: %s", spec,
          out ? out : "(null)");
    free(out);
    chat_template_free(&t);
    chat_template_free(&t);  // idempotent
}

static void test_builtins(void) {
    static const char *const none[] = {NULL}, *const transcript[] = {"\nUser:", "\nSystem:", NULL},
                             *const chatml[] = {"<|im_end|>", NULL};
    expect_render("gpt2", "Be brief.<|endoftext|>Hi<|endoftext|>Hello!<|endoftext|>Name a colour.<|endoftext|>", none);
    expect_render("transcript",
                  "System: Be brief.\n\nUser: Hi\nAssistant: Hello!\nUser: Name a colour.\nAssistant:", transcript);
    expect_render("chatml",
                  "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n"
                  "<|im_start|>assistant\n",
                  chatml);
    CHECK(chat_role_from_name("user") == CHAT_USER && chat_role_from_name("assistant") == CHAT_ASSISTANT &&
              chat_role_from_name("system") == CHAT_SYSTEM && chat_role_from_name("tool") < 0 &&
              chat_role_from_name("User") < 0,
          "role names");
}

static void test_file(void) {
    const char *good = "{\"system\": {\"prefix\": \"[S]\", \"suffix\": \"\\n\"}, \"user\": {\"prefix\": \"Q: \"},"
                       " \"assistant\": {\"prefix\": \"A: \", \"suffix\": \"\\u00e9\\n\"},"
                       " \"generation_prompt\": \"A:\", \"stop\": [\"\\nQ:\", \"###\"]}";
    write_text(path_in("good.json"), good, strlen(good));
    static const char *const stops[] = {"\nQ:", "###", NULL};
    expect_render(path_in("good.json"), "[S]Be brief.\nQ: HiA: Hello!\xC3\xA9\nQ: Name a colour.A:", stops);
    // an empty object: every string empty, the contents run together
    write_text(path_in("empty.json"), "{}", 2);
    static const char *const none[] = {NULL};
    expect_render(path_in("empty.json"), "Be brief.HiHello!Name a colour.", none);
}

// chat_template_open(spec) fails with a one-line message holding want,
// which sends no one to a source file (an installed gpt has none)
static void expect_refused(const char *spec, const char *want) {
    ChatTemplate t;
    GptError err = {{0}};
    int rc = chat_template_open(spec, &t, &err);
    CHECK(rc != 0 && strstr(err.msg, want) && !strchr(err.msg, '\n'), "%s: rc %d, message '%s', want '%s'", spec, rc,
          err.msg, want);
    CHECK(!strstr(err.msg, ".h ") && !strstr(err.msg, ".h)") && !strstr(err.msg, ".c)"),
          "%s: the message names a source file: '%s'", spec, err.msg);
    if (rc == 0) chat_template_free(&t);
}

static void test_refused(void) {
    static const struct {
        const char *name, *text, *want;
    } bad[] = {
        {"not-json.json", "{\"user\": ", "not valid JSON (a chat template is a JSON object: man gpt, --chat-template)"},
        {"array.json", "[]", "a chat template is a JSON object"},
        {"unknown.json", "{\"tool\": {}}",
         "unknown member \"tool\" (a template may have system, user, assistant, generation_prompt or stop; man gpt, "
         "--chat-template)"},
        {"unknown-in-role.json", "{\"user\": {\"prefix\": \"a\", \"middle\": \"b\"}}",
         "unknown member user.\"middle\" (a role may have prefix or suffix; man gpt"},
        {"role-string.json", "{\"user\": \"Q: \"}", "user must be an object"},
        {"prefix-number.json", "{\"user\": {\"prefix\": 3}}", "user.prefix must be a string"},
        {"stop-string.json", "{\"stop\": \"###\"}", "stop must be an array of strings"},
        {"stop-empty.json", "{\"stop\": [\"a\", \"\"]}", "stop[1] must be a non-empty UTF-8 string"},
        {"stop-many.json", "{\"stop\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\","
                           "\"13\",\"14\",\"15\",\"16\",\"17\"]}",
         "more than 16 stop strings"},
        {"bad-utf8.json", "{\"generation_prompt\": \"\xC3(\"}", "generation_prompt is not valid UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_text(path_in(bad[i].name), bad[i].text, strlen(bad[i].text));
        expect_refused(path_in(bad[i].name), bad[i].want);
    }
    // too large: one byte over the bound, though valid JSON
    size_t n = CHAT_TEMPLATE_MAX_BYTES + 1;
    char *big = malloc(n);
    memset(big, ' ', n);
    big[0] = '{', big[n - 1] = '}';
    write_text(path_in("big.json"), big, n);
    free(big);
    expect_refused(path_in("big.json"), "a chat template file holds at most 65536");
    expect_refused("llama3", "chat template llama3: no such built-in (gpt2, transcript or chatml) or file");
    expect_refused(path_in("missing.json"), "missing.json");
}

static void test_limits(void) {
    ChatTemplate t;
    GptError err = {{0}};
    CHECK(chat_template_open("chatml", &t, &err) == 0, "%s", err.msg);
    ChatMessage *m = calloc(CHAT_MAX_MESSAGES + 1, sizeof *m);
    for (size_t i = 0; i <= CHAT_MAX_MESSAGES; i++) m[i] = (ChatMessage){CHAT_USER, "x", 1};
    char *out;
    size_t len;
    CHECK(chat_render(&t, m, CHAT_MAX_MESSAGES, 0, &out, &len, &err) == 0 &&
              len == CHAT_MAX_MESSAGES * strlen("<|im_start|>user\nx<|im_end|>\n"),
          "%d messages: %s", CHAT_MAX_MESSAGES, err.msg);
    if (out) free(out);
    CHECK(chat_render(&t, m, CHAT_MAX_MESSAGES + 1, 0, &out, &len, &err) != 0 && out == NULL &&
              strstr(err.msg, "a conversation holds at most 4096"),
          "one message too many: %s", err.msg);
    m[3].role = (ChatRole)7;
    CHECK(chat_render(&t, m, 5, 0, &out, &len, &err) != 0 && strstr(err.msg, "message 3: no such role"), "%s",
          err.msg);
    // no messages at all: the generation prompt alone
    CHECK(chat_render(&t, m, 0, 1, &out, &len, &err) == 0 && !strcmp(out, "<|im_start|>assistant\n"), "%s", err.msg);
    free(out);
    free(m);
    chat_template_free(&t);
}

// chat_tokens: the template's <|endoftext|> is the special token, the
// content's is text; the text between two specials is encoded whole (the
// ids of tokenizer_encode with allow_special over the rendered text when
// no content holds the literal)
static void test_tokens(void) {
    GptError err = {{0}};
    Tokenizer *tok = tokenizer_load("models", &err);
    CHECK(tok != NULL, "tokenizer_load(models): %s", err.msg);
    if (!tok) return;
    static const char *const specs[] = {"gpt2", "transcript", "chatml"};
    for (size_t k = 0; k < 3; k++) {
        ChatTemplate t;
        CHECK(chat_template_open(specs[k], &t, &err) == 0, "%s", err.msg);
        char *text;
        size_t len, n_want, n_got;
        int32_t *want, *got;
        CHECK(chat_render(&t, CONVERSATION, N_CONVERSATION, 1, &text, &len, &err) == 0, "%s", err.msg);
        CHECK(tokenizer_encode(tok, text, len, 1, &want, &n_want, &err) == 0, "%s", err.msg);
        CHECK(chat_tokens(tok, &t, CONVERSATION, N_CONVERSATION, 1, &got, &n_got, &err) == 0, "%s", err.msg);
        CHECK(n_got == n_want && !memcmp(got, want, n_want * sizeof *want), "%s: chat_tokens (%zu ids) is not "
              "tokenizer_encode(rendered, special) (%zu ids)", specs[k], n_got, n_want);
        free(text), free(want), free(got);
        chat_template_free(&t);
    }
    // content with the literal under gpt2: "a<|endoftext|>b" as text, then the template's 50256
    ChatTemplate t;
    CHECK(chat_template_open("gpt2", &t, &err) == 0, "%s", err.msg);
    ChatMessage m = {CHAT_USER, "a<|endoftext|>b", 15};
    int32_t *want, *got;
    size_t n_want, n_got;
    CHECK(tokenizer_encode(tok, m.content, m.len, 0, &want, &n_want, &err) == 0, "%s", err.msg);
    CHECK(chat_tokens(tok, &t, &m, 1, 1, &got, &n_got, &err) == 0, "%s", err.msg);
    CHECK(n_got == n_want + 1 && !memcmp(got, want, n_want * sizeof *want) && got[n_want] == 50256 &&
              n_want > 3,
          "content's <|endoftext|>: %zu ids, want the %zu of its text then 50256", n_got, n_want);
    free(want), free(got);
    // no messages, no generation prompt: <|endoftext|> alone (an empty prompt)
    CHECK(chat_tokens(tok, &t, &m, 0, 1, &got, &n_got, &err) == 0 && n_got == 1 && got[0] == 50256, "empty");
    free(got);
    chat_template_free(&t);
    tokenizer_free(tok);
}

// An answer sent back: the generation prompt, the answer as generated (its
// leading space too) and the assistant's suffix render as the conversation
// with the answer as the assistant's message, under each built-in (the
// transcript's "Assistant: " loses its space before one), as text and ids
static void test_answer_sent_back(void) {
    GptError err = {{0}};
    Tokenizer *tok = tokenizer_load("models", &err);
    CHECK(tok != NULL, "tokenizer_load(models): %s", err.msg);
    if (!tok) return;
    static const char *const specs[] = {"gpt2", "transcript", "chatml"};
    static const char *const answers[] = {" Blue, I think.", "Blue.", "  Two spaces"};
    for (size_t k = 0; k < 3; k++)
        for (size_t a = 0; a < 3; a++) {
            ChatTemplate t;
            CHECK(chat_template_open(specs[k], &t, &err) == 0, "%s", err.msg);
            ChatMessage m[2] = {{CHAT_USER, "Name a colour.", 14}, {CHAT_ASSISTANT, answers[a], strlen(answers[a])}};
            char *asked, *sent;
            size_t n_asked, n_sent;
            CHECK(chat_render(&t, m, 1, 1, &asked, &n_asked, &err) == 0, "%s", err.msg);
            CHECK(chat_render(&t, m, 2, 0, &sent, &n_sent, &err) == 0, "%s", err.msg);
            char want[256];
            // a stored answer without a leading space follows the whole prefix
            size_t pl = strlen(t.prefix[CHAT_ASSISTANT]);
            int generated = answers[a][0] == ' ' || !pl || t.prefix[CHAT_ASSISTANT][pl - 1] != ' ';
            if (generated) snprintf(want, sizeof want, "%s%s%s", asked, answers[a], t.suffix[CHAT_ASSISTANT]);
            else snprintf(want, sizeof want, "%.*s%s%s%s", (int)(n_asked - strlen(t.generation_prompt)), asked,
                          t.prefix[CHAT_ASSISTANT], answers[a], t.suffix[CHAT_ASSISTANT]);
            CHECK(!strcmp(sent, want), "%s, answer \"%s\": renders\n%s\nwant\n%s", specs[k], answers[a], sent, want);
            int32_t *ids_want, *ids_got;
            size_t n_want, n_got;
            CHECK(tokenizer_encode(tok, sent, n_sent, 1, &ids_want, &n_want, &err) == 0, "%s", err.msg);
            CHECK(chat_tokens(tok, &t, m, 2, 0, &ids_got, &n_got, &err) == 0, "%s", err.msg);
            CHECK(n_got == n_want && !memcmp(ids_got, ids_want, n_want * sizeof *ids_want),
                  "%s, answer \"%s\": chat_tokens is not the rendered text's ids", specs[k], answers[a]);
            free(asked), free(sent), free(ids_want), free(ids_got);
            chat_template_free(&t);
        }
    tokenizer_free(tok);
}

// chat_conversation_from_json: what it takes, and a message naming the
// field for what it refuses
static void test_messages(void) {
    static const struct {
        const char *json, *want;  // want: NULL (taken), or words of the message
    } cases[] = {
        {"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
         "{\"role\":\"developer\",\"content\":\"s\",\"name\":\"x\"}]",
         NULL},
        {"[]", "messages is empty"},
        {"{}", "messages must be an array"},
        {"[3]", "messages[0] must be an object"},
        {"[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"function\",\"content\":\"x\"}]",
         "messages[1].role: \"function\" is not a role"},
        {"[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"tool\",\"content\":\"x\"}]",
         "messages[1].role \"tool\": a tool's result needs its tool_call_id"},
        {"[{\"role\":\"user\",\"content\":\"x\",\"tool_call_id\":\"c\"}]", "only a tool's result has one"},
        {"[{\"role\":\"assistant\",\"tool_calls\":5}]", "messages[0].tool_calls must be an array"},
        {"[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}]",
         "messages[0].tool_calls[0] must be"},
        {"[{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":[{\"type\":\"function\",\"function\":"
         "{\"name\":\"f\",\"arguments\":\"{}\"}},3]}]",
         "messages[0].tool_calls[1] must be"},
        {"[{\"role\":\"user\"}]", "messages[0] has no content"},
        {"[{\"role\":\"user\",\"content\":null}]", "messages[0].content must be a string or an array"},
        {"[{\"role\":\"user\",\"content\":[[]]}]", "messages[0].content[0] must be an object"},
        {"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]", "part type \"image_url\""},
        {"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}]}]", "content[0].text must be a string"},
        {"[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]", "only an assistant's message has them"},
        {"[{\"role\":\"user\",\"content\":\"x\",\"audio\":{}}]", "unknown field \"audio\""},
        {"[{\"role\":\"user\",\"content\":\"x\",\"name\":1}]", "messages[0].name must be a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cJSON *a = cJSON_Parse(cases[i].json);
        ChatConversation c;
        char msg[512] = "";
        int rc = chat_conversation_from_json(a, &c, msg, sizeof msg);
        if (!cases[i].want) {
            CHECK(rc == 0 && c.n == 2 && c.m[0].role == CHAT_USER && c.m[0].len == 2 && !memcmp(c.m[0].content, "ab", 2) &&
                      c.m[1].role == CHAT_SYSTEM && c.m[1].len == 1,
                  "case %zu: %s", i, msg);
            chat_conversation_free(&c);
            chat_conversation_free(&c);  // idempotent
        } else {
            CHECK(rc != 0 && strstr(msg, cases[i].want), "case %zu: rc %d, '%s', want '%s'", i, rc, msg, cases[i].want);
        }
        cJSON_Delete(a);
    }
    // an assistant's tool calls render as its content, each call as gpt
    // serve generates one ({"name":..,"arguments":..}, the arguments as
    // sent), after the content it has; a tool's result as a user message
    {
        cJSON *a = cJSON_Parse("[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
                               "\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":"
                               "\"{\\\"zone\\\": \\\"CET\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\","
                               "\"content\":\"12:00\"},{\"role\":\"assistant\",\"content\":\"ok \",\"tool_calls\":"
                               "[{\"type\":\"function\",\"function\":{\"name\":\"a\",\"arguments\":\"{}\"}},"
                               "{\"type\":\"function\",\"function\":{\"name\":\"b\",\"arguments\":\"[]\"}}]}]");
        ChatConversation c;
        char msg[512] = "";
        static const char want0[] = "{\"name\":\"get_time\",\"arguments\":{\"zone\": \"CET\"}}";
        static const char want2[] = "ok {\"name\":\"a\",\"arguments\":{}}{\"name\":\"b\",\"arguments\":[]}";
        int rc = chat_conversation_from_json(a, &c, msg, sizeof msg);
        CHECK(rc == 0 && c.n == 3 && c.m[0].role == CHAT_ASSISTANT && c.m[0].len == strlen(want0) &&
                  !memcmp(c.m[0].content, want0, c.m[0].len) && c.m[1].role == CHAT_USER && c.m[1].len == 5 &&
                  !memcmp(c.m[1].content, "12:00", 5) && c.m[2].len == strlen(want2) &&
                  !memcmp(c.m[2].content, want2, c.m[2].len),
              "tool calls and a tool's result: rc %d '%s', message 0 '%.*s'", rc, msg, rc ? 0 : (int)c.m[0].len,
              rc ? "" : c.m[0].content);
        if (rc == 0) chat_conversation_free(&c);
        cJSON_Delete(a);
    }
    // one message too many
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i <= CHAT_MAX_MESSAGES; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", "x");
        cJSON_AddItemToArray(a, m);
    }
    ChatConversation c;
    char msg[512] = "";
    CHECK(chat_conversation_from_json(a, &c, msg, sizeof msg) != 0 && strstr(msg, "at most 4096"), "%s", msg);
    cJSON_Delete(a);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_builtins();
    test_file();
    test_refused();
    test_limits();
    test_tokens();
    test_answer_sent_back();
    test_messages();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cannot remove %s", dir);
    return check_exit("test_chat");
}

/*
 * chat.h - chat templates: how a conversation (messages with roles) becomes
 * the one prompt text a GPT-2 continues, and which strings end the answer.
 *
 * GPT-2 checkpoints ship no template, and gpt runs no Jinja: a template is
 * a prefix and a suffix per role, the text that opens the assistant's turn
 * (the generation prompt), and the stop strings of a turn. The rendering is
 *
 *   for each message:  prefix[role] content suffix[role]
 *   then, to answer:   generation_prompt
 *
 * so that a seeded chat answer can be `gpt -p RENDERED --special` with the
 * template's stops, bit for bit. A literal <|endoftext|> in the template's
 * strings is GPT-2's special token; in a message's content it is plain
 * text (chat_tokens), so a user cannot end a turn by typing it. (Then, and
 * only then, the command's --special would read the rendered text
 * otherwise.) gpt serve's /v1/chat/completions and gpt --chat-template
 * render with it (docs/chat.md). Built-in templates, by name:
 *
 *   gpt2        each message's content followed by <|endoftext|> (DialoGPT's
 *               turn format, and what transformers applied to GPT-2's
 *               tokenizer when it had no template of its own); the default
 *   transcript  "System: ...\n\nUser: ...\nAssistant: ...\n", answering
 *               after "Assistant:"; a turn ends at "\nUser:"
 *   chatml      "<|im_start|>ROLE\n...<|im_end|>\n", answering after
 *               "<|im_start|>assistant\n"; a turn ends at <|im_end|>
 *
 * or a file: a JSON object of at most CHAT_TEMPLATE_MAX_BYTES,
 *
 *   {"system":    {"prefix": "...", "suffix": "..."},
 *    "user":      {"prefix": "...", "suffix": "..."},
 *    "assistant": {"prefix": "...", "suffix": "..."},
 *    "generation_prompt": "...",
 *    "stop": ["...", ...]}
 *
 * every member optional (an absent string is empty), no other member; at
 * most MAX_STOPS stops, none empty.
 */
#ifndef GPT_CHAT_H
#define GPT_CHAT_H

#include <stddef.h>

#include "base/error.h"
#include "front/front.h"
#include "model/tokenizer.h"

typedef enum { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT, CHAT_ROLES } ChatRole;

enum {
    CHAT_TEMPLATE_MAX_BYTES = 64 * 1024,  // a template file
    CHAT_MAX_MESSAGES = 4096,             // a conversation
};

typedef struct ChatTemplate {
    char name[64];                 // the built-in's name, or the file's path
    char *prefix[CHAT_ROLES], *suffix[CHAT_ROLES];
    char *generation_prompt;
    char *stops[MAX_STOPS];
    size_t n_stops;
} ChatTemplate;

typedef struct {
    ChatRole role;
    const char *content;  // UTF-8, not NUL-terminated
    size_t len;
} ChatMessage;

// The names chat_template_open takes for the built-ins, for messages.
#define CHAT_TEMPLATE_NAMES "gpt2, transcript or chatml"

// The role a name stands for ("system", "user", "assistant"), or -1.
int chat_role_from_name(const char *name);
const char *chat_role_name(ChatRole r);

// *t = the built-in template `spec` names, else the template file at path
// spec. 0, or -1 with err naming the file and what is wrong with it (one
// line). A template opened is freed with chat_template_free.
int chat_template_open(const char *spec, ChatTemplate *t, GptError *err);
void chat_template_free(ChatTemplate *t);  // NULL-safe, idempotent

// The prompt of messages m (n of them, at most CHAT_MAX_MESSAGES) under t,
// each message its role's prefix, content and suffix, where a content that
// starts with a space follows the prefix less its final space, if it ends
// in one (an answer generated after "Assistant:" renders as generated),
// followed by t's generation prompt when add_generation_prompt: a
// malloc'd NUL-terminated string in *out (its length in *out_len). 0, or -1
// with err set (out of memory, too many messages).
int chat_render(const ChatTemplate *t, const ChatMessage *m, size_t n, int add_generation_prompt, char **out,
                size_t *out_len, GptError *err);

// The same conversation as token ids: the rendered text, where each
// literal <|endoftext|> of the template's strings is the special token and
// everything else (the content above all) is ordinary text; the text
// between two special tokens is encoded whole, as tiktoken's
// allowed_special does, so the ids are those of `gpt -p RENDERED --special`
// when no content holds the literal. An empty result is <|endoftext|>
// alone, as an empty prompt (prompt_tokens). *ids malloc'd; 0, or -1 with
// err set.
int chat_tokens(Tokenizer *tok, const ChatTemplate *t, const ChatMessage *m, size_t n, int add_generation_prompt,
                int32_t **ids, size_t *n_ids, GptError *err);

// A conversation read from JSON: OpenAI's "messages".
typedef struct {
    ChatMessage *m;  // (n) contents owned here
    size_t n;
} ChatConversation;

// The most parts a message's content array may have.
enum { CHAT_MAX_PARTS = 1024 };

// OpenAI's messages array a into *c: each an object {"role": "system" |
// "user" | "assistant" (also "developer", OpenAI's new name for system),
// "content": a string, or an array of {"type": "text", "text": "..."} parts,
// joined; "name" a string, ignored}; an assistant's "tool_calls" ([{"type":
// "function", "function": {"name", "arguments"}}], its content then may
// be null) appended to its content, each call as gpt serve generates one,
// {"name":NAME,"arguments":ARGUMENTS} with the arguments' text as sent; a
// tool's result {"role": "tool", "tool_call_id", "content"} as a user
// message (the templates have no tool role); at least one, at most
// CHAT_MAX_MESSAGES. 0, or -1 with msg (cap bytes) naming the message and
// what is wrong ("messages[2].role: \"tool\" is not a role gpt takes
// (system, user, assistant)"). Free with chat_conversation_free.
int chat_conversation_from_json(const cJSON *a, ChatConversation *c, char *msg, size_t cap);
void chat_conversation_free(ChatConversation *c);  // NULL-safe, idempotent

#endif

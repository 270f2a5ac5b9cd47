/*
 * chat_session.c - gpt chat: a conversation, one user message a line of
 * stdin (a terminal, or a transcript from a file or a pipe), each answered
 * under --chat-template (src/front/chat.h) and added to the conversation.
 *
 * Turn k (from 0, counted over the whole session, /reset included) renders
 * the conversation (the messages the context holds: all of them, less the
 * oldest that --context-shift dropped) with the template's generation prompt,
 * exactly as `gpt --chat-template T -p MESSAGES` does, and samples with the
 * seed -s + k: its answer is that single run's with -s SEED+k, bit for bit.
 * The previous answers are in the conversation as the text that was shown
 * (less what answer_skip says, so that they render as they were generated).
 *
 * The conversation stays in the KV cache: the engine (one sequence a turn)
 * shares prefixes, and remembers each released sequence's whole window, its
 * answer included (EngineConfig.share_outputs), so a turn computes only the
 * tokens where its prompt leaves what the cache holds: its new message, the
 * template's strings around it, and whatever of the last answer its
 * re-tokenized text does not repeat. Sharing never changes a bit (every
 * row's result is the same however its prefix was computed: engine.h).
 *
 * What this file does not do: edit lines (the terminal's own line
 * discipline does: backspace, Ctrl-U), keep a history, or read messages with
 * newlines (`gpt --chat-template T` takes a whole conversation as JSON).
 */
#include <cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "base/grow.h"
#include "base/utf8.h"
#include "cli.h"
#include "front/chat.h"

// The longest line (one user message, or a command) read: longer ones are
// refused, never held whole. Far above what one context of tokens takes.
enum { CHAT_LINE_MAX = 1 << 20 };

static const char help_text[] =
    "commands (a line that starts with /; // starts a message with /):\n"
    "  /reset       start a new conversation\n"
    "  /save FILE   write the conversation to FILE as JSON messages (gpt --apply-template and\n"
    "               gpt serve's /v1/chat/completions take them)\n"
    "  /help        this list\n"
    "Ctrl-C stops an answer; Ctrl-D, or Ctrl-C twice at the prompt, ends the chat.\n";

typedef struct {
    const Options *o;
    Session ss;
    int session_up;
    ChatTemplate t;
    int template_up;
    Engine e;
    int engine_up;
    const char *stops[MAX_STOPS];  // --stop's, then the template's
    size_t n_stops;
    // the conversation: every message (contents owned), the oldest first;
    // the prompt renders m[first..n) (--context-shift drops the oldest)
    ChatMessage *m;
    size_t n, cap, first;
    uint64_t seed;  // answer k samples with seed + k
    size_t turns;   // answers so far
    int tty;        // stdin is a terminal: a prompt, and errors do not end the chat
    char *line;     // (CHAT_LINE_MAX + 1) the line read
} Chat;

// ----------------------------------------------------------------------------
// the conversation

static int add_message(Chat *c, ChatRole role, const char *text, size_t len) {
    char *copy = malloc(len + 1);
    if (!copy || grow_array(&c->m, &c->cap, c->n + 1, sizeof *c->m) != 0) {
        free(copy);
        runtime_error(NULL, "out of memory for the conversation");
        return -1;
    }
    if (len) memcpy(copy, text, len);
    copy[len] = '\0';
    c->m[c->n++] = (ChatMessage){.role = role, .content = copy, .len = len};
    return 0;
}

static void drop_last_message(Chat *c) {
    free((char *)c->m[--c->n].content);
    if (c->first > c->n) c->first = c->n;
}

static void reset_conversation(Chat *c) {
    while (c->n) drop_last_message(c);
    c->first = 0;
}

// /save FILE: the messages (all of them, the dropped too) as a JSON array of
// {"role", "content"}, content as valid UTF-8 (an invalid byte as U+FFFD).
// 0, or -1 after reporting.
static int save_conversation(const Chat *c, const char *path) {
    cJSON *a = cJSON_CreateArray();
    int ok = a != NULL;
    for (size_t i = 0; ok && i < c->n; i++) {
        size_t len;
        char *valid = utf8_replace_invalid((const unsigned char *)c->m[i].content, c->m[i].len, &len);
        cJSON *msg = cJSON_CreateObject();
        ok = valid && msg && cJSON_AddStringToObject(msg, "role", chat_role_name(c->m[i].role)) &&
             cJSON_AddStringToObject(msg, "content", valid);
        free(valid);
        if (msg) cJSON_AddItemToArray(a, msg);
    }
    char *text = ok ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    if (!text) {
        runtime_error(NULL, "/save: out of memory");
        return -1;
    }
    FILE *f = fopen(path, "w");
    int bad = !f || fputs(text, f) == EOF || fputc('\n', f) == EOF;
    if (f && fclose(f) != 0) bad = 1;
    free(text);
    if (bad) {
        runtime_error(NULL, "/save %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// a turn

// The prompt of the conversation m[first..n) and the generation prompt, in
// *ids (malloc'd). With --context-shift, the oldest messages are dropped
// (c->first moves on, for good: the next turns share this turn's cache)
// until the prompt leaves the answer room for -n tokens, or half the
// context if that is less, or only the newest message is left. 0; -1 after
// reporting when the prompt does not fit the context at all.
static int turn_prompt(Chat *c, int32_t **ids, size_t *n_ids) {
    const GPT2Config *cfg = &c->ss.model.config;
    size_t n_ctx = (size_t)cfg->n_ctx, room = (size_t)c->o->max_tokens < n_ctx / 2 ? (size_t)c->o->max_tokens : n_ctx / 2;
    for (;;) {
        GptError err = {{0}};
        if (chat_tokens(c->ss.tok, &c->t, c->m + c->first, c->n - c->first, 1, ids, n_ids, &err) != 0)
            return report_error(&err), -1;
        if (*n_ids + room <= n_ctx || !c->o->context_shift || c->first + 1 >= c->n) break;
        free(*ids);
        *ids = NULL;
        c->first++;
    }
    if (*n_ids < n_ctx) return 0;
    if (c->o->context_shift)
        runtime_error(NULL, "the message is %zu tokens with the template's; the context holds %zu", *n_ids, n_ctx);
    else
        runtime_error(NULL, "the context is full: the conversation is %zu tokens, the context holds %zu (/reset starts "
                      "a new one; --context-shift drops the oldest messages)", *n_ids, n_ctx);
    free(*ids);
    *ids = NULL;
    return -1;
}

// What a turn did, for --json and --stats.
typedef struct {
    char *text;         // the answer as shown
    size_t len, cap;
    const char *stop_reason;
    uint64_t seed;
    size_t prompt_tokens, cached, prefill, positions, generated;
    double prefill_seconds, decode_seconds;
} Turn;

// --json's line for the turn: its text, tokens, why it stopped, its seed,
// and what its prompt cost. 0, or -1 after reporting.
static int turn_json(const Chat *c, const Turn *r, const Sequence *s) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "turn", (double)c->turns);
    cJSON_AddStringToObject(root, "text", r->text ? r->text : "");
    cJSON_AddItemToObject(root, "tokens", ids_json(s->tokens + s->n_prompt, s->n_generated));
    cJSON_AddStringToObject(root, "stop_reason", r->stop_reason);
    cJSON_AddItemToObject(root, "seed", seed_json(r->seed));
    cJSON_AddNumberToObject(root, "prompt_tokens", (double)r->prompt_tokens);
    cJSON_AddNumberToObject(root, "cached_tokens", (double)r->cached);
    cJSON_AddNumberToObject(root, "prefill_tokens", (double)r->prefill);
    cJSON_AddNumberToObject(root, "kv_positions", (double)r->positions);
    cJSON_AddNumberToObject(root, "dropped_messages", (double)c->first);
    int bad = out_json_line(root);
    cJSON_Delete(root);
    return bad || out_flush() != 0 ? -1 : 0;
}

// The bytes at the start of an answer that its message leaves out, so that
// the conversation renders to what the model read and wrote: when the
// template's assistant prefix is its generation prompt and more (the
// transcript's "Assistant: " after "Assistant:"), and the answer starts
// with that more (" Blue."), the message is the rest ("Blue."), which
// renders as "Assistant: Blue.", the generation prompt and the answer.
// Else 0: the message is the answer.
static size_t answer_skip(const ChatTemplate *t, const char *text, size_t len) {
    const char *prefix = t->prefix[CHAT_ASSISTANT] ? t->prefix[CHAT_ASSISTANT] : "";
    const char *gen = t->generation_prompt ? t->generation_prompt : "";
    size_t n = strlen(gen);
    if (strncmp(prefix, gen, n) != 0) return 0;
    size_t more = strlen(prefix + n);
    return more && more <= len && !memcmp(text, prefix + n, more) ? more : 0;
}

static double per_second(size_t n, double s) { return s > 0 ? (double)n / s : 0.0; }

// One answer to the conversation, its last message the user's: streamed to
// stdout (or a --json line at the end), added to the conversation.
// Ctrl-C ends it where it is (stop_reason "interrupted"; the text so far
// stays). 0; -1 after reporting an error of this turn (the user's message
// is dropped again); -2 when the chat cannot go on (stdout is gone, the
// model failed).
static int answer(Chat *c) {
    const Options *o = c->o;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (turn_prompt(c, &ids, &n_ids) != 0) {
        drop_last_message(c);
        return -1;
    }
    Turn r = {.seed = c->seed + c->turns, .prompt_tokens = n_ids};
    GenParams gp = {.sampling = o->sampling, .max_new = (size_t)o->max_tokens, .ignore_eos = o->ignore_eos,
                    .stops = c->stops, .n_stops = c->n_stops, .context_shift = o->context_shift,
                    .keep = (size_t)o->keep < n_ids ? (size_t)o->keep : n_ids};
    gp.sampling.seed = r.seed;
    GptError err = {{0}};
    Sequence s;
    int rc = -2, interrupted = 0;
    if (sequence_init(&s, &c->e, ids, n_ids, &gp, &err) != 0 || engine_admit(&c->e, &s, &err) != 1) {
        if (!*err.msg) gpt_error(&err, "the KV cache has no room for the turn");
        report_error(&err);
        goto done;
    }
    clear_interrupt();  // a Ctrl-C before the answer began is not meant for it
    Sequence *batch[1] = {&s};
    while (!s.stop && !interrupted) {
        if (was_interrupted()) {
            interrupted = 1;
            sequence_interrupt(&s);  // what it held back for a stop string is the answer's too
        } else if (engine_step(&c->e, batch, 1, &err) != 0) {
            report_error(&err);
            goto done;
        }
        if (s.stop == STOP_ERROR) {
            report_error(&s.error);
            goto done;
        }
        if (s.out_len && grow_array(&r.text, &r.cap, r.len + s.out_len + 1, 1) != 0) {
            runtime_error(NULL, "out of memory for the answer");
            goto done;
        }
        if (s.out_len) memcpy(r.text + r.len, s.out, s.out_len);
        r.len += s.out_len;
        if (r.text) r.text[r.len] = '\0';
        if (!o->json && s.out_len && (out_write(s.out, s.out_len) != 0 || out_flush() != 0)) goto done;
    }
    clear_interrupt();
    sequence_release(&s, &c->e);  // its window remembered for the next turn (share_outputs)
    r.stop_reason = interrupted ? "interrupted" : stop_reason_name(s.stop);
    r.cached = s.prefix_reused, r.prefill = s.prefill_tokens, r.positions = s.positions, r.generated = s.n_generated;
    r.prefill_seconds = s.prefill_seconds, r.decode_seconds = s.decode_seconds;
    size_t skip = answer_skip(&c->t, r.text, r.len);
    if (add_message(c, CHAT_ASSISTANT, r.text ? r.text + skip : "", r.len - skip) != 0) goto done;
    if (o->json ? turn_json(c, &r, &s) != 0 : out_write("\n", 1) != 0 || out_flush() != 0) goto done;
    if (s.stop == STOP_CONTEXT)
        note(o->quiet, "the context is full (%d positions): /reset starts a new conversation; --context-shift drops "
                       "the oldest messages", c->ss.model.config.n_ctx);
    if (interrupted && c->tty) note(o->quiet, "stopped (the answer so far stays in the conversation)");
    if (o->stats)
        fprintf(stderr, "turn %zu: prompt %zu tokens, %zu from the KV cache, %zu computed; %zu generated, %s; seed %llu; "
                        "%.1f tok/s prefill, %.1f tok/s decode\n", c->turns, r.prompt_tokens, r.cached, r.prefill,
                r.generated, r.stop_reason, (unsigned long long)r.seed, per_second(r.prefill, r.prefill_seconds),
                per_second(r.generated, r.decode_seconds));
    c->turns++;
    rc = 0;
done:
    sequence_free(&s, &c->e);
    free(r.text);
    free(ids);
    return rc;
}

// ----------------------------------------------------------------------------
// the lines

// One line of stdin into c->line without its newline (or CR LF): its
// length; -1 at the end of stdin, -2 when a signal interrupted the wait,
// -3 when it is longer than CHAT_LINE_MAX (the rest of it read and
// dropped), -4 on a read error (reported).
// A Ctrl-C that came after the prompt's check of the flag and before the
// read began would leave the read waiting for a line: so on a terminal
// (whose stdin is unbuffered, run_chat: stdio holds nothing unread) each
// byte is waited for with pselect, which lets the signals in only while it
// waits, after the flag was checked with them blocked. 0, or -2 when a
// signal came.
static int wait_for_stdin(void) {
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = 0;
    if (was_interrupted()) {
        rc = -2;
    } else {
        fd_set in;
        FD_ZERO(&in);
        FD_SET(STDIN_FILENO, &in);
        if (pselect(STDIN_FILENO + 1, &in, NULL, NULL, NULL, &old) < 0 && errno == EINTR) rc = -2;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static long read_line(Chat *c) {
    size_t len = 0;
    int over = 0, ch;
    for (;;) {
        if (c->tty && wait_for_stdin() != 0) return -2;
        if ((ch = getc(stdin)) == EOF || ch == '\n') break;
        if (len < CHAT_LINE_MAX) c->line[len++] = (char)ch;
        else over = 1;
    }
    if (ch == EOF && ferror(stdin)) {
        int why = errno;
        clearerr(stdin);
        if (why == EINTR) return -2;
        runtime_error(NULL, "stdin: %s", strerror(why));
        return -4;
    }
    if (ch == EOF && !len) return -1;
    if (over) return -3;
    if (len && c->line[len - 1] == '\r') len--;
    c->line[len] = '\0';
    return (long)len;
}

// A command line (it starts with /), its name, then blanks (spaces, tabs)
// and its argument; blanks at its end are no part of it (they are cut off
// here). A command that takes no argument and is given one is a fault, as
// an unknown one. 0 done, -1 after reporting a fault.
static int command(Chat *c, char *line, size_t len) {
    while (len && (line[len - 1] == ' ' || line[len - 1] == '\t')) line[--len] = '\0';
    int name = (int)strcspn(line, " \t");
    const char *arg = line + name + strspn(line + name, " \t");
#define IS(cmd) (name == (int)strlen(cmd) && !memcmp(line, cmd, (size_t)name))
    if ((IS("/reset") || IS("/help")) && *arg) {
        runtime_error(NULL, "%s: %.*s takes no argument", line, name, line);
        return -1;
    }
    if (IS("/reset")) {
        reset_conversation(c);
        if (c->tty) note(c->o->quiet, "a new conversation");
        return 0;
    }
    if (IS("/help")) return fputs(help_text, stderr), 0;
    if (IS("/save")) {
        if (!*arg) {
            runtime_error(NULL, "/save needs a file name (/save FILE)");
            return -1;
        }
        if (save_conversation(c, arg) != 0) return -1;
        if (c->tty) note(c->o->quiet, "saved %zu messages to %s", c->n, arg);
        return 0;
    }
#undef IS
    runtime_error(NULL, "%.*s: no such command (/help lists them)", name, line);
    return -1;
}

// The offset of the first byte of s[0..n) that no valid UTF-8 character
// holds, or -1 when every byte is in one.
static long invalid_utf8_at(const char *s, size_t n) {
    for (size_t at = 0; at < n;) {
        int32_t cp;
        size_t len = utf8_decode((const unsigned char *)s + at, n - at, &cp);
        if (cp < 0) return (long)at;
        at += len;
    }
    return -1;
}

// The turns, until the end of stdin: EXIT_OK; or the exit code of a fault
// (stdin not a terminal: the first fault ends the chat) or of Ctrl-C twice.
static int chat_loop(Chat *c) {
    int ctrl_c = 0;  // Ctrl-Cs at the prompt in a row
    for (size_t lineno = 1;; lineno++) {
        if (c->tty) fputs("> ", stderr);
        long len = was_interrupted() ? -2 : read_line(c);
        if (len == -2) {  // Ctrl-C at the prompt
            clear_interrupt();
            if (!c->tty || ++ctrl_c == 2) {
                if (c->tty) fputc('\n', stderr);
                return EXIT_INTERRUPTED;
            }
            fputs("\n(Ctrl-C again or Ctrl-D to leave)\n", stderr);
            continue;
        }
        ctrl_c = 0;
        if (len == -1) {
            if (c->tty) fputc('\n', stderr);
            return EXIT_OK;
        }
        int rc = 0;
        long bad;
        if (len == -4) return EXIT_RUNTIME;
        if (len == -3) {
            runtime_error(NULL, "stdin line %zu: longer than %d bytes", lineno, CHAT_LINE_MAX);
            rc = -1;
        } else if (nul_at(c->line, (size_t)len, 0) >= 0) {
            runtime_error(NULL, "stdin line %zu: holds a NUL byte", lineno);
            rc = -1;
        } else if (len == 0) {
            continue;  // an empty line is no turn
        } else if (c->line[0] == '/' && c->line[1] != '/') {
            rc = command(c, c->line, (size_t)len);
        } else if ((bad = invalid_utf8_at(c->line, (size_t)len)) >= 0) {
            // the template renders it and /save writes it as UTF-8: another
            // message than the bytes that would run
            runtime_error(NULL, "stdin line %zu: not valid UTF-8 at byte %ld (0x%02x): not sent", lineno,
                          bad + 1, (unsigned char)c->line[bad]);
            rc = -1;
        } else {
            const char *text = c->line + (c->line[0] == '/');  // "//x" is the message "/x"
            rc = add_message(c, CHAT_USER, text, (size_t)len - (c->line[0] == '/'));
            if (rc == 0) rc = answer(c);
            if (rc == -2) return EXIT_RUNTIME;
        }
        if (rc != 0 && !c->tty) return EXIT_RUNTIME;
    }
}

// ----------------------------------------------------------------------------
// the options: gpt's (options.c applies each value with gpt's rules), those
// that a chat has

// --help, with the settings' lines and the shared options' (help_from_template)
static const char chat_usage[] =
    "usage: gpt chat [options]       a conversation: each line of stdin a user message, each\n"
    "                                answered on stdout (one line of --json per turn)\n"
    "@shared model tokenizer dtype q8-act lora kv-type\n"
    "      --kv-budget SIZE    KV-cache memory, K/M/G suffixes, in whole blocks (default: two\n"
    "                          full contexts, the turn's and the conversation's kept blocks;\n"
    "                          at least one full context)\n"
    "      --parallel N        as gpt's; a chat runs one answer at a time: only 1\n"
    "@shared threads tune\n"
    "  -q, --quiet             no notes on stderr (the banner, a stopped answer, a full\n"
    "                          context); errors and --stats still\n"
    "      --chat-template T   gpt2 (each message then <|endoftext|>; the default),\n"
    "                          transcript (User: ...\\nAssistant:), chatml, or a template\n"
    "                          file (JSON: docs/chat.md); its stops end an answer\n"
    "@settings\n"
    "      --no-prefix-sharing each turn computes its whole prompt (the same answers)\n"
    "      --json              one JSON line per turn: text, tokens, stop_reason, seed, and\n"
    "                          prompt_tokens, cached_tokens, prefill_tokens, kv_positions,\n"
    "                          dropped_messages\n"
    "      --stats             a line per turn on stderr: its prompt, the tokens from the KV\n"
    "                          cache and those computed, the speed\n"
    "  -h, --help              this help\n"
    "\n"
    "stdin: one user message a line, valid UTF-8 (an empty line is none; //x is the\n"
    "message /x), or a command: /reset, /save FILE, /help. On a terminal Ctrl-C stops an\n"
    "answer, Ctrl-D (or Ctrl-C twice at the prompt) ends the chat.\n"
    "exit codes: 0 end of stdin, 1 load or input error (stdin not a terminal: the first\n"
    "bad line, command or turn), 2 usage error, 130 Ctrl-C at the prompt, or SIGTERM\n";

enum { C_TEMPLATE = 256, C_NO_PREFIX, C_JSON, C_STATS };

// gpt chat's own options besides the settings it takes (IN_CHAT; the
// shared ones are model_options.c's), each named as gpt's option whose
// rules it follows.
static const struct option CHAT_OPTIONS[] = {
    {"help", no_argument, 0, 'h'},
    {"chat-template", required_argument, 0, C_TEMPLATE},
    {"no-prefix-sharing", no_argument, 0, C_NO_PREFIX},
    {"json", no_argument, 0, C_JSON},
    {"stats", no_argument, 0, C_STATS},
    {0, 0, 0, 0},
};

// gpt chat --help on stdout: EXIT_OK, or EXIT_RUNTIME when stdout fails.
static int chat_help(void) {
    char *help = help_from_template(chat_usage, IN_CHAT);
    int rc = !help || out_write(help, strlen(help)) || out_flush() ? EXIT_RUNTIME : EXIT_OK;
    if (!help) runtime_error(NULL, "out of memory");
    free(help);
    return rc;
}

// argv (from "chat" on) into *o: 0 to run, else the exit code to leave
// with (after --help, or a usage error).
static int chat_options(int argc, char **argv, Options *o, int *done) {
    const int repeatable[] = {setting_code(setting_of(SETTING_STOP)), setting_code(setting_of(SETTING_LOGIT_BIAS)), 0};
    struct option table[OPTIONS_MAX + 1];
    size_t n = 0;
    for (const struct option *lo = CHAT_OPTIONS; lo->name; lo++) table[n++] = *lo;
    n += settings_options(IN_CHAT, table + n, OPTIONS_MAX - n);
    table[n] = (struct option){0, 0, 0, 0};
    OptionParser p;
    options_begin(&p, "chat", table, repeatable);
    options_defaults(o);
    o->mode = MODE_CHAT;
    *done = 1;
    for (int c; (c = options_next(&p, argc, argv)) != -1;) {
        if (c == OPTION_FAILED) return EXIT_USAGE;
        if (c == 'h') return chat_help();
        for (const struct option *lo = table; lo->name; lo++)
            if (lo->val == c) {
                int rc = option_apply(o, lo->name, p.flag, p.value);
                if (rc != 0) return rc;
            }
    }
    options_take_shared(o, &p.shared);
    options_take_settings(o);
    if (p.given[OPT_PARALLEL] && o->parallel != 1)
        return usage_error("chat", "%s %ld: a chat runs one answer at a time (only 1)", p.given[OPT_PARALLEL],
                           o->parallel);
    char msg[160];
    if (settings_check_keep(&o->gen, p.given[setting_code(setting_of(SETTING_KEEP))] != NULL, 0, 0, msg, sizeof msg))
        return usage_error("chat", "%s", msg);
    note_greedy_ignores(o);
    *done = 0;
    return 0;
}

// ----------------------------------------------------------------------------
// the session

// The limits the model sets a chat, checked before any line is read: the
// --keep rules, and the KV pool. One sequence a turn; a whole context in one
// step (a prompt, or the half a context shift computes again); a pool of
// two full contexts: the turn's, and the blocks the last turns left for it
// to share. --kv-budget may make it less, down to one context: a turn may
// take a whole one (its prompt and answer, or a shifted answer's window),
// and the conversation's limits (a full context, --context-shift) are the
// context's. 0 with *kv_blocks, or EXIT_USAGE after reporting.
static int chat_limits(const Options *o, const GPT2Config *cfg, size_t *kv_blocks) {
    char why[160];
    if (settings_check_keep(&o->gen, 0, 0, (size_t)cfg->n_ctx, why, sizeof why) != 0)
        return usage_error("chat", "%s", why);
    size_t block_bytes = kvcache_bytes_per_token(cfg, o->kv_dtype) * KV_BLOCK;
    size_t ctx_blocks = ((size_t)cfg->n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    *kv_blocks = kv_blocks_for_budget(cfg, o->kv_dtype, o->kv_budget, 1);
    if (*kv_blocks == 0)
        return usage_error("chat", "--kv-budget %s: less than one block of this model's KV cache (%d positions, %zu "
                                   "bytes)", o->kv_budget_arg, KV_BLOCK, block_bytes);
    if (*kv_blocks < ctx_blocks)
        return usage_error("chat", "--kv-budget %s: less than one context of this model's KV cache (%d positions, %zu "
                                   "bytes), which a turn may take whole", o->kv_budget_arg, cfg->n_ctx,
                           ctx_blocks * block_bytes);
    note_kv_budget(o->quiet, o->kv_budget_arg, o->kv_budget, *kv_blocks, block_bytes);
    return 0;
}


int run_chat(int argc, char **argv) {
    Options opts;
    int done;
    int rc = chat_options(argc, argv, &opts, &done);
    if (done) return rc;
    const Options *o = &opts;
    Chat c = {.o = o, .tty = isatty(STDIN_FILENO)};
    if (c.tty) setvbuf(stdin, NULL, _IONBF, 0);  // read_line waits for each byte (wait_for_stdin)
    GptError err = {{0}};
    rc = EXIT_RUNTIME;
    const char *spec = o->chat_template ? o->chat_template : "gpt2";
    catch_interrupts();
    if (chat_template_open(spec, &c.t, &err) != 0) {
        runtime_error(NULL, "--chat-template %s: %s", spec, err.msg);
        return EXIT_RUNTIME;
    }
    c.template_up = 1;
    if (o->n_stops + c.t.n_stops > MAX_STOPS) {
        runtime_error(NULL, "--stop: %zu strings and the chat template's %zu are more than %d", o->n_stops,
                      c.t.n_stops, MAX_STOPS);
        goto done;
    }
    for (size_t i = 0; i < o->n_stops; i++) c.stops[c.n_stops++] = o->stops[i];
    for (size_t i = 0; i < c.t.n_stops; i++) c.stops[c.n_stops++] = c.t.stops[i];
    c.line = malloc(CHAT_LINE_MAX + 1);
    if (!c.line) {
        runtime_error(NULL, "out of memory");
        goto done;
    }
    if ((rc = session_open(&c.ss, o)) != EXIT_OK) goto done;
    c.session_up = 1;
    const GPT2Config *cfg = &c.ss.model.config;
    size_t kv_blocks = 0;
    if ((rc = chat_limits(o, cfg, &kv_blocks)) != 0) goto done;
    rc = EXIT_RUNTIME;
    EngineConfig ec = {.max_seqs = 1, .max_step_tokens = (size_t)cfg->n_ctx, .kv_dtype = o->kv_dtype,
                       .kv_blocks = kv_blocks,
                       .share_prefixes = o->share_prefixes, .share_outputs = 1, .pool = c.ss.pool,
                       .plan = &c.ss.plan};
    if (engine_init(&c.e, &c.ss.model, c.ss.tok, &ec, &err) != 0) {
        report_error(&err);
        goto done;
    }
    c.engine_up = 1;
    c.seed = run_seed(o);
    if (c.tty)
        note(o->quiet, "chat with %s, template %s, seed %llu; /help lists the commands, Ctrl-D ends", c.ss.model_path,
             c.t.name, (unsigned long long)c.seed);
    chat_interrupts();
    rc = chat_loop(&c);
done:
    reset_conversation(&c);
    free(c.m);
    free(c.line);
    if (c.engine_up) engine_free(&c.e);
    if (c.session_up) session_close(&c.ss);
    if (c.template_up) chat_template_free(&c.t);
    return rc;
}

/*
 * common.c - what every mode of the command line shares: the note (-q
 * silences it), Ctrl-C and SIGTERM, the prompt and the seed of a run, the
 * peak memory, and the set-up of a run with a model from the options
 * (src/front/session.c does the work), so that each mode is only its own
 * work. Reporting a failure is src/front/report.c's, which the server shares.
 */
#include <cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"
#include "base/fileio.h"

// ----------------------------------------------------------------------------
// notes

// Sampling options that greedy decoding (--temp 0) leaves without effect:
// a note, not an error, since scripts pass them whatever the temperature.
// (A --jsonl line may set its own temperature: they are its defaults.)
void note_greedy_ignores(const Options *o) {
    if (o->sampling.temperature != 0 || (o->mode != MODE_GENERATE && o->mode != MODE_BATCH && o->mode != MODE_CHAT) || o->jsonl) return;
    char names[64] = "";
    const char *ignored[] = {o->sampling.top_k > 0 ? "--top-k" : NULL, o->sampling.top_p < 1 ? "--top-p" : NULL,
                             o->sampling.min_p > 0 ? "--min-p" : NULL, o->have_seed ? "--seed" : NULL};
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
        if (ignored[i]) {
            size_t at = strlen(names);
            snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "", ignored[i]);
        }
    if (*names) note(o->quiet, "%s: no effect with --temp 0 (greedy decoding takes the most likely token)", names);
}

// ----------------------------------------------------------------------------
// Ctrl-C and SIGTERM. Before the run's work starts (loading the model,
// reading the prompt, scoring) nothing is written until the end, so gpt
// exits 130 at once. Once it has started (defer_interrupts), the first one
// finishes the current step and ends the run as if it had stopped there
// (stop_reason "interrupted", the stats, exit 130); a second one ends the
// process at once, as usual.

static volatile sig_atomic_t interrupted;  // the flags a signal handler may set
static volatile sig_atomic_t deferred;     // 0: exit at once
static volatile sig_atomic_t repeating;    // gpt chat: SIGINT sets the flag every time

static void on_interrupt(int sig) {
    if (!deferred || (repeating && sig != SIGINT)) _exit(EXIT_INTERRUPTED);
    interrupted = 1;
    if (!repeating) signal(sig, SIG_DFL);
}

// A signal ignored when gpt started stays ignored, as POSIX tools do: a
// shell ignores SIGINT for a script's `cmd &`, so that Ctrl-C spares it.
static void catch_signal(int sig) {
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    signal(sig, on_interrupt);
}

void catch_interrupts(void) {
    interrupted = 0;
    deferred = 0;
    catch_signal(SIGINT);
    catch_signal(SIGTERM);
}

void defer_interrupts(void) { deferred = 1; }

void chat_interrupts(void) {
    struct sigaction old, sa;
    if (sigaction(SIGINT, NULL, &old) != 0 || old.sa_handler == SIG_IGN) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a read waiting for the user's line returns EINTR
    repeating = 1;
    deferred = 1;
    sigaction(SIGINT, &sa, NULL);
}

void clear_interrupt(void) { interrupted = 0; }

int was_interrupted(void) { return interrupted != 0; }

const volatile sig_atomic_t *interrupt_flag(void) { return &interrupted; }

// ----------------------------------------------------------------------------
// the prompt and the seed

int read_prompt(const Options *o, char **text, size_t *len) {
    GptError err = {{0}};
    if (o->prompt) {
        *len = strlen(o->prompt);
        *text = malloc(*len + 1);
        if (!*text) {
            runtime_error(NULL, "out of memory");
            return -1;
        }
        memcpy(*text, o->prompt, *len + 1);
        return 0;
    }
    if (isatty(STDIN_FILENO))
        note(o->quiet, "reading %s from stdin; end it with Ctrl-D (or pass -p)",
             o->mode == MODE_DETOKENIZE ? "token ids" : "the text");
    if (file_read_stream(stdin, "stdin", text, len, &err) != 0) return report_error(&err), -1;
    // `echo Hello | gpt` means the text "Hello": one final newline (or CR
    // LF) is the end of the input's last line, not part of the text. One
    // rule for every mode that reads a text (generation, --choice, --score,
    // --tokenize); --keep-newline keeps it. (--detokenize reads ids.)
    if (o->mode != MODE_DETOKENIZE && !o->keep_newline && *len && (*text)[*len - 1] == '\n') {
        (*text)[--*len] = '\0';
        if (*len && (*text)[*len - 1] == '\r') (*text)[--*len] = '\0';
    }
    // an empty stdin is most often a mistake (a script's variable unset, a
    // file not there): the run goes on, as -p "" does, but says so
    if (!*len && (o->mode == MODE_GENERATE || o->mode == MODE_CHOICE))
        note(o->quiet, "the prompt read from stdin is empty: starting from <|endoftext|> (-p \"\" says so without "
                       "this note)");
    return 0;
}

// The seed of a run: -s, or one drawn from the OS below 2^53 (so that a JSON
// reader keeps it exactly and `gpt -s SEED` repeats the run).
uint64_t run_seed(const Options *o) {
    return o->have_seed ? o->sampling.seed : draw_seed();
}

// ----------------------------------------------------------------------------
// memory

size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024;  // Linux reports KiB
}

// ----------------------------------------------------------------------------
// a run with a model

int session_open(Session *s, const Options *o) {
    ModelOptions mo = {.model_path = o->model_path, .tokenizer_path = o->tokenizer_path,
                       .weights = {.matrix_dtype = o->weight_dtype, .q4_pure = o->weight_q4_pure,
                                   .q8_int8 = o->weight_q8_int8},
                       .threads = o->threads, .tune = (int)o->tune, .version = GPT_VERSION,
                       .quiet = o->quiet};
    memcpy(mo.lora, o->lora, sizeof mo.lora);
    mo.n_lora = o->n_lora;
    return session_open_model(s, &mo);
}

// ----------------------------------------------------------------------------
// the output's grammar

int options_grammar(const Options *o, Grammar **out) {
    *out = NULL;
    ConstraintKind kind = o->grammar       ? CONSTRAINT_GRAMMAR
                          : o->json_schema ? CONSTRAINT_JSON_SCHEMA
                          : o->json_object ? CONSTRAINT_JSON_OBJECT
                                           : CONSTRAINT_REGEX;
    const char *arg = o->grammar ? o->grammar : o->json_schema ? o->json_schema : o->regex;
    if (!arg && !o->json_object) return EXIT_OK;
    // a value typed on the command line is the option's (exit 2); a file's
    // text is input (exit 1), named by its path. A schema is typed when it
    // starts with {, a grammar when it holds a rule's ::= (so a file whose
    // name holds ::= cannot be given); anything else names a file.
    const char *flag = kind == CONSTRAINT_GRAMMAR ? "--grammar" : kind == CONSTRAINT_JSON_SCHEMA ? "--json-schema"
                       : kind == CONSTRAINT_REGEX ? "--regex" : "--json-object";
    int inline_value = kind == CONSTRAINT_REGEX || kind == CONSTRAINT_JSON_OBJECT ||
                       (kind == CONSTRAINT_JSON_SCHEMA && arg[strspn(arg, " \t\r\n")] == '{') ||
                       (kind == CONSTRAINT_GRAMMAR && strstr(arg, "::="));
    GptError err = {{0}};
    char *text = NULL, what[4200];
    size_t len = 0;
    if (inline_value) {
        snprintf(what, sizeof what, "%s", flag);
    } else {
        if (file_read_all(arg, &text, &len, &err) != 0) {  // err names the path
            const char *hint = path_exists(arg)             ? ""
                               : kind == CONSTRAINT_GRAMMAR ? " (and not a grammar: GBNF text has a rule, NAME ::= ...)"
                                                            : " (and not a schema: one typed here starts with {)";
            runtime_error(NULL, "%s %s%s", flag, err.msg, hint);
            return EXIT_RUNTIME;
        }
        // --grammar's messages have always named the file alone
        if (kind == CONSTRAINT_GRAMMAR) snprintf(what, sizeof what, "%s", arg);
        else snprintf(what, sizeof what, "%s %s", flag, arg);
    }
    *out = constraint_compile(kind, inline_value ? arg : text, inline_value && arg ? strlen(arg) : len, what, &err);
    free(text);
    if (*out) return EXIT_OK;
    return inline_value ? usage_error(NULL, "%s", err.msg) : report_error(&err);
}

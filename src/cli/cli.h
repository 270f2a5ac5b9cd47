/*
 * cli.h - what the files of the gpt command line share.
 *
 *   main.c         argv -> Options, and the mode that runs them
 *   options.c      the options: --help text, the rules of each value, and
 *                  the modes they apply to (argv is read by
 *                  src/front/model_options.c, with the options gpt serve shares)
 *   common.c       what the modes share: Ctrl-C, the prompt, JSON helpers,
 *                  and a run's set-up (model, tokenizer, threads) from Options
 *   run_model.c    generation and scoring: output, --stats, --json (and the
 *                  reports of --completions and --choice)
 *   probs.c        log-probabilities out (--logprobs, --per-token, JSON) and
 *                  --choice, multiple choice by likelihood
 *   batch.c        --batch: prompts from stdin, one result line each; and
 *                  --completions N and --choice, run as one request of it
 *   tokenize.c     --tokenize and --detokenize
 *   conversation.c --chat-template's input (messages) and --apply-template
 *   chat_session.c gpt chat: turns read from a terminal or a transcript,
 *                  the conversation kept in the KV cache between them
 *   convert.c      gpt convert and gpt inspect
 *   tune.c         gpt tune: the matmul variants measured and saved
 *   embed.c        gpt embed: a vector per text, and the hidden states
 *   output.c       stdout, with every write checked
 *   progress.c     the progress line on stderr
 *
 * The command line is the only part of gpt that reads argv and stdin,
 * prints, and chooses exit codes: 0 success, 1 load, input or runtime
 * error, 2 usage error. stdout carries only the result (generated text, ids,
 * JSON); everything else goes to stderr.
 *
 * What the command shares with the server (reporting, finding the model, a
 * session, the rules of numbers and of a request's JSON fields) is in
 * src/front/front.h, which this header includes.
 */
#ifndef GPT_CLI_H
#define GPT_CLI_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "base/error.h"
#include "engine.h"
#include "front/front.h"
#include "model/model.h"
#include "sampler.h"
#include "base/threads.h"
#include "model/tokenizer.h"

typedef enum { MODE_GENERATE, MODE_SCORE, MODE_TOKENIZE, MODE_DETOKENIZE, MODE_BATCH, MODE_CHOICE, MODE_APPLY_TEMPLATE, MODE_CHAT } Mode;

enum { MAX_CHOICES = 64 };

typedef struct {
    Mode mode;
    const char *model_path;
    const char *tokenizer_path;
    const char *prompt;  // NULL: read stdin
    int keep_newline;    // keep the final newline of a prompt read from stdin
    GenSettings gen;     // the generation settings as given (settings.c); options_take_settings copies
                         // them into the fields below that the modes read
    long max_tokens;
    SamplerParams sampling;
    int have_seed;
    long threads;
    int weight_dtype;    // --dtype: matrices converted at load; -1 as stored
    int weight_q4_pure;  // --dtype q4-pure: weight_dtype Q4, with no Q8 (WeightOptions)
    int weight_q8_int8;  // --q8-act int8: Q8 matrices with int8 activations (WeightOptions)
    LoraRequest lora[LORA_MAX];  // --lora: adapters merged at load (ModelOptions)
    size_t n_lora;
    DType kv_dtype;      // --kv-type: F32 or F16
    int ignore_eos, echo, stats, json, special;
    int progress;        // --progress: the progress line even when stderr is no terminal
    int quiet;           // -q: no notes on stderr (the demo model's line, ...), errors still
    const char *grammar;       // --grammar FILE|GBNF: a GBNF grammar the output matches
    const char *json_schema;   // --json-schema FILE|JSON: a JSON Schema the output is an instance of
    int json_object;           // --json-object: the output is a JSON object
    const char *regex;         // --regex RE: the output matches RE whole
    const char *stops[MAX_STOPS];  // --stop
    size_t n_stops;
    int context_shift;   // --context-shift: past the context, start again from the kept tokens
    long keep;           // --keep N: the prompt tokens every window starts with
    long logprobs;       // --logprobs N: each token's log-probability and the N most likely; -1 off
    long completions;    // --completions N: N continuations, seeds -s, -s + 1, ... (default 1)
    const char *choices[MAX_CHOICES];  // --choice (MODE_CHOICE)
    size_t n_choices;
    // speculative decoding
    const char *draft_path;  // --draft: a draft model; NULL with --draft-dtype: the model itself
    int draft_dtype;         // --draft-dtype: its matrices converted at load; -1 as stored
    int draft_q4_pure;       // --draft-dtype q4-pure: draft_dtype Q4, with no Q8
    long draft_tokens;       // --draft-tokens: guesses per step; 0: chosen by the draft's cost
    long lookup_n;           // --lookup N: prompt lookup of N-grams; 0 off
    int blas;                // --blas: long prefill chunks through OpenBLAS
    int tune;                // --tune (a TuneMode; default $GPT_TUNE, else on)
    // --batch
    int jsonl, unordered, text_output, share_prefixes, stats_json;
    long parallel, prefill_chunk;
    uint64_t first_index;
    size_t kv_budget;    // bytes; 0: the default
    const char *kv_budget_arg;  // --kv-budget as typed, for messages
    // --score and generation
    int per_token;
    long stride;         // 0: the text must fit the context
    const char *chat_template;  // --chat-template NAME|FILE: the input is a conversation; NULL: a text
    int prepend_eos;     // --prepend-eos: <|endoftext|> before the text, its first token scored too
} Options;

// options.c
// Parses argv into *o. Returns 0, or the exit code to leave with: EXIT_USAGE
// after printing the usage error, EXIT_OK after --help or --version.
// *done says whether the program should exit with the returned code.
int parse_options(int argc, char **argv, Options *o, int *done);
// A front-end of its own options (gpt chat) with gpt's rules: the
// defaults; the value of gpt's option `name` (its long name; flag as typed,
// for messages) applied, 0 or the usage error's code; and what the shared
// options (front.h) said, into the fields the modes read.
void options_defaults(Options *o);
int option_apply(Options *o, const char *name, const char *flag, char *value);
void options_take_shared(Options *o, const SharedOptions *so);
void options_take_settings(Options *o);
// The note that --top-k, --top-p, --min-p and -s do nothing with --temp 0.
void note_greedy_ignores(const Options *o);

// output.c: writing stdout. Each returns 0, or -1 after reporting the
// error on stderr ("gpt: stdout: ..."); the caller stops and exits 1.
typedef struct cJSON cJSON;
int out_write(const void *p, size_t n);
int out_flush(void);
int out_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int out_json_line(const cJSON *root);  // unformatted, one line
// When stdout is a terminal and what out_write wrote last does not end a
// line, a newline, so that the shell's prompt does not follow the text on
// its line; into a file or a pipe nothing (the bytes stay the text's).
int out_end_text(void);
// Bytes as one line of text: \\, \n, \r, \t and \xHH for control bytes
// and for bytes that are not part of a whole UTF-8 character.
int print_escaped(const unsigned char *b, size_t len);

// common.c: the rest of what the modes share.
// The prompt: -p, else all of stdin less one final newline (unless
// --keep-newline). *text is malloc'd. 0, or -1 after reporting.
int read_prompt(const Options *o, char **text, size_t *len);
// -s, or a seed drawn from the OS below 2^53 (draw_seed).
uint64_t run_seed(const Options *o);
// SIGINT and SIGTERM (unless ignored when gpt started) exit 130 at once,
// until defer_interrupts(): from then on they set a flag (the first time;
// the second time they end the process), which the loops check after each step.
void catch_interrupts(void);
void defer_interrupts(void);
// gpt chat: from here on every SIGINT sets the flag and none ends the
// process (Ctrl-C stops an answer, the loop decides the rest), and a read
// of stdin it interrupts returns (EINTR); SIGTERM ends the process (130).
// clear_interrupt() lowers the flag.
void chat_interrupts(void);
void clear_interrupt(void);
int was_interrupted(void);
const volatile sig_atomic_t *interrupt_flag(void);  // for a library call to poll
size_t peak_rss_bytes(void);
// A session (front.h) for the options' -m, --tokenizer, --dtype and -t;
// EXIT_OK, or the exit code after reporting.
int session_open(Session *s, const Options *o);
// The grammar of --grammar, --json-schema, --json-object or --regex into
// *g (NULL when none is given; the caller's to grammar_free). EXIT_OK, or
// the exit code after reporting: a bad value typed on the command line
// (--regex, --json-schema {...}) is a usage error (2), a bad file 1.
int options_grammar(const Options *o, Grammar **g);

// run_model.c: gpt [--score] and --choice with a model.
int run_model(const Options *o);
// The "tuning:" block of --stats (how the matmul variants were chosen, one
// line per product) on e: 0, or -1 when e has failed.
int print_tuning(FILE *e, const TuneReport *t);
// tune.c: gpt tune, argv from the subcommand's name on.
int run_tune(int argc, char **argv);
// embed.c: gpt embed, argv from the subcommand's name on; an exit code
int run_embed(int argc, char **argv);

// probs.c
// One line of --per-token: the token's text escaped (print_escaped), TAB,
// its log-probability ("-" when t is NULL), then TAB text TAB log-probability
// of each of t's most likely tokens. 0, or -1 after reporting.
int print_token_logprob(const Tokenizer *tok, int32_t id, const TokenLogprob *t);
// Multiple choice: one candidate continuation of a prompt, scored.
typedef struct {
    const char *text;       // the choice, as given
    int32_t *ids;           // prompt + choice (candidate_tokens, engine.h)
    size_t n, first;        // ids[first..n) are the choice's tokens
    const TokenLogprob *lp; // (n - first) their log-probabilities
    double sum, mean, mean_per_byte;  // candidate_measure
    size_t bytes;           // the choice's tokens' bytes
} Candidate;
// sum, mean (per token), bytes and mean_per_byte of a choice whose lp is set.
void candidate_measure(const Tokenizer *tok, Candidate *c);
// The most likely of c[0..n) by sum (per_byte: by mean per byte); equal
// ones by the lower index.
size_t candidate_best(const Candidate *c, size_t n, int per_byte);
// Adds "choices" (each one's index, text, tokens, logprobs, sum, mean,
// bytes, mean_per_byte, context_tokens), "ranking" (indices by sum),
// "best" and "best_per_byte" to root.
void add_candidates_json(cJSON *root, const Candidate *c, size_t n);
// batch.c: gpt --batch.
int run_batch(const Options *o);
// Input line `index` (len bytes, without its newline) read as run_batch
// reads it under the options o (with --jsonl: the JSON parsed and every
// field checked; the prompt, or the choices, tokenized and checked against
// m's context), then freed: NULL when the line is good, else the "error"
// its output line carries (malloc'd). Nothing runs. tests/fuzz/fuzz_jsonl.c
// drives it.
char *batch_line_error(const Options *o, Tokenizer *tok, const Model *m, uint64_t index, const char *line,
                       size_t len);
// --completions N and --choice: the prompt as one request of the kind a
// --batch line makes (n completions, or choices), its sequences run through
// the scheduler (scheduler.h) with --batch's hooks, on an engine sized for
// it alone; then report(ctx, run) writes the result and returns the exit
// code. The command's own errors (a choice with no room in the context, a
// sequence's error) are reported here, as EXIT_RUNTIME.
typedef struct {
    const char *prompt;           // the prompt's text: --echo's, and each --choice is tokenized after it
    size_t prompt_len;
    const int32_t *ids;           // --completions: the prompt's tokens
    size_t n_ids;
    const Grammar *grammar;       // --completions: the output's grammar and its trie, or NULL
    const GrammarVocab *vocab;
} OneRequest;
// What ran, for the report (valid during its call).
typedef struct {
    const Engine *engine;
    const Sequence *seqs;         // one per completion (seeds seed, seed + 1, ...) or per choice
    size_t n_seqs;
    const char *const *texts;     // completion k's text (with --echo, after the prompt); NULL for choices
    Candidate *candidates;        // the choices, measured (candidate_measure) unless interrupted; NULL for completions
    uint64_t seed;                // the first completion's
    int interrupted;              // Ctrl-C or SIGTERM ended it (the text held back for a stop string let out)
} OneRun;
typedef int (*OneReport)(void *ctx, const OneRun *run);
int run_one_request(const Options *o, const Session *ss, const OneRequest *in, OneReport report, void *ctx);
// tokenize.c
int run_tokenize(const Options *o);
// conversation.c
typedef struct ChatTemplate ChatTemplate;
// --chat-template: the conversation in *text (*len bytes, malloc'd) as the
// prompt's ids (*ids malloc'd), *text replaced by the rendered prompt (for
// --echo), the template's stops added to o's (they point into *t, which
// the caller frees with chat_template_free after the run). 0, or -1 after
// reporting.
int conversation_prompt(Options *o, Tokenizer *tok, char **text, size_t *len, ChatTemplate *t, int32_t **ids,
                        size_t *n);
// gpt --apply-template: the prompt the conversation on -p or stdin renders
// to under --chat-template (default gpt2), on stdout. An exit code.
int run_apply_template(const Options *o);
// chat_session.c: gpt chat, a conversation kept in the KV cache between
// turns (docs/chat.md), argv from the subcommand's name on. An exit code.
int run_chat(int argc, char **argv);
// convert.c: argv from the subcommand's name on.
int run_convert(int argc, char **argv);
int run_inspect(int argc, char **argv);

#endif

/*
 * front.h - what the front-ends share: the command line (src/cli/) and the
 * server (src/serve/) both link these files, each decides the rest of what
 * its user sees. Nothing here reads argv or stdin.
 *
 *   report.c     the two ways to report a failure on stderr
 *   locate.c     finding the model (-m, $GPT_MODEL, the search, the demo
 *                model) and the tokenizer files
 *   session.c    a run's set-up: the model, its tokenizer, the threads; the
 *                seed drawn when none is given
 *   numbers.c    the rules of numbers typed as option values
 *   settings.c   the generation settings in one table: each one's flag,
 *                JSON key, range, where it is taken, the field it sets and
 *                its help; read from argv and from JSON through it
 *   request.c    the JSON of a request besides its settings (a --batch
 *                --jsonl line, a gpt serve body): parse errors, NULs,
 *                token ids, exact numbers
 *   constrain.c  a grammar from GBNF, a JSON Schema, "any JSON object" or
 *                a regular expression, with the bounds for untrusted input
 *   json.c       the JSON of tokens both write: ids, exact integers, and
 *                log-probabilities in OpenAI's legacy shape
 *   model_options.c  a front-end's command line: the options of a run with
 *                a model that both take, in one table, and the reading of
 *                argv (the front-end's own options beside them)
 *
 * Nothing here reads stdin; argv only as model_options.c reads what a
 * front-end hands it. Dependencies point one way: report.c depends on
 * nothing here, the other files report through it, and no file of the
 * library (src/ itself) includes this one.
 */
#ifndef GPT_FRONT_H
#define GPT_FRONT_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "engine.h"
#include "model/model.h"
#include "base/threads.h"
#include "kernels/tune.h"
#include "model/tokenizer.h"

typedef struct cJSON cJSON;

#define GPT_VERSION "0.1.0"  // gpt --version; part of the tuning wisdom's key

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

// The most stop strings a run or a request takes.
enum { MAX_STOPS = 16 };

// ----------------------------------------------------------------------------
// report.c: the one writer of the front-ends' messages (failures,
// warnings, notes), each one line on stderr.

// "gpt: MESSAGE"; returns EXIT_RUNTIME.
int report_error(const GptError *err);
// "gpt[ CMD]: MESSAGE (see gpt[ CMD] --help)"; returns EXIT_USAGE. cmd is
// NULL for the main command, or "convert", "inspect", "serve".
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// "gpt[ CMD]: MESSAGE" (cmd NULL for the main command, or "serve",
// "tune", ...); returns EXIT_RUNTIME.
int runtime_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// "gpt[ CMD]: warning: MESSAGE": something the user should know, no failure.
void warning(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// note() of a subcommand: "gpt CMD: MESSAGE", unless quiet.
void note_of(const char *cmd, int quiet, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// A note, not a failure (the demo model runs, generation stopped at the end
// of the context): "gpt: MESSAGE" on stderr, unless quiet (-q).
void note(int quiet, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// The note that --kv-budget ARG (asked bytes) holds `blocks` whole blocks of
// block_bytes, when that is less than asked (nothing when it is exact).
void note_kv_budget(int quiet, const char *arg, size_t asked, size_t blocks, size_t block_bytes);

// ----------------------------------------------------------------------------
// locate.c

// The demo model shipped with gpt (models/demo.bin, share/gpt/demo.bin).
#define DEMO_MODEL_FILE "demo.bin"
// -m, else $GPT_MODEL, else the search path of locate.c; NULL if none. A
// path found by searching is written into buf (cap bytes); *is_demo says
// whether it is the demo model (found only when no GPT-2 is).
const char *resolve_model_path(const char *model_flag, char *buf, size_t cap, int *is_demo);
// Loads the model resolve_model_path() finds, its matrices converted as wo
// says (--dtype; matrix_dtype -1: as stored); on failure prints why and
// returns EXIT_RUNTIME (EXIT_OK on success). path_out (cap bytes) gets the
// path. Running the demo model, it says so in one line on stderr.
int open_model(const char *model_flag, const WeightOptions *wo, Model *m, char *path_out, size_t cap, int quiet);
// Picks the tokenizer: tokenizer_path (--tokenizer), else the one stored in
// the model m (may be NULL), else the files beside model_path, else the
// shipped GPT-2 files. *owned says whether the caller must free the result.
Tokenizer *open_tokenizer(const char *tokenizer_path, const Model *m, const char *model_path,
                          int *owned, GptError *err);

// ----------------------------------------------------------------------------
// session.c: what a run with a model holds.

// The most --lora adapters one run merges (or gpt serve holds by name), and
// the bytes of a name with its NUL.
enum { LORA_MAX = 16, LORA_NAME_MAX = 64 };

typedef struct {
    const char *model_path;      // -m, or NULL: $GPT_MODEL or the search
    const char *tokenizer_path;  // --tokenizer, or NULL
    WeightOptions weights;       // --dtype, --q8-act
    LoraRequest lora[LORA_MAX];  // --lora, in the order given: merged at load
    size_t n_lora;
    long threads;                // -t
    int tune;                    // --tune: a TuneMode (0: off)
    const char *version;         // gpt's, for the tuning's wisdom key
    int quiet;                   // -q: no notes (the demo model's banner)
} ModelOptions;

// The model (-m, $GPT_MODEL or the search), its tokenizer (checked against
// the model's vocabulary) and the -t threads.
typedef struct {
    Model model;
    char model_path[4096];  // as found
    Tokenizer *tok;
    int tok_owned;
    ThreadPool *pool;
    MatmulPlan plan;        // the matmul variants of the model's products (tune.h)
    TuneReport tune;        // how they were chosen, for --stats
} Session;
// Opens all three; EXIT_OK, or the exit code after reporting (then *s is
// closed).
int session_open_model(Session *s, const ModelOptions *mo);
// The rest of a session once s->model is loaded from s->model_path (what a
// caller without the search does: the public API): the tokenizer, checked
// against the model's vocabulary, the threads and the matmul plan. 0, or -1
// with err set and *s closed. Prints nothing.
int session_finish(Session *s, const ModelOptions *mo, GptError *err);
void session_close(Session *s);  // idempotent

// A seed drawn from the OS below 2^53 (so that a JSON reader keeps it
// exactly and `gpt -s SEED` repeats the run): what a run without -s, and a
// request without "seed", runs with.
uint64_t draw_seed(void);

// ----------------------------------------------------------------------------
// numbers.c: strict number parsing. The whole string must be the number
// (no leading white space, which strto* would skip).

// 0, -1 not an integer, -2 beyond the type's range.
int parse_long(const char *s, long *out);
int parse_u64(const char *s, uint64_t *out);
// A decimal float (no hex, inf or nan): 0, -1 not a number, -2 out of range.
int parse_decimal(const char *s, float *out);
// A byte count with an optional K, M or G (powers of 1024). 0, -1 not a
// size, -2 beyond size_t.
int parse_size(const char *s, size_t *out);

// ----------------------------------------------------------------------------
// constrain.c: what a run's output must match, compiled to a Grammar.

typedef enum {
    CONSTRAINT_GRAMMAR,      // GBNF text (docs/grammars.md)
    CONSTRAINT_JSON_SCHEMA,  // a JSON Schema's text (docs/json-schema.md)
    CONSTRAINT_JSON_OBJECT,  // any JSON object (text unused)
    CONSTRAINT_REGEX,        // a regular expression, matched whole
} ConstraintKind;

// text[0..len) of the kind compiled, under the bounds for input from anyone
// (schema.h, regex.h, GrammarLimits; each sequence's mask cache at most 16
// MiB). `what` names the source in messages: "--json-schema", "regex",
// "response_format.json_schema.schema". Returns the grammar (the caller's
// to grammar_free), or NULL with err set: "WHAT: 2:7: expected ...",
// "WHAT: #/properties/x: uniqueItems is not supported", "WHAT: at byte 3:
// ...".
Grammar *constraint_compile(ConstraintKind kind, const char *text, size_t len, const char *what, GptError *err);

// ----------------------------------------------------------------------------
// settings.c: the generation settings, in one table (the flag, the JSON
// key, the kind and range, where each is taken, the field it sets, the
// help). Every front-end reads them through it: one range and one message
// per setting wherever it is given.

// Where a setting is taken: gpt's command line (generation, and --batch's
// defaults), gpt chat's, a --batch --jsonl line, a gpt serve body.
enum { IN_GPT = 1, IN_CHAT = 2, IN_JSONL = 4, IN_SERVE = 8, IN_ALL = 15 };

// The most completions of one prompt (--completions, "n").
enum { SETTINGS_N_MAX = 64 };

typedef enum {
    SETTING_MAX_TOKENS, SETTING_TEMPERATURE, SETTING_TOP_K, SETTING_TOP_P, SETTING_MIN_P, SETTING_REPEAT_PENALTY,
    SETTING_PRESENCE_PENALTY, SETTING_FREQUENCY_PENALTY, SETTING_LOGIT_BIAS, SETTING_SEED, SETTING_GRAMMAR,
    SETTING_JSON_SCHEMA, SETTING_JSON_OBJECT, SETTING_REGEX, SETTING_RESPONSE_FORMAT, SETTING_STOP,
    SETTING_IGNORE_EOS, SETTING_CONTEXT_SHIFT, SETTING_KEEP, SETTING_N, SETTING_ECHO, SETTING_LOGPROBS,
    SETTING_COUNT
} SettingId;

typedef enum {
    VALUE_INTEGER,     // a whole number in [lo, hi]
    VALUE_NUMBER,      // a decimal number in [lo, hi] ((lo, hi] when lo_open; hi INFINITY: no end)
    VALUE_SWITCH,      // a flag; a JSON true or false
    VALUE_SEED,          // 0 to 2^64 - 1 (JSON: digits below 2^53, or a string of digits)
    VALUE_BIAS,        // ID=B, repeatable; JSON {"ID": B}
    VALUE_STOP,          // a string, repeatable (argv: C escapes read); JSON a string or an array
    VALUE_CONSTRAINT,  // what the output matches: one of grammar, json_schema, json_object, regex,
                         // response_format
} ValueKind;

typedef struct {
    SettingId id;
    const char *flag;       // the long option ("max-tokens"); NULL: JSON only
    char letter;            // its short option, or 0
    const char *arg;        // its value's name in --help ("N"); NULL: a switch
    const char *key;        // the JSON field; NULL: the command line's only
    ValueKind kind;
    double lo, hi;          // VALUE_INTEGER, VALUE_NUMBER: the range
    int lo_open;            // (lo, hi] rather than [lo, hi]
    unsigned in;            // IN_*: where it is taken
    const char *help;       // gpt --help's text, lines split by \n
    const char *chat_help;  // gpt chat --help's, where it differs (NULL: help)
} Setting;

// What the settings say: a run's, a line's or a request's.
typedef struct {
    GenParams params;               // the sampling, max_new, ignore_eos, stops, logprobs, context_shift, keep, grammar
    const char *stops[MAX_STOPS];   // params.stops: into argv, or into stop_json
    cJSON *stop_json;               // a copy of a JSON "stop" value (the owner's to cJSON_Delete)
    size_t n;                       // completions of each prompt (default 1)
    int echo;                       // the prompt before the continuation
    int seed_given;                 // a seed was given (params.sampling.seed)
    unsigned char given[SETTING_COUNT];  // JSON: the fields read
    // the output's constraint, the first of the four given (a second is
    // refused): from argv its kind and text (a file's name or the text,
    // compiled by the front-end); from JSON compiled here
    char constraint_by[40];         // the flag or field that gave it ("" none)
    ConstraintKind constraint;
    const char *constraint_text;
    Grammar *grammar;               // JSON's, compiled (params.grammar points at it): the owner's to grammar_free
} GenSettings;

// The limits of a JSON reader: max_tokens above max_tokens_limit is
// refused (0: the table's 10^9), and logit_bias ids from vocab_size on (0:
// not known, then ids past int32; sampler_init refuses the rest).
typedef struct {
    size_t max_tokens_limit;
    size_t vocab_size;
} GenLimits;

// The table's rows in order (NULL past the end); by id, JSON key, long flag.
const Setting *setting_at(size_t i);
const Setting *setting_of(SettingId id);
const Setting *setting_by_key(const char *key);
const Setting *setting_by_flag(const char *flag);
// The defaults: temperature 1, top_p 1, repeat_penalty 1, 256 tokens, n 1.
void settings_defaults(GenSettings *g);
// What a value of s must be, in words: "an integer in [0, 20]".
void setting_range(const Setting *s, char *buf, size_t cap);
// The value v (argv's word, NULL for a switch; --stop's escapes are read
// in place) of setting s given as flag (as typed): 0, or -1 with the reason
// in msg ("--temp x: must be a number >= 0").
int setting_from_arg(GenSettings *g, const Setting *s, const char *flag, char *v, char *msg, size_t cap);
// Member number `member` (from 0, in the order of the text, which is
// cJSON's order) of the JSON object whose text is text[0..len): f. 1 when
// it is a setting taken from JSON and its value is good (applied to g), 0
// when it is none (the caller knows the field, or refuses it), -1 with the
// reason in msg ("max_tokens must be an integer in [0, 1000000000]").
int setting_from_json(GenSettings *g, const GenLimits *lim, const cJSON *f, const char *text, size_t len,
                      size_t member, char *msg, size_t cap);
// The --keep rules, named as flags or (json) fields: keep needs
// context_shift (keep_given: it was given), and is at most half the
// context n_ctx (0: not known yet). 0, or -1 with the reason.
int settings_check_keep(const GenSettings *g, int keep_given, int json, size_t n_ctx, char *msg, size_t cap);
// The getopt code of a setting with a flag: its letter, else
// SETTING_CODE_BASE + its id; and back (NULL: no setting's).
enum { SETTING_CODE_BASE = 0x140 };
int setting_code(const Setting *s);
const Setting *setting_by_code(int code);
// getopt_long's entries of the settings with a flag taken `in`, in the
// table's order, into out[0..cap): how many.
size_t settings_options(unsigned in, struct option *out, size_t cap);
// One option's --help lines (-LETTER when letter, --FLAG ARG; help split
// at \n): the option in columns 0..25, its text from column 26 (on the next
// line past 24 columns), into out (cap bytes, may be 0). Returns the
// length it needs.
size_t help_entry(char letter, const char *flag, const char *arg, const char *help, char *out, size_t cap);
// --help's lines of the settings taken `in` (IN_GPT or IN_CHAT), in the
// table's order, into out (cap bytes): "  -n, --max-tokens N      tokens ...".
// Returns the length it needs.
size_t settings_help(unsigned in, char *out, size_t cap);

// ----------------------------------------------------------------------------
// request.c: the checks of a JSON text that both make first, and the JSON
// numbers they write exactly.

// Token ids, as a --jsonl line's and a gpt serve body's prompt gives them:
// a JSON array a of integers, each in [0, vocab) (empty: *n 0, the caller
// decides). 0 with *ids (malloc'd) and *n; -1 with the reason in msg (cap
// bytes), naming field and the first bad element ("prompt: element 3 is
// not a token id in [0, 50257)").
int json_token_ids(const cJSON *a, size_t vocab, const char *field, int32_t **ids, size_t *n, char *msg, size_t cap);
// Why cJSON could not parse text[0..len), where it stopped (end, may be
// NULL): "invalid JSON at byte N", or, inside a string, that the string is
// bad (a bad escape, an unpaired surrogate). Into msg (cap bytes).
void json_parse_error(const char *text, size_t len, const char *end, char *msg, size_t cap);
// A number as JSON that reads back as exactly v (the shortest of 15, 16 or
// 17 digits that does; cJSON's own printing may drop the last bit); null
// for NaN and infinities.
cJSON *exact_json(double v);
// A seed as JSON: a number below 2^53, which every JSON reader (jq,
// JavaScript) holds exactly; at or past it a string of its digits, as the
// input accepts it (a number there would read back as another seed).
cJSON *seed_json(uint64_t seed);
// Where text[0..len) holds a NUL byte: the raw byte, or (json) a \u0000 in
// a JSON string; -1 if it does not. cJSON's strings end at a NUL, and no
// -p can hold one, so a prompt with one is refused, never cut.
long nul_at(const char *text, size_t len, int json);

// ----------------------------------------------------------------------------
// json.c: tokens as JSON.

cJSON *ids_json(const int32_t *ids, size_t n);
// float32 numbers as a JSON array, each with the fewest digits that read
// back as its bits (strtof); a non-finite one has none (the callers' are
// finite: forward.h fails on a NaN). NULL when out of memory.
cJSON *floats_json(const float *v, size_t n);
cJSON *u64_json(uint64_t v);  // exact digits (an index), which cJSON would round to a double
// The bytes of the tokens ids[0..n) together: where the text of the next
// one starts.
size_t tokens_bytes(const Tokenizer *tok, const int32_t *ids, size_t n);
// Log-probabilities in OpenAI's legacy completions shape: {"tokens":
// [text], "token_logprobs": [...], "top_logprobs": [{text: logprob}],
// "text_offset": [bytes], "token_ids": [...], "top_ids": [[...]]}, for
// ids[0..n), where ids[i] has lp[i - first] (i >= first) and the tokens
// before first have null (the first token of an echoed prompt). A token's
// text is its bytes when they are UTF-8, else "bytes:\xHH...". The first
// token's text_offset is `offset` (0 for a whole text; a stream's piece
// starts where the pieces before it ended).
cJSON *logprobs_json(const Tokenizer *tok, const int32_t *ids, size_t n, const TokenLogprob *lp, size_t first,
                     size_t offset);
// Log-probabilities in OpenAI's chat shape: {"content": [{"token", "logprob",
// "bytes": [each byte], "top_logprobs": [{"token", "logprob", "bytes"}]}],
// "refusal": null} for the n tokens lp[0..n) (lp[i].id the token; a
// token's text as logprobs_json writes it, its exact bytes in "bytes").
cJSON *chat_logprobs_json(const Tokenizer *tok, const TokenLogprob *lp, size_t n);

// ----------------------------------------------------------------------------
// model_options.c: a front-end's command line, read with getopt_long. The
// options of a run with a model are shared: -m, --tokenizer, --dtype,
// --q8-act, --kv-type, -t, --tune, -q, --parallel and --kv-budget mean the same, take
// the same values and are refused with the same messages in gpt and gpt
// serve. A front-end gives its own options beside them.

// The codes of the shared options without a letter; a front-end's own
// codes are below OPT_SHARED.
enum {
    OPT_SHARED = 0x180,  // above the settings' codes (SETTING_CODE_BASE + id)
    OPT_TOKENIZER = OPT_SHARED, OPT_DTYPE, OPT_KV_TYPE, OPT_TUNE, OPT_PARALLEL, OPT_KV_BUDGET, OPT_Q8_ACT,
    OPT_LORA,
    OPT_CODES  // one past the last code
};
// The shared options (-m, -t and -q by their letters), and the most a
// front-end's own and the shared ones may be together.
enum { N_SHARED_OPTIONS = 11, OPTIONS_MAX = 80 };
// --lora [NAME=]PATH[:SCALE] with value v (argv's word): appends the adapter
// to list[0..*n) (LORA_MAX at most), scaled by SCALE (default 1). SCALE is
// what follows the last colon when that is a decimal number, and v is then
// cut there (the path points into it); else all of v is the path. NAME
// (letters, digits, '-', '_', '.', before a '='; each once) names an
// adapter applied at run time: cmd "serve" and the command (NULL, which
// takes one with --batch only) take one.
// 0, or EXIT_USAGE after reporting (naming flag as typed).
int lora_option(LoraRequest *list, size_t *n, const char *flag, char *v, const char *cmd);
// A front-end's --help from its template, malloc'd (NULL when out of
// memory, or when an "@shared" names an option without help): the
// template's lines as they are, but a line "@settings" is the lines of the
// settings taken settings_in (IN_GPT, IN_CHAT, or 0 for none; settings.c),
// and a line "@shared NAME..." the lines of those shared options (long
// names), in its order, as the shared table words them.
char *help_from_template(const char *template, unsigned settings_in);
// options_next's answer after a usage error.
enum { OPTION_FAILED = -2 };

// What the shared options say.
typedef struct {
    ModelOptions model;         // -m, --tokenizer, --dtype, --lora, -t, --tune, -q
    DType kv_dtype;             // --kv-type: F32 (default) or F16
    long parallel;              // --parallel: sequences decoded together (default 16)
    size_t kv_budget;           // --kv-budget in bytes; 0: the default
    const char *kv_budget_arg;  // --kv-budget as typed, for messages
} SharedOptions;

// A command line being read.
typedef struct {
    const char *cmd;               // for usage_error: NULL (gpt) or "serve"
    const int *repeatable;         // codes of the options that may be given again (0 ends them), or NULL
    SharedOptions shared;          // the shared options: the defaults, then what was given
    const char *given[OPT_CODES];  // by code: the option's argv word ("-n20", "--temp"), or NULL
    char flag[64];                 // the option just read, "--name" (in full) or "-c", for messages
    char *value;                   // its value (in argv), or NULL
    struct option table[OPTIONS_MAX + 1];  // the front-end's options, then the shared ones
    char shorts[2 * OPTIONS_MAX + 2];      // getopt_long's letters
    int bad_tune_env;              // $GPT_TUNE is set to no mode: refused unless --tune is given
} OptionParser;

// Starts reading argv (getopt's state reset): own is the front-end's table,
// ended by a zero entry; an option whose code is a letter is also -LETTER.
// The shared options start at their defaults: the weights as stored, an F32
// cache, a thread per core, --tune from $GPT_TUNE (else on), --parallel 16.
void options_begin(OptionParser *p, const char *cmd, const struct option *own, const int *repeatable);
// The next option of argv: its code, with p->flag, p->value and
// p->given[code] set and a shared option applied to p->shared; -1 when
// every word is read; OPTION_FAILED after the usage error (one line naming
// the option as typed: an unknown one, a missing value, a value the
// option refuses, one value given twice, a word that is no option; at the
// end, a $GPT_TUNE that is no mode when --tune is not given).
int options_next(OptionParser *p, int argc, char **argv);

#endif

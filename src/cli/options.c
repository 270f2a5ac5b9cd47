/*
 * options.c - gpt's options: the --help text, parsing argv into Options,
 * and the rules every value follows. argv is read by src/front/
 * model_options.c, which applies the options gpt shares with gpt serve (-m,
 * --tokenizer, --dtype, --q8-act, --kv-type, -t, --tune, -q, --parallel, --kv-budget)
 * and hands back the others, applied here.
 *
 * Every value is checked and a bad one is refused: exit 2, one line naming
 * the flag as it was typed; none is silently changed. An option that does
 * not apply to the mode (--echo with --score, -n with --tokenize) is
 * refused the same way, naming the option and the mode, as is an option of
 * one value given twice (-p a -p b: which was meant?).
 */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

// --help, with the settings' lines and the shared options' (help_from_template)
static const char *usage_text =
    "usage: gpt [options]                       generate text from a prompt\n"
    "       gpt --batch [options] < prompts     one JSON line per prompt line (see below)\n"
    "       gpt --score [options]               log-probability of each token of a text\n"
    "       gpt --choice TEXT [--choice TEXT]... [options]\n"
    "                                           the most likely of continuations of a prompt\n"
    "       gpt --tokenize [--special] < text   print token ids (or -p TEXT; --json: an array)\n"
    "       gpt --detokenize < ids              the text of token ids (\"15496 995\" or [15496,995])\n"
    "       gpt --apply-template < messages     the prompt a conversation renders to (--chat-template)\n"
    "       gpt chat [options]                  a conversation, on a terminal or from a transcript\n"
    "                                           on stdin (see gpt chat -h)\n"
    "       gpt convert SRC OUT.bin             write a one-file model (see gpt convert -h)\n"
    "       gpt inspect FILE                    describe a model file\n"
    "       gpt embed [options] < texts         a vector per text, and hidden states (see gpt embed -h)\n"
    "       gpt tune [options]                  measure and save the kernels' variants (see gpt tune -h)\n"
    "       gpt serve [options]                 an OpenAI-compatible HTTP server (see gpt serve -h)\n"
    "\n"
    "model and input:\n"
    "@shared model\n"
    "  -p, --prompt TEXT       the prompt (or text); without it, all of stdin less one final\n"
    "                          newline (or CR LF), in every mode; an empty prompt (an empty\n"
    "                          stdin too, with a note) starts from <|endoftext|>\n"
    "      --keep-newline      keep the final newline of a text read from stdin\n"
    "@shared tokenizer dtype q8-act lora kv-type\n"
    "      --special           a literal <|endoftext|> in the input is the special token\n"
    "      --chat-template T   the input is a conversation, OpenAI's messages as JSON\n"
    "                          ([{\"role\": \"user\", \"content\": \"Hi\"}]), rendered with the\n"
    "                          template T into the prompt, its stops added to --stop's: gpt2\n"
    "                          (each message then <|endoftext|>; the default of\n"
    "                          --apply-template), transcript (User: ...\\nAssistant:),\n"
    "                          chatml, or a template file (JSON: docs/chat.md); the answer is\n"
    "                          gpt serve's /v1/chat/completions answer with T\n"
    "      --apply-template    print the prompt the conversation renders to, and nothing else\n"
    "generation:\n"
    "@settings\n"
    "multiple choice (a prompt and its candidate continuations):\n"
    "      --choice TEXT       a continuation to score (repeatable, up to 64): prints the\n"
    "                          most likely; --json: each one's tokens, log-probabilities,\n"
    "                          sum, mean per token and per byte, and the ranking\n"
    "speculative decoding (one prompt; the text stays exactly the plain run's):\n"
    "      --draft MODEL       a draft model with the same tokenizer guesses the next tokens\n"
    "                          and the model checks them all in one step (distilgpt2 for gpt2);\n"
    "                          any file -m reads: model.bin, safetensors, llm.c, GGUF\n"
    "      --draft-dtype T     the draft's matrices: f32, f16, bf16, q8, q6, q4 or q4-pure; without\n"
    "                          --draft, the draft is the model itself in T (--draft-dtype q8)\n"
    "      --draft-tokens K    guesses per step, 1 to 32 (default 6 when the draft reads at\n"
    "                          most a third of the model's bytes per token, else 4)\n"
    "      --lookup N          guess the tokens after the last earlier occurrence of the\n"
    "                          last N tokens (prompt lookup, no draft model), N in [1, 16]\n"
    "batch (--batch: prompts on stdin, one per line, read as they arrive):\n"
    "      --jsonl             each line is a JSON object {\"prompt\": a string or token ids, \"id\",\n"
    "                          \"max_tokens\", \"temperature\", \"top_k\", \"top_p\", \"min_p\",\n"
    "                          \"repeat_penalty\", \"presence_penalty\", \"frequency_penalty\",\n"
    "                          \"logit_bias\" ({\"ID\": B}), \"seed\", \"stop\", \"logprobs\", \"echo\",\n"
    "                          \"n\", \"ignore_eos\", \"context_shift\", \"keep\", \"choices\",\n"
    "                          \"grammar\" (GBNF text), \"json_schema\" (an object), \"regex\",\n"
    "                          \"response_format\" (OpenAI's)}; the options are the defaults\n"
    "@shared parallel kv-budget\n"
    "      --unordered         write each result when it is done, not in input order\n"
    "      --text              one completion per line, \\ as \\\\, newline as \\n, CR as \\r\n"
    "      --first-index N     the first line's index, 0 to 2^52 (default 0); seeds are -s + index\n"
    "      --prefill-chunk N   prompt tokens per step beside the decodes (default 128)\n"
    "      --no-prefix-sharing compute every prompt in full\n"

    "scoring (--score), and generation's log-probabilities:\n"
    "      --per-token         one line per token: its text and log-probability, tab-separated,\n"
    "                          the text escaped as --text's, and \\xHH for each byte of a\n"
    "                          partial UTF-8 character (not with --json, which has the ids);\n"
    "                          in generation instead of the text, each line then followed by\n"
    "                          TAB text TAB log-probability of the --logprobs N alternatives\n"
    "      --stride N          texts longer than the context: windows of the context, each\n"
    "                          N tokens after the last, scoring only its new tokens\n"
    "      --prepend-eos       <|endoftext|> before the text, so that its first token is scored\n"
    "                          too (lm-evaluation-harness's rule); --json's tokens start with it\n"
    "output:\n"
    "      --json              one JSON object on stdout at the end\n"
    "      --stats             KV-cache memory, speed and RSS report on stderr\n"
    "      --stats-json        the --stats report as one JSON line on stderr (--json's stats)\n"
    "  -q, --quiet             no notes on stderr (the demo model's line, the end of the\n"
    "                          context, ...); errors, --stats and --progress still\n"
    "      --progress          --batch and --score: a progress line on stderr even when it is\n"
    "                          not a terminal (on a terminal it is always shown)\n"
    "      --blas              prompts of 64 tokens or more through OpenBLAS's sgemm (float32\n"
    "                          matrices): not bitwise our kernels' result (see README)\n"
    "@shared threads tune\n"
    "  -h, --help              this help\n"
    "      --version           print the version\n"
    "\n"
    "exit codes: 0 success, 1 load/input/runtime error (--batch: any line failed),\n"
    "2 usage error, 130 interrupted, 141 stdout closed by its reader (SIGPIPE, as with | head)\n";

// A whole number in [lo, hi]: 0; -1 if it is not one or is below lo; -2 if
// it is a number beyond hi (or beyond long), which "must be an integer >= lo"
// would deny.
static int parse_bounded(const char *s, long lo, long hi, long *out) {
    long v;
    int rc = parse_long(s, &v);
    if (rc == -2) return *s == '-' ? -1 : -2;
    if (rc != 0 || v < lo) return -1;
    if (v > hi) return -2;
    *out = v;
    return 0;
}

// ----------------------------------------------------------------------------
// the options and the modes they apply to

enum {
    GEN = 1 << MODE_GENERATE, SCORE = 1 << MODE_SCORE, TOK = 1 << MODE_TOKENIZE,
    DETOK = 1 << MODE_DETOKENIZE, BATCH = 1 << MODE_BATCH, CHOICE = 1 << MODE_CHOICE,
    APPLY = 1 << MODE_APPLY_TEMPLATE,
    MODEL_MODES = GEN | SCORE | BATCH | CHOICE, ALL = GEN | SCORE | TOK | DETOK | BATCH | CHOICE | APPLY,
};

// getopt_long codes of gpt's own long-only options (the shared ones are
// front.h's OPT_*)
enum {
    O_VERSION = 256, O_SPECIAL, O_KEEP_NEWLINE, O_JSON, O_STATS, O_SCORE, O_TOKENIZE, O_DETOKENIZE,
    O_BATCH, O_JSONL, O_UNORDERED, O_TEXT, O_FIRST_INDEX, O_PREFILL_CHUNK,
    O_NO_PREFIX, O_STATS_JSON, O_PER_TOKEN, O_STRIDE, O_DRAFT, O_DRAFT_DTYPE, O_DRAFT_TOKENS, O_LOOKUP, O_PROGRESS, O_BLAS,
    O_CHOICE, O_CHAT_TEMPLATE, O_APPLY_TEMPLATE, O_PREPEND_EOS,
    O_COUNT  // one past the last
};
_Static_assert((int)O_COUNT <= (int)SETTING_CODE_BASE, "gpt's option codes run into the settings'");

// gpt's own options besides the settings (settings.c), which gpt_options
// adds; src/front/model_options.c adds the shared ones. An option whose
// code is a letter is also -LETTER.
static const struct option LONG_OPTIONS[] = {
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, O_VERSION},
    {"prompt", required_argument, 0, 'p'},
    {"keep-newline", no_argument, 0, O_KEEP_NEWLINE},
    {"special", no_argument, 0, O_SPECIAL},
    {"json", no_argument, 0, O_JSON},
    {"stats", no_argument, 0, O_STATS},
    {"score", no_argument, 0, O_SCORE},
    {"tokenize", no_argument, 0, O_TOKENIZE},
    {"detokenize", no_argument, 0, O_DETOKENIZE},
    {"batch", no_argument, 0, O_BATCH},
    {"jsonl", no_argument, 0, O_JSONL},
    {"unordered", no_argument, 0, O_UNORDERED},
    {"text", no_argument, 0, O_TEXT},
    {"first-index", required_argument, 0, O_FIRST_INDEX},
    {"prefill-chunk", required_argument, 0, O_PREFILL_CHUNK},
    {"no-prefix-sharing", no_argument, 0, O_NO_PREFIX},
    {"stats-json", no_argument, 0, O_STATS_JSON},
    {"per-token", no_argument, 0, O_PER_TOKEN},
    {"stride", required_argument, 0, O_STRIDE},
    {"draft", required_argument, 0, O_DRAFT},
    {"draft-dtype", required_argument, 0, O_DRAFT_DTYPE},
    {"draft-tokens", required_argument, 0, O_DRAFT_TOKENS},
    {"lookup", required_argument, 0, O_LOOKUP},
    {"progress", no_argument, 0, O_PROGRESS},
    {"blas", no_argument, 0, O_BLAS},
    {"choice", required_argument, 0, O_CHOICE},
    {"chat-template", required_argument, 0, O_CHAT_TEMPLATE},
    {"apply-template", no_argument, 0, O_APPLY_TEMPLATE},
    {"prepend-eos", no_argument, 0, O_PREPEND_EOS},
    {0, 0, 0, 0},
};
_Static_assert(sizeof LONG_OPTIONS / sizeof *LONG_OPTIONS - 1 + SETTING_COUNT + N_SHARED_OPTIONS <= OPTIONS_MAX,
               "OPTIONS_MAX");

// gpt's options: LONG_OPTIONS, then the settings gpt takes; a zero entry
// ends them (out holds OPTIONS_MAX + 1).
static void gpt_options(struct option *out) {
    size_t n = 0;
    for (const struct option *lo = LONG_OPTIONS; lo->name; lo++) out[n++] = *lo;
    n += settings_options(IN_GPT, out + n, OPTIONS_MAX - n);
    out[n] = (struct option){0, 0, 0, 0};
}

// The modes each option applies to, by its code.
static int modes_of(int code) {
    if (setting_by_code(code)) return GEN | BATCH;  // a generation setting: generation and the lines' defaults
    switch (code) {
    case 'm': case OPT_TOKENIZER: return ALL;
    case 'p': return GEN | SCORE | TOK | DETOK | CHOICE | APPLY;
    case O_KEEP_NEWLINE: return GEN | SCORE | TOK | CHOICE;
    case O_CHAT_TEMPLATE: return GEN | APPLY;
    case O_SPECIAL: return GEN | SCORE | TOK | BATCH | CHOICE;
    case OPT_DTYPE: case OPT_Q8_ACT: case OPT_KV_TYPE: case 't': case O_STATS: case OPT_TUNE: return MODEL_MODES;
    case OPT_LORA: return MODEL_MODES;
    case O_DRAFT: case O_DRAFT_DTYPE: case O_DRAFT_TOKENS: case O_LOOKUP: return GEN;
    case O_CHOICE: return CHOICE;
    case O_JSON: return GEN | SCORE | TOK | CHOICE;
    case O_JSONL: case OPT_PARALLEL: case OPT_KV_BUDGET: case O_UNORDERED: case O_TEXT: case O_FIRST_INDEX:
    case O_PREFILL_CHUNK: case O_NO_PREFIX: return BATCH;
    case O_STATS_JSON: return MODEL_MODES;
    case O_PER_TOKEN: return SCORE | GEN;
    case O_STRIDE: case O_PREPEND_EOS: return SCORE;
    case O_PROGRESS: return SCORE | BATCH;
    case O_BLAS: return GEN | SCORE;
    }
    return ALL;
}

static const char *mode_name(Mode m) {
    static const char *const names[] = {"generation", "--score", "--tokenize", "--detokenize", "--batch", "--choice",
                                        "--apply-template", "gpt chat"};
    return names[m];
}

// A count from 1 to max: 0, or -1 (not a whole number, or out of range).
static int counted(const char *s, long max, long *out) {
    long v;
    if (parse_long(s, &v) != 0 || v < 1 || v > max) return -1;
    *out = v;
    return 0;
}

// A usage error: reported, and its exit code returned.
// gpt chat takes some of gpt's options: its usage errors point to gpt chat -h
#define FAIL(...) usage_error(o->mode == MODE_CHAT ? "chat" : NULL, __VA_ARGS__)

// An option handler's answer for an option that is not its own.
enum { NOT_MINE = -1 };

// ----------------------------------------------------------------------------
// each option's value

// The defaults of gpt's own options (the shared ones are model_options.c's).
void options_defaults(Options *o) {
    memset(o, 0, sizeof *o);
    o->mode = MODE_GENERATE;
    settings_defaults(&o->gen);
    o->prefill_chunk = 128;
    o->share_prefixes = 1;
    o->draft_dtype = -1;
    o->draft_tokens = 0;  // 0: chosen by the draft's cost (run_model.c)
}

// The options without a value: 0, or NOT_MINE.
static int flag_option(Options *o, int c) {
    switch (c) {
    case O_KEEP_NEWLINE: o->keep_newline = 1; break;
    case O_SPECIAL: o->special = 1; break;
    case O_JSON: o->json = 1; break;
    case O_STATS: o->stats = 1; break;
    case O_STATS_JSON: o->stats_json = 1; break;
    case O_JSONL: o->jsonl = 1; break;
    case O_UNORDERED: o->unordered = 1; break;
    case O_TEXT: o->text_output = 1; break;
    case O_NO_PREFIX: o->share_prefixes = 0; break;
    case O_PER_TOKEN: o->per_token = 1; break;
    case O_PROGRESS: o->progress = 1; break;
    case O_BLAS: o->blas = 1; break;
    case O_PREPEND_EOS: o->prepend_eos = 1; break;
    default: return NOT_MINE;
    }
    return 0;
}

// -p, --choice and speculative decoding's options: 0, the usage error's code, or NOT_MINE.
static int generation_option(Options *o, int c, const char *flag, const char *v) {
    WeightOptions wo;
    switch (c) {
    case 'p': o->prompt = v; return 0;
    case O_CHOICE:
        if (!*v) return FAIL("%s: an empty choice has no tokens to score", flag);
        if (o->n_choices == MAX_CHOICES) return FAIL("%s: at most %d choices", flag, MAX_CHOICES);
        o->choices[o->n_choices++] = v;
        return 0;
    case O_DRAFT: o->draft_path = v; return 0;
    case O_DRAFT_DTYPE:
        if (weight_options_from_name(v, &wo) != 0) return FAIL("%s %s: must be " WEIGHT_DTYPE_NAMES, flag, v);
        o->draft_dtype = wo.matrix_dtype, o->draft_q4_pure = wo.q4_pure;
        return 0;
    case O_DRAFT_TOKENS:
        if (counted(v, 32, &o->draft_tokens) != 0) return FAIL("%s %s: must be an integer in [1, 32]", flag, v);
        return 0;
    case O_LOOKUP:
        if (counted(v, 16, &o->lookup_n) != 0) return FAIL("%s %s: must be an integer in [1, 16]", flag, v);
        return 0;
    }
    return NOT_MINE;
}

// --batch's and --score's options with a value: 0, the usage error's code,
// or NOT_MINE.
static int batch_option(Options *o, int c, const char *flag, const char *v) {
    int rc;
    switch (c) {
    case O_PREFILL_CHUNK:
        if (counted(v, 4096, &o->prefill_chunk) != 0) return FAIL("%s %s: must be an integer in [1, 4096]", flag, v);
        return 0;
    case O_FIRST_INDEX:
        // at most 2^52: the 2^52 lines after it that no run reaches keep
        // every index below 2^53, exact in any JSON reader
        if (parse_u64(v, &o->first_index) || o->first_index > (1ull << 52))
            return FAIL("%s %s: must be an integer in [0, 2^52]", flag, v);
        return 0;
    case O_STRIDE:
        rc = parse_bounded(v, 1, LONG_MAX, &o->stride);
        if (rc == -1) return FAIL("%s %s: must be an integer >= 1", flag, v);
        if (rc == -2) return FAIL("%s %s: out of range (at most %ld)", flag, v, LONG_MAX);
        return 0;
    }
    return NOT_MINE;
}

// Option c of gpt's own with value v (NULL for a flag): 0, or the usage
// error's code. The shared options are applied already.
static int apply_option(Options *o, int c, const char *flag, char *v) {
    if (c == O_CHAT_TEMPLATE) {  // opened when it is used: a file's faults are input errors (exit 1)
        o->chat_template = v;
        return 0;
    }
    const Setting *s = setting_by_code(c);
    char msg[320];
    if (s) return setting_from_arg(&o->gen, s, flag, v, msg, sizeof msg) != 0 ? FAIL("%s", msg) : 0;
    int rc = flag_option(o, c);
    if (rc == NOT_MINE) rc = generation_option(o, c, flag, v);
    if (rc == NOT_MINE) rc = batch_option(o, c, flag, v);
    return rc == NOT_MINE ? 0 : rc;
}

int option_apply(Options *o, const char *name, const char *flag, char *value) {
    const Setting *s = setting_by_flag(name);
    if (s) return apply_option(o, setting_code(s), flag, value);
    for (const struct option *lo = LONG_OPTIONS; lo->name; lo++)
        if (!strcmp(lo->name, name)) return apply_option(o, lo->val, flag, value);
    return FAIL("%s: not an option of gpt", flag);
}

// What the settings said (o->gen), into the fields the modes read.
void options_take_settings(Options *o) {
    const GenSettings *g = &o->gen;
    o->max_tokens = (long)g->params.max_new;
    o->sampling = g->params.sampling;
    o->have_seed = g->seed_given;
    o->ignore_eos = g->params.ignore_eos;
    o->context_shift = g->params.context_shift;
    o->keep = (long)g->params.keep;
    o->logprobs = g->params.logprobs ? (long)g->params.top_logprobs : -1;
    o->completions = (long)g->n;
    o->echo = g->echo;
    memcpy(o->stops, g->stops, sizeof o->stops);
    o->n_stops = g->params.n_stops;
    const char *constraint = *g->constraint_by ? g->constraint_text : NULL;
    o->grammar = g->constraint == CONSTRAINT_GRAMMAR ? constraint : NULL;
    o->json_schema = g->constraint == CONSTRAINT_JSON_SCHEMA ? constraint : NULL;
    o->regex = g->constraint == CONSTRAINT_REGEX ? constraint : NULL;
    o->json_object = *g->constraint_by && g->constraint == CONSTRAINT_JSON_OBJECT;
}

// What the shared options said, into the fields the modes read.
void options_take_shared(Options *o, const SharedOptions *so) {
    o->model_path = so->model.model_path;
    o->tokenizer_path = so->model.tokenizer_path;
    o->weight_dtype = so->model.weights.matrix_dtype;
    o->weight_q4_pure = so->model.weights.q4_pure;
    o->weight_q8_int8 = so->model.weights.q8_int8;
    memcpy(o->lora, so->model.lora, sizeof o->lora);
    o->n_lora = so->model.n_lora;
    o->threads = so->model.threads;
    o->tune = so->model.tune;
    o->quiet = so->model.quiet;
    o->kv_dtype = so->kv_dtype;
    o->parallel = so->parallel;
    o->kv_budget = so->kv_budget;
    o->kv_budget_arg = so->kv_budget_arg;
}

// ----------------------------------------------------------------------------
// the options together

// Each option given applies to the mode: 0, or the usage error's code.
// given: by code, the option as typed.
static int check_modes(const Options *o, const char *const *given) {
    for (size_t i = 0; i < o->n_lora; i++)
        if (o->lora[i].name && o->mode != MODE_BATCH)
            return FAIL("--lora %s=%s: a named adapter is applied at run time to the --batch --jsonl lines that name "
                        "it (\"lora\"); give --lora PATH to merge it", o->lora[i].name, o->lora[i].path);
    if (o->mode == MODE_BATCH && given[O_CHOICE])
        return FAIL("--choice does not apply to --batch (give each line its \"choices\" with --jsonl)");
    // Speculation checks one sequence's guesses per step; a --batch step is
    // already many sequences' rows, compute-bound, where guesses gain little.
    for (int c = O_DRAFT; c <= O_LOOKUP && o->mode == MODE_BATCH; c++)
        if (given[c])
            return FAIL("%.*s does not apply to --batch (speculative decoding speeds up one sequence; a batch "
                        "step is compute-bound already)", (int)strcspn(given[c], "="), given[c]);
    if (o->mode == MODE_BATCH && given[O_BLAS])
        return FAIL("--blas does not apply to --batch (OpenBLAS's bits depend on the rows in a call: a prompt in a "
                    "batch would not give its single run's result)");
    for (int c = 0; c < OPT_CODES; c++)
        if (given[c] && !(modes_of(c) & (1 << o->mode))) {
            // the flag as typed, without a value glued to it
            const char *g = given[c];
            size_t len = strcspn(g, "=");
            if (g[0] == '-' && g[1] != '-' && len > 2) len = 2;
            return FAIL("%.*s does not apply to %s", (int)len, g, mode_name(o->mode));
        }
    return 0;
}

// The options that need or exclude each other: 0, or the usage error's code.
static int check_combinations(const Options *o, const char *const *given) {
    if (o->lookup_n && (o->draft_path || o->draft_dtype >= 0))
        return FAIL("--lookup and --draft/--draft-dtype exclude each other (one draft per run)");
    if (given[O_DRAFT_TOKENS] && !o->lookup_n && !o->draft_path && o->draft_dtype < 0)
        return FAIL("--draft-tokens needs a draft (--draft, --draft-dtype or --lookup)");
    char msg[160];
    if (settings_check_keep(&o->gen, given[setting_code(setting_of(SETTING_KEEP))] != NULL, 0, 0, msg, sizeof msg))
        return FAIL("%s", msg);
    if (o->completions > 1 && o->mode == MODE_GENERATE && !o->json)
        return FAIL("--completions %ld writes a list of results: it needs --json", o->completions);
    // --text writes one text per input line and nothing else: what has no
    // place there is refused, never dropped
    if (o->completions > 1 && o->mode == MODE_BATCH && o->text_output)
        return FAIL("--completions %ld and --text exclude each other (--text writes one text per input line; without "
                    "--text each JSON line lists its \"completions\")", o->completions);
    if (o->logprobs >= 0 && o->mode == MODE_BATCH && o->text_output)
        return FAIL("--logprobs and --text exclude each other (--text writes only the text; without --text each JSON "
                    "line has its \"logprobs\")");
    if (o->completions > 1 && (o->lookup_n || o->draft_path || o->draft_dtype >= 0))
        return FAIL("--completions and speculative decoding exclude each other (a draft guesses for one sequence)");
    if (o->chat_template && o->special && o->mode == MODE_GENERATE)
        return FAIL("--special does not apply to --chat-template (the template's <|endoftext|> is the special token, "
                    "the messages are text)");
    // options that --json would silently drop
    if (o->per_token && o->json)
        return FAIL("--per-token and --json exclude each other (the JSON's tokens and logprobs are per token)");
    return 0;
}

// --help and --version: the text on stdout; EXIT_OK, or EXIT_RUNTIME when
// stdout fails.
static int print_help_or_version(int c) {
    if (c == 'h') {
        char *help = help_from_template(usage_text, IN_GPT);
        int rc = !help || out_write(help, strlen(help)) || out_flush() ? EXIT_RUNTIME : EXIT_OK;
        if (!help) runtime_error(NULL, "out of memory");
        free(help);
        return rc;
    }
    return out_printf("gpt " GPT_VERSION "\n") || out_flush() ? EXIT_RUNTIME : EXIT_OK;
}

static Mode mode_of_option(int c) {
    return c == O_SCORE ? MODE_SCORE : c == O_TOKENIZE ? MODE_TOKENIZE : c == O_DETOKENIZE ? MODE_DETOKENIZE
           : c == O_APPLY_TEMPLATE ? MODE_APPLY_TEMPLATE : MODE_BATCH;
}

int parse_options(int argc, char **argv, Options *o, int *done) {
    // each adds one
    const int repeatable[] = {setting_code(setting_of(SETTING_STOP)), O_CHOICE,
                              setting_code(setting_of(SETTING_LOGIT_BIAS)), 0};
    struct option table[OPTIONS_MAX + 1];
    gpt_options(table);
    OptionParser p;
    options_begin(&p, NULL, table, repeatable);
    options_defaults(o);
    *done = 1;  // until the options are read whole and agree
    int n_modes = 0, rc = 0;
    for (int c; rc == 0 && (c = options_next(&p, argc, argv)) != -1;) {
        if (c == OPTION_FAILED) return EXIT_USAGE;
        if (c == 'h' || c == O_VERSION) return print_help_or_version(c);
        if (c == O_SCORE || c == O_TOKENIZE || c == O_DETOKENIZE || c == O_BATCH || c == O_APPLY_TEMPLATE) {
            n_modes++;
            o->mode = mode_of_option(c);
        }
        rc = apply_option(o, c, p.flag, p.value);
    }
    if (rc != 0) return rc;
    options_take_shared(o, &p.shared);
    options_take_settings(o);
    if (n_modes > 1) return FAIL("--score, --tokenize, --detokenize, --batch and --apply-template exclude each other");
    // --choice turns generation into multiple choice (or is refused by a mode)
    if (o->n_choices && o->mode == MODE_GENERATE) o->mode = MODE_CHOICE;
    if ((rc = check_modes(o, p.given)) != 0 || (rc = check_combinations(o, p.given)) != 0) return rc;
    // Generation's log-probabilities go into --json, or else one line per
    // token (--per-token, which --logprobs alone implies): text has no place
    // for them. --per-token alone is --logprobs 0.
    if (o->mode == MODE_GENERATE && (o->per_token || (o->logprobs >= 0 && !o->json))) {
        o->per_token = 1;
        if (o->logprobs < 0) o->logprobs = 0;
    }
    *done = 0;
    return 0;
}

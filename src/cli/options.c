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
    "       gpt tune [options]                  measure and save the kernels' variants (see gpt tune -h)\n"
    "       gpt serve [options]                 an OpenAI-compatible HTTP server (see gpt serve -h)\n"
    "\n"
    "model and input:\n"
    "  -m, --model PATH        model.bin, a Hugging Face GPT-2 directory, model.safetensors,\n"
    "                          an llm.c checkpoint or a GGUF file of a GPT-2 model (llama.cpp's)\n"
    "                          (default: $GPT_MODEL, else the first of\n"
    "                          ./models/gpt2.bin, ./models/gpt2/, ~/.local/share/gpt/gpt2.bin\n"
    "                          ($XDG_DATA_HOME), share/gpt/gpt2.bin; with no GPT-2, the demo\n"
    "                          model demo.bin shipped with gpt)\n"
    "  -p, --prompt TEXT       the prompt (or text); without it, all of stdin less one final\n"
    "                          newline (or CR LF), in every mode; an empty prompt (an empty\n"
    "                          stdin too, with a note) starts from <|endoftext|>\n"
    "      --keep-newline      keep the final newline of a text read from stdin\n"
    "      --tokenizer PATH    directory with vocab.json + merges.txt, or a tokenizer.json\n"
    "      --dtype T           convert the weight matrices at load: f32, f16, bf16, q8, q6,\n"
    "                          q4 (q4 keeps wte, also the output layer, layer 0 and every\n"
    "                          attn.c_proj in q6) or q4-pure (every matrix in q4)\n"
"                          (default: as the file stores them)\n"
    "      --q8-act A          the activations a q8 matrix multiplies: int16 (default; the\n"
    "                          same bits on every CPU) or int8 (2^-8 of a block's largest\n"
    "                          input instead of 2^-15: other bits and a larger error, faster\n"
    "                          prefill with AVX512-VNNI; docs/models.md)\n"
    "      --lora PATH         a PEFT LoRA adapter directory merged into the weights at\n"
    "                          load, before --dtype's conversion; PATH:SCALE multiplies\n"
    "                          its change by SCALE (default 1); repeatable: the adapters\n"
    "                          add (docs/models.md)\n"
    "      --kv-type T         KV-cache elements: f32 (default) or f16 (half the memory)\n"
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
    "  -n, --max-tokens N      tokens to generate (default 256)\n"
    "      --temp T            temperature, 0 = greedy (default 1.0)\n"
    "      --top-k K           keep the K most likely tokens, 0 = off (default 0)\n"
    "      --top-p P           keep the smallest set reaching probability P, in (0,1] (default 1.0)\n"
    "      --min-p P           drop tokens below P x the top probability, 0 = off (default 0)\n"
    "      --repeat-penalty R  CTRL repetition penalty over the prompt and the output, 1.0 = off\n"
    "                          (default 1.0)\n"
    "      --presence-penalty X\n"
    "                          subtract X, in [-2, 2], from the logit of every token already\n"
    "                          generated (OpenAI's presence penalty; default 0)\n"
    "      --frequency-penalty X\n"
    "                          subtract X, in [-2, 2], times the times a token was generated\n"
    "                          from its logit (OpenAI's frequency penalty; default 0)\n"
    "      --logit-bias BIAS   ID=B: add B, in [-100, 100], to the logit of token ID\n"
    "                          (repeatable, up to 300 tokens): -100 bans it, 100 all but\n"
    "                          forces it. The order: the bias, --repeat-penalty, then the\n"
    "                          presence and frequency penalties, then --temp and the filters\n"
    "  -s, --seed N            random seed (default: random below 2^53, shown by --stats)\n"
    "      --grammar FILE      the output matches the GBNF grammar in FILE, or FILE itself when\n"
    "                          it holds ::= (docs/grammars.md); the stop reason is \"grammar\"\n"
    "                          when nothing more can follow; with --draft/--lookup the\n"
    "                          guesses are masked too (same text)\n"
    "      --json-schema SCHEMA\n"
    "                          the output is an instance of the JSON Schema in the file SCHEMA,\n"
    "                          or SCHEMA itself when it starts with {, written compactly\n"
    "                          (docs/json-schema.md: the subset, what is refused)\n"
    "      --json-object       the output is a JSON object, written compactly\n"
    "      --regex RE          the output matches the regular expression RE whole\n"
    "                          (Python's re.fullmatch; the subset in docs/json-schema.md);\n"
    "                          --grammar, --json-schema, --json-object and --regex exclude\n"
    "                          each other; in --batch they are every line's default\n"
    "      --stop STR          stop when the text contains STR (repeatable); STR is not output:\n"
    "                          the text ends before it, but tokens and logprobs keep the token\n"
    "                          that carried it (--json, --per-token: the tokens as generated);\n"
    "                          C escapes in STR: \\n \\t \\r \\\\ \\\" \\xHH (not \\x00)\n"
    "      --ignore-eos        keep going after <|endoftext|>\n"
    "      --context-shift     past the context, go on: the window starts again from the\n"
    "                          --keep first prompt tokens and the latest, half the context in\n"
    "                          all, computed anew (exactly a fresh run from those tokens with\n"
    "                          the sampler's state carried over); without it generation stops\n"
    "      --keep N            the prompt tokens every shift keeps (default 0; at most half\n"
    "                          the context; more than the prompt: the prompt)\n"
    "      --completions N     N continuations of the prompt, with --json (needed): a list\n"
    "                          \"completions\" (1 to 64, default 1); seeds -s, -s + 1, ...: each\n"
    "                          the run with its seed; the prompt computed once; in --batch\n"
    "                          every line's (a --jsonl line's \"n\"), listed when more than\n"
    "                          one (not with --text)\n"
    "      --echo              print the prompt before the continuation (--json: the text\n"
    "                          starts with it; with --logprobs, its tokens get theirs too)\n"
    "      --logprobs N        each generated token's log-probability and the N most likely\n"
    "                          tokens' (N in [0, 20]) under the model's distribution: the\n"
    "                          log-softmax of the raw logits, before the bias, the penalties,\n"
    "                          --temp and the filters; in --json, else as --per-token's lines\n"
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
    "      --parallel N        sequences decoded together (default 16)\n"
    "      --kv-budget SIZE    KV-cache memory for all of them, K/M/G suffixes, in whole blocks\n"
    "                          (default 1G, or twice what --parallel full contexts take if\n"
    "                          that is less)\n"
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
    "  -t, --threads N         threads (default: the number of cores)\n"
    "      --tune MODE         the matmul kernels' variants: on (default: measured once per\n"
    "                          CPU, model and threads, kept in ~/.cache/gpt), off, force\n"
    "                          (measure again); $GPT_TUNE the same; outputs never change\n"
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

// The C escape at r (a backslash): its length (2, or 4 for \xHH) with its
// byte in *byte, or 0 if it is none. \x00 is none: it would end the string.
static int escape_at(const char *r, char *byte) {
    static const char from[] = "ntr\\\"", to[] = "\n\t\r\\\"";
    const char *known = r[1] ? strchr(from, r[1]) : NULL;
    if (known) {
        *byte = to[known - from];
        return 2;
    }
    if (r[1] != 'x' || !isxdigit((unsigned char)r[2]) || !isxdigit((unsigned char)r[3])) return 0;
    char hex[3] = {r[2], r[3], 0};
    *byte = (char)strtol(hex, NULL, 16);
    return *byte ? 4 : 0;
}

// --stop's value with its C escapes read, so that --stop "\n\n" means what
// a JSONL "stop":"\n\n" means. In place (a byte takes less room than its
// escape), once every escape is known to be one; else -1 with *bad at the
// first that is not, the text untouched.
static int unescape(char *s, const char **bad) {
    char byte;
    for (const char *r = s; (r = strchr(r, '\\')); r += 2)
        if (!escape_at(r, &byte)) {
            *bad = r;
            return -1;
        }
    char *w = s;
    for (const char *r = s; *r;) {
        int n = *r == '\\' ? escape_at(r, &byte) : 0;
        *w++ = n ? byte : *r;
        r += n ? n : 1;
    }
    *w = '\0';
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
    O_VERSION = 256, O_SPECIAL, O_KEEP_NEWLINE, O_TEMP, O_TOP_K, O_TOP_P,
    O_MIN_P, O_REPEAT, O_STOP, O_GRAMMAR, O_JSON_SCHEMA, O_JSON_OBJECT, O_REGEX, O_IGNORE_EOS, O_ECHO, O_JSON, O_STATS, O_SCORE, O_TOKENIZE, O_DETOKENIZE,
    O_BATCH, O_JSONL, O_UNORDERED, O_TEXT, O_FIRST_INDEX, O_PREFILL_CHUNK,
    O_NO_PREFIX, O_STATS_JSON, O_PER_TOKEN, O_STRIDE, O_DRAFT, O_DRAFT_DTYPE, O_DRAFT_TOKENS, O_LOOKUP, O_PROGRESS, O_BLAS,
    O_LOGPROBS, O_CHOICE, O_CONTEXT_SHIFT, O_KEEP, O_COMPLETIONS, O_PRESENCE, O_FREQUENCY, O_LOGIT_BIAS,
    O_CHAT_TEMPLATE, O_APPLY_TEMPLATE, O_PREPEND_EOS,
    O_COUNT  // one past the last
};
_Static_assert((int)O_COUNT <= (int)OPT_SHARED, "gpt's option codes run into the shared ones");

// gpt's own options; src/front/model_options.c adds the shared ones. An
// option whose code is a letter is also -LETTER.
static const struct option LONG_OPTIONS[] = {
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, O_VERSION},
    {"prompt", required_argument, 0, 'p'},
    {"keep-newline", no_argument, 0, O_KEEP_NEWLINE},
    {"special", no_argument, 0, O_SPECIAL},
    {"max-tokens", required_argument, 0, 'n'},
    {"temp", required_argument, 0, O_TEMP},
    {"top-k", required_argument, 0, O_TOP_K},
    {"top-p", required_argument, 0, O_TOP_P},
    {"min-p", required_argument, 0, O_MIN_P},
    {"repeat-penalty", required_argument, 0, O_REPEAT},
    {"presence-penalty", required_argument, 0, O_PRESENCE},
    {"frequency-penalty", required_argument, 0, O_FREQUENCY},
    {"logit-bias", required_argument, 0, O_LOGIT_BIAS},
    {"seed", required_argument, 0, 's'},
    {"stop", required_argument, 0, O_STOP},
    {"grammar", required_argument, 0, O_GRAMMAR},
    {"json-schema", required_argument, 0, O_JSON_SCHEMA},
    {"json-object", no_argument, 0, O_JSON_OBJECT},
    {"regex", required_argument, 0, O_REGEX},
    {"ignore-eos", no_argument, 0, O_IGNORE_EOS},
    {"echo", no_argument, 0, O_ECHO},
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
    {"logprobs", required_argument, 0, O_LOGPROBS},
    {"choice", required_argument, 0, O_CHOICE},
    {"context-shift", no_argument, 0, O_CONTEXT_SHIFT},
    {"keep", required_argument, 0, O_KEEP},
    {"completions", required_argument, 0, O_COMPLETIONS},
    {"chat-template", required_argument, 0, O_CHAT_TEMPLATE},
    {"apply-template", no_argument, 0, O_APPLY_TEMPLATE},
    {"prepend-eos", no_argument, 0, O_PREPEND_EOS},
    {0, 0, 0, 0},
};
_Static_assert(sizeof LONG_OPTIONS / sizeof *LONG_OPTIONS - 1 + N_SHARED_OPTIONS <= OPTIONS_MAX, "OPTIONS_MAX");

// The modes each option applies to, by its code.
static int modes_of(int code) {
    switch (code) {
    case 'm': case OPT_TOKENIZER: return ALL;
    case 'p': return GEN | SCORE | TOK | DETOK | CHOICE | APPLY;
    case O_KEEP_NEWLINE: return GEN | SCORE | TOK | CHOICE;
    case O_CHAT_TEMPLATE: return GEN | APPLY;
    case O_SPECIAL: return GEN | SCORE | TOK | BATCH | CHOICE;
    case OPT_DTYPE: case OPT_Q8_ACT: case OPT_KV_TYPE: case 't': case O_STATS: case OPT_TUNE: return MODEL_MODES;
    case OPT_LORA: return MODEL_MODES;
    case 'n': case O_TEMP: case O_TOP_K: case O_TOP_P: case O_MIN_P: case O_REPEAT: case 's':
    case O_STOP: case O_IGNORE_EOS: case O_PRESENCE: case O_FREQUENCY: case O_LOGIT_BIAS: return GEN | BATCH;
    case O_DRAFT: case O_DRAFT_DTYPE: case O_DRAFT_TOKENS: case O_LOOKUP: return GEN;
    case O_COMPLETIONS: return GEN | BATCH;
    case O_GRAMMAR: case O_JSON_SCHEMA: case O_JSON_OBJECT: case O_REGEX: return GEN | BATCH;
    case O_ECHO: case O_LOGPROBS: case O_CONTEXT_SHIFT: case O_KEEP: return GEN | BATCH;
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
    o->max_tokens = 256;
    o->sampling.temperature = 1.0f;
    o->sampling.top_p = 1.0f;
    o->sampling.repeat_penalty = 1.0f;
    o->prefill_chunk = 128;
    o->share_prefixes = 1;
    o->draft_dtype = -1;
    o->draft_tokens = 0;  // 0: chosen by the draft's cost (run_model.c)
    o->logprobs = -1;
    o->completions = 1;
}

// The options without a value: 0, or NOT_MINE.
static int flag_option(Options *o, int c) {
    switch (c) {
    case O_KEEP_NEWLINE: o->keep_newline = 1; break;
    case O_SPECIAL: o->special = 1; break;
    case O_IGNORE_EOS: o->ignore_eos = 1; break;
    case O_ECHO: o->echo = 1; break;
    case O_CONTEXT_SHIFT: o->context_shift = 1; break;
    case O_GRAMMAR: o->grammar = optarg; break;
    case O_JSON_SCHEMA: o->json_schema = optarg; break;
    case O_JSON_OBJECT: o->json_object = 1; break;
    case O_REGEX: o->regex = optarg; break;
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

// --temp, --top-p, --min-p, --repeat-penalty and the presence and frequency
// penalties: 0, or the usage error's code.
static int sampling_decimal(Options *o, int c, const char *flag, const char *v) {
    float f;
    int rc = parse_decimal(v, &f);
    if (rc == -1) return FAIL("%s %s: not a number", flag, v);
    if (rc == -2) return FAIL("%s %s: out of range", flag, v);
    if (c == O_TEMP && !(f >= 0)) return FAIL("%s %s: must be >= 0", flag, v);
    if (c == O_TOP_P && !(f > 0 && f <= 1)) return FAIL("%s %s: must be in (0, 1]", flag, v);
    if (c == O_MIN_P && !(f >= 0 && f <= 1)) return FAIL("%s %s: must be in [0, 1]", flag, v);
    if (c == O_REPEAT && !(f > 0)) return FAIL("%s %s: must be > 0", flag, v);
    if ((c == O_PRESENCE || c == O_FREQUENCY) && !(fabsf(f) <= SAMPLER_PENALTY_MAX))
        return FAIL("%s %s: must be in [-2, 2]", flag, v);
    if (c == O_PRESENCE) o->sampling.presence_penalty = f;
    if (c == O_FREQUENCY) o->sampling.frequency_penalty = f;
    if (c == O_TEMP) o->sampling.temperature = f;
    if (c == O_TOP_P) o->sampling.top_p = f;
    if (c == O_MIN_P) o->sampling.min_p = f;
    if (c == O_REPEAT) o->sampling.repeat_penalty = f;
    return 0;
}

// --logit-bias ID=B: one more entry (the id is checked against the model's
// vocabulary when the sampler starts). 0, or the usage error's code.
static int logit_bias_option(Options *o, const char *flag, const char *v) {
    const char *eq = strchr(v, '=');
    char id_text[16];
    long id;
    float b;
    if (!eq || eq == v || (size_t)(eq - v) >= sizeof id_text)
        return FAIL("%s %s: must be ID=BIAS (a token id, then a number in [-100, 100])", flag, v);
    memcpy(id_text, v, (size_t)(eq - v));
    id_text[eq - v] = '\0';
    if (parse_bounded(id_text, 0, INT32_MAX - 1, &id) != 0)
        return FAIL("%s %s: the token id must be an integer in [0, %ld)", flag, v, (long)INT32_MAX);
    if (parse_decimal(eq + 1, &b) != 0 || !(fabsf(b) <= SAMPLER_BIAS_LIMIT))
        return FAIL("%s %s: the bias must be a number in [-100, 100]", flag, v);
    SamplerParams *sp = &o->sampling;
    for (size_t i = 0; i < sp->n_bias; i++)
        if (sp->bias[i].id == (int32_t)id) return FAIL("%s %s: token %ld has a bias already", flag, v, id);
    if (sp->n_bias == SAMPLER_BIAS_MAX) return FAIL("%s: at most %d tokens", flag, SAMPLER_BIAS_MAX);
    sp->bias[sp->n_bias++] = (SamplerBias){.id = (int32_t)id, .bias = b};
    return 0;
}

// -n, the sampler's options, -s and --stop: 0, the usage error's code, or
// NOT_MINE. v is the argv word itself (--stop's escapes are read in place).
static int sampling_option(Options *o, int c, const char *flag, char *v) {
    long k;
    int rc;
    const char *bad;
    switch (c) {
    case 'n':
        rc = parse_bounded(v, 0, LONG_MAX, &o->max_tokens);
        if (rc == -1) return FAIL("%s %s: must be an integer >= 0", flag, v);
        if (rc == -2) return FAIL("%s %s: out of range (at most %ld)", flag, v, LONG_MAX);
        return 0;
    case O_TEMP: case O_TOP_P: case O_MIN_P: case O_REPEAT: case O_PRESENCE: case O_FREQUENCY:
        return sampling_decimal(o, c, flag, v);
    case O_LOGIT_BIAS: return logit_bias_option(o, flag, v);
    case O_TOP_K:
        rc = parse_bounded(v, 0, INT32_MAX, &k);
        if (rc == -1) return FAIL("%s %s: must be an integer >= 0", flag, v);
        if (rc == -2) return FAIL("%s %s: out of range (at most %ld)", flag, v, (long)INT32_MAX);
        o->sampling.top_k = (int)k;
        return 0;
    case 's':
        if (parse_u64(v, &o->sampling.seed)) return FAIL("%s %s: must be an integer in [0, 2^64)", flag, v);
        o->have_seed = 1;
        return 0;
    case O_STOP:
        if (!*v) return FAIL("%s: an empty stop string would stop at once", flag);
        if (unescape(v, &bad) != 0)
            return FAIL("%s %s: '%.*s' is not an escape (\\n \\t \\r \\\\ \\\" or \\xHH, not \\x00)", flag, v,
                        bad[1] == 'x' ? 4 : 2, bad);
        if (o->n_stops == MAX_STOPS) return FAIL("%s: at most %d stop strings", flag, MAX_STOPS);
        o->stops[o->n_stops++] = v;
        return 0;
    }
    return NOT_MINE;
}

// -p, --logprobs, --completions, --keep, --choice and speculative
// decoding's options: 0, the usage error's code, or NOT_MINE.
static int generation_option(Options *o, int c, const char *flag, const char *v) {
    WeightOptions wo;
    int rc;
    switch (c) {
    case 'p': o->prompt = v; return 0;
    case O_LOGPROBS:
        rc = parse_bounded(v, 0, LOGPROBS_TOP_MAX, &o->logprobs);
        if (rc != 0) return FAIL("%s %s: must be an integer in [0, %d]", flag, v, LOGPROBS_TOP_MAX);
        return 0;
    case O_COMPLETIONS:
        if (counted(v, MAX_CHOICES, &o->completions) != 0)
            return FAIL("%s %s: must be an integer in [1, %d]", flag, v, MAX_CHOICES);
        return 0;
    case O_KEEP:
        rc = parse_bounded(v, 0, LONG_MAX, &o->keep);
        if (rc == -1) return FAIL("%s %s: must be an integer >= 0", flag, v);
        if (rc == -2) return FAIL("%s %s: out of range (at most %ld)", flag, v, LONG_MAX);
        return 0;
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
    int rc = flag_option(o, c);
    if (rc == NOT_MINE) rc = sampling_option(o, c, flag, v);
    if (rc == NOT_MINE) rc = generation_option(o, c, flag, v);
    if (rc == NOT_MINE) rc = batch_option(o, c, flag, v);
    return rc == NOT_MINE ? 0 : rc;
}

int option_apply(Options *o, const char *name, const char *flag, char *value) {
    for (const struct option *lo = LONG_OPTIONS; lo->name; lo++)
        if (!strcmp(lo->name, name)) return apply_option(o, lo->val, flag, value);
    return FAIL("%s: not an option of gpt", flag);
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
    // the output's constraint: one of four
    static const int constraints[] = {O_GRAMMAR, O_JSON_SCHEMA, O_JSON_OBJECT, O_REGEX};
    const char *first = NULL;
    for (size_t i = 0; i < sizeof constraints / sizeof *constraints; i++) {
        const char *g = given[constraints[i]];
        if (!g) continue;
        int len = (int)strcspn(g, "=");
        if (first)
            return FAIL("%.*s and %.*s exclude each other (the output matches one grammar)", (int)strcspn(first, "="),
                        first, len, g);
        first = g;
    }
    if (given[O_KEEP] && !o->context_shift) return FAIL("--keep needs --context-shift (it says what a shift keeps)");
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
    if (c == 'h') return out_write(usage_text, strlen(usage_text)) || out_flush() ? EXIT_RUNTIME : EXIT_OK;
    return out_printf("gpt " GPT_VERSION "\n") || out_flush() ? EXIT_RUNTIME : EXIT_OK;
}

static Mode mode_of_option(int c) {
    return c == O_SCORE ? MODE_SCORE : c == O_TOKENIZE ? MODE_TOKENIZE : c == O_DETOKENIZE ? MODE_DETOKENIZE
           : c == O_APPLY_TEMPLATE ? MODE_APPLY_TEMPLATE : MODE_BATCH;
}

int parse_options(int argc, char **argv, Options *o, int *done) {
    static const int repeatable[] = {O_STOP, O_CHOICE, O_LOGIT_BIAS, 0};  // each adds one
    OptionParser p;
    options_begin(&p, NULL, LONG_OPTIONS, repeatable);
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

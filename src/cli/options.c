/*
 * options.c - gpt's options: the --help text, parsing argv into Options, and
 * the rules every number must follow. Every value is checked here and a bad
 * one is refused (exit 2, one line naming the flag); none is silently changed.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

// A usage error ends the parse: *done is set and the exit code returned.
#define FAIL(...) (*done = 1, usage_error(NULL, __VA_ARGS__))

static const char *usage_text =
    "usage: gpt [options]                       generate text from a prompt\n"
    "       gpt --score [options]               log-probability of each token of a text\n"
    "       gpt --tokenize [--special] < text   print token ids\n"
    "       gpt --detokenize < ids              print the text of token ids\n"
    "       gpt convert SRC OUT.bin             write a one-file model (see gpt convert -h)\n"
    "       gpt inspect FILE                    describe a model file\n"
    "\n"
    "model and input:\n"
    "  -m, --model PATH        model.bin, a Hugging Face GPT-2 directory or model.safetensors\n"
    "                          (default: $GPT_MODEL, else models/gpt2.bin, else models/gpt2/)\n"
    "  -p, --prompt TEXT       the prompt (default: all of stdin); empty starts from <|endoftext|>\n"
    "      --tokenizer PATH    directory with vocab.json + merges.txt, or a tokenizer.json\n"
    "      --dtype T           convert the weight matrices at load: f32, f16, bf16 or q8\n"
    "                          (default: as the file stores them)\n"
    "      --special           a literal <|endoftext|> in the input is the special token\n"
    "generation:\n"
    "  -n, --max-tokens N      tokens to generate (default 256)\n"
    "      --temp T            temperature, 0 = greedy (default 1.0)\n"
    "      --top-k K           keep the K most likely tokens, 0 = off (default 0)\n"
    "      --top-p P           keep the smallest set reaching probability P, in (0,1] (default 1.0)\n"
    "      --min-p P           drop tokens below P x the top probability, 0 = off (default 0)\n"
    "      --repeat-penalty R  CTRL repetition penalty, 1.0 = off (default 1.0)\n"
    "  -s, --seed N            random seed (default: random, shown by --stats)\n"
    "      --ignore-eos        keep going after <|endoftext|>\n"
    "      --echo              print the prompt before the continuation\n"
    "output:\n"
    "      --json              one JSON object on stdout at the end\n"
    "      --stats             KV-cache memory, speed and RSS report on stderr\n"
    "  -t, --threads N         threads (default: the number of cores)\n"
    "  -h, --help              this help\n"
    "      --version           print the version\n"
    "\n"
    "exit codes: 0 success, 1 load/input/runtime error, 2 usage error\n";

// Strict number parsing: the whole string must be the number. strto* would
// skip leading white space (and strtoull then negate " -5"): refused here.
int parse_long(const char *s, long *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_float(const char *s, float *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = (float)v;
    return 0;
}

static int is_flag(const char *name, const char *short_name, const char *long_name) {
    return (short_name && !strcmp(name, short_name)) || !strcmp(name, long_name);
}

int parse_options(int argc, char **argv, Options *o, int *done) {
    *done = 0;
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
    o->weight_dtype = -1;
    o->sampling.temperature = 1.0f;
    o->sampling.top_p = 1.0f;
    o->sampling.repeat_penalty = 1.0f;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = cores > 0 ? cores : 1;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        // Accept --flag=value as well as --flag value.
        char name[64];
        const char *value = NULL;
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        if (eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
        }
#define IS(short_, long_) is_flag(name, short_, long_)
#define FLAG_NO_VALUE()                                                     \
    do {                                                                    \
        if (value) return FAIL("%s takes no value", name);              \
    } while (0)
#define NEED_VALUE()                                                        \
    do {                                                                    \
        if (!value) {                                                       \
            if (i + 1 >= argc) return FAIL("%s needs a value", name); \
            value = argv[++i];                                              \
        }                                                                   \
    } while (0)
        if (IS("-h", "--help")) {
            fputs(usage_text, stdout);
            *done = 1;
            return EXIT_OK;
        } else if (IS(NULL, "--version")) {
            printf("gpt " GPT_VERSION "\n");
            *done = 1;
            return EXIT_OK;
        } else if (IS("-m", "--model")) {
            NEED_VALUE();
            o->model_path = value;
        } else if (IS(NULL, "--dtype")) {
            NEED_VALUE();
            o->weight_dtype = dtype_from_name(value);
            if (o->weight_dtype < 0) return FAIL("%s %s: must be f32, f16, bf16 or q8", name, value);
        } else if (IS(NULL, "--tokenizer")) {
            NEED_VALUE();
            o->tokenizer_path = value;
        } else if (IS("-p", "--prompt")) {
            NEED_VALUE();
            o->prompt = value;
        } else if (IS("-n", "--max-tokens")) {
            NEED_VALUE();
            if (parse_long(value, &o->max_tokens) || o->max_tokens < 0)
                return FAIL("%s %s: must be an integer >= 0", name, value);
        } else if (IS(NULL, "--temp")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.temperature))
                return FAIL("%s %s: not a number", name, value);
            if (o->sampling.temperature < 0)
                return FAIL("%s %s: must be >= 0", name, value);
        } else if (IS(NULL, "--top-k")) {
            NEED_VALUE();
            long k;
            if (parse_long(value, &k) || k < 0 || k > INT32_MAX)
                return FAIL("%s %s: must be an integer >= 0", name, value);
            o->sampling.top_k = (int)k;
        } else if (IS(NULL, "--top-p")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.top_p))
                return FAIL("%s %s: not a number", name, value);
            if (!(o->sampling.top_p > 0 && o->sampling.top_p <= 1))
                return FAIL("%s %s: must be in (0, 1]", name, value);
        } else if (IS(NULL, "--min-p")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.min_p))
                return FAIL("%s %s: not a number", name, value);
            if (!(o->sampling.min_p >= 0 && o->sampling.min_p <= 1))
                return FAIL("%s %s: must be in [0, 1]", name, value);
        } else if (IS(NULL, "--repeat-penalty")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.repeat_penalty))
                return FAIL("%s %s: not a number", name, value);
            if (!(o->sampling.repeat_penalty > 0))
                return FAIL("%s %s: must be > 0", name, value);
        } else if (IS("-s", "--seed")) {
            NEED_VALUE();
            if (parse_u64(value, &o->sampling.seed))
                return FAIL("%s %s: must be an integer in [0, 2^64)", name, value);
            o->have_seed = 1;
        } else if (IS("-t", "--threads")) {
            NEED_VALUE();
            if (parse_long(value, &o->threads) || o->threads < 1 || o->threads > 1024)
                return FAIL("%s %s: must be an integer in [1, 1024]", name, value);
        } else if (IS(NULL, "--ignore-eos")) {
            FLAG_NO_VALUE();
            o->ignore_eos = 1;
        } else if (IS(NULL, "--echo")) {
            FLAG_NO_VALUE();
            o->echo = 1;
        } else if (IS(NULL, "--stats")) {
            FLAG_NO_VALUE();
            o->stats = 1;
        } else if (IS(NULL, "--json")) {
            FLAG_NO_VALUE();
            o->json = 1;
        } else if (IS(NULL, "--score")) {
            FLAG_NO_VALUE();
            o->score = 1;
        } else if (IS(NULL, "--tokenize")) {
            FLAG_NO_VALUE();
            o->tokenize = 1;
        } else if (IS(NULL, "--detokenize")) {
            FLAG_NO_VALUE();
            o->detokenize = 1;
        } else if (IS(NULL, "--special")) {
            FLAG_NO_VALUE();
            o->special = 1;
        } else if (arg[0] == '-' && arg[1] != '\0') {
            return FAIL("unknown option '%s'", arg);
        } else {
            return FAIL("unexpected argument '%s'", arg);
        }
#undef IS
#undef FLAG_NO_VALUE
#undef NEED_VALUE
    }
    if (o->tokenize + o->detokenize + o->score > 1)
        return FAIL("--tokenize, --detokenize and --score exclude each other");
    return 0;
}


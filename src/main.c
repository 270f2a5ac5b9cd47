/*
 * main.c - the gpt command line: the only file that parses argv, reads
 * stdin, prints, and chooses exit codes.
 *
 *   gpt [-m MODEL] [-p PROMPT] [options]      generate, streamed to stdout
 *   gpt --score [-m MODEL] [-p TEXT]          log-probability of a text
 *   gpt --tokenize / --detokenize             text <-> token ids
 *
 * Exit codes: 0 success, 1 load, input or runtime error, 2 usage error.
 * stdout carries only the result (generated text, ids, JSON); everything else
 * goes to stderr.
 */
#include <cJSON.h>
#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "fileio.h"
#include "forward.h"
#include "kvcache.h"
#include "model.h"
#include "modelbin.h"
#include "sampler.h"
#include "tokenizer.h"

#define GPT_VERSION "0.1.0"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

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

typedef struct {
    const char *model_path;
    const char *tokenizer_path;
    const char *prompt;  // NULL: read stdin
    long max_tokens;
    SamplerParams sampling;
    int have_seed;
    long threads;
    int ignore_eos, echo, stats, json, score, tokenize, detokenize, special;
} Options;

// ----------------------------------------------------------------------------
// small helpers

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024;  // Linux reports KiB
}

static int usage_error(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "gpt: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see gpt --help)\n");
    return EXIT_USAGE;
}

// Strict number parsing: the whole string must be the number. strto* would
// skip leading white space (and strtoull then negate " -5"): refused here.
static int parse_long(const char *s, long *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out) {
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

// ----------------------------------------------------------------------------
// arguments

static int is_flag(const char *name, const char *short_name, const char *long_name) {
    return (short_name && !strcmp(name, short_name)) || !strcmp(name, long_name);
}

static int parse_args(int argc, char **argv, Options *o) {
    memset(o, 0, sizeof *o);
    o->max_tokens = 256;
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
        if (value) return usage_error("%s takes no value%s", name, "");    \
    } while (0)
#define NEED_VALUE()                                                        \
    do {                                                                    \
        if (!value) {                                                       \
            if (i + 1 >= argc) return usage_error("%s needs a value%s", name, ""); \
            value = argv[++i];                                              \
        }                                                                   \
    } while (0)
        if (IS("-h", "--help")) {
            fputs(usage_text, stdout);
            exit(EXIT_OK);
        } else if (IS(NULL, "--version")) {
            printf("gpt " GPT_VERSION "\n");
            exit(EXIT_OK);
        } else if (IS("-m", "--model")) {
            NEED_VALUE();
            o->model_path = value;
        } else if (IS(NULL, "--tokenizer")) {
            NEED_VALUE();
            o->tokenizer_path = value;
        } else if (IS("-p", "--prompt")) {
            NEED_VALUE();
            o->prompt = value;
        } else if (IS("-n", "--max-tokens")) {
            NEED_VALUE();
            if (parse_long(value, &o->max_tokens) || o->max_tokens < 0)
                return usage_error("%s %s: must be an integer >= 0", name, value);
        } else if (IS(NULL, "--temp")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.temperature))
                return usage_error("%s %s: not a number", name, value);
            if (o->sampling.temperature < 0)
                return usage_error("%s %s: must be >= 0", name, value);
        } else if (IS(NULL, "--top-k")) {
            NEED_VALUE();
            long k;
            if (parse_long(value, &k) || k < 0 || k > INT32_MAX)
                return usage_error("%s %s: must be an integer >= 0", name, value);
            o->sampling.top_k = (int)k;
        } else if (IS(NULL, "--top-p")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.top_p))
                return usage_error("%s %s: not a number", name, value);
            if (!(o->sampling.top_p > 0 && o->sampling.top_p <= 1))
                return usage_error("%s %s: must be in (0, 1]", name, value);
        } else if (IS(NULL, "--min-p")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.min_p))
                return usage_error("%s %s: not a number", name, value);
            if (!(o->sampling.min_p >= 0 && o->sampling.min_p <= 1))
                return usage_error("%s %s: must be in [0, 1]", name, value);
        } else if (IS(NULL, "--repeat-penalty")) {
            NEED_VALUE();
            if (parse_float(value, &o->sampling.repeat_penalty))
                return usage_error("%s %s: not a number", name, value);
            if (!(o->sampling.repeat_penalty > 0))
                return usage_error("%s %s: must be > 0", name, value);
        } else if (IS("-s", "--seed")) {
            NEED_VALUE();
            if (parse_u64(value, &o->sampling.seed))
                return usage_error("%s %s: must be an integer in [0, 2^64)", name, value);
            o->have_seed = 1;
        } else if (IS("-t", "--threads")) {
            NEED_VALUE();
            if (parse_long(value, &o->threads) || o->threads < 1 || o->threads > 1024)
                return usage_error("%s %s: must be an integer in [1, 1024]", name, value);
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
            return usage_error("unknown option '%s'%s", arg, "");
        } else {
            return usage_error("unexpected argument '%s'%s", arg, "");
        }
#undef IS
#undef FLAG_NO_VALUE
#undef NEED_VALUE
    }
    if (o->tokenize + o->detokenize + o->score > 1)
        return usage_error("--tokenize, --detokenize and --score exclude each other%s%s", "", "");
    return 0;
}

// ----------------------------------------------------------------------------
// finding the model and the tokenizer

// The directory this executable lives in (for the shipped tokenizer files).
static void exe_dir(char *out, size_t cap) {
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        snprintf(out, cap, ".");
        return;
    }
    path[n] = '\0';
    snprintf(out, cap, "%s", dirname(path));
}

static int has_tokenizer_files(const char *dir) {
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/vocab.json", dir);
    snprintf(b, sizeof b, "%s/merges.txt", dir);
    if (path_exists(a) && path_exists(b)) return 1;
    snprintf(a, sizeof a, "%s/tokenizer.json", dir);
    return path_exists(a);
}

// The GPT-2 vocab.json + merges.txt shipped with gpt: models/ beside the
// executable (or one level up, for build/gpt), an installed share/gpt, or
// models/ in the current directory.
static int default_tokenizer_dir(char *out, size_t cap) {
    char exe[4096];
    exe_dir(exe, sizeof exe);
    const char *candidates[] = {"%s/models", "%s/../models", "%s/../share/gpt"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        snprintf(out, cap, candidates[i], exe);
        if (has_tokenizer_files(out)) return 0;
    }
    snprintf(out, cap, "models");
    return has_tokenizer_files(out) ? 0 : -1;
}

// -m, else $GPT_MODEL, else models/gpt2.bin, else models/gpt2/.
static const char *resolve_model_path(const Options *o) {
    if (o->model_path) return o->model_path;
    const char *env = getenv("GPT_MODEL");
    if (env && *env) return env;
    if (path_exists("models/gpt2.bin")) return "models/gpt2.bin";
    if (path_is_dir("models/gpt2")) return "models/gpt2";
    return NULL;
}

// Picks the tokenizer: --tokenizer, else the one stored in the model file,
// else the files beside the model, else the shipped GPT-2 files. *owned says
// whether the caller must free the result.
static Tokenizer *open_tokenizer(const Options *o, const Model *m, const char *model_path,
                                 int *owned, GptError *err) {
    *owned = 1;
    if (o->tokenizer_path) return tokenizer_load(o->tokenizer_path, err);
    if (m && m->tokenizer) {
        *owned = 0;
        return m->tokenizer;
    }
    if (model_path) {
        char dir[4096];
        if (path_is_dir(model_path)) {
            snprintf(dir, sizeof dir, "%s", model_path);
        } else {
            char copy[4096];
            snprintf(copy, sizeof copy, "%s", model_path);
            snprintf(dir, sizeof dir, "%s", dirname(copy));
        }
        if (has_tokenizer_files(dir)) return tokenizer_load(dir, err);
    }
    char dir[4096];
    if (default_tokenizer_dir(dir, sizeof dir) != 0) {
        gpt_error(err, "no tokenizer found: pass --tokenizer DIR (with vocab.json and merges.txt)");
        return NULL;
    }
    return tokenizer_load(dir, err);
}

static int load_model(const Options *o, Model *m, const char **path_out) {
    const char *path = resolve_model_path(o);
    *path_out = path;
    if (!path) {
        fprintf(stderr,
                "gpt: no model: pass -m PATH or set GPT_MODEL (models/gpt2.bin and models/gpt2/ "
                "do not exist); scripts/get-gpt2.sh fetches and converts GPT-2\n");
        return EXIT_RUNTIME;
    }
    GptError err = {{0}};
    if (model_load(m, path, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

// ----------------------------------------------------------------------------
// --tokenize / --detokenize

static int run_tokenize(const Options *o) {
    Model m = {0};
    const char *model_path = o->model_path;
    GptError err = {{0}};
    // A model file may carry its own tokenizer; a directory is looked into.
    if (model_path && !o->tokenizer_path && !path_is_dir(model_path)) {
        if (model_load(&m, model_path, &err) != 0) {
            fprintf(stderr, "gpt: %s\n", err.msg);
            return EXIT_RUNTIME;
        }
    }
    int owned = 0, rc = EXIT_RUNTIME;
    char *input = NULL;
    int32_t *ids = NULL;
    char *text = NULL;
    Tokenizer *tok = open_tokenizer(o, &m, model_path, &owned, &err);
    if (!tok) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        goto done;
    }
    size_t len;
    if (file_read_stream(stdin, "stdin", &input, &len, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        goto done;
    }
    if (o->tokenize) {
        size_t n;
        if (tokenizer_encode(tok, input, len, o->special, &ids, &n, &err) != 0) {
            fprintf(stderr, "gpt: %s\n", err.msg);
            goto done;
        }
        for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
        printf("\n");
    } else {
        size_t n = 0, cap = 1024;
        ids = malloc(cap * sizeof *ids);
        if (!ids) goto done;
        const char *p = input;
        for (;;) {
            while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') p++;
            if (p >= input + len) break;
            const char *start = p;
            while (p < input + len && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' &&
                   *p != ',')
                p++;
            char word[32];
            size_t wl = (size_t)(p - start);
            long id;
            snprintf(word, sizeof word, "%.*s", (int)(wl < 31 ? wl : 31), start);
            // a NUL would end `word` early: "5\0x" is not the id 5
            if (wl >= sizeof word || memchr(start, '\0', wl) || parse_long(word, &id) != 0) {
                fprintf(stderr, "gpt: --detokenize: stdin: '%.*s' is not a token id\n",
                        (int)(wl < 40 ? wl : 40), start);
                goto done;
            }
            if (id < 0 || (size_t)id >= tokenizer_vocab_size(tok)) {
                fprintf(stderr, "gpt: --detokenize: token id %ld outside the vocabulary [0, %zu)\n",
                        id, tokenizer_vocab_size(tok));
                goto done;
            }
            if (n == cap) {
                int32_t *bigger = realloc(ids, 2 * cap * sizeof *ids);
                if (!bigger) goto done;
                ids = bigger;
                cap *= 2;
            }
            ids[n++] = (int32_t)id;
        }
        size_t text_len;
        if (tokenizer_decode(tok, ids, n, &text, &text_len, &err) != 0) {
            fprintf(stderr, "gpt: --detokenize: %s\n", err.msg);
            goto done;
        }
        fwrite(text, 1, text_len, stdout);
    }
    rc = fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
done:
    free(input);
    free(ids);
    free(text);
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}

// ----------------------------------------------------------------------------
// generation and scoring

typedef struct {
    size_t prompt_tokens, generated;
    size_t prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds;
    size_t seq_tokens;        // positions held in the cache at the end
    size_t kv_allocated;
    uint64_t seed;
    int have_seed;            // sampling happened (scoring has no seed)
} RunStats;

static double rate(size_t n, double seconds) { return seconds > 0 ? (double)n / seconds : 0.0; }

static cJSON *stats_json(const Model *m, const RunStats *r) {
    const GPT2Config *c = &m->config;
    size_t per_token = kvcache_bytes_per_token(c);
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(s, "n_head", c->n_head);
    cJSON_AddNumberToObject(s, "n_embd", c->n_embd);
    cJSON_AddNumberToObject(s, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(s, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(s, "n_params", (double)m->n_params);
    cJSON_AddNumberToObject(s, "weight_bytes", (double)m->weight_bytes);
    cJSON_AddNumberToObject(s, "load_seconds", m->load_seconds);
    cJSON_AddNumberToObject(s, "kv_bytes_per_token", (double)per_token);
    cJSON_AddNumberToObject(s, "kv_bytes_sequence", (double)(per_token * r->seq_tokens));
    cJSON_AddNumberToObject(s, "seq_tokens", (double)r->seq_tokens);
    cJSON_AddNumberToObject(s, "kv_bytes_full_context", (double)(per_token * (size_t)c->n_ctx));
    cJSON_AddNumberToObject(s, "kv_bytes_allocated", (double)r->kv_allocated);
    cJSON_AddNumberToObject(s, "prefill_tokens", (double)r->prefill_tokens);
    cJSON_AddNumberToObject(s, "prefill_tok_s", rate(r->prefill_tokens, r->prefill_seconds));
    cJSON_AddNumberToObject(s, "decode_tokens", (double)r->decode_tokens);
    cJSON_AddNumberToObject(s, "decode_tok_s", rate(r->decode_tokens, r->decode_seconds));
    cJSON_AddNumberToObject(s, "peak_rss_bytes", (double)peak_rss_bytes());
    if (r->have_seed) {
        // A 64-bit seed does not fit a JSON number exactly: write it as digits.
        char digits[32];
        snprintf(digits, sizeof digits, "%llu", (unsigned long long)r->seed);
        cJSON_AddItemToObject(s, "seed", cJSON_CreateRaw(digits));
    } else {
        cJSON_AddNullToObject(s, "seed");
    }
    return s;
}

static double mib(size_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

static void print_stats(const Model *m, const RunStats *r, long threads) {
    const GPT2Config *c = &m->config;
    size_t HS = (size_t)(c->n_embd / c->n_head);
    size_t per_token = kvcache_bytes_per_token(c);
    FILE *e = stderr;
    fprintf(e, "model:      %s, %d layers, %d heads x %zu dims, %d channels, context %d, vocab %d\n",
            m->source_kind, c->n_layer, c->n_head, HS, c->n_embd, c->n_ctx, c->vocab_size);
    fprintf(e, "weights:    %zu params, %zu bytes (%.2f MiB) float32, loaded in %.3f s\n",
            m->n_params, m->weight_bytes, mib(m->weight_bytes), m->load_seconds);
    fprintf(e, "kv cache:   2 x %d layers x %d heads x %zu dims x 4 bytes = %zu B/token (%.2f KiB)\n",
            c->n_layer, c->n_head, HS, per_token, (double)per_token / 1024.0);
    fprintf(e, "kv held:    %zu tokens x %zu B = %zu B (%.2f MiB)\n", r->seq_tokens, per_token,
            per_token * r->seq_tokens, mib(per_token * r->seq_tokens));
    fprintf(e, "kv full:    %d tokens x %zu B = %zu B (%.2f MiB)\n", c->n_ctx, per_token,
            per_token * (size_t)c->n_ctx, mib(per_token * (size_t)c->n_ctx));
    fprintf(e, "kv alloc:   %zu B (%.2f MiB)\n", r->kv_allocated, mib(r->kv_allocated));
    fprintf(e, "prefill:    %zu tokens in %.3f s = %.1f tok/s\n", r->prefill_tokens,
            r->prefill_seconds, rate(r->prefill_tokens, r->prefill_seconds));
    fprintf(e, "decode:     %zu tokens in %.3f s = %.1f tok/s\n", r->decode_tokens,
            r->decode_seconds, rate(r->decode_tokens, r->decode_seconds));
    fprintf(e, "threads:    %ld\n", threads);
    fprintf(e, "peak rss:   %zu B (%.1f MiB)\n", peak_rss_bytes(), mib(peak_rss_bytes()));
    if (r->have_seed)
        fprintf(e, "seed:       %llu\n", (unsigned long long)r->seed);
}

static cJSON *ids_json(const int32_t *ids, size_t n) {
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

static int print_json(cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    if (!s) return EXIT_RUNTIME;
    printf("%s\n", s);
    free(s);
    return EXIT_OK;
}

// log p(target | row) for one row of logits, in double.
static double log_softmax_at(const float *logits, size_t V, int32_t target) {
    double max = -INFINITY;
    for (size_t i = 0; i < V; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (size_t i = 0; i < V; i++) sum += exp((double)logits[i] - max);
    return (double)logits[target] - max - log(sum);
}

// Scoring runs the text through the model in chunks, so memory for logits
// stays at SCORE_CHUNK rows whatever the length.
enum { SCORE_CHUNK = 128 };

static int run_score(const Options *o, const Model *m, const int32_t *ids, size_t n) {
    const GPT2Config *c = &m->config;
    GptError err = {{0}};
    KVCache cache = {0};
    ForwardState fs = {0};
    double *logprobs = NULL;
    int rc = EXIT_RUNTIME;
    RunStats r = {0};
    r.prompt_tokens = n;
    if (kvcache_init(&cache, c, n, &err) != 0 ||
        forward_state_init(&fs, c, n < SCORE_CHUNK ? n : SCORE_CHUNK, n, SCORE_CHUNK, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        goto done;
    }
    logprobs = calloc(n, sizeof *logprobs);
    if (!logprobs) goto done;
    double t0 = now_seconds();
    for (size_t start = 0; start < n; start += SCORE_CHUNK) {
        size_t len = n - start < SCORE_CHUNK ? n - start : SCORE_CHUNK;
        SeqInput seq = {.tokens = ids + start, .n_tokens = len, .cache = &cache, .want = LOGITS_ALL};
        if (gpt2_forward(m, &fs, &seq, 1, &err) != 0) {
            fprintf(stderr, "gpt: %s\n", err.msg);
            goto done;
        }
        // Row i predicts token start + i + 1.
        for (size_t i = 0; i < len && start + i + 1 < n; i++)
            logprobs[start + i + 1] = log_softmax_at(fs.logits + (seq.logits_row + i) * (size_t)c->vocab_size,
                                                     (size_t)c->vocab_size, ids[start + i + 1]);
    }
    r.prefill_tokens = n;
    r.prefill_seconds = now_seconds() - t0;
    r.seq_tokens = cache.n_tokens;
    r.kv_allocated = kvcache_bytes_allocated(&cache);
    double sum = 0.0;
    for (size_t i = 1; i < n; i++) sum += logprobs[i];
    double ppl = n > 1 ? exp(-sum / (double)(n - 1)) : NAN;
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "tokens", ids_json(ids, n));
        cJSON *lp = cJSON_CreateArray();
        for (size_t i = 1; i < n; i++) cJSON_AddItemToArray(lp, cJSON_CreateNumber(logprobs[i]));
        cJSON_AddItemToObject(root, "logprobs", lp);
        cJSON_AddNumberToObject(root, "sum", sum);
        if (n > 1)
            cJSON_AddNumberToObject(root, "perplexity", ppl);
        else
            cJSON_AddNullToObject(root, "perplexity");
        cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
        rc = print_json(root);
        cJSON_Delete(root);
    } else {
        if (n > 1)
            printf("tokens %zu  logprob_sum %.6f  perplexity %.4f\n", n, sum, ppl);
        else
            printf("tokens %zu  logprob_sum 0  perplexity n/a (one token has nothing to predict)\n", n);
        rc = EXIT_OK;
    }
    if (o->stats) print_stats(m, &r, o->threads);
done:
    free(logprobs);
    forward_state_free(&fs);
    kvcache_free(&cache);
    return rc;
}

static int run_generate(const Options *o, const Model *m, Tokenizer *tok, const char *prompt,
                        size_t prompt_len, int32_t *ids, size_t n_prompt) {
    const GPT2Config *c = &m->config;
    GptError err = {{0}};
    Sampler sampler = {0};
    KVCache cache = {0};
    ForwardState fs = {0};
    TokenStream stream;
    token_stream_init(&stream);
    char *text = NULL;  // the generated text, for --json
    size_t text_len = 0, text_cap = 0;
    int32_t *history = NULL;
    int rc = EXIT_RUNTIME;
    RunStats r = {0};
    const char *stop_reason = "length";

    SamplerParams sp = o->sampling;
    sp.seed = o->have_seed ? o->sampling.seed : sampler_random_seed();
    r.seed = sp.seed;
    r.have_seed = 1;
    r.prompt_tokens = n_prompt;

    // Everything the run can hold: the prompt and the new tokens, at most the
    // context. The last new token is never fed back, so it needs no position.
    size_t room = (size_t)c->n_ctx - n_prompt;
    size_t max_new = (size_t)o->max_tokens;
    size_t capacity = n_prompt + (max_new < room ? max_new : room);
    history = malloc((capacity + 1) * sizeof *history);
    if (!history) {
        fprintf(stderr, "gpt: out of memory\n");
        goto done;
    }
    memcpy(history, ids, n_prompt * sizeof *ids);
    if (sampler_init(&sampler, &sp, (size_t)c->vocab_size, &err) != 0 ||
        kvcache_init(&cache, c, capacity, &err) != 0 ||
        forward_state_init(&fs, c, n_prompt, capacity, 1, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        goto done;
    }
    r.kv_allocated = kvcache_bytes_allocated(&cache);

    if (o->echo && !o->json) {
        fwrite(prompt, 1, prompt_len, stdout);
        fflush(stdout);
    }
    double t0 = now_seconds();
    SeqInput seq = {.tokens = ids, .n_tokens = n_prompt, .cache = &cache, .want = LOGITS_LAST};
    if (gpt2_forward(m, &fs, &seq, 1, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        goto done;
    }
    r.prefill_tokens = n_prompt;
    r.prefill_seconds = now_seconds() - t0;

    int32_t eot = tokenizer_eot_id(tok);
    size_t n_hist = n_prompt;
    double t1 = now_seconds();
    while (r.generated < max_new) {
        if (n_hist >= (size_t)c->n_ctx) {
            stop_reason = "context";
            fprintf(stderr, "gpt: stopped at the end of the context (%d positions)\n", c->n_ctx);
            break;
        }
        int32_t next = sampler_sample(&sampler, fs.logits, history, n_hist);
        if (next < 0) {
            fprintf(stderr, "gpt: the model produced no usable logits (NaN or infinite)\n");
            goto done;
        }
        if (next == eot && !o->ignore_eos) {
            stop_reason = "eos";
            break;
        }
        history[n_hist++] = next;
        r.generated++;
        const char *out;
        size_t out_len;
        if (token_stream_push(&stream, tok, next, &out, &out_len, &err) != 0) {
            fprintf(stderr, "gpt: %s\n", err.msg);
            goto done;
        }
        if (o->json) {
            if (text_len + out_len + 1 > text_cap) {
                size_t cap = (text_len + out_len + 1) * 2;
                char *bigger = realloc(text, cap);
                if (!bigger) goto done;
                text = bigger;
                text_cap = cap;
            }
            memcpy(text + text_len, out, out_len);
            text_len += out_len;
        } else if (out_len) {
            fwrite(out, 1, out_len, stdout);
            fflush(stdout);
        }
        if (r.generated == max_new) break;
        if (n_hist >= (size_t)c->n_ctx) continue;  // reported at the top
        SeqInput step = {.tokens = &history[n_hist - 1], .n_tokens = 1, .cache = &cache,
                         .want = LOGITS_LAST};
        if (gpt2_forward(m, &fs, &step, 1, &err) != 0) {
            fprintf(stderr, "gpt: %s\n", err.msg);
            goto done;
        }
        r.decode_tokens++;
    }
    r.decode_seconds = now_seconds() - t1;
    r.seq_tokens = cache.n_tokens;
    {
        const char *out;
        size_t out_len;
        token_stream_flush(&stream, &out, &out_len);
        if (o->json) {
            char *bigger = realloc(text, text_len + out_len + 1);
            if (!bigger) goto done;
            text = bigger;
            memcpy(text + text_len, out, out_len);
            text_len += out_len;
            text[text_len] = '\0';
        } else {
            fwrite(out, 1, out_len, stdout);
            if (o->echo || r.generated) fflush(stdout);
        }
    }
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "prompt_tokens", ids_json(ids, n_prompt));
        cJSON_AddItemToObject(root, "tokens", ids_json(history + n_prompt, r.generated));
        cJSON_AddStringToObject(root, "text", text ? text : "");
        cJSON_AddStringToObject(root, "stop_reason", stop_reason);
        cJSON_AddItemToObject(root, "stats", stats_json(m, &r));
        rc = print_json(root);
        cJSON_Delete(root);
    } else {
        rc = EXIT_OK;
    }
    if (fflush(stdout) != 0) rc = EXIT_RUNTIME;
    if (o->stats) {
        fprintf(stderr, "stop:       %s after %zu new tokens\n", stop_reason, r.generated);
        print_stats(m, &r, o->threads);
    }
done:
    free(text);
    free(history);
    token_stream_free(&stream);
    forward_state_free(&fs);
    kvcache_free(&cache);
    sampler_free(&sampler);
    return rc;
}

static int run_model(const Options *o) {
    Model m = {0};
    const char *model_path;
    int rc = load_model(o, &m, &model_path);
    if (rc != EXIT_OK) return rc;
    rc = EXIT_RUNTIME;
    GptError err = {{0}};
    int owned = 0;
    char *stdin_text = NULL;
    int32_t *ids = NULL;
    Tokenizer *tok = open_tokenizer(o, &m, model_path, &owned, &err);
    if (!tok) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        goto done;
    }
    if ((size_t)m.config.vocab_size != tokenizer_vocab_size(tok)) {
        fprintf(stderr, "gpt: %s: the model's vocabulary has %d tokens, the tokenizer %zu\n",
                model_path, m.config.vocab_size, tokenizer_vocab_size(tok));
        goto done;
    }
    const char *prompt = o->prompt;
    size_t prompt_len = prompt ? strlen(prompt) : 0;
    if (!prompt) {
        if (isatty(STDIN_FILENO))
            fprintf(stderr, "gpt: reading the prompt from stdin; end it with Ctrl-D (or pass -p)\n");
        if (file_read_stream(stdin, "stdin", &stdin_text, &prompt_len, &err) != 0) {
            fprintf(stderr, "gpt: %s\n", err.msg);
            goto done;
        }
        prompt = stdin_text;
    }
    size_t n;
    if (tokenizer_encode(tok, prompt, prompt_len, o->special, &ids, &n, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        goto done;
    }
    if (n == 0 && !o->score) {
        // GPT-2 was trained with <|endoftext|> between documents: an empty
        // prompt starts a new one.
        int32_t eot = tokenizer_eot_id(tok);
        if (eot < 0) {
            fprintf(stderr, "gpt: empty prompt and the tokenizer has no <|endoftext|>\n");
            goto done;
        }
        free(ids);
        ids = malloc(sizeof *ids);
        if (!ids) goto done;
        ids[0] = eot;
        n = 1;
    }
    if (n == 0) {
        fprintf(stderr, "gpt: --score: the text is empty\n");
        goto done;
    }
    if (n > (size_t)m.config.n_ctx) {
        fprintf(stderr, "gpt: the %s is %zu tokens; the model's context holds %d\n",
                o->score ? "text" : "prompt", n, m.config.n_ctx);
        goto done;
    }
    openblas_set_num_threads((int)o->threads);
    rc = o->score ? run_score(o, &m, ids, n)
                  : run_generate(o, &m, tok, prompt, prompt_len, ids, n);
done:
    free(ids);
    free(stdin_text);
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}

// ----------------------------------------------------------------------------
// gpt convert / gpt inspect (the work is in modelbin.c)

static const char *convert_usage =
    "usage: gpt convert SRC OUT.bin [--tokenizer PATH]\n"
    "  SRC: a Hugging Face GPT-2 directory or model.safetensors (F32, F16 or BF16),\n"
    "       an llm.c checkpoint (gpt2_124M.bin, version 3), or a model.bin\n"
    "  --tokenizer PATH  vocab.json + merges.txt directory or tokenizer.json (default:\n"
    "                    the one beside SRC, else the shipped GPT-2 files)\n"
    "Writes one file holding the configuration, the tokenizer and float32 weights.\n";

static const char *inspect_usage =
    "usage: gpt inspect FILE\n"
    "  FILE: a model.bin, a Hugging Face directory or model.safetensors, or an llm.c checkpoint\n"
    "Prints the configuration, the tensors (dtype, shape, file offset) and the KV-cache cost.\n";

static int sub_usage_error(const char *cmd, const char *fmt, const char *a) {
    fprintf(stderr, "gpt %s: ", cmd);
    fprintf(stderr, fmt, a);
    fprintf(stderr, " (see gpt %s -h)\n", cmd);
    return EXIT_USAGE;
}

static int run_convert(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;
    Options o;
    memset(&o, 0, sizeof o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(convert_usage, stdout);
            return EXIT_OK;
        } else if (!strcmp(a, "--tokenizer")) {
            if (i + 1 >= argc) return sub_usage_error("convert", "%s needs a value", a);
            o.tokenizer_path = argv[++i];
        } else if (!strncmp(a, "--tokenizer=", 12)) {
            o.tokenizer_path = a + 12;
        } else if (a[0] == '-' && a[1] != '\0') {
            return sub_usage_error("convert", "unknown option '%s'", a);
        } else if (n_pos < 2) {
            pos[n_pos++] = a;
        } else {
            return sub_usage_error("convert", "unexpected argument '%s'", a);
        }
    }
    if (n_pos < 2) return sub_usage_error("convert", "needs SRC and OUT.bin%s", "");
    double t0 = now_seconds();
    Model m;
    GptError err = {{0}};
    if (model_load(&m, pos[0], &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        return EXIT_RUNTIME;
    }
    int owned = 0, rc = EXIT_RUNTIME;
    size_t bytes = 0;
    Tokenizer *tok = open_tokenizer(&o, &m, pos[0], &owned, &err);
    if (!tok || modelbin_write(&m, tok, pos[1], &bytes, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
    } else {
        const GPT2Config *c = &m.config;
        fprintf(stderr, "gpt: wrote %s: %zu params (%d layers, %d heads, %d channels, context %d, vocab %d), "
                        "%zu bytes, from %s %s in %.2f s\n",
                pos[1], m.n_params, c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab_size, bytes,
                m.source_kind, pos[0], now_seconds() - t0);
        rc = EXIT_OK;
    }
    if (owned) tokenizer_free(tok);
    model_free(&m);
    return rc;
}

static int run_inspect(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(inspect_usage, stdout);
            return EXIT_OK;
        } else if (a[0] == '-' && a[1] != '\0') {
            return sub_usage_error("inspect", "unknown option '%s'", a);
        } else if (!path) {
            path = a;
        } else {
            return sub_usage_error("inspect", "unexpected argument '%s'", a);
        }
    }
    if (!path) return sub_usage_error("inspect", "needs a FILE%s", "");
    ModelInfo info;
    GptError err = {{0}};
    if (model_inspect(path, &info, &err) != 0) {
        fprintf(stderr, "gpt: %s\n", err.msg);
        return EXIT_RUNTIME;
    }
    const GPT2Config *c = &info.config;
    size_t HS = (size_t)(c->n_embd / c->n_head);
    size_t per_token = kvcache_bytes_per_token(c);
    printf("file:        %s\n", info.file);
    if (info.version)
        printf("format:      %s version %u, %llu bytes\n", info.kind, info.version, (unsigned long long)info.file_bytes);
    else
        printf("format:      %s, %llu bytes\n", info.kind, (unsigned long long)info.file_bytes);
    printf("config:      n_layer %d, n_head %d, n_embd %d, n_ctx %d, vocab_size %d, layer_norm_epsilon %g\n",
           c->n_layer, c->n_head, c->n_embd, c->n_ctx, c->vocab_size, (double)c->ln_eps);
    printf("parameters:  %zu (%zu bytes as float32)\n", info.n_params, info.n_params * sizeof(float));
    if (info.n_tokens)
        printf("tokenizer:   %zu tokens, %zu merges, stored in the file\n", info.n_tokens, info.n_merges);
    else
        printf("tokenizer:   not in the file (--tokenizer, the files beside it, or the shipped GPT-2 files)\n");
    printf("kv cache:    %zu bytes per token (2 x %d layers x %d heads x %zu dims x 4 bytes), "
           "%zu bytes for the full context of %d\n",
           per_token, c->n_layer, c->n_head, HS, per_token * (size_t)c->n_ctx, c->n_ctx);
    printf("tensors:     %zu, data from byte %zu\n", info.n_tensors, info.data_offset);
    printf("  %-28s %-5s %-22s %12s %12s\n", "name", "dtype", "shape", "offset", "bytes");
    for (size_t i = 0; i < info.n_tensors; i++) {
        const TensorInfo *t = &info.tensors[i];
        char shape[128];
        size_t k = (size_t)snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->ndim && k < sizeof shape; d++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%llu", d ? ", " : "",
                                  (unsigned long long)t->dims[d]);
        if (k < sizeof shape) snprintf(shape + k, sizeof shape - k, "]");
        printf("  %-28s %-5s %-22s %12llu %12llu\n", t->name, t->dtype, shape, (unsigned long long)t->offset,
               (unsigned long long)t->nbytes);
    }
    model_info_free(&info);
    return fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "convert")) return run_convert(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inspect")) return run_inspect(argc - 1, argv + 1);
    Options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0) return rc;
    if (o.tokenize || o.detokenize) return run_tokenize(&o);
    return run_model(&o);
}

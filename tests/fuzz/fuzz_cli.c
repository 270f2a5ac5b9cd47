/*
 * fuzz_cli.c - gpt's command-line parsing (parse_options, src/cli/options.c)
 * on any argv: the input split at NUL bytes into argv[1..] (argv[0] is
 * "gpt"; at most 255 words).
 *
 * options.c reports through usage_error(), which lives in src/front/report.c;
 * this harness links options.c, output.c (--help and --version write
 * through it) and src/front/numbers.c (the number rules), without main.c
 * or report.c, and provides its own
 * usage_error that formats the message into a buffer (so every format and
 * its arguments are exercised) and counts the calls, and a runtime_error
 * that fails (parsing has none: only --help's out of memory or a failed
 * stdout would, and stdout is /dev/null). Nothing it calls exits
 * or reads stdin; stdout goes to /dev/null.
 *
 * Checked after each parse:
 *   - a usage error (2) is reported exactly once, with done set, and does
 *     not call an option that exists (typed in full) unknown; --help and
 *     --version return 0 with done set; a parse that goes on returns 0 with
 *     done clear and reports nothing;
 *   - every value an accepted parse holds obeys the rules of options.c
 *     (ranges, modes, at most MAX_STOPS non-empty stop strings), and every
 *     string in Options points into argv.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz_common.h"

static int n_usage_errors;
static char last_message[4096];

int usage_error(const char *cmd, const char *fmt, ...) {
    n_usage_errors++;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    if (n < 0) fuzz_fail("usage_error: vsnprintf failed for format '%s'", fmt);
    if (cmd) fuzz_fail("parse_options reported for subcommand '%s'", cmd);
    return EXIT_USAGE;
}

int runtime_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    fuzz_fail("runtime_error(%s) while parsing: %s", cmd ? cmd : "gpt", last_message);
    return EXIT_RUNTIME;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (!freopen("/dev/null", "w", stdout)) fuzz_fail("cannot send stdout to /dev/null");
    return 0;
}

enum { MAX_WORDS = 256 };

// options.c's long options (its LONG_OPTIONS is static): a usage error may
// not call one of these, typed in full, unknown.
static const char *const LONG_NAMES[] = {
    "help", "version", "model", "prompt", "keep-newline", "tokenizer", "dtype", "kv-type", "special",
    "max-tokens", "temp", "top-k", "top-p", "min-p", "repeat-penalty", "seed", "stop", "ignore-eos", "echo",
    "json", "stats", "threads", "score", "tokenize", "detokenize", "batch", "jsonl", "parallel", "kv-budget",
    "unordered", "text", "first-index", "prefill-chunk", "no-prefix-sharing", "stats-json", "per-token", "stride",
    "draft", "draft-dtype", "draft-tokens", "lookup", "progress", "blas", "quiet", "logprobs", "choice",
    "context-shift", "keep", "completions",
};

// "unknown option '--NAME' (or an ambiguous abbreviation)" must name an
// option that does not exist (NAME is as typed: it may hold quotes).
static void check_unknown(const char *msg) {
    static const char head[] = "unknown option '--", tail[] = "' (or an ambiguous abbreviation)";
    size_t n = strlen(msg);
    if (strncmp(msg, head, sizeof head - 1) != 0 || n < sizeof head + sizeof tail - 2 ||
        strcmp(msg + n - (sizeof tail - 1), tail) != 0)
        return;
    const char *name = msg + sizeof head - 1, *end = msg + n - (sizeof tail - 1);
    for (size_t i = 0; i < sizeof LONG_NAMES / sizeof *LONG_NAMES; i++)
        if (strlen(LONG_NAMES[i]) == (size_t)(end - name) && !strncmp(LONG_NAMES[i], name, (size_t)(end - name)))
            fuzz_fail("usage error \"%s\" calls a known option unknown", msg);
}

// Does p point into (or at the NUL of) one of the words?
static int in_words(const char *p, char *const *words, int n) {
    for (int i = 0; i < n; i++)
        if (p >= words[i] && p <= words[i] + strlen(words[i])) return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // One buffer holding every word, NUL-terminated: argv[k] point into it.
    char *buf = malloc(size + 1);
    if (!buf) fuzz_fail("out of memory");
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *words[MAX_WORDS + 1];
    char *argv[MAX_WORDS + 1];
    static char name[] = "gpt";
    int argc = 0;
    words[argc++] = name;
    for (size_t i = 0; size && argc < MAX_WORDS;) {
        words[argc++] = buf + i;
        size_t len = strlen(buf + i);
        if (i + len >= size) break;
        i += len + 1;
    }
    words[argc] = NULL;
    memcpy(argv, words, sizeof argv);  // getopt_long permutes argv, not words

    Options o;
    int done = -1;
    n_usage_errors = 0;
    int rc = parse_options(argc, argv, &o, &done);

    if (done != 0 && done != 1) fuzz_fail("done is %d", done);
    if (rc == EXIT_USAGE) {
        if (!done) fuzz_fail("usage error without done");
        if (n_usage_errors != 1) fuzz_fail("usage error reported %d times", n_usage_errors);
        check_unknown(last_message);  // tests/fuzz/crashes/cli-unknown-option-*
    } else if (n_usage_errors) {
        fuzz_fail("usage_error called (\"%s\"), but parse_options returned %d", last_message, rc);
    } else if (rc != EXIT_OK) {
        fuzz_fail("parse_options returned %d", rc);
    }
    if (rc == EXIT_OK && !done) {
        if ((unsigned)o.mode > MODE_CHAT) fuzz_fail("mode %d", (int)o.mode);
        if (o.max_tokens < 0) fuzz_fail("max_tokens %ld", o.max_tokens);
        const SamplerParams *s = &o.sampling;
        if (!(s->temperature >= 0) || !isfinite(s->temperature)) fuzz_fail("temperature %g", (double)s->temperature);
        if (!(s->top_p > 0 && s->top_p <= 1)) fuzz_fail("top_p %g", (double)s->top_p);
        if (!(s->min_p >= 0 && s->min_p <= 1)) fuzz_fail("min_p %g", (double)s->min_p);
        if (!(s->repeat_penalty > 0) || !isfinite(s->repeat_penalty)) fuzz_fail("repeat_penalty %g", (double)s->repeat_penalty);
        if (s->top_k < 0) fuzz_fail("top_k %d", s->top_k);
        if (o.threads < 1 || o.threads > 1024) fuzz_fail("threads %ld", o.threads);
        if (o.parallel < 1 || o.parallel > 256) fuzz_fail("parallel %ld", o.parallel);
        if (o.prefill_chunk < 1 || o.prefill_chunk > 4096) fuzz_fail("prefill_chunk %ld", o.prefill_chunk);
        if (o.stride < 0) fuzz_fail("stride %ld", o.stride);
        if (o.first_index > (1ull << 52)) fuzz_fail("first_index %llu", (unsigned long long)o.first_index);
        if (o.kv_dtype != DTYPE_F32 && o.kv_dtype != DTYPE_F16) fuzz_fail("kv_dtype %d", (int)o.kv_dtype);
        if (o.weight_dtype < -1 || o.weight_dtype >= DTYPE_COUNT) fuzz_fail("weight_dtype %d", o.weight_dtype);
        if (o.n_stops > MAX_STOPS) fuzz_fail("%zu stop strings", o.n_stops);
        for (size_t i = 0; i < o.n_stops; i++)
            if (!o.stops[i] || !*o.stops[i] || !in_words(o.stops[i], words, argc))
                fuzz_fail("stop string %zu is empty or outside argv", i);
        const char *strs[3] = {o.model_path, o.tokenizer_path, o.prompt};
        for (int i = 0; i < 3; i++)
            if (strs[i] && !in_words(strs[i], words, argc)) fuzz_fail("option string %d points outside argv", i);
        if (o.logprobs < -1 || o.logprobs > 20) fuzz_fail("logprobs %ld", o.logprobs);
        if (o.completions < 1 || o.completions > MAX_CHOICES) fuzz_fail("completions %ld", o.completions);
        if (o.completions > 1 && (o.mode == MODE_BATCH ? o.text_output : !o.json))
            fuzz_fail("--completions without --json (or, in --batch, with --text)");
        if (o.keep < 0 || (o.keep && !o.context_shift)) fuzz_fail("keep %ld without --context-shift", o.keep);
        if (o.n_choices > MAX_CHOICES || (o.n_choices > 0) != (o.mode == MODE_CHOICE))
            fuzz_fail("%zu choices in mode %d", o.n_choices, (int)o.mode);
        for (size_t i = 0; i < o.n_choices; i++)
            if (!o.choices[i] || !*o.choices[i] || !in_words(o.choices[i], words, argc))
                fuzz_fail("choice %zu is empty or outside argv", i);
        // Options of other modes are refused, so these hold in any mode.
        int gen = o.mode == MODE_GENERATE;
        if (!gen && o.mode != MODE_BATCH && (o.echo || o.logprobs >= 0 || o.context_shift))
            fuzz_fail("--echo/--logprobs/--context-shift outside generation and --batch");
        if ((o.mode == MODE_BATCH || o.mode == MODE_DETOKENIZE) && o.keep_newline)
            fuzz_fail("--keep-newline in --batch or --detokenize (no text read whole from stdin)");
        if (!gen && o.mode != MODE_SCORE && o.per_token) fuzz_fail("--per-token outside generation and --score");
        if (o.mode != MODE_SCORE && o.stride) fuzz_fail("--stride outside --score");
        if (gen && o.logprobs >= 0 && !o.json && !o.per_token) fuzz_fail("--logprobs with nowhere to go");
        if (o.json && o.per_token) fuzz_fail("--per-token with --json");
        if (o.mode != MODE_BATCH && (o.jsonl || o.unordered || o.text_output || !o.share_prefixes))
            fuzz_fail("a --batch option outside --batch");
    }
    free(buf);
    return 0;
}

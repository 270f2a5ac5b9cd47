/*
 * fuzz_jsonl.c - a `gpt --batch --jsonl` input line (src/cli/batch.c's
 * request_from_line through batch_line_error: the JSON parsed, its fields
 * read with src/front/request.c's rules and batch.c's own, the prompt or
 * the choices tokenized and checked against the context, the request
 * freed): the input is the line, without its newline. Each line is read
 * under four sets of options (parse_options, as gpt reads them), since the
 * options are the defaults a line's fields go over and some exclude fields:
 *   --batch --jsonl
 *   --batch --jsonl --special --echo --logprobs 3 --stop . -n 50 --temp 0.7
 *   --batch --jsonl --text
 *   --batch --jsonl --completions 2 --context-shift --keep 8 --top-k 5
 * with the shipped GPT-2 tokenizer ($GPT_FUZZ_TOKENIZER, else models/) and
 * GPT-2's shape (a context of 1024) without its weights.
 *
 * Checked: a line is accepted or refused with a message (its output line's
 * "error"); a message is never empty; everything is freed (LeakSanitizer).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fuzz_common.h"

static const char *const ARGV[][16] = {
    {"gpt", "--batch", "--jsonl", NULL},
    {"gpt", "--batch", "--jsonl", "--special", "--echo", "--logprobs", "3", "--stop", ".", "-n", "50", "--temp", "0.7",
     NULL},
    {"gpt", "--batch", "--jsonl", "--text", NULL},
    {"gpt", "--batch", "--jsonl", "--completions", "2", "--context-shift", "--keep", "8", "--top-k", "5", NULL},
};
enum { N_SETS = sizeof ARGV / sizeof *ARGV };

static Options options[N_SETS];
static char *argv_copy[N_SETS][16];
static Tokenizer *tok;
static Model model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *dir = getenv("GPT_FUZZ_TOKENIZER");
    if (!dir || !*dir) dir = "models";
    GptError err = {{0}};
    tok = tokenizer_load(dir, &err);
    if (!tok) fuzz_fail("%s (set GPT_FUZZ_TOKENIZER to the directory of vocab.json + merges.txt)", err.msg);
    model.config.n_ctx = 1024;
    model.config.vocab_size = (int)tokenizer_vocab_size(tok);
    for (int s = 0; s < N_SETS; s++) {
        int n = 0;
        for (; ARGV[s][n]; n++)
            if (!(argv_copy[s][n] = strdup(ARGV[s][n]))) fuzz_fail("out of memory");
        int done = 0;
        if (parse_options(n, argv_copy[s], &options[s], &done) != 0 || done)
            fuzz_fail("options set %d does not parse", s);
        if (!options[s].jsonl) fuzz_fail("options set %d: not --jsonl", s);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int s = 0; s < N_SETS; s++) {
        char *error = batch_line_error(&options[s], tok, &model, 7, (const char *)data, size);
        if (error && !*error) fuzz_fail("options set %d: a line refused with an empty message", s);
        free(error);
    }
    return 0;
}

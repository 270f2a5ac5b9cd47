/*
 * cli.h - what the files of the gpt command line share.
 *
 *   main.c         argv -> Options, dispatch, exit codes
 *   options.c      the options: --help text, parsing, number rules
 *   locate.c       finding the model and the tokenizer files
 *   run_model.c    generation and scoring: prompt rules, output, --stats, --json
 *   tokenize.c     --tokenize and --detokenize
 *   convert.c      gpt convert and gpt inspect
 *
 * The command line is the only part of gpt that reads argv and stdin,
 * prints, and chooses exit codes: 0 success, 1 load, input or runtime
 * error, 2 usage error. stdout carries only the result (generated text, ids,
 * JSON); everything else goes to stderr.
 */
#ifndef GPT_CLI_H
#define GPT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#define GPT_VERSION "0.1.0"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

typedef struct {
    const char *model_path;
    const char *tokenizer_path;
    const char *prompt;  // NULL: read stdin
    long max_tokens;
    SamplerParams sampling;
    int have_seed;
    long threads;
    int weight_dtype;    // --dtype: matrices converted at load; -1 as stored
    int ignore_eos, echo, stats, json, score, tokenize, detokenize, special;
} Options;

// options.c
// Parses argv into *o. Returns 0, or the exit code to leave with: EXIT_USAGE
// after printing the usage error, EXIT_OK after --help or --version.
// *done says whether the program should exit with the returned code.
int parse_options(int argc, char **argv, Options *o, int *done);
// Strict number parsing: the whole string must be the number (no leading
// white space, which strto* would skip). 0 or -1.
int parse_long(const char *s, long *out);
int parse_u64(const char *s, uint64_t *out);

// main.c: the two ways to report a failure, each one line on stderr.
// "gpt: MESSAGE"; returns EXIT_RUNTIME.
int report_error(const GptError *err);
// "gpt[ CMD]: MESSAGE (see gpt[ CMD] --help)"; returns EXIT_USAGE. cmd is
// NULL for the main command, or "convert", "inspect".
int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// locate.c
// -m, else $GPT_MODEL, else models/gpt2.bin, else models/gpt2/; NULL if none.
const char *resolve_model_path(const char *model_flag);
// Loads the model resolve_model_path() finds, its matrices converted to
// weight_dtype (-1: as stored); on failure prints why and returns
// EXIT_RUNTIME (EXIT_OK on success). *path_out gets the path.
int load_model(const char *model_flag, int weight_dtype, Model *m, const char **path_out);
// Picks the tokenizer: tokenizer_path (--tokenizer), else the one stored in
// the model m (may be NULL), else the files beside model_path, else the
// shipped GPT-2 files. *owned says whether the caller must free the result.
Tokenizer *open_tokenizer(const char *tokenizer_path, const Model *m, const char *model_path,
                          int *owned, GptError *err);

// run_model.c: gpt [--score] with a model.
int run_model(const Options *o);
// tokenize.c
int run_tokenize(const Options *o);
// convert.c: argv from the subcommand's name on.
int run_convert(int argc, char **argv);
int run_inspect(int argc, char **argv);

#endif

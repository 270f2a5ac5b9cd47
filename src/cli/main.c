/*
 * main.c - the gpt command: read the options, run, report.
 *
 *   gpt [-m MODEL] [-p PROMPT] [options]      generate, streamed to stdout
 *   gpt --score [-m MODEL] [-p TEXT]          log-probability of a text
 *   gpt --tokenize / --detokenize             text <-> token ids
 *   gpt convert SRC OUT.bin / gpt inspect FILE
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int report_error(const GptError *err) {
    fprintf(stderr, "gpt: %s\n", err->msg);
    return EXIT_RUNTIME;
}

int usage_error(const char *cmd, const char *fmt, ...) {
    const char *space = cmd ? " " : "", *name = cmd ? cmd : "";
    fprintf(stderr, "gpt%s%s: ", space, name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cmd) fprintf(stderr, " (see gpt %s -h)\n", cmd);
    else fprintf(stderr, " (see gpt --help)\n");
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "convert")) return run_convert(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inspect")) return run_inspect(argc - 1, argv + 1);
    Options o;
    int done = 0;
    int rc = parse_options(argc, argv, &o, &done);
    if (done) return rc;
    switch (o.mode) {
    case MODE_TOKENIZE:
    case MODE_DETOKENIZE: return run_tokenize(&o);
    case MODE_BATCH: return run_batch(&o);
    default: return run_model(&o);
    }
}

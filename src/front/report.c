/*
 * report.c - the two ways a front-end reports a failure, each one line on
 * stderr: a runtime error ("gpt: MESSAGE", exit 1) and a usage error
 * ("gpt: MESSAGE (see gpt --help)", exit 2); and a note, which is no
 * failure ("gpt: MESSAGE", unless -q). It depends on nothing else of
 * the front-ends, so that every file that reports can include it without a
 * circle.
 */
#include <stdarg.h>
#include <stdio.h>

#include "front.h"

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

void note(int quiet, const char *fmt, ...) {
    if (quiet) return;  // -q: notes off (errors are never silenced)
    fprintf(stderr, "gpt: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

void note_kv_budget(int quiet, const char *arg, size_t asked, size_t blocks, size_t block_bytes) {
    if (!arg || asked == blocks * block_bytes) return;
    note(quiet, "--kv-budget %s (%zu bytes) holds %zu whole block%s of %d positions: %zu bytes", arg, asked, blocks,
         blocks == 1 ? "" : "s", KV_BLOCK, blocks * block_bytes);
}

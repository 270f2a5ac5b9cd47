/*
 * report.c - the one writer of the front-ends' messages, each one line on
 * stderr: a runtime error ("gpt: MESSAGE", exit 1), a usage error ("gpt:
 * MESSAGE (see gpt --help)", exit 2), a warning ("gpt: warning: MESSAGE")
 * and a note, which is no failure ("gpt: MESSAGE", unless -q); a
 * subcommand's say "gpt serve: ...". (What a user asks to see on stderr,
 * --stats, the progress line, gpt chat's prompt and the request log, is
 * output, written where it is made.) tests/check_modules.py fails on a
 * message to stderr written anywhere else. It depends on nothing else of
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

// "gpt[ CMD]: [KIND]FMT..." and a newline.
static void message(const char *cmd, const char *kind, const char *fmt, va_list ap) {
    fprintf(stderr, "gpt%s%s: %s", cmd ? " " : "", cmd ? cmd : "", kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int runtime_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    message(cmd, "", fmt, ap);
    va_end(ap);
    return EXIT_RUNTIME;
}

void warning(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    message(cmd, "warning: ", fmt, ap);
    va_end(ap);
}

void note_of(const char *cmd, int quiet, const char *fmt, ...) {
    if (quiet) return;
    va_list ap;
    va_start(ap, fmt);
    message(cmd, "", fmt, ap);
    va_end(ap);
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

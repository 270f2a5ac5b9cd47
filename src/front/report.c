/*
 * report.c - the two ways a front-end reports a failure, each one line on
 * stderr: a runtime error ("gpt: MESSAGE", exit 1) and a usage error
 * ("gpt: MESSAGE (see gpt --help)", exit 2). It depends on nothing else of
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

/*
 * error.h - the one way the library reports failure.
 *
 * Library functions never print and never exit. On failure they return -1 (or
 * NULL) and write one human-readable line into a GptError the caller owns,
 * naming the function's subject: the file, the tensor, the flag. main.c decides
 * what the user sees and which exit code follows.
 */
#ifndef GPT_ERROR_H
#define GPT_ERROR_H

#include <stddef.h>

typedef struct {
    char msg[512];  // one line, no trailing newline; "" when no error
} GptError;

// Formats into err->msg (err may be NULL), one line: control characters
// (from a path, a schema's string) are written as \n, \r, \t or \xHH.
// Always returns -1 so a caller can write `return gpt_error(err, "%s: ...",
// path);`.
int gpt_error(GptError *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif

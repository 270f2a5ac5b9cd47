/*
 * output.c - every byte the command line writes to stdout goes through
 * here, so that no write error goes unnoticed: a full disk, a closed stdout
 * or a reader that went away (EPIPE, when SIGPIPE is ignored) is reported
 * once, as "gpt: stdout: No space left on device", and the caller stops.
 * On a terminal, text ends with a newline (out_end_text); elsewhere the
 * bytes are exactly the text's.
 */
#include <cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <utf8proc.h>

#include "cli.h"

static int line_open;  // the last byte out_write wrote was not a newline

static int stdout_failed(void) {
    int e = errno ? errno : EIO;
    runtime_error(NULL, "stdout: %s", strerror(e));
    return -1;
}

// A write interrupted by a signal (Ctrl-C while a terminal's writes block:
// gpt installs its SIGINT handler without SA_RESTART so that a read waiting
// for the user returns) is no failure: the rest is written again.
int out_write(const void *p, size_t n) {
    const char *c = p;
    for (size_t left = n; left;) {
        errno = 0;
        size_t wrote = fwrite(c, 1, left, stdout);
        c += wrote, left -= wrote;
        if (!left) break;
        if (errno != EINTR) return stdout_failed();
        clearerr(stdout);
    }
    if (n) line_open = ((const char *)p)[n - 1] != '\n';
    return 0;
}

int out_end_text(void) {
    return line_open && isatty(STDOUT_FILENO) ? out_write("\n", 1) : 0;
}

int out_flush(void) {
    for (;;) {
        errno = 0;
        if (fflush(stdout) == 0) return 0;
        if (errno != EINTR) return stdout_failed();
        clearerr(stdout);
    }
}

int out_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    errno = 0;
    int rc = vfprintf(stdout, fmt, ap);
    va_end(ap);
    return rc < 0 ? stdout_failed() : 0;
}

int out_json_line(const cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    if (!s) {
        runtime_error(NULL, "out of memory");
        return -1;
    }
    int rc = out_write(s, strlen(s)) || out_write("\n", 1) ? -1 : 0;
    free(s);
    return rc;
}

// Bytes as text for one output line: \\ for a backslash, \n, \r and \t for
// those characters, \xHH for other control bytes and for each byte that
// does not begin a whole, valid UTF-8 character (a token may hold part of
// one: its bytes are escaped one by one); whole characters as they are. The
// line is valid UTF-8, and the bytes can be read back from it exactly.
int print_escaped(const unsigned char *b, size_t len) {
    for (size_t i = 0; i < len;) {
        unsigned char ch = b[i];
        char esc[8];
        const char *s = esc;
        size_t n = 2, used = 1;
        utf8proc_int32_t cp;
        utf8proc_ssize_t whole;
        if (ch == '\\') s = "\\\\";
        else if (ch == '\n') s = "\\n";
        else if (ch == '\r') s = "\\r";
        else if (ch == '\t') s = "\\t";
        else if (ch < 0x20 || ch == 0x7F) n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", ch);
        else if (ch < 0x80) s = (const char *)&b[i], n = 1;
        else if ((whole = utf8proc_iterate(b + i, (utf8proc_ssize_t)(len - i), &cp)) > 0)
            s = (const char *)&b[i], n = used = (size_t)whole;
        else n = (size_t)snprintf(esc, sizeof esc, "\\x%02x", ch);
        if (out_write(s, n) != 0) return -1;
        i += used;
    }
    return 0;
}

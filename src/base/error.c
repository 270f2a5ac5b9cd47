/* error.c - see error.h. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>

int gpt_error(GptError *err, const char *fmt, ...) {
    if (err) {
        char line[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        // one line: a control character (a newline in a schema's $ref, a
        // rule name, a path) is written as \n, \r, \t or \xHH, cut at the end
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;
        for (const unsigned char *p = (const unsigned char *)line; *p; p++) {
            char e[4];
            size_t n = 1;
            e[0] = (char)*p;
            if (*p < 0x20 || *p == 0x7f) {
                e[0] = '\\';
                e[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : *p == '\t' ? 't' : 'x';
                n = 2;
                if (e[1] == 'x') e[2] = hex[*p >> 4], e[3] = hex[*p & 15], n = 4;
            }
            if (o + n >= sizeof err->msg) break;
            for (size_t k = 0; k < n; k++) err->msg[o++] = e[k];
        }
        err->msg[o] = '\0';
    }
    return -1;
}

/*
 * utf8.c - see utf8.h.
 */
#include "base/utf8.h"

#include <stdlib.h>
#include <string.h>

int utf8_valid(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        int32_t cp;
        i += utf8_decode(s + i, n - i, &cp);
        if (cp < 0) return 0;
    }
    return 1;
}

char *utf8_replace_invalid(const unsigned char *s, size_t n, size_t *out_len) {
    // Worst case every byte becomes a 3-byte U+FFFD.
    if (n > (SIZE_MAX - 1) / 3) return NULL;
    char *out = malloc(3 * n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = utf8_decode(s + i, n - i, &cp);
        if (cp >= 0) {
            memcpy(out + o, s + i, k);
            o += k;
        } else {
            memcpy(out + o, UTF8_REPLACEMENT, 3);
            o += 3;
        }
        i += k;
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}

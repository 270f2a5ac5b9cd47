/*
 * numbers.c - the rules of a number typed as an option's value, for every
 * front-end: the whole string is the number (no leading white space, which
 * strto* would skip, no trailing text), decimal only (no 0x10, inf or nan),
 * and a value beyond its type's range is "out of range", never clamped.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"

// Strict number parsing: the whole string must be the number. strto* would
// skip leading white space (and strtoull then negate " -5"): refused here.
int parse_long(const char *s, long *out) {
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || end == s) return -1;
    if (errno == ERANGE) return -2;
    *out = v;
    return 0;
}

int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-' || isspace((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || end == s) return -1;
    if (errno == ERANGE) return -2;
    *out = (uint64_t)v;
    return 0;
}

// A decimal number: digits, one point, an exponent; no hex, inf or nan
// (which strtod would take). 0, -1 if it is not one, -2 if it is out of
// float's range (2.5e-400 and 1e50 both).
int parse_decimal(const char *s, float *out) {
    if (!s || !*s) return -1;
    for (const char *p = s; *p; p++)
        if (!strchr("0123456789.eE+-", *p)) return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || end == s) return -1;
    if (errno == ERANGE || !isfinite(v) || fabs(v) > 3.4e38 || (v != 0 && fabs(v) < 1.2e-38)) return -2;
    *out = (float)v;
    return 0;
}

int parse_size(const char *s, size_t *out) {
    if (!s || !*s || !isdigit((unsigned char)*s)) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned long long mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mult = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mult = 1ull << 30, end++;
    if (*end == 'i' && mult > 1) end++;           // KiB, MiB, GiB
    if ((*end == 'B' || *end == 'b') && end[1] == '\0') end++;
    if (*end) return -1;
    if (errno == ERANGE || v > SIZE_MAX / mult) return -2;
    *out = (size_t)(v * mult);
    return 0;
}

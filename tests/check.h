/*
 * check.h - the whole test framework: CHECK counts, prints what failed and
 * where, and check_exit() turns the count into the exit code. Each test binary
 * prints "NAME: N passed, M failed" as its last line.
 */
#ifndef GPT_CHECK_H
#define GPT_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (cond) {                                                           \
            check_passed++;                                                   \
        } else {                                                              \
            check_failed++;                                                   \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__,  \
                    #cond);                                                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
        }                                                                     \
    } while (0)

// A sanitizer build (make asan) runs every test program and every code
// path, with less data where a sweep repeats one path on the 124M-shaped
// checkpoint, which runs several times slower under AddressSanitizer
// (each such place says what it leaves to make test).
#if defined(__SANITIZE_ADDRESS__)
enum { CHECK_SANITIZED = 1 };
#else
enum { CHECK_SANITIZED = 0 };
#endif

static inline int check_exit(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif

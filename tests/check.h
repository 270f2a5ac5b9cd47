/*
 * check.h - the whole test framework: CHECK counts, prints what failed and
 * where, and check_exit() turns the count into the exit code. Each test binary
 * prints "NAME: N passed, M failed" as its last line.
 */
#ifndef GPT_CHECK_H
#define GPT_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// The one way a test meets a missing tool (tests/README.md): check_tool
// runs PROBE (a shell command, its output discarded) and returns 1 when it
// succeeds. Else the part that needs WHAT is skipped with a line naming it
// and the install line (0), or, with GPT_TEST_REQUIRE_ALL=1 (make test's
// default, and CI's), it fails: every test must run there.
static inline int check_tool(const char *probe, const char *what) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "(%s) >/dev/null 2>&1", probe);
    if (system(cmd) == 0) return 1;
    const char *all = getenv("GPT_TEST_REQUIRE_ALL");
    if (all && strcmp(all, "1") == 0) {
        check_failed++;
        fprintf(stderr, "%s is not installed (GPT_TEST_REQUIRE_ALL=1: it must run; install: "
                        "scripts/install-deps.sh test)\n", what);
    } else {
        printf("skipped: the part that needs %s (not installed; install: scripts/install-deps.sh test)\n", what);
    }
    return 0;
}

static inline int check_exit(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif

/*
 * run_gpt.h - runs the gpt binary for the end-to-end tests and collects its
 * exit code, stdout and stderr. stdin, stdout and stderr go through files in
 * a scratch directory, so no pipe can deadlock however much gpt prints.
 * Header-only: each test binary that includes it gets its own copy.
 */
#ifndef GPT_RUN_GPT_H
#define GPT_RUN_GPT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/fileio.h"
#include "paths.h"

typedef struct {
    int rc;          // exit code, or 128 + the signal that ended it
    char *out;       // stdout, NUL-terminated
    size_t out_len;  // stdout may hold NUL bytes
    char *err;       // stderr, NUL-terminated
} Result;

// $GPT, else build/gpt.
static inline const char *gpt_binary(void) {
    const char *g = getenv("GPT");
    return g && *g ? g : "build/gpt";
}

// In a forked child: stdin, stdout and stderr from and to these files, then
// argv (NULL-terminated); 127 if it cannot start.
static inline void exec_with_files(const char *const *argv, const char *in, const char *out, const char *err) {
    int fi = open(in, O_RDONLY), fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644),
        fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fi, 0);
    dup2(fo, 1);
    dup2(fe, 2);
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

// Runs gpt with the NULL-terminated `args` and `input` (NULL: nothing) on
// stdin, using files in scratch_dir.
static inline Result run_gpt(const char *scratch_dir, const char *input, size_t input_len,
                             const char *const *args) {
    Result r = {0};
    char in_path[1024], out_path[1024], err_path[1024];
    snprintf(in_path, sizeof in_path, "%s/stdin", scratch_dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", scratch_dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", scratch_dir);
    FILE *f = fopen(in_path, "wb");
    if (f) {
        if (input) fwrite(input, 1, input_len, f);
        fclose(f);
    }
    const char *argv[64];
    int n = 0;
    argv[n++] = gpt_binary();
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) exec_with_files(argv, in_path, out_path, err_path);
    int status = 0;
    waitpid(pid, &status, 0);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    size_t len;
    file_read_all(out_path, &r.out, &r.out_len, NULL);
    file_read_all(err_path, &r.err, &len, NULL);
    if (!r.out) r.out = calloc(1, 1);
    if (!r.err) r.err = calloc(1, 1);
    return r;
}

static inline void result_free(Result *r) {
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

// 1 if s is exactly one line ending in '\n': what an error message must be.
static inline int one_line(const char *s) {
    size_t n = strlen(s);
    return n > 0 && s[n - 1] == '\n' && memchr(s, '\n', n - 1) == NULL;
}

// Splits a program's output into lines in place (each '\n' becomes '\0'):
// at most max of them in lines; returns the count.
static inline size_t split_lines(char *out, char **lines, size_t max) {
    size_t n = 0;
    for (char *p = out; *p && n < max;) {
        char *nl = strchr(p, '\n');
        lines[n++] = p;
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }
    return n;
}

#endif

/*
 * bench_spawn.c - the time a script waits for a process: runs COMMAND...
 * ROUNDS times, one process after another as a shell loop does, and
 * reports for each round the wall from fork to the first byte the process
 * writes to stdout (its first token) and from fork to its exit.
 *
 *     bench_spawn ROUNDS COMMAND [ARG...]
 *
 * prints one line: "first_byte best B median M exit best E median F" in
 * seconds. The command's stdout is read and dropped, its stderr goes to
 * /dev/null. Exit status 1 if a round fails (the command exits non-zero or
 * writes nothing), 2 on bad arguments. ROUNDS is 1 to 1000.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// One round: 0 with *first and *exit_s set, or -1.
static int run_once(char **argv, double *first, double *exit_s) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    double t0 = now_seconds();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        close(fd[0]);
        close(fd[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    char buf[4096];
    ssize_t n;
    int got = 0;
    *first = 0;
    while ((n = read(fd[0], buf, sizeof buf)) > 0)
        if (!got) {
            *first = now_seconds() - t0;
            got = 1;
        }
    close(fd[0]);
    int status;
    if (waitpid(pid, &status, 0) != pid) return -1;
    *exit_s = now_seconds() - t0;
    return got && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    int rounds = argc > 2 ? atoi(argv[1]) : 0;
    if (rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: bench_spawn ROUNDS(1-1000) COMMAND [ARG...]\n");
        return 2;
    }
    double first[1000], exit_s[1000];
    for (int i = 0; i < rounds; i++)
        if (run_once(argv + 2, &first[i], &exit_s[i]) != 0) {
            fprintf(stderr, "bench_spawn: %s: failed or wrote nothing (round %d)\n", argv[2], i + 1);
            return 1;
        }
    qsort(first, (size_t)rounds, sizeof *first, by_value);
    qsort(exit_s, (size_t)rounds, sizeof *exit_s, by_value);
    printf("first_byte best %.4f median %.4f exit best %.4f median %.4f\n", first[0], first[rounds / 2], exit_s[0],
           exit_s[rounds / 2]);
    return 0;
}

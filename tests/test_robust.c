/*
 * test_robust.c - nothing lost, nothing silent: the places where gpt once
 * lost data or hid a failure, each reproduced here through the shell as a
 * script would meet it.
 *
 *   convert      OUT may not be its own input, a device, an existing file
 *                without --force, or named for another format (.gguf);
 *                Ctrl-C leaves nothing behind
 *   writes       a full disk, a closed stdout, a reader that went away (with
 *                SIGPIPE ignored): named on stderr, exit 1, at once
 *   signals      Ctrl-C during generation: what was generated, stop_reason
 *                "interrupted", exit 130
 *   options      GNU conventions (-n20, --temp=0.7, --, abbreviations);
 *                numbers decimal only; options that do not apply refused
 *   input        the stdin prompt's final newline; --detokenize of a JSON
 *                array; --tokenize -p; clear messages for unreadable stdin,
 *                half a checkpoint, a lone vocab.json; on a pseudo-terminal
 *                one Ctrl-D ends the text (it took two)
 *   score        the count of scored tokens, the per-token view, --stride
 *   damage       NaN weights: refused with the layer named, never a NaN
 *                perplexity
 *
 * Runs $GPT (default build/gpt) on the checkpoints in $CKPT_DIR.
 */
#define _XOPEN_SOURCE 700  // posix_openpt, grantpt, unlockpt, ptsname
#include <cJSON.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#include "check.h"
#include "base/fileio.h"
#include "run_gpt.h"

static char tmpdir[256];

static const char *tmp(const char *name) { return path_in(tmpdir, name); }

// Runs a shell command (GPT is set to the binary, TINY to the tiny model);
// its stderr goes to tmp/err, which *err gets. Returns the exit status, or
// 128 + the signal.
static int sh(const char *cmd, char **err) {
    char full[16384];
    snprintf(full, sizeof full, "GPT='%s' TINY='%s' M124='%s' T='%s'; { %s; } 2>'%s/err'", gpt_binary(), ckpt("tiny"),
             ckpt("gpt2-124M-shaped"), tmpdir, cmd, tmpdir);
    int st = system(full);
    if (err) {
        size_t len;
        *err = NULL;
        file_read_all(tmp("err"), err, &len, NULL);
        if (!*err) *err = calloc(1, 1);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Runs gpt with args (NULL-terminated) as a terminal runs a foreground
// job, SIGINT and SIGTERM at their defaults (a shell's `cmd &` would ignore
// SIGINT, which gpt keeps), stdin from the file `in` (NULL: empty), stdout
// into tmp/out and stderr into *err; sends it sig once stdout holds
// `after_lines` lines (waiting at most 300 s) and `delay` seconds more.
// Returns the exit status, or 128 + the signal that ended it.
static int run_signalled(const char *const *args, const char *in, const char *out, size_t after_lines, double delay,
                         int sig, char **err) {
    const char *argv[32];
    int n = 0;
    argv[n++] = gpt_binary();
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char out_path[2048], err_path[2048];
    snprintf(out_path, sizeof out_path, "%s", tmp(out));
    snprintf(err_path, sizeof err_path, "%s", tmp("err"));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        exec_with_files(argv, in ? in : "/dev/null", out_path, err_path);
    }
    // a line count, not a time: under AddressSanitizer on a busy machine a
    // step of the 124M model took over a second, and a signal sent at a
    // fixed time found no line running
    for (int polls = 0; after_lines && polls < 15000; polls++) {
        char *text = NULL;
        size_t len = 0, lines = 0;
        file_read_all(out_path, &text, &len, NULL);
        for (size_t i = 0; text && i < len; i++) lines += text[i] == '\n';
        free(text);
        if (lines >= after_lines) break;
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    }
    struct timespec t = {(time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9)};
    nanosleep(&t, NULL);
    kill(pid, sig);
    int st = 0;
    waitpid(pid, &st, 0);
    size_t len;
    *err = NULL;
    file_read_all(err_path, err, &len, NULL);
    if (!*err) *err = calloc(1, 1);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Runs gpt with args (NULL-terminated) with a pseudo-terminal as its stdin
// (stdout into tmp/out, stderr into tmp/err), types `typed` on it, and
// waits for gpt to exit, at most 60 s: its exit status, or -1 if it was
// still reading then (it is given a second Ctrl-D, then killed).
static int run_on_terminal(const char *const *args, const char *typed) {
    const char *argv[32];
    int n = 0;
    argv[n++] = gpt_binary();
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return -2;
    int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    if (slave < 0) return close(master), -2;
    char out_path[2048], err_path[2048];
    snprintf(out_path, sizeof out_path, "%s", tmp("out"));
    snprintf(err_path, sizeof err_path, "%s", tmp("err"));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(master);
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(slave, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(slave);
    if (write(master, typed, strlen(typed)) != (ssize_t)strlen(typed)) CHECK(0, "writing to the terminal failed");
    int st = 0, rc = -1;
    // waits for the exit, reading what the terminal echoes meanwhile
    for (int polls = 0; polls < 6000; polls++) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        char echo[256];
        struct pollfd p = {.fd = master, .events = POLLIN};
        if (poll(&p, 1, 10) == 1 && read(master, echo, sizeof echo) <= 0) (void)poll(NULL, 0, 10);
    }
    if (rc == -1) {
        (void)!write(master, "\x04", 1);
        for (int polls = 0; polls < 500 && waitpid(pid, &st, WNOHANG) != pid; polls++) (void)poll(NULL, 0, 10);
        if (kill(pid, SIGKILL) == 0) waitpid(pid, &st, 0);
    }
    close(master);
    return rc;
}

static char *slurp(const char *path) {
    char *s = NULL;
    size_t len;
    file_read_all(path, &s, &len, NULL);
    return s ? s : calloc(1, 1);
}

static off_t size_of(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? st.st_size : -1;
}

// ---------------------------------------------------------------------------

static void test_convert(void) {
    char *err;
    // 1. OUT is the input: refused, the input untouched
    sh("mkdir -p $T/hf && cp $TINY/config.json $TINY/model.safetensors $T/hf/", NULL);
    off_t before = size_of(tmp("hf/model.safetensors"));
    int rc = sh("$GPT convert $T/hf $T/hf/model.safetensors", &err);
    CHECK(rc == 1 && strstr(err, "destroy the input") && size_of(tmp("hf/model.safetensors")) == before,
          "convert onto its input: rc %d, %s", rc, err);
    free(err);
    rc = sh("$GPT convert $T/hf/model.safetensors $T/hf/config.json", &err);
    CHECK(rc == 1 && strstr(err, "destroy the input"), "convert onto config.json: rc %d, %s", rc, err);
    free(err);
    // an OUT named for another format: refused with one line naming it,
    // exit 2, nothing written (a model.bin was written under that name)
    static const char *const foreign[] = {"out.gguf", "out.safetensors", "OUT.GGUF", "m.bin.json"};
    for (size_t i = 0; i < sizeof foreign / sizeof *foreign; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "$GPT convert $T/hf $T/%s", foreign[i]);
        rc = sh(cmd, &err);
        CHECK(rc == 2 && one_line(err) && strstr(err, foreign[i]) && strstr(err, "only a model.bin") &&
                  size_of(tmp(foreign[i])) == -1,
              "convert to %s: rc %d, %s, %lld bytes written", foreign[i], rc, err, (long long)size_of(tmp(foreign[i])));
        free(err);
    }
    // 2. a device is refused, and stays a device
    rc = sh("$GPT convert $T/hf /dev/full", &err);
    struct stat st;
    CHECK(rc == 1 && strstr(err, "not a regular file") && stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode),
          "convert to /dev/full: rc %d, %s", rc, err);
    free(err);
    // an existing file: refused without --force; replaced with it, its mode kept
    sh("echo old > $T/ro.bin && chmod 0444 $T/ro.bin", NULL);
    rc = sh("$GPT convert $T/hf $T/ro.bin", &err);
    CHECK(rc == 1 && strstr(err, "--force") && size_of(tmp("ro.bin")) == 4, "existing OUT: rc %d, %s", rc, err);
    free(err);
    rc = sh("$GPT convert $T/hf $T/ro.bin --force", &err);
    CHECK(rc == 0 && stat(tmp("ro.bin"), &st) == 0 && (st.st_mode & 0777) == 0444 && st.st_size > 1000000,
          "--force: rc %d, mode %o, %lld bytes, %s", rc, st.st_mode & 0777, (long long)st.st_size, err);
    free(err);
    rc = sh("$GPT -m $T/ro.bin -p Hi -n 2 --temp 0 > /dev/null", NULL);
    CHECK(rc == 0, "the replaced model.bin runs: rc %d", rc);
    // 3. Ctrl-C while converting the 124M model: nothing left behind
    sh("mkdir -p $T/int", NULL);
    char out_bin[2048];
    snprintf(out_bin, sizeof out_bin, "%s", tmp("int/out.bin"));
    rc = run_signalled((const char *const[]){"convert", ckpt("gpt2-124M-shaped"), out_bin, NULL}, NULL, "convert.out", 0,
                       0.4, SIGINT, &err);
    char *left = NULL;
    sh("ls -A $T/int > $T/left", NULL);
    left = slurp(tmp("left"));
    CHECK(rc == 130 && left[0] == '\0', "Ctrl-C during convert: rc %d, left '%s', %s", rc, left, err);
    free(left);
    free(err);
}

static void test_write_errors(void) {
    char *err;
    struct {
        const char *cmd, *want;
    } cases[] = {
        {"$GPT -m $TINY -p Hello -n 20 > /dev/full", "stdout: No space left on device"},
        {"$GPT -m $TINY -p Hello -n 20 --echo > /dev/full", "stdout: No space left on device"},
        {"$GPT -m $TINY -p Hello -n 5 --json > /dev/full", "stdout: No space left on device"},
        {"$GPT -m $TINY -p 'Hello world' --score > /dev/full", "stdout: No space left on device"},
        {"$GPT -m $TINY -p 'Hello world' --score --per-token > /dev/full", "stdout: No space left on device"},
        {"$GPT --tokenize -p Hello > /dev/full", "stdout: No space left on device"},
        {"echo 15496 | $GPT --detokenize > /dev/full", "stdout: No space left on device"},
        {"$GPT inspect $TINY > /dev/full", "stdout: No space left on device"},
        {"echo Hello | $GPT -m $TINY --batch -n 2 > /dev/full", "stdout: No space left on device"},
        {"$GPT --help > /dev/full", "stdout: No space left on device"},
        {"$GPT -m $TINY -p Hello -n 20 >&-", "stdout: Bad file descriptor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = sh(cases[i].cmd, &err);
        CHECK(rc == 1 && strstr(err, cases[i].want) && one_line(err), "%s: rc %d, '%s'", cases[i].cmd, rc, err);
        free(err);
    }
    // a reader that goes away, SIGPIPE ignored as many supervisors run
    // programs: EPIPE stops generation at once (not after 100000 tokens)
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sh("trap '' PIPE; $GPT -m $TINY -p Hello -n 100000 --ignore-eos | head -c 10 > /dev/null", &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(strstr(err, "stdout: Broken pipe") != NULL && seconds < 20, "EPIPE: rc %d after %.1f s, '%s'", rc, seconds,
          err);
    free(err);
}

static void test_interrupt(void) {
    char *err;
    // the 124M model generates slowly enough to be interrupted mid-way; as
    // a model.bin it loads by mmap in a few ms (the safetensors, converted
    // at load, took 0.5-1.5 s, and over 2.5 s on a busy machine, which then
    // ended the run before generation as a signal during the load does)
    const char *m124 = ckpt("gpt2-124M-shaped");
    sh("$GPT convert $M124 $T/124m.bin > /dev/null", NULL);
    char m124_bin[2048];
    snprintf(m124_bin, sizeof m124_bin, "%s", tmp("124m.bin"));
    int rc = run_signalled((const char *const[]){"-m", m124_bin, "-p", "Hello", "-n", "100000", "--ignore-eos", "--json",
                                                 "--stats", "-t", "1", NULL},
                           NULL, "gen.json", 0, 2.5, SIGINT, &err);
    char *out = slurp(tmp("gen.json"));
    cJSON *j = cJSON_Parse(out);
    const cJSON *stop = cJSON_GetObjectItem(j, "stop_reason"), *tokens = cJSON_GetObjectItem(j, "tokens");
    CHECK(rc == 130 && stop && !strcmp(stop->valuestring, "interrupted") && cJSON_GetArraySize(tokens) > 0 &&
              strstr(err, "interrupted") && strstr(err, "decode:"),
          "Ctrl-C during generation: rc %d, stdout '%.200s', stderr '%.300s'", rc, out, err);
    cJSON_Delete(j);
    free(out);
    free(err);
    // SIGTERM while the model loads (converted to Q8, over a second): exit
    // 130 at once, nothing written; it was killed, 143
    rc = run_signalled((const char *const[]){"-m", m124, "--dtype", "q8", "-p", "Hello", "-n", "100000", "--json", NULL},
                       NULL, "load.json", 0, 0.2, SIGTERM, &err);
    out = slurp(tmp("load.json"));
    CHECK(rc == 130 && !out[0] && !err[0], "SIGTERM during the load: rc %d, stdout '%.200s', stderr '%.300s'", rc, out,
          err);
    free(out);
    free(err);
    // Ctrl-C during --batch: the report says how many lines were answered,
    // how many of those were stopped early, and how many were never read
    // (it said "lines: 14 (0 failed)" for 40 lines, 4 of them interrupted).
    // 10 lines of one token, then 30 that would run for ever, 4 at a time.
    FILE *f = fopen(tmp("40.jsonl"), "w");
    for (int i = 0; f && i < 40; i++)
        fprintf(f, "{\"prompt\": \"Line %d\", \"max_tokens\": %d}\n", i, i < 10 ? 1 : 100000);
    if (f) fclose(f);
    char in40[2048];
    snprintf(in40, sizeof in40, "%s", tmp("40.jsonl"));
    rc = run_signalled((const char *const[]){"-m", m124_bin, "--batch", "--jsonl", "--parallel", "4", "--ignore-eos",
                                             "--stats-json", "--stats", "-t", "1", NULL},
                       in40, "batch.jsonl", 10, 0.3, SIGINT, &err);
    out = slurp(tmp("batch.jsonl"));
    size_t lines = 0, stopped = 0;
    for (const char *p = out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        lines++;
        const char *nl = strchr(p, '\n');
        const char *reason = strstr(p, "\"stop_reason\":\"interrupted\"");
        stopped += reason && (!nl || reason < nl);
    }
    const char *json_line = strstr(err, "{\"model\"");
    j = json_line ? cJSON_Parse(json_line) : NULL;  // the --stats-json line, then --stats
    const cJSON *answered = cJSON_GetObjectItem(j, "lines"), *interrupted = cJSON_GetObjectItem(j, "interrupted"),
                *not_read = cJSON_GetObjectItem(j, "not_read"), *exact = cJSON_GetObjectItem(j, "not_read_exact");
    char want_text[128] = "?";
    if (answered && interrupted && not_read)
        snprintf(want_text, sizeof want_text, "lines:      %d (0 failed, %d interrupted) in ", answered->valueint,
                 interrupted->valueint);
    CHECK(rc == 130 && answered && interrupted && not_read && cJSON_IsTrue(exact) &&
              (size_t)answered->valueint == lines && (size_t)interrupted->valueint == stopped && stopped >= 1 &&
              stopped <= 4 && answered->valueint + not_read->valueint == 40 && strstr(err, want_text) &&
              strstr(err, "gpt: --batch interrupted: ") && strstr(err, " not read\n"),
          "Ctrl-C during --batch: rc %d, %zu lines written, %zu interrupted, stderr '%.900s'", rc, lines, stopped, err);
    cJSON_Delete(j);
    free(out);
    free(err);
    // a script's `gpt &` runs with SIGINT ignored (by the shell): it stays
    // ignored, and the run ends as if nothing was sent
    rc = sh("$GPT -m $M124 -p Hello -n 100 --ignore-eos --json -t 1 > $T/ign.json & pid=$!; sleep 2; kill -INT $pid; "
            "wait $pid",
            &err);
    out = slurp(tmp("ign.json"));
    j = cJSON_Parse(out);
    stop = cJSON_GetObjectItem(j, "stop_reason"), tokens = cJSON_GetObjectItem(j, "tokens");
    CHECK(rc == 0 && stop && !strcmp(stop->valuestring, "length") && cJSON_GetArraySize(tokens) == 100,
          "SIGINT ignored from the start: rc %d, stdout '%.200s', stderr '%.300s'", rc, out, err);
    cJSON_Delete(j);
    free(out);
    free(err);
}

static void test_options(void) {
    char *err;
    struct {
        const char *cmd;
        int rc;
        const char *want;  // in stderr (or, with rc 0, NULL)
    } cases[] = {
        {"$GPT -m$TINY -pHello -n3 --temp=0 > $T/o", 0, NULL},
        {"$GPT -m $TINY --max=3 --tem 0 -p Hello > $T/o", 0, NULL},  // abbreviations
        {"$GPT -m $TINY -n 3 --temp 0 -- -p > $T/o", 2, "unexpected argument '-p'"},
        {"$GPT -m $TINY -p x --temp 0x10", 2, "--temp 0x10: must be a number >= 0"},
        {"$GPT -m $TINY -p x --temp inf", 2, "--temp inf: must be a number >= 0"},
        {"$GPT -m $TINY -p x --top-p 2.5e-400", 2, "--top-p 2.5e-400: out of range"},
        {"$GPT -m $TINY -p x --temp 1e50", 2, "--temp 1e50: out of range"},
        {"$GPT -m $TINY -p x --te 1", 2, "ambiguous"},  // --temp or --text
        {"$GPT --tokenize -n 5 -p x", 2, "-n does not apply to --tokenize"},
        {"$GPT --tokenize --temp=1 -p x", 2, "--temp does not apply to --tokenize"},
        {"$GPT -m $TINY --score --echo -p x", 2, "--echo does not apply to --score"},
        {"$GPT -m $TINY --stats --detokenize -p 1", 2, "--stats does not apply to --detokenize"},
        {"$GPT -m $TINY -p x --jsonl", 2, "--jsonl does not apply to generation"},
        {"$GPT -m $TINY --score --tokenize", 2, "exclude each other"},
        {"$GPT -m $TINY -p x -n", 2, "-n needs a value"},
        {"$GPT -m $TINY -p x --json -jx", 2, "unknown option '-j'"},  // not the word before it
        {"$GPT -m $TINY -p x --max-tokens", 2, "--max-tokens needs a value"},
        {"$GPT -m $TINY -p x --stop ''", 2, "empty stop string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = sh(cases[i].cmd, &err);
        CHECK(rc == cases[i].rc && (cases[i].want ? strstr(err, cases[i].want) && one_line(err) : !err[0]),
              "%s: rc %d (want %d), '%s'", cases[i].cmd, rc, cases[i].rc, err);
        free(err);
    }
    char *out;
    sh("$GPT -m $TINY -n3 --temp=0 -pHello > $T/a; $GPT -m $TINY --max-tokens 3 --temp 0 --prompt Hello > $T/b", NULL);
    char *a = slurp(tmp("a")), *b = slurp(tmp("b"));
    CHECK(a[0] && !strcmp(a, b), "-n3 --temp=0 -pHello and the long forms differ: '%s' '%s'", a, b);
    free(a), free(b);
    // random seeds are below 2^53: jq and every JSON reader keep them exactly
    int big = 0;
    for (int i = 0; i < 5; i++) {
        sh("$GPT -m $TINY -p x -n 1 --json > $T/s", NULL);
        out = slurp(tmp("s"));
        const char *p = strstr(out, "\"seed\":");
        unsigned long long seed = p ? strtoull(p + 7, NULL, 10) : 0;
        big |= !p || seed >= (1ull << 53);
        free(out);
    }
    CHECK(!big, "a random seed reached 2^53");
    // explicit seeds keep the full 64 bits; from 2^53 on they are written as
    // strings (a JSON reader holds numbers in doubles: jq read 2^53 + 1 as
    // 2^53, and 2^64 - 1 as 2^64, which -s refuses), and read back as such
    const char *seeds[][2] = {{"9007199254740991", "\"seed\":9007199254740991"},
                              {"9007199254740992", "\"seed\":\"9007199254740992\""},
                              {"18446744073709551615", "\"seed\":\"18446744073709551615\""}};
    for (int i = 0; i < 3; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "$GPT -m $TINY -p x -n 3 --json -s %s > $T/s", seeds[i][0]);
        sh(cmd, NULL);
        out = slurp(tmp("s"));
        const char *at = strstr(out, seeds[i][1]);  // the whole value: a comma or a brace after it
        CHECK(at && (at[strlen(seeds[i][1])] == ',' || at[strlen(seeds[i][1])] == '}'), "-s %s: %s", seeds[i][0], out);
        free(out);
        // the seed as a batch line writes it, given back in a --jsonl line: the same run
        snprintf(cmd, sizeof cmd,
                 "$GPT -m $TINY -p x -n 3 --json -s %s | jq -c '.tokens' > $T/a; "
                 "$GPT -m $TINY -p x -n 3 --json -s %s | jq -c '{prompt: \"x\", seed: .stats.seed, max_tokens: 3}' | "
                 "$GPT -m $TINY --batch --jsonl | jq -c '.tokens' > $T/b; cmp -s $T/a $T/b",
                 seeds[i][0], seeds[i][0]);
        CHECK(sh(cmd, NULL) == 0, "-s %s: the seed read back from the JSON is not the same run", seeds[i][0]);
    }
}

static void test_input(void) {
    char *err, *out;
    // the stdin prompt loses one final newline; --keep-newline keeps it
    sh("echo Hello | $GPT -m $TINY -n 1 --temp 0 --json > $T/a; echo Hello | $GPT -m $TINY -n 1 --temp 0 --json "
       "--keep-newline > $T/b; printf '' | $GPT -m $TINY -n 1 --temp 0 --json > $T/c",
       NULL);
    char *a = slurp(tmp("a")), *b = slurp(tmp("b")), *c = slurp(tmp("c"));
    CHECK(strstr(a, "\"prompt_ids\":[15496]"), "echo Hello | gpt: %s", a);
    CHECK(strstr(b, "\"prompt_ids\":[15496,198]"), "--keep-newline: %s", b);
    CHECK(strstr(c, "\"prompt_ids\":[50256]"), "empty stdin starts from <|endoftext|>: %s", c);
    free(a), free(b), free(c);
    // --tokenize -p, --tokenize --json, and --detokenize of that JSON
    sh("$GPT --tokenize -p 'Hello world' > $T/a; $GPT --tokenize --json -p 'Hello world' > $T/b; "
       "$GPT --detokenize < $T/b > $T/c; echo '[15496, 995]' | $GPT --detokenize > $T/d",
       NULL);
    a = slurp(tmp("a")), b = slurp(tmp("b")), c = slurp(tmp("c"));
    char *d = slurp(tmp("d"));
    CHECK(!strcmp(a, "15496 995\n") && !strcmp(b, "[15496,995]\n") && !strcmp(c, "Hello world") &&
              !strcmp(d, "Hello world"),
          "tokenize/detokenize: '%s' '%s' '%s' '%s'", a, b, c, d);
    free(a), free(b), free(c), free(d);
    int rc = sh("echo '[15496, 1.5]' | $GPT --detokenize", &err);
    CHECK(rc == 1 && strstr(err, "element 1 (1.5) is not a token id"), "a fraction in the array: %s", err);
    free(err);
    // clearer messages
    struct {
        const char *cmd, *want;
    } cases[] = {
        {"$GPT -m $TINY <&-", "stdin: Bad file descriptor"},
        {"$GPT -m $TINY < /tmp", "stdin: Is a directory"},
        {"mkdir -p $T/half && cp $TINY/config.json $T/half/ && $GPT -m $T/half -p x",
         "has config.json but no model.safetensors"},
        {"$GPT -m $TINY -p x --tokenizer models/vocab.json -n 1 > /dev/null && cp models/vocab.json $T/ && "
         "$GPT -m $TINY -p x --tokenizer $T/vocab.json",
         "vocab.json needs merges.txt beside it"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        rc = sh(cases[i].cmd, &err);
        CHECK(rc == 1 && strstr(err, cases[i].want) && one_line(err), "%s: rc %d, '%s'", cases[i].cmd, rc, err);
        free(err);
    }
    (void)out;
    // a text typed on a terminal ends at one Ctrl-D (VEOF, byte 4) at the
    // start of a line: gpt answers then, as `wc -c` does, without a second
    // one; the same answer as from a pipe
    struct {
        const char *args[12], *want;
    } typed[] = {
        {{"-q", "--tokenize", NULL}, "15496 995\n"},
        {{"-q", "-m", ckpt("tiny"), "-n", "3", "--temp", "0", NULL}, NULL},
    };
    for (size_t i = 0; i < sizeof typed / sizeof *typed; i++) {
        char cmd[512] = "echo 'Hello world' | $GPT";
        for (int k = 0; typed[i].args[k]; k++)
            snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " '%s'", typed[i].args[k]);
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " > $T/piped");
        sh(cmd, NULL);
        char *piped = slurp(tmp("piped"));
        rc = run_on_terminal(typed[i].args, "Hello world\n\x04");
        out = slurp(tmp("out"));
        err = slurp(tmp("err"));
        CHECK(rc == 0 && !strcmp(out, piped) && (!typed[i].want || !strcmp(out, typed[i].want)),
              "%s, typed on a terminal with one Ctrl-D: rc %d (-1: still reading), stdout '%s' (from a pipe '%s'), stderr '%s'",
              cmd, rc, out, piped, err);
        free(piped), free(out), free(err);
    }
}

static void test_score(void) {
    sh("$GPT -m $TINY --score -p 'The cat sat on the mat.' > $T/a; "
       "$GPT -m $TINY --score --per-token -p 'The cat sat' > $T/b",
       NULL);
    char *a = slurp(tmp("a")), *b = slurp(tmp("b"));
    // its fields separated by single spaces: cut -d' ' -f8 is the perplexity
    CHECK(!strncmp(a, "tokens 7 scored 6 logprob_sum ", 30) && strstr(a, " perplexity ") && a[strlen(a) - 1] == '\n',
          "--score summary: %s", a);
    // "The", " cat", " sat": the first has no log-probability
    CHECK(!strncmp(b, "The\t-\n cat\t-", 12) && strstr(b, "\n sat\t-") && strstr(b, "tokens 3 scored 2 "),
          "--per-token: '%s'", b);
    free(a), free(b);
    // a token that ends inside a UTF-8 character ("\xf0\x9f" and "\x99\x82"
    // are the two halves of U+1F642) is written with each of those bytes
    // as \xHH (it was written raw: no such line was UTF-8); each line is
    // valid UTF-8, and read back with --text's escapes the lines' tokens are
    // the text's bytes
    const char *text = "x\xf0\x9f\x99\x82 \\ \xc3\xbc\ta";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "$GPT -m $TINY --score --per-token -p '%s' > $T/pt", text);
    sh(cmd, NULL);
    char *pt = slurp(tmp("pt")), back[256];
    size_t n_back = 0;
    int valid = 1;
    for (char *line = pt; *line && strncmp(line, "tokens ", 7);) {
        char *tab = strchr(line, '\t'), *nl = strchr(line, '\n');
        if (!tab || !nl || tab > nl) break;
        for (utf8proc_ssize_t i = 0, k; i < nl - line; i += k)
            if ((k = utf8proc_iterate((const utf8proc_uint8_t *)line + i, nl - line - i, &(utf8proc_int32_t){0})) <= 0)
                valid = 0, k = 1;
        for (char *c = line; c < tab && n_back < sizeof back; c++) {
            if (*c != '\\') back[n_back++] = *c;
            else if (c[1] == 'x') back[n_back++] = (char)strtol((char[3]){c[2], c[3], 0}, NULL, 16), c += 3;
            else back[n_back++] = c[1] == 'n' ? '\n' : c[1] == 't' ? '\t' : c[1] == 'r' ? '\r' : c[1], c++;
        }
        line = nl + 1;
    }
    CHECK(valid && n_back == strlen(text) && !memcmp(back, text, n_back) && strstr(pt, "\n\\xf0\\x9f\t"),
          "--per-token of partial UTF-8 characters: '%s'", pt);
    free(pt);
    sh("$GPT -m $TINY --score -p 'The cat sat on the mat.' | cut -d' ' -f8 > $T/a; $GPT -m $TINY --score -p Hi > $T/b",
       NULL);
    a = slurp(tmp("a")), b = slurp(tmp("b"));
    double ppl = strtod(a, NULL);
    CHECK(ppl > 1 && !strcmp(b, "tokens 1 scored 0 logprob_sum 0 perplexity n/a\n"), "cut -d' ' -f8: '%s'; one token: '%s'",
          a, b);
    free(a), free(b);
    // a text longer than tiny's 128 positions: refused, or scored in windows
    char *err;
    int rc = sh("yes 'one two three four' | head -n 60 > $T/long.txt; $GPT -m $TINY --score < $T/long.txt", &err);
    CHECK(rc == 1 && strstr(err, "--stride"), "too long a text: rc %d, %s", rc, err);
    free(err);
    rc = sh("$GPT -m $TINY --score --stride 64 --json < $T/long.txt > $T/w", &err);
    char *w = slurp(tmp("w"));
    cJSON *j = cJSON_Parse(w);
    const cJSON *lp = cJSON_GetObjectItem(j, "logprobs"), *tokens = cJSON_GetObjectItem(j, "tokens");
    const cJSON *windows = cJSON_GetObjectItem(j, "windows");
    CHECK(rc == 0 && lp && tokens && cJSON_GetArraySize(lp) == cJSON_GetArraySize(tokens) &&
              cJSON_IsNull(cJSON_GetArrayItem(lp, 0)) && windows &&
              windows->valueint >= 4,
          "--stride 64: rc %d, %s", rc, err);
    cJSON_Delete(j);
    free(w);
    free(err);
}

// A model.bin whose wte row 0 is NaN (16 bytes changed): every path says so
// and exits 1; nothing prints a NaN perplexity.
static void test_nan_weights(void) {
    char *err;
    sh("$GPT convert $TINY $T/nan.bin 2>/dev/null", NULL);
    FILE *f = fopen(tmp("nan.bin"), "r+b");
    CHECK(f != NULL, "nan.bin");
    if (!f) return;
    unsigned char h[128];
    fread(h, 1, 128, f);
    uint64_t table = 0, data = 0, off = 0;
    for (int k = 7; k >= 0; k--) table = table << 8 | h[88 + k], data = data << 8 | h[96 + k];
    unsigned char e[128];
    fseek(f, (long)table, SEEK_SET);  // tensor 0 is wte
    fread(e, 1, 128, f);
    for (int k = 7; k >= 0; k--) off = off << 8 | e[104 + k];
    float nan4[4] = {NAN, NAN, NAN, NAN};
    fseek(f, (long)(data + off), SEEK_SET);
    fwrite(nan4, 1, 16, f);
    fclose(f);
    struct {
        const char *cmd, *want;
    } cases[] = {
        {"$GPT -m $T/nan.bin -p 'Hello world' -n 5 > /dev/null", "logit of token 0 is not finite"},
        {"$GPT -m $T/nan.bin -p 'Hello world' --score > /dev/null", "not finite"},
        {"$GPT -m $T/nan.bin -p 'Hello world' --score --json > /dev/null", "not finite"},
        {"$GPT -m $T/nan.bin -p '!' -n 2 > /dev/null", "embedding of a token is not finite"},  // token 0 itself
        {"$GPT convert $T/nan.bin $T/nan-q8.bin --dtype q8", "4 NaN or infinite weights, which Q8 cannot hold"},
        {"$GPT -m $T/nan.bin --dtype q8 -p x", "4 NaN or infinite weights"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int rc = sh(cases[i].cmd, &err);
        CHECK(rc == 1 && strstr(err, cases[i].want) && one_line(err), "%s: rc %d, '%s'", cases[i].cmd, rc, err);
        free(err);
    }
}

// scripts/get-gpt2.sh: a failed or interrupted download leaves nothing,
// not even the directories it made for the output (the fake curl on the
// PATH fails, or hangs until interrupted).
static void test_get_script(void) {
    char *err;
    // offline: curl fails as it does without a name server; one try, and
    // one line that says so (no retries, no progress meter)
    sh("mkdir -p $T/bin $T/dl $T/dl2 && printf '#!/bin/sh\\necho x >> %s/calls\\n"
       "echo \"curl: (6) Could not resolve host: huggingface.co\" >&2\\nexit 6\\n' \"$T\" > $T/bin/curl && "
       "chmod +x $T/bin/curl",
       NULL);
    int rc = sh("PATH=$T/bin:$PATH GPT=$GPT sh scripts/get-gpt2.sh --out $T/dl/share/gpt/gpt2.bin > /dev/null", &err);
    sh("ls -A $T/dl > $T/left; wc -l < $T/calls > $T/ncalls", NULL);
    char *left = slurp(tmp("left")), *calls = slurp(tmp("ncalls"));
    CHECK(rc == 1 && one_line(err) &&
              strstr(err, "get-gpt2.sh: cannot reach https://huggingface.co ((6) Could not resolve host: "
                          "huggingface.co): offline? (--from DIR converts a local copy)") &&
              left[0] == '\0' && atoi(calls) == 1,
          "offline: rc %d, left '%s', %s curl calls, '%s'", rc, left, calls, err);
    free(calls);
    free(left);
    free(err);
    // reachable, then a download that fails: named, nothing left
    sh("printf '#!/bin/sh\\ncase \"$*\" in *\"-r 0-0\"*) exit 0 ;; esac\\nexit 22\\n' > $T/bin/curl", NULL);
    rc = sh("PATH=$T/bin:$PATH GPT=$GPT sh scripts/get-gpt2.sh --out $T/dl/share/gpt/gpt2.bin > /dev/null", &err);
    sh("ls -A $T/dl > $T/left", NULL);
    left = slurp(tmp("left"));
    CHECK(rc == 1 && strstr(err, "download of model.safetensors failed") && left[0] == '\0',
          "a failed download: rc %d, left '%s', %s", rc, left, err);
    free(left);
    free(err);
    // a directory that was there stays
    rc = sh("mkdir $T/dl/share && PATH=$T/bin:$PATH GPT=$GPT sh scripts/get-gpt2.sh --out $T/dl/share/gpt/gpt2.bin "
            "> /dev/null; ls -A $T/dl > $T/left",
            &err);
    left = slurp(tmp("left"));
    CHECK(!strcmp(left, "share\n"), "a failed download into a new directory of one that was there: left '%s', %s",
          left, err);
    free(left);
    free(err);
    // stopped by SIGTERM (a job started with & ignores SIGINT, which its
    // shell then cannot trap: the fake curl would sleep its 20 s out)
    sh("printf '#!/bin/sh\\nsleep 20\\n' > $T/bin/curl", NULL);
    rc = sh("(PATH=$T/bin:$PATH GPT=$GPT setsid sh scripts/get-gpt2.sh --out $T/dl2/gpt/gpt2.bin > /dev/null & pid=$!; "
            "sleep 1; kill -TERM -$pid; wait $pid)",
            &err);
    sh("ls -A $T/dl2 > $T/left", NULL);
    left = slurp(tmp("left"));
    CHECK(rc == 143 && left[0] == '\0', "an interrupted download: rc %d, left '%s', %s", rc, left, err);
    free(left);
    free(err);
}

// make install into a DESTDIR, then the installed gpt run from elsewhere:
// it finds its tokenizer, and the model where gpt-get-gpt2 puts it.
static void test_install(void) {
    char *err, cmd[2048];
    const char *build = getenv("BUILD");
    snprintf(cmd, sizeof cmd, "make -s install BUILD=%s DESTDIR=$T/root PREFIX=/usr > /dev/null",
             build && *build ? build : "build");
    int rc = sh(cmd, &err);
    CHECK(rc == 0, "make install: rc %d, %s", rc, err);
    free(err);
    // no GPT-2, in the source tree: models/demo.bin beside the binary's directory
    rc = sh("G=$(realpath $GPT) && cd / && HOME=$T/home XDG_DATA_HOME= GPT_MODEL= $G -p Hello -n 2 --stats > $T/o", &err);
    CHECK(rc == 0 && strstr(err, "running the demo model ") && strstr(err, "models/demo.bin (") &&
              strstr(err, "\nmodel:      /") && strstr(err, "/models/demo.bin (model.bin,"),
          "the source tree's gpt, no GPT-2: the demo model: rc %d, %s", rc, err);
    // ... and names the source tree's script, gpt-get-gpt2 being only installed
    CHECK(strstr(err, "/scripts/get-gpt2.sh fetches GPT-2 124M") && !strstr(err, "gpt-get-gpt2"),
          "the source tree's gpt, no GPT-2: the script as the source tree has it: %s", err);
    free(err);
    // -q: not a word on stderr
    rc = sh("G=$(realpath $GPT) && cd / && HOME=$T/home XDG_DATA_HOME= GPT_MODEL= $G -q -p Hello -n 2 > $T/o", &err);
    CHECK(rc == 0 && err[0] == '\0', "-q, the demo model: rc %d, stderr '%s'", rc, err);
    free(err);
    // no GPT-2: the installed demo model runs, and says so in one line
    rc = sh("cd / && HOME=$T/home XDG_DATA_HOME= GPT_MODEL= $T/root/usr/bin/gpt -p Hello -n 2 --json > $T/o", &err);
    char *out = slurp(tmp("o"));
    CHECK(rc == 0 && one_line(err) && strstr(err, "running the demo model") &&
              strstr(err, "/root/usr/share/gpt/demo.bin (") && strstr(err, "; gpt-get-gpt2 fetches GPT-2") &&
              strstr(out, "\"model\":\"") && strstr(out, "/share/gpt/demo.bin\""),
          "installed, no GPT-2: the demo model: rc %d, '%s', %s", rc, out, err);
    free(out);
    free(err);
    // nothing at all: the message lists every place searched, in order
    sh("mv $T/root/usr/share/gpt/demo.bin $T/demo.bin", NULL);
    rc = sh("cd / && HOME=$T/home XDG_DATA_HOME= GPT_MODEL= $T/root/usr/bin/gpt -p Hello -n 2", &err);
    const char *places[] = {"models/gpt2.bin", "/home/.local/share/gpt/gpt2.bin", "/root/usr/share/gpt/gpt2.bin",
                            "/root/usr/share/gpt/demo.bin", "models/demo.bin."};
    const char *at = err;
    for (size_t i = 0; at && i < sizeof places / sizeof *places; i++) at = strstr(at, places[i]);
    CHECK(rc == 1 && one_line(err) && strstr(err, "no model") && strstr(err, "gpt-get-gpt2") && at,
          "installed, no model: rc %d, %s", rc, err);
    free(err);
    sh("mv $T/demo.bin $T/root/usr/share/gpt/demo.bin", NULL);
    rc = sh("cd / && $T/root/usr/bin/gpt --tokenize -p Hello > $T/o", &err);
    out = slurp(tmp("o"));
    CHECK(rc == 0 && !strcmp(out, "15496\n"), "installed --tokenize finds share/gpt: rc %d, '%s' %s", rc, out, err);
    free(out);
    free(err);
    rc = sh("cd / && HOME=$T/home XDG_DATA_HOME= GPT= $T/root/usr/bin/gpt-get-gpt2 --from $TINY > /dev/null && "
            "HOME=$T/home XDG_DATA_HOME= GPT_MODEL= $T/root/usr/bin/gpt -p Hello -n 2 --temp 0 > $T/o",
            &err);
    out = slurp(tmp("o"));
    CHECK(rc == 0 && path_exists(tmp("home/.local/share/gpt/gpt2.bin")) && !strcmp(out, "HelloHello"),
          "gpt-get-gpt2 into the data dir, then gpt from /: rc %d, '%s', %s", rc, out, err);
    free(out);
    free(err);
    // the installed script names itself as installed, in its usage and its errors
    rc = sh("$T/root/usr/bin/gpt-get-gpt2 --frob", &err);
    CHECK(rc == 2 && !strncmp(err, "usage: gpt-get-gpt2 ", 20) && !strstr(err, "get-gpt2.sh"),
          "gpt-get-gpt2's usage: rc %d, %s", rc, err);
    free(err);
    // its --help names the command as installed (the source tree's name
    // only as that), and is the file's header comment alone (it went on
    // into the script: "set -eu", the URL)
    rc = sh("$T/root/usr/bin/gpt-get-gpt2 --help > $T/help", &err);
    char *help = slurp(tmp("help"));
    size_t named = 0, as_source = 0;
    for (const char *at = help; (at = strstr(at, "get-gpt2.sh")); at++) named++;
    for (const char *at = help; (at = strstr(at, "scripts/get-gpt2.sh")); at++) as_source++;
    CHECK(rc == 0 && !err[0] && !strncmp(help, "gpt-get-gpt2 - ", 15) && strstr(help, "\n  gpt-get-gpt2 --from DIR") &&
              named == as_source && !strstr(help, "set -eu") && !strstr(help, "URL="),
          "gpt-get-gpt2 --help: rc %d, '%s', %s", rc, help, err);
    free(help);
    free(err);
    rc = sh("GPT=$GPT $T/root/usr/bin/gpt-get-gpt2 --from /nonexistent --out $T/x.bin", &err);
    CHECK(rc == 1 && !strncmp(err, "gpt-get-gpt2: /nonexistent", 26) && one_line(err),
          "gpt-get-gpt2's error: rc %d, %s", rc, err);
    free(err);
}

int main(void) {
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "robust") != 0) return 1;
    test_convert();
    test_write_errors();
    test_interrupt();
    test_options();
    test_input();
    test_score();
    test_nan_weights();
    test_get_script();
    test_install();
    scratch_dir_remove(tmpdir);
    return check_exit("test_robust");
}

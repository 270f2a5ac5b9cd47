/*
 * test_cli.c - end-to-end tests of the gpt command: exit codes, stdout,
 * stderr, and generation through the whole program against the Hugging Face
 * references (tests/fixtures/public_refs.json).
 *
 * Runs $GPT (default build/gpt) on the checkpoints in $CKPT_DIR.
 */
#define _XOPEN_SOURCE 700  // posix_openpt: stdout on a terminal
#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>

#include "check.h"
#include "base/fileio.h"
#include "run_gpt.h"

static char tmpdir[256];

#define RUN(...) run_gpt(tmpdir, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_IN(text, ...) run_gpt(tmpdir, text, strlen(text), (const char *const[]){__VA_ARGS__, NULL})

// ---------------------------------------------------------------------------

static void test_usage(void) {
    Result r = RUN("--help");
    CHECK(r.rc == 0 && strstr(r.out, "usage: gpt") && strstr(r.out, "exit codes"), "--help: rc %d", r.rc);
    result_free(&r);
    // a reader that closes stdout (| head) ends gpt by SIGPIPE: the shell's
    // 141, in the table of exit codes; 300 KB of ids fill any pipe's buffer
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "yes hello | head -c 300000 > %s/big.txt && { '%s' --tokenize < %s/big.txt; echo $? > %s/status; } | "
             "head -c 1 > /dev/null",
             tmpdir, gpt_binary(), tmpdir, tmpdir);
    char *status = NULL;
    size_t status_len;
    CHECK(system(cmd) == 0 && file_read_all(path_in(tmpdir, "status"), &status, &status_len, NULL) == 0 &&
              !strcmp(status, "141\n"),
          "gpt --tokenize | head -c 1: status %s, want 141", status ? status : "(none)");
    free(status);
    r = RUN("--help");
    CHECK(r.rc == 0 && strstr(r.out, "130 interrupted, 141 stdout closed by its reader (SIGPIPE"),
          "--help's exit codes lack 141: %s", strstr(r.out, "exit codes") ? strstr(r.out, "exit codes") : r.out);
    result_free(&r);
    r = RUN("--version");
    CHECK(r.rc == 0 && strncmp(r.out, "gpt ", 4) == 0, "--version: rc %d out %s", r.rc, r.out);
    result_free(&r);

    struct {
        const char *args[6];
        const char *message;
    } bad[] = {
        {{"--frobnicate"}, "unknown option '--frobnicate'"},
        {{"-n", "-5"}, "-n -5: must be an integer in [0, 1000000000]"},
        {{"-n", "ten"}, "-n ten"},
        {{"--top-p", "1.5"}, "--top-p 1.5: must be a number in (0, 1]"},
        {{"--top-p", "0"}, "--top-p 0: must be a number in (0, 1]"},
        {{"--temp", "-1"}, "--temp -1: must be a number >= 0"},
        {{"--temp", "nan"}, "--temp nan: must be a number >= 0"},
        {{"--top-k", "-2"}, "--top-k -2"},
        // a number too large names the range's end, not only "an integer"
        {{"--top-k", "99999999999"}, "--top-k 99999999999: must be an integer in [0, 2147483647]"},
        {{"-n", "1000000001"}, "-n 1000000001: must be an integer in [0, 1000000000]"},
        {{"-n", "99999999999999999999"}, "-n 99999999999999999999: must be an integer in [0, 1000000000]"},
        {{"-n", "-99999999999999999999"}, "must be an integer in [0, 1000000000]"},
        {{"--score", "--stride", "99999999999999999999"}, "--stride 99999999999999999999: out of range"},
        {{"--min-p", "1.5"}, "--min-p 1.5: must be a number in [0, 1]"},
        {{"--repeat-penalty", "0"}, "--repeat-penalty 0: must be a number > 0"},
        {{"-t", "0"}, "-t 0: must be an integer in [1, 1024]"},
        {{"-s", "-1"}, "-s -1"},
        // strtoull skips the blank and negates: " -5" was taken as seed 2^64 - 5
        {{"-s", " -5"}, "-s  -5: must be an integer"},
        {{"-n", " 3"}, "-n  3: must be an integer in [0, 1000000000]"},
        {{"--temp", " 1"}, "--temp  1: must be a number >= 0"},
        {{"--max-tokens"}, "--max-tokens needs a value"},
        {{"--batch", "--blas"}, "--blas does not apply to --batch (OpenBLAS's bits depend on the rows in a call"},
        {{"--tokenize", "--blas"}, "--blas does not apply to --tokenize"},
        {{"--echo=yes"}, "--echo takes no value"},
        {{"--tokenize", "--detokenize"}, "exclude each other"},
        {{"stray"}, "unexpected argument 'stray'"},
        {{"--dtype", "int4"}, "--dtype int4: must be f32, f16, bf16, q8, q6, q4 or q4-pure"},
        {{"--dtype", "q4pure"}, "--dtype q4pure: must be f32, f16, bf16, q8, q6, q4 or q4-pure"},
        {{"--draft-dtype", "q4-pure-"}, "--draft-dtype q4-pure-: must be f32, f16, bf16, q8, q6, q4 or q4-pure"},
        {{"--kv-type", "bf16"}, "--kv-type bf16: must be f32 or f16"},
        // combinations where one option was silently dropped
        {{"--json", "--per-token"}, "--per-token and --json exclude each other"},
        // log-probabilities and multiple choice
        {{"--logprobs", "21"}, "--logprobs 21: must be an integer in [0, 20]"},
        {{"--logprobs", "-1"}, "--logprobs -1: must be an integer in [0, 20]"},
        {{"--choice", ""}, "--choice: an empty choice has no tokens to score"},
        {{"--choice", "a", "-n", "3"}, "-n does not apply to --choice"},
        {{"--choice", "a", "--echo"}, "--echo does not apply to --choice"},
        {{"--choice", "a", "--score"}, "--choice does not apply to --score"},
        {{"--batch", "--choice", "a"}, "--choice does not apply to --batch"},
        {{"--score", "--logprobs", "2"}, "--logprobs does not apply to --score"},
        {{"--score", "--json", "--per-token"}, "--per-token and --json exclude each other"},
        // --stop's C escapes: an unknown one, or \x00, is refused as typed
        {{"--stop", "a\\q"}, "--stop a\\q: '\\q' is not an escape"},
        {{"--stop", "a\\x00"}, "--stop a\\x00: '\\x00' is not an escape"},
        {{"--stop", "a\\"}, "'\\' is not an escape"},
        // an option of one value given twice: which was meant? (-m and -p are given once already)
        {{"-p", "y"}, "-p given twice: it takes one value"},
        {{"--model", "y"}, "--model given twice: it takes one value"},
        {{"-s1", "--seed=2"}, "--seed given twice: it takes one value"},
        {{"--dtype", "q8", "--dtype=q8"}, "--dtype given twice: it takes one value"},
        {{"--temp", "0", "--tem=1"}, "--temp given twice: it takes one value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *args[12] = {"-m", ckpt("tiny"), "-p", "x"};
        int n = 4;
        for (int j = 0; bad[i].args[j]; j++) args[n++] = bad[i].args[j];
        args[n] = NULL;
        r = run_gpt(tmpdir, NULL, 0, args);
        CHECK(r.rc == 2 && strstr(r.err, bad[i].message) && one_line(r.err) && r.out_len == 0,
              "%s: rc %d, stderr '%s', want exit 2 and '%s'", bad[i].args[0], r.rc, r.err, bad[i].message);
        result_free(&r);
    }
    // --stop adds one each time; options that greedy decoding leaves without
    // effect are named in one line (scripts pass them: not an error); -q silences it
    r = RUN("-m", ckpt("tiny"), "-p", "x", "-n", "2", "--stop", "zz", "--stop", "yy", "--temp", "0", "--top-k", "5",
            "-s", "1", "--top-p", "1");
    CHECK(r.rc == 0 && one_line(r.err) &&
              strstr(r.err, "gpt: --top-k, --seed: no effect with --temp 0 (greedy decoding takes the most likely "
                            "token)"),
          "--top-k and -s with --temp 0: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", ckpt("tiny"), "-p", "x", "-n", "2", "--temp", "0", "--min-p", "0.1", "-q");
    CHECK(r.rc == 0 && r.err[0] == '\0', "--min-p with --temp 0 and -q: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", ckpt("tiny"), "-p", "x", "-n", "2", "--temp", "0.5", "--top-k", "5", "--min-p", "0.1", "-s", "1");
    CHECK(r.rc == 0 && r.err[0] == '\0', "sampling options with --temp 0.5: rc %d, '%s'", r.rc, r.err);
    result_free(&r);

    // a prompt without -p: the hint names the option it lacks
    r = RUN("-m", ckpt("tiny"), "Hello world", "-n", "2");
    CHECK(r.rc == 2 && one_line(r.err) && strstr(r.err, "gpt: unexpected argument 'Hello world' (did you mean -p "
                                                        "\"Hello world\"?)"),
          "a prompt without -p: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", ckpt("tiny"), "say \"hi\"");
    CHECK(r.rc == 2 && one_line(r.err) && strstr(r.err, "(did you mean -p 'say \"hi\"'?)"),
          "a prompt with quotes without -p: rc %d, '%s'", r.rc, r.err);
    result_free(&r);

    // --flag=value is the same as --flag value
    r = RUN("-m", ckpt("tiny"), "-p", "x", "--top-p=2");
    CHECK(r.rc == 2 && strstr(r.err, "--top-p 2: must be a number in (0, 1]"), "--top-p=2: rc %d %s", r.rc, r.err);
    result_free(&r);
}

// Writes DIR/config.json and DIR/model.safetensors: the tiny checkpoint with
// one header entry edited. field "data_offsets" moves the tensor's end past
// the data, "dtype" makes it I32, NULL removes the tensor.
static int write_edited_checkpoint(const char *dir, const char *tensor, const char *field) {
    char path[2048], *data = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s", ckpt("tiny/model.safetensors"));
    if (file_read_all(path, &data, &len, NULL) != 0 || len < 8) return -1;
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | (unsigned char)data[i];
    char *json = strndup(data + 8, header_len);
    cJSON *h = cJSON_Parse(json);
    cJSON *t = cJSON_GetObjectItem(h, tensor);
    if (!t) return -1;
    if (!field) {
        cJSON_DeleteItemFromObject(h, tensor);
    } else if (!strcmp(field, "dtype")) {
        cJSON_ReplaceItemInObject(t, "dtype", cJSON_CreateString("I32"));
    } else {
        cJSON *offsets = cJSON_GetObjectItem(t, "data_offsets");
        double end = cJSON_GetArrayItem(offsets, 1)->valuedouble;
        cJSON_ReplaceItemInArray(offsets, 1, cJSON_CreateNumber(end + 4096));
    }
    char *edited = cJSON_PrintUnformatted(h);
    uint64_t n = strlen(edited);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/tiny/config.json %s/", dir, ckpt_dir(), dir);
    int rc = system(cmd) == 0 ? 0 : -1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    if (!f) rc = -1;
    if (f) {
        for (int i = 0; i < 8; i++) fputc((int)(n >> (8 * i)) & 0xFF, f);
        fwrite(edited, 1, n, f);
        fwrite(data + 8 + header_len, 1, len - 8 - header_len, f);
        fclose(f);
    }
    free(edited);
    cJSON_Delete(h);
    free(json);
    free(data);
    return rc;
}

static void test_model_errors(void) {
    Result r = RUN("-m", "/nonexistent/model.bin", "-p", "x");
    CHECK(r.rc == 1 && strstr(r.err, "/nonexistent/model.bin") && one_line(r.err) && r.out_len == 0,
          "missing model: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    // a stale $GPT_MODEL: the message says where the path came from; -m does not
    setenv("GPT_MODEL", "/nonexistent/env.bin", 1);
    r = RUN("-p", "x");
    CHECK(r.rc == 1 && strstr(r.err, "/nonexistent/env.bin: No such file or directory") &&
              strstr(r.err, "$GPT_MODEL") && one_line(r.err),
          "stale GPT_MODEL: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", "/nonexistent/model.bin", "-p", "x");
    CHECK(r.rc == 1 && !strstr(r.err, "GPT_MODEL"), "-m over GPT_MODEL: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    // one rule in every mode: --tokenize and --detokenize too (they ignored it)
    const char *const tokenizing[][2] = {{"--tokenize", "x"}, {"--detokenize", "15496"}};
    for (int i = 0; i < 2; i++) {
        r = RUN(tokenizing[i][0], "-p", tokenizing[i][1]);
        CHECK(r.rc == 1 && r.out_len == 0 && strstr(r.err, "/nonexistent/env.bin: No such file or directory") &&
                  strstr(r.err, "$GPT_MODEL") && one_line(r.err),
              "stale GPT_MODEL, %s: rc %d, '%s'", tokenizing[i][0], r.rc, r.err);
        result_free(&r);
        r = RUN(tokenizing[i][0], "-m", "/nonexistent/model.bin", "--tokenizer", "models", "-p", tokenizing[i][1]);
        CHECK(r.rc == 1 && r.out_len == 0 && strstr(r.err, "/nonexistent/model.bin") && !strstr(r.err, "GPT_MODEL") &&
                  one_line(r.err),
              "missing -m with --tokenizer, %s: rc %d, '%s'", tokenizing[i][0], r.rc, r.err);
        result_free(&r);
    }
    setenv("GPT_MODEL", "models/demo.bin", 1);
    r = RUN("--tokenize", "-p", "Hello world");
    CHECK(r.rc == 0 && !strcmp(r.out, "15496 995\n"), "GPT_MODEL=models/demo.bin --tokenize: rc %d, '%s' '%s'", r.rc,
          r.out, r.err);
    result_free(&r);
    unsetenv("GPT_MODEL");

    // A truncated copy of the tiny checkpoint.
    char src[2048], dst[1024];
    snprintf(src, sizeof src, "%s", ckpt("tiny/model.safetensors"));
    snprintf(dst, sizeof dst, "%s/truncated", tmpdir);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && head -c 100000 %s > %s/model.safetensors && cp %s/tiny/config.json %s/",
             dst, src, dst, ckpt_dir(), dst);
    CHECK(system(cmd) == 0, "%s", cmd);
    r = RUN("-m", dst, "-p", "x");
    CHECK(r.rc == 1 && strstr(r.err, "model.safetensors") && one_line(r.err),
          "truncated model: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    // A header that lies about offsets, a missing tensor, a wrong dtype.
    struct {
        const char *name, *tensor, *field;
        const char *message;
    } lies[] = {
        {"lying-offsets", "ln_f.bias", "data_offsets", "ln_f.bias"},
        {"missing-tensor", "h.1.mlp.c_fc.bias", NULL, "h.1.mlp.c_fc.bias"},
        {"wrong-dtype", "wpe.weight", "dtype", "wpe.weight"},
    };
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        snprintf(dst, sizeof dst, "%s/%s", tmpdir, lies[i].name);
        CHECK(write_edited_checkpoint(dst, lies[i].tensor, lies[i].field) == 0, "writing %s", dst);
        r = RUN("-m", dst, "-p", "x");
        CHECK(r.rc == 1 && strstr(r.err, "model.safetensors") && strstr(r.err, lies[i].message) && one_line(r.err),
              "%s: rc %d, '%s'", lies[i].name, r.rc, r.err);
        result_free(&r);
    }
    // A file that is no checkpoint at all.
    r = RUN("-m", "tests/fixtures/prompts.json", "-p", "x");
    CHECK(r.rc == 1 && strstr(r.err, "tests/fixtures/prompts.json") && one_line(r.err),
          "not a model: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    // a GGUF file cut after its version: read as one, and named truncated
    // (tests/cli_gguf.sh runs whole ones)
    snprintf(dst, sizeof dst, "%s/gpt2.gguf", tmpdir);
    snprintf(cmd, sizeof cmd, "printf 'GGUF\\003\\000\\000\\000' > %s", dst);
    CHECK(system(cmd) == 0, "%s", cmd);
    r = RUN("-m", dst, "-p", "x");
    CHECK(r.rc == 1 && strstr(r.err, "gpt2.gguf: the GGUF header runs past the end of the file") &&
              strstr(r.err, "truncated?") && one_line(r.err),
          "GGUF: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
}

// gpt run in directory dir with args (a shell's words, quoted), stdin
// /dev/null: its exit status, stderr into err (cap bytes), -1 if it could
// not be run.
static int run_in_dir(const char *dir, const char *args, char *err, size_t cap) {
    char gpt[4096], cmd[8192];
    if (!realpath(gpt_binary(), gpt)) return -1;
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s < /dev/null > stdout 2> stderr; echo $? > status", dir, gpt, args);
    if (system(cmd) != 0) return -1;
    char *status = NULL, *text = NULL;
    size_t n;
    int rc = -1;
    if (file_read_all(path_in(dir, "status"), &status, &n, NULL) == 0) rc = atoi(status);
    err[0] = '\0';
    if (file_read_all(path_in(dir, "stderr"), &text, &n, NULL) == 0) snprintf(err, cap, "%s", text);
    free(status);
    free(text);
    return rc;
}

// A model the search found in the working directory, which the user never
// named, that fails to load: the message says where it came from, as a
// stale $GPT_MODEL's does (an empty ./models/gpt2/, a bad ./models/gpt2.bin)
static void test_default_model_errors(void) {
    char dir[512], cmd[2048], err[4096];
    snprintf(dir, sizeof dir, "%s/stray", tmpdir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/models/gpt2", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    int rc = run_in_dir(dir, "-p x -n 1", err, sizeof err);
    CHECK(rc == 1 && one_line(err) &&
              strstr(err, "(the default ./models/gpt2/, found in the working directory; -m PATH or $GPT_MODEL names "
                          "another)\n"),
          "an empty ./models/gpt2/: rc %d, '%s'", rc, err);
    snprintf(cmd, sizeof cmd, "echo 'version https://git-lfs.github.com/spec/v1' > %s/models/gpt2.bin", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    rc = run_in_dir(dir, "-p x -n 1", err, sizeof err);
    CHECK(rc == 1 && one_line(err) && strstr(err, "models/gpt2.bin") &&
              strstr(err, "(the default ./models/gpt2.bin, found in the working directory;"),
          "a bad ./models/gpt2.bin: rc %d, '%s'", rc, err);
    // -m names it: the plain message
    rc = run_in_dir(dir, "-m models/gpt2.bin -p x -n 1", err, sizeof err);
    CHECK(rc == 1 && one_line(err) && !strstr(err, "the default"), "-m models/gpt2.bin: rc %d, '%s'", rc, err);
}

static cJSON *parse_json_output(const Result *r) {
    cJSON *j = cJSON_Parse(r->out);
    CHECK(j != NULL, "stdout is not JSON: '%.200s' (rc %d, stderr '%.300s')", r->out, r->rc, r->err);
    return j;
}

static int ids_equal(const cJSON *a, const cJSON *b) {
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) return 0;
    for (int i = 0; i < cJSON_GetArraySize(a); i++)
        if (cJSON_GetArrayItem(a, i)->valueint != cJSON_GetArrayItem(b, i)->valueint) return 0;
    return 1;
}

// Greedy generation through the whole program equals transformers' 40 ids.
static void test_greedy_reference(const cJSON *refs, const char *name, int n_prompts) {
    const cJSON *cases = cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), name);
    for (int i = 0; i < n_prompts && i < cJSON_GetArraySize(cases); i++) {
        const cJSON *c = cJSON_GetArrayItem(cases, i);
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        Result r = RUN("-m", ckpt(name), "-p", text, "-n", "40", "--temp", "0", "--ignore-eos", "--json");
        cJSON *j = parse_json_output(&r);
        CHECK(r.rc == 0, "%s prompt %d: rc %d, %s", name, i, r.rc, r.err);
        if (j) {
            const cJSON *ids = cJSON_GetObjectItem(j, "prompt_ids"), *count = cJSON_GetObjectItem(j, "prompt_tokens");
            CHECK(ids_equal(ids, cJSON_GetObjectItem(c, "ids")) && cJSON_IsNumber(count) &&
                      count->valueint == cJSON_GetArraySize(ids),
                  "%s prompt %d: prompt ids differ, or prompt_tokens is not their count", name, i);
            CHECK(ids_equal(cJSON_GetObjectItem(j, "tokens"), cJSON_GetObjectItem(c, "greedy_ids")),
                  "%s prompt %d: greedy tokens differ from transformers'", name, i);
            const cJSON *stop = cJSON_GetObjectItem(j, "stop_reason");
            CHECK(stop && !strcmp(stop->valuestring, "length"), "%s prompt %d: stop_reason", name, i);
        }
        cJSON_Delete(j);
        result_free(&r);
        // The streamed text is transformers' decoded text.
        r = RUN("-m", ckpt(name), "-p", text, "-n", "40", "--temp", "0", "--ignore-eos");
        const char *want = cJSON_GetObjectItem(c, "greedy_text")->valuestring;
        CHECK(r.rc == 0 && strcmp(r.out, want) == 0, "%s prompt %d: streamed '%s', want '%s'", name, i,
              r.out, want);
        result_free(&r);
    }
}

static void test_generation(void) {
    const char *tiny = ckpt("tiny");
    // stdin is the prompt when -p is absent
    Result a = RUN("-m", tiny, "-p", "Hello, my name is", "-n", "12", "--temp", "0");
    Result b = RUN_IN("Hello, my name is", "-m", tiny, "-n", "12", "--temp", "0");
    CHECK(a.rc == 0 && b.rc == 0 && strcmp(a.out, b.out) == 0, "stdin prompt differs from -p");
    // --echo prints the prompt first
    Result e = RUN("-m", tiny, "-p", "Hello, my name is", "-n", "12", "--temp", "0", "--echo");
    CHECK(e.rc == 0 && strncmp(e.out, "Hello, my name is", 17) == 0 && strcmp(e.out + 17, a.out) == 0,
          "--echo: '%s'", e.out);
    result_free(&a);
    result_free(&b);
    result_free(&e);

    // A seed makes sampling reproducible, whatever the thread count.
    Result s1 = RUN("-m", tiny, "-p", "Once upon a time", "-n", "30", "-s", "42", "-t", "1", "--ignore-eos");
    Result s2 = RUN("-m", tiny, "-p", "Once upon a time", "-n", "30", "-s", "42", "-t", "2", "--ignore-eos");
    Result s3 = RUN("-m", tiny, "-p", "Once upon a time", "-n", "30", "-s", "43", "-t", "1", "--ignore-eos");
    CHECK(s1.rc == 0 && strcmp(s1.out, s2.out) == 0, "same seed, 1 vs 2 threads: '%s' vs '%s'", s1.out, s2.out);
    CHECK(strcmp(s1.out, s3.out) != 0, "seeds 42 and 43 gave the same 30 tokens");
    result_free(&s1);
    result_free(&s2);
    result_free(&s3);

    // Without -s the seed is random and --stats shows it; rerunning with it
    // reproduces the text.
    Result r1 = RUN("-m", tiny, "-p", "The", "-n", "20", "--stats", "--ignore-eos");
    const char *seed_line = strstr(r1.err, "seed:");
    CHECK(r1.rc == 0 && seed_line, "--stats shows no seed: %s", r1.err);
    if (seed_line) {
        char seed[32] = {0};
        sscanf(seed_line, "seed: %31s", seed);
        Result r2 = RUN("-m", tiny, "-p", "The", "-n", "20", "-s", seed, "--ignore-eos");
        CHECK(r2.rc == 0 && strcmp(r1.out, r2.out) == 0, "seed %s does not reproduce the run", seed);
        result_free(&r2);
    }
    result_free(&r1);

    // An empty prompt starts from <|endoftext|>.
    Result z = RUN("-m", tiny, "-p", "", "-n", "3", "--json", "--temp", "0");
    cJSON *j = parse_json_output(&z);
    if (j) {
        cJSON *p = cJSON_GetObjectItem(j, "prompt_ids");
        CHECK(cJSON_GetArraySize(p) == 1 && cJSON_GetArrayItem(p, 0)->valueint == 50256,
              "empty prompt: prompt_ids should be [50256]");
    }
    cJSON_Delete(j);
    result_free(&z);

    // An empty stdin (or one newline) is the empty prompt, with one note on
    // stderr (-q silences it); -p "" gets none
    const char *empties[] = {"", "\n"};
    for (int i = 0; i < 2; i++) {
        Result e1 = RUN_IN(empties[i], "-m", tiny, "-n", "2", "--temp", "0");
        Result e2 = RUN("-m", tiny, "-p", "", "-n", "2", "--temp", "0");
        CHECK(e1.rc == 0 && one_line(e1.err) &&
                  strstr(e1.err, "gpt: the prompt read from stdin is empty: starting from <|endoftext|>") &&
                  !strcmp(e1.out, e2.out) && e2.err[0] == '\0',
              "an empty stdin (%d): rc %d, '%s'; -p \"\": '%s'", i, e1.rc, e1.err, e2.err);
        result_free(&e1);
        result_free(&e2);
    }
    Result eq = RUN_IN("", "-m", tiny, "-n", "2", "-q");
    CHECK(eq.rc == 0 && eq.err[0] == '\0', "an empty stdin with -q: '%s'", eq.err);
    result_free(&eq);

    // -n 0 generates nothing and succeeds.
    Result n0 = RUN("-m", tiny, "-p", "Hi", "-n", "0");
    CHECK(n0.rc == 0 && n0.out_len == 0, "-n 0: rc %d, out '%s'", n0.rc, n0.out);
    result_free(&n0);
}

// What gpt run with args (NULL-terminated) writes to a pseudo-terminal on
// file descriptor fd (1 stdout, 2 stderr), as written (no \r added),
// malloc'd and NUL-terminated; stdin and the other are /dev/null. NULL if
// no terminal can be had.
static char *run_on_terminal(int fd, const char *const *args) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) return NULL;
    const char *slave_name = ptsname(master);
    const char *argv[32];
    int n = 0;
    argv[n++] = gpt_binary();
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int slave = open(slave_name, O_RDWR | O_NOCTTY), null = open("/dev/null", O_RDWR);
        struct termios t;
        if (slave < 0 || tcgetattr(slave, &t) != 0) _exit(127);
        t.c_oflag &= ~(tcflag_t)OPOST;  // the bytes as written: no \n -> \r\n
        tcsetattr(slave, TCSANOW, &t);
        dup2(null, 0);
        dup2(fd == 1 ? slave : null, 1);
        dup2(fd == 2 ? slave : null, 2);
        close(master);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    size_t len = 0, cap = 1 << 16;
    char *out = malloc(cap);
    // until the terminal closes with gpt's exit (EIO)
    for (ssize_t got; len + 1 < cap && (got = read(master, out + len, cap - 1 - len)) > 0;) len += (size_t)got;
    out[len] = '\0';
    waitpid(pid, NULL, 0);
    close(master);
    return out;
}

// On a terminal the text ends with a newline (the shell's prompt starts a
// line); into a file its bytes are exactly the text's.
static void test_terminal(void) {
    const char *tiny = ckpt("tiny");
    char *t = run_on_terminal(1, (const char *const[]){"-m", tiny, "-p", "Hello", "-n", "3", "--temp", "0", NULL});
    Result f = RUN("-m", tiny, "-p", "Hello", "-n", "3", "--temp", "0");
    CHECK(t && !strcmp(t, "HelloHelloHello\n") && !strcmp(f.out, "HelloHelloHello"),
          "generation on a terminal '%s', into a file '%s'", t ? t : "(no pty)", f.out);
    free(t);
    result_free(&f);
    t = run_on_terminal(1, (const char *const[]){"--detokenize", "-p", "15496 995", NULL});
    f = RUN("--detokenize", "-p", "15496 995");
    CHECK(t && !strcmp(t, "Hello world\n") && !strcmp(f.out, "Hello world"),
          "--detokenize on a terminal '%s', into a file '%s'", t ? t : "(no pty)", f.out);
    free(t);
    result_free(&f);
    // a text that ends a line gets no second newline
    t = run_on_terminal(1, (const char *const[]){"--detokenize", "-p", "15496 198", NULL});
    CHECK(t && !strcmp(t, "Hello\n"), "--detokenize of 'Hello\\n' on a terminal: '%s'", t ? t : "(no pty)");
    free(t);
}

// Whether err shows a progress line that begins with `prefix` and is
// cleared at the end: its last drawing, "\r" + the line (and spaces over a
// longer one before it), then "\r", spaces over all of it, "\r"; after that
// nothing of it (other messages may follow).
static int progress_cleared(const char *err, const char *prefix) {
    char start[64];
    snprintf(start, sizeof start, "\r%s", prefix);
    const char *last = NULL;
    for (const char *at = err; (at = strstr(at, start)); at++) last = at;
    if (!last) return 0;
    const char *end = strchr(last + 1, '\r');
    if (!end) return 0;
    size_t drawn = (size_t)(end - last - 1), spaces = strspn(end + 1, " ");
    while (drawn && last[drawn] == ' ') drawn--;  // the padding over a longer line before
    return spaces >= drawn && end[1 + spaces] == '\r' && !strchr(end + 2 + spaces, '\r');
}

// --progress draws the progress line on stderr through a pipe or a file
// (and on a terminal it is drawn without it; never into a file otherwise),
// clears it at the end, and changes no byte of stdout.
static void test_progress(void) {
    const char *tiny = ckpt("tiny");
    char lines[4096] = "", text[8192] = "";
    for (int i = 0; i < 24; i++) {
        char line[64];
        snprintf(line, sizeof line, "Line %d of the prompts\n", i);
        strcat(lines, line);
    }
    for (int i = 0; i < 300; i++) strcat(text, " one two");
    struct {
        const char *name, *prefix, *input, *args[12];
    } runs[] = {
        {"--batch", "gpt --batch: ", lines, {"-m", tiny, "--batch", "-n", "8", "-s", "1", "--parallel", "4", NULL}},
        {"--score", "gpt --score: ", text, {"-m", tiny, "--score", "--stride", "64", "--per-token", NULL}},
    };
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        const char *args[16];
        int n = 0;
        for (; runs[i].args[n]; n++) args[n] = runs[i].args[n];
        args[n] = NULL;
        Result plain = run_gpt(tmpdir, runs[i].input, strlen(runs[i].input), args);
        args[n] = "--progress";
        args[n + 1] = NULL;
        Result shown = run_gpt(tmpdir, runs[i].input, strlen(runs[i].input), args);
        CHECK(plain.rc == 0 && shown.rc == 0 && plain.out_len == shown.out_len &&
                  !memcmp(plain.out, shown.out, plain.out_len) && !strchr(plain.err, '\r') &&
                  progress_cleared(shown.err, runs[i].prefix),
              "%s --progress: rc %d and %d, stdout %s, stderr without it '%.100s', with it '%.300s'", runs[i].name,
              plain.rc, shown.rc, plain.out_len == shown.out_len ? "the same length" : "differs", plain.err, shown.err);
        result_free(&plain);
        result_free(&shown);
    }
    // --batch from a file knows how far it is (124M: slow enough to be drawn after the first lines)
    Result r = RUN_IN(lines, "-m", ckpt("gpt2-124M-shaped"), "--batch", "-n", "8", "--parallel", "4", "--progress");
    CHECK(r.rc == 0 && strstr(r.err, "% of stdin") && strstr(r.err, " left"), "--batch --progress from a file: '%.300s'",
          r.err);
    result_free(&r);
    // gpt convert: the same file, with the line and without
    char out_a[1024], out_b[1024];
    snprintf(out_a, sizeof out_a, "%s/progress-a.bin", tmpdir);
    snprintf(out_b, sizeof out_b, "%s/progress-b.bin", tmpdir);
    Result a = RUN("convert", tiny, out_a), b = RUN("convert", tiny, out_b, "--progress");
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    file_read_all(out_a, &x, &nx, NULL);
    file_read_all(out_b, &y, &ny, NULL);
    CHECK(a.rc == 0 && b.rc == 0 && x && y && nx == ny && !memcmp(x, y, nx) && !strchr(a.err, '\r') &&
              progress_cleared(b.err, "gpt convert: ") && strstr(b.err, "tensors written") &&
              strstr(b.err, "\rgpt: wrote "),
          "convert --progress: rc %d and %d, stderr without it '%.200s', with it '%.300s'", a.rc, b.rc, a.err, b.err);
    free(x), free(y);
    result_free(&a);
    result_free(&b);
    // on a terminal the line is there without --progress
    char *t = run_on_terminal(2, (const char *const[]){"-m", tiny, "--score", "-p", "Hello world", NULL});
    CHECK(t && progress_cleared(t, "gpt --score: 1/1 tokens scored"), "--score on a terminal: stderr '%s'",
          t ? t : "(no pty)");
    free(t);
    // generation has no progress line
    r = RUN("-m", tiny, "-p", "x", "--progress");
    CHECK(r.rc == 2 && strstr(r.err, "--progress does not apply to generation") && one_line(r.err),
          "--progress in generation: rc %d, %s", r.rc, r.err);
    result_free(&r);
}

static void test_context_limits(void) {
    const char *tiny = ckpt("tiny");  // 128 positions
    char prompt[2048] = "";
    for (int i = 0; i < 200; i++) strcat(prompt, " a");  // 200 tokens
    Result r = RUN("-m", tiny, "-p", prompt, "-n", "5");
    CHECK(r.rc == 1 && strstr(r.err, "200 tokens") && strstr(r.err, "128") && one_line(r.err),
          "too long a prompt: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    // 120 prompt tokens leave 8 positions: generation stops at the context.
    prompt[0] = '\0';
    for (int i = 0; i < 120; i++) strcat(prompt, " a");
    r = RUN("-m", tiny, "-p", prompt, "-n", "50", "--json", "--ignore-eos", "--temp", "0");
    cJSON *j = parse_json_output(&r);
    if (j) {
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "prompt_ids")) == 120, "120 prompt tokens");
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")) == 8, "%d tokens generated, want 8",
              cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")));
        CHECK(!strcmp(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "context"), "stop_reason");
        cJSON *s = cJSON_GetObjectItem(j, "stats");
        CHECK(cJSON_GetObjectItem(s, "seq_tokens")->valueint == 127,
              "the last token is not fed back: seq_tokens %d, want 127", cJSON_GetObjectItem(s, "seq_tokens")->valueint);
    }
    CHECK(r.rc == 0 && strstr(r.err, "end of the context"), "context stop: rc %d, '%s'", r.rc, r.err);
    cJSON_Delete(j);
    result_free(&r);
    // -q silences that note, never an error
    r = RUN("-m", tiny, "-p", prompt, "-n", "50", "--ignore-eos", "--temp", "0", "-q");
    CHECK(r.rc == 0 && r.out_len > 0 && r.err[0] == '\0', "-q at the end of the context: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", "/nonexistent/model.bin", "-p", "x", "--quiet");
    CHECK(r.rc == 1 && strstr(r.err, "/nonexistent/model.bin") && one_line(r.err), "-q and an error: rc %d, '%s'",
          r.rc, r.err);
    result_free(&r);
    // a --stride past the context is a usage error, as --kv-budget too small
    // for one block is: known once the model is, and before stdin is read
    r = RUN("-m", tiny, "--score", "--stride", "200", "-p", prompt);
    CHECK(r.rc == 2 && strstr(r.err, "--stride 200: must be at most the model's context, 128") && one_line(r.err) &&
              r.out_len == 0, "--stride past the context: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", tiny, "--score", "--stride", "128", "-p", prompt);
    CHECK(r.rc == 0 && r.out_len > 0, "--stride of the whole context: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
}

static void test_stats(void) {
    // 124M: 2 x 12 x 12 x 64 x 4 = 73728 B per token; 72 MiB at 1024 tokens.
    Result r = RUN("-m", ckpt("gpt2-124M-shaped"), "-p", "Hello, my name is", "-n", "8", "--temp", "0",
                   "--ignore-eos", "--stats", "--json");
    CHECK(r.rc == 0, "124M --stats: rc %d %s", r.rc, r.err);
    CHECK(strstr(r.err, "2 x 12 layers x 12 heads x 64 dims x 4 bytes (F32) = 73728 B/token") != NULL,
          "--stats lacks the per-token factors: %s", r.err);
    CHECK(strstr(r.err, "72.00 MiB") != NULL, "--stats lacks the full-context 72.00 MiB");
    cJSON *j = parse_json_output(&r);
    cJSON *s = j ? cJSON_GetObjectItem(j, "stats") : NULL;
    const char *keys[] = {"kv_bytes_per_token", "kv_bytes_sequence", "seq_tokens", "kv_bytes_full_context",
                          "kv_bytes_allocated", "prefill_tokens", "prefill_tok_s", "decode_tokens",
                          "decode_tok_s", "peak_rss_bytes", "seed"};
    for (size_t i = 0; s && i < sizeof keys / sizeof *keys; i++)
        CHECK(cJSON_GetObjectItem(s, keys[i]) != NULL, "stats lacks %s", keys[i]);
    if (s) {
        double per = cJSON_GetObjectItem(s, "kv_bytes_per_token")->valuedouble;
        double seq = cJSON_GetObjectItem(s, "seq_tokens")->valuedouble;
        CHECK(per == 73728, "kv_bytes_per_token %g", per);
        // 5 prompt tokens + 8 new, the last not fed back: 12 positions held.
        CHECK(seq == 12, "seq_tokens %g, want 12", seq);
        CHECK(cJSON_GetObjectItem(s, "kv_bytes_sequence")->valuedouble == 12 * 73728, "kv_bytes_sequence");
        CHECK(cJSON_GetObjectItem(s, "kv_bytes_full_context")->valuedouble == 75497472, "kv_bytes_full_context");
        // prompt + new tokens, 13 positions, in whole blocks of 16
        CHECK(cJSON_GetObjectItem(s, "kv_bytes_allocated")->valuedouble == 16 * 73728,
              "allocated for prompt + new tokens (13 positions, one block of 16): %g",
              cJSON_GetObjectItem(s, "kv_bytes_allocated")->valuedouble);
        CHECK(cJSON_GetObjectItem(s, "prefill_tokens")->valuedouble == 5, "prefill_tokens");
        CHECK(cJSON_GetObjectItem(s, "decode_tokens")->valuedouble == 7, "decode_tokens");
        CHECK(cJSON_GetObjectItem(s, "peak_rss_bytes")->valuedouble > 4e8, "peak_rss_bytes");
    }
    cJSON_Delete(j);
    result_free(&r);

    // --dtype q4 is a mix (wte, layer 0 and attn.c_proj in Q6): --stats, its JSON and inspect say so
    const char *mix = "Q4 (Q6: wte, h.0, attn.c_proj)";
    r = RUN("-m", ckpt("tiny"), "--dtype", "q4", "-p", "Hello", "-n", "2", "--temp", "0", "--stats", "--json");
    j = parse_json_output(&r);
    s = j ? cJSON_GetObjectItem(j, "stats") : NULL;
    const cJSON *wd = s ? cJSON_GetObjectItem(s, "weight_dtype") : NULL;
    CHECK(r.rc == 0 && strstr(r.err, "matrices Q4 (Q6: wte, h.0, attn.c_proj)") && cJSON_IsString(wd) &&
              !strcmp(wd->valuestring, mix),
          "--dtype q4 --stats: 'matrices %s' and weight_dtype \"%s\" expected: rc %d, %s", mix, mix, r.rc, r.err);
    cJSON_Delete(j);
    result_free(&r);
    const char *q4 = path_in(tmpdir, "q4.bin");
    r = RUN("convert", ckpt("tiny"), q4, "--dtype", "q4");
    CHECK(r.rc == 0 && strstr(r.err, mix), "convert --dtype q4: rc %d, %s", r.rc, r.err);
    result_free(&r);
    r = RUN("inspect", q4);
    CHECK(r.rc == 0 && strstr(r.out, "matrices:    Q4 (Q6: wte, h.0, attn.c_proj)") &&
              strstr(r.out, "wte.weight                   Q6 ") && strstr(r.out, "h.0.mlp.c_fc.weight          Q6 ") &&
              strstr(r.out, "h.1.mlp.c_fc.weight          Q4 ") && strstr(r.out, "h.1.attn.c_proj.weight       Q6 "),
          "inspect of a q4 file: the matrices line, wte, h.0's c_fc and h.1's attn.c_proj Q6, h.1's c_fc Q4 "
          "expected: %s", r.out);
    result_free(&r);
    unlink(q4);

    // --dtype q6: every matrix Q6, said so, and a q6 model.bin lists it per tensor
    r = RUN("-m", ckpt("tiny"), "--dtype", "Q6", "-p", "Hello", "-n", "2", "--temp", "0", "--stats");
    CHECK(r.rc == 0 && strstr(r.err, "matrices Q6,"), "--dtype Q6 --stats: 'matrices Q6,' expected: rc %d, %s", r.rc,
          r.err);
    result_free(&r);
    r = RUN("convert", ckpt("tiny"), q4, "--dtype", "q6");
    CHECK(r.rc == 0, "convert --dtype q6: rc %d, %s", r.rc, r.err);
    result_free(&r);
    r = RUN("inspect", q4);
    CHECK(r.rc == 0 && strstr(r.out, "matrices:    Q6 (") && strstr(r.out, "wte.weight                   Q6 ") &&
              strstr(r.out, "h.1.mlp.c_fc.weight          Q6 ") && !strstr(r.out, " Q4 "),
          "inspect of a q6 file: every matrix Q6 expected: %s", r.out);
    result_free(&r);
    unlink(q4);

    // --dtype q4-pure (any case): every matrix Q4, wte too, and said so
    const char *pure = "Q4 (every matrix)";
    r = RUN("-m", ckpt("tiny"), "--dtype", "Q4-Pure", "-p", "Hello", "-n", "8", "--temp", "0", "--stats", "--json");
    j = parse_json_output(&r);
    s = j ? cJSON_GetObjectItem(j, "stats") : NULL;
    wd = s ? cJSON_GetObjectItem(s, "weight_dtype") : NULL;
    CHECK(r.rc == 0 && strstr(r.err, "matrices Q4 (every matrix)") && cJSON_IsString(wd) &&
              !strcmp(wd->valuestring, pure),
          "--dtype q4-pure --stats: 'matrices %s' and weight_dtype \"%s\" expected: rc %d, %s", pure, pure, r.rc, r.err);
    char *at_load = j ? cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "tokens")) : NULL;
    cJSON_Delete(j);
    result_free(&r);
    r = RUN("convert", ckpt("tiny"), q4, "--dtype", "q4-purex");
    CHECK(r.rc == 2 && one_line(r.err) && strstr(r.err, "--dtype q4-purex: must be f32, f16, bf16, q8, q6, q4 or q4-pure") &&
              !path_exists(q4),
          "convert --dtype q4-purex: rc %d, %s", r.rc, r.err);
    result_free(&r);
    r = RUN("convert", ckpt("tiny"), q4, "--dtype", "q4-pure");
    CHECK(r.rc == 0 && strstr(r.err, pure), "convert --dtype q4-pure: rc %d, %s", r.rc, r.err);
    result_free(&r);
    r = RUN("inspect", q4);
    CHECK(r.rc == 0 && strstr(r.out, "matrices:    Q4 (every matrix)") && strstr(r.out, "wte.weight                   Q4 ") &&
              strstr(r.out, "h.0.mlp.c_fc.weight          Q4 ") && strstr(r.out, "h.0.attn.c_attn.weight       Q4 ") &&
              strstr(r.out, "h.1.attn.c_proj.weight       Q4 ") && !strstr(r.out, " Q8 ") && !strstr(r.out, " Q6 "),
          "inspect of a q4-pure file: every matrix Q4, none Q8 or Q6, expected: %s", r.out);
    result_free(&r);
    // the q4-pure model.bin runs as the conversion at load does
    r = RUN("-m", q4, "-p", "Hello", "-n", "8", "--temp", "0", "--json");
    j = parse_json_output(&r);
    char *from_file = j ? cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "tokens")) : NULL;
    CHECK(r.rc == 0 && at_load && from_file && !strcmp(at_load, from_file),
          "the q4-pure model.bin's tokens %s, --dtype q4-pure's %s", from_file ? from_file : "?", at_load ? at_load : "?");
    free(at_load);
    free(from_file);
    cJSON_Delete(j);
    result_free(&r);
    unlink(q4);
    // --draft-dtype q4-pure: the model itself in q4-pure drafts, the text
    // stays the plain run's
    const char *p = "It was the best of times, it was the worst of times,";
    Result plain = RUN("-m", "models/demo.bin", "-p", p, "-n", "40", "-s", "11");
    r = RUN("-m", "models/demo.bin", "-p", p, "-n", "40", "-s", "11", "--draft-dtype", "q4-pure", "--stats");
    CHECK(plain.rc == 0 && r.rc == 0 && plain.out_len > 0 && plain.out_len == r.out_len &&
              !memcmp(plain.out, r.out, plain.out_len) && strstr(r.err, "(matrices Q4 (every matrix))"),
          "--draft-dtype q4-pure: plain '%s', speculative rc %d '%s' %s", plain.out, r.rc, r.out, r.err);
    result_free(&plain);
    result_free(&r);
}

// --kv-type f16: half the bytes per position, in every figure of the report.
static void test_kv_f16(void) {
    Result r = RUN("-m", ckpt("gpt2-124M-shaped"), "-p", "Hello, my name is", "-n", "8", "--temp", "0",
                   "--kv-type", "f16", "--stats", "--json");
    CHECK(r.rc == 0, "--kv-type f16: rc %d %s", r.rc, r.err);
    CHECK(strstr(r.err, "2 x 12 layers x 12 heads x 64 dims x 2 bytes (F16) = 36864 B/token") != NULL &&
              strstr(r.err, "1024 tokens x 36864 B = 37748736 B (36.00 MiB)") != NULL,
          "--kv-type f16 --stats: %s", r.err);
    cJSON *j = parse_json_output(&r);
    cJSON *s = j ? cJSON_GetObjectItem(j, "stats") : NULL;
    CHECK(s && !strcmp(cJSON_GetObjectItem(s, "kv_dtype")->valuestring, "F16") &&
              cJSON_GetObjectItem(s, "kv_bytes_per_token")->valuedouble == 36864 &&
              cJSON_GetObjectItem(s, "kv_bytes_sequence")->valuedouble == 12 * 36864 &&
              cJSON_GetObjectItem(s, "kv_bytes_full_context")->valuedouble == 37748736 &&
              cJSON_GetObjectItem(s, "kv_bytes_allocated")->valuedouble == 16 * 36864,
          "--kv-type f16 --json: stats in F16 bytes");
    cJSON_Delete(j);
    result_free(&r);
}

static void test_score(const cJSON *refs) {
    const char *names[] = {"tiny", "gpt2-124M-shaped"};
    for (int m = 0; m < 2; m++) {
        const cJSON *cases = cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), names[m]);
        for (int i = 0; i < 3; i++) {
            const cJSON *c = cJSON_GetArrayItem(cases, i);
            Result r = RUN("-m", ckpt(names[m]), "-p", cJSON_GetObjectItem(c, "text")->valuestring,
                           "--score", "--json");
            cJSON *j = parse_json_output(&r);
            if (j) {
                const cJSON *want = cJSON_GetObjectItem(c, "prompt_token_logprobs");
                // lined up with tokens: the first token's is null, the reference starts at the second
                const cJSON *got = cJSON_GetObjectItem(j, "logprobs");
                CHECK(cJSON_GetArraySize(got) == cJSON_GetArraySize(want) + 1 && cJSON_IsNull(cJSON_GetArrayItem(got, 0)) &&
                          cJSON_GetArraySize(got) == cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")),
                      "%s %d: %d logprobs, want null + %d", names[m], i, cJSON_GetArraySize(got),
                      cJSON_GetArraySize(want));
                double worst = 0;
                for (int k = 0; k < cJSON_GetArraySize(want) && k + 1 < cJSON_GetArraySize(got); k++) {
                    double d =
                        fabs(cJSON_GetArrayItem(got, k + 1)->valuedouble - cJSON_GetArrayItem(want, k)->valuedouble);
                    if (d > worst) worst = d;
                }
                CHECK(worst < 1e-3, "%s %d: a log-prob is off by %g", names[m], i, worst);
                double sum = cJSON_GetObjectItem(j, "sum")->valuedouble;
                double want_sum = cJSON_GetObjectItem(c, "prompt_logprob_sum")->valuedouble;
                CHECK(fabs(sum - want_sum) < 1e-2, "%s %d: sum %f, want %f", names[m], i, sum, want_sum);
                double ppl = cJSON_GetObjectItem(j, "perplexity")->valuedouble;
                int n = cJSON_GetArraySize(want);
                CHECK(fabs(ppl - exp(-want_sum / n)) < 1e-3 * ppl, "%s %d: perplexity %f", names[m], i, ppl);
            }
            cJSON_Delete(j);
            result_free(&r);
        }
    }
    Result r = RUN("-m", ckpt("tiny"), "-p", "Hello world", "--score");
    CHECK(r.rc == 0 && strstr(r.out, "perplexity") && one_line(r.out), "--score summary: '%s'", r.out);
    result_free(&r);
    // --prepend-eos scores the first token too, from <|endoftext|>
    // (lm-evaluation-harness's rule): the run of the text typed after a
    // literal <|endoftext|> with --special, bit for bit
    r = RUN("-m", ckpt("tiny"), "-p", "Hello world", "--score", "--json", "--prepend-eos");
    Result lit = RUN("-m", ckpt("tiny"), "-p", "<|endoftext|>Hello world", "--score", "--json", "--special");
    cJSON *a = parse_json_output(&r), *b = parse_json_output(&lit);
    char *pa = NULL, *pb = NULL;
    if (a && b) {
        cJSON_DeleteItemFromObject(a, "stats");
        cJSON_DeleteItemFromObject(b, "stats");
        pa = cJSON_PrintUnformatted(a);
        pb = cJSON_PrintUnformatted(b);
    }
    CHECK(pa && pb && !strcmp(pa, pb) && strstr(pa, "\"tokens\":[50256,") && strstr(pa, "\"logprobs\":[null,"),
          "--prepend-eos: %s, the literal <|endoftext|>: %s", pa ? pa : r.err, pb ? pb : lit.err);
    free(pa);
    free(pb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    result_free(&lit);
    result_free(&r);
}

// One rule for the final newline of stdin in every mode that reads a text:
// dropped (it ends the input's last line), kept with --keep-newline.
// --tokenize kept it, the manual said it dropped it.
static void test_final_newline(void) {
    const char *tiny = ckpt("tiny");
    struct {
        const char *in, *want, *want_kept;
    } cases[] = {{"Hello world\n", "15496 995\n", "15496 995 198\n"},
                 {"Hello world\r\n", "15496 995\n", "15496 995 201 198\n"},
                 {"Hello world", "15496 995\n", "15496 995\n"},
                 {"Hello world\n\n", "15496 995 198\n", "15496 995 628\n"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Result r = RUN_IN(cases[i].in, "--tokenize"), k = RUN_IN(cases[i].in, "--tokenize", "--keep-newline");
        CHECK(r.rc == 0 && !strcmp(r.out, cases[i].want) && k.rc == 0 && !strcmp(k.out, cases[i].want_kept),
              "--tokenize of stdin case %zu: '%s' and, --keep-newline, '%s'", i, r.out, k.out);
        result_free(&r);
        result_free(&k);
    }
    // --score and --choice read stdin by the same rule: as -p without the newline, or with it
    // (--choice: its --json "choices", the sums of each choice's tokens)
    const char *const modes[][6] = {{"--score", NULL}, {"--choice", " a", "--choice", " b", "--json", NULL}};
    for (int m = 0; m < 2; m++) {
        const char *const *x = modes[m];
        Result r[4] = {RUN_IN("The cat sat\n", "-m", tiny, x[0], x[1], x[2], x[3], x[4]),
                       RUN_IN("", "-m", tiny, "-p", "The cat sat", x[0], x[1], x[2], x[3], x[4]),
                       RUN_IN("The cat sat\n", "-m", tiny, "--keep-newline", x[0], x[1], x[2], x[3], x[4]),
                       RUN_IN("", "-m", tiny, "-p", "The cat sat\n", x[0], x[1], x[2], x[3], x[4])};
        char *out[4];
        for (int k = 0; k < 4; k++) {
            cJSON *j = m ? cJSON_Parse(r[k].out) : NULL;
            out[k] = m ? cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "choices")) : strdup(r[k].out);
            if (!out[k]) out[k] = strdup("?");
            cJSON_Delete(j);
        }
        CHECK(r[0].rc == 0 && r[1].rc == 0 && r[2].rc == 0 && !strcmp(out[0], out[1]) && !strcmp(out[2], out[3]) &&
                  strcmp(out[0], out[2]) != 0,
              "%s from stdin: '%s' against -p '%s'; --keep-newline '%s' against '%s' (%s)", x[0], out[0], out[1],
              out[2], out[3], r[0].err);
        for (int k = 0; k < 4; k++) free(out[k]), result_free(&r[k]);
    }
}

static void test_tokenize_cli(const cJSON *refs) {
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(refs, "tokenizer")) {
        const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
        for (int special = 0; special < 2; special++) {
            // the text exactly: --keep-newline keeps a final newline (case 28 ends with one)
            Result r = special ? RUN_IN(text, "--tokenize", "--special", "--keep-newline")
                               : RUN_IN(text, "--tokenize", "--keep-newline");
            const cJSON *ids = cJSON_GetObjectItem(c, special ? "ids_special" : "ids_text");
            char want[8192] = "";
            size_t len = 0;
            const cJSON *id;
            cJSON_ArrayForEach(id, ids)
                len += (size_t)snprintf(want + len, sizeof want - len, len ? " %d" : "%d", id->valueint);
            snprintf(want + len, sizeof want - len, "\n");
            CHECK(r.rc == 0 && strcmp(r.out, want) == 0, "--tokenize%s case %d: '%s', want '%s'",
                  special ? " --special" : "", i, r.out, want);
            // and back
            Result d = RUN_IN(r.out, "--detokenize");
            CHECK(d.rc == 0 && d.out_len == strlen(text) && memcmp(d.out, text, d.out_len) == 0,
                  "--detokenize case %d: '%s'", i, d.out);
            result_free(&d);
            result_free(&r);
        }
        i++;
    }
    Result r = RUN_IN("15496 abc", "--detokenize");
    CHECK(r.rc != 0 && strstr(r.err, "'abc'") && one_line(r.err), "--detokenize of a word: rc %d '%s'", r.rc, r.err);
    result_free(&r);
    // an id followed by a NUL byte is not that id (it was read as 15496)
    r = run_gpt(tmpdir, "15496\0abc 995", 13, (const char *const[]){"--detokenize", NULL});
    CHECK(r.rc != 0 && strstr(r.err, "is not a token id") && one_line(r.err), "--detokenize of '15496\\0abc': rc %d '%s'",
          r.rc, r.err);
    result_free(&r);
    r = RUN_IN("15496 50257", "--detokenize");
    CHECK(r.rc != 0 && strstr(r.err, "50257") && one_line(r.err), "--detokenize of id 50257: rc %d '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN_IN("x", "--tokenize", "--tokenizer", "/nonexistent");
    CHECK(r.rc != 0 && strstr(r.err, "gpt: --tokenizer /nonexistent: No such file or directory") && one_line(r.err),
          "bad --tokenizer: rc %d '%s'", r.rc, r.err);
    result_free(&r);
    // the model directory's own tokenizer files are used with -m
    r = RUN_IN("Hello world", "--tokenize", "-m", ckpt("tiny"));
    CHECK(r.rc == 0 && strcmp(r.out, "15496 995\n") == 0, "--tokenize -m: '%s' %s", r.out, r.err);
    result_free(&r);
}

// --completions N: N results, each the single run with its seed (-s, -s +
// 1, ...; or drawn, and returned), the prompt computed once.
static void test_completions(void) {
    const char *p = "And it came to pass";
    const char *settings[][6] = {{"-s", "5"}, {"-s", "9", "--logprobs", "2", "--echo"}, {"--top-k", "20"}};
    for (int k = 0; k < 3; k++) {
        const char *args[24] = {"-m", "models/demo.bin", "-p", p, "-n", "12", "--json"};
        int n = 7;
        for (int i = 0; settings[k][i]; i++) args[n++] = settings[k][i];
        args[n++] = "--completions";
        args[n++] = "4";
        args[n] = NULL;
        Result r = run_gpt(tmpdir, NULL, 0, args);
        cJSON *j = parse_json_output(&r), *list = cJSON_GetObjectItem(j, "completions");
        // the prompt is shared (not with --echo's log-probabilities, which each computes)
        CHECK(j && cJSON_GetArraySize(list) == 4 &&
                  (k == 1 || cJSON_GetNumberValue(cJSON_GetObjectItem(j, "prefix_tokens_reused")) > 0),
              "--completions 4, setting %d: rc %d %s", k, r.rc, r.err);
        for (int c = 0; c < cJSON_GetArraySize(list); c++) {
            const cJSON *item = cJSON_GetArrayItem(list, c);
            char seed[32];
            snprintf(seed, sizeof seed, "%.0f", cJSON_GetNumberValue(cJSON_GetObjectItem(item, "seed")));
            // the same run alone, with that seed (in place of the setting's -s)
            const char *alone[24] = {"-m", "models/demo.bin", "-p", p, "-n", "12", "--json", "-s", seed};
            int m = 9;
            for (int i = 0; settings[k][i]; i++)
                if (!strcmp(settings[k][i], "-s")) i++;
                else alone[m++] = settings[k][i];
            alone[m] = NULL;
            Result one = run_gpt(tmpdir, NULL, 0, alone);
            cJSON *o = parse_json_output(&one);
            int same = o != NULL;
            for (const char *const *key = (const char *const[]){"tokens", "text", "stop_reason", "logprobs", NULL};
                 same && *key; key++) {
                char *a = cJSON_PrintUnformatted(cJSON_GetObjectItem(item, *key)),
                     *b = cJSON_PrintUnformatted(cJSON_GetObjectItem(o, *key));
                same = (!a && !b) || (a && b && !strcmp(a, b));
                free(a);
                free(b);
            }
            CHECK(same, "--completions 4, setting %d, completion %d (seed %s): not the single run's", k, c, seed);
            cJSON_Delete(o);
            result_free(&one);
        }
        cJSON_Delete(j);
        result_free(&r);
    }
    Result r = RUN("-m", "models/demo.bin", "-p", p, "--completions", "3");
    CHECK(r.rc == 2 && strstr(r.err, "--completions 3 writes a list of results: it needs --json"), "%s", r.err);
    result_free(&r);
    r = RUN("-m", "models/demo.bin", "-p", p, "--completions", "3", "--json", "--lookup", "2");
    CHECK(r.rc == 2 && strstr(r.err, "--completions and speculative decoding exclude each other"), "%s", r.err);
    result_free(&r);
    r = RUN("-m", "models/demo.bin", "-p", p, "--completions", "65");
    CHECK(r.rc == 2 && strstr(r.err, "--completions 65: must be an integer in [1, 64]"), "%s", r.err);
    result_free(&r);
}

// --stats-json in every mode with a model: one JSON line on stderr, the
// --json "stats" (kv_type, and kv_dtype, its old name, until 0.2).
static void test_stats_json(void) {
    const char *modes[][8] = {{"-p", "Hello", "-n", "3"}, {"--score", "-p", "Hello world"},
                              {"-p", "Hello", "--choice", " a", "--choice", " b"}};
    for (int i = 0; i < 3; i++) {
        const char *args[16] = {"-m", "models/demo.bin", "--kv-type", "f16", "--stats-json"};
        int n = 5;
        for (int k = 0; modes[i][k]; k++) args[n++] = modes[i][k];
        args[n] = NULL;
        Result r = run_gpt(tmpdir, NULL, 0, args);
        // the report: the last line, an object with objects inside ("tuning")
        const char *last = strstr(r.err, "\n{") ? NULL : r.err[0] == '{' ? r.err : NULL;
        for (const char *at = strstr(r.err, "\n{"); at; at = strstr(at + 1, "\n{")) last = at + 1;
        cJSON *j = last ? cJSON_Parse(last) : NULL;
        const char *kv_type = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "kv_type")) : NULL;
        const char *kv_dtype = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "kv_dtype")) : NULL;
        CHECK(r.rc == 0 && kv_type && !strcmp(kv_type, "F16") && kv_dtype && !strcmp(kv_dtype, "F16"),
              "--stats-json, mode %d: rc %d, stderr %s", i, r.rc, r.err);
        cJSON_Delete(j);
        result_free(&r);
    }
}

// Promises the help makes and runs that broke them (issue 39's trial).
static void test_promises(void) {
    const char *demo = "models/demo.bin";
    // a $GPT_TUNE that is no mode is refused as --tune bogus is; --tune wins
    const char *tune = getenv("GPT_TUNE");
    char saved[32];
    snprintf(saved, sizeof saved, "%s", tune ? tune : "");
    setenv("GPT_TUNE", "bogus", 1);
    Result r = RUN("-m", ckpt("tiny"), "-p", "Hi", "-n", "3");
    CHECK(r.rc == 2 && r.out_len == 0 && one_line(r.err) && strstr(r.err, "gpt: $GPT_TUNE=bogus: must be on, off or force"),
          "GPT_TUNE=bogus: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN("-m", ckpt("tiny"), "-p", "Hi", "-n", "3", "--tune", "off");
    CHECK(r.rc == 0, "GPT_TUNE=bogus --tune off: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    if (tune) setenv("GPT_TUNE", saved, 1);
    else unsetenv("GPT_TUNE");

    // --stats names the choice --json calls "best", by the same index
    r = RUN("-m", demo, "-q", "-p", "x", "--choice", " a", "--choice", " b", "--stats");
    Result js = RUN("-m", demo, "-q", "-p", "x", "--choice", " a", "--choice", " b", "--json");
    cJSON *j = parse_json_output(&js);
    const char *at = strstr(r.err, "choices:    2, best ");
    int best = j ? cJSON_GetObjectItem(j, "best")->valueint : -1, shown = at ? atoi(at + 20) : -2;
    CHECK(r.rc == 0 && shown == best, "--stats' best %d, --json's %d: '%s'", shown, best, r.err);
    cJSON_Delete(j);
    result_free(&js);
    result_free(&r);

    // a stop string: the text ends before it; tokens and logprobs are the
    // tokens as generated, the one that carried it too, in --json and
    // --per-token alike, as --help says
    r = RUN("-m", demo, "-q", "-p", "Hello", "-n", "20", "-s", "3", "--stop", ",", "--logprobs", "0", "--json");
    Result pt = RUN("-m", demo, "-q", "-p", "Hello", "-n", "20", "-s", "3", "--stop", ",", "--per-token");
    j = parse_json_output(&r);
    cJSON *tokens = j ? cJSON_GetObjectItem(j, "tokens") : NULL;
    int n_tokens = cJSON_GetArraySize(tokens), lines = 0;
    for (const char *c = pt.out; *c; c++) lines += *c == '\n';
    char ids[512] = "";
    for (int i = 0; i < n_tokens; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%d ", cJSON_GetArrayItem(tokens, i)->valueint);
    Result dt = RUN_IN(ids, "-m", demo, "-q", "--detokenize");
    const char *text = j ? cJSON_GetStringValue(cJSON_GetObjectItem(j, "text")) : NULL;
    CHECK(j && text && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "stop_reason")), "stop") &&
              !strncmp(dt.out, text, strlen(text)) && strchr(dt.out + strlen(text), ',') &&
              cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "logprobs"), "token_ids")) == n_tokens &&
              lines == n_tokens,
          "--stop ',': text '%s', tokens' text '%s', %d tokens, %d --per-token lines", text ? text : "", dt.out,
          n_tokens, lines);
    cJSON_Delete(j);
    result_free(&dt);
    result_free(&pt);
    result_free(&r);
    r = RUN("--help");
    CHECK(strstr(r.out, "but tokens and logprobs keep the token\n                          that carried it"),
          "--help does not say what --stop does to tokens and logprobs");
    // --completions needs --json, as the help says; --choice repeats
    CHECK(strstr(r.out, "--completions N     N continuations of the prompt, with --json (needed)"),
          "--help does not say --completions needs --json");
    CHECK(strstr(r.out, "gpt --choice TEXT [--choice TEXT]... [options]") && !strstr(r.out, "--choice TEXT..."),
          "--help's usage line of --choice reads as one option of several values");
    result_free(&r);
    // the seed at the top level of every answer that samples: a single run,
    // --completions (the first; completion i's is seed + i), a --batch line
    const char *seeded[][12] = {{"-p", "Hi", "-n", "2", "-s", "77", "--json"},
                                {"-p", "Hi", "-n", "2", "-s", "77", "--json", "--completions", "2"},
                                {"--batch", "-n", "2", "-s", "77", "--completions", "2"},
                                {"--batch", "-n", "2", "-s", "77"}};
    for (int i = 0; i < 4; i++) {
        const char *args[20] = {"-m", demo, "-q"};
        int n = 3;
        for (int k = 0; seeded[i][k]; k++) args[n++] = seeded[i][k];
        args[n] = NULL;
        r = run_gpt(tmpdir, "Hi\n", 3, args);
        j = parse_json_output(&r);
        const cJSON *seed = j ? cJSON_GetObjectItem(j, "seed") : NULL;
        CHECK(r.rc == 0 && seed && cJSON_GetNumberValue(seed) == 77, "%s %s: no top-level seed 77: %s", seeded[i][0],
              seeded[i][7] ? seeded[i][7] : "", r.out);
        cJSON_Delete(j);
        result_free(&r);
    }

    // gpt tune: the variants measured and saved, and a run then reads them
    char cache[512];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    const char *xdg = getenv("XDG_CACHE_HOME");
    char saved_xdg[512];
    snprintf(saved_xdg, sizeof saved_xdg, "%s", xdg ? xdg : "");
    setenv("XDG_CACHE_HOME", cache, 1);
    r = RUN("tune", "-m", ckpt("tiny"), "-t", "1");
    char want[600];
    snprintf(want, sizeof want, "tuning:     measured in ");
    CHECK(r.rc == 0 && strstr(r.out, want) && strstr(r.out, ", saved to ") && strstr(r.out, cache) &&
              strstr(r.out, "  qkv "),
          "gpt tune: rc %d, '%s', '%s'", r.rc, r.out, r.err);
    result_free(&r);
    r = RUN("-m", ckpt("tiny"), "-t", "1", "--tune", "on", "-p", "x", "-n", "1", "--stats");
    CHECK(r.rc == 0 && strstr(r.err, "tuning:     from wisdom ") && strstr(r.err, cache),
          "a run after gpt tune: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    // a choice it cannot save (the cache directory is a file: as root too)
    // is gpt tune's failure, said on stderr: it was a word on stdout, exit 0
    char unwritable[600];
    snprintf(unwritable, sizeof unwritable, "%s/cache-file", tmpdir);
    FILE *cf = fopen(unwritable, "w");
    if (cf) fclose(cf);
    setenv("XDG_CACHE_HOME", unwritable, 1);
    r = RUN("tune", "-m", ckpt("tiny"), "-t", "1");
    CHECK(r.rc == 1 && one_line(r.err) && !strncmp(r.err, "gpt tune: wisdom not saved: ", 28) &&
              strstr(r.err, unwritable) && strstr(r.out, "tuning:     measured in ") && !strstr(r.out, ", saved to "),
          "gpt tune into a cache it cannot write: rc %d, stdout '%s', stderr '%s'", r.rc, r.out, r.err);
    result_free(&r);
    setenv("XDG_CACHE_HOME", cache, 1);
    r = RUN("tune", "-m", ckpt("tiny"), "--tune", "off");
    CHECK(r.rc == 2 && one_line(r.err) && strstr(r.err, "gpt tune: unknown option '--tune'"), "gpt tune --tune: rc %d, '%s'",
          r.rc, r.err);
    result_free(&r);
    if (xdg) setenv("XDG_CACHE_HOME", saved_xdg, 1);
    else unsetenv("XDG_CACHE_HOME");

    // gpt inspect: one convention for shapes, Hugging Face's ([in, out] for
    // a Conv1D matrix: c_attn is C = 128 in, 3C = 384 out in the demo
    // model), the storage a tag beside it
    r = RUN("inspect", demo);
    CHECK(r.rc == 0 && strstr(r.out, "shapes:      Hugging Face's, a Conv1D matrix [in, out]") &&
              strstr(r.out, "h.0.attn.c_attn.weight       F16   [128, 384] rows out ") &&
              strstr(r.out, "wte.weight                   F16   [50257, 128] ") && !strstr(r.out, "(out,in)"),
          "gpt inspect's shapes: %s", r.out);
    result_free(&r);

    // gpt serve -h lists the page at /
    r = RUN("serve", "-h");
    CHECK(r.rc == 0 && strstr(r.out, "GET / (a page to try the model)"), "gpt serve -h lacks GET /: %s", r.out);
    result_free(&r);
}

int main(void) {
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "cli") != 0) return 1;
    char *text = NULL;
    size_t len;
    GptError err = {{0}};
    CHECK(file_read_all("tests/fixtures/public_refs.json", &text, &len, &err) == 0, "%s", err.msg);
    cJSON *refs = text ? cJSON_Parse(text) : NULL;
    test_usage();
    test_model_errors();
    test_default_model_errors();
    test_promises();
    if (refs) {
        test_tokenize_cli(refs);
        test_final_newline();
        test_greedy_reference(refs, "tiny", 10);
        test_greedy_reference(refs, "gpt2-124M-shaped", 2);
        test_score(refs);
    }
    test_generation();
    test_terminal();
    test_progress();
    test_context_limits();
    test_stats();
    test_kv_f16();
    test_completions();
    test_stats_json();
    cJSON_Delete(refs);
    free(text);
    scratch_dir_remove(tmpdir);
    return check_exit("test_cli");
}

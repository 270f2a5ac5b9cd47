/*
 * test_penalties.c - OpenAI's logit_bias, presence_penalty and
 * frequency_penalty end to end: `gpt --logit-bias ID=B --presence-penalty X
 * --frequency-penalty Y` and a `gpt --batch --jsonl` line with the fields
 * "logit_bias", "presence_penalty" and "frequency_penalty" give the same
 * tokens bit for bit, greedy and seeded, whatever else is in the batch
 * (and the options as a batch's defaults give what the fields give); -100
 * keeps a token out and +100 forces it; the penalties change what a greedy
 * run repeats; every bad value is refused with its message (a usage error,
 * exit 2, naming the flag; a line's error naming the field).
 * The arithmetic itself is test_sampler's (against its formula, bit for bit).
 *
 * Runs $GPT (default build/gpt) on the tiny checkpoint in $CKPT_DIR, whose
 * greedy continuation of "Hello" repeats one token: what the penalties act on.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "paths.h"
#include "run_gpt.h"

static char tmpdir[256];

#define RUN(...) run_gpt(tmpdir, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_IN(text, ...) run_gpt(tmpdir, text, strlen(text), (const char *const[]){__VA_ARGS__, NULL})

// The "tokens" of a --json result (or of one --batch line) as JSON text,
// malloc'd; NULL if it has none.
static char *tokens_of(const char *json) {
    cJSON *j = cJSON_Parse(json);
    const cJSON *t = cJSON_GetObjectItem(j, "tokens");
    char *s = t ? cJSON_PrintUnformatted(t) : NULL;
    cJSON_Delete(j);
    return s;
}

// The tokens of `gpt -m MODEL -p PROMPT -n N --json` with the extra args.
static char *alone(const char *model, const char *prompt, const char *n, const char *const *extra) {
    const char *argv[40] = {"-m", model, "-p", prompt, "-n", n, "--json", "-q"};
    int k = 8;
    for (; extra && *extra && k < 38; extra++) argv[k++] = *extra;
    argv[k] = NULL;
    Result r = run_gpt(tmpdir, NULL, 0, argv);
    CHECK(r.rc == 0, "gpt alone: rc %d: %s", r.rc, r.err);
    char *t = r.rc == 0 ? tokens_of(r.out) : NULL;
    result_free(&r);
    return t;
}

// The first token of a token list's JSON text.
static long first_token(const char *tokens) { return tokens && tokens[0] == '[' ? atol(tokens + 1) : -1; }

// Each case: the command's options, and the same as a --jsonl line's fields.
typedef struct {
    const char *flags[12];
    const char *fields;
} Case;

static void test_line_equals_command(const char *tiny) {
    char *plain = alone(tiny, "Hello", "8", (const char *const[]){"--temp", "0", NULL});
    long repeated = first_token(plain);
    CHECK(repeated >= 0, "the plain greedy run: %s", plain ? plain : "?");
    char ban[64], force[64], ban_json[96];
    snprintf(ban, sizeof ban, "%ld=-100", repeated);
    snprintf(force, sizeof force, "%d=100", 262);  // " the"
    snprintf(ban_json, sizeof ban_json, "\"temperature\": 0, \"logit_bias\": {\"%ld\": -100, \"11\": 2.5}", repeated);
    char ban_b[64];
    snprintf(ban_b, sizeof ban_b, "11=2.5");
    const Case cases[] = {
        {{"--temp", "0", "--logit-bias", ban, "--logit-bias", ban_b}, ban_json},
        {{"--temp", "0", "--frequency-penalty", "0.8", "--presence-penalty", "0.3"},
         "\"temperature\": 0, \"frequency_penalty\": 0.8, \"presence_penalty\": 0.3"},
        {{"--temp", "0", "--frequency-penalty", "-0.5", "--presence-penalty", "2", "--repeat-penalty", "1.3"},
         "\"temperature\": 0, \"frequency_penalty\": -0.5, \"presence_penalty\": 2, \"repeat_penalty\": 1.3"},
        {{"--temp", "0.9", "-s", "7", "--logit-bias", ban, "--presence-penalty", "1.5"},
         "\"temperature\": 0.9, \"seed\": 7, \"presence_penalty\": 1.5, \"logit_bias\": {\"15496\": -100}"},
        {{"--temp", "1.2", "-s", "99", "--top-p", "0.9", "--frequency-penalty", "1.1", "--logit-bias", "13=7"},
         "\"temperature\": 1.2, \"seed\": 99, \"top_p\": 0.9, \"frequency_penalty\": 1.1, \"logit_bias\": {\"13\": 7}"},
        {{"--temp", "1", "-s", "3", "--logit-bias", force}, "\"temperature\": 1, \"seed\": 3, \"logit_bias\": {\"262\": 100}"},
        {{"--temp", "0", "--logit-bias", force}, "\"temperature\": 0, \"logit_bias\": {\"262\": 100}"},
    };
    enum { N = sizeof cases / sizeof *cases };
    // case 3's line names token 15496 ("Hello"): the repeated token of this
    // checkpoint, which the command's ban names by the number found above
    CHECK(repeated == 15496, "the tiny checkpoint's greedy continuation of \"Hello\" repeats %ld, not 15496", repeated);
    char *want[N];
    for (int i = 0; i < N; i++) want[i] = alone(tiny, "Hello", "8", cases[i].flags);
    // the fields had an effect: a ban, the penalties, a force
    CHECK(want[0] && !strstr(want[0], "15496"), "banned 15496, still drawn: %s", want[0] ? want[0] : "?");
    CHECK(want[1] && plain && strcmp(want[1], plain), "the penalties changed nothing: %s", plain ? plain : "?");
    CHECK(want[6] && !strcmp(want[6], "[262,262,262,262,262,262,262,262]"), "+100 greedy: %s", want[6] ? want[6] : "?");
    CHECK(want[5] && !strcmp(want[5], "[262,262,262,262,262,262,262,262]"), "+100 sampled: %s", want[5] ? want[5] : "?");
    // the cases as lines, between lines without the fields, at --parallel 1 and 4
    char input[8192];
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(input + len, sizeof input - len,
                                "{\"prompt\": \"Other %d\", \"max_tokens\": 5, \"temperature\": 1, \"seed\": %d}\n"
                                "{\"prompt\": \"Hello\", \"max_tokens\": 8, %s}\n",
                                i, i, cases[i].fields);
    const char *pars[] = {"1", "4"};
    for (int w = 0; w < 2; w++) {
        Result r = RUN_IN(input, "-m", tiny, "--batch", "--jsonl", "--parallel", pars[w], "-q");
        CHECK(r.rc == 0, "--batch --parallel %s: rc %d %s", pars[w], r.rc, r.err);
        char *lines[2 * N + 2];
        size_t n = split_lines(r.out, lines, 2 * N + 2);
        CHECK(n == 2 * N, "--batch: %zu lines for %d", n, 2 * N);
        for (size_t i = 1; i < n; i += 2) {
            char *got = tokens_of(lines[i]);
            const char *w2 = want[i / 2];
            CHECK(got && w2 && !strcmp(got, w2), "--parallel %s, case %zu (%s): the line gives %s, the command %s",
                  pars[w], i / 2, cases[i / 2].fields, got ? got : lines[i], w2 ? w2 : "?");
            free(got);
        }
        result_free(&r);
    }
    // the options as the defaults of plain lines give the same
    for (int i = 0; i < N; i++) {
        const char *argv[40] = {"-m", tiny, "--batch", "-n", "8", "-q"};
        int k = 6;
        for (const char *const *f = cases[i].flags; *f; f++) argv[k++] = *f;
        argv[k] = NULL;
        Result r = run_gpt(tmpdir, "Hello\n", 6, argv);
        char *got = r.rc == 0 ? tokens_of(r.out) : NULL;
        CHECK(got && want[i] && !strcmp(got, want[i]), "case %d as --batch options: %s, the command %s (rc %d %s)", i,
              got ? got : "?", want[i] ? want[i] : "?", r.rc, r.err);
        free(got);
        result_free(&r);
    }
    // a line's logit_bias replaces the options' whole; {} is no bias
    Result r = RUN_IN("{\"prompt\": \"Hello\", \"logit_bias\": {}}\n{\"prompt\": \"Hello\", \"logit_bias\": null}\n", "-m",
                      tiny, "--batch", "--jsonl", "-n", "8", "--temp", "0", "--logit-bias", force, "-q");
    char *lines[4];
    size_t n = split_lines(r.out, lines, 4);
    for (size_t i = 0; i < n; i++) {
        char *got = tokens_of(lines[i]);
        CHECK(got && plain && !strcmp(got, plain), "line %zu: an empty logit_bias gives %s, the plain run %s", i,
              got ? got : lines[i], plain ? plain : "?");
        free(got);
    }
    CHECK(r.rc == 0 && n == 2, "{} and null: rc %d, %zu lines: %s", r.rc, n, r.err);
    result_free(&r);
    for (int i = 0; i < N; i++) free(want[i]);
    free(plain);
}

// Speculative decoding with the fields gives the plain run's tokens (the
// draft's own guesses may differ: they are only checked), and the
// log-probabilities stay those of the raw logits.
static void test_speculation_and_logprobs(const char *tiny) {
    const char *const flags[] = {"--temp", "0.8", "-s", "5", "--frequency-penalty", "0.4", "--presence-penalty", "0.6",
                                 "--logit-bias", "11=3", "--repeat-penalty", "1.1", NULL};
    char *plain = alone(tiny, "Hello Hello world", "30", flags);
    const char *const drafts[][3] = {{"--lookup", "2", NULL}, {"--draft-dtype", "q8", NULL}};
    for (int d = 0; d < 2; d++) {
        const char *argv[20];
        int k = 0;
        for (const char *const *f = flags; *f; f++) argv[k++] = *f;
        argv[k++] = drafts[d][0];
        argv[k++] = drafts[d][1];
        argv[k] = NULL;
        char *got = alone(tiny, "Hello Hello world", "30", argv);
        CHECK(got && plain && !strcmp(got, plain), "%s %s: %s, without it %s", drafts[d][0], drafts[d][1],
              got ? got : "?", plain ? plain : "?");
        free(got);
    }
    free(plain);
    // the first token's top log-probabilities are the same with and without
    // a bias that changes the pick, and the pick's is its raw one among them
    Result a = RUN("-m", tiny, "-p", "Hello", "-n", "1", "--temp", "0", "--logprobs", "5", "--json", "-q");
    Result b = RUN("-m", tiny, "-p", "Hello", "-n", "1", "--temp", "0", "--logprobs", "5", "--json", "-q",
                   "--logit-bias", "15496=-100", "--presence-penalty", "1");
    cJSON *ja = cJSON_Parse(a.out), *jb = cJSON_Parse(b.out);
    const cJSON *la = cJSON_GetObjectItem(ja, "logprobs"), *lb = cJSON_GetObjectItem(jb, "logprobs");
    char *ta = cJSON_PrintUnformatted(cJSON_GetObjectItem(la, "top_logprobs"));
    char *tb = cJSON_PrintUnformatted(cJSON_GetObjectItem(lb, "top_logprobs"));
    CHECK(ta && tb && !strcmp(ta, tb), "top_logprobs with a bias %s, without %s", tb ? tb : "?", ta ? ta : "?");
    long picked = (long)cJSON_GetArrayItem(cJSON_GetObjectItem(jb, "tokens"), 0)->valuedouble;
    double lp = cJSON_GetArrayItem(cJSON_GetObjectItem(lb, "token_logprobs"), 0)->valuedouble, raw = 1;
    const cJSON *ids = cJSON_GetArrayItem(cJSON_GetObjectItem(la, "top_ids"), 0);
    for (int i = 0; i < cJSON_GetArraySize(ids); i++)
        if ((long)cJSON_GetArrayItem(ids, i)->valuedouble == picked)
            raw = cJSON_GetArrayItem(cJSON_GetArrayItem(cJSON_GetObjectItem(la, "top_logprobs"), 0), i)->valuedouble;
    CHECK(picked != 15496 && lp == raw, "the biased pick %ld: logprob %.17g, its raw one %.17g", picked, lp, raw);
    free(ta);
    free(tb);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    result_free(&a);
    result_free(&b);
}

// Bad flags: exit 2, one line naming the flag as typed.
static void test_bad_flags(const char *tiny) {
    const struct {
        const char *flag, *value, *want;
    } bad[] = {
        {"--logit-bias", "5", "gpt: --logit-bias 5: must be ID=BIAS (a token id, then a number in [-100, 100])"},
        {"--logit-bias", "=5", "gpt: --logit-bias =5: must be ID=BIAS"},
        {"--logit-bias", "x=1", "gpt: --logit-bias x=1: the token id must be an integer in [0, 2147483647)"},
        {"--logit-bias", "-1=1", "gpt: --logit-bias -1=1: the token id must be an integer in [0, 2147483647)"},
        {"--logit-bias", "5=100.5", "gpt: --logit-bias 5=100.5: the bias must be a number in [-100, 100]"},
        {"--logit-bias", "5=nan", "gpt: --logit-bias 5=nan: the bias must be a number in [-100, 100]"},
        {"--logit-bias", "5=", "gpt: --logit-bias 5=: the bias must be a number in [-100, 100]"},
        {"--presence-penalty", "2.5", "gpt: --presence-penalty 2.5: must be a number in [-2, 2]"},
        {"--presence-penalty", "x", "gpt: --presence-penalty x: must be a number in [-2, 2]"},
        {"--frequency-penalty", "-3", "gpt: --frequency-penalty -3: must be a number in [-2, 2]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        Result r = RUN("-m", tiny, "-p", "x", bad[i].flag, bad[i].value);
        CHECK(r.rc == 2 && !strncmp(r.err, bad[i].want, strlen(bad[i].want)), "%s %s: rc %d, \"%s\", want \"%s\"",
              bad[i].flag, bad[i].value, r.rc, r.err, bad[i].want);
        result_free(&r);
    }
    Result r = RUN("-m", tiny, "-p", "x", "--logit-bias", "5=1", "--logit-bias", "5=2");
    CHECK(r.rc == 2 && strstr(r.err, "--logit-bias: token 5 is given twice"), "twice: rc %d %s", r.rc, r.err);
    result_free(&r);
    // 301 tokens: refused at the 301st (more words than run_gpt takes: a shell)
    static char cmd[16384];
    size_t len = (size_t)snprintf(cmd, sizeof cmd, "%s -m %s -p x", gpt_binary(), tiny);
    for (int i = 0; i < 301; i++) len += (size_t)snprintf(cmd + len, sizeof cmd - len, " --logit-bias %d=1", i);
    snprintf(cmd + len, sizeof cmd - len, " >/dev/null 2>%s/err301", tmpdir);
    int status = system(cmd);
    char *err = NULL;
    size_t err_len = 0;
    file_read_all(path_in(tmpdir, "err301"), &err, &err_len, NULL);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2 && err && strstr(err, "--logit-bias: at most 300 tokens"),
          "301 biases: status %d %s", status, err ? err : "");
    free(err);
    // the vocabulary is the model's: known once it is loaded (a runtime error)
    r = RUN("-m", tiny, "-p", "x", "-n", "1", "--logit-bias", "50257=1");
    CHECK(r.rc == 1 && strstr(r.err, "logit_bias: token id 50257: must be below the vocabulary size 50257"),
          "a bias past the vocabulary: rc %d %s", r.rc, r.err);
    result_free(&r);
    // a mode without sampling refuses them
    r = RUN("-m", tiny, "-p", "x", "--score", "--presence-penalty", "1");
    CHECK(r.rc == 2 && strstr(r.err, "--presence-penalty does not apply to --score"), "--score: rc %d %s", r.rc,
          r.err);
    result_free(&r);
}

// Bad fields: the line's error, naming the field; the other lines run.
static void test_bad_fields(const char *tiny) {
    static char many[8192];
    size_t len = (size_t)snprintf(many, sizeof many, "{\"prompt\": \"x\", \"logit_bias\": {");
    for (int i = 0; i < 301; i++) len += (size_t)snprintf(many + len, sizeof many - len, "%s\"%d\": 1", i ? "," : "", i);
    snprintf(many + len, sizeof many - len, "}}\n");
    const struct {
        const char *line, *want;
    } bad[] = {
        {"{\"prompt\": \"x\", \"logit_bias\": [1]}", "logit_bias must be an object {\"token id\": bias}"},
        {"{\"prompt\": \"x\", \"logit_bias\": \"5\"}", "logit_bias must be an object {\"token id\": bias}"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"abc\": 1}}",
         "logit_bias: key \"abc\" is not a token id (a decimal integer in [0, "},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"-1\": 1}}", "logit_bias: key \"-1\" is not a token id"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"\": 1}}", "logit_bias: key \"\" is not a token id"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"1.5\": 1}}", "logit_bias: key \"1.5\" is not a token id"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"12345678901\": 1}}", "logit_bias: key \"12345678901\" is not a token id"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"5\": 101}}", "logit_bias: token 5: the bias must be a number in [-100, 100]"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"5\": \"1\"}}", "logit_bias: token 5: the bias must be a number in [-100, 100]"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"5\": 1, \"05\": 2}}", "logit_bias: token 5 is given twice"},
        {"{\"prompt\": \"x\", \"logit_bias\": {\"50257\": 1}}",
         "logit_bias: key \"50257\" is not a token id (a decimal integer in [0, 50257))"},
        {many, "logit_bias: at most 300 tokens"},
        {"{\"prompt\": \"x\", \"presence_penalty\": 2.01}", "presence_penalty must be a number in [-2, 2]"},
        {"{\"prompt\": \"x\", \"presence_penalty\": \"1\"}", "presence_penalty must be a number in [-2, 2]"},
        {"{\"prompt\": \"x\", \"frequency_penalty\": -2.5}", "frequency_penalty must be a number in [-2, 2]"},
        {"{\"prompt\": \"x\", \"frequency_penalty\": true}", "frequency_penalty must be a number in [-2, 2]"},
    };
    enum { N = sizeof bad / sizeof *bad };
    char *input = malloc(16384);
    size_t n_in = 0;
    for (int i = 0; i < N; i++) {
        n_in += (size_t)snprintf(input + n_in, 16384 - n_in, "%s", bad[i].line);
        if (input[n_in - 1] != '\n') input[n_in++] = '\n';
        n_in += (size_t)snprintf(input + n_in, 16384 - n_in,
                                 "{\"prompt\": \"ok\", \"max_tokens\": 1, \"presence_penalty\": -2, "
                                 "\"frequency_penalty\": 2, \"logit_bias\": {\"0\": 100, \"50256\": -100}}\n");
    }
    Result r = RUN_IN(input, "-m", tiny, "--batch", "--jsonl", "--temp", "0", "-q");
    char *lines[2 * N + 2];
    size_t n = split_lines(r.out, lines, 2 * N + 2);
    CHECK(r.rc == 1 && n == 2 * N, "bad lines: rc %d (want 1), %zu lines for %d: %s", r.rc, n, 2 * N, r.err);
    for (size_t i = 0; i < n; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        const cJSON *e = cJSON_GetObjectItem(j, "error");
        if (i % 2 == 0)
            CHECK(cJSON_IsString(e) && !strncmp(e->valuestring, bad[i / 2].want, strlen(bad[i / 2].want)),
                  "line %zu: %.300s, want the error \"%s\"", i, lines[i], bad[i / 2].want);
        else CHECK(!e && strstr(lines[i], "\"tokens\":[0]"), "line %zu, a good one: %.300s", i, lines[i]);
        cJSON_Delete(j);
    }
    result_free(&r);
    free(input);
}

int main(void) {
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "penalties") != 0) return 1;
    const char *tiny = ckpt("tiny");
    test_line_equals_command(tiny);
    test_speculation_and_logprobs(tiny);
    test_bad_flags(tiny);
    test_bad_fields(tiny);
    scratch_dir_remove(tmpdir);
    return check_exit("test_penalties");
}

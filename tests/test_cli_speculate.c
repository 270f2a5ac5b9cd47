/*
 * test_cli_speculate.c - speculative decoding through the gpt command:
 * --draft, --draft-dtype, --draft-tokens and --lookup give the text and the
 * --json tokens of the plain run, byte for byte; --stats and --json report
 * the guesses; the options are refused where they cannot work, with the
 * flag named, and a draft that speaks another vocabulary or tokenizer is
 * refused before anything runs.
 *
 * Runs $GPT (default build/gpt) on models/demo.bin and the checkpoints in
 * $CKPT_DIR.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "base/fileio.h"
#include "paths.h"
#include "run_gpt.h"

static char tmpdir[256];

#define RUN(...) run_gpt(tmpdir, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})

#define DEMO "models/demo.bin"
#define LONG_PROMPT                                                                                                  \
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "       \
    "darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God "   \
    "said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the " \
    "light from the darkness. And God called the light Day, and the darkness he called Night. And the evening "    \
    "and the morning were the first day."

static cJSON *json_of(const Result *r) { return r->rc == 0 ? cJSON_Parse(r->out) : NULL; }

// What must not change: stdout, or with --json its tokens, text and
// stop_reason (the stats hold timings and the speculation report).
static int same_output(const Result *a, const Result *b) {
    if (a->out_len == 0 || a->out[0] != '{') return a->out_len == b->out_len && !memcmp(a->out, b->out, a->out_len);
    cJSON *x = cJSON_Parse(a->out), *y = cJSON_Parse(b->out);
    int same = x && y;
    for (const char *const *k = (const char *const[]){"tokens", "text", "stop_reason", "prompt_ids", "prompt_tokens", NULL};
         same && *k; k++) {
        char *u = cJSON_PrintUnformatted(cJSON_GetObjectItem(x, *k)), *v = cJSON_PrintUnformatted(cJSON_GetObjectItem(y, *k));
        same = u && v && !strcmp(u, v);
        free(u);
        free(v);
    }
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

static void test_same_output(void) {
    const char *p = "And it came to pass";
    struct {
        const char *what;
        const char *setting[20];
    } settings[] = {
        {"greedy", {"-m", DEMO, "-p", p, "-n", "50", "--temp", "0"}},
        {"seed 1", {"-m", DEMO, "-p", p, "-n", "50", "-s", "1"}},
        {"seed 2, top-k 40, 2 threads", {"-m", DEMO, "-p", p, "-n", "50", "-s", "2", "--top-k", "40", "-t", "2"}},
        {"top-p, min-p, penalty", {"-m", DEMO, "-p", p, "-n", "50", "-s", "3", "--top-p", "0.9", "--min-p", "0.02",
                                   "--repeat-penalty", "1.2"}},
        {"stop string", {"-m", DEMO, "-p", p, "-n", "80", "-s", "4", "--stop", " the"}},
        {"f16 kv", {"-m", DEMO, "-p", p, "-n", "50", "-s", "5", "--kv-type", "f16"}},
        {"--json", {"-m", DEMO, "-p", p, "-n", "30", "-s", "6", "--json"}},
        {"--echo", {"-m", DEMO, "-p", p, "-n", "30", "-s", "7", "--echo"}},
        {"--dtype q8", {"-m", DEMO, "-p", p, "-n", "30", "-s", "8", "--dtype", "q8"}},
        // a prompt long enough to prefill through OpenBLAS (not bitwise
        // ours, but the same for both runs: the verify steps stay ours)
        {"--blas, a 103-token prompt", {"-m", DEMO, "-p", LONG_PROMPT, "-n", "40", "-s", "9", "--blas", "--dtype", "f32"}},
    };
    struct {
        const char *what;
        const char *args[5];
    } drafts[] = {
        {"--draft-dtype q8", {"--draft-dtype", "q8"}},
        {"q8 with 7 guesses", {"--draft-dtype", "q8", "--draft-tokens", "7"}},
        {"the tiny checkpoint", {"--draft", ckpt("tiny"), "--draft-tokens", "2"}},
        {"--lookup 2", {"--lookup", "2"}},
        {"--draft itself", {"--draft", DEMO}},
    };
    size_t n_drafts = sizeof drafts / sizeof *drafts;
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        const char *argv[40];
        int n = 0;
        for (int a = 0; settings[i].setting[a]; a++) argv[n++] = settings[i].setting[a];
        argv[n] = NULL;
        Result plain = run_gpt(tmpdir, NULL, 0, argv);
        CHECK(plain.rc == 0 && plain.out_len > 0, "%s: plain rc %d %s", settings[i].what, plain.rc, plain.err);
        // three drafts a setting, in turn: each draft meets five of the settings
        for (size_t t = 0; t < 3; t++) {
            size_t d = (i + t * 2) % n_drafts;
            int m = n;
            for (int a = 0; drafts[d].args[a]; a++) argv[m++] = drafts[d].args[a];
            argv[m] = NULL;
            Result spec = run_gpt(tmpdir, NULL, 0, argv);
            CHECK(spec.rc == 0 && same_output(&plain, &spec), "%s, %s: plain '%s', speculative rc %d '%s' %s",
                  settings[i].what, drafts[d].what, plain.out, spec.rc, spec.out, spec.err);
            result_free(&spec);
        }
        result_free(&plain);
    }
}

// --json's stats.speculation and --stats's lines.
static void test_report(void) {
    Result r = RUN("-m", DEMO, "-p", "And it came to pass", "-n", "41", "--temp", "0", "--draft", DEMO,
                   "--json", "--stats");
    cJSON *j = json_of(&r);
    cJSON *stats = j ? cJSON_GetObjectItem(j, "stats") : NULL;
    cJSON *sp = stats ? cJSON_GetObjectItem(stats, "speculation") : NULL;
    CHECK(sp != NULL, "--json has no stats.speculation: rc %d %s", r.rc, r.err);
    if (sp) {
        double proposed = cJSON_GetObjectItem(sp, "proposed")->valuedouble;
        double accepted = cJSON_GetObjectItem(sp, "accepted")->valuedouble;
        double forwards = cJSON_GetObjectItem(sp, "decode_forwards")->valuedouble;
        double per = cJSON_GetObjectItem(sp, "tokens_per_forward")->valuedouble;
        double decoded = cJSON_GetObjectItem(stats, "decode_tokens")->valuedouble;
        // the model drafting for itself: every guess taken; 40 decoded
        // tokens in steps of 4 guesses + 1
        CHECK(proposed == accepted && proposed == 32 && forwards == 8 && decoded == 40 && per == 5,
              "itself: %g of %g accepted, %g forwards, %g decoded, %g per forward", accepted, proposed, forwards,
              decoded, per);
        CHECK(cJSON_GetObjectItem(sp, "acceptance")->valuedouble == 1.0, "acceptance");
        CHECK(!strcmp(cJSON_GetObjectItem(sp, "draft")->valuestring, "model") &&
                  !strcmp(cJSON_GetObjectItem(sp, "draft_model")->valuestring, DEMO) &&
                  cJSON_GetObjectItem(sp, "draft_tokens")->valuedouble == 4,
              "draft, draft_model, draft_tokens");
        double share = cJSON_GetObjectItem(sp, "draft_share")->valuedouble;
        CHECK(share > 0 && share < 1, "draft_share %g", share);
    }
    CHECK(strstr(r.err, "speculate:  32 of 32 guesses accepted (100.0%), 5.00 tokens per model step (8 steps)") &&
              strstr(r.err, "draft:      " DEMO " (matrices F16), up to 4 guesses a step"),
          "--stats: %s", r.err);
    cJSON_Delete(j);
    result_free(&r);
    // The default guesses: 6 for a draft of at most a third of the model's
    // bytes per token (f32 drafted by its q8), else 4 (f16 by q8); --draft-tokens wins.
    struct {
        const char *dtype, *k, *want;
    } guesses[] = {{"f32", NULL, "up to 6 guesses"}, {"f16", NULL, "up to 4 guesses"}, {"f32", "3", "up to 3 guesses"}};
    for (size_t i = 0; i < 3; i++) {
        Result g = guesses[i].k ? RUN("-m", ckpt("tiny"), "--dtype", guesses[i].dtype, "-p", "Hi", "-n", "5",
                                      "--draft-dtype", "q8", "--draft-tokens", guesses[i].k, "--stats")
                                : RUN("-m", ckpt("tiny"), "--dtype", guesses[i].dtype, "-p", "Hi", "-n", "5",
                                      "--draft-dtype", "q8", "--stats");
        CHECK(g.rc == 0 && strstr(g.err, guesses[i].want), "%s model, q8 draft: want '%s': %s", guesses[i].dtype,
              guesses[i].want, g.err);
        result_free(&g);
    }
    // Without a draft, no speculation in the report.
    r = RUN("-m", DEMO, "-p", "And", "-n", "3", "--json", "--stats");
    j = json_of(&r);
    stats = j ? cJSON_GetObjectItem(j, "stats") : NULL;
    CHECK(stats && !cJSON_GetObjectItem(stats, "speculation") && !strstr(r.err, "speculate:"),
          "a plain run reports speculation");
    cJSON_Delete(j);
    result_free(&r);
    // Prompt lookup on a text that repeats: guesses accepted, fewer model steps.
    const char *p = "one two three four five six seven eight nine ten. one two three four five six seven eight";
    r = RUN("-m", DEMO, "-p", p, "-n", "20", "--temp", "0", "--lookup", "3", "--json");
    j = json_of(&r);
    stats = j ? cJSON_GetObjectItem(j, "stats") : NULL;
    sp = stats ? cJSON_GetObjectItem(stats, "speculation") : NULL;
    CHECK(sp && !strcmp(cJSON_GetObjectItem(sp, "draft")->valuestring, "lookup") &&
              cJSON_GetObjectItem(sp, "lookup_n")->valuedouble == 3,
          "--lookup 3: %s", r.err);
    cJSON_Delete(j);
    result_free(&r);
}

static void test_refusals(void) {
    // a model with another vocabulary, and tiny's weights with a tokenizer
    // whose two first tokens are swapped
    char vocab1000[512], swapped[512], cmd[8192];
    snprintf(vocab1000, sizeof vocab1000, "%s/vocab1000", tmpdir);
    snprintf(swapped, sizeof swapped, "%s/swapped", tmpdir);
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(cmd, sizeof cmd,
             "%s/tests/gen_checkpoint %s --layers 1 --embd 32 --heads 2 --ctx 64 --vocab 1000 --no-tokenizer >/dev/null"
             " && mkdir -p %s && cp %s/config.json %s/model.safetensors %s/merges.txt %s/"
             " && sed 's/\"!\": 0, \"\\\\\"\": 1/\"!\": 1, \"\\\\\"\": 0/' %s/vocab.json > %s/vocab.json"
             " && ! cmp -s %s/vocab.json %s/vocab.json",
             build, vocab1000, swapped, ckpt("tiny"), ckpt("tiny"), ckpt("tiny"), swapped, ckpt("tiny"), swapped,
             ckpt("tiny"), swapped);
    CHECK(system(cmd) == 0, "could not make the test drafts: %s", cmd);
    struct {
        const char *args[12];
        int rc;
        const char *message;
    } bad[] = {
        {{"--batch", "--draft-dtype", "q8"}, 2, "--draft-dtype does not apply to --batch"},
        {{"--batch", "--lookup=2"}, 2, "--lookup does not apply to --batch"},
        {{"--score", "--draft", DEMO}, 2, "--draft does not apply to --score"},
        {{"--lookup", "2", "--draft-dtype", "q8"}, 2, "--lookup and --draft/--draft-dtype exclude each other"},
        {{"--draft-tokens", "3"}, 2, "--draft-tokens needs a draft"},
        {{"--draft-dtype", "q8", "--draft-tokens", "0"}, 2, "--draft-tokens 0: must be an integer in [1, 32]"},
        {{"--draft-dtype", "q8", "--draft-tokens", "33"}, 2, "--draft-tokens 33: must be an integer in [1, 32]"},
        {{"--lookup", "0"}, 2, "--lookup 0: must be an integer in [1, 16]"},
        {{"--draft-dtype", "q5"}, 2, "--draft-dtype q5: must be f32, f16, bf16, q8, q6, q4 or q4-pure"},
        {{"-m", DEMO, "-p", "x", "--draft", "/nonexistent/draft.bin"}, 1, "--draft: "},
        {{"-m", DEMO, "-p", "x", "--draft", vocab1000}, 1, "its vocabulary has 1000 tokens, the model's 50257"},
        {{"-m", DEMO, "-p", "x", "--draft", swapped}, 1, "its tokenizer differs from the model's (token 0)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        Result r = run_gpt(tmpdir, NULL, 0, bad[i].args);
        CHECK(r.rc == bad[i].rc && strstr(r.err, bad[i].message) && one_line(r.err) && r.out_len == 0,
              "%s ...: rc %d (want %d), stderr '%s' (want '%s')", bad[i].args[0], r.rc, bad[i].rc, r.err,
              bad[i].message);
        result_free(&r);
    }
}

int main(void) {
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "spec") != 0) return 1;
    test_refusals();
    test_report();
    test_same_output();
    scratch_dir_remove(tmpdir);
    return check_exit("test_cli_speculate");
}

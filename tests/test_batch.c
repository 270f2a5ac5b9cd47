/*
 * test_batch.c - `gpt --batch` end to end: every line's result is what the
 * same prompt gives run alone (`gpt -p PROMPT -s SEED` with the line's
 * options), token for token, whatever the --parallel, whether prompts share
 * a prefix or not, greedy and sampled, on the tiny (also in q4-pure: every
 * matrix Q4) and the 124M-shaped test checkpoints (the logits' bits in the
 * library: test_forward); and the mode's contract: input and output
 * lines one to one, in order (or not, with --unordered), bad lines answered
 * with an error in their place, stop strings, --text, the exit status, GNU
 * parallel.
 *
 * Runs $GPT (default build/gpt) on the checkpoints in $CKPT_DIR.
 */
#include <cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "base/fileio.h"
#include "paths.h"
#include "run_gpt.h"

static char tmpdir[256];

#define RUN_IN(text, ...) run_gpt(tmpdir, text, strlen(text), (const char *const[]){__VA_ARGS__, NULL})

// ---------------------------------------------------------------------------
// the prompts: 32 lines, a third of them sharing a long prefix, half greedy

enum { N_PROMPTS = 32 };

typedef struct {
    char prompt[512];
    float temp;
    int top_k;
    unsigned seed;
    int max_tokens;
} Prompt;

static const char *SHARED =
    "You are a careful assistant. Answer in one short sentence, without lists, and keep to the facts that "
    "the question gives. Here is the question:";

static void make_prompts(Prompt *p) {
    static const char *tails[] = {
        "What is the capital of France?", "Why is the sky blue?", "Name a prime number.",
        "What do bees make?",             "Who wrote Hamlet?",     "How many legs has a spider?",
        "What is ice?",                   "Where is Peru?",        "When does spring start?",
        "What is a byte?",                "Is the sun a star?",
    };
    for (int i = 0; i < N_PROMPTS; i++) {
        if (i % 3 == 0) snprintf(p[i].prompt, sizeof p[i].prompt, "%s %s", SHARED, tails[i / 3 % 11]);
        else snprintf(p[i].prompt, sizeof p[i].prompt, "Story %d: once upon a time, in a town of %d people,", i, 100 * i + 7);
        p[i].temp = i % 2 ? 0.0f : 0.9f;
        p[i].top_k = i % 4 == 0 ? 40 : 0;
        p[i].seed = 1000u + 17u * (unsigned)i;
        p[i].max_tokens = 4 + i % 5;
    }
}

static char *jsonl_of(const Prompt *p, int n) {
    size_t cap = 256 * (size_t)n + 4096, len = 0;
    char *s = malloc(cap);
    for (int i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "prompt", p[i].prompt);
        cJSON_AddNumberToObject(o, "id", 500 + i);
        cJSON_AddNumberToObject(o, "temperature", p[i].temp);
        if (p[i].top_k) cJSON_AddNumberToObject(o, "top_k", p[i].top_k);
        cJSON_AddNumberToObject(o, "seed", p[i].seed);
        cJSON_AddNumberToObject(o, "max_tokens", p[i].max_tokens);
        char *line = cJSON_PrintUnformatted(o);
        size_t l = strlen(line);
        if (len + l + 2 > cap) s = realloc(s, cap = 2 * (len + l + 2));
        memcpy(s + len, line, l);
        len += l;
        s[len++] = '\n';
        free(line);
        cJSON_Delete(o);
    }
    s[len] = '\0';
    return s;
}

// The --json tokens of `gpt -p PROMPT` with the prompt's options, alone.
static cJSON *alone(const char *model, const Prompt *p) {
    char temp[32], seed[32], n[32], k[32];
    snprintf(temp, sizeof temp, "%g", (double)p->temp);
    snprintf(seed, sizeof seed, "%u", p->seed);
    snprintf(n, sizeof n, "%d", p->max_tokens);
    snprintf(k, sizeof k, "%d", p->top_k);
    Result r = run_gpt(tmpdir, NULL, 0,
                       (const char *const[]){"-m", model, "-p", p->prompt, "--temp", temp, "--top-k", k, "-s", seed,
                                             "-n", n, "--json", NULL});
    cJSON *j = r.rc == 0 ? cJSON_Parse(r.out) : NULL;
    CHECK(j != NULL, "alone: rc %d %s", r.rc, r.err);
    result_free(&r);
    cJSON *t = j ? cJSON_DetachItemFromObject(j, "tokens") : NULL;
    cJSON_Delete(j);
    return t;
}

// Each prompt's tokens at --parallel 1, 4 and 16, with and without prefix
// sharing; under a sanitizer (check.h) with `some`, at 4 shared and 16
// unshared only (the same code; make test runs all six).
static void test_equals_alone(const char *name, const char *model, int some) {
    Prompt p[N_PROMPTS];
    make_prompts(p);
    cJSON *want[N_PROMPTS];
    for (int i = 0; i < N_PROMPTS; i++) want[i] = alone(model, &p[i]);
    char *input = jsonl_of(p, N_PROMPTS);
    const char *parallels[] = {"1", "4", "16"};
    for (int w = 0; w < 6; w++) {
        if (some && CHECK_SANITIZED && w != 1 && w != 5) continue;
        const char *par = parallels[w % 3];
        int share = w < 3;
        Result r = share ? RUN_IN(input, "-m", model, "--batch", "--jsonl", "--parallel", par, "--prefill-chunk", "24",
                                  "--stats-json")
                         : RUN_IN(input, "-m", model, "--batch", "--jsonl", "--parallel", par, "--prefill-chunk", "24",
                                  "--stats-json", "--no-prefix-sharing");
        CHECK(r.rc == 0, "%s --parallel %s: rc %d %s", name, par, r.rc, r.err);
        char *lines[N_PROMPTS + 2];
        size_t n = split_lines(r.out, lines, N_PROMPTS + 2);
        CHECK(n == N_PROMPTS, "%s --parallel %s: %zu output lines for %d input lines", name, par, n, N_PROMPTS);
        int same = 0;
        for (size_t i = 0; i < n && i < N_PROMPTS; i++) {
            cJSON *j = cJSON_Parse(lines[i]);
            const cJSON *idx = cJSON_GetObjectItem(j, "index"), *id = cJSON_GetObjectItem(j, "id");
            CHECK(idx && idx->valueint == (int)i && id && id->valueint == 500 + (int)i,
                  "%s --parallel %s: line %zu is out of order or lost its id: %.200s", name, par, i, lines[i]);
            const cJSON *tokens = cJSON_GetObjectItem(j, "tokens");
            char *a = tokens ? cJSON_PrintUnformatted(tokens) : NULL, *b = want[i] ? cJSON_PrintUnformatted(want[i]) : NULL;
            if (a && b && !strcmp(a, b)) same++;
            else CHECK(0, "%s --parallel %s%s: line %zu (%s): %s, alone %s", name, par, share ? "" : " unshared", i,
                       p[i].temp > 0 ? "sampled" : "greedy", a ? a : "?", b ? b : "?");
            free(a);
            free(b);
            cJSON_Delete(j);
        }
        CHECK(same == N_PROMPTS, "%s --parallel %s: %d of %d lines equal their run alone", name, par, same, N_PROMPTS);
        // the shared prefix was computed once, not once per prompt
        cJSON *st = cJSON_Parse(r.err);
        const cJSON *reused = cJSON_GetObjectItem(st, "prefix_tokens_reused");
        if (share && atoi(par) > 1)
            CHECK(reused && reused->valuedouble >= 8 * 16, "%s --parallel %s: %g prefix tokens reused", name, par,
                  reused ? reused->valuedouble : -1.0);
        if (!share) CHECK(reused && reused->valuedouble == 0, "--no-prefix-sharing reused %g", reused ? reused->valuedouble : -1.0);
        cJSON_Delete(st);
        result_free(&r);
    }
    free(input);
    for (int i = 0; i < N_PROMPTS; i++) cJSON_Delete(want[i]);
}

// ---------------------------------------------------------------------------
// the contract

// The --stats-json line of a run's stderr (its last line), parsed.
static cJSON *stats_line(const char *err) {
    const char *last = err, *nl;
    while ((nl = strchr(last, '\n')) && nl[1]) last = nl + 1;
    return cJSON_Parse(last);
}

// A budget is an upper limit, not an allocation: one far beyond this
// machine's memory (200G; the largest the option takes, more blocks than a
// pool numbers for tiny's 16 KiB blocks) runs, gives the tokens of the
// default budget, and costs only the blocks it uses. It failed "out of
// memory" (a pool allocated, then touched page by page).
static void test_large_budget(void) {
    const char *models[] = {ckpt("tiny"), ckpt("gpt2-124M-shaped")};
    const char *budgets[] = {"200G", "131072G"};
    for (int m = 0; m < 2; m++) {
        const char *in = "Hello\nThe cat\n";
        Result want = RUN_IN(in, "-m", models[m], "--batch", "-n", "4", "-s", "3");
        for (int b = 0; b < 2 - m; b++) {
            Result r = RUN_IN(in, "-m", models[m], "--batch", "-n", "4", "-s", "3", "--kv-budget", budgets[b],
                              "--stats-json");
            cJSON *st = stats_line(r.err);
            const cJSON *rss = cJSON_GetObjectItem(st, "peak_rss_bytes");
            const cJSON *held = cJSON_GetObjectItem(st, "kv_peak_bytes_held");
            // 124M: 475 MiB of weights (converted at load), and 2 blocks of 1.1 MiB held
            double limit = m ? 1.5e9 : 2e8;
            CHECK(r.rc == 0 && want.rc == 0 && !strcmp(r.out, want.out) && rss && rss->valuedouble < limit && held &&
                      held->valuedouble <= 2 * 16 * 73728,
                  "--kv-budget %s (%s): rc %d, peak rss %.0f (want < %.0f), stdout '%.300s', want '%.300s', %s",
                  budgets[b], m ? "124M" : "tiny", r.rc, rss ? rss->valuedouble : -1, limit, r.out, want.out, r.err);
            cJSON_Delete(st);
            result_free(&r);
        }
        result_free(&want);
    }
}

// The prefill rate is over the steps that prefilled, as a single run's is:
// over the whole run's wall time every decode step lowered it (66 tok/s
// against 205 with prompts sharing a prefix, which makes most steps decodes).
static void test_prefill_rate(void) {
    char in[4096] = "";
    for (int i = 0; i < 8; i++) {
        char line[512];
        snprintf(line, sizeof line, "%s line %d\n", SHARED, i);
        strcat(in, line);
    }
    Result r = RUN_IN(in, "-m", ckpt("tiny"), "--batch", "-n", "40", "--ignore-eos", "--parallel", "4", "--stats-json");
    cJSON *st = stats_line(r.err);
    const cJSON *tokens = cJSON_GetObjectItem(st, "prefill_tokens"), *secs = cJSON_GetObjectItem(st, "prefill_seconds"),
                *rate = cJSON_GetObjectItem(st, "prefill_tok_s"), *steps = cJSON_GetObjectItem(st, "prefill_steps"),
                *all_steps = cJSON_GetObjectItem(st, "steps"), *wall = cJSON_GetObjectItem(st, "wall_seconds");
    int ok = r.rc == 0 && tokens && secs && rate && steps && all_steps && wall;
    // 8 prompts, 4 at a time, each prefilled in one step: 2 to 8 steps of 80 or more
    CHECK(ok && secs->valuedouble > 0 && secs->valuedouble < wall->valuedouble && steps->valueint >= 2 &&
              steps->valueint <= 8 && all_steps->valueint >= 80 &&
              fabs(rate->valuedouble - tokens->valuedouble / secs->valuedouble) <= 1e-9 * rate->valuedouble,
          "prefill rate: rc %d, %s", r.rc, r.err);
    cJSON_Delete(st);
    result_free(&r);
}

static void test_lines(void) {
    const char *tiny = ckpt("tiny");
    // plain lines: one result each, in order; an empty line is an empty prompt
    Result r = RUN_IN("Hello\n\nThe cat\r\nlast line without a newline", "-m", tiny, "--batch", "-n", "3", "--temp", "0");
    char *lines[12];
    size_t n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 0 && n == 4, "plain lines: rc %d, %zu lines: %s", r.rc, n, r.err);
    for (size_t i = 0; i < n; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        const char *want[] = {"Hello", "", "The cat", "last line without a newline"};
        const cJSON *pr = cJSON_GetObjectItem(j, "prompt"), *idx = cJSON_GetObjectItem(j, "index");
        CHECK(pr && !strcmp(pr->valuestring, want[i]) && idx && idx->valueint == (int)i, "line %zu: %s", i, lines[i]);
        cJSON_Delete(j);
    }
    result_free(&r);

    // seeds: -s plus the line index, so that any line can be re-run alone
    r = RUN_IN("A\nB\nC\n", "-m", tiny, "--batch", "-n", "5", "-s", "41");
    n = split_lines(r.out, lines, 8);
    for (size_t i = 0; i < n; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        const cJSON *s = cJSON_GetObjectItem(j, "seed");
        CHECK(s && s->valuedouble == 41 + (double)i, "line %zu: seed %g, want %zu", i, s ? s->valuedouble : -1.0, 41 + i);
        char seed[16];
        snprintf(seed, sizeof seed, "%zu", 41 + i);
        const char *prompts[] = {"A", "B", "C"};
        Result a = RUN_IN("", "-m", tiny, "-p", prompts[i], "-n", "5", "-s", seed, "--json");
        cJSON *ja = cJSON_Parse(a.out);
        char *x = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "tokens")), *y = cJSON_PrintUnformatted(cJSON_GetObjectItem(ja, "tokens"));
        CHECK(x && y && !strcmp(x, y), "line %zu: %s, alone with -s %s: %s", i, x, seed, y);
        free(x), free(y);
        // one vocabulary: prompt_ids the ids, prompt_tokens their count, in both
        x = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "prompt_ids"));
        y = cJSON_PrintUnformatted(cJSON_GetObjectItem(ja, "prompt_ids"));
        const cJSON *cx = cJSON_GetObjectItem(j, "prompt_tokens"), *cy = cJSON_GetObjectItem(ja, "prompt_tokens");
        CHECK(x && y && !strcmp(x, y) && cJSON_IsNumber(cx) && cJSON_IsNumber(cy) && cx->valueint == cy->valueint &&
                  cx->valueint == cJSON_GetArraySize(cJSON_GetObjectItem(ja, "prompt_ids")),
              "line %zu: prompt_ids %s and %s, prompt_tokens %d and %d", i, x, y, cx ? cx->valueint : -1,
              cy ? cy->valueint : -1);
        free(x), free(y);
        cJSON_Delete(ja);
        result_free(&a);
        cJSON_Delete(j);
    }
    result_free(&r);

    // bad lines get an error in their place; the others run; exit 1
    const char *in = "{\"prompt\": \"ok\", \"max_tokens\": 2}\n"
                     "not json\n"
                     "{\"prompt\": 5}\n"
                     "{\"prompt\": \"x\", \"top_p\": 1.5}\n"
                     "{\"prompt\": \"x\", \"temprature\": 1}\n"
                     "{\"id\": 3}\n"
                     "[1]\n"
                     "{\"prompt\": \"\\ud800\"}\n"
                     // "id" twice: the last is echoed (the first leaked, make asan: fuzz_jsonl found it)
                     "{\"prompt\": \"fine too\", \"id\": 7, \"id\": {\"k\": [1, 2]}, \"max_tokens\": 1}\n";
    r = RUN_IN(in, "-m", tiny, "--batch", "--jsonl", "--temp", "0");
    n = split_lines(r.out, lines, 12);
    const char *want_err[] = {NULL,
                              "invalid JSON at byte 0",
                              "prompt must be a string",
                              "top_p must be a number in (0, 1]",
                              "unknown field \"temprature\"",
                              "no \"prompt\"",
                              "not a JSON object",
                              "invalid JSON string at byte 12 (a bad escape or an unpaired surrogate)",
                              NULL};
    CHECK(r.rc == 1 && n == 9, "bad lines: rc %d (want 1), %zu lines", r.rc, n);
    for (size_t i = 0; i < n && i < 9; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        const cJSON *e = cJSON_GetObjectItem(j, "error");
        if (want_err[i]) CHECK(e && strstr(e->valuestring, want_err[i]), "line %zu: %s", i, lines[i]);
        else CHECK(!e && cJSON_GetObjectItem(j, "text"), "line %zu: %s", i, lines[i]);
        cJSON_Delete(j);
    }
    CHECK(n == 9 && strstr(lines[8], "\"id\":{\"k\":[1,2]}"), "an id of any JSON value is echoed back: %s", n == 9 ? lines[8] : "");
    result_free(&r);

    // ignore_eos, as the server takes it: a line with it is the command's
    // --ignore-eos run (logit_bias +100 on <|endoftext|> makes every token
    // one); without it the same line stops at the first
    r = RUN_IN("{\"prompt\": \"x\", \"max_tokens\": 4, \"seed\": 3, \"ignore_eos\": true, "
               "\"logit_bias\": {\"50256\": 100}}\n"
               "{\"prompt\": \"x\", \"max_tokens\": 4, \"seed\": 3, \"logit_bias\": {\"50256\": 100}}\n"
               "{\"prompt\": \"x\", \"ignore_eos\": 1}\n",
               "-m", tiny, "--batch", "--jsonl");
    Result alone = RUN_IN("", "-m", tiny, "-p", "x", "-n", "4", "-s", "3", "--ignore-eos", "--logit-bias", "50256=100", "--json");
    n = split_lines(r.out, lines, 8);
    {
        cJSON *a = cJSON_Parse(alone.out), *l0 = n == 3 ? cJSON_Parse(lines[0]) : NULL;
        cJSON *l1 = n == 3 ? cJSON_Parse(lines[1]) : NULL;
        char *want = cJSON_PrintUnformatted(cJSON_GetObjectItem(a, "tokens"));
        char *got = cJSON_PrintUnformatted(cJSON_GetObjectItem(l0, "tokens"));
        const cJSON *sr = cJSON_GetObjectItem(l1, "stop_reason");
        CHECK(r.rc == 1 && n == 3 && want && got && !strcmp(want, got) && !strcmp(want, "[50256,50256,50256,50256]"),
              "ignore_eos in a line: the command's tokens %s, the line's %s (%s)", want ? want : "?", got ? got : "?",
              r.out);
        CHECK(sr && cJSON_IsString(sr) && !strcmp(sr->valuestring, "eos"), "without ignore_eos: stop_reason eos: %s",
              n == 3 ? lines[1] : r.out);
        CHECK(n == 3 && strstr(lines[2], "ignore_eos must be true or false"), "ignore_eos 1: refused: %s", r.out);
        free(want);
        free(got);
        cJSON_Delete(a);
        cJSON_Delete(l0);
        cJSON_Delete(l1);
    }
    result_free(&alone);
    result_free(&r);

    // a prompt of token ids, as the server takes it: the ids --tokenize
    // gives run as the text does; ids that are not the text's own
    // tokenization run as given ("prompt_ids"), "prompt" their text
    {
        Result t1 = RUN_IN("", "-m", tiny, "--tokenize", "--json", "-p", "Hello world");
        Result t2 = RUN_IN("", "-m", tiny, "--tokenize", "--json", "-p", "Hel");
        Result t3 = RUN_IN("", "-m", tiny, "--tokenize", "--json", "-p", "lo world");
        char **outs[] = {&t1.out, &t2.out, &t3.out};
        for (size_t i = 0; i < 3; i++) (*outs[i])[strcspn(*outs[i], "\n")] = '\0';
        Result txt = RUN_IN("{\"prompt\": \"Hello world\", \"max_tokens\": 5, \"seed\": 4}\n",
                            "-m", tiny, "--batch", "--jsonl");
        // another tokenization of the text: "Hel"'s ids then "lo world"'s, one array
        char split_ids[256];
        snprintf(split_ids, sizeof split_ids, "%.*s,%s", (int)strlen(t2.out) - 1, t2.out, t3.out + 1);
        char in[1024];
        snprintf(in, sizeof in,
                 "{\"prompt\": %s, \"max_tokens\": 5, \"seed\": 4}\n"
                 "{\"prompt\": %s, \"max_tokens\": 5, \"seed\": 4}\n"
                 "{\"prompt\": []}\n{\"prompt\": [15496, 50257]}\n{\"prompt\": [15496], \"choices\": [\" a\"]}\n"
                 "{\"prompt\": [1.5]}\n",
                 t1.out, split_ids);
        r = RUN_IN(in, "-m", tiny, "--batch", "--jsonl");
        n = split_lines(r.out, lines, 8);
        cJSON *want = cJSON_Parse(txt.out), *l0 = n == 6 ? cJSON_Parse(lines[0]) : NULL;
        cJSON *l1 = n == 6 ? cJSON_Parse(lines[1]) : NULL;
        char *want_tokens = cJSON_PrintUnformatted(cJSON_GetObjectItem(want, "tokens"));
        char *got_tokens = cJSON_PrintUnformatted(cJSON_GetObjectItem(l0, "tokens"));
        char *split_got = cJSON_PrintUnformatted(cJSON_GetObjectItem(l1, "prompt_ids"));
        const char *split_want = split_ids;
        const cJSON *p1 = cJSON_GetObjectItem(l1, "prompt");
        CHECK(want_tokens && got_tokens && !strcmp(want_tokens, got_tokens) &&
                  !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(l0, "prompt")), "Hello world"),
              "token ids %s: the text's tokens %s, the ids' %s", t1.out, want_tokens ? want_tokens : "?",
              got_tokens ? got_tokens : "?");
        CHECK(strcmp(split_want, t1.out) && split_got && !strcmp(split_got, split_want) && cJSON_IsString(p1) &&
                  !strcmp(p1->valuestring, "Hello world"),
              "ids %s (not the text's %s) run as given: %s", split_want, t1.out, n == 6 ? lines[1] : r.out);
        const char *want_err[] = {"prompt has an empty array of token ids",
                                  "prompt: element 1 is not a token id in [0, 50257)",
                                  "needs a text prompt", "prompt: element 0 is not a token id"};
        for (size_t i = 0; i < 4; i++)
            CHECK(n == 6 && strstr(lines[2 + i], want_err[i]), "token ids line %zu: %s", i + 2,
                  n == 6 ? lines[2 + i] : r.out);
        free(want_tokens), free(got_tokens), free(split_got);
        cJSON_Delete(want), cJSON_Delete(l0), cJSON_Delete(l1);
        result_free(&t1), result_free(&t2), result_free(&t3), result_free(&txt);
        result_free(&r);
    }

    // a seed is the line's number exactly, or refused: a double rounds
    // 2^53 + 1 to 2^53, so numbers stop below 2^53; digits in a string go on
    r = RUN_IN("{\"prompt\": \"x\", \"seed\": 9007199254740993, \"max_tokens\": 1}\n"
               "{\"prompt\": \"x\", \"seed\": 9007199254740992, \"max_tokens\": 1}\n"
               "{\"prompt\": \"x\", \"seed\": 9007199254740991, \"max_tokens\": 1}\n"
               "{\"prompt\": \"x\", \"seed\": \"9007199254740993\", \"max_tokens\": 1}\n",
               "-m", tiny, "--batch", "--jsonl");
    n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 1 && n == 4 && strstr(lines[0], "seed must be an integer below 2^53") &&
              strstr(lines[1], "seed must be an integer below 2^53") && strstr(lines[2], "\"seed\":9007199254740991,") &&
              strstr(lines[3], "\"seed\":\"9007199254740993\","),
          "seeds at 2^53: rc %d, %s", r.rc, r.out);
    result_free(&r);

    // ... and a fraction is no seed: 4503599627370497.5 was rounded (to
    // even) to ...498 and run, 1.00000000000000000001 ran as 1. The seed is
    // read from its digits, wherever it stands in the line (after an "id"
    // holding a "seed" of its own, a key written with an escape).
    r = RUN_IN("{\"prompt\": \"x\", \"seed\": 4503599627370497.5, \"max_tokens\": 1}\n"
               "{\"prompt\": \"x\", \"seed\": 4503599627370496.5, \"max_tokens\": 1}\n"
               "{\"prompt\": \"x\", \"seed\": 1.00000000000000000001, \"max_tokens\": 1}\n"
               "{\"prompt\": \"x\", \"seed\": 7.0, \"max_tokens\": 1}\n"
               "{\"prompt\": \"x\", \"seed\": 7e0, \"max_tokens\": 1}\n"
               "{\"id\": {\"seed\": 1.5, \"s\": [\"]}\"]}, \"prompt\": \"x\", \"se\\u0065d\" : 4503599627370497 }\n"
               "{\"prompt\": \"x\", \"seed\": 7.5, \"seed\": 7}\n",
               "-m", tiny, "--batch", "--jsonl", "-n", "1");
    n = split_lines(r.out, lines, 8);
    int refused = 0;
    for (size_t i = 0; i < n && i < 5; i++) refused += strstr(lines[i], "seed must be an integer below 2^53") != NULL;
    CHECK(r.rc == 1 && n == 7 && refused == 5 && strstr(lines[5], "\"seed\":4503599627370497,") &&
              strstr(lines[6], "seed must be an integer"),
          "seeds with a fraction: rc %d, %s", r.rc, r.out);
    result_free(&r);

    // anything but white space after the object makes the line an error
    r = RUN_IN("{\"prompt\": \"x\"} trailing\n{\"prompt\": \"x\"}{\"prompt\": \"y\"}\n{\"prompt\": \"z\"} \t\n", "-m",
               tiny, "--batch", "--jsonl", "-n", "1");
    n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 1 && n == 3 && strstr(lines[0], "\"error\":\"text after the JSON object, at byte 16") &&
              strstr(lines[1], "\"error\":\"text after the JSON object, at byte 15") &&
              strstr(lines[2], "\"prompt\":\"z\""),
          "text after the object: rc %d, %s", r.rc, r.out);
    result_free(&r);

    // a NUL byte is refused, not cut: "a\0b" ran as 3 tokens but was echoed
    // as "a", and "a\u0000b" ran as "a"; an escaped backslash is no NUL
    r = run_gpt(tmpdir, "a\0b\nc\n", 6, (const char *const[]){"-m", tiny, "--batch", "-n", "1", NULL});
    n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 1 && n == 2 && strstr(lines[0], "\"error\":\"a NUL byte at byte 1 of the line") &&
              strstr(lines[1], "\"prompt\":\"c\""),
          "a NUL in a plain line: rc %d, %s", r.rc, r.out);
    result_free(&r);
    // a line longer than 16 MiB is that line's error, its bytes dropped,
    // the lines after it answered; at the end of the input without a
    // newline too
    {
        size_t over = (16u << 20) + 1, len = 2 + over + 1 + 2 + over;
        char *in = malloc(len);
        CHECK(in != NULL, "out of memory");
        if (in) {
            memcpy(in, "a\n", 2);
            memset(in + 2, 'x', over);
            memcpy(in + 2 + over, "\nc\n", 3);
            memset(in + 2 + over + 3, '{', over);
            r = run_gpt(tmpdir, in, len, (const char *const[]){"-m", tiny, "--batch", "-n", "1", NULL});
            free(in);
            n = split_lines(r.out, lines, 8);
            CHECK(r.rc == 1 && n == 4 && strstr(lines[0], "\"prompt\":\"a\"") &&
                      strstr(lines[1], "\"error\":\"the line is 16777217 bytes, longer than the 16 MiB") &&
                      strstr(lines[2], "\"prompt\":\"c\"") && strstr(lines[3], "\"index\":3,\"error\":\"the line is 16777217"),
                  "lines over 16 MiB: rc %d, %.600s", r.rc, r.out);
            result_free(&r);
        }
    }
    r = RUN_IN("{\"prompt\": \"a\\u0000b\"}\n{\"prompt\": \"a\\\\u0000b\", \"max_tokens\": 1}\n", "-m", tiny, "--batch",
               "--jsonl", "-n", "1");
    n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 1 && n == 2 && strstr(lines[0], "a NUL byte at byte 13 of the line") &&
              strstr(lines[1], "\"prompt\":\"a\\\\u0000b\""),
          "\\u0000 in a JSONL prompt: rc %d, %s", r.rc, r.out);
    result_free(&r);

    // bytes that are not UTF-8: "prompt" (a JSON string, so UTF-8) has
    // U+FFFD for them, and "prompt_hex" the bytes that ran, which -p runs
    // again to the same tokens (the echo alone could not be re-run); a
    // valid prompt has no prompt_hex; --jsonl's strings alike
    for (int jsonl = 0; jsonl < 2; jsonl++) {
        const char *in = jsonl ? "{\"prompt\": \"a\xff" "b\"}\n{\"prompt\": \"plain\"}\n" : "a\xff" "b\nplain\n";
        r = jsonl ? RUN_IN(in, "-m", tiny, "--batch", "-n", "3", "-s", "5", "--jsonl")
                  : RUN_IN(in, "-m", tiny, "--batch", "-n", "3", "-s", "5");
        n = split_lines(r.out, lines, 8);
        cJSON *x = n == 2 ? cJSON_Parse(lines[0]) : NULL, *y = n == 2 ? cJSON_Parse(lines[1]) : NULL;
        const cJSON *hex = cJSON_GetObjectItem(x, "prompt_hex"), *shown = cJSON_GetObjectItem(x, "prompt");
        Result a = RUN_IN("", "-m", tiny, "-p", "a\xff" "b", "-n", "3", "-s", "5", "--json");
        cJSON *ja = cJSON_Parse(a.out);
        char *batch_tokens = x ? cJSON_PrintUnformatted(cJSON_GetObjectItem(x, "tokens")) : NULL;
        char *alone_tokens = ja ? cJSON_PrintUnformatted(cJSON_GetObjectItem(ja, "tokens")) : NULL;
        CHECK(r.rc == 0 && hex && !strcmp(hex->valuestring, "61ff62") && shown &&
                  !strcmp(shown->valuestring, "a\xef\xbf\xbd" "b") && y && !cJSON_GetObjectItem(y, "prompt_hex") &&
                  batch_tokens && alone_tokens && !strcmp(batch_tokens, alone_tokens),
              "invalid UTF-8 in a%s line: rc %d, %s; alone: %s", jsonl ? " --jsonl" : " plain", r.rc, r.out, a.out);
        free(batch_tokens), free(alone_tokens);
        cJSON_Delete(ja), cJSON_Delete(x), cJSON_Delete(y);
        result_free(&a);
        result_free(&r);
    }

    // a prompt longer than the context (tiny: 128) is an error line
    char longp[2048] = "";
    for (int i = 0; i < 200; i++) strcat(longp, " word");
    strcat(longp, "\nshort\n");
    r = RUN_IN(longp, "-m", tiny, "--batch", "-n", "2");
    n = split_lines(r.out, lines, 4);
    CHECK(r.rc == 1 && n == 2 && strstr(lines[0], "context holds 128") && strstr(lines[1], "\"text\""),
          "too long a prompt: rc %d %s", r.rc, r.out);
    result_free(&r);

    // stop strings, across token boundaries; the text ends before them
    r = RUN_IN("{\"prompt\": \"Hello\", \"stop\": [\"xyz\", \"oH\"], \"max_tokens\": 20}\n", "-m", tiny, "--batch",
               "--jsonl", "--temp", "0");
    cJSON *j = cJSON_Parse(r.out);
    const cJSON *stop = cJSON_GetObjectItem(j, "stop_reason"), *text = cJSON_GetObjectItem(j, "text");
    // tiny repeats "Hello" (one token): "HelloHello..." has "oH" after "Hell",
    // across the boundary of the first two tokens
    CHECK(stop && !strcmp(stop->valuestring, "stop") && text && !strcmp(text->valuestring, "Hell"),
          "stop string: %s", r.out);
    cJSON_Delete(j);
    result_free(&r);
    Result single = RUN_IN("", "-m", tiny, "-p", "Hello", "--stop", "oH", "-n", "20", "--temp", "0", "--json");
    j = cJSON_Parse(single.out);
    CHECK(single.rc == 0 && j && !strcmp(cJSON_GetObjectItem(j, "text")->valuestring, "Hell") &&
              !strcmp(cJSON_GetObjectItem(j, "stop_reason")->valuestring, "stop"),
          "--stop in the single mode: '%s'", single.out);
    cJSON_Delete(j);
    result_free(&single);
    single = RUN_IN("", "-m", tiny, "-p", "Hello", "--stop", "oH", "-n", "20", "--temp", "0");
    CHECK(single.rc == 0 && !strcmp(single.out, "Hell"), "--stop streamed: '%s'", single.out);
    result_free(&single);
    // --stop reads C escapes as a JSONL "stop" does: "o\x48" is "oH" (and
    // "\n\n" two newlines, not four characters)
    single = RUN_IN("", "-m", tiny, "-p", "Hello", "--stop", "o\\x48", "-n", "20", "--temp", "0");
    CHECK(single.rc == 0 && !strcmp(single.out, "Hell"), "--stop 'o\\x48': '%s' %s", single.out, single.err);
    result_free(&single);

    // --text: one escaped completion per line; an error line is empty
    r = RUN_IN("{\"prompt\": \"a\", \"max_tokens\": 3}\n{\"prompt\": 1}\n", "-m", tiny, "--batch", "--jsonl", "--text",
               "--temp", "0", "--stop", "zzz");
    n = split_lines(r.out, lines, 4);
    CHECK(r.rc == 1 && n == 2 && lines[0][0] && !lines[1][0] && strstr(r.err, "line 2: prompt must be a string"),
          "--text: rc %d, '%s', '%s'", r.rc, r.out, r.err);
    result_free(&r);
    // the message counts lines of stdin from 1 (as sed -n does), not indices
    r = RUN_IN("{\"prompt\": 1}\n", "-m", tiny, "--batch", "--jsonl", "--text", "--first-index", "10");
    CHECK(r.rc == 1 && strstr(r.err, "gpt: line 1: prompt must be a string"), "--text --first-index 10: rc %d, '%s'",
          r.rc, r.err);
    result_free(&r);

    // --unordered: every line once, whatever the order
    r = RUN_IN("a\nbb\nccc\ndddd\n", "-m", tiny, "--batch", "--unordered", "-n", "3", "--parallel", "2");
    n = split_lines(r.out, lines, 8);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *x = cJSON_Parse(lines[i]);
        const cJSON *idx = cJSON_GetObjectItem(x, "index");
        if (idx) seen |= 1 << idx->valueint;
        cJSON_Delete(x);
    }
    CHECK(r.rc == 0 && n == 4 && seen == 15, "--unordered: %zu lines, indexes %x", n, seen);
    result_free(&r);

    // usage errors: exit 2 before reading anything
    r = RUN_IN("x\n", "-m", tiny, "--batch", "--lookup", "2");
    CHECK(r.rc == 2 && strstr(r.err, "--lookup does not apply to --batch") && !r.out_len, "--batch --lookup: %s", r.err);
    result_free(&r);
    r = RUN_IN("x\n", "-m", tiny, "--batch", "--parallel", "0");
    CHECK(r.rc == 2 && strstr(r.err, "--parallel 0"), "--parallel 0: %s", r.err);
    result_free(&r);
    // indices are exact integers: --first-index stops at 2^52, so that no
    // index reaches 2^53 (it printed 1.8446744073709552e+19, then wrapped)
    r = RUN_IN("x\n", "-m", tiny, "--batch", "--first-index", "18446744073709551614");
    CHECK(r.rc == 2 && strstr(r.err, "--first-index 18446744073709551614: must be an integer in [0, 2^52]") &&
              !r.out_len, "--first-index 2^64 - 2: rc %d %s", r.rc, r.err);
    result_free(&r);
    r = RUN_IN("x\n", "-m", tiny, "--batch", "--first-index", "4503599627370497");
    CHECK(r.rc == 2 && strstr(r.err, "--first-index 4503599627370497") && !r.out_len, "--first-index 2^52 + 1: %s",
          r.err);
    result_free(&r);
    r = RUN_IN("x\ny\n", "-m", tiny, "--batch", "-n", "1", "-s", "1", "--first-index", "4503599627370496");
    n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 0 && n == 2 && strstr(lines[0], "{\"index\":4503599627370496,") &&
              strstr(lines[1], "{\"index\":4503599627370497,") && strstr(lines[1], "\"seed\":4503599627370498,"),
          "--first-index 2^52: rc %d %s %s", r.rc, r.out, r.err);
    result_free(&r);
    r = RUN_IN("x\n", "-m", tiny, "--batch", "--kv-budget", "12Q");
    CHECK(r.rc == 2 && strstr(r.err, "--kv-budget 12Q"), "--kv-budget 12Q: %s", r.err);
    result_free(&r);
    // a budget no process can address is the option's error, not the pool's
    const char *huge[] = {"99999999G", "99999999999999999999G", "17179869184G"};
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        r = RUN_IN("x\n", "-m", tiny, "--batch", "--kv-budget", huge[i]);
        CHECK(r.rc == 2 && strstr(r.err, "beyond what this machine can address") && strstr(r.err, huge[i]) &&
                  one_line(r.err) && !r.out_len,
              "--kv-budget %s: rc %d %s", huge[i], r.rc, r.err);
        result_free(&r);
    }
    // a budget below one block can never work: a usage error, before any
    // line is read (it was exit 1); 124M's blocks are 16 x 73728 bytes
    r = RUN_IN("x\n", "-m", tiny, "--batch", "--kv-budget", "1");
    CHECK(r.rc == 2 && strstr(r.err, "--kv-budget 1: less than one block") && one_line(r.err) && !r.out_len,
          "--kv-budget 1: rc %d %s", r.rc, r.err);
    result_free(&r);
    r = RUN_IN("x\n", "-m", ckpt("gpt2-124M-shaped"), "--batch", "--kv-budget", "1M");
    CHECK(r.rc == 2 && strstr(r.err, "--kv-budget 1M: less than one block of this model's KV cache (16 positions, "
                                     "1179648 bytes)"),
          "--kv-budget 1M with 124M: rc %d %s", r.rc, r.err);
    result_free(&r);
    // a budget too small for one sequence: that line fails, clearly
    r = RUN_IN("hello\n", "-m", ckpt("gpt2-124M-shaped"), "--batch", "--kv-budget", "2M", "-n", "40");
    CHECK(r.rc == 1 && strstr(r.out, "budget"), "2M budget: rc %d %s %s", r.rc, r.out, r.err);
    result_free(&r);
    test_large_budget();
    test_prefill_rate();
}

// GNU parallel splits the input across processes; with --first-index from
// its job number, the joined output is the single run's, line for line.
static void test_gnu_parallel(void) {
    if (!check_tool("parallel --version", "GNU parallel")) return;
    char input[8192] = "";
    for (int i = 0; i < 40; i++) {
        char line[128];
        snprintf(line, sizeof line, "{\"prompt\": \"Prompt number %d says\", \"id\": \"p%d\", \"max_tokens\": %d}\n", i, i,
                 2 + i % 4);
        strcat(input, line);
    }
    char in_path[512], cmd[4096];
    snprintf(in_path, sizeof in_path, "%s/prompts.jsonl", tmpdir);
    FILE *f = fopen(in_path, "w");
    fputs(input, f);
    fclose(f);
    const char *gpt = gpt_binary();
    snprintf(cmd, sizeof cmd,
             "parallel --will-cite --pipe -N 10 -k '%s --batch --jsonl -m %s -s 7 --first-index $(( ({#} - 1) * 10 ))' "
             "< %s > %s/parallel.out 2>%s/parallel.err",
             gpt, ckpt("tiny"), in_path, tmpdir, tmpdir);
    CHECK(system(cmd) == 0, "%s", cmd);
    Result one = RUN_IN(input, "-m", ckpt("tiny"), "--batch", "--jsonl", "-s", "7");
    char out_path[512], *joined = NULL;
    size_t len = 0;
    snprintf(out_path, sizeof out_path, "%s/parallel.out", tmpdir);
    file_read_all(out_path, &joined, &len, NULL);
    // The results are the same, line for line; only the stats may differ
    // (the single run shares more prompt prefixes than the pieces can).
    char *a[64], *b[64];
    size_t na = joined ? split_lines(joined, a, 64) : 0, nb = split_lines(one.out, b, 64), same = 0;
    for (size_t i = 0; i < na && i < nb; i++) {
        cJSON *x = cJSON_Parse(a[i]), *y = cJSON_Parse(b[i]);
        cJSON_DeleteItemFromObject(x, "stats");
        cJSON_DeleteItemFromObject(y, "stats");
        char *sx = cJSON_PrintUnformatted(x), *sy = cJSON_PrintUnformatted(y);
        same += sx && sy && !strcmp(sx, sy);
        free(sx), free(sy);
        cJSON_Delete(x), cJSON_Delete(y);
    }
    CHECK(one.rc == 0 && na == 40 && nb == 40 && same == 40,
          "GNU parallel: %zu and %zu lines, %zu of them equal to one --batch run's", na, nb, same);
    free(joined);
    result_free(&one);
}

// Several completions of a line (--completions N, or its "n"): a list, each
// completion the line's single run with the seed + k, bit for bit (text,
// ids, stop_reason, log-probabilities), the prompt computed once.
static char *json_text(const cJSON *item) {
    char *t = item ? cJSON_PrintUnformatted(item) : NULL;
    return t ? t : strdup("(none)");
}

static void test_completions(void) {
    const char *tiny = ckpt("tiny");
    const char *in = "{\"prompt\": \"The cat sat on the mat and then\", \"n\": 3, \"seed\": 5, \"temperature\": 0.9, "
                     "\"logprobs\": 2}\n"
                     "{\"prompt\": \"Hello\", \"max_tokens\": 4}\n"
                     "{\"prompt\": \"And it came to pass\", \"n\": 2, \"seed\": \"77\", \"stop\": \"e\"}\n";
    // --parallel 2: three completions of one line wait for places too
    Result r = RUN_IN(in, "-m", tiny, "--batch", "--jsonl", "-n", "8", "--parallel", "2", "-s", "1");
    char *lines[8];
    size_t n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 0 && n == 3, "n: rc %d, %zu lines, %s", r.rc, n, r.err);
    const char *prompts[] = {"The cat sat on the mat and then", "Hello", "And it came to pass"};
    const int counts[] = {3, 1, 2};
    const unsigned seeds[] = {5, 2, 77};  // line 1's: -s + its index
    for (size_t i = 0; i < n && i < 3; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        const cJSON *list = cJSON_GetObjectItem(j, "completions");
        CHECK(counts[i] == 1 ? !list && cJSON_GetObjectItem(j, "text") : cJSON_GetArraySize(list) == counts[i],
              "line %zu: %d completions expected: %s", i, counts[i], lines[i]);
        for (int k = 0; k < counts[i]; k++) {
            const cJSON *c = counts[i] == 1 ? j : cJSON_GetArrayItem(list, k);
            char seed[32];
            snprintf(seed, sizeof seed, "%u", seeds[i] + (unsigned)k);
            Result a = i == 0 ? RUN_IN("", "-m", tiny, "-p", prompts[i], "-n", "8", "-s", seed, "--temp", "0.9",
                                       "--logprobs", "2", "--json")
                     : i == 1 ? RUN_IN("", "-m", tiny, "-p", prompts[i], "-n", "4", "-s", seed, "--json")
                              : RUN_IN("", "-m", tiny, "-p", prompts[i], "-n", "8", "-s", seed, "--stop", "e", "--json");
            cJSON *ja = cJSON_Parse(a.out);
            int same = ja != NULL;
            for (const char *const *key = (const char *const[]){"text", "tokens", "stop_reason", "logprobs", NULL};
                 same && *key; key++) {
                char *x = json_text(cJSON_GetObjectItem(c, *key)), *y = json_text(cJSON_GetObjectItem(ja, *key));
                same = !strcmp(x, y);
                if (!same) fprintf(stderr, "line %zu completion %d %s: %s, alone: %s\n", i, k, *key, x, y);
                free(x), free(y);
            }
            const cJSON *seed_json = cJSON_GetObjectItem(c, "seed");
            CHECK(same && cJSON_IsNumber(seed_json) && seed_json->valuedouble == seeds[i] + k,
                  "line %zu, completion %d (seed %s): not the single run's", i, k, seed);
            // the prompt once: the completions after the first share its blocks
            const cJSON *reused = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "stats"), "prefix_tokens_reused");
            if (i == 0)
                CHECK(reused && (k == 0 ? reused->valueint == 0 : reused->valueint > 0),
                      "line 0, completion %d: %d prompt tokens reused", k, reused ? reused->valueint : -1);
            if (k == 0) {
                char *x = json_text(cJSON_GetObjectItem(j, "prompt_ids")), *y = json_text(cJSON_GetObjectItem(ja, "prompt_ids"));
                CHECK(!strcmp(x, y) && cJSON_GetObjectItem(j, "prompt_tokens"), "line %zu: prompt_ids %s, alone %s", i, x, y);
                free(x), free(y);
            }
            cJSON_Delete(ja);
            result_free(&a);
        }
        cJSON_Delete(j);
    }
    result_free(&r);

    // --completions N: every line's; seeds -s + index, + 1, ...
    r = RUN_IN("A\nB\n", "-m", tiny, "--batch", "-n", "3", "-s", "10", "--completions", "2");
    n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 0 && n == 2, "--completions 2 --batch: rc %d, %zu lines, %s", r.rc, n, r.err);
    for (size_t i = 0; i < n && i < 2; i++) {
        cJSON *j = cJSON_Parse(lines[i]);
        const cJSON *list = cJSON_GetObjectItem(j, "completions");
        for (int k = 0; k < 2; k++) {
            char seed[32];
            snprintf(seed, sizeof seed, "%zu", 10 + i + (size_t)k);
            Result a = RUN_IN("", "-m", tiny, "-p", i ? "B" : "A", "-n", "3", "-s", seed, "--json");
            cJSON *ja = cJSON_Parse(a.out);
            char *x = json_text(cJSON_GetObjectItem(cJSON_GetArrayItem(list, k), "tokens"));
            char *y = json_text(cJSON_GetObjectItem(ja, "tokens"));
            CHECK(cJSON_GetArraySize(list) == 2 && !strcmp(x, y), "--completions 2, line %zu, #%d: %s, alone %s", i, k,
                  x, y);
            free(x), free(y);
            cJSON_Delete(ja);
            result_free(&a);
        }
        cJSON_Delete(j);
    }
    result_free(&r);

    // a budget that is not whole blocks says what it holds (it was rounded silently)
    r = RUN_IN("x\n", "-m", "models/demo.bin", "--batch", "-n", "2", "--kv-budget", "200K");
    CHECK(r.rc == 0 && strstr(r.err, "gpt: --kv-budget 200K (204800 bytes) holds 1 whole block of 16 positions: "
                                     "131072 bytes\n"),
          "--kv-budget 200K: rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    r = RUN_IN("x\n", "-m", "models/demo.bin", "--batch", "-n", "2", "--kv-budget", "256K");
    CHECK(r.rc == 0 && !strstr(r.err, "kv-budget"), "--kv-budget 256K: rc %d, '%s'", r.rc, r.err);
    result_free(&r);

    // refused: a bad "n", "n" on a multiple-choice line, several with --text
    const char *bad = "{\"prompt\": \"x\", \"n\": 0}\n{\"prompt\": \"x\", \"n\": 65}\n{\"prompt\": \"x\", \"n\": 1.5}\n"
                      "{\"prompt\": \"x\", \"n\": \"2\"}\n{\"prompt\": \"x\", \"choices\": [\" a\"], \"n\": 2}\n";
    r = RUN_IN(bad, "-m", tiny, "--batch", "--jsonl", "-n", "2");
    n = split_lines(r.out, lines, 8);
    CHECK(r.rc == 1 && n == 5, "bad n: rc %d, %zu lines", r.rc, n);
    for (size_t i = 0; i < n && i < 5; i++)
        CHECK(strstr(lines[i], i < 4 ? "\"error\":\"n must be an integer in [1, 64]\""
                                     : "\"error\":\"n does not apply to a line with \\\"choices\\\""),
              "bad n, line %zu: %s", i, lines[i]);
    result_free(&r);
    r = RUN_IN("{\"prompt\": \"x\", \"n\": 2}\n", "-m", tiny, "--batch", "--jsonl", "-n", "2", "--text");
    CHECK(r.rc == 1 && !strcmp(r.out, "\n") &&
              strstr(r.err, "gpt: line 1: \"n\": 2 and --text exclude each other (--text writes one text per input "
                            "line; without --text the JSON line lists its \"completions\")"),
          "n 2 with --text: rc %d, '%s', '%s'", r.rc, r.out, r.err);
    result_free(&r);
    r = RUN_IN("x\n", "-m", tiny, "--batch", "--completions", "2", "--text");
    CHECK(r.rc == 2 && one_line(r.err) &&
              strstr(r.err, "--completions 2 and --text exclude each other (--text writes one text per input line; "
                            "without --text each JSON line lists its \"completions\")"),
          "rc %d, '%s'", r.rc, r.err);
    result_free(&r);
    // log-probabilities have no place in --text's lines: refused, never dropped
    r = RUN_IN("hi\n", "-m", tiny, "--batch", "--text", "--logprobs", "3", "-n", "2", "-s", "1");
    CHECK(r.rc == 2 && one_line(r.err) && r.out_len == 0 &&
              strstr(r.err, "--logprobs and --text exclude each other (--text writes only the text"),
          "--logprobs with --text: rc %d, '%s', '%s'", r.rc, r.out, r.err);
    result_free(&r);
    r = RUN_IN("{\"prompt\": \"hi\", \"logprobs\": 2}\n{\"prompt\": \"hi\"}\n", "-m", tiny, "--batch", "--jsonl",
               "--text", "-n", "2", "-s", "1");
    CHECK(r.rc == 1 && !strncmp(r.out, "\n", 1) && split_lines(r.out, lines, 8) == 2 &&
              strstr(r.err, "gpt: line 1: \"logprobs\" and --text exclude each other") && one_line(r.err),
          "a line's logprobs with --text: rc %d, '%s', '%s'", r.rc, r.out, r.err);
    result_free(&r);
}

int main(void) {
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "batch") != 0) return 1;
    test_lines();
    test_completions();
    test_gnu_parallel();
    test_equals_alone("tiny", ckpt("tiny"), 0);
    // every matrix in Q4, wte (the output layer) too: Q4's integer products
    // over the whole vocabulary, as a model.bin (gpt convert --dtype q4-pure)
    char pure[512], cmd1[2048];
    snprintf(pure, sizeof pure, "%s/tiny-q4-pure.bin", tmpdir);
    snprintf(cmd1, sizeof cmd1, "%s convert %s %s --dtype q4-pure 2>/dev/null", gpt_binary(), ckpt("tiny"), pure);
    CHECK(system(cmd1) == 0, "%s", cmd1);
    test_equals_alone("tiny q4-pure", pure, 0);
    // the 124M model as a model.bin: mapped in place, each of the runs
    // below loads it in milliseconds (the safetensors is converted on load)
    char bin[512], cmd0[2048];
    snprintf(bin, sizeof bin, "%s/124M.bin", tmpdir);
    snprintf(cmd0, sizeof cmd0, "%s convert %s %s 2>/dev/null", gpt_binary(), ckpt("gpt2-124M-shaped"), bin);
    CHECK(system(cmd0) == 0, "%s", cmd0);
    test_equals_alone("gpt2-124M-shaped", bin, 1);
    scratch_dir_remove(tmpdir);
    return check_exit("test_batch");
}

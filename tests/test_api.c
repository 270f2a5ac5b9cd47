/*
 * test_api.c - the public C API (src/api/gpt.h), every call, against the
 * gpt command on the demo model (models/demo.bin):
 *   - generation: the text, tokens, stop reason, seed and log-probabilities
 *     of gpt_generate equal `gpt -m MODEL -p PROMPT ... --json`'s for the
 *     same settings (sampling, filters, penalties, logit_bias, stop
 *     strings, echo, logprobs, a regex and a JSON Schema, context_shift);
 *     gpt_generate_tokens equals a --batch --jsonl line with the ids as its
 *     prompt; the callback's pieces together are the text; a callback that stops
 *     the run leaves the tokens a prefix of the full run's; 4 threads on
 *     one model each get the single run's result;
 *   - every model format -m takes (the test checkpoints, $CKPT_DIR): the
 *     same bits as the command;
 *   - adapters (gpt_model_options.lora): a GGUF LoRA file and a PEFT
 *     directory written here, at scales 1 and -0.5: gpt --lora's bits (and
 *     not the base's); n_lora past 16, a NULL list or path, a scale that is
 *     no number, a model given as an adapter: each refused by name;
 *   - gpt_score: gpt --score --json's tokens and log-probabilities, bit for
 *     bit, with --prepend-eos and --stride;
 *   - gpt_chat: gpt --chat-template T --json's prompt ids, tokens, text and
 *     stop for each built-in template (a content's <|endoftext|> text, a
 *     stop of the settings beside the template's); gpt_chat_render: gpt
 *     --apply-template's bytes;
 *   - a batch of 16 requests through the scheduler, 4 at a time: each the
 *     single run's result; a request stopped by its callback and one
 *     cancelled before the run end "cancelled", the others untouched;
 *   - gpt_choose: gpt --choice --json's sums, means, bytes and best;
 *   - tokenize and detokenize: `gpt --tokenize`'s ids, the exact bytes back;
 *   - misuse: every NULL handle and argument, an unknown setting, values out
 *     of range or not JSON, a second grammar, bad model options, a missing
 *     file, a prompt past the context, a token id past the vocabulary:
 *     each an error code and a message naming the field, never a crash;
 *     a refused value leaves the settings as they were.
 * Run under make asan too (the API's objects are linked in, sanitized).
 */
#include <cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/gpt.h"
#include "check.h"
#include "run_gpt.h"

#define MODEL "models/demo.bin"
#define PROMPT "And it came to pass"

static char scratch[] = "/tmp/test_api_XXXXXX";
static gpt_model *model;
static const char *model_path = MODEL;  // model's, for gpt -m

// gpt's --json object for args (after -m MODEL), or NULL.
static cJSON *gpt_json(const char *const *args) {
    const char *argv[40] = {"-m", model_path, "-q", "--json"};
    int n = 4;
    for (int i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
    argv[n] = NULL;
    Result r = run_gpt(scratch, NULL, 0, argv);
    cJSON *j = r.rc == 0 ? cJSON_Parse(r.out) : NULL;
    if (!j) fprintf(stderr, "gpt failed (%d): %s\n", r.rc, r.err);
    result_free(&r);
    return j;
}

// Settings from name, value pairs (NULL ends them); NULL if one is refused.
static gpt_settings *settings_of(const char *const *kv) {
    gpt_settings *s = gpt_settings_new();
    gpt_err err;
    for (int i = 0; s && kv[i]; i += 2) {
        if (gpt_settings_set(s, kv[i], kv[i + 1], &err) != GPT_OK) {
            fprintf(stderr, "gpt_settings_set %s %s: %s\n", kv[i], kv[i + 1], err.message);
            gpt_settings_free(s);
            return NULL;
        }
    }
    return s;
}

typedef struct {
    char *text;
    size_t len, calls, stop_after;
} Pieces;

static int collect(void *user_data, const char *text, size_t len, int32_t token) {
    Pieces *p = user_data;
    (void)token;
    p->text = realloc(p->text, p->len + len + 1);
    memcpy(p->text + p->len, text, len);
    p->len += len;
    p->text[p->len] = '\0';
    return ++p->calls == p->stop_after;
}

// 1 if the ids equal the JSON array a.
static int same_ids(const int32_t *ids, size_t n, const cJSON *a) {
    if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) != n) return 0;
    size_t i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++)
        if (!cJSON_IsNumber(e) || e->valuedouble != ids[i]) return 0;
    return 1;
}

// gpt_generate with settings kv equals gpt --json with args: text, tokens,
// stop reason, seed, log-probabilities; and the streamed pieces are the text
// (less an echoed prompt).
static void check_same(const char *what, const char *prompt, const char *const *kv, const char *const *args) {
    gpt_settings *s = settings_of(kv);
    cJSON *want = gpt_json(args);
    gpt_result *r = NULL;
    gpt_err err;
    Pieces p = {0};
    int rc = s && want ? gpt_generate(model, prompt, s, collect, &p, &r, &err) : -1;
    CHECK(rc == GPT_OK && r, "%s: gpt_generate: %s", what, rc == -1 ? "no settings or no gpt output" : err.message);
    if (rc == GPT_OK && r) {
        size_t len, n;
        const char *text = gpt_result_text(r, &len);
        const int32_t *ids = gpt_result_tokens(r, &n);
        const cJSON *wt = cJSON_GetObjectItem(want, "text"), *seed = cJSON_GetObjectItem(want, "seed");
        CHECK(cJSON_IsString(wt) && strlen(wt->valuestring) == len && !memcmp(wt->valuestring, text, len),
              "%s: text [%s], gpt's [%s]", what, text, cJSON_IsString(wt) ? wt->valuestring : "?");
        CHECK(same_ids(ids, n, cJSON_GetObjectItem(want, "tokens")), "%s: tokens differ from gpt's", what);
        const int32_t *pids = gpt_result_prompt_tokens(r, &n);
        CHECK(same_ids(pids, n, cJSON_GetObjectItem(want, "prompt_ids")), "%s: prompt ids differ", what);
        CHECK(!strcmp(gpt_result_stop_reason(r), cJSON_GetObjectItem(want, "stop_reason")->valuestring),
              "%s: stop %s, gpt's %s", what, gpt_result_stop_reason(r),
              cJSON_GetObjectItem(want, "stop_reason")->valuestring);
        // below 2^53 a number, past it a string of digits
        CHECK(cJSON_IsNumber(seed) ? (double)gpt_result_seed(r) == seed->valuedouble
                                   : cJSON_IsString(seed) && strtoull(seed->valuestring, NULL, 10) == gpt_result_seed(r),
              "%s: seed %llu", what, (unsigned long long)gpt_result_seed(r));
        const cJSON *wlp = cJSON_GetObjectItem(want, "logprobs");
        const char *lp = gpt_result_logprobs_json(r);
        cJSON *got = lp ? cJSON_Parse(lp) : NULL;
        CHECK(wlp ? got && cJSON_Compare(got, wlp, 1) : !lp, "%s: logprobs %s", what, lp ? lp : "(none)");
        cJSON_Delete(got);
        int echo = 0;
        for (int i = 0; kv[i]; i += 2) echo |= !strcmp(kv[i], "echo");
        size_t skip = echo ? strlen(prompt) : 0;  // the demo prompts are ASCII
        CHECK(p.len + skip == len && !memcmp(p.text ? p.text : "", text + skip, p.len),
              "%s: the streamed pieces are not the text", what);
    }
    free(p.text);
    gpt_result_free(r);
    cJSON_Delete(want);
    gpt_settings_free(s);
}

static void test_generate_same_bits(void) {
    check_same("seed 1, temp 0.8", PROMPT, (const char *[]){"seed", "1", "max_tokens", "16", "temperature", "0.8", NULL},
               (const char *[]){"-p", PROMPT, "-s", "1", "-n", "16", "--temp", "0.8", NULL});
    check_same("greedy", PROMPT, (const char *[]){"max_tokens", "20", "temperature", "0", "seed", "7", NULL},
               (const char *[]){"-p", PROMPT, "-s", "7", "-n", "20", "--temp", "0", NULL});
    check_same("filters and penalties", PROMPT,
               (const char *[]){"seed", "5", "max_tokens", "24", "top_k", "40", "top_p", "0.9", "min_p", "0.02",
                                "repeat_penalty", "1.2", "presence_penalty", "0.5", "frequency_penalty", "-0.5",
                                "logit_bias", "{\"13\": -100, \"262\": 3.5}", NULL},
               (const char *[]){"-p", PROMPT, "-s", "5", "-n", "24", "--top-k", "40", "--top-p", "0.9", "--min-p",
                                "0.02", "--repeat-penalty", "1.2", "--presence-penalty", "0.5", "--frequency-penalty",
                                "-0.5", "--logit-bias", "13=-100", "--logit-bias", "262=3.5", NULL});
    check_same("stop strings", PROMPT, (const char *[]){"seed", "3", "max_tokens", "40", "stop", "[\"the\", \",\"]", NULL},
               (const char *[]){"-p", PROMPT, "-s", "3", "-n", "40", "--stop", "the", "--stop", ",", NULL});
    check_same("echo and logprobs", PROMPT,
               (const char *[]){"seed", "2", "max_tokens", "8", "echo", "true", "logprobs", "3", NULL},
               (const char *[]){"-p", PROMPT, "-s", "2", "-n", "8", "--echo", "--logprobs", "3", NULL});
    check_same("logprobs", "", (const char *[]){"seed", "9", "max_tokens", "6", "logprobs", "0", NULL},
               (const char *[]){"-p", "", "-s", "9", "-n", "6", "--logprobs", "0", NULL});
    check_same("regex", PROMPT, (const char *[]){"seed", "4", "max_tokens", "30", "regex", "\" [a-z]+( [a-z]+)*\\\\.\"", NULL},
               (const char *[]){"-p", PROMPT, "-s", "4", "-n", "30", "--regex", " [a-z]+( [a-z]+)*\\.", NULL});
    check_same("json_schema", PROMPT,
               (const char *[]){"seed", "6", "max_tokens", "40", "json_schema",
                                "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, "
                                "\"required\": [\"a\"]}", NULL},
               (const char *[]){"-p", PROMPT, "-s", "6", "-n", "40", "--json-schema",
                                "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}, "
                                "\"required\": [\"a\"]}", NULL});
    // past the context: stopped there, or shifted (the demo model's context is 256)
    check_same("context", PROMPT, (const char *[]){"seed", "12", "max_tokens", "300", "ignore_eos", "true", NULL},
               (const char *[]){"-p", PROMPT, "-s", "12", "-n", "300", "--ignore-eos", NULL});
    check_same("context_shift", PROMPT,
               (const char *[]){"seed", "12", "max_tokens", "300", "ignore_eos", "true", "context_shift", "true", "keep",
                                "3", NULL},
               (const char *[]){"-p", PROMPT, "-s", "12", "-n", "300", "--ignore-eos", "--context-shift", "--keep", "3",
                                NULL});
    check_same("no tokens", PROMPT, (const char *[]){"seed", "1", "max_tokens", "0", NULL},
               (const char *[]){"-p", PROMPT, "-s", "1", "-n", "0", NULL});
    check_same("a big seed as a string", PROMPT,
               (const char *[]){"seed", "\"18446744073709551615\"", "max_tokens", "10", NULL},
               (const char *[]){"-p", PROMPT, "-s", "18446744073709551615", "-n", "10", NULL});
}

// gpt_generate_tokens against gpt --batch --jsonl's {"prompt": [ids]}
// line (ids no text tokenizes to), and on a text's ids against
// gpt_generate of the text; its misuse.
static void test_generate_tokens(void) {
    const int32_t ids[] = {50256, 464, 1, 40, 3290};
    const char *line = "{\"prompt\": [50256, 464, 1, 40, 3290], \"seed\": 3, \"max_tokens\": 8, \"echo\": true, "
                       "\"logprobs\": 2, \"stop\": \" the\"}\n";
    const char *args[] = {"--batch", "--jsonl", "-q", "-m", MODEL, NULL};
    Result out = run_gpt(scratch, line, strlen(line), args);
    cJSON *want = cJSON_Parse(out.out);
    gpt_settings *s = settings_of((const char *[]){"seed", "3", "max_tokens", "8", "echo", "true", "logprobs", "2",
                                                   "stop", "\" the\"", NULL});
    gpt_result *r = NULL;
    gpt_err err;
    CHECK(want && gpt_generate_tokens(model, ids, 5, s, NULL, NULL, &r, &err) == GPT_OK, "%s", err.message);
    if (want && r) {
        size_t n;
        const int32_t *got = gpt_result_tokens(r, &n);
        CHECK(same_ids(got, n, cJSON_GetObjectItem(want, "tokens")), "tokens differ from --batch --jsonl's");
        got = gpt_result_prompt_tokens(r, &n);
        CHECK(same_ids(got, n, cJSON_GetObjectItem(want, "prompt_ids")), "prompt ids");
        CHECK(!strcmp(gpt_result_text(r, NULL), cJSON_GetObjectItem(want, "text")->valuestring), "text [%s]",
              gpt_result_text(r, NULL));
        CHECK(!strcmp(gpt_result_stop_reason(r), cJSON_GetObjectItem(want, "stop_reason")->valuestring), "stop %s",
              gpt_result_stop_reason(r));
        cJSON *lp = cJSON_Parse(gpt_result_logprobs_json(r));
        CHECK(lp && cJSON_Compare(lp, cJSON_GetObjectItem(want, "logprobs"), 1), "logprobs");
        cJSON_Delete(lp);
    }
    gpt_result_free(r);
    cJSON_Delete(want);
    result_free(&out);
    gpt_settings_free(s);
    // a text's ids: the text's run
    int32_t *tids = NULL;
    size_t nt = 0;
    gpt_result *a = NULL, *b = NULL;
    s = settings_of((const char *[]){"seed", "4", "max_tokens", "12", NULL});
    CHECK(gpt_tokenize(model, PROMPT, strlen(PROMPT), &tids, &nt, &err) == GPT_OK &&
              gpt_generate_tokens(model, tids, nt, s, NULL, NULL, &a, &err) == GPT_OK &&
              gpt_generate(model, PROMPT, s, NULL, NULL, &b, &err) == GPT_OK &&
              !strcmp(gpt_result_text(a, NULL), gpt_result_text(b, NULL)),
          "the text's ids: %s", err.message);
    gpt_result_free(a);
    gpt_result_free(b);
    gpt_free(tids);
    // misuse
    int32_t bad[] = {464, 50257};
    CHECK(gpt_generate_tokens(model, bad, 2, s, NULL, NULL, &a, &err) == GPT_ERR_INPUT && !a &&
              strstr(err.message, "element 1 (50257)"),
          "%s", err.message);
    bad[1] = -1;
    CHECK(gpt_generate_tokens(model, bad, 2, s, NULL, NULL, &a, &err) == GPT_ERR_INPUT, "%s", err.message);
    CHECK(gpt_generate_tokens(model, bad, 0, s, NULL, NULL, &a, &err) == GPT_ERR_INPUT &&
              strstr(err.message, "no token ids"),
          "%s", err.message);
    CHECK(gpt_generate_tokens(model, NULL, 2, s, NULL, NULL, &a, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "ids"),
          "%s", err.message);
    CHECK(gpt_generate_tokens(NULL, bad, 1, s, NULL, NULL, &a, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_generate_tokens(model, bad, 1, s, NULL, NULL, NULL, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    gpt_settings_free(s);
}

// gpt_score against gpt --score --json (every log-probability's bits),
// --prepend-eos and --stride; its misuse.
static void check_score(const char *what, const char *text, int prepend_eos, size_t stride) {
    char stride_arg[32];
    snprintf(stride_arg, sizeof stride_arg, "%zu", stride);
    const char *args[12] = {"--score", "--json", "-q", "-m", MODEL, "-p", text};
    int k = 7;
    if (prepend_eos) args[k++] = "--prepend-eos";
    if (stride) args[k++] = "--stride", args[k++] = stride_arg;
    args[k] = NULL;
    Result out = run_gpt(scratch, NULL, 0, args);
    cJSON *want = cJSON_Parse(out.out), *wl = cJSON_GetObjectItem(want, "logprobs");
    int32_t *ids = NULL;
    double *lp = NULL;
    size_t n = 0;
    gpt_err err;
    CHECK(want && gpt_score(model, text, strlen(text), prepend_eos, stride, &ids, &lp, &n, &err) == GPT_OK, "%s: %s",
          what, err.message);
    if (want && ids) {
        CHECK(same_ids(ids, n, cJSON_GetObjectItem(want, "tokens")), "%s: tokens", what);
        int same = cJSON_GetArraySize(wl) == (int)n && cJSON_IsNull(cJSON_GetArrayItem(wl, 0));
        for (size_t i = 1; same && i < n; i++) same = cJSON_GetArrayItem(wl, (int)i)->valuedouble == lp[i - 1];
        CHECK(same, "%s: log-probabilities differ from gpt --score's", what);
    }
    gpt_free(ids);
    gpt_free(lp);
    cJSON_Delete(want);
    result_free(&out);
}

static void test_score(void) {
    check_score("a text", PROMPT " unto Moses", 0, 0);
    check_score("prepend_eos", PROMPT, 1, 0);
    char long_text[4000] = "";
    while (strlen(long_text) + 40 < sizeof long_text) strcat(long_text, "And the LORD spake unto Moses, saying, ");
    check_score("stride", long_text, 0, 100);
    int32_t *ids = NULL;
    double *lp = NULL;
    size_t n = 0;
    gpt_err err;
    CHECK(gpt_score(model, "", 0, 0, 0, &ids, &lp, &n, &err) == GPT_ERR_INPUT && strstr(err.message, "empty") && !ids,
          "%s", err.message);
    CHECK(gpt_score(model, long_text, strlen(long_text), 0, 0, &ids, &lp, &n, &err) == GPT_ERR_INPUT &&
              strstr(err.message, "context holds 256"),
          "%s", err.message);
    CHECK(gpt_score(model, PROMPT, 5, 0, 257, &ids, &lp, &n, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "stride"),
          "%s", err.message);
    CHECK(gpt_score(NULL, PROMPT, 5, 0, 0, &ids, &lp, &n, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_score(model, NULL, 5, 0, 0, &ids, &lp, &n, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_score(model, PROMPT, 5, 0, 0, NULL, &lp, &n, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_score(model, PROMPT, 5, 0, 0, &ids, NULL, &n, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_score(model, PROMPT, 5, 0, 0, &ids, &lp, NULL, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    // one token: nothing to score, no error
    CHECK(gpt_score(model, "And", 3, 0, 0, &ids, &lp, &n, &err) == GPT_OK && n == 1, "%s", err.message);
    gpt_free(ids);
    gpt_free(lp);
}

// gpt_embed against gpt embed's vector (every float's bits), with each
// pooling, raw and of unit length; its misuse.
static void check_embed(const char *text, const char *pooling, int normalize) {
    const char *args[12] = {"embed", "-q", "-m", MODEL, "-p", text};
    int k = 6;
    if (pooling) args[k++] = "--pooling", args[k++] = pooling;
    if (!normalize) args[k++] = "--no-normalize";
    args[k] = NULL;
    Result out = run_gpt(scratch, NULL, 0, args);
    cJSON *want = cJSON_Parse(out.out), *we = cJSON_GetObjectItem(want, "embedding");
    float *v = NULL;
    size_t dim = 0;
    gpt_err err;
    int rc = gpt_embed(model, text, strlen(text), pooling, normalize, &v, &dim, &err);
    CHECK(want && rc == GPT_OK && dim == (size_t)cJSON_GetArraySize(we), "%.20s, %s, normalize %d: %s (gpt embed: %.200s)",
          text, pooling ? pooling : "mean", normalize, err.message, out.out);
    int same = v && dim > 0, unit = 1;
    double norm = 0;
    for (size_t i = 0; same && i < dim; i++) {
        same = (float)cJSON_GetArrayItem(we, (int)i)->valuedouble == v[i];
        norm += (double)v[i] * v[i];
    }
    if (normalize) unit = fabs(norm - 1) < 1e-6;
    CHECK(same && unit, "%.20s, %s, normalize %d: the vector differs from gpt embed's (or |v|^2 %.9g)", text,
          pooling ? pooling : "mean", normalize, norm);
    gpt_free(v);
    cJSON_Delete(want);
    result_free(&out);
}

static void test_embed(void) {
    check_embed(PROMPT, NULL, 1);
    check_embed(PROMPT " unto Moses", "last", 1);
    check_embed("Hello", "mean", 0);
    check_embed(PROMPT, "last", 0);
    float *v = NULL;
    size_t dim = 0;
    gpt_err err;
    char long_text[4000] = "";
    while (strlen(long_text) + 40 < sizeof long_text) strcat(long_text, "And the LORD spake unto Moses, saying, ");
    CHECK(gpt_embed(model, "", 0, NULL, 1, &v, &dim, &err) == GPT_ERR_INPUT && strstr(err.message, "empty") && !v,
          "%s", err.message);
    CHECK(gpt_embed(model, long_text, strlen(long_text), NULL, 1, &v, &dim, &err) == GPT_ERR_INPUT &&
              strstr(err.message, "context holds 256") && !v,
          "%s", err.message);
    CHECK(gpt_embed(model, PROMPT, 5, "max", 1, &v, &dim, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "pooling"),
          "%s", err.message);
    CHECK(gpt_embed(NULL, PROMPT, 5, NULL, 1, &v, &dim, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_embed(model, NULL, 5, NULL, 1, &v, &dim, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_embed(model, PROMPT, 5, NULL, 1, NULL, &dim, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_embed(model, PROMPT, 5, NULL, 1, &v, NULL, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
}

// gpt_chat against gpt --chat-template T --json, gpt_chat_render against
// gpt --apply-template, per built-in template; the misuse.
static void test_chat(void) {
    const gpt_message msgs[] = {{"system", "You answer from the books."},
                                {"user", "Who spoke unto Moses? <|endoftext|>"},
                                {"assistant", " The LORD."},
                                {"user", "And then?"}};
    const char *json = "[{\"role\": \"system\", \"content\": \"You answer from the books.\"}, "
                       "{\"role\": \"user\", \"content\": \"Who spoke unto Moses? <|endoftext|>\"}, "
                       "{\"role\": \"assistant\", \"content\": \" The LORD.\"}, "
                       "{\"role\": \"user\", \"content\": \"And then?\"}]";
    const char *templates[] = {"gpt2", "transcript", "chatml"};
    gpt_settings *s = settings_of((const char *[]){"seed", "7", "max_tokens", "24", "stop", "\"Moses\"", NULL});
    for (size_t i = 0; i < 3; i++) {
        const char *args[] = {"-m", MODEL, "-q", "--json", "--chat-template", templates[i], "-s", "7", "-n", "24",
                              "--stop", "Moses", NULL};
        Result out = run_gpt(scratch, json, strlen(json), args);
        cJSON *want = cJSON_Parse(out.out);
        gpt_result *r = NULL;
        gpt_err err;
        CHECK(want && gpt_chat(model, templates[i], msgs, 4, s, NULL, NULL, &r, &err) == GPT_OK, "%s: %s [%s]",
              templates[i], err.message, out.err);
        if (want && r) {
            size_t n;
            const int32_t *ids = gpt_result_prompt_tokens(r, &n);
            CHECK(same_ids(ids, n, cJSON_GetObjectItem(want, "prompt_ids")), "%s: the prompt's ids", templates[i]);
            ids = gpt_result_tokens(r, &n);
            CHECK(same_ids(ids, n, cJSON_GetObjectItem(want, "tokens")), "%s: tokens", templates[i]);
            CHECK(!strcmp(gpt_result_text(r, NULL), cJSON_GetObjectItem(want, "text")->valuestring), "%s: text [%s]",
                  templates[i], gpt_result_text(r, NULL));
            CHECK(!strcmp(gpt_result_stop_reason(r), cJSON_GetObjectItem(want, "stop_reason")->valuestring),
                  "%s: stop %s", templates[i], gpt_result_stop_reason(r));
        }
        gpt_result_free(r);
        cJSON_Delete(want);
        result_free(&out);
        const char *apply[] = {"--apply-template", "--chat-template", templates[i], NULL};
        out = run_gpt(scratch, json, strlen(json), apply);
        char *text = NULL;
        size_t len = 0;
        CHECK(gpt_chat_render(templates[i], msgs, 4, 1, &text, &len, &err) == GPT_OK && out.rc == 0 &&
                  len == out.out_len && !memcmp(text, out.out, len),
              "%s: rendered [%s], gpt's [%s]", templates[i], text ? text : err.message, out.out);
        gpt_free(text);
        result_free(&out);
    }
    // misuse
    gpt_result *r = NULL;
    gpt_err err;
    char *text = NULL;
    const gpt_message tool[] = {{"user", "hi"}, {"tool", "x"}}, null_content[] = {{"user", NULL}};
    CHECK(gpt_chat(model, NULL, tool, 2, s, NULL, NULL, &r, &err) == GPT_ERR_INPUT && !r &&
              strstr(err.message, "messages[1].role: \"tool\""),
          "%s", err.message);
    CHECK(gpt_chat(model, NULL, null_content, 1, s, NULL, NULL, &r, &err) == GPT_ERR_ARGUMENT &&
              strstr(err.message, "messages[0].content"),
          "%s", err.message);
    CHECK(gpt_chat(model, NULL, msgs, 0, s, NULL, NULL, &r, &err) == GPT_ERR_INPUT, "%s", err.message);
    CHECK(gpt_chat(model, NULL, NULL, 2, s, NULL, NULL, &r, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_chat(model, "no/such/template.json", msgs, 1, s, NULL, NULL, &r, &err) == GPT_ERR_ARGUMENT &&
              strstr(err.message, "no/such/template.json"),
          "%s", err.message);
    CHECK(gpt_chat(NULL, NULL, msgs, 1, s, NULL, NULL, &r, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_chat(model, NULL, msgs, 1, s, NULL, NULL, NULL, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_chat_render("chatml", tool, 2, 1, &text, NULL, &err) == GPT_ERR_INPUT && !text, "%s", err.message);
    CHECK(gpt_chat_render("chatml", msgs, 1, 1, NULL, NULL, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_chat_render(NULL, msgs, 1, 0, &text, NULL, &err) == GPT_OK && !strcmp(text, "You answer from the books.<|endoftext|>"),
          "the default template: %s", text ? text : err.message);
    gpt_free(text);
    // the settings' 16 stops and the template's: too many
    gpt_settings *many = gpt_settings_new();
    CHECK(gpt_settings_set(many, "stop", "[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"a\",\"b\",\"c\",\"d\","
                                         "\"e\",\"f\",\"g\"]", &err) == GPT_OK, "%s", err.message);
    CHECK(gpt_chat(model, "chatml", msgs, 1, many, NULL, NULL, &r, &err) == GPT_ERR_SETTING && strstr(err.message, "stop"),
          "%s", err.message);
    gpt_settings_free(many);
    gpt_settings_free(s);
}

// A batch of 16 requests (seeds, temperatures, stops, logprobs, echo, a
// regex, two prompts) through the scheduler 4 at a time: each result is the
// single gpt_generate's; a callback that stops its request and a request
// cancelled before the run end "cancelled", the others untouched; misuse.
static int stop_at_2(void *user_data, const char *text, size_t len, int32_t token) {
    (void)text, (void)len, (void)token;
    return ++*(int *)user_data == 2;
}

static void test_batch(void) {
    enum { N = 16 };
    gpt_settings *s[N];
    const char *prompts[N];
    gpt_batch *b = NULL;
    gpt_err err;
    int calls = 0;
    CHECK(gpt_batch_new(model, 4, &b, &err) == GPT_OK && b, "%s", err.message);
    if (!b) return;
    for (int i = 0; i < N; i++) {
        char seed[16], temp[16];
        snprintf(seed, sizeof seed, "%d", 100 + i);
        snprintf(temp, sizeof temp, "%.1f", 0.2 * (i % 8));
        s[i] = settings_of((const char *[]){"seed", seed, "temperature", temp, "max_tokens", i % 3 ? "20" : "33",
                                            i % 4 == 1 ? "stop" : NULL, "[\"the\", \"of\"]", NULL});
        if (i % 5 == 2) gpt_settings_set(s[i], "logprobs", "2", NULL);
        if (i % 6 == 3) gpt_settings_set(s[i], "echo", "true", NULL);
        if (i == 7) gpt_settings_set(s[i], "regex", "\" [a-z]+( [a-z]+)*\\.\"", NULL);
        prompts[i] = i % 2 ? PROMPT : "The king said unto";
        size_t index = 99;
        CHECK(gpt_batch_add(b, prompts[i], s[i], i == 9 ? stop_at_2 : NULL, &calls, &index, &err) == GPT_OK &&
                  index == (size_t)i,
              "add %d: %s", i, err.message);
    }
    CHECK(!gpt_batch_result(b, 0, &err) && err.code == GPT_ERR_ARGUMENT && strstr(err.message, "not ended"), "%s",
          err.message);
    CHECK(gpt_batch_cancel(b, 12, &err) == GPT_OK, "%s", err.message);
    CHECK(gpt_batch_run(b, &err) == GPT_OK, "%s", err.message);
    for (int i = 0; i < N; i++) {
        const gpt_result *got = gpt_batch_result(b, (size_t)i, &err);
        gpt_result *want = NULL;
        CHECK(got && gpt_generate(model, prompts[i], s[i], NULL, NULL, &want, NULL) == GPT_OK, "%d: %s", i,
              err.message);
        if (got && want) {
            size_t ng, nw;
            const int32_t *g = gpt_result_tokens(got, &ng), *w = gpt_result_tokens(want, &nw);
            if (i == 9 || i == 12) {
                CHECK(gpt_result_stop(got) == GPT_STOP_CANCELLED && ng <= nw && !memcmp(g, w, ng * sizeof *g) &&
                          ng == (i == 9 ? 2u : 0u),
                      "%d: cancelled, %zu tokens, %s", i, ng, gpt_result_stop_reason(got));
            } else {
                const char *lg = gpt_result_logprobs_json(got), *lw = gpt_result_logprobs_json(want);
                CHECK(ng == nw && !memcmp(g, w, ng * sizeof *g) &&
                          !strcmp(gpt_result_text(got, NULL), gpt_result_text(want, NULL)) &&
                          gpt_result_stop(got) == gpt_result_stop(want) && gpt_result_seed(got) == gpt_result_seed(want) &&
                          (lg ? lw && !strcmp(lg, lw) : !lw),
                      "%d: not the single run's result: [%s] [%s]", i, gpt_result_text(got, NULL),
                      gpt_result_text(want, NULL));
            }
        }
        gpt_result_free(want);
        gpt_settings_free(s[i]);
    }
    // misuse
    size_t index;
    char long_prompt[2000];
    memset(long_prompt, 0, sizeof long_prompt);
    for (size_t i = 0; i + 3 < sizeof long_prompt; i += 2) memcpy(long_prompt + i, " a", 2);
    CHECK(gpt_batch_add(b, long_prompt, NULL, NULL, NULL, &index, &err) == GPT_ERR_INPUT && strstr(err.message, "context"),
          "%s", err.message);
    CHECK(gpt_batch_add(b, NULL, NULL, NULL, NULL, &index, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_batch_add(NULL, "x", NULL, NULL, NULL, &index, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(!gpt_batch_result(b, N, &err) && err.code == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_batch_cancel(b, N, &err) == GPT_ERR_ARGUMENT && gpt_batch_cancel(NULL, 0, NULL) == GPT_ERR_ARGUMENT,
          "cancel");
    CHECK(gpt_batch_run(NULL, &err) == GPT_ERR_ARGUMENT, "run NULL");
    // a second run after more requests
    CHECK(gpt_batch_add(b, PROMPT, NULL, NULL, NULL, &index, &err) == GPT_OK && index == N &&
              gpt_batch_run(b, &err) == GPT_OK && gpt_batch_result(b, N, &err),
          "a second run: %s", err.message);
    gpt_batch_free(b);
    gpt_batch_free(NULL);
    gpt_batch *bad = (gpt_batch *)&err;
    CHECK(gpt_batch_new(model, 0, &bad, &err) == GPT_ERR_ARGUMENT && !bad && strstr(err.message, "parallel"), "%s",
          err.message);
    CHECK(gpt_batch_new(NULL, 4, &bad, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_batch_new(model, 4, NULL, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
}

// gpt_choose against gpt --choice --json: each choice's sum, mean, mean per
// byte, tokens and bytes, bit for bit, and the best; the misuse.
static void test_choose(void) {
    const char *choices[] = {" that", ", when", "x", " unto Moses", ""};
    const char *args[] = {"-m", MODEL, "-q", "--json", "-p", PROMPT, "--choice", choices[0], "--choice", choices[1],
                          "--choice", choices[2], "--choice", choices[3], NULL};
    Result out = run_gpt(scratch, NULL, 0, args);
    cJSON *want = cJSON_Parse(out.out), *list = cJSON_GetObjectItem(want, "choices");
    gpt_choice_score sc[4];
    size_t best = 99;
    gpt_err err;
    CHECK(want && gpt_choose(model, PROMPT, choices, 4, sc, &best, &err) == GPT_OK, "%s", err.message);
    for (int i = 0; want && i < 4; i++) {
        const cJSON *c = cJSON_GetArrayItem(list, i);
        CHECK(sc[i].sum == cJSON_GetObjectItem(c, "sum")->valuedouble &&
                  sc[i].mean == cJSON_GetObjectItem(c, "mean")->valuedouble &&
                  sc[i].mean_per_byte == cJSON_GetObjectItem(c, "mean_per_byte")->valuedouble &&
                  (double)sc[i].bytes == cJSON_GetObjectItem(c, "bytes")->valuedouble &&
                  (int)sc[i].tokens == cJSON_GetArraySize(cJSON_GetObjectItem(c, "tokens")),
              "choice %d: %.17g, gpt's %.17g", i, sc[i].sum, cJSON_GetObjectItem(c, "sum")->valuedouble);
    }
    CHECK(want && (double)best == cJSON_GetObjectItem(want, "best")->valuedouble, "best %zu", best);
    cJSON_Delete(want);
    result_free(&out);
    CHECK(gpt_choose(model, PROMPT, choices, 5, sc, &best, &err) == GPT_ERR_INPUT && strstr(err.message, "choices[4]"),
          "an empty choice: %s", err.message);
    CHECK(gpt_choose(model, PROMPT, choices, 0, sc, &best, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_choose(model, PROMPT, NULL, 2, sc, &best, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_choose(model, PROMPT, choices, 2, NULL, &best, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_choose(model, NULL, choices, 2, sc, &best, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    CHECK(gpt_choose(NULL, PROMPT, choices, 2, sc, &best, &err) == GPT_ERR_ARGUMENT, "%s", err.message);
    const char *with_null[] = {"a", NULL};
    CHECK(gpt_choose(model, PROMPT, with_null, 2, sc, NULL, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "choices[1]"),
          "%s", err.message);
    CHECK(gpt_choose(model, PROMPT, choices, 1, sc, NULL, &err) == GPT_OK, "no best asked: %s", err.message);
}

// A callback that stops after 3 calls: the tokens are the full run's first
// ones, the text is the pieces, the stop reason "cancelled".
static void test_callback_stops(void) {
    gpt_settings *s = settings_of((const char *[]){"seed", "11", "max_tokens", "30", NULL});
    gpt_result *full = NULL, *cut = NULL;
    gpt_err err;
    Pieces p = {.stop_after = 3};
    CHECK(gpt_generate(model, PROMPT, s, NULL, NULL, &full, &err) == GPT_OK, "%s", err.message);
    CHECK(gpt_generate(model, PROMPT, s, collect, &p, &cut, &err) == GPT_OK, "%s", err.message);
    if (full && cut) {
        size_t nf, nc, len;
        const int32_t *f = gpt_result_tokens(full, &nf), *c = gpt_result_tokens(cut, &nc);
        CHECK(nc == 3 && nf > 3 && !memcmp(f, c, nc * sizeof *c), "cancelled: %zu tokens", nc);
        CHECK(gpt_result_stop(cut) == GPT_STOP_CANCELLED && !strcmp(gpt_result_stop_reason(cut), "cancelled"),
              "stop %s", gpt_result_stop_reason(cut));
        const char *t = gpt_result_text(cut, &len);
        CHECK(p.calls == 4 && len == p.len && !memcmp(t, p.text, len), "the pieces (%zu calls) are the text", p.calls);
        CHECK(!strncmp(gpt_result_text(full, NULL), t, len), "the cut text starts the full one");
    }
    free(p.text);
    gpt_result_free(full);
    gpt_result_free(cut);
    gpt_settings_free(s);
}

// Four threads generating on one model at once: each the single run's.
typedef struct {
    const gpt_settings *s;
    gpt_result *r;
    int rc;
} Job;

static void *job_run(void *arg) {
    Job *j = arg;
    j->rc = gpt_generate(model, PROMPT, j->s, NULL, NULL, &j->r, NULL);
    return NULL;
}

static void test_threads(void) {
    gpt_settings *s[4];
    Job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        char seed[16];
        snprintf(seed, sizeof seed, "%d", 20 + i);
        s[i] = settings_of((const char *[]){"seed", seed, "max_tokens", "24", NULL});
        jobs[i] = (Job){.s = s[i]};
    }
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, job_run, &jobs[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) {
        gpt_result *alone = NULL;
        int rc = gpt_generate(model, PROMPT, s[i], NULL, NULL, &alone, NULL);
        size_t na = 0, nt = 0;
        const int32_t *a = alone ? gpt_result_tokens(alone, &na) : NULL;
        const int32_t *b = jobs[i].r ? gpt_result_tokens(jobs[i].r, &nt) : NULL;
        CHECK(rc == GPT_OK && jobs[i].rc == GPT_OK && na == nt && na && !memcmp(a, b, na * sizeof *a) &&
                  !strcmp(gpt_result_text(alone, NULL), gpt_result_text(jobs[i].r, NULL)),
              "thread %d: not the single run's result", i);
        gpt_result_free(alone);
        gpt_result_free(jobs[i].r);
        gpt_settings_free(s[i]);
    }
}

static void test_tokenize(void) {
    const char *text = "Hello, world: caf\xc3\xa9 <|endoftext|>  12345\n\xff";
    const char *args[] = {"--tokenize", "-m", MODEL, "--json", "-p", text, NULL};
    Result r = run_gpt(scratch, NULL, 0, args);
    cJSON *want = cJSON_Parse(r.out);
    int32_t *ids = NULL;
    size_t n = 0, len = 0;
    char *back = NULL;
    gpt_err err;
    CHECK(gpt_tokenize(model, text, strlen(text), &ids, &n, &err) == GPT_OK, "%s", err.message);
    CHECK(same_ids(ids, n, want), "gpt_tokenize is not gpt --tokenize: %s", r.out);
    CHECK(gpt_detokenize(model, ids, n, &back, &len, &err) == GPT_OK && len == strlen(text) && !memcmp(back, text, len),
          "gpt_detokenize does not give the bytes back");
    gpt_free(back);
    gpt_free(ids);
    // empty
    CHECK(gpt_tokenize(model, NULL, 0, &ids, &n, &err) == GPT_OK && n == 0, "empty text: %s", err.message);
    gpt_free(ids);
    CHECK(gpt_detokenize(model, NULL, 0, &back, NULL, &err) == GPT_OK && back && !*back, "no ids: %s", err.message);
    gpt_free(back);
    // an id past the vocabulary
    int32_t bad[2] = {50, (int32_t)gpt_model_vocab(model)};
    CHECK(gpt_detokenize(model, bad, 2, &back, &len, &err) == GPT_ERR_INPUT && err.code == GPT_ERR_INPUT &&
              strstr(err.message, "50257") && !back,
          "a bad id: %s", err.message);
    // NULLs
    CHECK(gpt_tokenize(NULL, "a", 1, &ids, &n, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "model"), "%s",
          err.message);
    CHECK(gpt_tokenize(model, NULL, 3, &ids, &n, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "text"), "%s",
          err.message);
    CHECK(gpt_tokenize(model, "a", 1, NULL, &n, NULL) == GPT_ERR_ARGUMENT, "ids NULL");
    CHECK(gpt_tokenize(model, "a", 1, &ids, NULL, NULL) == GPT_ERR_ARGUMENT, "n NULL");
    CHECK(gpt_detokenize(NULL, bad, 1, &back, &len, &err) == GPT_ERR_ARGUMENT, "model NULL");
    CHECK(gpt_detokenize(model, NULL, 1, &back, &len, &err) == GPT_ERR_ARGUMENT, "ids NULL");
    CHECK(gpt_detokenize(model, bad, 1, NULL, &len, &err) == GPT_ERR_ARGUMENT, "text NULL");
    cJSON_Delete(want);
    result_free(&r);
}

// gpt_settings_set(s, name, value) refused with code and a message holding
// `names`.
static void check_refused(gpt_settings *s, const char *name, const char *value, int code, const char *names) {
    gpt_err err;
    int rc = gpt_settings_set(s, name, value, &err);
    CHECK(rc == code && err.code == code && strstr(err.message, names) && !strchr(err.message, '\n'),
          "%s = %s: code %d (%s), message [%s]", name ? name : "NULL", value ? value : "NULL", rc, gpt_status_name(rc),
          err.message);
    CHECK(gpt_settings_set(s, name, value, NULL) == code, "the code alone, without an err");
}

static void test_settings(void) {
    gpt_settings *s = gpt_settings_new();
    gpt_err err;
    check_refused(s, "temp", "0.7", GPT_ERR_SETTING, "\"temp\" is no setting");
    check_refused(s, "json_object", "true", GPT_ERR_SETTING, "json_object");  // the command line's only
    check_refused(s, "temperature", "-1", GPT_ERR_SETTING, "temperature must be a number >= 0");
    check_refused(s, "temperature", "0.7x", GPT_ERR_SETTING, "temperature");
    check_refused(s, "temperature", "", GPT_ERR_SETTING, "temperature");
    check_refused(s, "temperature", "1, \"top_k\": 5", GPT_ERR_SETTING, "temperature");
    check_refused(s, "temperature", "1} ", GPT_ERR_SETTING, "temperature");
    check_refused(s, "temperature", "\"0.7\"", GPT_ERR_SETTING, "temperature");
    check_refused(s, "top_p", "0", GPT_ERR_SETTING, "top_p must be a number in (0, 1]");
    check_refused(s, "top_k", "1.5", GPT_ERR_SETTING, "top_k must be an integer");
    check_refused(s, "max_tokens", "-3", GPT_ERR_SETTING, "max_tokens");
    check_refused(s, "seed", "1.5", GPT_ERR_SETTING, "seed must be");
    check_refused(s, "seed", "9007199254740993", GPT_ERR_SETTING, "seed must be");
    check_refused(s, "logit_bias", "{\"x\": 1}", GPT_ERR_SETTING, "logit_bias");
    check_refused(s, "logit_bias", "{\"5\": 101}", GPT_ERR_SETTING, "logit_bias");
    check_refused(s, "stop", "[\"\"]", GPT_ERR_SETTING, "stop");
    check_refused(s, "stop", "3", GPT_ERR_SETTING, "stop");
    check_refused(s, "echo", "1", GPT_ERR_SETTING, "echo must be true or false");
    check_refused(s, "logprobs", "21", GPT_ERR_SETTING, "logprobs");
    check_refused(s, "n", "2", GPT_ERR_SETTING, "n must be 1");
    check_refused(s, "regex", "\"(\"", GPT_ERR_SETTING, "regex");
    check_refused(s, "grammar", "\"root ::= [\"", GPT_ERR_SETTING, "grammar");
    check_refused(s, "json_schema", "[1]", GPT_ERR_SETTING, "json_schema");
    check_refused(s, "response_format", "{\"type\": \"yaml\"}", GPT_ERR_SETTING, "response_format");
    check_refused(NULL, "temperature", "1", GPT_ERR_ARGUMENT, "settings");
    check_refused(s, NULL, "1", GPT_ERR_ARGUMENT, "name");
    check_refused(s, "temperature", NULL, GPT_ERR_ARGUMENT, "json_value");
    // two grammars
    CHECK(gpt_settings_set(s, "regex", "\"[0-9]+\"", &err) == GPT_OK, "%s", err.message);
    check_refused(s, "grammar", "\"root ::= [a-z]\"", GPT_ERR_SETTING, "exclude each other");
    gpt_settings_free(s);

    // a refused value leaves the earlier one: greedy stays greedy, the stops stay
    s = settings_of((const char *[]){"temperature", "0", "max_tokens", "12", "seed", "1", "stop", "\"xyzzy\"", NULL});
    check_refused(s, "temperature", "-2", GPT_ERR_SETTING, "temperature");
    check_refused(s, "stop", "[\"ok\", 5]", GPT_ERR_SETTING, "stop");
    check_refused(s, "logit_bias", "{\"5\": 1, \"5\": 2}", GPT_ERR_SETTING, "logit_bias");
    gpt_settings *greedy = settings_of((const char *[]){"temperature", "0", "max_tokens", "12", "seed", "2", NULL});
    gpt_result *a = NULL, *b = NULL;
    CHECK(gpt_generate(model, PROMPT, s, NULL, NULL, &a, &err) == GPT_OK, "%s", err.message);
    CHECK(gpt_generate(model, PROMPT, greedy, NULL, NULL, &b, &err) == GPT_OK, "%s", err.message);
    CHECK(a && b && !strcmp(gpt_result_text(a, NULL), gpt_result_text(b, NULL)), "a refused value changed the settings");
    gpt_result_free(a);
    gpt_result_free(b);
    gpt_settings_free(greedy);
    gpt_settings_free(s);
    // settings reused by many generations give the same result each time
    s = settings_of((const char *[]){"seed", "8", "max_tokens", "10", "stop", "[\"q\"]", NULL});
    CHECK(gpt_generate(model, PROMPT, s, NULL, NULL, &a, NULL) == GPT_OK &&
              gpt_generate(model, PROMPT, s, NULL, NULL, &b, NULL) == GPT_OK &&
              !strcmp(gpt_result_text(a, NULL), gpt_result_text(b, NULL)),
          "the same settings twice");
    gpt_result_free(a);
    gpt_result_free(b);
    gpt_settings_free(s);
}

static void test_generate_misuse(void) {
    gpt_err err;
    gpt_result *r = (gpt_result *)&err;  // set to NULL on failure
    gpt_settings *s = settings_of((const char *[]){"max_tokens", "4", NULL});
    CHECK(gpt_generate(NULL, PROMPT, s, NULL, NULL, &r, &err) == GPT_ERR_ARGUMENT && !r && strstr(err.message, "model"),
          "%s", err.message);
    CHECK(gpt_generate(model, NULL, s, NULL, NULL, &r, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "prompt"),
          "%s", err.message);
    CHECK(gpt_generate(model, PROMPT, s, NULL, NULL, NULL, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "out"),
          "%s", err.message);
    CHECK(gpt_generate(model, PROMPT, s, NULL, NULL, NULL, NULL) == GPT_ERR_ARGUMENT, "no err");
    // keep without context_shift
    gpt_settings *k = settings_of((const char *[]){"keep", "2", NULL});
    CHECK(gpt_generate(model, PROMPT, k, NULL, NULL, &r, &err) == GPT_ERR_SETTING && strstr(err.message, "keep") &&
              strstr(err.message, "context_shift"),
          "%s", err.message);
    gpt_settings_free(k);
    // a token id past the vocabulary in logit_bias: refused when the run starts
    k = settings_of((const char *[]){"logit_bias", "{\"60000\": 1}", NULL});
    CHECK(gpt_generate(model, PROMPT, k, NULL, NULL, &r, &err) == GPT_ERR_INPUT && strstr(err.message, "60000"), "%s",
          err.message);
    gpt_settings_free(k);
    // a prompt past the context
    size_t ctx = gpt_model_context(model), cap = 4 * ctx + 16;
    char *long_prompt = malloc(cap);
    for (size_t i = 0; i + 2 < cap; i += 2) memcpy(long_prompt + i, " a", 2);
    long_prompt[cap - 2 - (cap % 2)] = '\0';
    CHECK(gpt_generate(model, long_prompt, s, NULL, NULL, &r, &err) == GPT_ERR_INPUT && !r &&
              strstr(err.message, "context"),
          "%s", err.message);
    free(long_prompt);
    // NULL settings: the defaults (256 tokens at temperature 1, a seed drawn)
    CHECK(gpt_generate(model, "", NULL, NULL, NULL, &r, &err) == GPT_OK && r, "%s", err.message);
    size_t n;
    gpt_result_tokens(r, &n);
    CHECK(n > 0 && n <= 256 && gpt_result_seed(r) < (1ull << 53), "defaults: %zu tokens", n);
    gpt_result_free(r);
    gpt_settings_free(s);
    // the result's accessors on NULL
    size_t len = 7;
    CHECK(!gpt_result_text(NULL, &len) && len == 0, "text of NULL");
    CHECK(!gpt_result_tokens(NULL, &len) && !gpt_result_prompt_tokens(NULL, &len) && len == 0, "tokens of NULL");
    CHECK(gpt_result_stop(NULL) == 0 && !strcmp(gpt_result_stop_reason(NULL), "") && gpt_result_seed(NULL) == 0 &&
              !gpt_result_logprobs_json(NULL),
          "the rest of NULL");
    gpt_result_free(NULL);
    gpt_settings_free(NULL);
    gpt_model_close(NULL);
    gpt_free(NULL);
}

static void test_open(void) {
    gpt_err err;
    gpt_model *m = (gpt_model *)&err;
    gpt_model_options o = gpt_model_options_default();
    CHECK(!o.dtype && !o.n_threads && !o.kv_type && !o.tokenizer && !o.tune, "the defaults are zeros");
    CHECK(gpt_model_open(NULL, NULL, &m, &err) == GPT_ERR_ARGUMENT && !m && strstr(err.message, "path"), "%s",
          err.message);
    CHECK(gpt_model_open(MODEL, NULL, NULL, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "out"), "%s", err.message);
    CHECK(gpt_model_open("no/such/model.bin", NULL, &m, &err) == GPT_ERR_MODEL && !m &&
              strstr(err.message, "no/such/model.bin") && err.code == GPT_ERR_MODEL,
          "%s", err.message);
    CHECK(gpt_model_open("no/such/model.bin", NULL, &m, NULL) == GPT_ERR_MODEL, "no err");
    o.dtype = "f12";
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "dtype \"f12\""), "%s",
          err.message);
    o = gpt_model_options_default();
    o.kv_type = "q8";
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "kv_type"), "%s", err.message);
    o = gpt_model_options_default();
    o.n_threads = -1;
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "n_threads"), "%s",
          err.message);
    o = gpt_model_options_default();
    o.tune = "maybe";
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "tune"), "%s", err.message);
    o = gpt_model_options_default();
    o.tokenizer = "no/such/tokenizer";
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_MODEL && strstr(err.message, "no/such/tokenizer"), "%s",
          err.message);
    // f16 weights and an f16 cache: gpt --dtype f16 --kv-type f16's bits
    o = gpt_model_options_default();
    o.dtype = "f16";
    o.kv_type = "f16";
    o.n_threads = 1;
    o.tune = "off";
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_OK && m, "%s", err.message);
    if (m) {
        gpt_model *keep = model;
        model = m;
        check_same("f16", PROMPT, (const char *[]){"seed", "3", "max_tokens", "12", NULL},
                   (const char *[]){"--dtype", "f16", "--kv-type", "f16", "-p", PROMPT, "-s", "3", "-n", "12", NULL});
        model = keep;
        gpt_model_close(m);
    }
}

// Every format -m takes: the test checkpoints as a Hugging Face directory,
// its model.safetensors, an llm.c checkpoint (the tokenizer beside it or
// the shipped GPT-2 one), each the command's bits.
static void test_formats(void) {
    const char *paths[] = {ckpt("tiny"), ckpt("tiny/model.safetensors"), ckpt("tiny-llmc.bin"), ckpt("tiny-f16")};
    gpt_model_options o = gpt_model_options_default();
    o.n_threads = 2;
    o.tune = "off";
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        gpt_model *m = NULL;
        gpt_err err;
        CHECK(gpt_model_open(paths[i], &o, &m, &err) == GPT_OK, "%s: %s", paths[i], err.message);
        if (!m) continue;
        gpt_model *keep = model;
        model = m;
        model_path = paths[i];
        check_same(paths[i], PROMPT, (const char *[]){"seed", "5", "max_tokens", "10", "temperature", "0.9", NULL},
                   (const char *[]){"-p", PROMPT, "-s", "5", "-n", "10", "--temp", "0.9", NULL});
        model = keep;
        model_path = MODEL;
        gpt_model_close(m);
    }
}

// ---------------------------------------------------------------------------
// adapters (gpt_model_options.lora): written here for the demo model (8
// layers, C 128, F 512), a llama.cpp GGUF LoRA file and a PEFT directory

static void put_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void put_u64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }
static void put_str(FILE *f, const char *s) {
    put_u64(f, strlen(s));
    fwrite(s, 1, strlen(s), f);
}
// n float32 values from seed, in [-0.25, 0.25)
static void put_values(FILE *f, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = (float)(seed >> 8) / (float)(1u << 24) * 0.5f - 0.25f;
        fwrite(&v, 4, 1, f);
    }
}

// The GGUF adapter: blk.0.attn_qkv and blk.7.ffn_down at rank 4, alpha 8;
// lora_a ne [in, 4], lora_b ne [4, out] (ggml's order), F32.
static void write_gguf_adapter(const char *path) {
    static const struct {
        const char *name;
        uint64_t ne0, ne1;
    } T[] = {{"blk.0.attn_qkv.weight.lora_a", 128, 4}, {"blk.0.attn_qkv.weight.lora_b", 4, 384},
             {"blk.7.ffn_down.weight.lora_a", 512, 4}, {"blk.7.ffn_down.weight.lora_b", 4, 128}};
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite("GGUF", 1, 4, f);
    put_u32(f, 3);
    put_u64(f, 4);
    put_u64(f, 4);
    const char *strs[][2] = {{"general.architecture", "gpt2"}, {"general.type", "adapter"}, {"adapter.type", "lora"}};
    for (int i = 0; i < 3; i++) {
        put_str(f, strs[i][0]);
        put_u32(f, 8);  // string
        put_str(f, strs[i][1]);
    }
    put_str(f, "adapter.lora.alpha");
    put_u32(f, 6);  // float32
    float alpha = 8;
    fwrite(&alpha, 4, 1, f);
    uint64_t off = 0;
    for (int i = 0; i < 4; i++) {
        put_str(f, T[i].name);
        put_u32(f, 2);
        put_u64(f, T[i].ne0);
        put_u64(f, T[i].ne1);
        put_u32(f, 0);  // F32
        put_u64(f, off);
        off += (T[i].ne0 * T[i].ne1 * 4 + 31) / 32 * 32;  // sizes here are multiples of 32
    }
    while (ftell(f) % 32) fputc(0, f);
    for (int i = 0; i < 4; i++) put_values(f, T[i].ne0 * T[i].ne1, 7u + (uint32_t)i);
    fclose(f);
}

// The PEFT adapter: every mlp.c_fc at rank 2, lora_alpha 3.
static void write_peft_adapter(const char *dir) {
    char path[512], header[8192];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fputs("{\"peft_type\": \"LORA\", \"r\": 2, \"lora_alpha\": 3, \"target_modules\": [\"c_fc\"]}\n", f);
    fclose(f);
    size_t n = 0, off = 0, a = 2 * 128 * 4, b = 512 * 2 * 4;
    n += (size_t)snprintf(header + n, sizeof header - n, "{");
    for (int l = 0; l < 8; l++) {
        n += (size_t)snprintf(header + n, sizeof header - n,
                              "%s\"base_model.model.transformer.h.%d.mlp.c_fc.lora_A.weight\": {\"dtype\": \"F32\", "
                              "\"shape\": [2, 128], \"data_offsets\": [%zu, %zu]}, "
                              "\"base_model.model.transformer.h.%d.mlp.c_fc.lora_B.weight\": {\"dtype\": \"F32\", "
                              "\"shape\": [512, 2], \"data_offsets\": [%zu, %zu]}",
                              l ? ", " : "", l, off, off + a, l, off + a, off + a + b);
        off += a + b;
    }
    n += (size_t)snprintf(header + n, sizeof header - n, "}");
    while (n % 8) header[n++] = ' ';
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    if (!(f = fopen(path, "wb"))) return;
    put_u64(f, n);
    fwrite(header, 1, n, f);
    for (int l = 0; l < 8; l++) {
        put_values(f, 2 * 128, 100u + (uint32_t)l);
        put_values(f, 512 * 2, 200u + (uint32_t)l);
    }
    fclose(f);
}

// gpt_model_options.lora: the command's bits with the same --lora; misuse
// refused by field; a broken adapter a model error naming its file.
static void test_lora(void) {
    char gguf[256], peft[256], peft_arg[300];
    snprintf(gguf, sizeof gguf, "%s/adapter.gguf", scratch);
    snprintf(peft, sizeof peft, "%s/peft", scratch);
    snprintf(peft_arg, sizeof peft_arg, "%s:-0.5", peft);
    mkdir(peft, 0700);
    write_gguf_adapter(gguf);
    write_peft_adapter(peft);
    gpt_lora lora[2] = {{gguf, 1.0}, {peft, -0.5}};
    gpt_model_options o = gpt_model_options_default();
    o.n_threads = 2;
    o.tune = "off";
    o.lora = lora;
    o.n_lora = 2;
    gpt_model *m = NULL;
    gpt_err err;
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_OK, "lora: %s", err.message);
    if (m) {
        gpt_model *keep = model;
        model = m;
        check_same("lora", PROMPT, (const char *[]){"seed", "5", "max_tokens", "10", "logprobs", "2", NULL},
                   (const char *[]){"--lora", gguf, "--lora", peft_arg, "-p", PROMPT, "-s", "5", "-n", "10",
                                    "--logprobs", "2", NULL});
        // and the adapters change the run: not the base's bits
        cJSON *base = gpt_json((const char *[]){"-p", PROMPT, "--temp", "0", "-n", "10", "--logprobs", "1", NULL});
        cJSON *with = gpt_json((const char *[]){"--lora", gguf, "--lora", peft_arg, "-p", PROMPT, "--temp", "0", "-n",
                                                "10", "--logprobs", "1", NULL});
        CHECK(base && with && !cJSON_Compare(cJSON_GetObjectItem(base, "logprobs"), cJSON_GetObjectItem(with, "logprobs"), 1),
              "lora: the adapters leave the base's log-probabilities");
        cJSON_Delete(base);
        cJSON_Delete(with);
        model = keep;
        gpt_model_close(m);
    }
    o.n_lora = 17;
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "n_lora") && !m, "%s",
          err.message);
    o.n_lora = 1;
    o.lora = NULL;
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "lora") && !m, "%s",
          err.message);
    gpt_lora bad[1] = {{NULL, 1}};
    o.lora = bad;
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "lora[0]") && !m, "%s",
          err.message);
    bad[0] = (gpt_lora){gguf, 1.0 / 0.0};
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_ARGUMENT && strstr(err.message, "scale") && !m, "%s",
          err.message);
    bad[0] = (gpt_lora){MODEL, 1};  // a model, not an adapter
    CHECK(gpt_model_open(MODEL, &o, &m, &err) == GPT_ERR_MODEL && strstr(err.message, MODEL) && !m, "%s", err.message);
}

static void test_versions(void) {
    const char *args[] = {"--version", NULL};
    Result r = run_gpt(scratch, NULL, 0, args);
    CHECK(r.rc == 0 && strstr(r.out, gpt_version()), "gpt --version [%s], gpt_version %s", r.out, gpt_version());
    result_free(&r);
    CHECK(gpt_abi_version() == GPT_ABI_VERSION, "ABI %d", gpt_abi_version());
    const char *names[] = {"ok", "argument", "setting", "model", "input", "memory", "runtime"};
    for (int i = 0; i <= GPT_ERR_RUNTIME; i++) CHECK(!strcmp(gpt_status_name(i), names[i]), "code %d", i);
    CHECK(!strcmp(gpt_status_name(-1), "unknown") && !strcmp(gpt_status_name(99), "unknown"), "unknown codes");
}

int main(void) {
    if (!mkdtemp(scratch)) {
        perror("mkdtemp");
        return 1;
    }
    gpt_err err;
    gpt_model_options o = gpt_model_options_default();
    o.n_threads = 2;
    o.tune = "off";
    if (gpt_model_open(MODEL, &o, &model, &err) != GPT_OK) {
        fprintf(stderr, "test_api: %s\n", err.message);
        return 1;
    }
    test_versions();
    test_open();
    test_formats();
    test_lora();
    test_tokenize();
    test_settings();
    test_generate_same_bits();
    test_generate_tokens();
    test_score();
    test_embed();
    test_chat();
    test_batch();
    test_choose();
    test_callback_stops();
    test_threads();
    test_generate_misuse();
    gpt_model_close(model);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", scratch);
    if (system(cmd) != 0) fprintf(stderr, "test_api: could not remove %s\n", scratch);
    return check_exit("test_api");
}

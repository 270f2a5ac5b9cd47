/*
 * test_request.c - the rules of a request's settings and JSON, without a
 * process or a socket (src/front/settings.c, src/front/request.c): what
 * docs/usage.md's tables and OpenAI's API say each field takes, each value
 * read from JSON and from argv, in milliseconds.
 *
 * The expectations are the documented ones: the ranges of the table of
 * settings (docs/usage.md, "The generation settings"), OpenAI's shapes of
 * stop, logit_bias and response_format, the seed's exactness rule (a JSON
 * number below 2^53, or a string of digits), one constraint per request,
 * and the --keep rules.
 */
#include <cJSON.h>
#include <math.h>

#include "check.h"
#include "front/front.h"

// The body text's settings over the defaults, each field as the readers
// take it: 0 with every field read, else -1 with the first refusal in msg.
static int read_body(const char *text, GenSettings *g, const GenLimits *lim, char *msg, size_t cap) {
    settings_defaults(g);
    cJSON *o = cJSON_Parse(text);
    if (!o) {
        snprintf(msg, cap, "invalid JSON (the test's)");
        return -1;
    }
    int rc = 0;
    size_t member = 0;
    for (const cJSON *f = o->child; f && rc == 0; f = f->next, member++) {
        int known = setting_from_json(g, lim, f, text, strlen(text), member, msg, cap);
        if (known < 0) rc = -1;
        else if (known == 0) {
            snprintf(msg, cap, "not a setting: %s", f->string);
            rc = -1;
        }
    }
    cJSON_Delete(o);
    return rc;
}

static void settings_free(GenSettings *g) {
    cJSON_Delete(g->stop_json);
    grammar_free(g->grammar);
    g->stop_json = NULL;
    g->grammar = NULL;
}

// A body that must be refused with `want` in the message.
static void refused(const char *body, const char *want) {
    GenSettings g;
    GenLimits lim = {.vocab_size = 50257};
    char msg[512] = "";
    int rc = read_body(body, &g, &lim, msg, sizeof msg);
    CHECK(rc == -1 && strstr(msg, want), "%s: rc %d, '%s' (want '%s')", body, rc, msg, want);
    settings_free(&g);
}

static void test_ranges(void) {
    // the table's ends: in, and one past
    const struct {
        const char *ok, *bad, *want;
    } cases[] = {
        {"{\"max_tokens\": 0}", "{\"max_tokens\": -1}", "max_tokens must be an integer in [0, 1000000000]"},
        {"{\"max_tokens\": 1000000000}", "{\"max_tokens\": 1000000001}", "max_tokens must be an integer"},
        {"{\"temperature\": 0}", "{\"temperature\": -0.5}", "temperature must be a number >= 0"},
        {"{\"top_p\": 1}", "{\"top_p\": 0}", "top_p must be a number in (0, 1]"},
        {"{\"min_p\": 1}", "{\"min_p\": 1.01}", "min_p must be a number in [0, 1]"},
        {"{\"repeat_penalty\": 0.01}", "{\"repeat_penalty\": 0}", "repeat_penalty must be a number > 0"},
        {"{\"presence_penalty\": -2}", "{\"presence_penalty\": -2.01}", "presence_penalty must be a number in [-2, 2]"},
        {"{\"frequency_penalty\": 2}", "{\"frequency_penalty\": 2.5}", "frequency_penalty must be a number in [-2, 2]"},
        {"{\"top_k\": 2147483647}", "{\"top_k\": 2147483648}", "top_k must be an integer in [0, 2147483647]"},
        {"{\"n\": 64}", "{\"n\": 65}", "n must be an integer in [1, 64]"},
        {"{\"n\": 1}", "{\"n\": 0}", "n must be an integer in [1, 64]"},
        {"{\"logprobs\": 20}", "{\"logprobs\": 21}", "logprobs must be an integer in [0, 20] (or null)"},
        {"{\"keep\": 5}", "{\"keep\": 1.5}", "keep must be an integer"},
        {"{\"echo\": true}", "{\"echo\": 1}", "echo must be true or false"},
        {"{\"ignore_eos\": false}", "{\"ignore_eos\": \"yes\"}", "ignore_eos must be true or false"},
        {"{\"temperature\": 1e38}", "{\"temperature\": 1e39}", "out of range (a float)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        GenSettings g;
        GenLimits lim = {0};
        char msg[256] = "";
        CHECK(read_body(cases[i].ok, &g, &lim, msg, sizeof msg) == 0, "%s refused: %s", cases[i].ok, msg);
        settings_free(&g);
        refused(cases[i].bad, cases[i].want);
    }
    // the server's --max-tokens below the table's end: the message names it
    GenSettings g;
    GenLimits lim = {.max_tokens_limit = 4096};
    char msg[256] = "";
    int rc = read_body("{\"max_tokens\": 4097}", &g, &lim, msg, sizeof msg);
    CHECK(rc == -1 && strstr(msg, "max_tokens must be an integer in [0, 4096]"), "--max-tokens 4096: %s", msg);
    settings_free(&g);
}

static void test_values_land(void) {
    GenSettings g;
    GenLimits lim = {.vocab_size = 50257};
    char msg[512] = "";
    const char *body = "{\"max_tokens\": 7, \"temperature\": 0.25, \"top_k\": 40, \"top_p\": 0.5, \"min_p\": 0.125, "
                       "\"repeat_penalty\": 1.5, \"presence_penalty\": -1, \"frequency_penalty\": 0.75, "
                       "\"logit_bias\": {\"007\": -100, \"50256\": 5}, \"seed\": 9007199254740991, "
                       "\"stop\": [\"\\n\\n\", \"END\"], \"ignore_eos\": true, \"context_shift\": true, "
                       "\"keep\": 3, \"n\": 4, \"echo\": true, \"logprobs\": 5}";
    CHECK(read_body(body, &g, &lim, msg, sizeof msg) == 0, "all fields: %s", msg);
    const GenParams *p = &g.params;
    const SamplerParams *sp = &p->sampling;
    CHECK(p->max_new == 7 && sp->temperature == 0.25f && sp->top_k == 40 && sp->top_p == 0.5f && sp->min_p == 0.125f,
          "max_new %zu temperature %g top_k %d top_p %g min_p %g", p->max_new, sp->temperature, sp->top_k, sp->top_p,
          sp->min_p);
    CHECK(sp->repeat_penalty == 1.5f && sp->presence_penalty == -1 && sp->frequency_penalty == 0.75f,
          "penalties %g %g %g", sp->repeat_penalty, sp->presence_penalty, sp->frequency_penalty);
    // "007" is token 7, as Python's int() reads it
    CHECK(sp->n_bias == 2 && sp->bias[0].id == 7 && sp->bias[0].bias == -100 && sp->bias[1].id == 50256,
          "logit_bias: %zu entries", sp->n_bias);
    CHECK(sp->seed == 9007199254740991ull && g.seed_given, "seed %llu", (unsigned long long)sp->seed);
    CHECK(p->n_stops == 2 && p->stops == g.stops && !strcmp(p->stops[0], "\n\n") && !strcmp(p->stops[1], "END"),
          "stop: %zu", p->n_stops);
    CHECK(p->ignore_eos && p->context_shift && p->keep == 3 && g.n == 4 && g.echo, "flags");
    CHECK(p->logprobs == 1 && p->top_logprobs == 5, "logprobs %d top %zu", p->logprobs, p->top_logprobs);
    CHECK(g.given[SETTING_KEEP] && g.given[SETTING_SEED] && !g.given[SETTING_GRAMMAR], "given[]");
    settings_free(&g);
    // null logprobs: none; a stop string alone: one
    CHECK(read_body("{\"logprobs\": null, \"stop\": \"x\"}", &g, &lim, msg, sizeof msg) == 0 && !g.params.logprobs &&
              g.params.n_stops == 1,
          "logprobs null, stop \"x\": %s", msg);
    settings_free(&g);
}

static void test_seed(void) {
    // below 2^53 as a number; at or past it only as a string of digits
    GenSettings g;
    GenLimits lim = {0};
    char msg[512] = "";
    CHECK(read_body("{\"seed\": \"18446744073709551615\"}", &g, &lim, msg, sizeof msg) == 0 &&
              g.params.sampling.seed == 18446744073709551615ull,
          "seed 2^64 - 1 as a string: %s", msg);
    settings_free(&g);
    refused("{\"seed\": 9007199254740992}", "seed must be an integer below 2^53");
    refused("{\"seed\": 1.5}", "seed must be an integer below 2^53");
    refused("{\"seed\": 1e3}", "seed must be an integer below 2^53");
    refused("{\"seed\": \"18446744073709551616\"}", "seed must be an integer below 2^53");
    refused("{\"seed\": -1}", "seed must be");
}

static void test_shapes(void) {
    refused("{\"stop\": 5}", "stop must be a string or an array of strings");
    refused("{\"stop\": [\"a\", \"\"]}", "stop must be a string or an array of non-empty strings");
    refused("{\"stop\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\","
            "\"15\",\"16\",\"17\"]}",
            "stop: at most 16 strings");
    refused("{\"logit_bias\": [1]}", "logit_bias must be an object {\"token id\": bias}");
    refused("{\"logit_bias\": {\"50257\": 1}}", "logit_bias: key \"50257\" is not a token id (a decimal integer in "
                                                "[0, 50257))");
    refused("{\"logit_bias\": {\"-1\": 1}}", "is not a token id");
    refused("{\"logit_bias\": {\"5\": 100.5}}", "logit_bias: token 5: the bias must be a number in [-100, 100]");
    refused("{\"logit_bias\": {\"5\": 1, \"05\": 2}}", "logit_bias: token 5 is given twice");
    refused("{\"response_format\": {\"type\": \"xml\"}}", "response_format.type \"xml\" is not text, json_object or "
                                                          "json_schema");
    refused("{\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\"}}}",
            "response_format.json_schema has no \"schema\"");
    refused("{\"grammar\": 5}", "grammar must be a string (GBNF text)");
    refused("{\"regex\": \"a\", \"json_schema\": {}}", "regex and json_schema exclude each other");
    refused("{\"response_format\": {\"type\": \"json_object\"}, \"grammar\": \"root ::= \\\"a\\\"\"}",
            "response_format and grammar exclude each other");
    // {"type": "text"} asks for nothing; a grammar may follow it
    GenSettings g;
    GenLimits lim = {0};
    char msg[512] = "";
    CHECK(read_body("{\"response_format\": {\"type\": \"text\"}, \"regex\": \"a|b\"}", &g, &lim, msg, sizeof msg) == 0 &&
              g.grammar && g.params.grammar == g.grammar && !strcmp(g.constraint_by, "regex"),
          "text then regex: %s", msg);
    settings_free(&g);
}

// argv's readers: the same ranges, the flag named as typed
static void test_args(void) {
    const struct {
        const char *flag, *value, *want;
    } bad[] = {
        {"--temp", "-1", "--temp -1: must be a number >= 0"},
        {"--top-p", "0", "--top-p 0: must be a number in (0, 1]"},
        {"--completions", "65", "--completions 65: must be an integer in [1, 64]"},
        {"--logprobs", "21", "--logprobs 21: must be an integer in [0, 20]"},
        {"-n", "1e3", "-n 1e3: must be an integer in [0, 1000000000]"},
        {"--temp", "1e39", "--temp 1e39: out of range (a float)"},
        {"--stop", "a\\q", "--stop a\\q: '\\q' is not an escape"},
        {"--stop", "", "--stop: an empty stop string would stop at once"},
        {"--logit-bias", "5", "--logit-bias 5: must be ID=BIAS"},
        {"--logit-bias", "5=101", "--logit-bias 5=101: the bias must be a number in [-100, 100]"},
        {"--seed", "-1", "--seed -1: must be an integer in [0, 2^64)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        GenSettings g;
        settings_defaults(&g);
        char value[64], msg[256] = "";
        snprintf(value, sizeof value, "%s", bad[i].value);
        const Setting *s = bad[i].flag[1] == '-' ? setting_by_flag(bad[i].flag + 2) : setting_by_code(bad[i].flag[1]);
        int rc = s ? setting_from_arg(&g, s, bad[i].flag, value, msg, sizeof msg) : 0;
        CHECK(s && rc == -1 && strstr(msg, bad[i].want), "%s %s: '%s' (want '%s')", bad[i].flag, bad[i].value, msg,
              bad[i].want);
    }
    GenSettings g;
    settings_defaults(&g);
    char stop[] = "\\n\\x41\\t", msg[256] = "", bias1[] = "7=-100", bias2[] = "7=1", grammar[] = "g.gbnf",
         regex[] = "a";
    CHECK(setting_from_arg(&g, setting_by_flag("stop"), "--stop", stop, msg, sizeof msg) == 0 &&
              !strcmp(g.stops[0], "\nA\t"),
          "--stop escapes: %s", msg);
    CHECK(setting_from_arg(&g, setting_by_flag("logit-bias"), "--logit-bias", bias1, msg, sizeof msg) == 0 &&
              setting_from_arg(&g, setting_by_flag("logit-bias"), "--logit-bias", bias2, msg, sizeof msg) == -1 &&
              strstr(msg, "token 7 is given twice"),
          "--logit-bias twice: %s", msg);
    CHECK(setting_from_arg(&g, setting_by_flag("grammar"), "--grammar", grammar, msg, sizeof msg) == 0 &&
              setting_from_arg(&g, setting_by_flag("regex"), "--regex", regex, msg, sizeof msg) == -1 &&
              strstr(msg, "--grammar and --regex exclude each other"),
          "two constraints: %s", msg);
}

static void test_keep(void) {
    GenSettings g;
    settings_defaults(&g);
    char msg[256] = "";
    g.params.keep = 2;
    CHECK(settings_check_keep(&g, 1, 1, 1024, msg, sizeof msg) == -1 &&
              !strcmp(msg, "keep needs context_shift (it says what a shift keeps)"),
          "keep without context_shift: %s", msg);
    CHECK(settings_check_keep(&g, 1, 0, 1024, msg, sizeof msg) == -1 && strstr(msg, "--keep needs --context-shift"),
          "--keep without --context-shift: %s", msg);
    g.params.context_shift = 1;
    g.params.keep = 512;
    CHECK(settings_check_keep(&g, 1, 1, 1024, msg, sizeof msg) == 0, "keep 512 of 1024: %s", msg);
    g.params.keep = 513;
    CHECK(settings_check_keep(&g, 1, 1, 1024, msg, sizeof msg) == -1 &&
              strstr(msg, "keep 513: more than half the model's context (512)"),
          "keep 513 of 1024: %s", msg);
    CHECK(settings_check_keep(&g, 1, 1, 0, msg, sizeof msg) == 0, "the context not known yet: %s", msg);
}

// request.c: the checks of a JSON text and its token ids
static void test_json(void) {
    char msg[160];
    const char *text = "{\"prompt\": \"a\\ud800\"}";
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, strlen(text), &end, 0);
    if (!o) json_parse_error(text, strlen(text), end, msg, sizeof msg);
    CHECK(!o && strstr(msg, "invalid JSON string at byte"), "a lone surrogate: %s", o ? "parsed" : msg);
    cJSON_Delete(o);
    CHECK(nul_at("ab\\u0000", 8, 1) == 2 && nul_at("ab\\\\u0000", 9, 1) == -1 && nul_at("a\0b", 3, 0) == 1,
          "nul_at");
    cJSON *ids = cJSON_Parse("[15496, 995, 50257]");
    int32_t *out = NULL;
    size_t n = 0;
    CHECK(json_token_ids(ids, 50257, "prompt", &out, &n, msg, sizeof msg) == -1 &&
              !strcmp(msg, "prompt: element 2 is not a token id in [0, 50257)"),
          "token ids: %s", msg);
    cJSON_Delete(ids);
    free(out);
    cJSON *seed = seed_json(1ull << 53);
    char *s = cJSON_PrintUnformatted(seed);
    CHECK(s && !strcmp(s, "\"9007199254740992\""), "seed 2^53 as JSON: %s", s ? s : "(null)");
    free(s);
    cJSON_Delete(seed);
}

int main(void) {
    test_ranges();
    test_values_land();
    test_seed();
    test_shapes();
    test_args();
    test_keep();
    test_json();
    return check_exit("test_request");
}

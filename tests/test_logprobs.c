/*
 * test_logprobs.c - log-probabilities out, and multiple choice.
 *
 *   library  logits_sum_exp: every ISA's version the plain one's bits, on
 *            ragged lengths, within 1e-6 of a long double sum;
 *            logits_top: a sort's answer (ties by id, NaN never);
 *            logits_summarize: no distribution from NaN or +inf.
 *   command  --logprobs never changes the text (sampled, greedy, with the
 *            penalty); the chosen token's log-probability is the raw
 *            logits' (where it is among the alternatives, their numbers
 *            agree); speculative runs give the plain run's numbers bit for
 *            bit; --echo's prompt numbers are --score's bit for bit; each
 *            --choice's log-probabilities are --score's of prompt + choice
 *            bit for bit, and the ranking and the printed best follow
 *            them; --batch lines give their single runs' numbers.
 *   exact    against float64 references: the demo model's
 *            (tests/fixtures/demo_refs.json: last-position logits of 13
 *            prompts, held-out windows' log-probabilities) and the
 *            124M-shaped checkpoint's transformers outputs
 *            (tests/fixtures/public_refs.json): each log-probability within
 *            1e-3, the top ids equal wherever the reference's neighbours
 *            differ by more than float32 noise.
 *
 * Runs $GPT (default build/gpt) on models/demo.bin and $CKPT_DIR's checkpoints.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu.h"
#include "base/fileio.h"
#include "logprobs.h"
#include "paths.h"
#include "run_gpt.h"

static char tmpdir[256];

#define RUN(...) run_gpt(tmpdir, NULL, 0, (const char *const[]){__VA_ARGS__, NULL})
#define DEMO "models/demo.bin"
#define TOLERANCE 1e-3
#define F32_NOISE 1e-4  // log-probabilities closer than this may swap places in float32

// ----------------------------------------------------------------------------
// the library

static unsigned long long rng_state = 88172645463325252ull;
static double uniform(void) {  // xorshift64, [0, 1)
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void test_sum_exp(void) {
    enum { V = 50257 };
    float *l = malloc(V * sizeof *l);
    size_t lengths[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 70, 1000, V};
    int compared = 0;
    for (int kind = 0; kind < 3; kind++) {
        // logits of GPT-2's spread; some far below the max (terms that are 0); some -inf
        for (size_t i = 0; i < V; i++) l[i] = (float)(uniform() * 20 - 10);
        if (kind >= 1)
            for (size_t i = 0; i < V; i += 7) l[i] = (float)(-1000 + uniform());
        if (kind == 2)
            for (size_t i = 3; i < V; i += 11) l[i] = -INFINITY;
        for (size_t t = 0; t < sizeof lengths / sizeof *lengths; t++) {
            size_t n = lengths[t];
            double max = -INFINITY;
            for (size_t i = 0; i < n; i++) max = l[i] > max ? l[i] : max;
            if (!(max > -INFINITY)) continue;
            long double ref = 0;
            for (size_t i = 0; i < n; i++) ref += expl((long double)l[i] - (long double)max);
            double plain = logits_sum_exp(l, n, max, CPU_SCALAR);
            CHECK(fabsl(plain - ref) <= 1e-6L * ref, "sum_exp n %zu kind %d: %.17g against %.17Lg", n, kind, plain,
                  ref);
            for (CpuIsa isa = CPU_AVX2; (int)isa < CPU_ISA_COUNT; isa++) {
                if (!cpu_isa_supported(isa)) continue;
                double v = logits_sum_exp(l, n, max, isa);
                CHECK(memcmp(&v, &plain, sizeof v) == 0, "sum_exp %s n %zu kind %d: %a, plain %a",
                      cpu_isa_name(isa), n, kind, v, plain);
                compared++;
            }
        }
    }
    printf("logits_sum_exp: %d ISA results compared with the plain bits\n", compared);
    free(l);
}

// Whether id a goes before id b among the most likely (logit, then id).
static int before(const float *l, int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

static void test_top(void) {
    enum { V = 50257 };
    float *l = malloc(V * sizeof *l);
    int32_t *order = malloc(V * sizeof *order);
    size_t lengths[] = {1, 5, 16, 17, 33, 100, V};
    size_t ns[] = {0, 1, 2, 5, 20};
    for (int kind = 0; kind < 2; kind++) {
        // kind 1: few distinct values (ties everywhere) and some NaN
        for (size_t i = 0; i < V; i++) l[i] = kind ? (float)(int)(uniform() * 8) : (float)(uniform() * 20 - 10);
        if (kind)
            for (size_t i = 2; i < V; i += 13) l[i] = NAN;
        for (size_t t = 0; t < sizeof lengths / sizeof *lengths; t++) {
            size_t Vn = lengths[t], k = 0;
            // the reference: every non-NaN id by insertion, for the first 20
            for (size_t i = 0; i < Vn; i++) {
                if (l[i] != l[i]) continue;
                size_t at = k < 20 ? k++ : 20;
                if (at == 20 && !before(l, (int32_t)i, order[19])) continue;
                if (at == 20) at = 19;
                for (; at > 0 && before(l, (int32_t)i, order[at - 1]); at--) order[at] = order[at - 1];
                order[at] = (int32_t)i;
            }
            for (size_t q = 0; q < sizeof ns / sizeof *ns; q++) {
                int32_t ids[LOGPROBS_TOP_MAX];
                size_t want = ns[q] < k ? ns[q] : k;
                size_t got = logits_top(l, Vn, ns[q], ids);
                int same = got == want;
                for (size_t i = 0; same && i < got; i++) same = ids[i] == order[i];
                CHECK(same, "logits_top kind %d V %zu n %zu: %zu ids, want %zu (first %d, want %d)", kind, Vn, ns[q],
                      got, want, got ? ids[0] : -1, want ? order[0] : -1);
            }
        }
    }
    free(l);
    free(order);
}

static void test_summarize(void) {
    float row[40];
    for (int i = 0; i < 40; i++) row[i] = (float)(i % 7) - 3.0f;
    LogitsSummary s;
    logits_summarize(row, 40, 5, CPU_SCALAR, &s);
    double total = 0;
    for (int i = 0; i < 40; i++) total += exp(logprob_of(&s, row, i));
    CHECK(fabs(total - 1) < 1e-6, "the probabilities sum to %.17g", total);
    CHECK(s.n_top == 5 && s.top[0] == 6 && s.top[1] == 13 && row[s.top[4]] == 3.0f, "top %zu: %d %d", s.n_top,
          s.top[0], s.top[1]);
    row[17] = NAN;
    logits_summarize(row, 40, 0, CPU_SCALAR, &s);
    CHECK(isnan(s.log_sum), "a NaN logit: log_sum %g", s.log_sum);
    row[17] = INFINITY;
    logits_summarize(row, 40, 0, CPU_SCALAR, &s);
    CHECK(isnan(s.log_sum), "a +inf logit: log_sum %g", s.log_sum);
    for (int i = 0; i < 40; i++) row[i] = -INFINITY;
    logits_summarize(row, 40, 0, CPU_SCALAR, &s);
    CHECK(isnan(s.log_sum), "every logit -inf: log_sum %g", s.log_sum);
}

// ----------------------------------------------------------------------------
// the command

static cJSON *json_of(const Result *r) { return r->rc == 0 ? cJSON_Parse(r->out) : NULL; }

// Item k of a JSON object as its printed text (numbers round-trip exactly).
static char *printed(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return v ? cJSON_PrintUnformatted(v) : NULL;
}

static int same_item(const cJSON *a, const cJSON *b, const char *k) {
    char *x = printed(a, k), *y = printed(b, k);
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

static double num_at(const cJSON *arr, int i) { return cJSON_GetArrayItem(arr, i)->valuedouble; }

// Runs gpt with args, --json, and returns the parsed output (NULL: failed).
static cJSON *run_json(const char *const *args) {
    const char *argv[40];
    int n = 0;
    for (; args[n] && n < 38; n++) argv[n] = args[n];
    argv[n++] = "--json";
    argv[n] = NULL;
    Result r = run_gpt(tmpdir, NULL, 0, argv);
    cJSON *j = json_of(&r);
    if (!j) fprintf(stderr, "gpt %s ...: rc %d: %s\n", args[0], r.rc, r.err);
    result_free(&r);
    return j;
}

#define JSON(...) run_json((const char *const[]){__VA_ARGS__, NULL})

static const char *PROMPT = "And it came to pass, when the king heard";

// --logprobs changes nothing of what is drawn; the chosen token's number is
// the raw logits' (the penalty changes logits in place: where the token is
// among the alternatives, the two numbers agree).
static void test_same_text(void) {
    const char *settings[][10] = {
        {"--temp", "0"},
        {"--temp", "0.8", "--top-k", "40", "-s", "5"},
        {"--temp", "1", "--top-p", "0.9", "--repeat-penalty", "1.3", "-s", "9"},
        {"--temp", "0", "--repeat-penalty", "1.5"},
    };
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        const char *a[20] = {"-m", DEMO, "-p", PROMPT, "-n", "40"}, *b[24];
        int n = 6;
        for (int k = 0; settings[i][k]; k++) a[n++] = settings[i][k];
        memcpy(b, a, sizeof a);
        b[n] = "--logprobs";
        b[n + 1] = "20";
        b[n + 2] = NULL;
        cJSON *x = run_json(a), *y = run_json(b);
        CHECK(x && y && same_item(x, y, "tokens") && same_item(x, y, "text"), "setting %zu: the text changed", i);
        const cJSON *lp = cJSON_GetObjectItem(y, "logprobs");
        const cJSON *ids = cJSON_GetObjectItem(lp, "token_ids"), *lps = cJSON_GetObjectItem(lp, "token_logprobs");
        const cJSON *top_ids = cJSON_GetObjectItem(lp, "top_ids"), *tops = cJSON_GetObjectItem(lp, "top_logprobs");
        int n_tok = cJSON_GetArraySize(cJSON_GetObjectItem(y, "tokens"));
        CHECK(n_tok > 0 && cJSON_GetArraySize(ids) == n_tok && cJSON_GetArraySize(lps) == n_tok &&
                  cJSON_GetArraySize(tops) == n_tok,
              "setting %zu: %d tokens, logprobs of %d", i, n_tok, cJSON_GetArraySize(lps));
        char *t = printed(y, "tokens"), *u = cJSON_PrintUnformatted(ids);
        CHECK(t && u && !strcmp(t, u), "setting %zu: token_ids %s, tokens %s", i, u, t);
        free(t);
        free(u);
        int found = 0, agree = 0, ordered = 1;
        for (int k = 0; k < cJSON_GetArraySize(ids); k++) {
            const cJSON *ti = cJSON_GetArrayItem(top_ids, k), *tv = cJSON_GetArrayItem(tops, k);
            int id = cJSON_GetArrayItem(ids, k)->valueint, m = cJSON_GetArraySize(ti);
            CHECK(m == 20 && cJSON_GetArraySize(tv) == 20, "setting %zu token %d: %d alternatives", i, k, m);
            const cJSON *v = tv ? tv->child : NULL;
            double prev = 0;
            for (int q = 0; q < m && v; q++, v = v->next) {
                if (q && v->valuedouble > prev) ordered = 0;
                prev = v->valuedouble;
                if (cJSON_GetArrayItem(ti, q)->valueint != id) continue;
                found++;
                agree += v->valuedouble == num_at(lps, k);
            }
        }
        CHECK(found > 0 && agree == found && ordered, "setting %zu: the chosen token among the alternatives %d "
              "times, its number the same %d times; ordered %d", i, found, agree, ordered);
        cJSON_Delete(x);
        cJSON_Delete(y);
    }
    // --per-token: a line per token, 2 + 2 x N fields, the same numbers as --json
    Result r = RUN("-m", DEMO, "-p", PROMPT, "-n", "8", "--temp", "0", "--logprobs", "3");
    cJSON *j = JSON("-m", DEMO, "-p", PROMPT, "-n", "8", "--temp", "0", "--logprobs", "3");
    const cJSON *lps = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "logprobs"), "token_logprobs");
    int lines = 0, fields_ok = 1, numbers_ok = 1;
    for (char *line = r.out, *nl; r.rc == 0 && (nl = strchr(line, '\n')); line = nl + 1, lines++) {
        *nl = '\0';
        int tabs = 0;
        for (char *c = line; *c; c++) tabs += *c == '\t';
        fields_ok &= tabs == 1 + 2 * 3;
        char want[32];
        snprintf(want, sizeof want, "\t%.6f\t", lines < cJSON_GetArraySize(lps) ? num_at(lps, lines) : 0.0);
        numbers_ok &= strstr(line, want) != NULL;
    }
    CHECK(r.rc == 0 && lines == 8 && fields_ok && numbers_ok, "--per-token: rc %d, %d lines, fields %d, numbers %d",
          r.rc, lines, fields_ok, numbers_ok);
    result_free(&r);
    cJSON_Delete(j);
}

// Speculative decoding picks the same tokens from rows of the same bits:
// the same numbers.
static void test_speculative(void) {
    const char *drafts[][4] = {{"--draft-dtype", "q8"}, {"--lookup", "2"}};
    const char *temps[] = {"0", "0.9"};
    for (size_t t = 0; t < 2; t++) {
        cJSON *plain = JSON("-m", DEMO, "-p", PROMPT, "-n", "40", "--temp", temps[t], "-s", "3", "--logprobs", "5");
        for (size_t d = 0; d < 2; d++) {
            cJSON *spec = JSON("-m", DEMO, "-p", PROMPT, "-n", "40", "--temp", temps[t], "-s", "3", "--logprobs", "5",
                               drafts[d][0], drafts[d][1]);
            CHECK(plain && spec && same_item(plain, spec, "tokens") && same_item(plain, spec, "logprobs"),
                  "%s %s, temperature %s: not the plain run's log-probabilities", drafts[d][0], drafts[d][1], temps[t]);
            cJSON_Delete(spec);
        }
        cJSON_Delete(plain);
    }
}

// The log-probabilities of ids[first..) from --score of the same ids (the
// text, with <|endoftext|> first when the ids start with it): 0 when equal
// bit for bit to want[0..), and their sum, added in order, to sum.
static int score_agrees(const char *model, const char *text, int eot_first, const cJSON *ids, int first,
                        const cJSON *want, const cJSON *sum) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s%s", eot_first ? "<|endoftext|>" : "", text);
    cJSON *s = eot_first ? JSON("-m", model, "--score", "-p", buf, "--special") : JSON("-m", model, "--score", "-p", buf);
    const cJSON *lp = cJSON_GetObjectItem(s, "logprobs");
    int same = s != NULL;
    char *a = printed(s, "tokens"), *b = cJSON_PrintUnformatted(ids);
    same = same && a && b && !strcmp(a, b);
    free(a);
    free(b);
    double total = 0;
    same = same && cJSON_IsNull(cJSON_GetArrayItem(lp, 0));  // the first token: nothing before it
    for (int i = first; same && i < cJSON_GetArraySize(ids); i++) {
        double x = num_at(lp, i), y = num_at(want, i - first);  // --score's are lined up with its tokens
        same = memcmp(&x, &y, sizeof x) == 0;
        total += x;
    }
    if (same && sum) same = total == sum->valuedouble;
    cJSON_Delete(s);
    return same;
}

// --echo's prompt log-probabilities are --score's.
static void test_echo(void) {
    // the long one crosses several chunks of prompt rows with logits (128 a step)
    char long_text[3000] = "";
    for (int i = 0; i < 12; i++)
        strcat(long_text, "And God said, Let there be light: and there was light. And God saw the light. ");
    const char *texts[] = {"And it came to pass", PROMPT, long_text};
    for (size_t i = 0; i < 3; i++) {
        cJSON *e = JSON("-m", DEMO, "-p", texts[i], "-n", "3", "--temp", "0", "--echo", "--logprobs", "2");
        const cJSON *lp = cJSON_GetObjectItem(e, "logprobs");
        const cJSON *prompt_ids = cJSON_GetObjectItem(e, "prompt_ids");
        int n = cJSON_GetArraySize(prompt_ids);
        const cJSON *all = cJSON_GetObjectItem(lp, "token_logprobs");
        CHECK(e && n > 1 && cJSON_IsNull(cJSON_GetArrayItem(all, 0)) &&
                  cJSON_GetArraySize(all) == n + cJSON_GetArraySize(cJSON_GetObjectItem(e, "tokens")),
              "--echo text %zu: the prompt's %d tokens and the generated ones, the first null", i, n);
        // the prompt's part against --score
        cJSON *part = cJSON_CreateArray();
        for (int k = 1; k < n; k++) cJSON_AddItemToArray(part, cJSON_CreateNumber(num_at(all, k)));
        CHECK(score_agrees(DEMO, texts[i], 0, prompt_ids, 1, part, NULL), "--echo text %zu: not --score's numbers",
              i);
        const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(e, "text"));
        CHECK(text && !strncmp(text, texts[i], strlen(texts[i])), "--echo --json: the text starts with the prompt");
        cJSON_Delete(part);
        cJSON_Delete(e);
    }
}

// Each choice's numbers are --score's of prompt + choice, bit for bit.
static void test_choices(void) {
    struct {
        const char *prompt;
        const char *choices[5];
    } cases[] = {
        {"And it came to pass that the", {" LORD", " king", " sea of glass", " dog"}},
        {"Answer: ", {"yes", "no", "the LORD"}},  // the space goes with the choice
        {"", {"In the beginning", "Call me Ishmael"}},  // <|endoftext|> before
        {"Hea", {"ven", "rt"}},  // "He" + "aven" across the boundary; "Heart" one token: <|endoftext|> before
    };
    int straddled = 0, eot_before = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *args[24] = {"-m", DEMO, "-p", cases[c].prompt};
        int n = 4, n_choices = 0;
        for (; cases[c].choices[n_choices]; n_choices++) {
            args[n++] = "--choice";
            args[n++] = cases[c].choices[n_choices];
        }
        args[n] = NULL;
        cJSON *j = run_json(args);
        const cJSON *list = cJSON_GetObjectItem(j, "choices");
        CHECK(j && cJSON_GetArraySize(list) == n_choices, "case %zu: %d choices back", c, cJSON_GetArraySize(list));
        double best_sum = -INFINITY;
        int best = -1;
        for (int i = 0; list && i < n_choices; i++) {
            const cJSON *ch = cJSON_GetArrayItem(list, i);
            const cJSON *toks = cJSON_GetObjectItem(ch, "tokens"), *lps = cJSON_GetObjectItem(ch, "logprobs");
            int first = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(ch, "context_tokens"));
            // ids of the whole: the context's from --tokenize, then the choice's
            char whole[512];
            snprintf(whole, sizeof whole, "%s%s", cases[c].prompt, cases[c].choices[i]);
            cJSON *ids = cJSON_CreateArray();
            Result t = RUN("-m", DEMO, "--tokenize", "--json", "-p", whole);
            cJSON *tj = json_of(&t);
            int m = cJSON_GetArraySize(tj);
            // no token wholly in the prompt: <|endoftext|> goes first
            int eot_first = m + 1 == first + cJSON_GetArraySize(toks);
            eot_before += eot_first;
            straddled += c == 3 && !eot_first && first == 1;
            if (eot_first) cJSON_AddItemToArray(ids, cJSON_CreateNumber(50256));
            for (int k = 0; k < m; k++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(num_at(tj, k)));
            CHECK(cJSON_GetArraySize(ids) == first + cJSON_GetArraySize(toks) && first >= 1,
                  "case %zu choice %d: %d context + %d tokens of %d", c, i, first, cJSON_GetArraySize(toks),
                  cJSON_GetArraySize(ids));
            CHECK(score_agrees(DEMO, whole, eot_first, ids, first, lps, cJSON_GetObjectItem(ch, "sum")),
                  "case %zu choice %d (%s): not --score's numbers", c, i, cases[c].choices[i]);
            double sum = cJSON_GetNumberValue(cJSON_GetObjectItem(ch, "sum"));
            if (sum > best_sum) best_sum = sum, best = i;
            result_free(&t);
            cJSON_Delete(tj);
            cJSON_Delete(ids);
        }
        CHECK(best >= 0 && (int)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "best")) == best &&
                  (int)num_at(cJSON_GetObjectItem(j, "ranking"), 0) == best,
              "case %zu: best %d", c, best);
        // without --json: the best choice's text alone
        Result r = run_gpt(tmpdir, NULL, 0, args);
        CHECK(r.rc == 0 && best >= 0 && !strcmp(r.out, cases[c].choices[best]), "case %zu: printed '%s', want '%s'",
              c, r.out, best >= 0 ? cases[c].choices[best] : "");
        result_free(&r);
        cJSON_Delete(j);
    }
    CHECK(eot_before == 3 && straddled == 1, "<|endoftext|> before %d choices (want 3), %d across the boundary (want 1)",
          eot_before, straddled);
}

// A --batch line's numbers are its single run's.
static void test_batch(void) {
    const char *input =
        "{\"prompt\":\"And it came to pass\",\"logprobs\":3,\"max_tokens\":6,\"temperature\":0.7,\"seed\":4}\n"
        "{\"prompt\":\"And the LORD said\",\"logprobs\":0,\"echo\":true,\"max_tokens\":4,\"seed\":8}\n"
        "{\"prompt\":\"And it came to pass that the\",\"choices\":[\" LORD\",\" king\",\" sea of glass\"]}\n"
        "{\"prompt\":\"And it came to pass\",\"max_tokens\":5,\"seed\":1}\n";
    Result r = run_gpt(tmpdir, input, strlen(input),
                       (const char *const[]){"-m", DEMO, "--batch", "--jsonl", "--parallel", "4", NULL});
    cJSON *line[4] = {0};
    char *p = r.out;
    for (int i = 0; i < 4 && r.rc == 0; i++) {
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        line[i] = cJSON_Parse(p);
        p = nl + 1;
    }
    CHECK(r.rc == 0 && line[3], "--batch: rc %d %s", r.rc, r.err);
    cJSON *one = JSON("-m", DEMO, "-p", "And it came to pass", "-n", "6", "--temp", "0.7", "-s", "4", "--logprobs", "3");
    CHECK(one && line[0] && same_item(one, line[0], "logprobs") && same_item(one, line[0], "text"),
          "batch line 0: not the single run's logprobs");
    cJSON *two = JSON("-m", DEMO, "-p", "And the LORD said", "-n", "4", "-s", "8", "--logprobs", "0", "--echo");
    CHECK(two && line[1] && same_item(two, line[1], "logprobs") && same_item(two, line[1], "text"),
          "batch line 1 (echo): not the single run's");
    cJSON *three = JSON("-m", DEMO, "-p", "And it came to pass that the", "--choice", " LORD", "--choice", " king",
                        "--choice", " sea of glass");
    CHECK(three && line[2] && same_item(three, line[2], "choices") && same_item(three, line[2], "ranking"),
          "batch line 2 (choices): not the single run's");
    CHECK(line[3] && !cJSON_GetObjectItem(line[3], "logprobs"), "batch line 3: no logprobs asked, none given");
    for (int i = 0; i < 4; i++) cJSON_Delete(line[i]);
    cJSON_Delete(one);
    cJSON_Delete(two);
    cJSON_Delete(three);
    result_free(&r);
}

// ----------------------------------------------------------------------------
// against float64 references

// The log-softmax of a reference row (float64 rounded to float32) at id.
static double ref_logprob(const float *row, size_t V, int id, double *lse) {
    if (!isfinite(*lse)) {
        double max = -INFINITY, sum = 0;
        for (size_t i = 0; i < V; i++) max = row[i] > max ? row[i] : max;
        for (size_t i = 0; i < V; i++) sum += exp((double)row[i] - max);
        *lse = max + log(sum);
    }
    return (double)row[id] - *lse;
}

// The first generated token's alternatives (a line's logprobs with 20)
// against the reference row: each within TOLERANCE; each id the reference's
// at its rank wherever the reference's neighbours differ by more than noise.
static void check_top(const char *what, const cJSON *lp, size_t position, const float *row, size_t V, double *worst) {
    const cJSON *ids = cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "top_ids"), (int)position);
    const cJSON *vals = cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "top_logprobs"), (int)position);
    int n = cJSON_GetArraySize(ids);
    CHECK(n == 20 && cJSON_GetArraySize(vals) == 20, "%s: %d alternatives", what, n);
    // the reference's own top 21, by value
    int ref[21];
    for (int k = 0; k < 21; k++) {
        int best = -1;
        for (size_t i = 0; i < V; i++) {
            int taken = 0;
            for (int q = 0; q < k && !taken; q++) taken = ref[q] == (int)i;
            if (!taken && (best < 0 || row[i] > row[best])) best = (int)i;
        }
        ref[k] = best;
    }
    double lse = NAN;
    const cJSON *v = vals ? vals->child : NULL;
    for (int k = 0; k < n && v; k++, v = v->next) {
        int id = cJSON_GetArrayItem(ids, k)->valueint;
        double d = fabs(v->valuedouble - ref_logprob(row, V, id, &lse));
        if (d > *worst) *worst = d;
        CHECK(d <= TOLERANCE, "%s rank %d (id %d): %.9f, reference %.9f", what, k, id, v->valuedouble,
              ref_logprob(row, V, id, &lse));
        double up = k ? row[ref[k - 1]] - row[ref[k]] : INFINITY, down = row[ref[k]] - row[ref[k + 1]];
        if (up > F32_NOISE && down > F32_NOISE)
            CHECK(id == ref[k], "%s rank %d: id %d, the reference's %d", what, k, id, ref[k]);
    }
}

static float *read_f32(const char *path, size_t *n) {
    char *all = NULL;
    size_t len = 0;
    GptError err = {{0}};
    if (file_read_all(path, &all, &len, &err) != 0) {
        CHECK(0, "%s: %s", path, err.msg);
        return NULL;
    }
    *n = len / 4;
    return (float *)all;
}

// A --batch --jsonl run of lines: each line's parsed result (NULL-terminated
// array, NULL on failure).
static cJSON **batch_lines(const char *model, const char *input, size_t n_lines) {
    Result r = run_gpt(tmpdir, input, strlen(input),
                       (const char *const[]){"-m", model, "--batch", "--jsonl", "--temp", "0", NULL});
    CHECK(r.rc == 0, "--batch on %s: rc %d: %s", model, r.rc, r.err);
    cJSON **out = calloc(n_lines + 1, sizeof *out);
    char *p = r.out;
    for (size_t i = 0; r.rc == 0 && i < n_lines; i++) {
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        out[i] = cJSON_Parse(p);
        p = nl + 1;
    }
    result_free(&r);
    return out;
}

static void free_lines(cJSON **lines) {
    for (size_t i = 0; lines && lines[i]; i++) cJSON_Delete(lines[i]);
    free(lines);
}

// One JSONL line for prompt text: echo, logprobs 20, max_tokens greedy tokens.
static void add_line(char **buf, size_t *len, const char *text, int max_tokens) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", text);
    cJSON_AddNumberToObject(o, "max_tokens", max_tokens);
    cJSON_AddNumberToObject(o, "logprobs", 20);
    cJSON_AddBoolToObject(o, "echo", 1);
    char *s = cJSON_PrintUnformatted(o);
    size_t n = strlen(s);
    *buf = realloc(*buf, *len + n + 2);
    memcpy(*buf + *len, s, n);
    (*buf)[*len + n] = '\n';
    *len += n + 1;
    (*buf)[*len] = '\0';
    free(s);
    cJSON_Delete(o);
}

// The reference prompts of a model: the prompt tokens' log-probabilities
// (those given) and the first generated token's alternatives.
static void test_reference(const char *name, const char *model, const cJSON *prompts, const char *logits_path,
                           const char *prompt_lp_key, const char *text_key) {
    size_t n_floats, V = 50257;
    float *logits = read_f32(logits_path, &n_floats);
    int n = cJSON_GetArraySize(prompts);
    char *input = NULL;
    size_t len = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, prompts) add_line(&input, &len, cJSON_GetStringValue(cJSON_GetObjectItem(p, text_key)), 1);
    cJSON **lines = batch_lines(model, input, (size_t)n);
    double worst_prompt = 0, worst_top = 0;
    int i = 0, prompt_checked = 0;
    cJSON_ArrayForEach(p, prompts) {
        const cJSON *line = lines ? lines[i] : NULL, *lp = cJSON_GetObjectItem(line, "logprobs");
        const cJSON *ids = cJSON_GetObjectItem(p, "ids"), *got_ids = cJSON_GetObjectItem(lp, "token_ids");
        int n_ids = cJSON_GetArraySize(ids);
        CHECK(line && cJSON_GetArraySize(got_ids) == n_ids + 1, "%s prompt %d: %d ids back for %d + 1", name, i,
              cJSON_GetArraySize(got_ids), n_ids);
        if (!line || cJSON_GetArraySize(got_ids) != n_ids + 1) {
            i++;
            continue;
        }
        const cJSON *ref_lp = prompt_lp_key ? cJSON_GetObjectItem(p, prompt_lp_key) : NULL;
        const cJSON *got = cJSON_GetObjectItem(lp, "token_logprobs");
        for (int k = 1; ref_lp && k < n_ids; k++) {
            double d = fabs(num_at(got, k) - num_at(ref_lp, k - 1));
            if (d > worst_prompt) worst_prompt = d;
            CHECK(d <= TOLERANCE && num_at(got_ids, k) == num_at(ids, k), "%s prompt %d token %d: %.9f, reference %.9f",
                  name, i, k, num_at(got, k), num_at(ref_lp, k - 1));
            prompt_checked++;
        }
        int offset = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(p, "last_logits_offset"));
        char what[64];
        snprintf(what, sizeof what, "%s prompt %d", name, i);
        if (logits && ((size_t)offset + 1) * V <= n_floats)
            check_top(what, lp, (size_t)n_ids, logits + (size_t)offset * V, V, &worst_top);
        i++;
    }
    printf("%s: %d prompts, %d prompt tokens within %.2g of the reference's log-probabilities (worst %.2g), "
           "the first generated token's 20 alternatives worst %.2g\n",
           name, n, prompt_checked, TOLERANCE, worst_prompt, worst_top);
    free_lines(lines);
    free(input);
    free(logits);
}

// The demo model's held-out windows: every token's log-probability, --echo.
static void test_heldout(const cJSON *refs) {
    char *input = NULL;
    size_t len = 0;
    int n = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(refs, "heldout_windows")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItem(w, "text_roundtrips")) || n == 3) continue;
        add_line(&input, &len, cJSON_GetStringValue(cJSON_GetObjectItem(w, "text")), 0);
        n++;
    }
    cJSON **lines = batch_lines(DEMO, input, (size_t)n);
    double worst = 0;
    int i = 0, checked = 0;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(refs, "heldout_windows")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItem(w, "text_roundtrips")) || i == n) continue;
        const cJSON *got = cJSON_GetObjectItem(cJSON_GetObjectItem(lines ? lines[i] : NULL, "logprobs"), "token_logprobs");
        const cJSON *ref = cJSON_GetObjectItem(w, "logprobs");
        int m = cJSON_GetArraySize(ref);
        CHECK(got && cJSON_GetArraySize(got) == m + 1, "held-out window %d: %d log-probabilities for %d", i,
              cJSON_GetArraySize(got), m);
        for (int k = 0; got && k < m && cJSON_GetArraySize(got) == m + 1; k++) {
            double d = fabs(num_at(got, k + 1) - num_at(ref, k));
            if (d > worst) worst = d;
            CHECK(d <= TOLERANCE, "held-out window %d token %d: %.9f, reference %.9f", i, k + 1, num_at(got, k + 1),
                  num_at(ref, k));
            checked++;
        }
        i++;
    }
    printf("demo held-out: %d windows, %d tokens with --echo --logprobs, worst %.2g (tolerance %.2g)\n", n, checked,
           worst, TOLERANCE);
    free_lines(lines);
    free(input);
}

static cJSON *read_json(const char *path) {
    char *text = NULL;
    size_t len = 0;
    GptError err = {{0}};
    if (file_read_all(path, &text, &len, &err) != 0) {
        CHECK(0, "%s: %s", path, err.msg);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    CHECK(j != NULL, "%s: not JSON", path);
    return j;
}

int main(void) {
    if (scratch_dir_make(tmpdir, sizeof tmpdir, "logprobs") != 0) return 1;
    test_sum_exp();
    test_top();
    test_summarize();
    test_same_text();
    test_speculative();
    test_echo();
    test_choices();
    test_batch();
    cJSON *demo = read_json("tests/fixtures/demo_refs.json");
    if (demo) {
        test_reference("demo", DEMO, cJSON_GetObjectItem(demo, "prompts"), "tests/fixtures/demo_last_logits.f32", NULL,
                       "text");
        test_heldout(demo);
    }
    cJSON *pub = read_json("tests/fixtures/public_refs.json");
    if (pub)
        test_reference("gpt2-124M-shaped", ckpt("gpt2-124M-shaped"),
                       cJSON_GetObjectItem(cJSON_GetObjectItem(pub, "models"), "gpt2-124M-shaped"),
                       "tests/fixtures/public_last_logits_gpt2-124M-shaped.f32", "prompt_token_logprobs", "text");
    cJSON_Delete(demo);
    cJSON_Delete(pub);
    scratch_dir_remove(tmpdir);
    return check_exit("test_logprobs");
}

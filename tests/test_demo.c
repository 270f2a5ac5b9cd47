/*
 * test_demo.c - the demo model (models/demo.bin) against a float64 reference.
 *
 * scripts/make-demo-refs.py reads models/demo.bin itself (its own parser of
 * docs/model-format.md), widens the stored weights exactly to float64, and
 * runs GPT-2's forward pass in float64 with torch; it writes
 * tests/fixtures/demo_refs.json and demo_last_logits.f32. This checks, with
 * the model loaded as stored (model_load, its F16/BF16/F32 matrices):
 *   - the fixtures belong to this models/demo.bin (size and sha256), else one
 *     failing check that says to regenerate them;
 *   - the last-position logits of every reference prompt, all vocab_size of
 *     them (prefilled in one call);
 *   - the 40 greedy tokens of every prompt, decoded through the KV cache one
 *     token at a time, up to the first step where the reference's top two
 *     logits are closer than float32 noise (after such a near-tie either
 *     continuation is right, so the prompt is compared no further);
 *   - the log-probability of every token of the held-out windows (texts the
 *     model never trained on, each exactly the context long) through
 *     score_tokens, and each window's sum;
 *   - one window once more through the CLI, `gpt --score --json`, when its
 *     text tokenizes back to the window's ids.
 *
 * Tolerances. The reference and gpt use the same stored weights, so they
 * differ only by float32 arithmetic (accumulation order, exp and tanh
 * approximations), about 1e-5 on these logits. We allow 1e-3 on a logit and
 * a token's log-probability, 1e-2 on a window's sum of 255: a real bug (a
 * wrong scale, mask, eps or layer order) moves them by 1e-1 or more.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "base/fileio.h"
#include "forward.h"
#include "engine.h"
#include "score.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/model.h"
#include "run_gpt.h"

#define MODEL_PATH "models/demo.bin"
#define REFS_PATH "tests/fixtures/demo_refs.json"
#define LOGITS_PATH "tests/fixtures/demo_last_logits.f32"
#define STALE "the fixtures are stale: run /usr/bin/python3 scripts/make-demo-refs.py"

static const double LOGIT_TOL = 1e-3;     // a last-position logit
static const double MARGIN_NOISE = 1e-3;  // a reference top-2 margin below this is a tie
static const double LOGPROB_TOL = 1e-3;   // one token's log-probability
static const double SUM_TOL = 1e-2;       // a window's sum

// A JSON array of integers into a new array (*n elements); NULL on a bad array.
static int32_t *json_ids(const cJSON *arr, size_t *n) {
    *n = 0;
    if (!cJSON_IsArray(arr)) return NULL;
    size_t cap = (size_t)cJSON_GetArraySize(arr);
    int32_t *ids = malloc((cap ? cap : 1) * sizeof *ids);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) ids[(*n)++] = (int32_t)it->valuedouble;
    return ids;
}

static double json_num(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static size_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

// The sha256 of a file as 64 hex digits, by coreutils' sha256sum.
static int sha256_file(const char *path, char hex[65]) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sha256sum -b '%s'", path);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int ok = fscanf(p, "%64[0-9a-f]", hex) == 1 && strlen(hex) == 64;
    return pclose(p) == 0 && ok ? 0 : -1;
}

// 1 when models/demo.bin is the file the fixtures were made from.
static int fixtures_fresh(const cJSON *refs) {
    struct stat st;
    if (stat(MODEL_PATH, &st) != 0) {
        CHECK(0, "%s: missing", MODEL_PATH);
        return 0;
    }
    char hex[65] = {0};
    const cJSON *want = cJSON_GetObjectItem(refs, "model_sha256");
    int have_sha = sha256_file(MODEL_PATH, hex) == 0;
    CHECK(have_sha, "sha256sum %s failed", MODEL_PATH);
    int fresh = (double)st.st_size == json_num(refs, "model_bytes") && cJSON_IsString(want) &&
                have_sha && strcmp(hex, want->valuestring) == 0;
    CHECK(fresh, "%s (%lld bytes, sha256 %s) is not the model of %s (%.0f bytes, sha256 %s): " STALE, MODEL_PATH,
          (long long)st.st_size, hex, REFS_PATH, json_num(refs, "model_bytes"),
          cJSON_IsString(want) ? want->valuestring : "?");
    return fresh;
}

// ---------------------------------------------------------------------------
// prompts: last-position logits and greedy decoding through the cache

static void test_prompts(const Model *m, const cJSON *refs) {
    const GPT2Config *c = &m->config;
    size_t V = (size_t)c->vocab_size, ctx = (size_t)c->n_ctx;
    GptError err = {{0}};
    char *all = NULL;  // (n_prompts, V) float32, little-endian
    size_t all_len = 0;
    if (file_read_all(LOGITS_PATH, &all, &all_len, &err) != 0) {
        CHECK(0, "%s: " STALE, err.msg);
        return;
    }
    const cJSON *prompts = cJSON_GetObjectItem(refs, "prompts");
    int n_prompts = cJSON_GetArraySize(prompts);
    CHECK(n_prompts >= 12, "%d reference prompts, want at least 12", n_prompts);
    CHECK(all_len == (size_t)n_prompts * V * 4, "%s: %zu bytes, want %d prompts x %zu logits x 4: " STALE,
          LOGITS_PATH, all_len, n_prompts, V);
    ForwardState fs;
    KVCache cache;
    if (forward_state_init(&fs, c, ctx, ctx, 1, NULL, &err) != 0 ||
        kvcache_init(&cache, c, DTYPE_F32, ctx, &err) != 0) {
        CHECK(0, "%s", err.msg);
        free(all);
        return;
    }
    double worst_logit = 0;
    size_t compared = 0, total = 0, matched_prompts = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(p, "name"));
        size_t n, n_greedy;
        int32_t *ids = json_ids(cJSON_GetObjectItem(p, "ids"), &n);
        int32_t *greedy = json_ids(cJSON_GetObjectItem(p, "greedy_ids"), &n_greedy);
        const cJSON *margins = cJSON_GetObjectItem(p, "greedy_margins");
        int offset = (int)json_num(p, "last_logits_offset");
        if (!ids || !greedy || n == 0 || n + n_greedy > ctx || cJSON_GetArraySize(margins) != (int)n_greedy ||
            offset < 0 || ((size_t)offset + 1) * V * 4 > all_len) {
            CHECK(0, "prompt %s: a malformed reference entry: " STALE, name);
            free(ids);
            free(greedy);
            continue;
        }

        // The prompt in one call: logits (V) of its last position.
        kvcache_reset(&cache);
        SeqInput s = {.tokens = ids, .n_tokens = n, .cache = &cache, .want = LOGITS_LAST};
        int ok = gpt2_forward(m, &fs, &s, 1, &err) == 0;
        CHECK(ok, "prompt %s: %s", name, err.msg);
        if (ok) {
            double d_max = 0;
            size_t at = 0;
            for (size_t i = 0; i < V; i++) {
                float want;
                memcpy(&want, all + ((size_t)offset * V + i) * 4, 4);
                double d = fabs((double)fs.logits[i] - want);
                if (!(d <= d_max)) {  // a NaN is the worst
                    d_max = d;
                    at = i;
                }
                if (d != d) break;
            }
            CHECK(d_max <= LOGIT_TOL, "prompt %s: last logits off by %.3g at id %zu (tolerance %g)", name, d_max,
                  at, LOGIT_TOL);
            if (!(d_max <= worst_logit)) worst_logit = d_max;
        }

        // Greedy, one token a call, while the reference's choice is clear.
        size_t steps = 0, same = 0;
        for (size_t g = 0; ok && g < n_greedy; g++) {
            if (cJSON_GetArrayItem(margins, (int)g)->valuedouble < MARGIN_NOISE) break;
            steps++;
            int32_t next = (int32_t)argmax(fs.logits, V);
            if (next != greedy[g]) break;
            same++;
            if (g + 1 == n_greedy) break;
            SeqInput step = {.tokens = &next, .n_tokens = 1, .cache = &cache, .want = LOGITS_LAST};
            ok = gpt2_forward(m, &fs, &step, 1, &err) == 0;
            CHECK(ok, "prompt %s, greedy step %zu: %s", name, g + 1, err.msg);
        }
        CHECK(same == steps, "prompt %s: greedy token %zu differs from the reference (margin %g there)", name,
              same, cJSON_GetArrayItem(margins, (int)same)->valuedouble);
        compared += steps;
        total += n_greedy;
        matched_prompts += steps == n_greedy && same == steps;
        free(ids);
        free(greedy);
    }
    printf("last logits: %d prompts, max |diff| %.3g (tolerance %g)\n", n_prompts, worst_logit, LOGIT_TOL);
    printf("greedy: %zu of %zu steps compared (until a reference top-2 margin < %g), all %d prompts to the end: %zu\n",
           compared, total, MARGIN_NOISE, n_prompts, matched_prompts);
    kvcache_free(&cache);
    forward_state_free(&fs);
    free(all);
}

// ---------------------------------------------------------------------------
// held-out windows: log-probabilities through score_tokens and the CLI

// Compares logprobs (n - 1) with the window's reference; returns the largest
// difference of a token's log-probability, and *d_sum the sum's.
static double compare_logprobs(const cJSON *w, const double *logprobs, size_t n, double *d_sum) {
    const cJSON *want = cJSON_GetObjectItem(w, "logprobs");
    double worst = cJSON_GetArraySize(want) == (int)(n - 1) ? 0 : INFINITY, sum = 0;
    for (size_t i = 0; i + 1 < n && worst < INFINITY; i++) {
        double d = fabs(logprobs[i] - cJSON_GetArrayItem(want, (int)i)->valuedouble);
        if (!(d <= worst)) worst = d;
        sum += logprobs[i];
    }
    *d_sum = fabs(sum - json_num(w, "sum"));
    if (*d_sum != *d_sum) *d_sum = INFINITY;
    return worst;
}

// use_blas: through OpenBLAS (gpt --blas; the matrices must be float32),
// held to the same references: an independent check of our kernels.
static void test_heldout(const Model *m, const cJSON *refs, int use_blas) {
    const cJSON *windows = cJSON_GetObjectItem(refs, "heldout_windows");
    size_t ctx = (size_t)m->config.n_ctx;
    int n_windows = cJSON_GetArraySize(windows);
    CHECK(n_windows >= 4, "%d held-out windows, want at least 4", n_windows);
    double worst_lp = 0, worst_sum = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, windows) {
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItem(w, "file"));
        int offset = (int)json_num(w, "token_offset");
        size_t n;
        int32_t *ids = json_ids(cJSON_GetObjectItem(w, "ids"), &n);
        CHECK(n == ctx, "%s at token %d: a window of %zu tokens, want the context, %zu: " STALE, file, offset, n,
              ctx);
        if (!ids || n < 2 || n > ctx) {
            free(ids);
            continue;
        }
        double *lp = malloc(n * sizeof *lp);  // (n - 1) used
        GptError err = {{0}};
        int ok = score_tokens(&(ScoreConfig){.model = m, .stride = 0, .kv_dtype = DTYPE_F32, .use_blas = use_blas}, ids, n, lp, NULL, &err) == 0;
        CHECK(ok, "%s at token %d: %s", file, offset, err.msg);
        if (ok) {
            double d_sum, d = compare_logprobs(w, lp, n, &d_sum);
            CHECK(d <= LOGPROB_TOL, "%s at token %d: a token's log-probability off by %.3g (tolerance %g)", file,
                  offset, d, LOGPROB_TOL);
            CHECK(d_sum <= SUM_TOL, "%s at token %d: the sum is off by %.3g (tolerance %g)", file, offset, d_sum,
                  SUM_TOL);
            if (!(d <= worst_lp)) worst_lp = d;
            if (!(d_sum <= worst_sum)) worst_sum = d_sum;
        }
        free(lp);
        free(ids);
    }
    printf("held-out%s: %d windows of %zu tokens, max |diff| %.3g per token (tolerance %g), %.3g per sum (%g)\n",
           use_blas ? " (OpenBLAS)" : "", n_windows, ctx, worst_lp, LOGPROB_TOL, worst_sum, SUM_TOL);
}

// The first window whose text tokenizes back to its ids, scored by
// `gpt -m models/demo.bin --score --json` with the text on stdin.
// blas: with --blas --dtype f32.
static void test_score_cli(const cJSON *refs, int blas) {
    const cJSON *w = NULL, *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(refs, "heldout_windows")) {
        if (cJSON_IsTrue(cJSON_GetObjectItem(it, "text_roundtrips")) &&
            cJSON_IsString(cJSON_GetObjectItem(it, "text"))) {
            w = it;
            break;
        }
    }
    if (!w) {
        printf("gpt --score: skipped (no window's text tokenizes back to its ids)\n");
        return;
    }
    char dir[] = "/tmp/gpt-demo-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(w, "text"));
    const char *plain[] = {"-m", MODEL_PATH, "--score", "--json", NULL};
    const char *with_blas[] = {"-m", MODEL_PATH, "--score", "--json", "--blas", "--dtype", "f32", NULL};
    const char *const *args = blas ? with_blas : plain;
    Result r = run_gpt(dir, text, strlen(text), args);
    CHECK(r.rc == 0, "gpt --score: exit %d: %s", r.rc, r.err);
    cJSON *out = r.rc == 0 ? cJSON_Parse(r.out) : NULL;
    CHECK(r.rc != 0 || out, "gpt --score --json: output does not parse: %.200s", r.out);
    if (out) {
        size_t n, n_want;
        int32_t *got = json_ids(cJSON_GetObjectItem(out, "tokens"), &n);
        int32_t *want = json_ids(cJSON_GetObjectItem(w, "ids"), &n_want);
        int same = got && want && n == n_want && memcmp(got, want, n * sizeof *got) == 0;
        CHECK(same, "gpt --score: %zu tokens differ from the window's %zu ids", n, n_want);
        const cJSON *lps = cJSON_GetObjectItem(out, "logprobs");
        // lined up with the tokens: the first has none (null)
        CHECK(cJSON_GetArraySize(lps) == (int)n && cJSON_IsNull(cJSON_GetArrayItem(lps, 0)),
              "gpt --score: %d logprobs for %zu tokens, or the first not null", cJSON_GetArraySize(lps), n);
        if (same && cJSON_GetArraySize(lps) == (int)n) {
            double *lp = malloc(n * sizeof *lp);
            for (size_t i = 0; i + 1 < n; i++) lp[i] = cJSON_GetArrayItem(lps, (int)i + 1)->valuedouble;
            double d_sum, d = compare_logprobs(w, lp, n, &d_sum);
            double d_json = fabs(json_num(out, "sum") - json_num(w, "sum"));
            CHECK(d <= LOGPROB_TOL, "gpt --score: a token's log-probability off by %.3g", d);
            CHECK(d_sum <= SUM_TOL && d_json <= SUM_TOL, "gpt --score: the sum is off by %.3g (its \"sum\" by %.3g)",
                  d_sum, d_json);
            printf("gpt --score%s: %s at token %d: max |diff| %.3g per token, %.3g on the sum\n",
                   blas ? " --blas" : "", cJSON_GetStringValue(cJSON_GetObjectItem(w, "file")), (int)json_num(w, "token_offset"), d,
                   d_json);
            free(lp);
        } else if (same) {
            CHECK(0, "gpt --score: %d log-probabilities for %zu tokens", cJSON_GetArraySize(lps), n);
        }
        free(got);
        free(want);
        cJSON_Delete(out);
    }
    result_free(&r);
    const char *names[] = {"stdin", "stdout", "stderr"};
    for (int i = 0; i < 3; i++) unlink(path_in(dir, names[i]));
    rmdir(dir);
}

int main(void) {
    char *text = NULL;
    size_t len;
    GptError err = {{0}};
    if (file_read_all(REFS_PATH, &text, &len, &err) != 0) {
        CHECK(0, "%s: " STALE, err.msg);
        return check_exit("test_demo");
    }
    cJSON *refs = cJSON_Parse(text);
    CHECK(refs != NULL, "%s does not parse: " STALE, REFS_PATH);
    Model m;
    if (refs && fixtures_fresh(refs)) {
        if (model_load(&m, MODEL_PATH, &err) != 0) {
            CHECK(0, "%s", err.msg);
        } else {
            CHECK(m.config.n_ctx == (int)json_num(refs, "window_tokens"), "context %d, the fixtures' %g: " STALE,
                  m.config.n_ctx, json_num(refs, "window_tokens"));
            test_prompts(&m, refs);
            test_heldout(&m, refs, 0);
            test_score_cli(refs, 0);
            model_free(&m);
            // the same references through OpenBLAS: float32 matrices (the
            // stored F16 widened exactly)
            WeightOptions f32 = {.matrix_dtype = DTYPE_F32};
            if (model_load_with(&m, MODEL_PATH, &f32, &err) != 0) {
                CHECK(0, "%s as f32: %s", MODEL_PATH, err.msg);
            } else {
                test_heldout(&m, refs, 1);
                test_score_cli(refs, 1);
                model_free(&m);
            }
        }
    }
    cJSON_Delete(refs);
    free(text);
    return check_exit("test_demo");
}

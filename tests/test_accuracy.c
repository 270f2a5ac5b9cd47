/*
 * test_accuracy.c - what reduced precision costs, against float32, on two
 * models:
 *   - the GPT-2 124M-shaped test checkpoint (weights are hashes: uniform
 *     noise), on real text (tests/fixtures/GPL-3.txt, the GPL version 3 as
 *     Debian ships it) in windows of 1024 tokens, greedy against Hugging
 *     Face transformers (tests/fixtures/public_refs.json);
 *   - the demo model models/demo.bin (trained weights), on its held-out
 *     texts (tests/fixtures/heldout/, never trained on) in windows of its
 *     context, greedy against the float64 reference of
 *     scripts/make-demo-refs.py (tests/fixtures/demo_refs.json).
 * For each: weights in F16, BF16, Q8, Q6, Q4 (converted at load; Q4 is
 * the mix of --dtype q4: wte, layer 0 and every attn.c_proj in Q6) and
 * q4-pure (every matrix Q4, wte too), Q8 with int8 activations (--q8-act
 * int8), and a KV cache in F16; the KL
 * divergence of each position's next-token distribution from float32's,
 * mean and largest, how often the most likely token is the same, and how
 * many prompts' 40 greedy tokens match the reference.
 *
 *   test_accuracy           the checks of `make test`: a few windows, every
 *                           prompt, bounds below
 *   test_accuracy --full    the measurement: every whole window; prints the
 *                           tables the README quotes
 *   test_accuracy --full --demo-f32 DIR
 *                           the demo's float32 baseline from DIR (the
 *                           training's Hugging Face directory) instead of
 *                           the shipped file widened: the README's f16 row
 *
 * The demo model ships with F16 matrices, so its float32 in `make test` is
 * those weights widened (exactly); F16 then costs nothing by construction
 * and BF16 and Q8 are measured from F16 (which is 1e-6 from float32 in KL,
 * measured with --demo-f32).
 *
 * The bounds are the measurements of the full run with a margin (see the
 * README's accuracy table): a kernel or quantization bug moves KL by orders
 * of magnitude, a float32 reordering by nothing visible.
 */
#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "paths.h"
#include "base/fileio.h"
#include "forward.h"
#include "greedy.h"
#include "model/kvcache.h"
#include "model/loader.h"
#include "model/tokenizer.h"

typedef struct {
    const char *name;
    const char *weights;  // a --dtype name ("q8", "q4-pure"); NULL: as the file stores them
    DType kv_dtype;
    int q8_int8;          // 1: Q8 with int8 activations (--q8-act int8)
    // bounds checked in the quick run
    double max_mean_kl, min_top1, max_kl;
    int min_greedy;     // prompts whose 40 greedy tokens match the reference
} Variant;

enum { MAX_VARIANTS = 9 };

// One model measured: variant 0 is its float32 baseline.
typedef struct {
    const char *name;
    const char *path;          // NULL: the generated 124M-shaped checkpoint
    const char *texts[3];      // scored text files
    size_t window;             // positions per scored window (full run)
    size_t quick_windows, quick_window;  // what `make test` scores
    const char *refs_file;     // greedy references
    int demo_refs;             // 1: demo_refs.json's layout, 0: public_refs.json's
    Variant variants[MAX_VARIANTS];
} Subject;

// The 124M-shaped checkpoint, full run measured (7168 positions; README):
//               mean KL    max KL     top-1    greedy
//   f16         2.32e-06   9.19e-06   99.90%   10/10
//   bf16        1.70e-04   9.76e-04   98.87%   10/10
//   q8          1.07e-03   3.69e-03   96.69%    8/10   (llama.cpp's Q8_0: 7/10;
//                                                     float32 activations, as
//                                                     before int16: 1.07e-03,
//                                                     3.68e-03, 96.68%, 8/10)
//   q6          1.76e-02   8.18e-02   86.97%    6/10   (every matrix Q6)
//   f16 kv      5.04e-08   1.02e-06   99.99%   10/10
//   q4          1.26e-01   0.521      68.58%    3/10   (--dtype q4's mix: wte,
//                                                     layer 0, attn.c_proj Q6;
//                                                     with them in Q8 before:
//                                                     0.118, 0.535, 69.27%, 4;
//                                                     llama.cpp on this text:
//                                                     Q4_K_M 0.141, 68.3%;
//                                                     Q4_0 0.266, 60.1%; the
//                                                     first mix, wte alone
//                                                     in Q8, scale m / -8:
//                                                     0.242, 1.08, 60.87%, 0)
//   q4-pure     2.65e-01   1.10       57.17%    1/10   (every matrix Q4)
// The bounds: mean and max KL x 3, top-1 1.5 points lower, greedy as
// measured for F16 and the F16 cache (the promise: 10 of 10), one
// prompt fewer for BF16 and Q6, and llama.cpp's 7 for Q8; Q6 from its
// quick run (2.11e-2, 5.94e-2, 81.05%, 6/10). Q4 from the quick run
// (0.137, 0.399, 53.52%, 3/10): x 3 would let through the first mix (wte
// alone in Q8, and each block's scale m / -8: 0.326, 0.746, 51.76%, 0/10 in
// the quick run), so mean KL x 1.5, max KL x 2, top-1 3.8 points lower, one
// prompt fewer (q4-pure's 0.281 fails it too; the demo model's bounds
// catch wte in Q4). q4-pure by q4's rule, from its quick run (0.281,
// 0.768, 45.31%, 1/10): 0.42, 1.54, 41.5%, and one prompt fewer, 0, which
// bounds nothing (its KL and top-1 bounds do). q8 x int8 (Q8 with int8
// activations, --q8-act int8) by the first rule from its quick run
// (2.57e-3, 5.21e-3, 92.19%, 9/10): it misses q8's line (top-1 0.95; the
// bf16 and q8 rows' quick run: 98.05%, 96.68%), which is why it is not
// Q8's default.
static const Subject CHECKPOINT_124M = {
    "124M-shaped checkpoint", NULL, {"tests/fixtures/GPL-3.txt"}, 1024, 1, 512,
    "tests/fixtures/public_refs.json", 0,
    {
        {"f32", NULL, DTYPE_F32, 0, 0, 1, 0, 10},
        {"f16 weights", "f16", DTYPE_F32, 0, 7e-6, 0.985, 3e-5, 10},
        {"bf16 weights", "bf16", DTYPE_F32, 0, 5e-4, 0.97, 3e-3, 9},
        {"q8 weights", "q8", DTYPE_F32, 0, 3.3e-3, 0.95, 1.1e-2, 7},
        {"q6 weights", "q6", DTYPE_F32, 0, 6.4e-2, 0.795, 0.18, 5},
        {"f16 kv cache", NULL, DTYPE_F16, 0, 1.5e-7, 0.985, 3e-6, 10},
        {"q4 weights", "q4", DTYPE_F32, 0, 0.21, 0.497, 0.8, 2},
        {"q4-pure weights", "q4-pure", DTYPE_F32, 0, 0.42, 0.415, 1.54, 0},
        {"q8 x int8", "q8", DTYPE_F32, 1, 7.7e-3, 0.9069, 1.6e-2, 8},
    },
};

// The demo model (models/demo.bin, F16 matrices), full run measured over
// its held-out texts (36608 positions in 143 windows of 256; README), from
// the shipped weights widened to float32 / from the training's float32
// (--demo-f32 build/demo/hf):
//               mean KL    max KL     top-1    greedy (13 prompts)
//   f16         0          0          100%     13     / 2.05e-07 1.18e-05 99.96% 13
//   bf16        1.19e-05   1.17e-03   99.75%   13     / 1.21e-05 1.40e-03 99.78% 13
//   q8          9.44e-05   1.15e-02   99.26%   11     / 9.52e-05 1.11e-02 99.26% 11
//   q6          1.64e-03   1.09e-01   96.59%   10     (every matrix Q6, from
//                                                     the shipped weights)
//   f16 kv      5.35e-09   5.94e-07   100.00%  13     / 2.11e-07 1.12e-05 99.96% 13
//   q4          2.83e-03   1.51e-01   95.78%    7     (from the shipped weights;
//                                                     wte, layer 0, c_proj in
//                                                     Q8 before: 1.59e-3,
//                                                     6.38e-2, 96.97%, 8; the
//                                                     first mix: 3.06e-3,
//                                                     6.93e-2, 95.69%, 8)
//   q4-pure     2.46e-02   1.30       88.39%    3     (every matrix Q4, from
//                                                     the shipped weights)
// The bounds: the same rule as above (KL x 3, top-1 1.5 points lower,
// greedy as measured, one prompt fewer for BF16, Q8, Q6 and Q4), from the
// quick run for Q6 (1.76e-3, 9.05e-2, 97.40%, 10) and Q4 (3.06e-3,
// 8.31e-2, 96.61%, 7), which wte in Q4 too would fail (2.34e-2, 0.236,
// 86.85%, 2 with the first mix); q4-pure by the same rule from its quick
// run (2.53e-2, 0.338, 86.46%, 3): 7.6e-2, 1.01, 84.96%, 2; q8 x int8 by
// the first rule from its quick run (2.52e-4, 5.46e-3, 98.18%, 10). F16 is the
// shipped weights, so it must give float32's logits exactly.
static const Subject DEMO = {
    "demo model", "models/demo.bin",
    {"tests/fixtures/heldout/sotu-2021.txt", "tests/fixtures/heldout/revelation.txt",
     "tests/fixtures/heldout/moby-dick-134-135.txt"},
    0, 3, 0,  // windows of the model's context
    "tests/fixtures/demo_refs.json", 1,
    {
        {"f32", "f32", DTYPE_F32, 0, 0, 1, 0, 13},
        {"f16 weights", NULL, DTYPE_F32, 0, 0, 1, 0, 13},
        {"bf16 weights", "bf16", DTYPE_F32, 0, 3.6e-5, 0.9825, 3.5e-3, 12},
        {"q8 weights", "q8", DTYPE_F32, 0, 2.8e-4, 0.9776, 3.5e-2, 10},
        {"q6 weights", "q6", DTYPE_F32, 0, 5.3e-3, 0.959, 0.27, 9},
        {"f16 kv cache", NULL, DTYPE_F16, 0, 1.6e-8, 0.985, 1.8e-6, 13},
        {"q4 weights", "q4", DTYPE_F32, 0, 9.2e-3, 0.9511, 0.25, 6},
        {"q4-pure weights", "q4-pure", DTYPE_F32, 0, 7.6e-2, 0.8496, 1.01, 2},
        {"q8 x int8", "q8", DTYPE_F32, 1, 7.6e-4, 0.9668, 1.6e-2, 9},
    },
};

enum { N_VARIANTS = MAX_VARIANTS, CHUNK = 128 };

// Under a sanitizer (check.h) the 124M-shaped checkpoint's greedy part
// decodes its first SANITIZED_PROMPTS prompts, not all ten (every prompt
// runs the same code; make test runs them all), and a variant may miss as
// many of them as it may of all.
enum { SANITIZED_PROMPTS = 2 };

// softmax of a row in double: p (V)
static void softmax(double *p, const float *logits, size_t V) {
    double max = -INFINITY, sum = 0;
    for (size_t i = 0; i < V; i++) max = logits[i] > max ? logits[i] : max;
    for (size_t i = 0; i < V; i++) sum += p[i] = exp((double)logits[i] - max);
    for (size_t i = 0; i < V; i++) p[i] /= sum;
}

typedef struct {
    double kl_sum, kl_max;
    size_t positions, top1_same;
    int greedy;
} Result;

// Scores ids[0..n) with every variant in lockstep, chunk by chunk, and adds
// KL(f32 || variant) and top-1 agreement per position to res.
static ThreadPool *pool;

static void score_window(const Variant *VARIANTS, Model *models, const int32_t *ids, size_t n, Result *res) {
    const GPT2Config *c = &models[0].config;
    size_t V = (size_t)c->vocab_size;
    GptError err = {{0}};
    ForwardState fs[N_VARIANTS];
    KVCache kv[N_VARIANTS];
    double *p = malloc(V * sizeof *p), *q = malloc(V * sizeof *q);
    for (int v = 0; v < N_VARIANTS; v++) {
        if (forward_state_init(&fs[v], c, CHUNK, n, CHUNK, pool, &err) != 0 ||
            kvcache_init(&kv[v], c, VARIANTS[v].kv_dtype, n, &err) != 0) {
            CHECK(0, "%s: %s", VARIANTS[v].name, err.msg);
            free(p);
            free(q);
            return;
        }
    }
    for (size_t start = 0; start < n; start += CHUNK) {
        size_t len = n - start < CHUNK ? n - start : CHUNK;
        for (int v = 0; v < N_VARIANTS; v++) {
            SeqInput s = {.tokens = ids + start, .n_tokens = len, .cache = &kv[v], .want = LOGITS_ALL};
            CHECK(gpt2_forward(&models[v], &fs[v], &s, 1, &err) == 0, "%s: %s", VARIANTS[v].name, err.msg);
        }
        for (size_t t = 0; t < len; t++) {
            const float *ref = fs[0].logits + t * V;
            softmax(p, ref, V);
            size_t top = argmax(ref, V);
            for (int v = 1; v < N_VARIANTS; v++) {
                const float *got = fs[v].logits + t * V;
                softmax(q, got, V);
                double kl = 0;
                for (size_t i = 0; i < V; i++)
                    if (p[i] > 0) kl += p[i] * (log(p[i]) - log(q[i] > 0 ? q[i] : 1e-300));
                res[v].kl_sum += kl;
                res[v].kl_max = kl > res[v].kl_max ? kl : res[v].kl_max;
                res[v].positions++;
                res[v].top1_same += argmax(got, V) == top;
            }
        }
    }
    for (int v = 0; v < N_VARIANTS; v++) {
        forward_state_free(&fs[v]);
        kvcache_free(&kv[v]);
    }
    free(p);
    free(q);
}

// Loads every variant of sub (the baseline from f32_path if given), scores
// its texts and greedy prompts, prints the table and, unless full, checks
// the bounds. Returns 0, or -1 if the model or fixtures are missing.
static int measure(const Subject *sub, int full, const char *f32_path) {
    const Variant *VARIANTS = sub->variants;
    char path[2048];
    snprintf(path, sizeof path, "%s", sub->path ? sub->path : ckpt("gpt2-124M-shaped"));
    GptError err = {{0}};
    Model models[N_VARIANTS];
    for (int v = 0; v < N_VARIANTS; v++) {
        WeightOptions o = {.matrix_dtype = -1};
        if (VARIANTS[v].weights && weight_options_from_name(VARIANTS[v].weights, &o) != 0) {
            CHECK(0, "%s, %s: %s is no weight dtype", sub->name, VARIANTS[v].name, VARIANTS[v].weights);
            for (int k = 0; k < v; k++) model_free(&models[k]);
            return -1;
        }
        o.q8_int8 = VARIANTS[v].q8_int8;
        const char *from = v == 0 && f32_path ? f32_path : path;
        if (model_load_with(&models[v], from, &o, &err) != 0) {
            CHECK(0, "%s, %s: %s", sub->name, VARIANTS[v].name, err.msg);
            for (int k = 0; k < v; k++) model_free(&models[k]);
            return -1;
        }
    }
    size_t window = sub->window ? sub->window : (size_t)models[0].config.n_ctx;
    size_t quick_window = sub->quick_window ? sub->quick_window : window;
    Tokenizer *tok = tokenizer_load("models", &err);
    char *refs_text = NULL;
    size_t refs_len;
    CHECK(tok && file_read_all(sub->refs_file, &refs_text, &refs_len, &err) == 0, "fixtures: %s", err.msg);
    Result res[N_VARIANTS] = {{0}};
    size_t windows_done = 0, quick_left = sub->quick_windows;
    for (int t = 0; tok && t < 3 && sub->texts[t]; t++) {
        char *text = NULL;
        size_t len, n_ids = 0;
        int32_t *ids = NULL;
        if (file_read_all(sub->texts[t], &text, &len, &err) != 0 ||
            tokenizer_encode(tok, text, len, 0, &ids, &n_ids, &err) != 0) {
            CHECK(0, "%s: %s", sub->texts[t], err.msg);
            free(text);
            continue;
        }
        // full: every whole window; quick: the first quick_window tokens of
        // each text, until quick_windows are scored
        size_t w_len = full ? window : quick_window, n_w = full ? n_ids / window : (quick_left ? 1 : 0);
        for (size_t w = 0; w < n_w && (w + 1) * w_len <= n_ids; w++, windows_done++)
            score_window(VARIANTS, models, ids + w * w_len, w_len, res);
        if (!full && quick_left) quick_left--;
        free(text);
        free(ids);
    }
    cJSON *refs = cJSON_Parse(refs_text ? refs_text : "");
    const cJSON *cases = sub->demo_refs ? cJSON_GetObjectItem(refs, "prompts")
                                        : cJSON_GetObjectItem(cJSON_GetObjectItem(refs, "models"), "gpt2-124M-shaped");
    int n_all = cJSON_GetArraySize(cases);
    cJSON *some = NULL;
    if (CHECK_SANITIZED && !full && !sub->demo_refs && n_all > SANITIZED_PROMPTS && (some = cJSON_CreateArray())) {
        for (int i = 0; i < SANITIZED_PROMPTS; i++) cJSON_AddItemReferenceToArray(some, cJSON_GetArrayItem(cases, i));
        cases = some;
    }
    int n_prompts = cJSON_GetArraySize(cases);
    for (int v = 0; v < N_VARIANTS; v++) {
        res[v].greedy = greedy_matches(&models[v], VARIANTS[v].kv_dtype, pool, cases, &err);
        CHECK(res[v].greedy >= 0, "%s: %s", VARIANTS[v].name, err.msg);
    }
    CHECK(n_all >= 10, "%s: %d greedy prompts in %s", sub->name, n_all, sub->refs_file);

    printf("%s: %zu positions in %zu window(s) of %zu tokens; greedy: 40 tokens of %d prompts%s%s\n", sub->name,
           res[1].positions, windows_done, full ? window : quick_window, n_prompts,
           some ? " (the first ones: a sanitizer build)" : "",
           f32_path ? " (float32 from the training's directory)" : "");
    printf("  %-15s %12s %12s %10s %8s\n", "variant", "mean KL", "max KL", "top-1 same", "greedy");
    for (int v = 0; v < N_VARIANTS; v++) {
        const Variant *x = &VARIANTS[v];
        double mean = v ? res[v].kl_sum / (double)res[v].positions : 0;
        double top1 = v ? (double)res[v].top1_same / (double)res[v].positions : 1;
        printf("  %-15s %12.3g %12.3g %9.2f%% %5d/%d\n", x->name, mean, res[v].kl_max, 100 * top1, res[v].greedy,
               n_prompts);
        if (full) continue;
        int min_greedy = x->min_greedy - (n_all - n_prompts);  // as many misses allowed
        CHECK(res[v].greedy >= min_greedy, "%s, %s: greedy matches the reference on %d of %d prompts, want >= %d",
              sub->name, x->name, res[v].greedy, n_prompts, min_greedy);
        if (v == 0) continue;
        CHECK(mean <= x->max_mean_kl, "%s, %s: mean KL %.3g > %.3g", sub->name, x->name, mean, x->max_mean_kl);
        CHECK(res[v].kl_max <= x->max_kl, "%s, %s: max KL %.3g > %.3g", sub->name, x->name, res[v].kl_max,
              x->max_kl);
        CHECK(top1 >= x->min_top1, "%s, %s: top-1 agrees on %.4f of positions, want >= %.4f", sub->name, x->name,
              top1, x->min_top1);
    }
    cJSON_Delete(some);
    cJSON_Delete(refs);
    free(refs_text);
    tokenizer_free(tok);
    for (int v = 0; v < N_VARIANTS; v++) model_free(&models[v]);
    return 0;
}

int main(int argc, char **argv) {
    int full = 0;
    const char *demo_f32 = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--full")) full = 1;
        else if (!strcmp(argv[i], "--demo-f32") && i + 1 < argc) demo_f32 = argv[++i];
        else {
            fprintf(stderr, "usage: test_accuracy [--full [--demo-f32 DIR]]\n");
            return 2;
        }
    }
    GptError perr = {{0}};
    pool = threadpool_create(2, &perr);
    if (!demo_f32) measure(&CHECKPOINT_124M, full, NULL);
    measure(&DEMO, full, demo_f32);
    threadpool_free(pool);
    return check_exit("test_accuracy");
}

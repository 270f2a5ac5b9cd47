/*
 * score.h - scoring: the log-probability of each token of a text given the
 * ones before it (gpt --score, POST /v1/score), with the same rows and bits
 * as generation's log-probabilities (logprobs.h).
 */
#ifndef GPT_SCORE_H
#define GPT_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/threads.h"
#include "forward.h"
#include "kernels/matmul.h"
#include "model/model.h"

// Scoring: logprobs[i] = log p(ids[i + 1] | what comes before it) for
// i < n - 1, in double. A text that fits the context is one window. A longer
// one needs cfg->stride (1 <= stride <= the context): windows of the context
// start every stride tokens, and each scores only the tokens the window
// before it did not (Hugging Face's perplexity recipe, llama-perplexity's
// too): each token is scored once, with at least context - stride tokens
// before it once the first window is past. The model runs in chunks of
// SCORE_CHUNK tokens. cfg->progress (may be NULL) is told after each chunk how far it is.
// Returns 0, or -1 with err set.
enum { SCORE_CHUNK = 128 };
typedef struct {
    size_t windows;          // windows run
    size_t tokens_run;       // positions run through the model (more than n with overlap)
    double seconds;          // wall time
    size_t kv_bytes;         // the cache it allocated
} ScoreStats;
typedef struct {
    // scored of the total (n - 1) log-probabilities are done, in windows windows
    void (*report)(void *ctx, size_t scored, size_t total, size_t windows);
    void *ctx;
} ScoreProgress;
// How to score: the model and how to run it. Zeros are the defaults (no
// stride, F32 cache, one thread, gpt's kernels, the default variants).
typedef struct {
    const Model *model;
    size_t stride;               // 0: the text must fit the context
    DType kv_dtype;              // F32 or F16
    ThreadPool *pool;            // NULL: one thread
    int use_blas;                // long chunks through OpenBLAS (blas.h; not bitwise)
    const MatmulPlan *plan;      // the matmul variants (tune.h; NULL: the default): the same bits
    const ScoreProgress *progress;  // NULL: none
} ScoreConfig;
int score_tokens(const ScoreConfig *cfg, const int32_t *ids, size_t n, double *logprobs, ScoreStats *stats,
                 GptError *err);

#endif

/*
 * score.c - log-probabilities of a text's tokens (score.h): the model over
 * windows of the context, logits for the rows whose targets are new.
 */
#include "score.h"

#include "base/clock.h"
#include "logprobs.h"

int score_tokens(const ScoreConfig *cfg, const int32_t *ids, size_t n, double *logprobs, ScoreStats *stats,
                 GptError *err) {
    const Model *m = cfg->model;
    const GPT2Config *c = &m->config;
    size_t stride = cfg->stride;
    const ScoreProgress *progress = cfg->progress;
    size_t V = (size_t)c->vocab_size, ctx = (size_t)c->n_ctx;
    if (n < 1) return gpt_error(err, "the text is empty");
    if (n > ctx && !stride)
        return gpt_error(err, "the text is %zu tokens; the model's context holds %d", n, c->n_ctx);
    if (stride > ctx) return gpt_error(err, "stride %zu: must be at most the context, %d", stride, c->n_ctx);
    size_t window = n < ctx ? n : ctx;
    KVCache cache = {0};
    ForwardState fs = {0};
    ScoreStats st = {0};
    int rc = -1;
    // Logits for SCORE_CHUNK rows at a time, whatever the length.
    if (kvcache_init(&cache, c, cfg->kv_dtype, window, err) != 0 ||
        forward_state_init(&fs, c, window < SCORE_CHUNK ? window : SCORE_CHUNK, window, SCORE_CHUNK, cfg->pool, err) != 0 ||
        (cfg->use_blas && forward_state_use_blas(&fs, c, err) != 0))
        goto done;
    if (cfg->plan) fs.plan = *cfg->plan;
    CpuIsa isa = cpu_best_isa();
    double t0 = now_seconds();
    size_t scored_to = 1;  // targets [1, scored_to) are done
    size_t scored = 0;     // log-probabilities written
    for (size_t begin = 0; scored_to < n || begin == 0; begin += stride) {
        size_t end = begin + window < n ? begin + window : n;
        kvcache_reset(&cache);
        st.windows++;
        // Rows before first_row predict targets an earlier window scored:
        // they are run for the cache alone, without the logits (which cost
        // about a third of a row's work). Chunking does not change the bits.
        size_t first_row = scored_to - 1 > begin ? scored_to - 1 : begin;
        for (size_t start = begin, len; start < end; start += len) {
            size_t stop = start < first_row ? first_row : end;
            len = stop - start < SCORE_CHUNK ? stop - start : SCORE_CHUNK;
            SeqInput seq = {.tokens = ids + start, .n_tokens = len, .cache = &cache,
                            .want = start < first_row ? LOGITS_NONE : LOGITS_ALL};
            if (gpt2_forward(m, &fs, &seq, 1, err) != 0) goto done;
            st.tokens_run += len;
            // Row i predicts token start + i + 1; only the targets not scored yet.
            for (size_t i = 0; seq.want == LOGITS_ALL && i < len; i++) {
                size_t target = start + i + 1;
                if (target < scored_to || target >= end) continue;
                const float *row = fs.logits + (seq.logits_row + i) * V;
                LogitsSummary sum;
                logits_summarize(row, V, 0, isa, &sum);
                logprobs[target - 1] = logprob_of(&sum, row, ids[target]);
                scored++;
            }
            if (progress && progress->report) progress->report(progress->ctx, scored, n - 1, st.windows);
        }
        if (end > scored_to) scored_to = end;
        if (end == n || !stride) break;
    }
    st.seconds = now_seconds() - t0;
    st.kv_bytes = kvcache_bytes_allocated(&cache);
    if (stats) *stats = st;
    rc = 0;
done:
    forward_state_free(&fs);
    kvcache_free(&cache);
    return rc;
}

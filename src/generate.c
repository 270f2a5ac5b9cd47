/*
 * generate.c - the generation engine and scoring. See generate.h.
 *
 * One step, for the sequences given:
 *   1. the batch: each decoding sequence feeds the token it sampled last;
 *      each sequence still reading its prompt feeds the next chunk that fits
 *      in the step's token budget (logits only when the chunk ends the prompt);
 *   2. one gpt2_forward over all of it;
 *   3. each sequence with logits samples, appends the id, turns it into text
 *      and checks its stop conditions, in the order the command line always
 *      had: length, then the end of the context, then <|endoftext|>.
 */
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

const char *stop_reason_name(StopReason r) {
    switch (r) {
    case STOP_NONE: return "";
    case STOP_EOS: return "eos";
    case STOP_LENGTH: return "length";
    case STOP_CONTEXT: return "context";
    case STOP_ERROR: return "error";
    }
    return "";
}

int engine_init(Engine *e, const Model *m, const Tokenizer *tok, size_t max_seqs,
                size_t max_step_tokens, DType kv_dtype, ThreadPool *pool, GptError *err) {
    memset(e, 0, sizeof *e);
    if (max_seqs < 1 || max_step_tokens < max_seqs)
        return gpt_error(err, "engine: %zu sequences and %zu tokens per step do not fit", max_seqs,
                         max_step_tokens);
    e->model = m;
    e->tok = tok;
    e->eot = tokenizer_eot_id(tok);
    e->max_seqs = max_seqs;
    e->max_step_tokens = max_step_tokens;
    e->kv_dtype = kv_dtype;
    e->inputs = calloc(max_seqs, sizeof *e->inputs);
    e->which = calloc(max_seqs, sizeof *e->which);
    e->prefilling = calloc(max_seqs, sizeof *e->prefilling);
    if (!e->inputs || !e->which || !e->prefilling) {
        engine_free(e);
        return gpt_error(err, "engine: out of memory");
    }
    if (forward_state_init(&e->fs, &m->config, max_step_tokens, (size_t)m->config.n_ctx, max_seqs, pool,
                           err) != 0 ||
        sampler_scratch_init(&e->scratch, (size_t)m->config.vocab_size, err) != 0) {
        engine_free(e);
        return -1;
    }
    return 0;
}

void engine_free(Engine *e) {
    if (!e) return;
    forward_state_free(&e->fs);
    sampler_scratch_free(&e->scratch);
    free(e->inputs);
    free(e->which);
    free(e->prefilling);
    memset(e, 0, sizeof *e);
}

int sequence_init(Sequence *s, const Engine *e, const int32_t *prompt, size_t n_prompt,
                  const GenParams *p, GptError *err) {
    memset(s, 0, sizeof *s);
    token_stream_init(&s->stream);
    s->last_token = -1;
    const GPT2Config *c = &e->model->config;
    if (n_prompt < 1 || n_prompt > (size_t)c->n_ctx)
        return gpt_error(err, "the prompt is %zu tokens; the model's context holds %d", n_prompt,
                         c->n_ctx);
    // Everything the run can hold: the prompt and the new tokens, at most the
    // context. The last new token is never fed back, so it needs no position.
    size_t room = (size_t)c->n_ctx - n_prompt;
    size_t capacity = n_prompt + (p->max_new < room ? p->max_new : room);
    s->tokens = malloc((capacity + 1) * sizeof *s->tokens);
    if (!s->tokens) return gpt_error(err, "out of memory for %zu tokens", capacity);
    memcpy(s->tokens, prompt, n_prompt * sizeof *prompt);
    s->n_tokens = s->n_prompt = n_prompt;
    s->max_new = p->max_new;
    s->ignore_eos = p->ignore_eos;
    if (kvcache_init(&s->cache, c, e->kv_dtype, capacity, err) != 0 ||
        sampler_init_shared(&s->sampler, &p->sampling, (SamplerScratch *)&e->scratch, err) != 0)
        return -1;
    return 0;
}

void sequence_free(Sequence *s) {
    if (!s) return;
    free(s->tokens);
    free(s->out);
    kvcache_free(&s->cache);
    sampler_free(&s->sampler);
    token_stream_free(&s->stream);
    memset(s, 0, sizeof *s);
}

// Appends bytes to the step's output.
static int out_append(Sequence *s, const char *p, size_t n) {
    if (s->out_len + n > s->out_cap) {
        size_t cap = (s->out_len + n) * 2 + 64;
        char *bigger = realloc(s->out, cap);
        if (!bigger) return -1;
        s->out = bigger;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return 0;
}

static void stop(Sequence *s, StopReason why) {
    s->stop = why;
    const char *tail;
    size_t n;
    token_stream_flush(&s->stream, &tail, &n);
    if (out_append(s, tail, n) != 0 && why != STOP_ERROR) {
        s->stop = STOP_ERROR;
        gpt_error(&s->error, "out of memory");
    }
}

// One draw from the logits of s's last position, and what follows from it.
static void sample_next(Engine *e, Sequence *s, float *logits) {
    size_t n_ctx = (size_t)e->model->config.n_ctx;
    if (s->n_generated >= s->max_new) return stop(s, STOP_LENGTH);
    if (s->n_tokens >= n_ctx) return stop(s, STOP_CONTEXT);
    int32_t next = sampler_sample(&s->sampler, logits, s->tokens, s->n_tokens);
    if (next < 0) {
        gpt_error(&s->error, "the model produced no usable logits (NaN or infinite)");
        return stop(s, STOP_ERROR);
    }
    if (next == e->eot && !s->ignore_eos) return stop(s, STOP_EOS);
    s->tokens[s->n_tokens++] = next;
    s->n_generated++;
    s->last_token = next;
    const char *text;
    size_t len;
    if (token_stream_push(&s->stream, e->tok, next, &text, &len, &s->error) != 0 ||
        out_append(s, text, len) != 0) {
        if (!s->error.msg[0]) gpt_error(&s->error, "out of memory");
        return stop(s, STOP_ERROR);
    }
    if (s->n_generated >= s->max_new) return stop(s, STOP_LENGTH);
    if (s->n_tokens >= n_ctx) return stop(s, STOP_CONTEXT);
}

int engine_step(Engine *e, Sequence *const *seqs, size_t n, GptError *err) {
    if (n > e->max_seqs)
        return gpt_error(err, "engine: %zu sequences in one step, at most %zu", n, e->max_seqs);
    // The batch: decodes first (one token each), then prompt chunks in the
    // budget that is left.
    size_t budget = e->max_step_tokens, n_in = 0;
    size_t *which = e->which;                // input j is sequence which[j]
    unsigned char *prefilling = e->prefilling;  // of sequence i
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            Sequence *s = seqs[i];
            if (s->stop) continue;
            s->out_len = 0;
            s->last_token = -1;
            size_t at = s->cache.n_tokens;
            int decoding = at >= s->n_prompt;
            if (decoding != (pass == 0) || budget == 0) continue;
            size_t take = decoding ? 1 : s->n_prompt - at;
            if (take > budget) take = budget;
            e->inputs[n_in] = (SeqInput){.tokens = s->tokens + at, .n_tokens = take, .cache = &s->cache,
                                        .want = at + take >= s->n_prompt ? LOGITS_LAST : LOGITS_NONE};
            prefilling[i] = !decoding;
            which[n_in++] = i;
            budget -= take;
        }
    }
    double t0 = now_seconds();
    int rc = gpt2_forward(e->model, &e->fs, e->inputs, n_in, err);
    double t1 = now_seconds();
    if (rc == 0) {
        size_t V = (size_t)e->model->config.vocab_size;
        for (size_t j = 0; j < n_in; j++) {
            Sequence *s = seqs[which[j]];
            double ts = now_seconds();
            if (e->inputs[j].want == LOGITS_LAST)
                sample_next(e, s, e->fs.logits + e->inputs[j].logits_row * V);
            double sample_seconds = now_seconds() - ts;
            if (prefilling[which[j]]) {
                s->prefill_tokens += e->inputs[j].n_tokens;
                s->prefill_seconds += t1 - t0;
                s->decode_seconds += sample_seconds;
            } else {
                s->decode_tokens += 1;
                s->decode_seconds += t1 - t0 + sample_seconds;
            }
        }
    }
    return rc;
}

// ---------------------------------------------------------------------------
// scoring

// log p(target | row) for one row of logits, in double.
static double log_softmax_at(const float *logits, size_t V, int32_t target) {
    double max = -INFINITY;
    for (size_t i = 0; i < V; i++)
        if (logits[i] > max) max = logits[i];
    double sum = 0.0;
    for (size_t i = 0; i < V; i++) sum += exp((double)logits[i] - max);
    return (double)logits[target] - max - log(sum);
}

int score_tokens(const Model *m, const int32_t *ids, size_t n, DType kv_dtype, ThreadPool *pool,
                 double *logprobs, double *seconds, size_t *kv_bytes, GptError *err) {
    const GPT2Config *c = &m->config;
    size_t V = (size_t)c->vocab_size;
    if (n < 1 || n > (size_t)c->n_ctx)
        return gpt_error(err, "the text is %zu tokens; the model's context holds %d", n, c->n_ctx);
    KVCache cache = {0};
    ForwardState fs = {0};
    int rc = -1;
    // Logits for SCORE_CHUNK rows at a time, whatever the length.
    if (kvcache_init(&cache, c, kv_dtype, n, err) != 0 ||
        forward_state_init(&fs, c, n < SCORE_CHUNK ? n : SCORE_CHUNK, n, SCORE_CHUNK, pool, err) != 0)
        goto done;
    double t0 = now_seconds();
    for (size_t start = 0; start < n; start += SCORE_CHUNK) {
        size_t len = n - start < SCORE_CHUNK ? n - start : SCORE_CHUNK;
        SeqInput seq = {.tokens = ids + start, .n_tokens = len, .cache = &cache, .want = LOGITS_ALL};
        if (gpt2_forward(m, &fs, &seq, 1, err) != 0) goto done;
        // Row i predicts token start + i + 1.
        for (size_t i = 0; i < len && start + i + 1 < n; i++)
            logprobs[start + i] = log_softmax_at(fs.logits + (seq.logits_row + i) * V, V, ids[start + i + 1]);
    }
    if (seconds) *seconds = now_seconds() - t0;
    if (kv_bytes) *kv_bytes = kvcache_bytes_allocated(&cache);
    rc = 0;
done:
    forward_state_free(&fs);
    kvcache_free(&cache);
    return rc;
}

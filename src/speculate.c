/*
 * speculate.c - drafts for speculative decoding. See speculate.h.
 */
#include "speculate.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

// Prompt tokens the draft model runs per call while it catches up.
enum { DRAFT_CHUNK = 64 };

static int draft_buffers(Draft *d, size_t max_positions, size_t max_guesses, GptError *err) {
    d->max_positions = max_positions;
    d->max_guesses = max_guesses;
    d->history = malloc((max_positions + max_guesses) * sizeof *d->history);
    d->uniforms = malloc(max_guesses * sizeof *d->uniforms);
    d->guesses = malloc(max_guesses * sizeof *d->guesses);
    if (!d->history || !d->uniforms || !d->guesses) return gpt_error(err, "draft: out of memory");
    return 0;
}

int draft_init_model(Draft *d, const Model *draft, const SamplerParams *p, size_t max_positions,
                     size_t max_guesses, ThreadPool *pool, GptError *err) {
    memset(d, 0, sizeof *d);
    if (max_positions < 1 || max_guesses < 1) return gpt_error(err, "draft: no positions or no guesses");
    d->model = draft;
    // Its cache holds what its context allows: past it, it guesses nothing.
    size_t ctx = (size_t)draft->config.n_ctx, cap = max_positions < ctx ? max_positions : ctx;
    size_t chunk = cap < DRAFT_CHUNK ? cap : DRAFT_CHUNK;
    if (draft_buffers(d, max_positions, max_guesses, err) != 0 ||
        kvcache_init(&d->cache, &draft->config, DTYPE_F32, cap, err) != 0 ||
        forward_state_init(&d->fs, &draft->config, chunk, cap, 1, pool, err) != 0 ||
        sampler_init(&d->sampler, p, (size_t)draft->config.vocab_size, err) != 0)
        return -1;
    return 0;
}

int draft_init_lookup(Draft *d, size_t n, size_t max_positions, size_t max_guesses, GptError *err) {
    memset(d, 0, sizeof *d);
    if (n < 1 || max_guesses < 1) return gpt_error(err, "draft: lookup of %zu-grams, %zu guesses", n, max_guesses);
    d->lookup_n = n;
    return draft_buffers(d, max_positions, max_guesses, err);
}

void draft_free(Draft *d) {
    if (!d) return;
    forward_state_free(&d->fs);
    kvcache_free(&d->cache);
    sampler_free(&d->sampler);
    free(d->history);
    free(d->uniforms);
    free(d->guesses);
    memset(d, 0, sizeof *d);
}

// Prompt lookup: the tokens after the last earlier occurrence of the last
// n tokens.
static size_t lookup(const Draft *d, const int32_t *tokens, size_t n, size_t k, int32_t *out) {
    size_t N = d->lookup_n;
    if (n < N + 1) return 0;
    const int32_t *gram = tokens + n - N;
    for (size_t j = n - N; j-- > 0;) {
        if (memcmp(tokens + j, gram, N * sizeof *gram) != 0) continue;
        size_t from = j + N, count = n - from < k ? n - from : k;
        memcpy(out, tokens + from, count * sizeof *out);
        return count;
    }
    return 0;
}

// The draft model: catch its cache up with tokens[0..n - 1) (what it saw
// and the sequence kept, plus what is new), then decode k tokens, each
// sampled with the number the sequence will use at that position.
static int model_guesses(Draft *d, const int32_t *tokens, size_t n, size_t k, const double *u, int32_t *out,
                         GptError *err) {
    KVCache *c = &d->cache;
    // Every guess but the last is run through the draft: n + k - 1 positions.
    if (n > c->max_positions) return 0;
    if (k > c->max_positions + 1 - n) k = c->max_positions + 1 - n;
    if (k == 0) return 0;
    size_t copies, valid = c->n_tokens < n - 1 ? c->n_tokens : n - 1;
    if (kvcache_truncate(c, valid, &copies) != 0) return gpt_error(err, "draft: its cache would not truncate");
    memcpy(d->history, tokens, n * sizeof *tokens);
    size_t V = (size_t)d->model->config.vocab_size, guessed = 0;
    SeqInput in = {.cache = c};
    // the tokens it has not seen, in chunks; the last chunk gives the logits
    for (size_t at = valid; at < n; at += in.n_tokens) {
        in.tokens = tokens + at;
        in.n_tokens = n - at < d->fs.max_tokens ? n - at : d->fs.max_tokens;
        in.want = at + in.n_tokens == n ? LOGITS_LAST : LOGITS_NONE;
        if (gpt2_forward(d->model, &d->fs, &in, 1, err) != 0) return -1;
        d->guesses_run += in.n_tokens;
    }
    for (;;) {
        int32_t g = sampler_sample_u(&d->sampler, d->fs.logits + in.logits_row * V, d->history, n + guessed,
                                     u[guessed]);
        if (g < 0) break;  // no usable logits: no more guesses
        d->history[n + guessed] = out[guessed] = g;
        if (++guessed == k) break;
        in = (SeqInput){.tokens = out + guessed - 1, .n_tokens = 1, .cache = c, .want = LOGITS_LAST};
        if (gpt2_forward(d->model, &d->fs, &in, 1, err) != 0) return -1;
        d->guesses_run++;
    }
    return (int)guessed;
}

int draft_propose(Draft *d, const int32_t *tokens, size_t n, size_t k, const double *u, int32_t *out,
                  GptError *err) {
    if (k > d->max_guesses) k = d->max_guesses;
    if (n < 1 || n > d->max_positions || k == 0) return 0;
    if (!d->model) return (int)lookup(d, tokens, n, k, out);
    return model_guesses(d, tokens, n, k, u, out, err);
}

int speculate_step(Engine *e, Sequence *s, Draft *d, size_t k, GptError *err) {
    size_t room = sequence_verify_room(s, e);
    if (k > room) k = room;
    if (k > d->max_guesses) k = d->max_guesses;
    if (k == 0) return engine_step_verify(e, s, NULL, 0, err);
    double t0 = now_seconds();
    sequence_next_uniforms(s, d->uniforms, k);
    // the model's window: after a context shift, other ids at its positions
    if (s->shifts != d->shifts_seen) {
        size_t copies;
        if (d->model && kvcache_truncate(&d->cache, 0, &copies) != 0)
            return gpt_error(err, "draft: its cache would not truncate");
        d->shifts_seen = s->shifts;
    }
    size_t n;
    const int32_t *window = sequence_context(s, &n);
    int guessed = draft_propose(d, window, n, k, d->uniforms, d->guesses, err);
    double spent = now_seconds() - t0;
    d->seconds += spent;
    s->decode_seconds += spent;
    if (guessed < 0) return -1;
    return engine_step_verify(e, s, d->guesses, (size_t)guessed, err);
}

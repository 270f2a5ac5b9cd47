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
    grammar_matcher_free(d->grammar);
    free(d->mask);
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

// A constrained sequence's guesses (DraftGrammar): the draft's matcher at
// the sequence's state, and its mask buffer. 0, or -1 (no memory: no
// guesses, the run goes on).
static int grammar_start(Draft *d, const DraftGrammar *g) {
    GptError e = {{0}};
    size_t words = GRAMMAR_MASK_WORDS(g->vocab);
    if (d->mask_words < words) {
        free(d->mask);
        d->mask_words = 0;
        if (!(d->mask = malloc(words * sizeof *d->mask))) return -1;
        d->mask_words = words;
    }
    // a copy each step: the draft may serve sequences of other grammars
    grammar_matcher_free(d->grammar);
    return (d->grammar = grammar_matcher_copy(g->state, &e)) ? 0 : -1;
}

// Whether the guess t may follow the guesses before it: not <|endoftext|>
// (the row before it draws the end anyway), a token of bytes the draft's
// matcher reads (it is then advanced past them). *done: no byte can follow
// it, so the sequence would stop there.
static int grammar_takes(Draft *d, const DraftGrammar *g, int32_t t, int *done) {
    GptError e = {{0}};
    size_t nb = 0;
    const unsigned char *b = t == g->eos ? NULL : tokenizer_token_bytes(g->tok, t, &nb);
    if (!b || nb == 0 || grammar_matcher_feed(d->grammar, b, nb, &e) != 0) return 0;
    *done = grammar_matcher_is_done(d->grammar);
    return 1;
}

// Lookup's guesses under a grammar: those before the first it forbids, up
// to the one after which nothing can follow.
static size_t grammar_cut(Draft *d, const DraftGrammar *g, const int32_t *out, size_t count) {
    if (grammar_start(d, g) != 0) return 0;
    size_t kept = 0;
    int done = 0;
    while (kept < count && !done && grammar_takes(d, g, out[kept], &done)) kept++;
    return kept;
}

// The draft model: catch its cache up with tokens[0..n - 1) (what it saw
// and the sequence kept, plus what is new), then decode k tokens, each
// sampled with the number the sequence will use at that position.
// Under a grammar, each guess is drawn with the mask of the state the
// guesses before it lead to; they end as grammar_takes says.
static int model_guesses(Draft *d, const int32_t *tokens, size_t n, size_t k, const double *u,
                         const DraftGrammar *g, int32_t *out, GptError *err) {
    KVCache *c = &d->cache;
    // Every guess but the last is run through the draft: n + k - 1 positions.
    if (n > c->max_positions) return 0;
    if (k > c->max_positions + 1 - n) k = c->max_positions + 1 - n;
    if (k == 0) return 0;
    size_t V = (size_t)d->model->config.vocab_size, guessed = 0;
    if (g && (g->vocab != V || grammar_start(d, g) != 0)) return 0;
    size_t copies, valid = c->n_tokens < n - 1 ? c->n_tokens : n - 1;
    if (kvcache_truncate(c, valid, &copies) != 0) return gpt_error(err, "draft: its cache would not truncate");
    memcpy(d->history, tokens, n * sizeof *tokens);
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
        int done = 0;
        if (g) {  // the mask of this guess's state; none (or a bound met): no more guesses
            GptError e = {{0}};
            if (grammar_masker_fill(g->masker, d->grammar, d->mask, &e) <= 0) break;
            d->sampler.mask = d->mask;
        }
        int32_t t = sampler_sample_u(&d->sampler, d->fs.logits + in.logits_row * V, d->history, n + guessed,
                                     u[guessed]);
        d->sampler.mask = NULL;
        if (t < 0) break;  // no usable logits: no more guesses
        if (g && !grammar_takes(d, g, t, &done)) break;
        d->history[n + guessed] = out[guessed] = t;
        if (++guessed == k || done) break;
        in = (SeqInput){.tokens = out + guessed - 1, .n_tokens = 1, .cache = c, .want = LOGITS_LAST};
        if (gpt2_forward(d->model, &d->fs, &in, 1, err) != 0) return -1;
        d->guesses_run++;
    }
    return (int)guessed;
}

int draft_propose(Draft *d, const int32_t *tokens, size_t n, size_t k, const double *u, const DraftGrammar *g,
                  int32_t *out, GptError *err) {
    if (k > d->max_guesses) k = d->max_guesses;
    if (n < 1 || n > d->max_positions || k == 0) return 0;
    if (d->model) return model_guesses(d, tokens, n, k, u, g, out, err);
    size_t count = lookup(d, tokens, n, k, out);
    return (int)(g && count ? grammar_cut(d, g, out, count) : count);
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
    DraftGrammar g = {.state = s->grammar, .masker = s->masker, .tok = e->tok, .eos = e->eot,
                      .vocab = (size_t)e->model->config.vocab_size};
    int guessed = draft_propose(d, window, n, k, d->uniforms, s->grammar ? &g : NULL, d->guesses, err);
    double spent = now_seconds() - t0;
    d->seconds += spent;
    s->decode_seconds += spent;
    if (guessed < 0) return -1;
    return engine_step_verify(e, s, d->guesses, (size_t)guessed, err);
}

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

#include "base/clock.h"
#include "base/grow.h"

const char *stop_reason_name(StopReason r) {
    switch (r) {
    case STOP_NONE: return "";
    case STOP_EOS: return "eos";
    case STOP_LENGTH: return "length";
    case STOP_CONTEXT: return "context";
    case STOP_STRING: return "stop";
    case STOP_ERROR: return "error";
    }
    return "";
}

int engine_init(Engine *e, const Model *m, const Tokenizer *tok, const EngineConfig *cfg, GptError *err) {
    memset(e, 0, sizeof *e);
    if (cfg->max_seqs < 1 || cfg->max_step_tokens < cfg->max_seqs)
        return gpt_error(err, "engine: %zu sequences and %zu tokens per step do not fit", cfg->max_seqs,
                         cfg->max_step_tokens);
    e->model = m;
    e->tok = tok;
    e->eot = tokenizer_eot_id(tok);
    e->cfg = *cfg;
    size_t n_ctx = (size_t)m->config.n_ctx;
    if (!e->cfg.kv_blocks) e->cfg.kv_blocks = cfg->max_seqs * ((n_ctx + KV_BLOCK - 1) / KV_BLOCK);
    e->inputs = calloc(cfg->max_seqs, sizeof *e->inputs);
    e->which = calloc(cfg->max_seqs, sizeof *e->which);
    e->prefilling = calloc(cfg->max_seqs, sizeof *e->prefilling);
    e->verify_tokens = malloc((cfg->max_verify + 1) * sizeof *e->verify_tokens);
    e->raw_logits = malloc((size_t)m->config.vocab_size * sizeof *e->raw_logits);
    if (!e->inputs || !e->which || !e->prefilling || !e->verify_tokens || !e->raw_logits) {
        engine_free(e);
        return gpt_error(err, "engine: out of memory");
    }
    // a verify step runs max_verify + 1 rows of one sequence, all with
    // logits; an ordinary step one row per sequence, and up to
    // prompt_logit_rows more for the prompts' log-probabilities
    size_t max_tokens = cfg->max_step_tokens > cfg->max_verify + 1 ? cfg->max_step_tokens : cfg->max_verify + 1;
    size_t step_rows = cfg->max_seqs + cfg->prompt_logit_rows;
    size_t max_rows = step_rows > cfg->max_verify + 1 ? step_rows : cfg->max_verify + 1;
    if (forward_state_init(&e->fs, &m->config, max_tokens, n_ctx, max_rows, cfg->pool, err) != 0 ||
        (cfg->use_blas && forward_state_use_blas(&e->fs, &m->config, err) != 0) ||
        sampler_scratch_init(&e->scratch, (size_t)m->config.vocab_size, err) != 0 ||
        !(e->kv = kvpool_create(&m->config, cfg->kv_dtype, e->cfg.kv_blocks, err))) {
        engine_free(e);
        return -1;
    }
    if (cfg->plan) e->fs.plan = *cfg->plan;
    return 0;
}

void engine_free(Engine *e) {
    if (!e) return;
    threadpool_set_solo(e->cfg.pool, 0);  // the pool outlives the engine: as it came
    forward_state_free(&e->fs);
    sampler_scratch_free(&e->scratch);
    kvpool_free(e->kv);
    free(e->inputs);
    free(e->which);
    free(e->prefilling);
    free(e->verify_tokens);
    free(e->raw_logits);
    memset(e, 0, sizeof *e);
}

size_t engine_buffer_bytes(const Engine *e) {
    size_t V = (size_t)e->model->config.vocab_size, n = e->cfg.max_seqs;
    return e->fs.bytes + e->scratch.bytes + V * sizeof *e->raw_logits + n * sizeof *e->inputs +
           n * sizeof *e->which + n * sizeof *e->prefilling + (e->cfg.max_verify + 1) * sizeof *e->verify_tokens;
}

int prompt_tokens(Tokenizer *tok, const char *text, size_t len, int special, int32_t **ids, size_t *n,
                  GptError *err) {
    if (tokenizer_encode(tok, text, len, special, ids, n, err) != 0) return -1;
    if (*n > 0) return 0;
    int32_t eot = tokenizer_eot_id(tok);
    if (eot < 0) return gpt_error(err, "empty prompt and the tokenizer has no <|endoftext|>");
    (*ids)[(*n)++] = eot;  // an empty result still has room for one id (tokenizer.h)
    return 0;
}

int choice_tokens(Tokenizer *tok, const char *prompt, size_t prompt_len, const char *choice, size_t choice_len,
                  int special, int32_t **ids, size_t *n, size_t *first, GptError *err) {
    *ids = NULL;
    if (choice_len == 0) return gpt_error(err, "an empty choice has no tokens to score");
    char *whole = malloc(prompt_len + choice_len);
    if (!whole) return gpt_error(err, "out of memory");
    memcpy(whole, prompt, prompt_len);
    memcpy(whole + prompt_len, choice, choice_len);
    int rc = tokenizer_encode(tok, whole, prompt_len + choice_len, special, ids, n, err);
    free(whole);
    if (rc != 0) return -1;
    // the context: the tokens whose bytes all lie in the prompt
    size_t k = 0, bytes = 0, len;
    while (k < *n && tokenizer_token_bytes(tok, (*ids)[k], &len) && bytes + len <= prompt_len) {
        bytes += len;
        k++;
    }
    if (k == 0) {
        // no token of the prompt's own (an empty prompt, or the first token
        // runs on into the choice): <|endoftext|> before, as for an empty prompt
        int32_t eot = tokenizer_eot_id(tok);
        int32_t *more = eot < 0 ? NULL : realloc(*ids, (*n + 1) * sizeof **ids);
        if (!more) {
            free(*ids);
            *ids = NULL;
            return gpt_error(err, eot < 0 ? "the choice needs a context and the tokenizer has no <|endoftext|>"
                                          : "out of memory");
        }
        memmove(more + 1, more, *n * sizeof *more);
        more[0] = eot;
        *ids = more;
        (*n)++;
        k = 1;
    }
    *first = k;
    return 0;
}

int check_prompt_length(const GPT2Config *c, size_t n, GptError *err) {
    if (n >= 1 && n <= (size_t)c->n_ctx) return 0;
    return gpt_error(err, "the prompt is %zu tokens; the model's context holds %d", n, c->n_ctx);
}

size_t sequence_positions(const GPT2Config *c, size_t n_prompt, size_t max_new) {
    // The last new token is never fed back, so it needs no position; but
    // the run may hold it until the end of the context.
    size_t room = (size_t)c->n_ctx > n_prompt ? (size_t)c->n_ctx - n_prompt : 0;
    return n_prompt + (max_new < room ? max_new : room);
}

size_t kv_blocks_for_budget(const GPT2Config *c, DType kv_dtype, size_t budget_bytes, size_t max_seqs) {
    size_t block_bytes = kvcache_bytes_per_token(c, kv_dtype) * KV_BLOCK;
    size_t ctx_blocks = ((size_t)c->n_ctx + KV_BLOCK - 1) / KV_BLOCK;
    size_t budget = budget_bytes;
    if (!budget) {
        budget = (size_t)1 << 30;
        if (budget / block_bytes > 2 * max_seqs * ctx_blocks) budget = 2 * max_seqs * ctx_blocks * block_bytes;
    }
    size_t blocks = budget / block_bytes;
    return blocks < KVPOOL_MAX_BLOCKS ? blocks : KVPOOL_MAX_BLOCKS;
}

int sequence_init(Sequence *s, const Engine *e, const int32_t *prompt, size_t n_prompt,
                  const GenParams *p, GptError *err) {
    memset(s, 0, sizeof *s);
    token_stream_init(&s->stream);
    s->last_token = -1;
    const GPT2Config *c = &e->model->config;
    if (check_prompt_length(c, n_prompt, err) != 0) return -1;
    size_t capacity = sequence_positions(c, n_prompt, p->max_new);
    if (p->context_shift) {
        if (p->keep > (size_t)c->n_ctx / 2)
            return gpt_error(err, "keep %zu: more than half the context (%d)", p->keep, c->n_ctx / 2);
        s->context_shift = 1;
        s->keep = p->keep < n_prompt ? p->keep : n_prompt;
    }
    // the history grows past the context when the window shifts (sample_next)
    s->tokens_cap = capacity + 1;
    s->tokens = malloc(s->tokens_cap * sizeof *s->tokens);
    if (!s->tokens) return gpt_error(err, "out of memory for %zu tokens", capacity);
    memcpy(s->tokens, prompt, n_prompt * sizeof *prompt);
    s->n_tokens = s->n_prompt = n_prompt;
    s->max_new = p->max_new;
    s->ignore_eos = p->ignore_eos;
    s->lp_from = n_prompt;
    if (p->logprobs) {
        if (p->top_logprobs > LOGPROBS_TOP_MAX)
            return gpt_error(err, "top_logprobs %zu: at most %d", p->top_logprobs, LOGPROBS_TOP_MAX);
        // a prompt's own log-probabilities need its rows' logits
        if (p->logprobs_from && p->logprobs_from < n_prompt && !e->cfg.prompt_logit_rows)
            return gpt_error(err, "engine: prompt log-probabilities need EngineConfig.prompt_logit_rows");
        s->logprobs = 1;
        s->top_logprobs = p->top_logprobs;
        s->lp_from = p->logprobs_from && p->logprobs_from < n_prompt ? p->logprobs_from : n_prompt;
    }
    if (p->n_stops) {
        s->stops = calloc(p->n_stops, sizeof *s->stops);
        if (!s->stops) return gpt_error(err, "out of memory");
        for (size_t i = 0; i < p->n_stops; i++) {
            size_t len = strlen(p->stops[i]);
            if (len == 0) return gpt_error(err, "stop string %zu is empty", i);
            if (!(s->stops[i] = strdup(p->stops[i]))) return gpt_error(err, "out of memory");
            s->n_stops = i + 1;
            if (len > s->max_stop_len) s->max_stop_len = len;
        }
        if (!(s->held = malloc(2 * s->max_stop_len + 64))) return gpt_error(err, "out of memory");
    }
    if (kvcache_attach(&s->cache, e->kv, capacity, err) != 0 ||
        sampler_init_shared(&s->sampler, &p->sampling, (SamplerScratch *)&e->scratch, err) != 0)
        return -1;
    return 0;
}

void sequence_release(Sequence *s, Engine *e) {
    if (!s || !s->cache.pool) return;
    s->positions = s->cache.n_tokens;
    if (s->admitted && e && e->kv) {
        // what is left of its promise: blocks promised and never taken
        size_t taken = s->cache.n_blocks - s->kv_shared_blocks;
        kvpool_unreserve(e->kv, s->kv_reserved > taken ? s->kv_reserved - taken : 0);
    }
    kvcache_free(&s->cache);
}

void sequence_free(Sequence *s, Engine *e) {
    if (!s) return;
    sequence_release(s, e);
    free(s->tokens);
    free(s->out);
    for (size_t i = 0; i < s->n_stops; i++) free(s->stops[i]);
    free(s->stops);
    free(s->held);
    free(s->lp);
    free(s->win);
    sampler_free(&s->sampler);
    token_stream_free(&s->stream);
    memset(s, 0, sizeof *s);
}

// The model's window: its ids, their count, and how many of them are a
// prompt to prefill (the prompt, or after a shift the kept ids).
static const int32_t *window_ids(const Sequence *s) { return s->win ? s->win : s->tokens; }
static size_t window_len(const Sequence *s) { return s->win ? s->win_len : s->n_tokens; }
static size_t window_prompt(const Sequence *s) { return s->win ? s->win_prompt : s->n_prompt; }

const int32_t *sequence_context(const Sequence *s, size_t *n) {
    *n = window_len(s);
    return window_ids(s);
}

// The window is full: it starts again from the first `keep` tokens of the
// prompt and the most recent ones, half the context in all, which the next
// step computes as a prompt in a cache emptied for them. 0, or -1 with
// s->error set.
static int shift_window(Engine *e, Sequence *s) {
    size_t half = (size_t)e->model->config.n_ctx / 2, recent = half - s->keep;
    if (!s->win && !(s->win = malloc(((size_t)e->model->config.n_ctx + 1) * sizeof *s->win)))
        return gpt_error(&s->error, "out of memory");
    memcpy(s->win, s->tokens, s->keep * sizeof *s->win);
    memcpy(s->win + s->keep, s->tokens + s->n_tokens - recent, recent * sizeof *s->win);
    s->win_len = s->win_prompt = half;
    // blocks shared with other sequences (a prompt's prefix) become its own
    size_t copies = 0;
    if (kvcache_truncate(&s->cache, 0, &copies) != 0)
        return gpt_error(&s->error, "kvcache: no block to copy a shared one into");
    s->kv_shared_blocks -= copies;
    s->kv_reserved += copies;
    s->shift_due = 0;
    s->shifts++;
    s->shift_tokens += half;
    return 0;
}

// After a decode step of `rows` rows that took `seconds`: the thread choice
// (ThreadChoice, generate.h). The mode's last steps are timed; every
// `period` steps, PROBE steps run in the other mode; if those were faster
// by 3% or more (the noise of one step's timing) the other mode stays and
// probes come every FIRST_PERIOD steps again, else it goes back and the
// period at least doubles, up to MAX_PERIOD: it grows to where the probe
// just lost costs 1% of the time (PROBE steps x how much slower they ran
// / the period), so a probe that lost by far is not repeated soon. The
// first probe comes early, after FIRST_PROBE steps: on a machine where
// another process holds a core, the mode the prefill left (every thread)
// is the slow one, and each step of it costs the run. (The measurements
// behind these numbers: docs/performance.md, "The thread choice".)
enum { PROBE = 4, FIRST_PROBE = 2 * PROBE, FIRST_PERIOD = 32, MAX_PERIOD = 512 };
// The prompt's steps say which mode to start decoding in: when their joins
// waited BUSY_WAIT of the time or more (in steps of BUSY_MIN_SECONDS or
// more: shorter ones are noise), a worker's core is busy with another
// process; the decode then starts solo, and its first probe tries every
// thread. A quiet machine's joins wait far less than BUSY_WAIT.
#define BUSY_WAIT 0.10
#define BUSY_MIN_SECONDS 0.005

static void choose_threads(Engine *e, size_t rows, double seconds) {
    ThreadChoice *c = &e->threads;
    ThreadPool *pool = e->cfg.pool;
    if (threadpool_size(pool) < 2) return;
    if (threadpool_is_solo(pool)) c->solo_steps++;
    if (c->period == 0) c->period = FIRST_PERIOD, c->left = FIRST_PROBE, c->rows = rows;  // the first steps
    if (rows != c->rows) {  // other work: measure again from here, in the mode of now
        if (c->probing) threadpool_set_solo(pool, !threadpool_is_solo(pool));
        *c = (ThreadChoice){.left = c->period, .period = c->period, .rows = rows, .solo_steps = c->solo_steps};
        return;
    }
    int k = c->probing;
    // the mode's time: its last PROBE steps before a probe
    if (k || c->left <= PROBE) c->seconds[k] += seconds, c->steps[k]++;
    if (--c->left > 0) return;
    if (!c->probing) {  // try the other mode
        c->probing = 1;
        c->left = PROBE;
        threadpool_set_solo(pool, !threadpool_is_solo(pool));
        return;
    }
    double mode = c->seconds[0] / (c->steps[0] ? c->steps[0] : 1), probe = c->seconds[1] / (c->steps[1] ? c->steps[1] : 1);
    if (probe < 0.97 * mode) {
        c->period = FIRST_PERIOD;  // the probe's mode stays
    } else {
        threadpool_set_solo(pool, !threadpool_is_solo(pool));
        // the period at which that probe costs 1% of the time, at least twice this one
        double want = mode > 0 ? PROBE * (probe / mode - 1.0) * 100.0 : 0.0;
        if (want < 2.0 * c->period) want = 2.0 * c->period;
        c->period = want < MAX_PERIOD ? (unsigned)want : MAX_PERIOD;
    }
    c->probing = 0;
    c->left = c->period;
    c->seconds[0] = c->seconds[1] = 0;
    c->steps[0] = c->steps[1] = 0;
}

int engine_admit(Engine *e, Sequence *s, GptError *err) {
    if (s->admitted) return 1;
    KVCache *c = &s->cache;
    size_t need = (c->max_positions + KV_BLOCK - 1) / KV_BLOCK;
    KVPoolStats ps = kvpool_stats(e->kv);
    if (need > ps.n_blocks)
        return gpt_error(err, "it needs %zu bytes of KV cache (%zu positions); the budget is %zu bytes",
                         need * ps.block_bytes, c->max_positions, ps.n_blocks * ps.block_bytes);
    if (kvpool_reserve(e->kv, need) != 0) return 0;
    size_t shared = 0;
    if (e->cfg.share_prefixes) {
        int wait = 0;
        // the row before the first reported prompt token must run: it has
        // that token's logits
        size_t n = s->lp_from < s->n_prompt ? s->lp_from : s->n_prompt;
        s->prefix_reused = kvcache_share_prefix(c, s->tokens, n, &shared, &wait);
        if (wait) {
            kvpool_unreserve(e->kv, need);
            return 0;
        }
        kvpool_unreserve(e->kv, shared);  // those blocks were there already
    }
    s->kv_reserved = need - shared;
    s->kv_shared_blocks = shared;
    s->admitted = 1;
    // The prompt's blocks now, so that the prompt can be registered for the
    // prompts admitted after it (they wait for it rather than compute it twice).
    if (kvcache_grow(c, s->n_prompt) != 0) return gpt_error(err, "kvcache: the pool broke its promise");
    if (e->cfg.share_prefixes) kvcache_register_prompt(c, s->tokens, s->n_prompt);
    e->prefix_tokens_reused += s->prefix_reused;
    return 1;
}

// Appends bytes to the step's output.
static int out_append(Sequence *s, const char *p, size_t n) {
    if (n == 0) return 0;
    if (n > SIZE_MAX - s->out_len || grow_array(&s->out, &s->out_cap, s->out_len + n, 1) != 0) return -1;
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
    return 0;
}

// Text on its way out. Without stop strings it goes straight to out. With
// them, it joins the held-back text, which is searched: a stop string found
// ends the output just before it (returns 1); otherwise everything goes out
// but the longest tail that could still become a stop string. Every match
// starts inside the held text, since all earlier text was let out only
// when no stop string could start in it. Returns 0, 1, or -1 (out of memory).
static int emit(Sequence *s, const char *p, size_t n) {
    if (!s->n_stops) return out_append(s, p, n);
    while (n) {
        // in pieces, so that held never exceeds 2 x the longest stop string
        size_t take = n < s->max_stop_len + 64 ? n : s->max_stop_len + 64;
        memcpy(s->held + s->held_len, p, take);
        s->held_len += take;
        p += take;
        n -= take;
        const char *h = s->held;
        size_t H = s->held_len, first = H;
        for (size_t i = 0; i < s->n_stops; i++) {
            size_t len = strlen(s->stops[i]);
            for (size_t at = 0; at + len <= H && at < first; at++)
                if (!memcmp(h + at, s->stops[i], len)) {
                    first = at;
                    break;
                }
        }
        if (first < H) {
            s->held_len = 0;
            return out_append(s, h, first) != 0 ? -1 : 1;
        }
        size_t keep = 0;
        for (size_t i = 0; i < s->n_stops; i++) {
            size_t len = strlen(s->stops[i]);
            for (size_t k = len - 1 < H ? len - 1 : H; k > keep; k--)
                if (!memcmp(h + H - k, s->stops[i], k)) {
                    keep = k;
                    break;
                }
        }
        if (out_append(s, h, H - keep) != 0) return -1;
        memmove(s->held, h + H - keep, keep);
        s->held_len = keep;
    }
    return 0;
}

static void stop(Sequence *s, StopReason why) {
    s->stop = why;
    if (why == STOP_STRING) return;  // what came after the stop string is dropped
    const char *tail;
    size_t n;
    token_stream_flush(&s->stream, &tail, &n);
    int rc = emit(s, tail, n);
    if (rc == 1) {
        s->stop = STOP_STRING;
        return;
    }
    // the held-back text was no stop string after all
    if (rc != 0 || out_append(s, s->held, s->held_len) != 0) {
        if (why != STOP_ERROR) {
            s->stop = STOP_ERROR;
            gpt_error(&s->error, "out of memory");
        }
    }
    s->held_len = 0;
}

// Appends the log-probability of token id under the row summarized by sum
// (whose raw logits are row) to s's. 0, or -1 out of memory.
static int add_logprob(Sequence *s, const LogitsSummary *sum, const float *row, int32_t id) {
    if (grow_array(&s->lp, &s->lp_cap, s->n_lp + 1, sizeof *s->lp) != 0) return -1;
    TokenLogprob *t = &s->lp[s->n_lp++];
    t->id = id;
    t->logprob = logprob_of(sum, row, id);
    t->n_top = sum->n_top;
    for (size_t i = 0; i < sum->n_top; i++) {
        t->top_ids[i] = sum->top[i];
        t->top_logprobs[i] = logprob_of(sum, row, sum->top[i]);
    }
    return 0;
}

// The log-probabilities of the prompt tokens that the rows of a chunk
// predict: row i (position at + i) predicts token at + i + 1.
static int add_prompt_logprobs(Engine *e, Sequence *s, size_t at, size_t rows, const float *logits) {
    size_t V = (size_t)e->model->config.vocab_size;
    for (size_t i = 0; i < rows; i++) {
        size_t target = at + i + 1;
        if (target < s->lp_from || target >= s->n_prompt) continue;
        LogitsSummary sum;
        logits_summarize(logits + i * V, V, s->top_logprobs, e->scratch.isa, &sum);
        if (add_logprob(s, &sum, logits + i * V, s->tokens[target]) != 0) return -1;
    }
    return 0;
}

// One draw from the logits of s's last position, and what follows from it.
static void sample_next(Engine *e, Sequence *s, float *logits) {
    size_t n_ctx = (size_t)e->model->config.n_ctx, V = (size_t)e->model->config.vocab_size;
    if (s->n_generated >= s->max_new) return stop(s, STOP_LENGTH);
    if (window_len(s) >= n_ctx) return stop(s, STOP_CONTEXT);
    // The log-probabilities are of the raw logits, which the sampler's
    // repetition penalty changes in place: summarized first, and the row
    // kept when the penalty will change it.
    LogitsSummary sum;
    const float *raw = logits;
    if (s->logprobs) {
        logits_summarize(logits, V, s->top_logprobs, e->scratch.isa, &sum);
        if (s->sampler.params.repeat_penalty != 1.0f) {
            memcpy(e->raw_logits, logits, V * sizeof *logits);
            raw = e->raw_logits;
        }
    }
    int32_t next = sampler_sample(&s->sampler, logits, s->tokens, s->n_tokens);
    if (next < 0) {
        gpt_error(&s->error, "the model produced no usable logits (NaN or infinite)");
        return stop(s, STOP_ERROR);
    }
    if (next == e->eot && !s->ignore_eos) return stop(s, STOP_EOS);
    if ((s->logprobs && add_logprob(s, &sum, raw, next) != 0) ||
        grow_array(&s->tokens, &s->tokens_cap, s->n_tokens + 1, sizeof *s->tokens) != 0) {
        gpt_error(&s->error, "out of memory");
        return stop(s, STOP_ERROR);
    }
    s->tokens[s->n_tokens++] = next;
    if (s->win) s->win[s->win_len++] = next;
    s->n_generated++;
    s->last_token = next;
    const char *text;
    size_t len;
    int rc = token_stream_push(&s->stream, e->tok, next, &text, &len, &s->error) != 0 ? -1 : emit(s, text, len);
    if (rc < 0) {
        if (!s->error.msg[0]) gpt_error(&s->error, "out of memory");
        return stop(s, STOP_ERROR);
    }
    if (rc == 1) return stop(s, STOP_STRING);
    if (s->n_generated >= s->max_new) return stop(s, STOP_LENGTH);
    if (window_len(s) >= n_ctx) {
        if (!s->context_shift) return stop(s, STOP_CONTEXT);
        s->shift_due = 1;  // the next step starts from the kept tokens
    }
}

int engine_step(Engine *e, Sequence *const *seqs, size_t n, GptError *err) {
    if (n > e->cfg.max_seqs)
        return gpt_error(err, "engine: %zu sequences in one step, at most %zu", n, e->cfg.max_seqs);
    // The batch: decodes first (one token each), then prompt chunks in the
    // budget that is left.
    size_t budget = e->cfg.max_step_tokens, n_in = 0;
    size_t logit_rows = e->cfg.prompt_logit_rows;  // left for prompts' log-probabilities
    size_t *which = e->which;                // input j is sequence which[j]
    unsigned char *prefilling = e->prefilling;  // of sequence i
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            Sequence *s = seqs[i];
            if (s->stop || !s->admitted) continue;
            if (pass == 0) {
                s->out_len = 0;
                s->last_token = -1;
                if (s->shift_due && shift_window(e, s) != 0) {
                    stop(s, STOP_ERROR);
                    continue;
                }
            }
            size_t at = s->cache.n_tokens, n_prompt = window_prompt(s);
            int decoding = at >= n_prompt;
            if (decoding != (pass == 0) || budget == 0) continue;
            size_t take = decoding ? 1 : n_prompt - at;
            if (take > budget) take = budget;
            LogitsWanted want = at + take >= n_prompt ? LOGITS_LAST : LOGITS_NONE;
            if (!decoding && !s->win && s->lp_from < s->n_prompt) {
                // the prompt's log-probabilities: the rows before the one
                // that predicts the first reported token run without
                // logits, the rest with (a chunk of at most logit_rows)
                size_t first_row = s->lp_from - 1;
                if (at < first_row) {
                    if (take > first_row - at) take = first_row - at;
                    want = LOGITS_NONE;
                } else {
                    if (take > logit_rows) take = logit_rows;
                    if (take == 0) continue;  // next step
                    logit_rows -= take;
                    want = LOGITS_ALL;
                }
            }
            if (kvcache_grow(&s->cache, at + take) != 0) {
                gpt_error(&s->error, "kvcache: the pool broke its promise");
                stop(s, STOP_ERROR);
                continue;
            }
            e->inputs[n_in] = (SeqInput){.tokens = window_ids(s) + at, .n_tokens = take, .cache = &s->cache, .want = want};
            prefilling[i] = !decoding;
            which[n_in++] = i;
            budget -= take;
        }
    }
    int decoding_only = n_in > 0;  // a step of one row a sequence: the steps the thread choice times
    for (size_t j = 0; j < n_in; j++) decoding_only &= e->inputs[j].n_tokens == 1 && !prefilling[which[j]];
    // A step with a prompt's rows is compute-bound: every thread, whatever
    // the choice for decode steps (which may be one thread), then back
    int was_solo = !decoding_only && threadpool_is_solo(e->cfg.pool);
    if (was_solo) threadpool_set_solo(e->cfg.pool, 0);
    // A prompt's step before the first decode step: how long its joins
    // waited for a worker says which mode the decode starts in
    int first_prompt = !decoding_only && e->threads.period == 0;
    double waited = first_prompt ? threadpool_stats(e->cfg.pool).wait_seconds : 0.0;
    double t0 = now_seconds();
    int rc = gpt2_forward(e->model, &e->fs, e->inputs, n_in, err);
    double t1 = now_seconds();
    if (was_solo) threadpool_set_solo(e->cfg.pool, 1);
    if (rc == 0 && decoding_only) choose_threads(e, n_in, t1 - t0);
    // long (another process holds a worker's core): decoding starts on one
    // thread, and the first probe tries them all
    if (rc == 0 && first_prompt && t1 - t0 >= BUSY_MIN_SECONDS &&
        threadpool_stats(e->cfg.pool).wait_seconds - waited >= BUSY_WAIT * (t1 - t0))
        threadpool_set_solo(e->cfg.pool, 1);
    if (rc == 0) {
        e->steps++;
        e->forward_seconds += t1 - t0;
        for (size_t j = 0; j < n_in; j++) kvcache_mark_filled(e->inputs[j].cache);
        size_t V = (size_t)e->model->config.vocab_size;
        for (size_t j = 0; j < n_in; j++) {
            Sequence *s = seqs[which[j]];
            const SeqInput *in = &e->inputs[j];
            double ts = now_seconds();
            const float *rows = e->fs.logits + in->logits_row * V;
            size_t at = (size_t)(in->tokens - window_ids(s));
            if (in->want == LOGITS_ALL && add_prompt_logprobs(e, s, at, in->n_tokens, rows) != 0) {
                gpt_error(&s->error, "out of memory");
                stop(s, STOP_ERROR);
            }
            // the last row of a chunk that ends the prompt, or of a decode
            if (!s->stop && in->want != LOGITS_NONE && at + in->n_tokens >= window_prompt(s))
                sample_next(e, s, e->fs.logits + (in->logits_row + (in->want == LOGITS_ALL ? in->n_tokens - 1 : 0)) * V);
            double sample_seconds = now_seconds() - ts;
            if (prefilling[which[j]]) {
                e->prefill_tokens += e->inputs[j].n_tokens;
                s->prefill_tokens += e->inputs[j].n_tokens;
                s->prefill_seconds += t1 - t0;
                s->decode_seconds += sample_seconds;
            } else {
                e->decode_tokens += 1;
                s->decode_tokens += 1;
                s->decode_steps += 1;
                s->decode_seconds += t1 - t0 + sample_seconds;
            }
            s->positions = s->cache.n_tokens;
        }
        // A sequence that stopped gives its blocks back now.
        for (size_t j = 0; j < n_in; j++)
            if (seqs[which[j]]->stop) sequence_release(seqs[which[j]], e);
    }
    return rc;
}

// ---------------------------------------------------------------------------
// speculative decoding

size_t sequence_verify_room(const Sequence *s, const Engine *e) {
    size_t n_ctx = (size_t)e->model->config.n_ctx;
    if (s->stop || !s->admitted || s->shift_due || s->cache.n_tokens < window_prompt(s) || window_len(s) >= n_ctx ||
        s->n_generated >= s->max_new)
        return 0;
    // what sample_next lets it emit before a length or context stop
    size_t left = s->max_new - s->n_generated, room = n_ctx - window_len(s);
    if (room < left) left = room;
    return left - 1 < e->cfg.max_verify ? left - 1 : e->cfg.max_verify;
}

void sequence_next_uniforms(const Sequence *s, double *u, size_t n) {
    SamplerRng rng = s->sampler.rng;  // a copy: the sequence's own is not touched
    for (size_t i = 0; i < n; i++) u[i] = s->sampler.params.temperature > 0.0f ? sampler_rng_uniform(&rng) : 0.0;
}

int engine_step_verify(Engine *e, Sequence *s, const int32_t *draft, size_t k, GptError *err) {
    Sequence *one[1] = {s};
    if (k == 0 || s->stop || !s->admitted || s->shift_due || s->cache.n_tokens < window_prompt(s))
        return engine_step(e, one, 1, err);
    if (k > sequence_verify_room(s, e))
        return gpt_error(err, "engine: %zu proposals; the sequence can check %zu now", k, sequence_verify_room(s, e));
    s->out_len = 0;
    s->last_token = -1;
    // rows: the last sampled token, then the guesses, at positions at .. at + k
    size_t at = s->cache.n_tokens, V = (size_t)e->model->config.vocab_size;
    e->verify_tokens[0] = window_ids(s)[at];
    memcpy(e->verify_tokens + 1, draft, k * sizeof *draft);
    if (kvcache_grow(&s->cache, at + k + 1) != 0) {
        gpt_error(&s->error, "kvcache: the pool broke its promise");
        stop(s, STOP_ERROR);
        sequence_release(s, e);
        return 0;
    }
    SeqInput in = {.tokens = e->verify_tokens, .n_tokens = k + 1, .cache = &s->cache, .want = LOGITS_ALL};
    double t0 = now_seconds();
    if (gpt2_forward(e->model, &e->fs, &in, 1, err) != 0) return -1;
    double t1 = now_seconds();
    e->steps++;
    e->forward_seconds += t1 - t0;
    // Row i: what the plain run's step at position at + i would sample.
    size_t rows = 0;
    while (rows <= k && !s->stop) {
        size_t before = s->n_tokens;
        sample_next(e, s, e->fs.logits + (in.logits_row + rows) * V);
        rows++;
        int agreed = rows <= k && s->n_tokens > before && s->tokens[before] == draft[rows - 1];
        if (!agreed) break;
        s->accepted++;
    }
    s->verify_steps++;
    s->decode_steps++;
    s->proposed += k;
    // Keep the positions of the rows that were used: the rejected guesses'
    // positions are written again by the next step.
    size_t copies = 0;
    if (kvcache_truncate(&s->cache, at + rows, &copies) != 0) {
        gpt_error(&s->error, "kvcache: no block to copy a shared one into");
        stop(s, STOP_ERROR);
    }
    s->kv_shared_blocks -= copies;  // those blocks are its own now, out of no promise
    s->kv_reserved += copies;
    kvcache_mark_filled(&s->cache);
    e->decode_tokens += rows;
    s->decode_tokens += rows;
    s->decode_seconds += now_seconds() - t0;
    s->positions = s->cache.n_tokens;
    if (s->stop) sequence_release(s, e);
    return 0;
}

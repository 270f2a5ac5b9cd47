/*
 * engine.c - the generation engine (engine.h): the sequences' shared
 * memory, admission into the KV pool, and the step.
 *
 * One step, for the sequences given, in three phases:
 *   1. step_build, the batch: each decoding sequence feeds the token it
 *      sampled last; each sequence still reading its prompt feeds the next
 *      chunk that fits in the step's token budget (logits only when the
 *      chunk ends the prompt);
 *   2. step_forward: one gpt2_forward over all of it;
 *   3. step_harvest: each sequence with logits samples, appends the id,
 *      turns it into text and checks its stop conditions (sequence.c), in
 *      the order the command line always had: length, then the end of the
 *      context, then <|endoftext|>.
 */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/grow.h"


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
    e->grammar_share = grammar_share_new();
    if (!e->inputs || !e->which || !e->prefilling || !e->verify_tokens || !e->raw_logits || !e->grammar_share) {
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
    grammar_share_free(e->grammar_share);
    memset(e, 0, sizeof *e);
}

size_t engine_buffer_bytes(const Engine *e) {
    size_t V = (size_t)e->model->config.vocab_size, n = e->cfg.max_seqs;
    return e->fs.bytes + e->scratch.bytes + V * sizeof *e->raw_logits + n * sizeof *e->inputs +
           n * sizeof *e->which + n * sizeof *e->prefilling + (e->cfg.max_verify + 1) * sizeof *e->verify_tokens;
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
// (ThreadChoice, engine.h). The mode's last steps are timed; every
// `period` steps, PROBE steps run in the other mode; if those were faster
// by 3% or more (the noise of one step's timing) the other mode stays and
// probes come every FIRST_PERIOD steps again, else it goes back and the
// period at least doubles, up to MAX_PERIOD: it grows to where the probe
// just lost costs 1% of the time (PROBE steps x how much slower they ran
// / the period), so a probe that lost by far is not repeated soon. The
// first probe comes early, after FIRST_PROBE steps: on a machine where
// another process holds a core, the mode the prefill left (every thread)
// is the slow one, and each step of it costs the run. (The measurements
// behind these numbers: docs/performance.md, "src/engine.c, choose_threads".)
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

// The log-probabilities of the prompt tokens that the rows of a chunk
// predict: row i (position at + i) predicts token at + i + 1.
static int add_prompt_logprobs(Engine *e, Sequence *s, size_t at, size_t rows, const float *logits) {
    size_t V = (size_t)e->model->config.vocab_size;
    for (size_t i = 0; i < rows; i++) {
        size_t target = at + i + 1;
        if (target < s->lp_from || target >= s->n_prompt) continue;
        LogitsSummary sum;
        logits_summarize(logits + i * V, V, s->top_logprobs, e->scratch.isa, &sum);
        if (sequence_add_logprob(s, &sum, logits + i * V, s->tokens[target]) != 0) return -1;
    }
    return 0;
}

// One draw from the logits of s's last position, and what follows from it.
static void sample_next(Engine *e, Sequence *s, float *logits) {
    size_t n_ctx = (size_t)e->model->config.n_ctx, V = (size_t)e->model->config.vocab_size;
    if (s->n_generated >= s->max_new) return sequence_stop(s, STOP_LENGTH);
    if (sequence_window_len(s) >= n_ctx) return sequence_stop(s, STOP_CONTEXT);
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
    if (s->grammar) {  // the grammar's tokens alone (sampler.h: the mask comes first)
        long allowed = grammar_masker_fill(s->masker, s->grammar, s->mask, &s->error);
        if (allowed <= 0) {
            if (allowed == 0) gpt_error(&s->error, "grammar: no token of the vocabulary can continue the text");
            return sequence_stop(s, STOP_ERROR);
        }
        if (s->ignore_eos && e->eot >= 0 && (s->mask[e->eot / 64] >> (e->eot % 64) & 1)) {
            // <|endoftext|> ends a run where the grammar accepts; a run that
            // goes on past it would take it as text the grammar cannot read
            s->mask[e->eot / 64] &= ~(1ull << (e->eot % 64));
            if (--allowed == 0) return sequence_stop(s, STOP_GRAMMAR);  // it alone could follow
        }
        s->sampler.mask = s->mask;
    }
    int32_t next = sampler_sample(&s->sampler, logits, s->tokens, s->n_tokens);
    s->sampler.mask = NULL;
    if (next < 0) {
        gpt_error(&s->error, "the model produced no usable logits (NaN or infinite)");
        return sequence_stop(s, STOP_ERROR);
    }
    if (next == e->eot && !s->ignore_eos) return sequence_stop(s, STOP_EOS);
    if ((s->logprobs && sequence_add_logprob(s, &sum, raw, next) != 0) ||
        grow_array(&s->tokens, &s->tokens_cap, s->n_tokens + 1, sizeof *s->tokens) != 0) {
        gpt_error(&s->error, "out of memory");
        return sequence_stop(s, STOP_ERROR);
    }
    s->tokens[s->n_tokens++] = next;
    if (s->win) s->win[s->win_len++] = next;
    s->n_generated++;
    s->last_token = next;
    const char *text;
    size_t len;
    int rc = token_stream_push(&s->stream, e->tok, next, &text, &len, &s->error) != 0 ? -1 : sequence_emit(s, text, len);
    if (rc < 0) {
        if (!s->error.msg[0]) gpt_error(&s->error, "out of memory");
        return sequence_stop(s, STOP_ERROR);
    }
    if (rc == 1) return sequence_stop(s, STOP_STRING);
    if (s->grammar) {
        size_t nb;
        const unsigned char *b = tokenizer_token_bytes(e->tok, next, &nb);
        if (grammar_matcher_feed(s->grammar, b, nb, &s->error) != 0) return sequence_stop(s, STOP_ERROR);
        if (grammar_matcher_is_done(s->grammar)) return sequence_stop(s, STOP_GRAMMAR);
    }
    if (s->n_generated >= s->max_new) return sequence_stop(s, STOP_LENGTH);
    if (sequence_window_len(s) >= n_ctx) {
        if (!s->context_shift) return sequence_stop(s, STOP_CONTEXT);
        s->shift_due = 1;  // the next step starts from the kept tokens
    }
}

// 1. The step's batch in e->inputs (input j is sequence e->which[j] of
// seqs): each decoding sequence's last sampled token first, then the next
// chunk of each prompt still being read, in the token budget that is left
// (logits only when the chunk ends the prompt, or all its rows' where it
// holds prompt tokens whose log-probabilities are reported). A sequence
// whose window cannot shift or grow stops with STOP_ERROR. Returns the
// inputs' count.
static size_t step_build(Engine *e, Sequence *const *seqs, size_t n) {
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
                    sequence_stop(s, STOP_ERROR);
                    continue;
                }
            }
            size_t at = s->cache.n_tokens, n_prompt = sequence_window_prompt(s);
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
                sequence_stop(s, STOP_ERROR);
                continue;
            }
            e->inputs[n_in] = (SeqInput){.tokens = sequence_window_ids(s) + at, .n_tokens = take, .cache = &s->cache, .want = want,
                                         .lora = s->lora};
            prefilling[i] = !decoding;
            which[n_in++] = i;
            budget -= take;
        }
    }
    return n_in;
}

// 2. One gpt2_forward over the batch's n_in inputs, *seconds its wall time.
// A step of one decode row a sequence is what the thread choice times
// (choose_threads); a step with a prompt's rows is compute-bound and runs
// on every thread, whatever that choice. Returns gpt2_forward's result.
static int step_forward(Engine *e, size_t n_in, double *seconds, GptError *err) {
    int decoding_only = n_in > 0;
    for (size_t j = 0; j < n_in; j++) decoding_only &= e->inputs[j].n_tokens == 1 && !e->prefilling[e->which[j]];
    // every thread for a prompt's rows, then back to the choice
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
    *seconds = t1 - t0;
    return rc;
}

// 3. After the forward pass of `seconds`: each input's prompt rows'
// log-probabilities, each sequence with logits samples (sample_next), what
// the step cost goes to the sequence and the engine, and each sequence that
// stopped gives its blocks back now.
static void step_harvest(Engine *e, Sequence *const *seqs, size_t n_in, double seconds) {
    e->steps++;
    e->forward_seconds += seconds;
    for (size_t j = 0; j < n_in; j++) kvcache_mark_filled(e->inputs[j].cache);
    size_t V = (size_t)e->model->config.vocab_size;
    for (size_t j = 0; j < n_in; j++) {
        Sequence *s = seqs[e->which[j]];
        const SeqInput *in = &e->inputs[j];
        double ts = now_seconds();
        const float *rows = e->fs.logits + in->logits_row * V;
        size_t at = (size_t)(in->tokens - sequence_window_ids(s));
        if (in->want == LOGITS_ALL && add_prompt_logprobs(e, s, at, in->n_tokens, rows) != 0) {
            gpt_error(&s->error, "out of memory");
            sequence_stop(s, STOP_ERROR);
        }
        // the last row of a chunk that ends the prompt, or of a decode
        if (!s->stop && in->want != LOGITS_NONE && at + in->n_tokens >= sequence_window_prompt(s))
            sample_next(e, s, e->fs.logits + (in->logits_row + (in->want == LOGITS_ALL ? in->n_tokens - 1 : 0)) * V);
        double sample_seconds = now_seconds() - ts;
        if (e->prefilling[e->which[j]]) {
            e->prefill_tokens += in->n_tokens;
            s->prefill_tokens += in->n_tokens;
            s->prefill_seconds += seconds;
            s->decode_seconds += sample_seconds;
        } else {
            e->decode_tokens += 1;
            s->decode_tokens += 1;
            s->decode_steps += 1;
            s->decode_seconds += seconds + sample_seconds;
        }
        s->positions = s->cache.n_tokens;
    }
    for (size_t j = 0; j < n_in; j++)
        if (seqs[e->which[j]]->stop) sequence_release(seqs[e->which[j]], e);
}

int engine_step(Engine *e, Sequence *const *seqs, size_t n, GptError *err) {
    if (n > e->cfg.max_seqs)
        return gpt_error(err, "engine: %zu sequences in one step, at most %zu", n, e->cfg.max_seqs);
    size_t n_in = step_build(e, seqs, n);
    double seconds;
    int rc = step_forward(e, n_in, &seconds, err);
    if (rc == 0) step_harvest(e, seqs, n_in, seconds);
    return rc;
}

int engine_step_verify(Engine *e, Sequence *s, const int32_t *draft, size_t k, GptError *err) {
    Sequence *one[1] = {s};
    if (k == 0 || s->stop || !s->admitted || s->shift_due || s->cache.n_tokens < sequence_window_prompt(s))
        return engine_step(e, one, 1, err);
    if (k > sequence_verify_room(s, e))
        return gpt_error(err, "engine: %zu proposals; the sequence can check %zu now", k, sequence_verify_room(s, e));
    s->out_len = 0;
    s->last_token = -1;
    // rows: the last sampled token, then the guesses, at positions at .. at + k
    size_t at = s->cache.n_tokens, V = (size_t)e->model->config.vocab_size;
    e->verify_tokens[0] = sequence_window_ids(s)[at];
    memcpy(e->verify_tokens + 1, draft, k * sizeof *draft);
    if (kvcache_grow(&s->cache, at + k + 1) != 0) {
        gpt_error(&s->error, "kvcache: the pool broke its promise");
        sequence_stop(s, STOP_ERROR);
        sequence_release(s, e);
        return 0;
    }
    SeqInput in = {.tokens = e->verify_tokens, .n_tokens = k + 1, .cache = &s->cache, .want = LOGITS_ALL,
                   .lora = s->lora};
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
        sequence_stop(s, STOP_ERROR);
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

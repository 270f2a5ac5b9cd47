/*
 * sequence.c - one sequence of the generation engine (engine.h): its
 * prompt's tokens, its own memory, the model's window over its ids, and
 * what a sampled token becomes: text held back while it may start a stop
 * string, log-probabilities, the reason it stops. The engine (engine.c)
 * steps sequences; this file never calls it.
 */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

// StopReason -> {gpt's name, OpenAI's finish_reason}, by the enum's order
static const char *const STOP_REASONS[][2] = {
    [STOP_NONE] = {"", ""},
    [STOP_EOS] = {"eos", "stop"},
    [STOP_LENGTH] = {"length", "length"},
    [STOP_CONTEXT] = {"context", "length"},
    [STOP_STRING] = {"stop", "stop"},
    [STOP_ERROR] = {"error", "error"},
    [STOP_GRAMMAR] = {"grammar", "stop"},
};

const char *stop_reason_name(StopReason r) {
    return (unsigned)r < sizeof STOP_REASONS / sizeof *STOP_REASONS ? STOP_REASONS[r][0] : "";
}

const char *stop_reason_finish(StopReason r) {
    return (unsigned)r < sizeof STOP_REASONS / sizeof *STOP_REASONS ? STOP_REASONS[r][1] : "";
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

int candidate_tokens(Tokenizer *tok, const char *prompt, size_t prompt_len, const char *choice, size_t choice_len,
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

// An engine's maskers, one per (grammar, vocabulary), found by the
// grammar's automaton (grammar_same), not its address: requests that send
// the same schema compile it each time, and the second finds the masks the
// first computed. A masker no sequence holds is kept (idle) until
// SHARE_IDLE_KEPT others are, the least recently used freed first; each
// holds at most its grammar's max_cache_bytes (CONSTRAINT_CACHE_BYTES,
// 16 MiB, for the command's and the server's constraints). Results do not
// depend on what is kept: a mask is a function of the matcher's state.
enum { SHARE_IDLE_KEPT = 4 };

struct GrammarShare {
    struct {
        Grammar *g;  // a reference (grammar_ref): the request that compiled it may end first
        const GrammarVocab *v;  // the engine's creator's; outlives the engine
        GrammarMasker *mk;
        size_t refs;       // sequences holding it
        uint64_t last_use; // of use, for the choice of the idle one to free
    } *e;
    size_t n, cap;
    uint64_t uses;
};

GrammarShare *grammar_share_new(void) { return calloc(1, sizeof(GrammarShare)); }

static void share_remove(GrammarShare *sh, size_t i) {
    grammar_masker_free(sh->e[i].mk);
    grammar_free(sh->e[i].g);
    sh->e[i] = sh->e[--sh->n];
}

void grammar_share_free(GrammarShare *sh) {
    if (!sh) return;
    while (sh->n) share_remove(sh, sh->n - 1);
    free(sh->e);
    free(sh);
}

GrammarShareStats grammar_share_stats(const GrammarShare *sh) {
    GrammarShareStats st = {0};
    for (size_t i = 0; i < sh->n; i++) {
        GrammarMaskerStats m = grammar_masker_stats(sh->e[i].mk);
        st.maskers++;
        st.idle += sh->e[i].refs == 0;
        st.cache_bytes += m.cache_bytes;
        st.computed += m.computed;
        st.cached += m.cached;
    }
    return st;
}

// The masker of (g, v), one more holder. NULL with err set on failure.
static GrammarMasker *share_take(GrammarShare *sh, const Grammar *g, const GrammarVocab *v, int32_t eot,
                                 GptError *err) {
    for (size_t i = 0; i < sh->n; i++)
        if (sh->e[i].v == v && grammar_same(sh->e[i].g, g)) {
            sh->e[i].refs++;
            sh->e[i].last_use = ++sh->uses;
            return sh->e[i].mk;
        }
    if (grow_array(&sh->e, &sh->cap, sh->n + 1, sizeof *sh->e)) return gpt_error(err, "out of memory"), NULL;
    GrammarMasker *mk = grammar_masker_new(g, v, eot, NULL, err);
    if (!mk) return NULL;
    sh->e[sh->n].g = grammar_ref(g);
    sh->e[sh->n].v = v;
    sh->e[sh->n].mk = mk;
    sh->e[sh->n].refs = 1;
    sh->e[sh->n].last_use = ++sh->uses;
    sh->n++;
    return mk;
}

static void share_drop(GrammarShare *sh, GrammarMasker *mk) {
    for (size_t i = 0; i < sh->n; i++)
        if (sh->e[i].mk == mk) {
            sh->e[i].refs--;
            break;
        }
    for (;;) {  // past SHARE_IDLE_KEPT idle ones, the least recently used goes
        size_t idle = 0, oldest = sh->n;
        for (size_t i = 0; i < sh->n; i++)
            if (sh->e[i].refs == 0) {
                idle++;
                if (oldest == sh->n || sh->e[i].last_use < sh->e[oldest].last_use) oldest = i;
            }
        if (idle <= SHARE_IDLE_KEPT) return;
        share_remove(sh, oldest);
    }
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
    if ((s->lora = p->lora) && p->lora->n_layer != (size_t)c->n_layer)
        return gpt_error(err, "an adapter for %zu layers on a model of %d", p->lora->n_layer, c->n_layer);
    s->cache.salt = p->lora ? p->lora->salt : 0;
    if (p->grammar) {
        size_t V = (size_t)c->vocab_size;
        if (!p->grammar_vocab || grammar_vocab_size(p->grammar_vocab) != V)
            return gpt_error(err, "grammar: the vocabulary trie does not match the model's %zu tokens", V);
        if (!(s->grammar = grammar_matcher_new(p->grammar, err)) ||
            !(s->masker = share_take(e->grammar_share, p->grammar, p->grammar_vocab, e->eot, err)))
            return -1;
        s->grammar_share = e->grammar_share;
        if (!(s->mask = malloc(GRAMMAR_MASK_WORDS(V) * sizeof *s->mask))) return gpt_error(err, "out of memory");
    }
    return 0;
}

static const uint8_t *tokenizer_token(const void *tok, size_t id, size_t *len) {
    *len = 0;
    return tokenizer_token_bytes(tok, (int32_t)id, len);
}

GrammarVocab *sequence_grammar_vocab(const Tokenizer *tok, size_t V, GptError *err) {
    // ids past the tokenizer's (padding) have no bytes: never allowed
    return grammar_vocab_new_from(tokenizer_token, tok, V, err);
}

void sequence_release(Sequence *s, Engine *e) {
    if (!s || !s->cache.pool) return;
    s->positions = s->cache.n_tokens;
    // the generated positions are as any prompt's (a row's bits do not
    // depend on its step), so a later prompt may share them; not after an
    // error, whose positions may hold what the model could not compute
    if (s->admitted && e && e->cfg.share_prefixes && e->cfg.share_outputs && s->stop != STOP_ERROR) {
        size_t n;
        const int32_t *ids = sequence_context(s, &n);
        kvcache_register_prompt(&s->cache, ids, s->cache.n_tokens < n ? s->cache.n_tokens : n);
    }
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
    grammar_matcher_free(s->grammar);
    if (s->masker && s->grammar_share) share_drop(s->grammar_share, s->masker);
    free(s->mask);
    s->grammar = NULL;
    s->masker = NULL;
    s->mask = NULL;
    sampler_free(&s->sampler);
    token_stream_free(&s->stream);
    memset(s, 0, sizeof *s);
}

// The model's window: its ids, their count, and how many of them are a
// prompt to prefill (the prompt, or after a shift the kept ids).
const int32_t *sequence_window_ids(const Sequence *s) { return s->win ? s->win : s->tokens; }
size_t sequence_window_len(const Sequence *s) { return s->win ? s->win_len : s->n_tokens; }
size_t sequence_window_prompt(const Sequence *s) { return s->win ? s->win_prompt : s->n_prompt; }

const int32_t *sequence_context(const Sequence *s, size_t *n) {
    *n = sequence_window_len(s);
    return sequence_window_ids(s);
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
int sequence_emit(Sequence *s, const char *p, size_t n) {
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

void sequence_stop(Sequence *s, StopReason why) {
    s->stop = why;
    if (why == STOP_STRING) return;  // what came after the stop string is dropped
    const char *tail;
    size_t n;
    token_stream_flush(&s->stream, &tail, &n);
    int rc = sequence_emit(s, tail, n);
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

void sequence_interrupt(Sequence *s) {
    if (s->stop) return;  // its end let out what it held
    s->out_len = 0;       // the last step's output was taken
    sequence_stop(s, STOP_NONE);
}

// Appends the log-probability of token id under the row summarized by sum
// (whose raw logits are row) to s's. 0, or -1 out of memory.
int sequence_add_logprob(Sequence *s, const LogitsSummary *sum, const float *row, int32_t id) {
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

// ---------------------------------------------------------------------------
// speculative decoding

size_t sequence_verify_room(const Sequence *s, const Engine *e) {
    size_t n_ctx = (size_t)e->model->config.n_ctx;
    if (s->stop || !s->admitted || s->shift_due || s->cache.n_tokens < sequence_window_prompt(s) || sequence_window_len(s) >= n_ctx ||
        s->n_generated >= s->max_new)
        return 0;
    // what sample_next lets it emit before a length or context stop
    size_t left = s->max_new - s->n_generated, room = n_ctx - sequence_window_len(s);
    if (room < left) left = room;
    return left - 1 < e->cfg.max_verify ? left - 1 : e->cfg.max_verify;
}

void sequence_next_uniforms(const Sequence *s, double *u, size_t n) {
    SamplerRng rng = s->sampler.rng;  // a copy: the sequence's own is not touched
    for (size_t i = 0; i < n; i++) u[i] = s->sampler.params.temperature > 0.0f ? sampler_rng_uniform(&rng) : 0.0;
}

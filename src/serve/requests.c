/*
 * requests.c - the life of gpt serve's requests, and the one thread that owns the
 * Engine and runs them.
 *
 * A request is made by the HTTP side (api_request_new, filled by api.c), submitted to
 * the inbox (api_request_submit), possibly cancelled (api_request_cancel: the client went
 * away) and let go by both sides (api_request_unref: the last frees it). Its
 * completions are Sequences that the engine thread drives through the
 * library's scheduler (scheduler.h), which is also what `gpt --batch`
 * drives. The engine thread sleeps until a request comes, then loops:
 *
 *   1. take the requests of the inbox: a scoring request runs at once (score_tokens,
 *      between two steps, on the engine's threads); an embedding request
 *      joins the embeddings' queue, which runs one input (embed_tokens,
 *      alone) between two steps, so a request of many inputs delays the
 *      steps by one input's time at a time; a completion job's
 *      sequences are made and handed to the scheduler, in arrival order;
 *   2. one scheduler_step: the sequences of cancelled requests dropped (all of
 *      them once the grace after SIGTERM ran out), waiting ones admitted,
 *      one engine step, and through the hooks below, under the lock, each
 *      one's new text, tokens and log-probabilities into its ApiChoice,
 *      and the finished ones ended;
 *   3. the HTTP side is told of each request that has news through the callback
 *      it registered (Server.news): it never is called by name from here.
 *
 * A sequence's tokens do not depend on what else is in the step (forward.h),
 * so every completion gets exactly what `gpt -p PROMPT -s SEED` gives.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/grow.h"
#include "model/kvcache.h"
#include "scheduler.h"
#include "score.h"
#include "serve.h"

ApiRequest *api_request_new(size_t n_prompts) {
    ApiRequest *req = calloc(1, sizeof *req);
    if (!req) return NULL;
    req->refs = 2;  // the HTTP side and the engine thread
    req->status = 200;
    req->n_prompts = n_prompts;
    req->prompt_ids = calloc(n_prompts, sizeof *req->prompt_ids);
    req->prompt_lens = calloc(n_prompts, sizeof *req->prompt_lens);
    req->echo = calloc(n_prompts, sizeof *req->echo);
    if (!req->prompt_ids || !req->prompt_lens || !req->echo) {
        api_request_free(req);
        return NULL;
    }
    return req;
}

void api_request_free(ApiRequest *req) {
    if (!req) return;
    for (size_t i = 0; i < req->n_completions; i++) {
        free(req->completions[i].text);
        free(req->completions[i].tokens);
        free(req->completions[i].lp);
    }
    free(req->completions);
    for (size_t i = 0; i < req->n_prompts; i++) {
        free(req->prompt_ids[i]);
        free(req->echo ? req->echo[i] : NULL);
    }
    free(req->prompt_ids);
    free(req->prompt_lens);
    free(req->echo);
    for (size_t i = 0; i < req->n_stops; i++) free(req->stop_strings[i]);
    free(req->stop_strings);
    free(req->error);
    free(req->logprobs);
    cJSON_Delete(req->responses);
    for (size_t i = 0; i < req->n_tools; i++) free(req->tool_names[i]);
    free(req->tool_names);
    free(req->embeddings);
    grammar_free(req->grammar);  // its sequences are freed already (the scheduler's ref is dropped)
    free(req);
}

void api_request_unref(Server *s, ApiRequest *req) {
    pthread_mutex_lock(&s->lock);
    int last = --req->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last) api_request_free(req);
}

int api_request_submit(Server *s, ApiRequest *req) {
    pthread_mutex_lock(&s->lock);
    if (s->draining || s->in_flight >= s->limits.parallel + s->limits.queue) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    s->in_flight++;
    req->arrived = now_seconds();
    req->next = NULL;
    req->live = req->kind != REQUEST_COMPLETION ? 1 : req->n_completions;
    if (s->inbox_tail) s->inbox_tail->next = req;
    else s->inbox = req;
    s->inbox_tail = req;
    s->metrics.queued += req->kind != REQUEST_COMPLETION ? 0 : req->n_completions;
    for (size_t i = 0; i < req->n_prompts; i++) s->metrics.prompt_tokens += req->prompt_lens[i];
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void api_request_cancel_locked(Server *s, ApiRequest *req) {
    if (!req->done && !req->cancelled) {
        req->cancelled = 1;
        s->metrics.cancelled++;
        pthread_cond_signal(&s->wake);
    }
}

void api_request_cancel(Server *s, ApiRequest *req) {
    pthread_mutex_lock(&s->lock);
    api_request_cancel_locked(s, req);
    pthread_mutex_unlock(&s->lock);
}

// Appends n bytes to a choice's text, or n ids to its tokens. 0 or -1.
static int add_text(ApiChoice *c, const char *p, size_t n) {
    if (grow_array(&c->text, &c->text_cap, c->text_len + n + 1, 1) != 0) return -1;
    memcpy(c->text + c->text_len, p, n);
    c->text_len += n;
    c->text[c->text_len] = '\0';
    return 0;
}

static int add_tokens(ApiChoice *c, const int32_t *ids, size_t n) {
    if (n && grow_array(&c->tokens, &c->tokens_cap, c->n_tokens + n, sizeof *c->tokens) != 0) return -1;
    if (n) memcpy(c->tokens + c->n_tokens, ids, n * sizeof *ids);
    c->n_tokens += n;
    return 0;
}

// The log-probabilities q has that c has not yet.
static int add_logprobs(ApiChoice *c, const Sequence *q) {
    size_t n = q->n_lp - c->n_lp;
    c->lp_from = q->lp_from;
    if (n && grow_array(&c->lp, &c->lp_cap, c->n_lp + n, sizeof *c->lp) != 0) return -1;
    if (n) memcpy(c->lp + c->n_lp, q->lp + c->n_lp, n * sizeof *c->lp);
    c->n_lp += n;
    return 0;
}

// A failure of the request found here: its status and message (the first one
// wins). Under the lock.
static void request_fail(ApiRequest *req, int status, const char *msg) {
    if (req->status != 200) return;
    req->status = status;
    req->error = strdup(msg);
}

// The scheduler lets go of one choice of req (finished or dropped); the last
// one ends the request. Under the lock.
static void completion_done(Server *s, ApiRequest *req, ApiChoice *c, const char *finish) {
    if (c && !c->finish) {
        c->finish = finish;
        req->finished++;
    }
    if (--req->live) return;
    req->done = 1;
    if (req->kind == REQUEST_COMPLETION)
        histogram_observe(&s->metrics.latency[H_REQUEST], H_REQUEST, now_seconds() - req->arrived);
    s->in_flight--;
    pthread_cond_broadcast(&s->idle);
    s->news(req);  // the HTTP side has news
    if (--req->refs == 0) api_request_free(req);  // the HTTP side has gone already
}

// --score over HTTP: runs between two steps, on the engine's threads.
static void run_score(Server *s, ApiRequest *req) {
    GptError err = {{0}};
    size_t n = req->prompt_lens[0];
    double *lp = calloc(n, sizeof *lp);
    ScoreStats st = {0};
    ScoreConfig how = {.model = &s->session.model, .stride = req->stride, .kv_dtype = s->limits.kv_dtype,
                       .pool = s->session.pool, .plan = &s->session.plan};
    int rc = lp ? score_tokens(&how, req->prompt_ids[0], n, lp, &st, &err) : gpt_error(&err, "out of memory");
    pthread_mutex_lock(&s->lock);
    if (rc != 0) {
        request_fail(req, 500, err.msg);
        free(lp);
    } else {
        req->logprobs = lp;
        req->windows = st.windows;
    }
    completion_done(s, req, NULL, NULL);
    pthread_mutex_unlock(&s->lock);
}

// Embeddings: the next input of req alone (embed.h), between two steps on
// the engine's threads, so that a request of many inputs holds the
// others' steps up one input at a time. 1 when req is finished (answered,
// failed, or its client gone: then it may be freed), else 0.
static int embed_step(Server *s, ApiRequest *req) {
    GptError err = {{0}};
    size_t C = (size_t)s->session.model.config.n_embd, i = req->embedded;
    EmbedConfig how = {.model = &s->session.model, .pool = s->session.pool, .kv_dtype = s->limits.kv_dtype,
                       .plan = &s->session.plan};
    pthread_mutex_lock(&s->lock);
    int gone = req->cancelled || s->hard_stop;
    pthread_mutex_unlock(&s->lock);
    int rc = gone ? gpt_error(&err, "interrupted") : 0;
    if (!rc && !req->embeddings && !(req->embeddings = malloc(req->n_prompts * C * sizeof *req->embeddings)))
        rc = gpt_error(&err, "out of memory");
    if (!rc) rc = embed_tokens(&how, req->prompt_ids[i], req->prompt_lens[i], s->pooling, req->normalize,
                               req->embeddings + i * C, &err);
    if (!rc && ++req->embedded < req->n_prompts) return 0;
    pthread_mutex_lock(&s->lock);
    if (rc != 0) request_fail(req, 500, err.msg);
    completion_done(s, req, NULL, NULL);
    pthread_mutex_unlock(&s->lock);
    return 1;
}

// The scheduler's hooks (scheduler.h): request is the ApiRequest, index the
// completion's. Each takes the lock for the Job's shared fields.

static int hook_dropped(void *ctx, void *request) {
    Server *s = ctx;
    ApiRequest *req = request;
    pthread_mutex_lock(&s->lock);
    int drop = req->cancelled || s->hard_stop;
    pthread_mutex_unlock(&s->lock);
    return drop;
}

static void hook_admitted(void *ctx, void *request, size_t index, Sequence *q) {
    Server *s = ctx;
    ApiRequest *req = request;
    pthread_mutex_lock(&s->lock);
    s->metrics.queued--;
    s->metrics.running++;
    req->completions[index].running = 1;
    req->completions[index].cached_tokens = q->prefix_reused;
    histogram_observe(&s->metrics.latency[H_QUEUE], H_QUEUE, now_seconds() - req->arrived);
    s->metrics.prefix_reused += q->prefix_reused;
    pthread_mutex_unlock(&s->lock);
}

// A step's news: the completion's new text, tokens and log-probabilities.
static void hook_stepped(void *ctx, void *request, size_t index, Sequence *q) {
    Server *s = ctx;
    ApiRequest *req = request;
    ApiChoice *c = &req->completions[index];
    pthread_mutex_lock(&s->lock);
    size_t before = c->n_tokens;
    if ((q->out_len && add_text(c, q->out, q->out_len) != 0) ||
        add_tokens(c, q->tokens + q->n_prompt + c->n_tokens, q->n_generated - c->n_tokens) != 0 ||
        add_logprobs(c, q) != 0) {
        request_fail(req, 500, "out of memory");
        q->stop = STOP_ERROR;
    }
    s->metrics.generated_tokens += c->n_tokens - before;
    if (c->n_tokens > before) {
        // the first token's wait, then the gaps (a step's several tokens share its gap)
        double now = now_seconds();
        size_t k = c->n_tokens - before;
        if (before == 0) histogram_observe(&s->metrics.latency[H_FIRST_TOKEN], H_FIRST_TOKEN, now - req->arrived), k--;
        if (before == 0) c->t_first = now;
        for (size_t i = 0; i < k; i++)
            histogram_observe(&s->metrics.latency[H_INTER_TOKEN], H_INTER_TOKEN, (now - c->t_last) / (double)k);
        c->t_last = now;
    }
    if (q->out_len || q->stop) s->news(req);  // the HTTP side has news
    pthread_mutex_unlock(&s->lock);
}

// The pool's and the grammar maskers' gauges, as they are now; under s->lock.
static void take_engine_gauges(Server *s) {
    KVPoolStats ps = kvpool_stats(s->engine.kv);
    s->metrics.kv_blocks_used = ps.held;
    s->metrics.kv_blocks = ps.n_blocks;
    s->metrics.kv_blocks_touched = ps.touched;
    s->metrics.grammar = grammar_share_stats(s->engine.grammar_share);
}

static void hook_ended(void *ctx, void *request, size_t index, Sequence *q, SchedEnd why, const GptError *err) {
    Server *s = ctx;
    ApiRequest *req = request;
    ApiChoice *c = &req->completions[index];
    Engine *e = &s->engine;
    StopReason stop = q->stop;
    GptError seq_error = q->error;
    size_t positions = q->positions;
    sequence_free(q, e);
    pthread_mutex_lock(&s->lock);
    // the sequence leaves the gauges before its client can have the answer
    if (c->running) s->metrics.running--;
    else s->metrics.queued--;
    take_engine_gauges(s);
    const char *reason = "error";
    switch (why) {
    case SCHED_STOPPED:
        // a grammar past a bound of its matcher is the request's fault, found
        // only now: 400 naming its field, as when it would not compile
        if (stop == STOP_ERROR && req->grammar && !strncmp(seq_error.msg, "grammar: ", 9)) {
            char msg[sizeof seq_error.msg + 32];
            snprintf(msg, sizeof msg, "%s: %s", req->grammar_field, seq_error.msg + 9);
            request_fail(req, 400, msg);
            if (req->status == 400 && !req->error_param) req->error_param = req->grammar_field;
        } else if (stop == STOP_ERROR) {
            request_fail(req, 500, seq_error.msg);
        }
        reason = *stop_reason_finish(stop) ? stop_reason_finish(stop) : "error";
        if (!c->finish) c->stop_reason = *stop_reason_name(stop) ? stop_reason_name(stop) : "error";
        c->seq_tokens = positions;
        break;
    case SCHED_DROPPED: reason = "interrupted"; break;
    case SCHED_REFUSED: request_fail(req, 400, err->msg); break;
    case SCHED_NO_ROOM: request_fail(req, 503, "the KV pool cannot take this sequence now"); break;
    case SCHED_FAILED: request_fail(req, 500, err->msg); break;
    }
    completion_done(s, req, c, reason);
    pthread_mutex_unlock(&s->lock);
}

// A completion request's sequences, to the scheduler in arrival order; a
// choice whose sequence cannot be made ends the request with a 500.
static void start_completions(Server *s, Scheduler *sch, ApiRequest *req) {
    GptError err = {{0}};
    for (size_t i = 0; i < req->n_completions; i++) {
        ApiChoice *c = &req->completions[i];
        err.msg[0] = '\0';
        if (sequence_init(&c->seq, &s->engine, c->ids, c->n_ids, &c->params, &err) == 0 &&
            scheduler_add(sch, req, i, &c->seq, &err) == 0) {
            continue;
        }
        sequence_free(&c->seq, &s->engine);
        pthread_mutex_lock(&s->lock);
        request_fail(req, 500, err.msg[0] ? err.msg : "out of memory");
        s->metrics.queued--;
        int last = req->live == 1;  // then the request may be freed
        completion_done(s, req, c, "error");
        pthread_mutex_unlock(&s->lock);
        if (last) break;
    }
}

void *scheduler_main(void *arg) {
    Server *s = arg;
    Scheduler sch;
    GptError err = {{0}};
    SchedulerHooks hooks = {.ctx = s, .dropped = hook_dropped, .admitted = hook_admitted,
                            .stepped = hook_stepped, .ended = hook_ended};
    if (scheduler_init(&sch, &s->engine, s->limits.parallel, &hooks, &err) != 0) {
        // nothing can run: every request fails as it comes
        pthread_mutex_lock(&s->lock);
        s->limits.parallel = 0;
        pthread_mutex_unlock(&s->lock);
        sch.parallel = 0;
    }
    ApiRequest *embeds = NULL, *embeds_tail = NULL;  // embedding requests, in arrival order (their next)
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->inbox && !scheduler_held(&sch) && !embeds && !s->stopping) pthread_cond_wait(&s->wake, &s->lock);
        if (s->stopping && !s->inbox && !scheduler_held(&sch) && !embeds) break;
        ApiRequest *inbox = s->inbox;
        s->inbox = s->inbox_tail = NULL;
        pthread_mutex_unlock(&s->lock);

        // 1. the new requests
        for (ApiRequest *req = inbox, *next; req; req = next) {
            next = req->next;
            if (req->kind == REQUEST_SCORE) {
                run_score(s, req);
            } else if (req->kind == REQUEST_EMBED) {
                req->next = NULL;
                if (embeds_tail) embeds_tail->next = req;
                else embeds = req;
                embeds_tail = req;
            } else {
                start_completions(s, &sch, req);
            }
        }
        // one input of the first embedding request (it may be freed once finished)
        if (embeds) {
            ApiRequest *next = embeds->next;
            if (embed_step(s, embeds) && !(embeds = next)) embeds_tail = NULL;
        }
        // 2. one turn of the scheduler (a failed step has ended its sequences)
        scheduler_step(&sch, &err);

        pthread_mutex_lock(&s->lock);
        s->metrics.busy_seconds = sch.busy_seconds;
        take_engine_gauges(s);
    }
    pthread_mutex_unlock(&s->lock);
    scheduler_free(&sch);
    return NULL;
}

// ---------------------------------------------------------------------------
// the latency histograms (serve.h; api.c prints them in /metrics)

// The latency histograms: names as vLLM's (vllm:time_to_first_token_seconds
// and the others, with gpt_ for vllm:), and their buckets' upper bounds.
const HistogramSpec LATENCY_HISTOGRAMS[N_HISTOGRAMS] = {
    [H_FIRST_TOKEN] = {"gpt_time_to_first_token_seconds",
                       "Seconds from a completion request's arrival to each choice's first token.",
                       {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}},
    [H_INTER_TOKEN] = {"gpt_inter_token_latency_seconds", "Seconds between two tokens of a choice.",
                       {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}},
    [H_REQUEST] = {"gpt_e2e_request_latency_seconds",
                   "Seconds from a completion request's arrival to its last choice's end.",
                   {0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 20, 30, 60, 120}},
    [H_QUEUE] = {"gpt_request_queue_time_seconds",
                 "Seconds each choice of a completion request waited for a place in the steps.",
                 {0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 2, 5, 10, 20, 30, 60}},
};

void histogram_observe(Histogram *hist, int h, double v) {
    int i = 0;
    while (i < N_BUCKETS && !(v <= LATENCY_HISTOGRAMS[h].le[i])) i++;
    hist->counts[i]++;
    hist->sum += v;
    hist->count++;
}

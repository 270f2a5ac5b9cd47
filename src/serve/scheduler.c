/*
 * scheduler.c - the one thread that owns the Engine. It sleeps until a job
 * comes, then loops:
 *
 *   1. take the jobs the HTTP threads enqueued (Server.inbox): a scoring
 *      job runs at once (score_tokens, between two steps); a completion's
 *      choices get their sequences and wait for admission, in arrival order;
 *   2. drop the choices of jobs whose client went away, and free their blocks;
 *   3. admit waiting choices while there is a place (--parallel) and the
 *      pool can promise them every block they may need (engine_admit; a
 *      prompt that starts like an earlier one shares its blocks); the first
 *      that must wait holds back the ones after it, so none starves;
 *   4. one engine_step over every admitted sequence, then, under the lock,
 *      each one's new text, tokens and log-probabilities into its Choice,
 *      the finished ones released (their places and blocks go to the next
 *      at once), and the request of each job that has news woken
 *      (http_resume).
 *
 * A sequence's tokens do not depend on what else is in the step (forward.h),
 * so every choice gets exactly what `gpt -p PROMPT -s SEED` gives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/grow.h"
#include "model/kvcache.h"
#include "score.h"
#include "serve.h"

void job_free(Job *j) {
    if (!j) return;
    for (size_t i = 0; i < j->n_choices; i++) {
        free(j->choices[i].text);
        free(j->choices[i].tokens);
        free(j->choices[i].lp);
    }
    free(j->choices);
    for (size_t i = 0; i < j->n_prompts; i++) {
        free(j->prompt_ids[i]);
        free(j->echo ? j->echo[i] : NULL);
    }
    free(j->prompt_ids);
    free(j->prompt_lens);
    free(j->echo);
    for (size_t i = 0; i < j->n_stops; i++) free(j->stop_strings[i]);
    free(j->stop_strings);
    free(j->error);
    free(j->logprobs);
    free(j);
}

void job_unref(Server *s, Job *j) {
    pthread_mutex_lock(&s->lock);
    int last = --j->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (last) job_free(j);
}

int scheduler_submit(Server *s, Job *j) {
    pthread_mutex_lock(&s->lock);
    if (s->draining || s->in_flight >= s->limits.parallel + s->limits.queue) {
        pthread_mutex_unlock(&s->lock);
        return -1;
    }
    s->in_flight++;
    j->next = NULL;
    j->live = j->kind == JOB_SCORE ? 1 : j->n_choices;
    if (s->inbox_tail) s->inbox_tail->next = j;
    else s->inbox = j;
    s->inbox_tail = j;
    s->metrics.queued += j->kind == JOB_SCORE ? 0 : j->n_choices;
    for (size_t i = 0; i < j->n_prompts; i++) s->metrics.prompt_tokens += j->prompt_lens[i];
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void job_cancel_locked(Server *s, Job *j) {
    if (!j->done && !j->cancelled) {
        j->cancelled = 1;
        s->metrics.cancelled++;
        pthread_cond_signal(&s->wake);
    }
}

void job_cancel(Server *s, Job *j) {
    pthread_mutex_lock(&s->lock);
    job_cancel_locked(s, j);
    pthread_mutex_unlock(&s->lock);
}

// The scheduler's lists of choices: waiting for admission, and running.
typedef struct {
    Choice *c;
    Job *j;
} Entry;
typedef struct {
    Entry *items;
    size_t n, cap;
} ChoiceList;

static int list_push(ChoiceList *l, Choice *c, Job *j) {
    if (grow_array(&l->items, &l->cap, l->n + 1, sizeof *l->items) != 0) return -1;
    l->items[l->n++] = (Entry){c, j};
    return 0;
}

// Appends n bytes to a choice's text, or n ids to its tokens. 0 or -1.
static int add_text(Choice *c, const char *p, size_t n) {
    if (grow_array(&c->text, &c->text_cap, c->text_len + n + 1, 1) != 0) return -1;
    memcpy(c->text + c->text_len, p, n);
    c->text_len += n;
    c->text[c->text_len] = '\0';
    return 0;
}

static int add_tokens(Choice *c, const int32_t *ids, size_t n) {
    if (n && grow_array(&c->tokens, &c->tokens_cap, c->n_tokens + n, sizeof *c->tokens) != 0) return -1;
    if (n) memcpy(c->tokens + c->n_tokens, ids, n * sizeof *ids);
    c->n_tokens += n;
    return 0;
}

// The log-probabilities q has that c has not yet.
static int add_logprobs(Choice *c, const Sequence *q) {
    size_t n = q->n_lp - c->n_lp;
    c->lp_from = q->lp_from;
    if (n && grow_array(&c->lp, &c->lp_cap, c->n_lp + n, sizeof *c->lp) != 0) return -1;
    if (n) memcpy(c->lp + c->n_lp, q->lp + c->n_lp, n * sizeof *c->lp);
    c->n_lp += n;
    return 0;
}

// A failure of the job found here: its status and message (the first one
// wins). Under the lock.
static void job_fail(Job *j, int status, const char *msg) {
    if (j->status != 200) return;
    j->status = status;
    j->error = strdup(msg);
}

// The scheduler lets go of one choice of j (finished or dropped); the last
// one ends the job. Under the lock.
static void choice_done(Server *s, Job *j, Choice *c, const char *finish) {
    if (c && !c->finish) {
        c->finish = finish;
        j->finished++;
    }
    if (--j->live) return;
    j->done = 1;
    s->in_flight--;
    pthread_cond_broadcast(&s->idle);
    http_resume(j);  // the HTTP side has news
    if (--j->refs == 0) job_free(j);  // the HTTP side has gone already
}

static const char *finish_reason(StopReason r) {
    switch (r) {
    case STOP_EOS: case STOP_STRING: return "stop";
    case STOP_LENGTH: case STOP_CONTEXT: return "length";
    default: return "error";
    }
}

// --score over HTTP: runs between two steps, on the engine's threads.
static void run_score(Server *s, Job *j) {
    GptError err = {{0}};
    size_t n = j->prompt_lens[0];
    double *lp = calloc(n, sizeof *lp);
    ScoreStats st = {0};
    ScoreConfig how = {.model = &s->session.model, .stride = j->stride, .kv_dtype = s->limits.kv_dtype,
                       .pool = s->session.pool, .plan = &s->session.plan};
    int rc = lp ? score_tokens(&how, j->prompt_ids[0], n, lp, &st, &err) : gpt_error(&err, "out of memory");
    pthread_mutex_lock(&s->lock);
    if (rc != 0) {
        job_fail(j, 500, err.msg);
        free(lp);
    } else {
        j->logprobs = lp;
        j->windows = st.windows;
    }
    choice_done(s, j, NULL, NULL);
    pthread_mutex_unlock(&s->lock);
}

void *scheduler_main(void *arg) {
    Server *s = arg;
    Engine *e = &s->engine;
    ChoiceList waiting = {0}, running = {0};
    // running never holds more than --parallel: its room is taken now
    running.items = calloc(s->limits.parallel, sizeof *running.items);
    running.cap = s->limits.parallel;
    Sequence **seqs = calloc(s->limits.parallel, sizeof *seqs);
    GptError err = {{0}};
    if (!running.items || !seqs) {
        // nothing can run: every job fails as it comes
        pthread_mutex_lock(&s->lock);
        s->limits.parallel = 0;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->inbox && !waiting.n && !running.n && !s->stopping) pthread_cond_wait(&s->wake, &s->lock);
        if (s->stopping && !s->inbox && !waiting.n && !running.n) break;
        Job *inbox = s->inbox;
        s->inbox = s->inbox_tail = NULL;
        int hard_stop = s->hard_stop;
        pthread_mutex_unlock(&s->lock);

        // 1. the new jobs
        for (Job *j = inbox, *next; j; j = next) {
            next = j->next;
            if (j->kind == JOB_SCORE) {
                run_score(s, j);
                continue;
            }
            for (size_t i = 0; i < j->n_choices; i++) {
                Choice *c = &j->choices[i];
                err.msg[0] = '\0';
                if (sequence_init(&c->seq, e, c->ids, c->n_ids, &c->params, &err) == 0 &&
                    list_push(&waiting, c, j) == 0) {
                    c->has_seq = 1;
                    continue;
                }
                sequence_free(&c->seq, e);
                pthread_mutex_lock(&s->lock);
                job_fail(j, 500, err.msg[0] ? err.msg : "out of memory");
                s->metrics.queued--;
                int last = j->live == 1;  // then the job may be freed
                choice_done(s, j, c, "error");
                pthread_mutex_unlock(&s->lock);
                if (last) break;
            }
        }
        // 2. the choices whose client went away; every choice, past the grace
        pthread_mutex_lock(&s->lock);
        for (int which = 0; which < 2; which++) {
            ChoiceList *l = which ? &running : &waiting;
            size_t k = 0;
            for (size_t i = 0; i < l->n; i++) {
                Choice *c = l->items[i].c;
                Job *j = l->items[i].j;
                if (!j->cancelled && !hard_stop) {
                    l->items[k++] = l->items[i];
                    continue;
                }
                sequence_free(&c->seq, e);
                c->has_seq = 0;
                if (!which) s->metrics.queued--;
                choice_done(s, j, c, "interrupted");
            }
            l->n = k;
        }
        pthread_mutex_unlock(&s->lock);

        // 3. admission, in arrival order
        size_t admitted = 0;
        while (admitted < waiting.n && running.n < s->limits.parallel) {
            Choice *c = waiting.items[admitted].c;
            Job *j = waiting.items[admitted].j;
            int a = engine_admit(e, &c->seq, &err);
            if (a == 0) break;
            admitted++;
            pthread_mutex_lock(&s->lock);
            s->metrics.queued--;
            if (a < 0) {
                job_fail(j, 400, err.msg);
                sequence_free(&c->seq, e);
                c->has_seq = 0;
                choice_done(s, j, c, "error");
            }
            if (a > 0) {
                c->running = 1;
                running.items[running.n++] = (Entry){c, j};  // room for --parallel
                s->metrics.prefix_reused += c->seq.prefix_reused;
            }
            pthread_mutex_unlock(&s->lock);
        }
        // With nothing running the pool is all free: a choice that still
        // cannot be admitted never will be (it would wait for ever)
        if (!running.n && admitted < waiting.n) {
            Choice *c = waiting.items[admitted].c;
            Job *j = waiting.items[admitted++].j;
            sequence_free(&c->seq, e);
            c->has_seq = 0;
            pthread_mutex_lock(&s->lock);
            s->metrics.queued--;
            job_fail(j, 503, "the KV pool cannot take this sequence now");
            choice_done(s, j, c, "error");
            pthread_mutex_unlock(&s->lock);
        }
        if (admitted) memmove(waiting.items, waiting.items + admitted, (waiting.n - admitted) * sizeof *waiting.items);
        waiting.n -= admitted;

        // 4. one step of every running sequence
        int step_failed = 0;
        double t0 = now_seconds();
        for (size_t i = 0; i < running.n; i++) seqs[i] = &running.items[i].c->seq;
        if (running.n && engine_step(e, seqs, running.n, &err) != 0) step_failed = 1;
        double seconds = now_seconds() - t0;

        pthread_mutex_lock(&s->lock);
        if (running.n) s->metrics.busy_seconds += seconds;
        size_t k = 0;
        for (size_t i = 0; i < running.n; i++) {
            Choice *c = running.items[i].c;
            Job *j = running.items[i].j;
            Sequence *q = &c->seq;
            if (step_failed) {
                job_fail(j, 500, err.msg);
                sequence_free(q, e);
                c->has_seq = 0;
                choice_done(s, j, c, "error");
                continue;
            }
            size_t before = c->n_tokens;
            if ((q->out_len && add_text(c, q->out, q->out_len) != 0) ||
                add_tokens(c, q->tokens + q->n_prompt + c->n_tokens, q->n_generated - c->n_tokens) != 0 ||
                add_logprobs(c, q) != 0) {
                job_fail(j, 500, "out of memory");
                q->stop = STOP_ERROR;
            }
            s->metrics.generated_tokens += c->n_tokens - before;
            if (q->stop == STOP_ERROR && j->status == 200) job_fail(j, 500, q->error.msg);
            if (q->out_len || q->stop) http_resume(j);  // the HTTP side has news
            if (!q->stop) {
                running.items[k++] = running.items[i];
                continue;
            }
            const char *reason = finish_reason(q->stop);
            sequence_free(q, e);  // its blocks go back at once; the prefix stays for sharing
            c->has_seq = 0;
            choice_done(s, j, c, reason);
        }
        running.n = k;
        KVPoolStats ps = kvpool_stats(e->kv);
        s->metrics.running = running.n;
        s->metrics.kv_blocks_used = ps.held;
        s->metrics.kv_blocks = ps.n_blocks;
        s->metrics.kv_blocks_touched = ps.touched;
    }
    pthread_mutex_unlock(&s->lock);
    free(waiting.items);
    free(running.items);
    free(seqs);
    return NULL;
}

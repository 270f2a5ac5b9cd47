/*
 * session.c - the set-up every front-end's run with a model shares: the
 * model (found as locate.c says), its tokenizer, checked against the
 * model's vocabulary, and the thread pool; and the seed of a run that was
 * given none.
 */
#include <stdio.h>
#include <string.h>

#include "front.h"
#include "sampler.h"

int session_open_model(Session *s, const ModelOptions *mo) {
    memset(s, 0, sizeof *s);
    WeightOptions wo = mo->weights;
    LoraRequest merged[LORA_MAX];  // the adapters without a name (gpt serve applies the named at run time)
    wo.n_lora = 0;
    for (size_t i = 0; i < mo->n_lora; i++)
        if (!mo->lora[i].name) merged[wo.n_lora++] = mo->lora[i];
    wo.lora = merged;
    int rc = open_model(mo->model_path, &wo, &s->model, s->model_path, sizeof s->model_path, mo->quiet);
    if (rc != EXIT_OK) return rc;
    GptError err = {{0}};
    return session_finish(s, mo, &err) == 0 ? EXIT_OK : report_error(&err);
}

int session_finish(Session *s, const ModelOptions *mo, GptError *err) {
    s->tok = open_tokenizer(mo->tokenizer_path, &s->model, s->model_path, &s->tok_owned, err);
    if (!s->tok) {
        session_close(s);
        return -1;
    }
    if ((size_t)s->model.config.vocab_size != tokenizer_vocab_size(s->tok)) {
        gpt_error(err, "%s: the model's vocabulary has %d tokens, the tokenizer %zu", s->model_path,
                  s->model.config.vocab_size, tokenizer_vocab_size(s->tok));
        session_close(s);
        return -1;
    }
    // -t N: the threads our kernels split the work over
    s->pool = threadpool_create((int)mo->threads, err);
    if (!s->pool) {
        session_close(s);
        return -1;
    }
    // the matmul variants for this model on these threads (never fails)
    tune_model(&s->model, s->pool, (TuneMode)mo->tune, mo->version ? mo->version : "", &s->plan, &s->tune);
    return 0;
}

void session_close(Session *s) {
    threadpool_free(s->pool);
    if (s->tok_owned) tokenizer_free(s->tok);
    model_free(&s->model);
    memset(s, 0, sizeof *s);
}

uint64_t draw_seed(void) { return sampler_random_seed() & ((1ull << 53) - 1); }

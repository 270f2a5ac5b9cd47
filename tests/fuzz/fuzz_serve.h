/*
 * fuzz_serve.h - what the request-body harnesses (fuzz_completion.c, fuzz_ollama.c, fuzz_embed.c,
 * fuzz_chat.c) share: a Server as gpt serve's api.c sees it while it reads
 * a body, without a model's weights, an engine or a socket, and the checks
 * of what a body was read into.
 *
 * The stub: the shipped GPT-2 tokenizer ($GPT_FUZZ_TOKENIZER, else
 * models/), GPT-2's shape (a context of 1024, 50257 tokens), the server's
 * default limits (max_tokens 4096), a KV pool of 16 full contexts, and the
 * three built-in chat templates. api.c reads nothing else of it.
 */
#ifndef GPT_FUZZ_SERVE_H
#define GPT_FUZZ_SERVE_H

#include <cJSON.h>
#include <math.h>
#include <string.h>

#include "fuzz_common.h"
#include "model/kvcache.h"
#include "serve/serve.h"

static Server fuzz_server;
static ChatTemplate fuzz_templates[3];
static const char *const FUZZ_TEMPLATE_NAMES[3] = {"gpt2", "transcript", "chatml"};

static inline Server *fuzz_serve_init(void) {
    Server *s = &fuzz_server;
    const char *dir = getenv("GPT_FUZZ_TOKENIZER");
    if (!dir || !*dir) dir = "models";
    GptError err = {{0}};
    s->session.tok = tokenizer_load(dir, &err);
    if (!s->session.tok) fuzz_fail("%s (set GPT_FUZZ_TOKENIZER to the directory of vocab.json + merges.txt)", err.msg);
    s->session.model.config.n_ctx = 1024;
    s->session.model.config.vocab_size = (int)tokenizer_vocab_size(s->session.tok);
    s->model_name = "fuzz.bin";
    s->limits.max_tokens = 4096;
    s->limits.max_body = 1 << 20;
    s->kv_blocks = 16 * 1024 / KV_BLOCK;
    pthread_mutex_init(&s->tok_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    for (int i = 0; i < 3; i++)
        if (chat_template_open(FUZZ_TEMPLATE_NAMES[i], &fuzz_templates[i], &err) != 0)
            fuzz_fail("chat template %s: %s", FUZZ_TEMPLATE_NAMES[i], err.msg);
    s->chat_template = fuzz_templates[0];
    return s;
}

// The harnesses' server, made once before the first input (libFuzzer calls
// LLVMFuzzerInitialize; a harness that includes this file defines only
// LLVMFuzzerTestOneInput).
static Server *srv;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    srv = fuzz_serve_init();
    return 0;
}

// A refused body: a status of 400 (the client's fault: nothing in these
// bodies may make the server fail), a message, a param of fewer than
// PARAM_CAP bytes; the message is freed.
static inline void fuzz_check_refusal(const char *what, int status, char *msg, const char *param) {
    if (status != 400 || !msg || !*msg) fuzz_fail("%s: status %d, message \"%s\"", what, status, msg ? msg : "(none)");
    if (strnlen(param, PARAM_CAP) >= PARAM_CAP) fuzz_fail("%s: param is not terminated", what);
    free(msg);
}

// A JSON text the server would send: it must parse.
static inline void fuzz_check_json(const char *what, char *text) {
    if (!text) fuzz_fail("%s: no response", what);
    cJSON *o = cJSON_Parse(text);
    if (!o) fuzz_fail("%s: the response is not JSON: %.200s", what, text);
    cJSON_Delete(o);
    free(text);
}

// An accepted completion request: its shape within the server's bounds,
// every prompt a non-empty run of ids of the vocabulary that fits the
// context, its sampling parameters valid, its stops non-empty strings;
// then its answer, as if each completion had generated one token ("x"),
// written whole and (a stream) chunk by chunk, must be JSON.
static inline void fuzz_check_request(Server *s, ApiRequest *req, int stream) {
    const GPT2Config *cfg = &s->session.model.config;
    if (!req->n_prompts || !req->n || req->best_of < req->n || req->n_completions != req->n_prompts * req->best_of ||
        req->n_completions > 64)
        fuzz_fail("request of %zu prompts, n %zu, best_of %zu, %zu completions", req->n_prompts, req->n, req->best_of,
                  req->n_completions);
    for (size_t p = 0; p < req->n_prompts; p++) {
        if (!req->prompt_lens[p] || req->prompt_lens[p] > (size_t)cfg->n_ctx)
            fuzz_fail("prompt %zu has %zu tokens", p, req->prompt_lens[p]);
        for (size_t i = 0; i < req->prompt_lens[p]; i++)
            if (req->prompt_ids[p][i] < 0 || req->prompt_ids[p][i] >= cfg->vocab_size)
                fuzz_fail("prompt %zu: token %zu is id %d", p, i, req->prompt_ids[p][i]);
    }
    int32_t eot = tokenizer_eot_id(s->session.tok);
    for (size_t k = 0; k < req->n_completions; k++) {
        ApiChoice *c = &req->completions[k];
        GptError err = {{0}};
        if (sampler_params_validate(&c->params.sampling, &err) != 0) fuzz_fail("completion %zu: %s", k, err.msg);
        if (c->params.max_new > s->limits.max_tokens) fuzz_fail("completion %zu: max_new %zu", k, c->params.max_new);
        if (c->params.n_stops > MAX_STOPS) fuzz_fail("completion %zu: %zu stops", k, c->params.n_stops);
        for (size_t i = 0; i < c->params.n_stops; i++)
            if (!c->params.stops[i] || !*c->params.stops[i]) fuzz_fail("completion %zu: stop %zu is empty", k, i);
        if (c->ids != req->prompt_ids[c->prompt] || c->n_ids != req->prompt_lens[c->prompt])
            fuzz_fail("completion %zu is not its prompt's", k);
        c->text = strdup("x");
        c->text_len = c->text_cap = 1;
        c->tokens = malloc(sizeof *c->tokens);
        if (!c->text || !c->tokens) fuzz_fail("out of memory");
        c->tokens[0] = eot;
        c->n_tokens = c->tokens_cap = 1;
        c->finish = "length";
        c->stop_reason = "length";
    }
    if (stream) {
        for (size_t k = 0; k < req->n_completions; k++) {
            int finished = 0;
            for (int round = 0; round < 3 && !finished; round++) {
                char *chunk = completion_chunk(s, req, k, "cmpl-0", 0, &finished);
                if (chunk) fuzz_check_json("completion_chunk", chunk);
            }
            if (!finished) fuzz_fail("completion %zu: a stream that never finishes", k);
        }
        if (req->include_usage) fuzz_check_json("usage_chunk", usage_chunk(s, req, "cmpl-0", 0));
    } else {
        fuzz_check_json("completion_response", completion_response(s, req, "cmpl-0", 0));
    }
}

#endif

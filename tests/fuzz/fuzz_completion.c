/*
 * fuzz_completion.c - gpt serve's request bodies on the completions side
 * (src/serve/api.c): any bytes as the body of POST /v1/completions
 * (completion_request: parsed, every field checked, the prompts tokenized
 * and checked against the context and the KV pool, the ApiRequest built),
 * and the same bytes as the body of /v1/score, /tokenize and /detokenize.
 * The Server is the stub of fuzz_serve.h (the GPT-2 tokenizer, no weights).
 *
 * Checked: a refusal is a 400 with a message (nothing a body holds may make
 * the server answer 500); an accepted completion request holds only what
 * the rules allow (fuzz_check_request) and its answer, written as if each
 * completion had generated one token, is JSON; an accepted score request
 * has a non-empty prompt of ids of the vocabulary; a tokenize or detokenize
 * answer is JSON. Everything is freed (LeakSanitizer).
 */
#include "fuzz_serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    char *msg = NULL, param[PARAM_CAP];
    ApiRequest *req = NULL;
    int stream = 0;
    int status = completion_request(srv, body, size, &req, &stream, &msg, param);
    if (status) {
        if (req) fuzz_fail("completion_request: status %d with a request", status);
        fuzz_check_refusal("completion_request", status, msg, param);
    } else {
        if (!req || msg) fuzz_fail("completion_request: accepted without a request, or with a message");
        fuzz_check_request(srv, req, stream);
        api_request_free(req);
    }

    msg = NULL;
    req = NULL;
    status = score_request(srv, body, size, &req, &msg, param);
    if (status) {
        if (req) fuzz_fail("score_request: status %d with a request", status);
        fuzz_check_refusal("score_request", status, msg, param);
    } else {
        if (!req || req->kind != REQUEST_SCORE || !req->prompt_lens[0]) fuzz_fail("score_request: a bad request");
        for (size_t i = 0; i < req->prompt_lens[0]; i++)
            if (req->prompt_ids[0][i] < 0 || req->prompt_ids[0][i] >= srv->session.model.config.vocab_size)
                fuzz_fail("score_request: token %zu is id %d", i, req->prompt_ids[0][i]);
        if (!req->stride && req->prompt_lens[0] > (size_t)srv->session.model.config.n_ctx)
            fuzz_fail("score_request: %zu tokens without a stride", req->prompt_lens[0]);
        api_request_free(req);
    }

    for (int detok = 0; detok < 2; detok++) {
        const char *what = detok ? "detokenize_response" : "tokenize_response";
        msg = NULL;
        char *out = detok ? detokenize_response(srv, body, size, &status, &msg, param)
                          : tokenize_response(srv, body, size, &status, &msg, param);
        if (status == 200) {
            if (msg) fuzz_fail("%s: 200 with a message", what);
            fuzz_check_json(what, out);
        } else {
            if (out) fuzz_fail("%s: status %d with an answer", what, status);
            fuzz_check_refusal(what, status, msg, param);
        }
    }
    return 0;
}

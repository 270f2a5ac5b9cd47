/*
 * fuzz_ollama.c - gpt serve's Ollama bodies (src/serve/ollama.c): any bytes
 * as the body of POST /api/generate and of POST /api/chat (ollama_request:
 * parsed, each field and option checked or refused, the OpenAI body it
 * means made and read by api.c, the ApiRequest built), and of POST
 * /api/show. The chat template is one of the three built-ins, picked by
 * the sum of the input's bytes; the Server is the stub of fuzz_serve.h.
 *
 * Checked: a refusal is a 400 with a message (no body makes the server
 * fail); an immediate answer (an empty prompt: Ollama's "load") is JSON;
 * an accepted request holds only what the rules allow (fuzz_check_request)
 * and is marked for Ollama's shapes, and its answer, whole and as NDJSON
 * lines, is JSON, the last line done; /api/show answers JSON, a 400 or a
 * 404 with a message. Everything is freed (LeakSanitizer).
 */
#include "fuzz_serve.h"

// Ollama's answers of an accepted request that generated one token: the
// whole object, then the stream's lines (sent_* reset: fuzz_check_request
// wrote the OpenAI answer first).
static void check_ollama_answers(ApiRequest *req) {
    fuzz_check_json("ollama_response", ollama_response(srv, req));
    ApiChoice *c = &req->completions[0];
    c->sent_text = 0, c->sent_finish = 0;
    int finished = 0;
    for (int round = 0; round < 3 && !finished; round++) {
        char *line = ollama_chunk(srv, req, 0, &finished);
        if (line && strchr(line, '\n')) fuzz_fail("ollama_chunk: a line with a newline: %.200s", line);
        if (line) fuzz_check_json("ollama_chunk", line);
    }
    if (!finished) fuzz_fail("ollama_chunk: a stream that never finishes");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    unsigned sum = 0;
    for (size_t i = 0; i < size; i++) sum += data[i];
    srv->chat_template = fuzz_templates[sum % 3];

    for (int chat = 0; chat < 2; chat++) {
        char *msg = NULL, *load = NULL, param[PARAM_CAP];
        ApiRequest *req = NULL;
        int stream = 0;
        int status = ollama_request(srv, chat, body, size, &req, &stream, &load, &msg, param);
        if (status) {
            if (req || load) fuzz_fail("ollama_request: status %d with an answer", status);
            fuzz_check_refusal("ollama_request", status, msg, param);
        } else if (load) {
            if (req || msg) fuzz_fail("ollama_request: a load answer with a request");
            fuzz_check_json("ollama_request's load answer", load);
        } else {
            if (!req || msg || !req->ollama || req->chat != chat || req->n_completions != 1)
                fuzz_fail("ollama_request: a bad request");
            fuzz_check_request(srv, req, 0);
            check_ollama_answers(req);
            api_request_free(req);
        }
    }

    int status = 0;
    char *msg = NULL, *out = ollama_show_response(srv, body, size, &status, &msg);
    if (status == 200) {
        if (msg) fuzz_fail("ollama_show_response: 200 with a message");
        fuzz_check_json("ollama_show_response", out);
    } else {
        if (out || (status != 400 && status != 404) || !msg || !*msg)
            fuzz_fail("ollama_show_response: status %d, message \"%s\"", status, msg ? msg : "(none)");
        free(msg);
    }
    return 0;
}

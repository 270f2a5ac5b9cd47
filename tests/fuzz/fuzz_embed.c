/*
 * fuzz_embed.c - gpt serve's embedding bodies (src/serve/embed.c): any
 * bytes as the body of POST /v1/embeddings and of POST /api/embed
 * (embed_request: parsed, each field checked or refused, every input
 * tokenized or read as ids and checked against the context). The Server
 * is the stub of fuzz_serve.h.
 *
 * Checked: a refusal is a 400 with a message and a param (no body makes
 * the server fail); an accepted request is REQUEST_EMBED, marked for
 * Ollama's shape only on /api/embed, with 1 to 2048 inputs, each a
 * non-empty run of ids of the vocabulary that fits the context, base64
 * only on /v1 and unit length always on /api/embed; its answer (each
 * vector filled with the input's index) is JSON of the right shape.
 * Everything is freed (LeakSanitizer).
 */
#include "fuzz_serve.h"

// The answer of an accepted request, its vectors filled: JSON, one vector
// (a list, or a base64 string of 4 C bytes) per input.
static void check_answer(ApiRequest *req) {
    size_t C = (size_t)srv->session.model.config.n_embd;
    req->embeddings = malloc(req->n_prompts * C * sizeof *req->embeddings);
    if (!req->embeddings) fuzz_fail("out of memory");
    for (size_t i = 0; i < req->n_prompts * C; i++) req->embeddings[i] = (float)(i / C) - 0.5f;
    char *text = embed_response(srv, req);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    if (!o) fuzz_fail("embed_response: not JSON: %.200s", text ? text : "(none)");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, req->ollama ? "embeddings" : "data");
    if (cJSON_GetArraySize(list) != (int)req->n_prompts)
        fuzz_fail("embed_response: %d vectors for %zu inputs", cJSON_GetArraySize(list), req->n_prompts);
    const cJSON *v = list->child;
    if (!req->ollama) v = cJSON_GetObjectItemCaseSensitive(v, "embedding");
    if (req->base64 ? !cJSON_IsString(v) || strlen(v->valuestring) != (4 * C + 2) / 3 * 4
                    : cJSON_GetArraySize(v) != (int)C)
        fuzz_fail("embed_response: the first vector is not %zu numbers", C);
    cJSON_Delete(o);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    srv->session.model.config.n_embd = 8;  // a vector's width: any; small for speed
    for (int ollama = 0; ollama < 2; ollama++) {
        char *msg = NULL, param[PARAM_CAP];
        ApiRequest *req = NULL;
        int status = embed_request(srv, ollama, body, size, &req, &msg, param);
        if (status) {
            if (req) fuzz_fail("embed_request: status %d with a request", status);
            fuzz_check_refusal("embed_request", status, msg, param);
            continue;
        }
        const GPT2Config *cfg = &srv->session.model.config;
        if (!req || msg || req->kind != REQUEST_EMBED || req->ollama != ollama || !req->n_prompts ||
            req->n_prompts > 2048 || (ollama && (req->base64 || !req->normalize)))
            fuzz_fail("embed_request: a bad request");
        for (size_t p = 0; p < req->n_prompts; p++) {
            if (!req->prompt_lens[p] || req->prompt_lens[p] > (size_t)cfg->n_ctx)
                fuzz_fail("input %zu has %zu tokens", p, req->prompt_lens[p]);
            for (size_t i = 0; i < req->prompt_lens[p]; i++)
                if (req->prompt_ids[p][i] < 0 || req->prompt_ids[p][i] >= cfg->vocab_size)
                    fuzz_fail("input %zu: token %zu is id %d", p, i, req->prompt_ids[p][i]);
        }
        check_answer(req);
        api_request_free(req);
    }
    return 0;
}

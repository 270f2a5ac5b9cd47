/*
 * fuzz_chat.c - gpt serve's chat bodies (src/serve/api.c, the messages and
 * templates of src/front/chat.c): any bytes as the body of POST
 * /v1/chat/completions (chat_request: parsed, every field checked, the
 * messages read and rendered with the chat template into one prompt,
 * tokenized and checked, the ApiRequest built) and of POST /apply-template.
 * The template is one of the three built-ins (gpt2, transcript, chatml),
 * picked by the sum of the input's bytes; the Server is the stub of
 * fuzz_serve.h.
 *
 * Checked: a refusal is a 400 with a message; an accepted request holds
 * only what the rules allow (fuzz_check_request: one prompt that fits, the
 * template's stops among its stops) and its answer, whole or streamed, is
 * JSON; apply-template's answer is JSON with the rendered "prompt", or a
 * 400. Everything is freed (LeakSanitizer).
 */
#include "fuzz_serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    unsigned sum = 0;
    for (size_t i = 0; i < size; i++) sum += data[i];
    srv->chat_template = fuzz_templates[sum % 3];
    const ChatTemplate *t = &srv->chat_template;

    char *msg = NULL, param[PARAM_CAP];
    ApiRequest *req = NULL;
    int stream = 0;
    int status = chat_request(srv, body, size, &req, &stream, &msg, param);
    if (status) {
        if (req) fuzz_fail("chat_request: status %d with a request", status);
        fuzz_check_refusal("chat_request", status, msg, param);
    } else {
        if (!req || msg || !req->chat || req->n_prompts != 1) fuzz_fail("chat_request: a bad request");
        // the template's stops end every completion's turn
        const GenParams *gp = &req->completions[0].params;
        for (size_t i = 0; i < t->n_stops; i++) {
            size_t k = 0;
            while (k < gp->n_stops && strcmp(gp->stops[k], t->stops[i])) k++;
            if (k == gp->n_stops) fuzz_fail("chat_request: the template's stop %zu is not among the request's", i);
        }
        fuzz_check_request(srv, req, stream);
        api_request_free(req);
    }

    msg = NULL;
    char *out = apply_template_response(srv, body, size, &status, &msg, param);
    if (status == 200) {
        if (msg || !out) fuzz_fail("apply_template_response: 200 with a message or without an answer");
        cJSON *o = cJSON_Parse(out);
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
        if (!cJSON_IsString(p)) fuzz_fail("apply_template_response: no prompt in %.200s", out);
        cJSON_Delete(o);
        free(out);
    } else {
        if (out) fuzz_fail("apply_template_response: status %d with an answer", status);
        fuzz_check_refusal("apply_template_response", status, msg, param);
    }
    return 0;
}

/*
 * fuzz_responses.c - gpt serve's Responses bodies (src/serve/responses.c)
 * and chat bodies with tools (src/serve/tools.c): any bytes as the body of
 * POST /v1/responses (responses_request: parsed, each field checked or
 * refused, the chat body it means made and read by api.c, the ApiRequest
 * built) and, with the functions' tools and tool_choice "required" added
 * when the bytes are a JSON object, of POST /v1/chat/completions. The chat
 * template is one of the three built-ins, picked by the sum of the input's
 * bytes; the Server is the stub of fuzz_serve.h.
 *
 * Checked: a refusal is a 400 with a message; an accepted request holds
 * only what the rules allow (fuzz_check_request), a Responses one is marked
 * for its shapes, and its answer and stream events are JSON (each event an
 * "event: NAME" line and a data line of that type), the last
 * response.incomplete; a tool call's answer is JSON. Everything is freed
 * (LeakSanitizer).
 */
#include "fuzz_serve.h"

// The Responses answers of an accepted request that generated one token:
// the whole object, then the stream's events (sent_* reset:
// fuzz_check_request wrote the chat answer first).
static void check_responses_answers(ApiRequest *req) {
    fuzz_check_json("responses_response", responses_response(srv, req, "resp_0", 0));
    ApiChoice *c = &req->completions[0];
    c->sent_text = 0, c->sent_echo = 0, c->sent_finish = 0;
    int finished = 0;
    char *events = responses_chunk(srv, req, "resp_0", 0, &finished);
    if (!finished || !events) fuzz_fail("responses_chunk: a stream that does not finish at once");
    const char *last = NULL;
    for (char *e = events; *e;) {
        char *data = strstr(e, "\ndata: "), *end = data ? strstr(data, "\n\n") : NULL;
        if (strncmp(e, "event: ", 7) || !end) fuzz_fail("responses_chunk: not an event: %.200s", e);
        *end = '\0';
        cJSON *o = cJSON_Parse(data + 7);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
        if (!cJSON_IsString(type) || strncmp(type->valuestring, e + 7, (size_t)(data - e - 7)) ||
            strlen(type->valuestring) != (size_t)(data - e - 7))
            fuzz_fail("responses_chunk: an event's data is not of its type: %.200s", e);
        last = strcmp(type->valuestring, "response.incomplete") ? NULL : "incomplete";
        cJSON_Delete(o);
        e = end + 2;
    }
    if (!last) fuzz_fail("responses_chunk: the last event is not response.incomplete");
    free(events);
}

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"zone\":{\"enum\":[\"UTC\",\"CET\"]}},\"required\":[\"zone\"]}}},{\"type\":\"function\","
    "\"function\":{\"name\":\"f\"}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *body = (const char *)data;
    unsigned sum = 0;
    for (size_t i = 0; i < size; i++) sum += data[i];
    srv->chat_template = fuzz_templates[sum % 3];

    char *msg = NULL, param[PARAM_CAP];
    ApiRequest *req = NULL;
    int stream = 0;
    int status = responses_request(srv, body, size, &req, &stream, &msg, param);
    if (status) {
        if (req) fuzz_fail("responses_request: status %d with a request", status);
        fuzz_check_refusal("responses_request", status, msg, param);
    } else {
        if (!req || msg || !req->responses || !req->chat || req->n_completions != 1)
            fuzz_fail("responses_request: a bad request");
        fuzz_check_request(srv, req, 0);
        check_responses_answers(req);
        api_request_free(req);
    }

    // the body as a chat body with tools, when it is an object that has none
    cJSON *o = cJSON_ParseWithLength(body, size);
    if (cJSON_IsObject(o) && !cJSON_GetObjectItemCaseSensitive(o, "tools") &&
        !cJSON_GetObjectItemCaseSensitive(o, "tool_choice")) {
        cJSON_AddItemToObject(o, "tools", cJSON_Parse(TOOLS));
        cJSON_AddStringToObject(o, "tool_choice", "required");
        char *text = cJSON_PrintUnformatted(o);
        msg = NULL, req = NULL;
        status = text ? chat_request(srv, text, strlen(text), &req, &stream, &msg, param) : 0;
        if (status) {
            if (req) fuzz_fail("chat_request with tools: status %d with a request", status);
            fuzz_check_refusal("chat_request with tools", status, msg, param);
        } else if (text) {
            if (!req || req->n_tools != 2) fuzz_fail("chat_request with tools: a bad request");
            fuzz_check_request(srv, req, stream);
            api_request_free(req);
        }
        free(text);
    }
    cJSON_Delete(o);
    return 0;
}

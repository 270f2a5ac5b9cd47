#!/bin/sh
# cli_serve_ollama.sh - Ollama's API in gpt serve (/api/*), on a free
# loopback port with an API key. Through the `ollama` npm client
# (tests/serve/ollama_client.mjs): list, show and ps name the one model
# (its file's size, family gpt2); generate, plain and streamed, is `gpt -p
# PROMPT -n N -s SEED --temp T --json`'s text with its token count and stop
# reason; chat, plain and streamed, is /v1/chat/completions' content for
# the same messages and settings; num_ctx above the model's context is the
# client's ResponseError 400 naming options.num_ctx, and pull a 501. Then
# with curl: the NDJSON stream (application/x-ndjson, one object a line,
# the last "done": true with the counts), num_predict -1 (to the end of
# the context: `gpt -n CONTEXT`'s text), format "json" (`gpt --json-object`'s
# text) and a schema (`gpt --json-schema`'s), an empty prompt (Ollama's
# "load", answered at once), keep_alive accepted, /api/version (gpt
# --version's), the refusals (each Ollama's {"error": MESSAGE} naming the
# field: an unknown option, a sampler gpt has not, a value out of the
# table's range, system, template, suffix, images, context, tools, think,
# a bad format; create, delete, copy, push, blobs: 501), the API key (401)
# and CORS (an allowed origin's header on /api/tags).
# Without node or the ollama package in $NODE_DIR the client's part is
# skipped (the curl part runs); with GPT_TEST_REQUIRE_ALL=1 that fails.
# Prints "cli_serve_ollama: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), NODE_DIR (default ~/.cache/gpt/node, or under $XDG_CACHE_HOME).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}
CHECK_NAME=cli_serve_ollama
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need curl jq
KEY=sekret-ollama
PROMPT="The LORD said unto Moses"
MESSAGES='[{"role":"system","content":"Be brief."},{"role":"user","content":"Who spoke unto Moses?"}]'
ORIGIN=http://ui.example
start "$tmp/s.log" -m "$MODEL" --api-key "$KEY" --cors-origin "$ORIGIN" -t 2 || { summary; exit 1; }

"$GPT" -m "$MODEL" -p "$PROMPT" -n 24 -s 7 --temp 0.8 --json > "$tmp/cli" 2> /dev/null
want_text=$(jq -c .text "$tmp/cli")
want_n=$(jq '.tokens | length' "$tmp/cli")
want_reason=$(jq -r '{eos: "stop", stop: "stop", length: "length", context: "length"}[.stop_reason]' "$tmp/cli")
post /v1/chat/completions "{\"messages\":$MESSAGES,\"max_tokens\":24,\"seed\":7,\"temperature\":0.8}" "$tmp/v1chat" > /dev/null
want_chat=$(jq -c '.choices[0].message.content' "$tmp/v1chat")
want_chat_reason=$(jq -r '.choices[0].finish_reason' "$tmp/v1chat")
size=$(wc -c < "$MODEL" | tr -d ' ')

# ----------------------------------------------------------------------------
# the ollama npm client

if command -v node > /dev/null 2>&1 && [ -f "$NODE_DIR/node_modules/ollama/package.json" ]; then
    CHAT_MESSAGES=$MESSAGES node tests/serve/ollama_client.mjs "$NODE_DIR" "http://127.0.0.1:$port" "$KEY" "$PROMPT" 24 7 \
        > "$tmp/out" 2> "$tmp/err"
    rc=$?
    check "the client ran: $(head -c 600 "$tmp/err")" [ $rc = 0 ]
    call() { jq -c --arg c "$1" 'select(.call == $c)' "$tmp/out"; }
    check "list: the one model, its file's size, family gpt2 ($(call list | head -c 400))" \
        [ "$(call list | jq -c '[(.models | length), .models[0].name, .models[0].model, .models[0].size,
                                 .models[0].details.family, (.models[0].digest | test("^sha256:[0-9a-f]{64}$"))]')" = \
          "[1,\"demo.bin\",\"demo.bin\",$size,\"gpt2\",true]" ]
    check "list: modified_at, parameter_size, quantization_level, format" \
        [ "$(call list | jq -c '[(.models[0].modified_at | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T")),
                                 (.models[0].details.parameter_size | test("^[0-9.]+[MB]$")),
                                 (.models[0].details.quantization_level | length > 0), .models[0].details.format]')" = \
          '[true,true,true,"model.bin"]' ]
    check "show: the context, the template, the details ($(call show | head -c 300))" \
        [ "$(call show | jq -c '[.model_info["gpt2.context_length"], .template, .details.family]')" = '[256,"{{ .Prompt }}","gpt2"]' ]
    check "ps: the model loaded ($(call ps | head -c 300))" [ "$(call ps | jq -c '[.models[0].name, .models[0].size > 0]')" = '["demo.bin",true]' ]
    check "generate: gpt's text ($(call generate), gpt $want_text)" [ "$(call generate | jq -c .response)" = "$want_text" ]
    check "generate: done, the reason, the counts, the durations" \
        [ "$(call generate | jq -c '[.done, .done_reason, .eval_count, .prompt_eval_count > 0, .durations]')" = \
          "[true,\"$want_reason\",$want_n,true,true]" ]
    check "generate stream: gpt's text ($(call 'generate stream'))" [ "$(call 'generate stream' | jq -c .response)" = "$want_text" ]
    check "generate stream: a text part and the last, done with the reason and count" \
        [ "$(call 'generate stream' | jq -c '[.parts >= 2, .done, .done_reason, .eval_count]')" = "[true,true,\"$want_reason\",$want_n]" ]
    check "chat: /v1/chat/completions' content ($(call chat), v1 $want_chat)" [ "$(call chat | jq -c .content)" = "$want_chat" ]
    check "chat: assistant, the reason" [ "$(call chat | jq -c '[.role, .done_reason]')" = "[\"assistant\",\"$want_chat_reason\"]" ]
    check "chat stream: the same content ($(call 'chat stream'))" [ "$(call 'chat stream' | jq -c .content)" = "$want_chat" ]
    check "chat stream: assistant, a text part and the last, done" \
        [ "$(call 'chat stream' | jq -c '[.role, .parts >= 2, .done, .done_reason]')" = "[\"assistant\",true,true,\"$want_chat_reason\"]" ]
    check "num_ctx above the context: ResponseError 400 naming options.num_ctx ($(call num_ctx))" \
        [ "$(call num_ctx | jq -c '[.error, .status, (.message | test("options.num_ctx 100000: more than the model.s context \\(256"))]')" = \
          '["ResponseError",400,true]' ]
    check "pull: ResponseError 501, gpt manages no models ($(call pull))" \
        [ "$(call pull | jq -c '[.error, .status, (.message | test("does not manage models"))]')" = '["ResponseError",501,true]' ]
elif [ "${GPT_TEST_REQUIRE_ALL:-0}" = 1 ]; then
    fail "no node, or no ollama package in $NODE_DIR (npm install --prefix $NODE_DIR ollama)"
else
    echo "cli_serve_ollama: the client's part skipped (no node, or no ollama package in $NODE_DIR)" >&2
fi

# ----------------------------------------------------------------------------
# curl

# ndjson FILE: every line one JSON object, the last alone "done": true
ndjson() {
    [ -s "$1" ] && jq -e 'type == "object"' "$1" > /dev/null 2>&1 &&
        [ "$(wc -l < "$1" | tr -d ' ')" = "$(jq -s length "$1")" ] &&
        [ "$(jq -sc '[(.[:-1] | map(.done) | unique), .[-1].done]' "$1")" = '[[false],true]' ]
}
body="{\"model\":\"demo.bin\",\"prompt\":\"$PROMPT\",\"options\":{\"num_predict\":24,\"seed\":7,\"temperature\":0.8}}"
type=$(curl -s -o "$tmp/nd" -w '%{content_type}' -H "Authorization: Bearer $KEY" --data-binary "$body" \
    "http://127.0.0.1:$port/api/generate")
check "generate streams by default: application/x-ndjson ($type)" [ "$type" = application/x-ndjson ]
check "the stream: one object a line, the last alone done ($(head -c 300 "$tmp/nd"))" ndjson "$tmp/nd"
check "the stream: gpt's text and count" \
    [ "$(jq -sc '[(map(.response) | join("")), .[-1].eval_count, .[-1].done_reason]' "$tmp/nd")" = "[$want_text,$want_n,\"$want_reason\"]" ]
check "the stream's last: the durations in nanoseconds, the seed" \
    [ "$(jq -sc '.[-1] | [(.total_duration >= .eval_duration), .load_duration, .seed, (.created_at | test("Z$"))]' "$tmp/nd")" = '[true,0,7,true]' ]
st=$(post /api/chat "{\"messages\":$MESSAGES,\"options\":{\"num_predict\":24,\"seed\":7,\"temperature\":0.8},\"keep_alive\":\"5m\"}" "$tmp/ndc")
check "chat streams with keep_alive: 200, /v1/chat/completions' content" \
    [ "$st" = 200 ] && ndjson "$tmp/ndc" && [ "$(jq -sc 'map(.message.content) | join("")' "$tmp/ndc")" = "$want_chat" ]

# num_predict -1: to the end of the context
"$GPT" -m "$MODEL" -p "$PROMPT" -n 256 -s 3 --json > "$tmp/cli_all" 2> /dev/null
st=$(post /api/generate "{\"prompt\":\"$PROMPT\",\"stream\":false,\"options\":{\"num_predict\":-1,\"seed\":3}}" "$tmp/all")
check "num_predict -1: gpt -n CONTEXT's text ($(head -c 200 "$tmp/all"))" \
    [ "$st" = 200 ] && [ "$(jq -c .response "$tmp/all")" = "$(jq -c .text "$tmp/cli_all")" ]

# format
"$GPT" -m "$MODEL" -p "$PROMPT" -n 40 -s 7 --json-object --json > "$tmp/cli_obj" 2> /dev/null
st=$(post /api/generate "{\"prompt\":\"$PROMPT\",\"stream\":false,\"format\":\"json\",\"options\":{\"num_predict\":40,\"seed\":7}}" "$tmp/obj")
check "format json: gpt --json-object's text ($(head -c 200 "$tmp/obj"))" \
    [ "$st" = 200 ] && [ "$(jq -c .response "$tmp/obj")" = "$(jq -c .text "$tmp/cli_obj")" ]
SCHEMA='{"type":"object","properties":{"who":{"enum":["Moses","Aaron"]}},"required":["who"]}'
"$GPT" -m "$MODEL" -p "$PROMPT" -n 40 -s 7 --json-schema "$SCHEMA" --json > "$tmp/cli_sch" 2> /dev/null
st=$(post /api/generate "{\"prompt\":\"$PROMPT\",\"stream\":false,\"format\":$SCHEMA,\"options\":{\"num_predict\":40,\"seed\":7}}" "$tmp/sch")
check "format SCHEMA: gpt --json-schema's text, which parses ($(head -c 200 "$tmp/sch"))" \
    [ "$st" = 200 ] && [ "$(jq -c .response "$tmp/sch")" = "$(jq -c .text "$tmp/cli_sch")" ] &&
    jq -r .response "$tmp/sch" | jq -e .who > /dev/null

# an empty prompt: Ollama's "load"
st=$(post /api/generate '{"model":"demo.bin"}' "$tmp/load")
check "no prompt: done at once, done_reason load ($(cat "$tmp/load"))" \
    [ "$st" = 200 ] && [ "$(jq -c '[.response, .done, .done_reason]' "$tmp/load")" = '["",true,"load"]' ]

check "GET /api/version: gpt --version's" [ "$(get /api/version "$tmp/v")" = 200 ] &&
    "$GPT" --version | grep -qF "$(jq -r .version "$tmp/v")"

# refused BODY PATH STATUS FIELD: Ollama's error, naming FIELD
refused() {
    st=$(post "$2" "$1" "$tmp/e")
    if [ "$st" = "$3" ] && jq -e --arg f "$4" '(.error | type == "string") and (.error | contains($f)) and (keys == ["error"])' \
        "$tmp/e" > /dev/null 2>&1
    then pass
    else fail "$2 $1: want $3 naming $4, got $st $(head -c 300 "$tmp/e")"
    fi
}
refused '{"prompt":"x","options":{"num_ctx":257}}' /api/generate 400 options.num_ctx
refused '{"prompt":"x","options":{"temperature":-1}}' /api/generate 400 "options.temperature must be a number >= 0"
refused '{"prompt":"x","options":{"top_p":0}}' /api/generate 400 options.top_p
refused '{"prompt":"x","options":{"num_predict":-3}}' /api/generate 400 options.num_predict
refused '{"prompt":"x","options":{"seed":1.5}}' /api/generate 400 options.seed
refused '{"prompt":"x","options":{"stop":[""]}}' /api/generate 400 options.stop
refused '{"prompt":"x","options":{"mirostat":2}}' /api/generate 400 options.mirostat
refused '{"prompt":"x","options":{"penalize_nothing":1}}' /api/generate 400 options.penalize_nothing
refused '{"prompt":"x","system":"Be brief."}' /api/generate 400 system
refused '{"prompt":"x","template":"{{ .System }} {{ .Prompt }}"}' /api/generate 400 template
refused '{"prompt":"x","suffix":"y"}' /api/generate 400 suffix
refused '{"prompt":"x","images":["aGk="]}' /api/generate 400 images
refused '{"prompt":"x","context":[1,2,3]}' /api/generate 400 context
refused '{"prompt":"x","format":"xml"}' /api/generate 400 format
refused '{"prompt":"x","format":{"type":"object","uniqueItems":true}}' /api/generate 400 format
refused '{"prompt":"x","bogus":1}' /api/generate 400 bogus
refused '{"prompt":"x","think":true}' /api/generate 400 think
refused '{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}' /api/chat 400 tools
refused '{"messages":[{"role":"user","content":"x","images":["aGk="]}]}' /api/chat 400 "messages[0].images"
refused '{"messages":[{"role":"tool","content":"x"}]}' /api/chat 400 "messages[0].role"
refused '{"model":"gpt2"}' /api/show 404 "model 'gpt2' not found"
refused '{"model":"x","from":"gpt2"}' /api/create 501 "does not manage models"
refused '{"source":"demo.bin","destination":"x"}' /api/copy 501 "does not manage models"
refused '{"model":"x"}' /api/push 501 "does not manage models"
check "DELETE /api/delete: 501, Ollama's error" \
    [ "$(curl -s -o "$tmp/e" -w '%{http_code}' -X DELETE -H "Authorization: Bearer $KEY" --data-binary '{"model":"demo.bin"}' \
        "http://127.0.0.1:$port/api/delete")" = 501 ] && jq -e '.error | contains("does not manage models")' "$tmp/e" > /dev/null
check "GET /api/generate: 405" [ "$(get /api/generate "$tmp/e")" = 405 ] && jq -e '.error | type == "string"' "$tmp/e" > /dev/null
st=$(post /api/show '{"model":"demo.bin:latest"}' "$tmp/show")
check "show demo.bin:latest: the model" [ "$st" = 200 ] && [ "$(jq -r .details.family "$tmp/show")" = gpt2 ]

# the key and CORS, as on /v1
check "no key: 401, Ollama's error" \
    [ "$(curl -s -o "$tmp/e" -w '%{http_code}' "http://127.0.0.1:$port/api/tags")" = 401 ] && jq -e '.error | type == "string"' "$tmp/e" > /dev/null
check "an allowed origin: its Access-Control-Allow-Origin on /api/tags" \
    sh -c "curl -s -D - -o /dev/null -H 'Authorization: Bearer $KEY' -H 'Origin: $ORIGIN' http://127.0.0.1:$port/api/tags | tr -d '\r' | grep -qx 'Access-Control-Allow-Origin: $ORIGIN'"
check "a preflight of /api/chat from it: 204" \
    [ "$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS -H "Origin: $ORIGIN" -H 'Access-Control-Request-Method: POST' \
        "http://127.0.0.1:$port/api/chat")" = 204 ]

kill -TERM "$pid"
wait "$pid"
check "the server: exit 0" [ $? = 0 ]
summary

#!/bin/sh
# cli_serve_responses.sh - OpenAI's Responses API in gpt serve
# (/v1/responses), on a free loopback port with an API key, through the
# official `openai` npm client (tests/serve/responses_client.mjs), each
# answer held to /v1/chat/completions' for the same conversation and seed
# (instructions a system message first, then the input's messages):
# responses.create plain (the text, the token ids, the usage, gpt's
# stop_reason and seed; status incomplete with max_output_tokens as the
# reason where chat's finish_reason is length; also `gpt --chat-template
# gpt2 -p MESSAGES`'s text), with input a string, streamed (the events in
# OpenAI's order, sequence_number 0, 1, ..., the deltas joined equal to
# the done text and to the final response's, which is the plain one's),
# the SDK's responses.stream helper, text.format json_schema through
# responses.parse (chat's response_format answer; output_parsed validates
# against the schema with python3-jsonschema; status completed) and
# streamed (ending with response.completed), the next turn with the first
# answer's output item sent back as it came (chat's answer with that
# assistant message); and store, previous_response_id, background, a
# built-in tool and a bad max_output_tokens refused as BadRequestError
# naming the field. Then with curl: the raw events (text/event-stream,
# each "event: NAME" with a data line of that type, no [DONE]), a
# response as the chat answer with gpt's settings (top_k, stop) and
# json_object, and the key (401).
# Needs node, the openai package in $NODE_DIR (npm install --prefix
# "$NODE_DIR" openai; scripts/install-deps.sh test does it) and
# python3-jsonschema. Without them it says "cli_serve_responses: SKIPPED
# (why)" and passes, unless GPT_TEST_REQUIRE_ALL=1.
# Prints "cli_serve_responses: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), NODE_DIR (default ~/.cache/gpt/node, or under $XDG_CACHE_HOME).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}
CHECK_NAME=cli_serve_responses
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need node curl jq
need_python jsonschema
[ -f "$NODE_DIR/node_modules/openai/package.json" ] ||
    skip "no openai package in $NODE_DIR: npm install --prefix $NODE_DIR openai"

KEY=sekret-responses
INSTRUCTIONS="Be brief."
INPUT='[{"role":"user","content":[{"type":"input_text","text":"Who spoke "},{"type":"input_text","text":"unto Moses?"}]}]'
SCHEMA='{"type":"object","properties":{"who":{"enum":["Moses","Aaron","the LORD"]},"verse":{"type":"integer","minimum":1,"maximum":99}},"required":["who","verse"]}'
start "$tmp/s.log" -m "$MODEL" --api-key "$KEY" -t 2 || { summary; exit 1; }
INSTRUCTIONS=$INSTRUCTIONS INPUT=$INPUT SCHEMA=$SCHEMA \
    node tests/serve/responses_client.mjs "$NODE_DIR" "http://127.0.0.1:$port/v1" "$KEY" 24 7 > "$tmp/out" 2> "$tmp/err"
rc=$?
check "the client ran: $(head -c 600 "$tmp/err")" [ $rc = 0 ]
call() { jq -c --arg c "$1" 'select(.call == $c)' "$tmp/out"; }

# The same conversation for /v1/chat/completions: instructions first, the
# input_text parts as text parts
MESSAGES=$(jq -cn --arg i "$INSTRUCTIONS" --argjson m "$INPUT" \
    '[{role: "system", content: $i}] + ($m | map(.content |= map({type: "text", text: .text})))')
CHAT="\"max_tokens\":24,\"seed\":7,\"temperature\":0.8"
post /v1/chat/completions "{\"messages\":$MESSAGES,$CHAT}" "$tmp/chat" > /dev/null
# same_as_chat WHAT RESPONSE CHAT: the response's text, token ids, stop
# reason, seed and usage are the chat answer's, and its status is
# completed where chat's finish_reason is stop, else incomplete with
# max_output_tokens as the reason
same_as_chat() {
    got=$(printf '%s\n' "$2" | jq -c '[.output[0].content[0].text, .tokens, .stop_reason, .seed,
        .usage.input_tokens, .usage.output_tokens, .usage.total_tokens, .status, .incomplete_details.reason,
        .output[0].status, .output[0].role, .object, (.id | test("^resp_"))]' 2> /dev/null)
    want=$(jq -c '[.choices[0].message.content, .choices[0].tokens, .choices[0].stop_reason, .seed,
        .usage.prompt_tokens, .usage.completion_tokens, .usage.total_tokens,
        ({stop: "completed", length: "incomplete"}[.choices[0].finish_reason]),
        ({stop: null, length: "max_output_tokens"}[.choices[0].finish_reason]),
        ({stop: "completed", length: "incomplete"}[.choices[0].finish_reason]), "assistant", "response", true]' "$3")
    if [ -n "$got" ] && [ "$got" = "$want" ]; then pass
    else fail "$1: /v1/responses gave $got, /v1/chat/completions $want"
    fi
}
same_as_chat "plain" "$(call plain | jq -c .response)" "$tmp/chat"
check "plain: the SDK's output_text is the text" [ "$(call plain | jq -c '.output_text == .response.output[0].content[0].text')" = true ]
check "plain: max_output_tokens 24 ended it (incomplete)" [ "$(call plain | jq -r .response.status)" = incomplete ]
check "plain: the request's fields repeated" \
    [ "$(call plain | jq -c '.response | [.instructions, .max_output_tokens, .temperature, .store, .text.format.type, .model]')" = \
      '["Be brief.",24,0.8,false,"text","demo.bin"]' ]
"$GPT" -m "$MODEL" --chat-template gpt2 -p "$MESSAGES" -n 24 -s 7 --temp 0.8 --json > "$tmp/cli" 2> /dev/null
check "plain: gpt --chat-template gpt2 -p MESSAGES's text" \
    [ "$(call plain | jq -c '.response.output[0].content[0].text')" = "$(jq -c .text "$tmp/cli")" ]

post /v1/chat/completions '{"messages":[{"role":"user","content":"Who spoke unto Moses?"}],"max_tokens":24,"seed":7}' \
    "$tmp/chat_str" > /dev/null
same_as_chat "input a string" "$(call 'string input' | jq -c .response)" "$tmp/chat_str"

# stream EVENTS LAST: the types in OpenAI's order, at least two deltas, ending with LAST
in_order() {
    call "$1" | jq -e --arg last "$2" '.types as $t | ($t | length) as $n |
        $t[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"] and
        $t[$n - 4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done", $last] and
        ($t[4:$n - 4] | length >= 2 and all(. == "response.output_text.delta")) and
        .sequence == [range(0; $n)]' > /dev/null
}
check "stream: the events in order, sequence_number 0.. ($(call stream | jq -c .types | head -c 400))" in_order stream response.incomplete
check "stream: the deltas joined are the done text and the final response's" \
    [ "$(call stream | jq -c '[.deltas == .done_text, .deltas == .final.output[0].content[0].text]')" = '[true,true]' ]
same_as_chat "stream: its final response" "$(call stream | jq -c .final)" "$tmp/chat"
check "stream helper: finalResponse's output_text is chat's ($(call 'stream helper'))" \
    [ "$(call 'stream helper' | jq -c '[.output_text, .status]')" = "$(jq -c '[.choices[0].message.content, "incomplete"]' "$tmp/chat")" ]

post /v1/chat/completions "{\"messages\":$MESSAGES,$CHAT,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"answer\",\"schema\":$SCHEMA,\"strict\":true}}}" \
    "$tmp/chat_schema" > /dev/null
same_as_chat "json_schema" "$(call json_schema | jq -c .response)" "$tmp/chat_schema"
check "json_schema: completed at the schema's end" [ "$(call json_schema | jq -r .response.status)" = completed ]
call json_schema | jq -c .output_parsed > "$tmp/parsed"
check "json_schema: output_parsed validates against the schema ($(cat "$tmp/parsed"))" \
    /usr/bin/python3 -c 'import json, sys, jsonschema; jsonschema.validate(json.load(open(sys.argv[1])), json.loads(sys.argv[2]))' \
    "$tmp/parsed" "$SCHEMA"
check "json_schema stream: in order, response.completed last" in_order 'json_schema stream' response.completed
same_as_chat "json_schema stream: its final response" "$(call 'json_schema stream' | jq -c .final)" "$tmp/chat_schema"

# the next turn: the answer sent back as an assistant message
ANSWER=$(jq -c '.choices[0].message.content' "$tmp/chat")
post /v1/chat/completions "{\"messages\":$(printf '%s' "$MESSAGES" | jq -c --argjson a "$ANSWER" '. + [{role: "assistant", content: $a}, {role: "user", content: "And then?"}]'),$CHAT}" \
    "$tmp/chat_next" > /dev/null
same_as_chat "next turn" "$(call 'next turn' | jq -c .response)" "$tmp/chat_next"

for field in store previous_response_id background tools max_output_tokens; do
    check "$field refused: BadRequestError naming it ($(call "refused $field"))" \
        [ "$(call "refused $field" | jq -c '[.error, .status, .bad_request, .param]')" = "[\"BadRequestError\",400,true,\"$field\"]" ]
done

# ----------------------------------------------------------------------------
# curl

body="{\"instructions\":\"$INSTRUCTIONS\",\"input\":$INPUT,\"max_output_tokens\":24,\"seed\":7,\"temperature\":0.8,\"stream\":true}"
type=$(curl -s -o "$tmp/sse" -w '%{content_type}' -H "Authorization: Bearer $KEY" --data-binary "$body" \
    "http://127.0.0.1:$port/v1/responses")
check "stream: text/event-stream ($type)" [ "$type" = text/event-stream ]
# every event a name line, a data line of that type, a blank line; no [DONE]
check "stream: event NAME then data of that type, no [DONE] ($(head -c 300 "$tmp/sse"))" /usr/bin/python3 -c '
import json, sys
blocks = open(sys.argv[1]).read().split("\n\n")
assert blocks[-1] == "", "the stream ends with a blank line"
for b in blocks[:-1]:
    name, data = b.split("\n")
    assert name.startswith("event: ") and data.startswith("data: "), b
    assert json.loads(data[6:])["type"] == name[7:], b
' "$tmp/sse"

# gpt's settings, as the chat body takes them
post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":30,\"seed\":3,\"top_k\":40,\"stop\":[\"\\n\"]}" \
    "$tmp/chat_k" > /dev/null
post /v1/responses '{"input":"Hi","max_output_tokens":30,"seed":3,"top_k":40,"stop":["\n"]}' "$tmp/resp_k" > /dev/null
same_as_chat "top_k and stop, gpt's own" "$(cat "$tmp/resp_k")" "$tmp/chat_k"
post /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"max_tokens":40,"seed":3,"response_format":{"type":"json_object"}}' \
    "$tmp/chat_o" > /dev/null
st=$(post /v1/responses '{"input":"Hi","max_output_tokens":40,"seed":3,"text":{"format":{"type":"json_object"}}}' "$tmp/resp_o")
check "text.format json_object: 200" [ "$st" = 200 ]
same_as_chat "text.format json_object" "$(cat "$tmp/resp_o")" "$tmp/chat_o"
check "no key: 401" [ "$(curl -s -o /dev/null -w '%{http_code}' --data-binary '{"input":"x"}' "http://127.0.0.1:$port/v1/responses")" = 401 ]
check "GET /v1/responses: 405" [ "$(get /v1/responses "$tmp/e")" = 405 ]

kill -TERM "$pid"
wait "$pid"
check "the server: exit 0" [ $? = 0 ]
summary

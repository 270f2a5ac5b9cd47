#!/bin/sh
# cli_serve_tools.sh - function tools on gpt serve's /v1/chat/completions,
# on a free loopback port with an API key, through the official `openai`
# npm client and LangChain's ChatOpenAI.bindTools (tests/serve/tools_client.mjs):
# tool_choice "required" answers one call (content null, finish_reason
# tool_calls) whose arguments parse and validate against the function's
# parameters (python3-jsonschema), and whose text and tokens are `gpt
# --chat-template gpt2 -p MESSAGES --json-schema SCHEMA`'s with SCHEMA the
# anyOf of {"name": {"const": NAME}, "arguments": PARAMETERS} that
# docs/chat.md gives; a named function the same with its one branch; the
# stream's deltas (the id and name once, the arguments in pieces) join to
# the plain call; "auto" (the default) a BadRequestError naming tool_choice;
# LangChain's tool_calls the same call; the call and its result sent back
# (the client's message and a tool message; LangChain's AIMessage and a
# ToolMessage) give `gpt --chat-template gpt2`'s answer with the call as
# the assistant's text and the result as a user message. Then with curl: "none" is the
# answer without tools, parallel_tool_calls true the same call, a call cut
# by max_tokens finish_reason length, and the refusals, each a 400 naming
# its field.
# Needs node, the openai and @langchain/openai packages in $NODE_DIR and
# python3-jsonschema; without them "cli_serve_tools: SKIPPED (why)", a
# pass unless GPT_TEST_REQUIRE_ALL=1.
# Prints "cli_serve_tools: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), NODE_DIR (default ~/.cache/gpt/node, or under $XDG_CACHE_HOME).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}
CHECK_NAME=cli_serve_tools
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need node curl jq
need_python jsonschema
[ -f "$NODE_DIR/node_modules/openai/package.json" ] ||
    skip "no openai package in $NODE_DIR: npm install --prefix $NODE_DIR openai"
[ -f "$NODE_DIR/node_modules/@langchain/openai/package.json" ] ||
    skip "no @langchain/openai package in $NODE_DIR: npm install --prefix $NODE_DIR @langchain/openai"

KEY=sekret-tools
TOOLS='[{"type":"function","function":{"name":"get_weather","description":"The weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":20},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"]}}},{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"enum":["UTC","CET"]}},"required":["zone"]}}}]'
MESSAGES='[{"role":"system","content":"Call a tool."},{"role":"user","content":"Weather in Paris?"}]'
start "$tmp/s.log" -m "$MODEL" --api-key "$KEY" -t 2 || { summary; exit 1; }
RESULT="12:00 in Paris"
TOOLS=$TOOLS MESSAGES=$MESSAGES RESULT=$RESULT node tests/serve/tools_client.mjs "$NODE_DIR" "http://127.0.0.1:$port/v1" "$KEY" 7 \
    > "$tmp/out" 2> "$tmp/err"
rc=$?
check "the client ran: $(head -c 600 "$tmp/err")" [ $rc = 0 ]
call() { jq -c --arg c "$1" 'select(.call == $c)' "$tmp/out"; }

# branch NAMES: the calls' schema, as docs/chat.md gives it
calls_schema() {
    printf '%s' "$TOOLS" | jq -c --argjson only "$1" '[.[].function | select($only == null or .name == $only) |
        {type: "object", properties: {name: {const: .name}, arguments: .parameters}, required: ["name", "arguments"]}] |
        if length == 1 then .[0] else {anyOf: .} end'
}
# valid CALL: its one tool call's arguments parse and are an instance of its function's parameters
valid() {
    call "$1" | jq -c '.message.tool_calls[0].function' > "$tmp/fn"
    /usr/bin/python3 -c '
import json, sys, jsonschema
fn = json.load(open(sys.argv[1]))
params = {t["function"]["name"]: t["function"]["parameters"] for t in json.loads(sys.argv[2])}
jsonschema.validate(json.loads(fn["arguments"]), params[fn["name"]])
' "$tmp/fn" "$TOOLS"
}
# as_cli CALL ONLY: the call's text ({"name":..,"arguments":..} as generated) and tokens are gpt --json-schema's
as_cli() {
    "$GPT" -m "$MODEL" --chat-template gpt2 -p "$MESSAGES" -s 7 --json-schema "$(calls_schema "$2")" --json \
        > "$tmp/cli" 2> /dev/null
    got=$(call "$1" | jq -c '.message.tool_calls[0].function | [("{\"name\":\"" + .name + "\",\"arguments\":" + .arguments + "}")]')
    got=$(call "$1" | jq -c --argjson t "$got" '$t + [.tokens]')
    want=$(jq -c '[.text, .tokens]' "$tmp/cli")
    if [ "$got" = "$want" ]; then pass; else fail "$1: the server's call $got, gpt --json-schema's $want"; fi
}

check "required: one call, content null, finish_reason tool_calls ($(call required | head -c 400))" \
    [ "$(call required | jq -c '[.message.role, .message.content, (.message.tool_calls | length),
                                 .message.tool_calls[0].type, (.message.tool_calls[0].id | test("^call_")), .finish_reason]')" = \
      '["assistant",null,1,"function",true,"tool_calls"]' ]
check "required: the arguments parse and validate against the function's parameters" valid required
as_cli required null
check "named get_weather: its call ($(call named | head -c 400))" \
    [ "$(call named | jq -c '[.message.tool_calls[0].function.name, .finish_reason]')" = '["get_weather","tool_calls"]' ]
check "named: the arguments validate" valid named
as_cli named '"get_weather"'
check "stream: the deltas join to the plain call ($(call stream))" \
    [ "$(call stream | jq -c '[.role, .name, .arguments, .finish_reason, (.id | test("^call_")), .pieces > 2]')" = \
      "$(call required | jq -c '["assistant", .message.tool_calls[0].function.name, .message.tool_calls[0].function.arguments, "tool_calls", true, true]')" ]
check "auto: BadRequestError naming tool_choice ($(call auto | head -c 300))" \
    [ "$(call auto | jq -c '[.error, .status, .param]')" = '["BadRequestError",400,"tool_choice"]' ]
check "LangChain bindTools(tool_choice required): the same call ($(call langchain))" \
    [ "$(call langchain | jq -c '[.tool_calls[0].name, .tool_calls[0].args, .finish_reason]')" = \
      "$(call required | jq -c '[.message.tool_calls[0].function.name, (.message.tool_calls[0].function.arguments | fromjson), "tool_calls"]')" ]

# the next turn: the call sent back renders as its text, the tool's result as a user message
CALL=$(call required | jq -c '.message.tool_calls[0].function | "{\"name\":\"" + .name + "\",\"arguments\":" + .arguments + "}"')
NEXT=$(printf '%s' "$MESSAGES" | jq -c --argjson c "$CALL" --arg r "$RESULT" '. + [{role: "assistant", content: $c}, {role: "user", content: $r}]')
"$GPT" -m "$MODEL" --chat-template gpt2 -p "$NEXT" -s 7 -n 12 --json > "$tmp/cli_next" 2> /dev/null
check "the call and a tool message sent back: gpt --chat-template's answer with the call as the assistant's text and the result as a user's ($(call 'openai tool result'))" \
    [ "$(call 'openai tool result' | jq -c '[.content, .tokens]')" = "$(jq -c '[.text, .tokens]' "$tmp/cli_next")" ]
check "LangChain: its AIMessage and a ToolMessage sent back, the same answer ($(call 'langchain tool result'))" \
    [ "$(call 'langchain tool result' | jq -c .content)" = "$(jq -c .text "$tmp/cli_next")" ]

# ----------------------------------------------------------------------------
# curl

post /v1/chat/completions "{\"messages\":$MESSAGES,\"max_tokens\":8,\"seed\":7}" "$tmp/plain" > /dev/null
post /v1/chat/completions "{\"messages\":$MESSAGES,\"max_tokens\":8,\"seed\":7,\"tools\":$TOOLS,\"tool_choice\":\"none\"}" \
    "$tmp/none" > /dev/null
check "tool_choice none: the answer without tools" \
    [ "$(jq -c '.choices[0] | [.message, .tokens]' "$tmp/none")" = "$(jq -c '.choices[0] | [.message, .tokens]' "$tmp/plain")" ]
post /v1/chat/completions "{\"messages\":$MESSAGES,\"seed\":7,\"tools\":$TOOLS,\"tool_choice\":\"required\",\"parallel_tool_calls\":true}" \
    "$tmp/par" > /dev/null
check "parallel_tool_calls true: the one call" \
    [ "$(jq -c '.choices[0].message' "$tmp/par" | jq -c 'del(.tool_calls[0].id)')" = "$(call required | jq -c '.message | del(.tool_calls[0].id)')" ]
post /v1/chat/completions "{\"messages\":$MESSAGES,\"seed\":7,\"max_tokens\":20,\"tools\":$TOOLS,\"tool_choice\":\"required\"}" \
    "$tmp/cut" > /dev/null
check "a call cut by max_tokens: finish_reason length ($(head -c 300 "$tmp/cut"))" \
    [ "$(jq -r '.choices[0].finish_reason' "$tmp/cut")" = length ]

# refused PARAM BODY-FIELDS: a 400 naming PARAM
refused() {
    st=$(post /v1/chat/completions "{\"messages\":$MESSAGES,$2}" "$tmp/e")
    if [ "$st" = 400 ] && jq -e --arg p "$1" '.error.param == $p and (.error.message | length > 0)' "$tmp/e" > /dev/null 2>&1
    then pass
    else fail "$2: want 400 naming $1, got $st $(head -c 300 "$tmp/e")"
    fi
}
refused tool_choice "\"tools\":$TOOLS"
refused tool_choice "\"tools\":$TOOLS,\"tool_choice\":\"auto\""
refused tool_choice "\"tools\":$TOOLS,\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}"
refused tool_choice "\"tools\":$TOOLS,\"tool_choice\":5"
refused tool_choice '"tool_choice":"required"'
refused tools "\"tools\":$TOOLS,\"tool_choice\":\"required\",\"response_format\":{\"type\":\"json_object\"}"
refused tools '"tools":5,"tool_choice":"required"'
refused tools '"tools":[{"type":"web_search"}],"tool_choice":"required"'
refused tools '"tools":[{"type":"function","function":{"name":"a b"}}],"tool_choice":"required"'
refused tools '"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}],"tool_choice":"required"'
refused tools '"tools":[{"type":"function","function":{"name":"f","parameters":5}}],"tool_choice":"required"'
refused tools '"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"array","uniqueItems":true}}}],"tool_choice":"required"'
refused tools '"tools":[{"type":"function","function":{"name":"f","x":1}}],"tool_choice":"required"'
refused parallel_tool_calls "\"tools\":$TOOLS,\"tool_choice\":\"required\",\"parallel_tool_calls\":\"yes\""

kill -TERM "$pid"
wait "$pid"
check "the server: exit 0" [ $? = 0 ]
summary

#!/bin/sh
# cli_serve_langchain.sh - gpt serve through LangChain's JS package
# @langchain/openai (tests/serve/langchain_client.mjs), on a free loopback
# port, with LangChain's defaults (only the model, the key, the base URL,
# max tokens and a seed set): its `OpenAI` LLM's invoke and stream each
# equal to `gpt -p PROMPT -n 24 -s 7 --json`'s text.
# Needs node and the package in tests/serve/node (npm install --prefix
# tests/serve/node @langchain/openai; .ci/run does it). Without them it says
# "cli_serve_langchain: SKIPPED (why)" and passes, unless
# GPT_TEST_REQUIRE_ALL=1.
# Prints "cli_serve_langchain: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), NODE_DIR (default tests/serve/node).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
NODE_DIR=${NODE_DIR:-tests/serve/node}
CHECK_NAME=cli_serve_langchain
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need node curl jq
[ -f "$NODE_DIR/node_modules/@langchain/openai/package.json" ] ||
    skip "no @langchain/openai package in $NODE_DIR: npm install --prefix $NODE_DIR @langchain/openai"

KEY=sekret-langchain
PROMPT="The LORD said unto Moses"
start "$tmp/s.log" -m "$MODEL" --api-key "$KEY" -t 2 || { summary; exit 1; }
node tests/serve/langchain_client.mjs "$NODE_DIR" "http://127.0.0.1:$port/v1" "$KEY" "$PROMPT" 24 7 \
    > "$tmp/out" 2> "$tmp/err"
rc=$?
check "the client ran: $(head -c 600 "$tmp/err")" [ $rc = 0 ]
"$GPT" -m "$MODEL" -p "$PROMPT" -n 24 -s 7 --json > "$tmp/cli" 2> /dev/null

# call NAME: its line of the client's output
call() { jq -c --arg c "$1" 'select(.call == $c)' "$tmp/out"; }
want_text=$(jq -c .text "$tmp/cli")
check "OpenAI invoke: gpt's text ($(call 'llm invoke'))" [ "$(call 'llm invoke' | jq -c .text)" = "$want_text" ]
check "OpenAI stream: gpt's text ($(call 'llm stream'))" [ "$(call 'llm stream' | jq -c .text)" = "$want_text" ]
check "OpenAI stream: in pieces" [ "$(call 'llm stream' | jq .chunks)" -gt 1 ]
kill -TERM "$pid"
wait "$pid"
check "the server: exit 0" [ $? = 0 ]
summary

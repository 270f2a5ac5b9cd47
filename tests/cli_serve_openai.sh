#!/bin/sh
# cli_serve_openai.sh - gpt serve through the official `openai` npm client
# (tests/serve/openai_client.mjs), on a free loopback port: completions
# with and without streaming, and with logprobs, each equal to `gpt -p
# PROMPT -s SEED --json` with the same settings; a stream with
# stream_options.include_usage (its last chunk's usage is the plain call's);
# models.retrieve; best_of (each choice gpt's with its seed); and the
# client's own error classes for a wrong key (AuthenticationError, 401), a
# value out of range (BadRequestError, 400) and another model
# (NotFoundError, 404); chat.completions.create plain, with logprobs
# (the chat shape's numbers gpt --logprobs's, bit for bit) and streaming
# with include_usage, each equal to `gpt -p RENDERED --special -s SEED` (the
# default gpt2 template, RENDERED from /apply-template), max_completion_tokens,
# response_format json_schema (the content `gpt -p RENDERED --special
# --json-schema`'s, parsing as JSON) and one with a keyword outside the
# subset refused as BadRequestError naming response_format. Then LangChain's JS package
# @langchain/openai (tests/serve/langchain_client.mjs) with LangChain's
# defaults: its `OpenAI` LLM's invoke and stream, each gpt's text, and its
# `ChatOpenAI`'s invoke and stream (one user message), each `gpt -p
# RENDERED --special -s SEED`'s text, RENDERED from /apply-template.
# Needs node and the packages in $NODE_DIR, outside the repository (npm install --prefix
# "$NODE_DIR" openai @langchain/openai; scripts/install-deps.sh test does it). Without them it says
# "cli_serve_openai: SKIPPED (why)" and passes, unless GPT_TEST_REQUIRE_ALL=1.
# Prints "cli_serve_openai: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), NODE_DIR (default ~/.cache/gpt/node, or under $XDG_CACHE_HOME).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}
CHECK_NAME=cli_serve_openai
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need node curl jq
[ -f "$NODE_DIR/node_modules/openai/package.json" ] ||
    skip "no openai package in $NODE_DIR: npm install --prefix $NODE_DIR openai"
[ -f "$NODE_DIR/node_modules/@langchain/openai/package.json" ] ||
    skip "no @langchain/openai package in $NODE_DIR: npm install --prefix $NODE_DIR @langchain/openai"

KEY=sekret-openai
PROMPT="The LORD said unto Moses"
start "$tmp/s.log" -m "$MODEL" --api-key "$KEY" -t 2 || { summary; exit 1; }
MESSAGES='[{"role":"system","content":"Be brief."},{"role":"user","content":"Who spoke unto Moses?"}]'
SCHEMA='{"type":"object","properties":{"who":{"enum":["Moses","Aaron","the LORD"]},"verse":{"type":"integer","minimum":1,"maximum":99}},"required":["who","verse"]}'
CHAT_MESSAGES=$MESSAGES CHAT_SCHEMA=$SCHEMA node tests/serve/openai_client.mjs "$NODE_DIR" "http://127.0.0.1:$port/v1" "$KEY" "$PROMPT" 24 7 \
    > "$tmp/out" 2> "$tmp/err"
rc=$?
check "the client ran: $(head -c 600 "$tmp/err")" [ $rc = 0 ]
"$GPT" -m "$MODEL" -p "$PROMPT" -n 24 -s 7 --json > "$tmp/cli" 2> /dev/null
"$GPT" -m "$MODEL" -p "$PROMPT" -n 24 -s 7 --logprobs 2 --json > "$tmp/cli_lp" 2> /dev/null

# call NAME: its line of the client's output
call() { jq -c --arg c "$1" 'select(.call == $c)' "$tmp/out"; }
want_text=$(jq -c .text "$tmp/cli")
check "plain: gpt's text ($(call plain))" [ "$(call plain | jq -c .text)" = "$want_text" ]
check "plain: the seed back" [ "$(call plain | jq -c .seed)" = 7 ]
check "logprobs: gpt's, bit for bit" [ "$(call logprobs | jq -c '[.text, .logprobs]')" = \
    "$(jq -c '[.text, .logprobs]' "$tmp/cli_lp")" ]
check "stream: gpt's text ($(call stream))" [ "$(call stream | jq -c .text)" = "$want_text" ]
check "stream: in pieces" [ "$(call stream | jq .chunks)" -gt 1 ]
check "stream: a finish_reason" [ "$(call stream | jq -r .finish_reason)" = length ]
check "bad key: AuthenticationError, 401 ($(call 'bad key'))" \
    [ "$(call 'bad key' | jq -c '[.error, .status, .auth, .type]')" = '["AuthenticationError",401,true,"authentication_error"]' ]
check "bad value: BadRequestError, 400 ($(call 'bad value'))" \
    [ "$(call 'bad value' | jq -c '[.error, .status, .bad_request, .param]')" = '["BadRequestError",400,true,"temperature"]' ]
check "bad value: the command's message" sh -c "jq -r 'select(.call == \"bad value\") | .message' '$tmp/out' | grep -q 'must be a number >= 0'"
check "stream with include_usage: gpt's text" [ "$(call 'stream usage' | jq -c .text)" = "$want_text" ]
check "stream with include_usage: the plain call's usage ($(call 'stream usage' | jq -c .usage))" \
    [ "$(call 'stream usage' | jq -c .usage)" = "$(call 'plain usage' | jq -c .usage)" ]
check "stream with include_usage: the last chunk has no choices, the others usage null" \
    [ "$(call 'stream usage' | jq -c '[.last_choices, .nulls > 1]')" = '[0,true]' ]
check "models.retrieve ($(call retrieve))" [ "$(call retrieve | jq -c '[.id, .object]')" = '["demo.bin","model"]' ]
check "models.retrieve of another: NotFoundError, 404 ($(call 'no model'))" \
    [ "$(call 'no model' | jq -c '[.error, .status, .not_found, .code]')" = '["NotFoundError",404,true,"model_not_found"]' ]
k=0
for sd in $(call best_of | jq -r '.seeds[]'); do
    "$GPT" -m "$MODEL" -p "$PROMPT" -n 24 -s "$sd" --json > "$tmp/b" 2> /dev/null
    check "best_of 4, n 2: choice $k is gpt -s $sd's" [ "$(call best_of | jq -c ".texts[$k]")" = "$(jq -c .text "$tmp/b")" ]
    k=$((k + 1))
done
check "best_of 4, n 2: two choices, seeds in 7..10" [ "$(call best_of | jq -c '[.seeds | length, all(. >= 7 and . <= 10)]')" = '[2,true]' ]
# LangChain: the same prompt, max tokens and seed
node tests/serve/langchain_client.mjs "$NODE_DIR" "http://127.0.0.1:$port/v1" "$KEY" "$PROMPT" 24 7 chat \
    > "$tmp/lc" 2> "$tmp/lc_err"
rc=$?
check "LangChain ran: $(head -c 600 "$tmp/lc_err")" [ $rc = 0 ]
lc() { jq -c --arg c "$1" 'select(.call == $c)' "$tmp/lc"; }
check "LangChain OpenAI invoke: gpt's text ($(lc 'llm invoke'))" [ "$(lc 'llm invoke' | jq -c .text)" = "$want_text" ]
check "LangChain OpenAI stream: gpt's text ($(lc 'llm stream'))" [ "$(lc 'llm stream' | jq -c .text)" = "$want_text" ]
check "LangChain OpenAI stream: in pieces" [ "$(lc 'llm stream' | jq .chunks)" -gt 1 ]
# ChatOpenAI sends [['human', PROMPT]] as one user message
post /apply-template "$(jq -cn --arg p "$PROMPT" '{messages: [{role: "user", content: $p}]}')" "$tmp/lc_rendered" > /dev/null
lc_rendered=$(jq -r .prompt "$tmp/lc_rendered")
"$GPT" -m "$MODEL" -p "$lc_rendered" --special -n 24 -s 7 --json > "$tmp/cli_lc_chat" 2> /dev/null
want_lc_chat=$(jq -c .text "$tmp/cli_lc_chat")
check "LangChain ChatOpenAI invoke: gpt -p RENDERED --special's text ($(lc 'chat invoke'), gpt $want_lc_chat)" \
    [ "$(lc 'chat invoke' | jq -c .text)" = "$want_lc_chat" ]
check "LangChain ChatOpenAI stream: gpt -p RENDERED --special's text ($(lc 'chat stream'))" \
    [ "$(lc 'chat stream' | jq -c .text)" = "$want_lc_chat" ]
check "LangChain ChatOpenAI stream: in pieces" [ "$(lc 'chat stream' | jq .chunks)" -gt 1 ]

# chat: gpt -p RENDERED --special
post /apply-template "{\"messages\":$MESSAGES}" "$tmp/rendered" > /dev/null
rendered=$(jq -r .prompt "$tmp/rendered")
"$GPT" -m "$MODEL" -p "$rendered" --special -n 24 -s 7 --logprobs 2 --json > "$tmp/cli_chat" 2> /dev/null
want_chat=$(jq -c .text "$tmp/cli_chat")
check "chat: gpt -p RENDERED --special's text ($(call chat))" [ "$(call chat | jq -c .content)" = "$want_chat" ]
check "chat: assistant, chat.completion, the seed, length"     [ "$(call chat | jq -c '[.role, .object, .seed, .finish_reason]')" = '["assistant","chat.completion",7,"length"]' ]
check "chat logprobs: gpt's, bit for bit ($(call 'chat logprobs' | head -c 300))"     [ "$(call 'chat logprobs' | jq -c '[.content, (.logprobs | map([.token, .logprob, (.top_logprobs | map([.token, .logprob]))]))]')" = \
      "$(jq -c '[.text, ([.logprobs.tokens, .logprobs.token_logprobs, .logprobs.top_logprobs] | transpose |
                  map([.[0], .[1], (.[2] | to_entries | map([.key, .value]))]))]' "$tmp/cli_chat")" ]
check "chat logprobs: bytes are the token's UTF-8" \
    [ "$(call 'chat logprobs' | jq -c '[.logprobs[] | (.bytes | implode) == .token] | all')" = true ]
check "chat stream: gpt's text ($(call 'chat stream'))" [ "$(call 'chat stream' | jq -c .content)" = "$want_chat" ]
check "chat stream: the role, chunks, length, the plain call's usage last" \
    [ "$(call 'chat stream' | jq -c '[.role, .chunks > 3, .finish_reason, .last_choices, .object]')" = \
      '["assistant",true,"length",0,"chat.completion.chunk"]' ] &&
    [ "$(call 'chat stream' | jq -c .usage)" = "$(call chat | jq -c .usage)" ]
check "chat max_completion_tokens 3" [ "$(call 'chat max_completion_tokens' | jq .tokens)" = 3 ]
"$GPT" -m "$MODEL" -p "$rendered" --special -n 24 -s 7 --json-schema "$SCHEMA" --json > "$tmp/cli_fmt" 2> /dev/null
check "chat response_format json_schema: gpt --json-schema's content, stop ($(call 'chat response_format'))" \
    [ "$(call 'chat response_format' | jq -c '[.content, .finish_reason]')" = "$(jq -c '[.text, "stop"]' "$tmp/cli_fmt")" ]
check "chat response_format json_schema: the content parses" sh -c "jq -r .text '$tmp/cli_fmt' | jq -e .verse > /dev/null"
check "chat response_format with uniqueItems: BadRequestError naming it ($(call 'chat response_format bad'))" \
    [ "$(call 'chat response_format bad' | jq -c '[.error, .status, .bad_request, .param]')" = \
      '["BadRequestError",400,true,"response_format"]' ]
kill -TERM "$pid"
wait "$pid"
check "the server: exit 0" [ $? = 0 ]
summary

#!/bin/sh
# cli_serve.sh - gpt serve from the outside, with curl, on free loopback
# ports (--port 0; nothing here reaches beyond 127.0.0.1):
#   - every endpoint, and every error status (400 with the command's
#     messages, 401, 404, 405, 413, 503 with Retry-After), the port in use,
#     the warning of a non-loopback address without a key;
#   - the promise: for prompts and settings with a seed, the tokens and text
#     of a completion equal `gpt -p PROMPT -s SEED --json` with the same
#     options, bit for bit: one request at a time, streamed and not (the
#     stream read back into the same text), and 32 requests in flight at
#     once, mixed, with shared prefixes; log-probabilities (with echo, past
#     the context with context_shift); several prompts and n > 1 (choice k
#     is seed + k); token-id prompts; /v1/score equals gpt --score --json;
#   - a client that goes away mid-stream, or before its whole answer (its
#     sequence dropped, its blocks back, /metrics counts it), SIGTERM under
#     load (every answer whole,
#     exit 0), and past the grace (finish_reason "interrupted", exit 0).
# The last two need the 124M-shaped test checkpoint (slow enough to cut a
# request in the middle); without $CKPT_DIR they are skipped, saying so.
# Prints "cli_serve: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), CKPT_DIR (default build/ckpt).
GPT=${GPT:-build/gpt}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
MODEL=models/demo.bin
CHECK_NAME=cli_serve
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need curl jq

# The cases: PROMPT|gpt's options|the request's fields. Same settings, same
# seed: the same tokens (and log-probabilities). One goes past the demo
# model's context of 256 with context_shift. The last two share a prefix of
# 40-odd tokens.
PREFIX="And it came to pass, when the men of the city saw that the king was come, that they said one to another, Go to, let us"
cat > "$tmp/cases" << EOF
Hello|-n 20|{"max_tokens":20,"seed":1}
The LORD said unto Moses|-n 30 --temp 0.8 --top-k 40|{"max_tokens":30,"temperature":0.8,"top_k":40,"seed":7}
Call me Ishmael.|-n 25 --top-p 0.9 --min-p 0.05|{"max_tokens":25,"top_p":0.9,"min_p":0.05,"seed":123}
And it came to pass|-n 40 --repeat-penalty 1.3 --stop \n|{"max_tokens":40,"repeat_penalty":1.3,"seed":2,"stop":"\n"}
|-n 10|{"max_tokens":10,"seed":5}
In the beginning|--temp 0 -n 30|{"max_tokens":30,"temperature":0,"seed":0}
The end.|--ignore-eos -n 50|{"max_tokens":50,"ignore_eos":true,"seed":9}
Mr. Speaker, Mr. Vice President|-n 12|{"max_tokens":12,"seed":"18446744073709551615"}
Hello|-n 20 --logprobs 3|{"max_tokens":20,"seed":3,"logprobs":3}
Hello|-n 20 --stop , --logprobs 1|{"max_tokens":20,"seed":3,"stop":",","logprobs":1}
Hello|-n 300 --ignore-eos|{"max_tokens":300,"seed":13,"ignore_eos":true}
The LORD said|-n 12 --temp 0.7 --logprobs 2 --echo|{"max_tokens":12,"temperature":0.7,"seed":4,"logprobs":2,"echo":true}
In the beginning God created|-n 260 --context-shift --keep 3 --ignore-eos --logprobs 1|{"max_tokens":260,"context_shift":true,"keep":3,"ignore_eos":true,"seed":8,"logprobs":1}
$PREFIX build a tower|-n 24 --temp 0.9|{"max_tokens":24,"seed":11,"temperature":0.9}
$PREFIX make brick|-n 24 --top-k 5|{"max_tokens":24,"seed":12,"top_k":5}
EOF
n_cases=$(wc -l < "$tmp/cases")

# case_line N: the Nth case (from 0); sets $prompt $opts $fields
case_line() {
    line=$(sed -n "$(($1 + 1))p" "$tmp/cases")
    prompt=${line%%|*}
    rest=${line#*|}
    opts=${rest%%|*}
    fields=${rest#*|}
}

# expected N OFF: gpt's own --json for case N with its seed (OFF 0) or the
# seed N * 1000 + OFF, in $tmp/exp_N_OFF; the request body in $tmp/req_N_OFF
expected() {
    case_line "$1"
    seed=$(printf '%s\n' "$fields" | jq -r '.seed')
    [ "$2" = 0 ] || seed=$(($1 * 1000 + $2))  # another seed of the same case
    # shellcheck disable=SC2086 # opts are words
    "$GPT" -m "$MODEL" -p "$prompt" $opts -s "$seed" --json > "$tmp/exp_$1_$2" 2> /dev/null ||
        fail "gpt -p '$prompt' $opts -s $seed failed"
    jq -cn --arg p "$prompt" --argjson f "$fields" --arg s "$seed" '$f + {prompt: $p, seed: $s}' > "$tmp/req_$1_$2"
}

# ----------------------------------------------------------------------------
# server A: the demo model, with a key from the environment, a small body
# limit, and a grace long enough for the SIGTERM test's requests to end whole
# (under ASan on a busy machine the default 10 s was not)
KEY=sekret-key-1
GPT_API_KEY=$KEY start "$tmp/a.log" -m "$MODEL" --max-body 64K --parallel 16 -t 2 --grace 300 || { summary; exit 1; }
A_PID=$pid
A_PORT=$port
grep -q '^gpt: serving demo.bin on http://127.0.0.1:' "$tmp/a.log" && pass || fail "no ready line: $(cat "$tmp/a.log")"

# the endpoints
check "/health" [ "$(get /health "$tmp/o")" = 200 ]
check "/health says ok" [ "$(jq -r .status "$tmp/o")" = ok ]
check "/v1/models" [ "$(get /v1/models "$tmp/o")" = 200 ]
check "/v1/models names demo.bin" [ "$(jq -r '.data[0].id' "$tmp/o")" = demo.bin ]
check "/v1/models/demo.bin" [ "$(get /v1/models/demo.bin "$tmp/o")" = 200 ]
check "/v1/models/demo.bin: the list's object" [ "$(jq -c . "$tmp/o")" = "$(get /v1/models "$tmp/l" > /dev/null
    jq -c '.data[0]' "$tmp/l")" ]
check "/v1/models/gpt-4: 404" [ "$(get /v1/models/gpt-4 "$tmp/o")" = 404 ]
check "/v1/models/gpt-4: OpenAI's error ($(cat "$tmp/o"))" \
    [ "$(jq -c '.error | [.type, .param, .code]' "$tmp/o")" = '["invalid_request_error","model","model_not_found"]' ]
check "/v1/models/demo.binx: 404" [ "$(get /v1/models/demo.binx "$tmp/o")" = 404 ]
check "/v1/models/ + 300 bytes: 404" [ "$(get "/v1/models/$(head -c 300 /dev/zero | tr '\0' a)" "$tmp/o")" = 404 ]
check "/tokenize" [ "$(post /tokenize '{"content":"Hello world"}' "$tmp/o")" = 200 ]
check "/tokenize = gpt --tokenize" [ "$(jq -c .tokens "$tmp/o")" = "$("$GPT" --tokenize -p 'Hello world' --json)" ]
check "/detokenize" [ "$(post /detokenize '{"tokens":[15496,995]}' "$tmp/o")" = 200 ]
check "/detokenize's text" [ "$(jq -r .content "$tmp/o")" = "Hello world" ]
check "/v1/score" [ "$(post /v1/score '{"prompt":"The cat sat on the mat."}' "$tmp/o")" = 200 ]
"$GPT" -m "$MODEL" --score -p "The cat sat on the mat." --json 2> /dev/null > "$tmp/score_cli"
check "/v1/score = gpt --score --json" [ "$(jq -c '[.tokens, .logprobs, .sum, .perplexity, .windows]' "$tmp/o")" = \
    "$(jq -c '[.tokens, .logprobs, .sum, .perplexity, .windows]' "$tmp/score_cli")" ]
check "/v1/score's logprobs line up with its tokens (the first null)" \
    jq -e '(.logprobs | length) == (.tokens | length) and .logprobs[0] == null' "$tmp/o" > /dev/null
check "/v1/score with prepend_eos" \
    [ "$(post /v1/score '{"prompt":"The cat sat on the mat.","prepend_eos":true}' "$tmp/o")" = 200 ]
"$GPT" -m "$MODEL" --score --prepend-eos -p "The cat sat on the mat." --json 2> /dev/null > "$tmp/score_cli"
check "/v1/score prepend_eos = gpt --score --prepend-eos --json: $(jq -c .tokens "$tmp/o")" \
    [ "$(jq -c '[.tokens, .logprobs, .sum, .perplexity, .windows]' "$tmp/o")" = \
      "$(jq -c '[.tokens, .logprobs, .sum, .perplexity, .windows]' "$tmp/score_cli")" ]

# the promise, one request at a time: plain, streamed, and the stream read back
i=0
while [ $i -lt "$n_cases" ]; do
    expected $i 0
    check "case $i: 200" [ "$(post /v1/completions "$(cat "$tmp/req_${i}_0")" "$tmp/r")" = 200 ]
    same_as_cli "case $i alone" "$tmp/r" "$tmp/exp_${i}_0"
    body=$(jq -c '. + {stream: true}' "$tmp/req_${i}_0")
    check "case $i streamed: 200" [ "$(post /v1/completions "$body" "$tmp/s")" = 200 ]
    check "case $i streamed ends with [DONE]" [ "$(tail -n 2 "$tmp/s" | head -n 1)" = "data: [DONE]" ]
    stream_as_one "$tmp/s" > "$tmp/s1"
    same_as_cli "case $i streamed" "$tmp/s1" "$tmp/exp_${i}_0"
    i=$((i + 1))
done
check "a response's usage" [ "$(jq -c '[.object, .usage.completion_tokens == (.choices[0].tokens | length), .choices[0].logprobs]' "$tmp/r")" = '["text_completion",true,null]' ]

# several prompts, n > 1: choice k of prompt p is seed + k
post /v1/completions '{"prompt":["Hello","Call me Ishmael."],"n":2,"max_tokens":15,"seed":40}' "$tmp/r" > /dev/null
"$GPT" -m "$MODEL" -p "Call me Ishmael." -n 15 -s 43 --json > "$tmp/e" 2> /dev/null
same_as_cli "prompt 1, n 2: choice 3 is seed 43" "$tmp/r" "$tmp/e" 3
"$GPT" -m "$MODEL" -p "Hello" -n 15 -s 41 --json > "$tmp/e" 2> /dev/null
same_as_cli "prompt 0, n 2: choice 1 is seed 41" "$tmp/r" "$tmp/e" 1
# token ids, echo
post /v1/completions '{"prompt":[15496],"max_tokens":20,"seed":1}' "$tmp/r" > /dev/null
same_as_cli "a prompt of token ids" "$tmp/r" "$tmp/exp_0_0"
post /v1/completions '{"prompt":"Hello","max_tokens":20,"seed":1,"echo":true}' "$tmp/r" > /dev/null
check "echo" [ "$(jq -c '.choices[0].text' "$tmp/r")" = "$(jq -c '"Hello" + .text' "$tmp/exp_0_0")" ]
post /v1/completions '{"prompt":"Hello","max_tokens":20,"seed":1,"echo":true,"stream":true}' "$tmp/s" > /dev/null
stream_as_one "$tmp/s" > "$tmp/s1"
check "echo, streamed: the prompt once ($(jq -c '.choices[0].text' "$tmp/s1"))" \
    [ "$(jq -c '.choices[0].text' "$tmp/s1")" = "$(jq -c '"Hello" + .text' "$tmp/exp_0_0")" ]
# past the context: the case with context_shift did shift
shift_case=$(grep -n '"context_shift":true' "$tmp/cases" | head -n 1 | cut -d: -f1)
check "context_shift: gpt shifted" jq -e '.stats.context_shifts >= 1 and (.tokens | length) == 260' \
    "$tmp/exp_$((shift_case - 1))_0" > /dev/null
# echo with logprobs, the prompt given as token ids (the CLI's prompt "Hello")
post /v1/completions '{"prompt":[15496],"max_tokens":20,"seed":3,"logprobs":3,"echo":true}' "$tmp/r" > /dev/null
"$GPT" -m "$MODEL" -p Hello -n 20 -s 3 --logprobs 3 --echo --json > "$tmp/e" 2> /dev/null
same_as_cli "echo and logprobs of a prompt of token ids" "$tmp/r" "$tmp/e"
# n > 1 with logprobs: each choice's are its own seed's
post /v1/completions '{"prompt":"Hello","n":3,"max_tokens":10,"seed":50,"logprobs":1}' "$tmp/r" > /dev/null
"$GPT" -m "$MODEL" -p Hello -n 10 -s 52 --logprobs 1 --json > "$tmp/e" 2> /dev/null
same_as_cli "n 3 with logprobs: choice 2 is seed 52" "$tmp/r" "$tmp/e" 2
# max_tokens 0 with echo and logprobs: the prompt scored, as -n 0 --echo
post /v1/completions '{"prompt":"Hello big world","max_tokens":0,"seed":1,"logprobs":1,"echo":true}' "$tmp/r" > /dev/null
"$GPT" -m "$MODEL" -p "Hello big world" -n 0 -s 1 --logprobs 1 --echo --json > "$tmp/e" 2> /dev/null
same_as_cli "max_tokens 0, echo and logprobs: the prompt scored" "$tmp/r" "$tmp/e"
# no seed: one is drawn below 2^53 and returned; it repeats the answer
post /v1/completions '{"prompt":"Hello","max_tokens":8}' "$tmp/r" > /dev/null
seed=$(jq -r .seed "$tmp/r")
check "a drawn seed is below 2^53 ($seed)" jq -e '.seed < 9007199254740992' "$tmp/r" > /dev/null
"$GPT" -m "$MODEL" -p Hello -n 8 -s "$seed" --json > "$tmp/e" 2> /dev/null
same_as_cli "the drawn seed repeats the answer" "$tmp/r" "$tmp/e"

# stream_options.include_usage: a last chunk before [DONE] with no choices
# and the usage of the same request not streamed; "usage": null in the
# others. include_usage false: nothing more.
post /v1/completions '{"prompt":"Hello","max_tokens":20,"seed":1}' "$tmp/r" > /dev/null
post /v1/completions '{"prompt":"Hello","max_tokens":20,"seed":1,"stream":true,"stream_options":{"include_usage":true}}' \
    "$tmp/s" > /dev/null
sed -n 's/^data: //p' "$tmp/s" > "$tmp/events"
check "include_usage: [DONE] last" [ "$(tail -n 1 "$tmp/events")" = "[DONE]" ]
check "include_usage: the chunk before it has no choices and the usage ($(tail -n 2 "$tmp/events" | head -n 1))" \
    [ "$(tail -n 2 "$tmp/events" | head -n 1 | jq -c '[.choices, .usage, .object]')" = \
      "$(jq -c '[[], .usage, .object]' "$tmp/r")" ]
check "include_usage: usage null in the other chunks" \
    [ "$(sed '$d' "$tmp/events" | sed '$d' | jq -s -c '[.[] | has("usage") and .usage == null] | unique')" = '[true]' ]
grep -v '"choices":\[\]' "$tmp/s" > "$tmp/s2"
stream_as_one "$tmp/s2" > "$tmp/s1"
same_as_cli "include_usage: the stream is still gpt's" "$tmp/s1" "$tmp/exp_0_0"
post /v1/completions '{"prompt":"Hello","max_tokens":20,"seed":1,"stream":true,"stream_options":{"include_usage":false}}' \
    "$tmp/s" > /dev/null
check "include_usage false: no usage anywhere" \
    [ "$(sed -n 's/^data: //p' "$tmp/s" | grep -v DONE | jq -s -c '[.[] | has("usage")] | unique')" = '[false]' ]
# two prompts, n 2: usage counts the four
post /v1/completions '{"prompt":["Hello","Call me"],"n":2,"max_tokens":6,"seed":1,"stream":true,"stream_options":{"include_usage":true}}' \
    "$tmp/s" > /dev/null
check "include_usage: the usage of 2 prompts x n 2" \
    [ "$(sed -n 's/^data: //p' "$tmp/s" | tail -n 2 | head -n 1 | jq -c .usage)" = \
      '{"prompt_tokens":3,"completion_tokens":24,"total_tokens":27}' ]

# logit_bias, presence_penalty, frequency_penalty: gpt's --logit-bias,
# --presence-penalty, --frequency-penalty bit for bit (the greedy case's
# first token banned, so the bias shows), streamed and not, and with n 2
ban=$(jq '.tokens[0]' "$tmp/exp_5_0")
"$GPT" -m "$MODEL" -p "In the beginning" -n 30 -s 21 --temp 0.9 --logit-bias "$ban=-100" --logit-bias 13=2.5 \
    --presence-penalty 0.6 --frequency-penalty 0.8 --logprobs 2 --json > "$tmp/e" 2> /dev/null
check "penalties: gpt's run has not token $ban" jq -e --argjson b "$ban" '(.tokens | index($b)) == null' "$tmp/e" > /dev/null
body=$(jq -cn --arg b "$ban" '{prompt: "In the beginning", max_tokens: 30, seed: 21, temperature: 0.9,
    logit_bias: {($b): -100, "13": 2.5}, presence_penalty: 0.6, frequency_penalty: 0.8, logprobs: 2}')
check "penalties: 200" [ "$(post /v1/completions "$body" "$tmp/r")" = 200 ]
same_as_cli "logit_bias, presence_penalty, frequency_penalty = gpt's flags" "$tmp/r" "$tmp/e"
post /v1/completions "$(printf '%s' "$body" | jq -c '. + {stream: true}')" "$tmp/s" > /dev/null
stream_as_one "$tmp/s" > "$tmp/s1"
same_as_cli "logit_bias and penalties, streamed" "$tmp/s1" "$tmp/e"
"$GPT" -m "$MODEL" -p "In the beginning" -n 30 -s 22 --temp 0.9 --logit-bias "$ban=-100" --logit-bias 13=2.5 \
    --presence-penalty 0.6 --frequency-penalty 0.8 --logprobs 2 --json > "$tmp/e" 2> /dev/null
post /v1/completions "$(printf '%s' "$body" | jq -c '. + {n: 2}')" "$tmp/r" > /dev/null
same_as_cli "logit_bias and penalties, n 2: choice 1 is seed 22" "$tmp/r" "$tmp/e" 1

# suffix: "" and null are no suffix
post /v1/completions '{"prompt":"Hello","max_tokens":20,"seed":1,"suffix":""}' "$tmp/r" > /dev/null
same_as_cli "suffix \"\"" "$tmp/r" "$tmp/exp_0_0"
post /v1/completions '{"prompt":"Hello","max_tokens":20,"seed":1,"suffix":null}' "$tmp/r" > /dev/null
same_as_cli "suffix null" "$tmp/r" "$tmp/exp_0_0"

# best_of 5, n 2: five completions (seeds 60..64) computed, the two of the
# highest mean log-probability per token answered, best first, each with its
# seed, each the command's with that seed; usage counts all five
post /v1/completions '{"prompt":"The LORD said","max_tokens":12,"seed":60,"n":2,"best_of":5,"temperature":1.2}' \
    "$tmp/r" > /dev/null
for sd in 60 61 62 63 64; do
    "$GPT" -m "$MODEL" -p "The LORD said" -n 12 -s $sd --temp 1.2 --logprobs 0 --json 2> /dev/null |
        jq -c --argjson s $sd '{seed: $s, mean: (.logprobs.token_logprobs | add / length), n: (.tokens | length)}'
done > "$tmp/means"
want=$(jq -s -c 'sort_by(-.mean, .seed) | .[0:2] | map(.seed)' "$tmp/means")
check "best_of 5: the two best by mean log-probability ($(jq -c '[.choices[].seed]' "$tmp/r"), want $want of $(jq -s -c 'map([.seed, .mean])' "$tmp/means"))" \
    [ "$(jq -c '[.choices[].seed]' "$tmp/r")" = "$want" ]
check "best_of 5: indexes 0, 1; logprobs null (not asked)" [ "$(jq -c '[.choices[] | [.index, .logprobs]]' "$tmp/r")" = '[[0,null],[1,null]]' ]
check "best_of 5: usage counts the five" [ "$(jq .usage.completion_tokens "$tmp/r")" = "$(jq -s 'map(.n) | add' "$tmp/means")" ]
k=0
for sd in $(jq -r '.choices[].seed' "$tmp/r"); do
    "$GPT" -m "$MODEL" -p "The LORD said" -n 12 -s "$sd" --temp 1.2 --json > "$tmp/e" 2> /dev/null
    same_as_cli "best_of 5: choice $k is gpt -s $sd" "$tmp/r" "$tmp/e" $k
    k=$((k + 1))
done
# with logprobs asked: shown, the command's
post /v1/completions '{"prompt":"The LORD said","max_tokens":12,"seed":60,"best_of":5,"temperature":1.2,"logprobs":2}' \
    "$tmp/r" > /dev/null
sd=$(jq -r '.choices[0].seed' "$tmp/r")
"$GPT" -m "$MODEL" -p "The LORD said" -n 12 -s "$sd" --temp 1.2 --logprobs 2 --json > "$tmp/e" 2> /dev/null
check "best_of 5, n 1, logprobs: the best ($sd)" [ "$sd" = "$(jq -s -c 'sort_by(-.mean, .seed) | .[0].seed' "$tmp/means")" ]
same_as_cli "best_of 5 with logprobs: gpt -s $sd --logprobs 2" "$tmp/r" "$tmp/e"
# two prompts: each prompt's own best, seeds from 70 + best_of * p
post /v1/completions '{"prompt":["Hello","Call me"],"max_tokens":6,"seed":70,"best_of":3}' "$tmp/r" > /dev/null
check "best_of 3 of two prompts: a choice of each, seeds 70-72 and 73-75 ($(jq -c '[.choices[] | [.index, .seed]]' "$tmp/r"))" \
    jq -e '(.choices | length) == 2 and .choices[0].seed >= 70 and .choices[0].seed <= 72 and
           .choices[1].seed >= 73 and .choices[1].seed <= 75 and .choices[1].index == 1' "$tmp/r" > /dev/null

# 32 requests in flight at once: mixed streaming, shared prefixes, other seeds
clients=
i=0
while [ $i -lt 32 ]; do
    c=$((i % n_cases))
    off=$((i / n_cases * 100))
    [ -f "$tmp/exp_${c}_$off" ] || expected $c $off
    body=$(cat "$tmp/req_${c}_$off")
    [ $((i % 2)) = 1 ] && body=$(printf '%s\n' "$body" | jq -c '. + {stream: true}')
    post /v1/completions "$body" "$tmp/c$i" > "$tmp/c$i.status" &
    clients="$clients $!"
    i=$((i + 1))
done
wait $clients
i=0
while [ $i -lt 32 ]; do
    c=$((i % n_cases))
    off=$((i / n_cases * 100))
    check "request $i of 32: 200" [ "$(cat "$tmp/c$i.status")" = 200 ]
    if [ $((i % 2)) = 1 ]; then stream_as_one "$tmp/c$i" > "$tmp/c$i.one"; else cp "$tmp/c$i" "$tmp/c$i.one"; fi
    same_as_cli "request $i of 32 (case $c, seed offset $off)" "$tmp/c$i.one" "$tmp/exp_${c}_$off"
    i=$((i + 1))
done
get /metrics "$tmp/m" > /dev/null
check "/metrics counts the answers" grep -q '^gpt_requests_total{status="200"} [0-9]' "$tmp/m"
check "/metrics: prefixes were shared" grep -q '^gpt_prefix_tokens_reused_total [1-9]' "$tmp/m"
check "/metrics: nothing running" grep -q '^gpt_sequences_running 0$' "$tmp/m"
# memory: the model's bytes as gpt --json counts them; the KV blocks touched
# (taken memory) at least one and at most the budget; the resident size
# near the kernel's VmRSS read just after (the requests are over: steady)
metric() { sed -n "s/^$1 \([0-9][0-9]*\)$/\1/p" "$tmp/m"; }
check "/metrics: the model's bytes are gpt --json's weight_bytes" \
    [ "$(metric gpt_model_bytes)" = "$(jq .stats.weight_bytes "$tmp/exp_0_0")" ]
check "/metrics: KV blocks touched, within the budget ($(metric gpt_kv_blocks_touched) of $(metric gpt_kv_blocks))" \
    [ "$(metric gpt_kv_blocks_touched)" -ge 1 -a "$(metric gpt_kv_blocks_touched)" -le "$(metric gpt_kv_blocks)" ]
check "/metrics: the engine's step buffers ($(metric gpt_engine_buffer_bytes) bytes) hold --parallel 16's logit rows" \
    [ "$(metric gpt_engine_buffer_bytes)" -ge $((16 * 50257 * 4)) ]
vmrss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$pid/status")
check "/metrics: resident memory $(metric process_resident_memory_bytes) near VmRSS ${vmrss} kB" \
    awk -v a="$(metric process_resident_memory_bytes)" -v b="$vmrss" 'BEGIN { b *= 1024; exit !(a > 0.9 * b && a < 1.1 * b) }'

# errors: status, OpenAI's shape, the command's messages
# err STATUS WHAT METHOD PATH BODY [PATTERN]: the answer's status, and
# its error.message matches PATTERN
err() {
    want=$1 what=$2 method=$3 path=$4 body=$5 pattern=$6
    got=$(curl -s -o "$tmp/e" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $KEY" \
        ${body:+--data-binary "$body"} "http://127.0.0.1:$port$path")
    if [ "$got" = "$want" ] && jq -e '.error | has("message") and has("type") and has("param") and has("code")' \
        "$tmp/e" > /dev/null 2>&1 && { [ -z "$pattern" ] || jq -r .error.message "$tmp/e" | grep -qF -- "$pattern"; }
    then pass
    else fail "$what: want $want${pattern:+ with '$pattern'}, got $got $(head -c 300 "$tmp/e")"
    fi
}
err 400 "bad JSON" POST /v1/completions '{"prompt": "x",' "invalid JSON at byte"
err 400 "not an object" POST /v1/completions '[1,2]' "must be a JSON object"
err 400 "a wrong type" POST /v1/completions '{"prompt":"x","max_tokens":"5"}' "max_tokens must be an integer in [0, "
err 400 "top_p out of range" POST /v1/completions '{"prompt":"x","top_p":1.5}' "top_p must be a number in (0, 1]"
err 400 "temperature out of range" POST /v1/completions '{"prompt":"x","temperature":-1}' "temperature must be a number >= 0"
err 400 "a fractional seed" POST /v1/completions '{"prompt":"x","seed":1.5}' "seed must be an integer below 2^53"
err 400 "a huge number" POST /v1/completions '{"prompt":"x","max_tokens":1e300}' "max_tokens must be an integer in [0, "
err 400 "logprobs out of range" POST /v1/completions '{"prompt":"x","logprobs":21}' "logprobs must be an integer in [0, 20]"
err 400 "keep without context_shift" POST /v1/completions '{"prompt":"x","keep":2}' "keep needs context_shift"
err 400 "keep over half the context" POST /v1/completions '{"prompt":"x","context_shift":true,"keep":129}' \
    "keep 129: more than half the model's context (128)"
err 400 "context_shift not a boolean" POST /v1/completions '{"prompt":"x","context_shift":1}' \
    "context_shift must be true or false"
err 400 "an unknown field" POST /v1/completions '{"prompt":"x","temprature":1}' 'unknown field "temprature"'
err 400 "no prompt" POST /v1/completions '{"max_tokens":1}' 'no "prompt" field'
err 400 "a NUL" POST /v1/completions '{"prompt":"a\u0000b"}' "a NUL byte"
err 400 "a bad token id" POST /v1/completions '{"prompt":[50257]}' "not a token id"
err 400 "n out of range" POST /v1/completions '{"prompt":"x","n":0}' "n must be an integer in [1, 64]"
err 400 "n over 64" POST /v1/completions '{"prompt":"x","n":65}' "n must be an integer in [1, 64]"
err 400 "stream_options without stream" POST /v1/completions '{"prompt":"x","stream_options":{"include_usage":true}}' \
    "stream_options is only allowed with"
err 400 "stream_options with stream false" POST /v1/completions '{"prompt":"x","stream":false,"stream_options":{}}' \
    "stream_options is only allowed with"
err 400 "best_of < n" POST /v1/completions '{"prompt":"x","n":3,"best_of":2}' "best_of must be >= n"
err 400 "best_of streamed" POST /v1/completions '{"prompt":"x","best_of":2,"stream":true}' "cannot be streamed"
err 400 "best_of 3 > n 2 streamed" POST /v1/completions '{"prompt":"x","n":2,"best_of":3,"stream":true}' "cannot be streamed"
err 400 "best_of over 64" POST /v1/completions '{"prompt":"x","best_of":65}' "best_of must be an integer in [1, 64]"
err 400 "5 prompts x best_of 16" POST /v1/completions '{"prompt":["a","b","c","d","e"],"best_of":16}' "more than 64"
err 400 "a logit_bias id past the vocabulary" POST /v1/completions '{"prompt":"x","logit_bias":{"50257":1}}' \
    'logit_bias: key "50257" is not a token id'
err 400 "presence_penalty out of range" POST /v1/completions '{"prompt":"x","presence_penalty":2.5}' "[-2, 2]"
err 400 "a suffix" POST /v1/completions '{"prompt":"x","suffix":" the end"}' "GPT-2 has no infilling"
err 405 "POST /v1/models/demo.bin" POST /v1/models/demo.bin '{}' "takes GET or HEAD"
err 400 "an empty stop" POST /v1/completions '{"prompt":"x","stop":[""]}' "non-empty strings"
err 400 "a prompt beyond the context" POST /v1/completions "{\"prompt\":\"$(printf 'word %.0s' $(seq 1 300))\"}" "the model's context holds 256"
err 400 "an invalid UTF-8 escape" POST /v1/completions '{"prompt":"\ud800"}' "invalid JSON string"
err 400 "/tokenize without content" POST /tokenize '{"text":"x"}' "unknown field"
err 400 "/v1/score of nothing" POST /v1/score '{"prompt":""}' "the text is empty"
err 400 "/v1/score prepend_eos 1" POST /v1/score '{"prompt":"x","prepend_eos":1}' "prepend_eos must be true or false"
err 404 "no such endpoint" GET /v2/nothing ""
err 405 "GET /v1/completions" GET /v1/completions "" "takes POST"
err 405 "POST /health" POST /health '{}' "takes GET or HEAD"
# HEAD: GET's status and headers, no body
curl -s -I -o "$tmp/head" "http://127.0.0.1:$port/health"
check "HEAD /health: 200, GET's headers, no body ($(head -n 1 "$tmp/head"))" \
    sh -c "head -n 1 '$tmp/head' | grep -q '^HTTP/1.1 200' && grep -qi '^content-length: 15' '$tmp/head'"
curl -s -I -o "$tmp/head" "http://127.0.0.1:$port/v1/completions"
check "HEAD /v1/completions: 405, Allow: POST" \
    sh -c "head -n 1 '$tmp/head' | grep -q '^HTTP/1.1 405' && grep -qi '^allow: POST' '$tmp/head'"
curl -s -X POST -D "$tmp/head" -o /dev/null "http://127.0.0.1:$port/metrics"
check "POST /metrics: Allow: GET, HEAD" grep -qi '^allow: GET, HEAD' "$tmp/head"
err 413 "a body over --max-body" POST /v1/completions "{\"prompt\":\"$(head -c 70000 /dev/zero | tr '\0' a)\"}" "--max-body"
KEY=wrong err 401 "a wrong key" GET /v1/models ""
KEY= err 401 "no key" POST /v1/completions '{"prompt":"x"}'
check "/health needs no key" [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]
check "still serving after the bad requests" [ "$(post /v1/completions "$(cat "$tmp/req_0_0")" "$tmp/r")" = 200 ]
same_as_cli "after the bad requests" "$tmp/r" "$tmp/exp_0_0"
get /metrics "$tmp/m" > /dev/null
answered=$(sed -n 's/^gpt_requests_total{status="[0-9]*"} \([0-9]*\)$/\1/p' "$tmp/m" | awk '{ n += $1 } END { print n }')
logged=$(grep -c '^{"time":' "$tmp/a.log")
check "one JSON log line per request ($logged lines, $answered answered before /metrics)" test "$logged" -ge "$answered" -a "$answered" -ge 80
grep '^{' "$tmp/a.log" > "$tmp/a.json"
check "the log lines are JSON" jq -s -e 'all(has("status") and has("path") and has("seconds"))' "$tmp/a.json" > /dev/null

# the port in use: one line, exit 1, before the model loads
"$GPT" serve --port "$A_PORT" -m "$MODEL" > /dev/null 2> "$tmp/inuse"
rc=$?
check "port in use: exit 1 (got $rc)" [ $rc = 1 ]
check "port in use: one line ($(cat "$tmp/inuse"))" [ "$(wc -l < "$tmp/inuse")" = 1 ]
check "port in use: says so" grep -q "Address already in use" "$tmp/inuse"

# SIGTERM under load: every answer whole, exit 0
case_body() { cat "$tmp/req_$(($1 % n_cases))_0"; }
case_expected() { echo "$tmp/exp_$(($1 % n_cases))_0"; }
load 16 "$tmp/t" case_body
check "SIGTERM: the 16 requests in the server first" all_inside 16 "$tmp/t"
sigterm "$A_PID"
check "SIGTERM: exit 0 (got $rc)" [ $rc = 0 ]
all_whole "SIGTERM under load" 16 "$tmp/t" case_expected

# ----------------------------------------------------------------------------
# server B: one place, no queue: the rest get 503 with Retry-After
KEY=
start "$tmp/b.log" -m "$MODEL" --parallel 1 --queue 0 -t 1 || { summary; exit 1; }
B_PID=$pid
expected 6 0
clients=
i=0
while [ $i -lt 10 ]; do
    curl -s -D "$tmp/h$i" -o "$tmp/q$i" -w '%{http_code}' --data-binary "$(cat "$tmp/req_6_0")" \
        "http://127.0.0.1:$port/v1/completions" > "$tmp/q$i.status" &
    clients="$clients $!"
    i=$((i + 1))
done
wait $clients
n200=0
n503=0
i=0
while [ $i -lt 10 ]; do
    case $(cat "$tmp/q$i.status") in
        200) n200=$((n200 + 1)); same_as_cli "queue full: answered $i" "$tmp/q$i" "$tmp/exp_6_0" ;;
        503) n503=$((n503 + 1))
             check "503 has Retry-After" grep -qi '^Retry-After: 1' "$tmp/h$i"
             check "503 says why" grep -q 'too many requests waiting' "$tmp/q$i" ;;
        *) fail "queue full: request $i got $(cat "$tmp/q$i.status")" ;;
    esac
    i=$((i + 1))
done
check "queue full: some answered ($n200), some refused ($n503)" test $n200 -ge 1 -a $n503 -ge 1
kill -TERM "$B_PID"
wait "$B_PID"
check "server B: exit 0" [ $? = 0 ]

# a non-loopback address without a key: a warning (killed once it is said)
: > "$tmp/w.log"
"$GPT" serve --host 0.0.0.0 --port 0 -m "$MODEL" 2> "$tmp/w.log" &
pid=$!
pids="$pids $pid"
i=0
while [ $i -lt 100 ] && ! grep -q warning "$tmp/w.log"; do sleep 0.1; i=$((i + 1)); done
kill -9 "$pid" 2> /dev/null
wait "$pid" 2> /dev/null
check "warning without a key on 0.0.0.0" grep -q "gpt serve: warning: listening on 0.0.0.0 without --api-key" "$tmp/w.log"

# a model that does not load: one line, exit 1 (libmicrohttpd, already
# serving "loading", is stopped; a sanitizer build finds no leak)
"$GPT" serve --port 0 -m /nonexistent/model.bin 2> "$tmp/nomodel"
rc=$?
check "no model: exit 1 (got $rc: $(cat "$tmp/nomodel"))" [ $rc = 1 ]
check "no model: one line" [ "$(wc -l < "$tmp/nomodel")" = 1 ]

# usage errors: exit 2, naming the flag
"$GPT" serve --port 70000 2> "$tmp/u"
check "--port 70000: exit 2" [ $? = 2 ]
check "--port 70000: named" grep -q -- "--port 70000" "$tmp/u"

# --port-file FILE: with -q (no ready line) and no log, the file a script
# waits for holds the port and a newline, named once the server answers;
# removed at shutdown
"$GPT" serve -q --log off --port 0 --port-file "$tmp/port" -m "$MODEL" -t 1 2> "$tmp/pf.log" &
pid=$!
pids="$pids $pid"
i=0
while [ $i -lt 600 ] && [ ! -e "$tmp/port" ] && kill -0 "$pid" 2> /dev/null; do sleep 0.1; i=$((i + 1)); done
check "--port-file: written ($(cat "$tmp/pf.log"))" [ -e "$tmp/port" ]
check "--port-file: one line, the port ($(od -c "$tmp/port" | head -2))" \
    sh -c "[ \"\$(wc -l < '$tmp/port')\" = 1 ] && grep -qx '[1-9][0-9]*' '$tmp/port'"
check "--port-file: the server answers there" \
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(cat "$tmp/port")/health")" = 200 ]
check "--port-file: -q and --log off say nothing ($(cat "$tmp/pf.log"))" [ ! -s "$tmp/pf.log" ]
kill -TERM "$pid"
wait "$pid"
rc=$?
check "--port-file: exit 0 (got $rc)" [ $rc = 0 ]
check "--port-file: removed at shutdown" [ ! -e "$tmp/port" ]
"$GPT" serve -q --port 0 --port-file "$tmp/nodir/port" -m "$MODEL" 2> "$tmp/pf.err"
rc=$?
check "--port-file in no directory: exit 1 (got $rc)" [ $rc = 1 ]
check "--port-file in no directory: one line naming it ($(cat "$tmp/pf.err"))" \
    sh -c "[ \"\$(wc -l < '$tmp/pf.err')\" = 1 ] && grep -qF -- '--port-file $tmp/nodir/port' '$tmp/pf.err'"

# ----------------------------------------------------------------------------
# server C: a slow model, to cut requests in the middle
CKPT=$CKPT_DIR/gpt2-124M-shaped
if [ ! -d "$CKPT" ]; then
    echo "cli_serve: $CKPT is not there (make checkpoints): the disconnect and grace tests are skipped"
    summary
    exit $?
fi
start "$tmp/c.log" -m "$CKPT" --parallel 4 --grace 1 -t 2 || { summary; exit 1; }
C_PID=$pid
# a client that goes away mid-stream: its sequence is dropped, its blocks come back
curl -sN --max-time 1 --data-binary '{"prompt":"Hello","max_tokens":200,"ignore_eos":true,"stream":true}' \
    "http://127.0.0.1:$port/v1/completions" > "$tmp/d" 2> /dev/null
check "the stream had begun" grep -q '^data: {' "$tmp/d"
# cancelled_within N: up to 10 s for /metrics to count N cancelled requests,
# with no sequence running and every block back; 0 when it did
cancelled_within() {
    i=0
    while [ $i -lt 100 ]; do
        get /metrics "$tmp/m" > /dev/null
        grep -q "^gpt_requests_cancelled_total $1\$" "$tmp/m" && grep -q '^gpt_kv_blocks_used 0$' "$tmp/m" &&
            grep -q '^gpt_sequences_running 0$' "$tmp/m" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
cancelled_within 1
gone=$?
check "a client gone: cancelled, its blocks back ($(grep -E '^gpt_(requests_cancelled|kv_blocks_used|sequences_running)' "$tmp/m" | tr '\n' ' '))" [ $gone = 0 ]
# and one that goes away while its answer (not streamed) is being written:
# its connection is parked, and the server's half-second look finds it
curl -s --max-time 1 --data-binary '{"prompt":"Hello","max_tokens":200,"ignore_eos":true}' \
    "http://127.0.0.1:$port/v1/completions" > /dev/null 2>&1
cancelled_within 2
gone=$?
check "a client gone before its whole answer: cancelled, its blocks back ($(grep -E \
    '^gpt_(requests_cancelled|kv_blocks_used|sequences_running)' "$tmp/m" | tr '\n' ' '))" [ $gone = 0 ]
# past the grace: the running requests end with what they have (1000 tokens:
# far more than the wait for both to run and the 1 s grace, on any machine; 200
# ended in time on a Zen 4 and left nothing to interrupt)
post /v1/completions '{"prompt":"Hello","max_tokens":1000,"ignore_eos":true}' "$tmp/g0" > "$tmp/g0.status" &
clients=$!
post /v1/completions '{"prompt":"Once","max_tokens":1000,"ignore_eos":true,"stream":true}' "$tmp/g1" > "$tmp/g1.status" &
clients="$clients $!"
# both running and the stream begun before the signal
i=0
while [ $i -lt 1000 ]; do
    get /metrics "$tmp/m" > /dev/null
    grep -q '^gpt_sequences_running 2$' "$tmp/m" && grep -q '^data: {' "$tmp/g1" && break
    sleep 0.01
    i=$((i + 1))
done
check "past the grace: both running first" [ $i -lt 1000 ]
kill -TERM "$C_PID"
wait "$C_PID"
rc=$?
wait $clients
check "past the grace: exit 0 (got $rc)" [ $rc = 0 ]
check "past the grace: answered" [ "$(cat "$tmp/g0.status")" = 200 ]
check "past the grace: interrupted" [ "$(jq -r '.choices[0].finish_reason' "$tmp/g0")" = interrupted ]
stream_as_one "$tmp/g1" > "$tmp/g1.one"
check "past the grace, streamed: interrupted" [ "$(jq -r '.choices[0].finish_reason' "$tmp/g1.one")" = interrupted ]
check "past the grace, streamed: [DONE]" grep -q '^data: \[DONE\]' "$tmp/g1"
summary

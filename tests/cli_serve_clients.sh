#!/bin/sh
# cli_serve_clients.sh - the request bodies real clients send
# (tests/fixtures/clients/, written from their public source; see its
# README.md) posted to gpt serve on a free loopback port, each answer
# compared with the command:
#   - lm-evaluation-harness's remote tokenizer: GET /tokenizer_info names
#     the eos token, vLLM's /tokenize gives `gpt --tokenize`'s ids with
#     count and max_model_len, /detokenize gives the text back as "prompt";
#   - its local-completions loglikelihood batch (token-id prompts, echo,
#     logprobs 1, max_tokens 1): each prompt's token_logprobs (the first
#     null) are `gpt --score --json`'s, bit for bit, and the one generated
#     token's follows; each top_logprobs entry has one token, as lm-eval's
#     is_greedy reads it;
#   - its generate_until batch (temperature 0, a stop): each text is
#     `gpt --temp 0 --stop`'s;
#   - LangChain Python's OpenAI LLM with its defaults (logit_bias {},
#     penalties 0, logprobs null): `gpt --temp 0.7 -s 5`'s text.
# Prints "cli_serve_clients: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
FIX=tests/fixtures/clients
CHECK_NAME=cli_serve_clients
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need curl jq
start "$tmp/s.log" -m "$MODEL" -t 2 || { summary; exit 1; }

# the remote tokenizer
check "GET /tokenizer_info: 200" [ "$(get /tokenizer_info "$tmp/info")" = 200 ]
check "/tokenizer_info: eos_token ($(cat "$tmp/info"))" \
    [ "$(jq -c '[.eos_token, .model_max_length]' "$tmp/info")" = '["<|endoftext|>",256]' ]
check "POST /tokenize (vLLM's shape): 200" [ "$(post /tokenize "$(cat "$FIX/lm_eval_tokenize.json")" "$tmp/tok")" = 200 ]
want=$("$GPT" -m "$MODEL" --tokenize --json -p test 2> /dev/null)
check "/tokenize: gpt --tokenize's ids, count, max_model_len ($(cat "$tmp/tok"))" \
    [ "$(jq -c '[.tokens, .count, .max_model_len]' "$tmp/tok")" = "[$want,$(echo "$want" | jq length),256]" ]
ids=$("$GPT" -m "$MODEL" --tokenize --json -p "Speak unto the children of Israel" 2> /dev/null)
body=$(jq -c --argjson ids "$ids" '.tokens = $ids' "$FIX/lm_eval_detokenize.json")
check "POST /detokenize: 200" [ "$(post /detokenize "$body" "$tmp/detok")" = 200 ]
check "/detokenize: the text as \"prompt\" ($(cat "$tmp/detok"))" \
    [ "$(jq -r .prompt "$tmp/detok")" = "Speak unto the children of Israel" ]

# loglikelihood: two (context + continuation) texts as token ids
t1="The LORD said unto Moses, Speak unto the children"
t2="In the beginning God created the heaven"
i1=$("$GPT" -m "$MODEL" --tokenize --json -p "$t1" 2> /dev/null)
i2=$("$GPT" -m "$MODEL" --tokenize --json -p "$t2" 2> /dev/null)
body=$(jq -c --argjson a "$i1" --argjson b "$i2" '.prompt = [$a, $b]' "$FIX/lm_eval_loglikelihood.json")
check "loglikelihood batch: 200" [ "$(post /v1/completions "$body" "$tmp/ll")" = 200 ]
k=0
for t in "$t1" "$t2"; do
    "$GPT" -m "$MODEL" --score -p "$t" --json > "$tmp/score" 2> /dev/null
    n=$(jq '.tokens | length' "$tmp/score")
    choice=$(jq -c "(.choices | sort_by(.index))[$k].logprobs" "$tmp/ll")
    check "loglikelihood $k: token_logprobs[:$n] are gpt --score's" \
        [ "$(echo "$choice" | jq -c ".token_logprobs[:$n]")" = "$(jq -c .logprobs "$tmp/score")" ]
    check "loglikelihood $k: the prompt's $n tokens and one more" \
        [ "$(echo "$choice" | jq -c "[(.token_logprobs | length), .token_logprobs[0], (.token_ids[:$n] == $(jq -c .tokens "$tmp/score"))]")" = "[$((n + 1)),null,true]" ]
    check "loglikelihood $k: one token in each top_logprobs" \
        [ "$(echo "$choice" | jq -c '[.top_logprobs[1:][] | length] | unique')" = '[1]' ]
    k=$((k + 1))
done

# generate_until
check "generate batch: 200" [ "$(post /v1/completions "$(cat "$FIX/lm_eval_generate.json")" "$tmp/gen")" = 200 ]
nl=$(printf '\n\nx')
nl=${nl%x}
k=0
for p in "The LORD said unto Moses" "In the beginning"; do
    "$GPT" -m "$MODEL" -p "$p" -n 16 --temp 0 --stop "$nl" --json > "$tmp/g" 2> /dev/null
    check "generate $k: gpt --temp 0's text" \
        [ "$(jq -c "(.choices | sort_by(.index))[$k].text" "$tmp/gen")" = "$(jq -c .text "$tmp/g")" ]
    k=$((k + 1))
done

# LangChain Python's OpenAI LLM
check "LangChain Python completion: 200" \
    [ "$(post /v1/completions "$(cat "$FIX/langchain_python_completion.json")" "$tmp/lc")" = 200 ]
"$GPT" -m "$MODEL" -p "The LORD said unto Moses" -n 32 --temp 0.7 -s 5 --json > "$tmp/c" 2> /dev/null
check "LangChain Python completion: gpt --temp 0.7 -s 5's text ($(jq -c .choices[0].text "$tmp/lc"))" \
    [ "$(jq -c .choices[0].text "$tmp/lc")" = "$(jq -c .text "$tmp/c")" ]

kill -TERM "$pid"
wait "$pid"
check "the server: exit 0" [ $? = 0 ]
summary

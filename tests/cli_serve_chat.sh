#!/bin/sh
# cli_serve_chat.sh - gpt serve's /v1/chat/completions and /apply-template
# with curl, on free loopback ports, against the command:
#   - the promise: a seeded chat answer is `gpt -p RENDERED --special -s
#     SEED` with the template's --stop strings, bit for bit (its tokens,
#     text, finish reason, stop_reason, seq_tokens, log-probabilities),
#     RENDERED being what
#     /apply-template answers for the same messages: for each built-in
#     template and a template file, alone, streamed (the deltas joined), n 2
#     (choice 1 is seed + 1), and 16 clients at once, half of them streaming;
#   - `gpt --chat-template T` with the messages gives the same answer, and
#     `gpt --apply-template` the same prompt;
#   - the stream's shape: the role in the first delta, the finish reason in
#     an empty last delta, the usage chunk with include_usage, [DONE];
#   - a message's content is plain text: a literal <|endoftext|> in it stays
#     text (the answer is /v1/completions' for the ids of the text and the
#     template's special token), while the template's is the special token;
#   - a conversation's next turn reuses the KV blocks of the last turn's
#     prompt and answer (/metrics), with the same answers (gpt2, transcript);
#   - what is refused, with one line naming the field: unknown roles, empty
#     messages, 10,000 messages, deep content arrays, image parts,
#     a response_format of no known type or with a bad schema (its
#     constrained answers are tests/cli_schema.sh's), completions-only fields; and at start, a template file
#     that is malformed, too large, or a name that is no built-in (exit 1).
# Prints "cli_serve_chat: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
CHECK_NAME=cli_serve_chat
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need curl jq

# The conversations, one JSON array a line.
cat > "$tmp/conversations" << 'EOF'
[{"role":"user","content":"Hello"}]
[{"role":"system","content":"Be brief."},{"role":"user","content":"Name a colour."},{"role":"assistant","content":"Blue."},{"role":"user","content":"Another?"}]
[{"role":"user","content":[{"type":"text","text":"And it came "},{"type":"text","text":"to pass"}]}]
[{"role":"developer","content":"You answer in verse."},{"role":"user","content":"The sea, é and 雪."}]
EOF
n_conv=$(wc -l < "$tmp/conversations")

# A template file: its strings, its stops (a newline in one).
cat > "$tmp/qa.json" << 'EOF'
{"system": {"prefix": "", "suffix": "\n\n"},
 "user": {"prefix": "Q: ", "suffix": "\n"},
 "assistant": {"prefix": "A: ", "suffix": "\n"},
 "generation_prompt": "A:",
 "stop": ["\nQ:", "\n\n"]}
EOF

# stop_options TEMPLATE: the command's --stop options for the template's
# stops (C escapes: a newline as \n, a backslash as \\), one word a line
stop_options() {
    case $1 in
    gpt2) ;;
    transcript) printf -- '--stop\n\\nUser:\n--stop\n\\nSystem:\n' ;;
    chatml) printf -- '--stop\n<|im_end|>\n' ;;
    *) jq -r '.stop[] | gsub("\\\\"; "\\\\") | gsub("\n"; "\\n") | "--stop\n" + .' "$1" ;;
    esac
}

# cli_chat TEMPLATE MESSAGES SEED N OUT: gpt -p RENDERED --special -s SEED
# -n N --logprobs 2 with the template's stops, its --json in OUT; RENDERED
# from /apply-template (checked against chat_render by test_chat)
cli_chat() {
    post /apply-template "{\"messages\":$2}" "$5.rendered" > /dev/null
    rendered=$(jq -r .prompt "$5.rendered"; printf x)  # keep final newlines
    rendered=${rendered%?x}
    set -f
    old_ifs=$IFS
    IFS='
'
    # shellcheck disable=SC2046 # one word a line
    "$GPT" -m "$MODEL" -p "$rendered" --special -s "$3" -n "$4" --logprobs 2 --json -q $(stop_options "$1") > "$5" \
        2> "$5.err" || fail "gpt for $1 $2: $(cat "$5.err")"
    IFS=$old_ifs
    set +f
}

# same_chat WHAT RESPONSE EXPECTED [CHOICE]: the chat choice's tokens,
# content, finish_reason, stop_reason, seq_tokens (the positions its cache
# held) and log-probabilities are gpt's (the chat shape's token, logprob and
# top_logprobs against the legacy shape's, bit for bit)
same_chat() {
    k=${4:-0}
    got=$(jq -c "[.choices[$k] | .tokens, .message.content, .finish_reason, .stop_reason, .seq_tokens,
                  (.logprobs.content // [] | map([.token, .logprob, (.top_logprobs | map([.token, .logprob]))]))]" \
        "$2" 2> /dev/null)
    want=$(jq -c '[.tokens, .text, (if .stop_reason == "eos" or .stop_reason == "stop" then "stop" else "length" end),
                   .stop_reason, .stats.seq_tokens,
                   ([.logprobs.tokens, .logprobs.token_logprobs, .logprobs.top_logprobs] | transpose |
                    map([.[0], .[1], (.[2] | to_entries | map([.key, .value]))]))]' "$3")
    if [ -n "$got" ] && [ "$got" = "$want" ]; then pass
    else fail "$1: the server gave $(head -c 600 "$2"), gpt gave $want"
    fi
}

# chat_stream_as_one SSE: a chat stream read back as one response
chat_stream_as_one() {
    sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' | jq -cs '[.[] | select(.choices | length > 0)] |
        {choices: [{tokens: [.[].choices[0].tokens[]],
                    message: {content: (map(.choices[0].delta.content // "") | join(""))},
                    finish_reason: (map(.choices[0].finish_reason | select(. != null)) | last),
                    stop_reason: (map(.choices[0].stop_reason | select(. != null)) | last),
                    seq_tokens: (map(.choices[0].seq_tokens | select(. != null)) | last),
                    logprobs: {content: [.[].choices[0].logprobs.content // [] | .[]]}}]}'
}

body() {  # body MESSAGES SEED N [MORE]: a chat request's JSON
    printf '{"messages":%s,"seed":%s,"max_tokens":%s,"logprobs":true,"top_logprobs":2%s}' "$1" "$2" "$3" "${4:-}"
}

# refused WHAT BODY PARAM WORDS: a 400 whose param is PARAM and whose message holds WORDS
refused() {
    printf '%s' "$2" > "$tmp/body"
    st=$(curl -s -o "$tmp/o" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$tmp/body" \
        "http://127.0.0.1:$port/v1/chat/completions")
    if [ "$st" = 400 ] && [ "$(jq -r .error.param "$tmp/o")" = "$3" ] && jq -r .error.message "$tmp/o" | grep -qF "$4"
    then pass
    else fail "$1: $st $(head -c 300 "$tmp/o"), want 400 $3 '$4'"
    fi
}
# next_turn TEMPLATE: with the server's template, a conversation's next turn
# shares the KV blocks of the last turn's prompt and answer (the answer sent
# back as the server gave it, its leading space too): /metrics'
# gpt_prefix_tokens_reused_total grows by more than the last turn's prompt
# (its prompt alone is at most that), and the next answer is still the
# command's
reused() { get /metrics "$tmp/m" > /dev/null; sed -n 's/^gpt_prefix_tokens_reused_total //p' "$tmp/m"; }
next_turn() {
    turn1='[{"role":"user","content":"Tell me about the sea."}]'
    post /v1/chat/completions "$(body "$turn1" 31 40)" "$tmp/t1" > /dev/null
    answer=$(jq -c '.choices[0].message.content' "$tmp/t1")
    turn2=$(jq -cn --argjson a "$answer" --argjson t "$turn1" '$t + [{role: "assistant", content: $a},
                                                                     {role: "user", content: "And then?"}]')
    before=$(reused)
    post /v1/chat/completions "$(body "$turn2" 32 24)" "$tmp/t2" > /dev/null
    after=$(reused)
    p1=$(jq .usage.prompt_tokens "$tmp/t1")
    check "$1: the next turn shares the last answer's blocks: $((after - before)) positions reused, the last prompt \
$p1 tokens, its answer $(jq .usage.completion_tokens "$tmp/t1")" [ $((after - before)) -gt "$p1" ]
    cli_chat "$1" "$turn2" 32 24 "$tmp/t2e"
    same_chat "$1: the next turn" "$tmp/t2" "$tmp/t2e"
}

# ----------------------------------------------------------------------------
# each template: alone, streamed, n 2
for template in gpt2 transcript chatml "$tmp/qa.json"; do
    name=$(basename "$template")
    start "$tmp/$name.log" -m "$MODEL" -t 2 --chat-template "$template" || { summary; exit 1; }
    i=0
    while [ $i -lt "$n_conv" ]; do
        conv=$(sed -n "$((i + 1))p" "$tmp/conversations")
        seed=$((i * 7 + 1))
        cli_chat "$template" "$conv" $seed 24 "$tmp/e"
        check "$name $i: 200" [ "$(post /v1/chat/completions "$(body "$conv" $seed 24)" "$tmp/r")" = 200 ]
        same_chat "$name $i alone" "$tmp/r" "$tmp/e"
        # the command with the same template: the same answer, the same prompt
        "$GPT" -m "$MODEL" --chat-template "$template" -p "$conv" -s $seed -n 24 --logprobs 2 --json -q > "$tmp/ec"
        same_chat "$name $i: gpt --chat-template" "$tmp/r" "$tmp/ec"
        "$GPT" --apply-template --chat-template "$template" -p "$conv" > "$tmp/ap"
        jq -j .prompt "$tmp/e.rendered" > "$tmp/ap_server"
        check "$name $i: gpt --apply-template is /apply-template's" cmp -s "$tmp/ap" "$tmp/ap_server"
        check "$name $i: chat.completion, the assistant's, usage ($(head -c 300 "$tmp/r"))" \
            [ "$(jq -c '[.object, .choices[0].message.role, .seed, (.id | startswith("chatcmpl-")),
                         .usage.completion_tokens == (.choices[0].tokens | length),
                         .usage.prompt_tokens == $e[0].prompt_tokens]' --slurpfile e "$tmp/e" "$tmp/r")" = \
              "[\"chat.completion\",\"assistant\",$seed,true,true,true]" ]
        check "$name $i streamed: 200" [ "$(post /v1/chat/completions "$(body "$conv" $seed 24 \
            ',"stream":true,"stream_options":{"include_usage":true}')" "$tmp/s")" = 200 ]
        chat_stream_as_one "$tmp/s" > "$tmp/s1"
        same_chat "$name $i streamed" "$tmp/s1" "$tmp/e"
        sed -n 's/^data: //p' "$tmp/s" | grep -v '^\[DONE\]$' > "$tmp/events"
        check "$name $i streamed: role first, finish alone last, then usage, [DONE] ($(head -c 400 "$tmp/s"))" \
            [ "$(jq -cs '[.[0].choices[0].delta.role, .[0].object, (.[-2].choices[0] | .delta == {} and .finish_reason != null),
                          (.[-1] | .choices == [] and .usage == $r[0].usage), ([.[:-1][].usage] | unique)]' \
                  --slurpfile r "$tmp/r" "$tmp/events")" = '["assistant","chat.completion.chunk",true,true,[null]]' ] &&
            [ "$(tail -n 2 "$tmp/s" | head -n 1)" = "data: [DONE]" ]
        i=$((i + 1))
    done
    # n 2: choice 1 is seed + 1
    conv=$(sed -n 2p "$tmp/conversations")
    cli_chat "$template" "$conv" 51 16 "$tmp/e"
    post /v1/chat/completions "$(body "$conv" 50 16 ',"n":2')" "$tmp/r" > /dev/null
    same_chat "$name n 2: choice 1 is seed 51" "$tmp/r" "$tmp/e" 1
    kill "$pid"
    wait "$pid" 2> /dev/null
done

# ----------------------------------------------------------------------------
# one server, the transcript template, for the rest
start "$tmp/t.log" -m "$MODEL" -t 2 --parallel 16 --chat-template transcript || { summary; exit 1; }
check "apply-template: the transcript" [ "$(post /apply-template \
    '{"messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"}]}' \
    "$tmp/o")" = 200 ] && [ "$(jq -c . "$tmp/o")" = '{"prompt":"System: S\n\nUser: Hi\nAssistant: Yo\nAssistant:"}' ]

# 16 clients at once, the odd ones streaming, each gpt's own
# post_16 PREFIX: 16 chats at once (seeds 100.., every other streamed),
# answer i in $tmp/PREFIXi and its status in $tmp/PREFIXi.status; their
# pids in $clients
post_16() {
    clients=
    i=0
    while [ $i -lt 16 ]; do
        conv=$(sed -n "$((i % n_conv + 1))p" "$tmp/conversations")
        more=
        [ $((i % 2)) = 1 ] && more=',"stream":true'
        post /v1/chat/completions "$(body "$conv" $((100 + i)) $((10 + i)) "$more")" "$tmp/$1$i" > "$tmp/$1$i.status" &
        clients="$clients $!"
        i=$((i + 1))
    done
}
i=0
while [ $i -lt 16 ]; do
    conv=$(sed -n "$((i % n_conv + 1))p" "$tmp/conversations")
    cli_chat transcript "$conv" $((100 + i)) $((10 + i)) "$tmp/c16e$i"
    i=$((i + 1))
done
post_16 c16r
wait $clients
i=0
while [ $i -lt 16 ]; do
    if [ $((i % 2)) = 1 ]; then chat_stream_as_one "$tmp/c16r$i" > "$tmp/c16r$i.one"; else cp "$tmp/c16r$i" "$tmp/c16r$i.one"; fi
    same_chat "16 at once: client $i ($(cat "$tmp/c16r$i.status"))" "$tmp/c16r$i.one" "$tmp/c16e$i"
    i=$((i + 1))
done

# SIGTERM while 16 chats run: each answer whole and gpt's (or a 503), exit 0
post_16 t16r
check "SIGTERM: the 16 chats in the server first" all_inside 16 "$tmp/t16r"
sigterm "$pid"
check "SIGTERM with 16 chats: exit 0 (exit $rc)" [ "$rc" = 0 ]
i=0
while [ $i -lt 16 ]; do
    st=$(cat "$tmp/t16r$i.status")
    if [ "$st" = 503 ]; then pass
    else
        if [ $((i % 2)) = 1 ]; then chat_stream_as_one "$tmp/t16r$i" > "$tmp/t16r$i.one"; else cp "$tmp/t16r$i" "$tmp/t16r$i.one"; fi
        same_chat "SIGTERM: client $i ($st)" "$tmp/t16r$i.one" "$tmp/c16e$i"
    fi
    i=$((i + 1))
done
start "$tmp/t.log" -m "$MODEL" -t 2 --parallel 16 --chat-template transcript || { summary; exit 1; }

# a request's stops and the template's together: the first to come ends it
conv=$(sed -n 1p "$tmp/conversations")
post /apply-template "{\"messages\":$conv}" "$tmp/o" > /dev/null
rendered=$(jq -r .prompt "$tmp/o")
"$GPT" -m "$MODEL" -p "$rendered" --special -s 9 -n 40 --logprobs 2 --json -q --stop ' the' --stop '\nUser:' \
    --stop '\nSystem:' > "$tmp/e"
post /v1/chat/completions "$(body "$conv" 9 40 ',"stop":" the"')" "$tmp/r" > /dev/null
same_chat "stop \" the\" with the template's" "$tmp/r" "$tmp/e"
# max_completion_tokens is max_tokens
post /v1/chat/completions "{\"messages\":$conv,\"seed\":9,\"max_completion_tokens\":5}" "$tmp/r" > /dev/null
check "max_completion_tokens 5 ($(head -c 300 "$tmp/r"))" [ "$(jq '.usage.completion_tokens' "$tmp/r")" = 5 ]
refused "15 stops and the template's 2" \
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":$(jq -cn '[range(15) | tostring]')}" stop \
    "stop: 15 strings and the chat template's 2 are more than 16"
next_turn transcript
kill "$pid"
wait "$pid" 2> /dev/null

# ----------------------------------------------------------------------------
# content is text: its <|endoftext|> is not the special token, the template's is
start "$tmp/g.log" -m "$MODEL" -t 2 || { summary; exit 1; }
post /apply-template '{"messages":[{"role":"user","content":"a<|endoftext|>b"}]}' "$tmp/o" > /dev/null
check "gpt2 renders content<|endoftext|>" [ "$(jq -r .prompt "$tmp/o")" = 'a<|endoftext|>b<|endoftext|>' ]
ids=$("$GPT" --tokenize --json -p 'a<|endoftext|>b' | jq -c '. + [50256]')
special=$("$GPT" --tokenize --json --special -p 'a<|endoftext|>b<|endoftext|>')
check "the content's literal is 11 tokens of text ($ids, with --special $special)" \
    [ "$(printf '%s' "$ids" | jq length)" -gt "$(printf '%s' "$special" | jq length)" ]
post /v1/chat/completions '{"messages":[{"role":"user","content":"a<|endoftext|>b"}],"seed":4,"max_tokens":12}' \
    "$tmp/r" > /dev/null
post /v1/completions "{\"prompt\":$ids,\"seed\":4,\"max_tokens\":12}" "$tmp/c" > /dev/null
check "content <|endoftext|>: the answer is that of its text's ids and the template's token ($(head -c 300 "$tmp/r"))" \
    [ "$(jq -c '[.choices[0].tokens, .choices[0].message.content, .usage.prompt_tokens]' "$tmp/r")" = \
      "$(jq -c --argjson ids "$ids" '[.choices[0].tokens, .choices[0].text, ($ids | length)]' "$tmp/c")" ]
next_turn gpt2

# ----------------------------------------------------------------------------
# what is refused: 400, OpenAI's error, the field named
refused "unknown role" '{"messages":[{"role":"function","content":"x"}]}' messages '"function" is not a role'
refused "a tool's result without its call's id" '{"messages":[{"role":"tool","content":"x"}]}' messages \
    'needs its tool_call_id'
refused "a user's tool calls" '{"messages":[{"role":"user","content":"x","tool_calls":[]}]}' messages \
    "only an assistant's message has them"
refused "a tool call of no function" '{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]}]}' \
    messages 'tool_calls[0] must be'
refused "no role" '{"messages":[{"content":"x"}]}' messages 'messages[0].role must be a string'
refused "empty messages" '{"messages":[]}' messages 'messages is empty'
refused "no messages" '{"max_tokens":3}' messages 'no "messages" field'
refused "messages a string" '{"messages":"hi"}' messages 'messages must be an array'
refused "a message not an object" '{"messages":["hi"]}' messages 'messages[0] must be an object'
refused "no content" '{"messages":[{"role":"user"}]}' messages 'messages[0] has no content'
refused "content a number" '{"messages":[{"role":"user","content":3}]}' messages 'messages[0].content must be'
refused "an image part" '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}' \
    messages 'part type "image_url" is not supported'
refused "a part without text" '{"messages":[{"role":"user","content":[{"type":"text"}]}]}' messages \
    'content[0].text must be a string'
refused "an unknown message field" '{"messages":[{"role":"user","content":"x","audio":{}}]}' messages \
    'unknown field "audio"'
refused "response_format of no type" '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}' \
    response_format 'response_format.type "xml" is not text, json_object or json_schema'
refused "response_format with a bad schema" \
    '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"t","schema":{"type":"array","uniqueItems":true}}}}' \
    response_format 'response_format.json_schema.schema: #: uniqueItems is not supported'
refused "echo" '{"messages":[{"role":"user","content":"x"}],"echo":true}' echo 'not of /v1/chat/completions'
refused "best_of" '{"messages":[{"role":"user","content":"x"}],"best_of":2}' best_of 'not of /v1/chat/completions'
refused "prompt" '{"messages":[{"role":"user","content":"x"}],"prompt":"x"}' prompt 'unknown field "prompt"'
refused "logprobs a number" '{"messages":[{"role":"user","content":"x"}],"logprobs":2}' logprobs 'true or false'
refused "top_logprobs without logprobs" '{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}' top_logprobs \
    'needs "logprobs": true'
refused "top_logprobs 21" '{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}' top_logprobs \
    'in [0, 20]'
refused "max_completion_tokens -1" '{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":-1}' \
    max_completion_tokens 'max_completion_tokens must be an integer in [0, '
refused "temperature a string" '{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}' temperature \
    'temperature must be a number'
many=$(jq -cn '[range(10000) | {role: "user", content: "x"}]')
refused "10,000 messages" "{\"messages\":$many}" messages 'a conversation holds at most 4096'
deep=$(awk 'BEGIN { for (i = 0; i < 5000; i++) printf "["; for (i = 0; i < 5000; i++) printf "]" }')
st=$(post /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":$deep}]}" "$tmp/o")
check "content nested 5000 deep: 400 ($st $(head -c 200 "$tmp/o"))" [ "$st" = 400 ]
parts=$(jq -cn '[range(1025) | {type: "text", text: "x"}]')
refused "1025 parts" "{\"messages\":[{\"role\":\"user\",\"content\":$parts}]}" messages 'more than 1024 parts'
long=$(jq -cn '[range(300) | {role: "user", content: "one two three four five six seven"}]')
refused "messages past the context" "{\"messages\":$long}" messages "the model's context holds 256"
check "the server is still up" [ "$(get /health "$tmp/o")" = 200 ]
kill "$pid"
wait "$pid" 2> /dev/null

# ----------------------------------------------------------------------------
# --chat-template that cannot be opened: exit 1, one line naming it
# bad_template WHAT SPEC WORDS
bad_template() {
    "$GPT" serve --port 0 -m "$MODEL" --chat-template "$2" > "$tmp/o" 2> "$tmp/e"
    rc=$?
    if [ $rc = 1 ] && [ "$(wc -l < "$tmp/e")" = 1 ] && grep -qF -- "$3" "$tmp/e"; then pass
    else fail "$1: exit $rc, $(cat "$tmp/e"), want exit 1 and '$3'"
    fi
}
printf '{"user": ' > "$tmp/cut.json"
bad_template "malformed" "$tmp/cut.json" "not valid JSON"
printf '{"tool": {}}' > "$tmp/tool.json"
bad_template "an unknown member" "$tmp/tool.json" 'unknown member "tool"'
{ printf '{"generation_prompt": "'; head -c 70000 /dev/zero | tr '\0' a; printf '"}'; } > "$tmp/big.json"
bad_template "too large" "$tmp/big.json" "holds at most 65536"
bad_template "no such name" llama3 "no such built-in (gpt2, transcript or chatml) or file"
bad_template "a missing file" "$tmp/none.json" "none.json"

# the command's faults: one line, exit 1 (input) or 2 (usage)
# cli_refused WHAT RC WORDS ARGS...
cli_refused() {
    what=$1 want_rc=$2 words=$3
    shift 3
    "$GPT" "$@" > "$tmp/o" 2> "$tmp/e"
    rc=$?
    if [ $rc = "$want_rc" ] && [ "$(wc -l < "$tmp/e")" = 1 ] && grep -qF -- "$words" "$tmp/e"; then pass
    else fail "$what: exit $rc, $(cat "$tmp/e"), want exit $want_rc and '$words'"
    fi
}
cli_refused "apply-template: empty" 1 "messages is empty" --apply-template -p '[]'
cli_refused "apply-template: not JSON" 1 "invalid JSON" --apply-template -p '[{"role":'
cli_refused "apply-template: unknown role" 1 '"function" is not a role' --apply-template -p '[{"role":"function","content":"x"}]'
cli_refused "apply-template: a bad file" 1 "not valid JSON" --apply-template --chat-template "$tmp/cut.json" -p \
    '[{"role":"user","content":"x"}]'
cli_refused "chat-template with --special" 2 "--special does not apply to --chat-template" -m "$MODEL" \
    --chat-template chatml --special -p '[{"role":"user","content":"x"}]'
cli_refused "chat-template with --score" 2 "--chat-template does not apply to --score" --score --chat-template chatml \
    -p x
cli_refused "16 stops and chatml's" 1 "--stop: 16 strings and the chat template's 1 are more than 16" -m "$MODEL" \
    --chat-template chatml -p '[{"role":"user","content":"x"}]' $(i=0; while [ $i -lt 16 ]; do printf -- '--stop s%d ' $i; i=$((i + 1)); done)

summary

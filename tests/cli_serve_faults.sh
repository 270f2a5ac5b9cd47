#!/bin/sh
# cli_serve_faults.sh - gpt serve against bad and hostile clients, on a free
# loopback port: malformed and truncated JSON, wrong types, NUL bytes and
# invalid UTF-8, huge numbers, JSON nested 10000 deep, a 10 MB body (413),
# a body cut short, a slowloris client (a header byte a second: closed
# after --timeout, others served meanwhile), 200 connections at once (each
# answered or refused whole), a client that stops reading mid-stream (its
# sequence dropped, its blocks back), a model whose logits are NaN (a 500,
# or in a stream the error event: no finish_reason "error"), bad
# stream_options, best_of and
# suffix, Ollama's bodies (malformed, NULs, wrong types in options: its
# {"error": MESSAGE}), the embedding bodies (bad input types, an empty or
# too long input, dimensions, a bad encoding_format: a 400 naming the field), hostile CORS headers (an Origin of 20 KB or of invalid bytes, an
# Access-Control-Request-Headers of 100 KB, of a thousand names, with a
# CR or a NUL in it: never echoed), and SIGTERM under load (exit 0). After
# each, a well-formed request with a seed still gets exactly the command's
# answer, and every error is OpenAI's JSON in valid UTF-8. Under a sanitizer
# build (GPT=build-asan/gpt) nothing may be reported, leaks included.
# Uses curl and jq, and python3's standard library where curl cannot do it.
# Prints "cli_serve_faults: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
CHECK_NAME=cli_serve_faults
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need curl jq python3 iconv

# The well-formed request sent between the faults, and the command's answer.
GOOD='{"prompt":"The LORD said unto Moses","max_tokens":16,"seed":5,"temperature":0.8}'
"$GPT" -m "$MODEL" -p "The LORD said unto Moses" -n 16 -s 5 --temp 0.8 --json > "$tmp/good" 2> /dev/null

# still_serving AFTER: the well-formed request gets the command's answer
still_serving() {
    st=$(post /v1/completions "$GOOD" "$tmp/r")
    if [ "$st" = 200 ]; then same_as_cli "after $1" "$tmp/r" "$tmp/good"
    else fail "after $1: status $st $(head -c 300 "$tmp/r")"
    fi
}

# bad STATUS WHAT BODY-FILE: POSTing the file's bytes gets STATUS and an
# error in OpenAI's shape, valid UTF-8 JSON
bad() {
    got=$(curl -s -o "$tmp/e" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$3" \
        "http://127.0.0.1:$port/v1/completions")
    if [ "$got" = "$1" ] && iconv -f UTF-8 -t UTF-8 "$tmp/e" > /dev/null 2>&1 &&
        jq -e '.error | (.message | length > 0) and has("type") and has("param") and has("code")' "$tmp/e" > /dev/null 2>&1
    then pass
    else fail "$2: want $1, got $got $(head -c 300 "$tmp/e")"
    fi
}

# bad_json STATUS WHAT TEXT: bad with the text as the body
bad_json() {
    printf '%s' "$3" > "$tmp/body"
    bad "$1" "$2" "$tmp/body"
}

# metric NAME: its value in /metrics
metric() {
    get /metrics "$tmp/m" > /dev/null
    sed -n "s/^$1 //p" "$tmp/m"
}

ORIGIN=http://127.0.0.1:9
start "$tmp/s.log" -m "$MODEL" --timeout 2 --max-tokens 100000 --parallel 8 --queue 32 -t 2 --cors-origin "$ORIGIN" ||
    { summary; exit 1; }
SERVER=$pid
still_serving "the start"

# malformed and truncated JSON
bad_json 400 "an empty body" ''
bad_json 400 "a truncated object" '{"prompt": "x",'
bad_json 400 "a truncated string" '{"prompt":"Hel'
bad_json 400 "a truncated escape" '{"prompt":"a\u00'
bad_json 400 "keys without quotes" '{prompt: "x"}'
bad_json 400 "a trailing comma" '{"prompt":"x",}'
bad_json 400 "two objects" '{"prompt":"x"}{"prompt":"y"}'
bad_json 400 "a bare string" '"prompt"'
bad_json 400 "null" 'null'
bad_json 400 "a lone bracket" '['
still_serving "malformed JSON"

# wrong types
for body in '{"prompt":5}' '{"prompt":{"a":1}}' '{"prompt":true}' '{"prompt":[1,"a"]}' '{"prompt":[[1],"a"]}' \
    '{"prompt":[[]]}' '{"prompt":[]}' '{"prompt":[-1]}' '{"prompt":[1.5]}' '{"prompt":"x","max_tokens":"5"}' \
    '{"prompt":"x","stop":5}' '{"prompt":"x","stop":[1]}' '{"prompt":"x","n":"2"}' '{"prompt":"x","seed":[]}' \
    '{"prompt":"x","seed":-1}' '{"prompt":"x","echo":"yes"}' '{"prompt":"x","stream":1}' \
    '{"prompt":"x","logprobs":true}' '{"prompt":"x","temperature":"hot"}' '{"prompt":"x","top_k":-1}' \
    '{"prompt":"x","keep":"all","context_shift":true}' '{"prompt":"x","context_shift":"yes"}' \
    '{"prompt":"x","model":5}' '{"prompt":"x","user":[]}' '{"prompt":"x","ignore_eos":0}' \
    '{"prompt":"x","stream":true,"stream_options":[]}' '{"prompt":"x","stream":true,"stream_options":"yes"}' \
    '{"prompt":"x","stream":true,"stream_options":true}' '{"prompt":"x","stream":true,"stream_options":{"include_usage":1}}' \
    '{"prompt":"x","stream":true,"stream_options":{"include_usage":"true"}}' \
    '{"prompt":"x","stream":true,"stream_options":{"include_usage":true,"x":1}}' \
    '{"prompt":"x","stream_options":{"include_usage":true}}' '{"prompt":"x","stream":false,"stream_options":{}}' \
    '{"prompt":"x","best_of":0}' '{"prompt":"x","best_of":"2"}' '{"prompt":"x","best_of":1.5}' \
    '{"prompt":"x","best_of":-1}' '{"prompt":"x","best_of":1e300}' '{"prompt":"x","best_of":65}' \
    '{"prompt":"x","n":4,"best_of":3}' '{"prompt":"x","n":2,"best_of":5,"stream":true}' \
    '{"prompt":["a","b","c","d","e"],"best_of":13}' '{"prompt":"x","suffix":5}' '{"prompt":"x","suffix":"y"}' \
    '{"prompt":"x","suffix":[]}' '{"prompt":"x","suffix":" "}' '{"prompt":"x","logit_bias":{"a":1}}' \
    '{"prompt":"x","logit_bias":{"50257":1}}' '{"prompt":"x","logit_bias":{"-1":1}}' '{"prompt":"x","logit_bias":{"1":1e300}}' \
    '{"prompt":"x","logit_bias":{"1":"1"}}' '{"prompt":"x","logit_bias":[1]}' '{"prompt":"x","logit_bias":{"1":1,"1":2}}' \
    '{"prompt":"x","logit_bias":{"99999999999999999999":1}}' '{"prompt":"x","presence_penalty":"1"}' \
    '{"prompt":"x","presence_penalty":-2.01}' '{"prompt":"x","frequency_penalty":1e39}' \
    '{"prompt":"x","frequency_penalty":[]}'; do
    bad_json 400 "wrong type: $body" "$body"
done
python3 -c 'import json; print(json.dumps({"prompt": "x", "logit_bias": {str(i): 1 for i in range(301)}}), end="")' \
    > "$tmp/body"
bad 400 "logit_bias of 301 ids" "$tmp/body"
still_serving "wrong types"

# NUL bytes and invalid UTF-8
printf '{"prompt":"a\000b"}' > "$tmp/body"
bad 400 "a raw NUL in a string" "$tmp/body"
printf '{"prompt":"x"}\000' > "$tmp/body"
bad 400 "a NUL after the object" "$tmp/body"
bad_json 400 "an escaped NUL" '{"prompt":"a\u0000b"}'
bad_json 400 "an escaped NUL in a key" '{"a\u0000b":1,"prompt":"x"}'
bad_json 400 "a lone surrogate" '{"prompt":"\udc00"}'
printf '{"prompt":"x","\377\376":1}' > "$tmp/body"
bad 400 "an unknown field named in invalid UTF-8" "$tmp/body"
printf '{"prompt":"x","stop":"\377","max_tokens":2}' > "$tmp/body"
check "a stop string of invalid UTF-8: 200" [ "$(post /v1/completions "@$tmp/body" "$tmp/r")" = 200 ]
printf '{"prompt":"x","model":"\300\200","max_tokens":2}' > "$tmp/body"
check "invalid UTF-8 in an unused string: 200" [ "$(curl -s -o "$tmp/r" -w '%{http_code}' \
    --data-binary "@$tmp/body" "http://127.0.0.1:$port/v1/completions")" = 200 ]
# a prompt of invalid UTF-8 is bytes, as -p takes them: the command's answer
printf '{"prompt":"\377\376Hello \342\202","max_tokens":12,"seed":3,"echo":true}' > "$tmp/body"
st=$(curl -s -o "$tmp/r" -w '%{http_code}' --data-binary "@$tmp/body" "http://127.0.0.1:$port/v1/completions")
check "a prompt of invalid UTF-8: 200 ($st)" [ "$st" = 200 ]
check "its answer is valid UTF-8 JSON" python3 -c 'import json, sys; json.loads(open(sys.argv[1], "rb").read().decode())' \
    "$tmp/r"
"$GPT" -m "$MODEL" -p "$(printf '\377\376Hello \342\202')" -n 12 -s 3 --echo --json > "$tmp/e" 2> /dev/null
same_as_cli "a prompt of invalid UTF-8" "$tmp/r" "$tmp/e"
still_serving "NUL and invalid UTF-8"

# huge numbers
for body in '{"prompt":"x","max_tokens":1e400}' '{"prompt":"x","max_tokens":-1e400}' '{"prompt":"x","seed":1e30}' \
    '{"prompt":"x","seed":99999999999999999999999}' '{"prompt":"x","seed":"99999999999999999999999"}' \
    '{"prompt":"x","n":1e20}' '{"prompt":"x","top_k":1e300}' '{"prompt":"x","temperature":1e39}' \
    '{"prompt":"x","keep":1e300,"context_shift":true}' '{"prompt":"x","logprobs":1e300}' '{"prompt":[1e300]}' \
    '{"prompt":[9007199254740993]}' '{"prompt":"x","max_tokens":100001}'; do
    bad_json 400 "huge: $body" "$body"
done
printf '{"prompt":"x","max_tokens":%s}' "$(head -c 10000 /dev/zero | tr '\0' 9)" > "$tmp/body"
bad 400 "a number of 10000 digits" "$tmp/body"
still_serving "huge numbers"

# deeply nested JSON: 10000 levels
python3 -c 'print("[" * 10000 + "]" * 10000, end="")' > "$tmp/body"
bad 400 "arrays 10000 deep" "$tmp/body"
python3 -c 'print("{\"prompt\":" + "[" * 10000 + "1" + "]" * 10000 + "}", end="")' > "$tmp/body"
bad 400 "a prompt 10000 deep" "$tmp/body"
python3 -c 'print("{\"a\":" * 10000 + "1" + "}" * 10000, end="")' > "$tmp/body"
bad 400 "objects 10000 deep" "$tmp/body"
python3 -c 'print("[" * 10000, end="")' > "$tmp/body"
bad 400 "10000 opened, none closed" "$tmp/body"
still_serving "deep JSON"

# Ollama's bodies (/api/generate, /api/chat, /api/show): each fault a 400
# in Ollama's shape, {"error": MESSAGE} in valid UTF-8
# bad_ollama PATH WHAT BODY-FILE
bad_ollama() {
    got=$(curl -s -o "$tmp/e" -w '%{http_code}' --data-binary "@$3" "http://127.0.0.1:$port$1")
    if [ "$got" = 400 ] && iconv -f UTF-8 -t UTF-8 "$tmp/e" > /dev/null 2>&1 &&
        jq -e '(keys == ["error"]) and (.error | type == "string" and length > 0)' "$tmp/e" > /dev/null 2>&1
    then pass
    else fail "$1 $2: want 400, got $got $(head -c 300 "$tmp/e")"
    fi
}
for body in '' '{"prompt":"x",' '[1]' 'null' '{"prompt":"x"}{"prompt":"y"}' '{"prompt":"a\u0000b"}' \
    '{"prompt":"x","options":{"stop":"a\u0000b"}}' '{"prompt":5}' '{"prompt":"x","options":[]}' \
    '{"prompt":"x","options":{"temperature":"hot"}}' '{"prompt":"x","options":{"num_predict":1e400}}' \
    '{"prompt":"x","options":{"num_predict":1.5}}' '{"prompt":"x","options":{"seed":1e30}}' \
    '{"prompt":"x","options":{"seed":-2}}' '{"prompt":"x","options":{"num_ctx":"big"}}' \
    '{"prompt":"x","options":{"num_ctx":1e400}}' '{"prompt":"x","options":{"stop":5}}' \
    '{"prompt":"x","options":{"top_k":1e300}}' '{"prompt":"x","stream":1}' '{"prompt":"x","raw":"yes"}' \
    '{"prompt":"x","format":5}' '{"prompt":"x","format":["json"]}' '{"prompt":"x","model":5}'; do
    printf '%s' "$body" > "$tmp/body"
    bad_ollama /api/generate "$body" "$tmp/body"
done
for body in '{"messages":5}' '{"messages":[5]}' '{"messages":[{"role":"user"}]}' '{"messages":{}}' \
    '{"messages":[{"role":"user","content":"x","images":5}]}' '{"messages":[{"role":"user","content":"x"}],"tools":5}' \
    '{"model":"x"}'; do
    printf '%s' "$body" > "$tmp/body"
    bad_ollama /api/chat "$body" "$tmp/body"
done
for body in 'x' '{"model":5}' '[]'; do
    printf '%s' "$body" > "$tmp/body"
    bad_ollama /api/show "$body" "$tmp/body"
done
printf '{"prompt":"a\000b"}' > "$tmp/body"
bad_ollama /api/generate "a raw NUL" "$tmp/body"
printf '{"prompt":"x","options":{"\377\376":1}}' > "$tmp/body"
bad_ollama /api/generate "an option named in invalid UTF-8" "$tmp/body"
python3 -c 'print("{\"prompt\":\"x\",\"options\":" + "{\"a\":" * 10000 + "1" + "}" * 10001, end="")' > "$tmp/body"
bad_ollama /api/generate "options 10000 deep" "$tmp/body"
still_serving "Ollama's bodies"

# /v1/responses: each refusal a 400 in OpenAI's shape whose param names the
# field the client sent (valid UTF-8 JSON); a body that is no JSON object
# any 400 in that shape
# bad_responses PARAM BODY
bad_responses() {
    printf '%s' "$2" > "$tmp/body"
    got=$(curl -s -o "$tmp/e" -w '%{http_code}' --data-binary "@$tmp/body" "http://127.0.0.1:$port/v1/responses")
    if [ "$got" = 400 ] && iconv -f UTF-8 -t UTF-8 "$tmp/e" > /dev/null 2>&1 &&
        jq -e --arg p "$1" '.error | (.message | length > 0) and (.param == (if $p == "" then null else $p end)) and
                            has("type") and has("code")' "$tmp/e" > /dev/null 2>&1
    then pass
    else fail "/v1/responses $2: want 400 naming ${1:-nothing}, got $got $(head -c 300 "$tmp/e")"
    fi
}
for body in '' '{"input":"x",' '[1]' 'null' '{"input":"x"}{"input":"y"}' '{"input":"a\u0000b"}'; do
    bad_responses "" "$body"
done
while read -r param body; do
    bad_responses "$param" "$body"
done << 'BODIES'
input {}
input {"input":5}
input {"input":[]}
input {"input":[5]}
input {"input":{"role":"user","content":"x"}}
input {"input":[{"role":"tool","content":"x"}]}
input {"input":[{"role":"user"}]}
input {"input":[{"role":"user","content":5}]}
input {"input":[{"role":"user","content":[5]}]}
input {"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}
input {"input":[{"role":"user","content":[{"type":"input_text"}]}]}
input {"input":[{"role":"user","content":[{"type":"input_text","text":"x","x":1}]}]}
input {"input":[{"type":"function_call","name":"f","arguments":"{}","call_id":"c"}]}
input {"input":[{"type":"function_call_output","call_id":"c","output":"x"}]}
input {"input":[{"role":"user","content":"x","name":"me"}]}
instructions {"input":"x","instructions":5}
max_output_tokens {"input":"x","max_output_tokens":-1}
max_output_tokens {"input":"x","max_output_tokens":"5"}
max_output_tokens {"input":"x","max_output_tokens":1e400}
top_k {"input":"x","top_k":-1e400}
logit_bias {"input":"x","logit_bias":{"1":1e400}}
text.format {"input":"x","text":{"format":{"type":"json_schema","schema":{"type":"integer","maximum":1e400}}}}
max_output_tokens {"input":"x","max_output_tokens":100001}
temperature {"input":"x","temperature":"hot"}
top_p {"input":"x","top_p":0}
seed {"input":"x","seed":1.5}
seed {"input":"x","seed":1e30}
stream {"input":"x","stream":1}
text {"input":"x","text":5}
text {"input":"x","text":{"form":{}}}
text.verbosity {"input":"x","text":{"verbosity":"high"}}
text.format {"input":"x","text":{"format":"json"}}
text.format {"input":"x","text":{"format":{"type":"xml"}}}
text.format {"input":"x","text":{"format":{"type":"json_schema","name":"a"}}}
text.format {"input":"x","text":{"format":{"type":"json_schema","schema":{"type":"array","uniqueItems":true}}}}
text.format {"input":"x","text":{"format":{"type":"json_schema","schema":{},"strict":"yes"}}}
regex {"input":"x","text":{"format":{"type":"json_object"}},"regex":"a"}
store {"input":"x","store":true}
store {"input":"x","store":"no"}
previous_response_id {"input":"x","previous_response_id":"resp_1"}
conversation {"input":"x","conversation":"conv_1"}
background {"input":"x","background":true}
tools {"input":"x","tools":[{"type":"web_search"}]}
tools {"input":"x","tools":[{"type":"function","name":"f","parameters":{}},{"type":"file_search"}]}
tools {"input":"x","tools":[{"type":"function","name":"f","parameters":{}}]}
tools {"input":"x","tools":5}
tool_choice {"input":"x","tool_choice":"required"}
include {"input":"x","include":["message.output_text.logprobs"]}
reasoning {"input":"x","reasoning":{"effort":"high"}}
truncation {"input":"x","truncation":"auto"}
metadata {"input":"x","metadata":{"a":1}}
metadata {"input":"x","metadata":[]}
parallel_tool_calls {"input":"x","parallel_tool_calls":"yes"}
model {"input":"x","model":5}
user {"input":"x","user":[]}
prompt_cache_key {"input":"x","prompt_cache_key":5}
max_tokens {"input":"x","max_tokens":5}
n {"input":"x","n":2}
echo {"input":"x","echo":true}
logprobs {"input":"x","logprobs":2}
response_format {"input":"x","response_format":{"type":"json_object"}}
prompt {"input":"x","prompt":{"id":"pmpt_1"}}
bogus {"input":"x","bogus":1}
BODIES
python3 -c 'print("{\"input\":" + "[" * 10000 + "]" * 10000 + "}", end="")' > "$tmp/body"
got=$(curl -s -o "$tmp/e" -w '%{http_code}' --data-binary "@$tmp/body" "http://127.0.0.1:$port/v1/responses")
check "/v1/responses: input 10000 deep: 400 ($got)" [ "$got" = 400 ]
still_serving "Responses bodies"

# the embedding bodies: each fault a 400 naming its field (/v1/embeddings:
# OpenAI's error with param FIELD; /api/embed: Ollama's, its message
# naming FIELD)
# bad_embed PATH FIELD BODY
bad_embed() {
    printf '%s' "$3" > "$tmp/body"
    got=$(curl -s -o "$tmp/e" -w '%{http_code}' --data-binary "@$tmp/body" "http://127.0.0.1:$port$1")
    if [ "$1" = /v1/embeddings ]; then named=$(jq -r .error.param "$tmp/e" 2> /dev/null)
    else named=$(jq -r 'select(keys == ["error"]) | .error' "$tmp/e" 2> /dev/null | grep -o "$2" | head -n 1)
    fi
    if [ "$got" = 400 ] && [ "$named" = "$2" ] && iconv -f UTF-8 -t UTF-8 "$tmp/e" > /dev/null 2>&1; then pass
    else fail "$1 $3: want 400 naming $2, got $got $(head -c 300 "$tmp/e")"
    fi
}
long=$(python3 -c 'print("[" + ",".join(["464"] * 5000) + "]", end="")')
for body in '{}' '{"input":null}' '{"input":5}' '{"input":true}' '{"input":{"a":1}}' '{"input":""}' '{"input":[]}' \
    '{"input":[[]]}' '{"input":["a",""]}' '{"input":["a",[1]]}' '{"input":[1,"a"]}' '{"input":[[1],"a"]}' \
    '{"input":[-1]}' '{"input":[1.5]}' '{"input":[50257]}' '{"input":[[1],[1e300]]}' '{"input":[[[1]]]}' \
    "{\"input\":$long}" "{\"input\":[[1],$long]}"; do
    bad_embed /v1/embeddings input "$body"
done
for f in '"encoding_format":"int8"' '"encoding_format":5' '"encoding_format":null,"dimensions":8' '"dimensions":8' \
    '"dimensions":null,"normalize":"no"' '"normalize":1' '"model":5' '"user":[]' '"pooling":"last"'; do
    field=$(printf '{%s}' "$f" | jq -r 'to_entries | map(select(.value != null)) | .[0].key')
    bad_embed /v1/embeddings "$field" "{\"input\":\"x\",$f}"
done
python3 -c 'print("[" + ",".join(["\"a\""] * 2049) + "]", end="")' > "$tmp/many"
bad_embed /v1/embeddings input "{\"input\":$(cat "$tmp/many")}"
for body in '{"input":5}' '{"input":""}' '{"input":[]}' '{"input":[1,2]}' '{"input":["a",[1]]}' '{"input":["a",""]}'; do
    bad_embed /api/embed input "$body"
done
bad_embed /api/embed input "{\"input\":\"$(python3 -c 'print("x " * 5000, end="")')\",\"truncate\":false}"
for f in '"truncate":"no"' '"dimensions":4' '"options":[]' '"encoding_format":"float"' '"normalize":false'; do
    field=$(printf '{%s}' "$f" | jq -r 'keys[0]')
    bad_embed /api/embed "$field" "{\"input\":\"x\",$f}"
done
check "an embedding well formed after the faults: 200" [ "$(post /v1/embeddings '{"input":"x"}' "$tmp/r")" = 200 ]
still_serving "the embedding bodies"

# hostile CORS headers. An Origin of 20 KB, or of bytes that are not
# UTF-8: answered, with no CORS header (nothing of it echoed)
st=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -H "Origin: $ORIGIN$(head -c 20000 /dev/zero | tr '\0' a)" \
    "http://127.0.0.1:$port/health")
check "an Origin of 20 KB: answered without CORS headers ($st)" \
    sh -c "[ '$st' = 200 ] && ! grep -qi '^access-control' '$tmp/h'"
st=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -X OPTIONS -H "$(printf 'Origin: \377\376')" \
    "http://127.0.0.1:$port/v1/completions")
check "an Origin of invalid bytes: 403, no CORS header ($st)" sh -c "[ '$st' = 403 ] && ! grep -qi '^access-control' '$tmp/h'"
# preflight ASKED: the status of a preflight asking for those headers (its headers in $tmp/h)
preflight() {
    curl -s -D "$tmp/h" -o "$tmp/e" -w '%{http_code}' -X OPTIONS -H "Origin: $ORIGIN" \
        -H 'Access-Control-Request-Method: POST' -H "Access-Control-Request-Headers: $1" \
        "http://127.0.0.1:$port/v1/completions"
}
st=$(preflight "x-a,$(head -c 100000 /dev/zero | tr '\0' b)")
check "a request-headers list of 100 KB: refused whole ($st)" sh -c "[ '$st' = 400 ] || [ '$st' = 431 ] || [ '$st' = 413 ]"
st=$(preflight "$(seq -s , -f 'x-%g' 1 1000)")
check "a thousand header names: 400 ($st)" [ "$st" = 400 ]
check "a thousand header names: none echoed" sh -c "! grep -qi 'x-1,' '$tmp/h'"
st=$(preflight "$(head -c 1024 /dev/zero | tr '\0' a)")
check "a header name of 1024 bytes (the bound): 204, echoed ($st)" \
    sh -c "[ '$st' = 204 ] && grep -qi '^access-control-allow-headers: Authorization, Content-Type, a\{1024\}' '$tmp/h'"
st=$(preflight "$(head -c 1025 /dev/zero | tr '\0' a)")
check "a header name of 1025 bytes: 400 ($st)" [ "$st" = 400 ]
st=$(preflight "x-\"a\", (b), x-c")
check "quotes and parentheses: 400, the message is JSON ($st)" \
    sh -c "[ '$st' = 400 ] && jq -e '.error.message | test(\"not part of a header name\")' '$tmp/e' > /dev/null"
# a CR alone, a control byte, invalid bytes inside the header's value, sent
# raw: refused (by libmicrohttpd or by gpt); a NUL: libmicrohttpd ends the
# value there (what follows is never seen); none a header of its own in the
# answer
python3 - "$port" "$ORIGIN" << 'EOF2'
import socket, sys
port, origin = int(sys.argv[1]), sys.argv[2].encode()
ok = True
for value in (b"x-a\rX-Injected: 1", b"x-a\x00X-Injected: 1", b"x-a\x0bx-b", b"x-\xff\xfe"):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"OPTIONS /v1/completions HTTP/1.1\r\nHost: x\r\nOrigin: " + origin +
              b"\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: " + value +
              b"\r\nConnection: close\r\n\r\n")
    s.settimeout(10)
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except OSError:
        pass
    head = data.split(b"\r\n\r\n")[0]
    status = head.split(b"\r\n")[0]
    print(repr(value), status.decode(errors="replace"))
    cut = b"\x00" in value and status.startswith(b"HTTP/1.1 204") and \
        b"\r\nAccess-Control-Allow-Headers: Authorization, Content-Type, x-a\r\n" in head
    if b"x-injected" in head.lower() or not (status.startswith(b"HTTP/1.1 4") or cut or not data):
        ok = False
sys.exit(0 if ok else 1)
EOF2
check "a CR, a NUL, a control byte, invalid bytes in the request-headers list: refused or cut, not echoed" [ $? = 0 ]
still_serving "hostile CORS headers"

# a 10 MB body: 413, declared or chunked
python3 -c 'print("{\"prompt\":\"" + "a" * (10 << 20) + "\"}", end="")' > "$tmp/big"
bad 413 "a 10 MB body" "$tmp/big"
got=$(curl -s -o "$tmp/e" -w '%{http_code}' -H 'Transfer-Encoding: chunked' --data-binary "@$tmp/big" \
    "http://127.0.0.1:$port/v1/completions")
check "a 10 MB body, chunked: 413 ($got)" [ "$got" = 413 ]
# a body declared as 10 GB with Expect: 100-continue: 413 at once, before
# any of it is sent (no 100 Continue, nothing read)
python3 - "$port" << 'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Expect: 100-continue\r\nContent-Length: 10737418240\r\n\r\n")
s.settimeout(1.5)
line = s.recv(4096).split(b"\r\n")[0]
print("a body declared as 10 GB:", line.decode(errors="replace"))
sys.exit(0 if line.startswith(b"HTTP/1.1 413") else 1)
EOF
check "a body declared as 10 GB: 413 before it is sent" [ $? = 0 ]
still_serving "a 10 MB body"

# a body shorter than its Content-Length, then the client goes; and a
# request line with nothing after it
python3 - "$port" << 'EOF'
import socket, sys
for data in (b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prompt":"Hel',
             b'POST /v1/completions HTTP/1.1\r\n', b'GARBAGE\r\n\r\n', b'\x00\xff\r\n\r\n'):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(10)
    while s.recv(4096):
        pass
    s.close()
EOF
check "cut bodies and garbage: the client was answered or closed" [ $? = 0 ]
still_serving "cut bodies"

# slowloris: a header byte a second. Closed within --timeout (2 s) and a
# little; a request sent meanwhile is answered at once.
python3 - "$port" > "$tmp/slow" << 'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t0 = time.time()
for b in b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 30:
    try:
        s.send(bytes([b]))
        s.settimeout(1)
        if s.recv(100) == b"":
            break
    except socket.timeout:
        continue
    except OSError:
        break
print("%.1f" % (time.time() - t0))
EOF
slow=$!
sleep 1
t0=$(date +%s)
still_serving "a slowloris client started"
check "others are served meanwhile" [ $(($(date +%s) - t0)) -le 2 ]
wait $slow
secs=$(cat "$tmp/slow")
check "slowloris: closed after $secs s (--timeout 2)" python3 -c "import sys; sys.exit(not 1.5 <= $secs <= 6)"

# 200 connections at once, each a request: answered (200, the command's
# text) or refused whole (503 with Retry-After), none cut or hung
SHORT='{"prompt":"Hello","max_tokens":2,"seed":1}'
"$GPT" -m "$MODEL" -p Hello -n 2 -s 1 --json > "$tmp/short" 2> /dev/null
python3 - "$port" "$SHORT" "$(jq -c .text "$tmp/short")" << 'EOF'
import http.client, json, sys, threading
port, body, text = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
results = [None] * 200
def one(i):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = json.loads(r.read().decode("utf-8"))
        if r.status == 200:
            results[i] = "ok" if data["choices"][0]["text"] == text else "wrong text"
        elif r.status == 503:
            results[i] = "refused" if r.getheader("Retry-After") and "error" in data else "bad 503"
        else:
            results[i] = "status %d" % r.status
    except Exception as e:  # a connection refused or reset: refused cleanly
        results[i] = "closed" if isinstance(e, (ConnectionError, http.client.RemoteDisconnected)) else repr(e)
threads = [threading.Thread(target=one, args=(i,)) for i in range(200)]
for t in threads: t.start()
for t in threads: t.join()
bad = [r for r in results if r not in ("ok", "refused", "closed")]
print("200 connections:", {r: results.count(r) for r in set(results)})
sys.exit(1 if bad or "ok" not in results else 0)
EOF
check "200 connections at once: each answered or refused whole" [ $? = 0 ]
still_serving "200 connections"

# a client that stops reading mid-stream: the socket fills, --timeout
# closes it, its sequence is dropped and its blocks come back
cancelled=$(metric gpt_requests_cancelled_total)
python3 - "$port" << 'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
body = b'{"prompt":"Hello","max_tokens":100000,"ignore_eos":true,"context_shift":true,"logprobs":20,"n":4,"stream":true}'
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
          % len(body) + body)
s.recv(1024)
time.sleep(60)  # reads no more, and holds the socket open till killed
EOF
reader=$!
t0=$(date +%s)
while [ $(($(date +%s) - t0)) -lt 20 ]; do
    sleep 0.2
    [ "$(metric gpt_requests_cancelled_total)" -gt "$cancelled" ] && [ "$(metric gpt_sequences_running)" = 0 ] &&
        [ "$(metric gpt_kv_blocks_used)" = 0 ] && break
done
check "a client that stopped reading: dropped within $(($(date +%s) - t0)) s, blocks back ($(grep -E \
    '^gpt_(requests_cancelled|kv_blocks_used|sequences_running)' "$tmp/m" | tr '\n' ' '))" \
    [ $(($(date +%s) - t0)) -lt 20 ]
kill "$reader" 2> /dev/null
wait "$reader" 2> /dev/null
still_serving "a client that stopped reading"

# A damaged model (wte row 0 NaN: the logit of token 0 is not finite at the
# first step): a request fails after its prompt. Not streamed: 500 and the
# error object. Streamed, the 200 has gone out: the error object as an event
# (as OpenAI and llama.cpp send it), then [DONE] (no usage chunk, though
# include_usage asks for one); no chunk carries a
# finish_reason or stop_reason but "stop" and "length".
"$GPT" convert "$MODEL" "$tmp/nan.bin" --dtype f32 2> /dev/null || fail "gpt convert $MODEL --dtype f32 failed"
python3 - "$tmp/nan.bin" << 'EOF2' || fail "writing NaN into $tmp/nan.bin failed"
import math, struct, sys
with open(sys.argv[1], "r+b") as f:
    h = f.read(128)
    table, data = struct.unpack_from("<QQ", h, 88)  # docs/model-format.md
    f.seek(table)
    (off,) = struct.unpack_from("<Q", f.read(128), 104)  # tensor 0, wte (F32)
    f.seek(data + off)
    f.write(struct.pack("<4f", *[math.nan] * 4))
EOF2
good_port=$port
# nan_check WHAT: the last line of $tmp/nan.events is [DONE], the one
# before it the error object naming the logit, and no choice has a
# finish_reason or stop_reason but "stop" and "length"
nan_check() {
    grep -v '^\[DONE\]$' "$tmp/nan.events" > "$tmp/nan.chunks"
    if [ "$(tail -n 1 "$tmp/nan.events")" = '[DONE]' ] &&
        tail -n 1 "$tmp/nan.chunks" | jq -e '.error.message | contains("logit of token 0 is not finite")' > /dev/null 2>&1 &&
        jq -s -e '[.[].choices // [] | .[] | (.finish_reason // "stop"), (.stop_reason // "stop")] |
                  all(. == "stop" or . == "length")' "$tmp/nan.chunks" > /dev/null
    then pass
    else fail "$1: $(head -c 800 "$tmp/nan.events")"
    fi
}
if start "$tmp/nan.log" -m "$tmp/nan.bin" -t 1 --log off; then
    nan_server=$pid
    for path in /v1/completions /v1/chat/completions; do
        case $path in
        */chat/*) req='"messages":[{"role":"user","content":"Hello"}]' ;;
        *) req='"prompt":"Hello"' ;;
        esac
        st=$(post $path "{$req,\"max_tokens\":4}" "$tmp/nan.json")
        if [ "$st" = 500 ] && jq -r .error.message "$tmp/nan.json" | grep -q 'logit of token 0 is not finite'; then pass
        else fail "$path on a damaged model: $st $(head -c 300 "$tmp/nan.json"), want 500 naming the logit"
        fi
        st=$(post $path "{$req,\"max_tokens\":4,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" \
            "$tmp/nan.sse")
        sed -n 's/^data: //p' "$tmp/nan.sse" > "$tmp/nan.events"
        check "$path streamed on a damaged model: 200 (got $st)" [ "$st" = 200 ]
        nan_check "$path streamed on a damaged model: the error event, [DONE], no finish_reason but OpenAI's"
    done
    # /v1/responses: a 500 naming the logit; streamed, the events end with
    # response.failed, its error naming it (no completed, no [DONE])
    st=$(post /v1/responses '{"input":"Hello","max_output_tokens":4}' "$tmp/nan.json")
    if [ "$st" = 500 ] && jq -r .error.message "$tmp/nan.json" | grep -q 'logit of token 0 is not finite'; then pass
    else fail "/v1/responses on a damaged model: $st $(head -c 300 "$tmp/nan.json"), want 500 naming the logit"
    fi
    st=$(post /v1/responses '{"input":"Hello","max_output_tokens":4,"stream":true}' "$tmp/nan.sse")
    sed -n 's/^data: //p' "$tmp/nan.sse" > "$tmp/nan.events"
    check "/v1/responses streamed on a damaged model: 200, response.failed last naming the logit ($(tail -c 300 "$tmp/nan.sse"))" \
        sh -c "[ '$st' = 200 ] && ! grep -q DONE '$tmp/nan.sse' &&
               tail -n 1 '$tmp/nan.events' | jq -e '.type == \"response.failed\" and .response.status == \"failed\" and
                   (.response.error.message | contains(\"logit of token 0 is not finite\"))' > /dev/null"
    kill -TERM "$nan_server"
    wait "$nan_server"
fi
port=$good_port

# SIGTERM under load: a slowloris client, one that stopped reading, and
# well-formed requests streamed and not; every answer whole, exit 0
python3 - "$port" << 'EOF' &
import socket, sys, time
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
except OSError:  # the server stopped listening first
    sys.exit(0)
for b in b"GET /health HTTP/1.1\r\nHost: x\r\n":
    try:
        s.send(bytes([b]))
    except OSError:
        break
    time.sleep(1)
EOF
loris=$!
good_body() { printf '%s\n' "$GOOD"; }
good_expected() { echo "$tmp/good"; }
load 8 "$tmp/t" good_body
check "SIGTERM: the 8 requests answered or in the server first" all_inside 8 "$tmp/t"
sigterm "$SERVER"
kill "$loris" 2> /dev/null
wait "$loris" 2> /dev/null
check "SIGTERM under load: exit 0 (got $rc)" [ $rc = 0 ]
all_whole "SIGTERM under load" 8 "$tmp/t" good_expected
check "no sanitizer report: $(grep -m 3 -E 'Sanitizer|runtime error' "$tmp/s.log")" \
    sh -c "! grep -qE 'Sanitizer|runtime error' '$tmp/s.log'"
summary

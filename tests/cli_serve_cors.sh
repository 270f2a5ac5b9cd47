#!/bin/sh
# cli_serve_cors.sh - gpt serve --cors-origin, on free loopback ports:
#   - with curl: a preflight (OPTIONS) from an allowed origin gets 204 with
#     Access-Control-Allow-Origin (that origin), Vary: Origin, the methods,
#     Authorization, Content-Type and every header it asked for, a Max-Age,
#     and needs no key; every answer to it (200, 401, 404, 400, a stream)
#     carries Allow-Origin; another origin gets no CORS header and 403 for
#     OPTIONS; OPTIONS with no Origin is a 405; Access-Control-Request-Headers
#     too long, with too many names or a byte that is no header name: 400;
#   - the usage errors: '*' with a key (--api-key or $GPT_API_KEY), an
#     origin with a path, no scheme, a space: exit 2 naming the flag;
#   - in headless Chromium (tests/serve/cors_browser.mjs), a page served
#     by python3 -m http.server on one port (tests/serve/cors_page.html)
#     calls gpt serve on others with fetch and the openai client's headers
#     (x-stainless-*): where its origin is allowed (with a key) the
#     model, a completion (the command's text with the seed), a stream with
#     its usage, and the errors (401, 404, 400) are read; where another
#     origin is allowed the browser blocks both a preflighted and a simple
#     request; with '*' (no key) it works.
# Without chromium, node or python3 the browser part is skipped, saying so
# (a failure with GPT_TEST_REQUIRE_ALL=1).
# Prints "cli_serve_cors: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), CHROMIUM (default: chromium on PATH).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
CHECK_NAME=cli_serve_cors
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need curl jq

KEY=cors-key-1
PAGE=http://127.0.0.1:9   # the origin allowed for the curl checks (the browser's comes below)

# usage errors: exit 2, one line naming the flag
usage() {
    what=$1
    shift
    "$GPT" serve --port 0 -m "$MODEL" "$@" > /dev/null 2> "$tmp/u"
    rc=$?
    if [ $rc = 2 ] && [ "$(wc -l < "$tmp/u")" = 1 ] && grep -q -- "--cors-origin" "$tmp/u"; then pass
    else fail "$what: want exit 2 naming --cors-origin, got $rc: $(cat "$tmp/u")"
    fi
}
usage "'*' with --api-key" --api-key k --cors-origin '*'
check "'*' with a key: says why ($(cat "$tmp/u"))" grep -q "not with an API key" "$tmp/u"
GPT_API_KEY=k usage "'*' with \$GPT_API_KEY" --cors-origin '*'
usage "an origin with a path" --cors-origin http://example.com/
usage "an origin without a scheme" --cors-origin example.com
usage "an origin with a space" --cors-origin 'http://a b'
usage "an empty origin" --cors-origin ''
usage "no host" --cors-origin 'http://'

# ----------------------------------------------------------------------------
# curl: the headers
start "$tmp/a.log" -m "$MODEL" -t 2 --api-key "$KEY" --cors-origin http://example.com --cors-origin "$PAGE" ||
    { summary; exit 1; }
A=http://127.0.0.1:$port
# hdr NAME FILE: the header's value (the last, CR removed)
hdr() { tr -d '\r' < "$2" | sed -n "s/^$1: //Ip" | tail -n 1; }
st=$(curl -s -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' -X OPTIONS -H "Origin: $PAGE" \
    -H 'Access-Control-Request-Method: POST' \
    -H 'Access-Control-Request-Headers: authorization,content-type,x-stainless-os,X-Stainless-Retry-Count,x-stainless-os' \
    "$A/v1/completions")
check "preflight: 204 without a key (got $st)" [ "$st" = 204 ]
check "preflight: Allow-Origin is the origin ($(hdr Access-Control-Allow-Origin "$tmp/h"))" \
    [ "$(hdr Access-Control-Allow-Origin "$tmp/h")" = "$PAGE" ]
check "preflight: Vary: Origin" [ "$(hdr Vary "$tmp/h")" = Origin ]
check "preflight: the methods" [ "$(hdr Access-Control-Allow-Methods "$tmp/h")" = "GET, POST, OPTIONS" ]
check "preflight: the headers asked, once each ($(hdr Access-Control-Allow-Headers "$tmp/h"))" \
    [ "$(hdr Access-Control-Allow-Headers "$tmp/h")" = "Authorization, Content-Type, x-stainless-os, x-stainless-retry-count" ]
check "preflight: Max-Age" [ "$(hdr Access-Control-Max-Age "$tmp/h")" = 600 ]
check "preflight: no body" [ ! -s "$tmp/b" ]
st=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -X OPTIONS -H "Origin: http://example.com" \
    -H 'Access-Control-Request-Method: GET' "$A/v1/models/demo.bin")
check "preflight of /v1/models/ID, the other origin allowed: 204, its origin ($st)" \
    [ "$st:$(hdr Access-Control-Allow-Origin "$tmp/h"):$(hdr Access-Control-Allow-Headers "$tmp/h")" = \
      "204:http://example.com:Authorization, Content-Type" ]
# preflight STATUS WHAT ORIGIN [ACRH]: OPTIONS /v1/completions gets STATUS
preflight() {
    st=$(curl -s -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' -X OPTIONS ${3:+-H "Origin: $3"} \
        -H 'Access-Control-Request-Method: POST' ${4:+-H "Access-Control-Request-Headers: $4"} "$A/v1/completions")
    if [ "$st" = "$1" ]; then pass; else fail "$2: want $1, got $st $(head -c 300 "$tmp/b")"; fi
}
preflight 403 "preflight from another origin" http://evil.example
check "another origin: no CORS header" sh -c "! grep -qi '^access-control' '$tmp/h'"
check "another origin: OpenAI's error" jq -e '.error.message | test("--cors-origin")' "$tmp/b" > /dev/null
preflight 403 "an origin that only starts like an allowed one" "$PAGE"0
preflight 403 "an allowed origin with a last /" "$PAGE/"
preflight 405 "OPTIONS without an Origin"
check "OPTIONS without an Origin: no CORS header" sh -c "! grep -qi '^access-control' '$tmp/h'"
preflight 400 "Access-Control-Request-Headers of 2000 bytes" "$PAGE" "x-$(head -c 2000 /dev/zero | tr '\0' a)"
check "a request-headers list too long: says so, with Allow-Origin" \
    sh -c "jq -e '.error.message | test(\"at most 1024\")' '$tmp/b' > /dev/null && grep -qi '^access-control-allow-origin: $PAGE' '$tmp/h'"
preflight 400 "100 header names" "$PAGE" "$(seq -s , -f 'x-h%g' 1 100)"
preflight 400 "a header name with a colon" "$PAGE" "x-a:b"
preflight 400 "a header name with a slash" "$PAGE" "x-a/b, x-c"
preflight 400 "a header name with a byte past ASCII" "$PAGE" "$(printf 'x-\303\251')"
preflight 204 "spaces and empty names in the list" "$PAGE" " x-a ,, x-b ,"
check "spaces and empty names: the names alone ($(hdr Access-Control-Allow-Headers "$tmp/h"))" \
    [ "$(hdr Access-Control-Allow-Headers "$tmp/h")" = "Authorization, Content-Type, x-a, x-b" ]
st=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -X OPTIONS -H "Origin: $PAGE" "$A/v2/x")
check "a preflight to no endpoint: 404 with Allow-Origin ($st)" \
    [ "$st:$(hdr Access-Control-Allow-Origin "$tmp/h")" = "404:$PAGE" ]
# every answer to the allowed origin carries Allow-Origin; none to another
# ask STATUS WHAT ORIGIN CURL-ARGS...: the status, and Allow-Origin is ORIGIN's (or none: "-")
ask() {
    want=$1 what=$2 origin=$3
    shift 3
    st=$(curl -s -D "$tmp/h" -o "$tmp/b" -w '%{http_code}' -H "Origin: $origin" "$@")
    got=$(hdr Access-Control-Allow-Origin "$tmp/h")
    exp=$origin
    [ "$origin" = http://evil.example ] && exp=
    if [ "$st" = "$want" ] && [ "$got" = "$exp" ]; then pass
    else fail "$what: want $want with Allow-Origin '$exp', got $st with '$got' $(head -c 200 "$tmp/b")"
    fi
}
BODY='{"prompt":"Hello","max_tokens":20,"seed":1}'
for o in "$PAGE" http://evil.example; do
    ask 200 "completion from $o" "$o" -H "Authorization: Bearer $KEY" --data-binary "$BODY" "$A/v1/completions"
    ask 401 "no key from $o" "$o" --data-binary "$BODY" "$A/v1/completions"
    ask 400 "a bad value from $o" "$o" -H "Authorization: Bearer $KEY" --data-binary '{"prompt":"x","top_p":2}' \
        "$A/v1/completions"
    ask 404 "another model from $o" "$o" -H "Authorization: Bearer $KEY" "$A/v1/models/gpt-4"
    ask 405 "GET /v1/completions from $o" "$o" -H "Authorization: Bearer $KEY" "$A/v1/completions"
    ask 200 "/health from $o" "$o" "$A/health"
    ask 200 "a stream from $o" "$o" -H "Authorization: Bearer $KEY" \
        --data-binary '{"prompt":"Hello","max_tokens":20,"seed":1,"stream":true}' "$A/v1/completions"
done
check "a request without Origin: no CORS header" \
    sh -c "curl -s -D - -o /dev/null '$A/health' | grep -qi '^access-control' && exit 1 || exit 0"
"$GPT" -m "$MODEL" -p Hello -n 20 -s 1 --json > "$tmp/e" 2> /dev/null
curl -s -o "$tmp/r" -H "Origin: $PAGE" -H "Authorization: Bearer $KEY" --data-binary "$BODY" "$A/v1/completions"
same_as_cli "a completion from the allowed origin" "$tmp/r" "$tmp/e"

# ----------------------------------------------------------------------------
# the browser
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
export CHROMIUM
for tool in "$CHROMIUM" node python3; do
    command -v "$tool" > /dev/null 2>&1 || skip "${tool:-chromium} is not installed: the browser part"
done
mkdir "$tmp/www"
cp tests/serve/cors_page.html "$tmp/www/index.html"
(cd "$tmp/www" && exec python3 -u -m http.server 0 --bind 127.0.0.1) > "$tmp/www.log" 2>&1 &
pids="$pids $!"
i=0
web=
while [ $i -lt 100 ] && [ -z "$web" ]; do
    web=$(sed -n 's|^Serving HTTP on 127\.0\.0\.1 port \([0-9]*\) .*|\1|p' "$tmp/www.log")
    [ -n "$web" ] || sleep 0.1
    i=$((i + 1))
done
[ -n "$web" ] || { fail "python3 -m http.server did not start: $(cat "$tmp/www.log")"; summary; exit 1; }
ORIGIN=http://127.0.0.1:$web
start "$tmp/b.log" -m "$MODEL" -t 1 --api-key "$KEY" --cors-origin http://example.com --cors-origin "$ORIGIN" ||
    { summary; exit 1; }
ALLOWED=http://127.0.0.1:$port
start "$tmp/c.log" -m "$MODEL" -t 1 --api-key "$KEY" --cors-origin http://example.com || { summary; exit 1; }
OTHER=http://127.0.0.1:$port
start "$tmp/d.log" -m "$MODEL" -t 1 --cors-origin '*' || { summary; exit 1; }
ANY=http://127.0.0.1:$port
PROMPT="The LORD said unto Moses"
cfg=$(jq -cn --arg a "$ALLOWED" --arg o "$OTHER" --arg any "$ANY" --arg k "$KEY" --arg p "$PROMPT" \
    '{allowed: $a, other: $o, any: $any, key: $k, model: "demo.bin", prompt: $p, max_tokens: 24, seed: 7}')
if ! TMPDIR=$tmp node tests/serve/cors_browser.mjs "$ORIGIN/" "$cfg" > "$tmp/out" 2> "$tmp/driver"; then
    fail "the browser run failed: $(tail -n 5 "$tmp/driver" | tr '\n' ' ')"
    summary
    exit 1
fi
"$GPT" -m "$MODEL" -p "$PROMPT" -n 24 -s 7 --json > "$tmp/e" 2> /dev/null
r() { jq -c ".result.$1" "$tmp/out"; }
check "browser: the model ($(r model))" [ "$(r 'model | [.status, (.body | fromjson | .id)]')" = '[200,"demo.bin"]' ]
check "browser: another model is a 404 it can read ($(r no_model))" \
    [ "$(r 'no_model | [.status, (.body | fromjson | .error.code)]')" = '[404,"model_not_found"]' ]
check "browser: a completion, the command's text ($(r completion.status))" \
    [ "$(r 'completion.body | fromjson | .choices[0].text')" = "$(jq -c .text "$tmp/e")" ]
check "browser: a stream, the command's text ($(r stream))" \
    [ "$(r 'stream | [.status, .text, .done]')" = "[200,$(jq -c .text "$tmp/e"),true]" ]
check "browser: the stream's usage is the completion's ($(r stream.usage))" \
    [ "$(r stream.usage)" = "$(r 'completion.body | fromjson | .usage')" ]
check "browser: a wrong key is a 401 it can read ($(r wrong_key.status))" \
    [ "$(r 'wrong_key | [.status, (.body | fromjson | .error.code)]')" = '[401,"invalid_api_key"]' ]
check "browser: a bad value is a 400 it can read" \
    [ "$(r 'bad_value | [.status, (.body | fromjson | .error.param)]')" = '[400,"top_p"]' ]
check "browser: /health" [ "$(r health.status)" = 200 ]
check "browser: another origin's server blocks a preflighted request ($(r other))" \
    sh -c "jq -e '.result.other.blocked | test(\"TypeError\")' '$tmp/out' > /dev/null"
check "browser: and a simple one ($(r other_simple))" \
    sh -c "jq -e '.result.other_simple.blocked | test(\"TypeError\")' '$tmp/out' > /dev/null"
check "browser: '*' without a key ($(r any.status))" \
    [ "$(r 'any | [.status, (.body | fromjson | .choices[0].text)]')" = "[200,$(jq -c .text "$tmp/e")]" ]
st=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -H "Origin: $ORIGIN" "$ANY/health")
check "'*': Allow-Origin * and no Vary ($st)" \
    [ "$st:$(hdr Access-Control-Allow-Origin "$tmp/h"):$(hdr Vary "$tmp/h")" = "200:*:" ]
check "browser: the blocks are CORS's ($(jq -c '.errors' "$tmp/out" | head -c 400))" \
    [ "$(jq '[.errors[] | select(test("CORS policy"))] | length' "$tmp/out")" -ge 2 ]
# the servers' log: the preflights answered 204 without a key
check "the preflights were answered 204" grep -q '"method":"OPTIONS","path":"/v1/completions","status":204' "$tmp/b.log"
check "the other origin's preflight: 403" grep -q '"method":"OPTIONS","path":"/v1/completions","status":403' "$tmp/c.log"
summary

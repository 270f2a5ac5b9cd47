#!/bin/sh
# cli_serve_page.sh - gpt serve's page at / in a real browser: headless
# Chromium driven over the DevTools protocol by tests/cli_serve_page.mjs
# (Node's own modules) on a free loopback port:
#   - GET / is src/serve/page.html, as text/html, with a
#     Content-Security-Policy that forbids loading from elsewhere (and the
#     browser, asked to, refuses a fetch and a script from another origin);
#     it needs no key (the page asks for one); POST / is a 405;
#   - a prompt, its settings and a seed typed into the page: the text it
#     streams equals the API's answer and `gpt -p PROMPT -s SEED` with the
#     same options; its stats line has the tokens, tokens/s, the seed and
#     the KV bytes of the positions `gpt --json` says the cache held; with no seed, the seed it shows repeats its text with
#     the command; a value out of range shows the API's 400 message;
#   - with a key, the page shows the API key field and names no model until
#     a key is typed (its probe of GET /v1/models is a 401), then the model;
#   - without a key (a second server), it names the model as soon as it has
#     loaded and hides the field; a stop string typed as "\n" and log-probs
#     2: the text is `gpt --stop "\n"`'s and the log-probs table's tokens,
#     numbers and alternatives are `gpt --logprobs 2 --json`'s, bit for bit;
#   - a screenshot of each run (in a scratch directory, removed after, as
#     is the browser profile: the driver makes it under TMPDIR=that directory).
# Without chromium or node it prints "cli_serve_page: SKIPPED (reason)" and
# passes, unless GPT_TEST_REQUIRE_ALL=1.
# Prints "cli_serve_page: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), CHROMIUM (default: chromium on PATH).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
CHECK_NAME=cli_serve_page
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
# shellcheck source=tests/serve/ready.sh
. tests/serve/ready.sh
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT

CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
export CHROMIUM
missing=
for tool in "$CHROMIUM" node curl jq; do
    command -v "$tool" > /dev/null 2>&1 || missing="$missing ${tool:-chromium}"
done
[ -z "$missing" ] || skip "not installed:$missing"

check() {
    what=$1
    shift
    if "$@"; then pass; else fail "$what"; fi
}

# serve ARGS...: gpt serve on a free port (sets $pid, $url), or the end
serve() {
    : > "$tmp/log"
    "$GPT" serve --port 0 -m "$MODEL" -t 1 "$@" 2> "$tmp/log" &
    pid=$!
    if ! wait_serving "$tmp/log" "$pid"; then
        fail "gpt serve did not start: $(cat "$tmp/log")"
        summary
        exit 1
    fi
    url=http://127.0.0.1:$port
}

KEY=page-key-1
serve --api-key "$KEY"

# the page as served
status=$(curl -s -D "$tmp/h" -o "$tmp/page" -w '%{http_code}' "$url/")
check "GET / without the key: 200 (got $status)" [ "$status" = 200 ]
check "GET / is src/serve/page.html" cmp -s "$tmp/page" src/serve/page.html
check "GET /'s Content-Type" grep -qi '^Content-Type: text/html; charset=utf-8' "$tmp/h"
check "GET /'s Content-Security-Policy" grep -qi "^Content-Security-Policy: default-src 'none';.* connect-src 'self';" \
    "$tmp/h"
check "GET /'s policy allows no source beyond the page and the server" \
    sh -c "! grep -i '^Content-Security-Policy' '$tmp/h' | grep -qiE 'http|\\*'"
status=$(curl -s -D "$tmp/h" -o /dev/null -w '%{http_code}' -X POST "$url/")
check "POST /: 405 (got $status)" [ "$status" = 405 ]
check "POST /: Allow: GET" grep -qi '^Allow: GET' "$tmp/h"

# expected OUT OPTIONS...: gpt's --json for the options, in OUT
expected() {
    out=$1
    shift
    "$GPT" -m "$MODEL" "$@" --json > "$out" 2> /dev/null || fail "gpt $* failed"
}
# api OUT BODY: the API's answer (not streamed)
api() {
    curl -s -o "$1" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' --data-binary "$2" \
        "$url/v1/completions"
}

P1="The LORD said unto Moses"
P2="Call me Ishmael. Some years ago"
cases=$(jq -cn --arg p1 "$P1" --arg p2 "$P2" --arg key "$KEY" '[
    {key: $key, prompt: $p1, max_tokens: "30", temperature: "0.8", top_p: "0.95", top_k: "40", seed: "7"},
    {prompt: $p2, max_tokens: "40", temperature: "1", top_p: "1", top_k: "0", seed: ""},
    {prompt: "", max_tokens: "12", temperature: "0", top_k: "0", seed: "3"},
    {prompt: $p1, temperature: "-1"}]')
mkdir "$tmp/shots"
if ! TMPDIR=$tmp node tests/cli_serve_page.mjs "$url/" "$cases" "$tmp/shots" > "$tmp/runs" 2> "$tmp/driver"; then
    # the driver's own message, else the end of what node or chromium said
    fail "the browser run failed: $(grep "^cli_serve_page.mjs:" "$tmp/driver" || tail -n 3 "$tmp/driver" | tr '\n' ' ')"
    summary
    exit 1
fi
run() { jq -r ".runs[$1].$2" "$tmp/runs"; }

# with a key: the field shown, no model named until a key is typed
check "with a key, on load: the key field shown, no model named ($(jq -c .loaded "$tmp/runs"))" \
    [ "$(jq -c .loaded "$tmp/runs")" = '{"key":"needed","model":"","key_hidden":false}' ]
check "with the key typed: the model named ($(run 0 model))" [ "$(run 0 model)" = demo.bin ]

# 0: a seed; the text shown is the API's and the command's
expected "$tmp/e0" -p "$P1" -n 30 --temp 0.8 --top-p 0.95 --top-k 40 -s 7
api "$tmp/a0" "$(jq -cn --arg p "$P1" '{prompt: $p, max_tokens: 30, temperature: 0.8, top_p: 0.95, top_k: 40,
                                         seed: 7}')"
check "run 0 ended (state $(run 0 state), error '$(run 0 error)')" [ "$(run 0 state)" = "done" ]
check "run 0's text is the API's" [ "$(jq -c '.runs[0].text' "$tmp/runs")" = "$(jq -c '.choices[0].text' "$tmp/a0")" ]
check "run 0's text is gpt's: $(jq -c '.runs[0].text' "$tmp/runs") vs $(jq -c .text "$tmp/e0")" \
    [ "$(jq -c '.runs[0].text' "$tmp/runs")" = "$(jq -c .text "$tmp/e0")" ]
stats=$(run 0 stats)
check "run 0's stats: the tokens ($stats)" sh -c "echo '$stats' | grep -q '^$(jq '.tokens | length' "$tmp/e0") tokens in '"
check "run 0's stats: tokens/s, the seed, the finish" \
    sh -c "echo '$stats' | grep -q ' tokens/s, first after [0-9]* ms; seed 7; finish_reason length;'"
# the KV bytes: the positions the command's --json says the cache held (the
# last token sampled is never run through the model: one less than prompt +
# generated) x /metrics' bytes per position
per=$(curl -s -H "Authorization: Bearer $KEY" "$url/metrics" | sed -n 's/^gpt_kv_bytes_per_token //p')
positions=$(($(jq '.stats.seq_tokens' "$tmp/e0")))
check "the API's seq_tokens ($(jq '.choices[0].seq_tokens' "$tmp/a0")) is the command's ($positions)" \
    [ "$(jq '.choices[0].seq_tokens' "$tmp/a0")" = "$positions" ]
check "run 0's stats: KV bytes $positions x $per" \
    sh -c "echo '$stats' | grep -q 'KV cache [0-9,]* bytes ($positions positions x $per)\$'"
kv=$(echo "$stats" | sed -n 's/.*KV cache \([0-9,]*\) bytes.*/\1/p' | tr -d ,)
check "run 0's KV bytes: $kv" [ "${kv:-0}" = $((positions * per)) ]

# 1: no seed: the one drawn, shown, repeats the text with the command
seed=$(run 1 stats | sed -n 's/.*; seed \([0-9]*\);.*/\1/p')
check "run 1 ended ($(run 1 error))" [ "$(run 1 state)" = "done" ]
check "run 1 shows the seed drawn ($(run 1 stats))" [ -n "$seed" ]
expected "$tmp/e1" -p "$P2" -n 40 --temp 1 --top-p 1 --top-k 0 -s "${seed:-0}"
check "run 1's text is gpt -s $seed's" [ "$(jq -c '.runs[1].text' "$tmp/runs")" = "$(jq -c .text "$tmp/e1")" ]

# 2: the empty prompt, greedy
expected "$tmp/e2" -p "" -n 12 --temp 0 -s 3
check "run 2 (an empty prompt) ended" [ "$(run 2 state)" = "done" ]
check "run 2's text is gpt's" [ "$(jq -c '.runs[2].text' "$tmp/runs")" = "$(jq -c .text "$tmp/e2")" ]

# 3: a bad value: the API's message, no text
api "$tmp/a3" "$(jq -cn --arg p "$P1" '{prompt: $p, temperature: -1}')"
check "run 3 shows the error: $(run 3 error)" [ "$(run 3 error)" = "400: $(jq -r .error.message "$tmp/a3")" ]
check "run 3 ended in error" [ "$(run 3 state)" = error ]

# the policy, in the browser, and nothing else went wrong
check "the browser refused another origin: $(jq -c .violations "$tmp/runs")" \
    [ "$(jq -c .violations "$tmp/runs")" = '["connect-src","script-src-elem"]' ]
check "the page logged no errors but the probe's 401 and run 3's 400: $(jq -c .errors "$tmp/runs")" \
    [ "$(jq '[.errors[] | select(test("status of 40[01]") | not)] | length' "$tmp/runs")" = 0 ]
n=0
for f in "$tmp"/shots/*.png; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '211PNG' ] && [ "$(wc -c < "$f")" -gt 5000 ] && n=$((n + 1))
done
check "a screenshot of each run ($n)" [ "$n" = 4 ]
[ -n "${GPT_PAGE_SHOTS:-}" ] && cp "$tmp"/shots/*.png "$GPT_PAGE_SHOTS"/  # to look at them

kill "$pid"
wait "$pid"
check "gpt serve exits 0 on SIGTERM" [ $? = 0 ]
pid=

# without a key: the model named on load, no key field; stop and log-probs
serve
cases=$(jq -cn --arg p1 "$P1" '[{prompt: $p1, max_tokens: "40", temperature: "0.8", top_p: "1", top_k: "40",
                                 seed: "8", stop_text: "\\n", logprobs: "2"}]')
mkdir "$tmp/shots2"
if ! TMPDIR=$tmp node tests/cli_serve_page.mjs "$url/" "$cases" "$tmp/shots2" > "$tmp/runs" 2> "$tmp/driver"; then
    fail "the browser run without a key failed: $(grep "^cli_serve_page.mjs:" "$tmp/driver" || tail -n 3 "$tmp/driver" | tr '\n' ' ')"
    summary
    exit 1
fi
check "without a key, on load: the model named, the key field hidden ($(jq -c .loaded "$tmp/runs"))" \
    [ "$(jq -c .loaded "$tmp/runs")" = '{"key":"none","model":"demo.bin","key_hidden":true}' ]
"$GPT" -m "$MODEL" -p "$P1" -n 40 --temp 0.8 --top-p 1 --top-k 40 -s 8 --stop '\n' --logprobs 2 --json \
    > "$tmp/e4" 2> /dev/null || fail "gpt --stop --logprobs failed"
check "stop \\n: the text is gpt --stop's ($(jq -c '.runs[0].text' "$tmp/runs"), gpt $(jq -c .text "$tmp/e4"))" \
    [ "$(jq -c '.runs[0].text' "$tmp/runs")" = "$(jq -c .text "$tmp/e4")" ]
check "stop \\n: finish_reason stop ($(run 0 stats))" sh -c "echo '$(run 0 stats)' | grep -q 'finish_reason stop;'"
check "log-probs 2: the table is gpt --logprobs 2's ($(jq -c '.runs[0].logprobs' "$tmp/runs" | head -c 300))" \
    [ "$(jq -c '.runs[0].logprobs' "$tmp/runs")" = \
      "$(jq -c '[.logprobs.tokens, .logprobs.token_logprobs, .logprobs.top_logprobs] | transpose' "$tmp/e4")" ]
check "log-probs 2: as many rows as tokens ($(jq '.tokens | length' "$tmp/e4"))" \
    [ "$(jq '.runs[0].logprobs | length' "$tmp/runs")" = "$(jq '.tokens | length' "$tmp/e4")" ]
check "without a key the page logged no errors: $(jq -c .errors "$tmp/runs")" [ "$(jq '.errors | length' "$tmp/runs")" = 0 ]
kill "$pid"
wait "$pid"
check "the second gpt serve exits 0 on SIGTERM" [ $? = 0 ]
pid=
summary

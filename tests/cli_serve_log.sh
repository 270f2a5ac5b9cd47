#!/bin/sh
# cli_serve_log.sh - gpt serve's request log (--log) and its latency
# histograms in /metrics, on free loopback ports:
#   - --log FILE: a JSON line per request appended there (time, method,
#     path, status, seconds, the tokens), none on stderr; --log -: on
#     stdout; --log off: nowhere; a file that cannot be opened: exit 1
#     naming it; --log '': exit 2;
#   - /metrics' histograms (gpt_time_to_first_token_seconds,
#     gpt_inter_token_latency_seconds, gpt_e2e_request_latency_seconds,
#     gpt_request_queue_time_seconds) in Prometheus' form: cumulative
#     _bucket{le=...} lines ending at +Inf, _sum and _count; after a known
#     set of requests each _count is what they make (a first token per
#     choice, max_tokens - 1 gaps per choice, one per request, one wait
#     per choice).
# Prints "cli_serve_log: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
CHECK_NAME=cli_serve_log
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need curl jq

# lines_within N FILE: up to 10 s for FILE to hold N JSON lines (a request's
# line is written once its answer is sent); 0 when it does
lines_within() {
    i=0
    while [ $i -lt 100 ]; do
        [ "$(grep -c '^{"time":' "$2" 2> /dev/null)" -ge "$1" ] && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}

# ----------------------------------------------------------------------------
# --log FILE, and the histograms of a known set of requests
start "$tmp/a.log" -m "$MODEL" -t 2 --log "$tmp/requests.log" || { summary; exit 1; }
post /v1/completions '{"prompt":"Hello","max_tokens":5,"ignore_eos":true,"seed":1}' "$tmp/r" > /dev/null
post /v1/completions '{"prompt":"Hello","max_tokens":5,"ignore_eos":true,"seed":1,"n":2}' "$tmp/r" > /dev/null
post /v1/completions '{"prompt":"Hello","max_tokens":5,"ignore_eos":true,"seed":1,"stream":true}' "$tmp/r" > /dev/null
post /v1/completions '{"prompt":"Hello","max_tokens":0,"seed":1}' "$tmp/r" > /dev/null
get /health "$tmp/r" > /dev/null
get /metrics "$tmp/m" > /dev/null
check "--log FILE: the five lines before /metrics" lines_within 5 "$tmp/requests.log"
check "--log FILE: nothing on stderr" sh -c "! grep -q '^{' '$tmp/a.log'"
check "--log FILE: each line's fields ($(head -n 1 "$tmp/requests.log"))" \
    jq -s -e 'all(has("time") and has("method") and has("path") and has("status") and has("seconds") and has("completed"))
              and ([.[] | select(.path == "/v1/completions")] | length == 4 and
                   all(has("prompt_tokens") and has("completion_tokens")))
              and ([.[] | select(.path == "/v1/completions") | .completion_tokens] == [5, 10, 5, 0])' \
    "$tmp/requests.log" > /dev/null
# count NAME: the histogram's _count
count() { sed -n "s/^$1_count \([0-9]*\)$/\1/p" "$tmp/m"; }
check "first tokens: one per choice, 4 ($(count gpt_time_to_first_token_seconds))" \
    [ "$(count gpt_time_to_first_token_seconds)" = 4 ]
check "gaps between tokens: 4 per choice of 5, 16 ($(count gpt_inter_token_latency_seconds))" \
    [ "$(count gpt_inter_token_latency_seconds)" = 16 ]
check "requests: 4 ($(count gpt_e2e_request_latency_seconds))" [ "$(count gpt_e2e_request_latency_seconds)" = 4 ]
check "waits: one per choice, 5 ($(count gpt_request_queue_time_seconds))" \
    [ "$(count gpt_request_queue_time_seconds)" = 5 ]
for h in gpt_time_to_first_token_seconds gpt_inter_token_latency_seconds gpt_e2e_request_latency_seconds \
    gpt_request_queue_time_seconds; do
    check "$h: HELP and TYPE histogram" grep -q "^# TYPE $h histogram\$" "$tmp/m"
    # the buckets: 16 bounds rising, counts not falling, +Inf last and equal to _count; _sum > 0
    check "$h: Prometheus' form ($(grep "^$h" "$tmp/m" | tr '\n' ' ' | head -c 300))" awk -v h="$h" '
        index($0, h "_bucket{le=\"") == 1 {
            split($0, a, "\""); le = a[2]; n = $2
            if (inf || n < last || (le != "+Inf" && buckets && le + 0 <= bound)) bad = 1
            if (le == "+Inf") { inf = 1; total = n } else { bound = le + 0; buckets++ }
            last = n
        }
        $1 == h "_sum" { sum = $2 }
        $1 == h "_count" { count = $2 }
        END { exit !(inf && !bad && buckets == 16 && total == count && count > 0 && sum > 0) }' "$tmp/m"
done
check "the first token came before the request ended: sums" awk '
    $1 == "gpt_time_to_first_token_seconds_sum" { f = $2 } $1 == "gpt_e2e_request_latency_seconds_sum" { e = $2 }
    END { exit !(f > 0 && f <= e * 2) }' "$tmp/m"
kill -TERM "$pid"
wait "$pid"
check "--log FILE: exit 0" [ $? = 0 ]
# appended: a second server adds to the same file
start "$tmp/a2.log" -m "$MODEL" -t 1 --log "$tmp/requests.log" || { summary; exit 1; }
get /health "$tmp/r" > /dev/null
check "--log FILE: appended (6 lines)" lines_within 6 "$tmp/requests.log"
kill -TERM "$pid"
wait "$pid"

# --log -: stdout; --log off: nowhere
start "$tmp/b.log" -m "$MODEL" -t 1 --log - > "$tmp/b.out" || { summary; exit 1; }
get /health "$tmp/r" > /dev/null
check "--log -: on stdout" lines_within 1 "$tmp/b.out"
check "--log -: not on stderr" sh -c "! grep -q '^{' '$tmp/b.log'"
kill -TERM "$pid"
wait "$pid"
start "$tmp/c.log" -m "$MODEL" -t 1 --log off > "$tmp/c.out" || { summary; exit 1; }
get /health "$tmp/r" > /dev/null
get /metrics "$tmp/m" > /dev/null
check "--log off: the requests were answered" grep -q '^gpt_requests_total{status="200"} 1$' "$tmp/m"
kill -TERM "$pid"
wait "$pid"
check "--log off: no line anywhere" sh -c "! grep -q '^{' '$tmp/c.log' '$tmp/c.out'"

# errors
"$GPT" serve --port 0 -m "$MODEL" --log "$tmp/no/such/dir/log" 2> "$tmp/u"
rc=$?
check "--log in no directory: exit 1, one line naming it (got $rc: $(cat "$tmp/u"))" \
    sh -c "[ $rc = 1 ] && [ \$(wc -l < '$tmp/u') = 1 ] && grep -q -- '--log $tmp/no/such/dir/log: No such file' '$tmp/u'"
"$GPT" serve --port 0 -m "$MODEL" --log '' 2> "$tmp/u"
rc=$?
check "--log '': exit 2 ($rc: $(cat "$tmp/u"))" sh -c "[ $rc = 2 ] && grep -q -- '--log' '$tmp/u'"
summary

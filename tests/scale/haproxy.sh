#!/bin/sh
# haproxy.sh - scale-out on an existing load balancer (`make test-scale`):
# two `gpt serve` processes on free loopback ports behind haproxy (a config
# generated in a scratch directory: round-robin, health checks on /health,
# a failed or empty answer retried on the other server), and
#   - 100 seeded requests through haproxy, 8 at a time, with a mix of
#     prompts and settings: every answer's tokens and text equal to
#     `gpt --batch --jsonl` on the same lines (each line's result is
#     `gpt -p PROMPT -s SEED`'s; one batch run keeps this fast);
#   - one server killed (SIGKILL) once 30 answers are in: the requests it
#     held and those sent after are answered by the other, still equal;
#   - both servers answered some, haproxy's health check saw the one die.
# Nothing here reaches beyond 127.0.0.1. Without haproxy, curl or jq it prints
# "scale_haproxy: SKIPPED (reason)" and passes, unless GPT_TEST_REQUIRE_ALL=1.
# Prints "scale_haproxy: N passed, M failed".
# Environment: GPT (default build/gpt).
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
CHECK_NAME=scale_haproxy
N=100
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
# shellcheck source=tests/serve/ready.sh
. tests/serve/ready.sh
pids=""
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT

check() {
    what=$1
    shift
    if "$@"; then pass; else fail "$what"; fi
}

missing=
for tool in haproxy curl jq; do
    command -v "$tool" > /dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
    echo "scale_haproxy: SKIPPED (not installed:$missing)"
    [ "${GPT_TEST_REQUIRE_ALL:-0}" = 1 ] && fail "GPT_TEST_REQUIRE_ALL=1 and$missing missing"
    summary
    exit $?
fi

# serve NAME: gpt serve --port 0 in the background, its stderr in
# $tmp/NAME.log; sets $pid and $port once its ready line is there
serve() {
    : > "$tmp/$1.log"
    "$GPT" serve --port 0 -m "$MODEL" -t 1 --parallel 16 2> "$tmp/$1.log" &
    pid=$!
    pids="$pids $pid"
    wait_serving "$tmp/$1.log" "$pid" || { fail "gpt serve did not start: $(cat "$tmp/$1.log")"; summary; exit 1; }
}
serve a
A_PID=$pid A_PORT=$port
serve b
B_PID=$pid B_PORT=$port

# haproxy on a free port: one picked at random, another if it is taken
tries=0
hport=
while [ $tries -lt 10 ] && [ -z "$hport" ]; do
    p=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
    cat > "$tmp/haproxy.cfg" << CFG
global
    maxconn 256
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # a completion with a seed is the same answer wherever it runs: a request
    # whose server went away is sent again, to the other server
    retries 3
    retry-on conn-failure empty-response response-timeout
    option redispatch 1
frontend gpt_front
    bind 127.0.0.1:$p
    stats enable
    stats uri /haproxy-stats
    default_backend gpt_servers
backend gpt_servers
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    server a 127.0.0.1:$A_PORT check inter 500ms fall 1 rise 1
    server b 127.0.0.1:$B_PORT check inter 500ms fall 1 rise 1
CFG
    haproxy -db -f "$tmp/haproxy.cfg" > "$tmp/haproxy.log" 2>&1 &
    h_pid=$!
    i=0
    while [ $i -lt 50 ] && kill -0 "$h_pid" 2> /dev/null; do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p/health")" = 200 ]; then
            hport=$p
            break
        fi
        sleep 0.1
        i=$((i + 1))
    done
    if [ -z "$hport" ]; then
        kill -9 "$h_pid" 2> /dev/null
        wait "$h_pid" 2> /dev/null
    fi
    tries=$((tries + 1))
done
pids="$pids $h_pid"
if [ -z "$hport" ]; then
    fail "haproxy did not start: $(cat "$tmp/haproxy.log")"
    summary
    exit 1
fi
pass

# the requests: a --batch --jsonl line each, which is also the request's body
prompts="Hello|The LORD said unto Moses|Call me Ishmael.|And it came to pass|In the beginning|It was the best of times"
awk -v n="$N" -v prompts="$prompts" 'BEGIN {
    np = split(prompts, p, "|")
    split("0.7 1 0 0.9", temp, " ")
    split("0 40 5", topk, " ")
    for (i = 0; i < n; i++)
        printf "{\"prompt\":\"%s\",\"seed\":%d,\"max_tokens\":%d,\"temperature\":%s,\"top_k\":%s}\n",
               p[i % np + 1], 1000 + i, 8 + (i * 7) % 33, temp[i % 4 + 1], topk[i % 3 + 1]
}' > "$tmp/requests.jsonl"
mkdir "$tmp/req" "$tmp/resp" "$tmp/code"
awk -v dir="$tmp/req" '{ print > (dir "/" (NR - 1)); close(dir "/" (NR - 1)) }' "$tmp/requests.jsonl"
"$GPT" -m "$MODEL" --batch --jsonl -t 1 < "$tmp/requests.jsonl" > "$tmp/expected.jsonl" 2> "$tmp/batch.err" ||
    fail "gpt --batch failed: $(cat "$tmp/batch.err")"

# 8 clients at once; each answer's status is written when it is whole
t0=$(date +%s)
seq 0 $((N - 1)) | xargs -P 8 -I{} sh -c \
    'c=$(curl -s --max-time 60 -o "$1/resp/$2" -w "%{http_code}" -H "Content-Type: application/json" \
         --data-binary @"$1/req/$2" "http://127.0.0.1:$3/v1/completions"); echo "$c" > "$1/code/$2"' \
    sh "$tmp" {} "$hport" &
clients=$!
# once 30 are answered, one server dies
i=0
while [ "$(ls "$tmp/code" | wc -l)" -lt 30 ] && [ $i -lt 600 ]; do
    sleep 0.05
    i=$((i + 1))
done
kill -9 "$A_PID"
killed_at=$(ls "$tmp/code" | wc -l)
wait "$clients"
seconds=$(($(date +%s) - t0))

ok=$(cat "$tmp"/code/* | grep -c '^200$')
check "$N answers through haproxy: $ok were 200 ($(cat "$tmp"/code/* | sort | uniq -c | tr '\n' ' '))" [ "$ok" = "$N" ]
files=$(seq 0 $((N - 1)) | sed "s|^|$tmp/resp/|")
# shellcheck disable=SC2086 # one file name a word
jq -c '[.choices[0].text, .choices[0].tokens]' $files > "$tmp/got" 2> /dev/null
jq -c '[.text, .tokens]' "$tmp/expected.jsonl" > "$tmp/want"
same=$(paste -d '\n' "$tmp/got" "$tmp/want" | awk 'NR % 2 { g = $0; next } g == $0 { n++ } END { print n + 0 }')
check "every answer is gpt --batch's: $same of $N" [ "$same" = "$N" ]
if [ "$same" != "$N" ]; then
    paste -d '|' "$tmp/got" "$tmp/want" | awk -F'|' '$1 != $2 { print "  got  " $1; print "  want " $2; exit }'
fi
# a server logs a request just after its answer is sent: polled until the
# two logs hold N answers, at most 30 s
i=0
while [ $i -lt 300 ]; do
    a=$(grep -c '"path":"/v1/completions","status":200' "$tmp/a.log")
    b=$(grep -c '"path":"/v1/completions","status":200' "$tmp/b.log")
    [ $((a + b)) -ge "$N" ] && break
    sleep 0.1
    i=$((i + 1))
done
check "server a answered before the kill ($a)" [ "$a" -gt 0 ]
check "server b answered ($b)" [ "$b" -gt 0 ]
check "the other server answered the rest: a $a + b $b >= $N" [ $((a + b)) -ge "$N" ]
check "killed with $killed_at of $N answered: midway" [ "$killed_at" -lt "$N" ]

# haproxy's health check saw a go (its statistics, as CSV: svname is field
# 2, wretr 16, wredis 17, status 18)
# (checked every 500 ms: polled until a is DOWN, at most 30 s)
field() { awk -F, -v s="$1" -v f="$2" '$1 == "gpt_servers" && $2 == s { print $f }' "$tmp/stats.csv"; }
i=0
while [ $i -lt 300 ]; do
    curl -s "http://127.0.0.1:$hport/haproxy-stats;csv" > "$tmp/stats.csv"
    [ "$(field a 18)" = DOWN ] && break
    sleep 0.1
    i=$((i + 1))
done
check "haproxy has a DOWN ($(field a 18)), b UP ($(field b 18))" \
    [ "$(field a 18)/$(field b 18)" = DOWN/UP ]
echo "scale_haproxy: $N requests in ${seconds} s, server a killed after $killed_at answers; a answered $a, b $b;" \
     "haproxy retried $(field BACKEND 16) and redispatched $(field BACKEND 17)"

kill "$B_PID" "$h_pid"
wait "$B_PID"
check "gpt serve b exits 0 on SIGTERM" [ $? = 0 ]
summary

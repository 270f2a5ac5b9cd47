# lib.sh - what the tests/cli_serve*.sh scripts share, sourced with
# CHECK_NAME and GPT set: checklib.sh's counters and $tmp, the servers they
# start (killed on exit), and requests with curl. $KEY, when set, is sent
# as the API key; $port is the last server's.
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
# shellcheck source=tests/serve/ready.sh
. tests/serve/ready.sh
pids=""
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT


# start LOG ARGS...: gpt serve --port 0 ARGS in the background, stderr into
# LOG; waits for its ready line. Sets $pid and $port; 1 if it never came.
start() {
    log=$1
    shift
    : > "$log"
    "$GPT" serve --port 0 "$@" 2> "$log" &
    pid=$!
    pids="$pids $pid"
    wait_serving "$log" "$pid" && return 0
    fail "gpt serve $* did not start: $(cat "$log")"
    return 1
}

# check WHAT COMMAND...: pass if the command succeeds, else fail WHAT
check() {
    what=$1
    shift
    if "$@"; then pass; else fail "$what"; fi
}

# post PATH BODY OUT: POST with the key, the body to OUT; prints the status
post() {
    curl -s -o "$3" -w '%{http_code}' -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
        --data-binary "$2" "http://127.0.0.1:$port$1"
}
get() {
    curl -s -o "$2" -w '%{http_code}' -H "Authorization: Bearer $KEY" "http://127.0.0.1:$port$1"
}

# same_as_cli WHAT RESPONSE EXPECTED [CHOICE]: the choice's tokens, text,
# stop_reason, seq_tokens (the positions its cache held) and logprobs (null
# without --logprobs) are gpt's, and its finish_reason is OpenAI's name for
# the stop_reason (man gpt: eos, stop -> "stop"; length, context ->
# "length"); jq reads the numbers as doubles, so they are compared bit for bit
same_as_cli() {
    k=${4:-0}
    got=$(jq -c "[.choices[$k].tokens, .choices[$k].text, .choices[$k].finish_reason, .choices[$k].stop_reason,
                  .choices[$k].seq_tokens, .choices[$k].logprobs]" "$2" 2> /dev/null)
    want=$(jq -c '[.tokens, .text, ({eos: "stop", stop: "stop", length: "length", context: "length"}[.stop_reason]),
                   .stop_reason, .stats.seq_tokens, .logprobs]' "$3")
    if [ -n "$got" ] && [ "$got" = "$want" ]; then pass
    else fail "$1: the server gave $(head -c 600 "$2"), gpt gave $want"
    fi
}

# stream_as_one SSE: the events of a stream read back as one response (the
# texts, tokens and logprobs of choice 0 joined, the last finish_reason)
stream_as_one() {
    sed -n 's/^data: //p' "$1" | grep -v '^\[DONE\]$' |
        jq -cs '{choices: [{tokens: [.[].choices[0].tokens[]], text: (map(.choices[0].text) | join("")),
                 finish_reason: (map(.choices[0].finish_reason | select(. != null)) | last),
                 stop_reason: (map(.choices[0].stop_reason | select(. != null)) | last),
                 seq_tokens: (map(.choices[0].seq_tokens | select(. != null)) | last),
                 logprobs: (map(.choices[0].logprobs | select(. != null)) |
                            if length == 0 then null
                            else {tokens: map(.tokens[]), token_logprobs: map(.token_logprobs[]),
                                  top_logprobs: map(.top_logprobs[]), text_offset: map(.text_offset[]),
                                  token_ids: map(.token_ids[]), top_ids: map(.top_ids[])} end)}]}'
}

# load N OUT BODY: N completion requests at once in the background, request
# i's body printed by the command `BODY i`, the odd ones streamed; answer i
# in OUTi, its status in OUTi.status; $clients their pids
load() {
    clients=
    i=0
    while [ $i -lt "$1" ]; do
        body=$($3 $i)
        [ $((i % 2)) = 1 ] && body=$(printf '%s\n' "$body" | jq -c '. + {stream: true}')
        post /v1/completions "$body" "$2$i" > "$2$i.status" &
        clients="$clients $!"
        i=$((i + 1))
    done
}

# all_whole WHAT N OUT EXPECTED: each answer of load is a 503 (it came when
# the server no longer took requests) or, streamed or not, gpt's own output
# in the file `EXPECTED i` names
all_whole() {
    i=0
    while [ $i -lt "$2" ]; do
        st=$(cat "$3$i.status")
        if [ "$st" = 503 ]; then pass
        else
            if [ $((i % 2)) = 1 ]; then stream_as_one "$3$i" > "$3$i.one"; else cp "$3$i" "$3$i.one"; fi
            same_as_cli "$1: request $i (status $st)" "$3$i.one" "$($4 $i)"
        fi
        i=$((i + 1))
    done
}

# all_inside N OUT: waits (up to 1,000 polls) until each of the N requests
# of `load N OUT` is answered (its client has written OUTi.status) or in the
# server (/metrics: queued or running, one sequence each), so that a signal
# comes after every client has connected. The statuses are read first: a
# sequence leaves the gauges before its client has the answer, so none is
# counted twice
all_inside() {
    j=0
    while [ $j -lt 1000 ]; do
        answered=0
        i=0
        while [ $i -lt "$1" ]; do
            [ -s "$2$i.status" ] && answered=$((answered + 1))
            i=$((i + 1))
        done
        get /metrics "$2.metrics" > /dev/null
        inside=$(awk '/^gpt_sequences_(running|queued) / { n += $2 } END { print n + 0 }' "$2.metrics")
        [ $((inside + answered)) -ge "$1" ] && return 0
        sleep 0.01
        j=$((j + 1))
    done
    return 1
}

# sigterm PID: SIGTERM to the server PID; waits for it (its exit status in
# $rc), then for the $clients of load
sigterm() {
    kill -TERM "$1"
    wait "$1"
    rc=$?
    wait $clients
}

#!/bin/sh
# make bench, the server: gpt serve against gpt --batch on the same prompts,
# in the same run, with the load generator of tests/bench/serve_load.c on
# loopback. Asserts nothing; prints beside each number the issue's target:
#   - generated tokens/s and p50/p99 latency at 1, 4, 16 and 64 concurrent
#     clients (max(16, 2 x clients) requests of 10-60-token prompts, 64
#     tokens each, ignore_eos), against gpt --batch --parallel CLIENTS on
#     the same lines (its tokens over its wall_seconds: the model's load is
#     left out of both); target at 16: >= 0.9x;
#   - time to the first token with one client (streamed, ~100-token prompts
#     that share nothing) against the command's prefill of the same prompts
#     (gpt --batch --parallel 1 -n 1: its prefill_seconds per line, an
#     engine as warm as the server's); target <= 1.1x;
#   - the server's overhead per request: the mean latency of requests of a
#     1-token prompt with max_tokens 1, one client, less the engine's time
#     on them (from /metrics): parse, queue, respond, loopback; target < 1 ms;
#     with a new connection a request, and on one kept-alive connection.
# Best of ROUNDS rounds (the machines are shared), server and command
# interleaved. Environment: BUILD (default build), DEMO (the model, default
# models/demo.bin), THREADS (-t, default 2), ROUNDS (default 2).
BUILD=${BUILD:-build}
DEMO=${DEMO:-models/demo.bin}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-2}
GPT=$BUILD/gpt
LOAD=$BUILD/bench/serve_load
for f in "$GPT" "$LOAD" "$DEMO"; do
    [ -e "$f" ] || { echo "  (no $f: skipped; make bench builds it)"; exit 0; }
done
# shellcheck source=tests/serve/ready.sh
. tests/serve/ready.sh
TMP=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$TMP"' EXIT

"$GPT" serve --port 0 -m "$DEMO" -t "$THREADS" --parallel 64 --queue 256 2> "$TMP/serve.log" &
pid=$!
wait_serving "$TMP/serve.log" "$pid" 300 || { echo "  gpt serve did not start: $(cat "$TMP/serve.log")"; exit 1; }
# at ready: the process's RSS, and the model file's pages resident in it
ready_kb=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$pid/status")
model_path=$(readlink -f "$DEMO")
ready_model_kb=$(awk -v f="$model_path" '/^[0-9a-f]+-[0-9a-f]+ / { in_model = ($6 == f) } in_model && $1 == "Rss:" { s += $2 }
    END { print s + 0 }' "/proc/$pid/smaps")

# words NAME K N: a prompt of its own, NAME K then N words (prompts that
# differ from their first token share no KV blocks); about 2 N tokens
words() {
    echo "$1 $2 $3" | awk '{ s = $1 $2 ":"; for (j = 0; j < $3; j++) s = s " w" (($2 * 131 + j * 17) % 997); print s }'
}
# lines TAG N: N --batch --jsonl lines in $TMP/lines, and the server's
# requests (the same, with ignore_eos) in $TMP/req. TAG starts every prompt:
# each round's prompts share no KV blocks with an earlier round's, which
# the server would still hold.
lines() {
    i=0
    while [ $i -lt "$2" ]; do
        printf '{"prompt":"%s %s","max_tokens":64,"seed":%d}\n' "$1" "$(words Prompt $i $((5 + (i * 37) % 28)))" \
            $((i + 1))
        i=$((i + 1))
    done > "$TMP/lines"
    sed 's/}$/,"ignore_eos":true}/' "$TMP/lines" > "$TMP/req"
}

val() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" "$2"; }                   # KEY FILE: serve_load's numbers
stat() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"; }           # KEY FILE: --json / --stats-json
best() { echo "$1 $2" | awk '{ print ($2 > $1) ? $2 : $1 }'; }      # the larger
least() { echo "$1 $2" | awk '{ print ($2 < $1) ? $2 : $1 }'; }    # the smaller

lines Warm 16
"$LOAD" "$port" 4 "$TMP/req" > /dev/null  # warm up

echo "  the demo model ($DEMO), -t $THREADS; gpt serve --parallel 64; 64 tokens a request, ignore_eos; best of $ROUNDS:"
for c in 1 4 16 64; do
    n=$((2 * c))
    [ $n -ge 16 ] || n=16
    served=0 batch=0
    round=0
    while [ $round -lt "$ROUNDS" ]; do
        lines "C${c}R$round" $n
        "$LOAD" "$port" $c "$TMP/req" > "$TMP/load"
        r=$(val tok_s "$TMP/load")
        if [ "$(best "$served" "$r")" = "$r" ]; then served=$r; cp "$TMP/load" "$TMP/best"; fi
        "$GPT" -m "$DEMO" --batch --jsonl --ignore-eos --parallel $c -t "$THREADS" --stats-json \
            < "$TMP/lines" > /dev/null 2> "$TMP/batch"
        r=$(echo "$n $(stat wall_seconds "$TMP/batch")" | awk '{ printf "%.1f", $1 * 64 / $2 }')
        batch=$(best "$batch" "$r")
        round=$((round + 1))
    done
    echo "$c $n $served $batch $(val p50 "$TMP/best") $(val p99 "$TMP/best") $(val ok "$TMP/best") \
          $(val distinct_ids "$TMP/best")" | awk '{
        printf "  %2d clients: %6.0f tok/s, latency p50 %.3f s, p99 %.3f s | gpt --batch --parallel %-2d %6.0f tok/s | %.2fx",
            $1, $3, $5, $6, $1, $4, $3 / $4
        printf " (%d requests: %d answered, %d distinct ids)%s\n", $2, $7, $8, $1 == 16 ? "; target >= 0.90x" : "" }'
done
# Memory under load. The peak RSS against what the server allocates: the
# model's weights, the KV budget (every block of it, once the pool has
# cycled: freed prompt blocks are kept for sharing until the pool is full),
# the engine's step buffers (sized by --parallel), and what the process held
# when it became ready (libraries, tokenizer, threads; the model's pages
# resident then are left out, the weights are counted whole). More rounds of
# 64 clients, with prompts of their own, until /metrics says every block of
# the budget has been touched.
metric() { curl -s "http://127.0.0.1:$port/metrics" | sed -n "s/^$1 \([0-9][0-9]*\)$/\1/p"; }
if command -v curl > /dev/null 2>&1; then
    fill=0
    while [ "$(metric gpt_kv_blocks_touched)" -lt "$(metric gpt_kv_blocks)" ] && [ $fill -lt 12 ]; do
        lines "Fill$fill" 128
        "$LOAD" "$port" 64 "$TMP/req" > "$TMP/load"
        fill=$((fill + 1))
    done
    hwm=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$pid/status" 2> /dev/null)
    touched=$(metric gpt_kv_blocks_touched) blocks=$(metric gpt_kv_blocks) per_token=$(metric gpt_kv_bytes_per_token)
    echo "$hwm $ready_kb $ready_model_kb $(metric gpt_model_bytes) $blocks $per_token $(metric gpt_engine_buffer_bytes) $touched $fill" |
        awk '{ m = 1048576; rss = $1 * 1024; base = ($2 - $3) * 1024; kv = $5 * 16 * $6
        bound = base + $4 + kv + $7
        printf "  peak RSS under load %.0f MiB (KV blocks touched: %d of %d, after %d more rounds of 64 clients)\n", rss / m, $8, $5, $9
        printf "    against the process at ready %.1f MiB + the weights %.1f MiB + the KV budget %.1f MiB + the engine'"'"'s step buffers %.1f MiB = %.1f MiB: %s\n",
            base / m, $4 / m, kv / m, $7 / m, bound / m, rss <= bound ? "within" : sprintf("OVER by %.1f MiB", (rss - bound) / m) }'
fi

# time to the first token: 20 streamed ~100-token prompts, one client, new
# ones each round, against the command's prefill of the same prompts, warm:
# gpt --batch --parallel 1 -n 1, its prefill_seconds per line
# first_prompts ROUND: in $TMP/first (requests) and $TMP/first_lines
first_prompts() {
    i=0
    while [ $i -lt 20 ]; do
        printf '{"prompt":"%s","max_tokens":1,"seed":%d}\n' "$(words "First$1x" $i 49)" $i
        i=$((i + 1))
    done > "$TMP/first_lines"
    sed 's/}$/,"max_tokens":8,"stream":true}/; s/"max_tokens":1,//' "$TMP/first_lines" > "$TMP/first"
}
# prefill_per_line FILE: seconds
prefill_per_line() {
    "$GPT" -m "$DEMO" --batch --jsonl --parallel 1 -t "$THREADS" --stats-json < "$1" > /dev/null 2> "$TMP/batch"
    echo "$(stat prefill_seconds "$TMP/batch") $(stat lines "$TMP/batch")" | awk '{ printf "%.6f", $1 / $2 }'
}
ttft=1e9 prefill=1e9
round=0
while [ $round -lt "$ROUNDS" ]; do
    first_prompts $round
    "$LOAD" "$port" 1 "$TMP/first" > "$TMP/load"
    ttft=$(least "$ttft" "$(val ttft_p50 "$TMP/load")")
    prefill=$(least "$prefill" "$(prefill_per_line "$TMP/first_lines")")
    round=$((round + 1))
done
ptokens=$("$GPT" -m "$DEMO" -p "$(words First0x 0 49)" --tokenize | wc -w)
echo "$ttft $prefill $ptokens" | awk '{
    printf "  time to the first token, 1 client, %d-token prompts: p50 %.2f ms against the command'"'"'s prefill %.2f ms: %.2fx (target <= 1.10x)\n",
        $3, 1000 * $1, 1000 * $2, $1 / $2 }'

# the overhead: 200 requests of a 1-token prompt and max_tokens 1 one after
# the other, one client: their mean latency less the engine's time on them
# (the difference of /metrics' gpt_generated_tokens_total over
# gpt_generated_tokens_per_second, the scheduler's seconds in engine steps,
# before and after)
i=0
while [ $i -lt 200 ]; do
    printf '{"prompt":"Hello","max_tokens":1,"seed":%d}\n' $i
    i=$((i + 1))
done > "$TMP/tiny.jsonl"
busy() {
    curl -s "http://127.0.0.1:$port/metrics" |
        awk '$1 == "gpt_generated_tokens_total" { n = $2 } $1 == "gpt_generated_tokens_per_second" { r = $2 }
             END { printf "%.6f", (r > 0 ? n / r : 0) }'
}
# once on a new connection a request (HTTP/1.0, as the rest of this bench),
# once on one kept-alive connection (HTTP/1.1, as the openai client does)
for mode in new-connection keep-alive; do
    over=1e9
    round=0
    while [ $round -lt "$ROUNDS" ]; do
        b0=$(busy)
        "$LOAD" "$port" 1 "$TMP/tiny.jsonl" $([ $mode = keep-alive ] && echo keep-alive) > "$TMP/load"
        b1=$(busy)
        r=$(echo "$(val wall "$TMP/load") $b0 $b1" | awk '{ printf "%.6f", ($1 - ($3 - $2)) / 200 }')
        if [ "$(least "$over" "$r")" = "$r" ]; then over=$r; cp "$TMP/load" "$TMP/best"; engine=$(echo "$b0 $b1" |
            awk '{ printf "%.6f", ($2 - $1) / 200 }'); fi
        round=$((round + 1))
    done
    command -v curl > /dev/null 2>&1 || over=
    if [ -n "$over" ]; then
        echo "$(val wall "$TMP/best") $engine $over $(val p50 "$TMP/best") $(val ok "$TMP/best")" | awk -v mode=$mode '{
            printf "  overhead per request, %s (a 1-token prompt, max_tokens 1, 200 one after the other, %d answered): %.3f ms a request (p50 %.3f ms)", mode, $5, 1000 * $1 / 200, 1000 * $4
            printf " - the engine'"'"'s %.3f ms = %.3f ms (parse, queue, respond, loopback; target < 1 ms)\n", 1000 * $2, 1000 * $3 }'
    else
        echo "  overhead per request: (no curl to read /metrics: skipped)"
    fi
done

kill "$pid"
wait "$pid" 2> /dev/null
pid=

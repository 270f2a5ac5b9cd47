#!/bin/sh
# make bench: speed and memory numbers; asserts nothing about time.
# Each speed is printed beside a bound or a baseline measured in the same
# run, variants interleaved, best of the rounds (the machines are shared).
# Environment: BUILD (default build), CKPT_DIR (generated checkpoints),
# BENCH_BASE (the commit "today's float32" is built from, default 4f7708d),
# DEMO (the demo model, default models/demo.bin).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
BENCH_BASE=${BENCH_BASE:-4f7708d}
GPT=$BUILD/gpt
M124=$CKPT_DIR/gpt2-124M-shaped
DEMO=${DEMO:-models/demo.bin}
set -e
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# the variants' wisdom (tune.h) of the runs below: not the user's cache
XDG_CACHE_HOME=$TMP/cache
export XDG_CACHE_HOME

echo "== tokenizer (one core)"
"$BUILD"/bench/bench_tokenizer

echo
echo "== forward pass, GPT-2 124M shape: bounds and our kernels (library level)"
# The sgemm bound uses OpenBLAS's native kernels: OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE (which some machines set, forcing an older core) are unset
# for this one command; bench_model prints the core it got.
for v in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; do
    # (an if, not an && list: under set -e a false test as the last command ended the script)
    eval "if [ -n \"\${$v+set}\" ]; then echo \"  ($v=\$$v is set here; unset for bench_model's sgemm bound)\"; fi"
done
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$BUILD"/bench/bench_model "$M124" | tee "$TMP/model.txt"
# prefill bound (sgemm's rate over a token's matrix flops) per thread count
prefill_bound() { sed -n "s/^threads $1: .* prefill bound \([0-9]*\) tok\/s.*/\1/p" "$TMP/model.txt"; }

echo
echo "== the demo model ($DEMO): decode of one sequence beside its bound, and where a step's time goes"
if [ -f "$DEMO" ]; then
    "$BUILD"/bench/bench_demo "$DEMO" | tee "$TMP/demo.txt"
    bound1=$(sed -n 's/^bound: 1 thread \([0-9]*\) tok\/s (\([^)]*\)).*/\1 (\2)/p' "$TMP/demo.txt")
    bound2=$(sed -n 's/^bound: .*, 2 threads \([0-9]*\) tok\/s (\([^)]*\)).*/\1 (\2)/p' "$TMP/demo.txt")
    # The gpt command, end to end: decode tok/s as --stats reports it (the
    # engine's steps), and as a user sees it: the wall of -n 200 less the
    # wall of -n 1, over the 199 tokens between (the CLI's own work too:
    # each token's text written and flushed). Variants interleaved, best of 3.
    dprompt="It was the best of times, it was the worst of times, it was the age of"
    demo_run() {  # THREADS N SAMPLING... -> "decode_tok_s wall_seconds"
        t=$1
        n=$2
        shift 2
        t0=$(date +%s.%N)
        r=$("$GPT" -m "$DEMO" -p "$dprompt" -n "$n" --ignore-eos -t "$t" --stats "$@" 2>&1 >/dev/null |
            sed -n 's/^decode: .*= \([0-9.]*\) tok\/s/\1/p')
        t1=$(date +%s.%N)
        echo "$r $t0 $t1" | awk '{ printf "%s %.4f", $1, $3 - $2 }'
    }
    for t in 1 2; do
        for mode in greedy default; do
            eval "stats_${t}_$mode=0 wall_${t}_$mode=1e9 one_${t}_$mode=1e9"
        done
    done
    for round in 1 2 3; do
        for t in 1 2; do
            for mode in greedy default; do
                flags="-s 1"
                [ $mode = greedy ] && flags="--temp 0"
                # shellcheck disable=SC2086  # $flags is two words
                set -- $(demo_run "$t" 200 $flags) $(demo_run "$t" 1 $flags)
                eval "old=\$stats_${t}_$mode; w=\$wall_${t}_$mode; o=\$one_${t}_$mode"
                eval "stats_${t}_$mode=$(echo "$old $1" | awk '{ print ($2 > $1) ? $2 : $1 }')"
                eval "wall_${t}_$mode=$(echo "$w $2" | awk '{ print ($2 < $1) ? $2 : $1 }')"
                eval "one_${t}_$mode=$(echo "$o $4" | awk '{ print ($2 < $1) ? $2 : $1 }')"
            done
        done
    done
    np=$("$GPT" -m "$DEMO" --tokenize -p "$dprompt" | wc -w)
    echo "  the gpt command, a ${np}-token prompt, -n 200 --ignore-eos (best of 3; the bound from bench_demo above):"
    for t in 1 2; do
        eval "b=\$bound$t"
        for mode in greedy default; do
            eval "st=\$stats_${t}_$mode; w=\$wall_${t}_$mode; o=\$one_${t}_$mode"
            label="--temp 0"
            [ $mode = default ] && label="default sampling (temperature 1)"
            echo "$t $st $w $o ${b%% *}" | awk -v label="$label" -v why="${b#* }" '{
                e2e = 199 / ($3 - $4)
                printf "  threads %d, %-34s decode %5.0f tok/s (--stats), %5.0f end to end = %3.0f%% / %3.0f%% of the bound, %s %s\n",
                    $1, label ":", $2, e2e, 100 * $2 / $5, 100 * e2e / $5, $5, why }'
        done
    done
else
    echo "  (no $DEMO: skipped)"
fi

# model.bin files of each dtype
for dt in f32 f16 bf16 q8 q6 q4 q4-pure; do
    # converted again when gpt is newer than the file (its converter may have changed)
    [ "$CKPT_DIR/124M-$dt.bin" -nt "$GPT" ] || "$GPT" convert "$M124" "$CKPT_DIR/124M-$dt.bin" --dtype $dt --force || exit 1
done

# wall seconds of a command, best of N
best_of() {
    n=$1
    shift
    best=
    i=0
    while [ $i -lt "$n" ]; do
        t0=$(date +%s.%N)
        "$@" >/dev/null 2>&1
        t1=$(date +%s.%N)
        best=$(echo "$t0 $t1 $best" | awk '{ d = $2 - $1; if ($3 != "" && $3 < d) d = $3; printf "%.3f", d }')
        i=$((i + 1))
    done
    echo "$best"
}

echo
echo "== decode against today's float32 (commit $BENCH_BASE, built here), the gpt command, 64-token prompt, 128 tokens"
BASE_DIR=$BUILD/bench-base
if [ ! -x "$BASE_DIR/gpt" ] && git rev-parse --git-dir >/dev/null 2>&1; then
    rm -rf "$BASE_DIR"
    git worktree prune
    git worktree add --detach "$BASE_DIR" "$BENCH_BASE" >/dev/null 2>&1 &&
        make -C "$BASE_DIR" -j2 gpt >/dev/null 2>&1 || echo "  (could not build $BENCH_BASE)"
fi
prompt=$(i=0; while [ $i -lt 64 ]; do printf ' word%d' $i; i=$((i + 1)); done)
decode_rate() {  # BINARY MODEL THREADS -> decode tok/s
    "$1" -m "$2" -p "$prompt" -n 128 --ignore-eos --temp 0 -t "$3" --stats 2>&1 >/dev/null |
        sed -n 's/^decode: .*= \([0-9.]*\) tok\/s/\1/p'
}
if [ -x "$BASE_DIR/gpt" ]; then
    for t in 1 2; do
        base=0 f32=0 f16=0 bf16=0 q8=0 q6=0 q4=0 q4pure=0
        for round in 1 2 3; do
            v=$(decode_rate "$BASE_DIR/gpt" "$M124" "$t")  # it reads the safetensors in place
            base=$(echo "$base $v" | awk '{ print ($2 > $1) ? $2 : $1 }')
            for dt in f32 f16 bf16 q8 q6 q4 q4-pure; do
                v=$(decode_rate "$GPT" "$CKPT_DIR/124M-$dt.bin" "$t")
                var=$(echo "$dt" | tr -d -)  # q4-pure: $q4pure
                eval "old=\$$var"
                eval "$var=$(echo "$old $v" | awk '{ print ($2 > $1) ? $2 : $1 }')"
            done
        done
        echo "  threads $t: today's f32 $base tok/s; ours: f32 $f32 ($(echo "$f32 $base" | awk '{ printf "%.2fx", $1 / $2 }')), f16 $f16 ($(echo "$f16 $base" | awk '{ printf "%.2fx", $1 / $2 }')), bf16 $bf16 ($(echo "$bf16 $base" | awk '{ printf "%.2fx", $1 / $2 }')), q8 $q8 ($(echo "$q8 $base" | awk '{ printf "%.2fx", $1 / $2 }')), q6 $q6 ($(echo "$q6 $base" | awk '{ printf "%.2fx", $1 / $2 }')), q4 $q4 ($(echo "$q4 $base" | awk '{ printf "%.2fx", $1 / $2 }')), q4-pure $q4pure ($(echo "$q4pure $base" | awk '{ printf "%.2fx", $1 / $2 }'))"
    done
else
    echo "  (no git checkout or no build of $BENCH_BASE: skipped)"
fi

echo
echo "== two threads: decode at 2 threads / 1 thread beside the read bandwidth's ratio measured in the same round"
echo "   (bench_bandwidth MODEL just before and just after the pair: on a shared VM the 2-thread bandwidth changes from"
echo "   minute to minute), and where the second thread's time goes (--stats' joins line); 64-token prompt, 128 tokens,"
echo "   3 rounds, the median shown"
decode_and_joins() {  # MODEL [OPTION...] -> "tok/s|joins line"
    model=$1
    shift
    out=$("$GPT" -q -m "$model" -p "$prompt" -n 128 --ignore-eos --temp 0 "$@" --stats 2>&1 >/dev/null)
    printf '%s|%s\n' "$(echo "$out" | sed -n 's/^decode: .*= \([0-9.]*\) tok\/s/\1/p')" \
        "$(echo "$out" | sed -n 's/^joins: *//p')"
}
best_line() {  # keeps the line of the higher rate: OLD NEW
    echo "$1|$2" | awk -F'|' '{ if ($3 + 0 > $1 + 0) print $3 "|" $4; else print $1 "|" $2 }'
}
best_pair() {  # MODEL "OPTIONS A" "OPTIONS B" -> $a and $b: the best of 3 rounds, interleaved
    a="0|" b="0|"
    for round in 1 2 3; do
        # shellcheck disable=SC2086  # the options are words
        a=$(best_line "$a" "$(decode_and_joins "$1" $2)")
        # shellcheck disable=SC2086
        b=$(best_line "$b" "$(decode_and_joins "$1" $3)")
    done
}
bandwidth() {  # MODEL -> "GB/s on 1 thread, GB/s on 2, the fork-join read's tok/s on 2"
    "$BUILD"/bench/bench_bandwidth "$1" | tr '\n' ' ' |
        sed -n 's/^read bandwidth 1 thread \([0-9.]*\) GB\/s, 2 threads \([0-9.]*\) GB\/s .*fork-join read, 2 threads: .* = \([0-9.]*\) tok\/s.*/\1 \2 \3/p'
}
for dt in f32 q8 q4; do
    # bytes a decoded token reads: the weights, and the KV cache at the
    # run's mean context (64 + 64 positions); the 2-thread bandwidth over it
    # caps the target
    per_token=$("$GPT" -q -m "$CKPT_DIR/124M-$dt.bin" -p Hello -n 1 --temp 0 --json 2> /dev/null |
        sed -n 's/.*"decode_bytes_per_token":\([0-9]*\).*"kv_bytes_per_token":\([0-9]*\).*/\1 \2/p' |
        awk '{ print $1 + 128 * $2 }')
    rounds=
    for round in 1 2 3; do
        bw0=$(bandwidth "$CKPT_DIR/124M-$dt.bin")
        one=$(decode_and_joins "$CKPT_DIR/124M-$dt.bin" -t 1)
        two=$(decode_and_joins "$CKPT_DIR/124M-$dt.bin" -t 2)
        bw1=$(bandwidth "$CKPT_DIR/124M-$dt.bin")
        # the round: 1-thread and 2-thread tok/s, the bandwidths (means of
        # before and after), the 2-thread rate over its target, and the
        # fork-join read's rate (mean)
        r=$(echo "${one%%|*} ${two%%|*} $bw0 $bw1 $per_token" | awk '{ b1 = ($3 + $6) / 2; b2 = ($4 + $7) / 2
            target = $1 * b2 / b1; cap = b2 * 1e9 / $9; if (cap < target) target = cap
            printf "%.3f %s %s %.1f %.1f %.1f %.1f %.1f %.1f", (target > 0 ? $2 / target : 0), $1, $2, b1, b2, $4, $7, cap,
                ($5 + $8) / 2 }')
        # a round whose 2-thread bandwidth moved by more than 15% from before
        # to after is marked ~: the host changed its mind in the middle
        rounds="$rounds $(echo "$r" | awk '{ d = $6 - $7; if (d < 0) d = -d; printf "%s%.2f", (d > 0.15 * $5 ? "~" : ""), $1 }')"
        echo "$r|${two#*|}" >> "$TMP/rounds"
    done
    # the median round
    median=$(sort -n "$TMP/rounds" | sed -n 2p)
    rm -f "$TMP/rounds"
    joins=${median#*|}
    echo "${median%%|*}" | awk -v dt="$dt" -v rounds="$rounds" '{
        printf "  %-4s 1 thread %5.1f tok/s, 2 threads %5.1f: %.2fx; read bandwidth %.1f / %.1f GB/s = %.2fx (2 threads %.1f before, %.1f after):\n",
            dt, $2, $3, ($2 > 0 ? $3 / $2 : 0), $4, $5, ($4 > 0 ? $5 / $4 : 0), $6, $7
        printf "       %.2f of 1 thread x the bandwidth ratio, capped by the 2-thread bandwidth bound %.1f tok/s (target >= 0.9; the rounds:%s)\n",
            $1, $8, rounds
        printf "       the fork-join read of its weights on 2 threads (bench_bandwidth: its products halved and joined as a decode does, nothing computed) %.1f tok/s: the decode %.2f of it\n",
            $9, ($9 > 0 ? $3 / $9 : 0) }'
    echo "       joins at 2 threads: $joins"
done
echo "  with another process keeping one core busy (a shell loop): the default thread count against -t 1"
sh -c 'while :; do :; done' &
busy=$!
for dt in f32 q8 q4; do
    best_pair "$CKPT_DIR/124M-$dt.bin" "" "-t 1"
    dflt=$a one=$b
    echo "${dflt%%|*} ${one%%|*}" | awk -v dt="$dt" '{
        printf "  %-4s default %5.1f tok/s, -t 1 %5.1f: %.2fx (target >= 0.9)\n", dt, $1, $2, ($2 > 0 ? $1 / $2 : 0) }'
    echo "       joins by default: ${dflt#*|}"
done
kill "$busy" 2>/dev/null
wait "$busy" 2>/dev/null || true  # its status is the kill's (143): set -e must not stop here

echo
echo "== time to the first token from model.bin (load, 1-token prompt, 1 token; wall, best of 5)"
for dt in f32 f16 bf16 q8 q6 q4 q4-pure; do
    t=$(best_of 5 "$GPT" -m "$CKPT_DIR/124M-$dt.bin" -p Hello -n 1 --temp 0)
    rss=$("$GPT" -m "$CKPT_DIR/124M-$dt.bin" -p Hello -n 1 --temp 0 --json | sed -n 's/.*"peak_rss_bytes":\([0-9]*\).*/\1/p')
    printf '  %-7s %s s, peak RSS %s MiB\n' "$dt" "$t" "$(echo "$rss" | awk '{ printf "%.0f", $1 / 1048576 }')"
done
t=$(best_of 3 "$GPT" -m "$M124" -p Hello -n 1 --temp 0)
echo "  safetensors (published layout, converted on load): $t s"

echo
echo "== gpt as scripts use it: a process per prompt against --batch, and the time to the first token per size and dtype (tests/bench/scripts.sh)"
BUILD=$BUILD CKPT_DIR=$CKPT_DIR sh tests/bench/scripts.sh

echo
echo "== gpt --batch: 64 prompts of 10-100 tokens, -n 64, f32 model.bin, 2 threads"
BIN=$CKPT_DIR/124M-f32.bin
i=0
while [ $i -lt 64 ]; do
    n=$((10 + (i * 37) % 91))
    j=0
    line="Prompt $i:"
    while [ $j -lt $((n - 3)) ]; do line="$line w$(( (i * 131 + j * 17) % 997 ))"; j=$((j + 1)); done
    echo "$line"
    i=$((i + 1))
done >"$TMP/mixed.txt"
i=0
head=$(j=0; while [ $j -lt 300 ]; do printf ' rule%d' $((j % 50)); j=$((j + 1)); done)
while [ $i -lt 64 ]; do echo "$head. Question $i: what is $i plus $i?"; i=$((i + 1)); done >"$TMP/shared.txt"
t0=$(date +%s.%N)
while IFS= read -r p; do "$GPT" -m "$BIN" -p "$p" -n 64 --ignore-eos -t 2 >/dev/null; done <"$TMP/mixed.txt"
t1=$(date +%s.%N)
single=$(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }')
echo "  one process per prompt:          $single s wall, $(echo "$single" | awk '{ printf "%.1f", 64 * 64 / $1 }') tok/s generated"
# batch_run N INPUT FLAGS...: runs gpt --batch -n N on INPUT; sets $wall
# (seconds) and leaves the --stats-json object in $TMP/stats.json, read by
# stat_of NAME. (An option given twice is an error: -n only here.)
batch_run() {
    n=$1 input=$2
    shift 2
    t0=$(date +%s.%N)
    "$GPT" -m "$BIN" --batch -n "$n" --ignore-eos -t 2 --stats-json "$@" <"$input" >/dev/null 2>"$TMP/stats.json"
    t1=$(date +%s.%N)
    wall=$(echo "$t0 $t1" | awk '{ printf "%.2f", $2 - $1 }')
}
stat_of() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$TMP/stats.json"; }
for par in 1 4 16; do
    batch_run 64 "$TMP/mixed.txt" --parallel $par
    pre=$(stat_of prefill_tokens)
    gap=$(stat_of token_gap_max_seconds)
    med=$(stat_of token_gap_median_seconds)
    echo "  --batch --parallel $par:  $wall s wall ($(echo "$single $wall" | awk '{ printf "%.1fx", $1 / $2 }') one process per prompt), $(echo "$wall" | awk '{ printf "%.1f", 64 * 64 / $1 }') tok/s, $pre prefill tokens, token gap median $(echo "$med" | awk '{ printf "%.3f", $1 }') s, largest $(echo "$gap" | awk '{ printf "%.3f", $1 }') s"
done
wall16=$wall
# The prefill alone (-n 1: each prompt's prefill and one token): the same
# work however it is batched, so it bounds what batching can gain.
batch_run 1 "$TMP/mixed.txt" --parallel 16
echo "  prefill alone (--parallel 16 -n 1): $wall s, $(echo "$wall $wall16 $single" | awk '{ printf "%.0f%% of the --parallel 16 wall, %.0f%% of one process per prompt", 100 * $1 / $2, 100 * $1 / $3 }')"
for mode in shared unshared; do
    flag=""
    [ $mode = unshared ] && flag=--no-prefix-sharing
    # shellcheck disable=SC2086  # $flag is empty or one word
    batch_run 64 "$TMP/shared.txt" --parallel 16 $flag
    pre=$(stat_of prefill_tokens)
    saved=$(stat_of prefill_tokens_saved)
    rss=$(stat_of peak_rss_bytes)
    budget=$(stat_of kv_budget_bytes)
    eval "wall_$mode=$wall"
    echo "  64 prompts sharing a 300-token prefix, $mode: $wall s wall, $pre prefill tokens computed, $saved saved; peak RSS $(echo "$rss" | awk '{ printf "%.0f", $1 / 1048576 }') MiB (weights 475 MiB + KV budget $(echo "$budget" | awk '{ printf "%.0f", $1 / 1048576 }') MiB)"
done
echo "  sharing: $(echo "$wall_unshared $wall_shared" | awk '{ printf "%.1fx", $1 / $2 }') faster"

echo
echo "== prefill with and without --blas (f32 model.bin), against sgemm's rate (the prefill bound of bench_model above,"
echo "   native OpenBLAS kernels, over a token's matrix flops; attention's flops, 6% more at 512 and 11% at 1000, are"
echo "   left out, so 100% would be above the bound). gpt --blas uses the OpenBLAS core this environment picks, as it would for a user"
# n tokens: common words that are one token each, in a cycle
long_prompt() {  # N -> N words
    i=0 count=$1
    set -- the of and to in is that for it as with was on be by at
    while [ $i -lt "$count" ]; do
        [ $# -gt 0 ] || set -- the of and to in is that for it as with was on be by at
        printf ' %s' "$1"
        shift
        i=$((i + 1))
    done
}
long512=$(long_prompt 512)
long1000=$(long_prompt 1000)
prefill_rate() {  # PROMPT THREADS [--blas] -> prefill tok/s
    "$GPT" -m "$CKPT_DIR/124M-f32.bin" -p "$1" -n 1 -t "$2" $3 --stats 2>&1 >/dev/null |
        sed -n 's/^prefill: .*= \([0-9.]*\) tok\/s/\1/p'
}
for t in 1 2; do
    # the two lengths and both paths interleaved in each round (the host
    # drifts), best of 3 rounds each
    ours512=0 blas512=0 ours1000=0 blas1000=0
    for round in 1 2 3; do
        for n in 512 1000; do
            eval "long=\$long$n old_ours=\$ours$n old_blas=\$blas$n"
            v=$(prefill_rate "$long" $t)
            eval "ours$n=$(echo "$old_ours $v" | awk '{ print ($2 > $1) ? $2 : $1 }')"
            v=$(prefill_rate "$long" $t --blas)
            eval "blas$n=$(echo "$old_blas $v" | awk '{ print ($2 > $1) ? $2 : $1 }')"
        done
    done
    bound=$(prefill_bound $t)
    [ -n "$bound" ] || bound=0
    for n in 512 1000; do
        eval "long=\$long$n ours=\$ours$n blas=\$blas$n"
        ntok=$("$GPT" -m "$CKPT_DIR/124M-f32.bin" -p "$long" --tokenize | wc -w)
        echo "$ntok $t $ours $blas $bound" | awk '{
            f = $5 > 0 ? sprintf("%.0f%%", 100 * $3 / $5) : "?"; g = $5 > 0 ? sprintf("%.0f%%", 100 * $4 / $5) : "?"
            printf "  %4d tokens, threads %d: ours %6.0f tok/s = %s of the bound %s; --blas %6.0f tok/s = %s (%.2fx ours)\n",
                $1, $2, $3, f, $5, $4, g, $4 / $3 }'
    done
    echo "$ours512 $ours1000 $t" | awk '{ if ($1 > 0) printf "  threads %d: a 1000-token prompt runs at %.2fx the per-token rate of a 512-token one (target >= 0.9)\n", $3, $2 / $1 }'
done
"$GPT" -m "$CKPT_DIR/124M-f32.bin" -p "x" -n 1 --blas --stats 2>&1 >/dev/null | sed -n 's/^blas: */  /p'
echo "  where --blas starts (blas.h's BLAS_MIN_ROWS), by row count (tests/bench/bench_blas.c):"
"$BUILD"/bench/bench_blas | sed 's/^/  /'

echo
echo "== q8's two arithmetics: int16 activations (the default) against int8 (--q8-act int8, vpdpbusd with VNNI) (tests/bench/bench_q8act.c)"
"$BUILD"/bench/bench_q8act | sed 's/^/  /'

echo
echo "== constrained decoding: a JSON Schema and a regex beside the plain run (tests/bench/grammar.sh)"
BUILD=$BUILD CKPT_DIR=$CKPT_DIR DEMO=$DEMO sh tests/bench/grammar.sh

echo
echo "== speculative decoding: the plain run and speculation, the same tokens (tests/bench/speculate.sh)"
sh tests/bench/speculate.sh

echo
echo "== log-probabilities: decode with --logprobs 5 against without, and a 4-way --choice (tests/bench/logprobs.sh)"
BUILD=$BUILD CKPT_DIR=$CKPT_DIR DEMO=$DEMO sh tests/bench/logprobs.sh

echo
echo "== past the context: -n 2048 --context-shift against a run within the context (tests/bench/shift.sh)"
BUILD=$BUILD CKPT_DIR=$CKPT_DIR DEMO=$DEMO sh tests/bench/shift.sh

echo
echo "== gpt serve against gpt --batch on the same prompts, 1 to 64 clients (tests/bench/serve.sh)"
BUILD=$BUILD DEMO=$DEMO sh tests/bench/serve.sh

echo
echo "== GPT-2 sizes: medium, large and XL by shape, each dtype's model.bin: decode beside its bound, prefill, load, memory (tests/bench/sizes.sh)"
BUILD=$BUILD CKPT_DIR=$CKPT_DIR sh tests/bench/sizes.sh

#!/bin/sh
# make bench, log-probabilities: what --logprobs 5 costs a decoded token
# (the log-softmax and the top 5 of every step's 50,257 logits, logprobs.h),
# and what a 4-way --choice costs against one prefill of its prompt.
# The gpt command with --json (the numbers kept, not printed per token) and
# without --logprobs, interleaved, best of 5 rounds of decode tok/s as
# --stats reports it; on the 124M-shaped model.bin files of f32 and q8
# (made by run.sh) and on the demo model, 1 and 2 threads.
# Environment: BUILD (default build), CKPT_DIR, DEMO (default models/demo.bin).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
DEMO=${DEMO:-models/demo.bin}
GPT=$BUILD/gpt
set -e

prompt="It was the best of times, it was the worst of times, it was the age of wisdom"
decode_rate() {  # MODEL THREADS N [FLAGS] -> decode tok/s
    model=$1 t=$2 n=$3
    shift 3
    "$GPT" -m "$model" -p "$prompt" -n "$n" --ignore-eos --temp 0 -t "$t" --json --stats "$@" 2>&1 >/dev/null |
        sed -n 's/^decode: .*= \([0-9.]*\) tok\/s/\1/p'
}
best() { echo "$1 $2" | awk '{ print ($2 > $1) ? $2 : $1 }'; }
for dt in f32 q8; do  # as run.sh makes them, when this runs alone
    [ "$CKPT_DIR/124M-$dt.bin" -nt "$GPT" ] ||
        "$GPT" convert "$CKPT_DIR/gpt2-124M-shaped" "$CKPT_DIR/124M-$dt.bin" --dtype $dt --force >/dev/null || exit 1
done

for spec in "f32:$CKPT_DIR/124M-f32.bin:96" "q8:$CKPT_DIR/124M-q8.bin:128" "demo:$DEMO:400"; do
    name=${spec%%:*}
    rest=${spec#*:}
    model=${rest%:*}
    n=${rest##*:}
    [ -f "$model" ] || { echo "  ($model missing: skipped)"; continue; }
    for t in 1 2; do
        plain=0 lp=0
        for round in 1 2 3 4 5; do
            plain=$(best "$plain" "$(decode_rate "$model" "$t" "$n")")
            lp=$(best "$lp" "$(decode_rate "$model" "$t" "$n" --logprobs 5)")
        done
        echo "$name $t $plain $lp" | awk '{
            printf "  %-4s threads %d: decode %7.1f tok/s plain, %7.1f with --logprobs 5: %+.1f%% time per token\n",
                $1, $2, $3, $4, 100 * ($3 / $4 - 1) }'
    done
done

# A 4-way --choice: the prompt once (the first choice's sequence), then
# every choice's tokens (1 to 8) in one step; against one prefill of the
# prompt alone (-n 1), wall of the whole command, best of 5 each.
if [ -f "$DEMO" ]; then
    verse="And I saw a new heaven and a new earth: for the first heaven and the first earth were passed away; and there was no more"
    wall() {
        best=
        for round in 1 2 3 4 5; do
            t0=$(date +%s.%N)
            "$@" >/dev/null 2>&1
            t1=$(date +%s.%N)
            best=$(echo "$t0 $t1 $best" | awk '{ d = $2 - $1; if ($3 != "" && $3 < d) d = $3; printf "%.4f", d }')
        done
        echo "$best"
    }
    for model in "$CKPT_DIR/124M-f32.bin" "$DEMO"; do
        [ -f "$model" ] || continue
        one=$(wall "$GPT" -m "$model" -p "$verse" -n 1 --temp 0 -t 1)
        four=$(wall "$GPT" -m "$model" -p "$verse" -t 1 --choice " sea." --choice " death, neither sorrow." \
            --choice " night there; and they need no candle." --choice " curse")
        computed=$("$GPT" -m "$model" -p "$verse" -t 1 --choice " sea." --choice " death, neither sorrow." \
            --choice " night there; and they need no candle." --choice " curse" --json |
            sed -n 's/.*"prefill_tokens":\([0-9]*\).*/\1/p')
        np=$("$GPT" -m "$model" --tokenize -p "$verse" | wc -w)
        echo "$model $one $four $computed $np" | awk '{
            printf "  %s: 4-way --choice %.3f s wall (%d positions computed for a %d-token prompt) against -n 1 %.3f s: %.2fx\n",
                $1, $3, $4, $5, $2, $3 / $2 }'
    done
fi

#!/bin/sh
# make bench, past the context: -n 2048 with --context-shift against a run
# within the context, decode tok/s of the whole run (the shifts' prefills
# included: wall of the steps over the tokens generated), best of 3 rounds
# interleaved, one thread and two; on the demo model (context 256: a shift
# every 128 tokens) and the 124M-shaped checkpoint in q8 (context 1024: a
# shift every 512).
# Napkin: a shift computes half the context again at the prefill rate,
# which runs 5-10x the decode rate here: every half context of tokens costs
# about 1/(5..10) more, +10-20% time per generated token.
# Environment: BUILD (default build), CKPT_DIR, DEMO (default models/demo.bin).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
DEMO=${DEMO:-models/demo.bin}
GPT=$BUILD/gpt
set -e
[ "$CKPT_DIR/124M-q8.bin" -nt "$GPT" ] ||
    "$GPT" convert "$CKPT_DIR/gpt2-124M-shaped" "$CKPT_DIR/124M-q8.bin" --dtype q8 --force >/dev/null
prompt="And it came to pass"
# MODEL THREADS N [FLAGS] -> "tokens/s shifts": generated tokens over the
# wall of all steps (prefill and decode as --stats reports them)
run_rate() {
    model=$1 t=$2 n=$3
    shift 3
    "$GPT" -m "$model" -p "$prompt" -n "$n" --ignore-eos -s 1 -t "$t" --stats "$@" 2>&1 >/dev/null | awk -v n="$n" '
        /^prefill:/ { p = $5 } /^decode:/ { d = $5 } /^shifts:/ { s = $2 }
        END { printf "%.1f %d", n / (p + d), s }'
}
# (the run within the context goes nearly to its end: attention over a longer
# context costs more, and the shifted run's context is half to all of it)
for spec in "demo:$DEMO:250" "124M-q8:$CKPT_DIR/124M-q8.bin:1015"; do
    name=${spec%%:*}
    rest=${spec#*:}
    model=${rest%:*}
    within=${rest##*:}
    [ -f "$model" ] || { echo "  ($model missing: skipped)"; continue; }
    for t in 1 2; do
        best_in=0 best_shift=0 shifts=0
        for round in 1 2 3; do
            set -- $(run_rate "$model" "$t" "$within")
            best_in=$(echo "$best_in $1" | awk '{ print ($2 > $1) ? $2 : $1 }')
            set -- $(run_rate "$model" "$t" 2048 --context-shift)
            best_shift=$(echo "$best_shift $1" | awk '{ print ($2 > $1) ? $2 : $1 }')
            shifts=$2
        done
        echo "$name $t $within $best_in $best_shift $shifts" | awk '{
            printf "  %-7s threads %d: -n %d within the context %6.1f tok/s; -n 2048 --context-shift %6.1f tok/s (%d shifts): %+.0f%% time per token\n",
                $1, $2, $3, $4, $5, $6, 100 * ($4 / $5 - 1) }'
    done
done

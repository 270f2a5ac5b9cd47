#!/bin/sh
# make bench: prints speed and memory numbers; asserts nothing about time.
# Environment: BUILD (default build), CKPT_DIR (generated checkpoints).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
GPT=$BUILD/gpt
M124=$CKPT_DIR/gpt2-124M-shaped
set -e

echo "== tokenizer (one core)"
"$BUILD"/bench/bench_tokenizer

echo
echo "== forward pass, GPT-2 124M shape, float32"
"$BUILD"/bench/bench_model "$M124" 1 2

echo
echo "== the gpt command, 124M: 512-token prompt, 128 new tokens (--stats)"
prompt=$(i=0; while [ $i -lt 512 ]; do printf ' the'; i=$((i + 1)); done)
for t in 1 2; do
    echo "threads $t:"
    "$GPT" -m "$M124" -p "$prompt" -n 128 --ignore-eos --temp 0 -t $t --stats 2>&1 >/dev/null |
        grep -E '^(weights|prefill|decode|kv alloc|peak rss):' | sed 's/^/  /'
done

echo
echo "== load the 124M model and print the first token (wall time, best of 5)"
BIN=$CKPT_DIR/gpt2-124M-shaped.bin
[ -f "$BIN" ] || "$GPT" convert "$M124" "$BIN"
for src in "$BIN" "$M124"; do
    best=
    for i in 1 2 3 4 5; do
        t0=$(date +%s.%N)
        "$GPT" -m "$src" -p Hello -n 1 --temp 0 >/dev/null
        t1=$(date +%s.%N)
        best=$(echo "$t0 $t1 $best" | awk '{ d = $2 - $1; if ($3 == "" || d < $3) d = d; else d = $3; printf "%.3f", d }')
    done
    load=$("$GPT" -m "$src" -p Hello -n 1 --temp 0 --stats 2>&1 >/dev/null | sed -n 's/.*loaded in \([0-9.]*\) s.*/\1/p')
    rss=$("$GPT" -m "$src" -p Hello -n 1 --temp 0 --json | sed -n 's/.*"peak_rss_bytes":\([0-9]*\).*/\1/p')
    printf '  %-40s %s s to the first token (model load %s s), peak RSS %s MiB\n' "$src" "$best" "$load" \
        "$(echo "$rss" | awk '{ printf "%.0f", $1 / 1048576 }')"
done

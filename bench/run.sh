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

if [ -x "$BUILD"/bench/bench_load.sh ] || [ -f bench/load.sh ]; then
    echo
    sh bench/load.sh
fi

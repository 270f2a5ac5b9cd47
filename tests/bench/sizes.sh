#!/bin/sh
# make bench, the GPT-2 sizes: medium (24 layers, C 1024, 16 heads), large
# (36, 1280, 20) and XL (48, 1600, 25), n_ctx 1024, vocab 50257, by shape:
# the deterministic formula checkpoints of tests/gen_checkpoint (the speed
# and memory are the shape's; the text is noise). Each size's checkpoint is
# written once into $CKPT_DIR/gpt2-SIZE-shaped (1.4 / 3.1 / 6.2 GB in f32),
# each dtype converted to a model.bin in a temporary directory (removed
# after its runs). One table a size, a row a dtype, best of the rounds:
#   read/token   bytes a decoded token reads: the weights (gpt's
#                decode_bytes_per_token) and the KV cache at the decode's
#                mean context
#   decode       tok/s, one sequence, a 12-token prompt, -n 32 (--stats')
#   bound        read bandwidth / read/token: the bandwidth measured just
#                before (bench_bandwidth: a plain read loop over 1 GiB, at
#                the run's thread count, 2 at most); decode is memory-bound
#   prefill      tok/s of a 256-token prompt (--stats')
#   load         the model.bin's load (--stats'), page cache warm
#   first token  wall of the whole process, exec to exit, of a 1-token
#                prompt and -n 1: load, one step and the exit
#   peak RSS     the largest of the decode's and the prefill's
# Asserts nothing about time. A size is skipped, with a line, where the disk
# lacks room for its checkpoint and the largest model.bin; a dtype where
# MemAvailable is less than its weights and 512 MiB.
# Environment: BUILD (default build), CKPT_DIR (default build/ckpt),
# BENCH_SIZES (default "medium large xl"), BENCH_DTYPES (default
# "f32 f16 q8 q4"; any of gpt convert's), BENCH_THREADS (default 2, or 1
# on one core), BENCH_ROUNDS (default 2).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
SIZES=${BENCH_SIZES:-medium large xl}
DTYPES=${BENCH_DTYPES:-f32 f16 q8 q4}
ROUNDS=${BENCH_ROUNDS:-2}
GPT=$BUILD/gpt
GEN=$BUILD/tests/gen_checkpoint
BW=$BUILD/bench/bench_bandwidth
set -e
cores=$(nproc 2>/dev/null || echo 1)
THREADS=${BENCH_THREADS:-$([ "$cores" -ge 2 ] && echo 2 || echo 1)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# the tuned variants (tune.h) of these runs: not the user's cache
XDG_CACHE_HOME=$TMP/cache
export XDG_CACHE_HOME

echo "cpu: $(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1), $cores cores; threads $THREADS, best of $ROUNDS rounds"
[ -x "$GPT" ] || { echo "  (no $GPT: make $GPT)"; exit 1; }
[ -x "$GEN" ] || { echo "  (no $GEN: make $GEN)"; exit 1; }
# a copy of gpt, run from here on: a rebuild during the runs (they take
# minutes) does not change the binary measured; the tokenizer is the
# checkpoint's own (--tokenizer)
cp "$GPT" "$TMP/gpt"
GPT=$TMP/gpt

num() {  # NAME FILE -> the number of "NAME": in the JSON of FILE
    sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"
}
max() { echo "$1 $2" | awk '{ print ($2 > $1) ? $2 : $1 }'; }
min() { if [ -z "$1" ]; then echo "$2"; else echo "$1 $2" | awk '{ print ($2 < $1) ? $2 : $1 }'; fi; }
free_bytes() { df -Pk "$1" | awk 'NR == 2 { printf "%.0f", $4 * 1024 }'; }
mem_available() { awk '/^MemAvailable:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo; }
# bytes per weight of a model.bin, for the room checks (over-estimates)
dtype_bytes() {
    case $1 in f32) echo 4 ;; f16 | bf16) echo 2 ;; *) echo 1.2 ;; esac
}
# read bandwidth on THREADS threads (2 at most), GB/s
bandwidth() {
    [ -x "$BW" ] || return 0
    "$BW" | sed -n 's/^read bandwidth 1 thread \([0-9.]*\) GB\/s, 2 threads \([0-9.]*\) GB\/s.*/\1 \2/p' |
        awk -v t="$THREADS" '{ print (t >= 2) ? $2 : $1 }'
}
dprompt="It was the best of times, it was the worst of times"
# 256 words that are one token each
long=$(i=0; set --; while [ $i -lt 256 ]; do
    [ $# -gt 0 ] || set -- the of and to in is that for it as with was on be by at
    printf ' %s' "$1"; shift; i=$((i + 1)); done)
[ -x "$BW" ] || echo "  (no $BW: make bench; the bounds are left out)"

for size in $SIZES; do
    case $size in
        medium) shape="24 1024 16" ;;
        large) shape="36 1280 20" ;;
        xl) shape="48 1600 25" ;;
        *) echo "== $size: not a size (medium, large or xl)"; continue ;;
    esac
    # shellcheck disable=SC2086  # three words
    set -- $shape
    L=$1 C=$2 NH=$3
    dir=$CKPT_DIR/gpt2-$size-shaped
    # wte + wpe + per layer 12 C^2 + 13 C + ln_f
    params=$(echo "$L $C" | awk '{ printf "%.0f", 50257 * $2 + 1024 * $2 + $1 * (12 * $2 * $2 + 13 * $2) + 2 * $2 }')
    echo
    echo "== GPT-2 $size by shape: $L layers, C $C, $NH heads, $params parameters ($dir)"
    # room: the checkpoint (unless present) and the largest model.bin, 1 GiB spare
    need=0
    for dt in $DTYPES; do need=$(max "$need" "$(echo "$params $(dtype_bytes "$dt")" | awk '{ printf "%.0f", $1 * $2 }')"); done
    ckpt_need=0
    [ -f "$dir/model.safetensors" ] || ckpt_need=$((params * 4))
    mkdir -p "$CKPT_DIR"
    if [ "$(free_bytes "$CKPT_DIR")" -lt $((ckpt_need + 1073741824)) ] ||
        [ "$(free_bytes "$TMP")" -lt $((ckpt_need + need + 1073741824)) ]; then
        echo "  skipped: not enough free disk ($(free_bytes "$CKPT_DIR" | awk '{ printf "%.1f", $1 / 1e9 }') GB free in $CKPT_DIR, $(echo "$ckpt_need $need" | awk '{ printf "%.1f", ($1 + $2) / 1e9 + 1 }') GB needed)"
        continue
    fi
    if [ ! -f "$dir/model.safetensors" ]; then
        rm -rf "$dir.part"
        t0=$(date +%s.%N)
        "$GEN" "$dir.part" --layers "$L" --embd "$C" --heads "$NH" --ctx 1024 --vocab 50257 >/dev/null
        mv "$dir.part" "$dir"
        echo "  (checkpoint written in $(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }') s)"
    fi
    printf '  %-5s %9s %9s %8s %17s %9s %6s %6s %9s %9s\n' dtype "weights" read/token decode "bound (GB/s)" prefill load "first" "peak RSS" convert
    printf '  %-5s %9s %9s %8s %17s %9s %6s %6s %9s %9s\n' "" MiB MB "tok/s" "tok/s, %" "tok/s" s "tok s" MiB s
    for dt in $DTYPES; do
        est=$(echo "$params $(dtype_bytes "$dt")" | awk '{ printf "%.0f", $1 * $2 }')
        if [ "$(mem_available)" -lt $((est + 536870912)) ]; then
            printf '  %-5s skipped: %s MiB of memory available, its weights take about %s\n' "$dt" \
                "$(mem_available | awk '{ printf "%.0f", $1 / 1048576 }')" "$(echo "$est" | awk '{ printf "%.0f", $1 / 1048576 }')"
            continue
        fi
        bin=$TMP/$size-$dt.bin
        t0=$(date +%s.%N)
        if ! "$GPT" convert "$dir" "$bin" --dtype "$dt" --force >/dev/null 2>"$TMP/err"; then
            printf '  %-5s convert failed: %s\n' "$dt" "$(head -n 1 "$TMP/err")"
            rm -f "$bin"
            continue
        fi
        conv=$(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.1f", $2 - $1 }')
        # a first run: tunes the kernels' variants (kept in $TMP/cache) and
        # brings the file into the page cache
        "$GPT" -q -m "$bin" --tokenizer "$dir" -p Hello -n 1 --temp 0 -t "$THREADS" >/dev/null 2>&1 || true
        decode=0 bw=0 prefill=0 load="" first="" rss=0
        r=0
        while [ $r -lt "$ROUNDS" ]; do
            b=$(bandwidth)
            [ -z "$b" ] || bw=$(max "$bw" "$b")
            "$GPT" -q -m "$bin" --tokenizer "$dir" -p "$dprompt" -n 32 --ignore-eos --temp 0 -t "$THREADS" --json >"$TMP/d.json" 2>"$TMP/err" || true
            grep -q '"decode_tok_s"' "$TMP/d.json" || break
            decode=$(max "$decode" "$(num decode_tok_s "$TMP/d.json")")
            rss=$(max "$rss" "$(num peak_rss_bytes "$TMP/d.json")")
            load=$(min "$load" "$(num load_seconds "$TMP/d.json")")
            "$GPT" -q -m "$bin" --tokenizer "$dir" -p "$long" -n 1 --temp 0 -t "$THREADS" --json >"$TMP/p.json" 2>/dev/null || true
            prefill=$(max "$prefill" "$(num prefill_tok_s "$TMP/p.json")")
            rss=$(max "$rss" "$(num peak_rss_bytes "$TMP/p.json")")
            t0=$(date +%s.%N)
            "$GPT" -q -m "$bin" --tokenizer "$dir" -p Hello -n 1 --temp 0 -t "$THREADS" >/dev/null 2>&1 || true
            first=$(min "$first" "$(echo "$t0 $(date +%s.%N)" | awk '{ printf "%.3f", $2 - $1 }')")
            r=$((r + 1))
        done
        if [ "$decode" = 0 ]; then
            printf '  %-5s the run failed: %s\n' "$dt" "$(head -n 1 "$TMP/err")"
            rm -f "$bin"
            continue
        fi
        # the bytes of a decoded token: the weights and the cache at the mean
        # context (the prompt and half the 32 tokens)
        per_token=$(echo "$(num decode_bytes_per_token "$TMP/d.json") $(num kv_bytes_per_token "$TMP/d.json") $(num prompt_tokens "$TMP/d.json")" |
            awk '{ printf "%.0f", $1 + ($3 + 16) * $2 }')
        wb=$(num weight_bytes "$TMP/d.json")
        echo "$dt $wb $per_token $decode $bw $prefill $load $first $rss $conv" | awk '{
            bound = ($3 > 0) ? $5 * 1e9 / $3 : 0
            b = ($5 > 0) ? sprintf("%.1f (%.1f), %.0f%%", bound, $5, 100 * $4 / bound) : "?"
            printf "  %-5s %9.0f %9.0f %8.2f %17s %9.1f %6.2f %6.2f %9.0f %9s\n",
                $1, $2 / 1048576, $3 / 1e6, $4, b, $6, $7, $8, $9 / 1048576, $10 }'
        rm -f "$bin"
    done
done

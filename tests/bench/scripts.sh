#!/bin/sh
# make bench, gpt as scripts use it: one process per prompt. Two parts:
#  1. 100 prompts, one process each (a shell loop), against the same 100
#     through one `gpt --batch`; the 124M-shaped f32 model.bin, -n 8.
#  2. The time to the first token of one process, per model size and dtype
#     (a model.bin in the page cache, a 1-token prompt, -n 1): the wall
#     from fork to the first byte on stdout (bench_spawn), and --stats'
#     load and first step beside the same step with the weights already in
#     memory (the checkpoint's directory converted at load with --dtype).
#     The model.bin carries its tokenizer and is run alone (-m FILE), as a
#     script runs it. Targets, for the 124M f32 model.bin: the whole
#     process to the first token <= 0.1 s; its first step <= 1.3x the step
#     from memory. Beside them, measured in the same rounds, the bound of
#     the whole process at this machine's rate of making the mapped
#     weights readable (bench_populate: MADV_POPULATE_READ and a read a
#     page, as gpt's prefetch thread does, in a process of its own, on one
#     thread and on two), with the start of a process (`gpt --version`),
#     the load and the step from memory: one after another (start + load
#     + the pass on one thread + the step), and on two cores (the pass on
#     the second core during the load, what is left of it on both after:
#     start + load + max(0, 1 - load / pass1) x pass2 + the step), and
#     the first step's own bound (the step from memory + the pass left).
# Asserts nothing about time; variants interleaved, best of the rounds.
# Environment: BUILD (default build), CKPT_DIR (default build/ckpt),
# FIRST_SIZES (default "124M medium large xl": the checkpoints
# $CKPT_DIR/gpt2-SIZE-shaped, a size without one is skipped), FIRST_DTYPES
# (default "f32 q8"), BENCH_ROUNDS (default 3; sizes past medium 2).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
SIZES=${FIRST_SIZES:-124M medium large xl}
DTYPES=${FIRST_DTYPES:-f32 q8}
ROUNDS=${BENCH_ROUNDS:-3}
GPT=$BUILD/gpt
SPAWN=$BUILD/bench/bench_spawn
POPULATE=$BUILD/bench/bench_populate
set -e
[ -x "$GPT" ] || { echo "  (no $GPT: make $GPT)"; exit 1; }
[ -x "$SPAWN" ] || { echo "  (no $SPAWN: make bench)"; exit 1; }
[ -x "$POPULATE" ] || { echo "  (no $POPULATE: make bench)"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
XDG_CACHE_HOME=$TMP/cache  # the tuner's wisdom of these runs, not the user's
export XDG_CACHE_HOME
cp "$GPT" "$TMP/gpt"  # a rebuild during the runs does not change what is measured
GPT=$TMP/gpt

echo "cpu: $(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)" \
    "(family $(sed -n 's/^cpu family[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)," \
    "model $(sed -n 's/^model[[:space:]]*: *//p' /proc/cpuinfo | head -n 1)), $(nproc) cores," \
    "load average $(cut -d' ' -f1 /proc/loadavg) at the start"

min() { if [ -z "$1" ]; then echo "$2"; else echo "$1 $2" | awk '{ print ($2 < $1) ? $2 : $1 }'; fi; }
mem_available() { awk '/^MemAvailable:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo; }
free_bytes() { df -Pk "$1" | awk 'NR == 2 { printf "%.0f", $4 * 1024 }'; }
stat_line() {  # FILE -> "load_seconds first_step_seconds" from --stats
    echo "$(sed -n 's/^weights: .* loaded in \([0-9.]*\) s.*/\1/p' "$1") $(sed -n 's/^prefill: .* in \([0-9.]*\) s.*/\1/p' "$1")"
}

M124=$CKPT_DIR/gpt2-124M-shaped
if [ -d "$M124" ]; then
    BIN=$TMP/124M-f32.bin
    "$GPT" convert "$M124" "$BIN" --dtype f32 --force >/dev/null 2>&1
    i=0
    while [ $i -lt 100 ]; do echo "Prompt $i: the $i th of a hundred short questions, what is $i plus one?"; i=$((i + 1)); done >"$TMP/p100.txt"
    "$GPT" -m "$BIN" -p Hello -n 1 >/dev/null  # tunes; the file into the page cache
    t0=$(date +%s.%N)
    while IFS= read -r p; do "$GPT" -m "$BIN" -p "$p" -n 8 --ignore-eos --temp 0 >/dev/null; done <"$TMP/p100.txt"
    t1=$(date +%s.%N)
    "$GPT" -m "$BIN" --batch -n 8 --ignore-eos --temp 0 <"$TMP/p100.txt" >/dev/null
    t2=$(date +%s.%N)
    echo "$t0 $t1 $t2" | awk '{ l = $2 - $1; b = $3 - $2
        printf "  100 prompts, -n 8, 124M f32 model.bin: one process each (a shell loop) %.2f s (%.3f s a prompt); --batch %.2f s: %.1fx\n", l, l / 100, b, l / b }'
fi

echo "  time to the first token of one process (1-token prompt, -n 1, page cache warm; best of $ROUNDS, sizes past medium 2):"
echo "  whole = fork to the first byte on stdout; load and step = --stats; step from memory = the same step with the weights"
echo "  converted at load from the checkpoint's directory (--dtype): what the step costs with no page of the file to map"
printf '  %-7s %-5s %8s %8s %8s %12s %12s\n' size dtype "whole s" "load s" "step s" "step mem s" "step/mem"
for size in $SIZES; do
    dir=$CKPT_DIR/gpt2-$size-shaped
    if [ ! -f "$dir/model.safetensors" ]; then
        printf '  %-7s skipped: no %s (tests/bench/sizes.sh writes it)\n' "$size" "$dir"
        continue
    fi
    rounds=$ROUNDS
    case $size in large | xl) [ "$rounds" -le 2 ] || rounds=2 ;; esac
    for dt in $DTYPES; do
        # room: the model.bin on disk, and twice its weights in memory (the
        # run from memory holds the file's pages and the converted copy)
        est=$(du -k "$dir/model.safetensors" | awk -v dt="$dt" '{ f = (dt == "f32") ? 1 : (dt ~ /16/ ? 0.5 : 0.3); printf "%.0f", $1 * 1024 * f }')
        if [ "$(mem_available)" -lt $((2 * est + 536870912)) ] || [ "$(free_bytes "$TMP")" -lt $((est + 1073741824)) ]; then
            printf '  %-7s %-5s skipped: too little memory or disk for its %s MiB\n' "$size" "$dt" $((est >> 20))
            continue
        fi
        bin=$TMP/$size-$dt.bin
        "$GPT" convert "$dir" "$bin" --dtype "$dt" --force >/dev/null 2>"$TMP/err" || {
            printf '  %-7s %-5s convert failed: %s\n' "$size" "$dt" "$(head -n 1 "$TMP/err")"
            continue
        }
        "$GPT" -m "$bin" -p Hello -n 1 >/dev/null 2>&1 || true  # tunes; page cache warm
        whole="" load="" step="" mem="" pass="" pass2="" fault="" start=""
        r=0
        while [ $r -lt "$rounds" ]; do
            w=$("$SPAWN" 1 "$GPT" -m "$bin" -p Hello -n 1 --temp 0 | awk '{ print $3 }')
            whole=$(min "$whole" "$w")
            "$GPT" -m "$bin" -p Hello -n 1 --temp 0 --stats 2>"$TMP/s" >/dev/null
            # shellcheck disable=SC2046  # two numbers
            set -- $(stat_line "$TMP/s")
            load=$(min "$load" "$1")
            step=$(min "$step" "$2")
            "$GPT" -m "$dir" --dtype "$dt" -p Hello -n 1 --temp 0 --stats 2>"$TMP/s" >/dev/null
            # shellcheck disable=SC2046  # two numbers
            set -- $(stat_line "$TMP/s")
            mem=$(min "$mem" "$2")
            if [ "$size $dt" = "124M f32" ]; then
                # "bytes N threads T pass W ...": W
                pass=$(min "$pass" "$("$POPULATE" "$bin" populate 1 | awk '{ print $6 }')")
                pass2=$(min "$pass2" "$("$POPULATE" "$bin" populate 2 | awk '{ print $6 }')")
                fault=$(min "$fault" "$("$POPULATE" "$bin" fault | awk '{ print $6 }')")
                start=$(min "$start" "$("$SPAWN" 1 "$GPT" --version | awk '{ print $3 }')")
            fi
            r=$((r + 1))
        done
        printf '  %-7s %-5s %8s %8s %8s %12s %12s\n' "$size" "$dt" "$whole" "$load" "$step" "$mem" \
            "$(echo "$step $mem" | awk '{ printf "%.2fx", ($2 > 0 ? $1 / $2 : 0) }')"
        [ "$size $dt" = "124M f32" ] && echo "$whole $step $mem $load $pass $fault $start $(wc -c <"$bin") $pass2" >"$TMP/target"
        rm -f "$bin"
    done
done
if [ -f "$TMP/target" ]; then
    read -r whole step mem load pass fault start bytes pass2 <"$TMP/target"
    echo "$whole $step $mem" | awk '{
        printf "  targets, 124M f32 model.bin: whole process to the first token %.3f s (target <= 0.1: %s); first step %.2fx the step from memory (target <= 1.3: %s)\n",
            $1, ($1 <= 0.1 ? "met" : "not met"), $2 / $3, ($2 / $3 <= 1.3 ? "met" : "not met") }'
    echo "$whole $mem $load $pass $fault $start $bytes $pass2" | awk '{
        serial = $6 + $3 + $4 + $2; left = ($3 < $4) ? 1 - $3 / $4 : 0; two = $6 + $3 + left * $8 + $2
        printf "  bound, 124M f32 model.bin: the weights'"'"' first pass over its %.0f MB at this machine'"'"'s population rate %.1f GB/s on one thread (%.3f s), %.1f on two (%.3f s; page faults alone %.1f GB/s)\n",
            $7 / 1e6, $7 / $4 / 1e9, $4, $7 / $8 / 1e9, $8, $7 / $5 / 1e9
        printf "    one after another: start %.3f s (gpt --version) + load %.3f + pass %.3f + step from memory %.3f = %.3f s; on two cores (the pass beside the load, %.0f%% of it after): %.3f s; the whole process %.3f s, %.2fx the latter\n",
            $6, $3, $4, $2, serial, 100 * left, two, $1, $1 / two
        printf "    so the first step, which waits for what is left of the pass, is bound at %.3f + %.3f = %.3f s, %.2fx the step from memory\n",
            $2, left * $8, $2 + left * $8, ($2 + left * $8) / $2 }'
fi

#!/bin/sh
# Runs each libFuzzer harness named on the command line (tokenizer,
# safetensors, ...): first on the inputs of tests/fuzz/crashes/NAME-* (bugs
# found before, kept as regression tests), then for FUZZ_SECONDS seconds
# on a fresh copy of its seed corpus tests/fuzz/corpus/NAME (the seeds are
# never written to), with tests/fuzz/NAME.dict when there is one.
# FUZZ_JOBS harnesses run at a time, each on one core (a harness is one
# process: FUZZ_SECONDS each whatever FUZZ_JOBS is). Prints what each ran
# (executions, coverage) at the end, in the order named, and what went
# wrong in each; exits 1 if any harness found a crash, a leak, a timeout,
# running out of memory or a sanitizer report. The input that did it is
# left in $FUZZ_DIR/artifacts/ and the log in $FUZZ_DIR/logs/NAME.log.
#
# Environment: FUZZ_DIR (default build/fuzz, where `make fuzz-build` put
# the binaries), FUZZ_SECONDS (default 60), FUZZ_JOBS (harnesses at a
# time, default the number of cores), FUZZ_FLAGS (more libFuzzer flags,
# e.g. -jobs=2). Run from the repository root (`make fuzz`).
set -u
FUZZ_DIR=${FUZZ_DIR:-build/fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_FLAGS=${FUZZ_FLAGS:-}
FUZZ_JOBS=${FUZZ_JOBS:-$(getconf _NPROCESSORS_ONLN 2> /dev/null || echo 1)}
case "$FUZZ_JOBS" in '' | *[!0-9]* | 0) FUZZ_JOBS=1 ;; esac
# The tokenizer harness loads the shipped GPT-2 files from here.
GPT_FUZZ_TOKENIZER=${GPT_FUZZ_TOKENIZER:-models}
export GPT_FUZZ_TOKENIZER
# A UBSan report names its place and stack; ASan keeps LeakSanitizer on.
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export UBSAN_OPTIONS

[ $# -gt 0 ] || set -- tokenizer safetensors model tokenizer_files cli gguf completion chat ollama responses embed jsonl grammar schema lora
mkdir -p "$FUZZ_DIR/artifacts" "$FUZZ_DIR/logs"

# fuzz NAME: the regression inputs, then FUZZ_SECONDS of fuzzing; its line
# of the summary goes to $FUZZ_DIR/logs/NAME.line and what went wrong to
# NAME.report (printed after all ended, so that two harnesses' reports
# never interleave); returns 1 if it failed.
fuzz() {
    name=$1
    bin=$FUZZ_DIR/fuzz_$name
    seeds=tests/fuzz/corpus/$name
    corpus=$FUZZ_DIR/corpus/$name
    log=$FUZZ_DIR/logs/$name.log
    line_file=$FUZZ_DIR/logs/$name.line
    report=$FUZZ_DIR/logs/$name.report
    : > "$report"
    if [ ! -x "$bin" ] || [ ! -d "$seeds" ]; then
        echo "fuzz: $bin or $seeds is missing" >> "$report"
        printf '%-16s MISSING\n' "$name" > "$line_file"
        return 1
    fi
    rm -rf "$corpus" "$FUZZ_DIR/artifacts/$name-"*
    # the inputs that found bugs before must pass
    regress=$(ls tests/fuzz/crashes/"$name"-* 2>/dev/null)
    if [ -n "$regress" ]; then
        # shellcheck disable=SC2086  # one word per file; the names have no spaces
        if ! "$bin" $regress >"$FUZZ_DIR/logs/$name-crashes.log" 2>&1; then
            {
                echo "fuzz: $name fails on an input of tests/fuzz/crashes/ again:"
                tail -n 40 "$FUZZ_DIR/logs/$name-crashes.log"
            } >> "$report"
            printf '%-16s FAILED on tests/fuzz/crashes/%s-*\n' "$name" "$name" > "$line_file"
            return 1
        fi
    fi
    mkdir -p "$corpus"
    cp "$seeds"/* "$corpus"/
    dict=""
    [ -f "tests/fuzz/$name.dict" ] && dict="-dict=tests/fuzz/$name.dict"
    echo "fuzz: $name for $FUZZ_SECONDS s ($log)"
    # shellcheck disable=SC2086  # $dict and $FUZZ_FLAGS are word lists
    "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$FUZZ_DIR/artifacts/$name-" $dict $FUZZ_FLAGS "$corpus" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*/[0-9]*[a-zA-Z]*' "$log" | tail -n 1)
    line=$(printf '%-16s %10s execs %7s/s  %s' "$name" "${execs:-?}" "${speed:-?}" "${cov:-cov: ?}")
    if [ $rc -ne 0 ] || grep -q -E '^(==[0-9]+==ERROR|SUMMARY: )' "$log"; then
        {
            echo "fuzz: $name FAILED (exit $rc); the end of $log:"
            tail -n 60 "$log"
            ls "$FUZZ_DIR/artifacts/" | sed -n "s|^\($name-.*\)|    input: $FUZZ_DIR/artifacts/\1|p"
        } >> "$report"
        echo "$line  FAILED" > "$line_file"
        return 1
    fi
    echo "$line" > "$line_file"
}

# FUZZ_JOBS at a time: they all run FUZZ_SECONDS, so a batch ends together
names=$*
while [ $# -gt 0 ]; do
    k=0
    while [ $# -gt 0 ] && [ $k -lt "$FUZZ_JOBS" ]; do
        rm -f "$FUZZ_DIR/logs/$1.line"
        fuzz "$1" &
        k=$((k + 1))
        shift
    done
    wait
done

failed=""
for name in $names; do
    # every way to fail writes a report; no line: the harness's shell died
    if [ -s "$FUZZ_DIR/logs/$name.report" ] || ! [ -s "$FUZZ_DIR/logs/$name.line" ]; then
        cat "$FUZZ_DIR/logs/$name.report" >&2 2> /dev/null
        failed="$failed $name"
    fi
done
echo
echo "fuzz: $FUZZ_SECONDS s each"
for name in $names; do
    cat "$FUZZ_DIR/logs/$name.line" 2> /dev/null || printf '%-16s ENDED WITHOUT A WORD\n' "$name"
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed" >&2
    exit 1
fi

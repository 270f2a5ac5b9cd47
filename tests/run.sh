#!/bin/sh
# Runs the source checks (tests/check_*.sh), every test binary
# ($BUILD/tests/test_*) and every CLI test script
# (tests/cli_*.sh) from the repository root, and stops at the first failure.
# Each prints "NAME: N passed, M failed" last; this sums them.
# Environment: BUILD (build dir, default build), CKPT_DIR (generated checkpoints).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
GPT=${GPT:-$BUILD/gpt}
export BUILD CKPT_DIR GPT
# Tuning (tune.h) is tested by test_tune; elsewhere it would only cost time,
# and no test writes wisdom to the real cache.
GPT_TUNE=${GPT_TUNE:-off}
cache=$(mktemp -d)
XDG_CACHE_HOME=$cache
export GPT_TUNE XDG_CACHE_HOME
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"; rm -rf "$cache"' EXIT
for t in tests/check_*.sh "$BUILD"/tests/test_* tests/cli_*.sh; do
    case "$t" in *.o|*.d) continue ;; esac
    [ -e "$t" ] || continue
    echo "== $t"
    start=$(date +%s)
    case "$t" in
        *.sh) sh "$t" >"$log" 2>&1 ;;
        *) "$t" >"$log" 2>&1 ;;
    esac
    rc=$?
    cat "$log"
    # seconds per program, so that a slow CI run shows where its time went
    echo "-- $t: $(( $(date +%s) - start )) s"
    line=$(grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    if [ $rc -ne 0 ]; then
        [ "${f:-0}" -eq 0 ] && failed=$((failed + 1))
        echo "FAILED: $t (exit $rc)"
        echo "total: $passed passed, $failed failed"
        exit 1
    fi
done
echo "total: $passed passed, $failed failed"
[ $failed -eq 0 ]

# checklib.sh - what the tests/check_*.sh scripts share, sourced with
# CHECK_NAME set: the counters, pass and fail, a scratch directory ($tmp,
# removed on exit), and summary, which prints the "NAME: N passed, M failed"
# line tests/run.sh counts and returns non-zero if anything failed. (Its
# name does not match check_*.sh, so run.sh does not run it as a check.)
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { passed=$((passed + 1)); }
fail() {
    echo "$CHECK_NAME: $*"
    failed=$((failed + 1))
}
summary() {
    echo "$CHECK_NAME: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

# skip WHY: "NAME: SKIPPED (WHY)" and the summary, exit 0; or, with
# GPT_TEST_REQUIRE_ALL=1 (.ci/run), a failure: every test must run there
skip() {
    if [ "${GPT_TEST_REQUIRE_ALL:-0}" = 1 ]; then
        fail "$1 (GPT_TEST_REQUIRE_ALL=1: it must run)"
        summary
        exit 1
    fi
    echo "$CHECK_NAME: SKIPPED ($1)"
    summary
    exit 0
}

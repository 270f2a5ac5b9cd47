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

# The one way a test meets a missing tool (tests/README.md): a named skip
# with the install line. skip WHY: "NAME: SKIPPED (WHY; install: ...)" and
# the summary, exit 0; or, with GPT_TEST_REQUIRE_ALL=1 (make test's
# default, and CI's), a failure: every test must run there
skip() {
    if [ "${GPT_TEST_REQUIRE_ALL:-0}" = 1 ]; then
        fail "$1 (GPT_TEST_REQUIRE_ALL=1: it must run; install: scripts/install-deps.sh test)"
        summary
        exit 1
    fi
    echo "$CHECK_NAME: SKIPPED ($1; install: scripts/install-deps.sh test)"
    summary
    exit 0
}

# skip_part WHY: a part of the test skipped, one line, and the rest goes
# on; a failure under GPT_TEST_REQUIRE_ALL=1, as skip
skip_part() {
    if [ "${GPT_TEST_REQUIRE_ALL:-0}" = 1 ]; then
        fail "$1 (GPT_TEST_REQUIRE_ALL=1: it must run; install: scripts/install-deps.sh test)"
    else
        echo "$CHECK_NAME: skipped: $1 (install: scripts/install-deps.sh test)"
    fi
}

# add_counts LOG WHAT: a checking program's output in LOG, printed but for
# its last line "RESULT PASSED FAILED", whose counts are added to ours; a
# LOG without that line (WHAT did not finish) is one failure
add_counts() {
    grep -v '^RESULT ' "$1"
    # shellcheck disable=SC2046 # two numbers
    set -- $(sed -n 's/^RESULT //p' "$1") "$2"
    if [ $# -eq 3 ]; then
        passed=$((passed + $1))
        failed=$((failed + $2))
    else
        fail "$1 did not finish"
    fi
}

# run_gpt OUT ARGS...: $GPT ARGS, its stdout in OUT.json, stderr in OUT.err
# and exit status in OUT.rc
run_gpt() {
    out=$1
    shift
    "$GPT" "$@" > "$out.json" 2> "$out.err"
    echo $? > "$out.rc"
}

# need_python MODULE...: skip unless /usr/bin/python3 (the tests' python:
# a python3 earlier on PATH may be another interpreter) imports each
need_python() {
    [ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed"
    for module in "$@"; do
        /usr/bin/python3 -c "import $module" 2> /dev/null || skip "/usr/bin/python3 with $module is not installed"
    done
}

# need TOOL...: skip unless each is a command here (a path such as
# /usr/bin/python3 is tried as it is)
need() {
    for tool in "$@"; do
        command -v "$tool" > /dev/null 2>&1 || skip "$tool is not installed"
    done
}

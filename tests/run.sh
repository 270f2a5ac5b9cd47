#!/bin/sh
# Runs the source checks (tests/check_*.sh), every test binary
# ($BUILD/tests/test_*) and every CLI test script (tests/cli_*.sh) from the
# repository root, TEST_JOBS of them at a time, and stops starting new ones
# at the first failure (those running are waited for; exit 1).
# Each prints "NAME: N passed, M failed" last; this sums them, and at the
# end lists each program's seconds and counts, the longest first. A program's
# output goes to a log of its own and is printed whole when it ends,
# between "== PROGRAM" and "-- PROGRAM: N s" (its seconds), so the output
# of programs running side by side never interleaves.
#
# The longest programs start first (SLOW below), so that none of them is
# left to run alone at the end. The programs of ALONE run with nothing
# beside them, after the others: each asserts on wall-clock time or sends
# a signal after a fixed delay, or loads every core on purpose:
#   test_threads      spins a process on every core ("cores busy")
#   test_tune         tuning the tiny model must take under 2 s (10 s
#                     under ASan), and it times the kernels it chooses
#   test_robust       SIGINT/SIGTERM 0.2-2.5 s into a run, EPIPE within 20 s
#   cli_serve_faults  the slowloris client closed within 1.5-6 s, others
#                     served within 2 s meanwhile
# Every other program is independent of the others: its scratch files are
# in a directory of its own (mkdtemp), its servers listen on a free port
# (--port 0), and it reads $BUILD and $CKPT_DIR without writing them.
#
# Before anything runs, scripts/install-deps.sh --check names each tool or
# package the tests need that is missing here, and the suite stops (exit
# 2): make test runs every test, none skips (GPT_TEST_REQUIRE_ALL=1 makes
# a skip a failure). GPT_TEST_REQUIRE_ALL=0 runs the suite anyway: the
# missing tools are listed as a note, and the programs that need them
# print "NAME: SKIPPED (why; the install line)" and pass.
#
# `tests/run.sh NAME...` runs only the programs named (test_sampler,
# cli_serve, cli_serve.sh), each with the environment it gets in the
# whole suite; a name that matches none is an error (exit 2).
#
# TEST_SET picks a part: all (the default), checks (tests/check_*.sh, the
# source checks: `make check`) or programs (the others: `make asan`, where
# the checks would read the same sources and print the same help).
#
# Environment: BUILD (build dir, default build), CKPT_DIR (generated
# checkpoints), TEST_JOBS (programs at a time; default the number of
# cores, 4 at most; 1 runs them one after another), GPT_TEST_REQUIRE_ALL
# (default 1, above).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
GPT=${GPT:-$BUILD/gpt}
export BUILD CKPT_DIR GPT
GPT_TEST_REQUIRE_ALL=${GPT_TEST_REQUIRE_ALL:-1}
export GPT_TEST_REQUIRE_ALL
if ! missing=$(sh scripts/install-deps.sh --check build test); then
    if [ "$GPT_TEST_REQUIRE_ALL" = 1 ]; then
        echo "make test needs what is not installed here:" >&2
        echo "$missing" | sed 's/^/    /' >&2
        echo "(or GPT_TEST_REQUIRE_ALL=0 to run without: the tests that need them skip)" >&2
        exit 2
    fi
    echo "note: not installed here, the tests that need them skip:"
    echo "$missing" | sed 's/^/    /'
fi
# One program per core (2 on the CI machine); past 4 the longest program
# (a few minutes) bounds the time, not the cores.
if [ -z "${TEST_JOBS:-}" ]; then
    TEST_JOBS=$(getconf _NPROCESSORS_ONLN 2> /dev/null || echo 1)
    [ "$TEST_JOBS" -gt 4 ] 2> /dev/null && TEST_JOBS=4
fi
case "$TEST_JOBS" in '' | *[!0-9]* | 0) TEST_JOBS=1 ;; esac
# Tuning (tune.h) is tested by test_tune; elsewhere it would only cost time,
# and no test writes wisdom to the real cache (each program gets a cache
# directory of its own under $work).
GPT_TUNE=${GPT_TUNE:-off}
export GPT_TUNE
# The npm test clients live in the real cache (.ci/run installs them there);
# name it now, before each program's XDG_CACHE_HOME moves under $work.
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}
export NODE_DIR

# by the file's name; SLOW longest first (seconds in make test and make
# asan on 2 cores: test_accuracy 78/225, test_speculate 11/172, test_batch
# 48/125, test_cli 35/135, cli_configs 38/130, cli_serve_embed 47/132,
# cli_serve 35/115, cli_gguf 24/112, test_matmul 37/105, cli_embed 37/101)
SLOW="test_accuracy test_speculate test_batch test_cli cli_configs.sh cli_serve_embed.sh cli_serve.sh cli_gguf.sh
      test_matmul cli_embed.sh test_forward check_readme.sh check_completion.sh"
ALONE="test_threads test_tune test_robust cli_serve_faults.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# each job writes its number here when it ends; fd 3 holds it open both
# ways, so a read waits for the next line and never sees an end of file
mkfifo "$work/done"
exec 3<> "$work/done"

# the programs, in the order they start: SLOW first, then the others in
# the order of the glob, then ALONE
all=""
case "${TEST_SET:=all}" in
    all) set_globs='tests/check_*.sh $BUILD/tests/test_* tests/cli_*.sh' ;;
    checks) set_globs='tests/check_*.sh' ;;
    programs) set_globs='$BUILD/tests/test_* tests/cli_*.sh' ;;
    *) echo "tests/run.sh: TEST_SET must be all, checks or programs, not '$TEST_SET'" >&2; exit 2 ;;
esac
for t in $(eval echo "$set_globs"); do
    case "$t" in *.o | *.d) continue ;; esac
    [ -e "$t" ] || continue
    all="$all $t"
done
if [ $# -gt 0 ]; then
    chosen=""
    for name in "$@"; do
        found=""
        for t in $all; do
            base=${t##*/}
            [ "$base" = "$name" ] || [ "${base%.sh}" = "$name" ] || continue
            chosen="$chosen $t"
            found=1
        done
        [ -n "$found" ] || { echo "tests/run.sh: no test program named '$name'" >&2; exit 2; }
    done
    all=$chosen
fi
# pick LIST...: the programs of $all whose file names are in LIST, in its order
pick() {
    for name in "$@"; do
        for t in $all; do [ "${t##*/}" = "$name" ] && echo "$t"; done
    done
}
# shellcheck disable=SC2086  # word lists; the names have no spaces
{
    shared=$(pick $SLOW)
    named=" $(printf "%s " $SLOW $ALONE)"
    for t in $all; do
        case "$named" in *" ${t##*/} "*) ;; *) shared="$shared $t" ;; esac
    done
    alone=$(pick $ALONE)
}

passed=0
failed=0
stop=""     # the first program that failed, and how
running=0
n=0

# start PROGRAM: runs it in the background, its output in $work/N.log;
# when it ends, $work/N.rc holds its exit status and seconds, and N goes
# into the fifo
start() {
    n=$((n + 1))
    echo "$1" > "$work/$n.name"
    mkdir "$work/$n.cache"
    (
        XDG_CACHE_HOME=$work/$n.cache
        export XDG_CACHE_HOME
        s=$(date +%s)
        case "$1" in
            *.sh) sh "$1" > "$work/$n.log" 2>&1 3>&- ;;
            *) "$1" > "$work/$n.log" 2>&1 3>&- ;;
        esac
        echo "$? $(($(date +%s) - s))" > "$work/$n.rc"
        echo "$n" >&3
    ) &
    running=$((running + 1))
}

# reap: waits for one program to end, prints its output and sums its counts
# (sh has no local variables: none of these is t, the variable of the loops)
reap() {
    read -r k <&3
    running=$((running - 1))
    prog=$(cat "$work/$k.name")
    read -r rc secs < "$work/$k.rc"
    echo "== $prog"
    cat "$work/$k.log"
    # seconds per program, so that a slow CI run shows where its time went
    echo "-- $prog: $secs s"
    line=$(grep -E '^[A-Za-z0-9_.-]+: [0-9]+ passed, [0-9]+ failed$' "$work/$k.log" | tail -n 1)
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + ${p:-0}))
    failed=$((failed + ${f:-0}))
    echo "$secs ${prog##*/} ${p:-0} ${f:-0}" >> "$work/times"
    if [ "$rc" -ne 0 ]; then
        [ "${f:-0}" -eq 0 ] && failed=$((failed + 1))
        stop="$stop
FAILED: $prog (exit $rc)"
    fi
    rm -rf "$work/$k.log" "$work/$k.cache"
}

for t in $shared; do
    [ -n "$stop" ] && break
    while [ $running -ge "$TEST_JOBS" ]; do reap; done
    [ -n "$stop" ] && break
    start "$t"
done
while [ $running -gt 0 ]; do reap; done
for t in $alone; do
    [ -n "$stop" ] && break
    start "$t"
    reap
done
wait
# each program's seconds and counts, the longest first: where the time went
if [ -s "$work/times" ]; then
    echo "programs, longest first (seconds, passed, failed):"
    sort -k1,1nr "$work/times" | awk '{ printf "  %5d s  %-28s %8d %4d\n", $1, $2, $3, $4 }'
fi
if [ -n "$stop" ]; then
    echo "${stop#?}"
    echo "total: $passed passed, $failed failed"
    exit 1
fi
echo "total: $passed passed, $failed failed"
[ $failed -eq 0 ]

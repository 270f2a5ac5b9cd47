# ready.sh - waiting for a `gpt serve` started in the background, sourced by
# the tests and benches that start one.
#
# wait_serving LOG PID [TENTHS]: waits until the server PID, its stderr in
# LOG, prints its ready line "gpt: serving ... on http://127.0.0.1:PORT".
# Sets $port and returns 0; returns 1 with $port empty when PID exits first
# or TENTHS tenths of a second pass (default 600, 60 s: a sanitizer build
# on a busy machine loads slowly).
wait_serving() {
    port=
    wait_tenths=0
    while [ "$wait_tenths" -lt "${3:-600}" ]; do
        port=$(sed -n 's|^gpt: serving .* on http://127\.0\.0\.1:\([0-9][0-9]*\)$|\1|p' "$1")
        [ -n "$port" ] && return 0
        kill -0 "$2" 2> /dev/null || return 1
        sleep 0.1
        wait_tenths=$((wait_tenths + 1))
    done
    return 1
}

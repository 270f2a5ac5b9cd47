#!/bin/sh
# check-fresh-debian.sh - does what a new user does, on a machine that has
# nothing yet: a minimal Debian chroot (debootstrap --variant=minbase), a
# clone of this repository's HEAD in it, the commands of README.md's
# Install section run in it as the README shows them (all but `make
# install`), and then the summary of what `make test` printed: its total
# line, and every FAILED or SKIPPED line.
#
#   sudo scripts/check-fresh-debian.sh [DIR]
#
# DIR (default /var/tmp/gpt-fresh-debian) must not exist; it is removed at
# the end unless KEEP=1. Needs root, debootstrap and the network (Debian's
# mirror, MIRROR, default http://deb.debian.org/debian, and the npm
# registry); SUITE picks the release (default bookworm). It takes many
# minutes (the base system, the packages, the build, make test) and is run
# by hand, not by make test. The whole log is DIR.log. The host's CA
# certificates go to npm in the chroot (NODE_EXTRA_CA_CERTS), for a network
# behind a TLS-inspecting proxy whose certificate the host trusts.
# Exit: 0 when every command passed (make test: no failure, and no skip,
# since a skip fails there), 1 debootstrap failed, else the status of the
# command that failed; 2 a bad argument or a missing tool.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/var/tmp/gpt-fresh-debian}
suite=${SUITE:-bookworm}
mirror=${MIRROR:-http://deb.debian.org/debian}
log=$dir.log

[ "$(id -u)" -eq 0 ] || { echo "check-fresh-debian.sh: run it as root (chroot, mount)" >&2; exit 2; }
command -v debootstrap > /dev/null 2>&1 || {
    echo "check-fresh-debian.sh: debootstrap is not installed (apt-get install debootstrap)" >&2
    exit 2
}
[ -e "$dir" ] && { echo "check-fresh-debian.sh: $dir exists: name a new directory" >&2; exit 2; }

# the Install section's commands, as the README shows them: its indented
# lines, comments cut, `make install` left out (it writes outside the clone)
commands=$(awk '/^## Install/ { on = 1; next } /^## / { on = 0 } on && /^    [^ ]/' "$repo/README.md" |
    sed 's/^    //; s/ *#.*$//' | grep -v '^make install')
[ -n "$commands" ] || { echo "check-fresh-debian.sh: no commands in README.md's Install section" >&2; exit 2; }

mounted=""
cleanup() {
    for m in $mounted; do umount -l "$m" 2> /dev/null || true; done
    [ "${KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "check-fresh-debian: debootstrap $suite into $dir (log: $log)"
debootstrap --variant=minbase "$suite" "$dir" "$mirror" > "$log" 2>&1 || {
    echo "check-fresh-debian: debootstrap failed:" >&2
    tail -n 5 "$log" >&2
    exit 1
}
cp /etc/resolv.conf "$dir/etc/resolv.conf"
mount -t proc proc "$dir/proc" && mounted="$dir/proc $mounted"
mount -t sysfs sys "$dir/sys" && mounted="$dir/sys $mounted"
mount --bind /dev "$dir/dev" && mounted="$dir/dev $mounted"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$dir/dev/pts" && mounted="$dir/dev/pts $mounted"
mount -t tmpfs tmpfs "$dir/dev/shm" && mounted="$dir/dev/shm $mounted"

# the committed tree (what a clone gets), without git in the chroot
mkdir -p "$dir/root/gpt"
git -C "$repo" archive HEAD | tar -x -C "$dir/root/gpt"
echo "check-fresh-debian: the README's commands, in /root/gpt:"
echo "$commands" | sed 's/^/    /'

extra_ca=""
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$dir/root/host-ca.crt"
    extra_ca=NODE_EXTRA_CA_CERTS=/root/host-ca.crt
fi

status=0
# shellcheck disable=SC2086  # $extra_ca: one word or none
chroot "$dir" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin TERM=dumb \
    LANG=C.UTF-8 $extra_ca /bin/sh -c "cd /root/gpt && set -ex
$commands" >> "$log" 2>&1 || status=$?

echo "check-fresh-debian: make test's summary:"
grep -E '^(total: |FAILED: )|SKIPPED|: skipped|make test needs|missing: ' "$log" | sed 's/^/    /' || true
if [ "$status" -ne 0 ]; then
    echo "check-fresh-debian: a command failed (exit $status); the last lines of $log:"
    tail -n 15 "$log" | sed 's/^/    /'
fi
exit "$status"

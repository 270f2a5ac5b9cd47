#!/bin/sh
# install-deps.sh - the one list of what gpt needs, and its installer.
# README.md's Install section runs it, and so does .ci/run: the two cannot
# drift. tests/run.sh (make test) asks it what is missing before it runs
# anything, and check_readme.sh builds gpt with the build part's packages
# alone.
#
#   scripts/install-deps.sh [PART...]           install what PART needs (default: build test)
#   scripts/install-deps.sh --check [PART...]   print what is missing, one line each; exit 1 if any
#   scripts/install-deps.sh --list PART...      print PART's Debian packages on one line
#
# PART is one of
#   build   compile gpt: the compiler, pkg-config and the four libraries
#   test    make test: the tools the test scripts call (curl, jq, python3
#           with numpy and jsonschema, GNU parallel, groff and man, node
#           with the `openai`, `@langchain/openai` and `ollama` npm clients,
#           chromium)
#   ci      what .ci/run adds: clang and its sanitizer and libFuzzer
#           runtimes (make asan, make fuzz), haproxy (make test-scale)
#
# Debian 12 and Ubuntu 22.04 or later (apt-get). Packages are installed
# with apt-get, through sudo unless run as root; the npm clients go into
# ${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node as the user who runs this
# (outside the repository, where tests/run.sh looks for them), so run it
# as yourself, not under sudo.
# Exit: 0 done (or nothing missing), 1 something missing (--check) or an
# install failed, 2 a bad argument.
set -eu

# Each requirement is "PACKAGE PROBE": the Debian package, and how to tell
# it is there without dpkg (a node from elsewhere counts): cmd:NAME a
# command on PATH, py:MODULE a module of /usr/bin/python3 (the tests' python;
# a python3 earlier on PATH may be another interpreter), pc:NAME a
# pkg-config package, npm:NAME an npm package in $NODE_DIR, rt:FILE a
# runtime library of clang's. A PACKAGE of the form a|b is the first of
# them that apt knows; one that ends in ? is skipped where apt has none.
build_reqs="build-essential:cmd:cc
pkg-config:cmd:pkg-config
libopenblas-dev:pc:openblas
libcjson-dev:pc:libcjson
libutf8proc-dev:pc:libutf8proc
libmicrohttpd-dev:pc:libmicrohttpd"
test_reqs="curl:cmd:curl
jq:cmd:jq
python3:cmd:/usr/bin/python3
python3-numpy:py:numpy
python3-jsonschema:py:jsonschema
parallel:cmd:parallel
groff-base:cmd:groff
man-db:cmd:man
chromium|chromium-browser:cmd:chromium|chromium-browser
nodejs:cmd:node
npm:cmd:npm
openai@6:npm:openai
@langchain/openai@1:npm:@langchain/openai
ollama@0:npm:ollama"
ci_reqs="clang:cmd:clang
libclang-rt-14-dev?:rt:libclang_rt.fuzzer-x86_64.a
haproxy:cmd:haproxy"

NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}

usage() {
    echo "usage: scripts/install-deps.sh [--check | --list] [build] [test] [ci]" >&2
    exit 2
}

mode=install
case "${1:-}" in
    --check) mode=check; shift ;;
    --list) mode=list; shift ;;
    -h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "install-deps.sh: unknown option '$1'" >&2; usage ;;
esac
[ $# -eq 0 ] && set -- build test
reqs=""
for part in "$@"; do
    case "$part" in
        build) reqs="$reqs$build_reqs
" ;;
        test) reqs="$reqs$test_reqs
" ;;
        ci) reqs="$reqs$ci_reqs
" ;;
        *) echo "install-deps.sh: unknown part '$part'" >&2; usage ;;
    esac
done

# present PROBE: whether the requirement is met here
present() {
    kind=${1%%:*} what=${1#*:}
    case "$kind" in
        cmd)
            for c in $(echo "$what" | tr '|' ' '); do
                command -v "$c" > /dev/null 2>&1 && return 0
            done
            return 1 ;;
        py) /usr/bin/python3 -c "import $what" > /dev/null 2>&1 ;;
        pc) pkg-config --exists "$what" > /dev/null 2>&1 ;;
        npm) [ -f "$NODE_DIR/node_modules/$what/package.json" ] ;;
        # a runtime of clang's (Debian 12 ships libFuzzer's apart from
        # clang, in libclang-rt-14-dev; elsewhere it may come with clang)
        rt) command -v clang > /dev/null 2>&1 &&
            [ -e "$(clang -print-resource-dir)/lib/linux/$what" ] ;;
    esac
}


if [ "$mode" = list ]; then
    printf '%s\n' "$reqs" | sed '/^$/d' | while IFS=: read -r pkg kind _; do
        [ "$kind" = npm ] && continue
        pkg=${pkg%\?}
        printf '%s\n' "${pkg%%|*}"
    done | tr '\n' ' ' | sed 's/ $//'
    echo
    exit 0
fi

missing_apt=""
missing_npm=""
missing_all=""
for line in $reqs; do
    pkg=${line%%:*} probe=${line#*:}
    present "$probe" && continue
    missing_all="$missing_all ${pkg%\?}"
    case "${probe%%:*}" in
        npm) missing_npm="$missing_npm $pkg" ;;
        *) missing_apt="$missing_apt $pkg" ;;
    esac
done

if [ "$mode" = check ]; then
    [ -z "$missing_all" ] && exit 0
    for p in $missing_all; do echo "missing: $p"; done
    echo "install them with: scripts/install-deps.sh $*"
    exit 1
fi

if [ -n "$missing_apt" ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo > /dev/null 2>&1 || {
            echo "install-deps.sh: not root and no sudo: install as root:$missing_apt" >&2
            exit 1
        }
        sudo=sudo
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_pkgs=""
    for p in $missing_apt; do
        optional=""
        case "$p" in *\?) optional=1; p=${p%\?} ;; esac
        chosen=""
        for alt in $(echo "$p" | tr '|' ' '); do
            if apt-cache show "$alt" > /dev/null 2>&1; then chosen=$alt; break; fi
        done
        if [ -n "$chosen" ]; then
            apt_pkgs="$apt_pkgs $chosen"
        elif [ -z "$optional" ]; then
            echo "install-deps.sh: apt knows no package $p" >&2
            exit 1
        fi
    done
    # shellcheck disable=SC2086  # a list of package names
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $apt_pkgs
fi
if [ -n "$missing_npm" ]; then
    mkdir -p "$NODE_DIR"
    # shellcheck disable=SC2086  # a list of package specs
    npm install --prefix "$NODE_DIR" --no-audit --no-fund $missing_npm
fi

#!/bin/sh
# gpt-get-gpt2 - fetch OpenAI's GPT-2 (124M) from Hugging Face and convert it
# into gpt's one-file model.bin. (This is scripts/get-gpt2.sh of the source
# tree, which `make install` installs as gpt-get-gpt2.)
#
#   gpt-get-gpt2                download openai-community/gpt2, write gpt2.bin
#   gpt-get-gpt2 --from DIR     convert a local copy instead (DIR holds
#                               config.json and model.safetensors, and
#                               vocab.json + merges.txt if it has them)
#   --out PATH                  where the model.bin goes (default: models/gpt2.bin
#                               in a source checkout; installed, gpt2.bin in
#                               ${XDG_DATA_HOME:-~/.local/share}/gpt, where gpt looks)
#   --force                     replace an existing model.bin
#   -h, --help                  this text
#
# The files are downloaded into a temporary directory beside the output, each
# size checked, and the directory moved into place (as gpt2/) only once all
# of them are complete: a failed or interrupted download leaves nothing
# behind (nor the directories made for it), and gpt never finds half a
# checkpoint. `gpt convert` writes its
# file under its final name only when complete.
# Environment: GPT (the gpt binary; default: ./gpt or build/gpt in a source
# checkout, else gpt beside this script, else gpt on the PATH).
# Exit codes: 0 done, 1 a failed download or conversion, 2 a usage error,
# 130 interrupted.
set -eu

URL=https://huggingface.co/openai-community/gpt2/resolve/main
FROM=
OUT=
FORCE=

# Messages name the script as it was run: gpt-get-gpt2 once installed.
me=$(basename "$0")

die() {
    echo "$me: $*" >&2
    exit 1
}

usage() {
    echo "usage: $me [--from DIR] [--out PATH] [--force]" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --from) [ $# -ge 2 ] || usage; FROM=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
        --force) FORCE=--force; shift ;;
        # the comment at the top of this file, less its "# "
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) usage ;;
    esac
done

# A source checkout (run as scripts/get-gpt2.sh from it) or an installed copy.
here=$(dirname "$0")
if [ -f "$here/../src/cli/main.c" ]; then
    root=$here/..
    [ -n "$OUT" ] || OUT=$root/models/gpt2.bin
    if [ -z "${GPT:-}" ]; then
        if [ -x "$root/gpt" ]; then GPT=$root/gpt; else GPT=$root/build/gpt; fi
    fi
else
    [ -n "$OUT" ] || OUT=${XDG_DATA_HOME:-$HOME/.local/share}/gpt/gpt2.bin
    if [ -z "${GPT:-}" ]; then
        if [ -x "$here/gpt" ]; then GPT=$here/gpt; else GPT=$(command -v gpt || echo gpt); fi
    fi
fi
command -v "$GPT" >/dev/null 2>&1 || [ -x "$GPT" ] || die "$GPT not found: build it (make) or set GPT"
if [ -e "$OUT" ] && [ -z "$FORCE" ]; then
    die "$OUT exists (--force replaces it)"
fi
outdir=$(dirname "$OUT")
# A run that fails leaves nothing: not its download, nor the directories it
# made for the output (~/.local/share/gpt), which are removed if still empty.
made=
d=$outdir
while [ ! -e "$d" ]; do
    made=$d
    d=$(dirname "$d")
done
TMP=
on_exit() {
    rc=$?
    [ -z "$TMP" ] || rm -rf "$TMP"
    if [ "$rc" -ne 0 ] && [ -n "$made" ]; then
        d=$outdir
        while rmdir "$d" 2>/dev/null && [ "$d" != "$made" ]; do d=$(dirname "$d"); done
    fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$outdir" || die "cannot create $outdir"

size_of() { wc -c <"$1" | tr -d ' '; }

if [ -n "$FROM" ]; then
    [ -d "$FROM" ] || die "$FROM: not a directory"
    for f in config.json model.safetensors; do
        [ -f "$FROM/$f" ] || die "$FROM/$f: missing"
    done
    SRC=$FROM
else
    command -v curl >/dev/null 2>&1 || die "curl not found (or use --from DIR with a local copy)"
    DIR=$outdir/gpt2
    if [ -f "$DIR/model.safetensors" ] && [ "$(size_of "$DIR/model.safetensors")" = 548105171 ] &&
        [ -s "$DIR/config.json" ]; then
        echo "$me: $DIR already complete"
    else
        # Offline (no route, no name server): one try of one byte, one
        # line saying so, before any download and its retries and meter.
        if ! err=$(curl -sS -fL --max-time 30 -r 0-0 -o /dev/null "$URL/config.json" 2>&1); then
            err=$(printf '%s\n' "$err" | head -n 1)
            die "cannot reach ${URL%%/openai-community*} (${err#curl: }): offline? (--from DIR converts a local copy)"
        fi
        # everything into a temporary directory; moved into place when complete
        TMP=$(mktemp -d "$outdir/.gpt2-download.XXXXXX") || die "cannot create a directory in $outdir"
        # the progress meter on a terminal only; errors always
        meter=-sS
        [ -t 2 ] && meter=-#
        # name SIZE: SIZE "-" accepts any non-empty file (config.json)
        fetch() {
            echo "$me: downloading $URL/$1"
            curl -fL $meter --retry 3 -o "$TMP/$1" "$URL/$1" || die "download of $1 failed"
            got=$(size_of "$TMP/$1")
            [ "$got" = "$2" ] || { [ "$2" = - ] && [ "$got" -gt 0 ]; } ||
                die "$1: $got bytes, expected $2 (an incomplete download?)"
        }
        # the sizes of the files as published (the tokenizer files are the ones in models/)
        fetch model.safetensors 548105171
        fetch config.json -
        fetch vocab.json 1042301
        fetch merges.txt 456318
        rm -rf "$DIR"
        mv "$TMP" "$DIR" || die "cannot move the download to $DIR"
        TMP=
    fi
    SRC=$DIR
fi

# The tokenizer beside the weights if there is one; else gpt uses the shipped one.
if [ -f "$SRC/vocab.json" ] && [ -f "$SRC/merges.txt" ]; then
    "$GPT" convert "$SRC" "$OUT" --tokenizer "$SRC" $FORCE
else
    "$GPT" convert "$SRC" "$OUT" $FORCE
fi
echo "$me: done; run: $GPT -m $OUT -p \"Hello\""

#!/bin/sh
# get-gpt2.sh - fetch OpenAI's GPT-2 (124M) from Hugging Face and convert it
# into gpt's one-file model.bin.
#
#   scripts/get-gpt2.sh                 download openai-community/gpt2 into
#                                       models/gpt2/, then write models/gpt2.bin
#   scripts/get-gpt2.sh --from DIR      convert a local copy instead (DIR holds
#                                       config.json and model.safetensors, and
#                                       vocab.json + merges.txt if it has them)
#   --out PATH                          where the model.bin goes
#                                       (default models/gpt2.bin)
#
# Downloads use curl, skip files already complete, and check each size before
# anything is converted, so a cut-off download is caught here rather than by
# the loader. `gpt convert` writes to a temporary file and renames it, so an
# interrupted run never leaves a half-written model.bin.
# Environment: GPT (the gpt binary; default ./gpt, else build/gpt).
set -eu

URL=https://huggingface.co/openai-community/gpt2/resolve/main
DIR=models/gpt2
OUT=models/gpt2.bin
FROM=

die() {
    echo "get-gpt2.sh: $*" >&2
    exit 1
}

usage() {
    echo "usage: scripts/get-gpt2.sh [--from DIR] [--out PATH]" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
        --from) [ $# -ge 2 ] || usage; FROM=$2; shift 2 ;;
        --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) usage ;;
    esac
done

if [ -z "${GPT:-}" ]; then
    if [ -x ./gpt ]; then GPT=./gpt; else GPT=build/gpt; fi
fi
[ -x "$GPT" ] || die "$GPT not found: run make first (or set GPT)"

size_of() { wc -c <"$1" | tr -d ' '; }

# fetch FILE SIZE: download $URL/FILE into $DIR unless it is already complete.
# SIZE "-" accepts any non-empty file (config.json: its size is not pinned).
fetch() {
    f=$DIR/$1
    if [ -f "$f" ] && { [ "$(size_of "$f")" = "$2" ] || { [ "$2" = - ] && [ -s "$f" ]; }; }; then
        echo "get-gpt2.sh: $f already complete"
        return 0
    fi
    echo "get-gpt2.sh: downloading $URL/$1"
    curl -fL --retry 3 -o "$f.part" "$URL/$1" || die "download of $1 failed"
    got=$(size_of "$f.part")
    [ "$got" = "$2" ] || { [ "$2" = - ] && [ "$got" -gt 0 ]; } || die "$f: $got bytes, expected $2 (incomplete download? delete it and retry)"
    mv "$f.part" "$f"
}

if [ -n "$FROM" ]; then
    [ -d "$FROM" ] || die "$FROM: not a directory"
    for f in config.json model.safetensors; do
        [ -f "$FROM/$f" ] || die "$FROM/$f: missing"
    done
    SRC=$FROM
else
    command -v curl >/dev/null 2>&1 || die "curl not found (or use --from DIR with a local copy)"
    mkdir -p "$DIR"
    # Sizes of the files as published (the tokenizer files are the ones in models/).
    fetch model.safetensors 548105171
    fetch config.json -
    fetch vocab.json 1042301
    fetch merges.txt 456318
    SRC=$DIR
fi

# The tokenizer beside the weights if there is one; else gpt uses the shipped one.
if [ -f "$SRC/vocab.json" ] && [ -f "$SRC/merges.txt" ]; then
    "$GPT" convert "$SRC" "$OUT" --tokenizer "$SRC"
else
    "$GPT" convert "$SRC" "$OUT"
fi
echo "get-gpt2.sh: done; run: $GPT -m $OUT -p \"Hello\""

#!/bin/sh
# Writes the deterministic test checkpoints of FORMULA.md with our own
# generator ($BUILD/tests/gen_checkpoint) and checks each against the
# published sha256 of its tensor data region (everything after the 8-byte
# length and the JSON header). A mismatch stops `make test` loudly: every
# reference number in tests/fixtures was computed on exactly these bytes.
#
#   $CKPT_DIR/tiny               2 layers, C 64, 4 heads, ctx 128 (byte-identical to make_checkpoint.py)
#   $CKPT_DIR/gpt2-124M-shaped   the 124M shape, with the h.N.attn.bias mask buffers
#                                and unaligned tensor data, as the published gpt2 file has
#   $CKPT_DIR/tiny-prefix        tiny with "transformer." keys (same data region)
#   $CKPT_DIR/tiny-f16, tiny-bf16  tiny stored as F16 / BF16 (no published sum)
#   $CKPT_DIR/tiny-llmc.bin      tiny as an llm.c checkpoint (float32, version 3)
#
# A verified checkpoint leaves NAME.verified holding its sum; while that is
# newer than the file and holds the expected sum, it is not regenerated.
# Environment: BUILD (default build), CKPT_DIR (default build/ckpt).
set -eu
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
GEN=$BUILD/tests/gen_checkpoint

# Published sums of the tensor data regions (FORMULA.md).
SUM_TINY=6c27cd26e06964760d45ccfcd3c721e8bcd984ddd66cb49d3ab728e4dc051045
SUM_124M=a33c9a958083308b24e01bc749d9dfa7ab99ac39d8f2f755736aab4596526ddc
# sha256 of the whole tiny file, as make_checkpoint.py writes it: proves the
# header is byte-identical too.
SUM_TINY_FILE=f20eb2fe05af22c2a20a58ae1739278e4ee06a53c79741e929d7a45bd81ed8df

TINY="--layers 2 --embd 64 --heads 4 --ctx 128"

die() {
    echo "make_checkpoints.sh: $*" >&2
    exit 1
}

[ -x "$GEN" ] || die "$GEN not built (make $GEN)"
mkdir -p "$CKPT_DIR"

# sha256 of the data region of a safetensors file: skip 8 + N bytes, where N
# is the little-endian u64 at the start.
data_sum() {
    n=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    [ -n "$n" ] || die "$1: cannot read the header length"
    tail -c +$((8 + n + 1)) "$1" | sha256sum | cut -d' ' -f1
}

# is_verified NAME SUM: the stamp exists, is newer than the file, holds SUM
is_verified() {
    f=$CKPT_DIR/$1/model.safetensors
    s=$CKPT_DIR/$1.verified
    [ -f "$f" ] && [ -f "$s" ] && [ "$s" -nt "$f" ] && [ "$(cat "$s")" = "$2" ]
}

# make_verified NAME SUM FLAGS...: generate into NAME.tmp, check, move into place
make_verified() {
    name=$1
    want=$2
    shift 2
    if is_verified "$name" "$want"; then
        return 0
    fi
    tmp=$CKPT_DIR/$name.tmp
    rm -rf "$tmp" "$CKPT_DIR/$name.verified"
    echo "make_checkpoints.sh: writing $CKPT_DIR/$name"
    "$GEN" "$tmp" "$@" || die "$GEN failed for $name"
    got=$(data_sum "$tmp/model.safetensors")
    if [ "$got" != "$want" ]; then
        echo "make_checkpoints.sh: $CKPT_DIR/$name: tensor data sha256 MISMATCH" >&2
        echo "    expected $want" >&2
        echo "    got      $got" >&2
        echo "    (the generator no longer follows FORMULA.md; the broken files are left in $tmp)" >&2
        exit 1
    fi
    rm -rf "${CKPT_DIR:?}/$name"
    mv "$tmp" "$CKPT_DIR/$name"
    echo "$want" >"$CKPT_DIR/$name.verified"
}

# shellcheck disable=SC2086  # $TINY is a list of flags
make_verified tiny "$SUM_TINY" $TINY
got=$(sha256sum "$CKPT_DIR/tiny/model.safetensors" | cut -d' ' -f1)
[ "$got" = "$SUM_TINY_FILE" ] || die "$CKPT_DIR/tiny/model.safetensors: file sha256 $got, expected $SUM_TINY_FILE (header differs from make_checkpoint.py's)"

make_verified gpt2-124M-shaped "$SUM_124M" --mask-buffers --unaligned-data
# shellcheck disable=SC2086
make_verified tiny-prefix "$SUM_TINY" $TINY --prefix transformer.

# Small variants without a published sum: the loader tests check their values
# against the formula. Rewritten when the generator is newer than them.
stamp=$CKPT_DIR/variants.stamp
if [ ! -f "$stamp" ] || [ "$GEN" -nt "$stamp" ]; then
    echo "make_checkpoints.sh: writing the tiny F16/BF16/llm.c variants"
    rm -f "$stamp"
    # shellcheck disable=SC2086
    "$GEN" "$CKPT_DIR/tiny-f16" $TINY --dtype F16 || die "$GEN failed for tiny-f16"
    # shellcheck disable=SC2086
    "$GEN" "$CKPT_DIR/tiny-bf16" $TINY --dtype BF16 || die "$GEN failed for tiny-bf16"
    # shellcheck disable=SC2086
    "$GEN" --llmc "$CKPT_DIR/tiny-llmc.bin" $TINY || die "$GEN failed for tiny-llmc.bin"
    touch "$stamp"
fi
echo "make_checkpoints.sh: checkpoints in $CKPT_DIR verified"

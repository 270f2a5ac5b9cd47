#!/bin/sh
# Constrained decoding beside the plain run (issue 38's targets: at least
# 0.9x the plain decode on the 124M-shaped checkpoint, 0.75x on the demo
# model; compiling a schema and the first mask under 20 ms). In the same
# run, interleaved, best of ROUNDS: decode tok/s (--json's
# stats.decode_tok_s) of the plain run, a nested JSON Schema and a regex,
# the tokens each made (a constrained run may end early, "grammar"), and
# the ratio to the plain run of 128 tokens and to a plain run of as many
# tokens as the constrained one (the same steps, at the same positions,
# less the constraint); then the whole process of a one-token run with
# the schema against the same without it, best of ROUNDS: the difference is
# the schema's compilation and the first token's mask. Called by run.sh;
# runs alone too. Environment: BUILD, CKPT_DIR, DEMO (as run.sh), ROUNDS
# (default 3).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
DEMO=${DEMO:-models/demo.bin}
ROUNDS=${ROUNDS:-3}
GPT=$BUILD/gpt
M124=$CKPT_DIR/gpt2-124M-shaped
set -e
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

cat > "$TMP/schema.json" <<'S'
{"type": "object",
 "properties": {
   "title": {"type": "string", "maxLength": 40},
   "year": {"type": "integer", "minimum": 1000, "maximum": 2100},
   "people": {"type": "array", "maxItems": 8,
              "items": {"type": "object",
                        "properties": {"name": {"type": "string", "maxLength": 30},
                                       "age": {"type": "integer", "minimum": 0, "maximum": 120}},
                        "required": ["name", "age"]}}},
 "required": ["title", "year", "people"]}
S
REGEX='[A-Z][a-z]{1,12}( [a-z]{1,12}){10,60}\.'
PROMPT="The record of the book, as JSON:"

json_num() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"; }
max() { echo "$1 $2" | awk '{ print ($2 > $1) ? $2 : $1 }'; }
min() { echo "$1 $2" | awk '{ print ($2 < $1) ? $2 : $1 }'; }

# rate KIND MODEL [N]: one run's "decode_tok_s tokens" (N tokens at most, 128 by default)
rate() {
    n=${3:-128}
    case $1 in
        plain*) set -- "$2" --ignore-eos ;;
        schema) set -- "$2" --json-schema "$TMP/schema.json" ;;
        regex) set -- "$2" --regex "$REGEX" ;;
    esac
    model=$1
    shift
    "$GPT" -m "$model" -q -p "$PROMPT" -n "$n" -s 3 -t 1 --json "$@" > "$TMP/out.json"
    echo "$(json_num decode_tok_s "$TMP/out.json") $(jq '.tokens | length' "$TMP/out.json")"
}

for model in "$DEMO" "$M124"; do
    [ -e "$model" ] || continue
    best_plain=0 best_schema=0 best_regex=0 best_plain_schema=0 best_plain_regex=0
    for round in $(seq "$ROUNDS"); do
        for kind in plain schema regex plain_schema plain_regex; do
            case $kind in
                plain_*) eval "r=\$(rate plain \"\$model\" \$n_${kind#plain_})" ;;
                *) r=$(rate $kind "$model") ;;
            esac
            eval "best_$kind=\$(max \$best_$kind ${r% *})"
            eval "n_$kind=${r#* }"
        done
    done
    echo "$model, one thread, -n 128:"
    printf '  %-7s %8.1f tok/s  1.00x plain  (%d tokens)\n' plain "$best_plain" "$n_plain"
    for kind in schema regex; do
        eval "b=\$best_$kind n=\$n_$kind same=\$best_plain_$kind"
        echo "$b $best_plain $n $same" | awk -v k=$kind '{ printf "  %-7s %8.1f tok/s  %.2fx plain  (%d tokens; %.2fx a plain run of %d tokens, %.1f tok/s)\n", k, $1, $1 / $2, $3, $1 / $4, $3, $4 }'
    done
    # the whole process, one token: with the schema less without it
    wall_plain=1e9 wall_schema=1e9
    for round in $(seq "$ROUNDS"); do
        for kind in plain schema; do
            flags=""
            [ $kind = schema ] && flags="--json-schema $TMP/schema.json"
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086  # flags is a word list with no spaces in its words
            "$GPT" -m "$model" -q -p "$PROMPT" -n 1 -s 3 -t 1 $flags > "$TMP/one.txt"
            t1=$(date +%s.%N)
            eval "wall_$kind=\$(min \$wall_$kind \$(echo $t0 $t1 | awk '{ print \$2 - \$1 }'))"
        done
    done
    echo "$wall_schema $wall_plain" |
        awk '{ printf "  schema compiled and the first mask: %.1f ms (a one-token process %.1f ms with it, %.1f ms without)\n", ($1 - $2) * 1000, $1 * 1000, $2 * 1000 }'
done

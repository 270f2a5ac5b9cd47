#!/bin/sh
# Speculative decoding beside the plain run, in the same run, interleaved,
# best of 3 rounds: decode tok/s (--json's stats.decode_tok_s, the draft's
# time included), the ratio, the acceptance, tokens per model step, what a
# verify step of K + 1 rows costs against a plain one-token step, and the
# draft's share of the decode time. Called by run.sh; runs alone too.
# Environment: BUILD, CKPT_DIR, DEMO (as run.sh), ROUNDS (default 3).
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
DEMO=${DEMO:-models/demo.bin}
ROUNDS=${ROUNDS:-3}
GPT=$BUILD/gpt
M124=$CKPT_DIR/gpt2-124M-shaped
set -e
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for dt in f32 f16; do
    # converted again when gpt is newer than the file (its converter may have changed)
    [ "$CKPT_DIR/124M-$dt.bin" -nt "$GPT" ] || "$GPT" convert "$M124" "$CKPT_DIR/124M-$dt.bin" --dtype $dt --force || exit 1
done

json_num() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" "$2"; }
max() { echo "$1 $2" | awk '{ print ($2 > $1) ? $2 : $1 }'; }

# spec_case LABEL MODEL THREADS N PROMPT DRAFT-FLAGS SAMPLING-FLAGS...
spec_case() {
    label=$1 model=$2 t=$3 n=$4 prompt=$5 draft=$6
    shift 6
    plain=0 spec=0
    for round in $(seq "$ROUNDS"); do
        "$GPT" -m "$model" -p "$prompt" -n "$n" --ignore-eos -t "$t" --json "$@" >"$TMP/p.json" 2>/dev/null
        # shellcheck disable=SC2086  # $draft is several words
        "$GPT" -m "$model" -p "$prompt" -n "$n" --ignore-eos -t "$t" --json "$@" $draft >"$TMP/s.json" 2>/dev/null
        p=$(json_num decode_tok_s "$TMP/p.json")
        s=$(json_num decode_tok_s "$TMP/s.json")
        plain=$(max "$plain" "$p")
        if [ "$(max "$spec" "$s")" != "$spec" ]; then spec=$s; cp "$TMP/s.json" "$TMP/best.json"; fi
        # the same tokens, or the bench says so loudly (all before the seed,
        # which a greedy run draws at random and prints)
        if [ "$(sed 's/"seed".*//' "$TMP/p.json")" != "$(sed 's/"seed".*//' "$TMP/s.json")" ]; then
            echo "  $label: SPECULATION CHANGED THE OUTPUT"
        fi
    done
    acc=$(json_num acceptance "$TMP/best.json")
    per=$(json_num tokens_per_forward "$TMP/best.json")
    fw=$(json_num decode_forwards "$TMP/best.json")
    dsec=$(json_num draft_seconds "$TMP/best.json")
    share=$(json_num draft_share "$TMP/best.json")
    dtok=$(json_num decode_tokens "$TMP/best.json")
    echo "$plain $spec $acc $per $fw $dsec $share $dtok $t" | awk -v label="$label" '{
        verify = ($8 / $2 - $6) / $5          # seconds of one verify step: decode time less the draft time, per step
        printf "  %-40s %d thread%s: plain %6.1f, speculative %6.1f tok/s = %.2fx; accepted %3.0f%%, %.2f tokens/step, a verify step %.2fx a plain step, draft %2.0f%% of decode\n",
            label, $9, ($9 > 1 ? "s" : " "), $1, $2, $2 / $1, 100 * $3, $4, verify * $1, 100 * $7 }'
}

prompt="The history of the world is the history of a few men who had faith in themselves, and"
echo "  GPT-2 124M-shaped checkpoint (hash-noise weights), a $("$GPT" -m "$M124" --tokenize -p "$prompt" | wc -w)-token prompt, -n 128:"
for t in 1 2; do
    for dt in f32 f16; do
        spec_case "$dt, q8 draft of itself, greedy" "$CKPT_DIR/124M-$dt.bin" $t 128 "$prompt" "--draft-dtype q8" --temp 0
        spec_case "$dt, q8 draft of itself, temperature 1" "$CKPT_DIR/124M-$dt.bin" $t 128 "$prompt" "--draft-dtype q8" -s 1
    done
done
echo "  prompt lookup (its greedy output repeats itself, as text that copies its input does):"
for t in 1 2; do
    spec_case "f32, --lookup 2" "$CKPT_DIR/124M-f32.bin" $t 128 "$prompt" "--lookup 2" --temp 0
done
echo "  guesses per step (f32, q8 draft, greedy, 1 thread):"
for k in 2 3 4 6 8; do
    spec_case "--draft-tokens $k" "$CKPT_DIR/124M-f32.bin" 1 128 "$prompt" "--draft-dtype q8 --draft-tokens $k" --temp 0
done
# constrained: the draft's guesses masked as the run's own steps are (a
# run ends when the grammar does: tokens/step and the ratio of fewer tokens)
cat > "$TMP/schema.json" <<'S'
{"type": "object", "properties": {"title": {"type": "string", "maxLength": 40},
 "year": {"type": "integer", "minimum": 1000, "maximum": 2100},
 "people": {"type": "array", "maxItems": 8, "items": {"type": "object",
  "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
  "required": ["name", "age"]}}}, "required": ["title", "year", "people"]}
S
echo "  constrained by a JSON Schema (tests/bench/grammar.sh's), the guesses masked too:"
spec_case "f32, q8 draft, --json-schema, greedy" "$CKPT_DIR/124M-f32.bin" 1 128 "$prompt" "--draft-dtype q8" --temp 0 \
    --json-schema "$TMP/schema.json"
spec_case "f32, --lookup 2, --json-schema, greedy" "$CKPT_DIR/124M-f32.bin" 1 128 "$prompt" "--lookup 2" --temp 0 \
    --json-schema "$TMP/schema.json"
[ -f "$DEMO" ] && spec_case "demo f16, q8 draft, --json-schema, greedy" "$DEMO" 1 128 "$prompt" "--draft-dtype q8" \
    --temp 0 --json-schema "$TMP/schema.json"
if [ -f "$DEMO" ]; then
    dprompt="And it came to pass, when the king heard the words of the book of the law, that he rent his clothes."
    echo "  the demo model ($DEMO, F16), -n 200:"
    for t in 1 2; do
        spec_case "f16, q8 draft of itself, greedy" "$DEMO" $t 200 "$dprompt" "--draft-dtype q8" --temp 0
        spec_case "f16, q8 draft of itself, temperature 1" "$DEMO" $t 200 "$dprompt" "--draft-dtype q8" -s 1
        spec_case "f32 (--dtype f32), q8 draft, greedy" "$DEMO" $t 200 "$dprompt" "--draft-dtype q8" --temp 0 --dtype f32
    done
    # prompt lookup on a text that repeats its prompt: the verse twice, then its start
    verse="In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters."
    lprompt="$verse $verse In the beginning God created"
    echo "  prompt lookup, a text that repeats its prompt (the demo model, greedy, -n 40):"
    for t in 1 2; do
        spec_case "--lookup 3" "$DEMO" $t 40 "$lprompt" "--lookup 3 --draft-tokens 8" --temp 0
    done
fi

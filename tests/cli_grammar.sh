#!/bin/sh
# cli_grammar.sh - gpt --grammar on the demo model (docs/grammars.md):
#   - over seeds and temperatures, every output of a record grammar matches
#     the same language written as a Python regular expression (re.fullmatch,
#     an independent matcher), and every output of llama.cpp's JSON grammar
#     that stopped with "grammar" parses with Python's json module;
#   - --completions 3 gives, bit for bit, the single runs of seeds s, s+1, s+2;
#   - tokens other than the text's canonical tokenization are allowed: one
#     straddling two grammar elements, and others when the canonical ones
#     are banned by logit_bias;
#   - --draft-dtype q8/q4, --draft (the tiny checkpoint) and --lookup give
#     the plain run's bits, greedy and sampled, with guesses rejected;
#   - --ignore-eos never draws <|endoftext|> under a grammar; a run
#     stopped by SIGTERM while text is held back for a stop string prints
#     that text too (the uninterrupted run of as many tokens);
#   - --grammar TEXT (a value holding ::=) is the grammar itself: the bits
#     of its file, alone and as --batch's default;
#   - bad grammars: one line naming the file, LINE:COL and what was
#     expected, exit 1 (a typed one: --grammar, exit 2; a value that is
#     neither a file nor a grammar says so, exit 1); --grammar with --lookup in --batch, and with a draft
#     and --completions, are usage errors (exit 2).
# Prints "cli_grammar: N passed, M failed".
GPT=${GPT:-build/gpt}
CHECK_NAME=cli_grammar
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
PY=/usr/bin/python3
need $PY
MODEL=models/demo.bin
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

cat > "$T/rec.gbnf" <<'G'
root ::= "{" ws "\"name\"" ws ":" ws str ws "," ws "\"age\"" ws ":" ws [0-9]{1,3} ws "}"
str ::= "\"" [a-zA-Z ]{1,20} "\""   # a short name
ws ::= " "?
G
RE='\{ ?"name" ?: ?"[a-zA-Z ]{1,20}" ?, ?"age" ?: ?[0-9]{1,3} ?\}'
cat > "$T/json.gbnf" <<'G'
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
G

for temp in 0 0.7 1 1.5; do
    for seed in 1 2 3 4 5; do
        if "$GPT" -m $MODEL -q -p "Record:" --grammar "$T/rec.gbnf" -s $seed --temp $temp -n 80 --json > "$T/out" 2> "$T/err" &&
            $PY -c 'import json,re,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["stop_reason"]=="grammar" and re.fullmatch(sys.argv[2], d["text"]) else 1)' "$T/out" "$RE"; then
            pass
        else
            fail "record grammar, seed $seed temp $temp: $(cat "$T/out" "$T/err")"
        fi
        if "$GPT" -m $MODEL -q -p "JSON:" --grammar "$T/json.gbnf" -s $seed --temp $temp -n 120 --json > "$T/out" 2> "$T/err" &&
            $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
if d["stop_reason"] == "grammar": json.loads(d["text"])
elif d["stop_reason"] != "length": sys.exit(1)
elif not d["text"].lstrip().startswith("{"): sys.exit(1)' "$T/out"; then
            pass
        else
            fail "json grammar, seed $seed temp $temp: $(cat "$T/out" "$T/err")"
        fi
    done
done

# --completions 3: the single runs' bits
"$GPT" -m $MODEL -q -p "Record:" --grammar "$T/rec.gbnf" -s 7 --temp 1 -n 60 --completions 3 --json > "$T/many" 2> "$T/err" || fail "completions: $(cat "$T/err")"
for i in 0 1 2; do
    "$GPT" -m $MODEL -q -p "Record:" --grammar "$T/rec.gbnf" -s $((7 + i)) --temp 1 -n 60 --json > "$T/one" 2> "$T/err"
    if $PY -c 'import json,sys; m=json.load(open(sys.argv[1])); o=json.load(open(sys.argv[2])); c=(m.get("completions") or m.get("choices"))[int(sys.argv[3])]; sys.exit(0 if c["text"]==o["text"] and c["tokens"]==o["tokens"] and c["stop_reason"]==o["stop_reason"] else 1)' "$T/many" "$T/one" $i; then
        pass
    else
        fail "--completions 3, completion $i differs from the single run of seed $((7 + i))"
    fi
done

# Every token whose bytes the automaton can read is allowed, not only the
# text's canonical tokenization ("Hello world" is 15496 995): greedy under
# a bias of +100 on "Hello" takes it although the grammar spells "Hel"
# "lo" (a token straddling two elements); with both canonical tokens at
# -100 the text still comes out, from other tokens.
printf 'root ::= "Hel" "lo" " " "world"\n' > "$T/hello.gbnf"
canonical=$("$GPT" -m $MODEL --tokenize --json -p "Hello world")
straddle=$("$GPT" -m $MODEL -q -p "Say:" --grammar "$T/hello.gbnf" --temp 0 --logit-bias 15496=100 --json |
    jq -c '[.text, .tokens[0], .stop_reason]')
if [ "$canonical" = "[15496,995]" ] && [ "$straddle" = '["Hello world",15496,"grammar"]' ]; then pass
else fail "a token across two grammar elements: tokenize $canonical, run $straddle"; fi
"$GPT" -m $MODEL -q -p "Say:" --grammar "$T/hello.gbnf" --temp 0 --logit-bias 15496=-100 --logit-bias 995=-100 \
    --json > "$T/other.json"
other=$(jq -c '[.text, .stop_reason, ([.tokens[] | select(. == 15496 or . == 995)] | length)]' "$T/other.json")
back=$(jq -c .tokens "$T/other.json" | "$GPT" -m $MODEL --detokenize)
if [ "$other" = '["Hello world","grammar",0]' ] && [ "$back" = "Hello world" ]; then pass
else fail "the canonical tokens banned: $other, detokenized '$back'"; fi

# Speculative decoding: the same bits as the plain run. --lookup on a
# prompt that holds two records guesses from them (the tokens after "}"
# cut, as the grammar ends there), and the model rejects some of its
# guesses. The record grammar's runs with the model itself in q8 and q4
# and the tiny checkpoint as drafts, and lookup: greedy and sampled.
same_bits() {  # same_bits WHAT PLAIN SPEC: tokens, text and stop_reason alike
    if $PY -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); k=("tokens","text","stop_reason"); sys.exit(0 if [a[x] for x in k]==[b[x] for x in k] and a["stop_reason"]=="grammar" else 1)' "$2" "$3"
    then pass; else fail "$1: $(head -c 300 "$3") but $(head -c 300 "$2")"; fi
}
P2='Record: {"name": "Ahab", "age": 40}. Record: {"name": "Ishmael", "age": 29}. Record:'
for s in "--temp 0" "-s 1 --temp 1" "-s 2 --temp 1.5"; do
    # shellcheck disable=SC2086 # the seed's flags and values
    "$GPT" -m $MODEL -q -p "$P2" --grammar "$T/rec.gbnf" $s --json > "$T/plain" 2> "$T/err" || fail "records $s: $(cat "$T/err")"
    for n in 1 2; do
        # shellcheck disable=SC2086
        "$GPT" -m $MODEL -q -p "$P2" --grammar "$T/rec.gbnf" $s --json --lookup $n > "$T/spec" 2> "$T/err" ||
            fail "records $s --lookup $n: $(cat "$T/err")"
        same_bits "two records, $s --lookup $n" "$T/plain" "$T/spec"
        jq -r '"\(.stats.speculation.proposed) \(.stats.speculation.accepted)"' "$T/spec" >> "$T/guesses"
    done
done
# over the six runs: guesses made, and some rejected
if awk '{p += $1; a += $2} END {exit !(p > 0 && a < p)}' "$T/guesses"; then pass
else fail "--lookup on two records: guesses proposed, accepted: $(tr '\n' ' ' < "$T/guesses")"; fi
TINY=${CKPT_DIR:-build/ckpt}/tiny
for s in "--temp 0" "-s 1 --temp 1" "-s 2 --temp 1.5"; do
    # shellcheck disable=SC2086 # the seed's flags and values
    "$GPT" -m $MODEL -q -p "Record:" --grammar "$T/rec.gbnf" $s -n 80 --json > "$T/plain" 2> "$T/err" || fail "record $s: $(cat "$T/err")"
    for d in "--draft-dtype q8" "--draft-dtype q4" "--draft $TINY" "--lookup 2"; do
        # shellcheck disable=SC2086
        "$GPT" -m $MODEL -q -p "Record:" --grammar "$T/rec.gbnf" $s -n 80 --json $d > "$T/spec" 2> "$T/err" ||
            fail "record $s $d: $(cat "$T/err")"
        same_bits "record grammar $s $d" "$T/plain" "$T/spec"
    done
done

# --ignore-eos: <|endoftext|>, which ends a run where the grammar accepts,
# is never drawn (here it is all but forced by its bias), and the run goes
# on until no byte can follow
"$GPT" -m $MODEL -q -p Hi -s 1 --ignore-eos --logit-bias 50256=100 --regex 'a{1,5}' -n 50 --json > "$T/out" 2> "$T/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(jq -r '.text + " " + .stop_reason' "$T/out")" = "aaaaa grammar" ]; then pass
else fail "--ignore-eos with a regex: exit $rc: $(cat "$T/out" "$T/err")"; fi

# Stopped by a signal (SIGTERM, as Ctrl-C) while text is held back for a
# stop string: the text so far is all of it. The output is only "a"s and
# the stop string 29 "a"s and a "b", so the last "a"s (29 at most) are
# held back whenever the signal comes; the reference is the same run of as
# many tokens, uninterrupted.
STOP_A=aaaaaaaaaaaaaaaaaaaaaaaaaaaaab
: > "$T/int.out"  # there before the loop reads it
"$GPT" -m $MODEL -q -p Hi -s 1 --ignore-eos --context-shift -n 1000000 --regex 'a+' --stop $STOP_A --stats \
    > "$T/int.out" 2> "$T/int.err" &
pid=$!
waited=0  # until 100 bytes are out (60 s at most)
while [ "$(wc -c < "$T/int.out")" -lt 100 ] && [ $waited -lt 600 ] && kill -0 $pid 2> /dev/null; do
    sleep 0.1
    waited=$((waited + 1))
done
kill -TERM $pid 2> /dev/null
wait $pid
rc=$?
n=$(sed -n 's/^stop: *interrupted after \([0-9]*\) new tokens$/\1/p' "$T/int.err")
"$GPT" -m $MODEL -q -p Hi -s 1 --ignore-eos --context-shift -n "${n:-1}" --regex 'a+' --stop $STOP_A --json > "$T/ref" 2>&1
if [ $rc -eq 130 ] && [ -n "$n" ] && jq -j .text "$T/ref" | cmp -s - "$T/int.out"; then pass
else fail "SIGTERM with text held back: exit $rc, $n tokens, $(wc -c < "$T/int.out") bytes out, the run of $n: $(head -c 300 "$T/ref")"; fi

# errors
bad() {  # FILE-CONTENT, expected text in the message
    printf '%s' "$1" > "$T/bad.gbnf"
    "$GPT" -m $MODEL -q -p x --grammar "$T/bad.gbnf" -n 5 > /dev/null 2> "$T/err"
    rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -qF "$T/bad.gbnf: $2" "$T/err"; then pass; else fail "bad grammar '$1': exit $rc: $(cat "$T/err")"; fi
}
bad 'root ::= "a" | nope' '1:16: undefined rule'
bad 'root ::= ("a"' "1:14: expected ')'"
bad 'root ::= x
x ::= x "a" | "b"' "2:1: left recursion: rule 'x'"
bad 'root ::= "a"{1,200000}' '1:16: repetition count above 10000'
# --grammar TEXT: a value that holds ::= is the grammar itself, as
# --json-schema takes a value that starts with {; the same bits as its file
"$GPT" -m $MODEL -q -p "Record:" --grammar "$T/rec.gbnf" -s 3 -n 80 --json > "$T/file" 2> "$T/err"
"$GPT" -m $MODEL -q -p "Record:" --grammar "$(cat "$T/rec.gbnf")" -s 3 -n 80 --json > "$T/inline" 2> "$T/err"
if $PY -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); k=("tokens","text","stop_reason"); sys.exit(0 if [a[x] for x in k]==[b[x] for x in k] and a["stop_reason"]=="grammar" else 1)' "$T/file" "$T/inline" 2> /dev/null
then pass; else fail "--grammar TEXT: $(head -c 300 "$T/inline") $(cat "$T/err"), the file's: $(head -c 300 "$T/file")"; fi
printf 'Record:\n' | "$GPT" -m $MODEL -q --batch --grammar "$(cat "$T/rec.gbnf")" -s 3 -n 80 > "$T/b" 2> "$T/err"
if [ "$(jq -c '[.tokens, .text]' "$T/b")" = "$(jq -c '[.tokens, .text]' "$T/file")" ]; then pass
else fail "--batch --grammar TEXT: $(cat "$T/b" "$T/err")"; fi
# a typed grammar's error is the option's: exit 2, LINE:COL in the text typed
"$GPT" -m $MODEL -q -p x --grammar 'root ::= "a" | nope' -n 5 > /dev/null 2> "$T/err"
rc=$?
if [ $rc -eq 2 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -qF -- "gpt: --grammar: 1:16: undefined rule" "$T/err"; then pass
else fail "--grammar with a bad typed grammar: exit $rc: $(cat "$T/err")"; fi
# neither a file nor a grammar: one line that says both, exit 1 (a missing file)
"$GPT" -m $MODEL -q -p x --grammar "$T/none.gbnf" -n 5 > /dev/null 2> "$T/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l < "$T/err")" -eq 1 ] && grep -qF -- "gpt: --grammar $T/none.gbnf: " "$T/err" &&
    grep -qF "not a grammar" "$T/err"; then pass
else fail "--grammar with neither a file nor a grammar: exit $rc: $(cat "$T/err")"; fi
# a grammar with a draft is refused only where no draft applies
printf 'x\n' | "$GPT" -m $MODEL -q --batch --grammar "$T/rec.gbnf" --lookup 2 -n 5 > /dev/null 2> "$T/err"
if [ $? -eq 2 ] && grep -q -- "--lookup does not apply to --batch" "$T/err"; then pass; else fail "--grammar --lookup --batch: $(cat "$T/err")"; fi
"$GPT" -m $MODEL -q -p x --grammar "$T/rec.gbnf" --draft-dtype q8 --completions 2 --json -n 5 > /dev/null 2> "$T/err"
if [ $? -eq 2 ] && grep -q -- "--completions and speculative decoding exclude each other" "$T/err"; then pass
else fail "--grammar --draft-dtype --completions: $(cat "$T/err")"; fi
summary

#!/bin/sh
# cli_schema.sh - --json-schema, --json-object and --regex on the demo model
# (docs/json-schema.md), and the same constraints as --batch --jsonl fields
# and gpt serve fields (json_schema, regex, grammar, response_format):
#   - property: over seeds and temperatures (--batch --jsonl lines, each
#     `gpt -p PROMPT -s SEED` as checked below), every output of two
#     schemas stops with "grammar", parses with Python's json module and
#     validates with python3-jsonschema (an independent validator; Draft
#     2020-12, the dialect of prefixItems); every --json-object output that
#     finished is a JSON object; every --regex output matches re.fullmatch;
#   - the same bits: a seeded constrained run alone, as a --batch --jsonl
#     line's json_schema, as --batch's default --json-schema, as completion
#     1 of --completions 2, from gpt serve's /v1/completions with the
#     json_schema field and with response_format json_schema, and from
#     /v1/chat/completions with response_format (against gpt
#     --chat-template); json_object, regex and grammar the same way; and
#     with --draft-dtype q8/q4, --draft of the tiny checkpoint and --lookup;
#   - the errors: a schema keyword outside the subset named with its JSON
#     pointer, a bad regex with its byte offset, a bad grammar with LINE:COL,
#     two constraints together, a constraint with a draft where no draft
#     applies (--completions, --batch); exit 2 for a value typed on the command
#     line, 1 for a file, a --jsonl line's "error", the server's 400 naming
#     the field.
# Prints "cli_schema: N passed, M failed".
GPT=${GPT:-build/gpt}
MODEL=models/demo.bin
CHECK_NAME=cli_schema
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh
PY=/usr/bin/python3
need_python jsonschema
need curl

# two schemas whose languages are finite (every string, array and integer
# bounded), so that 200 tokens always reach the end: "grammar"
S1='{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},"born":{"type":"string","format":"date"}},"required":["name","age"]}'
S2='{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer","minimum":-5,"maximum":5},"y":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}},"required":["x","y"]}},"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3}$"},"kind":{"enum":["circle","square",null]},"pts":{"type":"array","items":{"$ref":"#/$defs/pt"},"minItems":1,"maxItems":3},"v":{"const":1},"ok":{"type":["boolean","null"]},"pair":{"type":"array","prefixItems":[{"type":"string","maxLength":3},{"anyOf":[{"type":"boolean"},{"type":"string","format":"uuid"}]}],"items":false,"minItems":2}},"required":["id","kind","pts","v"]}'
RE='(yes|no|maybe), [0-9]{1,3} (apples|pears)( and [a-z]{1,8})?[.]'

# lines KIND VALUE: --jsonl lines over seeds 1..4 and four temperatures
lines() {
    $PY -c '
import json, sys
kind, value = sys.argv[1], sys.argv[2]
v = json.loads(value) if kind == "json_schema" else value
for seed in range(1, 5):
    for t in (0, 0.7, 1, 1.5):
        line = {"prompt": "Record:", "seed": seed, "temperature": t}
        # the strings of an object are unbounded: 60 tokens, not 200
        if kind == "json_object": line.update(response_format={"type": "json_object"}, max_tokens=60)
        else: line[kind] = v
        print(json.dumps(line))' "$1" "$2"
}

# valid KIND VALUE OUT: every result line of OUT is right for the constraint
cat > "$tmp/valid.py" << 'EOF'
import datetime, json, re, sys
import jsonschema
kind, value, out = sys.argv[1:4]
bad = 0
n = 0
for line in open(out):
    d = json.loads(line)
    n += 1
    text, why = d.get("text"), d.get("stop_reason")
    try:
        if kind == "json_schema":
            assert why == "grammar", "stopped by %s" % why
            x = json.loads(text)
            jsonschema.Draft202012Validator(json.loads(value)).validate(x)
            # format date: a real day (Python's date has no year 0, which RFC 3339 allows)
            if "born" in x and not x["born"].startswith("0000-"): datetime.date.fromisoformat(x["born"])
            assert json.dumps(x, separators=(",", ":"), ensure_ascii=False) == text, "not compact"
        elif kind == "json_object":
            # an object's strings are unbounded: a run may end at max_tokens
            if why == "grammar": assert isinstance(json.loads(text), dict), "not an object"
            else: assert why == "length" and text.startswith("{"), "stopped by %s" % why
        else:
            assert why == "grammar", "stopped by %s" % why
            assert re.fullmatch(value, text), "no match"
    except Exception as e:
        bad += 1
        print("line %d: %s: %r (%s)" % (d["index"], kind, text, e))
sys.exit(1 if bad or n != 16 else 0)
EOF
property() {  # property KIND VALUE
    lines "$1" "$2" > "$tmp/lines"
    if "$GPT" -m $MODEL -q -t 2 --batch --jsonl -n 200 < "$tmp/lines" > "$tmp/out" 2> "$tmp/err" &&
        $PY "$tmp/valid.py" "$1" "$2" "$tmp/out" > "$tmp/why"; then
        pass
    else
        fail "property $1 $2: $(cat "$tmp/why" "$tmp/err" | head -5)"
    fi
}
property json_schema "$S1"
property json_schema "$S2"
property json_object ""
property regex "$RE"

# a number has at most 17 digits before its exponent and 2 in it
# (docs/json-schema.md): the longest, -1.2345678901234567e-99, is 23 bytes
# (25 in [ ]), so 25 tokens always reach the end (stop reason grammar, or
# eos where the number may end); each is valid JSON and a finite double
cat > "$tmp/numbers.py" << 'EOF'
import json, math, re, sys
n = 0
for line in open(sys.argv[1]):
    d = json.loads(line)
    n += 1
    text, why = d["text"], d["stop_reason"]
    try:
        json.loads(text)
        num = text[1:-1] if text.startswith("[") else text
        m = re.fullmatch(r"-?(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE][-+]?([0-9]+))?", num)
        assert why in ("grammar", "eos"), "stopped by %s" % why
        assert not num or (m and math.isfinite(float(num))), "not a finite number"
        assert not num or len(m.group(1).lstrip("0") + (m.group(2) or "")) <= 17, "more than 17 digits"
        assert not num or len(m.group(3) or "") <= 2, "more than 2 exponent digits"
    except Exception as e:
        print("line %d: %r (%s)" % (d["index"], text, e))
        sys.exit(1)
sys.exit(n != 16)
EOF
for schema in '{"type":"number"}' '{"type":"integer"}' '{"type":"array","items":{"type":"number"},"maxItems":1}'; do
    lines json_schema "$schema" > "$tmp/lines"
    if "$GPT" -m $MODEL -q -t 2 --batch --jsonl -n 25 < "$tmp/lines" > "$tmp/out" 2> "$tmp/err" &&
        $PY "$tmp/numbers.py" "$tmp/out" > "$tmp/why"; then
        pass
    else
        fail "$schema within 25 tokens: $(cat "$tmp/why" "$tmp/err" | head -5)"
    fi
done

# ----------------------------------------------------------------------------
# the same bits everywhere: a seeded run's tokens, text and stop reason

# same WHAT GOT EXPECTED: GOT's answer (a --json object, a --batch line, a
# server's choice 0, completions[1]) is EXPECTED's, a gpt --json output
cat > "$tmp/same.py" << 'EOF'
import json, sys
got, want = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
if "choices" in got: got = got["choices"][0]
elif "completions" in got: got = got["completions"][1]
text = got["message"]["content"] if "message" in got else got["text"]
g = [got["tokens"], text, got.get("stop_reason", want["stop_reason"])]
w = [want["tokens"], want["text"], want["stop_reason"]]
if g != w or want["stop_reason"] != "grammar": print(json.dumps(g)[:300], "but", json.dumps(w)[:300]); sys.exit(1)
EOF
same() {
    if $PY "$tmp/same.py" "$2" "$3" > "$tmp/why" 2>&1; then pass; else fail "$1: $(cat "$tmp/why")"; fi
}
run() {  # run OUT ARGS...: gpt -p Record: --json ARGS
    out=$1
    shift
    "$GPT" -m $MODEL -q -t 2 -p "Record:" --json "$@" > "$out" 2> "$tmp/err" || fail "gpt $*: $(cat "$tmp/err")"
}
run "$tmp/one" --json-schema "$S1" -s 5 -n 200
printf '{"prompt":"Record:","seed":5,"json_schema":%s}\n' "$S1" | "$GPT" -m $MODEL -q -t 2 --batch --jsonl -n 200 > "$tmp/b"
same "--jsonl json_schema" "$tmp/b" "$tmp/one"
printf 'Record:\n' | "$GPT" -m $MODEL -q -t 2 --batch --json-schema "$S1" -s 5 -n 200 > "$tmp/b"
same "--batch --json-schema" "$tmp/b" "$tmp/one"
# the lines of one grammar share its masks' cache (the engine's): the line
# seeded 5, among others that fill the cache first and beside it, is alone's
printf '{"prompt":"Record:","seed":7}\n{"prompt":"Record: a","seed":9}\n{"prompt":"Record:","seed":5}\n{"prompt":"x","seed":1}\n' |
    "$GPT" -m $MODEL -q -t 2 --batch --jsonl --json-schema "$S1" -n 200 > "$tmp/b4"
sed -n 3p "$tmp/b4" > "$tmp/b"
same "--batch --jsonl, the third of four lines sharing a schema" "$tmp/b" "$tmp/one"
printf '%s' "$S1" > "$tmp/s1.json"
run "$tmp/c" --json-schema "$tmp/s1.json" --completions 2 -s 4 -n 200
same "--completions 2 (a schema file)" "$tmp/c" "$tmp/one"
run "$tmp/re" --regex "$RE" -s 5 -n 200
printf 'root ::= "{\\"n\\":" [0-9]{1,4} "}"\n' > "$tmp/g.gbnf"
run "$tmp/gr" --grammar "$tmp/g.gbnf" -s 5 -n 200
run "$tmp/obj40" --json-object -s 5 -n 40

# speculative decoding: the draft's guesses are masked as the run's draws
# are and each checked row draws with its own position's mask, so the run
# is the plain one whatever the draft: the model itself in q8 and q4, the
# tiny checkpoint (which seldom agrees with it) and prompt lookup; sampled
# (seeds 5 and 6) and greedy, each ending with "grammar"
TINY=${CKPT_DIR:-build/ckpt}/tiny
spec_same() {  # spec_same NAME PLAIN-ARGS...: each draft's run is the plain one
    name=$1
    shift
    run "$tmp/plain" "$@"
    for d in "--draft-dtype q8" "--draft-dtype q4" "--draft $TINY" "--lookup 2"; do
        # shellcheck disable=SC2086 # the draft's flag and value
        run "$tmp/spec" "$@" $d
        same "$name $d" "$tmp/spec" "$tmp/plain"
    done
}
for s in "-s 5" "-s 6" "--temp 0"; do
    # shellcheck disable=SC2086 # the seed's flag and value
    spec_same "--json-schema $s" --json-schema "$S1" $s -n 200
    # shellcheck disable=SC2086
    spec_same "--regex $s" --regex "$RE" $s -n 200
    # shellcheck disable=SC2086
    spec_same "--grammar $s" --grammar "$tmp/g.gbnf" $s -n 200
done

# the server: the same requests as fields
start "$tmp/s.log" -m "$MODEL" -t 2 --chat-template gpt2 || { summary; exit 1; }
completion() {  # completion WHAT MORE EXPECTED [MAX]: /v1/completions with the fields MORE
    st=$(post /v1/completions "{\"prompt\":\"Record:\",\"seed\":5,\"max_tokens\":${4:-200}$2}" "$tmp/r")
    if [ "$st" = 200 ]; then same "server: $1" "$tmp/r" "$3"; else fail "server: $1: $st $(cat "$tmp/r")"; fi
}
# grammar_metrics: "maskers idle computed cached" from /metrics once no
# sequence runs (the scheduler writes these with gpt_sequences_running)
grammar_metrics() {
    j=0
    while [ $j -lt 1000 ]; do
        get /metrics "$tmp/m" > /dev/null
        grep -q '^gpt_sequences_running 0$' "$tmp/m" && break
        sleep 0.01
        j=$((j + 1))
    done
    awk '/^gpt_grammar_maskers / { m = $2 } /^gpt_grammar_maskers_idle / { i = $2 }
         /^gpt_grammar_mask_walks\{from="computed"\}/ { c = $2 } /^gpt_grammar_mask_walks\{from="cache"\}/ { k = $2 }
         END { print m + 0, i + 0, c + 0, k + 0 }' "$tmp/m"
}
completion "json_schema" ",\"json_schema\":$S1" "$tmp/one"
# shellcheck disable=SC2046 # four numbers
set -- $(grammar_metrics)
m1=$1 c1=$3 k1=$4
completion "response_format json_schema" \
    ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"schema\":$S1,\"strict\":true}}" "$tmp/one"
# the second request of the same schema (another field, compiled again)
# finds the first's masks: one masker, kept idle; its walks are served
# from the cache but for a few (a position whose walks turned out large
# is keyed deeper from its second visit on: grammar_mask.c, DEEPEN_NODES)
# shellcheck disable=SC2046
set -- $(grammar_metrics)
if [ "$m1" = 1 ] && [ "$1" = 1 ] && [ "$2" = 1 ] && [ "$c1" -gt 0 ] && [ $(($3 - c1)) -le $((c1 / 4)) ] &&
    [ $(($4 - k1)) -ge $((c1 / 2)) ]; then pass
else fail "the same schema's masks: maskers $m1 then $1 (idle $2), walks computed $c1 then $3, from the cache $k1 then $4"
fi
completion "regex" ",\"regex\":\"$RE\"" "$tmp/re"
completion "grammar" ",\"grammar\":\"root ::= \\\"{\\\\\\\"n\\\\\\\":\\\" [0-9]{1,4} \\\"}\\\"\"" "$tmp/gr"
# json_object: 40 tokens may end it by length; compare the bits whatever the reason
cp "$tmp/obj40" "$tmp/obj40g"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d["stop_reason"]="grammar"; json.dump(d, open(sys.argv[1], "w"))' "$tmp/obj40g"
st=$(post /v1/completions '{"prompt":"Record:","seed":5,"max_tokens":40,"response_format":{"type":"json_object"}}' "$tmp/r")
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d["choices"][0].pop("stop_reason", None); json.dump(d, open(sys.argv[1], "w"))' "$tmp/r"
same "response_format json_object ($st)" "$tmp/r" "$tmp/obj40g"
# chat: the answer is gpt --chat-template's with the same messages
MSG='[{"role":"user","content":"A record, please."}]'
printf '%s' "$MSG" | "$GPT" -m $MODEL -q -t 2 --chat-template gpt2 -s 5 -n 200 --json --json-schema "$S1" > "$tmp/chat1" 2> "$tmp/err" ||
    fail "gpt --chat-template: $(cat "$tmp/err")"
st=$(post /v1/chat/completions "{\"messages\":$MSG,\"seed\":5,\"max_tokens\":200,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"schema\":$S1}}}" "$tmp/r")
if [ "$st" = 200 ]; then same "chat response_format json_schema" "$tmp/r" "$tmp/chat1"; else fail "chat: $st $(cat "$tmp/r")"; fi

# past 4 grammars no request uses, the least recently used is dropped
for re in x y z w v; do
    st=$(post /v1/completions "{\"prompt\":\"Record:\",\"max_tokens\":3,\"regex\":\"[$re]+\"}" "$tmp/r")
    [ "$st" = 200 ] || fail "regex [$re]+: $st $(cat "$tmp/r")"
done
# shellcheck disable=SC2046
set -- $(grammar_metrics)
if [ "$1" = 4 ] && [ "$2" = 4 ]; then pass; else fail "after 5 more grammars: $1 maskers, $2 idle (want 4, 4)"; fi

# ----------------------------------------------------------------------------
# errors

# refused WHAT PATH BODY PARAM WORDS: a 400 naming PARAM, its message with WORDS
refused() {
    st=$(post "$2" "$3" "$tmp/r")
    if [ "$st" = 400 ] && $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["error"]; sys.exit(0 if e["param"]==sys.argv[2] and sys.argv[3] in e["message"] else 1)' "$tmp/r" "$4" "$5"
    then pass; else fail "server refuses $1: $st $(head -c 300 "$tmp/r"), want 400 $4 '$5'"
    fi
}
refused "a keyword" /v1/completions '{"prompt":"x","json_schema":{"type":"object","properties":{"t":{"type":"array","uniqueItems":true}}}}' \
    json_schema 'json_schema: #/properties/t: uniqueItems is not supported'
refused "a regex" /v1/completions '{"prompt":"x","regex":"ab(c|d"}' regex 'regex: at byte 2: ( without its )'
refused "a repetition bound" /v1/completions '{"prompt":"x","regex":"a{0,100000}"}' regex 'regex: at byte'
refused "a grammar" /v1/completions '{"prompt":"x","grammar":"root ::= \"a\" | nope"}' grammar 'grammar: 1:16: undefined rule'
refused "a grammar bound" /v1/completions '{"prompt":"x","grammar":"root ::= \"a\"{0,100000}"}' grammar 'repetition count above'
refused "two constraints" /v1/completions '{"prompt":"x","regex":"a","json_schema":{}}' json_schema 'exclude each other'
refused "a schema not an object" /v1/completions '{"prompt":"x","json_schema":"{}"}' json_schema 'json_schema must be a JSON Schema'
refused "json_schema without schema" /v1/chat/completions \
    '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}' \
    response_format 'has no "schema"'

# usage CODE WORDS ARGS...: gpt ARGS exits CODE with one line holding WORDS
usage() {
    code=$1 words=$2
    shift 2
    "$GPT" -m $MODEL -q -p x -n 5 "$@" > /dev/null 2> "$tmp/err"
    rc=$?
    if [ $rc -eq "$code" ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -qF -- "$words" "$tmp/err"; then pass
    else fail "gpt $*: exit $rc (want $code): $(cat "$tmp/err")"
    fi
}
usage 2 "gpt: --json-schema: #/properties/t: uniqueItems is not supported" \
    --json-schema '{"properties":{"t":{"type":"array","uniqueItems":true}}}'
usage 2 'gpt: --json-schema: #/properties/n: minimum on numbers is not supported' \
    --json-schema '{"properties":{"n":{"type":"number","minimum":0}}}'
printf '{"type":"object","properties":{"a":{"$ref":"#/$defs/none"}}}' > "$tmp/bad.json"
usage 1 "gpt: --json-schema $tmp/bad.json: #/properties/a: \$ref" --json-schema "$tmp/bad.json"
usage 1 "gpt: --json-schema $tmp/none.json: No such file" --json-schema "$tmp/none.json"
usage 2 "gpt: --regex: at byte 2: ( without its )" --regex 'ab(c|d'
usage 2 "gpt: --regex: at byte 1: only ( ) and (?: ) groups" --regex 'a(?=b)'
usage 2 "--json-schema and --regex exclude each other" --json-schema "$S1" --regex a
usage 2 "--json-object and --grammar exclude each other" --json-object --grammar "$tmp/g.gbnf"
# a constraint with a draft still refused where speculation is: --completions, --batch
usage 2 "--completions and speculative decoding exclude each other" --json-object --lookup 2 --completions 2 --json
usage 2 "--draft-dtype does not apply to --batch" --json-object --draft-dtype q8 --batch
"$GPT" -m $MODEL -q -p x --regex a --score > /dev/null 2> "$tmp/err"
if [ $? -eq 2 ] && grep -qF -- "--regex does not apply to --score" "$tmp/err"; then pass; else fail "--regex --score: $(cat "$tmp/err")"; fi
# a grammar whose stacks double with each character (128 of them, over the
# whole trie; the mask's automaton computes each state's transitions once,
# so 64 no longer reach the bound): the bound on a mask's work ends it with
# its message
$PY -c '
print("root ::= x1 [^\"]*")
for i in range(1, 8):
    nxt = "x%d" % (i + 1) if i < 7 else ""
    print("x%d ::= [^\"] %s \"b\" | [^\"] %s \"c\" | \"\"" % (i, nxt, nxt))' > "$tmp/amb.gbnf"
usage 1 "gpt: grammar: one token mask took more than 67108864 stack steps" --grammar "$tmp/amb.gbnf" -s 1
refused "a grammar past the mask's bound" /v1/completions \
    "$($PY -c 'import json,sys; print(json.dumps({"prompt": "x", "max_tokens": 5, "grammar": open(sys.argv[1]).read()}))' "$tmp/amb.gbnf")" \
    grammar 'grammar: one token mask took more than'
printf '{"prompt":"x","regex":"a)"}\n{"prompt":"x","grammar":"root ::= (","max_tokens":2}\n{"prompt":"x","response_format":{"type":"json_object"},"json_schema":{}}\n' |
    "$GPT" -m $MODEL -q -t 2 --batch --jsonl > "$tmp/b"
if $PY -c '
import json, sys
e = [json.loads(l).get("error", "") for l in open(sys.argv[1])]
want = ["regex: at byte 1:", "grammar: 1:11:", "response_format and json_schema exclude each other (the output matches one grammar)"]
sys.exit(0 if len(e) == 3 and all(w in x for w, x in zip(want, e)) else print(e) or 1)' "$tmp/b"; then pass
else fail "--jsonl errors: $(cat "$tmp/b")"
fi
summary

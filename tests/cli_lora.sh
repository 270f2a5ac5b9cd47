#!/bin/sh
# cli_lora.sh - PEFT LoRA adapters merged at load (--lora PATH[:SCALE],
# docs/models.md "Adapters"), against a float64 forward pass of the base
# model with the adapters merged by PEFT's rules (tests/make_lora.py on
# tests/reference_forward.py).
#
# make_variants.py writes the base (its "default" variant: 3 layers, C 64);
# make_lora.py the adapters: r 1 and 8, alpha != r, rsLoRA, fan_in_fan_out
# false and true (the same tensors: the same bits, as PEFT forces it for
# Conv1D), F32/F16/BF16 tensors, target_modules as suffixes, full paths, a
# regex and "all-linear", layers_to_transform, rank_pattern/alpha_pattern,
# GPT2Model's names; and two adapters at once with scales 0.5 and -1.5.
# For each, the log-probability of every token (--score; and the prompt's
# and the generated ones of a greedy run with --echo --logprobs 1) is within
# 1e-4 nats of the reference's, the greedy tokens are its argmax
# continuation (a top-2 margin under 2e-4 is a tie, noted). The comparison
# can see a wrong merge: each adapter moves the reference by more than 1e-3
# (ten times the tolerance), and so does the delta left untransposed (where
# the shape allows) and rsLoRA's alpha / sqrt(r) taken as alpha / r.
# --dtype f16 quantizes the merged weights: within 1e-4 of the reference
# whose merged matrices are rounded to float32 and then to f16. The modes:
# --batch --jsonl, gpt serve (/v1/score and /v1/completions) within 1e-4;
# llama.cpp's GGUF LoRA files of the same tensors (make_lora.py's GGUF
# list, alone and beside a PEFT adapter) give the PEFT adapter's bits, and
# so are within 1e-4 of the reference too;
# gpt chat's turn equals the single run of its conversation; gpt convert
# --lora writes a model.bin whose run equals --lora at load bit for bit, in
# f32 and in q8. Refusals: every malformed adapter of make_lora.py (bad
# JSON, a missing tensor, a wrong shape or rank, use_dora, modules_to_save,
# bias all, a target that is no layer matrix, untargeted tensors, an F64
# tensor, adapter_model.bin alone, a Python-only regex, a layer the base
# lacks; for GGUF files: general.type model or absent, adapter.type not
# lora, general.architecture not gpt2, adapter.lora.alpha absent or not a
# float32, lora_a's or lora_b's shape, lora_a and lora_b swapped (as
# llama.cpp's converter writes GPT-2's Conv1D), a tensor of no layer matrix
# or of the embeddings, a lora_b missing, a layer the base lacks, a Q8_0
# tensor), adapter_model.safetensors cut short at ten places and a GGUF
# adapter at nine, exit 1
# with one line naming it, in gpt, --score, --batch, chat, serve and
# convert; a --lora value without a path, with an out-of-range
# scale or one adapter too many exits 2.
# Needs /usr/bin/python3 with numpy (Debian's python3-numpy); skips without.
# Prints "cli_lora: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), GPT_TUNE (default off).
GPT=${GPT:-build/gpt}
GPT_TUNE=${GPT_TUNE:-off}
export GPT_TUNE
PY=/usr/bin/python3
CHECK_NAME=cli_lora
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need_python numpy

"$PY" tests/make_variants.py "$tmp/v" --only default > /dev/null || { fail "make_variants.py failed"; summary; exit 1; }
B=$tmp/v/default
A=$tmp/a
"$PY" tests/make_lora.py "$B" "$A" || { fail "make_lora.py failed"; summary; exit 1; }
O=$tmp/out
mkdir -p "$O"
P0="Hello world, this is a test"
P1="The quick brown fox jumps over the lazy dog, hitherto unprepared."
GEN="-n 6 --temp 0 --ignore-eos --echo --logprobs 1 --json -q -t 1"

# ----------------------------------------------------------------------------
# the runs: each adapter alone (scale 1), and r8 at 0.5 with rslora at -1.5
TWO="--lora $A/r8:0.5 --lora $A/rslora:-1.5"
for name in $(jq -r '.good[]' "$A/manifest.json") two; do
    if [ "$name" = two ]; then lora=$TWO; else lora="--lora $A/$name"; fi
    # shellcheck disable=SC2086 # lists of options
    run_gpt "$O/$name.gen" -m "$B" $lora -p "$P0" $GEN
    # shellcheck disable=SC2086
    run_gpt "$O/$name.score" -m "$B" $lora --score --json -q -t 1 -p "$P1"
done
# shellcheck disable=SC2086
run_gpt "$O/two.f16" -m "$B" $TWO --dtype f16 -p "$P0" $GEN
# shellcheck disable=SC2086
run_gpt "$O/r8.f16" -m "$B" --lora "$A/r8" --dtype f16 --score --json -q -t 1 -p "$P1"
printf '{"prompt": "%s", "max_tokens": 6, "temperature": 0, "logprobs": 1, "echo": true}\n' "$P0" "$P1" > "$tmp/batch.jsonl"
# shellcheck disable=SC2086
run_gpt "$O/two.batch" --batch --jsonl -m "$B" $TWO --ignore-eos -q -t 1 < "$tmp/batch.jsonl"

# gpt chat: its turn is the single run of the conversation, adapters and all
# shellcheck disable=SC2086
echo "Hello there" | "$GPT" chat -m "$B" $TWO --chat-template transcript --json -q -s 5 -n 4 > "$O/chat.json" 2> "$O/chat.err"
# shellcheck disable=SC2086
"$GPT" -m "$B" $TWO --chat-template transcript -p '[{"role": "user", "content": "Hello there"}]' -s 5 -n 4 --json -q \
    > "$O/chat1.json" 2> "$O/chat1.err"
got=$(jq -c '[.tokens, .text, .stop_reason]' "$O/chat.json" 2> /dev/null)
want=$(jq -c '[.tokens, .text, .stop_reason]' "$O/chat1.json" 2> /dev/null)
if [ -n "$got" ] && [ "$got" = "$want" ]; then pass
else fail "gpt chat $TWO: turn $got, the single run $want ($(head -c 300 "$O/chat.err"))"
fi

# gpt convert --lora: the model.bin's run is --lora at load's, bit for bit
# (f32 as stored, and q8: the merged weights quantized)
same_run() {  # WHAT A.json B.json: equal but for the timings and the path
    f='del(.stats, .seed)'
    if [ -s "$2" ] && [ "$(jq -cS "$f" "$2")" = "$(jq -cS "$f" "$3")" ]; then pass
    else fail "$1: $(head -c 300 "$2") differs from $(head -c 300 "$3")"
    fi
}
for dt in stored q8; do
    dtype_flag=
    [ $dt = q8 ] && dtype_flag="--dtype q8"
    # shellcheck disable=SC2086
    if "$GPT" convert "$B" "$O/merged.$dt.bin" $TWO $dtype_flag 2> "$O/convert.$dt.err"; then
        pass
        # shellcheck disable=SC2086
        run_gpt "$O/merged.$dt" -m "$O/merged.$dt.bin" -p "$P0" $GEN
        # shellcheck disable=SC2086
        run_gpt "$O/load.$dt" -m "$B" $TWO $dtype_flag -p "$P0" $GEN
        same_run "gpt convert $TWO ($dt)" "$O/merged.$dt.json" "$O/load.$dt.json"
    else
        fail "gpt convert $TWO ($dt): $(cat "$O/convert.$dt.err")"
    fi
done

# llama.cpp's GGUF LoRA files (make_lora.py's GGUF list): the PEFT
# adapter's tensors under llama.cpp's names, the same bits as the PEFT one;
# and one beside a PEFT adapter, as "two" with r8 as a GGUF file
for name in $(jq -r '.gguf[]' "$A/manifest.json"); do
    # shellcheck disable=SC2086
    run_gpt "$O/$name.gguf.gen" -m "$B" --lora "$A/$name.gguf" -p "$P0" $GEN
    # shellcheck disable=SC2086
    run_gpt "$O/$name.gguf.score" -m "$B" --lora "$A/$name.gguf" --score --json -q -t 1 -p "$P1"
    same_run "--lora $name.gguf" "$O/$name.gguf.gen.json" "$O/$name.gen.json"
    same_run "--lora $name.gguf --score" "$O/$name.gguf.score.json" "$O/$name.score.json"
done
# shellcheck disable=SC2086
run_gpt "$O/two_gguf.gen" -m "$B" --lora "$A/r8.gguf:0.5" --lora "$A/rslora:-1.5" -p "$P0" $GEN
same_run "--lora r8.gguf:0.5 --lora rslora:-1.5" "$O/two_gguf.gen.json" "$O/two.gen.json"

# ----------------------------------------------------------------------------
# the server: /v1/score and a greedy completion, checked with the rest below
# shellcheck disable=SC2086
if start "$O/serve.log" -m "$B" $TWO -t 1 --parallel 2; then
    curl -s -H 'Content-Type: application/json' --data-binary "{\"prompt\": \"$P1\"}" \
        "http://127.0.0.1:$port/v1/score" > "$O/two.serve_score.json"
    curl -s -H 'Content-Type: application/json' --data-binary \
        "{\"prompt\": \"$P0\", \"max_tokens\": 6, \"temperature\": 0, \"logprobs\": 1, \"echo\": true, \"ignore_eos\": true}" \
        "http://127.0.0.1:$port/v1/completions" > "$O/two.serve_gen.json"
    kill "$pid"
fi

# ----------------------------------------------------------------------------
# run time: gpt serve --lora NAME=PATH holds four adapters (PEFT r8, PEFT
# rsLoRA, GGUF r1, PEFT r64) beside the base. First each with "echo" (the prompt's
# log-probabilities: no block is shared, and its answer is checked against
# the reference below); then each alone without "echo" (its single run: the
# same generated tokens and log-probabilities as the echo run, though its
# prompt of several KV blocks was registered by the other adapters' runs
# too: prefix sharing must keep adapters apart); then the five at once, by
# "model" and by "lora": each the single run's bits.
RT="--lora a8=$A/r8 --lora rs=$A/rslora --lora g1=$A/r1.gguf --lora r64=$A/r64"
# shellcheck disable=SC2086
if start "$O/serve_rt.log" -m "$B" $RT -t 1 --parallel 5; then
    body() {  # NAME FIELD ECHO: a greedy completion of P1 x 4 with the adapter NAME picked by FIELD
        printf '{"%s": "%s", "prompt": "%s %s %s %s", "max_tokens": 24, "temperature": 0, "logprobs": 1, "echo": %s, "ignore_eos": true}' \
            "$2" "$1" "$P1" "$P1" "$P1" "$P1" "$3"
    }
    post_rt() {  # OUT BODY
        curl -s -H 'Content-Type: application/json' --data-binary "$2" "http://127.0.0.1:$port/v1/completions" > "$1"
    }
    curl -s "http://127.0.0.1:$port/v1/models" > "$O/rt.models"
    got=$(jq -c '[.data[].id]' "$O/rt.models")
    [ "$got" = '["default","a8","rs","g1","r64"]' ] && pass || fail "/v1/models with four adapters: $got"
    for m in a8 rs g1 r64 default; do post_rt "$O/rt_single.$m" "$(body $m model true)"; done
    for m in a8 rs g1 r64 default; do post_rt "$O/rt_alone.$m" "$(body $m model false)"; done
    clients=
    for m in a8 rs g1 r64 default; do
        field=model
        [ $m = rs ] && field=lora
        post_rt "$O/rt_batch.$m" "$(body $m $field false)" &
        clients="$clients $!"
    done
    # shellcheck disable=SC2086
    wait $clients
    f='.choices[0] | [.tokens, .logprobs.token_logprobs[-24:], .logprobs.top_logprobs[-24:]]'
    for m in a8 rs g1 r64 default; do
        want=$(jq -c "$f" "$O/rt_single.$m" 2> /dev/null)
        a=$(jq -c "$f" "$O/rt_alone.$m" 2> /dev/null)
        b=$(jq -c "$f" "$O/rt_batch.$m" 2> /dev/null)
        if [ -n "$want" ] && [ "$a" = "$want" ]; then pass
        else fail "serve run time, $m alone after the others: $(head -c 200 "$O/rt_alone.$m") differs from its echo run $(head -c 200 "$O/rt_single.$m")"
        fi
        if [ -n "$b" ] && [ "$b" = "$a" ]; then pass
        else fail "serve run time, $m in a batch of five: $(head -c 200 "$O/rt_batch.$m") differs from its single run $(head -c 200 "$O/rt_alone.$m")"
        fi
    done
    post_rt "$O/rt.bad" "$(body nosuch lora false)"
    [ "$(jq -r .error.param "$O/rt.bad")" = lora ] && pass || fail "\"lora\": \"nosuch\": $(cat "$O/rt.bad")"
    # an answer names the model that gave it: the adapter picked, or the base
    for m in a8 rs g1 r64 default; do
        got=$(jq -r .model "$O/rt_batch.$m" 2> /dev/null)
        [ "$got" = "$m" ] && pass || fail "serve run time, $m: the answer names the model \"$got\""
    done
    # /v1/score scores with the base: a model that names a run-time adapter is refused, not scored without it
    curl -s -H 'Content-Type: application/json' --data-binary "{\"model\": \"a8\", \"prompt\": \"$P1\"}" \
        "http://127.0.0.1:$port/v1/score" > "$O/rt.score"
    [ "$(jq -r .error.param "$O/rt.score")" = model ] && pass || fail "/v1/score with model a8: $(head -c 300 "$O/rt.score")"
    kill "$pid"
fi

# --batch --jsonl with --lora NAME=PATH: a line's "lora" picks one, applied
# at run time. The four lines together (--parallel 4) give each line's bits
# alone, and are checked against the reference below.
BRT="--lora a8=$A/r8 --lora rs=$A/rslora --lora g1=$A/r1.gguf --lora r64=$A/r64"
for m in a8 rs g1 ""; do
    printf '{"prompt": "%s", "lora": "%s", "max_tokens": 6, "temperature": 0, "logprobs": 1, "echo": true}\n' "$P0" "$m"
done > "$tmp/rt.jsonl"
# shellcheck disable=SC2086
run_gpt "$O/rt.batch" --batch --jsonl -m "$B" $BRT --parallel 4 --ignore-eos -q -t 1 < "$tmp/rt.jsonl"
k=0
while read -r line; do
    # shellcheck disable=SC2086
    printf '%s\n' "$line" | "$GPT" --batch --jsonl -m "$B" $BRT --ignore-eos -q -t 1 > "$O/rt_line.$k" 2> /dev/null
    got=$(sed -n "$((k + 1))p" "$O/rt.batch.json" | jq -cS 'del(.stats, .seed, .index)')
    if [ -n "$got" ] && [ "$got" = "$(jq -cS 'del(.stats, .seed, .index)' "$O/rt_line.$k")" ]; then pass
    else fail "--batch run time, line $k of four: $got differs from the line alone $(head -c 300 "$O/rt_line.$k")"
    fi
    k=$((k + 1))
done < "$tmp/rt.jsonl"
printf '{"prompt": "x", "lora": "nosuch"}\n' | "$GPT" --batch --jsonl -m "$B" $BRT -q -t 1 > "$O/rt_bad.json" 2> /dev/null
grep -q '"lora \\"nosuch\\": no adapter' "$O/rt_bad.json" && pass || fail "--batch \"lora\": \"nosuch\": $(cat "$O/rt_bad.json")"

# ----------------------------------------------------------------------------
# refusals: exit 1 (2 for usage), not a signal, one line naming the fault
# refused WHAT ERRFILE RC WANT_RC WORD
refused() {
    if [ "$3" -eq "$4" ] && [ "$(wc -l < "$2")" -eq 1 ] && grep -q -- "$5" "$2"; then pass
    else fail "$1: exit $3, stderr $(head -c 400 "$2") (want exit $4 and one line naming $5)"
    fi
}
while read -r name word; do
    d=$A/broken/$name
    "$GPT" -m "$B" --lora "$d" -p "$P0" -n 2 -q > /dev/null 2> "$O/$name.err"
    refused "$name: gpt" "$O/$name.err" $? 1 "$word"
done < "$A/broken.txt"
# adapter_model.safetensors cut short anywhere: the header's length, its
# JSON, the data (every tensor's byte range is checked before it is read)
st=$A/r8/adapter_model.safetensors
size=$(wc -c < "$st")
hlen=$(od -An -t u8 -N8 "$st" | tr -d ' ')
for n in 0 4 8 9 40 $((8 + hlen - 1)) $((8 + hlen)) $((8 + hlen + 100)) $((size / 2)) $((size - 1)); do
    mkdir -p "$tmp/cut$n"
    cp "$A/r8/adapter_config.json" "$tmp/cut$n/"
    head -c "$n" "$st" > "$tmp/cut$n/adapter_model.safetensors"
    "$GPT" -m "$B" --lora "$tmp/cut$n" -p "$P0" -n 1 -q > /dev/null 2> "$O/cut.err"
    refused "adapter_model.safetensors cut at $n of $size bytes" "$O/cut.err" $? 1 "adapter_model.safetensors"
done
# a GGUF adapter cut short anywhere: the header, the metadata, the tensor
# infos, the data
g=$A/r8.gguf
size=$(wc -c < "$g")
for n in 0 3 4 12 30 100 400 $((size / 2)) $((size - 1)); do
    head -c "$n" "$g" > "$tmp/cut.gguf"
    "$GPT" -m "$B" --lora "$tmp/cut.gguf" -p "$P0" -n 1 -q > /dev/null 2> "$O/cut.err"
    refused "r8.gguf cut at $n of $size bytes" "$O/cut.err" $? 1 "cut.gguf"
done
# a GGUF adapter given as the model: named as an adapter
"$GPT" -m "$g" -p "$P0" -n 1 -q > /dev/null 2> "$O/m.err"
refused "-m r8.gguf" "$O/m.err" $? 1 "general.type"
# each mode refuses through the same reader: one fault in each
d=$A/broken/use_dora
"$GPT" -m "$B" --lora "$d" --score -p "$P0" -q > /dev/null 2> "$O/m.err"
refused "gpt --score" "$O/m.err" $? 1 use_dora
"$GPT" -m "$B" --lora "$d" --batch -q < "$tmp/batch.jsonl" > /dev/null 2> "$O/m.err"
refused "gpt --batch" "$O/m.err" $? 1 use_dora
echo Hi | "$GPT" chat -m "$B" --lora "$d" -q > /dev/null 2> "$O/m.err"
refused "gpt chat" "$O/m.err" $? 1 use_dora
"$GPT" convert "$B" "$O/never.bin" --lora "$A/broken/missing_tensor" 2> "$O/m.err"
refused "gpt convert" "$O/m.err" $? 1 "h.1.mlp.c_fc.lora_B"
[ -e "$O/never.bin" ] && fail "gpt convert left $O/never.bin after refusing"
# the server must exit, not serve
"$GPT" serve --port 0 -m "$B" --lora "$A/broken/wrong_shape" -t 1 2> "$O/m.err" &
spid=$!
pids="$pids $spid"
i=0
while kill -0 "$spid" 2> /dev/null && ! grep -q '^gpt: serving' "$O/m.err" && [ $i -lt 3000 ]; do
    sleep 0.1
    i=$((i + 1))
done
if kill -0 "$spid" 2> /dev/null; then
    kill -9 "$spid"
    fail "gpt serve --lora wrong_shape did not exit: $(head -c 300 "$O/m.err")"
else
    wait "$spid"
    refused "gpt serve" "$O/m.err" $? 1 "h.0.attn.c_attn.lora_A"
fi
# usage errors
"$GPT" -m "$B" --lora ":0.5" -p "$P0" -n 1 -q > /dev/null 2> "$O/m.err"
refused "--lora :0.5" "$O/m.err" $? 2 "needs a PATH"
"$GPT" -m "$B" --lora "$A/r8:1e99" -p "$P0" -n 1 -q > /dev/null 2> "$O/m.err"
refused "--lora PATH:1e99" "$O/m.err" $? 2 "out of range"
many=""
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17; do many="$many --lora $A/r1"; done
# shellcheck disable=SC2086
"$GPT" -m "$B" $many -p "$P0" -n 1 -q > /dev/null 2> "$O/m.err"
refused "17 adapters" "$O/m.err" $? 2 "at most 16"
"$GPT" -m "$B" --lora "a8=$A/r8" -p "$P0" -n 1 -q > /dev/null 2> "$O/m.err"
refused "gpt --lora NAME=PATH" "$O/m.err" $? 2 "batch"
echo Hi | "$GPT" chat -m "$B" --lora "a8=$A/r8" -q > /dev/null 2> "$O/m.err"
refused "gpt chat --lora NAME=PATH" "$O/m.err" $? 2 "gpt serve"
"$GPT" serve -m "$B" --lora "a8=$A/r8" --lora "a8=$A/r1" 2> "$O/m.err"
refused "gpt serve --lora a8=... twice" "$O/m.err" $? 2 "twice"
"$GPT" convert "$B" "$O/never.bin" --lora 2> "$O/m.err"
refused "gpt convert --lora" "$O/m.err" $? 2 "lora"
"$GPT" -m "$B" --lora "$tmp/nosuch" -p "$P0" -n 1 -q > /dev/null 2> "$O/m.err"
refused "--lora nosuch" "$O/m.err" $? 1 "nosuch"

# ----------------------------------------------------------------------------
# the comparison with the reference
cat > "$tmp/check.py" << 'EOF'
import json, os, sys
sys.path.insert(0, "tests")  # run from the repository's root, as every test
import numpy as np
import make_lora as ml
import reference_forward as rf

TOL = 1e-4       # nats, float32 gpt against float64 (cli_configs.sh)
TOL_F16 = 2e-2   # nats, f16 weights against the float32 merge: a bound, the exact check is TOL on the rounded merge
CONTRAST = 1e-3  # what a wrong merge must move the reference by, at least
N = 6
B, A, O = sys.argv[1], sys.argv[2], sys.argv[3]
passed = failed = 0


def ok(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("cli_lora: " + what)
    return cond


def load(name, what):
    rc = int(open(os.path.join(O, name + ".rc")).read())
    err = open(os.path.join(O, name + ".err"), errors="replace").read().strip()
    if not ok(rc == 0, "%s: exit %d: %s" % (what, rc, err[:300])):
        return None
    if name.endswith(".batch"):
        return [json.loads(l) for l in open(os.path.join(O, name + ".json"))]
    return json.load(open(os.path.join(O, name + ".json")))


def adapters(name):
    if name.endswith(".gguf"):  # the PEFT adapter's tensors
        return [(os.path.join(A, name[:-5]), 1.0)]
    if name == "two":
        return [(os.path.join(A, "r8"), 0.5), (os.path.join(A, "rslora"), -1.5)]
    return [(os.path.join(A, name), 1.0)]


def close(what, got, want, tol):
    e = np.abs(np.array(got, dtype=float) - np.array(want)).max(initial=0)
    return ok(e <= tol, "%s: log-probabilities %.3g from the reference's (tolerance %g)" % (what, e, tol))


def generation(what, m, g, tol):
    lp = g.get("logprobs")
    if not ok(lp is not None, what + ": no logprobs"):
        return
    ids = lp["token_ids"]
    ok(ids == g["prompt_ids"] + g["tokens"], what + ": token_ids are not the prompt's and the tokens")
    r = rf.score(m, ids)
    close(what, lp["token_logprobs"][1:], r["logprobs"], tol)
    top = [max(d.values()) for d in lp["top_logprobs"][1:]]
    close(what + " top-1", top, r["max_logprobs"], tol)
    ref = rf.greedy(m, g["prompt_ids"], N)
    for j, (a, b) in enumerate(zip(g["tokens"], ref["greedy"])):
        if a != b:
            near = ref["greedy_margins"][j] < 2 * tol
            ok(near, "%s: greedy token %d is %d, the reference's %d (margin %.3g)" % (what, j, a, b, ref["greedy_margins"][j]))
            if near:
                print("cli_lora: note: %s: greedy token %d a near tie" % (what, j))
            return
    ok(len(g["tokens"]) == N, "%s: %d tokens" % (what, len(g["tokens"])))


def scored(what, m, s, tol):
    lp = s["logprobs"]
    ok(lp[:1] == [None] and len(lp) == len(s["tokens"]), what + ": logprobs do not line up with the tokens")
    close(what, lp[1:], rf.score(m, s["tokens"])["logprobs"], tol)


base = rf.load(B)
names = json.load(open(os.path.join(A, "manifest.json")))["good"] + ["two"]
models = {}
for name in names:
    try:
        m = models[name] = ml.merged(B, adapters(name))
        g, s = load(name + ".gen", name), load(name + ".score", name + " --score")
        if g is not None:
            generation(name, m, g, TOL)
        if s is not None:
            scored(name + " --score", m, s, TOL)
        # the comparison sees the adapter, and a wrong merge of it
        ids = s["tokens"] if s else g["prompt_ids"]
        want = np.array(rf.score(m, ids)["logprobs"])
        for wrong in ["none", "transpose", "rslora"]:
            if wrong == "none":
                w = base
            else:
                w = ml.merged(B, adapters(name), wrong)
                if all(np.array_equal(w.w[k], m.w[k]) for k in m.w):
                    continue  # no matrix of this adapter can be merged that way
            d = np.abs(np.array(rf.score(w, ids)["logprobs"]) - want).max()
            ok(d > CONTRAST, "%s: a merge %s moves the reference only %.3g: the test cannot see it" % (name, wrong, d))
    except Exception as e:
        ok(False, "%s: %s: %s" % (name, type(e).__name__, e))

# the GGUF files against the reference too (the same bits as PEFT's runs,
# checked above, so the same distance)
for name in json.load(open(os.path.join(A, "manifest.json")))["gguf"]:
    g, s = load(name + ".gguf.gen", name + ".gguf"), load(name + ".gguf.score", name + ".gguf --score")
    if g is not None:
        generation(name + ".gguf", models[name], g, TOL)
    if s is not None:
        scored(name + ".gguf --score", models[name], s, TOL)

# run time (gpt serve --lora NAME=PATH): each adapter's single run against
# the reference of its merge
for m, name in (("a8", "r8"), ("rs", "rslora"), ("g1", "r1"), ("r64", "r64"), ("default", None)):
    try:
        c = json.load(open(os.path.join(O, "rt_single." + m)))["choices"][0]
        lp = c["logprobs"]
        n_prompt = len(lp["token_ids"]) - len(c["tokens"])
        cut = {k: lp[k][:n_prompt + N] for k in ("token_ids", "token_logprobs", "top_logprobs")}
        generation("serve run time " + m, models[name] if name else base,
                   {"prompt_ids": lp["token_ids"][:n_prompt], "tokens": c["tokens"][:N], "logprobs": cut}, TOL)
    except (OSError, ValueError, KeyError, TypeError) as e:
        ok(False, "serve run time %s: %s: %s" % (m, type(e).__name__, e))

# --batch at run time: each line against its adapter's reference
lines = load("rt.batch", "--batch run time")
if lines is not None and ok(len(lines) == 4, "--batch run time: %d lines" % len(lines)):
    for g, name in zip(lines, ["r8", "rslora", "r1", None]):
        if ok("error" not in g, "--batch run time %s: %s" % (name, g.get("error"))):
            generation("--batch run time %s" % name, models[name] if name else base, g, TOL)

# fan_in_fan_out true and false: the same tensors, the same bits
a, b = load("r8.score", "r8"), load("r8_fifo.score", "r8_fifo")
ok(a is not None and b is not None and a["logprobs"] == b["logprobs"], "r8 and r8_fifo (fan_in_fan_out) differ")

# f16: the merged weights rounded, then the forward
f16 = ml.rounded(ml.merged(B, adapters("two")), "F16")
g = load("two.f16", "two --dtype f16")
if g is not None:
    generation("two --dtype f16 (the rounded merge)", f16, g, TOL)
    generation("two --dtype f16 (the float32 merge)", models["two"], g, TOL_F16)
s = load("r8.f16", "r8 --dtype f16 --score")
if s is not None:
    scored("r8 --dtype f16 --score", ml.rounded(ml.merged(B, adapters("r8")), "F16"), s, TOL)

# --batch
lines = load("two.batch", "two --batch")
if lines is not None and ok(len(lines) == 2, "two --batch: %d lines" % len(lines)):
    for k, g in enumerate(lines):
        if ok("error" not in g, "two --batch line %d: %s" % (k, g.get("error"))):
            generation("two --batch line %d" % k, models["two"], g, TOL)

# the server
try:
    s = json.load(open(os.path.join(O, "two.serve_score.json")))
    scored("two serve /v1/score", models["two"], s, TOL)
    c = json.load(open(os.path.join(O, "two.serve_gen.json")))["choices"][0]
    lp = c["logprobs"]
    n_prompt = len(lp["token_ids"]) - len(c["tokens"])
    generation("two serve /v1/completions", models["two"],
               {"prompt_ids": lp["token_ids"][:n_prompt], "tokens": c["tokens"], "logprobs": lp}, TOL)
except (OSError, ValueError, KeyError, TypeError) as e:
    ok(False, "two serve: %s: %s" % (type(e).__name__, e))
print("RESULT %d %d" % (passed, failed))
EOF
"$PY" "$tmp/check.py" "$B" "$A" "$O" > "$tmp/check.log" 2>&1
add_counts "$tmp/check.log" check.py
summary

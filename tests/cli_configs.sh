#!/bin/sh
# cli_configs.sh - every GPT2Config flag and activation gpt reads, against a
# float64 forward pass written from transformers' GPT-2 (reference_forward.py),
# in every mode of gpt.
#
# make_variants.py writes small checkpoints into the scratch directory: the
# default config; scale_attn_weights false; scale_attn_by_inverse_layer_idx;
# both; an untied lm_head.weight; each activation (gelu, gelu_new,
# gelu_pytorch_tanh, gelu_fast, quick_gelu, relu, silu, swish); n_inner 200
# and 100; reorder_and_upcast_attn; layer_norm_epsilon 1e-3; and ones shaped
# like public models: codeparrot-small (its own 32768-token BPE, both
# attention flags), Cerebras-GPT (erf gelu, 2048 positions, F16), distilgpt2
# (6 layers), DialoGPT-medium (24 layers, 16 heads of 4), an untied fine-tune
# (BF16, "transformer." names). For each,
# three prompts, and in each mode the log-probability of every token (the
# prompt's, with --echo, and the generated ones) is within 1e-4 nats of the
# reference's, the top-1 log-probability too, and the greedy tokens are the
# reference's argmax continuation (unless the reference's top two are
# within 2e-4 there: a tie in float32, noted, not failed). The modes:
#   single    gpt -m DIR -p P -n 6 --temp 0 --ignore-eos --echo --logprobs 1 --json
#             and gpt -m DIR --score --json -p P (Cerebras-like: also a text
#             of more than 128 tokens, the positions the others lack)
#   batch     gpt --batch --jsonl (the three prompts on stdin, one call)
#   draft     gpt --draft DRAFT ... (the model itself; for the attention
#             flags, untied and n_inner also another variant with the same
#             tokenizer, whose guesses fail): the single run's tokens, exactly
#   serve     gpt serve --port 0, POST /v1/completions with echo and
#             logprobs 1, and /v1/score
#   model.bin gpt convert DIR OUT.bin: the single command on OUT.bin gives
#             the directory's output exactly; gpt convert --dtype q8 gives
#             the output of -m DIR --dtype q8 (converted at load) exactly
#   blas      gpt --score --blas on a prompt of 64 tokens or more (OpenBLAS's
#             attention and matrix products)
#   kv f16    the single command with --kv-type f16, within 2e-2 nats: an
#             f16 cache rounds each key and value to 11 significant bits
#             (relative error up to 2^-11 = 4.9e-4), and a score q.k of
#             size S moves by about S x 4.9e-4, S being a few units here
#             (more with scale_attn_weights false). Measured on every
#             variant: at most 2.7e-3 nats (act_gelu), and 5.3e-3 with
#             another draw of the weights (unscaled attention); 2e-2
#             leaves a margin of 4 over the worst seen. Its greedy ties
#             are judged at that bound
# The weights are big enough that each flag matters: the reference with the
# flag taken away (the "contrast" of manifest.json) must differ from the
# reference by more than 1e-3, ten times the tolerance, or the comparison
# would prove nothing. Tokenizer: codeparrot_like's ids are GPT-2's where
# GPT-2's lie in its 32767 tokens, and differ (all below 32768) where not.
# Refusals: add_cross_attention true, model_type gpt_neo and an
# activation_function gpt does not implement (tanh: transformers has it)
# make gpt, gpt --score, gpt --batch and gpt serve exit non-zero (not a
# signal) with one line on stderr that names the field.
# Needs /usr/bin/python3 with numpy (Debian's python3-numpy); skips without.
# Prints "cli_configs: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), GPT_TUNE (default off).
GPT=${GPT:-build/gpt}
GPT_TUNE=${GPT_TUNE:-off}
export GPT_TUNE
PY=/usr/bin/python3
CHECK_NAME=cli_configs
# shellcheck source=tests/serve/lib.sh
. tests/serve/lib.sh

need_python numpy

V=$tmp/v
O=$tmp/out
mkdir -p "$O"

# ----------------------------------------------------------------------------
# the comparison: `configs.py prepare DIR` writes the prompts (DIR/prompt.K,
# DIR/batch.jsonl); `configs.py check DIR` reads gpt's outputs and prints
# "cli_configs: WHAT" for each failure, then "RESULT PASSED FAILED"
cat > "$tmp/configs.py" << 'EOF'
import json, os, sys, urllib.error, urllib.request
sys.path.insert(0, "tests")  # run from the repository's root, as every test
import numpy as np
import reference_forward as rf

TOL = 1e-4       # nats, float32 gpt against float64
TOL_F16 = 2e-2   # nats, with an f16 KV cache (see cli_configs.sh)
CONTRAST = 1e-3  # a flag must move the reference by more than this
N = 6            # greedy tokens
PROMPTS = ["Hello world, this is a test",
           "def add(a, b):\n    return a + b",
           "The quick brown fox jumps over the lazy dog, hitherto unprepared."]
LONG = " ".join([
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of",
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light,",
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had everything",
    "before us, we had nothing before us, we were all going direct to Heaven, we were all going direct the",
    "other way; in short, the period was so far like the present period, that some of its noisiest",
    "authorities insisted on its being received, for good or for evil, in the superlative degree of",
    "comparison only. There were a king with a large jaw and a queen with a plain face, on the throne of",
    "England; there were a king with a large jaw and a queen with a fair face, on the throne of France."])
ROOT = sys.argv[2]
passed = failed = 0


def ok(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("cli_configs: " + what)
    return cond


def prepare():
    for k, p in enumerate(PROMPTS):
        open(os.path.join(ROOT, "prompt.%d" % k), "w").write(p)
    open(os.path.join(ROOT, "prompt.long"), "w").write(LONG)
    open(os.path.join(ROOT, "prompt.mid"), "w").write(LONG[:400])
    with open(os.path.join(ROOT, "batch.jsonl"), "w") as f:
        for p in PROMPTS:
            f.write(json.dumps({"prompt": p, "max_tokens": N, "temperature": 0, "logprobs": 1, "echo": True}) + "\n")


def output(base, what):
    """gpt's JSON in base.json, or None (a failure) when it exited non-zero"""
    rc = int(open(base + ".rc").read())
    err = open(base + ".err", errors="replace").read().strip()
    if not ok(rc == 0, "%s: exit %d: %s" % (what, rc, err[:300])):
        return None
    try:
        if base.endswith(".batch"):
            return [json.loads(l) for l in open(base + ".json")]
        return json.load(open(base + ".json"))
    except ValueError as e:
        ok(False, "%s: not JSON (%s)" % (what, e))
        return None


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.load(r), None
    except urllib.error.HTTPError as e:
        return None, "status %d: %s" % (e.code, e.read()[:300])
    except OSError as e:
        return None, str(e)


class Variant:
    def __init__(self, entry):
        self.e, self.name = entry, entry["name"]
        self.dir = os.path.join(ROOT, "v", self.name)
        self.m = rf.load(self.dir)
        self.scores, self.greedies = {}, {}

    def score(self, ids):
        k = tuple(ids)
        if k not in self.scores:
            self.scores[k] = rf.score(self.m, list(ids))
        return self.scores[k]

    def greedy(self, ids):
        k = tuple(ids)
        if k not in self.greedies:
            self.greedies[k] = rf.greedy(self.m, list(ids), N)
        return self.greedies[k]

    def scored(self, what, s):
        """--score's (and /v1/score's) logprobs, lined up with its tokens: the
        first null; the rest, those of tokens[1:]"""
        lp = s["logprobs"]
        ok(len(lp) == len(s["tokens"]) and lp[:1] == [None],
           "%s: %d logprobs for %d tokens, the first %s (want null)" % (what, len(lp), len(s["tokens"]), lp[:1]))
        return lp[1:]

    def logprobs(self, what, ids, got, top, tol):
        """got[i], top[i]: gpt's log-probability of ids[i+1] and its top-1 one"""
        r = self.score(ids)
        e = np.abs(np.array(got, dtype=float) - r["logprobs"]).max(initial=0)
        ok(e <= tol, "%s: log-probabilities %.3g from the reference's (tolerance %g)" % (what, e, tol))
        if top is not None:
            e = np.abs(np.array(top, dtype=float) - r["max_logprobs"]).max(initial=0)
            ok(e <= tol, "%s: top-1 log-probabilities %.3g from the reference's (tolerance %g)" % (what, e, tol))

    def greedy_tokens(self, what, prompt_ids, tokens, tol):
        g = self.greedy(prompt_ids)
        for j, (a, b) in enumerate(zip(tokens, g["greedy"])):
            if a != b:
                near = g["greedy_margins"][j] < 2 * tol
                ok(near, "%s: greedy token %d is %d, the reference's argmax %d (top-2 margin %.3g)"
                   % (what, j, a, b, g["greedy_margins"][j]))
                if near:
                    print("cli_configs: note: %s: greedy token %d a near tie (%.3g)" % (what, j, g["greedy_margins"][j]))
                return
        ok(len(tokens) == N, "%s: %d tokens, not %d" % (what, len(tokens), N))

    def generation(self, what, prompt_ids, tokens, lp, tol=TOL):
        """a generation with echo and logprobs 1; returns its tokens"""
        if lp is None:
            return ok(False, "%s: no logprobs" % what)
        ids = lp["token_ids"]
        ok(ids == list(prompt_ids) + list(tokens), "%s: token_ids %s are not the prompt's and the tokens" % (what, ids))
        ok(len(lp["token_logprobs"]) == len(ids) and lp["token_logprobs"][0] is None,
           "%s: token_logprobs has %d entries for %d tokens" % (what, len(lp["token_logprobs"]), len(ids)))
        top = [max(d.values()) if d else None for d in lp["top_logprobs"][1:]]
        self.logprobs(what, ids, lp["token_logprobs"][1:], top, tol)
        self.greedy_tokens(what, prompt_ids, tokens, tol)


def check():
    manifest = json.load(open(os.path.join(ROOT, "v", "manifest.json")))
    ports = dict(l.split() for l in open(os.path.join(ROOT, "ports.txt")))
    default_ids = {}
    for entry in manifest:
        if entry["expect"] != "ok":
            continue
        try:
            default_ids = check_variant(entry, ports, default_ids)
        except Exception as e:  # one variant's surprise is its failure, not the end
            ok(False, "%s: %s: %s" % (entry["name"], type(e).__name__, e))
    print("RESULT %d %d" % (passed, failed))


def check_variant(entry, ports, default_ids):
    """every mode of one variant; returns GPT-2's prompt ids (the default variant's)"""
    out = os.path.join(ROOT, "out")
    v, name = Variant(entry), entry["name"]
    o = os.path.join(out, name)
    # single: each prompt
    single = {}
    for k, p in enumerate(PROMPTS):
        what = "%s single prompt %d" % (name, k)
        g = output("%s.single.%d" % (o, k), what)
        if g is None:
            continue
        ok(g["text"].startswith(p), "%s: the text %r does not start with the prompt" % (what, g["text"]))
        ok(max(g["prompt_ids"] + g["tokens"]) < v.m.V, "%s: an id past the vocabulary" % what)
        single[k] = g
        v.generation(what, g["prompt_ids"], g["tokens"], g.get("logprobs"))
    if name == "default":
        default_ids = {k: g["prompt_ids"] for k, g in single.items()}
    ids = {k: g["prompt_ids"] for k, g in single.items()}
    # the tokenizer: GPT-2's ids where they fit the vocabulary
    if v.m.V != 50257:
        for k in ids:
            if k in default_ids and max(default_ids[k]) < v.m.V - 1:
                ok(ids[k] == default_ids[k], "%s: prompt %d is %s, GPT-2's ids %s" % (name, k, ids[k], default_ids[k]))
            elif k in default_ids:
                ok(ids[k] != default_ids[k], "%s: prompt %d has GPT-2's ids past its vocabulary" % (name, k))
    # the flags matter on these weights
    for key, val in entry["contrast"].items():
        m2 = rf.load(v.dir, {key: val})
        d = 0.0
        for pids in list(ids.values()) or [i for i in default_ids.values() if max(i) < v.m.V]:
            d = max(d, np.abs(np.array(rf.score(m2, pids)["logprobs"]) - v.score(pids)["logprobs"]).max())
        ok(d > CONTRAST, "%s: %s %s moves the reference only %.3g: the test cannot see it" % (name, key, val, d))
    # --score
    for k in ["0", "long"] if entry["long"] else ["0"]:
        what = "%s --score prompt %s" % (name, k)
        s = output("%s.score.%s" % (o, k), what)
        if s is None:
            continue
        if k == "0" and 0 in ids:
            ok(s["tokens"] == ids[0], "%s: tokens %s, the single run's prompt %s" % (what, s["tokens"], ids[0]))
        if k == "long":
            ok(len(s["tokens"]) > 128, "%s: only %d tokens" % (what, len(s["tokens"])))
        v.logprobs(what, s["tokens"], v.scored(what, s), None, TOL)
    # --blas: a prompt of 64 tokens or more takes OpenBLAS's attention and products
    s = output(o + ".blas", name + " --score --blas")
    if s is not None and ok(len(s["tokens"]) >= 64, "%s --score --blas: only %d tokens" % (name, len(s["tokens"]))):
        v.logprobs(name + " --score --blas", s["tokens"], v.scored(name + " --score --blas", s), None, TOL)
    # kv f16
    g = output(o + ".kv16", name + " --kv-type f16")
    if g is not None:
        v.generation(name + " --kv-type f16", g["prompt_ids"], g["tokens"], g.get("logprobs"), TOL_F16)
    # --batch
    lines = output(o + ".batch", name + " --batch")
    if lines is not None and ok(len(lines) == len(PROMPTS), "%s --batch: %d lines" % (name, len(lines))):
        for k, g in enumerate(lines):
            what = "%s --batch line %d" % (name, k)
            if ok("error" not in g, "%s: %s" % (what, g.get("error"))):
                if k in ids:
                    ok(g["prompt_ids"] == ids[k], "%s: prompt ids differ from the single run's" % what)
                v.generation(what, g["prompt_ids"], g["tokens"], g.get("logprobs"))
    # --draft: exactly the single run's tokens
    for dr in entry["drafts"]:
        what = "%s --draft %s" % (name, dr)
        g = output("%s.draft.%s" % (o, dr), what)
        if g is None:
            continue
        if 0 in single:
            ok(g["tokens"] == single[0]["tokens"], "%s: tokens %s, the plain run's %s" % (what, g["tokens"], single[0]["tokens"]))
        v.generation(what, g["prompt_ids"], g["tokens"], g.get("logprobs"))
    # model.bin: the same bits as the directory (as stored), and as --dtype q8 (q8);
    # "stats" holds the path and the timings, "seed" the one each run drew
    # (greedy: it changes nothing)
    def same(a, b):
        return ({k: x for k, x in a.items() if k not in ("stats", "seed")} ==
                {k: x for k, x in b.items() if k not in ("stats", "seed")})
    rc = int(open(o + ".convert.rc").read())
    if ok(rc == 0, "%s gpt convert: exit %d: %s" % (name, rc, open(o + ".convert.err").read()[:300])):
        g = output(o + ".modelbin", name + " model.bin")
        if g is not None and 0 in single:
            ok(same(g, single[0]), "%s model.bin: output differs from the directory's" % name)
        a, b = output(o + ".q8", name + " --dtype q8"), output(o + ".q8bin", name + " q8 model.bin")
        if a is not None and b is not None:
            ok(same(a, b), "%s q8 model.bin: output differs from --dtype q8 at load" % name)
    # the server
    port = ports.get(name)
    if not ok(port is not None, "%s: gpt serve did not start: %s" % (name, open(o + ".serve.log").read()[:300])):
        return default_ids
    port = int(port)
    for k, p in enumerate(PROMPTS):
        what = "%s serve prompt %d" % (name, k)
        r, err = post(port, "/v1/completions", {"prompt": p, "max_tokens": N, "temperature": 0, "logprobs": 1,
                                                "echo": True, "ignore_eos": True})
        if not ok(r is not None, "%s: %s" % (what, err)):
            continue
        c = r["choices"][0]
        lp = c.get("logprobs") or {}
        pids = lp.get("token_ids", [])[:len(lp.get("token_ids", [])) - len(c["tokens"])]
        if k in ids:
            ok(pids == ids[k], "%s: prompt ids %s, the single run's %s" % (what, pids, ids[k]))
        v.generation(what, pids, c["tokens"], c.get("logprobs"))
    r, err = post(port, "/v1/score", {"prompt": PROMPTS[0]})
    if ok(r is not None, "%s serve /v1/score: %s" % (name, err)):
        v.logprobs(name + " serve /v1/score", r["tokens"], v.scored(name + " serve /v1/score", r), None, TOL)
    return default_ids


prepare() if sys.argv[1] == "prepare" else check()
EOF
"$PY" "$tmp/configs.py" prepare "$tmp" || { fail "configs.py prepare failed"; summary; exit 1; }
"$PY" tests/make_variants.py "$V" || { fail "make_variants.py failed"; summary; exit 1; }
P0=$(cat "$tmp/prompt.0")

# ----------------------------------------------------------------------------
# the servers: one per variant, all loading at once
while read -r name expect field drafts long; do
    [ "$expect" = ok ] || continue
    "$GPT" serve --port 0 -m "$V/$name" -t 1 --parallel 2 2> "$O/$name.serve.log" &
    pids="$pids $!"
    echo "$name $!" >> "$tmp/servers"
done < "$V/manifest.txt"

# ----------------------------------------------------------------------------
# the command: each mode's output in OUT.json, stderr in OUT.err, status in
# OUT.rc (run_gpt, checklib.sh)
GEN="-n 6 --temp 0 --ignore-eos --echo --logprobs 1 --json -q -t 1"
# variant NAME DRAFTS LONG: every command-line mode of one variant
variant() {
    d=$V/$1
    o=$O/$1
    for k in 0 1 2; do
        # shellcheck disable=SC2086 # GEN is a list of options
        run_gpt "$o.single.$k" -m "$d" -p "$(cat "$tmp/prompt.$k")" $GEN
    done
    run_gpt "$o.score.0" -m "$d" --score --json -q -t 1 -p "$P0"
    [ "$3" = 1 ] && run_gpt "$o.score.long" -m "$d" --score --json -q -t 1 -p "$(cat "$tmp/prompt.long")"
    run_gpt "$o.blas" -m "$d" --score --json --blas -q -t 2 -p "$(cat "$tmp/prompt.mid")"
    # shellcheck disable=SC2086
    run_gpt "$o.kv16" -m "$d" -p "$P0" $GEN --kv-type f16
    # shellcheck disable=SC2086
    run_gpt "$o.batch" --batch --jsonl -m "$d" --ignore-eos -q -t 1 < "$tmp/batch.jsonl"
    for dr in $(echo "$2" | tr , ' '); do
        # shellcheck disable=SC2086
        run_gpt "$o.draft.$dr" -m "$d" --draft "$V/$dr" -p "$P0" $GEN
    done
    # model.bin: converted as stored, the directory's bits; converted to q8,
    # the bits of the same conversion made at load (--dtype q8)
    "$GPT" convert "$d" "$o.bin" > "$o.convert.err" 2>&1 &&
        "$GPT" convert "$d" "$o.q8.bin" --dtype q8 >> "$o.convert.err" 2>&1
    echo $? > "$o.convert.rc"
    # shellcheck disable=SC2086
    run_gpt "$o.modelbin" -m "$o.bin" -p "$P0" $GEN
    # shellcheck disable=SC2086
    run_gpt "$o.q8" -m "$d" --dtype q8 -p "$P0" $GEN
    # shellcheck disable=SC2086
    run_gpt "$o.q8bin" -m "$o.q8.bin" -p "$P0" $GEN
    rm -f "$o.bin" "$o.q8.bin"
}
# two lanes at once: the odd lines and the even ones
lane() {
    i=0
    while read -r name expect field drafts long; do
        i=$((i + 1))
        [ "$expect" = ok ] && [ $((i % 2)) = "$1" ] && variant "$name" "$drafts" "$long"
    done < "$V/manifest.txt"
}
lane 0 &
lane0=$!
lane 1
wait "$lane0"

# ----------------------------------------------------------------------------
# refusals: non-zero, not a signal, one line naming the field
# refused WHAT ERRFILE RC FIELD
refused() {
    if [ "$3" -ne 0 ] && [ "$3" -lt 128 ] && [ "$(wc -l < "$2")" -eq 1 ] && grep -q -- "$4" "$2"; then pass
    else fail "$1: exit $3, stderr $(head -c 400 "$2") (want non-zero and one line naming $4)"
    fi
}
while read -r name expect field drafts long; do
    [ "$expect" = refuse ] || continue
    d=$V/$name
    "$GPT" -m "$d" -p "$P0" -n 2 -q > /dev/null 2> "$O/$name.err"
    refused "$name: gpt" "$O/$name.err" $? "$field"
    "$GPT" -m "$d" --score -p "$P0" -q > /dev/null 2> "$O/$name.err"
    refused "$name: gpt --score" "$O/$name.err" $? "$field"
    "$GPT" -m "$d" --batch -q < "$tmp/prompt.0" > /dev/null 2> "$O/$name.err"
    refused "$name: gpt --batch" "$O/$name.err" $? "$field"
    # the server must exit, not serve: wait for either
    "$GPT" serve --port 0 -m "$d" -t 1 2> "$O/$name.err" &
    spid=$!
    pids="$pids $spid"
    i=0
    while kill -0 "$spid" 2> /dev/null && ! grep -q '^gpt: serving' "$O/$name.err" && [ $i -lt 3000 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    if kill -0 "$spid" 2> /dev/null; then
        kill -9 "$spid"
        wait "$spid"
        fail "$name: gpt serve did not exit: $(head -c 300 "$O/$name.err")"
    else
        wait "$spid"
        refused "$name: gpt serve" "$O/$name.err" $? "$field"
    fi
done < "$V/manifest.txt"

# ----------------------------------------------------------------------------
# wait for every server's ready line (or its end), then compare everything
: > "$tmp/ports.txt"
while read -r name spid; do
    # 300 s: a sanitizer build on a busy machine loads slowly
    wait_serving "$O/$name.serve.log" "$spid" 3000 && echo "$name $port" >> "$tmp/ports.txt"
done < "$tmp/servers"

"$PY" "$tmp/configs.py" check "$tmp" > "$tmp/check.log" 2>&1
add_counts "$tmp/check.log" "configs.py check"
summary

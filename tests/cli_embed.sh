#!/bin/sh
# cli_embed.sh - gpt embed: each line's vector and --hidden-states against
# a float64 forward pass written from transformers' GPT2Model
# (tests/reference_forward.py --hidden): every vector (the pooled one, raw
# and of unit length, with --pooling mean and last; each token's residual
# stream before and after each block and its final hidden state) within
# 1e-5 of the reference, relative to the vector's length, on
# gpt2-124M-shaped (12 layers); the names TransformerLens gives them
# (blocks.L.hook_resid_pre/post, ln_final.hook_normalized) for the layers
# asked; 16 lines of 1 to about 300 tokens in one run, each line's vector
# bit for bit the one -p gives it alone; --jsonl's ids and "normalize";
# bad lines ({"index", "error"} in their place, the others run, exit 1)
# and usage errors (exit 2, naming the flag).
# Needs /usr/bin/python3 with numpy.
# Prints "cli_embed: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), CKPT_DIR (default build/ckpt).
GPT=${GPT:-build/gpt}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
GPT_TUNE=${GPT_TUNE:-off}
export GPT_TUNE
CHECK_NAME=cli_embed
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
need_python numpy
M=$CKPT_DIR/gpt2-124M-shaped

cat > "$tmp/check.py" << 'PY'
import json, subprocess, sys
sys.path.insert(0, "tests")  # run from the repository's root, as every test
import numpy as np
import reference_forward as rf

GPT, M = sys.argv[1], sys.argv[2]
TOL = 1e-5  # |got - ref| / |ref| of a vector: float32 against float64 (the issue's bound)
PARA = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
        "foolishness, it was the epoch of belief, it was the epoch of incredulity. ")
TEXTS = ["Hello", "Hello world", "The quick brown fox jumps over the lazy dog", "def add(a, b):", " ",
         "Ünïcödé ✓ 日本語", "1, 2, 3, 4, 5", PARA, PARA * 3, PARA * 6, "<|endoftext|>", "a\tb",
         "The LORD said unto Moses", "Once upon a time", "x" * 50, PARA[:90]]
passed = failed = 0
worst = {}


def ok(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("cli_embed: " + what)
    return cond


def run(args, stdin=""):
    p = subprocess.run([GPT, "embed", "-m", M, "-q"] + args, input=stdin.encode(), capture_output=True)
    return p.returncode, [json.loads(l) for l in p.stdout.decode().splitlines()], p.stderr.decode()


def rel(got, ref, what):
    e = float(np.linalg.norm(np.asarray(got, dtype=np.float64) - ref) / np.linalg.norm(ref))
    worst[what] = max(worst.get(what, 0.0), e)
    return e


m = rf.load(M)
ids = [int(t) for t in subprocess.run([GPT, "--tokenize", "-m", M, "-p", PARA * 2], capture_output=True,
                                      text=True).stdout.split()]
res = []
h = rf.hidden(m, ids, res)
rc, out, err = run(["--jsonl", "--hidden-states", "all", "--no-normalize"], json.dumps({"input": ids}) + "\n")
ok(rc == 0 and len(out) == 1, "--hidden-states all: exit %d %s" % (rc, err))
hs = out[0]["hidden_states"] if out else {}
names = ["blocks.%d.hook_resid_%s" % (l, k) for l in range(m.L) for k in ("pre", "post")] + ["ln_final.hook_normalized"]
ok(sorted(hs) == sorted(names), "--hidden-states all: the names %s" % sorted(hs)[:6])
for l in range(m.L):
    for k, ref in (("pre", res[l]), ("post", res[l + 1])):
        got = hs.get("blocks.%d.hook_resid_%s" % (l, k), [])
        ok(len(got) == len(ids), "blocks.%d.hook_resid_%s: %d rows, want %d" % (l, k, len(got), len(ids)))
        for t in range(min(len(got), len(ids))):
            e = rel(got[t], ref[t], "residual stream")
            ok(e <= TOL, "blocks.%d.hook_resid_%s token %d: relative error %.3g" % (l, k, t, e))
for t, row in enumerate(hs.get("ln_final.hook_normalized", [])):
    e = rel(row, h[t], "final hidden state")
    ok(e <= TOL, "ln_final.hook_normalized token %d: relative error %.3g" % (t, e))
if out:
    e = rel(out[0]["embedding"], h.mean(0), "pooled")
    ok(e <= TOL, "--no-normalize mean: relative error %.3g" % e)
rc, out, err = run(["-p", PARA * 2, "--pooling", "last", "--hidden-states", "0,5,11"])
ok(rc == 0 and sorted(out[0]["hidden_states"]) == sorted(["blocks.%d.hook_resid_%s" % (l, k) for l in (0, 5, 11)
                                                          for k in ("pre", "post")] + ["ln_final.hook_normalized"]),
   "--hidden-states 0,5,11: exit %d, %s" % (rc, sorted(out[0]["hidden_states"]) if out else err))
if out:
    e = rel(out[0]["embedding"], h[-1] / np.linalg.norm(h[-1]), "pooled")
    ok(e <= TOL, "--pooling last: relative error %.3g" % e)
    ok(out[0]["hidden_states"]["blocks.5.hook_resid_post"] == hs.get("blocks.5.hook_resid_post"),
       "blocks.5.hook_resid_post differs between --hidden-states all and 0,5,11")

# 16 lines in one run: each the bits -p gives it alone
rc, many, err = run([], "".join(t + "\n" for t in TEXTS))
ok(rc == 0 and [o["index"] for o in many] == list(range(16)), "16 lines: exit %d %s" % (rc, err[:300]))
for i, t in enumerate(TEXTS):
    rc, one, err = run(["-p", t])
    ok(rc == 0 and i < len(many) and one[0]["embedding"] == many[i]["embedding"] and
       one[0]["tokens"] == many[i]["tokens"], "line %d: its vector in a run of 16 differs from -p alone" % i)
    if i in (0, 2, 9):
        tids = [int(x) for x in subprocess.run([GPT, "--tokenize", "-m", M, "-p", t], capture_output=True,
                                               text=True).stdout.split()]
        ref = rf.hidden(m, tids).mean(0)
        e = rel(one[0]["embedding"], ref / np.linalg.norm(ref), "pooled")
        ok(e <= TOL and abs(np.linalg.norm(one[0]["embedding"]) - 1) < 1e-6, "line %d: relative error %.3g" % (i, e))

# --jsonl: ids and normalize; bad lines in their place
lines = [json.dumps({"input": TEXTS[1]}), json.dumps({"input": ids[:5], "normalize": False}), "", "[1]",
         json.dumps({"input": []}), json.dumps({"input": ids * 20}), json.dumps({"input": "x", "pooling": "last"}),
         json.dumps({"input": [50257]}), json.dumps({"input": "x", "normalize": "no"})]
rc, out, err = run(["--jsonl"], "\n".join(lines) + "\n")
ok(rc == 1 and [o["index"] for o in out] == list(range(len(lines))), "--jsonl with bad lines: exit %d, %s" % (rc, out))
ok(len(out) > 1 and out[0].get("embedding") == many[1]["embedding"], "--jsonl text: not the plain line's vector")
if len(out) > 1:
    e = rel(out[1]["embedding"], rf.hidden(m, ids[:5]).mean(0), "pooled")
    ok(e <= TOL, "--jsonl ids, normalize false: relative error %.3g" % e)
for o in out[2:]:
    ok("error" in o and "embedding" not in o, "bad line %d: %s" % (o["index"], str(o)[:200]))
rc, out, err = run([], "\n")
ok(rc == 1 and out == [{"index": 0, "error": "the input is empty: it has no tokens to embed"}], "an empty line: %s" % out)

# usage errors: exit 2, one line naming the flag
for args, flag in ((["--pooling", "max", "-p", "x"], "--pooling"), (["--hidden-states", "12", "-p", "x"], "--hidden-states"),
                   (["--hidden-states", "1,,2", "-p", "x"], "--hidden-states"), (["--hidden-states", "", "-p", "x"], "--hidden-states"),
                   (["-p", "x", "--jsonl"], "--jsonl"), (["--parallel", "2", "-p", "x"], "--parallel"),
                   (["--temp", "1", "-p", "x"], "--temp")):
    rc, out, err = run(args)
    ok(rc == 2 and flag in err and err.count("\n") == 1, "%s: exit %d, %s" % (args, rc, err))

for what, e in sorted(worst.items()):
    print("measured: %s: the largest relative error against float64 %.3g (bound %g)" % (what, e, TOL))
print("RESULT %d %d" % (passed, failed))
PY
/usr/bin/python3 "$tmp/check.py" "$GPT" "$M" > "$tmp/check.log" 2>&1
add_counts "$tmp/check.log" "the checks"
summary

"""The checks of tests/cli_serve_embed.sh: gpt serve's /v1/embeddings and
/api/embed against a float64 forward pass, and bit for bit against
themselves whatever else a call or the server holds.

    /usr/bin/python3 tests/serve/embed_check.py PORT_MEAN DIR_MEAN PORT_LAST DIR_LAST KEY [NODE_DIR]

PORT_MEAN serves DIR_MEAN with the default pooling (mean), PORT_LAST
serves DIR_LAST with --pooling last. Prints "cli_serve_embed: WHAT" per
failure, the measurements ("measured: ..."), then "RESULT PASSED FAILED".
With NODE_DIR, the clients (tests/serve/embed_client.mjs) run too.
"""
import base64
import json
import os
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, "tests")  # run from the repository's root, as every test
import numpy as np
import reference_forward as rf

TOL = 1e-5  # |got - ref| / |ref| of a vector: float32 against float64 (the bound)
# a sanitizer build (cli_serve_embed.sh sets EMBED_LIGHT) runs each step
# several times slower: there the load is 2 clients and 12 inputs, and
# the whole-context reference 256 tokens (every path still runs)
LIGHT = os.environ.get("EMBED_LIGHT") == "1"
PORT_MEAN, DIR_MEAN, PORT_LAST, DIR_LAST, KEY = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
NODE_DIR = sys.argv[6] if len(sys.argv) > 6 else None
PARA = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
        "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
        "it was the season of Darkness, it was the spring of hope, it was the winter of despair. ")
# 16 texts of 1 to about 320 tokens (past two chunks of the forward pass)
TEXTS = (["Hello", "Hello world", "The quick brown fox jumps over the lazy dog",
          "def add(a, b):\n    return a + b", " ", "Ünïcödé ✓ 日本語", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
          PARA, PARA * 2, PARA * 4, "<|endoftext|>", "a\n\nb", "The LORD said unto Moses",
          "Once upon a time", "x" * 50, PARA[:150]])
passed = failed = 0


def ok(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("cli_serve_embed: " + what)
    return cond


def post(port, path, body):
    """(status, the answer's JSON)"""
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), json.dumps(body).encode(),
                                 {"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def f32(v):
    """JSON numbers as float32 bits (each number the server wrote reads back as its float32)"""
    return np.asarray(v, dtype=np.float64).astype(np.float32)


def vectors(answer):
    """the float32 vectors of a /v1/embeddings answer, in index order (base64 decoded)"""
    out = []
    for d in sorted(answer["data"], key=lambda d: d["index"]):
        e = d["embedding"]
        out.append(np.frombuffer(base64.b64decode(e), dtype="<f4") if isinstance(e, str) else f32(e))
    return out


def same(a, b):
    return len(a) == len(b) and all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


def embed(port, inputs, **kw):
    st, a = post(port, "/v1/embeddings", dict(kw, input=inputs))
    ok(st == 200, "%s -> %d %s" % (str(inputs)[:80], st, str(a)[:300]))
    return vectors(a) if st == 200 else [], a


def ids_of(port, text):
    st, a = post(port, "/tokenize", {"content": text})
    return a["tokens"]


def rel(got, ref):
    return float(np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref))


# ----------------------------------------------------------------------------
# each vector against the float64 forward pass (transformers' GPT2Model)

worst = {}


def against_reference(port, model, pooling, ids_list, what):
    raw, _ = embed(port, ids_list, normalize=False)
    unit, _ = embed(port, ids_list)
    for k, ids in enumerate(ids_list):
        h = rf.hidden(model, ids)
        ref = h.mean(0) if pooling == "mean" else h[-1]
        for got, want, kind in ((raw, ref, "raw"), (unit, ref / np.linalg.norm(ref), "unit")):
            if k >= len(got):
                continue
            e = rel(got[k], want)
            worst[what] = max(worst.get(what, 0.0), e)
            ok(e <= TOL, "%s %s, input %d (%d tokens): relative error %.3g > %g" % (what, kind, k, len(ids), e, TOL))
        if k < len(unit):
            ok(abs(np.linalg.norm(unit[k].astype(np.float64)) - 1) < 1e-6, "%s: input %d not of unit length" % (what, k))


m_mean = rf.load(DIR_MEAN)
m_last = rf.load(DIR_LAST)
ids16 = [ids_of(PORT_MEAN, t) for t in TEXTS]
long_ids = ids_of(PORT_MEAN, PARA * 16)
ok(len(long_ids) > m_mean.n_positions, "the long text is %d tokens, not past the context" % len(long_ids))
full = long_ids[:m_mean.n_positions]  # the whole context
against_reference(PORT_MEAN, m_mean, "mean", [ids16[i] for i in (0, 1, 2, 3, 5, 9)] + [full[:256] if LIGHT else full],
                  "mean (gpt2-124M-shaped)")
against_reference(PORT_LAST, m_last, "last", [ids16[i] for i in (0, 2, 7)] + [long_ids[:m_last.n_positions]],
                  "last (tiny)")

# ----------------------------------------------------------------------------
# the same bits whatever else is in the call, and under load

alone = [embed(PORT_MEAN, t)[0][0] for t in TEXTS]
ok(same(embed(PORT_MEAN, TEXTS)[0], alone), "16 texts in one call differ from each alone")
ok(same(embed(PORT_MEAN, ids16)[0], alone), "16 token-id inputs in one call differ from each text alone")
ok(same(embed(PORT_MEAN, TEXTS, encoding_format="base64")[0], alone), "base64's bytes differ from the float answer")
raw_alone = [embed(PORT_MEAN, t, normalize=False)[0][0] for t in TEXTS[:4]]
ok(same(embed(PORT_MEAN, TEXTS[:4], normalize=False)[0], raw_alone), "normalize false: one call differs from alone")
_, a = post(PORT_MEAN, "/v1/embeddings", {"input": TEXTS, "model": "anything"})
ok(a.get("object") == "list" and [d["index"] for d in a["data"]] == list(range(16)) and
   all(d["object"] == "embedding" for d in a["data"]) and a["model"] == os.path.basename(DIR_MEAN) and
   a["usage"] == {"prompt_tokens": sum(map(len, ids16)), "total_tokens": sum(map(len, ids16))},
   "the answer's shape: %s" % json.dumps({k: v for k, v in a.items() if k != "data"})[:300])

# 4 clients at once, each the 16 texts in another order (odd ones base64)
CLIENTS = 2 if LIGHT else 4
results = [None] * CLIENTS
start = threading.Barrier(CLIENTS)


def client(i):
    order = [(j * (2 * i + 1) + i) % 16 for j in range(16)] if i % 4 else list(range(16))[::-1]
    start.wait()
    got = embed(PORT_MEAN, [TEXTS[j] for j in order], **({"encoding_format": "base64"} if i % 2 else {}))[0]
    results[i] = (order, got)


threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for i, (order, got) in enumerate(results):
    ok(same(got, [alone[j] for j in order]), "concurrent client %d: its vectors differ from each text alone" % i)

# A request of many inputs runs one input between two steps: a completion
# sent while it runs is answered before it (the whole request at once would
# hold every step up for all of its inputs)


def prompt_tokens():
    req = urllib.request.Request("http://127.0.0.1:%s/metrics" % PORT_MEAN, headers={"Authorization": "Bearer " + KEY})
    with urllib.request.urlopen(req, timeout=60) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("gpt_prompt_tokens_total "):
                return int(line.split()[1])


N_BIG = 12 if LIGHT else 24
big = [PARA * 2] * N_BIG
finished = []
before = prompt_tokens()
big_call = threading.Thread(target=lambda: finished.append(("embeddings",) + post(PORT_MEAN, "/v1/embeddings",
                                                                                  {"input": big})))
big_call.start()
for _ in range(3000):  # until the server has taken it
    if prompt_tokens() >= before + N_BIG * len(ids16[8]):
        break
    time.sleep(0.01)
st, a = post(PORT_MEAN, "/v1/completions", {"prompt": "Hello", "max_tokens": 4, "seed": 1})
finished.append(("completion", st, a))
big_call.join()
ok([f[0] for f in finished] == ["completion", "embeddings"] and all(f[1] == 200 for f in finished),
   "a completion sent during %d inputs' embeddings: the order of the answers %s, statuses %s"
   % (N_BIG, [f[0] for f in finished], [f[1] for f in finished]))

# ----------------------------------------------------------------------------
# Ollama's /api/embed: the same vectors; truncate

st, o = post(PORT_MEAN, "/api/embed", {"model": "x", "input": TEXTS[:3]})
ok(st == 200 and same([f32(e) for e in o["embeddings"]], alone[:3]) and
   o["prompt_eval_count"] == sum(map(len, ids16[:3])) and o["model"] == os.path.basename(DIR_MEAN),
   "/api/embed: %d %s" % (st, str(o)[:300]))
long_text = PARA * 16
st, o = post(PORT_MEAN, "/api/embed", {"input": long_text})
ok(st == 200 and same([f32(o["embeddings"][0])], embed(PORT_MEAN, [full])[0]),
   "/api/embed truncate (default true): not the first context's tokens' vector (%d)" % st)
st, o = post(PORT_MEAN, "/api/embed", {"input": long_text, "truncate": False})
ok(st == 400 and "context" in o.get("error", ""), "/api/embed truncate false: %d %s" % (st, o))

# ----------------------------------------------------------------------------
# the clients

if NODE_DIR:
    texts = [TEXTS[2], TEXTS[7], TEXTS[13]]  # no newline: LangChain replaces them with spaces
    want = [alone[2], alone[7], alone[13]]
    p = subprocess.run(["node", "tests/serve/embed_client.mjs", NODE_DIR, "http://127.0.0.1:" + PORT_MEAN, KEY,
                        json.dumps(texts)], capture_output=True, text=True, timeout=300)
    ok(p.returncode == 0, "the clients: exit %d: %s" % (p.returncode, p.stderr[-600:]))
    calls = {}
    for line in p.stdout.splitlines():
        c = json.loads(line)
        calls[c["call"]] = c
    n = sum(len(ids16[i]) for i in (2, 7, 13))

    def check(name, cond, got):
        c = calls.get(name)
        ok(c is not None and cond(c), "client %s: %s" % (name, json.dumps(c)[:400] if c else "no answer"))
        if c is not None:
            print("measured: client %s -> %s" % (name, got(c)))

    def vec_summary(vs):
        return "%d vectors of %s numbers, first %s" % (len(vs), sorted({len(v) for v in vs}), [round(x, 6) for x in vs[0][:3]])

    check("openai", lambda c: same([f32(e) for e in c["embeddings"]], want) and c["usage"] ==
          {"prompt_tokens": n, "total_tokens": n}, lambda c: vec_summary(c["embeddings"]) + ", usage %s" % c["usage"])
    check("openai float", lambda c: same([f32(e) for e in c["embeddings"]], want) and c["indexes"] == [0, 1, 2] and
          c["object"] == "list", lambda c: vec_summary(c["embeddings"]))
    check("openai base64", lambda c: same([np.frombuffer(base64.b64decode(b), dtype="<f4") for b in c["base64"]], want),
          lambda c: "%d strings of %s characters" % (len(c["base64"]), sorted({len(b) for b in c["base64"]})))
    check("openai dimensions", lambda c: c["status"] == 400 and c["param"] == "dimensions",
          lambda c: "%s %s param %s" % (c.get("error"), c.get("status"), c.get("param")))
    check("langchain query", lambda c: same([f32(c["embedding"])], want[:1]),
          lambda c: vec_summary([c["embedding"]]))
    check("langchain documents", lambda c: same([f32(e) for e in c["embeddings"]], want),
          lambda c: vec_summary(c["embeddings"]))
    check("ollama", lambda c: same([f32(e) for e in c["embeddings"]], want) and c["prompt_eval_count"] == n,
          lambda c: vec_summary(c["embeddings"]) + ", prompt_eval_count %d" % c["prompt_eval_count"])
    check("ollama one", lambda c: same([f32(e) for e in c["embeddings"]], want[:1]),
          lambda c: vec_summary(c["embeddings"]))

for what, e in sorted(worst.items()):
    print("measured: %s: the largest relative error against float64 %.3g (bound %g)" % (what, e, TOL))
print("RESULT %d %d" % (passed, failed))

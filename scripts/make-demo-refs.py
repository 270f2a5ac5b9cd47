#!/usr/bin/python3
"""Reference outputs of the demo model, for tests/test_demo.c.

    /usr/bin/python3 scripts/make-demo-refs.py            # after models/demo.bin changes

Reads models/demo.bin directly (docs/model-format.md: header, tensor table,
F32/F16/BF16 matrices in layout 0 or 1; Q8 is refused), widens every weight
exactly to float64, and runs GPT-2's forward pass in float64 with torch:
pre-LayerNorm blocks (eps from the header), tanh GELU, causal attention
scaled by 1/sqrt(head size), the output layer tied to wte. Token ids come
from gpt's own tokenizer (`gpt --tokenize`, identical to tiktoken), with the
tokenizer stored in the model file. Writes:

  tests/fixtures/demo_last_logits.f32
      for each prompt, in order: the logits of its last position, all
      vocab_size of them, computed in float64, stored as little-endian float32
  tests/fixtures/demo_refs.json
      the model file's sha256 and size; torch's version; per prompt: text,
      ids, top-10 ids and logits at the last position, the 40-token greedy
      continuation (argmax each step, the whole sequence fed again each step)
      and the top-2 logit margin (top1 - top2) at each of the 40 steps;
      held-out scoring: windows of exactly n_ctx tokens from
      tests/fixtures/heldout/ at the token offsets in WINDOWS, with the
      log-probability (log softmax in float64) of tokens 1..n_ctx-1 of each
      window given those before it in the window, and each window's sum.

Everything is computed from the model file: rerun after replacing it (any
size, F32/F16/BF16). Deterministic: float64, one thread, fixed inputs.
Needs Debian's python3-torch and python3-numpy.
"""
import argparse
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GREEDY_STEPS = 40
TOP_K = 10
EOT = 50256
LONG_PROMPT_TOKENS = 200  # at most n_ctx - GREEDY_STEPS

# The prompts, in the order of demo_last_logits.f32. None is the long prompt,
# cut from a held-out text (LONG_PROMPT_FROM).
PROMPTS = [
    ("king-james", "And God said, Let there be light: and there was light. And God saw the light, that it was good:"),
    ("melville", "Call me Ishmael. Some years ago\u2014never mind how long precisely\u2014having little or no money in my purse, and nothing particular to interest me on shore,"),
    ("state-of-the-union", "Mr. Speaker, Mr. Vice President, Members of Congress, and my fellow Americans: Tonight I report to you that the state of our Union is"),
    ("modern", "The new phone arrived yesterday, and honestly the battery lasts longer than I expected. I charged it once and"),
    ("question", "What is the capital of France?"),
    ("numbers-dates", "On July 4, 1776, the Congress adopted the Declaration; by 1790 the population was 3,929,214, and on 12/25/1800"),
    ("code", "def fibonacci(n):\n    if n < 2:\n        return n\n    return"),
    ("punctuation", "\"Well,\" said he, 'I\u2014I don't know...' (and then: silence!) ?!; -- [sic] \u201cquoted\u201d \u2018too\u2019:"),
    ("unicode", "\u00dcber den Wolken \u2014 \u6771\u4eac\u306f\u6674\u308c\u3001caf\u00e9 na\u00efve \u1f41 \u03bb\u03cc\u03b3\u03bf\u03c2 \u0645\u0631\u062d\u0628\u0627 \U0001f642"),
    ("single-token", "The"),
    ("empty", ""),
    ("newlines", "CHAPTER 1. Loomings.\n\n"),
    ("long-heldout", None),
]
LONG_PROMPT_FROM = ("moby-dick-134-135", 3000)  # (held-out file, token offset)

# Held-out windows: (file in tests/fixtures/heldout/ without .txt, token
# offset into that file's tokenization). Each window is the n_ctx tokens
# from the offset.
WINDOWS = [
    ("revelation", 0),
    ("revelation", 6000),
    ("moby-dick-134-135", 0),
    ("moby-dick-134-135", 5000),
    ("sotu-2021", 0),
    ("sotu-2021", 7000),
]


def fail(msg):
    sys.exit("make-demo-refs.py: " + msg)


# ---------------------------------------------------------------- model.bin

DTYPES = {0: "F32", 1: "F16", 2: "BF16", 3: "Q8"}
HEADER = struct.Struct("<8sIIIIIIIfIIII QQQQQQQQ Q".replace(" ", ""))


def read_model(path):
    """(config dict, {name: float64 tensor in Hugging Face's shape}, {name: dtype name})."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 128:
        fail(f"{path}: {len(data)} bytes, too short for a model.bin header")
    h = HEADER.unpack_from(data, 0)
    (magic, version, header_bytes, n_layer, n_head, n_embd, n_ctx, vocab, eps, n_tokens, n_merges,
     n_tensors, _res, _index_off, _str_off, _str_bytes, _merges_off, table_off, data_off, data_bytes,
     file_bytes, _res2) = h
    if magic != b"GPT2BIN\0":
        fail(f"{path}: not a model.bin (magic {magic!r})")
    if version not in (1, 2):
        fail(f"{path}: format version {version}, this script reads 1 and 2")
    if header_bytes != 128:
        fail(f"{path}: header_bytes {header_bytes}, want 128")
    if file_bytes != len(data):
        fail(f"{path}: {len(data)} bytes, the header says {file_bytes} (truncated?)")
    if n_tensors != 4 + 12 * n_layer:
        fail(f"{path}: {n_tensors} tensors for {n_layer} layers, want {4 + 12 * n_layer}")
    if n_embd % n_head:
        fail(f"{path}: n_embd {n_embd} is not a multiple of n_head {n_head}")
    cfg = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, n_ctx=n_ctx, vocab_size=vocab,
               layer_norm_epsilon=float(eps), version=version)
    tensors, dtypes = {}, {}
    for i in range(n_tensors):
        e = table_off + 128 * i
        name = data[e:e + 64].split(b"\0", 1)[0].decode()
        dtype, ndim = struct.unpack_from("<II", data, e + 64)
        dims = struct.unpack_from("<4Q", data, e + 72)[:ndim]
        offset, nbytes = struct.unpack_from("<QQ", data, e + 104)
        layout = struct.unpack_from("<I", data, e + 120)[0] if version >= 2 else 0
        if dtype not in DTYPES:
            fail(f"{path}: tensor {name}: unknown dtype {dtype}")
        if DTYPES[dtype] == "Q8":
            fail(f"{path}: tensor {name} is Q8; the reference needs the weights exactly "
                 "(convert the model to F32, F16 or BF16)")
        numel = math.prod(dims)
        size = 4 if dtype == 0 else 2
        if nbytes != numel * size:
            fail(f"{path}: tensor {name}: {nbytes} bytes for {dims} in {DTYPES[dtype]}")
        start = data_off + offset
        if start + nbytes > len(data):
            fail(f"{path}: tensor {name} runs past the end of the file")
        raw = np.frombuffer(data, dtype="<u2" if size == 2 else "<f4", count=numel, offset=start)
        if dtype == 0:
            a = raw.astype(np.float64)
        elif dtype == 1:
            a = raw.view("<f2").astype(np.float64)
        else:  # BF16: the top half of a float32
            a = (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        if layout == 1:  # a Conv1D matrix stored (out, in); dims are HF's (in, out)
            if ndim != 2:
                fail(f"{path}: tensor {name}: layout 1 on a {ndim}-d tensor")
            a = a.reshape(dims[1], dims[0]).T
        elif layout != 0:
            fail(f"{path}: tensor {name}: unknown layout {layout}")
        else:
            a = a.reshape(dims)
        tensors[name] = torch.from_numpy(np.ascontiguousarray(a))
        dtypes[name] = DTYPES[dtype]
    C = n_embd
    want = {"wte.weight": (vocab, C), "wpe.weight": (n_ctx, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for l in range(n_layer):
        p = f"h.{l}."
        want.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,), p + "attn.c_attn.weight": (C, 3 * C),
                     p + "attn.c_attn.bias": (3 * C,), p + "attn.c_proj.weight": (C, C),
                     p + "attn.c_proj.bias": (C,), p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                     p + "mlp.c_fc.weight": (C, 4 * C), p + "mlp.c_fc.bias": (4 * C,),
                     p + "mlp.c_proj.weight": (4 * C, C), p + "mlp.c_proj.bias": (C,)})
    for name, shape in want.items():
        if name not in tensors:
            fail(f"{path}: no tensor {name}")
        if tuple(tensors[name].shape) != shape:
            fail(f"{path}: tensor {name} has shape {tuple(tensors[name].shape)}, want {shape}")
    return cfg, tensors, dtypes


# ---------------------------------------------------------------- the model in float64

class GPT2:
    def __init__(self, cfg, w):
        self.cfg, self.w = cfg, w
        self.L, self.NH, self.C = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
        self.HS = self.C // self.NH
        self.eps = cfg["layer_norm_epsilon"]

    def ln(self, x, name):
        return torch.nn.functional.layer_norm(x, (self.C,), self.w[name + ".weight"], self.w[name + ".bias"],
                                              self.eps)

    def logits(self, ids, last_only=False):
        """ids: list of T ints -> logits (T, V), or (V) for the last position alone."""
        w, C, NH, HS = self.w, self.C, self.NH, self.HS
        T = len(ids)
        assert 1 <= T <= self.cfg["n_ctx"]
        x = w["wte.weight"][torch.tensor(ids)] + w["wpe.weight"][:T]          # (T, C)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for l in range(self.L):
            p = f"h.{l}."
            h = self.ln(x, p + "ln_1")
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]  # (T, 3C)
            q, k, v = (t.reshape(T, NH, HS).transpose(0, 1) for t in qkv.split(C, dim=1))  # (NH, T, HS)
            att = (q @ k.transpose(1, 2)) / math.sqrt(HS)                      # (NH, T, T)
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(0, 1).reshape(T, C)                        # (T, C)
            x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h = self.ln(x, p + "ln_2")
            f = h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"]          # (T, 4C)
            f = 0.5 * f * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (f + 0.044715 * f ** 3)))
            x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        x = self.ln(x[-1:] if last_only else x, "ln_f")
        out = x @ w["wte.weight"].T                                            # (T, V)
        return out[0] if last_only else out


# ---------------------------------------------------------------- the tokenizer: gpt itself

def gpt_binary():
    for p in ("gpt", "build/gpt"):
        if os.access(os.path.join(ROOT, p), os.X_OK):
            return os.path.join(ROOT, p)
    print("make-demo-refs.py: building ./gpt", file=sys.stderr)
    subprocess.run(["nice", "make", "-j2"], cwd=ROOT, check=True)
    return os.path.join(ROOT, "gpt")


class Tok:
    def __init__(self, gpt, model):
        self.gpt, self.model = gpt, model

    def _run(self, flag, data):
        r = subprocess.run([self.gpt, "-m", self.model, flag], input=data, capture_output=True)
        if r.returncode != 0:
            fail(f"gpt {flag} failed: {r.stderr.decode(errors='replace').strip()}")
        return r.stdout

    def encode(self, text):
        return [int(t) for t in self._run("--tokenize", text.encode()).split()]

    def decode(self, ids):
        """The bytes of ids."""
        return self._run("--detokenize", " ".join(map(str, ids)).encode())


# ---------------------------------------------------------------- output

def dump_json(obj):
    """Top level one key a line, lists of objects one object a line; floats exact (repr)."""
    lines = []
    for k, v in obj.items():
        if isinstance(v, list) and v and isinstance(v[0], dict):
            items = ",\n".join("  " + json.dumps(x, ensure_ascii=False) for x in v)
            lines.append(f" {json.dumps(k)}: [\n{items}\n ]")
        else:
            lines.append(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/demo.bin")
    ap.add_argument("--out-dir", default="tests/fixtures")
    args = ap.parse_args()
    os.chdir(ROOT)
    t0 = time.time()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    with open(args.model, "rb") as f:
        blob = f.read()
    sha, size = hashlib.sha256(blob).hexdigest(), len(blob)
    del blob
    cfg, weights, dtypes = read_model(args.model)
    model = GPT2(cfg, weights)
    V, n_ctx = cfg["vocab_size"], cfg["n_ctx"]
    if n_ctx < GREEDY_STEPS + 8:
        fail(f"context {n_ctx} too short for {GREEDY_STEPS} greedy steps")
    tok = Tok(gpt_binary(), args.model)

    heldout_ids = {}

    def heldout(name):
        if name not in heldout_ids:
            with open(os.path.join("tests/fixtures/heldout", name + ".txt"), encoding="utf-8") as f:
                heldout_ids[name] = tok.encode(f.read())
        return heldout_ids[name]

    def text_of(ids):
        """The text of ids, or None where the bytes are not whole UTF-8."""
        try:
            return tok.decode(ids).decode("utf-8")
        except UnicodeDecodeError:
            return None

    # ---- prompts: last logits, top-10, greedy
    prompts, all_last = [], []
    for name, text in PROMPTS:
        src = None
        if text is None:  # the long prompt: LONG_PROMPT_TOKENS of a held-out text, as text
            fname, off = LONG_PROMPT_FROM
            n_long = min(LONG_PROMPT_TOKENS, n_ctx - GREEDY_STEPS - 8)
            ids_src = heldout(fname)
            while text is None:  # move on until the cut falls between whole characters
                text = text_of(ids_src[off:off + n_long])
                off += 1 if text is None else 0
            src = {"file": f"tests/fixtures/heldout/{fname}.txt", "token_offset": off, "tokens": n_long}
        ids = tok.encode(text) if text else [EOT]
        if name == "single-token" and len(ids) != 1:
            fail(f"prompt {name!r} is {len(ids)} tokens")
        if len(ids) + GREEDY_STEPS > n_ctx:
            fail(f"prompt {name!r}: {len(ids)} tokens + {GREEDY_STEPS} do not fit the context {n_ctx}")
        with torch.no_grad():
            last = model.logits(ids, last_only=True)
            all_last.append(last.numpy().astype("<f4"))
            top = torch.topk(last, TOP_K)
            seq, greedy, margins = list(ids), [], []
            logits = last
            for step in range(GREEDY_STEPS):
                t2 = torch.topk(logits, 2)
                greedy.append(int(t2.indices[0]))
                margins.append(float(t2.values[0] - t2.values[1]))
                seq.append(greedy[-1])
                if step + 1 < GREEDY_STEPS:
                    logits = model.logits(seq, last_only=True)
        p = {"name": name, "text": text, "ids": ids, "last_logits_offset": len(prompts),
             "last_top10_ids": [int(i) for i in top.indices], "last_top10_logits": [float(v) for v in top.values],
             "greedy_ids": greedy, "greedy_margins": margins}
        if src:
            p["source"] = src
        prompts.append(p)

    # ---- held-out windows of n_ctx tokens
    windows = []
    for fname, off in WINDOWS:
        ids_all = heldout(fname)
        if off + n_ctx > len(ids_all):
            fail(f"{fname}: {len(ids_all)} tokens, no window of {n_ctx} at {off}")
        ids = ids_all[off:off + n_ctx]
        with torch.no_grad():
            lsm = torch.log_softmax(model.logits(ids), dim=-1)                 # (n_ctx, V)
            lp = lsm[torch.arange(n_ctx - 1), torch.tensor(ids[1:])]            # (n_ctx - 1)
        text = text_of(ids)
        windows.append({"file": f"tests/fixtures/heldout/{fname}.txt", "token_offset": off, "ids": ids,
                        "text": text, "text_roundtrips": text is not None and tok.encode(text) == ids,
                        "logprobs": [float(v) for v in lp], "sum": float(lp.sum())})

    refs = {
        "generator": "scripts/make-demo-refs.py",
        "model_file": args.model,
        "model_sha256": sha,
        "model_bytes": size,
        "config": cfg,
        "matrix_dtypes": sorted({dtypes[n] for n in dtypes if n.endswith("weight") and weights[n].dim() == 2
                                 and n != "wpe.weight"}),
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "reference_dtype": "float64",
        "last_logits_file": os.path.join(args.out_dir, "demo_last_logits.f32"),
        "last_logits_format": "per prompt in order, vocab_size little-endian float32 (float64 rounded)",
        "greedy_steps": GREEDY_STEPS,
        "window_tokens": n_ctx,
        "prompts": prompts,
        "heldout_windows": windows,
    }
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "demo_last_logits.f32"), "wb") as f:
        for a in all_last:
            f.write(a.tobytes())
    with open(os.path.join(args.out_dir, "demo_refs.json"), "w", encoding="utf-8") as f:
        f.write(dump_json(refs))
    nll = -sum(w["sum"] for w in windows) / sum(len(w["logprobs"]) for w in windows)
    print(f"make-demo-refs.py: {args.model} ({size} B, sha256 {sha[:12]}, {'/'.join(refs['matrix_dtypes'])}): "
          f"{len(prompts)} prompts, {len(windows)} held-out windows of {n_ctx} "
          f"({sum(w['text_roundtrips'] for w in windows)} round-trip as text), held-out loss {nll:.4f} nats/token, "
          f"{time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()

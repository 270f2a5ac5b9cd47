#!/usr/bin/env python3
"""Development aid (not part of `make test`): check gpt at long context.

The reference data in tests/fixtures covers prompts of up to ~20 tokens. This
script scores the first N tokens of a text with `gpt --score --json` and with
a plain float64 NumPy GPT-2 forward pass written here from the paper's
equations, and prints the largest per-token log-prob difference. At N = 1024
on the 124M-shaped test checkpoint it is about 1e-5.

    python3 scripts/check-long-context.py build/ckpt/gpt2-124M-shaped 1024 [TEXT_FILE]

Needs python3-numpy. Reads model.safetensors (F32) and config.json from DIR.
"""
import json
import struct
import subprocess
import sys

import numpy as np

GPT = "./gpt"


def load(d):
    cfg = json.load(open(d + "/config.json"))
    raw = open(d + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    weights = {}
    for key, v in header.items():
        if key == "__metadata__":
            continue
        b, e = v["data_offsets"]
        arr = np.frombuffer(raw[base + b:base + e], dtype="<f4").reshape(v["shape"])
        weights[key.removeprefix("transformer.")] = arr.astype(np.float64)
    return cfg, weights


def layernorm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def logprobs(cfg, W, ids):
    L, H, C = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    hs, n = C // H, len(ids)
    x = W["wte.weight"][ids] + W["wpe.weight"][:n]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for layer in range(L):
        p = f"h.{layer}."
        h = layernorm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        q, k, v = np.split(h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"], 3, axis=-1)
        out = np.zeros((n, C))
        for head in range(H):
            s = slice(head * hs, (head + 1) * hs)
            a = q[:, s] @ k[:, s].T / np.sqrt(hs) + mask
            a = np.exp(a - a.max(-1, keepdims=True))
            out[:, s] = (a / a.sum(-1, keepdims=True)) @ v[:, s]
        x = x + out @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        h = layernorm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        f = h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"]
        f = 0.5 * f * (1 + np.tanh(np.sqrt(2 / np.pi) * (f + 0.044715 * f ** 3)))
        x = x + f @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
    x = layernorm(x, W["ln_f.weight"], W["ln_f.bias"], eps)
    logits = x @ W["wte.weight"].T
    top = logits.max(-1)
    lse = np.log(np.exp(logits - top[:, None]).sum(-1)) + top
    return logits[np.arange(n - 1), ids[1:]] - lse[:-1]


def main():
    d, n = sys.argv[1], int(sys.argv[2])
    text_file = sys.argv[3] if len(sys.argv) > 3 else "README.md"
    text = open(text_file, "rb").read() * 8
    ids = [int(t) for t in subprocess.run([GPT, "--tokenize"], input=text, capture_output=True,
                                          check=True).stdout.split()][:n]
    prefix = subprocess.run([GPT, "--detokenize"], input=" ".join(map(str, ids)).encode(),
                            capture_output=True, check=True).stdout
    run = subprocess.run([GPT, "-m", d, "--score", "--json"], input=prefix, capture_output=True, check=True)
    got = json.loads(run.stdout)
    if got["tokens"] != ids:
        sys.exit("the prefix does not re-tokenize to the same ids; try another N")
    cfg, W = load(d)
    want = logprobs(cfg, W, np.array(ids))
    diff = np.abs(np.array(got["logprobs"]) - want)
    print(f"{n} tokens: max |log-prob difference| {diff.max():.3g} at token {diff.argmax() + 1}, "
          f"sum difference {np.sum(got['logprobs']) - want.sum():.3g}")


if __name__ == "__main__":
    main()

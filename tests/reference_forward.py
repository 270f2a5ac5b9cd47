#!/usr/bin/python3
"""A float64 forward pass of transformers' GPT2LMHeadModel, in numpy.

    /usr/bin/python3 tests/reference_forward.py MODEL_DIR --ids 15496,995,11 [--greedy N]
                     [--hidden] [--set KEY=JSON]...

Reads a Hugging Face GPT-2 directory (config.json, model.safetensors) and
prints one JSON object: for token ids x0..x(T-1), "logprobs"[i] is
log p(x(i+1) | x0..xi), the log-softmax in float64 of position i's logits
(T-1 numbers); "max_logprobs"[i] and "margins"[i] are the largest
log-probability at position i and its lead over the second (for telling a
near tie from a wrong token); "greedy" is the argmax continuation of N
tokens (the whole sequence computed again each step) with "greedy_margins".
--hidden adds the hidden states: "hidden", ln_f's output (T rows of C),
transformers' GPT2Model last_hidden_state, and "residual", the residual
stream before block 0 and after each block (L + 1 of T rows).
--set KEY=JSON replaces a config.json entry (a "what if" for the tests).
tests/cli_configs.sh imports it as a module (load, forward, score, greedy).

Written from transformers' modeling_gpt2.py (GPT2Model, GPT2Attention,
GPT2MLP, GPT2LMHeadModel) and activations.py (ACT2FN), config defaults from
GPT2Config:
  - x = wte[ids] + wpe[positions]; per block (pre-LayerNorm)
      x = x + attn(ln_1(x));  x = x + mlp(ln_2(x));  then ln_f(x);
    LayerNorm with the biased variance and eps = layer_norm_epsilon (1e-5).
  - Conv1D weights stored (in, out): y = x @ W + b. c_attn gives q, k, v
    (in that order, n_embd each), split into n_head heads of n_embd/n_head.
  - attention scores q @ k^T, divided by sqrt(head size) when
    scale_attn_weights (default true) and also by (layer index + 1) when
    scale_attn_by_inverse_layer_idx (default false); positions j > i masked
    before the softmax. reorder_and_upcast_attn (default false) computes
    the same product in another order and in float32 under torch
    autocast: the same function in exact arithmetic, so here the same.
  - MLP: c_fc (n_embd, n_inner; n_inner null = 4 * n_embd), the activation
    activation_function (default gelu_new) by ACT2FN's formula, c_proj back.
  - logits = ln_f(x) @ W^T with W = lm_head.weight (V, n_embd) when
    tie_word_embeddings is false, else wte (the default: tied).
Tensor names may carry the "transformer." prefix; the attention mask
buffers (h.N.attn.bias, h.N.attn.masked_bias) are ignored. Weights are read
as F32, F16 or BF16 (and F64) and widened exactly to float64.
No torch, no transformers: numpy and the standard library only.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# ---------------------------------------------------------------------------
# safetensors: 8-byte little-endian header length, a JSON header, the data


def read_safetensors(path):
    """{name: float64 array} of every tensor in the file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = data[base + b:base + end]
        dt = e["dtype"]
        if dt == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif dt == "F16":
            a = np.frombuffer(raw, dtype="<f2")
        elif dt == "BF16":
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view("<f4")
        elif dt == "F64":
            a = np.frombuffer(raw, dtype="<f8")
        else:
            raise ValueError("%s: tensor %s has dtype %s, not F32/F16/BF16/F64" % (path, name, dt))
        out[name] = a.astype(np.float64).reshape(e["shape"])
    return out


# ---------------------------------------------------------------------------
# ACT2FN (transformers/activations.py), each by its own formula

_erf = np.frompyfunc(math.erf, 1, 1)


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # = 1 / (1 + exp(-x)), without overflow


ACT2FN = {
    # NewGELUActivation
    "gelu_new": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    # PytorchGELUTanh: F.gelu(x, approximate="tanh"), the same formula
    "gelu_pytorch_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3))),
    # FastGELUActivation: its own rounded constant
    "gelu_fast": lambda x: 0.5 * x * (1.0 + np.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x))),
    # GELUActivation: nn.functional.gelu, the exact erf form
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64)),
    # QuickGELUActivation
    "quick_gelu": lambda x: x * _sigmoid(1.702 * x),
    "relu": lambda x: np.maximum(x, 0.0),
    # nn.SiLU under both names
    "silu": lambda x: x * _sigmoid(x),
    "swish": lambda x: x * _sigmoid(x),
    "tanh": np.tanh,
}

# GPT2Config's defaults for the keys the forward pass reads
DEFAULTS = {
    "activation_function": "gelu_new",
    "layer_norm_epsilon": 1e-5,
    "n_inner": None,
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
    "tie_word_embeddings": True,
}


class Model:
    pass


def load(model_dir, overrides=None):
    """The model in a Hugging Face directory; overrides replace config entries."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = dict(DEFAULTS)
        cfg.update(json.load(f))
    cfg.update(overrides or {})
    if cfg.get("model_type", "gpt2") != "gpt2":
        raise ValueError("model_type %s is not gpt2" % cfg["model_type"])
    if cfg.get("add_cross_attention"):
        raise ValueError("add_cross_attention: a decoder with cross-attention has no GPT2LMHeadModel forward here")
    act = cfg["activation_function"]
    if act not in ACT2FN:
        raise ValueError("activation_function %s is not in this reference's ACT2FN" % act)
    raw = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    w = {}
    for k, v in raw.items():
        if k.startswith("transformer."):
            k = k[len("transformer."):]
        if k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue  # the causal mask buffers of old checkpoints
        w[k] = v
    m = Model()
    m.cfg = cfg
    m.L, m.NH, m.C = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
    m.HS = m.C // m.NH
    m.F = cfg["n_inner"] if cfg["n_inner"] is not None else 4 * m.C
    m.V = cfg["vocab_size"]
    m.n_positions = cfg.get("n_positions", cfg.get("n_ctx"))
    m.eps = float(cfg["layer_norm_epsilon"])
    m.act = ACT2FN[act]
    m.w = w
    m.out = w["lm_head.weight"] if not cfg["tie_word_embeddings"] else w["wte.weight"]
    expect = {"wte.weight": (m.V, m.C), "wpe.weight": (m.n_positions, m.C)}
    for l in range(m.L):
        expect["h.%d.attn.c_attn.weight" % l] = (m.C, 3 * m.C)
        expect["h.%d.mlp.c_fc.weight" % l] = (m.C, m.F)
        expect["h.%d.mlp.c_proj.weight" % l] = (m.F, m.C)
    for k, shape in expect.items():
        if w[k].shape != shape:
            raise ValueError("%s: %s has shape %s, the config implies %s" % (model_dir, k, w[k].shape, shape))
    if m.out.shape != (m.V, m.C):
        raise ValueError("%s: the output layer has shape %s, not %s" % (model_dir, m.out.shape, (m.V, m.C)))
    return m


def layernorm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)  # biased, as torch's LayerNorm
    return (x - mu) / np.sqrt(var + eps) * g + b


def hidden(m, ids, residual=None):
    """ln_f's output (T, C) for token ids: GPT2Model's last_hidden_state.
    A list residual gets the residual stream (T, C) before block 0 and after
    each block (TransformerLens' blocks.l.hook_resid_pre is residual[l],
    blocks.l.hook_resid_post residual[l + 1])."""
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    if T > m.n_positions:
        raise ValueError("%d tokens, more than n_positions %d" % (T, m.n_positions))
    w, C, NH, HS = m.w, m.C, m.NH, m.HS
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    future = np.triu(np.ones((T, T), dtype=bool), 1)  # j > i
    if residual is not None:
        residual.append(x)
    for l in range(m.L):
        p = "h.%d." % l
        h = layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], m.eps)
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (qkv[:, i * C:(i + 1) * C].reshape(T, NH, HS).transpose(1, 0, 2) for i in range(3))
        att = q @ k.transpose(0, 2, 1)  # (NH, T, T)
        if m.cfg["scale_attn_weights"]:
            att = att / math.sqrt(HS)  # value.size(-1) ** 0.5
        if m.cfg["scale_attn_by_inverse_layer_idx"]:
            att = att / float(l + 1)
        att = np.where(future, -np.inf, att)
        att = np.exp(att - att.max(-1, keepdims=True))
        att = att / att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(T, C)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        h = layernorm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], m.eps)
        h = m.act(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        if residual is not None:
            residual.append(x)
    return layernorm(x, w["ln_f.weight"], w["ln_f.bias"], m.eps)


def log_softmax(logits):
    z = logits - logits.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def top2(lp):
    """(argmax, max, max - second) of each row."""
    i = np.argpartition(-lp, 1, axis=-1)[..., :2]
    a, b = np.take_along_axis(lp, i, -1).T
    first = np.where(a >= b, i[:, 0], i[:, 1])
    return first, np.maximum(a, b), np.abs(a - b)


def score(m, ids):
    """Per position i < T-1: log p(ids[i+1] | ids[..i]), the max log-prob, its margin."""
    if len(ids) < 2:
        return {"logprobs": [], "max_logprobs": [], "margins": []}
    lp = log_softmax(hidden(m, ids[:-1]) @ m.out.T)
    got = lp[np.arange(len(ids) - 1), np.asarray(ids[1:])]
    _, mx, margin = top2(lp)
    return {"logprobs": got.tolist(), "max_logprobs": mx.tolist(), "margins": margin.tolist()}


def greedy(m, ids, n):
    """The argmax continuation of n tokens, and the top-2 margin of each step."""
    ids = list(ids)
    out, margins = [], []
    for _ in range(n):
        lp = log_softmax(hidden(m, ids)[-1:] @ m.out.T)
        t, _, margin = top2(lp)
        out.append(int(t[0]))
        margins.append(float(margin[0]))
        ids.append(int(t[0]))
    return {"greedy": out, "greedy_margins": margins}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, help="token ids, comma-separated")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="also the argmax continuation of N tokens")
    ap.add_argument("--hidden", action="store_true",
                    help="also the hidden states: \"hidden\" (T, C), ln_f's output, and \"residual\" (L + 1, T, C)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="replace a config entry")
    a = ap.parse_args()
    overrides = {}
    for s in a.set:
        k, _, v = s.partition("=")
        overrides[k] = json.loads(v)
    ids = [int(t) for t in a.ids.replace(" ", "").split(",") if t]
    m = load(a.model_dir, overrides)
    r = {"ids": ids}
    r.update(score(m, ids))
    if a.greedy:
        r.update(greedy(m, ids, a.greedy))
    if a.hidden:
        res = []
        r["hidden"] = hidden(m, ids, res).tolist()
        r["residual"] = [x.tolist() for x in res]
    json.dump(r, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

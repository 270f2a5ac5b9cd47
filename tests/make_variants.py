#!/usr/bin/python3
"""Writes small deterministic GPT-2 checkpoints, one per GPT2Config variant.

    /usr/bin/python3 tests/make_variants.py OUT_DIR [--tokenizer DIR] [--only NAME,...]

OUT_DIR/NAME/ holds config.json, model.safetensors, vocab.json and merges.txt
in Hugging Face's layout, and OUT_DIR/manifest.json lists the variants
(manifest.txt: one line each, "NAME EXPECT FIELD DRAFT,DRAFT LONG"):
  {"name", "expect": "ok" | "refuse", "field" (a refusal's config key),
   "drafts" (variants that share its tokenizer, for --draft: itself, and for
   some another model, whose guesses the model then mostly rejects),
   "contrast" ({config key: value} that must change its outputs: the
   check that the variant's flag matters on these weights), "long" (a
   prompt longer than 128 tokens is in range)}.

The tokenizer is GPT-2's (the files the test checkpoints copy, models/ by
default), except codeparrot_like, whose 32768-token byte-level BPE is
GPT-2's first 32767 tokens (the 256 bytes and the first 32511 merges, each
merge's result being token 256 + its rank) and <|endoftext|> as 32767.

The weights: numpy's PCG64 seeded from the variant's name, normal with
scales chosen so that each flag moves the log-probabilities by far more
than the tests' 1e-4 (attention scores of a few units, MLP inputs that
reach the activations' curved parts, logits spread over several nats);
layer norms' gains 1 + N(0, 0.1). Tiny shapes: n_embd 64, 4 heads, 3
layers, n_positions 128, unless the variant says otherwise.
Deterministic: the same files on every run.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# the standard deviation of each kind of tensor
SCALE = {
    "wte": 0.25, "wpe": 0.25, "lm_head": 0.25,
    "c_attn": 0.18, "c_attn_b": 0.1, "attn_proj": 0.08, "attn_proj_b": 0.05,
    "c_fc": 0.3, "c_fc_b": 0.3, "mlp_proj": 0.06, "mlp_proj_b": 0.05,
    "ln_w": 0.1, "ln_b": 0.1,
}

# GPT2Config().to_dict() of transformers, the keys a saved config carries
FULL_CONFIG = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 128, "n_embd": 64, "n_head": 4,
    "n_inner": None, "n_layer": 3, "n_positions": 128, "reorder_and_upcast_attn": False,
    "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
    "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
    "summary_type": "cls_index", "summary_use_proj": True, "torch_dtype": "float32",
    "transformers_version": "4.40.0", "use_cache": True, "vocab_size": 50257,
}
# the short config of the repository's own test checkpoints
SHORT_CONFIG = {
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "layer_norm_epsilon": 1e-05,
    "n_ctx": 128, "n_positions": 128, "n_embd": 64, "n_head": 4, "n_layer": 3, "vocab_size": 50257,
    "bos_token_id": 50256, "eos_token_id": 50256,
}

ACTS = ["gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu", "relu", "silu", "swish"]
# the tanh-approximation family is one function (gelu_fast's constant is
# sqrt(2/pi) rounded to 1e-10): no contrast between its members
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh", "gelu_fast")

# erf's gelu and the tanh approximation differ by at most 5e-4, at inputs
# near -3, where gelu itself is about -0.004: the erf variants' MLP inputs
# sit there (c_fc's bias -3 on average) and c_proj is large enough that
# this 10% difference moves the log-probabilities by far more than 1e-4
ERF_TAIL = {"c_fc_shift": -3.0, "scale": {"c_fc": 0.1, "mlp_proj": 3.0}}


def variants():
    """(name, config changes, options, manifest entries) of every variant."""
    v = [("default", {}, {"full": True}, {"drafts": ["default", "distilgpt2_like"]}),
         ("scale_attn_weights_false", {"scale_attn_weights": False}, {},
          {"contrast": {"scale_attn_weights": True}, "drafts": ["scale_attn_weights_false", "default"]}),
         ("inverse_layer_idx", {"scale_attn_by_inverse_layer_idx": True}, {},
          {"contrast": {"scale_attn_by_inverse_layer_idx": False}, "drafts": ["inverse_layer_idx", "default"]}),
         ("both_scale_flags", {"scale_attn_weights": False, "scale_attn_by_inverse_layer_idx": True}, {},
          {"contrast": {"scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False},
           "drafts": ["both_scale_flags", "default"]}),
         ("untied", {"tie_word_embeddings": False}, {"lm_head": True},
          {"contrast": {"tie_word_embeddings": True}, "drafts": ["untied", "default"]})]
    for a in ACTS:
        extra = {"contrast": {"activation_function": "gelu_new"}} if a not in TANH_GELUS else {}
        v.append(("act_" + a, {"activation_function": a}, ERF_TAIL if a == "gelu" else {}, extra))
    v += [("n_inner_200", {"n_inner": 200}, {}, {"drafts": ["n_inner_200", "act_relu"]}),
          ("n_inner_100", {"n_inner": 100}, {}, {}),
          ("reorder_and_upcast_attn", {"reorder_and_upcast_attn": True}, {"full": True}, {}),
          ("layer_norm_eps_1e-3", {"layer_norm_epsilon": 1e-3}, {}, {"contrast": {"layer_norm_epsilon": 1e-5}}),
          # codeparrot/codeparrot-small: its own 32768-token BPE, both attention flags
          ("codeparrot_like", {"vocab_size": 32768, "bos_token_id": 32767, "eos_token_id": 32767,
                               "n_positions": 1024, "n_ctx": 1024, "scale_attn_by_inverse_layer_idx": True,
                               "reorder_and_upcast_attn": True},
           {"full": True, "prefix": "transformer.", "vocab": 32768},
           {"drafts": ["codeparrot_like"], "contrast": {"scale_attn_by_inverse_layer_idx": False}}),
          # cerebras/Cerebras-GPT-111M: erf gelu, 2048 positions, n_inner written out, stored F16
          ("cerebras_like", {"activation_function": "gelu", "n_positions": 2048, "n_ctx": 2048, "n_inner": 256,
                             "torch_dtype": "float16"}, dict(ERF_TAIL, full=True, dtype="F16"),
           {"long": True, "contrast": {"activation_function": "gelu_new"}}),
          # distilgpt2: 6 layers, and the extra keys its config carries
          ("distilgpt2_like", {"n_layer": 6, "_num_labels": 1, "id2label": {"0": "LABEL_0"},
                               "label2id": {"LABEL_0": 0}, "task_specific_params": {
                                   "text-generation": {"do_sample": True, "max_length": 50}}},
           {"full": True}, {}),
          # microsoft/DialoGPT-medium: GPT-2 medium's 24 layers and 16 heads (here of 4
          # dimensions each: the attention's head size off the vector kernels' 16s),
          # and its conversational parameters
          ("dialogpt_like", {"n_layer": 24, "n_head": 16, "task_specific_params": {
                                 "conversational": {"max_length": 1000}}},
           {"full": True}, {}),
          # a fine-tune saved with its own output layer, in bfloat16
          ("untied_finetune", {"tie_word_embeddings": False, "torch_dtype": "bfloat16",
                               "architectures": ["GPT2LMHeadModel"]},
           {"full": True, "prefix": "transformer.", "lm_head": True, "dtype": "BF16"},
           {"contrast": {"tie_word_embeddings": True}}),
          # what gpt must refuse, naming the field
          ("refuse_cross_attention", {"add_cross_attention": True}, {"cross": True},
           {"expect": "refuse", "field": "add_cross_attention"}),
          ("refuse_gpt_neo", {"model_type": "gpt_neo"}, {}, {"expect": "refuse", "field": "model_type"}),
          ("refuse_tanh", {"activation_function": "tanh"}, {}, {"expect": "refuse", "field": "activation_function"})]
    return v


# ---------------------------------------------------------------------------
# writing


def to_bytes(a, dtype):
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    # BF16, rounded to nearest-even (no NaN here)
    u = a.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2").tobytes()


def write_safetensors(path, tensors, dtype):
    """tensors: [(name, float array)]; matrices in dtype, vectors too (as HF saves them)."""
    header, blobs, off = {}, [], 0
    for name, a in tensors:
        b = to_bytes(a, dtype)
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def weights(name, cfg, opt):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    C, L, V = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"]
    F = cfg.get("n_inner") or 4 * C
    P = cfg["n_positions"]

    scale = dict(SCALE)
    scale.update(opt.get("scale", {}))
    shift = opt.get("c_fc_shift", 0.0)

    def n(shape, kind):
        a = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale[kind])
        return a + np.float32(shift) if kind == "c_fc_b" else a

    def ln(p):
        return [(p + ".weight", 1.0 + n((C,), "ln_w")), (p + ".bias", n((C,), "ln_b"))]

    t = [("wte.weight", n((V, C), "wte")), ("wpe.weight", n((P, C), "wpe"))]
    for l in range(L):
        p = "h.%d." % l
        t += ln(p + "ln_1")
        t += [(p + "attn.c_attn.weight", n((C, 3 * C), "c_attn")), (p + "attn.c_attn.bias", n((3 * C,), "c_attn_b")),
              (p + "attn.c_proj.weight", n((C, C), "attn_proj")), (p + "attn.c_proj.bias", n((C,), "attn_proj_b"))]
        if opt.get("cross"):
            t += ln(p + "ln_cross_attn")
            t += [(p + "crossattention.c_attn.weight", n((C, 2 * C), "c_attn")),
                  (p + "crossattention.c_attn.bias", n((2 * C,), "c_attn_b")),
                  (p + "crossattention.q_attn.weight", n((C, C), "c_attn")),
                  (p + "crossattention.q_attn.bias", n((C,), "c_attn_b")),
                  (p + "crossattention.c_proj.weight", n((C, C), "attn_proj")),
                  (p + "crossattention.c_proj.bias", n((C,), "attn_proj_b"))]
        t += ln(p + "ln_2")
        t += [(p + "mlp.c_fc.weight", n((C, F), "c_fc")), (p + "mlp.c_fc.bias", n((F,), "c_fc_b")),
              (p + "mlp.c_proj.weight", n((F, C), "mlp_proj")), (p + "mlp.c_proj.bias", n((C,), "mlp_proj_b"))]
    t += ln("ln_f")
    pre = opt.get("prefix", "")
    t = [(pre + k, a) for k, a in t]
    if opt.get("lm_head"):
        t.append(("lm_head.weight", n((V, C), "lm_head")))  # never prefixed in GPT2LMHeadModel
    return t


def copy(src, dst):
    if os.path.exists(dst):
        os.remove(dst)
    shutil.copyfile(src, dst)


def write_small_tokenizer(src, out, vocab_size):
    """GPT-2's first vocab_size - 1 tokens and <|endoftext|> last (see the header)."""
    with open(os.path.join(src, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(src, "merges.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    keep = {s: i for s, i in vocab.items() if i < vocab_size - 1}
    keep["<|endoftext|>"] = vocab_size - 1
    merges = []
    for rank, line in enumerate(l for l in lines[1:] if l):
        a, b = line.split(" ")
        if keep.get(a + b) == 256 + rank:
            merges.append(line)
    assert len(merges) == vocab_size - 1 - 256, "GPT-2's merges are not in its vocabulary's order"
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(keep, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write(lines[0] + "\n" + "\n".join(merges) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(HERE), "models"),
                    help="directory with GPT-2's vocab.json and merges.txt (default: models/)")
    ap.add_argument("--only", default="", help="comma-separated variant names")
    a = ap.parse_args()
    only = set(x for x in a.only.split(",") if x)
    os.makedirs(a.out_dir, exist_ok=True)
    manifest, small_tok = [], None
    for name, changes, opt, extra in variants():
        if only and name not in only:
            continue
        d = os.path.join(a.out_dir, name)
        os.makedirs(d, exist_ok=True)
        cfg = dict(FULL_CONFIG if opt.get("full") else SHORT_CONFIG)
        cfg.update(changes)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        write_safetensors(os.path.join(d, "model.safetensors"), weights(name, cfg, opt), opt.get("dtype", "F32"))
        if opt.get("vocab"):
            if small_tok is None:
                write_small_tokenizer(a.tokenizer, d, opt["vocab"])
                small_tok = d
            else:
                for f in ("vocab.json", "merges.txt"):
                    copy(os.path.join(small_tok, f), os.path.join(d, f))
        else:
            for f in ("vocab.json", "merges.txt"):
                copy(os.path.join(a.tokenizer, f), os.path.join(d, f))
        entry = {"name": name, "expect": "ok", "drafts": [name], "contrast": {}, "long": False}
        entry.update(extra)
        manifest.append(entry)
    with open(os.path.join(a.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    # the same for a shell: NAME EXPECT FIELD DRAFT,... LONG
    with open(os.path.join(a.out_dir, "manifest.txt"), "w") as f:
        for e in manifest:
            f.write("%s %s %s %s %d\n" % (e["name"], e["expect"], e.get("field", "-"), ",".join(e["drafts"]),
                                          e["long"]))


if __name__ == "__main__":
    sys.exit(main())

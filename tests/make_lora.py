#!/usr/bin/python3
"""PEFT LoRA adapters for a test checkpoint, and the float64 reference of a
base model with adapters merged by PEFT's rules.

    /usr/bin/python3 tests/make_lora.py BASE_DIR OUT_DIR
    /usr/bin/python3 tests/make_lora.py --fuzz-corpus tests/fuzz/corpus/lora

Writes OUT_DIR/NAME/adapter_config.json and adapter_model.safetensors for
each adapter of ADAPTERS (good ones) and BROKEN (each malformed in one way,
with the word its refusal must name), and OUT_DIR/manifest.json. Each
adapter of GGUF (one alpha for every matrix, plain LoRA scaling: what a
llama.cpp LoRA file can hold) is also written as OUT_DIR/NAME.gguf, by our
own GGUF writer (gguf_write.py), in the layout llama.cpp's runtime applies
(src/llama-adapter.cpp): general.type "adapter", adapter.type "lora",
general.architecture "gpt2", float32 adapter.lora.alpha, and for each
matrix blk.N.{attn_qkv,attn_output,ffn_up,ffn_down}.weight.lora_a, ggml's
ne [in, r] (PEFT's lora_A (r, in) row for row), and .lora_b, ne [r, out]
(lora_B (out, r)), in the adapter's own dtype: the same numbers, so the
same merge, bit for bit. Malformed GGUF files go into OUT_DIR/broken too. As a module
(tests/cli_lora.sh): merged(base, [(adapter_dir, scale)...]) is the base
model (reference_forward.load) with the adapters merged in float64 as PEFT
merges them; its wrong=... argument merges them wrongly on purpose (the
delta transposed, rsLoRA's scale as plain LoRA's), for the check that the
comparison would see such a bug.

PEFT's rules, written from peft/tuners/tuners_utils.py
(check_target_module_exists), peft/utils/other.py (get_pattern_key) and
peft/tuners/lora/layer.py (Linear.get_delta_weight, dispatch_default):
  - module names are GPT2LMHeadModel's ("transformer.h.0.attn.c_attn");
    target_modules as a string: re.fullmatch; as a list: a name equal to an
    entry, or ending in "." + an entry, the latter kept only in the layers
    of layers_to_transform (the index after layers_pattern, or after any
    ".name." when it is unset); "all-linear": c_attn, c_proj, c_fc.
  - r and lora_alpha per module: rank_pattern / alpha_pattern's first key
    k with re.match(r"(.*\\.)?(k)$", name), else the config's.
  - scaling = lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora.
  - lora_A.weight (r, in), lora_B.weight (out, r); GPT-2's Conv1D weight W
    is (in, out) and PEFT forces fan_in_fan_out true for it: the merged
    weight is W + scale * scaling * (B @ A).T, whatever the config says.
numpy and the standard library only. Deterministic.
"""
import json
import math
import os
import re
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import reference_forward as rf  # noqa: E402
from make_variants import to_bytes  # noqa: E402
import gguf_write as gw  # noqa: E402

MATRICES = ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"]

# name: config entries (beside PEFT's defaults), tensor dtype, names with
# "transformer." (GPT2LMHeadModel) or not (GPT2Model)
ADAPTERS = {
    "r1": ({"r": 1, "lora_alpha": 2, "target_modules": ["c_attn"], "fan_in_fan_out": True}, "F32", True),
    "r8": ({"r": 8, "lora_alpha": 4, "target_modules": ["c_attn", "c_proj", "c_fc"]}, "F16", True),
    # r8's tensors, fan_in_fan_out true: the same merge (PEFT forces it for Conv1D)
    "r8_fifo": ({"r": 8, "lora_alpha": 4, "target_modules": ["c_attn", "c_proj", "c_fc"], "fan_in_fan_out": True},
                "F16", True),
    "rslora": ({"r": 4, "lora_alpha": 6, "use_rslora": True,
                "target_modules": r"transformer\.h\.\d+\.mlp\.c_(fc|proj)"}, "BF16", True),
    "subset": ({"r": 2, "lora_alpha": 3, "target_modules": ["c_proj"], "layers_to_transform": [0, 2],
                "rank_pattern": {"mlp.c_proj": 3}, "alpha_pattern": {"h.2.attn.c_proj": 7}}, "F32", True),
    "paths": ({"r": 4, "lora_alpha": 8, "target_modules": ["transformer.h.1.attn.c_attn", "transformer.h.2.mlp.c_fc"]},
              "F32", True),
    "all_linear": ({"r": 2, "lora_alpha": 1, "target_modules": "all-linear", "layers_to_transform": 1,
                    "layers_pattern": "h"}, "F32", True),
    "gpt2model": ({"r": 3, "lora_alpha": 5, "target_modules": ["c_fc"]}, "F32", False),
    # a task adapter's rank: as wide as the test checkpoint's d_model
    "r64": ({"r": 64, "lora_alpha": 16, "target_modules": ["c_attn", "c_proj", "c_fc"]}, "F32", True),
}

# the adapters written as GGUF files too (no alpha_pattern, no rsLoRA)
GGUF = ["r1", "r8", "paths", "all_linear", "gpt2model"]
GGUF_NAMES = {"attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}

# PEFT's LoraConfig defaults, as save_pretrained writes them
DEFAULTS = {
    "alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": "gpt2", "bias": "none",
    "fan_in_fan_out": False, "inference_mode": True, "init_lora_weights": True, "layer_replication": None,
    "layers_pattern": None, "layers_to_transform": None, "loftq_config": {}, "lora_alpha": 8,
    "lora_dropout": 0.0, "megatron_config": None, "megatron_core": "megatron.core", "modules_to_save": None,
    "peft_type": "LORA", "r": 8, "rank_pattern": {}, "revision": None, "target_modules": None,
    "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False,
}


# ---------------------------------------------------------------------------
# PEFT's selection of modules


def module_names(L, prefixed):
    """GPT2LMHeadModel's named_modules (GPT2Model's without the prefix)"""
    p = "transformer." if prefixed else ""
    names = (["transformer", "lm_head"] if prefixed else []) + [p + n for n in ["wte", "wpe", "drop", "h", "ln_f"]]
    for l in range(L):
        for s in ["", ".ln_1", ".attn", ".attn.c_attn", ".attn.c_proj", ".attn.attn_dropout", ".attn.resid_dropout",
                  ".ln_2", ".mlp", ".mlp.c_fc", ".mlp.c_proj", ".mlp.act", ".mlp.dropout"]:
            names.append("%sh.%d%s" % (p, l, s))
    return names


def targeted(cfg, key):
    t = cfg["target_modules"]
    if t is None:
        t = ["c_attn"]  # PEFT's default for gpt2
    if t == "all-linear":
        t = ["c_attn", "c_proj", "c_fc"]
    if isinstance(t, str):
        return re.fullmatch(t, key) is not None
    if key in t:
        return True
    if not any(key.endswith("." + k) for k in t):
        return False
    idx = cfg["layers_to_transform"]
    if idx is None or idx == []:
        return True
    pat = cfg["layers_pattern"]
    if not pat:
        m = re.match(r".*\.[^.]*\.(\d+)\.", key)
    else:
        m = None
        for p in [pat] if isinstance(pat, str) else pat:
            m = re.match(r".*\.%s\.(\d+)\." % p, key)
            if m:
                break
    if m is None:
        return False
    layer = int(m.group(1))
    return layer == idx if isinstance(idx, int) else layer in idx


def pattern(d, key, default):
    for k, v in d.items():
        if re.match(r"(.*\.)?(%s)$" % k, key):
            return v
    return default


# ---------------------------------------------------------------------------
# writing


def safetensors_bytes(tensors):
    """a safetensors file of tensors: [(name, array, dtype)]"""
    header, blobs, off = {}, [], 0
    for name, a, dt in tensors:
        b = to_bytes(a, dt)
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def write_safetensors(path, tensors):
    with open(path, "wb") as f:
        f.write(safetensors_bytes(tensors))


def shapes(m):
    """(in, out) of each matrix kind"""
    return {"attn.c_attn": (m.C, 3 * m.C), "attn.c_proj": (m.C, m.C), "mlp.c_fc": (m.C, m.F), "mlp.c_proj": (m.F, m.C)}


def adapter_tensors(m, name, cfg, dtype, prefixed):
    """the tensors of every module cfg selects: [(name, array, dtype)]"""
    rng = np.random.default_rng(sum(name.encode()) * 7919)
    pre = "transformer." if prefixed else ""
    out = []
    for l in range(m.L):
        for k in MATRICES:
            key = "%sh.%d.%s" % (pre, l, k)
            if not targeted(cfg, key):
                continue
            r = pattern(cfg["rank_pattern"], key, cfg["r"])
            n_in, n_out = shapes(m)[k]
            a = rng.normal(0, 0.3, (r, n_in))
            b = rng.normal(0, 0.15, (n_out, r))
            out.append(("base_model.model.%s.lora_A.weight" % key, a, dtype))
            out.append(("base_model.model.%s.lora_B.weight" % key, b, dtype))
    return out


def write_adapter(d, cfg, tensors):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "adapter_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(d, "adapter_model.safetensors"), tensors)


def config(entries):
    c = dict(DEFAULTS)
    c.update(entries)
    return c


def gguf_tensors(tensors):
    """PEFT's tensors [(name, array, dtype)] under llama.cpp's names, as
    [(name, array, dtype)] with the array's rows ggml's ne[1]"""
    out = []
    for name, a, dt in tensors:
        m = re.match(r"base_model\.model\.(?:transformer\.)?h\.(\d+)\.(.*)\.lora_([AB])\.weight$", name)
        out.append(("blk.%s.%s.weight.lora_%s" % (m.group(1), GGUF_NAMES[m.group(2)], m.group(3).lower()), a, dt))
    return out


def gguf_adapter_bytes(tensors, alpha, kvs=None):
    """a GGUF LoRA file: tensors [(name, array, dtype)]; kvs replaces the
    metadata (for the malformed ones)"""
    if kvs is None:
        kvs = [("general.architecture", gw.STRING, "gpt2"), ("general.type", gw.STRING, "adapter"),
               ("adapter.type", gw.STRING, "lora"), ("adapter.lora.alpha", gw.F32V, alpha)]
    return gw.gguf_bytes(kvs, [(n, gw.TYPES[dt][0], list(a.shape[::-1]), to_bytes(a, dt)) for n, a, dt in tensors])


# ---------------------------------------------------------------------------
# reading back and merging: the reference


def read_adapter(d):
    cfg = dict(DEFAULTS)
    cfg.update(json.load(open(os.path.join(d, "adapter_config.json"))))
    return cfg, rf.read_safetensors(os.path.join(d, "adapter_model.safetensors"))


def merged(base_dir, adapters, wrong=None):
    """the reference model of base_dir with [(adapter_dir, scale)] merged in
    float64; wrong: "transpose" (B @ A not transposed into Conv1D's (in,
    out), where the shape allows) or "rslora" (alpha / r for rsLoRA)"""
    m = rf.load(base_dir)
    for d, scale in adapters:
        cfg, t = read_adapter(d)
        prefixed = any(k.startswith("base_model.model.transformer.") for k in t)
        for key in module_names(m.L, prefixed):
            if not targeted(cfg, key):
                continue
            a = t["base_model.model.%s.lora_A.weight" % key]
            b = t["base_model.model.%s.lora_B.weight" % key]
            r = pattern(cfg["rank_pattern"], key, cfg["r"])
            alpha = pattern(cfg["alpha_pattern"], key, cfg["lora_alpha"])
            rs = cfg["use_rslora"] and wrong != "rslora"
            scaling = alpha / math.sqrt(r) if rs else alpha / r
            delta = b @ a  # (out, in)
            w = key[len("transformer."):] if prefixed else key
            W = m.w[w + ".weight"]
            if wrong == "transpose" and delta.shape == W.shape:
                m.w[w + ".weight"] = W + scale * scaling * delta
            else:
                m.w[w + ".weight"] = W + scale * scaling * delta.T
    return m


def rounded(m, dtype):
    """m with every matrix rounded to float32 and then to dtype (F16), as
    gpt holds a merged model in --dtype f16"""
    for k, v in m.w.items():
        if k.endswith(".weight") and v.ndim == 2 and not k.startswith("wpe"):
            m.w[k] = v.astype(np.float32).astype(np.float16).astype(np.float64)
    if m.cfg["tie_word_embeddings"]:
        m.out = m.w["wte.weight"]
    return m


# ---------------------------------------------------------------------------
# the malformed ones: name -> (what is wrong, the word the refusal names)

def broken(m, out):
    good = config(ADAPTERS["r8"][0])
    good_t = adapter_tensors(m, "r8", good, "F32", True)
    made = {}

    def put(name, cfg, tensors, word):
        write_adapter(os.path.join(out, name), cfg, tensors)
        made[name] = word

    put("bad_json", good, good_t, "adapter_config.json")
    with open(os.path.join(out, "bad_json", "adapter_config.json"), "w") as f:
        f.write('{"r": 8, "lora_alpha": ')
    put("missing_tensor", good, [t for t in good_t if t[0] != "base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight"],
        "h.1.mlp.c_fc.lora_B")
    put("wrong_shape", good, [(n, a[:, :32] if n.endswith("h.0.attn.c_attn.lora_A.weight") else a, dt)
                              for n, a, dt in good_t], "h.0.attn.c_attn.lora_A")
    put("wrong_rank", config(dict(ADAPTERS["r8"][0], r=4)), good_t, "rank")
    put("use_dora", config(dict(ADAPTERS["r8"][0], use_dora=True)), good_t, "use_dora")
    put("modules_to_save", config(dict(ADAPTERS["r8"][0], modules_to_save=["lm_head"])), good_t, "modules_to_save")
    put("bias_all", config(dict(ADAPTERS["r8"][0], bias="all")), good_t, "bias")
    put("lm_head", config(dict(ADAPTERS["r8"][0], target_modules=["c_fc", "lm_head"])), good_t, "lm_head")
    put("untargeted", config(dict(ADAPTERS["r8"][0], target_modules=["c_attn"])), good_t, "target_modules")
    put("peft_type", config(dict(ADAPTERS["r8"][0], peft_type="PREFIX_TUNING")), good_t, "peft_type")
    put("f64", good, [(n, a, dt) for n, a, dt in good_t], "dtype")
    # F64 by rewriting the first tensor's dtype: twice the bytes, so the sizes agree
    f64 = os.path.join(out, "f64", "adapter_model.safetensors")
    header = {}
    off = 0
    blobs = []
    for n, a, _ in good_t:
        b = np.ascontiguousarray(a, dtype="<f8").tobytes()
        header[n] = {"dtype": "F64", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(f64, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    # a pickle only: PEFT's older default, torch.save's zip
    d = os.path.join(out, "bin_only")
    os.makedirs(d, exist_ok=True)
    json.dump(good, open(os.path.join(d, "adapter_config.json"), "w"))
    open(os.path.join(d, "adapter_model.bin"), "wb").write(b"PK\x03\x04" + bytes(60))
    made["bin_only"] = "adapter_model.bin"
    put("regex_lookahead", config(dict(ADAPTERS["r8"][0], target_modules=r"(?!x).*c_attn")), good_t, "target_modules")
    put("too_deep", good, good_t + [("base_model.model.transformer.h.7.attn.c_attn.lora_A.weight", good_t[0][1], "F32"),
                                    ("base_model.model.transformer.h.7.attn.c_attn.lora_B.weight", good_t[1][1], "F32")],
        "h.7")

    # GGUF files: r8's tensors, one fault each
    gt = gguf_tensors(good_t)
    kv = [("general.architecture", gw.STRING, "gpt2"), ("general.type", gw.STRING, "adapter"),
          ("adapter.type", gw.STRING, "lora"), ("adapter.lora.alpha", gw.F32V, 4.0)]

    def put_gguf(name, tensors, word, kvs=None):
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(gguf_adapter_bytes(tensors, 4.0, kvs))
        made[name + ".gguf"] = word

    def without(key):
        return [e for e in kv if e[0] != key]

    put_gguf("gguf_model_type", gt, "general.type", without("general.type") + [("general.type", gw.STRING, "model")])
    put_gguf("gguf_no_type", gt, "general.type", without("general.type"))
    put_gguf("gguf_not_lora", gt, "adapter.type", without("adapter.type") + [("adapter.type", gw.STRING, "control_vector")])
    put_gguf("gguf_llama", gt, "general.architecture",
             without("general.architecture") + [("general.architecture", gw.STRING, "llama")])
    put_gguf("gguf_no_alpha", gt, "adapter.lora.alpha", without("adapter.lora.alpha"))
    put_gguf("gguf_alpha_int", gt, "adapter.lora.alpha", without("adapter.lora.alpha") + [("adapter.lora.alpha", gw.U32, 4)])
    put_gguf("gguf_shape", [(n, a[:, :32] if n == "blk.0.attn_qkv.weight.lora_a" else a, dt) for n, a, dt in gt],
             "blk.0.attn_qkv.weight")
    # lora_a and lora_b swapped and transposed, as convert_lora_to_gguf.py's GPT-2 path writes c_attn
    put_gguf("gguf_transposed", [(n, gt[i ^ 1][1].T if n.startswith("blk.0.attn_qkv.") else a, dt)
                                 for i, (n, a, dt) in enumerate(gt)], "blk.0.attn_qkv.weight")
    put_gguf("gguf_rank", [(n, a[:4] if n == "blk.1.ffn_up.weight.lora_a" else a, dt) for n, a, dt in gt],
             "blk.1.ffn_up.weight")
    put_gguf("gguf_unknown", gt + [("blk.0.attn_q.weight.lora_a", gt[0][1], "F32")], "blk.0.attn_q.weight.lora_a")
    put_gguf("gguf_embd", gt + [("token_embd.weight.lora_a", gt[0][1], "F32")], "token_embd.weight.lora_a")
    put_gguf("gguf_missing_b", [t for t in gt if t[0] != "blk.1.ffn_up.weight.lora_b"], "blk.1.ffn_up.weight.lora_b")
    put_gguf("gguf_too_deep", gt + [("blk.7.attn_qkv.weight.lora_a", gt[0][1], "F32"),
                                    ("blk.7.attn_qkv.weight.lora_b", gt[1][1], "F32")], "blk.7")
    with open(os.path.join(out, "gguf_q8.gguf"), "wb") as f:
        f.write(gw.gguf_bytes(kv, [(n, gw.TYPES["Q8_0"][0], list(a.shape[::-1]), gw.encode(np.asarray(a, np.float32), "Q8_0")[0])
                                   for n, a, dt in gt]))
    made["gguf_q8.gguf"] = "Q8_0"
    return made


def fuzz_corpus(out):
    """the seeds of tests/fuzz/fuzz_lora.c: each good adapter for its base
    (tests/fuzz/corpus/model/f32: 1 layer, C 4, F 16), as one file:
    adapter_config.json, "\n#safetensors\n", adapter_model.safetensors"""
    class Tiny:
        L, C, F = 1, 4, 16
    os.makedirs(out, exist_ok=True)
    for name, (entries, dtype, prefixed) in ADAPTERS.items():
        cfg = config(entries)
        st = safetensors_bytes(adapter_tensors(Tiny, name, cfg, dtype, prefixed))
        with open(os.path.join(out, name), "wb") as f:
            f.write(json.dumps(cfg).encode() + b"\n#safetensors\n" + st)
        if name in GGUF:
            with open(os.path.join(out, name + ".gguf"), "wb") as f:
                f.write(gguf_adapter_bytes(gguf_tensors(adapter_tensors(Tiny, name, cfg, dtype, prefixed)),
                                           cfg["lora_alpha"]))


def main():
    if sys.argv[1] == "--fuzz-corpus":
        fuzz_corpus(sys.argv[2])
        return
    base, out = sys.argv[1], sys.argv[2]
    m = rf.load(base)
    os.makedirs(out, exist_ok=True)
    for name, (entries, dtype, prefixed) in ADAPTERS.items():
        cfg = config(entries)
        src = "r8" if name == "r8_fifo" else name  # the same tensors
        tensors = adapter_tensors(m, src, config(ADAPTERS[src][0]), dtype, prefixed)
        write_adapter(os.path.join(out, name), cfg, tensors)
        if name in GGUF:
            with open(os.path.join(out, name + ".gguf"), "wb") as f:
                f.write(gguf_adapter_bytes(gguf_tensors(tensors), cfg["lora_alpha"]))
    made = broken(m, os.path.join(out, "broken"))
    json.dump({"good": list(ADAPTERS), "gguf": GGUF, "broken": made}, open(os.path.join(out, "manifest.json"), "w"),
              indent=1)
    with open(os.path.join(out, "broken.txt"), "w") as f:
        for k, v in made.items():
            f.write("%s %s\n" % (k, v))


if __name__ == "__main__":
    main()

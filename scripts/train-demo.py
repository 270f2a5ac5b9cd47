#!/usr/bin/env python3
"""Train gpt's demo model: a small GPT-2, from scratch, on public-domain text.

    scripts/train-demo.py data/corpus/*.txt --out build/demo --minutes 90
    scripts/train-demo.py data/corpus/*.txt --out build/demo --resume
    build/gpt convert build/demo/hf models/demo.bin --dtype f16

The model is exactly GPT-2's architecture (GPT2LMHeadModel): GPT-2's 50257
token vocabulary and byte-level BPE, learned position embeddings, pre-LayerNorm
blocks (eps 1e-5), tanh GELU, attention scaled by 1/sqrt(64), wte tied to the
output layer. Only the sizes differ (--d-model, --layers, --ctx). The corpus is
tokenized by gpt itself (`gpt --tokenize`, identical to tiktoken).

Held out, never trained on: from the corpus of data/corpus, the Book of
Revelation, Moby-Dick's chapters 134-135 (the corpus has no epilogue), and the 2021 State
of the Union address; from any other file, its last 2% (at a line break).
They are written to OUT/heldout/ and scored every --eval-every steps.

OUT/ holds: train.pt (the checkpoint: model, optimizer, step, RNG state; every
--ckpt-minutes and at the end), log.tsv (step, tokens, lr, train loss,
held-out loss), hf/ (config.json, model.safetensors, vocab.json, merges.txt:
a Hugging Face GPT-2 directory that `gpt convert` takes), heldout/*.txt.

Needs python3-torch and python3-numpy (Debian's: run it with /usr/bin/python3).
"""
import argparse
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 50257
EOT = 50256
HEAD = 64


# ---------------------------------------------------------------- the data

def split_heldout(path, text):
    """(train text, held-out text, held-out name) for one corpus file."""
    base = os.path.basename(path)
    if base == "kjv-bible.txt":
        i = text.index("The Revelation of Jesus Christ, which God gave unto him")
        return text[:i], text[i:], "revelation"
    if base == "moby-dick.txt":
        i = text.index("CHAPTER 134.")
        return text[:i], text[i:], "moby-dick-134-135"
    if base == "state-of-the-union.txt":
        # one address per line, oldest first: the last line is 2021's
        body = text.rstrip("\n")
        i = body.rindex("\n") + 1
        return text[:i], text[i:], "sotu-2021"
    cut = text.rfind("\n", 0, int(len(text) * 0.98)) + 1
    return text[:cut], text[cut:], os.path.splitext(base)[0]


def documents(path, text):
    """A file's documents: one State of the Union address per line, else the file."""
    if os.path.basename(path) == "state-of-the-union.txt":
        return [line for line in text.split("\n") if line.strip()]
    return [text]


def tokenize(gpt, text):
    """Token ids of text by `gpt --tokenize` (plain text: no special tokens)."""
    out = subprocess.run([gpt, "--tokenize"], input=text.encode("utf-8"),
                         stdout=subprocess.PIPE, check=True).stdout
    return np.array(out.split(), dtype=np.int64)


def load_corpus(args):
    """(train ids, {held-out name: ids}), every document ended by <|endoftext|>."""
    cache = os.path.join(args.out, "tokens.npz")
    key = json.dumps([[os.path.abspath(p), os.path.getsize(p)] for p in args.files])
    if os.path.exists(cache):
        z = np.load(cache, allow_pickle=False)
        if str(z["key"]) == key:
            return z["train"], {k[3:]: z[k] for k in z.files if k.startswith("ho_")}
    os.makedirs(os.path.join(args.out, "heldout"), exist_ok=True)
    train, held = [], {}
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tr, ho, name = split_heldout(path, text)
        with open(os.path.join(args.out, "heldout", name + ".txt"), "w", encoding="utf-8") as f:
            f.write(ho)
        for doc in documents(path, tr):
            train.append(tokenize(args.gpt, doc))
            train.append(np.array([EOT], dtype=np.int64))
        held[name] = tokenize(args.gpt, ho)
        print(f"{path}: {len(tr)} chars trained, {len(ho)} held out ({name}, "
              f"{len(held[name])} tokens)", flush=True)
    train = np.concatenate(train)
    np.savez(cache, key=np.array(key), train=train, **{"ho_" + k: v for k, v in held.items()})
    return train, held


# ---------------------------------------------------------------- the model

class Block(nn.Module):
    def __init__(self, d, ctx):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx, dtype=torch.bool)))

    def forward(self, x):
        B, T, d = x.shape
        nh = d // HEAD
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)          # 3 x (B, T, d)
        q, k, v = (t.view(B, T, nh, HEAD).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, 64)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HEAD))    # (B, nh, T, T)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, d)               # (B, T, d)
        x = x + self.c_proj(y)
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")     # (B, T, 4d)
        return x + self.mlp_proj(h)


class GPT2(nn.Module):
    def __init__(self, d, layers, ctx):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(ctx, d)
        self.h = nn.ModuleList(Block(d, ctx) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        # GPT-2's initialisation: N(0, 0.02), residual projections scaled by 1/sqrt(2 layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))
            else:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()                   # (B, T, 50257), tied


# ------------------------------------------------- the Hugging Face directory

def save_safetensors(path, tensors):
    """A model.safetensors of float32 tensors, in the published format."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        b = t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def save_hf(model, args, tokenizer_dir):
    """OUT/hf: config.json + model.safetensors (HF names, Conv1D (in, out) layout)."""
    d = os.path.join(args.out, "hf")
    os.makedirs(d, exist_ok=True)
    t = {"transformer.wte.weight": model.wte.weight, "transformer.wpe.weight": model.wpe.weight,
         "transformer.ln_f.weight": model.ln_f.weight, "transformer.ln_f.bias": model.ln_f.bias}
    for i, b in enumerate(model.h):
        p = f"transformer.h.{i}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = b.ln_1.weight, b.ln_1.bias
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = b.c_attn.weight.t(), b.c_attn.bias
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = b.c_proj.weight.t(), b.c_proj.bias
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = b.ln_2.weight, b.ln_2.bias
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = b.c_fc.weight.t(), b.c_fc.bias
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = b.mlp_proj.weight.t(), b.mlp_proj.bias
    save_safetensors(os.path.join(d, "model.safetensors"), t)
    config = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": VOCAB,
              "n_positions": args.ctx, "n_ctx": args.ctx, "n_embd": args.d_model,
              "n_layer": args.layers, "n_head": args.d_model // HEAD, "n_inner": None,
              "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
              "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
              "initializer_range": 0.02, "bos_token_id": EOT, "eos_token_id": EOT,
              "tie_word_embeddings": True}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(d, name))


# ------------------------------------------------------------- training

def lr_at(step, args):
    """Linear warm-up to --lr, then cosine decay to --lr / 10 at --steps."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    frac = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1.0 + math.cos(math.pi * frac)))


@torch.no_grad()
def heldout_loss(model, ids, ctx, device, max_windows):
    """Mean next-token loss over non-overlapping windows of ctx tokens."""
    model.eval()
    total, count = 0.0, 0
    n = min((len(ids) - 1) // ctx, max_windows)
    for w in range(0, n, 8):
        rows = range(w, min(n, w + 8))
        x = torch.stack([torch.from_numpy(ids[r * ctx:(r + 1) * ctx]) for r in rows]).to(device)
        y = torch.stack([torch.from_numpy(ids[r * ctx + 1:(r + 1) * ctx + 1]) for r in rows]).to(device)
        loss = F.cross_entropy(model(x).float().view(-1, VOCAB), y.view(-1), reduction="sum")
        total += loss.item()
        count += y.numel()
    model.train()
    return total / max(1, count)


def keep_freed_memory():
    """Have glibc reuse freed memory rather than unmap it: the logits of a
    step (batch x ctx x 50257 floats) are hundreds of MB, and mapping them
    afresh each step spent more time in page faults than in arithmetic
    (measured: 904 -> 1560 tokens/s at d_model 128). The settings are read
    when the process starts, so the script starts itself again with them."""
    if os.environ.get("MALLOC_MMAP_MAX_") is None:
        os.environ["MALLOC_MMAP_MAX_"] = "0"                # never mmap a block
        os.environ["MALLOC_TRIM_THRESHOLD_"] = str(1 << 40)  # never give the heap back
        os.execv(sys.executable, [sys.executable] + sys.argv)


def main():
    keep_freed_memory()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="UTF-8 text files to train on")
    ap.add_argument("--out", default="build/demo", help="output directory (default build/demo)")
    ap.add_argument("--gpt", default="./gpt", help="the gpt binary that tokenizes (default ./gpt)")
    ap.add_argument("--tokenizer-dir", default="models", help="vocab.json + merges.txt for hf/")
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000, help="length of the cosine schedule")
    ap.add_argument("--minutes", type=float, default=0, help="stop cleanly after this long (0: run to --steps)")
    ap.add_argument("--ckpt-minutes", type=float, default=5)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=64, help="held-out windows per text scored in an eval")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--bf16", action="store_true", help="autocast matrix products to bfloat16")
    ap.add_argument("--resume", action="store_true", help="continue from OUT/train.pt")
    args = ap.parse_args()
    if args.d_model % HEAD or args.ctx < 1 or args.layers < 1:
        sys.exit("train-demo: --d-model must be a multiple of 64")
    os.makedirs(args.out, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    train_ids, held = load_corpus(args)
    print(f"train: {len(train_ids)} tokens; held out: "
          + ", ".join(f"{k} {len(v)}" for k, v in held.items()), flush=True)

    model = GPT2(args.d_model, args.layers, args.ctx).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: d_model {args.d_model}, {args.layers} layers, {args.d_model // HEAD} heads, "
          f"context {args.ctx}: {nparams} parameters", flush=True)

    # The order of training windows: a seeded permutation of window starts,
    # one epoch after another, so a resumed run sees exactly what a whole run would.
    n_windows = (len(train_ids) - 1) // args.ctx
    def window_order(epoch):
        g = np.random.default_rng(args.seed + epoch)
        return g.permutation(n_windows)

    step, tokens, elapsed = 0, 0, 0.0
    ckpt = os.path.join(args.out, "train.pt")
    if args.resume and os.path.exists(ckpt):
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, tokens, elapsed = state["step"], state["tokens"], state["elapsed"]
        print(f"resumed at step {step} ({tokens} tokens, {elapsed / 60:.1f} min)", flush=True)

    def save(final=False):
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "tokens": tokens, "elapsed": elapsed, "args": vars(args)}, ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
        save_hf(model, args, args.tokenizer_dir)
        print(f"checkpoint at step {step}{' (final)' if final else ''}", flush=True)

    log = open(os.path.join(args.out, "log.tsv"), "a")
    if os.path.getsize(log.name) == 0:
        log.write("step\ttokens\tminutes\tlr\ttrain_loss\t" + "\t".join(f"heldout_{k}" for k in held) + "\n")
    start = time.time() - elapsed
    last_ckpt = time.time()
    run_start = time.time()
    losses = []
    while step < args.steps:
        epoch, pos = divmod(step * args.batch, n_windows)
        order = window_order(epoch)
        rows = [order[(pos + i) % n_windows] for i in range(args.batch)]
        x = torch.stack([torch.from_numpy(train_ids[r * args.ctx:(r + 1) * args.ctx]) for r in rows]).to(device)
        y = torch.stack([torch.from_numpy(train_ids[r * args.ctx + 1:(r + 1) * args.ctx + 1]) for r in rows]).to(device)
        lr = lr_at(step, args)
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel()
        losses.append(loss.item())
        elapsed = time.time() - start
        if step % args.eval_every == 0 or step == args.steps:
            ho = {k: heldout_loss(model, v, args.ctx, device, args.eval_windows) for k, v in held.items()}
            tl = sum(losses) / len(losses)
            losses = []
            log.write(f"{step}\t{tokens}\t{elapsed / 60:.2f}\t{lr:.3e}\t{tl:.4f}\t"
                      + "\t".join(f"{v:.4f}" for v in ho.values()) + "\n")
            log.flush()
            print(f"step {step} tokens {tokens} {elapsed / 60:.1f} min lr {lr:.2e} train {tl:.3f} "
                  + " ".join(f"{k} {v:.3f} (ppl {math.exp(v):.0f})" for k, v in ho.items())
                  + f" {tokens / max(1e-9, elapsed):.0f} tok/s", flush=True)
        if time.time() - last_ckpt > args.ckpt_minutes * 60:
            save()
            last_ckpt = time.time()
        if args.minutes and time.time() - run_start > args.minutes * 60:
            print(f"--minutes {args.minutes} reached", flush=True)
            break
    save(final=step >= args.steps)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""gguf_write.py - our own GGUF writer, from ggml's docs/gguf.md, for the
tests of src/model/gguf.c (tests/cli_gguf.sh) and the fuzz seeds
(tests/fuzz/corpus/gguf/). Python 3 and numpy only; nothing of llama.cpp.

    gguf_write.py HF_DIR OUT.gguf [--type T] [--vectors] [--fallback T]
                  [--output tied-copy|untied] [--no-tokenizer] [--version 2|3]
                  [--alignment N] [--expected DIR]
    gguf_write.py seeds DIR        the fuzz seeds (tiny synthetic models)

HF_DIR holds config.json and model.safetensors (F32, F16 or BF16), as
`make checkpoints` writes them (build/ckpt/), and vocab.json + merges.txt.
The file is what llama.cpp's converter writes for GPT-2: general.* and
gpt2.* metadata, the tokenizer.ggml.* entries, and the tensors token_embd,
position_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up,
ffn_down}.{weight,bias}, output_norm, with each matrix stored (out, in)
(ggml's ne = [in, out]).

--type T (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
Q5_K, Q6_K; default F32) is the type of the matrices and token_embd; the
norms, biases and position_embd stay F32, as llama.cpp keeps them, unless
--vectors (then they take T too, where their rows are whole blocks). A
matrix whose rows are not whole blocks of T is refused, or takes
--fallback's type. --output writes output.weight: a copy of token_embd
(what older converters wrote for GPT-2) or, with a config whose
tie_word_embeddings is false, lm_head.weight.

Quantization: F16 and BF16 round to nearest even. Q8_0, Q4_0, Q4_1, Q5_0 and
Q5_1 follow ggml's reference quantizers (quantize_row_*_ref) step for step,
in float32. The K-quants take a plain rule (each sub-block's scale and
minimum from its extremes, 6- or 4-bit, against the super-block's f16
scale), not llama.cpp's search: any scale is a valid file, and the tests
hold the reader's dequantization to ours, not the encoder's choices.

--expected DIR writes a Hugging Face directory (config.json, float32
model.safetensors, the tokenizer files) holding what the file's tensors
dequantize to, by this file's numpy dequantization of each type (the
formulas of ggml's dequantize_row_*, in float32, operation for operation):
gpt must load the GGUF into exactly that model.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

F32 = np.float32

# ggml's type codes and blocks: (code, elements per block, bytes per block)
TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34),
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144),
    "Q5_K": (13, 256, 176), "Q6_K": (14, 256, 210), "BF16": (30, 1, 2),
}

# GGUF's value types
U8, I8, U16, I16, U32, I32, F32V, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32V: "<f", BOOL: "<?",
          U64: "<Q", I64: "<q", F64: "<d"}


# ---------------------------------------------------------------------------
# the file

def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def gvalue(vtype, value):
    if vtype == STRING:
        return gstr(value)
    if vtype == ARRAY:
        elem, items = value
        out = struct.pack("<IQ", elem, len(items))
        if elem == STRING:
            return out + b"".join(gstr(s) for s in items)
        return out + b"".join(struct.pack(SCALAR[elem], v) for v in items)
    return struct.pack(SCALAR[vtype], value)


def gguf_bytes(kvs, tensors, version=3, alignment=None, offsets=None):
    """The bytes of a GGUF file. kvs: [(key, vtype, value)] (an ARRAY's value
    is (elem_type, [items])); tensors: [(name, type_code, ne, data)], data
    laid out in order, each at the next multiple of the alignment. offsets,
    for damaged files: the offsets written in the tensor infos instead
    (the data stays where it is)."""
    align = alignment or 32
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for key, vtype, value in kvs:
        out += gstr(key) + struct.pack("<I", vtype) + gvalue(vtype, value)
    offset = 0
    for i, (name, code, ne, data) in enumerate(tensors):
        written = offset if offsets is None else offsets[i]
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", code, written)
        offset += (len(data) + align - 1) // align * align
    out += b"\0" * (-len(out) % align)
    for _, _, _, data in tensors:
        out += data + b"\0" * (-len(data) % align)
    return bytes(out)


# ---------------------------------------------------------------------------
# quantizing and dequantizing: x is float32 (n_blocks, block)

def f16(a):
    return np.asarray(a, F32).astype(np.float16)


def half_bytes(a):
    return f16(a).reshape(-1, 1).view(np.uint8).reshape(-1, 2)


def read_half(b, at):
    return b[:, at:at + 2].copy().view(np.float16).astype(F32).reshape(-1)


def roundf(v):
    """C's roundf (halves away from zero) of float32 v, exactly (in float64)."""
    v = np.asarray(v, np.float64)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def signed_max(x):
    """Per block, the value of largest magnitude with its sign (the first of equals)."""
    i = np.argmax(np.abs(x), axis=1)
    return x[np.arange(len(x)), i]


def inv(d):
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)


def q8_0(x):
    amax = np.max(np.abs(x), axis=1)
    d = (amax / F32(127)).astype(F32)
    q = roundf(x * inv(d)[:, None]).astype(np.int8)
    return np.concatenate([half_bytes(d), q.view(np.uint8)], axis=1)


def q4_0(x):
    d = (signed_max(x) / F32(-8)).astype(F32)
    x0 = (x * inv(d)[:, None]).astype(F32) + F32(8.5)
    q = np.minimum(15, np.trunc(x0).astype(np.int32)).astype(np.uint8)
    return np.concatenate([half_bytes(d), q[:, :16] | q[:, 16:] << 4], axis=1)


def q4_1(x):
    lo, hi = np.min(x, axis=1), np.max(x, axis=1)
    d = ((hi - lo) / F32(15)).astype(F32)
    x0 = ((x - lo[:, None]) * inv(d)[:, None]).astype(F32) + F32(0.5)
    q = np.minimum(15, np.trunc(x0).astype(np.int32)).astype(np.uint8)
    return np.concatenate([half_bytes(d), half_bytes(lo), q[:, :16] | q[:, 16:] << 4], axis=1)


def qh_bytes(q):
    bits = ((q.astype(np.uint32) >> 4) & 1) << np.arange(32, dtype=np.uint32)
    return np.bitwise_or.reduce(bits, axis=1).astype("<u4").reshape(-1, 1).view(np.uint8)


def q5_0(x):
    d = (signed_max(x) / F32(-16)).astype(F32)
    x0 = (x * inv(d)[:, None]).astype(F32) + F32(16.5)
    q = np.minimum(31, np.trunc(x0).astype(np.int32)).astype(np.uint8)
    nib = (q[:, :16] & 15) | (q[:, 16:] & 15) << 4
    return np.concatenate([half_bytes(d), qh_bytes(q), nib], axis=1)


def q5_1(x):
    lo, hi = np.min(x, axis=1), np.max(x, axis=1)
    d = ((hi - lo) / F32(31)).astype(F32)
    x0 = ((x - lo[:, None]) * inv(d)[:, None]).astype(F32) + F32(0.5)
    q = np.trunc(x0).astype(np.int32).astype(np.uint8)
    nib = (q[:, :16] & 15) | (q[:, 16:] & 15) << 4
    return np.concatenate([half_bytes(d), half_bytes(lo), qh_bytes(q), nib], axis=1)


def levels(x, scale, lo, hi):
    """round(x / scale) clamped to [lo, hi]; 0 where the scale is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(scale != 0, np.rint(x / np.where(scale != 0, scale, 1)), 0)
    return np.clip(q, lo, hi).astype(np.int32)


def sub_scales(s, bits):
    """Per super-block, an f16 d and the levels of the sub-block scales s
    (n, subs), s >= 0, in [0, 2^bits - 1]: d = max s / (2^bits - 1)."""
    top = (1 << bits) - 1
    d = f16(np.max(s, axis=1) / F32(top)).astype(F32)
    return d, levels(s, d[:, None], 0, top)


def kquant_min(x, sub, bits, sbits):
    """K-quants with a minimum: x (n, 256) in sub-blocks of `sub`; level q in
    [0, 2^bits - 1], y = (d sc) q - (dmin m). Returns d, dmin, sc, m, q."""
    n = len(x)
    xs = x.reshape(n, -1, sub)
    mn = np.maximum(F32(0), -np.min(xs, axis=2)).astype(F32)
    scale = ((np.max(xs, axis=2) + mn) / F32((1 << bits) - 1)).astype(F32)
    d, sc = sub_scales(scale, sbits)
    dmin, m = sub_scales(mn, sbits)
    dl = (d[:, None] * sc.astype(F32)).astype(F32)
    ml = (dmin[:, None] * m.astype(F32)).astype(F32)
    q = levels(xs + ml[:, :, None], dl[:, :, None], 0, (1 << bits) - 1)
    return d, dmin, sc, m, q.reshape(n, 256)


def kquant_signed(x, sub, qlo, qhi, slo, shi):
    """K-quants without a minimum: level q in [qlo, qhi], sub-block scale level
    in [slo, shi], y = (d sc) q. Returns d, sc, q."""
    n = len(x)
    xs = x.reshape(n, -1, sub)
    s = (signed_max(xs.reshape(-1, sub)).reshape(n, -1) / F32(qlo)).astype(F32)
    d = f16(np.max(np.abs(s), axis=1) / F32(-slo if -slo > shi else shi)).astype(F32)
    sc = levels(s, d[:, None], slo, shi)
    dl = (d[:, None] * sc.astype(F32)).astype(F32)
    q = levels(xs, dl[:, :, None], qlo, qhi)
    return d, sc, q.reshape(n, 256)


def pack_k4_scales(sc, m):
    """The 12 bytes of Q4_K's and Q5_K's 8 6-bit scales and minimums."""
    s = np.zeros((len(sc), 12), np.uint8)
    for j in range(4):
        s[:, j] = sc[:, j] | (sc[:, j + 4] >> 4) << 6
        s[:, j + 4] = m[:, j] | (m[:, j + 4] >> 4) << 6
        s[:, j + 8] = (sc[:, j + 4] & 15) | (m[:, j + 4] & 15) << 4
    return s


def unpack_k4_scales(s):
    sc = np.zeros((len(s), 8), np.int32)
    m = np.zeros((len(s), 8), np.int32)
    s = s.astype(np.int32)
    for j in range(4):
        sc[:, j], m[:, j] = s[:, j] & 63, s[:, j + 4] & 63
        sc[:, j + 4] = (s[:, j + 8] & 15) | (s[:, j] >> 6) << 4
        m[:, j + 4] = (s[:, j + 8] >> 4) | (s[:, j + 4] >> 6) << 4
    return sc, m


def two_bit_index():
    """For element e of 256: the byte of a 64-byte field of 2-bit values
    (Q2_K's and Q3_K's qs) and the shift."""
    e = np.arange(256)
    return 32 * (e // 128) + e % 32, 2 * ((e % 128) // 32)


def pack_bits(values, byte_index, shift, nbytes):
    out = np.zeros((len(values), nbytes), np.uint32)
    for e in range(values.shape[1]):
        out[:, byte_index[e]] |= values[:, e].astype(np.uint32) << shift[e]
    return out.astype(np.uint8)


def q2_k(x):
    d, dmin, sc, m, q = kquant_min(x, 16, 2, 4)
    bi, sh = two_bit_index()
    scales = (sc | m << 4).astype(np.uint8)
    return np.concatenate([scales, pack_bits(q, bi, sh, 64), half_bytes(d), half_bytes(dmin)], axis=1)


def q3_k(x):
    d, sc, q = kquant_signed(x, 16, -4, 3, -32, 31)
    u = q + 4  # 0..7
    bi, sh = two_bit_index()
    e = np.arange(256)
    hmask = pack_bits(u >> 2, e % 32, e // 32, 32)
    us = (sc + 32).astype(np.int32)  # 6 bits
    s = np.zeros((len(x), 12), np.uint8)
    for k in range(8):
        s[:, k] = (us[:, k] & 15) | (us[:, k + 8] & 15) << 4
    for k in range(4):
        s[:, 8 + k] = (us[:, k] >> 4) | (us[:, k + 4] >> 4) << 2 | (us[:, k + 8] >> 4) << 4 | (us[:, k + 12] >> 4) << 6
    return np.concatenate([hmask, pack_bits(u & 3, bi, sh, 64), s, half_bytes(d)], axis=1)


def nibble_index():
    """Q4_K's and Q5_K's qs: element e's byte and shift."""
    e = np.arange(256)
    s = e // 32
    return 32 * (s // 2) + e % 32, 4 * (s % 2)


def q4_k(x):
    d, dmin, sc, m, q = kquant_min(x, 32, 4, 6)
    bi, sh = nibble_index()
    return np.concatenate([half_bytes(d), half_bytes(dmin), pack_k4_scales(sc, m), pack_bits(q, bi, sh, 128)],
                          axis=1)


def q5_k(x):
    d, dmin, sc, m, q = kquant_min(x, 32, 5, 6)
    bi, sh = nibble_index()
    e = np.arange(256)
    qh = pack_bits(q >> 4, e % 32, e // 32, 32)
    return np.concatenate([half_bytes(d), half_bytes(dmin), pack_k4_scales(sc, m), qh,
                           pack_bits(q & 15, bi, sh, 128)], axis=1)


def q6_k_index():
    e = np.arange(256)
    h, k, l = e // 128, (e % 128) // 32, e % 32
    return 64 * h + l + 32 * (k % 2), 4 * (k // 2), 32 * h + l, 2 * k


def q6_k(x):
    d, sc, q = kquant_signed(x, 16, -32, 31, -128, 127)
    u = q + 32
    lb, ls, hb, hs = q6_k_index()
    return np.concatenate([pack_bits(u & 15, lb, ls, 128), pack_bits(u >> 4, hb, hs, 64),
                           sc.astype(np.int8).view(np.uint8), half_bytes(d)], axis=1)


def bits_at(b, index, shift, mask):
    return (b[:, index].astype(np.int32) >> shift) & mask


def dq_q8_0(b):
    return b[:, 2:].view(np.int8).astype(F32) * read_half(b, 0)[:, None]


def nibbles(b, at):
    q = b[:, at:at + 16].astype(np.int32)
    return np.concatenate([q & 15, q >> 4], axis=1)


def dq_q4_0(b):
    return (nibbles(b, 2) - 8).astype(F32) * read_half(b, 0)[:, None]


def dq_q4_1(b):
    return nibbles(b, 4).astype(F32) * read_half(b, 0)[:, None] + read_half(b, 2)[:, None]


def fifth_bits(b, at):
    qh = b[:, at:at + 4].copy().view("<u4").astype(np.int64)
    return ((qh >> np.arange(32)) & 1).astype(np.int32) << 4


def dq_q5_0(b):
    return ((nibbles(b, 6) | fifth_bits(b, 2)) - 16).astype(F32) * read_half(b, 0)[:, None]


def dq_q5_1(b):
    return (nibbles(b, 8) | fifth_bits(b, 4)).astype(F32) * read_half(b, 0)[:, None] + read_half(b, 2)[:, None]


def per_element(v, size):
    """Sub-block values (n, 256 / size) repeated for each of their elements."""
    return np.repeat(v, size, axis=1)


def dq_q2_k(b):
    d, dmin = read_half(b, 80), read_half(b, 82)
    sc = b[:, :16].astype(np.int32)
    bi, sh = two_bit_index()
    q = bits_at(b[:, 16:80], bi, sh, 3)
    dl = (d[:, None] * (sc & 15).astype(F32)).astype(F32)
    ml = (dmin[:, None] * (sc >> 4).astype(F32)).astype(F32)
    return per_element(dl, 16) * q.astype(F32) - per_element(ml, 16)


def dq_q3_k(b):
    d = read_half(b, 108)
    s = b[:, 96:108].astype(np.int32)
    sc = np.zeros((len(b), 16), np.int32)
    for i in range(16):
        low = s[:, i] & 15 if i < 8 else s[:, i - 8] >> 4
        sc[:, i] = (low | ((s[:, 8 + i % 4] >> (2 * (i // 4))) & 3) << 4) - 32
    bi, sh = two_bit_index()
    e = np.arange(256)
    q = bits_at(b[:, 32:96], bi, sh, 3) - 4 * (1 - bits_at(b[:, :32], e % 32, e // 32, 1))
    dl = (d[:, None] * sc.astype(F32)).astype(F32)
    return per_element(dl, 16) * q.astype(F32)


def dq_k4(b, q):
    d, dmin = read_half(b, 0), read_half(b, 2)
    sc, m = unpack_k4_scales(b[:, 4:16])
    d1 = (d[:, None] * sc.astype(F32)).astype(F32)
    m1 = (dmin[:, None] * m.astype(F32)).astype(F32)
    return per_element(d1, 32) * q.astype(F32) - per_element(m1, 32)


def dq_q4_k(b):
    bi, sh = nibble_index()
    return dq_k4(b, bits_at(b[:, 16:144], bi, sh, 15))


def dq_q5_k(b):
    bi, sh = nibble_index()
    e = np.arange(256)
    q = bits_at(b[:, 48:176], bi, sh, 15) + 16 * bits_at(b[:, 16:48], e % 32, e // 32, 1)
    return dq_k4(b, q)


def dq_q6_k(b):
    d = read_half(b, 208)
    lb, ls, hb, hs = q6_k_index()
    q = (bits_at(b[:, :128], lb, ls, 15) | bits_at(b[:, 128:192], hb, hs, 3) << 4) - 32
    dl = (d[:, None] * b[:, 192:208].view(np.int8).astype(F32)).astype(F32)
    return per_element(dl, 16) * q.astype(F32)


QUANT = {"Q8_0": (q8_0, dq_q8_0), "Q4_0": (q4_0, dq_q4_0), "Q4_1": (q4_1, dq_q4_1), "Q5_0": (q5_0, dq_q5_0),
         "Q5_1": (q5_1, dq_q5_1), "Q2_K": (q2_k, dq_q2_k), "Q3_K": (q3_k, dq_q3_k), "Q4_K": (q4_k, dq_q4_k),
         "Q5_K": (q5_k, dq_q5_k), "Q6_K": (q6_k, dq_q6_k)}


def encode(x, tname):
    """float32 array x (row-major, rows of x.shape[-1]) as type tname: (bytes,
    what the bytes read back as, float32, same shape)."""
    x = np.ascontiguousarray(x, F32)
    if tname == "F32":
        return x.tobytes(), x
    if tname == "F16":
        h = x.astype(np.float16)
        return h.tobytes(), h.astype(F32)
    if tname == "BF16":
        u = x.view(np.uint32).astype(np.uint64)
        r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # nearest even (no NaN here)
        return r.tobytes(), (r.astype(np.uint32) << 16).view(F32).reshape(x.shape)
    _, block, nbytes = TYPES[tname]
    quant, dequant = QUANT[tname]
    b = quant(x.reshape(-1, block)).astype(np.uint8)
    assert b.shape[1] == nbytes, (tname, b.shape)
    return b.tobytes(), dequant(b).astype(F32).reshape(x.shape)


def decode(data, tname, shape):
    """The float32 values of bytes in type tname (the writer's dequantization)."""
    if tname == "F32":
        return np.frombuffer(data, F32).reshape(shape)
    if tname == "F16":
        return np.frombuffer(data, np.float16).astype(F32).reshape(shape)
    if tname == "BF16":
        return (np.frombuffer(data, np.uint16).astype(np.uint32) << 16).view(F32).reshape(shape)
    _, block, nbytes = TYPES[tname]
    return QUANT[tname][1](np.frombuffer(data, np.uint8).reshape(-1, nbytes)).astype(F32).reshape(shape)


# ---------------------------------------------------------------------------
# Hugging Face in, GGUF out

def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for key, e in header.items():
        if key == "__metadata__":
            continue
        a, b = e["data_offsets"]
        buf = data[a:b]
        if e["dtype"] == "F32":
            v = np.frombuffer(buf, F32)
        elif e["dtype"] == "F16":
            v = np.frombuffer(buf, np.float16).astype(F32)
        elif e["dtype"] == "BF16":
            v = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(F32)
        else:
            raise SystemExit(f"{path}: tensor {key} has dtype {e['dtype']}")
        name = key[len("transformer."):] if key.startswith("transformer.") else key
        out[name] = v.reshape(e["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, v in tensors.items():
        b = np.ascontiguousarray(v, F32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# GGUF name, Hugging Face name (in a layer: after "h.N."), and whether it is
# a Conv1D matrix, stored (in, out) by Hugging Face and (out, in) by GGUF
LAYER = [("attn_norm.weight", "ln_1.weight", 0), ("attn_norm.bias", "ln_1.bias", 0),
         ("attn_qkv.weight", "attn.c_attn.weight", 1), ("attn_qkv.bias", "attn.c_attn.bias", 0),
         ("attn_output.weight", "attn.c_proj.weight", 1), ("attn_output.bias", "attn.c_proj.bias", 0),
         ("ffn_norm.weight", "ln_2.weight", 0), ("ffn_norm.bias", "ln_2.bias", 0),
         ("ffn_up.weight", "mlp.c_fc.weight", 1), ("ffn_up.bias", "mlp.c_fc.bias", 0),
         ("ffn_down.weight", "mlp.c_proj.weight", 1), ("ffn_down.bias", "mlp.c_proj.bias", 0)]


def read_tokenizer(d):
    with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    tokens = [None] * len(vocab)
    for s, i in vocab.items():
        tokens[i] = s
    with open(os.path.join(d, "merges.txt"), encoding="utf-8") as f:
        merges = [line.rstrip("\r\n") for line in f if line.strip() and not line.startswith("#version")]
    return tokens, merges


def tokenizer_kvs(tokens, merges):
    eot = tokens.index("<|endoftext|>") if "<|endoftext|>" in tokens else len(tokens) - 1
    return [("tokenizer.ggml.model", STRING, "gpt2"), ("tokenizer.ggml.pre", STRING, "gpt-2"),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
            ("tokenizer.ggml.token_type", ARRAY, (I32, [3 if s == "<|endoftext|>" else 1 for s in tokens])),
            ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
            ("tokenizer.ggml.bos_token_id", U32, eot), ("tokenizer.ggml.eos_token_id", U32, eot)]


def model_kvs(cfg, ftype=0):
    C = cfg["n_embd"]
    F = cfg.get("n_inner") or 4 * C
    return [("general.architecture", STRING, "gpt2"), ("general.name", STRING, "gguf_write.py test model"),
            ("general.file_type", U32, ftype),
            ("gpt2.block_count", U32, cfg["n_layer"]), ("gpt2.context_length", U32, cfg.get("n_positions") or cfg["n_ctx"]),
            ("gpt2.embedding_length", U32, C), ("gpt2.feed_forward_length", U32, F),
            ("gpt2.attention.head_count", U32, cfg["n_head"]),
            ("gpt2.attention.layer_norm_epsilon", F32V, cfg.get("layer_norm_epsilon", 1e-5))]


def build(cfg, weights, tname, vectors=False, fallback=None, output=None):
    """GGUF tensors [(name, code, ne, data)] of a Hugging Face model (weights by
    HF name), and the Hugging Face tensors they read back as (float32)."""
    tensors, expected = [], {}

    def add(gname, hname, v, matrix, is_vector):
        stored = np.ascontiguousarray(v.T if matrix else v, F32)  # row-major, rows of ne[0]
        t = tname if not is_vector or vectors else "F32"
        if stored.shape[-1] % TYPES[t][1]:
            if not fallback:
                raise SystemExit(f"gguf_write.py: {gname}: rows of {stored.shape[-1]} are not whole {t} blocks "
                                 "(--fallback TYPE)")
            t = fallback
            if stored.shape[-1] % TYPES[t][1]:
                t = "F32"
        data, back = encode(stored, t)
        tensors.append((gname, TYPES[t][0], list(reversed(stored.shape)), data))
        expected[hname] = np.ascontiguousarray(back.T if matrix else back)

    add("token_embd.weight", "wte.weight", weights["wte.weight"], 0, False)
    add("position_embd.weight", "wpe.weight", weights["wpe.weight"], 0, True)
    for layer in range(cfg["n_layer"]):
        for gname, hname, matrix in LAYER:
            v = weights[f"h.{layer}.{hname}"]
            add(f"blk.{layer}.{gname}", f"h.{layer}.{hname}", v, matrix, v.ndim == 1)
    add("output_norm.weight", "ln_f.weight", weights["ln_f.weight"], 0, True)
    add("output_norm.bias", "ln_f.bias", weights["ln_f.bias"], 0, True)
    if output == "tied-copy":
        tensors.append(("output.weight",) + tensors[0][1:])
    elif output == "untied":
        add("output.weight", "lm_head.weight", weights["lm_head.weight"], 0, False)
    return tensors, expected


def convert(args):
    import argparse
    p = argparse.ArgumentParser(prog="gguf_write.py")
    p.add_argument("hf_dir")
    p.add_argument("out")
    p.add_argument("--type", default="F32", choices=sorted(TYPES))
    p.add_argument("--vectors", action="store_true")
    p.add_argument("--fallback", choices=sorted(TYPES))
    p.add_argument("--output", choices=["tied-copy", "untied"])
    p.add_argument("--no-tokenizer", action="store_true")
    p.add_argument("--tokenizer")
    p.add_argument("--version", type=int, default=3)
    p.add_argument("--alignment", type=int)
    p.add_argument("--expected")
    a = p.parse_args(args)
    with open(os.path.join(a.hf_dir, "config.json")) as f:
        cfg = json.load(f)
    weights = read_safetensors(os.path.join(a.hf_dir, "model.safetensors"))
    tensors, expected = build(cfg, weights, a.type, a.vectors, a.fallback, a.output)
    kvs = model_kvs(cfg)
    if a.alignment:
        kvs.append(("general.alignment", U32, a.alignment))
    tokdir = a.tokenizer or a.hf_dir
    if not a.no_tokenizer:
        kvs += tokenizer_kvs(*read_tokenizer(tokdir))
    with open(a.out, "wb") as f:
        f.write(gguf_bytes(kvs, tensors, a.version, a.alignment))
    if a.expected:
        os.makedirs(a.expected, exist_ok=True)
        if a.output == "untied":
            cfg = dict(cfg, tie_word_embeddings=False)
        with open(os.path.join(a.expected, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        write_safetensors(os.path.join(a.expected, "model.safetensors"), expected)
        for name in ("vocab.json", "merges.txt"):
            shutil.copy(os.path.join(tokdir, name), os.path.join(a.expected, name))


# ---------------------------------------------------------------------------
# the fuzz seeds

SEED_MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r")]


def synthetic(C, NH, F, V, T, L=1, seed=1, untied=False):
    rng = np.random.default_rng(seed)
    cfg = {"n_layer": L, "n_head": NH, "n_embd": C, "n_inner": F, "n_positions": T, "vocab_size": V,
           "layer_norm_epsilon": 1e-5}
    w = {"wte.weight": rng.normal(0, 0.2, (V, C)), "wpe.weight": rng.normal(0, 0.05, (T, C)),
         "ln_f.weight": 1 + rng.normal(0, 0.1, C), "ln_f.bias": rng.normal(0, 0.1, C)}
    shapes = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
              "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
              "mlp.c_fc.weight": (C, F), "mlp.c_fc.bias": (F,), "mlp.c_proj.weight": (F, C),
              "mlp.c_proj.bias": (C,)}
    for layer in range(L):
        for name, shape in shapes.items():
            v = rng.normal(0, 0.1, shape)
            w[f"h.{layer}.{name}"] = 1 + v if name.startswith("ln_") and name.endswith("weight") else v
    if untied:
        w["lm_head.weight"] = rng.normal(0, 0.2, (V, C))
    return cfg, {k: np.asarray(v, F32) for k, v in w.items()}


def seed_tokenizer(repo):
    with open(os.path.join(repo, "models", "vocab.json"), encoding="utf-8") as f:
        full = json.load(f)
    tokens = [s for s, i in sorted(full.items(), key=lambda kv: kv[1]) if i < 256]
    for a, b in SEED_MERGES:
        if a + b not in tokens:
            tokens.append(a + b)
    tokens.append("<|endoftext|>")
    return tokens, [f"{a} {b}" for a, b in SEED_MERGES]


def seeds(out):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(out, exist_ok=True)

    def put(name, cfg, tensors, extra=(), version=3, alignment=None):
        kvs = model_kvs(cfg) + list(extra)
        if alignment:
            kvs.append(("general.alignment", U32, alignment))
        with open(os.path.join(out, name), "wb") as f:
            f.write(gguf_bytes(kvs, tensors, version, alignment))

    cfg, w = synthetic(8, 2, 32, 16, 4)
    put("f32", cfg, build(cfg, w, "F32")[0])
    put("f16-v2-align8", cfg, build(cfg, w, "F16")[0], version=2, alignment=8)
    put("bf16-vectors", cfg, build(cfg, w, "BF16", vectors=True)[0])
    cfg, w = synthetic(8, 2, 32, 16, 4, untied=True)
    put("f32-untied", cfg, build(cfg, w, "F32", output="untied")[0])
    cfg, w = synthetic(32, 2, 32, 16, 8)
    for t in ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"):
        put(t.lower(), cfg, build(cfg, w, t, vectors=True, fallback="F16")[0])
    cfg, w = synthetic(32, 2, 256, 16, 8)
    for t in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"):
        put(t.lower(), cfg, build(cfg, w, t, vectors=True, fallback="Q4_0")[0])
    tokens, merges = seed_tokenizer(repo)
    cfg, w = synthetic(8, 2, 32, len(tokens), 4)
    put("tokenizer-q8_0", cfg, build(cfg, w, "Q8_0", fallback="F16", output="tied-copy")[0],
        tokenizer_kvs(tokens, merges))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "seeds":
        seeds(sys.argv[2])
    else:
        convert(sys.argv[1:])

#!/bin/sh
# cli_gguf.sh - llama.cpp's GGUF files of GPT-2 (src/model/gguf.c), written
# from the test checkpoints by our own writer, tests/gguf_write.py (ggml's
# docs/gguf.md; no llama.cpp here):
#   - F32: --score and greedy generation with log-probabilities give the
#     bits of the safetensors it came from (versions 2 and 3, alignments 1,
#     32 and 64, output.weight as a copy of token_embd or its own layer), and
#     `gpt convert` gives a model.bin byte for byte the safetensors' one
#     (weights and tokenizer);
#   - F16 and BF16: the bits of the safetensors loaded with --dtype f16/bf16;
#   - Q8_0 and Q4_0 load as our Q8 and Q4, value for value: with --dtype f32
#     they are the writer's numpy dequantization exactly; Q8_0 (quantized by
#     ggml's reference rule, |q| reaching 127 in every block) equals that
#     dequantization loaded with --dtype q8, and converts to the same
#     model.bin bytes;
#   - Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, every tensor (vectors
#     too) in the type: the bits of a safetensors holding the writer's numpy
#     dequantization (a 1-layer checkpoint of 256 channels, whose rows are
#     whole super-blocks of 256, and GPT-2's first 512 tokens);
#   - --draft FILE.gguf keeps the text; the tokenizer stored in the file
#     gives tiktoken's ids (tests/fixtures/tiktoken_cases.json, one case in
#     8, with and without --special);
#   - damaged and unsupported files (cut short, huge counts, bad alignment,
#     another architecture, unknown types, ...) each refused with exit 1 and
#     one line naming the file and the field;
#   - every seed of tests/fuzz/corpus/gguf/ loads.
# Prints "cli_gguf: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), BUILD (default build), CKPT_DIR
# (default build/ckpt; `make checkpoints` writes it).
GPT=${GPT:-build/gpt}
BUILD=${BUILD:-build}
CKPT_DIR=${CKPT_DIR:-build/ckpt}
CHECK_NAME=cli_gguf
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
PY=/usr/bin/python3
WRITE="$PY tests/gguf_write.py"
TINY=$CKPT_DIR/tiny

need_python numpy
[ -f "$TINY/model.safetensors" ] || { fail "$TINY: no test checkpoint (make checkpoints)"; summary; exit 1; }
[ -x "$BUILD/tests/gen_checkpoint" ] || { fail "$BUILD/tests/gen_checkpoint is not built"; summary; exit 1; }

TEXT="The quick brown fox jumps over the lazy dog. It's 2024, and \"GGUF\" files load here."
PROMPT="Once upon a time"

# a JSON result without its stats (timings, the model's path)
# (and the top-level seed: the one a run drew when given none, which greedy runs ignore)
nostats() { $PY -c 'import json, sys; d = json.load(sys.stdin); d.pop("stats", None); d.pop("seed", None); print(json.dumps(d))'; }
# score MODEL [OPTION...]: --score --json of $TEXT
score() {
    m=$1
    shift
    "$GPT" -m "$m" -q -t 2 "$@" --score -p "$TEXT" --json 2> "$tmp/err" | nostats
}
# greedy MODEL [OPTION...]: 20 greedy tokens with their log-probabilities
greedy() {
    m=$1
    shift
    "$GPT" -m "$m" -q -t 2 "$@" -p "$PROMPT" -n 20 --temp 0 --logprobs 2 --json 2> "$tmp/err" | nostats
}
# same WHAT A B: A and B are equal and not empty
same() {
    if [ -n "$2" ] && [ "$2" = "$3" ]; then pass; else fail "$1: $(printf '%.300s' "$2") differs from $(printf '%.300s' "$3") ($(head -c 300 "$tmp/err"))"; fi
}
# has WHAT FILE TEXT: FILE holds TEXT
has() {
    if grep -qF -- "$3" "$2"; then pass; else fail "$1: no '$3' in $(head -c 600 "$2")"; fi
}

# ---------------------------------------------------------------------------
# F32: the safetensors' bits

want_score=$(score "$TINY")
want_greedy=$(greedy "$TINY")
$WRITE "$TINY" "$tmp/f32.gguf" || fail "gguf_write.py $TINY failed"
same "F32 --score" "$(score "$tmp/f32.gguf")" "$want_score"
same "F32 greedy --logprobs" "$(greedy "$tmp/f32.gguf")" "$want_greedy"
for v in "--version 2" "--alignment 1" "--alignment 64 --version 2" "--output tied-copy"; do
    # shellcheck disable=SC2086 # v is flags
    $WRITE "$TINY" "$tmp/v.gguf" $v || fail "gguf_write.py $v failed"
    same "F32 $v --score" "$(score "$tmp/v.gguf")" "$want_score"
done
"$GPT" inspect "$tmp/v.gguf" > "$tmp/inspect" 2>&1
has "output.weight a copy of token_embd: tied" "$tmp/inspect" "tie_word_embeddings true"

"$GPT" convert "$tmp/f32.gguf" "$tmp/from-gguf.bin" 2> "$tmp/err" || fail "convert F32 GGUF: $(cat "$tmp/err")"
"$GPT" convert "$TINY" "$tmp/from-st.bin" 2> "$tmp/err" || fail "convert tiny: $(cat "$tmp/err")"
if cmp -s "$tmp/from-gguf.bin" "$tmp/from-st.bin"; then pass
else fail "gpt convert of the F32 GGUF differs from the safetensors' model.bin"; fi
same "model.bin from the GGUF --score" "$(score "$tmp/from-gguf.bin")" "$want_score"

"$GPT" inspect "$tmp/f32.gguf" > "$tmp/inspect" 2>&1 || fail "inspect F32: $(cat "$tmp/inspect")"
has "inspect format" "$tmp/inspect" "format:      GGUF version 3"
has "inspect tokenizer" "$tmp/inspect" "tokenizer:   50257 tokens, 50000 merges, stored in the file"
has "inspect a matrix: Hugging Face's shape, stored one row per output" "$tmp/inspect" "blk.1.ffn_up.weight          F32   [64, 256] rows out"

# An untied output layer: tiny with its own lm_head.weight (wte / 2, exact).
$PY - "$TINY" "$tmp/untied" << 'EOF' || fail "writing the untied checkpoint failed"
import json, os, shutil, sys
sys.path.insert(0, "tests")
import gguf_write as g
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
w = g.read_safetensors(os.path.join(src, "model.safetensors"))
w["lm_head.weight"] = w["wte.weight"] / 2
g.write_safetensors(os.path.join(dst, "model.safetensors"), w)
cfg = json.load(open(os.path.join(src, "config.json")))
json.dump(dict(cfg, tie_word_embeddings=False), open(os.path.join(dst, "config.json"), "w"))
for f in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(src, f), os.path.join(dst, f))
EOF
$WRITE "$tmp/untied" "$tmp/untied.gguf" --output untied || fail "gguf_write.py --output untied failed"
same "untied output --score" "$(score "$tmp/untied.gguf")" "$(score "$tmp/untied")"
"$GPT" inspect "$tmp/untied.gguf" > "$tmp/inspect" 2>&1
has "untied output" "$tmp/inspect" "tie_word_embeddings false"

# ---------------------------------------------------------------------------
# F16, BF16: the safetensors converted at load

for t in F16 BF16; do
    d=$(echo "$t" | tr 'A-Z' 'a-z')
    $WRITE "$TINY" "$tmp/$d.gguf" --type "$t" || fail "gguf_write.py --type $t failed"
    same "$t --score" "$(score "$tmp/$d.gguf")" "$(score "$TINY" --dtype "$d")"
    same "$t greedy" "$(greedy "$tmp/$d.gguf")" "$(greedy "$TINY" --dtype "$d")"
    "$GPT" inspect "$tmp/$d.gguf" > "$tmp/inspect" 2>&1
    has "$t kept" "$tmp/inspect" "matrices:    $t (norms"
done

# ---------------------------------------------------------------------------
# Q8_0 and Q4_0: our Q8 and Q4, value for value

$WRITE "$TINY" "$tmp/q8.gguf" --type Q8_0 --expected "$tmp/q8-exp" || fail "gguf_write.py --type Q8_0 failed"
same "Q8_0 --dtype f32 = numpy dequantization" "$(score "$tmp/q8.gguf" --dtype f32)" "$(score "$tmp/q8-exp")"
same "Q8_0 = its dequantization as q8" "$(score "$tmp/q8.gguf")" "$(score "$tmp/q8-exp" --dtype q8)"
same "Q8_0 greedy = its dequantization as q8" "$(greedy "$tmp/q8.gguf")" "$(greedy "$tmp/q8-exp" --dtype q8)"
"$GPT" inspect "$tmp/q8.gguf" > "$tmp/inspect" 2>&1
has "Q8_0 loads as Q8" "$tmp/inspect" "matrices:    Q8 (norms"
has "Q8_0 listed" "$tmp/inspect" "blk.0.attn_qkv.weight        Q8_0  [64, 192] rows out"
"$GPT" convert "$tmp/q8.gguf" "$tmp/q8-gguf.bin" 2> "$tmp/err" || fail "convert Q8_0 GGUF: $(cat "$tmp/err")"
"$GPT" convert "$tmp/q8-exp" "$tmp/q8-st.bin" --dtype q8 2> "$tmp/err" || fail "convert --dtype q8: $(cat "$tmp/err")"
if cmp -s "$tmp/q8-gguf.bin" "$tmp/q8-st.bin"; then pass
else fail "gpt convert of the Q8_0 GGUF differs from its dequantization converted --dtype q8"; fi

$WRITE "$TINY" "$tmp/q4.gguf" --type Q4_0 --expected "$tmp/q4-exp" || fail "gguf_write.py --type Q4_0 failed"
same "Q4_0 --dtype f32 = numpy dequantization" "$(score "$tmp/q4.gguf" --dtype f32)" "$(score "$tmp/q4-exp")"
"$GPT" inspect "$tmp/q4.gguf" > "$tmp/inspect" 2>&1
has "Q4_0 loads as Q4" "$tmp/inspect" "matrices:    Q4 (every matrix)"

# --draft: a GGUF draft keeps the text of the plain run
plain=$("$GPT" -m "$TINY" -q -t 2 -p "$PROMPT" -n 30 --temp 0 --json 2> "$tmp/err" | nostats)
same "--draft Q8_0.gguf" "$("$GPT" -m "$TINY" -q -t 2 --draft "$tmp/q8.gguf" -p "$PROMPT" -n 30 --temp 0 --json 2> "$tmp/err" |
    nostats)" "$plain"
same "-m F32.gguf --draft Q4_0.gguf" "$("$GPT" -m "$tmp/f32.gguf" -q -t 2 --draft "$tmp/q4.gguf" -p "$PROMPT" -n 30 \
    --temp 0 --json 2> "$tmp/err" | nostats)" "$plain"

# ---------------------------------------------------------------------------
# every block type, vectors too, on rows of 256: the numpy dequantization

# GPT-2's first 512 tokens and the 256 merges that make them (merge r makes
# token 256 + r), so that the checkpoint is small
mkdir "$tmp/tok512"
$PY - "$TINY" "$tmp/tok512" << 'EOF' || fail "writing the 512-token tokenizer failed"
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
vocab = json.load(open(os.path.join(src, "vocab.json"), encoding="utf-8"))
merges = [l for l in open(os.path.join(src, "merges.txt"), encoding="utf-8") if not l.startswith("#version")]
json.dump({s: i for s, i in vocab.items() if i < 512}, open(os.path.join(dst, "vocab.json"), "w", encoding="utf-8"),
          ensure_ascii=False)
open(os.path.join(dst, "merges.txt"), "w", encoding="utf-8").write("#version: 0.2\n" + "".join(merges[:256]))
EOF
"$BUILD/tests/gen_checkpoint" "$tmp/c256" --layers 1 --embd 256 --heads 4 --ctx 64 --vocab 512 \
    --tokenizer-dir "$tmp/tok512" > /dev/null || fail "gen_checkpoint c256 failed"
for t in Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K Q8_0 Q4_0; do
    rm -rf "$tmp/exp"
    $WRITE "$tmp/c256" "$tmp/k.gguf" --type "$t" --vectors --expected "$tmp/exp" || fail "gguf_write.py --type $t failed"
    case $t in Q8_0 | Q4_0) opt="--dtype f32" ;; *) opt= ;; esac
    # shellcheck disable=SC2086 # opt is flags
    same "$t (every tensor) = numpy dequantization" "$(score "$tmp/k.gguf" $opt)" "$(score "$tmp/exp")"
done
"$GPT" inspect "$tmp/k.gguf" > /dev/null 2>&1 || fail "inspect Q4_0 c256"
rm -rf "$tmp/c256" "$tmp/exp" "$tmp/k.gguf"

# ---------------------------------------------------------------------------
# the stored tokenizer: tiktoken's ids

$PY - "$GPT" "$tmp/f32.gguf" << 'EOF' > "$tmp/tok" 2>&1
import json, subprocess, sys
gpt, model = sys.argv[1], sys.argv[2]
cases = json.load(open("tests/fixtures/tiktoken_cases.json", encoding="utf-8"))
n = bad = 0
for case in cases[::8]:
    for flag, key in (([], "ids_text"), (["--special"], "ids_special")):
        r = subprocess.run([gpt, "-m", model, "--tokenize", "--json", "--keep-newline"] + flag,
                           input=case["text"].encode("utf-8", "surrogatepass"), capture_output=True)
        got = json.loads(r.stdout) if r.returncode == 0 else r.stderr.decode(errors="replace")
        n += 1
        if got != case[key]:
            bad += 1
            print(f"tokenizer: {case['text'][:60]!r} {flag}: {got} != {case[key]}")
print(f"tokenized {n}, {bad} different")
EOF
if grep -q "^tokenized [1-9][0-9]*, 0 different" "$tmp/tok"; then pass; else fail "$(head -c 2000 "$tmp/tok")"; fi

# ---------------------------------------------------------------------------
# damaged and unsupported files: exit 1, one line naming the file and the field

mkdir "$tmp/bad"
$PY - "$tmp/bad" << 'EOF' || fail "writing the damaged files failed"
import os, struct, sys
sys.path.insert(0, "tests")
import gguf_write as g
out = sys.argv[1]
cfg, w = g.synthetic(8, 2, 32, 16, 4)
tensors = g.build(cfg, w, "F32")[0]
kvs = g.model_kvs(cfg)
cases = []

def case(name, expect, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
    cases.append(f"{name}|{expect}")

def kv_set(key, vtype, value, base=None):
    base = list(kvs if base is None else base)
    return [k for k in base if k[0] != key] + ([(key, vtype, value)] if vtype is not None else [])

good = g.gguf_bytes(kvs, tensors)
for cut in (6, 20, 30, 100, 300, 700, 1000, len(good) // 2, len(good) - 1):
    case(f"cut-{cut}", "truncated", good[:cut])
case("tensor-count", "tensor_count 4611686018427387904", good[:8] + struct.pack("<Q", 1 << 62) + good[16:])
case("kv-count", "metadata_kv_count 1099511627776", good[:16] + struct.pack("<Q", 1 << 40) + good[24:])
case("kv-count-fits", "cannot fit", good[:16] + struct.pack("<Q", 60000) + good[24:])
case("key-length", "metadata entry 0's key runs past the end", good[:24] + struct.pack("<Q", 1 << 63) + good[32:])
case("array-count", "metadata x.strings runs past the end",
     g.gguf_bytes(kvs + [("x.strings", g.ARRAY, (g.STRING, ["a"]))], tensors).replace(
         struct.pack("<IQ", g.STRING, 1) + g.gstr("a"), struct.pack("<IQ", g.STRING, 1 << 40) + g.gstr("a")))
case("nested-array", "array of arrays", g.gguf_bytes(kvs + [("x.nested", g.ARRAY, (g.ARRAY, []))], tensors))
case("value-type", "value type 13", g.gguf_bytes(kvs, tensors).replace(
     g.gstr("general.name") + struct.pack("<I", g.STRING), g.gstr("general.name") + struct.pack("<I", 13)))
case("duplicate-key", "gpt2.block_count appears twice", g.gguf_bytes(kvs + [("gpt2.block_count", g.U32, 1)], tensors))
case("alignment-3", "general.alignment 3 is not a power of two", g.gguf_bytes(kv_set("general.alignment", g.U32, 3), tensors))
case("alignment-0", "general.alignment is 0, out of range", g.gguf_bytes(kv_set("general.alignment", g.U32, 0), tensors))
case("alignment-string", "general.alignment is a string", g.gguf_bytes(kv_set("general.alignment", g.STRING, "32"), tensors))
case("arch-llama", 'general.architecture is "llama"', g.gguf_bytes(kv_set("general.architecture", g.STRING, "llama"), tensors))
case("arch-missing", "general.architecture is missing", g.gguf_bytes(kv_set("general.architecture", None, None), tensors))
case("blocks-missing", "gpt2.block_count is missing", g.gguf_bytes(kv_set("gpt2.block_count", None, None), tensors))
case("heads-3", "not a multiple of n_head 3", g.gguf_bytes(kv_set("gpt2.attention.head_count", g.U32, 3), tensors))
case("heads-kv", "head_count_kv 1 differs", g.gguf_bytes(kv_set("gpt2.attention.head_count_kv", g.U32, 1), tensors))
case("eps-string", "layer_norm_epsilon is not a float",
     g.gguf_bytes(kv_set("gpt2.attention.layer_norm_epsilon", g.STRING, "1e-5"), tensors))
case("ffn-64", "blk.0.ffn_up.weight has ne [8,32], the metadata implies [8,64]",
     g.gguf_bytes(kv_set("gpt2.feed_forward_length", g.U32, 64), tensors))
case("version-1", "GGUF version 1", good[:4] + struct.pack("<I", 1) + good[8:])
case("version-4", "GGUF version 4", good[:4] + struct.pack("<I", 4) + good[8:])
case("big-endian", "big-endian", good[:4] + struct.pack(">I", 3) + good[8:])

def retype(i, code=None, ne=None, data=None):
    t = list(tensors)
    name, c, n, d = t[i]
    t[i] = (name, c if code is None else code, n if ne is None else ne, d if data is None else data)
    return t

case("type-99", "tensor token_embd.weight has type 99", g.gguf_bytes(kvs, retype(0, code=99)))
case("type-iq2", "tensor blk.0.attn_qkv.weight has type IQ2_XXS, which gpt does not read", g.gguf_bytes(kvs, retype(4, code=16)))
case("type-f64", "tensor position_embd.weight has type F64", g.gguf_bytes(kvs, retype(1, code=28)))
case("q8-rows", "a row of 8 is not whole Q8_0 blocks of 32", g.gguf_bytes(kvs, retype(1, code=8)))
case("dims-5", "has 5 dims", g.gguf_bytes(kvs, retype(0, ne=[8, 16, 1, 1, 1])))
case("dims-overflow", "dims multiply past 2^63", g.gguf_bytes(kvs, retype(0, ne=[1 << 40, 1 << 40])))
case("dim-negative", "dims multiply past 2^63", g.gguf_bytes(kvs, retype(0, ne=[8, (1 << 64) - 16])))
offs = []
o = 0
for _, _, _, d in tensors:
    offs.append(o)
    o += (len(d) + 31) // 32 * 32
case("offset-unaligned", "offset 4 is not a multiple of the alignment 32", g.gguf_bytes(kvs, tensors, offsets=[4] + offs[1:]))
case("offset-far", "run past the data region", g.gguf_bytes(kvs, tensors, offsets=[1 << 40] + offs[1:]))
case("offset-overlap", "share bytes", g.gguf_bytes(kvs, tensors, offsets=[offs[0], offs[0]] + offs[2:]))
case("tensor-twice", "tensor blk.0.attn_norm.weight appears twice", g.gguf_bytes(kvs, tensors + [tensors[2]]))
case("tensor-missing", "tensor output_norm.bias is missing", g.gguf_bytes(kvs, [t for t in tensors if t[0] != "output_norm.bias"]))
case("tensor-layer-missing", "tensor blk.0.ffn_down.bias is missing",
     g.gguf_bytes(kvs, [t for t in tensors if t[0] != "blk.0.ffn_down.bias"]))
case("tensor-unknown", "tensor blk.0.foo.weight is not a GPT-2 tensor", g.gguf_bytes(kvs, tensors + [("blk.0.foo.weight", 0, [8], b"\0" * 32)]))
case("tensor-layer-5", "tensor blk.5.attn_norm.weight is in layer 5, but gpt2.block_count is 1",
     g.gguf_bytes(kvs, tensors + [("blk.5.attn_norm.weight", 0, [8], b"\0" * 32)]))
case("name-64", "is not 1 to 63 bytes", g.gguf_bytes(kvs, tensors + [("x" * 64, 0, [8], b"\0" * 32)]))
case("wte-1d", "token_embd.weight is not a matrix", g.gguf_bytes(kvs, retype(0, ne=[128])))

tokens, merges = g.seed_tokenizer(".")
cfg, w = g.synthetic(8, 2, 32, len(tokens), 4)
tt = g.build(cfg, w, "F32")[0]
tk = g.model_kvs(cfg) + g.tokenizer_kvs(tokens, merges)
case("tok-pre", 'tokenizer.ggml.pre is "llama-bpe"', g.gguf_bytes(kv_set("tokenizer.ggml.pre", g.STRING, "llama-bpe", tk), tt))
case("tok-model", 'tokenizer.ggml.model is "llama"', g.gguf_bytes(kv_set("tokenizer.ggml.model", g.STRING, "llama", tk), tt))
case("tok-count", "tokenizer.ggml.tokens has 262 tokens, token_embd.weight 263 rows",
     g.gguf_bytes(kv_set("tokenizer.ggml.tokens", g.ARRAY, (g.STRING, tokens[:-1]), tk), tt))
case("tok-merge", "tokenizer.ggml.merges[1]: names a token",
     g.gguf_bytes(kv_set("tokenizer.ggml.merges", g.ARRAY, (g.STRING, [merges[0], "zz qq"]), tk), tt))
case("tok-merge-space", "tokenizer.ggml.merges[0]: not two tokens",
     g.gguf_bytes(kv_set("tokenizer.ggml.merges", g.ARRAY, (g.STRING, ["ab"]), tk), tt))
case("tok-eos", "tokenizer.ggml.eos_token_id is 263, out of range",
     g.gguf_bytes(kv_set("tokenizer.ggml.eos_token_id", g.U32, 263, tk), tt))
case("tok-types", "tokenizer.ggml.token_type is not an array of int32",
     g.gguf_bytes(kv_set("tokenizer.ggml.token_type", g.ARRAY, (g.U8, [1] * len(tokens)), tk), tt))
case("tok-no-merges", "without tokenizer.ggml.merges", g.gguf_bytes(kv_set("tokenizer.ggml.merges", None, None, tk), tt))
case("tok-nul", "tokenizer.ggml.tokens[5] is not", g.gguf_bytes(
     kv_set("tokenizer.ggml.tokens", g.ARRAY, (g.STRING, tokens[:5] + ["a\0b"] + tokens[6:]), tk), tt))
with open(os.path.join(out, "cases"), "w") as f:
    f.write("\n".join(cases) + "\n")
EOF
while IFS='|' read -r name expect; do
    f=$tmp/bad/$name
    "$GPT" inspect "$f" > /dev/null 2> "$tmp/err"
    rc=$?
    lines=$(wc -l < "$tmp/err")
    if [ "$rc" = 1 ] && [ "$lines" = 1 ] && grep -qF -- "gpt: $f: " "$tmp/err" && grep -qF -- "$expect" "$tmp/err"; then pass
    else fail "$name: rc $rc, $lines lines, wanted '$expect': $(head -c 400 "$tmp/err")"; fi
done < "$tmp/bad/cases"
# through a run too, not only inspect
"$GPT" -m "$tmp/bad/arch-llama" -p hi -n 1 > /dev/null 2> "$tmp/err"
rc=$?
if [ "$rc" = 1 ] && [ "$(wc -l < "$tmp/err")" = 1 ] && grep -q 'general.architecture is "llama"' "$tmp/err"; then pass
else fail "-m another architecture: rc $rc, $(head -c 400 "$tmp/err")"; fi

# ---------------------------------------------------------------------------
# the fuzz seeds load

for f in tests/fuzz/corpus/gguf/*; do
    [ -f "$f" ] || continue
    if "$GPT" inspect "$f" > /dev/null 2> "$tmp/err"; then pass; else fail "seed $f: $(cat "$tmp/err")"; fi
done

summary

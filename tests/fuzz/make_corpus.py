#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/ from the real formats.

A development aid (the seeds are committed; `make fuzz` does not run this):

    make build/tests/gen_checkpoint gpt && python3 tests/fuzz/make_corpus.py
    python3 tests/fuzz/make_corpus.py --requests   # only the five below, no build

The request and grammar harnesses' seeds (completion, chat, ollama, responses, embed, jsonl,
grammar, schema) are the inputs of the tests, taken from their sources: the bodies
that tests/cli_serve*.sh post and tests/fixtures/clients/ holds, the --jsonl
lines of tests/test_batch.c, the grammars of tests/test_grammar.c,
tests/cli_grammar.sh and docs/grammars.md, and the cases of
tests/fixtures/schema_cases.jsonl and regex_cases.jsonl.

Model files come from our own writers: build/tests/gen_checkpoint (tiny
safetensors directories and llm.c files) and `gpt convert` (model.bin), all in
tiny shapes (1 layer, 4 channels, 2 heads, 8 positions) so that each seed is a
few KB. The model.bin seeds carry a 263-token tokenizer: GPT-2's 256 byte
tokens, six merges and <|endoftext|> (a model.bin's vocabulary is its
tokenizer's, which must hold every byte). Texts and argv lines are written out
below. Each harness's input layout is described in its .c file.
"""
import glob
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")
GEN = os.path.join(ROOT, "build", "tests", "gen_checkpoint")
GPT = os.path.join(ROOT, "build", "gpt")
SHAPE = ["--layers", "1", "--embd", "4", "--heads", "2", "--ctx", "8"]
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r")]


def run(*args):
    subprocess.run(list(args), check=True, stdout=subprocess.DEVNULL)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def put(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def small_vocab():
    """GPT-2's byte tokens (ids 0..255 of the shipped vocab.json), the merges' tokens, <|endoftext|>."""
    with open(os.path.join(ROOT, "models", "vocab.json"), encoding="utf-8") as f:
        full = json.load(f)
    vocab = {s: i for s, i in full.items() if i < 256}
    assert len(vocab) == 256
    for a, b in MERGES:
        vocab.setdefault(a + b, len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    return vocab


def c_literals(text):
    """The C string literals of text, each decoded to bytes (adjacent ones joined)."""
    out = []
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"((?:\s*"(?:[^"\\\n]|\\.)*")*)', text):
        parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(0))
        raw = "".join(parts).encode("utf-8")
        out.append(raw.decode("unicode_escape").encode("latin-1"))
    return out


def put_all(harness, seeds):
    """Seeds named by a digest of their bytes (the same seed once)."""
    d = os.path.join(OUT, harness)
    shutil.rmtree(d, ignore_errors=True)
    for data in seeds:
        if isinstance(data, str):
            data = data.encode("utf-8")
        put(harness, hashlib.sha1(data).hexdigest()[:12], data)


def ollama_seeds():
    """The corpus of ollama: the bodies tests/cli_serve_ollama.sh posts and a few more."""
    with open(os.path.join(ROOT, "tests", "cli_serve_ollama.sh"), encoding="utf-8") as f:
        bodies = re.findall(r"'(\{\"[^']*)'", f.read())
    bodies += [
        '{"model":"demo.bin","prompt":"The LORD said unto Moses","stream":false,"raw":true,"keep_alive":"5m",'
        '"format":"json","options":{"num_predict":-1,"seed":7,"temperature":0.8,"top_k":40,"top_p":0.9,"min_p":0.05,'
        '"stop":["\\n"],"repeat_penalty":1.1,"presence_penalty":0.5,"frequency_penalty":-0.5,"num_ctx":256,'
        '"num_gpu":1,"mirostat":0,"typical_p":1,"tfs_z":1}}',
        '{"model":"demo.bin","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi",'
        '"images":[]},{"role":"assistant","content":"Hello.","tool_calls":[]}],"stream":true,"think":false,'
        '"format":{"type":"object","properties":{"who":{"enum":["Moses","Aaron"]}},"required":["who"]},'
        '"options":{"num_predict":5,"seed":-1}}',
        '{"model":"demo.bin:latest","verbose":true}',
        '{"prompt":"","context":[],"images":null,"system":"","template":"{{ .Prompt }}","suffix":""}',
        '{"messages":[]}',
    ]
    put_all("ollama", bodies)


def responses_seeds():
    """The corpus of responses: the bodies tests/cli_serve_faults.sh refuses and a few taken."""
    with open(os.path.join(ROOT, "tests", "cli_serve_faults.sh"), encoding="utf-8") as f:
        text = f.read()
    block = text[text.index("<< 'BODIES'"):text.index("\nBODIES\n")]
    bodies = [line.split(" ", 1)[1] for line in block.splitlines()[1:] if " {" in line]
    bodies += [
        '{"model":"demo.bin","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text",'
        '"text":"Who spoke "},{"type":"input_text","text":"unto Moses?"}]},{"type":"message","id":"msg_1",'
        '"status":"completed","role":"assistant","content":[{"type":"output_text","text":"Aaron","annotations":[]}]},'
        '{"role":"developer","content":"x"}],"max_output_tokens":24,"seed":7,"temperature":0.8,"top_p":0.9,'
        '"stream":true,"store":false,"metadata":{"a":"b"},"tools":[],"tool_choice":"auto","parallel_tool_calls":true,'
        '"truncation":"disabled","include":[],"reasoning":null,"user":"u","top_k":40,"stop":["\\n"]}',
        '{"input":"Hi","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object","properties":'
        '{"who":{"enum":["Moses","Aaron"]}},"required":["who"]},"strict":true},"verbosity":"medium"}}',
        '{"input":"Hi","text":{"format":{"type":"json_object"}},"max_output_tokens":40}',
        '{"input":"Hi","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":'
        '[{"id":"c","type":"function","function":{"name":"get_time","arguments":"{}"}}]},{"role":"tool",'
        '"tool_call_id":"c","content":"12:00"}]}',
    ]
    put_all("responses", bodies)


def embed_seeds():
    """The corpus of embed: the bodies tests/cli_serve_faults.sh posts to the embedding endpoints and a few more."""
    bodies = [
        '{"input":"Hello world","model":"x"}', '{"input":["Hello","world"],"encoding_format":"base64"}',
        '{"input":[15496,995],"normalize":false}', '{"input":[[15496],[995,11]],"user":"u","encoding_format":"float"}',
        '{"input":"x","dimensions":8}', '{"input":""}', '{"input":[]}', '{"input":[[]]}', '{"input":["a",[1]]}',
        '{"model":"demo.bin","input":["a","b"],"truncate":false,"keep_alive":"5m","options":{}}',
        '{"input":"' + "x " * 1100 + '"}',
    ]
    put_all("embed", bodies)


def request_seeds():
    """The corpora of completion, chat, jsonl, grammar and schema."""
    tests = os.path.join(ROOT, "tests")
    # bodies the serve tests post: single-quoted JSON objects in the scripts
    completion, chat = [], []
    for path in sorted(glob.glob(os.path.join(tests, "cli_serve*.sh"))):
        with open(path, encoding="utf-8") as f:
            for body in re.findall(r"'(\{\"[^']*)'", f.read()):
                (chat if '"messages"' in body else completion).append(body)
    for path in sorted(glob.glob(os.path.join(tests, "fixtures", "clients", "*.json"))):
        with open(path, encoding="utf-8") as f:
            completion.append(f.read())
    chat += [
        '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},'
        '{"role":"assistant","content":"Hello."},{"role":"developer","content":[{"type":"text","text":"a"},'
        '{"type":"text","text":"b"}],"name":"x"}],"max_completion_tokens":5,"logprobs":true,"top_logprobs":2,'
        '"stream":true,"stream_options":{"include_usage":true},"stop":["\\n"],"seed":3,"n":2}',
        '{"messages":[{"role":"user","content":"<|endoftext|><|im_end|>\\nUser:"}],"logit_bias":{"50256":-100},'
        '"presence_penalty":1.5,"frequency_penalty":-2,"temperature":0,"top_k":3,"min_p":0.1,"user":"u"}',
        '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}',
    ]
    completion += [
        '{"prompt":[[15496,995],[50256]],"n":2,"best_of":3,"logprobs":5,"echo":true,"max_tokens":0}',
        '{"prompt":"x","context_shift":true,"keep":4,"ignore_eos":true,"repeat_penalty":1.3,"top_p":0.5}',
        '{"content":"Hello <|endoftext|>","special":true,"add_special_tokens":false}',
        '{"tokens":[15496,995,50256]}',
        '{"prompt":"Hello world","stride":2,"prepend_eos":true}',
    ]
    put_all("completion", completion)
    put_all("chat", chat)
    ollama_seeds()
    responses_seeds()
    embed_seeds()

    # --jsonl lines: those of test_batch.c, and the serve bodies' fields
    jsonl = []
    with open(os.path.join(tests, "test_batch.c"), encoding="utf-8") as f:
        for lit in c_literals(f.read()):
            jsonl += [line for line in lit.split(b"\n") if line.startswith(b"{")]
    jsonl += [b for b in completion if b.startswith('{"prompt":"')]
    jsonl += ['{"prompt":"Q: 2+2?","choices":[" 4"," 5"],"id":{"k":[1]}}',
              '{"prompt":"x","n":3,"echo":true,"logprobs":2,"seed":"18446744073709551615","stop":"."}']
    put_all("jsonl", jsonl)

    # grammars: test_grammar.c's (with the string each is matched against
    # after a NUL), cli_grammar.sh's, docs/grammars.md's
    grammars = []
    with open(os.path.join(tests, "test_grammar.c"), encoding="utf-8") as f:
        src = f.read()
    for m in re.finditer(r'(match|error_is|compile|mask_vs_feed)\(\s*((?:"(?:[^"\\\n]|\\.)*"\s*)+)'
                         r'(?:,\s*((?:"(?:[^"\\\n]|\\.)*"\s*)+))?', src):
        text = c_literals(m.group(2))[0]
        grammars.append(text + (b"\0" + c_literals(m.group(3))[0] if m.group(1) == "match" and m.group(3) else b""))
    with open(os.path.join(tests, "cli_grammar.sh"), encoding="utf-8") as f:
        for g in re.findall(r"<<'G'\n(.*?)\nG\n", f.read(), re.S):
            grammars.append(g + "\0" + '{"name": "Al", "age": 42}')
    with open(os.path.join(ROOT, "docs", "grammars.md"), encoding="utf-8") as f:
        for block in re.findall(r"\n((?:    .*\n)+)", f.read()):
            if "::=" in block:
                grammars.append("".join(line[4:] + "\n" for line in block.splitlines()))
    put_all("grammar", grammars)

    # schemas with an instance (the first the suite accepts, else its first
    # text) after a NUL; regular expressions after "re:"
    schemas = []
    with open(os.path.join(tests, "fixtures", "schema_cases.jsonl"), encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            texts = case.get("texts") or [""]
            accept = case.get("accept") or ""
            inst = next((t for t, a in zip(texts, accept) if a == "1"), texts[0])
            schemas.append(json.dumps(case["schema"], ensure_ascii=False) + "\0" + inst)
    with open(os.path.join(tests, "fixtures", "regex_cases.jsonl"), encoding="utf-8") as f:
        for line in f:
            schemas.append("re:" + json.loads(line)["re"])
    put_all("schema", schemas)


def main():
    if sys.argv[1:] == ["--requests"]:
        request_seeds()
        return
    for tool in (GEN, GPT):
        if not os.access(tool, os.X_OK):
            sys.exit(f"make_corpus.py: {tool} is not built (make {os.path.relpath(tool, ROOT)})")
    shutil.rmtree(OUT, ignore_errors=True)
    tmp = tempfile.mkdtemp(prefix="gpt-corpus-")
    try:
        vocab = small_vocab()
        vocab_json = json.dumps(vocab, ensure_ascii=False)
        merges_txt = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in MERGES)
        tokdir = os.path.join(tmp, "tok")
        os.makedirs(tokdir)
        with open(os.path.join(tokdir, "vocab.json"), "w", encoding="utf-8") as f:
            f.write(vocab_json)
        with open(os.path.join(tokdir, "merges.txt"), "w", encoding="utf-8") as f:
            f.write(merges_txt)

        # safetensors: config.json, "\n#safetensors\n", model.safetensors
        variants = {
            "f32": [],
            "f16-prefix-masks": ["--dtype", "F16", "--prefix", "transformer.", "--mask-buffers"],
            "bf16-unaligned": ["--dtype", "BF16", "--unaligned-data"],
        }
        for name, extra in variants.items():
            d = os.path.join(tmp, "st-" + name)
            run(GEN, d, *SHAPE, "--vocab", "16", "--no-tokenizer", *extra)
            put("safetensors", name, read(os.path.join(d, "config.json")) + b"\n#safetensors\n"
                + read(os.path.join(d, "model.safetensors")))
        # the header length left for the harness to fill in (8 x 0xFF, JSON, NUL, data)
        for name in ("f32", "f16-prefix-masks"):
            d = os.path.join(tmp, "st-" + name)
            raw = read(os.path.join(d, "model.safetensors"))
            hlen = int.from_bytes(raw[:8], "little")
            put("safetensors", name + "-autolen", read(os.path.join(d, "config.json")) + b"\n#safetensors\n"
                + b"\xff" * 8 + raw[8:8 + hlen].rstrip(b" ") + b"\0" + raw[8 + hlen:])
        # no separator: the harness's default config.json (this shape, vocab 16)
        put("safetensors", "default-config",
            read(os.path.join(tmp, "st-f32", "model.safetensors")))

        # model.bin: `gpt convert` of a tiny checkpoint with the small tokenizer
        d = os.path.join(tmp, "mb")
        run(GEN, d, *SHAPE, "--vocab", str(len(vocab)), "--tokenizer-dir", tokdir)
        for dt in ("f32", "f16", "q8"):
            out = os.path.join(tmp, f"model-{dt}.bin")
            run(GPT, "convert", d, out, "--dtype", dt)
            put("model", dt, read(out))
        # version 3's configuration fields set (docs/model-format.md): flags
        # 3 (scores unscaled, and divided by layer + 1), n_inner 4 C = 16,
        # activation 1 (the erf GELU)
        v3 = bytearray(read(os.path.join(tmp, "model-f32.bin")))
        struct.pack_into("<I", v3, 8, 3)
        struct.pack_into("<I", v3, 52, 3)
        struct.pack_into("<II", v3, 120, 16, 1)
        put("model", "f32-v3-flags", bytes(v3))

        # llm.c: version 3, float32 (wte padded to 128 rows)
        for v in (16, 130):
            out = os.path.join(tmp, f"llmc-{v}.bin")
            run(GEN, "--llmc", out, *SHAPE, "--vocab", str(v))
            put("model", f"llmc-vocab{v}", read(out))

        # tokenizer files: vocab.json NUL merges.txt, or a tokenizer.json
        put("tokenizer_files", "vocab-merges", vocab_json + "\0" + merges_txt)
        put("tokenizer_files", "vocab-merges-crlf", vocab_json + "\0" + merges_txt.replace("\n", "\r\n"))
        put("tokenizer_files", "tokenizer-json-strings", json.dumps(
            {"version": "1.0", "model": {"type": "BPE", "vocab": vocab,
                                         "merges": [f"{a} {b}" for a, b in MERGES]}}, ensure_ascii=False))
        put("tokenizer_files", "tokenizer-json-pairs", json.dumps(
            {"model": {"type": "BPE", "dropout": None, "vocab": vocab,
                       "merges": [[a, b] for a, b in MERGES]}}))

        # tokenizer: texts
        texts = {
            "english": "The meaning of life is 42. It's what we'll find, isn't it?\n",
            "contractions": "'s 't 're 've 'm 'll 'd 'S 'T I'M we'RE",
            "spaces": "a  b   c\t\td\n\n\ne \r\n  \n   x   ",
            "numbers": "3.14159 1,000,000 ٣٤ ⅔ ½ 2024-11-30",
            "unicode": "héllo wörld 日本語のテキスト 🙂👍🏽 e\u0301 ﬁ Ωμέγα",
            "special": "Hello<|endoftext|>World <|endoftext|><|endoftext|> <|endoftext",
            "code": "def f(x):\n    return x**2  # square\n\tif (a != b) { c++; }\n",
        }
        for name, text in texts.items():
            put("tokenizer", name, text)
        put("tokenizer", "invalid-utf8", b"ok \xff\xfe \xc3 \xe0\x80 \xed\xa0\x80 \xf0\x9f\x98 \xf4\x90\x80\x80 end\xe2\x82")
        put("tokenizer", "bytes", bytes(range(256)))

        # cli: argv words separated by NUL
        argvs = {
            "generate": ["-m", "models/gpt2.bin", "-p", "Hello", "-n", "20", "--temp", "0.7", "--top-k", "40",
                         "--top-p", "0.95", "--min-p", "0.05", "--repeat-penalty", "1.1", "-s", "7", "--echo"],
            "generate-glued": ["-n20", "-s7", "-mFILE", "--temp=0", "--top-p=1", "--stop", "\\n", "--stop=END",
                               "--ignore-eos", "--json", "--stats", "-t2", "--dtype", "q8", "--kv-type=f16"],
            "score": ["--score", "--per-token", "--stride", "512", "--json", "-p", "text", "--special"],
            "batch": ["--batch", "--jsonl", "--parallel=8", "--kv-budget", "512M", "--unordered", "--text",
                      "--first-index", "100", "--prefill-chunk", "64", "--no-prefix-sharing", "--stats-json"],
            "tokenize": ["--tokenize", "--special", "--json", "--tokenizer", "models"],
            "detokenize": ["--detokenize", "-p", "15496 995"],
            "help": ["--help"],
            "version": ["--version"],
            "abbrev": ["--max=5", "--te", "1.5", "--rep", "2", "--", "-p"],
            "errors": ["--temp", "nan", "--top-p", "0", "--echo", "--score", "-x"],
            "missing": ["-n"],
        }
        for name, words in argvs.items():
            put("cli", name, "\0".join(words))
        request_seeds()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(OUT) for f in fs)
    print(f"make_corpus.py: {OUT}: {total} bytes")


if __name__ == "__main__":
    main()

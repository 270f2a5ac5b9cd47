"""The Python package gpt (python/gpt/), each call against the gpt command's
output for the same seed and settings (`gpt -m models/demo.bin ... --json`):
create_completion's text, tokens, finish_reason, usage, seed and
log-probabilities (from a text or token ids); score (gpt --score); choose (gpt --choice);
n completions (gpt --completions);
create_completions (16 prompts through the scheduler equal 16 single
calls); create_chat_completion and apply_chat_template (gpt --chat-template,
--apply-template, per built-in template); the stream's chunks together equal the whole answer;
__call__; tokenize (gpt --tokenize) and detokenize; a Model with lora=
(an adapter written here) gives gpt --lora's bits; 4 Python threads
sharing one Model each get the single call's result; every bad argument an
exception naming the field; a missing library a clear ImportError.

Run by tests/cli_python.sh: /usr/bin/python3 -m unittest, with PYTHONPATH
python/ and GPT_LIBRARY the build's libgpt.so.0. Environment: GPT (default
build/gpt).
"""
import json
import os
import struct
import subprocess
import sys
import threading
import unittest

import gpt

GPT = os.environ.get("GPT", "build/gpt")
MODEL = "models/demo.bin"
PROMPT = "And it came to pass"


def command(*args):
    """gpt --json's object for args."""
    out = subprocess.run([GPT, "-m", MODEL, "-q", "--json", *args], capture_output=True, check=True)
    return json.loads(out.stdout)


class TestPython(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = gpt.Model(MODEL, n_threads=2)

    @classmethod
    def tearDownClass(cls):
        cls.model.close()

    def same(self, got, want):
        c = got["choices"][0]
        self.assertEqual(c["text"], want["text"])
        self.assertEqual(got["tokens"], want["tokens"])
        self.assertEqual(got["stop_reason"], want["stop_reason"])
        self.assertEqual(c["finish_reason"], {"length": "length", "context": "length"}.get(want["stop_reason"], "stop"))
        self.assertEqual(got["seed"], int(want["seed"]))
        self.assertEqual(c["logprobs"], want.get("logprobs"))
        self.assertEqual(got["usage"], {"prompt_tokens": want["prompt_tokens"], "completion_tokens": len(want["tokens"]),
                                        "total_tokens": want["prompt_tokens"] + len(want["tokens"])})
        self.assertEqual(got["object"], "text_completion")
        self.assertTrue(got["id"].startswith("cmpl-"))

    def test_issue_line(self):
        # python3 -c "import gpt; print(gpt.Model('models/demo.bin').create_completion('And it came to pass',
        # max_tokens=12, seed=2)['choices'][0]['text'])" prints the command's text
        text = self.model.create_completion(PROMPT, max_tokens=12, seed=2)["choices"][0]["text"]
        out = subprocess.run([GPT, "-m", MODEL, "-p", PROMPT, "-n", "12", "-s", "2"], capture_output=True, check=True)
        self.assertEqual(text.encode(), out.stdout)

    def test_sampling(self):
        self.same(self.model.create_completion(PROMPT, max_tokens=20, temperature=0.8, seed=1),
                  command("-p", PROMPT, "-n", "20", "--temp", "0.8", "-s", "1"))
        self.same(self.model.create_completion(PROMPT, max_tokens=16, temperature=0, seed=3),
                  command("-p", PROMPT, "-n", "16", "--temp", "0", "-s", "3"))
        self.same(self.model.create_completion(PROMPT, max_tokens=24, temperature=1.3, top_k=40, top_p=0.9, min_p=0.02,
                                               repeat_penalty=1.2, presence_penalty=0.5, frequency_penalty=-0.5,
                                               logit_bias={13: -100, 262: 3.5}, seed=5),
                  command("-p", PROMPT, "-n", "24", "--temp", "1.3", "--top-k", "40", "--top-p", "0.9", "--min-p",
                          "0.02", "--repeat-penalty", "1.2", "--presence-penalty", "0.5", "--frequency-penalty", "-0.5",
                          "--logit-bias", "13=-100", "--logit-bias", "262=3.5", "-s", "5"))

    def test_stop_logprobs_echo(self):
        self.same(self.model.create_completion(PROMPT, max_tokens=40, stop=["the", ","], seed=3),
                  command("-p", PROMPT, "-n", "40", "--stop", "the", "--stop", ",", "-s", "3"))
        self.same(self.model.create_completion(PROMPT, max_tokens=40, stop="LORD", seed=4),
                  command("-p", PROMPT, "-n", "40", "--stop", "LORD", "-s", "4"))
        self.same(self.model.create_completion(PROMPT, max_tokens=8, logprobs=3, echo=True, seed=2),
                  command("-p", PROMPT, "-n", "8", "--logprobs", "3", "--echo", "-s", "2"))
        self.same(self.model.create_completion("", max_tokens=6, logprobs=0, seed=9),
                  command("-p", "", "-n", "6", "--logprobs", "0", "-s", "9"))
        self.same(self.model.create_completion(PROMPT, max_tokens=10, seed=2 ** 64 - 1),
                  command("-p", PROMPT, "-n", "10", "-s", str(2 ** 64 - 1)))

    def test_constraints(self):
        self.same(self.model.create_completion(PROMPT, max_tokens=30, regex=r" [a-z]+( [a-z]+)*\.", seed=4),
                  command("-p", PROMPT, "-n", "30", "--regex", r" [a-z]+( [a-z]+)*\.", "-s", "4"))
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
        self.same(self.model.create_completion(PROMPT, max_tokens=40, json_schema=schema, seed=6),
                  command("-p", PROMPT, "-n", "40", "--json-schema", json.dumps(schema), "-s", "6"))
        self.same(self.model.create_completion(PROMPT, max_tokens=20, grammar='root ::= " Amen" [.!]', seed=1),
                  command("-p", PROMPT, "-n", "20", "--grammar", 'root ::= " Amen" [.!]', "-s", "1"))

    def test_token_ids(self):
        ids = [50256, 464, 1, 40, 3290]
        line = json.dumps({"prompt": ids, "seed": 3, "max_tokens": 8, "echo": True, "logprobs": 2})
        out = subprocess.run([GPT, "--batch", "--jsonl", "-q", "-m", MODEL], input=line.encode(), capture_output=True,
                             check=True)
        want = json.loads(out.stdout)
        got = self.model.create_completion(ids, max_tokens=8, seed=3, echo=True, logprobs=2)
        self.assertEqual(got["choices"][0]["text"], want["text"])
        self.assertEqual(got["tokens"], want["tokens"])
        self.assertEqual(got["choices"][0]["logprobs"], want["logprobs"])
        chunks = list(self.model.create_completion(ids, max_tokens=8, seed=3, echo=True, stream=True))
        self.assertEqual("".join(c["choices"][0]["text"] for c in chunks), want["text"])
        self.assertEqual(self.model.create_completion(self.model.tokenize(PROMPT), max_tokens=9, seed=1)["choices"],
                         self.model.create_completion(PROMPT, max_tokens=9, seed=1)["choices"])
        with self.assertRaises(ValueError):
            self.model.create_completion([], max_tokens=2)
        with self.assertRaises(ValueError):
            self.model.create_completion([50257], max_tokens=2)

    def test_score(self):
        long_text = "And the LORD spake unto Moses, saying, " * 90
        for text, kw, args in ((PROMPT + " unto Moses", {}, []), (PROMPT, {"prepend_eos": True}, ["--prepend-eos"]),
                               (long_text, {"stride": 100}, ["--stride", "100"])):
            want = command("--score", "-p", text, *args)
            got = self.model.score(text, **kw)
            for k in ("tokens", "logprobs", "sum", "perplexity"):
                self.assertEqual(got[k], want[k], k)
        with self.assertRaises(ValueError):
            self.model.score("")
        with self.assertRaises(ValueError) as cm:
            self.model.score(long_text)
        self.assertIn("context", str(cm.exception))
        with self.assertRaises(ValueError):
            self.model.score(PROMPT, stride=-1)

    def test_embed(self):
        for text, kw, args in ((PROMPT, {}, []), (PROMPT + " unto Moses", {"pooling": "last"}, ["--pooling", "last"]),
                               ("Hello", {"normalize": False}, ["--no-normalize"])):
            out = subprocess.run([GPT, "embed", "-m", MODEL, "-q", "-p", text, *args], capture_output=True, check=True)
            want = [struct.unpack("f", struct.pack("f", x))[0] for x in json.loads(out.stdout)["embedding"]]
            self.assertEqual(self.model.embed(text, **kw), want, text)
        both = self.model.create_embedding([PROMPT, "Hello"])
        self.assertEqual([d["index"] for d in both["data"]], [0, 1])
        self.assertEqual(both["data"][0]["embedding"], self.model.embed(PROMPT))
        self.assertEqual(both["usage"]["prompt_tokens"], len(self.model.tokenize(PROMPT)) + len(self.model.tokenize("Hello")))
        with self.assertRaises(ValueError):
            self.model.embed("")
        with self.assertRaises(ValueError):
            self.model.embed(PROMPT, pooling="max")

    def test_chat(self):
        msgs = [{"role": "system", "content": "You answer from the books."},
                {"role": "user", "content": "Who spoke unto Moses? <|endoftext|>"},
                {"role": "assistant", "content": " The LORD."}, {"role": "user", "content": "And then?"}]
        for template in ("gpt2", "transcript", "chatml"):
            out = subprocess.run([GPT, "-m", MODEL, "-q", "--json", "--chat-template", template, "-s", "7", "-n", "24",
                                  "--stop", "Moses"], input=json.dumps(msgs).encode(), capture_output=True, check=True)
            want = json.loads(out.stdout)
            got = self.model.create_chat_completion(msgs, chat_template=template, max_tokens=24, seed=7, stop="Moses")
            self.assertEqual(got["object"], "chat.completion")
            self.assertEqual(got["choices"][0]["message"], {"role": "assistant", "content": want["text"]})
            self.assertEqual(got["tokens"], want["tokens"])
            self.assertEqual(got["usage"]["prompt_tokens"], want["prompt_tokens"])
            chunks = list(self.model.create_chat_completion(msgs, chat_template=template, max_tokens=24, seed=7,
                                                            stop="Moses", stream=True))
            self.assertEqual(chunks[0]["choices"][0]["delta"], {"role": "assistant"})
            self.assertEqual("".join(c["choices"][0]["delta"].get("content", "") for c in chunks), want["text"])
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], got["choices"][0]["finish_reason"])
            out = subprocess.run([GPT, "--apply-template", "--chat-template", template], input=json.dumps(msgs).encode(),
                                 capture_output=True, check=True)
            self.assertEqual(self.model.apply_chat_template(msgs, template).encode(), out.stdout)
        # response_format: --json-object's bits
        out = subprocess.run([GPT, "-m", MODEL, "-q", "--json", "--chat-template", "chatml", "-s", "3", "-n", "30",
                              "--json-object"], input=json.dumps(msgs[:2]).encode(), capture_output=True, check=True)
        got = self.model.create_chat_completion(msgs[:2], chat_template="chatml", max_tokens=30, seed=3,
                                                response_format={"type": "json_object"})
        self.assertEqual(got["tokens"], json.loads(out.stdout)["tokens"])
        with self.assertRaises(ValueError) as cm:
            self.model.create_chat_completion([{"role": "tool", "content": "x"}])
        self.assertIn("tool", str(cm.exception))
        with self.assertRaises(ValueError):
            self.model.create_chat_completion([])
        with self.assertRaises(ValueError):
            self.model.create_chat_completion(msgs, chat_template="no/such/template.json")

    def test_batch(self):
        # 16 prompts through the scheduler, 4 at a time: each the single call's answer
        requests = [{"prompt": PROMPT if i % 2 else "The king said unto", "seed": 100 + i,
                     "temperature": 0.2 * (i % 8), "max_tokens": 20 if i % 3 else 33} for i in range(16)]
        requests[5]["stop"] = ["the", "of"]
        requests[7]["logprobs"] = 2
        requests[9]["echo"] = True
        requests[11]["regex"] = r" [a-z]+( [a-z]+)*\."
        got = self.model.create_completions(requests, parallel=4)
        self.assertEqual(len(got), 16)
        for req, g in zip(requests, got):
            args = dict(req)
            prompt = args.pop("prompt")
            want = self.model.create_completion(prompt, **args)
            self.assertEqual(g["choices"], want["choices"], req)
            self.assertEqual((g["tokens"], g["seed"], g["usage"]), (want["tokens"], want["seed"], want["usage"]))
        # the defaults for every prompt, and the command's bits
        got = self.model.create_completions([PROMPT, "The king said"], max_tokens=12, seed=2)
        self.assertEqual(got[0]["choices"][0]["text"], command("-p", PROMPT, "-n", "12", "-s", "2")["text"])
        self.assertEqual(got[1]["choices"][0]["text"], command("-p", "The king said", "-n", "12", "-s", "2")["text"])
        with self.assertRaises(ValueError):
            self.model.create_completions([PROMPT], temperature=-1)
        with self.assertRaises(TypeError):
            self.model.create_completions([PROMPT], stream=True)
        with self.assertRaises(TypeError):
            self.model.create_completions([{"prompt": PROMPT, "bogus": 1}])
        with self.assertRaises(ValueError):
            self.model.create_completions([PROMPT], parallel=0)

    def test_choose(self):
        choices = [" that", ", when", "x", " unto Moses"]
        args = [a for c in choices for a in ("--choice", c)]
        want = command("-p", PROMPT, *args)
        got = self.model.choose(PROMPT, choices)
        self.assertEqual(got["best"], want["best"])
        for g, w in zip(got["choices"], want["choices"]):
            self.assertEqual((g["text"], g["sum"], g["mean"], g["mean_per_byte"], g["bytes"], g["tokens"]),
                             (w["text"], w["sum"], w["mean"], w["mean_per_byte"], w["bytes"], len(w["tokens"])))
        with self.assertRaises(ValueError):
            self.model.choose(PROMPT, [])
        with self.assertRaises(ValueError):
            self.model.choose(PROMPT, ["a", ""])
        with self.assertRaises(TypeError):
            self.model.choose(PROMPT, "ab")

    def test_n(self):
        want = command("-p", PROMPT, "-n", "8", "-s", "5", "--completions", "3", "--logprobs", "1")
        got = self.model.create_completion(PROMPT, max_tokens=8, seed=5, n=3, logprobs=1)
        self.assertEqual([c["text"] for c in got["choices"]], [c["text"] for c in want["completions"]])
        self.assertEqual([c["index"] for c in got["choices"]], [0, 1, 2])
        self.assertEqual([c["logprobs"] for c in got["choices"]], [c["logprobs"] for c in want["completions"]])
        self.assertEqual(got["tokens"], [c["tokens"] for c in want["completions"]])
        self.assertEqual(got["usage"]["completion_tokens"], sum(len(c["tokens"]) for c in want["completions"]))
        with self.assertRaises(ValueError):
            self.model.create_completion(PROMPT, n=0)
        with self.assertRaises(ValueError):
            self.model.create_completion(PROMPT, n=2, stream=True)

    def test_call_and_max_tokens_none(self):
        a = self.model(PROMPT, max_tokens=12, seed=8)
        b = self.model.create_completion(PROMPT, max_tokens=12, seed=8)
        self.assertEqual(a["choices"], b["choices"])
        # None: up to the context
        self.same(self.model.create_completion(PROMPT, max_tokens=None, seed=8, stop="."),
                  command("-p", PROMPT, "-n", str(self.model.n_ctx()), "-s", "8", "--stop", "."))

    def test_stream(self):
        for kw in ({"seed": 1}, {"seed": 2, "echo": True}, {"seed": 3, "stop": ["the"]}, {"seed": 4, "logprobs": 2}):
            whole = self.model.create_completion(PROMPT, max_tokens=30, **kw)
            chunks = list(self.model.create_completion(PROMPT, max_tokens=30, stream=True, **kw))
            self.assertEqual("".join(c["choices"][0]["text"] for c in chunks), whole["choices"][0]["text"])
            self.assertTrue(all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1]))
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], whole["choices"][0]["finish_reason"])
            self.assertEqual(chunks[-1]["choices"][0]["logprobs"], whole["choices"][0]["logprobs"])
            self.assertEqual(len({c["id"] for c in chunks}), 1)
        # a stream left early stops its generation; the model goes on serving
        it = self.model.create_completion(PROMPT, max_tokens=200, seed=5, stream=True)
        first = next(it)
        it.close()
        self.assertIn("choices", first)
        self.assertEqual(self.model(PROMPT, max_tokens=5, seed=5)["choices"][0]["text"],
                         command("-p", PROMPT, "-n", "5", "-s", "5")["text"])

    def test_tokenize(self):
        text = "Hello, world: caf\u00e9 <|endoftext|>  12345\n"
        ids = self.model.tokenize(text.encode())
        out = subprocess.run([GPT, "--tokenize", "--json", "-m", MODEL, "-p", text], capture_output=True, check=True)
        self.assertEqual(ids, json.loads(out.stdout))
        self.assertEqual(self.model.tokenize(text), ids)
        self.assertEqual(self.model.detokenize(ids), text.encode())
        self.assertEqual(self.model.detokenize([]), b"")
        self.assertEqual(self.model.tokenize(b""), [])
        self.assertEqual(self.model.n_vocab(), 50257)

    def test_threads(self):
        results = [None] * 4

        def run(i):
            results[i] = self.model.create_completion(PROMPT, max_tokens=24, seed=20 + i)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i in range(4):
            self.assertEqual(results[i]["tokens"], self.model.create_completion(PROMPT, max_tokens=24, seed=20 + i)["tokens"])

    def test_interrupt(self):
        # A SIGINT taken while the library calls back (Ctrl-C during a
        # generation) stops the C call after that step: the callback turns
        # KeyboardInterrupt into its stop; the model goes on serving.
        import signal
        settings = gpt._Settings(gpt.library(), {"seed": 3, "max_tokens": 40})
        seen = []

        def on_piece(piece):
            seen.append(piece)
            if len(seen) == 3:
                signal.raise_signal(signal.SIGINT)
            return False

        # Python's Ctrl-C handler, which it leaves out when started with
        # SIGINT ignored (a background job of tests/run.sh)
        old = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            r = self.model._generate(PROMPT, settings, on_piece)
        finally:
            signal.signal(signal.SIGINT, old)
            settings.close()
        self.assertEqual(r["stop"], "cancelled")
        full = self.model.create_completion(PROMPT, max_tokens=40, seed=3)
        self.assertEqual(r["tokens"], full["tokens"][:len(r["tokens"])])
        self.assertLess(len(r["tokens"]), 40)
        # the model goes on serving: the next call is the command's
        self.assertEqual(self.model(PROMPT, max_tokens=5, seed=3)["choices"][0]["text"],
                         command("-p", PROMPT, "-n", "5", "-s", "3")["text"])

    def test_bad_arguments(self):
        m = self.model
        for kw, field in (({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"), ({"top_k": 1.5}, "top_k"),
                          ({"min_p": 2}, "min_p"), ({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"),
                          ({"logprobs": 21}, "logprobs"), ({"logit_bias": {5: 200}}, "logit_bias"),
                          ({"logit_bias": {60000: 1}}, "60000"), ({"stop": [""]}, "stop"),
                          ({"regex": "("}, "regex"), ({"grammar": "root ::= ["}, "grammar"),
                          ({"json_schema": [1]}, "json_schema"), ({"regex": "a", "grammar": "root ::= \"a\""}, "exclude"),
                          ({"presence_penalty": 3}, "presence_penalty"), ({"temperature": "0.7"}, "temperature"),
                          ({"temperature": float("nan")}, "")):
            with self.assertRaises(ValueError, msg=str(kw)) as cm:
                m.create_completion(PROMPT, max_tokens=2, **kw)
            self.assertIn(field, str(cm.exception), kw)
        with self.assertRaises(TypeError):
            m.create_completion(12)
        with self.assertRaises(TypeError):
            m.create_completion(PROMPT, temperature=True)
        with self.assertRaises(TypeError):
            m.create_completion(PROMPT, no_such_argument=1)
        with self.assertRaises(TypeError):
            m.create_completion(PROMPT, logit_bias=[1])
        with self.assertRaises(ValueError):
            m.create_completion("a\0b")
        with self.assertRaises(ValueError) as cm:
            m.create_completion(" a" * (2 * m.n_ctx()), max_tokens=1)
        self.assertIn("context", str(cm.exception))
        with self.assertRaises(TypeError):
            m.tokenize(5)
        with self.assertRaises(ValueError):
            m.detokenize([m.n_vocab()])
        with self.assertRaises(TypeError):
            m.detokenize(["a"])
        with self.assertRaises(OSError) as cm:
            gpt.Model("no/such/model.bin")
        self.assertIn("no/such/model.bin", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            gpt.Model(MODEL, dtype="f12")
        self.assertIn("dtype", str(cm.exception))
        with self.assertRaises(ValueError):
            gpt.Model(MODEL, n_threads=0)
        with self.assertRaises(TypeError):
            gpt.Model(None)

    def test_lora(self):
        # a PEFT adapter written here (every mlp.c_fc at rank 2) at scale
        # -0.5: gpt --lora's bits, through lora= and through lora_path=
        import struct
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "adapter_config.json"), "w") as f:
                json.dump({"peft_type": "LORA", "r": 2, "lora_alpha": 3, "target_modules": ["c_fc"]}, f)
            header, blobs, off = {}, [], 0
            for l in range(8):
                for name, shape in (("lora_A", [2, 128]), ("lora_B", [512, 2])):
                    n = shape[0] * shape[1]
                    b = struct.pack("<%df" % n, *[((i * 7919 + l * 31) % 101 - 50) / 200 for i in range(n)])
                    key = "base_model.model.transformer.h.%d.mlp.c_fc.%s.weight" % (l, name)
                    header[key] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
                    blobs.append(b)
                    off += len(b)
            h = json.dumps(header).encode()
            with open(os.path.join(d, "adapter_model.safetensors"), "wb") as f:
                f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
            want = command("--lora", d + ":-0.5", "-p", PROMPT, "-n", "12", "-s", "4", "--logprobs", "2")
            for kw in ({"lora": (d, -0.5)}, {"lora": [(d, -0.5)]}, {"lora_path": d, "lora_scale": -0.5}):
                with gpt.Model(MODEL, n_threads=2, **kw) as m:
                    self.same(m.create_completion(PROMPT, max_tokens=12, seed=4, logprobs=2), want)
            self.assertNotEqual(want["logprobs"], command("-p", PROMPT, "-n", "12", "-s", "4", "--logprobs", "2")["logprobs"])
            with self.assertRaises(OSError) as cm:
                gpt.Model(MODEL, lora=os.path.join(d, "nosuch"))
            self.assertIn("nosuch", str(cm.exception))
            with self.assertRaises(TypeError):
                gpt.Model(MODEL, lora=[(d, "1")])
            with self.assertRaises(ValueError) as cm:
                gpt.Model(MODEL, lora=[d] * 17)
            self.assertIn("n_lora", str(cm.exception))

    def test_missing_library(self):
        env = dict(os.environ, GPT_LIBRARY="/no/such/libgpt.so.0")
        out = subprocess.run([sys.executable, "-c", "import gpt; gpt.Model('models/demo.bin')"], env=env,
                             capture_output=True, text=True)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ImportError: gpt: libgpt.so not found: tried /no/such/libgpt.so.0", out.stderr)
        self.assertIn("GPT_LIBRARY", out.stderr)


if __name__ == "__main__":
    unittest.main()

"""gpt: GPT-2 from Python, with the gpt command's exact bits.

Pure ctypes over libgpt.so (gpt's C library, src/api/gpt.h); the standard
library alone. The surface follows llama_cpp.Llama's, so that code ports:

    import gpt
    model = gpt.Model("models/demo.bin")
    out = model.create_completion("And it came to pass", max_tokens=12, seed=2)
    print(out["choices"][0]["text"])      # what `gpt -p ... -n 12 -s 2` prints

The library is found through $GPT_LIBRARY (a path), then beside this
package (libgpt.so.0 in its directory), then on the loader's path.

The defaults are gpt's, not llama_cpp's: temperature 1.0, top_p 1.0,
top_k 0 (off), min_p 0 (off), repeat_penalty 1.0, a seed drawn at random
(the result's "seed" says which). docs/library.md says what the C calls do.
"""
import ctypes
import ctypes.util
import json
import math
import os
import queue
import threading
import time
import uuid

__all__ = ["Model", "GptError", "library"]


class GptError(Exception):
    """A failure of libgpt: .code is its gpt_status, the message its line."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Err(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("message", ctypes.c_char * 512)]


class _Message(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class _Chat:
    """A conversation to answer: its template and its messages as gpt_message."""

    def __init__(self, template, messages):
        if template is not None and not isinstance(template, (str, os.PathLike)):
            raise TypeError("chat_template must be a name or a path, not %s" % type(template).__name__)
        if not isinstance(messages, (list, tuple)) or not messages:
            raise ValueError("messages must be a non-empty list of {\"role\", \"content\"}")
        self.template = os.fspath(template).encode() if template is not None else None
        self.array = (_Message * len(messages))()
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ValueError("messages[%d] must be a dict with a \"role\"" % i)
            content = m.get("content", "")
            if isinstance(content, list):  # OpenAI's parts: the texts joined
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
            if not isinstance(content, str) or "\0" in content:
                raise ValueError("messages[%d].content must be a string without NUL" % i)
            role = "system" if m["role"] == "developer" else m["role"]
            self.array[i].role, self.array[i].content = role.encode(), content.encode()


class _ChoiceScore(ctypes.Structure):
    _fields_ = [("sum", ctypes.c_double), ("mean", ctypes.c_double), ("mean_per_byte", ctypes.c_double),
                ("tokens", ctypes.c_size_t), ("bytes", ctypes.c_size_t)]


class _Lora(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("scale", ctypes.c_double)]


class _ModelOptions(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_char_p), ("n_threads", ctypes.c_int), ("kv_type", ctypes.c_char_p),
                ("tokenizer", ctypes.c_char_p), ("tune", ctypes.c_char_p), ("lora", ctypes.POINTER(_Lora)),
                ("n_lora", ctypes.c_size_t)]


def _loras(lora, lora_path, lora_scale):
    """lora (a path, a (path, scale) pair, or a list of them) and
    llama_cpp's lora_path / lora_scale, as gpt_lora entries"""
    items = [] if lora is None else list(lora) if isinstance(lora, list) else [lora]
    if lora_path is not None:
        items.append((lora_path, lora_scale))
    out = (_Lora * max(1, len(items)))()
    for i, it in enumerate(items):
        path, scale = it if isinstance(it, tuple) and len(it) == 2 else (it, 1.0)
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError("lora[%d] must be a path or a (path, scale) pair, not %s" % (i, type(it).__name__))
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise TypeError("lora[%d]'s scale must be a number, not %s" % (i, type(scale).__name__))
        out[i].path, out[i].scale = os.fspath(path).encode(), float(scale)
    return out, len(items)


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t,
                             ctypes.c_int32)
_OK, _ERR_ARGUMENT, _ERR_SETTING, _ERR_MODEL, _ERR_INPUT, _ERR_MEMORY = 0, 1, 2, 3, 4, 5
_STOP_CANCELLED = 100
_ABI = 0  # GPT_ABI_VERSION this package speaks


def _candidates():
    env = os.environ.get("GPT_LIBRARY")
    if env:
        return [env]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgpt.so.0")
    found = ctypes.util.find_library("gpt")
    return [p for p in (here if os.path.exists(here) else None, found, "libgpt.so.0") if p]


def _load():
    tried = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        break
    else:
        raise ImportError("gpt: libgpt.so not found: tried %s; set GPT_LIBRARY to its path, or install gpt "
                          "(make install)" % ", ".join(tried))
    P, S, I, V = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, None
    E = ctypes.POINTER(_Err)
    sigs = {
        "gpt_version": ([], ctypes.c_char_p), "gpt_abi_version": ([], I), "gpt_free": ([P], V),
        "gpt_model_options_default": ([], _ModelOptions),
        "gpt_model_open": ([ctypes.c_char_p, ctypes.POINTER(_ModelOptions), ctypes.POINTER(P), E], I),
        "gpt_model_close": ([P], V), "gpt_model_context": ([P], S), "gpt_model_vocab": ([P], S),
        "gpt_tokenize": ([P, ctypes.c_char_p, S, ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                          ctypes.POINTER(S), E], I),
        "gpt_detokenize": ([P, ctypes.POINTER(ctypes.c_int32), S, ctypes.POINTER(P), ctypes.POINTER(S), E], I),
        "gpt_settings_new": ([], P), "gpt_settings_free": ([P], V),
        "gpt_settings_set": ([P, ctypes.c_char_p, ctypes.c_char_p, E], I),
        "gpt_generate": ([P, ctypes.c_char_p, P, _CALLBACK, P, ctypes.POINTER(P), E], I),
        "gpt_generate_tokens": ([P, ctypes.POINTER(ctypes.c_int32), S, P, _CALLBACK, P, ctypes.POINTER(P), E], I),
        "gpt_batch_new": ([P, S, ctypes.POINTER(P), E], I), "gpt_batch_free": ([P], V),
        "gpt_batch_add": ([P, ctypes.c_char_p, P, _CALLBACK, P, ctypes.POINTER(S), E], I),
        "gpt_batch_run": ([P, E], I), "gpt_batch_result": ([P, S, E], P),
        "gpt_chat": ([P, ctypes.c_char_p, ctypes.POINTER(_Message), S, P, _CALLBACK, P, ctypes.POINTER(P), E], I),
        "gpt_chat_render": ([ctypes.c_char_p, ctypes.POINTER(_Message), S, I, ctypes.POINTER(P), ctypes.POINTER(S),
                             E], I),
        "gpt_score": ([P, ctypes.c_char_p, S, I, S, ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                       ctypes.POINTER(ctypes.POINTER(ctypes.c_double)), ctypes.POINTER(S), E], I),
        "gpt_embed": ([P, ctypes.c_char_p, S, ctypes.c_char_p, I, ctypes.POINTER(ctypes.POINTER(ctypes.c_float)),
                       ctypes.POINTER(S), E], I),
        "gpt_choose": ([P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), S, ctypes.POINTER(_ChoiceScore),
                        ctypes.POINTER(S), E], I),
        "gpt_result_free": ([P], V),
        "gpt_result_text": ([P, ctypes.POINTER(S)], ctypes.POINTER(ctypes.c_char)),
        "gpt_result_tokens": ([P, ctypes.POINTER(S)], ctypes.POINTER(ctypes.c_int32)),
        "gpt_result_prompt_tokens": ([P, ctypes.POINTER(S)], ctypes.POINTER(ctypes.c_int32)),
        "gpt_result_stop": ([P], I), "gpt_result_stop_reason": ([P], ctypes.c_char_p),
        "gpt_result_seed": ([P], ctypes.c_uint64), "gpt_result_logprobs_json": ([P], ctypes.c_char_p),
    }
    for name, (args, res) in sigs.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, res
    if lib.gpt_abi_version() != _ABI:
        raise ImportError("gpt: %s speaks ABI %d, this package %d" % (path, lib.gpt_abi_version(), _ABI))
    return lib


_lib = None
_lib_lock = threading.Lock()


def library():
    """The loaded libgpt (ctypes.CDLL), loaded at the first call."""
    global _lib
    with _lib_lock:
        if _lib is None:
            _lib = _load()
    return _lib


def _raise(code, err):
    msg = err.message.decode("utf-8", "replace")
    if code in (_ERR_ARGUMENT, _ERR_SETTING, _ERR_INPUT):
        raise ValueError(msg)
    if code == _ERR_MEMORY:
        raise MemoryError(msg)
    raise GptError(code, msg)


def _ids(seq):
    arr = (ctypes.c_int32 * len(seq))()
    for i, t in enumerate(seq):
        if isinstance(t, bool) or not isinstance(t, int):
            raise TypeError("token ids must be ints, not %s" % type(t).__name__)
        if not -2 ** 31 <= t < 2 ** 31:
            raise ValueError("token id %d: outside the vocabulary" % t)
        arr[i] = t
    return arr


class _Settings:
    """A gpt_settings, set from keyword values (None: not set)."""

    def __init__(self, lib, values):
        self._lib = lib
        self.ptr = lib.gpt_settings_new()
        if not self.ptr:
            raise MemoryError("gpt: out of memory")
        for name, value in values.items():
            if value is None:
                continue
            text = json.dumps(value, allow_nan=False)
            err = _Err()
            rc = lib.gpt_settings_set(self.ptr, name.encode(), text.encode(), ctypes.byref(err))
            if rc != _OK:
                self.close()
                _raise(rc, err)

    def close(self):
        if self.ptr:
            self._lib.gpt_settings_free(self.ptr)
            self.ptr = None


def _finish_reason(stop):
    # the server's finish_reason: eos, stop and grammar end as "stop"; length and context as "length"
    return {"eos": "stop", "stop": "stop", "grammar": "stop", "length": "length", "context": "length"}.get(stop)


class Model:
    """A model opened from any path `gpt -m` takes (model.bin, a Hugging Face
    directory, a .safetensors file, an llm.c checkpoint, a GGUF file).

    n_threads: the threads of a generation (None: one per core); dtype: the
    matrices converted at load ("f16", "bf16", "q8", "q6", "q4", "q4-pure";
    None as stored); kv_type "f32" or "f16"; tokenizer: a directory or
    tokenizer.json (None: the model's own, else beside it); lora: adapters
    merged at load as gpt --lora PATH:SCALE merges them (a PEFT directory or
    a llama.cpp GGUF LoRA file; a path, a (path, scale) pair, or a list of
    them), and llama_cpp's lora_path / lora_scale for one more. One Model
    may be used by many threads at once."""

    def __init__(self, model_path, n_threads=None, dtype=None, kv_type=None, tokenizer=None, verbose=False,
                 lora=None, lora_path=None, lora_scale=1.0):
        lib = self._lib = library()
        self._ptr = None
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError("model_path must be a path, not %s" % type(model_path).__name__)
        if n_threads is not None and (isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1):
            raise ValueError("n_threads must be a positive integer or None, not %r" % (n_threads,))
        opts = lib.gpt_model_options_default()
        opts.n_threads = n_threads or 0
        keep = [s.encode() if isinstance(s, str) else s for s in (dtype, kv_type, tokenizer and os.fspath(tokenizer))]
        opts.dtype, opts.kv_type, opts.tokenizer = keep
        loras, opts.n_lora = _loras(lora, lora_path, lora_scale)
        opts.lora = ctypes.cast(loras, ctypes.POINTER(_Lora))
        ptr, err = ctypes.c_void_p(), _Err()
        self.model_path = os.fspath(model_path)
        rc = lib.gpt_model_open(self.model_path.encode(), ctypes.byref(opts), ctypes.byref(ptr), ctypes.byref(err))
        if rc != _OK:
            msg = err.message.decode("utf-8", "replace")
            if rc == _ERR_MODEL:
                raise OSError(msg)
            raise ValueError(msg)
        self._ptr = ptr.value

    def close(self):
        if self._ptr:
            self._lib.gpt_model_close(self._ptr)
            self._ptr = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def n_ctx(self):
        return self._lib.gpt_model_context(self._ptr)

    def n_vocab(self):
        return self._lib.gpt_model_vocab(self._ptr)

    def tokenize(self, text, add_bos=False, special=False):
        """text (bytes, or str as UTF-8) -> token ids; GPT-2 has no BOS, and
        "<|endoftext|>" in the text is text (special=True is refused)."""
        if isinstance(text, str):
            text = text.encode("utf-8")
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError("text must be bytes or str, not %s" % type(text).__name__)
        if special:
            raise ValueError("special=True: gpt's library reads <|endoftext|> in a text as text")
        ids, n, err = ctypes.POINTER(ctypes.c_int32)(), ctypes.c_size_t(), _Err()
        rc = self._lib.gpt_tokenize(self._ptr, bytes(text), len(text), ctypes.byref(ids), ctypes.byref(n),
                                    ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        out = ids[:n.value]
        self._lib.gpt_free(ids)
        return out

    def detokenize(self, tokens):
        """token ids -> their exact bytes."""
        arr = _ids(list(tokens))
        text, n, err = ctypes.c_void_p(), ctypes.c_size_t(), _Err()
        rc = self._lib.gpt_detokenize(self._ptr, arr, len(arr), ctypes.byref(text), ctypes.byref(n),
                                      ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        out = ctypes.string_at(text.value, n.value)
        self._lib.gpt_free(text)
        return out

    def score(self, text, prepend_eos=False, stride=0):
        """gpt --score --json's answer for text (bytes, or str as UTF-8):
        {"tokens", "logprobs" (None for the first token, then each token's
        given those before it), "sum", "perplexity" (None for one token)}.
        prepend_eos: <|endoftext|> first, so the text's first token is scored
        too; stride: windows every stride tokens for a text past the context."""
        if isinstance(text, str):
            text = text.encode("utf-8")
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError("text must be bytes or str, not %s" % type(text).__name__)
        if isinstance(stride, bool) or not isinstance(stride, int) or stride < 0:
            raise ValueError("stride must be an integer >= 0, not %r" % (stride,))
        ids, lp = ctypes.POINTER(ctypes.c_int32)(), ctypes.POINTER(ctypes.c_double)()
        n, err = ctypes.c_size_t(), _Err()
        rc = self._lib.gpt_score(self._ptr, bytes(text), len(text), 1 if prepend_eos else 0, stride, ctypes.byref(ids),
                                 ctypes.byref(lp), ctypes.byref(n), ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        tokens, logprobs = ids[:n.value], lp[:n.value - 1]
        self._lib.gpt_free(ids)
        self._lib.gpt_free(lp)
        total = 0.0
        for v in logprobs:  # in order, as gpt adds them
            total += v
        return {"tokens": tokens, "logprobs": [None] + logprobs, "sum": total,
                "perplexity": math.exp(-total / len(logprobs)) if logprobs else None}

    def embed(self, text, pooling="mean", normalize=True):
        """gpt embed's vector of text (bytes, or str as UTF-8): a list of
        d_model floats, the final hidden states pooled ("mean" or "last")
        and, with normalize, of unit length; a list of texts gives a list of
        vectors (llama_cpp.Llama.embed's shapes)."""
        if isinstance(text, list):
            return [self.embed(t, pooling, normalize) for t in text]
        if isinstance(text, str):
            text = text.encode("utf-8")
        if not isinstance(text, (bytes, bytearray)):
            raise TypeError("text must be bytes, str or a list of them, not %s" % type(text).__name__)
        v, dim, err = ctypes.POINTER(ctypes.c_float)(), ctypes.c_size_t(), _Err()
        rc = self._lib.gpt_embed(self._ptr, bytes(text), len(text), pooling.encode("utf-8"), 1 if normalize else 0,
                                 ctypes.byref(v), ctypes.byref(dim), ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        out = v[:dim.value]
        self._lib.gpt_free(v)
        return out

    def create_embedding(self, input, pooling="mean", normalize=True):
        """POST /v1/embeddings' answer for input (a text or a list of them):
        {"object": "list", "data": [{"object": "embedding", "index",
        "embedding"}], "model", "usage"}."""
        texts = input if isinstance(input, list) else [input]
        data, tokens = [], 0
        for i, t in enumerate(texts):
            data.append({"object": "embedding", "index": i, "embedding": self.embed(t, pooling, normalize)})
            tokens += len(self.tokenize(t))
        return {"object": "list", "data": data, "model": self.model_path,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    def choose(self, prompt, choices):
        """Multiple choice (gpt --choice --json): {"choices": [{"index",
        "text", "sum", "mean", "tokens", "bytes", "mean_per_byte"}], "best"}:
        each choice scored as the continuation of prompt, best the largest
        sum (the lower index of equal ones)."""
        if not isinstance(prompt, str) or isinstance(choices, str) or not all(isinstance(c, str) for c in choices):
            raise TypeError("choose(prompt: str, choices: list of str)")
        arr = (ctypes.c_char_p * len(choices))(*[c.encode("utf-8") for c in choices])
        scores = (_ChoiceScore * max(len(choices), 1))()
        best, err = ctypes.c_size_t(), _Err()
        rc = self._lib.gpt_choose(self._ptr, prompt.encode("utf-8"), arr, len(choices), scores, ctypes.byref(best),
                                  ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        return {"choices": [{"index": i, "text": c, "sum": sc.sum, "mean": sc.mean, "tokens": sc.tokens,
                             "bytes": sc.bytes, "mean_per_byte": sc.mean_per_byte}
                            for i, (c, sc) in enumerate(zip(choices, scores))], "best": best.value}

    def create_completion(self, prompt, max_tokens=16, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0, stop=None,
                          seed=None, logprobs=None, echo=False, repeat_penalty=1.0, presence_penalty=0.0,
                          frequency_penalty=0.0, logit_bias=None, grammar=None, json_schema=None, regex=None,
                          stream=False, n=1):
        """A completion of prompt (a str, or a list of token ids), in OpenAI's shape (llama_cpp.Llama's):
        {"id", "object": "text_completion", "created", "model", "choices":
        [{"text", "index", "logprobs", "finish_reason"}], "usage"}, plus
        "seed". With stream=True an iterator of chunks of the same shape,
        each with a piece of the text (the last with finish_reason).
        max_tokens None: up to the context. Bad arguments raise TypeError
        or ValueError naming the field; Ctrl-C stops the generation and
        raises KeyboardInterrupt. n > 1: n completions, seeds seed, seed + 1,
        ... (gpt --completions n), decoded together; "choices" lists them,
        "tokens" and "stop_reason" are lists too."""
        if n != 1:
            return self._n_completions(prompt, n, seed, stream, dict(
                max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, stop=stop,
                logprobs=logprobs, echo=echo, repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
                frequency_penalty=frequency_penalty, logit_bias=logit_bias, grammar=grammar, json_schema=json_schema,
                regex=regex))
        if isinstance(prompt, (list, tuple)):
            prompt = _ids(prompt)  # token ids, as llama_cpp takes them
        elif not isinstance(prompt, str):
            raise TypeError("prompt must be a str or a list of token ids, not %s" % type(prompt).__name__)
        elif "\0" in prompt:
            raise ValueError("prompt holds a NUL character")
        settings = self._settings(max_tokens, temperature, top_p, top_k, min_p, stop, seed, logprobs, echo,
                                  repeat_penalty, presence_penalty, frequency_penalty, logit_bias, grammar,
                                  json_schema, regex)
        meta = {"id": "cmpl-" + uuid.uuid4().hex, "created": int(time.time()), "model": self.model_path}
        if stream:
            return self._stream(prompt, settings, meta, bool(echo))
        try:
            result = self._generate(prompt, settings, None)
        finally:
            settings.close()
        return self._completion(meta, result)

    __call__ = create_completion

    def create_completions(self, prompts, parallel=16, **kwargs):
        """Many completions at once through gpt's continuous-batching
        scheduler (gpt --batch's): each of prompts is a prompt (a str) or a
        dict {"prompt": ..., and create_completion's keyword
        arguments for it alone}; kwargs are every prompt's. Up to parallel
        sequences decode together; each answer is create_completion's for
        the same prompt and arguments, bit for bit. Returns the list of
        completions in the order of prompts."""
        if "stream" in kwargs:
            raise TypeError("create_completions takes no stream")
        if isinstance(parallel, bool) or not isinstance(parallel, int) or not 1 <= parallel <= 256:
            raise ValueError("parallel must be an integer in [1, 256], not %r" % (parallel,))
        lib, err = self._lib, _Err()
        batch = ctypes.c_void_p()
        rc = lib.gpt_batch_new(self._ptr, parallel, ctypes.byref(batch), ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        held, metas = [], []
        try:
            for item in prompts:
                args = dict(kwargs)
                if isinstance(item, dict):
                    args.update(item)
                    item = args.pop("prompt", None)
                if not isinstance(item, str):
                    raise TypeError("a batch's prompt must be a str, not %s" % type(item).__name__)
                if "\0" in item:
                    raise ValueError("prompt holds a NUL character")
                settings = self._settings(**self._defaults(args))
                held.append(settings)
                rc = lib.gpt_batch_add(batch, item.encode("utf-8"), settings.ptr, _CALLBACK(), None, None,
                                       ctypes.byref(err))
                if rc != _OK:
                    _raise(rc, err)
                metas.append({"id": "cmpl-" + uuid.uuid4().hex, "created": int(time.time()), "model": self.model_path})
            rc = lib.gpt_batch_run(batch, ctypes.byref(err))
            if rc != _OK:
                _raise(rc, err)
            out = []
            for i, meta in enumerate(metas):
                r = lib.gpt_batch_result(batch, i, ctypes.byref(err))
                if not r:
                    _raise(err.code, err)
                out.append(self._completion(meta, self._read_result(r, owned=False)))
            return out
        finally:
            lib.gpt_batch_free(batch)
            for settings in held:
                settings.close()

    def _n_completions(self, prompt, n, seed, stream, args):
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 64:
            raise ValueError("n must be an integer in [1, 64], not %r" % (n,))
        if stream:
            raise ValueError("n > 1 does not stream")
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little") & (2 ** 53 - 1)  # as gpt draws one
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2 ** 64 - n:
            raise ValueError("seed must be an integer in [0, 2^64 - n], not %r" % (seed,))
        rs = self.create_completions([{"prompt": prompt, "seed": seed + i} for i in range(n)], parallel=n, **args)
        out = rs[0]
        out["choices"] = [dict(r["choices"][0], index=i) for i, r in enumerate(rs)]
        done = sum(r["usage"]["completion_tokens"] for r in rs)
        out["usage"] = {"prompt_tokens": out["usage"]["prompt_tokens"], "completion_tokens": done,
                        "total_tokens": out["usage"]["prompt_tokens"] + done}
        out["tokens"] = [r["tokens"] for r in rs]
        out["stop_reason"] = [r["stop_reason"] for r in rs]
        out["seed"] = seed
        return out

    def _defaults(self, args):
        """create_completion's keyword arguments (less prompt and stream) with
        its defaults, as _settings takes them; an unknown one is a TypeError."""
        names = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "seed", "logprobs", "echo",
                 "repeat_penalty", "presence_penalty", "frequency_penalty", "logit_bias", "grammar", "json_schema",
                 "regex")
        defaults = {"max_tokens": 16, "temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "echo": False,
                    "repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}
        for k in args:
            if k not in names:
                raise TypeError("create_completions() got an unexpected keyword argument %r" % k)
        return {k: args.get(k, defaults.get(k)) for k in names}

    def create_chat_completion(self, messages, chat_template=None, max_tokens=None, temperature=1.0, top_p=1.0,
                               top_k=0, min_p=0.0, stop=None, seed=None, repeat_penalty=1.0, presence_penalty=0.0,
                               frequency_penalty=0.0, logit_bias=None, grammar=None, json_schema=None, regex=None,
                               response_format=None, stream=False):
        """The assistant's answer to messages (OpenAI's [{"role", "content"}])
        rendered with chat_template (a built-in, "gpt2" (None), "transcript",
        "chatml", or a template file; docs/chat.md), its stops after stop's:
        gpt serve's /v1/chat/completions answer, {"id", "object":
        "chat.completion", "created", "model", "choices": [{"index",
        "message": {"role": "assistant", "content"}, "logprobs": None,
        "finish_reason"}], "usage"}, plus "seed"; with stream=True chunks
        ("chat.completion.chunk", a "delta" each). response_format:
        {"type": "json_object"} or {"type": "json_schema", "json_schema":
        {"schema": ...}}."""
        chat = _Chat(chat_template, messages)
        settings = self._settings(max_tokens, temperature, top_p, top_k, min_p, stop, seed, None, False,
                                  repeat_penalty, presence_penalty, frequency_penalty, logit_bias, grammar,
                                  json_schema, regex, response_format)
        meta = {"id": "chatcmpl-" + uuid.uuid4().hex, "created": int(time.time()), "model": self.model_path}
        if stream:
            return self._stream(chat, settings, meta, False)
        try:
            r = self._generate(chat, settings, None)
        finally:
            settings.close()
        out = self._completion(meta, r)
        out["object"] = "chat.completion"
        out["choices"] = [{"index": 0, "message": {"role": "assistant", "content": r["text"]}, "logprobs": None,
                           "finish_reason": _finish_reason(r["stop"])}]
        return out

    def apply_chat_template(self, messages, chat_template=None, add_generation_prompt=True):
        """The prompt messages render to (gpt --apply-template)."""
        chat = _Chat(chat_template, messages)
        text, n, err = ctypes.c_void_p(), ctypes.c_size_t(), _Err()
        rc = self._lib.gpt_chat_render(chat.template, chat.array, len(chat.array), 1 if add_generation_prompt else 0,
                                       ctypes.byref(text), ctypes.byref(n), ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        out = ctypes.string_at(text.value, n.value)
        self._lib.gpt_free(text)
        return out.decode("utf-8")

    def _settings(self, max_tokens, temperature, top_p, top_k, min_p, stop, seed, logprobs, echo, repeat_penalty,
                  presence_penalty, frequency_penalty, logit_bias, grammar, json_schema, regex, response_format=None):
        """The keyword arguments as a gpt_settings: each through the table."""
        if isinstance(stop, str):
            stop = [stop] if stop else None
        elif stop is not None:
            stop = list(stop) or None
        if logit_bias is not None:
            if not isinstance(logit_bias, dict):
                raise TypeError("logit_bias must be a dict {token id: bias}")
            logit_bias = {str(int(k)): v for k, v in logit_bias.items()}
        if isinstance(json_schema, str):
            json_schema = json.loads(json_schema)
        if max_tokens is None or (isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens <= 0):
            max_tokens = self.n_ctx()  # llama_cpp's: up to the context
        values = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "top_k": top_k,
                  "min_p": min_p, "repeat_penalty": repeat_penalty, "presence_penalty": presence_penalty,
                  "frequency_penalty": frequency_penalty, "logit_bias": logit_bias, "stop": stop,
                  "seed": seed if seed is None or seed < 2 ** 53 else str(seed), "logprobs": logprobs,
                  "echo": bool(echo) or None, "grammar": grammar, "json_schema": json_schema, "regex": regex,
                  "response_format": response_format}
        for k, v in values.items():
            if isinstance(v, bool) and k != "echo":
                raise TypeError("%s must be a number, not a bool" % k)
        return _Settings(self._lib, values)

    def _generate(self, prompt, settings, on_piece):
        """gpt_generate; on_piece(bytes) per step (None: none). Returns the
        result's fields; KeyboardInterrupt during it stops it and is raised."""
        state = {"interrupted": False, "error": None}

        def callback(user, text, n, token):
            try:
                if state["interrupted"]:
                    return 1
                if on_piece is not None and n:
                    if on_piece(ctypes.string_at(text, n)):
                        state["interrupted"] = True
                        return 1
                return 0
            except KeyboardInterrupt:
                state["interrupted"] = True
                return 1
            except BaseException as e:  # raised after the call returns
                state["error"] = e
                return 1

        cb = _CALLBACK(callback)
        res, err = ctypes.c_void_p(), _Err()
        if isinstance(prompt, _Chat):
            rc = self._lib.gpt_chat(self._ptr, prompt.template, prompt.array, len(prompt.array), settings.ptr, cb, None,
                                    ctypes.byref(res), ctypes.byref(err))
        elif isinstance(prompt, str):
            rc = self._lib.gpt_generate(self._ptr, prompt.encode("utf-8"), settings.ptr, cb, None, ctypes.byref(res),
                                        ctypes.byref(err))
        else:
            rc = self._lib.gpt_generate_tokens(self._ptr, prompt, len(prompt), settings.ptr, cb, None,
                                               ctypes.byref(res), ctypes.byref(err))
        if rc != _OK:
            _raise(rc, err)
        out = self._read_result(res.value, owned=True)
        if state["error"] is not None:
            raise state["error"]
        if state["interrupted"] and on_piece is None:
            raise KeyboardInterrupt
        return out

    def _read_result(self, r, owned):
        """A gpt_result's fields (freed when owned)."""
        lib = self._lib
        try:
            n = ctypes.c_size_t()
            text = lib.gpt_result_text(r, ctypes.byref(n))
            out = {"text": ctypes.string_at(text, n.value).decode("utf-8"), "stop": lib.gpt_result_stop_reason(r).decode(),
                   "seed": lib.gpt_result_seed(r)}
            ids = lib.gpt_result_tokens(r, ctypes.byref(n))
            out["tokens"] = ids[:n.value]
            ids = lib.gpt_result_prompt_tokens(r, ctypes.byref(n))
            out["prompt_tokens"] = ids[:n.value]
            lp = lib.gpt_result_logprobs_json(r)
            out["logprobs"] = json.loads(lp) if lp else None
        finally:
            if owned:
                lib.gpt_result_free(r)
        return out

    def _completion(self, meta, r):
        choice = {"text": r["text"], "index": 0, "logprobs": r["logprobs"], "finish_reason": _finish_reason(r["stop"])}
        n_prompt, n_gen = len(r["prompt_tokens"]), len(r["tokens"])
        return {"id": meta["id"], "object": "text_completion", "created": meta["created"], "model": meta["model"],
                "choices": [choice], "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_gen,
                                               "total_tokens": n_prompt + n_gen},
                "seed": r["seed"], "tokens": r["tokens"], "stop_reason": r["stop"]}

    def _stream(self, prompt, settings, meta, echo):
        """The generation on a thread of its own; its pieces through a queue.
        Closing the iterator (or Ctrl-C while waiting) stops it."""
        pieces, cancel = queue.Queue(), threading.Event()
        pending = bytearray()

        def on_piece(b):
            pieces.put(b)
            return cancel.is_set()

        def run():
            try:
                pieces.put(("done", self._generate(prompt, settings, on_piece)))
            except BaseException as e:
                pieces.put(("error", e))

        chat = isinstance(prompt, _Chat)

        def chunk(text, finish=None, logprobs=None):
            c = {"id": meta["id"], "object": "text_completion", "created": meta["created"], "model": meta["model"],
                 "choices": [{"text": text, "index": 0, "logprobs": logprobs, "finish_reason": finish}]}
            if chat:  # OpenAI's chat chunk: a delta, the role in the first
                c["object"] = "chat.completion.chunk"
                c["choices"] = [{"index": 0, "delta": {"content": text} if text or finish is None else {},
                                 "logprobs": None, "finish_reason": finish}]
            return c

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        try:
            if chat:
                first = chunk("")
                first["choices"][0]["delta"] = {"role": "assistant"}
                yield first
            if echo:
                yield chunk(prompt if isinstance(prompt, str) else self.detokenize(prompt).decode("utf-8", "replace"))
            while True:
                try:
                    item = pieces.get(timeout=0.1)
                except queue.Empty:
                    continue
                if isinstance(item, bytes):
                    pending.extend(item)  # whole UTF-8 characters, held back only at a stop string's start
                    text = pending.decode("utf-8", "replace")
                    pending.clear()
                    yield chunk(text)
                    continue
                kind, value = item
                if kind == "error":
                    raise value
                if cancel.is_set():
                    return
                yield chunk("", _finish_reason(value["stop"]), value["logprobs"])
                return
        finally:
            cancel.set()
            worker.join()
            settings.close()

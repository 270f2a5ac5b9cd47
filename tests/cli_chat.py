"""cli_chat.py - the checks of tests/cli_chat.sh (which documents them).

Run by cli_chat.sh with GPT and MODEL set; prints "cli_chat: N passed, M
failed" and exits non-zero on a failure. Every answer is compared with the
command's own single run (gpt --chat-template T -p MESSAGES -s SEED), never
with recorded output; the terminal checks wait for what gpt writes (with a
deadline), never for a fixed time.
"""
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

GPT = os.environ.get("GPT", "build/gpt")
MODEL = os.environ.get("MODEL", "models/demo.bin")
NAME = "cli_chat"
passed = 0
failed = 0
tmp = tempfile.mkdtemp(prefix="cli_chat.")


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"{NAME}: {what}", flush=True)
    return ok


def gpt(args, stdin=b""):
    p = subprocess.run([GPT] + args, input=stdin, capture_output=True, timeout=300)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def chat(template, lines, extra=()):
    args = ["chat", "-m", MODEL, "--chat-template", template, "--json", "-q"] + list(extra)
    return gpt(args, ("\n".join(lines) + "\n").encode())


def single(template, messages, seed, extra=()):
    args = ["-m", MODEL, "--chat-template", template, "-p", json.dumps(messages), "-s", str(seed),
            "--json", "-q"] + list(extra)
    rc, out, err = gpt(args)
    if not check(rc == 0, f"single run {template} seed {seed}: exit {rc}: {err}"):
        return None
    return json.loads(out)


def lcp(a, b):
    n = 0
    while n < len(a) and n < len(b) and a[n] == b[n]:
        n += 1
    return n


def user_text(line):
    return line[1:] if line.startswith("//") else line


# ----------------------------------------------------------------------------
# a transcript on stdin against single runs, bit for bit

QA = os.path.join(tmp, "qa.json")
with open(QA, "w") as f:
    json.dump({"system": {"prefix": "", "suffix": "\n\n"}, "user": {"prefix": "Q: ", "suffix": "\n"},
               "assistant": {"prefix": "A: ", "suffix": "\n"}, "generation_prompt": "A:",
               "stop": ["\nQ:", "\n\n"]}, f)
STOPS = {"gpt2": [], "transcript": ["\\nUser:", "\\nSystem:"], "chatml": ["<|im_end|>"], QA: ["\\nQ:", "\\n\\n"]}

LINES = ["Hello there", "Tell me of the sea, é and 雪.", "//slash, a message", "And then?"]
SEED, N = 11, 20


def transcript(template, sharing=True):
    save = os.path.join(tmp, "saved.json")
    extra = ["-s", str(SEED), "-n", str(N)] + ([] if sharing else ["--no-prefix-sharing"])
    rc, out, err = chat(template, LINES + ["/save " + save], extra)
    if not check(rc == 0, f"{template}: gpt chat exit {rc}: {err}"):
        return None, None
    turns = [json.loads(l) for l in out.decode().splitlines()]
    check(len(turns) == len(LINES), f"{template}: {len(turns)} JSON lines for {len(LINES)} turns")
    with open(save) as f:
        saved = json.load(f)
    check([m["role"] for m in saved] == ["user", "assistant"] * len(LINES), f"{template}: /save's roles {saved}")
    check([m["content"] for m in saved[0::2]] == [user_text(l) for l in LINES],
          f"{template}: /save's user messages {saved[0::2]}")
    return turns, saved


def same_turn(what, t, ref):
    return check(t["text"] == ref["text"] and t["tokens"] == ref["tokens"] and
                 t["stop_reason"] == ref["stop_reason"] and t["seed"] == ref["seed"],
                 f"{what}: chat {json.dumps(t)} != single run {json.dumps({k: ref[k] for k in ('text', 'tokens', 'stop_reason', 'seed')})}")


for template in ["gpt2", "transcript", "chatml", QA]:
    name = os.path.basename(template)
    turns, saved = transcript(template)
    if not turns:
        continue
    prev = None
    for k, t in enumerate(turns):
        check(t["turn"] == k and t["seed"] == SEED + k and t["dropped_messages"] == 0,
              f"{name} turn {k}: turn, seed or dropped_messages in {t}")
        ref = single(template, saved[:2 * k + 1], SEED + k, ["-n", str(N)])
        if not ref:
            continue
        same_turn(f"{name} turn {k}", t, ref)
        # the KV cache: the turn computes only where its prompt leaves what
        # the previous turn's cache holds (its prompt and answer, as many
        # positions as it computed); the last prompt token is always computed
        ids = ref["prompt_ids"]
        want = 0
        if prev:
            want = min(lcp(prev[0] + prev[1]["tokens"], ids), prev[1]["kv_positions"], len(ids) - 1)
        check(t["prompt_tokens"] == len(ids) and t["cached_tokens"] == want and
              t["prefill_tokens"] == len(ids) - want,
              f"{name} turn {k}: prompt {len(ids)} tokens, {want} cached expected; got {t}")
        if prev and template == "gpt2":  # its history renders as generated: the whole last prompt is reused
            check(t["cached_tokens"] >= len(prev[0]), f"{name} turn {k}: {t['cached_tokens']} cached, "
                  f"the previous prompt was {len(prev[0])} tokens")
        prev = (ids, t)
    # turn 0 is `gpt -p RENDERED --special` with the template's stops
    rc, rendered, err = gpt(["--apply-template", "--chat-template", template, "-p", json.dumps(saved[:1])])
    if check(rc == 0, f"{name}: --apply-template exit {rc}: {err}"):
        stops = sum((["--stop", s] for s in STOPS[template]), [])
        rc, out, err = gpt(["-m", MODEL, "-p", rendered.decode(), "--special", "-s", str(SEED), "-n", str(N),
                            "--json", "-q"] + stops)
        if check(rc == 0, f"{name}: gpt -p RENDERED exit {rc}: {err}"):
            same_turn(f"{name} turn 0 against -p RENDERED --special", turns[0], json.loads(out))
    # /save's file, with the next message, renders to the prompt the next
    # turn ran: --apply-template on it, tokenized, is that turn's prompt
    nxt = saved[:3]
    rc, rendered, err = gpt(["--apply-template", "--chat-template", template], json.dumps(nxt).encode())
    rc2, ids, err2 = gpt(["--tokenize", "--special", "--json", "-p", rendered.decode()])
    ref = single(template, nxt, SEED + 1, ["-n", str(N)])
    if check(rc == 0 and rc2 == 0, f"{name}: /save's file through --apply-template: {err}{err2}") and ref:
        check(json.loads(ids) == ref["prompt_ids"], f"{name}: /save's file renders to other tokens than turn 1's")
    # without prefix sharing: every prompt computed whole, the same bits
    plain, _ = transcript(template, sharing=False)
    if plain:
        check([t["text"] for t in plain] == [t["text"] for t in turns] and
              all(t["cached_tokens"] == 0 and t["prefill_tokens"] == t["prompt_tokens"] for t in plain),
              f"{name}: --no-prefix-sharing changed the answers or shared: {plain}")

# plain output: each answer, then a newline
rc, out, err = gpt(["chat", "-m", MODEL, "-s", str(SEED), "-n", str(N), "-q"], b"Hello there\nHow are you?\n")
ref0 = single("gpt2", [{"role": "user", "content": "Hello there"}], SEED, ["-n", str(N)])
if check(rc == 0, f"plain output: exit {rc}: {err}") and ref0:
    ref1 = single("gpt2", [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": ref0["text"]},
                           {"role": "user", "content": "How are you?"}], SEED + 1, ["-n", str(N)])
    if ref1:
        check(out.decode() == ref0["text"] + "\n" + ref1["text"] + "\n", f"plain output: {out!r}")

# /reset: a new conversation; the seeds go on (answer k has seed + k)
save = os.path.join(tmp, "reset.json")
rc, out, err = chat("transcript", ["Hello", "/reset", "Hello", "/save " + save], ["-s", "5", "-n", str(N)])
if check(rc == 0, f"/reset: exit {rc}: {err}"):
    turns = [json.loads(l) for l in out.decode().splitlines()]
    with open(save) as f:
        saved = json.load(f)
    check(len(saved) == 2 and saved[0]["content"] == "Hello", f"/reset: the conversation after it is {saved}")
    ref = single("transcript", [{"role": "user", "content": "Hello"}], 6, ["-n", str(N)])
    if check(len(turns) == 2, f"/reset: {len(turns)} turns") and ref:
        same_turn("the turn after /reset", turns[1], ref)
        check(turns[1]["cached_tokens"] == min(len(ref["prompt_ids"]) - 1, turns[0]["kv_positions"]),
              f"/reset: the first prompt's blocks are shared again: {turns[1]}")

# ----------------------------------------------------------------------------
# a full context (the demo model's is 256): without --context-shift the turn
# stops at it and the next one is refused; with it the oldest messages go

LONG = ["Tell me a long story", "Go on", "And then", "What next", "Finish it"]
rc, info, err = gpt(["inspect", MODEL])
context = re.search(r"(\d+) bytes for the full context of (\d+)", info.decode())  # the KV cache of n_ctx positions
context, n_ctx = context[1], context[2]
rc, out, err = chat("gpt2", LONG, ["-s", "3", "-n", "100", "--ignore-eos"])
turns = [json.loads(l) for l in out.decode().splitlines()] if out else []
check(rc == 1 and "the context is full" in err and any(t["stop_reason"] == "context" for t in turns),
      f"a full context without --context-shift: exit {rc}, {err!r}, {[t['stop_reason'] for t in turns]}")
save = os.path.join(tmp, "shift.json")
rc, out, err = chat("gpt2", LONG + ["/save " + save], ["-s", "3", "-n", "100", "--ignore-eos", "--context-shift"])
if check(rc == 0, f"--context-shift: exit {rc}: {err}"):
    turns = [json.loads(l) for l in out.decode().splitlines()]
    with open(save) as f:
        saved = json.load(f)
    check(len(turns) == len(LONG) and turns[-1]["dropped_messages"] > 0 and
          all(t["prompt_tokens"] + 100 <= 256 for t in turns), f"--context-shift: {turns}")
    for k, t in enumerate(turns):
        ref = single("gpt2", saved[t["dropped_messages"]:2 * k + 1], 3 + k,
                     ["-n", "100", "--ignore-eos", "--context-shift"])
        if ref:
            same_turn(f"--context-shift turn {k} ({t['dropped_messages']} dropped)", t, ref)
    # a --kv-budget of one context (the least a chat takes: a turn may need
    # it whole) gives the same turns, in a pool of half the default's
    rc, out, err = chat("gpt2", LONG, ["-s", "3", "-n", "100", "--ignore-eos", "--context-shift", "--kv-budget", context])
    budget = [json.loads(l) for l in out.decode().splitlines()]
    check(rc == 0 and [(t["text"], t["tokens"]) for t in budget] == [(t["text"], t["tokens"]) for t in turns],
          f"--kv-budget {context} (one context): exit {rc}, {err!r}, other turns than the default budget's")

# ----------------------------------------------------------------------------
# faults: one line, exit 1 (input) or 2 (usage); the turns before are answered


def fault(what, args, stdin, code, words, answers=None):
    rc, out, err = gpt(args, stdin)
    lines = err.strip().splitlines()
    ok = rc == code and len(lines) == 1 and all(w in err for w in words)
    if answers is not None:
        ok = ok and len(out.decode().splitlines()) == answers
    check(ok, f"{what}: exit {rc} (want {code}), stderr {err!r}, stdout {out!r}")


BADT = os.path.join(tmp, "bad.json")
with open(BADT, "w") as f:
    f.write('{"user": {"prefix": 3}}')
C = ["chat", "-m", MODEL, "-n", "4", "-q", "--json"]
fault("a template that is no built-in", C + ["--chat-template", "nosuch"], b"Hi\n", 1, ["--chat-template nosuch"])
fault("a malformed template file", C + ["--chat-template", BADT], b"Hi\n", 1, ["--chat-template", "bad.json"])
fault("an unknown command", C, b"Hi\n/frobnicate now\nHi\n", 1, ["/frobnicate", "no such command"], 1)
fault("/save without a file", C, b"Hi\n/save\n", 1, ["/save needs a file"], 1)
fault("/save into no directory", C, b"Hi\n/save /nonexistent/dir/x.json\n", 1, ["/nonexistent/dir/x.json"], 1)
fault("a line with a NUL byte", C, b"Hi\nA\0B\n", 1, ["line 2", "NUL"], 1)
# a message not valid UTF-8 would run as its bytes and be saved with U+FFFD
fault("a line not valid UTF-8", C, b"Hi\nA\xffB\n", 1, ["line 2", "not valid UTF-8", "byte 2 (0xff)"], 1)
fault("a cut character", C, b"Hi\ncaf\xc3\n", 1, ["line 2", "not valid UTF-8", "byte 4 (0xc3)"], 1)
fault("/help with an argument", C, b"Hi\n/help me\nHi\n", 1, ["/help me: /help takes no argument"], 1)
fault("/reset with an argument", C, b"Hi\n/reset now\nHi\n", 1, ["/reset now: /reset takes no argument"], 1)
fault("a line over 1 MiB", C, b"x" * (1 << 20 | 5) + b"\n", 1, ["line 1", "longer than"], 0)
fault("-p", C + ["-p", "Hi"], b"", 2, ["gpt chat:", "-p"])
fault("--score", C + ["--score"], b"", 2, ["gpt chat:", "--score"])
fault("--parallel 2", C + ["--parallel", "2"], b"", 2, ["--parallel 2", "one answer at a time"])
# a --kv-budget that cannot hold a turn's whole context: refused before a
# line is read, as --batch and gpt serve refuse less than one block
fault("--kv-budget 100K", C + ["--kv-budget", "100K"], b"Hi\n", 2,
      ["gpt chat: --kv-budget 100K: less than one block", "(see gpt chat -h)"], 0)
fault("--kv-budget 128K", C + ["--kv-budget", "128K"], b"Hi\n", 2,
      ["gpt chat: --kv-budget 128K: less than one context", f"({n_ctx} positions, {context} bytes)"], 0)
fault("--keep without --context-shift", C + ["--keep", "2"], b"", 2, ["--keep needs --context-shift"])
fault("--temp -1", C + ["--temp", "-1"], b"", 2, ["gpt chat: --temp -1", "(see gpt chat -h)"])
fault("--logit-bias x", C + ["--logit-bias", "x"], b"", 2, ["gpt chat: --logit-bias x", "(see gpt chat -h)"])
fault("--stop past the template's", C + ["--chat-template", "transcript"] + ["--stop", "x"] * 15, b"Hi\n", 1,
      ["--stop: 15 strings and the chat template's 2"])
rc, out, err = gpt(C, b"\n\n/help\n")
check(rc == 0 and out == b"" and "/save FILE" in err, f"empty lines and /help: exit {rc}, {out!r}, {err!r}")
# blanks at the end of a command line are no part of it
save = os.path.join(tmp, "blanks.json")
rc, out, err = chat("transcript", ["Hello", "/reset \t", "/help ", "Hello", f"/save \t{save} \t"], ["-s", "5", "-n", str(N)])
if check(rc == 0 and "/save FILE" in err, f"commands with blanks at the end: exit {rc}, {err!r}"):
    with open(save) as f:
        saved = json.load(f)
    check(len(saved) == 2 and saved[0]["content"] == "Hello", f"/reset with blanks: the conversation after it {saved}")

# ----------------------------------------------------------------------------
# a terminal: Ctrl-C stops the answer and the chat goes on; Ctrl-D ends it
# (exit 0); Ctrl-C twice at the prompt ends it (exit 130)


class Term:
    def __init__(self, args):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                # a terminal's program gets Ctrl-C: under a shell's `cmd &`
                # (tests/run.sh) SIGINT comes ignored, and gpt keeps an
                # ignored SIGINT ignored, as programs started so should
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.execv(GPT, [GPT] + args)
            finally:
                os._exit(127)
        self.seen = b""

    def read_until(self, done, deadline=60):
        """Reads until done() holds (True), the deadline passes or the
        terminal closes (False)."""
        end = time.monotonic() + deadline
        while not done():
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return False
            try:
                data = os.read(self.fd, 4096)
            except OSError:
                return False
            if not data:
                return False
            self.seen += data
        return True

    def wait_for(self, what, after=0, deadline=60):
        return self.read_until(lambda: what in self.seen[after:], deadline)

    def wait_bytes(self, n, deadline=60):
        return self.read_until(lambda: len(self.seen) >= n, deadline)

    def send(self, b):
        os.write(self.fd, b)

    def exit_code(self, deadline=60):
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            try:  # drain, so that gpt never blocks on a full terminal
                if select.select([self.fd], [], [], 0.1)[0]:
                    self.seen += os.read(self.fd, 4096)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        return None


save = os.path.join(tmp, "tty.json")
term = Term(["chat", "-m", MODEL, "-s", "1", "-n", "1000000", "--ignore-eos", "--context-shift"])
ok = check(term.wait_for(b"> "), f"terminal: no prompt: {term.seen!r}")
if ok:
    term.send(b"Hello\n")
    # the answer never ends by itself: once 40 bytes of it are out, Ctrl-C
    ok = check(term.wait_for(b"Hello\r\n") and term.wait_bytes(term.seen.index(b"Hello\r\n") + 7 + 40),
               f"terminal: no answer: {term.seen!r}")
if ok:
    term.send(b"\x03")
    at = len(term.seen)
    ok = check(term.wait_for(b"stopped", after=at) and term.wait_for(b"> ", after=term.seen.index(b"stopped", at)),
               f"terminal: Ctrl-C did not stop the answer: {term.seen[at:][:300]!r}")
if ok:
    at = len(term.seen)
    term.send(f"/save {save}\n".encode())
    ok = check(term.wait_for(b"saved 2 messages", after=at), f"terminal: /save after Ctrl-C: {term.seen[at:]!r}")
    if ok:
        with open(save) as f:
            saved = json.load(f)
        check(saved[0]["content"] == "Hello" and saved[1]["role"] == "assistant" and saved[1]["content"],
              f"terminal: the stopped answer is not in the conversation: {saved}")
    term.wait_for(b"> ", after=term.seen.index(b"saved 2 messages", at) if ok else at)
    term.send(b"\x04")
rc = term.exit_code()
check(rc == 0, f"terminal: Ctrl-D: exit {rc}: {term.seen[-300:]!r}")

term = Term(["chat", "-m", MODEL, "-n", "4"])
if check(term.wait_for(b"> "), f"terminal 2: no prompt: {term.seen!r}"):
    term.send(b"\x03")
    if check(term.wait_for(b"Ctrl-C again"), f"terminal 2: Ctrl-C at the prompt: {term.seen!r}"):
        term.wait_for(b"> ", after=term.seen.index(b"Ctrl-C again"))
        term.send(b"\x03")
rc = term.exit_code()
check(rc == 130, f"terminal 2: Ctrl-C twice at the prompt: exit {rc}: {term.seen[-300:]!r}")

# on a terminal a message not valid UTF-8 and a command with an argument it
# does not take are reported, the conversation as it was, and the chat goes
# on: /save then holds the one message answered
save = os.path.join(tmp, "tty3.json")
term = Term(["chat", "-m", MODEL, "-n", "4"])
ok = check(term.wait_for(b"> "), f"terminal 3: no prompt: {term.seen!r}")
for line, want in [(b"Hello", b"\n> "), (b"caf\xe9", b"not valid UTF-8"), (b"/help me", b"takes no argument"),
                   (f"/save {save}".encode(), b"saved ")]:
    if not ok:
        break
    at = len(term.seen)
    term.send(line + b"\n")
    ok = check(term.wait_for(want, after=at + len(line)) and term.wait_for(b"> ", after=term.seen.index(want, at)),
               f"terminal 3: {line!r}: {term.seen[at:]!r}")
if ok:
    with open(save) as f:
        saved = json.load(f)
    check([m["content"] for m in saved[0::2]] == ["Hello"] and len(saved) == 2,
          f"terminal 3: the refused lines changed the conversation: {saved}")
term.send(b"\x04")
rc = term.exit_code()
check(rc == 0, f"terminal 3: Ctrl-D: exit {rc}: {term.seen[-300:]!r}")

print(f"{NAME}: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)

#!/bin/sh
# cli_chat.sh - gpt chat on the demo model (docs/chat.md), the checks in
# tests/cli_chat.py:
#   - a transcript on stdin (one message a line, //x the message /x), under
#     each built-in template and a template file: one --json line per turn,
#     and turn k's text, tokens and stop reason are, bit for bit, the single
#     run `gpt --chat-template T -p MESSAGES -s SEED+k` of the conversation
#     so far (as /save wrote it); turn 0 is also `gpt -p RENDERED --special`
#     with the template's stops (RENDERED from --apply-template);
#   - the KV cache between turns: each turn's cached_tokens is exactly the
#     common prefix of its prompt's ids and the previous turn's prompt and
#     answer (as many positions as that turn computed), prefill_tokens the
#     rest; with gpt2, at least the whole previous prompt; with
#     --no-prefix-sharing none, and the same answers;
#   - /save's file with the next message through --apply-template, then
#     --tokenize, is the next turn's prompt; /reset starts again (the seeds
#     go on, the first prompt's blocks are shared again); plain output is
#     each answer and a newline;
#   - a full context: without --context-shift a turn stops with "context"
#     and the next is refused (exit 1); with it the oldest messages are
#     dropped and each turn is the single run of the messages kept;
#   - faults: a template that is no built-in or a malformed file, an unknown
#     /command, /save without a file or into no directory, a NUL byte, a
#     line over 1 MiB, too many stops (exit 1, one line, the turns before
#     answered); -p and --score (exit 2);
#   - on a pseudo-terminal (Python's pty): Ctrl-C in an answer that never
#     ends by itself stops it, the chat goes on (/save holds the stopped
#     answer), Ctrl-D exits 0; Ctrl-C twice at the prompt exits 130. Every
#     wait is for what gpt writes, with a deadline.
# Prints "cli_chat: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt).
CHECK_NAME=cli_chat
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
need /usr/bin/python3
GPT=${GPT:-build/gpt} MODEL=models/demo.bin /usr/bin/python3 tests/cli_chat.py
exit $?

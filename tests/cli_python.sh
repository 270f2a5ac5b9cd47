#!/bin/sh
# cli_python.sh - the Python package gpt (python/gpt/, ctypes over
# libgpt.so): tests/test_python.py under /usr/bin/python3 -m unittest, with
# PYTHONPATH python/ and GPT_LIBRARY the build's libgpt.so.0; each of its
# tests compares a call with the gpt command's output for the same seed
# (its docstring lists them). A library built with the sanitizers (make
# asan) is loaded with their runtime preloaded, leaks not reported (the
# interpreter's own are not gpt's).
# Prints "cli_python: N passed, M failed" (one per unittest test).
# Environment: GPT (default build/gpt), BUILD (default build).
GPT=${GPT:-build/gpt}
BUILD=${BUILD:-build}
CHECK_NAME=cli_python
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
need /usr/bin/python3
preload=""
if readelf -d "$BUILD/libgpt.so.0" | grep -q libasan; then
    preload="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi
GPT=$GPT GPT_LIBRARY=$BUILD/libgpt.so.0 PYTHONPATH=python LD_PRELOAD=$preload ASAN_OPTIONS=detect_leaks=0 \
    /usr/bin/python3 -m unittest -v tests/test_python.py > "$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
passed=$(grep -c '\.\.\. ok$' "$tmp/log")
failed=$(grep -c '\.\.\. \(FAIL\|ERROR\)$' "$tmp/log")
if [ $rc -ne 0 ] && [ "$failed" -eq 0 ]; then fail "python3 -m unittest exited $rc"; fi
if [ "$passed" -eq 0 ]; then fail "no test ran"; fi
summary

#!/bin/sh
# cli_python.sh - the Python package gpt (python/gpt/, ctypes over
# libgpt.so): tests/test_python.py under /usr/bin/python3 -m unittest, with
# PYTHONPATH python/ and GPT_LIBRARY the build's libgpt.so.0; each of its
# tests compares a call with the gpt command's output for the same seed
# (its docstring lists them). A library built with the sanitizers (make
# asan) is loaded with their runtime preloaded, leaks not reported (the
# interpreter's own are not gpt's).
# Then where the package finds the library: beside it (a copy of the
# package with libgpt.so.0 in its directory, no GPT_LIBRARY), and as make
# install leaves it (DESTDIR: the package where /usr/bin/python3 looks under
# PREFIX, the library on the loader's path): the issue's one-liner prints
# the command's text. And a venv's `pip install --no-index
# --no-build-isolation ./python` (python/build_backend.py: no network, no
# setuptools) installs a package that does the same.
# Prints "cli_python: N passed, M failed" (one per unittest test, one per
# check after it).
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
GPT=$GPT GPT_LIBRARY=$BUILD/libgpt.so.0 PYTHONPATH=python LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 \
    /usr/bin/python3 -m unittest -v tests/test_python.py > "$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
passed=$(grep -c '\.\.\. ok$' "$tmp/log")
failed=$(grep -c '\.\.\. \(FAIL\|ERROR\)$' "$tmp/log")
if [ $rc -ne 0 ] && [ "$failed" -eq 0 ]; then fail "python3 -m unittest exited $rc"; fi
if [ "$passed" -eq 0 ]; then fail "no test ran"; fi

want=$("$GPT" -m models/demo.bin -p "And it came to pass" -n 12 -s 2)
line="import gpt; print(gpt.Model('$(pwd)/models/demo.bin').create_completion('And it came to pass', max_tokens=12, seed=2)['choices'][0]['text'], end='')"
mkdir -p "$tmp/beside"
cp -r python/gpt "$tmp/beside/"
cp "$BUILD/libgpt.so.0" "$tmp/beside/gpt/"
got=$(cd "$tmp" && env -u GPT_LIBRARY PYTHONPATH="$tmp/beside" LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 \
    /usr/bin/python3 -c "$line" 2>&1)
if [ "$got" = "$want" ]; then pass; else fail "the library beside the package: [$got], gpt's [$want]"; fi
if make --no-print-directory -s install BUILD="$BUILD" DESTDIR="$tmp/root" PREFIX=/usr/local > "$tmp/install.log" 2>&1; then
    pydir=$(find "$tmp/root" -name __init__.py -path '*/gpt/*' | sed 's|/gpt/__init__.py$||')
    case "$pydir" in
    "$tmp/root/usr/local/lib/python3"*) pass ;;
    *) fail "make install put the package in '$pydir'" ;;
    esac
    got=$(cd "$tmp" && env -u GPT_LIBRARY PYTHONPATH="$pydir" LD_LIBRARY_PATH="$tmp/root/usr/local/lib" \
        LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 /usr/bin/python3 -c "$line" 2>&1)
    if [ "$got" = "$want" ]; then pass; else fail "the installed package: [$got], gpt's [$want]"; fi
else
    fail "make install DESTDIR=$tmp/root failed: $(cat "$tmp/install.log")"
fi
if ! /usr/bin/python3 -m venv "$tmp/venv" > "$tmp/venv.log" 2>&1; then
    skip_part "python3 -m venv (python3-venv): $(tail -1 "$tmp/venv.log")"
elif ! "$tmp/venv/bin/pip" install -q --no-index --no-build-isolation ./python > "$tmp/pip.log" 2>&1; then
    fail "pip install ./python: $(tail -3 "$tmp/pip.log")"
else
    lib=$(cd "$BUILD" && pwd)/libgpt.so.0
    got=$(cd "$tmp" && GPT_LIBRARY="$lib" LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 \
        "$tmp/venv/bin/python" -c "$line" 2>&1)
    if [ "$got" = "$want" ]; then pass; else fail "the package pip installed: [$got], gpt's [$want]"; fi
fi
summary

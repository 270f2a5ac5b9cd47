#!/bin/sh
# The library (the folders of the Makefile's LIB_DIRS, the one list of
# what libgpt.a holds: src/ itself and base, model, kernels, grammar)
# never prints and never exits: it returns an error (error.h) and the
# front-end decides what the user sees. A list with no folder, or a folder
# with no source, fails: the check never passes by reading nothing. This fails
# on any call that writes to stdout or stderr, or ends the process, in a
# line of code (comment lines are skipped).
# Prints "check_library: N passed, M failed" like the test binaries.
passed=0
failed=0
pattern='(^|[^a-z_])(printf|puts|putchar|perror|exit|_exit|abort|vprintf)[[:space:]]*\(|(fprintf|fputs|fputc|fwrite|vfprintf|fflush)[[:space:]]*\([^;]*(stdout|stderr)|(^|[^a-z_])(stdout|stderr)([^a-z_]|$)'
lib_dirs=$(sed -n 's/^LIB_DIRS *:= *//p' Makefile)
if [ -z "$lib_dirs" ]; then
    echo "check_library: no LIB_DIRS line in the Makefile"
    failed=$((failed + 1))
fi
files=""
for d in $lib_dirs; do
    set -- "$d"/*.[ch]
    if [ ! -e "$1" ]; then
        echo "check_library: $d (LIB_DIRS) has no source"
        failed=$((failed + 1))
        continue
    fi
    files="$files $*"
done
for f in $files; do
    hits=$(grep -nE "$pattern" "$f" | grep -vE '^[0-9]+:[[:space:]]*(//|/?\*)')
    if [ -n "$hits" ]; then
        echo "$f: the library must not print or exit:"
        echo "$hits" | sed 's/^/    /'
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
done
echo "check_library: $passed passed, $failed failed"
[ $failed -eq 0 ]

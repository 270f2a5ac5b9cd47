#!/bin/sh
# The library (src/*.[ch] and src/{base,model,kernels}/*.[ch]) never prints and never exits: it returns an
# error (error.h) and the front-end decides what the user sees. This fails
# on any call that writes to stdout or stderr, or ends the process, in a
# line of code (comment lines are skipped).
# Prints "check_library: N passed, M failed" like the test binaries.
passed=0
failed=0
pattern='(^|[^a-z_])(printf|puts|putchar|perror|exit|_exit|abort|vprintf)[[:space:]]*\(|(fprintf|fputs|fputc|fwrite|vfprintf|fflush)[[:space:]]*\([^;]*(stdout|stderr)|(^|[^a-z_])(stdout|stderr)([^a-z_]|$)'
for f in src/*.c src/*.h src/base/*.[ch] src/model/*.[ch] src/kernels/*.[ch]; do
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

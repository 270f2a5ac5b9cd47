#!/bin/sh
# cli_library.sh - gpt as a C library, as a program outside the repository
# meets it:
#   - `make install DESTDIR=... PREFIX=/usr/local` installs gpt.h,
#     libgpt.so.0 (soname libgpt.so.0), the libgpt.so link, libgpt.a and
#     gpt.pc;
#   - examples/generate.c builds against that install with `pkg-config
#     --cflags --libs gpt` alone (PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR
#     into DESTDIR) and runs with LD_LIBRARY_PATH there; its output is
#     `gpt -m models/demo.bin -p PROMPT -s SEED -n N --temp T`'s, byte for
#     byte, for several seeds, temperatures and prompts; examples/batch.c,
#     built the same way, answers 16 prompts through the scheduler, each
#     line the command's text for its seed;
#   - libgpt.so exports exactly the functions gpt.h declares GPT_API (nm -D)
#     and nothing else, libgpt.a defines them and no other global symbol
#     (the example linked with it prints the same bytes), and gpt.h
#     includes no header of gpt's own.
# Prints "cli_library: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), BUILD (default build).
GPT=${GPT:-build/gpt}
BUILD=${BUILD:-build}
CHECK_NAME=cli_library
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
need pkg-config
need nm

root=$tmp/root
if make --no-print-directory -s install BUILD="$BUILD" DESTDIR="$root" PREFIX=/usr/local > "$tmp/install.log" 2>&1; then
    pass
else
    fail "make install DESTDIR=$root failed: $(cat "$tmp/install.log")"
    summary
    exit 1
fi
lib=$root/usr/local/lib
for f in include/gpt.h lib/libgpt.so.0 lib/libgpt.so lib/libgpt.a lib/pkgconfig/gpt.pc; do
    if [ -e "$root/usr/local/$f" ]; then pass; else fail "make install did not install $f"; fi
done
soname=$(readelf -d "$lib/libgpt.so.0" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = libgpt.so.0 ]; then pass; else fail "libgpt.so.0's soname is '$soname'"; fi

# the example, built as a user would: pkg-config alone
export PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root"
flags=$(pkg-config --cflags --libs gpt)
case "$flags" in
*"-I$root/usr/local/include"*"-L$lib"*"-lgpt"*) pass ;;
*) fail "pkg-config --cflags --libs gpt: $flags" ;;
esac
# a sanitized library (make asan) needs the sanitizers' runtime first
san=""
if readelf -d "$lib/libgpt.so.0" | grep -q 'libasan'; then san="-fsanitize=address,undefined"; fi
# shellcheck disable=SC2086 # the flags are words
if cc -std=c11 -Wall -Wextra -Werror $san examples/generate.c $flags -o "$tmp/generate" 2> "$tmp/cc.log"; then
    pass
else
    fail "examples/generate.c does not build against the install: $(cat "$tmp/cc.log")"
    summary
    exit 1
fi

# its output is the command's, byte for byte
same() {  # PROMPT SEED N TEMP
    LD_LIBRARY_PATH=$lib "$tmp/generate" models/demo.bin "$1" "$2" "$3" "$4" > "$tmp/lib.out" 2> "$tmp/lib.err"
    rc=$?
    "$GPT" -m models/demo.bin -q -p "$1" -s "$2" -n "$3" --temp "$4" > "$tmp/gpt.out" 2> "$tmp/gpt.err"
    if [ $rc -ne 0 ]; then
        fail "generate '$1' $2 $3 $4: exit $rc: $(cat "$tmp/lib.err")"
    elif ! cmp -s "$tmp/lib.out" "$tmp/gpt.out"; then
        fail "generate '$1' $2 $3 $4: [$(cat "$tmp/lib.out")], gpt's [$(cat "$tmp/gpt.out")]"
    elif [ ! -s "$tmp/gpt.out" ]; then
        fail "generate '$1' $2 $3 $4: gpt printed nothing"
    else
        pass
    fi
}
same "And it came to pass" 1 12 0.8
same "And it came to pass" 2 12 1.0
same "And it came to pass" 3 30 0
same "The king said" 42 40 1.5
same "The king said" 7 24 0.3
same "" 5 20 1

sed -n 's/^GPT_API [^(]*[ *]\(gpt_[a-z_]*\)(.*/\1/p' src/api/gpt.h | sort > "$tmp/declared"
# the static library: the example linked with lib/libgpt.a and pkg-config
# --static's other libraries prints the same bytes; it defines gpt.h's calls
# and no other global symbol
# shellcheck disable=SC2046 # the flags are words
if cc -std=c11 -Wall -Wextra -Werror $san examples/generate.c $(pkg-config --cflags gpt) "$lib/libgpt.a" \
    $(pkg-config --static --libs-only-l gpt | sed 's/-lgpt //') -o "$tmp/generate_static" 2> "$tmp/cc.log" &&
    ! readelf -d "$tmp/generate_static" | grep -q libgpt; then
    "$tmp/generate_static" models/demo.bin "The king said" 42 40 1.5 > "$tmp/lib.out" 2> /dev/null
    "$GPT" -m models/demo.bin -q -p "The king said" -s 42 -n 40 --temp 1.5 > "$tmp/gpt.out"
    if cmp -s "$tmp/lib.out" "$tmp/gpt.out"; then pass; else fail "the static example: [$(cat "$tmp/lib.out")]"; fi
else
    fail "examples/generate.c does not link with lib/libgpt.a: $(cat "$tmp/cc.log")"
fi
nm -g --defined-only "$lib/libgpt.a" | awk 'NF == 3 { print $3 }' | sort > "$tmp/static_exported"
if cmp -s "$tmp/static_exported" "$tmp/declared"; then pass; else
    fail "libgpt.a's global symbols differ from gpt.h's calls: $(diff "$tmp/declared" "$tmp/static_exported" | grep '^[<>]' | head -5 | tr '\n' ' ')"
fi

# examples/batch.c: 16 prompts through the scheduler, each line the command's
# text for its seed (newlines written \n)
# shellcheck disable=SC2086 # the flags are words
if cc -std=c11 -Wall -Wextra -Werror $san examples/batch.c $flags -o "$tmp/batch" 2> "$tmp/cc.log"; then
    pass
else
    fail "examples/batch.c does not build against the install: $(cat "$tmp/cc.log")"
fi
: > "$tmp/prompts"
: > "$tmp/want"
i=0
while [ $i -lt 16 ]; do
    case $((i % 4)) in 0) p="And it came to pass" ;; 1) p="The king said" ;; 2) p="In the beginning" ;; 3) p="" ;; esac
    echo "$p" >> "$tmp/prompts"
    "$GPT" -m models/demo.bin -q -p "$p" -s $((7 + i)) -n 20 > "$tmp/one"
    { sed -z 's/\n/\\n/g' "$tmp/one"; echo; } >> "$tmp/want"
    i=$((i + 1))
done
if LD_LIBRARY_PATH=$lib "$tmp/batch" models/demo.bin 7 20 < "$tmp/prompts" > "$tmp/got" 2> "$tmp/err" &&
    cmp -s "$tmp/got" "$tmp/want"; then
    pass
else
    fail "examples/batch: $(cat "$tmp/err"; diff "$tmp/want" "$tmp/got" | head -6)"
fi

# the example's errors: one line, exit 1
LD_LIBRARY_PATH=$lib "$tmp/generate" no/model.bin "x" 1 2 1 > /dev/null 2> "$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q 'no/model.bin' "$tmp/err"; then pass; else
    fail "a missing model: exit $rc, $(cat "$tmp/err")"
fi
LD_LIBRARY_PATH=$lib "$tmp/generate" models/demo.bin "x" 1 2 -1 > /dev/null 2> "$tmp/err"
if grep -q 'temperature must be' "$tmp/err"; then pass; else fail "a bad temperature: $(cat "$tmp/err")"; fi

# exported: exactly gpt.h's GPT_API functions
nm -D --defined-only "$lib/libgpt.so.0" | awk '{print $NF}' | sort > "$tmp/exported"
if [ -s "$tmp/declared" ] && cmp -s "$tmp/exported" "$tmp/declared"; then pass; else
    fail "libgpt.so exports other than gpt.h declares: $(diff "$tmp/declared" "$tmp/exported" | grep '^[<>]' | head -5 | tr '\n' ' ')"
fi
if grep -v '^gpt_' "$tmp/exported" | grep -q .; then fail "libgpt.so exports $(grep -v '^gpt_' "$tmp/exported" | head -3)"; else pass; fi
# gpt.h stands alone: only the C library's headers
if grep '^#include' src/api/gpt.h | grep -qv '<std\(def\|int\)\.h>'; then
    fail "gpt.h includes $(grep '^#include' src/api/gpt.h | grep -v '<std')"
else
    pass
fi
summary

#!/bin/sh
# The README's outputs are what gpt prints: its first example (the demo
# model, seeded, so the text is the same on every machine), the KV-cache
# lines of its --stats sample, and the tokenizer examples are run and
# compared with the text the README shows, and its table of exit codes
# with --help's. And its first install line is
# all gpt needs: gpt builds with pkg-config seeing only the .pc files of
# the packages that line names and of what they depend on (Debian, dpkg).
# Prints "check_readme: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt).
GPT=${GPT:-build/gpt}
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check NAME EXPECTED-FILE ACTUAL-FILE
check() {
    if cmp -s "$2" "$3"; then
        passed=$((passed + 1))
    else
        echo "$1: the README shows"
        sed 's/^/    | /' "$2"; echo
        echo "but gpt prints"
        sed 's/^/    | /' "$3"; echo
        failed=$((failed + 1))
    fi
}

# The first example: the first "    ./gpt -p" line of the README, and the
# indented block after the "prints" line below it. -m models/demo.bin makes
# it the demo model even where a GPT-2 is installed.
cmd=$(grep -m1 '^    \./gpt -p ' README.md | sed 's/^    \.\/gpt //')
awk '/^prints/ { on = 1; next } on && /^    / { sub(/^    /, ""); print; seen = 1; next } on && seen { exit }' \
    README.md > "$tmp/want"
printf '%s' "$(cat "$tmp/want")" > "$tmp/want"   # no final newline: stdout is a file
eval "\"$GPT\" -m models/demo.bin $cmd" > "$tmp/got" 2> "$tmp/err"
[ -s "$tmp/want" ] || echo "check_readme: no sample output after the first example" > "$tmp/want"
check "./gpt $cmd" "$tmp/want" "$tmp/got"

# The --stats sample: its stop, KV-cache and token-count lines (the times,
# the path and the rest depend on the machine).
line=$(grep -n -m1 '^    \$ \./gpt -q -p "Hello" -n 24 -s 1 --stats' README.md | cut -d: -f1)
if [ -n "$line" ]; then
    keep() { grep -E '^(kv |stop:|prefill:|decode:)' | sed 's/ in [0-9.]* s = .*//'; }
    sed -n "$((line + 1)),\$p" README.md | awk '/^    / { sub(/^    /, ""); print; next } { exit }' | keep > "$tmp/want"
    "$GPT" -m models/demo.bin -q -p Hello -n 24 -s 1 --stats 2>&1 > /dev/null | keep > "$tmp/got"
    check "--stats" "$tmp/want" "$tmp/got"
else
    echo "README: no --stats sample"
    failed=$((failed + 1))
fi

# The tokenizer examples: the line after each command is its output.
for example in '--tokenize -p "Hello world"' 'echo "15496 995" | ./gpt --detokenize'; do
    line=$(grep -n -F -m1 -- "$example" README.md | cut -d: -f1)
    if [ -z "$line" ]; then
        echo "README: no example '$example'"
        failed=$((failed + 1))
        continue
    fi
    sed -n "$((line + 1))p" README.md | sed 's/^    //' > "$tmp/want"
    case "$example" in
        echo*) echo "15496 995" | "$GPT" --detokenize > "$tmp/got"; echo >> "$tmp/got" ;;
        *) "$GPT" --tokenize -p "Hello world" > "$tmp/got" ;;
    esac
    check "$example" "$tmp/want" "$tmp/got"
done
# The Probabilities section: its first command's --per-token lines (the
# block after "tab-separated:") and its --choice session ("$ ./gpt ...",
# then what it prints), run on the demo model.
probabilities() { awk '/^## Probabilities/ { on = 1; next } /^## / { on = 0 } on' README.md; }
cmd=$(probabilities | grep -m1 '^    \./gpt -p .* --logprobs 2$' | sed 's/^    \.\/gpt //')
probabilities | awk '/tab-separated:$/ { on = 1; next } on && /^    / { sub(/^    /, ""); print; seen = 1; next }
    on && seen { exit }' > "$tmp/want"
eval "\"$GPT\" -m models/demo.bin $cmd" > "$tmp/got" 2> "$tmp/err"
[ -n "$cmd" ] && [ -s "$tmp/want" ] || echo "check_readme: no --logprobs example in Probabilities" > "$tmp/want"
check "./gpt $cmd" "$tmp/want" "$tmp/got"
cmd=$(probabilities | grep -m1 '^    \$ \./gpt -p .*--choice' | sed 's/^    \$ \.\/gpt //')
probabilities | awk '/^    \$ \.\/gpt -p .*--choice/ { on = 1; next } on && /^    / { sub(/^    /, ""); print; next }
    on { exit }' > "$tmp/want"
printf '%s' "$(cat "$tmp/want")" > "$tmp/want"   # no final newline: stdout is a file
eval "\"$GPT\" -m models/demo.bin $cmd" > "$tmp/got" 2> "$tmp/err"
[ -n "$cmd" ] && [ -s "$tmp/want" ] || echo "check_readme: no --choice example in Probabilities" > "$tmp/want"
check "./gpt $cmd" "$tmp/want" "$tmp/got"

# The exit codes: the README's table has those of gpt --help.
sed -n '/^### Exit codes/,/^#/p' README.md | sed -n 's/^| \([0-9][0-9]*\) |.*/\1/p' > "$tmp/want"
"$GPT" --help | sed -n '/^exit codes:/,$p' | tr '\n' ' ' | sed 's/^exit codes://' |
    grep -oE '(^|[:,]) *[0-9]+ [a-z]' | grep -oE '[0-9]+' > "$tmp/got"
check "the exit codes (gpt --help's, one a line)" "$tmp/want" "$tmp/got"

# The licence: MIT at the top, and the model card gives the demo model's
# weights the same, and speaks for itself (no "issue's aim").
if head -n 3 LICENSE 2>/dev/null | tr '\n' ' ' | grep -q '^MIT License  Copyright (c) 2026 the gpt authors'; then
    passed=$((passed + 1))
else
    echo "LICENSE: not the MIT licence of the gpt authors, 2026"
    failed=$((failed + 1))
fi
if awk '/^\*\*Licence\.\*\*/ { on = 1 } on && /^$/ { exit } on' models/README.md | tr '\n' ' ' |
    grep -q 'weights (`demo.bin`).* MIT licence' && ! grep -qi "issue" models/README.md; then
    passed=$((passed + 1))
else
    echo "models/README.md: no **Licence.** paragraph giving demo.bin's weights the MIT licence, or it speaks of an issue"
    failed=$((failed + 1))
fi

# The first install line: the packages it names, each with the closure of
# its dependencies as apt installs them (of each "a | b", the first that is
# installed), and the .pc files they hold.
depends_closure() {
    todo="$*"
    seen=" "
    while [ -n "$todo" ]; do
        set -- $todo
        p=$1
        shift
        todo="$*"
        case "$seen" in *" $p "*) continue ;; esac
        seen="$seen$p "
        groups=$(dpkg-query -W -f '${Depends}, ${Pre-Depends}' "$p" 2>/dev/null | tr ',' '\n' |
            sed 's/([^)]*)//g; s/:any//g; s/ //g')
        for group in $groups; do
            for alt in $(echo "$group" | tr '|' ' '); do
                if installed "$alt"; then
                    todo="$todo $alt"
                    break
                fi
            done
        done
    done
    echo $seen
}
installed() { dpkg-query -W -f '${db:Status-Abbrev}' "$1" 2>/dev/null | grep -q '^ii'; }

install_line=$(grep -m1 'apt-get install' README.md | sed 's/.*apt-get install *//')
if ! command -v dpkg-query > /dev/null; then
    echo "check_readme: no dpkg-query here: the install line '$install_line' is not checked"
else
    missing=
    for p in $install_line; do installed "$p" || missing="$missing $p"; done
    if [ -n "$missing" ]; then
        echo "the README's install line names$missing, not installed here (dpkg-query): cannot check it"
        failed=$((failed + 1))
    else
        mkdir "$tmp/pc"
        dpkg -L $(depends_closure $install_line) | grep '/pkgconfig/[^/]*\.pc$' | sort -u |
            while read -r pc; do ln -sf "$pc" "$tmp/pc/"; done
        # a build of its own (-O0: the packages are the question, not the
        # code), not the make that runs the tests (MAKEFLAGS; nor its
        # SANITIZE, which make asan's command line puts in the environment)
        if MAKEFLAGS= PKG_CONFIG_LIBDIR="$tmp/pc" PKG_CONFIG_PATH= PKG_CONFIG_SYSROOT_DIR= \
            make -j2 BUILD="$tmp/build" CFLAGS=-O0 SANITIZE= "$tmp/build/gpt" > "$tmp/build.log" 2>&1; then
            passed=$((passed + 1))
        else
            echo "with only the packages of the README's install line ($install_line)"
            echo "and their dependencies, make fails:"
            grep -v '^cc \|^ar \|^rm ' "$tmp/build.log" | tail -n 8 | sed 's/^/    | /'
            failed=$((failed + 1))
        fi
    fi
fi
echo "check_readme: $passed passed, $failed failed"
[ $failed -eq 0 ]

#!/bin/sh
# The README's outputs are what gpt prints: its first example (the demo
# model, seeded, so the text is the same on every machine), the KV-cache
# lines of its --stats sample, and the tokenizer examples are run and
# compared with the text the README shows.
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

# The --stats sample: its KV-cache lines (the rest depends on the machine).
line=$(grep -n -m1 '^    \$ \./gpt -p "Hello" -n 24 -s 1 --stats' README.md | cut -d: -f1)
if [ -n "$line" ]; then
    sed -n "$((line + 1)),\$p" README.md | awk '/^    / { sub(/^    /, ""); print; next } { exit }' |
        grep '^kv ' > "$tmp/want"
    "$GPT" -m models/demo.bin -p Hello -n 24 -s 1 --stats 2>&1 > /dev/null | grep '^kv ' > "$tmp/got"
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

echo "check_readme: $passed passed, $failed failed"
[ $failed -eq 0 ]

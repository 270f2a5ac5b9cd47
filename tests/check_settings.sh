#!/bin/sh
# The table of generation settings (src/front/settings.c) and what derives
# from it:
#   - the docs it says (docs/usage.md's table, the manual's, the
#     completion's word lists) are what `make docs` writes from it
#     (scripts/settings-docs.sh --check), and the check fails on a copy
#     of them with one row changed;
#   - one range per setting everywhere: a value just out of a number's
#     range (settings_docs bad) is refused with the same "must be ..." by
#     gpt's option, gpt chat's option (where chat takes it) and a
#     --batch --jsonl line's field;
#   - the shared options' help (src/front/model_options.c's table) the
#     same in gpt --help, gpt chat --help and gpt serve --help, and the
#     settings' the same in gpt's and chat's where chat says nothing else;
#   - the --keep rules alike in gpt, gpt chat and a --jsonl line: keep
#     needs context_shift, and at most half the context (the demo model's
#     256: 128).
# Prints "check_settings: N passed, M failed" like the test binaries.
CHECK_NAME=check_settings
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
GPT=${GPT:-build/gpt}
SETTINGS_DOCS=${SETTINGS_DOCS:-$(dirname "$GPT")/settings_docs}

if SETTINGS_DOCS=$SETTINGS_DOCS sh scripts/settings-docs.sh --check > "$tmp/out" 2>&1; then pass
else fail "the docs differ from the table of settings: $(head -c 600 "$tmp/out")"
fi

# the check fails where a generated row was edited by hand
here=$(pwd)
for file in docs/usage.md man/gpt.1 completions/gpt.bash; do
    mkdir -p "$tmp/tree/docs" "$tmp/tree/man" "$tmp/tree/completions"
    cp docs/usage.md "$tmp/tree/docs/"; cp man/gpt.1 "$tmp/tree/man/"; cp completions/gpt.bash "$tmp/tree/completions/"
    # the line after BEGIN's, one letter changed
    awk '/BEGIN generated settings/ { print; getline; sub(/[A-Za-z]/, "X"); print; next } { print }' "$file" \
        > "$tmp/tree/$file"
    if (cd "$tmp/tree" && SETTINGS_DOCS=$here/$SETTINGS_DOCS sh "$here/scripts/settings-docs.sh" --check \
            > "$tmp/out" 2>&1); then
        fail "settings-docs.sh --check passed a $file with a generated line edited"
    elif grep -q "settings-docs: $file differs" "$tmp/out"; then pass
    else fail "settings-docs.sh --check on an edited $file: $(head -c 300 "$tmp/out")"
    fi
done

# each option's entry in the three help texts (help_options.awk: OPTION TAB
# ARG TAB DEFAULTS TAB TEXT)
"$GPT" --help | awk -f tests/help_options.awk > "$tmp/h_gpt"
"$GPT" chat --help | awk -f tests/help_options.awk > "$tmp/h_chat"
"$GPT" serve --help | awk -f tests/help_options.awk > "$tmp/h_serve"
for o in --model --tokenizer --dtype --q8-act --lora --kv-type --threads --tune --temp --top-p --repeat-penalty; do
    g=$(awk -F'\t' -v o="$o" '$1 == o' "$tmp/h_gpt")
    for who in chat serve; do
        other=$(awk -F'\t' -v o="$o" '$1 == o' "$tmp/h_$who")
        [ -z "$other" ] && [ $who = serve ] && case $o in --temp | --top-p | --repeat-penalty) continue ;; esac
        if [ -n "$g" ] && [ "$g" = "$other" ]; then pass
        else fail "$o: gpt $who --help says '$other', gpt --help '$g'"
        fi
    done
done
for o in --parallel --kv-budget; do
    if [ "$(awk -F'\t' -v o="$o" '$1 == o' "$tmp/h_gpt")" = "$(awk -F'\t' -v o="$o" '$1 == o' "$tmp/h_serve")" ]; then pass
    else fail "$o: gpt serve --help and gpt --help differ"
    fi
done

# "must be ..." of a usage error or an error field: what follows it
must() { sed -n 's/.*\(must be [^"(]*\).*/\1/p' | sed 's/ *$//' | head -1; }

"$SETTINGS_DOCS" bad > "$tmp/bad" || fail "$SETTINGS_DOCS bad failed"
"$SETTINGS_DOCS" options chat | cut -f1 > "$tmp/chat_options"
n=0
while IFS="$(printf '\t')" read -r flag key value; do
    n=$((n + 1))
    "$GPT" -q -p x "$flag" "$value" > /dev/null 2> "$tmp/err"
    rc=$?
    cli=$(must < "$tmp/err")
    printf '{"prompt": "x", "%s": %s}\n' "$key" "$value" |
        "$GPT" -q --batch --jsonl -n 1 > "$tmp/line" 2> /dev/null
    line=$(must < "$tmp/line")
    if [ $rc = 2 ] && [ -n "$cli" ] && [ "$cli" = "$line" ]; then pass
    else fail "$flag $value (exit $rc: '$cli') and \"$key\": $value ('$line') are not refused alike"
    fi
    if grep -qxF -- "$flag" "$tmp/chat_options"; then
        "$GPT" chat -q "$flag" "$value" < /dev/null > /dev/null 2> "$tmp/err"
        chat=$(must < "$tmp/err")
        if [ "$chat" = "$cli" ]; then pass
        else fail "gpt chat $flag $value: '$chat', gpt's: '$cli'"
        fi
    fi
done < "$tmp/bad"
# keep_rule WHAT WANT STATUS OUTPUT: OUTPUT (a file) says WANT, with STATUS 2
# for an option and 1 for a line
keep_rule() {
    if [ "$3" = "$4" ] && grep -qF -- "$2" "$5"; then pass
    else fail "$1: exit $3 (want $4), want '$2' in: $(head -c 300 "$5")"
    fi
}
"$GPT" -q -p x --keep 2 > /dev/null 2> "$tmp/err"
keep_rule "gpt --keep 2" "--keep needs --context-shift" $? 2 "$tmp/err"
"$GPT" -q -p x --context-shift --keep 200 > /dev/null 2> "$tmp/err"
keep_rule "gpt --context-shift --keep 200" "--keep 200: more than half the model's context (128)" $? 2 "$tmp/err"
"$GPT" chat -q --keep 2 < /dev/null > /dev/null 2> "$tmp/err"
keep_rule "gpt chat --keep 2" "--keep needs --context-shift" $? 2 "$tmp/err"
"$GPT" chat -q --context-shift --keep 200 < /dev/null > /dev/null 2> "$tmp/err"
keep_rule "gpt chat --context-shift --keep 200" "--keep 200: more than half the model's context (128)" $? 2 "$tmp/err"
printf '{"prompt": "x", "keep": 2}\n{"prompt": "x", "context_shift": true, "keep": 200}\n' |
    "$GPT" -q --batch --jsonl -n 1 > "$tmp/lines" 2> /dev/null
rc=$?
sed -n 1p "$tmp/lines" > "$tmp/line1"
sed -n 2p "$tmp/lines" > "$tmp/line2"
keep_rule "a --jsonl line's keep 2" "keep needs context_shift" $rc 1 "$tmp/line1"
keep_rule "a --jsonl line's keep 200" "keep 200: more than half the model's context (128)" $rc 1 "$tmp/line2"

[ $n -ge 8 ] || fail "settings_docs bad gave $n settings (want the numbers of the table: 8 or more)"
summary

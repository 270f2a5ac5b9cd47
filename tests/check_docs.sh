#!/bin/sh
# The lists the documents share with the program are the program's: this
# fails, naming the item and the document, where one lacks what the program
# knows or lists what it does not.
#   - stop reasons: the names of src/sequence.c's STOP_REASONS table (and
#     "interrupted", which the front-ends add) are the rows of
#     docs/usage.md's stop_reason table and the tags of the manual's list
#     under --json, each with OpenAI's finish_reason of that table; and
#     gpt serve -h names each one's finish_reason. STOP_ERROR's name is
#     never written (a failure is an error), which both documents say;
#   - model formats: the name of each ModelFormat of src/model/*.c
#     (safetensors, model.bin, llm.c, GGUF) is in what describes a model
#     file: gpt --help's -m and --draft, gpt convert -h's SRC, gpt inspect
#     -h's FILE, docs/usage.md's -m row and the manual's -m entry;
#   - chat templates: each built-in of src/front/chat.c is a row of
#     docs/chat.md's table and named by --help's and the manual's
#     --chat-template;
#   - options: every option of gpt --help (its entries and the modes of its
#     usage lines) is in docs/usage.md's option table or its Modes list,
#     every option there is in gpt --help, and every subcommand of the
#     usage lines (gpt tune) has its Modes line, whose options are the
#     subcommand's (gpt convert -h);
#   - endpoints: each route of src/serve/http.c is named by gpt serve -h,
#     docs/serving.md and the manual's gpt serve entry;
#   - exit codes: docs/usage.md's table has those of gpt --help;
#   - fields: a generation's --json fields are named by the manual's --json
#     entry, its stats by docs/usage.md's paragraph of them;
#   - links: every relative link of README.md and docs/*.md names a file
#     that exists, and an #anchor a heading of that file (GitHub's ids).
# Prints "check_docs: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), MAN (default man/gpt.1), USAGE
# (default docs/usage.md).
GPT=${GPT:-build/gpt}
MAN=${MAN:-man/gpt.1}
USAGE=${USAGE:-docs/usage.md}
CHECK_NAME=check_docs
# shellcheck source=tests/checklib.sh
. tests/checklib.sh

for sub in "" serve convert inspect; do
    # shellcheck disable=SC2086 # no subcommand: gpt --help
    if ! "$GPT" $sub --help > "$tmp/help${sub:+_$sub}" 2> "$tmp/err"; then
        fail "$GPT $sub --help failed: $(cat "$tmp/err")"
        summary
        exit 1
    fi
done

# The manual as text: fonts, \- and \(dq undone, the words of .B, .BR
# and the like, other requests dropped but .TP, .PP, .RS and .RE.
sed -e 's/\\f[BIRP]//g; s/\\-/-/g; s/\\(dq/"/g; s/\\(aq/'\''/g; s/\\&//g' \
    -e 's/^\.\(B\|I\|BR\|IR\|RB\|BI\) //' -e '/^\.\(TP\|PP\|RS\|RE\)/!s/^\..*//' "$MAN" > "$tmp/man"

# --- stop reasons -----------------------------------------------------------
# [STOP_EOS] = {"eos", "stop"}, -> eos TAB stop
sed -n 's/^ *\[\(STOP_[A-Z]*\)\] = {"\([a-z]*\)", "\([a-z]*\)"},.*/\1\t\2\t\3/p' src/sequence.c > "$tmp/stops_all"
grep -q "^STOP_EOS	eos	" "$tmp/stops_all" ||
    fail "found no STOP_REASONS table in src/sequence.c ([STOP_EOS] = {\"eos\", \"stop\"}): has it moved?"
{ awk -F '\t' '$2 != "" && $1 != "STOP_ERROR" { print $2 "\t" $3 }' "$tmp/stops_all"; printf 'interrupted\tinterrupted\n'; } \
    > "$tmp/stops"
# usage.md's table: | `NAME` | when | `FINISH`... | (a row without a
# finish_reason gets "-")
awk '/^### stop_reason/ { on = 1; next } on && /^#/ { exit } on && /^\| `/' "$USAGE" |
    sed -n 's/^| `\([a-z]*\)` | .* | \([^|]*\) |$/\1\t\2/p' | sed 's/\t`\([a-z]*\)`.*/\t\1/; s/\t[^a-z].*/\t-/' \
    > "$tmp/usage_stops"
# the manual's list under --json: .TP, .B NAME, then text ending (\(dqFINISH\(dq)
awk '/^is one of these/ { on = 1 } on && /^\.RE/ { exit }
     on && /^\.TP/ { tp = 1; next }
     on && tp { name = $0; tp = 0; next }
     on && name != "" && match($0, /\("[a-z]*"\)/) { print name "\t" substr($0, RSTART + 2, RLENGTH - 4); name = "" }' \
    "$tmp/man" > "$tmp/man_stops"
while IFS='	' read -r name finish; do
    for doc in usage man; do
        where=$USAGE
        [ $doc = man ] && where="$MAN (under --json)"
        got=$(awk -F '\t' -v n="$name" '$1 == n { print $2; exit }' "$tmp/${doc}_stops")
        if [ "$got" = "$finish" ]; then pass
        elif [ -z "$got" ]; then fail "stop_reason $name (src/sequence.c) is not in $where's list of stop reasons"
        else fail "stop_reason $name: $where gives finish_reason $got, src/sequence.c $finish"
        fi
    done
    [ "$name" = interrupted ] && continue
    # gpt serve -h: (eos, stop, grammar: "stop"; length, context: "length")
    if tr '\n' ' ' < "$tmp/help_serve" | grep -oE '\([a-z, ]+: "[a-z]+"(; [a-z, ]+: "[a-z]+")*\)' |
        tr '(;)' '\n\n\n' | grep -E "(^| )${name}[,:].*\"$finish\"" > /dev/null; then pass
    else fail "stop_reason $name: gpt serve -h does not give its finish_reason \"$finish\""
    fi
done < "$tmp/stops"
for doc in usage man; do
    for name in $(cut -f1 "$tmp/${doc}_stops"); do
        if grep -q "^$name	" "$tmp/stops"; then pass
        else fail "$([ $doc = man ] && echo "$MAN" || echo "$USAGE") lists the stop_reason $name, which gpt never writes (src/sequence.c)"
        fi
    done
done
grep -q 'not a stop reason' "$USAGE" || fail "$USAGE does not say that a failure (STOP_ERROR) is not a stop reason"
grep -q 'not a stop reason' "$tmp/man" || fail "$MAN does not say that a failure (STOP_ERROR) is not a stop reason"

# --- model formats ----------------------------------------------------------
sed -n 's/^const ModelFormat [A-Z_]* = {"\([^"]*\)".*/\1/p' src/model/*.c | sort -u > "$tmp/formats"
[ "$(wc -l < "$tmp/formats")" -ge 4 ] || fail "found $(wc -l < "$tmp/formats") ModelFormats in src/model/*.c: have they moved?"
awk -f tests/help_options.awk "$tmp/help" | awk -F '\t' '$1 == "-m" || $1 == "--draft" { print $1 "\t" $4 }' > "$tmp/entries"
awk -F '\t' '$1 == "-m" { print $2 }' "$tmp/entries" > "$tmp/d_help_m"
awk -F '\t' '$1 == "--draft" { print $2 }' "$tmp/entries" > "$tmp/d_help_draft"
sed -n '/^ *SRC:/,/^  -/p' "$tmp/help_convert" > "$tmp/d_convert"
sed -n '/^ *FILE:/,/^[A-Z]/p' "$tmp/help_inspect" > "$tmp/d_inspect"
grep '^| `-m, --model' "$USAGE" > "$tmp/d_usage"
awk '/^-m, --model PATH$/ { n++ } n == 1 { print } n == 1 && /^\.TP/ { exit }' "$tmp/man" > "$tmp/d_man"
for d in "help_m:gpt --help's -m" "help_draft:gpt --help's --draft" "convert:gpt convert -h's SRC" \
    "inspect:gpt inspect -h's FILE" "usage:$USAGE's -m row" "man:$MAN's -m entry"; do
    f=$tmp/d_${d%%:*}
    [ -s "$f" ] || { fail "found no ${d#*:}: has it moved?"; continue; }
    while read -r format; do
        if grep -qiF -- "$format" "$f"; then pass
        else fail "${d#*:} does not name the model format $format (src/model/*.c)"
        fi
    done < "$tmp/formats"
done

# --- chat templates ---------------------------------------------------------
# src/front/chat.c's BUILTINS, {"NAME", ...}: rows of docs/chat.md's table
# of built-ins, and named by gpt --help's --chat-template and the manual's
sed -n '/^static const BuiltinTemplate BUILTINS/,/^};/s/^    {"\([a-z0-9]*\)".*/\1/p' src/front/chat.c > "$tmp/templates"
[ -s "$tmp/templates" ] || fail "found no BUILTINS in src/front/chat.c: has the table moved?"
awk -f tests/help_options.awk "$tmp/help" | awk -F '\t' '$1 == "--chat-template" { print $4 }' > "$tmp/t_help"
awk '/^--chat-template T$/ { n++ } n == 1 { print } n == 1 && /^\.TP/ { exit }' "$tmp/man" > "$tmp/t_man"
while read -r name; do
    if grep -q "^| \`$name\`" docs/chat.md; then pass
    else fail "the chat template $name (src/front/chat.c) is not a row of docs/chat.md's built-ins"
    fi
    for d in "help:gpt --help's --chat-template" "man:$MAN's --chat-template"; do
        if grep -qw -- "$name" "$tmp/t_${d%%:*}"; then pass
        else fail "${d#*:} does not name the chat template $name (src/front/chat.c)"
        fi
    done
done < "$tmp/templates"

# --- options and modes ------------------------------------------------------
awk -f tests/help_options.awk "$tmp/help" | cut -f1 > "$tmp/help_opts"
grep -E '^(usage:)? *gpt ' "$tmp/help" | grep -o -- '--[a-z][a-z0-9-]*' >> "$tmp/help_opts"
sort -u -o "$tmp/help_opts" "$tmp/help_opts"
# the Modes list: the indented lines after "## Modes"
awk '/^## Modes/ { on = 1; next } on && /^## / { exit } on && /^    gpt/' "$USAGE" > "$tmp/modes"
# the option table's first column
awk '/^\| option \| meaning \|/ { on = 1; next } on && !/^\|/ { exit } on' "$USAGE" | cut -d'|' -f2 > "$tmp/table"
[ -s "$tmp/modes" ] && [ -s "$tmp/table" ] || fail "found no Modes list or option table in $USAGE: have they moved?"
grep -oE -- '(^|[ `])--?[a-zA-Z][a-z0-9-]*' "$tmp/modes" "$tmp/table" | sed 's/.*[ `:]//; s/^\(-[a-zA-Z]\).*/\1/' |
    sort -u > "$tmp/usage_opts"
for o in $(cat "$tmp/help_opts"); do
    if grep -qxF -- "$o" "$tmp/usage_opts"; then pass
    else fail "gpt --help has $o, which $USAGE's option table and Modes list do not"
    fi
done
for o in $(grep -oE -- '(^|[ `])--?[a-zA-Z][a-z0-9-]*' "$tmp/table" | sed 's/.*[ `]//' | sort -u); do
    if grep -qxF -- "$o" "$tmp/help_opts"; then pass
    else fail "$USAGE's option table has $o, which gpt --help does not"
    fi
done
# subcommands: "gpt SUB" in the usage lines of gpt --help, and in the Modes list
sed -n 's/^\(usage:\)\{0,1\} *gpt \([a-z][a-z]*\)\( .*\)\{0,1\}$/\2/p' "$tmp/help" | sort -u > "$tmp/help_subs"
for sub in $(cat "$tmp/help_subs"); do
    line=$(grep "^    gpt $sub\( \|$\)" "$tmp/modes")
    if [ -z "$line" ]; then fail "gpt --help has the mode gpt $sub, which $USAGE's Modes list does not"; continue; fi
    pass
    "$GPT" "$sub" --help > "$tmp/sub" 2>&1
    for o in $(echo "$line" | sed 's/   .*//' | grep -oE -- '--?[a-zA-Z][a-z0-9-]*'); do
        if grep -qE -- "(^|[ ,\[])$o([] ,=]|$)" "$tmp/sub"; then pass
        else fail "$USAGE's Modes line of gpt $sub has $o, which gpt $sub --help does not"
        fi
    done
done

# --- endpoints --------------------------------------------------------------
# src/serve/http.c's get_path and post_path (strcmp(p, "/PATH"), and the
# prefix of /v1/models/ID): named in gpt serve -h, docs/serving.md and the
# manual's gpt serve entry, each with its method in the last two
sed -n '/^static int get_path/,/^}/p' src/serve/http.c | grep -o 'strcmp(p, "[^"]*")' | sed 's/.*"\(.*\)")/GET \1/' \
    > "$tmp/routes"
sed -n 's/.*prefix\[\] = "\(\/v1\/models\/\)";.*/GET \1ID/p' src/serve/http.c >> "$tmp/routes"
sed -n '/^static int post_path/,/^}/p' src/serve/http.c | grep -o 'strcmp(p, "[^"]*")' | sed 's/.*"\(.*\)")/POST \1/' \
    >> "$tmp/routes"
[ "$(wc -l < "$tmp/routes")" -ge 10 ] || fail "found $(wc -l < "$tmp/routes") routes in src/serve/http.c: have they moved?"
# each document on one line, quotes and fonts gone, for names split across lines
tr '\n' ' ' < "$tmp/help_serve" | tr -s ' ' > "$tmp/r_help"
tr '\n`' '  ' < docs/serving.md | tr -s ' ' > "$tmp/r_serving"
awk '/^gpt serve \[options\]$/ { on = 1 } on && /^\.TP/ { exit } on' "$tmp/man" | tr '\n"' '  ' | tr -s ' ' > "$tmp/r_man"
while read -r method path; do
    # a path ends at a space or at , ; ) .: /v1/models is not /v1/models/ID
    if grep -qE -- "[ ,]$path([ ,;)]|\.( |$))" "$tmp/r_help"; then pass
    else fail "gpt serve -h does not name the endpoint $path (src/serve/http.c)"
    fi
    for d in "serving:docs/serving.md" "man:$MAN's gpt serve entry"; do
        if grep -qE -- "$method $path([ ,;)]|\.( |$))" "$tmp/r_${d%%:*}"; then pass
        else fail "${d#*:} does not name the endpoint $method $path (src/serve/http.c)"
        fi
    done
done < "$tmp/routes"

# --- exit codes -------------------------------------------------------------
sed -n '/^exit codes:/,$p' "$tmp/help" | tr '\n' ' ' | sed 's/^exit codes://' |
    grep -oE '(^|[:,]) *[0-9]+ [a-z]' | grep -oE '[0-9]+' | sort -u > "$tmp/help_codes"
awk '/^### Exit codes/ { on = 1; next } on && /^#/ { exit } on' "$USAGE" | sed -n 's/^| \([0-9][0-9]*\) |.*/\1/p' |
    sort -u > "$tmp/usage_codes"
if [ -s "$tmp/help_codes" ] && cmp -s "$tmp/help_codes" "$tmp/usage_codes"; then pass
else fail "exit codes: gpt --help has $(tr '\n' ' ' < "$tmp/help_codes"), $USAGE's table $(tr '\n' ' ' < "$tmp/usage_codes")"
fi

# --- --json's fields ------------------------------------------------------
# a generation's --json (two threads, past the context: every field there
# is): its keys are named in the manual's --json entry, its stats' keys in
# usage.md's paragraph of them (or as stats.KEY)
if ! command -v jq > /dev/null 2>&1; then
    if [ "${GPT_TEST_REQUIRE_ALL:-0}" = 1 ]; then fail "jq is not installed: --json's fields are not checked"
    else echo "check_docs: jq is not installed: --json's fields are not checked"
    fi
else
    GPT_TUNE=off "$GPT" -q -m models/demo.bin -p Hello -n 300 -s 1 -t 2 --context-shift --json > "$tmp/run.json" 2> "$tmp/err" ||
        fail "gpt --json failed: $(cat "$tmp/err")"
    awk 'prev == ".TP" && /^--json$/ { n++ } n == 1 { print } n == 1 && /^\.TP/ { exit } { prev = $0 }' "$tmp/man" \
        > "$tmp/man_json"
    awk '/With `--json` the same figures/ { on = 1 } on && /^$/ { exit } on' "$USAGE" > "$tmp/usage_stats"
    grep -o 'stats\.[a-z_]*' "$USAGE" | sed 's/^stats\./`/; s/$/`/' >> "$tmp/usage_stats"
    [ -s "$tmp/man_json" ] && [ -s "$tmp/usage_stats" ] || fail "found no --json entry in $MAN or stats paragraph in $USAGE"
    for k in $(jq -r 'keys[]' "$tmp/run.json"); do
        if grep -qw -- "$k" "$tmp/man_json"; then pass
        else fail "gpt --json has the field $k, which $MAN's --json entry does not name"
        fi
    done
    for k in $(jq -r '.stats | keys[]' "$tmp/run.json"); do
        if grep -qF -- "\`$k\`" "$tmp/usage_stats"; then pass
        else fail "gpt --json's stats has $k, which $USAGE's paragraph of the stats does not name"
        fi
    done
fi

# --- links ------------------------------------------------------------------
# [text](target) outside code spans and indented blocks: FILE <TAB> LINE <TAB> TARGET
# anchors FILE: the ids GitHub gives FILE's headings (lower case, letters,
# digits, _ and - kept, spaces as -; a repeated one -1, -2, ...)
anchors() {
    sed -n 's/^#\{1,6\} \(.*\)/\1/p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g' |
        awk '{ n = seen[$0]++; print n ? $0 "-" n : $0 }'
}
for doc in README.md docs/*.md; do
    awk '/^```/ { fence = !fence; next } fence || /^    / { next }
         { line = $0; gsub(/`[^`]*`/, "", line)
           while (match(line, /\]\([^) ]+\)/)) {
               print FILENAME "\t" FNR "\t" substr(line, RSTART + 2, RLENGTH - 3)
               line = substr(line, RSTART + RLENGTH) } }' "$doc"
done > "$tmp/links"
[ "$(wc -l < "$tmp/links")" -ge 10 ] || fail "found $(wc -l < "$tmp/links") links in README.md and docs/*.md"
while IFS='	' read -r doc line target; do
    case $target in http://* | https://* | mailto:*) continue ;; esac
    path=${target%%#*}
    anchor=
    case $target in *'#'*) anchor=${target#*#} ;; esac
    if [ -n "$path" ]; then file=$(dirname "$doc")/$path; else file=$doc; fi
    if [ ! -e "$file" ]; then
        fail "$doc:$line: the link ($target) names $file, which does not exist"
    elif [ -n "$anchor" ] && [ -f "$file" ] && ! anchors "$file" | grep -qxF -- "$anchor"; then
        fail "$doc:$line: the link ($target): $file has no heading #$anchor"
    else
        pass
    fi
done < "$tmp/links"

summary

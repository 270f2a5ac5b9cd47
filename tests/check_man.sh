#!/bin/sh
# The manual page, man/gpt.1, says what gpt --help says, and --help what
# the option parser accepts: this fails, naming the option, when one has an
# option another lacks.
#   - every option the parser accepts (src/cli/options.c's struct option
#     array, and src/serve/serve.c's, each with the options gpt and gpt
#     serve share, src/front/model_options.c's; run_convert's and
#     run_inspect's struct option array and getopt_long string in
#     src/cli/convert.c) is in the help, every option of the help is
#     accepted, and it takes a value where the help gives it an argument;
#   - every option of `gpt --help` (its option lines, and the mode options
#     its usage lines name, such as --batch) is a .TP tag of the page's
#     MODES or OPTIONS section, and every option such a tag names is in
#     --help;
#   - the same for each subcommand of the usage lines (gpt convert): the
#     options of `gpt SUB --help` and the tags of the page's "SUB OPTIONS";
#     and the subcommands themselves, against the MODES tags "gpt SUB";
#   - each option's argument (PATH, N) is the one --help gives, and every
#     default --help states ("default 256", "f32 (default)") is in the
#     option's entry;
#   - the exit codes of --help are the tags of EXIT STATUS, the variables
#     src/ reads with getenv those of ENVIRONMENT, and .TH's version is
#     `gpt --version`'s;
#   - groff -man -ww (else mandoc -T lint) reports nothing, and
#     `man ./man/gpt.1` renders it; each is skipped, saying so, where the
#     tool is not installed.
# Prints "check_man: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), MAN (default man/gpt.1), SETTINGS_DOCS
# (default: settings_docs beside $GPT).
GPT=${GPT:-build/gpt}
MAN=${MAN:-man/gpt.1}
CHECK_NAME=check_man
# shellcheck source=tests/checklib.sh
. tests/checklib.sh

# The .TP entries of the page, one per line: SECTION <TAB> TAG <TAB> TEXT,
# the tag and the text as they read (fonts, \- and \e undone).
awk '
function norm(s) {
    gsub(/\\f[BIRP]/, "", s)
    gsub(/\\-/, "-", s)
    gsub(/\\\(dq|\\\(lq|\\\(rq/, "\"", s)
    gsub(/\\\(aq/, "\047", s)
    gsub(/\\&|\\%/, "", s)
    gsub(/\\e/, "\\\\", s)
    return s
}
function text(line) {
    if (line ~ /^\.\\"/) return ""
    if (line ~ /^\.(B|I|BI|BR|IR|RB|RI|IB|SM) /) {
        sub(/^\.[A-Z]+ /, "", line)
        gsub(/"/, "", line)
    } else if (line ~ /^\./) return ""
    return norm(line)
}
function flush() {
    if (tag != "") print sec "\t" tag "\t" body
    tag = ""
    body = ""
}
/^\.SH/ { flush(); sec = $0; sub(/^\.SH +/, "", sec); gsub(/"/, "", sec); next }
/^\.(TP|SS|IP)/ { flush(); want = /^\.TP/; next }
want && /^\.\\"/ { next }
want { tag = text($0); want = 0; next }
tag != "" { t = text($0); if (t != "") body = body " " t }
END { flush() }
' "$MAN" > "$tmp/entries"

# man_options SECTION...: the options the tags of those sections name, one
# per line: OPTION <TAB> ARG (the first capitalised word after it).
man_options() {
    for s in "$@"; do
        awk -F '\t' -v s="$s" '$1 == s { print $2 }' "$tmp/entries"
    done | awk '{
        n = split($0, w, /[ ,]+/); k = 0; arg = ""
        for (i = 1; i <= n; i++)
            if (w[i] ~ /^-[-a-zA-Z0-9]/) o[++k] = w[i]
            else if (k && arg == "" && w[i] ~ /^[A-Z][A-Z0-9]*$/) arg = w[i]
        for (i = 1; i <= k; i++) print o[i] "\t" arg
    }' | sort -u
}

# man_text SECTION OPTION: the text of the entry whose tag names OPTION.
man_text() {
    awk -F '\t' -v s="$1" -v o="$2" '$1 == s {
        n = split($2, w, /[ ,]+/)
        for (i = 1; i <= n; i++) if (w[i] == o) { print $3; exit }
    }' "$tmp/entries"
}

# compare WHAT HELP-FILE MAN-SECTION...: the options of a help text against
# the tags of the page's sections, both ways, with arguments and defaults.
compare() {
    what=$1 help=$2
    shift 2
    awk -f tests/help_options.awk "$help" > "$tmp/entries_help"
    { cut -f1 "$tmp/entries_help"; grep -o -- '--[a-z][a-z0-9-]*' "$help"; } | sort -u > "$tmp/help_opts"
    man_options "$@" > "$tmp/man_opts"
    cut -f1 "$tmp/man_opts" | sort -u > "$tmp/man_names"
    for o in $(cat "$tmp/help_opts"); do
        if grep -qxF -- "$o" "$tmp/man_names"; then pass
        else fail "$o (in $what --help) is not in $MAN ($*)"
        fi
    done
    for o in $(cat "$tmp/man_names"); do
        if grep -qxF -- "$o" "$tmp/help_opts"; then pass
        else fail "$MAN lists $o ($*), which $what --help does not have"
        fi
    done
    # arguments and defaults of the options --help lists with an entry
    for o in $(cut -f1 "$tmp/entries_help"); do
        grep -qxF -- "$o" "$tmp/man_names" || continue
        arg=$(awk -F '\t' -v o="$o" '$1 == o { print $2; exit }' "$tmp/entries_help")
        defaults=$(awk -F '\t' -v o="$o" '$1 == o { print $3; exit }' "$tmp/entries_help")
        marg=$(awk -F '\t' -v o="$o" '$1 == o { print $2; exit }' "$tmp/man_opts")
        if [ "$marg" = "$arg" ]; then pass
        else fail "$o: $what --help gives it the argument '${arg}', $MAN '${marg}'"
        fi
        [ -n "$defaults" ] || continue
        mtext=$(for s in "$@"; do man_text "$s" "$o"; done)
        echo "$defaults" | tr '|' '\n' > "$tmp/defaults"
        while read -r d; do
            case "$mtext" in
                *"$d"*) pass ;;
                *) fail "$o: $what --help says '$d', its entry in $MAN does not" ;;
            esac
        done < "$tmp/defaults"
    done
}

# the table of settings' getopt entries (scripts/settings_docs.c), beside gpt
SETTINGS_DOCS=${SETTINGS_DOCS:-$(dirname "$GPT")/settings_docs}
# The options of a run with a model that gpt and gpt serve share: one
# table, which each parser that reads argv with options_begin (front.h) has.
SHARED_OPTIONS=src/front/model_options.c

# parser_options FILE [FUNCTION]: the options the parser in FILE (in
# FUNCTION's body) accepts, one per line: OPTION <TAB> 1 if it takes a
# value, else 0; from its struct option array and its getopt_long string,
# or, where it reads argv with options_begin, from the whole of FILE and
# $SHARED_OPTIONS, whose tables make an option whose code is a letter
# also -LETTER.
parser_options() {
    if grep -q 'options_begin(' "$1"; then
        cat "$1" "$SHARED_OPTIONS"
    elif [ -n "$2" ]; then
        sed -n "/^int $2(/,/^}/p" "$1"
    else
        cat "$1"
    fi > "$tmp/parser_src"
    grep -oE '\{"[a-z0-9-]+", *(no|required|optional)_argument' "$tmp/parser_src" |
        sed -E 's/^\{"([a-z0-9-]+)", *(no|required|optional)_argument/--\1 \2/' |
        awk '{ print $1 "\t" ($2 == "no" ? 0 : 1) }'
    if grep -q 'options_begin(' "$1"; then
        grep -oE "\\{\"[a-z0-9-]+\", *(no|required|optional)_argument, *0, *'[A-Za-z0-9]'" "$tmp/parser_src" |
            sed -E "s/^.*(no|required|optional)_argument, *0, *'(.)'/-\\2 \\1/" |
            awk '{ print $1 "\t" ($2 == "no" ? 0 : 1) }'
    fi
    # the generation settings a parser takes from the table (settings.c)
    if grep -q 'settings_options(IN_GPT' "$1"; then "$SETTINGS_DOCS" options gpt; fi
    if grep -q 'settings_options(IN_CHAT' "$1"; then "$SETTINGS_DOCS" options chat; fi
    grep -oE 'getopt_long\(argc, argv, "[^"]*"' "$tmp/parser_src" | sed 's/.*"\(.*\)"/\1/' |
        awk '{ s = $0; sub(/^:/, "", s)
               for (i = 1; i <= length(s); i++) {
                   c = substr(s, i, 1)
                   if (c == ":") continue
                   print "-" c "\t" (substr(s, i + 1, 1) == ":" ? 1 : 0)
               } }'
}

# check_parser WHAT HELP-FILE SOURCE [FUNCTION]: the options the parser
# accepts are the options the help lists, both ways, and those the help
# gives an argument take a value.
check_parser() {
    what=$1 help=$2 src=$3
    parser_options "$src" "$4" | sort -u > "$tmp/parser"
    if [ ! -s "$tmp/parser" ]; then
        fail "found no options in $src${4:+ ($4)}: has its struct option array moved?"
        return
    fi
    awk -f tests/help_options.awk "$help" > "$tmp/entries_help"
    { cut -f1 "$tmp/entries_help"; grep -o -- '--[a-z][a-z0-9-]*' "$help"; } | sort -u > "$tmp/help_opts"
    cut -f1 "$tmp/parser" > "$tmp/parser_names"
    for o in $(cat "$tmp/parser_names"); do
        if grep -qxF -- "$o" "$tmp/help_opts"; then pass
        elif [ "$what" != gpt ] && { [ "$o" = -h ] || [ "$o" = --help ]; }; then pass  # what prints the help
        else fail "$src accepts $o, which $what --help does not list"
        fi
    done
    for o in $(cat "$tmp/help_opts"); do
        if grep -qxF -- "$o" "$tmp/parser_names"; then pass
        else fail "$what --help lists $o, which $src${4:+ ($4)} does not accept"
        fi
    done
    for o in $(cut -f1 "$tmp/entries_help"); do
        takes=$(awk -F '\t' -v o="$o" '$1 == o { print $2; exit }' "$tmp/parser")
        [ -n "$takes" ] || continue
        arg=$(awk -F '\t' -v o="$o" '$1 == o { print $2; exit }' "$tmp/entries_help")
        if { [ -n "$arg" ] && [ "$takes" = 1 ]; } || { [ -z "$arg" ] && [ "$takes" = 0 ]; }; then pass
        else fail "$o: $what --help gives it the argument '${arg}', $src says it takes $([ "$takes" = 1 ] && echo one || echo none)"
        fi
    done
}

if ! "$GPT" --help > "$tmp/help" 2> "$tmp/err"; then
    fail "$GPT --help failed: $(cat "$tmp/err")"
    summary
    exit 1
fi
compare "gpt" "$tmp/help" MODES OPTIONS
check_parser "gpt" "$tmp/help" src/cli/options.c

# The subcommands: "gpt convert ..." in the usage lines, "gpt convert" as a
# MODES tag; each one's options in "CONVERT OPTIONS".
sed -n 's/^\(usage:\)\{0,1\} *gpt \([a-z][a-z]*\)\( .*\)\{0,1\}$/\2/p' "$tmp/help" | sort -u > "$tmp/help_subs"
awk -F '\t' '$1 == "MODES" && $2 ~ /^gpt [a-z]/ { split($2, w, " "); print w[2] }' "$tmp/entries" | sort -u > "$tmp/man_subs"
for sub in $(cat "$tmp/help_subs"); do
    if grep -qxF "$sub" "$tmp/man_subs"; then pass
    else fail "the subcommand gpt $sub (in gpt --help) is not a MODES entry of $MAN"
    fi
    if "$GPT" "$sub" --help > "$tmp/help_$sub" 2> "$tmp/err"; then
        compare "gpt $sub" "$tmp/help_$sub" "$(echo "$sub" | tr a-z A-Z) OPTIONS"
        src=$(grep -l "^int run_$sub(" src/cli/*.c src/serve/*.c | head -n 1)
        if [ -n "$src" ]; then check_parser "gpt $sub" "$tmp/help_$sub" "$src" "run_$sub"
        else fail "no src/cli or src/serve file defines run_$sub, the parser of gpt $sub"
        fi
    else
        fail "$GPT $sub --help failed: $(cat "$tmp/err")"
    fi
done
for sub in $(cat "$tmp/man_subs"); do
    if grep -qxF "$sub" "$tmp/help_subs"; then pass
    else fail "$MAN has the subcommand gpt $sub, which gpt --help does not have"
    fi
done

# Exit codes: "exit codes: 0 success, 1 ..., 2 ..., 130 ..." in --help.
sed -n '/^exit codes:/,$p' "$tmp/help" | tr '\n' ' ' | sed 's/^exit codes://' |
    grep -oE '(^|[:,]) *[0-9]+ [a-z]' | grep -oE '[0-9]+' | sort -u > "$tmp/help_codes"
awk -F '\t' '$1 == "EXIT STATUS" { print $2 }' "$tmp/entries" | sort -u > "$tmp/man_codes"
if [ -s "$tmp/help_codes" ] && cmp -s "$tmp/help_codes" "$tmp/man_codes"; then pass
else fail "exit codes: gpt --help has $(tr '\n' ' ' < "$tmp/help_codes"), $MAN's EXIT STATUS $(tr '\n' ' ' < "$tmp/man_codes")"
fi

# The environment: what src/ reads with getenv.
grep -rhoE 'getenv\("[A-Za-z_][A-Za-z0-9_]*"\)' src | sed 's/getenv("\(.*\)")/\1/' | sort -u > "$tmp/src_env"
awk -F '\t' '$1 == "ENVIRONMENT" { print $2 }' "$tmp/entries" | sort -u > "$tmp/man_env"
for v in $(cat "$tmp/src_env"); do
    if grep -qxF "$v" "$tmp/man_env"; then pass
    else fail "src/ reads \$$v, which the ENVIRONMENT of $MAN does not list"
    fi
done
for v in $(cat "$tmp/man_env"); do
    if grep -qxF "$v" "$tmp/src_env"; then pass
    else fail "$MAN lists \$$v in ENVIRONMENT, which nothing in src/ reads"
    fi
done

# The version in .TH's footer: .TH GPT 1 DATE "gpt 0.1.0" ...
version=$("$GPT" --version)
if grep -q "^\.TH GPT 1 [^ ]* \"$version\"" "$MAN"; then pass
else fail ".TH of $MAN does not say \"$version\" (gpt --version)"
fi

# The EXAMPLES that read a book (< book.txt) run as written, with the demo
# model on a text longer than its context (256 positions): each exits 0 and
# prints something; one that cuts a field out prints a number.
head -c 4000 tests/fixtures/heldout/sotu-2021.txt > "$tmp/book.txt"
awk '/^\.SH/ { ex = /EXAMPLES/ } ex && /^\.EX/ { on = 1; next } /^\.EE/ { on = 0 } ex && on' "$MAN" |
    sed 's/\\-/-/g; s/\\(aq/'\''/g; s/\\e/\\/g; s/  *# .*//' | grep 'book\.txt' > "$tmp/book_examples"
[ -s "$tmp/book_examples" ] || fail "no example of $MAN reads book.txt: has EXAMPLES moved?"
while IFS= read -r example; do
    cmd=$(echo "$example" | sed "s|^gpt |\"$GPT\" -m models/demo.bin |; s|book\.txt|$tmp/book.txt|")
    if eval "$cmd" > "$tmp/out" 2> "$tmp/err" && [ -s "$tmp/out" ] &&
        { ! echo "$example" | grep -q '| *cut' || grep -Eqx -- '-?[0-9]+(\.[0-9]+)?' "$tmp/out"; }; then
        pass
    else
        fail "the example '$example' on a text longer than the context: $(head -c 300 "$tmp/out") $(grep -v 'demo model' "$tmp/err")"
    fi
done < "$tmp/book_examples"

# Lint: groff's warnings (all of them, -ww), else mandoc's.
if command -v groff > /dev/null 2>&1; then
    groff -man -Tutf8 -ww -z "$MAN" > "$tmp/lint" 2>&1
    if [ $? -eq 0 ] && [ ! -s "$tmp/lint" ]; then pass
    else fail "groff -man -ww $MAN warns:"; sed 's/^/    /' "$tmp/lint"
    fi
elif command -v mandoc > /dev/null 2>&1; then
    if mandoc -T lint -W warning "$MAN" > "$tmp/lint" 2>&1; then pass
    else fail "mandoc -T lint $MAN warns:"; sed 's/^/    /' "$tmp/lint"
    fi
else
    skip_part "neither groff nor mandoc is installed: the lint"
fi
# man ./man/gpt.1 (a name with a / is a file to man-db) from the source tree
if command -v man > /dev/null 2>&1 && { command -v groff || command -v mandoc; } > /dev/null 2>&1; then
    case "$MAN" in */*) page=$MAN ;; *) page=./$MAN ;; esac
    MANPAGER=cat MANWIDTH=80 man "$page" > "$tmp/page" 2> "$tmp/err"
    if grep -q '^NAME' "$tmp/page" && grep -q -- '--max-tokens' "$tmp/page"; then pass
    else fail "man $page did not render it: $(cat "$tmp/err")"
    fi
else
    skip_part "man (or groff and mandoc) is not installed: man ./$MAN"
fi

summary

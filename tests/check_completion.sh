#!/bin/sh
# The bash completion, completions/gpt.bash, knows what gpt has:
#   - every option of `gpt --help` (and of `gpt convert --help`, `gpt
#     inspect --help`) is in its tables, and every option of its tables in
#     the help (-h and --help of a subcommand: `gpt SUB -h` must work);
#   - an option takes a value in the tables where --help gives it an
#     argument, and only there;
#   - its values of --dtype and --kv-type are those --help lists, and gpt
#     (and gpt convert) accepts each of them and refuses another;
#   - each option applies to the modes its table says, and only to them:
#     gpt itself is asked (`gpt --score OPTION ... -m /nonexistent` exits 2
#     where OPTION does not apply, 0 or 1 where it does);
#   - and it completes: --kv-t, the dtypes after --dtype (and --dtype=),
#     file names after -m and --tokenizer, the subcommands, the options of
#     the mode given (--batch --j is --json-schema, --json-object and --jsonl, not --json).
# Prints "check_completion: N passed, M failed" like the test binaries; with
# no bash installed, says so and passes.
# Environment: GPT (default build/gpt), COMPLETION (completions/gpt.bash).
if [ -z "$BASH_VERSION" ]; then
    if ! command -v bash > /dev/null 2>&1; then
        echo "check_completion: bash is not installed: skipped"
        echo "check_completion: 0 passed, 0 failed"
        exit 0
    fi
    exec bash "$0" "$@"
fi

GPT=${GPT:-build/gpt}
COMPLETION=${COMPLETION:-completions/gpt.bash}
CHECK_NAME=check_completion
# shellcheck source=tests/checklib.sh
. tests/checklib.sh

# shellcheck source=completions/gpt.bash
if ! source "$COMPLETION"; then
    fail "source $COMPLETION failed"
    summary
    exit 1
fi

# table_field TABLE OPTION N: field N of OPTION's row in the table
table_field() {
    awk -v o="$2" -v n="$3" '$1 == o { print $n; exit }' <<< "$1"
}

# check_table WHAT HELP-FILE TABLE: the help's options against the table
check_table() {
    local what=$1 help=$2 table=$3 o arg value
    awk -f tests/help_options.awk "$help" > "$tmp/entries"
    { cut -f1 "$tmp/entries"; grep -o -- '--[a-z][a-z0-9-]*' "$help"; } | sort -u > "$tmp/help_opts"
    awk 'NF { print $1 }' <<< "$table" | sort -u > "$tmp/table_opts"
    for o in $(cat "$tmp/help_opts"); do
        if grep -qxF -- "$o" "$tmp/table_opts"; then pass
        else fail "$o (in $what --help) is not in $COMPLETION"
        fi
    done
    for o in $(cat "$tmp/table_opts"); do
        if grep -qxF -- "$o" "$tmp/help_opts"; then pass
        elif [ "$what" != gpt ] && { [ "$o" = -h ] || [ "$o" = --help ]; }; then
            # not in the subcommand's help, which it prints
            if "$GPT" ${what#gpt } "$o" > /dev/null 2>&1; then pass
            else fail "$COMPLETION has $o for $what, which refuses it"
            fi
        else fail "$COMPLETION has $o for $what, which $what --help does not have"
        fi
    done
    for o in $(cat "$tmp/help_opts"); do
        grep -qxF -- "$o" "$tmp/table_opts" || continue
        arg=$(awk -F '\t' -v o="$o" '$1 == o { print $2; exit }' "$tmp/entries")
        value=$(table_field "$table" "$o" 3)
        if [ -n "$arg" ] && [ "$value" = - ]; then
            fail "$o takes $arg ($what --help), $COMPLETION says it takes no value"
        elif [ -z "$arg" ] && [ "$value" != - ]; then
            fail "$o takes no value ($what --help), $COMPLETION says it takes one ($value)"
        else pass
        fi
    done
}

if ! "$GPT" --help > "$tmp/help" 2> "$tmp/err"; then
    fail "$GPT --help failed: $(cat "$tmp/err")"
    summary
    exit 1
fi
check_table gpt "$tmp/help" "$_gpt_options$_gpt_settings"
subs=$(sed -n 's/^\(usage:\)\{0,1\} *gpt \([a-z][a-z]*\)\( .*\)\{0,1\}$/\2/p' "$tmp/help" | sort -u | tr '\n' ' ')
if [ "${subs% }" = "$(tr ' ' '\n' <<< "$_gpt_subcommands" | sort -u | tr '\n' ' ' | sed 's/ $//')" ]; then pass
else fail "subcommands: gpt --help has '${subs% }', $COMPLETION '$_gpt_subcommands'"
fi
for sub in $subs; do
    table_var=_gpt_${sub}_options
    if [ -z "${!table_var}" ]; then
        fail "$COMPLETION has no \$$table_var for gpt $sub"
        continue
    fi
    "$GPT" "$sub" --help > "$tmp/help_$sub" 2>&1 || fail "$GPT $sub --help failed"
    settings_var=_gpt_${sub}_settings  # the generated rows of the settings it takes (make docs)
    check_table "gpt $sub" "$tmp/help_$sub" "${!table_var}${!settings_var-}"
done

# The values of --dtype and --kv-type: the words like f16 or q4-pure in
# their help entries, accepted by gpt (gpt --dtype f16 --help is the help;
# a value it refuses is a usage error first), and by gpt convert for --dtype.
values() {
    awk -F '\t' -v o="$1" '$1 == o { print $4; exit }' "$2" | tr ' ,()' '\n\n\n\n' |
        grep -E '^[a-z]+[0-9]+(-[a-z]+)?$' | awk '!seen[$0]++' | tr '\n' ' ' | sed 's/ $//'
}
awk -f tests/help_options.awk "$tmp/help" > "$tmp/entries"
for pair in "--dtype:$_gpt_dtypes" "--kv-type:$_gpt_kv_types"; do
    o=${pair%%:*} list=${pair#*:}
    help_values=$(values "$o" "$tmp/entries")
    if [ "$help_values" = "$list" ]; then pass
    else fail "$o: gpt --help lists '$help_values', $COMPLETION '$list'"
    fi
    for v in $list; do
        if "$GPT" "$o" "$v" --help > /dev/null 2>&1; then pass
        else fail "$COMPLETION offers $o $v, which gpt refuses"
        fi
    done
    "$GPT" "$o" f64 --help > /dev/null 2>&1
    if [ $? -eq 2 ]; then pass; else fail "gpt $o f64 is not a usage error (the check above means nothing)"; fi
done
# --tune's modes: each a word of its help entry, accepted by gpt
tune_entry=" $(awk -F '\t' '$1 == "--tune" { print $4; exit }' "$tmp/entries" | tr ',():;' '     ') "
for v in $_gpt_tune_modes; do
    case $tune_entry in
        *" $v "*) pass ;;
        *) fail "--tune: $COMPLETION offers $v, which gpt --help's entry ($tune_entry) does not name" ;;
    esac
    if "$GPT" --tune "$v" --help > /dev/null 2>&1; then pass
    else fail "$COMPLETION offers --tune $v, which gpt refuses"
    fi
done
for v in $_gpt_dtypes; do
    if "$GPT" convert --dtype "$v" --help > /dev/null 2>&1; then pass
    else fail "$COMPLETION offers gpt convert --dtype $v, which gpt convert refuses"
    fi
done

# The modes: each option with a value it takes, after each mode's option,
# and a model that does not exist, so that nothing runs: exit 2 with "does
# not apply" (or "exclude each other") is refused, 0 (--help) or 1 (no such
# model) accepted; any other usage error is a value sample() should give.
# sample OPTION: a value OPTION accepts (words: an option that needs another
# one beside it gets that too)
sample() {
    case $1 in
        -m | --model | --tokenizer) echo /nonexistent/gpt-model ;;
        --dtype | --kv-type) echo f16 ;;
        --q8-act) echo int8 ;;
        -p | --prompt | --stop) echo x ;;
        --kv-budget) echo 1G ;;
        --chat-template) echo chatml ;;
        --min-p) echo 0 ;;
        --logit-bias) echo 1=1 ;;
        --tune) echo off ;;
        --draft) echo /nonexistent/gpt-model ;;
        --draft-dtype) echo q8 ;;
        --draft-tokens) echo "1 --lookup 2" ;;
        --keep) echo "1 --context-shift" ;;
        *) echo 1 ;;
    esac
}
while read -r name modes value; do
    [ -n "$name" ] || continue
    for m in g b s t d c a; do
        case $m in
            g) mode_opt= ;; b) mode_opt=--batch ;; s) mode_opt=--score ;; t) mode_opt=--tokenize ;;
            d) mode_opt=--detokenize ;; c) mode_opt="--choice x" ;; a) mode_opt=--apply-template ;;
        esac
        # a mode's own option: alone; generation has none (a mode option
        # alone is its own mode)
        [ "$name" = "${mode_opt%% *}" ] && mode_opt=
        case $m:$name in g:--batch | g:--score | g:--tokenize | g:--detokenize | g:--choice | g:--apply-template) continue ;; esac
        set -- $mode_opt "$name"
        [ "$value" = - ] || set -- "$@" $(sample "$name")
        # -m once: an option of one value given twice is refused
        case $name in -m | --model) ;; *) set -- "$@" -m /nonexistent/gpt-model ;; esac
        "$GPT" "$@" < /dev/null > /dev/null 2> "$tmp/err"
        rc=$?
        case $modes in *$m*) want="applies" ;; *) want="does not apply" ;; esac
        if [ $rc -ne 2 ]; then got="applies"
        elif grep -qE 'does not apply|exclude each other' "$tmp/err"; then got="does not apply"
        else
            fail "gpt $*: a usage error that is not about the mode (give it a value in sample()): $(head -c 200 "$tmp/err")"
            continue
        fi
        if [ "$want" = "$got" ]; then pass
        else fail "gpt $* (mode $m): $COMPLETION says $name $want, gpt exits $rc: $(head -c 200 "$tmp/err")"
        fi
    done
done <<< "$_gpt_options$_gpt_settings"

# What it completes.
# complete WORD... : COMPREPLY for the command line WORDS, the last being
# the word the cursor is in, joined by spaces
complete_words() {
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _gpt
    echo "${COMPREPLY[*]}"
}
# expect 'WANT' WORD...: the completion of WORD... is exactly WANT
expect() {
    local want=$1 got
    shift
    got=$(complete_words "$@")
    if [ "$got" = "$want" ]; then pass
    else fail "completing '$*' gives '$got', not '$want'"
    fi
}
# expect_has 'WORD' WORD...: the completion of WORD... includes WORD
expect_has() {
    local want=$1 got
    shift
    got=" $(complete_words "$@") "
    case $got in
        *" $want "*) pass ;;
        *) fail "completing '$*' gives '$got', without '$want'" ;;
    esac
}
expect "--kv-type" gpt --kv-t
expect "$_gpt_dtypes" gpt --dtype ""
expect "$_gpt_kv_types" gpt --kv-type ""
expect "$_gpt_kv_types" gpt --kv-t ""
expect "$_gpt_dtypes" gpt --dtype = ""       # --dtype=, as bash splits it
expect "bf16" gpt --dtype = b
expect "--dtype=bf16" gpt --dtype=b          # COMP_WORDBREAKS without "="
expect "" gpt -n ""
expect "" gpt -p ""
expect "tests/check_completion.sh" gpt -m tests/check_compl
expect "tests/check_completion.sh" gpt --model tests/check_compl
expect "models/vocab.json" gpt --tokenizer models/vocab
expect "convert" gpt conv
expect_has "inspect" gpt ""
expect_has "--batch" gpt ""
expect "--jsonl --json-schema --json-object" gpt --batch --j  # not --json
expect "--stats-json --stride --stats" gpt --score --st
expect "--stats-json" gpt --stats --stats  # --stats given: not again
expect "--stop" gpt --stop x --sto         # --stop repeats
expect "--unordered" gpt -n 5 --batch --un
expect "--dtype --lora --tokenizer --force --progress --help" gpt convert --
expect "$_gpt_dtypes" gpt convert --dtype ""
expect "models/demo.bin" gpt convert models/demo.b
expect "models/demo.bin" gpt inspect models/demo.b
expect "-h --help" gpt inspect -
# --tune's modes, as --help lists them; model files first for -m and --draft
# (models/ holds demo.bin beside the tokenizer's files), else every file
expect "on off force" gpt --tune ""
expect "on off force" gpt serve --tune ""
expect "models/demo.bin" gpt -m models/
expect "models/demo.bin" gpt --draft models/
expect "models/demo.bin" gpt serve -m models/
expect "models/demo.bin" gpt tune --model models/
expect "--dtype" gpt tune --dt

summary

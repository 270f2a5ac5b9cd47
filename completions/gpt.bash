# bash completion for gpt(1): its options (those of the mode given so far),
# the modes and the subcommands, the values of --dtype and --kv-type, and
# file names for -m/--model, --tokenizer and the files of gpt convert and
# gpt inspect; the modes of --tune, and model files first for -m and
# --draft; gpt serve's, gpt tune's, gpt chat's and gpt embed's options (the model's options are gpt's own, shared
# by src/front/model_options.c). Abbreviated options (--kv-t f16) and
# --opt=value work as they do in gpt.
#
# Installed by `make install` as PREFIX/share/bash-completion/completions/gpt
# (bash-completion loads it the first time gpt is completed); from the source
# tree: source completions/gpt.bash
#
# tests/check_completion.sh holds this file to gpt --help and to the option
# parser: every option of the help is in the tables below and every one of
# them in the help, and each applies to exactly the modes listed.

# Each option of gpt; the modes it applies to (g generation, b --batch,
# s --score, t --tokenize, d --detokenize, c --choice, a --apply-template;
# src/cli/options.c's
# modes_of);
# its value: - (none), file, model (a file, model files first), dtype,
# kvtype, q8act, tune, pooling, or text (not completed).
_gpt_options='
-m                  gbstdca model
--model             gbstdca model
-p                  gstdca text
--prompt            gstdca text
--keep-newline      gstc   -
--tokenizer         gbstdca file
--dtype             gbsc   dtype
--q8-act            gbsc   q8act
--lora              gbsc   file
--kv-type           gbsc   kvtype
--special           gbstc  -
--draft             g      model
--draft-dtype       g      dtype
--draft-tokens      g      text
--lookup            g      text
--jsonl             b      -
--parallel          b      text
--kv-budget         b      text
--unordered         b      -
--text              b      -
--first-index       b      text
--prefill-chunk     b      text
--no-prefix-sharing b      -
--stats-json        gbsc   -
--per-token         gs     -
--stride            s      text
--prepend-eos       s      -
--json              gstc   -
--stats             gbsc   -
-t                  gbsc   text
--threads           gbsc   text
-h                  gbstdca -
--help              gbstdca -
--version           gbstdca -
--batch             b      -
--score             s      -
--tokenize          t      -
--detokenize        d      -
--progress          bs     -
--blas              gs     -
--tune              gbsc   tune
--choice            c      text
--chat-template     ga     file
--apply-template    a      -
-q                  gbstdca -
--quiet             gbstdca -
'
# The subcommands' options (the modes column is unused: "c").
_gpt_convert_options='
--dtype             gbsc  dtype
--lora              c     file
--tokenizer         gbstdcfile
--force             c     -
--progress          c     -
-h                  gbstdc-
--help              gbstdc-
'
_gpt_inspect_options='
-h                  gbstdc-
--help              gbstdc-
'
_gpt_serve_options='
-m                  c     model
--model             c     model
--tokenizer         c     file
--dtype             c     dtype
--q8-act            c     q8act
--lora              c     file
--kv-type           c     kvtype
-t                  c     text
--threads           c     text
--tune              c     tune
-q                  c     -
--quiet             c     -
--host              c     text
--port              c     text
--port-file         c     file
--parallel          c     text
--kv-budget         c     text
--api-key           c     text
--cors-origin       c     text
--max-body          c     text
--max-tokens        c     text
--max-connections   c     text
--queue             c     text
--timeout           c     text
--grace             c     text
--log               c     file
--chat-template     c     file
--pooling           c     pooling
-h                  c     -
--help              c     -
'
_gpt_tune_options='
-m                  c     model
--model             c     model
--dtype             c     dtype
-t                  c     text
--threads           c     text
-q                  c     -
--quiet             c     -
-h                  c     -
--help              c     -
'
_gpt_chat_options='
-m                  c     model
--model             c     model
--tokenizer         c     file
--dtype             c     dtype
--q8-act            c     q8act
--lora              c     file
--kv-type           c     kvtype
--kv-budget         c     text
--parallel          c     text
-t                  c     text
--threads           c     text
--tune              c     tune
-q                  c     -
--quiet             c     -
--chat-template     c     file
--no-prefix-sharing c     -
--json              c     -
--stats             c     -
-h                  c     -
--help              c     -
'
_gpt_embed_options='
-m                  c     model
--model             c     model
--tokenizer         c     file
--dtype             c     dtype
--q8-act            c     q8act
--lora              c     file
--kv-type           c     kvtype
--kv-budget         c     text
--parallel          c     text
-t                  c     text
--threads           c     text
--tune              c     tune
-q                  c     -
--quiet             c     -
-p                  c     text
--prompt            c     text
--jsonl             c     -
--pooling           c     pooling
--no-normalize      c     -
--hidden-states     c     text
-h                  c     -
--help              c     -
'
# BEGIN generated settings (make docs; do not edit)
# gpt's generation settings (the modes: generation and --batch)
_gpt_settings='
-n                  gb     text
--max-tokens        gb     text
--temp              gb     text
--top-k             gb     text
--top-p             gb     text
--min-p             gb     text
--repeat-penalty    gb     text
--presence-penalty  gb     text
--frequency-penalty gb     text
--logit-bias        gb     text
-s                  gb     text
--seed              gb     text
--grammar           gb     file
--json-schema       gb     file
--json-object       gb     -
--regex             gb     text
--stop              gb     text
--ignore-eos        gb     -
--context-shift     gb     -
--keep              gb     text
--completions       gb     text
--echo              gb     -
--logprobs          gb     text
'
# gpt chat's
_gpt_chat_settings='
-n                  c      text
--max-tokens        c      text
--temp              c      text
--top-k             c      text
--top-p             c      text
--min-p             c      text
--repeat-penalty    c      text
--presence-penalty  c      text
--frequency-penalty c      text
--logit-bias        c      text
-s                  c      text
--seed              c      text
--stop              c      text
--ignore-eos        c      -
--context-shift     c      -
--keep              c      text
'
# END generated settings
_gpt_subcommands='chat convert embed inspect serve tune'
_gpt_dtypes='f32 f16 bf16 q8 q6 q4 q4-pure'
_gpt_kv_types='f32 f16'
_gpt_q8_acts='int16 int8'
_gpt_tune_modes='on off force'
_gpt_poolings='mean last'

# _gpt_resolve WORD TABLE: "NAME MODES VALUE" of the option WORD names in
# TABLE (exactly, or as an unambiguous abbreviation of a long option), or
# nothing.
_gpt_resolve() {
    local word=$1 name modes value found='' n=0
    while read -r name modes value; do
        [[ -n $name ]] || continue
        if [[ $name == "$word" ]]; then
            echo "$name $modes $value"
            return
        fi
        if [[ $word == --?* && $name == "$word"* ]]; then
            found="$name $modes $value"
            n=$((n + 1))
        fi
    done <<< "$2"
    ((n == 1)) && echo "$found"
}

# COMPREPLY: the words of $1 that start with $cur, each after $prefix.
_gpt_words() {
    local w
    COMPREPLY=()
    for w in $1; do
        [[ $w == "$cur"* ]] && COMPREPLY+=("$prefix$w")
    done
}

# COMPREPLY: the file and directory names that start with $cur.
_gpt_files() {
    local f
    COMPREPLY=()
    compopt -o filenames 2> /dev/null
    while IFS= read -r f; do
        COMPREPLY+=("$prefix$f")
    done < <(compgen -f -- "$cur")
}

# COMPREPLY: the model files (.bin, .safetensors, .gguf) and directories
# that start with $cur, or every file when there is none of them.
_gpt_models() {
    local f
    _gpt_files
    local all=("${COMPREPLY[@]}")
    COMPREPLY=()
    for f in "${all[@]}"; do
        f=${f#"$prefix"}
        [[ -d $f || $f == *.bin || $f == *.safetensors || $f == *.gguf ]] && COMPREPLY+=("$prefix$f")
    done
    ((${#COMPREPLY[@]})) || COMPREPLY=("${all[@]}")
}

_gpt() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev='' prefix='' table=$_gpt_options$_gpt_settings sub='' mode='' seen=' '
    local i w r name modes value list=
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    # --opt=value: bash splits the word at "=" (--dtype, =, f1) unless
    # COMP_WORDBREAKS lacks it (--dtype=f1)
    if [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]] && ((COMP_CWORD >= 2)); then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    elif [[ $cur == --*=* ]]; then
        prev=${cur%%=*}
        prefix=$prev=
        cur=${cur#*=}
    fi
    if ((COMP_CWORD >= 2)); then
        case ${COMP_WORDS[1]} in
            convert) sub=convert table=$_gpt_convert_options ;;
            inspect) sub=inspect table=$_gpt_inspect_options ;;
            serve) sub=serve table=$_gpt_serve_options ;;
            tune) sub=tune table=$_gpt_tune_options ;;
            chat) sub=chat table=$_gpt_chat_options$_gpt_chat_settings ;;
            embed) sub=embed table=$_gpt_embed_options ;;
        esac
    fi

    # the value of the option before it
    if [[ $prev == -* && ( -n $prefix || $prev != *=* ) ]]; then
        r=$(_gpt_resolve "$prev" "$table")
        if [[ -n $r ]]; then
            read -r name modes value <<< "$r"
            case $value in
                file) _gpt_files; return ;;
                model) _gpt_models; return ;;
                tune) _gpt_words "$_gpt_tune_modes"; return ;;
                dtype) _gpt_words "$_gpt_dtypes"; return ;;
                kvtype) _gpt_words "$_gpt_kv_types"; return ;;
                q8act) _gpt_words "$_gpt_q8_acts"; return ;;
                pooling) _gpt_words "$_gpt_poolings"; return ;;
                text) COMPREPLY=(); return ;;
            esac
        fi
    fi
    [[ -n $prefix ]] && { COMPREPLY=(); return; }

    # the options given so far, and the mode they choose
    i=1
    [[ -n $sub ]] && i=2
    for (( ; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ $w == -- ]]; then
            # no options after --: gpt takes no operands; convert and inspect, files
            COMPREPLY=()
            [[ -n $sub && $sub != serve && $sub != tune && $sub != chat && $sub != embed ]] && _gpt_files
            return
        fi
        [[ $w == -* ]] || continue
        r=$(_gpt_resolve "${w%%=*}" "$table")
        [[ -n $r ]] || continue
        read -r name modes value <<< "$r"
        seen+="$name "
        case $name in
            --batch) mode=b ;;
            --score) mode=s ;;
            --tokenize) mode=t ;;
            --detokenize) mode=d ;;
            --choice) mode=c ;;
            --apply-template) mode=a ;;
        esac
        # its value is the next word (not -n20, --temp=0.7)
        [[ $value != - && $w != *=* && ( $w == --* || ${#w} -eq 2 ) ]] && i=$((i + 1))
    done

    # convert and inspect take files; serve, tune, chat and embed take no operand
    if [[ -n $sub && $cur != -* ]]; then
        [[ $sub == serve || $sub == tune || $sub == chat || $sub == embed ]] && { COMPREPLY=(); return; }
        _gpt_files
        return
    fi
    # the options of the mode (all of them while none is given), less those
    # given already (--stop and --choice repeat)
    while read -r name modes value; do
        [[ -n $name ]] || continue
        [[ -z $mode || $modes == *$mode* ]] || continue
        [[ $name == --stop || $name == --choice || $seen != *" $name "* ]] || continue
        list+=" $name"
    done <<< "$table"
    ((COMP_CWORD == 1)) && list="$_gpt_subcommands $list"
    _gpt_words "$list"
}

complete -F _gpt gpt

#!/bin/sh
# The documents' examples are what gpt prints. In README.md and docs/*.md,
# an indented line "    $ COMMAND" is an example: it is run (sh -c, in a
# scratch directory where ./gpt and gpt are the build's gpt, models/ is
# the repository's, $GPT_MODEL is the demo model and GPT_TUNE=off), must
# exit 0, and its stdout must be byte for byte the indented lines below it,
# up to the next "$ " line or the first line that is not indented (the
# final newline aside, as a terminal shows it). So a JSON answer is compared
# in full, every digit of every number. An indented command without "$ "
# (one that needs GPT-2's weights, the network) is shown, not run.
# A "$ " example that calls localhost:8080 calls a `gpt serve -m
# models/demo.bin` this script starts on a free port (the port put in the
# command's place of 8080, and in $OPENAI_BASE_URL), as the document's
# unrun `gpt serve -m models/demo.bin --port 8080` line would. The scratch
# directory holds a copy of docs/examples/ and, from $NODE_DIR (default
# ~/.cache/gpt/node), node_modules; an example running `node` is skipped
# with a note where node or the openai package is missing (failed under
# GPT_TEST_REQUIRE_ALL=1). An indented block whose first line is
# "// docs/examples/FILE: ..." or "# docs/examples/FILE: ..." is that file,
# every line.
# Then: the README's table of exit codes is --help's, the licences, the
# README's Install section runs scripts/install-deps.sh, and that script's
# build part is all gpt needs: with pkg-config seeing only
# the .pc files of the packages it names and of their dependencies (dpkg),
# make finds every package, every source that includes a dependency's
# header compiles, and gpt links.
# Prints "check_readme: N passed, M failed" like the test binaries.
# Environment: GPT (default build/gpt), BUILD (default build: its objects
# are linked again for the install line's check).
# CHECK_README_PRINT=1 prints what each example printed instead of
# comparing (to write an example's output from the build's own).
GPT=${GPT:-build/gpt}
BUILD=${BUILD:-build}
passed=0
failed=0
repo=$(pwd)
tmp=$(mktemp -d)
trap '[ -n "$server_pid" ] && kill "$server_pid" 2> /dev/null; rm -rf "$tmp"' EXIT
case "$GPT" in /*) ;; *) GPT="$repo/$GPT" ;; esac

# check NAME EXPECTED-FILE ACTUAL-FILE
check() {
    if cmp -s "$2" "$3"; then
        passed=$((passed + 1))
    else
        echo "$1: the document shows"
        sed 's/^/    | /' "$2"; echo
        echo "but gpt prints"
        sed 's/^/    | /' "$3"; echo
        failed=$((failed + 1))
    fi
}

# The examples: each "$ " line and its output, written by awk as files
# $tmp/ex/N.cmd, N.want and N.where (FILE:LINE).
mkdir -p "$tmp/ex" "$tmp/bin" "$tmp/work"
ln -s "$GPT" "$tmp/bin/gpt"
ln -s "$GPT" "$tmp/work/gpt"
ln -s "$repo/models" "$tmp/work/models"
mkdir -p "$tmp/work/docs"
cp -R "$repo/docs/examples" "$tmp/work/docs/examples"
NODE_DIR=${NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpt/node}
have_node=
if command -v node > /dev/null 2>&1 && [ -f "$NODE_DIR/node_modules/openai/package.json" ]; then
    ln -s "$NODE_DIR/node_modules" "$tmp/work/node_modules"
    have_node=1
fi
# shellcheck source=tests/serve/ready.sh
. tests/serve/ready.sh
server_pid=
port=
# serve: the demo model's server for the localhost:8080 examples, started
# once (sets $port); 1 if it never printed its ready line
serve() {
    [ -n "$port" ] && return 0
    "$GPT" serve -m "$repo/models/demo.bin" --port 0 -t 1 --log off 2> "$tmp/serve.log" &
    server_pid=$!
    wait_serving "$tmp/serve.log" "$server_pid"
}
awk -v dir="$tmp/ex" '
    function close_ex() { if (n) { close(dir "/" n ".cmd"); close(dir "/" n ".want") } on = 0 }
    FNR == 1 { close_ex() }
    /^    \$ / {
        close_ex(); n++; on = 1
        cmd = substr($0, 7)
        print cmd > (dir "/" n ".cmd")
        printf "" > (dir "/" n ".want")
        print FILENAME ":" FNR > (dir "/" n ".where"); close(dir "/" n ".where")
        next
    }
    on && /^    / { print substr($0, 5) > (dir "/" n ".want"); next }
    { close_ex() }
    END { close_ex(); print n + 0 > (dir "/count") }
' README.md docs/*.md
count=$(cat "$tmp/ex/count")
[ "$count" -ge 10 ] || { echo "check_readme: only $count examples in README.md and docs/"; failed=$((failed + 1)); }
i=1
while [ "$i" -le "$count" ]; do
    where=$(cat "$tmp/ex/$i.where")
    cmd=$(cat "$tmp/ex/$i.cmd")
    case "$cmd" in
    node\ *|*\ node\ *)
        if [ -z "$have_node" ]; then
            if [ "$GPT_TEST_REQUIRE_ALL" = 1 ]; then
                echo "$where: \$ $cmd: no node, or no openai package in $NODE_DIR"
                failed=$((failed + 1))
            else
                echo "check_readme: $where: skipped (no node, or no openai package in $NODE_DIR)"
            fi
            i=$((i + 1))
            continue
        fi ;;
    esac
    # a tool an example pipes to or calls: skipped with a note where it is
    # missing (failed under GPT_TEST_REQUIRE_ALL=1, make test's default)
    absent=
    for tool in jq curl python3; do
        case " $cmd " in
        *[\ \|\;\(]$tool[\ \;\)]*)
            command -v $tool > /dev/null 2>&1 || absent="$absent $tool" ;;
        esac
    done
    if [ -n "$absent" ]; then
        if [ "$GPT_TEST_REQUIRE_ALL" = 1 ]; then
            echo "$where: \$ $cmd: not installed:$absent (install: scripts/install-deps.sh test)"
            failed=$((failed + 1))
        else
            echo "check_readme: $where: skipped (not installed:$absent; install: scripts/install-deps.sh test)"
        fi
        i=$((i + 1))
        continue
    fi
    case "$cmd" in
    *localhost:8080*|*node\ docs/examples/*)
        if ! serve; then
            echo "$where: \$ $cmd: gpt serve did not start: $(cat "$tmp/serve.log")"
            failed=$((failed + 1))
            i=$((i + 1))
            continue
        fi
        cmd=$(printf '%s\n' "$cmd" | sed "s|localhost:8080|127.0.0.1:$port|g") ;;
    esac
    (cd "$tmp/work" && PATH="$tmp/bin:$PATH" GPT_MODEL="$repo/models/demo.bin" GPT_TUNE=off \
        OPENAI_BASE_URL="http://127.0.0.1:${port:-8080}/v1" \
        timeout 120 sh -c "$cmd" > "$tmp/got" 2> "$tmp/err" < /dev/null)
    rc=$?
    if [ -n "$CHECK_README_PRINT" ]; then
        echo "== $where: \$ $cmd (exit $rc)"; cat "$tmp/got"; echo
    elif [ $rc -ne 0 ]; then
        echo "$where: \$ $cmd: exit $rc"
        sed 's/^/    | /' "$tmp/err"
        failed=$((failed + 1))
    else
        # the shown output ends with a newline where the printed one may not
        printf '%s' "$(cat "$tmp/ex/$i.want")" > "$tmp/want"
        printf '%s' "$(cat "$tmp/got")" > "$tmp/got1"
        check "$where: \$ $cmd" "$tmp/want" "$tmp/got1"
    fi
    i=$((i + 1))
done

# The example files shown: the indented block (blank lines within it
# included) that begins with the file's name in a comment is the file.
mkdir -p "$tmp/shown"
awk -v dir="$tmp/shown" '
    function close_block() { if (f != "") { close(f) } f = "" }
    FNR == 1 { close_block(); prev = ""; blank = 0 }
    f != "" && $0 == "" { blank++; next }
    f != "" && !/^    / { close_block() }
    f != "" { for (; blank > 0; blank--) print "" > f }
    { blank = 0 }
    /^    / && prev !~ /^    / && /^    (\/\/|#) docs\/examples\/[A-Za-z0-9_.-]+:/ {
        name = substr($0, 5); sub(/^(\/\/|#) docs\/examples\//, "", name); sub(/:.*/, "", name)
        f = dir "/" name
        print FILENAME > (f ".where"); close(f ".where")
    }
    f != "" { print substr($0, 5) > f }
    { prev = $0 }
' README.md docs/*.md
for shown in "$tmp"/shown/*.where; do
    [ -f "$shown" ] || continue
    name=$(basename "$shown" .where)
    check "$(cat "$shown"): docs/examples/$name as shown (the file below)" "$tmp/shown/$name" "docs/examples/$name"
done

# The fields of a request: docs/usage.md's table names each field that
# the sources read (the settings' JSON fields, from the table of
# src/front/settings.c as settings_docs prints it; line_field in
# src/cli/batch.c, a --jsonl line's own;
# read_completion_fields and read_chat_field in src/serve/api.c, the
# server's), and no other; its --jsonl column says "—" exactly for the
# fields a line does not take.
# fields_of FILE FUNCTION...: the "name" of each strcmp(k, "name") or
# strcmp(f->string, "name") inside those functions' bodies
fields_of() {
    file=$1
    shift
    awk -v names=" $* " '
        match($0, /^(static )?int [a-z_]+\(/) { fn = substr($0, 1, RLENGTH - 1); sub(/.* /, "", fn)
                                                on = index(names, " " fn " ") > 0 }
        on && /^}/ { on = 0 }
        on { s = $0
             while (match(s, /strcmp\((k|f->string), "[a-z_]+"\)/)) {
                 f = substr(s, RSTART, RLENGTH); sub(/^[^"]*"/, "", f); sub(/".*/, "", f); print f
                 s = substr(s, RSTART + RLENGTH) } }
    ' "$file"
}
"${SETTINGS_DOCS:-$(dirname "$GPT")/settings_docs}" keys | awk -F'\t' '$2 == "jsonl" { print $1 }' > "$tmp/f_gen"
"${SETTINGS_DOCS:-$(dirname "$GPT")/settings_docs}" keys | awk -F'\t' '$3 == "serve" { print $1 }' >> "$tmp/f_serve"
fields_of src/cli/batch.c line_field > "$tmp/f_line"
fields_of src/serve/api.c read_completion_fields read_chat_field >> "$tmp/f_serve"
sed -n '/^### The fields of a request/,/^#/p' docs/usage.md | grep '^| `' > "$tmp/rows"
# each field of a row (the first column's `names`), with its --jsonl column
awk -F' [|] ' '{ col = $2; n = split($1, a, "`"); for (i = 2; i <= n; i += 2) print a[i] "\t" col }' "$tmp/rows" \
    > "$tmp/f_doc"
cat "$tmp/f_gen" "$tmp/f_line" "$tmp/f_serve" | sort -u > "$tmp/f_src"
cut -f1 "$tmp/f_doc" | sort -u > "$tmp/f_docnames"
if [ "$(wc -l < "$tmp/f_gen")" -ge 10 ] && [ "$(wc -l < "$tmp/f_line")" -ge 3 ] && [ "$(wc -l < "$tmp/f_serve")" -ge 8 ]; then
    check "docs/usage.md's table of fields: the fields the sources read (one a line)" "$tmp/f_docnames" "$tmp/f_src"
else
    echo "check_readme: the fields were not found in settings_docs keys, src/cli/batch.c, src/serve/api.c"
    failed=$((failed + 1))
fi
sort -u "$tmp/f_gen" "$tmp/f_line" > "$tmp/f_jsonl"
awk -F'\t' '$2 != "—" { print $1 }' "$tmp/f_doc" | sort -u > "$tmp/f_docjsonl"
check "docs/usage.md's table of fields: the --jsonl column (the fields it does not mark —)" "$tmp/f_docjsonl" "$tmp/f_jsonl"

# The exit codes: the README's table has those of gpt --help.
sed -n '/^## Exit codes/,/^#/p' README.md | sed -n 's/^| \([0-9][0-9]*\) |.*/\1/p' > "$tmp/want"
"$GPT" --help | sed -n '/^exit codes:/,$p' | tr '\n' ' ' | sed 's/^exit codes://' |
    grep -oE '(^|[:,]) *[0-9]+ [a-z]' | grep -oE '[0-9]+' > "$tmp/got"
check "the exit codes (gpt --help's, one a line)" "$tmp/want" "$tmp/got"

# The links between the documents: every docs/NAME.md named exists (but
# docs/chat.md, which its own branch writes).
for f in README.md docs/*.md; do
    for d in $(grep -oE 'docs/[a-z0-9_-]+\.md' "$f" | sort -u); do
        if [ -f "$d" ] || [ "$d" = docs/chat.md ]; then
            passed=$((passed + 1))
        else
            echo "$f names $d, which does not exist"
            failed=$((failed + 1))
        fi
    done
done

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

# README.md's Install section runs the script whose list is checked here,
# and names no package of its own
install=$(awk '/^## Install/ { on = 1; next } /^## / { on = 0 } on' README.md)
if echo "$install" | grep -q '^    scripts/install-deps.sh' && ! echo "$install" | grep -q 'apt-get install'; then
    passed=$((passed + 1))
else
    echo "README.md's Install section does not run scripts/install-deps.sh (or installs packages of its own)"
    failed=$((failed + 1))
fi
install_line=$(sh scripts/install-deps.sh --list build)
if ! command -v dpkg-query > /dev/null; then
    echo "check_readme: no dpkg-query here: the install line '$install_line' is not checked"
else
    missing=
    for p in $install_line; do installed "$p" || missing="$missing $p"; done
    if [ -n "$missing" ]; then
        echo "install-deps.sh's build part names$missing, not installed here (dpkg-query): cannot check it"
        failed=$((failed + 1))
    else
        mkdir "$tmp/pc"
        dpkg -L $(depends_closure $install_line) | grep '/pkgconfig/[^/]*\.pc$' | sort -u |
            while read -r pc; do ln -sf "$pc" "$tmp/pc/"; done
        # What make would run with only those .pc files (it stops at once,
        # naming the package, when pkg-config misses one), the build's
        # objects taken as they are: each source that includes a
        # dependency's header is compiled (its syntax: the headers and the
        # declarations), and gpt is linked with the flags found. A full
        # build here took most of this test's time (minutes at -O0 on 2
        # cores, for kernels that include nothing of the packages).
        deps_src=$(grep -rlE '#include [<"](cjson/cJSON|cJSON|utf8proc|cblas|openblas[^/]*|microhttpd)\.h' src | sort)
        if [ ! -f "$BUILD/libgpt.a" ]; then
            echo "check_readme: no $BUILD/libgpt.a to link: the install line is not checked (build first)"
            failed=$((failed + 1))
        elif ! MAKEFLAGS= PKG_CONFIG_LIBDIR="$tmp/pc" PKG_CONFIG_PATH= PKG_CONFIG_SYSROOT_DIR= \
            make -n -B BUILD="$BUILD" "$BUILD/gpt" > "$tmp/make.sh" 2> "$tmp/build.log"; then
            echo "with only the packages of install-deps.sh's build part ($install_line)"
            echo "and their dependencies, make fails:"
            tail -n 4 "$tmp/build.log" | sed 's/^/    | /'
            failed=$((failed + 1))
        else
            ok=1
            for s in $deps_src; do
                line=$(grep -m1 -- "-c -o [^ ]*\.o $s\$" "$tmp/make.sh")
                [ -n "$line" ] || continue   # not part of gpt
                line=$(echo "$line" | sed "s| -c -o [^ ]*\.o $s\$| -fsyntax-only $s|")
                if ! sh -c "$line" >> "$tmp/build.log" 2>&1; then ok=0; echo "$s: does not compile:"; fi
            done
            link=$(grep -- "-o $BUILD/gpt " "$tmp/make.sh" | tail -n 1 | sed "s|-o $BUILD/gpt |-o $tmp/gpt |")
            if [ -z "$link" ] || ! sh -c "$link" >> "$tmp/build.log" 2>&1 || ! "$tmp/gpt" --version > /dev/null; then
                ok=0
                echo "gpt does not link: ${link:-no link command in make -n}"
            fi
            if [ $ok -eq 1 ]; then
                passed=$((passed + 1))
            else
                echo "with only the packages of install-deps.sh's build part ($install_line)"
                echo "and their dependencies, the build fails:"
                tail -n 8 "$tmp/build.log" | sed 's/^/    | /'
                failed=$((failed + 1))
            fi
        fi
    fi
fi
echo "check_readme: $passed passed, $failed failed"
[ $failed -eq 0 ]

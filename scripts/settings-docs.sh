#!/bin/sh
# settings-docs.sh [--check]: the parts of the docs that the table of
# generation settings (src/front/settings.c) says, printed by settings_docs
# ($SETTINGS_DOCS, default build/settings_docs), between the lines that hold
# "BEGIN generated settings" and "END generated settings" of
#   docs/usage.md        (settings_docs markdown)
#   man/gpt.1            (settings_docs man)
#   completions/gpt.bash (settings_docs bash)
# `make docs` writes them. With --check nothing is written: each file that
# differs is named with the diff, and the exit status is 1.
set -u
docs=${SETTINGS_DOCS:-build/settings_docs}
check=0
[ "${1:-}" = --check ] && check=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for pair in docs/usage.md:markdown man/gpt.1:man completions/gpt.bash:bash; do
    file=${pair%%:*}
    format=${pair#*:}
    if ! "$docs" "$format" > "$tmp/part"; then
        echo "settings-docs: $docs $format failed" >&2
        exit 2
    fi
    begins=$(grep -c 'BEGIN generated settings' "$file")
    ends=$(grep -c 'END generated settings' "$file")
    if [ "$begins" != 1 ] || [ "$ends" != 1 ]; then
        echo "settings-docs: $file: needs one 'BEGIN generated settings' line and one 'END generated settings' line" >&2
        exit 2
    fi
    # the file with the part between the two lines replaced
    awk -v part="$tmp/part" '
        /END generated settings/ { skip = 0 }
        !skip { print }
        /BEGIN generated settings/ { while ((getline line < part) > 0) print line; skip = 1 }
    ' "$file" > "$tmp/new"
    if cmp -s "$file" "$tmp/new"; then continue; fi
    if [ $check = 1 ]; then
        echo "settings-docs: $file differs from the table of settings (run make docs):"
        diff "$file" "$tmp/new"
        status=1
    else
        cat "$tmp/new" > "$file"
        echo "settings-docs: wrote $file"
    fi
done
exit $status

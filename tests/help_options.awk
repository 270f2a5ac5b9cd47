# help_options.awk - the options of a gpt help text (gpt --help, gpt
# convert --help), for tests/check_man.sh and tests/check_completion.sh.
#
# Reads the help text and prints one line per option it lists:
#     OPTION <TAB> ARG <TAB> DEFAULTS <TAB> TEXT
# OPTION is -m or --model; ARG the argument's name (PATH, N) or empty;
# DEFAULTS the defaults the entry states, "default 256" or "f32 (default)",
# joined by "|" (empty if none); TEXT the entry's text, joined into one line.
# (No interval expressions such as {1,8}: mawk lacks them.)
# An entry is an option line (indented at most 8 spaces, starting with -)
# and the lines indented deeper that follow it.
#
# Options that are only named in the text (--batch in a usage line) are not
# entries; `grep -o -- '--[a-z][a-z0-9-]*'` finds those.

function flush(   i, d, rest, found) {
    if (n == 0) return
    d = ""
    rest = text
    while (match(rest, /default [0-9][0-9.]*[KMGkmg]?/)) {
        found = substr(rest, RSTART, RLENGTH)
        d = d == "" ? found : d "|" found
        rest = substr(rest, RSTART + RLENGTH)
    }
    rest = text
    while (match(rest, /[a-z0-9]+ \(default\)/)) {
        found = substr(rest, RSTART, RLENGTH)
        d = d == "" ? found : d "|" found
        rest = substr(rest, RSTART + RLENGTH)
    }
    for (i = 1; i <= n; i++) print opt[i] "\t" arg "\t" d "\t" text
    n = 0
}

/^ +-/ && match($0, /^ +/) && RLENGTH <= 8 {
    flush()
    rest = $0
    sub(/^ +/, "", rest)
    arg = ""
    while (match(rest, /^-[-a-zA-Z0-9]+(, | |$)/)) {
        o = substr(rest, 1, RLENGTH)
        sub(/(, | )$/, "", o)
        opt[++n] = o
        rest = substr(rest, RLENGTH + 1)
    }
    if (match(rest, /^[A-Z][A-Z0-9]*( |$)/)) {
        arg = substr(rest, 1, RLENGTH)
        sub(/ $/, "", arg)
        rest = substr(rest, RLENGTH + 1)
    }
    sub(/^ +/, "", rest)
    text = rest
    next
}
/^ +[^ ]/ && match($0, /^ +/) && RLENGTH > 8 && n > 0 {
    line = $0
    sub(/^ +/, "", line)
    text = text " " line
    next
}
{ flush() }
END { flush() }

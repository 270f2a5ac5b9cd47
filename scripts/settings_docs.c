/*
 * settings_docs.c - the parts of the docs that src/front/settings.c's table
 * of generation settings says, printed from it: `make docs` writes them into
 * docs/usage.md, man/gpt.1 and completions/gpt.bash (between the lines
 * "BEGIN generated settings" and "END generated settings"), and
 * tests/check_settings.sh fails when a file differs from what this prints.
 *
 *   settings_docs markdown   docs/usage.md's table of the settings
 *   settings_docs man        the manual's table of them (tbl)
 *   settings_docs bash       the completion's word lists, gpt's and gpt chat's
 *   settings_docs keys       each JSON field: KEY TAB jsonl|- TAB serve|-
 *   settings_docs bad        for each number taken from argv and JSON: FLAG TAB
 *                            KEY TAB a value just out of its range
 *                            (tests/check_settings.sh gives it everywhere)
 *   settings_docs options gpt|chat
 *                            the getopt entries the table gives that parser
 *                            (settings_options): OPTION TAB 1 if it takes a
 *                            value, else 0; -LETTER too (tests/check_man.sh)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "front/front.h"

// The option as --help names it: "-n, --max-tokens N", "--json-object".
static void option_label(const Setting *s, char *buf, size_t cap) {
    int n = s->letter ? snprintf(buf, cap, "-%c, --%s", s->letter, s->flag) : snprintf(buf, cap, "--%s", s->flag);
    if (s->arg) snprintf(buf + n, cap - (size_t)n, " %s", s->arg);
}

// What a value is, in words: the range, or the kind's shape.
static void value_words(const Setting *s, char *buf, size_t cap) {
    switch (s->kind) {
    case VALUE_INTEGER: case VALUE_NUMBER: setting_range(s, buf, cap); break;
    case VALUE_SWITCH: snprintf(buf, cap, "a switch (JSON true or false)"); break;
    case VALUE_SEED: snprintf(buf, cap, "an integer in [0, 2^64) (JSON: digits below 2^53, or a string of digits)"); break;
    case VALUE_BIAS: snprintf(buf, cap, "ID=B, B in [-100, 100], repeatable (JSON {\"ID\": B}), at most 300"); break;
    case VALUE_STOP: snprintf(buf, cap, "a string, repeatable (JSON a string or an array), at most 16"); break;
    case VALUE_CONSTRAINT:
        snprintf(buf, cap, "%s", s->id == SETTING_GRAMMAR ? "GBNF text (the option: a file, or the text)"
                                 : s->id == SETTING_JSON_SCHEMA ? "a JSON Schema (the option: a file, or the text)"
                                 : s->id == SETTING_REGEX ? "a regular expression"
                                 : s->id == SETTING_JSON_OBJECT ? "a switch"
                                                                : "OpenAI's object");
        break;
    }
}

static const char *where(const Setting *s, unsigned in) { return s->in & in ? "yes" : "—"; }

static void markdown(void) {
    printf("| option | JSON field | value | `gpt` | `gpt chat` | `--jsonl` | `gpt serve` |\n"
           "|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; setting_at(i); i++) {
        const Setting *s = setting_at(i);
        char label[64] = "—", value[160];
        if (s->flag) option_label(s, label, sizeof label);
        value_words(s, value, sizeof value);
        printf("| %s%s%s | %s%s%s | %s | %s | %s | %s | %s |\n", s->flag ? "`" : "", label, s->flag ? "`" : "",
               s->key ? "`" : "", s->key ? s->key : "—", s->key ? "`" : "", value, where(s, IN_GPT),
               where(s, IN_CHAT), where(s, IN_JSONL), where(s, IN_SERVE));
    }
}

// roff: a hyphen in an option is \-
static void roff(const char *s) {
    for (; *s; s++) {
        if (*s == '-') fputs("\\-", stdout);
        else if (*s == '\\') fputs("\\e", stdout);
        else putchar(*s);
    }
}

static void man(void) {
    printf(".TS\nl l lx l.\n");
    printf("\\fBoption\\fR\t\\fBJSON field\\fR\t\\fBvalue\\fR\t\\fBtaken by\\fR\n");
    for (size_t i = 0; setting_at(i); i++) {
        const Setting *s = setting_at(i);
        char label[64] = "-", value[160], in[64] = "";
        if (s->flag) option_label(s, label, sizeof label);
        value_words(s, value, sizeof value);
        const char *names[] = {"gpt", "chat", "jsonl", "serve"};
        for (int k = 0; k < 4; k++)
            if (s->in & (1u << k)) snprintf(in + strlen(in), sizeof in - strlen(in), "%s%s", *in ? ", " : "", names[k]);
        roff(label);
        printf("\t");
        roff(s->key ? s->key : "-");
        printf("\tT{\n");
        roff(value);
        printf("\nT}\t%s\n", in);
    }
    printf(".TE\n");
}

static void bash_rows(unsigned in, const char *modes) {
    for (size_t i = 0; setting_at(i); i++) {
        const Setting *s = setting_at(i);
        if (!s->flag || !(s->in & in)) continue;
        const char *value = !s->arg ? "-"
                            : s->id == SETTING_GRAMMAR || s->id == SETTING_JSON_SCHEMA ? "file"
                                                                                        : "text";
        char name[64];
        if (s->letter) printf("-%-18c %-6s %s\n", s->letter, modes, value);
        snprintf(name, sizeof name, "--%s", s->flag);
        printf("%-19s %-6s %s\n", name, modes, value);
    }
}

static void bash(void) {
    printf("# gpt's generation settings (the modes: generation and --batch)\n_gpt_settings='\n");
    bash_rows(IN_GPT, "gb");
    printf("'\n# gpt chat's\n_gpt_chat_settings='\n");
    bash_rows(IN_CHAT, "c");
    printf("'\n");
}

static void keys(void) {
    for (size_t i = 0; setting_at(i); i++) {
        const Setting *s = setting_at(i);
        if (s->key) printf("%s\t%s\t%s\n", s->key, s->in & IN_JSONL ? "jsonl" : "-", s->in & IN_SERVE ? "serve" : "-");
    }
}

static void options(unsigned in) {
    struct option table[SETTING_COUNT];
    size_t n = settings_options(in, table, SETTING_COUNT);
    for (size_t i = 0; i < n; i++) {
        int takes = table[i].has_arg == required_argument;
        printf("--%s\t%d\n", table[i].name, takes);
        if (table[i].val < 128) printf("-%c\t%d\n", table[i].val, takes);
    }
}

static void bad(void) {
    for (size_t i = 0; setting_at(i); i++) {
        const Setting *s = setting_at(i);
        if ((s->kind != VALUE_INTEGER && s->kind != VALUE_NUMBER) || !s->flag || !s->key) continue;
        // past the end, else below the start (the start itself when it is open)
        double v = isfinite(s->hi) ? s->hi + 1 : s->lo_open ? s->lo : s->lo - 1;
        printf("--%s\t%s\t%.15g\n", s->flag, s->key, v);
    }
}

int main(int argc, char **argv) {
    const char *what = argc >= 2 ? argv[1] : "", *who = argc == 3 ? argv[2] : "";
    if (!strcmp(what, "options") && (!strcmp(who, "gpt") || !strcmp(who, "chat")))
        options(!strcmp(who, "gpt") ? IN_GPT : IN_CHAT);
    else if (argc != 2) what = "";
    if (!strcmp(what, "options")) ;
    else if (!strcmp(what, "markdown")) markdown();
    else if (!strcmp(what, "man")) man();
    else if (!strcmp(what, "bash")) bash();
    else if (!strcmp(what, "keys")) keys();
    else if (!strcmp(what, "bad")) bad();
    else {
        fprintf(stderr, "usage: settings_docs markdown|man|bash|keys|bad, or settings_docs options gpt|chat\n");
        return 2;
    }
    return fflush(stdout) == 0 ? 0 : 1;
}

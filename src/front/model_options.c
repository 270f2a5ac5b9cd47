/*
 * model_options.c - a front-end's command line: the options of a run with a
 * model that gpt and gpt serve share, in one table and one function, and
 * the reading of argv around them with getopt_long (so -n20, -mFILE,
 * --temp=0.7, unambiguous abbreviations and -- work as in every GNU tool).
 *
 * A front-end hands over its own options; options_next reads each word,
 * applies a shared option itself and hands back the front-end's. Every
 * value is checked and a bad one refused: exit 2, one line naming the flag
 * as it was typed; none is silently changed. So is an unknown option, a
 * missing value, a value given to a flag, an option of one value given
 * twice (-m a -m b: which was meant?) and a word that is no option.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front.h"

// The shared options, with their help (each front-end's --help prints
// these lines: help_from_template's "@shared"); an option whose code is a
// letter is also -LETTER. -q's help is each front-end's own (what notes it has).
static const struct {
    struct option opt;
    const char *arg;   // the value's name in --help, NULL for a flag
    const char *help;  // lines split by \n; NULL: the front-end writes its own
} SHARED[] = {
    {{"model", required_argument, 0, 'm'}, "PATH",
     "model.bin, a Hugging Face GPT-2 directory, model.safetensors,\nan llm.c checkpoint or a GGUF file of a GPT-2 "
     "model (llama.cpp's)\n(default: $GPT_MODEL, else the first of\n./models/gpt2.bin, ./models/gpt2/, "
     "~/.local/share/gpt/gpt2.bin\n($XDG_DATA_HOME), share/gpt/gpt2.bin; with no GPT-2, the demo\nmodel demo.bin "
     "shipped with gpt)"},
    {{"tokenizer", required_argument, 0, OPT_TOKENIZER}, "PATH",
     "directory with vocab.json + merges.txt, or a tokenizer.json"},
    {{"dtype", required_argument, 0, OPT_DTYPE}, "T",
     "convert the weight matrices at load: f32, f16, bf16, q8, q6,\nq4 (q4 keeps wte, also the output layer, layer 0 "
     "and every\nattn.c_proj in q6) or q4-pure (every matrix in q4)\n(default: as the file stores them)"},
    {{"kv-type", required_argument, 0, OPT_KV_TYPE}, "T",
     "KV-cache elements: f32 (default) or f16 (half the memory)"},
    {{"threads", required_argument, 0, 't'}, "N", "threads (default: the number of cores)"},
    {{"tune", required_argument, 0, OPT_TUNE}, "MODE",
     "the matmul kernels' variants: on (default: measured once per\nCPU, model and threads, kept in ~/.cache/gpt), "
     "off, force\n(measure again); $GPT_TUNE the same; outputs never change"},
    {{"quiet", no_argument, 0, 'q'}, NULL, NULL},
    {{"parallel", required_argument, 0, OPT_PARALLEL}, "N", "sequences decoded together (default 16)"},
    {{"kv-budget", required_argument, 0, OPT_KV_BUDGET}, "SIZE",
     "KV-cache memory for all of them, K/M/G suffixes, in whole blocks\n(default 1G, or twice what --parallel full "
     "contexts take if\nthat is less)"},
    {{"q8-act", required_argument, 0, OPT_Q8_ACT}, "A",
     "the activations a q8 matrix multiplies: int16 (default; the\nsame bits on every CPU) or int8 (2^-8 of a "
     "block's largest\ninput instead of 2^-15: other bits and a larger error, faster\nprefill with AVX512-VNNI; "
     "docs/models.md)"},
    {{"lora", required_argument, 0, OPT_LORA}, "PATH",
     "a PEFT LoRA adapter directory or a llama.cpp GGUF LoRA file\nmerged into the weights at load, before "
     "--dtype's\nconversion; PATH:SCALE multiplies its change by SCALE\n(default 1); repeatable: the adapters add. "
     "NAME=PATH (gpt\nserve, and batch mode): applied at run time to the requests\nthat name it (docs/models.md)"},
};
_Static_assert(sizeof SHARED / sizeof *SHARED == N_SHARED_OPTIONS, "N_SHARED_OPTIONS");

// The largest --kv-budget: 128 TiB, a 64-bit process's address space.
#define KV_BUDGET_MAX ((size_t)1 << 47)

// A count from 1 to max: 0, or -1 (not a whole number, or out of range).
static int counted(const char *s, long max, long *out) {
    long v;
    if (parse_long(s, &v) != 0 || v < 1 || v > max) return -1;
    *out = v;
    return 0;
}

int lora_option(LoraRequest *list, size_t *n, const char *flag, char *v, const char *cmd) {
    if (*n == LORA_MAX) return usage_error(cmd, "%s %s: at most %d adapters", flag, v, LORA_MAX);
    LoraRequest *r = &list[*n];
    *r = (LoraRequest){.path = v, .scale = 1};
    // NAME=PATH: a name of letters, digits, '-', '_' and '.' (no '/': a path)
    size_t name_len = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.");
    if (v[name_len] == '=' && name_len > 0) {
        if (cmd && strcmp(cmd, "serve"))
            return usage_error(cmd, "%s %s: a named adapter is applied at run time by gpt serve and --batch; give %s "
                               "PATH to merge it", flag, v, flag);
        if (name_len >= LORA_NAME_MAX) return usage_error(cmd, "%s %s: the name is longer than %d bytes", flag, v,
                                                          LORA_NAME_MAX - 1);
        for (size_t i = 0; i < *n; i++)
            if (list[i].name && strlen(list[i].name) == name_len && !strncmp(list[i].name, v, name_len))
                return usage_error(cmd, "%s %s: the name %.*s is given twice", flag, v, (int)name_len, v);
        v[name_len] = 0;
        r->name = v;
        r->path = v = v + name_len + 1;
    }
    const char *colon = strrchr(v, ':');
    float f;
    int rc = colon ? parse_decimal(colon + 1, &f) : -1;
    if (rc == -2) return usage_error(cmd, "%s %s: the scale %s is out of range", flag, v, colon + 1);
    if (rc == 0 && colon == v) return usage_error(cmd, "%s %s: needs a PATH before the scale", flag, v);
    if (rc == 0) {
        r->scale = strtod(colon + 1, NULL);  // the decimal in double, as a Python reader gets it
        v[colon - v] = 0;                    // the path ends at the colon
    }
    if (!*r->path) return usage_error(cmd, "%s: needs a PATH", flag);
    (*n)++;
    return 0;
}

// The shared option c with value v (NULL for a flag), into *so: 0, or
// EXIT_USAGE after reporting, naming flag as typed.
static int shared_option(SharedOptions *so, int c, const char *flag, char *v, const char *cmd) {
    ModelOptions *mo = &so->model;
    WeightOptions wo;
    TuneMode t;
    int rc, k;
    switch (c) {
    case 'm': mo->model_path = v; break;
    case OPT_TOKENIZER: mo->tokenizer_path = v; break;
    case 'q': mo->quiet = 1; break;
    case OPT_DTYPE:
        if (weight_options_from_name(v, &wo) != 0) return usage_error(cmd, "%s %s: must be " WEIGHT_DTYPE_NAMES, flag, v);
        wo.q8_int8 = mo->weights.q8_int8;  // --q8-act's, before or after
        mo->weights = wo;
        break;
    case OPT_Q8_ACT:  // Q8's activations: another arithmetic, never chosen by speed (matmul_kernels.h)
        if (strcmp(v, "int16") && strcmp(v, "int8")) return usage_error(cmd, "%s %s: must be int16 or int8", flag, v);
        mo->weights.q8_int8 = !strcmp(v, "int8");
        break;
    case OPT_LORA:
        if (lora_option(mo->lora, &mo->n_lora, flag, v, cmd) != 0) return EXIT_USAGE;
        break;
    case OPT_KV_TYPE:
        k = dtype_from_name(v);
        if (k != DTYPE_F32 && k != DTYPE_F16) return usage_error(cmd, "%s %s: must be f32 or f16", flag, v);
        so->kv_dtype = (DType)k;
        break;
    case 't':
        if (counted(v, 1024, &mo->threads) != 0)
            return usage_error(cmd, "%s %s: must be an integer in [1, 1024]", flag, v);
        break;
    case OPT_TUNE:
        if (tune_mode_parse(v, &t) != 0) return usage_error(cmd, "%s %s: must be on, off or force", flag, v);
        mo->tune = t;
        break;
    case OPT_PARALLEL:
        if (counted(v, 256, &so->parallel) != 0) return usage_error(cmd, "%s %s: must be an integer in [1, 256]", flag, v);
        break;
    case OPT_KV_BUDGET:
        rc = parse_size(v, &so->kv_budget);
        // a process addresses at most 2^47 bytes (x86-64 and arm64 Linux): no pool is larger
        if (rc == -2 || (rc == 0 && so->kv_budget > KV_BUDGET_MAX))
            return usage_error(cmd, "%s %s: beyond what this machine can address (a process addresses at most 131072G)",
                               flag, v);
        if (rc != 0 || so->kv_budget == 0) return usage_error(cmd, "%s %s: must be a size such as 512M or 2G", flag, v);
        so->kv_budget_arg = v;
        break;
    }
    return 0;
}

void options_begin(OptionParser *p, const char *cmd, const struct option *own, const int *repeatable) {
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->repeatable = repeatable;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    // the matmul variants measured once per machine unless $GPT_TUNE says
    // otherwise; a bad $GPT_TUNE is refused once argv is read (--tune wins)
    TuneMode tune;
    p->bad_tune_env = tune_mode_from_env(TUNE_ON, &tune) != 0;
    p->shared = (SharedOptions){.model = {.weights = {.matrix_dtype = -1}, .threads = cores > 0 ? cores : 1,
                                          .tune = (int)tune, .version = GPT_VERSION},
                                .kv_dtype = DTYPE_F32, .parallel = 16};
    // the table: the front-end's options, then the shared ones; the short
    // options: every letter code, "x:" when it takes a value
    size_t n = 0, s = 0;
    p->shorts[s++] = ':';  // a missing value is ':', not '?'
    for (const struct option *o = own; o->name && n < OPTIONS_MAX - N_SHARED_OPTIONS; o++) p->table[n++] = *o;
    for (size_t i = 0; i < N_SHARED_OPTIONS; i++) p->table[n++] = SHARED[i].opt;
    for (size_t i = 0; i < n; i++)
        if (p->table[i].val > ' ' && p->table[i].val < 127) {
            p->shorts[s++] = (char)p->table[i].val;
            if (p->table[i].has_arg == required_argument) p->shorts[s++] = ':';
        }
    opterr = 0;  // our messages, not getopt's
    optind = 0;  // a full reset (GNU)
}

// getopt_long's '?' (an unknown option, or a value given to a flag) or ':'
// (a missing value) for the word before optind: the usage error.
static int option_error(const OptionParser *p, char **argv, int c) {
    // The word at fault: argv[optind - 1] for a long option; for a short
    // one in a cluster not yet finished ("-jx"), optind has not moved on and
    // that is the word before it. A long option's error sets optopt to 0 or
    // to its own code.
    const char *arg = argv[optind - 1], *cmd = p->cmd;
    int is_long = !strncmp(arg, "--", 2);
    if (is_long && optopt) {
        is_long = 0;
        size_t n = strcspn(arg + 2, "=");
        for (const struct option *lo = p->table; lo->name; lo++)
            if (lo->val == optopt && !strncmp(lo->name, arg + 2, n)) is_long = 1;
    }
    if (!is_long) {
        if (c == ':') return usage_error(cmd, "-%c needs a value", optopt);
        if (optopt > 32 && optopt < 127) return usage_error(cmd, "unknown option '-%c'", optopt);
        return usage_error(cmd, "unknown option (byte 0x%02x)", (unsigned)optopt & 0xFF);
    }
    // a long option: which one, and what went wrong
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    for (const struct option *lo = p->table; lo->name; lo++)
        if (strlen(lo->name) >= len - 2 && !strncmp(lo->name, arg + 2, len - 2)) {
            if (c == ':') return usage_error(cmd, "--%s needs a value", lo->name);
            if (eq && lo->has_arg == no_argument) return usage_error(cmd, "--%s takes no value", lo->name);
        }
    return usage_error(cmd, "unknown option '%.*s' (or an ambiguous abbreviation)", (int)len, arg);
}

static int repeatable(const OptionParser *p, int c) {
    if (c == OPT_LORA) return 1;  // each adds an adapter
    for (const int *r = p->repeatable; r && *r; r++)
        if (*r == c) return 1;
    return 0;
}

static int is_shared(int c) {
    for (size_t i = 0; i < N_SHARED_OPTIONS; i++)
        if (SHARED[i].opt.val == c) return 1;
    return 0;
}

int options_next(OptionParser *p, int argc, char **argv) {
    int longindex = -1;
    int c = getopt_long(argc, argv, p->shorts, p->table, &longindex);
    if (c == -1 && optind < argc) {
        // `gpt "Hello"`: a prompt without -p, the likeliest slip of all
        const char *w = argv[optind];
        int hint = !p->cmd && !p->given['p'] && *w && *w != '-';
        if (hint && !strpbrk(w, "\"$`\\"))
            usage_error(p->cmd, "unexpected argument '%s' (did you mean -p \"%s\"?)", w, w);
        else if (hint && !strchr(w, '\''))
            usage_error(p->cmd, "unexpected argument '%s' (did you mean -p '%s'?)", w, w);
        else
            usage_error(p->cmd, "unexpected argument '%s'", w);
        return OPTION_FAILED;
    }
    if (c == -1 && p->bad_tune_env && !p->given[OPT_TUNE]) {
        usage_error(p->cmd, "$GPT_TUNE=%.40s: must be on, off or force", getenv("GPT_TUNE"));
        return OPTION_FAILED;
    }
    if (c == -1) return -1;
    if (c == '?' || c == ':') {
        option_error(p, argv, c);
        return OPTION_FAILED;
    }
    // the flag as the user typed it (its long name, if abbreviated), for messages
    if (longindex >= 0) snprintf(p->flag, sizeof p->flag, "--%s", p->table[longindex].name);
    else snprintf(p->flag, sizeof p->flag, "-%c", c);
    p->value = optarg;
    // an option of one value, given twice: which was meant?
    if (optarg && p->given[c] && !repeatable(p, c)) {
        usage_error(p->cmd, "%s given twice: it takes one value", p->flag);
        return OPTION_FAILED;
    }
    // the option as typed: its own argv word (the value may be the next one)
    p->given[c] = optarg && optind >= 2 && optarg == argv[optind - 1] ? argv[optind - 2] : argv[optind - 1];
    if (is_shared(c) && shared_option(&p->shared, c, p->flag, optarg, p->cmd) != 0) return OPTION_FAILED;
    return c;
}

// ----------------------------------------------------------------------------
// --help

// Appends text[0..n) to the buffer *b (*len used, *cap allocated): 0, or -1
// out of memory.
static int append(char **b, size_t *len, size_t *cap, const char *text, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t want = 2 * (*len + n + 1);
        char *grown = realloc(*b, want);
        if (!grown) return -1;
        *b = grown;
        *cap = want;
    }
    memcpy(*b + *len, text, n);
    *len += n;
    (*b)[*len] = '\0';
    return 0;
}

// The --help lines of the shared option with the long name name[0..len)
// (help_entry's layout): 0, or -1 (out of memory, or no shared option has
// help by that name).
static int shared_help(const char *name, size_t name_len, char **b, size_t *len, size_t *cap) {
    for (size_t i = 0; i < N_SHARED_OPTIONS; i++) {
        const struct option *o = &SHARED[i].opt;
        if (strlen(o->name) != name_len || strncmp(o->name, name, name_len) || !SHARED[i].help) continue;
        char letter = o->val < 128 ? (char)o->val : 0;
        size_t n = help_entry(letter, o->name, SHARED[i].arg, SHARED[i].help, NULL, 0);
        char *entry = malloc(n + 1);
        int rc = !entry || (help_entry(letter, o->name, SHARED[i].arg, SHARED[i].help, entry, n + 1),
                            append(b, len, cap, entry, n));
        free(entry);
        return rc ? -1 : 0;
    }
    return -1;
}

char *help_from_template(const char *template, unsigned settings_in) {
    char *b = NULL;
    size_t len = 0, cap = 0;
    if (append(&b, &len, &cap, "", 0)) return NULL;
    for (const char *line = template; *line;) {
        size_t end = strcspn(line, "\n");
        end += line[end] == '\n';
        int rc = 0;
        if (!strncmp(line, "@settings\n", 10)) {
            size_t need = settings_help(settings_in, NULL, 0);
            char *part = malloc(need + 1);
            rc = !part || (settings_help(settings_in, part, need + 1), append(&b, &len, &cap, part, need));
            free(part);
        } else if (!strncmp(line, "@shared ", 8)) {
            for (const char *w = line + 8; !rc && w < line + end;) {
                size_t n = strcspn(w, " \n");
                if (n) rc = shared_help(w, n, &b, &len, &cap);
                w += n + 1;
            }
        } else {
            rc = append(&b, &len, &cap, line, end);
        }
        if (rc) {
            free(b);
            return NULL;
        }
        line += end;
    }
    return b;
}

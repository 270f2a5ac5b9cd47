/*
 * locate.c - where the model and the tokenizer files are, when the command
 * line does not say exactly.
 *
 * The model: -m PATH, else $GPT_MODEL, else the first that exists of
 *   ./models/gpt2.bin, ./models/gpt2/          (a source checkout)
 *   $XDG_DATA_HOME/gpt/gpt2.bin (or ~/.local/share/gpt/gpt2.bin), and gpt2/
 *                                              (where gpt-get-gpt2 puts it)
 *   <gpt's directory>/../share/gpt/gpt2.bin, and GPT_DATADIR/gpt2.bin
 *                                              (an installed copy's share/gpt)
 * and when there is no GPT-2, the demo model shipped with gpt, demo.bin, in
 * the first of the shipped-file directories below that has it.
 * The tokenizer: --tokenizer, else the one in the model file, else the files
 * beside the model, else the GPT-2 files shipped with gpt.
 * The shipped-file directories, in order: models/ beside or above the
 * executable (a source checkout: ./gpt or build/gpt), its ../share/gpt,
 * GPT_DATADIR (an installed copy), ./models.
 */
#define _XOPEN_SOURCE 700  // realpath
#include <libgen.h>  // dirname of the executable
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "front.h"
#include "base/fileio.h"
#include "model/loader.h"

#ifndef GPT_DATADIR
#define GPT_DATADIR "/usr/local/share/gpt"
#endif

// The directory this executable lives in.
static void exe_dir(char *out, size_t cap) {
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        snprintf(out, cap, ".");
        return;
    }
    path[n] = '\0';
    snprintf(out, cap, "%s", dirname(path));
}

// The user's data directory for gpt: $XDG_DATA_HOME/gpt or ~/.local/share/gpt.
static int user_data_dir(char *out, size_t cap) {
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(out, cap, "%s/gpt", xdg);
    else if (home && *home) snprintf(out, cap, "%s/.local/share/gpt", home);
    else return -1;
    return 0;
}

// 1 if dir holds vocab.json + merges.txt, or tokenizer.json.
static int has_tokenizer_files(const char *dir) {
    char *vocab = path_join(dir, "vocab.json"), *merges = path_join(dir, "merges.txt");
    char *json = path_join(dir, "tokenizer.json");
    int found = vocab && merges && json &&
                ((path_exists(vocab) && path_exists(merges)) || path_exists(json));
    free(vocab);
    free(merges);
    free(json);
    return found;
}

enum { MAX_DIRS = 5, DIR_CAP = 4096 };

// dir without "." and ".." and links where it exists (so that messages
// name /usr/share/gpt, not /usr/bin/../share/gpt); as it is otherwise.
static void tidy_dir(char dir[DIR_CAP]) {
    char *real = realpath(dir, NULL);
    if (real && strlen(real) < DIR_CAP) memcpy(dir, real, strlen(real) + 1);
    free(real);
}

// The directories of the files shipped with gpt (the GPT-2 tokenizer, the
// demo model), in the order they are searched. Returns how many (at most 5).
static int shipped_dirs(char dirs[MAX_DIRS][DIR_CAP]) {
    char exe[DIR_CAP];
    exe_dir(exe, sizeof exe);
    const char *beside[] = {"%s/models", "%s/../models", "%s/../share/gpt"};
    int n = 0;
    for (size_t i = 0; i < sizeof beside / sizeof *beside; i++) {
        snprintf(dirs[n], DIR_CAP, beside[i], exe);
        tidy_dir(dirs[n++]);
    }
    snprintf(dirs[n++], DIR_CAP, "%s", GPT_DATADIR);
    snprintf(dirs[n++], DIR_CAP, "models");
    return n;
}

// The GPT-2 vocab.json + merges.txt shipped with gpt.
static int default_tokenizer_dir(char out[DIR_CAP]) {
    char dirs[MAX_DIRS][DIR_CAP];
    int n = shipped_dirs(dirs);
    for (int i = 0; i < n; i++) {
        if (has_tokenizer_files(dirs[i])) {
            memcpy(out, dirs[i], DIR_CAP);
            return 0;
        }
    }
    return -1;
}

// The places searched for a model when neither -m nor $GPT_MODEL names one,
// in order: GPT-2 first, then the demo model. Duplicates (an installed
// gpt's ../share/gpt is GPT_DATADIR) are listed once.
enum { MAX_PLACES = 16 };
typedef struct {
    char path[MAX_PLACES][DIR_CAP];
    int is_demo[MAX_PLACES];
    int n;
} Places;

static void add_place(Places *p, const char *dir, const char *name, int is_demo) {
    char path[DIR_CAP];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->path[i], path)) return;
    if (p->n == MAX_PLACES) return;
    snprintf(p->path[p->n], DIR_CAP, "%s", path);
    p->is_demo[p->n++] = is_demo;
}

static void model_places(Places *p) {
    p->n = 0;
    char dir[DIR_CAP], exe[DIR_CAP];
    add_place(p, "models", "gpt2.bin", 0);
    add_place(p, "models", "gpt2", 0);
    if (user_data_dir(dir, sizeof dir) == 0) {
        add_place(p, dir, "gpt2.bin", 0);
        add_place(p, dir, "gpt2", 0);
    }
    exe_dir(exe, sizeof exe);
    strncat(exe, "/../share/gpt", sizeof exe - strlen(exe) - 1);
    tidy_dir(exe);
    add_place(p, exe, "gpt2.bin", 0);
    add_place(p, exe, "gpt2", 0);
    add_place(p, GPT_DATADIR, "gpt2.bin", 0);
    add_place(p, GPT_DATADIR, "gpt2", 0);
    char dirs[MAX_DIRS][DIR_CAP];
    int n = shipped_dirs(dirs);
    for (int i = 0; i < n; i++) add_place(p, dirs[i], DEMO_MODEL_FILE, 1);
}

// A place holds a model: a file ending in .bin, or a directory.
static int place_exists(const char *path) {
    size_t n = strlen(path);
    return n > 4 && !strcmp(path + n - 4, ".bin") ? path_exists(path) && !path_is_dir(path) : path_is_dir(path);
}

const char *resolve_model_path(const char *model_flag, char *buf, size_t cap, int *is_demo) {
    *is_demo = 0;
    if (model_flag) return model_flag;
    const char *env = getenv("GPT_MODEL");
    if (env && *env) return env;
    Places p;
    model_places(&p);
    for (int i = 0; i < p.n; i++) {
        if (place_exists(p.path[i])) {
            snprintf(buf, cap, "%s", p.path[i]);
            *is_demo = p.is_demo[i];
            return buf;
        }
    }
    return NULL;
}

// "gpt: no model: ..." with every place searched, in order, on one line.
static void report_no_model(void) {
    Places p;
    model_places(&p);
    char searched[sizeof p.path];  // every place, ", " between
    size_t n = 0;
    searched[0] = '\0';
    for (int i = 0; i < p.n && n < sizeof searched; i++)
        n += (size_t)snprintf(searched + n, sizeof searched - n, "%s %s", i ? "," : "", p.path[i]);
    runtime_error(NULL, "no model: pass -m PATH or set GPT_MODEL; searched%s. gpt-get-gpt2 (scripts/get-gpt2.sh in "
                  "the source) fetches and converts GPT-2", searched);
}

// What fetches GPT-2, as this user can run it: the source tree's
// scripts/get-gpt2.sh when the demo model came from one (ROOT/models/demo.bin
// beside ROOT/scripts/), else gpt-get-gpt2, as `make install` names it.
static void gpt2_fetcher(const char *demo_path, char out[DIR_CAP]) {
    char *models = path_dirname(demo_path), *root = models ? path_dirname(models) : NULL;
    char *script = root ? path_join(root, "scripts/get-gpt2.sh") : NULL;
    snprintf(out, DIR_CAP, "%s", script && path_exists(script) ? script : "gpt-get-gpt2");
    free(models);
    free(root);
    free(script);
}

int open_model(const char *model_flag, const WeightOptions *wo, Model *m, char *path_out, size_t cap, int quiet) {
    char found[DIR_CAP];
    int is_demo;
    const char *path = resolve_model_path(model_flag, found, sizeof found, &is_demo);
    snprintf(path_out, cap, "%s", path ? path : "");
    if (!path) {
        report_no_model();
        return EXIT_RUNTIME;
    }
    GptError err = {{0}};
    if (model_load_with(m, path, wo, &err) != 0) {
        // neither -m nor the search: a stale $GPT_MODEL is easy to forget
        if (!model_flag && path != found) {
            runtime_error(NULL, "%s (the model named by $GPT_MODEL)", err.msg);
            return EXIT_RUNTIME;
        }
        // nor one found by the search, which the user never named: a stray
        // ./models/gpt2/ (a clone without its LFS files) would fail every run
        if (!model_flag) {
            int dir = path_is_dir(path), relative = path[0] != '/';
            runtime_error(NULL, "%s (the default %s%s%s, found %s; -m PATH or $GPT_MODEL names another)", err.msg,
                          relative ? "./" : "", path, dir ? "/" : "",
                          relative ? "in the working directory" : "where gpt looks for GPT-2");
            return EXIT_RUNTIME;
        }
        return report_error(&err);
    }
    if (is_demo) {
        char fetcher[DIR_CAP];
        gpt2_fetcher(path, fetcher);
        note(quiet, "no GPT-2 installed; running the demo model %s (%.1fM parameters, trained on public-domain text); %s "
             "fetches GPT-2 124M",
             path, (double)m->n_params / 1e6, fetcher);
    }
    return EXIT_OK;
}

// Puts prefix before err's message.
static void error_prefix(GptError *err, const char *prefix) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    gpt_error(err, "%s%s", prefix, msg);  // cut to fit, as every message is
}

Tokenizer *open_tokenizer(const char *tokenizer_path, const Model *m, const char *model_path,
                          int *owned, GptError *err) {
    *owned = 1;
    if (tokenizer_path) {
        Tokenizer *t = tokenizer_load(tokenizer_path, err);
        if (!t) error_prefix(err, "--tokenizer ");  // the path alone does not say it is the tokenizer
        return t;
    }
    if (m && m->tokenizer) {
        *owned = 0;
        return m->tokenizer;
    }
    if (model_path) {
        // a directory is looked into; a file's directory, beside it
        char *dir = path_is_dir(model_path) ? path_join(model_path, NULL) : path_dirname(model_path);
        if (!dir) {
            gpt_error(err, "out of memory");
            return NULL;
        }
        Tokenizer *t = NULL;
        int found = has_tokenizer_files(dir);
        if (found) t = tokenizer_load(dir, err);
        free(dir);
        if (found) return t;
    }
    char dir[DIR_CAP];
    if (default_tokenizer_dir(dir) != 0) {
        gpt_error(err, "no tokenizer found: pass --tokenizer DIR (with vocab.json and merges.txt)");
        return NULL;
    }
    return tokenizer_load(dir, err);
}

/*
 * locate.c - where the model and the tokenizer files are, when the command
 * line does not say exactly.
 *
 * The model, the first that exists of:
 *   -m PATH, $GPT_MODEL,
 *   ./models/gpt2.bin, ./models/gpt2/          (a source checkout)
 *   $XDG_DATA_HOME/gpt/gpt2.bin (or ~/.local/share/gpt/gpt2.bin), and gpt2/
 *                                              (where gpt-get-gpt2 puts it)
 *   <gpt's directory>/../share/gpt/gpt2.bin, and GPT_DATADIR/gpt2.bin
 *                                              (an installed copy's share/gpt)
 * The tokenizer: --tokenizer, else the one in the model file, else the files
 * beside the model, else the GPT-2 files shipped with gpt (models/ beside or
 * above the executable, its ../share/gpt, GPT_DATADIR, ./models).
 */
#include <libgen.h>  // dirname of the executable
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "loader.h"

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

// The GPT-2 vocab.json + merges.txt shipped with gpt.
static int default_tokenizer_dir(char *out, size_t cap) {
    char exe[4096];
    exe_dir(exe, sizeof exe);
    const char *candidates[] = {"%s/models", "%s/../models", "%s/../share/gpt"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        snprintf(out, cap, candidates[i], exe);
        if (has_tokenizer_files(out)) return 0;
    }
    snprintf(out, cap, "%s", GPT_DATADIR);
    if (has_tokenizer_files(out)) return 0;
    snprintf(out, cap, "models");
    return has_tokenizer_files(out) ? 0 : -1;
}

const char *resolve_model_path(const char *model_flag, char *buf, size_t cap) {
    if (model_flag) return model_flag;
    const char *env = getenv("GPT_MODEL");
    if (env && *env) return env;
    if (path_exists("models/gpt2.bin")) return "models/gpt2.bin";
    if (path_is_dir("models/gpt2")) return "models/gpt2";
    char dir[4096], exe[4096];
    const char *dirs[3];
    int n = 0;
    if (user_data_dir(dir, sizeof dir) == 0) dirs[n++] = dir;
    exe_dir(exe, sizeof exe);
    strncat(exe, "/../share/gpt", sizeof exe - strlen(exe) - 1);
    dirs[n++] = exe;
    dirs[n++] = GPT_DATADIR;
    for (int i = 0; i < n; i++) {
        snprintf(buf, cap, "%s/gpt2.bin", dirs[i]);
        if (path_exists(buf)) return buf;
        snprintf(buf, cap, "%s/gpt2", dirs[i]);
        if (path_is_dir(buf)) return buf;
    }
    return NULL;
}

int load_model(const char *model_flag, int weight_dtype, Model *m, char *path_out, size_t cap) {
    char found[4096];
    const char *path = resolve_model_path(model_flag, found, sizeof found);
    snprintf(path_out, cap, "%s", path ? path : "");
    if (!path) {
        char data[4096];
        if (user_data_dir(data, sizeof data) != 0) snprintf(data, sizeof data, "~/.local/share/gpt");
        fprintf(stderr,
                "gpt: no model: pass -m PATH or set GPT_MODEL; none in ./models/gpt2.bin, %s/gpt2.bin or %s/gpt2.bin. "
                "gpt-get-gpt2 (scripts/get-gpt2.sh in the source) fetches and converts GPT-2\n",
                data, GPT_DATADIR);
        return EXIT_RUNTIME;
    }
    GptError err = {{0}};
    WeightOptions wo = {.matrix_dtype = weight_dtype};
    if (model_load_with(m, path, &wo, &err) != 0) return report_error(&err);
    return EXIT_OK;
}

Tokenizer *open_tokenizer(const char *tokenizer_path, const Model *m, const char *model_path,
                          int *owned, GptError *err) {
    *owned = 1;
    if (tokenizer_path) return tokenizer_load(tokenizer_path, err);
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
    char dir[4096];
    if (default_tokenizer_dir(dir, sizeof dir) != 0) {
        gpt_error(err, "no tokenizer found: pass --tokenizer DIR (with vocab.json and merges.txt)");
        return NULL;
    }
    return tokenizer_load(dir, err);
}

/*
 * locate.c - where the model and the tokenizer files are, when the command
 * line does not say exactly.
 */
#include <libgen.h>  // dirname of the executable
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fileio.h"
#include "loader.h"

// The directory this executable lives in (for the shipped tokenizer files).
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

// The GPT-2 vocab.json + merges.txt shipped with gpt: models/ beside the
// executable (or one level up, for build/gpt), an installed share/gpt, or
// models/ in the current directory.
static int default_tokenizer_dir(char *out, size_t cap) {
    char exe[4096];
    exe_dir(exe, sizeof exe);
    const char *candidates[] = {"%s/models", "%s/../models", "%s/../share/gpt"};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        snprintf(out, cap, candidates[i], exe);
        if (has_tokenizer_files(out)) return 0;
    }
    snprintf(out, cap, "models");
    return has_tokenizer_files(out) ? 0 : -1;
}

const char *resolve_model_path(const char *model_flag) {
    if (model_flag) return model_flag;
    const char *env = getenv("GPT_MODEL");
    if (env && *env) return env;
    if (path_exists("models/gpt2.bin")) return "models/gpt2.bin";
    if (path_is_dir("models/gpt2")) return "models/gpt2";
    return NULL;
}

int load_model(const char *model_flag, int weight_dtype, Model *m, const char **path_out) {
    const char *path = resolve_model_path(model_flag);
    *path_out = path;
    if (!path) {
        fprintf(stderr,
                "gpt: no model: pass -m PATH or set GPT_MODEL (models/gpt2.bin and models/gpt2/ "
                "do not exist); scripts/get-gpt2.sh fetches and converts GPT-2\n");
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

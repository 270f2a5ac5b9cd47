/*
 * loader.c - recognises a model file by its first bytes and hands it to its
 * format (safetensors.c, modelbin.c, llmc.c); describes any of them for
 * `gpt inspect`. See loader.h.
 */
#include "loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"
#include "clock.h"
#include "fileio.h"
#include "formats.h"
#include "modelbin.h"
#include "tokenizer.h"

ModelKind model_sniff(const unsigned char *head, size_t n, size_t file_size) {
    // safetensors: the length is checked against the file by the loader, so
    // that a truncated file gets a precise message instead of "unknown".
    if (n >= 9 && head[8] == '{') {
        uint64_t len = rd64(head);
        if (len >= 2 && len < SAFETENSORS_MAX_HEADER_BYTES) return MODEL_KIND_SAFETENSORS;
    }
    // llm.c: 256 int32 header, magic first (versions 3 = f32, 5 = bf16)
    if (n >= 4 && file_size >= 1024 && rd32(head) == LLMC_MAGIC) return MODEL_KIND_LLMC;
    // gpt's model.bin: 8 magic bytes; modelbin.c checks everything else
    if (n >= MODELBIN_MAGIC_LEN && memcmp(head, MODELBIN_MAGIC, MODELBIN_MAGIC_LEN) == 0)
        return MODEL_KIND_GPTBIN;
    return MODEL_KIND_UNKNOWN;
}

static const char NOT_A_CHECKPOINT[] =
    "not a GPT-2 checkpoint (expected a directory with config.json and model.safetensors, a "
    ".safetensors file, or a gpt model.bin)";

int model_load(Model *m, const char *path, GptError *err) { return model_load_with(m, path, NULL, err); }

int model_load_with(Model *m, const char *path, const WeightOptions *o, GptError *err) {
    double t0 = now_seconds();
    memset(m, 0, sizeof *m);
    char *st_path = NULL, *cfg_path = NULL;
    int rc = -1;
    int is_dir = path_is_dir(path);

    // A directory holds model.safetensors; a file is whatever it is.
    st_path = is_dir ? path_join(path, "model.safetensors") : path_join(path, NULL);
    if (!st_path) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    if (is_dir && !path_exists(st_path)) {
        cfg_path = path_join(path, "config.json");
        if (cfg_path && path_exists(cfg_path))
            gpt_error(err, "%s: has config.json but no model.safetensors (a Hugging Face GPT-2 directory holds both; "
                           "a download cut short?)", path);
        else
            gpt_error(err, "%s: %s", path, NOT_A_CHECKPOINT);
        goto done;
    }
    if (file_map(st_path, &m->map, err) != 0) goto done;

    switch (model_sniff(m->map.data, m->map.size, m->map.size)) {
    case MODEL_KIND_GPTBIN:
        if (modelbin_load_mapped(m, st_path, o, err) != 0) goto done;
        break;
    case MODEL_KIND_LLMC:
        if (llmc_load_mapped(m, st_path, o, err) != 0) goto done;
        break;
    case MODEL_KIND_UNKNOWN:
        // A directory's model.safetensors is one by name: too short a file
        // gets the loader's precise message; anything else is unknown.
        if (!(is_dir && m->map.size < 9)) {
            if (is_dir) gpt_error(err, "%s: not a safetensors file", st_path);
            else gpt_error(err, "%s: %s", path, NOT_A_CHECKPOINT);
            goto done;
        }
        // fall through
    case MODEL_KIND_SAFETENSORS:
        cfg_path = path_sibling(st_path, "config.json");
        if (!cfg_path) {
            gpt_error(err, "%s: out of memory", path);
            goto done;
        }
        if (!path_exists(cfg_path)) {
            gpt_error(err, "%s: no config.json beside it (looked for %s)", st_path, cfg_path);
            goto done;
        }
        if (safetensors_load_mapped(m, st_path, cfg_path, o, err) != 0) goto done;
        break;
    }
    m->load_seconds = now_seconds() - t0;
    rc = 0;
done:
    free(st_path);
    free(cfg_path);
    if (rc != 0) model_free(m);
    return rc;
}

// ---------------------------------------------------------------------------
// inspect

int model_info_add(ModelInfo *info, size_t *cap, const char *name, const char *dtype, int ndim,
                   const uint64_t *dims, uint64_t offset, uint64_t nbytes) {
    if (info->n_tensors == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        TensorInfo *t = realloc(info->tensors, nc * sizeof *t);
        if (!t) return -1;
        info->tensors = t;
        *cap = nc;
    }
    TensorInfo *t = &info->tensors[info->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim > 8 ? 8 : ndim;
    for (int d = 0; d < t->ndim; d++) t->dims[d] = dims[d];
    t->offset = offset;
    t->nbytes = nbytes;
    return 0;
}

static int by_offset(const void *a, const void *b) {
    uint64_t x = ((const TensorInfo *)a)->offset, y = ((const TensorInfo *)b)->offset;
    return x < y ? -1 : x > y;
}

int model_inspect(const char *path, ModelInfo *info, GptError *err) {
    memset(info, 0, sizeof *info);
    Model m;
    if (model_load(&m, path, err) != 0) return -1;
    info->config = m.config;
    info->n_params = m.n_params;
    info->weight_bytes = m.weight_bytes;
    info->decode_bytes = m.decode_bytes;
    snprintf(info->kind, sizeof info->kind, "%s", m.source_kind);
    if (m.tokenizer) {
        info->n_tokens = tokenizer_vocab_size(m.tokenizer);
        info->n_merges = tokenizer_n_merges(m.tokenizer);
    }
    model_free(&m);
    if (path_is_dir(path)) snprintf(info->file, sizeof info->file, "%s/model.safetensors", path);
    else snprintf(info->file, sizeof info->file, "%s", path);
    MappedFile f;
    if (file_map(info->file, &f, err) != 0) return -1;
    info->file_bytes = f.size;
    int rc;
    if (!strcmp(info->kind, "model.bin")) rc = modelbin_list(f.data, f.size, info, err);
    else if (!strcmp(info->kind, "llm.c")) rc = llmc_list(f.data, f.size, info, err);
    else rc = safetensors_list(f.data, f.size, info, err);
    file_unmap(&f);
    if (rc == 0) qsort(info->tensors, info->n_tensors, sizeof *info->tensors, by_offset);
    else model_info_free(info);
    return rc;
}

void model_info_free(ModelInfo *info) {
    if (!info) return;
    free(info->tensors);
    info->tensors = NULL;
    info->n_tensors = 0;
}

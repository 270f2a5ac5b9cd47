/*
 * loader.c - recognises a model file by its first bytes and hands it to its
 * format (safetensors.c, modelbin.c, llmc.c, gguf.c); describes any of them for
 * `gpt inspect`. See loader.h. The formats are one table, indexed by
 * ModelKind: what recognises a file also loads and lists it.
 */
#include "model/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fileio.h"
#include "model/formats.h"
#include "model/lora.h"
#include "model/tokenizer.h"

static const ModelFormat *const FORMATS[MODEL_KIND_COUNT] = {
    [MODEL_KIND_SAFETENSORS] = &SAFETENSORS_FORMAT,
    [MODEL_KIND_GPTBIN] = &MODELBIN_FORMAT,
    [MODEL_KIND_LLMC] = &LLMC_FORMAT,
    [MODEL_KIND_GGUF] = &GGUF_FORMAT,
};

ModelKind model_sniff(const unsigned char *head, size_t n, size_t file_size) {
    for (int k = 0; k < MODEL_KIND_COUNT; k++)
        if (FORMATS[k] && FORMATS[k]->sniff(head, n, file_size)) return (ModelKind)k;
    return MODEL_KIND_UNKNOWN;
}

// Every format gpt reads, for the messages about a file it does not.
#define FORMATS_READ                                                                                        \
    "a gpt model.bin, a Hugging Face GPT-2 directory with config.json and model.safetensors, a .safetensors " \
    "file, an llm.c checkpoint such as gpt2_124M.bin, or a llama.cpp GGUF file of a GPT-2 model"
static const char NOT_A_CHECKPOINT[] = "not a GPT-2 checkpoint; gpt reads " FORMATS_READ;

// model_load_with, which also says which kind of file it loaded.
static int load(Model *m, const char *path, const WeightOptions *o, ModelKind *kind, GptError *err) {
    double t0 = now_seconds();
    memset(m, 0, sizeof *m);
    char *st_path = NULL, *cfg_path = NULL;
    LoraSet lora = {0};
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

    *kind = model_sniff(m->map.data, m->map.size, m->map.size);
    if (*kind == MODEL_KIND_UNKNOWN) {
        // A directory's model.safetensors is one by name: too short a file
        // gets the format's precise message; anything else is unknown.
        if (!(is_dir && m->map.size < 9)) {
            if (is_dir) gpt_error(err, "%s: not a safetensors file", st_path);
            else gpt_error(err, "%s: %s", path, NOT_A_CHECKPOINT);
            goto done;
        }
        *kind = MODEL_KIND_SAFETENSORS;
    }
    // adapters: read first (their own errors come before the base's long
    // load), merged as model_set_weights sets the weights
    WeightOptions with = o ? *o : (WeightOptions){.matrix_dtype = -1};
    if (o && o->n_lora) {
        if (lora_set_open(&lora, o->lora, o->n_lora, err) != 0) goto done;
        with.deltas_for = lora_set_deltas;
        with.deltas_ctx = &lora;
    }
    if (FORMATS[*kind]->load(m, st_path, &with, err) != 0) goto done;
    if (o && o->q8_int8) model_set_q8_int8(m);
    snprintf(m->source_kind, sizeof m->source_kind, "%s", FORMATS[*kind]->name);
    m->load_seconds = now_seconds() - t0;
    rc = 0;
done:
    lora_set_close(&lora);
    free(st_path);
    free(cfg_path);
    if (rc != 0) model_free(m);
    return rc;
}

int model_load(Model *m, const char *path, GptError *err) { return model_load_with(m, path, NULL, err); }

int model_load_with(Model *m, const char *path, const WeightOptions *o, GptError *err) {
    ModelKind kind;
    return load(m, path, o, &kind, err);
}

// ---------------------------------------------------------------------------
// inspect

static int by_offset(const void *a, const void *b) {
    uint64_t x = ((const TensorInfo *)a)->offset, y = ((const TensorInfo *)b)->offset;
    return x < y ? -1 : x > y;
}

int model_inspect(const char *path, ModelInfo *info, GptError *err) {
    memset(info, 0, sizeof *info);
    Model m;
    ModelKind kind;
    if (load(&m, path, NULL, &kind, err) != 0) return -1;
    info->config = m.config;
    info->n_params = m.n_params;
    info->weight_bytes = m.weight_bytes;
    info->decode_bytes = m.decode_bytes;
    model_matrix_dtypes(&m, info->matrices, sizeof info->matrices);
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
    int rc = FORMATS[kind]->list(f.data, f.size, info, err);
    file_unmap(&f);
    if (rc == 0) qsort(info->tensors, info->n_tensors, sizeof *info->tensors, by_offset);
    else model_info_free(info);
    return rc;
}

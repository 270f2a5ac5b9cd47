/*
 * formats.h - the entry points of the file formats, for loader.c.
 *
 * Each format lives in its own file and depends only on model.h (the tensor
 * table it validates against) and bytes.h; loader.c sniffs a file and calls
 * one of these. The formats are described in docs/model-format.md.
 */
#ifndef GPT_FORMATS_H
#define GPT_FORMATS_H

#include <stddef.h>

#include "error.h"
#include "loader.h"
#include "model.h"

#define LLMC_MAGIC 20240326u
#define SAFETENSORS_MAX_HEADER_BYTES ((size_t)100 << 20)  // safetensors' own limit

// safetensors.c. Reads the Hugging Face config.json at config_path into
// m->config, then the safetensors file already mapped in m->map.
int safetensors_load_mapped(Model *m, const char *path, const char *config_path, const WeightOptions *o,
                            GptError *err);
// Lists the entries of a safetensors header already validated by loading.
int safetensors_list(const unsigned char *file, size_t size, ModelInfo *info, GptError *err);

// modelbin.c. Validates the model.bin mapped in m->map, hands its tensors to
// model_set_weights (in place, unless converted) and builds m->tokenizer
// from the stored tables.
int modelbin_load_mapped(Model *m, const char *path, const WeightOptions *o, GptError *err);
int modelbin_list(const unsigned char *file, size_t size, ModelInfo *info, GptError *err);

// llmc.c. Validates the llm.c checkpoint (version 3, float32) mapped in
// m->map and hands its tensors to model_set_weights: llm.c stores matrices
// one row per output, as gpt holds them, so they are used in place (wte
// without its padded rows). m->tokenizer stays NULL (llm.c files carry none).
int llmc_load_mapped(Model *m, const char *path, const WeightOptions *o, GptError *err);
int llmc_list(const unsigned char *file, size_t size, ModelInfo *info, GptError *err);

#endif

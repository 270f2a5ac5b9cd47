/*
 * loader.h - opening a model file of any kind gpt reads, and describing it.
 *
 * Accepted inputs, recognised by content, not by name:
 *   - a Hugging Face GPT-2 directory: config.json + model.safetensors
 *     (F32, F16 or BF16), or such a model.safetensors file with config.json
 *     beside it (safetensors.c)
 *   - gpt's own one-file model.bin (modelbin.c, docs/model-format.md)
 *   - an llm.c checkpoint, gpt2_124M.bin, version 3 (llmc.c)
 *   - llama.cpp's GGUF file of a GPT-2 model, versions 2 and 3 (gguf.c)
 * loader.c sniffs the first bytes and hands the file to its format (one
 * table of the formats, formats.h, serves recognising, loading and
 * listing); every format validates every byte range and shape against the
 * tensor table (model.h) before it touches the data.
 */
#ifndef GPT_LOADER_H
#define GPT_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/formats.h"  // ModelInfo
#include "model/model.h"

// Loads the checkpoint at `path` into *m (zeroed first). Returns 0, or -1 with
// a message naming the file and, where it applies, the tensor. On failure *m
// holds nothing that needs freeing (model_free is still safe).
int model_load(Model *m, const char *path, GptError *err);
// The same, with the weights converted as `o` says (NULL: as stored): e.g.
// every matrix to F16, BF16 or Q8 in memory, without writing a file.
int model_load_with(Model *m, const char *path, const WeightOptions *o, GptError *err);

// What a checkpoint file is, judged by its first bytes.
typedef enum {
    MODEL_KIND_UNKNOWN = 0,
    MODEL_KIND_SAFETENSORS,  // 8-byte LE header length, then a JSON object
    MODEL_KIND_GPTBIN,       // gpt's model.bin: the 8 bytes MODELBIN_MAGIC
    MODEL_KIND_LLMC,         // llm.c checkpoint: int32 magic 20240326
    MODEL_KIND_GGUF,         // llama.cpp's GGUF: the 4 bytes "GGUF"
} ModelKind;

enum { MODEL_KIND_COUNT = 5 };

// Looks at the first n bytes `head` of a file of file_size bytes and says what
// kind of checkpoint it is; it reads nothing else and never fails. The loader
// then validates the whole file and reports anything wrong in detail.
ModelKind model_sniff(const unsigned char *head, size_t n, size_t file_size);

// Validates the model at `path` (by loading it) and lists the tensors as the
// file stores them (ModelInfo: formats.h). model_info_free() afterwards.
int model_inspect(const char *path, ModelInfo *info, GptError *err);

#endif

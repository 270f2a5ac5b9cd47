/*
 * loader.h - opening a model file of any kind gpt reads, and describing it.
 *
 * Accepted inputs, recognised by content, not by name:
 *   - a Hugging Face GPT-2 directory: config.json + model.safetensors
 *     (F32, F16 or BF16), or such a model.safetensors file with config.json
 *     beside it (safetensors.c)
 *   - gpt's own one-file model.bin (modelbin.c, docs/model-format.md)
 *   - an llm.c checkpoint, gpt2_124M.bin, version 3 (llmc.c)
 * loader.c sniffs the first bytes and hands the file to its format; every
 * format validates every byte range and shape against the tensor table
 * (model.h) before it touches the data.
 */
#ifndef GPT_LOADER_H
#define GPT_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

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
} ModelKind;

// Looks at the first n bytes `head` of a file of file_size bytes and says what
// kind of checkpoint it is; it reads nothing else and never fails. The loader
// then validates the whole file and reports anything wrong in detail.
ModelKind model_sniff(const unsigned char *head, size_t n, size_t file_size);

// One tensor as a file stores it, for `gpt inspect`.
typedef struct {
    char name[96];
    char dtype[8];       // "F32", "F16", "BF16", "Q8", or as the file says
    int transposed;      // a matrix stored one row per output: dims are
                         // still Hugging Face's (in, out)
    int ndim;            // up to 8
    uint64_t dims[8];
    uint64_t offset;     // absolute byte offset of its data in the file
    uint64_t nbytes;
} TensorInfo;

typedef struct {
    char kind[32];            // "model.bin", "safetensors", "llm.c"
    char file[1024];          // the file that holds the weights
    uint64_t file_bytes;
    unsigned version;         // model.bin / llm.c format version; 0 otherwise
    GPT2Config config;
    size_t n_params;
    size_t weight_bytes;      // as loaded
    size_t decode_bytes;      // weights one decode step reads (Model.decode_bytes)
    size_t n_tokens, n_merges;  // the stored tokenizer (model.bin); 0 if none
    size_t data_offset;       // where tensor data starts
    TensorInfo *tensors;      // (n_tensors), malloc'd, in file order
    size_t n_tensors;
} ModelInfo;

// Validates the model at `path` (by loading it) and lists the tensors as the
// file stores them. model_info_free() afterwards.
int model_inspect(const char *path, ModelInfo *info, GptError *err);
void model_info_free(ModelInfo *info);  // NULL-safe, idempotent

// Appends one entry to info->tensors (growing it); *cap is the allocation.
// For the format files' listers. Returns 0, or -1 when out of memory.
int model_info_add(ModelInfo *info, size_t *cap, const char *name, const char *dtype, int ndim,
                   const uint64_t *dims, uint64_t offset, uint64_t nbytes);

#endif

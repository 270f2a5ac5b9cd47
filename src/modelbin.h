/*
 * modelbin.h - gpt's one-file model.bin (configuration, tokenizer and weights
 * in one little-endian file, mapped and used in place), llm.c checkpoints,
 * and a description of any model file for `gpt inspect`.
 *
 * The format is documented at the top of modelbin.c and in
 * docs/model-format.md. model_load() (model.c) recognises both kinds by
 * content and calls the loaders below; most callers never use them directly.
 */
#ifndef GPT_MODELBIN_H
#define GPT_MODELBIN_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"
#include "tokenizer.h"

#define MODELBIN_MAGIC "GPT2BIN\0"
#define MODELBIN_MAGIC_LEN 8
#define MODELBIN_VERSION 1u
#define MODELBIN_HEADER_BYTES 128u
#define MODELBIN_ENTRY_BYTES 128u   // one tensor table entry
#define MODELBIN_DATA_ALIGN 4096u   // the data region starts on a page
#define MODELBIN_TENSOR_ALIGN 64u   // each tensor starts on a cache line

// Tensor dtypes. Each tensor records its own, so that reduced-precision
// weights can be added without a new format version. This build reads F32.
enum { MODELBIN_F32 = 0, MODELBIN_F16 = 1, MODELBIN_BF16 = 2 };

// Loads the model.bin already mapped in m->map (m zeroed but for the map):
// validates the whole file, points the weights into the mapping (m->owned
// stays NULL) and builds m->tokenizer from the stored tables. Returns 0, or
// -1 with err naming `path` and what is wrong; the caller then model_free()s.
int modelbin_load_mapped(Model *m, const char *path, GptError *err);

// Loads the llm.c checkpoint (version 3, float32) mapped in m->map: drops the
// padded vocabulary rows, transposes llm.c's (out, in) matrices to the
// Conv1D (in, out) layout, all into one 64-byte-aligned block (m->owned), and
// unmaps the file. m->tokenizer stays NULL (llm.c files carry none).
int llmc_load_mapped(Model *m, const char *path, GptError *err);

// Writes model m with tokenizer tok to out_path as a model.bin. The bytes go
// to a temporary file beside out_path (out_path.tmp-XXXXXX), which is
// fsync'ed and renamed over out_path only when complete, and removed on any
// error: an interrupted run never leaves a half-written out_path. *bytes_out
// (may be NULL) gets the file's size. Returns 0, or -1 with err set.
int modelbin_write(const Model *m, const Tokenizer *tok, const char *out_path,
                   size_t *bytes_out, GptError *err);

// One tensor as a file stores it, for `gpt inspect`.
typedef struct {
    char name[96];
    char dtype[8];       // "F32", "F16", "BF16", or as the file says
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
    size_t n_tokens, n_merges;  // the stored tokenizer (model.bin); 0 if none
    size_t data_offset;       // where tensor data starts
    TensorInfo *tensors;      // (n_tensors), malloc'd, in file order
    size_t n_tensors;
} ModelInfo;

// Validates the model at `path` (any kind model_load accepts, by loading it)
// and lists the tensors as the file stores them. info_free() afterwards.
int model_inspect(const char *path, ModelInfo *info, GptError *err);
void model_info_free(ModelInfo *info);  // NULL-safe, idempotent

#endif

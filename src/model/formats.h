/*
 * formats.h - what a model file format provides, and the description of a
 * file that every format fills (for `gpt inspect`).
 *
 * Each format lives in its own file (safetensors.c, modelbin.c, llmc.c,
 * gguf.c) and
 * depends only on this header, model.h (the tensor table it validates
 * against) and bytes.h, never on the loader or on another format. It
 * exports one ModelFormat; loader.c keeps the table of them, indexed by
 * ModelKind, and uses it to recognise, load and list a file alike. The
 * formats are described in docs/model-format.md.
 */
#ifndef GPT_FORMATS_H
#define GPT_FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/model.h"

// One tensor as a file stores it, for `gpt inspect`.
typedef struct {
    char name[96];
    char dtype[8];       // "F32", "F16", "BF16", "Q8", "Q4", or as the file says
    int transposed;      // a matrix stored one row per output: dims are
                         // still Hugging Face's (in, out)
    int ndim;            // up to 8
    uint64_t dims[8];
    uint64_t offset;     // absolute byte offset of its data in the file
    uint64_t nbytes;
} TensorInfo;

// A model file as `gpt inspect` describes it.
typedef struct {
    char kind[32];            // "model.bin", "safetensors", "llm.c"
    char file[1024];          // the file that holds the weights
    uint64_t file_bytes;
    unsigned version;         // model.bin / llm.c format version; 0 otherwise
    GPT2Config config;
    size_t n_params;
    size_t weight_bytes;      // as loaded
    size_t decode_bytes;      // weights one decode step reads (Model.decode_bytes)
    char matrices[32];        // the matrices' dtypes (model_matrix_dtypes): "Q4 (wte Q8)"
    size_t n_tokens, n_merges;  // the stored tokenizer (model.bin); 0 if none
    size_t data_offset;       // where tensor data starts
    TensorInfo *tensors;      // (n_tensors), malloc'd, in file order
    size_t n_tensors;
} ModelInfo;

// Appends one entry to info->tensors (growing it); *cap is the allocation.
// For the formats' list functions. Returns 0, or -1 when out of memory
// (info unchanged).
int model_info_add(ModelInfo *info, size_t *cap, const char *name, const char *dtype, int ndim,
                   const uint64_t *dims, uint64_t offset, uint64_t nbytes);
// Frees info->tensors. NULL-safe, idempotent.
void model_info_free(ModelInfo *info);

// A file format.
typedef struct {
    // what Model.source_kind and ModelInfo.kind say: "safetensors", ...
    const char *name;
    // Whether the first n bytes `head` of a file of file_size bytes are this
    // format's; reads nothing else and never fails (the load then validates
    // the whole file). No two formats claim the same bytes.
    int (*sniff)(const unsigned char *head, size_t n, size_t file_size);
    // Validates the file mapped in m->map (at `path`, for messages and for
    // the files beside it) and hands its tensors to model_set_weights (in
    // place where they can be, converted as o says); sets m->config and,
    // where the file stores one, m->tokenizer. 0, or -1 with err set.
    int (*load)(Model *m, const char *path, const WeightOptions *o, GptError *err);
    // Lists the tensors of a file already validated by loading, as it
    // stores them, into info (info->file names it); sets info->version and
    // info->data_offset. 0, or -1 with err set.
    int (*list)(const unsigned char *file, size_t size, ModelInfo *info, GptError *err);
} ModelFormat;

// safetensors.c's reading of any safetensors file, for the readers of
// other files in that format (lora.c): cJSON's tree of the header.
typedef struct cJSON cJSON;
// Checks the header length of the file (size bytes, named path in
// messages) and parses the header: *hdr (cJSON_Delete it), *data the data
// region of *data_size bytes. 0, or -1 with err set (*hdr NULL).
int safetensors_header(const unsigned char *file, size_t size, const char *path, cJSON **hdr,
                       const unsigned char **data, size_t *data_size, GptError *err);
// One tensor of a header (e: an entry of *hdr; e->string its name).
typedef struct {
    DType dtype;  // F32, F16 or BF16 (any other is refused)
    int ndim;     // up to 8
    size_t dims[8];
    size_t begin;  // offset of its bytes in the data region
} SafetensorsEntry;
// Reads entry e: its dtype, shape, and byte range, checked to lie in the
// data region and to hold exactly what dtype and shape need. 0, or -1 with
// err naming path and the tensor.
int safetensors_entry(const cJSON *e, size_t data_size, const char *path, SafetensorsEntry *out, GptError *err);

// gguf.c's reading of llama.cpp's GGUF LoRA adapter, for lora.c: one
// tensor, as the file stores it.
typedef struct {
    char name[64];   // "blk.0.attn_qkv.weight.lora_a"
    DType dtype;     // F32, F16 or BF16 (any other is refused)
    uint64_t ne[2];  // ggml's order: ne[0] values per row, ne[1] rows
    size_t begin;    // offset of its bytes from *data
} GgufLoraTensor;
// Checks the GGUF file (size bytes, named path in messages) and that it is
// a LoRA adapter of a GPT-2: general.type "adapter", adapter.type "lora",
// general.architecture "gpt2", a float32 adapter.lora.alpha (into *alpha);
// every tensor 2-D in F32, F16 or BF16, inside the data region (*data).
// *t (free it) gets the n tensors in file order. 0, or -1 with err naming
// path and the field or tensor (*t NULL).
int gguf_lora_read(const unsigned char *file, size_t size, const char *path, float *alpha,
                   const unsigned char **data, GgufLoraTensor **t, size_t *n, GptError *err);

// Hugging Face's model.safetensors, with config.json beside it (safetensors.c).
extern const ModelFormat SAFETENSORS_FORMAT;
// gpt's model.bin, its tokenizer included (modelbin.c).
extern const ModelFormat MODELBIN_FORMAT;
// llm.c's checkpoint, version 3, float32 (llmc.c); it stores no tokenizer.
extern const ModelFormat LLMC_FORMAT;
// llama.cpp's GGUF, versions 2 and 3, of a GPT-2 model (gguf.c), its
// tokenizer included when it has one.
extern const ModelFormat GGUF_FORMAT;

#endif

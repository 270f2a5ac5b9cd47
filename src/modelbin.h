/*
 * modelbin.h - gpt's one-file model.bin: the configuration, the tokenizer
 * and the weights in one little-endian file that is mapped and used in
 * place. docs/model-format.md describes the layout; loader.h's model_load()
 * reads it like any other model file, and modelbin_write() writes one.
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
#define MODELBIN_VERSION 2u  // written; versions 1 and 2 are read
#define MODELBIN_HEADER_BYTES 128u
#define MODELBIN_ENTRY_BYTES 128u   // one tensor table entry
#define MODELBIN_DATA_ALIGN 4096u   // the data region starts on a page
#define MODELBIN_TENSOR_ALIGN 64u   // each tensor starts on a cache line

// Tensor dtypes: each tensor records its own (dtype.h's codes).
enum { MODELBIN_F32 = DTYPE_F32, MODELBIN_F16 = DTYPE_F16, MODELBIN_BF16 = DTYPE_BF16, MODELBIN_Q8 = DTYPE_Q8 };

// Writes model m with tokenizer tok to out_path as a model.bin, each tensor
// in the dtype the model holds it in. The bytes go to a temporary file
// beside out_path (out_path.tmp-XXXXXX), which is fsync'ed and renamed over
// out_path only when complete, and removed on any error: an interrupted run
// never leaves a half-written out_path. *bytes_out (may be NULL) gets the
// file's size. Returns 0, or -1 with err set.
int modelbin_write(const Model *m, const Tokenizer *tok, const char *out_path,
                   size_t *bytes_out, GptError *err);

#endif

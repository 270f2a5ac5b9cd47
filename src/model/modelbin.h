/*
 * modelbin.h - gpt's one-file model.bin: the configuration, the tokenizer
 * and the weights in one little-endian file that is mapped and used in
 * place. docs/model-format.md describes the layout; loader.h's model_load()
 * reads it like any other model file, and modelbin_write() writes one.
 */
#ifndef GPT_MODELBIN_H
#define GPT_MODELBIN_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "base/error.h"
#include "model/model.h"
#include "model/tokenizer.h"

#define MODELBIN_MAGIC "GPT2BIN\0"
#define MODELBIN_MAGIC_LEN 8
#define MODELBIN_VERSION 3u  // written; versions 1 to 3 are read
#define MODELBIN_HEADER_BYTES 128u
#define MODELBIN_ENTRY_BYTES 128u   // one tensor table entry
#define MODELBIN_DATA_ALIGN 4096u   // the data region starts on a page
#define MODELBIN_TENSOR_ALIGN 64u   // each tensor starts on a cache line

// The header's flags (version 3; GPT2Config's fields of the same names).
enum { MODELBIN_ATTN_UNSCALED = 1, MODELBIN_ATTN_BY_LAYER = 2, MODELBIN_UNTIED_OUTPUT = 4, MODELBIN_FLAGS_KNOWN = 7 };

// Tensor dtypes: each tensor records its own (dtype.h's codes).
enum { MODELBIN_F32 = DTYPE_F32, MODELBIN_F16 = DTYPE_F16, MODELBIN_BF16 = DTYPE_BF16, MODELBIN_Q8 = DTYPE_Q8,
       MODELBIN_Q4 = DTYPE_Q4, MODELBIN_Q6 = DTYPE_Q6 };

// How modelbin_write_with treats OUT and an interruption.
typedef struct {
    int replace;             // an existing OUT (a regular file) is replaced,
                             // keeping its mode; without it, refused
    const char *const *inputs;  // the files the model came from: OUT may
    size_t n_inputs;            // not be any of them (same device and inode)
    const volatile sig_atomic_t *cancel;  // set (by a signal handler, say):
                             // the write stops and leaves nothing behind
    // Told after each tensor's data is written (may be NULL): the tensors
    // and the bytes of the data done, of all of them.
    void (*progress)(void *ctx, size_t tensors_done, size_t n_tensors, uint64_t bytes_done, uint64_t data_bytes);
    void *progress_ctx;
} ModelbinWriteOptions;

// Writes model m with tokenizer tok to out_path as a model.bin, each tensor
// in the dtype the model holds it in. OUT must be a new name, or (with
// replace) a regular file; a device, a directory or an input is refused.
// The bytes go to a file with no name (fileio.h's NewFile: O_TMPFILE; where
// the file system lacks it, a temporary beside OUT, removed on any error),
// fsync'ed, which takes OUT's name only when complete: whatever happens, OUT is either what
// it was or the whole new file. *bytes_out (may be NULL) gets the file's
// size. Returns 0, or -1 with err set.
int modelbin_write_with(const Model *m, const Tokenizer *tok, const char *out_path, const ModelbinWriteOptions *o,
                        size_t *bytes_out, GptError *err);
// The checks modelbin_write_with makes of OUT before it writes anything, for
// a caller that would rather refuse before a long load. 0 or -1.
int modelbin_check_out(const char *out_path, const ModelbinWriteOptions *o, GptError *err);
// The same with no options: a new name only.
int modelbin_write(const Model *m, const Tokenizer *tok, const char *out_path, size_t *bytes_out, GptError *err);

#endif

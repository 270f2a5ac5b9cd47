/*
 * model.h - a GPT-2 model in memory: hyper-parameters and float32 weights.
 *
 * model_load() opens a checkpoint, validates every tensor against the shape
 * the configuration implies, and leaves float32 weights that the forward pass
 * reads. It does not run anything and does not own a KV cache.
 *
 * Accepted inputs (recognised by content, not by name):
 *   - a Hugging Face GPT-2 directory: config.json + model.safetensors
 *   - a model.safetensors file with config.json beside it
 *   - gpt's own one-file model.bin, or an llm.c checkpoint (modelbin.c)
 *
 * Storage: weights live in one read-only mapping of the file when the file's
 * float32 data is aligned, or else in one 64-byte-aligned allocation into which
 * they are copied once (unaligned data, F16/BF16 widened to float32). The
 * pointers below point into that storage and are never freed one by one.
 */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "fileio.h"

typedef struct {
    int n_layer;      // L
    int n_head;       // NH
    int n_embd;       // C  (= NH * HS)
    int n_ctx;        // maxT, positions the model knows (n_positions)
    int vocab_size;   // V
    float ln_eps;     // layer_norm_epsilon
} GPT2Config;

// One transformer block. Matrices are in Hugging Face's Conv1D layout,
// (in, out) row-major, so that y = x @ W + b.
typedef struct {
    const float *ln1_w, *ln1_b;          // (C), (C)
    const float *qkv_w, *qkv_b;          // (C, 3C), (3C)   attn.c_attn
    const float *attn_proj_w, *attn_proj_b;  // (C, C), (C) attn.c_proj
    const float *ln2_w, *ln2_b;          // (C), (C)
    const float *fc_w, *fc_b;            // (C, 4C), (4C)   mlp.c_fc
    const float *fc_proj_w, *fc_proj_b;  // (4C, C), (C)    mlp.c_proj
} GPT2Layer;

typedef struct {
    const float *wte;       // (V, C)    token embedding, also the tied lm_head
    const float *wpe;       // (maxT, C) position embedding
    GPT2Layer *layers;      // (L) array, malloc'd
    const float *lnf_w, *lnf_b;  // (C), (C)
} GPT2Weights;

typedef struct Tokenizer Tokenizer;

typedef struct {
    GPT2Config config;
    GPT2Weights weights;
    size_t n_params;          // float32 parameters (wte counted once)
    size_t weight_bytes;      // n_params * 4: what one decode step reads
    MappedFile map;           // the file, when weights point into it
    float *owned;             // the aligned copy, when they do not
    Tokenizer *tokenizer;     // a tokenizer stored in the model file, or NULL
    double load_seconds;      // wall time of model_load
    char source_kind[32];     // "safetensors", "model.bin", "llm.c"
} Model;

// Loads the checkpoint at `path` into *m (zeroed first). Returns 0, or -1 with
// a message naming the file and, where it applies, the tensor. On failure *m
// holds nothing that needs freeing (model_free is still safe).
int model_load(Model *m, const char *path, GptError *err);

// Frees what model_load allocated and unmaps the file. NULL-safe, idempotent.
void model_free(Model *m);

// What a checkpoint file is, judged by its first bytes (model_sniff).
typedef enum {
    MODEL_KIND_UNKNOWN = 0,
    MODEL_KIND_SAFETENSORS,  // 8-byte LE header length, then a JSON object
    MODEL_KIND_GPTBIN,       // gpt's own model.bin (loaded by modelbin.c)
    MODEL_KIND_LLMC,         // llm.c checkpoint: int32 magic 20240326 (modelbin.c)
} ModelKind;

// Looks at the first n bytes `head` of a file of file_size bytes and says what
// kind of checkpoint it is; it reads nothing else and never fails. The loader
// then validates the whole file and reports anything wrong in detail.
// gpt's model.bin starts with the 8 bytes MODELBIN_MAGIC (modelbin.h).
ModelKind model_sniff(const unsigned char *head, size_t n, size_t file_size);

// The weights as a list of tensors, in the canonical order of a Hugging Face
// file (unprefixed names): 0 wte.weight, 1 wpe.weight, then 12 per layer
// (2 + 12*l + k: ln_1.weight, ln_1.bias, attn.c_attn.weight, .bias,
// attn.c_proj.weight, .bias, ln_2.weight, .bias, mlp.c_fc.weight, .bias,
// mlp.c_proj.weight, .bias), then ln_f.weight, ln_f.bias. modelbin.c writes
// and reads tensors in this order. The config must have been validated.
size_t gpt2_n_tensors(const GPT2Config *c);
// Name of tensor i, e.g. "h.3.mlp.c_fc.weight".
void gpt2_tensor_name(const GPT2Config *c, size_t i, char *buf, size_t n);
// Shape of tensor i in storage order (HF Conv1D layout); returns ndim (1 or 2).
int gpt2_tensor_shape(const GPT2Config *c, size_t i, size_t dims[2]);
// The float32 data of tensor i of a loaded model.
const float *model_tensor(const Model *m, size_t i);
// Points m->weights at ptr[i] for each tensor i (m->config set); allocates
// m->weights.layers. Returns 0, or -1 with err naming `path`.
int model_set_weights(Model *m, const float *const *ptr, const char *path, GptError *err);

// The GPT-2 hyper-parameters must make sense together; 0 if they do, else -1
// with err naming `what` (usually the file) and the bad field.
int gpt2_config_validate(const GPT2Config *c, const char *what, GptError *err);

#endif

/*
 * lora.h - PEFT LoRA adapters and llama.cpp's GGUF LoRA files for GPT-2,
 * read to be merged at load.
 *
 * An adapter is a directory as PEFT's save_pretrained writes it:
 * adapter_config.json and adapter_model.safetensors (F32, F16 or BF16
 * tensors "base_model.model.transformer.h.N.attn.c_attn.lora_A.weight"
 * (r, in) and "...lora_B.weight" (out, r)). It changes some of the four
 * matrices of each layer (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj):
 * W' = W + scale * (alpha / r) * B @ A (alpha / sqrt(r) with use_rslora),
 * which model_set_weights merges in float64 (model.h, MatrixDelta).
 *
 * Which modules an adapter changes is PEFT's rule, on the module names of
 * transformers' GPT2LMHeadModel ("transformer.h.0.mlp.c_fc", "lm_head"):
 * target_modules as a string is a regular expression the whole name
 * matches; as a list, a name equal to an entry or ending in "." + an entry,
 * the latter only in the layers layers_to_transform lists (a layer's index
 * found after layers_pattern, or after any name, as PEFT finds it);
 * "all-linear" is the list c_attn, c_proj, c_fc; null is GPT-2's default,
 * c_attn. rank_pattern and alpha_pattern give a module another r or alpha:
 * the first key that the end of its name matches, after a dot or whole.
 * fan_in_fan_out is read and needs nothing: PEFT sets it for GPT-2's
 * Conv1D whatever the file says, and A and B have the same shapes either
 * way. A regular expression is Python's as far as POSIX's extended ones
 * agree (\d read as [0-9]); "(?" constructs are refused.
 *
 * A file that begins "GGUF" is llama.cpp's LoRA file (src/llama-adapter.cpp
 * reads it; gguf.c's gguf_lora_read checks its metadata): general.type
 * "adapter", adapter.type "lora", general.architecture "gpt2", a float32
 * adapter.lora.alpha, and tensors "blk.N.KIND.weight.lora_a" (ggml's ne
 * [in, r]: A (r, in) row-major) and ".lora_b" (ne [r, out]: B (out, r)),
 * KIND attn_qkv, attn_output, ffn_up or ffn_down, F32, F16 or BF16. Every
 * pair changes its matrix at scale * alpha / r (scale alone when alpha is
 * 0, as llama.cpp reads it). Refused by name: another general.type,
 * adapter.type or architecture, a missing or non-float32 alpha, a tensor
 * of no layer matrix (token_embd, output, norms), an unpaired tensor, a
 * layer the base lacks, shapes that do not fit the base's matrix, any
 * other tensor type.
 *
 * Refused, each in one line naming the file and the field or tensor: any
 * other peft_type, use_dora, lora_bias, bias other than "none",
 * modules_to_save, layer_replication, exclude_modules, target_parameters;
 * a target that is not one of the four matrices (lm_head, wte, a
 * container); a targeted matrix without both tensors; a tensor of a module
 * that is not targeted; a rank that is not the config's; an
 * adapter_model.bin (a pickle) without the safetensors file.
 */
#ifndef GPT_LORA_H
#define GPT_LORA_H

#include <stddef.h>

#include "base/error.h"
#include "model/model.h"

typedef struct LoraAdapter LoraAdapter;

// Adapters opened together, and the changes they make to one base.
typedef struct {
    LoraAdapter **a;  // (n)
    size_t n;
    MatrixDelta *deltas;  // (n_deltas), set by lora_set_deltas
    size_t n_deltas;
} LoraSet;

// Opens the adapters r[0..n): each a PEFT directory, or its
// adapter_model.safetensors with adapter_config.json beside it, or a GGUF
// LoRA file. Reads and
// checks everything that does not depend on the base model (the config,
// the tensors' names, dtypes, byte ranges, ranks). 0, or -1 with err set
// (nothing left to close).
int lora_set_open(LoraSet *s, const LoraRequest *r, size_t n, GptError *err);
// The changes of the adapters of s (a LoraSet *) to a base of
// configuration c, in the order the adapters were given: what PEFT would
// change on that model. WeightOptions.deltas_for (model.h). 0, or -1 with
// err naming the adapter and the module.
int lora_set_deltas(void *s, const GPT2Config *c, const MatrixDelta **deltas, size_t *n, GptError *err);
// NULL-safe, idempotent. The deltas point into the adapters' files: close
// them after the model is loaded.
void lora_set_close(LoraSet *s);

// An adapter applied at run time (forward.h), beside base weights that it
// leaves untouched: for each layer's matrix it changes, y = W x + b +
// scale * B (A x), per row. A and B are held in float32 (an F16 or BF16
// adapter widened exactly); the scale in float64, as the merge takes it.
typedef struct {
    size_t r;        // 0: this matrix is not changed
    size_t in, out;  // the matrix's
    double scale;    // the request's scale times alpha / r (or / sqrt(r))
    float *a;        // (r, in)  A, row-major
    float *bt;       // (r, out) B transposed: the product's inner loop runs along out
} LoraMatrix;

typedef struct {
    LoraMatrix *m;   // (n_layer * 4) layer by layer: attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj
    size_t n_layer;
    size_t bytes;    // of A and B as held
    uint64_t salt;   // nonzero, for KVCache.salt: the adapter's own prefix tree
} LoraWeights;

// Reads adapter r (a PEFT directory or a GGUF LoRA file, as lora_set_open)
// for a base of configuration c into w, to apply at run time: the same
// changes the merge makes, refused the same way (plus a shape that does not
// fit c, which the merge refuses in model.c). 0, or -1 with err set.
int lora_weights_load(LoraWeights *w, const LoraRequest *r, const GPT2Config *c, GptError *err);
void lora_weights_free(LoraWeights *w);  // NULL-safe, idempotent

#endif

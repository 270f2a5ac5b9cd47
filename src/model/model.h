/*
 * model.h - a GPT-2 model in memory: hyper-parameters, the one table of its
 * tensors, and the weights the forward pass reads.
 *
 * This file knows no file format. loader.h opens files (safetensors, gpt's
 * model.bin, llm.c checkpoints; docs/model-format.md); each format file
 * validates its bytes against the table below and hands the tensors to
 * model_set_weights(). Storage: the weights point into one read-only mapping
 * of the file (Model.map) or into one 64-byte-aligned block the loader
 * filled (Model.owned); they are never freed one by one.
 */
#ifndef GPT_MODEL_H
#define GPT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/dtype.h"
#include "base/error.h"
#include "base/fileio.h"

// The MLP's activation, by transformers' formula for each name of
// GPT2Config.activation_function (docs/model-format.md, "Configurations").
typedef enum {
    ACTIVATION_GELU_TANH = 0,  // gelu_new, gelu_pytorch_tanh, gelu_fast (GPT-2's):
                               // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    ACTIVATION_GELU_ERF,       // gelu: 0.5 x (1 + erf(x / sqrt(2))), exact
    ACTIVATION_QUICK_GELU,     // quick_gelu: x sigmoid(1.702 x)
    ACTIVATION_RELU,           // relu: max(x, 0)
    ACTIVATION_SILU,           // silu, swish: x sigmoid(x)
    ACTIVATION_COUNT
} Activation;

// The Activation a config's activation_function names (transformers' names,
// case-sensitive), or -1 for any other.
int activation_from_name(const char *name);
// The canonical name of a ("gelu_new", "gelu", "quick_gelu", "relu", "silu").
const char *activation_name(Activation a);

// Every field's zero is GPT-2's own choice, so a config that sets only the
// first six is GPT-2.
typedef struct {
    int n_layer;      // L
    int n_head;       // NH
    int n_embd;       // C  (= NH * HS)
    int n_ctx;        // maxT, positions the model knows (n_positions)
    int vocab_size;   // V
    float ln_eps;     // layer_norm_epsilon
    int n_inner;      // F, the MLP's width (n_inner); 0 means 4 C, and a reader
                      // stores 0 for 4 C (one width, one config): use gpt2_mlp_width()
    Activation activation;  // the MLP's (activation_function)
    int attn_unscaled;      // 1: scores are not divided by sqrt(HS) (scale_attn_weights false)
    int attn_by_layer;      // 1: layer l's scores are also divided by l + 1
                            //    (scale_attn_by_inverse_layer_idx)
    int untied_output;      // 1: the logits come from lm_head.weight (V, C), not
                            //    wte (tie_word_embeddings false)
} GPT2Config;

// F: n_inner, or 4 C when it is 0.
size_t gpt2_mlp_width(const GPT2Config *c);
// What layer l multiplies q . k by before the softmax: 1/sqrt(HS) (computed
// as 1.0f / sqrtf(HS), the bits every attention kernel used before the
// flags existed), times 1/(l + 1) with attn_by_layer; 1 (or 1/(l + 1))
// with attn_unscaled.
float gpt2_attn_scale(const GPT2Config *c, size_t layer);

/*
 * The tensor table: every tensor of GPT-2, once. Names, shapes, the order
 * of a file, the llm.c order, matching a file's entries and filling the
 * structs below all derive from it (model.c).
 *
 *   X(name, llm.c name, field, kind, rows, cols)
 *
 * name is Hugging Face's (inside a layer, after "h.N."); rows and cols are
 * the shape in Hugging Face's storage order, in units of C (n_embd), V
 * (vocab_size), T (n_ctx) and F (the MLP's width, gpt2_mlp_width); cols 0
 * means a vector. The kinds:
 *   MATRIX     a Weight read by matmul, stored (in, out): y = x @ W + b
 *   EMBEDDING  wte, a Weight whose rows are tokens (V, C): the embedding
 *              gathers rows, the tied output layer computes x @ wte^T
 *   VECTOR     always float32: norms, biases, and wpe
 * Only MATRIX and EMBEDDING may be stored in reduced precision.
 *
 * A file holds, in this order: GPT2_HEAD_TENSORS, then GPT2_LAYER_TENSORS
 * for layer 0, 1, ..., L-1, then GPT2_TAIL_TENSORS, then (untied output
 * only) GPT2_OUTPUT_TENSORS.
 */
#define GPT2_HEAD_TENSORS(X)                                              \
    X("wte.weight", "wte", wte, EMBEDDING, V, C)                          \
    X("wpe.weight", "wpe", wpe, VECTOR, T, C)
#define GPT2_LAYER_TENSORS(X)                                             \
    X("ln_1.weight", "ln1w", ln1_w, VECTOR, C, 0)                         \
    X("ln_1.bias", "ln1b", ln1_b, VECTOR, C, 0)                           \
    X("attn.c_attn.weight", "qkvw", qkv_w, MATRIX, C, 3 * C)              \
    X("attn.c_attn.bias", "qkvb", qkv_b, VECTOR, 3 * C, 0)                \
    X("attn.c_proj.weight", "attprojw", attn_proj_w, MATRIX, C, C)        \
    X("attn.c_proj.bias", "attprojb", attn_proj_b, VECTOR, C, 0)          \
    X("ln_2.weight", "ln2w", ln2_w, VECTOR, C, 0)                         \
    X("ln_2.bias", "ln2b", ln2_b, VECTOR, C, 0)                           \
    X("mlp.c_fc.weight", "fcw", fc_w, MATRIX, C, F)                       \
    X("mlp.c_fc.bias", "fcb", fc_b, VECTOR, F, 0)                         \
    X("mlp.c_proj.weight", "fcprojw", fc_proj_w, MATRIX, F, C)            \
    X("mlp.c_proj.bias", "fcprojb", fc_proj_b, VECTOR, C, 0)
#define GPT2_TAIL_TENSORS(X)                                              \
    X("ln_f.weight", "lnfw", lnf_w, VECTOR, C, 0)                         \
    X("ln_f.bias", "lnfb", lnf_b, VECTOR, C, 0)
// Only in a model whose output layer is its own (GPT2Config.untied_output),
// after the tail: nn.Linear's weight, one row per token like wte.
#define GPT2_OUTPUT_TENSORS(X) X("lm_head.weight", "lmhead", lm_head, EMBEDDING, V, C)

// One transformer block (the table's GPT2_LAYER_TENSORS).
typedef struct {
    const float *ln1_w, *ln1_b;        // (C), (C)
    Weight qkv_w;                      // (C, 3C)  attn.c_attn
    const float *qkv_b;                // (3C)
    Weight attn_proj_w;                // (C, C)   attn.c_proj
    const float *attn_proj_b;          // (C)
    const float *ln2_w, *ln2_b;        // (C), (C)
    Weight fc_w;                       // (C, F)   mlp.c_fc
    const float *fc_b;                 // (F)
    Weight fc_proj_w;                  // (F, C)   mlp.c_proj
    const float *fc_proj_b;            // (C)
} GPT2Layer;

typedef struct {
    Weight wte;                  // (V, C)    token embedding, also the tied output layer
    const float *wpe;            // (maxT, C) position embedding
    GPT2Layer *layers;           // (L) array, malloc'd
    const float *lnf_w, *lnf_b;  // (C), (C)
    Weight lm_head;              // (V, C)    the untied output layer (untied_output), else unset
} GPT2Weights;

// The output layer: lm_head when untied, else wte. logits = x @ out^T.
const Weight *gpt2_output_weight(const GPT2Weights *w, const GPT2Config *c);

typedef struct Tokenizer Tokenizer;

typedef struct {
    GPT2Config config;
    GPT2Weights weights;
    size_t n_params;          // parameters (wte counted once)
    size_t weight_bytes;      // bytes of all weights as held in memory
    size_t decode_bytes;      // bytes of weights one decode step reads: all but
                              // wpe, of which it reads one row
    MappedFile map;           // the file, when weights point into it
    void *owned;              // the 64-byte-aligned block, when they do not
    Tokenizer *tokenizer;     // a tokenizer stored in the model file, or NULL
    double load_seconds;      // wall time of model_load
    char source_kind[32];     // "safetensors", "model.bin", "llm.c"
} Model;

// Frees what loading allocated and unmaps the file. NULL-safe, idempotent.
void model_free(Model *m);

// The GPT-2 hyper-parameters must make sense together; 0 if they do, else -1
// with err naming `what` (usually the file) and the bad field.
int gpt2_config_validate(const GPT2Config *c, const char *what, GptError *err);

// ---------------------------------------------------------------------------
// The table, by index: tensor i of a model of configuration c (validated),
// 0 <= i < gpt2_n_tensors(c) = 4 + 12 L (+ 1 untied), in the order a file
// holds them.

typedef enum { TENSOR_MATRIX, TENSOR_EMBEDDING, TENSOR_VECTOR } TensorKind;

typedef struct {
    char name[64];           // "h.3.mlp.c_fc.weight"
    const char *llmc_name;   // "fcw": llm.c's name of the kind (all layers)
    TensorKind kind;
    int ndim;                // 1 or 2
    size_t dims[2];          // Hugging Face storage order; dims[1] = 0 if ndim 1
    size_t numel;
    int layer;               // -1 outside the layers
    size_t index_in_layer;   // 0..11 in GPT2_LAYER_TENSORS (layers only)
} TensorSpec;

enum { GPT2_TENSORS_PER_LAYER = 12 };

size_t gpt2_n_tensors(const GPT2Config *c);
void gpt2_tensor_spec(const GPT2Config *c, size_t i, TensorSpec *out);
// Shortcuts: the name, and the shape (returns ndim).
void gpt2_tensor_name(const GPT2Config *c, size_t i, char *buf, size_t n);
int gpt2_tensor_shape(const GPT2Config *c, size_t i, size_t dims[2]);
// The index of a Hugging Face name ("h.3.ln_2.bias", no "transformer."
// prefix), or -1 if no tensor of this configuration has it. *layer_out gets
// the layer of an "h.N." name, even one beyond n_layer (for messages), else -1.
long gpt2_tensor_index(const GPT2Config *c, const char *name, long *layer_out);

// How a file stores a matrix: Hugging Face's (in, out), or one row per
// output (out, in), which is how a Weight holds it in memory. Vectors have
// one layout.
typedef enum { LAYOUT_IN_OUT = 0, LAYOUT_OUT_IN = 1 } TensorLayout;

// The layout Hugging Face stores tensor kind k in: MATRIX (in, out), the
// rest (out, in) (wte's rows are tokens).
TensorLayout gpt2_hf_layout(TensorKind k);

// One tensor's data as a format hands it over, or as model_tensor returns it.
typedef struct {
    DType dtype;
    TensorLayout layout;
    const void *data;  // the tensor's bytes; need not be aligned
} TensorRef;

// An adapter to merge at load (--lora PATH[:SCALE]): a PEFT LoRA directory
// (model/lora.h), its change multiplied by scale.
typedef struct {
    const char *path;
    double scale;
    const char *name;  // gpt serve's --lora NAME=PATH: applied at run time to the requests
                       // that name it, not merged (model/lora.h); NULL: merged at load
} LoraRequest;

// A low-rank change to one matrix, merged at load (model/lora.h reads
// them): W'(out, in) = W + scale * B @ A, computed in float64 from W's
// float32 values, then stored in the matrix's dtype. A and B lie as the
// adapter stores them, possibly unaligned, in F32, F16 or BF16.
typedef struct {
    char name[64];       // the matrix's tensor name, "h.0.attn.c_attn.weight"
    const char *source;  // the adapter's file, for messages
    double scale;        // the request's scale times alpha / r (or / sqrt(r))
    size_t r;            // the rank
    size_t a_dims[2];    // A (r, in): lora_A.weight, as stored
    size_t b_dims[2];    // B (out, r): lora_B.weight, as stored
    DType a_dtype, b_dtype;
    const void *a, *b;
} MatrixDelta;

// What the weights should become in memory.
typedef struct {
    int matrix_dtype;  // every MATRIX and EMBEDDING tensor in this DType,
                       // or -1 to keep each as the file stores it; Q4 is
                       // a mix: the EMBEDDING (wte), the first layer's
                       // matrices and every attn.c_proj in Q6, the rest
                       // Q4 (model.c), unless q4_pure
    int q4_pure;       // with matrix_dtype Q4: every matrix Q4, wte too,
                       // no Q6 (--dtype q4-pure)
    int q8_int8;       // every Q8 matrix multiplies with int8 activations
                       // (Weight.q8_int8, --q8-act int8); 0: int16
    const LoraRequest *lora;  // (n_lora) adapters the loader reads and merges
    size_t n_lora;
    // The changes to merge, which depend on the configuration (an adapter
    // names its matrices by layer and kind): model_set_weights calls it
    // with the model's configuration before it sets any weight, and merges
    // *deltas[0..*n) (owned by ctx) in that order. 0, or -1 with err set.
    // NULL: no changes. The loader sets it from lora (model/lora.h).
    int (*deltas_for)(void *ctx, const GPT2Config *c, const MatrixDelta **deltas, size_t *n, GptError *err);
    void *deltas_ctx;
} WeightOptions;

// Every Q8 matrix of m multiplies with int8 activations from now on
// (Weight.q8_int8; WeightOptions.q8_int8 does this at load).
void model_set_q8_int8(Model *m);
// Whether a Q8 matrix of m multiplies with int8 activations.
int model_q8_int8(const Model *m);

// The names --dtype takes for the weights (gpt's --dtype, --draft-dtype,
// gpt convert --dtype), for messages.
#define WEIGHT_DTYPE_NAMES "f32, f16, bf16, q8, q6, q4 or q4-pure"
// Sets *o to what weight dtype name `name` (case-insensitive: "f16", "Q8",
// "q4", the mix, "q4-pure") stands for; 0, or -1 (o untouched) if none.
int weight_options_from_name(const char *name, WeightOptions *o);
// The name of *o as weight_options_from_name takes it ("q4-pure", "bf16"),
// or "stored" for matrix_dtype -1.
const char *weight_options_name(const WeightOptions *o);

// Sets m->weights from the tensors t[i] of the table (m->config set and
// validated): VECTOR tensors become float32, matrices Weights in `o`'s dtype
// and the (out, in) layout. A tensor already in that form, 4-byte aligned,
// is used in place (in the file's mapping); the others are converted once
// into one 64-byte-aligned block (m->owned), and the pages of the mapping
// they came from are released as they are copied. A matrix that
// o->deltas_for changes is always converted, the changes added in float64; a delta whose
// matrix this model lacks, or whose shapes do not fit it, is refused,
// naming its source. Allocates
// m->weights.layers; sets n_params and weight_bytes. Returns 0, or -1 with
// err naming `path`.
int model_set_weights(Model *m, const TensorRef *t, const WeightOptions *o, const char *path,
                      GptError *err);
// Tensor i of a loaded model: vectors float32, matrices as their Weight
// holds them ((out, in), Q8 or Q4 quants then scales).
TensorRef model_tensor(const Model *m, size_t i);
// Bytes of tensor i as the model holds it.
size_t model_tensor_bytes(const Model *m, size_t i);
// The dtypes of m's matrices in a few words, for reports, into buf (cap
// bytes, always terminated): "F16" when all share one ("Q4 (every matrix)"
// for Q4, which alone would read as --dtype q4's mix), "Q4 (wte Q8)" when
// wte differs from the layers' matrices, "Q4 (Q6: wte, h.0, attn.c_proj)"
// (--dtype q4's mix) when the matrices of the last layer's c_fc dtype have
// exceptions in one other dtype that are wte, a run of whole layers and
// kinds of matrix in every other layer, "mixed" otherwise. Returns buf.
const char *model_matrix_dtypes(const Model *m, char *buf, size_t cap);

#endif

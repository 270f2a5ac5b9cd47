/*
 * dtype.h - element types of stored weights, their conversions, and Weight:
 * a weight matrix that knows its element type and layout.
 *
 * Norms, biases and the position embedding are always float32 (a plain
 * `const float *`). Matrices, the ones a matmul reads (c_attn, attn c_proj,
 * c_fc, mlp c_proj, and wte, which is also the tied output layer), are
 * Weights, so that they can be stored in fewer bytes than float32 without
 * the forward pass knowing how: it calls matmul() (matmul.h) and
 * weight_row(), never the data pointer.
 *
 * The codes are the ones model.bin stores in its tensor table.
 */
#ifndef GPT_DTYPE_H
#define GPT_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    DTYPE_F32 = 0,   // IEEE binary32
    DTYPE_F16 = 1,   // IEEE binary16
    DTYPE_BF16 = 2,  // bfloat16: the top 16 bits of a binary32
} DType;

// "F32", "F16", "BF16" (the safetensors spelling); NULL for an unknown code.
const char *dtype_name(DType dt);
// Bytes one element takes; 0 for an unknown code.
size_t dtype_size(DType dt);

// Exact widening of a half / bfloat16 (NaN and inf kept, subnormals too).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

// How a Weight's data is laid out, row-major either way.
typedef enum {
    WEIGHT_IN_OUT,  // (n_in, n_out): Hugging Face's Conv1D, y = x @ W
    WEIGHT_OUT_IN,  // (n_out, n_in): one row per output, y = x @ W^T (wte, llm.c)
} WeightLayout;

// A matrix of the product y(n_out) = x(n_in) @ W (+ bias).
typedef struct {
    DType dtype;
    WeightLayout layout;
    size_t n_in, n_out;  // K and N of the matmul
    const void *data;    // n_in * n_out elements of dtype, in `layout`
} Weight;

#endif

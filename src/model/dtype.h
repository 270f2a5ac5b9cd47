/*
 * dtype.h - element types of stored weights, their conversions, and Weight:
 * a weight matrix that knows its element type.
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
    DTYPE_F16 = 1,   // IEEE binary16: 10 mantissa bits, range to 65504
    DTYPE_BF16 = 2,  // bfloat16: the top 16 bits of a binary32 (7 mantissa bits)
    DTYPE_Q8 = 3,    // int8 in blocks of Q8_BLOCK along the input axis, an
                     // f16 scale per block (matrices only; see below)
    DTYPE_Q4 = 4,    // 4-bit integers in blocks of Q4_BLOCK along the input
                     // axis, an f16 scale per block (matrices only; below)
    DTYPE_Q6 = 5,    // 6-bit integers in blocks of 32, an f16 scale per
                     // block, multiplied as Q4 is (matrices only; below)
} DType;

enum { DTYPE_COUNT = 6 };

// "F32", "F16", "BF16", "Q8", "Q4", "Q6" (the safetensors spelling for the
// first three); NULL for an unknown code.
const char *dtype_name(DType dt);
// The dtype a name (case-insensitive: "f16", "BF16", "q8") stands for; -1
// if none.
int dtype_from_name(const char *name);
// Bytes one element takes (F32 4, F16/BF16 2); 0 for Q8, Q4 and Q6, which
// are stored in blocks (weight_bytes), and for an unknown code.
size_t dtype_size(DType dt);
// Q8, Q4 and Q6: integers in blocks with a scale each, multiplied with
// int16 (Q8) or int8 (Q4, Q6) activations (matmul_kernels.h), stored one
// row per output, matrices only.
static inline int dtype_is_blocked(DType dt) { return dt == DTYPE_Q8 || dt == DTYPE_Q4 || dt == DTYPE_Q6; }
// Q4 and Q6: multiplied in groups of 4 blocks with int8 activations (the
// same kernels, told apart by how they unpack a group of weights).
static inline int dtype_is_grouped(DType dt) { return dt == DTYPE_Q4 || dt == DTYPE_Q6; }

// Exact widening of a half / bfloat16 (NaN and inf kept, subnormals too).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);
// Narrowing, rounded to nearest, ties to even; beyond the range -> inf; NaN
// stays NaN (quiet).
uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);

/*
 * Q8. A row of K weights is cut into blocks of Q8_BLOCK = 32 along K (the
 * last block padded with zeros); each block b stores 32 int8 q[i] and one
 * f16 scale d[b], and stands for w[i] = d[b] * q[i]. d = max |w| / 127
 * rounded to f16, q = round(w / d) clamped to [-127, 127]. A row takes
 * K_pad = round_up(K, 32) bytes of quants and K_pad / 32 scales: 34 bytes
 * per 32 weights, 1.0625 bytes a weight, 3.76 times fewer than float32.
 */
enum { Q8_BLOCK = 32 };
size_t q8_row_quants(size_t K);  // K_pad
// Quantizes x (K) into q (K_pad int8) and scales (K_pad / 32 f16). A NaN
// or infinite weight has no int8 value: it becomes 0, and the count of them
// is returned (the caller refuses the model; a scale beyond f16's range is
// clamped to 65504).
size_t q8_quantize_row(int8_t *q, uint16_t *scales, const float *x, size_t K);

/*
 * Q4 (llama.cpp's Q4_0 layout). A row of K weights is cut into blocks of
 * Q4_BLOCK = 32 along K (the last padded with zeros); each block b stores
 * 32 signed 4-bit values q[i] in [-8, 7], two to a byte, and one f16 scale
 * d[b], and stands for w[i] = d[b] * q[i]. Byte i (0 <= i < 16) of a block
 * holds q[i] + 8 in its low nibble and q[i + 16] + 8 in its high nibble, so
 * that the low nibbles of the 16 bytes are the block's first half in order
 * and the high nibbles its second half (one mask and one shift unpack a
 * block into the order the activations are in; a 64-byte load is 4 blocks,
 * whose low and high nibbles the kernels multiply with the activations
 * arranged to match: matmul_kernels.h). The scale: with m the
 * block's weight of largest magnitude, with its sign, d is the one of the
 * 11 candidates m / c for c = -9, -8.8, ..., -7, each rounded to f16,
 * whose q = round(w / d) clamped to [-8, 7] has the least squared
 * error (the first of equals, m / -8 first). m / -8 puts m on -8, the
 * level that has no +8; a c below -8 clamps the largest weights a little
 * to give all the others finer steps. (A symmetric max |w| / 7 on [-7, 7]
 * wastes the 16th level.) The search has less squared error than m / -8
 * on uniform and on Gaussian weights, and cuts Q4's mean KL from float32
 * (scripts/q4_study.c; the measurements: docs/model-format.md).
 * A row takes K_pad / 2 bytes of quants and K_pad / 32 scales: 18 bytes per
 * 32 weights, 4.5 bits a weight, 7.1 times fewer than float32.
 */
enum { Q4_BLOCK = 32 };
size_t q4_row_bytes(size_t K);  // K_pad / 2
// Quantizes x (K) into q (K_pad / 2 bytes) and scales (K_pad / 32 f16), as
// above. A NaN or infinite weight becomes 0 and is counted in the result
// (the caller refuses the model), as for Q8.
size_t q4_quantize_row(uint8_t *q, uint16_t *scales, const float *x, size_t K);
// Value i (0 <= i < 32) of a stored Q4 block, in [-8, 7].
static inline int q4_value(const uint8_t *block, size_t i) {
    return i < 16 ? (block[i] & 15) - 8 : (block[i - 16] >> 4) - 8;
}

/*
 * Q6. A row of K weights is cut into blocks of Q6_BLOCK = 32 along K, as
 * for Q4, and each block b stands for w[i] = d[b] * q[i] with q[i] in
 * [-32, 31] and an f16 scale d[b] chosen as Q4's is (m / c for the 11 c =
 * -36, -35.2, ..., -28 in steps of 0.8, the same 12.5% either side of
 * m / -32, the least squared error). The unsigned u = q + 32 (6 bits) is
 * stored in groups of 4 blocks, the blocks the kernels take in one step
 * (Q4's groups): a group is 96 bytes,
 *   bytes 0 .. 63: the low 4 bits of u, laid out as 4 Q4 blocks are (byte
 *     16 i + e, e < 16, of block i: u(i, e) in its low nibble, u(i, 16 + e)
 *     in its high one);
 *   bytes 64 .. 95: the high 2 bits: byte 64 + t holds, for the nibble
 *     bytes t and t + 32, in bits 0-1 and 2-3 the top of their low nibbles'
 *     u, in bits 4-5 and 6-7 the top of their high nibbles' u.
 * So one 64-byte load and a 32-byte one give the group's 128 values as two
 * vectors of unsigned bytes in the order Q4's kernels multiply them, for
 * a shift and two masks more than Q4 (matmul_kernels.h). A row takes
 * q6_row_bytes(K) = 96 bytes per 4 blocks (the last group padded with
 * q = 0) and, as Q4, K_pad / 32 scales: 6.5 bits a weight when K is a
 * multiple of 128 (every GPT-2 matrix), 4.9 times fewer than float32.
 */
enum { Q6_BLOCK = 32, Q6_GROUP_BYTES = 96 };
size_t q6_row_bytes(size_t K);  // 96 ceil(ceil(K / 32) / 4)
// Quantizes x (K) into q (q6_row_bytes(K) bytes) and scales (K_pad / 32
// f16), as above; a NaN or infinite weight becomes 0 and is counted, as for
// Q8 and Q4.
size_t q6_quantize_row(uint8_t *q, uint16_t *scales, const float *x, size_t K);
// Value e (0 <= e < 32) of block i (0 <= i < 4) of a stored Q6 group, in
// [-32, 31].
static inline int q6_value(const uint8_t *group, size_t i, size_t e) {
    const size_t m = 16 * i + (e & 15), high = e >= 16;
    const unsigned low4 = high ? group[m] >> 4 : group[m] & 15u;
    const unsigned top2 = (unsigned)(group[64 + (m & 31)] >> (4 * high + 2 * (m >= 32))) & 3u;
    return (int)(low4 | top2 << 4) - 32;
}

// A matrix of the product y(n_out) = x(n_in) @ W^T (+ bias), stored one row
// per output: row j holds the n_in weights that output j reads, contiguous,
// which is how every matmul kernel streams it.
//   F32, F16, BF16  data: (n_out, n_in) elements
//   Q8              data: (n_out, K_pad) int8 quants; scales: (n_out, K_pad/32) f16
//   Q4              data: (n_out, K_pad/2) bytes of nibbles; scales: as Q8's
//   Q6              data: (n_out, q6_row_bytes(n_in)) bytes; scales: as Q8's
typedef struct {
    DType dtype;
    size_t n_in, n_out;       // K and N of the matmul
    const void *data;
    const uint16_t *scales;   // Q8, Q4 and Q6 only
    int q8_int8;              // Q8 only: 1 multiplies with int8 activations, as Q4
                              // does (matmul_kernels.h, "Q8 x int8"; an explicit
                              // choice of another arithmetic: --q8-act int8);
                              // 0 (the default) with int16 ones
} Weight;

// Whether W's products take int8 activations in Q4's groups of 4 blocks:
// Q4, Q6, and Q8 with q8_int8 (matmul_kernels.h).
static inline int weight_is_grouped(const Weight *W) {
    return dtype_is_grouped(W->dtype) || (W->dtype == DTYPE_Q8 && W->q8_int8);
}

// Bytes a matrix of n_out rows of n_in takes in dtype dt (quants and scales).
size_t weight_bytes(DType dt, size_t n_out, size_t n_in);
// Writes the n float32 rows of src (n, n_in) into dst as rows [j0, j0 + n)
// of a matrix of n_out rows in dtype dt, laid out as Weight says (for Q8, Q4
// and Q6 the scales of all n_out rows follow all the quants, at dst + n_out *
// the bytes of a row's quants). dst must hold weight_bytes(dt, n_out, n_in).
// Returns the count of weights Q8, Q4 or Q6 could not hold (NaN, infinite),
// 0 otherwise.
size_t weight_encode_rows(void *dst, DType dt, const float *src, size_t j0, size_t n, size_t n_out,
                          size_t n_in);
// The whole matrix: weight_encode_rows(dst, dt, src, 0, n_out, n_out, n_in).
size_t weight_encode(void *dst, DType dt, const float *src, size_t n_out, size_t n_in);
// A Weight over such bytes (data and, for Q8, Q4 and Q6, scales pointed into them).
Weight weight_view(DType dt, const void *bytes, size_t n_out, size_t n_in);

// Row `row` of W (e.g. one of wte's token vectors) as float32 into out
// (n_in): exact, whatever the dtype.
void weight_row(float *out, const Weight *W, size_t row);
// Element (i, j) of W as float32: input i, output j, whatever the dtype.
float weight_at(const Weight *W, size_t i, size_t j);

#endif

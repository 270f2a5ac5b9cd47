/*
 * matmul.h - out = inp @ W + b for every kind of Weight (dtype.h): the one
 * place that knows how a weight matrix is stored and which code multiplies
 * it. forward.c calls only these.
 *
 * matmul() runs our own kernels (matmul_kernels.h: portable C, AVX2, AVX-512,
 * the best one the CPU has, as the caller found it once with cpu.h), which read every dtype as
 * stored (F16 and BF16 are widened in registers; Q8 rounds the activations
 * to int16 per block, Q4 to int8, and they multiply in integers) and compute each output in
 * one fixed order of operations, the "canonical arithmetic" spelled out in
 * matmul_kernels.h. So each output row is the same bits whatever T, whatever
 * the other rows, however many threads, on whichever ISA: prefill and decode,
 * alone or in a batch, agree exactly. matmul_reference() is the plain triple
 * loop in double the tests hold it against.
 */
#ifndef GPT_MATMUL_H
#define GPT_MATMUL_H

#include <stddef.h>

#include "kernels/cpu.h"
#include "model/dtype.h"
#include "base/threads.h"

// Rows of inp one pass over W serves: matmul() cuts T into groups of this
// many rows and reads W once per group (see matmul.c for why this size).
enum { MATMUL_GROUP = 32 };

// How a matmul() call may run: the threads to share the groups and W's rows
// among (matmul.c) and each thread's scratch (thread i uses scratch + i * scratch_floats_per_thread;
// the block 64-byte aligned, scratch_floats_per_thread a multiple of 16). A
// thread whose slice is smaller than matmul_scratch_floats(group rows, K)
// reads inp in place: the same bits, slower (much slower for Q8 and Q4,
// whose activations are then quantized again for every output). isa: the kernels to run,
// cpu_best_isa() found once by whoever makes the context. A
// NULL context: the caller's thread alone, no scratch, the best kernels
// found at this call.
// plan: the variant (matmul_kernels.h) of each product, which tune.h chooses
// by measurement; NULL, or a product it does not name: the default. Every
// variant gives the same bits.
typedef struct MatmulPlan MatmulPlan;
typedef struct {
    ThreadPool *pool;   // NULL: one thread
    float *scratch;     // NULL: none
    size_t scratch_floats_per_thread;
    CpuIsa isa;         // one the CPU supports
    const MatmulPlan *plan;  // NULL: the default variant everywhere
} MatmulContext;

// The variants of a product (W's dtype, K and N) on prefill groups of
// MATMUL_PLAN_MIN_ROWS rows or more, where the arrangement of the work
// decides the speed; calls of fewer rows (decode) run the default variant.
enum { MATMUL_PLAN_MAX = 16, MATMUL_PLAN_MIN_ROWS = 8 };
typedef struct {
    DType dtype;
    size_t K, N;
    int variant;
} MatmulChoice;
struct MatmulPlan {
    CpuIsa isa;          // the ISA whose variants these are (another's plan is ignored)
    int fallback;        // the variant of a product not in choice[]
    int n;
    MatmulChoice choice[MATMUL_PLAN_MAX];
};

// The variant plan gives W's product (its fallback if none; 0 for a NULL
// plan or one of another isa).
int matmul_plan_variant(const MatmulPlan *plan, CpuIsa isa, const Weight *W);

// How many variants isa's kernels have (at least 1), and the name of
// variant v ("2x3": AVX2's tile of 2 weight rows x 3 batch rows; "one":
// the only one), NULL outside [0, count).
enum { MATMUL_VARIANTS_MAX = 9 };  // the most any ISA has
int matmul_variant_count(CpuIsa isa);
const char *matmul_variant_name(CpuIsa isa, int v);
// The variant called name, or -1.
int matmul_variant_find(CpuIsa isa, const char *name);
// Whether variant v arranges dt's products differently from the default
// (AVX2's h tiles are for float weights: the quantized ones run the
// default under them); tuning times only these.
int matmul_variant_applies(CpuIsa isa, int v, DType dt);

// One product's arguments, out(T, N) = inp(T, K) @ W^T + bias (+ out with
// accumulate), as matmul() and blas_product() hand them to their threads.
typedef struct {
    float *out;
    const float *inp;
    const Weight *W;
    const float *bias;
    size_t T;
    int accumulate;
} Product;

// Scratch floats one thread needs for a group of B rows of K inputs (a
// multiple of 16). For matmul(): B = MATMUL_GROUP, or T if T is smaller.
size_t matmul_scratch_floats(size_t B, size_t K);

// out(T, N) = inp(T, K) @ W^T + bias, with K = W->n_in, N = W->n_out; with
// accumulate, out += instead of =. bias (N) may be NULL. Rows are T apart
// by K (inp) and N (out); any T.
void matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T,
            int accumulate, const MatmulContext *ctx);

// matmul, then then(x, n) on the outputs, a run of each row at a time, each
// run right after it is computed (while it is in cache, on the thread that
// computed it). For a function of each element alone (GELU): the bits are
// those of then() over all of out after matmul.
void matmul_then(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate,
                 const MatmulContext *ctx, void (*then)(float *x, size_t n));

// The same, one output at a time, summed in double: slow and obviously right.
void matmul_reference(float *out, const float *inp, const Weight *W, const float *bias,
                      size_t T, int accumulate);

// Name of the kernels matmul() runs on this CPU: "avx512", "avx2" or
// "scalar" (for reports).
const char *matmul_isa_in_use(void);

#endif

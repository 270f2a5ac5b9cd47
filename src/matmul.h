/*
 * matmul.h - out = inp @ W + b for every kind of Weight (dtype.h): the one
 * place that knows how a weight matrix is stored and which code multiplies
 * it. forward.c calls only these.
 *
 * matmul() is the fast path: float32 goes to OpenBLAS (sgemv for one row,
 * sgemm for more); other dtypes are widened a panel of rows at a time. matmul_reference() is the plain triple loop the tests
 * hold every fast path against.
 */
#ifndef GPT_MATMUL_H
#define GPT_MATMUL_H

#include <stddef.h>

#include "dtype.h"
#include "threads.h"

// out(T, N) = inp(T, K) @ W^T + bias, with K = W->n_in, N = W->n_out; with
// accumulate, out += instead of =. bias (N) may be NULL. Rows are T apart
// by K (inp) and N (out).
// The work is split over pool's threads (NULL: the caller's alone).
void matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T,
            int accumulate, ThreadPool *pool);

// The same, one output at a time, summed in double: slow and obviously right.
void matmul_reference(float *out, const float *inp, const Weight *W, const float *bias,
                      size_t T, int accumulate);

// Row `row` of an embedding (its n_out rows of n_in, e.g. wte's token
// vectors) as float32 into out (n_in).
void weight_row(float *out, const Weight *W, size_t row);

// Element (i, j) of W as float32: input i, output j, whatever the dtype.
float weight_at(const Weight *W, size_t i, size_t j);

#endif

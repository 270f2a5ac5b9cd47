/*
 * blas.c - the OpenBLAS backend (see blas.h).
 */
#include "blas.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dtype.h"

// OpenBLAS's own calls (cblas.h declares them in OpenBLAS's copy)
void openblas_set_num_threads(int n);
char *openblas_get_corename(void);
char *openblas_get_config(void);

void blas_set_threads(int n) { openblas_set_num_threads(n); }

const char *blas_describe(char *buf, size_t cap) {
    snprintf(buf, cap, "%s (core %s)", openblas_get_config(), openblas_get_corename());
    return buf;
}

int blas_matmul(float *out, const float *inp, const Weight *W, const float *bias, size_t T, int accumulate) {
    if (W->dtype != DTYPE_F32 || T < BLAS_MIN_ROWS) return 0;
    size_t K = W->n_in, N = W->n_out;
    // out(T,N) = inp(T,K) @ W(N,K)^T (+ out)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)N, (int)K, 1.0f, inp, (int)K,
                (const float *)W->data, (int)K, accumulate ? 1.0f : 0.0f, out, (int)N);
    if (bias)
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < N; j++) out[t * N + j] += bias[j];
    return 1;
}

size_t blas_attention_floats(size_t n, size_t n_keys, size_t head_size) {
    return n * n_keys + 2 * n_keys * head_size;
}

// Position u's key and value of (layer, head) from the cache, as float32.
static void gather(float *keys, float *values, const KVCache *c, size_t layer, size_t head, size_t n_keys) {
    size_t HS = c->head_size;
    for (size_t u = 0; u < n_keys; u++) {
        size_t b = u / KV_BLOCK, slot = u % KV_BLOCK;
        const void *kb = kvcache_block_keys(c, b, layer, head), *vb = kvcache_block_values(c, b, layer, head);
        for (size_t d = 0; d < HS; d++) {
            // keys (HS, 16) transposed, values (16, HS)
            if (c->dtype == DTYPE_F16) {
                keys[u * HS + d] = f16_to_f32(((const uint16_t *)kb)[d * KV_BLOCK + slot]);
                values[u * HS + d] = f16_to_f32(((const uint16_t *)vb)[slot * HS + d]);
            } else {
                keys[u * HS + d] = ((const float *)kb)[d * KV_BLOCK + slot];
                values[u * HS + d] = ((const float *)vb)[slot * HS + d];
            }
        }
    }
}

void blas_attention(float *attn, const float *qkv, const KVCache *c, size_t layer, size_t n, size_t C,
                    float *scratch) {
    size_t HS = c->head_size, NH = c->n_head, P = c->n_tokens, Tk = P + n;
    float *S = scratch, *keys = S + n * Tk, *values = keys + Tk * HS;
    float scale = 1.0f / sqrtf((float)HS);
    for (size_t h = 0; h < NH; h++) {
        gather(keys, values, c, layer, h, Tk);
        // S(n,Tk) = Q(n,HS) @ K(Tk,HS)^T / sqrt(HS); Q's rows are 3C apart
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)Tk, (int)HS, scale, qkv + h * HS,
                    (int)(3 * C), keys, (int)HS, 0.0f, S, (int)Tk);
        for (size_t t = 0; t < n; t++) {
            float *row = S + t * Tk;
            size_t seen = P + t + 1;  // keys 0 .. P + t; the rest masked
            for (size_t u = seen; u < Tk; u++) row[u] = -INFINITY;
            // the softmax over the whole row: a masked key's exp(-inf) is exactly 0
            float max = row[0];
            for (size_t u = 1; u < Tk; u++) max = row[u] > max ? row[u] : max;
            float sum = 0.0f;
            for (size_t u = 0; u < Tk; u++) sum += row[u] = expf(row[u] - max);
            for (size_t u = 0; u < Tk; u++) row[u] /= sum;
        }
        // O(n,HS) = S(n,Tk) @ V(Tk,HS), into attn's rows (C apart)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)HS, (int)Tk, 1.0f, S, (int)Tk, values,
                    (int)HS, 0.0f, attn + h * HS, (int)C);
    }
}

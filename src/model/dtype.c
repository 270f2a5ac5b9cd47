/* dtype.c - see dtype.h. */
#include "model/dtype.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "base/bytes.h"

const char *dtype_name(DType dt) {
    switch (dt) {
    case DTYPE_F32: return "F32";
    case DTYPE_F16: return "F16";
    case DTYPE_BF16: return "BF16";
    case DTYPE_Q8: return "Q8";
    case DTYPE_Q4: return "Q4";
    case DTYPE_Q6: return "Q6";
    }
    return NULL;
}

int dtype_from_name(const char *name) {
    for (int d = 0; d < DTYPE_COUNT; d++)
        if (!strcasecmp(name, dtype_name((DType)d))) return d;
    return -1;
}

size_t dtype_size(DType dt) {
    switch (dt) {
    case DTYPE_F32: return 4;
    case DTYPE_F16:
    case DTYPE_BF16: return 2;
    case DTYPE_Q8:
    case DTYPE_Q4:
    case DTYPE_Q6: return 0;
    }
    return 0;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    if (exp == 0x1F) return float_of(sign | 0x7F800000u | (man << 13));  // inf, nan
    if (exp != 0) return float_of(sign | ((exp + 127 - 15) << 23) | (man << 13));
    // zero or subnormal: man * 2^-24, exact in float32
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
}

float bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

uint16_t f32_to_f16(float f) {
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    float a = fabsf(f);
    if (isnan(f)) return (uint16_t)(sign | 0x7E00u);
    if (a >= 65520.0f) return (uint16_t)(sign | 0x7C00u);  // rounds past 65504: inf
    if (a < 0x1p-14f) {
        // subnormal half: a multiple of 2^-24; rintf rounds ties to even
        return (uint16_t)(sign | (uint16_t)rintf(a * 0x1p24f));
    }
    // normal: keep 10 of float's 23 mantissa bits, round to nearest even
    uint32_t abits = bits_of(a);
    uint32_t exp = (abits >> 23) - 127 + 15;
    uint32_t man = abits & 0x7FFFFFu;
    uint32_t half = (exp << 10) | (man >> 13);
    uint32_t rest = man & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++;  // may carry into the exponent: fine
    return (uint16_t)(sign | half);
}

uint16_t f32_to_bf16(float f) {
    uint32_t u = bits_of(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even; overflow carries to inf
    return (uint16_t)(u >> 16);
}

// The f16 scale of a block, and the float it reads back as: rounded to f16
// first, so that the quants are chosen for the scale that multiplies them;
// a scale beyond f16's range (weights beyond it) is clamped to +-65504.
static uint16_t block_scale(float d, float *back) {
    uint16_t d16 = f32_to_f16(d);
    *back = f16_to_f32(d16);
    if (!isfinite(*back)) *back = copysignf(65504.0f, d), d16 = f32_to_f16(*back);
    return d16;
}

size_t q8_row_quants(size_t K) { return round_up(K, Q8_BLOCK); }

size_t q8_quantize_row(int8_t *q, uint16_t *scales, const float *x, size_t K) {
    size_t K_pad = q8_row_quants(K), bad = 0;
    for (size_t b0 = 0; b0 < K_pad; b0 += Q8_BLOCK) {
        size_t n = b0 >= K ? 0 : K - b0 < Q8_BLOCK ? K - b0 : Q8_BLOCK;
        float amax = 0.0f;
        for (size_t i = 0; i < n; i++)
            if (isfinite(x[b0 + i])) amax = fmaxf(amax, fabsf(x[b0 + i]));
            else bad++;
        float d;
        scales[b0 / Q8_BLOCK] = block_scale(amax / 127.0f, &d);
        for (size_t i = 0; i < Q8_BLOCK; i++) {
            float w = i < n ? x[b0 + i] : 0.0f;
            float v = isfinite(w) && d > 0.0f ? rintf(w / d) : 0.0f;
            v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            q[b0 + i] = (int8_t)v;
        }
    }
    return bad;
}

// r (w / d) to the nearest even integer in [-L, L - 1] (Q4: L = 8, Q6:
// 32): clamped first, the same thing, so that adding and subtracting
// 1.5 * 2^23 rounds it (rintf is a library call on baseline x86-64, and
// this runs 11 times per weight).
static float level_round(float r, float L) {
    r = r > -L ? r : -L;
    r = r < L - 1.0f ? r : L - 1.0f;
    return (r + 12582912.0f) - 12582912.0f;
}

// The level of w under scale d: round(w / d) clamped to [-L, L - 1], 0 if d is.
static float level_of(float w, float d, float L) { return d != 0.0f ? level_round(w / d, L) : 0.0f; }

// Squared error of block w (32) stored with scale d (with d = 0 the levels
// do not matter), in a loop the compiler vectorises and a fixed order of
// sums: 8 lanes of 4 terms, then a tree.
static float block_error(const float *w, float d, float L) {
    float sq[Q4_BLOCK], lane[8], div = d != 0.0f ? d : 1.0f;
    for (size_t i = 0; i < Q4_BLOCK; i++) {
        float r = w[i] - d * level_round(w[i] / div, L);
        sq[i] = r * r;
    }
    for (size_t j = 0; j < 8; j++) lane[j] = ((sq[j] + sq[j + 8]) + sq[j + 16]) + sq[j + 24];
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// The f16 scale of block w (32 finite weights; m the one of largest
// magnitude, with its sign) with the least squared error among m / c for
// c = -L + 0.025 L k, k = -5 .. 5 (Q4: -9, -8.8, ..., -7; Q6: -36, -35.2,
// ..., -28; dtype.h), m / -L tried first, and *d as it reads back.
static uint16_t search_block_scale(const float *w, float m, float L, float *d) {
    uint16_t best = block_scale(m / -L, d);
    if (m == 0.0f) return best;
    float best_error = block_error(w, *d, L);
    const float step = 0.025f * L;  // exactly 0.2f for Q4, 0.8f for Q6 (a power of 2 apart)
    for (int k = -5; k <= 5; k++) {
        if (k == 0) continue;  // m / -L, tried first
        float back;
        uint16_t c16 = block_scale(m / (-L + step * (float)k), &back);
        float e = block_error(w, back, L);
        if (e < best_error) best_error = e, best = c16, *d = back;
    }
    return best;
}

// Block b0 / 32 of a row of K weights, zero-padded, a weight it cannot hold
// (NaN, infinite) as 0 (counted in *bad); its levels in [-L, L - 1] into v
// and its f16 scale returned.
static uint16_t quantize_block(int *v, const float *x, size_t K, size_t b0, float L, size_t *bad) {
    size_t n = b0 >= K ? 0 : K - b0 < Q4_BLOCK ? K - b0 : Q4_BLOCK;
    // m: the weight of largest magnitude, with its sign (the first of equals)
    float blk_w[Q4_BLOCK], m = 0.0f;
    for (size_t i = 0; i < Q4_BLOCK; i++) {
        float w = i < n ? x[b0 + i] : 0.0f;
        if (!isfinite(w)) ++*bad, w = 0.0f;
        blk_w[i] = w;
        if (fabsf(w) > fabsf(m)) m = w;
    }
    float d;  // as it will be read back, so the levels fit the scale that multiplies them
    uint16_t scale = search_block_scale(blk_w, m, L, &d);
    for (size_t i = 0; i < Q4_BLOCK; i++) v[i] = (int)level_of(blk_w[i], d, L);
    return scale;
}

size_t q4_row_bytes(size_t K) { return round_up(K, Q4_BLOCK) / 2; }

size_t q4_quantize_row(uint8_t *q, uint16_t *scales, const float *x, size_t K) {
    size_t K_pad = round_up(K, Q4_BLOCK), bad = 0;
    for (size_t b0 = 0; b0 < K_pad; b0 += Q4_BLOCK) {
        int v[Q4_BLOCK];
        scales[b0 / Q4_BLOCK] = quantize_block(v, x, K, b0, 8.0f, &bad);
        uint8_t *blk = q + b0 / 2;
        for (size_t i = 0; i < Q4_BLOCK / 2; i++) blk[i] = (uint8_t)((v[i] + 8) | (v[i + 16] + 8) << 4);
    }
    return bad;
}

size_t q6_row_bytes(size_t K) { return (round_up(K, Q6_BLOCK) / Q6_BLOCK + 3) / 4 * Q6_GROUP_BYTES; }

size_t q6_quantize_row(uint8_t *q, uint16_t *scales, const float *x, size_t K) {
    size_t K_pad = round_up(K, Q6_BLOCK), nb = K_pad / Q6_BLOCK, bad = 0;
    memset(q, 0, q6_row_bytes(K));
    for (size_t j = 0; j < (nb + 3) / 4 * 4; j++) {
        int v[Q6_BLOCK] = {0};  // blocks past the row (the last group's padding): q = 0
        if (j < nb) scales[j] = quantize_block(v, x, K, j * Q6_BLOCK, 32.0f, &bad);
        uint8_t *group = q + j / 4 * Q6_GROUP_BYTES;
        const size_t i = j % 4;
        for (size_t e = 0; e < Q6_BLOCK; e++) {  // the layout q6_value() reads
            const unsigned u = (unsigned)(v[e] + 32), m = 16 * (unsigned)i + (e & 15), high = e >= 16;
            group[m] |= (uint8_t)((u & 15u) << 4 * high);
            group[64 + (m & 31)] |= (uint8_t)((u >> 4) << (4 * high + 2 * (m >= 32)));
        }
    }
    return bad;
}

// Bytes of one row's quants (Q8, Q4, Q6), where the scales of all rows begin.
static size_t row_quant_bytes(DType dt, size_t n_in) {
    return dt == DTYPE_Q8 ? q8_row_quants(n_in) : dt == DTYPE_Q4 ? q4_row_bytes(n_in) : q6_row_bytes(n_in);
}

size_t weight_bytes(DType dt, size_t n_out, size_t n_in) {
    if (dtype_is_blocked(dt)) {
        size_t nb = round_up(n_in, Q8_BLOCK) / Q8_BLOCK;  // Q8_BLOCK == Q4_BLOCK == Q6_BLOCK
        return n_out * row_quant_bytes(dt, n_in) + n_out * nb * sizeof(uint16_t);
    }
    return n_out * n_in * dtype_size(dt);
}

Weight weight_view(DType dt, const void *bytes, size_t n_out, size_t n_in) {
    Weight w = {.dtype = dt, .n_in = n_in, .n_out = n_out, .data = bytes, .scales = NULL};
    if (dtype_is_blocked(dt))
        w.scales = (const uint16_t *)(const void *)((const unsigned char *)bytes + n_out * row_quant_bytes(dt, n_in));
    return w;
}

size_t weight_encode_rows(void *dst, DType dt, const float *src, size_t j0, size_t n, size_t n_out,
                          size_t n_in) {
    size_t count = n * n_in, bad = 0;
    switch (dt) {
    case DTYPE_F32:
        memcpy((float *)dst + j0 * n_in, src, count * sizeof(float));
        break;
    case DTYPE_F16:
        for (size_t i = 0; i < count; i++) ((uint16_t *)dst)[j0 * n_in + i] = f32_to_f16(src[i]);
        break;
    case DTYPE_BF16:
        for (size_t i = 0; i < count; i++) ((uint16_t *)dst)[j0 * n_in + i] = f32_to_bf16(src[i]);
        break;
    case DTYPE_Q8: {
        size_t K_pad = q8_row_quants(n_in);
        int8_t *q = dst;
        uint16_t *scales = (uint16_t *)(void *)((unsigned char *)dst + n_out * K_pad);
        for (size_t r = 0; r < n; r++)
            bad += q8_quantize_row(q + (j0 + r) * K_pad, scales + (j0 + r) * (K_pad / Q8_BLOCK), src + r * n_in,
                                   n_in);
        break;
    }
    case DTYPE_Q4: {
        size_t rb = q4_row_bytes(n_in), nb = 2 * rb / Q4_BLOCK;
        uint8_t *q = dst;
        uint16_t *scales = (uint16_t *)(void *)((unsigned char *)dst + n_out * rb);
        for (size_t r = 0; r < n; r++)
            bad += q4_quantize_row(q + (j0 + r) * rb, scales + (j0 + r) * nb, src + r * n_in, n_in);
        break;
    }
    case DTYPE_Q6: {
        size_t rb = q6_row_bytes(n_in), nb = round_up(n_in, Q6_BLOCK) / Q6_BLOCK;
        uint8_t *q = dst;
        uint16_t *scales = (uint16_t *)(void *)((unsigned char *)dst + n_out * rb);
        for (size_t r = 0; r < n; r++)
            bad += q6_quantize_row(q + (j0 + r) * rb, scales + (j0 + r) * nb, src + r * n_in, n_in);
        break;
    }
    }
    return bad;
}

size_t weight_encode(void *dst, DType dt, const float *src, size_t n_out, size_t n_in) {
    return weight_encode_rows(dst, dt, src, 0, n_out, n_out, n_in);
}

float weight_at(const Weight *W, size_t i, size_t j) {
    switch (W->dtype) {
    case DTYPE_F32: return ((const float *)W->data)[j * W->n_in + i];
    case DTYPE_F16: return f16_to_f32(((const uint16_t *)W->data)[j * W->n_in + i]);
    case DTYPE_BF16: return bf16_to_f32(((const uint16_t *)W->data)[j * W->n_in + i]);
    case DTYPE_Q8: {
        size_t K_pad = q8_row_quants(W->n_in);
        float d = f16_to_f32(W->scales[j * (K_pad / Q8_BLOCK) + i / Q8_BLOCK]);
        return d * (float)((const int8_t *)W->data)[j * K_pad + i];
    }
    case DTYPE_Q4: {
        size_t rb = q4_row_bytes(W->n_in), nb = 2 * rb / Q4_BLOCK;
        float d = f16_to_f32(W->scales[j * nb + i / Q4_BLOCK]);
        const uint8_t *blk = (const uint8_t *)W->data + j * rb + i / Q4_BLOCK * (Q4_BLOCK / 2);
        return d * (float)q4_value(blk, i % Q4_BLOCK);
    }
    case DTYPE_Q6: {
        size_t rb = q6_row_bytes(W->n_in), nb = round_up(W->n_in, Q6_BLOCK) / Q6_BLOCK, j6 = i / Q6_BLOCK;
        float d = f16_to_f32(W->scales[j * nb + j6]);
        const uint8_t *group = (const uint8_t *)W->data + j * rb + j6 / 4 * Q6_GROUP_BYTES;
        return d * (float)q6_value(group, j6 % 4, i % Q6_BLOCK);
    }
    }
    return 0.0f;
}

void weight_row(float *out, const Weight *W, size_t row) {
    if (W->dtype == DTYPE_F32) {
        memcpy(out, (const float *)W->data + row * W->n_in, W->n_in * sizeof *out);
        return;
    }
    // a row per token at most: no need for speed
    for (size_t i = 0; i < W->n_in; i++) out[i] = weight_at(W, i, row);
}

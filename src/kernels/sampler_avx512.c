/*
 * sampler_avx512.c - the sampler's approximate weights in AVX-512
 * (sampler_kernels.h): 8 doubles a vector, the running sums in one vector,
 * added up at the end.
 */
#include "kernels/sampler_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu.h"

// exp(x) for x in [-708, 0], 8 lanes (sampler_kernels.h).
INLINE_AVX512 __m512d exp8(__m512d x) {
    const __m512d shift = _mm512_set1_pd(EXP_SHIFT);
    __m512d kd = _mm512_fmadd_pd(x, _mm512_set1_pd(EXP_LOG2E), shift);
    __m512i bits = _mm512_castpd_si512(kd);  // shift + k: k in the low bits
    kd = _mm512_sub_pd(kd, shift);
    __m512d r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(EXP_LN2HI), x);
    r = _mm512_fnmadd_pd(kd, _mm512_set1_pd(EXP_LN2LO), r);
    __m512d p = _mm512_set1_pd(exp_taylor(EXP_DEGREE));
    for (int i = EXP_DEGREE - 1; i >= 0; i--) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(exp_taylor(i)));
    __m512i e = _mm512_slli_epi64(_mm512_add_epi64(bits, _mm512_set1_epi64(1023)), 52);  // 2^k
    return _mm512_mul_pd(p, _mm512_castsi512_pd(e));
}

TARGET_AVX512 double sampler_approx_weights_avx512(const float *l, size_t n, double lmax, double inv_t, double *out) {
    const __m512d vmax = _mm512_set1_pd(lmax), vinv = _mm512_set1_pd(inv_t), floor = _mm512_set1_pd(APPROX_FLOOR);
    __m512d acc = _mm512_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d x = _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(l + i)), vmax), vinv);
        __mmask8 ok = _mm512_cmp_pd_mask(x, floor, _CMP_GE_OQ);  // NaN: not ok
        __m512d w = _mm512_maskz_mov_pd(ok, exp8(_mm512_max_pd(x, floor)));
        if (out) _mm512_storeu_pd(out + i, w);
        acc = _mm512_add_pd(acc, w);
    }
    double sum = _mm512_reduce_add_pd(acc);
    for (; i < n; i++) {
        double w = approx_one(l[i], lmax, inv_t);
        if (out) out[i] = w;
        sum += w;
    }
    return sum;
}

TARGET_AVX512 double sampler_approx_sl_avx512(const double *sl, size_t n, double *out) {
    const __m512d floor = _mm512_set1_pd(APPROX_FLOOR);
    __m512d acc = _mm512_setzero_pd();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d x = _mm512_loadu_pd(sl + i);
        __mmask8 ok = _mm512_cmp_pd_mask(x, floor, _CMP_GE_OQ);
        __m512d w = _mm512_maskz_mov_pd(ok, exp8(_mm512_max_pd(x, floor)));
        _mm512_storeu_pd(out + i, w);
        acc = _mm512_add_pd(acc, w);
    }
    double sum = _mm512_reduce_add_pd(acc);
    for (; i < n; i++) sum += out[i] = sl[i] >= APPROX_FLOOR ? exp(sl[i]) : 0.0;
    return sum;
}

TARGET_AVX512 void sampler_mask_logits_avx512(const float *l, const uint64_t *mask, size_t n, float *out) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t m = mask[i / 64];
        for (int k = 0; k < 4; k++)  // a masked-off lane is not read
            _mm512_storeu_ps(out + i + 16 * k, _mm512_mask_loadu_ps(ninf, (__mmask16)(m >> (16 * k)), l + i + 16 * k));
    }
    if (i < n) sampler_mask_logits(l + i, mask + i / 64, n - i, out + i);
}

#endif

/*
 * sampler_avx2.c - the sampler's approximate weights in AVX2 with FMA
 * (sampler_kernels.h): 4 doubles a vector, the running sums in one vector,
 * added up at the end as (0 + 1) + (2 + 3).
 */
#include "kernels/sampler_kernels.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu.h"

// exp(x) for x in [-708, 0], 4 lanes (sampler_kernels.h).
INLINE_AVX2 __m256d exp4(__m256d x) {
    const __m256d shift = _mm256_set1_pd(EXP_SHIFT);
    __m256d kd = _mm256_fmadd_pd(x, _mm256_set1_pd(EXP_LOG2E), shift);
    __m256i bits = _mm256_castpd_si256(kd);
    kd = _mm256_sub_pd(kd, shift);
    __m256d r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(EXP_LN2HI), x);
    r = _mm256_fnmadd_pd(kd, _mm256_set1_pd(EXP_LN2LO), r);
    __m256d p = _mm256_set1_pd(exp_taylor(EXP_DEGREE));
    for (int i = EXP_DEGREE - 1; i >= 0; i--) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(exp_taylor(i)));
    __m256i e = _mm256_slli_epi64(_mm256_add_epi64(bits, _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

TARGET_AVX2 double sampler_approx_weights_avx2(const float *l, size_t n, double lmax, double inv_t, double *out) {
    const __m256d vmax = _mm256_set1_pd(lmax), vinv = _mm256_set1_pd(inv_t), floor = _mm256_set1_pd(APPROX_FLOOR);
    __m256d acc = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d x = _mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(l + i)), vmax), vinv);
        __m256d ok = _mm256_cmp_pd(x, floor, _CMP_GE_OQ);
        __m256d w = _mm256_and_pd(ok, exp4(_mm256_max_pd(x, floor)));
        if (out) _mm256_storeu_pd(out + i, w);
        acc = _mm256_add_pd(acc, w);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; i++) {
        double w = approx_one(l[i], lmax, inv_t);
        if (out) out[i] = w;
        sum += w;
    }
    return sum;
}

TARGET_AVX2 double sampler_approx_sl_avx2(const double *sl, size_t n, double *out) {
    const __m256d floor = _mm256_set1_pd(APPROX_FLOOR);
    __m256d acc = _mm256_setzero_pd();
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d x = _mm256_loadu_pd(sl + i);
        __m256d ok = _mm256_cmp_pd(x, floor, _CMP_GE_OQ);
        __m256d w = _mm256_and_pd(ok, exp4(_mm256_max_pd(x, floor)));
        _mm256_storeu_pd(out + i, w);
        acc = _mm256_add_pd(acc, w);
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, acc);
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; i++) sum += out[i] = sl[i] >= APPROX_FLOOR ? exp(sl[i]) : 0.0;
    return sum;
}

#endif

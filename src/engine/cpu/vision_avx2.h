/* vision_avx2.h: what the AVX2 conv-net kernels (vision_conv_avx2.c,
 * vision_dw_avx2.c, vision_elem_avx2.c) share: lane masks, loads and
 * stores of part of a vector, e^x and the fused activation on 8 floats.
 * Header-only, for files compiled with AVX2 flags.
 *
 * Why masks as vectors: AVX2 has no mask registers; vmaskmovps takes a
 * vector whose lanes' sign bits say which lanes move, and like AVX-512's
 * masked loads it does not fault on the lanes it leaves out, so a row's
 * edge is read without touching past it. The masked store is slow on AMD
 * (microcoded on Zen 2/3), so the kernels store whole vectors wherever all
 * eight lanes are theirs and mask only the last vector of a row. */
#ifndef HEARTH_ENGINE_CPU_VISION_AVX2_H
#define HEARTH_ENGINE_CPU_VISION_AVX2_H

#include "engine/cpu/vision.h"

#include <immintrin.h>

/* Lanes j with lo <= j < hi, all ones there, zero elsewhere. */
static inline __m256i vis_lanes8(int64_t lo, int64_t hi)
{
    lo = lo < -1 ? -1 : lo > 8 ? 8 : lo;
    hi = hi < -1 ? -1 : hi > 8 ? 8 : hi;
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i ge_lo = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), iota); /* lanes below lo */
    __m256i lt_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), iota);
    return _mm256_andnot_si256(ge_lo, lt_hi);
}

/* The low n lanes. */
static inline __m256i vis_tail8(int64_t n)
{
    return vis_lanes8(0, n);
}

/* The 8 floats p[0..7], lanes outside mask m read as 0 (and not read). */
static inline __m256 vis_load8(const float *p, __m256i m)
{
    return _mm256_maskload_ps(p, m);
}

/* p[j] for lanes j of row columns ix0 + j that lie in [0, w) and j < n;
 * zeros elsewhere. A whole vector inside the row is a plain load. */
static inline __m256 vis_row8(const float *row, int64_t ix0, int64_t w, int64_t n)
{
    if (n >= 8 && ix0 >= 0 && ix0 + 8 <= w)
        return _mm256_loadu_ps(row + ix0);
    int64_t hi = w - ix0 < n ? w - ix0 : n;
    return _mm256_maskload_ps(row + ix0, vis_lanes8(-ix0, hi));
}

/* y[0 .. n-1] = v (n >= 8: all eight). */
static inline void vis_store8(float *y, __m256 v, int64_t n)
{
    if (n >= 8)
        _mm256_storeu_ps(y, v);
    else
        _mm256_maskstore_ps(y, vis_tail8(n), v);
}

/* The even lanes of the 16 floats lo, hi (lo0 lo2 .. hi6), and the odd. */
static inline __m256 vis_even8(__m256 lo, __m256 hi)
{
    return _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))), 0xd8));
}

static inline __m256 vis_odd8(__m256 lo, __m256 hi)
{
    return _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))), 0xd8));
}

/* e^x on 8 floats: exp_avx512.h's reduction and polynomial; 2^n built in
 * the exponent field, so x is clamped to [-87.3, 88.3] (n in [-126, 127]):
 * below it the result is ~1e-38 rather than a denormal or 0, which the
 * sigmoid built on it cannot tell apart. */
static inline __m256 exp256(__m256 x)
{
    static const float c[7] = {1.383682207e-03f, 8.374822004e-03f, 4.166822633e-02f, 1.666642010e-01f,
                               4.999999207e-01f, 1.000000036e+00f, 1.000000001e+00f};
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723e-06f), r);
    __m256 p = _mm256_set1_ps(c[0]);
    for (int i = 1; i < 7; i++)
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c[i]));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* dev_vision.h's activation on 8 lanes (vis_act's twin). */
static inline __m256 vis_act8(__m256 v, const hearth_conv_desc *d)
{
    switch (d->act) {
    case HEARTH_ACT_RELU: return _mm256_max_ps(v, _mm256_setzero_ps());
    case HEARTH_ACT_CLIP: return _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(d->act_min)), _mm256_set1_ps(d->act_max));
    case HEARTH_ACT_SIGMOID: {
        __m256 one = _mm256_set1_ps(1.0f);
        return _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), v))));
    }
    case HEARTH_ACT_LEAKY_RELU: {
        __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
        return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(d->act_min)), neg);
    }
    default: return v;
    }
}

#endif

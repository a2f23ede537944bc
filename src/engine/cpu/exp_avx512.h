/* exp_avx512.h: e^x on 16 floats, for files compiled with AVX-512 flags
 * (ops_avx512.c, src/models' attention heads); header-only so it inlines.
 *
 * n = round(x log2 e), r = x - n ln 2 (ln 2 split in two, so r is exact to
 * a few ulps), e^r by a degree-6 polynomial fitted for relative error on
 * |r| <= ln2 / 2 (2e-9 in exact arithmetic, ~7e-8 evaluated in float), then
 * scalef by 2^n, which saturates to inf and flushes to 0 correctly; x is
 * clamped to [-104, 88.8] first so r stays small (and -inf gives ~1e-45,
 * not NaN: mask lanes that must be exactly 0). */
#ifndef HEARTH_ENGINE_CPU_EXP_AVX512_H
#define HEARTH_ENGINE_CPU_EXP_AVX512_H

#include <immintrin.h>

/* c[0] t^deg + ... + c[deg], by Horner */
static inline __m512 poly(__m512 t, const float *c, int deg)
{
    __m512 acc = _mm512_set1_ps(c[0]);
    for (int i = 1; i <= deg; i++)
        acc = _mm512_fmadd_ps(acc, t, _mm512_set1_ps(c[i]));
    return acc;
}

/* e^r on |r| <= ln2 / 2, highest degree first */
static const float EXP_C[7] = {1.383682207e-03f, 8.374822004e-03f, 4.166822633e-02f, 1.666642010e-01f,
                               4.999999207e-01f, 1.000000036e+00f, 1.000000001e+00f};

static inline __m512 exp512(__m512 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.8f));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* ln 2 = 0.693145751953125 (16 bits: n * it is exact) + 1.4286068203e-6 */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-06f), r);
    return _mm512_scalef_ps(poly(r, EXP_C, 6), n);
}

#endif

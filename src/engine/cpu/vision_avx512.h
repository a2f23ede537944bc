/* vision_avx512.h: what the AVX-512 conv kernels (vision_conv_avx512.c,
 * vision_dw_avx512.c) share: the fused activation on 16 floats and the tail
 * mask. Header-only, for files compiled with AVX-512 flags. */
#ifndef HEARTH_ENGINE_CPU_VISION_AVX512_H
#define HEARTH_ENGINE_CPU_VISION_AVX512_H

#include "engine/cpu/exp_avx512.h"
#include "engine/cpu/vision.h"

#include <immintrin.h>

/* The low n lanes (n >= 16: all). */
static inline __mmask16 vis_tail(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* dev_vision.h's activation on 16 lanes (vis_act's twin). */
static inline __m512 vis_act16(__m512 v, const hearth_conv_desc *d)
{
    switch (d->act) {
    case HEARTH_ACT_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    case HEARTH_ACT_CLIP: return _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(d->act_min)), _mm512_set1_ps(d->act_max));
    case HEARTH_ACT_SIGMOID: {
        __m512 one = _mm512_set1_ps(1.0f);
        return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), v))));
    }
    case HEARTH_ACT_LEAKY_RELU: {
        __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
        return _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(d->act_min));
    }
    default: return v;
    }
}

#endif

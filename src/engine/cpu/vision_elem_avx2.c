/* vision_elem_avx2.c: the CPU's elementwise conv-net ops in AVX2 (unary),
 * vision_elem_avx512.c's twin on 8 floats: the scalar ops' results exactly
 * (the same IEEE operations in the same order: no FMA contraction, division
 * kept a division) except sigmoid, which uses vision_avx2.h's exp (within
 * the tests' 1e-5); exp, tanh and log stay scalar. */
#include "engine/cpu/vision_avx2.h"

#include <immintrin.h>

static inline __m256 un8(hearth_unary_op op, __m256 x, __m256 a, __m256 b)
{
    const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    switch (op) {
    case HEARTH_UN_RELU: return _mm256_max_ps(x, zero);
    case HEARTH_UN_CLIP: return _mm256_min_ps(_mm256_max_ps(x, a), b);
    case HEARTH_UN_LEAKY_RELU:
        return _mm256_blendv_ps(x, _mm256_mul_ps(x, a), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
    case HEARTH_UN_HARD_SIGMOID: return _mm256_max_ps(zero, _mm256_min_ps(one, _mm256_add_ps(_mm256_mul_ps(a, x), b)));
    case HEARTH_UN_HARD_SWISH: {
        __m256 t = _mm256_add_ps(_mm256_div_ps(x, _mm256_set1_ps(6.0f)), _mm256_set1_ps(0.5f));
        return _mm256_mul_ps(x, _mm256_max_ps(zero, _mm256_min_ps(one, t)));
    }
    case HEARTH_UN_NEG: return _mm256_sub_ps(zero, x);
    case HEARTH_UN_ABS: return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    case HEARTH_UN_SQRT: return _mm256_sqrt_ps(x);
    case HEARTH_UN_SIGMOID: return _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_sub_ps(zero, x))));
    default: return x;
    }
}

/* One loop per op, so the switch is outside it. */
#define UN_LOOP(OP)                                                                                                  \
    do {                                                                                                             \
        int64_t i = 0;                                                                                               \
        for (; i + 8 <= n; i += 8)                                                                                   \
            _mm256_storeu_ps(Y + i, un8(OP, _mm256_loadu_ps(X + i), av, bv));                                         \
        if (i < n) {                                                                                                 \
            __m256i m = vis_tail8(n - i);                                                                            \
            _mm256_maskstore_ps(Y + i, m, un8(OP, vis_load8(X + i, m), av, bv));                                      \
        }                                                                                                            \
    } while (0)

void hearth_vis_unary_avx2(hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b)
{
    const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
    switch (op) {
    case HEARTH_UN_RELU: UN_LOOP(HEARTH_UN_RELU); break;
    case HEARTH_UN_CLIP: UN_LOOP(HEARTH_UN_CLIP); break;
    case HEARTH_UN_LEAKY_RELU: UN_LOOP(HEARTH_UN_LEAKY_RELU); break;
    case HEARTH_UN_HARD_SIGMOID: UN_LOOP(HEARTH_UN_HARD_SIGMOID); break;
    case HEARTH_UN_HARD_SWISH: UN_LOOP(HEARTH_UN_HARD_SWISH); break;
    case HEARTH_UN_NEG: UN_LOOP(HEARTH_UN_NEG); break;
    case HEARTH_UN_ABS: UN_LOOP(HEARTH_UN_ABS); break;
    case HEARTH_UN_SQRT: UN_LOOP(HEARTH_UN_SQRT); break;
    case HEARTH_UN_SIGMOID: UN_LOOP(HEARTH_UN_SIGMOID); break;
    default: hearth_vis_unary_ref(op, X, Y, n, a, b); break;
    }
}

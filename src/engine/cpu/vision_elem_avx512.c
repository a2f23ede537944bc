/* vision_elem_avx512.c: the CPU's elementwise conv-net ops in AVX-512
 * (unary for now): 16 floats a step, the tail masked.
 *
 * Why: a ReLU after a residual Add is a node of its own in most exported
 * nets (the planner fuses activations into convs only), and the scalar loop
 * of vision_ref.c, a switch per element, took 190 us of RFB-320's 3.6 ms
 * frame for 76,800 floats. The ops here give the scalar twin's results
 * exactly (the same IEEE operations in the same order: no FMA contraction,
 * division kept a division) except sigmoid, which uses the conv
 * activation's exp (exp_avx512.h, within the tests' 1e-5); exp, tanh and
 * log stay scalar. */
#include "engine/cpu/vision_avx512.h"

#include <immintrin.h>

static inline __m512 un16(hearth_unary_op op, __m512 x, __m512 a, __m512 b)
{
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    switch (op) {
    case HEARTH_UN_RELU: return _mm512_max_ps(x, zero);
    case HEARTH_UN_CLIP: return _mm512_min_ps(_mm512_max_ps(x, a), b);
    case HEARTH_UN_LEAKY_RELU:
        return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, a);
    case HEARTH_UN_HARD_SIGMOID: return _mm512_max_ps(zero, _mm512_min_ps(one, _mm512_add_ps(_mm512_mul_ps(a, x), b)));
    case HEARTH_UN_HARD_SWISH: {
        __m512 t = _mm512_add_ps(_mm512_div_ps(x, _mm512_set1_ps(6.0f)), _mm512_set1_ps(0.5f));
        return _mm512_mul_ps(x, _mm512_max_ps(zero, _mm512_min_ps(one, t)));
    }
    case HEARTH_UN_NEG: return _mm512_sub_ps(zero, x);
    case HEARTH_UN_ABS: return _mm512_abs_ps(x);
    case HEARTH_UN_SQRT: return _mm512_sqrt_ps(x);
    case HEARTH_UN_SIGMOID: return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(zero, x))));
    default: return x;
    }
}

/* One loop per op, so the switch is outside it. */
#define UN_LOOP(OP)                                                                                                  \
    do {                                                                                                             \
        int64_t i = 0;                                                                                               \
        for (; i + 16 <= n; i += 16)                                                                                 \
            _mm512_storeu_ps(Y + i, un16(OP, _mm512_loadu_ps(X + i), av, bv));                                        \
        if (i < n) {                                                                                                 \
            __mmask16 m = vis_tail(n - i);                                                                           \
            _mm512_mask_storeu_ps(Y + i, m, un16(OP, _mm512_maskz_loadu_ps(m, X + i), av, bv));                      \
        }                                                                                                            \
    } while (0)

void hearth_vis_unary_avx512(hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b)
{
    const __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b);
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

/* ops_avx512.c: AVX-512 versions of the row-wise ops that showed up in
 * profiles (GELU, LayerNorm, RMSNorm, softmax, SiLU, SwiGLU, add, mul, scale); compiled with
 * AVX-512 flags, used only after hearth_hw() reports them (ops.c).
 *
 * Same contracts and the same reductions as ops.c: sums of a row accumulate
 * in double (8 lanes of __m512d), so the norms keep ops.c's precision. Row
 * tails are masked loads and stores, so nothing past n is touched.
 *
 * exp: exp_avx512.h (shared with the attention heads of src/models).
 *
 * GELU = 0.5 x (1 + erf(z)), z = x / sqrt 2, with z carried as a float pair
 * (x times sqrt(1/2) in two parts) because the tail needs z^2 to ~1e-14:
 *   |z| < 0.7:  erf(z) = z P(z^2), P of degree 5 (fitted relative error 6e-10);
 *   |z| >= 0.7: erfc(|z|) = exp(-z^2) G(1/|z|) / |z|, G of degree 12 in
 *             1/|z| - 0.8 (fitted on [0.7, 9.5]; 5e-8 exact, 1.3e-7 in float),
 *             with exp(-z^2) from the pair (z^2 as hi + lo, exp(-hi)(1 - lo)),
 *             and GELU = 0.5 x erfc(|z|) for x < 0, x - 0.5 x erfc(z) for x > 0.
 * The switch at 0.7 rather than 1 keeps 1 + erf(z) >= 0.32 where it is
 * formed, so its cancellation costs at most ~1.5 bits. Measured on a dense
 * grid of [-14, 14] against double: relative error <= ~4e-7 everywhere,
 * including the negative tail, where the scalar 1 + erff(z) cancels down to
 * a few correct bits (it is only accurate relative to |x| there). The coefficients were fitted here (numpy,
 * weighted least squares on Chebyshev nodes iterated toward minimax) and
 * checked on a dense grid against erf/erfc in double, as the unit test does.
 *
 * Rejected: the tanh approximation of GELU (a different function: 1e-3 off);
 * one polynomial for erf over the whole range (the tail's relative error
 * cannot be met without the exp factor); vectorizing through libmvec (not
 * in every libc, and its accuracy is not documented per function). */
#include "engine/cpu/exp_avx512.h"
#include "engine/cpu/ops_impl.h"

#include <immintrin.h>
#include <math.h>

static inline __mmask16 tail(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

/* erf(z) / z as a polynomial in z^2 on |z| < 0.7 */
static const float ERF_C[6] = {-6.956991965e-04f, 5.139085330e-03f, -2.684485825e-02f,
                               1.128354742e-01f,  -3.761262860e-01f, 1.128379166e+00f};
/* erfc(z) exp(z^2) z as a polynomial in 1/z - 0.8 on 0.7 <= z <= 9.5 */
static const float ERFC_C[13] = {-1.274860833e-02f, -3.435485129e-03f, 2.733910947e-02f,  -1.395018298e-02f,
                                 -1.323502418e-03f, 5.074316737e-03f,  -1.602803469e-02f, 3.216317496e-02f,
                                 -4.182607959e-02f, 3.110839141e-02f,  2.468380147e-02f,  -1.668682694e-01f,
                                 4.597786274e-01f};

static inline __m512 gelu16(__m512 x)
{
    /* sqrt(1/2) = C_HI + C_LO; z = zh + zl to ~2^-48 relative */
    const __m512 c_hi = _mm512_set1_ps(0.707106769084930419921875f), c_lo = _mm512_set1_ps(1.210161710448e-08f);
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    __m512 zh = _mm512_mul_ps(x, c_hi);
    __m512 zl = _mm512_fmadd_ps(x, c_lo, _mm512_fmsub_ps(x, c_hi, zh));
    __m512 a = _mm512_abs_ps(zh);
    __m512 hx = _mm512_mul_ps(half, x);
    __mmask16 small = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.7f), _CMP_LT_OQ);
    __m512 y = _mm512_setzero_ps();
    if (small) {
        /* zl changes erf by ~1e-8 of itself here: not worth carrying */
        __m512 t = _mm512_mul_ps(zh, zh);
        __m512 erf = _mm512_mul_ps(zh, poly(t, ERF_C, 5));
        y = _mm512_mask_mov_ps(y, small, _mm512_fmadd_ps(hx, erf, hx));
    }
    if (small != 0xffff) {
        /* the |z| >= 0.7 lanes (and NaN); small lanes compute harmless values */
        __m512 az = _mm512_max_ps(a, _mm512_set1_ps(0.7f));
        __m512 azl = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(zh, _mm512_setzero_ps(), _CMP_LT_OQ), zl,
                                          _mm512_sub_ps(_mm512_setzero_ps(), zl));
        __m512 u = _mm512_div_ps(one, az);
        __m512 g = poly(_mm512_sub_ps(u, _mm512_set1_ps(0.8f)), ERFC_C, 12);
        __m512 s = _mm512_mul_ps(az, az);
        /* z^2 = s + lo exactly to ~2^-48: the rounding of az^2 plus 2 az azl */
        __m512 lo = _mm512_fmadd_ps(_mm512_add_ps(az, az), azl, _mm512_fmsub_ps(az, az, s));
        /* where exp(-s) is 0 anyway, lo may be NaN (x = +-inf): drop it */
        lo = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s, _mm512_set1_ps(104.0f), _CMP_LT_OQ), lo);
        __m512 e = _mm512_mul_ps(exp512(_mm512_sub_ps(_mm512_setzero_ps(), s)), _mm512_sub_ps(one, lo));
        __m512 erfc = _mm512_mul_ps(_mm512_mul_ps(e, g), u);
        __m512 neg = _mm512_mul_ps(hx, erfc); /* x < 0 */
        __m512 pos = _mm512_fnmadd_ps(hx, erfc, x); /* x >= 0; x itself where erfc is 0 (x = +inf) */
        pos = _mm512_mask_mov_ps(pos, _mm512_cmp_ps_mask(erfc, _mm512_setzero_ps(), _CMP_EQ_OQ), x);
        __m512 big = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), pos, neg);
        y = _mm512_mask_mov_ps(y, (__mmask16)~small, big);
    }
    return y;
}

static void gelu_erf(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        _mm512_mask_storeu_ps(y + i, k, gelu16(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

/* x / (1 + e^-x): e^-x saturates to inf for x < -88.8, giving -0 as expf does */
static inline __m512 silu16(__m512 x)
{
    __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static void silu(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        _mm512_mask_storeu_ps(y + i, k, silu16(_mm512_maskz_loadu_ps(k, x + i)));
    }
}

static void swiglu(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        __m512 v = silu16(_mm512_maskz_loadu_ps(k, a + i));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, b + i)));
    }
}

/* sum of 16 floats into two double accumulators */
static inline void add_pd(__m512 v, __m512d *lo, __m512d *hi)
{
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    *hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
}

static inline void add_sq_pd(__m512 v, __m512d *lo, __m512d *hi)
{
    __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    __m512d b = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    *lo = _mm512_fmadd_pd(a, a, *lo);
    *hi = _mm512_fmadd_pd(b, b, *hi);
}

static void layernorm(float *y, const float *x, int64_t n, const float *gamma, const float *beta, float eps)
{
    if (n <= 0)
        return;
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16)
        add_pd(_mm512_maskz_loadu_ps(tail(n - i), x + i), &s0, &s1);
    double mean = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / (double)n;
    /* the deviations in double, as ops.c: (x - mean)^2 summed exactly enough */
    __m512d q0 = _mm512_setzero_pd(), q1 = _mm512_setzero_pd(), m = _mm512_set1_pd(mean);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        __m512d a = _mm512_maskz_sub_pd((__mmask8)k, _mm512_cvtps_pd(_mm512_castps512_ps256(v)), m);
        __m512d b = _mm512_maskz_sub_pd((__mmask8)(k >> 8),
                                        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))),
                                        m);
        q0 = _mm512_fmadd_pd(a, a, q0);
        q1 = _mm512_fmadd_pd(b, b, q1);
    }
    double sq = _mm512_reduce_add_pd(_mm512_add_pd(q0, q1));
    __m512 inv = _mm512_set1_ps((float)(1.0 / sqrt(sq / (double)n + eps)));
    __m512 fmean = _mm512_set1_ps((float)mean);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), fmean), inv);
        __m512 g = gamma ? _mm512_maskz_loadu_ps(k, gamma + i) : _mm512_set1_ps(1.0f);
        __m512 b = beta ? _mm512_maskz_loadu_ps(k, beta + i) : _mm512_setzero_ps();
        _mm512_mask_storeu_ps(y + i, k, _mm512_fmadd_ps(v, g, b));
    }
}

static void rmsnorm(float *y, const float *x, int64_t n, const float *weight, float eps)
{
    if (n <= 0)
        return;
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16)
        add_sq_pd(_mm512_maskz_loadu_ps(tail(n - i), x + i), &s0, &s1);
    double sq = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    __m512 inv = _mm512_set1_ps((float)(1.0 / sqrt(sq / (double)n + eps)));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv);
        if (weight)
            v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, weight + i));
        _mm512_mask_storeu_ps(y + i, k, v);
    }
}

static void softmax(float *y, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    __m512 mx = _mm512_set1_ps(x[0]);
    for (int64_t i = 0; i < n; i += 16)
        mx = _mm512_mask_max_ps(mx, tail(n - i), mx, _mm512_maskz_loadu_ps(tail(n - i), x + i));
    __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        __m512 e = _mm512_maskz_mov_ps(k, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), max)));
        _mm512_mask_storeu_ps(y + i, k, e);
        add_pd(e, &s0, &s1);
    }
    /* sum >= 1: the max contributes exp(0) */
    __m512 inv = _mm512_set1_ps((float)(1.0 / _mm512_reduce_add_pd(_mm512_add_pd(s0, s1))));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), inv));
    }
}

/* The elementwise ops: the portable loops compile to scalar code at -O2
 * without AVX-512 flags, and they sit on every residual stream. */
#define ELEMENTWISE(name, expr)                                                                      \
    static void name(float *y, const float *a, const float *b, int64_t n)                            \
    {                                                                                                \
        int64_t i = 0;                                                                               \
        for (; i + 16 <= n; i += 16) {                                                               \
            __m512 va = _mm512_loadu_ps(a + i), vb = _mm512_loadu_ps(b + i);                         \
            _mm512_storeu_ps(y + i, expr);                                                           \
        }                                                                                            \
        if (i < n) {                                                                                 \
            __mmask16 k = tail(n - i);                                                               \
            __m512 va = _mm512_maskz_loadu_ps(k, a + i), vb = _mm512_maskz_loadu_ps(k, b + i);       \
            _mm512_mask_storeu_ps(y + i, k, expr);                                                   \
        }                                                                                            \
    }
ELEMENTWISE(add, _mm512_add_ps(va, vb))
ELEMENTWISE(mul, _mm512_mul_ps(va, vb))

static void scale(float *y, const float *x, float s, int64_t n)
{
    __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = tail(n - i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs));
    }
}

const hearth_cpu_ops hearth_cpu_ops_avx512 = {
    .name = "avx512",
    .layernorm = layernorm,
    .rmsnorm = rmsnorm,
    .softmax = softmax,
    .gelu_erf = gelu_erf,
    .silu = silu,
    .swiglu = swiglu,
    .add = add,
    .mul = mul,
    .scale = scale,
};

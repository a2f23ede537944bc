/* attn_avx512.c: the attention heads for AVX-512 (flags from the
 * Makefile), for f32 and f16 caches; called only when hearth_hw() reports
 * AVX-512F.
 *
 * Head sizes that are a multiple of 16 up to 128 (all the llama, qwen2 and
 * qwen3 models) take a path written for the width; others the generic body
 * of attn_impl.h at 16 floats. An f16 cache is widened 16 elements at
 * a time by vcvtph2ps as it is loaded.
 *
 * Why a path of its own: profiles of batched decode (hearth run --bench
 * --parallel 4, 110M model, Zen 5) put the generic head at a quarter of a
 * step. It pays per cached position a horizontal sum of 16 lanes and a
 * scalar expf; here 16 positions at a time are scored (hd / 16 FMAs each
 * into one vector per position), their 16 vectors summed into one vector of
 * 16 scores by a transposing tree (15 adds and 31 shuffles for the 16,
 * instead of 16 reductions), and their weights made by one vector exp
 * (exp_avx512.h). The online softmax is the generic body's, per block of 16:
 * when a block raises the running max, the sum and the accumulators are
 * rescaled by exp(old - new). q is scaled once up front instead of every
 * score. */
#include "engine/cpu/attn.h"

#include "engine/cpu/exp_avx512.h"

#include <immintrin.h>
#include <math.h>

#define AI static inline __attribute__((always_inline))

#define ATTN_NAME attn_any
#define ATTN_VBYTES 64
#define ATTN_KV float
#define ATTN_LINKAGE static
#include "engine/cpu/attn_impl.h"

static inline vf load_h(const uint16_t *p)
{
    return (vf)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

#define ATTN_NAME attn_any_f16
#define ATTN_KV uint16_t
#define ATTN_KV_LOAD(p) load_h(p)
#define ATTN_KV_AT(p, i) _cvtsh_ss((p)[i])
#define ATTN_LINKAGE static
#include "engine/cpu/attn_impl.h"

/* 16 cache elements from p (F: f16, else f32) as floats */
AI __m512 kv16(const int F, const void *p)
{
    return F ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)) : _mm512_loadu_ps((const float *)p);
}

/* v[j], 16 vectors; returns lane j = the sum of v[j]'s lanes. Every add
 * combines parts of the same v[j], so one v[j] that is garbage spoils only
 * its own lane. */
AI __m512 sum16(const __m512 v[16])
{
    __m512 r[8], u[4], w[2];
    /* r[i] 128-bit lanes: v[2i] halves folded (2 lanes), then v[2i+1]'s */
    #pragma GCC unroll 16
    for (int i = 0; i < 8; i++)
        r[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* u[i] 128-bit lane m: the 4 partial sums of position 4i + m */
    #pragma GCC unroll 16
    for (int i = 0; i < 4; i++)
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* w[i] lane m: 2 partials of position 8i + m, then 2 of 8i + 4 + m */
    #pragma GCC unroll 16
    for (int i = 0; i < 2; i++)
        w[i] = _mm512_add_ps(_mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(u[2 * i], u[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* element 4m + t: position 4t + m */
    __m512 z = _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), z);
}

/* Rows [p0, p0 + 16) of K or V (clipped to n_pos) toward L1. The rows of
 * one head are stride floats apart (the KV cache keeps all heads of a
 * position together), a stride the hardware prefetchers do not follow far
 * enough: without this the head waits on DRAM for every row once the
 * weights have pushed the cache out of L3 (hearth serve, 4 streams: the
 * head took ~10% of the engine's time, most of it in loads). */
AI void prefetch_rows(const void *base, size_t row_bytes, int64_t p0, int64_t n_pos, int lines)
{
    int64_t end = p0 + 16 < n_pos ? p0 + 16 : n_pos;
    for (int64_t p = p0; p < end; p++)
#pragma GCC unroll 8
        for (int c = 0; c < lines; c++)
            _mm_prefetch((const char *)base + (size_t)p * row_bytes + 64 * c, _MM_HINT_T0);
}

/* F: the cache is f16; NC: hd / 16 */
AI void head(const int F, const int NC, float *out, const float *q, const void *K, const void *V, int64_t stride,
             int64_t n_pos, float scale)
{
    const size_t elt = F ? 2 : 4, row = (size_t)stride * elt;
    const int lines = (int)((16 * NC * elt + 63) / 64);
    __m512 qv[8], acc[8];
    #pragma GCC unroll 16
    for (int c = 0; c < NC; c++) {
        qv[c] = _mm512_mul_ps(_mm512_loadu_ps(q + 16 * c), _mm512_set1_ps(scale));
        acc[c] = _mm512_setzero_ps();
    }
    float mx = -INFINITY, sum = 0;
    prefetch_rows(K, row, 0, n_pos, lines);
    for (int64_t p0 = 0; p0 < n_pos; p0 += 16) {
        int64_t np = n_pos - p0 < 16 ? n_pos - p0 : 16;
        prefetch_rows(V, row, p0, n_pos, lines);
        prefetch_rows(K, row, p0 + 16, n_pos, lines);
        __mmask16 live = np == 16 ? (__mmask16)0xffff : (__mmask16)((1u << np) - 1);
        __m512 s[16];
        /* rows past n_pos are not read: the cache may end there */
        #pragma GCC unroll 16
        for (int j = 0; j < 16; j++) {
            s[j] = _mm512_setzero_ps();
            if (j < np) {
                const char *k = (const char *)K + (size_t)(p0 + j) * row;
                #pragma GCC unroll 16
                for (int c = 0; c < NC; c++)
                    s[j] = _mm512_fmadd_ps(qv[c], kv16(F, k + 16 * elt * c), s[j]);
            }
        }
        __m512 sc = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), live, sum16(s));
        float bm = _mm512_reduce_max_ps(sc);
        if (bm > mx) {
            float r = expf(mx - bm); /* 0 on the first block: mx is -inf */
            sum *= r;
            #pragma GCC unroll 16
            for (int c = 0; c < NC; c++)
                acc[c] = _mm512_mul_ps(acc[c], _mm512_set1_ps(r));
            mx = bm;
        }
        __m512 w = _mm512_maskz_mov_ps(live, exp512(_mm512_sub_ps(sc, _mm512_set1_ps(mx))));
        sum += _mm512_reduce_add_ps(w);
        float wj[16];
        _mm512_storeu_ps(wj, w);
        for (int64_t j = 0; j < np; j++) {
            const char *v = (const char *)V + (size_t)(p0 + j) * row;
            __m512 b = _mm512_set1_ps(wj[j]);
            #pragma GCC unroll 16
            for (int c = 0; c < NC; c++)
                acc[c] = _mm512_fmadd_ps(b, kv16(F, v + 16 * elt * c), acc[c]);
        }
    }
    __m512 inv = _mm512_set1_ps(1.0f / sum);
    #pragma GCC unroll 16
    for (int c = 0; c < NC; c++)
        _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(acc[c], inv));
}

#define HEAD(F, NC)                                                                                           \
    static void head_##F##_##NC(float *out, const float *q, const void *K, const void *V, int64_t stride,     \
                                int64_t n_pos, float scale)                                                   \
    {                                                                                                         \
        head(F, NC, out, q, K, V, stride, n_pos, scale);                                                      \
    }
#define HEADS(F) HEAD(F, 1) HEAD(F, 2) HEAD(F, 3) HEAD(F, 4) HEAD(F, 5) HEAD(F, 6) HEAD(F, 7) HEAD(F, 8)
HEADS(0)
HEADS(1)

typedef void (*head_fn)(float *, const float *, const void *, const void *, int64_t, int64_t, float);
static const head_fn by_nc[2][9] = {
    {NULL, head_0_1, head_0_2, head_0_3, head_0_4, head_0_5, head_0_6, head_0_7, head_0_8},
    {NULL, head_1_1, head_1_2, head_1_3, head_1_4, head_1_5, head_1_6, head_1_7, head_1_8},
};

/* F: the cache is f16. hd / 16 = 1..8 takes the own path, any other hd the generic body. */
static void dispatch(int F, float *out, const float *q, const void *K, const void *V, int64_t stride, int64_t n_pos,
                     int64_t hd, float scale)
{
    if (hd % 16 == 0 && hd / 16 >= 1 && hd / 16 <= 8)
        by_nc[F][hd / 16](out, q, K, V, stride, n_pos, scale);
    else if (F)
        attn_any_f16(out, q, K, V, stride, n_pos, hd, scale);
    else
        attn_any(out, q, K, V, stride, n_pos, hd, scale);
}

void hearth_attn_head_avx512(float *out, const float *q, const void *K, const void *V, int64_t stride,
                            int64_t n_pos, int64_t hd, float scale)
{
    dispatch(0, out, q, K, V, stride, n_pos, hd, scale);
}

void hearth_attn_head_avx512_f16(float *out, const float *q, const void *K, const void *V, int64_t stride,
                                int64_t n_pos, int64_t hd, float scale)
{
    dispatch(1, out, q, K, V, stride, n_pos, hd, scale);
}

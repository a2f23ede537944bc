/* unpack_x86.h: weight rows to what the GEMM panels are built from, written
 * once with AVX2 intrinsics for matmul_avx2.c and matmul_avx512.c (each
 * compiled for its ISA; AVX-512 files have AVX2 too).
 *
 *   unpack_<type>(src, n, q, scale, bias): n elements (a multiple of the
 *     block) to int8 q[n] and per-group floats, element i of group g =
 *     q[i] * scale[g] - bias[g]. Groups are 32 elements, 16 for Q6_K
 *     (its sub-blocks); bias is 0 except for Q4_K's mins.
 *   to_f32_<type>(src, dst, n): n elements to f32 (F16, BF16 and, through
 *     unpack, the quantized types).
 *   pack_panel_<f32|f16|bf16>(rows, n_rows, kc, panel): the f32 GEMM
 *     panels (matmul_impl.h's hearth_pack_fn), panel p element [k][j] =
 *     rows[p * PANEL_NR + j][k] widened, zero past n_rows, by 8 x 8
 *     transposes; f16/bf16 are widened on the way, straight from W, so they
 *     skip the f32 row buffer the quantized types go through;
 *     kc <= HEARTH_GEMM_KC.
 *
 * Define PANEL_NR (the ISA's nr_max, a multiple of 8) before including to
 * get pack_panel.
 * Rejected: gathers for the transpose (Zen 4's are about a cycle per
 * element; the shuffles cost under half of that). */
#ifndef HEARTH_ENGINE_CPU_UNPACK_X86_H
#define HEARTH_ENGINE_CPU_UNPACK_X86_H

#include "engine/cpu/quant.h"

#include <immintrin.h>

static inline float unpack_h2f(uint16_t h)
{
    return _cvtsh_ss(h);
}

static inline void unpack_q8_0(const void *src, int64_t n, int8_t *q, float *scale, float *bias)
{
    const hearth_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / 32; i++) {
        _mm256_storeu_si256((__m256i *)(q + 32 * i), _mm256_loadu_si256((const __m256i *)b[i].qs));
        scale[i] = unpack_h2f(b[i].d);
        bias[i] = 0;
    }
}

static inline void unpack_q4_0(const void *src, int64_t n, int8_t *q, float *scale, float *bias)
{
    const hearth_block_q4_0 *b = src;
    const __m128i m4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < n / 32; i++) {
        __m128i raw = _mm_loadu_si128((const __m128i *)b[i].qs);
        __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);
        __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight);
        _mm_storeu_si128((__m128i *)(q + 32 * i), lo);
        _mm_storeu_si128((__m128i *)(q + 32 * i + 16), hi);
        scale[i] = unpack_h2f(b[i].d);
        bias[i] = 0;
    }
}

static inline void unpack_q4_k(const void *src, int64_t n, int8_t *q, float *scale, float *bias)
{
    const hearth_block_q4_k *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t i = 0; i < n / 256; i++, q += 256, scale += 8, bias += 8) {
        float d = unpack_h2f(b[i].d), dmin = unpack_h2f(b[i].dmin);
        for (int j = 0; j < 8; j++) {
            int sc, m;
            hearth_q4k_scale_min(b[i].scales, j, &sc, &m);
            scale[j] = d * (float)sc;
            bias[j] = dmin * (float)m;
        }
        for (int c = 0; c < 4; c++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(b[i].qs + 32 * c));
            _mm256_storeu_si256((__m256i *)(q + 64 * c), _mm256_and_si256(raw, m4));
            _mm256_storeu_si256((__m256i *)(q + 64 * c + 32), _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4));
        }
    }
}

static inline void unpack_q6_k(const void *src, int64_t n, int8_t *q, float *scale, float *bias)
{
    const hearth_block_q6_k *b = src;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03), k32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / 256; i++, q += 256, scale += 16, bias += 16) {
        float d = unpack_h2f(b[i].d);
        for (int j = 0; j < 16; j++) {
            scale[j] = d * (float)b[i].scales[j];
            bias[j] = 0;
        }
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(b[i].ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(b[i].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b[i].qh + 32 * h));
            __m256i v[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4)),
                _mm256_or_si256(_mm256_and_si256(l1, m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4)),
            };
            for (int c = 0; c < 4; c++)
                _mm256_storeu_si256((__m256i *)(q + 128 * h + 32 * c), _mm256_sub_epi8(v[c], k32));
        }
    }
}

/* Through unpack in pieces of 256 elements (a K-quant block, 8 small blocks). */
static inline void unpacked_to_f32(void (*unpack)(const void *, int64_t, int8_t *, float *, float *),
                                   const char *src, size_t bytes_per_256, int group, float *dst, int64_t n)
{
    int8_t q[256];
    float scale[16], bias[16];
    for (int64_t i = 0; i < n; i += 256) {
        int64_t len = n - i < 256 ? n - i : 256;
        unpack(src + (size_t)(i / 256) * bytes_per_256, len, q, scale, bias);
        for (int64_t k = 0; k < len; k += 8) {
            __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + k))));
            __m256 s = _mm256_set1_ps(scale[k / group]), b = _mm256_set1_ps(bias[k / group]);
            _mm256_storeu_ps(dst + i + k, _mm256_fmsub_ps(v, s, b));
        }
    }
}

static inline void to_f32_q8_0(const void *src, float *dst, int64_t n)
{
    unpacked_to_f32(unpack_q8_0, src, 8 * sizeof(hearth_block_q8_0), 32, dst, n);
}
static inline void to_f32_q4_0(const void *src, float *dst, int64_t n)
{
    unpacked_to_f32(unpack_q4_0, src, 8 * sizeof(hearth_block_q4_0), 32, dst, n);
}
static inline void to_f32_q4_k(const void *src, float *dst, int64_t n)
{
    unpacked_to_f32(unpack_q4_k, src, sizeof(hearth_block_q4_k), 32, dst, n);
}
static inline void to_f32_q6_k(const void *src, float *dst, int64_t n)
{
    unpacked_to_f32(unpack_q6_k, src, sizeof(hearth_block_q6_k), 16, dst, n);
}

static inline void to_f32_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++)
        dst[i] = unpack_h2f(s[i]);
}

static inline void to_f32_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *s = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i))), 16));
    for (; i < n; i++)
        dst[i] = hearth_bf16_to_f32(s[i]);
}

static inline void transpose8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

#ifdef PANEL_NR
/* Software prefetch: each group of 8 rows is 8 short streams (kc elements
 * each) that the hardware prefetchers did not pick up in time; the loads
 * waited on L3 or memory and the packing took a fifth of the F16 GEMM's
 * time. So while a group is transposed, the next group's rows are fetched
 * at the same offsets, one group's time ahead. */

/* The panels from n_rows rows of element type T, 8 rows x 8 k at a time:
 * load8(row, k) gives 8 floats, load1 one. Missing rows read a zero row, so
 * the 8 loads carry no conditions and stay in registers. kc need not be a
 * multiple of 8 (f32 weights with odd K): the last columns go one at a time. */
#define PACK_PANEL(name, T, load8, load1) PACK_PANEL_TO(name, T, load8, load1, float, pack_store_f32, pack_f32_1)
#define PACK_PANEL_TO(name, T, load8, load1, OUT, store8, out1)                                     \
    static inline void name(const void *const *rows_v, int n_rows, int64_t kc, OUT *panel)         \
    {                                                                                              \
        static const T zeros[HEARTH_GEMM_KC];                                                      \
        const T *const *rows = (const T *const *)rows_v;                                           \
        const int64_t line = 64 / (int64_t)sizeof(T);                                              \
        const int n_pad = (n_rows + PANEL_NR - 1) / PANEL_NR * PANEL_NR;                           \
        for (int g = 0; g < n_pad; g += 8) {                                                       \
            OUT *out = panel + (int64_t)(g / PANEL_NR) * kc * PANEL_NR + g % PANEL_NR;             \
            const T *src[8], *next[8];                                                             \
            for (int j = 0; j < 8; j++) {                                                          \
                src[j] = g + j < n_rows ? rows[g + j] : zeros;                                     \
                next[j] = g + 8 + j < n_rows ? rows[g + 8 + j] : zeros;                            \
            }                                                                                      \
            if (g == 0)                                                                            \
                for (int j = 0; j < 8; j++)                                                        \
                    for (int64_t k = 0; k < kc; k += line)                                         \
                        _mm_prefetch((const char *)(src[j] + k), _MM_HINT_T0);                     \
            int64_t k = 0;                                                                         \
            for (; k + 8 <= kc; k += 8) {                                                          \
                if (k % line == 0)                                                                 \
                    for (int j = 0; j < 8; j++)                                                    \
                        _mm_prefetch((const char *)(next[j] + k), _MM_HINT_T0);                    \
                __m256 r[8];                                                                       \
                _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) r[j] = load8(src[j] + k);      \
                transpose8(r);                                                                     \
                _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)                                \
                    store8(out + (k + i) * PANEL_NR, r[i]);                                        \
            }                                                                                      \
            for (; k < kc; k++)                                                                    \
                for (int j = 0; j < 8; j++)                                                        \
                    out[k * PANEL_NR + j] = out1(load1(src[j][k]));                                \
        }                                                                                          \
    }

static inline __m256 pack_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 pack_load_bf16(const uint16_t *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
static inline float pack_f32_1(float v)
{
    return v;
}
static inline void pack_store_f32(float *p, __m256 v)
{
    _mm256_store_ps(p, v);
}
static inline void pack_store_f16(uint16_t *p, __m256 v)
{
    _mm_store_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static inline uint16_t unpack_f2h(float v)
{
    return _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
}
PACK_PANEL(pack_panel_f32, float, _mm256_loadu_ps, pack_f32_1)
PACK_PANEL(pack_panel_f16, uint16_t, pack_load_f16, unpack_h2f)
PACK_PANEL(pack_panel_bf16, uint16_t, pack_load_bf16, hearth_bf16_to_f32)
/* f16 panels of f16 rows (prepacking): widened for the f32 transpose and
 * narrowed back, which is exact for values that came from f16. */
PACK_PANEL_TO(pack_panel_f16_f16, uint16_t, pack_load_f16, unpack_h2f, uint16_t, pack_store_f16, unpack_f2h)
#endif

#endif

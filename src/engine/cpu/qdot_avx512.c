/* qdot_avx512.c: decode (row dot) kernels for Q4_0, Q4_K and Q6_K with
 * 512-bit VNNI; compiled with AVX-512 flags, called only after hearth_hw()
 * reports them.
 *
 * The shared 256-bit kernels (qdot_x86.h) spend most of their time per 32
 * elements on scalar scale arithmetic and the sign trick, so these formats
 * were compute-bound at about half the memory bandwidth. Here X comes in a
 * planar form made once per call (hearth_qv: int8 values, the q8a block
 * scales d, and d * sum(q) per 16 elements), and:
 *   - the weights' unsigned values (nibbles; Q6_K's 6-bit q before its - 32)
 *     are vpdpbusd's unsigned operand, X the signed one, 64 elements per
 *     instruction; the offsets (- 8, - 32) and Q4_K's mins are taken out
 *     once per block through the per-16 sums of X, in float;
 *   - the per-sub-block factors d_w * scale * d_x are made as one vector per
 *     super-block and spread to the int32 lanes with vpermps;
 *   - Q4_K's packed 6-bit scales are decoded with 32-bit masks, no branches.
 * Integer sums equal the oracle's; float rounding differs (the mins use
 * two-part sums of X).
 *
 * Rejected: permuting X per weight type so every X load is one zmm (Q4_K
 * needs two ymm loads per zmm here; a per-type X layout would tie the X
 * format to the weight type for one load per 64 elements). Q8_0 keeps the
 * shared kernel: it already reads at the memory bandwidth. */
#include "engine/cpu/matmul_impl.h"

#include <immintrin.h>
#include <string.h>

void hearth_qv_row_avx512(const float *x, hearth_qv *qv, int64_t m)
{
    int64_t nb = qv->K / 32;
    int8_t *q = qv->q + m * qv->K;
    float *d = qv->d + m * nb, *s16 = qv->s16 + m * 2 * nb;
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int64_t b = 0; b < nb; b++) {
        __m512 a0 = _mm512_loadu_ps(x + 32 * b), a1 = _mm512_loadu_ps(x + 32 * b + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a0), _mm512_abs_ps(a1)));
        /* the same float operations as hearth_quant_q8a_row, so the same values */
        float db = amax / 127, id = db > 0 ? 127 / amax : 0;
        __m512 vid = _mm512_set1_ps(id);
        __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(a0, vid)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(a1, vid));
        q0 = _mm512_min_epi32(_mm512_max_epi32(q0, lo), hi);
        q1 = _mm512_min_epi32(_mm512_max_epi32(q1, lo), hi);
        _mm_storeu_si128((__m128i *)(q + 32 * b), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
        d[b] = db;
        s16[2 * b] = db * (float)_mm512_reduce_add_epi32(q0);
        s16[2 * b + 1] = db * (float)_mm512_reduce_add_epi32(q1);
    }
}

static inline __m512i dot64(__m512i w_u8, const int8_t *x)
{
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_u8, _mm512_loadu_si512(x));
}

/* 32 + 32 X values from two places, as one zmm. */
static inline __m512i load_x2(const int8_t *a, const int8_t *b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

float hearth_qv_dot_q4_0_avx512(const void *w, const int8_t *x, const float *d, const float *s16, int64_t n)
{
    const hearth_block_q4_0 *b = w;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m512 acc = _mm512_setzero_ps();
    float offs = 0; /* sum over blocks of d_w * d_x * sum(q_x): the - 8 of each weight */
    int64_t nb = n / 32, i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i raw = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)b[i + 1].qs),
                                       _mm_loadu_si128((const __m128i *)b[i].qs));
        __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        /* [lo_i, lo_i+1, hi_i, hi_i+1] -> [lo_i, hi_i, lo_i+1, hi_i+1]: element order */
        __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
        float w0 = _cvtsh_ss(b[i].d), w1 = _cvtsh_ss(b[i + 1].d);
        __m512 f = _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(w0 * d[i]), _mm512_set1_ps(w1 * d[i + 1]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot64(z, x + 32 * i)), f, acc);
        offs += w0 * (s16[2 * i] + s16[2 * i + 1]) + w1 * (s16[2 * i + 2] + s16[2 * i + 3]);
    }
    float sum = _mm512_reduce_add_ps(acc);
    for (; i < nb; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += (b[i].qs[j] & 15) * x[32 * i + j] + (b[i].qs[j] >> 4) * x[32 * i + 16 + j];
        float w0 = _cvtsh_ss(b[i].d);
        sum += w0 * d[i] * (float)isum;
        offs += w0 * (s16[2 * i] + s16[2 * i + 1]);
    }
    return sum - 8 * offs;
}

/* The 8 scales and 8 mins of a Q4_K block as bytes (see hearth_q4k_scale_min). */
static inline void q4k_scales(const uint8_t *s, uint64_t *sc, uint64_t *mn)
{
    uint32_t a, b, c;
    memcpy(&a, s, 4);
    memcpy(&b, s + 4, 4);
    memcpy(&c, s + 8, 4);
    uint32_t sc_hi = (c & 0x0f0f0f0f) | (((a >> 6) & 0x03030303) << 4);
    uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0f) | (((b >> 6) & 0x03030303) << 4);
    *sc = (uint64_t)(a & 0x3f3f3f3f) | (uint64_t)sc_hi << 32;
    *mn = (uint64_t)(b & 0x3f3f3f3f) | (uint64_t)mn_hi << 32;
}

static inline __m256 bytes8_to_ps(uint64_t v)
{
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)v)));
}

/* Sums of adjacent pairs of 16 floats: 8 floats in order. */
static inline __m256 pair_sums(const float *p)
{
    __m256 h = _mm256_hadd_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(h), _MM_SHUFFLE(3, 1, 2, 0)));
}

static inline __m512i lanes8(int a, int b)
{
    return _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
}

/* Sub-block j (32 elements) gets d sc_j d_x,j; low nibbles of qs[0..63] are
 * sub-blocks 0 and 2, high nibbles 1 and 3; qs[64..127] likewise 4-7.
 * R rows of W (1 or 2) against the same X: with two, each X load, its
 * per-32 scales and sums serve both rows, and the reductions at the end
 * overlap (a row of K = 768 is only 3 blocks, so they are not negligible). */
static inline __attribute__((always_inline)) void q4_k_rows(const int R, const hearth_block_q4_k *const *w,
                                                             const int8_t *x, const float *d, const float *s16,
                                                             int64_t n, float *out)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i i02 = lanes8(0, 2), i13 = lanes8(1, 3), i46 = lanes8(4, 6), i57 = lanes8(5, 7);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 mins[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / 256; i++, x += 256, d += 8, s16 += 16) {
        __m256 dx = _mm256_loadu_ps(d), sx = pair_sums(s16);
        __m512i x0 = load_x2(x, x + 64), x1 = load_x2(x + 32, x + 96);
        __m512i x2 = load_x2(x + 128, x + 192), x3 = load_x2(x + 160, x + 224);
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) {
            const hearth_block_q4_k *b = w[r] + i;
            uint64_t scb, mnb;
            q4k_scales(b->scales, &scb, &mnb);
            __m256 s8 = _mm256_mul_ps(_mm256_mul_ps(bytes8_to_ps(scb), dx), _mm256_set1_ps(_cvtsh_ss(b->d)));
            mins[r] = _mm256_fmadd_ps(_mm256_mul_ps(bytes8_to_ps(mnb), _mm256_set1_ps(_cvtsh_ss(b->dmin))), sx,
                                      mins[r]);
            __m512 s = _mm512_castps256_ps512(s8);
            __m512i z0 = _mm512_loadu_si512(b->qs), z1 = _mm512_loadu_si512(b->qs + 64);
            __m512i lo0 = _mm512_and_si512(z0, m4), hi0 = _mm512_and_si512(_mm512_srli_epi16(z0, 4), m4);
            __m512i lo1 = _mm512_and_si512(z1, m4), hi1 = _mm512_and_si512(_mm512_srli_epi16(z1, 4), m4);
            __m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo0, x0);
            __m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi0, x1);
            __m512i p2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo1, x2);
            __m512i p3 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi1, x3);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), _mm512_permutexvar_ps(i02, s), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), _mm512_permutexvar_ps(i13, s), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p2), _mm512_permutexvar_ps(i46, s), acc[r]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p3), _mm512_permutexvar_ps(i57, s), acc[r]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++) {
        __m128 m = _mm_add_ps(_mm256_castps256_ps128(mins[r]), _mm256_extractf128_ps(mins[r], 1));
        m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        out[r] = _mm512_reduce_add_ps(acc[r]) - _mm_cvtss_f32(m);
    }
}

float hearth_qv_dot_q4_k_avx512(const void *w, const int8_t *x, const float *d, const float *s16, int64_t n)
{
    const hearth_block_q4_k *rows[1] = {w};
    float out;
    q4_k_rows(1, rows, x, d, s16, n, &out);
    return out;
}

void hearth_qv_dot2_q4_k_avx512(const void *w0, const void *w1, const int8_t *x, const float *d, const float *s16,
                                int64_t n, float out[2])
{
    const hearth_block_q4_k *rows[2] = {w0, w1};
    q4_k_rows(2, rows, x, d, s16, n, out);
}

/* Each half of 128 elements is two zmm of 64 consecutive elements: low
 * nibbles of ql[0..63] with qh bits 0-1 (first 32) and 2-3 (next 32), then
 * the high nibbles with bits 4-5 and 6-7. Lane l of zmm j is sub-block
 * 4j + l / 4. */
float hearth_qv_dot_q6_k_avx512(const void *w, const int8_t *x, const float *d, const float *s16, int64_t n)
{
    const hearth_block_q6_k *b = w;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03);
    const __m512i sh01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i dx_of_sb = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    __m512i sb_of_lane[4];
    for (int j = 0; j < 4; j++)
        sb_of_lane[j] = _mm512_setr_epi32(4 * j, 4 * j, 4 * j, 4 * j, 4 * j + 1, 4 * j + 1, 4 * j + 1, 4 * j + 1,
                                          4 * j + 2, 4 * j + 2, 4 * j + 2, 4 * j + 2, 4 * j + 3, 4 * j + 3,
                                          4 * j + 3, 4 * j + 3);
    __m512 acc = _mm512_setzero_ps(), offs = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++, x += 256, d += 8, s16 += 16) {
        __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b[i].scales)));
        __m512 dx = _mm512_permutexvar_ps(dx_of_sb, _mm512_castps256_ps512(_mm256_loadu_ps(d)));
        __m512 dsc = _mm512_mul_ps(sc, _mm512_set1_ps(_cvtsh_ss(b[i].d))), p = _mm512_mul_ps(dsc, dx);
        offs = _mm512_fmadd_ps(dsc, _mm512_loadu_ps(s16), offs); /* s16 carries d_x already */
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512(b[i].ql + 64 * h);
            __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b[i].qh + 32 * h)));
            __m512i v0 = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m2), 4));
            __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m2), 4));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot64(v0, x + 128 * h)),
                                  _mm512_permutexvar_ps(sb_of_lane[2 * h], p), acc);
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot64(v1, x + 128 * h + 64)),
                                  _mm512_permutexvar_ps(sb_of_lane[2 * h + 1], p), acc);
        }
    }
    return _mm512_reduce_add_ps(acc) - 32 * _mm512_reduce_add_ps(offs);
}

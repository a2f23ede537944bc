/* qdot_x86.h: the quantized dot products for x86, written once for AVX2 and
 * AVX-512 VNNI. Included only by matmul_avx2.c and matmul_avx512.c, each
 * compiled for its ISA, after defining
 *
 *   QDOT(ax, sx)  8 int32 lanes; lane i = sum of the 4 products u8 ax * s8 sx
 *                 over bytes 4i .. 4i+3 (vpdpbusd, or vpmaddubsw + vpmaddwd)
 *
 * Signed weights times signed activations use the sign trick (|w| times x
 * with w's sign), so every integer sum equals the scalar oracle's exactly;
 * only the float scaling and summation order differ. vpmaddubsw saturates
 * at 16 bits: its pair sums here are at most 2 * 128 * 127 = 32512. */
#ifndef HEARTH_ENGINE_CPU_QDOT_X86_H
#define HEARTH_ENGINE_CPU_QDOT_X86_H

#include "engine/cpu/quant.h"

#include <immintrin.h>

static inline __m256i qdot_signed(__m256i w, __m256i x)
{
    return QDOT(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

static inline float qdot_hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256i qdot_load(const void *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

static float qdot_q8_0(const void *w, const void *x, int64_t n)
{
    const hearth_block_q8_0 *b = w;
    const hearth_block_q8a *a = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / 32, i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256 p0 = _mm256_cvtepi32_ps(qdot_signed(qdot_load(b[i].qs), qdot_load(a[i].qs)));
        __m256 p1 = _mm256_cvtepi32_ps(qdot_signed(qdot_load(b[i + 1].qs), qdot_load(a[i + 1].qs)));
        acc0 = _mm256_fmadd_ps(p0, _mm256_set1_ps(_cvtsh_ss(b[i].d) * a[i].d), acc0);
        acc1 = _mm256_fmadd_ps(p1, _mm256_set1_ps(_cvtsh_ss(b[i + 1].d) * a[i + 1].d), acc1);
    }
    for (; i < nb; i++) {
        __m256 p = _mm256_cvtepi32_ps(qdot_signed(qdot_load(b[i].qs), qdot_load(a[i].qs)));
        acc0 = _mm256_fmadd_ps(p, _mm256_set1_ps(_cvtsh_ss(b[i].d) * a[i].d), acc0);
    }
    return qdot_hsum(_mm256_add_ps(acc0, acc1));
}

static inline __m256i q4_0_unpack(const uint8_t *qs)
{
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m128i lo = _mm_and_si128(raw, m4), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m4);
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

static float qdot_q4_0(const void *w, const void *x, int64_t n)
{
    const hearth_block_q4_0 *b = w;
    const hearth_block_q8a *a = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / 32, i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256 p0 = _mm256_cvtepi32_ps(qdot_signed(q4_0_unpack(b[i].qs), qdot_load(a[i].qs)));
        __m256 p1 = _mm256_cvtepi32_ps(qdot_signed(q4_0_unpack(b[i + 1].qs), qdot_load(a[i + 1].qs)));
        acc0 = _mm256_fmadd_ps(p0, _mm256_set1_ps(_cvtsh_ss(b[i].d) * a[i].d), acc0);
        acc1 = _mm256_fmadd_ps(p1, _mm256_set1_ps(_cvtsh_ss(b[i + 1].d) * a[i + 1].d), acc1);
    }
    for (; i < nb; i++) {
        __m256 p = _mm256_cvtepi32_ps(qdot_signed(q4_0_unpack(b[i].qs), qdot_load(a[i].qs)));
        acc0 = _mm256_fmadd_ps(p, _mm256_set1_ps(_cvtsh_ss(b[i].d) * a[i].d), acc0);
    }
    return qdot_hsum(_mm256_add_ps(acc0, acc1));
}

/* Sub-block j of 32 matches q8a block j: d sc_j xd_j sum(q xq) - dmin m_j s_j.
 * Nibbles are unsigned (0..15), so they go straight into the u8 operand. */
static float qdot_q4_k(const void *w, const void *x, int64_t n)
{
    const hearth_block_q4_k *b = w;
    const hearth_block_q8a *a = x;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < n / 256; i++, a += 8) {
        float d = _cvtsh_ss(b[i].d), dmin = _cvtsh_ss(b[i].dmin);
        int sc[8], m[8];
        for (int j = 0; j < 8; j++) {
            hearth_q4k_scale_min(b[i].scales, j, &sc[j], &m[j]);
            mins += dmin * (float)m[j] * a[j].s;
        }
        for (int c = 0; c < 4; c++) {
            __m256i raw = qdot_load(b[i].qs + 32 * c);
            __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
            __m256 p0 = _mm256_cvtepi32_ps(QDOT(lo, qdot_load(a[2 * c].qs)));
            __m256 p1 = _mm256_cvtepi32_ps(QDOT(hi, qdot_load(a[2 * c + 1].qs)));
            acc0 = _mm256_fmadd_ps(p0, _mm256_set1_ps(d * (float)sc[2 * c] * a[2 * c].d), acc0);
            acc1 = _mm256_fmadd_ps(p1, _mm256_set1_ps(d * (float)sc[2 * c + 1] * a[2 * c + 1].d), acc1);
        }
    }
    return qdot_hsum(_mm256_add_ps(acc0, acc1)) - mins;
}

/* 32 six-bit values minus 32: low 4 bits from ql (>> lshift), high 2 bits
 * from qh (>> hshift). */
static inline __m256i q6_k_unpack(__m256i ql, int lshift, __m256i qh, int hshift)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    __m256i lo = _mm256_and_si256(_mm256_srli_epi16(ql, lshift), m4);
    __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, hshift), m2), 4);
    return _mm256_sub_epi8(_mm256_or_si256(lo, hi), _mm256_set1_epi8(32));
}

/* 32 elements at q8a block a: two sub-blocks of 16 (int32 lanes 0-3 and
 * 4-7) with scales s0, s1. */
static inline __m256 q6_k_term(__m256i q, const hearth_block_q8a *a, float d, int s0, int s1, __m256 acc)
{
    __m256 p = _mm256_cvtepi32_ps(qdot_signed(q, qdot_load(a->qs)));
    float f = d * a->d;
    __m256 scale = _mm256_set_m128(_mm_set1_ps(f * (float)s1), _mm_set1_ps(f * (float)s0));
    return _mm256_fmadd_ps(p, scale, acc);
}

static float qdot_q6_k(const void *w, const void *x, int64_t n)
{
    const hearth_block_q6_k *b = w;
    const hearth_block_q8a *a = x;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        float d = _cvtsh_ss(b[i].d);
        for (int h = 0; h < 2; h++) {
            const int8_t *sc = b[i].scales + 8 * h;
            const hearth_block_q8a *ah = a + 8 * i + 4 * h;
            __m256i l0 = qdot_load(b[i].ql + 64 * h), l1 = qdot_load(b[i].ql + 64 * h + 32);
            __m256i qh = qdot_load(b[i].qh + 32 * h);
            acc0 = q6_k_term(q6_k_unpack(l0, 0, qh, 0), &ah[0], d, sc[0], sc[1], acc0);
            acc1 = q6_k_term(q6_k_unpack(l1, 0, qh, 2), &ah[1], d, sc[2], sc[3], acc1);
            acc0 = q6_k_term(q6_k_unpack(l0, 4, qh, 4), &ah[2], d, sc[4], sc[5], acc0);
            acc1 = q6_k_term(q6_k_unpack(l1, 4, qh, 6), &ah[3], d, sc[6], sc[7], acc1);
        }
    }
    return qdot_hsum(_mm256_add_ps(acc0, acc1));
}

#endif

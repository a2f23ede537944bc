/* rowdot_multi_avx512.c: multi-row row dots (rowdot_multi.h) with AVX-512
 * VNNI; compiled with AVX-512 flags, called only after hearth_hw() reports
 * them.
 *
 * One W row against R = 1..8 X rows, R fixed per instantiated function so
 * the 2 R accumulators (even / odd chunks, to cover the FMA latency at small
 * R) stay in zmm registers.
 *
 * Quantized types, per 256 elements of W (a K-quant super-block, or 8
 * Q8_0 / Q4_0 blocks), made ONCE and shared by all R rows:
 *   wu[4]  64 unsigned weight values each, for vpdpbusd's unsigned operand
 *          (Q8_0: w + 128 by flipping the sign bit; Q4_0 and Q4_K: the
 *          nibbles; Q6_K: the 6-bit value before its - 32), in the "group
 *          order" of rowdot_multi.h: int32 lane l of every wu[c] holds 4
 *          elements of the 16-element group l, so one lane meets one scale;
 *   ws     the weight scale of each group (d, d * sc);
 *   off    per group, what the unsigned form adds per unit of X's
 *          d * sum(q) (128 d, 8 d, Q4_K's dmin * m, 32 d * sc).
 * Then per X row and 256 elements: four vpdpbusd into ONE int32
 * accumulator (X in the same group order, signed), one int32 -> f32, one
 * multiply of ws by X's group scales, one FMA, and one FNMADD of off with
 * X's per-group sums: 8 vector operations per row where element order
 * (lane l of chunk c in block 2c + l / 8, so a conversion and a scaling per
 * chunk) needed 17. The piece pays 8 permutes for the group order, once for
 * all rows; measured on the Zen 4, 2 threads, 4 rows of Q8_0 decode: see
 * rowdot_multi.c. Integer sums equal the oracle's; float rounding differs.
 *
 * F32 / F16 / BF16: each 16 weights widened once, one FMA per X row.
 *
 * Rejected: the sign trick for Q8_0 (vpsignb on every X row: the + 128 form
 * costs one XOR per W vector instead, and its offset comes free with the
 * others); per-row scale broadcasts from scalars (the single-row kernels'
 * cost that grows with M). */
#include "engine/cpu/rowdot_multi.h"

#include "engine/cpu/quant.h"

#include <immintrin.h>
#include <string.h>

#define AI static inline __attribute__((always_inline))
/* Software prefetch of W this far ahead, into L2. Without it the X loads
 * (L1 hits, R per W vector) fill the load queue behind each W miss and cap
 * the W rows in flight: measured on the Zen 4, one core, f16 at M = 2, 10
 * GB/s without, ~18 with (the same as M = 1); T0 or a shorter distance
 * (1-4 KiB) helped less. */
#define PF_BYTES 8192

AI void prefetch_w(const char *p, int bytes)
{
#pragma GCC unroll 8
    for (int o = 0; o < bytes; o += 64)
        _mm_prefetch(p + PF_BYTES + o, _MM_HINT_T1);
}

/* 256 int8 values in element order (z[c]: elements 64c .. 64c + 63) into
 * group order: int32 lane l of z[c] = elements 16l + 4c .. 16l + 4c + 3.
 * Old dword 16k + j moves to chunk j % 4, lane 4k + j / 4: two rounds of
 * two-source permutes, then 128-bit lane shuffles. */
AI void group_order(__m512i z[4])
{
    /* lane t: chunk c = t / 8 (+ 2 for the second index), group l = t % 8 of
     * the pair's 8 groups, from source dword (l / 4) * 16 + 4 (l % 4) + c */
    const __m512i ia = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i ib = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    __m512i a01 = _mm512_permutex2var_epi32(z[0], ia, z[1]), b01 = _mm512_permutex2var_epi32(z[0], ib, z[1]);
    __m512i a23 = _mm512_permutex2var_epi32(z[2], ia, z[3]), b23 = _mm512_permutex2var_epi32(z[2], ib, z[3]);
    z[0] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(1, 0, 1, 0));
    z[1] = _mm512_shuffle_i64x2(a01, a23, _MM_SHUFFLE(3, 2, 3, 2));
    z[2] = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(1, 0, 1, 0));
    z[3] = _mm512_shuffle_i64x2(b01, b23, _MM_SHUFFLE(3, 2, 3, 2));
}

/* Lane l of 16 (a group of 16 elements) -> its 32-element block l / 2. */
AI __m512i pairs16(void)
{
    return _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
}

/* Same float operations as hearth_quant_q8a_row, so the same values; each
 * 256-element piece then into group order. */
static void mx_row(const float *x, hearth_mx *mx, int64_t m)
{
    const int64_t M = mx->M, K = mx->K;
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int64_t p = 0; p < mx->Kp / 256; p++) {
        _Alignas(64) int8_t q[256];
        float d[16] = {0}, *s16 = mx->s16 + (p * M + m) * 16;
        for (int b = 0; b < 8; b++) {
            int64_t k = 256 * p + 32 * b;
            if (k >= K) {
                memset(q + 32 * b, 0, 32);
                s16[2 * b] = s16[2 * b + 1] = 0;
                continue;
            }
            __m512 a0 = _mm512_loadu_ps(x + k), a1 = _mm512_loadu_ps(x + k + 16);
            float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a0), _mm512_abs_ps(a1)));
            float db = amax / 127, id = db > 0 ? 127 / amax : 0;
            __m512 vid = _mm512_set1_ps(id);
            __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(a0, vid)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(a1, vid));
            q0 = _mm512_min_epi32(_mm512_max_epi32(q0, lo), hi);
            q1 = _mm512_min_epi32(_mm512_max_epi32(q1, lo), hi);
            _mm_store_si128((__m128i *)(q + 32 * b), _mm512_cvtepi32_epi8(q0));
            _mm_store_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
            d[b] = db;
            s16[2 * b] = db * (float)_mm512_reduce_add_epi32(q0);
            s16[2 * b + 1] = db * (float)_mm512_reduce_add_epi32(q1);
        }
        __m512i z[4];
        for (int c = 0; c < 4; c++)
            z[c] = _mm512_load_si512(q + 64 * c);
        group_order(z);
        int8_t *dst = mx->q + (p * M + m) * 256;
        for (int c = 0; c < 4; c++)
            _mm512_store_si512(dst + 64 * c, z[c]);
        _mm512_store_ps(mx->dxl + (p * M + m) * 16, _mm512_permutexvar_ps(pairs16(), _mm512_loadu_ps(d)));
    }
}

/* What one 256-element piece of a W row gives every X row (see the top). */
typedef struct wpiece {
    __m512i wu[4];
    __m512 ws, off;
} wpiece;

/* The fp16 scales of nb (<= 8) blocks of stride `bytes` to floats, 0 past nb. */
AI __m256 scales8(const char *b, size_t bytes, int nb)
{
    uint16_t h[8];
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++)
        h[j] = 0;
#pragma GCC unroll 8
    for (int j = 0; j < nb; j++)
        memcpy(&h[j], b + (size_t)j * bytes, 2);
    return _mm256_cvtph_ps(_mm_setr_epi16((short)h[0], (short)h[1], (short)h[2], (short)h[3], (short)h[4],
                                          (short)h[5], (short)h[6], (short)h[7]));
}

AI void piece_q8_0(const hearth_block_q8_0 *b, int nb, wpiece *p)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    __m512 dw = _mm512_castps256_ps512(scales8((const char *)b, sizeof *b, nb));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m256i lo = 2 * c < nb ? _mm256_loadu_si256((const __m256i *)b[2 * c].qs) : _mm256_setzero_si256();
        __m256i hi = 2 * c + 1 < nb ? _mm256_loadu_si256((const __m256i *)b[2 * c + 1].qs) : _mm256_setzero_si256();
        p->wu[c] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
    }
    group_order(p->wu);
    p->ws = _mm512_permutexvar_ps(pairs16(), dw);
    p->off = _mm512_mul_ps(p->ws, _mm512_set1_ps(128));
}

AI void piece_q4_0(const hearth_block_q4_0 *b, int nb, wpiece *p)
{
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m512 dw = _mm512_castps256_ps512(scales8((const char *)b, sizeof *b, nb));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m128i r0 = 2 * c < nb ? _mm_loadu_si128((const __m128i *)b[2 * c].qs) : _mm_setzero_si128();
        __m128i r1 = 2 * c + 1 < nb ? _mm_loadu_si128((const __m128i *)b[2 * c + 1].qs) : _mm_setzero_si128();
        __m256i raw = _mm256_set_m128i(r1, r0);
        __m256i lo = _mm256_and_si256(raw, m4), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
        /* [lo0, lo1, hi0, hi1] -> [lo0, hi0, lo1, hi1]: element order */
        __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        p->wu[c] = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
    }
    group_order(p->wu);
    p->ws = _mm512_permutexvar_ps(pairs16(), dw);
    p->off = _mm512_mul_ps(p->ws, _mm512_set1_ps(8));
}

/* The 8 scales and 8 mins of a Q4_K block as bytes (hearth_q4k_scale_min
 * with 32-bit masks, no branches). */
AI void q4k_scales(const uint8_t *s, uint64_t *sc, uint64_t *mn)
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

AI __m512 bytes8_to_ps(uint64_t v)
{
    return _mm512_castps256_ps512(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)v))));
}

/* Elements 64c .. 64c + 63 are the low then the high nibbles of qs[32c ..
 * 32c + 31]: one 32-byte load into both halves, the upper shifted by 4. */
AI void piece_q4_k(const hearth_block_q4_k *b, wpiece *p)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i sh = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    uint64_t scb, mnb;
    q4k_scales(b->scales, &scb, &mnb);
    __m512 sc = _mm512_mul_ps(bytes8_to_ps(scb), _mm512_set1_ps(_cvtsh_ss(b->d)));
    __m512 mn = _mm512_mul_ps(bytes8_to_ps(mnb), _mm512_set1_ps(_cvtsh_ss(b->dmin)));
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qs + 32 * c)));
        p->wu[c] = _mm512_and_si512(_mm512_srlv_epi16(raw, sh), m4);
    }
    group_order(p->wu);
    p->ws = _mm512_permutexvar_ps(pairs16(), sc);
    p->off = _mm512_permutexvar_ps(pairs16(), mn);
}

/* Each half of 128 elements is two zmm of 64 in order: the low nibbles of
 * ql[0..63] with qh bits 0-1 (first 32) and 2-3 (next 32), then the high
 * nibbles with bits 4-5 and 6-7. Lane l of chunk c is sub-block 4c + l / 4. */
AI void piece_q6_k(const hearth_block_q6_k *b, wpiece *p)
{
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03);
    const __m512i sh01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    __m512 sc = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b->scales))),
                              _mm512_set1_ps(_cvtsh_ss(b->d)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        __m512i ql = _mm512_loadu_si512(b->ql + 64 * h);
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(b->qh + 32 * h)));
        p->wu[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                       _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m2), 4));
        p->wu[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                           _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m2), 4));
    }
    group_order(p->wu);
    p->ws = sc;
    p->off = _mm512_mul_ps(sc, _mm512_set1_ps(32));
}

/* One piece against R rows: q, dxl, s16 at row m0 of the piece; rows 256,
 * 16, 16 values apart. acc0 takes the products, acc1 the offsets: two
 * independent chains per row. */
AI void rows_piece(const int R, const wpiece *p, const int8_t *q, const float *dxl, const float *s16,
                   __m512 *acc0, __m512 *acc1)
{
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        const int8_t *x = q + r * 256;
        __m512i i = _mm512_dpbusd_epi32(_mm512_setzero_si512(), p->wu[0], _mm512_load_si512(x));
        i = _mm512_dpbusd_epi32(i, p->wu[1], _mm512_load_si512(x + 64));
        i = _mm512_dpbusd_epi32(i, p->wu[2], _mm512_load_si512(x + 128));
        i = _mm512_dpbusd_epi32(i, p->wu[3], _mm512_load_si512(x + 192));
        __m512 s = _mm512_mul_ps(p->ws, _mm512_load_ps(dxl + r * 16));
        acc0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), s, acc0[r]);
        acc1[r] = _mm512_fnmadd_ps(p->off, _mm512_load_ps(s16 + r * 16), acc1[r]);
    }
}

AI void store_rows(const int R, const __m512 *acc0, const __m512 *acc1, float *y, int64_t ldy)
{
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        y[r * ldy] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r], acc1[r]));
}

AI void mdot_quant(const int R, const hearth_dtype t, const void *w, const hearth_mx *mx, int64_t m0, float *y,
                   int64_t ldy)
{
    const int64_t M = mx->M, n_pieces = mx->Kp / 256, nb = mx->K / 32;
    __m512 acc0[HEARTH_MDOT_ROWS], acc1[HEARTH_MDOT_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        acc0[r] = acc1[r] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n_pieces; i++) {
        const int8_t *q = mx->q + (i * M + m0) * 256;
        const float *dxl = mx->dxl + (i * M + m0) * 16, *s16 = mx->s16 + (i * M + m0) * 16;
        wpiece p;
        int64_t left = nb - 8 * i;
        size_t piece_bytes = t == HEARTH_Q8_0   ? 8 * sizeof(hearth_block_q8_0)
                             : t == HEARTH_Q4_0 ? 8 * sizeof(hearth_block_q4_0)
                             : t == HEARTH_Q4_K ? sizeof(hearth_block_q4_k)
                                                : sizeof(hearth_block_q6_k);
        prefetch_w((const char *)w + (size_t)i * piece_bytes, (int)piece_bytes);
        switch (t) {
        case HEARTH_Q8_0:
            if (left >= 8)
                piece_q8_0((const hearth_block_q8_0 *)w + 8 * i, 8, &p);
            else
                piece_q8_0((const hearth_block_q8_0 *)w + 8 * i, (int)left, &p);
            break;
        case HEARTH_Q4_0:
            if (left >= 8)
                piece_q4_0((const hearth_block_q4_0 *)w + 8 * i, 8, &p);
            else
                piece_q4_0((const hearth_block_q4_0 *)w + 8 * i, (int)left, &p);
            break;
        case HEARTH_Q4_K: piece_q4_k((const hearth_block_q4_k *)w + i, &p); break;
        default: piece_q6_k((const hearth_block_q6_k *)w + i, &p); break;
        }
        rows_piece(R, &p, q, dxl, s16, acc0, acc1);
    }
    store_rows(R, acc0, acc1, y, ldy);
}

/* 16 weights from element i of a row of type t, 0 past n. */
AI __m512 load_w(const hearth_dtype t, const void *w, int64_t i, __mmask16 k)
{
    if (t == HEARTH_F32)
        return _mm512_maskz_loadu_ps(k, (const float *)w + i);
    __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)w + i);
    if (t == HEARTH_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

AI void mdot_float(const int R, const hearth_dtype t, const void *w, const hearth_mx *mx, int64_t m0, float *y,
                   int64_t ldy)
{
    const int64_t M = mx->M, K = mx->K;
    const float *x = mx->xf + m0 * 16;
    __m512 acc0[HEARTH_MDOT_ROWS], acc1[HEARTH_MDOT_ROWS];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        acc0[r] = acc1[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= K; i += 32, x += 32 * M) {
        prefetch_w((const char *)w + i * (t == HEARTH_F32 ? 4 : 2), t == HEARTH_F32 ? 128 : 64);
        __m512 w0 = load_w(t, w, i, 0xffff), w1 = load_w(t, w, i + 16, 0xffff);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            acc0[r] = _mm512_fmadd_ps(w0, _mm512_load_ps(x + r * 16), acc0[r]);
            acc1[r] = _mm512_fmadd_ps(w1, _mm512_load_ps(x + (M + r) * 16), acc1[r]);
        }
    }
    for (; i < K; i += 16, x += 16 * M) {
        /* X is zero past K, W is masked so nothing is read past the row */
        __mmask16 k = K - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (K - i)) - 1);
        __m512 w0 = load_w(t, w, i, k);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            acc0[r] = _mm512_fmadd_ps(w0, _mm512_load_ps(x + r * 16), acc0[r]);
    }
    store_rows(R, acc0, acc1, y, ldy);
}

#define MDOT_R(R, name, kind, T)                                                                   \
    static void name##_##R(const void *w, const hearth_mx *mx, int64_t m0, float *y, int64_t ldy) \
    {                                                                                              \
        kind(R, T, w, mx, m0, y, ldy);                                                             \
    }
#define MDOT(name, kind, T)                                                                        \
    MDOT_R(1, name, kind, T) MDOT_R(2, name, kind, T) MDOT_R(3, name, kind, T)                     \
    MDOT_R(4, name, kind, T) MDOT_R(5, name, kind, T) MDOT_R(6, name, kind, T)                     \
    MDOT_R(7, name, kind, T) MDOT_R(8, name, kind, T)
#define ROWS_OF(name) {NULL, name##_1, name##_2, name##_3, name##_4, name##_5, name##_6, name##_7, name##_8}

MDOT(mdot_f32, mdot_float, HEARTH_F32)
MDOT(mdot_f16, mdot_float, HEARTH_F16)
MDOT(mdot_bf16, mdot_float, HEARTH_BF16)
MDOT(mdot_q8_0, mdot_quant, HEARTH_Q8_0)
MDOT(mdot_q4_0, mdot_quant, HEARTH_Q4_0)
MDOT(mdot_q4_k, mdot_quant, HEARTH_Q4_K)
MDOT(mdot_q6_k, mdot_quant, HEARTH_Q6_K)

const hearth_mdot_kernels hearth_mdot_kernels_avx512 = {
    .dot = {
        [HEARTH_F32] = ROWS_OF(mdot_f32),
        [HEARTH_F16] = ROWS_OF(mdot_f16),
        [HEARTH_BF16] = ROWS_OF(mdot_bf16),
        [HEARTH_Q8_0] = ROWS_OF(mdot_q8_0),
        [HEARTH_Q4_0] = ROWS_OF(mdot_q4_0),
        [HEARTH_Q4_K] = ROWS_OF(mdot_q4_k),
        [HEARTH_Q6_K] = ROWS_OF(mdot_q6_k),
    },
    .q_row = mx_row,
};

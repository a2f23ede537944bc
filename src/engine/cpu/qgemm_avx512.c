/* qgemm_avx512.c: the integer GEMM for the quantized types (prefill), with
 * AVX-512 VNNI; compiled with those flags, called only after hearth_hw()
 * reports them.
 *
 * X is quantized once per call to q8a (the decode path's format), stored as
 * unsigned bytes q + 128. W rows are unpacked, one K slice of 256 at a time,
 * into int8 values with a float scale (and for Q4_K a float min) per group
 * of 32 (16 for Q6_K), and interleaved into panels of 32 rows: 4 consecutive
 * k of 16 rows make one zmm, so one vpdpbusd against 4 broadcast bytes of an
 * X row does 64 multiply-adds for 16 rows at once. The tile is 4 X rows by
 * 32 W rows: 8 int32 accumulators, restarted every group and folded into 8
 * float accumulators with scale_w * d_x. The + 128 of X is undone by
 * starting each group's int32 sum at -128 * sum(w), computed at packing.
 *
 * Every integer sum per group equals the scalar oracle's; results differ
 * from it only by float rounding (the X quantization is the same as row
 * dots'). Per W element the packing costs well under a cycle (unpack, one
 * gather per 16 dwords); the tile does 128 multiply-adds per W element at
 * M = 128.
 *
 * Rejected: the sign trick of the decode kernels (vpsignb has no 512-bit
 * form); dequantizing W to an f32 panel (the f32 FMA rate is a quarter of
 * vpdpbusd's, and it was measured slower on every quantized type). Not
 * tried: 6-row tiles (30 of 32 zmm registers; spills likely). */
#include "engine/cpu/matmul_impl.h"
#include "engine/cpu/scratch.h"

#include "base/err.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/unpack_x86.h"

#define QKC 256 /* K slice: a multiple of every block */
#define QNR 32  /* W rows per panel */
#define QMR 4   /* X rows per tile */
#define MAX_GROUPS (QKC / 16)
/* one panel: q [QKC / 4][QNR][4], then corr, scale, bias [MAX_GROUPS][QNR] */
#define PANEL_Q_BYTES (QKC * QNR)
#define PANEL_BYTES (PANEL_Q_BYTES + 3 * MAX_GROUPS * QNR * 4)

typedef void (*unpack_fn)(const void *src, int64_t n, int8_t *q, float *scale, float *bias);

typedef struct qtype {
    unpack_fn unpack;
    int64_t block;
    size_t block_bytes;
    int group; /* elements per scale */
} qtype;

void hearth_qx_row_avx512(const float *x, hearth_qx *qx, int64_t m)
{
    int64_t nb = qx->K / 32;
    uint8_t *u = qx->u + m * qx->K;
    float *d = qx->d + m * nb, *s = qx->s + m * nb;
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    for (int64_t b = 0; b < nb; b++) {
        __m512 a0 = _mm512_loadu_ps(x + 32 * b), a1 = _mm512_loadu_ps(x + 32 * b + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a0), _mm512_abs_ps(a1)));
        /* the same float operations as hearth_quant_q8a_row, so the same bytes */
        float db = amax / 127, id = db > 0 ? 127 / amax : 0;
        __m512 vid = _mm512_set1_ps(id);
        __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(a0, vid)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(a1, vid));
        q0 = _mm512_min_epi32(_mm512_max_epi32(q0, lo), hi);
        q1 = _mm512_min_epi32(_mm512_max_epi32(q1, lo), hi);
        int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        const __m128i bias = _mm_set1_epi8((char)0x80);
        _mm_storeu_si128((__m128i *)(u + 32 * b), _mm_xor_si128(_mm512_cvtepi32_epi8(q0), bias));
        _mm_storeu_si128((__m128i *)(u + 32 * b + 16), _mm_xor_si128(_mm512_cvtepi32_epi8(q1), bias));
        d[b] = db;
        s[b] = db * (float)sum;
    }
}

/* W rows [r0, r0 + n_rows) (n_rows <= QNR), K slice [k0, k0 + kc), into one
 * panel. tmp: QNR * QKC bytes of int8 and 2 * QNR * MAX_GROUPS floats. */
static void pack(const qtype *t, const char *W, size_t rb, int64_t r0, int n_rows, int64_t k0, int64_t kc,
                 uint8_t *panel, int8_t *tq, float *ts, float *tb)
{
    int ng = (int)(kc / t->group);
    size_t off = (size_t)(k0 / t->block) * t->block_bytes;
    for (int r = 0; r < QNR; r++) {
        if (r < n_rows) {
            t->unpack(W + (size_t)(r0 + r) * rb + off, kc, tq + r * QKC, ts + r * MAX_GROUPS, tb + r * MAX_GROUPS);
        } else {
            memset(tq + r * QKC, 0, (size_t)kc);
            memset(ts + r * MAX_GROUPS, 0, sizeof(float) * (size_t)ng);
            memset(tb + r * MAX_GROUPS, 0, sizeof(float) * (size_t)ng);
        }
    }
    int32_t *corr = (int32_t *)(panel + PANEL_Q_BYTES);
    float *scale = (float *)(corr + MAX_GROUPS * QNR), *bias = scale + MAX_GROUPS * QNR;
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(QKC / 4));
    const __m512i ones = _mm512_set1_epi8(1);
    for (int g = 0; g < ng; g++) {
        for (int h = 0; h < 2; h++) {
            __m512i sum = _mm512_setzero_si512();
            for (int kk = g * t->group / 4; kk < (g + 1) * t->group / 4; kk++) {
                __m512i v = _mm512_i32gather_epi32(idx, tq + 16 * h * QKC + 4 * kk, 4);
                _mm512_store_si512(panel + kk * QNR * 4 + h * 64, v);
                sum = _mm512_dpbusd_epi32(sum, ones, v);
            }
            _mm512_store_si512(corr + g * QNR + 16 * h, _mm512_sub_epi32(_mm512_setzero_si512(),
                                                                          _mm512_slli_epi32(sum, 7)));
        }
        for (int r = 0; r < QNR; r++) {
            scale[g * QNR + r] = ts[r * MAX_GROUPS + g];
            bias[g * QNR + r] = tb[r * MAX_GROUPS + g];
        }
    }
}

static inline __mmask16 mask16(int left)
{
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
}

static inline int32_t load32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Y[0..R)[0..nr) (+)= X rows . panel over kc, for a compile-time R, group
 * size G and whether the weights carry a min (BIAS). */
static inline __attribute__((always_inline)) void tile(const int R, const int G, const int BIAS, const uint8_t *xu,
                                                       const float *xd, const float *xs, int64_t K,
                                                       const uint8_t *panel, int64_t kc, float *y, int64_t ldy,
                                                       int nr, int acc)
{
    const int32_t *corr = (const int32_t *)(panel + PANEL_Q_BYTES);
    const float *scale = (const float *)(corr + MAX_GROUPS * QNR), *bias = scale + MAX_GROUPS * QNR;
    const int64_t nbk = K / 32;
    __m512 f0[QMR], f1[QMR];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
        f0[r] = f1[r] = _mm512_setzero_ps();
    for (int64_t g = 0; g < kc / G; g++) {
        __m512i c0 = _mm512_load_si512(corr + g * QNR), c1 = _mm512_load_si512(corr + g * QNR + 16);
        __m512i i0[QMR], i1[QMR];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            i0[r] = c0, i1[r] = c1;
        const uint8_t *q = panel + g * G * QNR;
#pragma GCC unroll 8
        for (int kk = 0; kk < G / 4; kk++) {
            __m512i w0 = _mm512_load_si512(q + kk * QNR * 4), w1 = _mm512_load_si512(q + kk * QNR * 4 + 64);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m512i xb = _mm512_set1_epi32(load32(xu + r * K + g * G + 4 * kk));
                i0[r] = _mm512_dpbusd_epi32(i0[r], xb, w0);
                i1[r] = _mm512_dpbusd_epi32(i1[r], xb, w1);
            }
        }
        __m512 s0 = _mm512_load_ps(scale + g * QNR), s1 = _mm512_load_ps(scale + g * QNR + 16);
        int64_t xb_i = g * G / 32;
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            __m512 dx = _mm512_set1_ps(xd[r * nbk + xb_i]);
            f0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[r]), _mm512_mul_ps(s0, dx), f0[r]);
            f1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[r]), _mm512_mul_ps(s1, dx), f1[r]);
        }
        if (BIAS) {
            __m512 b0 = _mm512_load_ps(bias + g * QNR), b1 = _mm512_load_ps(bias + g * QNR + 16);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m512 sx = _mm512_set1_ps(xs[r * nbk + xb_i]);
                f0[r] = _mm512_fnmadd_ps(b0, sx, f0[r]);
                f1[r] = _mm512_fnmadd_ps(b1, sx, f1[r]);
            }
        }
    }
    __mmask16 m0 = mask16(nr), m1 = mask16(nr - 16);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float *yr = y + r * ldy;
        if (acc) {
            f0[r] = _mm512_add_ps(f0[r], _mm512_maskz_loadu_ps(m0, yr));
            f1[r] = _mm512_add_ps(f1[r], _mm512_maskz_loadu_ps(m1, yr + 16));
        }
        _mm512_mask_storeu_ps(yr, m0, f0[r]);
        _mm512_mask_storeu_ps(yr + 16, m1, f1[r]);
    }
}

typedef void (*tile_fn)(const uint8_t *xu, const float *xd, const float *xs, int64_t K, const uint8_t *panel,
                        int64_t kc, float *y, int64_t ldy, int nr, int acc);

#define TILE(R, G, BIAS)                                                                                     \
    static void tile_##R##_##G##_##BIAS(const uint8_t *xu, const float *xd, const float *xs, int64_t K,      \
                                        const uint8_t *panel, int64_t kc, float *y, int64_t ldy, int nr,     \
                                        int acc)                                                             \
    {                                                                                                        \
        tile(R, G, BIAS, xu, xd, xs, K, panel, kc, y, ldy, nr, acc);                                         \
    }
#define TILES(G, BIAS) TILE(1, G, BIAS) TILE(2, G, BIAS) TILE(3, G, BIAS) TILE(4, G, BIAS)
TILES(32, 0)
TILES(32, 1)
TILES(16, 0)

static const tile_fn TILES_32_0[QMR + 1] = {NULL, tile_1_32_0, tile_2_32_0, tile_3_32_0, tile_4_32_0};
static const tile_fn TILES_32_1[QMR + 1] = {NULL, tile_1_32_1, tile_2_32_1, tile_3_32_1, tile_4_32_1};
static const tile_fn TILES_16_0[QMR + 1] = {NULL, tile_1_16_0, tile_2_16_0, tile_3_16_0, tile_4_16_0};

static int qgemm(const qtype *t, const tile_fn *tiles, const char *W, size_t rb, int64_t n0, int64_t n1,
                 const hearth_qx *qx, float *Y, int64_t ldy)
{
    int64_t n_panels = (n1 - n0 + QNR - 1) / QNR, K = qx->K;
    /* PANEL_BYTES and QNR * QKC are multiples of 64: every piece stays aligned */
    size_t pbytes = (size_t)n_panels * PANEL_BYTES;
    uint8_t *panels = hearth_cpu_scratch(HEARTH_SCRATCH_TASK, pbytes + QNR * QKC + 2 * QNR * MAX_GROUPS * sizeof(float));
    if (!panels)
        return HEARTH_ENOMEM;
    int8_t *tq = (int8_t *)panels + pbytes;
    float *ts = (float *)(tq + QNR * QKC);
    for (int64_t k0 = 0; k0 < K; k0 += QKC) {
        int64_t kc = K - k0 < QKC ? K - k0 : QKC;
        for (int64_t p = 0; p < n_panels; p++) {
            int64_t r0 = n0 + p * QNR;
            int n_rows = n1 - r0 < QNR ? (int)(n1 - r0) : QNR;
            pack(t, W, rb, r0, n_rows, k0, kc, panels + p * PANEL_BYTES, tq, ts, ts + QNR * MAX_GROUPS);
        }
        for (int64_t m0 = 0; m0 < qx->M; m0 += QMR) {
            int rows = qx->M - m0 < QMR ? (int)(qx->M - m0) : QMR;
            const uint8_t *xu = qx->u + m0 * K + k0;
            const float *xd = qx->d + m0 * (K / 32) + k0 / 32, *xs = qx->s + m0 * (K / 32) + k0 / 32;
            for (int64_t p = 0; p < n_panels; p++) {
                int64_t nc = n0 + p * QNR;
                int cols = n1 - nc < QNR ? (int)(n1 - nc) : QNR;
                tiles[rows](xu, xd, xs, K, panels + p * PANEL_BYTES, kc, Y + m0 * ldy + nc, ldy, cols, k0 > 0);
            }
        }
    }
    return 0;
}

#define QGEMM(name, unpack, block, bytes, group, tiles)                                                      \
    int name(const void *W, size_t rb, int64_t n0, int64_t n1, const hearth_qx *qx, float *Y, int64_t ldy)   \
    {                                                                                                        \
        static const qtype t = {unpack, block, bytes, group};                                                \
        return qgemm(&t, tiles, W, rb, n0, n1, qx, Y, ldy);                                                  \
    }
QGEMM(hearth_qgemm_q8_0_avx512, unpack_q8_0, 32, sizeof(hearth_block_q8_0), 32, TILES_32_0)
QGEMM(hearth_qgemm_q4_0_avx512, unpack_q4_0, 32, sizeof(hearth_block_q4_0), 32, TILES_32_0)
QGEMM(hearth_qgemm_q4_k_avx512, unpack_q4_k, 256, sizeof(hearth_block_q4_k), 32, TILES_32_1)
QGEMM(hearth_qgemm_q6_k_avx512, unpack_q6_k, 256, sizeof(hearth_block_q6_k), 16, TILES_16_0)

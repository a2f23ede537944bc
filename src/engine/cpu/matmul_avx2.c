/* matmul_avx2.c: AVX2 + FMA + F16C kernels, compiled with those flags and
 * called only after hearth_hw() reports them.
 *
 * GEMM micro-tile: 6 X rows by 16 W rows (two ymm of W per k): 12 ymm
 * accumulators + 2 for W + 1 broadcast fill the 16 registers. AVX2 has no
 * store masks worth having, so partial tiles (nr < 16) go through a small
 * stack buffer. Quantized dot products are the shared x86 code with
 * vpmaddubsw + vpmaddwd standing in for vpdpbusd.
 *
 * Rejected: 4x24 tiles (three W vectors): the same register count with less
 * reuse of each broadcast. */
#include "engine/cpu/matmul_impl.h"

#include "base/clock.h"

#include <immintrin.h>

#define QDOT(ax, sx) _mm256_madd_epi16(_mm256_maddubs_epi16((ax), (sx)), _mm256_set1_epi16(1))
#include "engine/cpu/qdot_x86.h"
#define PANEL_NR 16
#include "engine/cpu/unpack_x86.h"

static float dot_f32(const void *wv, const void *xv, int64_t n)
{
    const float *w = wv, *x = xv;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
    float s = qdot_hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++)
        s += w[i] * x[i];
    return s;
}

static inline __m256 load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 load_bf16(const uint16_t *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

static float dot_f16(const void *wv, const void *xv, int64_t n)
{
    const uint16_t *w = wv;
    const float *x = xv;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load_f16(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load_f16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = qdot_hsum(_mm256_add_ps(a0, a1));
    for (; i < n; i++)
        s += _cvtsh_ss(w[i]) * x[i];
    return s;
}

static float dot_bf16(const void *wv, const void *xv, int64_t n)
{
    const uint16_t *w = wv;
    const float *x = xv;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(load_bf16(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = qdot_hsum(_mm256_add_ps(a0, a1));
    for (; i < n; i++)
        s += hearth_bf16_to_f32(w[i]) * x[i];
    return s;
}

/* Row k's 16 panel values, from f32 panels or (F16) f16 ones widened in
 * registers. */
static inline __attribute__((always_inline)) __m256 panel_row(const void *p, int64_t i, const int F16)
{
    if (F16)
        return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_load_ps((const float *)p + i);
}

/* The micro-tile for a compile-time row count R (1..6) and panel type. */
static inline __attribute__((always_inline)) void tile(const int R, const int F16, const float *x, int64_t ldx,
                                                       const void *p, int64_t kc, float *y, int64_t ldy, int nr,
                                                       int accumulate)
{
    __m256 c0[6], c1[6];
#pragma GCC unroll 6
    for (int r = 0; r < R; r++)
        c0[r] = c1[r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = panel_row(p, 16 * k, F16), b1 = panel_row(p, 16 * k + 8, F16);
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            __m256 a = _mm256_broadcast_ss(x + r * ldx + k);
            c0[r] = _mm256_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(a, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        float *yr = y + r * ldy;
        if (nr == 16) {
            if (accumulate) {
                c0[r] = _mm256_add_ps(c0[r], _mm256_loadu_ps(yr));
                c1[r] = _mm256_add_ps(c1[r], _mm256_loadu_ps(yr + 8));
            }
            _mm256_storeu_ps(yr, c0[r]);
            _mm256_storeu_ps(yr + 8, c1[r]);
        } else {
            float tmp[16];
            _mm256_storeu_ps(tmp, c0[r]);
            _mm256_storeu_ps(tmp + 8, c1[r]);
            for (int j = 0; j < nr; j++)
                yr[j] = accumulate ? yr[j] + tmp[j] : tmp[j];
        }
    }
}

#define TILE_R(R)                                                                                   \
    static void tile_##R(const float *x, int64_t ldx, const float *p, int64_t kc, float *y, int64_t ldy, \
                         int nr, int acc)                                                           \
    {                                                                                               \
        tile(R, 0, x, ldx, p, kc, y, ldy, nr, acc);                                                 \
    }                                                                                               \
    static void tile16_##R(const float *x, int64_t ldx, const uint16_t *p, int64_t kc, float *y,    \
                           int64_t ldy, int nr, int acc)                                            \
    {                                                                                               \
        tile(R, 1, x, ldx, p, kc, y, ldy, nr, acc);                                                 \
    }
TILE_R(1) TILE_R(2) TILE_R(3) TILE_R(4) TILE_R(5) TILE_R(6)

/* ahead (matmul.c, "Fetching ahead") is not taken here: it was measured on
 * the AVX-512 tile only. */
static void gemm_tile(const float *x, int64_t ldx, const float *p, int64_t kc, float *y, int64_t ldy, int mr, int nr,
                      int acc, hearth_gemm_ahead *ahead)
{
    (void)ahead;
    typedef void (*rows_fn)(const float *, int64_t, const float *, int64_t, float *, int64_t, int, int);
    static const rows_fn by_rows[7] = {NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile_6};
    by_rows[mr](x, ldx, p, kc, y, ldy, nr, acc);
}

static void gemm_tile_f16(const float *x, int64_t ldx, const uint16_t *p, int64_t kc, float *y, int64_t ldy, int mr,
                          int nr, int acc, hearth_gemm_ahead *ahead)
{
    (void)ahead;
    typedef void (*rows_fn)(const float *, int64_t, const uint16_t *, int64_t, float *, int64_t, int, int);
    static const rows_fn by_rows[7] = {NULL, tile16_1, tile16_2, tile16_3, tile16_4, tile16_5, tile16_6};
    by_rows[mr](x, ldx, p, kc, y, ldy, nr, acc);
}

const hearth_cpu_kernels hearth_cpu_kernels_avx2 = {
    .name = "avx2",
    .vec_dot = {
        [HEARTH_F32] = dot_f32,
        [HEARTH_F16] = dot_f16,
        [HEARTH_BF16] = dot_bf16,
        [HEARTH_Q8_0] = qdot_q8_0,
        [HEARTH_Q4_0] = qdot_q4_0,
        [HEARTH_Q4_K] = qdot_q4_k,
        [HEARTH_Q6_K] = qdot_q6_k,
    },
    .mr_max = 6,
    .nr_max = 16,
    .gemm_tile = gemm_tile,
    .gemm_tile_f16 = gemm_tile_f16,
    .pack_f16_f16 = pack_panel_f16_f16,
    .to_f32 = {
        [HEARTH_F16] = to_f32_f16,
        [HEARTH_BF16] = to_f32_bf16,
        [HEARTH_Q8_0] = to_f32_q8_0,
        [HEARTH_Q4_0] = to_f32_q4_0,
        [HEARTH_Q4_K] = to_f32_q4_k,
        [HEARTH_Q6_K] = to_f32_q6_k,
    },
    .pack_panel = pack_panel_f32,
    .pack_raw = {
        [HEARTH_F32] = pack_panel_f32,
        [HEARTH_F16] = pack_panel_f16,
        [HEARTH_BF16] = pack_panel_bf16,
    },
};

uint64_t hearth_peak_fma_avx2(uint64_t deadline_ns)
{
    __m256 c[12], a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        c[i] = _mm256_set1_ps((float)i);
    uint64_t flops = 0;
    do {
        for (int it = 0; it < 4096; it++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++)
                c[i] = _mm256_fmadd_ps(c[i], a, b);
        flops += 4096ull * 12 * 8 * 2;
    } while (hearth_now_ns() < deadline_ns);
    __m256 s = c[0];
    for (int i = 1; i < 12; i++)
        s = _mm256_add_ps(s, c[i]);
    return qdot_hsum(s) != 0 ? flops : 0;
}

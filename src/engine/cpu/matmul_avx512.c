/* matmul_avx512.c: AVX-512 kernels (F, BW, VL, DQ, VNNI), compiled with
 * those flags and called only after hearth_hw() reports them.
 *
 * GEMM micro-tile: 8 X rows by 32 W rows (two zmm of W per k), 16 zmm
 * accumulators, X elements broadcast straight from X's rows (no X packing:
 * the 8 rows x kc block is L1-resident and read sequentially). Edges in N are
 * masked loads/stores; edges in M use the same code instantiated for 1..8
 * rows, so nothing reads past X.
 *
 * Dot products: f32/f16/bf16 widen to fp32 and FMA on zmm (vcvtph2ps; bf16 is
 * a 16-bit shift, exact). The quantized types use the shared x86 code with
 * 256-bit vpdpbusd (AVX512_VNNI + VL): a 32-element block is one ymm, and
 * decode is limited by memory bandwidth, not by vector width.
 *
 * Rejected: vdpbf16ps for BF16 (it would round X to bf16 as well, doubling
 * the error for no gain in a memory-bound loop); 12x32 tiles (tried: no
 * measurable gain, the 8x32 tile alone runs at ~97% of the measured FMA
 * peak; what is left of the GEMM's time is the packing). */
#include "engine/cpu/matmul_impl.h"

#include "base/clock.h"

#include <immintrin.h>

#define QDOT(ax, sx) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (ax), (sx))
#include "engine/cpu/qdot_x86.h"
#define PANEL_NR 32
#include "engine/cpu/unpack_x86.h"

static inline __mmask16 tail_mask(int64_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

static float dot_f32(const void *wv, const void *xv, int64_t n)
{
    const float *w = wv, *x = xv;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(x + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 32), _mm512_loadu_ps(x + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w + i + 48), _mm512_loadu_ps(x + i + 48), a3);
    }
    for (; i < n; i += 16) {
        __mmask16 k = tail_mask(n - i);
        a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, w + i), _mm512_maskz_loadu_ps(k, x + i), a0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

static inline __m512 load_f16(const uint16_t *p, __mmask16 k)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
}

static inline __m512 load_bf16(const uint16_t *p, __mmask16 k)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
}

#define DOT_HALF(name, load)                                                                        \
    static float name(const void *wv, const void *xv, int64_t n)                                    \
    {                                                                                               \
        const uint16_t *w = wv;                                                                     \
        const float *x = xv;                                                                        \
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                                  \
        int64_t i = 0;                                                                              \
        for (; i + 32 <= n; i += 32) {                                                              \
            a0 = _mm512_fmadd_ps(load(w + i, 0xffff), _mm512_loadu_ps(x + i), a0);                  \
            a1 = _mm512_fmadd_ps(load(w + i + 16, 0xffff), _mm512_loadu_ps(x + i + 16), a1);        \
        }                                                                                           \
        for (; i < n; i += 16) {                                                                    \
            __mmask16 k = tail_mask(n - i);                                                         \
            a0 = _mm512_fmadd_ps(load(w + i, k), _mm512_maskz_loadu_ps(k, x + i), a0);              \
        }                                                                                           \
        return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));                                         \
    }
DOT_HALF(dot_f16, load_f16)
DOT_HALF(dot_bf16, load_bf16)

/* Row k's 32 panel values, from f32 panels or (F16) from f16 ones widened
 * in registers: vcvtph2ps issues beside the FMAs, so the f16 tile ran at the
 * f32 tile's speed on the Zen 5 (233 against 237 GFLOP/s on one core). */
static inline __attribute__((always_inline)) __m512 panel_row(const void *p, int64_t i, const int F16)
{
    if (F16)
        return _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)((const uint16_t *)p + i)));
    return _mm512_load_ps((const float *)p + i);
}

/* The micro-tile for a compile-time row count R (1..8), panel type and
 * whether it fetches ahead (PF): inlined into one function per triple, so
 * the accumulators stay in registers. PF takes up to kc lines of ahead, one
 * per k step, into L2 (matmul.c, "Fetching ahead"). The tiles without it
 * are the loop as it was: a test per step in the one loop cost 6% at 404
 * rows with 2 threads, where no tile fetches ahead (`hearth embed --bench`,
 * 6 interleaved rounds), and two loops in one function lost at 13 rows. */
static inline __attribute__((always_inline)) void tile(const int R, const int F16, const int PF, const float *x,
                                                       int64_t ldx, const void *p, int64_t kc, float *y,
                                                       int64_t ldy, int nr, int accumulate, hearth_gemm_ahead *ahead)
{
    __m512 c0[8], c1[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    const char *pf = NULL;
    int64_t n_pf = 0;
    if (PF) {
        pf = ahead->at;
        n_pf = ahead->lines < kc ? ahead->lines : kc;
        ahead->at += 64 * n_pf;
        ahead->lines -= n_pf;
    }
    for (int64_t k = 0; k < kc; k++) {
        if (PF && k < n_pf)
            _mm_prefetch(pf + 64 * k, _MM_HINT_T1);
        __m512 b0 = panel_row(p, 32 * k, F16), b1 = panel_row(p, 32 * k + 16, F16);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_set1_ps(x[r * ldx + k]);
            c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
            c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
        }
    }
    __mmask16 k0 = tail_mask(nr), k1 = tail_mask(nr - 16 > 0 ? nr - 16 : 0);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        float *yr = y + r * ldy;
        if (accumulate) {
            c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(k0, yr));
            c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(k1, yr + 16));
        }
        _mm512_mask_storeu_ps(yr, k0, c0[r]);
        _mm512_mask_storeu_ps(yr + 16, k1, c1[r]);
    }
}

#define TILE_R(R)                                                                                   \
    static void tile_##R(const float *x, int64_t ldx, const float *p, int64_t kc, float *y, int64_t ldy, \
                         int nr, int acc, hearth_gemm_ahead *ahead)                                 \
    {                                                                                               \
        tile(R, 0, 0, x, ldx, p, kc, y, ldy, nr, acc, ahead);                                       \
    }                                                                                               \
    static void tile_pf_##R(const float *x, int64_t ldx, const float *p, int64_t kc, float *y,      \
                            int64_t ldy, int nr, int acc, hearth_gemm_ahead *ahead)                 \
    {                                                                                               \
        tile(R, 0, 1, x, ldx, p, kc, y, ldy, nr, acc, ahead);                                       \
    }                                                                                               \
    static void tile16_##R(const float *x, int64_t ldx, const uint16_t *p, int64_t kc, float *y,    \
                           int64_t ldy, int nr, int acc, hearth_gemm_ahead *ahead)                  \
    {                                                                                               \
        tile(R, 1, 0, x, ldx, p, kc, y, ldy, nr, acc, ahead);                                       \
    }
TILE_R(1) TILE_R(2) TILE_R(3) TILE_R(4) TILE_R(5) TILE_R(6) TILE_R(7) TILE_R(8)

static void gemm_tile(const float *x, int64_t ldx, const float *p, int64_t kc, float *y, int64_t ldy, int mr, int nr,
                      int acc, hearth_gemm_ahead *ahead)
{
    typedef void (*rows_fn)(const float *, int64_t, const float *, int64_t, float *, int64_t, int, int,
                            hearth_gemm_ahead *);
    static const rows_fn by_rows[9] = {NULL, tile_1, tile_2, tile_3, tile_4,
                                                   tile_5, tile_6, tile_7, tile_8};
    static const rows_fn by_rows_pf[9] = {NULL,        tile_pf_1, tile_pf_2, tile_pf_3, tile_pf_4,
                                          tile_pf_5, tile_pf_6, tile_pf_7, tile_pf_8};
    (ahead && ahead->lines > 0 ? by_rows_pf : by_rows)[mr](x, ldx, p, kc, y, ldy, nr, acc, ahead);
}

/* f16 panels do not fetch ahead (matmul.c): ahead is left as it is */
static void gemm_tile_f16(const float *x, int64_t ldx, const uint16_t *p, int64_t kc, float *y, int64_t ldy, int mr,
                          int nr, int acc, hearth_gemm_ahead *ahead)
{
    typedef void (*rows_fn)(const float *, int64_t, const uint16_t *, int64_t, float *, int64_t, int, int,
                            hearth_gemm_ahead *);
    static const rows_fn by_rows[9] = {NULL,      tile16_1, tile16_2, tile16_3, tile16_4,
                                       tile16_5, tile16_6, tile16_7, tile16_8};
    by_rows[mr](x, ldx, p, kc, y, ldy, nr, acc, ahead);
}

const hearth_cpu_kernels hearth_cpu_kernels_avx512 = {
    .name = "avx512",
    .vec_dot = {
        [HEARTH_F32] = dot_f32,
        [HEARTH_F16] = dot_f16,
        [HEARTH_BF16] = dot_bf16,
        [HEARTH_Q8_0] = qdot_q8_0,
        [HEARTH_Q4_0] = qdot_q4_0,
        [HEARTH_Q4_K] = qdot_q4_k,
        [HEARTH_Q6_K] = qdot_q6_k,
    },
    .mr_max = 8,
    .nr_max = 32,
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
    .qgemm = {
        [HEARTH_Q8_0] = hearth_qgemm_q8_0_avx512,
        [HEARTH_Q4_0] = hearth_qgemm_q4_0_avx512,
        [HEARTH_Q4_K] = hearth_qgemm_q4_k_avx512,
        [HEARTH_Q6_K] = hearth_qgemm_q6_k_avx512,
    },
    .qx_row = hearth_qx_row_avx512,
    .qv_dot = {
        [HEARTH_Q4_0] = hearth_qv_dot_q4_0_avx512,
        [HEARTH_Q4_K] = hearth_qv_dot_q4_k_avx512,
        [HEARTH_Q6_K] = hearth_qv_dot_q6_k_avx512,
    },
    .qv_dot2 = {
        [HEARTH_Q4_K] = hearth_qv_dot2_q4_k_avx512,
    },
    .qv_row = hearth_qv_row_avx512,
};

/* 12 independent accumulators: enough to cover FMA latency x throughput. */
uint64_t hearth_peak_fma_avx512(uint64_t deadline_ns)
{
    __m512 c[12], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 12; i++)
        c[i] = _mm512_set1_ps((float)i);
    uint64_t flops = 0;
    do {
        for (int it = 0; it < 4096; it++)
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++)
                c[i] = _mm512_fmadd_ps(c[i], a, b);
        flops += 4096ull * 12 * 16 * 2;
    } while (hearth_now_ns() < deadline_ns);
    __m512 s = c[0];
    for (int i = 1; i < 12; i++)
        s = _mm512_add_ps(s, c[i]);
    /* keep the loop alive: the sum is never 0 */
    return _mm512_reduce_add_ps(s) != 0 ? flops : 0;
}

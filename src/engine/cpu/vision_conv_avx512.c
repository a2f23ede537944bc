/* vision_conv_avx512.c: the GEMM tile behind the CPU's 1x1 and im2col
 * convs (vision.c plans them): Y (cout_g, HWo) = act(W (cout_g, K) B (K,
 * HWo) + bias) for one group, over a range of tiles.
 *
 * How: a tile is VIS_MR (8) output channels x VIS_NR (32) pixels held in 16
 * zmm accumulators; per k, two loads of B's row (pixels are contiguous in
 * NCHW) and 8 broadcasts of the packed weight panel (K, MR), 16 FMAs. The
 * accumulators start at the bias and the activation is applied before the
 * one store, so the output is written once. Pixel tails are masked loads
 * and stores (nothing past a row is read); a tile of 16 pixels or fewer
 * runs the one-vector twin, so an 8x10 map (80 = 32 + 32 + 16) wastes no
 * FMA; channel tails read zero rows of the panel and skip their stores.
 * B is read in place with its row stride (no packing of the pixel panel):
 * a 32-pixel panel of K rows is reused from L1 by every channel block of the
 * tile range, which vision.c orders pixel block first.
 *
 * Rejected: vectorizing over output channels (needs NHWC, which the plan's
 * NCHW activations are not); a 6x64 tile (an 8x10 map's 80 pixels would
 * waste 3/8 of its FMAs, and 120x160's 19200 gain nothing measurable);
 * packing B per tile (one extra pass over B against c_out / 8 reuses, a
 * loss for the narrow 16 and 32 channel convs). */
#include "engine/cpu/vision_avx512.h"

#include <immintrin.h>

/* One tile: nv (1 or 2) vectors of pixels, constant at each call so the
 * compiler keeps the accumulators in registers. */
static inline __attribute__((always_inline)) void tile(int nv, const float *wp, int64_t K, const float *B,
                                                       int64_t ldb, __mmask16 m0, __mmask16 m1, float *Y,
                                                       int64_t ldy, int64_t mr, const float *bias,
                                                       const hearth_conv_desc *d)
{
    __m512 acc[VIS_MR][2];
#pragma GCC unroll 8
    for (int r = 0; r < VIS_MR; r++) {
        __m512 bv = _mm512_set1_ps(r < mr ? bias[r] : 0.0f);
        acc[r][0] = bv;
        acc[r][1] = bv;
    }
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb;
        __m512 b0 = _mm512_maskz_loadu_ps(m0, b);
        __m512 b1 = nv > 1 ? _mm512_maskz_loadu_ps(m1, b + 16) : b0;
        const float *w = wp + k * VIS_MR;
#pragma GCC unroll 8
        for (int r = 0; r < VIS_MR; r++) {
            __m512 wv = _mm512_set1_ps(w[r]);
            acc[r][0] = _mm512_fmadd_ps(wv, b0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = _mm512_fmadd_ps(wv, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < VIS_MR; r++) {
        if (r >= mr)
            break;
        _mm512_mask_storeu_ps(Y + r * ldy, m0, vis_act16(acc[r][0], d));
        if (nv > 1)
            _mm512_mask_storeu_ps(Y + r * ldy + 16, m1, vis_act16(acc[r][1], d));
    }
}

void hearth_vis_gemm_avx512(const hearth_conv *c, const float *panels, const float *B, int64_t ldb, float *Y,
                            int64_t ldy, int64_t npx, const float *bias, int64_t t0, int64_t t1)
{
    const int64_t K = c->K;
    for (int64_t t = t0; t < t1; t++) {
        vis_tile T = vis_tile_of(c, t, npx);
        const int64_t px0 = T.px0, co0 = T.co0, nc = T.nc, mr = T.mr;
        const float *wp = panels + T.cb * K * VIS_MR; /* (K, MR) */
        float *y = Y + co0 * ldy + px0;
        if (nc > 16)
            tile(2, wp, K, B + px0, ldb, 0xffff, vis_tail(nc - 16), y, ldy, mr, bias + co0, &c->d);
        else
            tile(1, wp, K, B + px0, ldb, vis_tail(nc), 0, y, ldy, mr, bias + co0, &c->d);
    }
}

/* The im2col rows [k0, k1) of group g, as hearth_vis_im2col; a row's
 * inside columns in vectors: stride 1 a copy, stride 2 two loads and the
 * even lanes (the scalar twin's strided loop was half of RFB-320's first
 * conv, K = 27 rows of 19,200 pixels); other strides go to the twin. */
void hearth_vis_im2col_avx512(const hearth_conv *c, const float *X, int64_t g, float *B, int64_t ldb, int64_t oy0,
                              int64_t oy1, int64_t k0, int64_t k1)
{
    const hearth_conv_desc *d = &c->d;
    if (d->stride_w > 2) {
        hearth_vis_im2col(c, X, g, B, ldb, oy0, oy1, k0, k1);
        return;
    }
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const int64_t khw = d->kh * d->kw, wo = d->w_out, sw = d->stride_w;
    for (int64_t k = k0; k < k1; k++) {
        int64_t ci = k / khw, ki = k % khw / d->kw, kj = k % d->kw;
        const float *x = X + (g * c->cin_g + ci) * d->h * d->w;
        float *b = B + k * ldb; /* output rows [oy0, oy1) */
        /* the output columns whose input column is inside: [lo, hi) */
        int64_t off = kj * d->dil_w - d->pad_l;
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
        int64_t hi = d->w - off <= 0 ? 0 : (d->w - off - 1) / sw + 1;
        hi = hi > wo ? wo : hi;
        lo = lo > hi ? hi : lo;
        for (int64_t oy = oy0; oy < oy1; oy++) {
            float *row = b + (oy - oy0) * wo;
            int64_t iy = oy * d->stride_h + ki * d->dil_h - d->pad_t;
            if (iy < 0 || iy >= d->h) {
                for (int64_t ox = 0; ox < wo; ox += 16)
                    _mm512_mask_storeu_ps(row + ox, vis_tail(wo - ox), _mm512_setzero_ps());
                continue;
            }
            const float *xr = x + iy * d->w + off; /* xr[ox * sw] for ox in [lo, hi) */
            for (int64_t ox = 0; ox < lo; ox++)
                row[ox] = 0;
            for (int64_t ox = lo; ox < hi; ox += 16) {
                int64_t n = hi - ox < 16 ? hi - ox : 16;
                __m512 v;
                if (sw == 1) {
                    v = _mm512_maskz_loadu_ps(vis_tail(n), xr + ox);
                } else {
                    int64_t cnt = 2 * n - 1; /* input columns spanned */
                    __m512 l = _mm512_maskz_loadu_ps(vis_tail(cnt), xr + 2 * ox);
                    __m512 h = _mm512_maskz_loadu_ps(vis_tail(cnt - 16), xr + 2 * ox + 16);
                    v = _mm512_permutex2var_ps(l, even, h);
                }
                _mm512_mask_storeu_ps(row + ox, vis_tail(n), v);
            }
            for (int64_t ox = hi; ox < wo; ox++)
                row[ox] = 0;
        }
    }
}

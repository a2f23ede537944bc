/* vision_dw_avx2.c: the CPU's depthwise conv (groups == c_in == c_out) in
 * AVX2, for strides 1 and 2 along W, any kernel, dilation and pads:
 * vision_dw_avx512.c's method on 8 floats.
 *
 * How: 8 output pixels of one row per vector, the accumulator starting at
 * the bias; every tap whose input row lies inside adds w * 8 input pixels:
 * stride 1 one load, stride 2 two loads and the even lanes. A vector whose
 * input columns reach into the left or right padding loads the inside lanes
 * only (vmaskmovps, zeros elsewhere), so nothing outside a row is read and
 * no padded copy is made; inside the row the loads are plain. The common
 * 3x3 pad-1 case keeps its nine weights in registers, and at stride 1 on
 * maps up to DW_PAIR_MAX_W wide computes two output rows per pass (their
 * four input rows loaded once), as on AVX-512.
 *
 * Rejected: as in vision_dw_avx512.c (a padded copy; im2col + GEMM). */
#include "engine/cpu/vision_avx2.h"

#include <immintrin.h>

#define DW_PAIR_MAX_W 48

/* Input columns ix0 .. ix0 + 2 n - 2 of row (stride 2), their even lanes:
 * the inputs of n outputs. */
static inline __m256 row8_s2(const float *row, int64_t ix0, int64_t W, int64_t n)
{
    int64_t cnt = 2 * n - 1;
    return vis_even8(vis_row8(row, ix0, W, cnt), vis_row8(row, ix0 + 8, W, cnt - 8));
}

/* One output row of the 3x3, dilation 1, pad_l 1 case: rows[i] is the input
 * row of tap row i, NULL in the padding. Stride 2 loads each input row once
 * per 8 outputs (split into even and odd columns; the left tap is the odd
 * vector moved up one lane, its first lane carried from the previous 8). */
static inline __attribute__((always_inline)) void dw3_row(const float *const rows[3], const __m256 wv[9],
                                                          __m256 bias, float *y, int64_t W, int64_t wo, int sw,
                                                          const hearth_conv_desc *d)
{
    const __m256i up1 = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
    __m256 oprev[3] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t x0 = 0; x0 < wo; x0 += 8) {
        int64_t n = wo - x0 < 8 ? wo - x0 : 8;
        __m256 acc = bias;
#pragma GCC unroll 3
        for (int i = 0; i < 3; i++) {
            const float *r = rows[i];
            if (!r)
                continue;
            if (sw == 1) {
                acc = _mm256_fmadd_ps(wv[3 * i + 0], vis_row8(r, x0 - 1, W, n), acc);
                acc = _mm256_fmadd_ps(wv[3 * i + 1], vis_row8(r, x0, W, n), acc);
                acc = _mm256_fmadd_ps(wv[3 * i + 2], vis_row8(r, x0 + 1, W, n), acc);
            } else {
                int64_t c0 = 2 * x0, cnt = 2 * n;
                __m256 lo = vis_row8(r, c0, W, cnt), hi = vis_row8(r, c0 + 8, W, cnt - 8);
                __m256 e = vis_even8(lo, hi), o = vis_odd8(lo, hi);
                __m256 left = _mm256_blend_ps(_mm256_permutevar8x32_ps(o, up1),
                                              _mm256_permutevar8x32_ps(oprev[i], up1), 0x01);
                oprev[i] = o;
                acc = _mm256_fmadd_ps(wv[3 * i + 0], left, acc);
                acc = _mm256_fmadd_ps(wv[3 * i + 1], e, acc);
                acc = _mm256_fmadd_ps(wv[3 * i + 2], o, acc);
            }
        }
        vis_store8(y + x0, vis_act8(acc, d), n);
    }
}

/* Two output rows of the 3x3 stride-1 case at once; rows[j] is input row
 * oy + j - pad_t, NULL in the padding. */
static inline __attribute__((always_inline)) void dw3_rows2(const float *const rows[4], const __m256 wv[9],
                                                            __m256 bias, float *y0, float *y1, int64_t W,
                                                            int64_t wo, const hearth_conv_desc *d)
{
    for (int64_t x0 = 0; x0 < wo; x0 += 8) {
        int64_t n = wo - x0 < 8 ? wo - x0 : 8;
        __m256 a0 = bias, a1 = bias;
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const float *r = rows[j];
            if (!r)
                continue;
            __m256 v0 = vis_row8(r, x0 - 1, W, n), v1 = vis_row8(r, x0, W, n), v2 = vis_row8(r, x0 + 1, W, n);
            if (j < 3) {
                a0 = _mm256_fmadd_ps(wv[3 * j + 0], v0, a0);
                a0 = _mm256_fmadd_ps(wv[3 * j + 1], v1, a0);
                a0 = _mm256_fmadd_ps(wv[3 * j + 2], v2, a0);
            }
            if (j > 0) {
                a1 = _mm256_fmadd_ps(wv[3 * j - 3], v0, a1);
                a1 = _mm256_fmadd_ps(wv[3 * j - 2], v1, a1);
                a1 = _mm256_fmadd_ps(wv[3 * j - 1], v2, a1);
            }
        }
        vis_store8(y0 + x0, vis_act8(a0, d), n);
        vis_store8(y1 + x0, vis_act8(a1, d), n);
    }
}

static void dw3(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1)
{
    const hearth_conv_desc *d = &c->d;
    const int64_t H = d->h, W = d->w, ho = d->h_out, wo = d->w_out;
    for (int64_t p = p0; p < p1; p++) {
        int64_t ch = p % d->c_out;
        const float *x = X + p * H * W;
        float *y = Y + p * ho * wo;
        __m256 wv[9];
        for (int k = 0; k < 9; k++)
            wv[k] = _mm256_set1_ps(c->w[ch * 9 + k]);
        __m256 bias = _mm256_set1_ps(c->bias[ch]);
        int64_t oy = 0;
        if (d->stride_h == 1 && d->stride_w == 1 && wo <= DW_PAIR_MAX_W)
            for (; oy + 2 <= ho; oy += 2) {
                const float *rows[4];
                for (int j = 0; j < 4; j++) {
                    int64_t iy = oy + j - d->pad_t;
                    rows[j] = iy >= 0 && iy < H ? x + iy * W : NULL;
                }
                dw3_rows2(rows, wv, bias, y + oy * wo, y + (oy + 1) * wo, W, wo, d);
            }
        for (; oy < ho; oy++) {
            const float *rows[3];
            for (int i = 0; i < 3; i++) {
                int64_t iy = oy * d->stride_h + i - d->pad_t;
                rows[i] = iy >= 0 && iy < H ? x + iy * W : NULL;
            }
            if (d->stride_w == 1)
                dw3_row(rows, wv, bias, y + oy * wo, W, wo, 1, d);
            else
                dw3_row(rows, wv, bias, y + oy * wo, W, wo, 2, d);
        }
    }
}

void hearth_vis_dw_avx2(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1)
{
    const hearth_conv_desc *d = &c->d;
    if (d->kh == 3 && d->kw == 3 && d->dil_h == 1 && d->dil_w == 1 && d->pad_l == 1) {
        dw3(c, X, Y, p0, p1);
        return;
    }
    const int64_t H = d->h, W = d->w, ho = d->h_out, wo = d->w_out, sw = d->stride_w, kw = d->kw;
    for (int64_t p = p0; p < p1; p++) {
        int64_t ch = p % d->c_out;
        const float *x = X + p * H * W;           /* (h, w) */
        float *y = Y + p * ho * wo;               /* (h_out, w_out) */
        const float *wk = c->w + ch * d->kh * kw; /* (kh, kw) */
        __m256 bias = _mm256_set1_ps(c->bias[ch]);
        for (int64_t oy = 0; oy < ho; oy++) {
            for (int64_t x0 = 0; x0 < wo; x0 += 8) {
                int64_t n = wo - x0 < 8 ? wo - x0 : 8;
                __m256 acc = bias;
                for (int64_t ki = 0; ki < d->kh; ki++) {
                    int64_t iy = oy * d->stride_h + ki * d->dil_h - d->pad_t;
                    if (iy < 0 || iy >= H)
                        continue;
                    const float *row = x + iy * W;
                    for (int64_t kj = 0; kj < kw; kj++) {
                        int64_t ix0 = x0 * sw + kj * d->dil_w - d->pad_l;
                        __m256 v = sw == 1 ? vis_row8(row, ix0, W, n) : row8_s2(row, ix0, W, n);
                        acc = _mm256_fmadd_ps(_mm256_set1_ps(wk[ki * kw + kj]), v, acc);
                    }
                }
                vis_store8(y + oy * wo + x0, vis_act8(acc, d), n);
            }
        }
    }
}

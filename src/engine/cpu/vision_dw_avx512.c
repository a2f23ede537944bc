/* vision_dw_avx512.c: the CPU's depthwise conv (groups == c_in == c_out)
 * in AVX-512, for strides 1 and 2 along W, any kernel, dilation and pads.
 *
 * How: 16 output pixels of one row per vector; the accumulator starts at the
 * bias, and every tap whose input row lies inside adds w * a vector of 16
 * input pixels: stride 1 one (masked) load, stride 2 two loads and the even
 * lanes picked by one permute. A tap whose 16 input columns reach into the
 * left or right padding gathers the inside lanes (zeros elsewhere), so
 * nothing outside a row is read and no padded copy of the input is made; it
 * happens only at the first and last vector of a row. Activation before
 * the one masked store.
 *
 * Rejected: a zero-padded copy of each plane (one more pass over the input
 * and a work buffer per thread, which conv_work_bytes cannot size without
 * knowing the pool); im2col + GEMM (K = kh * kw is 9: the GEMM would run at
 * a fraction of its peak and write 9x the input). */
#include "engine/cpu/vision_avx512.h"

#include <immintrin.h>

#define DW_PAIR_MAX_W 48

/* The lanes j of a vector of 16 input columns ix0 + j that lie inside
 * [0, w): the rest read as zero padding. Masked-out lanes are never touched
 * (AVX-512 masked loads do not fault), so no padded copy and no gather. */
static inline __mmask16 cols_in(int64_t ix0, int64_t w)
{
    return (__mmask16)(vis_tail(w - ix0) & (__mmask16)~vis_tail(-ix0));
}

/* One output row of the common 3x3, dilation 1, pad_l 1 case: the nine
 * weights live in registers, the input rows out of the image are skipped
 * once per row, and stride 2 loads each input row once per 16 outputs (two
 * vectors split into even and odd columns; the kj = 0 tap is the odd vector
 * shifted one lane, its first lane carried from the previous 16). */
static inline __attribute__((always_inline)) void dw3_row(const float *const rows[3], const __m512 wv[9],
                                                          __m512 bias, float *y, int64_t W, int64_t wo, int sw,
                                                          const hearth_conv_desc *d)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 oprev[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t x0 = 0; x0 < wo; x0 += 16) {
        __mmask16 om = vis_tail(wo - x0);
        __m512 acc = bias;
        if (sw == 1) {
            __mmask16 m0 = om & cols_in(x0 - 1, W), m1 = om & cols_in(x0, W), m2 = om & cols_in(x0 + 1, W);
#pragma GCC unroll 3
            for (int i = 0; i < 3; i++) {
                const float *r = rows[i];
                if (!r)
                    continue;
                acc = _mm512_fmadd_ps(wv[3 * i + 0], _mm512_maskz_loadu_ps(m0, r + x0 - 1), acc);
                acc = _mm512_fmadd_ps(wv[3 * i + 1], _mm512_maskz_loadu_ps(m1, r + x0), acc);
                acc = _mm512_fmadd_ps(wv[3 * i + 2], _mm512_maskz_loadu_ps(m2, r + x0 + 1), acc);
            }
        } else {
            int64_t c0 = 2 * x0;
            __mmask16 mlo = vis_tail(W - c0), mhi = vis_tail(W - c0 - 16);
#pragma GCC unroll 3
            for (int i = 0; i < 3; i++) {
                const float *r = rows[i];
                if (!r)
                    continue;
                __m512 lo = _mm512_maskz_loadu_ps(mlo, r + c0), hi = _mm512_maskz_loadu_ps(mhi, r + c0 + 16);
                __m512 e = _mm512_permutex2var_ps(lo, even, hi), o = _mm512_permutex2var_ps(lo, odd, hi);
                __m512 left = _mm512_castsi512_ps(
                    _mm512_alignr_epi32(_mm512_castps_si512(o), _mm512_castps_si512(oprev[i]), 15));
                oprev[i] = o;
                acc = _mm512_fmadd_ps(wv[3 * i + 0], left, acc);
                acc = _mm512_fmadd_ps(wv[3 * i + 1], e, acc);
                acc = _mm512_fmadd_ps(wv[3 * i + 2], o, acc);
            }
        }
        _mm512_mask_storeu_ps(y + x0, om, vis_act16(acc, d));
    }
}

/* Two output rows of the 3x3 stride-1 case at once: their four input rows
 * are loaded once each (12 loads for 18 FMAs, where two single rows take
 * 18); rows[j] is input row oy + j - pad_t, NULL in the padding. Used on
 * maps up to DW_PAIR_MAX_W wide: on RFB-320's 40, 20 and 10 wide maps it
 * took a quarter to a third off (0.19 -> 0.14 ms for 4 64-channel convs
 * at 30x40), on its 160 wide map it was 15-20% slower in alternating runs
 * (six streams of rows instead of four: the wide rows no longer stay in
 * L1 between the two output rows). */
static inline __attribute__((always_inline)) void dw3_rows2(const float *const rows[4], const __m512 wv[9],
                                                            __m512 bias, float *y0, float *y1, int64_t W,
                                                            int64_t wo, const hearth_conv_desc *d)
{
    for (int64_t x0 = 0; x0 < wo; x0 += 16) {
        __mmask16 om = vis_tail(wo - x0);
        __mmask16 m0 = om & cols_in(x0 - 1, W), m1 = om & cols_in(x0, W), m2 = om & cols_in(x0 + 1, W);
        __m512 a0 = bias, a1 = bias;
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            const float *r = rows[j];
            if (!r)
                continue;
            __m512 v0 = _mm512_maskz_loadu_ps(m0, r + x0 - 1), v1 = _mm512_maskz_loadu_ps(m1, r + x0),
                   v2 = _mm512_maskz_loadu_ps(m2, r + x0 + 1);
            if (j < 3) {
                a0 = _mm512_fmadd_ps(wv[3 * j + 0], v0, a0);
                a0 = _mm512_fmadd_ps(wv[3 * j + 1], v1, a0);
                a0 = _mm512_fmadd_ps(wv[3 * j + 2], v2, a0);
            }
            if (j > 0) {
                a1 = _mm512_fmadd_ps(wv[3 * j - 3], v0, a1);
                a1 = _mm512_fmadd_ps(wv[3 * j - 2], v1, a1);
                a1 = _mm512_fmadd_ps(wv[3 * j - 1], v2, a1);
            }
        }
        _mm512_mask_storeu_ps(y0 + x0, om, vis_act16(a0, d));
        _mm512_mask_storeu_ps(y1 + x0, om, vis_act16(a1, d));
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
        __m512 wv[9];
        for (int k = 0; k < 9; k++)
            wv[k] = _mm512_set1_ps(c->w[ch * 9 + k]);
        __m512 bias = _mm512_set1_ps(c->bias[ch]);
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

void hearth_vis_dw_avx512(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1)
{
    const hearth_conv_desc *d = &c->d;
    if (d->kh == 3 && d->kw == 3 && d->dil_h == 1 && d->dil_w == 1 && d->pad_l == 1) {
        dw3(c, X, Y, p0, p1);
        return;
    }
    const int64_t H = d->h, W = d->w, ho = d->h_out, wo = d->w_out, sw = d->stride_w, kw = d->kw;
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    for (int64_t p = p0; p < p1; p++) {
        int64_t ch = p % d->c_out;
        const float *x = X + p * H * W;       /* (h, w) */
        float *y = Y + p * ho * wo;           /* (h_out, w_out) */
        const float *wk = c->w + ch * d->kh * kw; /* (kh, kw) */
        __m512 bias = _mm512_set1_ps(c->bias[ch]);
        for (int64_t oy = 0; oy < ho; oy++) {
            for (int64_t x0 = 0; x0 < wo; x0 += 16) {
                int64_t nv = wo - x0 < 16 ? wo - x0 : 16;
                __mmask16 om = vis_tail(nv);
                __m512 acc = bias;
                for (int64_t ki = 0; ki < d->kh; ki++) {
                    int64_t iy = oy * d->stride_h + ki * d->dil_h - d->pad_t;
                    if (iy < 0 || iy >= H)
                        continue;
                    const float *row = x + iy * W;
                    for (int64_t kj = 0; kj < kw; kj++) {
                        int64_t ix0 = x0 * sw + kj * d->dil_w - d->pad_l;
                        __m512 v;
                        if (sw == 1) {
                            v = _mm512_maskz_loadu_ps(om & cols_in(ix0, W), row + ix0);
                        } else {
                            int64_t cnt = sw * (nv - 1) + 1; /* input columns spanned, <= 31 */
                            __m512 lo = _mm512_maskz_loadu_ps(vis_tail(cnt) & cols_in(ix0, W), row + ix0);
                            __m512 hi = _mm512_maskz_loadu_ps(vis_tail(cnt - 16) & cols_in(ix0 + 16, W), row + ix0 + 16);
                            v = _mm512_permutex2var_ps(lo, even, hi);
                        }
                        acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[ki * kw + kj]), v, acc);
                    }
                }
                _mm512_mask_storeu_ps(y + oy * wo + x0, om, vis_act16(acc, d));
            }
        }
    }
}

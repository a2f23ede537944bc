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

bool hearth_vis_dw_avx512_takes(const hearth_conv_desc *d)
{
    return d->groups == d->c_in && d->c_in == d->c_out && (d->stride_w == 1 || d->stride_w == 2) &&
           d->w < ((int64_t)1 << 30) && d->w_out < ((int64_t)1 << 30) && d->dil_w * d->kw < ((int64_t)1 << 30) &&
           d->pad_l < ((int64_t)1 << 30);
}

void hearth_vis_dw_avx512(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1)
{
    const hearth_conv_desc *d = &c->d;
    const int64_t H = d->h, W = d->w, ho = d->h_out, wo = d->w_out, sw = d->stride_w, kw = d->kw;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i lane_sw = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)sw));
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
                        int64_t ix0 = x0 * sw + kj * d->dil_w - d->pad_l, last = ix0 + sw * (nv - 1);
                        __m512 v;
                        if (ix0 >= 0 && last < W) {
                            if (sw == 1) {
                                v = _mm512_maskz_loadu_ps(om, row + ix0);
                            } else {
                                int64_t cnt = last - ix0 + 1; /* input columns spanned, <= 31 */
                                __m512 lo = _mm512_maskz_loadu_ps(vis_tail(cnt), row + ix0);
                                __m512 hi = cnt > 16 ? _mm512_maskz_loadu_ps(vis_tail(cnt - 16), row + ix0 + 16)
                                                     : _mm512_setzero_ps();
                                v = _mm512_permutex2var_ps(lo, even, hi);
                            }
                        } else {
                            __m512i idx = _mm512_add_epi32(_mm512_set1_epi32((int)ix0), lane_sw);
                            __mmask16 in = om & _mm512_cmpge_epi32_mask(idx, _mm512_setzero_si512()) &
                                           _mm512_cmplt_epi32_mask(idx, _mm512_set1_epi32((int)W));
                            v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), in, idx, row, 4);
                        }
                        acc = _mm512_fmadd_ps(_mm512_set1_ps(wk[ki * kw + kj]), v, acc);
                    }
                }
                _mm512_mask_storeu_ps(y + oy * wo + x0, om, vis_act16(acc, d));
            }
        }
    }
}

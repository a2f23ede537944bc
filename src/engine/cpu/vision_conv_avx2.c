/* vision_conv_avx2.c: the GEMM tile behind the CPU's 1x1 and im2col convs
 * on a CPU with AVX2 but not AVX-512 (vision.c plans them), and the im2col:
 * vision_conv_avx512.c's twins, for the same packed panels (K, VIS_MR) and
 * the same tile numbering, so vision.c plans both alike.
 *
 * How: a VIS_MR (8) x VIS_NR (32) tile is computed as 4 x 16 pieces: four
 * output channels by two ymm of pixels, 8 accumulators; per k two loads of
 * B's row and four broadcasts of the panel feed 8 FMAs. AVX2 has 16 ymm
 * registers: the AVX-512 tile's 8 x 32 (16 accumulators) plus B and a
 * broadcast would spill. 4 x 16 loads 6 values per 8 FMAs (an 8 x 8 piece
 * would load 9), and a tile reads its 16-pixel strip of B twice, from L1 or
 * L2. Pixel tails: a piece of 8 pixels or fewer runs on one vector; the
 * last vector's loads and stores are masked. Channel tails read the panel's
 * zero rows and skip their stores. Bias first, activation before the one
 * store, as on AVX-512. */
#include "engine/cpu/vision_avx2.h"

#include <immintrin.h>

/* The K loop of one piece: LOAD1 gives B's second vector (the first is
 * always whole). Accumulators are named, not an array: GCC kept an array's
 * eight vectors on the stack, a store after every FMA. */
#define PIECE_LOOP(NV, LOAD1)                                                                                       \
    for (int64_t k = 0; k < K; k++) {                                                                                \
        const float *b = B + k * ldb, *w = wp + k * VIS_MR;                                                          \
        __m256 b0 = NV == 1 ? (LOAD1) : _mm256_loadu_ps(b), b1 = NV == 1 ? b0 : (LOAD1);                             \
        __m256 w0 = _mm256_broadcast_ss(w), w1 = _mm256_broadcast_ss(w + 1);                                         \
        a00 = _mm256_fmadd_ps(w0, b0, a00);                                                                          \
        a10 = _mm256_fmadd_ps(w1, b0, a10);                                                                          \
        if (NV > 1) {                                                                                                \
            a01 = _mm256_fmadd_ps(w0, b1, a01);                                                                      \
            a11 = _mm256_fmadd_ps(w1, b1, a11);                                                                      \
        }                                                                                                            \
        __m256 w2 = _mm256_broadcast_ss(w + 2), w3 = _mm256_broadcast_ss(w + 3);                                     \
        a20 = _mm256_fmadd_ps(w2, b0, a20);                                                                          \
        a30 = _mm256_fmadd_ps(w3, b0, a30);                                                                          \
        if (NV > 1) {                                                                                                \
            a21 = _mm256_fmadd_ps(w2, b1, a21);                                                                      \
            a31 = _mm256_fmadd_ps(w3, b1, a31);                                                                      \
        }                                                                                                            \
    }

/* One 4 x (8 nv) piece: rows 0 .. mr - 1 (mr <= 4) of the panel wp (its
 * stride VIS_MR), pixels B[., 0 .. nc - 1] (8 (nv - 1) < nc <= 8 nv). nv is
 * constant at each call, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) void piece(int nv, const float *wp, int64_t K, const float *B,
                                                        int64_t ldb, int64_t nc, float *Y, int64_t ldy, int64_t mr,
                                                        const float *bias, const hearth_conv_desc *d)
{
    __m256 a00 = _mm256_set1_ps(bias[0]), a10 = _mm256_set1_ps(mr > 1 ? bias[1] : 0.0f);
    __m256 a20 = _mm256_set1_ps(mr > 2 ? bias[2] : 0.0f), a30 = _mm256_set1_ps(mr > 3 ? bias[3] : 0.0f);
    __m256 a01 = a00, a11 = a10, a21 = a20, a31 = a30;
    const int64_t off = 8 * (nv - 1); /* the last vector's first pixel */
    if (nc == 8 * nv) {
        PIECE_LOOP(nv, _mm256_loadu_ps(b + off))
    } else {
        const __m256i m = vis_tail8(nc - off);
        PIECE_LOOP(nv, vis_load8(b + off, m))
    }
    __m256 acc[4][2] = {{a00, a01}, {a10, a11}, {a20, a21}, {a30, a31}};
    for (int r = 0; r < 4 && r < mr; r++) {
        if (nv > 1)
            _mm256_storeu_ps(Y + r * ldy, vis_act8(acc[r][0], d));
        vis_store8(Y + r * ldy + off, vis_act8(acc[r][nv - 1], d), nc - off);
    }
}

void hearth_vis_gemm_avx2(const hearth_conv *c, const float *panels, const float *B, int64_t ldb, float *Y,
                          int64_t ldy, int64_t npx, const float *bias, int64_t t0, int64_t t1)
{
    const int64_t K = c->K;
    for (int64_t t = t0; t < t1; t++) {
        vis_tile T = vis_tile_of(c, t, npx);
        const int64_t px0 = T.px0, co0 = T.co0, nc = T.nc, mr = T.mr;
        const float *wp = panels + T.cb * K * VIS_MR; /* (K, MR) */
        for (int64_t h = 0; h < VIS_MR && h < mr; h += 4) {
            int64_t mh = mr - h < 4 ? mr - h : 4;
            for (int64_t q = 0; q < nc; q += 16) {
                int64_t n = nc - q < 16 ? nc - q : 16;
                float *y = Y + (co0 + h) * ldy + px0 + q;
                if (n > 8)
                    piece(2, wp + h, K, B + px0 + q, ldb, n, y, ldy, mh, bias + co0 + h, &c->d);
                else
                    piece(1, wp + h, K, B + px0 + q, ldb, n, y, ldy, mh, bias + co0 + h, &c->d);
            }
        }
    }
}

/* The im2col rows [k0, k1) of group g, as hearth_vis_im2col: a row's inside
 * columns in vectors, stride 1 a copy, stride 2 two loads and the even
 * lanes; other strides go to the scalar twin. */
void hearth_vis_im2col_avx2(const hearth_conv *c, const float *X, int64_t g, float *B, int64_t ldb, int64_t oy0,
                            int64_t oy1, int64_t k0, int64_t k1)
{
    const hearth_conv_desc *d = &c->d;
    if (d->stride_w > 2) {
        hearth_vis_im2col(c, X, g, B, ldb, oy0, oy1, k0, k1);
        return;
    }
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
                for (int64_t ox = 0; ox < wo; ox += 8)
                    vis_store8(row + ox, _mm256_setzero_ps(), wo - ox);
                continue;
            }
            const float *xr = x + iy * d->w + off; /* xr[ox * sw] for ox in [lo, hi) */
            for (int64_t ox = 0; ox < lo; ox++)
                row[ox] = 0;
            for (int64_t ox = lo; ox < hi; ox += 8) {
                int64_t n = hi - ox < 8 ? hi - ox : 8;
                __m256 v;
                if (sw == 1) {
                    v = n == 8 ? _mm256_loadu_ps(xr + ox) : vis_load8(xr + ox, vis_tail8(n));
                } else if (2 * ox + 16 <= d->w - off) {
                    /* all 16 columns inside the row (the 16th read, not
                     * used): plain loads. A masked load on every vector had
                     * RFB-320's first conv at 0.566 ms, 0.522 without. */
                    v = vis_even8(_mm256_loadu_ps(xr + 2 * ox), _mm256_loadu_ps(xr + 2 * ox + 8));
                } else {
                    int64_t cnt = 2 * n - 1; /* input columns spanned */
                    __m256 l = cnt >= 8 ? _mm256_loadu_ps(xr + 2 * ox) : vis_load8(xr + 2 * ox, vis_tail8(cnt));
                    __m256 h = cnt >= 16 ? _mm256_loadu_ps(xr + 2 * ox + 8) : vis_load8(xr + 2 * ox + 8, vis_tail8(cnt - 8));
                    v = vis_even8(l, h);
                }
                vis_store8(row + ox, v, n);
            }
            for (int64_t ox = hi; ox < wo; ox++)
                row[ox] = 0;
        }
    }
}

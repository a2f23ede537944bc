/* vision_ref.c: the scalar version of every conv-net op (dev_vision.h):
 * the oracle the SIMD kernels are held to and the fallback for any shape or
 * CPU they do not take.
 *
 * How: plain loops in the layouts of dev_vision.h, each over a range of its
 * output (planes, tiles, rows, elements) so vision.c can split it over the
 * stream's pool. The conv is direct (every tap of every output, padding
 * skipped by bounds); im2col and the GEMM tile are here too, in scalar, so
 * a CPU without AVX-512 still runs the GEMM plan, and the AVX-512 tile has
 * a twin to be read against. Sums accumulate in float, in the order ONNX
 * runtimes use (bias first, then taps): the tests bound the difference by
 * the sum of |terms|, not by bits.
 *
 * Rejected: a double accumulator (the SIMD kernels accumulate in float, and
 * an oracle stricter than every kernel only widens the bounds the tests
 * must allow for anyway); a generic N-d index walk per element for binary
 * and strided copies (the last dim is walked as a run with its strides, the
 * index carried only across runs). */
#include "engine/cpu/vision.h"

#include <float.h>
#include <string.h>

/* ---- conv ---- */

void hearth_vis_conv_ref(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1)
{
    const hearth_conv_desc *d = &c->d;
    int64_t hwo = d->h_out * d->w_out;
    for (int64_t p = p0; p < p1; p++) {
        int64_t b = p / d->c_out, co = p % d->c_out, g = co / c->cout_g;
        const float *x = X + (b * d->c_in + g * c->cin_g) * d->h * d->w; /* (cin_g, h, w) */
        const float *wk = c->w + co * c->K;                              /* (cin_g, kh, kw) */
        float *y = Y + p * hwo;
        for (int64_t oy = 0; oy < d->h_out; oy++)
            for (int64_t ox = 0; ox < d->w_out; ox++) {
                float acc = c->bias[co];
                for (int64_t ci = 0; ci < c->cin_g; ci++)
                    for (int64_t ki = 0; ki < d->kh; ki++) {
                        int64_t iy = oy * d->stride_h + ki * d->dil_h - d->pad_t;
                        if (iy < 0 || iy >= d->h)
                            continue;
                        for (int64_t kj = 0; kj < d->kw; kj++) {
                            int64_t ix = ox * d->stride_w + kj * d->dil_w - d->pad_l;
                            if (ix >= 0 && ix < d->w)
                                acc += wk[(ci * d->kh + ki) * d->kw + kj] * x[(ci * d->h + iy) * d->w + ix];
                        }
                    }
                y[oy * d->w_out + ox] = vis_act(acc, d);
            }
    }
}

void hearth_vis_im2col(const hearth_conv *c, const float *X, int64_t g, float *B, int64_t ldb, int64_t oy0,
                       int64_t oy1, int64_t k0, int64_t k1)
{
    const hearth_conv_desc *d = &c->d;
    int64_t khw = d->kh * d->kw;
    for (int64_t k = k0; k < k1; k++) {
        int64_t ci = k / khw, ki = k % khw / d->kw, kj = k % d->kw;
        const float *x = X + (g * c->cin_g + ci) * d->h * d->w; /* (h, w) */
        float *b = B + k * ldb;                                  /* (oy1 - oy0, w_out) */
        /* the output columns whose input column is inside: [lo, hi) */
        int64_t off = kj * d->dil_w - d->pad_l, sw = d->stride_w;
        int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
        int64_t hi = d->w - off <= 0 ? 0 : (d->w - off - 1) / sw + 1;
        if (hi > d->w_out)
            hi = d->w_out;
        if (lo > hi)
            lo = hi;
        for (int64_t oy = oy0; oy < oy1; oy++) {
            float *row = b + (oy - oy0) * d->w_out;
            int64_t iy = oy * d->stride_h + ki * d->dil_h - d->pad_t;
            if (iy < 0 || iy >= d->h) {
                memset(row, 0, (size_t)d->w_out * sizeof *row);
                continue;
            }
            const float *xr = x + iy * d->w + off;
            for (int64_t ox = 0; ox < lo; ox++)
                row[ox] = 0;
            if (sw == 1)
                memcpy(row + lo, xr + lo, (size_t)(hi - lo) * sizeof *row);
            else
                for (int64_t ox = lo; ox < hi; ox++)
                    row[ox] = xr[ox * sw];
            for (int64_t ox = hi; ox < d->w_out; ox++)
                row[ox] = 0;
        }
    }
}

void hearth_vis_gemm_ref(const hearth_conv *c, const float *panels, const float *B, int64_t ldb, float *Y,
                         int64_t ldy, int64_t npx, const float *bias, int64_t t0, int64_t t1)
{
    const int64_t K = c->K;
    for (int64_t t = t0; t < t1; t++) {
        vis_tile T = vis_tile_of(c, t, npx);
        const int64_t px0 = T.px0, co0 = T.co0, nc = T.nc, mr = T.mr;
        const float *wp = panels + T.cb * K * VIS_MR; /* (K, MR) */
        for (int64_t r = 0; r < mr; r++)
            for (int64_t j = 0; j < nc; j++) {
                float acc = bias[co0 + r];
                for (int64_t k = 0; k < K; k++)
                    acc += wp[k * VIS_MR + r] * B[k * ldb + px0 + j];
                Y[(co0 + r) * ldy + px0 + j] = vis_act(acc, &c->d);
            }
    }
}

/* ---- pool2d ---- */

void hearth_vis_pool2d_ref(const hearth_pool2d_desc *d, const float *X, float *Y, int64_t p0, int64_t p1)
{
    for (int64_t p = p0; p < p1; p++) {
        const float *x = X + p * d->h * d->w;
        float *y = Y + p * d->h_out * d->w_out;
        for (int64_t oy = 0; oy < d->h_out; oy++)
            for (int64_t ox = 0; ox < d->w_out; ox++) {
                float best = -FLT_MAX, sum = 0;
                int64_t inside = 0, padded_h = 0, padded_w = 0;
                for (int64_t ki = 0; ki < d->kh; ki++) {
                    int64_t iy = oy * d->stride_h - d->pad_t + ki * d->dil_h;
                    padded_h += iy >= -d->pad_t && iy < d->h + d->pad_b;
                    if (iy < 0 || iy >= d->h)
                        continue;
                    for (int64_t kj = 0; kj < d->kw; kj++) {
                        int64_t ix = ox * d->stride_w - d->pad_l + kj * d->dil_w;
                        if (ix < 0 || ix >= d->w)
                            continue;
                        float v = x[iy * d->w + ix];
                        best = v > best ? v : best;
                        sum += v;
                        inside++;
                    }
                }
                for (int64_t kj = 0; kj < d->kw; kj++) {
                    int64_t ix = ox * d->stride_w - d->pad_l + kj * d->dil_w;
                    padded_w += ix >= -d->pad_l && ix < d->w + d->pad_r;
                }
                float v;
                if (d->kind == HEARTH_POOL_MAX) {
                    v = best;
                } else {
                    int64_t cnt = d->count_include_pad ? padded_h * padded_w : inside;
                    v = cnt > 0 ? sum / (float)cnt : 0;
                }
                y[oy * d->w_out + ox] = v;
            }
    }
}

/* ---- binary ---- */

static float bin1(hearth_binary_op op, float a, float b)
{
    switch (op) {
    case HEARTH_BIN_ADD: return a + b;
    case HEARTH_BIN_SUB: return a - b;
    case HEARTH_BIN_MUL: return a * b;
    case HEARTH_BIN_DIV: return a / b;
    case HEARTH_BIN_MAX: return fmaxf(a, b);
    case HEARTH_BIN_MIN: return fminf(a, b);
    case HEARTH_BIN_POW: return powf(a, b);
    }
    return 0;
}

/* y[i] = a[i * as] op b[i * bs], i < n; the op's switch outside the loop
 * (the common cases written out so the compiler vectorizes them). */
static void bin_run(hearth_binary_op op, float *y, const float *a, int64_t as, const float *b, int64_t bs, int64_t n)
{
    if (op == HEARTH_BIN_ADD && as == 1 && bs == 1) {
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] + b[i];
    } else if (op == HEARTH_BIN_MUL && as == 1 && bs == 1) {
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] * b[i];
    } else if (op == HEARTH_BIN_ADD && as == 1 && bs == 0) {
        float bv = b[0];
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] + bv;
    } else if (op == HEARTH_BIN_MUL && as == 1 && bs == 0) {
        float bv = b[0];
        for (int64_t i = 0; i < n; i++)
            y[i] = a[i] * bv;
    } else {
        for (int64_t i = 0; i < n; i++)
            y[i] = bin1(op, a[i * as], b[i * bs]);
    }
}

void hearth_vis_binary_ref(const hearth_binary_desc *d, const float *A, const float *B, float *Y, int64_t i0,
                           int64_t i1)
{
    int nd = d->ndim, last = nd - 1;
    int64_t idx[HEARTH_VIS_DIMS], rem = i0, ao = 0, bo = 0;
    for (int k = last; k >= 0; k--) {
        idx[k] = rem % d->dims[k];
        rem /= d->dims[k];
        ao += idx[k] * d->a_stride[k];
        bo += idx[k] * d->b_stride[k];
    }
    int64_t i = i0;
    while (i < i1) {
        int64_t run = d->dims[last] - idx[last];
        if (run > i1 - i)
            run = i1 - i;
        bin_run(d->op, Y + i, A + ao, d->a_stride[last], B + bo, d->b_stride[last], run);
        i += run;
        idx[last] += run;
        ao += run * d->a_stride[last];
        bo += run * d->b_stride[last];
        for (int k = last; k > 0 && idx[k] == d->dims[k]; k--) { /* carry */
            ao -= idx[k] * d->a_stride[k];
            bo -= idx[k] * d->b_stride[k];
            idx[k] = 0;
            idx[k - 1]++;
            ao += d->a_stride[k - 1];
            bo += d->b_stride[k - 1];
        }
    }
}

/* ---- unary, softmax ---- */

void hearth_vis_unary_ref(hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b)
{
    for (int64_t i = 0; i < n; i++) {
        float x = X[i], v;
        switch (op) {
        case HEARTH_UN_RELU: v = x > 0 ? x : 0; break;
        case HEARTH_UN_SIGMOID: v = 1.0f / (1.0f + expf(-x)); break;
        case HEARTH_UN_EXP: v = expf(x); break;
        case HEARTH_UN_TANH: v = tanhf(x); break;
        case HEARTH_UN_CLIP: v = fminf(fmaxf(x, a), b); break;
        case HEARTH_UN_LEAKY_RELU: v = x < 0 ? a * x : x; break;
        case HEARTH_UN_HARD_SIGMOID: v = fmaxf(0.0f, fminf(1.0f, a * x + b)); break;
        case HEARTH_UN_HARD_SWISH: v = x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f)); break;
        case HEARTH_UN_NEG: v = -x; break;
        case HEARTH_UN_SQRT: v = sqrtf(x); break;
        case HEARTH_UN_ABS: v = fabsf(x); break;
        case HEARTH_UN_LOG: v = logf(x); break;
        default: v = x; break;
        }
        Y[i] = v;
    }
}

void hearth_vis_softmax_ref(const float *X, float *Y, int64_t len, int64_t inner, int64_t j0, int64_t j1)
{
    for (int64_t j = j0; j < j1; j++) {
        int64_t o = j / inner, in = j % inner;
        const float *x = X + o * len * inner + in;
        float *y = Y + o * len * inner + in;
        float mx = -INFINITY;
        for (int64_t l = 0; l < len; l++)
            mx = x[l * inner] > mx ? x[l * inner] : mx;
        double sum = 0;
        for (int64_t l = 0; l < len; l++) {
            float e = expf(x[l * inner] - mx);
            y[l * inner] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t l = 0; l < len; l++)
            y[l * inner] *= inv;
    }
}

/* ---- strided copy ---- */

#define STRIDED_RUN(T)                                                                                         \
    do {                                                                                                       \
        const T *s = (const T *)src + so;                                                                      \
        T *t = (T *)dst + dof;                                                                                 \
        for (int64_t i = 0; i < n; i++)                                                                        \
            t[i * dstr] = s[i * sstr];                                                                         \
    } while (0)

void hearth_vis_strided_ref(const hearth_strided_desc *d, const void *src, void *dst, int64_t r0, int64_t r1)
{
    int last = d->ndim - 1;
    int64_t n = d->dims[last], sstr = d->src_stride[last], dstr = d->dst_stride[last];
    size_t eb = (size_t)d->elem_bytes;
    for (int64_t r = r0; r < r1; r++) {
        int64_t rem = r, so = 0, dof = 0;
        for (int k = last - 1; k >= 0; k--) {
            int64_t ik = rem % d->dims[k];
            rem /= d->dims[k];
            so += ik * d->src_stride[k];
            dof += ik * d->dst_stride[k];
        }
        if (sstr == 1 && dstr == 1) {
            memcpy((char *)dst + (size_t)dof * eb, (const char *)src + (ptrdiff_t)so * (ptrdiff_t)eb, (size_t)n * eb);
            continue;
        }
        switch (d->elem_bytes) {
        case 1: STRIDED_RUN(uint8_t); break;
        case 2: STRIDED_RUN(uint16_t); break;
        case 4: STRIDED_RUN(uint32_t); break;
        default: STRIDED_RUN(uint64_t); break;
        }
    }
}

/* ---- resize ---- */

/* The input coordinate of output coordinate x (ONNX Resize's modes). */
static float resize_coord(hearth_resize_coord mode, int64_t x, float scale, int64_t in, int64_t out)
{
    switch (mode) {
    case HEARTH_COORD_ASYMMETRIC: return (float)x / scale;
    case HEARTH_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? ((float)x + 0.5f) / scale - 0.5f : 0.0f;
    case HEARTH_COORD_ALIGN_CORNERS: return out > 1 ? (float)x * (float)(in - 1) / (float)(out - 1) : 0.0f;
    default: return ((float)x + 0.5f) / scale - 0.5f;
    }
}

static int64_t clampi(int64_t v, int64_t hi)
{
    return v < 0 ? 0 : v > hi ? hi : v;
}

static int64_t resize_nearest(hearth_resize_round r, float x, int64_t in)
{
    float v;
    switch (r) {
    case HEARTH_ROUND_PREFER_CEIL: v = floorf(x + 0.5f); break;
    case HEARTH_ROUND_FLOOR: v = floorf(x); break;
    case HEARTH_ROUND_CEIL: v = ceilf(x); break;
    default: v = ceilf(x - 0.5f); break; /* halves go down */
    }
    return clampi((int64_t)v, in - 1);
}

void hearth_vis_resize_ref(const hearth_resize_desc *d, const float *X, float *Y, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        int64_t p = r / d->h_out, oy = r % d->h_out;
        const float *x = X + p * d->h * d->w;
        float *y = Y + r * d->w_out;
        float fy = resize_coord(d->coord, oy, d->scale_h, d->h, d->h_out);
        if (d->mode == HEARTH_RESIZE_NEAREST) {
            const float *xr = x + resize_nearest(d->round, fy, d->h) * d->w;
            for (int64_t ox = 0; ox < d->w_out; ox++)
                y[ox] = xr[resize_nearest(d->round, resize_coord(d->coord, ox, d->scale_w, d->w, d->w_out), d->w)];
            continue;
        }
        fy = fminf(fmaxf(fy, 0.0f), (float)(d->h - 1));
        int64_t y0 = (int64_t)fy, y1 = y0 + 1 < d->h ? y0 + 1 : y0;
        float ly = fy - (float)y0;
        const float *a = x + y0 * d->w, *b = x + y1 * d->w;
        for (int64_t ox = 0; ox < d->w_out; ox++) {
            float fx = resize_coord(d->coord, ox, d->scale_w, d->w, d->w_out);
            fx = fminf(fmaxf(fx, 0.0f), (float)(d->w - 1));
            int64_t x0 = (int64_t)fx, x1 = x0 + 1 < d->w ? x0 + 1 : x0;
            float lx = fx - (float)x0;
            float top = a[x0] + (a[x1] - a[x0]) * lx, bot = b[x0] + (b[x1] - b[x0]) * lx;
            y[ox] = top + (bot - top) * ly;
        }
    }
}

/* vision.c: the CPU's conv-net ops (dev_vision.h): the table, the conv's
 * plan (which kernel, its weight layout, its work space) and the split of
 * every op over the stream's pool.
 *
 * How a conv is planned at conv_new, once, from its geometry:
 *   depthwise (groups == c_in == c_out), strides 1 or 2 along W, AVX-512
 *       or AVX2: vision_dw_avx512.c or _avx2.c, direct, over the (n, c)
 *       planes;
 *   anything else: a GEMM per image and group, Y (cout_g, HWo) = W (cout_g,
 *       K) B (K, HWo) with K = cin_g kh kw, where B is X itself for a 1x1
 *       stride-1 unpadded conv and otherwise X's im2col in the work buffer
 *       the plan gives (conv_work_bytes = K HWo floats); W packed into
 *       (K, 8) panels here; the tile is vision_conv_avx512.c's or _avx2.c's,
 *       or vision_ref.c's scalar twin on a CPU with neither. An im2col of
 *       four or more VIS_BAND_BYTES bands of output rows is built and used
 *       a band at a time, each band's task writing its own slot and running
 *       its tiles while the slot is in L2 (RFB-320's first conv, a 2 MB
 *       im2col, was written whole and read back from L3: 0.69-0.88 ms,
 *       0.51-0.55 in bands, AVX2 EPYC, 2026-12-06);
 *   the direct loops of vision_ref.c where neither fits (a depthwise conv
 *       without SIMD, or an im2col over VIS_IM2COL_MAX).
 * The AVX2 kernels exist because the scalar twins made a face detector's
 * frame 114 ms on an AVX2-only EPYC (2026-12-06), past a 20 Hz deadline,
 * where onnxruntime took 11.
 * Bias and activation are fused into every kernel's single store.
 *
 * Threads: each op splits its output (tiles, planes, rows, element chunks)
 * with dev_cpu.c's row policy (cpu_rows: about four tasks per thread), and
 * runs on the caller alone when the whole op is under VIS_PAR_MIN_WORK
 * (a pool job costs a few microseconds: the 8x10 tail of a face detector is
 * smaller than that). GEMM tiles are numbered pixel block first, so a task's
 * run of tiles reuses one pixel panel of B across channel blocks.
 *
 * Rejected: choosing the kernel per call (the shape is fixed at load; the
 * plan also fixes the work size the model's arena must hold); Winograd for
 * the 3x3 convs (the dense 3x3s here are a small part of a face detector's
 * MACs and Winograd's transforms change the rounding the tests bound);
 * threads inside the kernels (one policy, here); a direct conv for the
 * im2col shapes with few output channels, the GEMM tile loading B's rows
 * from X per tile (tried 2026-12-03: 10-15% slower than im2col + GEMM on
 * RFB-320's first conv and its 30x40 3x3s, in alternating runs). */
#include "engine/cpu/vision.h"
#include "engine/cpu/dev_cpu.h"
#include "engine/cpu/matmul.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* The largest im2col buffer a conv may ask for (bytes); above it, direct. */
#define VIS_IM2COL_MAX ((size_t)1 << 30)
/* An im2col band's bytes at most (one output row at least), and how many
 * bands a conv must have to be banded (else one whole-map im2col). */
#define VIS_BAND_BYTES ((size_t)96 << 10)
#define VIS_BAND_MIN 4
/* Below this many output elements x taps an op runs on the calling thread. */
#define VIS_PAR_MIN_WORK 32768
/* Elements per task of the elementwise ops. */
#define VIS_CHUNK 4096

/* -1: the CPU's best (hearth_cpu_matmul_isa); else a test's choice */
static _Atomic int g_isa = -1;

hearth_cpu_isa hearth_cpu_vision_isa(void)
{
    int isa = g_isa;
    return isa < 0 ? hearth_cpu_matmul_isa() : (hearth_cpu_isa)isa;
}

int hearth_cpu_vision_set_isa(hearth_cpu_isa isa)
{
    if ((int)isa < 0 || isa >= HEARTH_ISA_COUNT_ || !hearth_cpu_isa_available(isa))
        return HEARTH_EUNSUPPORTED;
    g_isa = (int)isa;
    return 0;
}

/* fn over items [0, n) on st's pool, or on the caller when the op is small. */
static void vis_split(hearth_stream *st, int64_t n, double work, cpu_rows_fn fn, void *job)
{
    if (n <= 0)
        return;
    if (work < VIS_PAR_MIN_WORK)
        fn(job, 0, n);
    else
        cpu_rows(st, n, 2, fn, job);
}

/* a * b into *out, false on overflow or a negative factor */
static bool mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, out);
}

/* ---- conv ---- */

static void conv_free(hearth_conv *c)
{
    if (!c)
        return;
    free(c->w);
    free(c->bias);
    free(c->panels);
    free(c);
}

bool hearth_vis_dw_simd_takes(const hearth_conv_desc *d)
{
    return d->groups == d->c_in && d->c_in == d->c_out && (d->stride_w == 1 || d->stride_w == 2) &&
           d->w < ((int64_t)1 << 30) && d->w_out < ((int64_t)1 << 30) && d->dil_w * d->kw < ((int64_t)1 << 30) &&
           d->pad_l < ((int64_t)1 << 30);
}

static hearth_conv *conv_new(hearth_dev *dev, const hearth_conv_desc *d, const float *w, const float *bias,
                             hearth_err *err)
{
    const char *name = d && d->name ? d->name : "conv";
    if (!d || !w) {
        hearth_err_set(err, HEARTH_EINVAL, "conv '%s': no %s", name, d ? "weights" : "descriptor");
        return NULL;
    }
    hearth_conv_desc dd = *d;
    if (hearth_conv_desc_finish(&dd, err) != 0)
        return NULL;
    if (dd.h_out != d->h_out || dd.w_out != d->w_out) {
        hearth_err_set(err, HEARTH_EINVAL, "conv '%s': output %lldx%lld, the geometry gives %lldx%lld (not finished?)",
                       name, (long long)d->h_out, (long long)d->w_out, (long long)dd.h_out, (long long)dd.w_out);
        return NULL;
    }
    int64_t cin_g = dd.c_in / dd.groups, cout_g = dd.c_out / dd.groups, khw, K, n_w, hwo, x_all, y_all, b_all;
    if (!mul_ok(dd.kh, dd.kw, &khw) || !mul_ok(cin_g, khw, &K) || !mul_ok(dd.c_out, K, &n_w) ||
        !mul_ok(dd.h_out, dd.w_out, &hwo) || !mul_ok(K, hwo, &b_all) || !mul_ok(dd.n * dd.c_in, dd.h * dd.w, &x_all) ||
        !mul_ok(dd.n * dd.c_out, hwo, &y_all) || n_w > ((int64_t)1 << 32) || b_all > ((int64_t)1 << 40)) {
        hearth_err_set(err, HEARTH_EINVAL, "conv '%s': sizes overflow (%lld x %lld x %lldx%lld weights, %lldx%lld output)",
                       name, (long long)dd.c_out, (long long)cin_g, (long long)dd.kh, (long long)dd.kw,
                       (long long)dd.h_out, (long long)dd.w_out);
        return NULL;
    }
    hearth_conv *c = calloc(1, sizeof *c);
    if (!c)
        goto oom;
    dd.name = NULL;
    c->d = dd;
    c->cin_g = cin_g;
    c->cout_g = cout_g;
    c->K = K;
    c->w = malloc((size_t)n_w * sizeof *c->w);
    c->bias = calloc((size_t)dd.c_out, sizeof *c->bias);
    if (!c->w || !c->bias)
        goto oom;
    memcpy(c->w, w, (size_t)n_w * sizeof *c->w);
    if (bias)
        memcpy(c->bias, bias, (size_t)dd.c_out * sizeof *c->bias);

    bool depthwise = dd.groups == dd.c_in && dd.c_in == dd.c_out;
    c->isa = hearth_cpu_vision_isa();
    c->im2col = !(dd.kh == 1 && dd.kw == 1 && dd.stride_h == 1 && dd.stride_w == 1 && dd.pad_t == 0 &&
                  dd.pad_l == 0 && dd.pad_b == 0 && dd.pad_r == 0);
    bool dw_simd = c->isa != HEARTH_ISA_SCALAR && hearth_vis_dw_simd_takes(&dd);
    if (depthwise && dw_simd) {
        c->kind = VIS_CONV_DW;
    } else if ((depthwise && c->im2col) || (c->im2col && (size_t)b_all > VIS_IM2COL_MAX / sizeof(float))) {
        c->kind = VIS_CONV_REF;
    } else {
        c->kind = VIS_CONV_GEMM;
        c->gemm = c->isa == HEARTH_ISA_AVX512 ? hearth_vis_gemm_avx512
                  : c->isa == HEARTH_ISA_AVX2 ? hearth_vis_gemm_avx2
                                              : hearth_vis_gemm_ref;
        if (c->im2col) {
            int64_t row_bytes = K * dd.w_out * (int64_t)sizeof(float);
            int64_t rows = (int64_t)VIS_BAND_BYTES / row_bytes;
            rows = rows < 1 ? 1 : rows;
            if ((dd.h_out + rows - 1) / rows >= VIS_BAND_MIN)
                c->band = rows;
        }
        int64_t n_cb = (cout_g + VIS_MR - 1) / VIS_MR;
        size_t per_group = (size_t)n_cb * (size_t)K * VIS_MR;
        c->panels = calloc(per_group * (size_t)dd.groups, sizeof *c->panels);
        if (!c->panels)
            goto oom;
        for (int64_t g = 0; g < dd.groups; g++)
            for (int64_t co = 0; co < cout_g; co++) {
                const float *src = c->w + (g * cout_g + co) * K; /* (K) */
                float *dst = c->panels + (size_t)g * per_group + (size_t)(co / VIS_MR) * (size_t)K * VIS_MR + co % VIS_MR;
                for (int64_t k = 0; k < K; k++)
                    dst[k * VIS_MR] = src[k];
            }
    }
    return c;
oom:
    conv_free(c);
    hearth_err_set(err, HEARTH_ENOMEM, "conv '%s': out of memory for %lld x %lld x %lldx%lld weights", name,
                   (long long)dd.c_out, (long long)cin_g, (long long)dd.kh, (long long)dd.kw);
    return NULL;
}

static size_t conv_work_bytes(const hearth_conv *c)
{
    if (!c || c->kind != VIS_CONV_GEMM || !c->im2col)
        return 0;
    /* banded: a slot of band rows for every band, so no two tasks share one */
    int64_t rows = c->band ? (c->d.h_out + c->band - 1) / c->band * c->band : c->d.h_out;
    size_t b = (size_t)c->K * (size_t)(rows * c->d.w_out) * sizeof(float);
    return (b + 63) & ~(size_t)63;
}

typedef struct conv_job {
    const hearth_conv *c;
    const float *X, *B, *panels, *bias;
    float *Y, *work;
    int64_t g;
} conv_job;

static void conv_ref_rows(void *job, int64_t r0, int64_t r1)
{
    const conv_job *J = job;
    hearth_vis_conv_ref(J->c, J->X, J->Y, r0, r1);
}

static void conv_dw_rows(void *job, int64_t r0, int64_t r1)
{
    const conv_job *J = job;
    if (J->c->isa == HEARTH_ISA_AVX512)
        hearth_vis_dw_avx512(J->c, J->X, J->Y, r0, r1);
    else
        hearth_vis_dw_avx2(J->c, J->X, J->Y, r0, r1);
}

/* The im2col of c's ISA: rows [k0, k1), output rows [oy0, oy1). */
static void im2col(const conv_job *J, float *B, int64_t ldb, int64_t oy0, int64_t oy1, int64_t k0, int64_t k1)
{
    if (J->c->isa == HEARTH_ISA_AVX512)
        hearth_vis_im2col_avx512(J->c, J->X, J->g, B, ldb, oy0, oy1, k0, k1);
    else if (J->c->isa == HEARTH_ISA_AVX2)
        hearth_vis_im2col_avx2(J->c, J->X, J->g, B, ldb, oy0, oy1, k0, k1);
    else
        hearth_vis_im2col(J->c, J->X, J->g, B, ldb, oy0, oy1, k0, k1);
}

static void im2col_rows(void *job, int64_t r0, int64_t r1)
{
    const conv_job *J = job;
    int64_t hwo = J->c->d.h_out * J->c->d.w_out;
    im2col(J, J->work, hwo, 0, J->c->d.h_out, r0, r1);
}

static void gemm_rows(void *job, int64_t r0, int64_t r1)
{
    const conv_job *J = job;
    int64_t hwo = J->c->d.h_out * J->c->d.w_out;
    J->c->gemm(J->c, J->panels, J->B, hwo, J->Y, hwo, hwo, J->bias, r0, r1);
}

/* Bands [b0, b1): each band's im2col into its own slot of the work buffer,
 * then every tile of its pixels while the slot is still in L2. */
static void band_rows(void *job, int64_t b0, int64_t b1)
{
    const conv_job *J = job;
    const hearth_conv *c = J->c;
    const int64_t wo = c->d.w_out, n_cb = (c->cout_g + VIS_MR - 1) / VIS_MR;
    for (int64_t b = b0; b < b1; b++) {
        int64_t oy0 = b * c->band, oy1 = oy0 + c->band < c->d.h_out ? oy0 + c->band : c->d.h_out;
        int64_t npx = (oy1 - oy0) * wo;
        float *slot = J->work + b * c->K * c->band * wo;
        im2col(J, slot, npx, oy0, oy1, 0, c->K);
        c->gemm(c, J->panels, slot, npx, J->Y + oy0 * wo, c->d.h_out * wo, npx, J->bias, 0,
                (npx + VIS_NR - 1) / VIS_NR * n_cb);
    }
}

static int conv_run(hearth_stream *st, const hearth_conv *c, const float *X, float *Y, void *work)
{
    if (!c || !X || !Y || (conv_work_bytes(c) && !work))
        return HEARTH_EINVAL;
    const hearth_conv_desc *d = &c->d;
    int64_t hwo = d->h_out * d->w_out, hw = d->h * d->w;
    double macs = (double)d->n * (double)d->c_out * (double)hwo * (double)c->K;
    conv_job J = {.c = c, .X = X, .Y = Y, .work = work};
    if (c->kind == VIS_CONV_REF) {
        vis_split(st, d->n * d->c_out, macs, conv_ref_rows, &J);
        return 0;
    }
    if (c->kind == VIS_CONV_DW) {
        vis_split(st, d->n * d->c_out, macs, conv_dw_rows, &J);
        return 0;
    }
    int64_t n_cb = (c->cout_g + VIS_MR - 1) / VIS_MR, n_pb = (hwo + VIS_NR - 1) / VIS_NR;
    size_t per_group = (size_t)n_cb * (size_t)c->K * VIS_MR;
    for (int64_t b = 0; b < d->n; b++)
        for (int64_t g = 0; g < d->groups; g++) {
            conv_job G = J;
            G.X = X + b * d->c_in * hw; /* (c_in, h, w) */
            G.g = g;
            G.panels = c->panels + (size_t)g * per_group;
            G.bias = c->bias + g * c->cout_g;
            G.Y = Y + (b * d->c_out + g * c->cout_g) * hwo; /* (cout_g, h_out, w_out) */
            if (c->band) {
                vis_split(st, (d->h_out + c->band - 1) / c->band, macs / (double)(d->n * d->groups), band_rows, &G);
                continue;
            }
            if (c->im2col) {
                vis_split(st, c->K, (double)c->K * (double)hwo, im2col_rows, &G);
                G.B = work;
            } else {
                G.B = G.X + g * c->cin_g * hw;
            }
            vis_split(st, n_pb * n_cb, macs / (double)(d->n * d->groups), gemm_rows, &G);
        }
    return 0;
}

/* ---- pool2d ---- */

typedef struct op_job {
    const void *d;
    const float *A, *B;
    float *Y;
    const void *src;
    void *dst;
    int64_t n, len, inner;
    int op;
    float a, b;
} op_job;

static void pool_rows(void *job, int64_t r0, int64_t r1)
{
    const op_job *J = job;
    hearth_vis_pool2d_ref(J->d, J->A, J->Y, r0, r1);
}

static int pool2d_run(hearth_stream *st, const hearth_pool2d_desc *d, const float *X, float *Y)
{
    if (!d || !X || !Y || (d->kind != HEARTH_POOL_MAX && d->kind != HEARTH_POOL_AVG) || d->n < 1 || d->c < 1 ||
        d->h < 1 || d->w < 1 || d->kh < 1 || d->kw < 1 || d->stride_h < 1 || d->stride_w < 1 || d->dil_h < 1 ||
        d->dil_w < 1 || d->pad_t < 0 || d->pad_l < 0 || d->pad_b < 0 || d->pad_r < 0 || d->h_out < 1 || d->w_out < 1)
        return HEARTH_EINVAL;
    op_job J = {.d = d, .A = X, .Y = Y};
    vis_split(st, d->n * d->c, (double)(d->n * d->c * d->h_out * d->w_out) * (double)(d->kh * d->kw), pool_rows, &J);
    return 0;
}

/* ---- binary, unary, softmax ---- */

static void binary_rows(void *job, int64_t r0, int64_t r1)
{
    const op_job *J = job;
    int64_t i1 = r1 * VIS_CHUNK < J->n ? r1 * VIS_CHUNK : J->n;
    hearth_vis_binary_ref(J->d, J->A, J->B, J->Y, r0 * VIS_CHUNK, i1);
}

static int binary_run(hearth_stream *st, const hearth_binary_desc *d, const float *A, const float *B, float *Y)
{
    if (!d || !A || !B || !Y || d->ndim < 1 || d->ndim > HEARTH_VIS_DIMS)
        return HEARTH_EINVAL;
    if ((int)d->op < HEARTH_BIN_ADD || d->op > HEARTH_BIN_POW)
        return HEARTH_EUNSUPPORTED;
    int64_t n = 1;
    for (int k = 0; k < d->ndim; k++)
        if (!mul_ok(n, d->dims[k], &n))
            return HEARTH_EINVAL;
    op_job J = {.d = d, .A = A, .B = B, .Y = Y, .n = n};
    vis_split(st, (n + VIS_CHUNK - 1) / VIS_CHUNK, (double)n, binary_rows, &J);
    return 0;
}

bool hearth_vis_unary_simd_takes(hearth_unary_op op)
{
    return op == HEARTH_UN_RELU || op == HEARTH_UN_CLIP || op == HEARTH_UN_LEAKY_RELU ||
           op == HEARTH_UN_HARD_SIGMOID || op == HEARTH_UN_HARD_SWISH || op == HEARTH_UN_NEG ||
           op == HEARTH_UN_ABS || op == HEARTH_UN_SQRT || op == HEARTH_UN_SIGMOID;
}

static void unary_rows(void *job, int64_t r0, int64_t r1)
{
    const op_job *J = job;
    int64_t i0 = r0 * VIS_CHUNK, i1 = r1 * VIS_CHUNK < J->n ? r1 * VIS_CHUNK : J->n;
    hearth_unary_op op = (hearth_unary_op)J->op;
    hearth_cpu_isa isa = hearth_cpu_vision_isa();
    if (isa == HEARTH_ISA_AVX512 && hearth_vis_unary_simd_takes(op))
        hearth_vis_unary_avx512(op, J->A + i0, J->Y + i0, i1 - i0, J->a, J->b);
    else if (isa == HEARTH_ISA_AVX2 && hearth_vis_unary_simd_takes(op))
        hearth_vis_unary_avx2(op, J->A + i0, J->Y + i0, i1 - i0, J->a, J->b);
    else
        hearth_vis_unary_ref((hearth_unary_op)J->op, J->A + i0, J->Y + i0, i1 - i0, J->a, J->b);
}

static int unary_run(hearth_stream *st, hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b)
{
    if (!X || !Y || n < 0)
        return HEARTH_EINVAL;
    if ((int)op < HEARTH_UN_RELU || op > HEARTH_UN_LOG)
        return HEARTH_EUNSUPPORTED;
    op_job J = {.A = X, .Y = Y, .n = n, .op = (int)op, .a = a, .b = b};
    vis_split(st, (n + VIS_CHUNK - 1) / VIS_CHUNK, (double)n, unary_rows, &J);
    return 0;
}

static void softmax_rows(void *job, int64_t r0, int64_t r1)
{
    const op_job *J = job;
    hearth_vis_softmax_ref(J->A, J->Y, J->len, J->inner, r0, r1);
}

static int softmax_run(hearth_stream *st, const float *X, float *Y, int64_t outer, int64_t len, int64_t inner)
{
    int64_t cols, all;
    if (!X || !Y || outer < 0 || len < 1 || inner < 1 || !mul_ok(outer, inner, &cols) || !mul_ok(cols, len, &all))
        return HEARTH_EINVAL;
    op_job J = {.A = X, .Y = Y, .len = len, .inner = inner};
    vis_split(st, cols, (double)all * 4, softmax_rows, &J);
    return 0;
}

/* ---- strided copy, resize ---- */

static void strided_rows(void *job, int64_t r0, int64_t r1)
{
    const op_job *J = job;
    hearth_vis_strided_ref(J->d, J->src, J->dst, r0, r1);
}

static int strided_run(hearth_stream *st, const hearth_strided_desc *d, const void *src, void *dst)
{
    if (!d || !src || !dst || d->ndim < 1 || d->ndim > HEARTH_VIS_DIMS ||
        (d->elem_bytes != 1 && d->elem_bytes != 2 && d->elem_bytes != 4 && d->elem_bytes != 8))
        return HEARTH_EINVAL;
    int64_t rows = 1, n;
    for (int k = 0; k < d->ndim - 1; k++)
        if (!mul_ok(rows, d->dims[k], &rows))
            return HEARTH_EINVAL;
    if (!mul_ok(rows, d->dims[d->ndim - 1], &n))
        return HEARTH_EINVAL;
    if (n == 0)
        return 0;
    op_job J = {.d = d, .src = src, .dst = dst};
    vis_split(st, rows, (double)n, strided_rows, &J);
    return 0;
}

static void resize_rows(void *job, int64_t r0, int64_t r1)
{
    const op_job *J = job;
    hearth_vis_resize_ref(J->d, J->A, J->Y, r0, r1);
}

static int resize_run(hearth_stream *st, const hearth_resize_desc *d, const float *X, float *Y)
{
    if (!d || !X || !Y || d->n < 1 || d->c < 1 || d->h < 1 || d->w < 1 || d->h_out < 1 || d->w_out < 1)
        return HEARTH_EINVAL;
    if ((d->mode != HEARTH_RESIZE_NEAREST && d->mode != HEARTH_RESIZE_LINEAR) || (int)d->coord < 0 ||
        d->coord > HEARTH_COORD_ALIGN_CORNERS || (int)d->round < 0 || d->round > HEARTH_ROUND_CEIL)
        return HEARTH_EUNSUPPORTED;
    if (d->coord != HEARTH_COORD_ALIGN_CORNERS && !(d->scale_h > 0 && d->scale_w > 0 && isfinite(d->scale_h) &&
                                                    isfinite(d->scale_w)))
        return HEARTH_EINVAL;
    op_job J = {.d = d, .A = X, .Y = Y};
    int64_t rows = d->n * d->c * d->h_out;
    vis_split(st, rows, (double)rows * (double)d->w_out * 4, resize_rows, &J);
    return 0;
}

const hearth_dev_vision_ops hearth_cpu_vision_ops = {
    .conv_new = conv_new,
    .conv_free = conv_free,
    .conv_work_bytes = conv_work_bytes,
    .conv = conv_run,
    .pool2d = pool2d_run,
    .binary = binary_run,
    .unary = unary_run,
    .softmax = softmax_run,
    .strided_copy = strided_run,
    .resize = resize_run,
    .keepalive = NULL,
};

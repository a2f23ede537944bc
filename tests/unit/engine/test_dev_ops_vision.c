/* Unit tests for engine/dev_vision.h: every conv-net op of every device in
 * the registry that has a vision table (today the CPU; a GPU joins through
 * the same registry), held to a scalar oracle written here in double, at
 * odd shapes (7x13 maps, channel counts that are not multiples of 8 or 16,
 * batch 1 and 2), on streams over no pool and a pool of two threads. Data
 * goes to the device by upload and comes back by download, as a frame
 * model's walk would. The CPU runs them once per instruction set it has
 * (AVX-512, AVX2, scalar: hearth_cpu_vision_set_isa), so a machine with
 * AVX-512 also checks the kernels an AVX2-only CPU would run.
 *
 * Tolerances, stated at each check: a conv's output may differ from the
 * exact sum by f32 accumulation order, bounded by 1e-5 of the sum of |terms|
 * (bias included) plus 1e-6 (the vector exp of a sigmoid); elementwise ops
 * by a few ulps (relative 1e-6; pow, exp, log, tanh 1e-5); copies exactly.
 *
 * HEARTH_VISION_BENCH=1 also times the convs of UltraFace RFB-320 on one
 * thread on each device (informational, never a failure). */
#include "harness.h"
#define DEV_TEST_SEED 0x9e3779b97f4a7c15ull
#include "dev_test.h"

#include "base/clock.h"
#include "base/err.h"
#include "base/pool.h"
#include "engine/cpu/vision.h"
#include "engine/dev.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const hearth_dev_vision_ops *V;
static char g_where[160];

/* |got - want| <= atol + rtol |want| (or + bound[i] when given); reports the first miss. */
static int near_all(const char *what, const float *got, const double *want, const double *bound, int64_t n,
                    double atol, double rtol)
{
    for (int64_t i = 0; i < n; i++) {
        double tol = atol + (bound ? bound[i] : rtol * fabs(want[i]));
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= tol)) {
            fprintf(stderr, "  %s %s: [%lld] = %.9g, oracle %.9g (tol %.3g)\n", g_where, what, (long long)i, got[i],
                    want[i], tol);
            hearth_test_case_failed = 1;
            return 1;
        }
    }
    return 0;
}

/* ---- conv ---- */

typedef struct conv_case {
    int64_t n, c_in, h, w, c_out, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups;
} conv_case;

static const conv_case CONVS[] = {
    {1, 3, 7, 13, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},     /* a detector's first conv */
    {2, 5, 7, 13, 11, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1},     /* pointwise, batch 2 */
    {1, 40, 6, 13, 37, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1},    /* pointwise, 78 pixels, 37 outputs */
    {1, 7, 9, 11, 13, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1},     /* 1x1 stride 2 */
    {1, 16, 7, 13, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 16},   /* depthwise */
    {2, 16, 9, 35, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 16},   /* depthwise stride 2, batch 2 */
    {1, 20, 7, 40, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 20},   /* depthwise, a row of 40 */
    {1, 8, 9, 37, 8, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 8},      /* depthwise dilated */
    {1, 3, 10, 21, 3, 5, 5, 2, 2, 1, 1, 2, 1, 1, 2, 3},     /* depthwise 5x5 stride 2, uneven pads */
    {1, 5, 12, 50, 5, 3, 3, 2, 1, 1, 3, 0, 3, 1, 2, 5},     /* depthwise, strides 2x1, dilation 1x3 */
    {1, 4, 7, 13, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4},      /* channel multiplier 2 */
    {1, 12, 7, 13, 8, 3, 3, 1, 1, 1, 1, 1, 0, 2, 1, 4},     /* grouped, asymmetric pads */
    {2, 12, 5, 7, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 3},      /* grouped 1x1, batch 2 */
    {1, 6, 11, 13, 9, 5, 5, 1, 2, 1, 1, 2, 1, 2, 3, 1},     /* 5x5, strides 1x2 */
    {1, 8, 13, 17, 10, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1},    /* dilation 2 */
    {1, 4, 15, 19, 5, 3, 3, 1, 1, 3, 3, 3, 3, 3, 3, 1},     /* dilation 3 */
    {1, 3, 30, 41, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},    /* over the threads' split threshold */
    {1, 33, 19, 23, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1},   /* pointwise over the threshold */
    {1, 32, 21, 45, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 32},  /* depthwise over the threshold */
    /* the CPU's 3x3 pad-1 depthwise path: row pads on one side, right pad
     * or none, stride-2 rows spanning three vectors, a map narrower than one */
    {1, 8, 6, 33, 8, 3, 3, 2, 2, 1, 1, 0, 1, 2, 1, 8},      /* stride 2, pad below only, 17 outputs */
    {1, 8, 11, 50, 8, 3, 3, 2, 1, 1, 1, 1, 1, 1, 0, 8},     /* strides 2x1, no right pad */
    {1, 4, 5, 70, 4, 3, 3, 1, 2, 1, 1, 2, 1, 0, 1, 4},      /* stride 2 along w, 35 outputs, pad above 2 */
    {1, 6, 4, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6},       /* 4x5 map */
    {1, 5, 8, 31, 5, 3, 3, 2, 2, 1, 1, 1, 1, 0, 0, 5},      /* stride 2, no pad right or below */
    /* im2col convs over maps wider than a 32-pixel tile */
    {1, 3, 9, 70, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},     /* first conv, 35 wide: a block of 32 and of 3 */
    {1, 8, 6, 40, 12, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1},     /* dilation 2, 12 outputs (a part block) */
    {1, 8, 5, 36, 10, 3, 3, 1, 1, 1, 1, 1, 0, 1, 2, 2},     /* grouped, pads left 0 right 2 */
    {1, 4, 7, 80, 20, 5, 5, 1, 2, 1, 1, 2, 2, 2, 1, 1},     /* 5x5, strides 1x2 */
    {1, 5, 4, 70, 9, 1, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1},      /* 1x1 stride 2 */
    {2, 3, 40, 96, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},    /* over the threshold, batch 2, 4 channel blocks */
    /* im2col convs the CPU runs in bands of output rows (vision.c: an
     * im2col of 4 or more 96 KiB bands): bands of 12 rows and a last of 3,
     * tiles ending inside a band; one row a band; groups and a batch */
    {1, 3, 101, 150, 10, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},  /* first conv shape, 51x75 out */
    {1, 16, 9, 100, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},   /* K = 144: a band of one row */
    {2, 8, 40, 60, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2},    /* grouped, batch 2: bands of 11 rows and 7 */
};

static const hearth_act ACTS[] = {HEARTH_ACT_NONE, HEARTH_ACT_RELU, HEARTH_ACT_CLIP, HEARTH_ACT_SIGMOID,
                                  HEARTH_ACT_LEAKY_RELU};

static double act_ref(double v, hearth_act a, double lo, double hi)
{
    switch (a) {
    case HEARTH_ACT_RELU: return v > 0 ? v : 0;
    case HEARTH_ACT_CLIP: return v < lo ? lo : v > hi ? hi : v;
    case HEARTH_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case HEARTH_ACT_LEAKY_RELU: return v < 0 ? lo * v : v;
    default: return v;
    }
}

/* want (n, c_out, ho, wo) and its bound (1e-5 of the sum of |terms|) */
static void conv_oracle(const hearth_conv_desc *d, const float *X, const float *W, const float *bias, double *want,
                        double *bound)
{
    int64_t cig = d->c_in / d->groups, cog = d->c_out / d->groups;
    for (int64_t b = 0; b < d->n; b++)
        for (int64_t co = 0; co < d->c_out; co++) {
            int64_t g = co / cog;
            for (int64_t oy = 0; oy < d->h_out; oy++)
                for (int64_t ox = 0; ox < d->w_out; ox++) {
                    double s = bias ? bias[co] : 0, sa = fabs(s);
                    for (int64_t ci = 0; ci < cig; ci++)
                        for (int64_t ki = 0; ki < d->kh; ki++)
                            for (int64_t kj = 0; kj < d->kw; kj++) {
                                int64_t iy = oy * d->stride_h - d->pad_t + ki * d->dil_h;
                                int64_t ix = ox * d->stride_w - d->pad_l + kj * d->dil_w;
                                if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w)
                                    continue;
                                double t = (double)W[((co * cig + ci) * d->kh + ki) * d->kw + kj] *
                                           X[((b * d->c_in + g * cig + ci) * d->h + iy) * d->w + ix];
                                s += t;
                                sa += fabs(t);
                            }
                    int64_t o = ((b * d->c_out + co) * d->h_out + oy) * d->w_out + ox;
                    want[o] = act_ref(s, d->act, d->act_min, d->act_max);
                    bound[o] = 1e-5 * sa; /* the activations here are 1-Lipschitz */
                }
        }
}

static void op_conv(void)
{
    for (size_t i = 0; i < sizeof CONVS / sizeof CONVS[0]; i++) {
        const conv_case *k = &CONVS[i];
        hearth_conv_desc d = {k->n, k->c_in, k->h, k->w, k->c_out, k->kh, k->kw, k->sh, k->sw, k->dh, k->dw,
                              k->pt, k->pl, k->pb, k->pr, k->groups, 0, 0, HEARTH_ACT_NONE, -0.3f, 0.4f, "case"};
        CHECK_EQ_INT(hearth_conv_desc_finish(&d, NULL), 0);
        int64_t nx = d.n * d.c_in * d.h * d.w, nw = d.c_out * (d.c_in / d.groups) * d.kh * d.kw;
        int64_t ny = d.n * d.c_out * d.h_out * d.w_out;
        float *X = frands(nx), *W = frands(nw), *bias = frands(d.c_out), *got = malloc((size_t)ny * sizeof *got);
        double *want = malloc((size_t)ny * sizeof *want), *bound = malloc((size_t)ny * sizeof *bound);
        float *dX = dputf(X, nx), *dY = D->alloc(g_dev, (size_t)ny * sizeof(float), NULL);
        for (size_t a = 0; a < sizeof ACTS / sizeof ACTS[0]; a++)
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                d.act = ACTS[a];
                d.act_min = d.act == HEARTH_ACT_LEAKY_RELU ? 0.1f : -0.3f;
                const float *bp = with_bias ? bias : NULL;
                snprintf(g_where, sizeof g_where, "%s conv[%zu] act %d bias %d", g_dev->caps.name, i, (int)d.act,
                         with_bias);
                hearth_err e = {0};
                hearth_conv *c = V->conv_new(g_dev, &d, W, bp, &e);
                CHECK_MSG(c != NULL, "%s: %s", g_where, e.msg);
                if (!c)
                    continue;
                size_t wb = V->conv_work_bytes(c);
                void *work = wb ? D->alloc(g_dev, wb, NULL) : NULL;
                CHECK_EQ_INT(V->conv(&g_st, c, dX, dY, work), 0);
                dget(got, dY, (size_t)ny * sizeof *got);
                conv_oracle(&d, X, W, bp, want, bound);
                near_all("conv", got, want, bound, ny, 1e-6, 0); /* 1e-5 sum|terms| + 1e-6 */
                /* again over a cleared output: whatever a call leaves behind (a
                 * GPU's split-K tile counters) is ready for the next one */
                float *zeros = calloc((size_t)ny, sizeof *zeros);
                CHECK_EQ_INT(D->upload(&g_st, dY, zeros, (size_t)ny * sizeof *zeros), 0);
                free(zeros);
                CHECK_EQ_INT(V->conv(&g_st, c, dX, dY, work), 0);
                dget(got, dY, (size_t)ny * sizeof *got);
                near_all("conv, second call", got, want, bound, ny, 1e-6, 0);
                if (wb) /* a conv that needs work space refuses to run without it */
                    CHECK_EQ_INT(V->conv(&g_st, c, dX, dY, NULL), HEARTH_EINVAL);
                dfree(work);
                V->conv_free(c);
            }
        dfree(dX);
        dfree(dY);
        free(X);
        free(W);
        free(bias);
        free(got);
        free(want);
        free(bound);
    }
    /* bad geometry is refused at conv_new, naming the conv */
    float w1[16] = {0};
    hearth_conv_desc bad = {1, 6, 5, 5, 4, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 4, 5, 5, HEARTH_ACT_NONE, 0, 0, "bad.conv"};
    hearth_err e = {0};
    CHECK(V->conv_new(g_dev, &bad, w1, NULL, &e) == NULL);
    CHECK(strstr(e.msg, "bad.conv") != NULL);
    V->conv_free(NULL);
}

/* ---- pool2d ---- */

typedef struct pool_case {
    hearth_pool_kind kind;
    int64_t n, c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
    bool cip, ceil_mode;
} pool_case;

static const pool_case POOLS[] = {
    {HEARTH_POOL_MAX, 2, 3, 7, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, false, false},
    {HEARTH_POOL_MAX, 1, 4, 8, 10, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false, false},
    {HEARTH_POOL_MAX, 1, 4, 7, 13, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false, true},
    {HEARTH_POOL_MAX, 1, 3, 11, 13, 3, 3, 1, 1, 2, 2, 2, 1, 2, 1, false, false},
    {HEARTH_POOL_AVG, 2, 3, 7, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, true, false},
    {HEARTH_POOL_AVG, 2, 3, 7, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false},
    {HEARTH_POOL_AVG, 1, 5, 9, 11, 3, 2, 2, 1, 1, 1, 1, 0, 0, 1, true, true},
    {HEARTH_POOL_AVG, 1, 5, 9, 11, 3, 2, 2, 1, 1, 1, 1, 0, 0, 1, false, true},
    {HEARTH_POOL_AVG, 2, 7, 7, 13, 7, 13, 1, 1, 1, 1, 0, 0, 0, 0, false, false}, /* global average */
    {HEARTH_POOL_MAX, 1, 16, 60, 80, 2, 2, 2, 2, 1, 1, 0, 0, 0, 0, false, false}, /* over the threshold */
};

static int64_t pool_out(int64_t in, int64_t p0, int64_t p1, int64_t k, int64_t dil, int64_t s, bool ceil_mode)
{
    int64_t span = in + p0 + p1 - ((k - 1) * dil + 1);
    return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
}

static void op_pool2d(void)
{
    for (size_t i = 0; i < sizeof POOLS / sizeof POOLS[0]; i++) {
        const pool_case *k = &POOLS[i];
        hearth_pool2d_desc d = {k->kind, k->n, k->c, k->h, k->w, k->kh, k->kw, k->sh, k->sw, k->dh, k->dw,
                                k->pt, k->pl, k->pb, k->pr, 0, 0, k->cip};
        d.h_out = pool_out(d.h, d.pad_t, d.pad_b, d.kh, d.dil_h, d.stride_h, k->ceil_mode);
        d.w_out = pool_out(d.w, d.pad_l, d.pad_r, d.kw, d.dil_w, d.stride_w, k->ceil_mode);
        int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.h_out * d.w_out;
        float *X = frands(nx), *got = malloc((size_t)ny * sizeof *got);
        double *want = malloc((size_t)ny * sizeof *want);
        for (int64_t p = 0; p < d.n * d.c; p++)
            for (int64_t oy = 0; oy < d.h_out; oy++)
                for (int64_t ox = 0; ox < d.w_out; ox++) {
                    double best = -INFINITY, sum = 0;
                    int64_t cnt = 0, cnt_pad = 0;
                    for (int64_t ki = 0; ki < d.kh; ki++)
                        for (int64_t kj = 0; kj < d.kw; kj++) {
                            int64_t iy = oy * d.stride_h - d.pad_t + ki * d.dil_h;
                            int64_t ix = ox * d.stride_w - d.pad_l + kj * d.dil_w;
                            cnt_pad += iy < d.h + d.pad_b && ix < d.w + d.pad_r;
                            if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w)
                                continue;
                            double v = X[(p * d.h + iy) * d.w + ix];
                            best = v > best ? v : best;
                            sum += v;
                            cnt++;
                        }
                    want[(p * d.h_out + oy) * d.w_out + ox] =
                        d.kind == HEARTH_POOL_MAX ? best : sum / (double)(d.count_include_pad ? cnt_pad : cnt);
                }
        float *dX = dputf(X, nx), *dY = D->alloc(g_dev, (size_t)ny * sizeof(float), NULL);
        snprintf(g_where, sizeof g_where, "%s pool[%zu]", g_dev->caps.name, i);
        CHECK_EQ_INT(V->pool2d(&g_st, &d, dX, dY), 0);
        dget(got, dY, (size_t)ny * sizeof *got);
        /* max: exact; average: f32 sum of <= 91 terms of |x| <= 1, over a count */
        near_all("pool2d", got, want, NULL, ny, d.kind == HEARTH_POOL_MAX ? 0 : 1e-6, 1e-6);
        dfree(dX);
        dfree(dY);
        free(X);
        free(got);
        free(want);
    }
}

/* ---- binary ---- */

static double bin_ref(hearth_binary_op op, double a, double b)
{
    switch (op) {
    case HEARTH_BIN_ADD: return a + b;
    case HEARTH_BIN_SUB: return a - b;
    case HEARTH_BIN_MUL: return a * b;
    case HEARTH_BIN_DIV: return a / b;
    case HEARTH_BIN_MAX: return a > b ? a : b;
    case HEARTH_BIN_MIN: return a < b ? a : b;
    case HEARTH_BIN_POW: return pow(a, b);
    }
    return 0;
}

typedef struct bin_case {
    int ndim;
    int64_t ya[HEARTH_VIS_DIMS], bd[HEARTH_VIS_DIMS]; /* A's and B's shapes (Y's = the max of each dim) */
} bin_case;

static const bin_case BINS[] = {
    {4, {1, 5, 7, 13}, {1, 5, 1, 1}},     /* per-channel */
    {4, {1, 5, 7, 13}, {1, 1, 1, 1}},     /* scalar */
    {3, {2, 1, 3}, {1, 4, 1}},            /* both broadcast */
    {4, {2, 3, 4, 5}, {2, 3, 4, 5}},      /* same shape */
    {4, {1, 16, 60, 80}, {1, 16, 1, 1}},  /* over the threshold */
    {2, {3, 7}, {3, 1}},
};

static void contiguous_strides(int nd, const int64_t *dims, int64_t *st)
{
    int64_t s = 1;
    for (int k = nd - 1; k >= 0; k--) {
        st[k] = dims[k] == 1 ? 0 : s;
        s *= dims[k];
    }
}

static void op_binary(void)
{
    for (size_t i = 0; i < sizeof BINS / sizeof BINS[0]; i++) {
        const bin_case *k = &BINS[i];
        hearth_binary_desc d = {.ndim = k->ndim};
        int64_t na = 1, nb = 1, ny = 1;
        for (int j = 0; j < k->ndim; j++) {
            d.dims[j] = k->ya[j] > k->bd[j] ? k->ya[j] : k->bd[j];
            na *= k->ya[j];
            nb *= k->bd[j];
            ny *= d.dims[j];
        }
        contiguous_strides(k->ndim, k->ya, d.a_stride);
        contiguous_strides(k->ndim, k->bd, d.b_stride);
        float *A = frands(na), *B = frands(nb), *got = malloc((size_t)ny * sizeof *got);
        double *want = malloc((size_t)ny * sizeof *want);
        for (int op = HEARTH_BIN_ADD; op <= HEARTH_BIN_POW; op++) {
            d.op = (hearth_binary_op)op;
            float *a = malloc((size_t)na * sizeof *a), *b = malloc((size_t)nb * sizeof *b);
            for (int64_t j = 0; j < na; j++) /* pow: a positive base */
                a[j] = op == HEARTH_BIN_POW ? fabsf(A[j]) + 0.1f : A[j];
            for (int64_t j = 0; j < nb; j++) /* div: no divisor near 0 */
                b[j] = op == HEARTH_BIN_DIV ? copysignf(0.5f + fabsf(B[j]), B[j]) : op == HEARTH_BIN_POW ? 3 * B[j] : B[j];
            for (int64_t y = 0; y < ny; y++) {
                int64_t rem = y, ao = 0, bo = 0;
                for (int j = k->ndim - 1; j >= 0; j--) {
                    int64_t ij = rem % d.dims[j];
                    rem /= d.dims[j];
                    ao += ij * d.a_stride[j];
                    bo += ij * d.b_stride[j];
                }
                want[y] = bin_ref(d.op, a[ao], b[bo]);
            }
            float *dA = dputf(a, na), *dB = dputf(b, nb), *dY = D->alloc(g_dev, (size_t)ny * sizeof(float), NULL);
            snprintf(g_where, sizeof g_where, "%s binary[%zu] op %d", g_dev->caps.name, i, op);
            CHECK_EQ_INT(V->binary(&g_st, &d, dA, dB, dY), 0);
            dget(got, dY, (size_t)ny * sizeof *got);
            /* one f32 rounding (pow: powf, a few ulps) */
            near_all("binary", got, want, NULL, ny, 1e-30, op == HEARTH_BIN_POW ? 1e-5 : 1e-6);
            if (na == ny) { /* in place: Y = A */
                CHECK_EQ_INT(V->binary(&g_st, &d, dA, dB, dA), 0);
                dget(got, dA, (size_t)ny * sizeof *got);
                near_all("binary in place", got, want, NULL, ny, 1e-30, op == HEARTH_BIN_POW ? 1e-5 : 1e-6);
            }
            dfree(dA);
            dfree(dB);
            dfree(dY);
            free(a);
            free(b);
        }
        free(A);
        free(B);
        free(got);
        free(want);
    }
    hearth_binary_desc bad = {.op = HEARTH_BIN_ADD, .ndim = 0};
    float one = 1;
    CHECK_EQ_INT(V->binary(&g_st, &bad, &one, &one, &one), HEARTH_EINVAL);
}

/* ---- unary, softmax ---- */

static double un_ref(hearth_unary_op op, double x, double a, double b)
{
    switch (op) {
    case HEARTH_UN_RELU: return x > 0 ? x : 0;
    case HEARTH_UN_SIGMOID: return 1 / (1 + exp(-x));
    case HEARTH_UN_EXP: return exp(x);
    case HEARTH_UN_TANH: return tanh(x);
    case HEARTH_UN_CLIP: return x < a ? a : x > b ? b : x;
    case HEARTH_UN_LEAKY_RELU: return x < 0 ? a * x : x;
    case HEARTH_UN_HARD_SIGMOID: return fmax(0, fmin(1, a * x + b));
    case HEARTH_UN_HARD_SWISH: return x * fmax(0, fmin(1, x / 6 + 0.5));
    case HEARTH_UN_NEG: return -x;
    case HEARTH_UN_SQRT: return sqrt(x);
    case HEARTH_UN_ABS: return fabs(x);
    case HEARTH_UN_LOG: return log(x);
    }
    return 0;
}

static void op_unary(void)
{
    static const int64_t NS[] = {1, 1001, 70001};
    for (size_t s = 0; s < sizeof NS / sizeof NS[0]; s++) {
        int64_t n = NS[s];
        float *X = malloc((size_t)n * sizeof *X), *got = malloc((size_t)n * sizeof *got);
        double *want = malloc((size_t)n * sizeof *want);
        for (int op = HEARTH_UN_RELU; op <= HEARTH_UN_LOG; op++) {
            bool pos = op == HEARTH_UN_SQRT || op == HEARTH_UN_LOG;
            float a = op == HEARTH_UN_HARD_SIGMOID ? 0.2f : op == HEARTH_UN_LEAKY_RELU ? 0.01f : -0.5f;
            float b = op == HEARTH_UN_HARD_SIGMOID ? 0.5f : 0.75f;
            for (int64_t j = 0; j < n; j++) {
                X[j] = 8 * frand();
                X[j] = pos ? fabsf(X[j]) + 1e-3f : X[j];
                want[j] = un_ref((hearth_unary_op)op, X[j], a, b);
            }
            float *dX = dputf(X, n), *dY = D->alloc(g_dev, (size_t)n * sizeof(float), NULL);
            snprintf(g_where, sizeof g_where, "%s unary op %d n %lld", g_dev->caps.name, op, (long long)n);
            CHECK_EQ_INT(V->unary(&g_st, (hearth_unary_op)op, dX, dY, n, a, b), 0);
            dget(got, dY, (size_t)n * sizeof *got);
            /* exact-ish ops to 1e-6 relative; transcendental 1e-5 relative + 1e-7 */
            bool trans = op == HEARTH_UN_SIGMOID || op == HEARTH_UN_EXP || op == HEARTH_UN_TANH || op == HEARTH_UN_LOG;
            near_all("unary", got, want, NULL, n, trans ? 1e-7 : 1e-7, trans ? 1e-5 : 1e-6);
            CHECK_EQ_INT(V->unary(&g_st, (hearth_unary_op)op, dX, dX, n, a, b), 0); /* in place */
            dget(got, dX, (size_t)n * sizeof *got);
            near_all("unary in place", got, want, NULL, n, 1e-7, trans ? 1e-5 : 1e-6);
            dfree(dX);
            dfree(dY);
        }
        free(X);
        free(got);
        free(want);
    }
}

static void op_softmax(void)
{
    static const int64_t SH[][3] = {{3, 7, 5}, {2, 13, 1}, {1, 17, 3001}, {4, 1, 3}};
    for (size_t s = 0; s < sizeof SH / sizeof SH[0]; s++) {
        int64_t outer = SH[s][0], len = SH[s][1], inner = SH[s][2], n = outer * len * inner;
        float *X = frands(n), *got = malloc((size_t)n * sizeof *got);
        double *want = malloc((size_t)n * sizeof *want);
        for (int64_t j = 0; j < n; j++)
            X[j] *= 10;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t in = 0; in < inner; in++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t l = 0; l < len; l++)
                    mx = fmax(mx, X[(o * len + l) * inner + in]);
                for (int64_t l = 0; l < len; l++)
                    sum += exp(X[(o * len + l) * inner + in] - mx);
                for (int64_t l = 0; l < len; l++)
                    want[(o * len + l) * inner + in] = exp(X[(o * len + l) * inner + in] - mx) / sum;
            }
        float *dX = dputf(X, n), *dY = D->alloc(g_dev, (size_t)n * sizeof(float), NULL);
        snprintf(g_where, sizeof g_where, "%s softmax (%lld, %lld, %lld)", g_dev->caps.name, (long long)outer,
                 (long long)len, (long long)inner);
        CHECK_EQ_INT(V->softmax(&g_st, dX, dY, outer, len, inner), 0);
        dget(got, dY, (size_t)n * sizeof *got);
        near_all("softmax", got, want, NULL, n, 1e-7, 1e-5); /* f32 exp and sum: 1e-5 relative + 1e-7 */
        CHECK_EQ_INT(V->softmax(&g_st, dX, dX, outer, len, inner), 0); /* in place */
        dget(got, dX, (size_t)n * sizeof *got);
        near_all("softmax in place", got, want, NULL, n, 1e-7, 1e-5);
        dfree(dX);
        dfree(dY);
        free(X);
        free(got);
        free(want);
    }
}

/* ---- strided copy ---- */

/* Runs d over src (n_src elements of eb bytes) into a dst of n_dst elements
 * prefilled with 0xAB, at dst_off; compares every byte with the oracle's. */
static void strided_check(const char *what, const hearth_strided_desc *d, const void *src, size_t n_src,
                          int64_t src_off, size_t n_dst, int64_t dst_off)
{
    size_t eb = (size_t)d->elem_bytes;
    unsigned char *want = malloc(n_dst * eb), *got = malloc(n_dst * eb);
    memset(want, 0xAB, n_dst * eb);
    int64_t total = 1;
    for (int k = 0; k < d->ndim; k++)
        total *= d->dims[k];
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, so = src_off, dof = dst_off;
        for (int k = d->ndim - 1; k >= 0; k--) {
            int64_t ik = rem % d->dims[k];
            rem /= d->dims[k];
            so += ik * d->src_stride[k];
            dof += ik * d->dst_stride[k];
        }
        memcpy(want + (size_t)dof * eb, (const unsigned char *)src + (size_t)so * eb, eb);
    }
    unsigned char *dS = dput(src, n_src * eb), *dD = D->alloc(g_dev, n_dst * eb, NULL);
    memset(got, 0xAB, n_dst * eb);
    D->upload(&g_st, dD, got, n_dst * eb);
    snprintf(g_where, sizeof g_where, "%s strided %s", g_dev->caps.name, what);
    CHECK_EQ_INT(V->strided_copy(&g_st, d, dS + (size_t)src_off * eb, dD + (size_t)dst_off * eb), 0);
    dget(got, dD, n_dst * eb);
    CHECK_MSG(memcmp(got, want, n_dst * eb) == 0, "%s: bytes differ from the oracle", g_where);
    dfree(dS);
    dfree(dD);
    free(want);
    free(got);
}

static void op_strided(void)
{
    /* transpose (0, 2, 3, 1) of (2, 3, 5, 7): dst (2, 5, 7, 3) contiguous */
    float src[2 * 3 * 5 * 7];
    for (size_t i = 0; i < sizeof src / sizeof src[0]; i++)
        src[i] = (float)i;
    hearth_strided_desc t = {4, 4, {2, 5, 7, 3}, {105, 7, 1, 35}, {105, 21, 3, 1}};
    strided_check("transpose", &t, src, 210, 0, 210, 0);
    /* concat: (1, 3, 4, 5) into channels 2..4 of (1, 8, 4, 5) */
    hearth_strided_desc cat = {4, 4, {1, 3, 4, 5}, {60, 20, 5, 1}, {160, 20, 5, 1}};
    strided_check("concat slice", &cat, src, 60, 0, 160, 40);
    /* negative stride: each row of (6, 35) reversed; src points at a row's end */
    hearth_strided_desc rev = {2, 4, {6, 35}, {35, -1}, {35, 1}};
    strided_check("reverse", &rev, src, 210, 34, 210, 0);
    /* expand: a (1, 3, 1) broadcast to (2, 3, 4) with stride 0, 8-byte elements */
    int64_t s64[3] = {-5, 1LL << 40, 7};
    hearth_strided_desc ex = {3, 8, {2, 3, 4}, {0, 1, 0}, {12, 4, 1}};
    strided_check("expand i64", &ex, s64, 3, 0, 24, 0);
    /* 2-byte and 1-byte elements, a transpose over threshold-sized rows */
    uint16_t s16[300];
    for (int i = 0; i < 300; i++)
        s16[i] = (uint16_t)(i * 7);
    hearth_strided_desc t16 = {2, 2, {20, 15}, {1, 20}, {15, 1}};
    strided_check("transpose u16", &t16, s16, 300, 0, 300, 0);
    hearth_strided_desc t8 = {2, 1, {20, 15}, {1, 20}, {15, 1}};
    strided_check("transpose u8", &t8, s16, 600, 0, 300, 0);
    float *big = frands(16 * 60 * 80);
    hearth_strided_desc tb = {4, 4, {1, 60, 80, 16}, {0, 80, 1, 4800}, {0, 1280, 16, 1}};
    strided_check("transpose nhwc", &tb, big, 16 * 60 * 80, 0, 16 * 60 * 80, 0);
    free(big);
    hearth_strided_desc bad = {1, 3, {4}, {1}, {1}};
    CHECK_EQ_INT(V->strided_copy(&g_st, &bad, src, src), HEARTH_EINVAL);
}

/* ---- resize ---- */

/* The mapped coordinate, in float as ONNX runtimes compute it. */
static float coord_ref(hearth_resize_coord m, int64_t x, float scale, int64_t in, int64_t out)
{
    switch (m) {
    case HEARTH_COORD_HALF_PIXEL: return ((float)x + 0.5f) / scale - 0.5f;
    case HEARTH_COORD_ASYMMETRIC: return (float)x / scale;
    case HEARTH_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? ((float)x + 0.5f) / scale - 0.5f : 0;
    case HEARTH_COORD_ALIGN_CORNERS: return out > 1 ? (float)x * (float)(in - 1) / (float)(out - 1) : 0;
    }
    return 0;
}

static int64_t nearest_ref(hearth_resize_round r, float x, int64_t in)
{
    double f = floor((double)x), frac = (double)x - f, v;
    switch (r) {
    case HEARTH_ROUND_PREFER_FLOOR: v = frac > 0.5 ? f + 1 : f; break;
    case HEARTH_ROUND_PREFER_CEIL: v = frac >= 0.5 ? f + 1 : f; break;
    case HEARTH_ROUND_FLOOR: v = f; break;
    default: v = frac > 0 ? f + 1 : f; break;
    }
    return v < 0 ? 0 : v > (double)(in - 1) ? in - 1 : (int64_t)v;
}

static double linear_ref(const float *x, int64_t w, float fy, float fx, int64_t h)
{
    double cy = fmin(fmax(fy, 0), (double)(h - 1)), cx = fmin(fmax(fx, 0), (double)(w - 1));
    int64_t y0 = (int64_t)cy, x0 = (int64_t)cx, y1 = y0 + 1 < h ? y0 + 1 : y0, x1 = x0 + 1 < w ? x0 + 1 : x0;
    double ly = cy - (double)y0, lx = cx - (double)x0;
    return (1 - ly) * ((1 - lx) * x[y0 * w + x0] + lx * x[y0 * w + x1]) +
           ly * ((1 - lx) * x[y1 * w + x0] + lx * x[y1 * w + x1]);
}

typedef struct resize_case {
    hearth_resize_mode mode;
    hearth_resize_coord coord;
    hearth_resize_round round;
    int64_t n, c, h, w, h_out, w_out;
} resize_case;

static const resize_case RESIZES[] = {
    {HEARTH_RESIZE_NEAREST, HEARTH_COORD_ASYMMETRIC, HEARTH_ROUND_FLOOR, 1, 3, 5, 7, 10, 14},
    {HEARTH_RESIZE_NEAREST, HEARTH_COORD_HALF_PIXEL, HEARTH_ROUND_PREFER_FLOOR, 2, 2, 9, 13, 4, 6},
    {HEARTH_RESIZE_NEAREST, HEARTH_COORD_HALF_PIXEL, HEARTH_ROUND_PREFER_FLOOR, 1, 2, 5, 7, 15, 21},
    {HEARTH_RESIZE_NEAREST, HEARTH_COORD_ASYMMETRIC, HEARTH_ROUND_CEIL, 1, 2, 9, 13, 4, 6},
    {HEARTH_RESIZE_NEAREST, HEARTH_COORD_ALIGN_CORNERS, HEARTH_ROUND_PREFER_CEIL, 1, 2, 5, 7, 9, 13},
    {HEARTH_RESIZE_LINEAR, HEARTH_COORD_HALF_PIXEL, HEARTH_ROUND_PREFER_FLOOR, 1, 2, 5, 7, 11, 16},
    {HEARTH_RESIZE_LINEAR, HEARTH_COORD_HALF_PIXEL, HEARTH_ROUND_PREFER_FLOOR, 1, 2, 9, 13, 4, 5},
    {HEARTH_RESIZE_LINEAR, HEARTH_COORD_ALIGN_CORNERS, HEARTH_ROUND_PREFER_FLOOR, 2, 2, 9, 13, 4, 5},
    {HEARTH_RESIZE_LINEAR, HEARTH_COORD_ALIGN_CORNERS, HEARTH_ROUND_PREFER_FLOOR, 1, 3, 5, 7, 12, 17},
    {HEARTH_RESIZE_LINEAR, HEARTH_COORD_PYTORCH_HALF_PIXEL, HEARTH_ROUND_PREFER_FLOOR, 1, 2, 5, 7, 1, 14},
    {HEARTH_RESIZE_NEAREST, HEARTH_COORD_ASYMMETRIC, HEARTH_ROUND_FLOOR, 1, 16, 30, 40, 60, 80}, /* threshold */
};

static void op_resize(void)
{
    for (size_t i = 0; i < sizeof RESIZES / sizeof RESIZES[0]; i++) {
        const resize_case *k = &RESIZES[i];
        hearth_resize_desc d = {k->mode, k->coord, k->round, k->n, k->c, k->h, k->w, k->h_out, k->w_out,
                                (float)k->h_out / (float)k->h, (float)k->w_out / (float)k->w};
        int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.h_out * d.w_out;
        float *X = frands(nx), *got = malloc((size_t)ny * sizeof *got);
        double *want = malloc((size_t)ny * sizeof *want);
        for (int64_t p = 0; p < d.n * d.c; p++)
            for (int64_t oy = 0; oy < d.h_out; oy++)
                for (int64_t ox = 0; ox < d.w_out; ox++) {
                    float fy = coord_ref(d.coord, oy, d.scale_h, d.h, d.h_out);
                    float fx = coord_ref(d.coord, ox, d.scale_w, d.w, d.w_out);
                    const float *x = X + p * d.h * d.w;
                    want[(p * d.h_out + oy) * d.w_out + ox] =
                        d.mode == HEARTH_RESIZE_NEAREST
                            ? x[nearest_ref(d.round, fy, d.h) * d.w + nearest_ref(d.round, fx, d.w)]
                            : linear_ref(x, d.w, fy, fx, d.h);
                }
        float *dX = dputf(X, nx), *dY = D->alloc(g_dev, (size_t)ny * sizeof(float), NULL);
        snprintf(g_where, sizeof g_where, "%s resize[%zu]", g_dev->caps.name, i);
        CHECK_EQ_INT(V->resize(&g_st, &d, dX, dY), 0);
        dget(got, dY, (size_t)ny * sizeof *got);
        /* nearest: exact; linear: a few f32 roundings of values <= 1 */
        near_all("resize", got, want, NULL, ny, d.mode == HEARTH_RESIZE_NEAREST ? 0 : 1e-6, 0);
        dfree(dX);
        dfree(dY);
        free(X);
        free(got);
        free(want);
    }
}

/* ---- the RFB-320 conv list, timed (HEARTH_VISION_BENCH=1) ---- */

/* (count, c_in, h, w, c_out, k, stride, dilation = pad, groups) of
 * version-RFB-320.onnx's 46 convs, batch 1 */
static const int RFB[][9] = {
    {1, 3, 240, 320, 16, 3, 2, 1, 1},   {1, 16, 120, 160, 16, 3, 1, 1, 16}, {1, 16, 120, 160, 32, 1, 1, 0, 1},
    {1, 32, 120, 160, 32, 3, 2, 1, 32}, {2, 32, 60, 80, 32, 1, 1, 0, 1},    {1, 32, 60, 80, 32, 3, 1, 1, 32},
    {1, 32, 60, 80, 32, 3, 2, 1, 32},   {1, 32, 30, 40, 64, 1, 1, 0, 1},    {4, 64, 30, 40, 64, 3, 1, 1, 64},
    {3, 64, 30, 40, 64, 1, 1, 0, 1},    {3, 64, 30, 40, 8, 1, 1, 0, 1},     {2, 8, 30, 40, 16, 3, 1, 1, 1},
    {1, 8, 30, 40, 12, 3, 1, 1, 1},     {1, 12, 30, 40, 16, 3, 1, 1, 1},    {1, 16, 30, 40, 16, 3, 1, 2, 1},
    {1, 16, 30, 40, 16, 3, 1, 3, 1},    {1, 16, 30, 40, 16, 3, 1, 5, 1},    {1, 48, 30, 40, 64, 1, 1, 0, 1},
    {1, 64, 30, 40, 6, 1, 1, 0, 1},     {1, 64, 30, 40, 12, 1, 1, 0, 1},    {1, 64, 30, 40, 64, 3, 2, 1, 64},
    {1, 64, 15, 20, 128, 1, 1, 0, 1},   {4, 128, 15, 20, 128, 3, 1, 1, 128}, {2, 128, 15, 20, 128, 1, 1, 0, 1},
    {1, 128, 15, 20, 8, 1, 1, 0, 1},    {1, 128, 15, 20, 4, 1, 1, 0, 1},    {1, 128, 15, 20, 128, 3, 2, 1, 128},
    {1, 128, 8, 10, 256, 1, 1, 0, 1},   {3, 256, 8, 10, 256, 3, 1, 1, 256}, {1, 256, 8, 10, 256, 1, 1, 0, 1},
    {1, 256, 8, 10, 8, 1, 1, 0, 1},     {1, 256, 8, 10, 4, 1, 1, 0, 1},     {1, 256, 8, 10, 64, 1, 1, 0, 1},
    {1, 64, 8, 10, 64, 3, 2, 1, 64},    {1, 64, 4, 5, 256, 1, 1, 0, 1},     {1, 256, 4, 5, 6, 3, 1, 1, 1},
    {1, 256, 4, 5, 12, 3, 1, 1, 1},
};

static double now_sec(void)
{
    return (double)hearth_now_ns() * 1e-9;
}

static void bench_rfb(void)
{
    const char *env = getenv("HEARTH_VISION_BENCH");
    if (!env || strcmp(env, "1") != 0)
        return;
    enum { NC = sizeof RFB / sizeof RFB[0] };
    hearth_conv *cs[NC];
    float *xs[NC], *ys[NC];
    void *ws[NC];
    double macs = 0;
    for (int i = 0; i < NC; i++) {
        const int *r = RFB[i];
        hearth_conv_desc d = {1, r[1], r[2], r[3], r[4], r[5], r[5], r[6], r[6], r[7] ? r[7] : 1, r[7] ? r[7] : 1,
                              r[7], r[7], r[7], r[7], r[8], 0, 0, HEARTH_ACT_RELU, 0, 0, "rfb"};
        hearth_conv_desc_finish(&d, NULL);
        float *w = frands(d.c_out * (d.c_in / d.groups) * d.kh * d.kw), *b = frands(d.c_out), *x = frands(d.c_in * d.h * d.w);
        cs[i] = V->conv_new(g_dev, &d, w, b, NULL);
        xs[i] = dputf(x, d.c_in * d.h * d.w);
        ys[i] = D->alloc(g_dev, (size_t)(d.c_out * d.h_out * d.w_out) * sizeof(float), NULL);
        size_t wb = cs[i] ? V->conv_work_bytes(cs[i]) : 0;
        ws[i] = wb ? D->alloc(g_dev, wb, NULL) : NULL;
        macs += (double)r[0] * (double)(d.c_out * d.h_out * d.w_out) * (double)((d.c_in / d.groups) * d.kh * d.kw);
        free(w);
        free(b);
        free(x);
    }
    double best = 1e30, per[NC] = {0};
    for (int rep = 0; rep < 30; rep++) {
        double t0 = now_sec();
        for (int i = 0; i < NC; i++) {
            double a = now_sec();
            for (int k = 0; k < RFB[i][0]; k++)
                if (cs[i])
                    V->conv(&g_st, cs[i], xs[i], ys[i], ws[i]);
            double e = now_sec() - a;
            per[i] = rep == 0 || e < per[i] ? e : per[i];
        }
        D->sync(&g_st);
        double t = now_sec() - t0;
        best = t < best ? t : best;
    }
    fprintf(stderr, "  bench %s, %d threads: RFB-320 convs %.3f ms per frame (best of 30), %.3f GMAC, %.1f GMAC/s\n",
            g_dev->caps.name, hearth_pool_size(g_st.pool), best * 1e3, macs * 1e-9, macs * 1e-9 / best);
    const char *detail = getenv("HEARTH_VISION_BENCH_DETAIL");
    for (int i = 0; detail && i < NC; i++)
        fprintf(stderr, "    x%d %3d->%3d %3dx%3d k%d s%d d%d g%d: %.3f ms\n", RFB[i][0], RFB[i][1], RFB[i][4],
                RFB[i][2], RFB[i][3], RFB[i][5], RFB[i][6], RFB[i][7], RFB[i][8], per[i] * 1e3);
    for (int i = 0; i < NC; i++) {
        V->conv_free(cs[i]);
        dfree(xs[i]);
        dfree(ys[i]);
        dfree(ws[i]);
    }
}

/* ---- every case on every device with a vision table, no pool and 2 threads ---- */

static void (*const CASES[])(void) = {op_conv, op_pool2d, op_binary, op_unary, op_softmax, op_strided, op_resize};
static const char *const CASE_NAMES[] = {"conv", "pool2d", "binary", "unary", "softmax", "strided", "resize"};

static void every_vision_op_on_every_device(void)
{
    CHECK(hearth_dev_count() >= 1);
    CHECK(hearth_dev_get(0)->ops->vision != NULL); /* the CPU always has one */
    for (int di = 0; di < hearth_dev_count(); di++) {
        g_dev = hearth_dev_get(di);
        D = g_dev->ops;
        V = D->vision;
        if (!V)
            continue;
        bool cpu = V == &hearth_cpu_vision_ops;
        hearth_cpu_isa best = hearth_cpu_vision_isa();
        for (int isa = (int)best; isa >= (cpu ? (int)HEARTH_ISA_SCALAR : (int)best); isa--) {
            if (cpu && hearth_cpu_vision_set_isa((hearth_cpu_isa)isa) != 0)
                continue;
            const char *isa_name = cpu ? hearth_cpu_isa_name((hearth_cpu_isa)isa) : "device";
            for (int threads = 1; threads <= 2; threads++) {
                hearth_pool *pool = threads > 1 ? hearth_pool_new(threads) : NULL;
                for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
                    int before = hearth_test_case_failed;
                    hearth_test_case_failed = 0;
                    CHECK_EQ_INT(hearth_stream_init(&g_st, g_dev, pool, NULL), 0);
                    fprintf(stderr, "  device %s (%s), %d threads: %s ...\n", g_dev->caps.name, isa_name, threads,
                            CASE_NAMES[c]);
                    CASES[c]();
                    hearth_stream_deinit(&g_st);
                    if (hearth_test_case_failed)
                        fprintf(stderr, "  device %s (%s), %d threads: %s failed\n", g_dev->caps.name, isa_name,
                                threads, CASE_NAMES[c]);
                    hearth_test_case_failed |= before;
                }
                if (threads == 1) {
                    CHECK_EQ_INT(hearth_stream_init(&g_st, g_dev, NULL, NULL), 0);
                    bench_rfb();
                    hearth_stream_deinit(&g_st);
                }
                hearth_pool_free(pool);
            }
        }
        if (cpu) {
            CHECK_EQ_INT(hearth_cpu_vision_set_isa(best), 0);
            CHECK_EQ_INT(hearth_cpu_vision_set_isa(HEARTH_ISA_COUNT_), HEARTH_EUNSUPPORTED);
        }
    }
}

int main(void)
{
    RUN(every_vision_op_on_every_device);
    TEST_EXIT();
}

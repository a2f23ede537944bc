/* vision.h: the CPU's conv-net ops (engine/dev_vision.h), private to
 * src/engine.
 *
 * vision.c holds the table, conv_new (the kernel choice and the weight
 * layout) and the split of every op over the stream's pool; vision_ref.c
 * the scalar version of every op (the oracle and the fallback for any shape
 * a SIMD kernel does not take); vision_conv_avx512.c the GEMM tile behind
 * 1x1 and im2col convs and the im2col itself; vision_dw_avx512.c the
 * depthwise conv; vision_elem_avx512.c the elementwise ops; the _avx2.c
 * files their twins for CPUs without AVX-512. This header is what they
 * share: the placed conv, the kernels' entry points and the fused
 * activation. */
#ifndef HEARTH_ENGINE_CPU_VISION_H
#define HEARTH_ENGINE_CPU_VISION_H

#include "engine/cpu/matmul.h"
#include "engine/dev_vision.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* The CPU's table (dev_cpu.c hangs it off cpu_ops.vision). */
extern const hearth_dev_vision_ops hearth_cpu_vision_ops;

/* The kernels this CPU's vision ops use: the best the CPU has
 * (hearth_cpu_matmul_isa), unless a test chose another with
 * hearth_cpu_vision_set_isa (one it has: anything else is refused). A conv
 * keeps the ISA it was placed with. */
hearth_cpu_isa hearth_cpu_vision_isa(void);
int hearth_cpu_vision_set_isa(hearth_cpu_isa isa);

/* GEMM tile: VIS_MR output channels x VIS_NR output pixels (two zmm). */
#define VIS_MR 8
#define VIS_NR 32

typedef enum vis_conv_kind {
    VIS_CONV_REF = 0, /* vision_ref.c's direct loops (no SIMD kernel takes the shape, or none on this CPU) */
    VIS_CONV_GEMM,    /* per group: Y (cout_g, HWo) = W (cout_g, K) B (K, HWo), B = X or its im2col */
    VIS_CONV_DW,      /* depthwise (groups == c_in == c_out), direct along W */
} vis_conv_kind;

struct hearth_conv {
    hearth_conv_desc d;     /* finished; name not kept (it is borrowed) */
    vis_conv_kind kind;
    hearth_cpu_isa isa;     /* the kernels it runs: hearth_cpu_vision_isa() at conv_new */
    int64_t cin_g, cout_g;  /* channels per group */
    int64_t K;              /* cin_g * kh * kw: a GEMM's inner dim */
    bool im2col;            /* GEMM: B is the im2col of X in the work buffer (else X itself: 1x1, stride 1, no pad) */
    int64_t band;           /* im2col GEMM: output rows per band (each band's im2col built and used at once), 0: whole map */
    float *w;               /* (c_out, cin_g, kh, kw) as given (REF and DW read it) */
    float *bias;            /* (c_out), zeros when the model has none */
    float *panels;          /* GEMM: (groups, ceil(cout_g / MR), K, MR), zero rows past cout_g */
    /* GEMM: the tile kernel for isa (hearth_vis_gemm_avx512, _avx2 or _ref) */
    void (*gemm)(const hearth_conv *c, const float *panels, const float *B, int64_t ldb, float *Y, int64_t ldy,
                 int64_t npx, const float *bias, int64_t t0, int64_t t1);
};

/* GEMM tile t of a span of npx pixels of one group (t = pb n_cb + cb,
 * pixel block first): its channel block cb, first pixel px0 (in the span)
 * and channel co0, and how many pixels (nc <= VIS_NR) and channels (mr <=
 * VIS_MR) it holds; what every tile kernel (ref, AVX2, AVX-512) decodes its
 * range into. */
typedef struct vis_tile {
    int64_t cb, px0, co0, nc, mr;
} vis_tile;

static inline vis_tile vis_tile_of(const hearth_conv *c, int64_t t, int64_t npx)
{
    int64_t n_cb = (c->cout_g + VIS_MR - 1) / VIS_MR;
    vis_tile T = {.cb = t % n_cb, .px0 = t / n_cb * VIS_NR};
    T.co0 = T.cb * VIS_MR;
    T.nc = npx - T.px0 < VIS_NR ? npx - T.px0 : VIS_NR;
    T.mr = c->cout_g - T.co0 < VIS_MR ? c->cout_g - T.co0 : VIS_MR;
    return T;
}

/* The activation fused into a conv's output, as dev_vision.h defines it. */
static inline float vis_act(float v, const hearth_conv_desc *d)
{
    switch (d->act) {
    case HEARTH_ACT_RELU: return v > 0 ? v : 0;
    case HEARTH_ACT_CLIP: return fminf(fmaxf(v, d->act_min), d->act_max);
    case HEARTH_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case HEARTH_ACT_LEAKY_RELU: return v < 0 ? d->act_min * v : v;
    default: return v;
    }
}

/* ---- scalar (vision_ref.c) ---- */

/* Output planes [p0, p1) of the (n * c_out) planes of Y, direct loops. */
void hearth_vis_conv_ref(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1);
/* Rows [k0, k1) of the im2col of output rows [oy0, oy1) of group g of
 * image X (c_in, h, w): B[(ci, ki, kj) ldb + (oy - oy0) w_out + ox] =
 * X[g * cin_g + ci, iy, ix], 0 in the padding. The whole map: oy0 = 0, oy1
 * = h_out, ldb = h_out w_out. */
void hearth_vis_im2col(const hearth_conv *c, const float *X, int64_t g, float *B, int64_t ldb, int64_t oy0,
                       int64_t oy1, int64_t k0, int64_t k1);
/* GEMM tiles of a span of npx output pixels of one group, in order t = pb
 * n_cb + cb, for t in [t0, t1): Y[co, p] (row stride ldy) = act(panels
 * B[., p] (row stride ldb) + bias) for p in the span. Scalar. */
void hearth_vis_gemm_ref(const hearth_conv *c, const float *panels, const float *B, int64_t ldb, float *Y,
                         int64_t ldy, int64_t npx, const float *bias, int64_t t0, int64_t t1);
/* Planes [p0, p1) of a pool (n * c planes). */
void hearth_vis_pool2d_ref(const hearth_pool2d_desc *d, const float *X, float *Y, int64_t p0, int64_t p1);
/* Elements [i0, i1) of Y (rows of the last dim start anywhere). */
void hearth_vis_binary_ref(const hearth_binary_desc *d, const float *A, const float *B, float *Y, int64_t i0,
                           int64_t i1);
void hearth_vis_unary_ref(hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b);
/* Columns (outer, inner) pairs [j0, j1) of the (outer * inner) softmax columns. */
void hearth_vis_softmax_ref(const float *X, float *Y, int64_t len, int64_t inner, int64_t j0, int64_t j1);
/* Rows [r0, r1) of the dims before the last (flattened), each the whole last dim. */
void hearth_vis_strided_ref(const hearth_strided_desc *d, const void *src, void *dst, int64_t r0, int64_t r1);
/* Output rows [r0, r1) of the (n * c * h_out) rows. */
void hearth_vis_resize_ref(const hearth_resize_desc *d, const float *X, float *Y, int64_t r0, int64_t r1);

/* Whether the SIMD unary kernels (hearth_vis_unary_avx512, _avx2) have op in
 * vectors (else they call the scalar twin); one list for both (vision.c). */
bool hearth_vis_unary_simd_takes(hearth_unary_op op);
/* Whether the SIMD depthwise kernels (hearth_vis_dw_avx512, _avx2) take d's
 * shape (strides 1 or 2 along W; vision.c). */
bool hearth_vis_dw_simd_takes(const hearth_conv_desc *d);

/* ---- AVX-512 (vision_conv_avx512.c, vision_dw_avx512.c, vision_elem_avx512.c) ---- */

/* As hearth_vis_gemm_ref. */
void hearth_vis_gemm_avx512(const hearth_conv *c, const float *panels, const float *B, int64_t ldb, float *Y,
                            int64_t ldy, int64_t npx, const float *bias, int64_t t0, int64_t t1);
/* Planes [p0, p1) of the (n * c) planes, as hearth_vis_conv_ref. */
void hearth_vis_dw_avx512(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1);
/* As hearth_vis_im2col (B row by row, the strided copies in vectors). */
void hearth_vis_im2col_avx512(const hearth_conv *c, const float *X, int64_t g, float *B, int64_t ldb, int64_t oy0,
                              int64_t oy1, int64_t k0, int64_t k1);
/* As hearth_vis_unary_ref. */
void hearth_vis_unary_avx512(hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b);

/* ---- AVX2 (vision_conv_avx2.c, vision_dw_avx2.c, vision_elem_avx2.c): the same contracts ---- */

void hearth_vis_gemm_avx2(const hearth_conv *c, const float *panels, const float *B, int64_t ldb, float *Y,
                          int64_t ldy, int64_t npx, const float *bias, int64_t t0, int64_t t1);
void hearth_vis_dw_avx2(const hearth_conv *c, const float *X, float *Y, int64_t p0, int64_t p1);
void hearth_vis_im2col_avx2(const hearth_conv *c, const float *X, int64_t g, float *B, int64_t ldb, int64_t oy0,
                            int64_t oy1, int64_t k0, int64_t k1);
void hearth_vis_unary_avx2(hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b);

#endif

/* matmul_impl.h: the kernel table each ISA file provides, private to
 * src/engine/cpu (and the tests, which compare the tables entry by entry).
 *
 * The driver in matmul.c owns threading, X buffers and the f32 GEMM's
 * blocking; an ISA file provides the inner loops: a dot product per weight
 * type, an f32 GEMM micro-tile over a packed weight panel and the vector code
 * that fills the panel, and optionally (AVX-512) an integer GEMM and row dots
 * on planar X for the quantized types, each with its X quantizer. */
#ifndef HEARTH_ENGINE_CPU_MATMUL_IMPL_H
#define HEARTH_ENGINE_CPU_MATMUL_IMPL_H

#include "engine/cpu/quant.h"

#include <stdint.h>

/* The f32 GEMM's K slice: panels are at most this deep. A multiple of every
 * block size, so slices never split a block. */
#define HEARTH_GEMM_KC 256

/* Memory the driver reads after the tiles now running (the next panels): a
 * tile may prefetch up to kc of its 64-byte lines, one per k step, and
 * advance at and lines past them (matmul.c, "Fetching ahead"). A hint: a
 * tile that ignores it computes the same. */
typedef struct hearth_gemm_ahead {
    const char *at;
    int64_t lines;
} hearth_gemm_ahead;

/* The weight panel layout the GEMM tile reads: kc rows of nr_max floats,
 * element [k][j] = W[n0 + j][k0 + k] (zero past the last row of W), 64-byte
 * aligned. ahead may be NULL. */
typedef void (*hearth_gemm_tile_fn)(const float *x, int64_t ldx, const float *panel, int64_t kc, float *y,
                                    int64_t ldy, int mr, int nr, int accumulate, hearth_gemm_ahead *ahead);

/* The same on a panel of f16 values in that layout (2-byte elements, 64-byte
 * aligned): F16 weights prepacked as they are, widened in registers. */
typedef void (*hearth_gemm_tile_f16_fn)(const float *x, int64_t ldx, const uint16_t *panel, int64_t kc, float *y,
                                        int64_t ldy, int mr, int nr, int accumulate, hearth_gemm_ahead *ahead);

/* n elements of a weight row (n a multiple of the type's block) to f32. */
typedef void (*hearth_to_f32_fn)(const void *src, float *dst, int64_t n);
/* Panels in the layout above from n_rows rows of kc elements (any n_rows:
 * ceil(n_rows / nr_max) consecutive panels of kc * nr_max floats, the last
 * zero-padded), f32 or (for pack_raw) of the weight type. kc <=
 * HEARTH_GEMM_KC. */
typedef void (*hearth_pack_fn)(const void *const *rows, int n_rows, int64_t kc, float *panel);

/* The same layout in f16 (2-byte elements) from n_rows rows of F16. */
typedef void (*hearth_pack16_fn)(const void *const *rows, int n_rows, int64_t kc, uint16_t *panel);

/* X quantized for the integer GEMM, M rows: u, K bytes per row, holds the
 * q8a values + 128 (vpdpbusd's unsigned operand); d and s, K / 32 per row,
 * the q8a block scales and d * sum(q). */
typedef struct hearth_qx {
    uint8_t *u;
    float *d, *s;
    int64_t M, K;
} hearth_qx;
/* Row m of X (K floats) into qx. */
typedef void (*hearth_qx_row_fn)(const float *x, hearth_qx *qx, int64_t m);
/* Y[0..M)[n0..n1) = X W^T for W rows [n0, n1) of a q8a type, X given as qx.
 * Returns 0 or HEARTH_ENOMEM (its panel buffer). */
typedef int (*hearth_qgemm_fn)(const void *W, size_t w_row_bytes, int64_t n0, int64_t n1, const hearth_qx *qx,
                               float *Y, int64_t ldy);

/* X for the decode kernels that take it planar, M rows: q, K int8 per row
 * (hearth_quant_q8a_row's values); d, K / 32 per row, their scales; s16,
 * K / 16 per row, d * sum(q) over each 16 elements. */
typedef struct hearth_qv {
    int8_t *q;
    float *d, *s16;
    int64_t M, K;
} hearth_qv;
typedef void (*hearth_qv_row_fn)(const float *x, hearth_qv *qv, int64_t m);
/* Row of W . one X row of qv (x, d, s16 point at that row). */
typedef float (*hearth_qv_dot_fn)(const void *w, const int8_t *x, const float *d, const float *s16, int64_t n);
/* The same for two rows of W at once (out[0] for w0, out[1] for w1): each
 * X load serves both. */
typedef void (*hearth_qv_dot2_fn)(const void *w0, const void *w1, const int8_t *x, const float *d, const float *s16,
                                  int64_t n, float out[2]);

typedef struct hearth_cpu_kernels {
    const char *name;
    /* row of W . x, x as quant.h's vec_dot says; NULL = the scalar one */
    hearth_vec_dot_fn vec_dot[HEARTH_DTYPE_COUNT_];
    int mr_max, nr_max; /* GEMM micro-tile: up to mr_max X rows by nr_max W rows */
    /* Y[0..mr)[0..nr) = (or +=, when accumulate) X[0..mr)[0..kc) . panel */
    hearth_gemm_tile_fn gemm_tile;
    hearth_gemm_tile_f16_fn gemm_tile_f16; /* NULL = F16 weights are not prepacked as f16 */
    hearth_pack16_fn pack_f16_f16;         /* f16 panels of F16 rows; set with gemm_tile_f16 */
    /* weight rows into panels; NULL = hearth_quant_dequantize_row / a scalar loop */
    hearth_to_f32_fn to_f32[HEARTH_DTYPE_COUNT_];
    hearth_pack_fn pack_panel;
    /* straight from W rows of these types, no f32 row buffer; NULL = none */
    hearth_pack_fn pack_raw[HEARTH_DTYPE_COUNT_];
    /* integer GEMM per q8a type (replaces the f32 panel); NULL = none */
    hearth_qgemm_fn qgemm[HEARTH_DTYPE_COUNT_];
    hearth_qx_row_fn qx_row;
    /* row dots on planar X, replacing vec_dot where set */
    hearth_qv_dot_fn qv_dot[HEARTH_DTYPE_COUNT_];
    hearth_qv_dot2_fn qv_dot2[HEARTH_DTYPE_COUNT_]; /* optional, where qv_dot is set */
    hearth_qv_row_fn qv_row;
} hearth_cpu_kernels;

/* The AVX-512 planar-X row dots (qdot_avx512.c). */
void hearth_qv_row_avx512(const float *x, hearth_qv *qv, int64_t m);
float hearth_qv_dot_q4_0_avx512(const void *w, const int8_t *x, const float *d, const float *s16, int64_t n);
float hearth_qv_dot_q4_k_avx512(const void *w, const int8_t *x, const float *d, const float *s16, int64_t n);
void hearth_qv_dot2_q4_k_avx512(const void *w0, const void *w1, const int8_t *x, const float *d, const float *s16,
                                int64_t n, float out[2]);
float hearth_qv_dot_q6_k_avx512(const void *w, const int8_t *x, const float *d, const float *s16, int64_t n);

/* The AVX-512 VNNI integer GEMM (qgemm_avx512.c). */
void hearth_qx_row_avx512(const float *x, hearth_qx *qx, int64_t m);
int hearth_qgemm_q8_0_avx512(const void *W, size_t w_row_bytes, int64_t n0, int64_t n1, const hearth_qx *qx,
                             float *Y, int64_t ldy);
int hearth_qgemm_q4_0_avx512(const void *W, size_t w_row_bytes, int64_t n0, int64_t n1, const hearth_qx *qx,
                             float *Y, int64_t ldy);
int hearth_qgemm_q4_k_avx512(const void *W, size_t w_row_bytes, int64_t n0, int64_t n1, const hearth_qx *qx,
                             float *Y, int64_t ldy);
int hearth_qgemm_q6_k_avx512(const void *W, size_t w_row_bytes, int64_t n0, int64_t n1, const hearth_qx *qx,
                             float *Y, int64_t ldy);

extern const hearth_cpu_kernels hearth_cpu_kernels_scalar;
extern const hearth_cpu_kernels hearth_cpu_kernels_avx2;
extern const hearth_cpu_kernels hearth_cpu_kernels_avx512;

/* FMA throughput loops for hearth_cpu_peak_gflops: run until deadline (ns,
 * hearth_now_ns clock) and return the flops done. */
uint64_t hearth_peak_fma_avx2(uint64_t deadline_ns);
uint64_t hearth_peak_fma_avx512(uint64_t deadline_ns);

#endif

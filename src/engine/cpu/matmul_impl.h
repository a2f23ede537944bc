/* matmul_impl.h: the kernel table each ISA file provides, private to
 * src/engine/cpu (and the tests, which compare the tables entry by entry).
 *
 * The driver in matmul.c owns threading, buffers and blocking; an ISA file
 * provides only the two inner loops: a dot product per weight type, and an
 * f32 GEMM micro-tile over a packed weight panel. */
#ifndef HEARTH_ENGINE_CPU_MATMUL_IMPL_H
#define HEARTH_ENGINE_CPU_MATMUL_IMPL_H

#include "engine/cpu/quant.h"

#include <stdint.h>

/* The weight panel layout the GEMM tile reads: kc rows of nr_max floats,
 * element [k][j] = W[n0 + j][k0 + k] (zero past the last row of W), 64-byte
 * aligned. */
typedef void (*hearth_gemm_tile_fn)(const float *x, int64_t ldx, const float *panel, int64_t kc, float *y,
                                    int64_t ldy, int mr, int nr, int accumulate);

/* n elements of a weight row (n a multiple of the type's block) to f32. */
typedef void (*hearth_to_f32_fn)(const void *src, float *dst, int64_t n);
/* The panel above from n_rows (<= nr_max) f32 rows of kc elements. */
typedef void (*hearth_pack_fn)(const float *const *rows, int n_rows, int64_t kc, float *panel);

typedef struct hearth_cpu_kernels {
    const char *name;
    /* row of W . x, x as quant.h's vec_dot says; NULL = the scalar one */
    hearth_vec_dot_fn vec_dot[HEARTH_DTYPE_COUNT_];
    int mr_max, nr_max; /* GEMM micro-tile: up to mr_max X rows by nr_max W rows */
    /* Y[0..mr)[0..nr) = (or +=, when accumulate) X[0..mr)[0..kc) . panel */
    hearth_gemm_tile_fn gemm_tile;
    /* weight rows into panels; NULL = hearth_quant_dequantize_row / a scalar loop */
    hearth_to_f32_fn to_f32[HEARTH_DTYPE_COUNT_];
    hearth_pack_fn pack_panel;
} hearth_cpu_kernels;

extern const hearth_cpu_kernels hearth_cpu_kernels_scalar;
extern const hearth_cpu_kernels hearth_cpu_kernels_avx2;
extern const hearth_cpu_kernels hearth_cpu_kernels_avx512;

/* FMA throughput loops for hearth_cpu_peak_gflops: run until deadline (ns,
 * hearth_now_ns clock) and return the flops done. */
uint64_t hearth_peak_fma_avx2(uint64_t deadline_ns);
uint64_t hearth_peak_fma_avx512(uint64_t deadline_ns);

#endif

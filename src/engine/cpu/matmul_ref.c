/* matmul_ref.c: the scalar oracle, and the portable-C kernel table used when
 * the CPU has neither AVX2 nor AVX-512.
 *
 * The oracle is deliberately simple and independent of the fast paths: it
 * dequantizes each W row with quant_ref.c and accumulates every dot product
 * in double against the unquantized X, so tests measure each fast path's
 * real error (including the q8a rounding of X) rather than agreement with a
 * copy of itself. The portable table uses the scalar dot products of
 * quant_ref.c and a plain 4x8 GEMM tile. */
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_impl.h"

#include "base/err.h"

#include <stdlib.h>

int hearth_cpu_matmul_ref(hearth_pool *pool, hearth_dtype wt, const void *W, size_t w_row_bytes, int64_t N,
                          int64_t K, const float *X, int64_t x_stride, int64_t M, float *Y, int64_t y_stride)
{
    (void)pool; /* serial on purpose: the oracle should have nothing to get wrong */
    size_t row_bytes;
    if (N < 0 || M < 0 || !hearth_dtype_row_bytes(wt, K, &row_bytes) || row_bytes > w_row_bytes ||
        x_stride < K || y_stride < N)
        return HEARTH_EINVAL;
    float *row = malloc((size_t)(K > 0 ? K : 1) * sizeof *row);
    if (!row)
        return HEARTH_ENOMEM;
    for (int64_t n = 0; n < N; n++) {
        hearth_quant_dequantize_row(wt, (const char *)W + (size_t)n * w_row_bytes, row, K);
        for (int64_t m = 0; m < M; m++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)row[k] * X[m * x_stride + k];
            Y[m * y_stride + n] = (float)acc;
        }
    }
    free(row);
    return 0;
}

static void tile_scalar(const float *x, int64_t ldx, const float *p, int64_t kc, float *y, int64_t ldy, int mr, int nr,
                        int accumulate, hearth_gemm_ahead *ahead)
{
    (void)ahead; /* a hint for vector tiles */
    float c[4][8] = {{0}};
    for (int64_t k = 0; k < kc; k++)
        for (int r = 0; r < mr; r++)
            for (int j = 0; j < 8; j++)
                c[r][j] += x[r * ldx + k] * p[8 * k + j];
    for (int r = 0; r < mr; r++)
        for (int j = 0; j < nr; j++)
            y[r * ldy + j] = accumulate ? y[r * ldy + j] + c[r][j] : c[r][j];
}

const hearth_cpu_kernels hearth_cpu_kernels_scalar = {
    .name = "scalar",
    .vec_dot = {NULL}, /* the driver falls back to hearth_quant_vec_dot_ref_fn */
    .mr_max = 4,
    .nr_max = 8,
    .gemm_tile = tile_scalar,
};

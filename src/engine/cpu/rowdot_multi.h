/* rowdot_multi.h: multi-row row dots for batched decode, private to
 * src/engine/cpu (and the tests).
 *
 * With continuous batching a decode step is one matmul with M = the number
 * of live sequences (2..15 rows of X). These kernels read each W row once,
 * unpack each of its blocks once, and dot it with up to HEARTH_MDOT_ROWS X
 * rows held in registers, one vector accumulator per X row, reduced
 * horizontally once per output element. X is first copied into a
 * chunk-interleaved form (hearth_mx) so that every X load in the inner loop
 * is a constant offset from one pointer. */
#ifndef HEARTH_ENGINE_CPU_ROWDOT_MULTI_H
#define HEARTH_ENGINE_CPU_ROWDOT_MULTI_H

#include "base/pool.h"
#include "engine/cpu/matmul.h"
#include "engine/dtype.h"

#include <stddef.h>
#include <stdint.h>

#define HEARTH_MDOT_ROWS 8 /* X rows per kernel call at most */

/* X, M rows of K, for the multi-row kernels; Kp = K rounded up to 256 and
 * everything past K is zero, so X loads never need masks.
 * Quantized weight types (X as the q8a values of hearth_quant_q8a_row), per
 * 256-element piece p and row m, at (p * M + m) * (piece bytes):
 *   q    [Kp / 256][M][256] int8 values in group order: byte 64c + 4l + b
 *        is element 16l + 4c + b of the piece (int32 lane l of each 64-byte
 *        chunk c holds 4 elements of the 16-element group l)
 *   dxl  [Kp / 256][M][16]  the q8a block scale of group l (block l / 2)
 *   s16  [Kp / 256][M][16]  d * sum(q) over group l
 * F32 / F16 / BF16:
 *   xf   [Kp / 16][M][16]   X itself, row m of chunk c at (c * M + m) * 16 */
typedef struct hearth_mx {
    int8_t *q;
    float *dxl, *s16, *xf;
    int64_t M, K, Kp;
} hearth_mx;

/* Y[r * ldy] = W row w . X row m0 + r, for r in [0, R), R fixed per function. */
typedef void (*hearth_mdot_fn)(const void *w, const hearth_mx *mx, int64_t m0, float *y, int64_t ldy);
/* Row m of X (K floats) into mx's quantized arrays (q, dxl, s16; the
 * padding past K included). */
typedef void (*hearth_mx_row_fn)(const float *x, hearth_mx *mx, int64_t m);

typedef struct hearth_mdot_kernels {
    /* dot[t][R] for R = 1..HEARTH_MDOT_ROWS; NULL row = type not covered */
    hearth_mdot_fn dot[HEARTH_DTYPE_COUNT_][HEARTH_MDOT_ROWS + 1];
    hearth_mx_row_fn q_row;
} hearth_mdot_kernels;

extern const hearth_mdot_kernels hearth_mdot_kernels_avx512;

/* The table of isa, or NULL where it has none. */
const hearth_mdot_kernels *hearth_mdot_kernels_of(hearth_cpu_isa isa);

/* Whether hearth_rowdot_multi covers (isa, wt, M): any M, where the ISA
 * has kernels for wt. At M = 1 they are as fast as the single-row kernels
 * or faster (Zen 4, 2 threads, 2048 x 768, GB/s old / new: f32 29 / 29,
 * f16 19 / 21, bf16 16 / 20, q8_0 28 / 32, q4_0 16 / 19, q4_k 21 / 20,
 * q6_k 30 / 32). */
int hearth_rowdot_multi_has(hearth_cpu_isa isa, hearth_dtype wt, int64_t M);

/* Y = X W^T as hearth_cpu_matmul_on says, through the multi-row kernels;
 * arguments already checked by the caller (N, M, K > 0, K a multiple of the
 * type's block). Returns 0 or HEARTH_ENOMEM (X's interleaved copy). The
 * group call below with one output. */
int hearth_rowdot_multi(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype wt, const void *W,
                        size_t w_row_bytes, int64_t N, int64_t K, const float *X, int64_t x_stride, int64_t M,
                        float *Y, int64_t y_stride);

/* The same for n outputs of one X (hearth_cpu_matmul_group_on): X into its
 * interleaved form once, then one pool job whose tasks cover every output's
 * W rows. Arguments already checked by the caller: 1 <= n <=
 * HEARTH_MM_GROUP_MAX, M, K > 0, every output valid for K (N may be 0) and
 * covered by hearth_rowdot_multi_has, and all outputs reading the same form
 * of X: every type hearth_quant_uses_q8a, or none (the two halves of
 * hearth_mx). Types may differ otherwise. Returns 0 or HEARTH_ENOMEM. */
int hearth_rowdot_multi_group(hearth_cpu_isa isa, hearth_pool *pool, const hearth_cpu_mm_out *outs, int n,
                              int64_t K, const float *X, int64_t x_stride, int64_t M);

#endif

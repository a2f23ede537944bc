/* rowdot_multi.c: the driver of the multi-row row dots (rowdot_multi.h):
 * X into its interleaved form once per call, then W rows split over the
 * pool, each W row dotted with groups of up to HEARTH_MDOT_ROWS X rows.
 *
 * M > HEARTH_MDOT_ROWS is cut into ceil(M / 8) groups of near-equal size
 * (9 = 5 + 4, not 8 + 1: a group costs about the same whatever its size, so
 * equal groups waste least). A W row is re-read once per group, from L1.
 *
 * Rejected: two W rows per kernel call (halves the X loads, but the work
 * per (W row, X row) pair, which dominates, stays the same; the X loads'
 * pressure on the load queue is answered by prefetching W instead, see
 * rowdot_multi_avx512.c). Not tried: an AVX2 table (AVX2 machines keep the
 * single-row kernels). */
#include "engine/cpu/rowdot_multi.h"
#include "engine/cpu/scratch.h"

#include "base/err.h"
#include "engine/cpu/quant.h"

#include <stdlib.h>
#include <string.h>

const hearth_mdot_kernels *hearth_mdot_kernels_of(hearth_cpu_isa isa)
{
    return isa == HEARTH_ISA_AVX512 ? &hearth_mdot_kernels_avx512 : NULL;
}

int hearth_rowdot_multi_has(hearth_cpu_isa isa, hearth_dtype wt, int64_t M)
{
    const hearth_mdot_kernels *kt = hearth_mdot_kernels_of(isa);
    (void)M;
    if (!kt || wt < 0 || wt >= HEARTH_DTYPE_COUNT_ || !kt->dot[wt][1])
        return 0;
    return !hearth_quant_uses_q8a(wt) || kt->q_row;
}

typedef struct mjob {
    const hearth_mdot_kernels *kt;
    hearth_dtype wt;
    const char *W;
    size_t w_row_bytes;
    int64_t N, chunk, groups;
    hearth_mx mx;
    float *Y;
    int64_t ldy;
} mjob;

static void task(void *ctx, int64_t t, int64_t n_tasks)
{
    const mjob *j = ctx;
    int64_t n0 = t * j->chunk, n1 = n0 + j->chunk < j->N ? n0 + j->chunk : j->N;
    for (int64_t n = n0; n < n1; n++)
        for (int64_t g = 0; g < j->groups; g++) {
            /* rows [m0, m1) of group g: sizes differ by at most one */
            int64_t m0 = j->mx.M * g / j->groups, m1 = j->mx.M * (g + 1) / j->groups;
            j->kt->dot[j->wt][m1 - m0](j->W + (size_t)n * j->w_row_bytes, &j->mx, m0, j->Y + m0 * j->ldy + n,
                                       j->ldy);
        }
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

int hearth_rowdot_multi(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype wt, const void *W,
                        size_t w_row_bytes, int64_t N, int64_t K, const float *X, int64_t x_stride, int64_t M,
                        float *Y, int64_t y_stride)
{
    mjob j = {.kt = hearth_mdot_kernels_of(isa), .wt = wt, .W = W, .w_row_bytes = w_row_bytes, .N = N,
              .Y = Y, .ldy = y_stride};
    int64_t Kp = ceil_div(K, 256) * 256;
    j.mx = (hearth_mx){.M = M, .K = K, .Kp = Kp};
    void *mem;
    if (hearth_quant_uses_q8a(wt)) {
        /* q: Kp bytes per row; dxl and s16: Kp / 16 floats each */
        size_t q_bytes = (size_t)(M * Kp), dxl_bytes = (size_t)(M * Kp / 16) * sizeof(float);
        mem = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, q_bytes + dxl_bytes + (size_t)(M * Kp / 16) * sizeof(float));
        if (!mem)
            return HEARTH_ENOMEM;
        j.mx.q = mem;
        j.mx.dxl = (float *)((char *)mem + q_bytes);
        j.mx.s16 = (float *)((char *)mem + q_bytes + dxl_bytes);
        for (int64_t m = 0; m < M; m++)
            j.kt->q_row(X + m * x_stride, &j.mx, m);
    } else {
        mem = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, (size_t)(M * Kp) * sizeof(float));
        if (!mem)
            return HEARTH_ENOMEM;
        j.mx.xf = mem;
        for (int64_t c = 0; c < Kp / 16; c++)
            for (int64_t m = 0; m < M; m++) {
                float *dst = j.mx.xf + (c * M + m) * 16;
                int64_t k0 = c * 16, len = K - k0 < 16 ? (K - k0 > 0 ? K - k0 : 0) : 16;
                memcpy(dst, X + m * x_stride + k0, (size_t)len * sizeof(float));
                memset(dst + len, 0, (size_t)(16 - len) * sizeof(float));
            }
    }
    j.groups = ceil_div(M, HEARTH_MDOT_ROWS);
    /* ~8 tasks per thread, as the single-row path: rows are cheap, balance matters */
    j.chunk = ceil_div(N, 8 * (int64_t)hearth_pool_size(pool));
    hearth_pool_run(pool, task, &j, ceil_div(N, j.chunk));
    return 0;
}

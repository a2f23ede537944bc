/* rowdot_multi.c: the driver of the multi-row row dots (rowdot_multi.h):
 * X into its interleaved form once per call, then W rows split over the
 * pool, each W row dotted with groups of up to HEARTH_MDOT_ROWS X rows.
 *
 * One driver serves a single weight and a group of weights sharing X (Q, K,
 * V; see matmul.h for the measured gain): the job holds one segment per
 * weight, each with its own type's kernels, and the tasks are cut per
 * segment (a task never spans two weights, so it keeps one W, one kernel
 * and one Y), with the chunk sized from the total rows, ~8 tasks per
 * thread. A group pays for one X and one pool job, not one per weight.
 * All of a group's types must read the same form of X (q8a values, or
 * floats); the caller sends other groups through one call per weight.
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

/* One output of a job: its W rows are tasks [t0, t0 + ceil(N / chunk)). */
typedef struct segment {
    const hearth_mdot_fn *dot; /* the kernel table's row for this output's type */
    const char *W;
    size_t w_row_bytes;
    int64_t N, t0;
    float *Y;
    int64_t ldy;
} segment;

typedef struct mjob {
    segment seg[HEARTH_MM_GROUP_MAX];
    int n_seg;
    int64_t chunk, groups;
    hearth_mx mx;
} mjob;

static void task(void *ctx, int64_t t, int64_t n_tasks)
{
    const mjob *j = ctx;
    int s = 0;
    while (s + 1 < j->n_seg && t >= j->seg[s + 1].t0)
        s++;
    const segment *g = &j->seg[s];
    int64_t n0 = (t - g->t0) * j->chunk, n1 = n0 + j->chunk < g->N ? n0 + j->chunk : g->N;
    for (int64_t n = n0; n < n1; n++)
        for (int64_t r = 0; r < j->groups; r++) {
            /* rows [m0, m1) of row group r: sizes differ by at most one */
            int64_t m0 = j->mx.M * r / j->groups, m1 = j->mx.M * (r + 1) / j->groups;
            g->dot[m1 - m0](g->W + (size_t)n * g->w_row_bytes, &j->mx, m0, g->Y + m0 * g->ldy + n, g->ldy);
        }
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* X (M rows of K, row stride ldx) into mx (M, K, Kp set) in the form the
 * quantized types read (quant) or the float types read, in the calling
 * thread's call scratch. Returns 0 or HEARTH_ENOMEM. */
static int prepare_x(const hearth_mdot_kernels *kt, int quant, const float *X, int64_t ldx, hearth_mx *mx)
{
    int64_t M = mx->M, K = mx->K, Kp = mx->Kp;
    if (quant) {
        /* q: Kp bytes per row; dxl and s16: Kp / 16 floats each */
        size_t q_bytes = (size_t)(M * Kp), dxl_bytes = (size_t)(M * Kp / 16) * sizeof(float);
        char *mem = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, q_bytes + 2 * dxl_bytes);
        if (!mem)
            return HEARTH_ENOMEM;
        mx->q = (int8_t *)mem;
        mx->dxl = (float *)(mem + q_bytes);
        mx->s16 = (float *)(mem + q_bytes + dxl_bytes);
        for (int64_t m = 0; m < M; m++)
            kt->q_row(X + m * ldx, mx, m);
        return 0;
    }
    mx->xf = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, (size_t)(M * Kp) * sizeof(float));
    if (!mx->xf)
        return HEARTH_ENOMEM;
    for (int64_t c = 0; c < Kp / 16; c++)
        for (int64_t m = 0; m < M; m++) {
            float *dst = mx->xf + (c * M + m) * 16;
            int64_t k0 = c * 16, len = K - k0 < 16 ? (K - k0 > 0 ? K - k0 : 0) : 16;
            memcpy(dst, X + m * ldx + k0, (size_t)len * sizeof(float));
            memset(dst + len, 0, (size_t)(16 - len) * sizeof(float));
        }
    return 0;
}

int hearth_rowdot_multi_group(hearth_cpu_isa isa, hearth_pool *pool, const hearth_cpu_mm_out *outs, int n,
                              int64_t K, const float *X, int64_t x_stride, int64_t M)
{
    const hearth_mdot_kernels *kt = hearth_mdot_kernels_of(isa);
    mjob j = {.mx = {.M = M, .K = K, .Kp = ceil_div(K, 256) * 256}, .groups = ceil_div(M, HEARTH_MDOT_ROWS)};
    int64_t n_total = 0;
    for (int i = 0; i < n; i++)
        n_total += outs[i].N;
    if (n_total == 0)
        return 0;
    int rc = prepare_x(kt, hearth_quant_uses_q8a(outs[0].wt), X, x_stride, &j.mx);
    if (rc)
        return rc;
    /* ~8 tasks per thread over all outputs, as the single-row path: rows are
     * cheap, balance matters. Each output's rows are cut on their own so a
     * task never spans two weights; that costs at most n - 1 short tasks. */
    j.chunk = ceil_div(n_total, 8 * (int64_t)hearth_pool_size(pool));
    int64_t n_tasks = 0;
    for (int i = 0; i < n; i++) {
        const hearth_cpu_mm_out *o = &outs[i];
        if (o->N == 0)
            continue; /* W and Y may be NULL */
        j.seg[j.n_seg++] = (segment){.dot = kt->dot[o->wt], .W = o->W, .w_row_bytes = o->w_row_bytes,
                                     .N = o->N, .t0 = n_tasks, .Y = o->Y, .ldy = o->y_stride};
        n_tasks += ceil_div(o->N, j.chunk);
    }
    hearth_pool_run(pool, task, &j, n_tasks);
    return 0;
}

int hearth_rowdot_multi(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype wt, const void *W,
                        size_t w_row_bytes, int64_t N, int64_t K, const float *X, int64_t x_stride, int64_t M,
                        float *Y, int64_t y_stride)
{
    const hearth_cpu_mm_out o = {.wt = wt, .W = W, .w_row_bytes = w_row_bytes, .N = N, .Y = Y,
                                 .y_stride = y_stride};
    return hearth_rowdot_multi_group(isa, pool, &o, 1, K, X, x_stride, M);
}

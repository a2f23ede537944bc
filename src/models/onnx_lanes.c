/* onnx_lanes.c: a plan's steps spread over lanes (onnx_plan.h's
 * plan_lanes), so that a GPU runs a frame's independent branches side by
 * side. A conv net's frame on a GPU is a chain of small kernels, each a few
 * microseconds and most of that latency (launch, the wait on the kernel
 * before, a ramp over a few dozen blocks): UltraFace RFB-320's 86 steps
 * took 377 us on an H100, ~4.4 us a step, while its longest chain of
 * dependent steps is 45 (its RFB modules' three branches, the four
 * detection heads' scores and boxes).
 *
 * How: steps are taken in plan order (a topological order). Step i depends
 * on every earlier step that writes a value it reads, writes the value it
 * writes (copies into disjoint slices of one value excepted: a Concat's
 * inputs), or reads the value it writes. It goes to the lane whose last
 * step is its latest dependency (a chain stays on one lane and needs no
 * mark), else to an unused lane, else to the lane idle longest (its last
 * step the earliest). It then waits for the marks of those dependencies
 * not already done before it (hb: the lane's order and the marks waited for,
 * transitively), latest first, so a dependency another wait covers costs
 * nothing. The arena is then laid out for that order (plan_arena): values
 * share bytes only where hb orders every use of one before the writes of
 * the other, so branches running together never meet in memory.
 *
 * Measured (stop 41, H100, bench/RESULTS.md; HEARTH_FRAME_LANES=1 the one
 * lane): RFB-320 on four lanes (the longest chain 47 steps, 18 marks, the
 * arena the same 3.7 MB) walks in 226.5 us against 375.6; in-process p50
 * 0.320 against 0.486 ms; served with the frame in shared memory p99
 * 0.907 against 1.080 ms.
 *
 * Rejected: the data dependencies alone over the arena laid out for step
 * order (its reuse of bytes adds dependencies: RFB-320's chain grows from
 * 45 steps to 74); a lane per branch found by a graph walk (the greedy
 * pass above finds the same lanes for these nets in one pass). */
#include "models/onnx_plan.h"

#include <stdlib.h>
#include <string.h>

/* The element range [lo, hi) a copy step writes in its output's root. */
static void copy_span(const plan_step *s, int64_t *lo, int64_t *hi)
{
    int64_t ext = 1;
    for (int k = 0; k < s->u.cp.ndim; k++) {
        int64_t st = s->u.cp.dst_stride[k] < 0 ? -s->u.cp.dst_stride[k] : s->u.cp.dst_stride[k];
        if (s->u.cp.dims[k] == 0)
            ext = 0;
        else
            ext += (s->u.cp.dims[k] - 1) * st;
    }
    *lo = s->y_off;
    *hi = s->y_off + ext;
}

/* Whether step i must come after earlier step j. */
static bool depends(const hearth_plan *p, int i, int j)
{
    const plan_step *si = &p->steps[i], *sj = &p->steps[j];
    int yi = plan_root(p, si->y), ai = plan_root(p, si->a), bi = plan_root(p, si->b);
    int yj = plan_root(p, sj->y), aj = plan_root(p, sj->a), bj = plan_root(p, sj->b);
    if (yj >= 0 && (yj == ai || yj == bi))
        return true; /* i reads what j writes */
    if (yi >= 0 && (yi == aj || yi == bj))
        return true; /* i overwrites what j reads */
    if (yi >= 0 && yi == yj) {
        if (si->kind != STEP_COPY || sj->kind != STEP_COPY)
            return true;
        int64_t li, hi, lj, hj;
        copy_span(si, &li, &hi);
        copy_span(sj, &lj, &hj);
        return li < hj && lj < hi; /* slices of one value: apart unless they meet */
    }
    return false;
}

void plan_lanes_free(plan_lanes *l)
{
    free(l->lane);
    free(l->mark);
    free(l->wait_at);
    free(l->waits);
    free(l->hb);
    memset(l, 0, sizeof *l);
}

static void set_bit(uint64_t *b, int j)
{
    b[j / 64] |= (uint64_t)1 << (j % 64);
}

static bool has_bit(const uint64_t *b, int j)
{
    return (b[j / 64] >> (j % 64)) & 1;
}

/* b |= step j's hb and j itself */
static void add_done(const plan_lanes *l, uint64_t *b, int j)
{
    const uint64_t *h = l->hb + (size_t)j * (size_t)l->words;
    for (int w = 0; w < l->words; w++)
        b[w] |= h[w];
    set_bit(b, j);
}

/* Step j's mark, given on first need; -1 (err set) past HEARTH_VIS_MARKS. */
static int mark_of(plan_lanes *l, int j, hearth_err *err)
{
    if (l->mark[j] < 0) {
        if (l->n_marks >= HEARTH_VIS_MARKS) {
            hearth_err_set(err, HEARTH_ELIMIT, "onnx: more than %d marks to schedule %d steps on lanes",
                           HEARTH_VIS_MARKS, l->n_steps);
            return -1;
        }
        l->mark[j] = l->n_marks++;
    }
    return l->mark[j];
}

int plan_lanes_build(plan_lanes *l, const hearth_plan *p, int max_lanes, hearth_err *err)
{
    memset(l, 0, sizeof *l);
    int n = p->n_steps;
    if (max_lanes < 1)
        max_lanes = 1;
    if (max_lanes > HEARTH_VIS_LANES)
        max_lanes = HEARTH_VIS_LANES;
    l->n_steps = n;
    l->words = n / 64 + 1;
    l->lane = calloc((size_t)n + 1, 1);
    l->mark = malloc(((size_t)n + 1) * sizeof *l->mark);
    l->wait_at = calloc((size_t)n + 2, sizeof *l->wait_at);
    l->waits = malloc(((size_t)n * (size_t)(max_lanes + 1) + 1) * sizeof *l->waits);
    l->hb = calloc(((size_t)n + 1) * (size_t)l->words, sizeof *l->hb);
    int *deps = malloc(((size_t)n + 1) * sizeof *deps), *depth = calloc((size_t)n + 1, sizeof *depth);
    uint64_t *cur = calloc((size_t)l->words, sizeof *cur);
    if (!l->lane || !l->mark || !l->wait_at || !l->waits || !l->hb || !deps || !depth || !cur) {
        free(deps);
        free(depth);
        free(cur);
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory scheduling %d steps", n);
    }
    int tip[HEARTH_VIS_LANES];
    for (int k = 0; k < HEARTH_VIS_LANES; k++)
        tip[k] = -1;
    l->n_lanes = 1;
    l->n_marks = 1; /* mark 0: the walk's start */
    int nw = 0, rc = 0;
    for (int i = 0; i < n; i++) {
        l->mark[i] = -1;
        int nd = 0;
        for (int j = i - 1; j >= 0; j--)
            if (depends(p, i, j))
                deps[nd++] = j; /* latest first */
        /* the lane: the one whose last step is the latest dependency, else a free one, else the idlest */
        int lane = -1;
        for (int d = 0; d < nd && lane < 0; d++)
            for (int k = 0; k < max_lanes; k++)
                if (tip[k] == deps[d])
                    lane = k;
        for (int k = 0; k < max_lanes && lane < 0; k++)
            if (tip[k] < 0)
                lane = k;
        if (lane < 0) {
            lane = 0;
            for (int k = 1; k < max_lanes; k++)
                if (tip[k] < tip[lane])
                    lane = k;
        }
        l->lane[i] = (signed char)lane;
        if (lane + 1 > l->n_lanes)
            l->n_lanes = lane + 1;
        memset(cur, 0, (size_t)l->words * sizeof *cur);
        if (tip[lane] >= 0)
            add_done(l, cur, tip[lane]);
        l->wait_at[i] = nw;
        int longest = 0;
        for (int d = 0; d < nd; d++) {
            int j = deps[d];
            if (depth[j] > longest)
                longest = depth[j];
            if (has_bit(cur, j))
                continue;
            int mk = mark_of(l, j, err);
            if (mk < 0) {
                rc = HEARTH_ELIMIT;
                goto out;
            }
            l->waits[nw++] = mk;
            add_done(l, cur, j);
        }
        if (lane > 0 && tip[lane] < 0 && nw == l->wait_at[i])
            l->waits[nw++] = 0; /* a lane's first step: after the walk's start */
        memcpy(l->hb + (size_t)i * (size_t)l->words, cur, (size_t)l->words * sizeof *cur);
        depth[i] = longest + 1;
        if (depth[i] > l->chain)
            l->chain = depth[i];
        tip[lane] = i;
    }
    l->wait_at[n] = nw;
    /* the end: lane 0 after every other lane's last step, latest first */
    memset(cur, 0, (size_t)l->words * sizeof *cur);
    if (tip[0] >= 0)
        add_done(l, cur, tip[0]);
    for (;;) {
        int best = -1;
        for (int k = 1; k < l->n_lanes; k++)
            if (tip[k] >= 0 && !has_bit(cur, tip[k]) && (best < 0 || tip[k] > tip[best]))
                best = k;
        if (best < 0)
            break;
        int j = tip[best];
        int mk = mark_of(l, j, err);
        if (mk < 0) {
            rc = HEARTH_ELIMIT;
            goto out;
        }
        l->end[l->n_end++] = mk;
        add_done(l, cur, j);
    }
out:
    free(deps);
    free(depth);
    free(cur);
    return rc;
}

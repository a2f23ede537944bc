/* onnx_compose.c: copies composed after lowering. A strided copy whose
 * output is read only by a second copy that moves it whole and contiguous
 * into another value (a head's Transpose, then its Reshape view's slice of
 * a Concat) becomes one copy: the first writes straight into the second's
 * destination, its destination strides scaled by the second's, and the
 * second step and the value between them go. UltraFace RFB-320's heads
 * were 29 copies, 8 of them such pairs; on the GPU each is a launch of 2-3
 * us in a walk of ~390 us (stop 33's profile), on the CPU a pass over the
 * scores and boxes.
 *
 * Runs after the states and outputs are marked (a value that is, or is
 * viewed as, a graph output or a state keeps its own storage and its copy)
 * and before plan_memory, whose lifetimes it recomputes from the steps.
 * HEARTH_ONNX_COMPOSE=0 keeps every copy (to measure the difference). */
#include "models/onnx_plan_int.h"

#include <stdlib.h>

/* Whether every value with storage root r is internal (no output, state
 * or input views it). */
static bool internal_only(const hearth_plan *p, int r)
{
    for (int i = 0; i < p->n_v; i++)
        if (!p->v[i].is_const && p->v[i].root == r && p->v[i].io != PLAN_INTERNAL)
            return false;
    return true;
}

/* How many steps write root r, and how many read it (the last reader in
 * *reader). */
static void uses(const hearth_plan *p, int r, int *writers, int *readers, int *reader)
{
    *writers = *readers = 0;
    for (int s = 0; s < p->n_steps; s++) {
        const plan_step *t = &p->steps[s];
        *writers += plan_root(p, t->y) == r;
        if (plan_root(p, t->a) == r || plan_root(p, t->b) == r) {
            (*readers)++;
            *reader = s;
        }
    }
}

/* Whether copy t writes elements [0, n) of its value densely, in order. */
static bool writes_dense(const plan_step *t, int64_t n)
{
    const hearth_strided_desc *d = &t->u.cp;
    int64_t stride = 1;
    for (int k = d->ndim - 1; k >= 0; k--) {
        if (d->dims[k] != 1 && d->dst_stride[k] != stride)
            return false;
        stride *= d->dims[k];
    }
    return t->y_off == 0 && stride == n;
}

/* Whether copy t reads elements [0, n) of its source contiguously into one
 * run of its destination (stride d->dst_stride[0]). */
static bool moves_whole(const plan_step *t, int64_t n)
{
    const hearth_strided_desc *d = &t->u.cp;
    return t->a_off == 0 && d->ndim == 1 && d->dims[0] == n && d->src_stride[0] == 1;
}

/* def/last of every root from the steps, as onnx_lower.c's reads/writes set
 * them (plan_memory adds the inputs' and outputs' ends). */
static void lifetimes(hearth_plan *p)
{
    for (int i = 0; i < p->n_v; i++)
        if (!p->v[i].is_const && p->v[i].root == i)
            p->v[i].def = p->v[i].last = -1;
    for (int s = 0; s < p->n_steps; s++) {
        const plan_step *t = &p->steps[s];
        int ids[3] = {t->a, t->b, t->y};
        for (int k = 0; k < 3; k++) {
            int r = plan_root(p, ids[k]);
            if (r < 0)
                continue;
            if (k == 2 && (p->v[r].def < 0 || p->v[r].def > s))
                p->v[r].def = s;
            if (p->v[r].last < s)
                p->v[r].last = s;
        }
    }
}

void plan_compose_copies(hearth_plan *p)
{
    const char *env = getenv("HEARTH_ONNX_COMPOSE");
    if (env && strcmp(env, "0") == 0)
        return;
    bool changed = false;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s1 = &p->steps[i];
        int r = plan_root(p, s1->y);
        if (s1->kind != STEP_COPY || r < 0 || !internal_only(p, r) || !writes_dense(s1, p->v[r].n))
            continue;
        int writers, readers, j = -1;
        uses(p, r, &writers, &readers, &j);
        if (writers != 1 || readers != 1 || j <= i || p->steps[j].kind != STEP_COPY ||
            !moves_whole(&p->steps[j], p->v[r].n))
            continue;
        const plan_step *s2 = &p->steps[j];
        if (plan_root(p, s1->a) == plan_root(p, s2->y))
            continue;
        for (int k = 0; k < s1->u.cp.ndim; k++)
            s1->u.cp.dst_stride[k] *= s2->u.cp.dst_stride[0];
        s1->y = s2->y;
        s1->y_off = s2->y_off;
        memmove(&p->steps[j], &p->steps[j + 1], (size_t)(p->n_steps - j - 1) * sizeof *p->steps);
        p->n_steps--;
        changed = true;
        i--; /* s1 again: its new destination may be moved whole once more */
    }
    if (changed)
        lifetimes(p);
}

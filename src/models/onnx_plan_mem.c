/* onnx_plan_mem.c: one static memory plan per model. Every value that owns
 * runtime storage (not a constant, not a view, not a state buffer) lives
 * from the step that first writes it (graph inputs: before the first) to
 * the last step that reads it or any view of it (graph outputs: to the end,
 * where they are downloaded); values whose lives do not meet may share
 * bytes. Placement is greedy, largest first, each at the lowest offset
 * clear of every placed value it overlaps in time: for the chains of conv
 * nets this lands near the peak of live bytes, and it runs once at load.
 * Constants that steps read on the device get offsets in their own block.
 *
 * Rejected: one buffer per value (UltraFace would take ~40 MB instead of
 * a few); reuse in place across an op (the device ops promise nothing for
 * overlapping outputs). */
#include "models/onnx_plan_int.h"

#include <stdlib.h>

#define ALIGN 64
static size_t up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

typedef struct { int id; size_t bytes; } item;

static int by_size(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->id - y->id;
}

int plan_memory(hearth_plan *p, hearth_err *err)
{
    item *it = calloc((size_t)p->n_v + 1, sizeof *it);
    int *placed = calloc((size_t)p->n_v + 1, sizeof *placed);
    if (!it || !placed) {
        free(it);
        free(placed);
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    }
    int n = 0;
    for (int i = 0; i < p->n_v; i++) {
        plan_value *v = &p->v[i];
        if (v->is_const || v->root != i || v->io == PLAN_STATE_IN || v->io == PLAN_STATE_OUT)
            continue;
        if (v->io == PLAN_INPUT)
            v->def = -1;
        else if (v->def < 0)
            continue; /* never written: nothing reads it either */
        if (v->io == PLAN_OUTPUT || v->last < v->def)
            v->last = v->io == PLAN_OUTPUT ? p->n_steps : v->def;
        it[n].id = i;
        it[n].bytes = up((size_t)v->n * sizeof(float));
        n++;
    }
    /* an output's views also keep its root to the end */
    for (int i = 0; i < p->n_outputs; i++)
        p->v[p->v[p->outputs[i]].root].last = p->n_steps;
    qsort(it, (size_t)n, sizeof *it, by_size);
    size_t top = 0;
    int n_placed = 0;
    for (int a = 0; a < n; a++) {
        plan_value *v = &p->v[it[a].id];
        size_t off = 0;
        /* the lowest offset clear of every placed value alive at the same time */
        for (bool moved = true; moved;) {
            moved = false;
            for (int b = 0; b < n_placed; b++) {
                plan_value *u = &p->v[placed[b]];
                size_t ub = up((size_t)u->n * sizeof(float));
                if (u->last < v->def || v->last < u->def)
                    continue;
                if (off < (size_t)u->off + ub && (size_t)u->off < off + it[a].bytes) {
                    off = (size_t)u->off + ub;
                    moved = true;
                }
            }
        }
        v->off = (int64_t)off;
        placed[n_placed++] = it[a].id;
        if (off + it[a].bytes > top)
            top = off + it[a].bytes;
    }
    p->arena_bytes = top;
    size_t c = 0;
    for (int i = 0; i < p->n_v; i++)
        if (p->v[i].is_const && p->v[i].const_off == -2) {
            p->v[i].const_off = (int64_t)c;
            c += up((size_t)p->v[i].n * sizeof(float));
        }
    p->const_bytes = c;
    free(it);
    free(placed);
    return 0;
}

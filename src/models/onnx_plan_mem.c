/* onnx_plan_mem.c: one static memory plan per model. Every value that owns
 * runtime storage (not a constant, not a view, not a state buffer) lives
 * from the step that first writes it (graph inputs: before the first) to
 * the last step that reads it or any view of it (graph outputs: to the end,
 * where they are downloaded); values whose lives do not meet may share
 * bytes. Placement is greedy, largest first, each at the lowest offset
 * clear of every placed value it overlaps in time: for the chains of conv
 * nets this lands near the peak of live bytes, and it runs once at load.
 * Under a lane schedule (onnx_lanes.c) "do not meet" is hb's: every step
 * touching one value is done before any step writing the other starts, by
 * the lanes' order and marks (step order is the one-lane case of it).
 * Constants that steps read on the device get offsets in their own block.
 *
 * Rejected: one buffer per value (UltraFace would take ~40 MB instead of
 * a few); reuse in place across an op (the device ops promise nothing for
 * overlapping outputs). */
#include "models/onnx_plan_int.h"

#include <stdlib.h>
#include <string.h>

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

/* The values to place (roots that own storage in the arena), with their
 * lives in step order (def, last) set as plan_memory documents. */
static int place_items(hearth_plan *p, item *it)
{
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
    return n;
}

/* Under a lane schedule: per placed value (by index in it), the steps that
 * touch it (acc) and the steps done before every step writing it starts
 * (done: the intersection of its writers' hb; empty for an input, which the
 * upload writes before the walk: nothing is done before it). */
typedef struct order {
    uint64_t *acc, *done;
    int words;
} order;

static int order_make(order *o, const hearth_plan *p, const plan_lanes *l, const item *it, int n)
{
    o->words = l->words;
    o->acc = calloc((size_t)n * (size_t)o->words + 1, sizeof *o->acc);
    o->done = calloc((size_t)n * (size_t)o->words + 1, sizeof *o->done);
    int *slot = malloc(((size_t)p->n_v + 1) * sizeof *slot);
    if (!o->acc || !o->done || !slot) {
        free(slot);
        return HEARTH_ENOMEM;
    }
    for (int i = 0; i < p->n_v; i++)
        slot[i] = -1;
    for (int a = 0; a < n; a++)
        slot[it[a].id] = a;
    bool *written = calloc((size_t)n + 1, 1);
    if (!written) {
        free(slot);
        return HEARTH_ENOMEM;
    }
    for (int s = 0; s < p->n_steps; s++) {
        const plan_step *st = &p->steps[s];
        int ids[3] = {plan_root(p, st->a), plan_root(p, st->b), plan_root(p, st->y)};
        for (int k = 0; k < 3; k++) {
            int a = ids[k] >= 0 ? slot[ids[k]] : -1;
            if (a < 0)
                continue;
            o->acc[(size_t)a * o->words + s / 64] |= (uint64_t)1 << (s % 64);
            if (k < 2)
                continue;
            uint64_t *d = o->done + (size_t)a * o->words;
            const uint64_t *h = l->hb + (size_t)s * (size_t)l->words;
            for (int w = 0; w < o->words; w++)
                d[w] = written[a] ? d[w] & h[w] : h[w];
            written[a] = true;
        }
    }
    for (int a = 0; a < n; a++)
        if (!written[a] || p->v[it[a].id].io == PLAN_INPUT) /* nothing can be done before it */
            memset(o->done + (size_t)a * o->words, 0, (size_t)o->words * sizeof *o->done);
    free(written);
    free(slot);
    return 0;
}

/* Whether placed value a (index in it) is wholly done before b is first
 * written, under o's order (an output, or the storage an output views, is
 * read after the walk: never; place_items keeps its life to the end). */
static bool order_before(const order *o, const hearth_plan *p, const item *it, int a, int b)
{
    if (p->v[it[a].id].last >= p->n_steps)
        return false;
    const uint64_t *x = o->acc + (size_t)a * o->words, *d = o->done + (size_t)b * o->words;
    for (int w = 0; w < o->words; w++)
        if (x[w] & ~d[w])
            return false;
    return true;
}

int plan_arena(hearth_plan *p, const plan_lanes *l, hearth_err *err)
{
    item *it = calloc((size_t)p->n_v + 1, sizeof *it);
    int *at = calloc((size_t)p->n_v + 1, sizeof *at); /* placed values, as indices in it */
    order o = {0};
    int rc = 0;
    if (!it || !at) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
        goto out;
    }
    int n = place_items(p, it);
    qsort(it, (size_t)n, sizeof *it, by_size);
    if (l && order_make(&o, p, l, it, n)) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
        goto out;
    }
    size_t top = 0;
    int n_placed = 0;
    for (int a = 0; a < n; a++) {
        plan_value *v = &p->v[it[a].id];
        size_t off = 0;
        /* the lowest offset clear of every placed value whose use meets this one's */
        for (bool moved = true; moved;) {
            moved = false;
            for (int b = 0; b < n_placed; b++) {
                plan_value *u = &p->v[it[at[b]].id];
                size_t ub = it[at[b]].bytes;
                if (l ? order_before(&o, p, it, at[b], a) || order_before(&o, p, it, a, at[b])
                      : u->last < v->def || v->last < u->def)
                    continue;
                if (off < (size_t)u->off + ub && (size_t)u->off < off + it[a].bytes) {
                    off = (size_t)u->off + ub;
                    moved = true;
                }
            }
        }
        v->off = (int64_t)off;
        at[n_placed++] = a;
        if (off + it[a].bytes > top)
            top = off + it[a].bytes;
    }
    p->arena_bytes = top;
out:
    free(o.acc);
    free(o.done);
    free(it);
    free(at);
    return rc;
}

int plan_memory(hearth_plan *p, hearth_err *err)
{
    int rc = plan_arena(p, NULL, err);
    if (rc)
        return rc;
    size_t c = 0;
    for (int i = 0; i < p->n_v; i++)
        if (p->v[i].is_const && p->v[i].const_off == -2) {
            p->v[i].const_off = (int64_t)c;
            c += up((size_t)p->v[i].n * sizeof(float));
        }
    p->const_bytes = c;
    return 0;
}

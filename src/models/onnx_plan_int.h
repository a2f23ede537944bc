/* onnx_plan_int.h: what the planner's files share (onnx_plan.c: the pass
 * and values; onnx_fold.c: host evaluation of constant nodes; onnx_lower.c:
 * nodes to device steps; onnx_plan_mem.c: the arena). */
#ifndef HEARTH_MODELS_ONNX_PLAN_INT_H
#define HEARTH_MODELS_ONNX_PLAN_INT_H

#include "models/onnx_plan.h"

#include <string.h>

/* A new value named name (borrowed), its storage its own; -1 on ENOMEM. */
int plan_new_value(hearth_plan *p, const char *name, int dtype, int ndim, const int64_t *dims);
/* A new step; -1 on ENOMEM. */
int plan_new_step(hearth_plan *p, enum plan_step_kind kind, int node);
/* The node reading out next, when it is the only reader, of type op, and no
 * graph output is out; else -1. */
int plan_fuse_next(const hearth_plan *p, int node, const char *out, const char *op);
/* Lowers node to steps (absorbed: nodes it fused, marked). */
int plan_lower(hearth_plan *p, int node, const int *in, bool *absorbed, hearth_err *err);
/* Composes copy pairs into one copy (onnx_compose.c), after the outputs and
 * states are marked, before plan_memory. */
void plan_compose_copies(hearth_plan *p);

/* Shape helpers shared by folding and lowering (onnx_fold.c). */
int plan_squeeze_dims(const hearth_plan *p, const hearth_onnx_node *nd, const int *in, int n_in, int64_t *dims,
                      int *ndim, hearth_err *err);
int plan_reshape_dims(const hearth_plan *p, const hearth_onnx_node *nd, const plan_value *x, const plan_value *shape,
                      int64_t *dims, int *ndim, hearth_err *err);
int plan_broadcast(const plan_value *a, const plan_value *b, int64_t *dims);

/* Attribute helpers: the value, or def when absent. */
static inline int64_t plan_attr_i(const hearth_onnx_node *n, const char *name, int64_t def)
{
    const hearth_onnx_attr *a = hearth_onnx_attr_find(n, name);
    return a && a->type == HEARTH_ONNX_ATTR_INT ? a->i : def;
}
static inline float plan_attr_f(const hearth_onnx_node *n, const char *name, float def)
{
    const hearth_onnx_attr *a = hearth_onnx_attr_find(n, name);
    return a && a->type == HEARTH_ONNX_ATTR_FLOAT ? a->f : def;
}
static inline const char *plan_attr_s(const hearth_onnx_node *n, const char *name, const char *def)
{
    const hearth_onnx_attr *a = hearth_onnx_attr_find(n, name);
    return a && a->type == HEARTH_ONNX_ATTR_STRING ? a->s : def;
}
/* INTS: count, or -1 when absent; ints points at them. */
static inline int64_t plan_attr_ints(const hearth_onnx_node *n, const char *name, const int64_t **ints)
{
    const hearth_onnx_attr *a = hearth_onnx_attr_find(n, name);
    if (!a || a->type != HEARTH_ONNX_ATTR_INTS)
        return -1;
    *ints = a->ints;
    return a->n;
}

/* Row-major strides (elements) of dims. */
static inline void plan_strides(const int64_t *dims, int ndim, int64_t *st)
{
    int64_t s = 1;
    for (int k = ndim - 1; k >= 0; k--) {
        st[k] = s;
        s *= dims[k];
    }
}

#endif

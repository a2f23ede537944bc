/* onnx_plan.c: an ONNX graph planned for fixed shapes (see onnx_plan.h).
 *
 * One pass over the nodes in file order. Each node either folds on the host
 * (all inputs constant: onnx_fold.c; Shape folds always, shapes being
 * known), becomes a view (Reshape and friends: a new name over the same
 * bytes), is absorbed into the Conv before it (BatchNormalization, then an
 * activation, when the Conv's output has no other reader), or lowers to
 * steps (onnx_lower.c). Then copy pairs are composed into one copy
 * (onnx_compose.c) and plan_memory (onnx_plan_mem.c) lays the arena.
 *
 * Rejected: a general graph optimizer (pattern rewrites to a fixed point):
 * the fusions conv nets need are two, named here; shape inference as a
 * separate pass: each node's output shapes are known when it is lowered,
 * because ONNX orders nodes topologically. */
#include "models/onnx_plan.h"
#include "models/onnx_plan_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *plan_alloc(hearth_plan *p, size_t bytes)
{
    if (p->n_allocs == p->cap_allocs) {
        int cap = p->cap_allocs ? p->cap_allocs * 2 : 64;
        void **a = realloc(p->allocs, (size_t)cap * sizeof *a);
        if (!a)
            return NULL;
        p->allocs = a;
        p->cap_allocs = cap;
    }
    /* 64-byte aligned: constants are uploaded as they are, weights read by SIMD */
    void *m = NULL;
    if (posix_memalign(&m, 64, bytes ? bytes : 1) != 0)
        return NULL;
    memset(m, 0, bytes ? bytes : 1);
    p->allocs[p->n_allocs++] = m;
    return m;
}

int plan_find(const hearth_plan *p, const char *name)
{
    for (int i = p->n_v - 1; i >= 0; i--)
        if (strcmp(p->v[i].name, name) == 0)
            return i;
    return -1;
}

/* A float's integer value, saturated (NaN: 0): a float shape or index past
 * int64 is nonsense, but converting it must not be undefined behaviour. */
static int64_t ival_of(double x)
{
    if (!(x == x))
        return 0;
    return x <= -9223372036854775808.0 ? INT64_MIN : x >= 9223372036854774784.0 ? INT64_MAX : (int64_t)x;
}

int64_t plan_ival(const plan_value *v, int64_t i)
{
    switch (v->dtype) {
    case HEARTH_ONNX_INT64: return ((const int64_t *)v->data)[i];
    case HEARTH_ONNX_INT32: return ((const int32_t *)v->data)[i];
    case HEARTH_ONNX_FLOAT: return ival_of(((const float *)v->data)[i]);
    case HEARTH_ONNX_DOUBLE: return ival_of(((const double *)v->data)[i]);
    case HEARTH_ONNX_UINT8: case HEARTH_ONNX_BOOL: return ((const uint8_t *)v->data)[i];
    case HEARTH_ONNX_INT8: return ((const int8_t *)v->data)[i];
    default: return 0;
    }
}

/* A new value (name borrowed from the model or the plan). -1 when the
 * reserve hearth_plan_build made is spent (callers say "out of memory"). */
int plan_new_value(hearth_plan *p, const char *name, int dtype, int ndim, const int64_t *dims)
{
    /* never grown: lowering code holds plan_value pointers across calls
     * here, so the array is sized once for the whole model (hearth_plan_build) */
    if (p->n_v == p->cap_v)
        return -1;
    int id = p->n_v++;
    plan_value *v = &p->v[id];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->dtype = dtype;
    v->ndim = ndim;
    v->n = 1;
    int64_t nz = 1; /* the product of the non-zero dims, saturated */
    for (int k = 0; k < ndim; k++) {
        v->dims[k] = dims[k];
        if (dims[k] < 0 || dims[k] > PLAN_DIM_MAX) {
            p->bad_shape = name;
            v->dims[k] = 1;
        } else if (dims[k] > 0) {
            nz = nz > PLAN_ELEMS_MAX / dims[k] ? PLAN_ELEMS_MAX + 1 : nz * dims[k];
        } else
            v->n = 0;
    }
    if (nz > PLAN_ELEMS_MAX) {
        p->bad_shape = name;
        nz = 1;
    }
    v->n = v->n ? nz : 0;
    v->root = id;
    v->off = -1;
    v->def = -1;
    v->last = -1;
    v->const_off = -1;
    return id;
}

int plan_new_step(hearth_plan *p, enum plan_step_kind kind, int node)
{
    if (p->n_steps == p->cap_steps) {
        int cap = p->cap_steps ? p->cap_steps * 2 : 128;
        plan_step *s = realloc(p->steps, (size_t)cap * sizeof *s);
        if (!s)
            return -1;
        p->steps = s;
        p->cap_steps = cap;
    }
    int id = p->n_steps++;
    memset(&p->steps[id], 0, sizeof p->steps[id]);
    p->steps[id].kind = kind;
    p->steps[id].node = node;
    p->steps[id].b = -1;
    return id;
}

/* "input=1x3x320x320,other=..." : the dims given for name, or 0 dims. */
static int shape_for(const char *shapes, const char *name, int64_t *dims, hearth_err *err)
{
    if (!shapes)
        return 0;
    size_t nl = strlen(name);
    for (const char *s = shapes; *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        if (eq && (size_t)(eq - s) == nl && memcmp(s, name, nl) == 0) {
            int nd = 0;
            const char *q = eq + 1;
            while (q < s + len) {
                char *e;
                long long d = strtoll(q, &e, 10);
                if (e == q || d < 1 || nd == PLAN_MAX_DIMS)
                    return hearth_err_set(err, HEARTH_EINVAL, "--shape %.*s: dims must be positive numbers joined by x",
                                          (int)len, s);
                dims[nd++] = d;
                q = e;
                if (q < s + len && *q == 'x')
                    q++;
                else if (q < s + len)
                    return hearth_err_set(err, HEARTH_EINVAL, "--shape %.*s: dims must be joined by x", (int)len, s);
            }
            return nd;
        }
        s += len + (end ? 1 : 0);
    }
    return 0;
}

static int add_inputs(hearth_plan *p, const hearth_onnx *m, const char *shapes, hearth_err *err)
{
    for (int i = 0; i < m->n_inputs; i++) {
        const hearth_onnx_value *in = &m->inputs[i];
        int64_t given[PLAN_MAX_DIMS];
        int ng = shape_for(shapes, in->name, given, err);
        if (ng < 0)
            return ng;
        int64_t dims[PLAN_MAX_DIMS];
        int nd = in->ndim;
        if (nd < 0 && ng == 0)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: input '%s' declares no shape: give it with --shape %s=DIMS",
                                  m->path, in->name, in->name);
        if (ng && nd >= 0 && ng != nd)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: input '%s' has %d dims, --shape gives %d", m->path,
                                  in->name, nd, ng);
        if (ng)
            nd = ng;
        for (int k = 0; k < nd; k++) {
            int64_t decl = in->ndim >= 0 ? in->dims[k] : -1;
            if (ng && decl > 0 && given[k] != decl)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: input '%s' dim %d is %lld, --shape gives %lld",
                                      m->path, in->name, k, (long long)decl, (long long)given[k]);
            dims[k] = ng ? given[k] : decl;
            if (dims[k] < 1)
                return hearth_err_set(err, HEARTH_EINVAL,
                                      "onnx: %s: input '%s' dim %d (%s) has no fixed size: give the shape with "
                                      "--shape %s=DIMS (a frame model runs one fixed shape)",
                                      m->path, in->name, k, in->dim_param[k] ? in->dim_param[k] : "unnamed", in->name);
        }
        if (in->dtype != HEARTH_ONNX_FLOAT)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: input '%s' is %s: frame models take FLOAT inputs",
                                  m->path, in->name, hearth_onnx_dtype_name(in->dtype));
        int id = plan_new_value(p, in->name, HEARTH_ONNX_FLOAT, nd, dims);
        if (id < 0)
            return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
        p->v[id].io = PLAN_INPUT;
        if (p->n_inputs == (int)(sizeof p->inputs / sizeof p->inputs[0]))
            return hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: too many inputs", m->path);
        p->v[id].io_index = p->n_inputs;
        p->inputs[p->n_inputs++] = id;
    }
    return 0;
}

static int add_inits(hearth_plan *p, const hearth_onnx *m, hearth_err *err)
{
    for (int i = 0; i < m->n_inits; i++) {
        const hearth_onnx_tensor *t = &m->inits[i];
        int id = plan_new_value(p, t->name, t->dtype, t->ndim, t->dims);
        if (id < 0)
            return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
        p->v[id].is_const = true;
        p->v[id].data = (void *)t->data;
    }
    return 0;
}

/* Readers of each value name over the nodes, and whether a graph output
 * names it: a Conv's output is fused with its one reader only. */
static int readers(const hearth_onnx *m, const char *name, int *only)
{
    int n = 0;
    for (int i = 0; i < m->n_nodes; i++)
        for (int j = 0; j < m->nodes[i].n_in; j++)
            if (m->nodes[i].in[j][0] && strcmp(m->nodes[i].in[j], name) == 0) {
                n++;
                *only = i;
            }
    for (int i = 0; i < m->n_outputs; i++)
        if (strcmp(m->outputs[i].name, name) == 0)
            n += 2; /* never fused away */
    return n;
}

int plan_fuse_next(const hearth_plan *p, int node, const char *out, const char *op)
{
    const hearth_onnx *m = p->model;
    int only = -1;
    if (readers(m, out, &only) != 1 || only <= node)
        return -1;
    const hearth_onnx_node *nd = &m->nodes[only];
    if (strcmp(nd->op_type, op) != 0 || nd->domain[0] || nd->n_out < 1 || nd->n_out > 8)
        return -1; /* a node fused away is never visited by the build loop's checks: make them here */
    if (strcmp(nd->in[0], out) != 0)
        return -1;
    return only;
}

static int mark_outputs(hearth_plan *p, const hearth_onnx *m, hearth_err *err)
{
    for (int i = 0; i < m->n_outputs; i++) {
        int id = plan_find(p, m->outputs[i].name);
        if (id < 0)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: graph output '%s' is made by no node", m->path,
                                  m->outputs[i].name);
        plan_value *v = &p->v[id];
        if (v->is_const)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: graph output '%s' is a constant", m->path, v->name);
        if (v->dtype != HEARTH_ONNX_FLOAT)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: graph output '%s' is %s: frame models give FLOAT",
                                  m->path, v->name, hearth_onnx_dtype_name(v->dtype));
        if (v->io == PLAN_INPUT)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: graph output '%s' is a graph input", m->path,
                                  v->name);
        v->io = PLAN_OUTPUT;
        v->io_index = p->n_outputs;
        if (p->n_outputs == (int)(sizeof p->outputs / sizeof p->outputs[0]))
            return hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: too many outputs", m->path);
        p->outputs[p->n_outputs++] = id;
        p->v[v->root].last = p->n_steps; /* read at the end, by the download */
    }
    return 0;
}

/* "IN=OUT,...": moves each pair out of the request inputs and outputs. */
static int mark_states(hearth_plan *p, const char *states, hearth_err *err)
{
    const hearth_onnx *m = p->model;
    for (const char *s = states; s && *s;) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *eq = memchr(s, '=', len);
        char a[256], b[256];
        if (!eq || eq == s || (size_t)(eq - s) >= sizeof a || len - (size_t)(eq - s) - 1 >= sizeof b ||
            len == (size_t)(eq - s) + 1)
            return hearth_err_set(err, HEARTH_EINVAL, "--state %.*s: want INPUT=OUTPUT", (int)len, s);
        snprintf(a, sizeof a, "%.*s", (int)(eq - s), s);
        snprintf(b, sizeof b, "%.*s", (int)(len - (size_t)(eq - s) - 1), eq + 1);
        int vi = plan_find(p, a), vo = plan_find(p, b);
        if (vi < 0 || p->v[vi].io != PLAN_INPUT)
            return hearth_err_set(err, HEARTH_EINVAL, "--state %s=%s: '%s' is not an input of %s", a, b, a, m->path);
        if (vo < 0 || p->v[vo].io != PLAN_OUTPUT)
            return hearth_err_set(err, HEARTH_EINVAL, "--state %s=%s: '%s' is not an output of %s", a, b, b, m->path);
        plan_value *in = &p->v[vi], *out = &p->v[vo];
        if (in->ndim != out->ndim || memcmp(in->dims, out->dims, sizeof(int64_t) * (size_t)in->ndim) != 0)
            return hearth_err_set(err, HEARTH_EINVAL, "--state %s=%s: the two shapes differ (%lld and %lld elements)", a, b,
                                  (long long)in->n, (long long)out->n);
        if (out->root != vo)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                                  "--state %s=%s: '%s' is a view of '%s' (a Reshape or Identity): state outputs must be "
                                  "written by an op", a, b, b, p->v[out->root].name);
        if (p->n_states == (int)(sizeof p->state_in / sizeof p->state_in[0]))
            return hearth_err_set(err, HEARTH_ELIMIT, "--state: at most %d pairs", (int)(sizeof p->state_in / sizeof p->state_in[0]));
        in->io = PLAN_STATE_IN;
        out->io = PLAN_STATE_OUT;
        in->io_index = out->io_index = p->n_states;
        p->state_in[p->n_states] = vi;
        p->state_out[p->n_states] = vo;
        p->n_states++;
        s += len + (end ? 1 : 0);
    }
    /* renumber the request inputs and outputs without the state */
    int ni = 0, no = 0;
    for (int i = 0; i < p->n_inputs; i++)
        if (p->v[p->inputs[i]].io == PLAN_INPUT) {
            p->v[p->inputs[i]].io_index = ni;
            p->inputs[ni++] = p->inputs[i];
        }
    for (int i = 0; i < p->n_outputs; i++)
        if (p->v[p->outputs[i]].io == PLAN_OUTPUT) {
            p->v[p->outputs[i]].io_index = no;
            p->outputs[no++] = p->outputs[i];
        }
    p->n_inputs = ni;
    p->n_outputs = no;
    return 0;
}

int hearth_plan_build(hearth_plan *p, const hearth_onnx *m, const char *shapes, const char *states, hearth_err *err)
{
    memset(p, 0, sizeof *p);
    p->model = m;
    /* every value the plan can make, reserved at once (plan_new_value never
     * moves the array): inputs, initializers, each node's outputs, and the
     * few helper values a lowering adds (Gemm's bias: 2, Pad's fill: 1) */
    int64_t cap = (int64_t)m->n_inputs + m->n_inits + 16;
    for (int i = 0; i < m->n_nodes; i++)
        cap += (int64_t)m->nodes[i].n_out + 4;
    int st = cap > INT32_MAX / 2 ? hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: too many values", m->path) : 0;
    if (!st && !(p->v = malloc((size_t)cap * sizeof *p->v)))
        st = hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->cap_v = p->v ? (int)cap : 0;
    if (!st)
        st = add_inputs(p, m, shapes, err);
    if (!st)
        st = add_inits(p, m, err);
    if (!st && p->bad_shape)
        st = hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: '%s' has a dimension outside [0, 2^31] or more than 2^32 "
                            "elements", m->path, p->bad_shape);
    bool *absorbed = calloc((size_t)m->n_nodes + 1, 1);
    if (!absorbed && !st)
        st = hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    for (int i = 0; i < m->n_nodes && !st; i++) {
        if (absorbed[i])
            continue;
        const hearth_onnx_node *nd = &m->nodes[i];
        int in[16], out[8];
        if (nd->n_in > 16 || nd->n_out > 8) {
            st = hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: node '%s' (%s): %d inputs, %d outputs", m->path,
                                nd->name, nd->op_type, nd->n_in, nd->n_out);
            break;
        }
        if (nd->n_out < 1) { /* ONNX requires one; every fold and lowering writes out[0] */
            st = hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s) has no output", m->path, nd->name,
                                nd->op_type);
            break;
        }
        bool all_const = true;
        for (int j = 0; j < nd->n_in; j++) {
            in[j] = -1;
            if (!nd->in[j][0])
                continue;
            in[j] = plan_find(p, nd->in[j]);
            if (in[j] < 0) {
                st = hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s) reads '%s', which nothing before it makes",
                                    m->path, nd->name, nd->op_type, nd->in[j]);
                break;
            }
            if (!p->v[in[j]].is_const)
                all_const = false;
        }
        if (st)
            break;
        for (int j = 0; j < nd->n_out; j++)
            out[j] = -1;
        if (nd->domain[0] && strcmp(nd->domain, "ai.onnx") != 0) {
            st = hearth_err_set(err, HEARTH_EUNSUPPORTED,
                                "onnx: %s: node '%s': op %s of domain '%s' is not supported (hearth runs the default "
                                "domain, opset %lld)", m->path, nd->name, nd->op_type, nd->domain, (long long)m->opset);
            break;
        }
        /* Shape needs only its input's shape */
        bool folded = false;
        if (all_const || strcmp(nd->op_type, "Shape") == 0) {
            st = plan_fold(p, i, in, nd->n_in, out, nd->n_out, err);
            folded = st != HEARTH_EUNSUPPORTED;
            if (!folded && all_const && nd->n_in > 0) {
                st = hearth_err_set(err, HEARTH_EUNSUPPORTED,
                                    "onnx: %s: node '%s': op %s (opset %lld) on constants is not supported", m->path,
                                    nd->name, nd->op_type, (long long)m->opset);
                break;
            }
        }
        if (!folded)
            st = plan_lower(p, i, in, absorbed, err);
        if (!st && p->bad_shape)
            st = hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: node '%s' (%s): value '%s' has a dimension outside "
                                "[0, 2^31] or more than 2^32 elements", m->path, nd->name, nd->op_type,
                                p->bad_shape[0] ? p->bad_shape : "(unnamed)");
    }
    free(absorbed);
    if (!st)
        st = mark_outputs(p, m, err);
    if (!st)
        st = mark_states(p, states, err);
    if (!st)
        plan_compose_copies(p);
    if (!st)
        st = plan_memory(p, err);
    return st;
}

void hearth_plan_free(hearth_plan *p)
{
    for (int i = 0; i < p->n_allocs; i++)
        free(p->allocs[i]);
    free(p->allocs);
    free(p->v);
    free(p->steps);
    memset(p, 0, sizeof *p);
}

/* onnx_fold.c: nodes whose inputs are all constant, evaluated once on the
 * host at load. These are the shape computations exporters leave in graphs
 * (Shape -> Gather -> Unsqueeze -> Concat -> Reshape in UltraFace's
 * unsimplified export), Constant nodes, and arithmetic on constants.
 *
 * Elements move through double (exact for every int64 a shape holds, and
 * for float32), so one loop serves every dtype: this runs once per load over
 * a few dozen elements, where clarity beats speed. A node outside this set
 * with all-constant inputs is refused by the planner, naming it. */
#include "models/onnx_plan_int.h"

#include <math.h>
#include <stdio.h>

static double get(const plan_value *v, int64_t i)
{
    switch (v->dtype) {
    case HEARTH_ONNX_FLOAT: return ((const float *)v->data)[i];
    case HEARTH_ONNX_DOUBLE: return ((const double *)v->data)[i];
    default: return (double)plan_ival(v, i);
    }
}

/* x rounded toward zero into [lo, hi] (NaN: 0): ONNX leaves an
 * out-of-range cast undefined; C makes it undefined behaviour, so saturate. */
static int64_t sat(double x, double lo, double hi)
{
    if (!(x == x))
        return 0;
    return x <= lo ? (int64_t)lo : x >= hi ? (int64_t)hi : (int64_t)x;
}

static void set(int dtype, void *data, int64_t i, double x)
{
    switch (dtype) {
    case HEARTH_ONNX_FLOAT: ((float *)data)[i] = (float)x; break;
    case HEARTH_ONNX_DOUBLE: ((double *)data)[i] = x; break;
    case HEARTH_ONNX_INT64: ((int64_t *)data)[i] = sat(x, -9223372036854775808.0, 9223372036854774784.0); break;
    case HEARTH_ONNX_INT32: ((int32_t *)data)[i] = (int32_t)sat(x, INT32_MIN, INT32_MAX); break;
    case HEARTH_ONNX_INT8: ((int8_t *)data)[i] = (int8_t)sat(x, INT8_MIN, INT8_MAX); break;
    case HEARTH_ONNX_UINT8: case HEARTH_ONNX_BOOL: ((uint8_t *)data)[i] = (uint8_t)sat(x, 0, UINT8_MAX); break;
    default: break;
    }
}

/* A new constant output named name with dims; its data zeroed. */
static int new_const(hearth_plan *p, const char *name, int dtype, int ndim, const int64_t *dims, hearth_err *err)
{
    if (!hearth_onnx_dtype_size(dtype) || dtype == HEARTH_ONNX_FLOAT16)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: constant '%s' of type %s cannot be folded",
                              p->model->path, name, hearth_onnx_dtype_name(dtype));
    int id = plan_new_value(p, name, dtype, ndim, dims);
    if (id < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    if (p->v[id].n > (1 << 26))
        return hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: constant '%s' has %lld elements", p->model->path, name,
                              (long long)p->v[id].n);
    p->v[id].is_const = true;
    p->v[id].data = plan_alloc(p, (size_t)p->v[id].n * hearth_onnx_dtype_size(dtype));
    if (!p->v[id].data)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    return id;
}

/* A constant view: same data, new dims. */
static int view_const(hearth_plan *p, const char *name, int src, int ndim, const int64_t *dims, hearth_err *err)
{
    int64_t n = 1;
    for (int k = 0; k < ndim; k++)
        n *= dims[k];
    if (n != p->v[src].n)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: '%s' would have %lld elements, its input '%s' has %lld",
                              p->model->path, name, (long long)n, p->v[src].name, (long long)p->v[src].n);
    int id = plan_new_value(p, name, p->v[src].dtype, ndim, dims);
    if (id < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->v[id].is_const = true;
    p->v[id].data = p->v[src].data;
    return id;
}

static int fold_constant(hearth_plan *p, const hearth_onnx_node *nd, hearth_err *err)
{
    for (int k = 0; k < nd->n_attr; k++) {
        const hearth_onnx_attr *a = &nd->attr[k];
        int64_t one = 1;
        int id;
        if (strcmp(a->name, "value") == 0 && a->type == HEARTH_ONNX_ATTR_TENSOR && a->t) {
            id = plan_new_value(p, nd->out[0], a->t->dtype, a->t->ndim, a->t->dims);
            if (id < 0)
                return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
            p->v[id].is_const = true;
            p->v[id].data = (void *)a->t->data;
            return 0;
        }
        if (strcmp(a->name, "value_float") == 0 || strcmp(a->name, "value_int") == 0) {
            bool f = a->name[6] == 'f';
            if ((id = new_const(p, nd->out[0], f ? HEARTH_ONNX_FLOAT : HEARTH_ONNX_INT64, 0, &one, err)) < 0)
                return id;
            set(p->v[id].dtype, p->v[id].data, 0, f ? a->f : (double)a->i);
            return 0;
        }
        if (strcmp(a->name, "value_floats") == 0 || strcmp(a->name, "value_ints") == 0) {
            bool f = a->name[6] == 'f';
            int64_t n = a->n;
            if ((id = new_const(p, nd->out[0], f ? HEARTH_ONNX_FLOAT : HEARTH_ONNX_INT64, 1, &n, err)) < 0)
                return id;
            for (int64_t i = 0; i < n; i++)
                set(p->v[id].dtype, p->v[id].data, i, f ? a->floats[i] : (double)a->ints[i]);
            return 0;
        }
    }
    return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: Constant node '%s' has no value this loader reads",
                          p->model->path, nd->name);
}

/* Axes of Squeeze/Unsqueeze: the attribute (opset < 13) or input 1. */
static int64_t axes_of(const hearth_plan *p, const hearth_onnx_node *nd, const int *in, int n_in, int64_t *axes)
{
    const int64_t *ai;
    int64_t n = plan_attr_ints(nd, "axes", &ai);
    if (n >= 0) {
        for (int64_t k = 0; k < n && k < PLAN_MAX_DIMS; k++)
            axes[k] = ai[k];
        return n > PLAN_MAX_DIMS ? -2 : n;
    }
    if (n_in > 1 && in[1] >= 0) {
        const plan_value *a = &p->v[in[1]];
        if (a->n > PLAN_MAX_DIMS)
            return -2;
        for (int64_t k = 0; k < a->n; k++)
            axes[k] = plan_ival(a, k);
        return a->n;
    }
    return -1;
}

/* Output dims of Unsqueeze / Squeeze over src. */
int plan_squeeze_dims(const hearth_plan *p, const hearth_onnx_node *nd, const int *in, int n_in, int64_t *dims,
                      int *ndim, hearth_err *err)
{
    const plan_value *x = &p->v[in[0]];
    int64_t axes[PLAN_MAX_DIMS];
    int64_t na = axes_of(p, nd, in, n_in, axes);
    bool unsq = strcmp(nd->op_type, "Unsqueeze") == 0;
    if (na == -2 || (unsq && na < 0))
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): bad axes", p->model->path, nd->name,
                              nd->op_type);
    if (unsq) {
        int out_nd = x->ndim + (int)na;
        if (out_nd > PLAN_MAX_DIMS)
            return hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: node '%s': %d dims", p->model->path, nd->name, out_nd);
        bool ins[PLAN_MAX_DIMS] = {0};
        for (int64_t k = 0; k < na; k++) {
            int64_t a = axes[k] < 0 ? axes[k] + out_nd : axes[k];
            if (a < 0 || a >= out_nd || ins[a])
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Unsqueeze): axis %lld out of range",
                                      p->model->path, nd->name, (long long)axes[k]);
            ins[a] = true;
        }
        for (int k = 0, j = 0; k < out_nd; k++)
            dims[k] = ins[k] ? 1 : x->dims[j++];
        *ndim = out_nd;
        return 0;
    }
    bool drop[PLAN_MAX_DIMS] = {0};
    if (na < 0) {
        for (int k = 0; k < x->ndim; k++)
            drop[k] = x->dims[k] == 1;
    } else
        for (int64_t k = 0; k < na; k++) {
            int64_t a = axes[k] < 0 ? axes[k] + x->ndim : axes[k];
            if (a < 0 || a >= x->ndim || x->dims[a] != 1)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Squeeze): axis %lld is not a dim of 1",
                                      p->model->path, nd->name, (long long)axes[k]);
            drop[a] = true;
        }
    int o = 0;
    for (int k = 0; k < x->ndim; k++)
        if (!drop[k])
            dims[o++] = x->dims[k];
    *ndim = o;
    return 0;
}

/* Output dims of Reshape(x, shape) (shape a constant INT64 value). */
int plan_reshape_dims(const hearth_plan *p, const hearth_onnx_node *nd, const plan_value *x, const plan_value *shape,
                      int64_t *dims, int *ndim, hearth_err *err)
{
    if (shape->n > PLAN_MAX_DIMS)
        return hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: node '%s' (Reshape): %lld dims", p->model->path, nd->name,
                              (long long)shape->n);
    bool allowzero = plan_attr_i(nd, "allowzero", 0) != 0;
    int64_t known = 1;
    int infer = -1;
    for (int64_t k = 0; k < shape->n; k++) {
        int64_t d = plan_ival(shape, k);
        if (d == 0 && !allowzero) {
            if (k >= x->ndim)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Reshape): 0 at dim %lld copies nothing",
                                      p->model->path, nd->name, (long long)k);
            d = x->dims[k];
        }
        if (d == -1) {
            if (infer >= 0)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Reshape): two -1 dims", p->model->path,
                                      nd->name);
            infer = (int)k;
            d = 1;
        } else if (d < 0 || d > PLAN_DIM_MAX) /* bounded, the product below cannot overflow */
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Reshape): dim %lld", p->model->path,
                                  nd->name, (long long)d);
        if (known > PLAN_ELEMS_MAX && d > 0)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Reshape): a shape past 2^32 elements",
                                  p->model->path, nd->name);
        dims[k] = d;
        known *= d;
    }
    if (infer >= 0) {
        if (known == 0 || x->n % known)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Reshape): %lld elements do not split by %lld",
                                  p->model->path, nd->name, (long long)x->n, (long long)known);
        dims[infer] = x->n / known;
        known = x->n;
    }
    if (known != x->n)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Reshape): %lld elements into a shape of %lld",
                              p->model->path, nd->name, (long long)x->n, (long long)known);
    *ndim = (int)shape->n;
    return 0;
}

/* Broadcast dims of a and b (numpy rules); -1 when they do not broadcast. */
int plan_broadcast(const plan_value *a, const plan_value *b, int64_t *dims)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int k = 0; k < nd; k++) {
        int ka = k - (nd - a->ndim), kb = k - (nd - b->ndim);
        int64_t da = ka >= 0 ? a->dims[ka] : 1, db = kb >= 0 ? b->dims[kb] : 1;
        if (da != db && da != 1 && db != 1)
            return -1;
        dims[k] = da == 1 ? db : da;
    }
    return nd;
}

/* Index (in a's own dims) of output element i of a broadcast. */
static int64_t bcast_index(const plan_value *a, const int64_t *dims, int nd, int64_t i)
{
    int64_t idx = 0, stride = 1;
    for (int k = nd - 1; k >= 0; k--) {
        int64_t c = i % dims[k];
        i /= dims[k];
        int ka = k - (nd - a->ndim);
        if (ka >= 0) {
            if (a->dims[ka] != 1)
                idx += c * stride;
            stride *= a->dims[ka];
        }
    }
    return idx;
}

int plan_fold(hearth_plan *p, int node, const int *in, int n_in, const int *out, int n_out, hearth_err *err)
{
    (void)out;
    (void)n_out;
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const char *op = nd->op_type;
    int64_t dims[PLAN_MAX_DIMS];
    int ndim = 0, id;
    const plan_value *x = n_in > 0 && in[0] >= 0 ? &p->v[in[0]] : NULL;
    if (nd->n_out < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s) has no output", p->model->path, nd->name, op);
    const char *name = nd->out[0]; /* only now: a node without outputs has no out[0] */

    if (strcmp(op, "Constant") == 0)
        return fold_constant(p, nd, err);
    if (!x)
        return HEARTH_EUNSUPPORTED;
    if (strcmp(op, "Shape") == 0) {
        int64_t start = plan_attr_i(nd, "start", 0), end = plan_attr_i(nd, "end", x->ndim);
        if (start < 0) start += x->ndim;
        if (end < 0) end += x->ndim;
        start = start < 0 ? 0 : start > x->ndim ? x->ndim : start;
        end = end < start ? start : end > x->ndim ? x->ndim : end;
        int64_t n = end - start;
        if ((id = new_const(p, name, HEARTH_ONNX_INT64, 1, &n, err)) < 0)
            return id;
        for (int64_t k = 0; k < n; k++)
            ((int64_t *)p->v[id].data)[k] = x->dims[start + k];
        return 0;
    }
    if (strcmp(op, "Identity") == 0 || strcmp(op, "Dropout") == 0)
        return view_const(p, name, in[0], x->ndim, x->dims, err) < 0 ? HEARTH_EINVAL : 0;
    if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0) {
        int st = plan_squeeze_dims(p, nd, in, n_in, dims, &ndim, err);
        if (st)
            return st;
        return (id = view_const(p, name, in[0], ndim, dims, err)) < 0 ? id : 0;
    }
    if (strcmp(op, "Reshape") == 0 && n_in > 1 && in[1] >= 0) {
        int st = plan_reshape_dims(p, nd, x, &p->v[in[1]], dims, &ndim, err);
        if (st)
            return st;
        return (id = view_const(p, name, in[0], ndim, dims, err)) < 0 ? id : 0;
    }
    if (strcmp(op, "Flatten") == 0) {
        int64_t axis = plan_attr_i(nd, "axis", 1);
        if (axis < 0) axis += x->ndim;
        if (axis < 0 || axis > x->ndim)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Flatten): axis out of range", p->model->path, nd->name);
        dims[0] = 1;
        for (int k = 0; k < axis; k++) dims[0] *= x->dims[k];
        dims[1] = x->n / (dims[0] ? dims[0] : 1);
        return (id = view_const(p, name, in[0], 2, dims, err)) < 0 ? id : 0;
    }
    if (strcmp(op, "Cast") == 0) {
        int to = (int)plan_attr_i(nd, "to", 0);
        if (hearth_onnx_dtype_size(to) == 0)
            return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: node '%s' (Cast): to=%d is not a type hearth reads",
                                  p->model->path, nd->name, to);
        if ((id = new_const(p, name, to, x->ndim, x->dims, err)) < 0)
            return id;
        for (int64_t i = 0; i < x->n; i++)
            set(to, p->v[id].data, i, get(x, i));
        return 0;
    }
    if (strcmp(op, "Concat") == 0) {
        int64_t axis = plan_attr_i(nd, "axis", 0);
        if (axis < 0) axis += x->ndim;
        if (axis < 0 || axis >= x->ndim)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Concat): axis out of range", p->model->path, nd->name);
        memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
        dims[axis] = 0;
        for (int j = 0; j < n_in; j++) {
            if (in[j] < 0)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Concat): input %d is empty",
                                      p->model->path, nd->name, j);
            const plan_value *a = &p->v[in[j]];
            if (a->ndim != x->ndim || a->dtype != x->dtype)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Concat): inputs differ in rank or type",
                                      p->model->path, nd->name);
            dims[axis] += a->dims[axis];
        }
        if ((id = new_const(p, name, x->dtype, x->ndim, dims, err)) < 0)
            return id;
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < axis; k++) outer *= dims[k];
        for (int k = (int)axis + 1; k < x->ndim; k++) inner *= dims[k];
        int64_t o = 0;
        for (int64_t r = 0; r < outer; r++)
            for (int j = 0; j < n_in; j++) {
                const plan_value *a = &p->v[in[j]];
                int64_t chunk = a->dims[axis] * inner;
                for (int64_t e = 0; e < chunk; e++)
                    set(x->dtype, p->v[id].data, o++, get(a, r * chunk + e));
            }
        return 0;
    }
    if (strcmp(op, "Gather") == 0 && n_in > 1 && in[1] >= 0) {
        const plan_value *ix = &p->v[in[1]];
        int64_t axis = plan_attr_i(nd, "axis", 0);
        if (axis < 0) axis += x->ndim;
        if (axis < 0 || axis >= x->ndim || x->ndim + ix->ndim - 1 > PLAN_MAX_DIMS)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Gather): axis out of range", p->model->path, nd->name);
        for (int k = 0; k < axis; k++) dims[ndim++] = x->dims[k];
        for (int k = 0; k < ix->ndim; k++) dims[ndim++] = ix->dims[k];
        for (int k = (int)axis + 1; k < x->ndim; k++) dims[ndim++] = x->dims[k];
        if ((id = new_const(p, name, x->dtype, ndim, dims, err)) < 0)
            return id;
        int64_t outer = 1, inner = 1;
        for (int k = 0; k < axis; k++) outer *= x->dims[k];
        for (int k = (int)axis + 1; k < x->ndim; k++) inner *= x->dims[k];
        int64_t o = 0;
        for (int64_t r = 0; r < outer; r++)
            for (int64_t j = 0; j < ix->n; j++) {
                int64_t g = plan_ival(ix, j);
                if (g < 0) g += x->dims[axis];
                if (g < 0 || g >= x->dims[axis])
                    return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Gather): index %lld out of range",
                                          p->model->path, nd->name, (long long)plan_ival(ix, j));
                for (int64_t e = 0; e < inner; e++)
                    set(x->dtype, p->v[id].data, o++, get(x, (r * x->dims[axis] + g) * inner + e));
            }
        return 0;
    }
    static const char *const bin_ops[] = {"Add", "Sub", "Mul", "Div"};
    for (int b = 0; b < 4; b++) {
        if (strcmp(op, bin_ops[b]) != 0 || n_in < 2 || in[1] < 0)
            continue;
        const plan_value *y = &p->v[in[1]];
        if ((ndim = plan_broadcast(x, y, dims)) < 0)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): shapes do not broadcast", p->model->path,
                                  nd->name, op);
        if ((id = new_const(p, name, x->dtype, ndim, dims, err)) < 0)
            return id;
        bool integer = x->dtype != HEARTH_ONNX_FLOAT && x->dtype != HEARTH_ONNX_DOUBLE;
        for (int64_t i = 0; i < p->v[id].n; i++) {
            double u = get(x, bcast_index(x, dims, ndim, i)), w = get(y, bcast_index(y, dims, ndim, i)), r;
            if (b == 0) r = u + w;
            else if (b == 1) r = u - w;
            else if (b == 2) r = u * w;
            else if (integer) {
                if (w == 0)
                    return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Div): integer division by zero",
                                          p->model->path, nd->name);
                r = trunc(u / w);
            } else r = u / w;
            set(x->dtype, p->v[id].data, i, r);
        }
        return 0;
    }
    if (strcmp(op, "Slice") == 0) {
        /* constant slices: rare (a shape's tail); opset >= 10 inputs or < 10 attributes */
        int64_t st_[PLAN_MAX_DIMS], en[PLAN_MAX_DIMS], ax[PLAN_MAX_DIMS], sp[PLAN_MAX_DIMS];
        int n = 0;
        const int64_t *as = NULL, *ae = NULL, *aa = NULL;
        if (n_in >= 3) {
            if (in[1] < 0 || in[2] < 0)
                return HEARTH_EUNSUPPORTED;
            n = (int)p->v[in[1]].n;
            if (n > x->ndim || p->v[in[2]].n != n)
                return HEARTH_EUNSUPPORTED;
            for (int k = 0; k < n; k++) {
                st_[k] = plan_ival(&p->v[in[1]], k);
                en[k] = plan_ival(&p->v[in[2]], k);
                ax[k] = n_in > 3 && in[3] >= 0 ? plan_ival(&p->v[in[3]], k) : k;
                sp[k] = n_in > 4 && in[4] >= 0 ? plan_ival(&p->v[in[4]], k) : 1;
            }
        } else {
            int64_t ns = plan_attr_ints(nd, "starts", &as), ne = plan_attr_ints(nd, "ends", &ae);
            int64_t na = plan_attr_ints(nd, "axes", &aa);
            if (ns < 0 || ns != ne || ns > x->ndim || (na >= 0 && na != ns))
                return HEARTH_EUNSUPPORTED;
            n = (int)ns;
            for (int k = 0; k < n; k++) {
                st_[k] = as[k];
                en[k] = ae[k];
                ax[k] = na >= 0 ? aa[k] : k;
                sp[k] = 1;
            }
        }
        if (x->ndim != 1 || n != 1 || sp[0] != 1 || (ax[0] != 0 && ax[0] != -1))
            return HEARTH_EUNSUPPORTED;
        int64_t d = x->dims[0], s0 = st_[0] < 0 ? st_[0] + d : st_[0], e0 = en[0] < 0 ? en[0] + d : en[0];
        s0 = s0 < 0 ? 0 : s0 > d ? d : s0;
        e0 = e0 < s0 ? s0 : e0 > d ? d : e0;
        int64_t len = e0 - s0;
        if ((id = new_const(p, name, x->dtype, 1, &len, err)) < 0)
            return id;
        for (int64_t i = 0; i < len; i++)
            set(x->dtype, p->v[id].data, i, get(x, s0 + i));
        return 0;
    }
    return HEARTH_EUNSUPPORTED;
}

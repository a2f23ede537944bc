/* onnx_lower.c: ONNX nodes with runtime inputs, lowered to device steps
 * (dev_vision.h), with the two fusions conv nets need: a Conv absorbs the
 * BatchNormalization after it (folded into its weights and bias, on the
 * host, once) and then an activation (Relu, Clip, Sigmoid, LeakyRelu),
 * each only when the Conv's output has that one reader. Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity and Dropout make views (no step).
 *
 * Semantics follow the ONNX operator docs per opset where they changed:
 * Softmax's axis (opset < 13 flattens from axis on), Clip's bounds
 * (attributes before 11, inputs after), Slice's and Squeeze's arguments
 * (attributes, then inputs), Resize's defaults (opset 10: asymmetric). */
#include "models/onnx_plan_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

static int unsupported(const hearth_plan *p, int node, const char *why, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: node '%s': op %s (opset %lld) is not supported%s%s",
                          p->model->path, nd->name, nd->op_type, (long long)p->model->opset, why ? ": " : "",
                          why ? why : "");
}

/* A runtime FLOAT output value for the node's k-th output. */
static int out_value(hearth_plan *p, int node, int k, int ndim, const int64_t *dims, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    int id = plan_new_value(p, nd->out[k], HEARTH_ONNX_FLOAT, ndim, dims);
    if (id < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    if (p->v[id].n > ((int64_t)1 << 31) || p->bad_shape)
        return hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: '%s' has %lld elements", p->model->path, nd->out[k],
                              (long long)p->v[id].n);
    return id;
}

/* Step s reads value id: its storage lives at least until s. A constant
 * read on the device is marked for the constant block, as f32. */
static int reads(hearth_plan *p, int s, int id, hearth_err *err)
{
    plan_value *v = &p->v[id];
    if (v->is_const) {
        if (v->dtype != HEARTH_ONNX_FLOAT) {
            /* an integer constant in float arithmetic: converted once */
            float *f = plan_alloc(p, (size_t)v->n * sizeof(float));
            if (!f)
                return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
            for (int64_t i = 0; i < v->n; i++)
                f[i] = v->dtype == HEARTH_ONNX_DOUBLE ? (float)((const double *)v->data)[i] : (float)plan_ival(v, i);
            v->data = f;
            v->dtype = HEARTH_ONNX_FLOAT;
        }
        if (v->const_off == -1)
            v->const_off = -2; /* placed by plan_memory */
        return 0;
    }
    plan_value *r = &p->v[v->root];
    if (r->last < s)
        r->last = s;
    return 0;
}

static void writes(hearth_plan *p, int s, int id)
{
    plan_value *r = &p->v[p->v[id].root];
    if (r->def < 0 || r->def > s)
        r->def = s;
    if (r->last < s)
        r->last = s;
}

static const plan_value *need_const(const hearth_plan *p, int node, int id, const char *what, hearth_err *err)
{
    if (id < 0 || !p->v[id].is_const) {
        unsupported(p, node, what, err);
        return NULL;
    }
    return &p->v[id];
}

/* ---- Conv (+ BatchNormalization + activation) ---- */

static int conv_attrs(const hearth_plan *p, int node, const plan_value *x, const plan_value *w, hearth_conv_desc *d,
                      hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    bool one_d = x->ndim == 3;
    if ((x->ndim != 4 && !one_d) || w->ndim != x->ndim)
        return unsupported(p, node, "only 1-D and 2-D convolutions (3-D or 4-D tensors)", err);
    d->n = x->dims[0];
    d->c_in = x->dims[1];
    d->h = one_d ? 1 : x->dims[2];
    d->w = x->dims[x->ndim - 1];
    d->c_out = w->dims[0];
    d->kh = one_d ? 1 : w->dims[2];
    d->kw = w->dims[w->ndim - 1];
    d->groups = plan_attr_i(nd, "group", 1);
    d->stride_h = d->stride_w = d->dil_h = d->dil_w = 1;
    const int64_t *a;
    int64_t na;
    int sp = one_d ? 1 : 2;
    if ((na = plan_attr_ints(nd, "strides", &a)) == sp) {
        d->stride_h = one_d ? 1 : a[0];
        d->stride_w = a[sp - 1];
    }
    if ((na = plan_attr_ints(nd, "dilations", &a)) == sp) {
        d->dil_h = one_d ? 1 : a[0];
        d->dil_w = a[sp - 1];
    }
    if ((na = plan_attr_ints(nd, "kernel_shape", &a)) == sp &&
        ((!one_d && a[0] != d->kh) || a[sp - 1] != d->kw))
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Conv): kernel_shape differs from the weight's",
                              p->model->path, nd->name);
    if (w->dims[1] * d->groups != d->c_in)
        return hearth_err_set(err, HEARTH_EINVAL,
                              "onnx: %s: node '%s' (Conv): weight takes %lld channels x %lld groups, input has %lld",
                              p->model->path, nd->name, (long long)w->dims[1], (long long)d->groups, (long long)d->c_in);
    const char *ap = plan_attr_s(nd, "auto_pad", "NOTSET");
    if (strcmp(ap, "NOTSET") == 0) {
        if ((na = plan_attr_ints(nd, "pads", &a)) == 2 * sp) {
            if (one_d) {
                d->pad_l = a[0];
                d->pad_r = a[1];
            } else {
                d->pad_t = a[0];
                d->pad_l = a[1];
                d->pad_b = a[2];
                d->pad_r = a[3];
            }
        } else if (na >= 0)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Conv): %lld pads", p->model->path, nd->name,
                                  (long long)na);
    } else if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
        bool upper = ap[5] == 'U';
        int64_t in[2] = {d->h, d->w}, k[2] = {d->kh, d->kw}, s[2] = {d->stride_h, d->stride_w},
                dl[2] = {d->dil_h, d->dil_w}, lo[2], hi[2];
        for (int i = 0; i < 2; i++) {
            int64_t out = (in[i] + s[i] - 1) / s[i];
            int64_t total = (out - 1) * s[i] + (k[i] - 1) * dl[i] + 1 - in[i];
            if (total < 0)
                total = 0;
            lo[i] = upper ? total / 2 : total - total / 2;
            hi[i] = total - lo[i];
        }
        d->pad_t = lo[0];
        d->pad_b = hi[0];
        d->pad_l = lo[1];
        d->pad_r = hi[1];
    } else if (strcmp(ap, "VALID") != 0)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Conv): auto_pad '%s'", p->model->path, nd->name, ap);
    d->name = nd->name;
    return 0;
}

/* The activation node act (Relu, Clip, Sigmoid, LeakyRelu) as a fused conv
 * activation; false when it is none of them or its bounds are not constant. */
static bool act_of(const hearth_plan *p, int act, hearth_conv_desc *d)
{
    const hearth_onnx_node *nd = &p->model->nodes[act];
    if (strcmp(nd->op_type, "Relu") == 0)
        d->act = HEARTH_ACT_RELU;
    else if (strcmp(nd->op_type, "Sigmoid") == 0)
        d->act = HEARTH_ACT_SIGMOID;
    else if (strcmp(nd->op_type, "LeakyRelu") == 0) {
        d->act = HEARTH_ACT_LEAKY_RELU;
        d->act_min = plan_attr_f(nd, "alpha", 0.01f);
    } else if (strcmp(nd->op_type, "Clip") == 0) {
        d->act = HEARTH_ACT_CLIP;
        d->act_min = -FLT_MAX;
        d->act_max = FLT_MAX;
        if (p->model->opset < 11) {
            d->act_min = plan_attr_f(nd, "min", -FLT_MAX);
            d->act_max = plan_attr_f(nd, "max", FLT_MAX);
        } else
            for (int j = 1; j < nd->n_in && j < 3; j++) {
                if (!nd->in[j][0])
                    continue;
                int id = plan_find(p, nd->in[j]);
                if (id < 0 || !p->v[id].is_const || p->v[id].n != 1)
                    return false;
                float f = p->v[id].dtype == HEARTH_ONNX_FLOAT ? ((const float *)p->v[id].data)[0]
                                                              : (float)plan_ival(&p->v[id], 0);
                *(j == 1 ? &d->act_min : &d->act_max) = f;
            }
    } else
        return false;
    return true;
}

static int lower_conv(hearth_plan *p, int node, const int *in, bool *absorbed, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    if (nd->n_in < 2 || in[0] < 0 || p->v[in[0]].is_const)
        return unsupported(p, node, "wants a runtime input", err);
    const plan_value *x = &p->v[in[0]];
    const plan_value *w = need_const(p, node, in[1], "the weight must be a constant", err);
    if (!w)
        return HEARTH_EUNSUPPORTED;
    const plan_value *b = nd->n_in > 2 && in[2] >= 0 ? need_const(p, node, in[2], "the bias must be a constant", err) : NULL;
    if (nd->n_in > 2 && in[2] >= 0 && !b)
        return HEARTH_EUNSUPPORTED;
    if (w->dtype != HEARTH_ONNX_FLOAT || (b && (b->dtype != HEARTH_ONNX_FLOAT || b->n != w->dims[0])))
        return unsupported(p, node, "weight and bias must be FLOAT, the bias one per output channel", err);
    hearth_conv_desc d = {0};
    int st = conv_attrs(p, node, x, w, &d, err);
    if (st)
        return st;
    if ((st = hearth_conv_desc_finish(&d, err)))
        return st;

    size_t wn = (size_t)w->n;
    float *wf = plan_alloc(p, wn * sizeof(float)), *bf = plan_alloc(p, (size_t)d.c_out * sizeof(float));
    if (!wf || !bf)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    memcpy(wf, w->data, wn * sizeof(float));
    if (b)
        memcpy(bf, b->data, (size_t)d.c_out * sizeof(float));
    const char *out = nd->out[0];
    int last = node;
    /* BatchNormalization folded in: w' = w * g / sqrt(var + eps), b' = (b - mean) * g / sqrt(var + eps) + beta */
    int bn = plan_fuse_next(p, node, out, "BatchNormalization");
    if (bn >= 0) {
        const hearth_onnx_node *bnd = &p->model->nodes[bn];
        const plan_value *pv[4];
        bool ok = bnd->n_in == 5 && (bnd->n_out == 1 || !bnd->out[1][0]);
        for (int j = 0; j < 4 && ok; j++) {
            int id = plan_find(p, bnd->in[j + 1]);
            ok = id >= 0 && p->v[id].is_const && p->v[id].dtype == HEARTH_ONNX_FLOAT && p->v[id].n == d.c_out;
            pv[j] = ok ? &p->v[id] : NULL;
        }
        if (ok) {
            float eps = plan_attr_f(bnd, "epsilon", 1e-5f);
            const float *g = pv[0]->data, *beta = pv[1]->data, *mean = pv[2]->data, *var = pv[3]->data;
            size_t per = wn / (size_t)d.c_out;
            for (int64_t c = 0; c < d.c_out; c++) {
                float s = g[c] / sqrtf(var[c] + eps);
                for (size_t i = 0; i < per; i++)
                    wf[(size_t)c * per + i] *= s;
                bf[c] = (bf[c] - mean[c]) * s + beta[c];
            }
            absorbed[bn] = true;
            out = bnd->out[0];
            last = bn;
        }
    }
    const char *acts[] = {"Relu", "Clip", "Sigmoid", "LeakyRelu"};
    for (int a = 0; a < 4; a++) {
        int an = plan_fuse_next(p, last, out, acts[a]);
        if (an >= 0 && act_of(p, an, &d)) {
            absorbed[an] = true;
            out = p->model->nodes[an].out[0];
            break;
        }
    }
    int64_t dims[4] = {d.n, d.c_out, d.h_out, d.w_out};
    int id = plan_new_value(p, out, HEARTH_ONNX_FLOAT, x->ndim, dims);
    if (id < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    if (x->ndim == 3) {
        p->v[id].dims[2] = d.w_out;
        p->v[id].n = d.n * d.c_out * d.w_out;
    }
    int s = plan_new_step(p, STEP_CONV, node);
    if (s < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].y = id;
    p->steps[s].u.conv.d = d;
    p->steps[s].u.conv.w = wf;
    p->steps[s].u.conv.bias = bf;
    reads(p, s, in[0], err);
    writes(p, s, id);
    return 0;
}

/* BatchNormalization alone: a depthwise 1x1 conv with the folded scale. */
static int lower_bn(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    if (nd->n_in != 5 || x->ndim < 2)
        return unsupported(p, node, "wants (N, C, ...) and 4 constant vectors", err);
    const plan_value *pv[4];
    for (int j = 0; j < 4; j++) {
        pv[j] = need_const(p, node, in[j + 1], "scale, bias, mean and var must be constants", err);
        if (!pv[j])
            return HEARTH_EUNSUPPORTED;
        if (pv[j]->dtype != HEARTH_ONNX_FLOAT || pv[j]->n != x->dims[1])
            return unsupported(p, node, "one FLOAT per channel", err);
    }
    hearth_conv_desc d = {0};
    d.n = x->dims[0];
    d.c_in = d.c_out = d.groups = x->dims[1];
    d.h = 1;
    d.w = x->n / (d.n * d.c_in);
    d.kh = d.kw = d.stride_h = d.stride_w = d.dil_h = d.dil_w = 1;
    d.name = nd->name;
    int st = hearth_conv_desc_finish(&d, err);
    if (st)
        return st;
    float *wf = plan_alloc(p, (size_t)d.c_out * sizeof(float)), *bf = plan_alloc(p, (size_t)d.c_out * sizeof(float));
    if (!wf || !bf)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    float eps = plan_attr_f(nd, "epsilon", 1e-5f);
    const float *g = pv[0]->data, *beta = pv[1]->data, *mean = pv[2]->data, *var = pv[3]->data;
    for (int64_t c = 0; c < d.c_out; c++) {
        wf[c] = g[c] / sqrtf(var[c] + eps);
        bf[c] = beta[c] - mean[c] * wf[c];
    }
    int id = out_value(p, node, 0, x->ndim, x->dims, err);
    int s = plan_new_step(p, STEP_CONV, node);
    if (id < 0 || s < 0)
        return id < 0 ? id : hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].y = id;
    p->steps[s].u.conv.d = d;
    p->steps[s].u.conv.w = wf;
    p->steps[s].u.conv.bias = bf;
    reads(p, s, in[0], err);
    writes(p, s, id);
    return 0;
}

/* ---- elementwise ---- */

static const struct { const char *op; hearth_unary_op un; } unary_ops[] = {
    {"Relu", HEARTH_UN_RELU}, {"Sigmoid", HEARTH_UN_SIGMOID}, {"Exp", HEARTH_UN_EXP}, {"Tanh", HEARTH_UN_TANH},
    {"Clip", HEARTH_UN_CLIP}, {"LeakyRelu", HEARTH_UN_LEAKY_RELU}, {"HardSigmoid", HEARTH_UN_HARD_SIGMOID},
    {"HardSwish", HEARTH_UN_HARD_SWISH}, {"Neg", HEARTH_UN_NEG}, {"Sqrt", HEARTH_UN_SQRT}, {"Abs", HEARTH_UN_ABS},
    {"Log", HEARTH_UN_LOG},
};

static int lower_unary(hearth_plan *p, int node, const int *in, hearth_unary_op op, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    float a = 0, b = 0;
    if (op == HEARTH_UN_CLIP) {
        hearth_conv_desc d = {0};
        if (!act_of(p, node, &d))
            return unsupported(p, node, "Clip bounds must be constants", err);
        a = d.act_min;
        b = d.act_max;
    } else if (op == HEARTH_UN_LEAKY_RELU)
        a = plan_attr_f(nd, "alpha", 0.01f);
    else if (op == HEARTH_UN_HARD_SIGMOID) {
        a = plan_attr_f(nd, "alpha", 0.2f);
        b = plan_attr_f(nd, "beta", 0.5f);
    }
    int id = out_value(p, node, 0, x->ndim, x->dims, err);
    int s = plan_new_step(p, STEP_UNARY, node);
    if (id < 0 || s < 0)
        return id < 0 ? id : hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].y = id;
    p->steps[s].u.un.op = op;
    p->steps[s].u.un.a = a;
    p->steps[s].u.un.b = b;
    reads(p, s, in[0], err);
    writes(p, s, id);
    return 0;
}

/* Element strides of operand v broadcast into out dims (0 where it repeats). */
static void bcast_strides(const plan_value *v, const int64_t *dims, int nd, int64_t *st)
{
    int64_t own[PLAN_MAX_DIMS];
    plan_strides(v->dims, v->ndim, own);
    for (int k = 0; k < nd; k++) {
        int kv = k - (nd - v->ndim);
        st[k] = kv < 0 || v->dims[kv] == 1 ? 0 : own[kv];
    }
    (void)dims;
}

/* Drops size-1 dims and merges dims k-1 and k where both stride lists step
 * through them as one, into od, oa, ob (HEARTH_VIS_DIMS each): the merged
 * count (0 when every dim is 1), or -1 when more than HEARTH_VIS_DIMS stay.
 * Binary ops and strided copies both run on the merged shape. */
static int merge_dims(int nd, const int64_t *dims, const int64_t *sa, const int64_t *sb, int64_t *od, int64_t *oa,
                      int64_t *ob)
{
    int m = 0;
    for (int k = 0; k < nd; k++) {
        if (dims[k] == 1)
            continue;
        if (m > 0 && sa[k] * dims[k] == oa[m - 1] && sb[k] * dims[k] == ob[m - 1]) {
            od[m - 1] *= dims[k];
            oa[m - 1] = sa[k];
            ob[m - 1] = sb[k];
            continue;
        }
        if (m == HEARTH_VIS_DIMS)
            return -1;
        od[m] = dims[k];
        oa[m] = sa[k];
        ob[m] = sb[k];
        m++;
    }
    return m;
}

/* Y (named after the node's output) = in[0] op in[1]. */
static int binary_step(hearth_plan *p, int node, const int *in, hearth_binary_op op, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *a = &p->v[in[0]], *b = &p->v[in[1]];
    int64_t dims[PLAN_MAX_DIMS], sa[PLAN_MAX_DIMS], sb[PLAN_MAX_DIMS];
    int ndim = plan_broadcast(a, b, dims);
    if (ndim < 0)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): shapes of '%s' and '%s' do not broadcast",
                              p->model->path, nd->name, nd->op_type, a->name, b->name);
    bcast_strides(a, dims, ndim, sa);
    bcast_strides(b, dims, ndim, sb);
    int id = out_value(p, node, 0, ndim ? ndim : 1, ndim ? dims : (int64_t[]){1}, err);
    if (id < 0)
        return id;
    if (ndim == 0) {
        ndim = 1;
        dims[0] = 1;
        sa[0] = sb[0] = 0;
        p->v[id].ndim = 0;
    }
    hearth_binary_desc d = {.op = op};
    int m = merge_dims(ndim, dims, sa, sb, d.dims, d.a_stride, d.b_stride);
    if (m < 0)
        return unsupported(p, node, "a broadcast over more than 6 dims", err);
    if (m == 0) {
        d.dims[0] = 1;
        m = 1;
    }
    d.ndim = m;
    int s = plan_new_step(p, STEP_BINARY, node);
    if (s < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].b = in[1];
    p->steps[s].y = id;
    p->steps[s].u.bin = d;
    int st = reads(p, s, in[0], err);
    if (!st)
        st = reads(p, s, in[1], err);
    writes(p, s, id);
    return st;
}

static int lower_binary(hearth_plan *p, int node, const int *in, hearth_binary_op op, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    if (nd->n_in != 2 || in[0] < 0 || in[1] < 0)
        return unsupported(p, node, "wants exactly two inputs", err);
    return binary_step(p, node, in, op, err);
}

/* ---- pooling, softmax ---- */

static int lower_pool(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    if (x->ndim != 4)
        return unsupported(p, node, "only 2-D pooling over (N, C, H, W)", err);
    if (nd->n_out > 1 && nd->out[1][0])
        return unsupported(p, node, "MaxPool's Indices output", err);
    bool global = strncmp(nd->op_type, "Global", 6) == 0;
    hearth_pool2d_desc d = {0};
    d.kind = strstr(nd->op_type, "Max") ? HEARTH_POOL_MAX : HEARTH_POOL_AVG;
    d.n = x->dims[0];
    d.c = x->dims[1];
    d.h = x->dims[2];
    d.w = x->dims[3];
    d.stride_h = d.stride_w = d.dil_h = d.dil_w = 1;
    if (global) {
        d.kh = d.h;
        d.kw = d.w;
        d.h_out = d.w_out = 1;
    } else {
        const int64_t *a;
        if (plan_attr_ints(nd, "kernel_shape", &a) != 2)
            return unsupported(p, node, "kernel_shape must give 2 dims", err);
        d.kh = a[0];
        d.kw = a[1];
        if (plan_attr_ints(nd, "strides", &a) == 2) {
            d.stride_h = a[0];
            d.stride_w = a[1];
        }
        if (plan_attr_ints(nd, "dilations", &a) == 2) {
            d.dil_h = a[0];
            d.dil_w = a[1];
        }
        if (plan_attr_ints(nd, "pads", &a) == 4) {
            d.pad_t = a[0];
            d.pad_l = a[1];
            d.pad_b = a[2];
            d.pad_r = a[3];
        }
        const char *ap = plan_attr_s(nd, "auto_pad", "NOTSET");
        bool ceil_mode = plan_attr_i(nd, "ceil_mode", 0) != 0;
        d.count_include_pad = plan_attr_i(nd, "count_include_pad", 0) != 0;
        int64_t in_[2] = {d.h, d.w}, k[2] = {d.kh, d.kw}, s[2] = {d.stride_h, d.stride_w}, dl[2] = {d.dil_h, d.dil_w};
        int64_t *lo[2] = {&d.pad_t, &d.pad_l}, *hi[2] = {&d.pad_b, &d.pad_r}, *out[2] = {&d.h_out, &d.w_out};
        for (int i = 0; i < 2; i++) {
            if (k[i] < 1 || s[i] < 1 || dl[i] < 1)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): kernel, strides, dilations >= 1",
                                      p->model->path, nd->name, nd->op_type);
            int64_t ek = (k[i] - 1) * dl[i] + 1;
            if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
                *out[i] = (in_[i] + s[i] - 1) / s[i];
                int64_t total = (*out[i] - 1) * s[i] + ek - in_[i];
                if (total < 0) total = 0;
                *lo[i] = ap[5] == 'U' ? total / 2 : total - total / 2;
                *hi[i] = total - *lo[i];
                continue;
            }
            if (strcmp(ap, "VALID") == 0)
                *lo[i] = *hi[i] = 0;
            int64_t span = in_[i] + *lo[i] + *hi[i] - ek;
            if (span < 0)
                return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): window larger than the input",
                                      p->model->path, nd->name, nd->op_type);
            *out[i] = (ceil_mode ? (span + s[i] - 1) / s[i] : span / s[i]) + 1;
            /* ceil_mode: a last window that starts inside the end padding is dropped (as onnxruntime) */
            if (ceil_mode && (*out[i] - 1) * s[i] >= in_[i] + *lo[i])
                (*out[i])--;
        }
    }
    int64_t dims[4] = {d.n, d.c, d.h_out, d.w_out};
    int id = out_value(p, node, 0, 4, dims, err);
    int s = plan_new_step(p, STEP_POOL, node);
    if (id < 0 || s < 0)
        return id < 0 ? id : hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].y = id;
    p->steps[s].u.pool = d;
    reads(p, s, in[0], err);
    writes(p, s, id);
    return 0;
}

static int lower_softmax(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    bool old = p->model->opset < 13;
    int64_t axis = plan_attr_i(nd, "axis", old ? 1 : -1);
    if (axis < 0)
        axis += x->ndim;
    if (axis < 0 || axis >= (x->ndim ? x->ndim : 1))
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Softmax): axis out of range", p->model->path,
                              nd->name);
    int64_t outer = 1, len = 1, inner = 1;
    for (int k = 0; k < axis; k++)
        outer *= x->dims[k];
    if (old) /* opset < 13: softmax over the flattened dims from axis on */
        for (int k = (int)axis; k < x->ndim; k++)
            len *= x->dims[k];
    else {
        len = x->dims[axis];
        for (int k = (int)axis + 1; k < x->ndim; k++)
            inner *= x->dims[k];
    }
    int id = out_value(p, node, 0, x->ndim, x->dims, err);
    int s = plan_new_step(p, STEP_SOFTMAX, node);
    if (id < 0 || s < 0)
        return id < 0 ? id : hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].y = id;
    p->steps[s].u.sm.outer = outer;
    p->steps[s].u.sm.len = len;
    p->steps[s].u.sm.inner = inner;
    reads(p, s, in[0], err);
    writes(p, s, id);
    return 0;
}

/* ---- copies: Transpose, Concat, Slice, Gather ---- */

/* A strided copy step of src (element offset a_off, strides sst) into y
 * (offset y_off, strides dst) over dims; dims merged where both sides allow. */
static int copy_step(hearth_plan *p, int node, int src, int64_t a_off, int y, int64_t y_off, int nd, const int64_t *dims,
                     const int64_t *sst, const int64_t *dst, hearth_err *err)
{
    hearth_strided_desc d = {.elem_bytes = 4};
    int m = merge_dims(nd, dims, sst, dst, d.dims, d.src_stride, d.dst_stride);
    if (m < 0)
        return unsupported(p, node, "a copy over more than 6 dims", err);
    if (m == 0) {
        d.dims[0] = 1;
        d.src_stride[0] = d.dst_stride[0] = 1;
        m = 1;
    }
    d.ndim = m;
    int s = plan_new_step(p, STEP_COPY, node);
    if (s < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = src;
    p->steps[s].y = y;
    p->steps[s].a_off = a_off;
    p->steps[s].y_off = y_off;
    p->steps[s].u.cp = d;
    int st = reads(p, s, src, err);
    writes(p, s, y);
    return st;
}

static int lower_transpose(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    int64_t perm[PLAN_MAX_DIMS], dims[PLAN_MAX_DIMS], xs[PLAN_MAX_DIMS], ss[PLAN_MAX_DIMS], ds[PLAN_MAX_DIMS];
    const int64_t *a;
    int64_t na = plan_attr_ints(nd, "perm", &a);
    bool seen[PLAN_MAX_DIMS] = {0};
    for (int k = 0; k < x->ndim; k++) {
        perm[k] = na >= 0 ? (k < na ? a[k] : -1) : x->ndim - 1 - k;
        if (na >= 0 && na != x->ndim)
            perm[k] = -1;
        if (perm[k] < 0 || perm[k] >= x->ndim || seen[perm[k]])
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Transpose): perm is not a permutation of %d dims",
                                  p->model->path, nd->name, x->ndim);
        seen[perm[k]] = true;
    }
    plan_strides(x->dims, x->ndim, xs);
    for (int k = 0; k < x->ndim; k++) {
        dims[k] = x->dims[perm[k]];
        ss[k] = xs[perm[k]];
    }
    plan_strides(dims, x->ndim, ds);
    int id = out_value(p, node, 0, x->ndim, dims, err);
    if (id < 0)
        return id;
    return copy_step(p, node, in[0], 0, id, 0, x->ndim, dims, ss, ds, err);
}

static int lower_concat(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    int64_t axis = plan_attr_i(nd, "axis", 0);
    if (axis < 0)
        axis += x->ndim;
    if (axis < 0 || axis >= x->ndim)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Concat): axis out of range", p->model->path, nd->name);
    int64_t dims[PLAN_MAX_DIMS];
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    dims[axis] = 0;
    for (int j = 0; j < nd->n_in; j++) {
        if (in[j] < 0)
            return unsupported(p, node, "an empty input", err);
        const plan_value *a = &p->v[in[j]];
        bool same = a->ndim == x->ndim;
        for (int k = 0; same && k < x->ndim; k++)
            same = k == axis || a->dims[k] == x->dims[k];
        if (!same)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Concat): '%s' and '%s' differ off axis %lld",
                                  p->model->path, nd->name, a->name, x->name, (long long)axis);
        dims[axis] += a->dims[axis];
    }
    int id = out_value(p, node, 0, x->ndim, dims, err);
    if (id < 0)
        return id;
    int64_t ys[PLAN_MAX_DIMS], off = 0;
    plan_strides(dims, x->ndim, ys);
    for (int j = 0; j < nd->n_in; j++) {
        const plan_value *a = &p->v[in[j]];
        int64_t as[PLAN_MAX_DIMS];
        plan_strides(a->dims, a->ndim, as);
        int st = copy_step(p, node, in[j], 0, id, off * ys[axis], a->ndim, a->dims, as, ys, err);
        if (st)
            return st;
        off += a->dims[axis];
    }
    return 0;
}

static int lower_slice(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    int64_t start[PLAN_MAX_DIMS], step[PLAN_MAX_DIMS], dims[PLAN_MAX_DIMS], xs[PLAN_MAX_DIMS], ss[PLAN_MAX_DIMS],
        ds[PLAN_MAX_DIMS];
    for (int k = 0; k < x->ndim; k++) {
        start[k] = 0;
        step[k] = 1;
        dims[k] = x->dims[k];
    }
    int64_t n;
    const int64_t *as = NULL, *ae = NULL, *aa = NULL;
    const plan_value *vs = NULL, *ve = NULL, *va = NULL, *vp = NULL;
    if (p->model->opset < 10) {
        n = plan_attr_ints(nd, "starts", &as);
        if (n < 0 || plan_attr_ints(nd, "ends", &ae) != n)
            return unsupported(p, node, "starts and ends must match", err);
        int64_t na = plan_attr_ints(nd, "axes", &aa);
        if (na >= 0 && na != n)
            return unsupported(p, node, "axes must match starts", err);
    } else {
        for (int j = 1; j < nd->n_in && j < 5; j++)
            if (in[j] >= 0 && !p->v[in[j]].is_const)
                return unsupported(p, node, "starts, ends, axes and steps must be constants", err);
        if (nd->n_in < 3 || in[1] < 0 || in[2] < 0)
            return unsupported(p, node, "wants starts and ends", err);
        vs = &p->v[in[1]];
        ve = &p->v[in[2]];
        va = nd->n_in > 3 && in[3] >= 0 ? &p->v[in[3]] : NULL;
        vp = nd->n_in > 4 && in[4] >= 0 ? &p->v[in[4]] : NULL;
        n = vs->n;
        if (ve->n != n || (va && va->n != n) || (vp && vp->n != n))
            return unsupported(p, node, "starts, ends, axes and steps must have one entry each", err);
    }
    bool done[PLAN_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t ax = aa ? aa[i] : va ? plan_ival(va, i) : i;
        if (ax < 0)
            ax += x->ndim;
        if (ax < 0 || ax >= x->ndim || done[ax])
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Slice): bad axis", p->model->path, nd->name);
        done[ax] = true;
        int64_t d = x->dims[ax], s = as ? as[i] : plan_ival(vs, i), e = ae ? ae[i] : plan_ival(ve, i);
        int64_t sp = vp ? plan_ival(vp, i) : 1;
        if (sp == 0)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Slice): step 0", p->model->path, nd->name);
        /* a step past the dim takes one element, as the dim itself does: clamped, the arithmetic below stays small */
        if (sp > d) sp = d > 0 ? d : 1;
        if (sp < -d) sp = d > 0 ? -d : -1;
        if (s < 0) s += d;
        if (e < 0 && e > INT64_MIN / 2) e += d;
        int64_t len;
        if (sp > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
            len = e > s ? (e - s + sp - 1) / sp : 0;
        } else {
            s = s < 0 ? -1 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            len = s > e ? (s - e + (-sp) - 1) / (-sp) : 0;
        }
        if (len == 0)
            return unsupported(p, node, "an empty slice", err);
        start[ax] = s;
        step[ax] = sp;
        dims[ax] = len;
    }
    plan_strides(x->dims, x->ndim, xs);
    int64_t off = 0;
    for (int k = 0; k < x->ndim; k++) {
        off += start[k] * xs[k];
        ss[k] = xs[k] * step[k];
    }
    plan_strides(dims, x->ndim, ds);
    int id = out_value(p, node, 0, x->ndim, dims, err);
    if (id < 0)
        return id;
    return copy_step(p, node, in[0], off, id, 0, x->ndim, dims, ss, ds, err);
}

static int lower_gather(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    const plan_value *ix = nd->n_in > 1 ? need_const(p, node, in[1], "indices must be constants", err) : NULL;
    if (!ix)
        return HEARTH_EUNSUPPORTED;
    int64_t axis = plan_attr_i(nd, "axis", 0);
    if (axis < 0)
        axis += x->ndim;
    if (axis < 0 || axis >= x->ndim || x->ndim + ix->ndim - 1 > PLAN_MAX_DIMS || ix->n > 64)
        return unsupported(p, node, "axis in range and at most 64 indices", err);
    int64_t dims[PLAN_MAX_DIMS], nd_out = 0;
    for (int k = 0; k < axis; k++) dims[nd_out++] = x->dims[k];
    for (int k = 0; k < ix->ndim; k++) dims[nd_out++] = ix->dims[k];
    for (int k = (int)axis + 1; k < x->ndim; k++) dims[nd_out++] = x->dims[k];
    int id = out_value(p, node, 0, (int)nd_out, dims, err);
    if (id < 0)
        return id;
    /* one copy per index: the slab x[.., g, ..] into y[.., j, ..] */
    int64_t xs[PLAN_MAX_DIMS], cd[PLAN_MAX_DIMS], cs[PLAN_MAX_DIMS], cy[PLAN_MAX_DIMS];
    plan_strides(x->dims, x->ndim, xs);
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++) outer *= x->dims[k];
    for (int k = (int)axis + 1; k < x->ndim; k++) inner *= x->dims[k];
    for (int64_t j = 0; j < ix->n; j++) {
        int64_t g = plan_ival(ix, j);
        if (g < 0) g += x->dims[axis];
        if (g < 0 || g >= x->dims[axis])
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Gather): index %lld out of range for %lld",
                                  p->model->path, nd->name, (long long)plan_ival(ix, j), (long long)x->dims[axis]);
        cd[0] = outer;
        cd[1] = inner;
        cs[0] = x->dims[axis] * inner;
        cs[1] = 1;
        cy[0] = ix->n * inner;
        cy[1] = 1;
        int st = copy_step(p, node, in[0], g * inner, id, j * inner, 2, cd, cs, cy, err);
        if (st)
            return st;
    }
    return 0;
}

/* Pad (constant mode): the output filled with the value (a binary MAX of
 * the constant with itself, broadcast: no fill op is needed), then the
 * input copied into its interior. */
static int lower_pad(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    if (strcmp(plan_attr_s(nd, "mode", "constant"), "constant") != 0)
        return unsupported(p, node, "only mode 'constant'", err);
    int64_t pads[2 * PLAN_MAX_DIMS];
    float value = 0;
    if (p->model->opset < 11) {
        const int64_t *a;
        if (plan_attr_ints(nd, "pads", &a) != 2 * x->ndim)
            return unsupported(p, node, "pads must give 2 x rank values", err);
        memcpy(pads, a, sizeof(int64_t) * 2 * (size_t)x->ndim);
        value = plan_attr_f(nd, "value", 0.0f);
    } else {
        if (nd->n_in > 3 && in[3] >= 0)
            return unsupported(p, node, "axes", err);
        const plan_value *pv = nd->n_in > 1 ? need_const(p, node, in[1], "pads must be a constant", err) : NULL;
        if (!pv)
            return HEARTH_EUNSUPPORTED;
        if (pv->n != 2 * x->ndim)
            return unsupported(p, node, "pads must give 2 x rank values", err);
        for (int k = 0; k < 2 * x->ndim; k++)
            pads[k] = plan_ival(pv, k);
        if (nd->n_in > 2 && in[2] >= 0) {
            const plan_value *cv = need_const(p, node, in[2], "constant_value must be a constant", err);
            if (!cv)
                return HEARTH_EUNSUPPORTED;
            value = cv->dtype == HEARTH_ONNX_FLOAT ? ((const float *)cv->data)[0] : (float)plan_ival(cv, 0);
        }
    }
    int64_t dims[PLAN_MAX_DIMS], ys[PLAN_MAX_DIMS], xs[PLAN_MAX_DIMS], off = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (pads[k] < 0 || pads[k + x->ndim] < 0)
            return unsupported(p, node, "negative pads (cropping)", err);
        if (pads[k] > PLAN_DIM_MAX || pads[k + x->ndim] > PLAN_DIM_MAX) /* the sum below stays in int64 */
            return hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: node '%s' (Pad): pads past 2^31", p->model->path,
                                  nd->name);
        dims[k] = x->dims[k] + pads[k] + pads[k + x->ndim];
    }
    int id = out_value(p, node, 0, x->ndim, dims, err); /* first: it bounds dims before the strides */
    if (id < 0)
        return id;
    plan_strides(dims, x->ndim, ys);
    plan_strides(x->dims, x->ndim, xs);
    for (int k = 0; k < x->ndim; k++)
        off += pads[k] * ys[k];
    int64_t one = 1;
    int c = plan_new_value(p, "", HEARTH_ONNX_FLOAT, 0, &one);
    float *cf = plan_alloc(p, sizeof(float));
    if (c < 0 || !cf)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    *cf = value;
    p->v[c].is_const = true;
    p->v[c].data = cf;
    int s = plan_new_step(p, STEP_BINARY, node);
    if (s < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = p->steps[s].b = c;
    p->steps[s].y = id;
    p->steps[s].u.bin = (hearth_binary_desc){.op = HEARTH_BIN_MAX, .ndim = 1, .dims = {p->v[id].n}};
    int st = reads(p, s, c, err);
    writes(p, s, id);
    if (st)
        return st;
    return copy_step(p, node, in[0], 0, id, off, x->ndim, x->dims, xs, ys, err);
}

/* ---- Resize / Upsample ---- */

static int lower_resize(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    if (x->ndim != 4)
        return unsupported(p, node, "only (N, C, H, W) inputs", err);
    bool upsample = strcmp(nd->op_type, "Upsample") == 0;
    int64_t opset = p->model->opset;
    const plan_value *scales = NULL, *sizes = NULL;
    float sc[4] = {1, 1, 1, 1};
    const hearth_onnx_attr *sa = hearth_onnx_attr_find(nd, "scales");
    if (upsample && sa && sa->type == HEARTH_ONNX_ATTR_FLOATS && sa->n == 4)
        for (int k = 0; k < 4; k++) sc[k] = sa->floats[k];
    else {
        int si = (upsample || opset < 11) ? 1 : 2;
        for (int j = 1; j < nd->n_in; j++)
            if (in[j] >= 0 && !p->v[in[j]].is_const)
                return unsupported(p, node, "roi, scales and sizes must be constants", err);
        if (nd->n_in > si && in[si] >= 0 && p->v[in[si]].n == 4)
            scales = &p->v[in[si]];
        if (!upsample && opset >= 11 && nd->n_in > 3 && in[3] >= 0 && p->v[in[3]].n == 4)
            sizes = &p->v[in[3]];
        if (!scales && !sizes)
            return unsupported(p, node, "wants 4 scales or 4 sizes", err);
        for (int k = 0; k < 4; k++)
            sc[k] = sizes ? (float)plan_ival(sizes, k) / (float)x->dims[k]
                          : scales->dtype == HEARTH_ONNX_FLOAT ? ((const float *)scales->data)[k] : (float)plan_ival(scales, k);
    }
    if (sc[0] != 1 || sc[1] != 1)
        return unsupported(p, node, "scales over N or C", err);
    for (int k = 2; k < 4; k++) /* finite and bounded before any conversion to an integer size */
        if (!(sc[k] > 0 && sc[k] <= 65536.0f) || (sizes && plan_ival(sizes, k) > PLAN_DIM_MAX))
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): scale %d out of (0, 65536]",
                                  p->model->path, nd->name, nd->op_type, k);
    hearth_resize_desc d = {0};
    d.n = x->dims[0];
    d.c = x->dims[1];
    d.h = x->dims[2];
    d.w = x->dims[3];
    d.h_out = sizes ? plan_ival(sizes, 2) : (int64_t)floorf((float)d.h * sc[2]);
    d.w_out = sizes ? plan_ival(sizes, 3) : (int64_t)floorf((float)d.w * sc[3]);
    d.scale_h = sc[2];
    d.scale_w = sc[3];
    if (d.h_out < 1 || d.w_out < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): empty output", p->model->path, nd->name,
                              nd->op_type);
    const char *mode = plan_attr_s(nd, "mode", "nearest");
    if (strcmp(mode, "nearest") == 0)
        d.mode = HEARTH_RESIZE_NEAREST;
    else if (strcmp(mode, "linear") == 0 || strcmp(mode, "bilinear") == 0)
        d.mode = HEARTH_RESIZE_LINEAR;
    else
        return unsupported(p, node, "mode must be nearest or linear", err);
    bool v11 = !upsample && opset >= 11;
    const char *ct = plan_attr_s(nd, "coordinate_transformation_mode", v11 ? "half_pixel" : "asymmetric");
    if (strcmp(ct, "half_pixel") == 0) d.coord = HEARTH_COORD_HALF_PIXEL;
    else if (strcmp(ct, "asymmetric") == 0) d.coord = HEARTH_COORD_ASYMMETRIC;
    else if (strcmp(ct, "pytorch_half_pixel") == 0) d.coord = HEARTH_COORD_PYTORCH_HALF_PIXEL;
    else if (strcmp(ct, "align_corners") == 0) d.coord = HEARTH_COORD_ALIGN_CORNERS;
    else
        return unsupported(p, node, "coordinate_transformation_mode", err);
    /* before opset 11 nearest picked floor(x_out / scale) */
    const char *nm = plan_attr_s(nd, "nearest_mode", v11 ? "round_prefer_floor" : "floor");
    if (strcmp(nm, "round_prefer_floor") == 0) d.round = HEARTH_ROUND_PREFER_FLOOR;
    else if (strcmp(nm, "round_prefer_ceil") == 0) d.round = HEARTH_ROUND_PREFER_CEIL;
    else if (strcmp(nm, "floor") == 0) d.round = HEARTH_ROUND_FLOOR;
    else if (strcmp(nm, "ceil") == 0) d.round = HEARTH_ROUND_CEIL;
    else
        return unsupported(p, node, "nearest_mode", err);
    int64_t dims[4] = {d.n, d.c, d.h_out, d.w_out};
    int id = out_value(p, node, 0, 4, dims, err);
    int s = plan_new_step(p, STEP_RESIZE, node);
    if (id < 0 || s < 0)
        return id < 0 ? id : hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].y = id;
    p->steps[s].u.rs = d;
    reads(p, s, in[0], err);
    writes(p, s, id);
    return 0;
}

/* ---- Gemm / MatMul with a constant right side ---- */

static int lower_matmul(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    bool gemm = strcmp(nd->op_type, "Gemm") == 0;
    const plan_value *a = &p->v[in[0]];
    const plan_value *b = nd->n_in > 1 ? need_const(p, node, in[1], "the right operand must be a constant", err) : NULL;
    if (!b)
        return HEARTH_EUNSUPPORTED;
    if (b->ndim != 2 || b->dtype != HEARTH_ONNX_FLOAT || a->ndim < 1)
        return unsupported(p, node, "the right operand must be a 2-D FLOAT constant", err);
    bool ta = gemm && plan_attr_i(nd, "transA", 0), tb = gemm && plan_attr_i(nd, "transB", 0);
    if (ta)
        return unsupported(p, node, "transA", err);
    if (gemm && a->ndim != 2)
        return unsupported(p, node, "Gemm wants a 2-D input", err);
    float alpha = gemm ? plan_attr_f(nd, "alpha", 1.0f) : 1.0f, beta = gemm ? plan_attr_f(nd, "beta", 1.0f) : 1.0f;
    int64_t k = a->dims[a->ndim - 1], m = a->n / (k ? k : 1);
    int64_t bk = tb ? b->dims[1] : b->dims[0], n = tb ? b->dims[0] : b->dims[1];
    if (bk != k)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (%s): inner dims %lld and %lld differ",
                              p->model->path, nd->name, nd->op_type, (long long)k, (long long)bk);
    float *wt = plan_alloc(p, (size_t)(n * k) * sizeof(float));
    if (!wt)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    const float *bw = b->data;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++)
            wt[i * k + j] = alpha * (tb ? bw[i * k + j] : bw[j * n + i]);
    int64_t dims[PLAN_MAX_DIMS];
    memcpy(dims, a->dims, sizeof(int64_t) * (size_t)a->ndim);
    dims[a->ndim - 1] = n;
    const char *final = nd->out[0];
    bool bias = gemm && nd->n_in > 2 && in[2] >= 0 && beta != 0;
    int id = plan_new_value(p, bias ? "" : final, HEARTH_ONNX_FLOAT, a->ndim, dims);
    int s = plan_new_step(p, STEP_MATMUL, node);
    if (id < 0 || s < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->steps[s].a = in[0];
    p->steps[s].y = id;
    p->steps[s].u.mm.wt = wt;
    p->steps[s].u.mm.m = m;
    p->steps[s].u.mm.n = n;
    p->steps[s].u.mm.k = k;
    reads(p, s, in[0], err);
    writes(p, s, id);
    if (!bias)
        return 0;
    /* Y = (A B) + beta C: the bias as a binary add over the product */
    const plan_value *c = need_const(p, node, in[2], "C must be a constant", err);
    if (!c)
        return HEARTH_EUNSUPPORTED;
    int cid = in[2];
    if (beta != 1.0f || c->dtype != HEARTH_ONNX_FLOAT) {
        float *cf = plan_alloc(p, (size_t)c->n * sizeof(float));
        if (!cf)
            return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
        for (int64_t i = 0; i < c->n; i++)
            cf[i] = beta * (c->dtype == HEARTH_ONNX_FLOAT ? ((const float *)c->data)[i] : (float)plan_ival(c, i));
        cid = plan_new_value(p, "", HEARTH_ONNX_FLOAT, c->ndim, c->dims);
        if (cid < 0)
            return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
        p->v[cid].is_const = true;
        p->v[cid].data = cf;
    }
    int pair[2] = {id, cid};
    /* the binary step names its output after the node; the product keeps "" */
    return binary_step(p, node, pair, HEARTH_BIN_ADD, err);
}

/* ---- views ---- */

static int lower_view(hearth_plan *p, int node, const int *in, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const plan_value *x = &p->v[in[0]];
    int64_t dims[PLAN_MAX_DIMS];
    int ndim = x->ndim, st = 0;
    memcpy(dims, x->dims, sizeof(int64_t) * (size_t)x->ndim);
    const char *op = nd->op_type;
    if (strcmp(op, "Reshape") == 0) {
        if (nd->n_in < 2 || in[1] < 0 || !p->v[in[1]].is_const)
            return unsupported(p, node, "the shape must be a constant", err);
        st = plan_reshape_dims(p, nd, x, &p->v[in[1]], dims, &ndim, err);
    } else if (strcmp(op, "Flatten") == 0) {
        int64_t axis = plan_attr_i(nd, "axis", 1);
        if (axis < 0)
            axis += x->ndim;
        if (axis < 0 || axis > x->ndim)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: node '%s' (Flatten): axis out of range", p->model->path,
                                  nd->name);
        dims[0] = 1;
        for (int k = 0; k < axis; k++)
            dims[0] *= x->dims[k];
        dims[1] = x->n / (dims[0] ? dims[0] : 1);
        ndim = 2;
    } else if (strcmp(op, "Squeeze") == 0 || strcmp(op, "Unsqueeze") == 0)
        st = plan_squeeze_dims(p, nd, in, nd->n_in, dims, &ndim, err);
    else if (strcmp(op, "Dropout") == 0 && nd->n_out > 1 && nd->out[1][0])
        return unsupported(p, node, "Dropout's mask output", err);
    if (st)
        return st;
    int id = plan_new_value(p, nd->out[0], x->dtype, ndim, dims);
    if (id < 0)
        return hearth_err_set(err, HEARTH_ENOMEM, "onnx: out of memory");
    p->v[id].root = x->root;
    return 0;
}

int plan_lower(hearth_plan *p, int node, const int *in, bool *absorbed, hearth_err *err)
{
    const hearth_onnx_node *nd = &p->model->nodes[node];
    const char *op = nd->op_type;
    if (nd->n_in < 1 || in[0] < 0)
        return unsupported(p, node, "no input", err);
    if (p->v[in[0]].dtype != HEARTH_ONNX_FLOAT && !p->v[in[0]].is_const)
        return unsupported(p, node, "runtime tensors must be FLOAT", err);
    if (strcmp(op, "Conv") == 0)
        return lower_conv(p, node, in, absorbed, err);
    if (strcmp(op, "BatchNormalization") == 0)
        return lower_bn(p, node, in, err);
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++)
        if (strcmp(op, unary_ops[i].op) == 0)
            return lower_unary(p, node, in, unary_ops[i].un, err);
    static const struct { const char *op; hearth_binary_op b; } bins[] = {
        {"Add", HEARTH_BIN_ADD}, {"Sub", HEARTH_BIN_SUB}, {"Mul", HEARTH_BIN_MUL}, {"Div", HEARTH_BIN_DIV},
        {"Max", HEARTH_BIN_MAX}, {"Min", HEARTH_BIN_MIN}, {"Pow", HEARTH_BIN_POW},
    };
    for (size_t i = 0; i < sizeof bins / sizeof bins[0]; i++)
        if (strcmp(op, bins[i].op) == 0)
            return lower_binary(p, node, in, bins[i].b, err);
    if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0 || strcmp(op, "GlobalAveragePool") == 0 ||
        strcmp(op, "GlobalMaxPool") == 0)
        return lower_pool(p, node, in, err);
    if (strcmp(op, "Softmax") == 0)
        return lower_softmax(p, node, in, err);
    if (strcmp(op, "Transpose") == 0)
        return lower_transpose(p, node, in, err);
    if (strcmp(op, "Concat") == 0)
        return lower_concat(p, node, in, err);
    if (strcmp(op, "Slice") == 0)
        return lower_slice(p, node, in, err);
    if (strcmp(op, "Gather") == 0)
        return lower_gather(p, node, in, err);
    if (strcmp(op, "Pad") == 0)
        return lower_pad(p, node, in, err);
    if (strcmp(op, "Resize") == 0 || strcmp(op, "Upsample") == 0)
        return lower_resize(p, node, in, err);
    if (strcmp(op, "Gemm") == 0 || strcmp(op, "MatMul") == 0)
        return lower_matmul(p, node, in, err);
    if (strcmp(op, "Reshape") == 0 || strcmp(op, "Flatten") == 0 || strcmp(op, "Squeeze") == 0 ||
        strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Identity") == 0 || strcmp(op, "Dropout") == 0)
        return lower_view(p, node, in, err);
    return unsupported(p, node, NULL, err);
}

/* onnx.c: an ONNX model file read into onnx.h's plain C: the model's
 * version and opset checked, then its graph's nodes (with attributes),
 * initializers, inputs and outputs.
 *
 * How: the file is mapped (base/file.h) and handed whole to libprotobuf-c
 * (onnx__model_proto__unpack, code generated from onnx.proto at build time),
 * which copies every string and byte field into the unpacked message; the
 * mapping is closed straight after. The plain-C arrays are built over that
 * message: names, op types and tensor data point into it (it is kept until
 * hearth_onnx_close), and the little the loader makes itself (the arrays,
 * "#<index>" node names, NUL-terminated attribute strings, packed narrow
 * tensors) is chained in loader-owned blocks freed together. When protobuf-c
 * refuses a file, onnx_wire.c walks the bytes to say at which byte and in
 * which field it is malformed.
 *
 * Graph inputs that are also initializers are left out of inputs: files of
 * IR version < 4 (mnist-8) list every initializer among the inputs, and a
 * client feeds only the rest. Initializer lookups go through a name-sorted
 * index (duplicates are refused there).
 *
 * Rejected: protobuf-c's zero-copy-free alternative of a hand-written wire
 * decoder (the issue asks for a real library; a decoder of our own is one
 * more parser to fuzz) and a custom protobuf-c allocator over the mapping
 * (protobuf-c copies bytes fields whatever the allocator, so keeping the
 * mapping would only double the memory). */
#include "onnx_int.h"

#include "base/file.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *onnx_alloc(onnx_impl *im, size_t n)
{
    if (n > SIZE_MAX - sizeof(onnx_block))
        return NULL;
    onnx_block *b = calloc(1, sizeof *b + n);
    if (!b)
        return NULL;
    b->next = im->blocks;
    im->blocks = b;
    return b->data;
}

static const char *str_or_empty(const char *s) { return s ? s : ""; }

/* The state of one load: the model being built and where messages go. */
typedef struct load {
    hearth_onnx *m;
    onnx_impl *im;
    const char *file;
    hearth_err *err;
} load;

static int oom(load *L, const char *what)
{
    return hearth_err_set(L->err, HEARTH_ENOMEM, "onnx: %s: out of memory for %s", L->file, what);
}

/* n items of size sz, owned by the model. */
static void *alloc_n(load *L, size_t n, size_t sz)
{
    if (n && sz > SIZE_MAX / n)
        return NULL;
    return onnx_alloc(L->im, n * sz > 0 ? n * sz : 1);
}

/* A NUL-terminated copy of bytes b (refused when a NUL is inside). */
static int copy_bytes_str(load *L, ProtobufCBinaryData b, const char *node, const char *attr, const char **out)
{
    if (b.len && memchr(b.data, 0, b.len))
        return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: node '%s' attribute '%s': a string with a NUL byte inside",
                              L->file, node, attr);
    char *s = alloc_n(L, b.len + 1, 1);
    if (!s)
        return oom(L, "an attribute string");
    if (b.len)
        memcpy(s, b.data, b.len);
    *out = s;
    return 0;
}

/* ONNX files of IR version 1 or 2 may leave an attribute's type out: it is
 * then the one field that is set. */
static int attr_type_guess(const Onnx__AttributeProto *a)
{
    if (a->has_type && a->type)
        return a->type;
    if (a->t)
        return HEARTH_ONNX_ATTR_TENSOR;
    if (a->n_floats)
        return HEARTH_ONNX_ATTR_FLOATS;
    if (a->n_ints)
        return HEARTH_ONNX_ATTR_INTS;
    if (a->n_strings)
        return HEARTH_ONNX_ATTR_STRINGS;
    if (a->has_s)
        return HEARTH_ONNX_ATTR_STRING;
    if (a->has_f)
        return HEARTH_ONNX_ATTR_FLOAT;
    if (a->has_i)
        return HEARTH_ONNX_ATTR_INT;
    return 0;
}

static int read_attr(load *L, const Onnx__AttributeProto *a, const char *node, int index, hearth_onnx_attr *out)
{
    if (!a->name || !a->name[0])
        return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: node '%s': attribute #%d has no name", L->file, node, index);
    out->name = a->name;
    out->type = attr_type_guess(a);
    out->f = a->f;
    out->i = a->i;
    switch (out->type) {
    case HEARTH_ONNX_ATTR_STRING:
        return copy_bytes_str(L, a->s, node, a->name, &out->s);
    case HEARTH_ONNX_ATTR_FLOATS:
        out->floats = a->floats;
        out->n = (int64_t)a->n_floats;
        return 0;
    case HEARTH_ONNX_ATTR_INTS:
        out->ints = a->ints;
        out->n = (int64_t)a->n_ints;
        return 0;
    case HEARTH_ONNX_ATTR_STRINGS: {
        const char **v = alloc_n(L, a->n_strings, sizeof *v);
        if (!v)
            return oom(L, "attribute strings");
        for (size_t k = 0; k < a->n_strings; k++) {
            int rc = copy_bytes_str(L, a->strings[k], node, a->name, &v[k]);
            if (rc)
                return rc;
        }
        out->strings = v;
        out->n = (int64_t)a->n_strings;
        return 0;
    }
    case HEARTH_ONNX_ATTR_TENSOR: {
        if (!a->t)
            return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: node '%s' attribute '%s': type TENSOR without a tensor",
                                  L->file, node, a->name);
        hearth_onnx_tensor *t = alloc_n(L, 1, sizeof *t);
        if (!t)
            return oom(L, "an attribute tensor");
        char what[256];
        snprintf(what, sizeof what, "%s.%s", node, a->name);
        int rc = onnx_tensor_read(L->im, a->t, what, L->file, t, L->err);
        if (rc)
            return rc;
        out->t = t;
        return 0;
    }
    default: /* FLOAT, INT (f, i above) and the kinds hearth keeps by type only */
        return 0;
    }
}

static int read_node(load *L, const Onnx__NodeProto *p, int index, hearth_onnx_node *out)
{
    if (p->name && p->name[0]) {
        out->name = p->name;
    } else {
        char *s = alloc_n(L, 16, 1);
        if (!s)
            return oom(L, "a node name");
        snprintf(s, 16, "#%d", index);
        out->name = s;
    }
    if (!p->op_type || !p->op_type[0])
        return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: node '%s' has no op_type", L->file, out->name);
    out->op_type = p->op_type;
    out->domain = p->domain && strcmp(p->domain, "ai.onnx") != 0 ? p->domain : "";
    if (p->n_input > ONNX_MAX_NODE_IO || p->n_output > ONNX_MAX_NODE_IO)
        return hearth_err_set(L->err, HEARTH_ELIMIT, "onnx: %s: node '%s': %zu inputs and %zu outputs (at most %d each)",
                              L->file, out->name, p->n_input, p->n_output, ONNX_MAX_NODE_IO);
    if (p->n_attribute > ONNX_MAX_ATTRS)
        return hearth_err_set(L->err, HEARTH_ELIMIT, "onnx: %s: node '%s': %zu attributes > %d", L->file, out->name,
                              p->n_attribute, ONNX_MAX_ATTRS);
    out->n_in = (int)p->n_input;
    out->n_out = (int)p->n_output;
    out->in = (const char *const *)p->input;
    out->out = (const char *const *)p->output;
    out->n_attr = (int)p->n_attribute;
    hearth_onnx_attr *attr = alloc_n(L, p->n_attribute, sizeof *attr);
    if (!attr)
        return oom(L, "node attributes");
    for (size_t k = 0; k < p->n_attribute; k++) {
        int rc = read_attr(L, p->attribute[k], out->name, (int)k, &attr[k]);
        if (rc)
            return rc;
    }
    out->attr = attr;
    return 0;
}

static int read_value(load *L, const Onnx__ValueInfoProto *v, const char *kind, int index, hearth_onnx_value *out)
{
    if (!v->name || !v->name[0])
        return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: graph %s #%d has no name", L->file, kind, index);
    out->name = v->name;
    out->ndim = -1;
    const Onnx__TypeProto *tp = v->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return 0; /* a sequence, a map, or no type: the planner refuses what it cannot run */
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    out->dtype = tt->has_elem_type ? tt->elem_type : 0;
    if (!tt->shape)
        return 0;
    if (tt->shape->n_dim > HEARTH_ONNX_MAX_DIMS)
        return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: graph %s '%s': %zu dims > %d", L->file, kind, v->name,
                              tt->shape->n_dim, HEARTH_ONNX_MAX_DIMS);
    out->ndim = (int)tt->shape->n_dim;
    for (int d = 0; d < out->ndim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        out->dims[d] = -1;
        if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && dim->dim_value >= 0)
            out->dims[d] = dim->dim_value;
        else if (dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param &&
                 dim->dim_param[0])
            out->dims[d] = -1, out->dim_param[d] = dim->dim_param;
    }
    return 0;
}

static int by_name_cmp(const void *a, const void *b)
{
    const hearth_onnx_tensor *x = *(const hearth_onnx_tensor *const *)a;
    const hearth_onnx_tensor *y = *(const hearth_onnx_tensor *const *)b;
    return strcmp(x->name, y->name);
}

static const hearth_onnx_tensor *find_sorted(const onnx_impl *im, int n, const char *name)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(im->by_name[mid]->name, name);
        if (!c)
            return im->by_name[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int read_opset(load *L, const Onnx__ModelProto *pb)
{
    int found = -1;
    for (size_t k = 0; k < pb->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *o = pb->opset_import[k];
        const char *dom = str_or_empty(o->domain);
        if (dom[0] && strcmp(dom, "ai.onnx") != 0)
            continue;
        if (found >= 0)
            return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: opset_import lists the default domain (ai.onnx) twice",
                                  L->file);
        found = (int)k;
        if (!o->has_version)
            return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: opset_import of the default domain (ai.onnx) has no version",
                                  L->file);
        L->m->opset = o->version;
    }
    if (found < 0)
        return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: no opset_import for the default domain (ai.onnx)", L->file);
    if (L->m->opset < HEARTH_ONNX_OPSET_MIN || L->m->opset > HEARTH_ONNX_OPSET_MAX)
        return hearth_err_set(L->err, HEARTH_EUNSUPPORTED, "onnx: %s: opset %lld of ai.onnx is outside what hearth reads (%d..%d)",
                              L->file, (long long)L->m->opset, HEARTH_ONNX_OPSET_MIN, HEARTH_ONNX_OPSET_MAX);
    return 0;
}

static int read_graph(load *L, const Onnx__GraphProto *g)
{
    hearth_onnx *m = L->m;
    onnx_impl *im = L->im;
    if (g->n_node > ONNX_MAX_NODES || g->n_initializer > ONNX_MAX_INITS || g->n_input > ONNX_MAX_VALUES ||
        g->n_output > ONNX_MAX_VALUES)
        return hearth_err_set(L->err, HEARTH_ELIMIT,
                              "onnx: %s: graph of %zu nodes, %zu initializers, %zu inputs, %zu outputs (limits %d, %d, %d, %d)",
                              L->file, g->n_node, g->n_initializer, g->n_input, g->n_output, ONNX_MAX_NODES,
                              ONNX_MAX_INITS, ONNX_MAX_VALUES, ONNX_MAX_VALUES);

    hearth_onnx_tensor *inits = alloc_n(L, g->n_initializer, sizeof *inits);
    im->by_name = alloc_n(L, g->n_initializer, sizeof *im->by_name);
    if (!inits || !im->by_name)
        return oom(L, "initializers");
    for (size_t k = 0; k < g->n_initializer; k++) {
        char what[32];
        snprintf(what, sizeof what, "initializer #%zu", k);
        if (!g->initializer[k]->name || !g->initializer[k]->name[0])
            return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: %s has no name", L->file, what);
        int rc = onnx_tensor_read(im, g->initializer[k], what, L->file, &inits[k], L->err);
        if (rc)
            return rc;
        im->by_name[k] = &inits[k];
    }
    m->inits = inits;
    m->n_inits = (int)g->n_initializer;
    qsort(im->by_name, g->n_initializer, sizeof *im->by_name, by_name_cmp);
    for (int k = 1; k < m->n_inits; k++)
        if (!strcmp(im->by_name[k - 1]->name, im->by_name[k]->name))
            return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: initializer '%s' appears twice", L->file,
                                  im->by_name[k]->name);

    hearth_onnx_node *nodes = alloc_n(L, g->n_node, sizeof *nodes);
    if (!nodes)
        return oom(L, "nodes");
    for (size_t k = 0; k < g->n_node; k++) {
        int rc = read_node(L, g->node[k], (int)k, &nodes[k]);
        if (rc)
            return rc;
    }
    m->nodes = nodes;
    m->n_nodes = (int)g->n_node;

    hearth_onnx_value *ins = alloc_n(L, g->n_input, sizeof *ins);
    hearth_onnx_value *outs = alloc_n(L, g->n_output, sizeof *outs);
    if (!ins || !outs)
        return oom(L, "graph inputs and outputs");
    int n_in = 0;
    for (size_t k = 0; k < g->n_input; k++) {
        const Onnx__ValueInfoProto *v = g->input[k];
        if (v->name && find_sorted(im, m->n_inits, v->name))
            continue; /* an initializer listed as an input (IR < 4) */
        int rc = read_value(L, v, "input", (int)k, &ins[n_in]);
        if (rc)
            return rc;
        n_in++;
    }
    for (size_t k = 0; k < g->n_output; k++) {
        int rc = read_value(L, g->output[k], "output", (int)k, &outs[k]);
        if (rc)
            return rc;
    }
    m->inputs = ins;
    m->n_inputs = n_in;
    m->outputs = outs;
    m->n_outputs = (int)g->n_output;
    return 0;
}

/* protobuf-c refused data: say where the bytes are malformed. */
static int malformed(load *L, const uint8_t *data, size_t len)
{
    uint64_t off;
    char why[320];
    if (onnx_wire_check(data, len, &onnx__model_proto__descriptor, &off, why, sizeof why) < 0)
        return hearth_err_set(L->err, HEARTH_EINVAL, "onnx: %s: malformed protobuf at byte %llu (%s)", L->file,
                              (unsigned long long)off, why);
    return hearth_err_set(L->err, HEARTH_EINVAL,
                          "onnx: %s: libprotobuf-c refused the file as an ONNX ModelProto (%zu bytes; the wire format "
                          "itself is whole: a string that is not UTF-8, or out of memory)",
                          L->file, len);
}

hearth_onnx *hearth_onnx_parse(const void *data, size_t len, const char *name, hearth_err *err)
{
    if (!name)
        name = "(memory)";
    if (!len) {
        hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: empty file", name);
        return NULL;
    }
    if (len > ONNX_MAX_FILE) {
        hearth_err_set(err, HEARTH_ELIMIT, "onnx: %s: %zu bytes > 2 GiB, protobuf's limit on one message", name, len);
        return NULL;
    }
    size_t name_len = strlen(name);
    hearth_onnx *m = calloc(1, sizeof *m);
    onnx_impl *im = calloc(1, sizeof *im);
    char *path = malloc(name_len + 1);
    if (!m || !im || !path) {
        free(m);
        free(im);
        free(path);
        hearth_err_set(err, HEARTH_ENOMEM, "onnx: %s: out of memory", name);
        return NULL;
    }
    memcpy(path, name, name_len + 1);
    m->impl = im;
    m->path = path;
    load L = {m, im, path, err};

    im->pb = onnx__model_proto__unpack(NULL, len, data);
    if (!im->pb) {
        malformed(&L, data, len);
        goto fail;
    }
    const Onnx__ModelProto *pb = im->pb;
    if (!pb->has_ir_version) {
        hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: no ir_version (is this an ONNX model?)", path);
        goto fail;
    }
    m->ir_version = pb->ir_version;
    m->producer = str_or_empty(pb->producer_name);
    if (read_opset(&L, pb))
        goto fail;
    if (!pb->graph) {
        hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: no graph", path);
        goto fail;
    }
    if (read_graph(&L, pb->graph))
        goto fail;
    return m;
fail:
    hearth_onnx_close(m);
    return NULL;
}

hearth_onnx *hearth_onnx_open(const char *path, hearth_err *err)
{
    hearth_mmap map = {0};
    int rc = hearth_mmap_open(&map, path, err);
    if (rc) {
        hearth_err_prefix(err, "onnx");
        return NULL;
    }
    hearth_onnx *m = hearth_onnx_parse(map.data, map.size, path, err);
    hearth_mmap_close(&map); /* protobuf-c copied what the model keeps */
    return m;
}

void hearth_onnx_close(hearth_onnx *m)
{
    if (!m)
        return;
    onnx_impl *im = m->impl;
    if (im) {
        if (im->pb)
            onnx__model_proto__free_unpacked(im->pb, NULL);
        for (onnx_block *b = im->blocks, *next; b; b = next) {
            next = b->next;
            free(b);
        }
        free(im);
    }
    free((char *)m->path);
    free(m);
}

const hearth_onnx_attr *hearth_onnx_attr_find(const hearth_onnx_node *node, const char *name)
{
    if (!node || !name)
        return NULL;
    for (int k = 0; k < node->n_attr; k++)
        if (!strcmp(node->attr[k].name, name))
            return &node->attr[k];
    return NULL;
}

const hearth_onnx_tensor *hearth_onnx_init_find(const hearth_onnx *m, const char *name)
{
    if (!m || !name || !m->impl)
        return NULL;
    return find_sorted(m->impl, m->n_inits, name);
}

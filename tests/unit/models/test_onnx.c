/* The ONNX loader (models/onnx.c) over the real vision models in
 * ../shared/vision/, then over handcrafted corrupt files, one per failure.
 *
 * The real models' facts (node and op counts, inputs, outputs, initializer
 * values) were read independently with the onnx Python package. The corrupt
 * files are built here with the generated onnx__*__pack functions from a
 * small valid model (or written byte by byte where protobuf-c could not
 * write them), placed so their last byte touches a PROT_NONE guard page, and
 * each must fail with a message naming the file and the field, tensor or
 * offset at fault. Last, the planner over files the loader accepts but no
 * graph can run (each found by tests/fuzz/fuzz_onnx.c as a crash first). */
#include "harness.h"
#include "onnx_shared.h"

#include "models/onnx.h"
#include "models/onnx.pb-c.h"
#include "models/onnx_plan.h"

#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- parsing against a guard page ---- */

/* Parses len bytes placed to end exactly at a PROT_NONE page. */
static hearth_onnx *parse_guarded(const void *data, size_t len, const char *name, hearth_err *err)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = (len + page - 1) / page * page;
    uint8_t *base = mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    mprotect(base + span, page, PROT_NONE);
    uint8_t *p = base + span - len;
    if (len)
        memcpy(p, data, len);
    hearth_onnx *m = hearth_onnx_parse(p, len, name, err);
    munmap(base, span + page);
    return m;
}

/* The case fails (printing the message) unless parsing fails with code and a
 * message holding every one of the NULL-ended needles. */
static void expect_fail(const void *data, size_t len, int code, ...)
{
    hearth_err err = {0};
    hearth_onnx *m = parse_guarded(data, len, "bad.onnx", &err);
    CHECK_MSG(m == NULL, "parsed a file that should fail");
    hearth_onnx_close(m);
    printf("# %s\n", err.msg);
    CHECK_MSG(err.code == code, "code %d, want %d (%s)", err.code, code, err.msg);
    CHECK_MSG(strstr(err.msg, "onnx: bad.onnx: ") == err.msg, "message does not name the file: %s", err.msg);
    va_list ap;
    va_start(ap, code);
    for (const char *s; (s = va_arg(ap, const char *));)
        CHECK_MSG(strstr(err.msg, s) != NULL, "message lacks '%s': %s", s, err.msg);
    va_end(ap);
}

/* ---- a small valid model, built with the generated code ---- */

typedef struct built {
    Onnx__ModelProto model;
    Onnx__OperatorSetIdProto opset, *opsets[1];
    Onnx__GraphProto graph;
    Onnx__NodeProto node, *nodes[1];
    char *node_in[2], *node_out[1];
    Onnx__AttributeProto attr, *attrs[1];
    Onnx__TensorProto init, *inits[1];
    float w[4];
    int64_t wdims[2];
    Onnx__ValueInfoProto in, out, *ins[2], *outs[1];
    Onnx__ValueInfoProto in_w; /* "w" listed as an input too, as IR < 4 does */
    Onnx__TypeProto in_type, out_type;
    Onnx__TypeProto__Tensor in_tt, out_tt;
    Onnx__TensorShapeProto in_shape, out_shape;
    Onnx__TensorShapeProto__Dimension in_d[2], out_d[2], *in_dp[2], *out_dp[2];
    uint8_t *bytes;
    size_t len;
} built;

/* y = Add(x, w): x [1, "n"] FLOAT input, w [2, 2] FLOAT initializer
 * (raw_data), node attribute axis = 1, opset 13, IR 7. */
static void build(built *b)
{
    memset(b, 0, sizeof *b);
    onnx__model_proto__init(&b->model);
    b->model.has_ir_version = 1;
    b->model.ir_version = 7;
    b->model.producer_name = "test";
    onnx__operator_set_id_proto__init(&b->opset);
    b->opset.domain = "";
    b->opset.has_version = 1;
    b->opset.version = 13;
    b->opsets[0] = &b->opset;
    b->model.n_opset_import = 1;
    b->model.opset_import = b->opsets;

    onnx__graph_proto__init(&b->graph);
    b->model.graph = &b->graph;
    onnx__node_proto__init(&b->node);
    b->node.name = "add0";
    b->node.op_type = "Add";
    b->node_in[0] = "x";
    b->node_in[1] = "w";
    b->node_out[0] = "y";
    b->node.n_input = 2;
    b->node.input = b->node_in;
    b->node.n_output = 1;
    b->node.output = b->node_out;
    onnx__attribute_proto__init(&b->attr);
    b->attr.name = "axis";
    b->attr.has_type = 1;
    b->attr.type = 2;
    b->attr.has_i = 1;
    b->attr.i = 1;
    b->attrs[0] = &b->attr;
    b->node.n_attribute = 1;
    b->node.attribute = b->attrs;
    b->nodes[0] = &b->node;
    b->graph.n_node = 1;
    b->graph.node = b->nodes;

    onnx__tensor_proto__init(&b->init);
    b->init.name = "w";
    b->init.has_data_type = 1;
    b->init.data_type = 1;
    b->wdims[0] = 2;
    b->wdims[1] = 2;
    b->init.n_dims = 2;
    b->init.dims = b->wdims;
    for (int i = 0; i < 4; i++)
        b->w[i] = (float)i + 0.5f;
    b->init.has_raw_data = 1;
    b->init.raw_data.len = sizeof b->w;
    b->init.raw_data.data = (uint8_t *)b->w;
    b->inits[0] = &b->init;
    b->graph.n_initializer = 1;
    b->graph.initializer = b->inits;

    onnx__value_info_proto__init(&b->in);
    onnx__value_info_proto__init(&b->out);
    onnx__type_proto__init(&b->in_type);
    onnx__type_proto__init(&b->out_type);
    onnx__type_proto__tensor__init(&b->in_tt);
    onnx__type_proto__tensor__init(&b->out_tt);
    onnx__tensor_shape_proto__init(&b->in_shape);
    onnx__tensor_shape_proto__init(&b->out_shape);
    for (int d = 0; d < 2; d++) {
        onnx__tensor_shape_proto__dimension__init(&b->in_d[d]);
        onnx__tensor_shape_proto__dimension__init(&b->out_d[d]);
        b->in_dp[d] = &b->in_d[d];
        b->out_dp[d] = &b->out_d[d];
    }
    b->in_d[0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    b->in_d[0].dim_value = 1;
    b->in_d[1].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    b->in_d[1].dim_param = "n";
    b->out_d[0].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
    b->out_d[0].dim_value = 2;
    /* out_d[1]: neither value nor param */
    b->in_shape.n_dim = 2;
    b->in_shape.dim = b->in_dp;
    b->out_shape.n_dim = 2;
    b->out_shape.dim = b->out_dp;
    b->in_tt.has_elem_type = 1;
    b->in_tt.elem_type = 1;
    b->in_tt.shape = &b->in_shape;
    b->out_tt.has_elem_type = 1;
    b->out_tt.elem_type = 1;
    b->out_tt.shape = &b->out_shape;
    b->in_type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->in_type.tensor_type = &b->in_tt;
    b->out_type.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    b->out_type.tensor_type = &b->out_tt;
    b->in.name = "x";
    b->in.type = &b->in_type;
    b->out.name = "y";
    b->out.type = &b->out_type;
    onnx__value_info_proto__init(&b->in_w);
    b->in_w.name = "w";
    b->ins[0] = &b->in;
    b->ins[1] = &b->in_w;
    b->outs[0] = &b->out;
    b->graph.n_input = 2;
    b->graph.input = b->ins;
    b->graph.n_output = 1;
    b->graph.output = b->outs;
}

/* Packs b->model into b->bytes (malloc'd). */
static void pack(built *b)
{
    b->len = onnx__model_proto__get_packed_size(&b->model);
    b->bytes = malloc(b->len ? b->len : 1);
    onnx__model_proto__pack(&b->model, b->bytes);
}

static void packed_fails(built *b, int code, const char *needle1, const char *needle2)
{
    pack(b);
    expect_fail(b->bytes, b->len, code, needle1, needle2, (const char *)NULL);
    free(b->bytes);
}

/* ---- the real models ---- */

static int count_op(const hearth_onnx *m, const char *op)
{
    int n = 0;
    for (int k = 0; k < m->n_nodes; k++)
        n += !strcmp(m->nodes[k].op_type, op);
    return n;
}

static void check_value(const hearth_onnx_value *v, const char *name, int ndim, const int64_t *dims)
{
    CHECK_EQ_STR(v->name, name);
    CHECK_EQ_INT(v->dtype, HEARTH_ONNX_FLOAT);
    CHECK_EQ_INT(v->ndim, ndim);
    for (int d = 0; d < ndim && d < v->ndim; d++)
        CHECK_EQ_INT(v->dims[d], dims[d]);
}

static void test_mnist(void)
{
    hearth_onnx *m = onnx_open_shared("vision/mnist-8/mnist-8.onnx");
    if (!m)
        return;
    CHECK_EQ_INT(m->ir_version, 3);
    CHECK_EQ_INT(m->opset, 8);
    CHECK_EQ_STR(m->producer, "CNTK");
    CHECK_EQ_INT(m->n_nodes, 12);
    CHECK_EQ_INT(m->n_inits, 8);
    CHECK_EQ_INT(count_op(m, "Conv"), 2);
    CHECK_EQ_INT(count_op(m, "Add"), 3);
    CHECK_EQ_INT(count_op(m, "MaxPool"), 2);
    CHECK_EQ_INT(count_op(m, "Reshape"), 2);
    /* 9 graph inputs in the file, 8 of them initializers (IR 3) */
    CHECK_EQ_INT(m->n_inputs, 1);
    check_value(&m->inputs[0], "Input3", 4, (const int64_t[]){1, 1, 28, 28});
    CHECK_EQ_INT(m->n_outputs, 1);
    check_value(&m->outputs[0], "Plus214_Output_0", 2, (const int64_t[]){1, 10});
    CHECK_EQ_STR(m->nodes[0].name, "Times212_reshape1");
    CHECK_EQ_STR(m->nodes[0].domain, "");
    /* float_data, not raw_data */
    const hearth_onnx_tensor *t = hearth_onnx_init_find(m, "Parameter193");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->dtype, HEARTH_ONNX_FLOAT);
        CHECK_EQ_INT(t->ndim, 4);
        CHECK_EQ_INT(t->dims[0], 16);
        CHECK_EQ_INT(t->dims[3], 10);
        CHECK_EQ_INT(t->n, 16 * 4 * 4 * 10);
        CHECK_EQ_INT(t->bytes, 16 * 4 * 4 * 10 * 4);
        CHECK((uintptr_t)t->data % 4 == 0);
        CHECK_NEAR(((const float *)t->data)[0], 0.09163288027048111, 1e-7);
        CHECK_NEAR(((const float *)t->data)[t->n - 1], 0.122023805975914, 1e-7);
    }
    t = hearth_onnx_init_find(m, "Parameter193_reshape1_shape");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->dtype, HEARTH_ONNX_INT64);
        CHECK_EQ_INT(t->n, 2);
        CHECK((uintptr_t)t->data % 8 == 0);
        CHECK_EQ_INT(((const int64_t *)t->data)[0], 256);
        CHECK_EQ_INT(((const int64_t *)t->data)[1], 10);
    }
    CHECK(hearth_onnx_init_find(m, "Input3") == NULL);
    const hearth_onnx_node *conv = NULL;
    for (int k = 0; k < m->n_nodes && !conv; k++)
        if (!strcmp(m->nodes[k].op_type, "Conv"))
            conv = &m->nodes[k];
    CHECK(conv != NULL);
    if (conv) {
        CHECK_EQ_STR(conv->name, "Convolution28");
        const hearth_onnx_attr *a = hearth_onnx_attr_find(conv, "kernel_shape");
        CHECK(a && a->type == HEARTH_ONNX_ATTR_INTS && a->n == 2 && a->ints[0] == 5 && a->ints[1] == 5);
        a = hearth_onnx_attr_find(conv, "auto_pad");
        CHECK(a && a->type == HEARTH_ONNX_ATTR_STRING);
        if (a)
            CHECK_EQ_STR(a->s, "SAME_UPPER");
        a = hearth_onnx_attr_find(conv, "group");
        CHECK(a && a->type == HEARTH_ONNX_ATTR_INT && a->i == 1);
        CHECK(hearth_onnx_attr_find(conv, "nope") == NULL);
    }
    hearth_onnx_close(m);
}

static void check_ultraface_io(const hearth_onnx *m)
{
    CHECK_EQ_INT(m->n_inputs, 1);
    check_value(&m->inputs[0], "input", 4, (const int64_t[]){1, 3, 240, 320});
    CHECK_EQ_INT(m->n_outputs, 2);
    check_value(&m->outputs[0], "scores", 3, (const int64_t[]){1, 4420, 2});
    check_value(&m->outputs[1], "boxes", 3, (const int64_t[]){1, 4420, 4});
}

static void test_rfb320(void)
{
    hearth_onnx *m = onnx_open_shared("vision/ultraface-rfb-320/version-RFB-320.onnx");
    if (!m)
        return;
    CHECK_EQ_INT(m->ir_version, 4);
    CHECK_EQ_INT(m->opset, 9);
    CHECK_EQ_INT(m->n_nodes, 242);
    CHECK_EQ_INT(m->n_inits, 244);
    CHECK_EQ_INT(count_op(m, "Conv"), 52);
    CHECK_EQ_INT(count_op(m, "BatchNormalization"), 35);
    CHECK_EQ_INT(count_op(m, "Constant"), 31);
    check_ultraface_io(m);
    /* the exporter names no node */
    CHECK_EQ_STR(m->nodes[0].name, "#0");
    CHECK_EQ_STR(m->nodes[241].name, "#241");
    /* node 74 is the first Constant: an INT64 scalar 0, in raw_data */
    const hearth_onnx_node *c = &m->nodes[74];
    CHECK_EQ_STR(c->op_type, "Constant");
    const hearth_onnx_attr *a = hearth_onnx_attr_find(c, "value");
    CHECK(a && a->type == HEARTH_ONNX_ATTR_TENSOR && a->t);
    if (a && a->t) {
        CHECK_EQ_INT(a->t->dtype, HEARTH_ONNX_INT64);
        CHECK_EQ_INT(a->t->ndim, 0);
        CHECK_EQ_INT(a->t->n, 1);
        CHECK_EQ_INT(a->t->bytes, 8);
        CHECK_EQ_INT(((const int64_t *)a->t->data)[0], 0);
    }
    CHECK_EQ_INT(c->n_out, 1);
    if (c->n_out == 1)
        CHECK_EQ_STR(c->out[0], "319");
    int with_tensor = 0;
    for (int k = 0; k < m->n_nodes; k++)
        if (!strcmp(m->nodes[k].op_type, "Constant")) {
            a = hearth_onnx_attr_find(&m->nodes[k], "value");
            with_tensor += a && a->t != NULL;
        }
    CHECK_EQ_INT(with_tensor, 31);
    const hearth_onnx_tensor *t = hearth_onnx_init_find(m, "base_net.0.0.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->n, 16 * 3 * 3 * 3);
        CHECK_NEAR(((const float *)t->data)[0], -0.5135886669158936, 1e-7);
        CHECK_NEAR(((const float *)t->data)[t->n - 1], 0.07551800459623337, 1e-7);
    }
    hearth_onnx_close(m);
}

static void test_rfb320_simplified(void)
{
    hearth_onnx *m = onnx_open_shared("vision/ultraface-rfb-320/version-RFB-320_simplified.onnx");
    if (!m)
        return;
    CHECK_EQ_INT(m->ir_version, 4);
    CHECK_EQ_INT(m->opset, 9);
    CHECK_EQ_INT(m->n_nodes, 110);
    CHECK_EQ_INT(m->n_inits, 112);
    CHECK_EQ_INT(count_op(m, "Conv"), 52);
    CHECK_EQ_INT(count_op(m, "Relu"), 37);
    CHECK_EQ_INT(count_op(m, "Transpose"), 8);
    CHECK_EQ_INT(count_op(m, "Softmax"), 1);
    check_ultraface_io(m);
    const hearth_onnx_tensor *t = hearth_onnx_init_find(m, "classification_headers.0.0.bias");
    CHECK(t && t->n == 64 && t->ndim == 1);
    if (t)
        CHECK_NEAR(((const float *)t->data)[2], -1.104595422744751, 1e-7);
    hearth_onnx_close(m);
}

static void test_slim320_simplified(void)
{
    hearth_onnx *m = onnx_open_shared("vision/ultraface-rfb-320/version-slim-320_simplified.onnx");
    if (!m)
        return;
    CHECK_EQ_INT(m->opset, 9);
    CHECK_EQ_INT(m->n_nodes, 95);
    CHECK_EQ_INT(m->n_inits, 92);
    CHECK_EQ_INT(count_op(m, "Conv"), 42);
    check_ultraface_io(m);
    hearth_onnx_close(m);
}

static void test_yunet(void)
{
    hearth_onnx *m = onnx_open_shared("vision/yunet-2026may/face_detection_yunet_2026may.onnx");
    if (!m)
        return;
    CHECK_EQ_INT(m->ir_version, 6);
    CHECK_EQ_INT(m->opset, 11);
    CHECK_EQ_INT(m->n_nodes, 106);
    CHECK_EQ_INT(m->n_inits, 112);
    CHECK_EQ_INT(count_op(m, "Conv"), 53);
    CHECK_EQ_INT(count_op(m, "Resize"), 2);
    CHECK_EQ_INT(count_op(m, "Sigmoid"), 6);
    CHECK_EQ_STR(m->nodes[0].name, "Conv_0");
    CHECK_EQ_INT(m->n_inputs, 1);
    const hearth_onnx_value *in = &m->inputs[0];
    check_value(in, "input", 4, (const int64_t[]){1, 3, -1, -1});
    CHECK(in->dim_param[0] == NULL && in->dim_param[1] == NULL);
    CHECK_EQ_STR(in->dim_param[2], "height");
    CHECK_EQ_STR(in->dim_param[3], "width");
    CHECK_EQ_INT(m->n_outputs, 12);
    static const char *const names[] = {"cls_8", "cls_16", "cls_32", "obj_8", "obj_16", "obj_32",
                                        "bbox_8", "bbox_16", "bbox_32", "kps_8", "kps_16", "kps_32"};
    static const int64_t last[] = {1, 1, 1, 1, 1, 1, 4, 4, 4, 10, 10, 10};
    for (int k = 0; k < 12 && k < m->n_outputs; k++) {
        check_value(&m->outputs[k], names[k], 3, (const int64_t[]){1, -1, last[k]});
        CHECK_EQ_STR(m->outputs[k].dim_param[1], "anchors");
    }
    const hearth_onnx_tensor *t = hearth_onnx_init_find(m, "420");
    CHECK(t && t->n == 16 * 3 * 3 * 3);
    if (t)
        CHECK_NEAR(((const float *)t->data)[0], 0.0012165660737082362, 1e-9);
    hearth_onnx_close(m);
}

/* ---- the small model: what the loader reads from a valid file ---- */

static void test_small_valid(void)
{
    built b;
    build(&b);
    pack(&b);
    hearth_err err = {0};
    hearth_onnx *m = parse_guarded(b.bytes, b.len, "small.onnx", &err);
    free(b.bytes);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m)
        return;
    CHECK_EQ_STR(m->path, "small.onnx");
    CHECK_EQ_INT(m->ir_version, 7);
    CHECK_EQ_INT(m->opset, 13);
    CHECK_EQ_STR(m->producer, "test");
    CHECK_EQ_INT(m->n_nodes, 1);
    CHECK_EQ_INT(m->nodes[0].n_in, 2);
    CHECK_EQ_STR(m->nodes[0].in[1], "w");
    CHECK_EQ_INT(m->n_inputs, 1); /* w, an initializer, is left out */
    CHECK_EQ_STR(m->inputs[0].name, "x");
    CHECK_EQ_INT(m->inputs[0].dims[1], -1);
    CHECK_EQ_STR(m->inputs[0].dim_param[1], "n");
    CHECK_EQ_INT(m->outputs[0].dims[0], 2);
    CHECK_EQ_INT(m->outputs[0].dims[1], -1);
    CHECK(m->outputs[0].dim_param[1] == NULL);
    const hearth_onnx_tensor *w = hearth_onnx_init_find(m, "w");
    CHECK(w && w->n == 4 && w->bytes == 16 && ((const float *)w->data)[3] == 3.5f);
    hearth_onnx_close(m);
}

/* The node has no name ("#0"), no domain; attribute strings come back
 * NUL-terminated; narrow types in int32_data are packed. */
static void test_small_names_strings_narrow(void)
{
    built b;
    build(&b);
    b.node.name = NULL;
    ProtobufCBinaryData strs[2] = {{3, (uint8_t *)"abc"}, {0, NULL}};
    b.attr.name = "modes";
    b.attr.type = 8; /* STRINGS */
    b.attr.has_i = 0;
    b.attr.n_strings = 2;
    b.attr.strings = strs;
    int32_t i8[4] = {-128, -1, 0, 127};
    b.init.has_raw_data = 0;
    b.init.data_type = HEARTH_ONNX_INT8;
    b.init.n_int32_data = 4;
    b.init.int32_data = i8;
    pack(&b);
    hearth_err err = {0};
    hearth_onnx *m = parse_guarded(b.bytes, b.len, "small.onnx", &err);
    free(b.bytes);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m)
        return;
    CHECK_EQ_STR(m->nodes[0].name, "#0");
    CHECK_EQ_STR(m->nodes[0].domain, "");
    const hearth_onnx_attr *a = hearth_onnx_attr_find(&m->nodes[0], "modes");
    CHECK(a && a->type == HEARTH_ONNX_ATTR_STRINGS && a->n == 2);
    if (a && a->n == 2) {
        CHECK_EQ_STR(a->strings[0], "abc");
        CHECK_EQ_STR(a->strings[1], "");
    }
    const hearth_onnx_tensor *w = hearth_onnx_init_find(m, "w");
    CHECK(w && w->dtype == HEARTH_ONNX_INT8 && w->bytes == 4);
    if (w) {
        const int8_t *v = w->data;
        CHECK(v[0] == -128 && v[1] == -1 && v[2] == 0 && v[3] == 127);
    }
    hearth_onnx_close(m);

    /* FLOAT16 bit patterns */
    build(&b);
    int32_t h[4] = {0x3c00, 0xbc00, 0, 0x7bff};
    b.init.has_raw_data = 0;
    b.init.data_type = HEARTH_ONNX_FLOAT16;
    b.init.n_int32_data = 4;
    b.init.int32_data = h;
    pack(&b);
    m = parse_guarded(b.bytes, b.len, "small.onnx", &err);
    free(b.bytes);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (m) {
        w = hearth_onnx_init_find(m, "w");
        CHECK(w && w->bytes == 8 && ((const uint16_t *)w->data)[1] == 0xbc00 && ((const uint16_t *)w->data)[3] == 0x7bff);
    }
    hearth_onnx_close(m);
}

/* ---- corrupt files, one per failure ---- */

static void test_nonexistent_path(void)
{
    hearth_err err = {0};
    hearth_onnx *m = hearth_onnx_open("/nonexistent/dir/model.onnx", &err);
    CHECK(m == NULL);
    CHECK_MSG(strstr(err.msg, "/nonexistent/dir/model.onnx") != NULL, "%s", err.msg);
    CHECK_MSG(strstr(err.msg, "onnx") == err.msg, "%s", err.msg);
}

static void test_empty(void) { expect_fail("", 0, HEARTH_EINVAL, "empty file", (const char *)NULL); }

static void test_garbage(void)
{
    /* field 1 as wire type 7, which no protobuf has */
    static const uint8_t junk[] = {0x0f, 0xde, 0xad, 0xbe, 0xef};
    expect_fail(junk, sizeof junk, HEARTH_EINVAL, "malformed protobuf at byte 0", "wire type 7", (const char *)NULL);
    /* text: "hello" reads as field 13 wire type 0, then a varint, ... */
    static const char text[] = "this is not an onnx file at all, just words";
    hearth_err err = {0};
    hearth_onnx *m = parse_guarded(text, sizeof text - 1, "bad.onnx", &err);
    CHECK(m == NULL);
    hearth_onnx_close(m);
    CHECK_MSG(strstr(err.msg, "onnx: bad.onnx: ") == err.msg, "%s", err.msg);
}

static void test_bad_varint(void)
{
    /* ir_version (field 1, varint) of 11 continuation bytes */
    uint8_t v[12] = {0x08};
    memset(v + 1, 0xff, 11);
    expect_fail(v, sizeof v, HEARTH_EINVAL, "malformed protobuf at byte 0", "varint", (const char *)NULL);
}

static void test_wrong_wire_type(void)
{
    /* ir_version (field 1) as a length-delimited field of 2 bytes */
    static const uint8_t v[] = {0x0a, 0x02, 0x01, 0x02};
    expect_fail(v, sizeof v, HEARTH_EINVAL, "malformed protobuf at byte 0", "ModelProto.ir_version", (const char *)NULL);
}

static void test_nested_malformed(void)
{
    /* a valid model with its graph's first node cut: the node's length says
     * more than its graph holds. The offset names the node's tag. */
    built b;
    build(&b);
    pack(&b);
    /* find the graph (field 7, tag 0x3a), then its first node (tag 0x0a) */
    size_t g = 0;
    while (g < b.len && b.bytes[g] != 0x3a)
        g++;
    CHECK(g + 3 < b.len);
    size_t node = g + 2; /* graph's length fits one byte here */
    CHECK_EQ_INT(b.bytes[node], 0x0a);
    b.bytes[node + 1] = 0x7f; /* the node claims 127 bytes */
    char want[64];
    snprintf(want, sizeof want, "malformed protobuf at byte %zu", node);
    expect_fail(b.bytes, b.len, HEARTH_EINVAL, want, "ModelProto.graph > GraphProto", (const char *)NULL);
    free(b.bytes);
}

static void test_truncated_mnist(void)
{
    char path[1024];
    if (!hearth_test_shared_path(path, sizeof path, "vision/mnist-8/mnist-8.onnx"))
        return;
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(n > 20000 && n < sizeof buf);
    int with_offset = 0, tried = 0;
    /* many cut points, including inside the header, the nodes and the big
     * initializer's float_data */
    for (size_t cut = 1; cut < n; cut += cut < 64 ? 1 : 997) {
        hearth_err err = {0};
        hearth_onnx *m = parse_guarded(buf, cut, "bad.onnx", &err);
        tried++;
        CHECK_MSG(m == NULL, "cut at %zu parsed", cut);
        hearth_onnx_close(m);
        CHECK_MSG(strstr(err.msg, "onnx: bad.onnx: ") == err.msg, "cut at %zu: %s", cut, err.msg);
        with_offset += strstr(err.msg, "malformed protobuf at byte ") != NULL;
        if (cut % 4000 < 997)
            printf("# cut at %zu: %s\n", cut, err.msg);
    }
    /* a cut on a field boundary leaves a valid protobuf without a graph:
     * any other cut must name its byte */
    CHECK_MSG(with_offset >= tried - 8, "%d of %d cuts named an offset", with_offset, tried);
}

static void test_no_graph(void)
{
    built b;
    build(&b);
    b.model.graph = NULL;
    packed_fails(&b, HEARTH_EINVAL, "no graph", NULL);
}

static void test_no_ir_version(void)
{
    built b;
    build(&b);
    b.model.has_ir_version = 0;
    packed_fails(&b, HEARTH_EINVAL, "no ir_version", NULL);
}

static void test_opset_too_new(void)
{
    built b;
    build(&b);
    b.opset.version = HEARTH_ONNX_OPSET_MAX + 1;
    char want[64];
    snprintf(want, sizeof want, "opset %d", HEARTH_ONNX_OPSET_MAX + 1);
    packed_fails(&b, HEARTH_EUNSUPPORTED, want, "(7..21)");
}

static void test_opset_too_old(void)
{
    built b;
    build(&b);
    b.opset.version = 6;
    packed_fails(&b, HEARTH_EUNSUPPORTED, "opset 6 of ai.onnx", "outside");
}

static void test_opset_missing(void)
{
    built b;
    build(&b);
    b.opset.domain = "com.microsoft"; /* only another domain's opset */
    packed_fails(&b, HEARTH_EINVAL, "no opset_import for the default domain", NULL);
    build(&b);
    b.model.n_opset_import = 0;
    packed_fails(&b, HEARTH_EINVAL, "no opset_import for the default domain", NULL);
}

static void test_opset_ai_onnx_domain(void)
{
    built b;
    build(&b);
    b.opset.domain = "ai.onnx";
    pack(&b);
    hearth_err err = {0};
    hearth_onnx *m = parse_guarded(b.bytes, b.len, "small.onnx", &err);
    free(b.bytes);
    CHECK_MSG(m && m->opset == 13, "%s", err.msg);
    hearth_onnx_close(m);
}

static void test_external_data(void)
{
    built b;
    build(&b);
    b.init.has_raw_data = 0;
    b.init.has_data_location = 1;
    b.init.data_location = 1;
    packed_fails(&b, HEARTH_EUNSUPPORTED, "tensor 'w' keeps its data outside the file (external data)", NULL);
    build(&b);
    Onnx__StringStringEntryProto e, *ep[1] = {&e};
    onnx__string_string_entry_proto__init(&e);
    e.key = "location";
    e.value = "weights.bin";
    b.init.has_raw_data = 0;
    b.init.n_external_data = 1;
    b.init.external_data = ep;
    packed_fails(&b, HEARTH_EUNSUPPORTED, "tensor 'w' keeps its data outside the file", NULL);
}

static void test_raw_data_short(void)
{
    built b;
    build(&b);
    b.init.raw_data.len = 12;
    packed_fails(&b, HEARTH_EINVAL, "tensor 'w': raw_data holds 12 bytes", "want 16");
}

static void test_typed_count_mismatch(void)
{
    built b;
    build(&b);
    b.init.has_raw_data = 0;
    b.init.n_float_data = 3;
    b.init.float_data = b.w;
    packed_fails(&b, HEARTH_EINVAL, "tensor 'w': float_data holds 3 values", "want 4");
    build(&b);
    b.init.has_raw_data = 0;
    packed_fails(&b, HEARTH_EINVAL, "tensor 'w' has no data", NULL);
}

static void test_dims_negative(void)
{
    built b;
    build(&b);
    b.wdims[1] = -2;
    packed_fails(&b, HEARTH_EINVAL, "tensor 'w': dim 1 is -2 (negative)", NULL);
}

static void test_too_many_dims(void)
{
    built b;
    build(&b);
    int64_t d[9] = {1, 1, 1, 1, 1, 1, 2, 2, 1};
    b.init.n_dims = 9;
    b.init.dims = d;
    packed_fails(&b, HEARTH_EINVAL, "tensor 'w': 9 dims > 8", NULL);
}

static void test_elem_count_overflow(void)
{
    built b;
    build(&b);
    int64_t d[4] = {1 << 20, 1 << 20, 1 << 20, 4};
    b.init.n_dims = 4;
    b.init.dims = d;
    packed_fails(&b, HEARTH_EINVAL, "tensor 'w': its dims make more than", NULL);
}

static void test_unknown_dtype(void)
{
    built b;
    build(&b);
    b.init.data_type = 16;
    packed_fails(&b, HEARTH_EUNSUPPORTED, "tensor 'w': data type 16 (BFLOAT16)", NULL);
    build(&b);
    b.init.data_type = 99;
    packed_fails(&b, HEARTH_EUNSUPPORTED, "data type 99 (?)", NULL);
}

static void test_string_tensor(void)
{
    built b;
    build(&b);
    b.init.data_type = 8;
    packed_fails(&b, HEARTH_EUNSUPPORTED, "tensor 'w' holds strings", NULL);
}

static void test_narrow_out_of_range(void)
{
    built b;
    build(&b);
    int32_t v[4] = {0, 1, 2, 0};
    b.init.has_raw_data = 0;
    b.init.data_type = HEARTH_ONNX_BOOL;
    b.init.n_int32_data = 4;
    b.init.int32_data = v;
    packed_fails(&b, HEARTH_EINVAL, "int32_data[2] = 2 is out of range for BOOL", NULL);
}

static void test_attr_string_nul(void)
{
    built b;
    build(&b);
    b.attr.type = 3;
    b.attr.has_i = 0;
    b.attr.has_s = 1;
    b.attr.s.len = 3;
    b.attr.s.data = (uint8_t *)"a\0b";
    packed_fails(&b, HEARTH_EINVAL, "node 'add0' attribute 'axis': a string with a NUL byte inside", NULL);
}

static void test_attr_tensor_bad(void)
{
    /* a Constant's TENSOR attribute whose tensor is short: named by node and attribute */
    built b;
    build(&b);
    Onnx__TensorProto t;
    onnx__tensor_proto__init(&t);
    t.has_data_type = 1;
    t.data_type = 7;
    t.has_raw_data = 1;
    t.raw_data.len = 4;
    t.raw_data.data = (uint8_t *)"abcd";
    b.node.op_type = "Constant";
    b.attr.name = "value";
    b.attr.type = 4;
    b.attr.has_i = 0;
    b.attr.t = &t;
    packed_fails(&b, HEARTH_EINVAL, "tensor 'add0.value': raw_data holds 4 bytes", "want 8");
}

static void test_node_without_op_type(void)
{
    built b;
    build(&b);
    b.node.op_type = NULL;
    packed_fails(&b, HEARTH_EINVAL, "node 'add0' has no op_type", NULL);
}

static void test_duplicate_initializer(void)
{
    built b;
    build(&b);
    Onnx__TensorProto *two[2] = {&b.init, &b.init};
    b.graph.n_initializer = 2;
    b.graph.initializer = two;
    packed_fails(&b, HEARTH_EINVAL, "initializer 'w' appears twice", NULL);
}

static void test_value_too_many_dims(void)
{
    built b;
    build(&b);
    Onnx__TensorShapeProto__Dimension *d9[9];
    for (int k = 0; k < 9; k++)
        d9[k] = &b.in_d[0];
    b.in_shape.n_dim = 9;
    b.in_shape.dim = d9;
    packed_fails(&b, HEARTH_EINVAL, "graph input 'x': 9 dims > 8", NULL);
}

/* ---- the planner over accepted but broken graphs ---- */

/* Plans b's packed model with shapes; returns the status, err filled. */
static int plan_built(built *b, const char *shapes, hearth_err *err)
{
    pack(b);
    hearth_onnx *m = hearth_onnx_parse(b->bytes, b->len, "p.onnx", err);
    free(b->bytes);
    CHECK_MSG(m != NULL, "the loader refused it: %s", err->msg);
    if (!m)
        return -1;
    hearth_plan p;
    int st = hearth_plan_build(&p, m, shapes, NULL, err);
    hearth_plan_free(&p);
    hearth_onnx_close(m);
    printf("# %s\n", st ? err->msg : "planned");
    return st;
}

static void test_plan_small_valid(void)
{
    built b;
    build(&b);
    hearth_err err = {0};
    CHECK_EQ_INT(plan_built(&b, "x=1x2", &err), 0); /* the baseline the broken ones below differ from */
}

static void test_plan_node_without_output(void)
{
    built b;
    build(&b);
    b.node.n_output = 0;
    hearth_err err = {0};
    CHECK(plan_built(&b, "x=1x2", &err) != 0);
    CHECK_MSG(strstr(err.msg, "node 'add0' (Add) has no output") != NULL, "%s", err.msg);
}

static void test_plan_dim_past_limit(void)
{
    built b;
    build(&b);
    hearth_err err = {0};
    CHECK_EQ_INT(plan_built(&b, "x=1x3000000000", &err), HEARTH_ELIMIT);
    CHECK_MSG(strstr(err.msg, "'x' has a dimension outside [0, 2^31]") != NULL, "%s", err.msg);
}

static void test_plan_concat_empty_input(void)
{
    built b;
    build(&b);
    b.node.op_type = "Concat";
    b.node_in[1] = ""; /* an optional input left out: Concat has none */
    hearth_err err = {0};
    CHECK_EQ_INT(plan_built(&b, "x=1x2", &err), HEARTH_EUNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "node 'add0': op Concat") && strstr(err.msg, "an empty input"), "%s", err.msg);
}

int main(void)
{
    RUN(test_mnist);
    RUN(test_rfb320);
    RUN(test_rfb320_simplified);
    RUN(test_slim320_simplified);
    RUN(test_yunet);
    RUN(test_small_valid);
    RUN(test_small_names_strings_narrow);
    RUN(test_nonexistent_path);
    RUN(test_empty);
    RUN(test_garbage);
    RUN(test_bad_varint);
    RUN(test_wrong_wire_type);
    RUN(test_nested_malformed);
    RUN(test_truncated_mnist);
    RUN(test_no_graph);
    RUN(test_no_ir_version);
    RUN(test_opset_too_new);
    RUN(test_opset_too_old);
    RUN(test_opset_missing);
    RUN(test_opset_ai_onnx_domain);
    RUN(test_external_data);
    RUN(test_raw_data_short);
    RUN(test_typed_count_mismatch);
    RUN(test_dims_negative);
    RUN(test_too_many_dims);
    RUN(test_elem_count_overflow);
    RUN(test_unknown_dtype);
    RUN(test_string_tensor);
    RUN(test_narrow_out_of_range);
    RUN(test_attr_string_nul);
    RUN(test_attr_tensor_bad);
    RUN(test_node_without_op_type);
    RUN(test_duplicate_initializer);
    RUN(test_value_too_many_dims);
    RUN(test_plan_small_valid);
    RUN(test_plan_node_without_output);
    RUN(test_plan_dim_past_limit);
    RUN(test_plan_concat_empty_input);
    TEST_EXIT();
}

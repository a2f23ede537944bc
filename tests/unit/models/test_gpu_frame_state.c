/* test_gpu_frame_state.c: state carried between frames (issue 18's gate):
 * a recurrent conv net run for 32 frames of one sequence gives bit-identical
 * outputs between runs, with the device's keep-alive kernel launched between
 * every frame and without it, on the CPU and on the CUDA device where one is
 * present (HEARTH_REQUIRE_GPU=1, as `make CUDA=1 check-cuda` sets it, makes
 * its absence a failure; elsewhere the GPU half says "skipped").
 *
 * The model is built here with the generated protobuf-c code (no torch
 * needed on the GPU machine): x [1,2,8,8] and the state h [1,4,8,8];
 *   a = Conv3x3(x, pads 1), b = Conv1x1(h), h_next = Tanh(a + b),
 *   y = GlobalAveragePool(h_next)
 * with the pair h=h_next. The state is proven to matter (a frame run with its
 * state reset differs from the same frame in sequence), and frame 0 is
 * checked against this file's own scalar evaluation (1e-5 abs: f32 both, only
 * the order of the 3x3x2 + 4 sums differs). A model warmed up as a server
 * warms it (hearth_frame_model_warm_up) answers the sequence bit for bit. */
#include "harness.h"

#include "engine/dev.h"
#include "models/frame.h"
#include "models/onnx.pb-c.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#define CX 2
#define CH 4
#define HW 8
#define NPIX (HW * HW)
#define FRAMES 32

static float wx[CH * CX * 9], bx[CH], wh[CH * CH];

static float rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return ((float)(*s >> 8) / (float)(1u << 24) - 0.5f);
}

static void tensor(Onnx__TensorProto *t, const char *name, float *data, int n, int64_t *dims, int nd)
{
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = 1;
    t->n_dims = (size_t)nd;
    t->dims = dims;
    t->n_float_data = (size_t)n;
    t->float_data = data;
}

static void value(Onnx__ValueInfoProto *v, Onnx__TypeProto *tp, Onnx__TypeProto__Tensor *tt, Onnx__TensorShapeProto *sh,
                  Onnx__TensorShapeProto__Dimension *d, Onnx__TensorShapeProto__Dimension **dp, const char *name,
                  const int64_t *dims, int nd)
{
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int k = 0; k < nd; k++) {
        onnx__tensor_shape_proto__dimension__init(&d[k]);
        d[k].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        d[k].dim_value = dims[k];
        dp[k] = &d[k];
    }
    sh->n_dim = (size_t)nd;
    sh->dim = dp;
    tt->has_elem_type = 1;
    tt->elem_type = 1;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->name = (char *)name;
    v->type = tp;
}

static void node(Onnx__NodeProto *n, const char *name, const char *op, char **in, int n_in, char **out)
{
    onnx__node_proto__init(n);
    n->name = (char *)name;
    n->op_type = (char *)op;
    n->n_input = (size_t)n_in;
    n->input = in;
    n->n_output = 1;
    n->output = out;
}

/* Writes the model to path; 0 on success. */
static int write_model(const char *path)
{
    uint32_t s = 20261203u;
    for (size_t i = 0; i < sizeof wx / sizeof wx[0]; i++) wx[i] = rnd(&s);
    for (size_t i = 0; i < sizeof bx / sizeof bx[0]; i++) bx[i] = 0.1f * rnd(&s);
    for (size_t i = 0; i < sizeof wh / sizeof wh[0]; i++) wh[i] = 1.5f * rnd(&s); /* strong enough to carry */

    Onnx__ModelProto m;
    onnx__model_proto__init(&m);
    m.has_ir_version = 1;
    m.ir_version = 8;
    m.producer_name = "test_gpu_frame_state";
    Onnx__OperatorSetIdProto ops, *opsp[1] = {&ops};
    onnx__operator_set_id_proto__init(&ops);
    ops.domain = "";
    ops.has_version = 1;
    ops.version = 13;
    m.n_opset_import = 1;
    m.opset_import = opsp;

    Onnx__GraphProto g;
    onnx__graph_proto__init(&g);
    m.graph = &g;
    int64_t dwx[4] = {CH, CX, 3, 3}, dbx[1] = {CH}, dwh[4] = {CH, CH, 1, 1};
    Onnx__TensorProto t[3], *tp[3] = {&t[0], &t[1], &t[2]};
    tensor(&t[0], "wx", wx, CH * CX * 9, dwx, 4);
    tensor(&t[1], "bx", bx, CH, dbx, 1);
    tensor(&t[2], "wh", wh, CH * CH, dwh, 4);
    g.n_initializer = 3;
    g.initializer = tp;

    Onnx__NodeProto n[5], *np[5];
    char *in0[3] = {"x", "wx", "bx"}, *out0[1] = {"a"};
    char *in1[2] = {"h", "wh"}, *out1[1] = {"b"};
    char *in2[2] = {"a", "b"}, *out2[1] = {"s"};
    char *in3[1] = {"s"}, *out3[1] = {"h_next"};
    char *in4[1] = {"h_next"}, *out4[1] = {"y"};
    node(&n[0], "conv_x", "Conv", in0, 3, out0);
    node(&n[1], "conv_h", "Conv", in1, 2, out1);
    node(&n[2], "add", "Add", in2, 2, out2);
    node(&n[3], "tanh", "Tanh", in3, 1, out3);
    node(&n[4], "gap", "GlobalAveragePool", in4, 1, out4);
    Onnx__AttributeProto pads, *padsp[1] = {&pads};
    int64_t pv[4] = {1, 1, 1, 1};
    onnx__attribute_proto__init(&pads);
    pads.name = "pads";
    pads.has_type = 1;
    pads.type = 7; /* INTS */
    pads.n_ints = 4;
    pads.ints = pv;
    n[0].n_attribute = 1;
    n[0].attribute = padsp;
    for (int i = 0; i < 5; i++)
        np[i] = &n[i];
    g.n_node = 5;
    g.node = np;

    int64_t dx[4] = {1, CX, HW, HW}, dh[4] = {1, CH, HW, HW}, dy[4] = {1, CH, 1, 1};
    Onnx__ValueInfoProto v[4], *ins[2] = {&v[0], &v[1]}, *outs[2] = {&v[2], &v[3]};
    Onnx__TypeProto typ[4];
    Onnx__TypeProto__Tensor tt[4];
    Onnx__TensorShapeProto sh[4];
    Onnx__TensorShapeProto__Dimension d[4][4], *dp[4][4];
    value(&v[0], &typ[0], &tt[0], &sh[0], d[0], dp[0], "x", dx, 4);
    value(&v[1], &typ[1], &tt[1], &sh[1], d[1], dp[1], "h", dh, 4);
    value(&v[2], &typ[2], &tt[2], &sh[2], d[2], dp[2], "y", dy, 4);
    value(&v[3], &typ[3], &tt[3], &sh[3], d[3], dp[3], "h_next", dh, 4);
    g.n_input = 2;
    g.input = ins;
    g.n_output = 2;
    g.output = outs;

    size_t len = onnx__model_proto__get_packed_size(&m);
    uint8_t *buf = malloc(len);
    if (!buf)
        return -1;
    onnx__model_proto__pack(&m, buf);
    FILE *f = fopen(path, "wb");
    int rc = f && fwrite(buf, 1, len, f) == len ? 0 : -1;
    if (f)
        fclose(f);
    free(buf);
    return rc;
}

/* Frame t's input, deterministic. */
static void frame_in(int t, float *x)
{
    uint32_t s = 7u + 1000u * (uint32_t)t;
    for (int i = 0; i < CX * NPIX; i++)
        x[i] = rnd(&s);
}

/* The scalar evaluation of one frame from state h (the oracle of frame 0). */
static void scalar_frame(const float *x, const float *h, float *h_next, float *y)
{
    for (int co = 0; co < CH; co++) {
        double sum = 0;
        for (int py = 0; py < HW; py++)
            for (int px = 0; px < HW; px++) {
                float a = bx[co];
                for (int ci = 0; ci < CX; ci++)
                    for (int ky = 0; ky < 3; ky++)
                        for (int kx = 0; kx < 3; kx++) {
                            int iy = py + ky - 1, ix = px + kx - 1;
                            if (iy >= 0 && iy < HW && ix >= 0 && ix < HW)
                                a += wx[((co * CX + ci) * 3 + ky) * 3 + kx] * x[(ci * HW + iy) * HW + ix];
                        }
                for (int ci = 0; ci < CH; ci++)
                    a += wh[co * CH + ci] * h[(ci * HW + py) * HW + px];
                float v = tanhf(a);
                h_next[(co * HW + py) * HW + px] = v;
                sum += v;
            }
        y[co] = (float)(sum / NPIX);
    }
}

/* 32 frames of one sequence in slot 0; keepalive: launch the device's
 * keep-alive (three times) between frames. ys: FRAMES x CH. */
static int run_sequence(hearth_frame_model *fm, bool keepalive, float *ys)
{
    float x[CX * NPIX];
    for (int t = 0; t < FRAMES; t++) {
        frame_in(t, x);
        const void *in[1] = {x};
        void *out[1] = {ys + t * CH};
        hearth_err err = {0};
        int rc = hearth_frame_model_run(fm, 0, t == 0, in, out, &err);
        CHECK_MSG(rc == 0, "frame %d: %s", t, err.msg);
        if (rc)
            return rc;
        for (int k = 0; keepalive && k < 3; k++)
            CHECK_EQ_INT(hearth_frame_model_keepalive(fm), 0);
    }
    return 0;
}

static void check_device(const char *device, const char *path)
{
    hearth_frame_opts o = {.device = device, .states = "h=h_next", .n_slots = 2};
    hearth_err err = {0};
    hearth_frame_model *fm = hearth_frame_model_open(path, &o, &err);
    CHECK_MSG(fm != NULL, "%s: %s", device, err.msg);
    if (!fm)
        return;
    const hearth_frame_info *info = hearth_frame_model_info(fm);
    CHECK_EQ_INT(info->n_inputs, 1);
    CHECK_EQ_INT(info->n_outputs, 1);
    CHECK_EQ_INT(info->n_states, 1);
    printf("# %s: keep-alive %s\n", info->device, info->keepalive ? "does work" : "is a no-op here");

    static float plain[FRAMES * CH], alive[FRAMES * CH], again[FRAMES * CH];
    if (run_sequence(fm, false, plain) || run_sequence(fm, true, alive) || run_sequence(fm, false, again))
        goto out;
    CHECK_MSG(memcmp(plain, alive, sizeof plain) == 0, "%s: outputs differ with the keep-alive on", device);
    CHECK_MSG(memcmp(plain, again, sizeof plain) == 0, "%s: outputs differ between runs", device);

    /* frame 0 from a zero state, against the scalar oracle (1e-5 abs) */
    float x[CX * NPIX], h0[CH * NPIX] = {0}, h1[CH * NPIX], y0[CH];
    frame_in(0, x);
    scalar_frame(x, h0, h1, y0);
    for (int c = 0; c < CH; c++)
        CHECK_MSG(fabsf(plain[c] - y0[c]) <= 1e-5f, "%s: frame 0 channel %d: %g, scalar %g", device, c, plain[c], y0[c]);
    /* frame 1 in sequence against the scalar with the carried state, and
     * against frame 1 run from a zero state: the state must matter */
    float y1[CH], h2[CH * NPIX], fresh[CH];
    frame_in(1, x);
    scalar_frame(x, h1, h2, y1);
    float dmax = 0;
    for (int c = 0; c < CH; c++) {
        CHECK_MSG(fabsf(plain[CH + c] - y1[c]) <= 1e-5f, "%s: frame 1 channel %d: %g, scalar %g", device, c,
                  plain[CH + c], y1[c]);
    }
    const void *in[1] = {x};
    void *outp[1] = {fresh};
    CHECK_EQ_INT(hearth_frame_model_run(fm, 1, true, in, outp, &err), 0);
    for (int c = 0; c < CH; c++)
        dmax = fmaxf(dmax, fabsf(fresh[c] - plain[CH + c]));
    CHECK_MSG(dmax > 1e-3f, "%s: frame 1 from a zero state equals frame 1 in sequence (%g): no state carried", device,
              dmax);

    /* a model warmed up as a server warms it (every slot's graphs on a GPU)
     * answers the same sequence bit for bit, in a slot the warm-up used */
    hearth_frame_model *warm = hearth_frame_model_open(path, &o, &err);
    CHECK_MSG(warm != NULL, "%s: %s", device, err.msg);
    if (warm) {
        int rc = hearth_frame_model_warm_up(warm, &err);
        CHECK_MSG(rc == 0, "%s: warm-up: %s", device, err.msg);
        if (rc == 0 && run_sequence(warm, false, again) == 0)
            CHECK_MSG(memcmp(plain, again, sizeof plain) == 0, "%s: outputs differ after the warm-up", device);
        hearth_frame_model_close(warm);
    }
out:
    hearth_frame_model_close(fm);
}

static char model_path[64];

static void cpu_state(void)
{
    check_device("cpu", model_path);
}

static void cuda_state(void)
{
    hearth_err e = {0};
    hearth_dev *d = hearth_dev_find("cuda", &e);
    const char *r = getenv("HEARTH_REQUIRE_GPU");
    if (!d) {
        if (r && *r && strcmp(r, "0") != 0)
            CHECK_MSG(d != NULL, "HEARTH_REQUIRE_GPU=1 and no CUDA device: %s", e.msg);
        else
            fprintf(stderr, "  skipped: no CUDA device (%s)\n", e.msg[0] ? e.msg : "no message");
        return;
    }
    check_device("cuda", model_path);
}

int main(void)
{
    snprintf(model_path, sizeof model_path, "/tmp/hearth-frame-state-%d.onnx", (int)getpid());
    if (write_model(model_path) != 0) {
        printf("not ok - write_model: cannot write %s\n", model_path);
        return 1;
    }
    RUN(cpu_state);
    RUN(cuda_state);
    unlink(model_path);
    TEST_EXIT();
}

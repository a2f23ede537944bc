/* test_frame_lanes.c: a frame's walk over lanes (frame_model.c, onnx_lanes.c)
 * on a machine without a GPU. The device here is the CPU's with lanes: its
 * conv-net ops are queued on the current lane instead of run, marks and
 * waits recorded as points in those queues, and the queues run when the
 * frame downloads or syncs, in an order the marks allow but chosen to
 * differ from the call order (a seeded random pick among the lanes whose
 * next entry may run): what a GPU's streams may do. Each frame's outputs
 * must equal the plain CPU device's bit for bit (the same kernels on the
 * same inputs; only when they run and where their values live differ), on
 * every shared vision model; the walk must have used lanes, run ops out of
 * call order, ended on lane 0 and left no queue unrun. */
#include "frame_golden.h"

#include "engine/cpu/dev_cpu.h"
#include "engine/dev.h"
#include "models/frame.h"

#include <stdlib.h>
#include <string.h>

enum { OP_CONV, OP_POOL, OP_BINARY, OP_UNARY, OP_SOFTMAX, OP_COPY, OP_RESIZE, OP_MATMUL, OP_WAIT };

/* One queued entry: an op with its arguments copied, or a wait for lane
 * `lane` to have run `pos` entries. */
typedef struct entry {
    int kind;
    hearth_stream *st;
    const void *a, *b;
    void *y, *work;
    const hearth_conv *conv;
    const hearth_weight *w;
    union {
        hearth_pool2d_desc pool;
        hearth_binary_desc bin;
        hearth_strided_desc cp;
        hearth_resize_desc rs;
    } d;
    hearth_unary_op un;
    float fa, fb;
    int64_t n, outer, len, inner, k, m, ldy;
    int lane, pos;
} entry;

#define QMAX 4096
static entry g_q[HEARTH_VIS_LANES][QMAX];
static int g_qn[HEARTH_VIS_LANES], g_done[HEARTH_VIS_LANES], g_cur;
static struct {
    int lane, pos;
    bool set;
} g_mark[HEARTH_VIS_MARKS];
static unsigned g_seed;
static long g_used_lanes, g_reordered, g_failed;
static long g_issue[HEARTH_VIS_LANES][QMAX];    /* the entry's place in the call order */
static long g_issued, g_max_run_issue;

static hearth_dev g_dev;
static hearth_dev_ops g_ops;
static hearth_dev_vision_ops g_vops;
static const hearth_dev_ops *g_cpu;

static entry *push(int kind, hearth_stream *st)
{
    if (g_qn[g_cur] >= QMAX) {
        g_failed++;
        return NULL;
    }
    entry *e = &g_q[g_cur][g_qn[g_cur]];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->st = st;
    g_issue[g_cur][g_qn[g_cur]] = g_issued++;
    g_qn[g_cur]++;
    return e;
}

static int run_entry(const entry *e)
{
    const hearth_dev_vision_ops *v = g_cpu->vision;
    switch (e->kind) {
    case OP_CONV: return v->conv(e->st, e->conv, e->a, e->y, e->work);
    case OP_POOL: return v->pool2d(e->st, &e->d.pool, e->a, e->y);
    case OP_BINARY: return v->binary(e->st, &e->d.bin, e->a, e->b, e->y);
    case OP_UNARY: return v->unary(e->st, e->un, e->a, e->y, e->n, e->fa, e->fb);
    case OP_SOFTMAX: return v->softmax(e->st, e->a, e->y, e->outer, e->len, e->inner);
    case OP_COPY: return v->strided_copy(e->st, &e->d.cp, e->a, e->y);
    case OP_RESIZE: return v->resize(e->st, &e->d.rs, e->a, e->y);
    case OP_MATMUL: {
        float *y = e->y;
        return g_cpu->matmul(e->st, &e->w, 1, e->a, e->k, e->m, &y, &e->ldy);
    }
    }
    return HEARTH_EINVAL;
}

/* Runs every queue to its end, picking at random among the lanes whose
 * next entry may run (a wait: its lane has run that far). */
static int flush(void)
{
    for (;;) {
        int ready[HEARTH_VIS_LANES], nr = 0, pending = 0;
        for (int k = 0; k < HEARTH_VIS_LANES; k++) {
            if (g_done[k] >= g_qn[k])
                continue;
            pending++;
            const entry *e = &g_q[k][g_done[k]];
            if (e->kind != OP_WAIT || g_done[e->lane] >= e->pos)
                ready[nr++] = k;
        }
        if (!pending)
            break;
        if (!nr) {
            CHECK_MSG(0, "the lanes wait on each other: no entry can run");
            g_failed++;
            return HEARTH_EINVAL;
        }
        g_seed = g_seed * 1103515245u + 12345u;
        int k = ready[(g_seed >> 16) % (unsigned)nr];
        const entry *e = &g_q[k][g_done[k]];
        long issue = g_issue[k][g_done[k]];
        if (issue < g_max_run_issue)
            g_reordered++; /* it runs after an entry called after it */
        else
            g_max_run_issue = issue;
        g_done[k]++;
        if (e->kind != OP_WAIT) {
            int rc = run_entry(e);
            if (rc)
                return rc;
        }
    }
    for (int k = 0; k < HEARTH_VIS_LANES; k++)
        g_qn[k] = g_done[k] = 0;
    for (int k = 0; k < HEARTH_VIS_MARKS; k++)
        g_mark[k].set = false;
    g_issued = 0;
    g_max_run_issue = 0;
    return 0;
}

static int l_use(hearth_stream *st, int lane)
{
    if (lane < 0 || lane >= HEARTH_VIS_LANES)
        return HEARTH_EINVAL;
    if (lane > 0)
        g_used_lanes++;
    g_cur = lane;
    return 0;
}

static int l_mark(hearth_stream *st, int mark)
{
    if (mark < 0 || mark >= HEARTH_VIS_MARKS)
        return HEARTH_EINVAL;
    g_mark[mark].lane = g_cur;
    g_mark[mark].pos = g_qn[g_cur];
    g_mark[mark].set = true;
    return 0;
}

static int l_after(hearth_stream *st, int mark)
{
    if (mark < 0 || mark >= HEARTH_VIS_MARKS || !g_mark[mark].set)
        return HEARTH_EINVAL;
    entry *e = push(OP_WAIT, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->lane = g_mark[mark].lane;
    e->pos = g_mark[mark].pos;
    return 0;
}

static int q_conv(hearth_stream *st, const hearth_conv *c, const float *X, float *Y, void *work)
{
    entry *e = push(OP_CONV, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->conv = c;
    e->a = X;
    e->y = Y;
    e->work = work;
    return 0;
}

static int q_pool(hearth_stream *st, const hearth_pool2d_desc *d, const float *X, float *Y)
{
    entry *e = push(OP_POOL, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->d.pool = *d;
    e->a = X;
    e->y = Y;
    return 0;
}

static int q_binary(hearth_stream *st, const hearth_binary_desc *d, const float *A, const float *B, float *Y)
{
    entry *e = push(OP_BINARY, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->d.bin = *d;
    e->a = A;
    e->b = B;
    e->y = Y;
    return 0;
}

static int q_unary(hearth_stream *st, hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b)
{
    entry *e = push(OP_UNARY, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->un = op;
    e->a = X;
    e->y = Y;
    e->n = n;
    e->fa = a;
    e->fb = b;
    return 0;
}

static int q_softmax(hearth_stream *st, const float *X, float *Y, int64_t outer, int64_t len, int64_t inner)
{
    entry *e = push(OP_SOFTMAX, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->a = X;
    e->y = Y;
    e->outer = outer;
    e->len = len;
    e->inner = inner;
    return 0;
}

static int q_copy(hearth_stream *st, const hearth_strided_desc *d, const void *src, void *dst)
{
    entry *e = push(OP_COPY, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->d.cp = *d;
    e->a = src;
    e->y = dst;
    return 0;
}

static int q_resize(hearth_stream *st, const hearth_resize_desc *d, const float *X, float *Y)
{
    entry *e = push(OP_RESIZE, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->d.rs = *d;
    e->a = X;
    e->y = Y;
    return 0;
}

static int q_matmul(hearth_stream *st, const hearth_weight *const *w, int n, const float *X, int64_t x_stride,
                    int64_t M, float *const *Y, const int64_t *y_stride)
{
    if (n != 1)
        return HEARTH_EUNSUPPORTED; /* a frame's matmul is one weight */
    entry *e = push(OP_MATMUL, st);
    if (!e)
        return HEARTH_ELIMIT;
    e->w = w[0];
    e->a = X;
    e->k = x_stride;
    e->m = M;
    e->y = Y[0];
    e->ldy = y_stride[0];
    return 0;
}

/* A download or sync waits for the queued work, as a stream's would. */
static int q_download(hearth_stream *st, void *dst, const void *src, size_t bytes)
{
    int rc = flush();
    return rc ? rc : g_cpu->download(st, dst, src, bytes);
}

static int q_sync(hearth_stream *st)
{
    int rc = flush();
    return rc ? rc : g_cpu->sync(st);
}

static void lanes_dev_make(void)
{
    hearth_dev *cpu = hearth_dev_cpu();
    g_cpu = cpu->ops;
    g_ops = *cpu->ops;
    g_vops = *cpu->ops->vision;
    g_vops.conv = q_conv;
    g_vops.pool2d = q_pool;
    g_vops.binary = q_binary;
    g_vops.unary = q_unary;
    g_vops.softmax = q_softmax;
    g_vops.strided_copy = q_copy;
    g_vops.resize = q_resize;
    g_vops.lane_use = l_use;
    g_vops.lane_mark = l_mark;
    g_vops.lane_after = l_after;
    g_ops.vision = &g_vops;
    g_ops.matmul = q_matmul;
    g_ops.download = q_download;
    g_ops.sync = q_sync;
    g_dev = *cpu;
    g_dev.ops = &g_ops;
    g_dev.caps.name = "cpu-lanes";
}

/* Frames of one model on the CPU and on the lanes device, seeds apart. */
static void check_model(const char *rel, const char *input_rel, const char *shapes)
{
    char mpath[1024];
    if (!hearth_test_shared_path(mpath, sizeof mpath, rel))
        return;
    hearth_err err = {0};
    hearth_frame_opts oc = {.shapes = shapes}, ol = {.shapes = shapes, .dev = &g_dev};
    hearth_frame_model *mc = hearth_frame_model_open(mpath, &oc, &err);
    CHECK_MSG(mc != NULL, "%s on cpu: %s", rel, err.msg);
    hearth_frame_model *ml = mc ? hearth_frame_model_open(mpath, &ol, &err) : NULL;
    CHECK_MSG(!mc || ml != NULL, "%s on cpu-lanes: %s", rel, err.msg);
    /* the golden input, its size the model's (golden_read fails the case otherwise) */
    float *in = mc ? golden_read(input_rel, hearth_frame_model_info(mc)->inputs[0].bytes / sizeof(float)) : NULL;
    if (mc && ml && in) {
        const hearth_frame_info *fi = hearth_frame_model_info(mc);
        float *want[HEARTH_FRAME_MAX_IO], *got[HEARTH_FRAME_MAX_IO];
        for (int j = 0; j < fi->n_outputs; j++) {
            want[j] = malloc(fi->outputs[j].bytes);
            got[j] = malloc(fi->outputs[j].bytes);
        }
        const void *ins[1] = {in};
        CHECK(hearth_frame_model_run(mc, -1, false, ins, (void *const *)want, &err) == 0);
        long used0 = g_used_lanes, reord0 = g_reordered;
        for (unsigned seed = 1; seed <= 6; seed++) {
            g_seed = seed * 2654435761u;
            g_cur = 0;
            for (int j = 0; j < fi->n_outputs; j++)
                memset(got[j], 0xff, fi->outputs[j].bytes);
            CHECK_MSG(hearth_frame_model_run(ml, -1, false, ins, (void *const *)got, &err) == 0, "%s seed %u: %s",
                      rel, seed, err.msg);
            CHECK_MSG(g_cur == 0, "%s: the walk ended on lane %d", rel, g_cur);
            for (int k = 0; k < HEARTH_VIS_LANES; k++)
                CHECK_MSG(g_qn[k] == 0, "%s: lane %d has %d entries left after the frame", rel, k, g_qn[k]);
            for (int j = 0; j < fi->n_outputs; j++)
                CHECK_MSG(memcmp(want[j], got[j], fi->outputs[j].bytes) == 0,
                          "%s seed %u: output %s differs from the plain CPU's", rel, seed, fi->outputs[j].name);
        }
        /* the walk spread over lanes, and the runs took entries out of call order */
        CHECK_MSG(g_used_lanes > used0, "%s: no step went to a lane other than 0", rel);
        CHECK_MSG(g_reordered > reord0, "%s: every entry ran in call order", rel);
        for (int j = 0; j < fi->n_outputs; j++) {
            free(want[j]);
            free(got[j]);
        }
    }
    hearth_frame_model_close(ml);
    hearth_frame_model_close(mc);
    free(in);
    CHECK_EQ_INT(g_failed, 0);
}

/* Whether a model opened under HEARTH_FRAME_LANES=value walks on lanes
 * (its first frame sends a step to a lane other than 0). */
static bool lanes_with(const char *value)
{
    char mpath[1024];
    if (!hearth_test_shared_path(mpath, sizeof mpath, "vision/ultraface-rfb-320/version-RFB-320.onnx"))
        return false;
    setenv("HEARTH_FRAME_LANES", value, 1);
    hearth_err err = {0};
    hearth_frame_opts o = {.dev = &g_dev};
    hearth_frame_model *m = hearth_frame_model_open(mpath, &o, &err);
    unsetenv("HEARTH_FRAME_LANES");
    CHECK_MSG(m != NULL, "HEARTH_FRAME_LANES=%s: %s", value, err.msg);
    if (!m)
        return false;
    const hearth_frame_info *fi = hearth_frame_model_info(m);
    float *in = calloc(1, fi->inputs[0].bytes);
    float *out[HEARTH_FRAME_MAX_IO];
    for (int j = 0; j < fi->n_outputs; j++)
        out[j] = malloc(fi->outputs[j].bytes);
    const void *ins[1] = {in};
    long used0 = g_used_lanes;
    g_seed = 1;
    CHECK_MSG(hearth_frame_model_run(m, -1, false, ins, (void *const *)out, &err) == 0, "HEARTH_FRAME_LANES=%s: %s",
              value, err.msg);
    for (int j = 0; j < fi->n_outputs; j++)
        free(out[j]);
    free(in);
    hearth_frame_model_close(m);
    return g_used_lanes > used0;
}

/* The switch: 1 and counts below it one at a time, counts above the
 * device's clamped, a value that is no count warned about and ignored
 * (the default: lanes); the model opens and runs either way. */
static void lanes_switch(void)
{
    lanes_dev_make();
    CHECK(!lanes_with("1"));
    CHECK(!lanes_with("0"));
    CHECK(!lanes_with("-3"));
    CHECK(lanes_with("2"));
    CHECK(lanes_with("99"));
    CHECK(lanes_with("four"));
    CHECK(lanes_with("2x"));
    CHECK_EQ_INT(g_failed, 0);
}

static void lanes_cpu(void)
{
    lanes_dev_make();
    check_model("vision/ultraface-rfb-320/version-RFB-320.onnx", "vision/golden/ultraface-rfb-320.in.input.f32", NULL);
    check_model("vision/ultraface-rfb-320/version-RFB-320_simplified.onnx",
                "vision/golden/ultraface-rfb-320-simplified.in.input.f32", NULL);
    check_model("vision/ultraface-rfb-320/version-slim-320_simplified.onnx",
                "vision/golden/ultraface-slim-320-simplified.in.input.f32", NULL);
    check_model("vision/yunet-2026may/face_detection_yunet_2026may.onnx", "vision/golden/yunet-320x320.in.input.f32",
                "input=1x3x320x320");
}

int main(void)
{
    RUN(lanes_cpu);
    RUN(lanes_switch);
    TEST_EXIT();
}

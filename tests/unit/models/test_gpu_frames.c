/* test_gpu_frames.c: the frame models on the CUDA device (engine/cuda/'s
 * vision ops): every shared vision model against onnxruntime's outputs
 * (tests/frame_golden.h), each frame one graph replay after the second run,
 * and a served model's first frames as fast as the rest (its warm-up).
 *
 * Where there is no CUDA device: with HEARTH_REQUIRE_GPU=1 (`make CUDA=1
 * check-cuda` on the GPU machine) the case fails naming why; else it says
 * "skipped" and passes (CI, the development machines).
 *
 * Bound: max abs error <= 2e-4, relative Frobenius <= 1e-4. The kernels are
 * f32 FMA throughout (no TF32, no fast-math intrinsics), so only the order
 * of accumulation differs from onnxruntime's, as on the CPU (1e-4); the
 * absolute bound is twice the CPU's because a GPU conv sums a 3x3x256 window
 * in a different tree than MLAS, and the outputs reach ~10 in magnitude. */
#include "frame_golden.h"

#include "base/clock.h"
#include "engine/dev.h"
#include "engine/frame_queue.h"

#include <stdatomic.h>
#include <time.h>

/* A CUDA device to test on: false without one, which fails the case under
 * HEARTH_REQUIRE_GPU=1 and else says "skipped". */
static bool have_cuda(void)
{
    hearth_err e = {0};
    if (hearth_dev_find("cuda", &e))
        return true;
    const char *r = getenv("HEARTH_REQUIRE_GPU");
    if (r && *r && strcmp(r, "0") != 0)
        CHECK_MSG(0, "HEARTH_REQUIRE_GPU=1 and no CUDA device: %s", e.msg);
    else
        fprintf(stderr, "  skipped: no CUDA device (%s)\n", e.msg[0] ? e.msg : "no message");
    return false;
}

static void cuda_goldens(void)
{
    if (!have_cuda())
        return;
    CHECK_EQ_INT(frame_golden_check("cuda", NULL, 2e-4, 1e-4), 5);
}

/* One model's outputs for its golden input, frame after frame on the
 * GPU, with the frame's steps on lanes (HEARTH_FRAME_LANES unset: the
 * default) or one at a time (=1): the lanes change when kernels run, not
 * what any kernel computes, so every frame of both is bit-identical. */
static void lanes_same(const char *rel, const char *input_rel, const char *shapes)
{
    char mpath[1024], ipath[1024];
    if (!hearth_test_shared_path(mpath, sizeof mpath, rel) || !hearth_test_shared_path(ipath, sizeof ipath, input_rel))
        return;
    char *in = NULL;
    size_t in_len = 0;
    hearth_err err = {0};
    CHECK(hearth_file_read(ipath, 64u << 20, &in, &in_len, &err) == 0);
    float *outs[2][HEARTH_FRAME_MAX_IO] = {{NULL}};
    size_t bytes[HEARTH_FRAME_MAX_IO] = {0};
    int n_out = 0;
    for (int arm = 0; arm < 2 && in; arm++) {
        if (arm == 0)
            setenv("HEARTH_FRAME_LANES", "1", 1);
        else
            unsetenv("HEARTH_FRAME_LANES");
        hearth_frame_opts o = {.device = "cuda", .shapes = shapes};
        hearth_frame_model *m = hearth_frame_model_open(mpath, &o, &err);
        CHECK_MSG(m != NULL, "%s: %s", rel, err.msg);
        if (!m)
            break;
        const hearth_frame_info *fi = hearth_frame_model_info(m);
        CHECK_EQ_INT(fi->n_inputs, 1);
        CHECK_EQ_INT((long long)fi->inputs[0].bytes, (long long)in_len);
        n_out = fi->n_outputs;
        for (int j = 0; j < n_out; j++) {
            bytes[j] = fi->outputs[j].bytes;
            outs[arm][j] = malloc(bytes[j]);
        }
        float *run[HEARTH_FRAME_MAX_IO];
        for (int j = 0; j < n_out; j++)
            run[j] = malloc(bytes[j]);
        /* plain, recorded, replayed twice */
        for (int f = 0; f < 4 && fi->n_inputs == 1 && fi->inputs[0].bytes == in_len; f++) {
            const void *ins[1] = {in};
            CHECK_MSG(hearth_frame_model_run(m, -1, false, ins, f == 0 ? (void *const *)outs[arm] : (void *const *)run,
                                             &err) == 0,
                      "%s: frame %d: %s", rel, f, err.msg);
            for (int j = 0; j < n_out && f > 0; j++)
                CHECK_MSG(memcmp(run[j], outs[arm][j], bytes[j]) == 0, "%s: lanes arm %d, frame %d, output %d differs",
                          rel, arm, f, j);
        }
        for (int j = 0; j < n_out; j++)
            free(run[j]);
        hearth_frame_model_close(m);
    }
    unsetenv("HEARTH_FRAME_LANES");
    for (int j = 0; j < n_out; j++) {
        if (outs[0][j] && outs[1][j])
            CHECK_MSG(memcmp(outs[0][j], outs[1][j], bytes[j]) == 0, "%s: output %d differs with and without lanes",
                      rel, j);
        free(outs[0][j]);
        free(outs[1][j]);
    }
    free(in);
}

static void cuda_lanes(void)
{
    if (!have_cuda())
        return;
    lanes_same("vision/ultraface-rfb-320/version-RFB-320.onnx", "vision/golden/ultraface-rfb-320.in.input.f32", NULL);
    lanes_same("vision/yunet-2026may/face_detection_yunet_2026may.onnx", "vision/golden/yunet-320x320.in.input.f32",
               "input=1x3x320x320");
}

/* ---- a served model's first frames ---- */

typedef struct served {
    hearth_frame_job job;
    const void *in[1];
    void *out[HEARTH_FRAME_MAX_IO];
    _Atomic int done;
    int status;
} served;

static void served_done(hearth_frame_job *job, int status, const char *msg)
{
    served *s = job->user;
    s->status = status;
    if (status)
        fprintf(stderr, "  frame failed: %s\n", msg ? msg : "?");
    atomic_store(&s->done, 1);
}

static int q_run(void *model, int slot, bool reset, const void *const *in, void *const *out, hearth_err *err)
{
    return hearth_frame_model_run(model, slot, reset, in, out, err);
}

static int q_warm_up(void *model, hearth_err *err) { return hearth_frame_model_warm_up(model, err); }

/* Served as hearth serve serves it (a frame queue whose runner warms the
 * model up on the queue's thread), a model's first frames are replays like
 * the rest: the stream, arena, staging and graphs a GPU frame uses are the
 * running thread's (dev_cuda.cu), so a warm-up on any other thread leaves
 * the first served frame to run plain and allocate, the second to record
 * (1.4-3.6 ms each in hearth serve's access log on the H100, stop 44, with
 * ~0.5 ms from the third on; a frame's run itself, upload to download, is
 * ~0.29 ms: /stats' compute_infer, stop 43). Bound: the slower of the first
 * two frames' runs under 1 ms, in at least one of three fresh queues (each
 * a new thread, warmed anew), so one noisy frame cannot fail it. */
static void cuda_served_first_frames(void)
{
    if (!have_cuda())
        return;
    hearth_err e = {0};
    char mpath[1024], ipath[1024];
    if (!hearth_test_shared_path(mpath, sizeof mpath, "vision/ultraface-rfb-320/version-RFB-320.onnx") ||
        !hearth_test_shared_path(ipath, sizeof ipath, "vision/golden/ultraface-rfb-320.in.input.f32"))
        return;
    char *in = NULL;
    size_t in_len = 0;
    CHECK(hearth_file_read(ipath, 64u << 20, &in, &in_len, &e) == 0);
    hearth_frame_opts o = {.device = "cuda"};
    hearth_frame_model *m = in ? hearth_frame_model_open(mpath, &o, &e) : NULL;
    CHECK_MSG(m != NULL, "%s", e.msg);
    const hearth_frame_info *fi = m ? hearth_frame_model_info(m) : NULL;
    void *outs[HEARTH_FRAME_MAX_IO] = {NULL};
    for (int j = 0; fi && j < fi->n_outputs; j++)
        outs[j] = malloc(fi->outputs[j].bytes);
    CHECK(!fi || fi->inputs[0].bytes == in_len);
    double best = 1e9;
    for (int round = 0; round < 3 && fi && fi->inputs[0].bytes == in_len; round++) {
        hearth_frame_runner r = {.model = m, .n_slots = 0, .run = q_run, .warm_up = q_warm_up};
        hearth_frame_queue *q = hearth_frame_queue_new(&r, NULL, &e);
        CHECK_MSG(q != NULL, "%s", e.msg);
        if (!q)
            break;
        double ms[6] = {0};
        for (int f = 0; f < 6; f++) {
            served s;
            memset(&s, 0, sizeof s);
            s.in[0] = in;
            memcpy(s.out, outs, sizeof s.out);
            s.job.in = s.in;
            s.job.out = s.out;
            s.job.done = served_done;
            s.job.user = &s;
            CHECK_EQ_INT(hearth_frame_queue_submit(q, &s.job), 0);
            for (int w = 0; w < 50000 && !atomic_load(&s.done); w++) {
                struct timespec d = {0, 100000};
                nanosleep(&d, NULL);
            }
            CHECK(atomic_load(&s.done) && s.status == 0);
            ms[f] = (double)(s.job.end_ns - s.job.start_ns) / 1e6;
        }
        hearth_frame_queue_free(q);
        double first = ms[0] > ms[1] ? ms[0] : ms[1];
        fprintf(stderr, "  queue %d: frames' runs %.3f %.3f %.3f %.3f %.3f %.3f ms\n", round, ms[0], ms[1], ms[2], ms[3],
                ms[4], ms[5]);
        if (first < best)
            best = first;
    }
    CHECK_MSG(best < 1.0, "the first two served frames' slower run: %.3f ms at best of three queues (bound 1 ms)", best);
    for (int j = 0; j < HEARTH_FRAME_MAX_IO; j++)
        free(outs[j]);
    hearth_frame_model_close(m);
    free(in);
}

int main(void)
{
    RUN(cuda_goldens);
    RUN(cuda_lanes);
    RUN(cuda_served_first_frames);
    TEST_EXIT();
}

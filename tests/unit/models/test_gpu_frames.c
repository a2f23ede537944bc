/* test_gpu_frames.c: the frame models on the CUDA device (engine/cuda/'s
 * vision ops): every shared vision model against onnxruntime's outputs
 * (tests/frame_golden.h), each frame one graph replay after the second run.
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

#include "engine/dev.h"

static bool gpu_required(void)
{
    const char *r = getenv("HEARTH_REQUIRE_GPU");
    return r && *r && strcmp(r, "0") != 0;
}

static void cuda_goldens(void)
{
    hearth_err e = {0};
    hearth_dev *d = hearth_dev_find("cuda", &e);
    if (!d) {
        if (gpu_required())
            CHECK_MSG(d != NULL, "HEARTH_REQUIRE_GPU=1 and no CUDA device: %s", e.msg);
        else
            fprintf(stderr, "  skipped: no CUDA device (%s)\n", e.msg[0] ? e.msg : "no message");
        return;
    }
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
    hearth_err e = {0};
    if (!hearth_dev_find("cuda", &e)) {
        if (gpu_required())
            CHECK_MSG(0, "HEARTH_REQUIRE_GPU=1 and no CUDA device: %s", e.msg);
        else
            fprintf(stderr, "  skipped: no CUDA device (%s)\n", e.msg[0] ? e.msg : "no message");
        return;
    }
    lanes_same("vision/ultraface-rfb-320/version-RFB-320.onnx", "vision/golden/ultraface-rfb-320.in.input.f32", NULL);
    lanes_same("vision/yunet-2026may/face_detection_yunet_2026may.onnx", "vision/golden/yunet-320x320.in.input.f32",
               "input=1x3x320x320");
}

int main(void)
{
    RUN(cuda_goldens);
    RUN(cuda_lanes);
    TEST_EXIT();
}

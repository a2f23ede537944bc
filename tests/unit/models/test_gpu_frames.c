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

int main(void)
{
    RUN(cuda_goldens);
    TEST_EXIT();
}

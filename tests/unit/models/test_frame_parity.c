/* test_frame_parity.c: every shared vision model on the CPU against
 * onnxruntime's outputs (tests/frame_golden.h), on the caller's thread and
 * on a pool of 2. The bound is the issue's: max abs error <= 1e-4 (and the
 * golden README's relative Frobenius 1e-4): f32 throughout, only the order
 * of accumulation differs from onnxruntime's. */
#include "frame_golden.h"

static void cpu_one_thread(void)
{
    CHECK_EQ_INT(frame_golden_check("cpu", NULL, 1e-4, 1e-4), 5);
}

static void cpu_two_threads(void)
{
    hearth_pool *pool = hearth_pool_new(2);
    CHECK_EQ_INT(frame_golden_check("cpu", pool, 1e-4, 1e-4), 5);
    hearth_pool_free(pool);
}

int main(void)
{
    RUN(cpu_one_thread);
    RUN(cpu_two_threads);
    TEST_EXIT();
}

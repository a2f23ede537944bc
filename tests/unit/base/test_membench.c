/* test_membench.c: the read-bandwidth benchmark reports bytes per time it
 * really took, and refuses bad arguments.
 *
 * The figure is checked against the wall time of the whole call, measured
 * here: the call reads the buffer passes + 1 times (one untimed) after
 * filling it, so the best pass, bytes / GB/s, can be no longer than the call
 * divided by passes + 1. The other side is not bounded by the wall time:
 * on a loaded machine (CI runs suites side by side) the fill's page faults
 * and preemption stretched a call to 140x its best pass. Instead the figure
 * must be one a CPU's memory can give, 0.05 to 5,000 GB/s: a unit off by
 * a factor of 1,000 (ns vs us, bytes vs KB) lands outside it, and a figure
 * too low fails the first check. */
#include "base/clock.h"
#include "base/membench.h"
#include "harness.h"

#include <stdint.h>

static void check_consistent(size_t n, int passes, hearth_pool *pool)
{
    hearth_err err = {0};
    uint64_t t0 = hearth_now_ns();
    double gbs = hearth_membench_read_gbs(n, passes, pool, &err);
    double elapsed_ns = (double)(hearth_now_ns() - t0);
    CHECK_MSG(gbs > 0, "%g GB/s: %s", gbs, err.msg);
    if (gbs <= 0)
        return;
    double best_pass_ns = (double)n / gbs;
    CHECK_MSG(best_pass_ns * (passes + 1) <= elapsed_ns * 1.001, "best pass %g ns x %d > call %g ns", best_pass_ns,
              passes + 1, elapsed_ns);
    CHECK_MSG(gbs >= 0.05 && gbs <= 5000, "%g GB/s is no CPU's read bandwidth", gbs);
}

static void test_consistent_with_wall_time(void)
{
    check_consistent(64u << 20, 3, NULL);
    hearth_pool *pool = hearth_pool_new(2);
    check_consistent(64u << 20, 2, pool);
    hearth_pool_free(pool);
}

static void test_bad_arguments(void)
{
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_membench_read_gbs(1 << 20, 0, NULL, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "passes") != NULL);
    /* a tiny size is rounded up to a page, not refused */
    CHECK(hearth_membench_read_gbs(10, 1, NULL, &err) > 0);
}

int main(void)
{
    RUN(test_consistent_with_wall_time);
    RUN(test_bad_arguments);
    TEST_EXIT();
}

/* test_membench.c: the read-bandwidth benchmark gives a plausible figure
 * and refuses bad arguments. The figure itself is checked against an
 * independent timing of memcpy over the same size: a read-only pass moves
 * half the bytes of a copy per byte touched, so it should never be slower
 * than a small fraction of the copy rate, nor faster than physics allows. */
#include "base/clock.h"
#include "base/membench.h"
#include "harness.h"

#include <stdint.h>
#include <stdlib.h>

static void test_plausible(void)
{
    hearth_err err = {0};
    size_t n = 64u << 20;
    double gbs = hearth_membench_read_gbs(n, 3, NULL, &err);
    CHECK_MSG(gbs > 0.05 && gbs < 10000, "%g GB/s", gbs);
    /* memcpy of the same size: reads n and writes n bytes */
    char *a = malloc(n), *b = malloc(n);
    CHECK(a && b);
    if (a && b) {
        memset(a, 3, n);
        memset(b, 4, n);
        double best = 0;
        for (int i = 0; i < 3; i++) {
            uint64_t t0 = hearth_now_ns();
            memcpy(b, a, n);
            uint64_t dt = hearth_now_ns() - t0;
            double r = (double)n / (double)dt;
            if (r > best)
                best = r;
        }
        CHECK(b[n - 1] == 3);
        /* reading alone is at least a quarter of the copy rate (usually 1.5-3x it) */
        CHECK_MSG(gbs > best / 4, "read %g GB/s vs memcpy %g GB/s", gbs, best);
    }
    free(a);
    free(b);
    hearth_pool *pool = hearth_pool_new(2);
    double g2 = hearth_membench_read_gbs(n, 2, pool, &err);
    CHECK_MSG(g2 > 0.05 && g2 < 10000, "%g GB/s with a pool", g2);
    hearth_pool_free(pool);
}

static void test_bad_arguments(void)
{
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_membench_read_gbs(1 << 20, 0, NULL, &err), HEARTH_EINVAL);
    CHECK(strstr(err.msg, "passes") != NULL);
    /* a tiny size is rounded up, not refused */
    CHECK(hearth_membench_read_gbs(10, 1, NULL, &err) > 0);
}

int main(void)
{
    RUN(test_plausible);
    RUN(test_bad_arguments);
    TEST_EXIT();
}

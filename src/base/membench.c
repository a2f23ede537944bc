/* membench.c: a read-bandwidth micro-benchmark.
 *
 * Each thread of the pool sums its slice of a large buffer as 64-bit words
 * with eight independent accumulators, so the loop is bound by loads, not
 * by an add chain; the compiler vectorizes it for the baseline ISA (SSE2
 * loads already saturate DRAM; wider vectors only matter in cache). The
 * buffer is written once first so every page is really backed (reading
 * untouched anonymous memory would read the shared zero page, all cache
 * hits). The best of a few passes is kept: others only lose time to
 * interference, never gain it.
 *
 * Rejected: non-temporal or prefetch tricks (the point is what an ordinary
 * streaming read, like a matmul over weights, gets) and STREAM's triad (it
 * mixes writes in; decode only reads weights). */
#include "base/membench.h"

#include "base/clock.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct read_job {
    const uint64_t *words;
    size_t n_words;
    uint64_t sums[256];
} read_job;

static void read_task(void *ctx, int64_t task, int64_t n_tasks)
{
    read_job *j = ctx;
    size_t per = (j->n_words / (size_t)n_tasks) & ~(size_t)7;
    size_t start = per * (size_t)task;
    size_t end = task == n_tasks - 1 ? j->n_words : start + per;
    uint64_t a[8] = {0};
    size_t i = start;
    for (; i + 8 <= end; i += 8)
        for (int k = 0; k < 8; k++)
            a[k] += j->words[i + k];
    for (; i < end; i++)
        a[0] += j->words[i];
    j->sums[task % 256] = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

double hearth_membench_read_gbs(size_t bytes, int passes, hearth_pool *pool, hearth_err *err)
{
    if (passes < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "membench: %d passes", passes);
    bytes &= ~(size_t)4095;
    if (bytes < 4096)
        bytes = 4096;
    uint64_t *buf = malloc(bytes);
    if (!buf)
        return hearth_err_set(err, HEARTH_ENOMEM, "membench: cannot allocate %zu bytes", bytes);
    memset(buf, 1, bytes);
    read_job j = {.words = buf, .n_words = bytes / 8};
    int64_t n_tasks = hearth_pool_size(pool);
    if (n_tasks > 256)
        n_tasks = 256;
    double best = 0;
    for (int p = 0; p <= passes; p++) {
        uint64_t t0 = hearth_now_ns();
        hearth_pool_run(pool, read_task, &j, n_tasks);
        uint64_t dt = hearth_now_ns() - t0;
        double gbs = (double)bytes / (double)(dt ? dt : 1);
        if (p > 0 && gbs > best)
            best = gbs;
    }
    free(buf);
    /* the sums are never used: fold them into nothing the optimizer can see through */
    volatile uint64_t sink = 0;
    for (int64_t t = 0; t < n_tasks; t++)
        sink += j.sums[t];
    (void)sink;
    return best;
}

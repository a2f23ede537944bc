/* bench_hist.h: an HDR-style latency histogram for `hearth bench`.
 *
 * Values are nanoseconds. Below 256 ns each value has its own bucket; above,
 * each power of two is split into 128 equal buckets, so a bucket is at most
 * 1/128 of its lower bound wide and a percentile read back as the bucket's
 * midpoint is within 1/256 (0.4%) of a recorded value. Values up to 2^42 ns
 * (73 minutes) are kept; larger ones land in the top bucket. Fixed storage,
 * no allocation: one per thread, merged after the run. Not thread-safe. */
#ifndef HEARTH_CLI_BENCH_HIST_H
#define HEARTH_CLI_BENCH_HIST_H

#include <stdint.h>
#include <stdio.h>

#define BENCH_HIST_SUB 128                               /* buckets per power of two */
#define BENCH_HIST_TOP_BIT 42                            /* 2^42 ns, 73 minutes */
#define BENCH_HIST_N ((BENCH_HIST_TOP_BIT - 6) * BENCH_HIST_SUB)

typedef struct bench_hist {
    uint64_t count, max, min;
    double sum;
    uint64_t buckets[BENCH_HIST_N];
} bench_hist;

void bench_hist_init(bench_hist *h);
void bench_hist_record(bench_hist *h, uint64_t ns);
/* Adds every sample of src to dst. */
void bench_hist_merge(bench_hist *dst, const bench_hist *src);
/* The value at quantile q (0..1) in ns: the midpoint of the bucket holding
 * that sample, clamped to [min, max]; 0 for an empty histogram. */
uint64_t bench_hist_quantile(const bench_hist *h, double q);
/* Samples above ns (bucket granularity). */
uint64_t bench_hist_count_above(const bench_hist *h, uint64_t ns);
/* Writes {"count","mean","p50","p90","p99","p999","max"} in ms, and with
 * buckets != 0 also "buckets": [[upper_ms, count], ...] for non-empty buckets. */
void bench_hist_write_json(FILE *f, const bench_hist *h, int buckets);

#endif

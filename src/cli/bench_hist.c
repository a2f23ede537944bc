/* bench_hist.c: the log-linear latency histogram of bench_hist.h.
 *
 * How: the bucket of v is found from its highest set bit (the power of two)
 * and the next 7 bits (the sub-bucket), as HdrHistogram does, so recording
 * is a few integer operations and the relative error is fixed (1/256 at the
 * midpoint) whatever the range.
 * Rejected: keeping every sample and sorting (memory grows with the run, and
 * a long open-loop run at a high rate is exactly when it matters); fixed-width
 * buckets (either too coarse at 100 us or too many at 10 s). */
#include "bench_hist.h"

#include <string.h>

/* Bucket index of v: identity below 2*SUB, then SUB buckets per octave. */
static size_t bucket_of(uint64_t v)
{
    if (v < 2 * BENCH_HIST_SUB)
        return (size_t)v;
    int e = 63 - __builtin_clzll(v); /* 8 and up */
    if (e >= BENCH_HIST_TOP_BIT)
        return BENCH_HIST_N - 1;
    int shift = e - 7;
    size_t mant = (size_t)(v >> shift) & (BENCH_HIST_SUB - 1);
    return (size_t)(e - 6) * BENCH_HIST_SUB + mant;
}

/* Lower bound and width of bucket i (the inverse of bucket_of). */
static void bucket_range(size_t i, uint64_t *lo, uint64_t *width)
{
    if (i < 2 * BENCH_HIST_SUB) {
        *lo = i;
        *width = 1;
        return;
    }
    int e = (int)(i / BENCH_HIST_SUB) + 6, shift = e - 7;
    uint64_t mant = i % BENCH_HIST_SUB;
    *lo = (BENCH_HIST_SUB + mant) << shift;
    *width = (uint64_t)1 << shift;
}

void bench_hist_init(bench_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

void bench_hist_record(bench_hist *h, uint64_t ns)
{
    h->buckets[bucket_of(ns)]++;
    h->count++;
    h->sum += (double)ns;
    if (ns > h->max)
        h->max = ns;
    if (ns < h->min)
        h->min = ns;
}

void bench_hist_merge(bench_hist *dst, const bench_hist *src)
{
    for (size_t i = 0; i < BENCH_HIST_N; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    dst->sum += src->sum;
    if (src->max > dst->max)
        dst->max = src->max;
    if (src->min < dst->min)
        dst->min = src->min;
}

uint64_t bench_hist_quantile(const bench_hist *h, double q)
{
    if (!h->count)
        return 0;
    /* the rank of the sample at q, 1-based: p50 of 2 samples is the first */
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank >= h->count)
        return h->max;
    uint64_t seen = 0;
    for (size_t i = 0; i < BENCH_HIST_N; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t lo, w;
            bucket_range(i, &lo, &w);
            uint64_t v = lo + w / 2;
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

uint64_t bench_hist_count_above(const bench_hist *h, uint64_t ns)
{
    uint64_t n = 0;
    for (size_t i = bucket_of(ns) + 1; i < BENCH_HIST_N; i++)
        n += h->buckets[i];
    return n;
}

void bench_hist_write_json(FILE *f, const bench_hist *h, int buckets)
{
    double ms = 1e-6;
    fprintf(f, "{\"count\": %llu, \"mean\": %.4f, \"p50\": %.4f, \"p90\": %.4f, \"p99\": %.4f, \"p999\": %.4f, "
               "\"max\": %.4f",
            (unsigned long long)h->count, h->count ? h->sum / (double)h->count * ms : 0.0,
            (double)bench_hist_quantile(h, 0.5) * ms, (double)bench_hist_quantile(h, 0.9) * ms,
            (double)bench_hist_quantile(h, 0.99) * ms, (double)bench_hist_quantile(h, 0.999) * ms,
            (double)h->max * ms);
    if (buckets) {
        fprintf(f, ", \"buckets\": [");
        int first = 1;
        for (size_t i = 0; i < BENCH_HIST_N; i++) {
            if (!h->buckets[i])
                continue;
            uint64_t lo, w;
            bucket_range(i, &lo, &w);
            fprintf(f, "%s[%.6f, %llu]", first ? "" : ", ", (double)(lo + w) * ms, (unsigned long long)h->buckets[i]);
            first = 0;
        }
        fprintf(f, "]");
    }
    fprintf(f, "}");
}

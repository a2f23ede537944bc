/* Unit tests for src/cli/bench_hist.c, `hearth bench`'s latency histogram.
 *
 * The oracle is the exact percentile of the same samples kept and sorted:
 * the sample of rank ceil(q n) (1-based), as bench_hist_quantile defines
 * it. Every histogram percentile must be within the header's stated
 * relative error (1/256 of the exact value; exact below 256 ns) of it, on
 * random data over seven decades and on data chosen against the bucketing:
 * values at and beside every power of two, one value repeated, a rare
 * stall among fast answers. The q are multiples of 1/10000 and n a
 * multiple of 10000, so ceil(q n) is an integer computed exactly here. */
#include "harness.h"

#include "cli/bench_hist.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>

static const int qs[] = {1, 10, 100, 1000, 2500, 5000, 7500, 9000, 9900, 9990, 9999, 10000}; /* q * 10000 */
#define N_QS ((int)(sizeof qs / sizeof qs[0]))

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Records v[0..n) (n a multiple of 10000) and checks every q against the
 * sorted samples; also count, min, max and the mean. */
static void check_against_sorted(const char *what, uint64_t *v, size_t n)
{
    bench_hist *h = malloc(sizeof *h);
    bench_hist_init(h);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        bench_hist_record(h, v[i]);
        sum += (double)v[i];
    }
    qsort(v, n, sizeof *v, cmp_u64);
    CHECK_EQ_INT(h->count, n);
    CHECK_EQ_INT(h->min, v[0]);
    CHECK_EQ_INT(h->max, v[n - 1]);
    CHECK_NEAR(h->sum, sum, sum * 1e-12);
    for (int k = 0; k < N_QS; k++) {
        size_t rank = ((size_t)qs[k] * n + 9999) / 10000; /* ceil(q n), exact */
        uint64_t exact = v[rank - 1], got = bench_hist_quantile(h, qs[k] / 10000.0);
        double err = got > exact ? (double)(got - exact) : (double)(exact - got);
        CHECK_MSG(err <= (double)exact / 256.0, "%s: q %.4f: %llu vs exact %llu (error %.3g%%, allowed 0.39%%)", what,
                  qs[k] / 10000.0, (unsigned long long)got, (unsigned long long)exact,
                  exact ? 100.0 * err / (double)exact : 0.0);
    }
    free(h);
}

static void test_random_data(void)
{
    size_t n = 200000;
    uint64_t *v = malloc(n * sizeof *v);
    /* log-uniform over 1 ns .. 10 s: every octave the bench can see */
    for (size_t i = 0; i < n; i++)
        v[i] = (uint64_t)exp((double)(next_u64() >> 11) / 9007199254740992.0 * log(1e10));
    check_against_sorted("log-uniform", v, n);
    /* uniform over 1..2 ms: many samples per bucket */
    for (size_t i = 0; i < n; i++)
        v[i] = 1000000 + next_u64() % 1000000;
    check_against_sorted("uniform 1-2 ms", v, n);
    free(v);
}

static void test_adversarial_data(void)
{
    size_t n = 20000;
    uint64_t *v = malloc(n * sizeof *v);
    /* at, below and above every power of two up to the kept range: bucket edges */
    for (size_t i = 0; i < n; i++) {
        int e = (int)(i / 3 % (BENCH_HIST_TOP_BIT - 1)) + 1;
        v[i] = ((uint64_t)1 << e) + (uint64_t)(i % 3) - 1;
    }
    check_against_sorted("powers of two +-1", v, n);
    /* one value repeated: every percentile is that value, exactly */
    for (size_t i = 0; i < n; i++)
        v[i] = 1234567891;
    check_against_sorted("one value", v, n);
    bench_hist h;
    bench_hist_init(&h);
    for (size_t i = 0; i < n; i++)
        bench_hist_record(&h, 1234567891);
    CHECK_EQ_INT(bench_hist_quantile(&h, 0.5), 1234567891);
    CHECK_EQ_INT(bench_hist_quantile(&h, 0.999), 1234567891);
    /* a stall: 0.5% of the answers take 1 s among 1 ms ones; p99 must not
     * show it, p99.9 must */
    for (size_t i = 0; i < n; i++)
        v[i] = i % 200 == 7 ? 1000000000 : 1000000 + i % 1000;
    check_against_sorted("rare stall", v, n);
    /* small values, each its own bucket, zero included */
    for (size_t i = 0; i < n; i++)
        v[i] = i % 300;
    check_against_sorted("0..299 ns", v, n);
    free(v);
}

static void test_small_counts_and_overflow(void)
{
    bench_hist h;
    bench_hist_init(&h);
    bench_hist_record(&h, 5000000);
    CHECK_EQ_INT(bench_hist_quantile(&h, 0.0), 5000000);
    CHECK_EQ_INT(bench_hist_quantile(&h, 0.5), 5000000);
    CHECK_EQ_INT(bench_hist_quantile(&h, 1.0), 5000000);
    bench_hist_record(&h, 7000000);
    /* p50 of two samples is the first (rank ceil(0.5 * 2) = 1) */
    CHECK_NEAR(bench_hist_quantile(&h, 0.5), 5000000, 5000000 / 256.0);
    CHECK_EQ_INT(bench_hist_quantile(&h, 1.0), 7000000);
    /* past 2^42 ns the value lands in the top bucket, but max is exact */
    uint64_t huge = (uint64_t)1 << 50;
    bench_hist_record(&h, huge);
    CHECK_EQ_INT(h.max, huge);
    CHECK_EQ_INT(bench_hist_quantile(&h, 1.0), huge);
    CHECK_EQ_INT(bench_hist_count_above(&h, 6000000), 2);
    CHECK_EQ_INT(bench_hist_count_above(&h, 8000000), 1);
}

static void test_empty(void)
{
    bench_hist h;
    bench_hist_init(&h);
    CHECK_EQ_INT(h.count, 0);
    for (int k = 0; k < N_QS; k++)
        CHECK_EQ_INT(bench_hist_quantile(&h, qs[k] / 10000.0), 0);
    CHECK_EQ_INT(bench_hist_count_above(&h, 0), 0);
    /* the JSON of nothing is still whole, every figure 0, no buckets */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bench_hist_write_json(f, &h, 1);
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    CHECK_MSG(j != NULL, "not JSON: %s", buf);
    const char *keys[] = {"count", "mean", "p50", "p90", "p99", "p999", "max"};
    for (size_t i = 0; j && i < sizeof keys / sizeof keys[0]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        CHECK_MSG(cJSON_IsNumber(x) && x->valuedouble == 0, "%s", keys[i]);
    }
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "buckets")) == 0);
    cJSON_Delete(j);
    free(buf);
    /* merging an empty histogram changes nothing, min included */
    bench_hist a, e;
    bench_hist_init(&a);
    bench_hist_init(&e);
    bench_hist_record(&a, 300);
    bench_hist_merge(&a, &e);
    CHECK_EQ_INT(a.count, 1);
    CHECK_EQ_INT(a.min, 300);
    CHECK_EQ_INT(a.max, 300);
    bench_hist_merge(&e, &a);
    CHECK_EQ_INT(e.count, 1);
    CHECK_EQ_INT(e.min, 300);
    CHECK_EQ_INT(bench_hist_quantile(&e, 0.5), 300);
}

static void test_merge(void)
{
    /* two threads' histograms of different data merge into exactly the
     * histogram of all the samples, and that one still meets the oracle */
    size_t n = 100000;
    uint64_t *v = malloc(n * sizeof *v);
    bench_hist *a = malloc(sizeof *a), *b = malloc(sizeof *b), *all = malloc(sizeof *all);
    bench_hist_init(a);
    bench_hist_init(b);
    bench_hist_init(all);
    for (size_t i = 0; i < n; i++) {
        /* a: fast answers around 2 ms; b: slow ones around 300 ms */
        v[i] = i % 2 ? 2000000 + next_u64() % 500000 : 300000000 + next_u64() % 50000000;
        bench_hist_record(i % 2 ? a : b, v[i]);
        bench_hist_record(all, v[i]);
    }
    bench_hist_merge(a, b);
    CHECK_EQ_INT(a->count, all->count);
    CHECK_EQ_INT(a->min, all->min);
    CHECK_EQ_INT(a->max, all->max);
    CHECK_NEAR(a->sum, all->sum, all->sum * 1e-12);
    CHECK(memcmp(a->buckets, all->buckets, sizeof a->buckets) == 0);
    for (int k = 0; k < N_QS; k++)
        CHECK_EQ_INT(bench_hist_quantile(a, qs[k] / 10000.0), bench_hist_quantile(all, qs[k] / 10000.0));
    check_against_sorted("merged halves", v, n);
    free(v);
    free(a);
    free(b);
    free(all);
}

static void test_json_buckets_add_up(void)
{
    bench_hist h;
    bench_hist_init(&h);
    for (int i = 0; i < 1000; i++)
        bench_hist_record(&h, 1000000 + (uint64_t)(next_u64() % 100000000));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bench_hist_write_json(f, &h, 1);
    fclose(f);
    cJSON *j = cJSON_Parse(buf);
    CHECK(j != NULL);
    const cJSON *bk = cJSON_GetObjectItemCaseSensitive(j, "buckets"), *it;
    double total = 0, prev = 0;
    cJSON_ArrayForEach(it, bk) {
        double upper = cJSON_GetArrayItem(it, 0)->valuedouble;
        CHECK(upper > prev); /* ascending upper bounds */
        prev = upper;
        total += cJSON_GetArrayItem(it, 1)->valuedouble;
    }
    CHECK_EQ_INT((long long)total, 1000);
    CHECK_NEAR(cJSON_GetObjectItemCaseSensitive(j, "p50")->valuedouble,
               (double)bench_hist_quantile(&h, 0.5) * 1e-6, 1e-4);
    cJSON_Delete(j);
    free(buf);
}

int main(void)
{
    RUN(test_random_data);
    RUN(test_adversarial_data);
    RUN(test_small_counts_and_overflow);
    RUN(test_empty);
    RUN(test_merge);
    RUN(test_json_buckets_add_up);
    TEST_EXIT();
}

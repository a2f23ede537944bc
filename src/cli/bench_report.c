/* bench_report.c: `hearth bench`'s figures: per-thread counters merged after
 * the run, the one-screen summary and the --json file.
 *
 * How: each thread counts into its own bench_stats (no sharing, no atomics
 * on the hot path); bench.c merges them once the threads have ended. The
 * JSON is written with fprintf, keys fixed, histograms with their buckets so
 * that a reader can recompute any percentile.
 * Rejected: building the JSON with cJSON (a node per bucket, and its number
 * format is no better than %.4f for milliseconds). */
#include "bench.h"

#include <string.h>

const char *const bench_err_names[BENCH_ERR_N] = {"connect", "closed", "status", "bad_json", "timeout", "protocol", "stream",
                                                  "late"};

void bench_stats_init(bench_stats *s)
{
    memset(s, 0, sizeof *s);
    bench_hist_init(&s->lat);
    bench_hist_init(&s->ttft);
    bench_hist_init(&s->itl);
}

static void count_status(bench_stats *s, int status, uint64_t n)
{
    for (int i = 0; i < s->n_status; i++)
        if (s->status[i] == status) {
            s->status_count[i] += n;
            return;
        }
    if (s->n_status == BENCH_MAX_STATUS) {
        s->status_other += n;
        return;
    }
    s->status[s->n_status] = status;
    s->status_count[s->n_status++] = n;
}

void bench_stats_error(bench_stats *s, enum bench_err_kind kind, int status)
{
    s->errors++;
    s->err_kind[kind]++;
    if (kind == BENCH_ERR_STATUS)
        count_status(s, status, 1);
}

void bench_stats_merge(bench_stats *d, const bench_stats *s)
{
    bench_hist_merge(&d->lat, &s->lat);
    bench_hist_merge(&d->ttft, &s->ttft);
    bench_hist_merge(&d->itl, &s->itl);
    d->requests += s->requests;
    d->errors += s->errors;
    d->misses += s->misses;
    d->bytes += s->bytes;
    d->tokens += s->tokens;
    d->streams += s->streams;
    d->stream_rate_sum += s->stream_rate_sum;
    d->prompt_tokens += s->prompt_tokens;
    d->usage_answers += s->usage_answers;
    for (int k = 0; k < BENCH_ERR_N; k++)
        d->err_kind[k] += s->err_kind[k];
    for (int i = 0; i < s->n_status; i++)
        count_status(d, s->status[i], s->status_count[i]);
    d->status_other += s->status_other;
    if (s->backlog_max > d->backlog_max)
        d->backlog_max = s->backlog_max;
    if (s->t_first_ns && (!d->t_first_ns || s->t_first_ns < d->t_first_ns))
        d->t_first_ns = s->t_first_ns;
    if (s->t_last_ns > d->t_last_ns)
        d->t_last_ns = s->t_last_ns;
    for (int i = 0; i < BENCH_TIMELINE_S; i++) {
        d->tl_count[i] += s->tl_count[i];
        d->tl_sum_ms[i] += s->tl_sum_ms[i];
        if (s->tl_max_ms[i] > d->tl_max_ms[i])
            d->tl_max_ms[i] = s->tl_max_ms[i];
    }
}

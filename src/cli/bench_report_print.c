/* bench_report_print.c: the summary `hearth bench` prints and its --json
 * file, from the merged bench_stats.
 *
 * The summary fits one screen: what was run, throughput, the latency
 * percentiles (and TTFT, ITL, tokens/s for streams), misses and errors by
 * kind and status. The JSON carries the same figures under fixed keys plus
 * every histogram's buckets. */
#include "bench_report.h"

#include <errno.h>
#include <string.h>

void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void hist_line(FILE *f, const char *name, const bench_hist *h)
{
    double ms = 1e-6;
    fprintf(f, "  %-8s p50 %9.3f  p90 %9.3f  p99 %9.3f  p99.9 %9.3f  max %9.3f ms  (%llu)\n", name,
            (double)bench_hist_quantile(h, 0.5) * ms, (double)bench_hist_quantile(h, 0.9) * ms,
            (double)bench_hist_quantile(h, 0.99) * ms, (double)bench_hist_quantile(h, 0.999) * ms,
            (double)h->max * ms, (unsigned long long)h->count);
}

void bench_report_summary(FILE *f, const bench_run_info *in, const bench_stats *s)
{
    fprintf(f, "hearth bench %s --api %s: %s loop, %d connections, %d threads", in->url, in->api, in->mode,
            in->concurrency, in->threads);
    if (in->rate > 0)
        fprintf(f, ", %.1f req/s %s", in->rate, in->poisson ? "poisson" : "fixed");
    fprintf(f, "%s, %.2f s counted\n", in->poll ? ", polling" : "", in->seconds);
    double secs = in->seconds > 0 ? in->seconds : 1;
    fprintf(f, "  requests %llu, %.1f req/s, %.2f MB/s, errors %llu", (unsigned long long)s->requests,
            (double)s->requests / secs, (double)s->bytes / secs / 1e6, (unsigned long long)s->errors);
    if (in->deadline_ms > 0)
        fprintf(f, ", misses %llu (> %.1f ms)", (unsigned long long)s->misses, in->deadline_ms);
    if (s->err_kind[BENCH_ERR_LATE])
        fprintf(f, ", late %llu (answered %d, counted in misses)", (unsigned long long)s->err_kind[BENCH_ERR_LATE],
                BENCH_INFER_LATE_STATUS);
    fprintf(f, "\n");
    hist_line(f, "latency", &s->lat);
    if (in->stream) {
        hist_line(f, "ttft", &s->ttft);
        hist_line(f, "itl", &s->itl);
        fprintf(f, "  tokens %llu, %.1f tok/s in total, %.1f tok/s per stream (mean of %llu)\n",
                (unsigned long long)s->tokens, (double)s->tokens / secs,
                s->streams ? s->stream_rate_sum / (double)s->streams : 0.0, (unsigned long long)s->streams);
    }
    if (s->usage_answers)
        fprintf(f, "  prompt tokens %.1f per request (the server's usage, over %llu answers)\n",
                (double)s->prompt_tokens / (double)s->usage_answers, (unsigned long long)s->usage_answers);
    if (in->rate > 0 && s->backlog_max > 1)
        fprintf(f, "  open loop: up to %llu requests waited for a free connection\n",
                (unsigned long long)s->backlog_max);
    if (s->errors) {
        fprintf(f, "  errors:");
        for (int k = 0; k < BENCH_ERR_N; k++)
            if (s->err_kind[k])
                fprintf(f, " %s %llu", bench_err_names[k], (unsigned long long)s->err_kind[k]);
        for (int i = 0; i < s->n_status; i++)
            fprintf(f, "%s%d: %llu", i ? ", " : " (status ", s->status[i], (unsigned long long)s->status_count[i]);
        if (s->n_status)
            fprintf(f, "%s)", s->status_other ? ", other" : "");
        fprintf(f, "\n");
    }
}

int bench_report_json(const char *path, const bench_run_info *in, const bench_stats *s)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double secs = in->seconds > 0 ? in->seconds : 1;
    fprintf(f, "{\"url\": ");
    bench_json_string(f, in->url);
    fprintf(f, ", \"api\": \"%s\", \"mode\": \"%s\", \"concurrency\": %d, \"threads\": %d, "
               "\"rate\": %.3f, \"arrivals\": \"%s\", \"poll\": %s, \"seconds\": %.4f,\n",
            in->api, in->mode, in->concurrency, in->threads, in->rate, in->poisson ? "poisson" : "fixed",
            in->poll ? "true" : "false", in->seconds);
    /* the workload's sizes, as asked: a reader compares runs of one size */
    if (in->sizes && !strcmp(in->sizes, "sentences"))
        fprintf(f, " \"sentences\": %d,\n", in->sentences);
    else if (in->sizes)
        fprintf(f, " \"prompt_tokens\": %d, \"max_tokens\": %d,\n", in->prompt_tokens, in->max_tokens);
    /* and as the server counted them: usage.prompt_tokens, mean over the answers that gave it (0: none did) */
    fprintf(f, " \"prompt_tokens_mean\": %.3f, \"usage_answers\": %llu,\n",
            s->usage_answers ? (double)s->prompt_tokens / (double)s->usage_answers : 0.0,
            (unsigned long long)s->usage_answers);
    fprintf(f, " \"requests\": %llu, \"errors\": %llu, \"rps\": %.3f, \"misses\": %llu, \"late\": %llu, "
               "\"deadline_ms\": %.3f, \"bytes\": %llu,\n",
            (unsigned long long)s->requests, (unsigned long long)s->errors, (double)s->requests / secs,
            (unsigned long long)s->misses, (unsigned long long)s->err_kind[BENCH_ERR_LATE], in->deadline_ms,
            (unsigned long long)s->bytes);
    fprintf(f, " \"errors_by_kind\": {");
    for (int k = 0; k < BENCH_ERR_N; k++)
        fprintf(f, "%s\"%s\": %llu", k ? ", " : "", bench_err_names[k], (unsigned long long)s->err_kind[k]);
    fprintf(f, "},\n \"errors_by_status\": {");
    for (int i = 0; i < s->n_status; i++)
        fprintf(f, "%s\"%d\": %llu", i ? ", " : "", s->status[i], (unsigned long long)s->status_count[i]);
    if (s->status_other)
        fprintf(f, "%s\"other\": %llu", s->n_status ? ", " : "", (unsigned long long)s->status_other);
    fprintf(f, "},\n \"backlog_max\": %llu,\n \"latency_ms\": ", (unsigned long long)s->backlog_max);
    bench_hist_write_json(f, &s->lat, 1);
    if (in->stream) {
        fprintf(f, ",\n \"ttft_ms\": ");
        bench_hist_write_json(f, &s->ttft, 1);
        fprintf(f, ",\n \"itl_ms\": ");
        bench_hist_write_json(f, &s->itl, 1);
        fprintf(f, ",\n \"tokens\": %llu, \"tokens_per_s\": %.3f, \"stream_tokens_per_s\": %.3f, \"streams\": %llu",
                (unsigned long long)s->tokens, (double)s->tokens / secs,
                s->streams ? s->stream_rate_sum / (double)s->streams : 0.0, (unsigned long long)s->streams);
    }
    fprintf(f, "}\n");
    return fclose(f) ? -1 : 0;
}

/* bench_report.h: printing `hearth bench`'s merged figures (bench_report_print.c). */
#ifndef HEARTH_CLI_BENCH_REPORT_H
#define HEARTH_CLI_BENCH_REPORT_H

#include "bench.h"

#include <stdio.h>

/* What the report says about the run besides its figures. */
typedef struct bench_run_info {
    const char *url, *api, *mode;   /* mode: "closed" or "open" */
    double seconds;                 /* the counted window */
    int concurrency, threads;
    double rate;
    bool poisson, stream, poll;
    double deadline_ms;
    const char *sizes;              /* "sentences", "prompt" or NULL: which sizes the workload had */
    int sentences, prompt_tokens, max_tokens;
} bench_run_info;

void bench_run_info_fill(bench_run_info *info, const bench_cfg *cfg, const char *url, double seconds);
/* Writes s as a JSON string, quoted and escaped (URLs come from the user). */
void bench_json_string(FILE *f, const char *s);
/* The one-screen summary. */
void bench_report_summary(FILE *f, const bench_run_info *info, const bench_stats *s);
/* The --json document; 0, or -1 when the file cannot be written. */
int bench_report_json(const char *path, const bench_run_info *info, const bench_stats *s);
/* The --svg picture: latency by percentile and over the run (bench_svg.c);
 * 0, or -1 when the file cannot be written. */
int bench_report_svg(const char *path, const bench_run_info *info, const bench_stats *s);

#endif

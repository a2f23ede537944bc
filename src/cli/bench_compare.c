/* bench_compare.c: `hearth bench URL --compare URL2`: two servers measured
 * the same way in interleaved rounds, each figure's median over the rounds
 * printed for both, with the ratio URL2 / URL.
 *
 * Interleaving (A B, then B A, ...) spreads whatever else the machine does
 * over both arms; medians keep one disturbed round from deciding the ratio
 * (DESIGN.md: "measure with arms interleaved over several rounds; quote
 * medians and ratios"). Rejected: running the two at once (they would
 * compete for the client's cores and for the machine they share). */
#include "bench.h"
#include "bench_report.h"

#include <stdio.h>
#include <stdlib.h>

/* The figures after F_TTFT50 are a stream's. prompt_tokens_mean is the
 * servers' own count (usage.prompt_tokens): two tokenizers or chat
 * templates make different prompts of the same text, and a tokens/s ratio
 * is read next to it. */
enum { F_RPS, F_P50, F_P99, F_MAX, F_MISSES, F_TTFT50, F_ITL50, F_TOKS, F_PTOK, F_N };
static const char *const fig_names[F_N] = {"rps", "p50_ms", "p99_ms", "max_ms", "misses", "ttft_p50_ms",
                                           "itl_p50_ms", "tokens_per_s", "prompt_tokens_mean"};

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return 0;
    for (int i = 0; i < n; i++)
        s[i] = v[i];
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

static void figures(const bench_stats *s, double seconds, double *f)
{
    double ms = 1e-6, secs = seconds > 0 ? seconds : 1;
    f[F_RPS] = (double)s->requests / secs;
    f[F_P50] = (double)bench_hist_quantile(&s->lat, 0.5) * ms;
    f[F_P99] = (double)bench_hist_quantile(&s->lat, 0.99) * ms;
    f[F_MAX] = (double)s->lat.max * ms;
    f[F_MISSES] = (double)s->misses;
    f[F_TTFT50] = (double)bench_hist_quantile(&s->ttft, 0.5) * ms;
    f[F_ITL50] = (double)bench_hist_quantile(&s->itl, 0.5) * ms;
    f[F_TOKS] = (double)s->tokens / secs;
    f[F_PTOK] = s->usage_answers ? (double)s->prompt_tokens / (double)s->usage_answers : 0.0;
}

int bench_compare(const bench_cfg *a, const bench_cfg *b, const char *url_a, const char *url_b, int rounds,
                  const char *json_path)
{
    const bench_cfg *arm_cfg[2] = {a, b};
    int status = 0, n_figs = a->stream ? F_N : F_TTFT50;
    double *fig = calloc((size_t)rounds * 2 * F_N, sizeof *fig); /* [round][arm][figure] */
    uint64_t errors[2] = {0, 0};
    bench_stats *st = malloc(sizeof *st);
    if (!fig || !st) {
        free(fig);
        free(st);
        return 1;
    }
    printf("hearth bench --compare: A %s, B %s, %d rounds, --api %s, %s loop\n", url_a, url_b, rounds,
           bench_api_name(a->api), a->rate > 0 ? "open" : "closed");
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            int arm = (r % 2) ? 1 - k : k; /* A B, then B A */
            double seconds;
            if (bench_run(arm_cfg[arm], st, &seconds))
                status = 1;
            double *f = &fig[((size_t)r * 2 + (size_t)arm) * F_N];
            figures(st, seconds, f);
            errors[arm] += st->errors;
            printf("  round %d %c: %10.1f req/s  p50 %9.3f  p99 %9.3f  max %9.3f ms  errors %llu", r + 1, "AB"[arm],
                   f[F_RPS], f[F_P50], f[F_P99], f[F_MAX], (unsigned long long)st->errors);
            if (a->deadline_ms > 0)
                printf("  misses %.0f", f[F_MISSES]);
            printf("\n");
        }
    }
    double med[2][F_N];
    for (int arm = 0; arm < 2; arm++)
        for (int i = 0; i < F_N; i++) {
            double *col = malloc((size_t)rounds * sizeof *col);
            if (!col) {
                med[arm][i] = 0;
                continue;
            }
            for (int r = 0; r < rounds; r++)
                col[r] = fig[((size_t)r * 2 + (size_t)arm) * F_N + (size_t)i];
            med[arm][i] = median(col, rounds);
            free(col);
        }
    printf("  median over %d rounds:\n  %-14s %12s %12s %10s\n", rounds, "", "A", "B", "B / A");
    for (int i = 0; i < n_figs; i++)
        printf("  %-14s %12.3f %12.3f %10.3f\n", fig_names[i], med[0][i], med[1][i],
               med[0][i] > 0 ? med[1][i] / med[0][i] : 0.0);
    if (errors[0] || errors[1]) {
        printf("  errors: A %llu, B %llu\n", (unsigned long long)errors[0], (unsigned long long)errors[1]);
        status = 1;
    }
    if (json_path) {
        FILE *f = fopen(json_path, "w");
        if (!f) {
            perror(json_path);
            status = 1;
        } else {
            fprintf(f, "{\"compare\": {\"a\": ");
            bench_json_string(f, url_a);
            fprintf(f, ", \"b\": ");
            bench_json_string(f, url_b);
            fprintf(f, "}, \"rounds\": %d, \"errors\": {\"a\": %llu, \"b\": %llu},\n \"median\": {", rounds, (unsigned long long)errors[0], (unsigned long long)errors[1]);
            for (int arm = 0; arm < 2; arm++) {
                fprintf(f, "%s\"%c\": {", arm ? ", " : "", "ab"[arm]);
                for (int i = 0; i < n_figs; i++)
                    fprintf(f, "%s\"%s\": %.4f", i ? ", " : "", fig_names[i], med[arm][i]);
                fprintf(f, "}");
            }
            fprintf(f, "},\n \"ratio_b_over_a\": {");
            for (int i = 0; i < n_figs; i++)
                fprintf(f, "%s\"%s\": %.4f", i ? ", " : "", fig_names[i],
                        med[0][i] > 0 ? med[1][i] / med[0][i] : 0.0);
            fprintf(f, "},\n \"per_round\": [");
            for (int r = 0; r < rounds; r++)
                for (int arm = 0; arm < 2; arm++) {
                    fprintf(f, "%s{\"round\": %d, \"arm\": \"%c\"", r || arm ? ", " : "", r + 1, "ab"[arm]);
                    for (int i = 0; i < n_figs; i++)
                        fprintf(f, ", \"%s\": %.4f", fig_names[i], fig[((size_t)r * 2 + (size_t)arm) * F_N + (size_t)i]);
                    fprintf(f, "}");
                }
            fprintf(f, "]}\n");
            if (fclose(f))
                status = 1;
        }
    }
    free(fig);
    free(st);
    return status;
}

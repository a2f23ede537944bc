/* bench_svg.c: `hearth bench --svg FILE`: the run's latency as a picture,
 * plain SVG text written here (no plotting dependency).
 *
 * Two panels. Top: latency by percentile, the x axis stretched as
 * log10(1 / (1 - q)) so that 90%, 99%, 99.9% and 99.99% are equally spaced
 * and the tail, where a stall lives, gets as much room as the median (the
 * HdrHistogram plot). Bottom: latency over the run, the mean and the max of
 * each second, by the second a request was scheduled (open loop) or sent.
 * Rejected: a log y axis (a 1 s stall against 5 ms answers is the point, and
 * a log axis flattens it); embedding a script or fonts (the file must open
 * anywhere, even as an attachment to an issue). */
#include "bench_report.h"

#include <math.h>
#include <stdio.h>

#define W 800
#define H 260
#define ML 70 /* left margin, for the axis labels */
#define MT 30
#define PW (W - ML - 20)
#define PH (H - MT - 40)

/* A round step (1, 2 or 5 times a power of ten) for at most 5 grid lines up to top. */
static double grid_step(double top)
{
    double raw = top / 5, mag = pow(10, floor(log10(raw))), n = raw / mag;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
}

static void axes(FILE *f, int y0, const char *title, double ymax)
{
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\">%s</text>\n", ML, y0 + MT - 10, title);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", ML, y0 + MT,
            PW, PH);
    double step = grid_step(ymax);
    for (double v = 0; v <= ymax * 1.0001; v += step) {
        double y = y0 + MT + PH - v / ymax * PH;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>", ML, y, ML + PW, y);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%g ms</text>\n", ML - 4, y + 4, v);
    }
}

int bench_report_svg(const char *path, const bench_run_info *in, const bench_stats *s)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\">\n",
            W, 2 * H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");

    /* top: latency by percentile, up to 99.99% */
    double ymax = (double)s->lat.max * 1e-6;
    if (ymax <= 0)
        ymax = 1;
    char title[256];
    snprintf(title, sizeof title, "latency by percentile: %s, %s loop, %llu requests", in->api, in->mode,
             (unsigned long long)s->lat.count);
    axes(f, 0, title, ymax);
    static const char *const ticks[] = {"0%", "90%", "99%", "99.9%", "99.99%"};
    for (int k = 0; k <= 4; k++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", ML + k * PW / 4,
                MT + PH + 16, ticks[k]);
    fprintf(f, "<polyline fill=\"none\" stroke=\"#1f5fbf\" stroke-width=\"2\" points=\"");
    for (int k = 0; k <= 200 && s->lat.count; k++) {
        double x = 4.0 * k / 200, q = 1 - pow(10, -x);
        double v = (double)bench_hist_quantile(&s->lat, q) * 1e-6;
        fprintf(f, "%.1f,%.1f ", ML + x / 4 * PW, MT + PH - v / ymax * PH);
    }
    fprintf(f, "\"/>\n");

    /* bottom: mean and max of each second */
    int n_sec = 0;
    for (int i = 0; i < BENCH_TIMELINE_S; i++)
        if (s->tl_count[i])
            n_sec = i + 1;
    double tmax = 0;
    for (int i = 0; i < n_sec; i++)
        if (s->tl_max_ms[i] > tmax)
            tmax = s->tl_max_ms[i];
    if (tmax <= 0)
        tmax = 1;
    axes(f, H, "latency over the run, each second: mean (blue) and max (red)", tmax);
    for (int k = 0; k <= 4 && n_sec; k++)
        fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%d s</text>\n", ML + k * PW / 4,
                H + MT + PH + 16, n_sec * k / 4);
    for (int line = 0; line < 2; line++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", line ? "#c0392b" : "#1f5fbf");
        for (int i = 0; i < n_sec; i++) {
            if (!s->tl_count[i])
                continue;
            double v = line ? s->tl_max_ms[i] : s->tl_sum_ms[i] / s->tl_count[i];
            double x = ML + (n_sec > 1 ? (double)i / (n_sec - 1) : 0.5) * PW;
            fprintf(f, "%.1f,%.1f ", x, H + MT + PH - v / tmax * PH);
        }
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "</svg>\n");
    return fclose(f) ? -1 : 0;
}

/* bench_run.c: one `hearth bench` run: starts the threads (bench_conn.c)
 * with their shares of the connections, the rate and --n, shows a progress
 * line while they run when stderr is a terminal, and merges their figures.
 *
 * All threads share one start time, set once every thread has its
 * connections open (bench.h's start handshake) and a millisecond ahead, so
 * that the open loop's schedules line up and the first request is not late
 * because a thread was slow to start or to connect. */
#include "bench.h"
#include "bench_report.h"

#include "base/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* A line on stderr, redrawn each second while the threads run: for a
 * person at a terminal only (a log or a pipe gets none). */
static void progress(bench_thread_arg *targs, int n, uint64_t start, uint64_t count_from)
{
    for (;;) {
        int live = 0;
        uint64_t ok = 0, bad = 0;
        for (int i = 0; i < n; i++) {
            live += !atomic_load(&targs[i].finished);
            ok += atomic_load_explicit(&targs[i].done_ok, memory_order_relaxed);
            bad += atomic_load_explicit(&targs[i].done_err, memory_order_relaxed);
        }
        if (!live)
            break;
        uint64_t now = hearth_now_ns();
        double t = now > start ? (double)(now - start) * 1e-9 : 0, c = now > count_from ? (double)(now - count_from) * 1e-9 : 0;
        fprintf(stderr, "\r  %6.1f s%s  %llu answers, %.0f/s, %llu errors   ", t, now < count_from ? " (warm-up)" : "",
                (unsigned long long)ok, c > 0 ? (double)ok / c : 0.0, (unsigned long long)bad);
        usleep(200000);
    }
    fprintf(stderr, "\r%72s\r", "");
}

int bench_run(const bench_cfg *cfg, bench_stats *total, double *seconds)
{
    int threads = cfg->threads, status = 0, started = 0;
    bench_thread_arg *targs = calloc((size_t)threads, sizeof *targs);
    bench_stats *tstats = malloc((size_t)threads * sizeof *tstats);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    bench_stats_init(total);
    *seconds = 0;
    if (!targs || !tstats || !tids) {
        fprintf(stderr, "hearth bench: out of memory\n");
        status = -1;
        goto done;
    }
    for (int i = 0; i < threads; i++) {
        bench_thread_arg *a = &targs[i];
        bench_stats_init(&tstats[i]);
        a->cfg = cfg;
        a->index = i;
        a->conns = cfg->concurrency / threads + (i < cfg->concurrency % threads);
        a->rate = cfg->rate / threads;
        a->n = cfg->n ? cfg->n / threads + (i < cfg->n % threads) : 0;
        a->stats = &tstats[i];
        if (cfg->n && !a->n) {
            atomic_store(&a->finished, 1); /* more threads than requests: nothing to do */
        } else if (pthread_create(&tids[i], NULL, bench_thread_main, a)) {
            fprintf(stderr, "hearth bench: could not start thread %d\n", i);
            status = -1;
            break;
        }
        started = i + 1;
    }
    for (int i = 0; i < started; i++) { /* a thread with nothing to do was marked finished above */
        while (!atomic_load(&targs[i].connected) && !atomic_load(&targs[i].finished))
            usleep(50);
    }
    /* a moment for the threads to see go, so the schedule's first request is not late */
    uint64_t start = hearth_now_ns() + 1000000;
    uint64_t count_from = start + (uint64_t)(cfg->warmup_s * 1e9);
    uint64_t end = count_from + (uint64_t)(cfg->duration_s * 1e9);
    for (int i = 0; i < threads; i++) {
        targs[i].start_ns = start;
        targs[i].count_from_ns = count_from;
        targs[i].end_ns = end;
        atomic_store(&targs[i].go, 1);
    }
    if (isatty(2))
        progress(targs, started, start, count_from);
    for (int i = 0; i < started; i++) {
        if (cfg->n && !targs[i].n)
            continue;
        pthread_join(tids[i], NULL);
        if (targs[i].rc) {
            fprintf(stderr, "hearth bench: thread %d: %s\n", i, targs[i].err);
            status = -1;
        }
        bench_stats_merge(total, &tstats[i]);
    }
    *seconds = cfg->n ? (total->t_last_ns > total->t_first_ns ? (double)(total->t_last_ns - total->t_first_ns) * 1e-9 : 0)
                      : cfg->duration_s;
done:
    free(targs);
    free(tstats);
    free(tids);
    return status;
}

void bench_run_info_fill(bench_run_info *info, const bench_cfg *cfg, const char *url, double seconds)
{
    *info = (bench_run_info){.url = url, .api = bench_api_name(cfg->api), .mode = cfg->rate > 0 ? "open" : "closed",
                             .seconds = seconds, .concurrency = cfg->concurrency, .threads = cfg->threads,
                             .rate = cfg->rate, .poisson = cfg->poisson, .poll = cfg->poll, .stream = cfg->stream,
                             .deadline_ms = cfg->deadline_ms, .sentences = cfg->sentences,
                             .prompt_tokens = cfg->prompt_tokens, .max_tokens = cfg->max_tokens};
    if (cfg->api == BENCH_EMBEDDINGS || cfg->api == BENCH_TEI)
        info->sizes = "sentences";
    else if (cfg->api == BENCH_COMPLETION || cfg->api == BENCH_CHAT)
        info->sizes = "prompt";
}

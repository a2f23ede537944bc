/* run_bench.c: `hearth run --bench` and `hearth run --dump-logits`.
 *
 * --bench measures what llama-bench measures, the same way, so the numbers
 * can be set side by side: pp N is one prefill of N random valid tokens
 * into an empty cache (in forward passes of n_batch tokens); tg N is N
 * single-token decode steps, also from an empty cache; with --parallel P,
 * "tg N xP" is N steps that each decode P sequences (slots) in one forward
 * pass of P tokens, as continuous batching does, its t/s summed over the P
 * sequences (ideally ~P times tg's: a step reads the weights once). Every
 * test runs on the batching scheduler, the one generation loop that `hearth
 * run` and `hearth serve` use (run_sched.c), with greedy sampling, so the
 * figures include its per-step work (an argmax, the stop check); before
 * 2026-12-02 they called the forward pass directly, and RESULTS.md has the two
 * side by side (within noise). Each test runs once
 * untimed (page faults, pool start-up; twice on a device that records
 * passes, so no timed run holds a graph's capture: before 2026-12-03 the
 * first timed pp512 on the H200 did, the spread of -r 3 was +-25%), then
 * -r times; the table shows the
 * mean and sample standard deviation of tokens/s over the runs. For tg it
 * adds the weight bytes read per second (hearth_llama_weight_bytes x tok/s)
 * and, below the table, the machine's measured read bandwidth, because a
 * decode step is bound by reading the weights once: the ratio says how far
 * from the memory's limit the kernels are.
 *
 * --dump-logits runs the given ids as one prefill with every position's
 * logits requested and writes them raw (float32, little-endian on every
 * machine hearth builds for), for parity tests against a reference forward
 * pass; they ask for --cache-type f32, the default f16 cache being rounded. */
#include "run.h"

#include "base/clock.h"
#include "base/membench.h"
#include "engine/dtype.h"
#include "models/gguf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMBENCH_BYTES (1u << 30)

typedef struct stats {
    double mean, sd;
} stats;

static stats stats_of(const double *x, int n)
{
    stats s = {0, 0};
    for (int i = 0; i < n; i++)
        s.mean += x[i];
    s.mean /= n;
    for (int i = 0; i < n && n > 1; i++)
        s.sd += (x[i] - s.mean) * (x[i] - s.mean);
    s.sd = n > 1 ? sqrt(s.sd / (n - 1)) : 0;
    return s;
}

static void discard_text(hearth_gen_req *req, const char *text, size_t n, int32_t token, const hearth_gen_probs *probs)
{
    (void)req, (void)text, (void)n, (void)token, (void)probs;
}

/* One bench test on the scheduler: P requests from empty slots, each with
 * prompt n_prompt tokens (sequence s from tokens[7 s % n_tokens]) and
 * n_predict greedy tokens past any end id. pp N is one request of prompt N
 * and 1 token (prefill passes of n_batch, then one argmax); tg N is prompt 1
 * and N tokens, N single-token passes in all (the prompt's pass gives the
 * first token's logits, as the old loop's first decode step did); tg N xP is
 * P of those, admitted together, so each of the N passes holds P tokens.
 * Seconds from the submit to the last end. */
static int timed(hearth_gen_sched *sched, const int32_t *tokens, int64_t n_tokens, int64_t n_prompt, int32_t n_predict,
                 int32_t P, hearth_gen_req *reqs, hearth_gen_req **rp, run_end *ends, double *seconds, hearth_err *err)
{
    for (int32_t s = 0; s < P; s++) {
        hearth_gen_req *r = &reqs[s];
        memset(r, 0, sizeof *r);
        hearth_sampler_params_default(&r->sampling);
        r->sampling.temperature = 0;
        r->prompt = tokens + (n_prompt == 1 ? (7 * (int64_t)s) % n_tokens : 0);
        r->n_prompt = n_prompt;
        r->n_predict = n_predict;
        r->ignore_eos = true;
        r->on_text = discard_text;
        rp[s] = r;
    }
    uint64_t t0 = hearth_now_ns();
    int rc = run_sched_wait(sched, rp, ends, P, err);
    if (rc)
        return rc;
    uint64_t t1 = t0;
    for (int32_t s = 0; s < P; s++) {
        if (ends[s].status)
            return hearth_err_set(err, ends[s].status, "%s", ends[s].msg);
        if (ends[s].done_ns > t1)
            t1 = ends[s].done_ns;
    }
    *seconds = (double)(t1 - t0) / 1e9;
    return 0;
}

static void human_count(char *out, size_t n, double x)
{
    if (x >= 1e9)
        snprintf(out, n, "%.2f B", x / 1e9);
    else if (x >= 1e6)
        snprintf(out, n, "%.2f M", x / 1e6);
    else
        snprintf(out, n, "%.2f K", x / 1e3);
}

/* llama-bench's short model label: "llama 7B", "qwen2 494M", "llama 293K". */
static void short_count(char *out, size_t n, double x)
{
    if (x >= 1e9)
        snprintf(out, n, "%.0fB", x / 1e9);
    else if (x >= 1e6)
        snprintf(out, n, "%.0fM", x / 1e6);
    else
        snprintf(out, n, "%.0fK", x / 1e3);
}

static void human_bytes(char *out, size_t n, double x)
{
    if (x >= (double)(1u << 30))
        snprintf(out, n, "%.2f GiB", x / (double)(1u << 30));
    else if (x >= (double)(1u << 20))
        snprintf(out, n, "%.2f MiB", x / (double)(1u << 20));
    else
        snprintf(out, n, "%.2f KiB", x / 1024.0);
}

static int parse_count(const char *flag, const char *v, int def, int *out)
{
    if (!v) {
        *out = def;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > 1000000) {
        fprintf(stderr, "hearth run --bench: %s: invalid value '%s' (expected a token count)\n", flag, v);
        return 2;
    }
    *out = (int)x;
    return 0;
}

int run_bench(const run_opts *o, hearth_llama *m, hearth_pool *pool)
{
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(m);
    int pp, tg = o->n_predict == RUN_UNSET ? 128 : o->n_predict;
    if (parse_count("-p", o->prompt, 512, &pp))
        return 2;
    if (tg < 0) {
        fprintf(stderr, "hearth run --bench: -n must be >= 0\n");
        return 2;
    }
    int64_t n_max = pp > tg ? pp : tg;
    hearth_err err = {0};
    int status = 1;
    double *tps = calloc((size_t)o->reps, sizeof *tps);
    int32_t *tokens = malloc((size_t)(n_max ? n_max : 1) * sizeof *tokens);
    int32_t P = o->parallel > 1 ? o->parallel : 1;
    hearth_gen_req *reqs = calloc((size_t)P, sizeof *reqs);
    hearth_gen_req **rp = calloc((size_t)P, sizeof *rp);
    run_end *ends = calloc((size_t)P, sizeof *ends);
    /* one position more than the longest test: the scheduler keeps room for a generated token */
    int64_t n_ctx = (n_max ? n_max : 1) + 1;
    run_model rm = {.m = m, .pool = pool, .kv = hearth_kv_new_typed(m, P, n_ctx, o->kv_type, &err)};
    hearth_gen_sched *sched = NULL;
    if (rm.kv) {
        hearth_gen_batch_model bm;
        run_model_table(&rm, P, n_ctx, &bm);
        sched = run_sched_new(&bm, o, pool, &err);
    }
    if (!tps || !tokens || !reqs || !rp || !ends || !sched) {
        fprintf(stderr, "hearth run --bench: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto done;
    }
    /* random valid ids, the same every run (xorshift64*) */
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int64_t i = 0; i < n_max; i++) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        tokens[i] = (int32_t)((x * 0x2545F4914F6CDD1Dull >> 33) % (uint64_t)hp->n_vocab);
    }
    const hearth_gguf *g = hearth_llama_gguf(m);
    double params = 0, bytes = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const hearth_gguf_tensor *t = &g->tensors[i];
        params += (double)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        bytes += (double)t->nbytes;
    }
    char name[64], size[32], count[32], label[32];
    human_count(count, sizeof count, params);
    short_count(label, sizeof label, params);
    human_bytes(size, sizeof size, bytes);
    snprintf(name, sizeof name, "%s %s", hp->arch, label);
    const hearth_dtype_info *wt = hearth_dtype_get(hearth_llama_weight_type(m));
    double wbytes = (double)hearth_llama_weight_bytes(m);
    printf("| %-24s | %10s | %10s | %-6s | %7s | %8s | %20s | %8s |\n", "model", "size", "params", "type", "threads",
           "test", "t/s", "GB/s");
    printf("| %.24s | ---------: | ---------: | ------ | ------: | -------: | -------------------: | -------: |\n",
           "------------------------------");
    double tg_mean = 0;
    const char *each_env = getenv("HEARTH_BENCH_EACH");
    const bool each = each_env && strcmp(each_env, "1") == 0;
    /* the threads column: the compute threads, or the device that computes */
    char where[16];
    if (o->dev && !o->dev->caps.host_memory)
        snprintf(where, sizeof where, "%s", o->dev->caps.name);
    else
        snprintf(where, sizeof where, "%d", hearth_pool_size(pool));
    for (int test = 0; test < 3; test++) {
        int n = test == 0 ? pp : tg;
        if (n == 0 || (test == 2 && P == 1))
            continue;
        /* untimed: one run, two where the device records passes (the first
         * sight of a shape runs op by op, the second is captured: dev.h;
         * the scheduler's warm-up has recorded the decode steps and a lone
         * sequence's runs of each length already, run_sched.c) */
        const int warm = o->dev && o->dev->ops->graph_begin ? 2 : 1;
        for (int r = -warm; r < o->reps; r++) {
            double sec;
            int rc = test == 0 ? timed(sched, tokens, n_max, n, 1, 1, reqs, rp, ends, &sec, &err)
                               : timed(sched, tokens, n_max, 1, n, test == 2 ? P : 1, reqs, rp, ends, &sec, &err);
            if (rc) {
                fprintf(stderr, "hearth run --bench: %s\n", err.msg);
                goto done;
            }
            if (r >= 0)
                tps[r] = sec > 0 ? (test == 2 ? P : 1) * n / sec : 0;
            if (r >= 0 && each) /* HEARTH_BENCH_EACH=1: every timed rep, to see a spread's shape */
                fprintf(stderr, "hearth run --bench: test %d rep %d: %.2f t/s\n", test, r, tps[r]);
        }
        stats s = stats_of(tps, o->reps);
        char test_name[32], ts[48], gbs[16] = "-";
        if (test == 2)
            snprintf(test_name, sizeof test_name, "tg%d x%d", n, P);
        else
            snprintf(test_name, sizeof test_name, "%s%d", test == 0 ? "pp" : "tg", n);
        snprintf(ts, sizeof ts, "%.2f ± %.2f", s.mean, s.sd);
        if (test == 1) {
            snprintf(gbs, sizeof gbs, "%.2f", wbytes * s.mean / 1e9);
            tg_mean = s.mean;
        }
        /* "±" is two bytes and one column: pad by one more */
        printf("| %-24s | %10s | %10s | %-6s | %7s | %8s | %21s | %8s |\n", name, size, count,
               wt ? wt->name : "?", where, test_name, ts, gbs);
        fflush(stdout);
    }
    if (o->dev && o->dev->ops->copy_gbps) {
        /* a device's own memory: the weights stream from there */
        double bw = o->dev->ops->copy_gbps(o->dev, MEMBENCH_BYTES, &err);
        if (bw > 0) {
            printf("\ndevice copy bandwidth (%s, 1 GiB, read + write): %.0f GB/s", o->dev->caps.name, bw);
            if (tg_mean > 0)
                printf("; tg reads weights at %.0f%% of it", 100.0 * wbytes * tg_mean / 1e9 / bw);
            printf("\n");
        } else {
            fprintf(stderr, "hearth run --bench: device bandwidth: %s\n", err.msg);
        }
    } else {
        double mem = hearth_membench_read_gbs(MEMBENCH_BYTES, 3, pool, &err);
        if (mem > 0) {
            printf("\nmemory read bandwidth (1 GiB, %d threads): %.2f GB/s", hearth_pool_size(pool), mem);
            double pct = 100.0 * wbytes * tg_mean / 1e9 / mem;
            if (tg_mean > 0)
                printf("; tg reads weights at %.0f%% of it", pct);
            /* Seen on a Zen 5 VM: the read loop measures ~37 GB/s while F16
             * decode streams its weights at ~50 (RESULTS.md, 2026-12-01; a
             * prefetching loop and four streams per thread measured no more). */
            if (tg_mean > 0 && pct > 100)
                printf(" (over 100%%: the read loop under-measures this machine)");
            printf("\n");
        } else {
            fprintf(stderr, "hearth run --bench: memory benchmark: %s\n", err.msg);
        }
    }
    status = 0;
done:
    hearth_gen_sched_free(sched);
    hearth_kv_free(rm.kv);
    free(tps);
    free(tokens);
    free(reqs);
    free(rp);
    free(ends);
    return status;
}

static int parse_ids(const char *s, int64_t n_vocab, int32_t **out, int64_t *n_out)
{
    int64_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    if (!ids)
        return 1;
    int64_t k = 0;
    const char *p = s;
    for (; k < n; k++) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || (*end && *end != ',') || v < 0 || v >= n_vocab) {
            fprintf(stderr, "hearth run: --tokens: id %lld ('%.*s') is not a token id in [0, %lld)\n", (long long)k,
                    (int)strcspn(p, ","), p, (long long)n_vocab);
            free(ids);
            return 2;
        }
        ids[k] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    *out = ids;
    *n_out = n;
    return 0;
}

int run_dump_logits(const run_opts *o, hearth_llama *m, hearth_pool *pool)
{
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(m);
    int32_t *ids = NULL, *slots = NULL;
    bool *want = NULL;
    float *logits = NULL;
    hearth_kv *kv = NULL;
    FILE *f = NULL;
    int64_t n = 0;
    hearth_err err = {0};
    int status = parse_ids(o->tokens, hp->n_vocab, &ids, &n);
    if (status)
        goto done;
    status = 1;
    slots = calloc((size_t)n, sizeof *slots);
    want = malloc((size_t)n * sizeof *want);
    logits = malloc((size_t)n * (size_t)hp->n_vocab * sizeof *logits);
    kv = hearth_kv_new_typed(m, 1, n, o->kv_type, &err);
    if (!slots || !want || !logits || !kv) {
        fprintf(stderr, "hearth run: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        want[i] = true;
    hearth_llama_batch b = {.n = (int32_t)n, .tokens = ids, .slot = slots, .want_logits = want};
    if (hearth_llama_forward(m, kv, pool, &b, logits, &err)) {
        fprintf(stderr, "hearth run: %s\n", err.msg);
        goto done;
    }
    f = fopen(o->dump_logits, "wb");
    size_t count = (size_t)n * (size_t)hp->n_vocab;
    if (!f || fwrite(logits, sizeof *logits, count, f) != count) {
        fprintf(stderr, "hearth run: %s: %s\n", o->dump_logits, strerror(errno));
        goto done;
    }
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "hearth run: %s: %s\n", o->dump_logits, strerror(errno));
        goto done;
    }
    f = NULL;
    fprintf(stderr, "wrote %s: float32 logits [%lld tokens][%lld vocab]\n", o->dump_logits, (long long)n,
            (long long)hp->n_vocab);
    status = 0;
done:
    if (f)
        fclose(f);
    hearth_kv_free(kv);
    free(ids);
    free(slots);
    free(want);
    free(logits);
    return status;
}

/* embed.c: `hearth embed`: sentence embeddings from the command line, and
 * `hearth embed --bench`, the encoder's throughput and FLOP rate.
 *
 *   hearth embed -m MODEL [options] TEXT...   prints one JSON object:
 *     {"model", "dim", "normalized", "tokens": [[ids]...], "embeddings": [[...]...]}
 *   with every text in one forward pass (--alone: one pass per text), the
 *   token ids being exactly what the model was fed, so a reference can be
 *   run on the same ids.
 *   hearth embed --bench -m MODEL   batches of 1, 8 and 32 ten-word sentences:
 *     sentences/s and the achieved GFLOP/s of the forward pass (FLOPs from
 *     hearth_bert_flops), next to the measured peak of the same threads;
 *     peak and batches are interleaved over 3 rounds and medians quoted.
 *
 * Floats are printed with 9 significant digits, enough to round-trip f32.
 * Rejected: printing through cJSON (its number format drops digits past
 * 15 significant and allocates a node per float of every vector). */
#include "cli.h"
#include "opts.h"

#include "base/clock.h"
#include "base/pool.h"
#include "engine/cpu/matmul.h"
#include "models/bert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hearth_cli_split_args(const opt *opts, int n_opts, int argc, char **argv, char **flags, int *n_flags,
                          char **positional, int *n_positional)
{
    *n_flags = *n_positional = 0;
    flags[(*n_flags)++] = argv[0];
    bool rest = false;
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (rest || arg[0] != '-' || !arg[1]) {
            positional[(*n_positional)++] = argv[a];
            continue;
        }
        if (!strcmp(arg, "--")) {
            rest = true;
            continue;
        }
        flags[(*n_flags)++] = argv[a];
        if (strchr(arg, '='))
            continue;
        const char *name = arg[1] == '-' ? arg + 2 : NULL;
        for (int i = 0; i < n_opts; i++) {
            bool match = name ? !strcmp(opts[i].name, name) : (!arg[2] && opts[i].short_name == arg[1]);
            if (match && opts[i].kind != OPT_BOOL && a + 1 < argc)
                flags[(*n_flags)++] = argv[++a];
        }
    }
    return 0;
}

static int parse_dtype(const char *s, enum hearth_bert_dtype *out)
{
    if (!strcmp(s, "f32"))
        *out = HEARTH_BERT_F32;
    else if (!strcmp(s, "bf16"))
        *out = HEARTH_BERT_BF16;
    else if (!strcmp(s, "int8"))
        *out = HEARTH_BERT_INT8;
    else
        return -1;
    return 0;
}

static void print_floats(const float *v, int64_t n)
{
    putchar('[');
    for (int64_t i = 0; i < n; i++)
        printf("%s%.9g", i ? "," : "", (double)v[i]);
    putchar(']');
}

static int embed_texts(hearth_bert *m, hearth_pool *pool, const char *model, char **texts, int n, bool normalize,
                       bool alone, bool truncate)
{
    int64_t dim = hearth_bert_dim(m);
    hearth_ids *ids = calloc((size_t)n, sizeof *ids);
    const int32_t **ptrs = calloc((size_t)n, sizeof *ptrs);
    int32_t *lens = calloc((size_t)n, sizeof *lens);
    float *out = malloc((size_t)n * (size_t)dim * sizeof *out);
    int status = 1;
    hearth_err err = {0};
    if (!ids || !ptrs || !lens || !out) {
        fprintf(stderr, "hearth embed: out of memory\n");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        hearth_ids_init(&ids[i], (size_t)hearth_bert_max_tokens(m));
        if (hearth_bert_tokenize(m, texts[i], strlen(texts[i]),
                                 truncate ? HEARTH_BERT_TRUNCATE_RIGHT : HEARTH_BERT_NO_TRUNCATE, &ids[i], &err)) {
            fprintf(stderr, "hearth embed: text %d: %s\n", i + 1, err.msg);
            goto done;
        }
        ptrs[i] = ids[i].v;
        lens[i] = (int32_t)ids[i].n;
    }
    int rc = 0;
    if (alone) {
        for (int i = 0; i < n && rc == 0; i++)
            rc = hearth_bert_embed(m, pool, 1, &ptrs[i], &lens[i], normalize, out + (size_t)i * (size_t)dim, &err);
    } else {
        rc = hearth_bert_embed(m, pool, n, ptrs, lens, normalize, out, &err);
    }
    if (rc) {
        fprintf(stderr, "hearth embed: %s\n", err.msg);
        goto done;
    }
    printf("{\"model\":\"");
    for (const char *p = model; *p; p++)
        printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
    printf("\",\"dim\":%lld,\"normalized\":%s,\"tokens\":[", (long long)dim, normalize ? "true" : "false");
    for (int i = 0; i < n; i++) {
        printf("%s[", i ? "," : "");
        for (size_t j = 0; j < ids[i].n; j++)
            printf("%s%d", j ? "," : "", (int)ids[i].v[j]);
        putchar(']');
    }
    printf("],\"embeddings\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            putchar(',');
        print_floats(out + (size_t)i * (size_t)dim, dim);
    }
    printf("]}\n");
    status = 0;
done:
    for (int i = 0; ids && i < n; i++)
        hearth_ids_deinit(&ids[i]);
    free(ids);
    free(ptrs);
    free(lens);
    free(out);
    return status;
}

/* Ten words from a fixed list, varied by i, so every batch size sees the same
 * kind of sentence and the numbers are comparable run to run. */
static void bench_sentence(int i, char *buf, size_t cap)
{
    static const char *const words[] = {
        "the", "quick", "river", "carried", "small", "boats", "toward", "an", "old", "harbor", "where",
        "fishermen", "mended", "their", "nets", "under", "grey", "skies", "while", "children", "played",
        "near", "wooden", "docks", "and", "gulls", "circled", "above", "quiet", "houses", "of", "stone",
    };
    size_t nw = sizeof words / sizeof words[0], at = 0;
    buf[0] = 0;
    for (int j = 0; j < 10; j++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", j ? " " : "", words[((size_t)i * 7 + (size_t)j * 5) % nw]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Seconds per forward pass of the first n sequences, over about `seconds`
 * (at least 3 passes), after one warm-up pass; < 0 on error. */
static double time_batch(hearth_bert *m, hearth_pool *pool, int n, const int32_t *const *ids, const int32_t *lens,
                         float *out, double seconds)
{
    hearth_err err = {0};
    if (hearth_bert_embed(m, pool, n, ids, lens, false, out, &err)) {
        fprintf(stderr, "hearth embed: %s\n", err.msg);
        return -1;
    }
    int runs = 0;
    uint64_t t0 = hearth_now_ns(), t1 = t0;
    while (runs < 3 || (double)(t1 - t0) * 1e-9 < seconds) {
        if (hearth_bert_embed(m, pool, n, ids, lens, false, out, &err)) {
            fprintf(stderr, "hearth embed: %s\n", err.msg);
            return -1;
        }
        runs++;
        t1 = hearth_now_ns();
    }
    return (double)(t1 - t0) * 1e-9 / runs;
}

/* Rounds of (peak, batch 1, batch 8, batch 32), interleaved so that whatever
 * else runs on the machine weighs on the peak and the batches alike; the
 * report quotes medians over the rounds. */
static int bench(hearth_bert *m, hearth_pool *pool, double seconds)
{
    enum { MAX_BATCH = 32, ROUNDS = 3, N_BATCHES = 3 };
    static const int batches[N_BATCHES] = {1, 8, MAX_BATCH};
    hearth_ids ids[MAX_BATCH];
    const int32_t *ptrs[MAX_BATCH];
    int32_t lens[MAX_BATCH];
    hearth_err err = {0};
    int status = 1;
    double peak[ROUNDS], per[N_BATCHES][ROUNDS];
    float *out = malloc((size_t)MAX_BATCH * (size_t)hearth_bert_dim(m) * sizeof *out);
    for (int i = 0; i < MAX_BATCH; i++)
        hearth_ids_init(&ids[i], (size_t)hearth_bert_max_tokens(m));
    if (!out)
        goto done;
    for (int i = 0; i < MAX_BATCH; i++) {
        char text[256];
        bench_sentence(i, text, sizeof text);
        if (hearth_bert_tokenize(m, text, strlen(text), HEARTH_BERT_TRUNCATE_RIGHT, &ids[i], &err)) {
            fprintf(stderr, "hearth embed: %s\n", err.msg);
            goto done;
        }
        ptrs[i] = ids[i].v;
        lens[i] = (int32_t)ids[i].n;
    }
    for (int r = 0; r < ROUNDS; r++) {
        peak[r] = hearth_cpu_peak_gflops(pool);
        for (int b = 0; b < N_BATCHES; b++)
            if ((per[b][r] = time_batch(m, pool, batches[b], ptrs, lens, out, seconds / ROUNDS)) < 0)
                goto done;
    }
    double peak_med = median(peak, ROUNDS);
    printf("threads %d, kernels %s, peak %.1f GFLOP/s (measured f32 FMA, median of %d rounds)\n",
           hearth_pool_size(pool), hearth_cpu_isa_name(hearth_cpu_matmul_isa()), peak_med, ROUNDS);
    for (int b = 0; b < N_BATCHES; b++) {
        int n = batches[b];
        int64_t tokens = 0;
        for (int i = 0; i < n; i++)
            tokens += lens[i];
        double t = median(per[b], ROUNDS), gflops = hearth_bert_flops(m, n, lens) / t * 1e-9;
        printf("batch %2d: %4lld tokens, %8.1f sentences/s, %7.2f ms/batch, %6.1f GFLOP/s, %5.1f%% of peak\n", n,
               (long long)tokens, n / t, t * 1e3, gflops, 100.0 * gflops / peak_med);
    }
    status = 0;
done:
    for (int i = 0; i < MAX_BATCH; i++)
        hearth_ids_deinit(&ids[i]);
    free(out);
    return status;
}

int hearth_cmd_embed(int argc, char **argv)
{
    const char *model = NULL, *dtype_name = "f32", *normalize_mode = "auto";
    int threads = 0;
    bool alone = false, truncate = false, do_bench = false;
    int bench_ms = 3000;
    const opt opts[] = {
        {"model", 'm', OPT_STR, &model, "PATH", "a sentence-transformers folder or a bert GGUF file (required)"},
        {"dtype", 0, OPT_STR, &dtype_name, "f32|bf16|int8", "weight type to compute with (f32: as stored)"},
        {"normalize", 0, OPT_STR, &normalize_mode, "auto|on|off", "L2-normalize (auto: as the model's config says)"},
        {"alone", 0, OPT_BOOL, &alone, NULL, "run each text in its own forward pass instead of one batch"},
        {"truncate", 0, OPT_BOOL, &truncate, NULL, "cut texts longer than the model's limit instead of failing"},
        {"threads", 't', OPT_INT, &threads, "N", "compute threads (0: one per physical core)"},
        {"bench", 0, OPT_BOOL, &do_bench, NULL, "measure sentences/s and GFLOP/s for batches of 1, 8 and 32"},
        {"bench-ms", 0, OPT_INT, &bench_ms, "MS", "time spent on each batch size with --bench, over all rounds (3000)"},
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    char **flags = calloc((size_t)argc + 1, sizeof *flags), **texts = calloc((size_t)argc + 1, sizeof *texts);
    int n_flags, n_texts, status = 2;
    hearth_bert *m = NULL;
    hearth_pool *pool = NULL;
    if (!flags || !texts)
        goto done;
    hearth_cli_split_args(opts, n_opts, argc, argv, flags, &n_flags, texts, &n_texts);
    int rc = opts_parse(opts, n_opts, n_flags, flags, "hearth embed -m MODEL [options] TEXT...",
                        "Prints the embeddings of the texts as JSON, or with --bench the encoder's throughput.");
    if (rc) {
        status = rc == 1 ? 0 : 2;
        goto done;
    }
    enum hearth_bert_dtype dtype;
    if (!model || parse_dtype(dtype_name, &dtype) || (!do_bench && n_texts == 0) ||
        (strcmp(normalize_mode, "auto") && strcmp(normalize_mode, "on") && strcmp(normalize_mode, "off"))) {
        fprintf(stderr, "hearth embed: need -m MODEL, --dtype f32|bf16|int8, --normalize auto|on|off and at least one "
                        "TEXT (or --bench); see --help\n");
        goto done;
    }
    hearth_err err = {0};
    if (hearth_bert_open(&m, model, dtype, &err)) {
        fprintf(stderr, "hearth embed: %s\n", err.msg);
        status = 1;
        goto done;
    }
    pool = hearth_pool_new(threads);
    bool normalize = !strcmp(normalize_mode, "auto") ? hearth_bert_normalizes(m) : !strcmp(normalize_mode, "on");
    status = do_bench ? bench(m, pool, bench_ms * 1e-3)
                      : embed_texts(m, pool, model, texts, n_texts, normalize, alone, truncate);
done:
    hearth_pool_free(pool);
    hearth_bert_close(m);
    free(flags);
    free(texts);
    return status;
}

/* bench_matmul.c: speed of hearth_cpu_matmul per weight type, on the shapes
 * of a llama ~110M model (dim 768, FFN 2048, 12 layers, vocab 32000).
 *
 *   build/bench/bench_matmul [type ...] [--isa scalar|avx2|avx512] [--threads N]
 *
 * Prints, per type:
 *   - decode: M = 1 through all 12 layers' matrices in turn (4 x 768x768,
 *     2 x 2048x768, 768x2048 per layer, ~85M weights: larger than L3, so the
 *     weights stream from memory as in a real decode step), in GB/s of
 *     weights read, and the same for the 32000x768 output head alone;
 *   - prefill: M = 128 through the first two layers, in GFLOP/s (2 M N K / s);
 *   - batched decode: M = 1, 2, 4, 8 through all 12 layers, ms per pass and
 *     per call (84 calls), and each M's time over M = 1's (continuous
 *     batching runs one pass with M = live sequences: ideally ~1x).
 * and first the machine's streaming read bandwidth (1 GiB, all threads) and
 * FMA peak, to judge the figures against. Best of several runs; timings are
 * noisy on shared cores, so compare arms run back to back.
 *
 * Rejected: timing asserts in the unit tests (shared cores make them flaky). */
#include "base/clock.h"
#include "base/pool.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LAYERS = 12, DIM = 768, FFN = 2048, VOCAB = 32000, MATS = 7 };
/* prefill is compute-bound: two layers are enough, and leave time for more repetitions */
enum { PREFILL_LAYERS = 2 };
static const int64_t SHAPE_N[MATS] = {DIM, DIM, DIM, DIM, FFN, FFN, DIM};
static const int64_t SHAPE_K[MATS] = {DIM, DIM, DIM, DIM, DIM, DIM, FFN};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

typedef struct read_job {
    const uint64_t *buf;
    int64_t words;
    uint64_t sink[64];
} read_job;

static void read_task(void *ctx, int64_t t, int64_t n)
{
    read_job *j = ctx;
    int64_t per = j->words / n, w0 = t * per;
    const uint64_t *p = j->buf + w0;
    uint64_t a[8] = {0};
    for (int64_t i = 0; i < per; i += 8)
        for (int l = 0; l < 8; l++)
            a[l] += p[i + l];
    j->sink[t % 64] = a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

static double read_bandwidth(hearth_pool *pool)
{
    size_t bytes = (size_t)1 << 30;
    read_job j = {.words = (int64_t)(bytes / 8)};
    uint64_t *buf = malloc(bytes);
    if (!buf)
        return 0;
    memset(buf, 1, bytes);
    j.buf = buf;
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        uint64_t t0 = hearth_now_ns();
        hearth_pool_run(pool, read_task, &j, hearth_pool_size(pool));
        double s = (double)(hearth_now_ns() - t0) / 1e9;
        best = s < best ? s : best;
    }
    free(buf);
    return (double)bytes / best / 1e9;
}

typedef struct model {
    hearth_dtype t;
    void *w[LAYERS][MATS], *head;
    size_t rb[MATS], head_rb, bytes;
} model;

static void *make(hearth_dtype t, int64_t N, int64_t K, size_t *rb)
{
    hearth_dtype_row_bytes(t, K, rb);
    char *w = malloc((size_t)N * *rb);
    float *row = malloc((size_t)K * sizeof *row);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            row[k] = frand();
        hearth_quant_quantize_row(t, row, w + (size_t)n * *rb, K);
    }
    free(row);
    return w;
}

static double run_layers(hearth_cpu_isa isa, hearth_pool *pool, const model *m, int layers, const float *x,
                         int64_t M, float *y, int reps)
{
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = hearth_now_ns();
        for (int l = 0; l < layers; l++)
            for (int i = 0; i < MATS; i++)
                hearth_cpu_matmul_on(isa, pool, m->t, m->w[l][i], m->rb[i], SHAPE_N[i], SHAPE_K[i], x,
                                     SHAPE_K[i], M, y, SHAPE_N[i]);
        double s = (double)(hearth_now_ns() - t0) / 1e9;
        best = s < best ? s : best;
    }
    return best;
}

static void bench_type(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype t)
{
    model m = {.t = t};
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < MATS; i++) {
            m.w[l][i] = make(t, SHAPE_N[i], SHAPE_K[i], &m.rb[i]);
            m.bytes += m.rb[i] * (size_t)SHAPE_N[i];
        }
    m.head = make(t, VOCAB, DIM, &m.head_rb);
    int64_t M = 128;
    float *x = malloc((size_t)(M * FFN) * sizeof *x), *y = malloc((size_t)(M * VOCAB) * sizeof *y);
    for (int64_t i = 0; i < M * FFN; i++)
        x[i] = frand();
    double flops_layers = 0;
    for (int i = 0; i < MATS; i++)
        flops_layers += 2.0 * LAYERS * (double)SHAPE_N[i] * (double)SHAPE_K[i];

    double s1 = run_layers(isa, pool, &m, LAYERS, x, 1, y, 20);
    double best_head = 1e9;
    for (int r = 0; r < 20; r++) {
        uint64_t t0 = hearth_now_ns();
        hearth_cpu_matmul_on(isa, pool, t, m.head, m.head_rb, VOCAB, DIM, x, DIM, 1, y, VOCAB);
        double s = (double)(hearth_now_ns() - t0) / 1e9;
        best_head = s < best_head ? s : best_head;
    }
    double s128 = run_layers(isa, pool, &m, PREFILL_LAYERS, x, M, y, 10);
    printf("%-5s  M=1 layers %6.1f GB/s (%5.2f ms)  head %6.1f GB/s  |  M=128 %6.1f GFLOP/s (%5.1f ms)\n",
           hearth_dtype_get(t)->name, (double)m.bytes / s1 / 1e9, s1 * 1e3,
           (double)m.head_rb * VOCAB / best_head / 1e9, M * flops_layers * PREFILL_LAYERS / LAYERS / s128 / 1e9, s128 * 1e3);
    const int64_t sweep[] = {1, 2, 4, 8};
    double s_m1 = 0;
    printf("       decode");
    for (size_t i = 0; i < sizeof sweep / sizeof sweep[0]; i++) {
        double s = run_layers(isa, pool, &m, LAYERS, x, sweep[i], y, 15);
        s_m1 = i == 0 ? s : s_m1;
        printf("  M=%lld %5.2f ms (%.3f/call, %.2fx)", (long long)sweep[i], s * 1e3, s * 1e3 / (LAYERS * MATS),
               s / s_m1);
    }
    printf("\n");
    fflush(stdout);
    for (int l = 0; l < LAYERS; l++)
        for (int i = 0; i < MATS; i++)
            free(m.w[l][i]);
    free(m.head), free(x), free(y);
}

int main(int argc, char **argv)
{
    hearth_cpu_isa isa = hearth_cpu_matmul_isa();
    int threads = 0;
    hearth_dtype types[16];
    int n_types = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            const char *v = argv[++i];
            isa = !strcmp(v, "scalar") ? HEARTH_ISA_SCALAR : !strcmp(v, "avx2") ? HEARTH_ISA_AVX2 : HEARTH_ISA_AVX512;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (n_types < 16) {
            for (uint32_t t = 0; t < HEARTH_DTYPE_COUNT_; t++) {
                const hearth_dtype_info *d = hearth_dtype_get(t);
                if (d && !strcasecmp(d->name, argv[i]))
                    types[n_types++] = (hearth_dtype)t;
            }
        }
    }
    if (n_types == 0) {
        const hearth_dtype all[] = {HEARTH_F32, HEARTH_F16, HEARTH_BF16, HEARTH_Q8_0,
                                    HEARTH_Q4_0, HEARTH_Q4_K, HEARTH_Q6_K};
        memcpy(types, all, sizeof all);
        n_types = 7;
    }
    if (!hearth_cpu_isa_available(isa)) {
        fprintf(stderr, "isa %s not available\n", hearth_cpu_isa_name(isa));
        return 1;
    }
    hearth_pool *pool = hearth_pool_new(threads);
    printf("isa %s, %d threads; read bandwidth %.1f GB/s; fma peak %.1f GFLOP/s\n", hearth_cpu_isa_name(isa),
           hearth_pool_size(pool), read_bandwidth(pool), hearth_cpu_peak_gflops(pool));
    for (int i = 0; i < n_types; i++)
        bench_type(isa, pool, types[i]);
    hearth_pool_free(pool);
    return 0;
}

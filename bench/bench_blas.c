/* bench_blas.c: hearth's f32 matmul against OpenBLAS's sgemm on the shapes
 * of a BERT-small encoder (hidden 384, FFN 1536), for the choice the
 * embeddings issue asks to write down: a well-kept BLAS where it wins, our
 * own kernels where they win.
 *
 *   build/bench/bench_blas [--threads N]
 *
 * Both compute Y = X W^T (X: M x K, W: N x K as safetensors stores it) with
 * the same number of threads; best of several runs, GFLOP/s = 2 M N K / s.
 * Rows M: 16 (one short sentence), 128 and 448 (8 and 32 sentences of ~14
 * tokens packed together, as hearth batches them). */
#include "base/clock.h"
#include "base/pool.h"
#include "engine/cpu/matmul.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern void openblas_set_num_threads(int);

static double best_of(int reps, void (*fn)(void *), void *arg)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = hearth_now_ns();
        fn(arg);
        double s = (double)(hearth_now_ns() - t0) / 1e9;
        if (s < best)
            best = s;
    }
    return best;
}

typedef struct job {
    int64_t M, N, K;
    float *X, *W, *Y;
    hearth_pool *pool;
} job;

static void run_hearth(void *arg)
{
    job *j = arg;
    hearth_cpu_matmul(j->pool, HEARTH_F32, j->W, (size_t)j->K * 4, j->N, j->K, j->X, j->K, j->M, j->Y, j->N);
}

static void run_blas(void *arg)
{
    job *j = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->M, (int)j->N, (int)j->K, 1.0f, j->X, (int)j->K, j->W,
                (int)j->K, 0.0f, j->Y, (int)j->N);
}

int main(int argc, char **argv)
{
    int threads = 2;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
    hearth_pool *pool = hearth_pool_new(threads);
    openblas_set_num_threads(threads);
    const int64_t Ms[] = {16, 128, 448};
    const int64_t NK[][2] = {{384, 384}, {1536, 384}, {384, 1536}};
    printf("%-5s %-10s %12s %12s %8s\n", "M", "N x K", "hearth GF/s", "OpenBLAS", "ratio");
    double sum_h = 0, sum_b = 0;
    for (int a = 0; a < 3; a++) {
        for (int b = 0; b < 3; b++) {
            job j = {Ms[a], NK[b][0], NK[b][1], NULL, NULL, NULL, pool};
            j.X = malloc((size_t)(j.M * j.K) * 4);
            j.W = malloc((size_t)(j.N * j.K) * 4);
            j.Y = malloc((size_t)(j.M * j.N) * 4);
            for (int64_t i = 0; i < j.M * j.K; i++)
                j.X[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
            for (int64_t i = 0; i < j.N * j.K; i++)
                j.W[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
            double flop = 2.0 * (double)(j.M * j.N * j.K);
            int reps = j.M >= 128 ? 30 : 200;
            /* interleaved: hearth, BLAS, hearth, BLAS, and the best of each */
            double th = best_of(reps, run_hearth, &j), tb = best_of(reps, run_blas, &j);
            th = fmin(th, best_of(reps, run_hearth, &j));
            tb = fmin(tb, best_of(reps, run_blas, &j));
            printf("%-5lld %4lldx%-5lld %12.1f %12.1f %7.2fx\n", (long long)j.M, (long long)j.N, (long long)j.K, flop / th / 1e9,
                   flop / tb / 1e9, tb / th);
            sum_h += th;
            sum_b += tb;
            free(j.X);
            free(j.W);
            free(j.Y);
        }
    }
    printf("all shapes: hearth %.2fx OpenBLAS's speed (total time %.3f ms vs %.3f ms)\n", sum_b / sum_h, sum_h * 1e3, sum_b * 1e3);
    hearth_pool_free(pool);
    return 0;
}

/* peak.c: a measured f32 FMA peak, for judging the GEMM against the machine
 * rather than against a datasheet (clocks under load, the hypervisor and
 * double-pumped 512-bit units on Zen 4 all move the real figure).
 *
 * Every thread of the pool runs independent FMA chains with the best ISA's
 * widest vectors until a shared deadline ~0.3 s away; flops / elapsed time.
 * A thread that starts late just contributes less, so the result never
 * counts time that nobody measured. */
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_impl.h"

#include "base/clock.h"

#include <stdatomic.h>

typedef struct peak_job {
    uint64_t deadline;
    hearth_cpu_isa isa;
    _Atomic uint64_t flops;
} peak_job;

static uint64_t peak_scalar(uint64_t deadline)
{
    float c[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    uint64_t flops = 0;
    do {
        for (int it = 0; it < 4096; it++)
            for (int i = 0; i < 8; i++)
                c[i] = c[i] * 0.999999f + 1e-7f;
        flops += 4096ull * 8 * 2;
    } while (hearth_now_ns() < deadline);
    return c[0] + c[7] != 0 ? flops : 0;
}

static void peak_task(void *ctx, int64_t t, int64_t n)
{
    peak_job *p = ctx;
    uint64_t f = p->isa == HEARTH_ISA_AVX512 ? hearth_peak_fma_avx512(p->deadline)
                 : p->isa == HEARTH_ISA_AVX2 ? hearth_peak_fma_avx2(p->deadline)
                                             : peak_scalar(p->deadline);
    atomic_fetch_add(&p->flops, f);
}

double hearth_cpu_peak_gflops(hearth_pool *pool)
{
    peak_job p = {.isa = hearth_cpu_matmul_isa()};
    uint64_t start = hearth_now_ns();
    p.deadline = start + 300000000u;
    hearth_pool_run(pool, peak_task, &p, hearth_pool_size(pool));
    uint64_t end = hearth_now_ns();
    return (double)atomic_load(&p.flops) / (double)(end - start);
}

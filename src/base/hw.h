/* hw.h: what the host CPU can do, detected once at start-up (named hw, not
 * cpu: hearth_cpu_* is the CPU backend's, engine/cpu/).
 *
 * Kernels are chosen from these flags at run time (never from compiler
 * macros alone), so one binary runs on every x86-64 and uses AVX-512 where
 * the CPU and the OS (XSAVE state) both allow it. */
#ifndef HEARTH_BASE_HW_H
#define HEARTH_BASE_HW_H

#include <stdbool.h>

typedef struct hearth_hw_info {
    char model[128];
    int logical_cores;   /* online logical CPUs */
    int physical_cores;  /* distinct (package, core) pairs; logical_cores if unknown */
    bool sse42, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512_vnni, avx512_bf16;
    bool avx_vnni;
    bool neon, dotprod;  /* aarch64 */
} hearth_hw_info;

/* A spin-wait's pause between polls: the CPU's hint where it has one (x86
 * pause, aarch64 yield), nothing elsewhere. */
static inline void hearth_hw_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Detected once, then cached; thread-safe. The HEARTH_CPU_DISABLE environment
 * variable (comma list such as "avx512f,avx2") masks features, for testing the
 * fallbacks on a machine that has them. */
const hearth_hw_info *hearth_hw(void);

/* Writes the enabled features as "avx2 fma avx512f ..." into out. */
void hearth_hw_features_string(const hearth_hw_info *c, char *out, unsigned long out_size);

/* Total physical memory in bytes, 0 if unknown. */
unsigned long long hearth_mem_total(void);

#endif

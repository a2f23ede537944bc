/* hw.c: feature detection by cpuid + xgetbv on x86-64 (the OS must enable
 * the register state, or an AVX-512 instruction faults even where cpuid says
 * yes), by getauxval on aarch64; topology from /sys, which counts SMT siblings
 * once, because compute threads are sized from physical cores. */
#include "hw.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define HEARTH_X86 1
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

static hearth_hw_info g_cpu;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#ifdef HEARTH_X86
static unsigned long long xgetbv0(void)
{
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}

static void detect_x86(hearth_hw_info *c)
{
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d))
        return;
    bool osxsave = cx & (1u << 27);
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm = (xcr0 & 6) == 6;          /* SSE + AVX state */
    bool zmm = (xcr0 & 0xe6) == 0xe6;    /* + opmask, ZMM_Hi256, Hi16_ZMM */
    c->sse42 = cx & (1u << 20);
    c->avx = ymm && (cx & (1u << 28));
    c->fma = c->avx && (cx & (1u << 12));
    c->f16c = c->avx && (cx & (1u << 29));
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, cx, d);
        c->avx2 = c->avx && (b & (1u << 5));
        c->avx512f = zmm && (b & (1u << 16));
        c->avx512dq = c->avx512f && (b & (1u << 17));
        c->avx512bw = c->avx512f && (b & (1u << 30));
        c->avx512vl = c->avx512f && (b & (1u << 31));
        c->avx512_vnni = c->avx512f && (cx & (1u << 11));
        __cpuid_count(7, 1, a, b, cx, d);
        c->avx512_bf16 = c->avx512f && (a & (1u << 5));
        c->avx_vnni = c->avx2 && (a & (1u << 4));
    }
    unsigned regs[12];
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &regs[i * 4], &regs[i * 4 + 1], &regs[i * 4 + 2], &regs[i * 4 + 3]);
        memcpy(c->model, regs, 48);
        c->model[48] = 0;
    }
}
#endif

static void read_model_from_proc(hearth_hw_info *c)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *colon = strchr(line, ':');
            if (colon) {
                snprintf(c->model, sizeof c->model, "%s", colon + 2);
                c->model[strcspn(c->model, "\n")] = 0;
            }
            break;
        }
    }
    fclose(f);
}

/* Counts distinct (physical_package_id, core_id) pairs over online CPUs. */
static int count_physical_cores(int logical)
{
    int seen = 0;
    long *keys = calloc((size_t)logical + 1, sizeof *keys);
    if (!keys)
        return logical;
    for (int cpu = 0; cpu < 4096 && seen <= logical; cpu++) {
        char path[128];
        long pkg = 0, core = -1;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%ld", &core) != 1)
            core = -1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%ld", &pkg) != 1)
                pkg = 0;
            fclose(f);
        }
        long key = pkg * 100000 + core;
        bool dup = false;
        for (int i = 0; i < seen; i++)
            dup |= keys[i] == key;
        if (!dup && seen < logical)
            keys[seen++] = key;
    }
    free(keys);
    return seen > 0 ? seen : logical;
}

static void apply_disable_mask(hearth_hw_info *c)
{
    const char *mask = getenv("HEARTH_CPU_DISABLE");
    if (!mask)
        return;
    struct { const char *name; bool *flag; } t[] = {
        {"avx2", &c->avx2}, {"fma", &c->fma}, {"avx512f", &c->avx512f}, {"avx512bw", &c->avx512bw},
        {"avx512vl", &c->avx512vl}, {"avx512dq", &c->avx512dq}, {"avx512_vnni", &c->avx512_vnni},
        {"avx512_bf16", &c->avx512_bf16}, {"avx_vnni", &c->avx_vnni}, {"f16c", &c->f16c}, {"neon", &c->neon},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strstr(mask, t[i].name))
            *t[i].flag = false;
    if (!c->avx512f)
        c->avx512bw = c->avx512vl = c->avx512dq = c->avx512_vnni = c->avx512_bf16 = false;
    if (!c->avx2)
        c->avx_vnni = false;
}

static void detect(void)
{
    hearth_hw_info *c = &g_cpu;
#ifdef HEARTH_X86
    detect_x86(c);
#endif
#if defined(__aarch64__)
    c->neon = true;
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
    c->dotprod = getauxval(AT_HWCAP) & HWCAP_ASIMDDP;
#endif
#endif
    if (!c->model[0])
        read_model_from_proc(c);
    /* cpuid pads the brand string with spaces on some parts */
    char *s = c->model;
    while (*s == ' ')
        s++;
    memmove(c->model, s, strlen(s) + 1);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->logical_cores = n > 0 ? (int)n : 1;
    c->physical_cores = count_physical_cores(c->logical_cores);
    apply_disable_mask(c);
}

const hearth_hw_info *hearth_hw(void)
{
    pthread_once(&g_once, detect);
    return &g_cpu;
}

void hearth_hw_features_string(const hearth_hw_info *c, char *out, unsigned long out_size)
{
    struct { const char *name; bool on; } t[] = {
        {"sse4.2", c->sse42}, {"avx", c->avx}, {"avx2", c->avx2}, {"fma", c->fma}, {"f16c", c->f16c},
        {"avx512f", c->avx512f}, {"avx512bw", c->avx512bw}, {"avx512vl", c->avx512vl}, {"avx512dq", c->avx512dq},
        {"avx512_vnni", c->avx512_vnni}, {"avx512_bf16", c->avx512_bf16}, {"avx_vnni", c->avx_vnni},
        {"neon", c->neon}, {"dotprod", c->dotprod},
    };
    size_t used = 0;
    if (out_size)
        out[0] = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (!t[i].on)
            continue;
        int n = snprintf(out + used, out_size - used, "%s%s", used ? " " : "", t[i].name);
        if (n < 0 || (size_t)n >= out_size - used)
            break;
        used += (size_t)n;
    }
}

unsigned long long hearth_mem_total(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (unsigned long long)pages * (unsigned long long)size : 0;
}

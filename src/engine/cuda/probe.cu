/* probe.cu: the CUDA backend's answer to hearth_gpu_probe (engine/gpu.h).
 *
 * For each device the runtime lists: its properties and free memory, then one
 * tiny kernel (each thread writes f(i)) whose result is read back and checked.
 * That last step is what makes "usable" true: the driver can list a card this
 * binary has no machine code or PTX for (cudaErrorNoKernelImageForDevice), or
 * one whose context cannot be made (out of memory, a busy exclusive-mode GPU),
 * and serving should find that out at start, not at the first request.
 *
 * Compiled only by `make CUDA=1` (nvcc); the plain build uses gpu_none.c.
 * Probed once per process (pthread_once) and cached: the answer is copied. */
extern "C" {
#include "engine/gpu.h"
}

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef HEARTH_CUDA_ARCH
#define HEARTH_CUDA_ARCH 0
#endif

/* What the self-test kernel writes: a value each thread computes from its
 * index with integer arithmetic, so a wrong or missing launch cannot match. */
__host__ __device__ static inline unsigned selftest_value(unsigned i) { return i * 2654435761u + 12345u; }

__global__ static void selftest_kernel(unsigned *out, unsigned n)
{
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = selftest_value(i);
}

static hearth_gpu_list cached;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define SELFTEST_N 1000u /* not a multiple of the block: the bound check runs too */

/* Runs the kernel on the current device; 0, or writes why and returns -1. */
static int selftest(hearth_gpu_info *g)
{
    unsigned *d = NULL, host[SELFTEST_N];
    cudaError_t e = cudaMalloc(&d, sizeof host);
    const char *call = "cudaMalloc";
    if (e == cudaSuccess) {
        selftest_kernel<<<(SELFTEST_N + 255) / 256, 256>>>(d, SELFTEST_N);
        call = "the self-test kernel's launch";
        e = cudaGetLastError();
    }
    if (e == cudaSuccess) {
        call = "cudaMemcpy of the self-test's result";
        e = cudaMemcpy(host, d, sizeof host, cudaMemcpyDeviceToHost);
    }
    if (d)
        cudaFree(d);
    if (e != cudaSuccess) {
        snprintf(g->why, sizeof g->why, "%s failed: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
        return -1;
    }
    for (unsigned i = 0; i < SELFTEST_N; i++) {
        if (host[i] != selftest_value(i)) {
            snprintf(g->why, sizeof g->why, "the self-test kernel wrote %u at %u, expected %u", host[i], i,
                     selftest_value(i));
            return -1;
        }
    }
    return 0;
}

static void probe_once(void)
{
    hearth_gpu_list *l = &cached;
    memset(l, 0, sizeof *l);
    l->backend = "cuda";
    l->compiled = true;
    l->built_arch = HEARTH_CUDA_ARCH;
    cudaRuntimeGetVersion(&l->runtime_version);
    if (cudaDriverGetVersion(&l->driver_version) != cudaSuccess)
        l->driver_version = 0;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        /* no driver at all (no GPU on this machine) reads as "insufficient
         * driver" with a driver version of 0: say what it is */
        if (l->driver_version == 0)
            snprintf(l->why, sizeof l->why, "no CUDA driver on this machine (libcuda.so.1 not found): %s",
                     cudaGetErrorName(e));
        else
            snprintf(l->why, sizeof l->why, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
        return;
    }
    if (count == 0) {
        snprintf(l->why, sizeof l->why, "the CUDA driver lists no device");
        return;
    }
    int usable = 0;
    for (int i = 0; i < count && l->n < HEARTH_GPU_MAX; i++) {
        hearth_gpu_info *g = &l->gpus[l->n++];
        g->index = i;
        cudaDeviceProp p;
        e = cudaGetDeviceProperties(&p, i);
        if (e != cudaSuccess) {
            snprintf(g->why, sizeof g->why, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
            continue;
        }
        snprintf(g->name, sizeof g->name, "%s", p.name);
        g->cc_major = p.major;
        g->cc_minor = p.minor;
        g->multiprocessors = p.multiProcessorCount;
        g->total_bytes = p.totalGlobalMem;
        cudaDeviceGetPCIBusId(g->pci_bus_id, (int)sizeof g->pci_bus_id, i);
        e = cudaSetDevice(i);
        size_t free_b = 0, total_b = 0;
        if (e == cudaSuccess)
            e = cudaMemGetInfo(&free_b, &total_b);
        if (e != cudaSuccess) {
            snprintf(g->why, sizeof g->why, "cannot make a context: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
            continue;
        }
        g->free_bytes = free_b;
        if (selftest(g) == 0) {
            g->usable = true;
            usable++;
        }
    }
    if (usable == 0)
        snprintf(l->why, sizeof l->why, "no listed device ran this binary's kernels (built for sm_%d): see each device's why",
                 l->built_arch);
}

extern "C" void hearth_gpu_probe(hearth_gpu_list *out)
{
    pthread_once(&once, probe_once);
    *out = cached;
}

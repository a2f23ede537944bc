/* gpu.h: which GPUs this process can use, asked once of the backend that was
 * compiled in. A build without CUDA (plain `make`) answers with gpu_none.c: no
 * device, and the reason; `make CUDA=1` answers with cuda/probe.cu, which asks
 * the CUDA runtime and runs one tiny kernel on each device, so "usable" means
 * this binary's machine code really ran there (a build for sm_90 on another
 * GPU fails that, and says so), not only that the driver listed the card.
 *
 * This is the start of the device registry that engine/dev.h (issue 17) will
 * hold; doctor and serve read GPUs only through it, never a literal. */
#ifndef HEARTH_ENGINE_GPU_H
#define HEARTH_ENGINE_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEARTH_GPU_MAX 16

typedef struct hearth_gpu_info {
    int index;                 /* the CUDA device ordinal (cuda:N) */
    char name[256];            /* "NVIDIA H200" */
    char pci_bus_id[32];       /* "0000:19:00.0" */
    int cc_major, cc_minor;    /* compute capability, 9.0 on Hopper */
    int multiprocessors;
    uint64_t total_bytes;      /* device memory */
    uint64_t free_bytes;       /* free when probed */
    bool usable;               /* a kernel of this binary ran there and gave the right answer */
    char why[256];             /* when not usable: the CUDA error, naming the call */
} hearth_gpu_info;

typedef struct hearth_gpu_list {
    const char *backend;       /* "cuda", or "none" in a build without one */
    bool compiled;             /* a GPU backend is compiled into this binary */
    int driver_version;        /* CUDA's encoding, 13000 = 13.0; 0 when there is no driver */
    int runtime_version;       /* the runtime linked in, same encoding; 0 without CUDA */
    int built_arch;            /* the compute capability the kernels were built for (90), 0 without CUDA */
    int n;
    hearth_gpu_info gpus[HEARTH_GPU_MAX];
    char why[256];             /* when n == 0, or none is usable: why, in words */
} hearth_gpu_list;

/* Fills out. Probes once per process and then copies the cached answer;
 * thread-safe. Never fails: what went wrong is in why. With CUDA, this
 * creates a context on each device: call it in a worker, not in a
 * supervisor that will fork (CUDA does not survive fork). */
void hearth_gpu_probe(hearth_gpu_list *out);

#endif

/* dev_cuda.h: the CUDA devices' entry into engine/dev.h's registry, private
 * to src/engine (dev.c calls it in a build with HEARTH_CUDA). Plain C. */
#ifndef HEARTH_ENGINE_CUDA_DEV_CUDA_H
#define HEARTH_ENGINE_CUDA_DEV_CUDA_H

#include "engine/dev.h"

/* Appends up to max devices, one per GPU the probe (engine/gpu.h) found
 * usable, in ordinal order; returns how many. Creates a CUDA context on each
 * GPU: never call it in a process that will fork. */
int hearth_dev_cuda_list(hearth_dev **out, int max);

/* The CUDA ordinal of a device this backend made, or -1 for another. */
int hearth_dev_cuda_ordinal(const hearth_dev *dev);

#endif

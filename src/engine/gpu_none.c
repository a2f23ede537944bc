/* gpu_none.c: the GPU probe of a build without a GPU backend (plain `make`):
 * no device, and a reason that says how to get one. `make CUDA=1` compiles
 * cuda/probe.cu instead and defines HEARTH_CUDA, which empties this file; a
 * file chosen by the build rather than an #ifdef inside one probe keeps the
 * plain build free of every CUDA header. */
#ifndef HEARTH_CUDA
#include "engine/gpu.h"

#include <stdio.h>
#include <string.h>

void hearth_gpu_probe(hearth_gpu_list *out)
{
    memset(out, 0, sizeof *out);
    out->backend = "none";
    snprintf(out->why, sizeof out->why, "this hearth was built without a GPU backend (build with `make CUDA=1`)");
}
#endif

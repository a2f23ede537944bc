/* vision_int.h: the CUDA conv-net ops' private interfaces, between their
 * three files:
 *
 *   vision.cu       the table (cu_vision_ops, engine/dev_vision.h), the
 *                   stream-to-context lookup, argument checks, keep-alive
 *   vision_conv.cu  Conv: placement (weights re-laid out at load) and the
 *                   two kernels (depthwise; implicit GEMM for the rest)
 *   vision_ops.cu   the small ops: pool2d, binary, unary, softmax,
 *                   strided_copy, resize
 *
 * Every launcher enqueues on c->s and returns 0 or a negative status
 * (cu_launched after each launch); none allocates, synchronizes or reads
 * device data on the host, so every one may run while a frame is recorded
 * as a CUDA graph. Descriptors are read on the host during the call and
 * travel to the kernels by value (a recorded graph keeps its copy).
 *
 * Rejected: declaring these in cuda_int.h (the llama/bert side of the
 * backend has no business with them; cuda_int.h carries only the table's
 * name, for dev_cuda.cu). */
#ifndef HEARTH_ENGINE_CUDA_VISION_INT_H
#define HEARTH_ENGINE_CUDA_VISION_INT_H

#include "engine/cuda/cuda_int.h"

/* This thread's context on st's device (made on first use), the device made
 * current; NULL when st is not a CUDA stream or the device cannot be
 * selected. */
cu_ctx *cu_vis_ctx(hearth_stream *st);

/* ---- vision_conv.cu (the table's entries, as dev_vision.h says) ---- */

hearth_conv *cu_conv_new(hearth_dev *dev, const hearth_conv_desc *d, const float *w, const float *bias,
                         hearth_err *err);
void cu_conv_free(hearth_conv *c);
size_t cu_conv_work_bytes(const hearth_conv *c);
int cu_conv(cu_ctx *c, const hearth_conv *cv, const float *X, float *Y, void *work);

/* ---- vision_ops.cu (descriptors already checked by vision.cu; counts >= 1) ---- */

int cu_vis_pool2d(cu_ctx *c, const hearth_pool2d_desc *d, const float *X, float *Y);
int cu_vis_binary(cu_ctx *c, const hearth_binary_desc *d, const float *A, const float *B, float *Y);
int cu_vis_unary(cu_ctx *c, hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b);
int cu_vis_softmax(cu_ctx *c, const float *X, float *Y, int64_t outer, int64_t len, int64_t inner);
int cu_vis_strided_copy(cu_ctx *c, const hearth_strided_desc *d, const void *src, void *dst);
int cu_vis_resize(cu_ctx *c, const hearth_resize_desc *d, const float *X, float *Y);

/* Whether the frame's kernels launch as programmatic dependents (cuda_int.h's
 * cu_launch): every kernel here triggers its successor at its start and
 * waits (cu_pdl_wait) before its first read or write of an activation, so
 * the next kernel's launch and set-up overlap this one's tail. A frame is
 * ~110 kernels of a few microseconds each (bench/RESULTS.md, stop 33), so
 * the gaps between them are a large part of it. HEARTH_CUDA_PDL_VISION=0
 * (or HEARTH_CUDA_PDL=0) turns it off; read once. Measured (stop 39, H100,
 * bench/frames_ab.sh, UltraFace RFB-320, medians of two rounds, off / on):
 * in-process p50 0.495 / 0.489 ms; served, closed loop, p99 1.253 / 1.068
 * ms with the frame in the body, 0.949 / 0.848 in shared memory: the walk
 * gains ~1%, less than the launches' gaps suggested. */
bool cu_vis_pdl(void);

/* k<<<g, b, 0, c->s>>>(args...) through cu_launch, as a dependent when
 * cu_vis_pdl(): 0, or cu_fail's status naming the kernel. */
template <typename... KArgs, typename... Args>
static inline int cu_vis_launch(cu_ctx *c, const char *name, void (*k)(KArgs...), dim3 g, dim3 b, Args... args)
{
    return cu_fail(name, cu_launch(cu_vis_pdl(), k, g, b, 0, c->s, args...));
}

/* Blocks for a grid-stride loop over units elements at 256 threads a block
 * (capped: the kernels stride over the rest). */
static inline unsigned cu_vis_blocks(int64_t units)
{
    int64_t b = (units + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

#endif

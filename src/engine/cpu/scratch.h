/* scratch.h: per-thread scratch memory for the CPU kernels, private to
 * src/engine/cpu.
 *
 * A matmul needs buffers whose size depends on the call (quantized X, packed
 * weight panels). Allocating them per call made glibc hand out fresh mmapped
 * blocks that page-faulted on first touch; instead every thread keeps one
 * buffer per slot that only grows, and reuses it for the next call.
 *
 * Slots: HEARTH_SCRATCH_CALL for what one call shares among its tasks (held
 * by the calling thread for the whole call), HEARTH_SCRATCH_TASK for what
 * one task uses alone (the pool runs tasks on the caller too, so the two
 * must differ), HEARTH_SCRATCH_PASS for a model's forward pass around its
 * matmuls (hearth_cpu_pass_scratch in matmul.h). A buffer stays valid until
 * the same thread asks for the same slot again, or releases. */
#ifndef HEARTH_ENGINE_CPU_SCRATCH_H
#define HEARTH_ENGINE_CPU_SCRATCH_H

#include <stddef.h>

enum { HEARTH_SCRATCH_CALL = 0, HEARTH_SCRATCH_TASK = 1, HEARTH_SCRATCH_PASS = 2, HEARTH_SCRATCH_SLOTS_ = 3 };

/* Most bytes one slot may hold; larger requests fail. */
#define HEARTH_SCRATCH_MAX ((size_t)1 << 31)

/* At least bytes of 64-byte aligned memory for this thread's slot (contents
 * undefined), or NULL when bytes > HEARTH_SCRATCH_MAX or memory is short. */
void *hearth_cpu_scratch(int slot, size_t bytes);

#endif

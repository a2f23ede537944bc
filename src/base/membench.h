/* membench.h: the machine's measured memory read bandwidth.
 *
 * Decode speed is bound by how fast the weights can be read, so a decode
 * benchmark is judged against this figure (GB/s achieved vs GB/s the memory
 * delivers here), not against a datasheet. */
#ifndef HEARTH_BASE_MEMBENCH_H
#define HEARTH_BASE_MEMBENCH_H

#include "base/err.h"
#include "base/pool.h"

#include <stddef.h>

/* Reads a buffer of bytes (rounded down to 4 KiB; at least 4 KiB) passes
 * times with every thread of pool (NULL: the caller alone), each thread its
 * own slice, after one untimed pass that faults the pages in. Returns the best
 * pass in GB/s (1e9 bytes per second), or a negative status
 * (HEARTH_ENOMEM, HEARTH_EINVAL for passes < 1) with err set. Costs about
 * passes * bytes / bandwidth; 1 GiB x 3 is ~0.1 s at 30 GB/s. */
double hearth_membench_read_gbs(size_t bytes, int passes, hearth_pool *pool, hearth_err *err);

#endif

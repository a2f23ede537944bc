/* random.h: randomness from the OS, for seeds and ids (not for secrets). */
#ifndef HEARTH_BASE_RANDOM_H
#define HEARTH_BASE_RANDOM_H

#include <stdint.h>

/* 64 random bits from getrandom(2). Should the kernel refuse (an old kernel,
 * a seccomp filter), falls back to the clock mixed with a per-process
 * counter: seeds and request ids need variety, not secrecy. Thread-safe. */
uint64_t hearth_random_u64(void);

#endif

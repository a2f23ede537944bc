/* dev_test.h: what the device-op suites (test_dev_ops.c, test_dev_ops_vision.c)
 * share: a seeded xorshift for test data, and the device under test with
 * helpers that move buffers through its alloc/upload/download, so the same
 * cases run on any device, its memory the host's or not.
 *
 * Define DEV_TEST_SEED before including to pick the data (each suite keeps
 * its own sequence). Set g_dev, D and g_st before calling the helpers. */
#ifndef HEARTH_TESTS_DEV_TEST_H
#define HEARTH_TESTS_DEV_TEST_H

#include "engine/dev.h"

#include <stdint.h>
#include <stdlib.h>

#ifndef DEV_TEST_SEED
#define DEV_TEST_SEED 0x2545f4914f6cdd1dull
#endif

static uint64_t rng_state = DEV_TEST_SEED;
static inline uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
/* Uniform in [-1, 1). */
static inline float frand(void)
{
    return (float)((double)rnd() / 2147483648.0 - 1.0);
}
/* n of them, malloc'd (the caller frees). */
static inline float *frands(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

/* The device under test and its stream. */
static hearth_dev *g_dev;
static hearth_stream g_st;
static const hearth_dev_ops *D;

static inline void *dput(const void *host, size_t bytes)
{
    void *p = D->alloc(g_dev, bytes ? bytes : 1, NULL);
    if (p && bytes)
        D->upload(&g_st, p, host, bytes);
    return p;
}
static inline float *dputf(const float *host, int64_t n)
{
    return dput(host, (size_t)(n > 0 ? n : 0) * sizeof(float));
}
static inline void dget(void *host, const void *dev, size_t bytes)
{
    D->download(&g_st, host, dev, bytes);
    D->sync(&g_st);
}
static inline void dfree(void *p)
{
    D->free(g_dev, p);
}

#endif

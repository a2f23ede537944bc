/* random.c: the one place hearth asks the OS for random bits (sampler seeds,
 * OpenAI-style request ids). EINTR is retried; a failure falls back to a
 * splitmix64 of the monotonic clock and a counter, so two calls never agree. */
#include "random.h"

#include "clock.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/random.h>

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t hearth_random_u64(void)
{
    uint64_t v = 0;
    ssize_t n;
    do
        n = getrandom(&v, sizeof v, 0);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)sizeof v)
        return v;
    static _Atomic uint64_t counter;
    return splitmix64(hearth_now_ns() ^ (atomic_fetch_add(&counter, 1) << 48));
}

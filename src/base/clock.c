/* clock.c: thin wrappers over clock_gettime; CLOCK_MONOTONIC because
 * timeouts must not move when the administrator sets the date. */
#include "clock.h"

#include <time.h>

uint64_t hearth_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t hearth_unix_time(void) { return (int64_t)time(NULL); }

int64_t hearth_unix_time_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

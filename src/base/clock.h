/* clock.h: monotonic time for timeouts and latency, wall time for logs. */
#ifndef HEARTH_BASE_CLOCK_H
#define HEARTH_BASE_CLOCK_H

#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC: never jumps, unrelated to the date. */
uint64_t hearth_now_ns(void);
static inline uint64_t hearth_now_ms(void) { return hearth_now_ns() / 1000000u; }
/* Seconds since the Unix epoch (for the OpenAI "created" fields). */
int64_t hearth_unix_time(void);
/* Milliseconds since the Unix epoch (Triton's last_inference). */
int64_t hearth_unix_time_ms(void);

#endif

/* oip_stats.h: Triton's model statistics for a frame model (GET
 * /v2/models/{m}/stats, tritonclient's get_inference_statistics, what
 * perf_analyzer reads for its server-side figures): counts and summed
 * times of the frames answered, kept by oip.c as each frame's answer
 * goes out. Private to the api layer. */
#ifndef HEARTH_API_OIP_STATS_H
#define HEARTH_API_OIP_STATS_H

#include "base/buf.h"

#include <stdatomic.h>
#include <stdint.h>

/* Any thread; relaxed atomics: a reader sees each counter whole, not the
 * set as of one instant (Triton's figures are not one snapshot either). */
typedef struct hearth_oip_stats {
    atomic_uint_fast64_t ok, ok_ns;     /* frames answered with outputs, handler to answer posted */
    atomic_uint_fast64_t fail, fail_ns; /* parsed frames answered without outputs: late, queue full,
                                           cancelled, runner errors (a 400 of the parse is not counted) */
    atomic_uint_fast64_t input_ns;      /* of ok frames: the handler's parse and input copy */
    atomic_uint_fast64_t queue_ns;      /* parsed to the run's start */
    atomic_uint_fast64_t infer_ns;      /* the run: upload, walk, download */
    atomic_uint_fast64_t output_ns;     /* the run's end to the answer posted */
    atomic_uint_fast64_t last_ms;       /* Unix time of the last ok frame, ms (0: none) */
} hearth_oip_stats;

/* A frame answered with outputs; the times are hearth_now_ns readings:
 * the handler's start, the parse's end, the run's start and end, and the
 * answer posted. */
void hearth_oip_stats_ok(hearth_oip_stats *s, uint64_t t_handler, uint64_t t_parsed, uint64_t t_start, uint64_t t_end,
                         uint64_t t_sent);
/* A parsed frame answered with an error, ns after its handler started. */
void hearth_oip_stats_fail(hearth_oip_stats *s, uint64_t ns);
/* One element of "model_stats": {"name", "version": "1", "last_inference",
 * "inference_count", "execution_count", "inference_stats": {"success",
 * "fail", "queue", "compute_input", "compute_infer", "compute_output",
 * "cache_hit", "cache_miss"} each {"count", "ns"}, "batch_stats": [batch
 * size 1's compute figures]}. A frame is one execution of batch 1. */
int hearth_oip_format_stats(hearth_buf *b, const char *name, const hearth_oip_stats *s);

#endif

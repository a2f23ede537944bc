/* oip_stats.c: Triton's model statistics for a frame model (oip_stats.h).
 *
 * Triton's phases mapped onto a served frame's: compute_input is the
 * handler's parse with the input copy (Triton's is the copy to the
 * device, which here is inside the run), compute_infer the run (the
 * upload, the walk, the download: one CUDA graph on a GPU), compute_output
 * the answer's formatting and posting; queue is the parse's end to the
 * run's start. A frame is one execution of batch size 1: hearth batches no
 * frames, so inference_count and execution_count are equal. */
#include "oip_stats.h"

#include "base/clock.h"
#include "net/server.h"

#include <stdbool.h>
#include <string.h>

static void add(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static uint64_t get(const atomic_uint_fast64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* a later reading before an earlier one (a job never run: 0) counts nothing */
static uint64_t span(uint64_t from, uint64_t to)
{
    return to > from ? to - from : 0;
}

void hearth_oip_stats_ok(hearth_oip_stats *s, uint64_t t_handler, uint64_t t_parsed, uint64_t t_start, uint64_t t_end,
                         uint64_t t_sent)
{
    add(&s->input_ns, span(t_handler, t_parsed));
    add(&s->queue_ns, span(t_parsed, t_start));
    add(&s->infer_ns, span(t_start, t_end));
    add(&s->output_ns, span(t_end, t_sent));
    add(&s->ok_ns, span(t_handler, t_sent));
    atomic_store_explicit(&s->last_ms, (uint64_t)hearth_unix_time_ms(), memory_order_relaxed);
    add(&s->ok, 1); /* last: a reader that sees the count sees its times (near enough: relaxed) */
}

void hearth_oip_stats_fail(hearth_oip_stats *s, uint64_t ns)
{
    add(&s->fail_ns, ns);
    add(&s->fail, 1);
}

static int duration(hearth_buf *b, const char *key, uint64_t count, uint64_t ns, bool comma)
{
    return hearth_buf_printf(b, "%s\"%s\":{\"count\":%llu,\"ns\":%llu}", comma ? "," : "", key, (unsigned long long)count,
                             (unsigned long long)ns);
}

/* ,"compute_input":..,"compute_infer":..,"compute_output":.. of n frames */
static int computes(hearth_buf *b, uint64_t n, uint64_t in, uint64_t infer, uint64_t out)
{
    int rc = duration(b, "compute_input", n, in, true);
    if (!rc)
        rc = duration(b, "compute_infer", n, infer, true);
    return rc ? rc : duration(b, "compute_output", n, out, true);
}

int hearth_oip_format_stats(hearth_buf *b, const char *name, const hearth_oip_stats *s)
{
    const uint64_t n = get(&s->ok), in = get(&s->input_ns), inf = get(&s->infer_ns), out = get(&s->output_ns);
    int rc = hearth_buf_appends(b, "{\"name\":");
    if (!rc)
        rc = hearth_json_quote(b, name, strlen(name));
    if (!rc)
        rc = hearth_buf_printf(b, ",\"version\":\"1\",\"last_inference\":%llu,\"inference_count\":%llu,"
                                  "\"execution_count\":%llu,\"inference_stats\":{",
                               (unsigned long long)get(&s->last_ms), (unsigned long long)n, (unsigned long long)n);
    if (!rc)
        rc = duration(b, "success", n, get(&s->ok_ns), false);
    if (!rc)
        rc = duration(b, "fail", get(&s->fail), get(&s->fail_ns), true);
    if (!rc)
        rc = duration(b, "queue", n, get(&s->queue_ns), true);
    if (!rc)
        rc = computes(b, n, in, inf, out);
    if (!rc)
        rc = duration(b, "cache_hit", 0, 0, true);
    if (!rc)
        rc = duration(b, "cache_miss", 0, 0, true);
    if (!rc)
        rc = hearth_buf_appends(b, "},\"batch_stats\":[");
    if (!rc && n) {
        rc = hearth_buf_appends(b, "{\"batch_size\":1");
        if (!rc)
            rc = computes(b, n, in, inf, out);
        if (!rc)
            rc = hearth_buf_appends(b, "}");
    }
    return rc ? rc : hearth_buf_appends(b, "],\"memory_usage\":[]}");
}

/* stats.c: request counters and latency histograms in shared memory, and
 * their Prometheus rendering.
 *
 * The block is mapped MAP_SHARED before workers fork (a memfd, so --spawn
 * workers can map it too), one hearth_slot_stats per I/O thread of every
 * worker. A slot's counters are written only by its own thread, with relaxed
 * atomics; /metrics in any worker sums every slot, so a scrape sees the whole
 * server whichever worker answers it. The same block carries each slot's open
 * connection count, which the accept balancer reads. */
#include "server_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const int hearth_stats_status_codes[HEARTH_N_STATUS] = {200, 201, 204, 400, 401, 403, 404, 405, 408,
                                                        413, 415, 422, 429, 431, 500, 501, 503, 0};
const double hearth_stats_lat_bounds[HEARTH_N_LAT_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                              0.1,    0.25,  0.5,    1,     2.5,  10,    0};

int hearth_shared_create(hearth_server *s, hearth_err *err)
{
    size_t size = sizeof(hearth_shared) + (size_t)s->n_slots * sizeof(hearth_slot_stats);
    int fd = memfd_create("hearth-stats", MFD_CLOEXEC);
    if (fd < 0)
        return hearth_err_sys(err, errno, "memfd_create for the shared statistics");
    if (ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        close(fd);
        return hearth_err_sys(err, e, "sizing the shared statistics to %zu bytes", size);
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return hearth_err_sys(err, e, "mapping the shared statistics");
    }
    s->shared = p;
    s->shared_size = size;
    s->shared_fd = fd;
    s->shared->n_slots = s->n_slots;
    return HEARTH_OK;
}

void hearth_shared_destroy(hearth_server *s)
{
    if (s->shared)
        munmap(s->shared, s->shared_size);
    if (s->shared_fd >= 0)
        close(s->shared_fd);
    s->shared = NULL;
    s->shared_fd = -1;
}

static int status_index(int status)
{
    for (int i = 0; i < HEARTH_N_STATUS - 1; i++)
        if (hearth_stats_status_codes[i] == status)
            return i;
    return HEARTH_N_STATUS - 1;
}

void hearth_stats_request(hearth_server *s, int gslot, int route, int status, uint64_t ns)
{
    hearth_slot_stats *st = &s->shared->slot[gslot];
    if (route < 0 || route > HEARTH_MAX_ROUTES)
        route = HEARTH_MAX_ROUTES;
    atomic_fetch_add_explicit(&st->requests[route][status_index(status)], 1, memory_order_relaxed);
    double sec = (double)ns / 1e9;
    int b = 0;
    while (b < HEARTH_N_LAT_BUCKETS - 1 && sec > hearth_stats_lat_bounds[b])
        b++;
    atomic_fetch_add_explicit(&st->lat_bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->lat_sum_us, ns / 1000, memory_order_relaxed);
    atomic_fetch_add_explicit(&st->lat_count, 1, memory_order_relaxed);
}

static const char *route_label(const hearth_server *s, int r) { return r < s->n_routes ? s->routes[r].path : "unmatched"; }

int hearth_stats_render(hearth_server *s, hearth_buf *out)
{
    hearth_shared *sh = s->shared;
    int rc = hearth_buf_appends(out, "# HELP hearth_http_requests_total HTTP requests answered, by route and status.\n"
                                     "# TYPE hearth_http_requests_total counter\n");
    for (int r = 0; r <= HEARTH_MAX_ROUTES && !rc; r++) {
        if (r >= s->n_routes && r != HEARTH_MAX_ROUTES)
            continue;
        for (int k = 0; k < HEARTH_N_STATUS && !rc; k++) {
            uint64_t n = 0;
            for (int i = 0; i < sh->n_slots; i++)
                n += atomic_load_explicit(&sh->slot[i].requests[r][k], memory_order_relaxed);
            if (n == 0)
                continue;
            char code[8];
            if (hearth_stats_status_codes[k])
                snprintf(code, sizeof code, "%d", hearth_stats_status_codes[k]);
            else
                snprintf(code, sizeof code, "other");
            const char *method = r < s->n_routes ? s->routes[r].method : "";
            rc = hearth_buf_printf(out, "hearth_http_requests_total{route=\"%s\",method=\"%s\",status=\"%s\"} %llu\n",
                                   route_label(s, r), method, code, (unsigned long long)n);
        }
    }
    int64_t inflight = 0, conns = 0;
    uint64_t accepted = 0, buckets[HEARTH_N_LAT_BUCKETS] = {0}, sum_us = 0, count = 0;
    for (int i = 0; i < sh->n_slots; i++) {
        hearth_slot_stats *st = &sh->slot[i];
        inflight += atomic_load(&st->inflight);
        conns += atomic_load(&st->conns);
        accepted += atomic_load(&st->accepted);
        for (int b = 0; b < HEARTH_N_LAT_BUCKETS; b++)
            buckets[b] += atomic_load_explicit(&st->lat_bucket[b], memory_order_relaxed);
        sum_us += atomic_load_explicit(&st->lat_sum_us, memory_order_relaxed);
        count += atomic_load_explicit(&st->lat_count, memory_order_relaxed);
    }
    if (!rc)
        rc = hearth_buf_printf(out,
                               "# HELP hearth_http_requests_in_flight Requests received and not yet answered.\n"
                               "# TYPE hearth_http_requests_in_flight gauge\n"
                               "hearth_http_requests_in_flight %lld\n"
                               "# HELP hearth_http_connections_open Open client connections.\n"
                               "# TYPE hearth_http_connections_open gauge\n"
                               "hearth_http_connections_open %lld\n"
                               "# HELP hearth_http_connections_total Client connections accepted.\n"
                               "# TYPE hearth_http_connections_total counter\n"
                               "hearth_http_connections_total %llu\n"
                               "# HELP hearth_http_connections_open_by_slot Open connections per worker and I/O thread (the balancer's view).\n"
                               "# TYPE hearth_http_connections_open_by_slot gauge\n",
                               (long long)inflight, (long long)conns, (unsigned long long)accepted);
    int threads = s->cfg.threads;
    for (int i = 0; i < sh->n_slots && !rc; i++)
        rc = hearth_buf_printf(out, "hearth_http_connections_open_by_slot{worker=\"%d\",thread=\"%d\"} %lld\n",
                               i / threads, i % threads, (long long)atomic_load(&sh->slot[i].conns));
    if (!rc)
        rc = hearth_buf_appends(out, "# HELP hearth_http_connections_accepted_by_slot Connections served per worker and I/O thread.\n"
                                     "# TYPE hearth_http_connections_accepted_by_slot counter\n");
    for (int i = 0; i < sh->n_slots && !rc; i++)
        rc = hearth_buf_printf(out, "hearth_http_connections_accepted_by_slot{worker=\"%d\",thread=\"%d\"} %llu\n",
                               i / threads, i % threads, (unsigned long long)atomic_load(&sh->slot[i].accepted));
    uint64_t offloaded = 0, refused = 0;
    for (int i = 0; i < sh->n_slots; i++) {
        offloaded += atomic_load_explicit(&sh->slot[i].offloaded, memory_order_relaxed);
        refused += atomic_load_explicit(&sh->slot[i].offload_refused, memory_order_relaxed);
    }
    if (!rc)
        rc = hearth_buf_printf(out,
                               "# HELP hearth_offloaded_requests_total Requests whose handler ran on the handler pool (bodies over --offload-body).\n"
                               "# TYPE hearth_offloaded_requests_total counter\n"
                               "hearth_offloaded_requests_total %llu\n"
                               "# HELP hearth_offload_refused_total Large requests answered 503 because the handler pool's queue was full.\n"
                               "# TYPE hearth_offload_refused_total counter\n"
                               "hearth_offload_refused_total %llu\n",
                               (unsigned long long)offloaded, (unsigned long long)refused);
    if (!rc)
        rc = hearth_buf_appends(out, "# HELP hearth_http_request_duration_seconds Time from a complete request head to the end of its response.\n"
                                     "# TYPE hearth_http_request_duration_seconds histogram\n");
    uint64_t cum = 0;
    for (int b = 0; b < HEARTH_N_LAT_BUCKETS && !rc; b++) {
        cum += buckets[b];
        if (b == HEARTH_N_LAT_BUCKETS - 1)
            rc = hearth_buf_printf(out, "hearth_http_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
        else
            rc = hearth_buf_printf(out, "hearth_http_request_duration_seconds_bucket{le=\"%g\"} %llu\n", hearth_stats_lat_bounds[b],
                                   (unsigned long long)cum);
    }
    if (!rc)
        rc = hearth_buf_printf(out, "hearth_http_request_duration_seconds_sum %.6f\nhearth_http_request_duration_seconds_count %llu\n",
                               (double)sum_us / 1e6, (unsigned long long)count);
    return rc;
}

int hearth_server_metrics(hearth_server *s, hearth_buf *out) { return hearth_stats_render(s, out); }

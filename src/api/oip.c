/* oip.c: the Open Inference Protocol (KServe v2 REST, as NVIDIA Triton
 * serves it) over hearth's frame models: health, server and model metadata,
 * readiness and infer, with the binary tensor data extension, sequences and
 * deadlines; Triton's model configuration and statistics extensions
 * (/config, /stats: oip_json.c, oip_stats.c); and the frame models'
 * /metrics.
 *
 * Infer follows embed.c's path: the handler (on the loop thread, or on a
 * handler thread when more than 16 KiB of the body is parsed: a frame as
 * JSON text; a frame in the binary extension stays on the loop,
 * infer_parse_bytes) parses and checks the request against the model
 * (oip_parse.c), copying the input tensors (into one of the input sets the
 * model keeps when one is free: a GPU's are pinned and the run uploads
 * them without the staging copy; a binary frame of a one-input model has
 * its tensor bytes received straight into a set, infer_sink;
 * tensors in shared memory regions stay there, oip_shm.c), defers the
 * request, then submits one job to the model's frame queue. The queue's
 * thread answers through the job's done callback: it copies outputs asked
 * for in regions there, formats the response (oip_json.c) and posts it to the
 * connection with hearth_reply_send. The request state is shared by the
 * queue and the connection and freed by whichever lets go last (a
 * reference count); a client that disconnects marks the job cancelled, and
 * a frame not yet run is skipped.
 *
 * Statuses (Triton's body {"error": "..."} for all): an unknown model or
 * version 404; a malformed request 400 naming the tensor; a frame for a
 * sequence that is not live 400 (the client must start it again: the state
 * it expected is gone); a start frame that finds every sequence slot taken
 * 429, and a full queue 429 (both clear as frames end: retry later); a
 * frame that cannot make its deadline 504 "frame could not make its
 * deadline of N us: ..." (answered without running: a late answer is a
 * status of its own, as Triton answers a request whose timeout passed in
 * the queue with an error, and 504 rather than 503 so that a proxy does
 * not retry a frame whose moment has passed); a device error 503; another
 * runner error 500; models still loading 503.
 *
 * The deadline is the request's parameters.timeout (microseconds, Triton's)
 * from the moment the handler took it, else the model's --deadline-ms, else
 * none; a timeout of 0 means the model's default, as in Triton.
 *
 * Versions: every model has one version, "1"; a request naming another is
 * a 404 naming the versions there are.
 *
 * The registry of frame models lives here until the lead moves it into
 * hearth_api_state (oip_models.h): entries are written before n is
 * published (release), read after it (acquire).
 *
 * Rejected: gzip/deflate request bodies (Content-Encoding; Triton takes
 * them): refused with 415 naming the encoding, since a frame's tensor
 * compresses badly and the body limit is the bound that matters. */
#include "oip.h"
#include "oip_json.h"
#include "oip_models.h"
#include "oip_parse.h"
#include "oip_stats.h"

#include "base/clock.h"
#include "base/log.h"
#include "net/http_parse.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HEARTH_VERSION
#define HEARTH_VERSION "unknown"
#endif

/* The largest infer answer formatted: a JSON answer of every float at its
 * longest, or the binary outputs. */
#define OIP_RESPONSE_MAX ((size_t)1 << 30)
#define OIP_ERROR_MAX ((size_t)8 << 10)

/* ---- the registry ---- */

static hearth_api *g_api;
static hearth_frame_entry g_frames[HEARTH_API_MAX_MODELS];
static hearth_oip_stats g_stats[HEARTH_API_MAX_MODELS]; /* g_frames[i]'s */
static _Atomic int g_n_frames;

int hearth_api_oip_add_model(hearth_api *api, const hearth_frame_entry *e)
{
    if (!e || !e->info || !e->model || !e->queue)
        return HEARTH_EINVAL;
    int n = atomic_load(&g_n_frames);
    if (n >= HEARTH_API_MAX_MODELS)
        return HEARTH_ELIMIT;
    g_api = api;
    g_frames[n] = *e;
    memset(&g_stats[n], 0, sizeof g_stats[n]);
    atomic_store_explicit(&g_n_frames, n + 1, memory_order_release);
    return 0;
}

void hearth_api_oip_clear(hearth_api *api)
{
    if (api == g_api)
        atomic_store(&g_n_frames, 0);
}

hearth_frame_entry *hearth_api_find_frame(hearth_api *api, const char *name)
{
    if (api != g_api)
        return NULL;
    int n = atomic_load_explicit(&g_n_frames, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (!name || strcmp(g_frames[i].info->name, name) == 0)
            return &g_frames[i];
    return NULL;
}

/* ---- answers ---- */

static void respond_text(hearth_request *req, int status, const char *ctype, const char *text)
{
    hearth_response res = {status, ctype, NULL, text, strlen(text)};
    hearth_respond(req, &res);
}

static void respond_err(hearth_request *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void respond_err(hearth_request *req, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hearth_oip_respond_error(req, status, msg);
}

void hearth_oip_respond_error(hearth_request *req, int status, const char *msg)
{
    hearth_buf b;
    hearth_buf_init(&b, OIP_ERROR_MAX);
    if (hearth_oip_format_error(&b, msg) == 0)
        respond_text(req, status, "application/json", b.data);
    else
        hearth_respond_error(req, status, "error", "%s", msg);
    hearth_buf_deinit(&b);
}

static void reply_err(hearth_server *s, hearth_reply h, int status, const char *msg)
{
    hearth_buf b;
    hearth_buf_init(&b, OIP_ERROR_MAX);
    if (hearth_oip_format_error(&b, msg) == 0) {
        hearth_response res = {status, "application/json", NULL, b.data, b.len};
        hearth_reply_send(s, h, &res);
    } else {
        hearth_reply_error(s, h, status, "error", msg);
    }
    hearth_buf_deinit(&b);
}

static bool ready_or_respond(hearth_request *req, hearth_api *api)
{
    if (atomic_load(&api->ready))
        return true;
    respond_err(req, 503, "models are loading");
    return false;
}

/* ---- routes without a model ---- */

static void health_live(hearth_request *req, void *ctx)
{
    (void)ctx;
    hearth_response res = {200, NULL, NULL, "", 0};
    hearth_respond(req, &res);
}

static void health_ready(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    if (!atomic_load(&api->ready)) {
        respond_err(req, 503, "models are loading");
        return;
    }
    hearth_response res = {200, NULL, NULL, "", 0};
    hearth_respond(req, &res);
}

static void server_metadata(hearth_request *req, void *ctx)
{
    (void)ctx;
    hearth_buf b;
    hearth_buf_init(&b, 4096);
    if (hearth_oip_format_server(&b, HEARTH_VERSION) == 0)
        respond_text(req, 200, "application/json", b.data);
    else
        respond_err(req, 500, "out of memory");
    hearth_buf_deinit(&b);
}

/* ---- /v2/models/{...} ---- */

enum { ACT_METADATA, ACT_READY, ACT_INFER, ACT_CONFIG, ACT_STATS };

static bool ends_with(const char *s, size_t n, const char *tail)
{
    size_t t = strlen(tail);
    return n >= t && memcmp(s + n - t, tail, t) == 0;
}

/* Splits "{m}[/versions/{v}][/ready|/infer|/config|/stats]" into the model (decoded into
 * name), the action and any version (NULL: none); the entry, or NULL when
 * no frame model has that name. *np: the path's tail's length
 * (hearth_request_rest), shortened to the name's bytes. */
static hearth_frame_entry *find_model(const char *rest, size_t *np, hearth_api *api, int *action, char *name,
                                      size_t name_size, const char **version, size_t *vlen)
{
    size_t n = *np;
    *action = ACT_METADATA;
    if (ends_with(rest, n, "/ready")) {
        *action = ACT_READY;
        n -= 6;
    } else if (ends_with(rest, n, "/infer")) {
        *action = ACT_INFER;
        n -= 6;
    } else if (ends_with(rest, n, "/config")) {
        *action = ACT_CONFIG;
        n -= 7;
    } else if (ends_with(rest, n, "/stats")) {
        *action = ACT_STATS;
        n -= 6;
    }
    *version = NULL;
    *vlen = 0;
    for (size_t i = n; i-- > 0;) { /* the last "/versions/" */
        if (rest[i] == '/' && n - i > 10 && memcmp(rest + i, "/versions/", 10) == 0) {
            *version = rest + i + 10;
            *vlen = n - i - 10;
            n = i;
            break;
        }
    }
    *np = n;
    return n && hearth_http_percent_decode(rest, n, name, name_size) >= 0 ? hearth_api_find_frame(api, name) : NULL;
}

/* find_model for a request: the entry, or NULL after responding 404. */
static hearth_frame_entry *model_of(hearth_request *req, hearth_api *api, int *action, char *name, size_t name_size)
{
    size_t n, vlen;
    const char *rest = hearth_request_rest(req, &n), *version;
    hearth_frame_entry *e = find_model(rest, &n, api, action, name, name_size, &version, &vlen);
    if (!e) {
        char list[512] = "";
        size_t k = 0;
        for (int i = 0; i < atomic_load(&g_n_frames) && k + 1 < sizeof list && api == g_api; i++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s'%s'", i ? ", " : "", g_frames[i].info->name);
        respond_err(req, 404, "unknown model '%.*s': the models served over /v2 are %s", (int)(n > 200 ? 200 : n), rest,
                    list[0] ? list : "none");
        return NULL;
    }
    if (version && !(vlen == 1 && version[0] == '1')) {
        respond_err(req, 404, "model '%s' has no version '%.*s': its versions are [\"1\"]", name, (int)(vlen > 64 ? 64 : vlen),
                    version);
        return NULL;
    }
    return e;
}

/* GET /v2/models/stats, or /v2/models/{m}/stats when e: Triton's
 * {"model_stats": [...]} of every frame model, or of e's. */
static void stats_get(hearth_request *req, const hearth_frame_entry *e)
{
    hearth_buf b;
    hearth_buf_init(&b, (size_t)1 << 20);
    int rc = hearth_buf_appends(&b, "{\"model_stats\":[");
    for (int i = 0, k = 0; i < atomic_load_explicit(&g_n_frames, memory_order_acquire) && !rc; i++) {
        if (e && e != &g_frames[i])
            continue;
        if (k++)
            rc = hearth_buf_append(&b, ",", 1);
        if (!rc)
            rc = hearth_oip_format_stats(&b, g_frames[i].info->name, &g_stats[i]);
    }
    if (!rc)
        rc = hearth_buf_appends(&b, "]}");
    if (rc == 0)
        respond_text(req, 200, "application/json", b.data);
    else
        respond_err(req, 500, "the statistics did not fit in 1 MiB");
    hearth_buf_deinit(&b);
}

static void model_get(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    char name[sizeof api->models[0].name];
    int action;
    if (!ready_or_respond(req, api))
        return;
    size_t n;
    const char *rest = hearth_request_rest(req, &n);
    if (n == 5 && memcmp(rest, "stats", 5) == 0 && !hearth_api_find_frame(api, "stats")) {
        stats_get(req, NULL); /* every model's, as Triton answers GET /v2/models/stats */
        return;
    }
    hearth_frame_entry *e = model_of(req, api, &action, name, sizeof name);
    if (!e)
        return;
    if (action == ACT_READY) {
        hearth_response res = {200, NULL, NULL, "", 0};
        hearth_respond(req, &res);
        return;
    }
    if (action == ACT_INFER) {
        respond_err(req, 405, "infer is a POST");
        return;
    }
    if (action == ACT_STATS) {
        stats_get(req, e);
        return;
    }
    hearth_buf b;
    hearth_buf_init(&b, (size_t)1 << 20);
    const hearth_frame_info *info = hearth_frame_model_info(e->model);
    int rc = action == ACT_CONFIG ? hearth_oip_format_config(info, name, e->seq_idle_ns / 1000u, &b)
                                  : hearth_oip_format_model(info, name, &b);
    if (rc == 0)
        respond_text(req, 200, "application/json", b.data);
    else
        respond_err(req, 500, "model '%s': its %s did not fit in 1 MiB", name,
                    action == ACT_CONFIG ? "configuration" : "metadata");
    hearth_buf_deinit(&b);
}

/* ---- infer ---- */

typedef struct oip_req {
    hearth_frame_job job;
    hearth_server *server;
    hearth_reply reply;
    _Atomic int refs;
    const hearth_frame_info *info;
    char name[128];
    uint64_t timeout_us;         /* the deadline the frame was given, for the late message */
    uint64_t t_handler, t_parsed; /* hearth_now_ns at the handler's start and once the body was parsed */
    hearth_oip_request parsed;   /* inputs */
    hearth_frame_model *model;
    hearth_oip_stats *stats;     /* its model's (g_stats) */
    int in_set;                  /* the model's input set the inputs were parsed into, or -1 */
    void *out[HEARTH_FRAME_MAX_IO];
} oip_req;

/* An input set a binary frame's body went into (infer_sink): its model's. */
typedef struct sink_set {
    hearth_frame_model *model;
    int set;
} sink_set;

static void req_free(oip_req *r)
{
    hearth_oip_request_free(&r->parsed);
    hearth_frame_model_inputs_give(r->model, r->in_set);
    for (int j = 0; j < HEARTH_FRAME_MAX_IO; j++)
        free(r->out[j]);
    free(r);
}

static void req_unref(oip_req *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1)
        req_free(r);
}

static void on_release(void *arg, bool cancelled)
{
    oip_req *r = arg;
    if (cancelled)
        atomic_store(&r->job.cancelled, 1);
    req_unref(r);
}

/* The HTTP status of a job's status. */
static int http_status(int status)
{
    switch (status) {
    case HEARTH_FRAME_LATE: return 504;
    case HEARTH_FRAME_NO_SEQUENCE: return 400;
    case HEARTH_FRAME_SEQ_FULL: return 429;
    case HEARTH_ENOTFOUND:
    case HEARTH_EDEVICE: return 503;
    default: return 500;
    }
}

static void on_done(hearth_frame_job *job, int status, const char *msg)
{
    uint64_t t_done = hearth_now_ns();
    oip_req *r = job->user;
    if (status) {
        char text[1024];
        if (status == HEARTH_FRAME_LATE)
            snprintf(text, sizeof text, "model '%s': frame could not make its deadline of %llu us: %s", r->name,
                     (unsigned long long)r->timeout_us, msg ? msg : "");
        else if (status == HEARTH_ENOTFOUND)
            snprintf(text, sizeof text, "model '%s': the frame was cancelled (%s)", r->name, msg ? msg : "");
        else
            snprintf(text, sizeof text, "model '%s': %s", r->name, msg ? msg : "the frame failed");
        reply_err(r->server, r->reply, http_status(status), text);
        hearth_oip_stats_fail(r->stats, hearth_now_ns() - r->t_handler);
        req_unref(r);
        return;
    }
    /* outputs asked for in shared memory regions go there (the run wrote them to r->out) */
    for (int k = 0; k < r->parsed.n_out; k++)
        if (r->parsed.out_at[k])
            memcpy(r->parsed.out_at[k], r->out[r->parsed.out[k]], r->info->outputs[r->parsed.out[k]].bytes);
    hearth_buf b;
    hearth_buf_init(&b, OIP_RESPONSE_MAX);
    size_t json_len = 0;
    const bool fits = hearth_oip_format_infer(r->info, r->name, &r->parsed, r->out, &b, &json_len) == 0;
    if (!fits) {
        reply_err(r->server, r->reply, 500, "the response did not fit in memory");
    } else if (json_len == b.len) {
        hearth_response res = {200, "application/json", NULL, b.data, b.len};
        hearth_reply_send(r->server, r->reply, &res);
    } else {
        char headers[96];
        snprintf(headers, sizeof headers, "Inference-Header-Content-Length: %zu\r\n", json_len);
        hearth_response res = {200, "application/octet-stream", headers, b.data, b.len};
        hearth_reply_send(r->server, r->reply, &res);
    }
    hearth_buf_deinit(&b);
    uint64_t t_sent = hearth_now_ns();
    if (fits)
        hearth_oip_stats_ok(r->stats, r->t_handler, r->t_parsed, job->start_ns, job->end_ns, t_sent);
    else
        hearth_oip_stats_fail(r->stats, t_sent - r->t_handler);
    /* Where a served frame's time goes, at --log-level debug: the handler's
     * parse (with the input copy), the wait in the queue (the scheduler's
     * wake-up included), the run (upload, walk, download), the hand-back to
     * this callback, and the answer's formatting and posting to the loop. */
    if (hearth_log_get_level() <= HEARTH_LOG_DEBUG) {
        HLOG_DEBUG("frame %s: parse %.1f us, queue %.1f, run %.1f, done %.1f, answer %.1f",
                   r->name, (double)(r->t_parsed - r->t_handler) / 1e3, (double)(job->start_ns - r->t_parsed) / 1e3,
                   (double)(job->end_ns - job->start_ns) / 1e3, (double)(t_done - job->end_ns) / 1e3,
                   (double)(t_sent - t_done) / 1e3);
    }
    req_unref(r);
}

static void infer(hearth_request *req, hearth_api *api, hearth_frame_entry *e, const char *name)
{
    char enc[64];
    if (hearth_request_header(req, "Content-Encoding", enc, sizeof enc) && strcmp(enc, "identity") != 0) {
        respond_err(req, 415, "Content-Encoding '%s' is not taken: send the body uncompressed", enc);
        return;
    }
    uint64_t t_handler = hearth_now_ns();
    oip_req *r = calloc(1, sizeof *r);
    if (!r) {
        respond_err(req, 503, "out of memory");
        return;
    }
    r->t_handler = t_handler;
    r->model = e->model;
    r->stats = &g_stats[e - g_frames];
    r->in_set = -1;
    r->info = hearth_frame_model_info(e->model);
    snprintf(r->name, sizeof r->name, "%s", name);
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char hlen[64];
    const char *hl = hearth_request_header(req, "Inference-Header-Content-Length", hlen, sizeof hlen);
    if (hl && strlen(hl) >= sizeof hlen - 1) { /* the header is cut to fit: a cut number would be another */
        free(r);
        respond_err(req, 400, "model '%s': Inference-Header-Content-Length is %zu+ characters long, not a number of bytes", name,
                    sizeof hlen - 1);
        return;
    }
    char msg[1024];
    /* the inputs go straight into buffers the model keeps (a GPU's pinned);
     * a binary frame's tensor bytes may be there already (infer_sink) */
    void *dst[HEARTH_FRAME_MAX_IO];
    const hearth_body_sink *sk = hearth_request_take_sink(req);
    int st;
    if (sk) {
        sink_set *u = sk->user;
        r->in_set = u->set;
        free(u);
        dst[0] = sk->dst;
        st = hearth_oip_parse_split(r->info, name, body, len, true, sk->dst, r->info->inputs[0].bytes, dst, &r->parsed,
                                    msg, sizeof msg);
    } else {
        r->in_set = hearth_frame_model_inputs_take(e->model, dst);
        st = hearth_oip_parse_into(r->info, name, body, len, hl, r->in_set >= 0 ? dst : NULL, &r->parsed, msg,
                                   sizeof msg);
    }
    if (st) {
        req_free(r);
        respond_err(req, st, "model '%s': %s", name, msg);
        return;
    }
    for (int j = 0; j < r->info->n_outputs; j++) {
        /* room for what the runner writes (bytes) and what the answer reads (dims x element size) */
        const hearth_frame_io *io = &r->info->outputs[j];
        size_t need = hearth_oip_dtype_size(io->dtype);
        for (int d = 0; d < io->ndim; d++)
            need *= (size_t)io->dims[d];
        if (need < io->bytes)
            need = io->bytes;
        if (!(r->out[j] = malloc(need ? need : 1))) {
            req_free(r);
            respond_err(req, 503, "out of memory for the outputs of model '%s'", name);
            return;
        }
    }
    uint64_t now = hearth_now_ns();
    r->t_parsed = now;
    const hearth_oip_request *p = &r->parsed;
    r->timeout_us = p->timeout_us ? p->timeout_us : e->deadline_ns / 1000u;
    r->job.deadline_ns = r->timeout_us ? now + r->timeout_us * 1000u : 0;
    r->job.in = (const void *const *)r->parsed.in;
    r->job.out = r->out;
    r->job.has_seq = p->has_seq;
    memcpy(r->job.seq_id, p->seq_id, sizeof r->job.seq_id);
    r->job.seq_start = p->seq_start;
    r->job.seq_end = p->seq_end;
    r->job.done = on_done;
    r->job.user = r;
    r->server = api->server;
    atomic_store(&r->refs, 2); /* the queue's and the connection's */
    /* Deferred before it is queued: the queue may answer before submit returns. */
    r->reply = hearth_request_defer(req, on_release, r);
    if (e->spin_ns) {
        /* the I/O thread polls through the frame's expected run and spin_ns
         * past it: the answer, and a closed loop's next request, are taken
         * without its wake-up (the frame thread spins likewise after it) */
        hearth_reply_spin(api->server, r->reply, hearth_frame_queue_expected_ns(e->queue) + e->spin_ns);
    }
    hearth_server *server = r->server;
    const hearth_reply reply = r->reply; /* r may be gone once submitted and answered */
    if (hearth_frame_queue_submit(e->queue, &r->job) != 0) {
        snprintf(msg, sizeof msg, "model '%s': too many frames are waiting: retry later", name);
        reply_err(r->server, r->reply, 429, msg);
        hearth_oip_stats_fail(r->stats, hearth_now_ns() - r->t_handler);
        req_unref(r); /* the queue's reference: it never took the job */
        return;
    }
    uint64_t from, until;
    if (e->spin_ns && hearth_frame_queue_window(e->queue, &from, &until))
        hearth_reply_spin_window(server, reply, from, until); /* a paced client's next frame (frame_queue.h's Cadence) */
}

/* A binary frame's tensor bytes received straight into an input set the
 * model keeps (net/server.h's hearth_server_route_body_sink), so the
 * kernel's copy out of the socket is the only one: for a model of one
 * input whose request says (Inference-Header-Content-Length) that exactly
 * that input's bytes follow its JSON header. Anything else, or no free
 * set, takes the connection's buffer and the parse's copy. The handler's
 * parse of a 0.9 MB RFB-320 frame (HEARTH_OIP_SINK=0 against the sink,
 * `--log-level debug`'s per-frame line, 2-core EPYC, p50 of ~1,300
 * frames, two rounds): 85.4 and 99.0 us against 16.1 and 13.0 (stop 42;
 * 73 us on the H100 host at stop 35). Where the model spins
 * (--frame-spin-us on a GPU) the I/O thread polls while the tensor comes
 * too, not only from the frame's submit on. HEARTH_OIP_SINK=0: never;
 * HEARTH_OIP_SINK_SPIN=0: no polling for the body (both read once). */
static void sink_give(void *user)
{
    sink_set *u = user;
    hearth_frame_model_inputs_give(u->model, u->set);
    free(u);
}

static bool infer_sink(const hearth_request *req, void *ctx, hearth_body_sink *sink)
{
    static int on = -1, spin = -1;
    if (on < 0) {
        const char *v = getenv("HEARTH_OIP_SINK"), *w = getenv("HEARTH_OIP_SINK_SPIN");
        on = !(v && strcmp(v, "0") == 0);
        spin = !(w && strcmp(w, "0") == 0);
    }
    hearth_api *api = ctx;
    if (!on || !atomic_load(&api->ready))
        return false;
    size_t n, vlen, len, json;
    const char *rest = hearth_request_rest(req, &n), *version;
    char name[sizeof api->models[0].name], hlen[64];
    int action;
    hearth_frame_entry *e = find_model(rest, &n, api, &action, name, sizeof name, &version, &vlen);
    if (!e || action != ACT_INFER || (version && !(vlen == 1 && version[0] == '1')))
        return false;
    const hearth_frame_info *info = hearth_frame_model_info(e->model);
    hearth_request_body(req, &len);
    const char *hl = hearth_request_header(req, "Inference-Header-Content-Length", hlen, sizeof hlen);
    if (info->n_inputs != 1 || !hl || strlen(hl) >= sizeof hlen - 1 || hearth_oip_header_len(hl, len, &json, NULL, 0) ||
        len - json != info->inputs[0].bytes || info->inputs[0].bytes == 0)
        return false;
    sink_set *u = malloc(sizeof *u);
    void *dst[HEARTH_FRAME_MAX_IO];
    if (!u)
        return false;
    u->model = e->model;
    if ((u->set = hearth_frame_model_inputs_take(e->model, dst)) < 0) {
        free(u);
        return false;
    }
    *sink = (hearth_body_sink){
        .keep = json, .dst = dst[0], .release = sink_give, .user = u, .spin_ns = spin ? e->spin_ns : 0};
    return true;
}

static void model_post(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    char name[sizeof api->models[0].name];
    int action;
    if (!ready_or_respond(req, api))
        return;
    hearth_frame_entry *e = model_of(req, api, &action, name, sizeof name);
    if (!e)
        return;
    if (action != ACT_INFER) {
        respond_err(req, 405, "POST is for /v2/models/%s/infer", name);
        return;
    }
    infer(req, api, e, name);
}

/* What the loop weighs of an infer body (net/server.h's
 * hearth_server_route_parse_bytes): with the binary tensor extension only
 * the JSON header is parsed, the tensors after it are copied (into an
 * input set the model keeps), so a frame's body is handled on the loop
 * thread that received it: on the handler pool, a 0.9 MB frame's parse
 * took 133-178 us reading bytes another core had received, for a copy of
 * ~35 us (stop 33's per-frame trace, H100 host). A header the parse will
 * refuse counts the whole body: the refusal comes from the pool. */
static size_t infer_parse_bytes(const hearth_request *req, void *ctx)
{
    size_t len, json;
    hearth_request_body(req, &len);
    char hlen[64];
    const char *hl = hearth_request_header(req, "Inference-Header-Content-Length", hlen, sizeof hlen);
    if (!hl || strlen(hl) >= sizeof hlen - 1 || hearth_oip_header_len(hl, len, &json, NULL, 0) != 0)
        return len;
    return json;
}

int hearth_api_register_oip(hearth_api *api, hearth_server *s)
{
    int rc = hearth_server_route_flags(s, "GET", "/v2/health/live", health_live, api, HEARTH_ROUTE_PUBLIC);
    if (!rc)
        rc = hearth_server_route_flags(s, "GET", "/v2/health/ready", health_ready, api, HEARTH_ROUTE_PUBLIC);
    if (!rc)
        rc = hearth_server_route(s, "GET", "/v2", server_metadata, api);
    if (!rc)
        rc = hearth_server_route(s, "GET", "/v2/models/{m}", model_get, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/v2/models/{m}", model_post, api);
    if (!rc)
        rc = hearth_server_route_parse_bytes(s, "POST", "/v2/models/{m}", infer_parse_bytes);
    if (!rc)
        rc = hearth_server_route_body_sink(s, "POST", "/v2/models/{m}", infer_sink);
    return rc;
}

/* ---- /metrics ---- */

int hearth_api_oip_metrics(hearth_api *api, hearth_buf *out)
{
    int n = api == g_api ? atomic_load_explicit(&g_n_frames, memory_order_acquire) : 0;
    if (!n)
        return 0;
    int rc = hearth_buf_appends(out, "# TYPE hearth_frames_total counter\n# TYPE hearth_frame_misses_total counter\n"
                                     "# TYPE hearth_frame_late_total counter\n# TYPE hearth_frame_failed_total counter\n"
                                     "# TYPE hearth_frame_sequences_live gauge\n# TYPE hearth_frame_latency_seconds histogram\n"
                                     "# TYPE hearth_frame_paced_windows_total counter\n# TYPE hearth_frame_paced_hits_total counter\n");
    for (int i = 0; i < n && !rc; i++) {
        hearth_frame_queue_stats q;
        hearth_frame_queue_get_stats(g_frames[i].queue, &q);
        const char *m = g_frames[i].info->name;
        rc = hearth_buf_printf(out,
                               "hearth_frames_total{model=\"%s\"} %llu\nhearth_frame_misses_total{model=\"%s\"} %llu\n"
                               "hearth_frame_late_total{model=\"%s\"} %llu\nhearth_frame_failed_total{model=\"%s\"} %llu\n"
                               "hearth_frame_sequences_live{model=\"%s\"} %d\n"
                               "hearth_frame_paced_windows_total{model=\"%s\"} %llu\nhearth_frame_paced_hits_total{model=\"%s\"} %llu\n",
                               m, (unsigned long long)q.frames, m, (unsigned long long)q.misses, m, (unsigned long long)q.late, m,
                               (unsigned long long)q.failed, m, q.seq_live, m, (unsigned long long)q.paced_windows, m,
                               (unsigned long long)q.paced_hits);
        uint64_t cum = 0;
        for (int b = 0; b < HEARTH_FRAME_HIST_N && !rc; b++) {
            cum += q.hist[b];
            rc = hearth_buf_printf(out, "hearth_frame_latency_seconds_bucket{model=\"%s\",le=\"%g\"} %llu\n", m,
                                   hearth_frame_hist_ms[b] / 1000.0, (unsigned long long)cum);
        }
        cum += q.hist[HEARTH_FRAME_HIST_N];
        if (!rc)
            rc = hearth_buf_printf(out,
                                   "hearth_frame_latency_seconds_bucket{model=\"%s\",le=\"+Inf\"} %llu\n"
                                   "hearth_frame_latency_seconds_sum{model=\"%s\"} %.6f\n"
                                   "hearth_frame_latency_seconds_count{model=\"%s\"} %llu\n",
                                   m, (unsigned long long)cum, m, q.latency_sum_s, m, (unsigned long long)cum);
    }
    return rc;
}

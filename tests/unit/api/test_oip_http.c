/* The Open Inference Protocol routes (api/oip.c) over real HTTP, in
 * process: a hearth server on a free port with the /v2 routes, serving a
 * fake stateful frame model (out = in + state; state = out) through a real
 * frame queue. Covers the deferred-reply path of infer (JSON and binary
 * answers, their headers), metadata and health, 400/404/429/504 with
 * Triton's {"error": "..."} body, sequences, a client that disconnects
 * while its frame waits (cancelled, never run), and the /metrics text.
 * tests/api/test_oip.py covers the same with tritonclient on a real model.
 *
 * The model behind the entry is a fake, so the calls oip.c makes into
 * models/frame_model.c (hearth_frame_model_info and the pinned input sets,
 * which a fake model has none of) are defined here, weak: this file must not
 * pull models/frame_model.o out of libmodels.a (nothing it links calls
 * another function of it), or the real ones would take the fake pointer. */
#include "harness.h"

#include "api/oip.h"
#include "api/oip_models.h"
#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "engine/frame_queue.h"
#include "models/onnx.h"
#include "net/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 2

static const hearth_frame_io IN[1] = {{"x", HEARTH_ONNX_FLOAT, 2, {1, 4}, 16}};
static const hearth_frame_io OUT[1] = {{"y", HEARTH_ONNX_FLOAT, 2, {1, 4}, 16}};
static const hearth_frame_info INFO = {"fake.onnx", "onnxruntime_onnx", 13, 1, 1, IN, OUT, 1, SLOTS, "cpu"};

typedef struct fake {
    float state[SLOTS][4];
    _Atomic int run_ms, runs, in_run;
} fake;

static fake g_fake;

__attribute__((weak)) const hearth_frame_info *hearth_frame_model_info(const hearth_frame_model *m)
{
    (void)m;
    return &INFO;
}

/* Two input sets, as a model keeps them (frame.h): taken and given back
 * counted, so a test can see none is lost (a binary frame's body goes
 * straight into one: oip.c's infer_sink). */
#define SETS 2
static float g_sets[SETS][4];
static atomic_int g_set_used[SETS], g_takes, g_gives;

__attribute__((weak)) int hearth_frame_model_inputs_take(hearth_frame_model *m, void **in)
{
    (void)m;
    for (int s = 0; s < SETS; s++) {
        int free_ = 0;
        if (atomic_compare_exchange_strong(&g_set_used[s], &free_, 1)) {
            in[0] = g_sets[s];
            atomic_fetch_add(&g_takes, 1);
            return s;
        }
    }
    return -1;
}

__attribute__((weak)) void hearth_frame_model_inputs_give(hearth_frame_model *m, int set)
{
    (void)m;
    if (set < 0 || set >= SETS)
        return;
    CHECK_MSG(atomic_exchange(&g_set_used[set], 0) == 1, "input set %d given back twice", set);
    atomic_fetch_add(&g_gives, 1);
}

/* Waits up to 2 s for every input set taken to be given back. */
static bool sets_all_back(void)
{
    for (int i = 0; i < 2000 && atomic_load(&g_takes) != atomic_load(&g_gives); i++)
        usleep(1000);
    return atomic_load(&g_takes) == atomic_load(&g_gives);
}

static int fake_run(void *model, int slot, bool reset, const void *const *in, void *const *out, hearth_err *err)
{
    fake *f = model;
    atomic_store(&f->in_run, 1);
    if (atomic_load(&f->run_ms)) {
        struct timespec d = {0, atomic_load(&f->run_ms) * 1000000L};
        nanosleep(&d, NULL);
    }
    float zero[4] = {0}, *st = slot >= 0 ? f->state[slot] : zero;
    if (reset)
        memset(st, 0, sizeof zero);
    const float *x = in[0];
    float *y = out[0];
    for (int k = 0; k < 4; k++)
        st[k] = y[k] = x[k] + st[k];
    atomic_fetch_add(&f->runs, 1);
    atomic_store(&f->in_run, 0);
    (void)err;
    return 0;
}

static hearth_server *g_srv;
static hearth_api g_api;
static hearth_frame_queue *g_q, *g_qp; /* g_qp: lead_ns set (test_paced_window) */
static int g_port;

static void *serve_main(void *arg)
{
    (void)arg;
    hearth_server_run(g_srv);
    return NULL;
}

/* ---- a tiny HTTP client: one request per connection ---- */

typedef struct resp {
    int status;
    char head[4096];
    char *body;
    size_t len;
} resp;

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void send_req(int fd, const char *method, const char *path, const char *extra, const void *body, size_t len)
{
    char head[1024];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n%s\r\n", method,
                     path, len, extra ? extra : "");
    CHECK(write(fd, head, (size_t)n) == n);
    if (len)
        CHECK(write(fd, body, len) == (ssize_t)len);
}

static void read_resp(int fd, resp *r)
{
    hearth_buf b;
    hearth_buf_init(&b, 1 << 24);
    char chunk[8192];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        hearth_buf_append(&b, chunk, (size_t)n);
    close(fd);
    memset(r, 0, sizeof *r);
    char *end = b.data ? strstr(b.data, "\r\n\r\n") : NULL;
    if (!end) {
        hearth_buf_deinit(&b);
        r->body = calloc(1, 1);
        return;
    }
    size_t hl = (size_t)(end - b.data);
    snprintf(r->head, sizeof r->head, "%.*s", (int)hl, b.data);
    sscanf(b.data, "HTTP/1.1 %d", &r->status);
    r->len = b.len - hl - 4;
    r->body = malloc(r->len + 1);
    memcpy(r->body, end + 4, r->len);
    r->body[r->len] = 0;
    hearth_buf_deinit(&b);
}

static void http(const char *method, const char *path, const char *extra, const void *body, size_t len, resp *r)
{
    int fd = dial();
    CHECK(fd >= 0);
    send_req(fd, method, path, extra, body, len);
    read_resp(fd, r);
}

static void post_json(const char *path, const char *json, resp *r)
{
    http("POST", path, "Content-Type: application/json\r\n", json, strlen(json), r);
}

/* Checks status and a Triton error body holding needle. */
static void check_error(resp *r, int status, const char *needle)
{
    CHECK_MSG(r->status == status, "%d != %d: %s", r->status, status, r->body);
    CHECK_MSG(strncmp(r->body, "{\"error\":\"", 10) == 0, "%s", r->body);
    CHECK_MSG(strstr(r->body, needle) != NULL, "'%s' not in %s", needle, r->body);
    free(r->body);
}

static const char *FRAME_X = "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[1,1,1,1]}";

static void frame_seq(const char *params, resp *r)
{
    char b[512];
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{%s}}", FRAME_X, params);
    post_json("/v2/models/fake/infer", b, r);
}

static void test_health_and_metadata(void)
{
    resp r;
    http("GET", "/v2/health/live", NULL, NULL, 0, &r);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    http("GET", "/v2/health/ready", NULL, NULL, 0, &r);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    http("GET", "/v2", NULL, NULL, 0, &r);
    CHECK(r.status == 200 && strstr(r.body, "\"name\":\"hearth\"") && strstr(r.body, "binary_tensor_data"));
    free(r.body);
    const char *paths[2] = {"/v2/models/fake", "/v2/models/fake/versions/1"};
    for (int i = 0; i < 2; i++) {
        http("GET", paths[i], NULL, NULL, 0, &r);
        CHECK_MSG(r.status == 200 && strstr(r.body, "\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4]}]"), "%s",
                  r.body);
        free(r.body);
    }
    http("GET", "/v2/models/fake/ready", NULL, NULL, 0, &r);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    http("GET", "/v2/models/fake/versions/1/ready", NULL, NULL, 0, &r);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    http("GET", "/v2/models/fake/versions/2", NULL, NULL, 0, &r);
    check_error(&r, 404, "no version '2'");
    http("GET", "/v2/models/nope", NULL, NULL, 0, &r);
    check_error(&r, 404, "unknown model 'nope'");
    http("GET", "/v2/models/nope/ready", NULL, NULL, 0, &r);
    check_error(&r, 404, "'fake'");
}

static void test_infer_json_and_binary(void)
{
    resp r;
    post_json("/v2/models/fake/infer",
              "{\"id\":\"f1\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[[0.5,2,3,-4]]}]}", &r);
    CHECK_MSG(r.status == 200, "%s", r.body);
    CHECK(strstr(r.head, "Content-Type: application/json") != NULL);
    CHECK(strstr(r.head, "Inference-Header-Content-Length") == NULL);
    CHECK_MSG(strstr(r.body, "\"model_name\":\"fake\",\"model_version\":\"1\",\"id\":\"f1\"") &&
                  strstr(r.body, "\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[0.5,2,3,-4]"),
              "%s", r.body);
    free(r.body);

    const char *hdr = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4],\"parameters\":{\"binary_data_size\":16}}],"
                      "\"parameters\":{\"binary_data_output\":true}}";
    char body[512], extra[128];
    size_t hl = strlen(hdr);
    float x[4] = {0.1f, 1e-30f, -7, 3.25f};
    memcpy(body, hdr, hl);
    memcpy(body + hl, x, 16);
    snprintf(extra, sizeof extra, "Inference-Header-Content-Length: %zu\r\n", hl);
    http("POST", "/v2/models/fake/versions/1/infer", extra, body, hl + 16, &r);
    CHECK_MSG(r.status == 200, "%s", r.body);
    CHECK(strstr(r.head, "Content-Type: application/octet-stream") != NULL);
    const char *h = strstr(r.head, "Inference-Header-Content-Length: ");
    CHECK(h != NULL);
    if (h) {
        size_t jl = (size_t)atol(h + 33);
        CHECK_EQ_INT(r.len, jl + 16);
        CHECK(jl <= r.len && memcmp(r.body + jl, x, 16) == 0);
        CHECK(strstr(r.body, "\"parameters\":{\"binary_data_size\":16}") != NULL);
    }
    free(r.body);
}

/* A binary frame's tensor bytes go straight into an input set (oip.c's
 * infer_sink, net/server.h's body sink): sent whole, in pieces split
 * inside the JSON header, at its end and inside the tensor bytes; two
 * frames pipelined in one write behind each other; a client that leaves
 * mid-tensor (its set comes back); a tensor of the wrong size (no sink:
 * the parse's own error). Each answer carries its own input back (the
 * fake adds no state without a sequence), and every set taken is given
 * back. */
static void binary_frame(char *body, size_t *len, const float x[4], char *extra, size_t extra_n)
{
    const char *hdr = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4],\"parameters\":{\"binary_data_size\":16}}],"
                      "\"parameters\":{\"binary_data_output\":true}}";
    size_t hl = strlen(hdr);
    memcpy(body, hdr, hl);
    memcpy(body + hl, x, 16);
    *len = hl + 16;
    snprintf(extra, extra_n, "Inference-Header-Content-Length: %zu\r\n", hl);
}

/* The binary answer in r carries y == x. */
static void check_binary_answer(const char *resp_body, size_t resp_len, const float x[4])
{
    const char *j = strstr(resp_body, "\"binary_data_size\":16");
    CHECK_MSG(j != NULL && resp_len >= 16, "%.300s", resp_body);
    if (j && resp_len >= 16)
        CHECK_MSG(memcmp(resp_body + resp_len - 16, x, 16) == 0, "the answer's tensor is not the frame's");
}

static void test_binary_sink(void)
{
    char body[512], extra[128];
    size_t len;
    resp r;
    const float x1[4] = {1.5f, -2, 3, 4e-20f}, x2[4] = {-1, 0.25f, 9, 7};
    int takes0 = atomic_load(&g_takes);
    binary_frame(body, &len, x1, extra, sizeof extra);
    http("POST", "/v2/models/fake/infer", extra, body, len, &r);
    CHECK_MSG(r.status == 200, "%s", r.body);
    check_binary_answer(r.body, r.len, x1);
    free(r.body);
    CHECK(atomic_load(&g_takes) > takes0); /* the frame went through a set */

    /* in pieces: inside the JSON, at its end, inside the tensor */
    binary_frame(body, &len, x2, extra, sizeof extra);
    size_t hl = len - 16;
    size_t cuts[] = {0, 10, hl, hl + 1, hl + 7, len};
    int fd = dial();
    CHECK(fd >= 0);
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST /v2/models/fake/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n%s\r\n",
                      len, extra);
    int before = atomic_load(&g_takes);
    CHECK(write(fd, head, (size_t)hn) == hn);
    usleep(50000);
    /* taken with the head, before any body byte: the body goes straight into it */
    CHECK_MSG(atomic_load(&g_takes) == before + 1, "%d input sets taken at the head", atomic_load(&g_takes) - before);
    for (size_t i = 0; i + 1 < sizeof cuts / sizeof cuts[0]; i++) {
        usleep(20000);
        CHECK(write(fd, body + cuts[i], cuts[i + 1] - cuts[i]) == (ssize_t)(cuts[i + 1] - cuts[i]));
    }
    read_resp(fd, &r);
    CHECK_MSG(r.status == 200, "%s", r.body);
    check_binary_answer(r.body, r.len, x2);
    free(r.body);

    /* two frames pipelined in one write: the second's bytes follow the first's tensor */
    char both[2048];
    size_t n = 0, len2;
    char body2[512], extra2[128];
    binary_frame(body, &len, x1, extra, sizeof extra);
    binary_frame(body2, &len2, x2, extra2, sizeof extra2);
    n += (size_t)snprintf(both + n, sizeof both - n,
                          "POST /v2/models/fake/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n%s\r\n", len, extra);
    memcpy(both + n, body, len), n += len;
    n += (size_t)snprintf(both + n, sizeof both - n,
                          "POST /v2/models/fake/infer HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n%s\r\n",
                          len2, extra2);
    memcpy(both + n, body2, len2), n += len2;
    fd = dial();
    CHECK(fd >= 0);
    CHECK(write(fd, both, n) == (ssize_t)n);
    read_resp(fd, &r); /* both answers: the first's head, then its body and the second whole */
    CHECK_MSG(r.status == 200, "%s", r.body);
    const char *second = memmem(r.body, r.len, "HTTP/1.1 200", 12); /* the tensors hold zero bytes */
    CHECK_MSG(second != NULL, "no second answer: %.300s", r.body);
    if (second) {
        check_binary_answer(r.body, (size_t)(second - r.body), x1);
        const char *b2 = memmem(second, r.len - (size_t)(second - r.body), "\r\n\r\n", 4);
        CHECK(b2 != NULL);
        if (b2)
            check_binary_answer(b2 + 4, r.len - (size_t)(b2 + 4 - r.body), x2);
    }
    free(r.body);

    /* a client that leaves mid-tensor: its set comes back */
    fd = dial();
    CHECK(fd >= 0);
    hn = snprintf(head, sizeof head, "POST /v2/models/fake/infer HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n%s\r\n", len,
                  extra);
    CHECK(write(fd, head, (size_t)hn) == hn);
    CHECK(write(fd, body, len - 9) == (ssize_t)(len - 9));
    usleep(50000);
    close(fd);
    CHECK_MSG(sets_all_back(), "%d input sets taken, %d given back", atomic_load(&g_takes), atomic_load(&g_gives));

    /* a tensor of the wrong size: no sink, the parse's own 400 */
    const char *bad = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,4],\"parameters\":{\"binary_data_size\":16}}]}";
    size_t bl = strlen(bad);
    memcpy(body, bad, bl);
    memset(body + bl, 0, 20);
    snprintf(extra, sizeof extra, "Inference-Header-Content-Length: %zu\r\n", bl);
    http("POST", "/v2/models/fake/infer", extra, body, bl + 20, &r);
    check_error(&r, 400, "20 bytes follow the JSON header");
    CHECK_MSG(sets_all_back(), "%d input sets taken, %d given back", atomic_load(&g_takes), atomic_load(&g_gives));
}

static double process_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU the process burns over 40 ms while model's frame waits for its last
 * 9 tensor bytes; then the frame is finished and answered. */
static double cpu_mid_tensor(const char *model)
{
    char body[512], extra[128], head[512], path[64];
    size_t len;
    const float x[4] = {2, -3, 0.5f, 8};
    resp r;
    binary_frame(body, &len, x, extra, sizeof extra);
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    int fd = dial();
    CHECK(fd >= 0);
    int hn = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n%s\r\n",
                      path, len, extra);
    CHECK(write(fd, head, (size_t)hn) == hn);
    CHECK(write(fd, body, len - 9) == (ssize_t)(len - 9));
    usleep(5000); /* the loop has taken the pieces */
    double c0 = process_cpu_ms();
    usleep(40000);
    double cpu = process_cpu_ms() - c0;
    CHECK(write(fd, body + len - 9, 9) == 9);
    read_resp(fd, &r);
    CHECK_MSG(r.status == 200, "%s", r.body);
    check_binary_answer(r.body, r.len, x);
    free(r.body);
    return cpu;
}

/* A model that spins (hearth_frame_entry.spin_ns, a GPU's --frame-spin-us)
 * has its I/O thread poll while a binary frame's tensor comes, up to
 * spin_ns past each piece: "spinner" (spin_ns 200 ms) burns the wait, fake
 * (0) sleeps through it. */
static void test_sink_spin(void)
{
    double slept = cpu_mid_tensor("fake"), spun = cpu_mid_tensor("spinner");
    CHECK_MSG(slept < 8.0 && spun > 12.0, "CPU over a 40 ms pause mid-tensor: %.1f ms without spin, %.1f with", slept, spun);
    CHECK_MSG(sets_all_back(), "%d input sets taken, %d given back", atomic_load(&g_takes), atomic_load(&g_gives));
}

static void sleep_until(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Each thread's time on a CPU (ns), from /proc/self/task/TID/schedstat:
 * up to max threads, their ids in tid. Returns how many were read. */
static int thread_cpu_ns(int *tid, uint64_t *ns, int max)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && n < max && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[128];
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        unsigned long long v;
        if (f && fscanf(f, "%llu", &v) == 1) {
            tid[n] = atoi(e->d_name);
            ns[n++] = v;
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

/* Frames to model 30 ms apart until the queue has a window for the next
 * (4 to 10 of them); then how many of the process's threads spent at
 * least a fifth of that window (from 1 ms before it: the I/O thread's
 * waits enter it up to 1 ms early) on a CPU: 1 where only the frame
 * thread polls it, 2 where the connection's thread does too. Threads are
 * counted, not CPU summed, so a busy machine sharing its cores among the
 * pollers cannot hide one. -1: no window came. */
static int threads_polling_window(const char *model)
{
    char b[256], path[64];
    snprintf(b, sizeof b, "{\"inputs\":[%s]}", FRAME_X);
    snprintf(path, sizeof path, "/v2/models/%s/infer", model);
    uint64_t at = hearth_now_ns(), from = 0, until = 0;
    for (int i = 0; i < 10; i++) {
        if (i)
            at += 30 * 1000000ull;
        sleep_until(at);
        resp r;
        post_json(path, b, &r);
        CHECK_MSG(r.status == 200, "%s", r.body);
        free(r.body);
        if (i >= 3 && hearth_frame_queue_window(g_qp, &from, &until))
            break;
        until = 0;
    }
    if (!until)
        return -1;
    from -= 1000000u;
    enum { MAXT = 256 };
    int tid0[MAXT], tid1[MAXT];
    uint64_t ns0[MAXT], ns1[MAXT];
    sleep_until(from);
    int n0 = thread_cpu_ns(tid0, ns0, MAXT);
    sleep_until(until);
    int n1 = thread_cpu_ns(tid1, ns1, MAXT), busy = 0;
    for (int i = 0; i < n1; i++)
        for (int j = 0; j < n0; j++)
            if (tid1[i] == tid0[j] && ns1[i] - ns0[j] >= (until - from) / 5)
                busy++;
    return busy;
}

/* A paced client's next frame (frame_queue.h's Cadence): where the entry
 * spins (a GPU's model) the connection's I/O thread polls through the
 * window where the next frame is due, beside the frame thread; where it
 * does not (a CPU's), only the frame thread does. Both entries share a
 * queue with lead_ns 5 ms, so the difference is the I/O thread's window.
 * Best of three: CI's shared cores can starve a polling thread. */
static void test_paced_window(void)
{
    int io = 0, frame_only = 0;
    usleep(300000); /* test_sink_spin's connection left its I/O thread polling for 200 ms */
    for (int attempt = 0; attempt < 3; attempt++) {
        io = threads_polling_window("paced");
        frame_only = threads_polling_window("paced-cpu");
        if (io == 2 && frame_only == 1)
            break;
    }
    CHECK_MSG(io == 2 && frame_only == 1,
              "threads polling a paced frame's window: %d with the I/O thread's window (2 wanted), %d without "
              "(1 wanted; -1: no window came)", io, frame_only);
}

static void test_errors(void)
{
    resp r;
    post_json("/v2/models/fake/infer", "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[4],\"data\":[1,2,3,4]}]}", &r);
    check_error(&r, 400, "input 'x': shape [4] but the model takes [1,4]");
    post_json("/v2/models/fake/infer", "{\"inputs\":", &r);
    check_error(&r, 400, "JSON");
    post_json("/v2/models/nope/infer", "{}", &r);
    check_error(&r, 404, "unknown model 'nope'");
    post_json("/v2/models/fake/versions/7/infer", "{}", &r);
    check_error(&r, 404, "version '7'");
    post_json("/v2/models/fake", "{}", &r);
    check_error(&r, 405, "infer");
    http("POST", "/v2/models/fake/infer", "Content-Encoding: gzip\r\n", "x", 1, &r);
    check_error(&r, 415, "gzip");
    char b[256];
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"timeout\":1}}", FRAME_X);
    post_json("/v2/models/fake/infer", b, &r);
    check_error(&r, 504, "could not make its deadline of 1 us");
}

static void test_sequences(void)
{
    resp r;
    frame_seq("\"sequence_id\":5,\"sequence_start\":true", &r);
    CHECK_MSG(r.status == 200 && strstr(r.body, "\"data\":[1,1,1,1]"), "%s", r.body);
    free(r.body);
    frame_seq("\"sequence_id\":\"5\"", &r); /* 5 and "5" are one sequence */
    CHECK_MSG(r.status == 200 && strstr(r.body, "\"data\":[2,2,2,2]"), "%s", r.body);
    free(r.body);
    frame_seq("\"sequence_id\":5,\"sequence_end\":true", &r);
    CHECK_MSG(r.status == 200 && strstr(r.body, "\"data\":[3,3,3,3]"), "%s", r.body);
    free(r.body);
    frame_seq("\"sequence_id\":5", &r);
    check_error(&r, 400, "sequence '5' already ended");
    frame_seq("\"sequence_id\":\"ghost\"", &r);
    check_error(&r, 400, "sequence 'ghost' was never started");
    frame_seq("\"sequence_id\":1,\"sequence_start\":true", &r);
    free(r.body);
    frame_seq("\"sequence_id\":2,\"sequence_start\":true", &r);
    free(r.body);
    frame_seq("\"sequence_id\":3,\"sequence_start\":true", &r);
    check_error(&r, 429, "all 2 sequence slots are taken");
    frame_seq("\"sequence_id\":1,\"sequence_end\":true", &r);
    CHECK_MSG(r.status == 200 && strstr(r.body, "\"data\":[2,2,2,2]"), "%s", r.body);
    free(r.body);
    frame_seq("\"sequence_id\":2,\"sequence_end\":true", &r);
    free(r.body);
}

/* A client that goes away while its frame waits: the frame is skipped. A
 * full queue: 429. */
static void test_cancel_and_queue_full(void)
{
    hearth_frame_queue_stats st0, st;
    hearth_frame_queue_get_stats(g_q, &st0);
    atomic_store(&g_fake.run_ms, 300);
    char b[256];
    snprintf(b, sizeof b, "{\"inputs\":[%s]}", FRAME_X);
    const char *ct = "Content-Type: application/json\r\n";
    int a = dial();
    send_req(a, "POST", "/v2/models/fake/infer", ct, b, strlen(b));
    for (int i = 0; i < 2000 && !atomic_load(&g_fake.in_run); i++)
        usleep(1000);
    CHECK(atomic_load(&g_fake.in_run));
    int c = dial(); /* waits behind a, then goes away */
    send_req(c, "POST", "/v2/models/fake/infer", ct, b, strlen(b));
    usleep(50000);
    close(c);
    int d = dial(); /* the queue holds one waiting frame (c's, until a ends): d is refused or waits */
    send_req(d, "POST", "/v2/models/fake/infer", ct, b, strlen(b));
    resp r;
    read_resp(a, &r);
    CHECK_EQ_INT(r.status, 200);
    free(r.body);
    read_resp(d, &r);
    CHECK_MSG(r.status == 429 || r.status == 200, "%d %s", r.status, r.body);
    if (r.status == 429)
        CHECK(strstr(r.body, "too many frames are waiting") != NULL);
    free(r.body);
    atomic_store(&g_fake.run_ms, 0);
    hearth_frame_queue_get_stats(g_q, &st);
    CHECK_EQ_INT(st.cancelled - st0.cancelled, 1);
}

static void test_metrics(void)
{
    hearth_buf b;
    hearth_buf_init(&b, 1 << 20);
    CHECK_EQ_INT(hearth_api_oip_metrics(&g_api, &b), 0);
    hearth_frame_queue_stats st;
    hearth_frame_queue_get_stats(g_q, &st);
    char want[128];
    snprintf(want, sizeof want, "hearth_frames_total{model=\"fake\"} %llu\n", (unsigned long long)st.frames);
    CHECK_MSG(strstr(b.data, want) != NULL, "%s", b.data);
    CHECK(strstr(b.data, "hearth_frame_late_total{model=\"fake\"} 1\n") != NULL);
    CHECK(strstr(b.data, "hearth_frame_sequences_live{model=\"fake\"} 0\n") != NULL);
    snprintf(want, sizeof want, "hearth_frame_latency_seconds_bucket{model=\"fake\",le=\"+Inf\"} %llu\n",
             (unsigned long long)st.frames);
    CHECK_MSG(strstr(b.data, want) != NULL, "%s", b.data);
    CHECK(strstr(b.data, "hearth_frame_latency_seconds_bucket{model=\"fake\",le=\"0.00025\"}") != NULL);
    CHECK(strstr(b.data, "# TYPE hearth_frame_latency_seconds histogram") != NULL);
    hearth_buf_deinit(&b);
    hearth_api other = {0};
    hearth_buf_init(&b, 1 << 20);
    CHECK_EQ_INT(hearth_api_oip_metrics(&other, &b), 0);
    CHECK_EQ_INT(b.len, 0);
    hearth_buf_deinit(&b);
}

/* The queue goes while the server's loops still exist, as `hearth serve`
 * unloads its models in the process-exit hook: its timer thread may still be
 * answering a swept frame, and an answer after the loops were freed wrote
 * through a NULL io (CI's ASan run of test_cancel_and_queue_full). */
static void free_queue_at_exit(hearth_server *s, void *ctx)
{
    hearth_frame_queue_free(g_q);
    hearth_frame_queue_free(g_qp);
    g_q = g_qp = NULL;
}

int main(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the server's sigwait takes hearth_server_shutdown's SIGTERM */
    hearth_log_set_level(HEARTH_LOG_WARN);

    hearth_frame_runner run = {&g_fake, SLOTS, fake_run, NULL};
    hearth_frame_queue_opts o;
    hearth_frame_queue_opts_default(&o);
    o.max_jobs = 1;
    hearth_err err = {0};
    g_q = hearth_frame_queue_new(&run, &o, &err);
    o.keepalive = false;
    o.lead_ns = 5 * 1000000ull;
    g_qp = g_q ? hearth_frame_queue_new(&run, &o, &err) : NULL;
    hearth_server_config cfg;
    hearth_server_config_default(&cfg);
    cfg.port = 0;
    g_srv = g_qp ? hearth_server_new(&cfg, &err) : NULL;
    if (!g_srv) {
        printf("not ok - setup: %s\n", err.msg);
        return 1;
    }
    static hearth_api_model info = {"fake", "vision", "fake.onnx", false, 0};
    g_api.server = g_srv;
    atomic_store(&g_api.ready, 1);
    hearth_frame_entry e = {&info, (hearth_frame_model *)&g_fake, g_q, 0};
    /* the same model again, its I/O thread polling while a tensor comes (test_sink_spin) */
    static hearth_api_model info_spin = {"spinner", "vision", "fake.onnx", false, 0};
    hearth_frame_entry es = {&info_spin, (hearth_frame_model *)&g_fake, g_q, 0, 200 * 1000000ull};
    /* a model whose queue learns a paced client's gap, spinning (a GPU's) and not (test_paced_window) */
    static hearth_api_model info_paced = {"paced", "vision", "fake.onnx", false, 0};
    static hearth_api_model info_paced_cpu = {"paced-cpu", "vision", "fake.onnx", false, 0};
    hearth_frame_entry ep = {&info_paced, (hearth_frame_model *)&g_fake, g_qp, 0, 1000000ull};
    hearth_frame_entry epc = {&info_paced_cpu, (hearth_frame_model *)&g_fake, g_qp, 0, 0};
    if (hearth_api_register_oip(&g_api, g_srv) != 0 || hearth_api_oip_add_model(&g_api, &e) != 0 ||
        hearth_api_oip_add_model(&g_api, &es) != 0 || hearth_api_oip_add_model(&g_api, &ep) != 0 ||
        hearth_api_oip_add_model(&g_api, &epc) != 0) {
        printf("not ok - setup: routes\n");
        return 1;
    }
    hearth_server_on_process_exit(g_srv, free_queue_at_exit, NULL);
    pthread_t t;
    pthread_create(&t, NULL, serve_main, NULL);
    for (int i = 0; i < 5000 && !(g_port = hearth_server_port(g_srv)); i++)
        usleep(1000);
    if (!g_port) {
        printf("not ok - setup: the server did not bind\n");
        return 1;
    }
    RUN(test_health_and_metadata);
    RUN(test_infer_json_and_binary);
    RUN(test_binary_sink);
    RUN(test_sink_spin);
    RUN(test_paced_window);
    RUN(test_errors);
    RUN(test_sequences);
    RUN(test_cancel_and_queue_full);
    RUN(test_metrics);
    hearth_server_shutdown(g_srv);
    pthread_join(t, NULL);
    hearth_server_free(g_srv);
    hearth_api_oip_clear(&g_api);
    TEST_EXIT();
}

/* fuzz_gen_json.c: libFuzzer target for the generation APIs' request bodies:
 * llama-server's POST /completion, /tokenize ({"content": ...}) and
 * /detokenize, and OpenAI's POST /v1/completions and /v1/chat/completions.
 *
 * Their parsing is interleaved with the handlers (gen_common.c, completion.c,
 * openai_gen.c), which answer through net's request view, so the target
 * drives the real server: LLVMFuzzerInitialize writes the demo llama (random
 * weights, a byte-level vocabulary, ChatML) into a scratch folder, loads it
 * with a CTX-token context (a body asking for any n_predict / max_tokens
 * still generates at most that many tokens, so a run stays fast) and starts a
 * hearth server on a free loopback port in a thread of this process. Each
 * input is one request: the first byte picks the route (its low six bits)
 * and how the request goes (0x80: the body chunked; 0x40: the client hangs
 * up as soon as the answer begins, cancelling a stream mid-generation); the
 * rest is the body, posted over one kept-alive connection, and the answer is
 * read to its end.
 *
 * Checked, beyond "no sanitizer report in any thread of the server":
 *   - the answer is one complete HTTP/1.1 message (Content-Length or chunked)
 *     and nothing follows it;
 *   - its status is 200, or a 4xx / 503 whose body is
 *     {"error":{"code":<status>,"message":"..."}}: never a 500, nothing else;
 *   - a 200 is what the route promises: a JSON object holding the route's
 *     field, or with "stream": true, SSE events that each parse, hold no 500
 *     and end the way the API ends a stream ("stop": true; "data: [DONE]");
 *   - the prompt and the generated tokens together fit in the context.
 * A failure prints the route, the status and the answer, then aborts, so
 * libFuzzer saves the input. A body that hangs the server fails after
 * ANSWER_TIMEOUT_S. FUZZ_GEN_JSON_VERBOSE=1 prints each request's status and
 * the start of its answer, and the server's info log (to see what the seeds
 * reach).
 *
 * Rejected: calling the handlers with a made-up hearth_request (it is net's
 * private struct, and the answer's framing and the scheduler's reply path
 * would go unchecked); a server in a child process (a crash there would not
 * be libFuzzer's to report, keep and minimise). */
#include "api/api.h"
#include "api/models.h" /* hearth_api_load_gen_demo */
#include "base/log.h"
#include "net/server.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Positions per sequence: room for a two-message ChatML conversation (about
 * 30 tokens with the byte-level vocabulary) and a few generated tokens. Every
 * generated token costs a forward pass (about 5 ms here under ASan), and a
 * body that sets no n_predict fills the context: 48 keeps the slowest input
 * near a quarter of a second. */
#define CTX 48
#define ANSWER_TIMEOUT_S 30
#define ANSWER_MAX ((size_t)256 << 20)

static const char *const ROUTES[] = {"/completion", "/tokenize", "/detokenize", "/v1/completions", "/v1/chat/completions"};
enum { R_COMPLETION, R_TOKENIZE, R_DETOKENIZE, R_OAI_COMPLETIONS, R_OAI_CHAT, N_ROUTES };

static hearth_api g_api;
static hearth_server *g_server;
static int g_fd = -1;
static bool g_verbose; /* FUZZ_GEN_JSON_VERBOSE=1: each request's status and answer on stderr */

/* ---- failing ---- */

static const char *g_route = "";

static void fail(const char *why, const char *answer, size_t n)
{
    fprintf(stderr, "fuzz_gen_json: POST %s: %s\n", g_route, why);
    if (answer)
        fprintf(stderr, "--- answer (%zu bytes, first 4096 shown) ---\n%.*s\n---\n", n, (int)(n > 4096 ? 4096 : n), answer);
    abort();
}

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "fuzz_gen_json: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

/* ---- the server ---- */

static void *server_main(void *arg)
{
    (void)arg;
    hearth_server_run(g_server);
    return NULL;
}

/* A connection to the server, or -1. */
static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {.tv_sec = ANSWER_TIMEOUT_S};
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rc;
    do
        rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_verbose = getenv("FUZZ_GEN_JSON_VERBOSE") != NULL;
    hearth_log_set_level(g_verbose ? HEARTH_LOG_INFO : HEARTH_LOG_WARN); /* else no access log line per input */
    const char *tmp = getenv("TMPDIR");
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/hearth-fuzz-gen-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        die("cannot make a scratch folder for the demo model under %s", tmp && *tmp ? tmp : "/tmp");

    hearth_api_config_default(&g_api.cfg);
    g_api.cfg.no_demo = true; /* load_models sets up the pools; the demo llama alone is added below */
    g_api.cfg.ctx_size = CTX;
    g_api.cfg.parallel = 2;
    g_api.cfg.cache_slots = 2; /* prefix reuse across inputs is exercised too */
    g_api.cfg.max_queue = 4;
    g_api.cfg.compute_threads = 1;
    g_api.cfg.embed_lanes = 1;

    hearth_server_config cfg;
    hearth_server_config_default(&cfg);
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.threads = 1;
    hearth_err err = {0};
    g_server = hearth_server_new(&cfg, &err);
    if (!g_server)
        die("cannot make the server: %s", err.msg);
    /* system: api->server and /health; tei: POST /tokenize, which hands
     * llama-server's {"content": ...} form to completion.c */
    if (hearth_api_register_system(&g_api, g_server) || hearth_api_register_tei(&g_api, g_server) ||
        hearth_api_register_generation(&g_api, g_server))
        die("%s", "cannot register the routes");
    if (hearth_api_load_models(&g_api, &err) || hearth_api_load_gen_demo(&g_api, dir, &err))
        die("cannot load the demo generation model: %s", err.msg);
    /* the model is mapped now: the files can go */
    char path[600];
    snprintf(path, sizeof path, "%s/demo-llama-tiny.gguf", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/demo-vocab.gguf", dir);
    unlink(path);
    rmdir(dir);

    pthread_t t;
    if (pthread_create(&t, NULL, server_main, NULL) != 0)
        die("%s", "cannot start the server thread");
    pthread_detach(t);
    /* the port is known once the thread has bound it */
    for (int i = 0; i < 1000 && g_fd < 0; i++) {
        int port = hearth_server_port(g_server);
        if (port > 0)
            g_fd = dial(port);
        if (g_fd < 0)
            nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    if (g_fd < 0)
        die("%s", "the server did not start listening within 10 s");
    return 0;
}

/* ---- the client ---- */

typedef struct {
    char *d;
    size_t len, cap;
} bytes;

static void bytes_add(bytes *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        if (cap > ANSWER_MAX)
            fail("the answer is larger than the target reads (256 MiB)", NULL, 0);
        b->d = realloc(b->d, cap);
        if (!b->d)
            abort();
        b->cap = cap;
    }
    memcpy(b->d + b->len, p, n);
    b->len += n;
}

static void bytes_adds(bytes *b, const char *s) { bytes_add(b, s, strlen(s)); }

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* Reads more bytes into b; false at the end of the stream. */
static bool recv_more(int fd, bytes *b)
{
    char tmp[65536];
    for (;;) {
        ssize_t k = recv(fd, tmp, sizeof tmp, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            fail("no complete answer within the timeout: the server hangs on this body", b->d, b->len);
        if (k <= 0)
            return false;
        bytes_add(b, tmp, (size_t)k);
        return true;
    }
}

typedef struct {
    int status;
    char content_type[128];
    bool close;
    bytes body; /* decoded */
} answer;

static const char *find(const char *hay, size_t n, const char *needle)
{
    return memmem(hay, n, needle, strlen(needle));
}

/* Reads one answer from g_fd into a. Returns false when the connection had
 * closed before the answer's first byte (an idle connection the server let
 * go: the caller reconnects and sends again); any other short or malformed
 * answer fails. */
static bool read_answer(answer *a)
{
    static bytes in;
    in.len = 0;
    a->body.len = 0;
    a->close = false;
    a->content_type[0] = 0;
    const char *end;
    while (!(end = find(in.d ? in.d : "", in.len, "\r\n\r\n"))) {
        if (in.len > 65536)
            fail("the answer's head is longer than 64 KiB", in.d, in.len);
        if (!recv_more(g_fd, &in)) {
            if (in.len == 0)
                return false;
            fail("the connection closed in the middle of the answer's head", in.d, in.len);
        }
    }
    size_t head = (size_t)(end - in.d) + 4;
    if (head < 13 || memcmp(in.d, "HTTP/1.1 ", 9) || in.d[9] < '1' || in.d[9] > '5' || in.d[10] < '0' || in.d[10] > '9' ||
        in.d[11] < '0' || in.d[11] > '9' || in.d[12] != ' ')
        fail("the answer does not start with an HTTP/1.1 status line", in.d, in.len);
    a->status = (in.d[9] - '0') * 100 + (in.d[10] - '0') * 10 + (in.d[11] - '0');
    long long cl = -1;
    bool chunked = false;
    for (const char *line = find(in.d, head, "\r\n") + 2; line < in.d + head - 2;) {
        const char *eol = find(line, (size_t)(in.d + head - line), "\r\n");
        const char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon)
            fail("a header line of the answer has no colon", in.d, head);
        size_t nlen = (size_t)(colon - line);
        const char *v = colon + 1;
        while (v < eol && *v == ' ')
            v++;
        size_t vlen = (size_t)(eol - v);
        if (nlen == 14 && !strncasecmp(line, "Content-Length", 14)) {
            if (cl >= 0 || vlen == 0 || vlen > 12)
                fail("the answer's Content-Length is repeated or malformed", in.d, head);
            cl = 0;
            for (size_t i = 0; i < vlen; i++) {
                if (v[i] < '0' || v[i] > '9')
                    fail("the answer's Content-Length is not a number", in.d, head);
                cl = cl * 10 + (v[i] - '0');
            }
        } else if (nlen == 17 && !strncasecmp(line, "Transfer-Encoding", 17)) {
            if (vlen != 7 || strncasecmp(v, "chunked", 7) || chunked)
                fail("the answer's Transfer-Encoding is not one \"chunked\"", in.d, head);
            chunked = true;
        } else if (nlen == 10 && !strncasecmp(line, "Connection", 10)) {
            a->close = vlen == 5 && !strncasecmp(v, "close", 5);
        } else if (nlen == 12 && !strncasecmp(line, "Content-Type", 12)) {
            snprintf(a->content_type, sizeof a->content_type, "%.*s", (int)vlen, v);
        }
        line = eol + 2;
    }
    if (chunked == (cl >= 0))
        fail("the answer has not exactly one of Content-Length and chunked", in.d, head);
    size_t pos = head;
    if (!chunked) {
        while (in.len < head + (size_t)cl)
            if (!recv_more(g_fd, &in))
                fail("the connection closed before the answer's Content-Length bytes", in.d, in.len);
        bytes_add(&a->body, in.d + head, (size_t)cl);
        pos = head + (size_t)cl;
    } else {
        for (;;) {
            const char *eol;
            while (!(eol = find(in.d + pos, in.len - pos, "\r\n")))
                if (!recv_more(g_fd, &in))
                    fail("the connection closed in the middle of a chunk size", in.d, in.len);
            size_t size = 0, digits = 0;
            for (const char *p = in.d + pos; p < eol; p++, digits++) {
                int h = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
                if (h < 0 || digits >= 8)
                    fail("a chunk size of the answer is not a hex number below 2^32", in.d + pos, (size_t)(eol - in.d) - pos);
                size = size * 16 + (size_t)h;
            }
            if (!digits)
                fail("a chunk size of the answer is empty", in.d, in.len);
            pos = (size_t)(eol - in.d) + 2;
            if (size == 0) { /* no trailers: the last chunk, then the empty line */
                while (in.len < pos + 2)
                    if (!recv_more(g_fd, &in))
                        fail("the connection closed before the chunked answer's last line", in.d, in.len);
                if (memcmp(in.d + pos, "\r\n", 2))
                    fail("the chunked answer's last chunk is not followed by an empty line", in.d, in.len);
                pos += 2;
                break;
            }
            while (in.len < pos + size + 2)
                if (!recv_more(g_fd, &in))
                    fail("the connection closed in the middle of a chunk (a stream cut short)", in.d, in.len);
            if (memcmp(in.d + pos + size, "\r\n", 2))
                fail("a chunk of the answer is not followed by CRLF", in.d, in.len);
            bytes_add(&a->body, in.d + pos, size);
            pos += size + 2;
        }
    }
    if (in.len != pos)
        fail("bytes follow the end of the answer", in.d, in.len);
    return true;
}

/* Sends a POST of body[0..n), or a GET when body is NULL; false when the
 * connection turned out to be closed. */
static bool send_request(const char *path, const char *body, size_t n, bool chunked)
{
    char head[256];
    int h = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s", body ? "POST" : "GET", path,
                     body ? "Content-Type: application/json\r\n" : "\r\n");
    static bytes req;
    req.len = 0;
    bytes_add(&req, head, (size_t)h);
    if (!body) {
    } else if (!chunked) {
        h = snprintf(head, sizeof head, "Content-Length: %zu\r\n\r\n", n);
        bytes_add(&req, head, (size_t)h);
        bytes_add(&req, body, n);
    } else { /* in two chunks, so a body split across reads and pieces is parsed too */
        bytes_adds(&req, "Transfer-Encoding: chunked\r\n\r\n");
        size_t half = n / 2, parts[2] = {half, n - half};
        for (int i = 0, off = 0; i < 2; off += (int)parts[i], i++) {
            if (!parts[i])
                continue;
            h = snprintf(head, sizeof head, "%zx\r\n", parts[i]);
            bytes_add(&req, head, (size_t)h);
            bytes_add(&req, body + off, parts[i]);
            bytes_add(&req, "\r\n", 2);
        }
        bytes_adds(&req, "0\r\n\r\n");
    }
    return send_all(g_fd, req.d, req.len);
}

static void reconnect(void)
{
    if (g_fd >= 0)
        close(g_fd);
    g_fd = dial(hearth_server_port(g_server));
    if (g_fd < 0)
        fail("cannot connect to the server again: has its thread died?", NULL, 0);
}

/* ---- checking the answer ---- */

static const cJSON *field(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

static double num(const cJSON *o, const char *key, const char *what, const answer *a)
{
    const cJSON *f = field(o, key);
    if (!cJSON_IsNumber(f))
        fail(what, a->body.d, a->body.len);
    return f->valuedouble;
}

static void check_error(const answer *a)
{
    cJSON *doc = cJSON_ParseWithLength(a->body.d ? a->body.d : "", a->body.len);
    const cJSON *e = field(doc, "error");
    const cJSON *msg = field(e, "message");
    if (!cJSON_IsObject(e) || !cJSON_IsString(msg) || !msg->valuestring[0])
        fail("an error answer is not {\"error\":{...,\"message\":\"...\"}}", a->body.d, a->body.len);
    if (num(e, "code", "an error answer has no numeric code", a) != a->status)
        fail("an error answer's code is not its status", a->body.d, a->body.len);
    cJSON_Delete(doc);
}

/* usage / tokens counts: prompt and generated tokens fit in the context */
static void check_fits(double prompt, double gen, const answer *a)
{
    if (prompt < 1 || gen < 0 || prompt + gen > CTX)
        fail("the prompt and generated token counts do not fit in the context", a->body.d, a->body.len);
}

/* One answer object of route. */
static void check_one(int route, const cJSON *doc, const answer *a)
{
    if (!cJSON_IsObject(doc))
        fail("a 200 answer is not a JSON object", a->body.d, a->body.len);
    const cJSON *choices = field(doc, "choices"), *c0 = cJSON_GetArrayItem(choices, 0);
    switch (route) {
    case R_COMPLETION:
        if (!cJSON_IsString(field(doc, "content")) || !cJSON_IsString(field(doc, "stop_type")))
            fail("a /completion answer lacks content or stop_type", a->body.d, a->body.len);
        check_fits(num(doc, "tokens_evaluated", "no tokens_evaluated", a), num(doc, "tokens_predicted", "no tokens_predicted", a), a);
        break;
    case R_TOKENIZE:
        if (!cJSON_IsArray(field(doc, "tokens")))
            fail("a /tokenize answer lacks its tokens", a->body.d, a->body.len);
        break;
    case R_DETOKENIZE:
        if (!cJSON_IsString(field(doc, "content")))
            fail("a /detokenize answer lacks its content", a->body.d, a->body.len);
        break;
    default: {
        const cJSON *text = route == R_OAI_CHAT ? field(field(c0, "message"), "content") : field(c0, "text");
        if (cJSON_GetArraySize(choices) != 1 || !cJSON_IsString(text) || !cJSON_IsString(field(c0, "finish_reason")))
            fail("an OpenAI answer has not one choice with its text and finish_reason", a->body.d, a->body.len);
        const cJSON *u = field(doc, "usage");
        check_fits(num(u, "prompt_tokens", "no usage.prompt_tokens", a), num(u, "completion_tokens", "no usage.completion_tokens", a), a);
    }
    }
}

/* A 200 answer: one object, or for several prompts on /completion and
 * /v1/completions a non-empty array of them, one per prompt, as
 * llama-server answers a prompt list. */
static void check_json(int route, const answer *a)
{
    cJSON *doc = cJSON_ParseWithLength(a->body.d ? a->body.d : "", a->body.len);
    if (cJSON_IsArray(doc) && (route == R_COMPLETION || route == R_OAI_COMPLETIONS)) {
        if (cJSON_GetArraySize(doc) < 1)
            fail("a several-prompt answer is an empty array", a->body.d, a->body.len);
        const cJSON *it;
        cJSON_ArrayForEach(it, doc)
            check_one(route, it, a);
    } else {
        check_one(route, doc, a);
    }
    cJSON_Delete(doc);
}

/* Server-sent events: "data: <JSON>\n\n" each; the last one ends the stream
 * as the API does, or is an error (never a 500) when the head had gone out. */
static void check_stream(int route, const answer *a)
{
    if (route != R_COMPLETION && route != R_OAI_COMPLETIONS && route != R_OAI_CHAT)
        fail("a stream from a route that does not stream", a->body.d, a->body.len);
    const char *p = a->body.d ? a->body.d : "", *end = p + a->body.len;
    if (p == end)
        fail("an empty stream", NULL, 0);
    bool done = false, last_stop = false, error = false;
    while (p < end) {
        if (done || error)
            fail("an event follows the stream's end or its error", a->body.d, a->body.len);
        const char *eoe = find(p, (size_t)(end - p), "\n\n");
        if (!eoe || end - p < 6 || memcmp(p, "data: ", 6))
            fail("a stream event is not \"data: ...\\n\\n\"", a->body.d, a->body.len);
        const char *d = p + 6;
        size_t n = (size_t)(eoe - d);
        if (n == 6 && !memcmp(d, "[DONE]", 6)) {
            if (route == R_COMPLETION)
                fail("/completion's stream holds a [DONE] (llama-server's ends without one)", a->body.d, a->body.len);
            done = true;
        } else {
            cJSON *ev = cJSON_ParseWithLength(d, n);
            if (!cJSON_IsObject(ev))
                fail("a stream event is not a JSON object", a->body.d, a->body.len);
            const cJSON *e = field(ev, "error");
            if (e) {
                double code = num(e, "code", "an error event has no code", a);
                if (code == 500 || !cJSON_IsString(field(e, "message")))
                    fail("a stream ends in a 500 or a message-less error event", a->body.d, a->body.len);
                error = true;
            } else if (route == R_COMPLETION) {
                last_stop = cJSON_IsTrue(field(ev, "stop"));
                if (last_stop)
                    check_fits(num(ev, "tokens_evaluated", "no tokens_evaluated", a),
                               num(ev, "tokens_predicted", "no tokens_predicted", a), a);
            } else if (!cJSON_IsArray(field(ev, "choices"))) {
                fail("an OpenAI stream chunk has no choices", a->body.d, a->body.len);
            }
            cJSON_Delete(ev);
        }
        p = eoe + 2;
    }
    if (!error && (route == R_COMPLETION ? !last_stop : !done))
        fail("a stream ends without its last event (\"stop\": true / [DONE])", a->body.d, a->body.len);
}

static void check(int route, const answer *a)
{
    if (a->status == 200) {
        if (!strncmp(a->content_type, "text/event-stream", 17))
            check_stream(route, a);
        else if (!strncmp(a->content_type, "application/json", 16))
            check_json(route, a);
        else
            fail("a 200 answer is neither JSON nor an event stream", a->body.d, a->body.len);
        return;
    }
    if (a->status == 500)
        fail("500: a server error on a client's body", a->body.d, a->body.len);
    if ((a->status < 400 || a->status > 499) && a->status != 503)
        fail("a status other than 200, 4xx or 503", a->body.d, a->body.len);
    check_error(a);
}

/* Sends the request and reads its answer, on a fresh connection when the
 * kept-alive one turns out to have closed. */
static void round_trip(const char *path, const char *body, size_t n, bool chunked, answer *a)
{
    for (int attempt = 0;; attempt++) {
        if (g_fd < 0)
            reconnect();
        if (send_request(path, body, n, chunked) && read_answer(a))
            return;
        if (attempt)
            fail("no answer on a fresh connection", NULL, 0);
        close(g_fd);
        g_fd = -1;
    }
}

/* The value of the first metrics line starting with name ("name{...} value"), or -1. */
static double metric(const answer *a, const char *name)
{
    const char *p = a->body.d ? a->body.d : "", *end = p + a->body.len;
    size_t n = strlen(name);
    for (; p < end; p++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            break;
        if ((size_t)(eol - p) > n && !memcmp(p, name, n) && p[n] == '{') {
            const char *sp = memchr(p, ' ', (size_t)(eol - p));
            return sp ? strtod(sp + 1, NULL) : -1;
        }
        p = eol;
    }
    return -1;
}

/* Hangs up as soon as the answer has begun (a stream's head, or a whole
 * short answer), so the request is cancelled while the scheduler may still
 * hold it; then waits, through /metrics, until no request is live or queued,
 * so what the cancellation does happens within this input. */
static void hang_up(void)
{
    char c;
    ssize_t k;
    do
        k = recv(g_fd, &c, 1, 0);
    while (k < 0 && errno == EINTR);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        fail("no answer within the timeout: the server hangs on this body", NULL, 0);
    close(g_fd);
    g_fd = -1;
    static answer m;
    for (int i = 0; i < ANSWER_TIMEOUT_S * 100; i++) {
        round_trip("/metrics", NULL, 0, false, &m);
        if (m.status != 200)
            fail("GET /metrics did not answer 200", m.body.d, m.body.len);
        if (metric(&m, "hearth_gen_live_sequences") == 0 && metric(&m, "hearth_gen_queue_depth") == 0)
            return;
        if (m.close) {
            close(g_fd);
            g_fd = -1;
        }
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    }
    fail("a request whose client hung up is still live or queued after the timeout", m.body.d, m.body.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int route = (data[0] & 0x3f) % N_ROUTES;
    bool chunked = data[0] & 0x80, leave = data[0] & 0x40;
    g_route = ROUTES[route];
    const char *body = (const char *)data + 1;
    static answer a;
    if (leave) {
        if (g_fd < 0)
            reconnect();
        if (send_request(ROUTES[route], body, size - 1, chunked))
            hang_up();
        else {
            close(g_fd);
            g_fd = -1;
        }
        return 0;
    }
    round_trip(ROUTES[route], body, size - 1, chunked, &a);
    if (g_verbose)
        fprintf(stderr, "POST %s%s -> %d: %.*s\n", g_route, chunked ? " (chunked)" : "", a.status,
                (int)(a.body.len > 300 ? 300 : a.body.len), a.body.d ? a.body.d : "");
    check(route, &a);
    if (a.close) {
        close(g_fd);
        g_fd = -1;
    }
    return 0;
}

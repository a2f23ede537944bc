/* bench.h: the private pieces of `hearth bench` (bench*.c), shared between
 * the command (bench.c), its requests (bench_workload.c), the client
 * connections (bench_conn.c), the response parser (bench_http.c), what an
 * answer's JSON says (bench_answer.c), the Open Inference Protocol workload
 * (bench_infer.c) and the report (bench_report.c). */
#ifndef HEARTH_CLI_BENCH_H
#define HEARTH_CLI_BENCH_H

#include "bench_hist.h"

#include "base/buf.h"
#include "net/http_parse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum bench_api { BENCH_HEALTH, BENCH_COMPLETION, BENCH_CHAT, BENCH_EMBEDDINGS, BENCH_TEI, BENCH_RAW, BENCH_INFER };

/* Why a request failed; each is counted and reported under its name. */
enum bench_err_kind {
    BENCH_ERR_CONNECT,   /* connect() refused or failed */
    BENCH_ERR_CLOSED,    /* the server closed or reset before the answer was whole */
    BENCH_ERR_STATUS,    /* a status outside 2xx (counted by status too) */
    BENCH_ERR_BAD_JSON,  /* an answer (or an SSE event) that should be JSON and is not */
    BENCH_ERR_TIMEOUT,   /* no whole answer within --timeout-ms */
    BENCH_ERR_PROTOCOL,  /* an answer that is not HTTP/1.x, or too big */
    BENCH_ERR_STREAM,    /* a 200 stream that carried an {"error": ...} event */
    BENCH_ERR_LATE,      /* --api infer: the server answered the frame as late (BENCH_INFER_LATE_STATUS) */
    BENCH_ERR_N
};
extern const char *const bench_err_names[BENCH_ERR_N];

#define BENCH_MAX_STATUS 16 /* distinct non-2xx statuses kept; later ones count as "other" */
#define BENCH_TIMELINE_S 3600 /* seconds of latency over time kept for --svg */

/* Everything a run's threads read; filled by bench.c, read-only after. */
typedef struct bench_cfg {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    enum bench_api api;
    int concurrency;       /* connections over all threads */
    int threads;
    double rate;           /* requests/s over all threads; 0: closed loop */
    bool poisson;
    bool poll;             /* the threads poll, never sleep (--poll) */
    double duration_s;     /* counted time, after the warm-up; 0 with n */
    double warmup_s;
    int64_t n;             /* requests to count; 0 with duration */
    double deadline_ms;    /* 0: no deadline */
    int timeout_ms;
    bool stream;           /* answers are SSE: TTFT, ITL and tokens are measured */
    bool expect_json;      /* a 2xx body must parse as JSON */
    bool sequence;         /* --api infer --sequence-id: reqs[] holds the four sequence variants (bench_infer.c) */
    int sentences;         /* embeddings/tei: inputs per request (1) */
    int prompt_tokens;     /* completion/chat: the prompt's size asked for, 0: --prompt as given */
    int max_tokens;        /* completion/chat: tokens to generate */
    char **reqs;           /* whole HTTP requests, sent in turn */
    size_t *req_lens;
    size_t n_reqs;
} bench_cfg;

/* One thread's figures, merged by bench.c after the threads end. */
typedef struct bench_stats {
    bench_hist lat, ttft, itl;
    uint64_t requests;     /* counted answers, 2xx and whole */
    uint64_t errors, misses, bytes, tokens, streams;
    uint64_t err_kind[BENCH_ERR_N];
    int status[BENCH_MAX_STATUS];
    uint64_t status_count[BENCH_MAX_STATUS];
    int n_status;
    uint64_t status_other;
    double stream_rate_sum; /* sum over streams of their own decode tokens/s */
    uint64_t prompt_tokens, usage_answers; /* usage.prompt_tokens summed over the counted answers that gave it */
    uint64_t backlog_max;   /* open loop: the most requests that waited for a free connection */
    uint64_t t_first_ns, t_last_ns; /* the counted window as this thread saw it */
    /* latency over time, by the second of the scheduled send, for --svg */
    uint32_t tl_count[BENCH_TIMELINE_S];
    float tl_sum_ms[BENCH_TIMELINE_S], tl_max_ms[BENCH_TIMELINE_S];
} bench_stats;

void bench_stats_init(bench_stats *s);
void bench_stats_merge(bench_stats *dst, const bench_stats *src);
void bench_stats_error(bench_stats *s, enum bench_err_kind kind, int status);

/* The answer being read on one connection (bench_http.c). */
typedef struct bench_resp {
    bool head_done, done, chunked, until_close, keep_alive;
    int status;
    int64_t infer_header_len; /* Inference-Header-Content-Length, or -1 when absent */
    uint64_t remaining;    /* content-length bytes still to read */
    hearth_http_chunked dec;
    hearth_buf body;       /* decoded body; SSE events are cut from its front */
    size_t head_bytes;
    char *event;           /* the last SSE event's data (bench_sse_next) */
    size_t event_cap;
} bench_resp;

void bench_resp_init(bench_resp *r);
void bench_resp_deinit(bench_resp *r);
/* Forgets the previous answer, keeping the body's memory. */
void bench_resp_reset(bench_resp *r);
/* Consumes bytes of the answer from in[0..len): returns how many were used
 * (the rest belongs to nothing: no pipelining, so it is a protocol error);
 * sets r->done when the answer is whole. HEARTH_EAGAIN never; negative on a
 * malformed answer or one over the body limit. */
long bench_resp_feed(bench_resp *r, const char *in, size_t len);
/* The server closed the connection: completes an answer delimited by the
 * close; returns 0 then, negative when the answer was cut short. */
int bench_resp_eof(bench_resp *r);

/* SSE events complete in r->body, cut one at a time: returns 1 and points
 * *data at the joined "data:" lines of the next event (NUL-terminated, valid
 * until the next call), 0 when no whole event is buffered, negative when
 * out of memory. */
int bench_sse_next(bench_resp *r, char **data, size_t *data_len);

/* What a JSON answer or SSE event says, for the figures (bench_answer.c). */
typedef struct bench_answer {
    bool has_text;          /* a token's text: choices[0].text, .delta.content, or llama-server's "content" */
    bool error;             /* an "error" member: the server gave up after its 200 */
    int64_t prompt_tokens;  /* usage.prompt_tokens, or -1 when absent */
    int64_t completion_tokens; /* usage.completion_tokens, or -1 when absent */
} bench_answer;
/* Reads json[0..len): 0 and *a, or -1 when it is not JSON. */
int bench_answer_parse(const char *json, size_t len, bench_answer *a);

/* Writes cfg->reqs for every API but infer (bench_workload.c): GET path for
 * health (and raw without input), else POST path with bodies from input's
 * lines or prompt, sized by cfg->sentences, prompt_tokens and max_tokens.
 * 0, or -1 (said on stderr when it is the input's fault). */
int bench_workload_build(bench_cfg *cfg, const char *path, const char *host, const char *model, const char *prompt,
                         const char *input);
/* The text of a --prompt-tokens prompt: about tokens tokens, its prefix
 * numbered variant. Caller frees; NULL when out of memory. */
char *bench_workload_prompt(int tokens, unsigned variant);

/* Runs one thread's share of the load (bench_conn.c): conns connections,
 * n requests (or until end_ns), writing its figures to st. The thread opens
 * its connections first, sets connected, and waits for go: the main thread
 * then writes the shared start_ns (the warm-up ends at count_from_ns) and
 * sets go, so no connect falls inside the measured schedule. Returns 0,
 * negative when the thread could not run at all (err says why). */
typedef struct bench_thread_arg {
    const bench_cfg *cfg;
    int index, conns;
    double rate;           /* this thread's share */
    int64_t n;             /* this thread's share of --n (0: by time) */
    uint64_t start_ns, count_from_ns, end_ns;
    bench_stats *stats;
    char err[256];
    int rc;
    /* read by the main thread for the progress line while the run goes on */
    _Atomic uint64_t done_ok, done_err;
    _Atomic int finished;
    _Atomic int connected, go; /* the start handshake above */
} bench_thread_arg;
void *bench_thread_main(void *arg);

/* "health", "chat", ... (bench.c). */
const char *bench_api_name(enum bench_api api);
/* One blocking GET before the run (bench.c): the body (NUL-terminated,
 * caller frees) of a whole answer of any status, *status set to it; NULL
 * with *status 0 when there was no whole answer (err, if given, says why). */
char *bench_get(const bench_cfg *cfg, const char *host, const char *path, int *status, char *err, size_t err_len);
/* The same for any method, with a JSON body (NULL: none; under 3 KiB). */
char *bench_call(const bench_cfg *cfg, const char *host, const char *method, const char *path, const char *json,
                 int *status, char *err, size_t err_len);

/* --api infer: the Open Inference Protocol (KServe v2) workload (bench_infer.c). */

/* The status hearth answers a frame with when it can no longer make its
 * deadline (answered at once, never run): counted as "late", not as a
 * plain status error, and as a miss. Triton has no such answer. */
#define BENCH_INFER_LATE_STATUS 504
#define BENCH_INFER_SEED 20261129u /* the random frame's xorshift seed, fixed so runs compare */

typedef struct bench_infer_opts {
    const char *input;       /* raw little-endian bytes of one frame for the first input, or NULL: random */
    bool binary;             /* the binary tensor data extension (else JSON "data" arrays) */
    bool send_deadline;      /* send Triton's "timeout" parameter (us) = --deadline-ms */
    const char *sequence_id; /* or NULL: Triton's sequence_id (a number when all digits, else a string) */
    bool shm;                /* the inputs in a system shared memory region (Triton's extension), not the body */
} bench_infer_opts;

/* Asks the server for the model's metadata (GET {prefix}/v2/models/{model})
 * and writes the requests of the workload into cfg->reqs: one, or with a
 * sequence the four variants conn_begin picks from (bench_infer_pick).
 * prefix: the URL's path, "" for none. 0, or -1 after saying why on stderr. */
int bench_infer_build(bench_cfg *cfg, const char *host, const char *prefix, const char *model,
                      const bench_infer_opts *o);
/* Unregisters the shared memory regions --shm registered (bench.c calls it at the end). */
void bench_infer_finish(void);
/* With cfg->sequence: the index into cfg->reqs of a request that is the
 * sequence's first and/or last. */
static inline size_t bench_infer_pick(bool first, bool last) { return (first ? 1u : 0u) | (last ? 2u : 0u); }
/* Whether a 2xx answer is an inference response: a JSON header (its length
 * from Inference-Header-Content-Length when given, else the whole body) with
 * an "outputs" array, and binary outputs whose sizes add up to the bytes
 * after the header. */
bool bench_infer_answer_ok(const bench_resp *r);
/* One whole run with cfg's threads (bench_run.c): their figures merged into
 * total, the counted window's length in *seconds. 0, or -1 when a thread
 * could not start or run (said on stderr). */
int bench_run(const bench_cfg *cfg, bench_stats *total, double *seconds);
/* --compare: rounds of a then b (the order alternating), medians and ratios
 * printed, and written to json_path when given (bench_compare.c). Returns
 * the exit status: 1 when a run had errors or failed. */
int bench_compare(const bench_cfg *a, const bench_cfg *b, const char *url_a, const char *url_b, int rounds,
                  const char *json_path);

#endif

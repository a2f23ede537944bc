/* bench.c: `hearth bench URL --api ...`: hearth's own HTTP load generator.
 *
 *   hearth bench http://127.0.0.1:8080 --api health --concurrency 8 --duration 10
 *   hearth bench http://127.0.0.1:8080 --api chat --rate 2 --n 100 --max-tokens 64
 *   hearth bench http://127.0.0.1:8080 --api infer --rate 20 --n 1200 --deadline-ms 50 --input frame.f32
 *
 * This file reads the flags, resolves the URL, asks /v1/models for the model
 * name when none is given, has the requests of the workload built
 * (bench_workload.c; those of --api infer in bench_infer.c, from the model's
 * metadata; every request is written out once, whole, before the run, so
 * the hot path only copies bytes to a socket), runs the threads (bench_run.c, bench_conn.c)
 * and prints their figures (bench_report_print.c, bench_svg.c), or with
 * --compare URL2 runs both servers in interleaved rounds (bench_compare.c).
 * Exit status: 0, 1 when the run had errors or could not run, 2 on a bad
 * command line.
 * Rejected: a URL per request or HTTPS (a bench of one server over
 * loopback or a LAN; TLS would measure the TLS library); reading the
 * workload while running (it would compete with the sockets for the thread). */
#include "bench.h"
#include "bench_report.h"
#include "cli.h"
#include "opts.h"

#include "base/clock.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static const char *const api_names[] = {"health", "completion", "chat", "embeddings", "tei", "raw", "infer"};
static const char *const api_paths[] = {"/health", "/v1/completions", "/v1/chat/completions", "/v1/embeddings",
                                        "/embed", "/", "/v2/models"};

const char *bench_api_name(enum bench_api api) { return api_names[api]; }

typedef struct url_parts {
    char host[256], port[8], path[1024];
} url_parts;

static int parse_url(const char *url, url_parts *u)
{
    if (strncmp(url, "http://", 7))
        return -1;
    const char *h = url + 7, *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h);
    snprintf(u->path, sizeof u->path, "%s", slash ? slash : "/");
    const char *colon = memchr(h, ':', hl);
    size_t name_len = colon ? (size_t)(colon - h) : hl;
    if (!name_len || name_len >= sizeof u->host)
        return -1;
    memcpy(u->host, h, name_len);
    u->host[name_len] = 0;
    if (colon) {
        size_t pl = hl - name_len - 1;
        if (!pl || pl >= sizeof u->port)
            return -1;
        memcpy(u->port, colon + 1, pl);
        u->port[pl] = 0;
    } else {
        strcpy(u->port, "80");
    }
    return 0;
}

char *bench_get(const bench_cfg *cfg, const char *host, const char *path, int *status, char *err, size_t err_len)
{
    return bench_call(cfg, host, "GET", path, NULL, status, err, err_len);
}

char *bench_call(const bench_cfg *cfg, const char *host, const char *method, const char *path, const char *json,
                 int *status, char *err, size_t err_len)
{
    int fd = socket(cfg->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char *out = NULL;
    char scratch[8];
    bench_resp r;
    bench_resp_init(&r);
    *status = 0;
    if (!err)
        err = scratch, err_len = sizeof scratch;
    snprintf(err, err_len, "no whole answer");
    if (fd < 0)
        goto done;
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (const struct sockaddr *)&cfg->addr, cfg->addr_len)) {
        snprintf(err, err_len, "connect: %s", strerror(errno));
        goto done;
    }
    char req[4096];
    int n = json ? snprintf(req, sizeof req,
                            "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\n\r\n%s",
                            method, path, host, strlen(json), json)
                 : snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, path,
                            host);
    if (n < 0 || (size_t)n >= sizeof req) {
        snprintf(err, err_len, "the path or body is too long");
        goto done;
    }
    if (write(fd, req, (size_t)n) != n)
        goto done;
    hearth_buf in;
    hearth_buf_init(&in, (size_t)16 << 20);
    for (;;) {
        if (hearth_buf_reserve(&in, 65536))
            break;
        ssize_t got = read(fd, in.data + in.len, 65536);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        in.len += (size_t)got;
        long used = bench_resp_feed(&r, in.data, in.len);
        if (used < 0)
            break;
        hearth_buf_consume(&in, (size_t)used);
        if (r.done)
            break;
    }
    hearth_buf_deinit(&in);
    if ((r.done || bench_resp_eof(&r) == 0) && r.head_done && (out = malloc(r.body.len + 1))) {
        memcpy(out, r.body.data ? r.body.data : "", r.body.len);
        out[r.body.len] = 0;
        *status = r.status;
    }
done:
    if (fd >= 0)
        close(fd);
    bench_resp_deinit(&r);
    return out;
}

/* The model to name in requests: the first /v1/models lists whose
 * meta.family is family (hearth lists its embedding, generation and vision
 * models together, each with a family), else the first listed unless
 * strict; NULL when the server lists none (why, if given, says what came). */
static char *served_model(const bench_cfg *cfg, const char *host, const char *family, bool strict, char *why,
                          size_t why_len)
{
    int status;
    char err[160];
    char *body = bench_get(cfg, host, "/v1/models", &status, err, sizeof err), *name = NULL;
    cJSON *j = body && status == 200 ? cJSON_Parse(body) : NULL;
    if (why && !body)
        snprintf(why, why_len, "GET /v1/models from %s: %s", host, err);
    else if (why && status != 200)
        snprintf(why, why_len, "GET /v1/models: status %d", status);
    else if (why)
        snprintf(why, why_len, "GET /v1/models lists no model of family \"%s\"", family);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data"), *m;
    const cJSON *pick = strict ? NULL : cJSON_GetArrayItem(data, 0);
    for (int i = 0; (m = cJSON_GetArrayItem(data, i)); i++) {
        const cJSON *fam = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "meta"), "family");
        if (cJSON_IsString(fam) && !strcmp(fam->valuestring, family)) {
            pick = m;
            break;
        }
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(pick, "id");
    if (cJSON_IsString(id))
        name = strdup(id->valuestring);
    cJSON_Delete(j);
    free(body);
    return name;
}

/* Resolves url into cfg->addr and builds cfg's requests for it; the model
 * is asked of the server when none is given (*found_model then owns it). */
static int setup_target(bench_cfg *cfg, const char *url, const char *model, const char *prompt, const char *input,
                        const bench_infer_opts *infer, char **found_model)
{
    url_parts u;
    if (parse_url(url, &u)) {
        fprintf(stderr, "hearth bench: %s: need http://HOST[:PORT][/PATH]\n", url);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gai = getaddrinfo(u.host, u.port, &hints, &ai);
    if (gai || !ai) {
        fprintf(stderr, "hearth bench: %s: %s\n", u.host, gai ? gai_strerror(gai) : "no address");
        return -1;
    }
    memcpy(&cfg->addr, ai->ai_addr, ai->ai_addrlen);
    cfg->addr_len = ai->ai_addrlen;
    freeaddrinfo(ai);

    char host[300];
    snprintf(host, sizeof host, "%s:%s", u.host, u.port);
    if (cfg->api == BENCH_INFER) {
        /* the URL's path, if any, is a prefix (a server behind a gateway) */
        size_t pl = strlen(u.path);
        while (pl && u.path[pl - 1] == '/')
            u.path[--pl] = 0;
        char why[300];
        if (!model && !(model = *found_model = served_model(cfg, host, "vision", true, why, sizeof why))) {
            fprintf(stderr, "hearth bench: %s; name the model with --model (Triton and other Open Inference "
                            "Protocol servers need it)\n", why);
            return -1;
        }
        return bench_infer_build(cfg, host, u.path, model, infer);
    }
    const char *path = cfg->api == BENCH_RAW || strcmp(u.path, "/") ? u.path : api_paths[cfg->api];
    bool wants_model = cfg->api == BENCH_COMPLETION || cfg->api == BENCH_CHAT || cfg->api == BENCH_EMBEDDINGS;
    if (wants_model && !model) {
        model = *found_model = served_model(cfg, host, cfg->api == BENCH_EMBEDDINGS ? "embedding" : "generation", false,
                                                NULL, 0);
        if (!model)
            fprintf(stderr, "hearth bench: GET /v1/models named no model; sending requests without \"model\"\n");
    }
    if (bench_workload_build(cfg, path, host, model, prompt, input)) {
        fprintf(stderr, "hearth bench: could not build the requests\n");
        return -1;
    }
    return 0;
}

int hearth_cmd_bench(int argc, char **argv)
{
    const char *api_name = "health", *arrivals = "fixed", *json_path = NULL, *svg_path = NULL, *model_given = NULL;
    const char *input = NULL, *compare_url = NULL, *sequence_id = NULL;
    const char *prompt = "Write a short story about a lighthouse keeper.";
    int concurrency = 0, threads = 1, max_tokens = 64, timeout_ms = 30000, rounds = 3, binary = 1;
    int sentences = 1, prompt_tokens = 0;
    float rate = 0, duration = 0, warmup = 0, deadline_ms = 0;
    uint64_t n = 0;
    bool stream = true, send_deadline = false, shm = false, poll = false;
    const opt opts[] = {
        {"api", 0, OPT_STR, &api_name, "health|completion|chat|embeddings|tei|raw|infer", "what to send (health)",
         true},
        {"concurrency", 'c', OPT_INT, &concurrency, "N", "connections (closed loop: requests in flight; default 1, "
                                                         "open loop: 64)", true},
        {"rate", 'r', OPT_FLOAT, &rate, "R", "open loop: R requests/s on a schedule, latency from the scheduled time",
         true},
        {"arrivals", 0, OPT_STR, &arrivals, "fixed|poisson", "open loop: the schedule's spacing", true},
        {"poll", 0, OPT_BOOL, &poll, NULL, "the client's threads poll their sockets and the clock instead of sleeping, "
                                           "so their own wake-ups (tens to hundreds of us from a deep idle state) "
                                           "stay out of the latencies; a core per --threads", true},
        {"duration", 'd', OPT_FLOAT, &duration, "S", "seconds counted, after the warm-up (10 unless --n)", true},
        {"n", 'n', OPT_U64, &n, "N", "requests counted (instead of --duration)", true},
        {"warmup", 0, OPT_FLOAT, &warmup, "S", "seconds run first and not counted (0)", true},
        {"deadline-ms", 0, OPT_FLOAT, &deadline_ms, "D", "count answers slower than D ms as misses", true},
        {"send-deadline", 0, OPT_BOOL, &send_deadline, NULL, "infer: also send --deadline-ms to the server as "
                                                             "Triton's \"timeout\" parameter (us)", true},
        {"timeout-ms", 0, OPT_INT, &timeout_ms, "MS", "a request without a whole answer by then is an error (30000)",
         true},
        {"threads", 't', OPT_INT, &threads, "N", "client threads, each with its own event loop (1)", true},
        {"model", 'm', OPT_STR, &model_given, "NAME", "model name sent (default: the first of GET /v1/models of the "
                                                      "API's family; infer: the \"vision\" one)", true},
        {"prompt", 'p', OPT_STR, &prompt, "TEXT", "the prompt or input text of every request", true},
        {"input", 'i', OPT_STR, &input, "FILE", "one text or one JSON request body per line, sent in turn; infer: the "
                                                "raw little-endian bytes of one frame (default: random FP32 in [-1,1])",
         true},
        {"shm", 0, OPT_BOOL, &shm, NULL, "infer: the inputs in a system shared memory region the server maps (Triton's "
                                          "extension; same host only), not in each request's body"},
        {"binary", 0, OPT_INT, &binary, "0|1", "infer: tensors as binary data after the JSON header (1), or as "
                                               "JSON arrays (0)", true},
        {"sequence-id", 0, OPT_STR, &sequence_id, "ID", "infer: send Triton's sequence_id, with sequence_start first "
                                                        "and sequence_end last (closed loop, concurrency 1, --n)",
         true},
        {"sentences", 0, OPT_INT, &sentences, "N", "embeddings/tei: N inputs per request, each a different text "
                                                   "(N lines of --input in turn, or the --prompt text numbered) (1)",
         true},
        {"prompt-tokens", 0, OPT_INT, &prompt_tokens, "N", "completion/chat: a prompt of about N tokens instead of "
                                                           "--prompt: a prefix numbered per request (so no prompt "
                                                           "cache serves it) then common words, one token each in "
                                                           "most vocabularies; what the server counted "
                                                           "(usage.prompt_tokens) is reported as "
                                                           "prompt_tokens_mean, a chat template's tokens included",
         true},
        {"max-tokens", 0, OPT_INT, &max_tokens, "N", "completion/chat: tokens to generate (64)", true},
        {"stream", 0, OPT_BOOL, &stream, NULL, "completion/chat: ask for SSE and measure TTFT, ITL, tokens/s (on)",
         true},
        {"json", 0, OPT_STR, &json_path, "FILE", "also write every figure and the histograms as JSON", true},
        {"svg", 0, OPT_STR, &svg_path, "FILE", "also draw latency by percentile and over the run as SVG", true},
        {"compare", 0, OPT_STR, &compare_url, "URL2", "run URL and URL2 in turn over --rounds, print both and ratios",
         true},
        {"rounds", 0, OPT_INT, &rounds, "N", "with --compare: rounds, the order alternating each round (3)", true},
    };
    int n_opts = (int)(sizeof opts / sizeof opts[0]);
    char **flags = calloc((size_t)argc + 1, sizeof *flags), **pos = calloc((size_t)argc + 1, sizeof *pos);
    int n_flags, n_pos, status = 2;
    bench_cfg cfg = {0}, cfg_b = {0};
    bench_stats *total = NULL;
    char *found_model = NULL, *found_model_b = NULL;
    if (!flags || !pos)
        goto done;
    hearth_cli_split_args(opts, n_opts, argc, argv, flags, &n_flags, pos, &n_pos);
    int rc = opts_parse(opts, n_opts, n_flags, flags, "hearth bench URL [options]",
                        "Sends HTTP load to a server and reports requests/s and latency percentiles: closed loop "
                        "(--concurrency N) or open loop (--rate R, latency from each request's scheduled time).");
    if (rc) {
        status = rc == 1 ? 0 : 2;
        goto done;
    }
    int api = -1;
    for (int i = 0; i < (int)(sizeof api_names / sizeof api_names[0]); i++)
        if (!strcmp(api_name, api_names[i]))
            api = i;
    url_parts u;
    if (n_pos != 1 || parse_url(pos[0], &u)) {
        fprintf(stderr, "hearth bench: need one URL, http://HOST[:PORT][/PATH]; see --help\n");
        goto done;
    }
    if (api < 0 || (strcmp(arrivals, "fixed") && strcmp(arrivals, "poisson")) || threads < 1 || threads > 256 ||
        concurrency < 0 || rate < 0 || duration < 0 || warmup < 0 || timeout_ms < 1 || max_tokens < 1 || rounds < 1 ||
        sentences < 1 || sentences > 65536 || prompt_tokens < 0 || prompt_tokens > 1000000) {
        fprintf(stderr, "hearth bench: need --api health|completion|chat|embeddings|tei|raw|infer, --arrivals "
                        "fixed|poisson, --threads 1..256 and no negative figures; see --help\n");
        goto done;
    }
    bool infer = api == BENCH_INFER;
    if (!infer && (sequence_id || send_deadline || binary != 1 || shm)) {
        fprintf(stderr, "hearth bench: --sequence-id, --send-deadline, --binary and --shm are for --api infer\n");
        goto done;
    }
    bool embeds = api == BENCH_EMBEDDINGS || api == BENCH_TEI, generates = api == BENCH_COMPLETION || api == BENCH_CHAT;
    if ((sentences != 1 && !embeds) || (prompt_tokens && !generates)) {
        fprintf(stderr, "hearth bench: --sentences is for --api embeddings|tei, --prompt-tokens for --api "
                        "completion|chat\n");
        goto done;
    }
    if (prompt_tokens && input) {
        fprintf(stderr, "hearth bench: --prompt-tokens makes the prompts: give it or --input, not both\n");
        goto done;
    }
    if (binary != 0 && binary != 1) {
        fprintf(stderr, "hearth bench: --binary takes 0 (JSON tensors) or 1 (binary tensor data)\n");
        goto done;
    }
    if (send_deadline && deadline_ms <= 0) {
        fprintf(stderr, "hearth bench: --send-deadline sends --deadline-ms to the server: give --deadline-ms\n");
        goto done;
    }
    if (sequence_id && (rate > 0 || concurrency > 1 || threads != 1 || !n || compare_url)) {
        /* a sequence's frames must arrive in order, one at a time, and its
         * last one must be known to carry sequence_end */
        fprintf(stderr, "hearth bench: --sequence-id runs one sequence in order: closed loop (no --rate), "
                        "--concurrency 1, --threads 1, a count (--n) and no --compare\n");
        goto done;
    }
    if (n && duration > 0) {
        fprintf(stderr, "hearth bench: give --duration or --n, not both\n");
        goto done;
    }
    cfg.api = (enum bench_api)api;
    cfg.rate = rate;
    cfg.poisson = !strcmp(arrivals, "poisson");
    cfg.poll = poll;
    cfg.concurrency = concurrency ? concurrency : rate > 0 ? 64 : 1;
    if (cfg.concurrency < threads)
        cfg.concurrency = threads;
    cfg.threads = threads;
    cfg.duration_s = n ? 0 : duration > 0 ? duration : 10;
    cfg.warmup_s = warmup;
    cfg.n = (int64_t)n;
    cfg.deadline_ms = deadline_ms;
    cfg.timeout_ms = timeout_ms;
    cfg.stream = stream && (cfg.api == BENCH_COMPLETION || cfg.api == BENCH_CHAT);
    cfg.expect_json = cfg.api != BENCH_RAW;
    cfg.sentences = sentences;
    cfg.prompt_tokens = prompt_tokens;
    cfg.max_tokens = max_tokens;
    bench_infer_opts infer_opts = {.input = input, .binary = binary == 1, .send_deadline = send_deadline,
                                   .sequence_id = sequence_id, .shm = shm};

    if (setup_target(&cfg, pos[0], model_given, prompt, input, &infer_opts, &found_model)) {
        status = 1;
        goto done;
    }

    if (compare_url) {
        cfg_b = cfg;
        cfg_b.reqs = NULL, cfg_b.req_lens = NULL, cfg_b.n_reqs = 0;
        if (setup_target(&cfg_b, compare_url, model_given, prompt, input, &infer_opts, &found_model_b)) {
            status = 1;
            goto done;
        }
        status = bench_compare(&cfg, &cfg_b, pos[0], compare_url, rounds, json_path);
        goto done;
    }
    total = malloc(sizeof *total);
    double seconds = 0;
    if (!total) {
        status = 1;
        goto done;
    }
    status = bench_run(&cfg, total, &seconds) ? 1 : 0;
    bench_run_info info;
    bench_run_info_fill(&info, &cfg, pos[0], seconds);
    bench_report_summary(stdout, &info, total);
    if (json_path && bench_report_json(json_path, &info, total)) {
        fprintf(stderr, "hearth bench: --json %s: %s\n", json_path, strerror(errno));
        status = 1;
    }
    if (svg_path && bench_report_svg(svg_path, &info, total)) {
        fprintf(stderr, "hearth bench: --svg %s: %s\n", svg_path, strerror(errno));
        status = 1;
    }
    if (total->errors)
        status = 1;
done:
    bench_infer_finish();
    for (size_t i = 0; i < cfg.n_reqs; i++)
        free(cfg.reqs[i]);
    free(cfg.reqs);
    free(cfg.req_lens);
    for (size_t i = 0; i < cfg_b.n_reqs; i++)
        free(cfg_b.reqs[i]);
    free(cfg_b.reqs);
    free(cfg_b.req_lens);
    free(found_model);
    free(found_model_b);
    free(total);
    free(flags);
    free(pos);
    return status;
}

/* Unit tests for how `hearth bench` reads answers: src/cli/bench_http.c
 * (an answer's head and body, SSE events), src/cli/bench_answer.c (what a
 * JSON answer or event says) and, end to end through bench_run against a
 * server thread here, that a non-JSON 200 is counted as an error and
 * usage.prompt_tokens is summed; plus the sizes bench_workload.c writes.
 *
 * Answers are fed the way bench_conn.c feeds them: bytes appended to the
 * connection's buffer, bench_resp_feed over all of it, the used bytes
 * dropped. Each answer is cut into two reads at every byte boundary, and
 * fed one byte per read; each feed's input is copied to end where a
 * PROT_NONE page begins, so a read past it faults. */
#include "harness.h"

#include "base/buf.h"
#include "cli/bench.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define GUARD_ROOM (256u * 1024u)
static char *g_map;
static size_t g_page;

static int guard_setup(void)
{
    g_page = (size_t)sysconf(_SC_PAGESIZE);
    g_map = mmap(NULL, GUARD_ROOM + g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g_map == MAP_FAILED)
        return -1;
    return mprotect(g_map + GUARD_ROOM, g_page, PROT_NONE);
}

/* What feeding an answer in reads gave. */
typedef struct fed {
    bool done, error;
    int status, eof;           /* eof: bench_resp_eof after the last read (1: not asked) */
    char body[4096];           /* the decoded body (SSE: what was left after the events) */
    char events[4096];         /* the SSE events' data, each followed by '|' */
    size_t left;               /* bytes of the connection's buffer no answer used */
} fed;

/* Feeds ans[0..n) in reads that end at cuts[0..n_cuts) and at n; with sse,
 * events are cut from the body after every read, as bench_conn.c does;
 * with eof, bench_resp_eof is asked after the last read. */
static void feed(const char *ans, size_t n, const size_t *cuts, int n_cuts, bool sse, bool eof, fed *out)
{
    memset(out, 0, sizeof *out);
    out->eof = 1;
    bench_resp r;
    bench_resp_init(&r);
    hearth_buf in;
    hearth_buf_init(&in, 1 << 20);
    size_t from = 0;
    for (int k = 0; k <= n_cuts && !out->error; k++) {
        size_t to = k < n_cuts ? cuts[k] : n;
        hearth_buf_append(&in, ans + from, to - from);
        from = to;
        const char *p = g_map + GUARD_ROOM - in.len;
        memcpy((char *)p, in.data ? in.data : "", in.len);
        long used = bench_resp_feed(&r, p, in.len);
        if (used < 0) {
            out->error = true;
            break;
        }
        hearth_buf_consume(&in, (size_t)used);
        char *data;
        size_t len;
        while (sse && r.head_done && bench_sse_next(&r, &data, &len) > 0) {
            strncat(out->events, data, sizeof out->events - strlen(out->events) - 2);
            strcat(out->events, "|");
        }
        if (r.done)
            break;
    }
    if (eof && !out->error)
        out->eof = bench_resp_eof(&r);
    out->done = r.done;
    out->status = r.status;
    out->left = in.len;
    if (r.body.len < sizeof out->body)
        memcpy(out->body, r.body.data ? r.body.data : "", r.body.len);
    bench_resp_deinit(&r);
    hearth_buf_deinit(&in);
}

/* Feeds s whole, at every cut in two, and one byte per read; every way
 * must give what the whole feed gives, which must be want_body (or, with
 * sse, want_events). */
static void check_every_split(const char *name, const char *s, bool sse, int want_status, const char *want_body,
                              const char *want_events)
{
    size_t n = strlen(s);
    fed whole, f;
    feed(s, n, NULL, 0, sse, false, &whole);
    CHECK_MSG(whole.done && !whole.error && whole.status == want_status, "%s: whole: done %d error %d status %d",
              name, whole.done, whole.error, whole.status);
    CHECK_EQ_STR(whole.body, want_body);
    if (sse)
        CHECK_EQ_STR(whole.events, want_events);
    CHECK_EQ_INT(whole.left, 0);
    for (size_t cut = 1; cut < n; cut++) {
        feed(s, n, &cut, 1, sse, false, &f);
        CHECK_MSG(f.done && !f.error && f.status == want_status && !strcmp(f.body, whole.body) &&
                      !strcmp(f.events, whole.events) && f.left == 0,
                  "%s: cut at %zu: done %d error %d status %d body '%s' events '%s'", name, cut, f.done, f.error,
                  f.status, f.body, f.events);
    }
    size_t *bytes = malloc(n * sizeof *bytes);
    for (size_t i = 0; i < n; i++)
        bytes[i] = i + 1;
    feed(s, n, bytes, (int)n - 1, sse, false, &f);
    CHECK_MSG(f.done && !strcmp(f.body, whole.body) && !strcmp(f.events, whole.events), "%s: byte by byte", name);
    free(bytes);
}

static void test_content_length_every_split(void)
{
    check_every_split("content-length",
                      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"status\":\"ok\"}",
                      false, 200, "{\"status\":\"ok\"}", "");
    check_every_split("status 503", "HTTP/1.0 503 Busy\r\ncontent-length: 4\r\nConnection: keep-alive\r\n\r\nbusy",
                      false, 503, "busy", "");
}

static void test_chunked_every_split(void)
{
    check_every_split("chunked",
                      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "5\r\nhello\r\n7;ext=1\r\n, world\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n",
                      false, 200, "hello, world" "abcdefghijklmnopqrstuvwxyz", "");
    /* a trailer after the last chunk */
    check_every_split("chunked, trailer",
                      "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n", false,
                      200, "abc", "");
}

static void test_sse_events_split_across_reads(void)
{
    /* events end at "\n\n" or "\r\n\r\n"; one has two data lines (joined
     * by '\n'), one a comment and an event name, which are not data; a
     * chunk boundary falls inside an event and another between two */
    const char *ev = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n"
                     ": keep-alive\nevent: x\ndata: {\"choices\":[{\"text\":\"b\"}]}\r\n\r\n"
                     "data: line1\ndata:line2\n\n"
                     "data: [DONE]\n\n";
    char ans[1024];
    size_t n = strlen(ev), half = 40;
    snprintf(ans, sizeof ans, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "%zx\r\n%.*s\r\n%zx\r\n%s\r\n0\r\n\r\n",
             half, (int)half, ev, n - half, ev + half);
    check_every_split("sse", ans, true, 200, "",
                      "{\"choices\":[{\"text\":\"a\"}]}|{\"choices\":[{\"text\":\"b\"}]}|line1\nline2|[DONE]|");
}

static void test_close_delimited_and_cut_answers(void)
{
    const char *s = "HTTP/1.1 200 OK\r\n\r\nuntil the close";
    size_t cut = 20;
    fed f;
    feed(s, strlen(s), &cut, 1, false, true, &f);
    CHECK(f.done && f.eof == 0);
    CHECK_EQ_STR(f.body, "until the close");
    /* a Content-Length answer cut short by the close is an error */
    s = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
    feed(s, strlen(s), NULL, 0, false, true, &f);
    CHECK(!f.done && f.eof < 0);
    /* so is a chunked one, and a head cut in the middle */
    s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel";
    feed(s, strlen(s), NULL, 0, false, true, &f);
    CHECK(!f.done && f.eof < 0);
    s = "HTTP/1.1 200 OK\r\nContent-Le";
    feed(s, strlen(s), NULL, 0, false, true, &f);
    CHECK(!f.done && f.eof < 0);
    /* 204 has no body whatever it says */
    s = "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";
    feed(s, strlen(s), NULL, 0, false, false, &f);
    CHECK(f.done && f.status == 204 && f.left == 0);
}

static void test_malformed_heads(void)
{
    const char *bad[] = {"HTTP/2 200 OK\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "ICY 200 OK\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fed f;
        feed(bad[i], strlen(bad[i]), NULL, 0, false, false, &f);
        CHECK_MSG(f.error && !f.done, "%s", bad[i]);
    }
}

static void test_answer_json(void)
{
    bench_answer a;
    const char *s = "{\"choices\":[{\"text\":\"hi\"}],\"usage\":{\"prompt_tokens\":17,\"completion_tokens\":3}}";
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0);
    CHECK(a.has_text && !a.error);
    CHECK_EQ_INT(a.prompt_tokens, 17);
    CHECK_EQ_INT(a.completion_tokens, 3);
    s = "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}"; /* a chat chunk, no usage */
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0);
    CHECK(a.has_text);
    CHECK_EQ_INT(a.prompt_tokens, -1);
    CHECK_EQ_INT(a.completion_tokens, -1);
    s = "{\"choices\":[],\"usage\":{\"prompt_tokens\":250,\"completion_tokens\":64,\"total_tokens\":314}}";
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0); /* OpenAI's include_usage chunk */
    CHECK(!a.has_text);
    CHECK_EQ_INT(a.prompt_tokens, 250);
    s = "{\"content\":\"tok\",\"stop\":false}"; /* llama-server's /completion */
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0);
    CHECK(a.has_text);
    s = "{\"choices\":[{\"delta\":{\"content\":\"\"}}]}"; /* an empty piece is no token */
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0);
    CHECK(!a.has_text);
    s = "{\"error\":{\"message\":\"out of memory\"}}";
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0);
    CHECK(a.error);
    s = "{\"object\":\"list\",\"data\":[],\"usage\":{\"prompt_tokens\":\"12\"}}"; /* not a number: absent */
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0);
    CHECK_EQ_INT(a.prompt_tokens, -1);
    s = "[[0.1,0.2],[0.3,0.4]]"; /* TEI's /embed: JSON, nothing to read */
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s), &a), 0);
    CHECK(!a.has_text && !a.error && a.prompt_tokens == -1);
    const char *not_json[] = {"hello", "", "{\"a\":", "<html>oops</html>", "{\"a\":1}garbage"};
    for (size_t i = 0; i < sizeof not_json / sizeof not_json[0]; i++)
        CHECK_MSG(bench_answer_parse(not_json[i], strlen(not_json[i]), &a) == -1, "'%s'", not_json[i]);
    /* only len bytes are read: the JSON ends where the event ends */
    s = "{\"usage\":{\"prompt_tokens\":5}}trailing";
    CHECK_EQ_INT(bench_answer_parse(s, strlen(s) - 8, &a), 0);
    CHECK_EQ_INT(a.prompt_tokens, 5);
}

/* A one-connection-at-a-time HTTP server on a thread: answers every
 * request with g_answer and keeps the last request body it saw. */
static const char *g_answer;
static char g_last_body[65536];
static int g_requests;

static void *server_main(void *arg)
{
    int lfd = *(int *)arg;
    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char buf[131072];
        size_t have = 0;
        for (;;) {
            char *end = have ? memmem(buf, have, "\r\n\r\n", 4) : NULL;
            if (end) {
                size_t head = (size_t)(end + 4 - buf), clen = 0;
                char *cl = memmem(buf, head, "Content-Length: ", 16);
                if (cl)
                    clen = strtoul(cl + 16, NULL, 10);
                if (have >= head + clen) {
                    size_t bl = clen < sizeof g_last_body - 1 ? clen : sizeof g_last_body - 1;
                    memcpy(g_last_body, buf + head, bl);
                    g_last_body[bl] = 0;
                    g_requests++;
                    if (write(fd, g_answer, strlen(g_answer)) < 0)
                        break;
                    memmove(buf, buf + head + clen, have - head - clen);
                    have -= head + clen;
                    continue;
                }
            }
            if (have == sizeof buf)
                break;
            ssize_t got = read(fd, buf + have, sizeof buf - have);
            if (got <= 0)
                break;
            have += (size_t)got;
        }
        close(fd);
    }
}

/* Runs 20 embeddings requests of three sentences each at a server that
 * answers with answer; *total gets the figures. */
static void run_against(const char *answer, bench_stats *total)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 8) == 0);
    bench_cfg cfg = {.api = BENCH_EMBEDDINGS, .concurrency = 1, .threads = 1, .n = 20, .timeout_ms = 5000,
                     .expect_json = true, .sentences = 3, .max_tokens = 1};
    cfg.addr_len = sizeof cfg.addr;
    getsockname(lfd, (struct sockaddr *)&cfg.addr, &cfg.addr_len);
    CHECK_EQ_INT(bench_workload_build(&cfg, "/v1/embeddings", "127.0.0.1", "m", "a text", NULL), 0);
    g_answer = answer;
    g_requests = 0;
    pthread_t th;
    pthread_create(&th, NULL, server_main, &lfd);
    double seconds;
    bench_run(&cfg, total, &seconds);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    pthread_join(th, NULL);
    for (size_t i = 0; i < cfg.n_reqs; i++)
        free(cfg.reqs[i]);
    free(cfg.reqs);
    free(cfg.req_lens);
}

static void test_non_json_body_is_an_error(void)
{
    bench_stats *total = malloc(sizeof *total);
    run_against("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nnot JSON :(", total);
    CHECK_EQ_INT(total->requests, 0);
    CHECK_EQ_INT(total->errors, 20);
    CHECK_EQ_INT(total->err_kind[BENCH_ERR_BAD_JSON], 20);
    CHECK_EQ_INT(total->usage_answers, 0);
    free(total);
}

static void test_usage_is_summed_and_sentences_sent(void)
{
    bench_stats *total = malloc(sizeof *total);
    const char *body = "{\"object\":\"list\",\"data\":[],\"usage\":{\"prompt_tokens\":7,\"total_tokens\":7}}";
    char answer[256];
    snprintf(answer, sizeof answer, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body);
    run_against(answer, total);
    CHECK_EQ_INT(total->requests, 20);
    CHECK_EQ_INT(total->errors, 0);
    CHECK_EQ_INT(total->usage_answers, 20);
    CHECK_EQ_INT(total->prompt_tokens, 140);
    /* the server saw three inputs per request, all different */
    cJSON *j = cJSON_Parse(g_last_body);
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, "input");
    CHECK_MSG(cJSON_GetArraySize(in) == 3, "%s", g_last_body);
    const char *t0 = cJSON_GetArrayItem(in, 0) ? cJSON_GetArrayItem(in, 0)->valuestring : "";
    const char *t1 = cJSON_GetArrayItem(in, 1) ? cJSON_GetArrayItem(in, 1)->valuestring : "";
    const char *t2 = cJSON_GetArrayItem(in, 2) ? cJSON_GetArrayItem(in, 2)->valuestring : "";
    CHECK(strcmp(t0, t1) && strcmp(t1, t2) && strcmp(t0, t2) && strstr(t0, "a text"));
    CHECK_EQ_STR(cJSON_GetObjectItemCaseSensitive(j, "model")->valuestring, "m");
    cJSON_Delete(j);
    free(total);
}

static void test_prompt_words(void)
{
    /* N - 6 words after the numbered prefix; prefixes differ per variant */
    char *a = bench_workload_prompt(100, 3), *b = bench_workload_prompt(100, 4);
    CHECK(a && b && strncmp(a, "Request 3.", 10) == 0 && strncmp(b, "Request 4.", 10) == 0);
    int spaces = 0;
    for (const char *p = a; p && *p; p++)
        spaces += *p == ' ';
    CHECK_EQ_INT(spaces, 1 + 94);
    CHECK(a && b && strcmp(strchr(a, '.'), strchr(b, '.')) == 0); /* the words are the same */
    free(a);
    free(b);
    a = bench_workload_prompt(1, 0); /* never empty of words */
    CHECK(a && strcmp(a, "Request 0. the") == 0);
    free(a);
}

int main(void)
{
    if (guard_setup()) {
        printf("not ok - guard page setup\n");
        return 1;
    }
    RUN(test_content_length_every_split);
    RUN(test_chunked_every_split);
    RUN(test_sse_events_split_across_reads);
    RUN(test_close_delimited_and_cut_answers);
    RUN(test_malformed_heads);
    RUN(test_answer_json);
    RUN(test_non_json_body_is_an_error);
    RUN(test_usage_is_summed_and_sentences_sent);
    RUN(test_prompt_words);
    TEST_EXIT();
}

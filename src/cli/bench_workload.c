/* bench_workload.c: the requests of a `hearth bench` run (all but --api
 * infer's, which bench_infer.c builds from the model's metadata), written
 * whole into cfg->reqs before the run so the hot path only copies bytes to
 * a socket.
 *
 * How: a body per request from --prompt or --input's lines, with two sizes.
 * --sentences N puts N inputs in each embeddings/TEI request, each a
 * different text: N consecutive --input lines, or the default text numbered
 * (k: TEXT), so a server that caches embeddings by input answers none of
 * them from its cache. --prompt-tokens N makes the prompt from a fixed list
 * of common English words, each one token in the BPE, SentencePiece and
 * WordPiece vocabularies of common models, after a prefix numbered per
 * request ("Request 17."), so a prefix cache shares not even the first
 * token between two requests. Either makes BENCH_VARIANTS requests, sent in
 * turn; the server's own prompt count (usage.prompt_tokens) is what the
 * report gives (bench_answer.c), since no count made here can know the
 * server's tokenizer or chat template.
 * Rejected: a body made at send time with a counter in it (cJSON and
 * allocation on the hot path, for a cache that 256 prompts already defeat
 * on every server we measure against); random words (the count would vary
 * between runs, and runs must compare). */
#include "bench.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distinct requests made for --sentences or --prompt-tokens without
 * --input: more prompts than llama-server has slots or vLLM keeps cached
 * at the sizes we bench, few enough to write in a moment. */
#define BENCH_VARIANTS 256
/* Tokens of a --prompt-tokens prompt that are not its words: BOS and the
 * "Request 17." prefix (digits are single tokens in llama 3 and Qwen). */
#define PREFIX_TOKENS 6

static const char *const words[] = {
    "the",  "of",    "and",  "to",    "in",   "is",    "that", "it",    "was",   "for",   "on",   "are",  "as",
    "with", "his",   "they", "at",    "be",   "this",  "have", "from",  "or",    "one",   "had",  "by",   "word",
    "but",  "not",   "what", "all",   "were", "we",    "when", "your",  "can",   "said",  "there", "use", "an",
    "each", "which", "she",  "do",    "how",  "their", "if",   "will",  "up",    "other", "about", "out", "many",
    "then", "them",  "these", "so",   "some", "her",   "would", "make", "like",  "him",   "into", "time"};
#define N_WORDS (sizeof words / sizeof words[0])

char *bench_workload_prompt(int tokens, unsigned variant)
{
    hearth_buf b;
    hearth_buf_init(&b, (size_t)64 << 20);
    int rc = hearth_buf_printf(&b, "Request %u.", variant);
    int n_words = tokens > PREFIX_TOKENS ? tokens - PREFIX_TOKENS : 1;
    /* 13 is prime to N_WORDS: every word in turn, in an order with no
     * repeated pair a tokenizer could merge */
    for (int i = 0; !rc && i < n_words; i++)
        rc = hearth_buf_printf(&b, " %s", words[((size_t)i * 13) % N_WORDS]);
    if (rc) {
        hearth_buf_deinit(&b);
        return NULL;
    }
    return b.data;
}

/* The JSON body of one request: texts[0..n) are the inputs of an
 * embeddings/TEI request (an array when n > 1), texts[0] the prompt of a
 * completion/chat one. */
static char *make_body(const bench_cfg *cfg, const char *model, const char *const *texts, int n)
{
    cJSON *j = cJSON_CreateObject(), *arr = NULL;
    if (model && cfg->api != BENCH_TEI)
        cJSON_AddStringToObject(j, "model", model);
    switch (cfg->api) {
    case BENCH_COMPLETION:
    case BENCH_CHAT:
        if (cfg->api == BENCH_COMPLETION) {
            cJSON_AddStringToObject(j, "prompt", texts[0]);
        } else {
            cJSON *msgs = cJSON_AddArrayToObject(j, "messages"), *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "user");
            cJSON_AddStringToObject(m, "content", texts[0]);
            cJSON_AddItemToArray(msgs, m);
        }
        cJSON_AddNumberToObject(j, "max_tokens", cfg->max_tokens);
        cJSON_AddBoolToObject(j, "stream", cfg->stream);
        /* a stream carries usage (the prompt's size, as the server counted
         * it) only when asked, in OpenAI's protocol; hearth, vLLM and
         * llama-server all understand the ask */
        if (cfg->stream)
            cJSON_AddBoolToObject(cJSON_AddObjectToObject(j, "stream_options"), "include_usage", true);
        break;
    case BENCH_EMBEDDINGS:
    case BENCH_TEI: {
        const char *key = cfg->api == BENCH_TEI ? "inputs" : "input";
        if (n == 1) {
            cJSON_AddStringToObject(j, key, texts[0]);
            break;
        }
        arr = cJSON_AddArrayToObject(j, key);
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(arr, cJSON_CreateString(texts[i]));
        break;
    }
    default:
        break;
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static int add_request(bench_cfg *cfg, size_t *cap, const char *method, const char *path, const char *host,
                       const char *body)
{
    if (cfg->n_reqs == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        char **r = realloc(cfg->reqs, nc * sizeof *r);
        if (!r)
            return -1;
        cfg->reqs = r;
        size_t *l = realloc(cfg->req_lens, nc * sizeof *l);
        if (!l)
            return -1;
        cfg->req_lens = l;
        *cap = nc;
    }
    hearth_buf b;
    hearth_buf_init(&b, (size_t)64 << 20);
    int rc = body ? hearth_buf_printf(&b,
                                      "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                                      "Content-Length: %zu\r\n\r\n%s",
                                      method, path, host, strlen(body), body)
                  : hearth_buf_printf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n\r\n", method, path, host);
    if (rc) {
        hearth_buf_deinit(&b);
        return -1;
    }
    cfg->reqs[cfg->n_reqs] = b.data;
    cfg->req_lens[cfg->n_reqs++] = b.len;
    return 0;
}

static int add_body(bench_cfg *cfg, size_t *cap, const char *path, const char *host, char *body)
{
    int rc = body ? add_request(cfg, cap, "POST", path, host, body) : -1;
    free(body);
    return rc;
}

/* Without --input: one request of prompt, or BENCH_VARIANTS of a size. */
static int build_generated(bench_cfg *cfg, size_t *cap, const char *path, const char *host, const char *model,
                           const char *prompt)
{
    int n = cfg->sentences > 1 ? cfg->sentences : 1;
    bool vary = n > 1 || cfg->prompt_tokens > 0;
    char **texts = calloc((size_t)n, sizeof *texts);
    int rc = texts ? 0 : -1;
    for (unsigned v = 0; !rc && v < (vary ? BENCH_VARIANTS : 1u); v++) {
        for (int i = 0; !rc && i < n; i++) {
            free(texts[i]);
            texts[i] = NULL;
            if (cfg->prompt_tokens > 0) {
                texts[i] = bench_workload_prompt(cfg->prompt_tokens, v);
            } else if (n > 1) {
                size_t len = strlen(prompt) + 32;
                if ((texts[i] = malloc(len)))
                    snprintf(texts[i], len, "%u: %s", v * (unsigned)n + (unsigned)i, prompt);
            } else {
                texts[i] = strdup(prompt);
            }
            rc = texts[i] ? 0 : -1;
        }
        if (!rc)
            rc = add_body(cfg, cap, path, host, make_body(cfg, model, (const char *const *)texts, n));
    }
    for (int i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts);
    return rc;
}

/* The lines of path, trimmed, empty ones dropped; NULL (said) on failure. */
static char **read_lines(const char *path, size_t *n_lines)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "hearth bench: --input %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char **lines = NULL, *line = NULL;
    size_t n = 0, cap = 0, lcap = 0;
    ssize_t len;
    bool ok = true;
    while (ok && (len = getline(&line, &lcap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!len)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **l = realloc(lines, cap * sizeof *l);
            ok = l != NULL;
            if (l)
                lines = l;
        }
        if (ok && !(lines[n++] = strdup(line)))
            ok = false, n--;
    }
    free(line);
    fclose(f);
    if (!ok || !n) {
        fprintf(stderr, "hearth bench: --input %s %s\n", path, ok ? "has no requests" : ": out of memory");
        for (size_t i = 0; i < n; i++)
            free(lines[i]);
        free(lines);
        return NULL;
    }
    *n_lines = n;
    return lines;
}

/* From --input: a line that starts with '{' is sent as the body as it is
 * (any line, for raw), else it is a text; with --sentences N, request i
 * takes lines iN..iN+N-1 (wrapping round at the end). */
static int build_from_input(bench_cfg *cfg, size_t *cap, const char *path, const char *host, const char *model,
                            const char *input)
{
    size_t n_lines = 0;
    char **lines = read_lines(input, &n_lines);
    if (!lines)
        return -1;
    int n = cfg->sentences > 1 ? cfg->sentences : 1, rc = 0;
    size_t n_req = n > 1 ? (n_lines + (size_t)n - 1) / (size_t)n : n_lines;
    const char **texts = calloc((size_t)n, sizeof *texts);
    if (!texts)
        rc = -1;
    for (size_t r = 0; !rc && r < n_req; r++) {
        const char *line = lines[r * (size_t)n % n_lines];
        if (n == 1 && (line[0] == '{' || cfg->api == BENCH_RAW)) {
            char *body = strdup(line);
            rc = add_body(cfg, cap, path, host, body);
            continue;
        }
        for (int i = 0; i < n; i++) {
            texts[i] = lines[(r * (size_t)n + (size_t)i) % n_lines];
            if (texts[i][0] == '{') {
                fprintf(stderr, "hearth bench: --sentences takes texts from --input, and %s has a JSON line\n", input);
                rc = -1;
                break;
            }
        }
        if (!rc)
            rc = add_body(cfg, cap, path, host, make_body(cfg, model, texts, n));
    }
    free(texts);
    for (size_t i = 0; i < n_lines; i++)
        free(lines[i]);
    free(lines);
    return rc;
}

int bench_workload_build(bench_cfg *cfg, const char *path, const char *host, const char *model, const char *prompt,
                         const char *input)
{
    size_t cap = 0;
    if (cfg->api == BENCH_HEALTH || (cfg->api == BENCH_RAW && !input))
        return add_request(cfg, &cap, "GET", path, host, NULL);
    if (!input)
        return build_generated(cfg, &cap, path, host, model, prompt);
    return build_from_input(cfg, &cap, path, host, model, input);
}

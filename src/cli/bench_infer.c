/* bench_infer.c: `hearth bench --api infer`: frames sent to a fixed-shape
 * model over the Open Inference Protocol (KServe v2 REST, as Triton serves
 * it), and the check that what came back is an inference response.
 *
 * How: before the run, GET {prefix}/v2/models/{m} gives the model's inputs
 * (name, datatype, shape) and outputs; one frame is made for each input (the
 * first from --input, raw little-endian bytes whose size must be the
 * input's, else random FP32 in [-1, 1] from a fixed seed) and written once
 * into whole POST {prefix}/v2/models/{m}/infer requests. With the binary
 * tensor data extension (the default) a request is the JSON header
 * (Inference-Header-Content-Length says how long) followed by the raw
 * bytes, every output asked for as binary; with --binary 0 the tensors are
 * JSON "data" arrays. Request-level "parameters" carry Triton's "timeout"
 * (microseconds, --send-deadline) and its sequence_id / sequence_start /
 * sequence_end (--sequence-id): a sequence needs four variants of the
 * request (middle, first, last, first and last), and conn_begin picks one
 * by bench_infer_pick. A dynamic dimension (-1) is sent as 1: a batch of one
 * frame. With --shm the inputs go once into a POSIX shared memory object
 * that the server maps (Triton's system shared memory extension: POST
 * .../v2/systemsharedmemory/region/{r}/register), unlinked at once so a
 * bench that dies leaves nothing behind, and each request names the region
 * instead of carrying the bytes (outputs still come back in the body);
 * bench_infer_finish unregisters it.
 * Rejected: making a fresh frame per request (the hot path only copies
 * bytes; the server's time does not depend on the pixel values of a
 * fixed-shape conv net); BYTES and FP16/BF16 JSON tensors (no frame model
 * takes them; binary FP16 from --input works); several frames in
 * one run (a camera's frames are all the same size: one is enough to time). */
#include "bench.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_TENSORS 64                   /* inputs or outputs a model may list */
#define MAX_DIMS 8
#define MAX_FRAME ((size_t)256 << 20)    /* bytes of one input */
#define MAX_REQUEST ((size_t)512 << 20)  /* bytes of one whole request (JSON tensors are ~3x bigger) */

typedef struct tensor {
    char name[256];
    char dtype[16];
    int64_t shape[MAX_DIMS];
    int n_dims;
    size_t elem, bytes;    /* bytes per element, bytes in all */
    unsigned char *data;   /* the frame (inputs only) */
} tensor;

typedef struct model_meta {
    tensor in[MAX_TENSORS];
    int n_in;
    char shm_region[64];           /* --shm: the region the inputs are in, at shm_off[i] */
    size_t shm_off[MAX_TENSORS];
    char out[MAX_TENSORS][256];
    int n_out;
} model_meta;

/* Bytes per element of an OIP datatype; 0 for one a frame cannot be (BYTES, unknown). */
static size_t dtype_size(const char *d)
{
    static const struct {
        const char *name;
        size_t size;
    } t[] = {{"BOOL", 1}, {"UINT8", 1}, {"INT8", 1}, {"UINT16", 2}, {"INT16", 2}, {"FP16", 2}, {"BF16", 2},
             {"UINT32", 4}, {"INT32", 4}, {"FP32", 4}, {"UINT64", 8}, {"INT64", 8}, {"FP64", 8}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(d, t[i].name))
            return t[i].size;
    return 0;
}

/* Percent-encodes a model name for the URL path (names are the user's). */
static void path_escape(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || strchr("-._~", ch))
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", ch);
    }
    out[o] = 0;
}

/* s as a quoted, escaped JSON string (caller frees), or NULL. */
static char *json_quote(const char *s)
{
    cJSON *j = cJSON_CreateStringReference(s);
    char *out = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    return out;
}

static void copy_name(char *dst, size_t cap, const cJSON *j)
{
    snprintf(dst, cap, "%s", cJSON_IsString(j) ? j->valuestring : "");
}

/* Reads the metadata document into m; 0, or -1 after saying why. */
static int parse_meta(const char *model, const char *body, model_meta *m)
{
    cJSON *j = cJSON_Parse(body);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(j, "inputs");
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(j, "outputs"), *it;
    int rc = -1;
    if (!cJSON_IsArray(ins) || !cJSON_GetArraySize(ins)) {
        fprintf(stderr, "hearth bench: model '%s': its metadata lists no \"inputs\" (got: %.200s)\n", model, body);
        goto done;
    }
    cJSON_ArrayForEach(it, ins) {
        if (m->n_in == MAX_TENSORS) {
            fprintf(stderr, "hearth bench: model '%s' has more than %d inputs\n", model, MAX_TENSORS);
            goto done;
        }
        tensor *t = &m->in[m->n_in++];
        copy_name(t->name, sizeof t->name, cJSON_GetObjectItemCaseSensitive(it, "name"));
        copy_name(t->dtype, sizeof t->dtype, cJSON_GetObjectItemCaseSensitive(it, "datatype"));
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape"), *d;
        t->elem = dtype_size(t->dtype);
        if (!t->name[0] || !t->elem || !cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > MAX_DIMS) {
            fprintf(stderr, "hearth bench: model '%s': input %d ('%s'): need a name, a datatype of fixed size "
                            "(got '%s') and a shape of at most %d dimensions\n",
                    model, m->n_in - 1, t->name, t->dtype, MAX_DIMS);
            goto done;
        }
        size_t n = 1;
        cJSON_ArrayForEach(d, shape) {
            if (!cJSON_IsNumber(d) || d->valuedouble < -1 || d->valuedouble > 1e9) {
                fprintf(stderr, "hearth bench: model '%s': input '%s' has a bad dimension\n", model, t->name);
                goto done;
            }
            int64_t v = d->valuedouble < 0 ? 1 : (int64_t)d->valuedouble; /* dynamic: a batch of one */
            t->shape[t->n_dims++] = v;
            if (v && n > MAX_FRAME / (size_t)v) {
                n = MAX_FRAME + 1;
                break;
            }
            n *= (size_t)v;
        }
        if (n > MAX_FRAME / t->elem) {
            fprintf(stderr, "hearth bench: model '%s': input '%s' is over %zu MiB\n", model, t->name, MAX_FRAME >> 20);
            goto done;
        }
        t->bytes = n * t->elem;
    }
    cJSON_ArrayForEach(it, outs) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (m->n_out < MAX_TENSORS && cJSON_IsString(name))
            copy_name(m->out[m->n_out++], sizeof m->out[0], name);
    }
    rc = 0;
done:
    cJSON_Delete(j);
    return rc;
}

/* Random FP32 in [-1, 1] from xorshift64*, the same frame every run. */
static void random_frame(tensor *t, uint64_t seed)
{
    uint64_t x = seed ? seed : 1;
    for (size_t i = 0; i + 4 <= t->bytes; i += 4) {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        float v = (float)((double)((x * 2685821657736338717ull) >> 40) / 16777216.0 * 2.0 - 1.0);
        memcpy(t->data + i, &v, 4);
    }
}

static int read_frame(const char *path, const char *model, tensor *t)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "hearth bench: --input %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t got = fread(t->data, 1, t->bytes, f);
    int extra = fgetc(f);
    bool err = ferror(f);
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    fclose(f);
    if (err) {
        fprintf(stderr, "hearth bench: --input %s: read error\n", path);
        return -1;
    }
    if (got != t->bytes || extra != EOF) {
        char dims[160] = "";
        size_t o = 0;
        for (int i = 0; i < t->n_dims && o < sizeof dims; i++)
            o += (size_t)snprintf(dims + o, sizeof dims - o, "%s%" PRId64, i ? "," : "", t->shape[i]);
        fprintf(stderr, "hearth bench: --input %s: %ld bytes, but input '%s' of model '%s' (%s [%s]) takes %zu "
                        "bytes: one frame, raw little-endian\n",
                path, size, t->name, model, t->dtype, dims, t->bytes);
        return -1;
    }
    return 0;
}

/* Appends t's elements as a JSON number list. */
static int json_data(hearth_buf *b, const tensor *t)
{
    size_t n = t->bytes / t->elem;
    const unsigned char *p = t->data;
    int rc = hearth_buf_appends(b, "[");
    for (size_t i = 0; i < n && !rc; i++, p += t->elem) {
        const char *sep = i ? "," : "";
        const char *d = t->dtype;
        if (!strcmp(d, "FP32")) {
            float v;
            memcpy(&v, p, 4);
            rc = hearth_buf_printf(b, "%s%.9g", sep, (double)v);
        } else if (!strcmp(d, "FP64")) {
            double v;
            memcpy(&v, p, 8);
            rc = hearth_buf_printf(b, "%s%.17g", sep, v);
        } else if (!strcmp(d, "BOOL")) {
            rc = hearth_buf_printf(b, "%s%s", sep, *p ? "true" : "false");
        } else {
            bool is_signed = d[0] == 'I';
            int64_t s = 0;
            uint64_t u = 0;
            switch (t->elem) {
            case 1: s = (int8_t)p[0], u = p[0]; break;
            case 2: { int16_t x; uint16_t y; memcpy(&x, p, 2); memcpy(&y, p, 2); s = x, u = y; break; }
            case 4: { int32_t x; uint32_t y; memcpy(&x, p, 4); memcpy(&y, p, 4); s = x, u = y; break; }
            default: { memcpy(&s, p, 8); memcpy(&u, p, 8); break; }
            }
            rc = is_signed ? hearth_buf_printf(b, "%s%" PRId64, sep, s) : hearth_buf_printf(b, "%s%" PRIu64, sep, u);
        }
    }
    return rc ? rc : hearth_buf_appends(b, "]");
}

/* The JSON of one request; with binary, the tensors' bytes go after it.
 * first/last: the sequence's start and end frames. */
static char *request_json(const model_meta *m, const bench_infer_opts *o, const bench_cfg *cfg, bool first,
                          bool last)
{
    hearth_buf b;
    hearth_buf_init(&b, MAX_REQUEST);
    int rc = hearth_buf_appends(&b, "{\"inputs\":[");
    for (int i = 0; i < m->n_in && !rc; i++) {
        const tensor *t = &m->in[i];
        char *name = json_quote(t->name);
        if (!name) {
            rc = -1;
            break;
        }
        rc = hearth_buf_printf(&b, "%s{\"name\":%s,\"datatype\":\"%s\",\"shape\":[", i ? "," : "", name, t->dtype);
        free(name);
        for (int d = 0; d < t->n_dims && !rc; d++)
            rc = hearth_buf_printf(&b, "%s%" PRId64, d ? "," : "", t->shape[d]);
        if (rc)
            break;
        if (o->shm) {
            rc = hearth_buf_printf(&b, "],\"parameters\":{\"shared_memory_region\":\"%s\",\"shared_memory_byte_size\":%zu,"
                                       "\"shared_memory_offset\":%zu}}", m->shm_region, t->bytes, m->shm_off[i]);
        } else if (o->binary) {
            rc = hearth_buf_printf(&b, "],\"parameters\":{\"binary_data_size\":%zu}}", t->bytes);
        } else {
            rc = hearth_buf_appends(&b, "],\"data\":");
            rc = rc ? rc : json_data(&b, t);
            rc = rc ? rc : hearth_buf_appends(&b, "}");
        }
    }
    rc = rc ? rc : hearth_buf_appends(&b, "]");
    if (m->n_out && !rc) {
        rc = hearth_buf_appends(&b, ",\"outputs\":[");
        for (int i = 0; i < m->n_out && !rc; i++) {
            char *name = json_quote(m->out[i]);
            rc = !name ? -1
                       : hearth_buf_printf(&b, "%s{\"name\":%s,\"parameters\":{\"binary_data\":%s}}", i ? "," : "",
                                           name, o->binary ? "true" : "false");
            free(name);
        }
        rc = rc ? rc : hearth_buf_appends(&b, "]");
    }
    if ((o->sequence_id || o->send_deadline) && !rc) {
        const char *sep = "";
        rc = hearth_buf_appends(&b, ",\"parameters\":{");
        if (o->sequence_id && !rc) {
            const char *s = o->sequence_id;
            bool digits = *s && strspn(s, "0123456789") == strlen(s) && strlen(s) < 20;
            char *quoted = digits ? NULL : json_quote(s);
            rc = !digits && !quoted ? -1
                                    : hearth_buf_printf(&b, "\"sequence_id\":%s,\"sequence_start\":%s,"
                                                            "\"sequence_end\":%s",
                                                        digits ? s : quoted, first ? "true" : "false",
                                                        last ? "true" : "false");
            free(quoted);
            sep = ",";
        }
        if (o->send_deadline && !rc)
            rc = hearth_buf_printf(&b, "%s\"timeout\":%" PRIu64, sep, (uint64_t)(cfg->deadline_ms * 1000.0 + 0.5));
        rc = rc ? rc : hearth_buf_appends(&b, "}");
    }
    rc = rc ? rc : hearth_buf_appends(&b, "}");
    if (rc || hearth_buf_append(&b, "", 1)) {
        hearth_buf_deinit(&b);
        return NULL;
    }
    return b.data;
}

/* One whole HTTP request into cfg->reqs[cfg->n_reqs]. */
static int add_request(bench_cfg *cfg, const char *host, const char *path, const model_meta *m,
                       const bench_infer_opts *o, bool first, bool last)
{
    char *json = request_json(m, o, cfg, first, last);
    hearth_buf b;
    hearth_buf_init(&b, MAX_REQUEST);
    if (!json)
        goto fail;
    size_t jl = strlen(json), tensors = 0;
    bool bin_body = o->binary && !o->shm;
    for (int i = 0; bin_body && i < m->n_in; i++)
        tensors += m->in[i].bytes;
    int rc = bin_body ? hearth_buf_printf(&b,
                                           "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/octet-stream\r\n"
                                           "Inference-Header-Content-Length: %zu\r\nContent-Length: %zu\r\n\r\n",
                                           path, host, jl, jl + tensors)
                       : hearth_buf_printf(&b,
                                           "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                                           "Content-Length: %zu\r\n\r\n",
                                           path, host, jl);
    rc = rc ? rc : hearth_buf_append(&b, json, jl);
    for (int i = 0; bin_body && i < m->n_in && !rc; i++)
        rc = hearth_buf_append(&b, m->in[i].data, m->in[i].bytes);
    free(json);
    if (rc)
        goto fail;
    cfg->reqs[cfg->n_reqs] = b.data;
    cfg->req_lens[cfg->n_reqs++] = b.len;
    return 0;
fail:
    hearth_buf_deinit(&b);
    fprintf(stderr, "hearth bench: out of memory, or a request over %zu MiB\n", MAX_REQUEST >> 20);
    return -1;
}

/* The regions this process registered (one per target), for bench_infer_finish. */
static struct {
    bench_cfg cfg;
    char host[256];
    char path[1400];
} g_regions[2];
static int g_n_regions;

/* --shm: the inputs into a new shared memory object, registered with the
 * server as m->shm_region. 0, or -1 after saying why. */
static int shm_setup(bench_cfg *cfg, const char *host, const char *prefix, model_meta *m)
{
    if (g_n_regions >= 2) {
        fprintf(stderr, "hearth bench: --shm: two targets at most\n");
        return -1;
    }
    size_t total = 0;
    for (int i = 0; i < m->n_in; i++) {
        m->shm_off[i] = total;
        total += (m->in[i].bytes + 63) / 64 * 64;
    }
    char key[80];
    snprintf(m->shm_region, sizeof m->shm_region, "hearth-bench-%d-%d", (int)getpid(), g_n_regions);
    snprintf(key, sizeof key, "/%s", m->shm_region);
    int fd = shm_open(key, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)(total ? total : 1)) != 0) {
        fprintf(stderr, "hearth bench: --shm: shared memory object %s: %s\n", key, strerror(errno));
        if (fd >= 0) {
            close(fd);
            shm_unlink(key);
        }
        return -1;
    }
    unsigned char *map = mmap(NULL, total ? total : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        fprintf(stderr, "hearth bench: --shm: mapping %s: %s\n", key, strerror(errno));
        shm_unlink(key);
        return -1;
    }
    for (int i = 0; i < m->n_in; i++) /* the mapping stays for the run (the process's exit drops it) */
        memcpy(map + m->shm_off[i], m->in[i].data, m->in[i].bytes);
    char path[1400], body[256], err[160];
    int status = 0;
    snprintf(path, sizeof path, "%s/v2/systemsharedmemory/region/%s/register", prefix, m->shm_region);
    snprintf(body, sizeof body, "{\"key\":\"%s\",\"offset\":0,\"byte_size\":%zu}", key, total ? total : 1);
    char *ans = bench_call(cfg, host, "POST", path, body, &status, err, sizeof err);
    shm_unlink(key); /* the server has mapped it (or failed to): the name is not needed again */
    if (!ans || status != 200) {
        fprintf(stderr, "hearth bench: --shm: POST %s: %s %.300s\n", path, ans ? "status" : err, ans ? ans : "");
        if (ans)
            fprintf(stderr, "  (status %d)\n", status);
        free(ans);
        return -1;
    }
    free(ans);
    g_regions[g_n_regions].cfg = *cfg;
    snprintf(g_regions[g_n_regions].host, sizeof g_regions[0].host, "%s", host);
    snprintf(g_regions[g_n_regions].path, sizeof g_regions[0].path, "%s/v2/systemsharedmemory/region/%s/unregister",
             prefix, m->shm_region);
    g_n_regions++;
    return 0;
}

void bench_infer_finish(void)
{
    for (int i = 0; i < g_n_regions; i++) {
        int status = 0;
        free(bench_call(&g_regions[i].cfg, g_regions[i].host, "POST", g_regions[i].path, "{}", &status, NULL, 0));
    }
    g_n_regions = 0;
}

int bench_infer_build(bench_cfg *cfg, const char *host, const char *prefix, const char *model,
                      const bench_infer_opts *o)
{
    char esc[1024], path[2200], err[160]; /* path: a URL prefix (< 1024) and the escaped name */
    int status = 0, rc = -1;
    model_meta *m = calloc(1, sizeof *m);
    char *body = NULL;
    if (!m) {
        fprintf(stderr, "hearth bench: out of memory\n");
        return -1;
    }
    path_escape(model, esc, sizeof esc);
    snprintf(path, sizeof path, "%s/v2/models/%s", prefix, esc);
    body = bench_get(cfg, host, path, &status, err, sizeof err);
    if (!body || status != 200) {
        if (body)
            fprintf(stderr, "hearth bench: GET %s: status %d: %.300s\n", path, status, body);
        else
            fprintf(stderr, "hearth bench: GET %s from %s: %s\n", path, host, err);
        goto done;
    }
    if (parse_meta(model, body, m))
        goto done;
    for (int i = 0; i < m->n_in; i++) {
        tensor *t = &m->in[i];
        if (!(t->data = malloc(t->bytes ? t->bytes : 1))) {
            fprintf(stderr, "hearth bench: out of memory for input '%s' (%zu bytes)\n", t->name, t->bytes);
            goto done;
        }
        if (i == 0 && o->input) {
            if (read_frame(o->input, model, t))
                goto done;
        } else if (!strcmp(t->dtype, "FP32")) {
            random_frame(t, BENCH_INFER_SEED + (uint64_t)i);
        } else {
            fprintf(stderr, "hearth bench: model '%s': input '%s' is %s: %s\n", model, t->name, t->dtype,
                    i ? "only the first input can come from a file, and random data is FP32 only"
                      : "random data is FP32 only; give one frame with --input FILE");
            goto done;
        }
        if (!o->binary && (!strcmp(t->dtype, "FP16") || !strcmp(t->dtype, "BF16"))) {
            fprintf(stderr, "hearth bench: model '%s': input '%s' is %s: send it with --binary 1\n", model, t->name,
                    t->dtype);
            goto done;
        }
    }
    if (o->shm && shm_setup(cfg, host, prefix, m))
        goto done;
    int variants = o->sequence_id ? 4 : 1;
    cfg->reqs = calloc((size_t)variants, sizeof *cfg->reqs);
    cfg->req_lens = calloc((size_t)variants, sizeof *cfg->req_lens);
    cfg->n_reqs = 0;
    if (!cfg->reqs || !cfg->req_lens) {
        fprintf(stderr, "hearth bench: out of memory\n");
        goto done;
    }
    snprintf(path + strlen(path), sizeof path - strlen(path), "/infer");
    for (int v = 0; v < variants; v++) /* v == bench_infer_pick(first, last) */
        if (add_request(cfg, host, path, m, o, v & 1, v & 2))
            goto done;
    cfg->sequence = o->sequence_id != NULL;
    rc = 0;
done:
    for (int i = 0; i < m->n_in; i++)
        free(m->in[i].data);
    free(m);
    free(body);
    return rc;
}

bool bench_infer_answer_ok(const bench_resp *r)
{
    const char *b = r->body.data ? r->body.data : "";
    size_t n = r->body.len, hl = n;
    if (r->infer_header_len >= 0) {
        if ((uint64_t)r->infer_header_len > n)
            return false;
        hl = (size_t)r->infer_header_len;
    }
    cJSON *j = cJSON_ParseWithLength(b, hl), *it;
    const cJSON *outs = cJSON_GetObjectItemCaseSensitive(j, "outputs");
    bool ok = cJSON_IsArray(outs);
    uint64_t binary = 0;
    cJSON_ArrayForEach(it, outs) {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "parameters");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(p, "binary_data_size");
        if (cJSON_IsNumber(size) && size->valuedouble >= 0)
            binary += (uint64_t)size->valuedouble;
    }
    cJSON_Delete(j);
    /* binary outputs follow the header, in order, filling the rest of the body */
    return ok && binary == n - hl;
}

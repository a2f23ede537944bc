/* oip_shm.c: Triton's system shared memory extension (oip_shm.h): the
 * process's registry of regions and its five routes.
 *
 * A region is the mapping of a POSIX shared memory object (shm_open of the
 * client's key, mapped read-write and shared, from 0 to its offset plus
 * byte_size) with a reference count: the registry holds one reference, and
 * every infer request that names the region holds one from its parse to its
 * answer, so a region unregistered while a frame reads or writes it is
 * unmapped only once that frame is answered (never under a running frame).
 * The registry is a fixed table of REGIONS_MAX under one mutex: lookups are
 * one per tensor named, and a host has a handful of regions.
 *
 * Errors say what Triton says where clients may match on it ("Unable to
 * find system shared memory region: 'r'", "... already in manager"), with
 * the key, sizes and errno added where they help.
 *
 * Rejected: CUDA shared memory (the cudaIpc extension: the client's GPU
 * buffer handed over; needs the client's CUDA context, a later issue);
 * pinning regions with cudaHostRegister so a GPU copies from them directly
 * (registration is rare, but a region's pages then stay locked for a
 * client that may never unregister it; the copy through the staging buffer
 * costs tens of microseconds). */
#include "oip_shm.h"
#include "json_body.h"
#include "oip.h"
#include "oip_json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define REGIONS_MAX 64
#define SHM_NAME_MAX 128
#define SHM_KEY_MAX 256

struct hearth_oip_shm {
    char name[SHM_NAME_MAX];
    char key[SHM_KEY_MAX];
    uint64_t offset, byte_size;
    char *map;
    size_t map_len;
    _Atomic int refs;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static hearth_oip_shm *g_regions[REGIONS_MAX];
static int g_workers;

hearth_oip_shm *hearth_oip_shm_get(const char *name)
{
    hearth_oip_shm *r = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < REGIONS_MAX && !r; i++)
        if (g_regions[i] && strcmp(g_regions[i]->name, name) == 0)
            r = g_regions[i];
    if (r)
        atomic_fetch_add(&r->refs, 1);
    pthread_mutex_unlock(&g_lock);
    return r;
}

void hearth_oip_shm_put(hearth_oip_shm *r)
{
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        munmap(r->map, r->map_len);
        free(r);
    }
}

char *hearth_oip_shm_at(hearth_oip_shm *r, uint64_t offset, uint64_t size)
{
    if (!r || offset > r->byte_size || size > r->byte_size - offset)
        return NULL;
    return r->map + r->offset + offset;
}

const char *hearth_oip_shm_name(const hearth_oip_shm *r) { return r->name; }
uint64_t hearth_oip_shm_size(const hearth_oip_shm *r) { return r->byte_size; }

/* Removes name (NULL: all) from the registry; 0, or -1 when name was not there. */
static int unregister(const char *name)
{
    hearth_oip_shm *gone[REGIONS_MAX];
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < REGIONS_MAX; i++)
        if (g_regions[i] && (!name || strcmp(g_regions[i]->name, name) == 0)) {
            gone[n++] = g_regions[i];
            g_regions[i] = NULL;
        }
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; i < n; i++)
        hearth_oip_shm_put(gone[i]);
    return n || !name ? 0 : -1;
}

void hearth_oip_shm_clear(void)
{
    unregister(NULL);
}

/* ---- answers ---- */

static void respond_json(hearth_request *req, int status, hearth_buf *b)
{
    hearth_response res = {status, "application/json", NULL, b->data, b->len};
    hearth_respond(req, &res);
}

static void respond_err(hearth_request *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void respond_err(hearth_request *req, int status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hearth_oip_respond_error(req, status, msg);
}

static void respond_ok(hearth_request *req)
{
    hearth_response res = {200, NULL, NULL, "", 0};
    hearth_respond(req, &res);
}

static int region_json(hearth_buf *b, const hearth_oip_shm *r)
{
    int rc = hearth_buf_appends(b, "{\"name\":");
    if (!rc)
        rc = hearth_json_quote(b, r->name, strlen(r->name));
    if (!rc)
        rc = hearth_buf_appends(b, ",\"key\":");
    if (!rc)
        rc = hearth_json_quote(b, r->key, strlen(r->key));
    if (!rc)
        rc = hearth_buf_printf(b, ",\"offset\":%llu,\"byte_size\":%llu}", (unsigned long long)r->offset,
                               (unsigned long long)r->byte_size);
    return rc;
}

/* GET status of name (NULL: every region): a list, as Triton answers both. */
static void status(hearth_request *req, const char *name)
{
    hearth_buf b;
    hearth_buf_init(&b, (size_t)1 << 20);
    int rc = hearth_buf_append(&b, "[", 1), n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < REGIONS_MAX && !rc; i++) {
        const hearth_oip_shm *r = g_regions[i];
        if (!r || (name && strcmp(r->name, name) != 0))
            continue;
        if (n++)
            rc = hearth_buf_append(&b, ",", 1);
        if (!rc)
            rc = region_json(&b, r);
    }
    pthread_mutex_unlock(&g_lock);
    if (!rc)
        rc = hearth_buf_append(&b, "]", 1);
    if (rc)
        respond_err(req, 500, "out of memory");
    else if (name && !n)
        respond_err(req, 400, "Unable to find system shared memory region: '%s'", name);
    else
        respond_json(req, 200, &b);
    hearth_buf_deinit(&b);
}

/* A whole number in [0, 2^53] from item (absent: dflt), or -1. */
static double whole(const cJSON *item, double dflt)
{
    if (!item || cJSON_IsNull(item))
        return dflt;
    if (!cJSON_IsNumber(item) || item->valuedouble != floor(item->valuedouble) || item->valuedouble < 0 ||
        item->valuedouble > 9007199254740992.0)
        return -1;
    return item->valuedouble;
}

static void do_register(hearth_request *req, const char *name)
{
    if (g_workers > 1) {
        respond_err(req, 400, "system shared memory needs one server process: with --workers %d a region registered "
                              "through one worker is unknown to the others (serve with --workers 0 or 1)", g_workers);
        return;
    }
    size_t len;
    const char *body = hearth_request_body(req, &len);
    char jmsg[256];
    cJSON *doc = hearth_json_body_parse(body, len, jmsg, sizeof jmsg);
    if (!doc) {
        respond_err(req, 400, "register '%s': the request's JSON: %s", name, jmsg);
        return;
    }
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(doc, "key");
    double off = whole(cJSON_GetObjectItemCaseSensitive(doc, "offset"), 0);
    double size = whole(cJSON_GetObjectItemCaseSensitive(doc, "byte_size"), -1);
    hearth_oip_shm *r = NULL;
    int fd = -1;
    if (!cJSON_IsString(key) || !key->valuestring[0] || strlen(key->valuestring) >= SHM_KEY_MAX) {
        respond_err(req, 400, "register '%s': \"key\" must be the shared memory object's name (1 to %d characters)", name,
                    SHM_KEY_MAX - 1);
        goto out;
    }
    if (off < 0 || size <= 0) {
        respond_err(req, 400, "register '%s': \"byte_size\" must be a whole number > 0 and \"offset\" one >= 0", name);
        goto out;
    }
    if ((fd = shm_open(key->valuestring, O_RDWR, 0)) < 0) {
        respond_err(req, 400, "Unable to open shared memory region: '%s' (%s)", key->valuestring, strerror(errno));
        goto out;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || (double)st.st_size < off + size) {
        respond_err(req, 400, "register '%s': shared memory object '%s' holds %lld bytes, fewer than offset %.0f + byte_size %.0f",
                    name, key->valuestring, (long long)st.st_size, off, size);
        goto out;
    }
    if (!(r = calloc(1, sizeof *r))) {
        respond_err(req, 503, "out of memory");
        goto out;
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->key, sizeof r->key, "%s", key->valuestring);
    r->offset = (uint64_t)off;
    r->byte_size = (uint64_t)size;
    r->map_len = (size_t)(off + size);
    r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->map == MAP_FAILED) {
        respond_err(req, 400, "register '%s': cannot map shared memory object '%s' (%s)", name, key->valuestring,
                    strerror(errno));
        free(r);
        r = NULL;
        goto out;
    }
    atomic_store(&r->refs, 1);
    int slot = -1;
    bool dup = false;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < REGIONS_MAX; i++) {
        if (g_regions[i] && strcmp(g_regions[i]->name, name) == 0)
            dup = true;
        else if (!g_regions[i] && slot < 0)
            slot = i;
    }
    if (!dup && slot >= 0)
        g_regions[slot] = r;
    pthread_mutex_unlock(&g_lock);
    if (dup || slot < 0) {
        if (dup)
            respond_err(req, 400, "shared memory region '%s' already in manager", name);
        else
            respond_err(req, 400, "register '%s': %d regions are registered already, the most this server holds", name,
                        REGIONS_MAX);
        hearth_oip_shm_put(r);
        goto out;
    }
    respond_ok(req);
out:
    if (fd >= 0)
        close(fd);
    cJSON_Delete(doc);
}

/* "{rest}" of /v2/systemsharedmemory/: "status", "unregister", or
 * "region/{name}/{status|register|unregister}". */
static void route(hearth_request *req, bool post)
{
    size_t n;
    const char *rest = hearth_request_rest(req, &n);
    char name[SHM_NAME_MAX];
    if (n == 6 && memcmp(rest, "status", 6) == 0 && !post) {
        status(req, NULL);
        return;
    }
    if (n == 10 && memcmp(rest, "unregister", 10) == 0 && post) {
        unregister(NULL);
        respond_ok(req);
        return;
    }
    const char *slash = n > 7 && memcmp(rest, "region/", 7) == 0 ? memrchr(rest + 7, '/', n - 7) : NULL;
    if (slash) {
        size_t nl = (size_t)(slash - rest - 7), al = n - (size_t)(slash + 1 - rest);
        const char *action = slash + 1;
        if (nl == 0 || nl >= sizeof name || memchr(rest + 7, '/', nl)) {
            respond_err(req, 400, "a region's name is 1 to %zu characters without '/'", sizeof name - 1);
            return;
        }
        memcpy(name, rest + 7, nl);
        name[nl] = 0;
        if (!post && al == 6 && memcmp(action, "status", 6) == 0) {
            status(req, name);
            return;
        }
        if (post && al == 8 && memcmp(action, "register", 8) == 0) {
            do_register(req, name);
            return;
        }
        if (post && al == 10 && memcmp(action, "unregister", 10) == 0) {
            unregister(name); /* as Triton: unregistering a region that is not there is not an error */
            respond_ok(req);
            return;
        }
    }
    respond_err(req, 404, "no %s /v2/systemsharedmemory/%.*s: the routes are GET status, POST unregister, and "
                          "region/{name}/ with GET status, POST register and POST unregister",
                post ? "POST" : "GET", (int)(n > 120 ? 120 : n), rest);
}

static void shm_get(hearth_request *req, void *ctx)
{
    (void)ctx;
    route(req, false);
}

static void shm_post(hearth_request *req, void *ctx)
{
    (void)ctx;
    route(req, true);
}

int hearth_api_register_oip_shm(hearth_api *api, hearth_server *s, int workers)
{
    g_workers = workers;
    int rc = hearth_server_route(s, "GET", "/v2/systemsharedmemory/{r}", shm_get, api);
    if (!rc)
        rc = hearth_server_route(s, "POST", "/v2/systemsharedmemory/{r}", shm_post, api);
    return rc;
}

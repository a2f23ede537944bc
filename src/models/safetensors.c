/* safetensors.c: opening and validating a safetensors file.
 *
 * How: the 8-byte length is checked against the file and the 100 MiB bound,
 * the header is scanned once (commas outside strings) to bound how many
 * nodes cJSON may build, then parsed by cJSON with an explicit length, so
 * nothing past the header is ever read and no NUL terminator is needed. Each
 * entry is checked field by field; numbers must be integral, non-negative and
 * below 2^53 (cJSON holds them as doubles, exact up to there; no real file
 * comes near). Names are then sorted, which finds duplicates (cJSON keeps
 * both copies of a repeated key) and gives O(log n) lookups; an index sorted
 * by offset then shows overlaps, holes and trailing bytes in one pass.
 *
 * Messages name the tensor and a byte offset: the tensor's data offset for
 * range errors, else the file offset of its key in the header, found by
 * searching the raw header for "name": (best effort: a name with escapes, or
 * one that also appears earlier as a metadata key, gives the first match or
 * the header's start).
 *
 * Rejected: our own JSON parser (cJSON is already linked and fuzzed
 * upstream; the scan above bounds its memory); accepting holes or trailing
 * bytes (the reference refuses them, and a file with either was not written
 * by a safetensors writer); refusing non-float dtypes at open (BERT
 * checkpoints often carry an I64 position_ids buffer). */
#include "models/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* safetensors' dtypes with their widths in bits; hearth is the matching
 * hearth_dtype or -1. */
typedef struct st_dtype {
    const char *name;
    unsigned bits;
    int hearth;
} st_dtype;

static const st_dtype DTYPES[] = {
    {"F32", 32, HEARTH_F32}, {"F16", 16, HEARTH_F16},   {"BF16", 16, HEARTH_BF16}, {"F64", 64, -1},
    {"I64", 64, -1},         {"U64", 64, -1},           {"I32", 32, -1},           {"U32", 32, -1},
    {"I16", 16, -1},         {"U16", 16, -1},           {"I8", 8, -1},             {"U8", 8, -1},
    {"BOOL", 8, -1},         {"F8_E5M2", 8, -1},        {"F8_E4M3", 8, -1},        {"F8_E8M0", 8, -1},
    {"C64", 64, -1},         {"F4", 4, -1},             {"F6_E2M3", 6, -1},        {"F6_E3M2", 6, -1},
};

/* 2^53 - 1: the largest integer a double holds exactly with its neighbours. */
#define MAX_EXACT 9007199254740991.0

typedef struct ctx {
    hearth_st *st;
    const char *header; /* N bytes, not NUL-terminated */
    size_t header_len;
    uint64_t data_size;
    hearth_err *err;
} ctx;

/* Copies up to 64 bytes of an untrusted name for a message, replacing
 * anything but printable ASCII with '?'. */
static void printable(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(s), limit = n > 64 ? 64 : n, o = 0;
    for (size_t i = 0; i < limit && o + 1 < cap; i++)
        dst[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
    if (n > limit && o + 4 < cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = 0;
}

__attribute__((format(printf, 5, 6)))
static int fail(ctx *c, int code, const char *tensor, uint64_t at, const char *fmt, ...)
{
    char msg[HEARTH_ERR_MSG_MAX], name[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!tensor)
        return hearth_err_set(c->err, code, "%s: at offset %llu: %s", c->st->path,
                              (unsigned long long)at, msg);
    printable(name, sizeof name, tensor);
    return hearth_err_set(c->err, code, "%s: tensor '%s' at offset %llu: %s", c->st->path, name,
                          (unsigned long long)at, msg);
}

/* File offset of the key "name": in the header, or of the header's start. */
static uint64_t key_offset(const ctx *c, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (name[i] == '"' || name[i] == '\\' || (unsigned char)name[i] < 0x20)
            return 8;
    const char *h = c->header, *end = h + c->header_len;
    while (h < end) {
        const char *q = memchr(h, '"', (size_t)(end - h));
        if (!q || (size_t)(end - q) < n + 2)
            break;
        if (memcmp(q + 1, name, n) == 0 && q[n + 1] == '"') {
            const char *p = q + n + 2;
            while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
                p++;
            if (p < end && *p == ':')
                return 8 + (uint64_t)(q - c->header);
        }
        h = q + 1;
    }
    return 8;
}

/* Commas outside strings, stopping once past limit. */
static size_t count_commas(const char *s, size_t n, size_t limit)
{
    size_t commas = 0;
    bool in_str = false;
    for (size_t i = 0; i < n && commas <= limit; i++) {
        if (in_str) {
            if (s[i] == '\\')
                i++;
            else if (s[i] == '"')
                in_str = false;
        } else if (s[i] == '"') {
            in_str = true;
        } else if (s[i] == ',') {
            commas++;
        }
    }
    return commas;
}

static bool json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= MAX_EXACT) || floor(d) != d)
        return false;
    *out = (uint64_t)d;
    return true;
}

static const st_dtype *dtype_find(const char *name)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(DTYPES[i].name, name) == 0)
            return &DTYPES[i];
    return NULL;
}

/* The one member called key, NULL when absent; a repeated member is an error. */
static int member(ctx *c, const cJSON *entry, const char *key, const char *tensor, const cJSON **out)
{
    *out = NULL;
    for (const cJSON *m = entry->child; m; m = m->next) {
        if (!m->string || strcmp(m->string, key) != 0)
            continue;
        if (*out)
            return fail(c, HEARTH_EINVAL, tensor, key_offset(c, tensor), "field \"%s\" appears twice", key);
        *out = m;
    }
    if (!*out)
        return fail(c, HEARTH_EINVAL, tensor, key_offset(c, tensor), "field \"%s\" is missing", key);
    return HEARTH_OK;
}

static int parse_shape(ctx *c, const cJSON *shape, hearth_st_tensor *t, uint64_t at, uint64_t *elements)
{
    if (!cJSON_IsArray(shape))
        return fail(c, HEARTH_EINVAL, t->name, at, "shape is not a list");
    int n = cJSON_GetArraySize(shape);
    if (n > HEARTH_ST_MAX_DIMS)
        return fail(c, HEARTH_EINVAL, t->name, at, "%d dims > %d", n, HEARTH_ST_MAX_DIMS);
    t->n_dims = n;
    for (int i = 0; i < HEARTH_ST_MAX_DIMS; i++)
        t->shape[i] = 1;
    uint64_t prod = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return fail(c, HEARTH_EINVAL, t->name, at, "shape[%d] is not a non-negative integer below 2^53", i);
        t->shape[i] = (int64_t)v;
        if (__builtin_mul_overflow(prod, v, &prod) || prod > (uint64_t)MAX_EXACT)
            return fail(c, HEARTH_EINVAL, t->name, at, "shape's element count overflows at dim %d", i);
    }
    *elements = prod;
    t->n_elements = (int64_t)prod;
    return HEARTH_OK;
}

static int parse_offsets(ctx *c, const cJSON *offs, const hearth_st_tensor *t, uint64_t at, uint64_t *begin,
                         uint64_t *end)
{
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, begin) ||
        !json_uint(offs->child->next, end))
        return fail(c, HEARTH_EINVAL, t->name, at, "data_offsets is not a list of two non-negative integers");
    if (*begin > *end)
        return fail(c, HEARTH_EINVAL, t->name, c->st->data_offset + *begin,
                    "data_offsets [%llu, %llu]: begin > end", (unsigned long long)*begin,
                    (unsigned long long)*end);
    if (*end > c->data_size)
        return fail(c, HEARTH_EINVAL, t->name, c->st->data_offset + *begin,
                    "data_offsets [%llu, %llu] run past the data section (%llu bytes)",
                    (unsigned long long)*begin, (unsigned long long)*end, (unsigned long long)c->data_size);
    return HEARTH_OK;
}

static int parse_entry(ctx *c, const cJSON *entry, hearth_st_tensor *t)
{
    uint64_t at = key_offset(c, t->name);
    if (!cJSON_IsObject(entry))
        return fail(c, HEARTH_EINVAL, t->name, at, "entry is not an object");
    const cJSON *dtype, *shape, *offs;
    int rc;
    if ((rc = member(c, entry, "dtype", t->name, &dtype)) || (rc = member(c, entry, "shape", t->name, &shape)) ||
        (rc = member(c, entry, "data_offsets", t->name, &offs)))
        return rc;
    if (!cJSON_IsString(dtype))
        return fail(c, HEARTH_EINVAL, t->name, at, "dtype is not a string");
    const st_dtype *dt = dtype_find(dtype->valuestring);
    if (!dt) {
        char d[80];
        printable(d, sizeof d, dtype->valuestring);
        return fail(c, HEARTH_EINVAL, t->name, at, "unknown dtype '%s'", d);
    }
    t->dtype_name = dt->name;
    t->supported = dt->hearth >= 0;
    t->type = t->supported ? (hearth_dtype)dt->hearth : HEARTH_F32;
    uint64_t elements = 0, begin = 0, end = 0;
    if ((rc = parse_shape(c, shape, t, at, &elements)) || (rc = parse_offsets(c, offs, t, at, &begin, &end)))
        return rc;
    /* elements < 2^53 and bits <= 64: the product fits in 64 bits only below 2^58 elements */
    uint64_t bits;
    if (__builtin_mul_overflow(elements, (uint64_t)dt->bits, &bits) || bits % 8 != 0)
        return fail(c, HEARTH_EINVAL, t->name, c->st->data_offset + begin,
                    "%llu elements of %s are not a whole number of bytes", (unsigned long long)elements, dt->name);
    if (bits / 8 != end - begin)
        return fail(c, HEARTH_EINVAL, t->name, c->st->data_offset + begin,
                    "data_offsets [%llu, %llu] hold %llu bytes but %llu elements of %s need %llu",
                    (unsigned long long)begin, (unsigned long long)end, (unsigned long long)(end - begin),
                    (unsigned long long)elements, dt->name, (unsigned long long)(bits / 8));
    t->offset = c->st->data_offset + begin;
    t->nbytes = (size_t)(end - begin);
    t->data = c->st->map.data + t->offset;
    unsigned esize = dt->bits >= 8 ? dt->bits / 8 : 1;
    t->aligned = (uintptr_t)t->data % esize == 0;
    return HEARTH_OK;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const hearth_st_tensor *)a)->name, ((const hearth_st_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const hearth_st_tensor *x = *(const hearth_st_tensor *const *)a, *y = *(const hearth_st_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x->nbytes < y->nbytes ? -1 : x->nbytes > y->nbytes;
}

/* Names unique; the tensors tile the data section exactly. */
static int check_layout(ctx *c)
{
    hearth_st *st = c->st;
    qsort(st->tensors, st->n_tensors, sizeof *st->tensors, cmp_name);
    for (size_t i = 1; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
            return fail(c, HEARTH_EINVAL, st->tensors[i].name, key_offset(c, st->tensors[i].name),
                        "duplicate tensor name");
    if (st->n_tensors == 0)
        return c->data_size == 0 ? HEARTH_OK
                                 : fail(c, HEARTH_EINVAL, NULL, st->data_offset,
                                        "no tensors, yet %llu data bytes follow the header",
                                        (unsigned long long)c->data_size);
    const hearth_st_tensor **by_off = malloc(st->n_tensors * sizeof *by_off);
    if (!by_off)
        return fail(c, HEARTH_ENOMEM, NULL, 0, "out of memory for %zu tensors", st->n_tensors);
    for (size_t i = 0; i < st->n_tensors; i++)
        by_off[i] = &st->tensors[i];
    qsort(by_off, st->n_tensors, sizeof *by_off, cmp_offset);
    int rc = HEARTH_OK;
    uint64_t expect = st->data_offset;
    const hearth_st_tensor *prev = NULL;
    for (size_t i = 0; i < st->n_tensors && rc == HEARTH_OK; i++) {
        const hearth_st_tensor *t = by_off[i];
        char p[80];
        printable(p, sizeof p, prev ? prev->name : "");
        if (t->offset < expect)
            rc = fail(c, HEARTH_EINVAL, t->name, t->offset, "data overlaps tensor '%s' (which ends at %llu)", p,
                      (unsigned long long)expect);
        else if (t->offset > expect)
            rc = fail(c, HEARTH_EINVAL, t->name, t->offset, "%llu unused bytes before this tensor%s%s%s",
                      (unsigned long long)(t->offset - expect), prev ? " (after tensor '" : "", prev ? p : "",
                      prev ? "')" : "");
        expect = t->offset + t->nbytes;
        prev = t;
    }
    if (rc == HEARTH_OK && expect != st->map.size) {
        char p[80];
        printable(p, sizeof p, prev->name);
        rc = fail(c, HEARTH_EINVAL, NULL, expect, "%llu trailing bytes after the last tensor '%s'",
                  (unsigned long long)(st->map.size - expect), p);
    }
    free(by_off);
    return rc;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int parse_metadata(ctx *c, const cJSON *meta)
{
    hearth_st *st = c->st;
    uint64_t at = key_offset(c, "__metadata__");
    if (!cJSON_IsObject(meta))
        return fail(c, HEARTH_EINVAL, NULL, at, "__metadata__ is not an object");
    size_t n = 0;
    for (const cJSON *m = meta->child; m; m = m->next)
        n++;
    if (n == 0)
        return HEARTH_OK;
    /* keys and values in one array, so one sort keeps the pairs together */
    char **pairs = calloc(n, 2 * sizeof *pairs);
    if (!pairs)
        return fail(c, HEARTH_ENOMEM, NULL, at, "out of memory for %zu metadata entries", n);
    int rc = HEARTH_OK;
    size_t i = 0;
    for (const cJSON *m = meta->child; m; m = m->next, i++) {
        char k[80];
        printable(k, sizeof k, m->string);
        if (!cJSON_IsString(m)) {
            rc = fail(c, HEARTH_EINVAL, NULL, at, "__metadata__ value of '%s' is not a string", k);
            break;
        }
        if (strlen(m->string) > HEARTH_ST_MAX_NAME) {
            rc = fail(c, HEARTH_ELIMIT, NULL, at, "__metadata__ key '%s' is longer than %u bytes", k,
                      HEARTH_ST_MAX_NAME);
            break;
        }
        pairs[2 * i] = strdup(m->string);
        pairs[2 * i + 1] = strdup(m->valuestring);
        if (!pairs[2 * i] || !pairs[2 * i + 1]) {
            rc = fail(c, HEARTH_ENOMEM, NULL, at, "out of memory for metadata");
            break;
        }
    }
    if (rc == HEARTH_OK) {
        qsort(pairs, n, 2 * sizeof *pairs, cmp_str_ptr);
        for (i = 1; i < n && rc == HEARTH_OK; i++)
            if (strcmp(pairs[2 * i - 2], pairs[2 * i]) == 0) {
                char k[80];
                printable(k, sizeof k, pairs[2 * i]);
                rc = fail(c, HEARTH_EINVAL, NULL, at, "__metadata__ key '%s' appears twice", k);
            }
    }
    st->meta_keys = calloc(n, sizeof *st->meta_keys);
    st->meta_values = calloc(n, sizeof *st->meta_values);
    if (!st->meta_keys || !st->meta_values) {
        for (i = 0; i < 2 * n; i++)
            free(pairs[i]);
        free(pairs);
        return rc ? rc : fail(c, HEARTH_ENOMEM, NULL, at, "out of memory for metadata");
    }
    /* hand every copy to st, so close frees them on success and failure alike */
    st->n_meta = n;
    for (i = 0; i < n; i++) {
        st->meta_keys[i] = pairs[2 * i];
        st->meta_values[i] = pairs[2 * i + 1];
    }
    free(pairs);
    return rc;
}

static int parse_root(ctx *c, const cJSON *root)
{
    hearth_st *st = c->st;
    if (!cJSON_IsObject(root))
        return fail(c, HEARTH_EINVAL, NULL, 8, "header is not a JSON object");
    size_t n = 0;
    const cJSON *meta = NULL;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") != 0) {
            n++;
            continue;
        }
        if (meta)
            return fail(c, HEARTH_EINVAL, NULL, key_offset(c, "__metadata__"), "__metadata__ appears twice");
        meta = e;
    }
    if (n > HEARTH_ST_MAX_TENSORS)
        return fail(c, HEARTH_ELIMIT, NULL, 8, "%zu tensors > %zu", n, HEARTH_ST_MAX_TENSORS);
    int rc;
    if (meta && (rc = parse_metadata(c, meta)))
        return rc;
    st->tensors = calloc(n ? n : 1, sizeof *st->tensors);
    if (!st->tensors)
        return fail(c, HEARTH_ENOMEM, NULL, 8, "out of memory for %zu tensors", n);
    for (const cJSON *e = root->child; e; e = e->next) {
        if (e == meta)
            continue;
        hearth_st_tensor *t = &st->tensors[st->n_tensors];
        if (strlen(e->string) > HEARTH_ST_MAX_NAME)
            return fail(c, HEARTH_ELIMIT, e->string, key_offset(c, e->string), "name is longer than %u bytes",
                        HEARTH_ST_MAX_NAME);
        if (!(t->name = strdup(e->string)))
            return fail(c, HEARTH_ENOMEM, NULL, 8, "out of memory for a tensor name");
        st->n_tensors++;
        if ((rc = parse_entry(c, e, t)))
            return rc;
    }
    return check_layout(c);
}

static int open_impl(hearth_st *st, hearth_err *err)
{
    ctx c = {.st = st, .err = err};
    const uint8_t *d = st->map.data;
    size_t size = st->map.size;
    if (size < 8)
        return fail(&c, HEARTH_EINVAL, NULL, 0, "file is %zu bytes; the 8-byte header length does not fit", size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | d[i];
    if (n > HEARTH_ST_MAX_HEADER)
        return fail(&c, HEARTH_ELIMIT, NULL, 0, "header length %llu exceeds the limit of %llu bytes",
                    (unsigned long long)n, (unsigned long long)HEARTH_ST_MAX_HEADER);
    if (n > size - 8)
        return fail(&c, HEARTH_EINVAL, NULL, 0, "header length %llu runs past the end of the file (%zu bytes follow)",
                    (unsigned long long)n, size - 8);
    st->header_len = n;
    st->data_offset = 8 + n;
    c.header = (const char *)d + 8;
    c.header_len = (size_t)n;
    c.data_size = size - st->data_offset;
    if (n == 0 || c.header[0] != '{')
        return fail(&c, HEARTH_EINVAL, NULL, 8, "header does not start with '{'");
    if (count_commas(c.header, c.header_len, HEARTH_ST_MAX_JSON_COMMAS) > HEARTH_ST_MAX_JSON_COMMAS)
        return fail(&c, HEARTH_ELIMIT, NULL, 8, "header has more than %zu JSON values", HEARTH_ST_MAX_JSON_COMMAS);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(c.header, c.header_len, &end, 0);
    if (!root) {
        uint64_t at = end && end >= c.header && end <= c.header + c.header_len ? (uint64_t)(end - c.header) : 0;
        return fail(&c, HEARTH_EINVAL, NULL, 8 + at, "invalid JSON");
    }
    int rc = HEARTH_OK;
    /* the reference writer pads the header with spaces to a multiple of 8 */
    for (const char *p = end; p < c.header + c.header_len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            rc = fail(&c, HEARTH_EINVAL, NULL, 8 + (uint64_t)(p - c.header), "bytes after the header's JSON object");
            break;
        }
    if (rc == HEARTH_OK)
        rc = parse_root(&c, root);
    cJSON_Delete(root);
    return rc;
}

int hearth_st_open(hearth_st *st, const char *path, hearth_err *err)
{
    memset(st, 0, sizeof *st);
    if (!(st->path = strdup(path)))
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
    int rc = hearth_mmap_open(&st->map, path, err);
    if (rc == HEARTH_OK) {
        st->owns_map = true;
        rc = open_impl(st, err);
    }
    if (rc)
        hearth_st_close(st);
    return rc;
}

int hearth_st_open_memory(hearth_st *st, const void *data, size_t size, const char *name, hearth_err *err)
{
    memset(st, 0, sizeof *st);
    if (!(st->path = strdup(name ? name : "(memory)")))
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", name ? name : "(memory)");
    st->map.data = data;
    st->map.size = size;
    int rc = open_impl(st, err);
    if (rc)
        hearth_st_close(st);
    return rc;
}

void hearth_st_close(hearth_st *st)
{
    for (size_t i = 0; i < st->n_tensors; i++)
        free(st->tensors[i].name);
    free(st->tensors);
    for (size_t i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    if (st->owns_map)
        hearth_mmap_close(&st->map);
    free(st->path);
    memset(st, 0, sizeof *st);
}

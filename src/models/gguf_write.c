/* gguf_write.c: serializing metadata and tensors as GGUF v3.
 *
 * How: each add encodes its value at once into an owned byte string (exactly
 * as it will appear after the key and type), so writing is a walk over
 * records: header, key/value records, tensor infos, zero padding up to the
 * alignment, then each tensor's bytes padded to the alignment. Offsets are
 * laid out before anything is emitted, so the same code fills a file (stdio)
 * or an exactly-sized memory buffer.
 *
 * Rejected: a general-purpose builder with mutation and removal (tests and
 * tools only ever append); writing to a temporary file and renaming (callers
 * write fresh scratch files; atomic replacement is not needed). */
#include "models/gguf_write.h"

#include "models/gguf.h"
#include "models/gguf_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RECORDS (1u << 24)

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *bytes; /* the encoded value */
    size_t n;
} wkv;

typedef struct wtensor {
    char *name;
    hearth_dtype type;
    int n_dims;
    int64_t ne[4];
    const void *data;
    size_t nbytes;
    uint64_t rel; /* offset in the data section, set at layout */
} wtensor;

struct hearth_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    hearth_err first; /* the first add failure, reported by write */
};

hearth_gguf_writer *hearth_gguf_writer_new(void)
{
    return calloc(1, sizeof(hearth_gguf_writer));
}

void hearth_gguf_writer_free(hearth_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].bytes);
    }
    for (size_t i = 0; i < w->n_t; i++)
        free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

__attribute__((format(printf, 3, 4)))
static int remember(hearth_gguf_writer *w, int code, const char *fmt, ...)
{
    if (w->first.code == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->first.msg, sizeof w->first.msg, fmt, ap);
        va_end(ap);
        w->first.code = code;
    }
    return code;
}

static const wkv *find_kv(const hearth_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0)
            return &w->kv[i];
    return NULL;
}

/* Appends a record taking ownership of bytes (freed on failure). */
static int add_kv(hearth_gguf_writer *w, const char *key, uint32_t type, uint8_t *bytes, size_t n)
{
    int rc;
    if (!bytes && n) {
        rc = remember(w, HEARTH_ENOMEM, "gguf writer: key '%s': out of memory", key);
    } else if (strlen(key) > HEARTH_GGUF_NAME_MAX) {
        rc = remember(w, HEARTH_EINVAL, "gguf writer: a key of %zu bytes is too long", strlen(key));
    } else if (find_kv(w, key)) {
        rc = remember(w, HEARTH_EINVAL, "gguf writer: key '%s' added twice", key);
    } else if (w->n_kv >= MAX_RECORDS) {
        rc = remember(w, HEARTH_ELIMIT, "gguf writer: key '%s': more than %u keys", key, MAX_RECORDS);
    } else {
        if (w->n_kv == w->cap_kv) {
            size_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
            wkv *p = realloc(w->kv, cap * sizeof *p);
            if (!p) {
                free(bytes);
                return remember(w, HEARTH_ENOMEM, "gguf writer: key '%s': out of memory", key);
            }
            w->kv = p;
            w->cap_kv = cap;
        }
        char *k = strdup(key);
        if (!k) {
            free(bytes);
            return remember(w, HEARTH_ENOMEM, "gguf writer: key '%s': out of memory", key);
        }
        w->kv[w->n_kv++] = (wkv){.key = k, .type = type, .bytes = bytes, .n = n};
        return HEARTH_OK;
    }
    free(bytes);
    return rc;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

int hearth_gguf_writer_add_scalar(hearth_gguf_writer *w, const char *key, uint32_t type, const void *value)
{
    size_t n = gguf_scalar_size(type);
    if (n == 0)
        return remember(w, HEARTH_EINVAL, "gguf writer: key '%s': %u is not a scalar type", key, type);
    uint8_t *b = malloc(n);
    if (b)
        memcpy(b, value, n);
    return add_kv(w, key, type, b, n);
}

int hearth_gguf_writer_add_u32(hearth_gguf_writer *w, const char *key, uint32_t v)
{
    return hearth_gguf_writer_add_scalar(w, key, HEARTH_GGUF_U32, &v);
}

int hearth_gguf_writer_add_i32(hearth_gguf_writer *w, const char *key, int32_t v)
{
    return hearth_gguf_writer_add_scalar(w, key, HEARTH_GGUF_I32, &v);
}

int hearth_gguf_writer_add_f32(hearth_gguf_writer *w, const char *key, float v)
{
    return hearth_gguf_writer_add_scalar(w, key, HEARTH_GGUF_F32, &v);
}

int hearth_gguf_writer_add_bool(hearth_gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return hearth_gguf_writer_add_scalar(w, key, HEARTH_GGUF_BOOL, &b);
}

int hearth_gguf_writer_add_str(hearth_gguf_writer *w, const char *key, const char *s)
{
    size_t len = strlen(s);
    uint8_t *b = malloc(8 + len);
    if (b) {
        put64(b, len);
        memcpy(b + 8, s, len);
    }
    return add_kv(w, key, HEARTH_GGUF_STRING, b, 8 + len);
}

/* An array header (element type, count) followed by room for body bytes. */
static uint8_t *arr_alloc(uint32_t elem_type, size_t n, size_t body)
{
    uint8_t *b = body <= SIZE_MAX - 12 ? malloc(12 + body) : NULL;
    if (b) {
        put32(b, elem_type);
        put64(b + 4, n);
    }
    return b;
}

int hearth_gguf_writer_add_arr_str(hearth_gguf_writer *w, const char *key, const char *const *s, size_t n)
{
    size_t body = 0;
    for (size_t i = 0; i < n; i++)
        body += 8 + strlen(s[i]);
    uint8_t *b = arr_alloc(HEARTH_GGUF_STRING, n, body);
    if (b) {
        uint8_t *p = b + 12;
        for (size_t i = 0; i < n; i++) {
            size_t len = strlen(s[i]);
            put64(p, len);
            memcpy(p + 8, s[i], len);
            p += 8 + len;
        }
    }
    return add_kv(w, key, HEARTH_GGUF_ARRAY, b, 12 + body);
}

static int add_arr_plain(hearth_gguf_writer *w, const char *key, uint32_t elem_type, const void *v, size_t n)
{
    size_t esize = gguf_scalar_size(elem_type);
    if (n > (SIZE_MAX - 12) / esize)
        return remember(w, HEARTH_ENOMEM, "gguf writer: key '%s': %zu elements is too many", key, n);
    uint8_t *b = arr_alloc(elem_type, n, n * esize);
    if (b && n)
        memcpy(b + 12, v, n * esize);
    return add_kv(w, key, HEARTH_GGUF_ARRAY, b, 12 + n * esize);
}

int hearth_gguf_writer_add_arr_f32(hearth_gguf_writer *w, const char *key, const float *v, size_t n)
{
    return add_arr_plain(w, key, HEARTH_GGUF_F32, v, n);
}

int hearth_gguf_writer_add_arr_i32(hearth_gguf_writer *w, const char *key, const int32_t *v, size_t n)
{
    return add_arr_plain(w, key, HEARTH_GGUF_I32, v, n);
}

int hearth_gguf_writer_add_tensor(hearth_gguf_writer *w, const char *name, hearth_dtype type, int n_dims,
                                  const int64_t ne[], const void *data, size_t nbytes)
{
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}, .data = data, .nbytes = nbytes};
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)type);
    if (!info)
        return remember(w, HEARTH_EINVAL, "gguf writer: tensor '%s': type %d is not supported", name, (int)type);
    if (n_dims < 0 || n_dims > 4)
        return remember(w, HEARTH_EINVAL, "gguf writer: tensor '%s': %d dims is not 0..4", name, n_dims);
    if (strlen(name) > HEARTH_GGUF_NAME_MAX)
        return remember(w, HEARTH_EINVAL, "gguf writer: a tensor name of %zu bytes is too long", strlen(name));
    int64_t rows = 1;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0 || (i > 0 && __builtin_mul_overflow(rows, ne[i], &rows)))
            return remember(w, HEARTH_EINVAL, "gguf writer: tensor '%s': bad ne[%d] = %lld", name, i, (long long)ne[i]);
        t.ne[i] = ne[i];
    }
    size_t row, want;
    if (!hearth_dtype_row_bytes(type, t.ne[0], &row) || __builtin_mul_overflow(row, (size_t)rows, &want) ||
        want != nbytes)
        return remember(w, HEARTH_EINVAL, "gguf writer: tensor '%s': %zu bytes given, shape and type %s need another size",
                        name, nbytes, info->name);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return remember(w, HEARTH_EINVAL, "gguf writer: tensor '%s' added twice", name);
    if (w->n_t >= MAX_RECORDS)
        return remember(w, HEARTH_ELIMIT, "gguf writer: more than %u tensors", MAX_RECORDS);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 16;
        wtensor *p = realloc(w->t, cap * sizeof *p);
        if (!p)
            return remember(w, HEARTH_ENOMEM, "gguf writer: tensor '%s': out of memory", name);
        w->t = p;
        w->cap_t = cap;
    }
    if (!(t.name = strdup(name)))
        return remember(w, HEARTH_ENOMEM, "gguf writer: tensor '%s': out of memory", name);
    w->t[w->n_t++] = t;
    return HEARTH_OK;
}

/* Where bytes go: a FILE, or a buffer sized by the layout. */
typedef struct sink {
    FILE *f;
    uint8_t *mem;
    size_t pos;
    bool failed;
} sink;

static void emit(sink *s, const void *p, size_t n)
{
    if (n == 0 || s->failed)
        return;
    if (s->f)
        s->failed = fwrite(p, 1, n, s->f) != n;
    else
        memcpy(s->mem + s->pos, p, n);
    s->pos += n;
}

static void emit_zeros(sink *s, size_t n)
{
    static const uint8_t zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? n : sizeof zeros;
        emit(s, zeros, k);
        n -= k;
    }
}

static void emit32(sink *s, uint32_t v)
{
    uint8_t b[4];
    put32(b, v);
    emit(s, b, 4);
}

static void emit64(sink *s, uint64_t v)
{
    uint8_t b[8];
    put64(b, v);
    emit(s, b, 8);
}

static void emit_str(sink *s, const char *str)
{
    size_t n = strlen(str);
    emit64(s, n);
    emit(s, str, n);
}

static size_t pad_to(size_t x, uint32_t a)
{
    return (a - x % a) % a;
}

/* Checks the alignment and, when it needs a general.alignment record the
 * caller did not add, says so through *extra. */
static int prepare(hearth_gguf_writer *w, uint32_t *alignment, bool *extra, hearth_err *err)
{
    if (w->first.code)
        return hearth_err_set(err, w->first.code, "%s", w->first.msg);
    uint32_t a = *alignment ? *alignment : HEARTH_GGUF_DEFAULT_ALIGNMENT;
    if ((a & (a - 1)) != 0)
        return hearth_err_set(err, HEARTH_EINVAL, "gguf writer: alignment %u is not a power of two", a);
    *alignment = a;
    const wkv *kv = find_kv(w, "general.alignment");
    *extra = !kv && a != HEARTH_GGUF_DEFAULT_ALIGNMENT;
    if (kv && (kv->type != HEARTH_GGUF_U32 || gguf_le32(kv->bytes) != a))
        return hearth_err_set(err, HEARTH_EINVAL, "gguf writer: general.alignment was added and differs from %u", a);
    return HEARTH_OK;
}

/* Lays out tensor data; returns the total file size. */
static size_t layout(hearth_gguf_writer *w, uint32_t a, bool extra)
{
    size_t meta = 4 + 4 + 8 + 8;
    for (size_t i = 0; i < w->n_kv; i++)
        meta += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].n;
    if (extra)
        meta += 8 + strlen("general.alignment") + 4 + 4;
    for (size_t i = 0; i < w->n_t; i++)
        meta += 8 + strlen(w->t[i].name) + 4 + 8 * (size_t)w->t[i].n_dims + 4 + 8;
    if (w->n_t == 0)
        return meta;
    size_t data = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].rel = data;
        data += w->t[i].nbytes + pad_to(w->t[i].nbytes, a);
    }
    return meta + pad_to(meta, a) + data;
}

static void emit_all(const hearth_gguf_writer *w, sink *s, uint32_t a, bool extra)
{
    emit(s, "GGUF", 4);
    emit32(s, 3);
    emit64(s, w->n_t);
    emit64(s, w->n_kv + (extra ? 1 : 0));
    for (size_t i = 0; i < w->n_kv; i++) {
        emit_str(s, w->kv[i].key);
        emit32(s, w->kv[i].type);
        emit(s, w->kv[i].bytes, w->kv[i].n);
    }
    if (extra) {
        emit_str(s, "general.alignment");
        emit32(s, HEARTH_GGUF_U32);
        emit32(s, a);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        emit_str(s, t->name);
        emit32(s, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++)
            emit64(s, (uint64_t)t->ne[d]);
        emit32(s, (uint32_t)t->type);
        emit64(s, t->rel);
    }
    if (w->n_t == 0)
        return;
    emit_zeros(s, pad_to(s->pos, a));
    for (size_t i = 0; i < w->n_t; i++) {
        emit(s, w->t[i].data, w->t[i].nbytes);
        emit_zeros(s, pad_to(w->t[i].nbytes, a));
    }
}

int hearth_gguf_writer_serialize(hearth_gguf_writer *w, uint32_t alignment, uint8_t **out, size_t *size,
                                 hearth_err *err)
{
    bool extra;
    *out = NULL;
    *size = 0;
    int rc = prepare(w, &alignment, &extra, err);
    if (rc)
        return rc;
    size_t total = layout(w, alignment, extra);
    sink s = {.mem = malloc(total)};
    if (!s.mem)
        return hearth_err_set(err, HEARTH_ENOMEM, "gguf writer: out of memory for %zu bytes", total);
    emit_all(w, &s, alignment, extra);
    *out = s.mem;
    *size = total;
    return HEARTH_OK;
}

int hearth_gguf_writer_write(hearth_gguf_writer *w, const char *path, uint32_t alignment, hearth_err *err)
{
    bool extra;
    int rc = prepare(w, &alignment, &extra, err);
    if (rc)
        return rc;
    layout(w, alignment, extra);
    sink s = {.f = fopen(path, "wb")};
    if (!s.f)
        return hearth_err_sys(err, errno, "%s: cannot create", path);
    emit_all(w, &s, alignment, extra);
    int e = errno;
    if (fclose(s.f) != 0 && !s.failed) {
        s.failed = true;
        e = errno;
    }
    if (s.failed)
        return hearth_err_sys(err, e, "%s: write failed", path);
    return HEARTH_OK;
}

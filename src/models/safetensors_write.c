/* safetensors_write.c: the safetensors writer.
 *
 * How: entries are collected with borrowed data; at write time two orders
 * are made, by (element size descending, name) for the data and by name for
 * the header, the header is printed into a bounded hearth_buf and padded with
 * spaces to a multiple of 8, and the file is streamed with stdio to path.tmp
 * and renamed. Rejected: cJSON for the header (it prints numbers through
 * doubles and reorders nothing for us; printing by hand is as short and
 * exact); one buffer holding the whole file for write (a MiniLM is 90 MB). */
#include "models/safetensors_write.h"

#include "base/buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hearth_st_writer_init(hearth_st_writer *w)
{
    memset(w, 0, sizeof *w);
}

void hearth_st_writer_deinit(hearth_st_writer *w)
{
    for (size_t i = 0; i < w->n; i++)
        free(w->e[i].name);
    free(w->e);
    for (size_t i = 0; i < 2 * w->n_meta; i++)
        free(w->meta[i]);
    free(w->meta);
    memset(w, 0, sizeof *w);
}

static const char *st_name(hearth_dtype t)
{
    return t == HEARTH_F32 ? "F32" : t == HEARTH_F16 ? "F16" : "BF16";
}

int hearth_st_writer_add(hearth_st_writer *w, const char *name, hearth_dtype type, int n_dims,
                         const int64_t *shape, const void *data, hearth_err *err)
{
    if (type != HEARTH_F32 && type != HEARTH_F16 && type != HEARTH_BF16)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "safetensors writer: tensor '%s': type %d is not F32/F16/BF16",
                              name, (int)type);
    if (strcmp(name, "__metadata__") == 0 || n_dims < 0 || n_dims > HEARTH_ST_MAX_DIMS)
        return hearth_err_set(err, HEARTH_EINVAL, "safetensors writer: tensor '%s': bad name or %d dims", name, n_dims);
    hearth_st_writer_entry e = {.type = type, .n_dims = n_dims, .data = data};
    int64_t elements = 1;
    for (int i = 0; i < HEARTH_ST_MAX_DIMS; i++)
        e.shape[i] = 1;
    for (int i = 0; i < n_dims; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(elements, shape[i], &elements))
            return hearth_err_set(err, HEARTH_EINVAL, "safetensors writer: tensor '%s': bad shape[%d] %lld", name, i,
                                  (long long)shape[i]);
        e.shape[i] = shape[i];
    }
    if (!hearth_dtype_row_bytes(type, elements, &e.nbytes))
        return hearth_err_set(err, HEARTH_EINVAL, "safetensors writer: tensor '%s': size overflows", name);
    if (!data && e.nbytes)
        return hearth_err_set(err, HEARTH_EINVAL, "safetensors writer: tensor '%s': no data", name);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        hearth_st_writer_entry *p = realloc(w->e, cap * sizeof *p);
        if (!p)
            return hearth_err_set(err, HEARTH_ENOMEM, "safetensors writer: out of memory");
        w->e = p;
        w->cap = cap;
    }
    if (!(e.name = strdup(name)))
        return hearth_err_set(err, HEARTH_ENOMEM, "safetensors writer: out of memory");
    w->e[w->n++] = e;
    return HEARTH_OK;
}

int hearth_st_writer_add_meta(hearth_st_writer *w, const char *key, const char *value, hearth_err *err)
{
    char **p = realloc(w->meta, 2 * (w->n_meta + 1) * sizeof *p);
    if (!p)
        return hearth_err_set(err, HEARTH_ENOMEM, "safetensors writer: out of memory");
    w->meta = p;
    p[2 * w->n_meta] = strdup(key);
    p[2 * w->n_meta + 1] = strdup(value);
    w->n_meta++; /* counted even when a strdup failed, so deinit frees the other */
    if (!p[2 * w->n_meta - 2] || !p[2 * w->n_meta - 1])
        return hearth_err_set(err, HEARTH_ENOMEM, "safetensors writer: out of memory");
    return HEARTH_OK;
}

static int json_str(hearth_buf *b, const char *s)
{
    int rc = hearth_buf_append(b, "\"", 1);
    for (; *s && rc == HEARTH_OK; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            rc = hearth_buf_printf(b, "\\%c", ch);
        else if (ch < 0x20)
            rc = hearth_buf_printf(b, "\\u%04x", ch);
        else
            rc = hearth_buf_append(b, s, 1);
    }
    return rc ? rc : hearth_buf_append(b, "\"", 1);
}

static size_t esize(hearth_dtype t)
{
    return t == HEARTH_F32 ? 4 : 2;
}

static int cmp_data_order(const void *a, const void *b)
{
    const hearth_st_writer_entry *x = *(const hearth_st_writer_entry *const *)a;
    const hearth_st_writer_entry *y = *(const hearth_st_writer_entry *const *)b;
    if (esize(x->type) != esize(y->type))
        return esize(x->type) > esize(y->type) ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The plan: header bytes (with the 8-byte length in front) and the data order. */
typedef struct plan {
    hearth_buf head;
    const hearth_st_writer_entry **order; /* data order */
    uint64_t data_size;
} plan;

static void plan_free(plan *p)
{
    hearth_buf_deinit(&p->head);
    free(p->order);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const hearth_st_writer_entry *const *)a)->name, (*(const hearth_st_writer_entry *const *)b)->name);
}

static int print_entry(hearth_buf *b, const hearth_st_writer_entry *e, uint64_t begin)
{
    int rc = json_str(b, e->name);
    if (rc == HEARTH_OK)
        rc = hearth_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", st_name(e->type));
    for (int d = 0; d < e->n_dims && rc == HEARTH_OK; d++)
        rc = hearth_buf_printf(b, "%s%lld", d ? "," : "", (long long)e->shape[d]);
    if (rc == HEARTH_OK)
        rc = hearth_buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)begin,
                               (unsigned long long)(begin + e->nbytes));
    return rc;
}

static int plan_make(const hearth_st_writer *w, plan *p, hearth_err *err)
{
    memset(p, 0, sizeof *p);
    hearth_buf_init(&p->head, (size_t)HEARTH_ST_MAX_HEADER + 8);
    size_t n = w->n ? w->n : 1;
    const hearth_st_writer_entry **by_name = malloc(n * sizeof *by_name);
    char **meta = malloc((w->n_meta ? w->n_meta : 1) * 2 * sizeof *meta);
    uint64_t *begin = malloc(n * sizeof *begin); /* indexed like w->e */
    p->order = malloc(n * sizeof *p->order);
    int rc = HEARTH_OK;
    if (!by_name || !meta || !begin || !p->order) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "safetensors writer: out of memory");
        goto done;
    }
    for (size_t i = 0; i < w->n; i++)
        p->order[i] = by_name[i] = &w->e[i];
    qsort(p->order, w->n, sizeof *p->order, cmp_data_order);
    qsort(by_name, w->n, sizeof *by_name, cmp_name);
    for (size_t i = 1; i < w->n; i++)
        if (strcmp(by_name[i - 1]->name, by_name[i]->name) == 0) {
            rc = hearth_err_set(err, HEARTH_EINVAL, "safetensors writer: duplicate tensor '%s'", by_name[i]->name);
            goto done;
        }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        begin[p->order[i] - w->e] = off;
        off += p->order[i]->nbytes;
    }
    p->data_size = off;
    if (w->n_meta)
        memcpy(meta, w->meta, w->n_meta * 2 * sizeof *meta);
    qsort(meta, w->n_meta, 2 * sizeof *meta, cmp_meta);
    rc = hearth_buf_append(&p->head, "\0\0\0\0\0\0\0\0{", 9);
    if (w->n_meta && rc == HEARTH_OK) {
        rc = hearth_buf_appends(&p->head, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta && rc == HEARTH_OK; i++) {
            if ((i && (rc = hearth_buf_append(&p->head, ",", 1))) || (rc = json_str(&p->head, meta[2 * i])) ||
                (rc = hearth_buf_append(&p->head, ":", 1)))
                break;
            rc = json_str(&p->head, meta[2 * i + 1]);
        }
        if (rc == HEARTH_OK)
            rc = hearth_buf_appends(&p->head, w->n ? "}," : "}");
    }
    for (size_t i = 0; i < w->n && rc == HEARTH_OK; i++) {
        if (i)
            rc = hearth_buf_append(&p->head, ",", 1);
        if (rc == HEARTH_OK)
            rc = print_entry(&p->head, by_name[i], begin[by_name[i] - w->e]);
    }
    if (rc == HEARTH_OK)
        rc = hearth_buf_append(&p->head, "}", 1);
    while (rc == HEARTH_OK && p->head.len % 8)
        rc = hearth_buf_append(&p->head, " ", 1);
    if (rc) {
        rc = hearth_err_set(err, rc, "safetensors writer: header past %llu bytes or out of memory",
                            (unsigned long long)HEARTH_ST_MAX_HEADER);
        goto done;
    }
    uint64_t hlen = p->head.len - 8;
    for (int i = 0; i < 8; i++)
        p->head.data[i] = (char)(hlen >> (8 * i));
done:
    free(by_name);
    free(meta);
    free(begin);
    if (rc)
        plan_free(p);
    return rc;
}

int hearth_st_writer_serialize(const hearth_st_writer *w, uint8_t **out, size_t *len, hearth_err *err)
{
    *out = NULL;
    *len = 0;
    plan p;
    int rc = plan_make(w, &p, err);
    if (rc)
        return rc;
    size_t total = p.head.len + (size_t)p.data_size;
    uint8_t *buf = malloc(total ? total : 1);
    if (!buf) {
        plan_free(&p);
        return hearth_err_set(err, HEARTH_ENOMEM, "safetensors writer: out of memory for %zu bytes", total);
    }
    memcpy(buf, p.head.data, p.head.len);
    size_t o = p.head.len;
    for (size_t i = 0; i < w->n; i++) {
        if (p.order[i]->nbytes)
            memcpy(buf + o, p.order[i]->data, p.order[i]->nbytes);
        o += p.order[i]->nbytes;
    }
    plan_free(&p);
    *out = buf;
    *len = total;
    return HEARTH_OK;
}

int hearth_st_writer_write(const hearth_st_writer *w, const char *path, hearth_err *err)
{
    plan p;
    int rc = plan_make(w, &p, err);
    if (rc)
        return rc;
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
        plan_free(&p);
        return hearth_err_set(err, HEARTH_EINVAL, "%s: path too long", path);
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        plan_free(&p);
        return hearth_err_sys(err, errno, "%s: cannot create", tmp);
    }
    bool ok = fwrite(p.head.data, 1, p.head.len, f) == p.head.len;
    for (size_t i = 0; i < w->n && ok; i++)
        ok = fwrite(p.order[i]->data ? p.order[i]->data : "", 1, p.order[i]->nbytes, f) == p.order[i]->nbytes;
    int e = ok ? 0 : errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        e = errno;
    }
    plan_free(&p);
    if (!ok) {
        remove(tmp);
        return hearth_err_sys(err, e, "%s: write failed", tmp);
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        remove(tmp);
        return hearth_err_sys(err, e, "%s: cannot rename to %s", tmp, path);
    }
    return HEARTH_OK;
}

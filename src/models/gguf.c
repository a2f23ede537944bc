/* gguf.c: opening and validating a GGUF v2/v3 file.
 *
 * How: one forward pass over the mapping with a bounds-checked cursor. Every
 * length, count and offset is compared with the bytes that remain before it
 * is used, and counts are bounded by what those bytes could hold before
 * anything is allocated, so a 100-byte file cannot ask for a gigabyte. Values
 * stay in the mapping (the record keeps a pointer); only keys and tensor
 * names are copied, NUL-terminated, for lookups. String arrays get a table of
 * element offsets at open, so element i is O(1) later (tokenizer vocabularies
 * are read by index). Keys and tensor names go into open-addressing hash
 * indexes, which also catch duplicates in linear time. Last, the tensors'
 * data regions (each one's size from its type and shape), sorted by offset,
 * must tile the data section up to the alignment's padding: a corrupted type
 * or shape changes a size and leaves a gap or an overlap, refused naming the
 * tensor, where it would otherwise load and compute garbage.
 *
 * Rejected: reading the header with fread into packed structs (endianness,
 * padding, and no natural place to check each field); GGUF v1 support (32-bit
 * counts, long superseded, and llama.cpp itself refuses it); skipping the
 * validation of string arrays until first use (then every accessor could
 * fail on a file that opened fine).
 *
 * Calls: nothing else in src/models. gguf_get.c, gguf_vocab.c and the
 * architectures call down into this file, so the names of value types (used
 * in this file's messages) live here, not with the getters. */
#include "models/gguf.h"

#include "models/gguf_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const TYPE_NAMES[HEARTH_GGUF_TYPE_COUNT_] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

const char *hearth_gguf_type_name(uint32_t type)
{
    return type < HEARTH_GGUF_TYPE_COUNT_ ? TYPE_NAMES[type] : "?";
}

/* Smallest possible records, used to bound counts before allocating:
 * key (8-byte length) + type (4) + a 1-byte value; tensor name length (8) +
 * n_dims (4) + type (4) + offset (8). */
#define MIN_KV_BYTES 13u
#define MIN_TENSOR_INFO_BYTES 24u
/* Counts past these are refused even when the file is large enough. */
#define MAX_RECORDS (1u << 24)

typedef struct cursor {
    const uint8_t *d;
    size_t size;
    size_t pos;
    const char *file;
    char what[128]; /* the record being read: "header", "key 'x'", "tensor 'y'" */
    hearth_err *err;
} cursor;

/* Copies up to 64 bytes of an untrusted name for a message, replacing
 * anything but printable ASCII with '?'. */
static void printable(char *dst, size_t cap, const uint8_t *s, size_t n)
{
    size_t limit = n > 64 ? 64 : n, o = 0;
    for (size_t i = 0; i < limit && o + 1 < cap; i++)
        dst[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    if (n > limit && o + 4 < cap) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = 0;
}

__attribute__((format(printf, 4, 5)))
static int fail(cursor *c, int code, uint64_t at, const char *fmt, ...)
{
    char msg[HEARTH_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hearth_err_set(c->err, code, "%s: %s at offset %llu: %s", c->file, c->what,
                          (unsigned long long)at, msg);
}

static size_t left(const cursor *c)
{
    return c->size - c->pos;
}

/* Takes n bytes, or fails naming what they were for. */
static int take(cursor *c, size_t n, const char *field, const uint8_t **p)
{
    if (n > left(c))
        return fail(c, HEARTH_EINVAL, c->pos, "%s needs %zu bytes but only %zu remain (file is %zu bytes)",
                    field, n, left(c), c->size);
    *p = c->d + c->pos;
    c->pos += n;
    return HEARTH_OK;
}

static int read_u32(cursor *c, const char *field, uint32_t *out)
{
    const uint8_t *p = NULL;
    int rc = take(c, 4, field, &p);
    if (rc == HEARTH_OK)
        *out = gguf_le32(p);
    return rc;
}

static int read_u64(cursor *c, const char *field, uint64_t *out)
{
    const uint8_t *p = NULL;
    int rc = take(c, 8, field, &p);
    if (rc == HEARTH_OK)
        *out = gguf_le64(p);
    return rc;
}

/* A u64 length and that many bytes, the length at most max. */
static int read_str(cursor *c, const char *field, uint64_t max, const uint8_t **s, uint64_t *len)
{
    uint64_t at = c->pos, n;
    int rc = read_u64(c, field, &n);
    if (rc)
        return rc;
    if (n > max)
        return fail(c, HEARTH_EINVAL, at, "%s length %llu exceeds the limit of %llu bytes", field,
                    (unsigned long long)n, (unsigned long long)max);
    if (n > left(c))
        return fail(c, HEARTH_EINVAL, at, "%s length %llu runs past the end of the file (%zu bytes remain)",
                    field, (unsigned long long)n, left(c));
    *s = c->d + c->pos;
    *len = n;
    c->pos += (size_t)n;
    return HEARTH_OK;
}

/* A key or tensor name: bounded, no NUL inside; returns a malloc'd copy. */
static int read_name(cursor *c, const char *field, char **out)
{
    const uint8_t *s;
    uint64_t n;
    uint64_t at = c->pos;
    int rc = read_str(c, field, HEARTH_GGUF_NAME_MAX, &s, &n);
    if (rc)
        return rc;
    if (memchr(s, 0, (size_t)n))
        return fail(c, HEARTH_EINVAL, at, "%s contains a NUL byte", field);
    char *copy = malloc((size_t)n + 1);
    if (!copy)
        return fail(c, HEARTH_ENOMEM, at, "out of memory for a %llu-byte %s", (unsigned long long)n, field);
    memcpy(copy, s, (size_t)n);
    copy[n] = 0;
    *out = copy;
    return HEARTH_OK;
}

static void set_what(cursor *c, const char *kind, const char *name)
{
    char p[80];
    printable(p, sizeof p, (const uint8_t *)name, strlen(name));
    snprintf(c->what, sizeof c->what, "%s '%s'", kind, p);
}

static int parse_array(cursor *c, hearth_gguf_kv *kv)
{
    uint64_t at = c->pos;
    int rc = read_u32(c, "array element type", &kv->arr_type);
    if (rc)
        return rc;
    if (kv->arr_type == HEARTH_GGUF_ARRAY)
        return fail(c, HEARTH_EINVAL, at, "nested arrays are not supported");
    if (kv->arr_type >= HEARTH_GGUF_TYPE_COUNT_)
        return fail(c, HEARTH_EINVAL, at, "array element type %u is unknown", kv->arr_type);
    at = c->pos;
    if ((rc = read_u64(c, "array length", &kv->arr_n)))
        return rc;
    kv->data = c->d + c->pos;
    size_t esize = kv->arr_type == HEARTH_GGUF_STRING ? 8 : gguf_scalar_size(kv->arr_type);
    if (kv->arr_n > left(c) / esize)
        return fail(c, HEARTH_EINVAL, at, "array of %llu %s values cannot fit in the %zu bytes that remain",
                    (unsigned long long)kv->arr_n, hearth_gguf_type_name(kv->arr_type), left(c));
    if (kv->arr_type != HEARTH_GGUF_STRING) {
        c->pos += (size_t)kv->arr_n * esize;
        return HEARTH_OK;
    }
    if (kv->arr_n == 0)
        return HEARTH_OK;
    kv->str_offsets = malloc((size_t)kv->arr_n * sizeof *kv->str_offsets);
    if (!kv->str_offsets)
        return fail(c, HEARTH_ENOMEM, at, "out of memory for %llu string offsets", (unsigned long long)kv->arr_n);
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        const uint8_t *s;
        uint64_t n;
        kv->str_offsets[i] = c->pos;
        if ((rc = read_str(c, "array string", UINT64_MAX, &s, &n)))
            return rc;
    }
    return HEARTH_OK;
}

static int parse_kv(cursor *c, hearth_gguf_kv *kv, uint64_t index)
{
    kv->offset = c->pos;
    snprintf(c->what, sizeof c->what, "key #%llu", (unsigned long long)index);
    int rc = read_name(c, "key", &kv->key);
    if (rc)
        return rc;
    set_what(c, "key", kv->key);
    uint64_t at = c->pos;
    if ((rc = read_u32(c, "value type", &kv->type)))
        return rc;
    if (kv->type >= HEARTH_GGUF_TYPE_COUNT_)
        return fail(c, HEARTH_EINVAL, at, "value type %u is unknown", kv->type);
    if (kv->type == HEARTH_GGUF_ARRAY)
        return parse_array(c, kv);
    if (kv->type == HEARTH_GGUF_STRING)
        return read_str(c, "string value", UINT64_MAX, &kv->data, &kv->str_len);
    return take(c, gguf_scalar_size(kv->type), "value", &kv->data);
}

static const char *kv_name_at(const hearth_gguf *g, uint32_t i)
{
    return g->kv[i].key;
}

static const char *tensor_name_at(const hearth_gguf *g, uint32_t i)
{
    return g->tensors[i].name;
}

/* Builds an index of n names; *dup gets the index of the first name seen twice. */
static int build_index(const hearth_gguf *g, uint64_t n, const char *(*name_at)(const hearth_gguf *, uint32_t),
                       uint32_t **slots_out, size_t *cap_out, int64_t *dup)
{
    size_t cap = 16;
    while (cap < n * 2)
        cap *= 2;
    uint32_t *slots = malloc(cap * sizeof *slots);
    if (!slots)
        return HEARTH_ENOMEM;
    memset(slots, 0xff, cap * sizeof *slots);
    *slots_out = slots;
    *cap_out = cap;
    *dup = -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *name = name_at(g, i);
        size_t s = gguf_hash(name) & (cap - 1);
        for (; slots[s] != UINT32_MAX; s = (s + 1) & (cap - 1)) {
            if (strcmp(name_at(g, slots[s]), name) == 0) {
                *dup = i;
                return HEARTH_OK;
            }
        }
        slots[s] = i;
    }
    return HEARTH_OK;
}

static int parse_header(cursor *c, hearth_gguf *g)
{
    snprintf(c->what, sizeof c->what, "header");
    const uint8_t *magic = NULL;
    int rc = take(c, 4, "magic", &magic);
    if (rc)
        return rc;
    if (memcmp(magic, "GGUF", 4) != 0) {
        char m[16];
        printable(m, sizeof m, magic, 4);
        return fail(c, HEARTH_EINVAL, 0, "bad magic '%s' (expected 'GGUF'): not a GGUF file", m);
    }
    if ((rc = read_u32(c, "version", &g->version)))
        return rc;
    if (g->version == 1)
        return fail(c, HEARTH_EUNSUPPORTED, 4,
                    "unsupported GGUF version 1 (v1 used 32-bit counts; re-convert the model with a current llama.cpp)");
    if (g->version != 2 && g->version != 3)
        return fail(c, HEARTH_EUNSUPPORTED, 4, "unsupported GGUF version %u (hearth reads 2 and 3%s)", g->version,
                    (g->version & 0xffffu) == 0 ? "; this looks like a big-endian file" : "");
    if ((rc = read_u64(c, "tensor count", &g->n_tensors)) || (rc = read_u64(c, "key count", &g->n_kv)))
        return rc;
    if (g->n_kv > MAX_RECORDS || g->n_tensors > MAX_RECORDS)
        return fail(c, HEARTH_ELIMIT, 8, "%llu keys and %llu tensors: more than the limit of %u each",
                    (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, MAX_RECORDS);
    if (g->n_kv * MIN_KV_BYTES + g->n_tensors * MIN_TENSOR_INFO_BYTES > left(c))
        return fail(c, HEARTH_EINVAL, 8, "%llu keys and %llu tensors cannot fit in the %zu bytes that remain",
                    (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, left(c));
    return HEARTH_OK;
}

static int parse_alignment(cursor *c, hearth_gguf *g)
{
    g->alignment = HEARTH_GGUF_DEFAULT_ALIGNMENT;
    const hearth_gguf_kv *kv = hearth_gguf_find_kv(g, "general.alignment");
    if (!kv)
        return HEARTH_OK;
    set_what(c, "key", kv->key);
    if (kv->type != HEARTH_GGUF_U32)
        return fail(c, HEARTH_EINVAL, kv->offset, "type is %s, expected u32", hearth_gguf_type_name(kv->type));
    uint32_t a = gguf_le32(kv->data);
    if (a == 0 || (a & (a - 1)) != 0)
        return fail(c, HEARTH_EINVAL, kv->offset, "alignment %u is not a power of two", a);
    g->alignment = a;
    return HEARTH_OK;
}

/* Reads one tensor info record; offsets are checked later, once the data
 * section's start is known. */
static int parse_tensor_info(cursor *c, hearth_gguf *g, hearth_gguf_tensor *t, uint64_t index)
{
    t->info_offset = c->pos;
    snprintf(c->what, sizeof c->what, "tensor #%llu", (unsigned long long)index);
    int rc = read_name(c, "tensor name", &t->name);
    if (rc)
        return rc;
    set_what(c, "tensor", t->name);
    uint32_t n_dims, type;
    uint64_t at = c->pos;
    if ((rc = read_u32(c, "n_dims", &n_dims)))
        return rc;
    if (n_dims > 4)
        return fail(c, HEARTH_EINVAL, at, "%u dims > 4", n_dims);
    t->n_dims = (int)n_dims;
    int64_t nelem = 1;
    for (int i = 0; i < 4; i++) {
        uint64_t ne = 1;
        at = c->pos;
        if (i < t->n_dims && (rc = read_u64(c, "dimension", &ne)))
            return rc;
        if (ne > INT64_MAX)
            return fail(c, HEARTH_EINVAL, at, "ne[%d] = %llu is out of range", i, (unsigned long long)ne);
        t->ne[i] = (int64_t)ne;
        if (__builtin_mul_overflow(nelem, t->ne[i], &nelem))
            return fail(c, HEARTH_EINVAL, at, "the element count overflows at ne[%d] = %lld", i, (long long)ne);
    }
    at = c->pos;
    if ((rc = read_u32(c, "type", &type)))
        return rc;
    const hearth_dtype_info *info = hearth_dtype_get(type);
    if (!info)
        return fail(c, HEARTH_EUNSUPPORTED, at, "type id %u is unknown or not supported", type);
    t->type = (hearth_dtype)type;
    if (t->ne[0] % info->block != 0)
        return fail(c, HEARTH_EINVAL, at, "ne[0] = %lld is not a multiple of the %s block size %lld",
                    (long long)t->ne[0], info->name, (long long)info->block);
    size_t row;
    if (!hearth_dtype_row_bytes(t->type, t->ne[0], &row) ||
        __builtin_mul_overflow(row, (size_t)(t->ne[0] ? nelem / t->ne[0] : 0), &t->nbytes))
        return fail(c, HEARTH_EINVAL, at, "the byte size of %lld %s elements overflows", (long long)nelem,
                    info->name);
    at = c->pos;
    if ((rc = read_u64(c, "data offset", &t->offset)))
        return rc;
    if (t->offset % g->alignment != 0)
        return fail(c, HEARTH_EINVAL, at, "data offset %llu is not a multiple of the alignment %u",
                    (unsigned long long)t->offset, g->alignment);
    return HEARTH_OK;
}

static int by_offset(const void *a, const void *b)
{
    const hearth_gguf_tensor *x = *(const hearth_gguf_tensor *const *)a, *y = *(const hearth_gguf_tensor *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

/* Fails naming t, its type, size and data offset, then what follows. */
__attribute__((format(printf, 3, 4)))
static int untiled(cursor *c, const hearth_gguf_tensor *t, const char *fmt, ...)
{
    char msg[HEARTH_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    set_what(c, "tensor", t->name);
    return fail(c, HEARTH_EINVAL, t->info_offset,
                "type %s, data of %zu bytes at file offset %llu, %s: the types and shapes do not tile the data section",
                hearth_dtype_get(t->type)->name, t->nbytes, (unsigned long long)t->offset, msg);
}

/* The tensors' data regions, sorted by offset, must tile the data section:
 * each starts where the one before it ends, give or take the padding to the
 * alignment, and the last ends within the alignment of the end of the file,
 * as every GGUF writer lays them out. A region's size follows from the
 * tensor's type and shape, so a changed type or dimension (an F32 tensor
 * relabelled Q4_0 is 7 times smaller) leaves a gap or an overlap that is
 * caught here rather than read as garbage weights. A file whose corruption
 * keeps every size (F32 relabelled I32) cannot be told from a good one. */
static int check_tiling(cursor *c, hearth_gguf *g)
{
    if (g->n_tensors == 0)
        return HEARTH_OK;
    const hearth_gguf_tensor **order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order)
        return fail(c, HEARTH_ENOMEM, 0, "out of memory for %llu tensors", (unsigned long long)g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        order[i] = &g->tensors[i];
    qsort(order, (size_t)g->n_tensors, sizeof *order, by_offset);
    int rc = HEARTH_OK;
    const hearth_gguf_tensor *first = order[0];
    if (first->offset != g->data_offset)
        rc = untiled(c, first, "the lowest, starts %llu bytes into the data section (at %llu), not at its start",
                     (unsigned long long)(first->offset - g->data_offset), (unsigned long long)g->data_offset);
    for (uint64_t i = 0; i + 1 < g->n_tensors && rc == HEARTH_OK; i++) {
        const hearth_gguf_tensor *t = order[i], *next = order[i + 1];
        uint64_t end = t->offset + t->nbytes; /* within the file: checked by place_tensors */
        if (end > next->offset)
            rc = untiled(c, t, "runs %llu bytes into the next tensor, '%s', at %llu",
                         (unsigned long long)(end - next->offset), next->name, (unsigned long long)next->offset);
        else if (next->offset - end >= g->alignment)
            rc = untiled(c, t, "ends %llu bytes before the next tensor, '%s', at %llu (more than the alignment %u)",
                         (unsigned long long)(next->offset - end), next->name, (unsigned long long)next->offset,
                         g->alignment);
    }
    const hearth_gguf_tensor *last = order[g->n_tensors - 1];
    uint64_t end = last->offset + last->nbytes;
    if (rc == HEARTH_OK && c->size - end >= g->alignment)
        rc = untiled(c, last,
                     "the last, ends %llu bytes before the end of the file at %zu (more than the alignment %u)",
                     (unsigned long long)(c->size - end), c->size, g->alignment);
    free(order);
    return rc;
}

static int place_tensors(cursor *c, hearth_gguf *g)
{
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_offset = c->pos + pad;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        hearth_gguf_tensor *t = &g->tensors[i];
        set_what(c, "tensor", t->name);
        uint64_t start;
        if (__builtin_add_overflow(g->data_offset, t->offset, &start) || start > c->size ||
            t->nbytes > c->size - start)
            return fail(c, HEARTH_EINVAL, t->info_offset,
                        "data [%llu, +%zu) runs past the end of the file (%zu bytes)", (unsigned long long)start,
                        t->nbytes, c->size);
        t->offset = start;
        t->data = c->d + start;
    }
    return check_tiling(c, g);
}

static int parse(cursor *c, hearth_gguf *g)
{
    int rc = parse_header(c, g);
    if (rc)
        return rc;
    if (g->n_kv && !(g->kv = calloc((size_t)g->n_kv, sizeof *g->kv)))
        return fail(c, HEARTH_ENOMEM, 0, "out of memory for %llu keys", (unsigned long long)g->n_kv);
    for (uint64_t i = 0; i < g->n_kv; i++)
        if ((rc = parse_kv(c, &g->kv[i], i)))
            return rc;
    int64_t dup;
    if (build_index(g, g->n_kv, kv_name_at, &g->kv_index, &g->kv_index_cap, &dup))
        return fail(c, HEARTH_ENOMEM, 0, "out of memory for the key index");
    if (dup >= 0) {
        set_what(c, "key", g->kv[dup].key);
        return fail(c, HEARTH_EINVAL, g->kv[dup].offset, "duplicate key");
    }
    if ((rc = parse_alignment(c, g)))
        return rc;
    if (g->n_tensors > left(c) / MIN_TENSOR_INFO_BYTES) {
        snprintf(c->what, sizeof c->what, "tensor infos");
        return fail(c, HEARTH_EINVAL, c->pos, "%llu tensors cannot fit in the %zu bytes that remain",
                    (unsigned long long)g->n_tensors, left(c));
    }
    if (g->n_tensors && !(g->tensors = calloc((size_t)g->n_tensors, sizeof *g->tensors)))
        return fail(c, HEARTH_ENOMEM, 0, "out of memory for %llu tensors", (unsigned long long)g->n_tensors);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if ((rc = parse_tensor_info(c, g, &g->tensors[i], i)))
            return rc;
    if (build_index(g, g->n_tensors, tensor_name_at, &g->tensor_index, &g->tensor_index_cap, &dup))
        return fail(c, HEARTH_ENOMEM, 0, "out of memory for the tensor index");
    if (dup >= 0) {
        set_what(c, "tensor", g->tensors[dup].name);
        return fail(c, HEARTH_EINVAL, g->tensors[dup].info_offset, "duplicate tensor name");
    }
    return place_tensors(c, g);
}

int hearth_gguf_open_memory(hearth_gguf *g, const void *data, size_t size, const char *name, hearth_err *err)
{
    memset(g, 0, sizeof *g);
    g->path = strdup(name ? name : "(memory)");
    if (!g->path)
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", name ? name : "(memory)");
    g->map.data = data;
    g->map.size = data ? size : 0;
    cursor c = {.d = g->map.data, .size = g->map.size, .file = g->path, .err = err};
    int rc = parse(&c, g);
    if (rc)
        hearth_gguf_close(g);
    return rc;
}

int hearth_gguf_open(hearth_gguf *g, const char *path, hearth_err *err)
{
    memset(g, 0, sizeof *g);
    hearth_mmap m;
    int rc = hearth_mmap_open(&m, path, err);
    if (rc)
        return rc;
    rc = hearth_gguf_open_memory(g, m.data, m.size, path, err);
    if (rc) {
        hearth_mmap_close(&m);
        return rc;
    }
    g->owns_map = true;
    return HEARTH_OK;
}

void hearth_gguf_close(hearth_gguf *g)
{
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].str_offsets);
        }
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++)
            free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->kv_index);
    free(g->tensor_index);
    free(g->path);
    if (g->owns_map)
        hearth_mmap_close(&g->map);
    memset(g, 0, sizeof *g);
}

static uint32_t lookup(const hearth_gguf *g, const uint32_t *slots, size_t cap,
                       const char *(*name_at)(const hearth_gguf *, uint32_t), const char *name)
{
    if (!slots)
        return UINT32_MAX;
    for (size_t s = gguf_hash(name) & (cap - 1); slots[s] != UINT32_MAX; s = (s + 1) & (cap - 1))
        if (strcmp(name_at(g, slots[s]), name) == 0)
            return slots[s];
    return UINT32_MAX;
}

const hearth_gguf_kv *hearth_gguf_find_kv(const hearth_gguf *g, const char *key)
{
    uint32_t i = lookup(g, g->kv_index, g->kv_index_cap, kv_name_at, key);
    return i == UINT32_MAX ? NULL : &g->kv[i];
}

const hearth_gguf_tensor *hearth_gguf_find_tensor(const hearth_gguf *g, const char *name)
{
    uint32_t i = lookup(g, g->tensor_index, g->tensor_index_cap, tensor_name_at, name);
    return i == UINT32_MAX ? NULL : &g->tensors[i];
}

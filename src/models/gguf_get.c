/* gguf_get.c: typed access to GGUF metadata values.
 *
 * How: records point into the mapping, so each getter decodes the
 * little-endian bytes on demand and converts between integer widths only when
 * the value fits (a u64 head count of 8 reads fine as u32; 2^40 does not).
 * String array elements are found through the offsets recorded and
 * validated at open, so no access here can run past the file.
 *
 * Rejected: decoding every value into a tagged union at open (doubles the
 * memory for 50k-token vocabularies and copies strings nobody reads).
 *
 * Calls: gguf.c (hearth_gguf_find_kv, hearth_gguf_type_name); nothing there
 * calls back here. */
#include "models/gguf.h"

#include "models/gguf_int.h"

#include <stdio.h>

static bool is_int(uint32_t t)
{
    return t <= HEARTH_GGUF_I32 || t == HEARTH_GGUF_U64 || t == HEARTH_GGUF_I64;
}

/* Decodes one integer of type t at p; false when it does not fit in int64. */
static bool decode_int(uint32_t t, const uint8_t *p, int64_t *out)
{
    switch (t) {
    case HEARTH_GGUF_U8: *out = p[0]; return true;
    case HEARTH_GGUF_I8: *out = (int8_t)p[0]; return true;
    case HEARTH_GGUF_U16: *out = gguf_le16(p); return true;
    case HEARTH_GGUF_I16: *out = (int16_t)gguf_le16(p); return true;
    case HEARTH_GGUF_U32: *out = gguf_le32(p); return true;
    case HEARTH_GGUF_I32: *out = (int32_t)gguf_le32(p); return true;
    case HEARTH_GGUF_I64: *out = (int64_t)gguf_le64(p); return true;
    case HEARTH_GGUF_U64: {
        uint64_t v = gguf_le64(p);
        if (v > INT64_MAX)
            return false;
        *out = (int64_t)v;
        return true;
    }
    default: return false;
    }
}

static double decode_float(uint32_t t, const uint8_t *p)
{
    if (t == HEARTH_GGUF_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}

int hearth_gguf_kv_i64(const hearth_gguf_kv *kv, int64_t *out)
{
    return decode_int(kv->type, kv->data, out) ? HEARTH_OK : HEARTH_EINVAL;
}

int hearth_gguf_kv_f64(const hearth_gguf_kv *kv, double *out)
{
    if (kv->type != HEARTH_GGUF_F32 && kv->type != HEARTH_GGUF_F64)
        return HEARTH_EINVAL;
    *out = decode_float(kv->type, kv->data);
    return HEARTH_OK;
}

/* Finds key or fails with HEARTH_ENOTFOUND naming file and key. */
static const hearth_gguf_kv *need(const hearth_gguf *g, const char *key, hearth_err *err)
{
    const hearth_gguf_kv *kv = hearth_gguf_find_kv(g, key);
    if (!kv)
        hearth_err_set(err, HEARTH_ENOTFOUND, "%s: key '%s' not found", g->path, key);
    return kv;
}

static int wrong_type(const hearth_gguf *g, const hearth_gguf_kv *kv, const char *expected, hearth_err *err)
{
    return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' at offset %llu: type is %s, expected %s", g->path,
                          kv->key, (unsigned long long)kv->offset, hearth_gguf_type_name(kv->type), expected);
}

int hearth_gguf_get_i64(const hearth_gguf *g, const char *key, int64_t *out, hearth_err *err)
{
    const hearth_gguf_kv *kv = need(g, key, err);
    if (!kv)
        return HEARTH_ENOTFOUND;
    if (!is_int(kv->type))
        return wrong_type(g, kv, "an integer", err);
    if (!decode_int(kv->type, kv->data, out))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' at offset %llu: value %llu does not fit in i64",
                              g->path, key, (unsigned long long)kv->offset,
                              (unsigned long long)gguf_le64(kv->data));
    return HEARTH_OK;
}

int hearth_gguf_get_u32(const hearth_gguf *g, const char *key, uint32_t *out, hearth_err *err)
{
    const hearth_gguf_kv *kv = need(g, key, err);
    if (!kv)
        return HEARTH_ENOTFOUND;
    if (!is_int(kv->type))
        return wrong_type(g, kv, "an integer", err);
    int64_t v;
    if (!decode_int(kv->type, kv->data, &v) || v < 0 || v > UINT32_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' at offset %llu: value does not fit in u32",
                              g->path, key, (unsigned long long)kv->offset);
    *out = (uint32_t)v;
    return HEARTH_OK;
}

int hearth_gguf_get_f32(const hearth_gguf *g, const char *key, float *out, hearth_err *err)
{
    const hearth_gguf_kv *kv = need(g, key, err);
    if (!kv)
        return HEARTH_ENOTFOUND;
    if (kv->type != HEARTH_GGUF_F32 && kv->type != HEARTH_GGUF_F64)
        return wrong_type(g, kv, "f32 or f64", err);
    *out = (float)decode_float(kv->type, kv->data);
    return HEARTH_OK;
}

int hearth_gguf_get_bool(const hearth_gguf *g, const char *key, bool *out, hearth_err *err)
{
    const hearth_gguf_kv *kv = need(g, key, err);
    if (!kv)
        return HEARTH_ENOTFOUND;
    if (kv->type != HEARTH_GGUF_BOOL)
        return wrong_type(g, kv, "bool", err);
    *out = kv->data[0] != 0;
    return HEARTH_OK;
}

int hearth_gguf_get_str(const hearth_gguf *g, const char *key, const char **s, size_t *len, hearth_err *err)
{
    const hearth_gguf_kv *kv = need(g, key, err);
    if (!kv)
        return HEARTH_ENOTFOUND;
    if (kv->type != HEARTH_GGUF_STRING)
        return wrong_type(g, kv, "string", err);
    *s = (const char *)kv->data;
    *len = (size_t)kv->str_len;
    return HEARTH_OK;
}

int hearth_gguf_get_arr(const hearth_gguf *g, const char *key, uint32_t elem_type, const hearth_gguf_kv **out,
                        hearth_err *err)
{
    const hearth_gguf_kv *kv = need(g, key, err);
    if (!kv)
        return HEARTH_ENOTFOUND;
    if (kv->type != HEARTH_GGUF_ARRAY)
        return wrong_type(g, kv, "an array", err);
    if (elem_type != HEARTH_GGUF_TYPE_ANY && kv->arr_type != elem_type)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' at offset %llu: array of %s, expected array of %s",
                              g->path, key, (unsigned long long)kv->offset, hearth_gguf_type_name(kv->arr_type),
                              hearth_gguf_type_name(elem_type));
    *out = kv;
    return HEARTH_OK;
}

/* The start of element i of a non-string array, or NULL. */
static const uint8_t *element(const hearth_gguf_kv *kv, uint64_t i)
{
    if (kv->type != HEARTH_GGUF_ARRAY || i >= kv->arr_n || kv->arr_type == HEARTH_GGUF_STRING)
        return NULL;
    return kv->data + i * gguf_scalar_size(kv->arr_type);
}

int hearth_gguf_arr_str(const hearth_gguf_kv *kv, uint64_t i, const char **s, size_t *len)
{
    if (kv->type != HEARTH_GGUF_ARRAY || kv->arr_type != HEARTH_GGUF_STRING || i >= kv->arr_n)
        return HEARTH_EINVAL;
    /* kv->data is the first element's length prefix; offsets are absolute */
    const uint8_t *p = kv->data + (kv->str_offsets[i] - kv->str_offsets[0]);
    *len = (size_t)gguf_le64(p);
    *s = (const char *)p + 8;
    return HEARTH_OK;
}

int hearth_gguf_arr_f32(const hearth_gguf_kv *kv, uint64_t i, float *out)
{
    const uint8_t *p = element(kv, i);
    if (!p || (kv->arr_type != HEARTH_GGUF_F32 && kv->arr_type != HEARTH_GGUF_F64))
        return HEARTH_EINVAL;
    *out = (float)decode_float(kv->arr_type, p);
    return HEARTH_OK;
}

int hearth_gguf_arr_i64(const hearth_gguf_kv *kv, uint64_t i, int64_t *out)
{
    const uint8_t *p = element(kv, i);
    if (!p || !is_int(kv->arr_type) || !decode_int(kv->arr_type, p, out))
        return HEARTH_EINVAL;
    return HEARTH_OK;
}

int hearth_gguf_arr_i32(const hearth_gguf_kv *kv, uint64_t i, int32_t *out)
{
    int64_t v;
    if (hearth_gguf_arr_i64(kv, i, &v) || v < INT32_MIN || v > INT32_MAX)
        return HEARTH_EINVAL;
    *out = (int32_t)v;
    return HEARTH_OK;
}

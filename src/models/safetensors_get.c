/* safetensors_get.c: lookups in an open safetensors file and reading its
 * float tensors at any alignment.
 *
 * Tensors are sorted by name at open, so lookups are a binary search (no
 * index to build or free). hearth_st_read_f32 reads element by element
 * through memcpy: a tensor placed at an odd offset by some other writer
 * still reads correctly, and the compiler turns the fixed-size memcpy into a
 * plain load. Rejected: copying misaligned tensors at open (doubles memory
 * for a case hearth's and the reference writer never produce). */
#include "models/safetensors.h"

#include <stdio.h>
#include <string.h>

const hearth_st_tensor *hearth_st_find(const hearth_st *st, const char *name)
{
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[mid].name, name);
        if (c == 0)
            return &st->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *hearth_st_meta(const hearth_st *st, const char *key)
{
    size_t lo = 0, hi = st->n_meta;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(st->meta_keys[mid], key);
        if (c == 0)
            return st->meta_values[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void shape_str(char *out, size_t cap, int n_dims, const int64_t *shape)
{
    size_t o = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < n_dims && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap)
        snprintf(out + o, cap - o, "]");
}

int hearth_st_get(const hearth_st *st, const char *name, int n_dims, const int64_t *shape,
                  const hearth_st_tensor **out, hearth_err *err)
{
    *out = NULL;
    const hearth_st_tensor *t = hearth_st_find(st, name);
    if (!t)
        return hearth_err_set(err, HEARTH_ENOTFOUND, "%s: tensor '%s' not found", st->path, name);
    if (!t->supported)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "%s: tensor '%s' at offset %llu: unsupported dtype %s (hearth reads F32, F16, BF16)",
                              st->path, name, (unsigned long long)t->offset, t->dtype_name);
    if (n_dims >= 0) {
        bool same = t->n_dims == n_dims;
        for (int i = 0; same && i < n_dims; i++)
            same = t->shape[i] == shape[i];
        if (!same) {
            char want[160], got[160];
            shape_str(want, sizeof want, n_dims, shape);
            shape_str(got, sizeof got, t->n_dims, t->shape);
            return hearth_err_set(err, HEARTH_EINVAL, "%s: tensor '%s' at offset %llu: shape %s, expected %s",
                                  st->path, name, (unsigned long long)t->offset, got, want);
        }
    }
    *out = t;
    return HEARTH_OK;
}

float hearth_st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13; /* inf, NaN (payload kept) */
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | man << 13; /* rebias 15 -> 127 */
    } else if (man == 0) {
        bits = sign;
    } else {
        /* subnormal: shift the mantissa up until its leading 1 is the implicit bit */
        int e = 113;
        while (!(man & 0x400)) {
            man <<= 1;
            e--;
        }
        bits = sign | (uint32_t)e << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float hearth_st_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

int hearth_st_read_f32(const hearth_st_tensor *t, int64_t first, int64_t n, float *out)
{
    if (!t->supported)
        return HEARTH_EUNSUPPORTED;
    if (first < 0 || n < 0 || first > t->n_elements || n > t->n_elements - first)
        return HEARTH_EINVAL;
    const uint8_t *p = t->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = first + i;
        if (t->type == HEARTH_F32) {
            memcpy(&out[i], p + 4 * k, 4);
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * k, 2);
            out[i] = t->type == HEARTH_F16 ? hearth_st_f16_to_f32(h) : hearth_st_bf16_to_f32(h);
        }
    }
    return HEARTH_OK;
}

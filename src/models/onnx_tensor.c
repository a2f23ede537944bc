/* onnx_tensor.c: one TensorProto (an initializer, or a Constant node's
 * value) read into a hearth_onnx_tensor, every count checked against the
 * data present.
 *
 * How: ONNX keeps a tensor's values either in raw_data (little-endian bytes,
 * what exporters write today) or in the typed field for its type
 * (float_data, int32_data, int64_data, double_data: mnist-8's 2017 exporter).
 * Both are used in place: protobuf-c has already copied them into buffers of
 * their own (malloc'd, so aligned), which live as long as the unpacked
 * message; raw_data is copied once more only if it ever comes unaligned.
 * int32_data also carries FLOAT16 (the bit pattern), BOOL, INT8 and UINT8,
 * one value per int32: those are packed here to their own size, into
 * loader-owned memory, each value range-checked.
 *
 * Refused, naming the tensor: data kept in another file (external data:
 * hearth reads one file and the issue asks for a clear refusal), string
 * tensors and types hearth has no kernel for (by number and name), more than
 * HEARTH_ONNX_MAX_DIMS dims, a negative dim, an element count past
 * ONNX_MAX_ELEMS, data of the wrong length, both raw_data and a typed field.
 *
 * Rejected: converting every type to float at load (the planner decides what
 * a constant becomes; an INT64 shape tensor must stay exact). */
#include "onnx_int.h"

#include <stdio.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "onnx_tensor.c uses raw_data (little-endian by ONNX's definition) in place: a big-endian host needs a byte swap here"
#endif

/* ONNX's TensorProto.DataType names, by number (for messages too: a type
 * hearth does not read is named, not just numbered). */
static const char *const dtype_names[] = {
    "UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL",
    "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0",
    "UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2",
};

const char *hearth_onnx_dtype_name(int dtype)
{
    if (dtype < 0 || (size_t)dtype >= sizeof dtype_names / sizeof dtype_names[0])
        return "?";
    return dtype_names[dtype];
}

size_t hearth_onnx_dtype_size(int dtype)
{
    switch (dtype) {
    case HEARTH_ONNX_UINT8:
    case HEARTH_ONNX_INT8:
    case HEARTH_ONNX_BOOL:
        return 1;
    case HEARTH_ONNX_FLOAT16:
        return 2;
    case HEARTH_ONNX_FLOAT:
    case HEARTH_ONNX_INT32:
        return 4;
    case HEARTH_ONNX_INT64:
    case HEARTH_ONNX_DOUBLE:
        return 8;
    default:
        return 0;
    }
}

/* Packs n int32_data values to dtype's size into dst, each in range. */
static int pack_narrow(const int32_t *src, int64_t n, int dtype, void *dst, const char *file, const char *tname,
                       hearth_err *err)
{
    int32_t lo, hi;
    switch (dtype) {
    case HEARTH_ONNX_FLOAT16:
        lo = 0, hi = 0xffff; /* the half's bit pattern */
        break;
    case HEARTH_ONNX_BOOL:
        lo = 0, hi = 1;
        break;
    case HEARTH_ONNX_INT8:
        lo = -128, hi = 127;
        break;
    default: /* UINT8 */
        lo = 0, hi = 255;
        break;
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t v = src[i];
        if (v < lo || v > hi)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: tensor '%s': int32_data[%lld] = %d is out of range for %s",
                                  file, tname, (long long)i, (int)v, hearth_onnx_dtype_name(dtype));
        if (dtype == HEARTH_ONNX_FLOAT16) {
            uint16_t h = (uint16_t)v;
            memcpy((uint8_t *)dst + 2 * i, &h, 2);
        } else {
            ((uint8_t *)dst)[i] = (uint8_t)v;
        }
    }
    return 0;
}

/* The typed field that holds dtype's values: its count and data (NULL name
 * when dtype has none hearth reads). */
static const char *typed_field(const Onnx__TensorProto *t, int dtype, size_t *count, const void **data)
{
    switch (dtype) {
    case HEARTH_ONNX_FLOAT:
        *count = t->n_float_data, *data = t->float_data;
        return "float_data";
    case HEARTH_ONNX_INT64:
        *count = t->n_int64_data, *data = t->int64_data;
        return "int64_data";
    case HEARTH_ONNX_DOUBLE:
        *count = t->n_double_data, *data = t->double_data;
        return "double_data";
    default: /* INT32 and the narrow types ONNX widens to int32 */
        *count = t->n_int32_data, *data = t->int32_data;
        return "int32_data";
    }
}

/* Any typed field holds values (for the "both raw_data and ..." check). */
static bool any_typed(const Onnx__TensorProto *t)
{
    return t->n_float_data || t->n_int32_data || t->n_int64_data || t->n_double_data || t->n_uint64_data ||
           t->n_string_data;
}

int onnx_tensor_read(onnx_impl *im, const Onnx__TensorProto *t, const char *what, const char *file,
                     hearth_onnx_tensor *out, hearth_err *err)
{
    /* an empty int64 (8-byte aligned) for tensors of no element */
    static const int64_t empty[1];
    memset(out, 0, sizeof *out);
    const char *tname = t->name && t->name[0] ? t->name : what;
    out->name = t->name ? t->name : "";

    if ((t->has_data_location && t->data_location == 1) || t->n_external_data)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "onnx: %s: tensor '%s' keeps its data outside the file (external data), which hearth does not read",
                              file, tname);
    if (t->has_data_location && t->data_location != 0)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: tensor '%s': data_location %d is neither DEFAULT (0) nor EXTERNAL (1)",
                              file, tname, (int)t->data_location);

    int dtype = t->has_data_type ? t->data_type : 0;
    if (dtype == 8)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: tensor '%s' holds strings (data type 8, STRING), which hearth does not read",
                              file, tname);
    size_t esz = hearth_onnx_dtype_size(dtype);
    if (!esz)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "onnx: %s: tensor '%s': data type %d (%s) is not one hearth reads",
                              file, tname, dtype, hearth_onnx_dtype_name(dtype));
    out->dtype = dtype;

    if (t->n_dims > HEARTH_ONNX_MAX_DIMS)
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: tensor '%s': %zu dims > %d", file, tname, t->n_dims,
                              HEARTH_ONNX_MAX_DIMS);
    int64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        int64_t d = t->dims[i];
        if (d < 0)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: tensor '%s': dim %zu is %lld (negative)", file, tname, i,
                                  (long long)d);
        if (d && n > ONNX_MAX_ELEMS / d)
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: tensor '%s': its dims make more than %lld elements", file,
                                  tname, (long long)ONNX_MAX_ELEMS);
        n *= d;
        out->dims[i] = d;
    }
    out->ndim = (int)t->n_dims;
    out->n = n;
    size_t bytes = (size_t)n * esz; /* n <= 2^40, esz <= 8: no overflow */
    out->bytes = bytes;

    if (t->has_raw_data) {
        if (any_typed(t))
            return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: tensor '%s' has both raw_data and a typed data field",
                                  file, tname);
        if (t->raw_data.len != bytes)
            return hearth_err_set(err, HEARTH_EINVAL,
                                  "onnx: %s: tensor '%s': raw_data holds %zu bytes, its %lld elements of %s want %zu", file,
                                  tname, t->raw_data.len, (long long)n, hearth_onnx_dtype_name(dtype), bytes);
        if (!bytes) {
            out->data = empty;
            return 0;
        }
        size_t align = esz == 8 ? 8 : 4;
        if ((uintptr_t)t->raw_data.data % align == 0) {
            out->data = t->raw_data.data;
            return 0;
        }
        void *copy = onnx_alloc(im, bytes);
        if (!copy)
            return hearth_err_set(err, HEARTH_ENOMEM, "onnx: %s: tensor '%s': out of memory for %zu bytes", file, tname, bytes);
        memcpy(copy, t->raw_data.data, bytes);
        out->data = copy;
        return 0;
    }

    size_t count;
    const void *src;
    const char *field = typed_field(t, dtype, &count, &src);
    if ((int64_t)count != n) {
        if (!count)
            return hearth_err_set(err, HEARTH_EINVAL,
                                  "onnx: %s: tensor '%s' has no data (neither raw_data nor %s) for its %lld elements of %s", file,
                                  tname, field, (long long)n, hearth_onnx_dtype_name(dtype));
        return hearth_err_set(err, HEARTH_EINVAL, "onnx: %s: tensor '%s': %s holds %zu values, its dims want %lld", file,
                              tname, field, count, (long long)n);
    }
    if (!n) {
        out->data = empty;
        return 0;
    }
    if (dtype == HEARTH_ONNX_FLOAT16 || dtype == HEARTH_ONNX_BOOL || dtype == HEARTH_ONNX_INT8 ||
        dtype == HEARTH_ONNX_UINT8) {
        void *dst = onnx_alloc(im, bytes);
        if (!dst)
            return hearth_err_set(err, HEARTH_ENOMEM, "onnx: %s: tensor '%s': out of memory for %zu bytes", file, tname, bytes);
        int rc = pack_narrow(src, n, dtype, dst, file, tname, err);
        if (rc)
            return rc;
        out->data = dst;
        return 0;
    }
    out->data = src;
    return 0;
}

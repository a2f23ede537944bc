/* gguf.h: a validating, zero-copy reader for GGUF v2/v3 files.
 *
 * hearth_gguf_open maps the file read-only and checks every count, length and
 * offset against the bytes that remain before using it, so a hostile or
 * truncated file yields an error that names the file, the key or tensor and
 * the byte offset, never a read past the end. The tensors' data regions,
 * sized by their types and shapes, must tile the data section (no gap past
 * the alignment's padding, no overlap), which catches a corrupted type or
 * shape that would otherwise be read as garbage weights. Metadata values and tensor data
 * are views into the mapping: nothing is copied but keys and tensor names.
 *
 * After a successful open the structure is read-only and may be shared by any
 * number of threads. All multi-byte values in the file are little-endian; the
 * accessors below decode them (values in the mapping may be unaligned, so read
 * them through these functions rather than by casting kv->data). */
#ifndef HEARTH_MODELS_GGUF_H
#define HEARTH_MODELS_GGUF_H

#include "base/err.h"
#include "base/file.h"
#include "engine/dtype.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GGUF metadata value types, numbered as in the file. */
enum hearth_gguf_type {
    HEARTH_GGUF_U8 = 0,
    HEARTH_GGUF_I8 = 1,
    HEARTH_GGUF_U16 = 2,
    HEARTH_GGUF_I16 = 3,
    HEARTH_GGUF_U32 = 4,
    HEARTH_GGUF_I32 = 5,
    HEARTH_GGUF_F32 = 6,
    HEARTH_GGUF_BOOL = 7,
    HEARTH_GGUF_STRING = 8,
    HEARTH_GGUF_ARRAY = 9,
    HEARTH_GGUF_U64 = 10,
    HEARTH_GGUF_I64 = 11,
    HEARTH_GGUF_F64 = 12,
    HEARTH_GGUF_TYPE_COUNT_ = 13,
    /* for hearth_gguf_get_arr: accept any element type */
    HEARTH_GGUF_TYPE_ANY = 0xffffffffu,
};

/* Longest key or tensor name accepted (bytes). */
#define HEARTH_GGUF_NAME_MAX 65536u
/* Data-section alignment when the file has no general.alignment. */
#define HEARTH_GGUF_DEFAULT_ALIGNMENT 32u

typedef struct hearth_gguf_kv {
    char *key;               /* NUL-terminated copy, owned */
    uint32_t type;           /* enum hearth_gguf_type */
    uint32_t arr_type;       /* element type when type is ARRAY */
    uint64_t arr_n;          /* element count when type is ARRAY */
    uint64_t str_len;        /* byte length when type is STRING */
    const uint8_t *data;     /* scalar: the value bytes; STRING: the bytes (no NUL);
                                ARRAY: the first element; all in the mapping */
    uint64_t *str_offsets;   /* string arrays: file offset of each element's u64
                                length prefix, validated at open; owned */
    uint64_t offset;         /* file offset of this record, for messages */
} hearth_gguf_kv;

typedef struct hearth_gguf_tensor {
    char *name;              /* NUL-terminated copy, owned */
    int n_dims;              /* 0..4 */
    int64_t ne[4];           /* ne[0] is the innermost (row length), as GGUF stores it;
                                unused dims are 1 */
    hearth_dtype type;
    uint64_t offset;         /* absolute file offset of the data */
    size_t nbytes;
    const void *data;        /* points into the mapping */
    uint64_t info_offset;    /* file offset of this tensor's info record, for messages */
} hearth_gguf_tensor;

typedef struct hearth_gguf {
    char *path;              /* owned copy of the path or name given at open */
    hearth_mmap map;         /* the file's bytes (borrowed when opened from memory) */
    bool owns_map;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset;    /* start of the data section */
    uint64_t n_kv;
    hearth_gguf_kv *kv;
    uint64_t n_tensors;
    hearth_gguf_tensor *tensors;
    /* private: open-addressing indexes (key -> kv, name -> tensor), UINT32_MAX = empty */
    uint32_t *kv_index;
    uint32_t *tensor_index;
    size_t kv_index_cap, tensor_index_cap;
} hearth_gguf;

/* Maps path and validates it. On failure g is left closed (hearth_gguf_close is
 * still safe) and err names the file, the key or tensor, and the offset.
 * HEARTH_EIO: cannot read; HEARTH_EINVAL: malformed, or path is not a
 * regular file (a FIFO, a directory, a device: refused without blocking);
 * HEARTH_EUNSUPPORTED: a version or tensor type hearth does not handle;
 * HEARTH_ENOMEM. */
int hearth_gguf_open(hearth_gguf *g, const char *path, hearth_err *err);
/* Same, over size bytes at data, which are borrowed and must outlive g.
 * name is used in messages. For fuzzing, tests, and embedded files. */
int hearth_gguf_open_memory(hearth_gguf *g, const void *data, size_t size, const char *name,
                            hearth_err *err);
/* Frees everything and unmaps; safe on a zeroed, half-open or closed g. */
void hearth_gguf_close(hearth_gguf *g);

/* The record for key, or NULL. */
const hearth_gguf_kv *hearth_gguf_find_kv(const hearth_gguf *g, const char *key);
/* The tensor called name, or NULL. */
const hearth_gguf_tensor *hearth_gguf_find_tensor(const hearth_gguf *g, const char *name);
/* "u32", "string", ...; "?" for an unknown id. */
const char *hearth_gguf_type_name(uint32_t type);

/* Typed getters. Each returns HEARTH_ENOTFOUND (err set) when the key is
 * absent, HEARTH_EINVAL (err set) when its type does not fit or the value is
 * out of range, else 0.
 * get_u32 / get_i64: any integer type whose value fits.
 * get_f32: f32 or f64 (narrowed). get_bool: bool only.
 * get_str: a view (not NUL-terminated) into the mapping. */
int hearth_gguf_get_u32(const hearth_gguf *g, const char *key, uint32_t *out, hearth_err *err);
int hearth_gguf_get_i64(const hearth_gguf *g, const char *key, int64_t *out, hearth_err *err);
int hearth_gguf_get_f32(const hearth_gguf *g, const char *key, float *out, hearth_err *err);
int hearth_gguf_get_bool(const hearth_gguf *g, const char *key, bool *out, hearth_err *err);
int hearth_gguf_get_str(const hearth_gguf *g, const char *key, const char **s, size_t *len,
                        hearth_err *err);
/* Finds an array; elem_type is the required element type or HEARTH_GGUF_TYPE_ANY.
 * HEARTH_ENOTFOUND when absent, HEARTH_EINVAL when not such an array. */
int hearth_gguf_get_arr(const hearth_gguf *g, const char *key, uint32_t elem_type,
                        const hearth_gguf_kv **out, hearth_err *err);

/* Array element access; i must be < kv->arr_n. HEARTH_EINVAL on a wrong
 * type, an index out of range, or (arr_i64/arr_i32) a value that does not fit.
 * arr_str: a view into the mapping (not NUL-terminated).
 * arr_f32: f32 or f64 elements. arr_i64 / arr_i32: any integer elements. */
int hearth_gguf_arr_str(const hearth_gguf_kv *kv, uint64_t i, const char **s, size_t *len);
int hearth_gguf_arr_f32(const hearth_gguf_kv *kv, uint64_t i, float *out);
int hearth_gguf_arr_i64(const hearth_gguf_kv *kv, uint64_t i, int64_t *out);
int hearth_gguf_arr_i32(const hearth_gguf_kv *kv, uint64_t i, int32_t *out);

/* Scalar integer value of kv (any integer type), for callers that walk every
 * record. HEARTH_EINVAL when kv is not an integer or does not fit in int64. */
int hearth_gguf_kv_i64(const hearth_gguf_kv *kv, int64_t *out);
/* Scalar float value of kv (f32 or f64). */
int hearth_gguf_kv_f64(const hearth_gguf_kv *kv, double *out);

#endif

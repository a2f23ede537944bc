/* safetensors.h: a validating, zero-copy reader for Hugging Face safetensors.
 *
 * The format: a u64 little-endian header length N, N bytes of a JSON object
 * {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
 * ..., "__metadata__": {"key": "value"}}, then the data section, which the
 * offsets index from its first byte.
 *
 * hearth_st_open maps the file and checks it as the reference implementation
 * (huggingface/safetensors) does, with a message naming the file, the tensor
 * and the byte offset on each failure: the header length against the file and
 * HEARTH_ST_MAX_HEADER, the JSON, every entry's dtype, shape (at most
 * HEARTH_ST_MAX_DIMS non-negative integers, no overflow) and offsets (begin <=
 * end <= data size, end - begin == elements * dtype size), duplicate names,
 * and the tensors tiling the data section exactly: no overlap, no hole, no
 * trailing byte (the reference rejects a hole or a trailing byte too).
 *
 * Tensors are views into the mapping, never copied. dtypes: every dtype the
 * format names is accepted at open (real BERT checkpoints carry an I64
 * "embeddings.position_ids" the model never reads); only F32, F16 and BF16
 * map to a hearth_dtype, and hearth_st_get refuses the rest with
 * HEARTH_EUNSUPPORTED when a caller asks for one. A dtype the format does not
 * name is an error at open.
 *
 * Alignment: a tensor's data is aligned to its element size only if the file
 * put it there (hearth's writer and the reference writer do; others need
 * not). The mapping starts on a page, so t->aligned says whether data is a
 * multiple of the element size in memory. Read unaligned tensors through
 * hearth_st_read_f32 (memcpy, any alignment) or copy them once; never cast
 * t->data to float * without checking t->aligned.
 *
 * After a successful open the structure is read-only and may be shared by any
 * number of threads. */
#ifndef HEARTH_MODELS_SAFETENSORS_H
#define HEARTH_MODELS_SAFETENSORS_H

#include "base/err.h"
#include "base/file.h"
#include "engine/dtype.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEARTH_ST_MAX_HEADER ((uint64_t)100 << 20) /* the reference's bound */
#define HEARTH_ST_MAX_DIMS 8
#define HEARTH_ST_MAX_NAME 4096u                   /* bytes in a tensor name or metadata key */
#define HEARTH_ST_MAX_TENSORS ((size_t)1 << 20)
/* Commas outside strings in the header: bounds cJSON's node count (and so its
 * memory: about 64 bytes a node, so ~130 MiB at most) before it parses; a real
 * header has about 6 per tensor, 60 thousand for 10 thousand tensors. */
#define HEARTH_ST_MAX_JSON_COMMAS ((size_t)2 << 20)

typedef struct hearth_st_tensor {
    char *name;               /* NUL-terminated copy, owned */
    hearth_dtype type;        /* valid only when supported */
    bool supported;           /* dtype is F32, F16 or BF16 */
    bool aligned;             /* data is a multiple of the element size in memory */
    const char *dtype_name;   /* the file's spelling, "F32", "I64", ...; static storage */
    int n_dims;               /* 0..HEARTH_ST_MAX_DIMS; 0 is a scalar */
    int64_t shape[HEARTH_ST_MAX_DIMS]; /* shape[0] outermost, as safetensors writes it; unused are 1 */
    int64_t n_elements;
    const void *data;         /* points into the mapping (NULL-safe: a 0-byte tensor may point at its end) */
    size_t nbytes;
    uint64_t offset;          /* absolute file offset of the first data byte */
} hearth_st_tensor;

typedef struct hearth_st {
    char *path;               /* owned copy of the path or name given at open */
    hearth_mmap map;          /* the file's bytes (borrowed when opened from memory) */
    bool owns_map;
    uint64_t header_len;      /* N */
    uint64_t data_offset;     /* 8 + N: start of the data section */
    size_t n_tensors;
    hearth_st_tensor *tensors; /* sorted by name (bytewise) */
    size_t n_meta;
    char **meta_keys, **meta_values; /* __metadata__, copies, in file order */
} hearth_st;

/* Maps path and validates it. On failure st is left closed (hearth_st_close
 * is still safe) and err names the file, the tensor and the offset.
 * HEARTH_EIO: cannot read; HEARTH_EINVAL: malformed, or path is not a
 * regular file (refused without blocking); HEARTH_ELIMIT: past one of the
 * limits above; HEARTH_ENOMEM. */
int hearth_st_open(hearth_st *st, const char *path, hearth_err *err);
/* Same over size bytes at data, borrowed; they must outlive st. name is used
 * in messages. For fuzzing, tests and files already in memory. */
int hearth_st_open_memory(hearth_st *st, const void *data, size_t size, const char *name, hearth_err *err);
/* Frees everything and unmaps; safe on a zeroed, half-open or closed st. */
void hearth_st_close(hearth_st *st);

/* The tensor called name, or NULL. O(log n). */
const hearth_st_tensor *hearth_st_find(const hearth_st *st, const char *name);
/* The tensor called name, checked for use: HEARTH_ENOTFOUND when absent,
 * HEARTH_EUNSUPPORTED when its dtype is not F32/F16/BF16, HEARTH_EINVAL when
 * n_dims >= 0 and its shape is not shape[0..n_dims) (pass n_dims -1 to skip
 * the check). err names the file and the tensor. */
int hearth_st_get(const hearth_st *st, const char *name, int n_dims, const int64_t *shape,
                  const hearth_st_tensor **out, hearth_err *err);
/* Value of __metadata__ key, or NULL. */
const char *hearth_st_meta(const hearth_st *st, const char *key);

/* Converts elements [first, first + n) of t (F32, F16 or BF16, any
 * alignment) to f32 in out. HEARTH_EUNSUPPORTED for other dtypes,
 * HEARTH_EINVAL when the range is outside the tensor. Thread-safe. */
int hearth_st_read_f32(const hearth_st_tensor *t, int64_t first, int64_t n, float *out);

/* IEEE half and bfloat16 bit patterns to float, exact. */
float hearth_st_f16_to_f32(uint16_t h);
float hearth_st_bf16_to_f32(uint16_t b);

#endif

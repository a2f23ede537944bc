/* dtype.h: element types of tensors, with GGUF's numbering and block layouts.
 *
 * Quantized types are stored in blocks of `block` elements taking `block_bytes`
 * bytes, exactly as GGUF lays them out, and are used in place from the mmap.
 * The numeric values are GGUF's ggml_type ids so a file's type field maps
 * directly (unknown ids are rejected by the loader, never cast). */
#ifndef HEARTH_ENGINE_DTYPE_H
#define HEARTH_ENGINE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum hearth_dtype {
    HEARTH_F32 = 0,
    HEARTH_F16 = 1,
    HEARTH_Q4_0 = 2,   /* 32 elems: f16 d, 16 bytes of nibbles; x = d * (q - 8) */
    HEARTH_Q8_0 = 8,   /* 32 elems: f16 d, 32 x int8; x = d * q */
    HEARTH_Q4_K = 12,  /* 256 elems: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles */
    HEARTH_Q6_K = 14,  /* 256 elems: 128 bytes ql, 64 bytes qh, 16 x int8 scales, f16 d */
    HEARTH_BF16 = 30,
    HEARTH_DTYPE_COUNT_ = 31, /* bound for tables indexed by dtype */
} hearth_dtype;

typedef struct hearth_dtype_info {
    const char *name;    /* "f32", "q8_0", ...; NULL for ids hearth does not support */
    int64_t block;       /* elements per block (1 for plain types) */
    size_t block_bytes;  /* bytes per block */
} hearth_dtype_info;

/* NULL when id is not a type hearth supports. */
const hearth_dtype_info *hearth_dtype_get(uint32_t id);
/* Parses "f32", "Q8_0", ... (case-insensitive); -1 when unknown. */
int hearth_dtype_from_name(const char *name);
/* Bytes taken by n elements (n must be a multiple of the block size: check with
 * hearth_dtype_row_ok first). Returns false on overflow or a partial block. */
bool hearth_dtype_row_bytes(hearth_dtype t, int64_t n, size_t *out);

#endif

/* gguf_write.h: writing GGUF v3 files (for tests and tools that make
 * deterministic random-weight models, vocab-only files and fuzz seeds).
 *
 * Records are written in the order they were added; the output is a pure
 * function of the calls made (padding is zeros), so the same calls give the
 * same bytes. Not thread-safe; one writer per thread. */
#ifndef HEARTH_MODELS_GGUF_WRITE_H
#define HEARTH_MODELS_GGUF_WRITE_H

#include "base/err.h"
#include "engine/dtype.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_gguf_writer hearth_gguf_writer;

/* NULL when out of memory. */
hearth_gguf_writer *hearth_gguf_writer_new(void);
/* Frees the writer and its copies; NULL is a no-op. Tensor data is borrowed, never freed. */
void hearth_gguf_writer_free(hearth_gguf_writer *w);

/* Adding metadata. Keys, strings and arrays are copied. Each returns 0, or
 * HEARTH_EINVAL (duplicate key, key longer than HEARTH_GGUF_NAME_MAX, bad
 * type) / HEARTH_ENOMEM; the first failure is also remembered and reported,
 * with a message, by hearth_gguf_writer_write, so a caller may add many
 * records and check once at the end. */
int hearth_gguf_writer_add_u32(hearth_gguf_writer *w, const char *key, uint32_t v);
int hearth_gguf_writer_add_i32(hearth_gguf_writer *w, const char *key, int32_t v);
int hearth_gguf_writer_add_f32(hearth_gguf_writer *w, const char *key, float v);
int hearth_gguf_writer_add_bool(hearth_gguf_writer *w, const char *key, bool v);
/* s is NUL-terminated. */
int hearth_gguf_writer_add_str(hearth_gguf_writer *w, const char *key, const char *s);
/* Any scalar type (enum hearth_gguf_type, not STRING or ARRAY); value points at
 * a native value of that type (uint8_t for BOOL). */
int hearth_gguf_writer_add_scalar(hearth_gguf_writer *w, const char *key, uint32_t type, const void *value);
/* n NUL-terminated strings. */
int hearth_gguf_writer_add_arr_str(hearth_gguf_writer *w, const char *key, const char *const *s, size_t n);
int hearth_gguf_writer_add_arr_f32(hearth_gguf_writer *w, const char *key, const float *v, size_t n);
int hearth_gguf_writer_add_arr_i32(hearth_gguf_writer *w, const char *key, const int32_t *v, size_t n);

/* Adds a tensor of n_dims (0..4) dims ne[] (ne[0] innermost). data is borrowed
 * until the writer is freed; nbytes must equal the size type and ne imply.
 * HEARTH_EINVAL on a duplicate name, bad shape or size mismatch. */
int hearth_gguf_writer_add_tensor(hearth_gguf_writer *w, const char *name, hearth_dtype type, int n_dims,
                                  const int64_t ne[], const void *data, size_t nbytes);

/* Writes a GGUF v3 file. alignment: a power of two, 0 meaning the default 32;
 * any other value is recorded as general.alignment (unless already added
 * with the same value). Reports an earlier add failure first. */
int hearth_gguf_writer_write(hearth_gguf_writer *w, const char *path, uint32_t alignment, hearth_err *err);
/* The same bytes into a malloc'd buffer (*out, *size), for in-memory tests and fuzz seeds. */
int hearth_gguf_writer_serialize(hearth_gguf_writer *w, uint32_t alignment, uint8_t **out, size_t *size,
                                 hearth_err *err);

#endif

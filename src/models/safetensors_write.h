/* safetensors_write.h: writes safetensors files, for tools and tests that
 * make models (random-weight BERTs, corrupt-file fixtures).
 *
 * The file follows the reference writer's layout, so the reference reader
 * and hearth_st_open both accept it: the header's keys are sorted
 * ("__metadata__" first, then tensor names bytewise), the header is padded
 * with spaces so the data section starts 8-byte aligned, and the data is
 * packed with no gaps, tensors ordered by element size (largest first) then
 * name, so every tensor starts aligned to its own element size. Tensors are
 * not padded to 8 bytes each: the format allows no holes between them. */
#ifndef HEARTH_MODELS_SAFETENSORS_WRITE_H
#define HEARTH_MODELS_SAFETENSORS_WRITE_H

#include "base/err.h"
#include "engine/dtype.h"
#include "models/safetensors.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_st_writer_entry {
    char *name;          /* owned copy */
    hearth_dtype type;
    int n_dims;
    int64_t shape[HEARTH_ST_MAX_DIMS];
    const void *data;    /* borrowed until the write */
    size_t nbytes;
} hearth_st_writer_entry;

typedef struct hearth_st_writer {
    size_t n, cap;
    hearth_st_writer_entry *e;
    size_t n_meta;
    char **meta;         /* key, value, key, value, ...; owned copies */
} hearth_st_writer;

/* Caller-owned storage; allocates nothing yet. */
void hearth_st_writer_init(hearth_st_writer *w);
/* Frees the copies (never the borrowed data); safe after a failed add. */
void hearth_st_writer_deinit(hearth_st_writer *w);

/* Adds a tensor: name is copied, data (elements * size of type bytes, shape
 * outermost first) is borrowed until write or serialize returns. type must
 * be F32, F16 or BF16 (HEARTH_EUNSUPPORTED otherwise). HEARTH_EINVAL for a
 * bad shape, a NULL data with a non-empty shape, or the reserved name
 * "__metadata__"; duplicate names are caught at write. */
int hearth_st_writer_add(hearth_st_writer *w, const char *name, hearth_dtype type, int n_dims,
                         const int64_t *shape, const void *data, hearth_err *err);
/* Adds a __metadata__ string pair (both copied). */
int hearth_st_writer_add_meta(hearth_st_writer *w, const char *key, const char *value, hearth_err *err);

/* Writes the file to path (through path + ".tmp" and a rename, so a reader
 * never sees half a file). HEARTH_EINVAL for duplicate names, HEARTH_EIO. */
int hearth_st_writer_write(const hearth_st_writer *w, const char *path, hearth_err *err);
/* The same bytes in a malloc'd buffer (*out, *len), for tests. */
int hearth_st_writer_serialize(const hearth_st_writer *w, uint8_t **out, size_t *len, hearth_err *err);

#endif

/* file.h: read-only file mappings and whole-file reads.
 *
 * Model weights are mmapped and owned by the model; tensors are views into
 * the mapping, so a mapping lives as long as the model that opened it. */
#ifndef HEARTH_BASE_FILE_H
#define HEARTH_BASE_FILE_H

#include "err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_mmap {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
} hearth_mmap;

/* Maps path read-only. On failure returns a negative status and names the path in err:
 * HEARTH_EINVAL, "PATH: not a regular file: a FIFO" (a directory, a character
 * device, ...) when path is anything but a regular file, found without
 * blocking and before any byte is read; HEARTH_EIO when an OS call fails. */
int hearth_mmap_open(hearth_mmap *m, const char *path, hearth_err *err);
/* Tells the kernel that bytes [p, p + n) of a mapping from hearth_mmap_open
 * are not needed now (the whole pages inside the range): they leave the
 * process's resident memory. The mapping is read-only and private, so a
 * later read still sees the file's bytes (read again from the page cache). */
void hearth_mmap_release(const void *p, size_t n);
/* Unmaps; safe on a zeroed or already-closed mapping. */
void hearth_mmap_close(hearth_mmap *m);

/* Creates directory path and its missing parents (mode 0755); an existing
 * directory is fine. Errors name the component that could not be made. */
int hearth_mkdirs(const char *path, hearth_err *err);

/* Reads a whole file (at most max bytes) into a malloc'd, NUL-terminated
 * buffer, *out, owned by the caller; *out_len (may be NULL) gets its length.
 * Refuses a path that is not a regular file as hearth_mmap_open does
 * (HEARTH_EINVAL), a larger file with HEARTH_ELIMIT; HEARTH_EIO when an OS
 * call fails, HEARTH_ENOMEM. */
int hearth_file_read(const char *path, size_t max, char **out, size_t *out_len, hearth_err *err);

/* Writes the n_parts byte ranges parts[i] (lens[i] bytes each), in order, as
 * the whole of path, atomically: into "<path>.tmp.<pid>" beside it, fsync'd,
 * then renamed over path, so a reader sees the old file or the new one,
 * never half of one (the temporary is removed on failure). HEARTH_EIO
 * naming the path and the call that failed. */
int hearth_file_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n_parts, hearth_err *err);

#endif

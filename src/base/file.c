/* file.c: mmap for weights (the page cache is shared between workers, and
 * nothing is copied), read(2) in a loop for small text files. EINTR is
 * retried at the syscall.
 *
 * Both go through open_regular, the one place a model's files are opened: a
 * path that is not a regular file (a FIFO, a directory, /dev/zero, a socket)
 * is refused by name and kind before anything is read or mapped. It opens
 * with O_NONBLOCK because open(2) of a FIFO blocks until a writer comes,
 * which hung a server at "loading" for good; the flag is cleared once fstat
 * says the file is regular (where it has no effect anyway). Rejected: stat
 * before open (a race: the path can be swapped between the two) and O_PATH
 * (Linux only, and a second open through /proc to read). */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a non-regular file is, for messages. */
static const char *file_kind(mode_t mode)
{
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a file of an unknown kind";
}

/* Opens path for reading, without blocking, and only if it is a regular
 * file: *fd_out gets the descriptor (blocking again) and *st its status. */
static int open_regular(const char *path, int *fd_out, struct stat *st, hearth_err *err)
{
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int e = errno;
        /* open(2) of a Unix socket fails with ENXIO: say what it is */
        struct stat sb;
        if (e == ENXIO && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
            return hearth_err_set(err, HEARTH_EINVAL, "%s: not a regular file: %s", path, file_kind(sb.st_mode));
        return hearth_err_sys(err, e, "%s: cannot open", path);
    }
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return hearth_err_sys(err, e, "%s: cannot stat", path);
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return hearth_err_set(err, HEARTH_EINVAL, "%s: not a regular file: %s", path, file_kind(st->st_mode));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return hearth_err_sys(err, e, "%s: cannot clear O_NONBLOCK", path);
    }
    *fd_out = fd;
    return HEARTH_OK;
}

int hearth_mmap_open(hearth_mmap *m, const char *path, hearth_err *err)
{
    m->data = NULL;
    m->size = 0;
    int fd;
    struct stat st;
    int rc = open_regular(path, &fd, &st, err);
    if (rc)
        return rc;
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return hearth_err_sys(err, e, "%s: cannot mmap %lld bytes", path, (long long)st.st_size);
        }
        m->data = p;
        m->size = (size_t)st.st_size;
    }
    close(fd);
    return HEARTH_OK;
}

void hearth_mmap_release(const void *p, size_t n)
{
    long page = sysconf(_SC_PAGESIZE);
    if (!p || n == 0 || page <= 0)
        return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t b = ((uintptr_t)p + n) / (uintptr_t)page * (uintptr_t)page;
    if (b > a)
        (void)madvise((void *)a, b - a, MADV_DONTNEED); /* advice: failure changes nothing */
}

void hearth_mmap_close(hearth_mmap *m)
{
    if (m->data)
        munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

int hearth_file_read(const char *path, size_t max, char **out, size_t *out_len, hearth_err *err)
{
    *out = NULL;
    if (out_len)
        *out_len = 0;
    int fd;
    struct stat st;
    int rc = open_regular(path, &fd, &st, err);
    if (rc)
        return rc;
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return hearth_err_set(err, HEARTH_ELIMIT, "%s: larger than %zu bytes", path, max);
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > max) {
                free(buf);
                close(fd);
                return hearth_err_set(err, HEARTH_ELIMIT, "%s: larger than %zu bytes", path, max);
            }
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                close(fd);
                return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory", path);
            }
            buf = p;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return hearth_err_sys(err, e, "%s: read failed", path);
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len > max) {
        free(buf);
        return hearth_err_set(err, HEARTH_ELIMIT, "%s: larger than %zu bytes", path, max);
    }
    buf[len] = 0;
    *out = buf;
    if (out_len)
        *out_len = len;
    return HEARTH_OK;
}

int hearth_mkdirs(const char *path, hearth_err *err)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof tmp)
        return hearth_err_set(err, HEARTH_EINVAL, "directory path of %zu bytes", n);
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p)
            continue;
        char c = *p;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return hearth_err_sys(err, errno, "%s: cannot create", tmp);
        if (!c)
            break;
        *p = c;
    }
    return HEARTH_OK;
}

int hearth_file_write_atomic(const char *path, const void *const *parts, const size_t *lens, int n_parts, hearth_err *err)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: path too long", path);
    int fd;
    do
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return hearth_err_sys(err, errno, "%s: cannot create", tmp);
    const char *what = NULL;
    int sys = 0;
    for (int i = 0; i < n_parts && !what; i++) {
        const char *p = parts[i];
        size_t left = lens[i];
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                what = "write";
                sys = w < 0 ? errno : ENOSPC;
                break;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (!what && fsync(fd) != 0) {
        what = "fsync";
        sys = errno;
    }
    if (close(fd) != 0 && !what) {
        what = "close";
        sys = errno;
    }
    if (!what && rename(tmp, path) != 0) {
        what = "rename";
        sys = errno;
    }
    if (what) {
        unlink(tmp);
        return hearth_err_sys(err, sys, "%s: %s failed", path, what);
    }
    return HEARTH_OK;
}

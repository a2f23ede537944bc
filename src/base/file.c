/* file.c: mmap for weights (the page cache is shared between workers, and
 * nothing is copied), read(2) in a loop for small text files. EINTR is
 * retried at the syscall. */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int hearth_mmap_open(hearth_mmap *m, const char *path, hearth_err *err)
{
    m->data = NULL;
    m->size = 0;
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return hearth_err_sys(err, errno, "%s: cannot open", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return hearth_err_sys(err, e, "%s: cannot stat", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return hearth_err_set(err, HEARTH_EINVAL, "%s: not a regular file", path);
    }
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
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return hearth_err_sys(err, errno, "%s: cannot open", path);
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

/* Unit tests for src/base: bounded buffers, errors, files, cpu detection. */
#include "harness.h"

#include "base/buf.h"
#include "base/hw.h"
#include "base/err.h"
#include "base/file.h"
#include "base/random.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void buf_grows_and_stops_at_max(void)
{
    hearth_buf b;
    hearth_buf_init(&b, 10);
    CHECK_EQ_INT(hearth_buf_appends(&b, "hello"), HEARTH_OK);
    CHECK_EQ_INT(hearth_buf_appends(&b, "world"), HEARTH_OK);
    CHECK_EQ_INT(b.len, 10);
    CHECK_EQ_STR(b.data, "helloworld");
    CHECK_EQ_INT(hearth_buf_appends(&b, "!"), HEARTH_ELIMIT);
    CHECK_EQ_INT(b.len, 10);
    hearth_buf_consume(&b, 5);
    CHECK_EQ_STR(b.data, "world");
    CHECK_EQ_INT(hearth_buf_printf(&b, "%d", 12345), HEARTH_OK);
    CHECK_EQ_STR(b.data, "world12345");
    CHECK_EQ_INT(hearth_buf_printf(&b, "x"), HEARTH_ELIMIT);
    hearth_buf_deinit(&b);
}

static void err_messages_name_things(void)
{
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_err_set(&e, HEARTH_EINVAL, "tensor '%s': %d dims > 4", "a", 5), HEARTH_EINVAL);
    hearth_err_prefix(&e, "gguf %s", "x.gguf");
    CHECK_EQ_STR(e.msg, "gguf x.gguf: tensor 'a': 5 dims > 4");
    CHECK_EQ_INT(hearth_err_set(NULL, HEARTH_EIO, "ignored"), HEARTH_EIO);
}

static void file_errors_name_the_path(void)
{
    hearth_err e = {0};
    hearth_mmap m;
    CHECK(hearth_mmap_open(&m, "/nonexistent/x.bin", &e) == HEARTH_EIO);
    CHECK(strstr(e.msg, "/nonexistent/x.bin") != NULL);
    hearth_mmap_close(&m);
}

static void on_alarm(int sig)
{
    static const char msg[] = "not ok - opening a non-regular file blocked (alarm)\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(1);
}

/* Both openers refuse what is not a regular file, by path and kind, without
 * blocking (open(2) of a FIFO with no writer blocks; the alarm makes that a
 * failure, not a hang). */
static void non_regular_files_are_refused_at_once(void)
{
    char dir[] = "/tmp/hearth_test_kindsXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char fifo[128], sock[128];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(sock, sizeof sock, "%s/sock", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    CHECK(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
    const struct {
        const char *path, *kind;
    } cases[] = {
        {fifo, "a FIFO"},
        {dir, "a directory"},
        {"/dev/zero", "a character device"},
        {sock, "a socket"},
    };
    signal(SIGALRM, on_alarm);
    alarm(5);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "not a regular file: %s", cases[i].kind);
        hearth_err e = {0};
        hearth_mmap m;
        CHECK_EQ_INT(hearth_mmap_open(&m, cases[i].path, &e), HEARTH_EINVAL);
        CHECK_MSG(strstr(e.msg, cases[i].path) && strstr(e.msg, want), "%s", e.msg);
        CHECK(m.data == NULL && m.size == 0);
        e = (hearth_err){0};
        char *text = (char *)1;
        size_t len = 1;
        CHECK_EQ_INT(hearth_file_read(cases[i].path, 1 << 20, &text, &len, &e), HEARTH_EINVAL);
        CHECK_MSG(strstr(e.msg, cases[i].path) && strstr(e.msg, want), "%s", e.msg);
        CHECK(text == NULL && len == 0);
    }
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    if (s >= 0)
        close(s);
    unlink(sock);
    unlink(fifo);
    rmdir(dir);
}

/* A regular file still reads whole, and one past the limit is refused. */
static void file_read_reads_and_limits(void)
{
    char path[] = "/tmp/hearth_test_readXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    char data[5000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 26);
    CHECK_EQ_INT(write(fd, data, sizeof data), (long long)sizeof data);
    close(fd);
    hearth_err e = {0};
    char *text = NULL;
    size_t len = 0;
    CHECK_MSG(hearth_file_read(path, sizeof data, &text, &len, &e) == 0, "%s", e.msg);
    CHECK(text && len == sizeof data && memcmp(text, data, len) == 0 && text[len] == 0);
    free(text);
    CHECK_EQ_INT(hearth_file_read(path, sizeof data - 1, &text, &len, &e), HEARTH_ELIMIT);
    CHECK(strstr(e.msg, path) != NULL);
    unlink(path);
}

/* Releasing part of a mapping (whole pages inside the range, from the middle
 * of one page to the middle of another) leaves every byte readable with the
 * file's value: the pages come back from the page cache. */
static void released_mapping_still_reads_the_file(void)
{
    char path[] = "/tmp/hearth_test_mmapXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    enum { SIZE = 5 * 4096 + 100 };
    static uint8_t bytes[SIZE];
    for (int i = 0; i < SIZE; i++)
        bytes[i] = (uint8_t)(i * 7 + i / 4096);
    CHECK(write(fd, bytes, SIZE) == SIZE);
    close(fd);
    hearth_mmap m;
    hearth_err e = {0};
    CHECK(hearth_mmap_open(&m, path, &e) == 0);
    unlink(path);
    CHECK(m.size == SIZE && memcmp(m.data, bytes, SIZE) == 0);
    hearth_mmap_release(m.data + 1000, 3 * 4096);
    hearth_mmap_release(m.data, m.size);
    hearth_mmap_release(NULL, 10);
    hearth_mmap_release(m.data + 5, 0);
    CHECK(memcmp(m.data, bytes, SIZE) == 0);
    hearth_mmap_close(&m);
}

static void cpu_detects_something(void)
{
    const hearth_hw_info *c = hearth_hw();
    CHECK(c->logical_cores >= 1);
    CHECK(c->physical_cores >= 1 && c->physical_cores <= c->logical_cores);
    char s[256];
    hearth_hw_features_string(c, s, sizeof s);
#if defined(__x86_64__)
    CHECK(c->sse42); /* every x86-64 this runs on has it */
#endif
    CHECK(hearth_mem_total() > 0);
}

static void mkdirs_makes_parents_and_names_failures(void)
{
    char root[] = "/tmp/hearth-mkdirs-XXXXXX";
    CHECK(mkdtemp(root) != NULL);
    char deep[256];
    snprintf(deep, sizeof deep, "%s/a/b/c", root);
    hearth_err e = {0};
    CHECK_EQ_INT(hearth_mkdirs(deep, &e), HEARTH_OK);
    struct stat sb;
    CHECK(stat(deep, &sb) == 0 && S_ISDIR(sb.st_mode));
    CHECK_EQ_INT(hearth_mkdirs(deep, &e), HEARTH_OK); /* existing: fine */
    char file[256], under[300];
    snprintf(file, sizeof file, "%s/f", root);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f)
        fclose(f);
    snprintf(under, sizeof under, "%s/x", file);
    CHECK(hearth_mkdirs(under, &e) == HEARTH_EIO);
    CHECK(strstr(e.msg, file) != NULL); /* names the component that failed */
    unlink(file);
    for (int i = 3; i >= 0; i--) {
        snprintf(deep, sizeof deep, "%s%s", root, i == 3 ? "/a/b/c" : i == 2 ? "/a/b" : i == 1 ? "/a" : "");
        rmdir(deep);
    }
}

static void random_bits_differ(void)
{
    uint64_t a = hearth_random_u64(), b = hearth_random_u64(), c = hearth_random_u64();
    CHECK(a != b && b != c && a != c); /* a repeat in 64 bits means the source is broken */
}

int main(void)
{
    RUN(buf_grows_and_stops_at_max);
    RUN(err_messages_name_things);
    RUN(file_errors_name_the_path);
    RUN(non_regular_files_are_refused_at_once);
    RUN(file_read_reads_and_limits);
    RUN(released_mapping_still_reads_the_file);
    RUN(cpu_detects_something);
    RUN(mkdirs_makes_parents_and_names_failures);
    RUN(random_bits_differ);
    TEST_EXIT();
}

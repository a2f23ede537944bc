/* log.c: formats a whole line into a stack buffer and writes it with one
 * write(2), so lines from different threads and worker processes never
 * interleave mid-line (stdio's per-FILE lock would not cover processes). */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static _Atomic int g_level = HEARTH_LOG_INFO;
static char g_tag[16] = "";

void hearth_log_set_level(enum hearth_log_level level) { atomic_store(&g_level, (int)level); }
enum hearth_log_level hearth_log_get_level(void) { return (enum hearth_log_level)atomic_load(&g_level); }

int hearth_log_parse_level(const char *name)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i < 5; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

void hearth_log_set_tag(const char *tag) { snprintf(g_tag, sizeof g_tag, "%s", tag ? tag : ""); }

void hearth_log(enum hearth_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info ", "warn ", "error"};
    if ((int)level < atomic_load(&g_level) || level >= HEARTH_LOG_OFF)
        return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s%s%s", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     names[level], g_tag[0] ? "[" : "", g_tag, g_tag[0] ? "] " : "");
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere to report a failed log write */
}

/* log.h: leveled logging to stderr, one line per call, safe from any thread.
 *
 * Lines look like `2026-11-29T09:50:00.123Z info  [w1] message`. The level and
 * a worker tag are process-wide and set once at start-up. */
#ifndef HEARTH_BASE_LOG_H
#define HEARTH_BASE_LOG_H

enum hearth_log_level { HEARTH_LOG_DEBUG, HEARTH_LOG_INFO, HEARTH_LOG_WARN, HEARTH_LOG_ERROR, HEARTH_LOG_OFF };

void hearth_log_set_level(enum hearth_log_level level);
enum hearth_log_level hearth_log_get_level(void);
/* Parses "debug|info|warn|error|off"; returns -1 on an unknown name. */
int hearth_log_parse_level(const char *name);
/* A short tag printed on every line (e.g. "w2" for worker 2); copied. */
void hearth_log_set_tag(const char *tag);

void hearth_log(enum hearth_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define HLOG_DEBUG(...) do { if (hearth_log_get_level() <= HEARTH_LOG_DEBUG) hearth_log(HEARTH_LOG_DEBUG, __VA_ARGS__); } while (0)
#define HLOG_INFO(...) hearth_log(HEARTH_LOG_INFO, __VA_ARGS__)
#define HLOG_WARN(...) hearth_log(HEARTH_LOG_WARN, __VA_ARGS__)
#define HLOG_ERROR(...) hearth_log(HEARTH_LOG_ERROR, __VA_ARGS__)

#endif

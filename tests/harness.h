/* harness.h: the unit-test harness, header-only.
 *
 * A test binary calls RUN(fn) for each case; each case prints one TAP-style
 * line, "ok - name" or "not ok - name", which tests/run.sh counts. CHECK
 * records a failure and carries on so one run shows every broken check. */
#ifndef HEARTH_TEST_HARNESS_H
#define HEARTH_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hearth_test_case_failed;
static int hearth_test_total_failed;
static int hearth_test_total_run;

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "  %s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
            hearth_test_case_failed = 1;                                                     \
        }                                                                                    \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                 \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "  %s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            hearth_test_case_failed = 1;                                                     \
        }                                                                                    \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                   \
    do {                                                                                     \
        long long _a = (long long)(a), _b = (long long)(b);                                  \
        if (_a != _b) {                                                                      \
            fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, \
                    #a, #b, _a, _b);                                                         \
            hearth_test_case_failed = 1;                                                     \
        }                                                                                    \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                   \
    do {                                                                                     \
        const char *_a = (a), *_b = (b);                                                     \
        if (!_a || !_b || strcmp(_a, _b) != 0) {                                             \
            fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__,      \
                    __LINE__, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)");               \
            hearth_test_case_failed = 1;                                                     \
        }                                                                                    \
    } while (0)

/* |a - b| <= tol, with the tolerance written at the call site. */
#define CHECK_NEAR(a, b, tol)                                                                \
    do {                                                                                     \
        double _a = (double)(a), _b = (double)(b);                                           \
        if (!(fabs(_a - _b) <= (tol))) {                                                     \
            fprintf(stderr, "  %s:%d: |%s - %s| <= %g failed: %.9g vs %.9g\n", __FILE__,    \
                    __LINE__, #a, #b, (double)(tol), _a, _b);                                \
            hearth_test_case_failed = 1;                                                     \
        }                                                                                    \
    } while (0)

static inline void hearth_test_run(const char *name, void (*fn)(void))
{
    hearth_test_case_failed = 0;
    fn();
    hearth_test_total_run++;
    if (hearth_test_case_failed)
        hearth_test_total_failed++;
    printf("%s - %s\n", hearth_test_case_failed ? "not ok" : "ok", name);
    fflush(stdout);
}

#define RUN(fn) hearth_test_run(#fn, fn)
/* End of main(): exit status says whether every case passed. */
#define TEST_EXIT() return hearth_test_total_failed ? 1 : 0

/* The read-only data folder shared with the project (../shared beside the
 * checkout, or $HEARTH_SHARED). Fails the case, naming the path, when absent. */
static inline const char *hearth_test_shared_path(char *out, size_t n, const char *rel)
{
    const char *root = getenv("HEARTH_SHARED");
    snprintf(out, n, "%s/%s", root ? root : "../shared", rel);
    FILE *f = fopen(out, "rb");
    if (!f) {
        fprintf(stderr, "  missing test data: %s (set HEARTH_SHARED to the shared/ folder)\n", out);
        hearth_test_case_failed = 1;
        return NULL;
    }
    fclose(f);
    return out;
}

#endif

/* json_schema_range.c: an integer schema's minimum / maximum /
 * exclusiveMinimum / exclusiveMaximum as one GBNF rule body (llama.cpp's
 * _build_min_max_int, by another route), for json_schema_gbnf.c's walk.
 *
 * llama.cpp's integer rule writes at most 16 digits, so every range is a
 * bounded one: an absent bound is -(10^16 - 1) or 10^16 - 1. A range of
 * non-negative integers is split by digit count; a count wholly inside is
 * "[1-9] [0-9]{k}", the partial ones (at most the shortest and the longest)
 * are written digit by digit. The grammar's sentences are the canonical
 * integers in the range: no leading zeros and no "-0" (llama.cpp's admits
 * "-05" under "maximum": -5, which is not JSON). The digit recursion is at
 * most 16 deep.
 *
 * Its own file because it is its own problem: decimal digit strings, and
 * nothing of the schema walk but the four keywords. test_json_schema_gbnf
 * checks every range between edge bounds (powers of ten, one either side,
 * negatives) on every integer around them. */
#include "json_schema_int.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define INT_DIGITS 16
#define INT_BOUND 9999999999999999LL /* 16 nines */

static int ndigits(int64_t v)
{
    int n = 1;
    for (; v >= 10; v /= 10)
        n++;
    return n;
}

static int digit_class(hearth_buf *b, char lo, char hi)
{
    return lo == hi ? hearth_buf_printf(b, "[%c]", lo) : hearth_buf_printf(b, "[%c-%c]", lo, hi);
}

static int any_digits(hearth_buf *b, int n)
{
    return n == 1 ? hearth_buf_appends(b, "[0-9]") : hearth_buf_printf(b, "[0-9]{%d}", n);
}

/* The n-digit strings from lo to hi (lo <= hi, each n digits; inner digits,
 * so 0 may lead). Recursion depth at most n. */
static int same_length(hearth_buf *b, const char *lo, const char *hi, int n)
{
    int i = 0, rc = HEARTH_OK;
    while (i < n && lo[i] == hi[i])
        i++;
    if (i > 0)
        rc = hearth_gbnf_literal(b, lo, (size_t)i);
    if (rc || i == n)
        return rc;
    if (i > 0 && (rc = hearth_buf_appends(b, " ")))
        return rc;
    int r = n - i - 1;
    if (r == 0)
        return digit_class(b, lo[i], hi[i]);
    char zeros[INT_DIGITS + 1], nines[INT_DIGITS + 1];
    memset(zeros, '0', (size_t)r);
    memset(nines, '9', (size_t)r);
    zeros[r] = nines[r] = 0;
    bool lo_zeros = !strcmp(lo + i + 1, zeros), hi_nines = !strcmp(hi + i + 1, nines);
    char first = lo_zeros ? lo[i] : (char)(lo[i] + 1), last = hi_nines ? hi[i] : (char)(hi[i] - 1);
    const char *sep = "";
    rc = hearth_buf_appends(b, "(");
    if (!rc && !lo_zeros) { /* lo's first digit, then at least the rest of lo */
        rc = hearth_buf_printf(b, "[%c] ", lo[i]);
        if (!rc)
            rc = same_length(b, lo + i + 1, nines, r);
        sep = " | ";
    }
    if (!rc && first <= last) { /* the first digits strictly between: any rest */
        rc = hearth_buf_appends(b, sep);
        if (!rc)
            rc = digit_class(b, first, last);
        if (!rc)
            rc = hearth_buf_appends(b, " ");
        if (!rc)
            rc = any_digits(b, r);
        sep = " | ";
    }
    if (!rc && !hi_nines) { /* hi's first digit, then at most the rest of hi */
        rc = hearth_buf_printf(b, "%s[%c] ", sep, hi[i]);
        if (!rc)
            rc = same_length(b, zeros, hi + i + 1, r);
    }
    return rc ? rc : hearth_buf_appends(b, ")");
}

/* The canonical decimals of lo..hi (0 <= lo <= hi <= INT_BOUND), as
 * alternatives. */
static int digits_range(hearth_buf *b, int64_t lo, int64_t hi)
{
    int rc = HEARTH_OK, full_from = 0, full_to = 0;
    const char *sep = "";
    int64_t first = 0, last = 9;
    for (int len = 1; len <= ndigits(hi) && !rc; len++, first = last + 1, last = last * 10 + 9) {
        int64_t a = lo > first ? lo : first, z = hi < last ? hi : last;
        if (a > z)
            continue;
        if (z == last && (a == first || (len == 1 && a <= 1))) {
            /* every len-digit number from 1.. (0 apart): one run of lengths */
            if (len == 1 && a == 0) {
                rc = hearth_buf_appends(b, "[0]");
                sep = " | ";
            }
            full_from = full_from ? full_from : len;
            full_to = len;
            continue;
        }
        char from[INT_DIGITS + 1], to[INT_DIGITS + 1];
        snprintf(from, sizeof from, "%lld", (long long)a);
        snprintf(to, sizeof to, "%lld", (long long)z);
        rc = hearth_buf_appends(b, sep);
        if (!rc)
            rc = same_length(b, from, to, len);
        sep = " | ";
    }
    if (!rc && full_from) {
        rc = hearth_buf_printf(b, "%s[1-9]", sep);
        if (!rc && full_to > 1)
            rc = full_from == full_to ? hearth_buf_printf(b, " [0-9]{%d}", full_to - 1)
                                      : hearth_buf_printf(b, " [0-9]{%d,%d}", full_from - 1, full_to - 1);
    }
    return rc;
}

/* The integers lo..hi (-INT_BOUND <= lo <= hi <= INT_BOUND), as
 * alternatives. */
static int int_range(hearth_buf *b, int64_t lo, int64_t hi)
{
    if (lo >= 0)
        return digits_range(b, lo, hi);
    int rc = hearth_buf_appends(b, "\"-\" (");
    if (!rc)
        rc = digits_range(b, hi < 0 ? -hi : 1, -lo);
    if (!rc)
        rc = hearth_buf_appends(b, ")");
    if (!rc && hi >= 0)
        rc = hearth_buf_appends(b, " | ");
    if (!rc && hi >= 0)
        rc = digits_range(b, 0, hi);
    return rc;
}

/* The integer bounds of s, clamped to what the rule can write. minimum /
 * maximum, exclusiveMinimum / exclusiveMaximum as numbers (JSON schema
 * draft 6 on), or as booleans that make minimum / maximum exclusive (draft
 * 4). Where several apply the tightest wins (llama.cpp takes minimum over
 * exclusiveMinimum); fractions round inward (llama.cpp truncates, so its
 * "minimum": 1.5 admits 1). */
static int int_bounds(hearth_err *err, const cJSON *s, int64_t *lo, int64_t *hi)
{
    static const char *const KEYS[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    const cJSON *v[4];
    for (int k = 0; k < 4; k++) {
        v[k] = cJSON_GetObjectItemCaseSensitive(s, KEYS[k]);
        if (v[k] && !cJSON_IsNumber(v[k]) && !(k % 2 && cJSON_IsBool(v[k]))) {
            char what[64];
            snprintf(what, sizeof what, "'%s' that is not a number", KEYS[k]);
            return hearth_json_schema_refuse(err, s, what);
        }
    }
    double l = -HUGE_VAL, h = HUGE_VAL;
    if (v[0]) /* minimum, exclusive under draft 4's "exclusiveMinimum": true */
        l = fmax(l, cJSON_IsTrue(v[1]) ? floor(v[0]->valuedouble) + 1 : ceil(v[0]->valuedouble));
    if (v[1] && cJSON_IsNumber(v[1]))
        l = fmax(l, floor(v[1]->valuedouble) + 1);
    if (v[2])
        h = fmin(h, cJSON_IsTrue(v[3]) ? ceil(v[2]->valuedouble) - 1 : floor(v[2]->valuedouble));
    if (v[3] && cJSON_IsNumber(v[3]))
        h = fmin(h, ceil(v[3]->valuedouble) - 1);
    /* 1e16 is exact as a double, INT_BOUND is not */
    *lo = l < -1e16 ? -INT_BOUND : l > 1e16 ? INT_BOUND + 1 : (int64_t)l;
    *hi = h > 1e16 ? INT_BOUND : h < -1e16 ? -INT_BOUND - 1 : (int64_t)h;
    *lo = *lo < -INT_BOUND ? -INT_BOUND : *lo;
    *hi = *hi > INT_BOUND ? INT_BOUND : *hi;
    if (*lo > *hi)
        return hearth_json_schema_refuse(err, s, "minimum / maximum bounds that leave no integer of at most 16 digits");
    return HEARTH_OK;
}

int hearth_json_schema_int_rule(const cJSON *s, hearth_buf *body, hearth_err *err)
{
    int64_t lo = 0, hi = 0;
    int rc = int_bounds(err, s, &lo, &hi);
    if (!rc)
        rc = hearth_buf_appends(body, "(");
    if (!rc)
        rc = int_range(body, lo, hi);
    if (!rc)
        rc = hearth_buf_appends(body, ") space");
    return rc;
}

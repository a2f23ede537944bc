/* json_schema_gbnf.c: JSON schema to GBNF (see json_schema_gbnf.h).
 *
 * One walk over the schema, as llama.cpp's json-schema-to-grammar does it
 * (the same order of tests on each node, the same rules for strings,
 * numbers, objects and repetitions, the same optional whitespace), so a
 * schema admits the same documents, and a seeded request samples the same
 * text, under hearth as under llama-server. Each node becomes one rule
 * named r<N>; the JSON primitives (string, number, value, ...) are written
 * once each, under llama.cpp's names, when first needed. A $ref gets its
 * rule name before its target is walked, so a recursive schema (a tree
 * whose children are trees) becomes a recursive grammar rather than an
 * endless walk.
 *
 * Covered as llama.cpp covers them, each in a section below:
 *   - bounds on integers (minimum, maximum, the exclusive ones): a rule
 *     written digit by digit (int_range). Bounds on "number" are not
 *     checked, as llama.cpp does not check them;
 *   - "allOf": one object of the components' properties (allof_rule);
 *   - with additionalProperties, extra keys that are never a declared name
 *     (not_names_rule);
 *   - "pattern": llama.cpp's regular expression subset and somewhat more
 *     (pattern_rule), matched on the string as JSON writes it.
 * Where llama.cpp's converter writes a grammar that is not what the schema
 * says (leading zeros under a negative maximum, a pattern's '"' written
 * raw, an allOf property wanted twice) or loops or crashes (an unescaped
 * ']' in a pattern, a $ref naming itself under allOf), hearth writes what
 * the schema says or refuses; each section's comment names the cases.
 *
 * What is left out is refused with the part named (a client learns its
 * output would not be checked): regular expression features past the
 * subset (lookarounds, back-references, word boundaries, \p{...}), an
 * unanchored pattern (llama.cpp refuses it too), and an allOf whose
 * components declare one name twice. Not checked, as in llama.cpp: formats
 * other than uuid (plain strings; llama.cpp's date, time and date-time are
 * not done), minLength / maxLength beside a pattern, bounds on "number",
 * and what an allOf component says besides its properties.
 *
 * Every walk is bounded: schema nesting, $ref chains and pattern groups by
 * MAX_DEPTH, the integer digit recursion by 16 digits, the key trie is
 * written one rule per node with no recursion, and every buffer by
 * BODY_MAX or out's own bound.
 *
 * Rejected: building the grammar as parsed rules directly (the text is
 * what llama-server logs and what a client can compare, and the GBNF
 * parser then checks the converter's output like any client's grammar). */
#include "json_schema_gbnf.h"

#include "text/unicode.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64, MAX_REFS = 256, NAME_MAX_LEN = 32 };
#define BODY_MAX ((size_t)4 << 20)

enum prim { P_SPACE, P_BOOLEAN, P_DECIMAL, P_INTEGRAL, P_NUMBER, P_INTEGER, P_VALUE, P_OBJECT, P_ARRAY, P_UUID, P_CHAR,
            P_STRING, P_NULL, P_COUNT };

static const struct {
    const char *name, *body;
    unsigned deps;
} PRIMS[P_COUNT] = {
    [P_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    [P_BOOLEAN] = {"boolean", "(\"true\" | \"false\") space", 1u << P_SPACE},
    [P_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [P_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [P_NUMBER] = {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
                  1u << P_INTEGRAL | 1u << P_DECIMAL | 1u << P_SPACE},
    [P_INTEGER] = {"integer", "(\"-\"? integral-part) space", 1u << P_INTEGRAL | 1u << P_SPACE},
    [P_VALUE] = {"value", "object | array | string | number | boolean | null",
                 1u << P_OBJECT | 1u << P_ARRAY | 1u << P_STRING | 1u << P_NUMBER | 1u << P_BOOLEAN | 1u << P_NULL},
    [P_OBJECT] = {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
                  1u << P_STRING | 1u << P_VALUE | 1u << P_SPACE},
    [P_ARRAY] = {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", 1u << P_VALUE | 1u << P_SPACE},
    [P_UUID] = {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                        "[0-9a-fA-F]{12} \"\\\"\" space",
                1u << P_SPACE},
    [P_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", 0},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\" space", 1u << P_CHAR | 1u << P_SPACE},
    [P_NULL] = {"null", "\"null\" space", 1u << P_SPACE},
};

typedef struct conv {
    const cJSON *root;
    hearth_buf *out;
    unsigned have;            /* primitives written */
    int n_rules;
    const char *ref[MAX_REFS];
    int ref_rule[MAX_REFS];
    int n_refs;
    int depth;
    hearth_err *err;
} conv;

typedef char rname[NAME_MAX_LEN];

static int need(conv *c, enum prim p)
{
    if (c->have & (1u << p))
        return HEARTH_OK;
    c->have |= 1u << p;
    int rc = hearth_buf_printf(c->out, "%s ::= %s\n", PRIMS[p].name, PRIMS[p].body);
    for (int d = 0; d < P_COUNT && !rc; d++)
        if (PRIMS[p].deps & (1u << d))
            rc = need(c, (enum prim)d);
    return rc;
}

static int prim(conv *c, enum prim p, char *name)
{
    snprintf(name, NAME_MAX_LEN, "%s", PRIMS[p].name);
    return need(c, p);
}

static int new_rule(conv *c, const hearth_buf *body, char *name)
{
    snprintf(name, NAME_MAX_LEN, "r%d", c->n_rules++);
    int rc = need(c, P_SPACE);
    if (!rc)
        rc = hearth_buf_printf(c->out, "%s ::= ", name);
    if (!rc)
        rc = hearth_buf_append(c->out, body->data ? body->data : "", body->len);
    if (!rc)
        rc = hearth_buf_appends(c->out, "\n");
    return rc;
}

static int bad(conv *c, const cJSON *node, const char *what)
{
    char *txt = cJSON_PrintUnformatted(node);
    int rc = hearth_err_set(c->err, HEARTH_EINVAL, "json_schema: %s: %.200s%s", what, txt ? txt : "?",
                            txt && strlen(txt) > 200 ? "..." : "");
    free(txt);
    return rc;
}

/* A GBNF literal matching the bytes s[0..n) exactly. */
static int literal(hearth_buf *b, const char *s, size_t n)
{
    int rc = hearth_buf_appends(b, "\"");
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            rc = hearth_buf_printf(b, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            rc = hearth_buf_printf(b, "\\x%02X", ch);
        else
            rc = hearth_buf_append(b, &s[i], 1);
    }
    return rc ? rc : hearth_buf_appends(b, "\"");
}

/* The literal of a JSON value as it is written compactly. cJSON lets
 * bytes that are not UTF-8 through, and the GBNF parser would refuse them
 * in a message about the grammar's text: refused here, without echoing
 * them. */
static int json_literal(conv *c, hearth_buf *b, const cJSON *v)
{
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt)
        return hearth_err_set(c->err, HEARTH_ENOMEM, "json_schema: out of memory");
    int rc = hearth_utf8_validate(txt, strlen(txt), NULL)
                 ? hearth_err_set(c->err, HEARTH_EINVAL, "json_schema: a property name, const or enum value that is not UTF-8")
                 : literal(b, txt, strlen(txt));
    free(txt);
    return rc;
}

/* A code point inside a GBNF character class: letters and digits as they
 * are, anything else as an escape the GBNF parser reads (\x, \u, \U). */
static int class_char(hearth_buf *b, uint32_t cp)
{
    if (cp < 0x80 && ((cp | 0x20) - 'a' < 26 || cp - '0' < 10))
        return hearth_buf_printf(b, "%c", (char)cp);
    if (cp < 0x80)
        return hearth_buf_printf(b, "\\x%02X", (unsigned)cp);
    return cp < 0x10000 ? hearth_buf_printf(b, "\\u%04X", (unsigned)cp) : hearth_buf_printf(b, "\\U%08X", (unsigned)cp);
}

/* A GBNF literal of one code point. */
static int cp_literal(hearth_buf *b, uint32_t cp)
{
    char u[4];
    size_t n = hearth_utf8_encode((int32_t)cp, u);
    return literal(b, u, n);
}

/* llama.cpp's repetition of item: min..max (max < 0: no bound) times,
 * separated by sep when given. */
static int repetition(hearth_buf *b, const char *item, long min, long max, const char *sep)
{
    if (max == 0)
        return HEARTH_OK;
    if (min == 0 && max == 1)
        return hearth_buf_printf(b, "%s?", item);
    if (!sep) {
        if (min == 1 && max < 0)
            return hearth_buf_printf(b, "%s+", item);
        if (min == 0 && max < 0)
            return hearth_buf_printf(b, "%s*", item);
        if (max < 0)
            return hearth_buf_printf(b, "%s{%ld,}", item, min);
        return hearth_buf_printf(b, "%s{%ld,%ld}", item, min, max);
    }
    char more[NAME_MAX_LEN * 2 + 64];
    snprintf(more, sizeof more, "(%s %s)", sep, item);
    int rc = hearth_buf_appends(b, min == 0 ? "(" : "");
    if (!rc)
        rc = hearth_buf_printf(b, "%s ", item);
    if (!rc)
        rc = repetition(b, more, min == 0 ? 0 : min - 1, max < 0 ? -1 : max - 1, NULL);
    if (!rc && min == 0)
        rc = hearth_buf_appends(b, ")?");
    return rc;
}

/* A non-negative integer keyword of node, or def when absent. */
static int count_kw(conv *c, const cJSON *node, const char *key, long def, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(node, key);
    *out = def;
    if (!v)
        return HEARTH_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 || v->valuedouble != (double)(long)v->valuedouble)
        return bad(c, node, "a count keyword that is not a whole number from 0 to 1000000");
    *out = (long)v->valuedouble;
    return HEARTH_OK;
}

/* ---- integer ranges (llama.cpp's _build_min_max_int, by another route) ----
 *
 * llama.cpp's integer rule writes at most 16 digits, so every range is a
 * bounded one: an absent bound is -(10^16 - 1) or 10^16 - 1. A range of
 * non-negative integers is split by digit count; a count wholly inside is
 * "[1-9] [0-9]{k}", the partial ones (at most the shortest and the longest)
 * are written digit by digit. The grammar's sentences are the canonical
 * integers in the range: no leading zeros and no "-0" (llama.cpp's admits
 * "-05" under "maximum": -5, which is not JSON). */
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
        rc = literal(b, lo, (size_t)i);
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
static int int_bounds(conv *c, const cJSON *s, int64_t *lo, int64_t *hi)
{
    static const char *const KEYS[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    const cJSON *v[4];
    for (int k = 0; k < 4; k++) {
        v[k] = cJSON_GetObjectItemCaseSensitive(s, KEYS[k]);
        if (v[k] && !cJSON_IsNumber(v[k]) && !(k % 2 && cJSON_IsBool(v[k]))) {
            char what[64];
            snprintf(what, sizeof what, "'%s' that is not a number", KEYS[k]);
            return bad(c, s, what);
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
        return bad(c, s, "minimum / maximum bounds that leave no integer of at most 16 digits");
    return HEARTH_OK;
}

/* ---- "pattern": a regular expression as GBNF (llama.cpp's _visit_pattern) ----
 *
 * The subset llama.cpp translates, parsed the same way: the pattern must be
 * anchored, "^...$", and the anchors are dropped (so "^a|b$" is a or b,
 * as llama.cpp reads it; an anchor at the start or end of a top-level
 * alternative is dropped too); literals, escapes, '.', [classes], (groups),
 * '|', and the repetitions ? * + {n} {m,} {m,n} {,n}. A quantifier binds to
 * one character, class or group; consecutive characters are one GBNF
 * literal. Beyond llama.cpp, where it writes a grammar that fails to parse
 * or parses wrongly: \d \w \s and their negations, \f \v \0 \xHH \uHHHH
 * \u{...} \cX, escaped punctuation, (?:...) and (?<name>...) groups, lazy
 * quantifiers (the same sentences: the whole string must match), and
 * characters past ASCII. Refused, with the part and its offset named: an
 * unanchored pattern, lookarounds and other "(?" groups, back-references,
 * word boundaries, \p{...}, anchors elsewhere, unbalanced brackets, a
 * quantifier with nothing before it or after another, and an unbounded
 * repetition of something that may be empty ("(a*)*": llama.cpp's GBNF
 * parser refuses the left recursion it becomes).
 *
 * The pattern constrains the string's value, and the grammar reads JSON
 * text, so characters are matched as JSON writes them: a '"' in the
 * pattern is \" in the grammar, a newline \n, another control character
 * \u00XX (either case of hex), and a class or '.' that admits such
 * characters admits their escapes. llama.cpp matches them raw (its grammar
 * for "^\"$" is the invalid JSON """). Other escapes of a character
 * (\u0041 for A, \/) are not generated. */

/* A set of code points: ranges, sorted, disjoint and apart once normalized. */
typedef struct cset {
    uint32_t (*r)[2];
    size_t n, cap;
} cset;

#define CP_MAX 0x10FFFFu

static int cset_add(cset *s, uint32_t lo, uint32_t hi)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        uint32_t(*r)[2] = realloc(s->r, cap * sizeof *r);
        if (!r)
            return HEARTH_ENOMEM;
        s->r = r;
        s->cap = cap;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
    return HEARTH_OK;
}

static int cmp_range(const void *a, const void *b)
{
    uint32_t x = ((const uint32_t *)a)[0], y = ((const uint32_t *)b)[0];
    return x < y ? -1 : x > y;
}

static void cset_norm(cset *s)
{
    if (!s->n)
        return;
    qsort(s->r, s->n, sizeof *s->r, cmp_range);
    size_t k = 0;
    for (size_t i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[k][1] + 1) {
            if (s->r[i][1] > s->r[k][1])
                s->r[k][1] = s->r[i][1];
        } else {
            s->r[++k][0] = s->r[i][0];
            s->r[k][1] = s->r[i][1];
        }
    }
    s->n = k + 1;
}

/* The complement of s (normalized) within 0..CP_MAX, into out (empty). */
static int cset_invert(const cset *s, cset *out)
{
    uint32_t next = 0;
    int rc = HEARTH_OK;
    for (size_t i = 0; i < s->n && !rc; i++) {
        if (s->r[i][0] > next)
            rc = cset_add(out, next, s->r[i][0] - 1);
        next = s->r[i][1] + 1;
    }
    return rc || next > CP_MAX ? rc : cset_add(out, next, CP_MAX);
}

static bool cset_has(const cset *s, uint32_t cp)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->r[i][0] <= cp && cp <= s->r[i][1])
            return true;
    return false;
}

/* Appends the ranges of s as the inside of a GBNF class. */
static int class_ranges(hearth_buf *b, const cset *s)
{
    int rc = HEARTH_OK;
    for (size_t i = 0; i < s->n && !rc; i++) {
        rc = class_char(b, s->r[i][0]);
        if (!rc && s->r[i][1] > s->r[i][0])
            rc = hearth_buf_appends(b, "-");
        if (!rc && s->r[i][1] > s->r[i][0])
            rc = class_char(b, s->r[i][1]);
    }
    return rc;
}

/* The characters of s (normalized) as JSON text writes them: those written
 * as they are in one class (or its negation, when shorter), the rest as
 * escapes. HEARTH_ENOTFOUND when s is empty. */
static int emit_set(hearth_buf *b, const cset *s)
{
    cset raw = {0}, inv = {0};
    int rc = HEARTH_OK, n_alt = 0;
    for (size_t i = 0; i < s->n && !rc; i++) { /* s less controls, '"' and '\\' */
        uint32_t lo = s->r[i][0] < 0x20 ? 0x20 : s->r[i][0], hi = s->r[i][1];
        for (uint32_t cut = '"'; lo <= hi && !rc; cut = cut == '"' ? '\\' : CP_MAX + 1) {
            if (cut > hi) {
                rc = cset_add(&raw, lo, hi);
                break;
            }
            if (cut < lo)
                continue;
            if (cut > lo)
                rc = cset_add(&raw, lo, cut - 1);
            lo = cut + 1;
        }
    }
    char letters[8];
    int n_letters = 0;
    static const char SHORT[][2] = {{'"', '"'}, {'\\', '\\'}, {'b', 8}, {'f', 12}, {'n', 10}, {'r', 13}, {'t', 9}};
    for (size_t k = 0; k < sizeof SHORT / sizeof *SHORT; k++)
        if (cset_has(s, (uint32_t)(unsigned char)SHORT[k][1]))
            letters[n_letters++] = SHORT[k][0];
    hearth_buf alts;
    hearth_buf_init(&alts, BODY_MAX);
    if (!rc && raw.n) {
        rc = cset_invert(&raw, &inv);
        bool neg = inv.n <= raw.n;
        if (!rc)
            rc = hearth_buf_appends(&alts, neg ? "[^" : "[");
        if (!rc)
            rc = class_ranges(&alts, neg ? &inv : &raw);
        if (!rc)
            rc = hearth_buf_appends(&alts, "]");
        n_alt++;
    }
    if (!rc && n_letters) {
        rc = hearth_buf_appends(&alts, n_alt++ ? " | \"\\\\\" [" : "\"\\\\\" [");
        for (int k = 0; k < n_letters && !rc; k++)
            rc = class_char(&alts, (uint32_t)(unsigned char)letters[k]);
        if (!rc)
            rc = hearth_buf_appends(&alts, "]");
    }
    for (uint32_t high = 0; high < 2 && !rc; high++) { /* \u000X and \u001X, X in either case */
        cset digits = {0};
        for (uint32_t low = 0; low < 16 && !rc; low++) {
            uint32_t cp = high << 4 | low;
            if (cp == 8 || cp == 9 || cp == 10 || cp == 12 || cp == 13 || !cset_has(s, cp))
                continue; /* absent, or written as \b \t \n \f \r */
            rc = low < 10 ? cset_add(&digits, '0' + low, '0' + low) : cset_add(&digits, 'a' + low - 10, 'a' + low - 10);
            if (!rc && low >= 10)
                rc = cset_add(&digits, 'A' + low - 10, 'A' + low - 10);
        }
        cset_norm(&digits);
        if (!rc && digits.n)
            rc = hearth_buf_printf(&alts, "%s\"\\\\u00%u\" [", n_alt++ ? " | " : "", high);
        if (!rc && digits.n)
            rc = class_ranges(&alts, &digits);
        if (!rc && digits.n)
            rc = hearth_buf_appends(&alts, "]");
        free(digits.r);
    }
    if (!rc && !n_alt)
        rc = HEARTH_ENOTFOUND;
    bool group = n_alt > 1 || !raw.n; /* an escape is two items: a quantifier after it takes both */
    if (!rc && group)
        rc = hearth_buf_appends(b, "(");
    if (!rc)
        rc = hearth_buf_append(b, alts.data, alts.len);
    if (!rc && group)
        rc = hearth_buf_appends(b, ")");
    hearth_buf_deinit(&alts);
    free(raw.r);
    free(inv.r);
    return rc;
}

/* A code point as JSON text writes it, into out (up to 4 bytes); 0 when
 * that is a \u00XX escape (then it is matched as a one-member set). */
static size_t json_char(uint32_t cp, char out[4])
{
    static const char ESC[][2] = {{'"', '"'}, {'\\', '\\'}, {8, 'b'}, {12, 'f'}, {10, 'n'}, {13, 'r'}, {9, 't'}};
    for (size_t k = 0; k < sizeof ESC / sizeof *ESC; k++) {
        if (cp == (uint32_t)(unsigned char)ESC[k][0]) {
            out[0] = '\\';
            out[1] = ESC[k][1];
            return 2;
        }
    }
    return cp < 0x20 ? 0 : hearth_utf8_encode((int32_t)cp, out);
}

typedef struct pat {
    conv *c;
    const cJSON *s;   /* the schema, for messages */
    const char *src;  /* the pattern */
    size_t i, end;    /* where the parse is; where the final '$' is */
    hearth_buf *b;
} pat;

static int pat_bad(pat *p, size_t at, const char *what)
{
    char msg[200];
    snprintf(msg, sizeof msg, "'pattern' with %s at offset %zu (not supported by hearth)", what, at);
    return bad(p->c, p->s, msg);
}

static int hex_value(char h)
{
    return h >= '0' && h <= '9' ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
}

/* n hex digits at p->i into *v; false when they are not there. */
static bool pat_hex(pat *p, int n, uint32_t *v)
{
    *v = 0;
    for (int k = 0; k < n; k++) {
        int h = p->i < p->end ? hex_value(p->src[p->i]) : -1;
        if (h < 0)
            return false;
        *v = *v << 4 | (uint32_t)h;
        p->i++;
    }
    return true;
}

/* One UTF-8 character at p->i. */
static int pat_char(pat *p, uint32_t *cp)
{
    size_t at = p->i;
    int32_t v = hearth_utf8_decode(p->src, p->end, &p->i);
    if (v < 0) /* not echoed: the message would not be UTF-8 either */
        return hearth_err_set(p->c->err, HEARTH_EINVAL, "json_schema: a 'pattern' with a byte that is not UTF-8 at offset %zu", at);
    *cp = (uint32_t)v;
    return HEARTH_OK;
}

/* The escape at p->i (a backslash): a character into *cp, or a class
 * escape (\d \w \s, negated in capitals) into set with *is_set. */
static int pat_escape(pat *p, bool in_class, uint32_t *cp, cset *set, bool *is_set)
{
    size_t at = p->i++;
    *is_set = false;
    if (p->i >= p->end)
        return pat_bad(p, at, "a '\\' that ends the pattern");
    char e = p->src[p->i++];
    int rc = HEARTH_OK;
    switch (e) {
    case 'd': case 'D': case 'w': case 'W': case 's': case 'S': {
        cset pos = {0};
        *is_set = true;
        if ((e | 0x20) == 'd') {
            rc = cset_add(&pos, '0', '9');
        } else if ((e | 0x20) == 'w') {
            static const uint32_t W[][2] = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
            for (size_t k = 0; k < 4 && !rc; k++)
                rc = cset_add(&pos, W[k][0], W[k][1]);
        } else { /* ECMAScript's white space and line terminators */
            static const uint32_t S[][2] = {{9, 13}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                                            {0xFEFF, 0xFEFF}};
            for (size_t k = 0; k < sizeof S / sizeof *S && !rc; k++)
                rc = cset_add(&pos, S[k][0], S[k][1]);
        }
        if (!rc && e >= 'a') {
            for (size_t k = 0; k < pos.n && !rc; k++)
                rc = cset_add(set, pos.r[k][0], pos.r[k][1]);
        } else if (!rc) {
            rc = cset_invert(&pos, set);
        }
        free(pos.r);
        return rc;
    }
    case 't': *cp = 9; return HEARTH_OK;
    case 'n': *cp = 10; return HEARTH_OK;
    case 'v': *cp = 11; return HEARTH_OK;
    case 'f': *cp = 12; return HEARTH_OK;
    case 'r': *cp = 13; return HEARTH_OK;
    case '0':
        if (p->i < p->end && p->src[p->i] >= '0' && p->src[p->i] <= '9')
            return pat_bad(p, at, "an octal escape");
        *cp = 0;
        return HEARTH_OK;
    case 'x':
        return pat_hex(p, 2, cp) ? HEARTH_OK : pat_bad(p, at, "a malformed '\\x' escape");
    case 'u':
        if (p->i < p->end && p->src[p->i] == '{') {
            p->i++;
            *cp = 0;
            int k = 0;
            for (; p->i < p->end && hex_value(p->src[p->i]) >= 0 && *cp <= CP_MAX; k++)
                *cp = *cp << 4 | (uint32_t)hex_value(p->src[p->i++]);
            if (!k || *cp > CP_MAX || p->i >= p->end || p->src[p->i++] != '}')
                return pat_bad(p, at, "a malformed '\\u{...}' escape");
        } else if (!pat_hex(p, 4, cp)) {
            return pat_bad(p, at, "a malformed '\\u' escape");
        }
        if (*cp >= 0xD800 && *cp <= 0xDBFF && p->i + 1 < p->end && p->src[p->i] == '\\' && p->src[p->i + 1] == 'u') {
            size_t back = p->i;
            uint32_t lo;
            p->i += 2;
            if (pat_hex(p, 4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
                *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
            else
                p->i = back;
        }
        return *cp >= 0xD800 && *cp <= 0xDFFF ? pat_bad(p, at, "a lone surrogate '\\u' escape") : HEARTH_OK;
    case 'c':
        if (p->i < p->end && ((p->src[p->i] | 0x20) >= 'a' && (p->src[p->i] | 0x20) <= 'z')) {
            *cp = (uint32_t)(p->src[p->i++] & 0x1F);
            return HEARTH_OK;
        }
        return pat_bad(p, at, "a malformed '\\c' escape");
    case 'b':
        if (in_class) {
            *cp = 8;
            return HEARTH_OK;
        }
        return pat_bad(p, at, "a word boundary '\\b'");
    case 'B': return pat_bad(p, at, "a word boundary '\\B'");
    case 'k': return pat_bad(p, at, "a back-reference '\\k'");
    case 'p': case 'P': return pat_bad(p, at, "a Unicode property escape");
    default:
        if (e >= '1' && e <= '9')
            return pat_bad(p, at, "a back-reference");
        if ((e | 0x20) >= 'a' && (e | 0x20) <= 'z') {
            char what[40];
            snprintf(what, sizeof what, "an unknown escape '\\%c'", e);
            return pat_bad(p, at, what);
        }
        p->i--; /* anything else stands for itself */
        return pat_char(p, cp);
    }
}

/* A [class] at p->i into set (normalized). */
static int pat_class(pat *p, cset *set)
{
    size_t open = p->i++;
    bool neg = p->i < p->end && p->src[p->i] == '^';
    cset members = {0};
    int rc = HEARTH_OK;
    p->i += neg;
    for (;;) {
        if (p->i >= p->end) {
            rc = pat_bad(p, open, "an unclosed '['");
            break;
        }
        if (p->src[p->i] == ']') {
            p->i++;
            break;
        }
        size_t at = p->i;
        uint32_t lo = 0, hi = 0;
        bool is_set = false, hi_set = false;
        rc = p->src[p->i] == '\\' ? pat_escape(p, true, &lo, &members, &is_set) : pat_char(p, &lo);
        if (rc)
            break;
        if (p->i + 1 < p->end && p->src[p->i] == '-' && p->src[p->i + 1] != ']') {
            if (is_set) {
                rc = pat_bad(p, at, "a range from a class escape");
                break;
            }
            p->i++;
            rc = p->src[p->i] == '\\' ? pat_escape(p, true, &hi, &members, &hi_set) : pat_char(p, &hi);
            if (!rc && hi_set)
                rc = pat_bad(p, at, "a range to a class escape");
            else if (!rc && hi < lo)
                rc = pat_bad(p, at, "a character range that ends before it starts");
            else if (!rc)
                rc = cset_add(&members, lo, hi);
        } else if (!is_set) {
            rc = cset_add(&members, lo, lo);
        }
        if (rc)
            break;
    }
    cset_norm(&members);
    if (!rc && neg)
        rc = cset_invert(&members, set);
    else if (!rc)
        for (size_t k = 0; k < members.n && !rc; k++)
            rc = cset_add(set, members.r[k][0], members.r[k][1]);
    free(members.r);
    return rc;
}

/* A quantifier at p->i, if there is one: *min..*max (*max < 0: no bound). */
static int pat_quantifier(pat *p, bool *found, long *min, long *max)
{
    size_t at = p->i;
    char q = p->i < p->end ? p->src[p->i] : 0;
    *found = q == '*' || q == '+' || q == '?' || q == '{';
    if (!*found)
        return HEARTH_OK;
    p->i++;
    *min = q == '+' ? 1 : 0;
    *max = q == '?' ? 1 : -1;
    if (q == '{') {
        long v[2] = {-1, -1};
        int k = 0;
        for (; k < 2; k++) {
            for (; p->i < p->end && p->src[p->i] >= '0' && p->src[p->i] <= '9'; p->i++) {
                v[k] = (v[k] < 0 ? 0 : v[k]) * 10 + (p->src[p->i] - '0');
                if (v[k] > 1000000)
                    return pat_bad(p, at, "a repetition count above 1000000");
            }
            if (k == 0 && p->i < p->end && p->src[p->i] == ',')
                p->i++;
            else
                break;
        }
        if (p->i >= p->end || p->src[p->i] != '}' || (k == 0 && v[0] < 0))
            return pat_bad(p, at, "a '{' that is no {m,n} repetition (write \\{ for a brace)");
        p->i++;
        *min = v[0] < 0 ? 0 : v[0];
        *max = k == 0 ? v[0] : v[1];
        if (*max >= 0 && *max < *min)
            return pat_bad(p, at, "a repetition whose maximum is below its minimum");
    }
    if (p->i < p->end && p->src[p->i] == '?')
        p->i++; /* lazy: the same strings match the whole pattern */
    if (p->i < p->end && strchr("*+?{", p->src[p->i]))
        return pat_bad(p, p->i, "a repetition of a repetition");
    return HEARTH_OK;
}

static int pat_quantifier_text(hearth_buf *b, long min, long max)
{
    if (min == 0 && max == 1)
        return hearth_buf_appends(b, "?");
    if (max < 0)
        return min == 0 ? hearth_buf_appends(b, "*") : min == 1 ? hearth_buf_appends(b, "+") : hearth_buf_printf(b, "{%ld,}", min);
    return min == max ? hearth_buf_printf(b, "{%ld}", min) : hearth_buf_printf(b, "{%ld,%ld}", min, max);
}

static int pat_alternatives(pat *p, bool top, bool *nullable);

/* Flushes the pending characters as one literal, after a space when
 * something came before in the sequence. */
static int pat_flush(pat *p, hearth_buf *pend, bool *wrote)
{
    if (!pend->len)
        return HEARTH_OK;
    int rc = *wrote ? hearth_buf_appends(p->b, " ") : HEARTH_OK;
    if (!rc)
        rc = literal(p->b, pend->data, pend->len);
    pend->len = 0;
    *wrote = true;
    return rc;
}

/* Before an item written directly (a group, a set, a quantified
 * character): the pending characters, then a space. */
static int pat_begin_item(pat *p, hearth_buf *pend, bool *wrote)
{
    int rc = pat_flush(p, pend, wrote);
    if (!rc && *wrote)
        rc = hearth_buf_appends(p->b, " ");
    *wrote = true;
    return rc;
}

/* A (group) at p->i. */
static int pat_group(pat *p, bool *nullable)
{
    size_t open = p->i++;
    if (p->i < p->end && p->src[p->i] == '?') {
        const char *g = p->src + p->i;
        if (p->end - p->i >= 2 && g[1] == ':') {
            p->i += 2;
        } else if (p->end - p->i >= 3 && g[1] == '<' && g[2] != '=' && g[2] != '!') {
            const char *close = memchr(g, '>', p->end - p->i);
            if (!close)
                return pat_bad(p, open, "an unclosed group name '(?<'");
            p->i += (size_t)(close - g) + 1;
        } else {
            return pat_bad(p, open, "a lookaround or other '(?' group");
        }
    }
    if (++p->c->depth > MAX_DEPTH) {
        p->c->depth--;
        return hearth_err_set(p->c->err, HEARTH_ELIMIT, "json_schema: nested more than %d levels deep", MAX_DEPTH);
    }
    int rc = hearth_buf_appends(p->b, "(");
    if (!rc)
        rc = pat_alternatives(p, false, nullable);
    if (!rc && (p->i >= p->end || p->src[p->i] != ')'))
        rc = pat_bad(p, open, "an unclosed '('");
    if (!rc) {
        p->i++;
        rc = hearth_buf_appends(p->b, ")");
    }
    p->c->depth--;
    return rc;
}

/* One alternative: items up to '|', ')' or the end. */
static int pat_sequence(pat *p, bool top, bool *nullable)
{
    hearth_buf pend; /* characters not yet written, as JSON text */
    hearth_buf_init(&pend, BODY_MAX);
    bool wrote = false, started = false;
    int rc = HEARTH_OK;
    *nullable = true;
    while (!rc && p->i < p->end) {
        size_t at = p->i;
        char ch = p->src[at];
        if (ch == '|' || ch == ')')
            break;
        if (top && ((ch == '^' && !started) || (ch == '$' && (at + 1 == p->end || p->src[at + 1] == '|')))) {
            p->i++; /* an anchor at an end of a top-level alternative */
            continue;
        }
        started = true;
        if (ch == '^' || ch == '$') {
            rc = pat_bad(p, at, "an anchor ('^' or '$') inside the pattern");
            break;
        }
        if (strchr("*+?{", ch)) {
            rc = pat_bad(p, at, "a repetition (* + ? {) with nothing before it");
            break;
        }
        /* the item: a character (kept in pend) or a set or group (written) */
        cset set = {0};
        bool is_set = false, item_null = false;
        uint32_t cp = 0;
        size_t pend_before = pend.len;
        if (ch == '(') {
            rc = pat_begin_item(p, &pend, &wrote);
            if (!rc)
                rc = pat_group(p, &item_null);
        } else if (ch == '[') {
            is_set = true;
            rc = pat_class(p, &set);
        } else if (ch == '.') { /* llama.cpp's dot: all but \n and \r */
            p->i++;
            is_set = true;
            rc = cset_add(&set, 0, 9);
            if (!rc)
                rc = cset_add(&set, 11, 12);
            if (!rc)
                rc = cset_add(&set, 14, CP_MAX);
        } else {
            rc = ch == '\\' ? pat_escape(p, false, &cp, &set, &is_set) : pat_char(p, &cp);
        }
        char text[4];
        size_t n = 0;
        if (!rc && ch != '(' && !is_set && !(n = json_char(cp, text))) {
            is_set = true;
            rc = cset_add(&set, cp, cp);
        }
        if (!rc && is_set) {
            cset_norm(&set);
            rc = pat_begin_item(p, &pend, &wrote);
            if (!rc && (rc = emit_set(p->b, &set)) == HEARTH_ENOTFOUND)
                rc = pat_bad(p, at, "a character class that matches nothing");
        } else if (!rc && n) {
            rc = hearth_buf_append(&pend, text, n);
        }
        free(set.r);
        bool found = false;
        long min = 0, max = 0;
        if (!rc)
            rc = pat_quantifier(p, &found, &min, &max);
        if (!rc && found && max < 0 && item_null)
            rc = pat_bad(p, at, "an unbounded repetition of something that may be empty");
        if (!rc && found && n) { /* the quantifier takes the last character alone */
            pend.len = pend_before;
            rc = pat_begin_item(p, &pend, &wrote);
            if (!rc)
                rc = literal(p->b, text, n);
        }
        if (!rc && found)
            rc = pat_quantifier_text(p->b, min, max);
        *nullable = *nullable && (item_null || (found && min == 0));
    }
    if (!rc)
        rc = pat_flush(p, &pend, &wrote);
    hearth_buf_deinit(&pend);
    return rc;
}

static int pat_alternatives(pat *p, bool top, bool *nullable)
{
    *nullable = false;
    for (;;) {
        bool null_alt;
        int rc = pat_sequence(p, top, &null_alt);
        if (rc)
            return rc;
        *nullable = *nullable || null_alt;
        if (p->i >= p->end || p->src[p->i] != '|')
            break;
        p->i++;
        if ((rc = hearth_buf_appends(p->b, " | ")))
            return rc;
    }
    if (top && p->i < p->end)
        return pat_bad(p, p->i, "an unbalanced ')'");
    return HEARTH_OK;
}

/* A string whose value matches the pattern of s, into body. */
static int pattern_rule(conv *c, const cJSON *s, hearth_buf *body)
{
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    if (!cJSON_IsString(pt))
        return bad(c, s, "'pattern' that is not a string");
    pat p = {.c = c, .s = s, .src = pt->valuestring, .i = 1, .b = body};
    size_t len = strlen(p.src), slashes = 0;
    while (len >= 2 + slashes && p.src[len - 2 - slashes] == '\\')
        slashes++;
    if (len < 2 || p.src[0] != '^' || p.src[len - 1] != '$' || slashes % 2)
        return bad(c, s, "a 'pattern' that does not start with '^' and end with '$' (as llama.cpp requires)");
    p.end = len - 1;
    bool nullable;
    int rc = hearth_buf_appends(body, "\"\\\"\" (");
    if (!rc)
        rc = pat_alternatives(&p, true, &nullable);
    return rc ? rc : hearth_buf_appends(body, ") \"\\\"\" space");
}

static int visit(conv *c, const cJSON *s, char *name);

static int union_of(conv *c, const cJSON *list, hearth_buf *body)
{
    int rc = HEARTH_OK, i = 0;
    const cJSON *alt;
    cJSON_ArrayForEach(alt, list)
    {
        rname sub;
        if ((rc = visit(c, alt, sub)))
            return rc;
        rc = hearth_buf_printf(body, i++ ? " | %s" : "%s", sub);
        if (rc)
            return rc;
    }
    return i ? rc : bad(c, list, "an empty list of alternatives");
}

/* The node a "#/..." $ref (a JSON pointer into the schema) names. */
static int ref_target(conv *c, const cJSON *s, const cJSON *ref, const cJSON **out)
{
    if (!cJSON_IsString(ref) || strncmp(ref->valuestring, "#/", 2) != 0)
        return bad(c, s, "a $ref that is not a \"#/...\" path in this schema (remote references are not fetched)");
    const cJSON *target = c->root;
    char seg[256];
    for (const char *p = ref->valuestring + 2; *p && target;) {
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                ch = *++p == '0' ? '~' : '/';
            if (n + 1 < sizeof seg)
                seg[n++] = ch;
        }
        seg[n] = 0;
        if (*p == '/')
            p++;
        target = cJSON_IsArray(target) ? cJSON_GetArrayItem(target, atoi(seg)) : cJSON_GetObjectItemCaseSensitive(target, seg);
    }
    if (!target)
        return bad(c, s, "a $ref that leads nowhere in the schema");
    *out = target;
    return HEARTH_OK;
}

static int resolve_ref(conv *c, const cJSON *s, const cJSON *ref, char *name)
{
    if (cJSON_IsString(ref)) {
        for (int i = 0; i < c->n_refs; i++) {
            if (!strcmp(c->ref[i], ref->valuestring)) {
                snprintf(name, NAME_MAX_LEN, "r%d", c->ref_rule[i]);
                return HEARTH_OK;
            }
        }
    }
    const cJSON *target;
    int rc = ref_target(c, s, ref, &target);
    if (rc)
        return rc;
    if (c->n_refs == MAX_REFS)
        return hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: more than %d distinct $ref targets", MAX_REFS);
    int id = c->n_rules++;
    c->ref[c->n_refs] = ref->valuestring;
    c->ref_rule[c->n_refs++] = id;
    snprintf(name, NAME_MAX_LEN, "r%d", id);
    rname sub;
    rc = visit(c, target, sub);
    if (!rc)
        rc = hearth_buf_printf(c->out, "r%d ::= %s\n", id, sub);
    return rc;
}

/* The rule of one property "key": value. */
static int kv_rule(conv *c, const char *key, const cJSON *value_schema, char *name)
{
    rname val;
    int rc = value_schema ? visit(c, value_schema, val) : prim(c, P_VALUE, val);
    hearth_buf body;
    hearth_buf_init(&body, BODY_MAX);
    if (!rc) {
        cJSON *k = cJSON_CreateString(key);
        rc = k ? json_literal(c, &body, k) : HEARTH_ENOMEM;
        cJSON_Delete(k);
    }
    if (!rc)
        rc = hearth_buf_printf(&body, " space \":\" space %s", val);
    if (!rc)
        rc = new_rule(c, &body, name);
    hearth_buf_deinit(&body);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* ---- keys other than the declared names (llama.cpp's _not_strings) ----
 *
 * A trie of the declared names as JSON writes them (cJSON's escapes, the
 * text kv_rule matches), one code point per level; each node becomes a rule
 * for the rest of a key that has come this far: a child's character and
 * its rule, or any other character that may come here and then any
 * characters, or (where no name ends and no escape is open) nothing more.
 * A node knows where in the string's syntax it stands, so that "any other
 * character" after a backslash is another escape letter, and after "\u"
 * another hex digit. Unlike llama.cpp's, a key that is a proper prefix of a
 * name ("nam" beside "name") is allowed, and the characters are JSON's, so
 * a name with a quote or a backslash is excluded as written. A name written
 * with other escapes ("\u0061" for "a") is not excluded (neither is it by
 * llama.cpp). One rule per node, never nested: a long name makes a long
 * chain of rules, not a deep group for the GBNF parser. */
enum kstate { K_PLAIN, K_ESC, K_U0, K_U1, K_U2, K_U3 };
enum { KEY_NODES_MAX = 1 << 20 };

typedef struct knode {
    uint32_t cp;          /* the character that leads here */
    int child, last, sibling;  /* first and last child, next sibling; -1: none */
    uint8_t state;        /* the string's syntax after this character */
    bool end;             /* a declared name ends here */
} knode;

/* The state after cp in state st, or -1 when char cannot write cp there
 * (a raw control character or DEL: such a name is no key, nothing to
 * exclude). */
static int kstate_next(int st, uint32_t cp)
{
    switch (st) {
    case K_PLAIN: return cp == '\\' ? K_ESC : cp < 0x20 || cp == 0x7F ? -1 : K_PLAIN;
    case K_ESC: return cp == 'u' ? K_U0 : K_PLAIN;
    case K_U3: return K_PLAIN;
    default: return st + 1;
    }
}

static bool knode_has(const knode *t, int k, uint32_t cp)
{
    for (int ch = t[k].child; ch >= 0; ch = t[ch].sibling)
        if (t[ch].cp == cp)
            return true;
    return false;
}

/* One node's rule: "r<base+k> ::= ...". A leaf is no rule: its parent
 * writes "char+" after its character (a name ends there), or "char*" (a
 * name went on with a character no key can hold). r<esc> is an escape and
 * then any characters. */
static int knode_rule(conv *c, const knode *t, int k, int base, int esc)
{
    hearth_buf *o = c->out;
    const knode *n = &t[k];
    int rc = hearth_buf_printf(o, "r%d ::= ", base + k);
    const char *sep = "";
    if (!rc && n->state == K_PLAIN && !n->end) {
        rc = hearth_buf_appends(o, "| "); /* the key may end here */
    }
    for (int ch = n->child; ch >= 0 && !rc; ch = t[ch].sibling) {
        rc = hearth_buf_appends(o, sep);
        if (!rc)
            rc = cp_literal(o, t[ch].cp);
        if (!rc)
            rc = t[ch].child >= 0 ? hearth_buf_printf(o, " r%d", base + ch)
                                  : hearth_buf_appends(o, t[ch].end ? " char+" : " char*");
        sep = " | ";
    }
    /* any other character that may come here, then any characters */
    if (!rc && n->state == K_PLAIN) {
        rc = hearth_buf_printf(o, "%s[^\"\\\\\\x7F\\x00-\\x1F", sep);
        for (int ch = n->child; ch >= 0 && !rc; ch = t[ch].sibling)
            if (t[ch].cp != '\\')
                rc = class_char(o, t[ch].cp);
        if (!rc)
            rc = hearth_buf_appends(o, "] char*");
        if (!rc && !knode_has(t, k, '\\'))
            rc = hearth_buf_printf(o, " | r%d", esc);
    } else if (!rc && n->state == K_ESC) {
        hearth_buf letters;
        hearth_buf_init(&letters, 64);
        for (const char *l = "\"\\bfnrt"; *l && !rc; l++)
            if (!knode_has(t, k, (uint32_t)*l))
                rc = class_char(&letters, (uint32_t)*l);
        if (!rc && letters.len)
            rc = hearth_buf_printf(o, "%s[%.*s] char*", sep, (int)letters.len, letters.data);
        if (!rc && letters.len)
            sep = " | ";
        if (!rc && !knode_has(t, k, 'u'))
            rc = hearth_buf_printf(o, "%s\"u\" [0-9a-fA-F]{4} char*", sep);
        hearth_buf_deinit(&letters);
    } else if (!rc) {
        int left = K_U3 - n->state; /* hex digits after the next one */
        hearth_buf hex;
        hearth_buf_init(&hex, 64);
        for (const char *h = "0123456789abcdefABCDEF"; *h && !rc; h++)
            if (!knode_has(t, k, (uint32_t)*h))
                rc = hearth_buf_printf(&hex, "%c", *h);
        if (!rc && hex.len)
            rc = hearth_buf_printf(o, "%s[%.*s]", sep, (int)hex.len, hex.data);
        if (!rc && hex.len && left)
            rc = hearth_buf_printf(o, " [0-9a-fA-F]{%d}", left);
        if (!rc && hex.len)
            rc = hearth_buf_appends(o, " char*");
        hearth_buf_deinit(&hex);
    }
    return rc ? rc : hearth_buf_appends(o, "\n");
}

/* The rule of a key string that is none of the n names (n >= 1): its name
 * into name. */
static int not_names_rule(conv *c, const char *const *names, int n, char *name)
{
    char **enc = calloc((size_t)n, sizeof *enc);
    knode *t = NULL;
    int rc = enc ? need(c, P_CHAR) : HEARTH_ENOMEM, n_nodes = 1, cap = 0;
    for (int i = 0; i < n && !rc; i++) {
        cJSON *str = cJSON_CreateString(names[i]);
        enc[i] = str ? cJSON_PrintUnformatted(str) : NULL;
        cJSON_Delete(str);
        if (!enc[i])
            rc = HEARTH_ENOMEM;
    }
    if (!rc) /* UTF-8 order is code point order: a name shares its prefix with the one before it */
        qsort(enc, (size_t)n, sizeof *enc, cmp_str);
    cap = 64;
    if (!rc && !(t = malloc((size_t)cap * sizeof *t)))
        rc = HEARTH_ENOMEM;
    if (!rc)
        t[0] = (knode){.child = -1, .last = -1, .sibling = -1, .state = K_PLAIN};
    for (int i = 0; i < n && !rc; i++) {
        const char *e = enc[i] + 1; /* past the opening quote */
        size_t len = strlen(e) - 1, at = 0;
        int k = 0;
        while (at < len && !rc) {
            int32_t cp = hearth_utf8_decode(e, len, &at);
            if (cp < 0) {
                char what[300];
                snprintf(what, sizeof what, "a property name that is not UTF-8 ('%.200s')", names[i]);
                rc = hearth_err_set(c->err, HEARTH_EINVAL, "json_schema: %s", what);
                break;
            }
            int st = kstate_next(t[k].state, (uint32_t)cp);
            if (st < 0)
                break;
            int last = t[k].last;
            if (last >= 0 && t[last].cp == (uint32_t)cp) {
                k = last;
                continue;
            }
            if (n_nodes == KEY_NODES_MAX) {
                rc = hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: property names longer than %d characters in all",
                                    KEY_NODES_MAX);
                break;
            }
            if (n_nodes == cap) {
                knode *g = realloc(t, (size_t)cap * 2 * sizeof *t);
                if (!g) {
                    rc = HEARTH_ENOMEM;
                    break;
                }
                t = g;
                cap *= 2;
            }
            t[n_nodes] = (knode){.cp = (uint32_t)cp, .child = -1, .last = -1, .sibling = -1, .state = (uint8_t)st};
            if (last >= 0)
                t[last].sibling = n_nodes;
            else
                t[k].child = n_nodes;
            t[k].last = n_nodes;
            k = n_nodes++;
        }
        if (!rc && at == len)
            t[k].end = true;
    }
    int base = c->n_rules, esc = base + n_nodes;
    c->n_rules += n_nodes + 1;
    if (!rc)
        rc = hearth_buf_printf(c->out, "r%d ::= [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) char*\n", esc);
    for (int k = 0; k < n_nodes && !rc; k++)
        if (k == 0 || t[k].child >= 0)
            rc = knode_rule(c, t, k, base, esc);
    hearth_buf body;
    hearth_buf_init(&body, 64);
    if (!rc)
        rc = hearth_buf_printf(&body, "\"\\\"\" r%d \"\\\"\" space", base);
    if (!rc)
        rc = new_rule(c, &body, name);
    hearth_buf_deinit(&body);
    for (int i = 0; enc && i < n; i++)
        free(enc[i]);
    free(enc);
    free(t);
    return rc;
}

/* The properties of an object rule, in order: borrowed from the schema. */
typedef struct prop {
    const char *name;
    const cJSON *schema;
    bool required;
} prop;

typedef struct props {
    prop *v;
    int n, cap;
} props;

static int props_add(props *ps, const char *name, const cJSON *schema, bool required)
{
    if (ps->n == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 16;
        prop *v = realloc(ps->v, (size_t)cap * sizeof *v);
        if (!v)
            return HEARTH_ENOMEM;
        ps->v = v;
        ps->cap = cap;
    }
    ps->v[ps->n++] = (prop){name, schema, required};
    return HEARTH_OK;
}

/* llama.cpp's object: the required properties in order, then the optional
 * ones, any subset in order, each after a comma; additional properties
 * (addl true or a schema) last, any number. */
static int object_body(conv *c, const props *ps, const cJSON *addl, hearth_buf *body)
{
    int n = ps->n;
    rname *kv = calloc((size_t)n + 1, sizeof *kv);
    int *opt = calloc((size_t)n + 1, sizeof *opt);
    int rc = kv && opt ? HEARTH_OK : HEARTH_ENOMEM, n_opt = 0, n_req = 0;
    for (int i = 0; i < n && !rc; i++) {
        rc = kv_rule(c, ps->v[i].name, ps->v[i].schema, kv[i]);
        if (!ps->v[i].required)
            opt[n_opt++] = i;
    }
    bool star = cJSON_IsTrue(addl) || cJSON_IsObject(addl);
    if (!rc && star) {
        /* "*": any other key */
        rname key, val;
        const char **names = calloc((size_t)n + 1, sizeof *names);
        for (int i = 0; names && i < n; i++)
            names[i] = ps->v[i].name;
        rc = !names ? HEARTH_ENOMEM : n ? not_names_rule(c, names, n, key) : prim(c, P_STRING, key);
        free(names);
        if (!rc)
            rc = cJSON_IsObject(addl) ? visit(c, addl, val) : prim(c, P_VALUE, val);
        hearth_buf kb;
        hearth_buf_init(&kb, BODY_MAX);
        if (!rc)
            rc = hearth_buf_printf(&kb, "%s \":\" space %s", key, val);
        if (!rc)
            rc = new_rule(c, &kb, kv[n]);
        hearth_buf_deinit(&kb);
        opt[n_opt++] = n;
    }
    if (!rc)
        rc = hearth_buf_appends(body, "\"{\" space ");
    for (int i = 0; i < n && !rc; i++)
        if (ps->v[i].required)
            rc = hearth_buf_printf(body, n_req++ ? " \",\" space %s" : "%s", kv[i]);
    if (!rc && n_opt) {
        /* rest[k]: the optional ones from k on, each optional, after a comma */
        rname *rest = calloc((size_t)n_opt + 1, sizeof *rest);
        if (!rest)
            rc = HEARTH_ENOMEM;
        for (int k = n_opt - 1; k >= 1 && !rc; k--) {
            hearth_buf rb;
            hearth_buf_init(&rb, BODY_MAX);
            bool is_star = star && k == n_opt - 1;
            rc = hearth_buf_printf(&rb, "( \",\" space %s )%s", kv[opt[k]], is_star ? "*" : "?");
            if (!rc && k + 1 < n_opt)
                rc = hearth_buf_printf(&rb, " %s", rest[k + 1]);
            if (!rc)
                rc = new_rule(c, &rb, rest[k]);
            hearth_buf_deinit(&rb);
        }
        if (!rc)
            rc = hearth_buf_appends(body, n_req ? " ( \",\" space ( " : " (");
        for (int k = 0; k < n_opt && !rc; k++) {
            bool is_star = star && k == n_opt - 1;
            rc = hearth_buf_printf(body, "%s%s", k ? " | " : "", kv[opt[k]]);
            if (!rc && is_star)
                rc = hearth_buf_printf(body, " ( \",\" space %s )*", kv[opt[k]]);
            if (!rc && k + 1 < n_opt)
                rc = hearth_buf_printf(body, " %s", rest[k + 1]);
        }
        if (!rc)
            rc = hearth_buf_appends(body, n_req ? " ) )?" : " )?");
        free(rest);
    }
    if (!rc)
        rc = hearth_buf_appends(body, " \"}\" space");
    free(kv);
    free(opt);
    return rc;
}

/* An object with properties / required / additionalProperties. The
 * required names are sorted once, so a schema with many of each costs
 * n log n, not n * m. */
static int object_rule(conv *c, const cJSON *s, hearth_buf *body)
{
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (pr && !cJSON_IsObject(pr))
        return bad(c, s, "'properties' that is not an object");
    int n_req = cJSON_IsArray(req) ? cJSON_GetArraySize(req) : 0, k = 0;
    const char **names = calloc((size_t)n_req + 1, sizeof *names);
    props ps = {0};
    int rc = names ? HEARTH_OK : HEARTH_ENOMEM;
    const cJSON *it, *req_list = n_req ? req : NULL;
    cJSON_ArrayForEach(it, req_list)
    {
        if (cJSON_IsString(it))
            names[k++] = it->valuestring;
    }
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    cJSON_ArrayForEach(it, pr)
    {
        if (rc)
            break;
        const char *key = it->string;
        rc = props_add(&ps, key, it, bsearch(&key, names, (size_t)k, sizeof *names, cmp_str) != NULL);
    }
    if (!rc)
        rc = object_body(c, &ps, cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"), body);
    free(names);
    free(ps.v);
    return rc;
}

/* One allOf component into ps, as llama.cpp takes it: a $ref is followed,
 * a component's properties are all required (its own "required" aside) or
 * all optional (listed under an anyOf of the allOf), and what else a
 * component says is not looked at. */
static int allof_add(conv *c, props *ps, const cJSON *comp, bool required, int hops)
{
    if (cJSON_IsTrue(comp))
        return HEARTH_OK;
    if (!cJSON_IsObject(comp))
        return bad(c, comp, "an allOf component that is not a schema object");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(comp, "$ref");
    if (ref) {
        const cJSON *target;
        if (hops >= MAX_DEPTH)
            return hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: allOf $refs chained more than %d deep", MAX_DEPTH);
        int rc = ref_target(c, comp, ref, &target);
        return rc ? rc : allof_add(c, ps, target, required, hops + 1);
    }
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(comp, "properties"), *it;
    if (pr && !cJSON_IsObject(pr))
        return bad(c, comp, "'properties' that is not an object");
    cJSON_ArrayForEach(it, pr)
    {
        int rc = props_add(ps, it->string, it, required);
        if (rc)
            return rc;
    }
    return HEARTH_OK;
}

/* llama.cpp's allOf: one object of the components' properties, no others.
 * A name declared by two components is refused: llama.cpp's grammar then
 * wants the key twice, and hearth does not intersect the two schemas. */
static int allof_rule(conv *c, const cJSON *s, hearth_buf *body)
{
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf"), *t;
    if (!cJSON_IsArray(all))
        return bad(c, s, "allOf that is not a list");
    props ps = {0};
    int rc = HEARTH_OK;
    cJSON_ArrayForEach(t, all)
    {
        const cJSON *any = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "anyOf") : NULL, *tt;
        if (any && !cJSON_IsArray(any))
            rc = bad(c, t, "anyOf / oneOf that is not a list");
        cJSON_ArrayForEach(tt, any)
        {
            if (!rc)
                rc = allof_add(c, &ps, tt, false, 0);
        }
        if (!rc && !any)
            rc = allof_add(c, &ps, t, true, 0);
        if (rc)
            break;
    }
    const char **names = rc ? NULL : calloc((size_t)ps.n + 1, sizeof *names);
    if (!rc && !names)
        rc = HEARTH_ENOMEM;
    for (int i = 0; i < ps.n && !rc; i++)
        names[i] = ps.v[i].name;
    if (!rc)
        qsort(names, (size_t)ps.n, sizeof *names, cmp_str);
    for (int i = 1; i < ps.n && !rc; i++) {
        if (!strcmp(names[i - 1], names[i])) {
            char what[300];
            snprintf(what, sizeof what, "allOf components that both declare the property '%.200s' (not merged by hearth)", names[i]);
            rc = bad(c, s, what);
        }
    }
    if (!rc)
        rc = object_body(c, &ps, NULL, body);
    free(names);
    free(ps.v);
    return rc;
}

static int array_rule(conv *c, const cJSON *s, hearth_buf *body)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (!items)
        items = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    int rc = hearth_buf_appends(body, "\"[\" space ");
    if (!rc && cJSON_IsArray(items)) {
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, items)
        {
            rname sub;
            if ((rc = visit(c, it, sub)))
                return rc;
            if ((rc = hearth_buf_printf(body, i++ ? " \",\" space %s" : "%s", sub)))
                return rc;
        }
    } else if (!rc) {
        rname sub;
        long min, max;
        rc = visit(c, items, sub);
        if (!rc)
            rc = count_kw(c, s, "minItems", 0, &min);
        if (!rc)
            rc = count_kw(c, s, "maxItems", -1, &max);
        if (!rc && max >= 0 && max < min)
            return bad(c, s, "maxItems below minItems");
        if (!rc)
            rc = repetition(body, sub, min, max, "\",\" space");
    }
    return rc ? rc : hearth_buf_appends(body, " \"]\" space");
}

static bool has(const cJSON *s, const char *key) { return cJSON_GetObjectItemCaseSensitive(s, key) != NULL; }

static bool type_is(const cJSON *type, const char *name)
{
    return !type || (cJSON_IsString(type) && !strcmp(type->valuestring, name));
}

/* The rule for schema node s, in the order of llama.cpp's tests. */
static int visit_node(conv *c, const cJSON *s, char *name)
{
    if (!cJSON_IsObject(s))
        return bad(c, s, "unrecognized schema (not an object)");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (!any)
        any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (ref)
        return resolve_ref(c, s, ref, name);
    hearth_buf body;
    hearth_buf_init(&body, BODY_MAX);
    int rc;
    if (any) {
        rc = cJSON_IsArray(any) ? union_of(c, any, &body) : bad(c, s, "anyOf / oneOf that is not a list");
    } else if (cJSON_IsArray(type)) {
        cJSON *copy = cJSON_Duplicate(s, true), *alts = cJSON_CreateArray();
        const cJSON *t;
        rc = copy && alts ? HEARTH_OK : HEARTH_ENOMEM;
        cJSON_ArrayForEach(t, type)
        {
            cJSON *one = rc ? NULL : cJSON_Duplicate(copy, true);
            if (!one || !cJSON_ReplaceItemInObjectCaseSensitive(one, "type", cJSON_Duplicate(t, true))) {
                cJSON_Delete(one);
                rc = rc ? rc : HEARTH_ENOMEM;
                break;
            }
            cJSON_AddItemToArray(alts, one);
        }
        if (!rc)
            rc = union_of(c, alts, &body);
        cJSON_Delete(copy);
        cJSON_Delete(alts);
    } else if (has(s, "const")) {
        rc = json_literal(c, &body, cJSON_GetObjectItemCaseSensitive(s, "const"));
        if (!rc)
            rc = hearth_buf_appends(&body, " space");
    } else if (has(s, "enum")) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum"), *v;
        int i = 0;
        rc = cJSON_IsArray(e) && cJSON_GetArraySize(e) > 0 ? hearth_buf_appends(&body, "(") : bad(c, s, "an enum that is not a non-empty list");
        cJSON_ArrayForEach(v, e)
        {
            if (!rc && i++)
                rc = hearth_buf_appends(&body, " | ");
            if (!rc)
                rc = json_literal(c, &body, v);
        }
        if (!rc)
            rc = hearth_buf_appends(&body, ") space");
    } else if (type_is(type, "object") &&
               (has(s, "properties") || (has(s, "additionalProperties") && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))))) {
        rc = object_rule(c, s, &body);
    } else if (type_is(type, "object") && has(s, "allOf")) {
        rc = allof_rule(c, s, &body);
    } else if (type_is(type, "array") && (has(s, "items") || has(s, "prefixItems"))) {
        rc = array_rule(c, s, &body);
    } else if (type_is(type, "string") && has(s, "pattern")) {
        rc = pattern_rule(c, s, &body);
    } else if (type_is(type, "string") && cJSON_IsString(format) && !strncmp(format->valuestring, "uuid", 4)) {
        rc = prim(c, P_UUID, name);
        hearth_buf_deinit(&body);
        return rc;
    } else if (type && type_is(type, "string") && (has(s, "minLength") || has(s, "maxLength"))) {
        long min, max;
        rname ch;
        rc = count_kw(c, s, "minLength", 0, &min);
        if (!rc)
            rc = count_kw(c, s, "maxLength", -1, &max);
        if (!rc && max >= 0 && max < min)
            rc = bad(c, s, "maxLength below minLength");
        if (!rc)
            rc = prim(c, P_CHAR, ch);
        if (!rc)
            rc = hearth_buf_appends(&body, "\"\\\"\" ");
        if (!rc)
            rc = repetition(&body, ch, min, max, NULL);
        if (!rc)
            rc = hearth_buf_appends(&body, " \"\\\"\" space");
    } else if (type && type_is(type, "integer") &&
               (has(s, "minimum") || has(s, "maximum") || has(s, "exclusiveMinimum") || has(s, "exclusiveMaximum"))) {
        /* bounds on "number" fall through to the plain number rule, as in
         * llama.cpp, which does not constrain non-integers */
        int64_t lo = 0, hi = 0;
        rc = int_bounds(c, s, &lo, &hi);
        if (!rc)
            rc = hearth_buf_appends(&body, "(");
        if (!rc)
            rc = int_range(&body, lo, hi);
        if (!rc)
            rc = hearth_buf_appends(&body, ") space");
    } else if (!s->child || type_is(type, "object")) {
        rc = prim(c, P_OBJECT, name);
        hearth_buf_deinit(&body);
        return rc;
    } else {
        static const struct { const char *type; enum prim p; } T[] = {
            {"boolean", P_BOOLEAN}, {"number", P_NUMBER}, {"integer", P_INTEGER}, {"string", P_STRING},
            {"null", P_NULL}, {"array", P_ARRAY}, {"object", P_OBJECT},
        };
        rc = HEARTH_ENOTFOUND;
        for (size_t i = 0; type && cJSON_IsString(type) && i < sizeof T / sizeof *T && rc == HEARTH_ENOTFOUND; i++)
            if (!strcmp(type->valuestring, T[i].type))
                rc = prim(c, T[i].p, name);
        hearth_buf_deinit(&body);
        return rc == HEARTH_ENOTFOUND ? bad(c, s, "unrecognized schema") : rc;
    }
    if (!rc)
        rc = new_rule(c, &body, name);
    hearth_buf_deinit(&body);
    return rc;
}

static int visit(conv *c, const cJSON *s, char *name)
{
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: nested more than %d levels deep", MAX_DEPTH);
    }
    int rc = visit_node(c, s, name);
    c->depth--;
    return rc;
}

int hearth_json_schema_to_gbnf(const cJSON *schema, hearth_buf *out, hearth_err *err)
{
    conv c = {.root = schema, .out = out, .err = err};
    rname top;
    int rc = visit(&c, schema, top);
    if (!rc)
        rc = hearth_buf_printf(out, "root ::= %s\n", top);
    if (rc && !(err && err->code))
        hearth_err_set(err, rc, "json_schema: the grammar does not fit (%s)", hearth_status_name(rc));
    return rc;
}

/* json_schema_pattern.c: a string schema's "pattern", a regular
 * expression, as one GBNF rule body (llama.cpp's _visit_pattern), for
 * json_schema_gbnf.c's walk.
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
 * (\u0041 for A, \/) are not generated.
 *
 * A recursive descent over the pattern's bytes (alternatives, sequences,
 * items, quantifiers), writing GBNF as it goes; character classes are
 * built as sets of code-point ranges first (negation, \d \w \s, the JSON
 * escapes need the whole set). Groups nest at most MAX_DEPTH deep, counted
 * on from the schema's own nesting, and every buffer is bounded.
 *
 * Its own file because a regular expression parser is its own problem and
 * most of the converter's code; it sees nothing of the schema walk but the
 * schema node (for messages) and the nesting depth. Rejected: PCRE2, which
 * hearth links for its pre-tokenizers: it compiles a pattern to a matcher
 * and gives no tree to translate into a grammar. */
#include "json_schema_int.h"

#include "text/unicode.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        rc = hearth_gbnf_class_char(b, s->r[i][0]);
        if (!rc && s->r[i][1] > s->r[i][0])
            rc = hearth_buf_appends(b, "-");
        if (!rc && s->r[i][1] > s->r[i][0])
            rc = hearth_gbnf_class_char(b, s->r[i][1]);
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
            rc = hearth_gbnf_class_char(&alts, (uint32_t)(unsigned char)letters[k]);
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
    hearth_err *err;
    int depth;        /* the nesting, the schema's and the groups' */
    const cJSON *s;   /* the schema, for messages */
    const char *src;  /* the pattern */
    size_t i, end;    /* where the parse is; where the final '$' is */
    hearth_buf *b;
} pat;

static int pat_bad(pat *p, size_t at, const char *what)
{
    char msg[200];
    snprintf(msg, sizeof msg, "'pattern' with %s at offset %zu (not supported by hearth)", what, at);
    return hearth_json_schema_refuse(p->err, p->s, msg);
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
        return hearth_err_set(p->err, HEARTH_EINVAL, "json_schema: a 'pattern' with a byte that is not UTF-8 at offset %zu", at);
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
        rc = hearth_gbnf_literal(p->b, pend->data, pend->len);
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
    if (++p->depth > MAX_DEPTH) {
        p->depth--;
        return hearth_err_set(p->err, HEARTH_ELIMIT, "json_schema: nested more than %d levels deep", MAX_DEPTH);
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
    p->depth--;
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
                rc = hearth_gbnf_literal(p->b, text, n);
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

int hearth_json_schema_pattern_rule(const cJSON *s, int depth, hearth_buf *body, hearth_err *err)
{
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    if (!cJSON_IsString(pt))
        return hearth_json_schema_refuse(err, s, "'pattern' that is not a string");
    pat p = {.err = err, .depth = depth, .s = s, .src = pt->valuestring, .i = 1, .b = body};
    size_t len = strlen(p.src), slashes = 0;
    while (len >= 2 + slashes && p.src[len - 2 - slashes] == '\\')
        slashes++;
    if (len < 2 || p.src[0] != '^' || p.src[len - 1] != '$' || slashes % 2)
        return hearth_json_schema_refuse(err, s, "a 'pattern' that does not start with '^' and end with '$' (as llama.cpp requires)");
    p.end = len - 1;
    bool nullable;
    int rc = hearth_buf_appends(body, "\"\\\"\" (");
    if (!rc)
        rc = pat_alternatives(&p, true, &nullable);
    return rc ? rc : hearth_buf_appends(body, ") \"\\\"\" space");
}

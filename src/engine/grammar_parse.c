/* grammar_parse.c: GBNF text to the flat rules of grammar_impl.h.
 *
 * A recursive-descent parser over the text, one function per construct
 * (rule, alternatives, sequence, literal, class, repetition), building each
 * rule's elements in a growable vector of its own; the vectors are joined
 * into one array at the end. Groups become generated rules referenced where
 * they stand, and repetitions are rewritten into rules too, the way
 * llama.cpp does it: x* is R ::= x R | (empty), x+ is x R with that R, x? is
 * R ::= x | (empty), x{m,n} is m copies of x and then n - m nested optional
 * ones. The matcher then needs to know only references and character sets.
 *
 * After parsing, three checks make a grammar safe to match: every rule
 * referenced is defined, a root exists, and no rule can reach itself
 * without consuming a character (left recursion: the matcher's expansion
 * would never end). The last needs which rules can match the empty text,
 * found by iterating to a fixed point; the cycle search is iterative, so a
 * client's deep grammar cannot exhaust the C stack.
 *
 * Errors name the line and column, as "grammar: line 2, column 9: expecting
 * '::='", so a client can find the mistake. A rule defined twice keeps the
 * second definition, as llama.cpp's parser does.
 *
 * Rejected: building llama.cpp's nested vectors per alternative (more
 * allocations and pointers for the matcher to chase); recursion for the
 * cycle search (a grammar of 100k generated rules is a valid input). */
#include "engine/grammar_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prule {
    const char *name;       /* in the text; NULL for generated rules */
    size_t name_len;
    uint32_t owner;         /* generated: the named rule it belongs to (for messages) */
    hearth_gelem *v;
    size_t n, cap;
    bool defined;
    size_t first_use;       /* where it was first referenced (offset in the text) */
} prule;

typedef struct parser {
    const char *src, *p, *end;
    prule *rules;
    size_t n_rules, cap_rules;
    uint32_t *ranges;       /* pairs */
    size_t n_ranges, cap_ranges;
    size_t n_elems;
    uint32_t cur;           /* the named rule being parsed */
    hearth_err *err;
} parser;

static int fail_at(parser *ps, const char *at, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_at(parser *ps, const char *at, int code, const char *fmt, ...)
{
    int line = 1, col = 1;
    for (const char *q = ps->src; q < at && q < ps->end; q++) {
        if (*q == '\n')
            line++, col = 1;
        else
            col++;
    }
    char what[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return hearth_err_set(ps->err, code, "grammar: line %d, column %d: %s", line, col, what);
}

static int oom(parser *ps) { return hearth_err_set(ps->err, HEARTH_ENOMEM, "grammar: out of memory"); }

/* ---- rules and elements ---- */

static int new_rule(parser *ps, const char *name, size_t len, uint32_t *id)
{
    if (ps->n_rules >= HEARTH_GRAMMAR_MAX_ELEMS)
        return hearth_err_set(ps->err, HEARTH_ELIMIT, "grammar: more than %d rules", HEARTH_GRAMMAR_MAX_ELEMS);
    if (ps->n_rules == ps->cap_rules) {
        size_t cap = ps->cap_rules ? ps->cap_rules * 2 : 16;
        prule *r = realloc(ps->rules, cap * sizeof *r);
        if (!r)
            return oom(ps);
        ps->rules = r;
        ps->cap_rules = cap;
    }
    ps->rules[ps->n_rules] = (prule){.name = name, .name_len = len, .owner = ps->cur};
    *id = (uint32_t)ps->n_rules++;
    return HEARTH_OK;
}

/* The rule named text[0..len), made (undefined) when first seen. Names are
 * few next to elements, so a linear search is cheap enough; the text bound
 * caps the count. */
static int rule_by_name(parser *ps, const char *name, size_t len, uint32_t *id)
{
    for (size_t i = 0; i < ps->n_rules; i++) {
        const prule *r = &ps->rules[i];
        if (r->name && r->name_len == len && !memcmp(r->name, name, len)) {
            *id = (uint32_t)i;
            return HEARTH_OK;
        }
    }
    int rc = new_rule(ps, name, len, id);
    if (!rc)
        ps->rules[*id].first_use = (size_t)(name - ps->src);
    return rc;
}

static int push(parser *ps, uint32_t rule, hearth_gelem e)
{
    if (++ps->n_elems > HEARTH_GRAMMAR_MAX_ELEMS)
        return hearth_err_set(ps->err, HEARTH_ELIMIT, "grammar: more than %d elements once repetitions are expanded",
                              HEARTH_GRAMMAR_MAX_ELEMS);
    prule *r = &ps->rules[rule];
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        hearth_gelem *v = realloc(r->v, cap * sizeof *v);
        if (!v)
            return oom(ps);
        r->v = v;
        r->cap = cap;
    }
    r->v[r->n++] = e;
    return HEARTH_OK;
}

static int push_range(parser *ps, uint32_t lo, uint32_t hi)
{
    if (ps->n_ranges == ps->cap_ranges) {
        size_t cap = ps->cap_ranges ? ps->cap_ranges * 2 : 32;
        if (cap > (size_t)HEARTH_GRAMMAR_MAX_ELEMS)
            return hearth_err_set(ps->err, HEARTH_ELIMIT, "grammar: more than %d character ranges", HEARTH_GRAMMAR_MAX_ELEMS / 2);
        uint32_t *r = realloc(ps->ranges, cap * 2 * sizeof *r);
        if (!r)
            return oom(ps);
        ps->ranges = r;
        ps->cap_ranges = cap;
    }
    ps->ranges[2 * ps->n_ranges] = lo;
    ps->ranges[2 * ps->n_ranges + 1] = hi;
    ps->n_ranges++;
    return HEARTH_OK;
}

/* ---- lexing ---- */

static bool is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'; }

/* Skips blanks and # comments, and line ends too when newline_ok. */
static void skip_space(parser *ps, bool newline_ok)
{
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t') {
            ps->p++;
        } else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r')
                ps->p++;
        } else if (newline_ok && (c == '\n' || c == '\r')) {
            ps->p++;
        } else {
            break;
        }
    }
}

/* One UTF-8 character of the text into *cp. */
static int utf8_char(parser *ps, uint32_t *cp)
{
    const unsigned char *s = (const unsigned char *)ps->p;
    size_t left = (size_t)(ps->end - ps->p);
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!n || (size_t)n > left)
        return fail_at(ps, ps->p, HEARTH_EINVAL, "invalid UTF-8");
    uint32_t v = n == 1 ? c : c & (0x7fu >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return fail_at(ps, ps->p, HEARTH_EINVAL, "invalid UTF-8");
        v = v << 6 | (s[i] & 0x3f);
    }
    ps->p += n;
    *cp = v;
    return HEARTH_OK;
}

static int hex_digits(parser *ps, int n, uint32_t *cp)
{
    const char *at = ps->p;
    uint32_t v = 0;
    for (int i = 0; i < n; i++, ps->p++) {
        char c = ps->p < ps->end ? *ps->p : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return fail_at(ps, at, HEARTH_EINVAL, "expecting %d hex digits", n);
        v = v << 4 | (uint32_t)d;
    }
    *cp = v;
    return HEARTH_OK;
}

/* A character of a literal or class: an escape or one UTF-8 character. */
static int parse_char(parser *ps, uint32_t *cp)
{
    if (ps->p >= ps->end)
        return fail_at(ps, ps->p, HEARTH_EINVAL, "unexpected end of input");
    if (*ps->p != '\\')
        return utf8_char(ps, cp);
    const char *at = ps->p++;
    if (ps->p >= ps->end)
        return fail_at(ps, at, HEARTH_EINVAL, "unexpected end of input");
    char c = *ps->p++;
    switch (c) {
    case 'x': return hex_digits(ps, 2, cp);
    case 'u': return hex_digits(ps, 4, cp);
    case 'U': return hex_digits(ps, 8, cp);
    case 't': *cp = '\t'; return HEARTH_OK;
    case 'r': *cp = '\r'; return HEARTH_OK;
    case 'n': *cp = '\n'; return HEARTH_OK;
    case '\\': case '"': case '[': case ']': case '-':
        *cp = (uint32_t)c;
        return HEARTH_OK;
    default:
        return fail_at(ps, at, HEARTH_EINVAL, "unknown escape '\\%c'", c);
    }
}

static int parse_uint(parser *ps, long *out)
{
    const char *at = ps->p;
    long v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p++ - '0');
        if (v > HEARTH_GRAMMAR_MAX_ELEMS)
            return fail_at(ps, at, HEARTH_ELIMIT, "repetition count above %d", HEARTH_GRAMMAR_MAX_ELEMS);
    }
    if (ps->p == at)
        return fail_at(ps, at, HEARTH_EINVAL, "expecting an integer");
    *out = v;
    return HEARTH_OK;
}

/* ---- constructs ---- */

static int parse_alternates(parser *ps, uint32_t rule, bool nested);

static int parse_literal(parser *ps, uint32_t rule)
{
    const char *open = ps->p++;
    while (ps->p < ps->end && *ps->p != '"') {
        uint32_t cp;
        int rc = parse_char(ps, &cp);
        if (!rc)
            rc = push(ps, rule, (hearth_gelem){.type = GE_CHARS, .a = (uint32_t)ps->n_ranges, .b = 1});
        if (!rc)
            rc = push_range(ps, cp, cp);
        if (rc)
            return rc;
    }
    if (ps->p >= ps->end)
        return fail_at(ps, open, HEARTH_EINVAL, "unterminated literal");
    ps->p++;
    return HEARTH_OK;
}

static int parse_class(parser *ps, uint32_t rule)
{
    const char *open = ps->p++;
    hearth_gelem e = {.type = GE_CHARS, .a = (uint32_t)ps->n_ranges};
    if (ps->p < ps->end && *ps->p == '^')
        e.negated = 1, ps->p++;
    while (ps->p < ps->end && *ps->p != ']') {
        const char *at = ps->p;
        uint32_t lo, hi;
        int rc = parse_char(ps, &lo);
        if (rc)
            return rc;
        hi = lo;
        if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
            ps->p++;
            if ((rc = parse_char(ps, &hi)))
                return rc;
            if (hi < lo)
                return fail_at(ps, at, HEARTH_EINVAL, "character range ends before it starts");
        }
        if ((rc = push_range(ps, lo, hi)))
            return rc;
        e.b++;
    }
    if (ps->p >= ps->end)
        return fail_at(ps, open, HEARTH_EINVAL, "unterminated character class");
    ps->p++;
    return push(ps, rule, e);
}

/* A fresh rule holding item[0..n) followed by `tail` elements (a reference
 * to itself for x*, to the next optional for x{m,n}, or none), then an empty
 * alternative. */
static int optional_rule(parser *ps, const hearth_gelem *item, size_t n, bool self, int64_t next, uint32_t *id)
{
    int rc = new_rule(ps, NULL, 0, id);
    for (size_t i = 0; i < n && !rc; i++)
        rc = push(ps, *id, item[i]);
    if (!rc && self)
        rc = push(ps, *id, (hearth_gelem){.type = GE_REF, .a = *id});
    if (!rc && next >= 0)
        rc = push(ps, *id, (hearth_gelem){.type = GE_REF, .a = (uint32_t)next});
    if (!rc)
        rc = push(ps, *id, (hearth_gelem){.type = GE_ALT});
    if (!rc)
        rc = push(ps, *id, (hearth_gelem){.type = GE_END});
    return rc;
}

/* Rewrites the item rule's elements [start, n) as min..max (max < 0: no
 * bound) repetitions of itself. */
static int repeat(parser *ps, uint32_t rule, size_t start, long min, long max)
{
    prule *r = &ps->rules[rule];
    size_t n = r->n - start;
    hearth_gelem *item = malloc((n ? n : 1) * sizeof *item);
    if (!item)
        return oom(ps);
    if (n) /* an empty item (r->v may still be NULL): nothing to copy */
        memcpy(item, r->v + start, n * sizeof *item);
    r->n = start;
    ps->n_elems -= n;
    int rc = HEARTH_OK;
    for (long k = 0; k < min && !rc; k++)
        for (size_t i = 0; i < n && !rc; i++)
            rc = push(ps, rule, item[i]);
    uint32_t id;
    if (!rc && max < 0) {
        rc = optional_rule(ps, item, n, true, -1, &id);
        if (!rc)
            rc = push(ps, rule, (hearth_gelem){.type = GE_REF, .a = id});
    } else if (!rc && max > min) {
        /* innermost first: R_k ::= item R_{k+1} | (empty) */
        int64_t next = -1;
        for (long k = max - min; k > 0 && !rc; k--) {
            rc = optional_rule(ps, item, n, false, next, &id);
            next = id;
        }
        if (!rc)
            rc = push(ps, rule, (hearth_gelem){.type = GE_REF, .a = (uint32_t)next});
    }
    free(item);
    return rc;
}

static int parse_sequence(parser *ps, uint32_t rule, bool nested)
{
    size_t last = SIZE_MAX; /* where the last item's elements start */
    while (ps->p < ps->end) {
        const char *at = ps->p;
        char c = *ps->p;
        int rc = HEARTH_OK;
        size_t here = ps->rules[rule].n;
        if (c == '"') {
            rc = parse_literal(ps, rule);
            last = here;
        } else if (c == '[') {
            rc = parse_class(ps, rule);
            last = here;
        } else if (is_word(c)) {
            while (ps->p < ps->end && is_word(*ps->p))
                ps->p++;
            uint32_t id;
            rc = rule_by_name(ps, at, (size_t)(ps->p - at), &id);
            if (!rc)
                rc = push(ps, rule, (hearth_gelem){.type = GE_REF, .a = id});
            last = here;
        } else if (c == '(') {
            ps->p++;
            skip_space(ps, true);
            uint32_t id;
            rc = new_rule(ps, NULL, 0, &id);
            if (!rc)
                rc = parse_alternates(ps, id, true);
            if (!rc && (ps->p >= ps->end || *ps->p != ')'))
                rc = fail_at(ps, ps->p, HEARTH_EINVAL, "expecting ')' to close the group opened at column %d",
                             (int)(at - ps->src) + 1);
            if (!rc) {
                ps->p++;
                rc = push(ps, rule, (hearth_gelem){.type = GE_REF, .a = id});
            }
            last = here;
        } else if (c == '.') {
            ps->p++;
            rc = push(ps, rule, (hearth_gelem){.type = GE_CHARS, .negated = 1, .a = (uint32_t)ps->n_ranges});
            last = here;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == SIZE_MAX)
                return fail_at(ps, at, HEARTH_EINVAL, "expecting an item before '%c'", c);
            long min = c == '+' ? 1 : 0, max = c == '?' ? 1 : -1;
            ps->p++;
            if (c == '{') {
                skip_space(ps, nested);
                rc = parse_uint(ps, &min);
                max = min;
                skip_space(ps, nested);
                if (!rc && ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps, nested);
                    max = -1;
                    if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
                        rc = parse_uint(ps, &max);
                    skip_space(ps, nested);
                }
                if (!rc && (ps->p >= ps->end || *ps->p != '}'))
                    rc = fail_at(ps, ps->p, HEARTH_EINVAL, "expecting '}'");
                if (!rc && max >= 0 && max < min)
                    rc = fail_at(ps, at, HEARTH_EINVAL, "repetition {%ld,%ld}: the maximum is below the minimum", min, max);
                if (!rc)
                    ps->p++;
            }
            if (!rc)
                rc = repeat(ps, rule, last, min, max);
            last = SIZE_MAX; /* x** would repeat a repetition: llama.cpp refuses it too */
        } else {
            break;
        }
        if (rc)
            return rc;
        skip_space(ps, nested);
    }
    return HEARTH_OK;
}

static int parse_alternates(parser *ps, uint32_t rule, bool nested)
{
    int rc = parse_sequence(ps, rule, nested);
    while (!rc && ps->p < ps->end && *ps->p == '|') {
        ps->p++;
        skip_space(ps, true);
        rc = push(ps, rule, (hearth_gelem){.type = GE_ALT});
        if (!rc)
            rc = parse_sequence(ps, rule, nested);
    }
    return rc ? rc : push(ps, rule, (hearth_gelem){.type = GE_END});
}

static int parse_rule(parser *ps)
{
    const char *name = ps->p;
    while (ps->p < ps->end && is_word(*ps->p))
        ps->p++;
    if (ps->p == name)
        return fail_at(ps, name, HEARTH_EINVAL, "expecting a rule name");
    uint32_t id;
    int rc = rule_by_name(ps, name, (size_t)(ps->p - name), &id);
    if (rc)
        return rc;
    skip_space(ps, false);
    if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3) != 0)
        return fail_at(ps, ps->p, HEARTH_EINVAL, "expecting '::=' after the rule name '%.*s'", (int)(ps->p - name), name);
    ps->p += 3;
    skip_space(ps, true);
    prule *r = &ps->rules[id];
    ps->n_elems -= r->n; /* a second definition replaces the first */
    r->n = 0;
    r->defined = true;
    ps->cur = id;
    if ((rc = parse_alternates(ps, id, false)))
        return rc;
    if (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r')
        return fail_at(ps, ps->p, HEARTH_EINVAL, "expecting the end of the line, found '%c'", *ps->p);
    return HEARTH_OK;
}

/* ---- checks ---- */

static const char *rule_label(const parser *ps, uint32_t r, char *buf, size_t cap)
{
    const prule *x = &ps->rules[r];
    if (x->name)
        snprintf(buf, cap, "rule '%.*s'", (int)(x->name_len > 100 ? 100 : x->name_len), x->name);
    else
        snprintf(buf, cap, "a group or repetition in rule '%.*s'",
                 (int)(ps->rules[x->owner].name_len > 100 ? 100 : ps->rules[x->owner].name_len), ps->rules[x->owner].name);
    return buf;
}

/* Which rules match the empty text, to a fixed point. */
static void find_nullable(const hearth_grammar *g, bool *nullable)
{
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nullable[r])
                continue;
            bool alt_ok = true;
            for (uint32_t i = g->rule_start[r];; i++) {
                const hearth_gelem *e = &g->el[i];
                if (hearth_gelem_is_end(e)) {
                    if (alt_ok) {
                        nullable[r] = changed = true;
                        break;
                    }
                    if (e->type == GE_END)
                        break;
                    alt_ok = true;
                } else if (e->type == GE_CHARS || !nullable[e->a]) {
                    alt_ok = false;
                }
            }
        }
    }
}

/* The rules r can start with: each call returns the next rule referenced,
 * in any alternative of r, before an element that must consume a
 * character; *pos walks r's elements. UINT32_MAX when none is left. */
static uint32_t next_left_ref(const hearth_grammar *g, const bool *nullable, uint32_t r, uint32_t *pos)
{
    bool blocked = false;
    for (uint32_t i = *pos;; i++) {
        const hearth_gelem *e = &g->el[i];
        if (hearth_gelem_is_end(e)) {
            if (e->type == GE_END) {
                *pos = i;
                return UINT32_MAX;
            }
            blocked = false;
            continue;
        }
        if (blocked)
            continue;
        if (e->type == GE_CHARS) {
            blocked = true;
            continue;
        }
        *pos = i + 1;
        if (!nullable[e->a]) /* the rest of this alternative is not at its left edge */
            while (!hearth_gelem_is_end(&g->el[*pos]))
                (*pos)++;
        return e->a;
    }
}

/* A rule that reaches itself through left edges; UINT32_MAX when none.
 * Iterative depth-first search: color 1 on the path, 2 done. */
static uint32_t find_left_recursion(const hearth_grammar *g, const bool *nullable, uint8_t *color, uint32_t *stk, uint32_t *it)
{
    for (uint32_t s = 0; s < g->n_rules; s++) {
        if (color[s])
            continue;
        size_t d = 0;
        stk[d] = s;
        it[d] = g->rule_start[s];
        color[s] = 1;
        d = 1;
        while (d) {
            uint32_t r = stk[d - 1];
            uint32_t x = next_left_ref(g, nullable, r, &it[d - 1]);
            if (x == UINT32_MAX) {
                color[r] = 2;
                d--;
            } else if (color[x] == 1) {
                return x;
            } else if (!color[x]) {
                color[x] = 1;
                stk[d] = x;
                it[d] = g->rule_start[x];
                d++;
            }
        }
    }
    return UINT32_MAX;
}

static int check(parser *ps, hearth_grammar *g)
{
    int rc = HEARTH_ENOMEM;
    bool *nullable = calloc(g->n_rules, sizeof *nullable);
    uint8_t *color = calloc(g->n_rules, 1);
    uint32_t *stk = malloc(g->n_rules * sizeof *stk), *it = malloc(g->n_rules * sizeof *it);
    if (!nullable || !color || !stk || !it) {
        oom(ps);
        goto out;
    }
    find_nullable(g, nullable);
    uint32_t bad = find_left_recursion(g, nullable, color, stk, it);
    if (bad != UINT32_MAX) {
        char label[300];
        rc = hearth_err_set(ps->err, HEARTH_EINVAL, "grammar: %s is left-recursive (it can reach itself before matching a character)",
                            rule_label(ps, bad, label, sizeof label));
        goto out;
    }
    rc = HEARTH_OK;
out:
    free(nullable);
    free(color);
    free(stk);
    free(it);
    return rc;
}

/* ---- the whole grammar ---- */

static hearth_grammar *link_rules(parser *ps)
{
    hearth_grammar *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    size_t total = 0;
    for (size_t i = 0; i < ps->n_rules; i++)
        total += ps->rules[i].n;
    g->el = malloc((total ? total : 1) * sizeof *g->el);
    g->rule_start = malloc(ps->n_rules * sizeof *g->rule_start);
    g->ranges = malloc((ps->n_ranges ? ps->n_ranges : 1) * 2 * sizeof *g->ranges);
    if (!g->el || !g->rule_start || !g->ranges) {
        hearth_grammar_free(g);
        return NULL;
    }
    for (size_t i = 0; i < ps->n_rules; i++) {
        g->rule_start[i] = g->n_el;
        if (ps->rules[i].n)
            memcpy(g->el + g->n_el, ps->rules[i].v, ps->rules[i].n * sizeof *g->el);
        g->n_el += (uint32_t)ps->rules[i].n;
    }
    g->n_rules = (uint32_t)ps->n_rules;
    if (ps->n_ranges)
        memcpy(g->ranges, ps->ranges, ps->n_ranges * 2 * sizeof *g->ranges);
    g->n_ranges = (uint32_t)ps->n_ranges;
    return g;
}

hearth_grammar *hearth_grammar_parse(const char *text, size_t n, hearth_err *err)
{
    if (n > HEARTH_GRAMMAR_MAX_TEXT) {
        hearth_err_set(err, HEARTH_ELIMIT, "grammar: %zu bytes; at most %zu", n, HEARTH_GRAMMAR_MAX_TEXT);
        return NULL;
    }
    parser ps = {.src = text, .p = text, .end = text + n, .err = err};
    hearth_grammar *g = NULL;
    int rc = HEARTH_OK;
    skip_space(&ps, true);
    while (!rc && ps.p < ps.end) {
        rc = parse_rule(&ps);
        skip_space(&ps, true);
    }
    uint32_t root = UINT32_MAX;
    for (size_t i = 0; i < ps.n_rules && !rc; i++) {
        prule *r = &ps.rules[i];
        if (r->name && !r->defined)
            rc = fail_at(&ps, ps.src + r->first_use, HEARTH_EINVAL, "undefined rule '%.*s'",
                         (int)(r->name_len > 100 ? 100 : r->name_len), r->name);
        else if (r->name && r->name_len == 4 && !memcmp(r->name, "root", 4))
            root = (uint32_t)i;
    }
    if (!rc && root == UINT32_MAX)
        rc = hearth_err_set(err, HEARTH_EINVAL, "grammar: no 'root' rule (matching starts there)");
    if (!rc && !(g = link_rules(&ps)))
        rc = oom(&ps);
    if (!rc) {
        g->root = root;
        rc = check(&ps, g);
    }
    if (!rc && !(g->text = malloc(n + 1)))
        rc = oom(&ps);
    if (!rc) {
        memcpy(g->text, text, n);
        g->text[n] = '\0';
    }
    for (size_t i = 0; i < ps.n_rules; i++)
        free(ps.rules[i].v);
    free(ps.rules);
    free(ps.ranges);
    if (rc) {
        hearth_grammar_free(g);
        return NULL;
    }
    return g;
}

void hearth_grammar_free(hearth_grammar *g)
{
    if (!g)
        return;
    free(g->el);
    free(g->rule_start);
    free(g->ranges);
    free(g->text);
    free(g);
}

const char *hearth_grammar_text(const hearth_grammar *g) { return g->text; }

int hearth_grammar_n_rules(const hearth_grammar *g) { return (int)g->n_rules; }

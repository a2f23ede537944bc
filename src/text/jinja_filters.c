/* jinja_filters.c: jinja2's built-in filters and tests, as jinja2 3.1
 * defines them (filters.py, tests.py), with transformers' tojson.
 *
 * Filters that jinja2 writes as generators (map, select, reject,
 * selectattr, rejectattr, reverse) give lists here: templates only iterate,
 * join, count or `|list` them, which read the same. Sorting (sort,
 * dictsort) is a stable merge sort with Python's comparisons, case-folded
 * by default as jinja2 does. */
#include "text/jinja_int.h"
#include "text/jinja_str.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST, F_FLOAT, F_INDENT,
    F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR,
    F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON,
    F_TRIM, F_UNIQUE, F_UPPER, F_WORDCOUNT, F_BATCH, F_CENTER, F_COUNT_,
};
static const char *const filter_names[] = {
    "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float", "indent",
    "int", "items", "join", "last", "length", "list", "lower", "map", "max", "min", "reject", "rejectattr",
    "replace", "reverse", "round", "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson",
    "trim", "unique", "upper", "wordcount", "batch", "center",
};
_Static_assert(sizeof filter_names / sizeof filter_names[0] == F_COUNT_, "filter table");

enum {
    T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_FLOAT, T_MAPPING, T_ITERABLE, T_SEQUENCE,
    T_BOOLEAN, T_TRUE, T_FALSE, T_EQ, T_EQUALTO, T_EQ2, T_NE, T_NE2, T_LT, T_LT2, T_LESSTHAN, T_GT, T_GT2,
    T_GREATERTHAN, T_LE, T_LE2, T_GE, T_GE2, T_IN, T_ODD, T_EVEN, T_DIVISIBLEBY, T_CALLABLE, T_SAMEAS, T_LOWER,
    T_UPPER, T_ESCAPED, T_FILTER, T_TEST, T_COUNT_,
};
static const char *const test_names[] = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
    "boolean", "true", "false", "eq", "equalto", "==", "ne", "!=", "lt", "<", "lessthan", "gt", ">",
    "greaterthan", "le", "<=", "ge", ">=", "in", "odd", "even", "divisibleby", "callable", "sameas", "lower",
    "upper", "escaped", "filter", "test",
};
_Static_assert(sizeof test_names / sizeof test_names[0] == T_COUNT_, "test table");

static int find_name(const char *const *names, int count, const char *s, size_t n)
{
    for (int i = 0; i < count; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0)
            return i;
    return -1;
}
int jinja_filter_id(const char *name, size_t n) { return find_name(filter_names, F_COUNT_, name, n); }
int jinja_test_id(const char *name, size_t n) { return find_name(test_names, T_COUNT_, name, n); }

/* argument by position (after the value) or keyword */
typedef struct fargs {
    const jv *args;
    size_t nargs;
    const jnode *const *kwn;
    const jv *kwv;
    size_t nkw;
} fargs;

static jv arg(const fargs *A, size_t pos, const char *name, jv dflt)
{
    if (pos < A->nargs)
        return A->args[pos];
    for (size_t i = 0; i < A->nkw; i++)
        if (strlen(name) == A->kwn[i]->sn && memcmp(A->kwn[i]->s, name, A->kwn[i]->sn) == 0)
            return A->kwv[i];
    return dflt;
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }

/* jinja2's make_attrgetter: "a.b.0" walks items/attributes; ints index */
static jv attr_path(jx *J, const jnode *at, jv v, jv path)
{
    if (path.t == JV_INT)
        return jinja_getitem(J, at, v, path);
    if (path.t != JV_STR)
        jx_fail(J, at, HEARTH_EINVAL, "attribute must be a string or an integer");
    const char *p = path.s.p, *e = p + path.s.n;
    while (p <= e) {
        const char *dot = memchr(p, '.', (size_t)(e - p));
        if (!dot)
            dot = e;
        jv key = jv_str(p, (size_t)(dot - p));
        bool digits = dot > p;
        for (const char *q = p; q < dot; q++)
            digits = digits && *q >= '0' && *q <= '9';
        if (digits && dot - p < 18)
            key = jv_int(strtoll(p, NULL, 10));
        if (v.t == JV_UNDEF)
            return v;
        v = jinja_getitem(J, at, v, key);
        p = dot + 1;
    }
    return v;
}

/* a sort key: the attribute, lower-cased when not case-sensitive */
static jv sort_key(jx *J, const jnode *at, jv v, jv attribute, bool case_sensitive)
{
    if (attribute.t != JV_NONE && attribute.t != JV_UNDEF)
        v = attr_path(J, at, v, attribute);
    if (!case_sensitive && v.t == JV_STR)
        v = js_case(J, v, 0);
    return v;
}

static void merge_sort(jx *J, const jnode *at, jv *keys, size_t *idx, size_t *tmp, size_t n, bool reverse)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) {
                jx_step(J, at);
                int c = jv_cmp(J, at, keys[idx[b]], keys[idx[a]]);
                bool take_b = reverse ? c > 0 : c < 0;
                tmp[o++] = take_b ? idx[b++] : idx[a++];
            }
            while (a < mid)
                tmp[o++] = idx[a++];
            while (b < hi)
                tmp[o++] = idx[b++];
        }
        memcpy(idx, tmp, n * sizeof *idx);
    }
}

/* sorted copy of items by keys */
static jv sorted(jx *J, const jnode *at, const jv *items, jv *keys, size_t n, bool reverse)
{
    size_t *idx = jx_alloc(J, (n + 1) * sizeof *idx), *tmp = jx_alloc(J, (n + 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    merge_sort(J, at, keys, idx, tmp, n, reverse);
    jv out = jv_list(J, n);
    for (size_t i = 0; i < n; i++)
        jl_push(J, out.l, items[idx[i]]);
    return out;
}

static void items_of(jx *J, const jnode *at, jv v, const jv **items, size_t *n)
{
    if (v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || v.t == JV_TUPLE || v.t == JV_DICT)
        jv_items(J, at, v, items, n);
    else
        jx_fail(J, at, HEARTH_EINVAL, "'%s' object is not iterable", jv_type_name(v));
}

static jv html_escape(jx *J, jv s)
{
    if (s.markup)
        return s;
    jsb b = {0};
    for (size_t i = 0; i < s.s.n; i++) {
        char c = s.s.p[i];
        switch (c) {
        case '&': jsb_addz(J, &b, "&amp;"); break;
        case '<': jsb_addz(J, &b, "&lt;"); break;
        case '>': jsb_addz(J, &b, "&gt;"); break;
        case '"': jsb_addz(J, &b, "&#34;"); break;
        case '\'': jsb_addz(J, &b, "&#39;"); break;
        default: jsb_addc(J, &b, c);
        }
    }
    jv r = jsb_str(&b);
    r.markup = 1;
    return r;
}

static jv length_of(jx *J, const jnode *at, jv v)
{
    switch (v.t) {
    case JV_UNDEF: return jv_int(0);
    case JV_STR: return jv_int((int64_t)ju_len(v.s.p, v.s.n));
    case JV_LIST:
    case JV_TUPLE:
        if (v.gen)
            jx_fail(J, at, HEARTH_EINVAL, "object of type 'generator' has no len()");
        return jv_int((int64_t)v.l->n);
    case JV_DICT:
    case JV_NS: return jv_int((int64_t)v.d->n);
    default: jx_fail(J, at, HEARTH_EINVAL, "object of type '%s' has no len()", jv_type_name(v));
    }
}

/* Python's int(str): optional whitespace, sign, digits with single underscores */
static bool parse_int(jv s, int64_t *out)
{
    const char *p = s.s.p, *e = p + s.s.n;
    while (p < e && (*p == ' ' || (*p >= 9 && *p <= 13)))
        p++;
    while (e > p && (e[-1] == ' ' || (e[-1] >= 9 && e[-1] <= 13)))
        e--;
    bool neg = false;
    if (p < e && (*p == '+' || *p == '-'))
        neg = *p++ == '-';
    if (p >= e)
        return false;
    uint64_t v = 0;
    bool prev_digit = false;
    for (; p < e; p++) {
        if (*p == '_' && prev_digit && p + 1 < e && p[1] != '_') {
            prev_digit = false;
            continue;
        }
        if (*p < '0' || *p > '9')
            return false;
        if (v > (uint64_t)INT64_MAX / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
        prev_digit = true;
    }
    if (!prev_digit || v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

static bool parse_float(jv s, double *out)
{
    char buf[128];
    jv t = js_strip(s, jv_none(), 3);
    if (!t.s.n || t.s.n >= sizeof buf)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < t.s.n; i++)
        if (t.s.p[i] != '_')
            buf[o++] = t.s.p[i];
    buf[o] = 0;
    char *end;
    *out = strtod(buf, &end);
    if (*end)
        return false;
    for (size_t i = 0; i < o; i++) /* strtod reads hex and "infinity"/"nan" forms Python spells differently */
        if (buf[i] == 'x' || buf[i] == 'X')
            return false;
    return true;
}

static jv do_tojson(jx *J, const jnode *at, jv v, const fargs *A)
{
    jv indent = arg(A, 1, "indent", jv_none());
    jv seps = arg(A, 2, "separators", jv_none());
    jv sortk = arg(A, 3, "sort_keys", jv_bool(false));
    if (arg(A, 0, "ensure_ascii", jv_bool(false)).t == JV_BOOL && jv_truthy(arg(A, 0, "ensure_ascii", jv_bool(false))))
        jx_fail(J, at, HEARTH_EINVAL, "tojson: ensure_ascii=True is not supported");
    char ind[64];
    const char *ip = NULL;
    size_t in = 0;
    if (indent.t == JV_INT) {
        in = indent.i < 0 ? 0 : indent.i > 32 ? 32 : (size_t)indent.i;
        memset(ind, ' ', in);
        ip = ind;
    } else if (indent.t == JV_STR) {
        ip = indent.s.p;
        in = indent.s.n;
    } else if (indent.t != JV_NONE) {
        jx_fail(J, at, HEARTH_EINVAL, "tojson: indent must be an int, a string or None");
    }
    char isep[64], ksep[64];
    strcpy(isep, ip ? "," : ", ");
    strcpy(ksep, ": ");
    if (seps.t != JV_NONE) {
        if (!jv_is_seq(seps) || seps.l->n != 2 || seps.l->v[0].t != JV_STR || seps.l->v[1].t != JV_STR ||
            seps.l->v[0].s.n >= sizeof isep || seps.l->v[1].s.n >= sizeof ksep)
            jx_fail(J, at, HEARTH_EINVAL, "tojson: separators must be a pair of short strings");
        memcpy(isep, seps.l->v[0].s.p, seps.l->v[0].s.n);
        isep[seps.l->v[0].s.n] = 0;
        memcpy(ksep, seps.l->v[1].s.p, seps.l->v[1].s.n);
        ksep[seps.l->v[1].s.n] = 0;
    }
    jsb b = {0};
    jv_tojson(J, at, &b, v, ip, in, isep, ksep, jv_truthy(sortk), 0);
    return jsb_str(&b);
}

static jv do_indent(jx *J, jv s, const fargs *A)
{
    jv width = arg(A, 0, "width", jv_int(4));
    bool first = jv_truthy(arg(A, 1, "first", jv_bool(false)));
    bool blank = jv_truthy(arg(A, 2, "blank", jv_bool(false)));
    jsb ind = {0};
    if (width.t == JV_STR)
        jsb_add(J, &ind, width.s.p, width.s.n);
    else
        for (int64_t i = 0; i < (width.t == JV_INT ? width.i : 4) && i < 256; i++)
            jsb_addc(J, &ind, ' ');
    jsb t = {0};
    jsb_add(J, &t, s.s.p, s.s.n);
    jsb_addc(J, &t, '\n');
    jv lines = js_splitlines(J, jsb_str(&t));
    jsb b = {0};
    if (first)
        jsb_add(J, &b, ind.p, ind.n);
    for (size_t i = 0; i < lines.l->n; i++) {
        jv l = lines.l->v[i];
        if (i) {
            jsb_addc(J, &b, '\n');
            if (blank || l.s.n)
                jsb_add(J, &b, ind.p, ind.n);
        }
        jsb_add(J, &b, l.s.p, l.s.n);
    }
    return jsb_str(&b);
}

static jv do_round(jx *J, const jnode *at, jv v, const fargs *A)
{
    jv prec = arg(A, 0, "precision", jv_int(0));
    jv method = arg(A, 1, "method", jv_strz("common"));
    if (!is_num(v))
        jx_fail(J, at, HEARTH_EINVAL, "round: expected a number, got %s", jv_type_name(v));
    if (prec.t != JV_INT)
        jx_fail(J, at, HEARTH_EINVAL, "round: precision must be an integer");
    double x = v.t == JV_FLOAT ? v.f : (double)(v.t == JV_INT ? v.i : v.b);
    int64_t p = prec.i;
    if (method.t != JV_STR)
        jx_fail(J, at, HEARTH_EINVAL, "round: method must be common, ceil or floor");
    if (method.s.n == 6 && memcmp(method.s.p, "common", 6) == 0) {
        if (v.t != JV_FLOAT)
            return v.t == JV_BOOL ? jv_int(v.b) : v; /* round(int, n) stays an int for n >= 0 */
        if (p > 300 || p < -300)
            return jv_float(x);
        char buf[512];
        if (p >= 0) {
            snprintf(buf, sizeof buf, "%.*f", (int)p, x);
            return jv_float(strtod(buf, NULL));
        }
        double m = pow(10, (double)-p);
        return jv_float(nearbyint(x / m) * m);
    }
    double m = pow(10, (double)p);
    if (method.s.n == 4 && memcmp(method.s.p, "ceil", 4) == 0)
        return jv_float(ceil(x * m) / m);
    if (method.s.n == 5 && memcmp(method.s.p, "floor", 5) == 0)
        return jv_float(floor(x * m) / m);
    jx_fail(J, at, HEARTH_EINVAL, "round: method must be common, ceil or floor");
}

/* select/reject/selectattr/rejectattr */
static jv do_select(jx *J, const jnode *at, jv v, const fargs *A, bool attr, bool want)
{
    const jv *items;
    size_t n;
    if (!jv_truthy(v)) /* jinja2: `if value:` before iterating */
        return jv_list(J, 0);
    items_of(J, at, v, &items, &n);
    size_t base = attr ? 1 : 0;
    jv path = attr ? arg(A, 0, "attribute", jv_none()) : jv_none();
    int tid = -1;
    if (A->nargs > base) {
        jv tn = A->args[base];
        if (tn.t != JV_STR || (tid = jinja_test_id(tn.s.p, tn.s.n)) < 0)
            jx_fail(J, at, HEARTH_EINVAL, "no test named '%.*s'", tn.t == JV_STR ? (int)tn.s.n : 1,
                    tn.t == JV_STR ? tn.s.p : "?");
    }
    jv out = jv_list(J, 0);
    for (size_t i = 0; i < n; i++) {
        jx_step(J, at);
        jv x = attr ? attr_path(J, at, items[i], path) : items[i];
        bool ok = tid < 0 ? jv_truthy(x)
                          : jinja_test(J, at, tid, x, A->args + base + 1, A->nargs > base + 1 ? A->nargs - base - 1 : 0);
        if (ok == want)
            jl_push(J, out.l, items[i]);
    }
    return out;
}

static jv do_map(jx *J, const jnode *at, jv v, const fargs *A)
{
    const jv *items;
    size_t n;
    if (!jv_truthy(v)) /* jinja2: `if value:` before iterating */
        return jv_list(J, 0);
    items_of(J, at, v, &items, &n);
    jv out = jv_list(J, n);
    jv path = arg(A, 99, "attribute", jv_undef(NULL, 0));
    if (path.t != JV_UNDEF) {
        jv dflt = arg(A, 99, "default", jv_undef(NULL, 0));
        for (size_t i = 0; i < n; i++) {
            jx_step(J, at);
            jv x = attr_path(J, at, items[i], path);
            jl_push(J, out.l, x.t == JV_UNDEF && dflt.t != JV_UNDEF ? dflt : x);
        }
        return out;
    }
    if (!A->nargs || A->args[0].t != JV_STR)
        jx_fail(J, at, HEARTH_EINVAL, "map: expected a filter name or attribute=");
    int fid = jinja_filter_id(A->args[0].s.p, A->args[0].s.n);
    if (fid < 0)
        jx_fail(J, at, HEARTH_EINVAL, "no filter named '%.*s'", (int)A->args[0].s.n, A->args[0].s.p);
    for (size_t i = 0; i < n; i++) {
        jx_step(J, at);
        jl_push(J, out.l, jinja_filter(J, at, fid, items[i], A->args + 1, A->nargs - 1, A->kwn, A->kwv, A->nkw));
    }
    return out;
}

static jv do_minmax(jx *J, const jnode *at, jv v, const fargs *A, bool want_max)
{
    const jv *items;
    size_t n;
    items_of(J, at, v, &items, &n);
    bool cs = jv_truthy(arg(A, 0, "case_sensitive", jv_bool(false)));
    jv path = arg(A, 1, "attribute", jv_none());
    if (!n)
        return jv_undef(NULL, 0);
    size_t best = 0;
    jv bk = sort_key(J, at, items[0], path, cs);
    for (size_t i = 1; i < n; i++) {
        jx_step(J, at);
        jv k = sort_key(J, at, items[i], path, cs);
        int c = jv_cmp(J, at, k, bk);
        if (want_max ? c > 0 : c < 0) {
            best = i;
            bk = k;
        }
    }
    return items[best];
}

static jv filter_impl(jx *J, const jnode *at, int fid, jv v, const jv *args, size_t nargs, const jnode *const *kwn,
                      const jv *kwv, size_t nkw)
{
    fargs A = {args, nargs, kwn, kwv, nkw};
    switch (fid) {
    case F_ABS:
        if (v.t == JV_INT) {
            if (v.i == INT64_MIN)
                jx_fail(J, at, HEARTH_EINVAL, "integer overflow (hearth's integers are 64-bit)");
            return jv_int(v.i < 0 ? -v.i : v.i);
        }
        if (v.t == JV_FLOAT)
            return jv_float(fabs(v.f));
        if (v.t == JV_BOOL)
            return jv_int(v.b);
        jx_fail(J, at, HEARTH_EINVAL, "bad operand type for abs(): '%s'", jv_type_name(v));
    case F_ATTR: {
        jv name = arg(&A, 0, "name", jv_none());
        if (name.t != JV_STR)
            jx_fail(J, at, HEARTH_EINVAL, "attr: expected a string name");
        if (v.t == JV_UNDEF)
            return v;
        if (v.t == JV_NS) {
            long i = jd_finds(v.d, name.s.p, name.s.n);
            return i >= 0 ? v.d->v[i] : jv_undef(name.s.p, name.s.n);
        }
        if (v.t == JV_LOOP)
            return jinja_getattr(J, at, v, name.s.p, name.s.n);
        return jinja_method(J, v, name.s.p, name.s.n);
    }
    case F_CAPITALIZE: return js_case(J, jv_as_str(J, v), 2);
    case F_UPPER: return js_case(J, jv_as_str(J, v), 1);
    case F_LOWER: return js_case(J, jv_as_str(J, v), 0);
    case F_TITLE: {
        /* jinja2: each word after [-\s({[<]+ gets item[0].upper() + item[1:].lower() */
        jv s = jv_as_str(J, v);
        jsb b = {0};
        bool start = true;
        for (size_t i = 0; i < s.s.n;) {
            int32_t cp = js_next(s.s.p, s.s.n, &i);
            bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || jinja_py_space(cp);
            js_put(J, &b, sep ? cp : start ? js_upper(cp) : js_lower(cp));
            start = sep;
        }
        return jsb_str(&b);
    }
    case F_COUNT:
    case F_LENGTH: return length_of(J, at, v);
    case F_D:
    case F_DEFAULT: {
        jv dflt = arg(&A, 0, "default_value", jv_str("", 0));
        bool boolean = jv_truthy(arg(&A, 1, "boolean", jv_bool(false)));
        if (v.t == JV_UNDEF || (boolean && !jv_truthy(v)))
            return dflt;
        return v;
    }
    case F_DICTSORT: {
        if (v.t != JV_DICT)
            jx_fail(J, at, HEARTH_EINVAL, "dictsort: expected a mapping, got %s", jv_type_name(v));
        bool cs = jv_truthy(arg(&A, 0, "case_sensitive", jv_bool(false)));
        jv by = arg(&A, 1, "by", jv_strz("key"));
        bool rev = jv_truthy(arg(&A, 2, "reverse", jv_bool(false)));
        bool by_value = by.t == JV_STR && by.s.n == 5 && memcmp(by.s.p, "value", 5) == 0;
        if (!by_value && !(by.t == JV_STR && by.s.n == 3 && memcmp(by.s.p, "key", 3) == 0))
            jx_fail(J, at, HEARTH_EINVAL, "You can only sort by either \"key\" or \"value\"");
        size_t n = v.d->n;
        jv *pairs = jx_alloc(J, (n + 1) * sizeof *pairs), *keys = jx_alloc(J, (n + 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++) {
            jv t = jv_list(J, 2);
            t.t = JV_TUPLE;
            jl_push(J, t.l, v.d->k[i]);
            jl_push(J, t.l, v.d->v[i]);
            pairs[i] = t;
            keys[i] = sort_key(J, at, by_value ? v.d->v[i] : v.d->k[i], jv_none(), cs);
        }
        return sorted(J, at, pairs, keys, n, rev);
    }
    case F_E:
    case F_ESCAPE: return html_escape(J, jv_as_str(J, v));
    case F_SAFE: {
        jv r = jv_as_str(J, v);
        r.markup = 1;
        return r;
    }
    case F_STRING: return jv_as_str(J, v);
    case F_FIRST:
    case F_LAST: {
        const jv *items;
        size_t n;
        if (fid == F_LAST && v.gen)
            jx_fail(J, at, HEARTH_EINVAL, "'generator' object is not reversible");
        items_of(J, at, v, &items, &n);
        if (!n)
            return jv_undef(NULL, 0);
        return fid == F_FIRST ? items[0] : items[n - 1];
    }
    case F_FLOAT: {
        jv dflt = arg(&A, 0, "default", jv_float(0.0));
        double d;
        if (v.t == JV_FLOAT)
            return v;
        if (v.t == JV_INT || v.t == JV_BOOL)
            return jv_float(v.t == JV_INT ? (double)v.i : v.b);
        if (v.t == JV_STR && parse_float(v, &d))
            return jv_float(d);
        return dflt;
    }
    case F_INT: {
        jv dflt = arg(&A, 0, "default", jv_int(0));
        jv base = arg(&A, 1, "base", jv_int(10));
        int64_t i;
        double d;
        if (base.t != JV_INT || base.i != 10)
            jx_fail(J, at, HEARTH_EINVAL, "int: only base 10 is supported");
        if (v.t == JV_INT)
            return v;
        if (v.t == JV_BOOL)
            return jv_int(v.b);
        if (v.t == JV_FLOAT) {
            if (!isfinite(v.f) || fabs(v.f) >= 9.2e18)
                return dflt;
            return jv_int((int64_t)v.f);
        }
        if (v.t == JV_STR) {
            if (parse_int(v, &i))
                return jv_int(i);
            if (parse_float(v, &d) && isfinite(d) && fabs(d) < 9.2e18)
                return jv_int((int64_t)d);
        }
        return dflt;
    }
    case F_INDENT: return do_indent(J, jv_as_str(J, v), &A);
    case F_ITEMS: {
        if (v.t == JV_UNDEF)
            return jv_list(J, 0);
        if (v.t != JV_DICT)
            jx_fail(J, at, HEARTH_EINVAL, "Can only get item pairs from a mapping.");
        jv out = jv_list(J, v.d->n);
        for (size_t i = 0; i < v.d->n; i++) {
            jv t = jv_list(J, 2);
            t.t = JV_TUPLE;
            jl_push(J, t.l, v.d->k[i]);
            jl_push(J, t.l, v.d->v[i]);
            jl_push(J, out.l, t);
        }
        return out;
    }
    case F_JOIN: {
        const jv *items;
        size_t n;
        items_of(J, at, v, &items, &n);
        jv sep = jv_as_str(J, arg(&A, 0, "d", jv_str("", 0)));
        jv path = arg(&A, 1, "attribute", jv_none());
        jsb b = {0};
        for (size_t i = 0; i < n; i++) {
            jx_step(J, at);
            if (i)
                jsb_add(J, &b, sep.s.p, sep.s.n);
            jv x = path.t != JV_NONE ? attr_path(J, at, items[i], path) : items[i];
            jv_to_str(J, &b, x);
        }
        return jsb_str(&b);
    }
    case F_LIST:
    case F_REVERSE: {
        if (fid == F_REVERSE && v.t == JV_STR) {
            const jv *items;
            size_t n;
            jv_items(J, at, v, &items, &n);
            jsb b = {0};
            for (size_t i = n; i-- > 0;)
                jsb_add(J, &b, items[i].s.p, items[i].s.n);
            return jsb_str(&b);
        }
        const jv *items;
        size_t n;
        items_of(J, at, v, &items, &n);
        jv out = jv_list(J, n);
        for (size_t i = 0; i < n; i++)
            jl_push(J, out.l, items[fid == F_REVERSE ? n - 1 - i : i]);
        return out;
    }
    case F_MAP: return do_map(J, at, v, &A);
    case F_MAX:
    case F_MIN: return do_minmax(J, at, v, &A, fid == F_MAX);
    case F_SELECT: return do_select(J, at, v, &A, false, true);
    case F_REJECT: return do_select(J, at, v, &A, false, false);
    case F_SELECTATTR: return do_select(J, at, v, &A, true, true);
    case F_REJECTATTR: return do_select(J, at, v, &A, true, false);
    case F_REPLACE: {
        jv old = jv_as_str(J, arg(&A, 0, "old", jv_str("", 0)));
        jv nw = jv_as_str(J, arg(&A, 1, "new", jv_str("", 0)));
        jv count = arg(&A, 2, "count", jv_none());
        return js_replace(J, at, jv_as_str(J, v), old, nw, count.t == JV_INT ? count.i : -1);
    }
    case F_ROUND: return do_round(J, at, v, &A);
    case F_SORT: {
        const jv *items;
        size_t n;
        items_of(J, at, v, &items, &n);
        bool rev = jv_truthy(arg(&A, 0, "reverse", jv_bool(false)));
        bool cs = jv_truthy(arg(&A, 1, "case_sensitive", jv_bool(false)));
        jv path = arg(&A, 2, "attribute", jv_none());
        jv *keys = jx_alloc(J, (n + 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++)
            keys[i] = sort_key(J, at, items[i], path, cs);
        return sorted(J, at, items, keys, n, rev);
    }
    case F_SUM: {
        const jv *items;
        size_t n;
        items_of(J, at, v, &items, &n);
        jv path = arg(&A, 0, "attribute", jv_none());
        jv acc = arg(&A, 1, "start", jv_int(0));
        for (size_t i = 0; i < n; i++) {
            jx_step(J, at);
            acc = jinja_binop(J, at, OP_ADD, acc, path.t != JV_NONE ? attr_path(J, at, items[i], path) : items[i]);
        }
        return acc;
    }
    case F_TOJSON: return do_tojson(J, at, v, &A);
    case F_TRIM: {
        jv chars = arg(&A, 0, "chars", jv_none());
        return js_strip(jv_as_str(J, v), chars.t == JV_STR ? chars : jv_none(), 3);
    }
    case F_UNIQUE: {
        const jv *items;
        size_t n;
        items_of(J, at, v, &items, &n);
        bool cs = jv_truthy(arg(&A, 0, "case_sensitive", jv_bool(false)));
        jv path = arg(&A, 1, "attribute", jv_none());
        jv out = jv_list(J, 0), seen = jv_list(J, 0);
        for (size_t i = 0; i < n; i++) {
            jv k = sort_key(J, at, items[i], path, cs);
            bool dup = false;
            for (size_t j = 0; j < seen.l->n && !dup; j++) {
                jx_step(J, at);
                dup = jv_eq(seen.l->v[j], k);
            }
            if (!dup) {
                jl_push(J, seen.l, k);
                jl_push(J, out.l, items[i]);
            }
        }
        return out;
    }
    case F_WORDCOUNT: {
        jv s = jv_as_str(J, v);
        int64_t words = 0;
        bool in = false;
        for (size_t i = 0; i < s.s.n;) {
            int32_t cp = js_next(s.s.p, s.s.n, &i);
            bool w = cp == '_' || js_is_alnum(cp);
            if (w && !in)
                words++;
            in = w;
        }
        return jv_int(words);
    }
    case F_BATCH: {
        const jv *items;
        size_t n;
        items_of(J, at, v, &items, &n);
        jv cnt = arg(&A, 0, "linecount", jv_none());
        jv fill = arg(&A, 1, "fill_with", jv_none());
        bool has_fill = A.nargs > 1 || fill.t != JV_NONE;
        if (cnt.t != JV_INT || cnt.i <= 0)
            jx_fail(J, at, HEARTH_EINVAL, "batch: linecount must be a positive integer");
        jv out = jv_list(J, 0), cur = jv_list(J, 0);
        for (size_t i = 0; i < n; i++) {
            jx_step(J, at);
            jl_push(J, cur.l, items[i]);
            if ((int64_t)cur.l->n == cnt.i) {
                jl_push(J, out.l, cur);
                cur = jv_list(J, 0);
            }
        }
        if (cur.l->n) {
            while (has_fill && (int64_t)cur.l->n < cnt.i)
                jl_push(J, cur.l, fill);
            jl_push(J, out.l, cur);
        }
        return out;
    }
    case F_CENTER: {
        jv s = jv_as_str(J, v);
        jv w = arg(&A, 0, "width", jv_int(80));
        int64_t width = w.t == JV_INT ? w.i : 80, len = (int64_t)ju_len(s.s.p, s.s.n);
        if (width > 4096)
            width = 4096;
        if (len >= width)
            return s;
        int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
        jsb b = {0};
        for (int64_t i = 0; i < left; i++)
            jsb_addc(J, &b, ' ');
        jsb_add(J, &b, s.s.p, s.s.n);
        for (int64_t i = 0; i < pad - left; i++)
            jsb_addc(J, &b, ' ');
        return jsb_str(&b);
    }
    }
    jx_fail(J, at, HEARTH_EINVAL, "internal: unknown filter %d", fid);
}

jv jinja_filter(jx *J, const jnode *at, int fid, jv v, const jv *args, size_t nargs, const jnode *const *kwn,
                const jv *kwv, size_t nkw)
{
    jv r = filter_impl(J, at, fid, v, args, nargs, kwn, kwv, nkw);
    switch (fid) {
    /* str methods of a Markup give a Markup (jinja2 calls them on soft_str(value)) */
    case F_TRIM:
    case F_UPPER:
    case F_LOWER:
    case F_CAPITALIZE:
    case F_TITLE:
    case F_STRING:
    case F_INDENT:
    case F_CENTER:
        if (v.t == JV_STR && v.markup && r.t == JV_STR)
            r.markup = 1;
        break;
    /* generators in jinja2 */
    case F_MAP:
    case F_SELECT:
    case F_REJECT:
    case F_SELECTATTR:
    case F_REJECTATTR:
    case F_UNIQUE:
    case F_BATCH:
    case F_ITEMS:
        r.gen = 1;
        break;
    case F_REVERSE:
        if (r.t == JV_LIST)
            r.gen = 1;
        break;
    }
    return r;
}

bool jinja_test(jx *J, const jnode *at, int tid, jv v, const jv *args, size_t nargs)
{
    jv a = nargs ? args[0] : jv_undef(NULL, 0);
    switch (tid) {
    case T_DEFINED: return v.t != JV_UNDEF;
    case T_UNDEFINED: return v.t == JV_UNDEF;
    case T_NONE: return v.t == JV_NONE;
    case T_STRING: return v.t == JV_STR;
    case T_NUMBER: return is_num(v);
    case T_INTEGER: return v.t == JV_INT;
    case T_FLOAT: return v.t == JV_FLOAT;
    case T_MAPPING: return v.t == JV_DICT;
    case T_ITERABLE: return v.t == JV_STR || v.t == JV_LIST || v.t == JV_TUPLE || v.t == JV_DICT || v.t == JV_UNDEF;
    case T_SEQUENCE: return v.t == JV_STR || (v.t == JV_LIST && !v.gen) || v.t == JV_TUPLE || v.t == JV_DICT || v.t == JV_UNDEF;
    case T_BOOLEAN: return v.t == JV_BOOL;
    case T_TRUE: return v.t == JV_BOOL && v.b;
    case T_FALSE: return v.t == JV_BOOL && !v.b;
    case T_EQ:
    case T_EQUALTO:
    case T_EQ2: return jv_eq(v, a);
    case T_NE:
    case T_NE2: return !jv_eq(v, a);
    case T_SAMEAS:
        if (v.t != a.t)
            return false;
        if (v.t == JV_NONE || v.t == JV_UNDEF)
            return v.t == JV_NONE || v.s.p == a.s.p;
        if (v.t == JV_BOOL)
            return v.b == a.b;
        if (v.t == JV_STR)
            return v.s.p == a.s.p && v.s.n == a.s.n;
        if (v.t == JV_INT)
            return v.i == a.i && v.i >= -5 && v.i <= 256; /* CPython's cached small ints */
        return jv_eq(v, a) && (v.t == JV_LIST || v.t == JV_TUPLE ? v.l == a.l : v.t == JV_DICT ? v.d == a.d : true);
    case T_LT:
    case T_LT2:
    case T_LESSTHAN:
    case T_GT:
    case T_GT2:
    case T_GREATERTHAN:
    case T_LE:
    case T_LE2:
    case T_GE:
    case T_GE2: {
        if (v.t == JV_UNDEF || a.t == JV_UNDEF)
            jx_fail(J, at, HEARTH_EINVAL, "an undefined value was compared");
        int c = jv_cmp(J, at, v, a);
        if (tid == T_LT || tid == T_LT2 || tid == T_LESSTHAN)
            return c < 0;
        if (tid == T_GT || tid == T_GT2 || tid == T_GREATERTHAN)
            return c > 0;
        if (tid == T_LE || tid == T_LE2)
            return c <= 0;
        return c >= 0;
    }
    case T_IN: {
        jv seq = a;
        if (seq.t == JV_STR) {
            if (v.t != JV_STR)
                jx_fail(J, at, HEARTH_EINVAL, "'in <string>' requires string as left operand");
            if (!v.s.n)
                return true;
            for (size_t i = 0; i + v.s.n <= seq.s.n; i++)
                if (memcmp(seq.s.p + i, v.s.p, v.s.n) == 0)
                    return true;
            return false;
        }
        if (seq.t == JV_DICT)
            return jd_find(seq.d, v) >= 0;
        if (jv_is_seq(seq)) {
            for (size_t i = 0; i < seq.l->n; i++)
                if (jv_eq(seq.l->v[i], v))
                    return true;
            return false;
        }
        if (seq.t == JV_UNDEF)
            return false;
        jx_fail(J, at, HEARTH_EINVAL, "argument of type '%s' is not iterable", jv_type_name(seq));
    }
    case T_ODD:
    case T_EVEN:
        if (v.t != JV_INT && v.t != JV_BOOL)
            jx_fail(J, at, HEARTH_EINVAL, "odd/even: expected an integer, got %s", jv_type_name(v));
        return ((v.t == JV_INT ? v.i : v.b) & 1) == (tid == T_ODD);
    case T_DIVISIBLEBY: {
        if ((v.t != JV_INT && v.t != JV_BOOL) || (a.t != JV_INT && a.t != JV_BOOL))
            jx_fail(J, at, HEARTH_EINVAL, "divisibleby: expected integers");
        int64_t x = v.t == JV_INT ? v.i : v.b, y = a.t == JV_INT ? a.i : a.b;
        if (y == 0)
            jx_fail(J, at, HEARTH_EINVAL, "integer division or modulo by zero");
        if (y == -1)
            return true;
        return x % y == 0;
    }
    case T_CALLABLE: return v.t == JV_FUNC || v.t == JV_MACRO;
    case T_LOWER:
    case T_UPPER: {
        if (v.t != JV_STR)
            return false;
        jv c = js_case(J, v, tid == T_LOWER ? 0 : 1);
        bool cased = false;
        for (size_t i = 0; i < v.s.n;) {
            int32_t cp = js_next(v.s.p, v.s.n, &i);
            cased = cased || js_upper(cp) != js_lower(cp);
        }
        return cased && c.s.n == v.s.n && memcmp(c.s.p, v.s.p, v.s.n) == 0;
    }
    case T_ESCAPED: return v.t == JV_STR && v.markup;
    case T_FILTER: return a.t == JV_STR && jinja_filter_id(a.s.p, a.s.n) >= 0;
    case T_TEST: return a.t == JV_STR && jinja_test_id(a.s.p, a.s.n) >= 0;
    }
    jx_fail(J, at, HEARTH_EINVAL, "internal: unknown test %d", tid);
}

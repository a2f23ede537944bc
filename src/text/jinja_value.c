/* jinja_value.c: the interpreter's values as Python sees them.
 *
 * A value is a small tagged union (jv) passed by copy; strings, lists and
 * dicts point into the render's arena (or the template's, or the context's
 * text) and are never changed once built, as ImmutableSandboxedEnvironment
 * guarantees, so copies share freely. Dicts keep insertion order (as
 * json.loads and Python dicts do) and are searched linearly: chat-template
 * dicts have a handful of keys, and a hash would cost more than it saves.
 * Printing follows Python: str() and repr() of each type, floats as
 * float.__repr__ (the shortest text that reads back the same, in fixed or
 * exponent form by Python's rule), strings in repr with Python's choice of
 * quote. The context's JSON is read by jinja_json.c. */
#include "text/jinja_int.h"
#include "text/unicode.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *jarena_alloc(jarena *a, size_t n, int *limit)
{
    n = (n + 15) & ~(size_t)15;
    if (a->head && a->head->cap - a->head->used >= n) {
        void *p = a->head->mem + a->head->used;
        a->head->used += n;
        return p;
    }
    size_t cap = n > 32768 ? n : 32768;
    if (a->total + cap + sizeof(jchunk) > a->max || cap > a->max) {
        if (limit)
            *limit = 1;
        return NULL;
    }
    jchunk *c = malloc(sizeof *c + cap);
    if (!c)
        return NULL;
    c->cap = cap;
    c->used = n;
    a->total += cap + sizeof *c;
    /* a big block goes behind the current chunk so the current chunk's free space stays usable */
    if (a->head && n > 16384) {
        c->next = a->head->next;
        a->head->next = c;
    } else {
        c->next = a->head;
        a->head = c;
    }
    return c->mem;
}

void jarena_free(jarena *a)
{
    jchunk *c = a->head;
    while (c) {
        jchunk *nx = c->next;
        free(c);
        c = nx;
    }
    a->head = NULL;
    a->total = 0;
}

jv jv_undef(const char *name, size_t n)
{
    jv v = {.t = JV_UNDEF};
    v.s.p = name;
    v.s.n = n;
    return v;
}
jv jv_none(void) { return (jv){.t = JV_NONE}; }
jv jv_bool(bool b) { return (jv){.t = JV_BOOL, .b = b}; }
jv jv_int(int64_t i) { return (jv){.t = JV_INT, .i = i}; }
jv jv_float(double f) { return (jv){.t = JV_FLOAT, .f = f}; }
jv jv_str(const char *p, size_t n)
{
    jv v = {.t = JV_STR};
    v.s.p = p;
    v.s.n = n;
    return v;
}
jv jv_strz(const char *s) { return jv_str(s, strlen(s)); }

jv jv_list(jx *J, size_t cap)
{
    jlist *l = jx_alloc(J, sizeof *l);
    l->n = 0;
    l->cap = cap;
    l->v = cap ? jx_alloc(J, cap * sizeof *l->v) : NULL;
    return (jv){.t = JV_LIST, .l = l};
}

jv jv_dict(jx *J, size_t cap)
{
    jdict *d = jx_alloc(J, sizeof *d);
    d->n = 0;
    d->cap = cap;
    d->k = cap ? jx_alloc(J, cap * sizeof *d->k) : NULL;
    d->v = cap ? jx_alloc(J, cap * sizeof *d->v) : NULL;
    return (jv){.t = JV_DICT, .d = d};
}

void jl_push(jx *J, jlist *l, jv v)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jv *nv = jx_alloc(J, cap * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

long jd_find(const jdict *d, jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(d->k[i], k))
            return (long)i;
    return -1;
}

long jd_finds(const jdict *d, const char *k, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JV_STR && d->k[i].s.n == n && memcmp(d->k[i].s.p, k, n) == 0)
            return (long)i;
    return -1;
}

void jd_set(jx *J, jdict *d, jv k, jv v)
{
    long at = jd_find(d, k);
    if (at >= 0) {
        d->v[at] = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        jv *nk = jx_alloc(J, cap * sizeof *nk), *nv = jx_alloc(J, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

bool jv_truthy(jv v)
{
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: return false;
    case JV_BOOL: return v.b;
    case JV_INT: return v.i != 0;
    case JV_FLOAT: return v.f != 0;
    case JV_STR: return v.s.n != 0;
    case JV_LIST:
    case JV_TUPLE: return v.gen || v.l->n != 0;
    case JV_DICT: return v.d->n != 0;
    default: return true;
    }
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num(jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : (double)v.b; }

/* Values nest without bound (a namespace can wrap a list in a list in a loop), so equality stops
 * at this depth and calls the rest unequal rather than recurse off the stack. */
#define EQ_DEPTH_MAX 1000

static bool eq_depth(jv a, jv b, int depth)
{
    if (depth > EQ_DEPTH_MAX)
        return false;
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT)
            return (a.t == JV_INT ? a.i : a.b) == (b.t == JV_INT ? b.i : b.b);
        return num(a) == num(b);
    }
    if (a.t != b.t) {
        if ((a.t == JV_LIST || a.t == JV_TUPLE) && (b.t == JV_LIST || b.t == JV_TUPLE))
            return false;
        return false;
    }
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.s.n == b.s.n && memcmp(a.s.p, b.s.p, a.s.n) == 0;
    case JV_LIST:
    case JV_TUPLE:
        if (a.gen || b.gen)
            return a.gen && b.gen && a.l == b.l;
        if (a.l->n != b.l->n)
            return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!eq_depth(a.l->v[i], b.l->v[i], depth + 1))
                return false;
        return true;
    case JV_DICT:
        if (a.d->n != b.d->n)
            return false;
        for (size_t i = 0; i < a.d->n; i++) {
            long j = jd_find(b.d, a.d->k[i]);
            if (j < 0 || !eq_depth(a.d->v[i], b.d->v[j], depth + 1))
                return false;
        }
        return true;
    case JV_NS: return a.d == b.d;
    case JV_FUNC: return a.fn == b.fn;
    case JV_MACRO: return a.m == b.m;
    case JV_LOOP: return a.lp == b.lp;
    default: return false;
    }
}

bool jv_eq(jv a, jv b) { return eq_depth(a, b, 0); }

const char *jv_type_name(jv v)
{
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list",
                                        "tuple", "dict", "Namespace", "builtin_function_or_method", "Macro",
                                        "LoopContext"};
    return v.t < sizeof names / sizeof names[0] ? names[v.t] : "object";
}

static int cmp_depth(jx *J, const jnode *at, jv a, jv b, int depth)
{
    if (depth > J->max_depth)
        jx_fail(J, at, HEARTH_ELIMIT, "values nested deeper than %d compared", J->max_depth);
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = a.t == JV_INT ? a.i : a.b, y = b.t == JV_INT ? b.i : b.b;
            return x < y ? -1 : x > y;
        }
        double x = num(a), y = num(b);
        return x < y ? -1 : x > y;
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        size_t m = a.s.n < b.s.n ? a.s.n : b.s.n;
        int c = memcmp(a.s.p, b.s.p, m); /* UTF-8 byte order is code point order */
        if (c)
            return c < 0 ? -1 : 1;
        return a.s.n < b.s.n ? -1 : a.s.n > b.s.n;
    }
    if (a.t == b.t && (a.t == JV_LIST || a.t == JV_TUPLE)) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (!jv_eq(a.l->v[i], b.l->v[i]))
                return cmp_depth(J, at, a.l->v[i], b.l->v[i], depth + 1);
        }
        return a.l->n < b.l->n ? -1 : a.l->n > b.l->n;
    }
    jx_fail(J, at, HEARTH_EINVAL, "'<' not supported between instances of '%s' and '%s'", jv_type_name(a),
            jv_type_name(b));
}

int jv_cmp(jx *J, const jnode *at, jv a, jv b) { return cmp_depth(J, at, a, b, 0); }

bool jv_is_seq(jv v) { return (v.t == JV_LIST || v.t == JV_TUPLE) && !v.gen; }

void jsb_add(jx *J, jsb *b, const char *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n)
            cap *= 2;
        if (cap > J->out_max + 64 && b->n + n <= J->out_max + 64)
            cap = J->out_max + 64;
        if (b->n + n > J->out_max + 64)
            jx_fail(J, NULL, HEARTH_ELIMIT, "a string grew past the output limit (%zu bytes)", J->out_max);
        char *np = jx_alloc(J, cap);
        if (b->n)
            memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}
void jsb_addc(jx *J, jsb *b, char c) { jsb_add(J, b, &c, 1); }
void jsb_addz(jx *J, jsb *b, const char *s) { jsb_add(J, b, s, strlen(s)); }
jv jsb_str(jsb *b) { return jv_str(b->p ? b->p : "", b->n); }

/* float.__repr__: the shortest digits that read back as f, in Python's layout. */
void jv_fmt_float(char out[40], double f)
{
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f)
            break;
    }
    /* e is [-]d[.ddd]e[+-]XX */
    char digits[24];
    size_t nd = 0;
    const char *p = e;
    bool neg = *p == '-';
    if (neg)
        p++;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    char *o = out;
    if (neg)
        *o++ = '-';
    if (exp >= -4 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++)
                *o++ = (size_t)i < nd ? digits[i] : '0';
            *o++ = '.';
            if ((size_t)exp + 1 < nd)
                for (size_t i = (size_t)exp + 1; i < nd; i++)
                    *o++ = digits[i];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp - 1; i++)
                *o++ = '0';
            for (size_t i = 0; i < nd; i++)
                *o++ = digits[i];
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (size_t i = 1; i < nd; i++)
                *o++ = digits[i];
        }
        snprintf(o, 12, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static void repr_str(jx *J, jsb *b, const char *p, size_t n)
{
    bool has_sq = memchr(p, '\'', n) != NULL, has_dq = memchr(p, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jsb_addc(J, b, q);
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)p[i];
        if (c == q || c == '\\') {
            jsb_addc(J, b, '\\');
            jsb_addc(J, b, (char)c);
            i++;
        } else if (c == '\n') {
            jsb_addz(J, b, "\\n");
            i++;
        } else if (c == '\r') {
            jsb_addz(J, b, "\\r");
            i++;
        } else if (c == '\t') {
            jsb_addz(J, b, "\\t");
            i++;
        } else if (c < 0x20 || c == 0x7f) {
            char h[8];
            snprintf(h, sizeof h, "\\x%02x", c);
            jsb_addz(J, b, h);
            i++;
        } else if (c < 0x80) {
            jsb_addc(J, b, (char)c);
            i++;
        } else {
            size_t j = i;
            int32_t cp = hearth_utf8_decode(p, n, &j);
            if (cp < 0) {
                jsb_addc(J, b, (char)c);
                i++;
                continue;
            }
            /* str.isprintable: C1 controls and a few separators print escaped */
            if (cp < 0xa0 || cp == 0xad || cp == 0x2028 || cp == 0x2029 || (cp >= 0x200b && cp <= 0x200f) ||
                (cp >= 0x2060 && cp <= 0x2064) || cp == 0xfeff) {
                char h[16];
                snprintf(h, sizeof h, cp <= 0xff ? "\\x%02x" : "\\u%04x", (unsigned)cp);
                jsb_addz(J, b, h);
            } else {
                jsb_add(J, b, p + i, j - i);
            }
            i = j;
        }
    }
    jsb_addc(J, b, q);
}

static void print_val(jx *J, jsb *b, jv v, bool repr, int depth)
{
    if (depth > J->max_depth)
        jx_fail(J, NULL, HEARTH_ELIMIT, "a value nested deeper than %d", J->max_depth);
    char tmp[48];
    switch (v.t) {
    case JV_UNDEF: break;
    case JV_NONE: jsb_addz(J, b, "None"); break;
    case JV_BOOL: jsb_addz(J, b, v.b ? "True" : "False"); break;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
        jsb_addz(J, b, tmp);
        break;
    case JV_FLOAT:
        jv_fmt_float(tmp, v.f);
        jsb_addz(J, b, tmp);
        break;
    case JV_STR:
        if (repr)
            repr_str(J, b, v.s.p, v.s.n);
        else
            jsb_add(J, b, v.s.p, v.s.n);
        break;
    case JV_LIST:
    case JV_TUPLE:
        if (v.gen) {
            jsb_addz(J, b, "<generator object>");
            break;
        }
        jsb_addc(J, b, v.t == JV_LIST ? '[' : '(');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                jsb_addz(J, b, ", ");
            jx_step(J, NULL);
            print_val(J, b, v.l->v[i], true, depth + 1);
        }
        if (v.t == JV_TUPLE && v.l->n == 1)
            jsb_addc(J, b, ',');
        jsb_addc(J, b, v.t == JV_LIST ? ']' : ')');
        break;
    case JV_DICT:
    case JV_NS:
        if (v.t == JV_NS)
            jsb_addz(J, b, "<Namespace ");
        jsb_addc(J, b, '{');
        for (size_t i = 0; i < v.d->n; i++) {
            if (i)
                jsb_addz(J, b, ", ");
            jx_step(J, NULL);
            print_val(J, b, v.d->k[i], true, depth + 1);
            jsb_addz(J, b, ": ");
            print_val(J, b, v.d->v[i], true, depth + 1);
        }
        jsb_addc(J, b, '}');
        if (v.t == JV_NS)
            jsb_addc(J, b, '>');
        break;
    case JV_MACRO:
        jsb_addz(J, b, "<Macro '");
        jsb_add(J, b, v.m->node->s, v.m->node->sn);
        jsb_addz(J, b, "'>");
        break;
    case JV_LOOP: jsb_addz(J, b, "<LoopContext>"); break;
    default: jsb_addz(J, b, "<built-in function>"); break;
    }
}

void jv_to_str(jx *J, jsb *b, jv v) { print_val(J, b, v, false, 0); }
void jv_repr(jx *J, jsb *b, jv v) { print_val(J, b, v, true, 0); }

jv jv_as_str(jx *J, jv v)
{
    if (v.t == JV_STR)
        return v;
    if (v.t == JV_UNDEF)
        return jv_str("", 0);
    jsb b = {0};
    jv_to_str(J, &b, v);
    return jsb_str(&b);
}

static void json_str(jx *J, jsb *b, const char *p, size_t n)
{
    jsb_addc(J, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        jsb_add(J, b, p + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': jsb_addz(J, b, "\\\""); break;
        case '\\': jsb_addz(J, b, "\\\\"); break;
        case '\n': jsb_addz(J, b, "\\n"); break;
        case '\r': jsb_addz(J, b, "\\r"); break;
        case '\t': jsb_addz(J, b, "\\t"); break;
        case '\b': jsb_addz(J, b, "\\b"); break;
        case '\f': jsb_addz(J, b, "\\f"); break;
        default: {
            char h[8];
            snprintf(h, sizeof h, "\\u%04x", c);
            jsb_addz(J, b, h);
        }
        }
    }
    jsb_add(J, b, p + run, n - run);
    jsb_addc(J, b, '"');
}

static void json_newline(jx *J, jsb *b, const char *indent, size_t indent_n, int level)
{
    jsb_addc(J, b, '\n');
    for (int i = 0; i < level; i++)
        jsb_add(J, b, indent, indent_n);
}

/* A dict key as json.dumps writes it: str as is, numbers, bools and None as their JSON text. */
static void json_key(jx *J, const jnode *at, jsb *b, jv k)
{
    char tmp[48];
    switch (k.t) {
    case JV_STR: json_str(J, b, k.s.p, k.s.n); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.i); break;
    case JV_FLOAT: {
        char f[40];
        jv_fmt_float(f, k.f);
        snprintf(tmp, sizeof tmp, "\"%s\"", isnan(k.f) ? "NaN" : isinf(k.f) ? (k.f < 0 ? "-Infinity" : "Infinity") : f);
        break;
    }
    case JV_BOOL: strcpy(tmp, k.b ? "\"true\"" : "\"false\""); break;
    case JV_NONE: strcpy(tmp, "\"null\""); break;
    default:
        jx_fail(J, at, HEARTH_EINVAL, "keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
    jsb_addz(J, b, tmp);
}

void jv_tojson(jx *J, const jnode *at, jsb *b, jv v, const char *indent, size_t indent_n, const char *item_sep,
               const char *key_sep, bool sort_keys, int depth)
{
    if (depth > J->max_depth)
        jx_fail(J, at, HEARTH_ELIMIT, "a value nested deeper than %d", J->max_depth);
    jx_step(J, at);
    char tmp[48];
    switch (v.t) {
    case JV_NONE: jsb_addz(J, b, "null"); return;
    case JV_BOOL: jsb_addz(J, b, v.b ? "true" : "false"); return;
    case JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.i);
        jsb_addz(J, b, tmp);
        return;
    case JV_FLOAT:
        if (isnan(v.f))
            jsb_addz(J, b, "NaN");
        else if (isinf(v.f))
            jsb_addz(J, b, v.f < 0 ? "-Infinity" : "Infinity");
        else {
            jv_fmt_float(tmp, v.f);
            jsb_addz(J, b, tmp);
        }
        return;
    case JV_STR: json_str(J, b, v.s.p, v.s.n); return;
    case JV_LIST:
    case JV_TUPLE:
        if (v.gen)
            jx_fail(J, at, HEARTH_EINVAL, "Object of type generator is not JSON serializable");
        if (!v.l->n) {
            jsb_addz(J, b, "[]");
            return;
        }
        jsb_addc(J, b, '[');
        for (size_t i = 0; i < v.l->n; i++) {
            if (i)
                jsb_addz(J, b, item_sep);
            if (indent)
                json_newline(J, b, indent, indent_n, depth + 1);
            jv_tojson(J, at, b, v.l->v[i], indent, indent_n, item_sep, key_sep, sort_keys, depth + 1);
        }
        if (indent)
            json_newline(J, b, indent, indent_n, depth);
        jsb_addc(J, b, ']');
        return;
    case JV_DICT: {
        if (!v.d->n) {
            jsb_addz(J, b, "{}");
            return;
        }
        size_t n = v.d->n;
        size_t *order = jx_alloc(J, n * sizeof *order);
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        if (sort_keys) {
            /* insertion sort: stable, and key counts are small */
            for (size_t i = 1; i < n; i++) {
                size_t x = order[i], j = i;
                while (j > 0 && jv_cmp(J, at, v.d->k[order[j - 1]], v.d->k[x]) > 0) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = x;
            }
        }
        jsb_addc(J, b, '{');
        for (size_t i = 0; i < n; i++) {
            if (i)
                jsb_addz(J, b, item_sep);
            if (indent)
                json_newline(J, b, indent, indent_n, depth + 1);
            json_key(J, at, b, v.d->k[order[i]]);
            jsb_addz(J, b, key_sep);
            jv_tojson(J, at, b, v.d->v[order[i]], indent, indent_n, item_sep, key_sep, sort_keys, depth + 1);
        }
        if (indent)
            json_newline(J, b, indent, indent_n, depth);
        jsb_addc(J, b, '}');
        return;
    }
    default:
        jx_fail(J, at, HEARTH_EINVAL, "Object of type %s is not JSON serializable", jv_type_name(v));
    }
}

size_t ju_len(const char *p, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)p[i] & 0xc0) != 0x80;
    return c;
}

size_t ju_off(const char *p, size_t n, size_t i)
{
    size_t c = 0, o = 0;
    for (; o < n; o++) {
        if (((unsigned char)p[o] & 0xc0) != 0x80) {
            if (c == i)
                return o;
            c++;
        }
    }
    return n;
}

void jv_items(jx *J, const jnode *at, jv v, const jv **items, size_t *n)
{
    switch (v.t) {
    case JV_UNDEF:
        *items = NULL;
        *n = 0;
        return;
    case JV_LIST:
    case JV_TUPLE:
        *items = v.l->v;
        *n = v.l->n;
        return;
    case JV_DICT:
        *items = v.d->k;
        *n = v.d->n;
        return;
    case JV_STR: {
        size_t c = ju_len(v.s.p, v.s.n), k = 0;
        jv *out = jx_alloc(J, (c ? c : 1) * sizeof *out);
        for (size_t i = 0; i < v.s.n;) {
            size_t j = i + 1;
            while (j < v.s.n && ((unsigned char)v.s.p[j] & 0xc0) == 0x80)
                j++;
            out[k++] = jv_str(v.s.p + i, j - i);
            i = j;
        }
        *items = out;
        *n = k;
        return;
    }
    default:
        jx_fail(J, at, HEARTH_EINVAL, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* jinja_methods.c: the Python methods the sandbox lets templates call on
 * values (str, dict, the loop object), jinja2's globals (range, namespace,
 * dict) and transformers' (raise_exception, strftime_now), and the string
 * helpers the filters share (case mapping, stripping, splitting).
 *
 * Strings are UTF-8 and count code points, as Python's str does. Case
 * mapping uses libutf8proc's simple mappings (Python's upper() of 'ß' is
 * 'SS'; ours is 'ß': no chat template upper-cases German). Methods that
 * would change a list or dict resolve to an Undefined marked unsafe, which
 * fails when called, as the sandbox's SecurityError does. */
#include "text/jinja_int.h"
#include "text/jinja_str.h"
#include "text/unicode.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

enum {
    M_STRIP = 1, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_STARTSWITH, M_ENDSWITH, M_UPPER, M_LOWER, M_TITLE,
    M_CAPITALIZE, M_REPLACE, M_FIND, M_RFIND, M_COUNT, M_JOIN, M_ISDIGIT, M_ISALPHA, M_ISSPACE, M_ISUPPER,
    M_ISLOWER, M_ISALNUM, M_SPLITLINES,
    M_ITEMS, M_KEYS, M_VALUES, M_GET,
    M_CYCLE,
    G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME,
};

static const struct { uint8_t t; const char *name; int id; } methods[] = {
    {JV_STR, "strip", M_STRIP}, {JV_STR, "lstrip", M_LSTRIP}, {JV_STR, "rstrip", M_RSTRIP},
    {JV_STR, "split", M_SPLIT}, {JV_STR, "rsplit", M_RSPLIT}, {JV_STR, "startswith", M_STARTSWITH},
    {JV_STR, "endswith", M_ENDSWITH}, {JV_STR, "upper", M_UPPER}, {JV_STR, "lower", M_LOWER},
    {JV_STR, "title", M_TITLE}, {JV_STR, "capitalize", M_CAPITALIZE}, {JV_STR, "replace", M_REPLACE},
    {JV_STR, "find", M_FIND}, {JV_STR, "rfind", M_RFIND}, {JV_STR, "count", M_COUNT}, {JV_STR, "join", M_JOIN},
    {JV_STR, "isdigit", M_ISDIGIT}, {JV_STR, "isalpha", M_ISALPHA}, {JV_STR, "isspace", M_ISSPACE},
    {JV_STR, "isupper", M_ISUPPER}, {JV_STR, "islower", M_ISLOWER}, {JV_STR, "isalnum", M_ISALNUM},
    {JV_STR, "splitlines", M_SPLITLINES},
    {JV_DICT, "items", M_ITEMS}, {JV_DICT, "keys", M_KEYS}, {JV_DICT, "values", M_VALUES}, {JV_DICT, "get", M_GET},
    {JV_LOOP, "cycle", M_CYCLE},
};

static const char *const unsafe_list[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", NULL};
static const char *const unsafe_dict[] = {"update", "pop", "popitem", "clear", "setdefault", NULL};

static jv func(jx *J, int id, jv self)
{
    jfunc *f = jx_alloc(J, sizeof *f);
    f->id = id;
    f->self = self;
    return (jv){.t = JV_FUNC, .fn = f};
}

jv jinja_method(jx *J, jv v, const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (methods[i].t == v.t && strlen(methods[i].name) == n && memcmp(methods[i].name, name, n) == 0)
            return func(J, methods[i].id, v);
    const char *const *unsafe = v.t == JV_LIST ? unsafe_list : v.t == JV_DICT ? unsafe_dict : NULL;
    for (size_t i = 0; unsafe && unsafe[i]; i++)
        if (strlen(unsafe[i]) == n && memcmp(unsafe[i], name, n) == 0) {
            jv u = jv_undef(name, n);
            u.unsafe = 1;
            return u;
        }
    return jv_undef(name, n);
}

jv jinja_global(const char *name, size_t n, jx *J)
{
    static const struct { const char *name; int id; } globals[] = {
        {"range", G_RANGE}, {"namespace", G_NAMESPACE}, {"dict", G_DICT},
        {"raise_exception", G_RAISE}, {"strftime_now", G_STRFTIME},
    };
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        if (strlen(globals[i].name) == n && memcmp(globals[i].name, name, n) == 0)
            return func(J, globals[i].id, jv_none());
    return jv_undef(name, n);
}

/* ---- string helpers ---- */
int32_t js_next(const char *p, size_t n, size_t *i)
{
    int32_t cp = hearth_utf8_decode(p, n, i);
    if (cp < 0) {
        cp = (unsigned char)p[*i];
        (*i)++;
    }
    return cp;
}

void js_put(jx *J, jsb *b, int32_t cp)
{
    char u[4];
    size_t w = hearth_utf8_encode(cp, u);
    jsb_add(J, b, u, w ? w : 0);
}

int32_t js_upper(int32_t cp) { return cp < 128 ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp) : utf8proc_toupper(cp); }
int32_t js_lower(int32_t cp) { return cp < 128 ? (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp) : utf8proc_tolower(cp); }
static int32_t js_titlec(int32_t cp) { return cp < 128 ? js_upper(cp) : utf8proc_totitle(cp); }
static bool is_cased(int32_t cp)
{
    if (cp < 128)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT;
}
bool js_is_alnum(int32_t cp)
{
    if (cp < 128)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
    utf8proc_category_t c = utf8proc_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

/* mode 0 lower, 1 upper, 2 capitalize (first upper, rest lower), 3 str.title */
jv js_case(jx *J, jv s, int mode)
{
    jsb b = {0};
    bool first = true, prev_cased = false;
    for (size_t i = 0; i < s.s.n;) {
        int32_t cp = js_next(s.s.p, s.s.n, &i);
        int32_t o;
        if (mode == 0)
            o = js_lower(cp);
        else if (mode == 1)
            o = js_upper(cp);
        else if (mode == 2)
            o = first ? js_titlec(cp) : js_lower(cp);
        else {
            bool c = is_cased(cp);
            o = c ? (prev_cased ? js_lower(cp) : js_titlec(cp)) : cp;
            prev_cased = c;
        }
        first = false;
        js_put(J, &b, o);
    }
    return jsb_str(&b);
}

static bool in_chars(int32_t cp, jv chars)
{
    if (chars.t != JV_STR)
        return jinja_py_space(cp);
    for (size_t i = 0; i < chars.s.n;)
        if (js_next(chars.s.p, chars.s.n, &i) == cp)
            return true;
    return false;
}

/* which: 1 left, 2 right, 3 both; chars: JV_STR or none for whitespace */
jv js_strip(jv s, jv chars, int which)
{
    size_t a = 0, b = s.s.n;
    if (which & 1)
        while (a < b) {
            size_t j = a;
            if (!in_chars(js_next(s.s.p, b, &j), chars))
                break;
            a = j;
        }
    if (which & 2)
        while (b > a) {
            size_t st = b - 1;
            while (st > a && ((unsigned char)s.s.p[st] & 0xc0) == 0x80)
                st--;
            size_t j = st;
            if (!in_chars(js_next(s.s.p, b, &j), chars))
                break;
            b = st;
        }
    return jv_str(s.s.p + a, b - a);
}

static const char *find_sub(const char *h, size_t hn, const char *nd, size_t nn)
{
    if (nn == 0)
        return h;
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(h + i, nd, nn) == 0)
            return h + i;
    return NULL;
}

jv js_replace(jx *J, const jnode *at, jv s, jv old, jv nw, int64_t count)
{
    jsb b = {0};
    if (old.s.n == 0) {
        /* Python inserts new before every code point and at the end */
        size_t i = 0;
        int64_t done = 0;
        while (count < 0 || done < count) {
            jsb_add(J, &b, nw.s.p, nw.s.n);
            done++;
            if (i >= s.s.n)
                break;
            size_t j = i;
            js_next(s.s.p, s.s.n, &j);
            jsb_add(J, &b, s.s.p + i, j - i);
            i = j;
            jx_step(J, at);
        }
        jsb_add(J, &b, s.s.p + i, s.s.n - i);
        return jsb_str(&b);
    }
    size_t i = 0;
    int64_t done = 0;
    for (;;) {
        const char *f = count >= 0 && done >= count ? NULL : find_sub(s.s.p + i, s.s.n - i, old.s.p, old.s.n);
        if (!f)
            break;
        jx_step(J, at);
        jsb_add(J, &b, s.s.p + i, (size_t)(f - (s.s.p + i)));
        jsb_add(J, &b, nw.s.p, nw.s.n);
        i = (size_t)(f - s.s.p) + old.s.n;
        done++;
    }
    jsb_add(J, &b, s.s.p + i, s.s.n - i);
    return jsb_str(&b);
}

/* str.split(sep=None, maxsplit=-1) */
static jv js_split(jx *J, const jnode *at, jv s, jv sep, int64_t maxsplit)
{
    jv out = jv_list(J, 0);
    const char *p = s.s.p;
    size_t n = s.s.n, i = 0;
    if (sep.t != JV_STR) {
        int64_t splits = 0;
        for (;;) {
            while (i < n) {
                size_t j = i;
                if (!jinja_py_space(js_next(p, n, &j)))
                    break;
                i = j;
            }
            if (i >= n)
                break;
            if (maxsplit >= 0 && splits >= maxsplit) {
                size_t e = n;
                jv rest = js_strip(jv_str(p + i, e - i), jv_none(), 2);
                jl_push(J, out.l, rest);
                break;
            }
            size_t st = i;
            while (i < n) {
                size_t j = i;
                if (jinja_py_space(js_next(p, n, &j)))
                    break;
                i = j;
            }
            jx_step(J, at);
            jl_push(J, out.l, jv_str(p + st, i - st));
            splits++;
        }
        return out;
    }
    if (sep.s.n == 0)
        jx_fail(J, at, HEARTH_EINVAL, "empty separator");
    int64_t splits = 0;
    for (;;) {
        const char *f = maxsplit >= 0 && splits >= maxsplit ? NULL : find_sub(p + i, n - i, sep.s.p, sep.s.n);
        if (!f)
            break;
        jx_step(J, at);
        jl_push(J, out.l, jv_str(p + i, (size_t)(f - (p + i))));
        i = (size_t)(f - p) + sep.s.n;
        splits++;
    }
    jl_push(J, out.l, jv_str(p + i, n - i));
    return out;
}

static bool affix(jv s, jv a, bool end)
{
    if (a.s.n > s.s.n)
        return false;
    return memcmp(end ? s.s.p + s.s.n - a.s.n : s.s.p, a.s.p, a.s.n) == 0;
}

static jv want_str(jx *J, const jnode *at, jv v, const char *what)
{
    if (v.t != JV_STR)
        jx_fail(J, at, HEARTH_EINVAL, "%s: expected a string, got %s", what, jv_type_name(v));
    return v;
}

static jv opt(const jv *args, size_t nargs, const jnode *const *kwn, const jv *kwv, size_t nkw, size_t pos,
              const char *name, jv dflt)
{
    if (pos < nargs)
        return args[pos];
    for (size_t i = 0; i < nkw; i++)
        if (strlen(name) == kwn[i]->sn && memcmp(kwn[i]->s, name, kwn[i]->sn) == 0)
            return kwv[i];
    return dflt;
}

static bool str_class(jv s, int which)
{
    if (!s.s.n)
        return false;
    bool any_cased = false;
    for (size_t i = 0; i < s.s.n;) {
        int32_t cp = js_next(s.s.p, s.s.n, &i);
        switch (which) {
        case M_ISDIGIT:
            if (!(cp >= '0' && cp <= '9') && !(cp >= 128 && utf8proc_category(cp) == UTF8PROC_CATEGORY_ND))
                return false;
            break;
        case M_ISALPHA:
            if (!js_is_alnum(cp) || (cp >= '0' && cp <= '9') ||
                (cp >= 128 && utf8proc_category(cp) >= UTF8PROC_CATEGORY_ND &&
                 utf8proc_category(cp) <= UTF8PROC_CATEGORY_NO))
                return false;
            break;
        case M_ISALNUM:
            if (!js_is_alnum(cp))
                return false;
            break;
        case M_ISSPACE:
            if (!jinja_py_space(cp))
                return false;
            break;
        case M_ISUPPER:
        case M_ISLOWER:
            if (is_cased(cp)) {
                any_cased = true;
                if (which == M_ISUPPER ? js_upper(cp) != cp : js_lower(cp) != cp)
                    return false;
            }
            break;
        }
    }
    return which == M_ISUPPER || which == M_ISLOWER ? any_cased : true;
}

jv js_splitlines(jx *J, jv s)
{
    jv out = jv_list(J, 0);
    size_t i = 0, st = 0;
    const char *p = s.s.p;
    size_t n = s.s.n;
    while (i < n) {
        size_t j = i;
        int32_t cp = js_next(p, n, &j);
        if (cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
            cp == 0x85 || cp == 0x2028 || cp == 0x2029) {
            jl_push(J, out.l, jv_str(p + st, i - st));
            if (cp == '\r' && j < n && p[j] == '\n')
                j++;
            st = j;
        }
        i = j;
    }
    if (st < n)
        jl_push(J, out.l, jv_str(p + st, n - st));
    return out;
}

static int64_t want_int(jx *J, const jnode *at, jv v, const char *what)
{
    if (v.t != JV_INT && v.t != JV_BOOL)
        jx_fail(J, at, HEARTH_EINVAL, "%s: expected an integer, got %s", what, jv_type_name(v));
    return v.t == JV_INT ? v.i : v.b;
}

jv jinja_call_func(jx *J, const jnode *at, jfunc *f, const jv *args, size_t nargs, const jnode *const *kwn,
                   const jv *kwv, size_t nkw)
{
    jv self = f->self;
    jv a0 = opt(args, nargs, NULL, NULL, 0, 0, "", jv_undef(NULL, 0));
    switch (f->id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        jv chars = nargs ? args[0] : jv_none();
        if (chars.t != JV_NONE)
            want_str(J, at, chars, "strip");
        return js_strip(self, chars, f->id == M_STRIP ? 3 : f->id == M_LSTRIP ? 1 : 2);
    }
    case M_SPLIT:
    case M_RSPLIT: {
        jv sep = opt(args, nargs, kwn, kwv, nkw, 0, "sep", jv_none());
        jv ms = opt(args, nargs, kwn, kwv, nkw, 1, "maxsplit", jv_int(-1));
        if (sep.t != JV_NONE)
            want_str(J, at, sep, "split");
        int64_t m = want_int(J, at, ms, "split");
        if (f->id == M_RSPLIT && m >= 0)
            jx_fail(J, at, HEARTH_EINVAL, "str.rsplit with maxsplit is not supported");
        return js_split(J, at, self, sep, m);
    }
    case M_STARTSWITH:
    case M_ENDSWITH: {
        if (a0.t == JV_TUPLE) {
            for (size_t i = 0; i < a0.l->n; i++)
                if (affix(self, want_str(J, at, a0.l->v[i], "startswith/endswith"), f->id == M_ENDSWITH))
                    return jv_bool(true);
            return jv_bool(false);
        }
        return jv_bool(affix(self, want_str(J, at, a0, "startswith/endswith"), f->id == M_ENDSWITH));
    }
    case M_UPPER: return js_case(J, self, 1);
    case M_LOWER: return js_case(J, self, 0);
    case M_CAPITALIZE: return js_case(J, self, 2);
    case M_TITLE: return js_case(J, self, 3);
    case M_REPLACE: {
        if (nargs < 2)
            jx_fail(J, at, HEARTH_EINVAL, "replace expected at least 2 arguments");
        int64_t count = nargs > 2 ? want_int(J, at, args[2], "replace") : -1;
        return js_replace(J, at, self, want_str(J, at, args[0], "replace"), want_str(J, at, args[1], "replace"), count);
    }
    case M_FIND:
    case M_RFIND:
    case M_COUNT: {
        jv sub = want_str(J, at, a0, "find/count");
        int64_t idx = -1, cnt = 0;
        for (size_t i = 0; i + sub.s.n <= self.s.n;) {
            if (memcmp(self.s.p + i, sub.s.p, sub.s.n) == 0) {
                if (idx < 0 || f->id == M_RFIND)
                    idx = (int64_t)ju_len(self.s.p, i);
                cnt++;
                if (f->id == M_FIND)
                    break;
                i += sub.s.n ? sub.s.n : 1;
            } else {
                i++;
            }
        }
        if (sub.s.n == 0 && f->id == M_COUNT)
            cnt = (int64_t)ju_len(self.s.p, self.s.n) + 1;
        if (sub.s.n == 0 && f->id == M_RFIND)
            idx = (int64_t)ju_len(self.s.p, self.s.n);
        return jv_int(f->id == M_COUNT ? cnt : idx);
    }
    case M_JOIN: {
        const jv *items;
        size_t n;
        jv_items(J, at, a0, &items, &n);
        jsb b = {0};
        for (size_t i = 0; i < n; i++) {
            jx_step(J, at);
            if (i)
                jsb_add(J, &b, self.s.p, self.s.n);
            jv s = want_str(J, at, items[i], "join");
            jsb_add(J, &b, s.s.p, s.s.n);
        }
        return jsb_str(&b);
    }
    case M_ISDIGIT:
    case M_ISALPHA:
    case M_ISSPACE:
    case M_ISUPPER:
    case M_ISLOWER:
    case M_ISALNUM: return jv_bool(str_class(self, f->id));
    case M_SPLITLINES: return js_splitlines(J, self);
    case M_ITEMS: {
        jv out = jv_list(J, self.d->n);
        for (size_t i = 0; i < self.d->n; i++) {
            jv t = jv_list(J, 2);
            t.t = JV_TUPLE;
            jl_push(J, t.l, self.d->k[i]);
            jl_push(J, t.l, self.d->v[i]);
            jl_push(J, out.l, t);
            jx_step(J, at);
        }
        return out;
    }
    case M_KEYS:
    case M_VALUES: {
        jv out = jv_list(J, self.d->n);
        for (size_t i = 0; i < self.d->n; i++)
            jl_push(J, out.l, f->id == M_KEYS ? self.d->k[i] : self.d->v[i]);
        return out;
    }
    case M_GET: {
        long i = jd_find(self.d, a0);
        return i >= 0 ? self.d->v[i] : nargs > 1 ? args[1] : jv_none();
    }
    case M_CYCLE:
        if (!nargs)
            jx_fail(J, at, HEARTH_EINVAL, "no items for cycling given");
        return args[self.lp->i % nargs];
    case G_RANGE: {
        int64_t start = 0, stop, step = 1;
        if (nargs == 1)
            stop = want_int(J, at, args[0], "range");
        else if (nargs == 2 || nargs == 3) {
            start = want_int(J, at, args[0], "range");
            stop = want_int(J, at, args[1], "range");
            if (nargs == 3)
                step = want_int(J, at, args[2], "range");
        } else
            jx_fail(J, at, HEARTH_EINVAL, "range expected 1 to 3 arguments, got %zu", nargs);
        if (step == 0)
            jx_fail(J, at, HEARTH_EINVAL, "range() arg 3 must not be zero");
        jv out = jv_list(J, 0);
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.l->n >= 100000)
                jx_fail(J, at, HEARTH_EINVAL, "range too big, maximum size for range is 100000");
            jx_step(J, at);
            jl_push(J, out.l, jv_int(i));
        }
        return out;
    }
    case G_NAMESPACE:
    case G_DICT: {
        jv d = jv_dict(J, 0);
        if (nargs > 1 || (nargs == 1 && args[0].t != JV_DICT))
            jx_fail(J, at, HEARTH_EINVAL, "%s() takes at most one mapping argument",
                    f->id == G_DICT ? "dict" : "namespace");
        if (nargs)
            for (size_t i = 0; i < args[0].d->n; i++)
                jd_set(J, d.d, args[0].d->k[i], args[0].d->v[i]);
        for (size_t i = 0; i < nkw; i++)
            jd_set(J, d.d, jv_str(kwn[i]->s, kwn[i]->sn), kwv[i]);
        if (f->id == G_NAMESPACE)
            d.t = JV_NS;
        return d;
    }
    case G_RAISE: {
        jv m = jv_as_str(J, a0);
        jx_fail(J, at, HEARTH_EINVAL, "%.*s", (int)(m.s.n > 400 ? 400 : m.s.n), m.s.p);
    }
    case G_STRFTIME: {
        jv fmt = want_str(J, at, a0, "strftime_now");
        char fz[256], out[512];
        if (fmt.s.n >= sizeof fz)
            jx_fail(J, at, HEARTH_EINVAL, "strftime_now: format longer than %zu bytes", sizeof fz - 1);
        memcpy(fz, fmt.s.p, fmt.s.n);
        fz[fmt.s.n] = 0;
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        size_t w = strftime(out, sizeof out, fz, &tm);
        jsb b = {0};
        jsb_add(J, &b, out, w);
        return jsb_str(&b);
    }
    }
    jx_fail(J, at, HEARTH_EINVAL, "internal: unknown function %d", f->id);
}

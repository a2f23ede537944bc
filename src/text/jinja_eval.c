/* jinja_eval.c: rendering, the tree walk of statements and expressions.
 *
 * Scoping follows jinja2's compiled code: the template's top level is one
 * frame; each iteration of a for loop runs in a fresh frame whose parent is
 * the loop's frame, so a `set` inside a loop is gone at the next iteration
 * and after the loop (templates carry state out through namespace()); `if`
 * opens no frame; a macro call runs in a frame whose parent is the frame the
 * macro was defined in (lexical, late-bound: it sees the top level's names
 * as they are at call time). Names not in a frame come from the context
 * (context_json's keys), then jinja2's globals (range, namespace, dict,
 * raise_exception, strftime_now).
 *
 * Attribute and item access follow jinja2's sandbox: `a.b` tries the
 * Python attribute (a dict's or str's methods) then the item; `a[b]` the
 * item then the attribute; a missing one is Undefined, and any use of an
 * Undefined other than printing (""), truth (false), iteration (empty),
 * length (0), `is defined`, `default` and comparison is an error, as in
 * jinja2's default Undefined. Methods that would change a list or dict
 * (append, pop, update, ...) give an Undefined that fails when called, as
 * ImmutableSandboxedEnvironment's SecurityError does.
 *
 * Every node evaluated, loop iteration and item built costs a step; macro
 * calls and expression evaluation count against the depth limit; every
 * value lives in an arena with a byte ceiling; captures (block set, macro
 * bodies, filter blocks) are bounded by out->max like the output. A limit
 * hit is HEARTH_ELIMIT, never a hang or a stack overflow.
 *
 * Deliberate differences from jinja2 (none reached by the real templates of
 * tests/integration/test_jinja_templates.py):
 *   - integers are 64-bit: arithmetic that overflows is an error (Python's
 *     are unbounded);
 *   - str % args (printf-style formatting) and str.format are not supported;
 *   - `{% for ... recursive %}`, `{% call %}`, include/import/extends/block,
 *     star-args and double-star-kwargs in calls and macro varargs/kwargs are refused;
 *   - error messages say what went wrong in our own words, except
 *     raise_exception's, which is kept verbatim after the "jinja: LINE:COL: "
 *     prefix. */
#include "text/jinja_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void jx_fail(jx *J, const jnode *at, int code, const char *fmt, ...)
{
    char msg[HEARTH_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at)
        hearth_err_set(J->err, code, "jinja: %u:%u: %s", at->line, at->col, msg);
    else
        hearth_err_set(J->err, code, "jinja: %s", msg);
    J->code = code;
    longjmp(J->jb, 1);
}

void *jx_alloc(jx *J, size_t n)
{
    int limit = 0;
    void *p = jarena_alloc(&J->arena, n ? n : 1, &limit);
    if (!p) {
        if (limit)
            jx_fail(J, NULL, HEARTH_ELIMIT, "the render's values passed the memory limit (%zu bytes)", J->arena.max);
        jx_fail(J, NULL, HEARTH_ENOMEM, "out of memory");
    }
    return p;
}

void jx_step(jx *J, const jnode *at)
{
    if (++J->steps > J->max_steps)
        jx_fail(J, at, HEARTH_ELIMIT, "the render passed its step limit (%llu steps)",
                (unsigned long long)J->max_steps);
}

static void enter(jx *J, const jnode *at)
{
    if (++J->depth > J->max_depth)
        jx_fail(J, at, HEARTH_ELIMIT, "calls or expressions nested deeper than %d", J->max_depth);
}

/* ---- frames ---- */
static jframe *frame_new(jx *J, jframe *parent)
{
    jframe *f = jx_alloc(J, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static jvar *frame_find(jframe *f, const char *name, size_t n)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->vars[i].n == n && memcmp(f->vars[i].name, name, n) == 0)
            return &f->vars[i];
    return NULL;
}

static void frame_set(jx *J, jframe *f, const char *name, size_t n, jv v)
{
    jvar *x = frame_find(f, name, n);
    if (x) {
        x->v = v;
        return;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        jvar *nv = jx_alloc(J, cap * sizeof *nv);
        if (f->n)
            memcpy(nv, f->vars, f->n * sizeof *nv);
        f->vars = nv;
        f->cap = cap;
    }
    f->vars[f->n++] = (jvar){name, n, v};
}

static jv lookup(jx *J, const char *name, size_t n)
{
    for (jframe *f = J->frame; f; f = f->parent) {
        jvar *x = frame_find(f, name, n);
        if (x)
            return x->v;
    }
    long i = jd_finds(J->ctx, name, n);
    if (i >= 0)
        return J->ctx->v[i];
    return jinja_global(name, n, J);
}

/* ---- output ---- */
static void emit(jx *J, const char *p, size_t n)
{
    if (!n)
        return;
    jsink *s = J->sink;
    if (s->hb) {
        int rc = hearth_buf_append(s->hb, p, n);
        if (rc == HEARTH_ELIMIT)
            jx_fail(J, NULL, HEARTH_ELIMIT, "the output passed its limit (%zu bytes)", s->hb->max);
        if (rc)
            jx_fail(J, NULL, HEARTH_ENOMEM, "out of memory writing the output");
        return;
    }
    if (s->n + n > J->out_max)
        jx_fail(J, NULL, HEARTH_ELIMIT, "captured output passed the output limit (%zu bytes)", J->out_max);
    if (s->n + n > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        while (cap < s->n + n)
            cap *= 2;
        char *np = jx_alloc(J, cap);
        if (s->n)
            memcpy(np, s->p, s->n);
        s->p = np;
        s->cap = cap;
    }
    memcpy(s->p + s->n, p, n);
    s->n += n;
}

static void emit_value(jx *J, jv v)
{
    if (v.t == JV_STR) {
        emit(J, v.s.p, v.s.n);
        return;
    }
    jsb b = {0};
    jv_to_str(J, &b, v);
    emit(J, b.p, b.n);
}

static jv eval(jx *J, const jnode *n);
static void exec_body(jx *J, jnode *const *body, size_t n);

/* Runs body into a fresh capture; returns the text. */
static jv capture(jx *J, jnode *const *body, size_t n)
{
    jsink cap = {0}, *saved = J->sink;
    J->sink = &cap;
    exec_body(J, body, n);
    J->sink = saved;
    return jv_str(cap.p ? cap.p : "", cap.n);
}

/* ---- operators ---- */
_Noreturn static void undefined_error(jx *J, const jnode *at, jv u)
{
    if (u.unsafe)
        jx_fail(J, at, HEARTH_EINVAL, "access to attribute '%.*s' is unsafe (the sandbox's lists and dicts are immutable)",
                (int)u.s.n, u.s.p);
    if (u.s.p)
        jx_fail(J, at, HEARTH_EINVAL, "'%.*s' is undefined", (int)(u.s.n > 60 ? 60 : u.s.n), u.s.p);
    jx_fail(J, at, HEARTH_EINVAL, "an undefined value was used");
}

static bool is_numv(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double numd(jv v) { return v.t == JV_FLOAT ? v.f : v.t == JV_INT ? (double)v.i : (double)v.b; }
static int64_t numi(jv v) { return v.t == JV_INT ? v.i : (int64_t)v.b; }

static jv overflow(jx *J, const jnode *at)
{
    jx_fail(J, at, HEARTH_EINVAL, "integer overflow (hearth's integers are 64-bit)");
}

static jv repeat(jx *J, const jnode *at, jv seq, int64_t times)
{
    if (times < 0)
        times = 0;
    if (seq.t == JV_STR) {
        if (seq.s.n && (uint64_t)times > J->out_max / seq.s.n + 1)
            jx_fail(J, at, HEARTH_ELIMIT, "a repeated string would pass the output limit");
        jsb b = {0};
        for (int64_t i = 0; i < times; i++) {
            jx_step(J, at);
            jsb_add(J, &b, seq.s.p, seq.s.n);
        }
        return jsb_str(&b);
    }
    jv out = jv_list(J, 0);
    out.t = seq.t;
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.l->n; k++) {
            jx_step(J, at);
            jl_push(J, out.l, seq.l->v[k]);
        }
    return out;
}

jv jinja_binop(jx *J, const jnode *at, int op, jv a, jv b)
{
    if (op == OP_TILDE) {
        jsb s = {0};
        jv_to_str(J, &s, a);
        jv_to_str(J, &s, b);
        return jsb_str(&s);
    }
    if (a.t == JV_UNDEF)
        undefined_error(J, at, a);
    if (b.t == JV_UNDEF)
        undefined_error(J, at, b);
    if (is_numv(a) && is_numv(b)) {
        bool fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
        if (op == OP_DIV) {
            if (numd(b) == 0)
                jx_fail(J, at, HEARTH_EINVAL, "division by zero");
            return jv_float(numd(a) / numd(b));
        }
        if (fl) {
            double x = numd(a), y = numd(b);
            switch (op) {
            case OP_ADD: return jv_float(x + y);
            case OP_SUB: return jv_float(x - y);
            case OP_MUL: return jv_float(x * y);
            case OP_FLOORDIV:
            case OP_MOD: {
                if (y == 0)
                    jx_fail(J, at, HEARTH_EINVAL, "float division by zero");
                double m = fmod(x, y);
                if (m != 0 && ((m < 0) != (y < 0)))
                    m += y;
                if (op == OP_MOD)
                    return jv_float(m);
                return jv_float(floor((x - m) / y + 0.5) == (x - m) / y ? (x - m) / y : floor(x / y));
            }
            case OP_POW: return jv_float(pow(x, y));
            }
        }
        int64_t x = numi(a), y = numi(b), r;
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &r))
                overflow(J, at);
            return jv_int(r);
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &r))
                overflow(J, at);
            return jv_int(r);
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &r))
                overflow(J, at);
            return jv_int(r);
        case OP_FLOORDIV:
        case OP_MOD: {
            if (y == 0)
                jx_fail(J, at, HEARTH_EINVAL, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1)
                overflow(J, at);
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                m += y;
                q--;
            }
            return jv_int(op == OP_MOD ? m : q);
        }
        case OP_POW: {
            if (y < 0)
                return jv_float(pow((double)x, (double)y));
            int64_t acc = 1, base = x;
            while (y) {
                if (y & 1 && __builtin_mul_overflow(acc, base, &acc))
                    overflow(J, at);
                y >>= 1;
                if (y && __builtin_mul_overflow(base, base, &base))
                    overflow(J, at);
            }
            return jv_int(acc);
        }
        }
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        /* Markup + str escapes the str, and so does str + Markup (Markup.__radd__ wins: a subclass) */
        if (a.markup != b.markup) {
            jv e = jinja_filter(J, at, jinja_filter_id("escape", 6), a.markup ? b : a, NULL, 0, NULL, NULL, 0);
            if (a.markup)
                b = e;
            else
                a = e;
        }
        jsb s = {0};
        jsb_add(J, &s, a.s.p, a.s.n);
        jsb_add(J, &s, b.s.p, b.s.n);
        jv r = jsb_str(&s);
        r.markup = a.markup;
        return r;
    }
    if (op == OP_ADD && jv_is_seq(a) && a.t == b.t) {
        jv out = jv_list(J, a.l->n + b.l->n);
        out.t = a.t;
        for (size_t i = 0; i < a.l->n; i++)
            jl_push(J, out.l, a.l->v[i]);
        for (size_t i = 0; i < b.l->n; i++)
            jl_push(J, out.l, b.l->v[i]);
        jx_step(J, at);
        return out;
    }
    if (op == OP_MUL && (a.t == JV_STR || jv_is_seq(a)) && (b.t == JV_INT || b.t == JV_BOOL))
        return repeat(J, at, a, numi(b));
    if (op == OP_MUL && (b.t == JV_STR || jv_is_seq(b)) && (a.t == JV_INT || a.t == JV_BOOL))
        return repeat(J, at, b, numi(a));
    static const char *const names[] = {[OP_ADD] = "+", [OP_SUB] = "-", [OP_MUL] = "*", [OP_DIV] = "/",
                                        [OP_FLOORDIV] = "//", [OP_MOD] = "%", [OP_POW] = "**"};
    jx_fail(J, at, HEARTH_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'", names[op], jv_type_name(a),
            jv_type_name(b));
}

static bool contains(jx *J, const jnode *at, jv item, jv seq)
{
    switch (seq.t) {
    case JV_STR:
        if (item.t != JV_STR)
            jx_fail(J, at, HEARTH_EINVAL, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        if (!item.s.n)
            return true;
        for (size_t i = 0; i + item.s.n <= seq.s.n; i++)
            if (memcmp(seq.s.p + i, item.s.p, item.s.n) == 0)
                return true;
        return false;
    case JV_LIST:
    case JV_TUPLE:
        for (size_t i = 0; i < seq.l->n; i++)
            if (jv_eq(seq.l->v[i], item))
                return true;
        return false;
    case JV_DICT: return jd_find(seq.d, item) >= 0;
    case JV_UNDEF: return false;
    default: jx_fail(J, at, HEARTH_EINVAL, "argument of type '%s' is not iterable", jv_type_name(seq));
    }
}

static bool compare(jx *J, const jnode *at, int op, jv a, jv b)
{
    switch (op) {
    case OP_EQ: return jv_eq(a, b);
    case OP_NE: return !jv_eq(a, b);
    case OP_IN: return contains(J, at, a, b);
    case OP_NOTIN: return !contains(J, at, a, b);
    }
    if (a.t == JV_UNDEF)
        undefined_error(J, at, a);
    if (b.t == JV_UNDEF)
        undefined_error(J, at, b);
    int c = jv_cmp(J, at, a, b);
    switch (op) {
    case OP_LT: return c < 0;
    case OP_LE: return c <= 0;
    case OP_GT: return c > 0;
    default: return c >= 0;
    }
}

/* ---- attributes and items ---- */
static bool py_index(int64_t i, size_t n, size_t *out)
{
    if (i < 0)
        i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n)
        return false;
    *out = (size_t)i;
    return true;
}

static jv loop_attr(jx *J, jv v, const char *name, size_t n)
{
    jloop *L = v.lp;
#define IS(w) (n == sizeof(w) - 1 && memcmp(name, w, n) == 0)
    if (IS("index"))
        return jv_int((int64_t)L->i + 1);
    if (IS("index0"))
        return jv_int((int64_t)L->i);
    if (IS("revindex"))
        return jv_int((int64_t)(L->n - L->i));
    if (IS("revindex0"))
        return jv_int((int64_t)(L->n - L->i - 1));
    if (IS("first"))
        return jv_bool(L->i == 0);
    if (IS("last"))
        return jv_bool(L->i + 1 == L->n);
    if (IS("length"))
        return jv_int((int64_t)L->n);
    if (IS("depth"))
        return jv_int(1);
    if (IS("depth0"))
        return jv_int(0);
    if (IS("previtem"))
        return L->i > 0 ? L->items[L->i - 1] : jv_undef("previtem", 8);
    if (IS("nextitem"))
        return L->i + 1 < L->n ? L->items[L->i + 1] : jv_undef("nextitem", 8);
#undef IS
    return jinja_method(J, v, name, n);
}

static jv getitem(jx *J, const jnode *at, jv v, jv key, bool then_attr);

jv jinja_getattr(jx *J, const jnode *at, jv v, const char *name, size_t n)
{
    if (v.t == JV_UNDEF)
        undefined_error(J, at, v);
    if (v.t == JV_LOOP)
        return loop_attr(J, v, name, n);
    if (v.t == JV_NS) {
        long i = jd_finds(v.d, name, n);
        return i >= 0 ? v.d->v[i] : jv_undef(name, n);
    }
    jv m = jinja_method(J, v, name, n);
    if (m.t != JV_UNDEF || m.unsafe)
        return m;
    return getitem(J, at, v, jv_str(name, n), false);
}

static jv getitem(jx *J, const jnode *at, jv v, jv key, bool then_attr)
{
    size_t i;
    switch (v.t) {
    case JV_UNDEF: undefined_error(J, at, v);
    case JV_DICT: {
        long k = jd_find(v.d, key);
        if (k >= 0)
            return v.d->v[k];
        break;
    }
    case JV_LIST:
    case JV_TUPLE:
        if (!v.gen && (key.t == JV_INT || key.t == JV_BOOL) && py_index(numi(key), v.l->n, &i))
            return v.l->v[i];
        break;
    case JV_STR:
        if (key.t == JV_INT || key.t == JV_BOOL) {
            size_t len = ju_len(v.s.p, v.s.n);
            if (py_index(numi(key), len, &i)) {
                size_t a = ju_off(v.s.p, v.s.n, i), b = ju_off(v.s.p, v.s.n, i + 1);
                return jv_str(v.s.p + a, b - a);
            }
        }
        break;
    default: break;
    }
    if (then_attr && key.t == JV_STR)
        return jinja_getattr(J, at, v, key.s.p, key.s.n);
    if (key.t == JV_STR)
        return jv_undef(key.s.p, key.s.n);
    return jv_undef(NULL, 0);
}

static int64_t slice_arg(jx *J, const jnode *n, bool *given)
{
    *given = false;
    if (!n)
        return 0;
    jv v = eval(J, n);
    if (v.t == JV_NONE)
        return 0;
    if (v.t != JV_INT && v.t != JV_BOOL)
        jx_fail(J, n, HEARTH_EINVAL, "slice indices must be integers or None");
    *given = true;
    return numi(v);
}

static jv do_slice(jx *J, const jnode *n)
{
    jv v = eval(J, n->a);
    bool hs, he, hst;
    int64_t start = slice_arg(J, n->b, &hs), stop = slice_arg(J, n->c, &he), step = slice_arg(J, n->d, &hst);
    if (!hst)
        step = 1;
    if (step == 0)
        jx_fail(J, n, HEARTH_EINVAL, "slice step cannot be zero");
    if (v.t == JV_UNDEF)
        undefined_error(J, n, v);
    const jv *items;
    size_t len;
    if (v.t == JV_LIST && v.gen)
        return jv_undef(NULL, 0);
    if (v.t == JV_STR || jv_is_seq(v))
        jv_items(J, n, v, &items, &len);
    else
        jx_fail(J, n, HEARTH_EINVAL, "'%s' object is not subscriptable", jv_type_name(v));
    int64_t L = (int64_t)len;
    /* Python's PySlice_AdjustIndices */
    if (!hs)
        start = step < 0 ? L - 1 : 0;
    else if (start < 0) {
        start += L;
        if (start < 0)
            start = step < 0 ? -1 : 0;
    } else if (start >= L)
        start = step < 0 ? L - 1 : L;
    if (!he)
        stop = step < 0 ? -1 : L;
    else if (stop < 0) {
        stop += L;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
    } else if (stop >= L)
        stop = step < 0 ? L - 1 : L;
    jsb sb = {0};
    jv out = jv_list(J, 0);
    out.t = v.t == JV_TUPLE ? JV_TUPLE : JV_LIST;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        jx_step(J, n);
        if (v.t == JV_STR)
            jsb_add(J, &sb, items[i].s.p, items[i].s.n);
        else
            jl_push(J, out.l, items[i]);
    }
    return v.t == JV_STR ? jsb_str(&sb) : out;
}

/* ---- calls ---- */
static jv call_macro(jx *J, const jnode *at, jmacro *m, const jv *args, size_t nargs, const jnode *const *kwn,
                     const jv *kwv, size_t nkw)
{
    const jnode *def = m->node;
    if (nargs > def->nargs)
        jx_fail(J, at, HEARTH_EINVAL, "macro '%.*s' takes not more than %zu argument(s)", (int)def->sn, def->s,
                def->nargs);
    enter(J, at);
    jframe *saved = J->frame;
    jframe *f = frame_new(J, m->closure);
    bool *set = jx_alloc(J, def->nargs + 1);
    memset(set, 0, def->nargs + 1);
    for (size_t i = 0; i < nargs; i++) {
        frame_set(J, f, def->args[i]->s, def->args[i]->sn, args[i]);
        set[i] = true;
    }
    for (size_t k = 0; k < nkw; k++) {
        size_t i;
        for (i = 0; i < def->nargs; i++)
            if (def->args[i]->sn == kwn[k]->sn && memcmp(def->args[i]->s, kwn[k]->s, kwn[k]->sn) == 0)
                break;
        if (i == def->nargs)
            jx_fail(J, kwn[k], HEARTH_EINVAL, "macro '%.*s' takes no keyword argument '%.*s'", (int)def->sn, def->s,
                    (int)kwn[k]->sn, kwn[k]->s);
        if (set[i])
            jx_fail(J, kwn[k], HEARTH_EINVAL, "macro '%.*s' got multiple values for argument '%.*s'", (int)def->sn,
                    def->s, (int)kwn[k]->sn, kwn[k]->s);
        frame_set(J, f, def->args[i]->s, def->args[i]->sn, kwv[k]);
        set[i] = true;
    }
    J->frame = f;
    for (size_t i = 0; i < def->nargs; i++) {
        if (set[i])
            continue;
        jv d = def->args[i]->a ? eval(J, def->args[i]->a) : jv_undef(def->args[i]->s, def->args[i]->sn);
        frame_set(J, f, def->args[i]->s, def->args[i]->sn, d);
    }
    int flow = J->flow;
    J->flow = 0;
    jv out = capture(J, def->body, def->nbody);
    J->flow = flow;
    J->frame = saved;
    J->depth--;
    return out;
}

/* Evaluates a call's (or filter's, or test's) arguments into arena arrays (not the C stack:
 * eval recurses up to max_depth deep). */
static void eval_args(jx *J, const jnode *n, jv **argsp, jv **kwvp)
{
    jv *args = jx_alloc(J, (n->nargs + 1) * sizeof *args), *kwv = jx_alloc(J, (n->nkw + 1) * sizeof *kwv);
    *argsp = args;
    *kwvp = kwv;
    for (size_t i = 0; i < n->nargs; i++)
        args[i] = eval(J, n->args[i]);
    for (size_t i = 0; i < n->nkw; i++)
        kwv[i] = eval(J, n->kw[i]->a);
}

static jv do_call(jx *J, const jnode *n)
{
    jv f = eval(J, n->a);
    jv *args, *kwv;
    eval_args(J, n, &args, &kwv);
    if (f.t == JV_MACRO)
        return call_macro(J, n, f.m, args, n->nargs, (const jnode *const *)n->kw, kwv, n->nkw);
    if (f.t == JV_FUNC)
        return jinja_call_func(J, n, f.fn, args, n->nargs, (const jnode *const *)n->kw, kwv, n->nkw);
    if (f.t == JV_UNDEF)
        undefined_error(J, n, f);
    jx_fail(J, n, HEARTH_EINVAL, "'%s' object is not callable", jv_type_name(f));
}

jv jinja_getitem(jx *J, const jnode *at, jv v, jv key) { return getitem(J, at, v, key, true); }

jv jinja_call_value(jx *J, const jnode *at, jv f, const jv *args, size_t nargs)
{
    if (f.t == JV_MACRO)
        return call_macro(J, at, f.m, args, nargs, NULL, NULL, 0);
    if (f.t == JV_FUNC)
        return jinja_call_func(J, at, f.fn, args, nargs, NULL, NULL, 0);
    if (f.t == JV_UNDEF)
        undefined_error(J, at, f);
    jx_fail(J, at, HEARTH_EINVAL, "'%s' object is not callable", jv_type_name(f));
}

/* ---- expressions ---- */
static jv eval(jx *J, const jnode *n)
{
    jx_step(J, n);
    enter(J, n);
    jv r;
    switch (n->k) {
    case JN_CONST: r = n->val; break;
    case JN_NAME: r = lookup(J, n->s, n->sn); break;
    case JN_CAPTURE: r = J->capture; break;
    case JN_ATTR: r = jinja_getattr(J, n, eval(J, n->a), n->s, n->sn); break;
    case JN_ITEM: {
        jv v = eval(J, n->a);
        r = getitem(J, n, v, eval(J, n->b), true);
        break;
    }
    case JN_SLICE: r = do_slice(J, n); break;
    case JN_CALL: r = do_call(J, n); break;
    case JN_FILTER: {
        jv v = eval(J, n->a);
        jv *args, *kwv;
        eval_args(J, n, &args, &kwv);
        r = jinja_filter(J, n, n->fid, v, args, n->nargs, (const jnode *const *)n->kw, kwv, n->nkw);
        break;
    }
    case JN_TEST: {
        jv v = eval(J, n->a);
        jv *args, *kwv;
        eval_args(J, n, &args, &kwv);
        bool t = jinja_test(J, n, n->fid, v, args, n->nargs);
        r = jv_bool(n->op ? !t : t);
        break;
    }
    case JN_BIN: {
        jv a = eval(J, n->a);
        r = jinja_binop(J, n, n->op, a, eval(J, n->b));
        break;
    }
    case JN_NOT: r = jv_bool(!jv_truthy(eval(J, n->a))); break;
    case JN_NEG:
    case JN_POS: {
        jv v = eval(J, n->a);
        if (v.t == JV_UNDEF)
            undefined_error(J, n, v);
        if (v.t == JV_FLOAT)
            r = jv_float(n->k == JN_NEG ? -v.f : v.f);
        else if (v.t == JV_INT || v.t == JV_BOOL) {
            int64_t x = numi(v);
            if (n->k == JN_NEG && x == INT64_MIN)
                overflow(J, n);
            r = jv_int(n->k == JN_NEG ? -x : x);
        } else
            jx_fail(J, n, HEARTH_EINVAL, "bad operand type for unary %s: '%s'", n->k == JN_NEG ? "-" : "+",
                    jv_type_name(v));
        break;
    }
    case JN_AND: {
        jv a = eval(J, n->a);
        r = jv_truthy(a) ? eval(J, n->b) : a;
        break;
    }
    case JN_OR: {
        jv a = eval(J, n->a);
        r = jv_truthy(a) ? a : eval(J, n->b);
        break;
    }
    case JN_CMP: {
        jv a = eval(J, n->a);
        r = jv_bool(true);
        for (size_t i = 0; i < n->nargs; i++) {
            jv b = eval(J, n->args[i]->a);
            if (!compare(J, n->args[i], n->args[i]->op, a, b)) {
                r = jv_bool(false);
                break;
            }
            a = b;
        }
        break;
    }
    case JN_COND:
        if (jv_truthy(eval(J, n->a)))
            r = eval(J, n->b);
        else
            r = n->c ? eval(J, n->c) : jv_undef(NULL, 0);
        break;
    case JN_LIST:
    case JN_TUPLE: {
        r = jv_list(J, n->nargs);
        if (n->k == JN_TUPLE)
            r.t = JV_TUPLE;
        for (size_t i = 0; i < n->nargs; i++)
            jl_push(J, r.l, eval(J, n->args[i]));
        break;
    }
    case JN_DICT: {
        r = jv_dict(J, n->nargs / 2);
        for (size_t i = 0; i + 1 < n->nargs; i += 2) {
            jv k = eval(J, n->args[i]);
            if (k.t == JV_LIST || k.t == JV_DICT || k.t == JV_UNDEF || k.t == JV_NS)
                jx_fail(J, n->args[i], HEARTH_EINVAL, "unhashable type: '%s'", jv_type_name(k));
            jd_set(J, r.d, k, eval(J, n->args[i + 1]));
        }
        break;
    }
    default: jx_fail(J, n, HEARTH_EINVAL, "internal: node %d is not an expression", n->k);
    }
    J->depth--;
    return r;
}

/* ---- statements ---- */
static void assign(jx *J, const jnode *target, jv v)
{
    if (target->k == JN_NAME) {
        frame_set(J, J->frame, target->s, target->sn, v);
        return;
    }
    if (target->k == JN_ATTR) {
        jv ns = lookup(J, target->a->s, target->a->sn);
        if (ns.t != JV_NS)
            jx_fail(J, target, HEARTH_EINVAL, "cannot assign attribute on non-namespace object");
        jd_set(J, ns.d, jv_str(target->s, target->sn), v);
        return;
    }
    /* tuple unpacking */
    const jv *items;
    size_t n;
    if (v.t == JV_UNDEF)
        undefined_error(J, target, v);
    jv_items(J, target, v, &items, &n);
    if (n != target->nargs)
        jx_fail(J, target, HEARTH_EINVAL, "%s values to unpack (expected %zu, got %zu)",
                n < target->nargs ? "not enough" : "too many", target->nargs, n);
    for (size_t i = 0; i < n; i++)
        assign(J, target->args[i], items[i]);
}

static void exec_for(jx *J, const jnode *n)
{
    jv seq = eval(J, n->b);
    const jv *items;
    size_t count;
    if (seq.t == JV_DICT || seq.t == JV_LIST || seq.t == JV_TUPLE || seq.t == JV_STR || seq.t == JV_UNDEF)
        jv_items(J, n->b, seq, &items, &count);
    else
        jx_fail(J, n->b, HEARTH_EINVAL, "'%s' object is not iterable", jv_type_name(seq));
    jframe *outer = J->frame;
    jframe *lf = frame_new(J, outer);
    if (n->c) {
        /* the `if` clause filters first: loop.length and friends count what is left */
        jv kept = jv_list(J, 0);
        for (size_t i = 0; i < count; i++) {
            jx_step(J, n);
            jframe *f = frame_new(J, lf);
            J->frame = f;
            assign(J, n->a, items[i]);
            if (jv_truthy(eval(J, n->c)))
                jl_push(J, kept.l, items[i]);
        }
        J->frame = outer;
        items = kept.l->v;
        count = kept.l->n;
    }
    jloop *L = jx_alloc(J, sizeof *L);
    L->items = items;
    L->n = count;
    jv loopv = {.t = JV_LOOP, .lp = L};
    for (size_t i = 0; i < count; i++) {
        jx_step(J, n);
        L->i = i;
        jframe *f = frame_new(J, lf);
        J->frame = f;
        frame_set(J, f, "loop", 4, loopv);
        assign(J, n->a, items[i]);
        exec_body(J, n->body, n->nbody);
        J->frame = outer;
        if (J->flow == FLOW_BREAK) {
            J->flow = 0;
            break;
        }
        J->flow = 0;
    }
    J->frame = outer;
    if (count == 0)
        exec_body(J, n->orelse, n->nelse);
}

static void exec_stmt(jx *J, const jnode *n)
{
    jx_step(J, n);
    switch (n->k) {
    case JN_DATA: emit(J, n->s, n->sn); break;
    case JN_OUT: emit_value(J, eval(J, n->a)); break;
    case JN_IF:
        if (jv_truthy(eval(J, n->a)))
            exec_body(J, n->body, n->nbody);
        else
            exec_body(J, n->orelse, n->nelse);
        break;
    case JN_FOR:
        enter(J, n);
        exec_for(J, n);
        J->depth--;
        break;
    case JN_SET: assign(J, n->a, eval(J, n->b)); break;
    case JN_SETBLOCK: {
        enter(J, n);
        jv v = capture(J, n->body, n->nbody);
        if (n->c) {
            jv saved = J->capture;
            J->capture = v;
            v = eval(J, n->c);
            J->capture = saved;
        }
        assign(J, n->a, v);
        J->depth--;
        break;
    }
    case JN_MACRO: {
        jmacro *m = jx_alloc(J, sizeof *m);
        m->node = n;
        m->closure = J->frame;
        frame_set(J, J->frame, n->s, n->sn, (jv){.t = JV_MACRO, .m = m});
        break;
    }
    case JN_BREAK: J->flow = FLOW_BREAK; break;
    case JN_CONTINUE: J->flow = FLOW_CONTINUE; break;
    case JN_FILTERBLOCK: {
        enter(J, n);
        jv saved = J->capture;
        J->capture = capture(J, n->body, n->nbody);
        emit_value(J, eval(J, n->a));
        J->capture = saved;
        J->depth--;
        break;
    }
    default: jx_fail(J, n, HEARTH_EINVAL, "internal: node %d is not a statement", n->k);
    }
}

static void exec_body(jx *J, jnode *const *body, size_t n)
{
    for (size_t i = 0; i < n && !J->flow; i++)
        exec_stmt(J, body[i]);
}

int hearth_jinja_render_ex(const hearth_jinja *t, const char *context_json, const hearth_jinja_limits *lim,
                           hearth_buf *out, hearth_err *err)
{
    jx *J = calloc(1, sizeof *J);
    if (!J)
        return hearth_err_set(err, HEARTH_ENOMEM, "jinja: out of memory");
    size_t entry = out->len;
    J->err = err;
    J->max_steps = lim ? lim->max_steps : HEARTH_JINJA_MAX_STEPS;
    J->max_depth = lim ? lim->max_depth : HEARTH_JINJA_MAX_DEPTH;
    J->arena.max = lim ? lim->max_mem : HEARTH_JINJA_MAX_MEM;
    J->out_max = out->max > out->len ? out->max - out->len : 0;
    jsink main_sink = {.hb = out};
    J->sink = &main_sink;
    volatile int rc = HEARTH_OK;
    if (setjmp(J->jb)) {
        rc = J->code;
        goto done;
    }
    jv ctx;
    char msg[256];
    if (jv_from_json(J, context_json ? context_json : "{}", &ctx, msg, sizeof msg) != HEARTH_OK) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "jinja: %s", msg);
        goto done;
    }
    if (ctx.t != JV_DICT) {
        rc = hearth_err_set(err, HEARTH_EINVAL, "jinja: the context is not a JSON object");
        goto done;
    }
    J->ctx = ctx.d;
    J->frame = frame_new(J, NULL);
    exec_body(J, t->body, t->nbody);
done:
    if (rc != HEARTH_OK)
        out->len = entry;
    jarena_free(&J->arena);
    free(J);
    return rc;
}

int hearth_jinja_render(const hearth_jinja *t, const char *context_json, hearth_buf *out, hearth_err *err)
{
    return hearth_jinja_render_ex(t, context_json, NULL, out, err);
}

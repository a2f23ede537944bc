/* jinja_parse.c: the parser, tokens to a syntax tree, and hearth_jinja_parse.
 *
 * Recursive descent with jinja2's grammar and precedence (parser.py):
 * conditional < or < and < not < comparisons (chained, with in / not in) <
 * + - < ~ < * / // % < ** (left-associative, as in jinja2) < unary - + <
 * postfix (.attr, [item], [a:b:c], call) < filters and tests. Every
 * recursion counts against HEARTH_JINJA_MAX_DEPTH, so a template of ten
 * thousand '(' is an error, not a stack overflow. Filter and test names are
 * resolved here, as jinja2 does at compile time: an unknown name is a syntax
 * error. Statements jinja2 has but chat templates do not use (include,
 * import, extends, block, call, do, with) are refused with their name. */
#include "text/jinja_int.h"
#include "text/unicode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void jp_fail(jparse *P, uint32_t line, uint32_t col, int code, const char *fmt, ...)
{
    char msg[HEARTH_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    hearth_err_set(P->err, code, "jinja: %u:%u: %s", line, col, msg);
    P->code = code;
    longjmp(P->jb, 1);
}

void *jp_alloc(jparse *P, size_t n)
{
    int limit = 0;
    void *p = jarena_alloc(P->arena, n, &limit);
    if (!p) {
        hearth_err_set(P->err, HEARTH_ENOMEM, "jinja: out of memory parsing the template");
        P->code = HEARTH_ENOMEM;
        longjmp(P->jb, 1);
    }
    return p;
}

static jtok *cur(jparse *P) { return &P->toks[P->at]; }
static jtok *peek(jparse *P, size_t k) { return &P->toks[P->at + k < P->ntok ? P->at + k : P->ntok - 1]; }
static void next(jparse *P)
{
    if (P->at + 1 < P->ntok)
        P->at++;
}

static const char *tok_desc(const jtok *k, char *buf, size_t cap)
{
    switch (k->t) {
    case JT_EOF: return "end of template";
    case JT_DATA: return "template data";
    case JT_VAR_BEGIN: return "'{{'";
    case JT_VAR_END: return "'}}'";
    case JT_BLOCK_BEGIN: return "'{%'";
    case JT_BLOCK_END: return "'%}'";
    case JT_STRING: return "a string";
    case JT_INT: return "an integer";
    case JT_FLOAT: return "a float";
    case JT_NAME:
        snprintf(buf, cap, "'%.*s'", (int)(k->n > 40 ? 40 : k->n), k->p);
        return buf;
    default:
        return "an operator";
    }
}

_Noreturn static void expected(jparse *P, const char *what)
{
    char b[64];
    jtok *k = cur(P);
    jp_fail(P, k->line, k->col, HEARTH_EINVAL, "expected %s, got %s", what, tok_desc(k, b, sizeof b));
}

static bool is_op(jparse *P, int op) { return cur(P)->t == JT_OP && cur(P)->op == op; }
static bool is_name(jparse *P, const char *w)
{
    jtok *k = cur(P);
    return k->t == JT_NAME && k->n == strlen(w) && memcmp(k->p, w, k->n) == 0;
}
static bool skip_op(jparse *P, int op)
{
    if (!is_op(P, op))
        return false;
    next(P);
    return true;
}
static bool skip_name(jparse *P, const char *w)
{
    if (!is_name(P, w))
        return false;
    next(P);
    return true;
}
static void want_op(jparse *P, int op, const char *what)
{
    if (!skip_op(P, op))
        expected(P, what);
}

static jnode *mk(jparse *P, int k, const jtok *at)
{
    jnode *n = jp_alloc(P, sizeof *n);
    memset(n, 0, sizeof *n);
    n->k = (uint8_t)k;
    n->line = at->line;
    n->col = at->col;
    return n;
}

/* A growable list of nodes. */
typedef struct nlist { jnode **v; size_t n, cap; } nlist;
static void nl_push(jparse *P, nlist *l, jnode *x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        jnode **nv = jp_alloc(P, cap * sizeof *nv);
        if (l->n)
            memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static void enter(jparse *P)
{
    if (++P->depth > HEARTH_JINJA_MAX_DEPTH) {
        jtok *k = cur(P);
        jp_fail(P, k->line, k->col, HEARTH_ELIMIT, "nesting deeper than %d", HEARTH_JINJA_MAX_DEPTH);
    }
}
static void leave(jparse *P) { P->depth--; }

static jnode *parse_expr(jparse *P, bool with_cond);
static jnode *parse_or(jparse *P);
static jnode *parse_unary(jparse *P, bool with_filter);
static jnode *parse_primary(jparse *P);
static jnode *parse_postfix(jparse *P, jnode *n);
static jnode *parse_filter_expr(jparse *P, jnode *n);

/* Tuple without parentheses: `a, b` where jinja2 allows one (output, set, for). */
static jnode *parse_tuple(jparse *P, bool simplified, bool with_cond, bool explicit_parens)
{
    jtok *at = cur(P);
    nlist items = {0};
    bool is_tuple = false;
    for (;;) {
        if (items.n) {
            if (!skip_op(P, OP_COMMA))
                break;
            is_tuple = true;
        }
        jtok *k = cur(P);
        if (k->t == JT_VAR_END || k->t == JT_BLOCK_END || (k->t == JT_OP && k->op == OP_RPAREN) ||
            (k->t == JT_NAME && k->n == 2 && memcmp(k->p, "in", 2) == 0 && !explicit_parens))
            break;
        if (simplified)
            nl_push(P, &items, parse_primary(P));
        else
            nl_push(P, &items, parse_expr(P, with_cond));
    }
    if (!is_tuple) {
        if (items.n)
            return items.v[0];
        if (!explicit_parens)
            expected(P, "an expression");
    }
    jnode *t = mk(P, JN_TUPLE, at);
    t->args = items.v;
    t->nargs = items.n;
    return t;
}

static jnode *parse_expr(jparse *P, bool with_cond)
{
    enter(P);
    jnode *n = parse_or(P);
    while (with_cond && is_name(P, "if")) {
        jtok *at = cur(P);
        next(P);
        jnode *c = mk(P, JN_COND, at);
        c->b = n;
        c->a = parse_or(P);
        if (skip_name(P, "else"))
            c->c = parse_expr(P, true);
        n = c;
    }
    leave(P);
    return n;
}

static jnode *parse_not(jparse *P);
static jnode *parse_and(jparse *P)
{
    jnode *n = parse_not(P);
    while (is_name(P, "and")) {
        jnode *x = mk(P, JN_AND, cur(P));
        next(P);
        x->a = n;
        x->b = parse_not(P);
        n = x;
    }
    return n;
}

static jnode *parse_or(jparse *P)
{
    jnode *n = parse_and(P);
    while (is_name(P, "or")) {
        jnode *x = mk(P, JN_OR, cur(P));
        next(P);
        x->a = n;
        x->b = parse_and(P);
        n = x;
    }
    return n;
}

static jnode *parse_math1(jparse *P);
static jnode *parse_compare(jparse *P)
{
    jnode *first = parse_math1(P);
    nlist ops = {0};
    for (;;) {
        jtok *at = cur(P);
        int op = 0;
        if (at->t == JT_OP && (at->op == OP_EQ || at->op == OP_NE || at->op == OP_LT || at->op == OP_LE ||
                               at->op == OP_GT || at->op == OP_GE)) {
            op = at->op;
            next(P);
        } else if (is_name(P, "in")) {
            op = OP_IN;
            next(P);
        } else if (is_name(P, "not") && peek(P, 1)->t == JT_NAME && peek(P, 1)->n == 2 &&
                   memcmp(peek(P, 1)->p, "in", 2) == 0) {
            op = OP_NOTIN;
            next(P);
            next(P);
        } else {
            break;
        }
        jnode *o = mk(P, JN_CMPOP, at);
        o->op = (uint8_t)op;
        o->a = parse_math1(P);
        nl_push(P, &ops, o);
    }
    if (!ops.n)
        return first;
    jnode *c = mk(P, JN_CMP, cur(P));
    c->line = first->line;
    c->col = first->col;
    c->a = first;
    c->args = ops.v;
    c->nargs = ops.n;
    return c;
}

static jnode *parse_not(jparse *P)
{
    if (is_name(P, "not")) {
        jnode *x = mk(P, JN_NOT, cur(P));
        next(P);
        enter(P);
        x->a = parse_not(P);
        leave(P);
        return x;
    }
    return parse_compare(P);
}

static jnode *binop(jparse *P, jnode *a, int op, jnode *(*rhs)(jparse *))
{
    jnode *x = mk(P, JN_BIN, cur(P));
    next(P);
    x->op = (uint8_t)op;
    x->a = a;
    x->b = rhs(P);
    return x;
}

static jnode *parse_pow(jparse *P)
{
    jnode *n = parse_unary(P, true);
    while (is_op(P, OP_POW)) {
        jnode *x = mk(P, JN_BIN, cur(P));
        next(P);
        x->op = OP_POW;
        x->a = n;
        x->b = parse_unary(P, true);
        n = x;
    }
    return n;
}

static jnode *parse_math2(jparse *P)
{
    jnode *n = parse_pow(P);
    while (is_op(P, OP_MUL) || is_op(P, OP_DIV) || is_op(P, OP_FLOORDIV) || is_op(P, OP_MOD))
        n = binop(P, n, cur(P)->op, parse_pow);
    return n;
}

static jnode *parse_concat(jparse *P)
{
    jnode *n = parse_math2(P);
    while (is_op(P, OP_TILDE))
        n = binop(P, n, OP_TILDE, parse_math2);
    return n;
}

static jnode *parse_math1(jparse *P)
{
    jnode *n = parse_concat(P);
    while (is_op(P, OP_ADD) || is_op(P, OP_SUB))
        n = binop(P, n, cur(P)->op, parse_concat);
    return n;
}

static jnode *parse_unary(jparse *P, bool with_filter)
{
    enter(P);
    jnode *n;
    if (is_op(P, OP_SUB) || is_op(P, OP_ADD)) {
        n = mk(P, is_op(P, OP_SUB) ? JN_NEG : JN_POS, cur(P));
        next(P);
        n->a = parse_unary(P, false);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter)
        n = parse_filter_expr(P, n);
    leave(P);
    return n;
}

static jnode *konst(jparse *P, const jtok *at, jv v)
{
    jnode *n = mk(P, JN_CONST, at);
    n->val = v;
    return n;
}

static jnode *parse_primary(jparse *P)
{
    enter(P);
    jtok *k = cur(P);
    jnode *n;
    if (k->t == JT_NAME) {
        if (is_name(P, "true") || is_name(P, "True"))
            n = konst(P, k, jv_bool(true));
        else if (is_name(P, "false") || is_name(P, "False"))
            n = konst(P, k, jv_bool(false));
        else if (is_name(P, "none") || is_name(P, "None"))
            n = konst(P, k, jv_none());
        else {
            n = mk(P, JN_NAME, k);
            n->s = k->p;
            n->sn = k->n;
        }
        next(P);
    } else if (k->t == JT_STRING) {
        /* adjacent literals concatenate */
        size_t total = 0, m = 0;
        while (peek(P, m)->t == JT_STRING)
            total += peek(P, m++)->n;
        char *s = jp_alloc(P, total + 1);
        size_t o = 0;
        for (size_t x = 0; x < m; x++) {
            memcpy(s + o, cur(P)->p, cur(P)->n);
            o += cur(P)->n;
            next(P);
        }
        n = konst(P, k, jv_str(s, total));
    } else if (k->t == JT_INT) {
        n = konst(P, k, jv_int(k->i));
        next(P);
    } else if (k->t == JT_FLOAT) {
        n = konst(P, k, jv_float(k->f));
        next(P);
    } else if (is_op(P, OP_LPAREN)) {
        next(P);
        n = parse_tuple(P, false, true, true);
        want_op(P, OP_RPAREN, "')'");
    } else if (is_op(P, OP_LBRACKET)) {
        next(P);
        nlist items = {0};
        while (!is_op(P, OP_RBRACKET)) {
            if (items.n)
                want_op(P, OP_COMMA, "',' or ']'");
            if (is_op(P, OP_RBRACKET))
                break;
            nl_push(P, &items, parse_expr(P, true));
        }
        next(P);
        n = mk(P, JN_LIST, k);
        n->args = items.v;
        n->nargs = items.n;
    } else if (is_op(P, OP_LBRACE)) {
        next(P);
        nlist items = {0};
        while (!is_op(P, OP_RBRACE)) {
            if (items.n)
                want_op(P, OP_COMMA, "',' or '}'");
            if (is_op(P, OP_RBRACE))
                break;
            nl_push(P, &items, parse_expr(P, true));
            want_op(P, OP_COLON, "':'");
            nl_push(P, &items, parse_expr(P, true));
        }
        next(P);
        n = mk(P, JN_DICT, k);
        n->args = items.v;
        n->nargs = items.n;
    } else {
        expected(P, "an expression");
    }
    leave(P);
    return n;
}

/* (args, kw=...) after the '(' has been seen */
static void parse_call_args(jparse *P, jnode *n)
{
    want_op(P, OP_LPAREN, "'('");
    nlist args = {0}, kw = {0};
    while (!is_op(P, OP_RPAREN)) {
        if (args.n || kw.n)
            want_op(P, OP_COMMA, "',' or ')'");
        if (is_op(P, OP_RPAREN))
            break;
        if (is_op(P, OP_MUL) || is_op(P, OP_POW))
            expected(P, "an argument (*args and **kwargs are not supported)");
        if (cur(P)->t == JT_NAME && peek(P, 1)->t == JT_OP && peek(P, 1)->op == OP_ASSIGN) {
            jnode *k = mk(P, JN_KW, cur(P));
            k->s = cur(P)->p;
            k->sn = cur(P)->n;
            next(P);
            next(P);
            k->a = parse_expr(P, true);
            nl_push(P, &kw, k);
        } else {
            if (kw.n)
                expected(P, "a keyword argument (positional after keyword)");
            nl_push(P, &args, parse_expr(P, true));
        }
    }
    next(P);
    n->args = args.v;
    n->nargs = args.n;
    n->kw = kw.v;
    n->nkw = kw.n;
}

static jnode *parse_subscript(jparse *P, jnode *n)
{
    jtok *at = cur(P);
    if (skip_op(P, OP_DOT)) {
        jtok *k = cur(P);
        if (k->t == JT_NAME) {
            jnode *x = mk(P, JN_ATTR, at);
            x->a = n;
            x->s = k->p;
            x->sn = k->n;
            next(P);
            return x;
        }
        if (k->t == JT_INT) {
            jnode *x = mk(P, JN_ITEM, at);
            x->a = n;
            x->b = konst(P, k, jv_int(k->i));
            next(P);
            return x;
        }
        expected(P, "a name after '.'");
    }
    want_op(P, OP_LBRACKET, "'['");
    jnode *parts[3] = {0};
    int np = 0;
    bool slice = false;
    for (;;) {
        if (is_op(P, OP_COLON)) {
            slice = true;
            next(P);
            if (++np > 2)
                expected(P, "']'");
            continue;
        }
        if (is_op(P, OP_RBRACKET))
            break;
        if (parts[np])
            expected(P, "':' or ']'");
        parts[np] = parse_expr(P, true);
        if (!slice && is_op(P, OP_COMMA))
            expected(P, "']' (tuple subscripts are not supported)");
    }
    next(P);
    if (!slice) {
        if (!parts[0])
            expected(P, "a subscript");
        jnode *x = mk(P, JN_ITEM, at);
        x->a = n;
        x->b = parts[0];
        return x;
    }
    jnode *x = mk(P, JN_SLICE, at);
    x->a = n;
    x->b = parts[0];
    x->c = parts[1];
    x->d = parts[2];
    return x;
}

static jnode *parse_postfix(jparse *P, jnode *n)
{
    for (;;) {
        if (is_op(P, OP_DOT) || is_op(P, OP_LBRACKET)) {
            n = parse_subscript(P, n);
        } else if (is_op(P, OP_LPAREN)) {
            jnode *c = mk(P, JN_CALL, cur(P));
            c->line = n->line; /* a call is reported where its callee starts */
            c->col = n->col;
            c->a = n;
            parse_call_args(P, c);
            n = c;
        } else {
            return n;
        }
    }
}

static jnode *parse_filter(jparse *P, jnode *n, bool start_inline)
{
    while (is_op(P, OP_PIPE) || start_inline) {
        if (!start_inline)
            next(P);
        start_inline = false;
        jtok *k = cur(P);
        if (k->t != JT_NAME)
            expected(P, "a filter name");
        jnode *f = mk(P, JN_FILTER, k);
        f->s = k->p;
        f->sn = k->n;
        f->fid = jinja_filter_id(k->p, k->n);
        if (f->fid < 0)
            jp_fail(P, k->line, k->col, HEARTH_EINVAL, "no filter named '%.*s'", (int)(k->n > 40 ? 40 : k->n), k->p);
        next(P);
        f->a = n;
        if (is_op(P, OP_LPAREN))
            parse_call_args(P, f);
        n = f;
    }
    return n;
}

static jnode *parse_test(jparse *P, jnode *n)
{
    jtok *at = cur(P);
    next(P); /* is */
    bool neg = skip_name(P, "not");
    jtok *k = cur(P);
    if (k->t != JT_NAME)
        expected(P, "a test name");
    const char *name = k->p;
    size_t nn = k->n;
    jnode *t = mk(P, JN_TEST, at);
    t->s = name;
    t->sn = nn;
    t->op = neg;
    t->a = n;
    t->fid = jinja_test_id(name, nn);
    if (t->fid < 0)
        jp_fail(P, k->line, k->col, HEARTH_EINVAL, "no test named '%.*s'", (int)(nn > 40 ? 40 : nn), name);
    next(P);
    jtok *c = cur(P);
    if (is_op(P, OP_LPAREN)) {
        parse_call_args(P, t);
    } else if ((c->t == JT_NAME || c->t == JT_STRING || c->t == JT_INT || c->t == JT_FLOAT ||
                (c->t == JT_OP && (c->op == OP_LPAREN || c->op == OP_LBRACKET || c->op == OP_LBRACE))) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is"))
            expected(P, "a test argument, not 'is'");
        jnode *arg = parse_postfix(P, parse_primary(P));
        t->args = jp_alloc(P, sizeof *t->args);
        t->args[0] = arg;
        t->nargs = 1;
    }
    return t;
}

static jnode *parse_filter_expr(jparse *P, jnode *n)
{
    for (;;) {
        if (is_op(P, OP_PIPE))
            n = parse_filter(P, n, false);
        else if (is_name(P, "is"))
            n = parse_test(P, n);
        else if (is_op(P, OP_LPAREN)) {
            jnode *c = mk(P, JN_CALL, cur(P));
            c->line = n->line; /* a call is reported where its callee starts */
            c->col = n->col;
            c->a = n;
            parse_call_args(P, c);
            n = c;
        } else
            return n;
    }
}

/* ---- statements ---- */

static void parse_body(jparse *P, const char *const *ends, nlist *out);

static void block_end(jparse *P)
{
    if (cur(P)->t != JT_BLOCK_END)
        expected(P, "'%}'");
    next(P);
}

/* After parse_body stopped at `{% name`: consumes the name. */
static void end_tag(jparse *P, const char *name)
{
    if (!skip_name(P, name)) {
        char what[40];
        snprintf(what, sizeof what, "'%s'", name);
        expected(P, what);
    }
}

static jnode *assign_target(jparse *P, bool allow_attr)
{
    jtok *k = cur(P);
    if (k->t != JT_NAME)
        expected(P, "a name to assign to");
    jnode *t = mk(P, JN_NAME, k);
    t->s = k->p;
    t->sn = k->n;
    next(P);
    if (allow_attr && is_op(P, OP_DOT)) {
        next(P);
        jtok *a = cur(P);
        if (a->t != JT_NAME)
            expected(P, "an attribute name");
        jnode *x = mk(P, JN_ATTR, a);
        x->a = t;
        x->s = a->p;
        x->sn = a->n;
        next(P);
        return x;
    }
    return t;
}

/* `a`, `a, b`, `(a, b)` as the target of for or set */
static jnode *parse_targets(jparse *P, bool allow_attr)
{
    jtok *at = cur(P);
    bool paren = skip_op(P, OP_LPAREN);
    nlist items = {0};
    nl_push(P, &items, assign_target(P, allow_attr));
    while (skip_op(P, OP_COMMA)) {
        if (cur(P)->t != JT_NAME)
            break;
        nl_push(P, &items, assign_target(P, false));
    }
    if (paren)
        want_op(P, OP_RPAREN, "')'");
    if (items.n == 1 && !paren)
        return items.v[0];
    jnode *t = mk(P, JN_TUPLE, at);
    t->args = items.v;
    t->nargs = items.n;
    return t;
}

static const char *const end_if[] = {"elif", "else", "endif", NULL};
static const char *const end_for[] = {"else", "endfor", NULL};
static const char *const end_endfor[] = {"endfor", NULL};

static jnode *parse_if(jparse *P, jtok *at)
{
    jnode *n = mk(P, JN_IF, at);
    n->a = parse_tuple(P, false, true, false);
    block_end(P);
    nlist body = {0};
    parse_body(P, end_if, &body);
    n->body = body.v;
    n->nbody = body.n;
    jtok *k = cur(P);
    if (skip_name(P, "elif")) {
        jnode *e = parse_if(P, k);
        n->orelse = jp_alloc(P, sizeof *n->orelse);
        n->orelse[0] = e;
        n->nelse = 1;
        return n;
    }
    if (skip_name(P, "else")) {
        block_end(P);
        static const char *const e[] = {"endif", NULL};
        nlist els = {0};
        parse_body(P, e, &els);
        n->orelse = els.v;
        n->nelse = els.n;
    }
    end_tag(P, "endif");
    block_end(P);
    return n;
}

static jnode *parse_statement(jparse *P)
{
    jtok *at = cur(P);
    next(P); /* {% */
    jtok *k = cur(P);
    if (k->t != JT_NAME)
        expected(P, "a statement name");
    enter(P);
    jnode *n = NULL;
    if (skip_name(P, "if")) {
        n = parse_if(P, at);
    } else if (skip_name(P, "for")) {
        n = mk(P, JN_FOR, at);
        n->a = parse_targets(P, false);
        if (!skip_name(P, "in"))
            expected(P, "'in'");
        n->b = parse_tuple(P, false, false, false);
        if (skip_name(P, "if"))
            n->c = parse_expr(P, true);
        if (is_name(P, "recursive"))
            jp_fail(P, cur(P)->line, cur(P)->col, HEARTH_EINVAL, "recursive for loops are not supported");
        block_end(P);
        nlist body = {0}, els = {0};
        parse_body(P, end_for, &body);
        if (skip_name(P, "else")) {
            block_end(P);
            parse_body(P, end_endfor, &els);
        }
        end_tag(P, "endfor");
        block_end(P);
        n->body = body.v;
        n->nbody = body.n;
        n->orelse = els.v;
        n->nelse = els.n;
    } else if (skip_name(P, "set")) {
        jnode *t = parse_targets(P, true);
        if (skip_op(P, OP_ASSIGN)) {
            n = mk(P, JN_SET, at);
            n->a = t;
            n->b = parse_tuple(P, false, true, false);
            block_end(P);
        } else {
            if (t->k != JN_NAME && t->k != JN_ATTR)
                expected(P, "'=' (a block set assigns one name)");
            n = mk(P, JN_SETBLOCK, at);
            n->a = t;
            if (is_op(P, OP_PIPE)) {
                jnode *cap = mk(P, JN_CAPTURE, cur(P));
                n->c = parse_filter(P, cap, false);
            }
            block_end(P);
            static const char *const e[] = {"endset", NULL};
            nlist body = {0};
            parse_body(P, e, &body);
            end_tag(P, "endset");
            block_end(P);
            n->body = body.v;
            n->nbody = body.n;
        }
    } else if (skip_name(P, "macro")) {
        n = mk(P, JN_MACRO, at);
        jtok *nm = cur(P);
        if (nm->t != JT_NAME)
            expected(P, "a macro name");
        n->s = nm->p;
        n->sn = nm->n;
        next(P);
        want_op(P, OP_LPAREN, "'('");
        nlist params = {0};
        while (!is_op(P, OP_RPAREN)) {
            if (params.n)
                want_op(P, OP_COMMA, "',' or ')'");
            jtok *pk = cur(P);
            if (pk->t != JT_NAME)
                expected(P, "a parameter name");
            jnode *p = mk(P, JN_KW, pk);
            p->s = pk->p;
            p->sn = pk->n;
            next(P);
            if (skip_op(P, OP_ASSIGN))
                p->a = parse_expr(P, true);
            else if (params.n && params.v[params.n - 1]->a)
                expected(P, "a default value (a parameter without one follows one with one)");
            nl_push(P, &params, p);
        }
        next(P);
        block_end(P);
        static const char *const e[] = {"endmacro", NULL};
        nlist body = {0};
        parse_body(P, e, &body);
        end_tag(P, "endmacro");
        if (cur(P)->t == JT_NAME)
            next(P); /* {% endmacro name %} */
        block_end(P);
        n->args = params.v;
        n->nargs = params.n;
        n->body = body.v;
        n->nbody = body.n;
    } else if (skip_name(P, "break") || skip_name(P, "continue")) {
        n = mk(P, k->n == 5 ? JN_BREAK : JN_CONTINUE, at);
        block_end(P);
    } else if (skip_name(P, "filter")) {
        n = mk(P, JN_FILTERBLOCK, at);
        jnode *cap = mk(P, JN_CAPTURE, cur(P));
        n->a = parse_filter(P, cap, true);
        block_end(P);
        static const char *const e[] = {"endfilter", NULL};
        nlist body = {0};
        parse_body(P, e, &body);
        end_tag(P, "endfilter");
        block_end(P);
        n->body = body.v;
        n->nbody = body.n;
    } else {
        jp_fail(P, k->line, k->col, HEARTH_EINVAL, "unknown or unsupported statement '%.*s'",
                (int)(k->n > 40 ? 40 : k->n), k->p);
    }
    leave(P);
    return n;
}

static bool at_end_tag(jparse *P, const char *const *ends)
{
    jtok *b = cur(P), *k = peek(P, 1);
    if (b->t != JT_BLOCK_BEGIN || k->t != JT_NAME)
        return false;
    for (size_t i = 0; ends && ends[i]; i++)
        if (k->n == strlen(ends[i]) && memcmp(k->p, ends[i], k->n) == 0)
            return true;
    return false;
}

static bool is_closer(const jtok *k)
{
    static const char *const closers[] = {"endif", "endfor", "endset", "endmacro", "endfilter",
                                          "elif", "else", "endraw", NULL};
    for (size_t i = 0; closers[i]; i++)
        if (k->t == JT_NAME && k->n == strlen(closers[i]) && memcmp(k->p, closers[i], k->n) == 0)
            return true;
    return false;
}

/* Statements until `{% <one of ends>` (left unconsumed but for its '{%'), or EOF when ends is NULL. */
static void parse_body(jparse *P, const char *const *ends, nlist *out)
{
    enter(P);
    for (;;) {
        jtok *k = cur(P);
        if (k->t == JT_EOF) {
            if (ends) {
                char what[96];
                snprintf(what, sizeof what, "'%s'", ends[0]);
                for (size_t i = 1; ends[i]; i++)
                    snprintf(what + strlen(what), sizeof what - strlen(what), " or '%s'", ends[i]);
                expected(P, what);
            }
            break;
        }
        if (k->t == JT_DATA) {
            jnode *d = mk(P, JN_DATA, k);
            d->s = k->p;
            d->sn = k->n;
            nl_push(P, out, d);
            next(P);
        } else if (k->t == JT_VAR_BEGIN) {
            jnode *o = mk(P, JN_OUT, k);
            next(P);
            o->a = parse_tuple(P, false, true, false);
            if (cur(P)->t != JT_VAR_END)
                expected(P, "'}}'");
            next(P);
            nl_push(P, out, o);
        } else if (k->t == JT_BLOCK_BEGIN) {
            if (at_end_tag(P, ends)) {
                next(P);
                break;
            }
            if (is_closer(peek(P, 1))) {
                jtok *c = peek(P, 1);
                if (!ends)
                    jp_fail(P, c->line, c->col, HEARTH_EINVAL, "unexpected '%.*s' (no block is open)", (int)c->n, c->p);
                next(P);
                char what[96];
                snprintf(what, sizeof what, "'%s'", ends[0]);
                for (size_t i = 1; ends[i]; i++)
                    snprintf(what + strlen(what), sizeof what - strlen(what), " or '%s'", ends[i]);
                expected(P, what);
            }
            nl_push(P, out, parse_statement(P));
        } else {
            expected(P, "template data or a tag");
        }
    }
    leave(P);
}

void jinja_parse_template(jparse *P, jnode ***body, size_t *nbody)
{
    nlist l = {0};
    parse_body(P, NULL, &l);
    *body = l.v;
    *nbody = l.n;
}

int hearth_jinja_parse(const char *src, size_t len, hearth_jinja **out, hearth_err *err)
{
    *out = NULL;
    int vrc = hearth_utf8_validate(src, len, err);
    if (vrc != HEARTH_OK) {
        hearth_err_prefix(err, "jinja");
        return vrc;
    }
    hearth_jinja *t = calloc(1, sizeof *t);
    if (!t)
        return hearth_err_set(err, HEARTH_ENOMEM, "jinja: out of memory");
    t->arena.max = (size_t)64 << 20;
    jparse *P = calloc(1, sizeof *P);
    if (!P) {
        free(t);
        return hearth_err_set(err, HEARTH_ENOMEM, "jinja: out of memory");
    }
    P->err = err;
    P->arena = &t->arena;
    if (setjmp(P->jb)) {
        int code = P->code;
        free(P);
        hearth_jinja_free(t);
        return code;
    }
    /* newlines normalized to \n; one trailing newline dropped (keep_trailing_newline=False) */
    char *s = jp_alloc(P, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n')
        n--;
    s[n] = 0;
    t->src = s;
    t->len = n;
    P->src = s;
    P->len = n;
    jinja_lex(P);
    jinja_parse_template(P, &t->body, &t->nbody);
    free(P);
    *out = t;
    return HEARTH_OK;
}

void hearth_jinja_free(hearth_jinja *t)
{
    if (!t)
        return;
    jarena_free(&t->arena);
    free(t);
}

/* jinja_int.h: the private types shared by the Jinja interpreter's files
 * (jinja_lex.c, jinja_parse.c, jinja_value.c, jinja_eval.c, jinja_filters.c).
 *
 * Memory: everything a parse makes lives in the template's arena, everything
 * a render makes in the render's arena; both are freed whole. Errors unwind
 * with longjmp to the one setjmp of hearth_jinja_parse / _render: nothing
 * between owns memory outside the arena, so there is nothing to clean up on
 * the way (the output buffer is truncated back at the top). */
#ifndef HEARTH_TEXT_JINJA_INT_H
#define HEARTH_TEXT_JINJA_INT_H

#include "text/jinja.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ---- */
typedef struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} jchunk;

typedef struct jarena {
    jchunk *head;
    size_t total, max; /* bytes allocated from malloc; ceiling */
} jarena;

/* NULL on malloc failure or past max (*limit set to 1 for the latter). */
void *jarena_alloc(jarena *a, size_t n, int *limit);
void jarena_free(jarena *a);

/* ---- values ---- */
enum {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR,
    JV_LIST, JV_TUPLE, JV_DICT, JV_NS, JV_FUNC, JV_MACRO, JV_LOOP,
};

typedef struct jv {
    uint8_t t;
    uint8_t unsafe; /* JV_UNDEF from an attribute the sandbox refuses */
    uint8_t markup; /* JV_STR: a markupsafe.Markup (from safe or escape): `+` escapes a plain str operand */
    uint8_t gen;    /* JV_LIST: a generator or iterator (map, select, ...): no len(), no JSON, always true */
    union {
        bool b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s; /* JV_STR; JV_UNDEF: the name, for messages */
        struct jlist *l;                        /* JV_LIST, JV_TUPLE */
        struct jdict *d;                        /* JV_DICT, JV_NS */
        struct jfunc *fn;
        struct jmacro *m;
        struct jloop *lp;
    };
} jv;

typedef struct jlist { jv *v; size_t n, cap; } jlist;
typedef struct jdict { jv *k, *v; size_t n, cap; } jdict;
typedef struct jfunc { int id; jv self; } jfunc;
typedef struct jloop { const jv *items; size_t n, i; } jloop;

/* ---- tokens ---- */
enum {
    JT_EOF, JT_DATA, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END,
    JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP,
};
/* operator codes (JT_OP's op) */
enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_TILDE,
    OP_LBRACKET, OP_RBRACKET, OP_LPAREN, OP_RPAREN, OP_LBRACE, OP_RBRACE,
    OP_EQ, OP_NE, OP_GT, OP_GE, OP_LT, OP_LE, OP_ASSIGN, OP_DOT, OP_COLON,
    OP_PIPE, OP_COMMA, OP_SEMICOLON,
    /* not lexed: comparison codes used by the parser */
    OP_IN, OP_NOTIN,
};

typedef struct jtok {
    uint8_t t, op;
    uint32_t line, col;
    const char *p; /* JT_DATA, JT_NAME, JT_STRING (decoded): text */
    size_t n;
    int64_t i;
    double f;
} jtok;

/* ---- syntax tree ---- */
enum {
    JN_CONST, JN_NAME, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
    JN_BIN, JN_NOT, JN_NEG, JN_POS, JN_AND, JN_OR, JN_CMP, JN_CMPOP, JN_COND,
    JN_LIST, JN_TUPLE, JN_DICT, JN_KW, JN_CAPTURE,
    /* statements */
    JN_DATA, JN_OUT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK, JN_MACRO, JN_BREAK,
    JN_CONTINUE, JN_FILTERBLOCK,
};

typedef struct jnode jnode;
struct jnode {
    uint8_t k, op;   /* kind; operator, or 1 for a negated test */
    uint32_t line, col;
    const char *s;   /* a name, a filter's or test's name, JN_DATA's text */
    size_t sn;
    int fid;         /* JN_FILTER / JN_TEST: index in the filter or test table */
    jv val;          /* JN_CONST */
    jnode *a, *b, *c, *d;
    jnode **args;    /* positional arguments, items, comparison operands, macro parameters */
    size_t nargs;
    jnode **kw;      /* JN_KW keyword arguments */
    size_t nkw;
    jnode **body;
    size_t nbody;
    jnode **orelse;
    size_t nelse;
};

struct hearth_jinja {
    jarena arena;
    char *src; /* the source, newlines normalized, trailing newline dropped */
    size_t len;
    jnode **body;
    size_t nbody;
};

/* ---- lexer and parser (jinja_lex.c, jinja_parse.c) ---- */
typedef struct jparse {
    jmp_buf jb;
    hearth_err *err;
    int code;
    jarena *arena;
    const char *src;
    size_t len;
    jtok *toks;
    size_t ntok, cap, at;
    int depth;
    size_t lc_off; /* pos_of's cache */
    uint32_t lc_line, lc_col;
} jparse;

_Noreturn void jp_fail(jparse *P, uint32_t line, uint32_t col, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void *jp_alloc(jparse *P, size_t n);
void jinja_lex(jparse *P);
void jinja_parse_template(jparse *P, jnode ***body, size_t *nbody);
/* Python's str.isspace for one code point. */
bool jinja_py_space(int32_t cp);
int jinja_filter_id(const char *name, size_t n);
int jinja_test_id(const char *name, size_t n);

/* ---- render state (jinja_eval.c) ---- */
typedef struct jvar { const char *name; size_t n; jv v; } jvar;
typedef struct jframe {
    struct jframe *parent;
    jvar *vars;
    size_t n, cap;
} jframe;
typedef struct jmacro { const jnode *node; jframe *closure; } jmacro;

/* Where output goes: the caller's buffer, or a capture in the arena. */
typedef struct jsink {
    hearth_buf *hb;
    char *p;
    size_t n, cap;
} jsink;

typedef struct jx {
    jmp_buf jb;
    hearth_err *err;
    int code;
    jarena arena;
    uint64_t steps, max_steps;
    int depth, max_depth;
    size_t out_max;
    jsink *sink;
    jdict *ctx;
    jframe *frame;
    int flow; /* 0, or FLOW_BREAK / FLOW_CONTINUE pending */
    jv capture; /* JN_CAPTURE's value inside a filter block */
} jx;
enum { FLOW_BREAK = 1, FLOW_CONTINUE };

_Noreturn void jx_fail(jx *J, const jnode *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void *jx_alloc(jx *J, size_t n);
void jx_step(jx *J, const jnode *at);

/* values (jinja_value.c) */
jv jv_undef(const char *name, size_t n);
jv jv_none(void);
jv jv_bool(bool b);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_str(const char *p, size_t n);
jv jv_strz(const char *s);
jv jv_list(jx *J, size_t cap);
jv jv_dict(jx *J, size_t cap);
void jl_push(jx *J, jlist *l, jv v);
void jd_set(jx *J, jdict *d, jv k, jv v);
/* index of key k in d, or -1 */
long jd_find(const jdict *d, jv k);
long jd_finds(const jdict *d, const char *k, size_t n);
bool jv_truthy(jv v);
bool jv_eq(jv a, jv b);
/* Python's <, ==, >: -1, 0, 1; a type error (unorderable) fails at `at`. */
int jv_cmp(jx *J, const jnode *at, jv a, jv b);
const char *jv_type_name(jv v);
bool jv_is_seq(jv v) ;
/* string builder in the arena */
typedef struct jsb { char *p; size_t n, cap; } jsb;
void jsb_add(jx *J, jsb *b, const char *p, size_t n);
void jsb_addc(jx *J, jsb *b, char c);
void jsb_addz(jx *J, jsb *b, const char *s);
jv jsb_str(jsb *b);
/* str(v) and repr(v) as Python writes them */
void jv_to_str(jx *J, jsb *b, jv v);
void jv_repr(jx *J, jsb *b, jv v);
jv jv_as_str(jx *J, jv v);
void jv_fmt_float(char out[40], double f);
/* json.dumps(v, ensure_ascii=False, indent, separators, sort_keys); indent NULL for none */
void jv_tojson(jx *J, const jnode *at, jsb *b, jv v, const char *indent, size_t indent_n, const char *item_sep,
               const char *key_sep, bool sort_keys, int depth);
/* Parses JSON text into values in J's arena; HEARTH_EINVAL with a message on bad text. */
int jv_from_json(jx *J, const char *s, jv *out, char *msg, size_t msg_cap);
/* code points of a UTF-8 string; the byte offset of code point i */
size_t ju_len(const char *p, size_t n);
size_t ju_off(const char *p, size_t n, size_t i);

/* iteration: the items of an iterable as an array (strings: one per code point; dicts: keys) */
void jv_items(jx *J, const jnode *at, jv v, const jv **items, size_t *n);

/* filters, tests, methods, globals (jinja_filters.c) */
jv jinja_filter(jx *J, const jnode *at, int fid, jv v, const jv *args, size_t nargs, const jnode *const *kwn,
                const jv *kwv, size_t nkw);
bool jinja_test(jx *J, const jnode *at, int tid, jv v, const jv *args, size_t nargs);
/* jv getattr for methods: a JV_FUNC bound to v, or JV_UNDEF */
jv jinja_method(jx *J, jv v, const char *name, size_t n);
jv jinja_call_func(jx *J, const jnode *at, jfunc *f, const jv *args, size_t nargs, const jnode *const *kwn,
                   const jv *kwv, size_t nkw);
jv jinja_global(const char *name, size_t n, jx *J);
/* evaluation hooks the filters need */
jv jinja_binop(jx *J, const jnode *at, int op, jv a, jv b);
jv jinja_getitem(jx *J, const jnode *at, jv v, jv key);
jv jinja_call_value(jx *J, const jnode *at, jv f, const jv *args, size_t nargs);
jv jinja_getattr(jx *J, const jnode *at, jv v, const char *name, size_t n);

#endif

/* jinja_lex.c: the Jinja lexer, with jinja2's whitespace control.
 *
 * Follows jinja2 3.1's lexer (lexer.py) rule for rule, since transformers'
 * output depends on each one: the source's newlines are normalized to \n and
 * one trailing newline is dropped; `{%-` / `{{-` / `{#-` strip all whitespace
 * before the tag, `-%}` / `-}}` / `-#}` all after it; trim_blocks drops the
 * one newline after `%}` and `#}` (not `}}`, not `+%}`, not `{% raw %}`);
 * lstrip_blocks drops the spaces and tabs before `{%` and `{#` when only they
 * stand between the tag and the start of its line (unless `{%+`), where
 * "start of line" is also true after a token that ended with a newline.
 * Inside a tag, `%}` and `}}` close it only outside brackets, as jinja2's
 * balancing stack does. Tokens go into one array that the parser walks; the
 * alternative, lexing on demand, saves memory no template needs. */
#include "text/jinja_int.h"
#include "text/unicode.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool jinja_py_space(int32_t cp)
{
    return (cp >= 9 && cp <= 13) || (cp >= 28 && cp <= 32) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
           cp == 0x3000;
}

/* Length of the whitespace (Python's \s) starting at s[i]. */
static size_t space_at(const char *s, size_t n, size_t i)
{
    size_t j = i;
    int32_t cp = hearth_utf8_decode(s, n, &j);
    return cp >= 0 && jinja_py_space(cp) ? j - i : 0;
}

static size_t skip_space(const char *s, size_t n, size_t i)
{
    size_t k;
    while (i < n && (k = space_at(s, n, i)) > 0)
        i += k;
    return i;
}

/* Python's str.rstrip(): the length of s[0..n) without trailing whitespace. */
static size_t rstrip_len(const char *s, size_t n)
{
    while (n > 0) {
        size_t st = n - 1;
        while (st > 0 && ((unsigned char)s[st] & 0xc0) == 0x80 && n - st < 4)
            st--;
        size_t j = st;
        int32_t cp = hearth_utf8_decode(s, n, &j);
        if (cp < 0 || j != n || !jinja_py_space(cp))
            break;
        n = st;
    }
    return n;
}

/* line:col of a byte offset, counting on from the last one asked (offsets mostly grow). */
static void pos_of(jparse *P, size_t off, uint32_t *line, uint32_t *col)
{
    uint32_t l = 1, c = 1;
    size_t i = 0;
    if (off >= P->lc_off && P->lc_line) {
        i = P->lc_off;
        l = P->lc_line;
        c = P->lc_col;
    }
    for (; i < off && i < P->len; i++) {
        if (P->src[i] == '\n') {
            l++;
            c = 1;
        } else if (((unsigned char)P->src[i] & 0xc0) != 0x80) {
            c++;
        }
    }
    P->lc_off = i;
    P->lc_line = l;
    P->lc_col = c;
    *line = l;
    *col = c;
}

static jtok *push(jparse *P, int t, size_t off)
{
    if (P->ntok == P->cap) {
        size_t cap = P->cap ? P->cap * 2 : 256;
        jtok *nt = jp_alloc(P, cap * sizeof *nt);
        if (P->ntok)
            memcpy(nt, P->toks, P->ntok * sizeof *nt);
        P->toks = nt;
        P->cap = cap;
    }
    jtok *k = &P->toks[P->ntok++];
    memset(k, 0, sizeof *k);
    k->t = (uint8_t)t;
    pos_of(P, off, &k->line, &k->col);
    return k;
}

static void fail_at(jparse *P, size_t off, const char *what)
{
    uint32_t l, c;
    pos_of(P, off, &l, &c);
    jp_fail(P, l, c, HEARTH_EINVAL, "%s", what);
}

/* Data before a tag, with the tag's left whitespace control applied. */
static void emit_data(jparse *P, size_t from, size_t to, char sign, bool lstrip, bool line_starting)
{
    const char *s = P->src;
    if (sign == '-') {
        to = from + rstrip_len(s + from, to - from);
    } else if (sign != '+' && lstrip) {
        size_t l = to;
        while (l > from && s[l - 1] != '\n')
            l--;
        if (l > from || line_starting) {
            size_t e = skip_space(s, to, l);
            if (e == to && to > l)
                to = l;
        }
    }
    if (to > from) {
        jtok *k = push(P, JT_DATA, from);
        k->p = s + from;
        k->n = to - from;
    }
}

static bool match_word(const char *s, size_t n, size_t i, const char *w)
{
    size_t wl = strlen(w);
    if (i + wl > n || memcmp(s + i, w, wl) != 0)
        return false;
    return i + wl == n || !(s[i + wl] == '_' || (s[i + wl] >= 'a' && s[i + wl] <= 'z') ||
                            (s[i + wl] >= 'A' && s[i + wl] <= 'Z') || (s[i + wl] >= '0' && s[i + wl] <= '9'));
}

/* A block end at i: "+%}", "-%}" then whitespace, "%}" then one optional "\n". Returns the offset after it, or 0. */
static size_t block_end_at(const char *s, size_t n, size_t i)
{
    if (i + 3 <= n && s[i] == '+' && s[i + 1] == '%' && s[i + 2] == '}')
        return i + 3;
    if (i + 3 <= n && s[i] == '-' && s[i + 1] == '%' && s[i + 2] == '}')
        return skip_space(s, n, i + 3);
    if (i + 2 <= n && s[i] == '%' && s[i + 1] == '}')
        return i + 2 < n && s[i + 2] == '\n' ? i + 3 : i + 2;
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string literal at s[i] (the quote); decodes Python's unicode-escape. Returns the offset after it. */
static size_t lex_string(jparse *P, size_t i, jtok *k)
{
    const char *s = P->src;
    char q = s[i];
    size_t j = i + 1;
    while (j < P->len && s[j] != q) {
        if (s[j] == '\\' && j + 1 < P->len)
            j++;
        j++;
    }
    if (j >= P->len)
        fail_at(P, i, "unterminated string literal");
    char *o = jp_alloc(P, (j - i) * 2 + 4);
    size_t on = 0;
    for (size_t x = i + 1; x < j; x++) {
        char c = s[x];
        if (c != '\\') {
            o[on++] = c;
            continue;
        }
        char e = s[++x];
        int32_t cp = -1;
        int digits = 0;
        switch (e) {
        case 'n': o[on++] = '\n'; break;
        case 't': o[on++] = '\t'; break;
        case 'r': o[on++] = '\r'; break;
        case '\\': o[on++] = '\\'; break;
        case '\'': o[on++] = '\''; break;
        case '"': o[on++] = '"'; break;
        case 'a': o[on++] = '\a'; break;
        case 'b': o[on++] = '\b'; break;
        case 'f': o[on++] = '\f'; break;
        case 'v': o[on++] = '\v'; break;
        case '\n': break;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
            if (e >= '0' && e <= '7') {
                cp = 0;
                int m = 0;
                while (m < 3 && x < j && s[x] >= '0' && s[x] <= '7') {
                    cp = cp * 8 + (s[x] - '0');
                    x++;
                    m++;
                }
                x--;
            } else {
                o[on++] = '\\';
                o[on++] = e;
            }
        }
        if (digits) {
            cp = 0;
            for (int m = 0; m < digits; m++) {
                int h = x + 1 < j ? hexval(s[x + 1]) : -1;
                if (h < 0)
                    fail_at(P, x, "truncated \\x, \\u or \\U escape in a string literal");
                cp = cp * 16 + h;
                x++;
            }
        }
        if (cp >= 0) {
            size_t w = hearth_utf8_encode(cp, o + on);
            if (!w)
                fail_at(P, x, "string literal escape is not a Unicode scalar value");
            on += w;
        }
    }
    k->p = o;
    k->n = on;
    return j + 1;
}

static size_t lex_number(jparse *P, size_t i, jtok *k)
{
    const char *s = P->src;
    size_t j = i;
    char buf[128];
    size_t bn = 0;
    bool is_float = false;
#define DIGITS()                                                                                  \
    while (j < P->len && ((s[j] >= '0' && s[j] <= '9') || (s[j] == '_' && j + 1 < P->len &&      \
                                                           s[j + 1] >= '0' && s[j + 1] <= '9'))) { \
        if (s[j] != '_' && bn < sizeof buf - 8)                                                   \
            buf[bn++] = s[j];                                                                     \
        j++;                                                                                      \
    }
    DIGITS();
    if (j + 1 < P->len && s[j] == '.' && s[j + 1] >= '0' && s[j + 1] <= '9') {
        is_float = true;
        buf[bn++] = '.';
        j++;
        DIGITS();
    }
    if (j < P->len && (s[j] == 'e' || s[j] == 'E')) {
        size_t e = j + 1;
        if (e < P->len && (s[e] == '+' || s[e] == '-'))
            e++;
        if (e < P->len && s[e] >= '0' && s[e] <= '9') {
            is_float = true;
            buf[bn++] = 'e';
            if (s[j + 1] == '-')
                buf[bn++] = '-';
            j = e;
            DIGITS();
        }
    }
#undef DIGITS
    buf[bn] = 0;
    if (is_float) {
        k->t = JT_FLOAT;
        k->f = strtod(buf, NULL);
    } else {
        k->t = JT_INT;
        int64_t v = 0;
        for (size_t x = 0; x < bn; x++) {
            if (v > (INT64_MAX - (buf[x] - '0')) / 10)
                fail_at(P, i, "integer literal too large (past 64 bits)");
            v = v * 10 + (buf[x] - '0');
        }
        k->i = v;
    }
    return j;
}

static const struct { const char *s; uint8_t op; } ops[] = {
    {"//", OP_FLOORDIV}, {"**", OP_POW}, {"==", OP_EQ}, {"!=", OP_NE}, {">=", OP_GE}, {"<=", OP_LE},
    {"+", OP_ADD}, {"-", OP_SUB}, {"*", OP_MUL}, {"/", OP_DIV}, {"%", OP_MOD}, {"~", OP_TILDE},
    {"[", OP_LBRACKET}, {"]", OP_RBRACKET}, {"(", OP_LPAREN}, {")", OP_RPAREN}, {"{", OP_LBRACE},
    {"}", OP_RBRACE}, {">", OP_GT}, {"<", OP_LT}, {"=", OP_ASSIGN}, {".", OP_DOT}, {":", OP_COLON},
    {"|", OP_PIPE}, {",", OP_COMMA}, {";", OP_SEMICOLON},
};

/* Lexes the inside of a {{ }} or {% %} from i; returns the offset after its end. */
static size_t lex_tag(jparse *P, size_t i, bool block, size_t tag_start)
{
    const char *s = P->src;
    size_t n = P->len;
    char stack[256];
    size_t depth = 0;
    for (;;) {
        i = skip_space(s, n, i);
        if (i >= n)
            fail_at(P, tag_start, block ? "unexpected end of template: a '{%' tag is not closed"
                                        : "unexpected end of template: a '{{' tag is not closed");
        if (depth == 0) {
            size_t e = 0;
            if (block) {
                e = block_end_at(s, n, i);
            } else if (i + 3 <= n && s[i] == '-' && s[i + 1] == '}' && s[i + 2] == '}') {
                e = skip_space(s, n, i + 3);
            } else if (i + 2 <= n && s[i] == '}' && s[i + 1] == '}') {
                e = i + 2;
            }
            if (e) {
                push(P, block ? JT_BLOCK_END : JT_VAR_END, i);
                return e;
            }
        }
        char c = s[i];
        if (c == '\'' || c == '"') {
            jtok *k = push(P, JT_STRING, i);
            i = lex_string(P, i, k);
        } else if (c >= '0' && c <= '9') {
            jtok *k = push(P, JT_INT, i);
            i = lex_number(P, i, k);
        } else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            size_t j = i;
            while (j < n && (s[j] == '_' || (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                             (s[j] >= '0' && s[j] <= '9')))
                j++;
            jtok *k = push(P, JT_NAME, i);
            k->p = s + i;
            k->n = j - i;
            i = j;
        } else {
            size_t m;
            for (m = 0; m < sizeof ops / sizeof ops[0]; m++) {
                size_t l = strlen(ops[m].s);
                if (i + l <= n && memcmp(s + i, ops[m].s, l) == 0)
                    break;
            }
            if (m == sizeof ops / sizeof ops[0]) {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected character '%c'", c >= 32 && c < 127 ? c : '?');
                fail_at(P, i, msg);
            }
            uint8_t op = ops[m].op;
            if (op == OP_LBRACE || op == OP_LPAREN || op == OP_LBRACKET) {
                if (depth == sizeof stack)
                    fail_at(P, i, "brackets nested too deeply");
                stack[depth++] = op == OP_LBRACE ? '}' : op == OP_LPAREN ? ')' : ']';
            } else if (op == OP_RBRACE || op == OP_RPAREN || op == OP_RBRACKET) {
                if (depth == 0 || stack[depth - 1] != s[i]) {
                    char msg[64];
                    snprintf(msg, sizeof msg, "unexpected '%c'", s[i]);
                    fail_at(P, i, msg);
                }
                depth--;
            }
            jtok *k = push(P, JT_OP, i);
            k->op = op;
            i += strlen(ops[m].s);
        }
    }
}

void jinja_lex(jparse *P)
{
    const char *s = P->src;
    size_t n = P->len, pos = 0;
    bool line_starting = true;
    for (;;) {
        size_t q = pos;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#')))
            q++;
        if (q + 1 >= n) {
            if (n > pos) {
                jtok *k = push(P, JT_DATA, pos);
                k->p = s + pos;
                k->n = n - pos;
            }
            break;
        }
        char kind = s[q + 1];
        char sign = q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        size_t after = q + 2 + (sign ? 1 : 0);
        /* {% raw %} */
        if (kind == '%') {
            size_t r = skip_space(s, n, after);
            if (match_word(s, n, r, "raw")) {
                size_t e = skip_space(s, n, r + 3), body;
                if (e + 3 <= n && s[e] == '-' && s[e + 1] == '%' && s[e + 2] == '}')
                    body = skip_space(s, n, e + 3);
                else if (e + 2 <= n && s[e] == '%' && s[e + 1] == '}')
                    body = e + 2;
                else
                    body = 0;
                if (body) {
                    emit_data(P, pos, q, sign, true, line_starting);
                    bool ls = s[body - 1] == '\n';
                    size_t x = body;
                    for (;; x++) {
                        if (x + 1 >= n)
                            fail_at(P, q, "missing end of raw directive");
                        if (s[x] != '{' || s[x + 1] != '%')
                            continue;
                        char es = x + 2 < n && (s[x + 2] == '-' || s[x + 2] == '+') ? s[x + 2] : 0;
                        size_t w = skip_space(s, n, x + 2 + (es ? 1 : 0));
                        if (!match_word(s, n, w, "endraw"))
                            continue;
                        size_t end = block_end_at(s, n, skip_space(s, n, w + 6));
                        if (!end)
                            continue;
                        emit_data(P, body, x, es, true, ls);
                        pos = end;
                        line_starting = s[end - 1] == '\n';
                        break;
                    }
                    continue;
                }
            }
        }
        emit_data(P, pos, q, sign, kind != '{', line_starting);
        if (kind == '#') {
            size_t x = after;
            while (x + 1 < n && !(s[x] == '#' && s[x + 1] == '}'))
                x++;
            if (x + 1 >= n)
                fail_at(P, q, "missing end of comment tag");
            size_t end = x + 2;
            if (x > after && s[x - 1] == '-')
                end = skip_space(s, n, end);
            else if (!(x > after && s[x - 1] == '+') && end < n && s[end] == '\n')
                end++;
            pos = end;
            line_starting = s[end - 1] == '\n';
            continue;
        }
        push(P, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, q);
        pos = lex_tag(P, after, kind == '%', q);
        line_starting = s[pos - 1] == '\n';
    }
    push(P, JT_EOF, n);
}

/* jinja_json.c: reads the render's context JSON into interpreter values.
 *
 * A small strict parser of our own, not cJSON, because a template must tell
 * 1 (int) from 1.0 (float), as json.loads does, and cJSON keeps only a
 * double; objects keep their key order (Python dicts do); strings are
 * checked to be UTF-8, \u escapes (surrogate pairs included) decoded; nesting
 * is bounded at 512 so hostile input cannot recurse off the stack. */
#include "text/jinja_int.h"
#include "text/unicode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON reading ---- */
typedef struct jrd {
    jx *J;
    const char *s;
    size_t i, n;
    char *msg;
    size_t msg_cap;
    int depth;
} jrd;

static void rd_ws(jrd *R)
{
    while (R->i < R->n && (R->s[R->i] == ' ' || R->s[R->i] == '\t' || R->s[R->i] == '\n' || R->s[R->i] == '\r'))
        R->i++;
}

static int rd_fail(jrd *R, const char *what)
{
    snprintf(R->msg, R->msg_cap, "context JSON: %s at offset %zu", what, R->i);
    return -1;
}

static int rd_hex4(jrd *R, uint32_t *out)
{
    if (R->i + 4 > R->n)
        return rd_fail(R, "truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        char c = R->s[R->i++];
        int h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (h < 0)
            return rd_fail(R, "bad \\u escape");
        v = v * 16 + (uint32_t)h;
    }
    *out = v;
    return 0;
}

static int rd_string(jrd *R, jv *out)
{
    R->i++; /* " */
    jsb b = {0};
    size_t run = R->i;
    for (;;) {
        if (R->i >= R->n)
            return rd_fail(R, "unterminated string");
        unsigned char c = (unsigned char)R->s[R->i];
        if (c == '"')
            break;
        if (c < 0x20)
            return rd_fail(R, "control character in a string");
        if (c != '\\') {
            R->i++;
            continue;
        }
        jsb_add(R->J, &b, R->s + run, R->i - run);
        R->i++;
        if (R->i >= R->n)
            return rd_fail(R, "unterminated string");
        char e = R->s[R->i++];
        char o = 0;
        switch (e) {
        case '"': o = '"'; break;
        case '\\': o = '\\'; break;
        case '/': o = '/'; break;
        case 'b': o = '\b'; break;
        case 'f': o = '\f'; break;
        case 'n': o = '\n'; break;
        case 'r': o = '\r'; break;
        case 't': o = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (rd_hex4(R, &cp))
                return -1;
            if (cp >= 0xd800 && cp < 0xdc00 && R->i + 6 <= R->n && R->s[R->i] == '\\' && R->s[R->i + 1] == 'u') {
                size_t save = R->i;
                R->i += 2;
                uint32_t lo;
                if (rd_hex4(R, &lo))
                    return -1;
                if (lo >= 0xdc00 && lo < 0xe000)
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                else
                    R->i = save;
            }
            char u[4];
            size_t w = hearth_utf8_encode((int32_t)cp, u);
            if (!w)
                return rd_fail(R, "a lone surrogate escape (not representable in UTF-8)");
            jsb_add(R->J, &b, u, w);
            break;
        }
        default: return rd_fail(R, "bad escape");
        }
        if (o)
            jsb_addc(R->J, &b, o);
        run = R->i;
    }
    jsb_add(R->J, &b, R->s + run, R->i - run);
    R->i++;
    if (b.n && hearth_utf8_validate(b.p, b.n, NULL) != HEARTH_OK)
        return rd_fail(R, "invalid UTF-8 in a string");
    *out = jsb_str(&b);
    return 0;
}

static int rd_value(jrd *R, jv *out)
{
    rd_ws(R);
    if (R->i >= R->n)
        return rd_fail(R, "unexpected end");
    if (++R->depth > 512)
        return rd_fail(R, "nested deeper than 512");
    char c = R->s[R->i];
    int rc = 0;
    if (c == '{') {
        R->i++;
        jv d = jv_dict(R->J, 0);
        rd_ws(R);
        if (R->i < R->n && R->s[R->i] == '}') {
            R->i++;
        } else {
            for (;;) {
                rd_ws(R);
                if (R->i >= R->n || R->s[R->i] != '"')
                    return rd_fail(R, "expected a string key");
                jv k, v;
                if (rd_string(R, &k))
                    return -1;
                rd_ws(R);
                if (R->i >= R->n || R->s[R->i] != ':')
                    return rd_fail(R, "expected ':'");
                R->i++;
                if (rd_value(R, &v))
                    return -1;
                jd_set(R->J, d.d, k, v);
                rd_ws(R);
                if (R->i < R->n && R->s[R->i] == ',') {
                    R->i++;
                    continue;
                }
                if (R->i < R->n && R->s[R->i] == '}') {
                    R->i++;
                    break;
                }
                return rd_fail(R, "expected ',' or '}'");
            }
        }
        *out = d;
    } else if (c == '[') {
        R->i++;
        jv l = jv_list(R->J, 0);
        rd_ws(R);
        if (R->i < R->n && R->s[R->i] == ']') {
            R->i++;
        } else {
            for (;;) {
                jv v;
                if (rd_value(R, &v))
                    return -1;
                jl_push(R->J, l.l, v);
                rd_ws(R);
                if (R->i < R->n && R->s[R->i] == ',') {
                    R->i++;
                    continue;
                }
                if (R->i < R->n && R->s[R->i] == ']') {
                    R->i++;
                    break;
                }
                return rd_fail(R, "expected ',' or ']'");
            }
        }
        *out = l;
    } else if (c == '"') {
        rc = rd_string(R, out);
    } else if (R->n - R->i >= 4 && memcmp(R->s + R->i, "true", 4) == 0) {
        R->i += 4;
        *out = jv_bool(true);
    } else if (R->n - R->i >= 5 && memcmp(R->s + R->i, "false", 5) == 0) {
        R->i += 5;
        *out = jv_bool(false);
    } else if (R->n - R->i >= 4 && memcmp(R->s + R->i, "null", 4) == 0) {
        R->i += 4;
        *out = jv_none();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        size_t st = R->i;
        bool fl = false;
        if (R->s[R->i] == '-')
            R->i++;
        if (R->i >= R->n || R->s[R->i] < '0' || R->s[R->i] > '9')
            return rd_fail(R, "bad number");
        while (R->i < R->n && R->s[R->i] >= '0' && R->s[R->i] <= '9')
            R->i++;
        if (R->i < R->n && R->s[R->i] == '.') {
            fl = true;
            R->i++;
            if (R->i >= R->n || R->s[R->i] < '0' || R->s[R->i] > '9')
                return rd_fail(R, "bad number");
            while (R->i < R->n && R->s[R->i] >= '0' && R->s[R->i] <= '9')
                R->i++;
        }
        if (R->i < R->n && (R->s[R->i] == 'e' || R->s[R->i] == 'E')) {
            fl = true;
            R->i++;
            if (R->i < R->n && (R->s[R->i] == '+' || R->s[R->i] == '-'))
                R->i++;
            if (R->i >= R->n || R->s[R->i] < '0' || R->s[R->i] > '9')
                return rd_fail(R, "bad number");
            while (R->i < R->n && R->s[R->i] >= '0' && R->s[R->i] <= '9')
                R->i++;
        }
        char buf[64];
        size_t len = R->i - st;
        if (len >= sizeof buf) {
            if (!fl)
                return rd_fail(R, "integer past 64 bits");
            len = sizeof buf - 1; /* digits past this change no double a template would meet */
        }
        memcpy(buf, R->s + st, len);
        buf[len] = 0;
        if (fl) {
            *out = jv_float(strtod(buf, NULL));
        } else {
            char *end;
            errno = 0;
            long long v = strtoll(buf, &end, 10);
            if (errno)
                return rd_fail(R, "integer past 64 bits");
            *out = jv_int(v);
        }
    } else {
        return rd_fail(R, "unexpected character");
    }
    R->depth--;
    return rc;
}

int jv_from_json(jx *J, const char *s, jv *out, char *msg, size_t msg_cap)
{
    jrd R = {.J = J, .s = s, .n = strlen(s), .msg = msg, .msg_cap = msg_cap};
    if (rd_value(&R, out))
        return HEARTH_EINVAL;
    rd_ws(&R);
    if (R.i != R.n) {
        rd_fail(&R, "trailing characters");
        return HEARTH_EINVAL;
    }
    return HEARTH_OK;
}

/* json_schema_gbnf.c: JSON schema to GBNF (see json_schema_gbnf.h).
 *
 * One walk over the schema, as llama.cpp's json-schema-to-grammar does it
 * (the same order of tests on each node, the same rules for strings,
 * numbers, objects and repetitions, the same optional whitespace), so a
 * schema admits the same documents, and a seeded request samples the same
 * text, under hearth as under llama-server. Each node becomes one rule
 * named r<N>; the JSON primitives (string, number, value, ...) are written
 * once each, under llama.cpp's names, when first needed. A $ref gets its
 * rule name before its target is walked, so a recursive schema (a tree
 * whose children are trees) becomes a recursive grammar rather than an
 * endless walk.
 *
 * Covered as llama.cpp covers them:
 *   - bounds on integers (minimum, maximum, the exclusive ones): a rule
 *     written digit by digit (json_schema_range.c). Bounds on "number" are
 *     not checked, as llama.cpp does not check them;
 *   - "allOf": one object of the components' properties (allof_rule,
 *     below);
 *   - with additionalProperties, extra keys that are never a declared name
 *     (not_names_rule, below);
 *   - "pattern": llama.cpp's regular expression subset and somewhat more
 *     (json_schema_pattern.c), matched on the string as JSON writes it.
 * Where llama.cpp's converter writes a grammar that is not what the schema
 * says (leading zeros under a negative maximum, a pattern's '"' written
 * raw, an allOf property wanted twice), or one its parser refuses (a $ref
 * that comes back to itself before anything is matched: left recursion;
 * see visit), or loops or crashes (an unescaped ']' in a pattern, a $ref
 * naming itself under allOf), hearth writes what the schema says or
 * refuses; each part's comment names the cases.
 *
 * What is left out is refused with the part named (a client learns its
 * output would not be checked): regular expression features past the
 * subset (lookarounds, back-references, word boundaries, \p{...}), an
 * unanchored pattern (llama.cpp refuses it too), and an allOf whose
 * components declare one name twice. Not checked, as in llama.cpp: formats
 * other than uuid (plain strings; llama.cpp's date, time and date-time are
 * not done), minLength / maxLength beside a pattern, bounds on "number",
 * and what an allOf component says besides its properties.
 *
 * Every walk is bounded: schema nesting, $ref chains and pattern groups by
 * MAX_DEPTH, the integer digit recursion by 16 digits, the key trie is
 * written one rule per node with no recursion, and every buffer by
 * BODY_MAX or out's own bound.
 *
 * Rejected: building the grammar as parsed rules directly (the text is
 * what llama-server logs and what a client can compare, and the GBNF
 * parser then checks the converter's output like any client's grammar). */
#include "json_schema_gbnf.h"
#include "json_schema_int.h"

#include "text/unicode.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_REFS = 256, NAME_MAX_LEN = 32 };

enum prim { P_SPACE, P_BOOLEAN, P_DECIMAL, P_INTEGRAL, P_NUMBER, P_INTEGER, P_VALUE, P_OBJECT, P_ARRAY, P_UUID, P_CHAR,
            P_STRING, P_NULL, P_COUNT };

static const struct {
    const char *name, *body;
    unsigned deps;
} PRIMS[P_COUNT] = {
    [P_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    [P_BOOLEAN] = {"boolean", "(\"true\" | \"false\") space", 1u << P_SPACE},
    [P_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [P_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [P_NUMBER] = {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
                  1u << P_INTEGRAL | 1u << P_DECIMAL | 1u << P_SPACE},
    [P_INTEGER] = {"integer", "(\"-\"? integral-part) space", 1u << P_INTEGRAL | 1u << P_SPACE},
    [P_VALUE] = {"value", "object | array | string | number | boolean | null",
                 1u << P_OBJECT | 1u << P_ARRAY | 1u << P_STRING | 1u << P_NUMBER | 1u << P_BOOLEAN | 1u << P_NULL},
    [P_OBJECT] = {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
                  1u << P_STRING | 1u << P_VALUE | 1u << P_SPACE},
    [P_ARRAY] = {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", 1u << P_VALUE | 1u << P_SPACE},
    [P_UUID] = {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                        "[0-9a-fA-F]{12} \"\\\"\" space",
                1u << P_SPACE},
    [P_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", 0},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\" space", 1u << P_CHAR | 1u << P_SPACE},
    [P_NULL] = {"null", "\"null\" space", 1u << P_SPACE},
};

typedef struct conv {
    const cJSON *root;
    hearth_buf *out;
    unsigned have;            /* primitives written */
    int n_rules;
    /* each $ref string met, and its rule: copies, owned here, because a
     * $ref may sit in a node copied for one of a list of types, and that
     * copy is freed before the walk ends */
    char *ref[MAX_REFS];
    int ref_rule[MAX_REFS];
    bool ref_open[MAX_REFS];  /* its target is being walked */
    int ref_guard[MAX_REFS];  /* guard when its walk began */
    int n_refs;
    int depth;
    int guard;                /* nodes being walked whose rule starts with a character */
    hearth_err *err;
} conv;

typedef char rname[NAME_MAX_LEN];

static int need(conv *c, enum prim p)
{
    if (c->have & (1u << p))
        return HEARTH_OK;
    c->have |= 1u << p;
    int rc = hearth_buf_printf(c->out, "%s ::= %s\n", PRIMS[p].name, PRIMS[p].body);
    for (int d = 0; d < P_COUNT && !rc; d++)
        if (PRIMS[p].deps & (1u << d))
            rc = need(c, (enum prim)d);
    return rc;
}

static int prim(conv *c, enum prim p, char *name)
{
    snprintf(name, NAME_MAX_LEN, "%s", PRIMS[p].name);
    return need(c, p);
}

static int new_rule(conv *c, const hearth_buf *body, char *name)
{
    snprintf(name, NAME_MAX_LEN, "r%d", c->n_rules++);
    int rc = need(c, P_SPACE);
    if (!rc)
        rc = hearth_buf_printf(c->out, "%s ::= ", name);
    if (!rc)
        rc = hearth_buf_append(c->out, body->data ? body->data : "", body->len);
    if (!rc)
        rc = hearth_buf_appends(c->out, "\n");
    return rc;
}

int hearth_json_schema_refuse(hearth_err *err, const cJSON *node, const char *what)
{
    char *txt = cJSON_PrintUnformatted(node);
    int rc = hearth_err_set(err, HEARTH_EINVAL, "json_schema: %s: %.200s%s", what, txt ? txt : "?",
                            txt && strlen(txt) > 200 ? "..." : "");
    free(txt);
    return rc;
}

static int bad(conv *c, const cJSON *node, const char *what) { return hearth_json_schema_refuse(c->err, node, what); }

int hearth_gbnf_literal(hearth_buf *b, const char *s, size_t n)
{
    int rc = hearth_buf_appends(b, "\"");
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            rc = hearth_buf_printf(b, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            rc = hearth_buf_printf(b, "\\x%02X", ch);
        else
            rc = hearth_buf_append(b, &s[i], 1);
    }
    return rc ? rc : hearth_buf_appends(b, "\"");
}

/* The literal of a JSON value as it is written compactly. cJSON lets
 * bytes that are not UTF-8 through, and the GBNF parser would refuse them
 * in a message about the grammar's text: refused here, without echoing
 * them. */
static int json_literal(conv *c, hearth_buf *b, const cJSON *v)
{
    char *txt = cJSON_PrintUnformatted(v);
    if (!txt)
        return hearth_err_set(c->err, HEARTH_ENOMEM, "json_schema: out of memory");
    int rc = hearth_utf8_validate(txt, strlen(txt), NULL)
                 ? hearth_err_set(c->err, HEARTH_EINVAL, "json_schema: a property name, const or enum value that is not UTF-8")
                 : hearth_gbnf_literal(b, txt, strlen(txt));
    free(txt);
    return rc;
}

int hearth_gbnf_class_char(hearth_buf *b, uint32_t cp)
{
    if (cp < 0x80 && ((cp | 0x20) - 'a' < 26 || cp - '0' < 10))
        return hearth_buf_printf(b, "%c", (char)cp);
    if (cp < 0x80)
        return hearth_buf_printf(b, "\\x%02X", (unsigned)cp);
    return cp < 0x10000 ? hearth_buf_printf(b, "\\u%04X", (unsigned)cp) : hearth_buf_printf(b, "\\U%08X", (unsigned)cp);
}

/* A GBNF literal of one code point. */
static int cp_literal(hearth_buf *b, uint32_t cp)
{
    char u[4];
    size_t n = hearth_utf8_encode((int32_t)cp, u);
    return hearth_gbnf_literal(b, u, n);
}

/* llama.cpp's repetition of item: min..max (max < 0: no bound) times,
 * separated by sep when given. */
static int repetition(hearth_buf *b, const char *item, long min, long max, const char *sep)
{
    if (max == 0)
        return HEARTH_OK;
    if (min == 0 && max == 1)
        return hearth_buf_printf(b, "%s?", item);
    if (!sep) {
        if (min == 1 && max < 0)
            return hearth_buf_printf(b, "%s+", item);
        if (min == 0 && max < 0)
            return hearth_buf_printf(b, "%s*", item);
        if (max < 0)
            return hearth_buf_printf(b, "%s{%ld,}", item, min);
        return hearth_buf_printf(b, "%s{%ld,%ld}", item, min, max);
    }
    char more[NAME_MAX_LEN * 2 + 64];
    snprintf(more, sizeof more, "(%s %s)", sep, item);
    int rc = hearth_buf_appends(b, min == 0 ? "(" : "");
    if (!rc)
        rc = hearth_buf_printf(b, "%s ", item);
    if (!rc)
        rc = repetition(b, more, min == 0 ? 0 : min - 1, max < 0 ? -1 : max - 1, NULL);
    if (!rc && min == 0)
        rc = hearth_buf_appends(b, ")?");
    return rc;
}

/* A non-negative integer keyword of node, or def when absent. */
static int count_kw(conv *c, const cJSON *node, const char *key, long def, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(node, key);
    *out = def;
    if (!v)
        return HEARTH_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 || v->valuedouble != (double)(long)v->valuedouble)
        return bad(c, node, "a count keyword that is not a whole number from 0 to 1000000");
    *out = (long)v->valuedouble;
    return HEARTH_OK;
}


static int visit(conv *c, const cJSON *s, char *name);

static int union_of(conv *c, const cJSON *list, hearth_buf *body)
{
    int rc = HEARTH_OK, i = 0;
    const cJSON *alt;
    cJSON_ArrayForEach(alt, list)
    {
        rname sub;
        if ((rc = visit(c, alt, sub)))
            return rc;
        rc = hearth_buf_printf(body, i++ ? " | %s" : "%s", sub);
        if (rc)
            return rc;
    }
    return i ? rc : bad(c, list, "an empty list of alternatives");
}

/* The node a "#/..." $ref (a JSON pointer into the schema) names. */
static int ref_target(conv *c, const cJSON *s, const cJSON *ref, const cJSON **out)
{
    if (!cJSON_IsString(ref) || strncmp(ref->valuestring, "#/", 2) != 0)
        return bad(c, s, "a $ref that is not a \"#/...\" path in this schema (remote references are not fetched)");
    const cJSON *target = c->root;
    char seg[256];
    for (const char *p = ref->valuestring + 2; *p && target;) {
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1'))
                ch = *++p == '0' ? '~' : '/';
            if (n + 1 < sizeof seg)
                seg[n++] = ch;
        }
        seg[n] = 0;
        if (*p == '/')
            p++;
        target = cJSON_IsArray(target) ? cJSON_GetArrayItem(target, atoi(seg)) : cJSON_GetObjectItemCaseSensitive(target, seg);
    }
    if (!target)
        return bad(c, s, "a $ref that leads nowhere in the schema");
    *out = target;
    return HEARTH_OK;
}

static int resolve_ref(conv *c, const cJSON *s, const cJSON *ref, char *name)
{
    if (cJSON_IsString(ref)) {
        for (int i = 0; i < c->n_refs; i++) {
            if (!strcmp(c->ref[i], ref->valuestring)) {
                if (c->ref_open[i] && c->ref_guard[i] == c->guard)
                    return bad(c, s, "a $ref that comes back to itself before anything is matched (through $ref, anyOf, "
                                     "oneOf or a list of types alone: a left-recursive grammar)");
                snprintf(name, NAME_MAX_LEN, "r%d", c->ref_rule[i]);
                return HEARTH_OK;
            }
        }
    }
    const cJSON *target;
    int rc = ref_target(c, s, ref, &target);
    if (rc)
        return rc;
    if (c->n_refs == MAX_REFS)
        return hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: more than %d distinct $ref targets", MAX_REFS);
    if (!(c->ref[c->n_refs] = strdup(ref->valuestring)))
        return HEARTH_ENOMEM;
    int id = c->n_rules++, k = c->n_refs++;
    c->ref_rule[k] = id;
    c->ref_open[k] = true;
    c->ref_guard[k] = c->guard;
    snprintf(name, NAME_MAX_LEN, "r%d", id);
    rname sub;
    rc = visit(c, target, sub);
    c->ref_open[k] = false;
    if (!rc)
        rc = hearth_buf_printf(c->out, "r%d ::= %s\n", id, sub);
    return rc;
}

/* The rule of one property "key": value. */
static int kv_rule(conv *c, const char *key, const cJSON *value_schema, char *name)
{
    rname val;
    int rc = value_schema ? visit(c, value_schema, val) : prim(c, P_VALUE, val);
    hearth_buf body;
    hearth_buf_init(&body, BODY_MAX);
    if (!rc) {
        cJSON *k = cJSON_CreateString(key);
        rc = k ? json_literal(c, &body, k) : HEARTH_ENOMEM;
        cJSON_Delete(k);
    }
    if (!rc)
        rc = hearth_buf_printf(&body, " space \":\" space %s", val);
    if (!rc)
        rc = new_rule(c, &body, name);
    hearth_buf_deinit(&body);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* ---- keys other than the declared names (llama.cpp's _not_strings) ----
 *
 * A trie of the declared names as JSON writes them (cJSON's escapes, the
 * text kv_rule matches), one code point per level; each node becomes a rule
 * for the rest of a key that has come this far: a child's character and
 * its rule, or any other character that may come here and then any
 * characters, or (where no name ends and no escape is open) nothing more.
 * A node knows where in the string's syntax it stands, so that "any other
 * character" after a backslash is another escape letter, and after "\u"
 * another hex digit. Unlike llama.cpp's, a key that is a proper prefix of a
 * name ("nam" beside "name") is allowed, and the characters are JSON's, so
 * a name with a quote or a backslash is excluded as written. A name written
 * with other escapes ("\u0061" for "a") is not excluded (neither is it by
 * llama.cpp). One rule per node, never nested: a long name makes a long
 * chain of rules, not a deep group for the GBNF parser. */
enum kstate { K_PLAIN, K_ESC, K_U0, K_U1, K_U2, K_U3 };
enum { KEY_NODES_MAX = 1 << 20 };

typedef struct knode {
    uint32_t cp;          /* the character that leads here */
    int child, last, sibling;  /* first and last child, next sibling; -1: none */
    uint8_t state;        /* the string's syntax after this character */
    bool end;             /* a declared name ends here */
} knode;

/* The state after cp in state st, or -1 when char cannot write cp there
 * (a raw control character or DEL: such a name is no key, nothing to
 * exclude). */
static int kstate_next(int st, uint32_t cp)
{
    switch (st) {
    case K_PLAIN: return cp == '\\' ? K_ESC : cp < 0x20 || cp == 0x7F ? -1 : K_PLAIN;
    case K_ESC: return cp == 'u' ? K_U0 : K_PLAIN;
    case K_U3: return K_PLAIN;
    default: return st + 1;
    }
}

static bool knode_has(const knode *t, int k, uint32_t cp)
{
    for (int ch = t[k].child; ch >= 0; ch = t[ch].sibling)
        if (t[ch].cp == cp)
            return true;
    return false;
}

/* One node's rule: "r<base+k> ::= ...". A leaf is no rule: its parent
 * writes "char+" after its character (a name ends there), or "char*" (a
 * name went on with a character no key can hold). r<esc> is an escape and
 * then any characters. */
static int knode_rule(conv *c, const knode *t, int k, int base, int esc)
{
    hearth_buf *o = c->out;
    const knode *n = &t[k];
    int rc = hearth_buf_printf(o, "r%d ::= ", base + k);
    const char *sep = "";
    if (!rc && n->state == K_PLAIN && !n->end) {
        rc = hearth_buf_appends(o, "| "); /* the key may end here */
    }
    for (int ch = n->child; ch >= 0 && !rc; ch = t[ch].sibling) {
        rc = hearth_buf_appends(o, sep);
        if (!rc)
            rc = cp_literal(o, t[ch].cp);
        if (!rc)
            rc = t[ch].child >= 0 ? hearth_buf_printf(o, " r%d", base + ch)
                                  : hearth_buf_appends(o, t[ch].end ? " char+" : " char*");
        sep = " | ";
    }
    /* any other character that may come here, then any characters */
    if (!rc && n->state == K_PLAIN) {
        rc = hearth_buf_printf(o, "%s[^\"\\\\\\x7F\\x00-\\x1F", sep);
        for (int ch = n->child; ch >= 0 && !rc; ch = t[ch].sibling)
            if (t[ch].cp != '\\')
                rc = hearth_gbnf_class_char(o, t[ch].cp);
        if (!rc)
            rc = hearth_buf_appends(o, "] char*");
        if (!rc && !knode_has(t, k, '\\'))
            rc = hearth_buf_printf(o, " | r%d", esc);
    } else if (!rc && n->state == K_ESC) {
        hearth_buf letters;
        hearth_buf_init(&letters, 64);
        for (const char *l = "\"\\bfnrt"; *l && !rc; l++)
            if (!knode_has(t, k, (uint32_t)*l))
                rc = hearth_gbnf_class_char(&letters, (uint32_t)*l);
        if (!rc && letters.len)
            rc = hearth_buf_printf(o, "%s[%.*s] char*", sep, (int)letters.len, letters.data);
        if (!rc && letters.len)
            sep = " | ";
        if (!rc && !knode_has(t, k, 'u'))
            rc = hearth_buf_printf(o, "%s\"u\" [0-9a-fA-F]{4} char*", sep);
        hearth_buf_deinit(&letters);
    } else if (!rc) {
        int left = K_U3 - n->state; /* hex digits after the next one */
        hearth_buf hex;
        hearth_buf_init(&hex, 64);
        for (const char *h = "0123456789abcdefABCDEF"; *h && !rc; h++)
            if (!knode_has(t, k, (uint32_t)*h))
                rc = hearth_buf_printf(&hex, "%c", *h);
        if (!rc && hex.len)
            rc = hearth_buf_printf(o, "%s[%.*s]", sep, (int)hex.len, hex.data);
        if (!rc && hex.len && left)
            rc = hearth_buf_printf(o, " [0-9a-fA-F]{%d}", left);
        if (!rc && hex.len)
            rc = hearth_buf_appends(o, " char*");
        hearth_buf_deinit(&hex);
    }
    return rc ? rc : hearth_buf_appends(o, "\n");
}

/* The rule of a key string that is none of the n names (n >= 1): its name
 * into name. */
static int not_names_rule(conv *c, const char *const *names, int n, char *name)
{
    char **enc = calloc((size_t)n, sizeof *enc);
    knode *t = NULL;
    int rc = enc ? need(c, P_CHAR) : HEARTH_ENOMEM, n_nodes = 1, cap = 0;
    for (int i = 0; i < n && !rc; i++) {
        cJSON *str = cJSON_CreateString(names[i]);
        enc[i] = str ? cJSON_PrintUnformatted(str) : NULL;
        cJSON_Delete(str);
        if (!enc[i])
            rc = HEARTH_ENOMEM;
    }
    if (!rc) /* UTF-8 order is code point order: a name shares its prefix with the one before it */
        qsort(enc, (size_t)n, sizeof *enc, cmp_str);
    cap = 64;
    if (!rc && !(t = malloc((size_t)cap * sizeof *t)))
        rc = HEARTH_ENOMEM;
    if (!rc)
        t[0] = (knode){.child = -1, .last = -1, .sibling = -1, .state = K_PLAIN};
    for (int i = 0; i < n && !rc; i++) {
        const char *e = enc[i] + 1; /* past the opening quote */
        size_t len = strlen(e) - 1, at = 0;
        int k = 0;
        while (at < len && !rc) {
            int32_t cp = hearth_utf8_decode(e, len, &at);
            if (cp < 0) {
                char what[300];
                snprintf(what, sizeof what, "a property name that is not UTF-8 ('%.200s')", names[i]);
                rc = hearth_err_set(c->err, HEARTH_EINVAL, "json_schema: %s", what);
                break;
            }
            int st = kstate_next(t[k].state, (uint32_t)cp);
            if (st < 0)
                break;
            int last = t[k].last;
            if (last >= 0 && t[last].cp == (uint32_t)cp) {
                k = last;
                continue;
            }
            if (n_nodes == KEY_NODES_MAX) {
                rc = hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: property names longer than %d characters in all",
                                    KEY_NODES_MAX);
                break;
            }
            if (n_nodes == cap) {
                knode *g = realloc(t, (size_t)cap * 2 * sizeof *t);
                if (!g) {
                    rc = HEARTH_ENOMEM;
                    break;
                }
                t = g;
                cap *= 2;
            }
            t[n_nodes] = (knode){.cp = (uint32_t)cp, .child = -1, .last = -1, .sibling = -1, .state = (uint8_t)st};
            if (last >= 0)
                t[last].sibling = n_nodes;
            else
                t[k].child = n_nodes;
            t[k].last = n_nodes;
            k = n_nodes++;
        }
        if (!rc && at == len)
            t[k].end = true;
    }
    int base = c->n_rules, esc = base + n_nodes;
    c->n_rules += n_nodes + 1;
    if (!rc)
        rc = hearth_buf_printf(c->out, "r%d ::= [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4}) char*\n", esc);
    for (int k = 0; k < n_nodes && !rc; k++)
        if (k == 0 || t[k].child >= 0)
            rc = knode_rule(c, t, k, base, esc);
    hearth_buf body;
    hearth_buf_init(&body, 64);
    if (!rc)
        rc = hearth_buf_printf(&body, "\"\\\"\" r%d \"\\\"\" space", base);
    if (!rc)
        rc = new_rule(c, &body, name);
    hearth_buf_deinit(&body);
    for (int i = 0; enc && i < n; i++)
        free(enc[i]);
    free(enc);
    free(t);
    return rc;
}

/* The properties of an object rule, in order: borrowed from the schema. */
typedef struct prop {
    const char *name;
    const cJSON *schema;
    bool required;
} prop;

typedef struct props {
    prop *v;
    int n, cap;
} props;

static int props_add(props *ps, const char *name, const cJSON *schema, bool required)
{
    if (ps->n == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 16;
        prop *v = realloc(ps->v, (size_t)cap * sizeof *v);
        if (!v)
            return HEARTH_ENOMEM;
        ps->v = v;
        ps->cap = cap;
    }
    ps->v[ps->n++] = (prop){name, schema, required};
    return HEARTH_OK;
}

/* llama.cpp's object: the required properties in order, then the optional
 * ones, any subset in order, each after a comma; additional properties
 * (addl true or a schema) last, any number. */
static int object_body(conv *c, const props *ps, const cJSON *addl, hearth_buf *body)
{
    int n = ps->n;
    rname *kv = calloc((size_t)n + 1, sizeof *kv);
    int *opt = calloc((size_t)n + 1, sizeof *opt);
    int rc = kv && opt ? HEARTH_OK : HEARTH_ENOMEM, n_opt = 0, n_req = 0;
    for (int i = 0; i < n && !rc; i++) {
        rc = kv_rule(c, ps->v[i].name, ps->v[i].schema, kv[i]);
        if (!ps->v[i].required)
            opt[n_opt++] = i;
    }
    bool star = cJSON_IsTrue(addl) || cJSON_IsObject(addl);
    if (!rc && star) {
        /* "*": any other key */
        rname key, val;
        const char **names = calloc((size_t)n + 1, sizeof *names);
        for (int i = 0; names && i < n; i++)
            names[i] = ps->v[i].name;
        rc = !names ? HEARTH_ENOMEM : n ? not_names_rule(c, names, n, key) : prim(c, P_STRING, key);
        free(names);
        if (!rc)
            rc = cJSON_IsObject(addl) ? visit(c, addl, val) : prim(c, P_VALUE, val);
        hearth_buf kb;
        hearth_buf_init(&kb, BODY_MAX);
        if (!rc)
            rc = hearth_buf_printf(&kb, "%s \":\" space %s", key, val);
        if (!rc)
            rc = new_rule(c, &kb, kv[n]);
        hearth_buf_deinit(&kb);
        opt[n_opt++] = n;
    }
    if (!rc)
        rc = hearth_buf_appends(body, "\"{\" space ");
    for (int i = 0; i < n && !rc; i++)
        if (ps->v[i].required)
            rc = hearth_buf_printf(body, n_req++ ? " \",\" space %s" : "%s", kv[i]);
    if (!rc && n_opt) {
        /* rest[k]: the optional ones from k on, each optional, after a comma */
        rname *rest = calloc((size_t)n_opt + 1, sizeof *rest);
        if (!rest)
            rc = HEARTH_ENOMEM;
        for (int k = n_opt - 1; k >= 1 && !rc; k--) {
            hearth_buf rb;
            hearth_buf_init(&rb, BODY_MAX);
            bool is_star = star && k == n_opt - 1;
            rc = hearth_buf_printf(&rb, "( \",\" space %s )%s", kv[opt[k]], is_star ? "*" : "?");
            if (!rc && k + 1 < n_opt)
                rc = hearth_buf_printf(&rb, " %s", rest[k + 1]);
            if (!rc)
                rc = new_rule(c, &rb, rest[k]);
            hearth_buf_deinit(&rb);
        }
        if (!rc)
            rc = hearth_buf_appends(body, n_req ? " ( \",\" space ( " : " (");
        for (int k = 0; k < n_opt && !rc; k++) {
            bool is_star = star && k == n_opt - 1;
            rc = hearth_buf_printf(body, "%s%s", k ? " | " : "", kv[opt[k]]);
            if (!rc && is_star)
                rc = hearth_buf_printf(body, " ( \",\" space %s )*", kv[opt[k]]);
            if (!rc && k + 1 < n_opt)
                rc = hearth_buf_printf(body, " %s", rest[k + 1]);
        }
        if (!rc)
            rc = hearth_buf_appends(body, n_req ? " ) )?" : " )?");
        free(rest);
    }
    if (!rc)
        rc = hearth_buf_appends(body, " \"}\" space");
    free(kv);
    free(opt);
    return rc;
}

/* An object with properties / required / additionalProperties. The
 * required names are sorted once, so a schema with many of each costs
 * n log n, not n * m. */
static int object_rule(conv *c, const cJSON *s, hearth_buf *body)
{
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (pr && !cJSON_IsObject(pr))
        return bad(c, s, "'properties' that is not an object");
    int n_req = cJSON_IsArray(req) ? cJSON_GetArraySize(req) : 0, k = 0;
    const char **names = calloc((size_t)n_req + 1, sizeof *names);
    props ps = {0};
    int rc = names ? HEARTH_OK : HEARTH_ENOMEM;
    const cJSON *it, *req_list = n_req ? req : NULL;
    cJSON_ArrayForEach(it, req_list)
    {
        if (cJSON_IsString(it))
            names[k++] = it->valuestring;
    }
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    cJSON_ArrayForEach(it, pr)
    {
        if (rc)
            break;
        const char *key = it->string;
        rc = props_add(&ps, key, it, bsearch(&key, names, (size_t)k, sizeof *names, cmp_str) != NULL);
    }
    if (!rc)
        rc = object_body(c, &ps, cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"), body);
    free(names);
    free(ps.v);
    return rc;
}

/* One allOf component into ps, as llama.cpp takes it: a $ref is followed,
 * a component's properties are all required (its own "required" aside) or
 * all optional (listed under an anyOf of the allOf), and what else a
 * component says is not looked at. */
static int allof_add(conv *c, props *ps, const cJSON *comp, bool required, int hops)
{
    if (cJSON_IsTrue(comp))
        return HEARTH_OK;
    if (!cJSON_IsObject(comp))
        return bad(c, comp, "an allOf component that is not a schema object");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(comp, "$ref");
    if (ref) {
        const cJSON *target;
        if (hops >= MAX_DEPTH)
            return hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: allOf $refs chained more than %d deep", MAX_DEPTH);
        int rc = ref_target(c, comp, ref, &target);
        return rc ? rc : allof_add(c, ps, target, required, hops + 1);
    }
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(comp, "properties"), *it;
    if (pr && !cJSON_IsObject(pr))
        return bad(c, comp, "'properties' that is not an object");
    cJSON_ArrayForEach(it, pr)
    {
        int rc = props_add(ps, it->string, it, required);
        if (rc)
            return rc;
    }
    return HEARTH_OK;
}

/* llama.cpp's allOf: one object of the components' properties, no others.
 * A name declared by two components is refused: llama.cpp's grammar then
 * wants the key twice, and hearth does not intersect the two schemas. */
static int allof_rule(conv *c, const cJSON *s, hearth_buf *body)
{
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf"), *t;
    if (!cJSON_IsArray(all))
        return bad(c, s, "allOf that is not a list");
    props ps = {0};
    int rc = HEARTH_OK;
    cJSON_ArrayForEach(t, all)
    {
        const cJSON *any = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "anyOf") : NULL, *tt;
        if (any && !cJSON_IsArray(any))
            rc = bad(c, t, "anyOf / oneOf that is not a list");
        cJSON_ArrayForEach(tt, any)
        {
            if (!rc)
                rc = allof_add(c, &ps, tt, false, 0);
        }
        if (!rc && !any)
            rc = allof_add(c, &ps, t, true, 0);
        if (rc)
            break;
    }
    const char **names = rc ? NULL : calloc((size_t)ps.n + 1, sizeof *names);
    if (!rc && !names)
        rc = HEARTH_ENOMEM;
    for (int i = 0; i < ps.n && !rc; i++)
        names[i] = ps.v[i].name;
    if (!rc)
        qsort(names, (size_t)ps.n, sizeof *names, cmp_str);
    for (int i = 1; i < ps.n && !rc; i++) {
        if (!strcmp(names[i - 1], names[i])) {
            char what[300];
            snprintf(what, sizeof what, "allOf components that both declare the property '%.200s' (not merged by hearth)", names[i]);
            rc = bad(c, s, what);
        }
    }
    if (!rc)
        rc = object_body(c, &ps, NULL, body);
    free(names);
    free(ps.v);
    return rc;
}

static int array_rule(conv *c, const cJSON *s, hearth_buf *body)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (!items)
        items = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    int rc = hearth_buf_appends(body, "\"[\" space ");
    if (!rc && cJSON_IsArray(items)) {
        int i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, items)
        {
            rname sub;
            if ((rc = visit(c, it, sub)))
                return rc;
            if ((rc = hearth_buf_printf(body, i++ ? " \",\" space %s" : "%s", sub)))
                return rc;
        }
    } else if (!rc) {
        rname sub;
        long min, max;
        rc = visit(c, items, sub);
        if (!rc)
            rc = count_kw(c, s, "minItems", 0, &min);
        if (!rc)
            rc = count_kw(c, s, "maxItems", -1, &max);
        if (!rc && max >= 0 && max < min)
            return bad(c, s, "maxItems below minItems");
        if (!rc)
            rc = repetition(body, sub, min, max, "\",\" space");
    }
    return rc ? rc : hearth_buf_appends(body, " \"]\" space");
}

static bool has(const cJSON *s, const char *key) { return cJSON_GetObjectItemCaseSensitive(s, key) != NULL; }

static bool type_is(const cJSON *type, const char *name)
{
    return !type || (cJSON_IsString(type) && !strcmp(type->valuestring, name));
}

/* The rule for schema node s, in the order of llama.cpp's tests. */
static int visit_node(conv *c, const cJSON *s, char *name)
{
    if (!cJSON_IsObject(s))
        return bad(c, s, "unrecognized schema (not an object)");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (!any)
        any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (ref)
        return resolve_ref(c, s, ref, name);
    hearth_buf body;
    hearth_buf_init(&body, BODY_MAX);
    int rc;
    if (any) {
        rc = cJSON_IsArray(any) ? union_of(c, any, &body) : bad(c, s, "anyOf / oneOf that is not a list");
    } else if (cJSON_IsArray(type)) {
        cJSON *copy = cJSON_Duplicate(s, true), *alts = cJSON_CreateArray();
        const cJSON *t;
        rc = copy && alts ? HEARTH_OK : HEARTH_ENOMEM;
        cJSON_ArrayForEach(t, type)
        {
            cJSON *one = rc ? NULL : cJSON_Duplicate(copy, true);
            if (!one || !cJSON_ReplaceItemInObjectCaseSensitive(one, "type", cJSON_Duplicate(t, true))) {
                cJSON_Delete(one);
                rc = rc ? rc : HEARTH_ENOMEM;
                break;
            }
            cJSON_AddItemToArray(alts, one);
        }
        if (!rc)
            rc = union_of(c, alts, &body);
        cJSON_Delete(copy);
        cJSON_Delete(alts);
    } else if (has(s, "const")) {
        rc = json_literal(c, &body, cJSON_GetObjectItemCaseSensitive(s, "const"));
        if (!rc)
            rc = hearth_buf_appends(&body, " space");
    } else if (has(s, "enum")) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum"), *v;
        int i = 0;
        rc = cJSON_IsArray(e) && cJSON_GetArraySize(e) > 0 ? hearth_buf_appends(&body, "(") : bad(c, s, "an enum that is not a non-empty list");
        cJSON_ArrayForEach(v, e)
        {
            if (!rc && i++)
                rc = hearth_buf_appends(&body, " | ");
            if (!rc)
                rc = json_literal(c, &body, v);
        }
        if (!rc)
            rc = hearth_buf_appends(&body, ") space");
    } else if (type_is(type, "object") &&
               (has(s, "properties") || (has(s, "additionalProperties") && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))))) {
        rc = object_rule(c, s, &body);
    } else if (type_is(type, "object") && has(s, "allOf")) {
        rc = allof_rule(c, s, &body);
    } else if (type_is(type, "array") && (has(s, "items") || has(s, "prefixItems"))) {
        rc = array_rule(c, s, &body);
    } else if (type_is(type, "string") && has(s, "pattern")) {
        rc = hearth_json_schema_pattern_rule(s, c->depth, &body, c->err);
    } else if (type_is(type, "string") && cJSON_IsString(format) && !strncmp(format->valuestring, "uuid", 4)) {
        rc = prim(c, P_UUID, name);
        hearth_buf_deinit(&body);
        return rc;
    } else if (type && type_is(type, "string") && (has(s, "minLength") || has(s, "maxLength"))) {
        long min, max;
        rname ch;
        rc = count_kw(c, s, "minLength", 0, &min);
        if (!rc)
            rc = count_kw(c, s, "maxLength", -1, &max);
        if (!rc && max >= 0 && max < min)
            rc = bad(c, s, "maxLength below minLength");
        if (!rc)
            rc = prim(c, P_CHAR, ch);
        if (!rc)
            rc = hearth_buf_appends(&body, "\"\\\"\" ");
        if (!rc)
            rc = repetition(&body, ch, min, max, NULL);
        if (!rc)
            rc = hearth_buf_appends(&body, " \"\\\"\" space");
    } else if (type && type_is(type, "integer") &&
               (has(s, "minimum") || has(s, "maximum") || has(s, "exclusiveMinimum") || has(s, "exclusiveMaximum"))) {
        /* bounds on "number" fall through to the plain number rule, as in
         * llama.cpp, which does not constrain non-integers */
        rc = hearth_json_schema_int_rule(s, &body, c->err);
    } else if (!s->child || type_is(type, "object")) {
        rc = prim(c, P_OBJECT, name);
        hearth_buf_deinit(&body);
        return rc;
    } else {
        static const struct { const char *type; enum prim p; } T[] = {
            {"boolean", P_BOOLEAN}, {"number", P_NUMBER}, {"integer", P_INTEGER}, {"string", P_STRING},
            {"null", P_NULL}, {"array", P_ARRAY}, {"object", P_OBJECT},
        };
        rc = HEARTH_ENOTFOUND;
        for (size_t i = 0; type && cJSON_IsString(type) && i < sizeof T / sizeof *T && rc == HEARTH_ENOTFOUND; i++)
            if (!strcmp(type->valuestring, T[i].type))
                rc = prim(c, T[i].p, name);
        hearth_buf_deinit(&body);
        return rc == HEARTH_ENOTFOUND ? bad(c, s, "unrecognized schema") : rc;
    }
    if (!rc)
        rc = new_rule(c, &body, name);
    hearth_buf_deinit(&body);
    return rc;
}

/* The walk of one node. guard counts the nodes on the way down whose rule
 * starts with a character of its own (everything but a $ref, an anyOf /
 * oneOf and a list of types, whose rules start with another rule): a $ref
 * met again while its target is walked, with no such node in between,
 * would be a rule that reaches itself before any character, which the
 * GBNF parser refuses as left recursion, so resolve_ref refuses it first,
 * naming the schema's part. */
static int visit(conv *c, const cJSON *s, char *name)
{
    if (++c->depth > MAX_DEPTH) {
        c->depth--;
        return hearth_err_set(c->err, HEARTH_ELIMIT, "json_schema: nested more than %d levels deep", MAX_DEPTH);
    }
    bool eats = cJSON_IsObject(s) && !has(s, "$ref") && !has(s, "oneOf") && !has(s, "anyOf") &&
                !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(s, "type"));
    c->guard += eats;
    int rc = visit_node(c, s, name);
    c->guard -= eats;
    c->depth--;
    return rc;
}

int hearth_json_schema_to_gbnf(const cJSON *schema, hearth_buf *out, hearth_err *err)
{
    return hearth_json_schema_to_gbnf_rule(schema, "root", out, err);
}

int hearth_json_schema_to_gbnf_rule(const cJSON *schema, const char *name, hearth_buf *out, hearth_err *err)
{
    conv c = {.root = schema, .out = out, .err = err};
    rname top;
    int rc = visit(&c, schema, top);
    if (!rc)
        rc = hearth_buf_printf(out, "%s ::= %s\n", name, top);
    for (int i = 0; i < c.n_refs; i++)
        free(c.ref[i]);
    if (rc && !(err && err->code))
        hearth_err_set(err, rc, "json_schema: the grammar does not fit (%s)", hearth_status_name(rc));
    return rc;
}

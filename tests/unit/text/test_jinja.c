/* test_jinja.c: the Jinja interpreter (text/jinja.h) against jinja2 itself.
 *
 * With no arguments: every case of jinja_golden.h (templates rendered by
 * jinja2 in transformers' environment by jinja_golden.py) must render to the
 * same bytes, or fail where jinja2 failed (with raise_exception's message
 * verbatim); then the limits and error reports jinja2 has no counterpart
 * for: line:col of syntax errors, the step, depth and output limits, the
 * output left as it was on error.
 *
 * With `render TEMPLATE_FILE CONTEXT_JSON_FILE`: prints the render to stdout
 * and exits 0, or prints the error to stderr and exits 1; the driver of
 * tests/integration/test_jinja_templates.py. */
#include "harness.h"
#include "text/jinja.h"
#include "unit/text/jinja_golden.h"

#include <stdint.h>

#define MAX_OUT (1u << 20)

/* Parses and renders; returns the text (static storage) or NULL with err set and *rc the status. */
static const char *render_lim(const char *tmpl, const char *ctx, const hearth_jinja_limits *lim, size_t max,
                              hearth_err *err, int *rc)
{
    static hearth_buf b;
    hearth_buf_deinit(&b);
    hearth_buf_init(&b, max);
    hearth_jinja *t = NULL;
    *rc = hearth_jinja_parse(tmpl, strlen(tmpl), &t, err);
    if (*rc)
        return NULL;
    *rc = hearth_jinja_render_ex(t, ctx, lim, &b, err);
    hearth_jinja_free(t);
    if (*rc)
        return NULL;
    if (hearth_buf_append(&b, "", 1))
        return NULL;
    return b.data;
}

static const char *render(const char *tmpl, const char *ctx, hearth_err *err, int *rc)
{
    return render_lim(tmpl, ctx, NULL, MAX_OUT, err, rc);
}

static void free_render(void)
{
    int rc;
    render("", "{}", NULL, &rc);
}

static void test_golden(void)
{
    for (size_t i = 0; i < sizeof jinja_goldens / sizeof jinja_goldens[0]; i++) {
        const struct jinja_golden *g = &jinja_goldens[i];
        hearth_err err = {0};
        int rc;
        const char *got = render(g->tmpl, g->ctx, &err, &rc);
        if (g->err) {
            CHECK_MSG(got == NULL, "%s: jinja2 refuses it, hearth rendered [%s]", g->name, got);
            CHECK_MSG(rc == HEARTH_EINVAL, "%s: status %d (%s)", g->name, rc, err.msg);
            CHECK_MSG(strncmp(err.msg, "jinja: ", 7) == 0, "%s: message [%s]", g->name, err.msg);
            if (g->raised) {
                /* "jinja: LINE:COL: " then raise_exception's message verbatim */
                const char *m = strchr(err.msg + 7, ' ');
                CHECK_MSG(m && strcmp(m + 1, g->raised) == 0, "%s: message [%s], raised [%s]", g->name, err.msg,
                          g->raised);
            }
        } else {
            CHECK_MSG(got != NULL, "%s: %s", g->name, err.msg);
            if (got)
                CHECK_MSG(strcmp(got, g->want) == 0, "%s:\n  got  [%s]\n  want [%s]", g->name, got, g->want);
        }
    }
    free_render();
}

static void expect_error(const char *tmpl, const char *ctx, int code, const char *needle)
{
    hearth_err err = {0};
    int rc;
    const char *got = render(tmpl, ctx, &err, &rc);
    CHECK_MSG(got == NULL && rc == code, "[%s]: status %d, want %d (%s)", tmpl, rc, code, err.msg);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "[%s]: message [%s] lacks [%s]", tmpl, err.msg, needle);
}

static void test_syntax_errors_name_line_col(void)
{
    expect_error("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}", "{}", HEARTH_EINVAL, "jinja: 3:10: expected an expression");
    expect_error("{% for x in y %}\n{% endif %}", "{}", HEARTH_EINVAL, "2:4: expected 'else' or 'endfor', got 'endif'");
    expect_error("{% if x %}", "{}", HEARTH_EINVAL, "expected 'elif' or 'else' or 'endif', got end of template");
    expect_error("a\n  {{ x | nosuch }}", "{}", HEARTH_EINVAL, "2:10: no filter named 'nosuch'");
    expect_error("{% include 'x' %}", "{}", HEARTH_EINVAL, "1:4: unknown or unsupported statement 'include'");
    expect_error("{{ 'abc }}", "{}", HEARTH_EINVAL, "1:4: unterminated string literal");
    expect_error("{# never closed", "{}", HEARTH_EINVAL, "1:1: missing end of comment tag");
    expect_error("{{ (1 }}", "{}", HEARTH_EINVAL, "unexpected '}'");
    expect_error("{% for x in y recursive %}{% endfor %}", "{}", HEARTH_EINVAL, "recursive for loops are not supported");
    expect_error("{{ 99999999999999999999 }}", "{}", HEARTH_EINVAL, "integer literal too large");
    /* invalid UTF-8 in the source */
    expect_error("a\xff", "{}", HEARTH_EINVAL, "utf-8");
}

static void test_runtime_errors_name_line_col(void)
{
    expect_error("{% if true %}\n  {{ raise_exception('bad roles') }}{% endif %}", "{}", HEARTH_EINVAL, "jinja: 2:6: bad roles");
    expect_error("\n{{ messages[0].content.nope.deeper }}", "{\"messages\": [{\"content\": \"x\"}]}", HEARTH_EINVAL, "2:");
    expect_error("{{ missing.attr }}", "{}", HEARTH_EINVAL, "'missing' is undefined");
    expect_error("{% set l = [1] %}{{ l.append(2) }}", "{}", HEARTH_EINVAL, "unsafe");
    expect_error("{{ 1 + 'a' }}", "{}", HEARTH_EINVAL, "unsupported operand type(s) for +: 'int' and 'str'");
    expect_error("{{ 9223372036854775807 + 1 }}", "{}", HEARTH_EINVAL, "integer overflow");
    expect_error("{{ x }}", "[1]", HEARTH_EINVAL, "not a JSON object");
    expect_error("{{ x }}", "{\"x\": ", HEARTH_EINVAL, "context JSON");
}

static void test_step_limit(void)
{
    hearth_jinja_limits lim = {.max_steps = 10000, .max_depth = 64, .max_mem = 1u << 24};
    hearth_err err = {0};
    int rc;
    const char *got = render_lim("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "{}",
                                 &lim, MAX_OUT, &err, &rc);
    CHECK(got == NULL);
    CHECK_EQ_INT(rc, HEARTH_ELIMIT);
    CHECK_MSG(strstr(err.msg, "step limit (10000 steps)") != NULL, "%s", err.msg);
    /* the default limit stops nested range loops of 10^15 iterations */
    got = render("{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
                 "{% endfor %}{% endfor %}{% endfor %}", "{}", &err, &rc);
    CHECK(got == NULL && rc == HEARTH_ELIMIT);
    /* the same loops under the limit render */
    lim.max_steps = 1000000;
    got = render_lim("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}ok", "{}", &lim,
                     MAX_OUT, &err, &rc);
    CHECK(got && strcmp(got, "ok") == 0);
    free_render();
}

static void test_depth_limit(void)
{
    hearth_err err = {0};
    int rc;
    /* unbounded macro recursion */
    const char *got = render("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", "{}", &err, &rc);
    CHECK(got == NULL);
    CHECK_EQ_INT(rc, HEARTH_ELIMIT);
    CHECK_MSG(strstr(err.msg, "nested deeper than 256") != NULL, "%s", err.msg);
    /* bounded recursion well inside the limit renders */
    got = render("{% macro r(n) %}{% if n %}{{ r(n - 1) }}{% else %}done{% endif %}{% endmacro %}{{ r(20) }}", "{}",
                 &err, &rc);
    CHECK(got && strcmp(got, "done") == 0);
    /* a parse of 100000 '(' is an error, not a stack overflow */
    size_t n = 100000;
    char *deep = malloc(2 * n + 8);
    CHECK(deep != NULL);
    if (deep) {
        memcpy(deep, "{{ ", 3);
        memset(deep + 3, '(', n);
        deep[3 + n] = 0;
        hearth_jinja *t = NULL;
        rc = hearth_jinja_parse(deep, strlen(deep), &t, &err);
        CHECK(rc != HEARTH_OK && t == NULL);
        CHECK_MSG(strstr(err.msg, "jinja: 1:") != NULL, "%s", err.msg);
        memset(deep + 3, '[', n);
        rc = hearth_jinja_parse(deep, strlen(deep), &t, &err);
        CHECK(rc != HEARTH_OK && t == NULL);
        free(deep);
    }
    /* a context nested past the JSON reader's depth */
    char ctx[4096];
    size_t k = 0;
    k += (size_t)snprintf(ctx, sizeof ctx, "{\"x\": ");
    for (int i = 0; i < 1000; i++)
        ctx[k++] = '[';
    ctx[k] = 0;
    expect_error("{{ x }}", ctx, HEARTH_EINVAL, "nested deeper");
    free_render();
}

static void test_output_limit_leaves_out_as_it_was(void)
{
    hearth_jinja *t = NULL;
    const char *src = "{% for i in range(1000) %}0123456789{% endfor %}";
    CHECK_EQ_INT(hearth_jinja_parse(src, strlen(src), &t, NULL), HEARTH_OK);
    hearth_buf b;
    hearth_buf_init(&b, 5000);
    CHECK_EQ_INT(hearth_buf_appends(&b, "kept"), HEARTH_OK);
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_jinja_render(t, "{}", &b, &err), HEARTH_ELIMIT);
    CHECK_MSG(strstr(err.msg, "output passed its limit") != NULL, "%s", err.msg);
    CHECK(b.len == 4 && memcmp(b.data, "kept", 4) == 0);
    /* a capture (block set) is bounded by the same limit */
    hearth_jinja *t2 = NULL;
    const char *src2 = "{% set x %}{% for i in range(1000) %}0123456789{% endfor %}{% endset %}{{ x|length }}";
    CHECK_EQ_INT(hearth_jinja_parse(src2, strlen(src2), &t2, NULL), HEARTH_OK);
    CHECK_EQ_INT(hearth_jinja_render(t2, "{}", &b, &err), HEARTH_ELIMIT);
    CHECK(b.len == 4 && memcmp(b.data, "kept", 4) == 0);
    /* a string doubled in a loop meets the limit, not the machine's memory */
    hearth_jinja *t3 = NULL;
    const char *src3 = "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}";
    CHECK_EQ_INT(hearth_jinja_parse(src3, strlen(src3), &t3, NULL), HEARTH_OK);
    CHECK_EQ_INT(hearth_jinja_render(t3, "{}", &b, &err), HEARTH_ELIMIT);
    CHECK(b.len == 4);
    /* and with room it renders after the kept bytes */
    hearth_buf_deinit(&b);
    hearth_buf_init(&b, 20000);
    CHECK_EQ_INT(hearth_buf_appends(&b, "kept"), HEARTH_OK);
    CHECK_EQ_INT(hearth_jinja_render(t, "{}", &b, &err), HEARTH_OK);
    CHECK_EQ_INT(b.len, 10004);
    hearth_buf_deinit(&b);
    hearth_jinja_free(t);
    hearth_jinja_free(t2);
    hearth_jinja_free(t3);
}

static void test_parse_once_render_many(void)
{
    const char *src = "{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}";
    hearth_jinja *t = NULL;
    CHECK_EQ_INT(hearth_jinja_parse(src, strlen(src), &t, NULL), HEARTH_OK);
    const char *ctx[] = {"{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}",
                         "{\"messages\": [{\"role\": \"system\", \"content\": \"b\"}]}"};
    const char *want[] = {"user:a;", "system:b;"};
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 2; i++) {
            hearth_buf b;
            hearth_buf_init(&b, 1024);
            CHECK_EQ_INT(hearth_jinja_render(t, ctx[i], &b, NULL), HEARTH_OK);
            CHECK(b.len == strlen(want[i]) && memcmp(b.data, want[i], b.len) == 0);
            hearth_buf_deinit(&b);
        }
    hearth_jinja_free(t);
    hearth_jinja_free(NULL);
    /* not NUL-terminated: the length bounds the source */
    CHECK_EQ_INT(hearth_jinja_parse("{{ 1 }}garbage", 7, &t, NULL), HEARTH_OK);
    hearth_buf b;
    hearth_buf_init(&b, 64);
    CHECK_EQ_INT(hearth_jinja_render(t, "{}", &b, NULL), HEARTH_OK);
    CHECK(b.len == 1 && b.data[0] == '1');
    hearth_buf_deinit(&b);
    hearth_jinja_free(t);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap + 1);
    size_t r;
    while (p && (r = fread(p + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *q = realloc(p, 2 * cap + 1);
            if (!q) {
                free(p);
                p = NULL;
                break;
            }
            p = q;
            cap *= 2;
        }
    }
    fclose(f);
    if (p) {
        p[n] = 0;
        *len = n;
    }
    return p;
}

static int render_files(const char *tpath, const char *cpath)
{
    size_t tn, cn;
    char *src = slurp(tpath, &tn), *ctx = slurp(cpath, &cn);
    if (!src || !ctx) {
        fprintf(stderr, "test_jinja: cannot read %s\n", !src ? tpath : cpath);
        free(src);
        free(ctx);
        return 2;
    }
    hearth_err err = {0};
    hearth_jinja *t = NULL;
    hearth_buf out;
    hearth_buf_init(&out, 16u << 20);
    int rc = hearth_jinja_parse(src, tn, &t, &err);
    if (rc == HEARTH_OK)
        rc = hearth_jinja_render(t, ctx, &out, &err);
    if (rc == HEARTH_OK)
        fwrite(out.data ? out.data : "", 1, out.len, stdout);
    else
        fprintf(stderr, "%s\n", err.msg);
    hearth_buf_deinit(&out);
    hearth_jinja_free(t);
    free(src);
    free(ctx);
    return rc == HEARTH_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "render") == 0)
        return render_files(argv[2], argv[3]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [render TEMPLATE_FILE CONTEXT_JSON_FILE]\n", argv[0]);
        return 2;
    }
    RUN(test_golden);
    RUN(test_syntax_errors_name_line_col);
    RUN(test_runtime_errors_name_line_col);
    RUN(test_step_limit);
    RUN(test_depth_limit);
    RUN(test_output_limit_leaves_out_as_it_was);
    RUN(test_parse_once_render_many);
    TEST_EXIT();
}

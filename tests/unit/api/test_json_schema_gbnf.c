/* test_json_schema_gbnf.c: JSON schemas turned into grammars, checked by
 * what the grammar does: the documents a schema allows are sentences of it
 * (the matcher accepts them whole), and documents that break the schema are
 * not. The documents are written by hand from the JSON schema rules, not
 * from the converter's output. Unsupported and malformed schemas must fail
 * with a message naming the part. */
#include "harness.h"

#include "api/json_schema_gbnf.h"
#include "engine/grammar.h"

#include <cjson/cJSON.h>
#include <string.h>

/* The grammar of schema (JSON text), parsed; NULL (and a failed case) when
 * conversion or parsing fails. */
static hearth_grammar *grammar_of(const char *schema)
{
    cJSON *doc = cJSON_Parse(schema);
    CHECK_MSG(doc != NULL, "bad test schema %s", schema);
    if (!doc)
        return NULL;
    hearth_buf out;
    hearth_buf_init(&out, 1 << 20);
    hearth_err err = {0};
    hearth_grammar *g = NULL;
    if (hearth_json_schema_to_gbnf(doc, &out, &err) != 0)
        CHECK_MSG(0, "schema %s: %s", schema, err.msg);
    else if (!(g = hearth_grammar_parse(out.data, out.len, &err)))
        CHECK_MSG(0, "schema %s: its grammar does not parse: %s\n%.*s", schema, err.msg, (int)out.len, out.data);
    hearth_buf_deinit(&out);
    cJSON_Delete(doc);
    return g;
}

static bool accepts(const hearth_grammar *g, const char *text)
{
    hearth_err err = {0};
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(g, &err);
    bool ok = m && (!*text || hearth_grammar_matcher_accept(m, text, strlen(text)) == 0) && hearth_grammar_matcher_complete(m);
    hearth_grammar_matcher_free(m);
    return ok;
}

/* Every valid[] document is accepted, every invalid[] one is not. */
static void check_schema(const char *schema, const char *const *valid, const char *const *invalid)
{
    hearth_grammar *g = grammar_of(schema);
    if (!g)
        return;
    for (; valid && *valid; valid++)
        CHECK_MSG(accepts(g, *valid), "schema %s refused the valid %s", schema, *valid);
    for (; invalid && *invalid; invalid++)
        CHECK_MSG(!accepts(g, *invalid), "schema %s accepted the invalid %s", schema, *invalid);
    hearth_grammar_free(g);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_primitives(void)
{
    check_schema("{\"type\":\"integer\"}", LIST("0", "-12", "7 "), LIST("01", "1.5", "\"1\"", "", "-"));
    check_schema("{\"type\":\"number\"}", LIST("0", "-1.25", "3e10", "2.5E-3"), LIST(".5", "1.", "+1", "0x10"));
    check_schema("{\"type\":\"boolean\"}", LIST("true", "false"), LIST("True", "1", "null"));
    check_schema("{\"type\":\"null\"}", LIST("null"), LIST("nil", "\"null\""));
    check_schema("{\"type\":\"string\"}", LIST("\"\"", "\"a b\"", "\"q\\\"\\n\\u00e9\"", "\"\xc3\xa9\""),
                 LIST("\"a", "'a'", "\"a\nb\"", "\"\\x\"", "1"));
}

static void test_object_required_and_optional(void)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
                    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"name\"]}";
    check_schema(s,
                 LIST("{\"name\":\"a\"}", "{ \"name\" : \"a\" , \"age\" : 3 }", "{\"name\":\"a\",\"tags\":[]}",
                      "{\"name\":\"a\",\"age\":1,\"tags\":[\"x\",\"y\"]}", "{\n  \"name\": \"a\"\n}"),
                 LIST("{}", "{\"age\":3}", "{\"name\":\"a\",\"extra\":1}", "{\"name\":\"a\",\"age\":\"3\"}",
                      "{\"name\":\"a\",}", "{\"name\":\"a\"", "{\"name\":\"a\",\"tags\":[1]}"));
}

static void test_object_all_optional(void)
{
    const char *s = "{\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"}}}";
    check_schema(s, LIST("{}", "{\"a\":1}", "{\"b\":true}", "{\"a\":1,\"b\":false}"),
                 LIST("{\"c\":1}", "{\"b\":true,\"b\":true}", "{,}", "{\"a\":1,}"));
}

static void test_additional_properties(void)
{
    check_schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"additionalProperties\":true}",
                 LIST("{\"a\":1}", "{\"a\":1,\"x\":[1,{\"y\":null}],\"z\":\"w\"}"), LIST("{\"x\":1}", "{\"a\":1,\"x\"}"));
    check_schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", LIST("{}", "{\"k\":1,\"j\":2}"),
                 LIST("{\"k\":\"v\"}"));
    check_schema("{\"type\":\"object\",\"additionalProperties\":false}", LIST("{}"), LIST("{\"k\":1}"));
}

static void test_any_object(void)
{
    check_schema("{}", LIST("{}", "{\"a\":[1,2,{\"b\":\"c\"}],\"d\":-1.5e3,\"e\":true,\"f\":null}"),
                 LIST("[]", "1", "\"s\"", "{\"a\"}", "{\"a\":}"));
}

static void test_arrays(void)
{
    check_schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
                 LIST("[1]", "[1,2,3]", "[ 1 , 2 ]"), LIST("[]", "[1,2,3,4]", "[1,]", "[\"a\"]"));
    check_schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2}", LIST("[1,2]", "[1,2,3,4,5]"),
                 LIST("[1]"));
    check_schema("{\"items\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", LIST("[1,\"a\"]", "[ -3000 , \"\" ]"),
                 LIST("[1]", "[\"a\",1]", "[1,\"a\",2]"));
    check_schema("{\"prefixItems\":[{\"type\":\"boolean\"}]}", LIST("[true]"), LIST("[]", "[1]"));
    check_schema("{\"type\":\"array\"}", LIST("[]", "[1,\"a\",[null]]"), LIST("{}"));
}

static void test_enum_const(void)
{
    check_schema("{\"enum\":[\"red\",\"green\",1,null]}", LIST("\"red\"", "\"green\"", "1", "null"),
                 LIST("\"blue\"", "red", "2", "\"Red\""));
    check_schema("{\"const\":\"42\"}", LIST("\"42\""), LIST("42", "\"43\""));
    check_schema("{\"const\":{\"a\":[1,true]}}", LIST("{\"a\":[1,true]}"), LIST("{\"a\":[1, true]}", "{}"));
}

static void test_unions(void)
{
    check_schema("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}", LIST("1", "\"x\""), LIST("true", "[1]"));
    check_schema("{\"oneOf\":[{\"type\":\"null\"},{\"type\":\"boolean\"}]}", LIST("null", "false"), LIST("0"));
    check_schema("{\"type\":[\"integer\",\"null\"]}", LIST("5", "null"), LIST("\"5\""));
}

static void test_refs(void)
{
    check_schema("{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},\"required\":[\"x\"]}},"
                 "\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/pt\"}}",
                 LIST("[{\"x\":1},{\"x\":2}]", "[]"), LIST("[{\"y\":1}]", "[{}]"));
    /* recursive: a tree of nodes */
    check_schema("{\"definitions\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                 "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/definitions/node\"}}},\"required\":[\"v\"]}},"
                 "\"$ref\":\"#/definitions/node\"}",
                 LIST("{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]},{\"v\":4}]}"),
                 LIST("{\"v\":1,\"kids\":[{}]}", "{\"kids\":[]}"));
}

static void test_string_lengths(void)
{
    check_schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", LIST("\"ab\"", "\"abc\"", "\"\\n\\t\""),
                 LIST("\"a\"", "\"abcd\"", "\"\""));
    check_schema("{\"type\":\"string\",\"format\":\"uuid\"}", LIST("\"123e4567-e89b-12d3-a456-426614174000\""),
                 LIST("\"123e4567\"", "\"not-a-uuid\""));
}

/* Schemas that must be refused, each with the words of its message. */
static void expect_refused(const char *schema, const char *want)
{
    cJSON *doc = cJSON_Parse(schema);
    hearth_buf out;
    hearth_buf_init(&out, 1 << 20);
    hearth_err err = {0};
    int rc = hearth_json_schema_to_gbnf(doc, &out, &err);
    CHECK_MSG(rc != 0, "schema %s was converted", schema);
    CHECK_MSG(strstr(err.msg, want) != NULL, "schema %s: got \"%s\", want \"%s\"", schema, err.msg, want);
    hearth_buf_deinit(&out);
    cJSON_Delete(doc);
}

static void test_refuse_unknown_type(void) { expect_refused("{\"type\":\"hiccup\"}", "unrecognized schema"); }
static void test_refuse_type_not_string(void) { expect_refused("{\"type\":123}", "unrecognized schema"); }
static void test_refuse_not_object(void) { expect_refused("123", "not an object"); }
static void test_refuse_pattern(void) { expect_refused("{\"type\":\"string\",\"pattern\":\"^a+$\"}", "'pattern'"); }
static void test_refuse_allof(void) { expect_refused("{\"allOf\":[{\"type\":\"object\"}]}", "'allOf'"); }
static void test_refuse_bounds(void) { expect_refused("{\"type\":\"integer\",\"minimum\":0}", "minimum / maximum"); }
static void test_refuse_dangling_ref(void) { expect_refused("{\"$ref\":\"#/$defs/none\"}", "leads nowhere"); }
static void test_refuse_remote_ref(void) { expect_refused("{\"$ref\":\"https://example.com/s.json\"}", "remote"); }
static void test_refuse_bad_counts(void)
{
    expect_refused("{\"type\":\"array\",\"items\":{},\"minItems\":3,\"maxItems\":1}", "maxItems below minItems");
}

static void test_refuse_deep(void)
{
    char s[4096] = "";
    for (int i = 0; i < 100; i++)
        strcat(s, "{\"type\":\"array\",\"items\":");
    strcat(s, "{}");
    for (int i = 0; i < 100; i++)
        strcat(s, "}");
    expect_refused(s, "nested more than");
}

int main(void)
{
    RUN(test_primitives);
    RUN(test_object_required_and_optional);
    RUN(test_object_all_optional);
    RUN(test_additional_properties);
    RUN(test_any_object);
    RUN(test_arrays);
    RUN(test_enum_const);
    RUN(test_unions);
    RUN(test_refs);
    RUN(test_string_lengths);
    RUN(test_refuse_unknown_type);
    RUN(test_refuse_type_not_string);
    RUN(test_refuse_not_object);
    RUN(test_refuse_pattern);
    RUN(test_refuse_allof);
    RUN(test_refuse_bounds);
    RUN(test_refuse_dangling_ref);
    RUN(test_refuse_remote_ref);
    RUN(test_refuse_bad_counts);
    RUN(test_refuse_deep);
    TEST_EXIT();
}

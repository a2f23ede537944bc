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

/* Additional keys are never a declared name (llama.cpp's _not_strings),
 * prefixes and extensions of one are, and names are compared as JSON
 * writes them (escapes included). */
static void test_additional_not_declared(void)
{
    check_schema("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}},"
                 "\"additionalProperties\":{\"type\":\"integer\"}}",
                 LIST("{}", "{\"nam\":1}", "{\"names\":1}", "{\"na\":1,\"x\":2}", "{\"name\":\"s\",\"n\":1,\"other\":3}",
                      "{\"\":1}", "{\"\\\"\":1}", "{\"n\\n\":1}", "{\"\u00e9\":1}", "{\"N\":1}"),
                 LIST("{\"name\":1}", "{\"n\":\"s\"}", "{\"name\":\"s\",\"name\":\"t\"}", "{\"n\":1,\"n\":2}",
                      "{\"name\":\"s\",\"x\":1,\"name\":\"t\"}"));
    /* names with a quote, a backslash, a newline and a control character */
    check_schema("{\"type\":\"object\",\"properties\":{\"a\\\"b\":{\"type\":\"null\"},\"c\\\\d\":{\"type\":\"null\"},"
                 "\"\\n\":{\"type\":\"null\"},\"\\u0001\":{\"type\":\"null\"}},\"additionalProperties\":true}",
                 LIST("{\"a\\\"b\":null}", "{\"a\\\"bc\":1}", "{\"a\\\"\":1}", "{\"a\\\\b\":1}", "{\"c\\\\\":1}",
                      "{\"c\\\\d\":null,\"c\\\\e\":1}", "{\"\\t\":1}", "{\"\\u0002\":1}", "{\"\\u00012\":1}"),
                 LIST("{\"a\\\"b\":1}", "{\"c\\\\d\":1}", "{\"\\n\":1}", "{\"\\u0001\":1}", "{\"a\\\"b\":null,\"a\\\"b\":null}",
                      "{\"\\x\":1}", "{\"\\u00g1\":1}"));
    /* many names (all required: llama.cpp's chain of optional ones costs the
     * matcher n^2 at every comma): exclusion stays exact */
    char *big = malloc(200000);
    size_t k = (size_t)sprintf(big, "{\"type\":\"object\",\"additionalProperties\":true,\"properties\":{");
    for (int i = 0; i < 3000; i++)
        k += (size_t)sprintf(big + k, "%s\"p%d\":{\"type\":\"integer\"}", i ? "," : "", i);
    k += (size_t)sprintf(big + k, "},\"required\":[");
    for (int i = 0; i < 3000; i++)
        k += (size_t)sprintf(big + k, "%s\"p%d\"", i ? "," : "", i);
    sprintf(big + k, "]}");
    hearth_grammar *g = grammar_of(big);
    if (g) {
        hearth_buf doc;
        hearth_buf_init(&doc, 1 << 20);
        hearth_buf_appends(&doc, "{");
        for (int i = 0; i < 3000; i++)
            hearth_buf_printf(&doc, "%s\"p%d\":%d", i ? "," : "", i, i);
        hearth_buf_appends(&doc, "}");
        CHECK(accepts(g, doc.data));
        doc.len--;
        hearth_buf_appends(&doc, ",\"p3000\":1,\"p30000\":2,\"p\":3,\"q1\":4}");
        CHECK(accepts(g, doc.data));
        doc.len--;
        hearth_buf_appends(&doc, ",\"p2999\":1}");
        CHECK(!accepts(g, doc.data));
        hearth_buf_deinit(&doc);
        hearth_grammar_free(g);
    }
    free(big);
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
    /* a $ref under a list of types (walked on a copy of its node, freed
     * before the walk ends), then $refs met after it, a new one and the same
     * one: the $ref table held the copy's strings (a use after free, seen
     * under SAN=1) */
    check_schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":[\"array\",\"null\"],\"items\":{\"$ref\":\"#/$defs/x\"}},"
                 "\"b\":{\"$ref\":\"#/$defs/y\"},\"c\":{\"$ref\":\"#/$defs/x\"}},"
                 "\"$defs\":{\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"string\"}}}",
                 LIST("{\"a\":[1,2],\"b\":\"s\",\"c\":3}", "{\"a\":null}", "{}"),
                 LIST("{\"a\":[\"1\"]}", "{\"b\":1}", "{\"c\":\"x\"}"));
    /* recursive through a list of types: the array's "[" comes first */
    check_schema("{\"$defs\":{\"l\":{\"type\":[\"array\",\"null\"],\"items\":{\"$ref\":\"#/$defs/l\"}}},\"$ref\":\"#/$defs/l\"}",
                 LIST("null", "[]", "[null,[[]],[null]]"), LIST("[1]", "[", "nul"));
}

static void test_string_lengths(void)
{
    check_schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", LIST("\"ab\"", "\"abc\"", "\"\\n\\t\""),
                 LIST("\"a\"", "\"abcd\"", "\"\""));
    check_schema("{\"type\":\"string\",\"format\":\"uuid\"}", LIST("\"123e4567-e89b-12d3-a456-426614174000\""),
                 LIST("\"123e4567\"", "\"not-a-uuid\""));
}

static void test_integer_bounds(void)
{
    check_schema("{\"type\":\"integer\",\"minimum\":0}", LIST("0", "7", "1000", "1234567890123456"),
                 LIST("-1", "01", "1.0", "12345678901234567", "\"5\""));
    check_schema("{\"type\":\"integer\",\"minimum\":-123,\"maximum\":42}", LIST("-123", "-100", "-99", "-1", "0", "9", "42"),
                 LIST("-124", "-200", "-1230", "43", "100", "-", "-01"));
    /* wholly negative, and a bound that is all zeros after its first digit */
    check_schema("{\"type\":\"integer\",\"minimum\":-1000,\"maximum\":-100}", LIST("-1000", "-999", "-100", "-500"),
                 LIST("-99", "-1001", "100", "0", "-0100"));
    check_schema("{\"type\":\"integer\",\"minimum\":1000}", LIST("1000", "1001", "9999", "10000"), LIST("10", "999", "0"));
    check_schema("{\"type\":\"integer\",\"maximum\":-5}", LIST("-5", "-6", "-10", "-1234567890123456"),
                 LIST("-4", "0", "5", "-05", "-00", "-12345678901234567"));
    check_schema("{\"type\":\"integer\",\"maximum\":0}", LIST("0", "-1", "-1000"), LIST("1", "10"));
    check_schema("{\"type\":\"integer\",\"minimum\":7,\"maximum\":7}", LIST("7"), LIST("6", "8", "77", "70"));
    /* exclusive bounds: draft 6 numbers and draft 4 booleans */
    check_schema("{\"type\":\"integer\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":10}", LIST("1", "9"),
                 LIST("0", "10", "-1"));
    check_schema("{\"type\":\"integer\",\"exclusiveMaximum\":-1}", LIST("-2", "-100"), LIST("-1", "0"));
    check_schema("{\"type\":\"integer\",\"minimum\":5,\"exclusiveMinimum\":true,\"maximum\":9,\"exclusiveMaximum\":true}",
                 LIST("6", "8"), LIST("5", "9"));
    /* the tightest of minimum and exclusiveMinimum; fractions round inward */
    check_schema("{\"type\":\"integer\",\"minimum\":5,\"exclusiveMinimum\":7}", LIST("8"), LIST("7", "5"));
    check_schema("{\"type\":\"integer\",\"minimum\":-1.5,\"maximum\":2.5}", LIST("-1", "0", "2"), LIST("-2", "3"));
    /* bounds past 16 digits are no bound: the integer rule writes at most 16 */
    check_schema("{\"type\":\"integer\",\"minimum\":-1e300,\"maximum\":1e300}", LIST("0", "-9999999999999999", "9999999999999999"),
                 LIST("10000000000000000"));
    check_schema("{\"type\":[\"integer\",\"null\"],\"minimum\":3}", LIST("3", "null"), LIST("2"));
    /* llama.cpp leaves bounds on "number" unchecked, and so does hearth */
    check_schema("{\"type\":\"number\",\"minimum\":0,\"maximum\":1}", LIST("0.5", "-5", "2.5e3"), LIST("\"1\""));
}

/* llama.cpp's allOf: one object of the components' properties; those of a
 * plain component are all required, those under an anyOf all optional. */
static void test_allof(void)
{
    check_schema("{\"$defs\":{\"base\":{\"properties\":{\"a\":{\"type\":\"string\"}},\"required\":[]}},"
                 "\"allOf\":[{\"$ref\":\"#/$defs/base\"},{\"properties\":{\"c\":{\"type\":\"integer\"}}}]}",
                 LIST("{\"a\":\"x\",\"c\":1}", "{ \"a\" : \"\" , \"c\" : -2 }"),
                 LIST("{\"a\":\"x\"}", "{\"c\":1}", "{\"c\":1,\"a\":\"x\"}", "{\"a\":\"x\",\"c\":1,\"d\":2}", "{\"a\":1,\"c\":1}"));
    check_schema("{\"type\":\"object\",\"allOf\":[{\"properties\":{\"a\":{\"type\":\"integer\"}}},"
                 "{\"anyOf\":[{\"properties\":{\"b\":{\"type\":\"string\"}}},{\"$ref\":\"#/$defs/cc\"}]}],"
                 "\"$defs\":{\"cc\":{\"properties\":{\"c\":{\"type\":\"boolean\"}}}}}",
                 LIST("{\"a\":1}", "{\"a\":1,\"b\":\"x\"}", "{\"a\":1,\"c\":true}", "{\"a\":1,\"b\":\"x\",\"c\":false}"),
                 LIST("{}", "{\"b\":\"x\"}", "{\"a\":1,\"c\":1}", "{\"a\":1,\"c\":true,\"b\":\"x\"}"));
    /* a $ref to a $ref, and components without properties (true, a bare type) */
    check_schema("{\"$defs\":{\"p\":{\"$ref\":\"#/$defs/q\"},\"q\":{\"properties\":{\"x\":{\"type\":\"null\"}}}},"
                 "\"allOf\":[true,{\"type\":\"object\"},{\"$ref\":\"#/$defs/p\"}]}",
                 LIST("{\"x\":null}"), LIST("{}", "{\"x\":1}"));
    /* properties win over allOf, as in llama.cpp */
    check_schema("{\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],\"allOf\":[{\"properties\":{\"b\":{}}}]}",
                 LIST("{\"a\":1}"), LIST("{\"a\":1,\"b\":{}}"));
}

/* Every range whose bounds come from a list of edge values (powers of ten,
 * one either side, 0, negatives) against the definition, on every integer
 * in a window around them. */
static void test_integer_bounds_exhaustive(void)
{
    static const int B[] = {-1000, -999, -101, -100, -99, -10, -9, -1, 0, 1, 9, 10, 11, 99, 100, 101, 109, 190, 999, 1000};
    enum { NB = sizeof B / sizeof *B };
    for (int i = -1; i < NB; i++) {
        for (int j = i < 0 ? -1 : i; j < NB; j++) {
            if (i < 0 && j < 0)
                continue;
            char schema[160] = "{\"type\":\"integer\"", doc[32];
            size_t k = strlen(schema);
            if (i >= 0)
                k += (size_t)snprintf(schema + k, sizeof schema - k, ",\"minimum\":%d", B[i]);
            if (j >= 0)
                k += (size_t)snprintf(schema + k, sizeof schema - k, ",\"maximum\":%d", B[j]);
            snprintf(schema + k, sizeof schema - k, "}");
            hearth_grammar *g = grammar_of(schema);
            if (!g)
                continue;
            for (int n = -1200; n <= 1200; n++) {
                bool want = (i < 0 || n >= B[i]) && (j < 0 || n <= B[j]);
                snprintf(doc, sizeof doc, "%d", n);
                if (accepts(g, doc) != want) {
                    CHECK_MSG(0, "schema %s: %s %s", schema, want ? "refused" : "accepted", doc);
                    break;
                }
            }
            hearth_grammar_free(g);
        }
    }
}

/* "pattern": llama.cpp's own examples first (tests/test-json-schema-to-
 * grammar.cpp), then the rest of the subset. Documents are JSON text: a
 * pattern's '"' is \" in them, a newline \n. */
static void test_pattern(void)
{
    check_schema("{\"type\":\"string\",\"pattern\":\"^abc?d*efg+(hij)?kl$\"}",
                 LIST("\"abefgkl\"", "\"abcddefgghijkl\"", "\"abdefgkl\""),
                 LIST("\"abdefkl\"", "\"abcdefghij\"", "\"xabefgkl\"", "\"abefgklx\"", "abefgkl"));
    check_schema("{\"type\":\"string\",\"pattern\":\"^\\\\[\\\\]\\\\{\\\\}\\\\(\\\\)\\\\|\\\\+\\\\*\\\\?$\"}", LIST("\"[]{}()|+*?\""),
                 LIST("\"[]{}()|+*\"", "\"\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^\\\"$\"}", LIST("\"\\\"\""), LIST("\"\"\"", "\"\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^A|B|C|D$\"}", LIST("\"A\"", "\"D\""), LIST("\"AB\"", "\"E\"", "\"\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^(\\\\([0-9]{1,3}\\\\))?[0-9]{3}-[0-9]{4} a{3,5}nd...$\"}",
                 LIST("\"(1)123-4567 aaand...\"", "\"123-4567 aaaaandxyz\"", "\"(12)123-4567 aaand\xc3\xa9\\t!\""),
                 LIST("\"(1234)123-4567 aaand...\"", "\"123-4567 aand...\"", "\"123-456 aaand...\"", "\"123-4567 aaand\\n..\"",
                      "\"()123-4567 aaand...\""));
    /* alternation inside a repeated group */
    check_schema("{\"type\":\"string\",\"pattern\":\"^(ab|c){2,3}(-[0-9]+)?$\"}",
                 LIST("\"abc\"", "\"cab\"", "\"ccc\"", "\"ababab\"", "\"abab-12\""),
                 LIST("\"ab\"", "\"abababab\"", "\"abab-\"", "\"ab-1c\"", "\"a\""));
    /* escapes llama.cpp passes to a grammar that does not parse */
    check_schema("{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-\\\\w+\\\\s?$\"}",
                 LIST("\"123-a_B\"", "\"123-x \"", "\"123-x\\t\"", "\"123-x\\n\""),
                 LIST("\"12-a\"", "\"123-\"", "\"123-\\u00e9\"", "\"123-x  \"", "\"abc-x\""));
    /* negated classes and '.' admit what JSON must escape, escaped */
    check_schema("{\"type\":\"string\",\"pattern\":\"^[^a]+$\"}",
                 LIST("\"b\"", "\"\\\"\"", "\"\\\\\"", "\"\\n\"", "\"\\u0001\"", "\"\\u001F\"", "\"\\u001f\"", "\"x\\by\""),
                 LIST("\"a\"", "\"ba\"", "\"\"\"", "\"\\\"", "\"\\x\"", "\"\\u0061\"", "\"\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^.$\"}", LIST("\"\\t\"", "\"\xc3\xa9\"", "\"\\\"\""),
                 LIST("\"\\n\"", "\"\\r\"", "\"ab\"", "\"\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^[\\\\x00-\\\\x1f\\\"]{2}$\"}", LIST("\"\\n\\\"\"", "\"\\u0000\\u001e\""),
                 LIST("\"a\\n\"", "\"\\n\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^\xc3\xa9+[\xce\xb1-\xcf\x89]{2}$\"}", LIST("\"\xc3\xa9\xc3\xa9\xce\xb1\xcf\x89\""),
                 LIST("\"\xc3\xa9\xce\xb1\"", "\"e\xce\xb1\xcf\x89\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^$\"}", LIST("\"\""), LIST("\"a\""));
    /* groups llama.cpp cannot read, lazy quantifiers, {,n}, {0}, anchored alternatives */
    check_schema("{\"type\":\"string\",\"pattern\":\"^(?:a|b)+?(?<x>c)$\"}", LIST("\"abac\"", "\"ac\""), LIST("\"c\"", "\"abc \""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^a{,2}b{0}$\"}", LIST("\"\"", "\"a\"", "\"aa\""), LIST("\"aaa\"", "\"b\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^a$|^b$\"}", LIST("\"a\"", "\"b\""), LIST("\"ab\"", "\"a$\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^a]}\\\\$\\\\^$\"}", LIST("\"a]}$^\""), LIST("\"a]}\""));
    check_schema("{\"type\":\"string\",\"pattern\":\"^\\\\u00e9\\\\x41\\\\u{1F600}\\\\ud83d\\\\ude00$\"}",
                 LIST("\"\xc3\xa9" "A\xf0\x9f\x98\x80\xf0\x9f\x98\x80\""), LIST("\"\xc3\xa9" "A\""));
    /* as in llama.cpp, a pattern wins over minLength / maxLength */
    check_schema("{\"type\":\"string\",\"pattern\":\"^a+$\",\"minLength\":3}", LIST("\"a\"", "\"aaaa\""), LIST("\"\""));
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
static void test_refuse_pattern(void)
{
    static const char *const BAD[][2] = {
        {"a+", "does not start with '^' and end with '$'"},
        {"^a+", "does not start with '^' and end with '$'"},
        {"^a\\\\$", "does not start with '^' and end with '$'"},
        {"^(a$", "an unclosed '(' at offset 1"},
        {"^a)$", "an unbalanced ')' at offset 2"},
        {"^[a$", "an unclosed '['"},
        {"^a{2$", "a '{' that is no {m,n} repetition"},
        {"^{a}$", "with nothing before it"},
        {"^a{3,1}$", "maximum is below its minimum"},
        {"^a{1000001}$", "above 1000000"},
        {"^a**$", "a repetition of a repetition"},
        {"^(?=a)b$", "lookaround"},
        {"^(?i)a$", "lookaround or other '(?' group"},
        {"^(a)\\\\1$", "a back-reference"},
        {"^\\\\bx$", "a word boundary"},
        {"^\\\\p{L}$", "a Unicode property escape"},
        {"^\\\\q$", "an unknown escape '\\q'"},
        {"^\\\\07$", "an octal escape"},
        {"^\\\\ud800$", "a lone surrogate"},
        {"^a^b$", "an anchor ('^' or '$') inside the pattern"},
        {"^(a|b$)$", "an anchor"},
        {"^(a*)*$", "an unbounded repetition of something that may be empty"},
        {"^(a|)+$", "may be empty"},
        {"^[]$", "a character class that matches nothing"},
        {"^[z-a]$", "ends before it starts"},
        {"^[\\\\d-z]$", "a range from a class escape"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        char schema[200];
        snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":\"%s\"}", BAD[i][0]);
        expect_refused(schema, BAD[i][1]);
    }
    expect_refused("{\"type\":\"string\",\"pattern\":5}", "'pattern' that is not a string");
    expect_refused("{\"type\":\"string\",\"pattern\":\"^\xff$\"}", "not UTF-8");
    /* groups past the nesting limit */
    char deep[512] = "{\"pattern\":\"^";
    for (int i = 0; i < 100; i++)
        strcat(deep, "(");
    strcat(deep, "a");
    for (int i = 0; i < 100; i++)
        strcat(deep, ")");
    strcat(deep, "$\"}");
    expect_refused(deep, "nested more than");
}
static void test_refuse_allof(void)
{
    expect_refused("{\"allOf\":{\"type\":\"object\"}}", "allOf that is not a list");
    expect_refused("{\"allOf\":[5]}", "an allOf component that is not a schema object");
    expect_refused("{\"allOf\":[{\"properties\":{\"a\":{}}},{\"properties\":{\"a\":{\"type\":\"string\"}}}]}",
                   "both declare the property 'a'");
    expect_refused("{\"allOf\":[{\"$ref\":\"#/$defs/none\"}]}", "leads nowhere");
    /* a $ref that names itself: llama.cpp's converter overflows its stack */
    expect_refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"allOf\":[{\"$ref\":\"#/$defs/a\"}]}", "chained more than");
}
static void test_refuse_bounds(void)
{
    expect_refused("{\"type\":\"integer\",\"minimum\":\"0\"}", "'minimum' that is not a number");
    expect_refused("{\"type\":\"integer\",\"exclusiveMaximum\":null}", "'exclusiveMaximum' that is not a number");
    expect_refused("{\"type\":\"integer\",\"minimum\":5,\"maximum\":3}", "leave no integer");
    expect_refused("{\"type\":\"integer\",\"exclusiveMinimum\":3,\"exclusiveMaximum\":4}", "leave no integer");
    expect_refused("{\"type\":\"integer\",\"minimum\":1e17}", "leave no integer");
}
static void test_refuse_bad_name(void)
{
    expect_refused("{\"properties\":{\"\xff\":{}},\"additionalProperties\":true}", "not UTF-8");
    expect_refused("{\"enum\":[\"a\",\"\xc3\"]}", "not UTF-8");
}
/* A $ref that comes back to itself with nothing matched on the way (llama.cpp
 * writes the left-recursive grammar, and its parser refuses it). */
static void test_refuse_left_recursive_ref(void)
{
    const char *want = "comes back to itself before anything is matched";
    expect_refused("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}", want);
    expect_refused("{\"$defs\":{\"a\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/b\"}]},"
                   "\"b\":{\"oneOf\":[{\"type\":\"integer\"},{\"$ref\":\"#/$defs/a\"}]}},\"$ref\":\"#/$defs/a\"}",
                   want);
    expect_refused("{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/\"}]}", want); /* "#/" is the whole schema */
    expect_refused("{\"$defs\":{\"a\":{\"type\":[\"null\",\"integer\"],\"anyOf\":[{\"$ref\":\"#/$defs/a\"}]}},"
                   "\"$ref\":\"#/$defs/a\"}",
                   want);
}

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
    RUN(test_additional_not_declared);
    RUN(test_any_object);
    RUN(test_arrays);
    RUN(test_enum_const);
    RUN(test_unions);
    RUN(test_refs);
    RUN(test_string_lengths);
    RUN(test_integer_bounds);
    RUN(test_integer_bounds_exhaustive);
    RUN(test_allof);
    RUN(test_pattern);
    RUN(test_refuse_unknown_type);
    RUN(test_refuse_type_not_string);
    RUN(test_refuse_not_object);
    RUN(test_refuse_pattern);
    RUN(test_refuse_allof);
    RUN(test_refuse_bounds);
    RUN(test_refuse_bad_name);
    RUN(test_refuse_left_recursive_ref);
    RUN(test_refuse_dangling_ref);
    RUN(test_refuse_remote_ref);
    RUN(test_refuse_bad_counts);
    RUN(test_refuse_deep);
    TEST_EXIT();
}

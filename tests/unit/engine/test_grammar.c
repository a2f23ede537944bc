/* test_grammar.c: the GBNF parser (good grammars parse, each bad one fails
 * with a message naming the problem and where) and the matcher (strings a
 * grammar accepts and rejects, token by token and across split UTF-8). */
#include "harness.h"

#include "engine/grammar.h"

#include <string.h>

static hearth_grammar *parse(const char *text, hearth_err *err)
{
    return hearth_grammar_parse(text, strlen(text), err);
}

/* Whether the whole of s is a sentence of the grammar, fed in pieces of
 * `chunk` bytes (0: all at once). */
static bool matches_chunked(const char *grammar, const char *s, size_t chunk)
{
    hearth_err err = {0};
    hearth_grammar *g = parse(grammar, &err);
    if (!g) {
        fprintf(stderr, "  grammar failed: %s\n", err.msg);
        return false;
    }
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(g, &err);
    bool ok = m != NULL;
    size_t n = strlen(s);
    for (size_t i = 0; ok && i < n;) {
        size_t k = chunk && chunk < n - i ? chunk : n - i;
        bool allowed = hearth_grammar_matcher_allows(m, s + i, k);
        ok = hearth_grammar_matcher_accept(m, s + i, k) == 0;
        if (allowed != ok)
            fprintf(stderr, "  allows and accept disagree at byte %zu\n", i), ok = false;
        i += k;
    }
    ok = ok && hearth_grammar_matcher_complete(m);
    hearth_grammar_matcher_free(m);
    hearth_grammar_free(g);
    return ok;
}

static bool matches(const char *grammar, const char *s) { return matches_chunked(grammar, s, 0); }

/* The message of a grammar that must fail; "" when it parsed. */
static const char *fails(const char *text, hearth_err *err)
{
    hearth_grammar *g = parse(text, err);
    if (g) {
        hearth_grammar_free(g);
        return "";
    }
    return err->msg;
}

/* ---- parsing ---- */

static void test_parse_good(void)
{
    static const char *good[] = {
        "root ::= \"a\"",
        "root ::= \"\"",
        "root ::= ",
        "root ::= a | b\na ::= \"x\"\nb ::= [0-9]+",
        "# comment\nroot ::= ( \"a\" # inside\n | \"b\" )* # trailing\n",
        "root ::= [^\\n\\x00-\\x1F\\u00e9] . \"\\U0001F600\"",
        "root ::= \"a\"{2} \"b\"{1,} \"c\"{0,3} \"d\"{ 2 , 4 }",
        "root ::= x\nx ::= \"1\"\nx ::= \"2\"", /* the second definition wins */
        "root ::= (\n  \"a\" |\n  \"b\"\n)\r\n",
        "root ::= value\nvalue ::= \"[\" (value (\",\" value)*)? \"]\" | \"1\"",
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        hearth_err err = {0};
        hearth_grammar *g = parse(good[i], &err);
        CHECK_MSG(g != NULL, "grammar %zu: %s", i, err.msg);
        hearth_grammar_free(g);
    }
}

#define BAD(name, text, want)                                                  \
    static void name(void)                                                     \
    {                                                                          \
        hearth_err err = {0};                                                  \
        const char *msg = fails(text, &err);                                   \
        CHECK_MSG(strstr(msg, want) != NULL, "got \"%s\", want \"%s\"", msg, want); \
    }

BAD(test_bad_no_root, "a ::= \"x\"", "no 'root' rule")
BAD(test_bad_undefined, "root ::= a b\na ::= \"x\"", "line 1, column 12: undefined rule 'b'")
BAD(test_bad_missing_assign, "root \"a\"", "line 1, column 6: expecting '::='")
BAD(test_bad_unterminated_literal, "root ::= \"abc", "column 10: unterminated literal")
BAD(test_bad_unterminated_class, "root ::= [a-z", "unterminated character class")
BAD(test_bad_unclosed_group, "root ::= ( \"a\" | \"b\"", "expecting ')'")
BAD(test_bad_escape, "root ::= \"\\q\"", "unknown escape '\\q'")
BAD(test_bad_hex, "root ::= \"\\x4\"", "expecting 2 hex digits")
BAD(test_bad_repeat_nothing, "root ::= * \"a\"", "expecting an item before '*'")
BAD(test_bad_repeat_range, "root ::= \"a\"{3,1}", "the maximum is below the minimum")
BAD(test_bad_repeat_brace, "root ::= \"a\"{3", "expecting '}'")
BAD(test_bad_left_recursion, "root ::= root \"a\" | \"b\"", "rule 'root' is left-recursive")
BAD(test_bad_left_recursion_nullable, "root ::= x root \"a\" | \"b\"\nx ::= \"c\"?", "left-recursive")
BAD(test_bad_trailing, "root ::= \"a\" )", "line 1, column 14: expecting the end of the line")
BAD(test_bad_line_number, "root ::= a\n\na ::= \"x\" ]", "line 3, column 11")
BAD(test_bad_range_order, "root ::= [z-a]", "range ends before it starts")
BAD(test_bad_utf8, "root ::= \"\xff\"", "invalid UTF-8")
BAD(test_bad_name, "root ::= \"a\"\n::= \"b\"", "line 2, column 1: expecting a rule name")

static void test_bad_too_big(void)
{
    hearth_err err = {0};
    const char *msg = fails("root ::= \"abcdefghij\"{200000}", &err);
    CHECK_MSG(strstr(msg, "more than") != NULL, "%s", msg);
    CHECK_EQ_INT(err.code, HEARTH_ELIMIT);
}

/* ---- matching ---- */

static void test_match_literals_and_alternation(void)
{
    const char *g = "root ::= \"cat\" | \"dog\" | \"do\"";
    CHECK(matches(g, "cat"));
    CHECK(matches(g, "dog"));
    CHECK(matches(g, "do"));
    CHECK(!matches(g, "ca"));
    CHECK(!matches(g, "cats"));
    CHECK(!matches(g, "bird"));
}

static void test_match_classes(void)
{
    const char *g = "root ::= [a-c] [^a-c] [xyz0-9]";
    CHECK(matches(g, "ad0"));
    CHECK(matches(g, "c\xc3\xa9y")); /* é is outside a-c */
    CHECK(!matches(g, "aa0"));
    CHECK(!matches(g, "dd0"));
    CHECK(!matches(g, "adw"));
    CHECK(matches("root ::= . .", "\xe2\x82\xac!"));
    CHECK(!matches("root ::= .", "ab"));
}

static void test_match_repetition(void)
{
    CHECK(matches("root ::= \"a\"*", ""));
    CHECK(matches("root ::= \"a\"*", "aaaa"));
    CHECK(!matches("root ::= \"a\"+", ""));
    CHECK(matches("root ::= \"a\"+ \"b\"", "aaab"));
    CHECK(matches("root ::= \"ab\"? \"c\"", "c"));
    CHECK(matches("root ::= \"ab\"? \"c\"", "abc"));
    CHECK(!matches("root ::= \"ab\"? \"c\"", "ac"));
    const char *g = "root ::= \"a\"{2,4}";
    CHECK(!matches(g, "a"));
    CHECK(matches(g, "aa"));
    CHECK(matches(g, "aaaa"));
    CHECK(!matches(g, "aaaaa"));
    CHECK(matches("root ::= \"a\"{3}", "aaa"));
    CHECK(!matches("root ::= \"a\"{3}", "aaaa"));
    CHECK(matches("root ::= \"a\"{2,} \"b\"", "aaaaab"));
    CHECK(!matches("root ::= \"a\"{2,} \"b\"", "ab"));
}

static void test_match_recursion(void)
{
    const char *g = "root ::= list\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\nitem ::= list | [0-9]+";
    CHECK(matches(g, "[]"));
    CHECK(matches(g, "[1,[2,[]],33]"));
    CHECK(!matches(g, "[1,]"));
    CHECK(!matches(g, "[[1]"));
}

static void test_match_escapes(void)
{
    const char *g = "root ::= \"\\\"\" [\\t\\n] \"\\x41\\u00e9\\\\\"";
    CHECK(matches(g, "\"\tA\xc3\xa9\\"));
    CHECK(!matches(g, "\" A\xc3\xa9\\"));
}

/* A character split across tokens: the first byte alone is allowed only when
 * some allowed character starts with it. */
static void test_match_partial_utf8(void)
{
    const char *g = "root ::= \"\xc3\xa9\" \"x\"";
    CHECK(matches_chunked(g, "\xc3\xa9x", 1));
    hearth_err err = {0};
    hearth_grammar *gr = parse("root ::= [\xc3\xa0-\xc3\xbf]", &err); /* U+00E0..U+00FF */
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(gr, &err);
    CHECK(hearth_grammar_matcher_allows(m, "\xc3", 1));   /* U+00C0..U+00FF: meets the range */
    CHECK(!hearth_grammar_matcher_allows(m, "\xc4", 1));  /* U+0100..U+013F: does not */
    CHECK(!hearth_grammar_matcher_allows(m, "\xe2", 1));
    CHECK(hearth_grammar_matcher_accept(m, "\xc3", 1) == 0);
    CHECK(!hearth_grammar_matcher_complete(m)); /* inside a character */
    CHECK(!hearth_grammar_matcher_allows(m, "\x80", 1)); /* U+00C0 */
    CHECK(hearth_grammar_matcher_accept(m, "\xa9", 1) == 0);
    CHECK(hearth_grammar_matcher_complete(m));
    hearth_grammar_matcher_free(m);
    hearth_grammar_free(gr);
}

static void test_match_rejects_empty_and_malformed(void)
{
    hearth_err err = {0};
    hearth_grammar *g = parse("root ::= [^a]*", &err);
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(g, &err);
    CHECK(!hearth_grammar_matcher_allows(m, "", 0));
    CHECK(!hearth_grammar_matcher_allows(m, "\0b", 2));
    CHECK(!hearth_grammar_matcher_allows(m, "\x80", 1));     /* a continuation byte first */
    CHECK(!hearth_grammar_matcher_allows(m, "\xc3x", 2));    /* a lead byte without its continuation */
    CHECK(!hearth_grammar_matcher_allows(m, "\xc1\xbb", 2));  /* '{' written overlong */
    CHECK(!hearth_grammar_matcher_allows(m, "\xe0\x80", 2));  /* can only become overlong */
    CHECK(!hearth_grammar_matcher_allows(m, "\xed\xa0\x80", 3)); /* a surrogate */
    CHECK(hearth_grammar_matcher_allows(m, "xyz", 3));
    CHECK(!hearth_grammar_matcher_allows(m, "xa", 2));
    CHECK(hearth_grammar_matcher_complete(m));
    hearth_grammar_matcher_free(m);
    hearth_grammar_free(g);
}

/* A refused text leaves the matcher as it was. */
static void test_match_reject_keeps_state(void)
{
    hearth_err err = {0};
    hearth_grammar *g = parse("root ::= \"ab\" \"c\"", &err);
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(g, &err);
    CHECK(hearth_grammar_matcher_accept(m, "a", 1) == 0);
    CHECK(hearth_grammar_matcher_accept(m, "bx", 2) == HEARTH_EINVAL);
    CHECK(hearth_grammar_matcher_accept(m, "b", 1) == 0);
    CHECK(!hearth_grammar_matcher_complete(m));
    CHECK(hearth_grammar_matcher_accept(m, "c", 1) == 0);
    CHECK(hearth_grammar_matcher_complete(m));
    CHECK(!hearth_grammar_matcher_allows(m, "c", 1));
    hearth_grammar_matcher_free(m);
    hearth_grammar_free(g);
}

/* A grammar whose parses multiply (a space may open a nested e or close
 * any of the open ones: the distinct stacks grow like the ways to nest)
 * spends the matcher's budget: it then refuses every
 * text, the vocabulary mask says so, and nothing takes long. A JSON-shaped
 * grammar over a long document stays far inside it. */
static void test_match_budget(void)
{
    hearth_err err = {0};
    hearth_grammar *g = parse("root ::= e \"a\"\ne ::= \" \" e? e?\n", &err);
    CHECK_MSG(g != NULL, "%s", err.msg);
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(g, &err);
    CHECK(m != NULL);
    int fed = 0;
    while (fed < 320 && hearth_grammar_matcher_accept(m, " ", 1) == 0)
        fed++;
    CHECK_MSG(fed < 320, "320 spaces accepted: the budget never ran out");
    CHECK(hearth_grammar_matcher_spent(m));
    CHECK(!hearth_grammar_matcher_allows(m, "a", 1)); /* spent: refused for good */
    hearth_token_texts t = {3, (uint32_t[]){0, 1, 2, 3}, "a b"};
    uint8_t allowed[3];
    CHECK_EQ_INT(hearth_grammar_mask(m, &t, NULL, 0, allowed), -1);
    hearth_grammar_matcher_free(m);
    hearth_grammar_free(g);

    const char *json = "root ::= obj\nobj ::= \"{\" ws (kv (\",\" ws kv)*)? \"}\"\n"
                       "kv ::= str \":\" ws val ws\nval ::= obj | str | [0-9]+\n"
                       "str ::= \"\\\"\" [a-z]* \"\\\"\"\nws ::= [ ]{0,20}\n";
    char doc[4096];
    size_t n = 0;
    n += (size_t)snprintf(doc + n, sizeof doc - n, "{");
    for (int i = 0; i < 150; i++)
        n += (size_t)snprintf(doc + n, sizeof doc - n, "%s \"key\": {\"v\": %d }", i ? "," : "", i);
    snprintf(doc + n, sizeof doc - n, "}");
    CHECK(matches_chunked(json, doc, 3));
}

int main(void)
{
    RUN(test_parse_good);
    RUN(test_bad_no_root);
    RUN(test_bad_undefined);
    RUN(test_bad_missing_assign);
    RUN(test_bad_unterminated_literal);
    RUN(test_bad_unterminated_class);
    RUN(test_bad_unclosed_group);
    RUN(test_bad_escape);
    RUN(test_bad_hex);
    RUN(test_bad_repeat_nothing);
    RUN(test_bad_repeat_range);
    RUN(test_bad_repeat_brace);
    RUN(test_bad_left_recursion);
    RUN(test_bad_left_recursion_nullable);
    RUN(test_bad_trailing);
    RUN(test_bad_line_number);
    RUN(test_bad_range_order);
    RUN(test_bad_utf8);
    RUN(test_bad_name);
    RUN(test_bad_too_big);
    RUN(test_match_literals_and_alternation);
    RUN(test_match_classes);
    RUN(test_match_repetition);
    RUN(test_match_recursion);
    RUN(test_match_escapes);
    RUN(test_match_partial_utf8);
    RUN(test_match_rejects_empty_and_malformed);
    RUN(test_match_reject_keeps_state);
    RUN(test_match_budget);
    TEST_EXIT();
}

/* test_tool_calls.c: OpenAI function calling's parts that need no server
 * (src/api/tool_calls.c, tool_parse.c): the request's tools checked, field
 * by field; the forced-call grammar, parsed by the project's GBNF parser and
 * matched against calls it must take and refuse; the model's output parsed,
 * from canned answers in each family's format, malformed ones included;
 * the streamed hold-back; and the JSON printing the templates expect
 * (Python's json.dumps, as Jinja's tojson). */
#include "harness.h"
#include "api/tool_calls.h"
#include "engine/grammar.h"

#include <string.h>

static const char WEATHER[] =
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}";
static const char TEST_TOOL[] =
    "{\"type\": \"function\", \"function\": {\"name\": \"test\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"success\": {\"type\": \"boolean\", \"const\": true}}, \"required\": [\"success\"]}}}";

/* A request body with the given tools list text and tool_choice (JSON text or NULL). */
static int from(const char *tools, const char *choice, hearth_chat_template_kind k, hearth_tool_set **ts, hearth_err *err)
{
    char body[4096];
    snprintf(body, sizeof body, "{\"tools\": %s%s%s}", tools, choice ? ", \"tool_choice\": " : "", choice ? choice : "");
    cJSON *doc = cJSON_Parse(body);
    CHECK_MSG(doc != NULL, "bad test body %s", body);
    memset(err, 0, sizeof *err);
    int rc = hearth_tools_from_json(doc, k, ts, err);
    cJSON_Delete(doc);
    return rc;
}

static void test_request_fields(void)
{
    hearth_tool_set *ts = NULL;
    hearth_err err;
    char list[2048];
    snprintf(list, sizeof list, "[%s, %s]", WEATHER, TEST_TOOL);
    CHECK_EQ_INT(from(list, NULL, HEARTH_TMPL_LLAMA3, &ts, &err), HEARTH_OK);
    CHECK(ts && ts->n == 2 && ts->choice == HEARTH_TOOL_AUTO && !ts->parallel && ts->style == HEARTH_TOOLS_LLAMA3);
    if (ts) {
        CHECK(!strcmp(ts->names[0], "get_weather") && !strcmp(ts->names[1], "test"));
        CHECK(!strncmp(ts->texts[0], "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\"", 70));
    }
    hearth_tool_set_free(ts);
    CHECK_EQ_INT(from(list, "{\"type\": \"function\", \"function\": {\"name\": \"test\"}}", HEARTH_TMPL_CHATML, &ts, &err), HEARTH_OK);
    CHECK(ts && ts->choice == HEARTH_TOOL_NAMED && ts->named == 1);
    hearth_tool_set_free(ts);
    /* none in play: NULL */
    const char *none[][2] = {{"[]", NULL}, {"null", NULL}, {"[]", "\"auto\""}, {list, "\"none\""}, {"[]", "\"none\""}};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        ts = (hearth_tool_set *)1;
        CHECK_EQ_INT(from(none[i][0], none[i][1], HEARTH_TMPL_CHATML, &ts, &err), HEARTH_OK);
        CHECK_MSG(ts == NULL, "case %zu", i);
    }
    /* each bad shape names its field */
    static const struct { const char *tools, *choice, *want; } bad[] = {
        {"{}", NULL, "'tools' must be a list"},
        {"[1]", NULL, "tools[0] must be an object"},
        {"[{\"type\": \"code_interpreter\"}]", NULL, "tools[0].type"},
        {"[{\"type\": \"function\"}]", NULL, "tools[0].function must be an object"},
        {"[{\"type\": \"function\", \"function\": {}}]", NULL, "tools[0].function.name"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]", NULL, "tools[0].function.name"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": []}}]", NULL, "tools[0].function.parameters"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": 3}}]", NULL, "tools[0].function.description"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", \"function\": {\"name\": \"f\"}}]",
         NULL, "tools[1].function.name 'f' is also tools[0]'s"},
        {"[]", "\"required\"", "needs 'tools'"},
        {"null", "\"sometimes\"", "tool_choice must be"},
        {"[]", "{\"type\": \"function\"}", "tool_choice must be"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]", "{\"type\": \"function\", \"function\": {\"name\": \"g\"}}",
         "'g' is none of the 'tools'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ts = NULL;
        int rc = from(bad[i].tools, bad[i].choice, HEARTH_TMPL_CHATML, &ts, &err);
        CHECK_MSG(rc == HEARTH_EINVAL && ts == NULL && strstr(err.msg, bad[i].want), "case %zu: rc %d, '%s'", i, rc, err.msg);
    }
    cJSON *doc = cJSON_Parse("{\"tools\": [], \"parallel_tool_calls\": 1}");
    CHECK_EQ_INT(hearth_tools_from_json(doc, HEARTH_TMPL_CHATML, &ts, &err), HEARTH_EINVAL);
    cJSON_Delete(doc);
}

/* Does g (GBNF) accept the whole of s? */
static bool accepts(const char *gbnf, const char *s)
{
    hearth_err err = {0};
    hearth_grammar *g = hearth_grammar_parse(gbnf, strlen(gbnf), &err);
    CHECK_MSG(g != NULL, "grammar refused: %s\n%s", err.msg, gbnf);
    if (!g)
        return false;
    hearth_grammar_matcher *m = hearth_grammar_matcher_new(g, &err);
    bool ok = m && hearth_grammar_matcher_accept(m, s, strlen(s)) == 0 && hearth_grammar_matcher_complete(m);
    hearth_grammar_matcher_free(m);
    hearth_grammar_free(g);
    return ok;
}

static void test_grammar(void)
{
    static const struct {
        hearth_chat_template_kind k;
        const char *choice, *yes, *no;
    } cases[] = {
        {HEARTH_TMPL_LLAMA3, "\"required\"", "{\"name\": \"test\", \"parameters\": {\"success\": true}}",
         "{\"name\": \"test\", \"parameters\": {\"success\": false}}"},
        {HEARTH_TMPL_LLAMA3, "\"required\"", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
         "{\"name\": \"get_weather\", \"parameters\": {}}"},
        {HEARTH_TMPL_CHATML, "\"required\"", "<tool_call>\n{\"name\": \"test\", \"arguments\": {\"success\": true}}\n</tool_call>",
         "{\"name\": \"test\", \"arguments\": {\"success\": true}}"},
        {HEARTH_TMPL_GEMMA, "\"required\"", "{\"tool_call\": {\"name\": \"test\", \"arguments\": {\"success\": true}}}",
         "{\"tool_call\": {\"name\": \"nope\", \"arguments\": {}}}"},
        {HEARTH_TMPL_GEMMA, "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}",
         "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}}",
         "{\"tool_call\": {\"name\": \"test\", \"arguments\": {\"success\": true}}}"},
    };
    char list[2048];
    snprintf(list, sizeof list, "[%s, %s]", WEATHER, TEST_TOOL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hearth_tool_set *ts = NULL;
        hearth_err err;
        CHECK_EQ_INT(from(list, cases[i].choice, cases[i].k, &ts, &err), HEARTH_OK);
        if (!ts)
            continue;
        hearth_buf g;
        hearth_buf_init(&g, HEARTH_GRAMMAR_MAX_TEXT);
        CHECK_EQ_INT(hearth_tools_grammar(ts, &g, &err), HEARTH_OK);
        if (g.data) {
            CHECK_MSG(accepts(g.data, cases[i].yes), "case %zu should take %s\n%s", i, cases[i].yes, g.data);
            CHECK_MSG(!accepts(g.data, cases[i].no), "case %zu should refuse %s", i, cases[i].no);
        }
        hearth_buf_deinit(&g);
        hearth_tool_set_free(ts);
    }
    /* parallel hermes: several blocks */
    cJSON *doc = cJSON_Parse("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}], "
                             "\"tool_choice\": \"required\", \"parallel_tool_calls\": true}");
    hearth_tool_set *ts = NULL;
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_tools_from_json(doc, HEARTH_TMPL_CHATML, &ts, &err), HEARTH_OK);
    cJSON_Delete(doc);
    hearth_buf g;
    hearth_buf_init(&g, HEARTH_GRAMMAR_MAX_TEXT);
    CHECK(ts && hearth_tools_grammar(ts, &g, &err) == HEARTH_OK);
    if (g.data)
        CHECK(accepts(g.data, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
                              "{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"));
    hearth_buf_deinit(&g);
    hearth_tool_set_free(ts);
    /* a parameters schema the converter refuses is named */
    doc = cJSON_Parse("{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                      "{\"type\": \"string\", \"pattern\": \"a\"}}}], \"tool_choice\": \"required\"}");
    CHECK_EQ_INT(hearth_tools_from_json(doc, HEARTH_TMPL_CHATML, &ts, &err), HEARTH_OK);
    cJSON_Delete(doc);
    hearth_buf_init(&g, HEARTH_GRAMMAR_MAX_TEXT);
    memset(&err, 0, sizeof err);
    CHECK(ts && hearth_tools_grammar(ts, &g, &err) == HEARTH_EINVAL && strstr(err.msg, "tools[0].function.parameters"));
    hearth_buf_deinit(&g);
    hearth_tool_set_free(ts);
}

static const char *const NAMES[] = {"get_weather", "test"};

/* Parses s; returns the calls (-1: ENOMEM), checking the first's name and arguments when given. */
static int parse(hearth_chat_tool_style st, const char *s, const char *name, const char *args, size_t content)
{
    hearth_tool_parse p;
    int k = hearth_tools_parse_output(st, NAMES, 2, s, strlen(s), &p);
    if (k > 0 && name) {
        CHECK_MSG(!strcmp(p.calls[0].name, name), "%s: name %s", s, p.calls[0].name);
        CHECK_MSG(!strcmp(p.calls[0].arguments, args), "%s: arguments %s", s, p.calls[0].arguments);
        CHECK_MSG(p.content_len == content, "%s: content %zu", s, p.content_len);
    }
    hearth_tool_parse_deinit(&p);
    return k;
}

static void test_parse_output(void)
{
    const hearth_chat_tool_style L = HEARTH_TOOLS_LLAMA3, H = HEARTH_TOOLS_HERMES, G = HEARTH_TOOLS_GENERIC;
    /* calls */
    CHECK_EQ_INT(parse(L, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "get_weather", "{\"city\":\"Paris\"}", 0), 1);
    CHECK_EQ_INT(parse(L, "\n <|python_tag|>{\"type\": \"function\", \"name\": \"test\", \"arguments\": \"{\\\"success\\\": true}\"}",
                       "test", "{\"success\":true}", 0), 1);
    CHECK_EQ_INT(parse(L, "{\"name\": \"test\", \"parameters\": {}}; {\"name\": \"get_weather\", \"parameters\": {}}\n", "test", "{}", 0), 2);
    CHECK_EQ_INT(parse(H, "<tool_call>\n{\"name\": \"test\", \"arguments\": {\"success\": true}}\n</tool_call>", "test",
                       "{\"success\":true}", 0), 1);
    CHECK_EQ_INT(parse(H, "Let me check. <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"}{<tool_call>\"}}</tool_call>\n"
                          "<tool_call>\n{\"name\": \"test\", \"arguments\": {}}", "get_weather", "{\"city\":\"}{<tool_call>\"}", 14), 2);
    CHECK_EQ_INT(parse(G, " {\"tool_call\": {\"name\": \"test\", \"arguments\": {\"success\": true}}} ", "test", "{\"success\":true}", 0), 1);
    CHECK_EQ_INT(parse(G, "{\"tool_calls\": [{\"name\": \"test\", \"arguments\": {}}, {\"name\": \"get_weather\", \"arguments\": {}}]}",
                       "test", "{}", 0), 2);
    /* content, not calls: text, unknown names, bad arguments, trailing text, malformed JSON */
    static const struct { hearth_chat_tool_style st; const char *s; } no[] = {
        {L, ""}, {L, "   "}, {L, "Hello there"}, {L, "Sure: {\"name\": \"test\", \"parameters\": {}}"},
        {L, "{\"name\": \"nope\", \"parameters\": {}}"}, {L, "{\"name\": \"test\", \"parameters\": [1]}"},
        {L, "{\"name\": \"test\"}"}, {L, "{\"name\": 3, \"parameters\": {}}"}, {L, "{\"name\": \"test\", \"parameters\": {}} and more"},
        {L, "{\"name\": \"test\", \"parameters\": {"}, {L, "{\"name\": \"test\", \"parameters\": \"not json\"}"},
        {L, "<|python_tag|>"}, {L, "{\"name\": \"test\", \"parameters\": {}};"},
        {H, "no calls here"}, {H, "<tool_call>"}, {H, "<tool_call>{\"name\": \"test\", \"arguments\": {}}</tool_call> trailing"},
        {H, "<tool_call>{\"name\": \"test\"}</tool_call>"}, {H, "<tool_call>not json</tool_call>"},
        {H, "<tool_call>{\"name\": \"test\", \"arguments\": {}} junk</tool_call>"}, {H, "</tool_call><tool_call>"},
        {G, "{\"response\": \"hi\"}"}, {G, "{\"tool_call\": {\"name\": \"nope\", \"arguments\": {}}}"},
        {G, "{\"tool_calls\": []}"}, {G, "{\"tool_calls\": [{\"name\": \"test\", \"arguments\": {}}, 7]}"},
        {G, "{\"tool_call\": {\"name\": \"test\", \"arguments\": {}}} extra"}, {G, "{\"tool_call\": "}, {G, "[]"},
        {G, "{\"tool_call\": {\"name\": \"test\", \"arguments\": null}}"},
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECK_MSG(parse(no[i].st, no[i].s, NULL, NULL, 0) == 0, "case %zu [%s] read as a call", i, no[i].s);
    /* not NUL-terminated: a length that cuts the object is no call */
    const char *s = "{\"name\": \"test\", \"parameters\": {}}";
    hearth_tool_parse p;
    CHECK_EQ_INT(hearth_tools_parse_output(L, NAMES, 2, s, strlen(s) - 1, &p), 0);
    hearth_tool_parse_deinit(&p);
}

/* Feeds pieces; returns what went out as content, joined. */
static void feed(hearth_tool_set *ts, const char *const *pieces, char *sent, size_t size)
{
    sent[0] = 0;
    for (int i = 0; pieces[i]; i++) {
        size_t ready = 0;
        CHECK_EQ_INT(hearth_tools_stream_feed(ts, pieces[i], strlen(pieces[i]), &ready), HEARTH_OK);
        strncat(sent, ts->held.data, ready < size - strlen(sent) - 1 ? ready : size - strlen(sent) - 1);
        hearth_buf_consume(&ts->held, ready);
    }
}

static void test_stream_hold(void)
{
    char list[2048], sent[256];
    snprintf(list, sizeof list, "[%s]", TEST_TOOL);
    hearth_err err;
    hearth_tool_set *ts = NULL;
    /* llama3: text goes out at once; a '{' first is held to the end */
    CHECK_EQ_INT(from(list, NULL, HEARTH_TMPL_LLAMA3, &ts, &err), HEARTH_OK);
    feed(ts, (const char *const[]){" ", "Hello", " {x}", NULL}, sent, sizeof sent);
    CHECK(!strcmp(sent, " Hello {x}") && ts->state == HEARTH_TOOL_CONTENT);
    hearth_tool_set_free(ts);
    CHECK_EQ_INT(from(list, NULL, HEARTH_TMPL_LLAMA3, &ts, &err), HEARTH_OK);
    feed(ts, (const char *const[]){"\n", "<|python", "_tag|>", "{\"name\"", NULL}, sent, sizeof sent);
    CHECK(!strcmp(sent, "") && ts->state == HEARTH_TOOL_CALL && !strcmp(ts->held.data, "\n<|python_tag|>{\"name\""));
    hearth_tool_set_free(ts);
    /* hermes: text before the tag goes out, a partial tag waits */
    CHECK_EQ_INT(from(list, NULL, HEARTH_TMPL_CHATML, &ts, &err), HEARTH_OK);
    feed(ts, (const char *const[]){"Let me see <to", NULL}, sent, sizeof sent);
    CHECK(!strcmp(sent, "Let me see ") && ts->state == HEARTH_TOOL_UNDECIDED);
    feed(ts, (const char *const[]){"ol_call>{", NULL}, sent, sizeof sent);
    CHECK(!strcmp(sent, "") && ts->state == HEARTH_TOOL_CALL && !strcmp(ts->held.data, "<tool_call>{"));
    hearth_tool_set_free(ts);
    CHECK_EQ_INT(from(list, NULL, HEARTH_TMPL_CHATML, &ts, &err), HEARTH_OK);
    feed(ts, (const char *const[]){"a <tox", "y", NULL}, sent, sizeof sent);
    CHECK(!strcmp(sent, "a <toxy"));
    hearth_tool_set_free(ts);
    /* forced: everything held */
    CHECK_EQ_INT(from(list, "\"required\"", HEARTH_TMPL_GEMMA, &ts, &err), HEARTH_OK);
    feed(ts, (const char *const[]){"Hello", NULL}, sent, sizeof sent);
    CHECK(!strcmp(sent, "") && ts->held.len == 5);
    hearth_tool_set_free(ts);
}

static void test_print_and_messages(void)
{
    cJSON *v = cJSON_Parse("{\"a\": [1, 2.5, -0.1, 1e300, \"x\\u00e9\\\"\"], \"b\": {}, \"c\": [], \"d\": null, \"e\": true}");
    hearth_buf b;
    hearth_buf_init(&b, 4096);
    CHECK_EQ_INT(hearth_tools_print_json(v, 0, &b), HEARTH_OK);
    CHECK_MSG(b.data && !strcmp(b.data, "{\"a\": [1, 2.5, -0.1, 1e+300, \"x\xc3\xa9\\\"\"], \"b\": {}, \"c\": [], \"d\": null, \"e\": true}"),
              "[%s]", b.data);
    hearth_buf_reset(&b, 0);
    CHECK_EQ_INT(hearth_tools_print_json(v, 2, &b), HEARTH_OK);
    CHECK(b.data && !strncmp(b.data, "{\n  \"a\": [\n    1,\n    2.5,", strlen("{\n  \"a\": [\n    1,\n    2.5,")) && strstr(b.data, "\"b\": {},\n  \"c\": [],"));
    hearth_buf_deinit(&b);
    cJSON_Delete(v);

    cJSON *msgs = cJSON_Parse("[{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", "
                              "\"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\"}\"}}]}, "
                              "{\"role\": \"tool\", \"tool_call_id\": \"call_1\", \"content\": \"sunny\"}, "
                              "{\"role\": \"tool\", \"tool_call_id\": \"call_9\", \"content\": \"?\"}]");
    hearth_chat_tool_call *calls = NULL;
    size_t n = 0;
    hearth_err err = {0};
    const cJSON *tc = cJSON_GetObjectItem(cJSON_GetArrayItem(msgs, 0), "tool_calls");
    CHECK_EQ_INT(hearth_tools_msg_calls(tc, 0, &calls, &n, &err), HEARTH_OK);
    CHECK(n == 1 && !strcmp(calls[0].name, "get_weather") && !strcmp(calls[0].arguments, "{\"city\": \"Paris\"}"));
    hearth_tools_msg_calls_free(calls, n);
    CHECK(hearth_tools_result_name(msgs, 1) && !strcmp(hearth_tools_result_name(msgs, 1), "get_weather"));
    CHECK(hearth_tools_result_name(msgs, 2) == NULL);
    cJSON_Delete(msgs);
    static const struct { const char *calls, *want; } bad[] = {
        {"{}", "must be a list"},
        {"[3]", "tool_calls[0] must be"},
        {"[{\"function\": {\"arguments\": \"{}\"}}]", "tool_calls[0].function.name"},
        {"[{\"function\": {\"name\": \"f\", \"arguments\": \"{nope\"}}]", "is not JSON"},
        {"[{\"function\": {\"name\": \"f\", \"arguments\": \"[1]\"}}]", "must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *c = cJSON_Parse(bad[i].calls);
        memset(&err, 0, sizeof err);
        CHECK_MSG(hearth_tools_msg_calls(c, 4, &calls, &n, &err) == HEARTH_EINVAL && strstr(err.msg, bad[i].want) &&
                      strstr(err.msg, "messages[4]"), "case %zu: %s", i, err.msg);
        cJSON_Delete(c);
    }
}

int main(void)
{
    RUN(test_request_fields);
    RUN(test_grammar);
    RUN(test_parse_output);
    RUN(test_stream_hold);
    RUN(test_print_and_messages);
    TEST_EXIT();
}

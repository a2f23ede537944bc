/* test_chat_tools.c: function calling in the chat templates
 * (src/text/chat_tools.c). The native formats against the official
 * templates (Qwen/Qwen2.5-7B-Instruct and meta-llama/Llama-3.3-70B-Instruct,
 * as llama.cpp's models/templates at c392e50 hold them) rendered by jinja2's
 * ImmutableSandboxedEnvironment (trim_blocks, lstrip_blocks, tojson with
 * sort_keys), for one conversation: a system prompt, a question, a call, its
 * result; tools_in_user_message false for llama3, as llama.cpp passes it.
 * The generic format is hearth's own: its structure is checked. */
#include "harness.h"
#include "text/chat_template.h"

#include <string.h>

static const hearth_chat_tool_call call_paris[] = {{"get_weather", "{\"city\": \"Paris\"}"}};

static const hearth_chat_msg conv[] = {
    {"system", "Be brief."},
    {"user", "Weather in Paris?"},
    {"assistant", "", call_paris, 1, NULL},
    {"tool", "sunny", NULL, 0, "get_weather"},
};

/* The tool as each template's tojson prints it (keys sorted, as jinja2's) */
static const char *const tool_line[] = {
    "{\"function\": {\"name\": \"get_weather\", \"parameters\": {\"properties\": {\"city\": {\"type\": \"string\"}}, "
    "\"required\": [\"city\"], \"type\": \"object\"}}, \"type\": \"function\"}"};
static const char *const tool_indent4[] = {
    "{\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"parameters\": {\n            \"properties\": "
    "{\n                \"city\": {\n                    \"type\": \"string\"\n                }\n            },\n   "
    "         \"required\": [\n                \"city\"\n            ],\n            \"type\": \"object\"\n        }\n "
    "   },\n    \"type\": \"function\"\n}"};

static const char qwen_want[] =
    "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{\"function\": "
    "{\"name\": \"get_weather\", \"parameters\": {\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
    "[\"city\"], \"type\": \"object\"}}, \"type\": \"function\"}\n</tools>\n\nFor each function call, return a json "
    "object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in "
    "Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

static const char llama3_want[] =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: "
    "December 2023\nToday Date: 26 Jul 2024\n\nYou have access to the following functions. To call a function, "
    "please respond with JSON for a function call.Respond in the format {\"name\": function name, \"parameters\": "
    "dictionary of argument name and its value}.Do not use variables.\n\n{\n    \"function\": {\n        \"name\": "
    "\"get_weather\",\n        \"parameters\": {\n            \"properties\": {\n                \"city\": {\n        "
    "            \"type\": \"string\"\n                }\n            },\n            \"required\": [\n             "
    "   \"city\"\n            ],\n            \"type\": \"object\"\n        }\n    },\n    \"type\": \"function\"\n}"
    "\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|><|start_header_id|>"
    "assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|><|start_"
    "header_id|>ipython<|end_header_id|>\n\n\"sunny\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";

static char *render(hearth_chat_template_kind k, const hearth_chat_msg *m, size_t n, const char *const *tools,
                    size_t n_tools, const char *bos, hearth_err *err)
{
    hearth_buf b;
    hearth_buf_init(&b, 1 << 20);
    if (hearth_chat_template_render_tools(k, m, n, tools, n_tools, true, bos, &b, err)) {
        hearth_buf_deinit(&b);
        return NULL;
    }
    return b.data;
}

static void test_native_formats(void)
{
    hearth_err err = {0};
    char *got = render(HEARTH_TMPL_CHATML, conv, 4, tool_line, 1, NULL, &err);
    CHECK_MSG(got && !strcmp(got, qwen_want), "chatml: %s\n  got  [%s]", err.msg, got ? got : "");
    free(got);
    got = render(HEARTH_TMPL_LLAMA3, conv, 4, tool_indent4, 1, "<|begin_of_text|>", &err);
    CHECK_MSG(got && !strcmp(got, llama3_want), "llama3: %s\n  got  [%s]", err.msg, got ? got : "");
    free(got);
    CHECK_EQ_INT(hearth_chat_template_tool_style(HEARTH_TMPL_CHATML), HEARTH_TOOLS_HERMES);
    CHECK_EQ_INT(hearth_chat_template_tool_style(HEARTH_TMPL_LLAMA3), HEARTH_TOOLS_LLAMA3);
    CHECK_EQ_INT(hearth_chat_template_tool_style(HEARTH_TMPL_GEMMA), HEARTH_TOOLS_GENERIC);
    CHECK_EQ_INT(hearth_chat_template_tool_indent(HEARTH_TMPL_LLAMA3), 4);
    CHECK_EQ_INT(hearth_chat_template_tool_indent(HEARTH_TMPL_CHATML), 0);
}

/* gemma (strict: system folded into the first user turn, turns alternate):
 * the tools in that first turn, the call as the assistant's JSON, two
 * results merged into one user turn. */
static void test_generic_format(void)
{
    static const hearth_chat_tool_call two[] = {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_time", "{}"}};
    const hearth_chat_msg m[] = {
        {"user", "Weather and time in Paris?"},
        {"assistant", "Let me look.", two, 2, NULL},
        {"tool", "sunny", NULL, 0, "get_weather"},
        {"tool", "say \"noon\"\n", NULL, 0, NULL},
    };
    hearth_err err = {0};
    char *got = render(HEARTH_TMPL_GEMMA, m, 4, tool_line, 1, "<bos>", &err);
    CHECK_MSG(got != NULL, "gemma: %s", err.msg);
    if (got) {
        CHECK(!strncmp(got, "<bos><start_of_turn>user\nYou can call the following tools, each given as JSON:\n{\"function\"", 87));
        CHECK(strstr(got, "Otherwise, answer the user directly.\n\nWeather and time in Paris?<end_of_turn>\n") != NULL);
        CHECK(strstr(got, "<start_of_turn>model\nLet me look.\n{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": "
                          "{\"city\": \"Paris\"}}, {\"name\": \"get_time\", \"arguments\": {}}]}<end_of_turn>\n") != NULL);
        CHECK_MSG(strstr(got, "<start_of_turn>user\n{\"tool_response\": {\"tool\": \"get_weather\", \"content\": \"sunny\"}}\n"
                              "{\"tool_response\": {\"content\": \"say \\\"noon\\\"\\n\"}}<end_of_turn>\n<start_of_turn>model\n") != NULL,
                  "[%s]", got);
    }
    free(got);
    /* one call: the single form */
    const hearth_chat_msg one[] = {{"user", "Paris?"}, {"assistant", "", call_paris, 1, NULL}};
    got = render(HEARTH_TMPL_MISTRAL, one, 2, NULL, 0, "<s>", &err);
    CHECK_MSG(got && !strcmp(got, "<s>[INST] Paris?[/INST] {\"tool_call\": {\"name\": \"get_weather\", \"arguments\": "
                                  "{\"city\": \"Paris\"}}}</s>"), "[%s]", got ? got : err.msg);
    free(got);
}

static void test_without_tools_is_render(void)
{
    const hearth_chat_msg m[] = {{"system", "S"}, {"user", " hi "}, {"assistant", "yo"}, {"user", "more"}};
    for (int k = 0; k < HEARTH_TMPL_COUNT_; k++) {
        hearth_err err = {0};
        hearth_buf want;
        hearth_buf_init(&want, 1 << 20);
        CHECK_EQ_INT(hearth_chat_template_render(k, m, 4, true, "<s>", &want, &err), HEARTH_OK);
        char *got = render(k, m, 4, NULL, 0, "<s>", &err);
        CHECK_MSG(got && want.data && !strcmp(got, want.data), "%s", hearth_chat_template_name(k));
        free(got);
        hearth_buf_deinit(&want);
    }
}

static void test_errors(void)
{
    hearth_err err = {0};
    CHECK(render(HEARTH_TMPL_CHATML, conv, 0, tool_line, 1, NULL, &err) == NULL && err.code == HEARTH_EINVAL);
    /* a result where gemma wants the assistant: the lowered turns break alternation */
    const hearth_chat_msg bad[] = {{"user", "a"}, {"tool", "r"}};
    memset(&err, 0, sizeof err);
    CHECK(render(HEARTH_TMPL_GEMMA, bad, 2, NULL, 0, NULL, &err) == NULL && err.code == HEARTH_EINVAL);
    const hearth_chat_msg nocontent[] = {{"user", "a"}, {"tool", NULL}};
    memset(&err, 0, sizeof err);
    CHECK(render(HEARTH_TMPL_CHATML, nocontent, 2, NULL, 0, NULL, &err) == NULL && err.code == HEARTH_EINVAL);
    /* "ipython" is llama3's alone */
    const hearth_chat_msg ipy[] = {{"user", "a"}, {"ipython", "r"}};
    memset(&err, 0, sizeof err);
    CHECK(render(HEARTH_TMPL_CHATML, ipy, 2, NULL, 0, NULL, &err) == NULL && err.code == HEARTH_EINVAL);
    /* past the bound: ELIMIT, out untouched */
    hearth_buf small;
    hearth_buf_init(&small, 64);
    CHECK_EQ_INT(hearth_chat_template_render_tools(HEARTH_TMPL_CHATML, conv, 4, tool_line, 1, true, NULL, &small, &err),
                 HEARTH_ELIMIT);
    CHECK(small.len == 0);
    hearth_buf_deinit(&small);
}

int main(void)
{
    RUN(test_native_formats);
    RUN(test_generic_format);
    RUN(test_without_tools_is_render);
    RUN(test_errors);
    TEST_EXIT();
}

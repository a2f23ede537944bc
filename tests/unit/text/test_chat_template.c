/* test_chat_template.c: the built-in chat templates, byte for byte, against
 * two independent references: each family's official Jinja template rendered
 * by jinja2 (chat_template_golden.h, from chat_template_golden.py), and the
 * expected outputs in llama.cpp's tests/test-chat-template.cpp. Detection is
 * tested on template texts and on the one stored in a real GGUF file. */
#include "harness.h"
#include "models/gguf.h"
#include "text/chat_template.h"
#include "unit/text/chat_template_golden.h"

#define MAX_PROMPT (1u << 20)

static const hearth_chat_msg conv_one[] = {{"user", "Hello"}};
/* chat_template_golden.py's "multi": leading/trailing spaces show which
 * families trim which turns. */
static const hearth_chat_msg conv_multi[] = {
    {"system", "You are a helpful assistant"},
    {"user", " Hello"},
    {"assistant", "  Hi there\n"},
    {"user", "Who are you? "},
};

/* Renders and returns the text (static storage), or NULL with err set. */
static const char *render(hearth_chat_template_kind k, const hearth_chat_msg *m, size_t n, bool gen,
                          const char *bos, hearth_err *err)
{
    static hearth_buf b;
    hearth_buf_deinit(&b);
    hearth_buf_init(&b, MAX_PROMPT);
    int rc = hearth_chat_template_render(k, m, n, gen, bos, &b, err);
    if (rc)
        return NULL;
    return b.data ? b.data : "";
}

static void free_render(void) { render(HEARTH_TMPL_CHATML, NULL, 0, false, NULL, NULL); }

static void test_official_templates(void)
{
    int seen[HEARTH_TMPL_COUNT_] = {0};
    for (size_t i = 0; i < sizeof goldens / sizeof goldens[0]; i++) {
        const struct golden *g = &goldens[i];
        hearth_chat_template_kind k;
        CHECK_EQ_INT(hearth_chat_template_by_name(g->family, &k), HEARTH_OK);
        seen[k]++;
        bool one = strcmp(g->conv, "one") == 0;
        hearth_err err = {0};
        const char *got = render(k, one ? conv_one : conv_multi, one ? 1 : 4, g->gen, g->bos, &err);
        CHECK_MSG(got != NULL, "%s/%s: %s", g->family, g->conv, err.msg);
        if (got)
            CHECK_MSG(strcmp(got, g->want) == 0, "%s/%s gen=%d:\n  got  [%s]\n  want [%s]", g->family, g->conv,
                      g->gen, got, g->want);
    }
    /* command-r follows llama.cpp's built-in, not Cohere's template (whose
     * default preamble no server writes): test_command_r has its cases */
    for (int k = 0; k < HEARTH_TMPL_COUNT_; k++)
        if (k != HEARTH_TMPL_COMMAND_R)
            CHECK_MSG(seen[k] == 4, "%s: %d golden cases", hearth_chat_template_name(k), seen[k]);
    free_render();
}

/* llama.cpp tests/test-chat-template.cpp (ggml-org/llama.cpp): its
 * conversation, add_generation_prompt on, bos_token "". */
static const hearth_chat_msg conv_llamacpp[] = {
    {"system", "You are a helpful assistant"},
    {"user", "Hello"},
    {"assistant", "Hi there"},
    {"user", "Who are you"},
    {"assistant", "   I am an assistant   "},
    {"user", "Another question"},
};

static void test_llamacpp_outputs(void)
{
    static const struct {
        hearth_chat_template_kind k;
        const char *source; /* the test case in test-chat-template.cpp */
        const char *want;
    } cases[] = {
        {HEARTH_TMPL_CHATML, "teknium/OpenHermes-2.5-Mistral-7B, expected_output",
         "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
         "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
         "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n"
         "<|im_start|>assistant\n"},
        {HEARTH_TMPL_LLAMA3, "Llama-3, expected_output",
         "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
         "Hi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n"},
        {HEARTH_TMPL_PHI3, "Phi-3-small, expected_output",
         "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
         "<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother "
         "question<|end|>\n<|assistant|>\n"},
        {HEARTH_TMPL_GEMMA, "google/gemma-7b-it, expected_output",
         "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
         "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
         "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
        {HEARTH_TMPL_MISTRAL,
         "Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start), "
         "expected_output",
         "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an "
         "assistant</s>[INST] Another question[/INST]"},
        {HEARTH_TMPL_LLAMA2,
         "bofenghuang/vigogne-2-70b-chat, expected_output_jinja (Llama-2-chat's layout with strip(); with "
         "bos_token \"\" it equals Llama-2-chat's own)",
         "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s>[INST] Who are you "
         "[/INST] I am an assistant </s>[INST] Another question [/INST]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hearth_err err = {0};
        const char *got = render(cases[i].k, conv_llamacpp, 6, true, NULL, &err);
        CHECK_MSG(got != NULL, "%s", err.msg);
        if (got)
            CHECK_MSG(strcmp(got, cases[i].want) == 0, "%s:\n  got  [%s]\n  want [%s]", cases[i].source, got,
                      cases[i].want);
        /* "" writes no BOS either */
        got = render(cases[i].k, conv_llamacpp, 6, true, "", &err);
        CHECK(got && strcmp(got, cases[i].want) == 0);
    }
    free_render();
}

static void test_detect(void)
{
    static const struct {
        const char *name, *src;
        int rc;
        hearth_chat_template_kind k;
    } cases[] = {
        /* template texts as in llama.cpp's test-chat-template.cpp and the models' tokenizer_config.json */
        {"OpenHermes-2.5",
         "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
         HEARTH_OK, HEARTH_TMPL_CHATML},
        {"Meta-Llama-3-8B-Instruct",
         "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
         "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
         "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
         "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
         "{% endif %}",
         HEARTH_OK, HEARTH_TMPL_LLAMA3},
        {"Phi-3-mini-4k-instruct",
         "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + "
         "'<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}"
         "{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}"
         "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}"
         "{% endif %}",
         HEARTH_OK, HEARTH_TMPL_PHI3},
        {"gemma-7b-it",
         "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
         "{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}"
         "{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | "
         "trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}"
         "{% endif %}",
         HEARTH_OK, HEARTH_TMPL_GEMMA},
        {"Mistral-7B-Instruct-v0.3 (excerpt)",
         "{{- bos_token }}{%- for message in loop_messages %}{%- if message[\"role\"] == \"user\" %}"
         "{{- \"[AVAILABLE_TOOLS] [\" }}{{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}{%- elif "
         "message[\"role\"] == \"assistant\" %}{{- \" \" + message[\"content\"]|trim + eos_token}}{%- endif %}"
         "{%- endfor %}",
         HEARTH_OK, HEARTH_TMPL_MISTRAL},
        {"Llama-2-7b-chat-hf (excerpt)",
         "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
         "'\\n<</SYS>>\\n\\n' + message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + "
         "'[INST] ' + content.strip() + ' [/INST]' }}{% endif %}",
         HEARTH_OK, HEARTH_TMPL_LLAMA2},
        {"phi-4 (chatml tokens, other layout)",
         "{% for message in messages %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}"
         "{% endfor %}",
         HEARTH_ENOTFOUND, 0},
        {"Mistral-Large-2411 (v7)", "{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}"
                                    "{{ '[INST] ' + message['content'] + '[/INST]' }}",
         HEARTH_ENOTFOUND, 0},
        {"unknown", "{% for message in messages %}{{ message['content'] }}{% endfor %}", HEARTH_ENOTFOUND, 0},
        {"empty", "", HEARTH_ENOTFOUND, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hearth_chat_template_kind k = HEARTH_TMPL_COUNT_;
        int rc = hearth_chat_template_detect(cases[i].src, strlen(cases[i].src), &k);
        CHECK_MSG(rc == cases[i].rc, "%s: rc %d", cases[i].name, rc);
        if (rc == HEARTH_OK && cases[i].rc == HEARTH_OK)
            CHECK_MSG(k == cases[i].k, "%s: detected %s", cases[i].name, hearth_chat_template_name(k));
    }
    /* the length is honoured: the marker past len is not seen */
    hearth_chat_template_kind k;
    const char *s = "abc<|im_start|>";
    CHECK_EQ_INT(hearth_chat_template_detect(s, 3, &k), HEARTH_ENOTFOUND);
    CHECK_EQ_INT(hearth_chat_template_detect(NULL, 0, &k), HEARTH_ENOTFOUND);
}

/* The template llama.cpp's converter stored in ggml-vocab-phi-3.gguf (an
 * early Phi-3-mini one: no system role, "{{ bos_token }}" first). */
static void test_detect_gguf(void)
{
    char path[512];
    if (!hearth_test_shared_path(path, sizeof path, "vocab/ggml-vocab-phi-3.gguf"))
        return;
    hearth_gguf g = {0};
    hearth_err err = {0};
    int rc = hearth_gguf_open(&g, path, &err);
    CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    const char *src = NULL;
    size_t len = 0;
    if (!rc) {
        rc = hearth_gguf_get_str(&g, "tokenizer.chat_template", &src, &len, &err);
        CHECK_MSG(rc == HEARTH_OK, "%s", err.msg);
    }
    if (!rc) {
        CHECK(len > 100);
        hearth_chat_template_kind k = HEARTH_TMPL_COUNT_;
        CHECK_EQ_INT(hearth_chat_template_detect(src, len, &k), HEARTH_OK);
        CHECK_EQ_STR(hearth_chat_template_name(k), "phi3");
    }
    hearth_gguf_close(&g);
}

static void test_names(void)
{
    static const char *const all[] = {"chatml", "llama3", "phi3", "gemma", "mistral", "llama2", "command-r"};
    for (size_t i = 0; i < 7; i++) {
        hearth_chat_template_kind k;
        CHECK_EQ_INT(hearth_chat_template_by_name(all[i], &k), HEARTH_OK);
        CHECK_EQ_STR(hearth_chat_template_name(k), all[i]);
    }
    hearth_chat_template_kind k;
    CHECK_EQ_INT(hearth_chat_template_by_name("ChatML", &k), HEARTH_ENOTFOUND);
    CHECK_EQ_INT(hearth_chat_template_by_name("llama", &k), HEARTH_ENOTFOUND);
    CHECK_EQ_INT(hearth_chat_template_by_name(NULL, &k), HEARTH_ENOTFOUND);
    CHECK_EQ_STR(hearth_chat_template_name((hearth_chat_template_kind)99), "?");
}

/* command-r as llama.cpp's built-in writes it (src/llama-chat.cpp at
 * c392e50; its server test test_apply_chat_template holds the same text),
 * and detected from the markers of Cohere's template. */
static void test_command_r(void)
{
    const hearth_chat_msg m[] = {{"system", "You are a test."}, {"user", " Hi there\n"}, {"assistant", "Hello"},
                                 {"user", "Again"}};
    hearth_buf b;
    hearth_buf_init(&b, 4096);
    hearth_err err = {0};
    CHECK_EQ_INT(hearth_chat_template_render(HEARTH_TMPL_COMMAND_R, m, 2, true, "<BOS_TOKEN>", &b, &err), HEARTH_OK);
    CHECK_EQ_STR(b.data, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|>"
                         "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>"
                         "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
    hearth_buf_reset(&b, 4096);
    CHECK_EQ_INT(hearth_chat_template_render(HEARTH_TMPL_COMMAND_R, m, 4, false, NULL, &b, &err), HEARTH_OK);
    CHECK_EQ_STR(b.data, "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a test.<|END_OF_TURN_TOKEN|>"
                         "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there<|END_OF_TURN_TOKEN|>"
                         "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hello<|END_OF_TURN_TOKEN|>"
                         "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Again<|END_OF_TURN_TOKEN|>");
    hearth_buf_deinit(&b);
    static const char src[] = "{{ bos_token }}{% for message in loop_messages %}<|START_OF_TURN_TOKEN|>"
                              "{% if message['role'] == 'user' %}<|USER_TOKEN|>{% endif %}{% endfor %}";
    hearth_chat_template_kind k = HEARTH_TMPL_COUNT_;
    CHECK_EQ_INT(hearth_chat_template_detect(src, sizeof src - 1, &k), HEARTH_OK);
    CHECK_EQ_STR(hearth_chat_template_name(k), "command-r");
}

/* Renders into a buffer that already holds "prefix" and checks the result
 * code, and on failure that the buffer was left as it was. */
static int render_keep(hearth_chat_template_kind k, const hearth_chat_msg *m, size_t n, size_t max, hearth_err *err)
{
    hearth_buf b;
    hearth_buf_init(&b, max);
    hearth_buf_appends(&b, "prefix");
    int rc = hearth_chat_template_render(k, m, n, true, "<s>", &b, err);
    if (rc) {
        CHECK_EQ_INT(b.len, 6);
        CHECK_EQ_STR(b.data, "prefix");
        CHECK(err->msg[0] != 0);
    } else {
        CHECK(b.len > 6 && memcmp(b.data, "prefix", 6) == 0);
    }
    hearth_buf_deinit(&b);
    return rc;
}

static void test_errors(void)
{
    hearth_err err = {0};
    const hearth_chat_msg tool[] = {{"user", "hi"}, {"tool", "42"}};
    const hearth_chat_msg no_content[] = {{"user", NULL}};
    const hearth_chat_msg no_role[] = {{NULL, "x"}};
    const hearth_chat_msg two_users[] = {{"user", "a"}, {"user", "b"}};
    const hearth_chat_msg late_system[] = {{"user", "a"}, {"assistant", "b"}, {"system", "c"}, {"user", "d"}};
    const hearth_chat_msg system_only[] = {{"system", "s"}};
    const hearth_chat_msg starts_assistant[] = {{"assistant", "a"}, {"user", "b"}};
    for (int k = 0; k < HEARTH_TMPL_COUNT_; k++) {
        CHECK_EQ_INT(render_keep(k, tool, 2, MAX_PROMPT, &err), HEARTH_EINVAL);
        CHECK(strstr(err.msg, "message 1") && strstr(err.msg, "'tool'"));
        CHECK_EQ_INT(render_keep(k, no_content, 1, MAX_PROMPT, &err), HEARTH_EINVAL);
        CHECK_EQ_INT(render_keep(k, no_role, 1, MAX_PROMPT, &err), HEARTH_EINVAL);
        CHECK_EQ_INT(render_keep(k, conv_one, 0, MAX_PROMPT, &err), HEARTH_EINVAL);
        /* too long for the buffer: the buffer is left as it was */
        CHECK_EQ_INT(render_keep(k, conv_multi, 4, 40, &err), HEARTH_ELIMIT);
        /* order rules only where the official template enforces them */
        bool strict = k == HEARTH_TMPL_GEMMA || k == HEARTH_TMPL_MISTRAL || k == HEARTH_TMPL_LLAMA2;
        int want = strict ? HEARTH_EINVAL : HEARTH_OK;
        CHECK_EQ_INT(render_keep(k, two_users, 2, MAX_PROMPT, &err), want);
        CHECK_EQ_INT(render_keep(k, late_system, 4, MAX_PROMPT, &err), want);
        CHECK_EQ_INT(render_keep(k, system_only, 1, MAX_PROMPT, &err), want);
        CHECK_EQ_INT(render_keep(k, starts_assistant, 2, MAX_PROMPT, &err), want);
    }
    CHECK_EQ_INT(hearth_chat_template_render(HEARTH_TMPL_COUNT_, conv_one, 1, true, NULL, NULL, &err),
                 HEARTH_EINVAL);
}

/* Conversations ending with an assistant turn (a prefill the model should
 * continue) and a whitespace-only turn under llama2's strip(). */
static void test_edges(void)
{
    hearth_err err = {0};
    const hearth_chat_msg ends_assistant[] = {{"user", "Hi"}, {"assistant", "Sure, "}};
    const char *got = render(HEARTH_TMPL_CHATML, ends_assistant, 2, false, NULL, &err);
    CHECK(got && strcmp(got, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nSure, <|im_end|>\n") == 0);
    /* Llama-2-chat strips "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content as
     * one string: an empty user turn leaves the block's trailing newlines stripped. */
    const hearth_chat_msg blank[] = {{"system", "S"}, {"user", " \n "}};
    got = render(HEARTH_TMPL_LLAMA2, blank, 2, true, "<s>", &err);
    CHECK(got && strcmp(got, "<s>[INST] <<SYS>>\nS\n<</SYS>> [/INST]") == 0);
    free_render();
}

int main(void)
{
    RUN(test_official_templates);
    RUN(test_llamacpp_outputs);
    RUN(test_detect);
    RUN(test_detect_gguf);
    RUN(test_names);
    RUN(test_command_r);
    RUN(test_errors);
    RUN(test_edges);
    TEST_EXIT();
}

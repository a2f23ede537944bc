/* chat_tools.c: function calling in the chat templates (chat_template.h,
 * "tools"): the tools offered in the family's words, the calls an assistant
 * turn made and the results of "tool" turns, each in the family's format.
 *
 * How: the conversation is lowered to the plain turns the family renderers
 * of chat_template.c already write (system, user, assistant; llama3's
 * "ipython"), then rendered by them, so the layouts stay in one place and
 * the strict families' order rules apply to the lowered turns (a result is
 * a user turn, so user, assistant-that-calls, results, assistant alternate).
 *
 * The native formats follow the official templates:
 *   llama3  meta-llama/Llama-3.3-70B-Instruct (the 3.1 layout) with the
 *           tools in the system turn, as llama.cpp renders it
 *           (tools_in_user_message false): "Environment: ipython", the
 *           template's default dates, the instruction, each tool as
 *           tojson(indent=4); a call {"name": ..., "parameters": ...};
 *           results as "ipython" turns.
 *   hermes  Qwen/Qwen2.5-7B-Instruct (Hermes 2 Pro's format): the system
 *           turn's "# Tools" block (without Qwen's default system prompt
 *           when the conversation has none, as chatml here never adds it);
 *           calls as <tool_call> blocks after the turn's text; consecutive
 *           results as <tool_response> blocks of one user turn.
 * The generic format is hearth's own, for families whose templates have
 * no tool format (gemma, mistral v0.3, llama2, phi3, command-r without its
 * tool template): a short instruction and the tools as JSON in the system
 * prompt, a call as the whole answer in JSON (the shape llama.cpp's generic
 * format uses), results as JSON user turns.
 *
 * Deliberate differences from the official templates: the llama3 system
 * turn is trimmed as every llama3 turn is here (so with no system message
 * its last tool's "\n\n" is dropped); several calls in one llama3 turn are
 * written one per line (Meta's template refuses them); a llama3 result is a
 * JSON string as tojson writes it, but with UTF-8 kept (Python escapes it).
 * Role errors name a message of the lowered conversation.
 *
 * Rejected: rendering tools inside each family's renderer (every layout
 * would grow a second path; lowering keeps them as they were). */
#include "text/chat_template.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hearth_chat_tool_style hearth_chat_template_tool_style(hearth_chat_template_kind k)
{
    if (k == HEARTH_TMPL_LLAMA3)
        return HEARTH_TOOLS_LLAMA3;
    if (k == HEARTH_TMPL_CHATML)
        return HEARTH_TOOLS_HERMES;
    return HEARTH_TOOLS_GENERIC;
}

int hearth_chat_template_tool_indent(hearth_chat_template_kind k) { return k == HEARTH_TMPL_LLAMA3 ? 4 : 0; }

static const char LLAMA3_TOOLS[] =
    "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
    "You have access to the following functions. To call a function, please respond with JSON for a function "
    "call.Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
    "value}.Do not use variables.\n\n";
static const char HERMES_TOOLS[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
static const char HERMES_TOOLS_END[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call>";
static const char GENERIC_TOOLS[] = "You can call the following tools, each given as JSON:";
static const char GENERIC_TOOLS_END[] =
    "\n\nTo call a tool, answer with nothing but one JSON object: {\"tool_call\": {\"name\": <the tool's name>, "
    "\"arguments\": <an object of its arguments>}}. Otherwise, answer the user directly.";

/* The lowered conversation: turns whose texts are in texts[] (owned). */
typedef struct lowered {
    hearth_chat_msg *m;
    size_t n;
    hearth_buf *texts; /* one per turn, for the turns whose text was built */
    size_t max;        /* each text's bound: the caller's output bound */
    int rc;            /* first append failure, sticky */
} lowered;

static void put(lowered *l, hearth_buf *b, const char *s, size_t n)
{
    if (!l->rc)
        l->rc = hearth_buf_append(b, s, n);
}

static void puts_(lowered *l, hearth_buf *b, const char *s) { put(l, b, s, strlen(s)); }

/* s as a JSON string: quotes, backslashes and control bytes escaped, the
 * rest (UTF-8 included) as it is. */
static void put_json_string(lowered *l, hearth_buf *b, const char *s)
{
    puts_(l, b, "\"");
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c, esc[2] = 0;
        } else if (c == '\n') {
            strcpy(esc, "\\n");
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
        } else {
            put(l, b, p, 1);
            continue;
        }
        puts_(l, b, esc);
    }
    puts_(l, b, "\"");
}

static void put_arguments(lowered *l, hearth_buf *b, const char *args)
{
    puts_(l, b, args && *args ? args : "{}");
}

static void put_call(lowered *l, hearth_buf *b, const hearth_chat_tool_call *tc, const char *args_key)
{
    puts_(l, b, "{\"name\": ");
    put_json_string(l, b, tc->name ? tc->name : "");
    puts_(l, b, args_key);
    put_arguments(l, b, tc->arguments);
    puts_(l, b, "}");
}

/* An assistant turn's text and calls, in style's format. */
static void assistant_calls(lowered *l, hearth_buf *b, hearth_chat_tool_style style, const hearth_chat_msg *m)
{
    puts_(l, b, m->content);
    if (style == HEARTH_TOOLS_GENERIC) {
        bool several = m->n_tool_calls > 1;
        puts_(l, b, b->len ? "\n" : "");
        puts_(l, b, several ? "{\"tool_calls\": [" : "{\"tool_call\": ");
        for (size_t j = 0; j < m->n_tool_calls; j++) {
            puts_(l, b, j ? ", " : "");
            put_call(l, b, &m->tool_calls[j], ", \"arguments\": ");
        }
        puts_(l, b, several ? "]}" : "}");
        return;
    }
    for (size_t j = 0; j < m->n_tool_calls; j++) {
        puts_(l, b, b->len ? "\n" : "");
        if (style == HEARTH_TOOLS_HERMES) {
            puts_(l, b, "<tool_call>\n");
            put_call(l, b, &m->tool_calls[j], ", \"arguments\": ");
            puts_(l, b, "\n</tool_call>");
        } else {
            put_call(l, b, &m->tool_calls[j], ", \"parameters\": ");
        }
    }
}

/* One result inside a merged user turn of results. */
static void tool_result(lowered *l, hearth_buf *b, hearth_chat_tool_style style, const hearth_chat_msg *m)
{
    if (b->len)
        puts_(l, b, "\n");
    if (style == HEARTH_TOOLS_HERMES) {
        puts_(l, b, "<tool_response>\n");
        puts_(l, b, m->content);
        puts_(l, b, "\n</tool_response>");
        return;
    }
    puts_(l, b, "{\"tool_response\": {");
    if (m->name) {
        puts_(l, b, "\"tool\": ");
        put_json_string(l, b, m->name);
        puts_(l, b, ", ");
    }
    puts_(l, b, "\"content\": ");
    put_json_string(l, b, m->content);
    puts_(l, b, "}}");
}

/* The system turn's text with the tools offered (sys: the conversation's
 * own system text, or NULL). */
static void system_with_tools(lowered *l, hearth_buf *b, hearth_chat_tool_style style, const char *sys,
                              const char *const *tools, size_t n_tools)
{
    if (style == HEARTH_TOOLS_LLAMA3) {
        puts_(l, b, LLAMA3_TOOLS);
        for (size_t i = 0; i < n_tools; i++) {
            puts_(l, b, tools[i]);
            puts_(l, b, "\n\n");
        }
        if (sys)
            puts_(l, b, sys);
        return;
    }
    if (sys && *sys) {
        puts_(l, b, sys);
        puts_(l, b, "\n\n");
    }
    puts_(l, b, style == HEARTH_TOOLS_HERMES ? HERMES_TOOLS : GENERIC_TOOLS);
    for (size_t i = 0; i < n_tools; i++) {
        puts_(l, b, "\n");
        puts_(l, b, tools[i]);
    }
    puts_(l, b, style == HEARTH_TOOLS_HERMES ? HERMES_TOOLS_END : GENERIC_TOOLS_END);
}

static bool is_tool(const hearth_chat_msg *m) { return m->role && strcmp(m->role, "tool") == 0; }

/* Builds l from msgs: at most n + 1 turns (a system turn added for the tools). */
static int lower(lowered *l, hearth_chat_template_kind k, const hearth_chat_msg *msgs, size_t n,
                 const char *const *tools, size_t n_tools, hearth_err *err)
{
    hearth_chat_tool_style style = hearth_chat_template_tool_style(k);
    size_t i = 0;
    if (n_tools) {
        bool has_sys = n && msgs[0].role && strcmp(msgs[0].role, "system") == 0;
        if (has_sys && !msgs[0].content)
            return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: message 0 has no content",
                                  hearth_chat_template_name(k));
        hearth_buf *b = &l->texts[l->n];
        system_with_tools(l, b, style, has_sys ? msgs[0].content : NULL, tools, n_tools);
        l->m[l->n++] = (hearth_chat_msg){.role = "system", .content = b->data ? b->data : ""};
        i = has_sys ? 1 : 0;
    }
    for (; i < n && !l->rc; i++) {
        const hearth_chat_msg *m = &msgs[i];
        if (!m->role || !m->content)
            return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: message %zu has no %s",
                                  hearth_chat_template_name(k), i, m->role ? "content" : "role");
        hearth_buf *b = &l->texts[l->n];
        if (is_tool(m) && style == HEARTH_TOOLS_LLAMA3) {
            put_json_string(l, b, m->content); /* Meta's template prints a result through tojson */
            l->m[l->n++] = (hearth_chat_msg){.role = "ipython", .content = b->data ? b->data : ""};
        } else if (is_tool(m)) {
            for (; i < n && is_tool(&msgs[i]); i++) {
                if (!msgs[i].content)
                    return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: message %zu has no content",
                                          hearth_chat_template_name(k), i);
                tool_result(l, b, style, &msgs[i]);
            }
            i--; /* the loop's increment moves past the last result */
            l->m[l->n++] = (hearth_chat_msg){.role = "user", .content = b->data ? b->data : ""};
        } else if (m->n_tool_calls && strcmp(m->role, "assistant") == 0) {
            assistant_calls(l, b, style, m);
            l->m[l->n++] = (hearth_chat_msg){.role = "assistant", .content = b->data ? b->data : ""};
        } else {
            l->m[l->n++] = (hearth_chat_msg){.role = m->role, .content = m->content};
        }
    }
    return l->rc;
}

int hearth_chat_template_render_tools(hearth_chat_template_kind k, const hearth_chat_msg *msgs, size_t n,
                                      const char *const *tools, size_t n_tools, bool add_generation_prompt,
                                      const char *bos_text, hearth_buf *out, hearth_err *err)
{
    if ((unsigned)k >= HEARTH_TMPL_COUNT_)
        return hearth_err_set(err, HEARTH_EINVAL, "chat template: unknown kind %d", (int)k);
    if (n == 0)
        return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: no messages", hearth_chat_template_name(k));
    lowered l = {.max = out->max};
    /* n is bounded by the request body that carried the messages */
    l.m = n < SIZE_MAX / sizeof *l.m - 1 ? calloc(n + 1, sizeof *l.m) : NULL;
    l.texts = l.m ? calloc(n + 1, sizeof *l.texts) : NULL;
    int rc;
    if (!l.texts) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "chat template %s: out of memory for %zu messages",
                            hearth_chat_template_name(k), n);
        goto done;
    }
    for (size_t i = 0; i <= n; i++)
        hearth_buf_init(&l.texts[i], out->max);
    rc = lower(&l, k, msgs, n, tools, n_tools, err);
    if (rc == HEARTH_ELIMIT)
        hearth_err_set(err, rc, "chat template %s: the prompt is longer than %zu bytes", hearth_chat_template_name(k),
                       out->max);
    else if (rc && !(err && err->code))
        hearth_err_set(err, rc, "chat template %s: out of memory for the prompt", hearth_chat_template_name(k));
    if (!rc)
        rc = hearth_chat_template_render(k, l.m, l.n, add_generation_prompt, bos_text, out, err);
done:
    for (size_t i = 0; l.texts && i <= n; i++)
        hearth_buf_deinit(&l.texts[i]);
    free(l.texts);
    free(l.m);
    return rc;
}

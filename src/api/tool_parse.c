/* tool_parse.c: the calls in a model's answer (hearth_tools_parse_output)
 * and the holding back of a streamed answer that may be one
 * (hearth_tools_stream_feed); see tool_calls.h.
 *
 * The answer is untrusted text (a model writes what it likes, and a
 * client's prompt can steer it): the parser reads it with cJSON's
 * length-bounded parse, never past n, and takes a call only when the whole
 * answer after its leading text is calls in the family's format, each of a
 * tool that was offered with arguments that are a JSON object. Anything
 * else is content, so a model that writes about JSON, or a malformed call,
 * is answered as the text it wrote rather than as a call that would fail
 * in the client.
 *
 * Streaming holds back exactly what could still be the start of a call:
 * for llama3 and generic, an answer whose first non-space byte is '{' (or
 * llama3's "<|python_tag|>") is held to the end; any other is streamed at
 * once. hermes calls may follow text, so only a tail that could be the
 * start of "<tool_call>" waits. The end parses what was held with the same
 * parser as a whole answer, so a stream and a whole answer agree.
 *
 * Rejected: regular expressions over the text (llama.cpp's way; a JSON
 * parser is what decides where a JSON object ends, strings with braces
 * included). */
#include "tool_calls.h"

#include <stdlib.h>
#include <string.h>

static const char PYTHON_TAG[] = "<|python_tag|>";
static const char OPEN[] = "<tool_call>";
static const char CLOSE[] = "</tool_call>";

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_space(const char *s, size_t at, size_t n)
{
    while (at < n && is_space(s[at]))
        at++;
    return at;
}

static bool starts(const char *s, size_t at, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    return n - at >= k && !memcmp(s + at, lit, k);
}

void hearth_tool_parse_deinit(hearth_tool_parse *p)
{
    for (int i = 0; p->calls && i < p->n_calls; i++) {
        free(p->calls[i].name);
        free(p->calls[i].arguments);
    }
    free(p->calls);
    memset(p, 0, sizeof *p);
}

/* Adds a call of name with args (an object, or a string holding one) when
 * name was offered: 1; 0 when not a call; HEARTH_ENOMEM. */
static int add_call(hearth_tool_parse *p, const char *const *names, int n_names, const cJSON *name, const cJSON *args)
{
    if (!cJSON_IsString(name))
        return 0;
    int k = 0;
    while (k < n_names && strcmp(names[k], name->valuestring))
        k++;
    if (k == n_names)
        return 0;
    cJSON *parsed = NULL;
    if (cJSON_IsString(args))
        args = parsed = cJSON_Parse(args->valuestring);
    if (!cJSON_IsObject(args)) {
        cJSON_Delete(parsed);
        return 0;
    }
    char *text = cJSON_PrintUnformatted(args);
    cJSON_Delete(parsed);
    hearth_tool_call_out *grown = text ? realloc(p->calls, ((size_t)p->n_calls + 1) * sizeof *grown) : NULL;
    char *nm = grown ? strdup(name->valuestring) : NULL;
    if (!nm) {
        if (grown)
            p->calls = grown;
        cJSON_free(text);
        return HEARTH_ENOMEM;
    }
    p->calls = grown;
    /* cJSON's allocator is malloc here (cJSON_InitHooks is never called), so free() takes it */
    p->calls[p->n_calls++] = (hearth_tool_call_out){.name = nm, .arguments = text};
    return 1;
}

/* One call object in style's shape: {"name", "parameters" | "arguments"} (llama3 may add "type": "function"). */
static int add_object(hearth_tool_parse *p, hearth_chat_tool_style style, const char *const *names, int n_names,
                      const cJSON *o)
{
    if (!cJSON_IsObject(o))
        return 0;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    if (!args && style == HEARTH_TOOLS_LLAMA3)
        args = cJSON_GetObjectItemCaseSensitive(o, "parameters");
    return add_call(p, names, n_names, cJSON_GetObjectItemCaseSensitive(o, "name"), args);
}

/* The JSON value at s[*at..n), *at moved past it; NULL when there is none. */
static cJSON *json_at(const char *s, size_t *at, size_t n)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s + *at, n - *at, &end, false);
    if (v)
        *at = (size_t)(end - s);
    return v;
}

static int parse_llama3(hearth_tool_parse *p, const char *const *names, int n_names, const char *s, size_t n)
{
    size_t at = skip_space(s, 0, n);
    if (starts(s, at, n, PYTHON_TAG))
        at += sizeof PYTHON_TAG - 1;
    int found = 0;
    for (;;) {
        at = skip_space(s, at, n);
        if (at == n)
            return found;
        if (found && s[at] == ';')
            at = skip_space(s, at + 1, n);
        if (at == n || s[at] != '{')
            return 0;
        cJSON *o = json_at(s, &at, n);
        int rc = add_object(p, HEARTH_TOOLS_LLAMA3, names, n_names, o);
        cJSON_Delete(o);
        if (rc <= 0)
            return rc;
        found++;
    }
}

static int parse_generic(hearth_tool_parse *p, const char *const *names, int n_names, const char *s, size_t n)
{
    size_t at = skip_space(s, 0, n);
    if (at == n || s[at] != '{')
        return 0;
    cJSON *o = json_at(s, &at, n);
    int rc = 0;
    if (o && skip_space(s, at, n) == n) {
        const cJSON *one = cJSON_GetObjectItemCaseSensitive(o, "tool_call");
        const cJSON *many = cJSON_GetObjectItemCaseSensitive(o, "tool_calls");
        if (one)
            rc = add_object(p, HEARTH_TOOLS_GENERIC, names, n_names, one);
        else if (cJSON_IsArray(many) && cJSON_GetArraySize(many) > 0)
            for (const cJSON *c = many->child; c && (rc = add_object(p, HEARTH_TOOLS_GENERIC, names, n_names, c)) > 0;)
                c = c->next;
    }
    cJSON_Delete(o);
    return rc > 0 ? p->n_calls : rc;
}

static int parse_hermes(hearth_tool_parse *p, const char *const *names, int n_names, const char *s, size_t n)
{
    const char *first = memmem(s, n, OPEN, sizeof OPEN - 1);
    if (!first)
        return 0;
    p->content_len = (size_t)(first - s);
    size_t at = p->content_len;
    while (at < n) {
        if (!starts(s, at, n, OPEN))
            return 0;
        at = skip_space(s, at + sizeof OPEN - 1, n);
        cJSON *o = at < n && s[at] == '{' ? json_at(s, &at, n) : NULL;
        int rc = add_object(p, HEARTH_TOOLS_HERMES, names, n_names, o);
        cJSON_Delete(o);
        if (rc <= 0)
            return rc;
        at = skip_space(s, at, n);
        if (starts(s, at, n, CLOSE))
            at = skip_space(s, at + sizeof CLOSE - 1, n);
        else if (at < n)
            return 0; /* the closing tag may be missing only at the end (the model stopped there) */
    }
    return p->n_calls;
}

int hearth_tools_parse_output(hearth_chat_tool_style style, const char *const *names, int n_names, const char *text,
                              size_t n, hearth_tool_parse *out)
{
    memset(out, 0, sizeof *out);
    int rc;
    if (style == HEARTH_TOOLS_LLAMA3)
        rc = parse_llama3(out, names, n_names, text, n);
    else if (style == HEARTH_TOOLS_HERMES)
        rc = parse_hermes(out, names, n_names, text, n);
    else
        rc = parse_generic(out, names, n_names, text, n);
    if (rc <= 0) {
        hearth_tool_parse_deinit(out);
        return rc;
    }
    return out->n_calls;
}

/* The length of the longest tail of s[0..n) that is a proper start of lit. */
static size_t partial_tail(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);
    for (size_t len = k - 1 < n ? k - 1 : n; len > 0; len--)
        if (!memcmp(s + n - len, lit, len))
            return len;
    return 0;
}

int hearth_tools_stream_feed(hearth_tool_set *ts, const char *text, size_t n, size_t *ready)
{
    *ready = 0;
    int rc = hearth_buf_append(&ts->held, text, n);
    if (rc)
        return rc;
    const char *s = ts->held.data;
    size_t len = ts->held.len;
    if (ts->choice != HEARTH_TOOL_AUTO)
        ts->state = HEARTH_TOOL_CALL;
    if (ts->state != HEARTH_TOOL_UNDECIDED) {
        *ready = ts->state == HEARTH_TOOL_CONTENT ? len : 0;
        return HEARTH_OK;
    }
    if (ts->style == HEARTH_TOOLS_HERMES) {
        const char *open = memmem(s, len, OPEN, sizeof OPEN - 1);
        if (open) {
            ts->state = HEARTH_TOOL_CALL;
            *ready = (size_t)(open - s);
        } else {
            *ready = len - partial_tail(s, len, OPEN);
        }
        return HEARTH_OK;
    }
    size_t at = skip_space(s, 0, len);
    if (at == len)
        return HEARTH_OK; /* spaces so far: a call may follow */
    size_t rest = len - at;
    size_t tag = sizeof PYTHON_TAG - 1;
    if (s[at] == '{' || (ts->style == HEARTH_TOOLS_LLAMA3 && rest >= tag && !memcmp(s + at, PYTHON_TAG, tag))) {
        ts->state = HEARTH_TOOL_CALL;
    } else if (ts->style == HEARTH_TOOLS_LLAMA3 && rest < tag && !memcmp(s + at, PYTHON_TAG, rest)) {
        ; /* a start of the tag: wait */
    } else {
        ts->state = HEARTH_TOOL_CONTENT;
        *ready = len;
    }
    return HEARTH_OK;
}

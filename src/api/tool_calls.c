/* tool_calls.c: a chat request's tools, tool_choice and parallel_tool_calls
 * (see tool_calls.h), the tools printed for the template, the grammar that
 * forces a call, and the tool_calls of the conversation's assistant turns.
 * The model's output is read by tool_parse.c.
 *
 * The forced grammar is written from a JSON schema of the call in the
 * family's format (the shape of the call, each tool's name as a const and
 * its parameters schema as the arguments), converted by json_schema_gbnf.c,
 * so the arguments obey the same schema subset a json_schema request does,
 * and a parameters schema the converter refuses is a 400 naming the tool.
 * hermes's tags are the one part outside JSON: the schema's rule is named
 * and wrapped.
 *
 * As llama-server: parallel_tool_calls is off unless asked for; "required"
 * with no tools is refused. Unlike it, "auto" constrains nothing (no lazy
 * grammar that wakes on a call's first bytes): the answer is parsed at the
 * end, so a model that writes a malformed call gets it back as text.
 *
 * Rejected: printing tools with cJSON_Print (tabs, and no space after ':'
 * and ','): the templates were trained on Python's json.dumps, which
 * hearth_tools_print_json writes. */
#include "tool_calls.h"
#include "json_schema_gbnf.h"

#include "base/random.h"
#include "net/server.h" /* hearth_json_quote */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- printing, as Python's json.dumps ---- */

static int print_number(double d, hearth_buf *out)
{
    if (!isfinite(d))
        return hearth_buf_appends(out, "null");
    if (d == floor(d) && fabs(d) < 1e15)
        return hearth_buf_printf(out, "%.0f", d);
    char s[32];
    for (int prec = 15; prec <= 17; prec++) { /* the shortest text that reads back as d, as repr() */
        snprintf(s, sizeof s, "%.*g", prec, d);
        if (strtod(s, NULL) == d)
            break;
    }
    return hearth_buf_appends(out, s);
}

static int print_value(const cJSON *v, int indent, int depth, hearth_buf *out)
{
    if (depth > 64)
        return HEARTH_ELIMIT; /* cJSON parsed it, so it nests less than cJSON's limit; this bounds the stack */
    if (cJSON_IsNull(v) || cJSON_IsInvalid(v))
        return hearth_buf_appends(out, "null");
    if (cJSON_IsTrue(v))
        return hearth_buf_appends(out, "true");
    if (cJSON_IsFalse(v))
        return hearth_buf_appends(out, "false");
    if (cJSON_IsNumber(v))
        return print_number(v->valuedouble, out);
    if (cJSON_IsString(v))
        return hearth_json_quote(out, v->valuestring, strlen(v->valuestring));
    bool obj = cJSON_IsObject(v);
    int rc = hearth_buf_appends(out, obj ? "{" : "[");
    int k = 0;
    for (const cJSON *c = v->child; c && !rc; c = c->next, k++) {
        if (k)
            rc = hearth_buf_appends(out, indent ? "," : ", ");
        if (!rc && indent)
            rc = hearth_buf_printf(out, "\n%*s", indent * (depth + 1), "");
        if (!rc && obj)
            rc = hearth_json_quote(out, c->string ? c->string : "", c->string ? strlen(c->string) : 0);
        if (!rc && obj)
            rc = hearth_buf_appends(out, ": ");
        if (!rc)
            rc = print_value(c, indent, depth + 1, out);
    }
    if (!rc && k && indent)
        rc = hearth_buf_printf(out, "\n%*s", indent * depth, "");
    if (!rc)
        rc = hearth_buf_appends(out, obj ? "}" : "]");
    return rc;
}

int hearth_tools_print_json(const cJSON *v, int indent, hearth_buf *out) { return print_value(v, indent, 0, out); }

/* ---- the request's fields ---- */

void hearth_tool_set_free(hearth_tool_set *ts)
{
    if (!ts)
        return;
    for (int i = 0; i < ts->n; i++) {
        free(ts->names[i]);
        free(ts->texts[i]);
    }
    free(ts->names);
    free(ts->texts);
    cJSON_Delete(ts->params);
    hearth_buf_deinit(&ts->held);
    free(ts);
}

/* OpenAI's rule for function names: 1 to 64 of a-z, A-Z, 0-9, '_' and '-'. */
static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* tools[i]: checked, its name, parameters and printed text into ts. */
static int read_tool(hearth_tool_set *ts, const cJSON *t, int i, hearth_err *err)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
    if (!cJSON_IsObject(t))
        return hearth_err_set(err, HEARTH_EINVAL, "tools[%d] must be an object {\"type\": \"function\", \"function\": {...}}", i);
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return hearth_err_set(err, HEARTH_EINVAL, "tools[%d].type must be \"function\" (the only tool type hearth calls)", i);
    if (!cJSON_IsObject(fn))
        return hearth_err_set(err, HEARTH_EINVAL, "tools[%d].function must be an object {\"name\", \"description\", \"parameters\"}", i);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(fn, "strict");
    if (!cJSON_IsString(name) || !valid_name(name->valuestring))
        return hearth_err_set(err, HEARTH_EINVAL, "tools[%d].function.name must be a string of 1 to 64 letters, digits, '_' or '-'", i);
    if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc))
        return hearth_err_set(err, HEARTH_EINVAL, "tools[%d].function.description must be a string", i);
    if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
        return hearth_err_set(err, HEARTH_EINVAL, "tools[%d].function.parameters must be an object (a JSON schema)", i);
    if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict))
        return hearth_err_set(err, HEARTH_EINVAL, "tools[%d].function.strict must be a boolean", i);
    for (int k = 0; k < i; k++)
        if (!strcmp(ts->names[k], name->valuestring))
            return hearth_err_set(err, HEARTH_EINVAL, "tools[%d].function.name '%s' is also tools[%d]'s", i, name->valuestring, k);
    /* no parameters: a function of no arguments */
    cJSON *p = cJSON_IsObject(params) ? cJSON_Duplicate(params, true) : cJSON_Parse("{\"type\":\"object\",\"properties\":{}}");
    hearth_buf text;
    hearth_buf_init(&text, (size_t)16 << 20);
    int rc = p && cJSON_AddItemToArray(ts->params, p) ? HEARTH_OK : HEARTH_ENOMEM;
    if (!rc)
        rc = hearth_tools_print_json(t, hearth_chat_template_tool_indent(ts->tmpl), &text);
    ts->names[i] = strdup(name->valuestring);
    if (!rc && (!ts->names[i] || !text.data))
        rc = HEARTH_ENOMEM;
    if (rc) {
        if (cJSON_GetArraySize(ts->params) <= i) /* p never joined the list */
            cJSON_Delete(p);
        free(ts->names[i]);
        ts->names[i] = NULL;
        hearth_buf_deinit(&text);
        return hearth_err_set(err, rc, "tools[%d]: out of memory", i);
    }
    ts->texts[i] = text.data; /* the buffer's memory is the text now */
    ts->n = i + 1;
    return HEARTH_OK;
}

/* tool_choice into ts; *none when it is "none". */
static int read_choice(hearth_tool_set *ts, const cJSON *tc, int n_tools, bool *none, hearth_err *err)
{
    *none = false;
    ts->choice = HEARTH_TOOL_AUTO;
    if (!tc || cJSON_IsNull(tc))
        return HEARTH_OK;
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        if (!strcmp(s, "none"))
            *none = true;
        else if (!strcmp(s, "required"))
            ts->choice = HEARTH_TOOL_REQUIRED;
        else if (strcmp(s, "auto"))
            return hearth_err_set(err, HEARTH_EINVAL, "tool_choice must be \"auto\", \"none\", \"required\" or "
                                                      "{\"type\": \"function\", \"function\": {\"name\": ...}}, not \"%.64s\"", s);
        if (ts->choice == HEARTH_TOOL_REQUIRED && n_tools == 0)
            return hearth_err_set(err, HEARTH_EINVAL, "tool_choice \"required\" needs 'tools' to choose from");
        return HEARTH_OK;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
    if (!cJSON_IsObject(tc) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(name))
        return hearth_err_set(err, HEARTH_EINVAL, "tool_choice must be \"auto\", \"none\", \"required\" or "
                                                  "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    for (int i = 0; i < n_tools; i++) {
        if (!strcmp(ts->names[i], name->valuestring)) {
            ts->choice = HEARTH_TOOL_NAMED;
            ts->named = i;
            return HEARTH_OK;
        }
    }
    return hearth_err_set(err, HEARTH_EINVAL, "tool_choice.function.name '%.64s' is none of the 'tools'", name->valuestring);
}

int hearth_tools_from_json(const cJSON *doc, hearth_chat_template_kind k, hearth_tool_set **out, hearth_err *err)
{
    *out = NULL;
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(doc, "tools");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(doc, "tool_choice");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(doc, "parallel_tool_calls");
    if (tools && !cJSON_IsNull(tools) && !cJSON_IsArray(tools))
        return hearth_err_set(err, HEARTH_EINVAL, "'tools' must be a list of {\"type\": \"function\", \"function\": {...}}");
    if (par && !cJSON_IsNull(par) && !cJSON_IsBool(par))
        return hearth_err_set(err, HEARTH_EINVAL, "'parallel_tool_calls' must be a boolean");
    int n = cJSON_IsArray(tools) ? cJSON_GetArraySize(tools) : 0;
    if (n > HEARTH_TOOLS_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "'tools' lists %d tools; at most %d", n, HEARTH_TOOLS_MAX);
    hearth_tool_set *ts = calloc(1, sizeof *ts);
    if (!ts || !(ts->names = calloc((size_t)n + 1, sizeof *ts->names)) ||
        !(ts->texts = calloc((size_t)n + 1, sizeof *ts->texts)) || !(ts->params = cJSON_CreateArray())) {
        hearth_tool_set_free(ts);
        return hearth_err_set(err, HEARTH_ENOMEM, "tools: out of memory");
    }
    ts->tmpl = k;
    ts->style = hearth_chat_template_tool_style(k);
    ts->parallel = cJSON_IsTrue(par);
    hearth_buf_init(&ts->held, (size_t)64 << 20);
    int rc = HEARTH_OK;
    for (int i = 0; i < n && !rc; i++)
        rc = read_tool(ts, cJSON_GetArrayItem(tools, i), i, err);
    bool none = false;
    if (!rc)
        rc = read_choice(ts, tc, n, &none, err);
    if (rc || none || n == 0) {
        hearth_tool_set_free(ts);
        return rc;
    }
    *out = ts;
    return HEARTH_OK;
}

/* ---- the forced call ---- */

/* {"type": "object", "properties": {"name": {"const": NAME}, ARGS: PARAMS}, "required": ["name", ARGS]} */
static cJSON *call_schema(const hearth_tool_set *ts, int i)
{
    const char *args = ts->style == HEARTH_TOOLS_LLAMA3 ? "parameters" : "arguments";
    cJSON *s = cJSON_CreateObject();
    cJSON *props = cJSON_AddObjectToObject(s, "properties");
    cJSON *name = cJSON_AddObjectToObject(props, "name");
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    cJSON *p = cJSON_Duplicate(cJSON_GetArrayItem(ts->params, i), true);
    bool ok = s && props && name && req && p && cJSON_AddStringToObject(s, "type", "object") &&
              cJSON_AddStringToObject(name, "const", ts->names[i]) && cJSON_AddItemToObject(props, args, p);
    if (!ok)
        cJSON_Delete(p);
    ok = ok && cJSON_AddItemToArray(req, cJSON_CreateString("name")) && cJSON_AddItemToArray(req, cJSON_CreateString(args));
    if (!ok) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

/* The schema of the answer's JSON: one call (anyOf the tools), or the generic wrapper around it. */
static cJSON *answer_schema(const hearth_tool_set *ts)
{
    cJSON *any = cJSON_CreateArray();
    for (int i = 0; any && i < ts->n; i++) {
        if (ts->choice == HEARTH_TOOL_NAMED && i != ts->named)
            continue;
        cJSON *c = call_schema(ts, i);
        if (!c || !cJSON_AddItemToArray(any, c)) {
            cJSON_Delete(c);
            cJSON_Delete(any);
            return NULL;
        }
    }
    cJSON *call = any;
    if (any && cJSON_GetArraySize(any) > 1) {
        call = cJSON_CreateObject();
        if (!call || !cJSON_AddItemToObject(call, "anyOf", any)) {
            cJSON_Delete(call);
            cJSON_Delete(any);
            return NULL;
        }
    } else if (any) {
        call = cJSON_DetachItemFromArray(any, 0);
        cJSON_Delete(any);
    }
    if (!call || ts->style != HEARTH_TOOLS_GENERIC)
        return call;
    /* {"tool_call": CALL} or, parallel, {"tool_calls": [CALL, ...]} */
    cJSON *s = cJSON_CreateObject();
    cJSON *props = cJSON_AddObjectToObject(s, "properties");
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    const char *key = ts->parallel ? "tool_calls" : "tool_call";
    cJSON *v = call;
    if (ts->parallel) {
        v = cJSON_CreateObject();
        if (v && (!cJSON_AddStringToObject(v, "type", "array") || !cJSON_AddNumberToObject(v, "minItems", 1) ||
                  !cJSON_AddItemToObject(v, "items", call))) {
            cJSON_Delete(v);
            v = NULL;
        }
        if (!v)
            cJSON_Delete(call);
    }
    bool ok = s && props && req && v && cJSON_AddStringToObject(s, "type", "object") &&
              cJSON_AddItemToObject(props, key, v);
    if (!ok && v)
        cJSON_Delete(v);
    if (!ok || !cJSON_AddItemToArray(req, cJSON_CreateString(key))) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

int hearth_tools_grammar(const hearth_tool_set *ts, hearth_buf *out, hearth_err *err)
{
    /* each tool's schema alone first, so a refused one is named */
    for (int i = 0; i < ts->n; i++) {
        if (ts->choice == HEARTH_TOOL_NAMED && i != ts->named)
            continue;
        hearth_buf scratch;
        hearth_buf_init(&scratch, out->max);
        hearth_err e = {0};
        int rc = hearth_json_schema_to_gbnf(cJSON_GetArrayItem(ts->params, i), &scratch, &e);
        hearth_buf_deinit(&scratch);
        if (rc)
            return hearth_err_set(err, rc, "tools[%d].function.parameters: %s", i, e.msg);
    }
    cJSON *schema = answer_schema(ts);
    if (!schema)
        return hearth_err_set(err, HEARTH_ENOMEM, "tools: out of memory for the grammar");
    int rc;
    if (ts->style == HEARTH_TOOLS_HERMES) {
        /* Qwen2.5's and Hermes's layout: "<tool_call>\n" JSON "\n</tool_call>", blocks one per line */
        rc = hearth_json_schema_to_gbnf_rule(schema, "tool-call", out, err);
        if (!rc)
            rc = hearth_buf_printf(out, "tool-block ::= \"<tool_call>\\n\" tool-call \"\\n\"? \"</tool_call>\"\n"
                                        "root ::= tool-block%s\n", ts->parallel ? " (\"\\n\" tool-block)*" : "");
    } else {
        rc = hearth_json_schema_to_gbnf(schema, out, err);
    }
    cJSON_Delete(schema);
    return rc;
}

/* ---- the conversation's calls ---- */

void hearth_tools_msg_calls_free(hearth_chat_tool_call *calls, size_t n)
{
    for (size_t j = 0; calls && j < n; j++) {
        free((char *)calls[j].name);
        free((char *)calls[j].arguments);
    }
    free(calls);
}

int hearth_tools_msg_calls(const cJSON *tool_calls, int i, hearth_chat_tool_call **calls, size_t *n, hearth_err *err)
{
    *calls = NULL;
    *n = 0;
    if (!cJSON_IsArray(tool_calls))
        return hearth_err_set(err, HEARTH_EINVAL, "messages[%d].tool_calls must be a list of {\"id\", \"type\": "
                                                  "\"function\", \"function\": {\"name\", \"arguments\"}}", i);
    int m = cJSON_GetArraySize(tool_calls);
    hearth_chat_tool_call *out = calloc((size_t)m + 1, sizeof *out);
    if (!out)
        return hearth_err_set(err, HEARTH_ENOMEM, "messages[%d].tool_calls: out of memory", i);
    int rc = HEARTH_OK;
    int j = 0;
    for (const cJSON *tc = tool_calls->child; tc && !rc; tc = tc->next, j++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
        const cJSON *args = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "arguments") : NULL;
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(tc, "type");
        if (!cJSON_IsObject(tc) || !cJSON_IsObject(fn) || (type && !cJSON_IsNull(type) && !cJSON_IsString(type))) {
            rc = hearth_err_set(err, HEARTH_EINVAL, "messages[%d].tool_calls[%d] must be {\"id\", \"type\": \"function\", "
                                                    "\"function\": {\"name\", \"arguments\"}}", i, j);
            break;
        }
        if (!cJSON_IsString(name)) {
            rc = hearth_err_set(err, HEARTH_EINVAL, "messages[%d].tool_calls[%d].function.name must be a string", i, j);
            break;
        }
        /* arguments: OpenAI's JSON text (re-printed as the templates print it), or an object */
        cJSON *parsed = NULL;
        const cJSON *v = args;
        if (cJSON_IsString(args) && !(v = parsed = cJSON_Parse(args->valuestring))) {
            rc = hearth_err_set(err, HEARTH_EINVAL, "messages[%d].tool_calls[%d].function.arguments is not JSON", i, j);
            break;
        }
        if (!cJSON_IsObject(v)) {
            cJSON_Delete(parsed);
            rc = hearth_err_set(err, HEARTH_EINVAL, "messages[%d].tool_calls[%d].function.arguments must be a JSON "
                                                    "object (as a string, OpenAI's, or the object)", i, j);
            break;
        }
        hearth_buf text;
        hearth_buf_init(&text, (size_t)16 << 20);
        rc = hearth_tools_print_json(v, 0, &text);
        cJSON_Delete(parsed);
        out[j].arguments = text.data;
        out[j].name = strdup(name->valuestring);
        if (rc || !out[j].name || !out[j].arguments)
            rc = hearth_err_set(err, rc == HEARTH_ELIMIT ? rc : HEARTH_ENOMEM,
                                "messages[%d].tool_calls[%d]: the arguments are too long", i, j);
    }
    if (rc) {
        hearth_tools_msg_calls_free(out, (size_t)m);
        return rc;
    }
    *calls = out;
    *n = (size_t)m;
    return HEARTH_OK;
}

const char *hearth_tools_result_name(const cJSON *messages, int i)
{
    const cJSON *msg = cJSON_GetArrayItem(messages, i);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(msg, "name");
    if (cJSON_IsString(name))
        return name->valuestring;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "tool_call_id");
    if (!cJSON_IsString(id))
        return NULL;
    for (int k = i - 1; k >= 0; k--) {
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(messages, k), "tool_calls");
        const cJSON *tc;
        cJSON_ArrayForEach(tc, calls)
        {
            const cJSON *cid = cJSON_GetObjectItemCaseSensitive(tc, "id");
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
            const cJSON *fname = cJSON_GetObjectItemCaseSensitive(fn, "name");
            if (cJSON_IsString(cid) && !strcmp(cid->valuestring, id->valuestring) && cJSON_IsString(fname))
                return fname->valuestring;
        }
    }
    return NULL;
}

/* tool_calls.h; the ids are random, as OpenAI's, not a counter that would
 * repeat across restarts. */
int hearth_tools_append_calls(const hearth_tool_parse *p, int index, hearth_buf *out)
{
    int rc = hearth_buf_appends(out, "\"tool_calls\":[");
    for (int i = index < 0 ? 0 : index; !rc && i < (index < 0 ? p->n_calls : index + 1); i++) {
        uint64_t a = hearth_random_u64(), b = hearth_random_u64();
        if (i != (index < 0 ? 0 : index))
            rc = hearth_buf_appends(out, ",");
        if (!rc && index >= 0)
            rc = hearth_buf_printf(out, "{\"index\":%d,", i);
        else if (!rc)
            rc = hearth_buf_appends(out, "{");
        if (!rc)
            rc = hearth_buf_printf(out, "\"id\":\"call_%016llx%08llx\",\"type\":\"function\",\"function\":{\"name\":",
                                   (unsigned long long)a, (unsigned long long)(b >> 32));
        if (!rc)
            rc = hearth_json_quote(out, p->calls[i].name, strlen(p->calls[i].name));
        if (!rc)
            rc = hearth_buf_appends(out, ",\"arguments\":");
        if (!rc)
            rc = hearth_json_quote(out, p->calls[i].arguments, strlen(p->calls[i].arguments));
        if (!rc)
            rc = hearth_buf_appends(out, "}}");
    }
    if (!rc)
        rc = hearth_buf_appends(out, "]");
    return rc;
}

/* tool_calls.h: OpenAI function calling on the chat endpoints: the
 * request's tools, tool_choice and parallel_tool_calls read and checked,
 * the tools printed for the chat template (text/chat_template.h renders
 * them in the family's words), the grammar that forces a call, the calls
 * found in the model's output and written as OpenAI's tool_calls, and the
 * state of a streamed answer that may
 * turn out to be a call. Private to the api layer; no request or network
 * types, so the parser is unit-tested and fuzzed alone. */
#ifndef HEARTH_API_TOOL_CALLS_H
#define HEARTH_API_TOOL_CALLS_H

#include "base/buf.h"
#include "base/err.h"
#include "text/chat_template.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

/* OpenAI's limit on the tools of one request. */
#define HEARTH_TOOLS_MAX 128

typedef enum hearth_tool_choice {
    HEARTH_TOOL_AUTO,     /* the model decides: its output is parsed for a call */
    HEARTH_TOOL_REQUIRED, /* a call of one of the tools, forced by a grammar */
    HEARTH_TOOL_NAMED,    /* a call of the named tool, forced by a grammar */
} hearth_tool_choice;

/* Where a streamed answer stands (hearth_tools_stream_feed). */
typedef enum hearth_tool_stream_state {
    HEARTH_TOOL_UNDECIDED, /* what came so far may still start a call: held back */
    HEARTH_TOOL_CONTENT,   /* it is text: every piece goes out as it comes */
    HEARTH_TOOL_CALL,      /* a call began: the rest is held for the end */
} hearth_tool_stream_state;

/* The tools of one request, and its streaming state. */
typedef struct hearth_tool_set {
    hearth_chat_template_kind tmpl;
    hearth_chat_tool_style style;
    hearth_tool_choice choice;
    int named;             /* HEARTH_TOOL_NAMED: the index of the tool */
    bool parallel;         /* parallel_tool_calls (default false, as llama-server's) */
    int n;                 /* tools */
    char **names;          /* [n] function names (owned) */
    char **texts;          /* [n] each tool object as the template prints it (owned) */
    cJSON *params;         /* array [n] of each tool's parameters schema (owned copies) */
    hearth_buf held;       /* streamed: the generated text not sent yet */
    hearth_tool_stream_state state;
} hearth_tool_set;

/* Reads doc's "tools", "tool_choice" and "parallel_tool_calls" for a model
 * whose template is k. *out is NULL when no tools are in play: none given,
 * an empty list (with tool_choice absent, "auto" or "none"), or tool_choice
 * "none" (the tools are then neither offered to the model nor looked for in
 * its answer). Each tool must be {"type": "function", "function": {"name":
 * 1-64 of [A-Za-z0-9_-], "description"?: string, "parameters"?: object,
 * "strict"?: bool}}; tool_choice "auto" (the default), "none", "required" or
 * {"type": "function", "function": {"name": one of the tools}}. Returns
 * HEARTH_OK; HEARTH_EINVAL with err naming the field ("tools[2].function.name
 * must be ...") for anything else, "required" or a named tool with no tools
 * among them; HEARTH_ENOMEM. doc is borrowed. */
int hearth_tools_from_json(const cJSON *doc, hearth_chat_template_kind k, hearth_tool_set **out, hearth_err *err);
/* NULL is a no-op. */
void hearth_tool_set_free(hearth_tool_set *ts);

/* Appends a GBNF grammar (root rule "root") whose sentences are one call of
 * ts's tools in the family's format (REQUIRED: any tool, NAMED: that one;
 * with parallel, llama-server's several calls where the format has them:
 * hermes blocks, the generic "tool_calls" list), each with arguments its
 * parameters schema allows (api/json_schema_gbnf.h). HEARTH_EINVAL with err
 * naming tools[i].function.parameters for a schema the converter refuses;
 * HEARTH_ELIMIT past out's bound; HEARTH_ENOMEM. */
int hearth_tools_grammar(const hearth_tool_set *ts, hearth_buf *out, hearth_err *err);

/* A call found in the model's output. */
typedef struct hearth_tool_call_out {
    char *name;      /* one of the tools' names (owned) */
    char *arguments; /* a JSON object, compact (owned): OpenAI's arguments string */
} hearth_tool_call_out;

typedef struct hearth_tool_parse {
    size_t content_len;         /* the text before the calls (hermes: any; else only spaces) */
    hearth_tool_call_out *calls; /* [n_calls], owned */
    int n_calls;
} hearth_tool_parse;

/* Looks for calls of names[0..n_names) in text[0..n) (not NUL-terminated,
 * untrusted): in style's format, the whole text after content_len being
 * calls and spaces (llama3: {"name", "parameters" | "arguments"} objects,
 * optionally after "<|python_tag|>", separated by spaces, newlines or ';';
 * generic: {"tool_call": {...}} or {"tool_calls": [...]}; hermes: text,
 * then <tool_call> JSON </tool_call> blocks, the last one's closing tag
 * optional). Arguments may be an object or a string holding one; a call
 * of a name not offered, or anything else, is no call. Returns the number
 * of calls (0: the text is content, out holds nothing), or HEARTH_ENOMEM.
 * Free out with hearth_tool_parse_deinit (also after 0). */
int hearth_tools_parse_output(hearth_chat_tool_style style, const char *const *names, int n_names, const char *text,
                              size_t n, hearth_tool_parse *out);
void hearth_tool_parse_deinit(hearth_tool_parse *p);

/* Appends ,"tool_calls":[...] of OpenAI's message (index < 0: every call
 * of p), or one streamed chunk's delta list for call index: {"index", "id"
 * ("call_" and 24 random hex digits), "type": "function", "function":
 * {"name", "arguments"}} each, arguments a JSON text in a string.
 * HEARTH_OK or out's buffer error. */
int hearth_tools_append_calls(const hearth_tool_parse *p, int index, hearth_buf *out);

/* Streamed answers: appends a piece to ts->held and says through *ready how
 * many of held's first bytes can go out as content now (the caller sends
 * them and drops them with hearth_buf_consume); the rest is held while it
 * may begin a call (ts->state says which). Forced choices hold everything.
 * HEARTH_OK or held's buffer error. */
int hearth_tools_stream_feed(hearth_tool_set *ts, const char *text, size_t n, size_t *ready);

/* Appends v as Python's json.dumps writes it (what Jinja's tojson gives
 * the templates): separators ", " and ": ", with indent > 0 one member per
 * line indented so; strings as UTF-8. HEARTH_ELIMIT / HEARTH_ENOMEM. */
int hearth_tools_print_json(const cJSON *v, int indent, hearth_buf *out);

/* An assistant message's "tool_calls" (OpenAI's [{"id", "type": "function",
 * "function": {"name", "arguments": a JSON text}}]) as the template's calls:
 * *calls (owned, with their strings; free with hearth_tools_msg_calls_free)
 * and *n. arguments may also be an object. HEARTH_EINVAL with err naming
 * messages[i].tool_calls[j] and the field. */
int hearth_tools_msg_calls(const cJSON *tool_calls, int i, hearth_chat_tool_call **calls, size_t *n, hearth_err *err);
void hearth_tools_msg_calls_free(hearth_chat_tool_call *calls, size_t n);
/* The function a "tool" message (messages[i]) answers: its "name", else the
 * name of the earlier assistant call whose id is its tool_call_id; NULL when
 * neither says. Borrowed from messages. */
const char *hearth_tools_result_name(const cJSON *messages, int i);

#endif

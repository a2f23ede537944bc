/* chat_template.h: OpenAI-style messages -> the prompt text a chat model was
 * trained on, for the common template families, as built-ins.
 *
 * GGUF files carry their chat template as Jinja source
 * (tokenizer.chat_template). By default hearth recognises the family by the
 * template's distinctive markers and renders that family's layout in C;
 * with --jinja (as llama-server's) the template itself is run by
 * text/jinja.h's interpreter, and the family still names the tool-call
 * format to parse. The bytes the built-ins write match what the family's official template renders
 * (see chat_template.c for each family's source and the few deliberate
 * differences). Special tokens are written as text ("<|im_start|>"): the
 * tokenizer must parse special tokens in this text, and must not add a BOS
 * of its own when the family writes bos_text. */
#ifndef HEARTH_TEXT_CHAT_TEMPLATE_H
#define HEARTH_TEXT_CHAT_TEMPLATE_H

#include "base/buf.h"
#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>

/* A function call an assistant turn made (OpenAI's tool_calls). */
typedef struct hearth_chat_tool_call {
    const char *name;      /* the function's name */
    const char *arguments; /* its arguments: a JSON object's text, as the family writes it */
} hearth_chat_tool_call;

typedef struct hearth_chat_msg {
    const char *role;    /* "system", "user" or "assistant"; with render_tools also "tool" */
    const char *content; /* UTF-8, NUL-terminated ("" for an assistant turn that only calls) */
    /* render_tools only: an assistant turn's calls (n_tool_calls of them, or NULL) */
    const hearth_chat_tool_call *tool_calls;
    size_t n_tool_calls;
    const char *name;    /* render_tools only: a "tool" turn's function (NULL: unknown) */
} hearth_chat_msg;

typedef enum hearth_chat_template_kind {
    HEARTH_TMPL_CHATML,  /* <|im_start|>role\n...<|im_end|>\n (Qwen2/2.5/3 without tools, OpenHermes, ...) */
    HEARTH_TMPL_LLAMA3,  /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    HEARTH_TMPL_PHI3,    /* <|role|>\n...<|end|>\n */
    HEARTH_TMPL_GEMMA,   /* <start_of_turn>user|model\n...<end_of_turn>\n; system joins the first user turn */
    HEARTH_TMPL_MISTRAL, /* [INST] ...[/INST] ...</s> (v3 layout); system joins the first [INST] */
    HEARTH_TMPL_LLAMA2,  /* <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s> */
    HEARTH_TMPL_COMMAND_R, /* <|START_OF_TURN_TOKEN|><|USER_TOKEN|>...<|END_OF_TURN_TOKEN|> (Cohere) */
    HEARTH_TMPL_COUNT_,
} hearth_chat_template_kind;

/* The family of a GGUF tokenizer.chat_template (len bytes, not necessarily
 * NUL-terminated), by its markers: "<|im_start|>" chatml; "[INST]" with
 * "<<SYS>>" llama2, else mistral; "<|start_header_id|>" llama3; "<|user|>" or
 * "<|assistant|>" with "<|end|>" phi3; "<start_of_turn>" gemma;
 * "<|START_OF_TURN_TOKEN|>" with "<|USER_TOKEN|>" command-r. Layouts that
 * share a marker but not the layout (phi-4's "<|im_sep|>", mistral v7's
 * "[SYSTEM_PROMPT]") are not guessed. HEARTH_ENOTFOUND when unknown. */
int hearth_chat_template_detect(const char *jinja_source, size_t len, hearth_chat_template_kind *out);

/* The --chat-template names: "chatml", "llama3", "phi3", "gemma", "mistral",
 * "llama2", "command-r". HEARTH_ENOTFOUND for any other name. */
int hearth_chat_template_by_name(const char *name, hearth_chat_template_kind *out);
/* The name by_name accepts for k; "?" when k is out of range. */
const char *hearth_chat_template_name(hearth_chat_template_kind k);

/* Appends the prompt for msgs[0..n) to out. bos_text is the vocabulary's BOS
 * token text ("<|begin_of_text|>", "<bos>", "<s>"), written where the family's
 * template writes bos_token (llama3, gemma, mistral: once at the start;
 * llama2: before every [INST]); NULL or "" writes none. With
 * add_generation_prompt the assistant's header follows the last turn
 * (mistral and llama2 have none: their [/INST] is the prompt).
 * Returns HEARTH_OK; HEARTH_EINVAL (err names the message index) for no
 * messages, a NULL role or content, an unknown role, or, for the families
 * whose template enforces it (gemma, mistral, llama2), a system message
 * other than the first or turns that do not alternate user/assistant from a
 * user turn; HEARTH_ELIMIT past out->max; HEARTH_ENOMEM. On error out is
 * left as it was. Thread-safe; nothing is kept. */
int hearth_chat_template_render(hearth_chat_template_kind k, const hearth_chat_msg *msgs, size_t n,
                                bool add_generation_prompt, const char *bos_text, hearth_buf *out,
                                hearth_err *err);

/* ---- tools (chat_tools.c) ----
 *
 * How a family offers functions to the model and how the model calls one.
 * The families with a native format are rendered as their official
 * templates render tools; the others get hearth's generic format. */
typedef enum hearth_chat_tool_style {
    /* phi3, gemma, mistral, llama2, command-r: the tools listed as JSON in the
     * system prompt; a call is the whole answer {"tool_call": {"name": ...,
     * "arguments": {...}}} (several: {"tool_calls": [...]}); results come
     * back as user turns {"tool_response": {"tool": ..., "content": ...}} */
    HEARTH_TOOLS_GENERIC,
    /* llama3 (Llama 3.1-3.3's JSON tool calling, as their template with the
     * tools in the system turn): the answer {"name": ..., "parameters":
     * {...}}; results in "ipython" turns */
    HEARTH_TOOLS_LLAMA3,
    /* chatml (Hermes 2/3 Pro, Qwen2.5): <tools>...</tools> in the system
     * turn; calls <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>,
     * after optional text; results <tool_response>...</tool_response> in a
     * user turn */
    HEARTH_TOOLS_HERMES,
} hearth_chat_tool_style;

/* The tool format family k is rendered with. */
hearth_chat_tool_style hearth_chat_template_tool_style(hearth_chat_template_kind k);
/* How the family's template prints each tool's JSON: 4 for llama3 (its
 * tojson(indent=4)), 0 for one line (Python's json.dumps separators ", "
 * and ": "). */
int hearth_chat_template_tool_indent(hearth_chat_template_kind k);

/* hearth_chat_template_render with function calling: tools[0..n_tools) are
 * the OpenAI tool objects ({"type": "function", "function": {...}}) as JSON
 * texts printed as hearth_chat_template_tool_indent says, offered in the
 * family's words (n_tools 0: none offered); messages may also be "tool"
 * turns (a result; consecutive ones are one turn where the family has no
 * role for them) and assistant turns with tool_calls, each written in the
 * family's call format. Roles are then checked as render checks them (a
 * result counts as a user turn). Same returns and ownership as render. */
int hearth_chat_template_render_tools(hearth_chat_template_kind k, const hearth_chat_msg *msgs, size_t n,
                                      const char *const *tools, size_t n_tools, bool add_generation_prompt,
                                      const char *bos_text, hearth_buf *out, hearth_err *err);

#endif

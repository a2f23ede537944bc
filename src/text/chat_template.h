/* chat_template.h: OpenAI-style messages -> the prompt text a chat model was
 * trained on, for the common template families, as built-ins.
 *
 * GGUF files carry their chat template as Jinja source
 * (tokenizer.chat_template). hearth does not interpret Jinja: it recognises
 * the family by the template's distinctive markers and renders that family's
 * layout in C. The bytes match what the family's official template renders
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

typedef struct hearth_chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8, NUL-terminated */
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

#endif

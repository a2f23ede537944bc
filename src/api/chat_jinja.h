/* chat_jinja.h: a chat request rendered by a Jinja chat template
 * (llama-server's --jinja; text/jinja.h runs the template). This file owns
 * the variables the template sees, as Hugging Face transformers'
 * apply_chat_template and llama-server give them. */
#ifndef HEARTH_API_CHAT_JINJA_H
#define HEARTH_API_CHAT_JINJA_H

#include "base/buf.h"
#include "base/err.h"
#include "text/chat_template.h"
#include "text/jinja.h"

#include <stdbool.h>
#include <stddef.h>

/* What a template does with the conversations it is given, found once per
 * template by rendering probes (as llama-server's chat templates do at load). */
typedef struct hearth_chat_jinja_caps {
    bool system_role; /* a system message's text reaches the prompt (gemma-2's raises, others drop it) */
} hearth_chat_jinja_caps;

/* Renders probe conversations with t into caps. */
void hearth_chat_jinja_probe(const hearth_jinja *t, hearth_chat_jinja_caps *caps);

/* Renders msgs[0..n) with t into out. The template's variables:
 *   messages   [{"role", "content"}, ...]; an assistant turn's calls as
 *              "tool_calls": [{"type": "function", "function": {"name",
 *              "arguments"}}] with arguments parsed into an object (what
 *              the templates' `arguments | tojson` expects; a text that is
 *              no JSON object stays a string), a tool turn's "name" when known
 *   tools      tools[0..n_tools) (JSON texts of OpenAI tool objects),
 *              absent when there are none
 *   add_generation_prompt, bos_token, eos_token (bos/eos NULL: "")
 * For a template without caps->system_role, system messages are folded
 * into the user turn after them (their texts joined by "\n", then "\n"
 * and the user's text), or become a user turn of their own before any
 * other turn, as llama-server's minja polyfills them. caps NULL: none
 * folded.
 * Returns hearth_jinja_render's codes (HEARTH_EINVAL: the template refused
 * the conversation, err says why, raise_exception's message verbatim;
 * HEARTH_ELIMIT; HEARTH_ENOMEM). out is left as it was on error. */
int hearth_chat_jinja_render(const hearth_jinja *t, const hearth_chat_jinja_caps *caps, const hearth_chat_msg *msgs,
                             size_t n, const char *const *tools, size_t n_tools, bool add_generation_prompt,
                             const char *bos, const char *eos, hearth_buf *out, hearth_err *err);

#endif

/* chat_template.c: built-in renderers for the common chat template families.
 *
 * Each family is a short function writing the layout its official Jinja
 * template writes (tests/unit/text/chat_template_golden.py renders those
 * templates with jinja2 and holds their text):
 *   chatml   teknium/OpenHermes-2.5-Mistral-7B; Qwen2.5/Qwen3 without tools
 *   llama3   meta-llama/Meta-Llama-3-8B-Instruct (content trimmed, BOS first)
 *   phi3     microsoft/Phi-3-mini-4k-instruct (system role kept)
 *   gemma    google/gemma-3-*-it (system + "\n\n" opens the first user turn;
 *            content trimmed; BOS first). gemma-2 refuses a system message;
 *            folding it in as gemma-3 does is what a server wants.
 *   mistral  mistralai/Mistral-7B-Instruct-v0.3 ("[INST] " ... "[/INST]",
 *            assistant " " + trimmed + "</s>")
 *   llama2   meta-llama/Llama-2-7b-chat-hf (BOS before every [INST], the
 *            <<SYS>> block opens the first user turn, turns stripped)
 *   command-r CohereForAI/c4ai-command-r-plus without tools, as llama.cpp's
 *            built-in writes it (content trimmed; no BOS written: the
 *            tokenizer adds it, and the official template's default
 *            preamble is left out, as there)
 * Deliberate differences from those templates, all shared with llama.cpp's
 * built-ins (src/llama-chat.cpp):
 *   - Qwen2.5's template adds a default system prompt ("You are Qwen, ...")
 *     when none is given; chatml here adds none.
 *   - Mistral v0.3 puts the system prompt before the *last* user message;
 *     here it opens the first, so every turn of a conversation extends the
 *     previous prompt and its KV cache can be reused.
 *   - Phi-3 appends eos_token when add_generation_prompt is false; here the
 *     prompt ends with the last turn, so it can be continued.
 *   - "trim"/strip() remove ASCII whitespace only (Python also strips
 *     Unicode spaces such as U+3000).
 * "</s>" is written literally for mistral and llama2: both families use
 * sentencepiece vocabularies whose EOS is "</s>".
 *
 * A Jinja interpreter was rejected here first (a large attack surface for a
 * handful of layouts that change rarely). It exists since 2026-12-06
 * (text/jinja.h), for llama-server's --jinja: a drop-in must render the
 * templates hearth has no family for (and llama.cpp's own suite renders an
 * arbitrary one). The built-ins stay the default: they need no interpreter
 * between a request and its prompt, and their bytes are tested against the
 * official templates; the interpreter is sandboxed, bounded in steps,
 * depth, memory and output, and fuzzed. */
#include "text/chat_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const names[HEARTH_TMPL_COUNT_] = {
    [HEARTH_TMPL_CHATML] = "chatml", [HEARTH_TMPL_LLAMA3] = "llama3",   [HEARTH_TMPL_PHI3] = "phi3",
    [HEARTH_TMPL_GEMMA] = "gemma",   [HEARTH_TMPL_MISTRAL] = "mistral", [HEARTH_TMPL_LLAMA2] = "llama2",
    [HEARTH_TMPL_COMMAND_R] = "command-r",
};

const char *hearth_chat_template_name(hearth_chat_template_kind k)
{
    return (unsigned)k < HEARTH_TMPL_COUNT_ ? names[k] : "?";
}

int hearth_chat_template_by_name(const char *name, hearth_chat_template_kind *out)
{
    for (int k = 0; name && k < HEARTH_TMPL_COUNT_; k++) {
        if (strcmp(name, names[k]) == 0) {
            *out = (hearth_chat_template_kind)k;
            return HEARTH_OK;
        }
    }
    return HEARTH_ENOTFOUND;
}

static bool has(const char *s, size_t n, const char *needle)
{
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

int hearth_chat_template_detect(const char *src, size_t n, hearth_chat_template_kind *out)
{
    hearth_chat_template_kind k;
    if (!src)
        return HEARTH_ENOTFOUND;
    if (has(src, n, "<|im_start|>")) {
        if (has(src, n, "<|im_sep|>")) /* phi-4: chatml tokens, another layout */
            return HEARTH_ENOTFOUND;
        k = HEARTH_TMPL_CHATML;
    } else if (has(src, n, "[INST]")) {
        if (has(src, n, "[SYSTEM_PROMPT]")) /* mistral v7 */
            return HEARTH_ENOTFOUND;
        k = has(src, n, "<<SYS>>") ? HEARTH_TMPL_LLAMA2 : HEARTH_TMPL_MISTRAL;
    } else if (has(src, n, "<|start_header_id|>") && has(src, n, "<|end_header_id|>")) {
        k = HEARTH_TMPL_LLAMA3;
    } else if ((has(src, n, "<|user|>") || has(src, n, "<|assistant|>")) && has(src, n, "<|end|>")) {
        k = HEARTH_TMPL_PHI3;
    } else if (has(src, n, "<start_of_turn>")) {
        k = HEARTH_TMPL_GEMMA;
    } else if (has(src, n, "<|START_OF_TURN_TOKEN|>") && has(src, n, "<|USER_TOKEN|>")) {
        k = HEARTH_TMPL_COMMAND_R;
    } else {
        return HEARTH_ENOTFOUND;
    }
    *out = k;
    return HEARTH_OK;
}

/* ---- rendering ---- */

enum role { R_SYSTEM, R_USER, R_ASSISTANT };

typedef struct render {
    hearth_buf *out;
    const char *bos; /* "" when none */
    int rc;          /* first append failure, sticky */
} render;

static void put(render *r, const char *s, size_t n)
{
    if (!r->rc)
        r->rc = hearth_buf_append(r->out, s, n);
}

static void puts_(render *r, const char *s) { put(r, s, strlen(s)); }

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Jinja's trim / Python's strip(), ASCII whitespace. */
static void put_trimmed(render *r, const char *s)
{
    size_t n = strlen(s);
    while (n && is_space(*s))
        s++, n--;
    while (n && is_space(s[n - 1]))
        n--;
    put(r, s, n);
}

/* Strips the text appended since offset from, in place (for templates that
 * strip() a concatenation rather than each part). */
static void strip_since(render *r, size_t from)
{
    if (r->rc)
        return;
    hearth_buf *b = r->out;
    size_t lead = from;
    while (lead < b->len && is_space(b->data[lead]))
        lead++;
    memmove(b->data + from, b->data + lead, b->len - lead);
    b->len -= lead - from;
    while (b->len > from && is_space(b->data[b->len - 1]))
        b->len--;
    b->data[b->len] = 0;
}

static void render_chatml(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen)
{
    (void)roles;
    for (size_t i = 0; i < n; i++) {
        puts_(r, "<|im_start|>");
        puts_(r, m[i].role);
        puts_(r, "\n");
        puts_(r, m[i].content);
        puts_(r, "<|im_end|>\n");
    }
    if (gen)
        puts_(r, "<|im_start|>assistant\n");
}

static void render_llama3(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen)
{
    (void)roles;
    puts_(r, r->bos);
    for (size_t i = 0; i < n; i++) {
        puts_(r, "<|start_header_id|>");
        puts_(r, m[i].role);
        puts_(r, "<|end_header_id|>\n\n");
        put_trimmed(r, m[i].content);
        puts_(r, "<|eot_id|>");
    }
    if (gen)
        puts_(r, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void render_phi3(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen)
{
    (void)roles;
    for (size_t i = 0; i < n; i++) {
        puts_(r, "<|");
        puts_(r, m[i].role);
        puts_(r, "|>\n");
        puts_(r, m[i].content);
        puts_(r, "<|end|>\n");
    }
    if (gen)
        puts_(r, "<|assistant|>\n");
}

/* For gemma, mistral and llama2 (checked before rendering): msgs[0] may be
 * the system message, the rest alternate user, assistant, user, ... */
static void render_gemma(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen)
{
    const char *sys = roles[0] == R_SYSTEM ? m[0].content : NULL;
    puts_(r, r->bos);
    for (size_t i = sys ? 1 : 0; i < n; i++) {
        puts_(r, roles[i] == R_USER ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (sys) {
            puts_(r, sys);
            puts_(r, "\n\n");
            sys = NULL;
        }
        put_trimmed(r, m[i].content);
        puts_(r, "<end_of_turn>\n");
    }
    if (gen)
        puts_(r, "<start_of_turn>model\n");
}

static void render_mistral(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen)
{
    (void)gen;
    const char *sys = roles[0] == R_SYSTEM ? m[0].content : NULL;
    puts_(r, r->bos);
    for (size_t i = sys ? 1 : 0; i < n; i++) {
        if (roles[i] == R_USER) {
            puts_(r, "[INST] ");
            if (sys) {
                puts_(r, sys);
                puts_(r, "\n\n");
                sys = NULL;
            }
            puts_(r, m[i].content);
            puts_(r, "[/INST]");
        } else {
            puts_(r, " ");
            put_trimmed(r, m[i].content);
            puts_(r, "</s>");
        }
    }
}

static void render_llama2(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen)
{
    (void)gen;
    const char *sys = roles[0] == R_SYSTEM ? m[0].content : NULL;
    for (size_t i = sys ? 1 : 0; i < n; i++) {
        if (roles[i] == R_USER) {
            puts_(r, r->bos);
            puts_(r, "[INST] ");
            /* the template strips "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content as one string */
            size_t from = r->out->len;
            if (sys) {
                puts_(r, "<<SYS>>\n");
                puts_(r, sys);
                puts_(r, "\n<</SYS>>\n\n");
                sys = NULL;
            }
            puts_(r, m[i].content);
            strip_since(r, from);
            puts_(r, " [/INST]");
        } else {
            puts_(r, " ");
            put_trimmed(r, m[i].content);
            puts_(r, " </s>");
        }
    }
}

static void render_command_r(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen)
{
    static const char *const token[] = {[R_SYSTEM] = "<|SYSTEM_TOKEN|>", [R_USER] = "<|USER_TOKEN|>",
                                        [R_ASSISTANT] = "<|CHATBOT_TOKEN|>"};
    for (size_t i = 0; i < n; i++) {
        puts_(r, "<|START_OF_TURN_TOKEN|>");
        puts_(r, token[roles[i]]);
        put_trimmed(r, m[i].content);
        puts_(r, "<|END_OF_TURN_TOKEN|>");
    }
    if (gen)
        puts_(r, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
}

typedef void (*render_fn)(render *r, const hearth_chat_msg *m, const enum role *roles, size_t n, bool gen);

static const struct family {
    render_fn fn;
    bool strict; /* system only first, then user/assistant alternating from user */
} families[HEARTH_TMPL_COUNT_] = {
    [HEARTH_TMPL_CHATML] = {render_chatml, false}, [HEARTH_TMPL_LLAMA3] = {render_llama3, false},
    [HEARTH_TMPL_PHI3] = {render_phi3, false},     [HEARTH_TMPL_GEMMA] = {render_gemma, true},
    [HEARTH_TMPL_MISTRAL] = {render_mistral, true}, [HEARTH_TMPL_LLAMA2] = {render_llama2, true},
    [HEARTH_TMPL_COMMAND_R] = {render_command_r, false},
};

/* The role of each message into roles[], and the strict families' order rules. */
static int check_roles(hearth_chat_template_kind k, const hearth_chat_msg *m, size_t n, enum role *roles,
                       hearth_err *err)
{
    const char *name = names[k];
    for (size_t i = 0; i < n; i++) {
        if (!m[i].role || !m[i].content)
            return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: message %zu has no %s", name, i,
                                  m[i].role ? "content" : "role");
        if (strcmp(m[i].role, "system") == 0)
            roles[i] = R_SYSTEM;
        else if (strcmp(m[i].role, "user") == 0)
            roles[i] = R_USER;
        else if (strcmp(m[i].role, "assistant") == 0)
            roles[i] = R_ASSISTANT;
        else if (k == HEARTH_TMPL_LLAMA3 && strcmp(m[i].role, "ipython") == 0)
            roles[i] = R_USER; /* Llama 3.1's role for tool results (chat_tools.c); llama3 checks no order */
        else
            return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: message %zu has unknown role '%.64s'",
                                  name, i, m[i].role);
    }
    if (!families[k].strict)
        return HEARTH_OK;
    size_t first = roles[0] == R_SYSTEM ? 1 : 0;
    if (first == n)
        return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: a system message needs a user message after it",
                              name);
    for (size_t i = first; i < n; i++) {
        enum role want = (i - first) % 2 == 0 ? R_USER : R_ASSISTANT;
        if (roles[i] != want)
            return hearth_err_set(err, HEARTH_EINVAL,
                                  "chat template %s: message %zu is '%s' where '%s' was due (after an optional "
                                  "first system message, roles must alternate user/assistant)",
                                  name, i, m[i].role, want == R_USER ? "user" : "assistant");
    }
    return HEARTH_OK;
}

int hearth_chat_template_render(hearth_chat_template_kind k, const hearth_chat_msg *msgs, size_t n,
                                bool add_generation_prompt, const char *bos_text, hearth_buf *out,
                                hearth_err *err)
{
    if ((unsigned)k >= HEARTH_TMPL_COUNT_)
        return hearth_err_set(err, HEARTH_EINVAL, "chat template: unknown kind %d", (int)k);
    if (n == 0)
        return hearth_err_set(err, HEARTH_EINVAL, "chat template %s: no messages", names[k]);
    /* n is bounded by the request body that carried the messages. */
    enum role *roles = n <= SIZE_MAX / sizeof *roles ? malloc(n * sizeof *roles) : NULL;
    if (!roles)
        return hearth_err_set(err, HEARTH_ENOMEM, "chat template %s: out of memory for %zu messages", names[k], n);
    int rc = check_roles(k, msgs, n, roles, err);
    if (rc)
        goto done;
    size_t start = out->len;
    render r = {.out = out, .bos = bos_text ? bos_text : "", .rc = 0};
    families[k].fn(&r, msgs, roles, n, add_generation_prompt);
    rc = r.rc;
    if (rc) {
        out->len = start;
        if (out->data)
            out->data[start] = 0;
        if (rc == HEARTH_ELIMIT)
            hearth_err_set(err, rc, "chat template %s: the prompt is longer than %zu bytes", names[k], out->max);
        else
            hearth_err_set(err, rc, "chat template %s: out of memory for the prompt", names[k]);
    }
done:
    free(roles);
    return rc;
}

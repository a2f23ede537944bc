/* fuzz_chat_template: chat templates and message lists from fuzz bytes,
 * through text/chat_template.h's public API. The messages of a chat request
 * are client bytes and the template source comes from a GGUF file, so both
 * must be answered with a prompt or an error, never a crash, a leak or a read
 * past the input.
 *
 * Input layout: byte 0 picks the family (low 3 bits, folded into range),
 * whether to add the generation prompt (bit 3) and the BOS text (bits 4-5:
 * none, "", "<s>", or the first segment); the rest is split at NUL bytes into
 * segments: the first is the Jinja source given to detect (with its length,
 * not NUL-terminated as the GGUF value is not) and to by_name, then (role,
 * content) pairs. A role segment whose first byte is 0x01-0x03 stands for
 * "system", "user" or "assistant", so well-formed conversations are easy to
 * reach; any other role is passed as it is (an unknown role).
 *
 * Checked: render returns OK, EINVAL (with a message) or ELIMIT; on an
 * error the buffer is left as it was; on success the output is bounded by
 * the input (contents, roles and BOS once per message, plus a fixed
 * overhead per message for the family's markers) and the same call renders
 * the same bytes again. */
#include "text/chat_template.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSGS 64
#define MAX_OUT (1u << 16)
/* The longest marker text any family writes around one message, generously:
 * llama3's "<|start_header_id|>assistant<|end_header_id|>\n\n" + "<|eot_id|>"
 * is 55 bytes, llama2's "[INST] <<SYS>>\n" ... " [/INST] " ... " </s>" less. */
#define PER_MSG_OVERHEAD 96

static const char *const roles[] = {"system", "user", "assistant"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t ctl = data[0];
    /* A NUL-terminated copy of the rest, so every segment is a C string. */
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    size_t n_text = size - 1;

    char *seg[2 * MAX_MSGS + 1];
    size_t seg_len[2 * MAX_MSGS + 1];
    int n_seg = 0;
    for (size_t at = 0; at <= n_text && n_seg < 2 * MAX_MSGS + 1;) {
        size_t len = strlen(text + at);
        seg[n_seg] = text + at;
        seg_len[n_seg++] = len;
        at += len + 1;
    }

    hearth_chat_template_kind kind;
    if (hearth_chat_template_detect(seg[0], seg_len[0], &kind) == HEARTH_OK &&
        (unsigned)kind >= HEARTH_TMPL_COUNT_)
        abort();
    hearth_chat_template_kind named;
    if (hearth_chat_template_by_name(seg[0], &named) == HEARTH_OK &&
        strcmp(hearth_chat_template_name(named), seg[0]) != 0)
        abort();
    kind = (hearth_chat_template_kind)((ctl & 7) % HEARTH_TMPL_COUNT_);
    bool add_gen = ctl & 8;
    static const char *const fixed_bos[] = {NULL, "", "<s>"};
    const char *bos = ((ctl >> 4) & 3) < 3 ? fixed_bos[(ctl >> 4) & 3] : seg[0];

    hearth_chat_msg msgs[MAX_MSGS] = {0};
    size_t n = 0, bound = 128 + strlen(bos ? bos : "");
    for (int i = 1; i + 1 < n_seg && n < MAX_MSGS; i += 2) {
        uint8_t r = (uint8_t)seg[i][0];
        msgs[n].role = r >= 1 && r <= 3 && seg_len[i] == 1 ? roles[r - 1] : seg[i];
        msgs[n].content = seg[i + 1];
        bound += strlen(msgs[n].role) + seg_len[i + 1] + PER_MSG_OVERHEAD + strlen(bos ? bos : "");
        n++;
    }

    hearth_buf out, again;
    hearth_buf_init(&out, MAX_OUT);
    hearth_buf_init(&again, MAX_OUT);
    if (hearth_buf_appends(&out, "kept") != HEARTH_OK)
        abort();
    hearth_err err = {0};
    int rc = hearth_chat_template_render(kind, msgs, n, add_gen, bos, &out, &err);
    if (rc == HEARTH_OK) {
        if (out.len < 4 || memcmp(out.data, "kept", 4) != 0 || out.len > MAX_OUT || out.len - 4 > bound)
            abort();
        if (hearth_chat_template_render(kind, msgs, n, add_gen, bos, &again, NULL) != HEARTH_OK ||
            again.len != out.len - 4 || memcmp(again.data, out.data + 4, again.len) != 0)
            abort();
    } else {
        if (rc != HEARTH_EINVAL && rc != HEARTH_ELIMIT)
            abort();
        if (rc == HEARTH_EINVAL && !err.msg[0])
            abort();
        if (out.len != 4 || memcmp(out.data, "kept", 4) != 0)
            abort(); /* "On error out is left as it was" */
    }
    /* The same conversation with function calling (chat_tools.c): role byte
     * 0x04 of a one-byte role stands for "tool" there, an assistant turn's
     * content (when it has more than one byte) doubles as one call with the
     * first segment as arguments, and the first segment is the one tool
     * offered when bit 6 of byte 0 is set. Answered with a prompt, EINVAL
     * or ELIMIT, out untouched on error. */
    hearth_chat_tool_call call = {"f", seg[0]};
    for (size_t i = 0, j = 1; i < n; i++, j += 2) {
        if ((uint8_t)seg[j][0] == 4 && seg_len[j] == 1)
            msgs[i].role = "tool";
        if (!strcmp(msgs[i].role, "assistant") && strlen(msgs[i].content) > 1) {
            msgs[i].tool_calls = &call;
            msgs[i].n_tool_calls = 1;
        }
    }
    const char *const tools[] = {seg[0]};
    hearth_buf_reset(&out, 0);
    if (hearth_buf_appends(&out, "kept") != HEARTH_OK)
        abort();
    memset(&err, 0, sizeof err);
    rc = hearth_chat_template_render_tools(kind, msgs, n, tools, (ctl & 64) ? 1 : 0, add_gen, bos, &out, &err);
    if (rc != HEARTH_OK && ((rc != HEARTH_EINVAL && rc != HEARTH_ELIMIT) || (rc == HEARTH_EINVAL && !err.msg[0]) ||
                            out.len != 4 || memcmp(out.data, "kept", 4) != 0))
        abort();
    hearth_buf_deinit(&out);
    hearth_buf_deinit(&again);
    free(text);
    return 0;
}

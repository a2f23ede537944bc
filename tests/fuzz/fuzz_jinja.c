/* fuzz_jinja: Jinja templates and contexts from fuzz bytes, through
 * text/jinja.h's public API. The template comes from a GGUF file and the
 * context carries client messages, so both must be answered with a prompt
 * or an error, never a crash, a hang, a leak or a read past the input.
 *
 * Input layout: the bytes before the first NUL are the template source
 * (given with its length, not NUL-terminated, as a GGUF string is); the
 * bytes after it are the context JSON (when there is no NUL, a fixed
 * conversation with tools is the context, so template mutations meet
 * realistic values).
 *
 * Checked: parse answers OK or EINVAL / ELIMIT with a message; render
 * answers OK, EINVAL (with a message) or ELIMIT, under small limits (64 KiB
 * of output, 200000 steps, 32 MiB of values); on an error the buffer is left
 * as it was; a second render of the same parse gives the same bytes (unless
 * the template reads the clock). */
#include "text/jinja.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT (1u << 16)

static const char default_ctx[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"function\":"
    " {\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": [1.5, true]}}}]}, {\"role\": \"tool\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *src = malloc(tlen ? tlen : 1);
    if (!src)
        return 0;
    memcpy(src, data, tlen); /* its own allocation: ASan sees a read past the template */
    char *ctx = NULL;
    if (nul) {
        size_t clen = size - tlen - 1;
        ctx = malloc(clen + 1);
        if (!ctx) {
            free(src);
            return 0;
        }
        memcpy(ctx, nul + 1, clen);
        ctx[clen] = 0;
    }
    hearth_err err = {0};
    hearth_jinja *t = NULL;
    int rc = hearth_jinja_parse(src, tlen, &t, &err);
    if (rc != HEARTH_OK) {
        if ((rc != HEARTH_EINVAL && rc != HEARTH_ELIMIT) || !err.msg[0] || t)
            abort();
        goto out;
    }
    hearth_jinja_limits lim = {.max_steps = 200000, .max_depth = 128, .max_mem = 32u << 20};
    hearth_buf b, again;
    hearth_buf_init(&b, MAX_OUT);
    hearth_buf_init(&again, MAX_OUT);
    if (hearth_buf_appends(&b, "kept") != HEARTH_OK)
        abort();
    memset(&err, 0, sizeof err);
    rc = hearth_jinja_render_ex(t, ctx ? ctx : default_ctx, &lim, &b, &err);
    if (rc == HEARTH_OK) {
        if (b.len < 4 || memcmp(b.data, "kept", 4) != 0 || b.len > MAX_OUT)
            abort();
        if (!memmem(src, tlen, "strftime_now", 12)) {
            if (hearth_jinja_render_ex(t, ctx ? ctx : default_ctx, &lim, &again, NULL) != HEARTH_OK ||
                again.len != b.len - 4 || (again.len && memcmp(again.data, b.data + 4, again.len) != 0))
                abort();
        }
    } else {
        if (rc != HEARTH_EINVAL && rc != HEARTH_ELIMIT)
            abort();
        if (!err.msg[0])
            abort();
        if (b.len != 4 || memcmp(b.data, "kept", 4) != 0)
            abort(); /* "on error out is left as it was" */
    }
    hearth_buf_deinit(&b);
    hearth_buf_deinit(&again);
    hearth_jinja_free(t);
out:
    free(src);
    free(ctx);
    return 0;
}

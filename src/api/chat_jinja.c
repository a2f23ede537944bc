/* chat_jinja.c: the variables a Jinja chat template renders a request
 * with (chat_jinja.h). The context is built as a cJSON tree and handed to
 * the interpreter as JSON text (jinja.h reads its globals from a JSON
 * object: integers stay integers, keys keep their order). */
#include "chat_jinja.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* An assistant turn's calls as OpenAI writes them, arguments parsed. */
static cJSON *calls_json(const hearth_chat_msg *m)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < m->n_tool_calls; i++) {
        const hearth_chat_tool_call *tc = &m->tool_calls[i];
        cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
        cJSON *args = tc->arguments ? cJSON_Parse(tc->arguments) : NULL;
        if (args && !cJSON_IsObject(args)) {
            cJSON_Delete(args);
            args = NULL;
        }
        if (!args)
            args = cJSON_CreateString(tc->arguments ? tc->arguments : "");
        if (!call || !fn || !args || !cJSON_AddStringToObject(call, "type", "function") ||
            !cJSON_AddStringToObject(fn, "name", tc->name ? tc->name : "")) {
            cJSON_Delete(call), cJSON_Delete(fn), cJSON_Delete(args), cJSON_Delete(arr);
            return NULL;
        }
        cJSON_AddItemToObject(fn, "arguments", args);
        cJSON_AddItemToObject(call, "function", fn);
        cJSON_AddItemToArray(arr, call);
    }
    return arr;
}

static cJSON *context_json(const hearth_chat_msg *msgs, size_t n, const char *const *tools, size_t n_tools, bool gen,
                           const char *bos, const char *eos, hearth_err *err)
{
    cJSON *ctx = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(ctx, "messages");
    bool ok = ctx && list;
    for (size_t i = 0; ok && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        ok = m && cJSON_AddStringToObject(m, "role", msgs[i].role) &&
             cJSON_AddStringToObject(m, "content", msgs[i].content ? msgs[i].content : "");
        if (ok && msgs[i].n_tool_calls) {
            cJSON *calls = calls_json(&msgs[i]);
            ok = calls != NULL;
            if (ok)
                cJSON_AddItemToObject(m, "tool_calls", calls);
        }
        if (ok && msgs[i].name && !strcmp(msgs[i].role, "tool"))
            ok = cJSON_AddStringToObject(m, "name", msgs[i].name) != NULL;
        if (m)
            cJSON_AddItemToArray(list, m);
    }
    if (ok && n_tools) {
        cJSON *arr = cJSON_AddArrayToObject(ctx, "tools");
        for (size_t i = 0; ok && arr && i < n_tools; i++) {
            cJSON *t = cJSON_Parse(tools[i]);
            ok = t != NULL;
            if (ok)
                cJSON_AddItemToArray(arr, t);
        }
        ok = ok && arr;
    }
    ok = ok && cJSON_AddBoolToObject(ctx, "add_generation_prompt", gen) &&
         cJSON_AddStringToObject(ctx, "bos_token", bos ? bos : "") &&
         cJSON_AddStringToObject(ctx, "eos_token", eos ? eos : "");
    if (!ok) {
        cJSON_Delete(ctx);
        hearth_err_set(err, HEARTH_ENOMEM, "chat template: out of memory for its variables");
        return NULL;
    }
    return ctx;
}

/* msgs with the system turns folded into user turns (chat_jinja.h) into
 * folded (n entries of room; *nf used); the texts made are in texts (n
 * entries of room, each owned or NULL). False when out of memory. */
static bool fold_system(const hearth_chat_msg *msgs, size_t n, hearth_chat_msg *folded, size_t *nf, char **texts)
{
    hearth_buf pending;
    hearth_buf_init(&pending, (size_t)1 << 30);
    size_t k = 0;
    bool ok = true;
    for (size_t i = 0; ok && i <= n; i++) {
        const hearth_chat_msg *m = i < n ? &msgs[i] : NULL;
        if (m && !strcmp(m->role, "system")) {
            ok = (!pending.len || !hearth_buf_appends(&pending, "\n")) && !hearth_buf_appends(&pending, m->content);
            continue;
        }
        bool user = m && !strcmp(m->role, "user");
        if (pending.len) { /* into this user turn, or a user turn of its own before this one */
            hearth_buf text;
            hearth_buf_init(&text, (size_t)1 << 30);
            ok = !hearth_buf_append(&text, pending.data, pending.len) &&
                 (!user || !*m->content || (!hearth_buf_appends(&text, "\n") && !hearth_buf_appends(&text, m->content))) &&
                 !hearth_buf_append(&text, "", 1);
            texts[k] = text.data;
            folded[k] = (hearth_chat_msg){.role = "user", .content = ok ? text.data : ""};
            k++;
            hearth_buf_reset(&pending, 0);
            if (user)
                continue; /* the user turn is the folded one */
        }
        if (m)
            folded[k++] = *m;
    }
    hearth_buf_deinit(&pending);
    *nf = k;
    return ok;
}

void hearth_chat_jinja_probe(const hearth_jinja *t, hearth_chat_jinja_caps *caps)
{
    static const char needle[] = "<System Needle>";
    const hearth_chat_msg probe[] = {{.role = "system", .content = needle}, {.role = "user", .content = "<User Needle>"}};
    hearth_buf out;
    hearth_buf_init(&out, (size_t)1 << 20);
    hearth_err err = {0};
    caps->system_role = hearth_chat_jinja_render(t, NULL, probe, 2, NULL, 0, true, "", "", &out, &err) == 0 &&
                        out.len && memmem(out.data, out.len, needle, strlen(needle)) != NULL;
    hearth_buf_deinit(&out);
}

int hearth_chat_jinja_render(const hearth_jinja *t, const hearth_chat_jinja_caps *caps, const hearth_chat_msg *msgs,
                             size_t n, const char *const *tools, size_t n_tools, bool add_generation_prompt,
                             const char *bos, const char *eos, hearth_buf *out, hearth_err *err)
{
    hearth_chat_msg *folded = NULL;
    char **texts = NULL;
    size_t nf = n;
    if (caps && !caps->system_role) {
        folded = calloc(n ? n : 1, sizeof *folded);
        texts = calloc(n ? n : 1, sizeof *texts);
        bool ok = folded && texts && fold_system(msgs, n, folded, &nf, texts);
        if (!ok) {
            for (size_t i = 0; texts && i < n; i++)
                free(texts[i]);
            free(texts);
            free(folded);
            return hearth_err_set(err, HEARTH_ENOMEM, "chat template: out of memory folding the system turns");
        }
        msgs = folded;
    }
    cJSON *ctx = context_json(msgs, nf, tools, n_tools, add_generation_prompt, bos, eos, err);
    for (size_t i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts);
    free(folded);
    if (!ctx)
        return HEARTH_ENOMEM;
    char *text = cJSON_PrintUnformatted(ctx);
    cJSON_Delete(ctx);
    if (!text)
        return hearth_err_set(err, HEARTH_ENOMEM, "chat template: out of memory for its variables");
    int rc = hearth_jinja_render(t, text, out, err);
    cJSON_free(text);
    return rc;
}

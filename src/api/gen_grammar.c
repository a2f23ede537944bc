/* gen_grammar.c: llama-server's constrained sampling fields, read into a
 * call: "grammar" (GBNF text), "json_schema" (a schema, converted by
 * json_schema_gbnf.c) and, for chat, OpenAI's "response_format"
 * ({"type": "json_object"} with an optional "schema", or {"type":
 * "json_schema", "json_schema": {"schema": ...}}). The grammar is parsed
 * here, on the handler's thread, so a bad one is a 400 naming the problem
 * and where, before anything is queued; the scheduler gets the parsed
 * grammar and the model's token texts (built once at load, below).
 *
 * As llama-server: a non-empty grammar wins over json_schema on
 * /completion, chat refuses both at once, and response_format's schema
 * replaces json_schema. A "json_schema" response_format is applied (the
 * c392e50 llama-server parsed it and then dropped it: a typo there; the
 * documented behaviour and newer llama-servers constrain). */
#include "gen_common.h"
#include "json_schema_gbnf.h"

#include <stdlib.h>
#include <string.h>

hearth_token_texts *hearth_gen_token_texts_new(const hearth_tokenizer *t, int32_t n_tokens)
{
    hearth_token_texts *tt = calloc(1, sizeof *tt);
    hearth_buf bytes;
    hearth_buf_init(&bytes, (size_t)1 << 30);
    char piece[1024];
    if (!tt || !(tt->off = malloc(((size_t)n_tokens + 1) * sizeof *tt->off)))
        goto fail;
    tt->n = n_tokens;
    for (int32_t i = 0; i < n_tokens; i++) {
        tt->off[i] = (uint32_t)bytes.len;
        int k = hearth_tokenizer_piece_special(t, i, piece, sizeof piece);
        if (k > 0 && hearth_buf_append(&bytes, piece, (size_t)k))
            goto fail;
        /* a piece past 1 KiB is left empty: the grammar never allows it */
    }
    tt->off[n_tokens] = (uint32_t)bytes.len;
    if (hearth_buf_append(&bytes, "", 1)) /* data is never NULL */
        goto fail;
    tt->bytes = bytes.data; /* the buffer's memory is the table's now */
    return tt;
fail:
    hearth_buf_deinit(&bytes);
    hearth_gen_token_texts_free(tt);
    return NULL;
}

void hearth_gen_token_texts_free(hearth_token_texts *tt)
{
    if (!tt)
        return;
    free(tt->off);
    free(tt->bytes);
    free(tt);
}

bool hearth_gen_set_grammar(hearth_request *req, hearth_gen_call *c, const char *text, size_t n, const char *field)
{
    hearth_err err = {0};
    c->grammar = hearth_grammar_parse(text, n, &err);
    if (!c->grammar) {
        int st = err.code == HEARTH_ENOMEM ? 503 : 400;
        hearth_respond_error(req, st, st == 503 ? "unavailable_error" : "invalid_request_error", "'%s': %s", field, err.msg);
        return false;
    }
    c->g.grammar = c->grammar;
    c->g.token_texts = c->model->token_texts;
    return true;
}

static bool set_schema(hearth_request *req, hearth_gen_call *c, const cJSON *schema, const char *field)
{
    hearth_buf gbnf;
    hearth_buf_init(&gbnf, HEARTH_GRAMMAR_MAX_TEXT);
    hearth_err err = {0};
    bool ok = false;
    if (hearth_json_schema_to_gbnf(schema, &gbnf, &err) != 0)
        hearth_respond_error(req, 400, "invalid_request_error", "'%s': %s", field, err.msg);
    else
        ok = hearth_gen_set_grammar(req, c, gbnf.data, gbnf.len, field);
    hearth_buf_deinit(&gbnf);
    return ok;
}

/* response_format's schema: *schema NULL for text (no constraint). */
static bool response_format_schema(hearth_request *req, const cJSON *rf, const cJSON **schema, cJSON *empty)
{
    *schema = NULL;
    if (!rf || cJSON_IsNull(rf))
        return true;
    const cJSON *type = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
    if (!cJSON_IsObject(rf) || (type && !cJSON_IsString(type))) {
        hearth_respond_error(req, 400, "invalid_request_error", "'response_format' must be an object with a string 'type'");
        return false;
    }
    const char *t = type ? type->valuestring : "";
    if (!*t || !strcmp(t, "text"))
        return true;
    if (!strcmp(t, "json_object")) {
        *schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
    } else if (!strcmp(t, "json_schema")) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
        *schema = cJSON_IsObject(js) ? cJSON_GetObjectItemCaseSensitive(js, "schema") : NULL;
    } else {
        hearth_respond_error(req, 400, "invalid_request_error",
                             "response_format type must be one of \"text\", \"json_object\" or \"json_schema\", but got: %.100s", t);
        return false;
    }
    if (!*schema || cJSON_IsNull(*schema))
        *schema = empty; /* any JSON object, as llama-server's empty schema */
    return true;
}

bool hearth_gen_parse_grammar(hearth_request *req, const cJSON *doc, hearth_gen_call *c, bool chat)
{
    const cJSON *gr = cJSON_GetObjectItemCaseSensitive(doc, "grammar");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(doc, "json_schema");
    if (gr && !cJSON_IsNull(gr) && !cJSON_IsString(gr)) {
        hearth_respond_error(req, 400, "invalid_request_error", "'grammar' must be a string (GBNF)");
        return false;
    }
    if (js && cJSON_IsNull(js))
        js = NULL;
    bool has_grammar = cJSON_IsString(gr) && gr->valuestring[0];
    if (chat) {
        if (js && has_grammar) {
            hearth_respond_error(req, 400, "invalid_request_error", "Cannot use both json_schema and grammar");
            return false;
        }
        cJSON *empty = cJSON_CreateObject();
        const cJSON *rs = NULL;
        bool ok = empty && response_format_schema(req, cJSON_GetObjectItemCaseSensitive(doc, "response_format"), &rs, empty);
        if (ok && rs)
            ok = set_schema(req, c, rs, "response_format");
        else if (ok && js)
            ok = set_schema(req, c, js, "json_schema");
        else if (ok && has_grammar)
            ok = hearth_gen_set_grammar(req, c, gr->valuestring, strlen(gr->valuestring), "grammar");
        if (!empty)
            hearth_respond_error(req, 503, "unavailable_error", "out of memory");
        cJSON_Delete(empty);
        return ok;
    }
    if (has_grammar)
        return hearth_gen_set_grammar(req, c, gr->valuestring, strlen(gr->valuestring), "grammar");
    if (js)
        return set_schema(req, c, js, "json_schema");
    return true;
}

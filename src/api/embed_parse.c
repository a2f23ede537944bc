/* embed_parse.c: JSON to a validated list of inputs for the embedding APIs.
 * Every type is checked before use and every error names the field (and the
 * input's index), because a client sending 512 inputs needs to know which
 * one was wrong. Limits that depend on the model (its vocabulary, its
 * length, its dimensions) are the caller's: this file sees no model. */
#include "embed_parse.h"
#include "json_body.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int fail(char *msg, size_t n, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t n, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return status;
}

static int opt_bool(const cJSON *doc, const char *key, bool def, bool *out, char *msg, size_t n)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!f || cJSON_IsNull(f)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(f))
        return fail(msg, n, 400, "'%s' must be true or false", key);
    *out = cJSON_IsTrue(f);
    return 0;
}

static int parse_ids(const cJSON *arr, int i, hearth_embed_input *in, char *msg, size_t n)
{
    int k = cJSON_GetArraySize(arr);
    if (k == 0)
        return fail(msg, n, 400, "input %d: an empty list of token ids", i);
    in->ids = malloc((size_t)k * sizeof *in->ids);
    if (!in->ids)
        return fail(msg, n, 400, "input %d: out of memory", i);
    int j = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, arr)
    {
        double d = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (d < 0 || d > 2147483647.0 || d != floor(d))
            return fail(msg, n, 400, "input %d: element %d is not a token id (a non-negative integer)", i, j);
        in->ids[j++] = (int32_t)d;
    }
    in->n_ids = j;
    return 0;
}

/* /similarity's "inputs": {"source_sentence": str, "sentences": [str]} ->
 * inputs[0] the source, inputs[1..] the sentences. Frees out on failure. */
static int parse_similarity(const cJSON *field, int max_inputs, hearth_embed_parsed *out, char *msg, size_t n)
{
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(field, "source_sentence");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(field, "sentences");
    int st = 0;
    if (!cJSON_IsObject(field))
        st = fail(msg, n, 400, "'inputs' must be an object with 'source_sentence' and 'sentences'");
    else if (!cJSON_IsString(src))
        st = fail(msg, n, 400, "'inputs.source_sentence' must be a string");
    else if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        st = fail(msg, n, 400, "'inputs.sentences' must be a non-empty list of strings");
    else if (cJSON_GetArraySize(list) + 1 > max_inputs)
        st = fail(msg, n, 413, "'inputs' has %d sentences and the source; at most %d inputs per request (--max-client-batch)",
                  cJSON_GetArraySize(list), max_inputs);
    if (!st) {
        out->n = 1 + cJSON_GetArraySize(list);
        if (!(out->inputs = calloc((size_t)out->n, sizeof *out->inputs)))
            st = fail(msg, n, 400, "out of memory");
    }
    for (int i = 0; !st && i < out->n; i++) {
        const cJSON *item = i ? cJSON_GetArrayItem(list, i - 1) : src;
        if (!cJSON_IsString(item)) {
            st = fail(msg, n, 400, "inputs.sentences[%d] must be a string", i - 1);
            break;
        }
        out->inputs[i].text = item->valuestring;
        out->inputs[i].text_len = strlen(item->valuestring);
    }
    if (st)
        hearth_embed_parsed_free(out);
    return st;
}

void hearth_embed_parsed_free(hearth_embed_parsed *p)
{
    if (p->inputs)
        for (int i = 0; i < p->n; i++)
            free(p->inputs[i].ids);
    free(p->inputs);
    cJSON_Delete(p->doc);
    memset(p, 0, sizeof *p);
}

int hearth_embed_parse(const char *body, size_t len, enum hearth_embed_api api, int max_inputs, hearth_embed_parsed *out,
                       char *msg, size_t n)
{
    memset(out, 0, sizeof *out);
    out->doc = hearth_json_body_parse(body, len, msg, n);
    if (!out->doc)
        return 400;
    const cJSON *doc = out->doc;
    bool openai = api == HEARTH_EMBED_OPENAI, decode = api == HEARTH_EMBED_TEI_DECODE;
    bool take_ids = openai || decode, take_text = !decode;
    const char *key = openai ? "input" : decode ? "ids" : "inputs";
    int st = 0;
    out->normalize = true;
    bool similarity = api == HEARTH_EMBED_TEI_SIMILARITY;
    /* TEI's /similarity takes its options under "parameters" (the Inference
     * API's shape); absent, the top level is read as for /embed */
    const cJSON *opts = doc;
    if (similarity) {
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(doc, "parameters");
        if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
            st = fail(msg, n, 400, "'parameters' must be an object");
        else if (cJSON_IsObject(params))
            opts = params;
    }
    if (!st && (api == HEARTH_EMBED_TEI || similarity)) {
        if (!similarity)
            st = opt_bool(doc, "normalize", true, &out->normalize, msg, n);
        if (!st)
            st = opt_bool(opts, "truncate", false, &out->truncate, msg, n);
        const cJSON *dir = cJSON_GetObjectItemCaseSensitive(opts, "truncation_direction");
        if (!st && dir && !cJSON_IsNull(dir)) {
            /* TEI spells them "Left" and "Right"; any case is taken */
            if (cJSON_IsString(dir) && !strcasecmp(dir->valuestring, "left"))
                out->truncate_left = true;
            else if (!cJSON_IsString(dir) || strcasecmp(dir->valuestring, "right"))
                st = fail(msg, n, 400, "'truncation_direction' must be \"Left\" or \"Right\"");
        }
    } else if (api == HEARTH_EMBED_TEI_TOKENIZE) {
        st = opt_bool(doc, "add_special_tokens", true, &out->add_special, msg, n);
    } else if (api == HEARTH_EMBED_TEI_DECODE) {
        st = opt_bool(doc, "skip_special_tokens", true, &out->skip_special, msg, n);
    } else {
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(doc, "model");
        if (model && !cJSON_IsNull(model) && !cJSON_IsString(model))
            st = fail(msg, n, 400, "'model' must be a string");
        else if (cJSON_IsString(model))
            out->model = model->valuestring;
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(doc, "encoding_format");
        if (!st && fmt && !cJSON_IsNull(fmt)) {
            if (!cJSON_IsString(fmt) || (strcmp(fmt->valuestring, "float") && strcmp(fmt->valuestring, "base64")))
                st = fail(msg, n, 400, "'encoding_format' must be \"float\" or \"base64\"");
            else
                out->base64 = !strcmp(fmt->valuestring, "base64");
        }
        const cJSON *dims = cJSON_GetObjectItemCaseSensitive(doc, "dimensions");
        if (!st && dims && !cJSON_IsNull(dims)) {
            if (!cJSON_IsNumber(dims) || dims->valuedouble < 1 || dims->valuedouble > 1e6 || dims->valuedouble != floor(dims->valuedouble))
                st = fail(msg, n, 400, "'dimensions' must be a positive integer");
            else
                out->dimensions = (int64_t)dims->valuedouble;
        }
    }
    if (!st && (api == HEARTH_EMBED_TEI || api == HEARTH_EMBED_TEI_TOKENIZE || similarity)) {
        const cJSON *pn = cJSON_GetObjectItemCaseSensitive(opts, "prompt_name");
        if (pn && !cJSON_IsNull(pn) && !cJSON_IsString(pn))
            st = fail(msg, n, 400, "'prompt_name' must be a string");
        else if (cJSON_IsString(pn))
            out->prompt_name = pn->valuestring;
    }
    const cJSON *field = st ? NULL : cJSON_GetObjectItemCaseSensitive(doc, key);
    if (!st && !field)
        st = fail(msg, n, 400, "'%s' is required", key);
    if (!st && similarity)
        return parse_similarity(field, max_inputs, out, msg, n);
    bool single = false;
    if (!st) {
        single = (take_text && cJSON_IsString(field)) ||
                 (take_ids && cJSON_IsArray(field) && cJSON_GetArraySize(field) > 0 && cJSON_IsNumber(cJSON_GetArrayItem(field, 0)));
        if (!single && !cJSON_IsArray(field))
            st = decode ? fail(msg, n, 400, "'ids' must be a list of token ids or a list of such lists")
                        : fail(msg, n, 400, "'%s' must be a string or a list of %s", key,
                               openai ? "strings or token-id lists" : "strings");
    }
    if (!st) {
        out->n = single ? 1 : cJSON_GetArraySize(field);
        if (out->n == 0)
            st = fail(msg, n, 400, "'%s' is empty", key);
        else if (out->n > max_inputs)
            st = fail(msg, n, 413, "'%s' has %d inputs; at most %d per request (--max-client-batch)", key, out->n, max_inputs);
    }
    if (!st && !(out->inputs = calloc((size_t)out->n, sizeof *out->inputs)))
        st = fail(msg, n, 400, "out of memory");
    for (int i = 0; !st && i < out->n; i++) {
        const cJSON *item = single ? field : cJSON_GetArrayItem(field, i);
        hearth_embed_input *in = &out->inputs[i];
        if (take_text && cJSON_IsString(item)) {
            in->text = item->valuestring;
            in->text_len = strlen(item->valuestring);
        } else if (take_ids && cJSON_IsArray(item)) {
            st = parse_ids(item, i, in, msg, n);
        } else {
            st = fail(msg, n, 400, "%s[%d] must be %s", key, i,
                      decode ? "a list of token ids" : openai ? "a string or a list of token ids" : "a string");
        }
    }
    if (st)
        hearth_embed_parsed_free(out);
    return st;
}

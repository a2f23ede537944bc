/* infill.c: llama-server's POST /infill, fill-in-the-middle for code models.
 *
 * {"input_prefix", "input_suffix", "input_extra": [{"filename", "text"}],
 * "prompt", and every /completion option} becomes one prompt in the layout
 * llama-server builds (its format_infill, the repository-level pattern of
 * Qwen2.5-Coder's report):
 *
 *     [extra] [BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID
 *
 * where extra is FIM_REP "myproject\n" (when the vocabulary has FIM_REP),
 * then per chunk FIM_SEP filename "\n" text (or, without FIM_SEP, a
 * "--- snippet ---" line then text), then FIM_SEP "filename\n". The prefix
 * keeps its last 3/4 of a batch, the suffix its first quarter less the prompt,
 * and the extra context the end of what the context leaves after a batch and
 * twice the server's -n, as llama-server takes them, so the same request
 * gives the same ids. The answer is /completion's (streamed too), through the
 * same call (completion.c). Texts are tokenized without special tokens, the
 * prompt with them, as llama-server does.
 *
 * With --spm-infill (llama-server's) the two parts swap places:
 *
 *     [extra] [BOS] FIM_SUF suffix FIM_PRE prefix prompt FIM_MID
 *
 * A model whose vocabulary lacks FIM_PRE, FIM_SUF or FIM_MID (GGUF's
 * tokenizer.ggml.fim_{pre,suf,mid}_token_id, or the older prefix/suffix/
 * middle keys, or, when the file names none, tokens with llama.cpp's texts
 * for them: hearth_vocab_guess_fim) gets llama-server's 501 naming what is
 * missing. */
#include "gen_common.h"

#include <stdio.h>
#include <string.h>

/* The most ids one part may tokenize to: more than a 16 MiB body can give. */
#define PART_MAX ((size_t)1 << 25)

/* Appends the ids of text (no special tokens parsed: code may hold their texts) to out. */
static bool encode_plain(hearth_request *req, const hearth_tokenizer *t, const char *text, size_t n, hearth_ids *out,
                         const char *what)
{
    hearth_err err = {0};
    if (hearth_tokenizer_encode(t, text, n, false, false, out, &err) != 0) {
        hearth_respond_error(req, 400, "invalid_request_error", "%s cannot be tokenized: %s", what, err.msg);
        return false;
    }
    return true;
}

static bool push(hearth_request *req, hearth_ids *out, int32_t id)
{
    if (hearth_ids_push(out, id) != 0) {
        hearth_respond_error(req, 413, "invalid_request_error", "the infill prompt is too long");
        return false;
    }
    return true;
}

/* input_prefix / input_suffix: a string, or llama-server's mixed list of
 * ids and strings. */
static bool encode_part(hearth_request *req, hearth_gen_entry *m, const cJSON *v, const char *key, hearth_ids *out)
{
    const hearth_tokenizer *t = hearth_decoder_tokenizer(m->dec);
    if (cJSON_IsString(v))
        return encode_plain(req, t, v->valuestring, strlen(v->valuestring), out, key);
    if (!cJSON_IsArray(v)) {
        hearth_respond_error(req, 400, "invalid_request_error", "\"%s\" must be a string or a list of token ids and strings",
                             key);
        return false;
    }
    int32_t n_vocab = hearth_decoder_vocab(m->dec)->n_tokens;
    int k = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (cJSON_IsString(e)) {
            if (!encode_plain(req, t, e->valuestring, strlen(e->valuestring), out, key))
                return false;
        } else if (cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble < n_vocab &&
                   e->valuedouble == (double)(int32_t)e->valuedouble) {
            if (!push(req, out, (int32_t)e->valuedouble))
                return false;
        } else {
            hearth_respond_error(req, 400, "invalid_request_error", "\"%s\"[%d] is not a token id in 0..%d nor a string", key,
                                 k, (int)n_vocab - 1);
            return false;
        }
        k++;
    }
    return true;
}

/* The extra context (repository, files) into extra; false after a 400. */
static bool encode_extra(hearth_request *req, hearth_gen_entry *m, const cJSON *chunks, hearth_ids *extra)
{
    const hearth_tokenizer *t = hearth_decoder_tokenizer(m->dec);
    const hearth_vocab *v = hearth_decoder_vocab(m->dec);
    /* llama-server's separator when the vocabulary has no FIM_SEP */
    static const char snippet[] = "\n\n--- snippet ---\n\n";
    if (v->fim_rep >= 0 && (!push(req, extra, v->fim_rep) || !encode_plain(req, t, "myproject\n", 10, extra, "input_extra")))
        return false;
    const cJSON *c;
    cJSON_ArrayForEach(c, chunks)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "filename");
        const char *fname = cJSON_IsString(name) ? name->valuestring : "tmp";
        if (v->fim_sep >= 0) {
            char line[4096];
            int n = snprintf(line, sizeof line, "%s\n", fname);
            if (n < 0 || (size_t)n >= sizeof line) {
                hearth_respond_error(req, 400, "invalid_request_error", "an \"input_extra\" filename is longer than %zu bytes",
                                     sizeof line - 2);
                return false;
            }
            if (!push(req, extra, v->fim_sep) || !encode_plain(req, t, line, (size_t)n, extra, "input_extra"))
                return false;
        } else if (!encode_plain(req, t, snippet, sizeof snippet - 1, extra, "input_extra")) {
            return false;
        }
        if (!encode_plain(req, t, text->valuestring, strlen(text->valuestring), extra, "input_extra"))
            return false;
    }
    if (v->fim_sep >= 0 && (!push(req, extra, v->fim_sep) || !encode_plain(req, t, "filename\n", 9, extra, "input_extra")))
        return false;
    return true;
}

/* llama-server's checks, in its words: 400s naming the field. */
static bool valid(hearth_request *req, const cJSON *doc)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(doc, "prompt");
    if (p && !cJSON_IsNull(p) && !cJSON_IsString(p)) {
        hearth_respond_error(req, 400, "invalid_request_error", "\"prompt\" must be a string");
        return false;
    }
    const char *required[2] = {"input_prefix", "input_suffix"};
    for (int i = 0; i < 2; i++) {
        if (!cJSON_GetObjectItemCaseSensitive(doc, required[i])) {
            hearth_respond_error(req, 400, "invalid_request_error", "\"%s\" is required", required[i]);
            return false;
        }
    }
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(doc, "input_extra");
    if (extra && !cJSON_IsArray(extra)) {
        hearth_respond_error(req, 400, "invalid_request_error",
                             "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}");
        return false;
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, extra)
    {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(c, "text");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "filename");
        if (!cJSON_IsString(text)) {
            hearth_respond_error(req, 400, "invalid_request_error",
                                 "extra_context chunk must contain a \"text\" field with a string value");
            return false;
        }
        if (name && !cJSON_IsString(name)) {
            hearth_respond_error(req, 400, "invalid_request_error", "extra_context chunk's \"filename\" field must be a string");
            return false;
        }
    }
    return true;
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* The FIM prompt into c->prompt (see the top of the file); false after responding. */
static bool build(hearth_request *req, hearth_api *api, hearth_gen_call *c, const cJSON *doc)
{
    hearth_gen_entry *m = c->model;
    const hearth_vocab *v = hearth_decoder_vocab(m->dec);
    const hearth_tokenizer *t = hearth_decoder_tokenizer(m->dec);
    hearth_ids pre, suf, prm, extra;
    hearth_ids_init(&pre, PART_MAX);
    hearth_ids_init(&suf, PART_MAX);
    hearth_ids_init(&prm, PART_MAX);
    hearth_ids_init(&extra, PART_MAX);
    bool ok = encode_part(req, m, cJSON_GetObjectItemCaseSensitive(doc, "input_prefix"), "input_prefix", &pre) &&
              encode_part(req, m, cJSON_GetObjectItemCaseSensitive(doc, "input_suffix"), "input_suffix", &suf) &&
              encode_extra(req, m, cJSON_GetObjectItemCaseSensitive(doc, "input_extra"), &extra);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(doc, "prompt");
    if (ok && cJSON_IsString(p)) {
        hearth_err err = {0};
        if (hearth_tokenizer_encode(t, p->valuestring, strlen(p->valuestring), false, true, &prm, &err) != 0) {
            hearth_respond_error(req, 400, "invalid_request_error", "the prompt cannot be tokenized: %s", err.msg);
            ok = false;
        }
    }
    if (ok) {
        /* llama-server's shares: the prefix 3/4 of a batch, the suffix what is
         * left of the last quarter after the prompt and two markers, the extra
         * context what the context leaves after a batch and twice -n */
        int64_t n_batch = api->state->gen.n_batch, n_predict = m->n_predict, n_ctx = m->n_ctx;
        int64_t suf_room = n_batch / 4 - (2 + (int64_t)prm.n), extra_room = n_ctx - n_batch - 2 * n_predict;
        size_t n_pre = min_size(pre.n, (size_t)(3 * (n_batch / 4)));
        size_t n_suf = min_size(suf.n, suf_room > 0 ? (size_t)suf_room : 0);
        size_t n_extra = min_size(extra.n, extra_room > 0 ? (size_t)extra_room : 0);
        hearth_ids *out = &c->prompt;
        for (size_t i = extra.n - n_extra; i < extra.n && ok; i++)
            ok = push(req, out, extra.v[i]);
        if (ok && t->add_bos && v->bos >= 0)
            ok = push(req, out, v->bos);
        /* FIM_PRE prefix prompt, then FIM_SUF suffix; --spm-infill: the other way round */
        for (int part = 0; part < 2 && ok; part++) {
            if ((part == 0) != api->cfg.spm_infill) {
                ok = push(req, out, v->fim_pre);
                for (size_t i = pre.n - n_pre; i < pre.n && ok; i++)
                    ok = push(req, out, pre.v[i]);
                for (size_t i = 0; i < prm.n && ok; i++)
                    ok = push(req, out, prm.v[i]);
            } else {
                ok = push(req, out, v->fim_suf);
                for (size_t i = 0; i < n_suf && ok; i++)
                    ok = push(req, out, suf.v[i]);
            }
        }
        ok = ok && push(req, out, v->fim_mid);
    }
    hearth_ids_deinit(&pre);
    hearth_ids_deinit(&suf);
    hearth_ids_deinit(&prm);
    hearth_ids_deinit(&extra);
    return ok;
}

static void infill(hearth_request *req, void *ctx)
{
    hearth_api *api = ctx;
    cJSON *doc;
    hearth_gen_entry *m = hearth_gen_open(req, api, &doc);
    if (!m)
        return;
    hearth_gen_call *c = NULL;
    int64_t n_predict = -1;
    const hearth_vocab *v = hearth_decoder_vocab(m->dec);
    if (v->fim_pre < 0 || v->fim_suf < 0 || v->fim_mid < 0) {
        hearth_respond_error(req, 501, "not_supported_error", "Infill is not supported by this model: %s%s%s",
                             v->fim_pre < 0 ? "prefix token is missing. " : "",
                             v->fim_suf < 0 ? "suffix token is missing. " : "",
                             v->fim_mid < 0 ? "middle token is missing. " : "");
        goto out;
    }
    if (!valid(req, doc) || !(c = hearth_gen_completion_call_new(req, m, doc, &n_predict)))
        goto out;
    if (!build(req, api, c, doc)) {
        hearth_gen_call_free(c);
        goto out;
    }
    hearth_gen_call_submit(req, api, c, n_predict); /* takes c */
out:
    cJSON_Delete(doc);
}

int hearth_api_register_infill(hearth_api *api, hearth_server *s)
{
    return hearth_server_route(s, "POST", "/infill", infill, api);
}

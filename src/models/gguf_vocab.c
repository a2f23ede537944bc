/* gguf_vocab.c: filling a hearth_vocab from a GGUF file's tokenizer metadata.
 *
 * How: the token list sizes the vocabulary; scores, kinds and merges are
 * optional parallel arrays whose lengths must agree with it; special ids and
 * flags are read when present and left at "absent" (-1) otherwise. Strings
 * are copied verbatim: the tokenizers know their own conventions (U+2581 for
 * spaces, GPT-2's byte map), so converting here would only lose information.
 *
 * Rejected: refusing files whose special ids are out of range. Converters
 * write 0xffffffff for "none" and some files carry stale ids; llama.cpp warns
 * and ignores them, and a model that loads there should load here. */
#include "models/gguf_vocab.h"

#include "base/log.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int load_tokens(const hearth_gguf *g, hearth_vocab *v, hearth_err *err)
{
    const hearth_gguf_kv *kv;
    int rc = hearth_gguf_get_arr(g, "tokenizer.ggml.tokens", HEARTH_GGUF_STRING, &kv, err);
    if (rc)
        return rc;
    if (kv->arr_n == 0 || kv->arr_n > (1u << 24))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key 'tokenizer.ggml.tokens' at offset %llu: %llu tokens is out of range (1..16777216)",
                              g->path, (unsigned long long)kv->offset, (unsigned long long)kv->arr_n);
    if ((rc = hearth_vocab_init(v, (int32_t)kv->arr_n, err)))
        return rc;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const char *s;
        size_t n;
        hearth_gguf_arr_str(kv, (uint64_t)i, &s, &n);
        if ((rc = hearth_vocab_set_token(v, i, s, n, err))) {
            hearth_err_prefix(err, "%s: key 'tokenizer.ggml.tokens'", g->path);
            return rc;
        }
    }
    return HEARTH_OK;
}

/* A parallel array: absent is fine (*out = NULL), a wrong length is not. */
static int parallel(const hearth_gguf *g, const hearth_vocab *v, const char *key, const hearth_gguf_kv **out,
                    hearth_err *err)
{
    *out = NULL;
    if (!hearth_gguf_find_kv(g, key))
        return HEARTH_OK;
    int rc = hearth_gguf_get_arr(g, key, HEARTH_GGUF_TYPE_ANY, out, err);
    if (rc)
        return rc;
    if ((*out)->arr_n != (uint64_t)v->n_tokens)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' at offset %llu: %llu entries for %d tokens", g->path,
                              key, (unsigned long long)(*out)->offset, (unsigned long long)(*out)->arr_n,
                              (int)v->n_tokens);
    return HEARTH_OK;
}

static int load_scores_and_kinds(const hearth_gguf *g, hearth_vocab *v, hearth_err *err)
{
    const hearth_gguf_kv *kv;
    int rc = parallel(g, v, "tokenizer.ggml.scores", &kv, err);
    if (rc)
        return rc;
    for (int32_t i = 0; kv && i < v->n_tokens; i++)
        if (hearth_gguf_arr_f32(kv, (uint64_t)i, &v->score[i]))
            return hearth_err_set(err, HEARTH_EINVAL, "%s: key 'tokenizer.ggml.scores' at offset %llu: array of %s, expected f32",
                                  g->path, (unsigned long long)kv->offset, hearth_gguf_type_name(kv->arr_type));
    if ((rc = parallel(g, v, "tokenizer.ggml.token_type", &kv, err)))
        return rc;
    for (int32_t i = 0; kv && i < v->n_tokens; i++) {
        int32_t t;
        if (hearth_gguf_arr_i32(kv, (uint64_t)i, &t) || t < HEARTH_TOK_UNDEFINED || t > HEARTH_TOK_BYTE)
            return hearth_err_set(err, HEARTH_EINVAL, "%s: key 'tokenizer.ggml.token_type' at offset %llu: entry %d is not a token type (0..6)",
                                  g->path, (unsigned long long)kv->offset, (int)i);
        v->kind[i] = (uint8_t)t;
    }
    return HEARTH_OK;
}

static int load_merges(const hearth_gguf *g, hearth_vocab *v, hearth_err *err)
{
    const hearth_gguf_kv *kv;
    if (!hearth_gguf_find_kv(g, "tokenizer.ggml.merges"))
        return HEARTH_OK;
    int rc = hearth_gguf_get_arr(g, "tokenizer.ggml.merges", HEARTH_GGUF_STRING, &kv, err);
    if (rc)
        return rc;
    if (kv->arr_n > INT32_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key 'tokenizer.ggml.merges': %llu merges is too many",
                              g->path, (unsigned long long)kv->arr_n);
    if (kv->arr_n == 0)
        return HEARTH_OK;
    v->merges = calloc((size_t)kv->arr_n, sizeof *v->merges);
    if (!v->merges)
        return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory for %llu merges", g->path,
                              (unsigned long long)kv->arr_n);
    v->n_merges = (int32_t)kv->arr_n;
    for (int32_t i = 0; i < v->n_merges; i++) {
        const char *s;
        size_t n;
        hearth_gguf_arr_str(kv, (uint64_t)i, &s, &n);
        if (!(v->merges[i] = malloc(n + 1)))
            return hearth_err_set(err, HEARTH_ENOMEM, "%s: out of memory for merge %d", g->path, (int)i);
        memcpy(v->merges[i], s, n);
        v->merges[i][n] = 0;
    }
    return HEARTH_OK;
}

/* A special id: absent, u32 -1 and out-of-range ids all leave *out at -1. */
static int special(const hearth_gguf *g, const hearth_vocab *v, const char *key, int32_t *out, hearth_err *err)
{
    const hearth_gguf_kv *kv = hearth_gguf_find_kv(g, key);
    if (!kv)
        return HEARTH_OK;
    int64_t id;
    if (hearth_gguf_kv_i64(kv, &id))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s' at offset %llu: type is %s, expected an integer",
                              g->path, key, (unsigned long long)kv->offset, hearth_gguf_type_name(kv->type));
    if (id >= 0 && id < v->n_tokens)
        *out = (int32_t)id;
    else if (id != UINT32_MAX && id != -1)
        HLOG_WARN("%s: %s = %lld is not a token id (%d tokens); ignored", g->path, key, (long long)id,
                  (int)v->n_tokens);
    return HEARTH_OK;
}

static int flag(const hearth_gguf *g, const char *key, int *out, hearth_err *err)
{
    if (!hearth_gguf_find_kv(g, key))
        return HEARTH_OK;
    bool b;
    int rc = hearth_gguf_get_bool(g, key, &b, err);
    if (rc == HEARTH_OK)
        *out = b ? 1 : 0;
    return rc;
}

/* A short string option copied into a fixed field (model, pre). */
static int name_field(const hearth_gguf *g, const char *key, char *dst, size_t cap, hearth_err *err)
{
    if (!hearth_gguf_find_kv(g, key))
        return HEARTH_OK;
    const char *s;
    size_t n;
    int rc = hearth_gguf_get_str(g, key, &s, &n, err);
    if (rc)
        return rc;
    if (n >= cap || memchr(s, 0, n))
        return hearth_err_set(err, HEARTH_EINVAL, "%s: key '%s': value of %zu bytes is longer than %zu or holds a NUL",
                              g->path, key, n, cap - 1);
    memcpy(dst, s, n);
    dst[n] = 0;
    return HEARTH_OK;
}

static int load_options(const hearth_gguf *g, hearth_vocab *v, hearth_err *err)
{
    static const struct {
        const char *key;
        size_t field;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(hearth_vocab, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(hearth_vocab, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(hearth_vocab, eot)},
        {"tokenizer.ggml.unknown_token_id", offsetof(hearth_vocab, unk)},
        {"tokenizer.ggml.seperator_token_id", offsetof(hearth_vocab, sep)},
        {"tokenizer.ggml.separator_token_id", offsetof(hearth_vocab, sep)},
        {"tokenizer.ggml.padding_token_id", offsetof(hearth_vocab, pad)},
        {"tokenizer.ggml.cls_token_id", offsetof(hearth_vocab, cls)},
        {"tokenizer.ggml.mask_token_id", offsetof(hearth_vocab, mask)},
        /* the older names first, so the newer win when a file has both */
        {"tokenizer.ggml.prefix_token_id", offsetof(hearth_vocab, fim_pre)},
        {"tokenizer.ggml.suffix_token_id", offsetof(hearth_vocab, fim_suf)},
        {"tokenizer.ggml.middle_token_id", offsetof(hearth_vocab, fim_mid)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(hearth_vocab, fim_pre)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(hearth_vocab, fim_suf)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(hearth_vocab, fim_mid)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(hearth_vocab, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(hearth_vocab, fim_sep)},
    };
    int rc;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if ((rc = special(g, v, ids[i].key, (int32_t *)((char *)v + ids[i].field), err)))
            return rc;
    if ((rc = flag(g, "tokenizer.ggml.add_bos_token", &v->add_bos, err)) ||
        (rc = flag(g, "tokenizer.ggml.add_eos_token", &v->add_eos, err)) ||
        (rc = flag(g, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix, err)) ||
        (rc = name_field(g, "tokenizer.ggml.model", v->model, sizeof v->model, err)) ||
        (rc = name_field(g, "tokenizer.ggml.pre", v->pre, sizeof v->pre, err)))
        return rc;
    return HEARTH_OK;
}

int hearth_gguf_load_vocab(const hearth_gguf *g, hearth_vocab *v, hearth_err *err)
{
    memset(v, 0, sizeof *v);
    int rc;
    if ((rc = load_tokens(g, v, err)) || (rc = load_scores_and_kinds(g, v, err)) || (rc = load_merges(g, v, err)) ||
        (rc = load_options(g, v, err)))
        goto fail;
    if ((rc = hearth_vocab_finish(v, err))) {
        hearth_err_prefix(err, "%s", g->path);
        goto fail;
    }
    hearth_vocab_guess_fim(v); /* code models whose GGUF names no FIM ids, as llama.cpp reads them */
    return HEARTH_OK;
fail:
    hearth_vocab_deinit(v);
    return rc;
}

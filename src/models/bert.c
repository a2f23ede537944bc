/* bert.c: a BERT encoder's life cycle and accessors: open (choosing the
 * loader from what the path is), close, the tokenizer with [CLS]/[SEP] and
 * the length limit, and the FLOP count of a forward pass.
 *
 * How: a directory is a sentence-transformers folder (bert_hf.c), anything
 * else a GGUF file (bert_gguf.c). Both loaders fill the same struct of views
 * (bert_int.h): weight matrices point into the source's mapping unless they
 * had to be converted or realigned, in which case the model owns the copy.
 * The optional dtype conversion (bf16, int8) runs once after loading.
 *
 * Tokenizing encodes the whole text first (at most one token per input byte,
 * so that buffer is bounded by the text) so an over-long text's error can
 * name its real length, not just "too long".
 *
 * Rejected: sniffing the GGUF magic to choose the loader (a directory test
 * is enough, and the GGUF reader names a wrong file better than we could).
 *
 * Calls: the loaders (bert_hf.c, bert_gguf.c) and bert_weights.c, which in
 * turn call down into bert_build.c; nothing calls back up into this file
 * (the helpers the loaders share were here once, which made a circle). */
#include "models/bert.h"
#include "models/bert_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int hearth_bert_open(hearth_bert **out, const char *path, enum hearth_bert_dtype dtype, hearth_err *err)
{
    *out = NULL;
    if (dtype != HEARTH_BERT_F32 && dtype != HEARTH_BERT_BF16 && dtype != HEARTH_BERT_INT8)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: unknown weight dtype %d", path, (int)dtype);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return hearth_err_set(err, HEARTH_ENOTFOUND, "bert: %s: no such file or directory", path);
        return hearth_err_sys(err, errno, "bert: %s", path);
    }
    hearth_bert *m = calloc(1, sizeof *m);
    if (!m)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", path);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->dev = hearth_dev_default();
    int rc = S_ISDIR(st.st_mode) ? bert_load_hf(m, path, err) : bert_load_gguf(m, path, err);
    if (rc == 0 && dtype != HEARTH_BERT_F32)
        rc = bert_convert_weights(m, dtype == HEARTH_BERT_BF16 ? HEARTH_BF16 : HEARTH_Q8_0, err);
    if (rc == 0)
        rc = bert_place_weights(m, err);
    if (rc) {
        hearth_bert_close(m);
        return rc;
    }
    *out = m;
    return HEARTH_OK;
}

void hearth_bert_close(hearth_bert *m)
{
    if (!m)
        return;
    bert_free_weights(m);
    for (size_t i = 0; i < m->owned.n; i++)
        free(m->owned.p[i]);
    free(m->owned.p);
    free(m->layers);
    if (m->src_close)
        m->src_close(m->src);
    free(m);
}

int64_t hearth_bert_dim(const hearth_bert *m)
{
    return m->hidden;
}

int64_t hearth_bert_max_tokens(const hearth_bert *m)
{
    return m->max_tokens;
}

enum hearth_pooling hearth_bert_pooling(const hearth_bert *m)
{
    switch (m->pooling) {
    case 1: return HEARTH_POOL_CLS;
    case 2: return HEARTH_POOL_LAST;
    default: return HEARTH_POOL_MEAN;
    }
}

void hearth_bert_set_pooling(hearth_bert *m, enum hearth_pooling p)
{
    m->pooling = p == HEARTH_POOL_CLS ? 1 : p == HEARTH_POOL_LAST ? 2 : 0; /* the device's HEARTH_DEV_POOL_* */
}

bool hearth_bert_normalizes(const hearth_bert *m)
{
    return m->normalize;
}

const hearth_vocab *hearth_bert_vocab(const hearth_bert *m)
{
    return m->vocab;
}

double hearth_bert_flops(const hearth_bert *m, int n_seqs, const int32_t *lens)
{
    /* per token and layer: Q, K, V, O (h x h each) and the two FFN matrices;
     * per sequence and layer: Q K^T and P V, len x len x h each; 2 FLOPs per
     * multiply-add. Embeddings, norms, GELU and softmax are O(h) per token
     * and left out, as FLOP-rate reports usually do. */
    double h = (double)m->hidden, ff = (double)m->n_ff, total = 0;
    for (int s = 0; s < n_seqs; s++) {
        double len = lens[s] > 0 ? (double)lens[s] : 0;
        total += len * 2.0 * (4.0 * h * h + 2.0 * h * ff) + 2.0 * 2.0 * len * len * h;
    }
    return total * (double)m->n_layer;
}

const char *hearth_bert_prompt(const hearth_bert *m, const char *name, size_t *len)
{
    for (int i = 0; i < m->n_prompts; i++) {
        if (!strcmp(m->prompts[i].name, name)) {
            *len = m->prompts[i].len;
            return m->prompts[i].text;
        }
    }
    return NULL;
}

const char *hearth_bert_default_prompt(const hearth_bert *m)
{
    return m->default_prompt ? m->default_prompt->name : NULL;
}

void hearth_bert_prompt_names(const hearth_bert *m, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; i < m->n_prompts && at < cap; i++) {
        int k = snprintf(out + at, cap - at, "%s%s", i ? ", " : "", m->prompts[i].name);
        if (k < 0)
            break;
        at += (size_t)k;
    }
}

int hearth_bert_decode(const hearth_bert *m, const int32_t *ids, size_t n, bool skip_special, hearth_buf *out,
                       hearth_err *err)
{
    return hearth_wordpiece_decode(&m->wp, ids, n, skip_special, out, err);
}

int hearth_bert_tokenize(const hearth_bert *m, const char *text, size_t n, enum hearth_bert_truncate trunc,
                         hearth_ids *out, hearth_err *err)
{
    return hearth_bert_tokenize_spans(m, text, n, trunc, out, NULL, err);
}

int hearth_bert_tokenize_spans(const hearth_bert *m, const char *text, size_t n, enum hearth_bert_truncate trunc,
                               hearth_ids *out, hearth_tok_span *spans, hearth_err *err)
{
    /* a WordPiece token covers at least one byte of text; spans of the body
     * start at spans + 1, after [CLS]'s */
    hearth_ids body;
    hearth_ids_init(&body, n + 1);
    int rc = hearth_wordpiece_encode_spans(&m->wp, text, n, &body, spans ? spans + 1 : NULL, spans ? n : 0, err);
    if (rc)
        goto done;
    size_t room = (size_t)m->max_tokens - 2, keep = body.n, first = 0;
    if (body.n > room && trunc != HEARTH_BERT_NO_LIMIT) {
        if (trunc == HEARTH_BERT_NO_TRUNCATE) {
            rc = hearth_err_set(err, HEARTH_ELIMIT,
                                "bert: the text is %zu tokens with [CLS] and [SEP]; the model takes at most %lld",
                                body.n + 2, (long long)m->max_tokens);
            goto done;
        }
        keep = room;
        if (trunc == HEARTH_BERT_TRUNCATE_LEFT)
            first = body.n - room;
    }
    out->n = 0;
    rc = hearth_ids_push(out, m->cls);
    for (size_t i = 0; rc == 0 && i < keep; i++)
        rc = hearth_ids_push(out, body.v[first + i]);
    if (rc == 0)
        rc = hearth_ids_push(out, m->sep);
    if (rc == 0 && spans) {
        if (first)
            memmove(spans + 1, spans + 1 + first, keep * sizeof *spans);
        /* the specials come from no input bytes */
        spans[0] = (hearth_tok_span){0, 0};
        spans[keep + 1] = (hearth_tok_span){0, 0};
    }
    if (rc)
        hearth_err_set(err, rc, "bert: %zu tokens do not fit the caller's id list (max %zu)", keep + 2, out->max);
done:
    hearth_ids_deinit(&body);
    return rc;
}

bool hearth_bert_is_reranker(const hearth_bert *m)
{
    return m->rank;
}

const char *hearth_bert_no_rerank_reason(const hearth_bert *m)
{
    return m->no_rank;
}

/* [CLS] query [SEP] document [SEP]. A pair too long loses the end of its
 * document first, as transformers' truncation="only_second" and TEI's
 * reranker (which truncates the pair's second text) do; the query is never
 * cut, so a query that alone does not fit is the one error. Rejected:
 * "longest_first" (a long query would silently lose its end, and the
 * query is what every document is scored against). */
int hearth_bert_tokenize_pair(const hearth_bert *m, const char *query, size_t qn, const char *doc, size_t dn,
                              hearth_ids *out, size_t *doc_cut, hearth_err *err)
{
    hearth_ids q, d;
    hearth_ids_init(&q, qn + 1);
    hearth_ids_init(&d, dn + 1);
    int rc = hearth_wordpiece_encode(&m->wp, query, qn, &q, err);
    if (rc) {
        hearth_err_prefix(err, "query");
        goto done;
    }
    if ((rc = hearth_wordpiece_encode(&m->wp, doc, dn, &d, err))) {
        hearth_err_prefix(err, "document");
        goto done;
    }
    size_t room = m->max_tokens >= 3 ? (size_t)m->max_tokens - 3 : 0;
    if (q.n > room) {
        rc = hearth_err_set(err, HEARTH_ELIMIT,
                            "bert: the query is %zu tokens, with [CLS] and two [SEP] %zu; the model takes at most %lld "
                            "for the query and the document together",
                            q.n, q.n + 3, (long long)m->max_tokens);
        goto done;
    }
    size_t keep = d.n < room - q.n ? d.n : room - q.n;
    if (doc_cut)
        *doc_cut = d.n - keep;
    out->n = 0;
    rc = hearth_ids_push(out, m->cls);
    for (size_t i = 0; rc == 0 && i < q.n; i++)
        rc = hearth_ids_push(out, q.v[i]);
    if (rc == 0)
        rc = hearth_ids_push(out, m->sep);
    for (size_t i = 0; rc == 0 && i < keep; i++)
        rc = hearth_ids_push(out, d.v[i]);
    if (rc == 0)
        rc = hearth_ids_push(out, m->sep);
    if (rc)
        hearth_err_set(err, rc, "bert: %zu tokens do not fit the caller's id list (max %zu)", q.n + keep + 3, out->max);
done:
    hearth_ids_deinit(&q);
    hearth_ids_deinit(&d);
    return rc;
}

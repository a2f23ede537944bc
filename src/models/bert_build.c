/* bert_build.c: the helpers a BERT loader builds a model with: memory the
 * model owns, f32 copies of small vectors, weight views realigned when their
 * source is not, and the last checks and tokenizer set-up once every field is
 * filled.
 *
 * How: every block a loader allocates is recorded in m->owned and freed by
 * hearth_bert_close (bert.c), so a loader that fails half-way leaks nothing
 * and needs no cleanup of its own.
 *
 * Calls: nothing else in the bert files. bert.c opens a model through the
 * loaders (bert_hf.c, bert_gguf.c) and bert_weights.c; they, and not bert.c,
 * call down into this file, so the calls run one way: bert.c -> loaders ->
 * bert_build.c. Rejected: keeping these in bert.c, which made bert.c and its
 * loaders call each other. */
#include "models/bert_int.h"

#include "engine/quant.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bert_own(hearth_bert *m, void *p, hearth_err *err)
{
    if (!p)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", m->path);
    if (m->owned.n == m->owned.cap) {
        size_t cap = m->owned.cap ? m->owned.cap * 2 : 64;
        void **q = realloc(m->owned.p, cap * sizeof *q);
        if (!q) {
            free(p);
            return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", m->path);
        }
        m->owned.p = q;
        m->owned.cap = cap;
    }
    m->owned.p[m->owned.n++] = p;
    return HEARTH_OK;
}

void *bert_alloc(hearth_bert *m, size_t n, hearth_err *err)
{
    /* 64-byte aligned: the matmul kernels read these rows with wide loads */
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 1) != 0)
        p = NULL;
    return bert_own(m, p, err) ? NULL : p;
}

const float *bert_f32_copy(hearth_bert *m, hearth_dtype type, const void *src, int64_t n, const char *name,
                           hearth_err *err)
{
    size_t bytes;
    if (!hearth_dtype_row_bytes(type, n, &bytes))
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: tensor '%s': %lld elements are not whole blocks",
                              m->path, name, (long long)n),
               NULL;
    float *out = bert_alloc(m, (size_t)n * sizeof(float), err);
    if (!out)
        return NULL;
    /* the source may sit at any byte offset (safetensors does not promise
     * alignment), so dequantize from an aligned copy of its bytes */
    void *tmp = malloc(bytes ? bytes : 1);
    if (!tmp)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", m->path), NULL;
    memcpy(tmp, src, bytes);
    int rc = hearth_quant_dequantize_row(type, tmp, out, n);
    free(tmp);
    if (rc)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: tensor '%s': type %d cannot be read as f32",
                              m->path, name, (int)type),
               NULL;
    return out;
}

int bert_mat_set(hearth_bert *m, bert_mat *out, hearth_dtype type, const void *data, int64_t rows, int64_t cols,
                 const char *name, hearth_err *err)
{
    size_t row_bytes;
    if (rows < 0 || cols < 0 || !hearth_dtype_row_bytes(type, cols, &row_bytes))
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: tensor '%s': rows of %lld elements are not whole blocks",
                              m->path, name, (long long)cols);
    /* f32 rows are read as floats, every other type as 16-bit fields */
    size_t align = type == HEARTH_F32 ? 4 : 2;
    if ((uintptr_t)data % align) {
        void *copy = bert_alloc(m, row_bytes * (size_t)rows, err);
        if (!copy)
            return HEARTH_ENOMEM;
        memcpy(copy, data, row_bytes * (size_t)rows);
        data = copy;
    }
    *out = (bert_mat){.type = type, .data = data, .row_bytes = row_bytes, .rows = rows, .cols = cols};
    return HEARTH_OK;
}

int bert_finish(hearth_bert *m, const hearth_wordpiece_opts *wp_opts, hearth_err *err)
{
    int rc = hearth_wordpiece_init(&m->wp, m->vocab, wp_opts, err);
    if (rc) {
        hearth_err_prefix(err, "bert: %s", m->path);
        return rc;
    }
    m->cls = hearth_wordpiece_cls(&m->wp);
    m->sep = hearth_wordpiece_sep(&m->wp);
    if (m->cls < 0 || m->sep < 0)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: the vocab has no %s token", m->path,
                              m->cls < 0 ? "[CLS]" : "[SEP]");
    if (m->max_tokens <= 0 || m->max_tokens > m->n_pos)
        m->max_tokens = m->n_pos;
    if (m->max_tokens < 2)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: a sequence limit of %lld tokens cannot hold [CLS] and [SEP]",
                              m->path, (long long)m->max_tokens);
    /* the loaders copy the whole token-type table into type0: row 1 follows
     * row 0 (a one-type model, as XLM-R-style ones are, has only row 0) */
    m->type1 = m->n_types >= 2 ? m->type0 + m->hidden : m->type0;
    if (m->rank && m->max_tokens < 3) {
        m->rank = false;
        snprintf(m->no_rank, sizeof m->no_rank, "model %s: a sequence limit of %lld tokens cannot hold a pair", m->path,
                 (long long)m->max_tokens);
    }
    return m->rank ? bert_rank_tables(m, err) : HEARTH_OK;
}

/* The embed op adds one position row and one type row to every token; a
 * pair needs type 0 or 1 per token. Rather than a per-token type array in
 * the device's step block (a change to every backend's embed kernel), the
 * two are folded into one table the position index picks from: row p is
 * pos[p] + type0, row n_pos + p is pos[p] + type1, and the type row added
 * is zeros. 2 x n_pos x hidden floats (512 x 384: 1.5 MB), rerankers only. */
int bert_rank_tables(hearth_bert *m, hearth_err *err)
{
    int64_t h = m->hidden;
    float *t = bert_alloc(m, (size_t)(2 * m->n_pos * h) * sizeof(float), err);
    float *z = t ? bert_alloc(m, (size_t)h * sizeof(float), err) : NULL;
    if (!z)
        return HEARTH_ENOMEM;
    for (int64_t p = 0; p < m->n_pos; p++)
        for (int64_t i = 0; i < h; i++) {
            t[p * h + i] = m->pos_embd[p * h + i] + m->type0[i];
            t[(m->n_pos + p) * h + i] = m->pos_embd[p * h + i] + m->type1[i];
        }
    memset(z, 0, (size_t)h * sizeof(float));
    m->pos_type = t;
    m->zero_row = z;
    return HEARTH_OK;
}

/* bert_gguf.c: a hearth_bert from a GGUF file of llama.cpp's `bert`
 * architecture.
 *
 * Names and keys are llama.cpp's (convert_hf_to_gguf.py's BertModel and
 * gguf-py's constants): token_embd.weight, position_embd.weight,
 * token_types.weight, token_embd_norm.{weight,bias}, and per block N
 * blk.N.attn_{q,k,v}.{weight,bias}, attn_output.{weight,bias},
 * attn_output_norm.{weight,bias}, ffn_up.{weight,bias}, ffn_down.{weight,bias},
 * layer_output_norm.{weight,bias}; metadata bert.embedding_length,
 * bert.block_count, bert.attention.head_count, bert.feed_forward_length,
 * bert.context_length, bert.attention.layer_norm_epsilon, bert.pooling_type
 * (1 mean, 2 cls, 3 last; absent: mean). GGUF dims are innermost first, so a
 * Linear's [out][in] is ne = {in, out}. The vocab (tokenizer.ggml.*) is read
 * by hearth_gguf_load_vocab; its "\u2581word" spelling is wordpiece.c's
 * business.
 *
 * Linear weights are used in place in any type the matmul reads (F32, F16,
 * BF16, Q8_0, Q4_0, Q4_K, Q6_K); vectors are copied to f32.
 *
 * Normalization: a GGUF file has no sentence-transformers module list, and
 * llama.cpp's server L2-normalizes embeddings by default, so a GGUF model
 * reports that it normalizes (hearth_bert_normalizes), giving the vectors
 * llama-server gives. The sequence limit is bert.context_length.
 *
 * Rerankers (llama.cpp's pooling type 4, RANK): the head is cls.weight
 * [hidden, hidden] + cls.bias (the pooler: dense then tanh on the [CLS]
 * row) and cls.output.weight [hidden, 1] + cls.output.bias [1] (the
 * one-label classifier), as llama.cpp's graph applies them; hearth's
 * converter writes BertForSequenceClassification's pooler and classifier
 * under these names. A cls.weight of [hidden, 1] with no cls.output (the
 * jina-reranker-v1 layout) is refused by name.
 *
 * Rejected: a fused blk.N.attn_qkv (llama.cpp's bert converter never writes
 * one; refused by name rather than guessed at). */
#include "models/bert_int.h"
#include "models/gguf.h"
#include "models/gguf_vocab.h"

#include "engine/dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_CAP 96

typedef struct gguf_src {
    hearth_gguf g;
    hearth_vocab vocab;
} gguf_src;

static void src_close(void *p)
{
    gguf_src *s = p;
    if (!s)
        return;
    hearth_vocab_deinit(&s->vocab);
    hearth_gguf_close(&s->g);
    free(s);
}

/* The tensor called name with n_dims dims ne0 (, ne1). */
static int tensor(hearth_bert *m, const hearth_gguf *g, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                  const hearth_gguf_tensor **out, hearth_err *err)
{
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(g, name);
    if (!t)
        return hearth_err_set(err, HEARTH_ENOTFOUND, "bert: %s: tensor '%s' is missing", m->path, name);
    bool ok = n_dims == 1 ? t->n_dims == 1 && t->ne[0] == ne0 : t->n_dims == 2 && t->ne[0] == ne0 && t->ne[1] == ne1;
    if (!ok)
        return hearth_err_set(err, HEARTH_EINVAL,
                              "bert: %s: tensor '%s' has %d dims [%lld, %lld]; expected %d dims [%lld, %lld]", m->path,
                              name, t->n_dims, (long long)t->ne[0], (long long)t->ne[1], n_dims, (long long)ne0,
                              (long long)(n_dims == 1 ? 1 : ne1));
    *out = t;
    return HEARTH_OK;
}

static int get_f32(hearth_bert *m, const hearth_gguf *g, const char *name, int n_dims, int64_t ne0, int64_t ne1,
                   const float **out, hearth_err *err)
{
    const hearth_gguf_tensor *t;
    int rc = tensor(m, g, name, n_dims, ne0, ne1, &t, err);
    if (rc)
        return rc;
    *out = bert_f32_copy(m, t->type, t->data, ne0 * (n_dims == 1 ? 1 : ne1), name, err);
    return *out ? HEARTH_OK : HEARTH_ENOMEM;
}

/* "<base>.weight" as (rows, cols) and "<base>.bias" (rows), or "<base>.weight"/".bias" of a norm. */
static int get_linear(hearth_bert *m, const hearth_gguf *g, const char *base, int64_t rows, int64_t cols, bert_mat *w,
                      const float **b, hearth_err *err)
{
    char name[NAME_CAP];
    const hearth_gguf_tensor *t;
    snprintf(name, sizeof name, "%s.weight", base);
    int rc = tensor(m, g, name, 2, cols, rows, &t, err);
    if (rc || (rc = bert_mat_set(m, w, t->type, t->data, rows, cols, name, err)))
        return rc;
    snprintf(name, sizeof name, "%s.bias", base);
    return get_f32(m, g, name, 1, rows, 0, b, err);
}

static int get_norm(hearth_bert *m, const hearth_gguf *g, const char *base, const float **w, const float **b,
                    hearth_err *err)
{
    char name[NAME_CAP];
    snprintf(name, sizeof name, "%s.weight", base);
    int rc = get_f32(m, g, name, 1, m->hidden, 0, w, err);
    if (rc)
        return rc;
    snprintf(name, sizeof name, "%s.bias", base);
    return get_f32(m, g, name, 1, m->hidden, 0, b, err);
}

static int load_layer(hearth_bert *m, const hearth_gguf *g, int64_t i, bert_layer *l, hearth_err *err)
{
    int64_t h = m->hidden, ff = m->n_ff;
    char base[NAME_CAP];
    snprintf(base, sizeof base, "blk.%lld.attn_qkv.weight", (long long)i);
    if (hearth_gguf_find_tensor(g, base))
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: fused tensor '%s' is not supported (expected attn_q, attn_k, attn_v)",
                              m->path, base);
    int rc;
#define BLK(sub) (snprintf(base, sizeof base, "blk.%lld.%s", (long long)i, sub), base)
    if ((rc = get_linear(m, g, BLK("attn_q"), h, h, &l->q, &l->bq, err)) ||
        (rc = get_linear(m, g, BLK("attn_k"), h, h, &l->k, &l->bk, err)) ||
        (rc = get_linear(m, g, BLK("attn_v"), h, h, &l->v, &l->bv, err)) ||
        (rc = get_linear(m, g, BLK("attn_output"), h, h, &l->o, &l->bo, err)) ||
        (rc = get_norm(m, g, BLK("attn_output_norm"), &l->ln1_w, &l->ln1_b, err)) ||
        (rc = get_linear(m, g, BLK("ffn_up"), ff, h, &l->up, &l->b_up, err)) ||
        (rc = get_linear(m, g, BLK("ffn_down"), h, ff, &l->down, &l->b_down, err)) ||
        (rc = get_norm(m, g, BLK("layer_output_norm"), &l->ln2_w, &l->ln2_b, err)))
        return rc;
#undef BLK
    return HEARTH_OK;
}

/* key as an integer in [lo, hi]. */
static int get_int(hearth_bert *m, const hearth_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out,
                   hearth_err *err)
{
    int rc = hearth_gguf_get_i64(g, key, out, err);
    if (rc)
        return rc;
    if (*out < lo || *out > hi)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: key '%s' is %lld; expected %lld..%lld", m->path, key,
                              (long long)*out, (long long)lo, (long long)hi);
    return HEARTH_OK;
}

static int read_hparams(hearth_bert *m, const hearth_gguf *g, hearth_err *err)
{
    const char *arch;
    size_t arch_len;
    int rc = hearth_gguf_get_str(g, "general.architecture", &arch, &arch_len, err);
    if (rc)
        return rc;
    if (arch_len != 4 || memcmp(arch, "bert", 4) != 0)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: general.architecture is \"%.*s\", not \"bert\"",
                              m->path, (int)(arch_len > 64 ? 64 : arch_len), arch);
    if ((rc = get_int(m, g, "bert.embedding_length", 1, BERT_MAX_HIDDEN, &m->hidden, err)) ||
        (rc = get_int(m, g, "bert.block_count", 1, BERT_MAX_LAYERS, &m->n_layer, err)) ||
        (rc = get_int(m, g, "bert.attention.head_count", 1, m->hidden, &m->n_head, err)) ||
        (rc = get_int(m, g, "bert.feed_forward_length", 1, BERT_MAX_FF, &m->n_ff, err)) ||
        (rc = get_int(m, g, "bert.context_length", 2, BERT_MAX_POSITIONS, &m->max_tokens, err)))
        return rc;
    if (m->hidden % m->n_head)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: bert.attention.head_count (%lld) does not divide bert.embedding_length (%lld)",
                              m->path, (long long)m->n_head, (long long)m->hidden);
    /* the head size is a device limit: asked of the default device here, so a
     * header alone is refused naming its key (bert_place_weights asks the
     * device the model really opens on again) */
    const hearth_dev *dev = hearth_dev_default();
    if (m->hidden / m->n_head > dev->caps.head_dim_max)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "bert: %s: bert.attention.head_count (%lld) makes heads of %lld of bert.embedding_length "
                              "(%lld); the attention of device %s takes at most %lld",
                              m->path, (long long)m->n_head, (long long)(m->hidden / m->n_head), (long long)m->hidden,
                              dev->caps.name, (long long)dev->caps.head_dim_max);
    if ((rc = hearth_gguf_get_f32(g, "bert.attention.layer_norm_epsilon", &m->eps, err)))
        return rc;
    if (!(m->eps > 0 && m->eps <= 0.1f))
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: bert.attention.layer_norm_epsilon %g is not in (0, 0.1]",
                              m->path, (double)m->eps);
    int64_t pooling = 1;
    if (hearth_gguf_find_kv(g, "bert.pooling_type") && (rc = get_int(m, g, "bert.pooling_type", 0, 1 << 20, &pooling, err)))
        return rc;
    /* llama.cpp's numbering: 0 none, 1 mean, 2 cls, 3 last, 4 rank */
    if (pooling < 1 || pooling > 4)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: bert.pooling_type %lld is not supported (1 mean, 2 cls, 3 last, 4 rank)",
                              m->path, (long long)pooling);
    m->rank = pooling == 4;
    m->pooling = m->rank ? 1 : (int)pooling - 1; /* a reranker's /embed would pool [CLS], the head's input */
    m->normalize = true;
    return HEARTH_OK;
}

/* The RANK head (see the top of the file); m->rank is set by read_hparams. */
static int load_head(hearth_bert *m, const hearth_gguf *g, hearth_err *err)
{
    if (!m->rank) {
        snprintf(m->no_rank, sizeof m->no_rank,
                 "model %s has no reranking head (bert.pooling_type is not 4, rank): it embeds, it cannot rerank", m->path);
        return HEARTH_OK;
    }
    int64_t h = m->hidden;
    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(g, "cls.weight");
    if (t && t->n_dims == 2 && t->ne[1] == 1 && !hearth_gguf_find_tensor(g, "cls.output.weight"))
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "bert: %s: tensor 'cls.weight' is [%lld, 1] with no 'cls.output.weight' (jina-reranker-v1's "
                              "head): not supported; hearth reranks with a pooler cls [%lld, %lld] and a classifier cls.output",
                              m->path, (long long)t->ne[0], (long long)h, (long long)h);
    const float *b;
    int rc;
    if ((rc = get_f32(m, g, "cls.weight", 2, h, h, &m->pool_w, err)) ||
        (rc = get_f32(m, g, "cls.bias", 1, h, 0, &m->pool_b, err)) ||
        (rc = get_f32(m, g, "cls.output.weight", 2, h, 1, &m->cls_w, err)) ||
        (rc = get_f32(m, g, "cls.output.bias", 1, 1, 0, &b, err)))
        return rc;
    m->cls_b = b[0];
    return HEARTH_OK;
}

int bert_load_gguf(hearth_bert *m, const char *path, hearth_err *err)
{
    gguf_src *s = calloc(1, sizeof *s);
    if (!s)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", path);
    m->src = s;
    m->src_close = src_close;
    int rc = hearth_gguf_open(&s->g, path, err);
    if (rc || (rc = read_hparams(m, &s->g, err)))
        return rc;
    if ((rc = hearth_gguf_load_vocab(&s->g, &s->vocab, err)))
        return rc;
    m->vocab = &s->vocab;

    const hearth_gguf_tensor *t = hearth_gguf_find_tensor(&s->g, "token_embd.weight");
    if (!t)
        return hearth_err_set(err, HEARTH_ENOTFOUND, "bert: %s: tensor 'token_embd.weight' is missing", path);
    m->n_vocab = t->ne[1];
    if ((rc = tensor(m, &s->g, "token_embd.weight", 2, m->hidden, m->n_vocab, &t, err)) ||
        (rc = bert_mat_set(m, &m->tok_embd, t->type, t->data, m->n_vocab, m->hidden, t->name, err)))
        return rc;
    if (s->vocab.n_tokens > m->n_vocab)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: %d vocab tokens but token_embd.weight has %lld rows", path,
                              (int)s->vocab.n_tokens, (long long)m->n_vocab);
    if ((t = hearth_gguf_find_tensor(&s->g, "position_embd.weight")))
        m->n_pos = t->ne[1];
    if ((t = hearth_gguf_find_tensor(&s->g, "token_types.weight")))
        m->n_types = t->ne[1];
    if ((rc = get_f32(m, &s->g, "position_embd.weight", 2, m->hidden, m->n_pos, &m->pos_embd, err)) ||
        (rc = get_f32(m, &s->g, "token_types.weight", 2, m->hidden, m->n_types, &m->type0, err)) ||
        (rc = get_norm(m, &s->g, "token_embd_norm", &m->emb_ln_w, &m->emb_ln_b, err)))
        return rc;
    if (m->n_pos < 1 || m->n_pos > BERT_MAX_POSITIONS || m->n_types < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: position_embd.weight has %lld rows, token_types.weight %lld",
                              path, (long long)m->n_pos, (long long)m->n_types);
    if (m->max_tokens > m->n_pos)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: bert.context_length %lld > %lld position embeddings", path,
                              (long long)m->max_tokens, (long long)m->n_pos);
    m->layers = calloc((size_t)m->n_layer, sizeof *m->layers);
    if (!m->layers)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", path);
    for (int64_t i = 0; i < m->n_layer; i++)
        if ((rc = load_layer(m, &s->g, i, &m->layers[i], err)))
            return rc;
    if ((rc = load_head(m, &s->g, err)))
        return rc;
    return bert_finish(m, NULL, err);
}

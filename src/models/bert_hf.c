/* bert_hf.c: a hearth_bert from a sentence-transformers folder.
 *
 * How: hf_folder.c opens and checks the folder (config, pooling, tokenizer,
 * the safetensors mapping and its name prefix); this file asks it for every
 * tensor BertModel has, each with the shape the config implies, so a wrong
 * shape or a missing tensor fails at open with the file and tensor named.
 * Linear weights stay in the mapping as stored (F32, F16 or BF16: the matmul
 * reads all three); the small vectors (biases, norms, position and token-type
 * rows) are copied to f32 once, so the forward pass has one type to read.
 *
 * Old TF-converted checkpoints call LayerNorm parameters gamma/beta; both
 * spellings are accepted. The pooler (tanh dense) is not loaded for an
 * encoder: sentence-transformers does not use it.
 *
 * A cross-encoder (transformers' BertForSequenceClassification) is known by
 * its tensor classifier.weight, named without the "bert." prefix the encoder
 * and pooler carry; then the pooler and the classifier are loaded as the
 * reranking head. Only a one-label classifier is a reranker: with more
 * labels (NLI, sentiment) the head is left unloaded, the model still embeds
 * and hearth_bert_no_rerank_reason says why it cannot rerank. Rejected:
 * trusting config.json's "architectures" alone (the tensors decide what
 * can run; a wrong config would fail later and less clearly). */
#include "models/bert_int.h"
#include "models/hf_folder.h"

#include <stdio.h>
#include <stdlib.h>

#define NAME_CAP 160

static void folder_close(void *p)
{
    hearth_hf_folder_close(p);
    free(p);
}

static int get(const hearth_hf_folder *f, const char *name, int n_dims, int64_t d0, int64_t d1,
               const hearth_st_tensor **out, hearth_err *err)
{
    int64_t shape[2] = {d0, d1};
    return hearth_hf_folder_tensor(f, name, n_dims, shape, out, err);
}

/* An f32 copy of a (d0) vector (d1 == 0) or a (d0, d1) matrix. */
static int get_f32(hearth_bert *m, const hearth_hf_folder *f, const char *name, int64_t d0, int64_t d1,
                   const float **out, hearth_err *err)
{
    const hearth_st_tensor *t;
    int rc = get(f, name, d1 ? 2 : 1, d0, d1, &t, err);
    if (rc)
        return rc;
    *out = bert_f32_copy(m, t->type, t->data, t->n_elements, t->name, err);
    return *out ? HEARTH_OK : HEARTH_ENOMEM;
}

static int get_vec(hearth_bert *m, const hearth_hf_folder *f, const char *name, int64_t n, const float **out,
                   hearth_err *err)
{
    return get_f32(m, f, name, n, 0, out, err);
}

static int get_mat(hearth_bert *m, const hearth_hf_folder *f, const char *name, int64_t rows, int64_t cols,
                   bert_mat *out, hearth_err *err)
{
    const hearth_st_tensor *t;
    int rc = get(f, name, 2, rows, cols, &t, err);
    return rc ? rc : bert_mat_set(m, out, t->type, t->data, rows, cols, t->name, err);
}

/* "<base>.weight" or, failing that, the TF spelling "<base>.gamma" (and bias/beta). */
static int get_norm(hearth_bert *m, const hearth_hf_folder *f, const char *base, const float **w, const float **b,
                    hearth_err *err)
{
    char name[NAME_CAP];
    snprintf(name, sizeof name, "%s.gamma", base);
    char full[NAME_CAP + 16];
    snprintf(full, sizeof full, "%s%s", f->prefix, name);
    bool tf = hearth_st_find(&f->st, full) != NULL;
    snprintf(name, sizeof name, "%s.%s", base, tf ? "gamma" : "weight");
    int rc = get_vec(m, f, name, m->hidden, w, err);
    if (rc)
        return rc;
    snprintf(name, sizeof name, "%s.%s", base, tf ? "beta" : "bias");
    return get_vec(m, f, name, m->hidden, b, err);
}

/* "<base>.weight" (rows, cols) and "<base>.bias" (rows). */
static int get_linear(hearth_bert *m, const hearth_hf_folder *f, const char *base, int64_t rows, int64_t cols,
                      bert_mat *w, const float **b, hearth_err *err)
{
    char name[NAME_CAP];
    snprintf(name, sizeof name, "%s.weight", base);
    int rc = get_mat(m, f, name, rows, cols, w, err);
    if (rc)
        return rc;
    snprintf(name, sizeof name, "%s.bias", base);
    return get_vec(m, f, name, rows, b, err);
}

/* The head, when the folder has a classifier (see the top of the file). */
static int load_head(hearth_bert *m, const hearth_hf_folder *f, hearth_err *err)
{
    const hearth_st_tensor *c = hearth_st_find(&f->st, "classifier.weight");
    if (!c) {
        snprintf(m->no_rank, sizeof m->no_rank,
                 "model %s has no sequence-classification head (no tensor 'classifier.weight'): it embeds, it cannot rerank",
                 m->path);
        return HEARTH_OK;
    }
    if (c->n_dims != 2 || c->shape[1] != m->hidden)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: tensor 'classifier.weight' has %d dims [%lld, %lld]; expected [labels, %lld]",
                              m->path, c->n_dims, (long long)c->shape[0], (long long)c->shape[1], (long long)m->hidden);
    if (c->shape[0] != 1) {
        snprintf(m->no_rank, sizeof m->no_rank,
                 "model %s: its classifier has %lld labels; a reranker has one (a relevance logit)", m->path,
                 (long long)c->shape[0]);
        return HEARTH_OK;
    }
    const hearth_st_tensor *cb = hearth_st_find(&f->st, "classifier.bias");
    if (!cb || cb->n_elements != 1 || !cb->supported || !c->supported)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: tensor 'classifier.bias' is missing, not 1 element or of an unread type",
                              m->path);
    const float *b;
    int rc;
    if ((rc = get_f32(m, f, "pooler.dense.weight", m->hidden, m->hidden, &m->pool_w, err)) ||
        (rc = get_vec(m, f, "pooler.dense.bias", m->hidden, &m->pool_b, err)))
        return rc;
    if (!(m->cls_w = bert_f32_copy(m, c->type, c->data, m->hidden, c->name, err)) ||
        !(b = bert_f32_copy(m, cb->type, cb->data, 1, cb->name, err)))
        return HEARTH_ENOMEM;
    m->cls_b = b[0];
    m->rank = true;
    return HEARTH_OK;
}

static int load_layer(hearth_bert *m, const hearth_hf_folder *f, int64_t i, bert_layer *l, hearth_err *err)
{
    int64_t h = m->hidden, ff = m->n_ff;
    char base[NAME_CAP];
    int rc;
#define LAYER(sub) (snprintf(base, sizeof base, "encoder.layer.%lld.%s", (long long)i, sub), base)
    if ((rc = get_linear(m, f, LAYER("attention.self.query"), h, h, &l->q, &l->bq, err)) ||
        (rc = get_linear(m, f, LAYER("attention.self.key"), h, h, &l->k, &l->bk, err)) ||
        (rc = get_linear(m, f, LAYER("attention.self.value"), h, h, &l->v, &l->bv, err)) ||
        (rc = get_linear(m, f, LAYER("attention.output.dense"), h, h, &l->o, &l->bo, err)) ||
        (rc = get_norm(m, f, LAYER("attention.output.LayerNorm"), &l->ln1_w, &l->ln1_b, err)) ||
        (rc = get_linear(m, f, LAYER("intermediate.dense"), ff, h, &l->up, &l->b_up, err)) ||
        (rc = get_linear(m, f, LAYER("output.dense"), h, ff, &l->down, &l->b_down, err)) ||
        (rc = get_norm(m, f, LAYER("output.LayerNorm"), &l->ln2_w, &l->ln2_b, err)))
        return rc;
#undef LAYER
    return HEARTH_OK;
}

int bert_load_hf(hearth_bert *m, const char *dir, hearth_err *err)
{
    hearth_hf_folder *f = calloc(1, sizeof *f);
    if (!f)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", dir);
    m->src = f;
    m->src_close = folder_close;
    int rc = hearth_hf_folder_open(f, dir, err);
    if (rc)
        return rc;
    const hearth_bert_config *c = &f->config;
    m->n_vocab = c->vocab_size;
    m->hidden = c->hidden_size;
    m->n_layer = c->num_hidden_layers;
    m->n_head = c->num_attention_heads;
    m->n_ff = c->intermediate_size;
    m->n_pos = c->max_position_embeddings;
    m->n_types = c->type_vocab_size;
    m->eps = c->layer_norm_eps;
    m->pooling = (int)f->pooling;
    m->normalize = f->normalize;
    m->max_tokens = f->max_seq_len;
    m->vocab = &f->vocab;
    m->prompts = f->prompts;
    m->n_prompts = f->n_prompts;
    m->default_prompt = f->default_prompt >= 0 ? &f->prompts[f->default_prompt] : NULL;
    if (m->vocab->n_tokens > m->n_vocab)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %s: the tokenizer has %d tokens but config.json's vocab_size is %lld",
                              dir, (int)m->vocab->n_tokens, (long long)m->n_vocab);

    if ((rc = get_mat(m, f, "embeddings.word_embeddings.weight", m->n_vocab, m->hidden, &m->tok_embd, err)) ||
        (rc = get_f32(m, f, "embeddings.position_embeddings.weight", m->n_pos, m->hidden, &m->pos_embd, err)) ||
        (rc = get_f32(m, f, "embeddings.token_type_embeddings.weight", m->n_types, m->hidden, &m->type0, err)) ||
        (rc = get_norm(m, f, "embeddings.LayerNorm", &m->emb_ln_w, &m->emb_ln_b, err)))
        return rc;
    m->layers = calloc((size_t)m->n_layer, sizeof *m->layers);
    if (!m->layers)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", dir);
    for (int64_t i = 0; i < m->n_layer; i++)
        if ((rc = load_layer(m, f, i, &m->layers[i], err)))
            return rc;
    if ((rc = load_head(m, f, err)))
        return rc;
    return bert_finish(m, &f->wp_opts, err);
}

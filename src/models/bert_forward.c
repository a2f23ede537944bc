/* bert_forward.c: the walk of a BERT encoder over a batch of sequences,
 * written once over engine/dev.h's ops.
 *
 * How: the sequences are packed, without padding, into one (T, hidden)
 * activation matrix, T the sum of their lengths, so every Linear is one
 * matmul over all T rows (Q, K and V write side by side into one (T, 3h)
 * buffer through the output stride). Attention is the only step that needs
 * sequence boundaries: the device's packed attention attends over each
 * sequence's own rows only, so no key is ever padding and no mask is needed;
 * a sequence's vector is therefore the same in any batch as alone (the rows
 * it reads are the same rows). Bias adds are fused into the ops that follow
 * each matmul: Q/K/V biases into attention, the output biases into residual
 * + LayerNorm, the FFN bias into GELU.
 *
 *   x    (T, h)    embeddings, then the residual stream
 *   qkv  (T, 3h)   [q | k | v] per row, heads of head_dim side by side
 *   ctx  (T, h)    attention output
 *   ffn  (T, ff)   FFN hidden
 *   y    (T, h)    output of the O and down projections
 *
 * Per layer, the device ops in order: matmul x3 (qkv = x [Wq|Wk|Wv]^T);
 * attn_packed (ctx = attention(qkv + b)); matmul (y = ctx Wo^T);
 * add_layernorm (x = LN(x + y + bo)); matmul (ffn = x Wup^T); bias_gelu
 * (ffn = gelu(ffn + bup)); matmul (y = ffn Wdown^T); add_layernorm
 * (x = LN(x + y + bdown)). Before the layers, embed (token + position + type
 * rows, LayerNorm); after them, pool (mean / [CLS] / last per sequence, or
 * every row, and if asked L2 normalization).
 *
 * Per-step data (each row's token id and position, each sequence's first
 * row) is built on the host and uploaded as one hearth_batch block; the
 * pooled vectors reach the caller's buffer by one download at the end (on
 * the CPU, whose memory is the host's, pool writes them in place).
 *
 * Pairs (rerankers): a row's token type rides in its position index: a
 * second-segment row reads row n_pos + pos of the model's folded
 * position+type table (bert_build.c, bert_rank_tables), so the device's
 * embed op needs no per-row type array. The [CLS] rows are pooled as usual
 * and the head (pooler dense + tanh, then the one-label classifier) runs on
 * the host in double accumulation: n x (hidden^2 + hidden) multiply-adds, a
 * small fraction of one layer's, and it keeps the head off every backend.
 *
 * Rejected: padding to the longest sequence (wasted FLOPs on every Linear,
 * and a mask to get right: the -inf-mask bug class); one matmul per
 * sequence (short sentences would give the GEMM M of 10-20 rows, far below
 * where it reaches its peak); a scratch arena kept in the model (the
 * activations are the stream's arena instead, on the CPU the calling
 * thread's pass scratch, so engines running passes at once each have their
 * own, and the model stays free of size-dependent state); grouping Q, K and
 * V into one matmul call (three calls as before the seam: the same panels'
 * fetch-ahead chain, measured as it is). */
#include "models/bert.h"
#include "models/bert_int.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct fwd {
    const hearth_bert *m;
    hearth_stream st;
    const hearth_dev_ops *D;
    int64_t T;
    float *x, *qkv, *ctx, *ffn, *y;
    hearth_batch db;         /* the step block on the device */
} fwd;

static int linear(fwd *f, const bert_mat *w, const float *X, int64_t x_stride, float *Y, int64_t y_stride,
                  const char *what, int64_t layer, hearth_err *err)
{
    int rc = f->D->matmul(&f->st, (const hearth_weight *const[]){w->w}, 1, X, x_stride, f->T, &Y, &y_stride);
    if (rc)
        return hearth_err_set(err, rc, "bert: %s: layer %lld %s: matmul failed (%s)", f->m->path, (long long)layer,
                              what, hearth_status_name(rc));
    return HEARTH_OK;
}

static int op_failed(const fwd *f, int rc, const char *op, int64_t layer, hearth_err *err)
{
    return hearth_err_set(err, rc, "bert: %s: layer %lld: %s failed (%s)", f->m->path, (long long)layer, op,
                          hearth_status_name(rc));
}

static int run_layer(fwd *f, int64_t i, hearth_err *err)
{
    const hearth_bert *m = f->m;
    const hearth_dev_ops *D = f->D;
    hearth_stream *st = &f->st;
    const bert_layer *l = &m->layers[i];
    int64_t h = m->hidden, hd = h / m->n_head;
    int rc;
    if ((rc = linear(f, &l->q, f->x, h, f->qkv, 3 * h, "query", i, err)) ||
        (rc = linear(f, &l->k, f->x, h, f->qkv + h, 3 * h, "key", i, err)) ||
        (rc = linear(f, &l->v, f->x, h, f->qkv + 2 * h, 3 * h, "value", i, err)))
        return rc;
    if ((rc = D->attn_packed(st, f->ctx, f->qkv, l->bq, l->bk, l->bv, &f->db, m->n_head, hd,
                             1.0f / sqrtf((float)hd))))
        return op_failed(f, rc, "attention", i, err);
    if ((rc = linear(f, &l->o, f->ctx, h, f->y, h, "attention output", i, err)))
        return rc;
    if ((rc = D->add_layernorm(st, f->x, f->y, l->bo, f->T, h, l->ln1_w, l->ln1_b, m->eps)))
        return op_failed(f, rc, "attention LayerNorm", i, err);
    if ((rc = linear(f, &l->up, f->x, h, f->ffn, m->n_ff, "ffn up", i, err)))
        return rc;
    if ((rc = D->bias_gelu(st, f->ffn, l->b_up, f->T, m->n_ff)))
        return op_failed(f, rc, "gelu", i, err);
    if ((rc = linear(f, &l->down, f->ffn, m->n_ff, f->y, h, "ffn down", i, err)))
        return rc;
    if ((rc = D->add_layernorm(st, f->x, f->y, l->b_down, f->T, h, l->ln2_w, l->ln2_b, m->eps)))
        return op_failed(f, rc, "output LayerNorm", i, err);
    return HEARTH_OK;
}

static int check_input(const hearth_bert *m, int n_seqs, const int32_t *const *ids, const int32_t *lens,
                       hearth_err *err)
{
    for (int s = 0; s < n_seqs; s++) {
        if (lens[s] < 1 || lens[s] > m->max_tokens)
            return hearth_err_set(err, HEARTH_EINVAL, "bert: sequence %d has %d tokens; the model takes 1..%lld", s,
                                  (int)lens[s], (long long)m->max_tokens);
        for (int32_t i = 0; i < lens[s]; i++)
            if (ids[s][i] < 0 || ids[s][i] >= m->n_vocab)
                return hearth_err_set(err, HEARTH_EINVAL, "bert: sequence %d, position %d: token id %d is outside the vocab (0..%lld)",
                                      s, (int)i, (int)ids[s][i], (long long)m->n_vocab - 1);
    }
    return HEARTH_OK;
}

int hearth_bert_embed(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids, const int32_t *lens,
                      bool normalize, float *out, hearth_err *err)
{
    return hearth_bert_embed_stoppable(m, pool, n_seqs, ids, lens, NULL, normalize, out, NULL, NULL, err);
}

/* The first row of sequence s's second segment: the row after its first
 * [SEP] (WordPiece never makes [SEP] from text); len when there is none. */
static int32_t second_segment(const hearth_bert *m, const int32_t *ids, int32_t len)
{
    for (int32_t i = 1; i < len; i++)
        if (ids[i] == m->sep)
            return i + 1;
    return len;
}

static int forward(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids, const int32_t *lens,
                   const bool *all_tokens, bool normalize, bool pairs, float *out,
                   bool (*stop)(void *ctx, int64_t done, int64_t total), void *ctx, hearth_err *err)
{
    if (n_seqs < 0)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %d sequences", n_seqs);
    int rc = check_input(m, n_seqs, ids, lens, err);
    if (rc || n_seqs == 0)
        return rc;
    fwd f = {.m = m};
    int64_t T = 0, h = m->hidden, out_floats = 0;
    for (int s = 0; s < n_seqs; s++) {
        T += lens[s];
        out_floats += all_tokens && all_tokens[s] ? (int64_t)lens[s] * h : h;
    }
    f.T = T;
    /* floats per row over all buffers: x, qkv, ctx, y, ffn */
    int64_t per_row = 6 * h + m->n_ff;
    if (T > (int64_t)(SIZE_MAX / sizeof(float) / 2) / per_row)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %lld tokens in one batch is too many", (long long)T);
    if ((rc = hearth_stream_init(&f.st, m->dev, pool, err)))
        return rc;
    f.D = hearth_stream_ops(&f.st);
    /* the arena: activations, the pooled output where device memory is not
     * the host's, then the step block */
    hearth_batch hb;
    size_t act = (size_t)(T * per_row) * sizeof(float);
    size_t out_bytes = m->dev->caps.host_memory ? 0 : (size_t)out_floats * sizeof(float);
    size_t out_at = (act + 63) & ~(size_t)63, blk_at = (out_at + out_bytes + 63) & ~(size_t)63;
    size_t blk = hearth_batch_layout(&hb, NULL, T, 1, n_seqs);
    if ((rc = f.D->scratch(&f.st, blk_at + blk, blk))) {
        rc = hearth_err_set(err, rc, "bert: out of memory for a batch of %lld tokens", (long long)T);
        goto done;
    }
    char *base = f.st.scratch;
    f.x = (float *)base;
    f.qkv = f.x + T * h;
    f.ctx = f.qkv + T * 3 * h;
    f.y = f.ctx + T * h;
    f.ffn = f.y + T * h;
    float *dout = out_bytes ? (float *)(base + out_at) : out;
    hearth_batch_layout(&hb, f.st.staging, T, 1, n_seqs);
    hearth_batch_layout(&f.db, base + blk_at, T, 1, n_seqs);
    /* the step block: each row's token and position, each sequence's start */
    hb.seq_start[0] = 0;
    for (int s = 0; s < n_seqs; s++) {
        int64_t r0 = hb.seq_start[s];
        int32_t seg = pairs ? second_segment(m, ids[s], lens[s]) : lens[s];
        for (int32_t i = 0; i < lens[s]; i++) {
            hb.token[r0 + i] = ids[s][i];
            hb.pos[r0 + i] = i < seg ? i : m->n_pos + i; /* pairs: the folded table's type-1 half */
        }
        hb.seq_start[s + 1] = r0 + lens[s];
    }
    if ((rc = f.D->upload(&f.st, f.db.token, hb.token, blk))) {
        rc = hearth_err_set(err, rc, "bert: the batch's block cannot be uploaded");
        goto done;
    }
    if ((rc = f.D->embed(&f.st, f.x, m->tok_embd.w, &f.db, pairs ? m->pos_type : m->pos_embd,
                         pairs ? m->zero_row : m->type0, m->emb_ln_w, m->emb_ln_b, m->eps))) {
        rc = op_failed(&f, rc, "embeddings", -1, err);
        goto done;
    }
    for (int64_t i = 0; i < m->n_layer && rc == 0; i++) {
        rc = run_layer(&f, i, err);
        if (rc == 0 && stop && i + 1 < m->n_layer && stop(ctx, i + 1, m->n_layer))
            rc = HEARTH_EAGAIN;
    }
    if (rc == 0 && (rc = f.D->pool(&f.st, dout, f.x, h, &f.db, pairs ? HEARTH_DEV_POOL_CLS : m->pooling, normalize,
                                   all_tokens)))
        rc = op_failed(&f, rc, "pooling", m->n_layer, err);
    if (rc == 0 && out_bytes && (rc = f.D->download(&f.st, out, dout, out_bytes)))
        rc = hearth_err_set(err, rc, "bert: the vectors cannot be downloaded");
    if (rc == 0)
        rc = f.D->sync(&f.st);
done:
    hearth_stream_deinit(&f.st);
    return rc;
}

int hearth_bert_embed_stoppable(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids,
                                const int32_t *lens, const bool *all_tokens, bool normalize, float *out,
                                bool (*stop)(void *ctx, int64_t done, int64_t total), void *ctx, hearth_err *err)
{
    return forward(m, pool, n_seqs, ids, lens, all_tokens, normalize, false, out, stop, ctx, err);
}

/* score = cls_w . tanh(pool_w x + pool_b) + cls_b, x the [CLS] row (hidden). */
static float head(const hearth_bert *m, const float *x)
{
    int64_t h = m->hidden;
    double score = m->cls_b;
    for (int64_t o = 0; o < h; o++) {
        const float *w = m->pool_w + o * h; /* (hidden, hidden): row o is output o's */
        double acc = m->pool_b[o];
        for (int64_t i = 0; i < h; i++)
            acc += (double)w[i] * x[i];
        score += (double)m->cls_w[o] * tanh(acc);
    }
    return (float)score;
}

int hearth_bert_rerank_stoppable(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids,
                                 const int32_t *lens, float *out, bool (*stop)(void *ctx, int64_t done, int64_t total),
                                 void *ctx, hearth_err *err)
{
    if (!m->rank)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s", m->no_rank);
    if (n_seqs <= 0)
        return n_seqs == 0 ? HEARTH_OK : hearth_err_set(err, HEARTH_EINVAL, "bert: %d sequences", n_seqs);
    /* (n_seqs, hidden) [CLS] rows */
    float *cls = malloc((size_t)n_seqs * (size_t)m->hidden * sizeof *cls);
    if (!cls)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory for %d [CLS] rows", m->path, n_seqs);
    int rc = forward(m, pool, n_seqs, ids, lens, NULL, false, true, cls, stop, ctx, err);
    for (int s = 0; rc == 0 && s < n_seqs; s++)
        out[s] = head(m, cls + (size_t)s * (size_t)m->hidden);
    free(cls);
    return rc;
}

/* bert_forward.c: the BERT encoder forward pass over a batch of sequences.
 *
 * How: the sequences are packed, without padding, into one (T, hidden)
 * activation matrix, T the sum of their lengths, so every Linear is one
 * matmul over all T rows (Q, K and V write side by side into one (T, 3h)
 * buffer through the output stride). Attention is the only step that needs
 * sequence boundaries: one pool task per sequence (or group of its heads) attends over that
 * sequence's own rows only, so no key is ever padding and no mask is needed;
 * a sequence's vector is therefore the same in any batch as alone, up to
 * nothing (the rows it reads are the same rows). Bias adds are fused into
 * the passes that follow each matmul: Q/K/V biases into the attention task,
 * the output biases into residual + LayerNorm, the FFN bias into GELU.
 *
 *   x    (T, h)    embeddings, then the residual stream
 *   qkv  (T, 3h)   [q | k | v] per row, heads of head_dim side by side
 *   ctx  (T, h)    attention output
 *   ffn  (T, ff)   FFN hidden
 *   y    (T, h)    output of the O and down projections
 *
 * Per layer: qkv = x [Wq|Wk|Wv]^T; ctx = attention(qkv + b); y = ctx Wo^T;
 * x = LN(x + y + bo); ffn = gelu(x Wup^T + bup); y = ffn Wdown^T;
 * x = LN(x + y + bdown). Then pooling (mean / [CLS] / last) per sequence
 * and, if asked, L2 normalization.
 *
 * Rejected: padding to the longest sequence (wasted FLOPs on every Linear,
 * and a mask to get right: the -inf-mask bug class); one matmul per
 * sequence (short sentences would give the GEMM M of 10-20 rows, far below
 * where it reaches its peak); a scratch arena kept in the model (the
 * activations are the calling thread's pass scratch instead, so engines
 * running passes at once each have their own, and the model stays free of
 * size-dependent state); a fused AVX-512 head of its own, K transposed once
 * (1.2 us against the two small matmuls' 1.1 us per head of 13 tokens x 32
 * dims, when tasks were single heads). The heads now run through
 * engine/cpu/attn.h, one query at a time (see attn_task). */
#include "models/bert.h"
#include "models/bert_impl.h"

#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/quant.h"
#include "engine/cpu/attn.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct fwd {
    const hearth_bert *m;
    int n_seqs;
    const int32_t *const *ids;
    const int32_t *lens;
    int64_t *start;          /* (n_seqs + 1) first row of each sequence */
    int64_t T, rows_per_task;
    int64_t heads_per_task; /* attention tasks: one sequence, this many heads */
    float *x, *qkv, *ctx, *ffn, *y;
    const bert_layer *l;
    const float *bias;       /* the bias of the pass being run */
    const float *ln_w, *ln_b;
    hearth_attn_fn attn;     /* one head over a sequence, the widest this CPU allows */
} fwd;

/* Rows [r0, r1) of task t. */
static void task_rows(const fwd *f, int64_t t, int64_t *r0, int64_t *r1)
{
    *r0 = t * f->rows_per_task;
    *r1 = *r0 + f->rows_per_task < f->T ? *r0 + f->rows_per_task : f->T;
}

static void embed_task(void *ctx, int64_t t, int64_t n_tasks)
{
    fwd *f = ctx;
    const hearth_bert *m = f->m;
    int64_t h = m->hidden, r0, r1;
    task_rows(f, t, &r0, &r1);
    int s = 0;
    while (f->start[s + 1] <= r0)
        s++;
    for (int64_t r = r0; r < r1; r++) {
        while (f->start[s + 1] <= r)
            s++;
        int64_t pos = r - f->start[s];
        int32_t id = f->ids[s][pos];
        float *x = f->x + r * h;
        const uint8_t *row = (const uint8_t *)m->tok_embd.data + (size_t)id * m->tok_embd.row_bytes;
        hearth_quant_dequantize_row(m->tok_embd.type, row, x, h); /* type checked at load */
        const float *p = m->pos_embd + pos * h;
        for (int64_t i = 0; i < h; i++)
            x[i] += p[i] + m->type0[i];
        hearth_cpu_layernorm(x, x, h, m->emb_ln_w, m->emb_ln_b, m->eps);
    }
}

/* One sequence and a group of heads_per_task heads: first the group's Q/K/V
 * biases are added row by row over the group's contiguous columns, then per
 * head and query row, ctx = softmax(q K^T / sqrt(head_dim)) V over the
 * sequence's rows, read in place from the qkv buffer (engine/cpu/attn.h's
 * head: 16 keys scored at a time, an online softmax). Grouping heads
 * matters: the rows were just written by the Q/K/V GEMM, mostly on the
 * other core, and a task per single head read them as 3 x len scattered
 * 128-byte pieces (~3 us of a ~6 us task at 13 tokens). The heads replaced
 * two small matmuls per head (S = Q K^T, then P V with V transposed, each
 * packing its operand): `hearth embed --bench -t 1`, two processes at once,
 * 6 interleaved rounds on the Zen 5, batch 1 / 8 / 32 +3.9% / +2.8% /
 * +3.5% sentences/s (5, 6 and 6 rounds of 6 faster). */
static void attn_task(void *ctx, int64_t t, int64_t n_tasks)
{
    fwd *f = ctx;
    const hearth_bert *m = f->m;
    const bert_layer *l = f->l;
    int64_t groups = (m->n_head + f->heads_per_task - 1) / f->heads_per_task;
    int64_t h = m->hidden, hd = h / m->n_head, s = t / groups, h0 = t % groups * f->heads_per_task;
    int64_t h1 = h0 + f->heads_per_task < m->n_head ? h0 + f->heads_per_task : m->n_head;
    int64_t r0 = f->start[s], len = f->start[s + 1] - r0, c0 = h0 * hd, cw = (h1 - h0) * hd;
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t i = 0; i < len; i++) {
        float *q = f->qkv + (r0 + i) * 3 * h + c0, *k = q + h, *v = q + 2 * h;
        hearth_cpu_add(q, q, l->bq + c0, cw);
        hearth_cpu_add(k, k, l->bk + c0, cw);
        hearth_cpu_add(v, v, l->bv + c0, cw);
    }
    float *base = f->qkv + r0 * 3 * h;
    for (int64_t head = h0; head < h1; head++) {
        int64_t ch = head * hd;
        for (int64_t i = 0; i < len; i++)
            f->attn(f->ctx + (r0 + i) * h + ch, base + i * 3 * h + ch, base + h + ch, base + 2 * h + ch, 3 * h, len,
                    hd, scale);
    }
}

/* x = LN(x + y + bias) */
static void residual_norm_task(void *ctx, int64_t t, int64_t n_tasks)
{
    fwd *f = ctx;
    int64_t h = f->m->hidden, r0, r1;
    task_rows(f, t, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *x = f->x + r * h, *y = f->y + r * h; /* y is scratch: bias added in place */
        hearth_cpu_add(y, y, f->bias, h);
        hearth_cpu_add(x, x, y, h);
        hearth_cpu_layernorm(x, x, h, f->ln_w, f->ln_b, f->m->eps);
    }
}

/* ffn = gelu(ffn + bias) */
static void gelu_task(void *ctx, int64_t t, int64_t n_tasks)
{
    fwd *f = ctx;
    int64_t ff = f->m->n_ff, r0, r1;
    task_rows(f, t, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *a = f->ffn + r * ff;
        hearth_cpu_add(a, a, f->bias, ff);
        hearth_cpu_gelu_erf(a, a, ff);
    }
}

static int linear(const fwd *f, hearth_pool *pool, const bert_mat *w, const float *X, int64_t x_stride, float *Y,
                  int64_t y_stride, const char *what, int64_t layer, hearth_err *err)
{
    int rc = w->packed ? hearth_cpu_matmul_prepacked(pool, w->packed, X, x_stride, f->T, Y, y_stride)
                       : hearth_cpu_matmul(pool, w->type, w->data, w->row_bytes, w->rows, w->cols, X, x_stride, f->T,
                                           Y, y_stride);
    if (rc)
        return hearth_err_set(err, rc, "bert: %s: layer %lld %s: matmul failed (%s)", f->m->path, (long long)layer,
                              what, hearth_status_name(rc));
    return HEARTH_OK;
}

static int run_layer(fwd *f, hearth_pool *pool, int64_t i, hearth_err *err)
{
    const hearth_bert *m = f->m;
    const bert_layer *l = &m->layers[i];
    int64_t h = m->hidden, n_row_tasks = (f->T + f->rows_per_task - 1) / f->rows_per_task;
    f->l = l;
    int rc;
    if ((rc = linear(f, pool, &l->q, f->x, h, f->qkv, 3 * h, "query", i, err)) ||
        (rc = linear(f, pool, &l->k, f->x, h, f->qkv + h, 3 * h, "key", i, err)) ||
        (rc = linear(f, pool, &l->v, f->x, h, f->qkv + 2 * h, 3 * h, "value", i, err)))
        return rc;
    hearth_pool_run(pool, attn_task, f,
                    (int64_t)f->n_seqs * ((m->n_head + f->heads_per_task - 1) / f->heads_per_task));
    if ((rc = linear(f, pool, &l->o, f->ctx, h, f->y, h, "attention output", i, err)))
        return rc;
    f->bias = l->bo;
    f->ln_w = l->ln1_w;
    f->ln_b = l->ln1_b;
    hearth_pool_run(pool, residual_norm_task, f, n_row_tasks);
    if ((rc = linear(f, pool, &l->up, f->x, h, f->ffn, m->n_ff, "ffn up", i, err)))
        return rc;
    f->bias = l->b_up;
    hearth_pool_run(pool, gelu_task, f, n_row_tasks);
    if ((rc = linear(f, pool, &l->down, f->ffn, m->n_ff, f->y, h, "ffn down", i, err)))
        return rc;
    f->bias = l->b_down;
    f->ln_w = l->ln2_w;
    f->ln_b = l->ln2_b;
    hearth_pool_run(pool, residual_norm_task, f, n_row_tasks);
    return HEARTH_OK;
}

static void pool_one(const fwd *f, int s, bool normalize, float *out)
{
    const hearth_bert *m = f->m;
    int64_t h = m->hidden, r0 = f->start[s], len = f->start[s + 1] - r0;
    if (m->pooling == HEARTH_POOL_CLS) {
        memcpy(out, f->x + r0 * h, (size_t)h * sizeof *out);
    } else if (m->pooling == HEARTH_POOL_LAST) {
        memcpy(out, f->x + (r0 + len - 1) * h, (size_t)h * sizeof *out);
    } else {
        for (int64_t i = 0; i < h; i++) {
            double sum = 0;
            for (int64_t r = 0; r < len; r++)
                sum += f->x[(r0 + r) * h + i];
            out[i] = (float)(sum / (double)len);
        }
    }
    if (normalize)
        hearth_cpu_l2_normalize(out, out, h, 1e-12f); /* sentence-transformers' Normalize eps */
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

int hearth_bert_embed_stoppable(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids,
                                const int32_t *lens, const bool *all_tokens, bool normalize, float *out,
                                bool (*stop)(void *ctx, int64_t done, int64_t total), void *ctx, hearth_err *err)
{
    if (n_seqs < 0)
        return hearth_err_set(err, HEARTH_EINVAL, "bert: %d sequences", n_seqs);
    int rc = check_input(m, n_seqs, ids, lens, err);
    if (rc || n_seqs == 0)
        return rc;
    fwd f = {.m = m, .n_seqs = n_seqs, .ids = ids, .lens = lens, .attn = hearth_attn_pick(HEARTH_F32)};
    f.start = malloc(((size_t)n_seqs + 1) * sizeof *f.start);
    if (!f.start)
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: out of memory");
    f.start[0] = 0;
    for (int s = 0; s < n_seqs; s++)
        f.start[s + 1] = f.start[s] + lens[s];
    f.T = f.start[n_seqs];
    int64_t h = m->hidden;
    /* floats per row over all buffers: x, qkv, ctx, y, ffn */
    int64_t per_row = 6 * h + m->n_ff;
    if (f.T > (int64_t)(SIZE_MAX / sizeof(float) / 2) / per_row) {
        free(f.start);
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %lld tokens in one batch is too many", (long long)f.T);
    }
    /* per-thread scratch for served sizes, malloc for huge batches */
    float *buf = hearth_cpu_pass_scratch((size_t)(f.T * per_row) * sizeof(float)), *owned = NULL;
    if (!buf)
        buf = owned = malloc((size_t)(f.T * per_row) * sizeof(float));
    if (!buf) {
        free(f.start);
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: out of memory for a batch of %lld tokens", (long long)f.T);
    }
    f.x = buf;
    f.qkv = f.x + f.T * h;
    f.ctx = f.qkv + f.T * 3 * h;
    f.y = f.ctx + f.T * h;
    f.ffn = f.y + f.T * h;
    /* about four row tasks per thread, so uneven finishing evens out */
    int64_t n_tasks = 4 * (int64_t)hearth_pool_size(pool);
    f.rows_per_task = (f.T + n_tasks - 1) / n_tasks;
    /* attention: whole sequences per task where there are enough of them to
     * keep ~4 tasks per thread, else the heads split into groups */
    int64_t groups = (n_tasks + n_seqs - 1) / n_seqs;
    groups = groups > m->n_head ? m->n_head : groups;
    f.heads_per_task = (m->n_head + groups - 1) / groups;

    hearth_pool_run(pool, embed_task, &f, (f.T + f.rows_per_task - 1) / f.rows_per_task);
    for (int64_t i = 0; i < m->n_layer && rc == 0; i++) {
        rc = run_layer(&f, pool, i, err);
        if (rc == 0 && stop && i + 1 < m->n_layer && stop(ctx, i + 1, m->n_layer))
            rc = HEARTH_EAGAIN;
    }
    for (int s = 0; s < n_seqs && rc == 0; s++) {
        if (all_tokens && all_tokens[s]) {
            memcpy(out, f.x + f.start[s] * h, (size_t)lens[s] * (size_t)h * sizeof *out);
            out += (size_t)lens[s] * (size_t)h;
        } else {
            pool_one(&f, s, normalize, out);
            out += h;
        }
    }
    free(owned);
    free(f.start);
    return rc;
}

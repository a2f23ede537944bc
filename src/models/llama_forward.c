/* llama_forward.c: the forward pass of a llama-family decoder over a batch of
 * tokens from one or more KV-cache slots.
 *
 * How: the batch is checked whole first (ids, slots, room in each slot), so
 * a refused batch leaves the cache as it was. It then runs in chunks of at
 * most LLAMA_CHUNK tokens; within a chunk every layer works on all the
 * chunk's rows at once: one matmul per weight with M = rows (a decode step of
 * several slots reads each weight once; a prompt is a GEMM). Per layer:
 *     h = rmsnorm(x) * attn_norm
 *     q, k, v = h Wq^T, h Wk^T, h Wv^T (+ biases: qwen2)
 *     qwen3: q, k = rmsnorm per head * q_norm / k_norm
 *     q, k = rope(q, k) at each token's position (NORM: llama, NEOX: qwen)
 *     k, v rows appended to the token's slot at its position
 *     att = softmax(q K^T / sqrt(head_dim), causal) V per (token, head),
 *           q head h reading kv head h / (n_head / n_head_kv)
 *     x += att Wo^T
 *     h = rmsnorm(x) * ffn_norm; x += (silu(h Wg^T) * h Wu^T) Wd^T
 * then the final norm and the output projection for the rows that want
 * logits only. Tokens of one slot come in order, so a token's K/V row is in
 * the cache before any later token of the chunk attends to it.
 *
 * Attention is split over (token, head) on the pool; each task is one head
 * of one token over its slot's positions (engine/cpu/attn.h: an online softmax
 * that streams K and V once and needs no scratch).
 *
 * Scratch activations live in the model, sized at first use for the chunk
 * size and reused: no allocation per token in steady state, and therefore
 * one forward at a time per model.
 *
 * Norms, SwiGLU and residual adds are engine/cpu/ops.h's. RoPE is kept
 * here: ops.h's hearth_cpu_rope takes only a theta base (no linear freq
 * scale, no per-dim rope_freqs factors, both of which GGUF files carry).
 *
 * Q, K, V and gate, up are group matmuls (one X, several weights, one pool
 * job): 5 pool jobs per layer instead of 8 (attention included), each job
 * paying a start, a join and an idle tail. The per-token ops between them
 * (norms, biases, RoPE, KV stores, SwiGLU, residual adds) run on the caller
 * for a decode step and as 5 more jobs over the rows for a prompt (rows()).
 *
 * Rejected: a graph/tensor abstraction (one fixed architecture family does
 * not need it yet); concatenating Q/K/V into one weight (the weights are
 * separate tensors in the file, perhaps of different types, and the group
 * call gives the single job without a copy). */
#include "models/llama_int.h"

#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rotates the first n_rot dims of each of n_heads heads of x by the angles
 * whose cos/sin are cs[2i], cs[2i+1]. */
static void rope_heads(float *x, int64_t n_heads, int64_t hd, int64_t n_rot, const float *cs, int type)
{
    int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *p = x + h * hd;
        for (int64_t i = 0; i < half; i++) {
            float c = cs[2 * i], s = cs[2 * i + 1];
            int64_t ia = type == HEARTH_ROPE_NORM ? 2 * i : i;
            int64_t ib = type == HEARTH_ROPE_NORM ? 2 * i + 1 : i + half;
            float a = p[ia], b = p[ib];
            p[ia] = a * c - b * s;
            p[ib] = a * s + b * c;
        }
    }
}

typedef struct att_job {
    const hearth_llama *m;
    const hearth_kv *kv;
    int64_t layer;
    const int32_t *slot; /* (n) */
    const int64_t *pos;  /* (n) */
    const float *q;      /* (n, n_head*hd) */
    float *out;          /* (n, n_head*hd) */
    float scale;
} att_job;

static void att_task(void *ctx, int64_t task, int64_t n_tasks)
{
    const att_job *J = ctx;
    const hearth_llama_hparams *hp = &J->m->hp;
    int64_t hd = hp->head_dim, qd = hp->n_head * hd, kvd = J->kv->kv_dim;
    int64_t i = task / hp->n_head, h = task % hp->n_head;
    int64_t kvh = h / (hp->n_head / hp->n_head_kv);
    const float *q = J->q + i * qd + h * hd;
    size_t at = (size_t)(kvh * hd) * J->kv->elt;
    const char *K = llama_kv_k(J->kv, J->slot[i], J->layer) + at;
    const char *V = llama_kv_v(J->kv, J->slot[i], J->layer) + at;
    J->kv->attn(J->out + i * qd + h * hd, q, K, V, kvd, J->pos[i] + 1, hd, J->scale);
}

/* Floats per token of the RoPE table (s->rope): cos, sin of each rotated
 * pair; 1 when nothing rotates, so the buffer is never empty. */
static int64_t rope_stride(const hearth_llama_hparams *hp)
{
    return hp->n_rot > 0 ? hp->n_rot : 1;
}

static int grow_scratch(hearth_llama *m, int64_t cap, hearth_err *err)
{
    llama_scratch *s = &m->s;
    if (s->cap >= cap)
        return 0;
    const hearth_llama_hparams *hp = &m->hp;
    size_t c = (size_t)cap, qd = (size_t)(hp->n_head * hp->head_dim), kvd = (size_t)(hp->n_head_kv * hp->head_dim);
    float **bufs[] = {&s->x, &s->h, &s->q, &s->k, &s->v, &s->att, &s->g, &s->u, &s->rope};
    size_t sizes[] = {(size_t)hp->n_embd, (size_t)hp->n_embd, qd, kvd, kvd, qd, (size_t)hp->n_ff, (size_t)hp->n_ff,
                      (size_t)rope_stride(hp)};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = malloc(c * sizes[i] * sizeof(float));
    }
    free(s->pos);
    free(s->row);
    s->pos = malloc(c * sizeof *s->pos);
    s->row = malloc(c * sizeof *s->row);
    bool ok = s->pos && s->row;
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        ok = ok && *bufs[i];
    /* On failure the buffers stay allocated (or NULL) but cap stays at 0, so
     * the next call retries and close frees whatever is there. */
    s->cap = ok ? cap : 0;
    return ok ? 0 : hearth_err_set(err, HEARTH_ENOMEM, "llama: out of memory for activations of %lld tokens",
                                   (long long)cap);
}

static int mm(hearth_pool *pool, const llama_mat *w, const float *X, int64_t M, float *Y, int64_t y_stride,
              hearth_err *err)
{
    int rc = w->packed ? hearth_cpu_matmul_prepacked(pool, w->packed, X, w->n_in, M, Y, y_stride)
                       : hearth_cpu_matmul(pool, w->type, w->data, w->row_bytes, w->n_out, w->n_in, X, w->n_in, M,
                                           Y, y_stride);
    if (rc)
        hearth_err_set(err, rc, "llama: matmul of %lld x %lld weights failed", (long long)w->n_out,
                       (long long)w->n_in);
    return rc;
}

/* The n weights in ws, all of one input X (M rows), in one call: X is
 * prepared once and the pool runs one job (matmul.h's group call; for Q, K,
 * V of a decode step, 38 us instead of 45 at M = 4). */
static int mm_group(hearth_pool *pool, const llama_mat *const *ws, float *const *ys, const int64_t *y_strides, int n,
                    const float *X, int64_t M, hearth_err *err)
{
    hearth_cpu_mm_out outs[HEARTH_MM_GROUP_MAX];
    const hearth_cpu_prepacked *pws[HEARTH_MM_GROUP_MAX];
    int n_packed = 0;
    for (int i = 0; i < n; i++) {
        outs[i] = (hearth_cpu_mm_out){ws[i]->type, ws[i]->data, ws[i]->row_bytes, ws[i]->n_out, ys[i], y_strides[i]};
        pws[i] = ws[i]->packed;
        n_packed += pws[i] != NULL;
    }
    if (n_packed > 0 && n_packed < n) { /* mixed types: one call each */
        for (int i = 0; i < n; i++) {
            int rc = mm(pool, ws[i], X, M, ys[i], y_strides[i], err);
            if (rc)
                return rc;
        }
        return 0;
    }
    int rc = n_packed ? hearth_cpu_matmul_prepacked_group(pool, pws, ys, y_strides, n, X, ws[0]->n_in, M)
                      : hearth_cpu_matmul_group(pool, outs, n, ws[0]->n_in, X, ws[0]->n_in, M);
    if (rc)
        hearth_err_set(err, rc, "llama: matmul of %d weights of %lld inputs failed", n, (long long)ws[0]->n_in);
    return rc;
}

/* Per-token work between the matmuls. Each op is per row, so a prompt's
 * rows are split over the pool (ROWS_PARALLEL_MIN and up; a decode step's
 * few rows stay on the caller, where a pool job would cost more than the
 * work): they were ~4% of a 128-token F16 prompt on one thread while the
 * other waited. */
enum { ROW_ATTN_IN, ROW_QK, ROW_FFN_IN, ROW_SWIGLU, ROW_RESID };
#define ROWS_PARALLEL_MIN 16

typedef struct row_job {
    const hearth_llama *m;
    hearth_kv *kv;
    const llama_layer *L;
    int64_t il, nc, per;
    const int32_t *slot;
    int op;
} row_job;

/* ROW_QK for token i: biases (qwen2), q/k norm (qwen3), RoPE from the
 * chunk's table, then its K and V rows into the cache. */
static void qk_row(const row_job *J, int64_t i)
{
    const hearth_llama *m = J->m;
    const hearth_llama_hparams *hp = &m->hp;
    const llama_layer *L = J->L;
    const llama_scratch *s = &m->s;
    hearth_kv *kv = J->kv;
    int64_t hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
    float *q = s->q + i * qd, *k = s->k + i * kvd, *v = s->v + i * kvd;
    if (L->bq)
        hearth_cpu_add(q, q, L->bq, qd);
    if (L->bk)
        hearth_cpu_add(k, k, L->bk, kvd);
    if (L->bv)
        hearth_cpu_add(v, v, L->bv, kvd);
    if (L->q_norm) {
        for (int64_t h = 0; h < hp->n_head; h++)
            hearth_cpu_rmsnorm(q + h * hd, q + h * hd, hd, L->q_norm, hp->rms_eps);
        for (int64_t h = 0; h < hp->n_head_kv; h++)
            hearth_cpu_rmsnorm(k + h * hd, k + h * hd, hd, L->k_norm, hp->rms_eps);
    }
    const float *cs = s->rope + i * rope_stride(hp);
    rope_heads(q, hp->n_head, hd, hp->n_rot, cs, hp->rope_type);
    rope_heads(k, hp->n_head_kv, hd, hp->n_rot, cs, hp->rope_type);
    size_t at = (size_t)(s->pos[i] * kvd) * kv->elt;
    char *kd = llama_kv_k(kv, J->slot[i], J->il) + at, *vd = llama_kv_v(kv, J->slot[i], J->il) + at;
    if (kv->type == HEARTH_F16) {
        kv->put_f16(kd, k, kvd);
        kv->put_f16(vd, v, kvd);
    } else {
        memcpy(kd, k, (size_t)kvd * sizeof(float));
        memcpy(vd, v, (size_t)kvd * sizeof(float));
    }
}

static void row_task(void *ctx, int64_t t, int64_t n_tasks)
{
    const row_job *J = ctx;
    const hearth_llama_hparams *hp = &J->m->hp;
    const llama_scratch *s = &J->m->s;
    int64_t E = hp->n_embd, F = hp->n_ff, r1 = (t + 1) * J->per < J->nc ? (t + 1) * J->per : J->nc;
    for (int64_t i = t * J->per; i < r1; i++) {
        float *x = s->x + i * E, *h = s->h + i * E;
        switch (J->op) {
        case ROW_ATTN_IN: hearth_cpu_rmsnorm(h, x, E, J->L->attn_norm, hp->rms_eps); break;
        case ROW_QK: qk_row(J, i); break;
        case ROW_FFN_IN:
            hearth_cpu_add(x, x, h, E);
            hearth_cpu_rmsnorm(h, x, E, J->L->ffn_norm, hp->rms_eps);
            break;
        case ROW_SWIGLU: hearth_cpu_swiglu(s->g + i * F, s->g + i * F, s->u + i * F, F); break;
        default: hearth_cpu_add(x, x, h, E); break; /* ROW_RESID */
        }
    }
}

/* op over the chunk's nc rows: on the pool for a prompt, here for a few rows */
static void rows(const hearth_llama *m, hearth_kv *kv, hearth_pool *pool, const llama_layer *L, int64_t il,
                 const int32_t *slot, int64_t nc, int op)
{
    row_job J = {.m = m, .kv = kv, .L = L, .il = il, .nc = nc, .slot = slot, .op = op, .per = nc};
    if (nc < ROWS_PARALLEL_MIN || hearth_pool_size(pool) < 2) {
        row_task(&J, 0, 1);
        return;
    }
    int64_t tasks = 4 * (int64_t)hearth_pool_size(pool);
    J.per = (nc + tasks - 1) / tasks;
    hearth_pool_run(pool, row_task, &J, (nc + J.per - 1) / J.per);
}

static int layer_forward(hearth_llama *m, hearth_kv *kv, hearth_pool *pool, int64_t il, const int32_t *slot,
                         int64_t nc, hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    const llama_layer *L = &m->layers[il];
    llama_scratch *s = &m->s;
    int64_t E = hp->n_embd, hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
    int rc;
    rows(m, kv, pool, L, il, slot, nc, ROW_ATTN_IN);
    const llama_mat *qkv[] = {&L->wq, &L->wk, &L->wv};
    float *qkv_y[] = {s->q, s->k, s->v};
    const int64_t qkv_ld[] = {qd, kvd, kvd};
    if ((rc = mm_group(pool, qkv, qkv_y, qkv_ld, 3, s->h, nc, err)))
        return rc;
    rows(m, kv, pool, L, il, slot, nc, ROW_QK);
    att_job J = {m, kv, il, slot, s->pos, s->q, s->att, (float)(1.0 / sqrt((double)hd))};
    hearth_pool_run(pool, att_task, &J, nc * hp->n_head);
    if ((rc = mm(pool, &L->wo, s->att, nc, s->h, E, err)))
        return rc;
    rows(m, kv, pool, L, il, slot, nc, ROW_FFN_IN);
    const llama_mat *gu[] = {&L->gate, &L->up};
    float *gu_y[] = {s->g, s->u};
    const int64_t gu_ld[] = {hp->n_ff, hp->n_ff};
    if ((rc = mm_group(pool, gu, gu_y, gu_ld, 2, s->h, nc, err)))
        return rc;
    rows(m, kv, pool, L, il, slot, nc, ROW_SWIGLU);
    if ((rc = mm(pool, &L->down, s->g, nc, s->h, E, err)))
        return rc;
    rows(m, kv, pool, L, il, slot, nc, ROW_RESID);
    return 0;
}

/* Runs tokens [0, nc) (a chunk of the batch) and writes the logits rows they want. */
static int chunk_forward(hearth_llama *m, hearth_kv *kv, hearth_pool *pool, const int32_t *tokens,
                         const int32_t *slot, int64_t nc, float *logits, hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    llama_scratch *s = &m->s;
    int64_t E = hp->n_embd;
    for (int64_t i = 0; i < nc; i++) {
        s->pos[i] = kv->len[slot[i]] + kv->pend[slot[i]]++;
        const uint8_t *row = (const uint8_t *)m->embd.data + (size_t)tokens[i] * m->embd.row_bytes;
        int rc = hearth_quant_dequantize_row(m->embd.type, row, s->x + i * E, E);
        if (rc)
            return hearth_err_set(err, rc, "llama: token_embd row %d cannot be read", tokens[i]);
    }
    /* the rotation angles of each token, once for all layers (in double, so
     * large positions keep their precision) */
    int64_t half = hp->n_rot / 2, rs = rope_stride(hp);
    for (int64_t i = 0; i < nc; i++)
        for (int64_t j = 0; j < half; j++) {
            double a = (double)s->pos[i] * m->inv_freq[j];
            s->rope[i * rs + 2 * j] = (float)cos(a);
            s->rope[i * rs + 2 * j + 1] = (float)sin(a);
        }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        int rc = layer_forward(m, kv, pool, il, slot, nc, err);
        if (rc)
            return rc;
    }
    for (int64_t i = 0; i < nc; i++) {
        kv->len[slot[i]] += kv->pend[slot[i]];
        kv->pend[slot[i]] = 0;
    }
    /* final norm of the rows that want logits, packed to the front of h */
    int64_t n_out = 0, first = -1;
    for (int64_t i = 0; i < nc; i++) {
        if (s->row[i] < 0)
            continue;
        if (first < 0)
            first = s->row[i];
        hearth_cpu_rmsnorm(s->h + n_out * E, s->x + i * E, E, m->out_norm, hp->rms_eps);
        n_out++;
    }
    if (n_out == 0)
        return 0;
    return mm(pool, &m->out, s->h, n_out, logits + (size_t)first * (size_t)hp->n_vocab, hp->n_vocab, err);
}

static int check_batch(const hearth_llama *m, const hearth_kv *kv, const hearth_llama_batch *b, const float *logits,
                       hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    if (b->n < 0 || (b->n > 0 && (!b->tokens || !b->slot)))
        return hearth_err_set(err, HEARTH_EINVAL, "llama: batch of %d tokens without tokens or slots", b->n);
    if (kv->n_layer != hp->n_layer || kv->kv_dim != hp->n_head_kv * hp->head_dim)
        return hearth_err_set(err, HEARTH_EINVAL, "llama: kv cache of %lld layers x %lld was not made for this model",
                              (long long)kv->n_layer, (long long)kv->kv_dim);
    bool any = false;
    for (int32_t i = 0; i < b->n; i++) {
        if (b->tokens[i] < 0 || b->tokens[i] >= hp->n_vocab)
            return hearth_err_set(err, HEARTH_EINVAL, "llama: batch token %d: id %d out of range [0, %lld)", i,
                                  b->tokens[i], (long long)hp->n_vocab);
        if (b->slot[i] < 0 || b->slot[i] >= kv->n_slots)
            return hearth_err_set(err, HEARTH_EINVAL, "llama: batch token %d: slot %d out of range [0, %d)", i,
                                  b->slot[i], kv->n_slots);
        any = any || !b->want_logits || b->want_logits[i];
    }
    if (any && !logits)
        return hearth_err_set(err, HEARTH_EINVAL, "llama: logits wanted but no output buffer given");
    return 0;
}

int hearth_llama_forward(hearth_llama *m, hearth_kv *kv, hearth_pool *pool, const hearth_llama_batch *b, float *logits,
                         hearth_err *err)
{
    int rc = check_batch(m, kv, b, logits, err);
    if (rc || b->n == 0)
        return rc;
    /* room in every slot, checked before anything is written */
    for (int32_t i = 0; i < b->n; i++)
        kv->pend[b->slot[i]]++;
    for (int32_t i = 0; i < b->n; i++) {
        int sl = b->slot[i];
        if (kv->pend[sl] && kv->len[sl] + kv->pend[sl] > kv->n_ctx)
            rc = hearth_err_set(err, HEARTH_ELIMIT, "llama: slot %d holds %lld positions; %lld more exceed n_ctx %lld",
                                sl, (long long)kv->len[sl], (long long)kv->pend[sl], (long long)kv->n_ctx);
    }
    for (int32_t i = 0; i < b->n; i++)
        kv->pend[b->slot[i]] = 0;
    if (rc)
        return rc;
    int64_t chunk = b->n < LLAMA_CHUNK ? b->n : LLAMA_CHUNK;
    if ((rc = grow_scratch(m, chunk, err)))
        return rc;
    int32_t out_row = 0;
    for (int32_t c0 = 0; c0 < b->n; c0 += (int32_t)chunk) {
        int64_t nc = b->n - c0 < chunk ? b->n - c0 : chunk;
        for (int64_t i = 0; i < nc; i++) {
            bool want = b->want_logits ? b->want_logits[c0 + i] : c0 + i == b->n - 1;
            m->s.row[i] = want ? out_row++ : -1;
        }
        rc = chunk_forward(m, kv, pool, b->tokens + c0, b->slot + c0, nc, logits, err);
        if (rc) {
            for (int32_t i = 0; i < b->n; i++)
                kv->pend[b->slot[i]] = 0;
            return rc;
        }
    }
    return 0;
}

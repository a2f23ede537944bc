/* dev_cpu_rows.c: the CPU device's row ops (engine/dev.h): embedding,
 * RMSNorm, the residual add, add + RMSNorm, SwiGLU, the greedy argmax, the
 * QK step (biases, QK-norm, RoPE, KV store), residual + bias + LayerNorm,
 * bias + GELU, and pooling.
 *
 * How: each op is a loop over its rows of engine/cpu/ops.h's row functions,
 * the bodies the walks ran inside their pool tasks before the seam, moved
 * here unchanged so every output is the same bit for bit. The rows are split
 * over the stream's pool by cpu_rows: llama's ops keep their
 * ROWS_PARALLEL_MIN (a decode step's few rows stay on the caller), bert's
 * always split (par_min 1), as each walk did; the plain embedding lookup
 * stays on the caller, as llama's did (a row copy per token).
 *
 * RoPE is here, not ops.h's hearth_cpu_rope: that one takes only a theta
 * base, while GGUF files carry a linear frequency scale and per-dim
 * rope_freqs factors; the walk folds them into the angle table it sends in
 * the batch block (cos, sin per rotated pair, computed in double).
 *
 * Rejected: one pool job per op per head (a decode step would pay a job's
 * start and join per head for microseconds of work). */
#include "engine/cpu/dev_cpu.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/quant.h"
#include "engine/sampler.h"

#include <stdint.h>
#include <string.h>

/* ---- embedding ---- */

typedef struct embed_job {
    float *Y;
    const hearth_weight *t;
    const hearth_batch *b;
    const float *pos_tab, *type_row, *ln_w, *ln_b;
    float eps;
    int rc;
} embed_job;

static void embed_rows(void *ctx, int64_t r0, int64_t r1)
{
    embed_job *J = ctx;
    int64_t h = J->t->n_in;
    for (int64_t r = r0; r < r1; r++) {
        float *x = J->Y + r * h;
        const uint8_t *row = (const uint8_t *)J->t->data + (size_t)J->b->token[r] * J->t->row_bytes;
        int rc = hearth_quant_dequantize_row(J->t->type, row, x, h);
        if (!J->pos_tab) {
            if (rc) { /* on the caller only (see cpu_embed) */
                J->rc = rc;
                return;
            }
            continue;
        }
        const float *p = J->pos_tab + J->b->pos[r] * h;
        for (int64_t i = 0; i < h; i++)
            x[i] += p[i] + J->type_row[i];
        hearth_cpu_layernorm(x, x, h, J->ln_w, J->ln_b, J->eps);
    }
}

int cpu_embed(hearth_stream *st, float *Y, const hearth_weight *table, const hearth_batch *b, const float *pos_tab,
              const float *type_row, const float *ln_w, const float *ln_b, float eps)
{
    if (!cpu_weight_rows_ok(table))
        return HEARTH_EUNSUPPORTED;
    embed_job J = {Y, table, b, pos_tab, type_row, ln_w, ln_b, eps, 0};
    /* bert's (positions, LayerNorm) splits; llama's row copies stay here,
     * where a failure can be reported (the type is checked at load) */
    cpu_rows(st, b->n, pos_tab ? 1 : INT64_MAX, embed_rows, &J);
    return J.rc;
}

/* ---- llama's row steps ---- */

typedef struct row_job {
    float *Y, *X, *A;
    const float *C;
    const int32_t *idx;
    const float *w, *w2;
    int64_t n;
    float eps;
} row_job;

static void rmsnorm_rows(void *ctx, int64_t r0, int64_t r1)
{
    const row_job *J = ctx;
    for (int64_t i = r0; i < r1; i++) {
        int64_t src = J->idx ? J->idx[i] : i;
        hearth_cpu_rmsnorm(J->Y + i * J->n, J->C + src * J->n, J->n, J->w, J->eps);
    }
}

int cpu_rmsnorm(hearth_stream *st, float *Y, const float *X, const int32_t *rows, int64_t n_rows, int64_t n,
                const float *w, float eps)
{
    row_job J = {.Y = Y, .C = X, .idx = rows, .w = w, .n = n, .eps = eps};
    cpu_rows(st, n_rows, CPU_ROWS_PARALLEL_MIN, rmsnorm_rows, &J);
    return 0;
}

static void add_rows(void *ctx, int64_t r0, int64_t r1)
{
    const row_job *J = ctx;
    for (int64_t i = r0; i < r1; i++)
        hearth_cpu_add(J->X + i * J->n, J->X + i * J->n, J->C + i * J->n, J->n);
}

int cpu_add(hearth_stream *st, float *X, const float *A, int64_t rows, int64_t n)
{
    row_job J = {.X = X, .C = A, .n = n};
    cpu_rows(st, rows, CPU_ROWS_PARALLEL_MIN, add_rows, &J);
    return 0;
}

static void add_rmsnorm_rows(void *ctx, int64_t r0, int64_t r1)
{
    const row_job *J = ctx;
    for (int64_t i = r0; i < r1; i++) {
        float *x = J->X + i * J->n, *h = J->A + i * J->n;
        hearth_cpu_add(x, x, h, J->n);
        hearth_cpu_rmsnorm(h, x, J->n, J->w, J->eps);
    }
}

int cpu_add_rmsnorm(hearth_stream *st, float *X, float *H, int64_t rows, int64_t n, const float *w, float eps)
{
    row_job J = {.X = X, .A = H, .w = w, .n = n, .eps = eps};
    cpu_rows(st, rows, CPU_ROWS_PARALLEL_MIN, add_rmsnorm_rows, &J);
    return 0;
}

static void swiglu_rows(void *ctx, int64_t r0, int64_t r1)
{
    const row_job *J = ctx;
    for (int64_t i = r0; i < r1; i++)
        hearth_cpu_swiglu(J->X + i * J->n, J->X + i * J->n, J->C + i * J->n, J->n);
}

int cpu_swiglu(hearth_stream *st, float *G, const float *U, int64_t rows, int64_t n)
{
    row_job J = {.X = G, .C = U, .n = n};
    cpu_rows(st, rows, CPU_ROWS_PARALLEL_MIN, swiglu_rows, &J);
    return 0;
}

/* The greedy draw of each row (dev.h's argmax_rows), on this thread: one
 * pass over 4 n bytes a row, as the sampler's own draw would make. */
int cpu_argmax_rows(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n)
{
    (void)st;
    if (rows < 0 || n < 1 || n > INT32_MAX)
        return rows == 0 ? 0 : HEARTH_EINVAL;
    for (int64_t r = 0; r < rows; r++)
        ids[r] = hearth_logits_argmax(X + r * n, (int32_t)n);
    return 0;
}

/* argmax_rows, then the next pass's block (dev.h's argmax_feed): the CPU's
 * memory is the host's, so this saves nothing here; it is the same
 * contract, so the run of passes that uses it on a GPU runs in CI too. */
int cpu_argmax_feed(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n, int32_t *next,
                    const int32_t *src, int64_t words)
{
    if (words < rows)
        return HEARTH_EINVAL;
    int rc = cpu_argmax_rows(st, ids, X, rows, n);
    if (rc || rows < 1)
        return rc;
    memcpy(next + rows, src + rows, (size_t)(words - rows) * sizeof *next);
    memcpy(next, ids, (size_t)rows * sizeof *next);
    return 0;
}

/* ---- the QK step ---- */

/* Rotates the first n_rot dims of each of n_heads heads of x by the angles
 * whose cos/sin are cs[2i], cs[2i+1]. */
static void rope_heads(float *x, int64_t n_heads, int64_t hd, int64_t n_rot, const float *cs, int type)
{
    int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *p = x + h * hd;
        for (int64_t i = 0; i < half; i++) {
            float c = cs[2 * i], s = cs[2 * i + 1];
            int64_t ia = type == 0 ? 2 * i : i;
            int64_t ib = type == 0 ? 2 * i + 1 : i + half;
            float a = p[ia], b = p[ib];
            p[ia] = a * c - b * s;
            p[ib] = a * s + b * c;
        }
    }
}

typedef struct qk_job {
    float *Q, *K, *V;
    const hearth_qk *qk;
    const hearth_dev_kv *kv;
    int64_t layer;
    const hearth_batch *b;
    hearth_attn_store_fn put_f16;
} qk_job;

static void qk_rows(void *ctx, int64_t r0, int64_t r1)
{
    const qk_job *J = ctx;
    const hearth_qk *p = J->qk;
    const hearth_dev_kv *kv = J->kv;
    int64_t hd = p->hd, qd = p->n_head * hd, kvd = p->n_head_kv * hd;
    size_t elt = cpu_kv_elt(kv->type);
    for (int64_t i = r0; i < r1; i++) {
        float *q = J->Q + i * qd, *k = J->K + i * kvd, *v = J->V + i * kvd;
        if (p->bq)
            hearth_cpu_add(q, q, p->bq, qd);
        if (p->bk)
            hearth_cpu_add(k, k, p->bk, kvd);
        if (p->bv)
            hearth_cpu_add(v, v, p->bv, kvd);
        if (p->q_norm) {
            for (int64_t h = 0; h < p->n_head; h++)
                hearth_cpu_rmsnorm(q + h * hd, q + h * hd, hd, p->q_norm, p->eps);
            for (int64_t h = 0; h < p->n_head_kv; h++)
                hearth_cpu_rmsnorm(k + h * hd, k + h * hd, hd, p->k_norm, p->eps);
        }
        const float *cs = J->b->rope_cs + i * J->b->rope_stride;
        rope_heads(q, p->n_head, hd, p->n_rot, cs, p->rope_type);
        rope_heads(k, p->n_head_kv, hd, p->n_rot, cs, p->rope_type);
        size_t at = (size_t)(J->b->pos[i] * kvd) * elt;
        char *kd = cpu_kv_block(kv, kv->k, J->b->slot[i], J->layer) + at;
        char *vd = cpu_kv_block(kv, kv->v, J->b->slot[i], J->layer) + at;
        if (kv->type == HEARTH_F16) {
            J->put_f16(kd, k, kvd);
            J->put_f16(vd, v, kvd);
        } else {
            memcpy(kd, k, (size_t)kvd * sizeof(float));
            memcpy(vd, v, (size_t)kvd * sizeof(float));
        }
    }
}

int cpu_qk_rope_store(hearth_stream *st, float *Q, float *K, float *V, const hearth_qk *qk, const hearth_dev_kv *kv,
                      int64_t layer, const hearth_batch *b)
{
    if (!cpu_kv_elt(kv->type) || kv->kv_dim != qk->n_head_kv * qk->hd || qk->hd > HEARTH_ATTN_HEAD_DIM_MAX ||
        qk->n_rot > qk->hd || qk->n_rot % 2 || (qk->n_rot > 0 && b->rope_stride < qk->n_rot))
        return HEARTH_EINVAL;
    qk_job J = {Q, K, V, qk, kv, layer, b, cpu_dev_kernels()->put_f16};
    cpu_rows(st, b->n, CPU_ROWS_PARALLEL_MIN, qk_rows, &J);
    return 0;
}

/* ---- bert's row steps ---- */

static void add_layernorm_rows(void *ctx, int64_t r0, int64_t r1)
{
    const row_job *J = ctx;
    int64_t h = J->n;
    for (int64_t r = r0; r < r1; r++) {
        float *x = J->X + r * h, *y = J->A + r * h; /* y is scratch: bias added in place */
        hearth_cpu_add(y, y, J->C, h);
        hearth_cpu_add(x, x, y, h);
        hearth_cpu_layernorm(x, x, h, J->w, J->w2, J->eps);
    }
}

int cpu_add_layernorm(hearth_stream *st, float *X, float *Y, const float *bias, int64_t rows, int64_t n,
                      const float *g, const float *beta, float eps)
{
    row_job J = {.X = X, .A = Y, .C = bias, .w = g, .w2 = beta, .n = n, .eps = eps};
    cpu_rows(st, rows, 1, add_layernorm_rows, &J);
    return 0;
}

static void bias_gelu_rows(void *ctx, int64_t r0, int64_t r1)
{
    const row_job *J = ctx;
    for (int64_t r = r0; r < r1; r++) {
        float *a = J->X + r * J->n;
        hearth_cpu_add(a, a, J->C, J->n);
        hearth_cpu_gelu_erf(a, a, J->n);
    }
}

int cpu_bias_gelu(hearth_stream *st, float *Y, const float *bias, int64_t rows, int64_t n)
{
    row_job J = {.X = Y, .C = bias, .n = n};
    cpu_rows(st, rows, 1, bias_gelu_rows, &J);
    return 0;
}

/* ---- pooling ---- */

int cpu_pool(hearth_stream *st, float *out, const float *X, int64_t h, const hearth_batch *b, int kind, bool l2,
             const bool *all_rows)
{
    for (int s = 0; s < b->n_seqs; s++) {
        int64_t r0 = b->seq_start[s], len = b->seq_start[s + 1] - r0;
        if (all_rows && all_rows[s]) {
            memcpy(out, X + r0 * h, (size_t)len * (size_t)h * sizeof *out);
            out += (size_t)len * (size_t)h;
            continue;
        }
        if (kind == HEARTH_DEV_POOL_CLS) {
            memcpy(out, X + r0 * h, (size_t)h * sizeof *out);
        } else if (kind == HEARTH_DEV_POOL_LAST) {
            memcpy(out, X + (r0 + len - 1) * h, (size_t)h * sizeof *out);
        } else {
            for (int64_t i = 0; i < h; i++) {
                double sum = 0;
                for (int64_t r = 0; r < len; r++)
                    sum += X[(r0 + r) * h + i];
                out[i] = (float)(sum / (double)len);
            }
        }
        if (l2)
            hearth_cpu_l2_normalize(out, out, h, 1e-12f); /* sentence-transformers' Normalize eps */
        out += h;
    }
    return 0;
}

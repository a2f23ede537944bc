/* dev_cpu_attn.c: the CPU device's two attentions (engine/dev.h):
 * ATTN_CACHED, a decoder's queries over their slots' KV cache, and
 * ATTN_PACKED, an encoder's sequences packed without padding.
 *
 * How: both run engine/cpu/attn.h's head (an online softmax that streams K
 * and V once, 16 keys scored at a time, no scratch), for one query head at a
 * time, on the stream's pool:
 *   - cached: one task per (token, head) over the token's slot positions
 *     0 .. pos, read in place from the cache block (f32 or f16 elements).
 *   - packed: one task per sequence, or per group of its heads where there
 *     are too few sequences to keep ~4 tasks per thread; a task first adds
 *     the group's Q/K/V biases row by row over its contiguous columns, then
 *     runs each head and query row over the sequence's rows, read in place
 *     from the (T, 3h) buffer. Grouping heads matters: the rows were just
 *     written by the Q/K/V GEMM, mostly on the other core, and a task per
 *     single head read them as 3 x len scattered 128-byte pieces (~3 us of a
 *     ~6 us task at 13 tokens). The heads replaced two small matmuls per
 *     head (S = Q K^T, then P V with V transposed, each packing its operand):
 *     `hearth embed --bench -t 1`, two processes at once, 6 interleaved
 *     rounds on the Zen 5, batch 1 / 8 / 32 +3.9% / +2.8% / +3.5%
 *     sentences/s.
 * Both moved here from the walks unchanged (the same outputs bit for bit).
 *
 * Rejected: a fused AVX-512 packed head with K transposed once (1.2 us
 * against the two small matmuls' 1.1 us per head of 13 tokens x 32 dims, when
 * tasks were single heads); a mask over padded sequences (no key is ever
 * padding here, so a sequence's vector is the same in any batch as alone). */
#include "engine/cpu/dev_cpu.h"
#include "engine/cpu/ops.h"

#include <math.h>

typedef struct att_job {
    float *out;
    const float *q;            /* (n, n_head*hd) */
    const hearth_dev_kv *kv;
    int64_t layer, n_head, group, hd;
    const hearth_batch *b;
    hearth_attn_fn attn;
    float scale;
} att_job;

static void att_task(void *ctx, int64_t task, int64_t n_tasks)
{
    const att_job *J = ctx;
    int64_t hd = J->hd, qd = J->n_head * hd, kvd = J->kv->kv_dim;
    int64_t i = task / J->n_head, h = task % J->n_head;
    int64_t kvh = h / J->group;
    const float *q = J->q + i * qd + h * hd;
    size_t at = (size_t)(kvh * hd) * cpu_kv_elt(J->kv->type);
    const char *K = cpu_kv_block(J->kv, J->kv->k, J->b->slot[i], J->layer) + at;
    const char *V = cpu_kv_block(J->kv, J->kv->v, J->b->slot[i], J->layer) + at;
    J->attn(J->out + i * qd + h * hd, q, K, V, kvd, J->b->pos[i] + 1, hd, J->scale);
}

int cpu_attn_cached(hearth_stream *st, float *out, const float *Q, const hearth_dev_kv *kv, int64_t layer,
                    const hearth_batch *b, int64_t n_head, int64_t n_head_kv, int64_t hd, float scale)
{
    const cpu_kernels *k = cpu_dev_kernels();
    hearth_attn_fn attn = kv->type == HEARTH_F16 ? k->attn_f16 : kv->type == HEARTH_F32 ? k->attn_f32 : NULL;
    if (!attn)
        return HEARTH_EUNSUPPORTED;
    if (n_head < 1 || n_head_kv < 1 || n_head % n_head_kv || hd < 1 || hd > HEARTH_ATTN_HEAD_DIM_MAX ||
        kv->kv_dim != n_head_kv * hd)
        return HEARTH_EINVAL;
    att_job J = {out, Q, kv, layer, n_head, n_head / n_head_kv, hd, b, attn, scale};
    hearth_pool_run(st->pool, att_task, &J, b->n * n_head);
    return 0;
}

typedef struct packed_job {
    float *ctx, *qkv;
    const float *bq, *bk, *bv;
    const hearth_batch *b;
    int64_t n_head, hd, heads_per_task;
    hearth_attn_fn attn;
    float scale;
} packed_job;

static void packed_task(void *ctx, int64_t t, int64_t n_tasks)
{
    const packed_job *J = ctx;
    int64_t groups = (J->n_head + J->heads_per_task - 1) / J->heads_per_task;
    int64_t hd = J->hd, h = J->n_head * hd, s = t / groups, h0 = t % groups * J->heads_per_task;
    int64_t h1 = h0 + J->heads_per_task < J->n_head ? h0 + J->heads_per_task : J->n_head;
    int64_t r0 = J->b->seq_start[s], len = J->b->seq_start[s + 1] - r0, c0 = h0 * hd, cw = (h1 - h0) * hd;
    for (int64_t i = 0; i < len; i++) {
        float *q = J->qkv + (r0 + i) * 3 * h + c0, *k = q + h, *v = q + 2 * h;
        hearth_cpu_add(q, q, J->bq + c0, cw);
        hearth_cpu_add(k, k, J->bk + c0, cw);
        hearth_cpu_add(v, v, J->bv + c0, cw);
    }
    float *base = J->qkv + r0 * 3 * h;
    for (int64_t head = h0; head < h1; head++) {
        int64_t ch = head * hd;
        for (int64_t i = 0; i < len; i++)
            J->attn(J->ctx + (r0 + i) * h + ch, base + i * 3 * h + ch, base + h + ch, base + 2 * h + ch, 3 * h, len,
                    hd, J->scale);
    }
}

int cpu_attn_packed(hearth_stream *st, float *ctx, float *QKV, const float *bq, const float *bk, const float *bv,
                    const hearth_batch *b, int64_t n_head, int64_t hd, float scale)
{
    if (n_head < 1 || hd < 1 || hd > HEARTH_ATTN_HEAD_DIM_MAX || b->n_seqs < 1)
        return b->n_seqs == 0 ? 0 : HEARTH_EINVAL;
    /* whole sequences per task where there are enough of them to keep ~4
     * tasks per thread, else the heads split into groups */
    int64_t n_tasks = 4 * (int64_t)hearth_pool_size(st->pool);
    int64_t groups = (n_tasks + b->n_seqs - 1) / b->n_seqs;
    groups = groups > n_head ? n_head : groups;
    packed_job J = {ctx, QKV, bq, bk, bv, b, n_head, hd, (n_head + groups - 1) / groups,
                    cpu_dev_kernels()->attn_f32, scale};
    hearth_pool_run(st->pool, packed_task, &J, (int64_t)b->n_seqs * ((n_head + J.heads_per_task - 1) / J.heads_per_task));
    return 0;
}

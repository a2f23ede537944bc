/* llama_forward.c: the walk of a llama-family decoder (llama, qwen2, qwen3)
 * over a batch of tokens from one or more KV-cache slots, written once over
 * engine/dev.h's ops.
 *
 * How: the batch is checked whole first (ids, slots, room in each slot), so
 * a refused batch leaves the cache as it was. It then runs in chunks of at
 * most LLAMA_CHUNK tokens; within a chunk every layer works on all the
 * chunk's rows at once: one matmul per weight with M = rows (a decode step of
 * several slots reads each weight once; a prompt is a GEMM). Per layer, the
 * device ops in order:
 *     rmsnorm        h = rmsnorm(x) * attn_norm
 *     matmul x3      q, k, v = h Wq^T, h Wk^T, h Wv^T (one group call)
 *     qk_rope_store  + biases (qwen2); rmsnorm per head * q_norm / k_norm
 *                    (qwen3); RoPE at each token's position (NORM: llama,
 *                    NEOX: qwen); k, v rows into the token's slot
 *     attn_cached    att = softmax(q K^T / sqrt(head_dim), causal) V per
 *                    (token, head), q head h reading kv head
 *                    h / (n_head / n_head_kv)
 *     matmul         h = att Wo^T
 *     add_rmsnorm    x += h; h = rmsnorm(x) * ffn_norm
 *     matmul x2      g, u = h Wg^T, h Wu^T (one group call)
 *     swiglu         g = silu(g) * u
 *     matmul, add    h = g Wd^T; x += h
 * (Where the device fuses a chunk of nc rows, caps.fused_rows_max, the
 * same work runs as layer_fused's ops: the norms, SwiGLU and the residual
 * adds folded into the matmuls where the device can.)
 * then the final norm and the output projection for the rows that want
 * logits only. Tokens of one slot come in order, so a token's K/V row is in
 * the cache before any later token of the chunk attends to it.
 *
 * The two rules of engine/dev.h hold: per-step data (tokens, positions,
 * slots, output rows, the RoPE angle table) is built on the host into the
 * stream's staging memory and uploaded as one block per chunk; the walk
 * reads nothing an op computed, and logits reach the caller's buffer by one
 * download at the end of a chunk (on the CPU, whose memory is the host's, the
 * matmul writes them in place), or, where the caller asks for greedy draws
 * (hearth_llama_batch's argmax) and the device has its own memory, the
 * device's argmax_rows draws them after the pass and 4 bytes a row come
 * back (a 32k vocabulary's row is 128 KiB, and the host's draw over it some
 * tens of microseconds, in every decode step: on an H100, 1.04B Q4_K, the
 * host's time between two passes went from 91 to 32 us and tg128 from
 * 1,608 to 1,734-1,745 tok/s; 64 sequences a step +43%; bench/RESULTS.md,
 * stop 35). A run of steps (hearth_llama_batch's steps) builds every
 * pass's block first, then enqueues pass after pass, each fed the last
 * pass's draws by a device copy into its block's tokens, and downloads the
 * run's draws once: the host waits once a run, not once a step (on the
 * H100, 1.04B Q4_K, launch to launch 579.0 -> 566.7 us against 545.5 us
 * on the GPU, tg128 +2%; bench/RESULTS.md, stop 36). So the device work
 * between the upload and
 * the download (pass_ops) is the same launches at the same addresses for
 * every step of the same shape: a device that records work (the CUDA
 * backend's graphs, dev.h's graph_begin/graph_end) replays a decode step
 * with one call, keyed by the model, the cache and the row counts. The angles are computed here, once per token
 * for all layers, in double (large positions keep their precision), with the
 * model's linear frequency scale and rope_freqs factors folded in, so every
 * device rotates by the same table.
 *
 * Scratch activations live in the stream's arena (one call per forward, at
 * the same addresses while the chunk size does not grow), not in the model:
 * no allocation per token in steady state.
 *
 * Rejected: a graph/tensor abstraction (one fixed architecture family does
 * not need it); a copy of this walk per device (the ops are the seam);
 * concatenating Q/K/V into one weight (the weights are separate tensors in
 * the file, perhaps of different types, and the group call gives the single
 * job without a copy). */
#include "models/llama_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Floats per token of the RoPE table: cos, sin of each rotated pair; 1 when
 * nothing rotates, so the table is never empty. */
static int64_t rope_stride(const hearth_llama_hparams *hp)
{
    return hp->n_rot > 0 ? hp->n_rot : 1;
}

/* One chunk's activations in the stream's arena, and its per-step block. */
typedef struct llama_pass {
    hearth_stream st;
    const hearth_dev_ops *D;
    float *x;                /* (cap, n_embd) residual stream */
    float *h;                /* (cap, n_embd) normed input of a sub-layer */
    float *q;                /* (cap, n_head*hd) */
    float *k, *v;            /* (cap, n_head_kv*hd) */
    float *att;              /* (cap, n_head*hd) attention output */
    float *g, *u;            /* (cap, n_ff) FFN gate and up */
    float *logits;           /* (cap, n_vocab) where device memory is not the host's, else NULL */
    int32_t *ids;            /* (HEARTH_LLAMA_STEPS_MAX, cap) greedy draws, a run's passes one after another
                                (NULL where nothing is drawn) */
    hearth_batch hb, db;     /* the step block: host staging (pass j's at j block_stride), device copy */
    size_t block_bytes, block_stride;
    int64_t cap;
    hearth_dev_kv kv;
} llama_pass;

static size_t carve(size_t *at, size_t bytes)
{
    size_t off = (*at + 63) & ~(size_t)63;
    *at = off + bytes;
    return off;
}

/* draws: the forward makes greedy draws (hearth_llama_batch's argmax),
 * which need the logits in the arena even where the device's memory is
 * the host's. Staging holds a run's blocks (HEARTH_LLAMA_STEPS_MAX) on
 * every device with its own memory, whether this forward runs steps or
 * not, so the staging block never moves when runs start (a recording
 * device drops its records when it does). */
static int pass_open(llama_pass *p, hearth_llama *m, hearth_kv *kv, hearth_pool *pool, int64_t cap, bool draws,
                     hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    int rc = hearth_stream_init(&p->st, m->dev, pool, err);
    if (rc)
        return rc;
    p->D = hearth_stream_ops(&p->st);
    p->kv = hearth_kv_view(kv);
    size_t c = (size_t)cap * sizeof(float), qd = (size_t)(hp->n_head * hp->head_dim),
           kvd = (size_t)(hp->n_head_kv * hp->head_dim), E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    size_t at = 0, o[11];
    o[0] = carve(&at, c * E);
    o[1] = carve(&at, c * E);
    o[2] = carve(&at, c * qd);
    o[3] = carve(&at, c * kvd);
    o[4] = carve(&at, c * kvd);
    o[5] = carve(&at, c * qd);
    o[6] = carve(&at, c * F);
    o[7] = carve(&at, c * F);
    const bool host = m->dev->caps.host_memory, runs = !host || draws;
    o[8] = carve(&at, host && !draws ? 0 : c * (size_t)hp->n_vocab);
    p->cap = cap;
    p->block_bytes = hearth_batch_layout(&p->hb, NULL, cap, rope_stride(hp), 0);
    p->block_stride = (p->block_bytes + 63) & ~(size_t)63;
    /* the device's block, and behind it a run's other blocks (argmax_feed
     * makes each pass's block from the one behind it) */
    o[9] = carve(&at, runs ? HEARTH_LLAMA_STEPS_MAX * p->block_stride : p->block_bytes);
    o[10] = carve(&at, runs ? HEARTH_LLAMA_STEPS_MAX * c : 0);
    if ((rc = p->D->scratch(&p->st, at, p->block_stride * (runs ? HEARTH_LLAMA_STEPS_MAX : 1))))
        return hearth_err_set(err, rc, "llama: out of memory for activations of %lld tokens", (long long)cap);
    char *b = p->st.scratch;
    float **bufs[] = {&p->x, &p->h, &p->q, &p->k, &p->v, &p->att, &p->g, &p->u, &p->logits};
    for (int i = 0; i < 9; i++)
        *bufs[i] = (float *)(b + o[i]);
    p->ids = (int32_t *)(b + o[10]);
    if (host && !draws)
        p->logits = NULL, p->ids = NULL;
    hearth_batch_layout(&p->hb, p->st.staging, cap, rope_stride(hp), 0);
    hearth_batch_layout(&p->db, b + o[9], cap, rope_stride(hp), 0);
    return 0;
}

static int op_failed(int rc, const char *op, int64_t il, hearth_err *err)
{
    return hearth_err_set(err, rc, "llama: layer %lld: %s failed (%s)", (long long)il, op, hearth_status_name(rc));
}

/* Layer il's QK step's arguments (biases, QK-norm, RoPE). */
static hearth_qk qk_of(const hearth_llama *m, int64_t il)
{
    const hearth_llama_hparams *hp = &m->hp;
    const llama_layer *L = &m->layers[il];
    hearth_qk qk = {L->bq, L->bk, L->bv, L->q_norm, L->k_norm, hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_rot,
                    hp->rope_type == HEARTH_ROPE_NORM ? 0 : 2, hp->rms_eps};
    return qk;
}

/* att = attention over the cache (q, k and v stored there already). */
static int attention_cached(hearth_llama *m, llama_pass *p, int64_t il, hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    const int64_t hd = hp->head_dim;
    int rc = p->D->attn_cached(&p->st, p->att, p->q, &p->kv, il, &p->db, hp->n_head, hp->n_head_kv, hd,
                               (float)(1.0 / sqrt((double)hd)));
    return rc ? op_failed(rc, "attention", il, err) : 0;
}

/* The unfused walk's middle: q, k (biases, QK-norm, RoPE), k and v into
 * the cache, then att = attention over the cache. */
static int attention(hearth_llama *m, llama_pass *p, int64_t il, hearth_err *err)
{
    const hearth_qk qk = qk_of(m, il);
    int rc = p->D->qk_rope_store(&p->st, p->q, p->k, p->v, &qk, &p->kv, il, &p->db);
    return rc ? op_failed(rc, "qk_rope_store", il, err) : attention_cached(m, p, il, err);
}

/* The matmul with f's neighbours: D->matmul_fused, or where the device
 * does not fold in the norm, the norm apart (into tmp) and the rest fused,
 * or all apart. X is (nc, K); tmp a free buffer of (nc, K) floats. SWIGLU
 * needs Y[1] as room for the up products when it runs apart, and Y's
 * strides equal to the rows' widths; ADD by itself (a fused call never both
 * normalizes and accumulates here) needs one weight. */
static int mm_fold(const hearth_dev_ops *D, hearth_stream *st, const hearth_weight *const *w, int n, const float *X,
                   int64_t K, int64_t nc, float *const *Y, const int64_t *ldy, const hearth_mm_fuse *f, float *tmp)
{
    int rc = D->matmul_fused(st, w, n, X, K, nc, Y, ldy, f);
    if (rc != HEARTH_EUNSUPPORTED)
        return rc;
    const float *in = X;
    if (f->pre == HEARTH_MM_PRE_RMSNORM) {
        if ((rc = D->rmsnorm(st, tmp, X, NULL, nc, K, f->norm_w, f->eps)))
            return rc;
        in = tmp;
        if (f->post != HEARTH_MM_STORE) {
            hearth_mm_fuse g = *f; /* the post and its arguments, without the norm */
            g.pre = HEARTH_MM_PRE_NONE;
            g.norm_w = NULL;
            if ((rc = D->matmul_fused(st, w, n, in, K, nc, Y, ldy, &g)) != HEARTH_EUNSUPPORTED)
                return rc;
        }
    }
    switch (f->post) {
    case HEARTH_MM_STORE: return D->matmul(st, w, n, in, K, nc, Y, ldy);
    case HEARTH_MM_SWIGLU:
        if (n != 2 || ldy[0] != ldy[1] || (rc = D->matmul(st, w, 2, in, K, nc, Y, ldy)))
            return rc ? rc : HEARTH_EINVAL;
        return D->swiglu(st, Y[0], Y[1], nc, ldy[0]);
    case HEARTH_MM_ADD:
        if (n != 1 || in == tmp || (rc = D->matmul(st, w, 1, in, K, nc, &tmp, ldy)))
            return rc ? rc : HEARTH_EINVAL;
        return D->add(st, Y[0], tmp, nc, ldy[0]);
    case HEARTH_MM_QK_ROPE_STORE:
        if (n != 3 || (rc = D->matmul(st, w, 3, in, K, nc, Y, ldy)))
            return rc ? rc : HEARTH_EINVAL;
        return D->qk_rope_store(st, Y[0], Y[1], Y[2], f->qk, f->kv, f->layer, f->b);
    }
    return HEARTH_EINVAL;
}

/* layer_forward's ops for the row counts the device fuses (decode):
 *     matmul x3 (attn norm folded in,   q, k, v = rmsnorm(x) Wq^T, ...
 *       the QK step after)              and qk_rope_store's work
 *     attn_cached                       as below
 *     matmul (accumulating)             x += att Wo^T
 *     matmul x2 (ffn norm folded in,    g = silu(rmsnorm(x) Wg^T) * (rmsnorm(x) Wu^T)
 *       SwiGLU after)
 *     matmul (accumulating)             x += g Wd^T
 * five launches where the ops apart take ten (the CUDA backend folds the
 * norms and llama's QK step in at one row; at more it keeps them apart:
 * eight). */
static int layer_fused(hearth_llama *m, llama_pass *p, int64_t il, int64_t nc, hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    const hearth_dev_ops *D = p->D;
    hearth_stream *st = &p->st;
    const llama_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, F = hp->n_ff, hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
    int rc;
    const hearth_qk qk = qk_of(m, il);
    hearth_mm_fuse f = {HEARTH_MM_PRE_RMSNORM, L->attn_norm, hp->rms_eps, HEARTH_MM_QK_ROPE_STORE, &qk, &p->kv, il,
                        &p->db};
    const hearth_weight *qkv[] = {L->wq.w, L->wk.w, L->wv.w};
    float *qkv_y[] = {p->q, p->k, p->v};
    const int64_t qkv_ld[] = {qd, kvd, kvd};
    if ((rc = mm_fold(D, st, qkv, 3, p->x, E, nc, qkv_y, qkv_ld, &f, p->h)))
        return hearth_err_set(err, rc, "llama: layer %lld: attn norm, matmul of 3 weights and the QK step failed (%s)",
                              (long long)il, hearth_status_name(rc));
    if ((rc = attention_cached(m, p, il, err)))
        return rc;
    f = (hearth_mm_fuse){HEARTH_MM_PRE_NONE, NULL, 0.0f, HEARTH_MM_ADD};
    if ((rc = mm_fold(D, st, (const hearth_weight *const[]){L->wo.w}, 1, p->att, qd, nc, &p->x, &E, &f, p->h)))
        return op_failed(rc, "attn output and residual", il, err);
    f = (hearth_mm_fuse){HEARTH_MM_PRE_RMSNORM, L->ffn_norm, hp->rms_eps, HEARTH_MM_SWIGLU};
    const hearth_weight *gu[] = {L->gate.w, L->up.w};
    float *gu_y[] = {p->g, p->u};
    const int64_t gu_ld[] = {F, F};
    if ((rc = mm_fold(D, st, gu, 2, p->x, E, nc, gu_y, gu_ld, &f, p->h)))
        return op_failed(rc, "ffn norm, matmul of 2 weights and swiglu", il, err);
    f = (hearth_mm_fuse){HEARTH_MM_PRE_NONE, NULL, 0.0f, HEARTH_MM_ADD};
    if ((rc = mm_fold(D, st, (const hearth_weight *const[]){L->down.w}, 1, p->g, F, nc, &p->x, &E, &f, p->h)))
        return op_failed(rc, "down and residual", il, err);
    return 0;
}

/* Whether the device folds neighbours into its matmuls for a step of nc
 * rows (layer_fused's walk, and the output norm in the output matmul). */
static bool step_fused(const hearth_llama *m, const llama_pass *p, int64_t nc)
{
    return p->D->matmul_fused && nc <= m->dev->caps.fused_rows_max;
}

static int layer_forward(hearth_llama *m, llama_pass *p, int64_t il, int64_t nc, hearth_err *err)
{
    if (step_fused(m, p, nc))
        return layer_fused(m, p, il, nc, err);
    const hearth_llama_hparams *hp = &m->hp;
    const hearth_dev_ops *D = p->D;
    hearth_stream *st = &p->st;
    const llama_layer *L = &m->layers[il];
    int64_t E = hp->n_embd, F = hp->n_ff, hd = hp->head_dim, qd = hp->n_head * hd, kvd = hp->n_head_kv * hd;
    int rc;
    if ((rc = D->rmsnorm(st, p->h, p->x, NULL, nc, E, L->attn_norm, hp->rms_eps)))
        return op_failed(rc, "attn norm", il, err);
    const hearth_weight *qkv[] = {L->wq.w, L->wk.w, L->wv.w};
    float *qkv_y[] = {p->q, p->k, p->v};
    const int64_t qkv_ld[] = {qd, kvd, kvd};
    if ((rc = D->matmul(st, qkv, 3, p->h, E, nc, qkv_y, qkv_ld)))
        return hearth_err_set(err, rc, "llama: matmul of 3 weights of %lld inputs failed", (long long)E);
    if ((rc = attention(m, p, il, err)))
        return rc;
    if ((rc = D->matmul(st, (const hearth_weight *const[]){L->wo.w}, 1, p->att, qd, nc, &p->h, &E)))
        return hearth_err_set(err, rc, "llama: matmul of %lld x %lld weights failed", (long long)L->wo.n_out,
                              (long long)L->wo.n_in);
    if ((rc = D->add_rmsnorm(st, p->x, p->h, nc, E, L->ffn_norm, hp->rms_eps)))
        return op_failed(rc, "ffn norm", il, err);
    const hearth_weight *gu[] = {L->gate.w, L->up.w};
    float *gu_y[] = {p->g, p->u};
    const int64_t gu_ld[] = {F, F};
    if ((rc = D->matmul(st, gu, 2, p->h, E, nc, gu_y, gu_ld)))
        return hearth_err_set(err, rc, "llama: matmul of 2 weights of %lld inputs failed", (long long)E);
    if ((rc = D->swiglu(st, p->g, p->u, nc, F)))
        return op_failed(rc, "swiglu", il, err);
    if ((rc = D->matmul(st, (const hearth_weight *const[]){L->down.w}, 1, p->g, F, nc, &p->h, &E)))
        return hearth_err_set(err, rc, "llama: matmul of %lld x %lld weights failed", (long long)L->down.n_out,
                              (long long)L->down.n_in);
    if ((rc = D->add(st, p->x, p->h, nc, E)))
        return op_failed(rc, "residual", il, err);
    return 0;
}

/* The device work of a chunk after its step block is uploaded: the
 * embedding, the layers, and the output rows' norm and projection into y
 * (n_out rows of n_vocab). */
static int pass_ops(hearth_llama *m, llama_pass *p, int64_t nc, float *y, hearth_err *err)
{
    const hearth_llama_hparams *hp = &m->hp;
    const hearth_dev_ops *D = p->D;
    hearth_stream *st = &p->st;
    int64_t E = hp->n_embd, V = hp->n_vocab, n_out = p->db.n_out;
    int rc;
    if ((rc = D->embed(st, p->x, m->embd.w, &p->db, NULL, NULL, NULL, NULL, 0)))
        return hearth_err_set(err, rc, "llama: token_embd rows cannot be read (%s)", hearth_status_name(rc));
    for (int64_t il = 0; il < hp->n_layer; il++)
        if ((rc = layer_forward(m, p, il, nc, err)))
            return rc;
    if (n_out == 0)
        return 0;
    /* every row wants logits (out_src is 0 .. nc - 1) in a step the device
     * fuses: the final norm folded into the output matmul, one launch less
     * a decode step (the device keeps it apart where it does not fold) */
    if (n_out == nc && step_fused(m, p, nc)) {
        hearth_mm_fuse f = {HEARTH_MM_PRE_RMSNORM, m->out_norm, hp->rms_eps, HEARTH_MM_STORE};
        if ((rc = mm_fold(D, st, (const hearth_weight *const[]){m->out.w}, 1, p->x, E, nc, &y, &V, &f, p->h)))
            return op_failed(rc, "output norm and matmul", hp->n_layer, err);
        return 0;
    }
    /* final norm of the rows that want logits, packed to the front of h */
    if ((rc = D->rmsnorm(st, p->h, p->x, p->db.out_src, n_out, E, m->out_norm, hp->rms_eps)))
        return op_failed(rc, "output norm", hp->n_layer, err);
    if ((rc = D->matmul(st, (const hearth_weight *const[]){m->out.w}, 1, p->h, E, n_out, &y, &V)))
        return hearth_err_set(err, rc, "llama: matmul of %lld x %lld weights failed", (long long)m->out.n_out,
                              (long long)m->out.n_in);
    return 0;
}

/* Fills the host block hb for tokens [0, nc): each token's position is its
 * slot's length plus what the forward has placed there before it (pend). */
static void block_fill(const hearth_llama *m, hearth_kv *kv, hearth_batch *hb, const int32_t *tokens,
                       const int32_t *slot, const bool *want, int64_t nc)
{
    const hearth_llama_hparams *hp = &m->hp;
    int64_t half = hp->n_rot / 2, rs = rope_stride(hp);
    hb->n = nc;
    hb->n_out = 0;
    for (int64_t i = 0; i < nc; i++) {
        hb->token[i] = tokens[i];
        hb->slot[i] = slot[i];
        hb->pos[i] = kv->len[slot[i]] + kv->pend[slot[i]]++;
        if (want[i])
            hb->out_src[hb->n_out++] = (int32_t)i;
        /* the rotation angles of each token, once for all layers */
        for (int64_t j = 0; j < half; j++) {
            double a = (double)hb->pos[i] * m->inv_freq[j];
            hb->rope_cs[i * rs + 2 * j] = (float)cos(a);
            hb->rope_cs[i * rs + 2 * j + 1] = (float)sin(a);
        }
    }
}

/* Whether the model's device makes the next pass's block with its draws
 * (argmax_feed). */
static bool feeds(const hearth_llama *m)
{
    const hearth_dev *dev = m->dev;
    return dev->ops->argmax_feed && dev->ops->supports(dev, HEARTH_OP_ARGMAX_FEED, HEARTH_F32);
}

/* Pass j's greedy draws into p->ids; with feed, pass j + 1's block made
 * behind them from the one behind the device's (argmax_feed). */
static int draw(llama_pass *p, int j, int steps, bool feed, int64_t n_out, const float *y, int64_t V, hearth_err *err)
{
    const hearth_dev_ops *D = p->D;
    int32_t *drawn = p->ids + (size_t)j * (size_t)n_out;
    int rc = feed && j + 1 < steps
                 ? D->argmax_feed(&p->st, drawn, y, n_out, V, p->db.token,
                                  (const int32_t *)((const char *)p->db.token + (size_t)(j + 1) * p->block_stride),
                                  (int64_t)(p->block_bytes / sizeof(int32_t)))
                 : D->argmax_rows(&p->st, drawn, y, n_out, V);
    return rc ? hearth_err_set(err, rc, "llama: the greedy draws of %lld rows failed (%s)", (long long)n_out,
                               hearth_status_name(rc))
              : 0;
}

static int pass_failed(int rc, int64_t nc, hearth_err *err)
{
    return err && err->code ? rc
                            : hearth_err_set(err, rc, "llama: a pass of %lld tokens failed (%s)", (long long)nc,
                                             hearth_status_name(rc));
}

/* A fed run's passes and draws, enqueued one after another. */
static int run_ops(hearth_llama *m, llama_pass *p, int64_t nc, int steps, int64_t n_out, float *y, hearth_err *err)
{
    for (int j = 0; j < steps; j++) {
        int rc = pass_ops(m, p, nc, y, err);
        if (rc)
            return pass_failed(rc, nc, err);
        if ((rc = draw(p, j, steps, true, n_out, y, m->hp.n_vocab, err)))
            return rc;
    }
    return 0;
}

/* Runs tokens [0, nc) (a chunk of the batch) and writes the logits rows they
 * want, from row out_base of logits on, or with ids their greedy draws from
 * ids[out_base] on. want: (nc) whether each wants them. With steps > 1
 * (check_batch has seen every row wanted, each slot once, ids set), pass j
 * runs with pass j - 1's draws as its tokens, copied on the device, so the
 * passes follow each other on the device with nothing between them from
 * the host: every block is built and the whole run enqueued before one
 * download of its steps x nc draws and one wait. Where the device has
 * argmax_feed, the run's blocks are uploaded at once, behind the device's
 * block, and each pass's draw makes the next pass's block (its tokens the
 * draws): a pass is its recorded launches and one kernel, not also an
 * upload and a copy, each of which waited on the pass before. A fed run of
 * one row (a single sequence's decode) is, where the device records runs
 * (caps.graph_runs), one record of all its passes and draws: one launch a
 * run, not two a pass, and no gap at each pass's end. On the H100 (1.04B,
 * tg128, six reps each, stop 42): Q8_0 1,680-1,688 pass by pass against
 * 1,688-1,698, Q4_K 2,080-2,086 against 2,095-2,101 tok/s; each length of
 * run is a record of its own (3.5-4.3 ms to instantiate 7 or 8 passes),
 * which the scheduler's warm-up makes before serving (gen_sched.h). Runs
 * of several rows stay pass by pass: their lengths times their row counts
 * would be too many records. */
static int chunk_forward(hearth_llama *m, hearth_kv *kv, llama_pass *p, const int32_t *tokens, const int32_t *slot,
                         const bool *want, int64_t nc, int steps, float *logits, int32_t *ids, int64_t out_base,
                         hearth_err *err)
{
    const hearth_dev_ops *D = p->D;
    hearth_stream *st = &p->st;
    int64_t V = m->hp.n_vocab;
    /* the step blocks, on the host: pass j's in staging block j */
    for (int j = 0; j < steps; j++) {
        hearth_batch_layout(&p->hb, (char *)p->st.staging + (size_t)j * p->block_stride, p->cap, rope_stride(&m->hp),
                            0);
        block_fill(m, kv, &p->hb, tokens, slot, want, nc);
    }
    p->db.n = nc;
    p->db.n_out = p->hb.n_out;
    int64_t n_out = p->hb.n_out;
    float *dst = logits ? logits + (size_t)out_base * (size_t)V : NULL, *y = p->logits ? p->logits : dst;
    hearth_graph_key key = {m->uid, kv->uid, nc, n_out, 0};
    int rc = 0;
    const bool feed = steps > 1 && ids && n_out == nc && feeds(m);
    const bool whole = feed && nc == 1 && m->dev->caps.graph_runs && D->graph_begin;
    if (feed && (rc = D->upload(st, p->db.token, p->st.staging, (size_t)steps * p->block_stride)))
        return hearth_err_set(err, rc, "llama: the blocks of a run of %d steps cannot be uploaded", steps);
    if (whole) {
        hearth_graph_key rk = key;
        rk.steps = steps;
        int g = D->graph_begin(st, &rk);
        if (g < 0)
            return hearth_err_set(err, g, "llama: a recorded run of %d passes cannot be launched (%s)", steps,
                                  hearth_status_name(g));
        if (g == 0) {
            rc = run_ops(m, p, nc, steps, n_out, y, err);
            if (D->graph_end && (rc = D->graph_end(st, &rk, rc)) == HEARTH_EAGAIN)
                rc = run_ops(m, p, nc, steps, n_out, y, err);
            if (rc)
                return err && err->code ? rc
                                        : hearth_err_set(err, rc, "llama: a run of %d passes failed (%s)", steps,
                                                         hearth_status_name(rc));
        }
    }
    for (int j = 0; j < steps && !whole; j++) {
        const void *block = (const char *)p->st.staging + (size_t)j * p->block_stride;
        if (!feed &&
            ((rc = D->upload(st, p->db.token, block, p->block_bytes)) ||
             (j > 0 && (rc = D->copy(st, p->db.token, p->ids + (size_t)(j - 1) * (size_t)n_out, (size_t)nc * 4)))))
            return hearth_err_set(err, rc, "llama: the step's block of %lld tokens cannot be uploaded", (long long)nc);
        /* the pass, recorded and replayed where the device does that (dev.h) */
        int g = D->graph_begin ? D->graph_begin(st, &key) : 0;
        if (g < 0)
            return hearth_err_set(err, g, "llama: a recorded pass of %lld tokens cannot be launched (%s)",
                                  (long long)nc, hearth_status_name(g));
        if (g == 0) {
            rc = pass_ops(m, p, nc, y, err);
            if (D->graph_end && (rc = D->graph_end(st, &key, rc)) == HEARTH_EAGAIN)
                rc = pass_ops(m, p, nc, y, err);
            if (rc)
                return pass_failed(rc, nc, err);
        }
        /* the draws, made where the logits are */
        if (ids && n_out && (rc = draw(p, j, steps, feed, n_out, y, V, err)))
            return rc;
    }
    if (ids && n_out) {
        if ((rc = D->download(st, ids + out_base, p->ids, (size_t)steps * (size_t)n_out * sizeof(int32_t))))
            return hearth_err_set(err, rc, "llama: the greedy draws of %lld rows failed (%s)", (long long)n_out,
                                  hearth_status_name(rc));
    } else if (p->logits && n_out && (rc = D->download(st, dst, y, (size_t)n_out * (size_t)V * sizeof(float)))) {
        return hearth_err_set(err, rc, "llama: logits of %lld rows cannot be downloaded", (long long)n_out);
    }
    if ((rc = D->sync(st)))
        return hearth_err_set(err, rc, "llama: the device failed running a pass of %lld tokens (%s)", (long long)nc,
                              hearth_status_name(rc));
    for (int64_t i = 0; i < nc; i++) {
        kv->len[slot[i]] += kv->pend[slot[i]];
        kv->pend[slot[i]] = 0;
    }
    return 0;
}

/* Whether the model's device makes greedy draws (argmax_rows). */
static bool draws_made(const hearth_llama *m)
{
    const hearth_dev *dev = m->dev;
    return dev->ops->argmax_rows && dev->ops->supports(dev, HEARTH_OP_ARGMAX, HEARTH_F32);
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
    if (b->argmax && !draws_made(m))
        return hearth_err_set(err, HEARTH_EINVAL, "llama: greedy draws asked of device %s, which cannot make them",
                              m->dev->caps.name);
    if (any && !logits && !b->argmax)
        return hearth_err_set(err, HEARTH_EINVAL, "llama: logits wanted but no output buffer given");
    if (b->steps < 0 || b->steps > HEARTH_LLAMA_STEPS_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "llama: a run of %d steps (1 to %d)", b->steps,
                              HEARTH_LLAMA_STEPS_MAX);
    if (b->steps > 1) {
        if (!b->argmax || b->n > LLAMA_CHUNK)
            return hearth_err_set(err, HEARTH_EINVAL, "llama: a run of %d steps needs greedy draws and at most %d rows "
                                  "(%d given)", b->steps, LLAMA_CHUNK, b->n);
        for (int32_t i = 0; i < b->n; i++) {
            if (b->want_logits && !b->want_logits[i])
                return hearth_err_set(err, HEARTH_EINVAL, "llama: a run of %d steps: row %d wants no draw (each "
                                      "pass feeds a row its last draw)", b->steps, i);
            for (int32_t k = 0; k < i; k++)
                if (b->slot[k] == b->slot[i])
                    return hearth_err_set(err, HEARTH_EINVAL, "llama: a run of %d steps: rows %d and %d are both "
                                          "slot %d (one row a slot)", b->steps, k, i, b->slot[i]);
        }
    }
    return 0;
}

bool hearth_llama_argmax_on_device(const hearth_llama *m)
{
    return !m->dev->caps.host_memory && draws_made(m);
}

int hearth_llama_forward(hearth_llama *m, hearth_kv *kv, hearth_pool *pool, const hearth_llama_batch *b, float *logits,
                         hearth_err *err)
{
    int rc = check_batch(m, kv, b, logits, err);
    if (rc || b->n == 0)
        return rc;
    /* room in every slot, checked before anything is written */
    const int steps = b->steps > 1 ? b->steps : 1;
    for (int32_t i = 0; i < b->n; i++)
        kv->pend[b->slot[i]] += steps;
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
    llama_pass p = {0};
    bool want[LLAMA_CHUNK];
    if ((rc = pass_open(&p, m, kv, pool, chunk, b->argmax != NULL, err)))
        goto done;
    int32_t out_row = 0;
    for (int32_t c0 = 0; c0 < b->n; c0 += (int32_t)chunk) {
        int64_t nc = b->n - c0 < chunk ? b->n - c0 : chunk;
        int32_t base = out_row;
        for (int64_t i = 0; i < nc; i++) {
            want[i] = steps > 1 || (b->want_logits ? b->want_logits[c0 + i] : c0 + i == b->n - 1);
            out_row += want[i];
        }
        rc = chunk_forward(m, kv, &p, b->tokens + c0, b->slot + c0, want, nc, steps, b->argmax ? NULL : logits,
                           b->argmax, base, err);
        if (rc) {
            for (int32_t i = 0; i < b->n; i++)
                kv->pend[b->slot[i]] = 0;
            goto done;
        }
    }
done:
    hearth_stream_deinit(&p.st);
    return rc;
}

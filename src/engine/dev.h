/* dev.h: the device seam. A model's walk (the ops of a layer, in order) is
 * written once, over this header; each device (engine/cpu/ today, a CUDA
 * backend later) implements the table below.
 *
 *   hearth_dev      one device: memory, weights placed for its kernels,
 *                   capabilities (which ops on which types, limits such as
 *                   the largest attention head)
 *   hearth_stream   one execution context on a device (on the CPU: a thread
 *                   pool or a slice of one); it owns the pass scratch, one
 *                   arena at fixed addresses while its size does not grow
 *   hearth_dev_ops  the table: memory calls, weight calls, and the compute
 *                   ops, each over whole batches of rows, each returning 0
 *                   or a negative status (no op aborts the process)
 *
 * The compute ops are the fusions the walks already had, named, not found by
 * an optimizer (no graph IR): llama's five row steps (attn-in norm; QK
 * biases, QK-norm, RoPE and the KV store; FFN-in add+norm; SwiGLU; the
 * residual add), bert's residual + bias + LayerNorm and bias + GELU, the
 * embedding lookup (bert's with positions and LayerNorm fused), attention
 * over the KV cache, packed attention over sequences, and pooling.
 *
 * Two rules keep a GPU step capturable as a graph, and the API is shaped for
 * them even where the CPU does not need them:
 *   1. The walk never reads on the host a value an op computed. Every op
 *      takes and returns device pointers; what the host needs (logits) is
 *      downloaded at the end of a pass, never in the middle.
 *   2. Per-step data (tokens, positions, slots, output rows, RoPE angles,
 *      sequence starts) travels as one block, a hearth_batch, built on the
 *      host (in the stream's staging memory) and uploaded once per pass into
 *      the stream's scratch, at the same offset every pass.
 *
 * Pointers given to ops are device pointers: from the stream's scratch, from
 * alloc, or weights and small vectors the model placed (on the CPU device,
 * whose memory is the host's, any host pointer is one; caps.host_memory).
 *
 * Rejected: a per-row or per-head op (a GPU cannot take a launch per row);
 * one forward per device (multiplies walks by devices); a graph builder with
 * an allocator (ggml's; a fixed family of walks does not need it). */
#ifndef HEARTH_ENGINE_DEV_H
#define HEARTH_ENGINE_DEV_H

#include "base/err.h"
#include "base/pool.h"
#include "engine/dtype.h"
#include "engine/dev_vision.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_dev hearth_dev;
typedef struct hearth_stream hearth_stream;
typedef struct hearth_dev_ops hearth_dev_ops;
/* A (n_out, n_in) weight of one dtype, laid out for its device's kernels
 * (the CPU: the mapped rows in place, or GEMM panels). Opaque. */
typedef struct hearth_weight hearth_weight;

/* The ops, for supports() (dtype: the weight's for MATMUL and EMBED, the KV
 * cache's for QK_ROPE_STORE and ATTN_CACHED, F32 for the rest). */
typedef enum hearth_op {
    HEARTH_OP_MATMUL = 0,
    HEARTH_OP_EMBED,
    HEARTH_OP_RMSNORM,
    HEARTH_OP_ADD,
    HEARTH_OP_ADD_RMSNORM,
    HEARTH_OP_SWIGLU,
    HEARTH_OP_QK_ROPE_STORE,
    HEARTH_OP_ATTN_CACHED,
    HEARTH_OP_ADD_LAYERNORM,
    HEARTH_OP_BIAS_GELU,
    HEARTH_OP_ATTN_PACKED,
    HEARTH_OP_POOL,
    HEARTH_OP_ARGMAX,
    HEARTH_OP_ARGMAX_FEED,
    HEARTH_OP_COUNT_
} hearth_op;

/* "matmul", "embed", ... ("?" out of range). */
const char *hearth_op_name(hearth_op op);

/* What a device can do, asked at load so a model it cannot run is refused
 * there, naming the tensor and the limit. */
typedef struct hearth_dev_caps {
    const char *name;          /* "cpu" */
    int64_t head_dim_max;      /* largest attention head (ATTN_*, QK_ROPE_STORE) */
    int64_t matmul_group_max;  /* weights one MATMUL call takes (>= 1) */
    int64_t fused_rows_max;    /* matmul_fused folds its neighbours in for M <= this (0: never); the
                                  walk runs the fused sequence only then, the separate ops otherwise */
    bool host_memory;          /* device memory is host memory: a host pointer is a device pointer */
    double matmul_round;       /* the largest relative rounding MATMUL may apply to each product's inputs
                                  (0: f32 throughout; a tensor-core path rounds X to half or bfloat16) */
    bool graph_runs;           /* graph_begin records a whole run of greedy passes with their draws as one
                                  record (hearth_graph_key.steps), replayed with one call */
} hearth_dev_caps;

struct hearth_dev {
    const hearth_dev_ops *ops;
    hearth_dev_caps caps;
    void *ctx;                 /* the backend's own */
};

/* One execution context, storage owned by the caller (hearth_stream_init /
 * hearth_stream_deinit). Not thread-safe: one thread drives a stream. */
struct hearth_stream {
    hearth_dev *dev;
    hearth_pool *pool;         /* host threads the stream may use (the CPU's compute; NULL: the caller alone) */
    void *scratch;             /* the pass arena (device memory), see hearth_stream_scratch */
    size_t scratch_bytes;
    void *owned;               /* the arena when the backend allocated it for this stream, else NULL */
    void *staging;             /* host memory for the per-step block */
    size_t staging_bytes;
    void *impl;                /* the backend's per-stream state (a CUDA stream); NULL on the CPU */
};

/* A KV cache as the ops see it: n_slots x n_layer x {K, V} blocks of
 * (n_ctx, kv_dim) elements of type (F32 or F16), slot-major, in device memory
 * (k, v). Lengths stay on the host, with whoever schedules the slots; the
 * ops learn positions from the hearth_batch. */
typedef struct hearth_dev_kv {
    void *k, *v;
    hearth_dtype type;
    int64_t n_ctx, n_layer, kv_dim;
} hearth_dev_kv;

/* The per-step block (rule 2): every pointer points into one block, so a
 * pass uploads it with one call. Built by hearth_batch_layout. */
typedef struct hearth_batch {
    int64_t n;                 /* rows of the step (tokens) */
    int32_t *token;            /* (n) token ids */
    int64_t *pos;              /* (n) position of each token in its sequence */
    int32_t *slot;             /* (n) KV slot of each token (decoders) */
    int64_t rope_stride;       /* floats per row of rope_cs (>= 1) */
    float *rope_cs;            /* (n, rope_stride) cos, sin of each rotated pair at pos (decoders) */
    int64_t n_out;             /* rows that want an output (logits) */
    int32_t *out_src;          /* (n) row of each output, in order; the first n_out used */
    int n_seqs;                /* packed sequences (encoders), else 0 */
    int64_t *seq_start;        /* (n_seqs + 1) first row of each sequence, then n */
} hearth_batch;

/* Lays a block for n rows, rope_stride floats of angles per row and n_seqs
 * sequences out at base (NULL: only measures), setting b's pointers and
 * sizes (n_out 0); returns its bytes. The same call on the host staging and
 * on the device scratch gives the same offsets, so the upload is one copy. */
size_t hearth_batch_layout(hearth_batch *b, void *base, int64_t n, int64_t rope_stride, int n_seqs);

/* A weight to place (weight_new). data/row_bytes: the rows as the file
 * stores them (GGUF layouts), borrowed for weight_new and, while
 * weight_reads_host says so, for the weight's life. */
enum hearth_weight_place {
    HEARTH_WEIGHT_AS_STORED = 0, /* read as stored (an embedding table read by rows, a tied output) */
    HEARTH_WEIGHT_COMPACT,       /* lay out for speed where no more memory is taken (CPU: F16 -> f16 panels) */
    HEARTH_WEIGHT_FAST,          /* lay out for speed, more memory allowed (CPU: F32 -> f32 panels kept beside) */
};
typedef struct hearth_weight_desc {
    hearth_dtype type;
    const void *data;
    size_t row_bytes;
    int64_t n_out, n_in;
    enum hearth_weight_place place;
    const char *name;            /* for messages */
} hearth_weight_desc;

/* Pooling of a packed sequence (hf_folder.h's enum hearth_pooling values). */
enum { HEARTH_DEV_POOL_MEAN = 0, HEARTH_DEV_POOL_CLS = 1, HEARTH_DEV_POOL_LAST = 2 };

/* One layer's per-head extras of the QK step. */
typedef struct hearth_qk {
    const float *bq, *bk, *bv;   /* (n_head*hd), (n_head_kv*hd) x2: qwen2's biases, or NULL */
    const float *q_norm, *k_norm; /* (hd): qwen3's QK-norm weights, or NULL */
    int64_t n_head, n_head_kv, hd, n_rot;
    int rope_type;               /* 0: pairs (2i, 2i+1) (llama); 2: pairs (i, i + n_rot/2) (NEOX: qwen) */
    float eps;
} hearth_qk;

/* What a recorded pass captured (graph_begin): the launches of a pass depend
 * on the model (its weights), the cache and the row counts, and on nothing
 * else the walk passes, since per-step data sits at fixed addresses. Model
 * and cache are named by ids unique in the process (hearth_dev_uid), never
 * by address: a model freed and another opened at the same address would
 * replay launches over freed weights. */
typedef struct hearth_graph_key {
    uint64_t model, cache;
    int64_t rows, out_rows;
    int64_t steps;             /* 0: one pass; > 1: a run of that many passes and their draws (caps.graph_runs) */
} hearth_graph_key;

/* What matmul_fused folds into a matmul (decode's neighbours of the
 * weight reads, so a decode step launches fewer kernels):
 *   pre: how each row of the matmul's input is made from X as it is read
 *        NONE     X[r]
 *        RMSNORM  rmsnorm(X[r]) * norm_w (eps): llama's attn-in and FFN-in norms
 *   post: what becomes of the products
 *        STORE    Y_i = X W_i^T
 *        ADD      Y_i += X W_i^T (the residual add)
 *        SWIGLU   two weights of one shape (the FFN's gate and up):
 *                 Y_0 = silu(X W_0^T) * (X W_1^T); Y_1 is not written
 *        QK_ROPE_STORE  three weights Q, K, V: Y_i = X W_i^T, then
 *                 qk_rope_store(Y_0, Y_1, Y_2, qk, kv, layer, b) on them */
enum hearth_mm_pre { HEARTH_MM_PRE_NONE = 0, HEARTH_MM_PRE_RMSNORM };
enum hearth_mm_post { HEARTH_MM_STORE = 0, HEARTH_MM_ADD, HEARTH_MM_SWIGLU, HEARTH_MM_QK_ROPE_STORE };
typedef struct hearth_mm_fuse {
    enum hearth_mm_pre pre;
    const float *norm_w;          /* RMSNORM: (K) */
    float eps;                    /* RMSNORM */
    enum hearth_mm_post post;
    /* QK_ROPE_STORE: qk_rope_store's arguments */
    const hearth_qk *qk;
    const hearth_dev_kv *kv;
    int64_t layer;
    const hearth_batch *b;
} hearth_mm_fuse;

/* A process-unique nonzero id (thread-safe), for hearth_graph_key. */
uint64_t hearth_dev_uid(void);

/* The table. Every compute op is enqueued on st: arguments are device
 * pointers, rows run in any order, and the op returns 0 or a negative status
 * (HEARTH_EINVAL for shapes it cannot take, HEARTH_EUNSUPPORTED for a type or
 * size the device lacks, HEARTH_ENOMEM). On the CPU an op has finished when
 * it returns. Outputs must not overlap inputs unless the op says so. */
struct hearth_dev_ops {
    /* Memory. alloc: bytes of device memory, 64-byte aligned, or NULL (err
     * set). free(NULL) is a no-op. upload/download/copy: bytes between host
     * and device or within the device, ordered on st; sync waits for all of
     * st's work. */
    void *(*alloc)(hearth_dev *dev, size_t bytes, hearth_err *err);
    void (*free)(hearth_dev *dev, void *p);
    int (*upload)(hearth_stream *st, void *dst, const void *src, size_t bytes);
    int (*download)(hearth_stream *st, void *dst, const void *src, size_t bytes);
    int (*copy)(hearth_stream *st, void *dst, const void *src, size_t bytes);
    int (*sync)(hearth_stream *st);
    /* The stream's arena: sets st->scratch to at least bytes of device memory
     * (64-byte aligned) and st->staging to at least staging_bytes of host
     * memory; both keep their addresses across calls while the sizes do not
     * grow. Contents are undefined. 0 or HEARTH_ENOMEM. */
    int (*scratch)(hearth_stream *st, size_t bytes, size_t staging_bytes);
    /* Optional: bytes of host memory the device copies from and to at full
     * speed (a GPU's pinned; the CPU's own memory, which it reads in place),
     * for buffers filled before a stream takes them (a frame's inputs, kept
     * across frames); NULL with err set. host_free(NULL) is a no-op. */
    void *(*host_alloc)(hearth_dev *dev, size_t bytes, hearth_err *err);
    void (*host_free)(hearth_dev *dev, void *p);
    void (*stream_deinit)(hearth_stream *st);
    /* Optional (NULL where launches cost nothing, as on the CPU): a pass's
     * work recorded once and replayed. graph_begin returns 1 when a pass
     * recorded under key was enqueued in one call (the walk skips its ops),
     * 0 when the walk must enqueue the ops (they may be being recorded), or
     * a negative status. After enqueuing, the walk calls graph_end with the
     * same key and its own status (0, or the first op's error): graph_end
     * returns HEARTH_EAGAIN when the work was recorded but did not run (the
     * recording failed, or an op failed while recording: the walk enqueues
     * the ops again, and the key is not recorded again), else the walk's
     * status, or the launch's. Between the two calls the walk enqueues
     * device work only: no download, no sync. The backend drops its records
     * when the stream's arena moves. */
    int (*graph_begin)(hearth_stream *st, const hearth_graph_key *key);
    int (*graph_end)(hearth_stream *st, const hearth_graph_key *key, int status);

    /* Weights. weight_new places d on the device (NULL with err set naming
     * d->name on failure); weight_free(NULL) is a no-op. weight_reads_host:
     * whether the weight still reads d->data (false: the caller may release
     * the mapping). weight_chain: a hint that next is multiplied right after
     * w (the CPU fetches its start ahead); never changes a result. */
    hearth_weight *(*weight_new)(hearth_dev *dev, const hearth_weight_desc *d, hearth_err *err);
    void (*weight_free)(hearth_weight *w);
    bool (*weight_reads_host)(const hearth_weight *w);
    void (*weight_chain)(hearth_weight *w, const hearth_weight *next);
    /* Optional (NULL: see base/membench.h for the host's): the device
     * memory's copy bandwidth in GB/s, bytes read plus bytes written, over
     * bytes per copy (the best of a few); what a memory-bound kernel is
     * measured against. 0 with err set when it cannot be measured. */
    double (*copy_gbps)(hearth_dev *dev, size_t bytes, hearth_err *err);
    /* Optional (NULL: the host's memory, not asked): free and total bytes
     * of device memory now; 0 or a negative status. A model that cannot
     * fit is refused at load with these figures. */
    int (*mem_info)(hearth_dev *dev, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Optional (NULL: never): whether the device's context is gone for this
     * process (a CUDA sticky error: an illegal address, a kernel fault);
     * nothing more will run on it, and a server worker should exit to be
     * respawned with a fresh one. */
    bool (*lost)(const hearth_dev *dev);
    /* Whether the device runs op on dtype (see enum hearth_op). */
    bool (*supports)(const hearth_dev *dev, hearth_op op, hearth_dtype dtype);

    /* Y_i = X W_i^T for n weights (1 .. caps.matmul_group_max) of one X:
     * X (M, K) f32, row stride x_stride; W_i (N_i, K); Y_i (M, N_i), row
     * stride y_stride[i]. Bit for bit the results of n calls of one weight. */
    int (*matmul)(hearth_stream *st, const hearth_weight *const *w, int n, const float *X, int64_t x_stride,
                  int64_t M, float *const *Y, const int64_t *y_stride);
    /* Optional (NULL: the walk runs the ops apart): matmul with its
     * neighbours folded in (hearth_mm_fuse), for the row counts of decode.
     * Same arguments and shapes as matmul; the input rows are f(X) as f
     * says, and each Y_i is written, accumulated or (SWIGLU) Y_0 gets the
     * gated product. Results agree with the separate ops within rounding
     * (the norm's sum is taken in another order), not bit for bit.
     * HEARTH_EUNSUPPORTED where the device does not fuse this case (M,
     * types, the pre and post asked): the walk then runs the part it lacks
     * apart, the same way every time for the same shapes (a recorded graph
     * stays valid). The CUDA backend fuses ADD and SWIGLU into its M = 1
     * mat-vec and its batched kernels, RMSNORM into the M = 1 mat-vec, and
     * QK_ROPE_STORE into the M = 1 mat-vec where the QK step is llama's
     * (RoPE of pairs, no biases, no QK-norm; engine/cuda/mm.cu). */
    int (*matmul_fused)(hearth_stream *st, const hearth_weight *const *w, int n, const float *X, int64_t x_stride,
                        int64_t M, float *const *Y, const int64_t *y_stride, const hearth_mm_fuse *f);
    /* Y[r] = table[b->token[r]] for r < b->n, as f32 (n_in wide). With pos_tab
     * (bert): Y[r] += pos_tab[b->pos[r]] + type_row, then Y[r] = LN(Y[r]) *
     * ln_w + ln_b (eps). pos_tab (n_pos, n_in), type_row, ln_w, ln_b (n_in). */
    int (*embed)(hearth_stream *st, float *Y, const hearth_weight *table, const hearth_batch *b,
                 const float *pos_tab, const float *type_row, const float *ln_w, const float *ln_b, float eps);
    /* Y[i] = rmsnorm(X[rows ? rows[i] : i]) * w over n wide rows, i < n_rows;
     * X and Y (.., n). Y may equal X when rows is NULL. */
    int (*rmsnorm)(hearth_stream *st, float *Y, const float *X, const int32_t *rows, int64_t n_rows, int64_t n,
                   const float *w, float eps);
    /* X += A, (rows, n) each (llama's residual). */
    int (*add)(hearth_stream *st, float *X, const float *A, int64_t rows, int64_t n);
    /* X += H; H = rmsnorm(X) * w, (rows, n) each (llama's FFN input). */
    int (*add_rmsnorm)(hearth_stream *st, float *X, float *H, int64_t rows, int64_t n, const float *w, float eps);
    /* G = silu(G) * U, (rows, n) each. */
    int (*swiglu)(hearth_stream *st, float *G, const float *U, int64_t rows, int64_t n);
    /* Optional (NULL: the caller draws from downloaded logits): ids[r] =
     * the greedy draw over row r of X (rows, n wide; sampler.h's
     * hearth_logits_argmax: NaN as -inf, +inf as the largest float, the
     * lowest index of equals), made where the logits are, so a greedy
     * step downloads 4 bytes a row instead of 4 n. ids: device memory. */
    int (*argmax_rows)(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n);
    /* Optional, beside argmax_rows (NULL or not supported: the caller
     * copies): argmax_rows' draws into ids, then the next pass's step block
     * made where it lies: next[w] = src[w] for the words rows <= w < words,
     * next[r] = ids[r] for r < rows (a block's tokens come first:
     * hearth_batch_layout). A run of greedy passes (llama_forward.c) then
     * uploads its blocks once and copies nothing between passes. next, src:
     * device memory, apart. */
    int (*argmax_feed)(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n, int32_t *next,
                       const int32_t *src, int64_t words);
    /* For each row r < b->n of Q (n, n_head*hd), K, V (n, n_head_kv*hd), in
     * place: + biases, QK-norm per head, RoPE at b->rope_cs[r] over the first
     * n_rot dims of each head; then K[r], V[r] stored in kv at (b->slot[r],
     * layer, b->pos[r]). */
    int (*qk_rope_store)(hearth_stream *st, float *Q, float *K, float *V, const hearth_qk *qk,
                         const hearth_dev_kv *kv, int64_t layer, const hearth_batch *b);
    /* out[r, head] = softmax(Q[r, head] K^T * scale) V over positions
     * 0 .. b->pos[r] of slot b->slot[r], layer; query head h reads kv head
     * h / (n_head / n_head_kv). Q, out (n, n_head*hd). */
    int (*attn_cached)(hearth_stream *st, float *out, const float *Q, const hearth_dev_kv *kv, int64_t layer,
                       const hearth_batch *b, int64_t n_head, int64_t n_head_kv, int64_t hd, float scale);
    /* X = LN(X + Y + bias) * g + beta, (rows, n); Y is scratch (the bias is
     * added into it). bert's residual + LayerNorm. */
    int (*add_layernorm)(hearth_stream *st, float *X, float *Y, const float *bias, int64_t rows, int64_t n,
                         const float *g, const float *beta, float eps);
    /* Y = gelu_erf(Y + bias), (rows, n). */
    int (*bias_gelu)(hearth_stream *st, float *Y, const float *bias, int64_t rows, int64_t n);
    /* Packed attention: QKV (b->n, 3h) rows [q | k | v] with h = n_head*hd;
     * the biases bq, bk, bv (h) are added in place, then ctx[r] (b->n, h) =
     * softmax(q K^T * scale) V over the rows of r's own sequence
     * (b->seq_start), no mask. */
    int (*attn_packed)(hearth_stream *st, float *ctx, float *QKV, const float *bq, const float *bk,
                       const float *bv, const hearth_batch *b, int64_t n_head, int64_t hd, float scale);
    /* Per sequence s of b: all_rows && all_rows[s]: its rows of X (len, n)
     * copied out whole; else one (n) vector, pooled by kind (HEARTH_DEV_POOL_*)
     * and L2-normalized (eps 1e-12) when l2. Outputs follow one another in
     * out. all_rows is host data of the call (it decides sizes). */
    int (*pool)(hearth_stream *st, float *out, const float *X, int64_t n, const hearth_batch *b, int kind, bool l2,
                const bool *all_rows);

    /* The conv-net ops of frame models (dev_vision.h), or NULL where the
     * device has none. */
    const hearth_dev_vision_ops *vision;
};

/* The registry: the devices this process found, the CPU first (always
 * present). Thread-safe; devices live until the process ends. */
int hearth_dev_count(void);
hearth_dev *hearth_dev_get(int i);
/* The device models open on when none is named: the CPU (never probes
 * GPUs). */
hearth_dev *hearth_dev_default(void);
/* A device by name: "cpu", "cuda" (cuda:0) or "cuda:N"; NULL with err set
 * naming why (a build without CUDA, no such GPU, a GPU the probe found
 * unusable). Probes GPUs on first use. */
hearth_dev *hearth_dev_find(const char *name, hearth_err *err);

/* Binds st to dev and pool (borrowed; both outlive st). Cheap: no memory is
 * taken until the first hearth_stream_scratch. 0, or a status with err set. */
int hearth_stream_init(hearth_stream *st, hearth_dev *dev, hearth_pool *pool, hearth_err *err);
/* Releases what st holds; st may be init'ed again. Safe on a zeroed st. */
void hearth_stream_deinit(hearth_stream *st);
/* The device's table, for the walk's calls. */
static inline const hearth_dev_ops *hearth_stream_ops(const hearth_stream *st)
{
    return st->dev->ops;
}

#endif

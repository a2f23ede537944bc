/* dev_cpu.h: the CPU device behind engine/dev.h, private to src/engine.
 *
 * dev_cpu.c holds the device (memory, the stream's arena, weights,
 * capabilities) and MATMUL; dev_cpu_rows.c the row ops (norms, adds, SwiGLU,
 * GELU, the QK step, embedding, pooling); dev_cpu_attn.c the two attentions.
 * This header is what the three share: the weight's layout, the device's
 * chosen kernels, the row-splitting policy and the op entry points. */
#ifndef HEARTH_ENGINE_CPU_DEV_CPU_H
#define HEARTH_ENGINE_CPU_DEV_CPU_H

#include "engine/dev.h"
#include "engine/cpu/attn.h"
#include "engine/cpu/matmul.h"

/* The CPU device (built once, on the first call; never freed). */
hearth_dev *hearth_dev_cpu(void);

/* A weight on the CPU: the stored rows, and GEMM panels when placed so. */
struct hearth_weight {
    hearth_dtype type;
    const void *data;           /* (n_out, n_in) rows of row_bytes; unusable once released when !reads_host */
    size_t row_bytes;
    int64_t n_out, n_in;
    hearth_cpu_prepacked *packed; /* owned, or NULL */
};

/* Whether w's stored rows can still be read (an EMBED table). */
static inline bool cpu_weight_rows_ok(const hearth_weight *w)
{
    return !w->packed || hearth_cpu_prepacked_needs_weights(w->packed);
}

/* The kernels chosen once for this CPU (hearth_hw(), so HEARTH_CPU_DISABLE
 * applies). */
typedef struct cpu_kernels {
    hearth_attn_fn attn_f32, attn_f16;
    hearth_attn_store_fn put_f16;
} cpu_kernels;
const cpu_kernels *cpu_dev_kernels(void);

/* The row-splitting policy the walks used before the seam: rows below
 * par_min, or a pool of one thread, run on the caller; otherwise about four
 * tasks per thread (uneven finishing evens out), each a run of rows.
 * fn(job, r0, r1) does rows [r0, r1). */
#define CPU_ROWS_PARALLEL_MIN 16
typedef void (*cpu_rows_fn)(void *job, int64_t r0, int64_t r1);
void cpu_rows(hearth_stream *st, int64_t rows, int64_t par_min, cpu_rows_fn fn, void *job);

/* The row ops (dev_cpu_rows.c) and the attentions (dev_cpu_attn.c), as
 * dev.h's table describes them. */
int cpu_embed(hearth_stream *st, float *Y, const hearth_weight *table, const hearth_batch *b, const float *pos_tab,
              const float *type_row, const float *ln_w, const float *ln_b, float eps);
int cpu_rmsnorm(hearth_stream *st, float *Y, const float *X, const int32_t *rows, int64_t n_rows, int64_t n,
                const float *w, float eps);
int cpu_add(hearth_stream *st, float *X, const float *A, int64_t rows, int64_t n);
int cpu_add_rmsnorm(hearth_stream *st, float *X, float *H, int64_t rows, int64_t n, const float *w, float eps);
int cpu_swiglu(hearth_stream *st, float *G, const float *U, int64_t rows, int64_t n);
int cpu_argmax_rows(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n);
int cpu_argmax_feed(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n, int32_t *next,
                    const int32_t *src, int64_t words);
int cpu_qk_rope_store(hearth_stream *st, float *Q, float *K, float *V, const hearth_qk *qk, const hearth_dev_kv *kv,
                      int64_t layer, const hearth_batch *b);
int cpu_add_layernorm(hearth_stream *st, float *X, float *Y, const float *bias, int64_t rows, int64_t n,
                      const float *g, const float *beta, float eps);
int cpu_bias_gelu(hearth_stream *st, float *Y, const float *bias, int64_t rows, int64_t n);
int cpu_pool(hearth_stream *st, float *out, const float *X, int64_t n, const hearth_batch *b, int kind, bool l2,
             const bool *all_rows);
int cpu_attn_cached(hearth_stream *st, float *out, const float *Q, const hearth_dev_kv *kv, int64_t layer,
                    const hearth_batch *b, int64_t n_head, int64_t n_head_kv, int64_t hd, float scale);
int cpu_attn_packed(hearth_stream *st, float *ctx, float *QKV, const float *bq, const float *bk, const float *bv,
                    const hearth_batch *b, int64_t n_head, int64_t hd, float scale);

/* Bytes of a KV element of type (4 or 2; 0 for another type). */
static inline size_t cpu_kv_elt(hearth_dtype t)
{
    return t == HEARTH_F32 ? 4 : t == HEARTH_F16 ? 2 : 0;
}
/* K (or V) rows (n_ctx, kv_dim) of one slot and layer in base. */
static inline char *cpu_kv_block(const hearth_dev_kv *kv, void *base, int slot, int64_t layer)
{
    return (char *)base + ((size_t)slot * (size_t)kv->n_layer + (size_t)layer) * (size_t)kv->n_ctx *
                              (size_t)kv->kv_dim * cpu_kv_elt(kv->type);
}

#endif

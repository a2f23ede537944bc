/* cuda_int.h: the CUDA backend's private interfaces, between its three parts:
 *
 *   dev_cuda.cu  the device table (engine/dev.h): registry entry, memory,
 *                streams and their arenas, graph record/replay, argument
 *                checks, launch policy (cu_pdl_on); it calls the two
 *                kernel families below
 *   mm.cu        weights: placement in the layout the kernels read, mat-vec
 *                for decode (every GGUF type read in place, no fp16 copy of a
 *                quantized weight kept), GEMM for prompts (tensor cores:
 *                cuBLAS, loaded at run time, over tiles dequantized on the
 *                fly into the context's workspace), and embedding rows
 *   ops.cu       the row ops and attention: rmsnorm, add, add_rmsnorm,
 *                swiglu, qk_rope_store, attn_cached (split over the KV
 *                length, flash-decoding), and bert's add_layernorm,
 *                bias_gelu, attn_packed, pool, embed's position + LayerNorm
 *
 * Every function enqueues on its stream and returns 0 or a negative status
 * (base/err.h); a CUDA error is reported through cu_fail, which logs the
 * kernel or call and CUDA's error string and returns HEARTH_EDEVICE. Nothing
 * here synchronizes unless it says so, and nothing allocates device memory
 * while a stream is recording a graph (cu_ctx.recording). Compiled by nvcc
 * only (make CUDA=1). */
#ifndef HEARTH_ENGINE_CUDA_CUDA_INT_H
#define HEARTH_ENGINE_CUDA_CUDA_INT_H

extern "C" {
#include "base/err.h"
#include "engine/dev.h"
#include "engine/dtype.h"
}

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

/* Logs "cuda: WHAT failed: <error string> (<error name>)" at error level and
 * returns HEARTH_EDEVICE; what names the kernel or call. e == cudaSuccess
 * returns 0 and logs nothing. */
int cu_fail(const char *what, cudaError_t e);
/* Waits until the copies made on the legacy default stream (cudaMemcpy,
 * cudaMemset: weight uploads) have landed: a copy from pageable host memory
 * returns once the runtime has staged the bytes, before its DMA completes,
 * and kernels on the backend's non-blocking streams are not ordered after
 * that stream. what names the upload in the log. */
int cu_uploads_landed(const char *what);
/* After a launch: cu_fail(kernel, cudaGetLastError()). */
static inline int cu_launched(const char *kernel)
{
    return cu_fail(kernel, cudaGetLastError());
}

/* Programmatic dependent launch (Hopper): a kernel launched with
 * cu_pdl_on()'s attribute may start while the kernel before it on the
 * stream still runs; it calls cu_pdl_wait() before touching anything that
 * kernel writes or reads (only constant data, the weights, is read before),
 * which waits for that kernel's end and its memory. A kernel calls
 * cu_pdl_trigger() to let such a successor start early (at its own start:
 * the successor's wait still covers all of this kernel's writes). Both are
 * no-ops before sm_90 and when a kernel was launched without the attribute,
 * so they may sit in any kernel. Since every PDL-launched kernel waits before
 * its first dependent access, ordering stays transitive along the stream. */
__device__ __forceinline__ void cu_pdl_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void cu_pdl_trigger(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
/* Whether environment variable name is set to value, read once into
 * *seen (-1 until read; a plain read: two threads racing read the same
 * answer): the backend's switches, HEARTH_CUDA_*, each with its own seen. */
bool cu_env_is(int *seen, const char *name, const char *value);

/* Whether launches may use the attribute: HEARTH_CUDA_PDL=0 turns it off
 * (read once). */
bool cu_pdl_on(void);
/* Whether the row ops (rmsnorm, add, add_rmsnorm, swiglu), qk_rope_store
 * and attention of a step of `rows` rows launch as dependents too
 * (cu_launch): up to 8 rows. On the H200 (1.04B llama) that took tg128
 * from 918-939 to 939-954 tok/s (F16) and 910-935 to 934-948 (Q4_K), where
 * at 16 and 64 rows it cost 5-6% (3,898 against 4,108 tok/s at 16, before
 * the tensor-core kernel launched as a dependent). On the H100 with the
 * batched epilogues (2026-12-06, tok/s summed, two runs): 4 rows Q4_K
 * 3,538 / 3,535 against 3,432 / 3,415, Q8_0 2,818 / 2,826 against 2,760 /
 * 2,789, F16 2,524 against 2,456; 16 rows mixed (Q4_K +1%, F16 +2%, Q8_0
 * -1 to -2%). HEARTH_CUDA_PDL_ROWS=0 never, =1 one row, =all every row
 * count; HEARTH_CUDA_PDL=0 never. */
bool cu_pdl_rows(int64_t rows);

/* k<<<g, b, smem, s>>>(args...), as a programmatic dependent when pdl (the
 * kernel calls cu_pdl_wait() before its first dependent access). A failed
 * launch's error is cleared (it is not sticky) and returned. */
template <typename... KArgs, typename... Args>
static inline cudaError_t cu_launch(bool pdl, void (*k)(KArgs...), dim3 g, dim3 b, size_t smem, cudaStream_t s,
                                    Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = g;
    cfg.blockDim = b;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaError_t e = cudaLaunchKernelEx(&cfg, k, static_cast<KArgs>(args)...);
    if (e != cudaSuccess)
        (void)cudaGetLastError();
    return e;
}

/* A weight as placed by mm.cu (the backend's hearth_weight: dev_cuda.cu
 * casts). The layout of data is mm.cu's choice (it may differ from the
 * file's: blocks split into scales and quants, rows padded); the fields
 * below are what the others read. */
typedef struct cu_weight {
    hearth_dtype type;
    int64_t n_out, n_in;
    int ordinal;              /* the CUDA device it lives on */
    void *data;               /* device memory, owned */
    void *aux;                /* a second owned device buffer if the layout needs one, else NULL */
    size_t bytes;             /* device bytes held (data + aux) */
} cu_weight;

/* One execution context: a host thread's stream on one device (dev_cuda.cu
 * keeps one per thread and device, reused by every hearth_stream that thread
 * opens, so its arena and recorded graphs keep their addresses). */
typedef struct cu_ctx {
    int ordinal;
    cudaStream_t s;
    bool recording;           /* a graph is being captured on s: no allocation, no sync */
    void *mm;                 /* mm.cu's per-context state (cuBLAS handle, workspace), or NULL */
    void *vis;                /* vision.cu's (a frame's lanes: while one is selected, s is its stream), or NULL */
} cu_ctx;

/* ---- mm.cu ---- */

/* Whether mm.cu places and multiplies weights of type t (F32, F16, BF16,
 * Q8_0, Q4_0, Q4_K, Q6_K). */
bool cu_mm_type_ok(hearth_dtype t);
/* Places d (rows as the file stores them, d->row_bytes each, host memory)
 * on device ordinal into w, in mm.cu's layout; synchronous (d->data may be
 * released when it returns). 0, HEARTH_ENOMEM (err names d->name and the
 * bytes), HEARTH_EUNSUPPORTED, HEARTH_EDEVICE. */
int cu_weight_place(cu_weight *w, const hearth_weight_desc *d, int ordinal, hearth_err *err);
/* Frees what w holds (w itself is the caller's). */
void cu_weight_release(cu_weight *w);
/* st's context for this thread (dev_cuda.cu), made on first use; NULL when
 * the device cannot be used (logged). */
cu_ctx *cu_stream_ctx(hearth_stream *st);

/* Y_i = X W_i^T for i < n: X (M, K) f32 in device memory, row stride ldx;
 * W_i (N_i, K); Y_i (M, N_i) f32, row stride ldy[i]. Any M >= 1: small M
 * (decode) reads each weight once for all M rows; large M (prompts) runs on
 * tensor cores. Results within float rounding of the f32 product of X and
 * the dequantized weight (a half/bfloat16 rounding of X on the tensor-core
 * path is allowed; the M = 1 mat-vec of Q8_0, Q4_0 and Q4_K rounds X to
 * q8a blocks as the CPU's matmul does). */
int cu_matmul(cu_ctx *c, const cu_weight *const *w, int n, const float *X, int64_t ldx, int64_t M, float *const *Y,
              const int64_t *ldy);
/* cu_matmul with decode's neighbours folded in (engine/dev.h's
 * hearth_mm_fuse): M <= cu_fused_rows_max() (the norm at M = 1 alone),
 * weights of one type other than F32; else HEARTH_EUNSUPPORTED with
 * nothing enqueued. */
/* HEARTH_CUDA_FUSE (read once): 0 nothing fused (caps.fused_rows_max 0);
 * unset: the epilogues (ADD, SWIGLU), and RMSNORM at M = 1 in mvp_kernel's
 * staging of X (HEARTH_CUDA_FUSE_NORM=0 keeps it apart), mode 1; "norm":
 * also mvg_kernel's old norm prologue where mvp_kernel does not take the
 * weight (measured slower: mm.cu), mode 2. */
int cu_fuse_mode(void);
/* The most rows of X cu_matmul_fused takes (caps.fused_rows_max): 0 with
 * HEARTH_CUDA_FUSE=0; 1 (the mat-vec's epilogues) with
 * HEARTH_CUDA_FUSE_ROWS=0; else the tensor-core kernel's rows (mm.cu's
 * HEARTH_CUDA_MM_MMA_MAX), whose stores take the same epilogues. */
int cu_fused_rows_max(void);
int cu_matmul_fused(cu_ctx *c, const cu_weight *const *w, int n, const float *X, int64_t ldx, int64_t M,
                    float *const *Y, const int64_t *ldy, const hearth_mm_fuse *f);
/* Y[r] = table[tok[r]] dequantized to f32 (n_in wide), r < n; tok is device
 * memory (the step block's token ids, already checked in range). */
int cu_embed_rows(cu_ctx *c, float *Y, const cu_weight *table, const int32_t *tok, int64_t n);
/* Releases c->mm (at the context's end). */
void cu_mm_ctx_free(cu_ctx *c);

/* ---- ops.cu ---- (shapes as engine/dev.h's ops of the same name; every
 * pointer is device memory; b is the device copy of the step block, whose
 * scalar fields (n, n_out, n_seqs, rope_stride) are read on the host and
 * whose arrays are read by the kernels) */

int cu_rmsnorm(cu_ctx *c, float *Y, const float *X, const int32_t *rows, int64_t n_rows, int64_t n, const float *w,
               float eps);
int cu_add(cu_ctx *c, float *X, const float *A, int64_t rows, int64_t n);
int cu_add_rmsnorm(cu_ctx *c, float *X, float *H, int64_t rows, int64_t n, const float *w, float eps);
int cu_swiglu(cu_ctx *c, float *G, const float *U, int64_t rows, int64_t n);
/* next: NULL, or dev.h's argmax_feed's block (words int32s from src). */
int cu_argmax_rows(cu_ctx *c, int32_t *ids, const float *X, int64_t rows, int64_t n, int32_t *next,
                   const int32_t *src, int64_t words);
/* K/V stored as kv->type (F32 or F16, round to nearest even). */
int cu_qk_rope_store(cu_ctx *c, float *Q, float *K, float *V, const hearth_qk *qk, const hearth_dev_kv *kv,
                     int64_t layer, const hearth_batch *b);
/* Launch sizes may not depend on positions (they are device data): a grid
 * sized for kv->n_ctx whose blocks past a row's position return at once,
 * so one recorded pass serves every position. */
int cu_attn_cached(cu_ctx *c, float *out, const float *Q, const hearth_dev_kv *kv, int64_t layer,
                   const hearth_batch *b, int64_t n_head, int64_t n_head_kv, int64_t hd, float scale);
int cu_add_layernorm(cu_ctx *c, float *X, float *Y, const float *bias, int64_t rows, int64_t n, const float *g,
                     const float *beta, float eps);
int cu_bias_gelu(cu_ctx *c, float *Y, const float *bias, int64_t rows, int64_t n);
/* The sequence bounds (b->seq_start) are device data too: launches are
 * sized from b->n and b->n_seqs (a sequence is at most b->n rows long), and
 * blocks past their sequence's end return. all_rows is host data (pool's
 * output sizes); where an output lands follows from device data, so the
 * kernel computes it from seq_start. */
int cu_attn_packed(cu_ctx *c, float *ctx, float *QKV, const float *bq, const float *bk, const float *bv,
                   const hearth_batch *b, int64_t n_head, int64_t hd, float scale);
int cu_pool(cu_ctx *c, float *out, const float *X, int64_t n, const hearth_batch *b, int kind, bool l2,
            const bool *all_rows);
/* bert's embedding tail, after cu_embed_rows: Y[r] += pos_tab[b->pos[r]] +
 * type_row, then Y[r] = LN(Y[r]) * ln_w + ln_b, r < b->n, n wide. */
int cu_embed_finish(cu_ctx *c, float *Y, const hearth_batch *b, int64_t n, const float *pos_tab,
                    const float *type_row, const float *ln_w, const float *ln_b, float eps);

/* ---- vision*.cu ---- the conv-net ops (engine/dev_vision.h), the table
 * hearth_cuda_ops.vision points at; their internals are vision_int.h's. */
extern const hearth_dev_vision_ops cu_vision_ops;
/* Frees c->vis (the lanes' streams and marks), s back to the context's own
 * stream; dev_cuda.cu calls it before destroying that stream. */
void cu_vis_ctx_free(cu_ctx *c);

/* The largest head ops.cu's attention takes (caps.head_dim_max). */
#define CU_HEAD_DIM_MAX 256

#endif

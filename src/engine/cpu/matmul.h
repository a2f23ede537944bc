/* matmul.h: Y = X W^T for weights of any supported type, on the CPU.
 *
 *   Y[m][n] = sum_k X[m][k] * W[n][k]
 *   X: (M, K) f32, row stride x_stride elements
 *   W: (N, K) of type wt, row-major as GGUF stores it, row stride w_row_bytes
 *   Y: (M, N) f32, row stride y_stride elements
 *
 * W is read in place (quantized blocks are never expanded into a full f32
 * copy). The kernels are chosen once, at the first call, from hearth_hw():
 * AVX-512 (F, BW, VL, DQ, VNNI), else AVX2 + FMA + F16C, else portable C.
 * HEARTH_CPU_DISABLE masks features, so the fallbacks can be forced.
 *
 * Paths: for small M (decode) each weight row is read once and dotted with
 * every X row; the quantized types first quantize X to q8a blocks
 * (quant.h) so the inner loops are integer dot products, which costs about
 * 1/250 relative error per element of X. For larger M (prefill) the
 * quantized types run an integer GEMM on the same quantized X where the CPU
 * has AVX-512 VNNI; otherwise, and for f32/f16/bf16, the weights are
 * converted tile by tile into a small packed f32 buffer that feeds an f32
 * register-blocked kernel (no X quantization). Work is split over N across
 * the pool; pool may be NULL (runs on the caller).
 *
 * Group calls: a layer multiplies one X by several weights (Q, K and V; the
 * FFN's gate and up). hearth_cpu_matmul_group takes them together so that,
 * on the multi-row decode path, X is prepared once and one pool job covers
 * every weight's rows instead of one job per weight. Measured on the 2-core
 * Zen 5 (shared, best of 300), Q8_0 Q, K, V of 768 x 768, three calls vs one
 * group call, us: 2 threads M=1 29.5 vs 23.9, M=4 45.7 vs 38.5, M=8 71.8 vs
 * 60.0; no pool M=4 71.4 vs 69.6. So the gain is mostly the pool job's start,
 * join and idle tail paid once instead of three times, little the X
 * quantization. Where the outputs would take different paths, or read
 * different forms of X, it is n plain calls.
 *
 * All functions return 0, HEARTH_EINVAL (unsupported type, K not a multiple
 * of the type's block, strides too small, negative sizes), HEARTH_ENOMEM, or
 * for hearth_cpu_matmul_on and hearth_cpu_matmul_group_on,
 * HEARTH_EUNSUPPORTED when the CPU lacks the ISA.
 * Thread-safe as long as the pool runs one job at a time (see pool.h); the
 * output must not overlap the inputs.
 *
 * Memory: the buffers a call needs (quantized X, packed weight panels) are
 * per-thread scratch kept between calls, so steady-state calls allocate
 * nothing. A thread's scratch is freed when it exits (the pool's workers at
 * hearth_pool_free), or by hearth_cpu_matmul_release_scratch. */
#ifndef HEARTH_ENGINE_CPU_MATMUL_H
#define HEARTH_ENGINE_CPU_MATMUL_H

#include "base/pool.h"
#include "engine/dtype.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum hearth_cpu_isa {
    HEARTH_ISA_SCALAR = 0,
    HEARTH_ISA_AVX2 = 1,
    HEARTH_ISA_AVX512 = 2,
    HEARTH_ISA_COUNT_ = 3,
} hearth_cpu_isa;

int hearth_cpu_matmul(hearth_pool *pool, hearth_dtype wt, const void *W, size_t w_row_bytes, int64_t N,
                      int64_t K, const float *X, int64_t x_stride, int64_t M, float *Y, int64_t y_stride);

/* The same, on the kernels of one ISA (for tests and benchmarks). */
int hearth_cpu_matmul_on(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype wt, const void *W, size_t w_row_bytes,
                         int64_t N, int64_t K, const float *X, int64_t x_stride, int64_t M, float *Y,
                         int64_t y_stride);

/* One weight of a group call: Y = X W^T as hearth_cpu_matmul says, with X
 * and M shared by the group. */
typedef struct hearth_cpu_mm_out {
    hearth_dtype wt;
    const void *W;
    size_t w_row_bytes;
    int64_t N;
    float *Y;
    int64_t y_stride;
} hearth_cpu_mm_out;

/* n outputs (1..HEARTH_MM_GROUP_MAX) of the same X (M rows of K): the same
 * results as n hearth_cpu_matmul calls, checked the same way (the first bad
 * output's status is returned and nothing is computed). The outputs must
 * not overlap one another or X; an output with N = 0 is skipped. */
#define HEARTH_MM_GROUP_MAX 4
int hearth_cpu_matmul_group(hearth_pool *pool, const hearth_cpu_mm_out *outs, int n, int64_t K, const float *X,
                            int64_t x_stride, int64_t M);
/* The same on one ISA's kernels (tests). */
int hearth_cpu_matmul_group_on(hearth_cpu_isa isa, hearth_pool *pool, const hearth_cpu_mm_out *outs, int n,
                               int64_t K, const float *X, int64_t x_stride, int64_t M);

/* Weights packed once into the GEMM's panels, for a model that multiplies
 * the same weights again and again: each call then skips the conversion
 * and transpose that hearth_cpu_matmul pays per weight element per call.
 * Two kinds, by what the best ISA's kernels take:
 *   - F16 weights, where the ISA has an f16 tile (AVX2, AVX-512): f16
 *     panels, the weights' own values re-laid out, 2 bytes per weight. Every
 *     call runs on them, any M, and W is not read again: the caller may
 *     release it (hearth_cpu_prepacked_needs_weights). F16 prefill GEMMs
 *     gain the ~20% the packing cost (matmul.c).
 *   - other types: f32 panels, 4 bytes per weight on top of W, which stays
 *     in use (batches under gemm_min_m rows take the row dots on W; every
 *     larger M runs on the panels). MiniLM on the Zen 5: +43% sentences/s
 *     at batch 1, +9-13% served at 1 and 8 sentences per request (matmul.c's
 *     PANEL_COPY_MIN_M).
 * NULL when the ISA's large-M path does not use panels (the quantized
 * types' integer GEMM), on bad arguments, or when memory is short. */
typedef struct hearth_cpu_prepacked hearth_cpu_prepacked;
hearth_cpu_prepacked *hearth_cpu_prepack(hearth_dtype wt, const void *W, size_t w_row_bytes, int64_t N, int64_t K);
void hearth_cpu_prepacked_free(hearth_cpu_prepacked *pw);
/* Whether this CPU's kernels would take weights of type wt prepacked (so a
 * NULL from hearth_cpu_prepack with good arguments means no memory). */
bool hearth_cpu_prepack_wanted(hearth_dtype wt);
/* Whether prepacking wt gives panels of wt's own size that every call runs
 * on, so the weights need not be kept (F16 where the ISA has an f16 tile). */
bool hearth_cpu_prepack_replaces(hearth_dtype wt);
/* Tells pw which prepacked weight the caller multiplies by after it (NULL:
 * none), so a call on pw's f32 panels on a one-thread pool fetches the
 * start of next's during its last tiles (matmul.c, "Fetching ahead"). A
 * hint: no result changes; next must outlive pw's calls. */
void hearth_cpu_prepack_chain(hearth_cpu_prepacked *pw, const hearth_cpu_prepacked *next);
/* Bytes of panels held. */
size_t hearth_cpu_prepacked_bytes(const hearth_cpu_prepacked *pw);
/* Whether calls on pw still read the weights it was made from (false for
 * f16 panels: the caller may unmap or release them). */
bool hearth_cpu_prepacked_needs_weights(const hearth_cpu_prepacked *pw);
/* hearth_cpu_matmul(pool, the weights pw was made from, X, M, Y): the same
 * errors, and the same result bit for bit wherever hearth_cpu_matmul runs
 * the f32 GEMM (M >= 24 for F16); for f16 panels at smaller M, where
 * hearth_cpu_matmul takes row dots, the sums are in another order (the
 * same to ~1e-6 relative). */
int hearth_cpu_matmul_prepacked(hearth_pool *pool, const hearth_cpu_prepacked *pw, const float *X, int64_t x_stride,
                                int64_t M, float *Y, int64_t y_stride);
/* n (1..HEARTH_MM_GROUP_MAX) prepacked weights of one X (all of pws[i]'s K):
 * the results of n hearth_cpu_matmul_prepacked calls, in one pool job where
 * they all run on panels (f16 panels: always). */
int hearth_cpu_matmul_prepacked_group(hearth_pool *pool, const hearth_cpu_prepacked *const *pws, float *const *Ys,
                                      const int64_t *y_strides, int n, const float *X, int64_t x_stride, int64_t M);

/* Frees the calling thread's matmul scratch now (a long-lived thread that
 * is done with matmuls); the next call on this thread allocates again. */
void hearth_cpu_matmul_release_scratch(void);

/* At least bytes of 64-byte aligned memory kept by the calling thread for a
 * model's forward pass (its activations), valid until this thread asks
 * again or releases; NULL above HEARTH_PASS_SCRATCH_MAX or when memory is
 * short (the caller then mallocs). Passes that malloc'd and freed their
 * buffer each time had glibc map and unmap it, and with two engines in one
 * process every unmap interrupted the other core to flush its TLB. */
#define HEARTH_PASS_SCRATCH_MAX ((size_t)64 << 20)
void *hearth_cpu_pass_scratch(size_t bytes);

/* The scalar oracle: each W row dequantized to f32 and dotted with each
 * unquantized X row, accumulating in double. Slow; for tests. */
int hearth_cpu_matmul_ref(hearth_pool *pool, hearth_dtype wt, const void *W, size_t w_row_bytes, int64_t N,
                          int64_t K, const float *X, int64_t x_stride, int64_t M, float *Y, int64_t y_stride);

/* The best ISA this CPU (and HEARTH_CPU_DISABLE) allows; decided once. */
hearth_cpu_isa hearth_cpu_matmul_isa(void);
/* Whether hearth_cpu_matmul_on can use isa here. */
int hearth_cpu_isa_available(hearth_cpu_isa isa);
/* "scalar", "avx2", "avx512". */
const char *hearth_cpu_isa_name(hearth_cpu_isa isa);

/* Measured f32 FMA throughput in GFLOP/s over all threads of pool (NULL: the
 * caller alone), with the best ISA's widest vectors. Runs ~0.3 s. */
double hearth_cpu_peak_gflops(hearth_pool *pool);

#endif

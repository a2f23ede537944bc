/* ops.cu: the CUDA backend's row ops (cuda_int.h, engine/dev.h): RMSNorm
 * (plain and gathering), the residual add, add + RMSNorm, SwiGLU, the
 * greedy argmax of logits rows, the QK step (biases, QK-norm, RoPE, KV
 * store), and bert's residual + bias + LayerNorm, bias + GELU, embedding
 * tail and pooling. The two attentions are ops_attn.cu's.
 *
 * How: a norm is one block per row (32 to 256 threads, by width), fp32,
 * reduced by warp shuffles and one shared slot per warp; the row is read
 * again after the reduction instead of kept in registers, since widths run
 * from 7 to 16k and the second read hits L1/L2. Where the width is a multiple
 * of 4 and every pointer 16-byte aligned the loads are float4 (a template
 * over the vector width; odd widths such as 7 or 33 take the scalar body).
 * Element-wise ops (add, swiglu) run flat over rows * n. The QK step is one
 * block per (row, head): a head (<= CU_HEAD_DIM_MAX) is staged in shared
 * memory so RoPE's pair partner can be read whichever layout (rope_type 0:
 * (2i, 2i+1), 2: (i, i + n_rot/2)) the model uses; a K head's block also
 * takes the V head of the same index and stores both in the cache. At one
 * llama decode row the QK step runs in the Q/K/V mat-vec's stores instead
 * (mm.cu's MVP_ROPE, since stop 39); this kernel serves the rest (batched
 * steps, qwen's biases and QK-norm, NEOX pairs).
 *
 * Norms accumulate in float where the CPU uses double: the test's bounds
 * (1e-5 relative for RMSNorm, 1e-4 for LayerNorm) hold at these widths, and
 * LayerNorm's variance is two-pass (mean first) so it does not cancel.
 * Pooling's mean accumulates in double, as the CPU's does (one pass per
 * sequence, off the hot path).
 *
 * No launch size depends on device data (rule of a recorded pass): grids
 * come from row counts and widths, positions and sequence bounds are read by
 * the kernels.
 *
 * Rejected: one warp per row for every width (a 4096-wide row would leave a
 * warp 128 loads deep); keeping the row in registers between the passes
 * (needs a width bound per instantiation); a per-row launch (the seam's
 * point is that there is none). */
#include "engine/cuda/cuda_int.h"

#include <cuda_fp16.h>
#include <float.h>
#include <limits.h>
#include <math.h>

static constexpr int ROW_THREADS_MAX = 256, FLAT_THREADS = 256;

/* ---- helpers ---- */

__device__ static inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The sum of v over the block, returned to every thread. blockDim.x is a
 * multiple of 32. The first barrier lets a block call it twice in a row: no
 * warp writes sh before every warp has read the previous call's sums. */
__device__ static float block_sum(float v)
{
    __shared__ float sh[32];
    v = warp_sum(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = v;
    __syncthreads();
    unsigned nw = blockDim.x >> 5;
    v = (threadIdx.x & 31) < nw ? sh[threadIdx.x & 31] : 0.0f;
    return warp_sum(v);
}

/* V floats at unit i (element i * V) of p; V is 1 or 4 (float4, aligned). */
template <int V> struct fv {
    float x[V];
};
template <int V> __device__ static inline fv<V> ld(const float *p, int64_t i)
{
    fv<V> r;
    if constexpr (V == 4) {
        float4 t = reinterpret_cast<const float4 *>(p)[i];
        r.x[0] = t.x, r.x[1] = t.y, r.x[2] = t.z, r.x[3] = t.w;
    } else {
        r.x[0] = p[i];
    }
    return r;
}
template <int V> __device__ static inline void st(float *p, int64_t i, fv<V> v)
{
    if constexpr (V == 4)
        reinterpret_cast<float4 *>(p)[i] = make_float4(v.x[0], v.x[1], v.x[2], v.x[3]);
    else
        p[i] = v.x[0];
}

/* Whether rows of n floats at each given pointer (NULL ignored) can be read
 * as float4: n a multiple of 4 and every base 16-byte aligned. */
static bool vec4_ok(int64_t n, const void *a, const void *b = nullptr, const void *c = nullptr,
                    const void *d = nullptr)
{
    const void *p[4] = {a, b, c, d};
    if (n % 4)
        return false;
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)p[i] % 16)
            return false;
    return true;
}

/* Threads for a block over units (n / V) of a row: a multiple of 32, at
 * most ROW_THREADS_MAX; narrow rows get one warp. */
static unsigned row_threads(int64_t units)
{
    int64_t t = (units + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > ROW_THREADS_MAX ? ROW_THREADS_MAX : t);
}

static unsigned flat_blocks(int64_t units)
{
    int64_t b = (units + FLAT_THREADS - 1) / FLAT_THREADS;
    return (unsigned)(b > 65535 * 16 ? 65535 * 16 : b); /* the kernels stride over the rest */
}

/* ---- RMSNorm, add, add + RMSNorm, SwiGLU ---- */

/* Y[i] = rmsnorm(X[rows ? rows[i] : i]) * w; block i. In place (Y == X)
 * when rows is NULL: each thread reads its units before writing them. A
 * thread's first unit stays in registers between the passes, and its
 * weights are read before the PDL wait (no kernel writes them): a decode
 * step's row (one unit a thread) pays one memory latency, not two. */
template <int V>
__global__ static void rmsnorm_kernel(float *Y, const float *X, const int32_t *rows, int64_t n, const float *w,
                                      float eps)
{
    const int64_t i = blockIdx.x, nu = n / V, u0 = threadIdx.x;
    fv<V> a0 = {}, g0 = {};
    if (u0 < nu)
        g0 = ld<V>(w, u0);
    cu_pdl_wait(); /* launched as a dependent (cu_launch): nothing before the kernel before it is done */
    cu_pdl_trigger(); /* the mat-vec after it may start its weight loads */
    const int64_t src = rows ? rows[i] : i;
    const float *x = X + src * n;
    float *y = Y + i * n;
    float ss = 0;
    if (u0 < nu)
        a0 = ld<V>(x, u0);
    for (int64_t u = u0; u < nu; u += blockDim.x) {
        fv<V> a = u == u0 ? a0 : ld<V>(x, u);
        for (int k = 0; k < V; k++)
            ss += a.x[k] * a.x[k];
    }
    float inv = 1.0f / sqrtf(block_sum(ss) / (float)n + eps);
    for (int64_t u = u0; u < nu; u += blockDim.x) {
        fv<V> a = u == u0 ? a0 : ld<V>(x, u), g = u == u0 ? g0 : ld<V>(w, u);
        for (int k = 0; k < V; k++)
            a.x[k] = a.x[k] * inv * g.x[k];
        st<V>(y, u, a);
    }
}

int cu_rmsnorm(cu_ctx *c, float *Y, const float *X, const int32_t *rows, int64_t n_rows, int64_t n, const float *w,
               float eps)
{
    if (n_rows < 0 || n < 1 || !w)
        return n_rows == 0 ? 0 : HEARTH_EINVAL;
    if (n_rows == 0)
        return 0;
    const bool pdl = cu_pdl_rows(n_rows);
    cudaError_t e;
    if (vec4_ok(n, Y, X, w))
        e = cu_launch(pdl, rmsnorm_kernel<4>, dim3((unsigned)n_rows), dim3(row_threads(n / 4)), 0, c->s, Y, X, rows, n, w, eps);
    else
        e = cu_launch(pdl, rmsnorm_kernel<1>, dim3((unsigned)n_rows), dim3(row_threads(n)), 0, c->s, Y, X, rows, n, w, eps);
    return cu_fail("rmsnorm", e);
}

/* X += A over nu units, flat. */
template <int V> __global__ static void add_kernel(float *X, const float *A, int64_t nu)
{
    cu_pdl_wait();
    cu_pdl_trigger();
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < nu; u += (int64_t)gridDim.x * blockDim.x) {
        fv<V> x = ld<V>(X, u), a = ld<V>(A, u);
        for (int k = 0; k < V; k++)
            x.x[k] += a.x[k];
        st<V>(X, u, x);
    }
}

int cu_add(cu_ctx *c, float *X, const float *A, int64_t rows, int64_t n)
{
    if (rows < 0 || n < 0)
        return HEARTH_EINVAL;
    int64_t total = rows * n;
    if (total == 0)
        return 0;
    const bool pdl = cu_pdl_rows(rows);
    cudaError_t e;
    if (vec4_ok(total, X, A))
        e = cu_launch(pdl, add_kernel<4>, dim3(flat_blocks(total / 4)), dim3(FLAT_THREADS), 0, c->s, X, A, total / 4);
    else
        e = cu_launch(pdl, add_kernel<1>, dim3(flat_blocks(total)), dim3(FLAT_THREADS), 0, c->s, X, A, total);
    return cu_fail("add", e);
}

/* X[i] += H[i]; H[i] = rmsnorm(X[i]) * w; block i. X's sum is stored in the
 * first pass and read back by the same thread in the second. */
template <int V>
__global__ static void add_rmsnorm_kernel(float *X, float *H, int64_t n, const float *w, float eps)
{
    cu_pdl_wait(); /* launched as a dependent (cu_launch): nothing before the kernel before it is done */
    cu_pdl_trigger(); /* the mat-vec after it may start its weight loads */
    int64_t nu = n / V;
    float *x = X + blockIdx.x * n, *h = H + blockIdx.x * n;
    float ss = 0;
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(x, u), b = ld<V>(h, u);
        for (int k = 0; k < V; k++) {
            a.x[k] += b.x[k];
            ss += a.x[k] * a.x[k];
        }
        st<V>(x, u, a);
    }
    float inv = 1.0f / sqrtf(block_sum(ss) / (float)n + eps);
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(x, u), g = ld<V>(w, u);
        for (int k = 0; k < V; k++)
            a.x[k] = a.x[k] * inv * g.x[k];
        st<V>(h, u, a);
    }
}

int cu_add_rmsnorm(cu_ctx *c, float *X, float *H, int64_t rows, int64_t n, const float *w, float eps)
{
    if (rows < 0 || n < 1 || !w)
        return rows == 0 ? 0 : HEARTH_EINVAL;
    if (rows == 0)
        return 0;
    const bool pdl = cu_pdl_rows(rows);
    cudaError_t e;
    if (vec4_ok(n, X, H, w))
        e = cu_launch(pdl, add_rmsnorm_kernel<4>, dim3((unsigned)rows), dim3(row_threads(n / 4)), 0, c->s, X, H, n, w, eps);
    else
        e = cu_launch(pdl, add_rmsnorm_kernel<1>, dim3((unsigned)rows), dim3(row_threads(n)), 0, c->s, X, H, n, w, eps);
    return cu_fail("add_rmsnorm", e);
}

/* G = silu(G) * U over nu units, flat. expf, not __expf: the fast one's
 * error grows with |x| past the test's 1e-5. */
template <int V> __global__ static void swiglu_kernel(float *G, const float *U, int64_t nu)
{
    cu_pdl_wait(); /* launched as a dependent (cu_launch): nothing before the kernel before it is done */
    cu_pdl_trigger(); /* the mat-vec after it may start its weight loads */
    for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; u < nu; u += (int64_t)gridDim.x * blockDim.x) {
        fv<V> g = ld<V>(G, u), v = ld<V>(U, u);
        for (int k = 0; k < V; k++)
            g.x[k] = g.x[k] / (1.0f + expf(-g.x[k])) * v.x[k];
        st<V>(G, u, g);
    }
}

int cu_swiglu(cu_ctx *c, float *G, const float *U, int64_t rows, int64_t n)
{
    if (rows < 0 || n < 0)
        return HEARTH_EINVAL;
    int64_t total = rows * n;
    if (total == 0)
        return 0;
    const bool pdl = cu_pdl_rows(rows);
    cudaError_t e;
    if (vec4_ok(total, G, U))
        e = cu_launch(pdl, swiglu_kernel<4>, dim3(flat_blocks(total / 4)), dim3(FLAT_THREADS), 0, c->s, G, U, total / 4);
    else
        e = cu_launch(pdl, swiglu_kernel<1>, dim3(flat_blocks(total)), dim3(FLAT_THREADS), 0, c->s, G, U, total);
    return cu_fail("swiglu", e);
}

/* ---- the greedy draw ---- */

/* sampler.c's sanitize: NaN -> -inf, +inf -> the largest float. */
__device__ static inline float argmax_clean(float x)
{
    return isnan(x) ? -INFINITY : x == INFINITY ? FLT_MAX : x;
}

/* (v, i) beats (bv, bi): larger, or equal and earlier (the lowest index of
 * equals, as the sampler's argmax). */
__device__ static inline bool argmax_beats(float v, int i, float bv, int bi)
{
    return v > bv || (v == bv && i < bi);
}

/* ids[r] = the greedy draw over row r of X (n wide); block r. Each thread
 * keeps the best of its units, then the warps and the block reduce pairs.
 * A thread issues AM_BATCH loads before it compares any (a 32,064-wide row
 * is then one batch per thread at 1,024 threads, not 31 round trips to L2
 * one after another at 256), and a block takes up to AM_THREADS_MAX
 * threads, since the row is the step's only work left; it launches as a
 * programmatic dependent of the output matmul. On the H100 (1.04B llama,
 * stop 40, bench/RESULTS.md): 6.1 us a step by ncu where it took 17; tg128
 * F16 1,114 against 1,072 tok/s, Q8_0 1,565 against 1,535, Q4_K 1,922
 * against 1,912. Comparing out of index order is fine: argmax_beats breaks
 * ties by index. */
static constexpr int AM_BATCH = 8, AM_THREADS_MAX = 1024;

/* next: NULL, or the next pass's step block, made here (dev.h's
 * argmax_feed): words rows .. words - 1 from src by every block's threads,
 * word r (the token of row r) block r's draw. Written after the wait: the
 * pass before read the block, and each of its kernels waits on the one
 * before it, so all of them are done. Where a run's passes had each an
 * upload of its block and a copy of the draws into it, each waiting on
 * the pass before: tg128 on the H100 (1.04B, two rounds) Q8_0 1,664
 * against 1,672, Q4_K 2,046 against 2,066 tok/s (stop 42). */
template <int V>
__global__ static void __launch_bounds__(AM_THREADS_MAX)
    argmax_kernel(int32_t *ids, const float *X, int64_t n, int32_t *next, const int32_t *src, int64_t words)
{
    cu_pdl_wait(); /* launched as a dependent (cu_launch): the logits are the kernel before's */
    cu_pdl_trigger();
    if (next)
        for (int64_t w = gridDim.x + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; w < words;
             w += (int64_t)gridDim.x * blockDim.x)
            next[w] = src[w];
    const float *x = X + (int64_t)blockIdx.x * n;
    const int64_t nu = n / V;
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int64_t u0 = threadIdx.x; u0 < nu; u0 += (int64_t)AM_BATCH * blockDim.x) {
        fv<V> a[AM_BATCH];
#pragma unroll
        for (int b = 0; b < AM_BATCH; b++) {
            const int64_t u = u0 + (int64_t)b * blockDim.x;
            if (u < nu)
                a[b] = ld<V>(x, u);
        }
#pragma unroll
        for (int b = 0; b < AM_BATCH; b++) {
            const int64_t u = u0 + (int64_t)b * blockDim.x;
            if (u >= nu)
                break;
            for (int k = 0; k < V; k++) {
                const float v = argmax_clean(a[b].x[k]);
                const int i = (int)(u * V + k);
                if (argmax_beats(v, i, bv, bi))
                    bv = v, bi = i;
            }
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, bv, o);
        const int i = __shfl_xor_sync(0xffffffffu, bi, o);
        if (argmax_beats(v, i, bv, bi))
            bv = v, bi = i;
    }
    __shared__ float sv[32];
    __shared__ int si[32];
    if ((threadIdx.x & 31) == 0)
        sv[threadIdx.x >> 5] = bv, si[threadIdx.x >> 5] = bi;
    __syncthreads();
    if (threadIdx.x < 32) { /* the first warp reduces the warps' pairs */
        const unsigned nw = blockDim.x >> 5;
        bv = threadIdx.x < nw ? sv[threadIdx.x] : -INFINITY;
        bi = threadIdx.x < nw ? si[threadIdx.x] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            const float v = __shfl_xor_sync(0xffffffffu, bv, o);
            const int i = __shfl_xor_sync(0xffffffffu, bi, o);
            if (argmax_beats(v, i, bv, bi))
                bv = v, bi = i;
        }
        if (threadIdx.x == 0) {
            const int id = bi == INT_MAX ? 0 : bi; /* every value -inf still has an index: its first */
            ids[blockIdx.x] = id;
            if (next)
                next[blockIdx.x] = id;
        }
    }
}

/* Threads for an argmax block over units: enough for one batch each, a
 * multiple of 32, at most AM_THREADS_MAX. */
static unsigned am_threads(int64_t units)
{
    int64_t t = (units + AM_BATCH - 1) / AM_BATCH;
    t = (t + 31) / 32 * 32;
    return (unsigned)(t < 32 ? 32 : t > AM_THREADS_MAX ? AM_THREADS_MAX : t);
}

int cu_argmax_rows(cu_ctx *c, int32_t *ids, const float *X, int64_t rows, int64_t n, int32_t *next,
                   const int32_t *src, int64_t words)
{
    if (rows < 0 || n < 1 || n > INT32_MAX || rows > INT32_MAX || (next && (!src || words < rows)))
        return rows == 0 ? 0 : HEARTH_EINVAL;
    if (rows == 0)
        return 0;
    const bool pdl = cu_pdl_rows(rows);
    cudaError_t e;
    if (vec4_ok(n, X))
        e = cu_launch(pdl, argmax_kernel<4>, dim3((unsigned)rows), dim3(am_threads(n / 4)), 0, c->s, ids, X, n, next,
                      src, words);
    else
        e = cu_launch(pdl, argmax_kernel<1>, dim3((unsigned)rows), dim3(am_threads(n)), 0, c->s, ids, X, n, next, src,
                      words);
    return cu_fail(next ? "argmax_feed" : "argmax", e);
}

/* ---- the QK step ---- */

typedef struct qk_args {
    float *Q, *K, *V;
    const float *bq, *bk, *bv, *q_norm, *k_norm;
    int n_head, n_head_kv, hd, n_rot, rope_type;
    float eps;
    void *kc, *vc;             /* the cache's K and V bases */
    bool f16;
    int64_t n_ctx, n_layer, layer;
    const int64_t *pos;
    const int32_t *slot;
    const float *rope_cs;
    int64_t rope_stride;
} qk_args;

/* Stores v at element i of the cache row dst (f32 or f16, rounded to
 * nearest even). */
__device__ static inline void kv_put(void *dst, int64_t i, float v, bool f16)
{
    if (f16)
        ((__half *)dst)[i] = __float2half_rn(v);
    else
        ((float *)dst)[i] = v;
}

/* Thread t's dim d's RoPE pair (ia, ib) and angle index i. */
__device__ static inline void rope_pair(int d, int n_rot, int rope_type, int &i, int &ia, int &ib)
{
    if (rope_type == 0)
        i = d >> 1, ia = 2 * i, ib = 2 * i + 1;
    else
        i = d < n_rot / 2 ? d : d - n_rot / 2, ia = i, ib = i + n_rot / 2;
}

/* Block (r, j): j < n_head is Q head j of row r; else K head and V head
 * j - n_head. blockDim.x: hd rounded up to 32. The row's position, slot
 * and the angles of a thread's first dim are read before the PDL wait
 * (the step block was uploaded before the pass's first kernel ran), so a
 * decode step waits on memory once after Q/K/V land, not twice. */
__global__ static void qk_kernel(qk_args a)
{
    int nh = a.n_head + a.n_head_kv;
    int64_t r = blockIdx.x / nh;
    int j = (int)(blockIdx.x % nh), hd = a.hd, t = threadIdx.x;
    const int64_t p = a.pos[r];
    const int32_t slot = a.slot[r];
    const float *cs = a.rope_cs + r * a.rope_stride;
    float c0 = 1.0f, s0 = 0.0f;
    if (t < a.n_rot) {
        int i, ia, ib;
        rope_pair(t, a.n_rot, a.rope_type, i, ia, ib);
        c0 = cs[2 * i];
        s0 = cs[2 * i + 1];
    }
    cu_pdl_wait();
    cu_pdl_trigger();
    __shared__ float sh[CU_HEAD_DIM_MAX];
    bool is_q = j < a.n_head;
    int h = is_q ? j : j - a.n_head;
    int64_t width = (int64_t)(is_q ? a.n_head : a.n_head_kv) * hd;
    float *x = (is_q ? a.Q : a.K) + r * width + (int64_t)h * hd;
    const float *bias = is_q ? a.bq : a.bk, *nw = is_q ? a.q_norm : a.k_norm;

    float ss = 0;
    for (int d = t; d < hd; d += blockDim.x) {
        float v = x[d] + (bias ? bias[(int64_t)h * hd + d] : 0.0f);
        sh[d] = v;
        ss += v * v;
    }
    if (nw) { /* uniform over the block: block_sum's barriers are safe */
        float inv = 1.0f / sqrtf(block_sum(ss) / (float)hd + a.eps);
        for (int d = t; d < hd; d += blockDim.x)
            sh[d] = sh[d] * inv * nw[d];
    }
    __syncthreads(); /* RoPE reads each dim's partner */

    bool store = !is_q && p >= 0 && p < a.n_ctx; /* a bad position writes nothing outside the block */
    size_t at = 0;
    if (store)
        at = (((size_t)slot * (size_t)a.n_layer + (size_t)a.layer) * (size_t)a.n_ctx + (size_t)p) *
                 (size_t)width + (size_t)h * hd;
    for (int d = t; d < hd; d += blockDim.x) {
        float o = sh[d];
        if (d < a.n_rot) {
            int i, ia, ib;
            rope_pair(d, a.n_rot, a.rope_type, i, ia, ib);
            float c = d == t ? c0 : cs[2 * i], s = d == t ? s0 : cs[2 * i + 1], va = sh[ia], vb = sh[ib];
            o = d == ia ? va * c - vb * s : va * s + vb * c;
        }
        x[d] = o;
        if (store)
            kv_put(a.kc, (int64_t)(at + d), o, a.f16);
    }
    if (is_q)
        return;
    float *v = a.V + r * width + (int64_t)h * hd;
    for (int d = t; d < hd; d += blockDim.x) {
        float o = v[d];
        if (a.bv) {
            o += a.bv[(int64_t)h * hd + d];
            v[d] = o;
        }
        if (store)
            kv_put(a.vc, (int64_t)(at + d), o, a.f16);
    }
}

int cu_qk_rope_store(cu_ctx *c, float *Q, float *K, float *V, const hearth_qk *qk, const hearth_dev_kv *kv,
                     int64_t layer, const hearth_batch *b)
{
    if (kv->type != HEARTH_F32 && kv->type != HEARTH_F16)
        return HEARTH_EUNSUPPORTED;
    if (qk->n_head < 1 || qk->n_head_kv < 1 || qk->hd < 1 || qk->hd > CU_HEAD_DIM_MAX ||
        kv->kv_dim != qk->n_head_kv * qk->hd || qk->n_rot < 0 || qk->n_rot > qk->hd || qk->n_rot % 2 ||
        (qk->n_rot > 0 && b->rope_stride < qk->n_rot) || layer < 0 || layer >= kv->n_layer ||
        (!qk->q_norm) != (!qk->k_norm) || qk->n_head + qk->n_head_kv > 65536)
        return HEARTH_EINVAL;
    if (b->n == 0)
        return 0;
    qk_args a = {Q, K, V, qk->bq, qk->bk, qk->bv, qk->q_norm, qk->k_norm, (int)qk->n_head, (int)qk->n_head_kv,
                 (int)qk->hd, (int)qk->n_rot, qk->rope_type, qk->eps, kv->k, kv->v, kv->type == HEARTH_F16,
                 kv->n_ctx, kv->n_layer, layer, b->pos, b->slot, b->rope_cs, b->rope_stride};
    int64_t blocks = b->n * (qk->n_head + qk->n_head_kv);
    cudaError_t e = cu_launch(cu_pdl_rows(b->n), qk_kernel, dim3((unsigned)blocks), dim3(row_threads(qk->hd)), 0, c->s, a);
    return cu_fail("qk_rope_store", e);
}

/* ---- bert's row steps ---- */

/* X = LN(X + (Y + bias)) * g + beta; block per row. Y is the op's scratch
 * and is left as it was (nothing reads it after). Two passes over the sum,
 * each thread re-reading what it stored. */
template <int V>
__device__ static void layernorm_row(float *x, int64_t n, const float *g, const float *beta, float eps)
{
    int64_t nu = n / V;
    float s = 0;
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(x, u);
        for (int k = 0; k < V; k++)
            s += a.x[k];
    }
    float mean = block_sum(s) / (float)n, sq = 0;
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(x, u);
        for (int k = 0; k < V; k++)
            sq += (a.x[k] - mean) * (a.x[k] - mean);
    }
    float inv = 1.0f / sqrtf(block_sum(sq) / (float)n + eps);
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(x, u), gg = ld<V>(g, u), bb = ld<V>(beta, u);
        for (int k = 0; k < V; k++)
            a.x[k] = (a.x[k] - mean) * inv * gg.x[k] + bb.x[k];
        st<V>(x, u, a);
    }
}

template <int V>
__global__ static void add_layernorm_kernel(float *X, const float *Y, const float *bias, int64_t n, const float *g,
                                            const float *beta, float eps)
{
    int64_t nu = n / V;
    float *x = X + blockIdx.x * n;
    const float *y = Y + blockIdx.x * n;
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(x, u), b = ld<V>(y, u), c = ld<V>(bias, u);
        for (int k = 0; k < V; k++)
            a.x[k] += b.x[k] + c.x[k];
        st<V>(x, u, a);
    }
    layernorm_row<V>(x, n, g, beta, eps);
}

int cu_add_layernorm(cu_ctx *c, float *X, float *Y, const float *bias, int64_t rows, int64_t n, const float *g,
                     const float *beta, float eps)
{
    if (rows < 0 || n < 1 || !bias || !g || !beta)
        return rows == 0 ? 0 : HEARTH_EINVAL;
    if (rows == 0)
        return 0;
    if (vec4_ok(n, X, Y, bias, g) && vec4_ok(n, beta))
        add_layernorm_kernel<4><<<(unsigned)rows, row_threads(n / 4), 0, c->s>>>(X, Y, bias, n, g, beta, eps);
    else
        add_layernorm_kernel<1><<<(unsigned)rows, row_threads(n), 0, c->s>>>(X, Y, bias, n, g, beta, eps);
    return cu_launched("add_layernorm");
}

/* Y = gelu_erf(Y + bias); block per row. erff, as the CPU's oracle. */
template <int V> __global__ static void bias_gelu_kernel(float *Y, const float *bias, int64_t n)
{
    int64_t nu = n / V;
    float *y = Y + blockIdx.x * n;
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(y, u), b = ld<V>(bias, u);
        for (int k = 0; k < V; k++) {
            float v = a.x[k] + b.x[k];
            a.x[k] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
        }
        st<V>(y, u, a);
    }
}

int cu_bias_gelu(cu_ctx *c, float *Y, const float *bias, int64_t rows, int64_t n)
{
    if (rows < 0 || n < 1 || !bias)
        return rows == 0 ? 0 : HEARTH_EINVAL;
    if (rows == 0)
        return 0;
    if (vec4_ok(n, Y, bias))
        bias_gelu_kernel<4><<<(unsigned)rows, row_threads(n / 4), 0, c->s>>>(Y, bias, n);
    else
        bias_gelu_kernel<1><<<(unsigned)rows, row_threads(n), 0, c->s>>>(Y, bias, n);
    return cu_launched("bias_gelu");
}

/* Y[r] += pos_tab[pos[r]] + type_row; Y[r] = LN(Y[r]) * ln_w + ln_b; block
 * per row. The sum in the CPU's order (x + (p + t)). */
template <int V>
__global__ static void embed_finish_kernel(float *Y, const int64_t *pos, int64_t n, const float *pos_tab,
                                           const float *type_row, const float *ln_w, const float *ln_b, float eps)
{
    int64_t nu = n / V;
    float *x = Y + blockIdx.x * n;
    const float *p = pos_tab + pos[blockIdx.x] * n;
    for (int64_t u = threadIdx.x; u < nu; u += blockDim.x) {
        fv<V> a = ld<V>(x, u), b = ld<V>(p, u), t = ld<V>(type_row, u);
        for (int k = 0; k < V; k++)
            a.x[k] += b.x[k] + t.x[k];
        st<V>(x, u, a);
    }
    layernorm_row<V>(x, n, ln_w, ln_b, eps);
}

int cu_embed_finish(cu_ctx *c, float *Y, const hearth_batch *b, int64_t n, const float *pos_tab,
                    const float *type_row, const float *ln_w, const float *ln_b, float eps)
{
    if (n < 1 || !pos_tab || !type_row || !ln_w || !ln_b)
        return HEARTH_EINVAL;
    if (b->n == 0)
        return 0;
    if (vec4_ok(n, Y, pos_tab, type_row, ln_w) && vec4_ok(n, ln_b))
        embed_finish_kernel<4><<<(unsigned)b->n, row_threads(n / 4), 0, c->s>>>(Y, b->pos, n, pos_tab, type_row,
                                                                                 ln_w, ln_b, eps);
    else
        embed_finish_kernel<1><<<(unsigned)b->n, row_threads(n), 0, c->s>>>(Y, b->pos, n, pos_tab, type_row, ln_w,
                                                                             ln_b, eps);
    return cu_launched("embed_finish");
}

/* ---- pooling ---- */

/* Block s: sequence s of b. Its output starts after every earlier
 * sequence's: len * n floats for one kept whole (all[s'] set), else n. */
__global__ static void pool_kernel(float *out, const float *X, int64_t n, const int64_t *seq_start, int n_seqs,
                                   int kind, bool l2, const unsigned char *all)
{
    int s = blockIdx.x;
    float before = 0; /* rows of output before s, summed as floats: exact below 2^24 */
    for (int q = threadIdx.x; q < s; q += blockDim.x)
        before += all && all[q] ? (float)(seq_start[q + 1] - seq_start[q]) : 1.0f;
    int64_t off = (int64_t)block_sum(before) * n;
    int64_t r0 = seq_start[s], len = seq_start[s + 1] - r0;
    float *o = out + off;
    const float *x = X + r0 * n;
    if (all && all[s]) {
        for (int64_t i = threadIdx.x; i < len * n; i += blockDim.x)
            o[i] = x[i];
        return;
    }
    if (len < 1)
        return;
    float ss = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v;
        if (kind == HEARTH_DEV_POOL_CLS) {
            v = x[i];
        } else if (kind == HEARTH_DEV_POOL_LAST) {
            v = x[(len - 1) * n + i];
        } else {
            double sum = 0;
            for (int64_t r = 0; r < len; r++)
                sum += x[r * n + i];
            v = (float)(sum / (double)len);
        }
        o[i] = v;
        ss += v * v;
    }
    if (!l2)
        return;
    float norm = sqrtf(block_sum(ss)), inv = 1.0f / (norm > 1e-12f ? norm : 1e-12f); /* sentence-transformers' eps */
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        o[i] *= inv;
}

int cu_pool(cu_ctx *c, float *out, const float *X, int64_t n, const hearth_batch *b, int kind, bool l2,
            const bool *all_rows)
{
    if (n < 1 || kind < HEARTH_DEV_POOL_MEAN || kind > HEARTH_DEV_POOL_LAST || b->n_seqs < 0)
        return HEARTH_EINVAL;
    if (b->n_seqs == 0)
        return 0;
    /* The flags go to the device only when one is set (token-level
     * outputs); bert passes are never recorded, so the small upload is
     * allowed, but it is refused while a graph records. */
    bool any = false;
    for (int s = 0; all_rows && s < b->n_seqs; s++)
        any |= all_rows[s];
    unsigned char *flags = nullptr;
    if (any) {
        if (c->recording)
            return HEARTH_EUNSUPPORTED;
        int rc = cu_fail("pool flags alloc", cudaMallocAsync((void **)&flags, (size_t)b->n_seqs, c->s));
        if (rc)
            return rc;
        static_assert(sizeof(bool) == 1, "bool flags are uploaded as bytes");
        rc = cu_fail("pool flags upload",
                     cudaMemcpyAsync(flags, all_rows, (size_t)b->n_seqs, cudaMemcpyHostToDevice, c->s));
        if (rc) {
            cudaFreeAsync(flags, c->s);
            return rc;
        }
    }
    pool_kernel<<<(unsigned)b->n_seqs, row_threads(n), 0, c->s>>>(out, X, n, b->seq_start, b->n_seqs, kind, l2,
                                                                  flags);
    int rc = cu_launched("pool");
    if (flags) {
        int rf = cu_fail("pool flags free", cudaFreeAsync(flags, c->s));
        rc = rc ? rc : rf;
    }
    return rc;
}

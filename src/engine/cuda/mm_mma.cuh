/* mm_mma.cuh: mm.cu's grouped kernels: one launch over the concatenated
 * rows of up to four weights of one type that share X (Q,K,V; gate,up).
 *
 *   mvp_kernel  mvg_kernel at M = 1 with the weight loads pipelined across
 *               batches and rows (the default for decode: mm.cu), with the
 *               epilogues of matmul_fused (residual add, SwiGLU) and, for
 *               Q8_0, Q4_0 and Q4_K, X as q8a blocks multiplied with dp4a;
 *               with q8a X also 2-4 rows of X (MT, the epilogues too),
 *               and half a warp a row where a row is short (LW = 16)
 *   mvg_kernel  the decode mat-vec of mm_kernels.cuh (same arithmetic, same
 *               order per row), each warp's row looked up in the group
 *   mma_kernel  2 <= M <= 64: tensor cores (mma.sync m16n8k16, f32
 *               accumulate) with the weight dequantized in registers, read
 *               once per call; X rounded to f16 (bf16 for BF16 weights) as
 *               it is staged in shared memory; K split over blocks when the
 *               rows give few (mma_reduce_kernel adds the splits); the
 *               epilogues ADD and SWIGLU in its stores or in the reduce
 *
 * mma_kernel, the fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16
 * with floating point type"; lane = 4 gq + tq, gq = lane / 4, tq = lane % 4;
 * each 32-bit register holds two 16-bit values, the lower index in the low
 * half):
 *   A (16 x 16, row):  a[0] = A[gq][2tq, 2tq+1]      a[1] = A[gq+8][2tq, 2tq+1]
 *                      a[2] = A[gq][2tq+8, 2tq+9]    a[3] = A[gq+8][2tq+8, 2tq+9]
 *   B (16 x 8, col):   b[0] = B[2tq, 2tq+1][gq]      b[1] = B[2tq+8, 2tq+9][gq]
 *   C/D (16 x 8, f32): c[0] = D[gq][2tq]  c[1] = D[gq][2tq+1]
 *                      c[2] = D[gq+8][2tq] c[3] = D[gq+8][2tq+1]
 * Here A = 16 weight rows (output features), B = X^T (columns = 8 rows of
 * X), D = Y^T. The sum over k does not care which physical k each mma k
 * stands for, as long as A and B agree, so lane tq holds four contiguous
 * physical elements: in the mma of step s (0..3) over a 16-element group
 * starting at e_tq (each of the four lanes tq of a quad has its own group;
 * all eight lanes with the same tq share it),
 *   mma k 2tq, 2tq+1, 2tq+8, 2tq+9  ->  physical k e_tq + 4s + 0, 1, 2, 3.
 * So a[0] = W[row gq][e+4s, e+4s+1], a[2] = W[row gq][e+4s+2, e+4s+3] (rows
 * gq+8 for a[1], a[3]) and b = the 8 bytes X[gq][e+4s .. e+4s+3] in one
 * 64-bit shared-memory load; four steps cover the 16 elements of each lane's
 * group, so a quad's four mmas sum its four groups. The 16 elements are one
 * trait group (mm_kernels.cuh): a lane loads a unit of rows gq and gq+8 and
 * decodes group by group, w = a q - b in f32, rounded to f16/bf16.
 *
 * Block: 8 warps, WN along rows x WK along K (WN = NT, the 8-row tiles of
 * X: 1, 2, 4, 8), each warp two 16-row tiles (the B fragments serve both).
 * K runs in chunks of R = WK S elements (S = 128, or 256 for Q6_K's 64-wide
 * units): the block stages X's chunk (8 NT rows, zero past M and K) as
 * f16, each warp multiplies its S-wide slice; the WK partial sums are added
 * in shared memory in a fixed order at the end. Nothing depends on N, so a
 * row's result is the same alone or in a group (bit for bit). Weight tiles
 * of a group start on 16-row boundaries (rows past a weight's N compute
 * zeros and are not stored). Included by mm.cu alone, after mm_kernels.cuh. */
#ifndef HEARTH_ENGINE_CUDA_MM_MMA_CUH
#define HEARTH_ENGINE_CUDA_MM_MMA_CUH

#include "engine/cuda/mm_kernels.cuh"

#define MM_GROUP 4 /* weights one launch takes (dev_cuda.cu's MM_GROUP_MAX) */

/* Weights of one type and width sharing X: weight i covers the
 * concatenated index range [at[i], at[i+1]) (rows for mvg_kernel, 16-row
 * tiles for mma_kernel). */
struct mgroup {
    mview v[MM_GROUP];
    float *y[MM_GROUP];
    int64_t ldy[MM_GROUP], n[MM_GROUP], at[MM_GROUP];
    int cnt;
};

/* The weight holding concatenated index x (constant indices only: no
 * dynamic indexing of the kernel parameters). */
struct mseg {
    mview v;
    float *y;
    int64_t ldy, n, local;
};
__device__ __forceinline__ mseg seg_at(const mgroup &g, int64_t x)
{
    mseg s = {g.v[0], g.y[0], g.ldy[0], g.n[0], x - g.at[0]};
#pragma unroll
    for (int j = 1; j < MM_GROUP; j++)
        if (j < g.cnt && x >= g.at[j]) {
            s.v = g.v[j];
            s.y = g.y[j];
            s.ldy = g.ldy[j];
            s.n = g.n[j];
            s.local = x - g.at[j];
        }
    return s;
}

/* ---- the grouped mat-vec: mv_kernel (mm_kernels.cuh) over nr concatenated rows ---- */

/* What mvg_kernel folds in (cu_matmul_fused; engine/dev.h's hearth_mm_fuse):
 * PRE (a template argument) MV_PRE_NONE or MV_PRE_RMS (X's rows normalized
 * and scaled by nw as staged; each block sums its rows' squares itself, an
 * extra read of X from L2); acc: Y += the product. */
#define MV_PRE_NONE 0
#define MV_PRE_RMS 1
struct mfuse {
    const float *nw;
    float eps;
    int acc;
};

/* stage_x with PRE applied; inv: (M) the rows' 1/rms (MV_PRE_RMS). The
 * arithmetic is ops.cu's: x * inv * w. */
template <int M, int PRE>
__device__ __forceinline__ void stage_x_pre(float4 *xs, const float *__restrict__ X, int64_t ldx, int64_t K,
                                            int64_t c0, int ce, int kc4, bool vec, const float *inv,
                                            const mfuse &fz)
{
    if (PRE == MV_PRE_NONE) {
        stage_x<M>(xs, X, ldx, K, c0, ce, kc4, vec);
        return;
    }
    const int ce4 = ce / 4;
    for (int i = threadIdx.x; i < M * ce4; i += blockDim.x) {
        const int m = i / ce4, f = i - m * ce4;
        const int64_t gk = c0 + 4 * f;
        float v[4];
#pragma unroll
        for (int t = 0; t < 4; t++) {
            const int64_t k = gk + t;
            float x = 0.0f;
            if (k < K)
                x = X[m * ldx + k] * inv[m] * fz.nw[k];
            v[t] = x;
        }
        xs[m * kc4 + swz(f)] = make_float4(v[0], v[1], v[2], v[3]);
    }
}

/* inv[m] = 1 / sqrt(mean(X[m]^2) + eps) for the M rows, the whole block
 * (red: MV_WARPS * M floats of shared memory). */
template <int M>
__device__ __forceinline__ void rms_inv(float *inv, float *red, const float *__restrict__ X, int64_t ldx, int64_t K,
                                        float eps)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int m = 0; m < M; m++) {
        float ss = 0.0f;
        for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
            const float x = X[m * ldx + k];
            ss += x * x;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0)
            red[warp * M + m] = ss;
    }
    __syncthreads();
    if (threadIdx.x < M) {
        float t = 0.0f;
        for (int w = 0; w < MV_WARPS; w++)
            t += red[w * M + threadIdx.x];
        inv[threadIdx.x] = 1.0f / sqrtf(t / (float)K + eps);
    }
}

/* The first weight loads go out before anything another kernel writes is
 * read (cu_pdl_wait): launched as a dependent (mm.cu, cu_pdl_on), a block
 * streams its first weights while the kernel before it finishes. */
template <class T, int M, int PRE>
__global__ void __launch_bounds__(MV_WARPS * 32, MV_MIN_BLOCKS(T, M))
    mvg_kernel(mgroup gr, const float *__restrict__ X, int64_t ldx, int64_t nr, int64_t K, int kc, mfuse fz)
{
    extern __shared__ float4 xs[]; /* (M, kc/4), swizzled */
    __shared__ float red[MV_WARPS * M], inv[M];
    cu_pdl_trigger();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kc4 = kc / 4;
    const int64_t kp = gr.v[0].kp; /* one width for the group */
    const bool once = kp <= kc;
    const bool vec = ((uintptr_t)X & 15) == 0 && ldx % 4 == 0;
    bool staged = false;
    for (int64_t rg = (int64_t)blockIdx.x * MV_WARPS; rg < nr; rg += (int64_t)gridDim.x * MV_WARPS) {
        const bool live = rg + warp < nr;
        /* the view now, the output at the end (fewer registers held over the loop) */
        const mseg sv = seg_at(gr, rg + warp);
        const mview vw = sv.v;
        const int64_t row = sv.local;
        float acc[M];
#pragma unroll
        for (int m = 0; m < M; m++)
            acc[m] = 0.0f;
        for (int64_t c0 = 0; c0 < kp; c0 += kc) {
            const int ce = (int)min((int64_t)kc, kp - c0), nu = ce / T::EPU;
            const int64_t ub = c0 / T::EPU;
            typename T::R r[T::UNR];
            int u = lane;
            if (live) {
#pragma unroll
                for (int j = 0; j < T::UNR; j++)
                    if (u + 32 * j < nu)
                        r[j] = T::load(vw, row, ub + u + 32 * j);
            }
            if (!(once && staged)) { /* block-uniform */
                if (!staged) {
                    cu_pdl_wait();
                    if (PRE == MV_PRE_RMS)
                        rms_inv<M>(inv, red, X, ldx, K, fz.eps);
                }
                __syncthreads();
                stage_x_pre<M, PRE>(xs, X, ldx, K, c0, ce, kc4, vec, inv, fz);
                __syncthreads();
                staged = true;
            }
            if (!live)
                continue;
            for (;;) {
#pragma unroll
                for (int j = 0; j < T::UNR; j++) {
                    if (u + 32 * j >= nu)
                        break;
                    unit_dot<T, M>(r[j], xs, kc4, u + 32 * j, acc);
                }
                u += 32 * T::UNR;
                if (u >= nu)
                    break;
#pragma unroll
                for (int j = 0; j < T::UNR; j++)
                    if (u + 32 * j < nu)
                        r[j] = T::load(vw, row, ub + u + 32 * j);
            }
        }
        if (!live)
            continue;
        const mseg sg = seg_at(gr, rg + warp);
#pragma unroll
        for (int m = 0; m < M; m++) {
            float s = acc[m];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0) {
                float *y = sg.y + m * sg.ldy + row;
                *y = fz.acc ? *y + s : s;
            }
        }
    }
}

/* ---- X as q8a blocks: decode's mat-vec for the types the CPU feeds q8a ---- */

/* For Q8_0, Q4_0 and Q4_K (hearth_quant_uses_q8a; Q6_K not yet) the M = 1
 * mat-vec takes X as the CPU's matmul does (engine/cpu/quant.h's q8a
 * blocks: 32 int8 values and a scale), so a unit's products are four dp4a
 * on the raw quants, where the float path decodes every weight to a float
 * (ncu: 12.7 instructions a Q4_K weight, the kernel issue-bound). The
 * rounding is the CPU's, inside the bound test_dev_ops checks for these
 * types on every device (check_mm's qerr). Shared memory of a chunk of kc
 * elements: kc int8 values, each 32-block's scale d, each 16-group's
 * d * (sum of its values) (the offset and min terms). */
__host__ __device__ constexpr size_t q8_smem(int kc)
{
    return (size_t)kc + (size_t)kc / 32 * 4 + (size_t)kc / 16 * 4;
}

/* X's first kp elements (a multiple of 32; zeros past K) as q8a into xq,
 * xd, x16, the whole block. quant_ref.c's arithmetic: d = amax / 127, q =
 * rint(x 127 / amax) within +-127. Eight lanes a 32-block, four values a
 * lane; every lane of a warp runs the shuffles. A thread's float4s of X
 * (and of the norm's weight) are loaded in batches of up to SQ_BATCH
 * before any is quantized (batch: false, one at a time as before stop
 * 39): the loop's trip count is known only at run time, so without the
 * batch each pass waited one L2 round trip for its float4 after the last
 * pass's shuffles, four in a row for K = 8,192 in blocks of 512 threads,
 * all after the PDL wait, on the step's critical path. */
#define SQ_BATCH 4

/* One float4 of the normed X at element k (zeros past K). */
__device__ __forceinline__ void sq_load(float (&v)[4], const float *__restrict__ X, int64_t K, int64_t k, bool vec,
                                        const float *__restrict__ nw, float inv)
{
    if (vec && k + 4 <= K) {
        const float4 x = __ldg((const float4 *)(X + k));
        v[0] = x.x;
        v[1] = x.y;
        v[2] = x.z;
        v[3] = x.w;
        /* the RMS norm folded in: ops.cu's x * inv * w, then quantized as the norm's output was */
        if (nw && ((uintptr_t)nw & 15) == 0) {
            const float4 w = __ldg((const float4 *)(nw + k));
            v[0] = v[0] * inv * w.x;
            v[1] = v[1] * inv * w.y;
            v[2] = v[2] * inv * w.z;
            v[3] = v[3] * inv * w.w;
            return;
        }
        if (nw)
#pragma unroll
            for (int t = 0; t < 4; t++)
                v[t] = v[t] * inv * nw[k + t];
        return;
    }
#pragma unroll
    for (int t = 0; t < 4; t++) {
        v[t] = k + t < K ? X[k + t] : 0.0f;
        if (nw)
            v[t] = k + t < K ? v[t] * inv * nw[k + t] : 0.0f;
    }
}

/* Float4 i of X (its four values v, live: i below n4) quantized and stored:
 * the shuffles of its 8-lane 32-block. */
__device__ __forceinline__ void sq_store(const float (&v)[4], int i, bool live, int8_t *xq, float *xd, float *x16)
{
    const int lane = threadIdx.x & 31;
    float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
    for (int o = 1; o < 8; o <<= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127, id = d > 0 ? 127 / amax : 0.0f;
    int sum = 0;
    uint32_t packed = 0;
#pragma unroll
    for (int t = 0; t < 4; t++) {
        const int q = max(-127, min(127, __float2int_rn(v[t] * id)));
        sum += q;
        packed |= (uint32_t)(q & 0xFF) << (8 * t);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (live) {
        ((uint32_t *)xq)[i] = packed;
        if ((lane & 3) == 0)
            x16[i / 4] = d * (float)sum;
        if ((lane & 7) == 0)
            xd[i / 8] = d;
    }
}

__device__ __forceinline__ void stage_q8(int8_t *xq, float *xd, float *x16, const float *__restrict__ X, int64_t K,
                                         int kp, bool vec, const float *__restrict__ nw = nullptr, float inv = 0.0f,
                                         bool batch = true)
{
    const int lane = threadIdx.x & 31, n4 = kp / 4, nb = batch ? SQ_BATCH : 1;
    /* base: the warp's first float4 of a pass (warp-uniform, so the shuffles see every lane) */
    for (int base = threadIdx.x - lane; base < n4; base += nb * blockDim.x) {
        float v[SQ_BATCH][4];
#pragma unroll
        for (int j = 0; j < SQ_BATCH; j++) {
            const int i = base + j * blockDim.x + lane;
            if (j < nb && i < n4)
                sq_load(v[j], X, K, 4 * (int64_t)i, vec, nw, inv);
            else
                v[j][0] = v[j][1] = v[j][2] = v[j][3] = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < SQ_BATCH; j++) {
            const int b = base + j * blockDim.x; /* warp-uniform */
            if (j < nb && b < n4)
                sq_store(v[j], b + lane, b + lane < n4, xq, xd, x16);
        }
    }
}

/* The sum of four dp4a: 16 weights (4 words of 4 bytes) by 16 int8 of X. */
__device__ __forceinline__ int dp16(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, const int8_t *xq)
{
    const int4 x = *(const int4 *)xq;
    int s = __dp4a((int)w0, x.x, 0);
    s = __dp4a((int)w1, x.y, s);
    s = __dp4a((int)w2, x.z, s);
    return __dp4a((int)w3, x.w, s);
}

/* acc += unit u's products with the q8a X: one specialization a type (on:
 * whether the type has it). */
template <class T>
struct q8dot {
    static constexpr bool on = false;
    __device__ static void dot(const typename T::R &, int, const int8_t *, const float *, const float *, float &) {}
};
template <>
struct q8dot<tr_q8_0> {
    static constexpr bool on = true;
    __device__ static void dot(const tr_q8_0::R &r, int u, const int8_t *xq, const float *xd, const float *x16,
                               float &acc)
    {
        const int e = 16 * u;
        const int s = dp16(r.w.x, r.w.y, r.w.z, r.w.w, xq + e);
        acc = fmaf(r.d * xd[e >> 5], (float)s, acc);
    }
};
template <>
struct q8dot<tr_q8_0w> {
    static constexpr bool on = true;
    __device__ static void dot(const tr_q8_0w::R &r, int u, const int8_t *xq, const float *xd, const float *x16,
                               float &acc)
    {
        const int e = 32 * u; /* the weight's block is X's q8a block u */
        const int s = dp16(r.w0.x, r.w0.y, r.w0.z, r.w0.w, xq + e) + dp16(r.w1.x, r.w1.y, r.w1.z, r.w1.w, xq + e + 16);
        acc = fmaf(r.d * xd[u], (float)s, acc);
    }
};
template <>
struct q8dot<tr_q4_0> {
    static constexpr bool on = true;
    __device__ static void dot(const tr_q4_0::R &r, int u, const int8_t *xq, const float *xd, const float *x16,
                               float &acc)
    {
        const float dd = r.d * xd[u]; /* unit u is 32-block u */
#pragma unroll
        for (int g = 0; g < 2; g++) {
            const int e = 32 * u + 16 * g, sh = 4 * g;
            const int s = dp16((r.w.x >> sh) & 0x0F0F0F0Fu, (r.w.y >> sh) & 0x0F0F0F0Fu, (r.w.z >> sh) & 0x0F0F0F0Fu,
                               (r.w.w >> sh) & 0x0F0F0F0Fu, xq + e);
            acc = fmaf(dd, (float)s, acc);
            acc = fmaf(-8.0f * r.d, x16[e >> 4], acc); /* the quants' offset of 8 */
        }
    }
};
template <>
struct q8dot<tr_q4_k> {
    static constexpr bool on = true;
    __device__ static void dot(const tr_q4_k::R &r, int u, const int8_t *xq, const float *xd, const float *x16,
                               float &acc)
    {
#pragma unroll
        for (int g = 0; g < 2; g++) {
            const int e = (int)tr_q4_k::eo(u, g), sh = 4 * g;
            const int s = dp16((r.w.x >> sh) & 0x0F0F0F0Fu, (r.w.y >> sh) & 0x0F0F0F0Fu, (r.w.z >> sh) & 0x0F0F0F0Fu,
                               (r.w.w >> sh) & 0x0F0F0F0Fu, xq + e);
            float a, b;
            tr_q4_k::scale(r, g, a, b);
            acc = fmaf(a * xd[e >> 5], (float)s, acc);
            acc = fmaf(-b, x16[e >> 4], acc);
        }
    }
};

/* ---- the pipelined mat-vec (M = 1, X staged once) ---- */

/* Batch u0 (this lane's units u0, u0 + LW, ... below nu, T::UNR of them) of
 * a row into r; LW: the lanes that share a row (mvp_kernel). */
template <class T, int LW>
__device__ __forceinline__ void mvp_load(typename T::R (&r)[T::UNR], const mview &v, int64_t row, int u0, int nu)
{
#pragma unroll
    for (int j = 0; j < T::UNR; j++)
        if (u0 + LW * j < nu)
            r[j] = T::load(v, row, u0 + LW * j);
}

/* acc += the batch's products with X: with floats in mvg_kernel's order
 * (a row's result is the same bit for bit whichever kernel ran it; LW = 32
 * there); Q8, with the q8a X, which only this kernel has. */
template <class T, bool Q8, int LW, int MT>
__device__ __forceinline__ void mvp_dot(const typename T::R (&r)[T::UNR], const float4 *xs, int kc, int u0, int nu,
                                        int M, float (&acc)[MT])
{
    static_assert(Q8 || MT == 1, "mvp_kernel: rows of X take the q8a X");
#pragma unroll
    for (int j = 0; j < T::UNR; j++) {
        if (u0 + LW * j >= nu)
            break;
        if (Q8) {
            /* X's rows q8_smem(kc) bytes apart; the weight's decode is the
             * same for every row (the compiler keeps one) */
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (m >= M)
                    break;
                const int8_t *xq = (const int8_t *)xs + m * q8_smem(kc);
                const float *xd = (const float *)(xq + kc);
                q8dot<T>::dot(r[j], u0 + LW * j, xq, xd, xd + kc / 32, acc[m]);
            }
        } else {
            unit_dot<T, 1>(r[j], xs, 0, u0 + LW * j, *(float(*)[1])acc);
        }
    }
}

/* What mvp_kernel does with a row's sum (engine/dev.h's hearth_mm_post):
 * store it, add it to Y, or (SWIGLU: gate and up, the group's two weights
 * of one shape) keep the gate row's sum until the up row's and store
 * silu(gate) * up in the gate's Y. */
#define MVP_STORE 0
#define MVP_ADD 1
#define MVP_SWIGLU 2
#define MVP_ROPE 3

/* mvp_kernel's opt bits (mm.cu's mvp_opt; each its switch, for A/B runs) */
#define MVP_SQ_BATCH 1u /* stage_q8 loads X in batches */
#define MVP_NORM1 2u    /* a folded norm's X staged from one read (mvp_stage_norm1) */
#define MVP_EARLY_STEP 4u /* read before the wait: MVP_ROPE's position, slot, angles; a folded norm's weight */

/* MVP_ROPE's arguments: the group is Q, K, V of one decode row (M = 1),
 * rows (2i, 2i + 1) of Q and K a RoPE pair (llama's NORM rotation, no
 * biases, no QK-norm: mm.cu checks), K and V rows stored in the cache as
 * ops.cu's qk_kernel stores them. pos, slot, rope_cs: the step block's
 * row 0 (device memory). */
struct mrope {
    const int64_t *pos = nullptr;
    const int32_t *slot = nullptr;
    const float *rope_cs = nullptr;
    void *kc = nullptr, *vc = nullptr;
    bool f16 = false;
    int64_t n_ctx = 0, n_layer = 0, layer = 0;
    int hd = 0, n_rot = 0;
};

/* A RoPE pair's two products, va (row 2i) and vb (row 2i + 1) of the
 * group, rotated and stored (Y, and K and V rows into the cache): ops.cu's
 * qk_kernel's arithmetic on them, so the fused step gives its values. */
__device__ __forceinline__ void mvp_rope_store(const mgroup &gr, int64_t row, float va, float vb, const mrope &rp)
{
    const mseg sg = seg_at(gr, row);
    const int w = row >= gr.at[2] ? 2 : row >= gr.at[1] ? 1 : 0; /* Q, K, V */
    const int d = (int)(sg.local % rp.hd);
    float ya = va, yb = vb;
    if (w < 2 && d < rp.n_rot) {
        const float c = rp.rope_cs[d], sn = rp.rope_cs[d + 1]; /* pair d / 2: cos, sin at 2 (d / 2) */
        ya = va * c - vb * sn;
        yb = va * sn + vb * c;
    }
    float *y = sg.y + sg.local; /* Q and K rotated in place, V as it is (dev.h's contract) */
    y[0] = ya;
    y[1] = yb;
    const int64_t p = *rp.pos;
    if (w == 0 || p < 0 || p >= rp.n_ctx)
        return;
    const size_t at =
        (((size_t)*rp.slot * (size_t)rp.n_layer + (size_t)rp.layer) * (size_t)rp.n_ctx + (size_t)p) * (size_t)sg.n +
        (size_t)sg.local;
    void *dst = w == 1 ? rp.kc : rp.vc;
    if (rp.f16) {
        ((__half *)dst)[at] = __float2half_rn(ya);
        ((__half *)dst)[at + 1] = __float2half_rn(yb);
    } else {
        ((float *)dst)[at] = ya;
        ((float *)dst)[at + 1] = yb;
    }
}

/* The weight row and output of (virtual) row `row`: with SWIGLU, row 2p is
 * gate row p and 2p + 1 up row p. */
__device__ __forceinline__ mseg mvp_seg(const mgroup &gr, int64_t row, int post)
{
    if (post != MVP_SWIGLU)
        return seg_at(gr, row);
    mseg s = {(row & 1) ? gr.v[1] : gr.v[0], gr.y[0], gr.ldy[0], gr.n[0], row >> 1};
    return s;
}

/* The row sums of the warp's lane groups into Y, for each of the M rows of
 * X (every lane calls it; live: this lane's row is below nr); held: with
 * LW = 32, the gate sums of a SWIGLU pair, whose up row is the warp's
 * next; with LW = 16 the pair is the warp's two halves (gate in lanes
 * 0-15, up in 16-31). The arithmetic is ops.cu's swiglu (g / (1 +
 * expf(-g)) * u) and add, so the fused result is the separate ops' bit for
 * bit. */
template <int LW, int MT>
__device__ __forceinline__ void mvp_store(const mgroup &gr, int64_t row, float (&accs)[MT], int post,
                                          float (&held)[MT], bool live, int M, const mrope &rp)
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int o = LW / 2; o > 0; o >>= 1)
            accs[m] += __shfl_xor_sync(0xffffffffu, accs[m], o);
    bool keep = false; /* a gate row (a RoPE pair's first): its sums wait for the up row's */
    if (post == MVP_SWIGLU || post == MVP_ROPE) {
        keep = !(row & 1);
#pragma unroll
        for (int m = 0; m < MT; m++) {
            if (LW == 32 && keep)
                held[m] = accs[m];
            if (LW < 32) /* the partner group's: the gate's in the up group */
                held[m] = __shfl_xor_sync(0xffffffffu, accs[m], LW);
        }
    }
    if (post == MVP_ROPE && !keep && (threadIdx.x & (LW - 1)) == 0 && live)
        mvp_rope_store(gr, row - 1, held[0], accs[0], rp);
    else if (!keep && (threadIdx.x & (LW - 1)) == 0 && live) {
        const mseg sg = mvp_seg(gr, row, post);
#pragma unroll
        for (int m = 0; m < MT; m++) {
            if (m >= M)
                break;
            float *y = sg.y + m * sg.ldy + sg.local;
            *y = post == MVP_SWIGLU ? held[m] / (1.0f + expf(-held[m])) * accs[m]
                 : post == MVP_ADD  ? *y + accs[m]
                                    : accs[m];
        }
    }
#pragma unroll
    for (int m = 0; m < MT; m++)
        accs[m] = 0.0f;
}

/* The next batch after (row, u): the next units of the row, or the group's
 * next row from its first unit (group-uniform: u - gl is, gl the lane in
 * its group). A group's rows are rstep apart; with SWIGLU and LW = 32 a
 * warp's pairs (2p, 2p + 1) are (pairs). */
__device__ __forceinline__ void mvp_next(int64_t row, int u, int gl, int step, int nu, int64_t rstep, bool pairs,
                                         int64_t &row2, int &u2)
{
    row2 = row;
    u2 = u + step;
    if (u2 - gl >= nu) {
        row2 = !pairs ? row + rstep : (row & 1) ? row - 1 + 2 * rstep : row + 1;
        u2 = gl;
    }
}

/* 1 / sqrt(mean(X^2) + eps) over X's K floats, the whole block of W
 * warps (every thread gets it): mvp_kernel's folded RMS norm. Each block
 * sums X again (8 KiB from L2 for K = 2,048) where a separate norm kernel
 * would sum it once; the order differs from ops.cu's rmsnorm_kernel, so
 * the normed X may differ from it in the last bit. */
/* The block's sum of its threads' ss, as 1 / sqrt(ss / K + eps) for
 * every thread (warp sums, then warp 0's in warp order). */
template <int W>
__device__ __forceinline__ float mvp_rms_finish(float ss, int64_t K, float eps)
{
    __shared__ float red[W];
    __shared__ float inv;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x % 32 == 0)
        red[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
#pragma unroll
        for (int w = 0; w < W; w++)
            t += red[w];
        inv = 1.0f / sqrtf(t / (float)K + eps);
    }
    __syncthreads();
    return inv;
}

template <int W>
__device__ __forceinline__ float mvp_rms_inv(const float *__restrict__ X, int64_t K, float eps, bool vec)
{
    float ss = 0.0f;
    const int64_t K4 = vec ? K / 4 : 0;
    for (int64_t i = threadIdx.x; i < K4; i += blockDim.x) {
        const float4 x = __ldg((const float4 *)X + i);
        ss += x.x * x.x + x.y * x.y + x.z * x.z + x.w * x.w;
    }
    for (int64_t k = 4 * K4 + threadIdx.x; k < K; k += blockDim.x)
        ss += X[k] * X[k];
    return mvp_rms_finish<W>(ss, K, eps);
}

/* Whether mvp_stage_norm1 takes this X (known before any read of it). */
__device__ __forceinline__ bool mvp_norm1_fits(int64_t K, int kp, bool vec, const float *nw)
{
    return vec && K % 4 == 0 && ((uintptr_t)nw & 15) == 0 && kp / 4 <= SQ_BATCH * (int)blockDim.x;
}

/* This thread's float4s of the norm's weight, as mvp_stage_norm1 reads
 * them: constant, so loadable before the PDL wait (MVP_EARLY_STEP). */
__device__ __forceinline__ void mvp_norm1_w(float4 (&w)[SQ_BATCH], const float *__restrict__ nw, int64_t K)
{
    const int K4 = (int)(K / 4);
#pragma unroll
    for (int j = 0; j < SQ_BATCH; j++) {
        const int i = threadIdx.x + j * blockDim.x;
        w[j] = i < K4 ? __ldg((const float4 *)nw + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
}

/* MVP_NORM1: the normed X staged from one read of X. mvp_rms_inv reads X
 * (an L2 round trip), reduces, and the staging then reads it again (a
 * second round trip, after the reduction): here each thread loads its
 * float4s of X and of the norm's weight once (those of mvp_rms_inv's loop,
 * so the sum and inv are its bit for bit), sums, reduces, and stages
 * x * inv * w from its registers. Only where every float4 fits one batch
 * (kp / 4 <= SQ_BATCH threads; K % 4 == 0, X and w 16-byte aligned): else
 * false, nothing done, and the caller stages in two reads. M = 1. w:
 * mvp_norm1_w's, loaded already (have_w: before the PDL wait), else loaded
 * here with X. */
template <int W, bool Q8>
__device__ __forceinline__ bool mvp_stage_norm1(float4 *xs, int kc, const float *__restrict__ X, int64_t K, int kp,
                                                bool vec, const float *__restrict__ nw, float eps,
                                                float4 (&w)[SQ_BATCH], bool have_w)
{
    const int n4 = kp / 4;
    if (!mvp_norm1_fits(K, kp, vec, nw))
        return false;
    const int K4 = (int)(K / 4);
    float4 x[SQ_BATCH];
    if (!have_w)
        mvp_norm1_w(w, nw, K);
#pragma unroll
    for (int j = 0; j < SQ_BATCH; j++) {
        const int i = threadIdx.x + j * blockDim.x;
        x[j] = i < K4 ? __ldg((const float4 *)X + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < SQ_BATCH; j++)
        if (threadIdx.x + j * blockDim.x < K4)
            ss += x[j].x * x[j].x + x[j].y * x[j].y + x[j].z * x[j].z + x[j].w * x[j].w;
    const float inv = mvp_rms_finish<W>(ss, K, eps);
#pragma unroll
    for (int j = 0; j < SQ_BATCH; j++) {
        const int b = threadIdx.x - (threadIdx.x & 31) + j * blockDim.x; /* the warp's first float4: uniform */
        if (b >= n4)
            break;
        const int i = b + (threadIdx.x & 31);
        /* zeros past K */
        const bool in = i < K4;
        const float v[4] = {in ? x[j].x * inv * w[j].x : 0.0f, in ? x[j].y * inv * w[j].y : 0.0f,
                            in ? x[j].z * inv * w[j].z : 0.0f, in ? x[j].w * inv * w[j].w : 0.0f};
        if (Q8) {
            int8_t *xq = (int8_t *)xs;
            float *xd = (float *)(xq + kc);
            sq_store(v, i, i < n4, xq, xd, xd + kc / 32);
        } else if (i < n4) {
            xs[swz(i)] = make_float4(v[0], v[1], v[2], v[3]);
        }
    }
    return true;
}

/* mvg_kernel at M = 1 with the weight stream kept going: each lane group
 * walks its rows' batches (T::UNR units a lane) with the next batch's loads
 * issued before the current one is multiplied, across row ends too, so no
 * warp waits on memory with nothing in flight (mvg_kernel issues a row's
 * loads only after the last row's products and sum). Two register sets of
 * loads: 16 warps an SM. nr: rows (with SWIGLU twice the gate's).
 * LW: lanes a row (32, or 16 where a row has at most 16 UNR units: a
 * 2,048-wide Q4_K row is 64 units, so with a whole warp on it half of each
 * lane's load slots stayed empty; ncu on the H200 read Q4_K's gate/up at
 * 1.05 TB/s with 16 warps an SM). A warp's groups hold consecutive rows and
 * move together (every group's row has the same units), so the loop is
 * warp-uniform; a group past nr computes and stores nothing. W: warps a
 * block (8 or 16: mm.cu's mvp_warps), 16 warps an SM either way. */
template <class T, bool Q8, int LW, int MT, int W>
__global__ void __launch_bounds__(W * 32, 16 / W)
    mvp_kernel(mgroup gr, const float *__restrict__ X, int64_t ldx, int M, int64_t nr, int64_t K, int kc, int post,
               const float *__restrict__ nw, float eps, mrope rp, unsigned opt)
{
    extern __shared__ float4 xs[]; /* (kc/4), swizzled: X whole; Q8: q8_smem(kc) bytes */
    cu_pdl_trigger();
    constexpr int G = 32 / LW; /* rows a warp walks at once */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gl = lane % LW, gi = lane / LW;
    const int64_t kp = gr.v[0].kp;
    const int nu = (int)(kp / T::EPU), step = LW * T::UNR;
    const bool pairs = (post == MVP_SWIGLU || post == MVP_ROPE) && G == 1;
    const int64_t rstep = (int64_t)gridDim.x * W * G;
    const bool vec = ((uintptr_t)X & 15) == 0 && ldx % 4 == 0;
    typename T::R ra[T::UNR], rb[T::UNR];
    /* row: this group's; the loop runs on the warp's first group's (row - gi) */
    int64_t row = ((int64_t)blockIdx.x * W + warp) * (pairs ? 2 : G) + gi;
    int u = gl;
    if (row < nr) {
        const mseg sv = mvp_seg(gr, row, post);
        mvp_load<T, LW>(ra, sv.v, sv.local, u, nu);
    }
    /* MVP_EARLY_STEP: the QK step's position, slot and angles come from the
     * pass's step block, uploaded before its first kernel (which every
     * later kernel starts after), so they are read before the wait, into
     * shared memory (visible after the staging's __syncthreads), not at
     * each row's store, where each was an L2 round trip on the step's
     * critical path */
    __shared__ float s_cs[CU_HEAD_DIM_MAX];
    __shared__ int64_t s_pos;
    __shared__ int32_t s_slot;
    mrope rq = rp;
    if (post == MVP_ROPE && (opt & MVP_EARLY_STEP) && rp.n_rot <= CU_HEAD_DIM_MAX) {
        for (int i = threadIdx.x; i < rp.n_rot; i += blockDim.x)
            s_cs[i] = rp.rope_cs[i];
        if (threadIdx.x == 0) {
            s_pos = *rp.pos;
            s_slot = *rp.slot;
        }
        rq.rope_cs = s_cs;
        rq.pos = &s_pos;
        rq.slot = &s_slot;
    }
    /* and a folded norm's weight (constant) */
    float4 nwv[SQ_BATCH];
    const bool have_w = nw && (opt & MVP_NORM1) && (opt & MVP_EARLY_STEP) && mvp_norm1_fits(K, (int)kp, vec, nw);
    if (have_w)
        mvp_norm1_w(nwv, nw, K);
    cu_pdl_wait();
    /* nw: X is normed first (M = 1; the host sends no norm with rows of X) */
    const bool one = nw && (opt & MVP_NORM1) && mvp_stage_norm1<W, Q8>(xs, kc, X, K, (int)kp, vec, nw, eps, nwv, have_w);
    const float inv = nw && !one ? mvp_rms_inv<W>(X, K, eps, vec) : 0.0f;
    if (!one && Q8) {
        int8_t *xq = (int8_t *)xs;
        float *xd = (float *)(xq + kc);
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (m < M)
                stage_q8(xq + m * q8_smem(kc), xd + m * q8_smem(kc) / 4, xd + m * q8_smem(kc) / 4 + kc / 32,
                         X + m * ldx, K, (int)kp, vec, nw, inv, (opt & MVP_SQ_BATCH) != 0);
    } else if (!one) {
        stage_x<1>(xs, X, ldx, K, 0, (int)kp, kc / 4, vec, nw, inv);
    }
    __syncthreads();
    float acc[MT], held[MT];
#pragma unroll
    for (int m = 0; m < MT; m++)
        acc[m] = held[m] = 0.0f;
    while (row - gi < nr) {
        int64_t row2, row3;
        int u2, u3;
        mvp_next(row, u, gl, step, nu, rstep, pairs, row2, u2);
        if (row2 < nr) {
            const mseg sv = mvp_seg(gr, row2, post);
            mvp_load<T, LW>(rb, sv.v, sv.local, u2, nu);
        }
        if (row < nr)
            mvp_dot<T, Q8, LW, MT>(ra, xs, kc, u, nu, M, acc);
        if (row2 != row)
            mvp_store<LW, MT>(gr, row, acc, post, held, row < nr, M, rq);
        if (row2 - gi >= nr)
            break;
        mvp_next(row2, u2, gl, step, nu, rstep, pairs, row3, u3);
        if (row3 < nr) {
            const mseg sv = mvp_seg(gr, row3, post);
            mvp_load<T, LW>(ra, sv.v, sv.local, u3, nu);
        }
        if (row2 < nr)
            mvp_dot<T, Q8, LW, MT>(rb, xs, kc, u2, nu, M, acc);
        if (row3 != row2)
            mvp_store<LW, MT>(gr, row2, acc, post, held, row2 < nr, M, rq);
        row = row3;
        u = u3;
    }
}

/* ---- the tensor-core kernel ---- */

#define MMA_WARPS 8
#define MMA_TB 2 /* 16-row tiles per warp */

/* The block's shape for trait T and NT tiles of 8 rows of X (host and device). */
template <class T, int NT>
struct mma_cfg {
    static constexpr int WN = NT, WK = MMA_WARPS / NT;
    static constexpr int S = 4 * T::EPU > 128 ? 4 * T::EPU : 128; /* a warp's slice of a chunk */
    static constexpr int UN = S / (4 * T::EPU);                    /* units per lane per slice */
    static constexpr int R = WK * S;                               /* the chunk */
    static constexpr int P = R + 8; /* smem pitch in 16-bit elements: rows 16 bytes apart in bank terms */
    static constexpr int MP = 8 * NT;
    static constexpr int ACC = MMA_TB * NT * 4;
    static constexpr size_t XBYTES = (size_t)MP * P * 2;
    static constexpr size_t RBYTES = (size_t)(WK - 1) * WN * 32 * ACC * 4;
    static constexpr size_t SMEM = XBYTES > RBYTES ? XBYTES : RBYTES;
    static constexpr int ROWS = 16 * MMA_TB * WN; /* rows (in tiles' terms) per block */
};

template <bool BF>
__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
    uint32_t u;
    if (BF) {
        __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi); /* .x = lo, the low half */
        u = *(const uint32_t *)&h;
    } else {
        __half2 h = __floats2half2_rn(lo, hi);
        u = *(const uint32_t *)&h;
    }
    return u;
}

template <bool BF>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    if (BF)
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* X's columns c0 .. c0+R of rows 0 .. MP into xs (pitch P), rounded to
 * f16/bf16; zero at rows >= M and columns >= K. All threads of the block. */
template <bool BF, int MP, int R, int P>
__device__ __forceinline__ void stage_xh(uint16_t *xs, const float *__restrict__ X, int64_t ldx, int M, int64_t K,
                                         int64_t c0, bool vec)
{
    constexpr int F = R / 4;
    for (int i = threadIdx.x; i < MP * F; i += blockDim.x) {
        const int m = i / F, f = i - m * F;
        const int64_t gk = c0 + 4 * f;
        float x0 = 0.0f, x1 = 0.0f, x2 = 0.0f, x3 = 0.0f;
        if (m < M) {
            const float *p = X + m * ldx + gk;
            if (vec && gk + 4 <= K) {
                const float4 x = __ldg((const float4 *)p);
                x0 = x.x;
                x1 = x.y;
                x2 = x.z;
                x3 = x.w;
            } else {
                x0 = gk < K ? p[0] : 0.0f;
                x1 = gk + 1 < K ? p[1] : 0.0f;
                x2 = gk + 2 < K ? p[2] : 0.0f;
                x3 = gk + 3 < K ? p[3] : 0.0f;
            }
        }
        *(uint2 *)(xs + m * P + 4 * f) = make_uint2(pack2<BF>(x0, x1), pack2<BF>(x2, x3));
    }
}

/* The tile of a warp's tb-th 16-row tile, p its index in the grid
 * (block WN + warp's wn): with SWIGLU (a gate and an up weight of one
 * shape, the up's tiles from gr.at[1] on) tile 0 is gate tile p and tile
 * 1 up tile p, so one lane holds both sums of a row; else tiles p TB + tb.
 * Past the group: tiles or more. */
__device__ __forceinline__ int64_t mma_tile(const mgroup &gr, int post, int64_t p, int tb, int64_t tiles)
{
    if (post != MVP_SWIGLU)
        return p * MMA_TB + tb;
    return p < gr.at[1] ? p + tb * gr.at[1] : tiles;
}

/* Y_i (M, N_i) = X (M, K) W_i^T over the group's `tiles` concatenated
 * 16-row tiles; M <= 8 NT. Block b, warp (wn, wk): tiles (b WN + wn) TB +
 * 0 .. TB-1, K slices wk S + j R. OCC: blocks an SM the registers are
 * capped for (mm.cu's mma_launch chooses). */
template <class T, int NT, bool BF, int OCC>
__global__ void __launch_bounds__(MMA_WARPS * 32, OCC)
    mma_kernel(mgroup gr, const float *__restrict__ X, int64_t ldx, int M, int64_t K, int64_t tiles, int cps,
               float *__restrict__ part, int post)
{
    typedef mma_cfg<T, NT> C;
    extern __shared__ uint4 smem4[];
    uint16_t *xs = (uint16_t *)smem4;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wk = warp % C::WK, wn = warp / C::WK;
    const int gq = lane >> 2, tq = lane & 3;
    const int64_t kp = gr.v[0].kp, upr = kp / T::EPU;
    const bool vec = ((uintptr_t)X & 15) == 0 && ldx % 4 == 0;

    /* this warp's tiles and the two rows of each this lane reads */
    mview v[MMA_TB];
    float *y[MMA_TB];
    int64_t ldy[MMA_TB], row[MMA_TB][2];
    bool ok[MMA_TB][2];
#pragma unroll
    for (int tb = 0; tb < MMA_TB; tb++) {
        const int64_t tile = mma_tile(gr, post, (int64_t)blockIdx.x * C::WN + wn, tb, tiles);
        const mseg sg = seg_at(gr, tile < tiles ? tile : 0);
        v[tb] = sg.v;
        y[tb] = sg.y;
        ldy[tb] = sg.ldy;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            row[tb][h] = 16 * sg.local + gq + 8 * h;
            ok[tb][h] = tile < tiles && row[tb][h] < sg.n;
        }
    }

    float acc[MMA_TB][NT][4];
#pragma unroll
    for (int tb = 0; tb < MMA_TB; tb++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[tb][j][i] = 0.0f;

    cu_pdl_trigger();
    bool first = true;
    const int64_t c_end = part ? (int64_t)(blockIdx.y + 1) * cps * C::R : kp;
    for (int64_t c0 = (int64_t)blockIdx.y * cps * C::R; c0 < kp && c0 < c_end; c0 += C::R) {
        const int64_t e0 = c0 + (int64_t)wk * C::S; /* this warp's slice */
        const bool work = e0 < kp;                  /* warp-uniform */
        /* the weight loads go out before X is staged: both latencies overlap */
        typename T::R r[C::UN][MMA_TB][2];
        bool uok[C::UN];
#pragma unroll
        for (int i = 0; i < C::UN; i++) {
            const int64_t u = e0 / T::EPU + 4 * i + tq;
            uok[i] = work && u < upr;
#pragma unroll
            for (int tb = 0; tb < MMA_TB; tb++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    r[i][tb][h] = typename T::R{};
                    if (uok[i] && ok[tb][h])
                        r[i][tb][h] = T::load(v[tb], row[tb][h], u);
                }
        }
        if (first) { /* X and Y are the kernel before's: the first loads went out while it ran */
            cu_pdl_wait();
            first = false;
        }
        __syncthreads(); /* the previous chunk is read */
        stage_xh<BF, C::MP, C::R, C::P>(xs, X, ldx, M, K, c0, vec);
        __syncthreads();
        if (!work)
            continue;
#pragma unroll
        for (int i = 0; i < C::UN; i++) {
            const int64_t u = e0 / T::EPU + 4 * i + tq;
#pragma unroll
            for (int g = 0; g < T::G; g++) {
                /* chunk-local start of this lane's 16 elements (inside the
                 * warp's slice even for a unit past the row: X is zero there) */
                const int e = (int)(T::eo(u, g) - c0);
                uint32_t A[MMA_TB][4][4]; /* [tile][step s][register] */
#pragma unroll
                for (int tb = 0; tb < MMA_TB; tb++) {
                    float w[2][16];
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        float q[16], a, b;
                        T::group(r[i][tb][h], g, q, a, b);
                        if (!(uok[i] && ok[tb][h])) { /* zeros: past the row's end or the weight's rows */
                            a = 0.0f;
                            b = 0.0f;
                        }
#pragma unroll
                        for (int k = 0; k < 16; k++)
                            w[h][k] = fmaf(a, q[k], -b);
                    }
#pragma unroll
                    for (int s = 0; s < 4; s++) {
                        A[tb][s][0] = pack2<BF>(w[0][4 * s], w[0][4 * s + 1]);
                        A[tb][s][1] = pack2<BF>(w[1][4 * s], w[1][4 * s + 1]);
                        A[tb][s][2] = pack2<BF>(w[0][4 * s + 2], w[0][4 * s + 3]);
                        A[tb][s][3] = pack2<BF>(w[1][4 * s + 2], w[1][4 * s + 3]);
                    }
                }
#pragma unroll
                for (int s = 0; s < 4; s++)
#pragma unroll
                    for (int j = 0; j < NT; j++) {
                        const uint2 bx = *(const uint2 *)(xs + (8 * j + gq) * C::P + e + 4 * s);
#pragma unroll
                        for (int tb = 0; tb < MMA_TB; tb++)
                            mma16816<BF>(acc[tb][j], A[tb][s], bx.x, bx.y);
                    }
            }
        }
    }

    /* split-K: warps wk > 0 leave their sums in shared memory, wk = 0 adds
     * them in order and stores */
    if (C::WK > 1) {
        float *red = (float *)smem4;
        __syncthreads(); /* X is read */
        if (wk > 0) {
            float *o = red + (size_t)((wn * (C::WK - 1) + wk - 1) * C::ACC) * 32 + lane;
#pragma unroll
            for (int tb = 0; tb < MMA_TB; tb++)
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        o[((tb * NT + j) * 4 + i) * 32] = acc[tb][j][i];
        }
        __syncthreads();
        if (wk > 0)
            return;
        for (int w = 1; w < C::WK; w++) {
            const float *o = red + (size_t)((wn * (C::WK - 1) + w - 1) * C::ACC) * 32 + lane;
#pragma unroll
            for (int tb = 0; tb < MMA_TB; tb++)
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        acc[tb][j][i] += o[((tb * NT + j) * 4 + i) * 32];
        }
    }
    if (first)
        cu_pdl_wait(); /* a split past the row's end loaded nothing: it still waits before it writes */
    /* c[0] = D[gq][2tq], c[1] = D[gq][2tq+1], c[2], c[3] the same for row gq+8;
     * D's row is the weight row, its column the row of X. Split over K:
     * this block's sums to part[blockIdx.y][m][16 tile + row in tile] */
    if (part) {
        const int64_t tr = 16 * tiles;
        float *pp = part + (int64_t)blockIdx.y * M * tr;
#pragma unroll
        for (int tb = 0; tb < MMA_TB; tb++) {
            const int64_t tile = mma_tile(gr, post, (int64_t)blockIdx.x * C::WN + wn, tb, tiles);
            if (tile >= tiles)
                continue;
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int m = 8 * j + 2 * tq + (i & 1);
                    if (m < M)
                        pp[m * tr + 16 * tile + gq + 8 * (i / 2)] = acc[tb][j][i];
                }
        }
        return;
    }
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int h = i / 2, m = 8 * j + 2 * tq + (i & 1);
            if (post == MVP_SWIGLU) { /* tile 0 the gate's, tile 1 the up's: the same rows */
                if (ok[0][h] && m < M) {
                    const float g = acc[0][j][i];
                    y[0][m * ldy[0] + row[0][h]] = g / (1.0f + expf(-g)) * acc[1][j][i];
                }
                continue;
            }
#pragma unroll
            for (int tb = 0; tb < MMA_TB; tb++)
                if (ok[tb][h] && m < M) {
                    float *o = y[tb] + m * ldy[tb] + row[tb][h];
                    *o = post == MVP_ADD ? *o + acc[tb][j][i] : acc[tb][j][i];
                }
        }
}

/* Y = the sum of mma_kernel's ks splits of part, in split order (the same
 * sums every run: no atomics), through the epilogue: one thread per (row
 * of X, row in tile space; with SWIGLU, of the gate's tiles, whose up
 * sums sit 16 gr.at[1] further). A programmatic dependent of mma_kernel:
 * it waits for it before reading anything. */
__global__ void mma_reduce_kernel(mgroup gr, const float *__restrict__ part, int ks, int M, int64_t tiles, int post)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    const int64_t tr = 16 * tiles, nt = post == MVP_SWIGLU ? gr.at[1] : tiles;
    const int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= M * 16 * nt)
        return;
    const int m = (int)(x / (16 * nt));
    const int64_t t = x - m * 16 * nt, i = m * tr + t; /* t: the row in tile space */
    float sum = part[i];
    for (int k = 1; k < ks; k++)
        sum += part[(int64_t)k * M * tr + i];
    if (post == MVP_SWIGLU) {
        const int64_t iu = i + 16 * gr.at[1];
        float u = part[iu];
        for (int k = 1; k < ks; k++)
            u += part[(int64_t)k * M * tr + iu];
        if (t < gr.n[0])
            gr.y[0][m * gr.ldy[0] + t] = sum / (1.0f + expf(-sum)) * u;
        return;
    }
    const mseg sg = seg_at(gr, t / 16);
    const int64_t row = 16 * sg.local + t % 16;
    if (row < sg.n) {
        float *o = sg.y + m * sg.ldy + row;
        *o = post == MVP_ADD ? *o + sum : sum;
    }
}

#endif

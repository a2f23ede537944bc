/* mm_kernels.cuh: mm.cu's device code: how each weight type is read in the
 * layout mm.cu places it in, the decode mat-vec, and the dequantizer that
 * serves embedding rows and the GEMM's f16 tiles.
 *
 * How: every type is read in "units", one lane's share of a row: one to
 * three 16-byte loads (plus its scales) decoding to G groups of 16
 * contiguous elements, each group an affine map of small exact values:
 * element i = a * q[i] - b. One trait struct per type says where a unit's
 * bytes are (load), how a group decodes (group) and which 16 elements it
 * covers (eo). The mat-vec and the dequantizer are each written once over
 * the traits, so a layout is decoded in one place, as quant_ref.c does.
 *
 * Small integers become floats by the 2^23 trick: the bits 0x4B0000xx are
 * the float 2^23 + xx, so one byte permute and one subtraction (which also
 * removes the type's offset: 8 for Q4_0, 32 for Q6_K, 128 for Q8_0's sign
 * flip) give the exact value. An int-to-float conversion runs at a quarter
 * of the FMA rate on Hopper, too slow for 4-bit weights at full bandwidth.
 *
 * The decode mat-vec (mm_mma.cuh's mvp_kernel) reads X as int8 q8a blocks
 * for Q8_0, Q4_0 and Q4_K instead (dp4a on the raw quants, the CPU's
 * rounding of X); these traits serve it for Q6_K and the half types, and
 * every other kernel for all.
 *
 * Rejected: a layout that interleaves lanes inside one block (needs eight
 * scales per load). Compiled by nvcc only, included by mm.cu alone. */
#ifndef HEARTH_ENGINE_CUDA_MM_KERNELS_CUH
#define HEARTH_ENGINE_CUDA_MM_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

/* One placed weight as the kernels see it. The sub-arrays (row-major, one
 * row of each after another) are per type:
 *   F32, F16, BF16  q: rows of kp elements (K rounded up to 16, zero-padded)
 *   Q8_0            q: int8 (N, K); s: f16 scales (N, K/32)
 *   Q4_0            q: nibbles (N, K/2), a block's 16 bytes as in the file; s: f16 (N, K/32)
 *   Q4_K            q: nibbles (N, K/2) (each block's qs[128]); s: 16 bytes per
 *                   block (N, K/256): d, dmin, scales[12], exactly the block's head
 *   Q6_K            q: ql (N, K/2); s: qh (N, K/4); s2: int8 scales (N, K/16);
 *                   s3: f16 d (N, K/256) */
struct mview {
    const uint8_t *q, *s, *s2, *s3;
    int64_t kp;               /* elements per row as laid out (a multiple of the unit) */
};

__device__ __forceinline__ float bits_to_f(uint32_t w, int byte, float off)
{
    /* byte `byte` of w into 0x4B0000xx (selector: x's byte, two zero bytes of
     * the second operand, then its 0x4B) */
    return __int_as_float((int)__byte_perm(w, 0x4B000000u, 0x7440u | (unsigned)byte)) - off;
}

#define TWO23 8388608.0f

/* 16 elements from 4 words of 4 byte-sized values each, less off. */
__device__ __forceinline__ void bytes16(const uint32_t w[4], float off, float q[16])
{
#pragma unroll
    for (int i = 0; i < 16; i++)
        q[i] = bits_to_f(w[i >> 2], i & 3, off);
}

struct tr_f32 {
    static constexpr int EPU = 16, G = 1;
    static constexpr bool MIN = false;
    static constexpr int UNR = 2; /* units a lane has in flight */
    static constexpr int OCC1 = 4; /* blocks per SM at M = 1 (the register cap without spills) */
    struct R {
        float4 w[4];
    };
    __device__ static R load(const mview &v, int64_t row, int64_t u)
    {
        const float4 *p = (const float4 *)(v.q + (size_t)(row * v.kp + 16 * u) * 4);
        R r;
#pragma unroll
        for (int j = 0; j < 4; j++)
            r.w[j] = __ldg(p + j);
        return r;
    }
    __device__ static void group(const R &r, int g, float q[16], float &a, float &b)
    {
#pragma unroll
        for (int j = 0; j < 4; j++) {
            q[4 * j] = r.w[j].x;
            q[4 * j + 1] = r.w[j].y;
            q[4 * j + 2] = r.w[j].z;
            q[4 * j + 3] = r.w[j].w;
        }
        a = 1.0f;
        b = 0.0f;
    }
    __device__ static int64_t eo(int64_t u, int g) { return 16 * u; }
};

/* F16 and BF16: two 16-byte loads of 8 halves each. */
template <bool BF>
struct tr_half {
    static constexpr int EPU = 16, G = 1;
    static constexpr bool MIN = false;
    static constexpr int UNR = 4; /* units a lane has in flight */
    static constexpr int OCC1 = 4; /* blocks per SM at M = 1 (the register cap without spills) */
    struct R {
        uint4 w[2];
    };
    __device__ static R load(const mview &v, int64_t row, int64_t u)
    {
        const uint4 *p = (const uint4 *)(v.q + (size_t)(row * v.kp + 16 * u) * 2);
        R r;
        r.w[0] = __ldg(p);
        r.w[1] = __ldg(p + 1);
        return r;
    }
    __device__ static float2 pair(uint32_t x)
    {
        if (BF) {
            __nv_bfloat162 h = *(const __nv_bfloat162 *)&x;
            return __bfloat1622float2(h);
        }
        __half2 h = *(const __half2 *)&x;
        return __half22float2(h);
    }
    __device__ static void group(const R &r, int g, float q[16], float &a, float &b)
    {
        const uint32_t w[8] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w, r.w[1].x, r.w[1].y, r.w[1].z, r.w[1].w};
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float2 f = pair(w[j]);
            q[2 * j] = f.x;
            q[2 * j + 1] = f.y;
        }
        a = 1.0f;
        b = 0.0f;
    }
    __device__ static int64_t eo(int64_t u, int g) { return 16 * u; }
};

__device__ __forceinline__ float half_at(const uint8_t *p, int64_t i)
{
    return __half2float(__ldg((const __half *)p + i));
}

/* Q8_0: half a block per unit (16 int8), its block's scale. */
struct tr_q8_0 {
    static constexpr int EPU = 16, G = 1;
    static constexpr bool MIN = false;
    static constexpr int UNR = 4; /* units a lane has in flight */
    static constexpr int OCC1 = 4; /* blocks per SM at M = 1 (the register cap without spills) */
    struct R {
        uint4 w;
        float d;
    };
    __device__ static R load(const mview &v, int64_t row, int64_t u)
    {
        R r;
        r.w = __ldg((const uint4 *)(v.q + row * v.kp + 16 * u));
        r.d = half_at(v.s, row * (v.kp / 32) + u / 2);
        return r;
    }
    __device__ static void group(const R &r, int g, float q[16], float &a, float &b)
    {
        /* flipping the sign bit maps int8 s to s + 128 in 0..255 */
        const uint32_t w[4] = {r.w.x ^ 0x80808080u, r.w.y ^ 0x80808080u, r.w.z ^ 0x80808080u,
                               r.w.w ^ 0x80808080u};
        bytes16(w, TWO23 + 128.0f, q);
        a = r.d;
        b = 0.0f;
    }
    __device__ static int64_t eo(int64_t u, int g) { return 16 * u; }
};

/* Q8_0 a whole block a unit (32 int8, one scale): the decode mat-vec's
 * (mm.cu's mv_q8_wide), where tr_q8_0's units of 16 cost each 16 weights
 * a scale load, a shared-memory load of X's scale and a conversion and FMA
 * of the dot product; here 32 weights share them. A lane's two 16-byte
 * loads are adjacent, a warp's span 1 KiB (the sectors' other halves come
 * from L1, as tr_half's 32 bytes a lane). */
struct tr_q8_0w {
    static constexpr int EPU = 32, G = 2;
    static constexpr bool MIN = false;
    static constexpr int UNR = 2; /* units a lane has in flight: tr_q8_0's bytes */
    static constexpr int OCC1 = 4;
    struct R {
        uint4 w0, w1;
        float d;
    };
    __device__ static R load(const mview &v, int64_t row, int64_t u)
    {
        R r;
        const uint4 *q = (const uint4 *)(v.q + row * v.kp + 32 * u);
        r.w0 = __ldg(q);
        r.w1 = __ldg(q + 1);
        r.d = half_at(v.s, row * (v.kp / 32) + u);
        return r;
    }
    __device__ static void group(const R &r, int g, float q[16], float &a, float &b)
    {
        const uint4 h = g ? r.w1 : r.w0;
        const uint32_t w[4] = {h.x ^ 0x80808080u, h.y ^ 0x80808080u, h.z ^ 0x80808080u, h.w ^ 0x80808080u};
        bytes16(w, TWO23 + 128.0f, q);
        a = r.d;
        b = 0.0f;
    }
    __device__ static int64_t eo(int64_t u, int g) { return 32 * u + 16 * g; }
};

/* Q4_0: one block per unit; byte j holds element j (low) and j + 16 (high). */
struct tr_q4_0 {
    static constexpr int EPU = 32, G = 2;
    static constexpr bool MIN = false;
    static constexpr int UNR = 4; /* units a lane has in flight */
    static constexpr int OCC1 = 4; /* blocks per SM at M = 1 (the register cap without spills) */
    struct R {
        uint4 w;
        float d;
    };
    __device__ static R load(const mview &v, int64_t row, int64_t u)
    {
        R r;
        r.w = __ldg((const uint4 *)(v.q + row * (v.kp / 2) + 16 * u));
        r.d = half_at(v.s, row * (v.kp / 32) + u);
        return r;
    }
    __device__ static void group(const R &r, int g, float q[16], float &a, float &b)
    {
        const int sh = 4 * g;
        const uint32_t w[4] = {(r.w.x >> sh) & 0x0F0F0F0Fu, (r.w.y >> sh) & 0x0F0F0F0Fu,
                               (r.w.z >> sh) & 0x0F0F0F0Fu, (r.w.w >> sh) & 0x0F0F0F0Fu};
        bytes16(w, TWO23 + 8.0f, q);
        a = r.d;
        b = 0.0f;
    }
    __device__ static int64_t eo(int64_t u, int g) { return 32 * u + 16 * g; }
};

/* Q4_K: unit p (0..7) of a super-block is qs[16p .. 16p+15]: with c = p/2,
 * l0 = 16 (p%2), low nibbles are elements 64c + l0 + i (sub-block 2c), high
 * ones 64c + 32 + l0 + i (sub-block 2c + 1). The 6-bit scales and mins are
 * decoded at placement (mm.cu's split_row): sub-block j's scale and min are
 * bytes 2j and 2j + 1 of the block's 16 in v.s, so a unit reads the one
 * word of its two sub-blocks; d and dmin are the block's word in v.s2.
 * Since stop 32: before, the block's 16-byte head (d, dmin, the packed
 * scales) came with every unit and was unpacked there: 9 registers a unit
 * and some twenty instructions (counted from the source) where ncu had the
 * mat-vec issue-bound at 16 warps an SM; now 6 registers and four shifts
 * and masks (mm.cu has the measured gain). */
struct tr_q4_k {
    static constexpr int EPU = 32, G = 2;
    static constexpr bool MIN = true;
    static constexpr int UNR = 4; /* units a lane has in flight */
    static constexpr int OCC1 = 2; /* blocks per SM at M = 1 (the register cap without spills) */
    struct R {
        uint4 w;
        uint32_t s;  /* scale, min of sub-blocks 2c and 2c + 1, a byte each */
        uint32_t dd; /* d, dmin (f16 each) */
    };
    __device__ static R load(const mview &v, int64_t row, int64_t u)
    {
        R r;
        r.w = __ldg((const uint4 *)(v.q + row * (v.kp / 2) + 16 * u));
        r.s = __ldg((const uint32_t *)v.s + row * (v.kp / 64) + u / 2);
        r.dd = __ldg((const uint32_t *)v.s2 + row * (v.kp / 256) + u / 8);
        return r;
    }
    __device__ static void group(const R &r, int g, float q[16], float &a, float &b)
    {
        const int sh = 4 * g;
        const uint32_t w[4] = {(r.w.x >> sh) & 0x0F0F0F0Fu, (r.w.y >> sh) & 0x0F0F0F0Fu,
                               (r.w.z >> sh) & 0x0F0F0F0Fu, (r.w.w >> sh) & 0x0F0F0F0Fu};
        bytes16(w, TWO23, q);
        scale(r, g, a, b);
    }
    /* group g's element i is a q[i] - b */
    __device__ static void scale(const R &r, int g, float &a, float &b)
    {
        const int sc = (int)((r.s >> (16 * g)) & 0xFF), m = (int)((r.s >> (16 * g + 8)) & 0xFF);
        uint32_t dd = r.dd;
        float d = __half2float(__ushort_as_half((unsigned short)(dd & 0xFFFF)));
        float dmin = __half2float(__ushort_as_half((unsigned short)(dd >> 16)));
        a = d * (float)sc;
        b = dmin * (float)m;
    }
    __device__ static int64_t eo(int64_t u, int g)
    {
        return 256 * (u / 8) + 64 * ((u % 8) / 2) + 16 * (u % 2) + 32 * g;
    }
};

/* Q6_K: unit p (0..3) of a super-block: half h = p/2, l0 = 16 (p%2); it
 * reads ql[64h + l0 ..+16], ql[64h + 32 + l0 ..+16] and qh[32h + l0 ..+16],
 * which hold elements 128h + l0 + i + 32g for g = 0..3 (quant.h's order:
 * g 0, 1 the low nibbles of the two ql runs, g 2, 3 their high nibbles; qh
 * bits 2g, 2g+1 on top), sub-block 8h + l0/16 + 2g. */
struct tr_q6_k {
    static constexpr int EPU = 64, G = 4;
    static constexpr bool MIN = false;
    static constexpr int UNR = 2; /* units a lane has in flight */
    static constexpr int OCC1 = 2; /* blocks per SM at M = 1 (the register cap without spills) */
    struct R {
        uint4 l0, l1, h;
        float d;
        int sc; /* the four sub-block scales, one int8 per byte */
    };
    __device__ static R load(const mview &v, int64_t row, int64_t u)
    {
        const int64_t sb = u / 4;
        const int h = (int)((u / 2) % 2), l0 = 16 * (int)(u % 2);
        const uint8_t *ql = v.q + row * (v.kp / 2) + 128 * sb + 64 * h + l0;
        R r;
        r.l0 = __ldg((const uint4 *)ql);
        r.l1 = __ldg((const uint4 *)(ql + 32));
        r.h = __ldg((const uint4 *)(v.s + row * (v.kp / 4) + 64 * sb + 32 * h + l0));
        const uint8_t *sc = v.s2 + row * (v.kp / 16) + 16 * sb + 8 * h + l0 / 16;
        r.sc = (int)((uint32_t)__ldg(sc) | ((uint32_t)__ldg(sc + 2) << 8) | ((uint32_t)__ldg(sc + 4) << 16) |
                     ((uint32_t)__ldg(sc + 6) << 24));
        r.d = half_at(v.s3, row * (v.kp / 256) + sb);
        return r;
    }
    __device__ static void group(const R &r, int g, float q[16], float &a, float &b)
    {
        const uint4 lo = (g & 1) ? r.l1 : r.l0;
        const int sh = g < 2 ? 0 : 4, hs = 2 * g;
        const uint32_t w[4] = {((lo.x >> sh) & 0x0F0F0F0Fu) | (((r.h.x >> hs) & 0x03030303u) << 4),
                               ((lo.y >> sh) & 0x0F0F0F0Fu) | (((r.h.y >> hs) & 0x03030303u) << 4),
                               ((lo.z >> sh) & 0x0F0F0F0Fu) | (((r.h.z >> hs) & 0x03030303u) << 4),
                               ((lo.w >> sh) & 0x0F0F0F0Fu) | (((r.h.w >> hs) & 0x03030303u) << 4)};
        bytes16(w, TWO23 + 32.0f, q);
        a = r.d * (float)(int8_t)((r.sc >> (8 * g)) & 0xFF);
        b = 0.0f;
    }
    __device__ static int64_t eo(int64_t u, int g)
    {
        return 256 * (u / 4) + 128 * ((u / 2) % 2) + 16 * (u % 2) + 32 * g;
    }
};

/* ---- the decode mat-vec ---- */

#define MV_WARPS 8          /* rows per block, one warp each */
#define MV_MAX_M 8          /* X rows one launch takes */
#define MV_SMEM_FLOATS 12288 /* 48 KiB of X per block: the most without an opt-in */
/* Blocks an SM must hold, which caps registers: more warps, more loads in
 * flight. M = 1: the type's OCC1 (64 registers for 4, 128 for 2); M <= 4:
 * 128 registers; past that no cap (it would spill). */
#define MV_MIN_BLOCKS(T, M) ((M) == 1 ? T::OCC1 : (M) <= 4 ? 2 : 1)

/* X's float4 f lives at swz(f): lanes read 16 to 64 contiguous floats each,
 * 64 to 256 bytes apart, which without the XOR would put a quarter-warp's
 * 16-byte reads on the same banks (8-way conflicts for Q4_0). A permutation
 * within each 128-byte row of smem. */
__device__ __forceinline__ int swz(int f)
{
    return f ^ (((f >> 3) ^ (f >> 6)) & 7);
}

/* Elements c0 .. c0+ce of X's M rows into xs (zero at K and past), all
 * threads of the block; float4 loads when vec (rows 16-byte aligned). */
template <int M>
__device__ __forceinline__ void stage_x(float4 *xs, const float *__restrict__ X, int64_t ldx, int64_t K,
                                        int64_t c0, int ce, int kc4, bool vec, const float *__restrict__ nw = nullptr,
                                        float inv = 0.0f)
{
    const int ce4 = ce / 4; /* ce is a multiple of 16 */
#pragma unroll 4
    for (int i = threadIdx.x; i < M * ce4; i += blockDim.x) {
        const int m = i / ce4, f = i - m * ce4;
        const int64_t gk = c0 + 4 * f;
        const float *p = X + m * ldx + gk;
        float4 x;
        if (vec && gk + 4 <= K) {
            x = __ldg((const float4 *)p);
        } else {
            x.x = gk < K ? p[0] : 0.0f;
            x.y = gk + 1 < K ? p[1] : 0.0f;
            x.z = gk + 2 < K ? p[2] : 0.0f;
            x.w = gk + 3 < K ? p[3] : 0.0f;
        }
        if (nw) { /* the RMS norm folded in (M = 1): ops.cu's x * inv * w */
            x.x = gk < K ? x.x * inv * nw[gk] : 0.0f;
            x.y = gk + 1 < K ? x.y * inv * nw[gk + 1] : 0.0f;
            x.z = gk + 2 < K ? x.z * inv * nw[gk + 2] : 0.0f;
            x.w = gk + 3 < K ? x.w * inv * nw[gk + 3] : 0.0f;
        }
        xs[m * kc4 + swz(f)] = x;
    }
}

/* acc[m] += unit u's products with row m of X (xs: M rows of kc4 float4s,
 * swizzled; u chunk-local). The mat-vecs' one inner product: the same
 * order everywhere, so a row's result is the same whichever kernel ran it.
 * For MIN types (Q4_K) the group's X sum is taken for the minimum. */
template <class T, int M>
__device__ __forceinline__ void unit_dot(const typename T::R &r, const float4 *xs, int kc4, int u, float (&acc)[M])
{
#pragma unroll
    for (int g = 0; g < T::G; g++) {
        float q[16], a, b;
        T::group(r, g, q, a, b);
        const int f0 = (int)(T::eo(u, g) >> 2);
#pragma unroll
        for (int m = 0; m < M; m++) {
            float s = 0.0f, sx = 0.0f;
#pragma unroll
            for (int jj = 0; jj < 4; jj++) {
                const float4 x = xs[m * kc4 + swz(f0 + jj)];
                s = fmaf(q[4 * jj], x.x, s);
                s = fmaf(q[4 * jj + 1], x.y, s);
                s = fmaf(q[4 * jj + 2], x.z, s);
                s = fmaf(q[4 * jj + 3], x.w, s);
                if (T::MIN)
                    sx += (x.x + x.y) + (x.z + x.w);
            }
            acc[m] = fmaf(a, s, acc[m]);
            if (T::MIN)
                acc[m] = fmaf(-b, sx, acc[m]);
        }
    }
}

/* Y (M, N) = X (M, K) W^T. Warp w of block b takes rows 8b + w, then
 * 8 (b + gridDim) + w, ... X is staged in shared memory in chunks of kc
 * elements (a multiple of 256, so no unit straddles two), zero past K. When
 * X fits one chunk it is staged once per block and the block walks many row
 * groups (the grid is then a few blocks per SM); otherwise the grid covers
 * the rows once and X is restaged per chunk. Every lane walks its row's
 * units 32 apart, UNR at a time so that many loads are in flight. */
template <class T, int M>
__global__ void __launch_bounds__(MV_WARPS * 32, MV_MIN_BLOCKS(T, M)) mv_kernel(mview v, const float *__restrict__ X, int64_t ldx,
                                                             float *__restrict__ Y, int64_t ldy, int64_t N,
                                                             int64_t K, int kc)
{
    extern __shared__ float4 xs[]; /* (M, kc/4), swizzled */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kc4 = kc / 4;
    const bool once = v.kp <= kc;
    /* 16-byte loads of X when every row start is 16-byte aligned */
    const bool vec = ((uintptr_t)X & 15) == 0 && ldx % 4 == 0;
    bool staged = false;
    for (int64_t rg = (int64_t)blockIdx.x * MV_WARPS; rg < N; rg += (int64_t)gridDim.x * MV_WARPS) {
        const int64_t row = rg + warp;
        const bool live = row < N;
        float acc[M];
#pragma unroll
        for (int m = 0; m < M; m++)
            acc[m] = 0.0f;
        for (int64_t c0 = 0; c0 < v.kp; c0 += kc) {
            const int ce = (int)min((int64_t)kc, v.kp - c0), nu = ce / T::EPU;
            const int64_t ub = c0 / T::EPU;
            /* the first loads go out before X is staged: both latencies overlap */
            typename T::R r[T::UNR];
            int u = lane;
            if (live) {
#pragma unroll
                for (int j = 0; j < T::UNR; j++)
                    if (u + 32 * j < nu)
                        r[j] = T::load(v, row, ub + u + 32 * j);
            }
            if (!(once && staged)) { /* block-uniform */
                __syncthreads(); /* the previous chunk is read */
                stage_x<M>(xs, X, ldx, K, c0, ce, kc4, vec);
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
                        r[j] = T::load(v, row, ub + u + 32 * j);
            }
        }
        if (!live)
            continue;
#pragma unroll
        for (int m = 0; m < M; m++) {
            float s = acc[m];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
                s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0)
                Y[m * ldy + row] = s;
        }
    }
}

/* ---- dequantization: embedding rows (O = float) and GEMM tiles (O = __half) ---- */

template <class O>
__device__ __forceinline__ O to_out(float x);
template <>
__device__ __forceinline__ float to_out<float>(float x)
{
    return x;
}
template <>
__device__ __forceinline__ __half to_out<__half>(float x)
{
    return __float2half_rn(x);
}

/* 16 values to o: 16-byte stores where o is aligned (one store per
 * element would touch a sector per lane). */
__device__ __forceinline__ void put16(float *o, const float *w)
{
    if (((uintptr_t)o & 15) == 0) {
#pragma unroll
        for (int j = 0; j < 4; j++)
            ((float4 *)o)[j] = make_float4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]);
        return;
    }
#pragma unroll
    for (int k = 0; k < 16; k++)
        o[k] = w[k];
}
__device__ __forceinline__ void put16(__half *o, const float *w)
{
    if (((uintptr_t)o & 15) == 0) {
#pragma unroll
        for (int j = 0; j < 2; j++) {
            __half2 h[4];
#pragma unroll
            for (int t = 0; t < 4; t++)
                h[t] = __floats2half2_rn(w[8 * j + 2 * t], w[8 * j + 2 * t + 1]);
            ((uint4 *)o)[j] = *(const uint4 *)h;
        }
        return;
    }
#pragma unroll
    for (int k = 0; k < 16; k++)
        o[k] = __float2half_rn(w[k]);
}

/* out[r] (ldo apart, K wide) = row src(r) of v, r < rows, where src(r) is
 * tok[r] when tok is given, else r0 + r. One thread per unit. DEP: launched
 * as a programmatic dependent (a pass's embedding rows, mm.cu's
 * cu_embed_rows): the next kernel may launch at once, and tok, the kernel
 * before's, is read after the wait. */
template <class T, class O, bool DEP = false>
__global__ void deq_kernel(mview v, const int32_t *__restrict__ tok, int64_t r0, O *__restrict__ out, int64_t ldo,
                           int64_t rows, int64_t K)
{
    if (DEP) {
        cu_pdl_trigger();
        cu_pdl_wait();
    }
    const int64_t upr = v.kp / T::EPU;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * upr)
        return;
    const int64_t r = i / upr, u = i - r * upr;
    const int64_t src = tok ? (int64_t)tok[r] : r0 + r;
    const typename T::R reg = T::load(v, src, u);
#pragma unroll
    for (int g = 0; g < T::G; g++) {
        float q[16], a, b;
        T::group(reg, g, q, a, b);
#pragma unroll
        for (int k = 0; k < 16; k++)
            q[k] = fmaf(a, q[k], -b);
        const int64_t e0 = T::eo(u, g);
        O *o = out + r * ldo + e0;
        if (e0 + 16 <= K) {
            put16(o, q);
        } else {
            for (int k = 0; e0 + k < K; k++) /* the zero padding of an F32/F16/BF16 row's end */
                o[k] = to_out<O>(q[k]);
        }
    }
}

/* deq_kernel for GEMM tiles of rows laid out back to back (out's rows K
 * apart, kp == K): a block's 256 consecutive units (counted over the rows)
 * are whole permutation groups (a K-quant super-block's units, T::eo), so
 * their elements are one contiguous run of out. Each thread decodes its unit
 * into shared memory, then the block writes the run with 16-byte stores a
 * warp lays side by side; the plain kernel's per-unit stores leave each warp
 * instruction touching 64 half-filled sectors, and its index arithmetic is
 * 64-bit division. ncu on the H200 (1.04B Q4_K, pp512): the plain kernel
 * moved 0.6 TB/s, 250 us a layer. units < 2^31. */
#define DEQ_UNITS 256
template <class T>
__global__ void __launch_bounds__(DEQ_UNITS) deq_run_kernel(mview v, int64_t r0, __half *__restrict__ out,
                                                            int units, int upr)
{
    __shared__ __align__(16) __half s[DEQ_UNITS * T::EPU];
    const int i0 = blockIdx.x * DEQ_UNITS, i = i0 + (int)threadIdx.x;
    const int n = units - i0 < DEQ_UNITS ? units - i0 : DEQ_UNITS;
    /* the block's first element: unit i0 starts a permutation group */
    const int64_t base = (int64_t)(i0 / upr) * v.kp + T::eo(i0 % upr, 0);
    if (i < units) {
        const int r = i / upr, u = i - r * upr;
        const typename T::R reg = T::load(v, r0 + r, u);
        const int64_t at = (int64_t)r * v.kp - base;
#pragma unroll
        for (int g = 0; g < T::G; g++) {
            float q[16], a, b;
            T::group(reg, g, q, a, b);
#pragma unroll
            for (int k = 0; k < 16; k++)
                q[k] = fmaf(a, q[k], -b);
            put16(s + (at + T::eo(u, g)), q);
        }
    }
    __syncthreads();
    const uint4 *src = (const uint4 *)s;
    uint4 *dst = (uint4 *)(out + base);
    for (int k = threadIdx.x; k < n * T::EPU / 8; k += DEQ_UNITS)
        dst[k] = src[k];
}

/* Xh (M, K) = X (M, K; ldx) rounded to f16 or bf16. */
template <bool BF>
__global__ void x_round_kernel(const float *__restrict__ X, int64_t ldx, void *Xh, int64_t M, int64_t K)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M * K)
        return;
    const int64_t m = i / K, k = i - m * K;
    const float x = X[m * ldx + k];
    if (BF)
        ((__nv_bfloat16 *)Xh)[i] = __float2bfloat16_rn(x);
    else
        ((__half *)Xh)[i] = __float2half_rn(x);
}

/* x_round_kernel four elements a thread (K and ldx multiples of 4, X
 * 16-byte aligned, M K < 2^31): one 16-byte load, one 8-byte store, 32-bit
 * indices. The plain kernel (an element a thread, a 64-bit division each)
 * moved about 1.35 TB/s at pp512 by ncu (H200, 1.04B Q4_K: 31 us a layer);
 * this one is not measured apart (it landed with deq_run_kernel). */
template <bool BF>
__global__ void x_round4_kernel(const float *__restrict__ X, int ldx, void *Xh, int M, int K)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x, k4 = K / 4;
    if (i >= M * k4)
        return;
    const int m = i / k4, k = 4 * (i - m * k4);
    const float4 x = __ldg((const float4 *)(X + (int64_t)m * ldx + k));
    uint2 o;
    if (BF) {
        __nv_bfloat162 a = __floats2bfloat162_rn(x.x, x.y), b = __floats2bfloat162_rn(x.z, x.w);
        o = make_uint2(*(const uint32_t *)&a, *(const uint32_t *)&b);
    } else {
        __half2 a = __floats2half2_rn(x.x, x.y), b = __floats2half2_rn(x.z, x.w);
        o = make_uint2(*(const uint32_t *)&a, *(const uint32_t *)&b);
    }
    ((uint2 *)Xh)[i] = o;
}

#endif

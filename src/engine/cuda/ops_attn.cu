/* ops_attn.cu: the CUDA backend's two attentions (cuda_int.h, engine/dev.h):
 * attn_cached, a decoder's query rows over their slots' KV cache, and
 * attn_packed, bert's sequences packed without padding.
 *
 * Decode (and any row the prompt path below leaves): one block per (query row, query head), ATT_WARPS (32) warps. The block
 * splits the key length over its warps: warp w takes tiles of ATT_TILE
 * consecutive positions w, w + ATT_WARPS, ... (in tiles), so the warps of a
 * block read neighbouring K rows together. A lane owns dims lane + 32 k of
 * the head (k < DPL, DPL = hd / 32 rounded up to 1, 2, 4 or 8: q and the
 * accumulator stay in registers), a tile's scores are warp-shuffle dot
 * products (the tile's ATT_TILE sums interleaved, for ILP), and each warp
 * keeps an online softmax (max, sum, acc). The warps' partials are merged in
 * shared memory at the end: out = sum_w e^(m_w - M) acc_w / sum_w e^(m_w - M)
 * l_w. That is flash-decoding's split of the KV length, inside one block.
 * K/V are read as stored (f32, or f16 widened per element).
 *
 * Why not the split across blocks with a second merge kernel: it needs a
 * workspace of (rows, heads, chunks, hd + 2) floats that grows with the rows
 * of the step, and cu_ctx has no place for it while nothing may be allocated
 * during a graph capture, which is when a decode step first meets a new row
 * count. A block per (row, head) needs nothing but shared memory, and the
 * grid (rows * n_head) depends on no device data, so one recorded decode
 * pass serves every position: a block reads its row's position and loops to
 * it. The cost: a single-row decode runs n_head blocks (32 on a 7B), a
 * quarter of an H200's SMs, over the whole context; with the GQA group's
 * heads in separate blocks K/V are read once per query head (from L2 after
 * the first). Measured on the H200 (32 heads, 8 kv heads, hd 128, f16
 * cache, one layer): one row at position 4095 72 us, 8191 152 us; 32 rows
 * at 4095 930 us (~600 GB/s counting K/V once). 32 warps a block against 8:
 * a single row 3x faster, 32 rows the same; 8 keys a tile against 4: no
 * gain. Next, if profiles show decode attention-bound: lanes owning
 * contiguous dims (one 8-byte f16 load each, not four 2-byte ones), and a
 * cross-block split with a workspace the context keeps.
 *
 * The prompt path (b->n >= TL_MIN_ROWS = 16; measured on the H200 since,
 * below). Above, a pp512 chunk of a 1B llama (32 heads, 8 kv heads,
 * hd 64) was 16k blocks a layer, each reading its K/V rows alone and each of
 * the 4 heads of a group re-reading them. tiled_kernel: one 256-thread block
 * per (tile of tile_rows consecutive rows, kv head, chunk of the group's
 * heads); its NQ queries (row, head) share every K/V tile, loaded once into
 * shared memory as f32 (KC positions at a time). Scores (NQ, KC) and P V
 * are register-blocked FMA on CUDA cores (a thread: MQ x MK scores, MQ x
 * 4 MD outputs; at 512 tokens attention is ~1 GFLOP a layer, small beside
 * the GEMMs), one warp per query row keeps the online softmax (max, sum,
 * correction) in shared memory. Shapes by padded head DP (static shared
 * memory, <= 48 KiB, so no cudaFuncSetAttribute, nothing to do before a
 * capture): DP 64: NQ 64, KC 32, 40 KiB; 128: 32, 32, 41 KiB; 256: 16, 16,
 * 37 KiB; <= 128 registers, 2 blocks an SM. pp512 at G = 4, hd 64: tiles
 * of 16 rows, 32 x 8 = 256 blocks a layer, K/V read once per tile from L2;
 * expected some tens of us a layer against the per-row kernel's ms (a
 * guess: the causal tail makes the last tiles 32x longer than the first).
 * Rows of a tile may lie in several slots (several prompts, decode rows
 * ahead of a prompt's chunk): the block loops over the distinct slots,
 * masking the other slots' queries. A tile spanning more than TL_SLOTS_MAX
 * (4) slots - a batched decode step, one row per slot - would repeat that
 * loop per row with G useful queries of NQ, so it is the per-row kernel's:
 * both kernels are launched, both count the tile's slots on the device
 * (tile_slots) and each returns from the other's tiles, so the grids depend
 * on b->n alone (the capture rule). Cost of that: n * n_head per-row blocks
 * that only check and return in a prompt pass: 110 us a layer at pp512 with
 * 1,024-thread blocks (ncu, H200, 1.04B; the tiled kernel itself 140 us),
 * so where the tiled kernel runs the per-row blocks have 8 warps
 * (ATT_WARPS_ROWS; 8 against 32 measured the same at 32 rows, above).
 *
 * Tensor cores for the f16 cache at hd <= 128 (attn_mma.cuh, since stop
 * 29): the same profile put tiled_kernel at 140 us a layer, 22% of the
 * prompt pass, for few FLOPs. Measured on the H200 (1.04B, pp512 tok/s, -r
 * 3, one lease; HEARTH_CUDA_ATTN_MMA=0 the FMA kernel): F16 122,712 against
 * 85,726, Q4_K 101,106 against 76,466.
 * tiled_mma_kernel takes the same tiles and slots (tile_rows from its 64
 * queries a block, which the per-row kernel reads from the same args): 4
 * warps of 16 queries, S = Q K^T and O = P V by mma.sync m16n8k16 (f16 in,
 * f32 accumulate) with S, the online softmax and O in registers, K/V tiles
 * copied by cp.async into two stages. The f16 operands keep f32 accuracy by
 * a split: K and V are exact in f16, Q and P are not, so each is hi + lo
 * (two f16 roundings, residue ~2^-22 relative) and each product two mmas
 * (the bound: attn_mma.cuh). tiled_kernel stays for the f32 cache, for hd
 * > 128, and for HEARTH_CUDA_ATTN_MMA=0 (to measure both).
 * Rejected: dynamic shared memory for larger tiles (an attribute per
 * device, set before any capture); wgmma/TMA (a warpgroup's 64-row tiles
 * and descriptors, where mma.sync suffices for ~1 GFLOP a layer).
 *
 * attn_packed first adds the Q/K/V biases in place (a flat kernel over the
 * (n, 3h) rows), then runs the same head over the rows of the query's own
 * sequence, found by a binary search of seq_start on the device (the grid
 * is sized from b->n alone).
 *
 * Rejected for decode: a block per (row, kv head) carrying the whole GQA
 * group (q and acc of G heads in registers: 128 per lane at G = 8,
 * hd = 256). Tried and dropped (stop 42, H100, 1.04B, tg128 two rounds):
 * decode blocks of 8 warps, small enough to share an SM with a mat-vec
 * block (a 1,024-thread block of 63 registers a thread takes an SM's
 * whole register file): Q8_0 -13%, Q4_K -14%, each warp then walking
 * several tiles one after another; the final sum over only the warps that
 * saw a key: no change (1,712 tok/s with it, 1,715 without). In the
 * graph the decode attention costs 4.8% of a Q8_0 step
 * (HEARTH_CUDA_DIAG_NO_ATTN). */
#include "engine/cuda/cuda_int.h"

#include <cuda_fp16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Warps of a per-row block: 32 for decode; 8 in a prompt-shaped step
 * (rows >= TL_MIN_ROWS), where the tiled kernel takes most rows and the
 * per-row blocks of its tiles only check and return: at pp512 on the H200
 * (1.04B) 16,384 such 1,024-thread blocks cost 110 us a layer (ncu), as
 * much as the tiled attention itself; 8 warps served 32 rows as fast as 32
 * did (measured, below). */
static constexpr int ATT_WARPS = 32, ATT_WARPS_ROWS = 8, ATT_TILE = 4;

__device__ static inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static inline float ldf(const float *p, int64_t i)
{
    return p[i];
}
__device__ static inline float ldf(const __half *p, int64_t i)
{
    return __half2float(p[i]);
}

/* The K (and, VPRE, V) elements of tile `base` at positions [lo, hi) into
 * kv, vv (others untouched). */
template <typename T, int DPL, bool VPRE>
__device__ static inline void attend_load(float (&kv)[ATT_TILE][DPL], float (&vv)[VPRE ? ATT_TILE : 1][DPL],
                                          const T *K, const T *V, int64_t stride, int64_t base, int64_t lo,
                                          int64_t hi, int hd, int lane)
{
#pragma unroll
    for (int i = 0; i < ATT_TILE; i++)
#pragma unroll
        for (int k = 0; k < DPL; k++) {
            int d = lane + 32 * k;
            if (base + i < lo)
                continue;
            bool in = base + i < hi && d < hd;
            kv[i][k] = in ? ldf(K + (base + i) * stride, d) : 0.0f;
            if (VPRE)
                vv[VPRE ? i : 0][k] = in ? ldf(V + (base + i) * stride, d) : 0.0f;
        }
}

/* out (hd) = softmax(q K^T * scale) V over count keys: row j of K at K + j *
 * stride, of V likewise. Called by the whole block (ATT_WARPS warps). A
 * tile's V rows are loaded with its K rows (VPRE, heads up to 128: the
 * registers of 1,024-thread blocks allow it), so a short context pays one
 * memory latency, not two; the warps' partials are merged with one expf
 * per warp (warp 0 weighs them), not 32 per thread. pre: positions below
 * it hold K/V the kernel before did not write (a single row's decode:
 * every position but its own), so the warp's first tile of them is loaded
 * before cu_pdl_wait(), which attend calls; the rest, q included, after
 * it. */
template <typename T, int DPL, int W = ATT_WARPS>
__device__ static void attend(float *out, const float *q, const T *K, const T *V, int64_t stride, int64_t count,
                              int hd, float scale, int64_t pre)
{
    static_assert(W <= 32, "attend: warp 0 weighs the warps' partials, one a lane");
    constexpr bool VPRE = DPL <= 4;
    __shared__ float s_m[W], s_l[W], s_f[W], s_L, s_acc[W][CU_HEAD_DIM_MAX];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int64_t first = (int64_t)w * ATT_TILE;
    float kv[ATT_TILE][DPL], vv[VPRE ? ATT_TILE : 1][DPL];
    if (pre > 0)
        attend_load<T, DPL, VPRE>(kv, vv, K, V, stride, first, 0, pre < count ? pre : count, hd, lane);
    cu_pdl_wait(); /* q and position pre on are the kernel before's */
    float qv[DPL], acc[DPL];
    for (int k = 0; k < DPL; k++) {
        int d = lane + 32 * k;
        qv[k] = d < hd ? q[d] : 0.0f;
        acc[k] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int64_t base = first; base < count; base += (int64_t)W * ATT_TILE) {
        float s[ATT_TILE];
        attend_load<T, DPL, VPRE>(kv, vv, K, V, stride, base, base == first && pre > 0 ? pre : 0, count, hd, lane);
#pragma unroll
        for (int i = 0; i < ATT_TILE; i++) {
            float dot = 0.0f;
#pragma unroll
            for (int k = 0; k < DPL; k++)
                dot += qv[k] * kv[i][k];
            s[i] = dot;
        }
        float mx = m;
#pragma unroll
        for (int i = 0; i < ATT_TILE; i++) {
            s[i] = warp_sum(s[i]) * scale;
            if (base + i >= count)
                s[i] = -INFINITY; /* its weight is e^-inf = 0 */
            mx = fmaxf(mx, s[i]);
        }
        /* mx is finite: position base is in range. e^(m - mx) is 0 on the
         * first tile (m = -inf). */
        float corr = expf(m - mx);
        l *= corr;
        for (int k = 0; k < DPL; k++)
            acc[k] *= corr;
#pragma unroll
        for (int i = 0; i < ATT_TILE; i++) {
            if (base + i >= count)
                break;
            float p = expf(s[i] - mx);
            l += p;
            const T *vr = V + (base + i) * stride;
#pragma unroll
            for (int k = 0; k < DPL; k++) {
                int d = lane + 32 * k;
                if (d < hd)
                    acc[k] += p * (VPRE ? vv[VPRE ? i : 0][k] : ldf(vr, d));
            }
        }
        m = mx;
    }
    if (lane == 0) {
        s_m[w] = m;
        s_l[w] = l;
    }
    for (int k = 0; k < DPL; k++) {
        int d = lane + 32 * k;
        if (d < hd)
            s_acc[w][d] = acc[k];
    }
    __syncthreads();
    if (w == 0) { /* lane i < W weighs warp i's partial */
        float mi = lane < W ? s_m[lane] : -INFINITY, li = lane < W ? s_l[lane] : 0.0f, M = mi;
        for (int o = 16; o > 0; o >>= 1)
            M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float f = li > 0.0f ? expf(mi - M) : 0.0f; /* a warp that saw no key has m = -inf */
        if (lane < W)
            s_f[lane] = f;
        float L = warp_sum(f * li);
        if (lane == 0)
            s_L = L;
    }
    __syncthreads();
    float L = s_L;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int i = 0; i < W; i++)
            o += s_f[i] * s_acc[i][d];
        out[d] = L > 0.0f ? o / L : 0.0f; /* no key (a bad position): zeros, not NaN */
    }
}

/* ---- attention over the cache ---- */

typedef struct cached_args {
    float *out;
    const float *Q;
    const void *kc, *vc;
    int64_t n_ctx, n_layer, layer, kv_dim;
    const int64_t *pos;
    const int32_t *slot;
    int n_head, group, hd;
    float scale;
    int64_t n;          /* rows of the step */
    int tile_rows;      /* rows per tile of the tiled path; 0: the per-row kernel takes every row */
    int tile_heads;     /* query heads of one GQA group per tiled block */
    bool vec;           /* K/V rows load 4 elements at a time (hd % 4 == 0, aligned cache) */
    bool vec8;          /* tiled_mma_kernel's: f16 K/V rows copy 16 bytes at a time (hd % 8 == 0, 16-byte aligned) */
    bool early;         /* one row, a dependent: pos, slot and the older K/V rows read before the wait (attn_early) */
} cached_args;

/* ---- the prompt path: tiles of rows sharing K/V ---- */

/* TL_SLOTS_MAX: a tile whose rows span more slots goes to the per-row
 * kernel (a decode step's rows, one per slot). TL_ROWS_MAX: the largest
 * tile (64 queries: tiled_kernel's at hd <= 64, tiled_mma_kernel's). */
static constexpr int TL_THREADS = 256, TL_SLOTS_MAX = 4, TL_ROWS_MAX = 64, TL_MIN_ROWS = 16;

/* Called by the whole block (at least TL_ROWS_MAX threads): the slots of
 * the rows r0 .. r0 + rows - 1 into s_sl, whether each is its slot's first
 * row in the tile into s_first; returns the distinct slots. Both kernels
 * decide with it which of them takes a tile, so they agree. */
__device__ static int tile_slots(const int32_t *slot, int64_t r0, int rows, int32_t *s_sl, int *s_first)
{
    int i = threadIdx.x;
    if (i < rows)
        s_sl[i] = slot[r0 + i];
    __syncthreads();
    int first = 0;
    if (i < rows) {
        first = 1;
        for (int j = 0; j < i; j++)
            if (s_sl[j] == s_sl[i]) {
                first = 0;
                break;
            }
        s_first[i] = first;
    }
    return __syncthreads_count(first);
}

/* Per padded head size DP: NQ queries ((row, head) pairs) per block and KC
 * keys per tile, so that Q (NQ, DP), a K or V tile (KC, DP) and the scores
 * (NQ, KC) fit the 48 KiB of static shared memory. */
template <int DP> struct tl_shape;
template <> struct tl_shape<64> {
    static constexpr int NQ = 64, KC = 32;
};
template <> struct tl_shape<128> {
    static constexpr int NQ = 32, KC = 32;
};
template <> struct tl_shape<256> {
    static constexpr int NQ = 16, KC = 16;
};

__device__ static inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ static inline float4 ld4(const float *p)
{
    return *(const float4 *)p;
}
__device__ static inline float4 ld4(const __half *p)
{
    uint2 u = *(const uint2 *)p;
    float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}

/* dst (KC, DP + 4) f32 = rows kb .. kb + KC - 1 of src (row j at src + j *
 * stride, hd wide), zeros past hd and at rows >= end (never read: a row
 * past every query's position may hold anything). */
template <typename T, int DP, int KC>
__device__ static void load_tile(float *dst, const T *src, int64_t stride, int64_t kb, int64_t end, int hd, bool vec)
{
    constexpr int QS = DP + 4;
    if (vec) {
        for (int e = threadIdx.x; e < KC * DP / 4; e += TL_THREADS) {
            int j = e / (DP / 4), d = (e % (DP / 4)) * 4;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (kb + j < end && d < hd)
                v = ld4(src + (kb + j) * stride + d);
            *(float4 *)&dst[j * QS + d] = v;
        }
    } else {
        for (int e = threadIdx.x; e < KC * DP; e += TL_THREADS) {
            int j = e / DP, d = e % DP;
            dst[j * QS + d] = kb + j < end && d < hd ? ldf(src + (kb + j) * stride, d) : 0.0f;
        }
    }
}

/* Block (tile t, kv head, head chunk z): the queries (row r0 + q / tile_heads,
 * head kvh * group + z * tile_heads + q % tile_heads), q < NQ, over their
 * rows' positions. Threads as a 16 x 16 grid (tq, tk): thread (tq, tk)
 * scores queries tq + 16 i against keys tk + 16 j of a tile, and owns the
 * output of queries tq + 16 i at dims 4 tk + 64 jj .. + 3. For each
 * distinct slot of the tile's rows, over key tiles up to the largest count
 * of its rows: K tile to shared, scores (masked: another slot's query, a
 * key past the query's position), V tile to shared while one warp per
 * query row runs the online softmax (max, sum, correction in shared), then
 * acc = acc * corr + P V in registers. Numerics as attend's: f32 dots,
 * expf, one division at the end. */
template <typename T, int DP> __global__ static void __launch_bounds__(TL_THREADS, 2) tiled_kernel(cached_args a)
{
    constexpr int NQ = tl_shape<DP>::NQ, KC = tl_shape<DP>::KC, QS = DP + 4, SS = (KC + 31) / 32 * 32 + 16;
    constexpr int MQ = NQ / 16, MK = KC / 16, MD = DP / 64;
    static_assert(NQ % 16 == 0 && KC % 16 == 0 && KC <= 32 && NQ <= TL_ROWS_MAX && DP % 64 == 0, "tile shape");
    __shared__ __align__(16) float s_q[NQ * QS];
    __shared__ __align__(16) float s_kv[KC * QS];
    __shared__ float s_s[NQ * SS], s_m[NQ], s_l[NQ], s_c[NQ];
    __shared__ int64_t s_cnt[TL_ROWS_MAX];
    __shared__ int32_t s_sl[TL_ROWS_MAX];
    __shared__ int s_first[TL_ROWS_MAX];

    int tid = threadIdx.x, tq = tid >> 4, tk = tid & 15, lane = tid & 31, warp = tid >> 5, hd = a.hd;
    int kvh = (int)blockIdx.y;
    int64_t r0 = (int64_t)blockIdx.x * a.tile_rows;
    int rows = (int)(a.n - r0 < a.tile_rows ? a.n - r0 : a.tile_rows);
    if (tile_slots(a.slot, r0, rows, s_sl, s_first) > TL_SLOTS_MAX)
        return; /* the per-row kernel's */
    if (tid < rows) {
        int64_t c = a.pos[r0 + tid] + 1;
        s_cnt[tid] = c < 0 ? 0 : c > a.n_ctx ? a.n_ctx : c;
    }
    int64_t qd = (int64_t)a.n_head * hd;
    int h0 = kvh * a.group + (int)blockIdx.z * a.tile_heads; /* the chunk's first query head */
    /* query q: row q / tile_heads (of the tile), head h0 + q % tile_heads;
     * -1 when past the tile's rows or the group's heads */
    for (int e = tid; e < NQ * DP; e += TL_THREADS) {
        int q = e / DP, d = e % DP, ri = q / a.tile_heads, hg = (int)blockIdx.z * a.tile_heads + q % a.tile_heads;
        float v = 0.0f;
        if (ri < rows && hg < a.group && d < hd)
            v = a.Q[(r0 + ri) * qd + (int64_t)(h0 + q % a.tile_heads) * hd + d];
        s_q[q * QS + d] = v;
    }
    for (int q = tid; q < NQ; q += TL_THREADS) {
        s_m[q] = -INFINITY;
        s_l[q] = 0.0f;
    }
    int qrow[MQ];
    for (int i = 0; i < MQ; i++) {
        int q = tq + 16 * i, ri = q / a.tile_heads, hg = (int)blockIdx.z * a.tile_heads + q % a.tile_heads;
        qrow[i] = ri < rows && hg < a.group ? ri : -1;
    }
    float acc[MQ][MD][4];
    for (int i = 0; i < MQ; i++)
        for (int jj = 0; jj < MD; jj++)
            for (int c = 0; c < 4; c++)
                acc[i][jj][c] = 0.0f;
    __syncthreads();

    for (int si = 0; si < rows; si++) {
        if (!s_first[si])
            continue; /* uniform: shared memory every thread reads alike */
        int32_t sl = s_sl[si];
        int64_t end = 0, qcnt[MQ];
        for (int j = si; j < rows; j++)
            if (s_sl[j] == sl && s_cnt[j] > end)
                end = s_cnt[j];
        for (int i = 0; i < MQ; i++)
            qcnt[i] = qrow[i] >= 0 && s_sl[qrow[i]] == sl ? s_cnt[qrow[i]] : 0;
        size_t blk = ((size_t)sl * (size_t)a.n_layer + (size_t)a.layer) * (size_t)a.n_ctx * (size_t)a.kv_dim +
                     (size_t)kvh * hd;
        const T *K = (const T *)a.kc + blk, *V = (const T *)a.vc + blk;
        for (int64_t kb = 0; kb < end; kb += KC) {
            load_tile<T, DP, KC>(s_kv, K, a.kv_dim, kb, end, hd, a.vec);
            __syncthreads(); /* K tile in */
            float sc[MQ][MK];
            for (int i = 0; i < MQ; i++)
                for (int j = 0; j < MK; j++)
                    sc[i][j] = 0.0f;
#pragma unroll 1
            for (int d = 0; d < DP; d += 4) {
                float4 qv[MQ], kv[MK];
                for (int i = 0; i < MQ; i++)
                    qv[i] = *(const float4 *)&s_q[(tq + 16 * i) * QS + d];
                for (int j = 0; j < MK; j++)
                    kv[j] = *(const float4 *)&s_kv[(tk + 16 * j) * QS + d];
                for (int i = 0; i < MQ; i++)
                    for (int j = 0; j < MK; j++) {
                        sc[i][j] = fmaf(qv[i].x, kv[j].x, sc[i][j]);
                        sc[i][j] = fmaf(qv[i].y, kv[j].y, sc[i][j]);
                        sc[i][j] = fmaf(qv[i].z, kv[j].z, sc[i][j]);
                        sc[i][j] = fmaf(qv[i].w, kv[j].w, sc[i][j]);
                    }
            }
            for (int i = 0; i < MQ; i++)
                for (int j = 0; j < MK; j++)
                    s_s[(tq + 16 * i) * SS + tk + 16 * j] = kb + tk + 16 * j < qcnt[i] ? sc[i][j] * a.scale : -INFINITY;
            __syncthreads(); /* scores in, K tile read */
            load_tile<T, DP, KC>(s_kv, V, a.kv_dim, kb, end, hd, a.vec);
            for (int q = warp; q < NQ; q += TL_THREADS / 32) {
                float s = lane < KC ? s_s[q * SS + lane] : -INFINITY;
                float mo = s_m[q], mn = fmaxf(mo, warp_max(s)), corr = 1.0f, p = 0.0f;
                if (mn != -INFINITY) { /* else no key of this query yet: nothing changes */
                    corr = expf(mo - mn);  /* 0 on its first keys (mo = -inf) */
                    p = expf(s - mn);      /* 0 at a masked key */
                }
                float sum = warp_sum(p);
                if (lane < KC)
                    s_s[q * SS + lane] = p;
                if (lane == 0) {
                    s_m[q] = mn;
                    s_l[q] = s_l[q] * corr + sum;
                    s_c[q] = corr;
                }
            }
            __syncthreads(); /* V tile, P and corrections in */
            for (int i = 0; i < MQ; i++) {
                float c = s_c[tq + 16 * i];
                for (int jj = 0; jj < MD; jj++)
                    for (int e = 0; e < 4; e++)
                        acc[i][jj][e] *= c;
            }
#pragma unroll 2
            for (int j = 0; j < KC; j++) {
                float p[MQ];
                for (int i = 0; i < MQ; i++)
                    p[i] = s_s[(tq + 16 * i) * SS + j];
                for (int jj = 0; jj < MD; jj++) {
                    float4 v = *(const float4 *)&s_kv[j * QS + 4 * tk + 64 * jj];
                    for (int i = 0; i < MQ; i++) {
                        acc[i][jj][0] = fmaf(p[i], v.x, acc[i][jj][0]);
                        acc[i][jj][1] = fmaf(p[i], v.y, acc[i][jj][1]);
                        acc[i][jj][2] = fmaf(p[i], v.z, acc[i][jj][2]);
                        acc[i][jj][3] = fmaf(p[i], v.w, acc[i][jj][3]);
                    }
                }
            }
            __syncthreads(); /* V tile and P read: the next K tile may land */
        }
    }
    for (int i = 0; i < MQ; i++) {
        if (qrow[i] < 0)
            continue;
        int q = tq + 16 * i;
        float L = s_l[q];
        float *o = a.out + (r0 + qrow[i]) * qd + (int64_t)(h0 + q % a.tile_heads) * hd;
        for (int jj = 0; jj < MD; jj++)
            for (int e = 0; e < 4; e++) {
                int d = 4 * tk + 64 * jj + e;
                if (d < hd)
                    o[d] = L > 0.0f ? acc[i][jj][e] / L : 0.0f; /* no key (a bad position): zeros, not NaN */
            }
    }
}

#include "engine/cuda/attn_mma.cuh"

/* Block (r, h): query head h of row r over positions 0 .. pos[r] of its
 * slot's block in layer; kv head h / group. */
template <typename T, int DPL, int W> __global__ static void __launch_bounds__(W * 32) cached_kernel(cached_args a)
{
    if (!a.early)
        cu_pdl_wait(); /* launched as a dependent (cu_launch) */
    cu_pdl_trigger(); /* Wo's mat-vec may start streaming its weights */
    int64_t r = blockIdx.x / a.n_head;
    int h = (int)(blockIdx.x % a.n_head), hd = a.hd;
    if (a.tile_rows) {
        __shared__ int32_t s_sl[TL_ROWS_MAX];
        __shared__ int s_first[TL_ROWS_MAX];
        int64_t r0 = r / a.tile_rows * a.tile_rows;
        int rows = (int)(a.n - r0 < a.tile_rows ? a.n - r0 : a.tile_rows);
        if (tile_slots(a.slot, r0, rows, s_sl, s_first) <= TL_SLOTS_MAX)
            return; /* the tiled kernel's */
    }
    int64_t count = a.pos[r] + 1;
    count = count < 0 ? 0 : count > a.n_ctx ? a.n_ctx : count;
    size_t blk = ((size_t)a.slot[r] * (size_t)a.n_layer + (size_t)a.layer) * (size_t)a.n_ctx * (size_t)a.kv_dim +
                 (size_t)(h / a.group) * hd;
    int64_t qd = (int64_t)a.n_head * hd;
    attend<T, DPL, W>(a.out + r * qd + (int64_t)h * hd, a.Q + r * qd + (int64_t)h * hd, (const T *)a.kc + blk,
                      (const T *)a.vc + blk, a.kv_dim, count, hd, a.scale, a.early ? count - 1 : 0);
}

template <typename T, int W> static cudaError_t launch_cached_w(const cached_args &a, int64_t blocks, cudaStream_t s)
{
    dim3 g((unsigned)blocks), t(W * 32);
    const bool pdl = cu_pdl_rows(a.n); /* decode of one sequence: cu_pdl_rows */
    if (a.hd <= 32)
        return cu_launch(pdl, cached_kernel<T, 1, W>, g, t, 0, s, a);
    if (a.hd <= 64)
        return cu_launch(pdl, cached_kernel<T, 2, W>, g, t, 0, s, a);
    if (a.hd <= 128)
        return cu_launch(pdl, cached_kernel<T, 4, W>, g, t, 0, s, a);
    return cu_launch(pdl, cached_kernel<T, 8, W>, g, t, 0, s, a);
}

/* 8 warps a block where the tiled kernel runs beside (ATT_WARPS_ROWS). */
template <typename T> static cudaError_t launch_cached(const cached_args &a, int64_t blocks, cudaStream_t s)
{
    return a.tile_rows ? launch_cached_w<T, ATT_WARPS_ROWS>(a, blocks, s) : launch_cached_w<T, ATT_WARPS>(a, blocks, s);
}

/* The tiled kernel's padded head size and queries per block for hd. */
static int tiled_dp(int hd)
{
    return hd <= 64 ? 64 : hd <= 128 ? 128 : 256;
}
static int tiled_nq(int hd)
{
    int dp = tiled_dp(hd);
    return dp == 64 ? tl_shape<64>::NQ : dp == 128 ? tl_shape<128>::NQ : tl_shape<256>::NQ;
}

/* Either tiled kernel's grid: (tiles of rows, kv heads, head chunks). */
static dim3 tiled_grid(const cached_args &a, int64_t n_head_kv)
{
    return dim3((unsigned)((a.n + a.tile_rows - 1) / a.tile_rows), (unsigned)n_head_kv,
                (unsigned)((a.group + a.tile_heads - 1) / a.tile_heads));
}

template <typename T> static void launch_tiled(const cached_args &a, int64_t n_head_kv, cudaStream_t s)
{
    dim3 g = tiled_grid(a, n_head_kv), t(TL_THREADS);
    int dp = tiled_dp(a.hd);
    if (dp == 64)
        tiled_kernel<T, 64><<<g, t, 0, s>>>(a);
    else if (dp == 128)
        tiled_kernel<T, 128><<<g, t, 0, s>>>(a);
    else
        tiled_kernel<T, 256><<<g, t, 0, s>>>(a);
}

/* tiled_mma_kernel at hd <= 128 (padded to 64 or 128). */
static void launch_tiled_mma(const cached_args &a, int64_t n_head_kv, cudaStream_t s)
{
    dim3 g = tiled_grid(a, n_head_kv), t(AM_WARPS * 32);
    if (a.hd <= 64)
        tiled_mma_kernel<64><<<g, t, 0, s>>>(a);
    else
        tiled_mma_kernel<128><<<g, t, 0, s>>>(a);
}

/* HEARTH_CUDA_ATTN_MMA=0: the f16 cache's prompt path runs tiled_kernel
 * (FMA) where tiled_mma_kernel would (read once), for measuring both. */
static bool attn_mma_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_ATTN_MMA", "0");
}

/* HEARTH_CUDA_ATTN_EARLY=0: a single row's decode attention reads
 * everything after its PDL wait. By default it reads what the kernel
 * before cannot have written first: the row's position and slot (the
 * pass's step block, uploaded before its first kernel, which every later
 * kernel starts after) and the warp's first tile of K/V rows below the
 * row's own position (written by earlier passes), then waits, then reads q
 * and its own K/V row, which the Q/K/V mat-vec just stored. The critical
 * path of the step loses those loads' latency once a layer. With
 * HEARTH_CUDA_STEP_EARLY (mm.cu), tg128 on the H100 (1.04B, two rounds,
 * both off against both on): Q8_0 1,401 against 1,554, Q4_K 1,760 against
 * 2,051 tok/s (bench/RESULTS.md, stop 41). Read once. */
static bool attn_early_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_ATTN_EARLY", "0");
}

/* HEARTH_CUDA_DIAG_NO_ATTN=1, a diagnostic that makes wrong text: a
 * single row's decode attention is not launched (the Wo mat-vec reads what
 * the buffer held), so a decode step's time with and without it says what
 * the attention costs where it runs, between its mat-vecs, which ncu's
 * serialized kernel times cannot. Said on stderr once. Read once. */
static bool attn_skipped(void)
{
    static int seen = -1;
    bool skip = cu_env_is(&seen, "HEARTH_CUDA_DIAG_NO_ATTN", "1");
    static bool said;
    if (skip && !said) {
        said = true;
        fprintf(stderr, "cuda: HEARTH_CUDA_DIAG_NO_ATTN=1: decode attention is skipped, the text is wrong\n");
    }
    return skip;
}

int cu_attn_cached(cu_ctx *c, float *out, const float *Q, const hearth_dev_kv *kv, int64_t layer,
                   const hearth_batch *b, int64_t n_head, int64_t n_head_kv, int64_t hd, float scale)
{
    if (kv->type != HEARTH_F32 && kv->type != HEARTH_F16)
        return HEARTH_EUNSUPPORTED;
    if (n_head < 1 || n_head_kv < 1 || n_head % n_head_kv || hd < 1 || hd > CU_HEAD_DIM_MAX ||
        kv->kv_dim != n_head_kv * hd || layer < 0 || layer >= kv->n_layer || n_head > 65536)
        return HEARTH_EINVAL;
    if (b->n == 0 || (b->n == 1 && attn_skipped()))
        return 0;
    cached_args a = {out,    Q,      kv->k,   kv->v,      kv->n_ctx,          kv->n_layer, layer,
                     kv->kv_dim, b->pos, b->slot, (int)n_head, (int)(n_head / n_head_kv), (int)hd, scale,
                     b->n,   0,      0,       false,      false,       false};
    a.early = b->n == 1 && cu_pdl_rows(1) && attn_early_on();
    /* A prompt's rows: tiles of consecutive rows spanning at most
     * TL_SLOTS_MAX slots go to the tiled kernel, the others (a decode
     * step's rows, one per slot) stay with the per-row kernel; which is
     * which is device data, so both are launched and each returns from the
     * other's tiles. Decode-shaped calls launch the per-row kernel alone. */
    bool tiled = b->n >= TL_MIN_ROWS && n_head_kv <= 65535;
    if (tiled) {
        /* tile_rows follows the kernel's queries per block; the per-row
         * kernel reads it from a to find the same tiles */
        bool mma = kv->type == HEARTH_F16 && hd <= 128 && attn_mma_on();
        int nq = mma ? AM_NQ : tiled_nq(a.hd);
        a.tile_heads = a.group < nq ? a.group : nq;
        a.tile_rows = nq / a.tile_heads;
        size_t al = 4 * (kv->type == HEARTH_F16 ? sizeof(__half) : sizeof(float));
        a.vec = hd % 4 == 0 && (uintptr_t)kv->k % al == 0 && (uintptr_t)kv->v % al == 0;
        a.vec8 = hd % 8 == 0 && (uintptr_t)kv->k % 16 == 0 && (uintptr_t)kv->v % 16 == 0;
        if (mma)
            launch_tiled_mma(a, n_head_kv, c->s);
        else if (kv->type == HEARTH_F16)
            launch_tiled<__half>(a, n_head_kv, c->s);
        else
            launch_tiled<float>(a, n_head_kv, c->s);
        int rc = cu_launched(mma ? "attn_cached tiled_mma" : "attn_cached tiled");
        if (rc)
            return rc;
    }
    cudaError_t e = kv->type == HEARTH_F16 ? launch_cached<__half>(a, b->n * n_head, c->s)
                                           : launch_cached<float>(a, b->n * n_head, c->s);
    return cu_fail("attn_cached", e);
}

/* ---- packed attention (bert) ---- */

/* QKV[r] += [bq | bk | bv] over (rows, 3h), flat; a NULL bias adds nothing. */
__global__ static void qkv_bias_kernel(float *QKV, const float *bq, const float *bk, const float *bv, int64_t h,
                                       int64_t total)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = i % (3 * h), part = c / h;
        const float *bias = part == 0 ? bq : part == 1 ? bk : bv;
        if (bias)
            QKV[i] += bias[c - part * h];
    }
}

typedef struct packed_args {
    float *ctx;
    const float *QKV;
    const int64_t *seq_start;
    int n_seqs, n_head, hd;
    float scale;
} packed_args;

/* Block (r, h): query row r, head h, over the rows of r's sequence. */
template <int DPL> __global__ static void __launch_bounds__(ATT_WARPS * 32) packed_kernel(packed_args a)
{
    int64_t r = blockIdx.x / a.n_head;
    int h = (int)(blockIdx.x % a.n_head), hd = a.hd;
    int64_t H = (int64_t)a.n_head * hd;
    /* the last sequence starting at or before r (seq_start ascending) */
    int lo = 0, hi = a.n_seqs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (a.seq_start[mid] <= r)
            lo = mid;
        else
            hi = mid - 1;
    }
    int64_t r0 = a.seq_start[lo], len = a.seq_start[lo + 1] - r0;
    const float *base = a.QKV + r0 * 3 * H + (int64_t)h * hd;
    attend<float, DPL>(a.ctx + r * H + (int64_t)h * hd, a.QKV + r * 3 * H + (int64_t)h * hd, base + H, base + 2 * H,
                       3 * H, len, hd, a.scale, 0);
}

int cu_attn_packed(cu_ctx *c, float *ctx, float *QKV, const float *bq, const float *bk, const float *bv,
                   const hearth_batch *b, int64_t n_head, int64_t hd, float scale)
{
    if (n_head < 1 || hd < 1 || hd > CU_HEAD_DIM_MAX || b->n_seqs < 1 || n_head > 65536)
        return b->n_seqs == 0 ? 0 : HEARTH_EINVAL;
    if (b->n == 0)
        return 0;
    int64_t h = n_head * hd, total = b->n * 3 * h;
    if (bq || bk || bv) {
        int64_t blocks = (total + 255) / 256;
        qkv_bias_kernel<<<(unsigned)(blocks > 65535 * 16 ? 65535 * 16 : blocks), 256, 0, c->s>>>(QKV, bq, bk, bv, h,
                                                                                                 total);
        int rc = cu_launched("attn_packed bias");
        if (rc)
            return rc;
    }
    packed_args a = {ctx, QKV, b->seq_start, b->n_seqs, (int)n_head, (int)hd, scale};
    dim3 g((unsigned)(b->n * n_head)), t(ATT_WARPS * 32);
    if (hd <= 32)
        packed_kernel<1><<<g, t, 0, c->s>>>(a);
    else if (hd <= 64)
        packed_kernel<2><<<g, t, 0, c->s>>>(a);
    else if (hd <= 128)
        packed_kernel<4><<<g, t, 0, c->s>>>(a);
    else
        packed_kernel<8><<<g, t, 0, c->s>>>(a);
    return cu_launched("attn_packed");
}

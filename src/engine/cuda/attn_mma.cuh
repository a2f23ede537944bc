/* attn_mma.cuh: ops_attn.cu's prompt-path attention on tensor cores,
 * tiled_mma_kernel, for the f16 cache at heads up to 128 (included by
 * ops_attn.cu after cached_args and tile_slots, whose contract it keeps:
 * the same tiles, slots and output as tiled_kernel).
 *
 * Shape: a 128-thread block (AM_WARPS = 4) per (tile of tile_rows rows, kv
 * head, chunk of the group's heads), AM_NQ = 64 queries ((row, head) pairs
 * enumerated as tiled_kernel does); warp w owns queries 16 w .. 16 w + 15,
 * the m16 of mma.sync.m16n8k16 (f16 in, f32 accumulate). Keys come in tiles
 * of KC, K and V as f16 [key][DP + 8] in shared memory, two stages so that
 * the next tile's cp.async copy overlaps this tile's products (DP 64: KC 64,
 * 36 KiB; DP 128: KC 32, 34 KiB; static, < 48 KiB). The 8-half row pad puts
 * the 8 rows an ldmatrix reads on 8 distinct 4-bank groups. Per warp and key
 * tile: S (16, KC) = Q K^T with Q's A fragments held in registers for the
 * whole block and K's B fragments by ldmatrix (K row-major is B "col");
 * mask, scale and online softmax on S in registers (a row's 4 lanes of a
 * quad agree on its max by __shfl_xor_sync); then S's C fragments become
 * P's A fragments unchanged (the C layout of two m16n8 tiles is the A layout
 * of one m16n8k16) and O (16, DP) += P V with V's B fragments by
 * ldmatrix.trans. One division by the row sum at the end. A warp whose 16
 * queries have no key in a tile skips its products (the causal tail).
 *
 * Fragments (PTX ISA, lane = 4 gq + tq; two f16 a register, lower index in
 * the low half): A (16 x 16 row): a0 = A[gq][2tq..], a1 = A[gq+8][2tq..],
 * a2 = A[gq][2tq+8..], a3 = A[gq+8][2tq+8..]; B (16 x 8 col): b0 =
 * B[2tq..2tq+1][gq], b1 = B[2tq+8..2tq+9][gq]; C (16 x 8 f32): c0 =
 * C[gq][2tq], c1 = C[gq][2tq+1], c2 = C[gq+8][2tq], c3 = C[gq+8][2tq+1].
 *
 * Precision: the test holds this path to 2e-5 absolute, 1e-4 relative
 * against a double oracle with f32 Q, which one f16 rounding of Q or P
 * (relative 2^-11 = 4.9e-4) would break. K and V are exact in f16 (the
 * cache is f16), so only Q and P are split: x = hi + lo, hi = f16(x), lo =
 * f16(x - hi) (x - hi is exact in f32), and each product is two mmas,
 * hi K + lo K, into one f32 accumulator. What is left of x is lo's own
 * rounding: 2^-11 |x - hi| <= 2^-22 |x| for normal lo, at most 2^-25 where lo
 * is subnormal (|x - hi| < 2^-14); so S and P V carry about f32's error
 * (2^-24) plus 2^-25 |k| a dim, 2^-25 |v| a key, the same order as
 * tiled_kernel's f32 FMA. The f16 products are exact in the f32
 * accumulator. Scale, mask, max, expf and the sums are f32. The limit: a
 * |q| above f16's 65504 would become inf (queries of real models are far
 * below it). */
#include <cuda_fp16.h>

static constexpr int AM_WARPS = 4, AM_NQ = 16 * AM_WARPS, AM_STAGES = 2;

/* Keys per tile by padded head DP: two stages of K and V tiles fit 48 KiB
 * (at DP 128, 64 keys would take 68 KiB; 32 halve the S registers too). */
template <int DP> struct am_shape;
template <> struct am_shape<64> {
    static constexpr int KC = 64;
};
template <> struct am_shape<128> {
    static constexpr int KC = 32;
};

__device__ __forceinline__ uint32_t am_smem(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* c += a b (f16 x f16 -> f32), fragments as above. */
__device__ __forceinline__ void am_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8 x 8 f16 matrices from shared memory: lane L gives the address of
 * row L % 8 of matrix L / 8; r[i] = matrix i's (row gq, cols 2tq, 2tq+1),
 * or with trans its (rows 2tq, 2tq+1; col gq). volatile: ordered against
 * __syncthreads and the stores that fill the tile. */
__device__ __forceinline__ void am_ldsm4(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void am_ldsm4_t(uint32_t r[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* (x0, x1) as two f16 pairs, hi = f16(x), lo = f16(x - hi); x0 in the low
 * halves. */
__device__ __forceinline__ void am_split(float x0, float x1, uint32_t &hi, uint32_t &lo)
{
    __half2 h = __floats2half2_rn(x0, x1);
    float2 f = __half22float2(h);
    __half2 l = __floats2half2_rn(x0 - f.x, x1 - f.y);
    hi = *(const uint32_t *)&h;
    lo = *(const uint32_t *)&l;
}

/* dst (KC, DP + 8) f16 = rows kb .. kb + KC - 1 of src (row j at src + j *
 * stride, hd wide); zeros past hd (Q is zero there too, but a stale NaN
 * times 0 is NaN) and at rows >= end (P is 0 there, same reason; such a row
 * may hold anything). vec: 16-byte cp.async, left in flight for the
 * caller's wait; else 2-byte loads (hd not a multiple of 8, or an unaligned
 * cache). Columns DP .. DP + 7 are pad, never read. */
template <int DP, int KC>
__device__ static void am_load(__half *dst, const __half *src, int64_t stride, int64_t kb, int64_t end, int hd,
                               bool vec)
{
    constexpr int P = DP + 8;
    if (vec) {
        for (int e = threadIdx.x; e < KC * DP / 8; e += AM_WARPS * 32) {
            int j = e / (DP / 8), d = e % (DP / 8) * 8;
            __half *p = dst + j * P + d;
            if (kb + j < end && d < hd)
                asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(am_smem(p)),
                             "l"(__cvta_generic_to_global(src + (kb + j) * stride + d))
                             : "memory");
            else
                *(uint4 *)p = make_uint4(0, 0, 0, 0);
        }
    } else {
        for (int e = threadIdx.x; e < KC * DP; e += AM_WARPS * 32) {
            int j = e / DP, d = e % DP;
            dst[j * P + d] = kb + j < end && d < hd ? src[(kb + j) * stride + d] : __ushort_as_half(0);
        }
    }
}

__device__ __forceinline__ void am_commit(void)
{
    asm volatile("cp.async.commit_group;" ::: "memory");
}
/* All but the newest group landed (this thread's copies). */
__device__ __forceinline__ void am_wait_prev(void)
{
    asm volatile("cp.async.wait_group 1;" ::: "memory");
}

/* One key tile of a warp's 16 queries: kb the tile's first position, sk/sv
 * the tile in shared memory, qc[i] the key count of the lane's row gq + 8 i
 * (0: none, another slot's query or none at all); m, l, o the online
 * softmax (l a lane's partial sum over its own columns). */
template <int DP>
__device__ __forceinline__ void am_tile(const __half *sk, const __half *sv, int64_t kb, const int64_t qc[2],
                                        float scale, const uint32_t (&qh)[DP / 16][4],
                                        const uint32_t (&ql)[DP / 16][4], float m[2], float l[2],
                                        float (&o)[DP / 8][4])
{
    constexpr int KC = am_shape<DP>::KC, P = DP + 8, NS = KC / 8;
    int lane = threadIdx.x & 31, tq = lane & 3;
    /* S = Q K^T. ldmatrix x4 at (key 8 j + L % 8, dim 32 kp + 8 (L / 8)):
     * b0, b1 of k-step 2 kp, then of 2 kp + 1 */
    float s[NS][4];
#pragma unroll
    for (int j = 0; j < NS; j++)
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    uint32_t kaddr = am_smem(sk) + (uint32_t)(((lane & 7) * P + 8 * (lane >> 3)) * 2);
#pragma unroll
    for (int kp = 0; kp < DP / 32; kp++)
#pragma unroll
        for (int j = 0; j < NS; j++) {
            uint32_t b[4];
            am_ldsm4(b, kaddr + (uint32_t)((8 * j * P + 32 * kp) * 2));
            am_mma(s[j], ql[2 * kp], b[0], b[1]);
            am_mma(s[j], qh[2 * kp], b[0], b[1]);
            am_mma(s[j], ql[2 * kp + 1], b[2], b[3]);
            am_mma(s[j], qh[2 * kp + 1], b[2], b[3]);
        }
    /* s[j][e]: row gq + 8 (e / 2), key kb + 8 j + 2 tq + e % 2 */
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int64_t key = kb + 8 * j + 2 * tq + (e & 1);
            s[j][e] = key < qc[e >> 1] ? s[j][e] * scale : -INFINITY; /* a select: drops a masked NaN */
            mx[e >> 1] = fmaxf(mx[e >> 1], s[j][e]);
        }
    float mu[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        float mn = fmaxf(m[i], mx[i]);
        /* No key for this row yet (mn = -inf): subtract 0, so every term
         * is e^-inf = 0 and never e^(-inf - -inf) = NaN. */
        mu[i] = mn == -INFINITY ? 0.0f : mn;
        float corr = expf(m[i] - mu[i]); /* 0 on the row's first keys (m = -inf) */
        m[i] = mn;
        l[i] *= corr;
#pragma unroll
        for (int jd = 0; jd < DP / 8; jd++) {
            o[jd][2 * i] *= corr;
            o[jd][2 * i + 1] *= corr;
        }
    }
#pragma unroll
    for (int j = 0; j < NS; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[j][e] = expf(s[j][e] - mu[e >> 1]); /* 0 at a masked key */
            l[e >> 1] += s[j][e];
        }
    /* O += P V, k-step kk over keys 16 kk ..: P's A fragment is S's n-tiles
     * 2 kk (a0, a1) and 2 kk + 1 (a2, a3). ldmatrix.trans x4 at (key 16 kk +
     * L % 8 + 8 (L / 8 % 2), dim 16 jd + 8 (L / 16)): b0, b1 of dim n-tile
     * 2 jd, then of 2 jd + 1 */
    uint32_t vaddr = am_smem(sv) + (uint32_t)((((lane & 7) + 8 * ((lane >> 3) & 1)) * P + 8 * (lane >> 4)) * 2);
#pragma unroll
    for (int kk = 0; kk < KC / 16; kk++) {
        uint32_t ph[4], pl[4];
        am_split(s[2 * kk][0], s[2 * kk][1], ph[0], pl[0]);
        am_split(s[2 * kk][2], s[2 * kk][3], ph[1], pl[1]);
        am_split(s[2 * kk + 1][0], s[2 * kk + 1][1], ph[2], pl[2]);
        am_split(s[2 * kk + 1][2], s[2 * kk + 1][3], ph[3], pl[3]);
#pragma unroll
        for (int jd = 0; jd < DP / 16; jd++) {
            uint32_t b[4];
            am_ldsm4_t(b, vaddr + (uint32_t)((16 * kk * P + 16 * jd) * 2));
            am_mma(o[2 * jd], pl, b[0], b[1]);
            am_mma(o[2 * jd], ph, b[0], b[1]);
            am_mma(o[2 * jd + 1], pl, b[2], b[3]);
            am_mma(o[2 * jd + 1], ph, b[2], b[3]);
        }
    }
}

/* Block (tile t, kv head, head chunk z): tiled_kernel's queries and output
 * (that comment), here lane (gq, tq) of warp w holds queries 16 w + gq and
 * 16 w + gq + 8. For each distinct slot of the tile's rows, over key tiles
 * up to the largest count of its rows: the next tile's copy starts, this
 * one's is waited for, am_tile runs per warp. Launch bounds (128, 2): with
 * no minimum ptxas (13.0) held DP 64 to 168 registers and spilled; with it,
 * 196 (DP 64) and 252 (DP 128), no spill, 2 blocks an SM. */
template <int DP> __global__ static void __launch_bounds__(AM_WARPS * 32, 2) tiled_mma_kernel(cached_args a)
{
    constexpr int KC = am_shape<DP>::KC, P = DP + 8;
    static_assert(AM_NQ <= TL_ROWS_MAX && AM_WARPS * 32 >= TL_ROWS_MAX && DP % 32 == 0 && KC % 16 == 0,
                  "tile shape");
    __shared__ __align__(16) __half s_k[AM_STAGES][KC * P];
    __shared__ __align__(16) __half s_v[AM_STAGES][KC * P];
    __shared__ int64_t s_cnt[TL_ROWS_MAX];
    __shared__ int32_t s_sl[TL_ROWS_MAX];
    __shared__ int s_first[TL_ROWS_MAX];

    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3, hd = a.hd;
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
    /* the lane's queries: row ri[i] of the tile (-1 past the tile's rows or
     * the group's heads), Q and out at offset qo[i] */
    int ri[2];
    int64_t qo[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int q = 16 * warp + gq + 8 * i, r = q / a.tile_heads, hq = q % a.tile_heads;
        ri[i] = r < rows && (int)blockIdx.z * a.tile_heads + hq < a.group ? r : -1;
        qo[i] = (r0 + r) * qd + (int64_t)(h0 + hq) * hd;
    }
    /* Q's A fragments, split hi + lo, zero past hd and for no query */
    uint32_t qh[DP / 16][4], ql[DP / 16][4];
#pragma unroll
    for (int kk = 0; kk < DP / 16; kk++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            int i = c & 1, d = 16 * kk + 2 * tq + 8 * (c >> 1);
            const float *q = a.Q + qo[i];
            float x0 = ri[i] >= 0 && d < hd ? q[d] : 0.0f, x1 = ri[i] >= 0 && d + 1 < hd ? q[d + 1] : 0.0f;
            am_split(x0, x1, qh[kk][c], ql[kk][c]);
        }
    float o[DP / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int jd = 0; jd < DP / 8; jd++)
        o[jd][0] = o[jd][1] = o[jd][2] = o[jd][3] = 0.0f;
    __syncthreads(); /* s_cnt in */

    for (int si = 0; si < rows; si++) {
        if (!s_first[si])
            continue; /* uniform: shared memory every thread reads alike */
        int32_t sl = s_sl[si];
        int64_t end = 0, qc[2];
        for (int j = si; j < rows; j++)
            if (s_sl[j] == sl && s_cnt[j] > end)
                end = s_cnt[j];
#pragma unroll
        for (int i = 0; i < 2; i++)
            qc[i] = ri[i] >= 0 && s_sl[ri[i]] == sl ? s_cnt[ri[i]] : 0;
        int64_t wc = qc[0] > qc[1] ? qc[0] : qc[1]; /* the warp's most keys */
        for (int off = 16; off > 0; off >>= 1) {
            int64_t x = __shfl_xor_sync(0xffffffffu, wc, off);
            wc = x > wc ? x : wc;
        }
        size_t blk = ((size_t)sl * (size_t)a.n_layer + (size_t)a.layer) * (size_t)a.n_ctx * (size_t)a.kv_dim +
                     (size_t)kvh * hd;
        const __half *K = (const __half *)a.kc + blk, *V = (const __half *)a.vc + blk;
        /* stage 0 is free: every warp passed the last tile's closing barrier */
        am_load<DP, KC>(s_k[0], K, a.kv_dim, 0, end, hd, a.vec8);
        am_load<DP, KC>(s_v[0], V, a.kv_dim, 0, end, hd, a.vec8);
        am_commit();
        int st = 0;
        for (int64_t kb = 0; kb < end; kb += KC, st ^= 1) {
            if (kb + KC < end) { /* stage st ^ 1 was last read before the previous closing barrier */
                am_load<DP, KC>(s_k[st ^ 1], K, a.kv_dim, kb + KC, end, hd, a.vec8);
                am_load<DP, KC>(s_v[st ^ 1], V, a.kv_dim, kb + KC, end, hd, a.vec8);
            }
            am_commit(); /* possibly empty: the wait below counts groups */
            am_wait_prev();
            __syncthreads(); /* tile kb in, every thread's copies */
            if (kb < wc) /* warp-uniform, as mma.sync needs */
                am_tile<DP>(s_k[st], s_v[st], kb, qc, a.scale, qh, ql, m, l, o);
            __syncthreads(); /* stage st read: the next iteration's copy may land */
        }
    }
#pragma unroll
    for (int i = 0; i < 2; i++) { /* the row sums over the quad's columns */
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
        l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (ri[i] < 0)
            continue;
        float *out = a.out + qo[i];
#pragma unroll
        for (int jd = 0; jd < DP / 8; jd++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int d = 8 * jd + 2 * tq + e;
                if (d < hd)
                    out[d] = l[i] > 0.0f ? o[jd][2 * i + e] / l[i] : 0.0f; /* no key (a bad position): zeros */
            }
    }
}

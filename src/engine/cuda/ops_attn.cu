/* ops_attn.cu: the CUDA backend's two attentions (cuda_int.h, engine/dev.h):
 * attn_cached, a decoder's query rows over their slots' KV cache, and
 * attn_packed, bert's sequences packed without padding.
 *
 * How: one block per (query row, query head), ATT_WARPS (32) warps. The block
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
 * attn_packed first adds the Q/K/V biases in place (a flat kernel over the
 * (n, 3h) rows), then runs the same head over the rows of the query's own
 * sequence, found by a binary search of seq_start on the device (the grid
 * is sized from b->n alone).
 *
 * Rejected: a block per (row, kv head) carrying the whole GQA group (q and
 * acc of G heads in registers: 128 per lane at G = 8, hd = 256). */
#include "engine/cuda/cuda_int.h"

#include <cuda_fp16.h>
#include <math.h>

static constexpr int ATT_WARPS = 32, ATT_TILE = 4;

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

/* out (hd) = softmax(q K^T * scale) V over count keys: row j of K at K + j *
 * stride, of V likewise. Called by the whole block (ATT_WARPS warps). */
template <typename T, int DPL>
__device__ static void attend(float *out, const float *q, const T *K, const T *V, int64_t stride, int64_t count,
                              int hd, float scale)
{
    __shared__ float s_m[ATT_WARPS], s_l[ATT_WARPS], s_acc[ATT_WARPS][CU_HEAD_DIM_MAX];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    float qv[DPL], acc[DPL];
    for (int k = 0; k < DPL; k++) {
        int d = lane + 32 * k;
        qv[k] = d < hd ? q[d] : 0.0f;
        acc[k] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    for (int64_t base = (int64_t)w * ATT_TILE; base < count; base += (int64_t)ATT_WARPS * ATT_TILE) {
        float s[ATT_TILE];
        for (int i = 0; i < ATT_TILE; i++) {
            float dot = 0.0f;
            if (base + i < count) {
                const T *kr = K + (base + i) * stride;
                for (int k = 0; k < DPL; k++) {
                    int d = lane + 32 * k;
                    if (d < hd)
                        dot += qv[k] * ldf(kr, d);
                }
            }
            s[i] = dot;
        }
        float mx = m;
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
        for (int i = 0; i < ATT_TILE; i++) {
            if (base + i >= count)
                break;
            float p = expf(s[i] - mx);
            l += p;
            const T *vr = V + (base + i) * stride;
            for (int k = 0; k < DPL; k++) {
                int d = lane + 32 * k;
                if (d < hd)
                    acc[k] += p * ldf(vr, d);
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
    float M = -INFINITY;
    for (int i = 0; i < ATT_WARPS; i++)
        M = fmaxf(M, s_m[i]);
    float f[ATT_WARPS], L = 0.0f;
    for (int i = 0; i < ATT_WARPS; i++) {
        f[i] = s_l[i] > 0.0f ? expf(s_m[i] - M) : 0.0f; /* a warp that saw no key has m = -inf */
        L += f[i] * s_l[i];
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float o = 0.0f;
        for (int i = 0; i < ATT_WARPS; i++)
            o += f[i] * s_acc[i][d];
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
} cached_args;

/* Block (r, h): query head h of row r over positions 0 .. pos[r] of its
 * slot's block in layer; kv head h / group. */
template <typename T, int DPL> __global__ static void __launch_bounds__(ATT_WARPS * 32) cached_kernel(cached_args a)
{
    int64_t r = blockIdx.x / a.n_head;
    int h = (int)(blockIdx.x % a.n_head), hd = a.hd;
    int64_t count = a.pos[r] + 1;
    count = count < 0 ? 0 : count > a.n_ctx ? a.n_ctx : count;
    size_t blk = ((size_t)a.slot[r] * (size_t)a.n_layer + (size_t)a.layer) * (size_t)a.n_ctx * (size_t)a.kv_dim +
                 (size_t)(h / a.group) * hd;
    int64_t qd = (int64_t)a.n_head * hd;
    attend<T, DPL>(a.out + r * qd + (int64_t)h * hd, a.Q + r * qd + (int64_t)h * hd, (const T *)a.kc + blk,
                   (const T *)a.vc + blk, a.kv_dim, count, hd, a.scale);
}

template <typename T> static void launch_cached(const cached_args &a, int64_t blocks, cudaStream_t s)
{
    dim3 g((unsigned)blocks), t(ATT_WARPS * 32);
    if (a.hd <= 32)
        cached_kernel<T, 1><<<g, t, 0, s>>>(a);
    else if (a.hd <= 64)
        cached_kernel<T, 2><<<g, t, 0, s>>>(a);
    else if (a.hd <= 128)
        cached_kernel<T, 4><<<g, t, 0, s>>>(a);
    else
        cached_kernel<T, 8><<<g, t, 0, s>>>(a);
}

int cu_attn_cached(cu_ctx *c, float *out, const float *Q, const hearth_dev_kv *kv, int64_t layer,
                   const hearth_batch *b, int64_t n_head, int64_t n_head_kv, int64_t hd, float scale)
{
    if (kv->type != HEARTH_F32 && kv->type != HEARTH_F16)
        return HEARTH_EUNSUPPORTED;
    if (n_head < 1 || n_head_kv < 1 || n_head % n_head_kv || hd < 1 || hd > CU_HEAD_DIM_MAX ||
        kv->kv_dim != n_head_kv * hd || layer < 0 || layer >= kv->n_layer || n_head > 65536)
        return HEARTH_EINVAL;
    if (b->n == 0)
        return 0;
    cached_args a = {out,    Q,      kv->k,   kv->v,      kv->n_ctx,          kv->n_layer, layer,
                     kv->kv_dim, b->pos, b->slot, (int)n_head, (int)(n_head / n_head_kv), (int)hd, scale};
    if (kv->type == HEARTH_F16)
        launch_cached<__half>(a, b->n * n_head, c->s);
    else
        launch_cached<float>(a, b->n * n_head, c->s);
    return cu_launched("attn_cached");
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
                       3 * H, len, hd, a.scale);
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

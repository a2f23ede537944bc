/* vision_conv.cu: Conv on the CUDA device (engine/dev_vision.h): placement
 * at load, and the kernels a frame replays.
 *
 * How, by shape (chosen once, in conv_new):
 *   - Depthwise (one input channel per group: groups == c_in, any channel
 *     multiplier): one thread per output pixel, a block of up to 256
 *     threads over pixels of one (n, c_out) plane; the window's weights are read through
 *     the read-only cache (every thread of a block reads the same ones), a
 *     3x3 window is a template (unrolled), any other size a loop. The
 *     weights stay in the model's layout (c_out, kh, kw).
 *   - Everything else (dense, grouped, 1x1) is an implicit GEMM per (n,
 *     group): Y (M = c_out/groups, N = h_out w_out) = W (M, K) im2col(X)
 *     (K, N), K = c_in/groups kh kw, f32 FMA throughout. A block computes a
 *     BM x BN tile (BM 16/32/64 by M, BN 64 or 32 where 64 would leave the
 *     GPU under two blocks per SM), each thread a 4 x 4 sub-tile, over K in
 *     steps of 16: the weight tile comes from a copy placed transposed and
 *     zero-padded, (groups, Kp, Mp), so it is read as aligned float4 rows
 *     with no bounds test; the input tile is gathered im2col-style on the
 *     fly: a thread keeps one pixel for the whole K loop, adjacent threads
 *     read adjacent pixels, and k's split into a channel plane and a window
 *     offset comes from a table made at load (one broadcast 16-byte load
 *     per element instead of three integer divisions, which cost more than
 *     the FMAs they feed). A 1x1 stride-1 unpadded conv (the pointwise half
 *     of a separable conv) takes a template with no window at all.
 *     Bias and activation are applied in the output write.
 *   - Split K: where the tiles give fewer blocks than SMs (UltraFace's 3x3
 *     256 -> 6/12 heads on 4x5: one tile, K = 2304; its 3x3 8..16 -> 16
 *     branches on 30x40: 38 one-warp blocks, K = 72..144), the K loop is
 *     cut in slices, each writing its partial tile to the plan's work space
 *     (conv_work_bytes: splits x the output), and a second kernel sums the
 *     slices in a fixed order and applies bias and activation:
 *     deterministic, unlike atomics, and still two launches in a recorded
 *     graph. A one-warp block runs its K steps back to back, 2.7 us each
 *     for a gathered (im2col) tile, 1.2 us for a 1x1 one (dependent global
 *     loads and a barrier a step, nothing to hide them; ncu on an H100,
 *     2026-12-06), and the sum costs a launch (~3 us): so a gathered conv
 *     is split from 3 steps on into slices of one step or more, a 1x1 from
 *     8 steps into slices of two, toward two blocks per SM, at most
 *     SPLITS_MAX slices. The 30x40 branches took 27-37 us each with slices
 *     of 4 steps from 8 steps on, 260 of a frame's 535 us.
 *     Tried: the tile's last block summing the slices (a counter per tile)
 *     to save the launch: its 16 outputs a thread, read slice by slice,
 *     made it 14-36 us, and summed four slices at a time the kernel needed
 *     128 registers where it had 64, slowing the unsplit convs too.
 * Every index fits 32 bits (conv_new refuses a tensor of 2^31 elements or
 * more), so kernels compute in int and widen only plane offsets.
 *
 * Rejected: TF32/tensor cores (UltraFace is ~0.2 GFLOP a frame; launch
 * latency, not FLOPs, bounds a frame, and f32 keeps the CPU's parity
 * bound); an explicit im2col buffer (a full K x N copy per conv in the
 * arena for no gain at these sizes); cuDNN (a dependency, and its own
 * workspace and algorithm search); atomics for split K (order-dependent
 * sums, and the activation could not be fused). */
extern "C" {
#include "engine/cuda/dev_cuda.h"
}
#include "engine/cuda/vision_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static constexpr int BK = 16; /* K per step of the GEMM's loop */
static constexpr int SPLITS_MAX = 64; /* K slices at most */

enum { CONV_DW = 0, CONV_GEMM };

struct hearth_conv {
    hearth_conv_desc d;       /* a copy; d.name points at name */
    char name[64];
    hearth_dev *dev;
    int kind;                 /* CONV_DW or CONV_GEMM */
    int bm, bn;               /* GEMM tile */
    bool pw;                  /* GEMM: 1x1, stride 1, no pads */
    int m, k, n_px;           /* GEMM: per group c_out, K; pixels h_out w_out */
    int kp, mp;               /* K, M rounded up to BK, bm */
    int splits, ks;           /* K slices and K per slice (a multiple of BK) */
    float *w;                 /* device: DW (c_out, kh, kw); GEMM (groups, kp, mp), zero-padded */
    float *bias;              /* device: (c_out), zeros when the model has none */
    int4 *ktab;               /* device: GEMM but not pw: for k < K, (ci h w, ky dil_h, kx dil_w, 0) */
};

/* What the kernels read, by value (a recorded graph keeps its copy). */
struct conv_args {
    int n, c_in, h, w, c_out, kh, kw, sh, sw, dh, dw, pt, pl, ho, wo;
    int groups, m, k, n_px, kp, mp, splits, ks;
    int act;
    float lo, hi;
    const float *W, *bias;
    const int4 *ktab;
};

__device__ static inline float conv_act(float v, int act, float lo, float hi)
{
    switch (act) {
    case HEARTH_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case HEARTH_ACT_CLIP: return fminf(fmaxf(v, lo), hi);
    case HEARTH_ACT_SIGMOID: return 1.0f / (1.0f + expf(-v));
    case HEARTH_ACT_LEAKY_RELU: return v < 0.0f ? lo * v : v;
    default: return v;
    }
}

/* ---- depthwise ---- */

/* Block b: plane b / tiles (nn c_out + co), pixels (b % tiles) blockDim.x
 * + t (blockDim.x <= 256, a multiple of 32). KS 3: a 3x3 window; 0: a.kh x
 * a.kw. */
template <int KS>
__global__ static void __launch_bounds__(256)
    conv_dw_kernel(conv_args a, const float *__restrict__ X, float *__restrict__ Y, int tiles)
{
    cu_pdl_trigger();
    const int plane = blockIdx.x / tiles, tile = blockIdx.x - plane * tiles;
    const int hw_out = a.ho * a.wo, p = tile * blockDim.x + threadIdx.x;
    if (p >= hw_out)
        return;
    const int co = plane % a.c_out, nn = plane / a.c_out;
    const int ci = co / (a.c_out / a.c_in); /* groups == c_in: group ci holds c_out / c_in outputs */
    const int oh = p / a.wo, ow = p - oh * a.wo;
    const int kh = KS ? KS : a.kh, kw = KS ? KS : a.kw;
    const float *x = X + ((int64_t)nn * a.c_in + ci) * a.h * a.w;
    const float *wt = a.W + co * kh * kw;
    const int ih0 = oh * a.sh - a.pt, iw0 = ow * a.sw - a.pl;
    float acc = 0.0f;
    cu_pdl_wait(); /* X, and Y's bytes, were the kernel before's */
#pragma unroll
    for (int ky = 0; ky < kh; ky++) {
        int ih = ih0 + ky * a.dh;
        if (ih < 0 || ih >= a.h)
            continue;
#pragma unroll
        for (int kx = 0; kx < kw; kx++) {
            int iw = iw0 + kx * a.dw;
            if (iw >= 0 && iw < a.w)
                acc = fmaf(__ldg(wt + ky * kw + kx), __ldg(x + ih * a.w + iw), acc);
        }
    }
    Y[(int64_t)plane * hw_out + p] = conv_act(acc + __ldg(a.bias + co), a.act, a.lo, a.hi);
}

/* ---- implicit GEMM ---- */

/* Grid (ceil(n_px / BN), mp / BM, n groups splits), BM BN / 16 threads.
 * Thread (tx, ty) = (t % (BN/4), t / (BN/4)) owns outputs m0 + 4 ty .. +3 by
 * p0 + 4 tx .. +3. Loading, thread t fills column t % BN of the input tile
 * (its pixel pb, fixed for the whole loop), rows t / BN + j BM/16. */
template <int BM, int BN, bool PW>
__global__ static void __launch_bounds__(BM * BN / 16)
    conv_gemm_kernel(conv_args a, const float *__restrict__ X, float *__restrict__ Y, float *__restrict__ part)
{
    constexpr int T = BM * BN / 16, TX = BN / 4, BSTEP = T / BN;
    static_assert(BK % BSTEP == 0 && T % BN == 0, "tile shape");
    cu_pdl_trigger();
    __shared__ __align__(16) float As[BK][BM]; /* As[kk][m] = W[m0 + m][k0 + kk] */
    __shared__ __align__(16) float Bs[BK][BN]; /* Bs[kk][n] = im2col(X)[k0 + kk][p0 + n] */

    const int tid = threadIdx.x, tx = tid % TX, ty = tid / TX;
    const int z = blockIdx.z, s = z % a.splits, gz = z / a.splits, g = gz % a.groups, nn = gz / a.groups;
    const int m0 = blockIdx.y * BM, p0 = blockIdx.x * BN;
    const int cin_g = a.c_in / a.groups, hw = a.h * a.w;
    const float *xg = X + ((int64_t)nn * a.c_in + (int64_t)g * cin_g) * hw;
    const float *wg = a.W + (int64_t)g * a.kp * a.mp + m0;

    const int bn = tid % BN, bk0 = tid / BN, pb = p0 + bn;
    const bool pv = pb < a.n_px;
    int ih0 = 0, iw0 = 0;
    if (!PW && pv) {
        int oh = pb / a.wo, ow = pb - oh * a.wo;
        ih0 = oh * a.sh - a.pt;
        iw0 = ow * a.sw - a.pl;
    }

    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0.0f;

    const int k_begin = s * a.ks, k_end = min(a.kp, k_begin + a.ks);
    cu_pdl_wait(); /* X (and part, Y) were the kernels before's */
    for (int k0 = k_begin; k0 < k_end; k0 += BK) {
        /* rows k0 .. k0 + 15 < kp and columns m0 .. m0 + BM - 1 < mp: inside
         * the padded copy; mp and m0 are multiples of 4, so float4-aligned */
        for (int i = tid; i < BK * BM / 4; i += T) {
            int kk = i / (BM / 4), mm = (i % (BM / 4)) * 4;
            *reinterpret_cast<float4 *>(&As[kk][mm]) =
                __ldg(reinterpret_cast<const float4 *>(wg + (int64_t)(k0 + kk) * a.mp + mm));
        }
#pragma unroll
        for (int j = 0; j < BK / BSTEP; j++) {
            int kk = bk0 + j * BSTEP, k = k0 + kk;
            float v = 0.0f;
            if (pv && k < a.k) {
                if (PW) {
                    v = __ldg(xg + (int64_t)k * hw + pb);
                } else {
                    /* k's channel plane and window offset, precomputed (a
                     * broadcast load: a warp's threads share k) */
                    int4 t = __ldg(a.ktab + k);
                    int ih = ih0 + t.y, iw = iw0 + t.z;
                    if (ih >= 0 && ih < a.h && iw >= 0 && iw < a.w)
                        v = __ldg(xg + t.x + ih * a.w + iw);
                }
            }
            Bs[kk][bn] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            float4 av = *reinterpret_cast<const float4 *>(&As[kk][ty * 4]);
            float4 bv = *reinterpret_cast<const float4 *>(&Bs[kk][tx * 4]);
            float ar[4] = {av.x, av.y, av.z, av.w}, br[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(ar[i], br[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 4; i++) {
        int m = m0 + ty * 4 + i;
        if (m >= a.m)
            continue;
        int co = g * a.m + m;
        int64_t row = ((int64_t)nn * a.c_out + co) * a.n_px;
        if (a.splits == 1) {
            float b = __ldg(a.bias + co);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int p = p0 + tx * 4 + j;
                if (p < a.n_px)
                    Y[row + p] = conv_act(acc[i][j] + b, a.act, a.lo, a.hi);
            }
        } else {
            float *q = part + (int64_t)s * a.n * a.c_out * a.n_px + row;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int p = p0 + tx * 4 + j;
                if (p < a.n_px)
                    q[p] = acc[i][j];
            }
        }
    }
}

/* Y[i] = act(sum over slices s of part[s total + i] + bias[channel of i]),
 * slices summed in order. */
__global__ static void conv_reduce_kernel(conv_args a, const float *__restrict__ part, float *__restrict__ Y)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    const int64_t total = (int64_t)a.n * a.c_out * a.n_px;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        /* eight slices' loads in flight before their sums (in order) */
        float v = 0.0f;
        int s = 0;
        for (; s + 8 <= a.splits; s += 8) {
            float t[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                t[u] = part[(s + u) * total + i];
#pragma unroll
            for (int u = 0; u < 8; u++)
                v += t[u];
        }
        for (; s < a.splits; s++)
            v += part[s * total + i];
        int co = (int)(i / a.n_px % a.c_out);
        Y[i] = conv_act(v + __ldg(a.bias + co), a.act, a.lo, a.hi);
    }
}

/* ---- placement ---- */

static const char *conv_name(const hearth_conv_desc *d)
{
    return d->name ? d->name : "conv";
}

/* The GEMM's tile and K split for c (m, k, n_px, kp set), for a GPU of nsm
 * SMs: BM the smallest of 16/32/64 covering M; BN 64 unless that leaves
 * fewer than two blocks per SM; while the blocks are fewer than the SMs, K
 * cut as the header says (gathered: from 3 steps, slices of 1 or more; 1x1:
 * from 8, slices of 2 or more; toward two blocks per SM, at most
 * SPLITS_MAX). */
static void gemm_plan(hearth_conv *c, int64_t nsm)
{
    const hearth_conv_desc *d = &c->d;
    c->bm = c->m <= 16 ? 16 : c->m <= 32 ? 32 : 64;
    c->mp = (c->m + c->bm - 1) / c->bm * c->bm;
    int64_t per = (int64_t)(c->mp / c->bm) * d->n * d->groups; /* blocks per column of tiles */
    c->bn = (c->n_px + 63) / 64 * per < 2 * nsm ? 32 : 64;
    int64_t blocks = (c->n_px + c->bn - 1) / c->bn * per;
    int steps = c->kp / BK, per_slice = steps;
    c->splits = 1;
    const int min_steps = c->pw ? 8 : 3, min_slice = c->pw ? 2 : 1;
    if (blocks < nsm && steps >= min_steps) {
        int64_t want = (2 * nsm + blocks - 1) / blocks, most = steps / min_slice;
        most = most < SPLITS_MAX ? most : SPLITS_MAX;
        int64_t sp = want < most ? want : most;
        if (sp > 1) {
            per_slice = (int)((steps + sp - 1) / sp);
            c->splits = (steps + per_slice - 1) / per_slice;
        }
    }
    c->ks = per_slice * BK;
}

/* Whether the product of f[0..n) is at most lim (every f >= 1). */
static bool prod_le(int64_t lim, const int64_t *f, int n)
{
    int64_t acc = 1;
    for (int i = 0; i < n; i++) {
        if (f[i] < 1 || f[i] > lim / acc)
            return false;
        acc *= f[i];
    }
    return true;
}

/* Uploads bytes of host to a new device buffer of dev (synchronous). */
static void *upload_new(hearth_dev *dev, const void *host, size_t bytes, const char *name, hearth_err *err)
{
    void *p = dev->ops->alloc(dev, bytes, err);
    if (!p)
        return NULL;
    cudaError_t e = cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(0); /* landed before a frame's stream reads it (cu_uploads_landed) */
    if (e != cudaSuccess) {
        cu_fail("cudaMemcpy (conv weights)", e);
        hearth_err_set(err, HEARTH_EDEVICE, "conv '%s': cannot copy %zu bytes to %s: %s", name, bytes,
                       dev->caps.name, cudaGetErrorString(e));
        dev->ops->free(dev, p);
        return NULL;
    }
    return p;
}

hearth_conv *cu_conv_new(hearth_dev *dev, const hearth_conv_desc *d, const float *w, const float *bias,
                         hearth_err *err)
{
    const char *name = conv_name(d);
    int ord = hearth_dev_cuda_ordinal(dev);
    if (ord < 0 || !w) {
        hearth_err_set(err, HEARTH_EINVAL, "conv '%s': %s", name, ord < 0 ? "not a CUDA device" : "no weights");
        return NULL;
    }
    hearth_conv_desc chk = *d;
    if (hearth_conv_desc_finish(&chk, err))
        return NULL;
    if (chk.h_out != d->h_out || chk.w_out != d->w_out) {
        hearth_err_set(err, HEARTH_EINVAL, "conv '%s': output %lldx%lld, the geometry makes %lldx%lld (not finished?)",
                       name, (long long)d->h_out, (long long)d->w_out, (long long)chk.h_out, (long long)chk.w_out);
        return NULL;
    }
    /* every element count and coordinate the kernels compute must fit an int */
    const int64_t lim = INT32_MAX;
    const int64_t x_f[] = {d->n, d->c_in, d->h, d->w}, y_f[] = {d->n, d->c_out, d->h_out, d->w_out};
    const int64_t k_f[] = {d->c_in / d->groups, d->kh, d->kw};
    int64_t k = 0, y_el = 0;
    bool ok = prod_le(lim, x_f, 4) && prod_le(lim, y_f, 4) && prod_le(lim, k_f, 3) &&
              d->h + d->pad_t + d->pad_b <= lim / 2 && d->w + d->pad_l + d->pad_r <= lim / 2 &&
              d->stride_h <= lim && d->stride_w <= lim && d->dil_h <= lim && d->dil_w <= lim;
    if (ok) {
        k = d->c_in / d->groups * d->kh * d->kw;
        y_el = d->n * d->c_out * d->h_out * d->w_out;
        const int64_t w_f[] = {d->groups, k + BK, d->c_out / d->groups + 64};
        ok = prod_le(lim, w_f, 3);
    }
    if (!ok) {
        hearth_err_set(err, HEARTH_EUNSUPPORTED, "conv '%s': input (%lld, %lld, %lld, %lld), output %lldx%lld or "
                       "weight past the CUDA kernels' 2^31 limit", name, (long long)d->n, (long long)d->c_in,
                       (long long)d->h, (long long)d->w, (long long)d->h_out, (long long)d->w_out);
        return NULL;
    }

    hearth_conv *c = (hearth_conv *)calloc(1, sizeof *c);
    float *host = NULL;
    if (!c) {
        hearth_err_set(err, HEARTH_ENOMEM, "conv '%s': out of host memory", name);
        return NULL;
    }
    c->d = *d;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->d.name = c->name;
    c->dev = dev;
    c->n_px = (int)(d->h_out * d->w_out);
    c->splits = 1;
    size_t w_el;
    if (d->groups == d->c_in) {
        c->kind = CONV_DW;
        w_el = (size_t)(d->c_out * d->kh * d->kw);
        if (d->n * d->c_out * ((c->n_px + 255) / 256) > lim) {
            hearth_err_set(err, HEARTH_EUNSUPPORTED, "conv '%s': too many blocks for the depthwise kernel", name);
            goto fail;
        }
        c->w = (float *)upload_new(dev, w, w_el * sizeof(float), name, err);
    } else {
        c->kind = CONV_GEMM;
        c->pw = d->kh == 1 && d->kw == 1 && d->stride_h == 1 && d->stride_w == 1 && !d->pad_t && !d->pad_l &&
                !d->pad_b && !d->pad_r;
        c->m = (int)(d->c_out / d->groups);
        c->k = (int)k;
        c->kp = (c->k + BK - 1) / BK * BK;
        int nsm = 0;
        if (cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, ord) != cudaSuccess || nsm < 1) {
            cudaGetLastError();
            nsm = 132;
        }
        gemm_plan(c, nsm);
        if ((c->n_px + c->bn - 1) / c->bn > lim || c->mp / c->bm > 65535 || d->n * d->groups * c->splits > 65535 ||
            (int64_t)c->splits * y_el > lim) {
            hearth_err_set(err, HEARTH_EUNSUPPORTED, "conv '%s': a grid of %lld x %lld x %lld tiles is past CUDA's "
                           "limits", name, (long long)((c->n_px + c->bn - 1) / c->bn), (long long)(c->mp / c->bm),
                           (long long)(d->n * d->groups * c->splits));
            goto fail;
        }
        /* (groups, kp, mp): host[(g kp + k) mp + m] = w[(g M + m) K + k] */
        w_el = (size_t)d->groups * c->kp * c->mp;
        host = (float *)calloc(w_el, sizeof *host);
        if (!host) {
            hearth_err_set(err, HEARTH_ENOMEM, "conv '%s': out of host memory for %zu weights", name, w_el);
            goto fail;
        }
        for (int64_t g = 0; g < d->groups; g++)
            for (int64_t m = 0; m < c->m; m++)
                for (int64_t kk = 0; kk < c->k; kk++)
                    host[(g * c->kp + kk) * c->mp + m] = w[(g * c->m + m) * c->k + kk];
        c->w = (float *)upload_new(dev, host, w_el * sizeof(float), name, err);
        if (c->w && !c->pw) {
            /* k = (ci kh + ky) kw + kx, as the weight's (c_in/groups, kh, kw) */
            int4 *tab = (int4 *)calloc((size_t)c->k, sizeof *tab);
            if (!tab) {
                hearth_err_set(err, HEARTH_ENOMEM, "conv '%s': out of host memory", name);
                goto fail;
            }
            for (int kk = 0; kk < c->k; kk++) {
                int khw = (int)(d->kh * d->kw), ci = kk / khw, ky = kk % khw / (int)d->kw, kx = kk % (int)d->kw;
                tab[kk] = make_int4(ci * (int)(d->h * d->w), ky * (int)d->dil_h, kx * (int)d->dil_w, 0);
            }
            c->ktab = (int4 *)upload_new(dev, tab, (size_t)c->k * sizeof *tab, name, err);
            free(tab);
            if (!c->ktab)
                goto fail;
        }
    }
    if (!c->w)
        goto fail;
    free(host);
    host = (float *)calloc((size_t)d->c_out, sizeof *host);
    if (!host) {
        hearth_err_set(err, HEARTH_ENOMEM, "conv '%s': out of host memory", name);
        goto fail;
    }
    if (bias)
        memcpy(host, bias, (size_t)d->c_out * sizeof *host);
    c->bias = (float *)upload_new(dev, host, (size_t)d->c_out * sizeof *host, name, err);
    if (!c->bias)
        goto fail;
    free(host);
    return c;
fail:
    free(host);
    cu_conv_free(c);
    return NULL;
}

void cu_conv_free(hearth_conv *c)
{
    if (!c)
        return;
    if (c->w)
        c->dev->ops->free(c->dev, c->w);
    if (c->bias)
        c->dev->ops->free(c->dev, c->bias);
    if (c->ktab)
        c->dev->ops->free(c->dev, c->ktab);
    free(c);
}

size_t cu_conv_work_bytes(const hearth_conv *c)
{
    if (!c || c->splits <= 1)
        return 0;
    return (size_t)c->splits * (size_t)(c->d.n * c->d.c_out * c->n_px) * sizeof(float);
}

/* ---- the call ---- */

template <int BM, int BN>
static int gemm_launch(cu_ctx *c, const hearth_conv *cv, dim3 grid, const conv_args &a, const float *X, float *Y,
                       float *part)
{
    if (cv->pw)
        return cu_vis_launch(c, "conv_gemm", conv_gemm_kernel<BM, BN, true>, grid, BM * BN / 16, a, X, Y, part);
    return cu_vis_launch(c, "conv_gemm", conv_gemm_kernel<BM, BN, false>, grid, BM * BN / 16, a, X, Y, part);
}

int cu_conv(cu_ctx *c, const hearth_conv *cv, const float *X, float *Y, void *work)
{
    if (!cv || !X || !Y || (cv->splits > 1 && !work) || hearth_dev_cuda_ordinal(cv->dev) != c->ordinal)
        return HEARTH_EINVAL;
    const hearth_conv_desc *d = &cv->d;
    conv_args a;
    a.n = (int)d->n, a.c_in = (int)d->c_in, a.h = (int)d->h, a.w = (int)d->w, a.c_out = (int)d->c_out;
    a.kh = (int)d->kh, a.kw = (int)d->kw, a.sh = (int)d->stride_h, a.sw = (int)d->stride_w;
    a.dh = (int)d->dil_h, a.dw = (int)d->dil_w, a.pt = (int)d->pad_t, a.pl = (int)d->pad_l;
    a.ho = (int)d->h_out, a.wo = (int)d->w_out, a.groups = (int)d->groups;
    a.m = cv->m, a.k = cv->k, a.n_px = cv->n_px, a.kp = cv->kp, a.mp = cv->mp, a.splits = cv->splits, a.ks = cv->ks;
    a.act = (int)d->act, a.lo = d->act_min, a.hi = d->act_max;
    a.W = cv->w, a.bias = cv->bias, a.ktab = cv->ktab;

    if (cv->kind == CONV_DW) {
        /* a small plane (8x10 = 80 pixels) gets a block its size, not 256 */
        int bt = cv->n_px >= 256 ? 256 : (cv->n_px + 31) / 32 * 32;
        int tiles = (cv->n_px + bt - 1) / bt;
        unsigned blocks = (unsigned)(d->n * d->c_out * tiles);
        if (d->kh == 3 && d->kw == 3)
            return cu_vis_launch(c, "conv_dw", conv_dw_kernel<3>, blocks, bt, a, X, Y, tiles);
        return cu_vis_launch(c, "conv_dw", conv_dw_kernel<0>, blocks, bt, a, X, Y, tiles);
    }

    dim3 grid((unsigned)((cv->n_px + cv->bn - 1) / cv->bn), (unsigned)(cv->mp / cv->bm),
              (unsigned)(d->n * d->groups * cv->splits));
    float *part = cv->splits > 1 ? (float *)work : NULL;
    int rc;
    switch (cv->bm * 100 + cv->bn) {
    case 1632: rc = gemm_launch<16, 32>(c, cv, grid, a, X, Y, part); break;
    case 1664: rc = gemm_launch<16, 64>(c, cv, grid, a, X, Y, part); break;
    case 3232: rc = gemm_launch<32, 32>(c, cv, grid, a, X, Y, part); break;
    case 3264: rc = gemm_launch<32, 64>(c, cv, grid, a, X, Y, part); break;
    case 6432: rc = gemm_launch<64, 32>(c, cv, grid, a, X, Y, part); break;
    case 6464: rc = gemm_launch<64, 64>(c, cv, grid, a, X, Y, part); break;
    default: return HEARTH_EINVAL;
    }
    if (rc || cv->splits <= 1)
        return rc;
    return cu_vis_launch(c, "conv_reduce", conv_reduce_kernel, cu_vis_blocks(d->n * d->c_out * cv->n_px), 256, a,
                         part, Y);
}

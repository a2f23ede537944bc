/* vision_ops.cu: the CUDA device's small conv-net ops (engine/dev_vision.h):
 * pool2d, binary (broadcast by strides), unary, softmax, strided_copy and
 * resize. Descriptors were checked by vision.cu.
 *
 * How: one thread per output element in a grid-stride loop (grids capped
 * by cu_vis_blocks), the element's coordinates decomposed from its flat
 * index. Binary and strided_copy first fold their dims on the host: dims of
 * 1 dropped, and neighbours merged where every operand is contiguous across
 * them (a bias broadcast over (1, 64, 30, 40) becomes (64, 1200) with B's
 * strides (1, 0)), so a kernel divides once or twice an element, not six
 * times; the flat index is 32-bit when the element count allows it (a
 * 64-bit division is several times the cost). Softmax: a thread per
 * (outer, inner) column when len <= 64 (UltraFace's is (4420, 2, 1)); past
 * that a block of 256 per column with shared-memory reductions. Math in
 * f32 with CUDA's precise expf/tanhf/powf (no fast-math intrinsics), as the
 * CPU's scalar code does in float.
 *
 * Rejected: a kernel per (op, ndim) pair (template bloat for ops that move
 * a few hundred KB); handing strided_copy to cudaMemcpy3DAsync (three dims
 * at most, no negative or zero strides). */
#include "engine/cuda/vision_int.h"

#include <math.h>

/* ---- pool2d ---- */

struct pool_args {
    hearth_pool2d_desc d;
};

__global__ static void pool2d_kernel(pool_args pa, const float *__restrict__ X, float *__restrict__ Y)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    const hearth_pool2d_desc &d = pa.d;
    const int64_t total = d.n * d.c * d.h_out * d.w_out;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t ow = i % d.w_out, t = i / d.w_out, oh = t % d.h_out, plane = t / d.h_out;
        const float *x = X + plane * d.h * d.w;
        int64_t h0 = oh * d.stride_h - d.pad_t, w0 = ow * d.stride_w - d.pad_l;
        float best = -INFINITY, sum = 0.0f;
        int64_t inside = 0, in_h = 0, in_w = 0;
        for (int64_t ky = 0; ky < d.kh; ky++) {
            int64_t ih = h0 + ky * d.dil_h;
            if (ih >= -d.pad_t && ih < d.h + d.pad_b)
                in_h++;
            if (ih < 0 || ih >= d.h)
                continue;
            for (int64_t kx = 0; kx < d.kw; kx++) {
                int64_t iw = w0 + kx * d.dil_w;
                if (iw < 0 || iw >= d.w)
                    continue;
                float v = x[ih * d.w + iw];
                best = v > best ? v : best;
                sum += v;
                inside++;
            }
        }
        float out;
        if (d.kind == HEARTH_POOL_MAX) {
            out = best;
        } else {
            for (int64_t kx = 0; kx < d.kw; kx++) {
                int64_t iw = w0 + kx * d.dil_w;
                if (iw >= -d.pad_l && iw < d.w + d.pad_r)
                    in_w++;
            }
            int64_t cnt = d.count_include_pad ? in_h * in_w : inside;
            out = cnt > 0 ? sum / (float)cnt : 0.0f;
        }
        Y[i] = out;
    }
}

int cu_vis_pool2d(cu_ctx *c, const hearth_pool2d_desc *d, const float *X, float *Y)
{
    pool_args pa = {*d};
    return cu_vis_launch(c, "pool2d", pool2d_kernel, cu_vis_blocks(d->n * d->c * d->h_out * d->w_out), 256, pa, X, Y);
}

/* ---- folding strided dims ---- */

/* Drops dims of 1 and merges dim k into k + 1 wherever, for each of the ns
 * stride arrays s[j], s[j][k] == s[j][k + 1] * dims[k + 1]. Returns the new
 * ndim (>= 1; a lone dim of 1 when every dim was 1). */
static int fold_dims(int ndim, int64_t *dims, int64_t (*s)[HEARTH_VIS_DIMS], int ns)
{
    int n = 0;
    for (int k = 0; k < ndim; k++) {
        if (dims[k] == 1)
            continue;
        bool merge = n > 0;
        for (int j = 0; j < ns && merge; j++)
            merge = s[j][n - 1] == s[j][k] * dims[k];
        if (merge) {
            dims[n - 1] *= dims[k];
            for (int j = 0; j < ns; j++)
                s[j][n - 1] = s[j][k];
        } else {
            dims[n] = dims[k];
            for (int j = 0; j < ns; j++)
                s[j][n] = s[j][k];
            n++;
        }
    }
    if (n == 0) {
        dims[0] = 1;
        for (int j = 0; j < ns; j++)
            s[j][0] = 0;
        n = 1;
    }
    return n;
}

/* The offsets of flat index i (dims[0..nd), the last fastest) under two
 * stride arrays. I: the index type (uint32_t where the count fits). */
template <typename I>
__device__ static inline void offsets(I i, int nd, const int64_t *dims, const int64_t *s0, const int64_t *s1,
                                      int64_t *o0, int64_t *o1)
{
    int64_t a = 0, b = 0;
#pragma unroll
    for (int k = HEARTH_VIS_DIMS - 1; k >= 0; k--) {
        if (k >= nd)
            continue;
        I dk = (I)dims[k], q = i / dk, r = i - q * dk;
        a += (int64_t)r * s0[k];
        b += (int64_t)r * s1[k];
        i = q;
    }
    *o0 = a;
    *o1 = b;
}

/* ---- binary ---- */

struct bin_args {
    int op, nd;
    int64_t total;
    int64_t dims[HEARTH_VIS_DIMS], as[HEARTH_VIS_DIMS], bs[HEARTH_VIS_DIMS];
};

__device__ static inline float bin_op(int op, float x, float y)
{
    switch (op) {
    case HEARTH_BIN_ADD: return x + y;
    case HEARTH_BIN_SUB: return x - y;
    case HEARTH_BIN_MUL: return x * y;
    case HEARTH_BIN_DIV: return x / y;
    case HEARTH_BIN_MAX: return fmaxf(x, y);
    case HEARTH_BIN_MIN: return fminf(x, y);
    default: return powf(x, y);
    }
}

template <typename I>
__global__ static void binary_kernel(bin_args a, const float *A, const float *B, float *Y)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < (I)a.total; i += (I)gridDim.x * blockDim.x) {
        int64_t oa, ob;
        offsets<I>(i, a.nd, a.dims, a.as, a.bs, &oa, &ob);
        Y[i] = bin_op(a.op, A[oa], B[ob]);
    }
}

int cu_vis_binary(cu_ctx *c, const hearth_binary_desc *d, const float *A, const float *B, float *Y)
{
    bin_args a;
    int64_t s[2][HEARTH_VIS_DIMS];
    a.op = (int)d->op;
    a.total = 1;
    for (int k = 0; k < d->ndim; k++) {
        a.dims[k] = d->dims[k];
        s[0][k] = d->a_stride[k];
        s[1][k] = d->b_stride[k];
        a.total *= d->dims[k];
    }
    if (a.total == 0)
        return 0;
    a.nd = fold_dims(d->ndim, a.dims, s, 2);
    for (int k = 0; k < HEARTH_VIS_DIMS; k++) {
        a.as[k] = k < a.nd ? s[0][k] : 0;
        a.bs[k] = k < a.nd ? s[1][k] : 0;
        if (k >= a.nd)
            a.dims[k] = 1;
    }
    /* 32-bit when i + the grid's stride cannot wrap */
    if (a.total < (int64_t)1 << 31)
        return cu_vis_launch(c, "binary", binary_kernel<uint32_t>, cu_vis_blocks(a.total), 256, a, A, B, Y);
    return cu_vis_launch(c, "binary", binary_kernel<int64_t>, cu_vis_blocks(a.total), 256, a, A, B, Y);
}

/* ---- unary ---- */

__global__ static void unary_kernel(int op, const float *X, float *Y, int64_t n, float pa, float pb)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float x = X[i], y;
        switch (op) {
        case HEARTH_UN_RELU: y = x > 0.0f ? x : 0.0f; break;
        case HEARTH_UN_SIGMOID: y = 1.0f / (1.0f + expf(-x)); break;
        case HEARTH_UN_EXP: y = expf(x); break;
        case HEARTH_UN_TANH: y = tanhf(x); break;
        case HEARTH_UN_CLIP: y = fminf(fmaxf(x, pa), pb); break;
        case HEARTH_UN_LEAKY_RELU: y = x < 0.0f ? pa * x : x; break;
        case HEARTH_UN_HARD_SIGMOID: y = fmaxf(0.0f, fminf(1.0f, pa * x + pb)); break;
        case HEARTH_UN_HARD_SWISH: y = x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f)); break;
        case HEARTH_UN_NEG: y = -x; break;
        case HEARTH_UN_SQRT: y = sqrtf(x); break;
        case HEARTH_UN_ABS: y = fabsf(x); break;
        default: y = logf(x); break;
        }
        Y[i] = y;
    }
}

int cu_vis_unary(cu_ctx *c, hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b)
{
    return cu_vis_launch(c, "unary", unary_kernel, cu_vis_blocks(n), 256, (int)op, X, Y, n, a, b);
}

/* ---- softmax ---- */

static constexpr int SOFTMAX_COLUMN_MAX = 64; /* len up to this: a thread per column */

/* Thread per column (o, i): X[o len inner + j inner + i], j < len. In place
 * is safe: a thread reads its column before writing it. */
__global__ static void softmax_col_kernel(const float *X, float *Y, int64_t outer, int64_t len, int64_t inner)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    const int64_t cols = outer * inner;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < cols; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, i = t - o * inner, base = o * len * inner + i;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < len; j++)
            mx = fmaxf(mx, X[base + j * inner]);
        for (int64_t j = 0; j < len; j++)
            sum += expf(X[base + j * inner] - mx);
        float inv = 1.0f / sum;
        for (int64_t j = 0; j < len; j++)
            Y[base + j * inner] = expf(X[base + j * inner] - mx) * inv;
    }
}

/* Reduces v over the block (256 threads) with f (max or sum); every thread
 * gets the result. The first barrier lets a block call it twice in a row. */
template <bool MAX> __device__ static float block_reduce(float v)
{
    __shared__ float sh[32];
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        sh[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < (blockDim.x >> 5) ? sh[threadIdx.x & 31] : (MAX ? -INFINITY : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, u) : v + u;
    }
    return v;
}

/* A block of 256 per column, columns strided over the grid. */
__global__ static void __launch_bounds__(256)
    softmax_block_kernel(const float *X, float *Y, int64_t outer, int64_t len, int64_t inner)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    const int64_t cols = outer * inner;
    for (int64_t t = blockIdx.x; t < cols; t += gridDim.x) {
        int64_t o = t / inner, i = t - o * inner, base = o * len * inner + i;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            mx = fmaxf(mx, X[base + j * inner]);
        mx = block_reduce<true>(mx);
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            sum += expf(X[base + j * inner] - mx);
        float inv = 1.0f / block_reduce<false>(sum);
        /* every thread has read all it needs (the reductions' barriers) */
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            Y[base + j * inner] = expf(X[base + j * inner] - mx) * inv;
        __syncthreads(); /* the next column's first reduction reuses sh */
    }
}

int cu_vis_softmax(cu_ctx *c, const float *X, float *Y, int64_t outer, int64_t len, int64_t inner)
{
    int64_t cols = outer * inner;
    if (len <= SOFTMAX_COLUMN_MAX) {
        return cu_vis_launch(c, "softmax (columns)", softmax_col_kernel, cu_vis_blocks(cols), 256, X, Y, outer, len,
                             inner);
    }
    unsigned blocks = (unsigned)(cols < 65535 * 16 ? cols : 65535 * 16);
    return cu_vis_launch(c, "softmax (blocks)", softmax_block_kernel, blocks, 256, X, Y, outer, len, inner);
}

/* ---- strided copy ---- */

struct copy_args {
    int nd;
    int64_t total;
    int64_t dims[HEARTH_VIS_DIMS], ss[HEARTH_VIS_DIMS], ds[HEARTH_VIS_DIMS];
};

template <typename E, typename I>
__global__ static void strided_kernel(copy_args a, const E *__restrict__ src, E *__restrict__ dst)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < (I)a.total; i += (I)gridDim.x * blockDim.x) {
        int64_t os, od;
        offsets<I>(i, a.nd, a.dims, a.ss, a.ds, &os, &od);
        dst[od] = src[os];
    }
}

template <typename E> static int strided_launch(cu_ctx *c, const copy_args &a, const void *src, void *dst)
{
    if (a.total < (int64_t)1 << 31)
        return cu_vis_launch(c, "strided_copy", strided_kernel<E, uint32_t>, cu_vis_blocks(a.total), 256, a,
                             (const E *)src, (E *)dst);
    return cu_vis_launch(c, "strided_copy", strided_kernel<E, int64_t>, cu_vis_blocks(a.total), 256, a,
                         (const E *)src, (E *)dst);
}

int cu_vis_strided_copy(cu_ctx *c, const hearth_strided_desc *d, const void *src, void *dst)
{
    copy_args a;
    int64_t s[2][HEARTH_VIS_DIMS];
    a.total = 1;
    for (int k = 0; k < d->ndim; k++) {
        a.dims[k] = d->dims[k];
        s[0][k] = d->src_stride[k];
        s[1][k] = d->dst_stride[k];
        a.total *= d->dims[k];
    }
    if (a.total == 0)
        return 0;
    a.nd = fold_dims(d->ndim, a.dims, s, 2);
    for (int k = 0; k < HEARTH_VIS_DIMS; k++) {
        a.ss[k] = k < a.nd ? s[0][k] : 0;
        a.ds[k] = k < a.nd ? s[1][k] : 0;
        if (k >= a.nd)
            a.dims[k] = 1;
    }
    switch (d->elem_bytes) {
    case 1: return strided_launch<uint8_t>(c, a, src, dst);
    case 2: return strided_launch<uint16_t>(c, a, src, dst);
    case 4: return strided_launch<uint32_t>(c, a, src, dst);
    default: return strided_launch<uint64_t>(c, a, src, dst);
    }
}

/* ---- resize ---- */

struct resize_args {
    hearth_resize_desc d;
};

/* The input coordinate of output coordinate x (ONNX's transforms; scale =
 * out / in). */
__device__ static inline float resize_coord(int coord, int64_t x, float scale, int64_t in, int64_t out)
{
    switch (coord) {
    case HEARTH_COORD_ASYMMETRIC: return (float)x / scale;
    case HEARTH_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? ((float)x + 0.5f) / scale - 0.5f : 0.0f;
    case HEARTH_COORD_ALIGN_CORNERS: return out > 1 ? (float)x * (float)(in - 1) / (float)(out - 1) : 0.0f;
    default: return ((float)x + 0.5f) / scale - 0.5f;
    }
}

/* The nearest input index to coordinate f, rounded by mode, clamped to
 * [0, in - 1]. */
__device__ static inline int64_t resize_nearest(int round, float f, int64_t in)
{
    float fl = floorf(f), r;
    switch (round) {
    case HEARTH_ROUND_PREFER_CEIL: r = f == fl + 0.5f ? fl + 1.0f : roundf(f); break;
    case HEARTH_ROUND_FLOOR: r = fl; break;
    case HEARTH_ROUND_CEIL: r = ceilf(f); break;
    default: r = f == fl + 0.5f ? fl : roundf(f); break;
    }
    int64_t i = r < 0.0f ? 0 : r > (float)(in - 1) ? in - 1 : (int64_t)r;
    return i;
}

__global__ static void resize_kernel(resize_args ra, const float *__restrict__ X, float *__restrict__ Y)
{
    cu_pdl_trigger();
    cu_pdl_wait();
    const hearth_resize_desc &d = ra.d;
    const int64_t total = d.n * d.c * d.h_out * d.w_out;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t ox = i % d.w_out, t = i / d.w_out, oy = t % d.h_out, plane = t / d.h_out;
        const float *x = X + plane * d.h * d.w;
        float fy = resize_coord(d.coord, oy, d.scale_h, d.h, d.h_out);
        float fx = resize_coord(d.coord, ox, d.scale_w, d.w, d.w_out);
        if (d.mode == HEARTH_RESIZE_NEAREST) {
            Y[i] = x[resize_nearest(d.round, fy, d.h) * d.w + resize_nearest(d.round, fx, d.w)];
            continue;
        }
        fy = fminf(fmaxf(fy, 0.0f), (float)(d.h - 1));
        fx = fminf(fmaxf(fx, 0.0f), (float)(d.w - 1));
        int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
        int64_t y1 = y0 + 1 < d.h ? y0 + 1 : d.h - 1, x1 = x0 + 1 < d.w ? x0 + 1 : d.w - 1;
        float ly = fy - (float)y0, lx = fx - (float)x0;
        float top = x[y0 * d.w + x0] * (1.0f - lx) + x[y0 * d.w + x1] * lx;
        float bot = x[y1 * d.w + x0] * (1.0f - lx) + x[y1 * d.w + x1] * lx;
        Y[i] = top * (1.0f - ly) + bot * ly;
    }
}

int cu_vis_resize(cu_ctx *c, const hearth_resize_desc *d, const float *X, float *Y)
{
    resize_args ra = {*d};
    return cu_vis_launch(c, "resize", resize_kernel, cu_vis_blocks(d->n * d->c * d->h_out * d->w_out), 256, ra, X, Y);
}

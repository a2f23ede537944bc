/* ops.c: the small row-wise ops, in portable C, and the dispatch of the
 * ones with an AVX-512 version (ops_avx512.c).
 *
 * These are O(n) per row against the O(n^2) matmuls around them, so the
 * portable versions are written for clarity and left to the compiler;
 * reductions (means, variances, norms) accumulate in double, which costs
 * nothing measurable at these sizes and keeps a 4096-wide row exact to
 * float. Softmax subtracts the row max so exp never overflows. The
 * portable versions stay the oracle and the fallback; the BERT encoder
 * spent 13% of its time in scalar erff (GELU) and 4% in LayerNorm, and
 * llama's SwiGLU ~4% in expf, which is why those have vector versions.
 * The table is picked once (pthread_once): one indirect call per row. */
#include "engine/cpu/ops.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/ops_impl.h"

#include "base/err.h"

#include <math.h>
#include <pthread.h>

static const hearth_cpu_ops *g_ops;
static pthread_once_t g_ops_once = PTHREAD_ONCE_INIT;

static void pick_ops(void)
{
    g_ops = hearth_cpu_matmul_isa() == HEARTH_ISA_AVX512 ? &hearth_cpu_ops_avx512 : &hearth_cpu_ops_scalar;
}

const hearth_cpu_ops *hearth_cpu_ops_best(void)
{
    pthread_once(&g_ops_once, pick_ops);
    return g_ops;
}

static void layernorm(float *y, const float *x, int64_t n, const float *gamma, const float *beta, float eps)
{
    if (n <= 0)
        return;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++)
        sum += x[i];
    double mean = sum / (double)n;
    for (int64_t i = 0; i < n; i++)
        sq += (x[i] - mean) * (x[i] - mean);
    float inv = (float)(1.0 / sqrt(sq / (double)n + eps)), fmean = (float)mean;
    for (int64_t i = 0; i < n; i++) {
        float v = (x[i] - fmean) * inv;
        y[i] = v * (gamma ? gamma[i] : 1.0f) + (beta ? beta[i] : 0.0f);
    }
}

static void rmsnorm(float *y, const float *x, int64_t n, const float *weight, float eps)
{
    if (n <= 0)
        return;
    double sq = 0;
    for (int64_t i = 0; i < n; i++)
        sq += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(sq / (double)n + eps));
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * inv * (weight ? weight[i] : 1.0f);
}

static void softmax(float *y, const float *x, int64_t n)
{
    if (n <= 0)
        return;
    float max = x[0];
    for (int64_t i = 1; i < n; i++)
        max = x[i] > max ? x[i] : max;
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - max);
        sum += y[i];
    }
    float inv = (float)(1.0 / sum); /* sum >= 1: the max contributes exp(0) */
    for (int64_t i = 0; i < n; i++)
        y[i] *= inv;
}

static void gelu_erf(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

static void silu(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void swiglu(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

static void add(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

static void mul(float *y, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] * b[i];
}

static void scale(float *y, const float *x, float s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * s;
}

const hearth_cpu_ops hearth_cpu_ops_scalar = {
    .name = "scalar",
    .layernorm = layernorm,
    .rmsnorm = rmsnorm,
    .softmax = softmax,
    .gelu_erf = gelu_erf,
    .silu = silu,
    .swiglu = swiglu,
    .add = add,
    .mul = mul,
    .scale = scale,
};

void hearth_cpu_layernorm(float *y, const float *x, int64_t n, const float *gamma, const float *beta, float eps)
{
    hearth_cpu_ops_best()->layernorm(y, x, n, gamma, beta, eps);
}

void hearth_cpu_rmsnorm(float *y, const float *x, int64_t n, const float *weight, float eps)
{
    hearth_cpu_ops_best()->rmsnorm(y, x, n, weight, eps);
}

void hearth_cpu_softmax(float *y, const float *x, int64_t n)
{
    hearth_cpu_ops_best()->softmax(y, x, n);
}

void hearth_cpu_gelu_erf(float *y, const float *x, int64_t n)
{
    hearth_cpu_ops_best()->gelu_erf(y, x, n);
}

void hearth_cpu_silu(float *y, const float *x, int64_t n)
{
    hearth_cpu_ops_best()->silu(y, x, n);
}

void hearth_cpu_swiglu(float *y, const float *a, const float *b, int64_t n)
{
    hearth_cpu_ops_best()->swiglu(y, a, b, n);
}

void hearth_cpu_add(float *y, const float *a, const float *b, int64_t n)
{
    hearth_cpu_ops_best()->add(y, a, b, n);
}

void hearth_cpu_mul(float *y, const float *a, const float *b, int64_t n)
{
    hearth_cpu_ops_best()->mul(y, a, b, n);
}

void hearth_cpu_scale(float *y, const float *x, float s, int64_t n)
{
    hearth_cpu_ops_best()->scale(y, x, s, n);
}

void hearth_cpu_l2_normalize(float *y, const float *x, int64_t n, float eps)
{
    double sq = 0;
    for (int64_t i = 0; i < n; i++)
        sq += (double)x[i] * x[i];
    double norm = sqrt(sq);
    float inv = (float)(1.0 / (norm > eps ? norm : eps));
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * inv;
}

int hearth_cpu_rope(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float theta_base,
                    int neox)
{
    enum { MAX_PAIRS = 512 };
    if (n_rot < 0 || n_rot % 2 || n_rot > head_dim || n_rot / 2 > MAX_PAIRS)
        return HEARTH_EINVAL;
    int64_t half = n_rot / 2;
    float cs[MAX_PAIRS], sn[MAX_PAIRS];
    for (int64_t i = 0; i < half; i++) {
        double angle = (double)pos * pow((double)theta_base, -2.0 * (double)i / (double)n_rot);
        cs[i] = (float)cos(angle);
        sn[i] = (float)sin(angle);
    }
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * head_dim;
        for (int64_t i = 0; i < half; i++) {
            int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * cs[i] - x1 * sn[i];
            v[b] = x0 * sn[i] + x1 * cs[i];
        }
    }
    return 0;
}

void hearth_cpu_attn_head(float *out, const float *q, const float *k, int64_t k_stride, const float *v,
                          int64_t v_stride, int64_t n_kv, int64_t head_dim, float scale, const float *mask,
                          float *scores)
{
    for (int64_t j = 0; j < n_kv; j++) {
        const float *kj = k + j * k_stride;
        float dot = 0;
        for (int64_t d = 0; d < head_dim; d++)
            dot += q[d] * kj[d];
        scores[j] = dot * scale + (mask ? mask[j] : 0.0f);
    }
    hearth_cpu_softmax(scores, scores, n_kv);
    for (int64_t d = 0; d < head_dim; d++)
        out[d] = 0;
    for (int64_t j = 0; j < n_kv; j++) {
        const float *vj = v + j * v_stride;
        for (int64_t d = 0; d < head_dim; d++)
            out[d] += scores[j] * vj[d];
    }
}

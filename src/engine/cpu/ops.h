/* ops.h: the small fp32 ops of the encoder and decoder models, row-wise.
 *
 * Every function works on one row (or one head, or one token's heads) of
 * contiguous floats; the caller loops over rows, so the same calls serve a
 * batch of sequences or one token. Outputs may alias inputs exactly (y == x)
 * but must not partly overlap them. n may be 0. All are pure and thread-safe. */
#ifndef HEARTH_ENGINE_CPU_OPS_H
#define HEARTH_ENGINE_CPU_OPS_H

#include <stdint.h>

/* y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance as BERT
 * uses. gamma or beta NULL means 1 or 0. */
void hearth_cpu_layernorm(float *y, const float *x, int64_t n, const float *gamma, const float *beta, float eps);

/* y = x / sqrt(mean(x^2) + eps) * weight (weight NULL means 1). */
void hearth_cpu_rmsnorm(float *y, const float *x, int64_t n, const float *weight, float eps);

/* y = exp(x - max x) / sum; masked entries should hold a large finite
 * negative (-1e30f), never -INFINITY: a row masked entirely then comes out
 * uniform rather than NaN. */
void hearth_cpu_softmax(float *y, const float *x, int64_t n);

/* y = 0.5 x (1 + erf(x / sqrt 2)), the exact GELU of BERT. */
void hearth_cpu_gelu_erf(float *y, const float *x, int64_t n);
/* y = x / (1 + exp(-x)) */
void hearth_cpu_silu(float *y, const float *x, int64_t n);
/* y = silu(a) * b, the gated feed-forward of llama */
void hearth_cpu_swiglu(float *y, const float *a, const float *b, int64_t n);

void hearth_cpu_add(float *y, const float *a, const float *b, int64_t n); /* y = a + b */
void hearth_cpu_mul(float *y, const float *a, const float *b, int64_t n); /* y = a * b */
void hearth_cpu_scale(float *y, const float *x, float s, int64_t n);       /* y = s x */

/* y = x / max(||x||_2, eps) */
void hearth_cpu_l2_normalize(float *y, const float *x, int64_t n, float eps);

/* Rotary position embedding, in place, on one token's heads:
 * x is (n_heads, head_dim); the first n_rot dims of each head are rotated in
 * pairs by angle pos * theta_base^(-2i / n_rot), i = 0 .. n_rot/2 - 1; dims
 * from n_rot on are left as they are. Pair i is (2i, 2i+1) in the "normal"
 * ordering (neox = 0; llama in GGUF) and (i, i + n_rot/2) in the "neox" one
 * (neox = 1; qwen2, GPT-NeoX). Angles are computed in double, so large
 * positions keep their precision. Returns 0, or HEARTH_EINVAL when n_rot is
 * odd, > head_dim, or > 1024. */
int hearth_cpu_rope(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float theta_base,
                    int neox);

/* One attention head for one query:
 *   scores[j] = (q . K[j]) * scale + (mask ? mask[j] : 0)   j < n_kv
 *   p = softmax(scores);  out = sum_j p[j] V[j]
 * q: (head_dim); K, V: (n_kv, head_dim) with row strides k_stride, v_stride
 * floats (so heads can be read in place from a KV cache); scores: caller's
 * scratch of n_kv floats, left holding p. mask as for softmax. */
void hearth_cpu_attn_head(float *out, const float *q, const float *k, int64_t k_stride, const float *v,
                          int64_t v_stride, int64_t n_kv, int64_t head_dim, float scale, const float *mask,
                          float *scores);

#endif

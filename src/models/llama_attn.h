/* llama_attn.h: the attention of one query head over a slot's cached
 * positions, in one vector width per ISA (llama_attn_impl.h is the body). */
#ifndef HEARTH_MODELS_LLAMA_ATTN_H
#define HEARTH_MODELS_LLAMA_ATTN_H

#include <stdint.h>

/* out = softmax(q K^T * scale) V over rows 0 .. n_pos-1 of K and V, which are
 * (n_pos, hd) with a row stride of stride floats (one head's columns read in
 * place from the KV cache). hd <= LLAMA_HEAD_DIM_MAX; n_pos >= 1. */
typedef void (*llama_attn_fn)(float *out, const float *q, const float *K, const float *V, int64_t stride,
                              int64_t n_pos, int64_t hd, float scale);

void llama_attn_head_sse(float *out, const float *q, const float *K, const float *V, int64_t stride, int64_t n_pos,
                         int64_t hd, float scale);
void llama_attn_head_avx2(float *out, const float *q, const float *K, const float *V, int64_t stride, int64_t n_pos,
                          int64_t hd, float scale);
void llama_attn_head_avx512(float *out, const float *q, const float *K, const float *V, int64_t stride,
                            int64_t n_pos, int64_t hd, float scale);

/* The widest this CPU allows (hearth_cpu(), so HEARTH_CPU_DISABLE applies). */
llama_attn_fn llama_attn_pick(void);

#endif

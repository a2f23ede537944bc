/* llama_attn.h: the attention of one query head over a slot's cached
 * positions, in one vector width per ISA (llama_attn_impl.h is the body),
 * for a cache of f32 or f16 elements; and the f32 -> f16 store that fills an
 * f16 cache. */
#ifndef HEARTH_MODELS_LLAMA_ATTN_H
#define HEARTH_MODELS_LLAMA_ATTN_H

#include "engine/dtype.h"

#include <stdint.h>

/* out = softmax(q K^T * scale) V over rows 0 .. n_pos-1 of K and V, which are
 * (n_pos, hd) elements of the cache's type with a row stride of stride
 * elements (one head's columns read in place from the KV cache).
 * hd <= LLAMA_HEAD_DIM_MAX; n_pos >= 1. */
typedef void (*llama_attn_fn)(float *out, const float *q, const void *K, const void *V, int64_t stride,
                              int64_t n_pos, int64_t hd, float scale);
/* n floats to f16, rounded to nearest even (the same bits on every ISA). */
typedef void (*llama_kv_put_fn)(void *dst, const float *src, int64_t n);

#define LLAMA_ATTN_DECL(name)                                                                                     \
    void name(float *out, const float *q, const void *K, const void *V, int64_t stride, int64_t n_pos, int64_t hd, \
              float scale)
LLAMA_ATTN_DECL(llama_attn_head_sse);
LLAMA_ATTN_DECL(llama_attn_head_sse_f16);
LLAMA_ATTN_DECL(llama_attn_head_avx2);
LLAMA_ATTN_DECL(llama_attn_head_avx2_f16);
LLAMA_ATTN_DECL(llama_attn_head_avx512);
LLAMA_ATTN_DECL(llama_attn_head_avx512_f16);
void llama_kv_put_f16_scalar(void *dst, const float *src, int64_t n);
void llama_kv_put_f16_avx2(void *dst, const float *src, int64_t n);

/* The widest this CPU allows (hearth_cpu(), so HEARTH_CPU_DISABLE applies)
 * for a cache of kv_type (HEARTH_F32 or HEARTH_F16; NULL otherwise). */
llama_attn_fn llama_attn_pick(hearth_dtype kv_type);
llama_kv_put_fn llama_kv_put_pick(void);

#endif

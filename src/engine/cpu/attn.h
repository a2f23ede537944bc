/* attn.h: the attention of one query head over rows of K and V (a llama
 * slot's cached positions, a BERT sequence), in one vector width per ISA
 * (attn_impl.h is the body), for K and V of f32 or f16 elements; and the
 * f32 -> f16 store that fills an f16 KV cache. hearth_cpu_attn_head (ops.h)
 * is the plain scalar version the tests hold these to. */
#ifndef HEARTH_ENGINE_CPU_ATTN_H
#define HEARTH_ENGINE_CPU_ATTN_H

#include "engine/dtype.h"

#include <stdint.h>

/* Largest head size: a head's accumulators are kept on the stack. */
#define HEARTH_ATTN_HEAD_DIM_MAX 1024

/* out = softmax(q K^T * scale) V over rows 0 .. n_pos-1 of K and V, which are
 * (n_pos, hd) elements of one type with a row stride of stride elements
 * (one head's columns read in place from a KV cache or a Q/K/V buffer).
 * hd <= HEARTH_ATTN_HEAD_DIM_MAX; n_pos >= 1. */
typedef void (*hearth_attn_fn)(float *out, const float *q, const void *K, const void *V, int64_t stride,
                               int64_t n_pos, int64_t hd, float scale);
/* n floats to f16, rounded to nearest even (the same bits on every ISA). */
typedef void (*hearth_attn_store_fn)(void *dst, const float *src, int64_t n);

#define HEARTH_ATTN_DECL(name)                                                                                     \
    void name(float *out, const float *q, const void *K, const void *V, int64_t stride, int64_t n_pos, int64_t hd, \
              float scale)
HEARTH_ATTN_DECL(hearth_attn_head_sse);
HEARTH_ATTN_DECL(hearth_attn_head_sse_f16);
HEARTH_ATTN_DECL(hearth_attn_head_avx2);
HEARTH_ATTN_DECL(hearth_attn_head_avx2_f16);
HEARTH_ATTN_DECL(hearth_attn_head_avx512);
HEARTH_ATTN_DECL(hearth_attn_head_avx512_f16);
void hearth_attn_store_f16_scalar(void *dst, const float *src, int64_t n);
void hearth_attn_store_f16_avx2(void *dst, const float *src, int64_t n);

/* The widest this CPU allows (hearth_hw(), so HEARTH_CPU_DISABLE applies)
 * for a cache of kv_type (HEARTH_F32 or HEARTH_F16; NULL otherwise). */
hearth_attn_fn hearth_attn_pick(hearth_dtype kv_type);
hearth_attn_store_fn hearth_attn_store_pick(void);

#endif

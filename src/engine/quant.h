/* quant.h: the formats of weights as GGUF stores them: block layouts,
 * half and bfloat16 conversions, and rows of any type to and from f32.
 * Format code, not compute: loaders, converters and the demo writers use it
 * on any device; the kernels that read these blocks in place (dot products,
 * SIMD) are a backend's own (engine/cpu/quant.h adds the CPU's q8a
 * activations and its scalar dot products). The functions are implemented in
 * engine/cpu/quant_ref.c for now. All are pure and thread-safe. */
#ifndef HEARTH_ENGINE_QUANT_H
#define HEARTH_ENGINE_QUANT_H

#include "engine/dtype.h"

#include <stdint.h>
#include <string.h>

#define HEARTH_QK 32   /* elements per Q4_0 / Q8_0 / q8a block */
#define HEARTH_QK_K 256 /* elements per K-quant super-block */

typedef struct hearth_block_q4_0 {
    uint16_t d;       /* fp16 scale */
    uint8_t qs[16];   /* element j in the low nibble of qs[j], j + 16 in the high; x = d * (q - 8) */
} hearth_block_q4_0;

typedef struct hearth_block_q8_0 {
    uint16_t d;       /* fp16 scale */
    int8_t qs[32];    /* x = d * q */
} hearth_block_q8_0;

/* 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], with the 6-bit sc and
 * m packed in scales[12] (see hearth_q4k_scale_min). Elements 64c .. 64c+31
 * are the low nibbles of qs[32c .. 32c+31], 64c+32 .. 64c+63 the high ones. */
typedef struct hearth_block_q4_k {
    uint16_t d;       /* fp16 scale of the sub-block scales */
    uint16_t dmin;    /* fp16 scale of the sub-block mins */
    uint8_t scales[12];
    uint8_t qs[128];
} hearth_block_q4_k;

/* 16 sub-blocks of 16: x = d * scales[i / 16] * (q - 32), q a 6-bit value.
 * In each half of 128 elements (ql += 64, qh += 32 per half), element l
 * (0..31) takes the low nibble of ql[l] and bits 0-1 of qh[l]; l + 32 the low
 * nibble of ql[l + 32] and bits 2-3; l + 64 the high nibble of ql[l] and bits
 * 4-5; l + 96 the high nibble of ql[l + 32] and bits 6-7. */
typedef struct hearth_block_q6_k {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;       /* fp16 */
} hearth_block_q6_k;

#ifndef __cplusplus /* the CUDA backend includes this too (mm.cu: Q4_K's scales) */
_Static_assert(sizeof(hearth_block_q4_0) == 18, "GGUF block_q4_0 is 18 bytes");
_Static_assert(sizeof(hearth_block_q8_0) == 34, "GGUF block_q8_0 is 34 bytes");
_Static_assert(sizeof(hearth_block_q4_k) == 144, "GGUF block_q4_K is 144 bytes");
_Static_assert(sizeof(hearth_block_q6_k) == 210, "GGUF block_q6_K is 210 bytes");
#endif

/* IEEE half and bfloat16 <-> float, round to nearest even (NaN stays NaN). */
float hearth_fp16_to_f32(uint16_t h);
uint16_t hearth_f32_to_fp16(float f);
static inline float hearth_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t hearth_f32_to_bf16(float f);

/* Sub-block j (0..7) of a Q4_K block: its 6-bit scale and min. */
static inline void hearth_q4k_scale_min(const uint8_t *scales, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
        *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
}

/* n elements of type t (n a multiple of the block size) to f32.
 * Returns 0, or HEARTH_EINVAL for an unsupported type or a partial block. */
int hearth_quant_dequantize_row(hearth_dtype t, const void *src, float *dst, int64_t n);

/* n floats to type t, round to nearest (per-block scales from the block's
 * range; Q4_K / Q6_K sub-block scales rounded up so no value is clipped by
 * more than half a step). Returns 0 or HEARTH_EINVAL as above. */
int hearth_quant_quantize_row(hearth_dtype t, const float *src, void *dst, int64_t n);

#endif

/* quant.h: GGUF block layouts, conversions and the scalar reference of every
 * per-type kernel (dequantize, quantize, dot product).
 *
 * Weights stay in their stored blocks; the matmul kernels read them in place.
 * For the quantized types a dot product is taken against activations that
 * were themselves quantized once per call to hearth_block_q8a (32 int8 with a
 * float scale), so the inner loop is an integer dot product (VNNI vpdpbusd,
 * AVX2 vpmaddubsw); the scalar functions here compute exactly the same
 * integer sums, so the SIMD versions can be checked against them to float
 * rounding. All functions are pure and thread-safe. */
#ifndef HEARTH_ENGINE_CPU_QUANT_H
#define HEARTH_ENGINE_CPU_QUANT_H

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

/* Activations quantized for the integer dot products: x ~= d * qs[i], with d
 * = max|x| / 127 kept in fp32 (no fp16 rounding: activations are made per
 * call, not stored), and s = d * sum(qs) for the types whose weights carry an
 * offset (Q4_K's mins). */
typedef struct hearth_block_q8a {
    int8_t qs[32];
    float d;
    float s;
} hearth_block_q8a;

_Static_assert(sizeof(hearth_block_q4_0) == 18, "GGUF block_q4_0 is 18 bytes");
_Static_assert(sizeof(hearth_block_q8_0) == 34, "GGUF block_q8_0 is 34 bytes");
_Static_assert(sizeof(hearth_block_q4_k) == 144, "GGUF block_q4_K is 144 bytes");
_Static_assert(sizeof(hearth_block_q6_k) == 210, "GGUF block_q6_K is 210 bytes");

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

/* True for the types whose dot products take q8a activations (Q4_0, Q8_0,
 * Q4_K, Q6_K); false for F32, F16, BF16, which take the float vector. */
bool hearth_quant_uses_q8a(hearth_dtype t);

/* n elements of type t (n a multiple of the block size) to f32.
 * Returns 0, or HEARTH_EINVAL for an unsupported type or a partial block. */
int hearth_quant_dequantize_row(hearth_dtype t, const void *src, float *dst, int64_t n);

/* n floats to type t, round to nearest (per-block scales from the block's
 * range; Q4_K / Q6_K sub-block scales rounded up so no value is clipped by
 * more than half a step). Returns 0 or HEARTH_EINVAL as above. */
int hearth_quant_quantize_row(hearth_dtype t, const float *src, void *dst, int64_t n);

/* n floats (a multiple of 32) to n / 32 q8a blocks. */
void hearth_quant_q8a_row(const float *src, hearth_block_q8a *dst, int64_t n);

/* Dot product of one row of n elements of type t with x, where x is a float
 * vector or, when hearth_quant_uses_q8a(t), n / 32 q8a blocks. Integer sums
 * per block are exact; they and the float terms are accumulated in double.
 * This is the oracle the SIMD versions are tested against. */
typedef float (*hearth_vec_dot_fn)(const void *w, const void *x, int64_t n);
float hearth_quant_vec_dot_ref(hearth_dtype t, const void *w, const void *x, int64_t n);
/* The scalar function itself, or NULL for an unsupported type. */
hearth_vec_dot_fn hearth_quant_vec_dot_ref_fn(hearth_dtype t);

#endif

/* quant.h: the CPU's side of the weight formats: the q8a activations of its
 * integer dot products and the scalar reference of every per-type dot
 * product. The formats themselves (block layouts, conversions, rows to and
 * from f32) are engine/quant.h's, included here.
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
#include "engine/quant.h"

#include <stdint.h>
#include <string.h>

/* Activations quantized for the integer dot products: x ~= d * qs[i], with d
 * = max|x| / 127 kept in fp32 (no fp16 rounding: activations are made per
 * call, not stored), and s = d * sum(qs) for the types whose weights carry an
 * offset (Q4_K's mins). */
typedef struct hearth_block_q8a {
    int8_t qs[32];
    float d;
    float s;
} hearth_block_q8a;

/* True for the types whose dot products take q8a activations (Q4_0, Q8_0,
 * Q4_K, Q6_K); false for F32, F16, BF16, which take the float vector. */
bool hearth_quant_uses_q8a(hearth_dtype t);

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

/* ops_impl.h: the table of row-wise ops each ISA file provides, private to
 * src/engine/cpu (and the tests, which check every table against the
 * formulas).
 *
 * ops.c's public functions call the table chosen once from hearth_hw()
 * (through hearth_cpu_matmul_isa, so HEARTH_CPU_DISABLE forces the portable
 * one); ops.c holds the portable table too. The contracts are ops.h's. */
#ifndef HEARTH_ENGINE_CPU_OPS_IMPL_H
#define HEARTH_ENGINE_CPU_OPS_IMPL_H

#include <stdint.h>

typedef struct hearth_cpu_ops {
    const char *name;
    void (*layernorm)(float *y, const float *x, int64_t n, const float *gamma, const float *beta, float eps);
    void (*rmsnorm)(float *y, const float *x, int64_t n, const float *weight, float eps);
    void (*softmax)(float *y, const float *x, int64_t n);
    void (*gelu_erf)(float *y, const float *x, int64_t n);
    void (*silu)(float *y, const float *x, int64_t n);
    void (*swiglu)(float *y, const float *a, const float *b, int64_t n);
    void (*add)(float *y, const float *a, const float *b, int64_t n);
    void (*mul)(float *y, const float *a, const float *b, int64_t n);
    void (*scale)(float *y, const float *x, float s, int64_t n);
} hearth_cpu_ops;

extern const hearth_cpu_ops hearth_cpu_ops_scalar;
extern const hearth_cpu_ops hearth_cpu_ops_avx512;

/* The table the public functions use; decided once. */
const hearth_cpu_ops *hearth_cpu_ops_best(void);

#endif

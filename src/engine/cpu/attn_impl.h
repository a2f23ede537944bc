/* attn_impl.h: the body of one attention head, included by
 * attn.c (baseline SSE2), attn_avx2.c and attn_avx512.c,
 * each defining first ATTN_NAME, ATTN_VBYTES (vector bytes), ATTN_KV (the
 * cache's element: float or uint16_t for f16) with, for f16, ATTN_KV_LOAD(p)
 * (VL elements at p as a vf) and ATTN_KV_AT(p, i) (one element as float),
 * and ATTN_LINKAGE (static) where the body is only a fallback. A file may
 * include it more than once (f32 and f16 caches); the ATTN_ macros are
 * undefined at the end. Written with
 * GCC/Clang vector extensions so one source serves every width; the
 * compiler flags of the including file (Makefile ISA_*) pick the
 * instructions.
 *
 * How: K and V rows are streamed once, front to back, with an online
 * softmax in blocks of ATTN_BLOCK scores kept on the stack: per block the
 * scores and their max; when the max grows the running sum and the output
 * accumulator are rescaled by exp(old - new). So no scratch of n_pos floats
 * is needed, whatever the context. */
#include "engine/cpu/attn.h"

#include <math.h>
#include <string.h>

#ifndef ATTN_HELPERS_DONE
#define ATTN_HELPERS_DONE
#define ATTN_BLOCK 256
#define VL (ATTN_VBYTES / 4)
#define ATTN_CAT2(a, b) a##b
#define ATTN_CAT(a, b) ATTN_CAT2(a, b)

typedef float vf __attribute__((vector_size(ATTN_VBYTES)));

static inline vf vload(const float *p)
{
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }
#endif

#ifndef ATTN_KV_LOAD
#define ATTN_KV_LOAD(p) vload(p)
#define ATTN_KV_AT(p, i) ((p)[i])
#endif
#ifndef ATTN_LINKAGE
#define ATTN_LINKAGE
#endif

/* q . one row of the cache, n elements (hv of them in whole vectors). */
static inline float ATTN_CAT(vdot_, ATTN_NAME)(const float *a, const ATTN_KV *b, int64_t hv, int64_t n)
{
    vf s0 = {0}, s1 = {0};
    int64_t d = 0;
    for (; d + 2 * VL <= hv; d += 2 * VL) {
        s0 += vload(a + d) * ATTN_KV_LOAD(b + d);
        s1 += vload(a + d + VL) * ATTN_KV_LOAD(b + d + VL);
    }
    for (; d < hv; d += VL)
        s0 += vload(a + d) * ATTN_KV_LOAD(b + d);
    s0 += s1;
    float s = 0;
    for (int l = 0; l < VL; l++)
        s += s0[l];
    for (; d < n; d++)
        s += a[d] * ATTN_KV_AT(b, d);
    return s;
}

ATTN_LINKAGE void ATTN_NAME(float *out, const float *q, const void *Kv, const void *Vv, int64_t stride,
                            int64_t n_pos, int64_t hd, float scale)
{
    const ATTN_KV *K = Kv, *V = Vv;
    float acc[HEARTH_ATTN_HEAD_DIM_MAX], sc[ATTN_BLOCK];
    int64_t hv = hd - hd % VL;
    memset(acc, 0, (size_t)hd * sizeof acc[0]);
    float mx = -INFINITY, sum = 0;
    for (int64_t p0 = 0; p0 < n_pos; p0 += ATTN_BLOCK) {
        int64_t np = n_pos - p0 < ATTN_BLOCK ? n_pos - p0 : ATTN_BLOCK;
        float bm = -INFINITY;
        for (int64_t j = 0; j < np; j++) {
            sc[j] = ATTN_CAT(vdot_, ATTN_NAME)(q, K + (p0 + j) * stride, hv, hd) * scale;
            bm = sc[j] > bm ? sc[j] : bm;
        }
        if (bm > mx) {
            float r = expf(mx - bm); /* 0 on the first block: mx is -inf */
            sum *= r;
            for (int64_t d = 0; d < hd; d++)
                acc[d] *= r;
            mx = bm;
        }
        for (int64_t j = 0; j < np; j++) {
            float w = expf(sc[j] - mx);
            const ATTN_KV *v = V + (p0 + j) * stride;
            sum += w;
            int64_t d = 0;
            for (; d < hv; d += VL)
                vstore(acc + d, vload(acc + d) + w * ATTN_KV_LOAD(v + d));
            for (; d < hd; d++)
                acc[d] += w * ATTN_KV_AT(v, d);
        }
    }
    float inv = 1.0f / sum;
    for (int64_t d = 0; d < hd; d++)
        out[d] = acc[d] * inv;
}

#undef ATTN_NAME
#undef ATTN_KV
#undef ATTN_KV_LOAD
#undef ATTN_KV_AT
#undef ATTN_LINKAGE

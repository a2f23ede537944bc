/* attn.c: the baseline (SSE2, 4 floats) attention heads, the scalar
 * f16 store, and the choice of width. The body is attn_impl.h;
 * attn_avx2.c and attn_avx512.c compile it for 8 and 16 floats.
 * The baseline has no F16C, so its f16 heads convert element by element:
 * correct, and only for CPUs that old.
 *
 * Rejected: hearth_cpu_attn_head from engine/cpu/ops.h, which needs a scratch
 * of n_pos scores per call: pool tasks have no thread index, so that scratch
 * would be n_tokens * n_head * n_ctx floats. */
#include "engine/cpu/attn.h"

#include "base/hw.h"
#include "engine/cpu/quant.h"

#define ATTN_NAME hearth_attn_head_sse
#define ATTN_VBYTES 16
#define ATTN_KV float
#include "engine/cpu/attn_impl.h"

static inline vf load_h(const uint16_t *p)
{
    vf v;
    for (int l = 0; l < VL; l++)
        v[l] = hearth_fp16_to_f32(p[l]);
    return v;
}

#define ATTN_NAME hearth_attn_head_sse_f16
#define ATTN_KV uint16_t
#define ATTN_KV_LOAD(p) load_h(p)
#define ATTN_KV_AT(p, i) hearth_fp16_to_f32((p)[i])
#include "engine/cpu/attn_impl.h"

void hearth_attn_store_f16_scalar(void *dst, const float *src, int64_t n)
{
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++)
        d[i] = hearth_f32_to_fp16(src[i]);
}

static bool has_avx2(const hearth_hw_info *c)
{
    return c->avx2 && c->fma && c->f16c;
}

static bool has_avx512(const hearth_hw_info *c)
{
    /* every feature the file's flags (Makefile ISA_*) let the compiler use */
    return has_avx2(c) && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512_vnni &&
           c->avx512_bf16;
}

hearth_attn_fn hearth_attn_pick(hearth_dtype kv_type)
{
    const hearth_hw_info *c = hearth_hw();
    bool f16 = kv_type == HEARTH_F16;
    if (kv_type != HEARTH_F32 && !f16)
        return NULL;
    if (has_avx512(c))
        return f16 ? hearth_attn_head_avx512_f16 : hearth_attn_head_avx512;
    if (has_avx2(c))
        return f16 ? hearth_attn_head_avx2_f16 : hearth_attn_head_avx2;
    return f16 ? hearth_attn_head_sse_f16 : hearth_attn_head_sse;
}

hearth_attn_store_fn hearth_attn_store_pick(void)
{
    return has_avx2(hearth_hw()) ? hearth_attn_store_f16_avx2 : hearth_attn_store_f16_scalar;
}

/* llama_attn.c: the baseline (SSE2, 4 floats) attention head and the choice
 * of width. The body is llama_attn_impl.h; llama_attn_avx2.c and
 * llama_attn_avx512.c compile it for 8 and 16 floats.
 *
 * Rejected: hearth_cpu_attn_head from engine/cpu/ops.h, which needs a scratch
 * of n_pos scores per call: pool tasks have no thread index, so that scratch
 * would be n_tokens * n_head * n_ctx floats. */
#include "models/llama_attn.h"

#include "base/cpu.h"

#define ATTN_NAME llama_attn_head_sse
#define ATTN_VBYTES 16
#include "models/llama_attn_impl.h"

llama_attn_fn llama_attn_pick(void)
{
    const hearth_cpu_info *c = hearth_cpu();
    /* every feature the file's flags (Makefile ISA_*) let the compiler use */
    bool avx2 = c->avx2 && c->fma && c->f16c;
    if (avx2 && c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512_vnni && c->avx512_bf16)
        return llama_attn_head_avx512;
    if (avx2)
        return llama_attn_head_avx2;
    return llama_attn_head_sse;
}

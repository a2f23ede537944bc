/* attn_avx2.c: attn_impl.h for 8 floats (AVX2 + FMA + F16C flags
 * from the Makefile), for f32 and f16 caches, and the F16C store; called only
 * when hearth_hw() reports AVX2, FMA and F16C. */
#include "engine/cpu/attn.h"

#include <immintrin.h>

#define ATTN_NAME hearth_attn_head_avx2
#define ATTN_VBYTES 32
#define ATTN_KV float
#include "engine/cpu/attn_impl.h"

static inline vf load_h(const uint16_t *p)
{
    return (vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

#define ATTN_NAME hearth_attn_head_avx2_f16
#define ATTN_KV uint16_t
#define ATTN_KV_LOAD(p) load_h(p)
#define ATTN_KV_AT(p, i) _cvtsh_ss((p)[i])
#include "engine/cpu/attn_impl.h"

/* vcvtps2ph rounds to nearest even like hearth_f32_to_fp16 (test_attn
 * compares the two on every ISA). */
void hearth_attn_store_f16_avx2(void *dst, const float *src, int64_t n)
{
    uint16_t *d = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        d[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

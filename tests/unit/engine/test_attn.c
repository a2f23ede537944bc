/* Unit tests for the attention heads (src/engine/cpu/attn*.c): each vector
 * width against a double-precision softmax, and the f16 stores against
 * hearth_f32_to_fp16. */
#include "harness.h"

#include "base/hw.h"
#include "engine/cpu/attn.h"
#include "engine/cpu/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The attention head in each vector width, for f32 and f16 caches, == a
 * double-precision softmax over the cache's values (the f16 cache's values
 * are the rounded ones, so the bound is the same), over more positions than
 * one online-softmax block, and head sizes with and without a vector tail. */
static void attention_head_widths(void)
{
    const hearth_hw_info *c = hearth_hw();
    bool avx2 = c->avx2 && c->fma && c->f16c, avx512 = hearth_attn_pick(HEARTH_F32) == hearth_attn_head_avx512;
    struct {
        hearth_attn_fn fn;
        bool ok, f16;
        const char *name;
    } v[6] = {{hearth_attn_head_sse, true, false, "sse"},
              {hearth_attn_head_avx2, avx2, false, "avx2"},
              {hearth_attn_head_avx512, avx512, false, "avx512"},
              {hearth_attn_head_sse_f16, true, true, "sse f16"},
              {hearth_attn_head_avx2_f16, avx2, true, "avx2 f16"},
              {hearth_attn_head_avx512_f16, avx512, true, "avx512 f16"}};
    CHECK(hearth_attn_pick(HEARTH_F16) == (avx512 ? hearth_attn_head_avx512_f16
                                          : avx2 ? hearth_attn_head_avx2_f16
                                                 : hearth_attn_head_sse_f16));
    CHECK(hearth_attn_pick(HEARTH_Q8_0) == NULL);
    int64_t n_pos = 600, stride = 200;
    float *K = malloc((size_t)(n_pos * stride) * sizeof(float)), *V = malloc((size_t)(n_pos * stride) * sizeof(float));
    uint16_t *Kh = malloc((size_t)(n_pos * stride) * 2), *Vh = malloc((size_t)(n_pos * stride) * 2);
    float q[128], out[128];
    uint32_t x = 12345;
    for (int64_t i = 0; i < n_pos * stride; i++) {
        x = x * 1664525u + 1013904223u;
        K[i] = (float)(x >> 8) / 16777216.0f * 2 - 1;
        x = x * 1664525u + 1013904223u;
        V[i] = (float)(x >> 8) / 16777216.0f * 2 - 1;
    }
    /* the f16 copies, and from here on K and V hold what they round to, so
     * one reference serves both caches */
    hearth_attn_store_f16_scalar(Kh, K, n_pos * stride);
    hearth_attn_store_f16_scalar(Vh, V, n_pos * stride);
    for (int64_t i = 0; i < n_pos * stride; i++) {
        K[i] = hearth_fp16_to_f32(Kh[i]);
        V[i] = hearth_fp16_to_f32(Vh[i]);
    }
    /* 64 and 128: the AVX-512 head's own path; 40, 3: the generic body */
    int64_t hds[] = {64, 128, 40, 3};
    for (int h = 0; h < 4; h++) {
        int64_t hd = hds[h];
        for (int64_t np = 1; np <= n_pos; np += 299) {
            /* one clear peak plus spread; the peak last for odd h, so a later
             * block raises the running max and the earlier ones are rescaled */
            int64_t peak = h % 2 ? np - 1 : 7;
            for (int64_t d = 0; d < hd; d++)
                q[d] = 3.0f * K[peak * stride + d] + 0.01f * (float)d;
            double w[600], mx = -1e300, sum = 0, ref[128] = {0};
            for (int64_t j = 0; j < np; j++) {
                double s = 0;
                for (int64_t d = 0; d < hd; d++)
                    s += (double)q[d] * K[j * stride + d];
                w[j] = s / sqrt((double)hd);
                mx = w[j] > mx ? w[j] : mx;
            }
            for (int64_t j = 0; j < np; j++) {
                w[j] = exp(w[j] - mx);
                sum += w[j];
            }
            for (int64_t j = 0; j < np; j++)
                for (int64_t d = 0; d < hd; d++)
                    ref[d] += w[j] / sum * V[j * stride + d];
            for (int k = 0; k < 6; k++) {
                if (!v[k].ok)
                    continue;
                v[k].fn(out, q, v[k].f16 ? (const void *)Kh : K, v[k].f16 ? (const void *)Vh : V, stride, np, hd,
                        (float)(1.0 / sqrt((double)hd)));
                double worst = 0;
                for (int64_t d = 0; d < hd; d++)
                    worst = fmax(worst, fabs(out[d] - ref[d]));
                CHECK_MSG(worst <= 1e-5, "%s hd %lld n_pos %lld: max error %g", v[k].name, (long long)hd,
                          (long long)np, worst);
            }
        }
    }
    free(K);
    free(V);
    free(Kh);
    free(Vh);
}

/* The f16 stores round like hearth_f32_to_fp16 (to nearest even), bit for
 * bit: halfway cases, subnormals, overflow to inf, signed zeros, and a
 * vector tail (n = 1029). */
static void kv_put_f16_rounds_to_nearest_even(void)
{
    enum { N = 1029 };
    float src[N];
    uint16_t a[N], b[N];
    uint32_t x = 99;
    for (int i = 0; i < N; i++) {
        x = x * 1664525u + 1013904223u;
        float r = (float)(x >> 8) / 16777216.0f * 2 - 1;
        switch (i % 6) {
        case 0: src[i] = r * 70000.0f; break;                      /* some past 65504 */
        case 1: src[i] = r * 1e-6f; break;                         /* subnormal in f16 */
        case 2: src[i] = 1.0f + (float)(i % 64) * 0x1p-11f; break; /* exact halves of an f16 step */
        case 3: src[i] = i % 12 == 3 ? -0.0f : 0.0f; break;
        default: src[i] = r * 4.0f; break;
        }
    }
    for (int i = 0; i < N; i++)
        a[i] = hearth_f32_to_fp16(src[i]);
    hearth_attn_store_f16_scalar(b, src, N);
    CHECK(memcmp(a, b, sizeof a) == 0);
    hearth_attn_store_fn put = hearth_attn_store_pick();
    memset(b, 0, sizeof b);
    put(b, src, N);
    int diff = 0;
    for (int i = 0; i < N; i++)
        diff += a[i] != b[i];
    CHECK_MSG(diff == 0, "picked f16 store differs from hearth_f32_to_fp16 in %d of %d values", diff, N);
}

int main(void)
{
    RUN(attention_head_widths);
    RUN(kv_put_f16_rounds_to_nearest_even);
    TEST_EXIT();
}

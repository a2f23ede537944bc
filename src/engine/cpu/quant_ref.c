/* quant_ref.c: scalar reference for every weight type: fp16/bf16
 * conversions, dequantize, quantize, and the dot products that the SIMD
 * kernels must reproduce.
 *
 * How: each quantized block is unpacked to its small integers (q values and
 * sub-block scales) by one helper per type, and both dequantize and vec_dot
 * are written on top of that unpacking, so the layout is decoded in one place.
 * Quantizers round to nearest. For Q4_K and Q6_K the sub-block scales are
 * themselves quantized (6 and 8 bits) against a fp16 super-block scale; they
 * are rounded *up*, and the fp16 super-scale is nudged up where fp16 rounding
 * went down, so no element is clipped: every element is then within half a
 * (slightly larger) step of its value.
 *
 * Rejected: ggml's iterative scale searches (make_qkx2 and friends): they
 * lower the error a little, but hearth only quantizes to make test data and
 * activations; models arrive quantized. */
#include "engine/cpu/quant.h"

#include "base/err.h"

#include <math.h>

float hearth_fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, mant = h & 1023, u;
    if (exp == 0) {
        float f = ldexpf((float)mant, -24); /* zero or subnormal */
        return sign ? -f : f;
    }
    if (exp == 31)
        u = sign | 0x7f800000u | (mant << 13);
    else
        u = sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t hearth_f32_to_fp16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    u &= 0x7fffffffu;
    if (u >= 0x7f800000u) /* inf, or NaN kept quiet */
        return sign | 0x7c00 | (u > 0x7f800000u ? 0x200 : 0);
    if (u >= 0x477ff000u) /* >= 65520 rounds to inf */
        return sign | 0x7c00;
    if (u < 0x38800000u) { /* below the smallest normal: scaling by 2^24 is exact */
        float a;
        memcpy(&a, &u, 4);
        return sign | (uint16_t)rintf(a * 16777216.0f);
    }
    u += 0xfffu + ((u >> 13) & 1); /* round to nearest even on the 13 dropped bits */
    return sign | (uint16_t)((u >> 13) - (112u << 10));
}

uint16_t hearth_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* The fp16 value nearest v that is not below it (v >= 0, finite). */
static uint16_t fp16_at_least(float v)
{
    uint16_t h = hearth_f32_to_fp16(v);
    if (hearth_fp16_to_f32(h) < v && h < 0x7bff)
        h++;
    return h;
}

bool hearth_quant_uses_q8a(hearth_dtype t)
{
    return t == HEARTH_Q4_0 || t == HEARTH_Q8_0 || t == HEARTH_Q4_K || t == HEARTH_Q6_K;
}

/* ---- unpacking: a block to its integers ---- */

/* q[256] in 0..15, sc[8], m[8] */
static void unpack_q4_k(const hearth_block_q4_k *b, uint8_t *q, int *sc, int *m)
{
    for (int j = 0; j < 8; j++)
        hearth_q4k_scale_min(b->scales, j, &sc[j], &m[j]);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = b->qs[32 * c + l] & 15;
            q[64 * c + 32 + l] = b->qs[32 * c + l] >> 4;
        }
}

/* q[256] in -32..31 */
static void unpack_q6_k(const hearth_block_q6_k *b, int8_t *q)
{
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

/* ---- dequantize ---- */

int hearth_quant_dequantize_row(hearth_dtype t, const void *src, float *dst, int64_t n)
{
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)t);
    if (!info || n < 0 || n % info->block)
        return HEARTH_EINVAL;
    int64_t nb = n / info->block;
    switch (t) {
    case HEARTH_F32:
        memcpy(dst, src, (size_t)n * 4);
        return 0;
    case HEARTH_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = hearth_fp16_to_f32(((const uint16_t *)src)[i]);
        return 0;
    case HEARTH_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = hearth_bf16_to_f32(((const uint16_t *)src)[i]);
        return 0;
    case HEARTH_Q8_0:
        for (int64_t i = 0; i < nb; i++) {
            const hearth_block_q8_0 *b = (const hearth_block_q8_0 *)src + i;
            float d = hearth_fp16_to_f32(b->d);
            for (int j = 0; j < 32; j++)
                dst[32 * i + j] = d * b->qs[j];
        }
        return 0;
    case HEARTH_Q4_0:
        for (int64_t i = 0; i < nb; i++) {
            const hearth_block_q4_0 *b = (const hearth_block_q4_0 *)src + i;
            float d = hearth_fp16_to_f32(b->d);
            for (int j = 0; j < 16; j++) {
                dst[32 * i + j] = d * ((b->qs[j] & 15) - 8);
                dst[32 * i + j + 16] = d * ((b->qs[j] >> 4) - 8);
            }
        }
        return 0;
    case HEARTH_Q4_K:
        for (int64_t i = 0; i < nb; i++) {
            const hearth_block_q4_k *b = (const hearth_block_q4_k *)src + i;
            uint8_t q[256];
            int sc[8], m[8];
            unpack_q4_k(b, q, sc, m);
            float d = hearth_fp16_to_f32(b->d), dmin = hearth_fp16_to_f32(b->dmin);
            for (int j = 0; j < 256; j++)
                dst[256 * i + j] = d * (float)sc[j / 32] * q[j] - dmin * (float)m[j / 32];
        }
        return 0;
    case HEARTH_Q6_K:
        for (int64_t i = 0; i < nb; i++) {
            const hearth_block_q6_k *b = (const hearth_block_q6_k *)src + i;
            int8_t q[256];
            unpack_q6_k(b, q);
            float d = hearth_fp16_to_f32(b->d);
            for (int j = 0; j < 256; j++)
                dst[256 * i + j] = d * (float)b->scales[j / 16] * q[j];
        }
        return 0;
    default:
        return HEARTH_EINVAL;
    }
}

/* ---- quantize ---- */

static int clampi(long v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : (int)v;
}

static void quantize_q8_0(const float *x, hearth_block_q8_0 *b)
{
    float amax = 0;
    for (int j = 0; j < 32; j++)
        amax = fmaxf(amax, fabsf(x[j]));
    b->d = hearth_f32_to_fp16(amax / 127);
    float d = hearth_fp16_to_f32(b->d), id = d > 0 ? 1 / d : 0;
    for (int j = 0; j < 32; j++)
        b->qs[j] = (int8_t)clampi(lrintf(x[j] * id), -127, 127);
}

/* ggml's convention: the element of largest magnitude maps to q = 0 (-8 d),
 * so the sign of d carries its sign and the full -8 step is used. */
static void quantize_q4_0(const float *x, hearth_block_q4_0 *b)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    b->d = hearth_f32_to_fp16(max / -8);
    float d = hearth_fp16_to_f32(b->d), id = d != 0 ? 1 / d : 0;
    for (int j = 0; j < 16; j++) {
        int lo = clampi(lrintf(x[j] * id) + 8, 0, 15), hi = clampi(lrintf(x[j + 16] * id) + 8, 0, 15);
        b->qs[j] = (uint8_t)(lo | (hi << 4));
    }
}

static void quantize_q4_k(const float *x, hearth_block_q4_k *b)
{
    float off[8], top[8], maxoff = 0;
    for (int j = 0; j < 8; j++) {
        float mn = 0, mx = -INFINITY;
        for (int l = 0; l < 32; l++) {
            mn = fminf(mn, x[32 * j + l]);
            mx = fmaxf(mx, x[32 * j + l]);
        }
        off[j] = -mn; /* the min is never above 0: x = d sc q - dmin m with m >= 0 */
        top[j] = mx;
        maxoff = fmaxf(maxoff, off[j]);
    }
    b->dmin = fp16_at_least(maxoff / 63);
    float dmin = hearth_fp16_to_f32(b->dmin);
    int sc[8], m[8];
    float need[8], maxneed = 0;
    for (int j = 0; j < 8; j++) {
        m[j] = dmin > 0 ? clampi(lrintf(off[j] / dmin), 0, 63) : 0;
        need[j] = fmaxf(0, top[j] + dmin * (float)m[j]) / 15;
        maxneed = fmaxf(maxneed, need[j]);
    }
    b->d = fp16_at_least(maxneed / 63);
    float d = hearth_fp16_to_f32(b->d);
    for (int j = 0; j < 8; j++)
        sc[j] = d > 0 ? clampi((long)ceilf(need[j] / d), 0, 63) : 0;
    for (int j = 0; j < 4; j++) {
        b->scales[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        b->scales[j + 4] = (uint8_t)((m[j] & 63) | ((m[j + 4] >> 4) << 6));
        b->scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    uint8_t q[256];
    for (int i = 0; i < 256; i++) {
        float step = d * (float)sc[i / 32];
        q[i] = step > 0 ? (uint8_t)clampi(lrintf((x[i] + dmin * (float)m[i / 32]) / step), 0, 15) : 0;
    }
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++)
            b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

static void quantize_q6_k(const float *x, hearth_block_q6_k *b)
{
    float scale[16], maxscale = 0;
    for (int k = 0; k < 16; k++) {
        float amax = 0;
        for (int l = 0; l < 16; l++)
            amax = fmaxf(amax, fabsf(x[16 * k + l]));
        scale[k] = amax / 31;
        maxscale = fmaxf(maxscale, scale[k]);
    }
    b->d = fp16_at_least(maxscale / 127);
    float d = hearth_fp16_to_f32(b->d);
    uint8_t q[256];
    for (int k = 0; k < 16; k++) {
        int sc = d > 0 ? clampi((long)ceilf(scale[k] / d), 0, 127) : 0;
        b->scales[k] = (int8_t)sc;
        float step = d * (float)sc;
        for (int l = 0; l < 16; l++)
            q[16 * k + l] = (uint8_t)(32 + (step > 0 ? clampi(lrintf(x[16 * k + l] / step), -32, 31) : 0));
    }
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        const uint8_t *o = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((o[l] & 15) | ((o[l + 64] & 15) << 4));
            ql[l + 32] = (uint8_t)((o[l + 32] & 15) | ((o[l + 96] & 15) << 4));
            qh[l] = (uint8_t)((o[l] >> 4) | ((o[l + 32] >> 4) << 2) | ((o[l + 64] >> 4) << 4) | ((o[l + 96] >> 4) << 6));
        }
    }
}

int hearth_quant_quantize_row(hearth_dtype t, const float *src, void *dst, int64_t n)
{
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)t);
    if (!info || n < 0 || n % info->block)
        return HEARTH_EINVAL;
    int64_t nb = n / info->block;
    switch (t) {
    case HEARTH_F32:
        memcpy(dst, src, (size_t)n * 4);
        return 0;
    case HEARTH_F16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = hearth_f32_to_fp16(src[i]);
        return 0;
    case HEARTH_BF16:
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = hearth_f32_to_bf16(src[i]);
        return 0;
    case HEARTH_Q8_0:
        for (int64_t i = 0; i < nb; i++)
            quantize_q8_0(src + 32 * i, (hearth_block_q8_0 *)dst + i);
        return 0;
    case HEARTH_Q4_0:
        for (int64_t i = 0; i < nb; i++)
            quantize_q4_0(src + 32 * i, (hearth_block_q4_0 *)dst + i);
        return 0;
    case HEARTH_Q4_K:
        for (int64_t i = 0; i < nb; i++)
            quantize_q4_k(src + 256 * i, (hearth_block_q4_k *)dst + i);
        return 0;
    case HEARTH_Q6_K:
        for (int64_t i = 0; i < nb; i++)
            quantize_q6_k(src + 256 * i, (hearth_block_q6_k *)dst + i);
        return 0;
    default:
        return HEARTH_EINVAL;
    }
}

void hearth_quant_q8a_row(const float *src, hearth_block_q8a *dst, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++) {
        const float *x = src + 32 * i;
        float amax = 0;
        for (int j = 0; j < 32; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127, id = d > 0 ? 127 / amax : 0;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            dst[i].qs[j] = (int8_t)clampi(lrintf(x[j] * id), -127, 127);
            sum += dst[i].qs[j];
        }
        dst[i].d = d;
        dst[i].s = d * (float)sum;
    }
}

/* ---- dot products ---- */

static float dot_f32(const void *w, const void *x, int64_t n)
{
    double acc = 0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)((const float *)w)[i] * ((const float *)x)[i];
    return (float)acc;
}

static float dot_f16(const void *w, const void *x, int64_t n)
{
    double acc = 0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)hearth_fp16_to_f32(((const uint16_t *)w)[i]) * ((const float *)x)[i];
    return (float)acc;
}

static float dot_bf16(const void *w, const void *x, int64_t n)
{
    double acc = 0;
    for (int64_t i = 0; i < n; i++)
        acc += (double)hearth_bf16_to_f32(((const uint16_t *)w)[i]) * ((const float *)x)[i];
    return (float)acc;
}

static float dot_q8_0(const void *w, const void *x, int64_t n)
{
    const hearth_block_q8_0 *b = w;
    const hearth_block_q8a *a = x;
    double acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 32; j++)
            isum += b[i].qs[j] * a[i].qs[j];
        acc += (double)hearth_fp16_to_f32(b[i].d) * a[i].d * isum;
    }
    return (float)acc;
}

static float dot_q4_0(const void *w, const void *x, int64_t n)
{
    const hearth_block_q4_0 *b = w;
    const hearth_block_q8a *a = x;
    double acc = 0;
    for (int64_t i = 0; i < n / 32; i++) {
        int isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((b[i].qs[j] & 15) - 8) * a[i].qs[j] + ((b[i].qs[j] >> 4) - 8) * a[i].qs[j + 16];
        acc += (double)hearth_fp16_to_f32(b[i].d) * a[i].d * isum;
    }
    return (float)acc;
}

/* Each sub-block of 32 lines up with one q8a block: its term is
 * d sc xd sum(q xq) - dmin m xd sum(xq), the second part being dmin m s. */
static float dot_q4_k(const void *w, const void *x, int64_t n)
{
    const hearth_block_q4_k *b = w;
    const hearth_block_q8a *a = x;
    double acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        uint8_t q[256];
        int sc[8], m[8];
        unpack_q4_k(&b[i], q, sc, m);
        double d = hearth_fp16_to_f32(b[i].d), dmin = hearth_fp16_to_f32(b[i].dmin);
        for (int j = 0; j < 8; j++) {
            const hearth_block_q8a *aj = &a[8 * i + j];
            int isum = 0;
            for (int l = 0; l < 32; l++)
                isum += q[32 * j + l] * aj->qs[l];
            acc += d * sc[j] * aj->d * isum - dmin * m[j] * aj->s;
        }
    }
    return (float)acc;
}

static float dot_q6_k(const void *w, const void *x, int64_t n)
{
    const hearth_block_q6_k *b = w;
    const hearth_block_q8a *a = x;
    double acc = 0;
    for (int64_t i = 0; i < n / 256; i++) {
        int8_t q[256];
        unpack_q6_k(&b[i], q);
        double d = hearth_fp16_to_f32(b[i].d);
        for (int k = 0; k < 16; k++) {
            const hearth_block_q8a *ak = &a[8 * i + k / 2];
            int isum = 0;
            for (int l = 0; l < 16; l++)
                isum += q[16 * k + l] * ak->qs[16 * (k % 2) + l];
            acc += d * b[i].scales[k] * ak->d * isum;
        }
    }
    return (float)acc;
}

hearth_vec_dot_fn hearth_quant_vec_dot_ref_fn(hearth_dtype t)
{
    switch (t) {
    case HEARTH_F32: return dot_f32;
    case HEARTH_F16: return dot_f16;
    case HEARTH_BF16: return dot_bf16;
    case HEARTH_Q8_0: return dot_q8_0;
    case HEARTH_Q4_0: return dot_q4_0;
    case HEARTH_Q4_K: return dot_q4_k;
    case HEARTH_Q6_K: return dot_q6_k;
    default: return NULL;
    }
}

float hearth_quant_vec_dot_ref(hearth_dtype t, const void *w, const void *x, int64_t n)
{
    hearth_vec_dot_fn f = hearth_quant_vec_dot_ref_fn(t);
    return f ? f(w, x, n) : 0.0f;
}

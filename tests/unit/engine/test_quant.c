/* Unit tests for src/engine/cpu/quant_ref.c: fp16/bf16 conversions against
 * the compiler's _Float16 and exact rounding rules, every block layout
 * against an element-by-element restatement of GGUF's layout written here,
 * quantize -> dequantize error within each type's bound, and the integer dot
 * products against a double-precision dot of the dequantized values. */
#include "harness.h"

#include "engine/cpu/quant.h"

#include <stdint.h>

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
/* uniform in [-1, 1) */
static float frand(void)
{
    return (float)((double)rnd() / 2147483648.0 - 1.0);
}

static void fp16_matches_compiler_float16(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        _Float16 v;
        uint16_t hh = (uint16_t)h;
        memcpy(&v, &hh, 2);
        float want = (float)v, got = hearth_fp16_to_f32(hh);
        if (isnan(want) ? !isnan(got) : memcmp(&want, &got, 4) != 0)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    bad = 0;
    for (int i = 0; i < 1000000; i++) {
        /* random bit patterns cover subnormal, normal, overflow, NaN alike */
        uint32_t u = rnd();
        if (i % 2)
            u = (u & 0x80ffffffu) | ((uint32_t)(100 + rnd() % 60) << 23); /* near fp16's range */
        float f;
        memcpy(&f, &u, 4);
        _Float16 v = (_Float16)f;
        uint16_t want, got = hearth_f32_to_fp16(f);
        memcpy(&want, &v, 2);
        if (isnan(f) ? (got & 0x7c00) != 0x7c00 || !(got & 0x3ff) : want != got)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void bf16_rounds_to_nearest(void)
{
    int bad = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = rnd() & 0xbfffffffu; /* keep exponents finite */
        float f;
        memcpy(&f, &u, 4);
        uint16_t h = hearth_f32_to_bf16(f);
        double got = hearth_bf16_to_f32(h), up = hearth_bf16_to_f32((uint16_t)(h + 1)),
               down = hearth_bf16_to_f32((uint16_t)(h - 1));
        double e = fabs(got - f);
        if (e > fabs(up - f) || e > fabs(down - f))
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(isnan(hearth_bf16_to_f32(hearth_f32_to_bf16(NAN))));
}

/* ---- layouts: element i of a block, restated from GGUF's definitions ---- */

static float fp16(uint16_t h)
{
    _Float16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}

static double spec_q8_0(const uint8_t *b, int i)
{
    return fp16((uint16_t)(b[0] | b[1] << 8)) * (double)(int8_t)b[2 + i];
}

static double spec_q4_0(const uint8_t *b, int i)
{
    uint8_t byte = b[2 + i % 16];
    int q = i < 16 ? byte & 15 : byte >> 4;
    return fp16((uint16_t)(b[0] | b[1] << 8)) * (double)(q - 8);
}

/* scales[12]: sub-blocks 0-3 have their 6-bit scale and min in the low 6
 * bits of bytes 0-3 and 4-7; sub-blocks 4-7 keep their low 4 bits in the
 * nibbles of bytes 8-11 and their top 2 bits in the top bits of bytes 0-7. */
static double spec_q4_k(const uint8_t *b, int i)
{
    double d = fp16((uint16_t)(b[0] | b[1] << 8)), dmin = fp16((uint16_t)(b[2] | b[3] << 8));
    const uint8_t *s = b + 4, *qs = b + 16;
    int j = i / 32, sc, m;
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) + 16 * (s[j - 4] >> 6);
        m = (s[j + 4] >> 4) + 16 * (s[j] >> 6);
    }
    uint8_t byte = qs[32 * (i / 64) + i % 32];
    int q = (i % 64) < 32 ? byte & 15 : byte >> 4;
    return d * sc * q - dmin * m;
}

static double spec_q6_k(const uint8_t *b, int i)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *scales = (const int8_t *)(b + 192);
    double d = fp16((uint16_t)(b[208] | b[209] << 8));
    int h = i / 128, r = i % 128, l = r % 32, g = r / 32;
    uint8_t lowbyte = ql[64 * h + l + 32 * (g & 1)];
    int low = g < 2 ? lowbyte & 15 : lowbyte >> 4;
    int high = (qh[32 * h + l] >> (2 * g)) & 3;
    return d * scales[i / 16] * (double)(low + 16 * high - 32);
}

static void layouts_match_gguf(void)
{
    struct { hearth_dtype t; int n, bytes; double (*spec)(const uint8_t *, int); int dpos[2]; } cases[] = {
        {HEARTH_Q8_0, 32, 34, spec_q8_0, {0, -1}},
        {HEARTH_Q4_0, 32, 18, spec_q4_0, {0, -1}},
        {HEARTH_Q4_K, 256, 144, spec_q4_k, {0, 2}},
        {HEARTH_Q6_K, 256, 210, spec_q6_k, {208, -1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int rep = 0; rep < 20; rep++) {
            uint8_t blk[210];
            for (int i = 0; i < cases[c].bytes; i++)
                blk[i] = (uint8_t)rnd();
            for (int k = 0; k < 2; k++)
                if (cases[c].dpos[k] >= 0) { /* a finite scale in [2^-8, 2) */
                    uint16_t h = (uint16_t)(0x1c00 + rnd() % 0x2000);
                    blk[cases[c].dpos[k]] = (uint8_t)h;
                    blk[cases[c].dpos[k] + 1] = (uint8_t)(h >> 8);
                }
            float out[256];
            CHECK_EQ_INT(hearth_quant_dequantize_row(cases[c].t, blk, out, cases[c].n), 0);
            int bad = 0;
            for (int i = 0; i < cases[c].n; i++) {
                double want = cases[c].spec(blk, i);
                /* the code's float products vs the spec in double: 2 roundings */
                if (fabs(out[i] - want) > 1e-6 * fabs(want) + 1e-30)
                    bad++;
            }
            CHECK_MSG(bad == 0, "type %d: %d elements differ from the layout", (int)cases[c].t, bad);
        }
    }
}

/* ---- round trips ---- */

/* Test data per row: mixed sign, mostly small with occasional outliers,
 * whole blocks of zeros and of positive-only values. */
static void fill(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = frand();
        if (rnd() % 50 == 0)
            x[i] *= 20;
    }
    for (int64_t i = 0; i < 32 && i < n; i++)
        x[i] = 0;
    for (int64_t i = 256; i < 288 && i < n; i++)
        x[i] = fabsf(x[i]) + 0.5f;
}

static float amax_of(const float *x, int64_t n)
{
    float a = 0;
    for (int64_t i = 0; i < n; i++)
        a = fmaxf(a, fabsf(x[i]));
    return a;
}

static void round_trips_within_bounds(void)
{
    enum { N = 256 * 8 };
    float x[N], y[N];
    uint8_t q[N * 4];
    fill(x, N);
    const hearth_dtype types[] = {HEARTH_F32, HEARTH_F16, HEARTH_BF16, HEARTH_Q8_0, HEARTH_Q4_0, HEARTH_Q4_K, HEARTH_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        hearth_dtype t = types[ti];
        CHECK_EQ_INT(hearth_quant_quantize_row(t, x, q, N), 0);
        CHECK_EQ_INT(hearth_quant_dequantize_row(t, q, y, N), 0);
        int bad = 0;
        double worst = 0;
        for (int i = 0; i < N; i++) {
            double bound;
            float ab = amax_of(x + i / 32 * 32, 32);
            switch (t) {
            case HEARTH_F32: bound = 0; break;
            case HEARTH_F16: bound = fabsf(x[i]) * 0x1p-11 + 0x1p-25; break; /* half an ulp (+ subnormal step) */
            case HEARTH_BF16: bound = fabsf(x[i]) * 0x1p-8; break;
            /* half a step of amax/127, the step itself off by fp16 rounding of d */
            case HEARTH_Q8_0: bound = ab / 254 * (1 + 0x1p-10) + ab * 0x1p-11; break;
            /* a full step d = amax/8: the value opposite the extreme one can clip at +7 */
            case HEARTH_Q4_0: bound = ab / 8 * (1 + 0x1p-10); break;
            case HEARTH_Q4_K: {
                /* half of the sub-block's step range/15, widened by the
                 * super-block's 6-bit scale quantization (R/63 per step) and
                 * the min's rounding (dmin/2 = R/126), R = block's largest range */
                const float *sb = x + i / 32 * 32;
                float mn = 0, mx = -INFINITY, big = 0;
                for (int l = 0; l < 32; l++) {
                    mn = fminf(mn, sb[l]);
                    mx = fmaxf(mx, sb[l]);
                }
                const float *blk = x + i / 256 * 256;
                for (int j = 0; j < 8; j++) {
                    float a = 0, b = -INFINITY;
                    for (int l = 0; l < 32; l++) {
                        a = fminf(a, blk[32 * j + l]);
                        b = fmaxf(b, blk[32 * j + l]);
                    }
                    big = fmaxf(big, b - a);
                }
                bound = (mx - mn) / 30 + big / 63 / 30 + big / 126 + 1e-6;
                break;
            }
            case HEARTH_Q6_K: {
                /* half a step of amax16/31, plus the 8-bit scale's rounding up */
                float a16 = amax_of(x + i / 16 * 16, 16), big = amax_of(x + i / 256 * 256, 256);
                bound = a16 / 62 + big / 31 / 127 + 1e-6;
                break;
            }
            default: bound = 0;
            }
            double e = fabs((double)y[i] - x[i]);
            if (e > bound)
                bad++;
            if (bound > 0 && e / bound > worst)
                worst = e / bound;
        }
        CHECK_MSG(bad == 0, "type %d: %d of %d elements beyond the bound (worst %.3g of bound)", (int)t, bad, N, worst);
    }
}

static void rejects_partial_blocks(void)
{
    float x[64] = {0};
    uint8_t q[256];
    CHECK_EQ_INT(hearth_quant_quantize_row(HEARTH_Q4_K, x, q, 64), -1);
    CHECK_EQ_INT(hearth_quant_dequantize_row(HEARTH_Q8_0, q, x, 33), -1);
    CHECK_EQ_INT(hearth_quant_dequantize_row((hearth_dtype)5, q, x, 32), -1);
}

static void q8a_within_half_step(void)
{
    enum { N = 1024 };
    float x[N];
    hearth_block_q8a a[N / 32];
    fill(x, N);
    hearth_quant_q8a_row(x, a, N);
    int bad = 0;
    for (int b = 0; b < N / 32; b++) {
        float amax = amax_of(x + 32 * b, 32);
        int sum = 0;
        for (int l = 0; l < 32; l++) {
            sum += a[b].qs[l];
            if (fabs((double)a[b].d * a[b].qs[l] - x[32 * b + l]) > amax / 254 * (1 + 1e-6))
                bad++;
        }
        CHECK_NEAR(a[b].d, amax / 127, amax * 1e-7);
        CHECK_NEAR(a[b].s, (double)a[b].d * sum, 1e-6 * fabs(a[b].d * 127 * 32));
    }
    CHECK_EQ_INT(bad, 0);
}

/* The oracle's integer formulation equals the dot of the dequantized row with
 * the dequantized q8a vector (to double rounding); for float types, the dot
 * with x itself. */
static void vec_dot_ref_matches_dequantized_dot(void)
{
    enum { N = 256 * 6 };
    float w[N], x[N], wd[N];
    uint8_t q[N * 4];
    hearth_block_q8a a[N / 32];
    fill(w, N);
    for (int i = 0; i < N; i++)
        x[i] = frand();
    hearth_quant_q8a_row(x, a, N);
    const hearth_dtype types[] = {HEARTH_F32, HEARTH_F16, HEARTH_BF16, HEARTH_Q8_0, HEARTH_Q4_0, HEARTH_Q4_K, HEARTH_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        hearth_dtype t = types[ti];
        hearth_quant_quantize_row(t, w, q, N);
        hearth_quant_dequantize_row(t, q, wd, N);
        bool qa = hearth_quant_uses_q8a(t);
        double want = 0, sumabs = 0;
        for (int i = 0; i < N; i++) {
            double xi = qa ? (double)a[i / 32].d * a[i / 32].qs[i % 32] : x[i];
            want += (double)wd[i] * xi;
            sumabs += fabs((double)wd[i] * xi);
        }
        float got = hearth_quant_vec_dot_ref(t, q, qa ? (const void *)a : (const void *)x, N);
        /* float rounding of the per-block scale products only */
        CHECK_NEAR(got, want, 1e-6 * sumabs);
    }
}

int main(void)
{
    RUN(fp16_matches_compiler_float16);
    RUN(bf16_rounds_to_nearest);
    RUN(layouts_match_gguf);
    RUN(round_trips_within_bounds);
    RUN(rejects_partial_blocks);
    RUN(q8a_within_half_step);
    RUN(vec_dot_ref_matches_dequantized_dot);
    TEST_EXIT();
}

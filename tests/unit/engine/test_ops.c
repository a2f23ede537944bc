/* Unit tests for src/engine/cpu/ops.c and ops_avx512.c, each against the
 * textbook formula evaluated in double precision here (not against the code
 * under test). The row-wise ops with vector versions run once per table this
 * CPU has (portable, AVX-512); the public functions are checked to be the
 * chosen table's. Tolerances are relative to the magnitudes involved and
 * written per check. */
#include "harness.h"

#include "base/err.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/ops_impl.h"

#include <stdint.h>

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static double drand(double lo, double hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}
static void fill(float *x, int n, double lo, double hi)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)drand(lo, hi);
}

enum { N = 333 }; /* odd: no vector width divides it */

/* the table under test */
static const hearth_cpu_ops *ops = &hearth_cpu_ops_scalar;

static void layernorm_matches_formula(void)
{
    float x[N], g[N], b[N], y[N];
    fill(x, N, -3, 5), fill(g, N, 0.5, 1.5), fill(b, N, -1, 1);
    ops->layernorm(y, x, N, g, b, 1e-12f);
    double mean = 0, var = 0;
    for (int i = 0; i < N; i++)
        mean += x[i];
    mean /= N;
    for (int i = 0; i < N; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= N;
    for (int i = 0; i < N; i++) {
        double want = (x[i] - mean) / sqrt(var + 1e-12) * g[i] + b[i];
        CHECK_NEAR(y[i], want, 1e-5 * (fabs(want) + 1)); /* a few float roundings of O(1) values */
    }
    ops->layernorm(x, x, N, NULL, NULL, 1e-5f); /* in place, no affine */
    double m2 = 0, v2 = 0;
    for (int i = 0; i < N; i++)
        m2 += x[i];
    for (int i = 0; i < N; i++)
        v2 += (x[i] - m2 / N) * (x[i] - m2 / N);
    CHECK_NEAR(m2 / N, 0, 1e-6);
    CHECK_NEAR(v2 / N, var / (var + 1e-5), 1e-5);
}

static void rmsnorm_matches_formula(void)
{
    float x[N], w[N], y[N];
    fill(x, N, -2, 2), fill(w, N, 0, 2);
    ops->rmsnorm(y, x, N, w, 1e-6f);
    double ms = 0;
    for (int i = 0; i < N; i++)
        ms += (double)x[i] * x[i];
    ms /= N;
    for (int i = 0; i < N; i++) {
        double want = x[i] / sqrt(ms + 1e-6) * w[i];
        CHECK_NEAR(y[i], want, 1e-6 * (fabs(want) + 1e-3));
    }
}

static void softmax_matches_formula_and_masks(void)
{
    float x[N], y[N];
    fill(x, N, -30, 30);
    x[5] = 80; /* exp(80) overflows float without the max subtraction */
    x[7] = -1e30f;
    ops->softmax(y, x, N);
    double max = -INFINITY, sum = 0;
    for (int i = 0; i < N; i++)
        max = fmax(max, x[i]);
    for (int i = 0; i < N; i++)
        sum += exp(x[i] - max);
    for (int i = 0; i < N; i++) {
        double want = exp(x[i] - max) / sum;
        /* relative: expf's few ulps, plus the float rounding of x - max
         * (half an ulp of |x - max|) carried into exp's argument */
        CHECK_NEAR(y[i], want, (1e-6 + fabs(x[i] - max) * 0x1p-23) * want + 1e-30);
    }
    CHECK(y[7] == 0);
    float all[4] = {-1e30f, -1e30f, -1e30f, -1e30f};
    ops->softmax(all, all, 4); /* fully masked row: uniform, not NaN */
    for (int i = 0; i < 4; i++)
        CHECK_NEAR(all[i], 0.25, 1e-7);
}

static void activations_match_formulas(void)
{
    float x[N], a[N], b[N], y[N];
    fill(x, N, -8, 8);
    x[0] = 0, x[1] = -20, x[2] = 20;
    ops->gelu_erf(y, x, N);
    for (int i = 0; i < N; i++) {
        double want = 0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0)));
        CHECK_NEAR(y[i], want, 1e-6 * fabs(x[i]) + 1e-7);
    }
    ops->silu(y, x, N);
    for (int i = 0; i < N; i++) {
        double want = x[i] / (1 + exp(-(double)x[i]));
        CHECK_NEAR(y[i], want, 1e-6 * fabs(want) + 1e-7);
    }
    fill(a, N, -6, 6), fill(b, N, -2, 2);
    ops->swiglu(y, a, b, N);
    for (int i = 0; i < N; i++) {
        double want = a[i] / (1 + exp(-(double)a[i])) * b[i];
        CHECK_NEAR(y[i], want, 1e-6 * fabs(want) + 1e-7);
    }
    /* exact, at every length through a vector and its masked tail, and
     * nothing written past n */
    for (int n = 0; n <= 40; n++) {
        for (int i = 0; i < N; i++)
            y[i] = -7.0f;
        ops->add(y, a, b, n);
        for (int i = 0; i < N; i++)
            CHECK(y[i] == (i < n ? a[i] + b[i] : -7.0f));
        ops->mul(y, a, b, n);
        for (int i = 0; i < N; i++)
            CHECK(y[i] == (i < n ? a[i] * b[i] : -7.0f));
        ops->scale(y, a, 0.3f, n);
        for (int i = 0; i < N; i++)
            CHECK(y[i] == (i < n ? a[i] * 0.3f : -7.0f));
    }
    ops->add(y, a, b, N);
    for (int i = 0; i < N; i++)
        CHECK(y[i] == a[i] + b[i]);
    memcpy(y, a, sizeof y);
    ops->add(y, y, b, N); /* in place, as the residual stream uses it */
    for (int i = 0; i < N; i++)
        CHECK(y[i] == a[i] + b[i]);
}

/* GELU and SiLU on a dense grid, relative to the result (so the tails
 * count): the AVX-512 GELU's erf is built to ~4e-7 relative everywhere (its
 * design comment); the portable 0.5 x (1 + erff) is only that accurate for
 * x > -sqrt(2) (below, 1 + erff cancels), so there it is held to the
 * absolute bound of activations_match_formulas. SiLU: exp's few ulps and
 * one division, until e^-x overflows float (x < -88.7, where both give -0). */
static void activations_dense_grid(void)
{
    enum { G = 400001 };
    float *x = malloc(G * sizeof *x), *y = malloc(G * sizeof *y);
    for (int i = 0; i < G; i++)
        x[i] = (float)(-14.0 + 28.0 * i / (G - 1));
    ops->gelu_erf(y, x, G);
    int bad = 0;
    for (int i = 0; i < G; i++) {
        double z = x[i] / sqrt(2.0);
        double want = x[i] < 0 ? 0.5 * x[i] * erfc(-z) : 0.5 * x[i] * (1 + erf(z));
        double tol = ops == &hearth_cpu_ops_scalar && x[i] < -1.4142
                         ? 1e-6 * fabs(x[i]) + 1e-7
                         : 5e-7 * fabs(want) + 1e-38; /* + the smallest normal float: underflow */
        if (!(fabs(y[i] - want) <= tol) && bad++ < 3)
            fprintf(stderr, "  gelu(%.9g) = %.9g, want %.9g\n", x[i], y[i], want);
    }
    CHECK_MSG(bad == 0, "%s gelu: %d off", ops->name, bad);
    for (int i = 0; i < G; i++)
        x[i] = (float)(-88.0 + 176.0 * i / (G - 1));
    ops->silu(y, x, G);
    bad = 0;
    for (int i = 0; i < G; i++) {
        double want = x[i] / (1 + exp(-(double)x[i]));
        if (!(fabs(y[i] - want) <= 1e-6 * fabs(want) + 1e-38) && bad++ < 3)
            fprintf(stderr, "  silu(%.9g) = %.9g, want %.9g\n", x[i], y[i], want);
    }
    CHECK_MSG(bad == 0, "%s silu: %d off", ops->name, bad);
    free(x), free(y);
}

/* The public functions are the chosen table's (bit for bit). */
static void public_functions_use_the_best_table(void)
{
    float x[N], g[N], b[N], y[N], w[N];
    fill(x, N, -8, 8), fill(g, N, 0.5, 1.5), fill(b, N, -1, 1);
    const hearth_cpu_ops *best = hearth_cpu_ops_best();
    CHECK(best == (hearth_cpu_matmul_isa() == HEARTH_ISA_AVX512 ? &hearth_cpu_ops_avx512 : &hearth_cpu_ops_scalar));
    hearth_cpu_layernorm(y, x, N, g, b, 1e-5f), best->layernorm(w, x, N, g, b, 1e-5f);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_rmsnorm(y, x, N, g, 1e-5f), best->rmsnorm(w, x, N, g, 1e-5f);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_softmax(y, x, N), best->softmax(w, x, N);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_gelu_erf(y, x, N), best->gelu_erf(w, x, N);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_silu(y, x, N), best->silu(w, x, N);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_swiglu(y, x, b, N), best->swiglu(w, x, b, N);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_add(y, x, b, N), best->add(w, x, b, N);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_mul(y, x, b, N), best->mul(w, x, b, N);
    CHECK(memcmp(y, w, sizeof y) == 0);
    hearth_cpu_scale(y, x, 0.3f, N), best->scale(w, x, 0.3f, N);
    CHECK(memcmp(y, w, sizeof y) == 0);
}

static void l2_normalize_matches_formula(void)
{
    float x[N], y[N];
    fill(x, N, -3, 3);
    hearth_cpu_l2_normalize(y, x, N, 1e-12f);
    double norm = 0, out = 0;
    for (int i = 0; i < N; i++)
        norm += (double)x[i] * x[i];
    norm = sqrt(norm);
    for (int i = 0; i < N; i++) {
        CHECK_NEAR(y[i], x[i] / norm, 1e-7);
        out += (double)y[i] * y[i];
    }
    CHECK_NEAR(out, 1, 1e-6);
    float z[3] = {0, 0, 0};
    hearth_cpu_l2_normalize(z, z, 3, 1e-12f); /* zero vector stays zero, no NaN */
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
}

/* RoPE by the definitions: rotate pair (a, b) by theta_i = pos * base^(-2i/n_rot). */
static void rope_both_orderings(void)
{
    enum { H = 3, D = 64, ROT = 48 };
    const int64_t positions[] = {0, 1, 17, 4095, 100000};
    for (int neox = 0; neox <= 1; neox++) {
        for (size_t p = 0; p < sizeof positions / sizeof positions[0]; p++) {
            float x[H * D], y[H * D];
            fill(x, H * D, -1, 1);
            memcpy(y, x, sizeof x);
            CHECK_EQ_INT(hearth_cpu_rope(y, H, D, ROT, positions[p], 10000.0f, neox), 0);
            for (int h = 0; h < H; h++) {
                const float *xh = x + h * D, *yh = y + h * D;
                for (int i = 0; i < ROT / 2; i++) {
                    double theta = (double)positions[p] * exp(-2.0 * i / ROT * log(10000.0));
                    int a = neox ? i : 2 * i, b = neox ? i + ROT / 2 : 2 * i + 1;
                    double wa = xh[a] * cos(theta) - xh[b] * sin(theta);
                    double wb = xh[a] * sin(theta) + xh[b] * cos(theta);
                    /* float cos/sin and two products: a few ulps of |x_a| + |x_b| */
                    double tol = 1e-6 * (fabs(xh[a]) + fabs(xh[b]));
                    CHECK_NEAR(yh[a], wa, tol);
                    CHECK_NEAR(yh[b], wb, tol);
                }
                for (int d = ROT; d < D; d++)
                    CHECK(yh[d] == xh[d]);
            }
        }
    }
    float v[8] = {0};
    CHECK_EQ_INT(hearth_cpu_rope(v, 1, 8, 7, 1, 10000.0f, 0), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_cpu_rope(v, 1, 8, 10, 1, 10000.0f, 0), HEARTH_EINVAL);
}

static void attention_head_matches_formula(void)
{
    enum { KV = 37, HD = 24, KS = 40, VS = 56 };
    float q[HD], k[KV * KS], v[KV * VS], mask[KV], out[HD], scores[KV];
    fill(q, HD, -1, 1), fill(k, KV * KS, -1, 1), fill(v, KV * VS, -1, 1);
    for (int j = 0; j < KV; j++)
        mask[j] = j > 30 ? -1e30f : 0; /* causal-style: the last positions masked */
    float scale = 1.0f / sqrtf(HD);
    hearth_cpu_attn_head(out, q, k, KS, v, VS, KV, HD, scale, mask, scores);
    double s[KV], max = -INFINITY, sum = 0;
    for (int j = 0; j < KV; j++) {
        double dot = 0;
        for (int d = 0; d < HD; d++)
            dot += (double)q[d] * k[j * KS + d];
        s[j] = dot * scale + mask[j];
        max = fmax(max, s[j]);
    }
    for (int j = 0; j < KV; j++)
        sum += exp(s[j] - max);
    for (int d = 0; d < HD; d++) {
        double want = 0;
        for (int j = 0; j < KV; j++)
            want += exp(s[j] - max) / sum * v[j * VS + d];
        CHECK_NEAR(out[d], want, 1e-6); /* |v| <= 1, weights sum to 1 */
    }
    for (int j = 31; j < KV; j++)
        CHECK(scores[j] == 0);
    hearth_cpu_attn_head(out, q, k, KS, v, VS, 1, HD, scale, NULL, scores); /* one key: out = V[0] */
    for (int d = 0; d < HD; d++)
        CHECK_NEAR(out[d], v[d], 1e-7);
}

int main(void)
{
    const hearth_cpu_ops *tables[2] = {&hearth_cpu_ops_scalar, NULL};
    if (hearth_cpu_isa_available(HEARTH_ISA_AVX512))
        tables[1] = &hearth_cpu_ops_avx512;
    else
        printf("# avx512 not available: its ops are not tested here\n");
    for (int t = 0; t < 2 && tables[t]; t++) {
        ops = tables[t];
        printf("# ops table %s\n", ops->name);
        RUN(layernorm_matches_formula);
        RUN(rmsnorm_matches_formula);
        RUN(softmax_matches_formula_and_masks);
        RUN(activations_match_formulas);
        RUN(activations_dense_grid);
    }
    RUN(public_functions_use_the_best_table);
    RUN(l2_normalize_matches_formula);
    RUN(rope_both_orderings);
    RUN(attention_head_matches_formula);
    TEST_EXIT();
}

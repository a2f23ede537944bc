/* test_sampler.c: the sampling chain against an independent reference.
 *
 * The reference (ref_dist below) recomputes, in double and by plain O(n^2)
 * selection, which tokens llama.cpp's chain keeps and with what probability;
 * the sampler is then run many times with a fixed seed and the empirical
 * frequencies are compared with those probabilities. The sampler's .c is
 * included so the generator and the penalized logits can be checked directly. */
#include "harness.h"

#include "engine/sampler.c"

#include <stdint.h>

#define NV 12

/* ---- reference ---- */

typedef struct ref_opts {
    double temp;
    int top_k;
    double top_p, min_p;
} ref_opts;

/* Probability of each token after top_k, top_p, min_p and temperature, as
 * llama.cpp's default chain defines them; 0 for tokens cut. */
static void ref_dist(const double *l, int n, ref_opts o, double *out)
{
    int order[64];
    bool used[64] = {false};
    for (int r = 0; r < n; r++) { /* selection sort: best logit, lowest id on ties */
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!used[i] && (best < 0 || l[i] > l[best]))
                best = i;
        used[best] = true;
        order[r] = best;
    }
    int keep = o.top_k > 0 && o.top_k < n ? o.top_k : n;
    double lmax = l[order[0]], z = 0;
    for (int r = 0; r < keep; r++)
        z += exp(l[order[r]] - lmax);
    if (o.top_p < 1) {
        double cum = 0;
        for (int r = 0; r < keep; r++) {
            cum += exp(l[order[r]] - lmax) / z;
            if (cum >= o.top_p) {
                keep = r + 1;
                break;
            }
        }
    }
    if (o.min_p > 0) {
        int r = 1;
        while (r < keep && exp(l[order[r]] - lmax) >= o.min_p)
            r++;
        keep = r;
    }
    double zt = 0;
    for (int i = 0; i < n; i++)
        out[i] = 0;
    for (int r = 0; r < keep; r++)
        zt += out[order[r]] = exp((l[order[r]] - lmax) / o.temp);
    for (int r = 0; r < keep; r++)
        out[order[r]] /= zt;
}

static hearth_sampler *mk(float temp, int top_k, float top_p, float min_p, uint64_t seed, int32_t nv)
{
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    hearth_err err = {0};
    hearth_sampler *s = hearth_sampler_new(&p, nv, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    return s;
}

/* Logits with distinct gaps, so no reference cut sits on a boundary. */
static const float base_logits[NV] = {1.0f, 3.2f, -0.5f, 2.1f, 0.3f, 2.9f, -2.0f, 1.7f, 0.9f, -1.1f, 2.5f, 0.0f};

/* Samples N times and checks the empirical distribution: the support equals
 * the reference's, and each frequency is within 5 standard deviations of a
 * binomial with the reference probability (plus 1e-4 for p near 0 or 1). */
static void check_empirical(ref_opts o, const char *what)
{
    enum { N = 200000 };
    double l[NV], want[NV];
    for (int i = 0; i < NV; i++)
        l[i] = base_logits[i];
    ref_dist(l, NV, o, want);
    hearth_sampler *s = mk((float)o.temp, o.top_k, (float)o.top_p, (float)o.min_p, 1234, NV);
    if (!s)
        return;
    int hist[NV] = {0};
    for (int i = 0; i < N; i++) {
        int32_t t = hearth_sampler_sample(s, base_logits);
        CHECK(t >= 0 && t < NV);
        if (t >= 0 && t < NV)
            hist[t]++;
    }
    for (int i = 0; i < NV; i++) {
        double f = (double)hist[i] / N, p = want[i];
        if (p == 0)
            CHECK_MSG(hist[i] == 0, "%s: token %d drawn %d times but cut by the reference", what, i, hist[i]);
        else
            CHECK_MSG(hist[i] > 0 || p < 1e-4, "%s: token %d (p=%.4f) never drawn", what, i, p);
        double tol = 5 * sqrt(p * (1 - p) / N) + 1e-4;
        CHECK_MSG(fabs(f - p) <= tol, "%s: token %d frequency %.5f vs p %.5f (tol %.5f)", what, i, f, p, tol);
    }
    /* top_probs reports the same distribution, best first. */
    int32_t ids[NV];
    float probs[NV];
    int k = hearth_sampler_top_probs(s, NV, ids, probs);
    int support = 0;
    for (int i = 0; i < NV; i++)
        support += want[i] > 0;
    CHECK_EQ_INT(k, support);
    for (int i = 0; i < k; i++) {
        CHECK_NEAR(probs[i], want[ids[i]], 1e-6);
        if (i > 0)
            CHECK(probs[i] <= probs[i - 1]);
    }
    hearth_sampler_free(s);
}

/* ---- cases ---- */

static void test_rng_reference(void)
{
    /* std::mt19937 and std::generate_canonical<double, 53> from g++ 12
     * (libstdc++), seeds 42 and 0: llama.cpp's generator. */
    static const uint32_t want42[3] = {1608637542u, 3421126067u, 4083286876u};
    static const double canon42[4] = {0.79654298428784598, 0.18343478789336848, 0.77969099761266125,
                                      0.59685016158005655};
    static hearth_mt19937 m;
    mt_seed(&m, 42);
    for (int i = 0; i < 3; i++)
        CHECK(mt_next(&m) == want42[i]);
    mt_seed(&m, 0);
    CHECK(mt_next(&m) == 2357136044u);
    mt_seed(&m, 42);
    for (int i = 0; i < 4; i++)
        CHECK(rng_uniform(&m) == canon42[i]);
    mt_seed(&m, 7);
    for (int i = 0; i < 1000; i++) {
        double u = rng_uniform(&m);
        CHECK(u >= 0 && u < 1);
    }
}

/* std::discrete_distribution<>({0.5f, 0.25f, 0.25f}) over std::mt19937(42)
 * drew 2 0 2 1 0 0 0 0 (g++ 12): the sampler, given those three
 * probabilities as logits at temperature 1 and nothing cut, draws the same. */
static void test_draws_as_libstdcxx(void)
{
    static const int32_t want[8] = {2, 0, 2, 1, 0, 0, 0, 0};
    const float logits[3] = {logf(0.5f), logf(0.25f), logf(0.25f)};
    hearth_sampler *s = mk(1.0f, 0, 1.0f, 0.0f, 42, 3);
    for (int i = 0; s && i < 8; i++)
        CHECK_EQ_INT(hearth_sampler_sample(s, logits), want[i]);
    hearth_sampler_free(s);
}

static void test_defaults(void)
{
    /* llama-server's documented defaults (tools/server/README.md). */
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    CHECK_NEAR(p.temperature, 0.8, 1e-7);
    CHECK_EQ_INT(p.top_k, 40);
    CHECK_NEAR(p.top_p, 0.95, 1e-7);
    CHECK_NEAR(p.min_p, 0.05, 1e-7);
    CHECK_NEAR(p.repeat_penalty, 1.0, 0);
    CHECK_EQ_INT(p.repeat_last_n, 64);
    CHECK(p.seed == HEARTH_SAMPLER_SEED_RANDOM);
}

static void test_greedy(void)
{
    hearth_sampler *s = mk(0.0f, 40, 0.95f, 0.05f, 1, NV);
    if (!s)
        return;
    CHECK_EQ_INT(hearth_sampler_sample(s, base_logits), 1);
    /* ties go to the lowest id; NaN counts as -inf */
    float l[NV];
    for (int i = 0; i < NV; i++)
        l[i] = -1.0f;
    l[0] = NAN;
    l[7] = 5.0f;
    l[4] = 5.0f;
    l[9] = 5.0f;
    CHECK_EQ_INT(hearth_sampler_sample(s, l), 4);
    for (int i = 0; i < NV; i++)
        l[i] = NAN;
    CHECK_EQ_INT(hearth_sampler_sample(s, l), 0);
    hearth_sampler_free(s);

    /* negative temperature is greedy too */
    s = mk(-1.0f, 0, 1.0f, 0.0f, 1, NV);
    if (s)
        CHECK_EQ_INT(hearth_sampler_sample(s, base_logits), 1);
    hearth_sampler_free(s);
}

/* post_sampling_probs: greedy is one-hot over the best by logit; a drawn
 * sample's are its surviving candidates, which sum to 1, and the sampled
 * token's probability is its candidate's (0 for a token the filters cut). */
static void test_post_probs(void)
{
    int32_t ids[8];
    float probs[8];
    hearth_sampler *s = mk(0.0f, 40, 0.95f, 0.05f, 1, NV);
    if (!s)
        return;
    CHECK_EQ_INT(hearth_sampler_post_prob(s, 1), -1); /* before any sample */
    int32_t t = hearth_sampler_sample(s, base_logits);
    int k = hearth_sampler_top_probs_post(s, 4, ids, probs);
    CHECK_EQ_INT(k, 4);
    CHECK_EQ_INT(ids[0], t);
    CHECK(probs[0] == 1.0f && probs[1] == 0.0f && probs[3] == 0.0f);
    CHECK(hearth_sampler_post_prob(s, t) == 1.0f && hearth_sampler_post_prob(s, ids[1]) == 0.0f);
    hearth_sampler_free(s);
    s = mk(1.0f, 3, 1.0f, 0.0f, 7, NV);
    if (!s)
        return;
    t = hearth_sampler_sample(s, base_logits);
    k = hearth_sampler_top_probs_post(s, 8, ids, probs);
    CHECK_EQ_INT(k, 3); /* top-k 3 left three */
    double sum = 0;
    int found = -1;
    for (int i = 0; i < k; i++) {
        sum += probs[i];
        if (ids[i] == t)
            found = i;
        CHECK(i == 0 || probs[i] <= probs[i - 1]);
    }
    CHECK(fabs(sum - 1.0) < 1e-5);
    CHECK(found >= 0 && hearth_sampler_post_prob(s, t) == probs[found]);
    int32_t cut = -1;
    for (int32_t v = 0; v < NV && cut < 0; v++)
        if (v != ids[0] && v != ids[1] && v != ids[2])
            cut = v;
    CHECK(hearth_sampler_post_prob(s, cut) == 0.0f);
    hearth_sampler_free(s);
}

/* Greedy over a vocabulary of whole 16-blocks and a tail (the argmax works
 * block-wise): the first index of the maximum wherever it lies, against a
 * plain loop, for the maximum in the first element, a middle block, several
 * blocks at once (ties), the tail, and -0 against +0. */
static void test_greedy_wide(void)
{
    enum { V = 16 * 70 + 9 };
    hearth_sampler *s = mk(0.0f, 0, 1.0f, 0.0f, 1, V);
    if (!s)
        return;
    static float l[V];
    uint32_t x = 7;
    int bad = 0;
    for (int c = 0; c < 200; c++) {
        for (int i = 0; i < V; i++) {
            x = x * 1664525u + 1013904223u;
            l[i] = (float)(x >> 8) / 16777216.0f;
        }
        int at[3] = {c % 3 == 0 ? 0 : (int)(x % V), (int)((x >> 3) % V), V - 1 - c % 9};
        for (int k = 0; k < 1 + c % 3; k++)
            l[at[k]] = c % 5 == 0 ? 0.0f : 2.0f;
        if (c % 5 == 0) {
            for (int i = 0; i < V; i++)
                l[i] -= 1.0f; /* all negative but the zeros */
            l[at[0]] = -0.0f;
        }
        int want = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[want])
                want = i;
        bad += hearth_sampler_sample(s, l) != want;
    }
    CHECK_MSG(bad == 0, "greedy over %d tokens: %d of 200 cases differ from a plain argmax", V, bad);
    hearth_sampler_free(s);
}

/* NaN counts as -inf and +inf as FLT_MAX, both in the 16-wide blocks of the
 * copy and in its tail (37 = 2 blocks + 5), and the draw stays defined. */
static void test_non_finite(void)
{
    enum { V = 37 };
    float l[V];
    for (int i = 0; i < V; i++)
        l[i] = (float)i / 10.0f;
    l[5] = NAN;
    l[35] = -NAN;
    l[20] = INFINITY;
    l[36] = INFINITY;
    l[7] = -INFINITY;
    hearth_sampler *s = mk(0.0f, 0, 1.0f, 0.0f, 9, V);
    if (s) {
        CHECK_EQ_INT(hearth_sampler_sample(s, l), 20);
        CHECK(s->work[5] == -INFINITY && s->work[35] == -INFINITY && s->work[7] == -INFINITY);
        CHECK(s->work[20] == FLT_MAX && s->work[36] == FLT_MAX);
        CHECK(s->work[4] == 0.4f && s->work[34] == 3.4f);
    }
    hearth_sampler_free(s);
    s = mk(1.0f, 0, 1.0f, 0.0f, 9, V);
    int hit20 = 0, other = 0;
    for (int i = 0; s && i < 2000; i++) {
        int32_t t = hearth_sampler_sample(s, l);
        hit20 += t == 20;
        other += t != 20 && t != 36;
    }
    CHECK_EQ_INT(other, 0);
    CHECK(hit20 > 800 && hit20 < 1200); /* p = 1/2: 2000 draws, > 8 sigma margin */
    hearth_sampler_free(s);
}

/* A generator for test logits independent of the sampler's. */
static uint32_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005u + 1442695040888963407u;
    return (uint32_t)(*x >> 33);
}

static void test_top_k1_is_greedy(void)
{
    enum { V = 5000 };
    float *l = malloc(V * sizeof *l);
    if (!l)
        return;
    uint64_t x = 99;
    hearth_sampler *g = mk(0.0f, 0, 1.0f, 0.0f, 5, V);
    hearth_sampler *k1 = mk(1.5f, 1, 1.0f, 0.0f, 5, V);
    for (int round = 0; g && k1 && round < 50; round++) {
        for (int i = 0; i < V; i++)
            l[i] = (float)(lcg(&x) % 20000) / 1000.0f; /* coarse grid: ties happen */
        int32_t want = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[want])
                want = i;
        CHECK_EQ_INT(hearth_sampler_sample(g, l), want);
        CHECK_EQ_INT(hearth_sampler_sample(k1, l), want);
    }
    hearth_sampler_free(g);
    hearth_sampler_free(k1);
    free(l);
}

static void test_distributions(void)
{
    check_empirical((ref_opts){.temp = 1.0, .top_k = 0, .top_p = 1.0, .min_p = 0}, "plain");
    check_empirical((ref_opts){.temp = 1.0, .top_k = 5, .top_p = 1.0, .min_p = 0}, "top_k 5");
    check_empirical((ref_opts){.temp = 1.0, .top_k = 0, .top_p = 0.8, .min_p = 0}, "top_p 0.8");
    check_empirical((ref_opts){.temp = 1.0, .top_k = 0, .top_p = 1.0, .min_p = 0.1}, "min_p 0.1");
    check_empirical((ref_opts){.temp = 0.7, .top_k = 6, .top_p = 0.9, .min_p = 0}, "top_k 6 top_p 0.9 t 0.7");
    check_empirical((ref_opts){.temp = 1.3, .top_k = 0, .top_p = 0.95, .min_p = 0.2}, "top_p+min_p t 1.3");
    check_empirical((ref_opts){.temp = 0.8, .top_k = 40, .top_p = 0.95, .min_p = 0.05}, "llama-server defaults");
    check_empirical((ref_opts){.temp = 2.0, .top_k = 0, .top_p = 0.0, .min_p = 0}, "top_p 0 keeps one");
}

/* ids of the k largest of l (ties: lowest id), by a full sort in the test. */
static const float *ref_sort_l;
static int ref_idx_cmp(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (ref_sort_l[i] != ref_sort_l[j])
        return ref_sort_l[i] > ref_sort_l[j] ? -1 : 1;
    return i - j;
}

/* A 150k vocabulary, as Qwen2's: the heap path (top_k) and the min_p
 * prefilter path (no top_k) must keep exactly the reference's top tokens
 * with the reference's probabilities. */
static void test_large_vocab(void)
{
    enum { V = 151936 };
    float *l = malloc(V * sizeof *l);
    int *idx = malloc(V * sizeof *idx);
    double *lw = malloc(V * sizeof *lw);
    if (!l || !idx || !lw)
        goto done;
    uint64_t x = 2024;
    for (int i = 0; i < V; i++) {
        l[i] = (float)(lcg(&x) % 1000000) / 100000.0f - 5.0f; /* [-5, 5) */
        idx[i] = i;
    }
    l[77777] = 9.0f; /* a clear winner */
    l[123] = 8.0f;
    ref_sort_l = l;
    qsort(idx, V, sizeof *idx, ref_idx_cmp);
    double lmax = l[idx[0]];

    /* top_k 40 at temperature 1, other filters off: softmax over the 40 best */
    hearth_sampler *s = mk(1.0f, 40, 1.0f, 0.0f, 3, V);
    if (s) {
        hearth_sampler_sample(s, l);
        int32_t ids[64];
        float probs[64];
        CHECK_EQ_INT(hearth_sampler_top_probs(s, 64, ids, probs), 40);
        double z = 0;
        for (int r = 0; r < 40; r++)
            z += exp(l[idx[r]] - lmax);
        for (int r = 0; r < 40; r++) {
            CHECK_EQ_INT(ids[r], idx[r]);
            CHECK_NEAR(probs[r], exp(l[idx[r]] - lmax) / z, 1e-6);
        }
        uint64_t t0 = hearth_now_ns();
        for (int i = 0; i < 100; i++)
            hearth_sampler_sample(s, l);
        printf("# top_k 40 over %d tokens: %.1f us per sample\n", V, (double)(hearth_now_ns() - t0) / 100 / 1000);
    }
    hearth_sampler_free(s);

    /* no top_k, top_p 0.95, min_p 0.05: the reference over all V tokens */
    for (int i = 0; i < V; i++)
        lw[i] = l[i];
    s = mk(1.0f, 0, 0.95f, 0.05f, 3, V);
    if (s) {
        /* ref_dist is O(n^2); do its steps here over the sorted order instead */
        double z = 0;
        for (int i = 0; i < V; i++)
            z += exp(lw[i] - lmax);
        int keep = V;
        double cum = 0;
        for (int r = 0; r < V; r++) {
            cum += exp(lw[idx[r]] - lmax) / z;
            if (cum >= 0.95) {
                keep = r + 1;
                break;
            }
        }
        int r = 1;
        while (r < keep && exp(lw[idx[r]] - lmax) >= 0.05)
            r++;
        keep = r;
        double zt = 0;
        for (r = 0; r < keep; r++)
            zt += exp(lw[idx[r]] - lmax);
        hearth_sampler_sample(s, l);
        int32_t ids[8];
        float probs[8];
        int got = hearth_sampler_top_probs(s, 8, ids, probs);
        CHECK_EQ_INT(got, keep < 8 ? keep : 8);
        CHECK(keep >= 2); /* 9.0 and 8.0: exp(-1) > 0.05 */
        for (int i = 0; i < got; i++) {
            CHECK_EQ_INT(ids[i], idx[i]);
            CHECK_NEAR(probs[i], exp(lw[idx[i]] - lmax) / zt, 1e-6);
        }
        uint64_t t0 = hearth_now_ns();
        for (int i = 0; i < 20; i++)
            hearth_sampler_sample(s, l);
        printf("# min_p path over %d tokens: %.1f us per sample\n", V, (double)(hearth_now_ns() - t0) / 20 / 1000);
    }
    hearth_sampler_free(s);
done:
    free(l);
    free(idx);
    free(lw);
}

static hearth_sampler *mk_pen(float rep, int last_n, float pres, float freq)
{
    hearth_sampler_params p;
    hearth_sampler_params_default(&p);
    p.temperature = 0;
    p.repeat_penalty = rep;
    p.repeat_last_n = last_n;
    p.presence_penalty = pres;
    p.frequency_penalty = freq;
    p.seed = 1;
    hearth_err err = {0};
    hearth_sampler *s = hearth_sampler_new(&p, NV, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    return s;
}

static void test_repeat_penalty(void)
{
    hearth_sampler *s = mk_pen(1.5f, 3, 0, 0);
    if (!s)
        return;
    /* window of 3: token 5 falls out when 2, 1, 1 follow */
    hearth_sampler_accept(s, 5);
    hearth_sampler_accept(s, 2);
    hearth_sampler_accept(s, 1);
    hearth_sampler_accept(s, 1);
    hearth_sampler_accept(s, NV + 3); /* out of range: ignored */
    hearth_sampler_accept(s, -1);
    int32_t t = hearth_sampler_sample(s, base_logits);
    for (int i = 0; i < NV; i++) {
        float want = base_logits[i];
        if (i == 1)
            want = 3.2f / 1.5f; /* positive: divided, once however often it repeats */
        if (i == 2)
            want = -0.5f * 1.5f; /* negative: multiplied */
        CHECK_MSG(s->work[i] == want, "token %d: %g vs %g", i, (double)s->work[i], (double)want);
    }
    /* token 1 (3.2) fell to 2.13: greedy now takes 5 (2.9) */
    CHECK_EQ_INT(t, 5);
    hearth_sampler_reset_history(s);
    CHECK_EQ_INT(hearth_sampler_sample(s, base_logits), 1);
    CHECK(s->work[1] == 3.2f);
    hearth_sampler_free(s);

    /* presence and frequency, OpenAI's: l - count * freq - (count > 0) * pres */
    s = mk_pen(1.0f, 64, 0.5f, 0.25f);
    if (!s)
        return;
    hearth_sampler_accept(s, 3);
    hearth_sampler_accept(s, 3);
    hearth_sampler_accept(s, 3);
    hearth_sampler_accept(s, 11);
    hearth_sampler_sample(s, base_logits);
    CHECK_NEAR(s->work[3], 2.1 - 3 * 0.25 - 0.5, 1e-6);
    CHECK_NEAR(s->work[11], 0.0 - 0.25 - 0.5, 1e-6);
    CHECK(s->work[1] == base_logits[1]);
    CHECK(s->counts[3] == 3); /* the marks used while applying are undone */
    hearth_sampler_free(s);

    /* repeat_last_n 0 turns every penalty off */
    s = mk_pen(2.0f, 0, 1.0f, 1.0f);
    if (!s)
        return;
    hearth_sampler_accept(s, 1);
    CHECK_EQ_INT(hearth_sampler_sample(s, base_logits), 1);
    hearth_sampler_free(s);
}

static void draw_seq(uint64_t seed, int32_t *out, int n)
{
    hearth_sampler *s = mk(1.0f, 0, 1.0f, 0.0f, seed, NV);
    for (int i = 0; i < n; i++)
        out[i] = s ? hearth_sampler_sample(s, base_logits) : -1;
    hearth_sampler_free(s);
}

static void test_seeds(void)
{
    enum { N = 64 };
    int32_t a[N], b[N], c[N];
    draw_seq(42, a, N);
    draw_seq(42, b, N);
    draw_seq(43, c, N);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);

    /* two samplers interleaved, as in a batch, draw as each does alone */
    hearth_sampler *s1 = mk(1.0f, 0, 1.0f, 0.0f, 42, NV), *s2 = mk(1.0f, 0, 1.0f, 0.0f, 43, NV);
    for (int i = 0; s1 && s2 && i < N; i++) {
        CHECK_EQ_INT(hearth_sampler_sample(s1, base_logits), a[i]);
        CHECK_EQ_INT(hearth_sampler_sample(s2, base_logits), c[i]);
    }
    hearth_sampler_free(s1);
    hearth_sampler_free(s2);

    /* a seed from the OS is reported, and repeats the run when given back */
    hearth_sampler *r1 = mk(1.0f, 0, 1.0f, 0.0f, HEARTH_SAMPLER_SEED_RANDOM, NV);
    hearth_sampler *r2 = mk(1.0f, 0, 1.0f, 0.0f, HEARTH_SAMPLER_SEED_RANDOM, NV);
    if (r1 && r2) {
        CHECK(hearth_sampler_seed(r1) != hearth_sampler_seed(r2)); /* 2^-32 to fail by chance */
        draw_seq(hearth_sampler_seed(r1), a, N);
        for (int i = 0; i < N; i++)
            CHECK_EQ_INT(hearth_sampler_sample(r1, base_logits), a[i]);
    }
    hearth_sampler_free(r1);
    hearth_sampler_free(r2);
}

static void test_low_temperature(void)
{
    /* The best two logits differ by 0.3; at temperature t the runner-up has
     * odds exp(-0.3 / t) against the best. The share of the argmax must rise
     * towards 1 as t falls, and at t = 0.001 (odds e^-300) be exactly 1. */
    static const double temps[] = {1.0, 0.3, 0.1, 0.001};
    double prev = 0;
    for (int k = 0; k < 4; k++) {
        hearth_sampler *s = mk((float)temps[k], 0, 1.0f, 0.0f, 77, NV);
        if (!s)
            return;
        int best = 0;
        for (int i = 0; i < 20000; i++)
            best += hearth_sampler_sample(s, base_logits) == 1;
        double share = best / 20000.0;
        CHECK_MSG(share > prev, "t=%g share %.4f not above %.4f", temps[k], share, prev);
        prev = share;
        hearth_sampler_free(s);
    }
    CHECK(prev == 1.0);
}

static void test_invalid(void)
{
    static const struct {
        const char *what;
        float temp, top_p, min_p, rep, pres;
        int last_n;
        int32_t nv;
    } bad[] = {
        {"temperature NaN", NAN, 0.9f, 0.05f, 1, 0, 64, NV},
        {"temperature inf", INFINITY, 0.9f, 0.05f, 1, 0, 64, NV},
        {"top_p negative", 0.8f, -0.1f, 0.05f, 1, 0, 64, NV},
        {"top_p NaN", 0.8f, NAN, 0.05f, 1, 0, 64, NV},
        {"min_p NaN", 0.8f, 0.9f, NAN, 1, 0, 64, NV},
        {"min_p above 1", 0.8f, 0.9f, 1.5f, 1, 0, 64, NV},
        {"repeat_penalty 0", 0.8f, 0.9f, 0.05f, 0, 0, 64, NV},
        {"repeat_penalty NaN", 0.8f, 0.9f, 0.05f, NAN, 0, 64, NV},
        {"presence inf", 0.8f, 0.9f, 0.05f, 1, INFINITY, 64, NV},
        {"repeat_last_n -1", 0.8f, 0.9f, 0.05f, 1, 0, -1, NV},
        {"repeat_last_n huge", 0.8f, 0.9f, 0.05f, 1, 0, HEARTH_SAMPLER_MAX_LAST_N + 1, NV},
        {"n_vocab 0", 0.8f, 0.9f, 0.05f, 1, 0, 64, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hearth_sampler_params p;
        hearth_sampler_params_default(&p);
        p.temperature = bad[i].temp;
        p.top_p = bad[i].top_p;
        p.min_p = bad[i].min_p;
        p.repeat_penalty = bad[i].rep;
        p.presence_penalty = bad[i].pres;
        p.repeat_last_n = bad[i].last_n;
        hearth_err err = {0};
        hearth_sampler *s = hearth_sampler_new(&p, bad[i].nv, &err);
        CHECK_MSG(s == NULL, "%s accepted", bad[i].what);
        CHECK_MSG(err.code == HEARTH_EINVAL && err.msg[0], "%s: code %d", bad[i].what, err.code);
        hearth_sampler_free(s);
    }
    /* the edges that are valid */
    hearth_sampler *s = mk(0.8f, -5, 0.0f, 1.0f, 1, NV);
    CHECK(s != NULL);
    hearth_sampler_free(s);
    hearth_sampler_free(NULL);
}

int main(void)
{
    RUN(test_rng_reference);
    RUN(test_defaults);
    RUN(test_greedy);
    RUN(test_greedy_wide);
    RUN(test_post_probs);
    RUN(test_non_finite);
    RUN(test_top_k1_is_greedy);
    RUN(test_distributions);
    RUN(test_large_vocab);
    RUN(test_repeat_penalty);
    RUN(test_seeds);
    RUN(test_draws_as_libstdcxx);
    RUN(test_low_temperature);
    RUN(test_invalid);
    TEST_EXIT();
}

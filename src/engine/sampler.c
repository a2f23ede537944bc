/* sampler.c: llama-server's sampling chain over one logits vector.
 *
 * Each call copies the logits into the sampler's scratch (NaN -> -inf, +inf
 * -> FLT_MAX, so every later step does ordinary arithmetic), applies the
 * penalties to the few tokens in the history window, and then either takes
 * the argmax (greedy) or builds a candidate list sorted by logit, cuts it with
 * top_p and min_p (both keep a prefix of that order), rescales the survivors
 * by the temperature and draws. With top_k set, the k best are picked by a
 * min-heap in one pass (O(n log k), almost always one compare per token), so
 * a 150k vocabulary costs a copy and a scan, not a sort. Without top_k but
 * with min_p, only tokens above the min_p cut are sorted: min_p and top_p both
 * keep a prefix of the same order, so the shorter prefix is the answer and
 * top_p's sums still use the normaliser over the whole vocabulary. Only with
 * neither is the whole vocabulary sorted.
 *
 * Penalty counts are kept per token and updated as tokens are accepted (one
 * increment, one decrement when the oldest leaves the window), so applying
 * them costs the window size, not the vocabulary.
 *
 * The generator and the arithmetic of the last steps are llama.cpp's
 * (mt19937, libstdc++'s discrete_distribution, float softmax sums for top_p
 * and the draw), so that a seed gives the text llama-server gives from the
 * same logits: clients and llama.cpp's own tests pin seeded texts. The
 * normaliser over a whole vocabulary (no top_k) is still summed in double.
 *
 * Rejected: a full sort per token (10+ ms at 150k tokens); quickselect (the
 * heap keeps ties in id order for free and k is small); a generator of our
 * own (xoshiro256**, used until 2026-12: as good, but a seed then gave other
 * texts than llama-server's); a global or thread-local RNG (batched sequences
 * would change each other's draws). */
#include "engine/sampler.h"

#include "base/clock.h"
#include "base/random.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct hearth_mt19937 {
    uint32_t s[624];
    int i;
} hearth_mt19937;

typedef struct cand {
    int32_t id;
    float logit; /* penalized, at temperature 1 */
    double p;    /* final probability, after the last sample */
} cand;

enum { LAST_NONE, LAST_GREEDY, LAST_DIST };

struct hearth_sampler {
    hearth_sampler_params p;
    int32_t n_vocab;
    uint64_t seed;
    hearth_mt19937 rng;
    float *work;         /* (n_vocab) penalized logits of the last sample */
    int32_t *counts;     /* (n_vocab) occurrences in the window; NULL when no penalty is on */
    int32_t *ring;       /* (repeat_last_n) the window, oldest at ring_pos once full */
    int32_t ring_len, ring_pos;
    cand *cand;          /* candidates, best first */
    size_t cand_cap;
    int32_t n_cand;      /* survivors of the last non-greedy sample */
    int last;            /* LAST_*: what top_probs reports */
};

void hearth_sampler_params_default(hearth_sampler_params *p)
{
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->presence_penalty = 0.0f;
    p->frequency_penalty = 0.0f;
    p->seed = HEARTH_SAMPLER_SEED_RANDOM;
}

/* ---- generator: llama.cpp's, so that a seed gives llama-server's text ----
 *
 * std::mt19937 seeded with the seed's low 32 bits (llama.cpp's seed is a
 * uint32_t), drawn as libstdc++'s std::discrete_distribution draws: u is
 * generate_canonical<double, 53>, two outputs a, b as (a + b * 2^32) / 2^64
 * (the largest double below 1 if that rounds to 1), and the answer is the
 * first index whose cumulative probability is >= u (see draw()). */

enum { MT_N = 624, MT_M = 397 };

static void mt_seed(hearth_mt19937 *m, uint32_t seed)
{
    m->s[0] = seed;
    for (uint32_t i = 1; i < MT_N; i++)
        m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + i;
    m->i = MT_N;
}

static uint32_t mt_next(hearth_mt19937 *m)
{
    if (m->i >= MT_N) {
        for (int k = 0; k < MT_N; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % MT_N] & 0x7fffffffu);
            m->s[k] = m->s[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1) ? 0x9908b0dfu : 0);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* Uniform in [0, 1): libstdc++'s generate_canonical<double, 53> over mt19937. */
static double rng_uniform(hearth_mt19937 *m)
{
    double lo = (double)mt_next(m);
    double hi = (double)mt_next(m);
    double u = (lo + hi * 0x1.0p32) / 0x1.0p64;
    return u >= 1.0 ? nextafter(1.0, 0.0) : u;
}

/* ---- lifecycle ---- */

static bool penalties_on(const hearth_sampler_params *p)
{
    return p->repeat_last_n > 0 &&
           (p->repeat_penalty != 1.0f || p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f);
}

static int check_params(const hearth_sampler_params *p, int32_t n_vocab, hearth_err *err)
{
    const char *bad = NULL;
    float v = 0;
    if (!isfinite(p->temperature))
        bad = "temperature", v = p->temperature;
    else if (isnan(p->top_p) || p->top_p < 0)
        bad = "top_p", v = p->top_p;
    else if (isnan(p->min_p) || p->min_p > 1)
        bad = "min_p", v = p->min_p;
    else if (!isfinite(p->repeat_penalty) || p->repeat_penalty <= 0)
        bad = "repeat_penalty", v = p->repeat_penalty;
    else if (!isfinite(p->presence_penalty))
        bad = "presence_penalty", v = p->presence_penalty;
    else if (!isfinite(p->frequency_penalty))
        bad = "frequency_penalty", v = p->frequency_penalty;
    if (bad)
        return hearth_err_set(err, HEARTH_EINVAL, "sampler: %s %g is out of range", bad, (double)v);
    if (p->repeat_last_n < 0 || p->repeat_last_n > HEARTH_SAMPLER_MAX_LAST_N)
        return hearth_err_set(err, HEARTH_EINVAL, "sampler: repeat_last_n %d is out of range (0..%d)",
                              p->repeat_last_n, HEARTH_SAMPLER_MAX_LAST_N);
    if (n_vocab < 1)
        return hearth_err_set(err, HEARTH_EINVAL, "sampler: n_vocab %d < 1", (int)n_vocab);
    return HEARTH_OK;
}

hearth_sampler *hearth_sampler_new(const hearth_sampler_params *p, int32_t n_vocab, hearth_err *err)
{
    if (check_params(p, n_vocab, err))
        return NULL;
    hearth_sampler *s = calloc(1, sizeof *s);
    if (!s)
        goto fail;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    if (!s->work)
        goto fail;
    if (penalties_on(p)) {
        s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
        s->ring = malloc((size_t)p->repeat_last_n * sizeof *s->ring);
        if (!s->counts || !s->ring)
            goto fail;
    }
    s->seed = p->seed == HEARTH_SAMPLER_SEED_RANDOM ? (uint32_t)hearth_random_u64() : p->seed;
    mt_seed(&s->rng, (uint32_t)s->seed);
    return s;
fail:
    hearth_sampler_free(s);
    hearth_err_set(err, HEARTH_ENOMEM, "sampler: out of memory for a vocabulary of %d tokens", (int)n_vocab);
    return NULL;
}

void hearth_sampler_free(hearth_sampler *s)
{
    if (!s)
        return;
    free(s->work);
    free(s->counts);
    free(s->ring);
    free(s->cand);
    free(s);
}

uint64_t hearth_sampler_seed(const hearth_sampler *s) { return s->seed; }

/* ---- penalty history ---- */

void hearth_sampler_accept(hearth_sampler *s, int32_t token)
{
    if (!s->counts || token < 0 || token >= s->n_vocab)
        return;
    int32_t cap = s->p.repeat_last_n;
    if (s->ring_len == cap)
        s->counts[s->ring[s->ring_pos]]--;
    else
        s->ring_len++;
    s->ring[s->ring_pos] = token;
    s->counts[token]++;
    s->ring_pos = s->ring_pos + 1 == cap ? 0 : s->ring_pos + 1;
}

void hearth_sampler_reset_history(hearth_sampler *s)
{
    if (!s->counts)
        return;
    for (int32_t i = 0; i < s->ring_len; i++)
        s->counts[s->ring[i]] = 0;
    s->ring_len = s->ring_pos = 0;
}

static inline float sanitize(float x)
{
    if (isnan(x))
        return -INFINITY;
    return x == INFINITY ? FLT_MAX : x;
}

static inline uint32_t sanitize_bits(uint32_t b)
{
    b = (b & 0x7fffffffu) > 0x7f800000u ? 0xff800000u : b; /* NaN -> -inf */
    return b == 0x7f800000u ? 0x7f7fffffu : b;             /* +inf -> FLT_MAX */
}

/* The copy works on bit patterns in blocks of 16: gcc -O2 (its "very cheap"
 * vectorizer) vectorizes neither a float compare, which might trap, nor a
 * loop whose count needs a scalar epilogue, and the plain loop cost 150 us
 * at 150k tokens, more than the whole rest of a top_k sample. */
static void copy_sanitized(float *restrict dst, const float *restrict src, int32_t n)
{
    enum { B = 16 };
    int32_t i = 0;
    for (; i + B <= n; i += B) {
        uint32_t b[B];
        memcpy(b, src + i, sizeof b);
        for (int j = 0; j < B; j++)
            b[j] = sanitize_bits(b[j]);
        memcpy(dst + i, b, sizeof b);
    }
    for (; i < n; i++)
        dst[i] = sanitize(src[i]);
}

/* Applies the penalties to work[] once per distinct token in the window. A
 * token's count is negated while it is done, so repeats in the window are
 * skipped without a second table; the second pass restores the counts. */
static void apply_penalties(hearth_sampler *s)
{
    const float rep = s->p.repeat_penalty, pres = s->p.presence_penalty, freq = s->p.frequency_penalty;
    for (int32_t i = 0; i < s->ring_len; i++) {
        int32_t t = s->ring[i], c = s->counts[t];
        if (c <= 0)
            continue;
        float l = s->work[t];
        if (rep != 1.0f)
            l = l <= 0 ? l * rep : l / rep;
        l -= (float)c * freq + pres;
        s->work[t] = sanitize(l);
        s->counts[t] = -c;
    }
    for (int32_t i = 0; i < s->ring_len; i++) {
        int32_t t = s->ring[i];
        if (s->counts[t] < 0)
            s->counts[t] = -s->counts[t];
    }
}

/* ---- candidates ---- */

static int grow_cand(hearth_sampler *s, size_t n)
{
    if (n <= s->cand_cap)
        return 0;
    cand *c = realloc(s->cand, n * sizeof *c);
    if (!c)
        return -1;
    s->cand = c;
    s->cand_cap = n;
    return 0;
}

/* Best first: larger logit, then lower id. */
static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    if (a->logit != b->logit)
        return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static inline bool worse(const cand *a, const cand *b)
{
    return a->logit < b->logit || (a->logit == b->logit && a->id > b->id);
}

static void sift_down(cand *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && worse(&h[l], &h[w]))
            w = l;
        if (r < n && worse(&h[r], &h[w]))
            w = r;
        if (w == i)
            return;
        cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* The k best of x[0..n) into out[0..k), best first. A min-heap of the k best
 * so far has the worst at its root; a later id with an equal logit is worse
 * (ties go to the lowest id), so only a strictly larger logit enters. */
static void select_top(const float *x, int32_t n, int32_t k, cand *out)
{
    for (int32_t i = 0; i < k; i++)
        out[i] = (cand){.id = i, .logit = x[i]};
    for (int32_t i = k / 2 - 1; i >= 0; i--)
        sift_down(out, k, i);
    float floor = out[0].logit;
    for (int32_t i = k; i < n; i++) {
        if (x[i] > floor) {
            out[0] = (cand){.id = i, .logit = x[i]};
            sift_down(out, k, 0);
            floor = out[0].logit;
        }
    }
    qsort(out, (size_t)k, sizeof *out, cand_cmp);
}

/* The first index of the largest of x (sanitized: no NaN). Two passes: the
 * maximum by 16 lane-wise maxima, which gcc -O2 turns into vector max
 * instructions, then the first element equal to it (found block-wise too). The one-pass loop is a
 * chain of compare and cmov through `best`: ~1.5 cycles an element, the
 * whole of a greedy sample (profiled in hearth serve, 4 streams: 5% of the
 * engine's time at 32k tokens). -0 and +0 compare equal in both forms, so
 * ties resolve to the same first index. */
static int32_t argmax(const float *x, int32_t n)
{
    enum { B = 16 };
    float lane[B];
    int32_t i = 0;
    for (int j = 0; j < B; j++)
        lane[j] = -INFINITY;
    for (; i + B <= n; i += B)
        for (int j = 0; j < B; j++)
            lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    float max = x[0];
    for (int j = 0; j < B; j++)
        max = lane[j] > max ? lane[j] : max;
    for (; i < n; i++)
        max = x[i] > max ? x[i] : max;
    /* the first block holding it, 16 compares at a time, then the element */
    for (i = 0; i + B <= n; i += B) {
        int hit = 0;
        for (int j = 0; j < B; j++)
            hit |= x[i + j] == max;
        if (hit)
            break;
    }
    for (; i < n; i++)
        if (x[i] == max)
            return i;
    return 0;
}

/* Sum of exp(x[i] - max) over the whole vocabulary. */
static double softmax_norm(const float *x, int32_t n, float max)
{
    double z = 0;
    for (int32_t i = 0; i < n; i++)
        z += exp((double)x[i] - (double)max);
    return z;
}

/* Fills s->cand with the candidates that reach top_p, best first, and returns
 * their count (-1 when out of memory); *z gets the normaliser top_p uses. */
static int32_t gather(hearth_sampler *s, double *z)
{
    const int32_t n = s->n_vocab;
    const float *x = s->work;
    int32_t k = s->p.top_k > 0 && s->p.top_k < n ? s->p.top_k : n;
    if (k < n) {
        if (grow_cand(s, (size_t)k))
            return -1;
        select_top(x, n, k, s->cand);
        float sum = 0; /* llama.cpp's float softmax over the k, best first */
        for (int32_t i = 0; i < k; i++)
            sum += expf(s->cand[i].logit - s->cand[0].logit);
        *z = sum;
        return k;
    }
    float max = x[argmax(x, n)];
    float cut = s->p.min_p > 0 ? max + logf(s->p.min_p) : -INFINITY;
    if (grow_cand(s, (size_t)n))
        return -1;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (x[i] >= cut)
            s->cand[m++] = (cand){.id = i, .logit = x[i]};
    qsort(s->cand, (size_t)m, sizeof *s->cand, cand_cmp);
    *z = softmax_norm(x, n, max);
    return m;
}

/* The temperature and the draw over the m survivors c[0..m), in
 * llama.cpp's arithmetic, so that its seed picks the same token from the
 * same logits: the logits divided by the temperature in float, a float
 * softmax summed best first, then std::discrete_distribution's double
 * normalisation and cumulative sums (the last forced to 1) searched for the
 * first >= u. A lone survivor is taken without a draw, as there. */
static int32_t draw(hearth_sampler *s, int32_t m)
{
    cand *c = s->cand;
    const float t = s->p.temperature;
    const float l0 = c[0].logit / t;
    float fsum = 0;
    for (int32_t i = 0; i < m; i++) {
        float p = expf(c[i].logit / t - l0);
        c[i].p = p;
        fsum += p;
    }
    double dsum = 0;
    for (int32_t i = 0; i < m; i++) {
        c[i].p = (double)((float)c[i].p / fsum);
        dsum += c[i].p;
    }
    for (int32_t i = 0; i < m; i++)
        c[i].p /= dsum;
    s->n_cand = m;
    s->last = LAST_DIST;
    if (m < 2)
        return c[0].id;
    double u = rng_uniform(&s->rng), cum = 0;
    for (int32_t i = 0; i < m - 1; i++) {
        cum += c[i].p;
        if (cum >= u)
            return c[i].id;
    }
    return c[m - 1].id;
}

/* The chain over s->work, which holds the sanitized (and masked) logits. */
static int32_t sample_work(hearth_sampler *s)
{
    const int32_t n = s->n_vocab;
    if (s->counts)
        apply_penalties(s);

    if (s->p.temperature <= 0) {
        s->last = LAST_GREEDY;
        return argmax(s->work, n);
    }

    double z = 0;
    int32_t m = gather(s, &z);
    if (m < 0) {
        /* Out of memory for the candidate list: fall back to greedy rather
         * than fail a stream mid-way; the argmax needs no memory. */
        s->last = LAST_GREEDY;
        return argmax(s->work, n);
    }
    cand *c = s->cand;
    const double lmax = c[0].logit;
    if (lmax == -INFINITY || z <= 0) {
        /* Every logit is -inf (or NaN): nothing to weigh, take the lowest id. */
        c[0].p = 1.0;
        s->n_cand = 1;
        s->last = LAST_DIST;
        return c[0].id;
    }
    if (s->p.top_p < 1.0f) {
        /* in float, as llama.cpp sums it: its cut falls where its does */
        const float zf = (float)z;
        float cum = 0;
        for (int32_t i = 0; i < m; i++) {
            cum += expf(c[i].logit - c[0].logit) / zf;
            if (cum >= s->p.top_p) {
                m = i + 1;
                break;
            }
        }
    }
    if (s->p.min_p > 0) {
        float cut = c[0].logit + logf(s->p.min_p);
        int32_t keep = 1;
        while (keep < m && c[keep].logit >= cut)
            keep++;
        m = keep;
    }
    return draw(s, m);
}

int hearth_sampler_top_probs(hearth_sampler *s, int n, int32_t *ids, float *probs)
{
    if (n <= 0 || s->last == LAST_NONE)
        return 0;
    if (s->last == LAST_GREEDY) {
        int32_t k = n < s->n_vocab ? n : s->n_vocab;
        if (grow_cand(s, (size_t)k))
            return 0;
        select_top(s->work, s->n_vocab, k, s->cand);
        float max = s->cand[0].logit;
        double z = softmax_norm(s->work, s->n_vocab, max);
        for (int32_t i = 0; i < k; i++) {
            ids[i] = s->cand[i].id;
            probs[i] = max == -INFINITY ? (i == 0) : (float)(exp((double)s->cand[i].logit - max) / z);
        }
        return k;
    }
    int k = n < s->n_cand ? n : s->n_cand;
    for (int i = 0; i < k; i++) {
        ids[i] = s->cand[i].id;
        probs[i] = (float)s->cand[i].p;
    }
    return k;
}

int hearth_sampler_top_probs_post(hearth_sampler *s, int n, int32_t *ids, float *probs)
{
    if (s->last != LAST_GREEDY)
        return hearth_sampler_top_probs(s, n, ids, probs);
    int k = hearth_sampler_top_probs(s, n, ids, probs); /* the order by logit; the argmax first */
    for (int i = 0; i < k; i++)
        probs[i] = i == 0 ? 1.0f : 0.0f;
    return k;
}

float hearth_sampler_post_prob(const hearth_sampler *s, int32_t id)
{
    if (s->last == LAST_NONE)
        return -1;
    if (s->last == LAST_GREEDY)
        return argmax(s->work, s->n_vocab) == id ? 1.0f : 0.0f;
    for (int32_t i = 0; i < s->n_cand; i++)
        if (s->cand[i].id == id)
            return (float)s->cand[i].p;
    return 0;
}

int32_t hearth_sampler_sample(hearth_sampler *s, const float *logits)
{
    copy_sanitized(s->work, logits, s->n_vocab);
    return sample_work(s);
}

bool hearth_sampler_is_plain_argmax(const hearth_sampler *s)
{
    return s->p.temperature <= 0 && !s->counts;
}

int32_t hearth_logits_argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    float bv = n > 0 ? sanitize(x[0]) : 0;
    for (int32_t i = 1; i < n; i++) {
        float v = sanitize(x[i]);
        if (v > bv) {
            bv = v;
            best = i;
        }
    }
    return best;
}

int32_t hearth_sampler_sample_masked(hearth_sampler *s, const float *logits, const uint8_t *allowed)
{
    const int32_t n = s->n_vocab;
    copy_sanitized(s->work, logits, n);
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++) {
        if (!allowed[i])
            s->work[i] = -INFINITY;
        else if (best < 0 || s->work[i] > s->work[best])
            best = i;
    }
    if (best < 0)
        return -1;
    int32_t tok = sample_work(s);
    /* every allowed logit -inf, or a draw that rounded past the last weighed
     * candidate: the best allowed token rather than a masked one */
    return allowed[tok] ? tok : best;
}

/* Unit tests for engine/dev.h: every op of every device in the registry
 * (today the CPU alone; a GPU backend joins by registering) held to a scalar
 * oracle written here, in double, at odd sizes: rows 1, 3, 17, 130 (below
 * and above the CPU's ROWS_PARALLEL_MIN), widths 7, 33, 100, 384, on streams
 * over no pool, two and three threads. Data goes to the device by upload and
 * comes back by download, as a walk's would, so a device whose memory is not
 * the host's runs the same cases. Also: bad arguments come back as a status,
 * and the stream's arena keeps its address while its size does not grow. */
#include "harness.h"
#include "dev_test.h"

#include "base/err.h"
#include "base/pool.h"
#include "engine/dev.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/quant.h"
#include "engine/sampler.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const int64_t ROWS[] = {1, 2, 3, 6, 12, 17, 130}; /* 2, 6, 12: each row count the mat-vec stages X for */
static const int64_t WIDTHS[] = {7, 33, 100, 384};
#define NROWS (int)(sizeof ROWS / sizeof ROWS[0])
#define NWIDTHS (int)(sizeof WIDTHS / sizeof WIDTHS[0])

static const char *g_where;

/* |got - want| <= atol + rtol |want| over n values; reports the first miss. */
static int near_all(const char *what, const float *got, const double *want, int64_t n, double atol, double rtol)
{
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= atol + rtol * fabs(want[i]))) {
            fprintf(stderr, "  %s %s: [%lld] = %.9g, oracle %.9g\n", g_where, what, (long long)i, got[i], want[i]);
            hearth_test_case_failed = 1;
            return 1;
        }
    }
    return 0;
}

/* A per-step block of n rows (positions pos, slots slot, tokens tok, RoPE
 * angles from pos, sequences of lens) on the device; the host copy in *hb. */
typedef struct step {
    hearth_batch hb, db;
    void *host, *dev;
} step;

static void step_make(step *s, int64_t n, const int32_t *tok, const int64_t *pos, const int32_t *slot, int64_t n_rot,
                      const int32_t *lens, int n_seqs, const int32_t *out_src, int64_t n_out)
{
    int64_t rs = n_rot > 0 ? n_rot : 1;
    size_t bytes = hearth_batch_layout(&s->hb, NULL, n, rs, n_seqs);
    s->host = calloc(1, bytes);
    hearth_batch_layout(&s->hb, s->host, n, rs, n_seqs);
    for (int64_t i = 0; i < n; i++) {
        s->hb.token[i] = tok ? tok[i] : 0;
        s->hb.pos[i] = pos ? pos[i] : 0;
        s->hb.slot[i] = slot ? slot[i] : 0;
        for (int64_t j = 0; j < n_rot / 2; j++) {
            double a = (double)s->hb.pos[i] * pow(10000.0, -2.0 * (double)j / (double)n_rot);
            s->hb.rope_cs[i * rs + 2 * j] = (float)cos(a);
            s->hb.rope_cs[i * rs + 2 * j + 1] = (float)sin(a);
        }
    }
    for (int64_t i = 0; i < n_out; i++)
        s->hb.out_src[i] = out_src[i];
    s->hb.n_out = n_out;
    s->hb.seq_start[0] = 0;
    for (int q = 0; q < n_seqs; q++)
        s->hb.seq_start[q + 1] = s->hb.seq_start[q] + lens[q];
    s->dev = dput(s->host, bytes);
    hearth_batch_layout(&s->db, s->dev, n, rs, n_seqs);
    s->db.n_out = n_out;
}
static void step_free(step *s)
{
    free(s->host);
    dfree(s->dev);
}

/* ---- oracles ---- */

static void rms_ref(double *y, const double *x, int64_t n, const float *w, double eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * r * (w ? w[i] : 1.0);
}
static void ln_ref(double *y, const double *x, int64_t n, const float *g, const float *b, double eps)
{
    double mean = 0, var = 0;
    for (int64_t i = 0; i < n; i++)
        mean += x[i];
    mean /= (double)n;
    for (int64_t i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
    var /= (double)n;
    double r = 1.0 / sqrt(var + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] - mean) * r * g[i] + b[i];
}
static void widen(double *d, const float *f, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        d[i] = f[i];
}

/* ---- MATMUL ---- */

static const hearth_dtype MM_TYPES[] = {HEARTH_F32, HEARTH_F16, HEARTH_BF16, HEARTH_Q8_0, HEARTH_Q4_0, HEARTH_Q4_K,
                                        HEARTH_Q6_K};

static void *make_weights(hearth_dtype t, int64_t N, int64_t K, size_t *rb)
{
    hearth_dtype_row_bytes(t, K, rb);
    char *w = calloc((size_t)N, *rb);
    float *row = frands(K);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            row[k] = frand();
        hearth_quant_quantize_row(t, row, w + (size_t)n * *rb, K);
    }
    free(row);
    return w;
}

/* The oracle of one product: sum over k of wd[k] xm[k] (wd a dequantized
 * weight row), in double, and test_matmul.c's bound on a device's error: 2e-5
 * of the sum of |terms|, plus the q8a quantization of X for the quantized
 * types, plus the rounding the device says its matmul may apply
 * (caps.matmul_round: a tensor-core path rounds the inputs). */
static double mm_ref(hearth_dtype t, const float *wd, int64_t K, const float *xm, double *bound)
{
    double sum = 0, sumabs = 0, qerr = 0;
    for (int64_t k = 0; k < K; k++) {
        sum += (double)wd[k] * xm[k];
        sumabs += fabs((double)wd[k] * xm[k]);
        if (hearth_quant_uses_q8a(t) && k % 32 == 0) {
            float amax = 0, wsum = 0;
            for (int l = 0; l < 32 && k + l < K; l++) {
                amax = fmaxf(amax, fabsf(xm[k + l]));
                wsum += fabsf(wd[k + l]);
            }
            qerr += (double)wsum * amax / 254 * (1 + 1e-6);
        }
    }
    *bound = (2e-5 + g_dev->caps.matmul_round) * sumabs + qerr + 1e-6;
    return sum;
}

/* Y (M, N) against the oracle (mm_ref). */
static void check_mm(const char *what, hearth_dtype t, const void *w, size_t rb, int64_t N, int64_t K,
                     const float *X, int64_t ldx, int64_t M, const float *Y, int64_t ldy)
{
    float *wd = malloc((size_t)K * sizeof *wd);
    for (int64_t n = 0; n < N; n++) {
        hearth_quant_dequantize_row(t, (const char *)w + (size_t)n * rb, wd, K);
        for (int64_t m = 0; m < M; m++) {
            double bound, sum = mm_ref(t, wd, K, X + m * ldx, &bound);
            double e = fabs((double)Y[m * ldy + n] - sum);
            if (!(e <= bound)) {
                fprintf(stderr, "  %s matmul %s %s M=%lld N=%lld K=%lld: Y[%lld][%lld] = %g, oracle %g\n", g_where,
                        what, hearth_dtype_get(t)->name, (long long)M, (long long)N, (long long)K, (long long)m,
                        (long long)n, Y[m * ldy + n], sum);
                hearth_test_case_failed = 1;
                free(wd);
                return;
            }
        }
    }
    free(wd);
}

/* Y (M, N) = silu(X G^T) * (X U^T) against the oracle: with g, u the
 * oracle's products and eg, eu their bounds, the device's silu(g') u' is
 * off by at most 1.1 eg (|u| + eu) + |silu(g)| eu (|silu'| <= 1.1
 * everywhere, so |silu(g') - silu(g)| <= 1.1 eg), plus the float rounding
 * of its three operations (4 ulps of the result). */
static void check_swiglu(hearth_dtype t, const void *wg, const void *wu, size_t rb, int64_t N, int64_t K,
                         const float *X, int64_t ldx, int64_t M, const float *Y, int64_t ldy)
{
    float *gd = malloc((size_t)K * sizeof *gd), *ud = malloc((size_t)K * sizeof *ud);
    for (int64_t n = 0; n < N; n++) {
        hearth_quant_dequantize_row(t, (const char *)wg + (size_t)n * rb, gd, K);
        hearth_quant_dequantize_row(t, (const char *)wu + (size_t)n * rb, ud, K);
        for (int64_t m = 0; m < M; m++) {
            double eg, eu, g = mm_ref(t, gd, K, X + m * ldx, &eg), u = mm_ref(t, ud, K, X + m * ldx, &eu);
            double sg = g / (1 + exp(-g)), want = sg * u;
            double bound = 1.1 * eg * (fabs(u) + eu) + fabs(sg) * eu + 4 * 1.2e-7 * fabs(want) + 1e-7;
            if (!(fabs((double)Y[m * ldy + n] - want) <= bound)) {
                fprintf(stderr, "  %s matmul swiglu %s M=%lld N=%lld K=%lld: Y[%lld][%lld] = %g, oracle %g\n", g_where,
                        hearth_dtype_get(t)->name, (long long)M, (long long)N, (long long)K, (long long)m,
                        (long long)n, Y[m * ldy + n], want);
                hearth_test_case_failed = 1;
                break;
            }
        }
    }
    free(gd);
    free(ud);
}

static int64_t k_of(hearth_dtype t, int i)
{
    int64_t blk = hearth_dtype_get(t)->block;
    if (blk == 1)
        return WIDTHS[i % NWIDTHS];
    return blk * (1 + i % 3); /* 32, 64, 96 or 256, 512, 768 */
}

static void op_matmul(void)
{
    static const enum hearth_weight_place places[] = {HEARTH_WEIGHT_AS_STORED, HEARTH_WEIGHT_COMPACT,
                                                      HEARTH_WEIGHT_FAST};
    for (size_t ti = 0; ti < sizeof MM_TYPES / sizeof MM_TYPES[0]; ti++) {
        hearth_dtype t = MM_TYPES[ti];
        if (!D->supports(g_dev, HEARTH_OP_MATMUL, t))
            continue;
        for (int ri = 0; ri < NROWS; ri++) {
            int64_t M = ROWS[ri], K = k_of(t, ri), ldx = K + 3;
            int n_w = 1 + ri % 3; /* groups of 1, 2, 3 weights sharing X */
            enum hearth_weight_place pl = places[(ri + ti) % 3];
            int64_t Ns[3] = {WIDTHS[ri % NWIDTHS], 33, 7}, ldy[3];
            hearth_dtype ts[3] = {t, t, ri == 3 ? HEARTH_F32 : t}; /* one mixed group */
            void *w[3];
            size_t rb[3];
            hearth_weight *hw[3];
            float *Yd[3], *Y[3];
            float *X = frands(M * ldx), *Xd = dputf(X, M * ldx);
            for (int i = 0; i < n_w; i++) {
                w[i] = make_weights(ts[i], Ns[i], K, &rb[i]);
                hearth_weight_desc d = {ts[i], w[i], rb[i], Ns[i], K, pl, "test"};
                hw[i] = D->weight_new(g_dev, &d, NULL);
                CHECK(hw[i] != NULL);
                ldy[i] = Ns[i] + 2;
                Y[i] = malloc((size_t)(M * ldy[i]) * sizeof(float));
                Yd[i] = D->alloc(g_dev, (size_t)(M * ldy[i]) * sizeof(float), NULL);
            }
            int rc = D->matmul(&g_st, (const hearth_weight *const *)hw, n_w, Xd, ldx, M, Yd, ldy);
            CHECK_EQ_INT(rc, 0);
            for (int i = 0; i < n_w; i++) {
                dget(Y[i], Yd[i], (size_t)(M * ldy[i]) * sizeof(float));
                check_mm(n_w > 1 ? "group" : "single", ts[i], w[i], rb[i], Ns[i], K, X, ldx, M, Y[i], ldy[i]);
                D->weight_free(hw[i]);
                dfree(Yd[i]);
                free(Y[i]);
                free(w[i]);
            }
            free(X);
            dfree(Xd);
        }
    }
    /* bad calls come back as a status */
    CHECK(D->matmul(&g_st, NULL, 1, NULL, 0, 0, NULL, NULL) < 0);
}

/* ---- MATMUL_FUSED (optional op) ---- */

/* One fused call against the oracle on the input the fold makes (on the
 * host, in float as the device's) and, accumulating, on Y less its start.
 * SWIGLU takes two weights of one shape and must leave Y_1 as it was. A
 * device may refuse a case (HEARTH_EUNSUPPORTED): then every Y must be
 * untouched. Returns whether the device ran it. */
static int64_t g_ldx_pad = 5; /* fused_case's ldx - K: 5 leaves X's rows unaligned (a kernel's scalar path) */
static int64_t g_rows = 0;    /* fused_case's rows of every weight where set (else 9, 33, 17; SwiGLU's 37) */

static bool fused_case(hearth_dtype t, int n_w, int64_t M, int64_t K, enum hearth_mm_pre pre,
                       enum hearth_mm_post post)
{
    int64_t ldx = K + g_ldx_pad, Ns[3] = {9, 33, 17}, ldy[3];
    if (post == HEARTH_MM_SWIGLU)
        Ns[1] = Ns[0] = 37;
    if (g_rows)
        Ns[0] = Ns[1] = Ns[2] = g_rows;
    float *X = frands(M * ldx), *nw = frands(K), *Xf = malloc((size_t)(M * ldx) * 4);
    for (int64_t m = 0; m < M; m++) {
        const float *x = X + m * ldx;
        float *xf = Xf + m * ldx;
        double ss = 0;
        for (int64_t k = 0; k < K; k++)
            ss += (double)x[k] * x[k];
        float inv = (float)(1.0 / sqrt(ss / (double)K + 1e-5));
        for (int64_t k = 0; k < K; k++)
            xf[k] = pre == HEARTH_MM_PRE_RMSNORM ? x[k] * inv * nw[k] : x[k];
    }
    float *Xd = dputf(X, M * ldx), *nwd = dputf(nw, K);
    void *w[3];
    size_t rb[3];
    hearth_weight *hw[3];
    float *Yd[3], *Y[3], *Y0[3];
    for (int i = 0; i < n_w; i++) {
        w[i] = make_weights(t, Ns[i], K, &rb[i]);
        hearth_weight_desc d = {t, w[i], rb[i], Ns[i], K, HEARTH_WEIGHT_AS_STORED, "test"};
        hw[i] = D->weight_new(g_dev, &d, NULL);
        CHECK(hw[i] != NULL);
        ldy[i] = Ns[i] + 1;
        Y0[i] = frands(M * ldy[i]);
        Y[i] = malloc((size_t)(M * ldy[i]) * sizeof(float));
        Yd[i] = dputf(Y0[i], M * ldy[i]);
    }
    hearth_mm_fuse f = {pre, nwd, 1e-5f, post};
    int rc = D->matmul_fused(&g_st, (const hearth_weight *const *)hw, n_w, Xd, ldx, M, Yd, ldy, &f);
    CHECK_MSG(rc == 0 || rc == HEARTH_EUNSUPPORTED, "%s matmul_fused %s M=%lld K=%lld: %d", g_where,
              hearth_dtype_get(t)->name, (long long)M, (long long)K, rc);
    for (int i = 0; i < n_w; i++) {
        dget(Y[i], Yd[i], (size_t)(M * ldy[i]) * sizeof(float));
        bool untouched = memcmp(Y[i], Y0[i], (size_t)(M * ldy[i]) * sizeof(float)) == 0;
        if (rc == HEARTH_EUNSUPPORTED || (rc == 0 && post == HEARTH_MM_SWIGLU && i == 1)) {
            CHECK_MSG(untouched, "%s matmul_fused wrote a Y it must not (refused: %d, weight %d)", g_where,
                      rc == HEARTH_EUNSUPPORTED, i);
        } else if (rc == 0 && post == HEARTH_MM_SWIGLU) {
            check_swiglu(t, w[0], w[1], rb[0], Ns[0], K, Xf, ldx, M, Y[0], ldy[0]);
        } else if (rc == 0) {
            if (post == HEARTH_MM_ADD)
                for (int64_t j = 0; j < M * ldy[i]; j++)
                    Y[i][j] -= Y0[i][j];
            check_mm(pre == HEARTH_MM_PRE_RMSNORM ? "fused rmsnorm" : post == HEARTH_MM_ADD ? "fused add" : "fused",
                     t, w[i], rb[i], Ns[i], K, Xf, ldx, M, Y[i], ldy[i]);
        }
    }
    for (int i = 0; i < n_w; i++) {
        D->weight_free(hw[i]);
        dfree(Yd[i]);
        free(Y[i]);
        free(Y0[i]);
        free(w[i]);
    }
    dfree(Xd);
    dfree(nwd);
    free(X);
    free(nw);
    free(Xf);
    return rc == 0;
}

static void op_matmul_fused(void)
{
    if (!D->matmul_fused) {
        CHECK_EQ_INT((int)g_dev->caps.fused_rows_max, 0); /* the walk must not take the fused sequence */
        return;
    }
    for (size_t ti = 0; ti < sizeof MM_TYPES / sizeof MM_TYPES[0]; ti++) {
        hearth_dtype t = MM_TYPES[ti];
        if (!D->supports(g_dev, HEARTH_OP_MATMUL, t))
            continue;
        for (int ri = 0; ri < 3; ri++) {
            int64_t K = k_of(t, ri);
            for (int pre = HEARTH_MM_PRE_NONE; pre <= HEARTH_MM_PRE_RMSNORM; pre++)
                for (int post = HEARTH_MM_STORE; post <= HEARTH_MM_SWIGLU; post++) {
                    int n_w = post == HEARTH_MM_SWIGLU ? 2 : post == HEARTH_MM_ADD ? 1 : 1 + (ri + pre) % 3;
                    bool ran = fused_case(t, n_w, 1, K, (enum hearth_mm_pre)pre, (enum hearth_mm_post)post);
                    /* the epilogues of one row the device says it fuses, it fuses (F32 aside, which a
                     * device may keep apart); the norm it may leave to the walk */
                    if (t != HEARTH_F32 && g_dev->caps.fused_rows_max >= 1 && pre == HEARTH_MM_PRE_NONE &&
                        post != HEARTH_MM_STORE)
                        CHECK_MSG(ran, "%s matmul_fused refused %s at M=1 (post %d)", g_where,
                                  hearth_dtype_get(t)->name, post);
                }
            fused_case(t, 2, 3, K, HEARTH_MM_PRE_RMSNORM, HEARTH_MM_STORE); /* past fused_rows_max: refused, or right */
            /* the epilogues of a batched step: each row count a kernel stages X for (2, 4: the mat-vec's rows
             * of X; 6, 12, 17: the tensor cores' 8-row tiles, split over K at 12 and 17) */
            for (int post = HEARTH_MM_STORE; post <= HEARTH_MM_SWIGLU; post++)
                for (int mi = 0; mi < 5; mi++) {
                    static const int64_t rows[] = {2, 4, 6, 12, 17};
                    int n_w = post == HEARTH_MM_SWIGLU ? 2 : post == HEARTH_MM_ADD ? 1 : 1 + (ri + mi) % 3;
                    bool ran = fused_case(t, n_w, rows[mi], K, HEARTH_MM_PRE_NONE, (enum hearth_mm_post)post);
                    if (t != HEARTH_F32 && g_dev->caps.fused_rows_max >= rows[mi])
                        CHECK_MSG(ran, "%s matmul_fused refused %s at M=%lld (post %d)", g_where,
                                  hearth_dtype_get(t)->name, (long long)rows[mi], post);
                }
        }
    }
    /* widths of two chunks or more at 4 rows: the tensor-core kernel splits K over blocks (mma_fixup adds
     * the splits), and the mat-vec's rows of X past one unit batch */
    fused_case(HEARTH_F16, 2, 4, 2304, HEARTH_MM_PRE_NONE, HEARTH_MM_SWIGLU);
    fused_case(HEARTH_Q4_K, 1, 4, 2048, HEARTH_MM_PRE_NONE, HEARTH_MM_ADD);
    fused_case(HEARTH_Q4_K, 2, 4, 2048, HEARTH_MM_PRE_NONE, HEARTH_MM_SWIGLU);
    fused_case(HEARTH_Q4_K, 2, 2, 2048, HEARTH_MM_PRE_NONE, HEARTH_MM_SWIGLU);
    fused_case(HEARTH_Q8_0, 2, 3, 2048, HEARTH_MM_PRE_NONE, HEARTH_MM_SWIGLU);
    fused_case(HEARTH_Q8_0, 1, 4, 4096, HEARTH_MM_PRE_NONE, HEARTH_MM_ADD);
    /* one row of X, rows of more than a warp's batch of units (CUDA's mvp_kernel: 32 lanes of 4 units),
     * ending mid-batch: one batch and a part (Q4_K 4,352: 136 units; Q8_0 2,080: 130), two and a part with
     * SwiGLU's pairs (Q4_K 8,448; Q8_0 8,224) */
    fused_case(HEARTH_Q4_K, 1, 1, 4352, HEARTH_MM_PRE_NONE, HEARTH_MM_ADD);
    fused_case(HEARTH_Q4_K, 2, 1, 8448, HEARTH_MM_PRE_NONE, HEARTH_MM_SWIGLU);
    fused_case(HEARTH_Q8_0, 1, 1, 2080, HEARTH_MM_PRE_NONE, HEARTH_MM_ADD);
    fused_case(HEARTH_Q8_0, 2, 1, 8224, HEARTH_MM_PRE_NONE, HEARTH_MM_SWIGLU);
    /* long walks: each warp of a mat-vec over all the GPU's SMs takes three batches or more (CUDA's
     * mvp_kernel: its two register sets of loads swap across row ends several times), the rows no multiple
     * of the grid's; half warps (Q4_K 2,048, Q8_0 1,024) and whole ones (Q4_K 4,096, Q8_0 2,048) */
    g_rows = 4500;
    fused_case(HEARTH_Q4_K, 2, 1, 2048, HEARTH_MM_PRE_RMSNORM, HEARTH_MM_SWIGLU);
    fused_case(HEARTH_Q4_K, 1, 1, 4096, HEARTH_MM_PRE_NONE, HEARTH_MM_ADD);
    fused_case(HEARTH_Q8_0, 3, 1, 1024, HEARTH_MM_PRE_RMSNORM, HEARTH_MM_STORE);
    fused_case(HEARTH_Q8_0, 1, 1, 2048, HEARTH_MM_PRE_NONE, HEARTH_MM_ADD);
    g_rows = 0;
    /* X wider than one staged chunk of the mat-vec (48 KiB of floats) */
    fused_case(HEARTH_F16, 1, 1, 12544, HEARTH_MM_PRE_RMSNORM, HEARTH_MM_STORE);
    fused_case(HEARTH_F16, 1, 1, 12544, HEARTH_MM_PRE_NONE, HEARTH_MM_ADD);
    fused_case(HEARTH_F16, 2, 1, 12544, HEARTH_MM_PRE_NONE, HEARTH_MM_SWIGLU);
    /* X's rows 16-byte aligned: the mat-vec's vector loads, and (CUDA, MVP_NORM1) the norm staged from
     * one read of X, at one batch of float4s a thread (2,048) and four (8,192) */
    g_ldx_pad = 4;
    for (size_t ti = 0; ti < sizeof MM_TYPES / sizeof MM_TYPES[0]; ti++) {
        hearth_dtype t = MM_TYPES[ti];
        if (!D->supports(g_dev, HEARTH_OP_MATMUL, t))
            continue;
        fused_case(t, 3, 1, 2048, HEARTH_MM_PRE_RMSNORM, HEARTH_MM_STORE);
        fused_case(t, 2, 1, 2048, HEARTH_MM_PRE_RMSNORM, HEARTH_MM_SWIGLU);
        fused_case(t, 1, 1, 8192, HEARTH_MM_PRE_RMSNORM, HEARTH_MM_STORE);
    }
    g_ldx_pad = 5;
    hearth_mm_fuse f = {HEARTH_MM_PRE_RMSNORM, NULL, 1e-5f, HEARTH_MM_STORE};
    CHECK(D->matmul_fused(&g_st, NULL, 1, NULL, 0, 1, NULL, NULL, &f) < 0);
}

/* One QK_ROPE_STORE case: Q, K, V of type t over K-wide X at one row
 * (position 37 of slot 1), fused against the same device's matmul (after
 * its rmsnorm for RMSNORM) and qk_rope_store apart, each held to its
 * oracle by the cases above; the outputs and both caches compared. A
 * refused case writes nothing. Returns whether the device ran it. */
static bool fused_qk_case(hearth_dtype t, int64_t K, int64_t hd, int rope_type, bool bias, hearth_dtype kvt,
                          enum hearth_mm_pre pre)
{
    const int64_t n_head = 4, n_head_kv = 2, qd = n_head * hd, kvd = n_head_kv * hd, n_ctx = 40, n_layer = 2;
    const int64_t Ns[3] = {qd, kvd, kvd}, pos = 37;
    const int32_t slot = 1;
    const size_t elt = kvt == HEARTH_F16 ? 2 : 4, kv_bytes = (size_t)(2 * n_layer * n_ctx * kvd) * elt;
    step s;
    step_make(&s, 1, NULL, &pos, &slot, hd, NULL, 0, NULL, 0);
    float *X = frands(K), *nw = frands(K), *bq = frands(qd), *bk = frands(kvd), *bv = frands(kvd);
    float *Xd = dputf(X, K), *nwd = dputf(nw, K), *tmp = D->alloc(g_dev, (size_t)K * 4, NULL);
    float *bqd = dputf(bq, qd), *bkd = dputf(bk, kvd), *bvd = dputf(bv, kvd);
    char *kv0 = malloc(kv_bytes), *got = malloc(kv_bytes), *want = malloc(kv_bytes);
    for (size_t i = 0; i < kv_bytes; i++)
        kv0[i] = (char)(rnd() & 0x3f); /* small finite values either way */
    hearth_dev_kv kv[2];
    void *w[3];
    size_t rb[3];
    hearth_weight *hw[3];
    float *Y0[3], *Y[2][3], *Yh[2][3];
    for (int a = 0; a < 2; a++)
        kv[a] = (hearth_dev_kv){dput(kv0, kv_bytes), dput(kv0, kv_bytes), kvt, n_ctx, n_layer, kvd};
    for (int i = 0; i < 3; i++) {
        w[i] = make_weights(t, Ns[i], K, &rb[i]);
        hearth_weight_desc d = {t, w[i], rb[i], Ns[i], K, HEARTH_WEIGHT_AS_STORED, "test"};
        hw[i] = D->weight_new(g_dev, &d, NULL);
        CHECK(hw[i] != NULL);
        Y0[i] = frands(Ns[i]);
        for (int a = 0; a < 2; a++) {
            Y[a][i] = dputf(Y0[i], Ns[i]);
            Yh[a][i] = malloc((size_t)Ns[i] * sizeof(float));
        }
    }
    hearth_qk qk = {bias ? bqd : NULL, bias ? bkd : NULL, bias ? bvd : NULL, NULL, NULL, n_head, n_head_kv, hd, hd,
                    rope_type, 1e-6f};
    hearth_mm_fuse f = {pre, nwd, 1e-5f, HEARTH_MM_QK_ROPE_STORE, &qk, &kv[0], 1, &s.db};
    const int64_t ldy[3] = {qd, kvd, kvd};
    int rc = D->matmul_fused(&g_st, (const hearth_weight *const *)hw, 3, Xd, K, 1, Y[0], ldy, &f);
    CHECK_MSG(rc == 0 || rc == HEARTH_EUNSUPPORTED, "%s matmul_fused qk %s: %d", g_where, hearth_dtype_get(t)->name,
              rc);
    /* apart, into the second set */
    const float *in = Xd;
    if (pre == HEARTH_MM_PRE_RMSNORM) {
        CHECK_EQ_INT(D->rmsnorm(&g_st, tmp, Xd, NULL, 1, K, nwd, 1e-5f), 0);
        in = tmp;
    }
    CHECK_EQ_INT(D->matmul(&g_st, (const hearth_weight *const *)hw, 3, in, K, 1, Y[1], ldy), 0);
    CHECK_EQ_INT(D->qk_rope_store(&g_st, Y[1][0], Y[1][1], Y[1][2], &qk, &kv[1], 1, &s.db), 0);
    for (int a = 0; a < 2; a++)
        for (int i = 0; i < 3; i++)
            dget(Yh[a][i], Y[a][i], (size_t)Ns[i] * sizeof(float));
    static const char *const names[3] = {"qk fused q", "qk fused k", "qk fused v"};
    for (int i = 0; i < 3 && rc == 0; i++) {
        double *wd = malloc((size_t)Ns[i] * sizeof *wd);
        widen(wd, Yh[1][i], Ns[i]);
        near_all(names[i], Yh[0][i], wd, Ns[i], 1e-5, 1e-5); /* the folded norm sums in another order */
        free(wd);
    }
    for (int i = 0; i < 3 && rc == HEARTH_EUNSUPPORTED; i++)
        CHECK_MSG(memcmp(Yh[0][i], Y0[i], (size_t)Ns[i] * sizeof(float)) == 0, "%s refused qk: Y %d written",
                  g_where, i);
    for (int c = 0; c < 2; c++) { /* K, V */
        dget(got, c ? kv[0].v : kv[0].k, kv_bytes);
        dget(want, c ? kv[1].v : kv[1].k, kv_bytes);
        if (rc == HEARTH_EUNSUPPORTED) {
            CHECK_MSG(memcmp(got, kv0, kv_bytes) == 0, "%s refused qk: the cache written", g_where);
            continue;
        }
        int bad = 0;
        for (size_t e = 0; e < kv_bytes / elt; e++) {
            double a = elt == 2 ? hearth_fp16_to_f32(((uint16_t *)got)[e]) : ((float *)got)[e];
            double b = elt == 2 ? hearth_fp16_to_f32(((uint16_t *)want)[e]) : ((float *)want)[e];
            /* f16: the floats before rounding may differ in their last bits, the halves by one step */
            bad += !(fabs(a - b) <= (elt == 2 ? 1e-3 : 1e-5) * (1 + fabs(b)));
        }
        CHECK_MSG(bad == 0, "%s qk fused %s %s: %d cache elements differ from the ops apart", g_where,
                  hearth_dtype_get(t)->name, c ? "V" : "K", bad);
    }
    for (int i = 0; i < 3; i++) {
        D->weight_free(hw[i]);
        free(w[i]);
        free(Y0[i]);
        for (int a = 0; a < 2; a++)
            dfree(Y[a][i]), free(Yh[a][i]);
    }
    for (int a = 0; a < 2; a++)
        dfree(kv[a].k), dfree(kv[a].v);
    step_free(&s);
    free(X), free(nw), free(bq), free(bk), free(bv), free(kv0), free(got), free(want);
    dfree(Xd), dfree(nwd), dfree(tmp), dfree(bqd), dfree(bkd), dfree(bvd);
    return rc == 0;
}

/* matmul_fused's QK_ROPE_STORE: llama's QK step (pairs, no biases) at one
 * row in every weight type and both caches, with and without the norm
 * folded in; qwen's (NEOX pairs, biases): refused untouched, or right. A
 * device that fuses decode rows takes llama's for every type but F32. */
static void op_matmul_fused_qk(void)
{
    if (!D->matmul_fused || !D->supports(g_dev, HEARTH_OP_QK_ROPE_STORE, HEARTH_F16))
        return;
    for (size_t ti = 0; ti < sizeof MM_TYPES / sizeof MM_TYPES[0]; ti++) {
        hearth_dtype t = MM_TYPES[ti];
        if (!D->supports(g_dev, HEARTH_OP_MATMUL, t))
            continue;
        for (int kt = 0; kt < 2; kt++) {
            hearth_dtype kvt = kt ? HEARTH_F16 : HEARTH_F32;
            g_where = kt ? "f16 cache" : "f32 cache";
            for (int pre = HEARTH_MM_PRE_NONE; pre <= HEARTH_MM_PRE_RMSNORM; pre++) {
                int64_t K = k_of(t, kt + pre), hd = (kt + pre) % 2 ? 34 : 64;
                bool ran = fused_qk_case(t, K, hd, 0, false, kvt, (enum hearth_mm_pre)pre);
                if (t != HEARTH_F32 && g_dev->caps.fused_rows_max >= 1)
                    CHECK_MSG(ran, "%s matmul_fused refused llama's QK step for %s (norm %d)", g_where,
                              hearth_dtype_get(t)->name, pre);
            }
            fused_qk_case(t, k_of(t, 0), 64, 2, false, kvt, HEARTH_MM_PRE_NONE);
            fused_qk_case(t, k_of(t, 1), 64, 0, true, kvt, HEARTH_MM_PRE_NONE);
        }
    }
}

/* ---- EMBED ---- */

static void op_embed(void)
{
    for (size_t ti = 0; ti < sizeof MM_TYPES / sizeof MM_TYPES[0]; ti++) {
        hearth_dtype t = MM_TYPES[ti];
        if (!D->supports(g_dev, HEARTH_OP_EMBED, t))
            continue;
        for (int ri = 0; ri < NROWS; ri++) {
            int64_t n = ROWS[ri], h = k_of(t, ri + 1), vocab = 50, n_pos = 140;
            size_t rb;
            void *tab = make_weights(t, vocab, h, &rb);
            hearth_weight_desc d = {t, tab, rb, vocab, h, HEARTH_WEIGHT_AS_STORED, "table"};
            hearth_weight *w = D->weight_new(g_dev, &d, NULL);
            int32_t *tok = malloc((size_t)n * sizeof *tok);
            int64_t *pos = malloc((size_t)n * sizeof *pos);
            for (int64_t i = 0; i < n; i++) {
                tok[i] = (int32_t)(rnd() % vocab);
                pos[i] = (int64_t)(rnd() % n_pos);
            }
            step s;
            step_make(&s, n, tok, pos, NULL, 0, NULL, 0, NULL, 0);
            float *ptab = frands(n_pos * h), *type = frands(h), *g = frands(h), *b = frands(h);
            float *dp = dputf(ptab, n_pos * h), *dt = dputf(type, h), *dg = dputf(g, h), *db = dputf(b, h);
            float *Yd = D->alloc(g_dev, (size_t)(n * h) * sizeof(float), NULL), *Y = malloc((size_t)(n * h) * 4);
            double *want = malloc((size_t)(n * h) * sizeof *want), *x = malloc((size_t)h * sizeof *x);
            float *row = malloc((size_t)h * sizeof *row);
            for (int mode = 0; mode < 2; mode++) { /* llama's lookup; bert's with positions and LayerNorm */
                int rc = mode ? D->embed(&g_st, Yd, w, &s.db, dp, dt, dg, db, 1e-12f)
                              : D->embed(&g_st, Yd, w, &s.db, NULL, NULL, NULL, NULL, 0);
                CHECK_EQ_INT(rc, 0);
                dget(Y, Yd, (size_t)(n * h) * sizeof(float));
                for (int64_t i = 0; i < n; i++) {
                    hearth_quant_dequantize_row(t, (char *)tab + (size_t)tok[i] * rb, row, h);
                    for (int64_t j = 0; j < h; j++)
                        x[j] = (double)row[j] + ((mode ? (double)ptab[pos[i] * h + j] + type[j] : 0));
                    if (mode)
                        ln_ref(want + i * h, x, h, g, b, 1e-12);
                    else
                        memcpy(want + i * h, x, (size_t)h * sizeof *x);
                }
                near_all(mode ? "embed+ln" : "embed", Y, want, n * h, mode ? 1e-4 : 0, mode ? 1e-4 : 0);
            }
            D->weight_free(w);
            step_free(&s);
            free(tab), free(tok), free(pos), free(ptab), free(type), free(g), free(b), free(Y), free(want), free(x),
                free(row);
            dfree(dp), dfree(dt), dfree(dg), dfree(db), dfree(Yd);
        }
    }
}

/* ---- the row ops ---- */

static void op_rows(void)
{
    for (int ri = 0; ri < NROWS; ri++)
        for (int wi = 0; wi < NWIDTHS; wi++) {
            int64_t r = ROWS[ri], n = WIDTHS[wi], rn = r * n;
            size_t bytes = (size_t)rn * sizeof(float);
            float *X = frands(rn), *A = frands(rn), *w = frands(n), *w2 = frands(n), *got = malloc(bytes);
            double *want = malloc((size_t)rn * sizeof *want), *x = malloc((size_t)n * sizeof *x);
            float *dX, *dA, *dY, *dw = dputf(w, n), *dw2 = dputf(w2, n);
            float eps = 1e-5f;

            /* rmsnorm, plain and gathering every other row backwards */
            int32_t *idx = malloc((size_t)r * sizeof *idx);
            int64_t n_idx = 0;
            for (int64_t i = r - 1; i >= 0; i -= 2)
                idx[n_idx++] = (int32_t)i;
            step s;
            step_make(&s, r, NULL, NULL, NULL, 0, NULL, 0, idx, n_idx);
            dX = dputf(X, rn);
            dY = D->alloc(g_dev, bytes, NULL);
            CHECK_EQ_INT(D->rmsnorm(&g_st, dY, dX, NULL, r, n, dw, eps), 0);
            dget(got, dY, bytes);
            for (int64_t i = 0; i < r; i++) {
                widen(x, X + i * n, n);
                rms_ref(want + i * n, x, n, w, eps);
            }
            near_all("rmsnorm", got, want, rn, 1e-5, 1e-5);
            CHECK_EQ_INT(D->rmsnorm(&g_st, dY, dX, s.db.out_src, n_idx, n, dw, eps), 0);
            dget(got, dY, (size_t)(n_idx * n) * sizeof(float));
            for (int64_t i = 0; i < n_idx; i++) {
                widen(x, X + idx[i] * n, n);
                rms_ref(want + i * n, x, n, w, eps);
            }
            near_all("rmsnorm gather", got, want, n_idx * n, 1e-5, 1e-5);

            /* add: exact */
            dA = dputf(A, rn);
            CHECK_EQ_INT(D->add(&g_st, dX, dA, r, n), 0);
            dget(got, dX, bytes);
            for (int64_t i = 0; i < rn; i++)
                want[i] = (double)(X[i] + A[i]);
            near_all("add", got, want, rn, 0, 0);

            /* add_rmsnorm: X += H exactly; H = rmsnorm(X) * w */
            D->upload(&g_st, dX, X, bytes);
            CHECK_EQ_INT(D->add_rmsnorm(&g_st, dX, dA, r, n, dw, eps), 0);
            dget(got, dX, bytes);
            for (int64_t i = 0; i < rn; i++)
                want[i] = (double)(X[i] + A[i]);
            near_all("add_rmsnorm x", got, want, rn, 0, 0);
            dget(got, dA, bytes);
            for (int64_t i = 0; i < r; i++) {
                for (int64_t j = 0; j < n; j++)
                    x[j] = (double)(X[i * n + j] + A[i * n + j]);
                rms_ref(want + i * n, x, n, w, eps);
            }
            near_all("add_rmsnorm h", got, want, rn, 1e-5, 1e-5);

            /* swiglu */
            D->upload(&g_st, dX, X, bytes);
            D->upload(&g_st, dA, A, bytes);
            CHECK_EQ_INT(D->swiglu(&g_st, dX, dA, r, n), 0);
            dget(got, dX, bytes);
            for (int64_t i = 0; i < rn; i++)
                want[i] = (double)X[i] / (1.0 + exp(-(double)X[i])) * A[i];
            near_all("swiglu", got, want, rn, 1e-6, 1e-5);

            /* add_layernorm: X = LN(X + Y + bias) */
            D->upload(&g_st, dX, X, bytes);
            D->upload(&g_st, dA, A, bytes);
            float *bias = frands(n), *dbias = dputf(bias, n);
            CHECK_EQ_INT(D->add_layernorm(&g_st, dX, dA, dbias, r, n, dw, dw2, 1e-12f), 0);
            dget(got, dX, bytes);
            for (int64_t i = 0; i < r; i++) {
                for (int64_t j = 0; j < n; j++)
                    x[j] = (double)X[i * n + j] + A[i * n + j] + bias[j];
                ln_ref(want + i * n, x, n, w, w2, 1e-12);
            }
            near_all("add_layernorm", got, want, rn, 1e-4, 1e-4);

            /* bias_gelu */
            D->upload(&g_st, dX, X, bytes);
            CHECK_EQ_INT(D->bias_gelu(&g_st, dX, dbias, r, n), 0);
            dget(got, dX, bytes);
            for (int64_t i = 0; i < rn; i++) {
                double v = (double)X[i] + bias[i % n];
                want[i] = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
            }
            near_all("bias_gelu", got, want, rn, 1e-6, 1e-5);

            step_free(&s);
            free(X), free(A), free(w), free(w2), free(got), free(want), free(x), free(idx), free(bias);
            dfree(dX), dfree(dA), dfree(dY), dfree(dw), dfree(dw2), dfree(dbias);
        }
}

/* ---- the greedy draw ---- */

/* The oracle: NaN as -inf, +inf as FLT_MAX, the first of equals. */
static int32_t argmax_ref(const float *x, int64_t n)
{
    int32_t best = 0;
    double bv = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        double v = isnan(x[i]) ? -INFINITY : x[i] == INFINITY ? FLT_MAX : x[i];
        if (i == 0 || v > bv)
            bv = v, best = (int32_t)i;
    }
    return best;
}

/* argmax_rows against the oracle and against the sampler's own greedy draw
 * (what the scheduler would have drawn from the downloaded row), at odd
 * widths and vocabularies' (past one batch of loads a thread), rows with
 * NaN, +inf, -inf, ties (the maximum twice, the later copy in another
 * thread's share), all -inf and all NaN. */
static void op_argmax(void)
{
    if (!D->argmax_rows)
        return; /* optional (dev.h): the caller downloads the logits */
    static const int64_t NS[] = {1, 7, 33, 384, 32000 + 3, 131072, 152064 + 1}; /* up to qwen's vocabulary, odd */
    hearth_sampler_params sp;
    hearth_sampler_params_default(&sp);
    sp.temperature = 0;
    for (size_t ni = 0; ni < sizeof NS / sizeof NS[0]; ni++) {
        const int64_t n = NS[ni], r = 9;
        float *X = frands(r * n);
        for (int64_t i = 0; i < r; i++) {
            float *x = X + i * n;
            int64_t a = (i * 7919) % n, b = (i * 104729 + n / 2) % n;
            switch (i) {
            case 1: x[a] = NAN; break;
            case 2: x[a] = INFINITY, x[b] = FLT_MAX; break; /* +inf counts as FLT_MAX: the first of the two */
            case 3: x[a] = 5.0f, x[b] = 5.0f; break;          /* a tie: the lower index */
            case 4:
                for (int64_t j = 0; j < n; j++)
                    x[j] = -INFINITY;
                break;
            case 5:
                for (int64_t j = 0; j < n; j++)
                    x[j] = NAN;
                break;
            case 6: x[n - 1] = 3.0f; break; /* the last element */
            case 7: x[0] = 3.0f, x[n - 1] = 3.0f; break;
            case 8: x[a] = -INFINITY, x[b] = NAN; break;
            default: break;
            }
        }
        float *dX = dputf(X, r * n);
        int32_t *dids = D->alloc(g_dev, (size_t)r * sizeof(int32_t), NULL), got[9];
        CHECK_EQ_INT(D->argmax_rows(&g_st, dids, dX, r, n), 0);
        dget(got, dids, (size_t)r * sizeof(int32_t));
        hearth_sampler *sm = hearth_sampler_new(&sp, (int32_t)n, NULL);
        for (int64_t i = 0; i < r; i++) {
            int32_t want = argmax_ref(X + i * n, n), drawn = hearth_sampler_sample(sm, X + i * n);
            CHECK_MSG(got[i] == want && want == drawn, "%s argmax n=%lld row %lld: %d, oracle %d, sampler %d",
                      g_where, (long long)n, (long long)i, got[i], want, drawn);
        }
        CHECK_EQ_INT(D->argmax_rows(&g_st, dids, dX, 0, n), 0);
        CHECK(D->argmax_rows(&g_st, dids, dX, r, 0) != 0);
        if (D->argmax_feed && D->supports(g_dev, HEARTH_OP_ARGMAX_FEED, HEARTH_F32)) {
            /* the next block: the draws, then src's words; a block of
             * words bigger than a block of threads (8,197 > 1,024 x 8) */
            const int64_t words = 8197;
            int32_t *src = malloc((size_t)words * 4), *next = malloc((size_t)words * 4), feed_ids[9];
            for (int64_t w = 0; w < words; w++)
                src[w] = (int32_t)(w * 2654435761u ^ 0x5bd1e995u);
            int32_t *dsrc = D->alloc(g_dev, (size_t)words * 4, NULL), *dnext = D->alloc(g_dev, (size_t)words * 4, NULL);
            D->upload(&g_st, dsrc, src, (size_t)words * 4);
            memset(next, 0xA5, (size_t)words * 4);
            D->upload(&g_st, dnext, next, (size_t)words * 4);
            CHECK_EQ_INT(D->argmax_feed(&g_st, dids, dX, r, n, dnext, dsrc, words), 0);
            dget(feed_ids, dids, (size_t)r * sizeof(int32_t));
            dget(next, dnext, (size_t)words * 4);
            int bad = 0;
            for (int64_t w = 0; w < words; w++)
                bad += next[w] != (w < r ? got[w] : src[w]);
            for (int64_t i = 0; i < r; i++)
                bad += feed_ids[i] != got[i];
            CHECK_MSG(bad == 0, "%s argmax_feed n=%lld: %d of %lld words or draws wrong", g_where, (long long)n, bad,
                      (long long)words);
            CHECK(D->argmax_feed(&g_st, dids, dX, r, n, dnext, dsrc, r - 1) != 0); /* fewer words than rows */
            free(src), free(next);
            dfree(dsrc), dfree(dnext);
        }
        hearth_sampler_free(sm);
        free(X);
        dfree(dX), dfree(dids);
    }
}

/* ---- the QK step and attention over the cache ---- */

static double kv_at(const hearth_dev_kv *kv, const void *host, int slot, int64_t layer, int64_t pos, int64_t c)
{
    size_t elt = kv->type == HEARTH_F16 ? 2 : 4;
    size_t off = (((size_t)slot * (size_t)kv->n_layer + (size_t)layer) * (size_t)kv->n_ctx + (size_t)pos) *
                     (size_t)kv->kv_dim + (size_t)c;
    if (kv->type == HEARTH_F16)
        return hearth_fp16_to_f32(((const uint16_t *)host)[off]);
    (void)elt;
    return ((const float *)host)[off];
}

static void rope_ref(double *p, int64_t n_heads, int64_t hd, int64_t n_rot, const float *cs, int type)
{
    int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++)
        for (int64_t i = 0; i < half; i++) {
            double c = cs[2 * i], s = cs[2 * i + 1];
            int64_t ia = h * hd + (type == 0 ? 2 * i : i), ib = h * hd + (type == 0 ? 2 * i + 1 : i + half);
            double a = p[ia], b = p[ib];
            p[ia] = a * c - b * s;
            p[ib] = a * s + b * c;
        }
}

static void op_qk_attn(void)
{
    static const int64_t HDS[] = {8, 34, 64, 100};
    for (int kt = 0; kt < 2; kt++) {
        hearth_dtype kvt = kt ? HEARTH_F16 : HEARTH_F32;
        if (!D->supports(g_dev, HEARTH_OP_QK_ROPE_STORE, kvt) || !D->supports(g_dev, HEARTH_OP_ATTN_CACHED, kvt))
            continue;
        for (int ri = 0; ri < NROWS; ri++)
            for (int variant = 0; variant < 3; variant++) { /* plain (llama), biases (qwen2), QK-norm (qwen3) */
                int64_t n = ROWS[ri], hd = HDS[(ri + variant) % 4], n_head = 4, n_head_kv = variant == 1 ? 4 : 2;
                int64_t n_rot = variant == 0 ? hd : hd / 2 - (hd / 2) % 2, qd = n_head * hd, kvd = n_head_kv * hd;
                int n_slots = 3;
                int64_t n_ctx = 150, n_layer = 2, layer = 1;
                int rope_type = variant == 0 ? 0 : 2;
                /* rows of 3 slots, positions in order per slot from a prefix;
                 * the 130 plain rows are one prompt (slot 1 from position 0),
                 * the shape a prefill tile of consecutive rows sees */
                bool one_prompt = ri == NROWS - 1 && variant == 0;
                int32_t *slot = malloc((size_t)n * sizeof *slot);
                int64_t *pos = malloc((size_t)n * sizeof *pos), next[3] = {5, 0, 11};
                for (int64_t i = 0; i < n; i++) {
                    slot[i] = one_prompt ? 1 : (int32_t)(rnd() % (uint32_t)n_slots);
                    pos[i] = next[slot[i]]++;
                }
                step s;
                step_make(&s, n, NULL, pos, slot, n_rot, NULL, 0, NULL, 0);
                size_t elt = kt ? 2 : 4, kv_bytes = (size_t)(n_slots * n_layer * n_ctx * kvd) * elt;
                /* a cache holding random rows at the prefix positions */
                char *kvh_k = malloc(kv_bytes), *kvh_v = malloc(kv_bytes);
                for (size_t i = 0; i < kv_bytes / elt; i++) {
                    float a = frand(), b = frand();
                    if (kt) {
                        ((uint16_t *)kvh_k)[i] = hearth_f32_to_fp16(a);
                        ((uint16_t *)kvh_v)[i] = hearth_f32_to_fp16(b);
                    } else {
                        ((float *)kvh_k)[i] = a;
                        ((float *)kvh_v)[i] = b;
                    }
                }
                hearth_dev_kv kv = {dput(kvh_k, kv_bytes), dput(kvh_v, kv_bytes), kvt, n_ctx, n_layer, kvd};
                float *Q = frands(n * qd), *K = frands(n * kvd), *V = frands(n * kvd);
                float *bq = frands(qd), *bk = frands(kvd), *bv = frands(kvd), *qn = frands(hd), *kn = frands(hd);
                float *dq = dputf(Q, n * qd), *dk = dputf(K, n * kvd), *dv = dputf(V, n * kvd);
                float *dbq = dputf(bq, qd), *dbk = dputf(bk, kvd), *dbv = dputf(bv, kvd), *dqn = dputf(qn, hd),
                      *dkn = dputf(kn, hd);
                hearth_qk qk = {variant == 1 ? dbq : NULL, variant == 1 ? dbk : NULL, variant == 1 ? dbv : NULL,
                                variant == 2 ? dqn : NULL,  variant == 2 ? dkn : NULL, n_head, n_head_kv, hd, n_rot,
                                rope_type, 1e-6f};
                CHECK_EQ_INT(D->qk_rope_store(&g_st, dq, dk, dv, &qk, &kv, layer, &s.db), 0);
                /* oracle of the QK step */
                double *q = malloc((size_t)(n * qd) * sizeof *q), *k = malloc((size_t)(n * kvd) * sizeof *k),
                       *v = malloc((size_t)(n * kvd) * sizeof *v);
                for (int64_t i = 0; i < n; i++) {
                    double *qi = q + i * qd, *ki = k + i * kvd, *vi = v + i * kvd;
                    for (int64_t c = 0; c < qd; c++)
                        qi[c] = (double)Q[i * qd + c] + (variant == 1 ? bq[c] : 0);
                    for (int64_t c = 0; c < kvd; c++) {
                        ki[c] = (double)K[i * kvd + c] + (variant == 1 ? bk[c] : 0);
                        vi[c] = (double)V[i * kvd + c] + (variant == 1 ? bv[c] : 0);
                    }
                    if (variant == 2) {
                        for (int64_t h = 0; h < n_head; h++)
                            rms_ref(qi + h * hd, qi + h * hd, hd, qn, 1e-6);
                        for (int64_t h = 0; h < n_head_kv; h++)
                            rms_ref(ki + h * hd, ki + h * hd, hd, kn, 1e-6);
                    }
                    const float *cs = s.hb.rope_cs + i * s.hb.rope_stride;
                    rope_ref(qi, n_head, hd, n_rot, cs, rope_type);
                    rope_ref(ki, n_head_kv, hd, n_rot, cs, rope_type);
                }
                float *got = malloc((size_t)(n * qd) * sizeof *got);
                dget(got, dq, (size_t)(n * qd) * sizeof(float));
                g_where = kt ? "f16 cache" : "f32 cache";
                near_all("qk q", got, q, n * qd, 1e-5, 1e-5);
                dget(got, dk, (size_t)(n * kvd) * sizeof(float));
                near_all("qk k", got, k, n * kvd, 1e-5, 1e-5);
                /* the stored rows */
                dget(kvh_k, kv.k, kv_bytes);
                dget(kvh_v, kv.v, kv_bytes);
                double tol = kt ? 1e-3 : 1e-5; /* f16 rounding */
                for (int64_t i = 0; i < n && !hearth_test_case_failed; i++)
                    for (int64_t c = 0; c < kvd; c++) {
                        double gk = kv_at(&kv, kvh_k, slot[i], layer, pos[i], c);
                        double gv = kv_at(&kv, kvh_v, slot[i], layer, pos[i], c);
                        if (!(fabs(gk - k[i * kvd + c]) <= tol * (1 + fabs(k[i * kvd + c]))) ||
                            !(fabs(gv - v[i * kvd + c]) <= tol * (1 + fabs(v[i * kvd + c])))) {
                            fprintf(stderr, "  %s kv store row %lld col %lld: %g %g vs %g %g\n", g_where,
                                    (long long)i, (long long)c, gk, gv, k[i * kvd + c], v[i * kvd + c]);
                            hearth_test_case_failed = 1;
                            break;
                        }
                    }
                /* attention over the cache, as it now stands */
                float *dout = D->alloc(g_dev, (size_t)(n * qd) * sizeof(float), NULL);
                float scale = (float)(1.0 / sqrt((double)hd));
                CHECK_EQ_INT(D->attn_cached(&g_st, dout, dq, &kv, layer, &s.db, n_head, n_head_kv, hd, scale), 0);
                float *qf = malloc((size_t)(n * qd) * sizeof *qf);
                dget(qf, dq, (size_t)(n * qd) * sizeof(float));
                dget(got, dout, (size_t)(n * qd) * sizeof(float));
                double *want = calloc((size_t)(n * qd), sizeof *want), *p = malloc((size_t)n_ctx * sizeof *p);
                for (int64_t i = 0; i < n; i++)
                    for (int64_t h = 0; h < n_head; h++) {
                        int64_t kh = h / (n_head / n_head_kv), np = pos[i] + 1;
                        double mx = -1e300, sum = 0;
                        for (int64_t j = 0; j < np; j++) {
                            double d = 0;
                            for (int64_t c = 0; c < hd; c++)
                                d += (double)qf[i * qd + h * hd + c] * kv_at(&kv, kvh_k, slot[i], layer, j, kh * hd + c);
                            p[j] = d * scale;
                            mx = p[j] > mx ? p[j] : mx;
                        }
                        for (int64_t j = 0; j < np; j++)
                            sum += (p[j] = exp(p[j] - mx));
                        for (int64_t c = 0; c < hd; c++) {
                            double o = 0;
                            for (int64_t j = 0; j < np; j++)
                                o += p[j] * kv_at(&kv, kvh_v, slot[i], layer, j, kh * hd + c);
                            want[i * qd + h * hd + c] = o / sum;
                        }
                    }
                near_all("attn_cached", got, want, n * qd, 2e-5, 1e-4);
                /* refused: odd n_rot, a head over the device's limit */
                hearth_qk bad = qk;
                bad.n_rot = 3;
                CHECK(D->qk_rope_store(&g_st, dq, dk, dv, &bad, &kv, layer, &s.db) < 0);
                CHECK(D->attn_cached(&g_st, dout, dq, &kv, layer, &s.db, n_head, n_head_kv,
                                     g_dev->caps.head_dim_max + 1, scale) < 0);
                step_free(&s);
                free(slot), free(pos), free(kvh_k), free(kvh_v), free(Q), free(K), free(V), free(bq), free(bk),
                    free(bv), free(qn), free(kn), free(q), free(k), free(v), free(got), free(qf), free(want), free(p);
                dfree(kv.k), dfree(kv.v), dfree(dq), dfree(dk), dfree(dv), dfree(dbq), dfree(dbk), dfree(dbv),
                    dfree(dqn), dfree(dkn), dfree(dout);
            }
    }
}

/* ---- packed attention and pooling ---- */

static void op_packed_pool(void)
{
    static const int32_t LENS[][5] = {{1}, {3}, {17}, {130}, {1, 3, 17}, {7, 1, 33, 2, 13}};
    static const int NS[] = {1, 1, 1, 1, 3, 5};
    static const int64_t HDS[] = {7, 32, 33, 64};
    for (int ci = 0; ci < 6; ci++)
        for (int hi = 0; hi < 4; hi++) {
            int n_seqs = NS[ci];
            const int32_t *lens = LENS[ci];
            int64_t hd = HDS[hi], n_head = hi % 2 ? 3 : 2, h = n_head * hd, T = 0;
            for (int q = 0; q < n_seqs; q++)
                T += lens[q];
            step s;
            step_make(&s, T, NULL, NULL, NULL, 0, lens, n_seqs, NULL, 0);
            float *QKV = frands(T * 3 * h), *bq = frands(h), *bk = frands(h), *bv = frands(h);
            float *dqkv = dputf(QKV, T * 3 * h), *dbq = dputf(bq, h), *dbk = dputf(bk, h), *dbv = dputf(bv, h);
            float *dctx = D->alloc(g_dev, (size_t)(T * h) * sizeof(float), NULL);
            float scale = 1.0f / sqrtf((float)hd);
            g_where = "packed";
            CHECK_EQ_INT(D->attn_packed(&g_st, dctx, dqkv, dbq, dbk, dbv, &s.db, n_head, hd, scale), 0);
            float *got = malloc((size_t)(T * h) * sizeof *got);
            dget(got, dctx, (size_t)(T * h) * sizeof(float));
            double *want = malloc((size_t)(T * h) * sizeof *want), *p = malloc((size_t)T * sizeof *p);
            for (int q = 0; q < n_seqs; q++) {
                int64_t r0 = s.hb.seq_start[q], len = lens[q];
                for (int64_t hh = 0; hh < n_head; hh++)
                    for (int64_t i = 0; i < len; i++) {
                        double mx = -1e300, sum = 0;
                        for (int64_t j = 0; j < len; j++) {
                            double d = 0;
                            for (int64_t c = 0; c < hd; c++) {
                                int64_t col = hh * hd + c;
                                d += ((double)QKV[(r0 + i) * 3 * h + col] + bq[col]) *
                                     ((double)QKV[(r0 + j) * 3 * h + h + col] + bk[col]);
                            }
                            p[j] = d * scale;
                            mx = p[j] > mx ? p[j] : mx;
                        }
                        for (int64_t j = 0; j < len; j++)
                            sum += (p[j] = exp(p[j] - mx));
                        for (int64_t c = 0; c < hd; c++) {
                            int64_t col = hh * hd + c;
                            double o = 0;
                            for (int64_t j = 0; j < len; j++)
                                o += p[j] * ((double)QKV[(r0 + j) * 3 * h + 2 * h + col] + bv[col]);
                            want[(r0 + i) * h + col] = o / sum;
                        }
                    }
            }
            near_all("attn_packed", got, want, T * h, 2e-5, 1e-4);

            /* pooling of ctx as the hidden states: each kind, with and
             * without L2, one sequence kept whole */
            bool all[5] = {false, n_seqs > 1, false, true, false};
            g_where = "pool";
            for (int kind = 0; kind < 3; kind++)
                for (int l2 = 0; l2 < 2; l2++) {
                    int64_t out_n = 0;
                    for (int q = 0; q < n_seqs; q++)
                        out_n += all[q] ? lens[q] * h : h;
                    float *dpo = D->alloc(g_dev, (size_t)out_n * sizeof(float), NULL), *po = malloc((size_t)out_n * 4);
                    double *pw = malloc((size_t)out_n * sizeof *pw), *o = pw;
                    CHECK_EQ_INT(D->pool(&g_st, dpo, dctx, h, &s.db, kind, l2, all), 0);
                    dget(po, dpo, (size_t)out_n * sizeof(float));
                    for (int q = 0; q < n_seqs; q++) {
                        int64_t r0 = s.hb.seq_start[q], len = lens[q];
                        if (all[q]) {
                            widen(o, got + r0 * h, len * h);
                            o += len * h;
                            continue;
                        }
                        for (int64_t c = 0; c < h; c++) {
                            double acc = 0;
                            if (kind == HEARTH_DEV_POOL_CLS)
                                acc = got[r0 * h + c];
                            else if (kind == HEARTH_DEV_POOL_LAST)
                                acc = got[(r0 + len - 1) * h + c];
                            else {
                                for (int64_t r = 0; r < len; r++)
                                    acc += got[(r0 + r) * h + c];
                                acc /= (double)len;
                            }
                            o[c] = acc;
                        }
                        if (l2) {
                            double ss = 0;
                            for (int64_t c = 0; c < h; c++)
                                ss += o[c] * o[c];
                            double nrm = sqrt(ss) > 1e-12 ? sqrt(ss) : 1e-12;
                            for (int64_t c = 0; c < h; c++)
                                o[c] /= nrm;
                        }
                        o += h;
                    }
                    near_all("pool", po, pw, out_n, 1e-6, 1e-5);
                    dfree(dpo);
                    free(po), free(pw);
                }
            step_free(&s);
            free(QKV), free(bq), free(bk), free(bv), free(got), free(want), free(p);
            dfree(dqkv), dfree(dbq), dfree(dbk), dfree(dbv), dfree(dctx);
        }
}

/* ---- the stream's arena ---- */

static void op_scratch(void)
{
    CHECK_EQ_INT(D->scratch(&g_st, 1000, 100), 0);
    void *a = g_st.scratch, *b = g_st.staging;
    CHECK(a && b && (uintptr_t)a % 64 == 0);
    CHECK_EQ_INT(D->scratch(&g_st, 1000, 100), 0);
    CHECK(g_st.scratch == a && g_st.staging == b); /* fixed while the size does not grow */
    CHECK_EQ_INT(D->scratch(&g_st, 600, 10), 0);
    CHECK(g_st.scratch == a);
    /* an arena over the CPU's pass scratch bound: the stream's own, kept */
    size_t big = HEARTH_PASS_SCRATCH_MAX + 4096;
    CHECK_EQ_INT(D->scratch(&g_st, big, 64), 0);
    a = g_st.scratch;
    /* the whole arena is writable (by the host where it is host memory) */
    char *fill = malloc(big);
    memset(fill, 1, big);
    if (g_dev->caps.host_memory)
        memcpy(a, fill, big);
    else
        dget(fill, a, big); /* readable by a download, as far as the end */
    free(fill);
    CHECK_EQ_INT(D->scratch(&g_st, big, 64), 0);
    CHECK(g_st.scratch == a);
}

/* ---- every case on every device, on streams of 1, 2, 3 threads ---- */

static void (*const CASES[])(void) = {op_matmul, op_matmul_fused, op_matmul_fused_qk, op_embed,  op_rows,
                                      op_argmax, op_qk_attn,      op_packed_pool,     op_scratch};
static const char *const CASE_NAMES[] = {"matmul", "matmul_fused", "matmul_fused_qk", "embed",  "rows",
                                         "argmax", "qk_attn",      "packed_pool",     "scratch"};

static void every_op_on_every_device(void)
{
    CHECK(hearth_dev_count() >= 1);
    /* on the GPU machine (make CUDA=1 check-cuda), a GPU must be among them */
    const char *req = getenv("HEARTH_REQUIRE_GPU");
    if (req && strcmp(req, "1") == 0) {
        hearth_err e = {0};
        CHECK_MSG(hearth_dev_find("cuda", &e) != NULL, "HEARTH_REQUIRE_GPU=1 and no GPU device registered: %s", e.msg);
    }
    CHECK(hearth_dev_default() == hearth_dev_get(0));
    CHECK(hearth_dev_get(hearth_dev_count()) == NULL);
    for (int di = 0; di < hearth_dev_count(); di++) {
        g_dev = hearth_dev_get(di);
        D = g_dev->ops;
        for (int op = 0; op < HEARTH_OP_COUNT_; op++)
            CHECK_MSG(D->supports(g_dev, (hearth_op)op, HEARTH_F32), "%s lacks %s on f32", g_dev->caps.name,
                      hearth_op_name((hearth_op)op));
        CHECK(!D->supports(g_dev, HEARTH_OP_COUNT_, HEARTH_F32));
        for (int threads = 1; threads <= 3; threads++) {
            hearth_pool *pool = threads > 1 ? hearth_pool_new(threads) : NULL;
            for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++) {
                int before = hearth_test_case_failed;
                hearth_test_case_failed = 0;
                CHECK_EQ_INT(hearth_stream_init(&g_st, g_dev, pool, NULL), 0);
                g_where = g_dev->caps.name;
                /* a crash then names the case it was in */
                fprintf(stderr, "  device %s, %d threads: %s ...\n", g_dev->caps.name, threads, CASE_NAMES[c]);
                CASES[c]();
                hearth_stream_deinit(&g_st);
                if (hearth_test_case_failed)
                    fprintf(stderr, "  device %s, %d threads: %s failed\n", g_dev->caps.name, threads, CASE_NAMES[c]);
                hearth_test_case_failed |= before;
            }
            hearth_pool_free(pool);
        }
    }
}

int main(void)
{
    RUN(every_op_on_every_device);
    TEST_EXIT();
}

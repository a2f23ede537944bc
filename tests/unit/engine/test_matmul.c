/* Unit tests for src/engine/cpu/matmul*.c: every dot-product kernel of every
 * ISA this CPU has against the scalar oracle of quant_ref.c, and every matmul
 * path (row dots, packed f32 GEMM, integer GEMM; each ISA, with and without a
 * pool) against hearth_cpu_matmul_ref on odd sizes and strides; the group
 * call against separate calls, bit for bit. Ends by printing the measured
 * FMA peak, an f32 GEMM's GFLOP/s, a Q, K, V projection as three calls and
 * as one group call, and mat-vec GB/s (prints only: this machine's cores are
 * shared, timings are not asserted). */
#include "harness.h"

#include "base/clock.h"
#include "base/err.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_impl.h"
#include "engine/cpu/rowdot_multi.h"
#include "engine/cpu/scratch.h"

#include <stdint.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static float frand(void)
{
    return (float)((double)rnd() / 2147483648.0 - 1.0);
}

static const hearth_dtype TYPES[] = {HEARTH_F32, HEARTH_F16, HEARTH_BF16, HEARTH_Q8_0,
                                     HEARTH_Q4_0, HEARTH_Q4_K, HEARTH_Q6_K};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

static const hearth_cpu_kernels *table_of(hearth_cpu_isa isa)
{
    return isa == HEARTH_ISA_AVX512 ? &hearth_cpu_kernels_avx512
           : isa == HEARTH_ISA_AVX2 ? &hearth_cpu_kernels_avx2
                                    : &hearth_cpu_kernels_scalar;
}

/* K values to try for a type: odd ones where the type allows, else block multiples. */
static int ks_of(hearth_dtype t, int64_t *ks)
{
    int64_t block = hearth_dtype_get(t)->block;
    if (block == 1) {
        const int64_t v[] = {1, 7, 16, 33, 100, 257, 515};
        memcpy(ks, v, sizeof v);
        return 7;
    }
    if (block == 32) {
        const int64_t v[] = {32, 96, 288, 544};
        memcpy(ks, v, sizeof v);
        return 4;
    }
    ks[0] = 256, ks[1] = 768;
    return 2;
}

/* A random weight matrix of type t: N rows of K, with row stride row_bytes. */
static void *make_weights(hearth_dtype t, int64_t N, int64_t K, size_t *row_bytes)
{
    size_t rb;
    hearth_dtype_row_bytes(t, K, &rb);
    *row_bytes = rb + 8; /* padded rows: the stride must be honoured */
    char *w = calloc((size_t)N, *row_bytes);
    float *row = malloc((size_t)K * sizeof *row);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            row[k] = frand() * (rnd() % 16 == 0 ? 4.0f : 1.0f);
        hearth_quant_quantize_row(t, row, w + (size_t)n * *row_bytes, K);
    }
    free(row);
    return w;
}

static void vec_dots_match_oracle(void)
{
    for (int isa = HEARTH_ISA_AVX2; isa < HEARTH_ISA_COUNT_; isa++) {
        if (!hearth_cpu_isa_available((hearth_cpu_isa)isa)) {
            printf("# %s not available: its kernels are not tested here\n", hearth_cpu_isa_name((hearth_cpu_isa)isa));
            continue;
        }
        const hearth_cpu_kernels *kt = table_of((hearth_cpu_isa)isa);
        for (int ti = 0; ti < N_TYPES; ti++) {
            hearth_dtype t = TYPES[ti];
            int64_t ks[8];
            int nk = ks_of(t, ks);
            for (int ki = 0; ki < nk; ki++) {
                int64_t K = ks[ki];
                size_t rb;
                void *w = make_weights(t, 2, K, &rb); /* row 1 only for qv_dot2 */
                float *x = malloc((size_t)K * sizeof *x), *wd = malloc((size_t)K * sizeof *wd);
                for (int64_t k = 0; k < K; k++)
                    x[k] = frand();
                hearth_block_q8a *xq = malloc((size_t)(K / 32 + 1) * sizeof *xq);
                hearth_quant_q8a_row(x, xq, K);
                const void *xv = hearth_quant_uses_q8a(t) ? (const void *)xq : (const void *)x;
                hearth_quant_dequantize_row(t, w, wd, K);
                double sumabs = 0;
                for (int64_t k = 0; k < K; k++)
                    sumabs += fabs((double)wd[k] * x[k]);
                float want = hearth_quant_vec_dot_ref(t, w, xv, K), got = kt->vec_dot[t](w, xv, K);
                /* same integer sums; float scaling/summation order differ: a few ulps of sum|w x| */
                CHECK_MSG(fabs(got - want) <= 1e-5 * sumabs + 1e-6, "%s %s K=%lld: %g vs %g", kt->name,
                          hearth_dtype_get(t)->name, (long long)K, got, want);
                if (kt->qv_dot[t]) {
                    /* planar X made by the ISA holds the same values as q8a, so the same bound */
                    hearth_qv qv = {.M = 1, .K = K, .q = malloc((size_t)K)};
                    qv.d = malloc((size_t)(K / 32) * 3 * sizeof(float));
                    qv.s16 = qv.d + K / 32;
                    kt->qv_row(x, &qv, 0);
                    int same = 1;
                    for (int64_t k = 0; k < K; k++)
                        same &= qv.q[k] == xq[k / 32].qs[k % 32] && qv.d[k / 32] == xq[k / 32].d;
                    CHECK_MSG(same, "%s qv_row differs from hearth_quant_q8a_row, K=%lld", kt->name, (long long)K);
                    float got_qv = kt->qv_dot[t](w, qv.q, qv.d, qv.s16, K);
                    CHECK_MSG(fabs(got_qv - want) <= 1e-5 * sumabs + 1e-6, "%s qv %s K=%lld: %g vs %g", kt->name,
                              hearth_dtype_get(t)->name, (long long)K, got_qv, want);
                    if (kt->qv_dot2[t]) {
                        /* the same operations per row as qv_dot, so the same bits */
                        const char *w1 = (const char *)w + rb;
                        float two[2];
                        kt->qv_dot2[t](w, w1, qv.q, qv.d, qv.s16, K, two);
                        CHECK_MSG(two[0] == got_qv && two[1] == kt->qv_dot[t](w1, qv.q, qv.d, qv.s16, K),
                                  "%s qv_dot2 %s K=%lld: %g, %g", kt->name, hearth_dtype_get(t)->name, (long long)K,
                                  two[0], two[1]);
                    }
                    free(qv.q), free(qv.d);
                }
                free(w), free(x), free(wd), free(xq);
            }
        }
    }
}

/* The path check_case runs: hearth_cpu_matmul_on, or a kernel family alone. */
typedef int (*matmul_fn)(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype wt, const void *W, size_t w_row_bytes,
                         int64_t N, int64_t K, const float *X, int64_t x_stride, int64_t M, float *Y,
                         int64_t y_stride);
static matmul_fn g_matmul = hearth_cpu_matmul_on;

/* Y from matmul_on vs the oracle, with the bound for each element written out:
 * f32 accumulation error 2e-5 sum|x w| (K <= 768, blocked sums), plus for the
 * quantized types the q8a rounding of X: sum_k |w_k| * (amax of x's block)/254. */
static int check_case(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype t, int64_t M, int64_t N, int64_t K)
{
    size_t rb;
    void *w = make_weights(t, N, K, &rb);
    int64_t ldx = K + 3, ldy = N + 2;
    float *x = malloc((size_t)(M * ldx) * sizeof *x), *y = malloc((size_t)(M * ldy) * sizeof *y),
          *yr = malloc((size_t)(M * ldy) * sizeof *yr), *wd = malloc((size_t)K * sizeof *wd);
    for (int64_t i = 0; i < M * ldx; i++)
        x[i] = frand();
    for (int64_t i = 0; i < M * ldy; i++)
        y[i] = yr[i] = -7.0f; /* canary in the stride padding */
    int rc = g_matmul(isa, pool, t, w, rb, N, K, x, ldx, M, y, ldy);
    int rc_ref = hearth_cpu_matmul_ref(NULL, t, w, rb, N, K, x, ldx, M, yr, ldy);
    int bad = rc != 0 || rc_ref != 0;
    for (int64_t n = 0; n < N && !bad; n++) {
        hearth_quant_dequantize_row(t, (char *)w + (size_t)n * rb, wd, K);
        for (int64_t m = 0; m < M; m++) {
            const float *xm = x + m * ldx;
            double sumabs = 0, qerr = 0;
            for (int64_t k = 0; k < K; k++) {
                sumabs += fabs((double)wd[k] * xm[k]);
                if (hearth_quant_uses_q8a(t) && k % 32 == 0) {
                    float amax = 0, wsum = 0;
                    for (int l = 0; l < 32; l++) {
                        amax = fmaxf(amax, fabsf(xm[k + l]));
                        wsum += fabsf(wd[k + l]);
                    }
                    qerr += (double)wsum * amax / 254 * (1 + 1e-6);
                }
            }
            double tol = 2e-5 * sumabs + qerr + 1e-6;
            double e = fabs((double)y[m * ldy + n] - yr[m * ldy + n]);
            if (!(e <= tol)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s %s M=%lld N=%lld K=%lld: Y[%lld][%lld] = %g, oracle %g, tol %g\n",
                            hearth_cpu_isa_name(isa), hearth_dtype_get(t)->name, (long long)M, (long long)N,
                            (long long)K, (long long)m, (long long)n, y[m * ldy + n], yr[m * ldy + n], tol);
            }
        }
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = N; n < ldy; n++)
            bad += y[m * ldy + n] != -7.0f;
    free(w), free(x), free(y), free(yr), free(wd);
    return bad;
}

static void matmul_matches_oracle(void)
{
    /* 16, 33, 65: past every type's switch to a GEMM (matmul.c, gemm_min_m) */
    const int64_t ms[] = {1, 2, 3, 4, 5, 7, 8, 15, 16, 33, 65}, ns[] = {1, 5, 37, 70};
    hearth_pool *pool = hearth_pool_new(2);
    for (int isa = 0; isa < HEARTH_ISA_COUNT_; isa++) {
        if (!hearth_cpu_isa_available((hearth_cpu_isa)isa))
            continue;
        int bad = 0;
        for (int ti = 0; ti < N_TYPES; ti++) {
            int64_t ks[8];
            int nk = ks_of(TYPES[ti], ks);
            for (int ki = 0; ki < nk; ki++)
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                        bad += check_case((hearth_cpu_isa)isa, (mi + ni) % 2 ? pool : NULL, TYPES[ti], ms[mi],
                                          ns[ni], ks[ki]);
        }
        CHECK_MSG(bad == 0, "%s: %d mismatches", hearth_cpu_isa_name((hearth_cpu_isa)isa), bad);
    }
    hearth_pool_free(pool);
}

/* The prefill paths (packed f32 GEMM, integer GEMM) at M past every type's
 * switch to them, with M not a multiple of any tile's rows, and N past one
 * task's chunk of W rows (256) with a partial last panel. */
static void gemm_paths_match_oracle(void)
{
    const int64_t ms[] = {64, 65, 128, 200}, ns[] = {37, 300};
    hearth_pool *pool = hearth_pool_new(2);
    for (int isa = 0; isa < HEARTH_ISA_COUNT_; isa++) {
        if (!hearth_cpu_isa_available((hearth_cpu_isa)isa))
            continue;
        int bad = 0;
        for (int ti = 0; ti < N_TYPES; ti++) {
            int64_t ks[8];
            int nk = ks_of(TYPES[ti], ks);
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
                    bad += check_case((hearth_cpu_isa)isa, (mi + ni) % 2 ? pool : NULL, TYPES[ti], ms[mi], ns[ni],
                                      ks[(mi + ni) % nk]);
        }
        CHECK_MSG(bad == 0, "%s: %d mismatches", hearth_cpu_isa_name((hearth_cpu_isa)isa), bad);
    }
    hearth_pool_free(pool);
}

/* The multi-row row dots of rowdot_multi*.c called directly (the matmul
 * driver hands them only M below each type's GEMM switch): every type, 1 to
 * 8 rows in one call and 9, 15 in two (5 + 4, 8 + 7), odd N, K with partial
 * 256-element pieces (Q8_0 / Q4_0 at K = 96, 288, 544; odd K for f32). */
static void multi_row_dots_match_oracle(void)
{
    const int64_t ms[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15}, ns[] = {1, 37, 71};
    hearth_pool *pool = hearth_pool_new(2);
    g_matmul = hearth_rowdot_multi;
    for (int isa = 0; isa < HEARTH_ISA_COUNT_; isa++) {
        const hearth_mdot_kernels *kt = hearth_mdot_kernels_of((hearth_cpu_isa)isa);
        if (!kt || !hearth_cpu_isa_available((hearth_cpu_isa)isa))
            continue;
        int bad = 0, cases = 0;
        for (int ti = 0; ti < N_TYPES; ti++) {
            if (!kt->dot[TYPES[ti]][1])
                continue;
            int64_t ks[8];
            int nk = ks_of(TYPES[ti], ks);
            for (int ki = 0; ki < nk; ki++)
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++, cases++)
                        bad += check_case((hearth_cpu_isa)isa, (mi + ni) % 2 ? pool : NULL, TYPES[ti], ms[mi],
                                          ns[ni], ks[ki]);
        }
        CHECK_MSG(bad == 0, "%s multi-row: %d mismatches", hearth_cpu_isa_name((hearth_cpu_isa)isa), bad);
        CHECK_MSG(cases > 0, "%s multi-row: no type covered", hearth_cpu_isa_name((hearth_cpu_isa)isa));
        /* X as the kernels take it holds hearth_quant_q8a_row's values, zero past K */
        for (int64_t K = 32; K <= 544; K += 256) {
            int64_t M = 3, Kp = (K + 255) / 256 * 256;
            hearth_mx mx = {.M = M, .K = K, .Kp = Kp, .q = aligned_alloc(64, (size_t)(M * Kp))};
            mx.dxl = aligned_alloc(64, (size_t)(M * Kp / 16) * sizeof(float));
            mx.s16 = malloc((size_t)(M * Kp / 16) * sizeof(float));
            float *x = malloc((size_t)K * sizeof *x);
            hearth_block_q8a *xq = malloc((size_t)(K / 32) * sizeof *xq);
            for (int64_t k = 0; k < K; k++)
                x[k] = frand() * (k % 7 == 0 ? 3.0f : 1.0f);
            hearth_quant_q8a_row(x, xq, K);
            kt->q_row(x, &mx, 1);
            int same = 1;
            for (int64_t k = 0; k < Kp; k++) {
                /* group order (rowdot_multi.h): element e of piece p at byte 64c + 4 grp + b */
                int64_t p = k / 256, e = k % 256, grp = e / 16, c = e % 16 / 4;
                int64_t at = (p * M + 1) * 256 + 64 * c + 4 * grp + e % 4, g = (p * M + 1) * 16 + grp;
                int q = k < K ? xq[k / 32].qs[k % 32] : 0;
                float d = k < K ? xq[k / 32].d : 0;
                same &= mx.q[at] == q && mx.dxl[g] == d;
                if (k % 16 == 0) {
                    double s = 0;
                    for (int64_t l = k; l < k + 16 && l < K; l++)
                        s += xq[l / 32].qs[l % 32];
                    float got = mx.s16[((k / 256) * M + 1) * 16 + k % 256 / 16];
                    same &= fabs(got - d * s) <= 1e-6 * (fabs(d * s) + 1);
                }
            }
            CHECK_MSG(same, "%s q_row differs from hearth_quant_q8a_row, K=%lld", hearth_cpu_isa_name(isa),
                      (long long)K);
            free(mx.q), free(mx.dxl), free(mx.s16), free(x), free(xq);
        }
    }
    g_matmul = hearth_cpu_matmul_on;
    hearth_pool_free(pool);
}

/* One group call of n outputs against n separate hearth_cpu_matmul_on calls
 * on the same ISA. Exact equality (memcmp, stride padding included): the
 * group call runs the same kernels on the same quantized X, so the floats
 * must be the same bits, not merely close. Returns the mismatched outputs. */
static int check_group(hearth_cpu_isa isa, hearth_pool *pool, const hearth_dtype *ts, int n, int64_t M, int64_t K)
{
    static const int64_t widths[] = {37, 64, 71};
    hearth_cpu_mm_out outs[HEARTH_MM_GROUP_MAX];
    float *want[HEARTH_MM_GROUP_MAX];
    int64_t ldx = K + 3;
    float *x = malloc((size_t)(M * ldx) * sizeof *x);
    for (int64_t i = 0; i < M * ldx; i++)
        x[i] = frand();
    for (int i = 0; i < n; i++) {
        hearth_cpu_mm_out *o = &outs[i];
        *o = (hearth_cpu_mm_out){.wt = ts[i], .N = widths[i], .y_stride = widths[i] + 2};
        o->W = make_weights(ts[i], o->N, K, &o->w_row_bytes);
        o->Y = malloc((size_t)(M * o->y_stride) * sizeof(float));
        want[i] = malloc((size_t)(M * o->y_stride) * sizeof(float));
        for (int64_t e = 0; e < M * o->y_stride; e++)
            o->Y[e] = want[i][e] = -7.0f; /* canary in the stride padding */
    }
    int bad = hearth_cpu_matmul_group_on(isa, pool, outs, n, K, x, ldx, M) != 0;
    for (int i = 0; i < n; i++) {
        const hearth_cpu_mm_out *o = &outs[i];
        bad += hearth_cpu_matmul_on(isa, pool, o->wt, o->W, o->w_row_bytes, o->N, K, x, ldx, M, want[i],
                                    o->y_stride) != 0;
        if (memcmp(o->Y, want[i], (size_t)(M * o->y_stride) * sizeof(float)) != 0 && bad++ < 3)
            fprintf(stderr, "  %s group of %d, output %d (%s, N=%lld), M=%lld K=%lld, %s pool: differs\n",
                    hearth_cpu_isa_name(isa), n, i, hearth_dtype_get(o->wt)->name, (long long)o->N, (long long)M,
                    (long long)K, pool ? "with" : "no");
        free((void *)o->W), free(o->Y), free(want[i]);
    }
    free(x);
    return bad;
}

/* hearth_cpu_matmul_group against separate calls: M from 1 to 9 takes the
 * multi-row path where the ISA has it (9 in two row groups, 5 + 4), 17
 * takes each type's GEMM (f16's row dots: {f16, f32} goes per output);
 * groups of one type, of mixed types sharing an X form (Q4_K Q and K with a
 * Q6_K V, as mixed-quant GGUF files have), and of mixed X forms (q8a and
 * float), which must fall back to one call per output. */
static void group_matches_separate_calls(void)
{
    static const struct {
        int n;
        hearth_dtype t[3];
        int64_t k[2]; /* multiples of every type's block */
    } groups[] = {
        {1, {HEARTH_Q8_0}, {96, 288}},
        {2, {HEARTH_Q8_0, HEARTH_Q8_0}, {96, 544}},
        {3, {HEARTH_Q4_K, HEARTH_Q4_K, HEARTH_Q6_K}, {256, 768}},
        {3, {HEARTH_Q4_K, HEARTH_Q6_K, HEARTH_Q8_0}, {256, 768}},
        {2, {HEARTH_Q4_0, HEARTH_Q8_0}, {32, 288}},
        {1, {HEARTH_F32}, {33, 257}},
        {2, {HEARTH_F16, HEARTH_F32}, {7, 100}},
        {3, {HEARTH_BF16, HEARTH_F16, HEARTH_F32}, {16, 515}},
        {2, {HEARTH_Q8_0, HEARTH_F16}, {96, 288}},              /* mixed X forms */
        {3, {HEARTH_F32, HEARTH_Q4_K, HEARTH_BF16}, {256, 512}}, /* mixed X forms */
    };
    const int64_t ms[] = {1, 2, 3, 4, 5, 8, 9, 17};
    hearth_pool *pool = hearth_pool_new(2);
    for (int isa = 0; isa < HEARTH_ISA_COUNT_; isa++) {
        if (!hearth_cpu_isa_available((hearth_cpu_isa)isa))
            continue;
        int bad = 0;
        for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++)
            for (int ki = 0; ki < 2; ki++)
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                    for (int p = 0; p < 2; p++)
                        bad += check_group((hearth_cpu_isa)isa, p ? pool : NULL, groups[g].t, groups[g].n, ms[mi],
                                           groups[g].k[ki]);
        CHECK_MSG(bad == 0, "%s group: %d mismatches", hearth_cpu_isa_name((hearth_cpu_isa)isa), bad);
    }
    hearth_pool_free(pool);
}

/* A bad group is rejected whole: nothing is written, not even the outputs
 * before the bad one. */
static void bad_group_arguments_are_rejected(void)
{
    enum { K = 32, N = 4 };
    float x[2 * K], y[3][2 * N];
    uint8_t w[N * 4 * K]; /* N rows of f32 at most */
    for (int i = 0; i < 2 * K; i++)
        x[i] = frand();
    for (int i = 0; i < N * 4 * K; i++)
        w[i] = (uint8_t)(rnd() & 0x3f); /* finite f32 and sane q8_0 scales */
    hearth_cpu_mm_out outs[HEARTH_MM_GROUP_MAX + 1];
    for (int i = 0; i <= HEARTH_MM_GROUP_MAX; i++)
        outs[i] = (hearth_cpu_mm_out){.wt = HEARTH_Q8_0, .W = w, .w_row_bytes = 34, .N = N, .Y = y[i % 3],
                                      .y_stride = N};
    for (int i = 0; i < 3 * 2 * N; i++)
        y[i / (2 * N)][i % (2 * N)] = -7.0f;
    CHECK_EQ_INT(hearth_cpu_matmul_group(NULL, outs, 0, K, x, K, 2), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_cpu_matmul_group(NULL, outs, HEARTH_MM_GROUP_MAX + 1, K, x, K, 2), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_cpu_matmul_group(NULL, NULL, 1, K, x, K, 2), HEARTH_EINVAL);
    outs[2].y_stride = N - 1; /* the third output's rows overlap */
    CHECK_EQ_INT(hearth_cpu_matmul_group(NULL, outs, 3, K, x, K, 2), HEARTH_EINVAL);
    outs[2].y_stride = N, outs[1].W = NULL;
    CHECK_EQ_INT(hearth_cpu_matmul_group(NULL, outs, 3, K, x, K, 2), HEARTH_EINVAL);
    outs[1].W = w, outs[2].wt = HEARTH_F32, outs[2].w_row_bytes = 4 * K - 4; /* row short */
    CHECK_EQ_INT(hearth_cpu_matmul_group(NULL, outs, 3, K, x, K, 2), HEARTH_EINVAL);
    int untouched = 1;
    for (int i = 0; i < 3 * 2 * N; i++)
        untouched &= y[i / (2 * N)][i % (2 * N)] == -7.0f;
    CHECK_MSG(untouched, "a rejected group wrote its outputs");
    CHECK_EQ_INT(hearth_cpu_matmul_group_on(HEARTH_ISA_COUNT_, NULL, outs, 1, K, x, K, 2), HEARTH_EUNSUPPORTED);
    /* and the good group computes: N = 0 outputs (NULL W and Y) are skipped */
    outs[2].w_row_bytes = 4 * K, outs[1].N = 0, outs[1].W = NULL, outs[1].Y = NULL;
    CHECK_EQ_INT(hearth_cpu_matmul_group(NULL, outs, 3, K, x, K, 2), 0);
    CHECK(y[0][0] != -7.0f && y[2][2 * N - 1] != -7.0f && y[1][0] == -7.0f);
}

static void bad_arguments_are_rejected(void)
{
    float x[64] = {0}, y[4];
    uint8_t w[256] = {0};
    CHECK_EQ_INT(hearth_cpu_matmul(NULL, HEARTH_Q8_0, w, 34, 1, 48, x, 48, 1, y, 1), HEARTH_EINVAL); /* K % 32 */
    CHECK_EQ_INT(hearth_cpu_matmul(NULL, (hearth_dtype)5, w, 64, 1, 32, x, 32, 1, y, 1), HEARTH_EINVAL);
    CHECK_EQ_INT(hearth_cpu_matmul(NULL, HEARTH_F32, w, 60, 1, 16, x, 16, 1, y, 1), HEARTH_EINVAL); /* row short */
    CHECK_EQ_INT(hearth_cpu_matmul(NULL, HEARTH_F32, w, 64, 1, 16, x, 8, 1, y, 1), HEARTH_EINVAL);  /* x stride */
    CHECK_EQ_INT(hearth_cpu_matmul(NULL, HEARTH_F32, w, 64, 2, 16, x, 16, 1, y, 1), HEARTH_EINVAL); /* y stride */
    CHECK_EQ_INT(hearth_cpu_matmul(NULL, HEARTH_F32, w, 64, 0, 16, x, 16, 1, y, 1), 0);
    CHECK_EQ_INT(hearth_cpu_matmul_on(HEARTH_ISA_COUNT_, NULL, HEARTH_F32, w, 64, 1, 16, x, 16, 1, y, 1),
                 HEARTH_EUNSUPPORTED);
}

/* The per-thread scratch: aligned, reused while big enough, grown past its
 * capacity, bounded, and usable again after a release (a matmul after the
 * release still matches the oracle). */
static void scratch_is_reused_and_bounded(void)
{
    char *a = hearth_cpu_scratch(HEARTH_SCRATCH_TASK, 1000);
    CHECK(a != NULL && (uintptr_t)a % 64 == 0);
    CHECK(hearth_cpu_scratch(HEARTH_SCRATCH_TASK, 10) == a);
    char *c = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, 1000);
    CHECK(c != NULL && c != a);
    memset(c, 1, 1000);
    char *b = hearth_cpu_scratch(HEARTH_SCRATCH_TASK, 1 << 20);
    CHECK(b != NULL && (uintptr_t)b % 64 == 0);
    memset(b, 2, 1 << 20);
    CHECK(hearth_cpu_scratch(HEARTH_SCRATCH_CALL, 1000) == c && c[999] == 1);
    CHECK(hearth_cpu_scratch(HEARTH_SCRATCH_TASK, HEARTH_SCRATCH_MAX + 1) == NULL);
    hearth_cpu_matmul_release_scratch();
    CHECK(check_case(hearth_cpu_matmul_isa(), NULL, HEARTH_F16, 40, 70, 96) == 0);
    CHECK(check_case(hearth_cpu_matmul_isa(), NULL, HEARTH_Q4_K, 40, 70, 256) == 0);
    hearth_cpu_matmul_release_scratch();
}

/* Prepacked weights give hearth_cpu_matmul's result bit for bit, below the
 * rows where f32 panels are used and on them, read in place and copied to
 * L2 first (from 128 rows), on odd N (past a panel) and K (past a slice),
 * with and without a pool. F16 weights on
 * f16 panels: bit for bit where hearth_cpu_matmul runs its GEMM (M >= 24),
 * within 1e-5 of the row's scale below that (row dots sum in another
 * order), and the weights are not read after prepacking (they are freed
 * before the calls: ASan would see a read). */
static void prepacked_matches_plain_calls(void)
{
    const hearth_dtype ts[] = {HEARTH_F32, HEARTH_F16, HEARTH_BF16, HEARTH_Q8_0, HEARTH_Q4_K};
    const int64_t ms[] = {1, 5, 13, 23, 24, 40, 63, 64, 101, 127, 128, 150};
    enum { N = 70, K = 512 + 256, MS = sizeof ms / sizeof ms[0] };
    hearth_pool *pool = hearth_pool_new(2);
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        size_t rb;
        void *w = make_weights(ts[i], N, K, &rb);
        hearth_cpu_prepacked *pw = hearth_cpu_prepack(ts[i], w, rb, N, K);
        const char *name = hearth_dtype_get(ts[i])->name;
        CHECK_MSG((pw != NULL) == hearth_cpu_prepack_wanted(ts[i]), "%s", name);
        if (!pw) {
            free(w);
            continue;
        }
        /* chained to itself: calls on one thread fetch its own start ahead
         * after their last task, which must change no result */
        hearth_cpu_prepack_chain(pw, pw);
        bool f16_panels = !hearth_cpu_prepacked_needs_weights(pw);
        /* f16 panels where this CPU's kernels take them; f32 otherwise */
        CHECK_MSG(f16_panels == (ts[i] == HEARTH_F16 && hearth_cpu_matmul_isa() != HEARTH_ISA_SCALAR), "%s", name);
        size_t elt = f16_panels ? 2 : sizeof(float);
        /* panels of whole 32- or 16-wide tiles over all of K */
        CHECK(hearth_cpu_prepacked_bytes(pw) >= (size_t)N * K * elt);
        CHECK(hearth_cpu_prepacked_bytes(pw) < (size_t)(N + 32) * K * elt);
        float *x[MS], *want[MS][2];
        for (size_t m = 0; m < MS; m++) {
            int64_t M = ms[m], ldx = K + 5, ldy = N + 3;
            x[m] = malloc((size_t)(M * ldx) * sizeof(float));
            for (int64_t e = 0; e < M * ldx; e++)
                x[m][e] = frand();
            for (int p = 0; p < 2; p++) {
                want[m][p] = malloc((size_t)(M * ldy) * sizeof(float));
                for (int64_t e = 0; e < M * ldy; e++)
                    want[m][p][e] = -7.0f;
                CHECK(hearth_cpu_matmul(p ? pool : NULL, ts[i], w, rb, N, K, x[m], ldx, M, want[m][p], ldy) == 0);
            }
        }
        if (f16_panels) {
            free(w);
            w = NULL;
        }
        for (size_t m = 0; m < MS; m++) {
            int64_t M = ms[m], ldx = K + 5, ldy = N + 3;
            float *y = malloc((size_t)(M * ldy) * sizeof *y);
            for (int p = 0; p < 2; p++) {
                for (int64_t e = 0; e < M * ldy; e++)
                    y[e] = -7.0f;
                CHECK(hearth_cpu_matmul_prepacked(p ? pool : NULL, pw, x[m], ldx, M, y, ldy) == 0);
                if (!f16_panels || M >= 24) {
                    CHECK_MSG(memcmp(y, want[m][p], (size_t)(M * ldy) * sizeof *y) == 0, "%s M=%lld pool %d", name,
                              (long long)M, p);
                    continue;
                }
                double err = 0, scale = 0;
                for (int64_t e = 0; e < M * ldy; e++) {
                    double d = fabs((double)y[e] - want[m][p][e]);
                    err = d > err ? d : err;
                    scale = fabs(want[m][p][e]) > scale ? fabs(want[m][p][e]) : scale;
                }
                CHECK_MSG(err <= 1e-5 * scale, "%s M=%lld pool %d: max error %g of %g", name, (long long)M, p, err,
                          scale);
            }
            free(y);
            free(x[m]), free(want[m][0]), free(want[m][1]);
        }
        hearth_cpu_prepacked_free(pw);
        free(w);
    }
    /* refused: bad sizes, a row stride too small, a NULL handle */
    float f[4] = {0};
    CHECK(hearth_cpu_prepack(HEARTH_F32, f, 16, 0, 4) == NULL);
    CHECK(hearth_cpu_prepack(HEARTH_F32, f, 8, 1, 4) == NULL);
    CHECK(hearth_cpu_matmul_prepacked(NULL, NULL, f, 4, 1, f, 4) == HEARTH_EINVAL);
    hearth_cpu_prepacked_free(NULL);
    hearth_pool_free(pool);
}

/* A prepacked group gives its weights' single calls bit for bit, with
 * weights of different N and types (f16 panels, f32 panels, none taken
 * where the types' GEMM has no panels), at decode and prefill row counts;
 * mismatched K or too many weights are refused. */
static void prepacked_group_matches_single_calls(void)
{
    enum { K = 256 + 64 };
    const hearth_dtype ts[] = {HEARTH_F16, HEARTH_F16, HEARTH_F32, HEARTH_F16};
    const int64_t ns[] = {96, 33, 64, 130};
    hearth_cpu_prepacked *pws[4];
    void *ws[4];
    for (int i = 0; i < 4; i++) {
        size_t rb;
        ws[i] = make_weights(ts[i], ns[i], K, &rb);
        pws[i] = hearth_cpu_prepack(ts[i], ws[i], rb, ns[i], K);
        CHECK(pws[i] != NULL || !hearth_cpu_prepack_wanted(ts[i]));
    }
    hearth_pool *pool = hearth_pool_new(2);
    const int64_t ms[] = {1, 4, 30, 128};
    for (size_t m = 0; m < sizeof ms / sizeof ms[0] && pws[0] && pws[1] && pws[2] && pws[3]; m++) {
        int64_t M = ms[m];
        float *x = malloc((size_t)(M * K) * sizeof *x), *ys[4], *want[4];
        int64_t strides[4];
        for (int64_t e = 0; e < M * K; e++)
            x[e] = frand();
        for (int i = 0; i < 4; i++) {
            strides[i] = ns[i] + 1;
            ys[i] = calloc((size_t)(M * strides[i]), sizeof(float));
            want[i] = calloc((size_t)(M * strides[i]), sizeof(float));
            CHECK(hearth_cpu_matmul_prepacked(pool, pws[i], x, K, M, want[i], strides[i]) == 0);
        }
        const hearth_cpu_prepacked *const all[4] = {pws[0], pws[1], pws[2], pws[3]};
        CHECK(hearth_cpu_matmul_prepacked_group(pool, all, ys, strides, 4, x, K, M) == 0);
        for (int i = 0; i < 4; i++) {
            CHECK_MSG(memcmp(ys[i], want[i], (size_t)(M * strides[i]) * sizeof(float)) == 0, "M=%lld weight %d",
                      (long long)M, i);
            free(ys[i]), free(want[i]);
        }
        free(x);
    }
    float f[4] = {0};
    size_t rb;
    void *w_short = make_weights(HEARTH_F16, 32, K - 64, &rb);
    hearth_cpu_prepacked *p_short = hearth_cpu_prepack(HEARTH_F16, w_short, rb, 32, K - 64);
    if (p_short) {
        const hearth_cpu_prepacked *mixed[2] = {pws[0], p_short};
        float *ys[2] = {f, f};
        int64_t strides[2] = {96, 32};
        CHECK(hearth_cpu_matmul_prepacked_group(pool, mixed, ys, strides, 2, f, K, 0) == HEARTH_EINVAL);
    }
    float *ys5[5] = {f, f, f, f, f};
    int64_t st5[5] = {200, 200, 200, 200, 200};
    const hearth_cpu_prepacked *five[5] = {pws[0], pws[0], pws[0], pws[0], pws[0]};
    CHECK(hearth_cpu_matmul_prepacked_group(pool, five, ys5, st5, 5, f, K, 0) == HEARTH_EINVAL);
    hearth_cpu_prepacked_free(p_short);
    free(w_short);
    for (int i = 0; i < 4; i++) {
        hearth_cpu_prepacked_free(pws[i]);
        free(ws[i]);
    }
    hearth_pool_free(pool);
}

/* Each ISA's f16-panel tile gives its f32-panel tile's result bit for bit
 * on the same values (the widening is exact and the sums run in the same
 * order), for every row count and a partial last panel. */
static void f16_tiles_match_f32_tiles(void)
{
    for (int isa = HEARTH_ISA_AVX2; isa < HEARTH_ISA_COUNT_; isa++) {
        if (!hearth_cpu_isa_available((hearth_cpu_isa)isa))
            continue;
        const hearth_cpu_kernels *kt = isa == HEARTH_ISA_AVX2 ? &hearth_cpu_kernels_avx2 : &hearth_cpu_kernels_avx512;
        CHECK(kt->gemm_tile_f16 != NULL);
        enum { KC = 100, LDX = 101 };
        int nr = kt->nr_max;
        uint16_t *p16 = aligned_alloc(64, (size_t)KC * nr * 2);
        float *p32 = aligned_alloc(64, (size_t)KC * nr * 4), x[8 * LDX];
        for (int e = 0; e < KC * nr; e++) {
            p16[e] = hearth_f32_to_fp16(frand());
            p32[e] = hearth_fp16_to_f32(p16[e]);
        }
        for (int e = 0; e < 8 * LDX; e++)
            x[e] = frand();
        for (int mr = 1; mr <= kt->mr_max; mr++)
            for (int cols = nr - 3; cols <= nr; cols += 3)
                for (int acc = 0; acc < 2; acc++) {
                    float y16[8 * 40], y32[8 * 40];
                    for (int e = 0; e < 8 * 40; e++)
                        y16[e] = y32[e] = (float)e;
                    kt->gemm_tile_f16(x, LDX, p16, KC, y16, 40, mr, cols, acc, NULL);
                    kt->gemm_tile(x, LDX, p32, KC, y32, 40, mr, cols, acc, NULL);
                    CHECK_MSG(memcmp(y16, y32, sizeof y16) == 0, "%s mr %d cols %d acc %d", kt->name, mr, cols, acc);
                }
        free(p16);
        free(p32);
    }
}

/* A tile given memory to fetch ahead computes what it computes without,
 * bit for bit, and takes at most kc lines of it, advancing past what it
 * took; the AVX-512 tile (where fetching ahead was measured) takes
 * min(lines, kc). */
static void tiles_fetch_ahead(void)
{
    for (int isa = HEARTH_ISA_SCALAR; isa < HEARTH_ISA_COUNT_; isa++) {
        if (!hearth_cpu_isa_available((hearth_cpu_isa)isa))
            continue;
        const hearth_cpu_kernels *kt = isa == HEARTH_ISA_SCALAR ? &hearth_cpu_kernels_scalar
                                       : isa == HEARTH_ISA_AVX2 ? &hearth_cpu_kernels_avx2
                                                                : &hearth_cpu_kernels_avx512;
        enum { KC = 100, LDX = 101, LINES = 250 };
        int nr = kt->nr_max;
        float *p32 = aligned_alloc(64, (size_t)KC * nr * 4), x[8 * LDX];
        char *far = aligned_alloc(64, (size_t)LINES * 64);
        for (int e = 0; e < KC * nr; e++)
            p32[e] = frand();
        for (int e = 0; e < 8 * LDX; e++)
            x[e] = frand();
        for (int mr = 1; mr <= kt->mr_max; mr++) {
            float y0[8 * 40], y1[8 * 40];
            for (int e = 0; e < 8 * 40; e++)
                y0[e] = (float)e;
            kt->gemm_tile(x, LDX, p32, KC, y0, 40, mr, nr, 1, NULL);
            /* three calls take 100 + 100 + the last 50 lines */
            hearth_gemm_ahead ahead = {far, LINES};
            for (int call = 0; call < 3; call++) {
                int64_t before = ahead.lines, want = before < KC ? before : KC;
                const char *at = ahead.at;
                for (int e = 0; e < 8 * 40; e++)
                    y1[e] = (float)e;
                kt->gemm_tile(x, LDX, p32, KC, y1, 40, mr, nr, 1, &ahead);
                int64_t took = before - ahead.lines;
                CHECK_MSG(took >= 0 && took <= want && ahead.at == at + 64 * took, "%s mr %d call %d: took %lld lines",
                          kt->name, mr, call, (long long)took);
                if (isa == HEARTH_ISA_AVX512)
                    CHECK_MSG(took == want, "%s mr %d call %d: took %lld lines, want %lld", kt->name, mr, call,
                              (long long)took, (long long)want);
                CHECK_MSG(memcmp(y0, y1, sizeof y0) == 0, "%s mr %d call %d: fetching ahead changed the result",
                          kt->name, mr, call);
            }
            if (isa == HEARTH_ISA_AVX512)
                CHECK(ahead.lines == 0 && ahead.at == far + 64 * LINES);
        }
        free(far);
        free(p32);
    }
}

static double seconds_of_best(int reps, hearth_pool *pool, hearth_dtype t, const void *w, size_t rb, int64_t N,
                              int64_t K, const float *x, int64_t M, float *y)
{
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = hearth_now_ns();
        hearth_cpu_matmul(pool, t, w, rb, N, K, x, K, M, y, N);
        double s = (double)(hearth_now_ns() - t0) / 1e9;
        best = s < best ? s : best;
    }
    return best;
}

static void print_speed(void)
{
    hearth_pool *pool = hearth_pool_new(0);
    printf("# isa %s, %d threads\n", hearth_cpu_isa_name(hearth_cpu_matmul_isa()), hearth_pool_size(pool));
    printf("# fma peak: %.1f GFLOP/s\n", hearth_cpu_peak_gflops(pool));
    {
        int64_t M = 256, N = 1536, K = 384;
        size_t rb;
        void *w = make_weights(HEARTH_F32, N, K, &rb);
        float *x = malloc((size_t)(M * K) * sizeof *x), *y = malloc((size_t)(M * N) * sizeof *y);
        for (int64_t i = 0; i < M * K; i++)
            x[i] = frand();
        double s = seconds_of_best(10, pool, HEARTH_F32, w, rb, N, K, x, M, y);
        printf("# f32 gemm %lldx%lldx%lld: %.1f GFLOP/s\n", (long long)M, (long long)N, (long long)K,
               2.0 * M * N * K / s / 1e9);
        free(w), free(x), free(y);
    }
    {
        /* a 768-wide layer's Q, K, V in Q8_0 at a 4-sequence decode step:
         * three calls (X quantized three times, three pool jobs) vs one group */
        enum { N = 768, K = 768, M = 4, REPS = 50 };
        hearth_pool *two = hearth_pool_new(2);
        hearth_cpu_mm_out qkv[3];
        float *x = malloc((size_t)(M * K) * sizeof *x);
        for (int64_t i = 0; i < M * K; i++)
            x[i] = frand();
        for (int i = 0; i < 3; i++) {
            qkv[i] = (hearth_cpu_mm_out){.wt = HEARTH_Q8_0, .N = N, .y_stride = N};
            qkv[i].W = make_weights(HEARTH_Q8_0, N, K, &qkv[i].w_row_bytes);
            qkv[i].Y = malloc((size_t)(M * N) * sizeof(float));
        }
        double sep = 1e9, grp = 1e9;
        for (int r = 0; r < REPS; r++) {
            uint64_t t0 = hearth_now_ns();
            for (int i = 0; i < 3; i++)
                hearth_cpu_matmul(two, HEARTH_Q8_0, qkv[i].W, qkv[i].w_row_bytes, N, K, x, K, M, qkv[i].Y, N);
            uint64_t t1 = hearth_now_ns();
            hearth_cpu_matmul_group(two, qkv, 3, K, x, K, M);
            uint64_t t2 = hearth_now_ns();
            sep = (double)(t1 - t0) / 1e3 < sep ? (double)(t1 - t0) / 1e3 : sep;
            grp = (double)(t2 - t1) / 1e3 < grp ? (double)(t2 - t1) / 1e3 : grp;
        }
        printf("# q8_0 q,k,v 3 x %dx%d, M=%d, %d threads: 3 calls %.1f us, 1 group call %.1f us\n", N, K, M,
               hearth_pool_size(two), sep, grp);
        for (int i = 0; i < 3; i++)
            free((void *)qkv[i].W), free(qkv[i].Y);
        free(x);
        hearth_pool_free(two);
    }
    const hearth_dtype mv[] = {HEARTH_Q8_0, HEARTH_Q4_0, HEARTH_Q4_K, HEARTH_Q6_K, HEARTH_F16};
    for (size_t i = 0; i < sizeof mv / sizeof mv[0]; i++) {
        int64_t N = 4096, K = 4096;
        size_t rb;
        void *w = make_weights(mv[i], N, K, &rb);
        float *x = malloc((size_t)K * sizeof *x), *y = malloc((size_t)N * sizeof *y);
        for (int64_t k = 0; k < K; k++)
            x[k] = frand();
        double s = seconds_of_best(20, pool, mv[i], w, rb, N, K, x, 1, y);
        printf("# %s mat-vec %lldx%lld, M=1: %.1f GB/s of weights (%.2f ms)\n", hearth_dtype_get(mv[i])->name,
               (long long)N, (long long)K, (double)rb * N / s / 1e9, s * 1e3);
        free(w), free(x), free(y);
    }
    hearth_pool_free(pool);
}

int main(void)
{
    RUN(vec_dots_match_oracle);
    RUN(matmul_matches_oracle);
    RUN(gemm_paths_match_oracle);
    RUN(multi_row_dots_match_oracle);
    RUN(group_matches_separate_calls);
    RUN(prepacked_matches_plain_calls);
    RUN(prepacked_group_matches_single_calls);
    RUN(f16_tiles_match_f32_tiles);
    RUN(tiles_fetch_ahead);
    RUN(bad_arguments_are_rejected);
    RUN(bad_group_arguments_are_rejected);
    RUN(scratch_is_reused_and_bounded);
    print_speed();
    TEST_EXIT();
}

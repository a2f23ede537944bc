/* matmul.c: the matmul driver: argument checks, the choice of kernels (once),
 * the choice of path per call, threading over N, and the packing of weight
 * tiles.
 *
 * Three paths, picked per call from the weight type, M and the ISA table:
 *   - row dots (small M: decode, and short batches): task = a range of W
 *     rows; each row is read from memory once and dotted with all M rows of
 *     X (the X rows stay in cache). Quantized types dot against X quantized
 *     to q8a once per call (or, where the ISA has qv_dot, the same values in
 *     planar form), so the loop is integer multiply-adds on stored blocks;
 *     where the ISA has qv_dot2 (Q4_K), rows go two at a time, sharing X.
 *   - integer GEMM (M >= gemm_min_m, quantized types, where the ISA has
 *     one: AVX-512 VNNI): X quantized once, W unpacked slice by slice into
 *     int8 panels; see qgemm_avx512.c.
 *   - packed f32 GEMM (M >= gemm_min_m otherwise): task = a range of W rows;
 *     for each KC-deep slice those rows are converted (f16/bf16 widened,
 *     quantized blocks dequantized, by the ISA's vector code) and transposed
 *     into packed f32 panels of KC x NR floats that fit in L2 (f32/f16/bf16
 *     by one ISA call for the task's rows, which prefetches ahead), then
 *     every MR-row strip of X is run against every panel with the ISA's
 *     register-blocked tile. Conversion is paid once per W element per call,
 *     amortized over M rows. Buffers are per-thread scratch (scratch.h).
 * KC = 256 is a multiple of every block size, so slices never split a block.
 * Prepacked weights (hearth_cpu_prepack) hold those panels for the whole W,
 * made once. F16 weights, where the ISA has an f16 tile, are held as f16
 * panels (the same bytes re-laid out) and every call runs the tiles on them,
 * decode too, so W is not read again; other types get f32 panels, used
 * from the GEMM's first row count (gemm_min_m) up, with the row dots on W
 * below it.
 *
 * A group call (several weights, one X) goes to rowdot_multi.c as one job
 * when every weight would take its multi-row path on the same form of X;
 * otherwise it is one call per weight. Not done: a grouped GEMM (prefill:
 * X is quantized in parallel there, and a job's few us of start and tail
 * are small against a GEMM's work; not measured).
 *
 * Rejected: a full f32 copy of quantized weights (4-8x the memory, and the
 * whole point of the quantized formats is to read fewer bytes); threading
 * over M (decode has M = 1, and splitting N keeps each weight row read by
 * exactly one thread); packing X too (the tile reads its 8 X rows
 * sequentially and they stay in L1; not measured); turning the roles round
 * for f32/f16/bf16 weights, X^T packed as the vector side and W broadcast
 * from its rows, so W is never transposed (tried on the Zen 5 with a 48 x 8
 * tile over the whole K: slower at every shape measured, e.g. f16 128 x 768
 * x 768 with W streamed from memory 292-297 GFLOP/s against 371-377, f32 at
 * MiniLM's shapes 222-314 against 313-353: the X^T panel streams from L2
 * while the packed tile keeps both operands in L1). */
#include "engine/cpu/matmul.h"
#include "engine/cpu/matmul_impl.h"
#include "engine/cpu/panel_mem.h"
#include "engine/cpu/rowdot_multi.h"
#include "engine/cpu/scratch.h"

#include "base/hw.h"
#include "base/err.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define KC HEARTH_GEMM_KC
/* W rows per GEMM task at most: a 256 x KC panel is 256 KiB, within L2. */
#define GEMM_CHUNK_MAX 256

static int64_t ceil_div(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* M from which a GEMM beats row dots, per weight type. Measured on the
 * 2-core Zen 4 (shared with other jobs, best of 15) at N = K = 2048, ms per
 * call, AVX-512, 2 threads, row dots vs GEMM:
 *   f32 (earlier): 0.49 per X row vs 5.3 at M=16
 *   f16:  M=16 4.6 vs 7.2,  M=32 14.6 vs 4.6
 *   bf16: M=16 3.4 vs 3.1,  M=32 8.8 vs 4.6
 *   q8_0: M=8 2.0 vs 1.9,   M=16 1.6 vs 1.1 (integer GEMM)
 *   q4_0: M=16 4.0 vs 2.5;  q4_k: M=16 2.5 vs 3.0, M=32 9.1 vs 3.5;
 *   q6_k: M=16 2.8 vs 2.6
 * Row dots get slow past ~16 rows because the X rows no longer stay in L1
 * while a weight row streams past. */
static int64_t gemm_min_m(hearth_dtype t)
{
    return t == HEARTH_F32 ? 12 : t == HEARTH_F16 || t == HEARTH_BF16 ? 24 : 16;
}

const char *hearth_cpu_isa_name(hearth_cpu_isa isa)
{
    switch (isa) {
    case HEARTH_ISA_SCALAR: return "scalar";
    case HEARTH_ISA_AVX2: return "avx2";
    case HEARTH_ISA_AVX512: return "avx512";
    default: return "?";
    }
}

int hearth_cpu_isa_available(hearth_cpu_isa isa)
{
    const hearth_hw_info *c = hearth_hw();
    switch (isa) {
    case HEARTH_ISA_SCALAR: return 1;
    case HEARTH_ISA_AVX2: return c->avx2 && c->fma && c->f16c;
    case HEARTH_ISA_AVX512:
        return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq && c->avx512_vnni && c->avx2 && c->fma &&
               c->f16c;
    default: return 0;
    }
}

static hearth_cpu_isa g_isa;
static pthread_once_t g_isa_once = PTHREAD_ONCE_INIT;

static void pick_isa(void)
{
    g_isa = hearth_cpu_isa_available(HEARTH_ISA_AVX512) ? HEARTH_ISA_AVX512
            : hearth_cpu_isa_available(HEARTH_ISA_AVX2) ? HEARTH_ISA_AVX2
                                                         : HEARTH_ISA_SCALAR;
}

hearth_cpu_isa hearth_cpu_matmul_isa(void)
{
    pthread_once(&g_isa_once, pick_isa);
    return g_isa;
}

static const hearth_cpu_kernels *kernels_of(hearth_cpu_isa isa)
{
    switch (isa) {
    case HEARTH_ISA_AVX2: return &hearth_cpu_kernels_avx2;
    case HEARTH_ISA_AVX512: return &hearth_cpu_kernels_avx512;
    default: return &hearth_cpu_kernels_scalar;
    }
}

struct hearth_cpu_prepacked {
    hearth_cpu_isa isa;
    hearth_dtype wt;
    const void *W; /* for the row dots of short batches (M < gemm_min_m); NULL with panels16 */
    size_t w_row_bytes;
    int64_t N, K, n_pad;
    /* slice s (KC deep, the last kc) at s * KC * n_pad: n_pad / nr panels of [kc][nr]; one of: */
    float *panels;      /* f32 */
    uint16_t *panels16; /* F16 weights' own values (the ISA has gemm_tile_f16) */
    const struct hearth_cpu_prepacked *next; /* hearth_cpu_prepack_chain's hint, or NULL */
};

typedef struct job {
    const hearth_cpu_kernels *kt;
    hearth_vec_dot_fn dot;
    hearth_dtype wt;
    const char *W;
    size_t w_row_bytes;
    int64_t N, K, M, ldx, ldy, chunk;
    const float *X;
    const hearth_block_q8a *xq; /* M rows of K / 32 blocks, or NULL: dot with X */
    hearth_qx qx;               /* X for the integer GEMM */
    hearth_qv qv;               /* X for qv_dot, when q is set */
    hearth_qv_dot_fn qv_dot;
    hearth_qv_dot2_fn qv_dot2; /* or NULL */
    float *Y;
    const float *prepacked; /* the whole W in panels (hearth_cpu_prepack), or NULL: pack per call */
    const uint16_t *prepacked16; /* or the whole F16 W in f16 panels */
    int64_t n_pad;          /* N rounded up to nr: the prepacked slices' width */
    const hearth_cpu_prepacked *next; /* the weight chained after this one, or NULL */
    int threads;                      /* the pool's: fetching ahead across tasks needs one */
    size_t block_bytes;
    int64_t block;
    _Atomic int failed;
} job;

static void rowdot_task(void *ctx, int64_t t, int64_t n_tasks)
{
    job *j = ctx;
    int64_t n0 = t * j->chunk, n1 = n0 + j->chunk < j->N ? n0 + j->chunk : j->N;
    if (j->qv_dot2) {
        for (; n0 + 1 < n1; n0 += 2) {
            const char *w = j->W + (size_t)n0 * j->w_row_bytes;
            for (int64_t m = 0; m < j->M; m++) {
                float out[2];
                j->qv_dot2(w, w + j->w_row_bytes, j->qv.q + m * j->K, j->qv.d + m * (j->K / 32),
                           j->qv.s16 + m * (j->K / 16), j->K, out);
                j->Y[m * j->ldy + n0] = out[0];
                j->Y[m * j->ldy + n0 + 1] = out[1];
            }
        }
    }
    for (int64_t n = n0; n < n1; n++) {
        const char *w = j->W + (size_t)n * j->w_row_bytes;
        if (j->qv.q) {
            for (int64_t m = 0; m < j->M; m++)
                j->Y[m * j->ldy + n] = j->qv_dot(w, j->qv.q + m * j->K, j->qv.d + m * (j->K / 32),
                                                 j->qv.s16 + m * (j->K / 16), j->K);
            continue;
        }
        for (int64_t m = 0; m < j->M; m++) {
            const void *x = j->xq ? (const void *)(j->xq + m * (j->K / 32)) : (const void *)(j->X + m * j->ldx);
            j->Y[m * j->ldy + n] = j->dot(w, x, j->K);
        }
    }
}

/* hearth_pack_fn in portable C, for nr-row panels. */
static void pack_scalar(const void *const *rows_v, int n_rows, int64_t kc, float *panel, int nr)
{
    const float *const *rows = (const float *const *)rows_v;
    for (int j = 0; j < nr; j++)
        for (int64_t k = 0; k < kc; k++)
            panel[k * nr + j] = j < n_rows ? rows[j][k] : 0.0f;
}

/* W rows [n0, n1), columns [k0, k0 + kc) into panels of nr_max rows, each
 * [kc][nr_max], zero past n1. Types the ISA packs straight from W go in one
 * call for all rows (so its prefetching runs ahead across panels); the
 * others are converted row by row into tmp (nr_max rows of KC floats),
 * then transposed a panel at a time. */
/* Pointers to W rows [n0, n1) at element k0 (a block boundary). */
static void slice_rows(const job *j, int64_t n0, int64_t n1, int64_t k0, const void **rows)
{
    size_t off = (size_t)(k0 / j->block) * j->block_bytes;
    for (int64_t n = n0; n < n1; n++)
        rows[n - n0] = j->W + (size_t)n * j->w_row_bytes + off;
}

static void pack(const job *j, int64_t n0, int64_t n1, int64_t k0, int64_t kc, float *panels, float *tmp)
{
    const int nr = j->kt->nr_max;
    size_t off = (size_t)(k0 / j->block) * j->block_bytes;
    hearth_to_f32_fn to_f32 = j->kt->to_f32[j->wt];
    hearth_pack_fn raw = j->kt->pack_raw[j->wt];
    const void *rows[GEMM_CHUNK_MAX];
    if (raw) {
        slice_rows(j, n0, n1, k0, rows);
        raw(rows, (int)(n1 - n0), kc, panels);
        return;
    }
    for (int64_t p0 = n0; p0 < n1; p0 += nr) {
        int n_rows = n1 - p0 < nr ? (int)(n1 - p0) : nr;
        for (int r = 0; r < n_rows; r++) {
            const char *src = j->W + (size_t)(p0 + r) * j->w_row_bytes + off;
            if (j->wt == HEARTH_F32) {
                rows[r] = src;
                continue;
            }
            if (to_f32)
                to_f32(src, tmp + r * KC, kc);
            else
                hearth_quant_dequantize_row(j->wt, src, tmp + r * KC, kc);
            rows[r] = tmp + r * KC;
        }
        float *panel = panels + (p0 - n0) / nr * kc * nr;
        if (j->kt->pack_panel)
            j->kt->pack_panel(rows, n_rows, kc, panel);
        else
            pack_scalar(rows, n_rows, kc, panel, nr);
    }
}

/* Rows of the strip that starts with left rows to go: mr, except that the
 * last two strips share their rows evenly where the last would have 1-3.
 * A tile of fewer than 4 rows has fewer independent FMA chains than the
 * two FMA pipes' latency needs (2 per row), so it costs what 4 rows cost:
 * 8 + 1 rows as 5 + 4 cost 9 row-times instead of 12. The same sums either
 * way (each row's are its own). Served MiniLM at 1 sentence per request
 * (passes of any row count), 8 connections, 12 interleaved rounds on the
 * Zen 5: +2.1% sentences/s (10 rounds of 12 faster). */
static int strip_rows(int64_t left, int mr)
{
    if (left > mr && left < mr + 4)
        return (int)((left + 1) / 2);
    return left < mr ? (int)left : mr;
}

/* One KC slice of a task: every MR-row strip of X against every panel. The
 * lines of ahead (NULL: none) are shared out evenly over the tiles, each
 * taking at most kc, what one leaves going to the next. */
static void gemm_slice(const job *j, int64_t n0, int64_t n1, int64_t k0, int64_t kc, const float *panels,
                       const uint16_t *panels16, hearth_gemm_ahead *ahead)
{
    const hearth_cpu_kernels *kt = j->kt;
    const int nr = kt->nr_max, mr = kt->mr_max;
    int64_t n_panels = (n1 - n0 + nr - 1) / nr;
    int64_t left = ahead ? ahead->lines : 0, quota = ceil_div(left, ceil_div(j->M, mr) * n_panels);
    int rows;
    for (int64_t m0 = 0; m0 < j->M; m0 += rows) {
        rows = strip_rows(j->M - m0, mr);
        for (int64_t p = 0; p < n_panels; p++) {
            int64_t nc = n0 + p * nr;
            int cols = n1 - nc < nr ? (int)(n1 - nc) : nr;
            const float *x = j->X + m0 * j->ldx + k0;
            float *y = j->Y + m0 * j->ldy + nc;
            if (ahead) {
                ahead->lines = quota < left ? quota : left;
                left -= ahead->lines;
            }
            if (panels16)
                kt->gemm_tile_f16(x, j->ldx, panels16 + p * kc * nr, kc, y, j->ldy, rows, cols, k0 > 0, ahead);
            else
                kt->gemm_tile(x, j->ldx, panels + p * kc * nr, kc, y, j->ldy, rows, cols, k0 > 0, ahead);
            if (ahead)
                left += ahead->lines; /* what the tile did not take */
        }
    }
}

/* Prepacked f32 panels are used at every M from gemm_min_m, and from
 * PANEL_COPY_MIN_M rows a task first copies its panels of a slice into L2
 * (memcpy streams them with more loads in flight than the first X strip's
 * tiles do; the other strips then read them from L2). Measured on the Zen 5
 * with MiniLM (2026-12-01, RESULTS.md), against packing W per call from 64
 * rows as before:
 *   - served, `hearth serve` + wrk 8 connections, 4 interleaved rounds:
 *     1 sentence per request (batches of ~80 rows) 638 -> 693 sentences/s
 *     (panels; the copy does not apply), 8 per request (~750 rows) 699 ->
 *     773 (panels) -> 791 (panels + copy), every round in that order;
 *   - the forward pass alone (`hearth embed --bench`, medians of 5-6
 *     rounds): panels without the copy lose at 404 rows (1054 -> 998), with
 *     it they gain (1068); copying from 48 rows cost 6% served at ~80 rows,
 *     and copying always cost 9% at batch 1 (13 rows);
 *   - copying F16 panels (llama pp128) lost 1-8%: not done for them.
 * Packing per call served worse than it benches alone: it reads W through
 * 4 KiB pages of the mapping, the panels are in huge pages (a guess at the
 * cause, not measured). */
#define PANEL_COPY_MIN_M 128

/* W rows per f32 GEMM task: at least two tasks per thread so an uneven last
 * chunk is absorbed, whole panels of nr, at most GEMM_CHUNK_MAX. */
static int64_t gemm_chunk(int64_t N, int64_t nr, int64_t threads)
{
    int64_t chunk = ceil_div(ceil_div(N, 2 * threads), nr) * nr;
    return chunk > GEMM_CHUNK_MAX ? GEMM_CHUNK_MAX : chunk;
}

/* Fetching ahead. A slice's first X strip reads its panels from memory, and
 * at small M the hardware prefetcher does not keep up: one thread on the
 * Zen 5, MiniLM's 36 GEMMs at 41 rows ran at 125-148 GFLOP/s with the
 * weights coming from memory, ~185 with one layer's weights hot in L2. So,
 * on f32 panels read in place (under PANEL_COPY_MIN_M rows; the copy
 * streams its slice itself), the tiles of a slice prefetch into L2 the
 * panels read next, one 64-byte line per k step, the lines spread evenly
 * over the slice's tiles: the task's next slice; after its last slice, on a
 * one-thread pool (tasks run in order on this thread), the next task's
 * first slice; after the last task, the first slice of the first task of
 * the weight chained next (hearth_cpu_prepack_chain: the caller's next
 * matmul). With several threads only the next slice: which task a thread
 * runs next is not known (guessing lost 2-6% against the next slice alone
 * at 2 threads). Measured on the Zen 5 (2026-12-02, RESULTS.md):
 *   - a throwaway driver, the 36 GEMMs back to back, A/B interleaved in one
 *     process, one thread: 13 rows +29%, 41 rows +18%, 101 rows +8%; the
 *     next slice alone +2-14%;
 *   - `hearth embed --bench -t 1`, two processes at once (as two served
 *     engines), 10 interleaved rounds: batch 1 +6.4% (10 of 10), batch 8
 *     +3.2%, batch 32 (copy path) -1.5% (before the tiles that fetch
 *     ahead had functions of their own, below);
 *   - served MiniLM, 8 connections, 12 rounds: 1 sentence per request
 *     +5.2%, 8 per request -0.6%.
 * Tried: all of a slice's lines in its first tiles, as L1 prefetches (+2%
 * served at 1 per request; -3% at 8, the lines evicting the tile's panel
 * from L1), a burst of prefetches before each tile instead of one per k
 * step (0-10% in the driver against 10-29%), and a test per step in every
 * tile (6% lost at 404 rows with 2 threads, where nothing is fetched ahead:
 * the ISA picks a tile of its own when there are lines to fetch). F16
 * panels do not fetch ahead: llama pp128 showed no gain (as a next-slice
 * prefetch for them before, see panels_f16). */
static hearth_gemm_ahead ahead_of(const job *j, int64_t t, int64_t n_tasks, int64_t n0, int64_t width, int64_t k0)
{
    const int64_t nr = j->kt->nr_max;
    int64_t k1 = k0 + KC;
    if (k1 < j->K) { /* this task's next slice */
        int64_t kc1 = j->K - k1 < KC ? j->K - k1 : KC;
        return (hearth_gemm_ahead){(const char *)(j->prepacked + k1 * j->n_pad + n0 * kc1),
                                   width * kc1 * (int64_t)sizeof(float) / 64};
    }
    if (j->threads != 1)
        return (hearth_gemm_ahead){NULL, 0};
    int64_t kc0 = j->K < KC ? j->K : KC;
    if (t + 1 < n_tasks) { /* the next task's first slice */
        int64_t m0 = (t + 1) * j->chunk, m1 = m0 + j->chunk < j->N ? m0 + j->chunk : j->N;
        return (hearth_gemm_ahead){(const char *)(j->prepacked + m0 * kc0),
                                   ceil_div(m1 - m0, nr) * nr * kc0 * (int64_t)sizeof(float) / 64};
    }
    const hearth_cpu_prepacked *nx = j->next;
    if (!nx || !nx->panels) /* the chained weight's first task's first slice */
        return (hearth_gemm_ahead){NULL, 0};
    int64_t nkc = nx->K < KC ? nx->K : KC, rows = gemm_chunk(nx->N, nr, 1);
    rows = rows < nx->n_pad ? rows : nx->n_pad;
    return (hearth_gemm_ahead){(const char *)nx->panels, rows * nkc * (int64_t)sizeof(float) / 64};
}

static void gemm_task(void *ctx, int64_t t, int64_t n_tasks)
{
    job *j = ctx;
    const int nr = j->kt->nr_max;
    int64_t n0 = t * j->chunk, n1 = n0 + j->chunk < j->N ? n0 + j->chunk : j->N;
    if (j->prepacked || j->prepacked16) {
        /* from PANEL_COPY_MIN_M rows, a task copies its f32 panels of each
         * slice (one run of width * kc floats) into L2 before the tiles;
         * without the scratch they are read in place, to the same result */
        int64_t width = ceil_div(n1 - n0, nr) * nr;
        float *copy = j->prepacked && j->M >= PANEL_COPY_MIN_M
                          ? hearth_cpu_scratch(HEARTH_SCRATCH_TASK, (size_t)width * KC * sizeof(float))
                          : NULL;
        /* slice k0 starts at k0 * n_pad; within it, panel n0 / nr at n0 * kc */
        for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
            int64_t kc = j->K - k0 < KC ? j->K - k0 : KC, at = k0 * j->n_pad + n0 * kc;
            const float *p32 = j->prepacked ? j->prepacked + at : NULL;
            if (copy) {
                memcpy(copy, p32, (size_t)(width * kc) * sizeof(float));
                p32 = copy;
            }
            /* f32 panels read in place fetch ahead (the copy streams a slice at its start) */
            hearth_gemm_ahead ahead = {NULL, 0};
            if (j->prepacked && !copy)
                ahead = ahead_of(j, t, n_tasks, n0, width, k0);
            gemm_slice(j, n0, n1, k0, kc, p32, j->prepacked16 ? j->prepacked16 + at : NULL, &ahead);
        }
        return;
    }
    int64_t n_panels = (n1 - n0 + nr - 1) / nr;
    size_t panel_bytes = (size_t)n_panels * nr * KC * sizeof(float);
    float *panels = hearth_cpu_scratch(HEARTH_SCRATCH_TASK, panel_bytes + (size_t)nr * KC * sizeof(float));
    if (!panels) {
        atomic_store(&j->failed, 1);
        return;
    }
    float *tmp = panels + panel_bytes / sizeof(float);
    for (int64_t k0 = 0; k0 < j->K; k0 += KC) {
        int64_t kc = j->K - k0 < KC ? j->K - k0 : KC;
        pack(j, n0, n1, k0, kc, panels, tmp);
        gemm_slice(j, n0, n1, k0, kc, panels, NULL, NULL);
    }
}

static void qgemm_task(void *ctx, int64_t t, int64_t n_tasks)
{
    job *j = ctx;
    int64_t n0 = t * j->chunk, n1 = n0 + j->chunk < j->N ? n0 + j->chunk : j->N;
    if (j->kt->qgemm[j->wt](j->W, j->w_row_bytes, n0, n1, &j->qx, j->Y, j->ldy) != 0)
        atomic_store(&j->failed, 1);
}

static void qx_task(void *ctx, int64_t m, int64_t n_tasks)
{
    job *j = ctx;
    j->kt->qx_row(j->X + m * j->ldx, &j->qx, m);
}

/* X quantized once, then N split as for the f32 GEMM (the integer panels
 * are smaller, but the same chunk keeps the task count the same). */
static int run_qgemm(hearth_pool *pool, job *j, int threads)
{
    int64_t nb = j->K / 32;
    /* floats first: K is a multiple of 32, so the bytes after stay aligned */
    size_t fbytes = (size_t)j->M * (size_t)nb * 2 * sizeof(float);
    char *buf = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, fbytes + (size_t)j->M * (size_t)j->K);
    if (!buf)
        return HEARTH_ENOMEM;
    j->qx = (hearth_qx){.M = j->M, .K = j->K, .d = (float *)buf, .u = (uint8_t *)buf + fbytes};
    j->qx.s = j->qx.d + j->M * nb;
    hearth_pool_run(pool, qx_task, j, j->M);
    j->chunk = (j->N + 2 * threads - 1) / (2 * threads);
    j->chunk = (j->chunk + 31) / 32 * 32;
    if (j->chunk > GEMM_CHUNK_MAX)
        j->chunk = GEMM_CHUNK_MAX;
    hearth_pool_run(pool, qgemm_task, j, (j->N + j->chunk - 1) / j->chunk);
    return atomic_load(&j->failed) ? HEARTH_ENOMEM : 0;
}


static int isa_usable(hearth_cpu_isa isa)
{
    return isa >= 0 && isa < HEARTH_ISA_COUNT_ && hearth_cpu_isa_available(isa);
}

/* The argument checks of one output (matmul.h): 0 or HEARTH_EINVAL. With N
 * or M zero there is nothing to compute and the pointers may be NULL. */
static int check_out(const hearth_cpu_mm_out *o, int64_t K, const float *X, int64_t x_stride, int64_t M)
{
    size_t row_bytes;
    if (!hearth_dtype_get((uint32_t)o->wt) || o->N < 0 || M < 0 || !hearth_dtype_row_bytes(o->wt, K, &row_bytes) ||
        x_stride < K || o->y_stride < o->N || (o->N > 0 && row_bytes > o->w_row_bytes))
        return HEARTH_EINVAL;
    if (o->N > 0 && M > 0 && (!o->W || !X || !o->Y))
        return HEARTH_EINVAL;
    return 0;
}

int hearth_cpu_matmul_on(hearth_cpu_isa isa, hearth_pool *pool, hearth_dtype wt, const void *W, size_t w_row_bytes,
                         int64_t N, int64_t K, const float *X, int64_t x_stride, int64_t M, float *Y,
                         int64_t y_stride)
{
    if (!isa_usable(isa))
        return HEARTH_EUNSUPPORTED;
    const hearth_cpu_mm_out o = {.wt = wt, .W = W, .w_row_bytes = w_row_bytes, .N = N, .Y = Y,
                                 .y_stride = y_stride};
    int rc = check_out(&o, K, X, x_stride, M);
    if (rc)
        return rc;
    if (N == 0 || M == 0)
        return 0;
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)wt);
    if (K == 0) {
        for (int64_t m = 0; m < M; m++)
            memset(Y + m * y_stride, 0, (size_t)N * sizeof *Y);
        return 0;
    }
    job j = {
        .kt = kernels_of(isa), .wt = wt, .W = W, .w_row_bytes = w_row_bytes, .N = N, .K = K, .M = M,
        .ldx = x_stride, .ldy = y_stride, .X = X, .Y = Y, .block_bytes = info->block_bytes, .block = info->block,
    };
    j.dot = j.kt->vec_dot[wt] ? j.kt->vec_dot[wt] : hearth_quant_vec_dot_ref_fn(wt);
    int threads = hearth_pool_size(pool);
    /* batched decode: one W row against up to 8 X rows at once (rowdot_multi.c) */
    if (M < gemm_min_m(wt) && hearth_rowdot_multi_has(isa, wt, M))
        return hearth_rowdot_multi(isa, pool, wt, W, w_row_bytes, N, K, X, x_stride, M, Y, y_stride);
    if (M >= gemm_min_m(wt) && j.kt->qgemm[wt] && j.kt->qx_row)
        return run_qgemm(pool, &j, threads);
    if (M >= gemm_min_m(wt)) {
        j.chunk = gemm_chunk(N, j.kt->nr_max, threads);
        hearth_pool_run(pool, gemm_task, &j, ceil_div(N, j.chunk));
    } else {
        if (j.kt->qv_dot[wt] && j.kt->qv_row) {
            j.qv_dot = j.kt->qv_dot[wt];
            j.qv_dot2 = j.kt->qv_dot2[wt];
            size_t fbytes = (size_t)M * (size_t)(K / 32) * 3 * sizeof(float);
            char *buf = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, fbytes + (size_t)M * (size_t)K);
            if (!buf)
                return HEARTH_ENOMEM;
            j.qv = (hearth_qv){.M = M, .K = K, .d = (float *)buf, .q = (int8_t *)(buf + fbytes)};
            j.qv.s16 = j.qv.d + M * (K / 32);
            for (int64_t m = 0; m < M; m++)
                j.kt->qv_row(X + m * x_stride, &j.qv, m);
        } else if (hearth_quant_uses_q8a(wt)) {
            hearth_block_q8a *xq = hearth_cpu_scratch(HEARTH_SCRATCH_CALL, (size_t)M * (size_t)(K / 32) * sizeof *xq);
            if (!xq)
                return HEARTH_ENOMEM;
            for (int64_t m = 0; m < M; m++)
                hearth_quant_q8a_row(X + m * x_stride, xq + m * (K / 32), K);
            j.xq = xq;
        }
        /* ~8 tasks per thread: rows are cheap, balance matters more */
        j.chunk = ceil_div(N, 8 * (int64_t)threads);
        hearth_pool_run(pool, rowdot_task, &j, ceil_div(N, j.chunk));
    }
    return atomic_load(&j.failed) ? HEARTH_ENOMEM : 0;
}

/* F16 weights are held as f16 panels where the ISA has a tile for them: the
 * same bytes as the weights, so a model can drop its mapped copy, and every
 * M runs on them (decode included: a panel streams as one run of 64-byte
 * rows). Measured on the Zen 5, 2 threads:
 *   - the widening in registers costs the tile nothing measurable (one core,
 *     8 x 32 tile, 233 against 237 GFLOP/s on f32 panels);
 *   - 128 x N x K calls with W from memory, mean GFLOP/s over 290 calls,
 *     packing per call vs f16 panels, two runs: 768 x 768 321-330 vs
 *     332-353, 2048 x 768 310-315 vs 330-332; decode (M = 1, 4) the same
 *     within noise (GB/s 34-51 either way);
 *   - `hearth run --bench` on the 110M llama F16: pp128 1488-1512 -> 1724-1742
 *     tok/s in 3 interleaved pairs, tg64 the same (206-231 vs 209-226).
 * Skipping the packing with the old panels left hot in L2 (a test hack) gave
 * 385-397 at 768 x 768: the rest of that gap is reading the panels from
 * memory on the first strip. Prefetching the next slice's panels into L2
 * during the current one's tiles did not close it (no change in 3 shapes x
 * 2 runs); not kept. */
static bool panels_f16(const hearth_cpu_kernels *kt, hearth_dtype wt)
{
    return wt == HEARTH_F16 && kt->gemm_tile_f16 && kt->pack_f16_f16;
}

bool hearth_cpu_prepack_wanted(hearth_dtype wt)
{
    const hearth_cpu_kernels *kt = kernels_of(hearth_cpu_matmul_isa());
    return hearth_dtype_get((uint32_t)wt) && !(kt->qgemm[wt] && kt->qx_row);
}

bool hearth_cpu_prepack_replaces(hearth_dtype wt)
{
    return panels_f16(kernels_of(hearth_cpu_matmul_isa()), wt);
}

hearth_cpu_prepacked *hearth_cpu_prepack(hearth_dtype wt, const void *W, size_t w_row_bytes, int64_t N, int64_t K)
{
    hearth_cpu_isa isa = hearth_cpu_matmul_isa();
    const hearth_cpu_kernels *kt = kernels_of(isa);
    const hearth_cpu_mm_out o = {.wt = wt, .W = W, .w_row_bytes = w_row_bytes, .N = N, .Y = NULL, .y_stride = N};
    float probe = 0;
    if (N < 1 || K < 1 || check_out(&o, K, &probe, K, 0) != 0 || !hearth_cpu_prepack_wanted(wt))
        return NULL;
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)wt);
    int64_t nr = kt->nr_max, n_pad = ceil_div(N, nr) * nr;
    if (n_pad > (int64_t)(SIZE_MAX / sizeof(float) / 2) / K)
        return NULL;
    bool f16 = panels_f16(kt, wt);
    size_t elt = f16 ? sizeof(uint16_t) : sizeof(float);
    hearth_cpu_prepacked *pw = calloc(1, sizeof *pw);
    /* in huge pages shared with the other sets (panel_mem.h) */
    void *panels = pw ? hearth_cpu_panel_alloc((size_t)n_pad * (size_t)K * elt) : NULL;
    float *tmp = f16 ? NULL : malloc((size_t)nr * KC * sizeof(float));
    if (!pw || !panels || (!f16 && !tmp)) {
        free(tmp);
        hearth_cpu_panel_free(panels);
        free(pw);
        return NULL;
    }
    *pw = (hearth_cpu_prepacked){.isa = isa, .wt = wt, .W = f16 ? NULL : W, .w_row_bytes = w_row_bytes, .N = N,
                                 .K = K, .n_pad = n_pad, .panels = f16 ? NULL : panels,
                                 .panels16 = f16 ? panels : NULL};
    job j = {.kt = kt, .wt = wt, .W = W, .w_row_bytes = w_row_bytes, .N = N, .K = K,
             .block_bytes = info->block_bytes, .block = info->block};
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = K - k0 < KC ? K - k0 : KC;
        /* pack takes at most GEMM_CHUNK_MAX rows (a multiple of nr) at a time */
        for (int64_t n0 = 0; n0 < N; n0 += GEMM_CHUNK_MAX) {
            int64_t n1 = n0 + GEMM_CHUNK_MAX < N ? n0 + GEMM_CHUNK_MAX : N;
            if (!f16) {
                pack(&j, n0, n1, k0, kc, pw->panels + k0 * n_pad + n0 * kc, tmp);
                continue;
            }
            const void *rows[GEMM_CHUNK_MAX];
            slice_rows(&j, n0, n1, k0, rows);
            kt->pack_f16_f16(rows, (int)(n1 - n0), kc, pw->panels16 + k0 * n_pad + n0 * kc);
        }
    }
    free(tmp);
    return pw;
}

void hearth_cpu_prepacked_free(hearth_cpu_prepacked *pw)
{
    if (!pw)
        return;
    hearth_cpu_panel_free(pw->panels);
    hearth_cpu_panel_free(pw->panels16);
    free(pw);
}

void hearth_cpu_prepack_chain(hearth_cpu_prepacked *pw, const hearth_cpu_prepacked *next)
{
    if (pw)
        pw->next = next;
}

size_t hearth_cpu_prepacked_bytes(const hearth_cpu_prepacked *pw)
{
    if (!pw)
        return 0;
    return (size_t)pw->n_pad * (size_t)pw->K * (pw->panels16 ? sizeof(uint16_t) : sizeof(float));
}

bool hearth_cpu_prepacked_needs_weights(const hearth_cpu_prepacked *pw)
{
    return pw && pw->W;
}

/* Whether a call of M rows runs on the panels; f32 panels from gemm_min_m
 * rows, fewer take the row dots on W. */
static bool on_panels(const hearth_cpu_prepacked *pw, int64_t M)
{
    return pw->panels16 || M >= gemm_min_m(pw->wt);
}

static job panels_job(const hearth_cpu_prepacked *pw, const float *X, int64_t x_stride, int64_t M, float *Y,
                      int64_t y_stride, int threads)
{
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)pw->wt);
    job j = {
        .kt = kernels_of(pw->isa), .wt = pw->wt, .W = pw->W, .w_row_bytes = pw->w_row_bytes, .N = pw->N,
        .K = pw->K, .M = M, .ldx = x_stride, .ldy = y_stride, .X = X, .Y = Y, .prepacked = pw->panels,
        .prepacked16 = pw->panels16, .n_pad = pw->n_pad, .block_bytes = info->block_bytes, .block = info->block,
        .next = pw->next, .threads = threads,
    };
    j.chunk = gemm_chunk(pw->N, j.kt->nr_max, threads); /* as the packing path */
    return j;
}

static int check_prepacked(const hearth_cpu_prepacked *pw, const float *X, int64_t x_stride, int64_t M, float *Y,
                           int64_t y_stride)
{
    if (!pw)
        return HEARTH_EINVAL;
    /* W is not read here; any non-NULL pointer stands for it in the checks */
    const hearth_cpu_mm_out o = {.wt = pw->wt, .W = pw, .w_row_bytes = pw->w_row_bytes, .N = pw->N, .Y = Y,
                                 .y_stride = y_stride};
    return check_out(&o, pw->K, X, x_stride, M);
}

int hearth_cpu_matmul_prepacked(hearth_pool *pool, const hearth_cpu_prepacked *pw, const float *X, int64_t x_stride,
                                int64_t M, float *Y, int64_t y_stride)
{
    int rc = check_prepacked(pw, X, x_stride, M, Y, y_stride);
    if (rc)
        return rc;
    if (!on_panels(pw, M))
        return hearth_cpu_matmul_on(pw->isa, pool, pw->wt, pw->W, pw->w_row_bytes, pw->N, pw->K, X, x_stride, M, Y,
                                    y_stride);
    if (M == 0)
        return 0;
    job j = panels_job(pw, X, x_stride, M, Y, y_stride, hearth_pool_size(pool));
    hearth_pool_run(pool, gemm_task, &j, ceil_div(pw->N, j.chunk));
    return 0;
}

/* A group on panels: the tasks of every weight's job in one pool run. */
typedef struct group_job {
    job jobs[HEARTH_MM_GROUP_MAX];
    int64_t first[HEARTH_MM_GROUP_MAX + 1]; /* task index where each job starts */
} group_job;

static void group_task(void *ctx, int64_t t, int64_t n_tasks)
{
    group_job *g = ctx;
    int i = 0;
    while (t >= g->first[i + 1])
        i++;
    gemm_task(&g->jobs[i], t - g->first[i], g->first[i + 1] - g->first[i]);
}

int hearth_cpu_matmul_prepacked_group(hearth_pool *pool, const hearth_cpu_prepacked *const *pws, float *const *Ys,
                                      const int64_t *y_strides, int n, const float *X, int64_t x_stride, int64_t M)
{
    if (!pws || !Ys || !y_strides || n < 1 || n > HEARTH_MM_GROUP_MAX)
        return HEARTH_EINVAL;
    bool all_panels = true;
    for (int i = 0; i < n; i++) {
        int rc = check_prepacked(pws[i], X, x_stride, M, Ys[i], y_strides[i]);
        if (rc)
            return rc;
        if (pws[i]->K != pws[0]->K)
            return HEARTH_EINVAL;
        all_panels = all_panels && on_panels(pws[i], M);
    }
    if (!all_panels || M == 0) {
        for (int i = 0; i < n; i++) {
            int rc = hearth_cpu_matmul_prepacked(pool, pws[i], X, x_stride, M, Ys[i], y_strides[i]);
            if (rc)
                return rc;
        }
        return 0;
    }
    group_job g = {0};
    for (int i = 0; i < n; i++) {
        g.jobs[i] = panels_job(pws[i], X, x_stride, M, Ys[i], y_strides[i], hearth_pool_size(pool));
        g.first[i + 1] = g.first[i] + ceil_div(pws[i]->N, g.jobs[i].chunk);
    }
    hearth_pool_run(pool, group_task, &g, g.first[n]);
    return 0;
}

int hearth_cpu_matmul(hearth_pool *pool, hearth_dtype wt, const void *W, size_t w_row_bytes, int64_t N, int64_t K,
                      const float *X, int64_t x_stride, int64_t M, float *Y, int64_t y_stride)
{
    return hearth_cpu_matmul_on(hearth_cpu_matmul_isa(), pool, wt, W, w_row_bytes, N, K, X, x_stride, M, Y,
                                y_stride);
}

/* Whether every output takes the multi-row path and all read one form of X
 * (q8a values, or floats), so X can be prepared once for all of them. */
static int group_is_multi_row(hearth_cpu_isa isa, const hearth_cpu_mm_out *outs, int n, int64_t K, int64_t M)
{
    if (M == 0 || K == 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (M >= gemm_min_m(outs[i].wt) || !hearth_rowdot_multi_has(isa, outs[i].wt, M) ||
            hearth_quant_uses_q8a(outs[i].wt) != hearth_quant_uses_q8a(outs[0].wt))
            return 0;
    return 1;
}

int hearth_cpu_matmul_group_on(hearth_cpu_isa isa, hearth_pool *pool, const hearth_cpu_mm_out *outs, int n,
                               int64_t K, const float *X, int64_t x_stride, int64_t M)
{
    if (!isa_usable(isa))
        return HEARTH_EUNSUPPORTED;
    if (!outs || n < 1 || n > HEARTH_MM_GROUP_MAX)
        return HEARTH_EINVAL;
    for (int i = 0; i < n; i++) {
        int rc = check_out(&outs[i], K, X, x_stride, M);
        if (rc)
            return rc;
    }
    if (group_is_multi_row(isa, outs, n, K, M))
        return hearth_rowdot_multi_group(isa, pool, outs, n, K, X, x_stride, M);
    /* one call per output: each prepares its own X (GEMM paths, mixed X forms) */
    for (int i = 0; i < n; i++) {
        const hearth_cpu_mm_out *o = &outs[i];
        int rc = hearth_cpu_matmul_on(isa, pool, o->wt, o->W, o->w_row_bytes, o->N, K, X, x_stride, M, o->Y,
                                      o->y_stride);
        if (rc)
            return rc;
    }
    return 0;
}

int hearth_cpu_matmul_group(hearth_pool *pool, const hearth_cpu_mm_out *outs, int n, int64_t K, const float *X,
                            int64_t x_stride, int64_t M)
{
    return hearth_cpu_matmul_group_on(hearth_cpu_matmul_isa(), pool, outs, n, K, X, x_stride, M);
}

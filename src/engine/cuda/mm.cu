/* mm.cu: the CUDA backend's weights: placement, matmul and embedding rows.
 *
 * Placement re-lays each GGUF block type out as split arrays (scales apart
 * from quants, see mm_kernels.cuh's mview) so every lane reads its quants
 * with 16-byte loads, 16-byte aligned; F32/F16/BF16 rows are padded to 16
 * elements with zeros. Bytes held: what the file holds (Q8_0 1.0625, Q4_0
 * 0.5625, Q4_K 0.5781 (its scales decoded to a byte each), Q6_K 0.8203
 * bytes an element), never an f16 copy.
 *
 * matmul, M <= MV_MAX_M (8): the mat-vec, one launch per weight: a warp per
 * output row reads each weight byte once for all M rows of X (staged in
 * shared memory, up to 48 KiB), fp32 sums, shuffle reduction. When X fits
 * (M K <= 12288 floats, most decode shapes) a grid of 4 blocks per SM stages
 * it once per block and walks the rows; else X is restaged per chunk.
 * Bytes moved at M = 1: N K b (weight, b bytes an element) + 4 N (Y) from
 * HBM, plus 4 K (X) per block from L2 (<= 4 x 132 blocks). Every element
 * also costs 4 M bytes of shared-memory reads: at M >= 4 that, not HBM, is
 * the limit (each X value is read once per weight row).
 *
 * Measured on the H200 (M = 1, 50 back-to-back launches, no graph, so a few
 * microseconds of launch gap are in each): 32000 x 2048: F32 3.9 TB/s,
 * F16/BF16 3.6, Q8_0 2.1-2.4, Q6_K 1.5, Q4_0 1.4, Q4_K 1.0; 2048 x 8192 and
 * 8192 x 2048 take 9-12 us whatever the type (a latency floor, not bytes):
 * short of the 85% goal for every quantized type.
 *
 * matmul, M > 8: GEMM on tensor cores through cuBLAS, opened at run time
 * (dlopen, so the binary starts without it): X rounded to f16 (bf16 for BF16
 * weights) in the context's workspace, F16/BF16 weights read in place, other
 * types dequantized to f16 in column tiles of at most 64 MiB right before
 * their GEMM; f32 out. cuBLAS gets its own 32 MiB slice of the workspace
 * (capture-safe). Without cuBLAS: the mat-vec over X in groups of 8 rows
 * (fp32, dequantizing in the kernel; the weight is read M/8 times).
 *
 * Since the grouped kernels (mm_mma.cuh; their H200 figures are in
 * bench/RESULTS.md): cu_matmul launches once per group of weights of one type and width
 * over their concatenated rows (Q,K,V: one launch; gate,up: one). Dispatch:
 * M = 1: mvg_kernel (the mat-vec above, grouped; fp32). 2 <= M <= 32
 * (HEARTH_CUDA_MM_MMA_MAX, up to 64): mma_kernel on tensor cores for every
 * type but F32 (F32 weights take the per-weight path of before: the grouped
 * F32 mat-vec wrote wrong rows on the H200 and is not used), each weight byte read once per call, dequantized in registers
 * to f16 (bf16 for BF16), X rounded to f16/bf16 as staged in shared memory
 * (caps.matmul_round 2^-8 covers both roundings); fragment mapping in
 * mm_mma.cuh's header. M > 64: cuBLAS as below. HEARTH_CUDA_MM=legacy:
 * the dispatch before these (one mat-vec launch per weight, cuBLAS past 8).
 * Bytes of mma_kernel per call: N K b of weight from HBM once, plus M K 4
 * of X from L2 per block of 32 WN rows (WN = 1, 2, 4, 8 for M <= 8, 16, 32,
 * 64), plus 4 M N of Y. A row's result does not depend on the group.
 *
 * Decode (M = 1), since 2026-12-03: mvp_kernel (mm_mma.cuh) where X fits
 * one chunk (every shape of the 1B llama): mvg_kernel's arithmetic with
 * the next batch of weight loads issued before the current batch is
 * multiplied, across row ends too (mvg_kernel issues a row's loads only
 * after the previous row's sum, so each of a warp's rows paid a full HBM
 * round trip with nothing in flight); HEARTH_CUDA_MV=grouped selects
 * mvg_kernel. Both mat-vecs launch as programmatic dependents (cuda_int.h;
 * HEARTH_CUDA_PDL=0 turns that off): their first weight loads go out while
 * the kernel before them ends, and the row ops and attention let them start
 * at their own start (and, in a step of one row, launch as dependents
 * themselves: cuda_int.h's cu_pdl_rows). The X chunk is sized to the rows (8 KiB for K = 2048,
 * not 48), leaving the rest of the SM's 256 KiB to L1. On the H200, 1.04B
 * llama, tg128 tok/s (F16 / Q8_0 / Q4_K, two runs each, bench/RESULTS.md):
 * mvg_kernel without PDL 802-806 / 930-932 / 857-865; with PDL 888-889 /
 * 1011-1021 / 897-898; mvp_kernel with PDL 917-921 / 1029-1045 / 915-935.
 * matmul_fused, first as prologues (RMSNORM or SWIGLU folded into X's
 * staging, the residual add into the store) measured slower, 829-843 /
 * 933-942 / 844-857: each block redid the norm's sum or SwiGLU's expf over
 * X after the PDL wait, on the critical path, where the separate small
 * kernels overlap the mat-vec's first weight loads. So since 2026-12-03
 * (stop 28) the fusions are epilogues of mvp_kernel, where nothing is
 * redone: ADD (the residual) adds the row's sum to Y, SWIGLU walks gate
 * and up row p back to back in one warp and stores silu(gate) * up; eight
 * launches a layer where the ops apart take ten. tg128 (two runs each, one
 * lease; HEARTH_CUDA_FUSE=0 the ops apart): F16 972-977 against 932-945,
 * Q8_0 1,052-1,098 against 1,028-1,035, Q4_K 966-972 against 904-944.
 * mvg_kernel's norm prologue stays behind HEARTH_CUDA_FUSE=norm
 * (cuda_int.h); since stop 32 mvp_kernel folds the norm in (below).
 *
 * For Q8_0, Q4_0 and Q4_K, mvp_kernel stages X as q8a blocks (int8 and a
 * scale per 32, the CPU's rounding; mm_mma.cuh) and multiplies the raw
 * quants with dp4a: the float path spent 12.7 instructions a Q4_K weight.
 * tg128 (two runs each, one lease; HEARTH_CUDA_MV_Q8=0 the float path):
 * Q8_0 1,295-1,358 against 1,216-1,228, Q4_K 1,258-1,260 against
 * 1,037-1,074.
 *
 * Tried and dropped (stop 28, H200, tg128 two runs each): F16 rows read
 * so that each load instruction of a warp covers 512 contiguous bytes (a
 * lane's 16 elements as two runs of 8, 512 bytes apart; ncu had counted 29
 * sectors a request and an L1 hit rate of 50% for tr_half's 32 bytes a
 * lane): 900-904 tok/s against 972-977, so the second half of each sector
 * served from L1 costs less than what the spread-out loads lose.
 *
 * Stop 29 (2026-12-03), each measured on the H200 against its switch in
 * one lease (1.04B llama; bench/RESULTS.md):
 * - Prompts of quantized weights: the tiles for cuBLAS are dequantized by
 *   deq_run_kernel (a block's units decoded into shared memory, then
 *   written as one contiguous run; HEARTH_CUDA_DEQ=plain the old per-unit
 *   stores, 0.6 TB/s, 40% of a Q4_K prompt pass by ncu) and X is rounded
 *   four floats a thread: pp512 Q8_0 67-68k against 52-56k tok/s, Q4_K
 *   61-67k against 48k.
 * - mma_kernel splits K over blocks (grid.y) when its rows give fewer than
 *   two blocks an SM, the splits' sums added in split order by
 *   mma_reduce_kernel (HEARTH_CUDA_MMA_SPLIT=0 off): batched Q4_K decode,
 *   4 sequences 2,387 against 2,259 tok/s, 16: 5,961 against 4,614.
 * - mvp_kernel gives a row of at most 16 UNR units half a warp (LW = 16;
 *   HEARTH_CUDA_MV_HALF=0 off): tg128 Q4_K 1,305-1,311 against
 *   1,215-1,233, Q4_0 1,595 against 1,446-1,486 (Q8_0's 2,048-wide rows
 *   are 128 units: whole warps, unchanged).
 * - mvp_kernel takes 2 rows of X (Q8_0 up to 4; HEARTH_CUDA_MVP_ROWS=0 off):
 *   mvp_rows_mt has the figures; at 8 and 16 rows the tensor cores win.
 *
 * Stop 31 (2026-12-06; the lease gave an H100, so these figures compare
 * with each other, not with the H200's above): batched steps (2 to
 * HEARTH_CUDA_MM_MMA_MAX rows) take the epilogues too, in mma_kernel's
 * stores (SWIGLU pairs a warp's two tiles: gate tile p and up tile p) or
 * in mma_reduce_kernel where K is split, and in mvp_kernel's rows of X
 * (caps.fused_rows_max; HEARTH_CUDA_FUSE_ROWS=0 one row only): two
 * launches a layer fewer. mma_kernel and mma_reduce_kernel launch as
 * programmatic dependents, mma_kernel's first weight loads issued before
 * its wait (HEARTH_CUDA_PDL_MMA=0 off). 1.04B llama, tok/s summed, two
 * runs each: Q4_K 4 sequences 2,641 / 2,650 with both, 2,584 / 2,614
 * without the epilogues, 2,556 / 2,564 without PDL; 16 sequences 6,719 /
 * 6,743, 6,463 / 6,529, 6,286 / 6,395; F16 4 sequences 2,379, 2,353,
 * 2,089.
 *
 * Stop 32 (2026-12-06, H100): the RMS norm before the QKV and gate/up
 * mat-vecs (M = 1) is folded into mvp_kernel's staging of X again, now
 * that mvp_kernel issues its first weight loads before its PDL wait: each
 * block sums X's squares itself (mm_mma.cuh's mvp_rms_inv; 8 KiB from L2
 * for the 1.04B) and stages x * inv * w, two launches a layer fewer (six).
 * ncu had put the one-block rmsnorm_kernel at 4.0-4.4 us a launch alone.
 * tg128 tok/s, one lease, two runs each (HEARTH_CUDA_FUSE_NORM=0 the norm
 * apart; "before" the binary of the commit before): F16 945 / 932 against
 * 892 / 894 (before 895 / 895), Q8_0 1,301 / 1,292 against 1,212 / 1,204
 * (1,206 / 1,219), Q4_K 1,348 / 1,367 against 1,287 / 1,277 (1,303 /
 * 1,284). Tried in the same lease and dropped: qk_rope_store folded into
 * the decode attention kernel (three warps of each block doing the QK
 * step, every block of a GQA group storing the same K/V row): F16 945 /
 * 932 against 938 / 969 apart, Q4_K 1,348 / 1,367 against 1,353 / 1,360,
 * no gain beside the noise for a new seam op. Then Q4_K's scales decoded
 * at placement (mm_kernels.cuh's tr_q4_k; ncu had the Q4_K mat-vec issue-
 * bound at 120 registers, 16 warps an SM, DRAM at 21-31% of peak):
 * mvp_kernel 88-94 registers, tg128 1,567-1,649 against 1,465-1,470 (three
 * runs each, one lease), 4 sequences 3,574 against 3,470, 16: 8,083
 * against 7,728; pp512 the same. Tried and dropped: blocks of 8 warps for
 * weights that fill fewer than an SM's worth of 16-warp blocks (-2..-9%),
 * 24 warps an SM at <= 85 registers (Q4_K -23%: fewer loads in flight).
 *
 * Tried and dropped (stop 35, H100, one lease, tg128 two rounds of -r 2):
 * prefetching the weights into L2 ahead of their launches (the walk's
 * matmul order declared with weight_chain; each mvp_kernel and mma_kernel
 * block issuing sm_90 bulk L2 prefetches of its share of the chain's
 * bytes budget - own to budget past its own weights, so that HBM would
 * stream through attention, RoPE and every launch's ramp). Slower at
 * every budget, more so the more it fetched: budget 0 / 8 / 16 / 24 MiB,
 * Q4_K 1,637 and 1,584 / 1,560 and 1,575 / 1,516 and 1,507 / 1,568 and
 * 1,559; Q8_0 1,375 and 1,389 / 1,370 and 1,361 / 1,325 and 1,318 /
 * 1,267 and 1,267; F16 983 and 991 / 943 and 946 / 892 and 892 / 862 and
 * 859; 4 sequences Q4_K 3,550 against 3,533, 16: 8,099 against 7,966 (16
 * MiB). The prefetches' traffic lengthens the demand loads of the launch
 * that issues them, which are what a decode step waits on.
 *
 * Stop 39 (2026-12-07, H100, one lease; tg128 tok/s, bench/gpu_ab.sh,
 * arms alternated, medians of the rounds; bench/RESULTS.md has the rest).
 * Three changes to the M = 1 mat-vec, each behind its switch:
 * - llama's QK step (RoPE of pairs, K and V into the cache) in the Q/K/V
 *   mat-vec's stores (MVP_ROPE; rows 2i and 2i + 1 of Q and K are a pair,
 *   the held sums of SWIGLU's pairing; HEARTH_CUDA_FUSE_ROPE=0 apart):
 *   five launches a layer where six were. Q4_K 1,907 against 1,788, F16
 *   1,071 against 1,008 (one round).
 * - a folded norm's X staged from one read of X (mm_mma.cuh's
 *   mvp_stage_norm1; HEARTH_CUDA_NORM1=0 the two reads): Q4_K 1,913
 *   against 1,796, F16 1,065 against 1,053 (one round).
 * - stage_q8's loads of X in batches (HEARTH_CUDA_SQ_BATCH=0 one at a
 *   time): Q8_0 1,558 against 1,529, Q4_K 1,903 against 1,876, F16 (float
 *   staging) the same (two rounds).
 * All three with the output norm folded into the output matmul
 * (llama_forward.c) against the binary of the stop before: F16 1,072
 * against 1,025, Q8_0 1,562 against 1,475, Q4_K 1,915 against 1,773 (two
 * rounds). Tried and dropped: both register sets' weight loads issued
 * before the PDL wait (the second batch through X's staging too): F16
 * 1,067 against 1,104 without it, Q8_0 1,554 against 1,530, Q4_K 1,905
 * against 1,908 (two rounds); why F16 loses was not profiled.
 *
 * Tried and dropped (stop 40, H100, one lease; tg128 two rounds against
 * their switches, ncu on Q4_K serialized): for Q4_K and Q8_0 only, (a)
 * twice T::UNR units a lane a batch where a row takes more than one
 * batch of a whole warp (the 8,192-wide down projection: Q4_K's row one
 * batch, all of it loaded before the PDL wait; 128 registers): Q4_K 1,694
 * against 1,696, Q8_0 1,433 against 1,520, the down mat-vec 11.2 against
 * 11.3 us; (b) three register sets of loads, not two, where a warp walks
 * three batches or more (gate/up, the output; 112-126 registers): Q4_K
 * 1,692 against 1,884, Q8_0 1,428 against 1,533, gate/up 14.9 against
 * 13.8 us (each arm with the other change on). More loads in flight a
 * warp did not shorten these kernels.
 *
 * Stop 41 (H100, bench/gpu_ab.sh, tg128 medians of two rounds; the
 * figures and gpu.sh's comparison with llama.cpp in bench/RESULTS.md):
 * - reads moved before the PDL wait, of data the kernel before cannot have
 *   written (the pass's step block is uploaded before its first kernel,
 *   and every later kernel starts after that one; weights are constant):
 *   the fused QK step's position, slot and angles, a folded norm's weight
 *   (HEARTH_CUDA_STEP_EARLY), and the decode attention's (ops_attn.cu):
 *   Q8_0 1,401 against 1,554, Q4_K 1,760 against 2,051 (both off / on).
 * - Q8_0 read a whole block a unit in the decode mat-vec (mm_kernels.cuh's
 *   tr_q8_0w, HEARTH_CUDA_Q8_WIDE=0 tr_q8_0's units of 16): 1,564 against
 *   1,672. ncu (stalls mode, Q4_K) had the mat-vecs at 0.43-0.47 issues a
 *   cycle per scheduler with long-scoreboard, wait and selection stalls
 *   about even: each instruction a weight takes counts.
 *
 * Stop 42 (H100; bench/RESULTS.md). ncu, Q8_0, one decode step's kernels
 * serialized: Q/K/V 8.8 us, attention 6.3, Wo 6.7, gate/up 17.9 (35.6 MB:
 * 2.0 TB/s), down 13.3 (17.8 MB: 1.3 TB/s), the output 29.5, its argmax
 * 6.3, the embedding row 3.9; a step in the graph takes 590 us against
 * 883 summed, and without the attention launch (HEARTH_CUDA_DIAG_NO_ATTN,
 * ops_attn.cu) 4.8% less. A pass's embedding rows launch as a dependent
 * (cu_embed_rows below). Tried and dropped, tg128 medians of two rounds
 * against the default: both register sets' loads before the PDL wait for
 * Q8_0 (1,676 against 1,673, three rounds; Q4_K 2,065 against 2,070);
 * blocks of 8 warps, one an SM, so that the next launch's blocks fit
 * beside them and issue their loads early (Q8_0 -23%, Q4_K -31%, F16
 * -15%; with those loads doubled -23% Q8_0): a launch's own bytes in
 * flight matter more than the next one's head start.
 *
 * Graph rule: during capture (c->recording) nothing is allocated, freed or
 * created; a workspace too small then is HEARTH_EUNSUPPORTED (mma_kernel's
 * split-K buffer: it does not split).
 *
 * Rejected: keeping f16
 * copies of quantized weights for the GEMM (3.5x the memory of Q4).
 *
 * What test_dev_ops checks here (every type, rows 1, 2, 3, 6, 12, 17, 130,
 * widths up to 384 and odd N): matmul at M = 1, 2, 3 (mat-vecs), 6, 12, 17
 * (tensor-core kernel, split over K where its rows are few) and 130 (GEMM,
 * or the fallback) against a double-precision oracle over
 * quant_ref.c's dequantization; the n-weight group equal to n single calls;
 * matmul_fused's epilogues at 1, 2, 4, 6, 12 and 17 rows (and 2-4 rows of
 * 2,048-4,096 wide weights, split over K; one row of Q4_K and Q8_0
 * weights past a warp's batch of units, and of 4,500-row weights, whose
 * warps each walk several batches); embed rows of every type; ldx/ldy
 * wider than the rows. */
#include "engine/cuda/cuda_int.h"
#include "engine/cuda/mm_kernels.cuh"
#include "engine/cuda/mm_mma.cuh"

extern "C" {
#include "base/log.h"
#include "engine/quant.h" /* hearth_q4k_scale_min: Q4_K's scales decoded at placement */
}

#include <cublas_v2.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <type_traits>
#include <string.h>

#define MM_TILE_MAX ((size_t)64 << 20)   /* a dequantized f16 tile of W */
#define MM_BLAS_WS ((size_t)32 << 20)    /* cuBLAS's own workspace (its Hopper advice) */
#define MM_PLACE_STAGE ((size_t)64 << 20) /* host bytes re-laid out per copy */
#define MMA_MAX_M 64                      /* the largest M the tensor-core kernel takes */
/* The largest M it runs by default: on the H200 (1.04B, Q4_K, batched
 * decode) it beat cuBLAS over a dequantized copy at 16 rows (3,804 against
 * 2,369 tok/s) and lost at 64 (3,684 against 5,562): few blocks per weight
 * at large M. */
#define MMA_DEFAULT_M 32
#define MMA_PART_MAX ((size_t)32 << 20) /* mma_kernel's split-K sums */

/* ---- layout ---- */

/* Sub-array offsets (bytes, 256-aligned) of a weight in the layout of
 * mm_kernels.cuh; off[4] is the total. kp: elements per row as laid out. */
typedef struct mm_layout {
    size_t off[5];
    size_t row[4]; /* bytes per row of each sub-array (0: unused) */
    int64_t kp;
} mm_layout;

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

static bool layout_of(hearth_dtype t, int64_t N, int64_t K, mm_layout *L)
{
    memset(L, 0, sizeof *L);
    L->kp = K;
    switch (t) {
    case HEARTH_F32: L->kp = (K + 15) / 16 * 16; L->row[0] = (size_t)L->kp * 4; break;
    case HEARTH_F16:
    case HEARTH_BF16: L->kp = (K + 15) / 16 * 16; L->row[0] = (size_t)L->kp * 2; break;
    case HEARTH_Q8_0: L->row[0] = (size_t)K; L->row[1] = (size_t)K / 32 * 2; break;
    case HEARTH_Q4_0: L->row[0] = (size_t)K / 2; L->row[1] = (size_t)K / 32 * 2; break;
    case HEARTH_Q4_K: /* quants; the scales decoded (mm_kernels.cuh's tr_q4_k); d and dmin */
        L->row[0] = (size_t)K / 2;
        L->row[1] = (size_t)K / 256 * 16;
        L->row[2] = (size_t)K / 256 * 4;
        break;
    case HEARTH_Q6_K:
        L->row[0] = (size_t)K / 2;
        L->row[1] = (size_t)K / 4;
        L->row[2] = (size_t)K / 16;
        L->row[3] = (size_t)K / 256 * 2;
        break;
    default: return false;
    }
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        L->off[i] = at;
        at += align256(L->row[i] * (size_t)N);
    }
    L->off[4] = at;
    return true;
}

static mview view_of(const cu_weight *w)
{
    mm_layout L;
    layout_of(w->type, w->n_out, w->n_in, &L);
    const uint8_t *b = (const uint8_t *)w->data;
    mview v = {b + L.off[0], b + L.off[1], b + L.off[2], b + L.off[3], L.kp};
    return v;
}

bool cu_mm_type_ok(hearth_dtype t)
{
    mm_layout L;
    return layout_of(t, 1, 256, &L);
}

/* Row r of the file (src) into the split arrays' row r (dst[i] + r row[i]). */
static void split_row(hearth_dtype t, const uint8_t *src, int64_t K, uint8_t *const dst[4], const size_t row[4],
                      int64_t r)
{
    uint8_t *a = dst[0] + row[0] * r, *b = dst[1] + row[1] * r, *c = dst[2] + row[2] * r, *d = dst[3] + row[3] * r;
    if (t == HEARTH_Q8_0 || t == HEARTH_Q4_0) {
        const size_t qb = t == HEARTH_Q8_0 ? 32 : 16, bb = qb + 2;
        for (int64_t i = 0; i < K / 32; i++) {
            memcpy(b + 2 * i, src + bb * i, 2);
            memcpy(a + qb * i, src + bb * i + 2, qb);
        }
    } else if (t == HEARTH_Q4_K) { /* d dmin scales[12] qs[128] */
        for (int64_t i = 0; i < K / 256; i++) {
            const uint8_t *blk = src + 144 * i;
            for (int j = 0; j < 8; j++) { /* sub-block j's 6-bit scale and min, a byte each */
                int sc, m;
                hearth_q4k_scale_min(blk + 4, j, &sc, &m);
                b[16 * i + 2 * j] = (uint8_t)sc;
                b[16 * i + 2 * j + 1] = (uint8_t)m;
            }
            memcpy(c + 4 * i, blk, 4);
            memcpy(a + 128 * i, blk + 16, 128);
        }
    } else { /* Q6_K: ql[128] qh[64] scales[16] d */
        for (int64_t i = 0; i < K / 256; i++) {
            memcpy(a + 128 * i, src + 210 * i, 128);
            memcpy(b + 64 * i, src + 210 * i + 128, 64);
            memcpy(c + 16 * i, src + 210 * i + 192, 16);
            memcpy(d + 2 * i, src + 210 * i + 208, 2);
        }
    }
}

/* Quantized rows re-laid out on the host, MM_PLACE_STAGE at a time. */
static int place_split(cu_weight *w, const hearth_weight_desc *d, const mm_layout *L, hearth_err *err)
{
    size_t per_row = L->row[0] + L->row[1] + L->row[2] + L->row[3];
    int64_t batch = (int64_t)(MM_PLACE_STAGE / per_row);
    if (batch < 1)
        batch = 1;
    if (batch > d->n_out)
        batch = d->n_out;
    uint8_t *stage = (uint8_t *)malloc(per_row * (size_t)batch);
    if (!stage)
        return hearth_err_set(err, HEARTH_ENOMEM, "cuda: weight '%s': no host memory to lay out %zu bytes",
                              d->name, per_row * (size_t)batch);
    int rc = 0;
    for (int64_t r0 = 0; r0 < d->n_out && rc == 0; r0 += batch) {
        int64_t nr = d->n_out - r0 < batch ? d->n_out - r0 : batch;
        uint8_t *dst[4];
        size_t at = 0;
        for (int i = 0; i < 4; i++) {
            dst[i] = stage + at;
            at += L->row[i] * (size_t)nr;
        }
        for (int64_t r = 0; r < nr; r++)
            split_row(d->type, (const uint8_t *)d->data + d->row_bytes * (size_t)(r0 + r), d->n_in, dst, L->row, r);
        for (int i = 0; i < 4 && rc == 0; i++)
            if (L->row[i])
                rc = cu_fail("cudaMemcpy (weight)",
                             cudaMemcpy((uint8_t *)w->data + L->off[i] + L->row[i] * (size_t)r0, dst[i],
                                        L->row[i] * (size_t)nr, cudaMemcpyHostToDevice));
    }
    free(stage);
    if (rc)
        hearth_err_set(err, rc, "cuda: weight '%s': upload failed", d->name);
    return rc;
}

int cu_weight_place(cu_weight *w, const hearth_weight_desc *d, int ordinal, hearth_err *err)
{
    memset(w, 0, sizeof *w);
    mm_layout L;
    if (!layout_of(d->type, d->n_out, d->n_in, &L))
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "cuda: weight '%s': type %d not supported", d->name,
                              (int)d->type);
    const hearth_dtype_info *info = hearth_dtype_get((uint32_t)d->type);
    if (d->n_out < 1 || d->n_in < 1 || d->n_in % info->block || d->n_in > INT_MAX || d->n_out > INT_MAX ||
        d->row_bytes < (size_t)(d->n_in / info->block) * info->block_bytes)
        return hearth_err_set(err, HEARTH_EINVAL, "cuda: weight '%s': shape (%lld, %lld) or row bytes %zu invalid",
                              d->name, (long long)d->n_out, (long long)d->n_in, d->row_bytes);
    int rc = cu_fail("cudaSetDevice", cudaSetDevice(ordinal));
    if (rc)
        return hearth_err_set(err, rc, "cuda: weight '%s': cannot select device %d", d->name, ordinal);
    size_t bytes = L.off[4];
    cudaError_t e = cudaMalloc(&w->data, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        w->data = NULL;
        return hearth_err_set(err, HEARTH_ENOMEM, "cuda: weight '%s': cannot allocate %zu bytes on device %d: %s",
                              d->name, bytes, ordinal, cudaGetErrorString(e));
    }
    w->type = d->type;
    w->n_out = d->n_out;
    w->n_in = d->n_in;
    w->ordinal = ordinal;
    w->bytes = bytes;
    if (d->type == HEARTH_F32 || d->type == HEARTH_F16 || d->type == HEARTH_BF16) {
        /* zero padding, then rows at their pitch */
        size_t es = d->type == HEARTH_F32 ? 4 : 2;
        rc = cu_fail("cudaMemset (weight)", cudaMemset(w->data, 0, bytes));
        if (!rc)
            rc = cu_fail("cudaMemcpy2D (weight)", cudaMemcpy2D(w->data, L.row[0], d->data, d->row_bytes,
                                                               (size_t)d->n_in * es, (size_t)d->n_out,
                                                               cudaMemcpyHostToDevice));
        if (rc)
            hearth_err_set(err, rc, "cuda: weight '%s': upload failed", d->name);
    } else {
        rc = place_split(w, d, &L, err);
    }
    /* the first matmul runs on a non-blocking stream: test_dev_ops saw an
     * F32 weight's rows read before they had landed (H200, 2026-12-03) */
    if (!rc && (rc = cu_uploads_landed("cudaStreamSynchronize (weight upload)")))
        hearth_err_set(err, rc, "cuda: weight '%s': upload failed", d->name);
    if (rc)
        cu_weight_release(w);
    return rc;
}

void cu_weight_release(cu_weight *w)
{
    if (!w || !w->data)
        return;
    int cur = -1;
    cudaGetDevice(&cur);
    if (cur != w->ordinal)
        cudaSetDevice(w->ordinal);
    cu_fail("cudaFree (weight)", cudaFree(w->data));
    if (w->aux)
        cu_fail("cudaFree (weight aux)", cudaFree(w->aux));
    if (cur >= 0 && cur != w->ordinal)
        cudaSetDevice(cur);
    w->data = w->aux = NULL;
    w->bytes = 0;
}

/* ---- launches over the traits ---- */

/* kc: X elements a chunk holds for M rows (a multiple of 256 within 48 KiB). */
static int chunk_of(int M)
{
    return (MV_SMEM_FLOATS - 64) / M / 256 * 256; /* 64 floats left for the kernels' static shared memory */
}

/* A chunk just wide enough for kp elements (kp <= chunk_of(M)). */
static int chunk_for(int64_t kp)
{
    return (int)((kp + 255) / 256 * 256);
}

/* SMs of each device, asked once (a plain read: the same answer if two
 * threads race). */
static int sm_count(int ordinal)
{
    static int cached[64];
    if (ordinal < 0 || ordinal >= 64)
        return 132;
    if (!cached[ordinal]) {
        int n = 0;
        if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, ordinal) != cudaSuccess || n < 1)
            n = 132;
        cached[ordinal] = n;
    }
    return cached[ordinal];
}

template <class T, int M>
static int mv_launch(cu_ctx *c, const mview &v, const float *X, int64_t ldx, float *Y, int64_t ldy, int64_t N,
                     int64_t K)
{
    const int kc = chunk_of(M);
    int64_t blocks = (N + MV_WARPS - 1) / MV_WARPS;
    /* X in one chunk: a few blocks per SM, each staging X once for many rows */
    if (v.kp <= kc && blocks > 4 * (int64_t)sm_count(c->ordinal))
        blocks = 4 * (int64_t)sm_count(c->ordinal);
    mv_kernel<T, M><<<(unsigned)blocks, MV_WARPS * 32, (size_t)M * kc * 4, c->s>>>(v, X, ldx, Y, ldy, N, K, kc);
    return cu_launched("mv_kernel");
}

template <class T>
static int mv_rows(cu_ctx *c, const mview &v, const float *X, int64_t ldx, int64_t M, float *Y, int64_t ldy,
                   int64_t N, int64_t K)
{
    int rc = 0;
    for (int64_t m0 = 0; m0 < M && rc == 0; m0 += MV_MAX_M) {
        const float *x = X + m0 * ldx;
        float *y = Y + m0 * ldy;
        switch (M - m0 < MV_MAX_M ? (int)(M - m0) : MV_MAX_M) {
        case 1: rc = mv_launch<T, 1>(c, v, x, ldx, y, ldy, N, K); break;
        case 2: rc = mv_launch<T, 2>(c, v, x, ldx, y, ldy, N, K); break;
        case 3: rc = mv_launch<T, 3>(c, v, x, ldx, y, ldy, N, K); break;
        case 4: rc = mv_launch<T, 4>(c, v, x, ldx, y, ldy, N, K); break;
        case 5: rc = mv_launch<T, 5>(c, v, x, ldx, y, ldy, N, K); break;
        case 6: rc = mv_launch<T, 6>(c, v, x, ldx, y, ldy, N, K); break;
        case 7: rc = mv_launch<T, 7>(c, v, x, ldx, y, ldy, N, K); break;
        default: rc = mv_launch<T, 8>(c, v, x, ldx, y, ldy, N, K); break;
        }
    }
    return rc;
}

/* HEARTH_CUDA_DEQ=plain: GEMM tiles through deq_kernel (read once). */
static bool deq_run_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_DEQ", "plain");
}

template <class T, class O>
static int deq_launch(cu_ctx *c, const mview &v, const int32_t *tok, int64_t r0, O *out, int64_t ldo, int64_t rows,
                      int64_t K)
{
    const int64_t units = rows * (v.kp / T::EPU);
    if constexpr (sizeof(O) == 2) {
        /* rows back to back: deq_run_kernel's contiguous runs */
        if (!tok && ldo == K && v.kp == K && units < INT_MAX && deq_run_on()) {
            deq_run_kernel<T><<<(unsigned)((units + DEQ_UNITS - 1) / DEQ_UNITS), DEQ_UNITS, 0, c->s>>>(
                v, r0, out, (int)units, (int)(v.kp / T::EPU));
            return cu_launched("deq_run_kernel");
        }
    }
    const unsigned blocks = (unsigned)((units + 255) / 256);
    deq_kernel<T, O><<<blocks, 256, 0, c->s>>>(v, tok, r0, out, ldo, rows, K);
    return cu_launched("deq_kernel");
}

/* The type switch, once for each use of the traits. */
#define MM_DISPATCH(type, CALL)                                                                                        \
    switch (type) {                                                                                                    \
    case HEARTH_F32: return CALL(tr_f32);                                                                              \
    case HEARTH_F16: return CALL(tr_half<false>);                                                                      \
    case HEARTH_BF16: return CALL(tr_half<true>);                                                                      \
    case HEARTH_Q8_0: return CALL(tr_q8_0);                                                                            \
    case HEARTH_Q4_0: return CALL(tr_q4_0);                                                                            \
    case HEARTH_Q4_K: return CALL(tr_q4_k);                                                                            \
    case HEARTH_Q6_K: return CALL(tr_q6_k);                                                                            \
    default: return HEARTH_EUNSUPPORTED;                                                                               \
    }

static int matvec(cu_ctx *c, const cu_weight *w, const float *X, int64_t ldx, int64_t M, float *Y, int64_t ldy)
{
    const mview v = view_of(w);
#define MV_CALL(T) mv_rows<T>(c, v, X, ldx, M, Y, ldy, w->n_out, w->n_in)
    MM_DISPATCH(w->type, MV_CALL)
#undef MV_CALL
}

template <class O>
static int dequant(cu_ctx *c, const cu_weight *w, const int32_t *tok, int64_t r0, O *out, int64_t ldo, int64_t rows)
{
    const mview v = view_of(w);
#define DQ_CALL(T) deq_launch<T, O>(c, v, tok, r0, out, ldo, rows, w->n_in)
    MM_DISPATCH(w->type, DQ_CALL)
#undef DQ_CALL
}

/* HEARTH_CUDA_EMBED_DEP=0: a pass's embedding rows launch plainly, after
 * the kernel before them ends and before the first mat-vec may launch.
 * By default they launch as a programmatic dependent that lets the next
 * kernel launch at once: the first Q/K/V mat-vec's blocks are resident
 * and issue their first weight loads while the rows are gathered (and, in
 * a run recorded whole, the rows' launch overlaps the last pass's draw).
 * tg128 on the H100 (1.04B, two rounds): Q8_0 1,685 against 1,698, Q4_K
 * 2,010 against 2,025 tok/s (stop 42). Read once. */
static bool embed_dep_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_EMBED_DEP", "0");
}

int cu_embed_rows(cu_ctx *c, float *Y, const cu_weight *table, const int32_t *tok, int64_t n)
{
    if (n <= 0)
        return 0;
    if (!cu_pdl_rows(n) || !embed_dep_on())
        return dequant<float>(c, table, tok, 0, Y, table->n_in, n);
    const mview v = view_of(table);
    const int64_t units = n * (v.kp / 16); /* at most: every type's unit holds 16 elements or more */
    const unsigned blocks = (unsigned)((units + 255) / 256);
#define EMB_CALL(T)                                                                                                    \
    cu_fail("deq_kernel (embedding rows)", cu_launch(true, deq_kernel<T, float, true>, dim3(blocks), dim3(256), 0,   \
                                                     c->s, v, tok, (int64_t)0, Y, table->n_in, n, table->n_in))
    MM_DISPATCH(table->type, EMB_CALL)
#undef EMB_CALL
}

/* ---- cuBLAS, opened at run time ---- */

typedef cublasStatus_t (*blas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*blas_destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*blas_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*blas_ws_fn)(cublasHandle_t, void *, size_t);
typedef cublasStatus_t (*blas_gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                       const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                       int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                       cublasGemmAlgo_t);

static struct {
    bool ok;
    blas_create_fn create;
    blas_destroy_fn destroy;
    blas_stream_fn set_stream;
    blas_ws_fn set_ws;
    blas_gemm_fn gemm;
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_open(void)
{
    const char *names[] = {"libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.13"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        blas.create = (blas_create_fn)dlsym(lib, "cublasCreate_v2");
        blas.destroy = (blas_destroy_fn)dlsym(lib, "cublasDestroy_v2");
        blas.set_stream = (blas_stream_fn)dlsym(lib, "cublasSetStream_v2");
        blas.set_ws = (blas_ws_fn)dlsym(lib, "cublasSetWorkspace_v2");
        blas.gemm = (blas_gemm_fn)dlsym(lib, "cublasGemmEx");
        blas.ok = blas.create && blas.destroy && blas.set_stream && blas.set_ws && blas.gemm;
    }
    if (blas.ok)
        hearth_log(HEARTH_LOG_INFO, "cuda: matmul: prompts (M > %d) on tensor cores through cuBLAS", MV_MAX_M);
    else
        hearth_log(HEARTH_LOG_INFO, "cuda: matmul: cuBLAS not loaded (%s): prompts on the fp32 mat-vec fallback",
                   lib ? "a symbol is missing" : dlerror());
    /* the library stays open for the process: handles may live until its end */
}

/* c->mm: the context's handle (bound to c->s) and workspace: cuBLAS's
 * MM_BLAS_WS, then X rounded, then a W tile. */
typedef struct mm_ctx {
    cublasHandle_t h;
    void *ws;
    size_t ws_bytes;
    float *part; /* mma_kernel's split-K sums (MMA_PART_MAX bytes) */
    bool part_tried;
} mm_ctx;

void cu_mm_ctx_free(cu_ctx *c)
{
    mm_ctx *m = (mm_ctx *)c->mm;
    if (!m)
        return;
    if (m->h)
        blas.destroy(m->h);
    if (m->ws)
        cu_fail("cudaFree (mm workspace)", cudaFree(m->ws));
    if (m->part)
        cu_fail("cudaFree (mma split-K sums)", cudaFree(m->part));
    free(m);
    c->mm = NULL;
}

static int blas_fail(const char *what, cublasStatus_t s)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    hearth_log(HEARTH_LOG_ERROR, "cuda: %s failed: cuBLAS status %d", what, (int)s);
    return HEARTH_EDEVICE;
}

/* c->mm with a handle and at least need bytes of workspace. */
static int ctx_ready(cu_ctx *c, size_t need)
{
    mm_ctx *m = (mm_ctx *)c->mm;
    if (m && m->h && m->ws_bytes >= need)
        return 0;
    if (c->recording)
        return HEARTH_EUNSUPPORTED; /* never allocate during capture */
    if (!m) {
        m = (mm_ctx *)calloc(1, sizeof *m);
        if (!m)
            return HEARTH_ENOMEM;
        c->mm = m;
    }
    int rc = cu_fail("cudaSetDevice", cudaSetDevice(c->ordinal));
    if (!rc && !m->h) {
        rc = blas_fail("cublasCreate", blas.create(&m->h));
        if (!rc)
            rc = blas_fail("cublasSetStream", blas.set_stream(m->h, c->s));
    }
    if (!rc && m->ws_bytes < need) {
        /* work still queued may read the old workspace */
        rc = cu_fail("cudaStreamSynchronize (mm workspace)", cudaStreamSynchronize(c->s));
        if (!rc && m->ws)
            rc = cu_fail("cudaFree (mm workspace)", cudaFree(m->ws));
        m->ws = NULL;
        m->ws_bytes = 0;
        if (!rc) {
            cudaError_t e = cudaMalloc(&m->ws, need);
            if (e != cudaSuccess) {
                (void)cudaGetLastError();
                m->ws = NULL;
                hearth_log(HEARTH_LOG_ERROR, "cuda: matmul: cannot allocate a %zu-byte workspace on device %d",
                           need, c->ordinal);
                return HEARTH_ENOMEM;
            }
            m->ws_bytes = need;
            rc = blas_fail("cublasSetWorkspace", blas.set_ws(m->h, m->ws, MM_BLAS_WS));
        }
    }
    return rc;
}

/* Rows of W a dequantized tile holds. */
static int64_t tile_rows(const cu_weight *w)
{
    int64_t r = (int64_t)(MM_TILE_MAX / ((size_t)w->n_in * 2));
    if (r < 1)
        r = 1;
    return r < w->n_out ? r : w->n_out;
}

static int x_round(cu_ctx *c, const float *X, int64_t ldx, void *Xh, int64_t M, int64_t K, bool bf)
{
    if (K % 4 == 0 && ldx % 4 == 0 && ((uintptr_t)X & 15) == 0 && M * K < INT_MAX && ldx < INT_MAX) {
        const unsigned blocks = (unsigned)((M * K / 4 + 255) / 256);
        if (bf)
            x_round4_kernel<true><<<blocks, 256, 0, c->s>>>(X, (int)ldx, Xh, (int)M, (int)K);
        else
            x_round4_kernel<false><<<blocks, 256, 0, c->s>>>(X, (int)ldx, Xh, (int)M, (int)K);
        return cu_launched("x_round4_kernel");
    }
    const unsigned blocks = (unsigned)((M * K + 255) / 256);
    if (bf)
        x_round_kernel<true><<<blocks, 256, 0, c->s>>>(X, ldx, Xh, M, K);
    else
        x_round_kernel<false><<<blocks, 256, 0, c->s>>>(X, ldx, Xh, M, K);
    return cu_launched("x_round_kernel");
}

static int gemm(cu_ctx *c, const cu_weight *const *w, int n, const float *X, int64_t ldx, int64_t M,
                float *const *Y, const int64_t *ldy)
{
    const int64_t K = w[0]->n_in;
    size_t tile = 0;
    for (int i = 0; i < n; i++) {
        if (w[i]->n_in != K || ldy[i] > INT_MAX || M > INT_MAX)
            return HEARTH_EINVAL;
        if (w[i]->type != HEARTH_F16 && w[i]->type != HEARTH_BF16) {
            size_t t = align256((size_t)tile_rows(w[i]) * (size_t)K * 2);
            tile = t > tile ? t : tile;
        }
    }
    const size_t xbytes = align256((size_t)M * (size_t)K * 2);
    int rc = ctx_ready(c, MM_BLAS_WS + xbytes + tile);
    if (rc)
        return rc;
    mm_ctx *m = (mm_ctx *)c->mm;
    uint8_t *xh = (uint8_t *)m->ws + MM_BLAS_WS;
    __half *wt = (__half *)(xh + xbytes);
    int x_as = -1; /* what xh holds: -1 nothing, 0 f16, 1 bf16 */
    const float one = 1.0f, zero = 0.0f;
    for (int i = 0; i < n && rc == 0; i++) {
        const bool bf = w[i]->type == HEARTH_BF16;
        if (x_as != (int)bf) {
            rc = x_round(c, X, ldx, xh, M, K, bf);
            x_as = (int)bf;
        }
        const cudaDataType dt = bf ? CUDA_R_16BF : CUDA_R_16F;
        if (w[i]->type == HEARTH_F16 || bf) {
            /* column-major: Y^T (N, M) = W (K, N)^T Xh (K, M) */
            const int64_t kp = view_of(w[i]).kp;
            if (!rc)
                rc = blas_fail("cublasGemmEx",
                               blas.gemm(m->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)w[i]->n_out, (int)M, (int)K, &one,
                                         w[i]->data, dt, (int)kp, xh, dt, (int)K, &zero, Y[i], CUDA_R_32F,
                                         (int)ldy[i], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
            continue;
        }
        const int64_t tr = tile_rows(w[i]);
        for (int64_t n0 = 0; n0 < w[i]->n_out && rc == 0; n0 += tr) {
            const int64_t nt = w[i]->n_out - n0 < tr ? w[i]->n_out - n0 : tr;
            rc = dequant<__half>(c, w[i], NULL, n0, wt, K, nt);
            if (!rc)
                rc = blas_fail("cublasGemmEx",
                               blas.gemm(m->h, CUBLAS_OP_T, CUBLAS_OP_N, (int)nt, (int)M, (int)K, &one, wt,
                                         CUDA_R_16F, (int)K, xh, CUDA_R_16F, (int)K, &zero, Y[i] + n0, CUDA_R_32F,
                                         (int)ldy[i], CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        }
    }
    return rc;
}

/* today's dispatch before the grouped kernels (HEARTH_CUDA_MM=legacy) */
static int matmul_legacy(cu_ctx *c, const cu_weight *const *w, int n, const float *X, int64_t ldx, int64_t M,
                         float *const *Y, const int64_t *ldy)
{
    if (M > MV_MAX_M) {
        pthread_once(&blas_once, blas_open);
        if (blas.ok)
            return gemm(c, w, n, X, ldx, M, Y, ldy);
    }
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = matvec(c, w[i], X, ldx, M, Y[i], ldy[i]);
    return rc;
}

/* ---- grouped launches ---- */

/* The mat-vec's launch: X's chunk as wide as the rows need (shared memory
 * held for nothing is L1 the weight stream cannot use), launched as a
 * programmatic dependent (cuda_int.h) so its first weight loads overlap the
 * previous kernel's end. */
template <class T, int M, int PRE>
static int mvg_launch(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int64_t nr, int64_t K,
                      const mfuse &fz)
{
    int kc = chunk_of(M);
    if (g.v[0].kp < kc)
        kc = chunk_for(g.v[0].kp);
    int64_t blocks = (nr + MV_WARPS - 1) / MV_WARPS;
    if (g.v[0].kp <= kc && blocks > 4 * (int64_t)sm_count(c->ordinal))
        blocks = 4 * (int64_t)sm_count(c->ordinal);
    cudaError_t e = cu_launch(cu_pdl_on(), mvg_kernel<T, M, PRE>, dim3((unsigned)blocks), dim3(MV_WARPS * 32),
                              (size_t)M * kc * 4, c->s, g, X, ldx, nr, K, kc, fz);
    return cu_fail("mvg_kernel", e);
}

/* HEARTH_CUDA_MV=grouped: the M = 1 mat-vec without the pipelining (read
 * once). */
static bool mv_pipe(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_MV", "grouped");
}

/* HEARTH_CUDA_MV_Q8=0: mvp_kernel reads X as floats for every type (the
 * q8a X of mm_mma.cuh off; read once). */
static bool mv_q8(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_MV_Q8", "0");
}

/* HEARTH_CUDA_MV_HALF=0: mvp_kernel keeps a whole warp on a row at every
 * width (read once). */
static bool mv_half(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_MV_HALF", "0");
}

/* mvp_kernel in blocks of 16 warps, one an SM (HEARTH_CUDA_MVP_WARPS=8:
 * blocks of 8, two an SM, as before 2026-12-06): the same warps an SM, X
 * staged by half as many blocks. A mat-vec micro-benchmark on the H100
 * (16 layers of the 1.04B's F16 matrices as one graph) read 2.25 TB/s
 * with blocks of 16 warps against 1.96 with two of 8; in hearth, H100,
 * tg128 two runs each: Q4_K 1,385 / 1,394 against 1,271 / 1,279, Q8_0
 * 1,294 / 1,297 against 1,231 / 1,243, F16 932 against 920; batched Q8_0
 * at 4 rows (mvp_kernel's rows of X) 3,192 / 3,218 against 2,760 /
 * 2,789. Tried and dropped: F16 with 2 units a lane in flight and two
 * blocks of 16 warps an SM (60 registers; the micro-benchmark's best
 * shape, 2.40 TB/s there): tg128 F16 823-840 against 887-901 (H100, three
 * runs each). Read once. */
static int mvp_warps(void)
{
    static int seen = -1;
    return cu_env_is(&seen, "HEARTH_CUDA_MVP_WARPS", "8") ? 8 : 16;
}

/* mvp_kernel's opt bits (mm_mma.cuh), each on unless its switch is 0:
 * HEARTH_CUDA_SQ_BATCH (the q8a staging's loads of X in batches),
 * HEARTH_CUDA_NORM1 (a folded norm's X read once) and
 * HEARTH_CUDA_STEP_EARLY (read before the PDL wait: the fused QK step's
 * position, slot and angles, from the pass's step block, and a folded
 * norm's weight). Read once. */
static unsigned mvp_opt(void)
{
    static int s1 = -1, s2 = -1, s3 = -1;
    return (cu_env_is(&s1, "HEARTH_CUDA_SQ_BATCH", "0") ? 0u : MVP_SQ_BATCH) |
           (cu_env_is(&s2, "HEARTH_CUDA_NORM1", "0") ? 0u : MVP_NORM1) |
           (cu_env_is(&s3, "HEARTH_CUDA_STEP_EARLY", "0") ? 0u : MVP_EARLY_STEP);
}

/* A norm folded into mvp_kernel's staging of X (w NULL: none). */
struct mnorm {
    const float *w = nullptr;
    float eps = 0.0f;
};

/* mvp_kernel<T, Q8, LW, MT> in blocks of mvp_warps() warps, per_warp rows
 * a warp at a time. */
template <class T, bool Q8, int LW, int MT>
static cudaError_t mvp_start(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int M, int64_t nr, int64_t K,
                             int kc, int post, int64_t per_warp, size_t smem, const mnorm &nm, const mrope &rp)
{
    const int w = mvp_warps();
    const int64_t per = per_warp * w, cap = (16 / w) * (int64_t)sm_count(c->ordinal);
    int64_t blocks = (nr + per - 1) / per;
    blocks = blocks < cap ? blocks : cap;
    if (w == 16)
        return cu_launch(cu_pdl_on(), mvp_kernel<T, Q8, LW, MT, 16>, dim3((unsigned)blocks), dim3(16 * 32), smem, c->s,
                         g, X, ldx, M, nr, K, kc, post, nm.w, nm.eps, rp, mvp_opt());
    return cu_launch(cu_pdl_on(), mvp_kernel<T, Q8, LW, MT, 8>, dim3((unsigned)blocks), dim3(8 * 32), smem, c->s, g,
                     X, ldx, M, nr, K, kc, post, nm.w, nm.eps, rp, mvp_opt());
}

/* mvp_kernel over the group for M rows of X (MT of them staged, MT >= M):
 * M = 1, rows as wide as one chunk of X, post MVP_STORE, MVP_ADD or
 * MVP_SWIGLU (nr then counts gate and up rows); M > 1 (q8a X alone) the
 * same posts. With q8a X, a row of at most 16 UNR units goes to half a
 * warp (mvp_kernel's LW); the float path keeps whole warps, the order
 * mvg_kernel sums in. */
template <class T, int MT>
static int mvp_go(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int M, int64_t nr, int64_t K, int post,
                  const mnorm &nm = mnorm{}, const mrope &rp = mrope{})
{
    const int kc = chunk_for(g.v[0].kp);
    if constexpr (q8dot<T>::on) {
        if (mv_q8()) {
            const bool half = mv_half() && g.v[0].kp / T::EPU <= 16 * T::UNR;
            const size_t smem = MT * q8_smem(kc);
            cudaError_t e = half ? mvp_start<T, true, 16, MT>(c, g, X, ldx, M, nr, K, kc, post, 2, smem, nm, rp)
                                 : mvp_start<T, true, 32, MT>(c, g, X, ldx, M, nr, K, kc, post, 1, smem, nm, rp);
            return cu_fail("mvp_kernel (q8)", e);
        }
    }
    if constexpr (MT == 1) {
        cudaError_t e = mvp_start<T, false, 32, 1>(c, g, X, ldx, 1, nr, K, kc, post, 1, (size_t)kc * 4, nm, rp);
        return cu_fail("mvp_kernel", e);
    }
    return HEARTH_EUNSUPPORTED;
}

/* HEARTH_CUDA_Q8_WIDE=0: the decode mat-vec reads Q8_0 in units of 16
 * (tr_q8_0) rather than whole blocks (tr_q8_0w). Read once. */
static bool mv_q8_wide(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_Q8_WIDE", "0");
}

template <class T>
static int mvp_launch(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int64_t nr, int64_t K, int post,
                      const mnorm &nm = mnorm{}, const mrope &rp = mrope{})
{
    if constexpr (std::is_same<T, tr_q8_0>::value)
        if (mv_q8_wide() && mv_q8() && g.v[0].kp % 32 == 0)
            return mvp_go<tr_q8_0w, 1>(c, g, X, ldx, 1, nr, K, post, nm, rp);
    return mvp_go<T, 1>(c, g, X, ldx, 1, nr, K, post, nm, rp);
}

/* HEARTH_CUDA_MVP_ROWS=0: rows of X never go to mvp_kernel (read once). */
static bool mvp_rows_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_MVP_ROWS", "0");
}

/* The rows of X mvp_kernel stages for M > 1 rows of a weight of type t (0:
 * it does not take them): the q8a types, where it beat the tensor-core
 * kernel on the H200 (1.04B, batched decode, tok/s summed, mvp against
 * mma): Q4_K 2 rows 1,675 / 1,323, 4 rows 2,098 / 2,429; Q8_0 2 rows
 * 1,886 / 1,336, 4 rows 2,587 / 2,345, 8 rows 3,615 / 3,610, 16 rows
 * 4,477 / 5,388. Each row of X costs the mat-vec its dp4a and shared-memory
 * loads again where the tensor cores take 8 rows an instruction, and a
 * Q4_K unit's decode is dearer than Q8_0's. */
static int mvp_rows_mt(hearth_dtype t, int64_t M)
{
    if (M == 2 && (t == HEARTH_Q8_0 || t == HEARTH_Q4_0 || t == HEARTH_Q4_K))
        return 2;
    return M >= 2 && M <= 4 && t == HEARTH_Q8_0 ? 4 : 0;
}

/* Whether mvp_kernel takes M > 1 rows of X for a weight of this type and
 * width (X's rows within the default 48 KiB of shared memory). */
static bool mvp_rows_take(hearth_dtype t, int64_t kp, int64_t M)
{
    const int mt = mvp_rows_mt(t, M);
    if (!mt || !mvp_rows_on() || !mv_pipe() || !mv_q8())
        return false;
    return (size_t)mt * q8_smem(chunk_for(kp)) <= 48 * 1024;
}

template <class T>
static int mvp_rows(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int64_t M, int64_t nr, int64_t K,
                    int post = MVP_STORE)
{
    return M <= 2 ? mvp_go<T, 2>(c, g, X, ldx, (int)M, nr, K, post) : mvp_go<T, 4>(c, g, X, ldx, (int)M, nr, K, post);
}

/* Whether mvp_kernel takes a group of this width (X in one chunk). */
static bool mvp_fits(const mgroup &g)
{
    return mv_pipe() && g.v[0].kp <= chunk_of(1);
}

/* HEARTH_CUDA_FUSE_NORM=0: the RMS norm before a mat-vec (M = 1) runs
 * apart (ops.cu's rmsnorm_kernel) instead of in mvp_kernel's staging of X.
 * Folded in, each block sums X's squares itself: two launches a layer
 * fewer. Read once. */
static bool mvp_norm_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_FUSE_NORM", "0");
}

/* The mat-vec over the group's nr rows, X's rows 8 at a time. */
template <class T>
static int mvg_rows(cu_ctx *c, const mgroup &g0, const float *X, int64_t ldx, int64_t M, int64_t nr, int64_t K)
{
    const mfuse fz = {NULL, 0.0f, 0};
    int rc = 0;
    for (int64_t m0 = 0; m0 < M && rc == 0; m0 += MV_MAX_M) {
        mgroup g = g0;
        for (int i = 0; i < g.cnt; i++)
            g.y[i] += m0 * g.ldy[i];
        const float *x = X + m0 * ldx;
        switch (M - m0 < MV_MAX_M ? (int)(M - m0) : MV_MAX_M) {
        case 1:
            if (mvp_fits(g))
                rc = mvp_launch<T>(c, g, x, ldx, nr, K, MVP_STORE);
            else
                rc = mvg_launch<T, 1, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz);
            break;
        case 2: rc = mvg_launch<T, 2, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz); break;
        case 3: rc = mvg_launch<T, 3, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz); break;
        case 4: rc = mvg_launch<T, 4, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz); break;
        case 5: rc = mvg_launch<T, 5, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz); break;
        case 6: rc = mvg_launch<T, 6, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz); break;
        case 7: rc = mvg_launch<T, 7, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz); break;
        default: rc = mvg_launch<T, 8, MV_PRE_NONE>(c, g, x, ldx, nr, K, fz); break;
        }
    }
    return rc;
}

/* One fused mat-vec (M = 1) of a group: the norm (cu_matmul_fused let it
 * through) in mvg_kernel, the epilogues in mvp_kernel where X fits one
 * chunk; else HEARTH_EUNSUPPORTED, nothing launched. */
template <class T>
static int mvg_fused(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int64_t nr, int64_t K,
                     const hearth_mm_fuse *f)
{
    mnorm nm;
    if (f->pre == HEARTH_MM_PRE_RMSNORM) {
        if (!mvp_fits(g) || !mvp_norm_on()) { /* the old prologue, or the norm apart */
            if (f->post == HEARTH_MM_SWIGLU || f->post == HEARTH_MM_QK_ROPE_STORE || cu_fuse_mode() < 2)
                return HEARTH_EUNSUPPORTED;
            const mfuse fz = {f->norm_w, f->eps, f->post == HEARTH_MM_ADD};
            return mvg_launch<T, 1, MV_PRE_RMS>(c, g, X, ldx, nr, K, fz);
        }
        nm.w = f->norm_w;
        nm.eps = f->eps;
    }
    if (!mvp_fits(g))
        return HEARTH_EUNSUPPORTED;
    if (f->post == HEARTH_MM_QK_ROPE_STORE) { /* cu_matmul_fused checked the QK step's shape */
        if (g.cnt != 3)
            return HEARTH_EUNSUPPORTED;
        mrope rp;
        rp.pos = f->b->pos;
        rp.slot = f->b->slot;
        rp.rope_cs = f->b->rope_cs;
        rp.kc = f->kv->k;
        rp.vc = f->kv->v;
        rp.f16 = f->kv->type == HEARTH_F16;
        rp.n_ctx = f->kv->n_ctx;
        rp.n_layer = f->kv->n_layer;
        rp.layer = f->layer;
        rp.hd = (int)f->qk->hd;
        rp.n_rot = (int)f->qk->n_rot;
        return mvp_launch<T>(c, g, X, ldx, nr, K, MVP_ROPE, nm, rp);
    }
    if (f->post != HEARTH_MM_SWIGLU)
        return mvp_launch<T>(c, g, X, ldx, nr, K, f->post == HEARTH_MM_ADD ? MVP_ADD : MVP_STORE, nm);
    if (g.cnt != 2 || g.n[0] != g.n[1] || g.ldy[0] < g.n[0])
        return HEARTH_EUNSUPPORTED;
    return mvp_launch<T>(c, g, X, ldx, nr, K, MVP_SWIGLU, nm);
}

/* HEARTH_CUDA_MMA_SPLIT=0: mma_kernel never splits K over blocks (read once). */
static bool mma_split_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_MMA_SPLIT", "0");
}

/* The context's split-K buffer, allocated whole on first need outside a
 * capture (a step's first run is never captured: dev_cuda.cu); NULL when
 * it cannot be had, and the caller does not split. */
static float *mma_part(cu_ctx *c, size_t need)
{
    mm_ctx *m = (mm_ctx *)c->mm;
    if (m && (m->part || m->part_tried))
        return need <= MMA_PART_MAX ? m->part : NULL;
    if (c->recording || need > MMA_PART_MAX)
        return NULL;
    if (!m) {
        m = (mm_ctx *)calloc(1, sizeof *m);
        if (!m)
            return NULL;
        c->mm = m;
    }
    if (cu_fail("cudaSetDevice", cudaSetDevice(c->ordinal)))
        return NULL;
    m->part_tried = true;
    if (cudaMalloc((void **)&m->part, MMA_PART_MAX) != cudaSuccess) {
        (void)cudaGetLastError();
        m->part = NULL;
        hearth_log(HEARTH_LOG_WARN, "cuda: matmul: no %zu-byte split-K buffer on device %d: batched steps unsplit",
                   (size_t)MMA_PART_MAX, c->ordinal);
    }
    return m->part;
}

/* HEARTH_CUDA_PDL_MMA=0: mma_kernel and mma_reduce_kernel do not launch
 * as programmatic dependents (cuda_int.h). On the H100 (1.04B llama,
 * batched decode, tok/s summed, two runs each, 2026-12-06): Q4_K 4
 * sequences 2,641 / 2,650 against 2,556 / 2,564, 16: 6,719 / 6,743
 * against 6,286 / 6,395; F16 4: 2,379 against 2,089. Read once. */
static bool mma_pdl_on(void)
{
    static int seen = -1;
    return cu_pdl_on() && !cu_env_is(&seen, "HEARTH_CUDA_PDL_MMA", "0");
}

/* HEARTH_CUDA_MMA_OCC=1: mma_kernel at M <= 8 with its registers as the
 * compiler likes them (153 for Q4_K: one block an SM) rather than capped
 * at 128 for two blocks an SM, as it is for Q8_0, Q4_0 and Q4_K (no
 * spills at 128; F16 and Q6_K spilled, so they keep one block). Twice the
 * weight loads in flight an SM: on the H100, batched Q4_K decode at 4
 * sequences 3,432 / 3,415 tok/s against 2,775 / 2,768 (two runs each;
 * Q8_0 at 4 rows takes mvp_kernel, and 16 rows take the 16-row tiles).
 * Read once. */
static bool mma_occ2(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_MMA_OCC", "1");
}

/* The tensor-core kernel over the group's tiles, post one of mvp_kernel's
 * (MVP_SWIGLU: gate and up, the up's tiles from g.at[1]). Rows alone give
 * few blocks at small N (a 2,048-row weight at M = 64 was 8 blocks of 256
 * rows for 132 SMs: batched decode at 64 sequences ran slower on it than
 * on cuBLAS over a dequantized copy), so when the rows make fewer than two
 * blocks an SM, K is split over blocks too: each split's sums go to a
 * buffer, added in split order by mma_reduce_kernel, which applies post.
 * Tried and dropped (2026-12-06, H100): the split that ends last adding
 * the sums itself (an arrival count per block column), one launch less:
 * batched Q4_K decode at 4 and 16 sequences ran 3-9% slower than with the
 * reduce kernel (2,641 / 2,650 against 2,725 / 2,702 tok/s at 4; 6,719 /
 * 6,743 against 7,365 / 6,929 at 16): the one block left doing a
 * column's sums is a serial tail. */
template <class T, int NT, bool BF>
static int mma_launch(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int64_t M, int64_t K, int64_t tiles,
                      int post)
{
    typedef mma_cfg<T, NT> C;
    static_assert(C::SMEM <= 48 * 1024, "mma_kernel: shared memory past the default limit");
    static_assert(MMA_TB == 2, "mma_kernel: SWIGLU pairs a warp's two tiles");
    const int64_t per = (int64_t)C::WN * MMA_TB;
    const int64_t blocks = post == MVP_SWIGLU ? (g.at[1] + C::WN - 1) / C::WN : (tiles + per - 1) / per;
    const int64_t chunks = (g.v[0].kp + C::R - 1) / C::R, want = 2 * (int64_t)sm_count(c->ordinal);
    int64_t ks = 1, cps = chunks;
    if (blocks < want && chunks > 1 && mma_split_on()) {
        const size_t split_bytes = (size_t)M * (size_t)tiles * 16 * sizeof(float);
        int64_t s = (want + blocks - 1) / blocks;
        if (s > (int64_t)(MMA_PART_MAX / split_bytes))
            s = (int64_t)(MMA_PART_MAX / split_bytes);
        s = s < chunks ? s : chunks;
        if (s > 1) {
            cps = (chunks + s - 1) / s;
            s = (chunks + cps - 1) / cps; /* no empty split */
        }
        if (s > 1 && mma_part(c, (size_t)s * split_bytes))
            ks = s;
        else
            cps = chunks;
    }
    const bool pdl = mma_pdl_on();
    float *part = ks > 1 ? ((mm_ctx *)c->mm)->part : NULL;
    const dim3 grid((unsigned)blocks, (unsigned)ks), block(MMA_WARPS * 32);
    cudaError_t e =
        NT == 1 && q8dot<T>::on && mma_occ2()
            ? cu_launch(pdl, mma_kernel<T, NT, BF, 2>, grid, block, C::SMEM, c->s, g, X, ldx, (int)M, K, tiles,
                        (int)cps, part, post)
            : cu_launch(pdl, mma_kernel<T, NT, BF, 1>, grid, block, C::SMEM, c->s, g, X, ldx, (int)M, K, tiles,
                        (int)cps, part, post);
    int rc = cu_fail(ks > 1 ? "mma_kernel (split)" : "mma_kernel", e);
    if (!rc && ks > 1) {
        const int64_t n = M * 16 * (post == MVP_SWIGLU ? g.at[1] : tiles);
        e = cu_launch(pdl, mma_reduce_kernel, dim3((unsigned)((n + 255) / 256)), dim3(256), 0, c->s, g,
                      (const float *)part, (int)ks, (int)M, tiles, post);
        rc = cu_fail("mma_reduce_kernel", e);
    }
    return rc;
}

template <class T, bool BF>
static int mma_rows(cu_ctx *c, const mgroup &g, const float *X, int64_t ldx, int64_t M, int64_t tiles, int64_t K,
                    int post = MVP_STORE)
{
    if (M <= 8)
        return mma_launch<T, 1, BF>(c, g, X, ldx, M, K, tiles, post);
    if (M <= 16)
        return mma_launch<T, 2, BF>(c, g, X, ldx, M, K, tiles, post);
    if (M <= 32)
        return mma_launch<T, 4, BF>(c, g, X, ldx, M, K, tiles, post);
    return mma_launch<T, 8, BF>(c, g, X, ldx, M, K, tiles, post);
}

/* One group: the mat-vec (fp32) or, when mma, the tensor-core kernel (M
 * <= MMA_MAX_M). With f (cu_matmul_fused): at M = 1 mvg_fused; at M > 1
 * the epilogue (post, no norm) in mvp_kernel's rows of X or mma_kernel,
 * else HEARTH_EUNSUPPORTED with nothing launched. */
static int group_launch(cu_ctx *c, const mgroup &g, hearth_dtype t, bool mma, const float *X, int64_t ldx,
                        int64_t M, int64_t nr, int64_t K, const hearth_mm_fuse *f)
{
    if (f && M == 1) {
#define MVF_CALL(T) mvg_fused<T>(c, g, X, ldx, nr, K, f)
        MM_DISPATCH(t, MVF_CALL)
#undef MVF_CALL
    }
    int post = MVP_STORE;
    if (f) {
        const bool pair = g.cnt == 2 && g.n[0] == g.n[1] && g.ldy[0] >= g.n[0];
        if (f->pre != HEARTH_MM_PRE_NONE || (f->post == HEARTH_MM_SWIGLU && !pair) || !mma || t == HEARTH_F32)
            return HEARTH_EUNSUPPORTED;
        post = f->post == HEARTH_MM_SWIGLU ? MVP_SWIGLU : f->post == HEARTH_MM_ADD ? MVP_ADD : MVP_STORE;
    }
    if (M >= 2 && mvp_rows_take(t, g.v[0].kp, M)) {
        switch (t) {
        case HEARTH_Q8_0: return mvp_rows<tr_q8_0>(c, g, X, ldx, M, nr, K, post);
        case HEARTH_Q4_0: return mvp_rows<tr_q4_0>(c, g, X, ldx, M, nr, K, post);
        case HEARTH_Q4_K: return mvp_rows<tr_q4_k>(c, g, X, ldx, M, nr, K, post);
        default: return HEARTH_EUNSUPPORTED;
        }
    }
    if (mma && t != HEARTH_F32) {
        switch (t) {
        case HEARTH_F16: return mma_rows<tr_half<false>, false>(c, g, X, ldx, M, nr, K, post);
        case HEARTH_BF16: return mma_rows<tr_half<true>, true>(c, g, X, ldx, M, nr, K, post);
        case HEARTH_Q8_0: return mma_rows<tr_q8_0, false>(c, g, X, ldx, M, nr, K, post);
        case HEARTH_Q4_0: return mma_rows<tr_q4_0, false>(c, g, X, ldx, M, nr, K, post);
        case HEARTH_Q4_K: return mma_rows<tr_q4_k, false>(c, g, X, ldx, M, nr, K, post);
        case HEARTH_Q6_K: return mma_rows<tr_q6_k, false>(c, g, X, ldx, M, nr, K, post);
        default: return HEARTH_EUNSUPPORTED;
        }
    }
#define MVG_CALL(T) mvg_rows<T>(c, g, X, ldx, M, nr, K)
    MM_DISPATCH(t, MVG_CALL)
#undef MVG_CALL
}

/* The weights in groups of one type (and width), one launch each, in the
 * order of their first weight. nr counts rows (mat-vec) or 16-row tiles
 * (mma: each weight starts on a tile). */
static int grouped(cu_ctx *c, const cu_weight *const *w, int n, const float *X, int64_t ldx, int64_t M,
                   float *const *Y, const int64_t *ldy, bool mma, const hearth_mm_fuse *f = NULL)
{
    if (n > MM_GROUP)
        return HEARTH_EINVAL;
    bool done[MM_GROUP] = {false, false, false, false};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (done[i])
            continue;
        mgroup g;
        memset(&g, 0, sizeof g);
        int64_t nr = 0;
        /* counted in 16-row tiles for the tensor-core kernel, in rows for the mat-vecs */
        const bool tiles = mma && !mvp_rows_take(w[i]->type, view_of(w[i]).kp, M);
        for (int j = i; j < n; j++) {
            if (done[j] || w[j]->type != w[i]->type || w[j]->n_in != w[i]->n_in)
                continue;
            g.v[g.cnt] = view_of(w[j]);
            g.y[g.cnt] = Y[j];
            g.ldy[g.cnt] = ldy[j];
            g.n[g.cnt] = w[j]->n_out;
            g.at[g.cnt] = nr;
            nr += tiles ? (w[j]->n_out + 15) / 16 : w[j]->n_out;
            g.cnt++;
            done[j] = true;
        }
        rc = group_launch(c, g, w[i]->type, mma, X, ldx, M, nr, w[i]->n_in, f);
    }
    return rc;
}

/* HEARTH_CUDA_MM: "legacy" selects matmul_legacy; HEARTH_CUDA_MM_MMA_MAX
 * (0 .. 64, default MMA_DEFAULT_M) is the largest M on the tensor-core
 * kernel (0: none).
 * Read once (a plain read: the same answer if two threads race). */
static int mm_env(int *mma_max)
{
    static int legacy = -1, mx = MMA_DEFAULT_M;
    if (legacy < 0) {
        const char *e = getenv("HEARTH_CUDA_MM");
        const char *x = getenv("HEARTH_CUDA_MM_MMA_MAX");
        if (x) {
            long v = strtol(x, NULL, 10);
            mx = v < 0 ? 0 : v > MMA_MAX_M ? MMA_MAX_M : (int)v;
        }
        legacy = e && strcmp(e, "legacy") == 0;
        if (legacy)
            hearth_log(HEARTH_LOG_INFO, "cuda: matmul: HEARTH_CUDA_MM=legacy: one launch per weight, no mma kernel");
    }
    *mma_max = mx;
    return legacy;
}

int cu_matmul(cu_ctx *c, const cu_weight *const *w, int n, const float *X, int64_t ldx, int64_t M, float *const *Y,
              const int64_t *ldy)
{
    if (M <= 0 || n <= 0)
        return M == 0 ? 0 : HEARTH_EINVAL;
    int mma_max;
    /* F32 weights (rare: tiny models, tests) keep the verified per-weight
     * path: the grouped kernels gave wrong rows for them on the H200 */
    bool f32 = false;
    for (int i = 0; i < n; i++)
        f32 = f32 || w[i]->type == HEARTH_F32;
    if (mm_env(&mma_max) || f32)
        return matmul_legacy(c, w, n, X, ldx, M, Y, ldy);
    if (M >= 2 && M <= mma_max)
        return grouped(c, w, n, X, ldx, M, Y, ldy, true);
    if (M > MV_MAX_M) {
        pthread_once(&blas_once, blas_open);
        if (blas.ok)
            return gemm(c, w, n, X, ldx, M, Y, ldy);
    }
    return grouped(c, w, n, X, ldx, M, Y, ldy, false);
}

int cu_fuse_mode(void)
{
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("HEARTH_CUDA_FUSE");
        mode = e && strcmp(e, "0") == 0 ? 0 : e && strcmp(e, "norm") == 0 ? 2 : 1;
    }
    return mode;
}

/* HEARTH_CUDA_FUSE_ROPE=0: the QK step (RoPE, K and V into the cache)
 * runs apart (ops.cu's qk_kernel) instead of in the Q/K/V mat-vec's
 * stores. Read once. */
static bool rope_fuse_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_FUSE_ROPE", "0");
}

/* Whether the Q/K/V mat-vec can do the QK step in its stores: one row (M
 * = 1), Q, K and V (K and V of one shape, the cache's rows), nothing in
 * the QK step but llama's RoPE of pairs (2i, 2i + 1) (no biases, no
 * QK-norm: they need a head's rows together), an even head and rotation,
 * a cache of f32 or f16 with this row width. */
static bool rope_fusable(const cu_weight *const *w, int n, int64_t M, const hearth_mm_fuse *f)
{
    const hearth_qk *q = f->qk;
    if (!rope_fuse_on() || M != 1 || n != 3 || !q || !f->kv || !f->b)
        return false;
    if (q->bq || q->bk || q->bv || q->q_norm || q->k_norm || q->rope_type != 0 || q->hd < 2 || q->hd % 2 ||
        q->n_rot % 2 || q->n_rot > q->hd || q->hd > CU_HEAD_DIM_MAX)
        return false;
    const int64_t kvd = q->n_head_kv * q->hd;
    return w[0]->n_out == q->n_head * q->hd && w[1]->n_out == kvd && w[2]->n_out == kvd && f->kv->kv_dim == kvd &&
           (f->kv->type == HEARTH_F16 || f->kv->type == HEARTH_F32) && f->layer >= 0 && f->layer < f->kv->n_layer &&
           f->b->n == 1;
}

int cu_matmul_fused(cu_ctx *c, const cu_weight *const *w, int n, const float *X, int64_t ldx, int64_t M,
                    float *const *Y, const int64_t *ldy, const hearth_mm_fuse *f)
{
    int mma_max;
    const int mode = cu_fuse_mode();
    if (M < 1 || n <= 0 || mode == 0 || mm_env(&mma_max) || M > cu_fused_rows_max())
        return HEARTH_EUNSUPPORTED;
    if (f->pre == HEARTH_MM_PRE_RMSNORM && (M > 1 || (mode < 2 && !mvp_norm_on())))
        return HEARTH_EUNSUPPORTED;
    if (f->post == HEARTH_MM_SWIGLU && (n != 2 || w[0]->type != w[1]->type || w[0]->n_out != w[1]->n_out))
        return HEARTH_EUNSUPPORTED;
    if (f->post == HEARTH_MM_QK_ROPE_STORE && !rope_fusable(w, n, M, f))
        return HEARTH_EUNSUPPORTED;
    for (int i = 0; i < n; i++)
        if (w[i]->type == HEARTH_F32 || w[i]->type != w[0]->type)
            return HEARTH_EUNSUPPORTED; /* one launch, or none */
    return grouped(c, w, n, X, ldx, M, Y, ldy, M > 1, f);
}

/* HEARTH_CUDA_FUSE_ROWS=0: the epilogues for one row only (read once). */
int cu_fused_rows_max(void)
{
    static int rows = -1;
    if (rows < 0) {
        const char *e = getenv("HEARTH_CUDA_FUSE_ROWS");
        int mma_max;
        const int legacy = mm_env(&mma_max);
        rows = cu_fuse_mode() == 0 ? 0 : legacy || (e && strcmp(e, "0") == 0) || mma_max < 2 ? 1 : mma_max;
    }
    return rows;
}

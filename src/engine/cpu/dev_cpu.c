/* dev_cpu.c: the CPU device of engine/dev.h: memory, the stream's arena,
 * weights, capabilities, the row-splitting policy and MATMUL. The row ops
 * are in dev_cpu_rows.c, the attentions in dev_cpu_attn.c.
 *
 * How: device memory is host memory (malloc; caps.host_memory), so upload,
 * download and copy are memcpy and sync has nothing to wait for. A stream is
 * its pool: every op splits its rows over it by the policy the walks had
 * before the seam (cpu_rows: ROWS_PARALLEL_MIN rows and up on the pool,
 * fewer on the caller, where a pool job would cost more than the work: the
 * per-token ops were ~4% of a 128-token F16 prompt on one thread while the
 * other waited). The stream's arena is the driving thread's pass scratch
 * (matmul.h's hearth_cpu_pass_scratch) up to HEARTH_PASS_SCRATCH_MAX, so a
 * thread that serves passes keeps one buffer at one address, and encoder
 * engines running passes at once each have their own; above it, a block the
 * stream owns, kept until the stream is deinit'ed. Passes that malloc'd and
 * freed their buffer each time had glibc map and unmap it, and every unmap
 * interrupted the other core to flush its TLB.
 *
 * Weights: AS_STORED reads the mapped rows in place; COMPACT packs F16 into
 * the GEMM's f16 panels where this CPU's kernels take them (~20% of an F16
 * prefill GEMM was packing; the mapped copy may then be released); FAST packs
 * F32 into f32 panels kept beside the rows (MiniLM +43% sentences/s at batch
 * 1; matmul.c's PANEL_COPY_MIN_M). MATMUL of several weights is matmul.h's
 * group call (one X prepared once, one pool job: Q, K, V of a decode step in
 * 38 us instead of 45 at M = 4); a group mixing packed and unpacked weights
 * runs one call each.
 *
 * Rejected: a stream arena allocated per stream and kept in the model (it
 * made llama "one forward at a time per model" and gave each encoder model a
 * size-dependent state); per-ISA op tables here (the kernels below already
 * pick their ISA once, in matmul.c and attn.c). */
#include "engine/cpu/dev_cpu.h"
#include "engine/cpu/quant.h"
#include "engine/cpu/vision.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- kernels and the row policy ---- */

static cpu_kernels kernels;
static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;

static void kernels_pick(void)
{
    kernels.attn_f32 = hearth_attn_pick(HEARTH_F32);
    kernels.attn_f16 = hearth_attn_pick(HEARTH_F16);
    kernels.put_f16 = hearth_attn_store_pick();
}

const cpu_kernels *cpu_dev_kernels(void)
{
    pthread_once(&kernels_once, kernels_pick);
    return &kernels;
}

typedef struct rows_job {
    cpu_rows_fn fn;
    void *job;
    int64_t rows, per;
} rows_job;

static void rows_task(void *ctx, int64_t t, int64_t n_tasks)
{
    const rows_job *J = ctx;
    int64_t r0 = t * J->per, r1 = r0 + J->per < J->rows ? r0 + J->per : J->rows;
    J->fn(J->job, r0, r1);
}

void cpu_rows(hearth_stream *st, int64_t rows, int64_t par_min, cpu_rows_fn fn, void *job)
{
    if (rows <= 0)
        return;
    int threads = hearth_pool_size(st->pool);
    if (rows < par_min || threads < 2) {
        fn(job, 0, rows);
        return;
    }
    int64_t tasks = 4 * (int64_t)threads;
    rows_job J = {fn, job, rows, (rows + tasks - 1) / tasks};
    hearth_pool_run(st->pool, rows_task, &J, (rows + J.per - 1) / J.per);
}

/* ---- memory ---- */

static void *cpu_alloc(hearth_dev *dev, size_t bytes, hearth_err *err)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) {
        hearth_err_set(err, HEARTH_ENOMEM, "cpu: out of memory for %zu bytes", bytes);
        return NULL;
    }
    return p;
}

static void cpu_free(hearth_dev *dev, void *p)
{
    free(p);
}

static int cpu_memcpy(hearth_stream *st, void *dst, const void *src, size_t bytes)
{
    if (bytes && dst != src)
        memmove(dst, src, bytes);
    return 0;
}

static int cpu_sync(hearth_stream *st)
{
    return 0;
}

static int cpu_scratch(hearth_stream *st, size_t bytes, size_t staging_bytes)
{
    size_t dev_bytes = (bytes + 63) & ~(size_t)63, total = dev_bytes + staging_bytes;
    if (total < dev_bytes)
        return HEARTH_ENOMEM;
    char *p = NULL;
    if (total <= HEARTH_PASS_SCRATCH_MAX) {
        p = hearth_cpu_pass_scratch(total);
    } else if (st->owned && st->scratch_bytes + st->staging_bytes >= total) {
        p = st->owned;
    }
    if (!p) {
        free(st->owned);
        st->owned = NULL;
        if (posix_memalign((void **)&p, 64, total) != 0) {
            st->scratch = st->staging = NULL;
            st->scratch_bytes = st->staging_bytes = 0;
            return HEARTH_ENOMEM;
        }
        st->owned = p;
    }
    st->scratch = p;
    st->scratch_bytes = dev_bytes;
    st->staging = p + dev_bytes;
    st->staging_bytes = staging_bytes;
    return 0;
}

static void cpu_stream_deinit(hearth_stream *st)
{
    free(st->owned);
    st->owned = NULL;
}

/* ---- weights and capabilities ---- */

static void cpu_weight_free(hearth_weight *w)
{
    if (!w)
        return;
    hearth_cpu_prepacked_free(w->packed);
    free(w);
}

static hearth_weight *cpu_weight_new(hearth_dev *dev, const hearth_weight_desc *d, hearth_err *err)
{
    const char *name = d->name ? d->name : "weight";
    hearth_weight *w = calloc(1, sizeof *w);
    if (!w) {
        hearth_err_set(err, HEARTH_ENOMEM, "cpu: out of memory for %s", name);
        return NULL;
    }
    *w = (hearth_weight){d->type, d->data, d->row_bytes, d->n_out, d->n_in, NULL};
    bool pack = (d->place == HEARTH_WEIGHT_COMPACT && hearth_cpu_prepack_replaces(d->type)) ||
                (d->place == HEARTH_WEIGHT_FAST && d->type == HEARTH_F32);
    if (pack) {
        w->packed = hearth_cpu_prepack(d->type, d->data, d->row_bytes, d->n_out, d->n_in);
        /* NULL is not an error where this CPU's kernels take no panels; it
         * is where they do and the memory was not there */
        if (!w->packed && hearth_cpu_prepack_wanted(d->type)) {
            free(w);
            hearth_err_set(err, HEARTH_ENOMEM, "cpu: out of memory packing %s (%lld x %lld)", name,
                           (long long)d->n_out, (long long)d->n_in);
            return NULL;
        }
    }
    return w;
}

static bool cpu_weight_reads_host(const hearth_weight *w)
{
    return !w->packed || hearth_cpu_prepacked_needs_weights(w->packed);
}

static void cpu_weight_chain(hearth_weight *w, const hearth_weight *next)
{
    if (w && w->packed && next && next->packed)
        hearth_cpu_prepack_chain(w->packed, next->packed);
}

static bool cpu_supports(const hearth_dev *dev, hearth_op op, hearth_dtype t)
{
    switch (op) {
    case HEARTH_OP_MATMUL:
    case HEARTH_OP_EMBED: return (int)t >= 0 && t < HEARTH_DTYPE_COUNT_ && hearth_quant_vec_dot_ref_fn(t) != NULL;
    case HEARTH_OP_QK_ROPE_STORE:
    case HEARTH_OP_ATTN_CACHED: return t == HEARTH_F32 || t == HEARTH_F16;
    default: return (int)op >= 0 && op < HEARTH_OP_COUNT_ && t == HEARTH_F32;
    }
}

/* ---- MATMUL ---- */

static int mm_one(hearth_pool *pool, const hearth_weight *w, const float *X, int64_t x_stride, int64_t M, float *Y,
                  int64_t y_stride)
{
    return w->packed ? hearth_cpu_matmul_prepacked(pool, w->packed, X, x_stride, M, Y, y_stride)
                     : hearth_cpu_matmul(pool, w->type, w->data, w->row_bytes, w->n_out, w->n_in, X, x_stride, M, Y,
                                         y_stride);
}

static int cpu_matmul(hearth_stream *st, const hearth_weight *const *ws, int n, const float *X, int64_t x_stride,
                      int64_t M, float *const *ys, const int64_t *y_strides)
{
    if (!ws || n < 1 || n > HEARTH_MM_GROUP_MAX)
        return HEARTH_EINVAL;
    hearth_pool *pool = st->pool;
    if (n == 1)
        return mm_one(pool, ws[0], X, x_stride, M, ys[0], y_strides[0]);
    hearth_cpu_mm_out outs[HEARTH_MM_GROUP_MAX];
    const hearth_cpu_prepacked *pws[HEARTH_MM_GROUP_MAX];
    int n_packed = 0;
    for (int i = 0; i < n; i++) {
        if (ws[i]->n_in != ws[0]->n_in)
            return HEARTH_EINVAL;
        outs[i] = (hearth_cpu_mm_out){ws[i]->type, ws[i]->data, ws[i]->row_bytes, ws[i]->n_out, ys[i], y_strides[i]};
        pws[i] = ws[i]->packed;
        n_packed += pws[i] != NULL;
    }
    if (n_packed > 0 && n_packed < n) { /* mixed types: one call each */
        for (int i = 0; i < n; i++) {
            int rc = mm_one(pool, ws[i], X, x_stride, M, ys[i], y_strides[i]);
            if (rc)
                return rc;
        }
        return 0;
    }
    return n_packed ? hearth_cpu_matmul_prepacked_group(pool, pws, ys, y_strides, n, X, x_stride, M)
                    : hearth_cpu_matmul_group(pool, outs, n, ws[0]->n_in, X, x_stride, M);
}

/* ---- the device ---- */

static const hearth_dev_ops cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .host_alloc = cpu_alloc, /* the CPU's memory is the host's */
    .host_free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .sync = cpu_sync,
    .scratch = cpu_scratch,
    .stream_deinit = cpu_stream_deinit,
    .weight_new = cpu_weight_new,
    .weight_free = cpu_weight_free,
    .weight_reads_host = cpu_weight_reads_host,
    .weight_chain = cpu_weight_chain,
    .supports = cpu_supports,
    .matmul = cpu_matmul,
    .embed = cpu_embed,
    .rmsnorm = cpu_rmsnorm,
    .add = cpu_add,
    .add_rmsnorm = cpu_add_rmsnorm,
    .swiglu = cpu_swiglu,
    .argmax_rows = cpu_argmax_rows,
    .argmax_feed = cpu_argmax_feed,
    .qk_rope_store = cpu_qk_rope_store,
    .attn_cached = cpu_attn_cached,
    .add_layernorm = cpu_add_layernorm,
    .bias_gelu = cpu_bias_gelu,
    .attn_packed = cpu_attn_packed,
    .pool = cpu_pool,
    .vision = &hearth_cpu_vision_ops,
};

static hearth_dev cpu_dev = {
    .ops = &cpu_ops,
    .caps = {.name = "cpu", .head_dim_max = HEARTH_ATTN_HEAD_DIM_MAX, .matmul_group_max = HEARTH_MM_GROUP_MAX,
             .host_memory = true},
};

hearth_dev *hearth_dev_cpu(void)
{
    cpu_dev_kernels();
    return &cpu_dev;
}

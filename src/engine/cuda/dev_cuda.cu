/* dev_cuda.cu: the CUDA device behind engine/dev.h: one hearth_dev per usable
 * GPU, its memory calls, streams with their arenas, the record/replay of
 * passes as CUDA graphs, and the op table, whose kernels are mm.cu's
 * (weights, matmul, embedding rows) and ops.cu's (row ops, attention).
 *
 * How:
 *   - Contexts. A hearth_stream is opened per pass (the walks open one per
 *     forward), but a GPU stream, its arena and its recorded graphs must
 *     outlive the pass to be worth anything. So each host thread keeps one
 *     cu_ctx per device (a thread-specific table, freed when the thread
 *     ends): the CUDA stream, the arena (device memory) and the staging
 *     block (pinned host memory, so the per-step upload is a true async
 *     DMA and can be a graph node), and the graphs. Every hearth_stream that
 *     thread opens on the device borrows it (st->impl); stream_deinit gives
 *     nothing back. The arena only grows, so its address is fixed once the
 *     largest pass has run, which is what rule 2 of dev.h needs.
 *   - Graphs. graph_begin looks the key up: a recorded pass is launched as
 *     one cudaGraphLaunch (a decode step of a 1B model is ~200 launches;
 *     replayed, the CPU's launch cost leaves the step). A key seen for the
 *     first time runs plain (its first run sizes every workspace, so nothing
 *     allocates while recording), the second time it is captured
 *     (cudaStreamCaptureModeThreadLocal: a forbidden call fails the capture
 *     instead of silently running). Records are dropped when the arena or
 *     the staging block moves; HEARTH_CUDA_GRAPHS=0 turns recording off.
 *   - Errors. Every CUDA call's status goes through cu_fail, which logs the
 *     call and CUDA's error string; the op returns HEARTH_EDEVICE and the
 *     caller (the scheduler) fails the request, never the process.
 *
 * Rejected: a CUDA stream per hearth_stream (created and destroyed per
 * forward: ~10 us each, and no graph could be replayed across passes);
 * cudaMallocAsync pools for the arena (the arena is one block reused
 * forever; a pool adds nothing but a second allocator to reason about);
 * recording on first sight (the first run of a shape may still size a
 * workspace, and allocation is illegal during capture). */
extern "C" {
#include "base/clock.h"
#include "base/err.h"
#include "base/log.h"
#include "engine/cuda/dev_cuda.h"
#include "engine/gpu.h"
}
#include "engine/cuda/cuda_int.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRAPH_MAX 96        /* recorded passes per context: decode steps of 1..64 rows and a few more */
#define MM_GROUP_MAX 4      /* weights one matmul call takes */

/* Per ordinal: a sticky error was seen, the context is gone (dev.h's lost). */
static volatile bool ctx_lost[HEARTH_GPU_MAX]; /* set once, read anywhere: a plain flag is enough */
static __thread int cur_ordinal = -1;

/* The errors after which a CUDA context cannot run anything again. */
static bool sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout: return true;
    default: return false;
    }
}

int cu_fail(const char *what, cudaError_t e)
{
    if (e == cudaSuccess)
        return 0;
    bool gone = sticky(e);
    hearth_log(HEARTH_LOG_ERROR, "cuda: %s failed: %s (%s)%s", what, cudaGetErrorString(e), cudaGetErrorName(e),
               gone ? "; the device's context is lost to this process" : "");
    if (gone && cur_ordinal >= 0 && cur_ordinal < HEARTH_GPU_MAX)
        ctx_lost[cur_ordinal] = true;
    return HEARTH_EDEVICE;
}

int cu_uploads_landed(const char *what)
{
    return cu_fail(what, cudaStreamSynchronize(0));
}

/* ---- devices ---- */

typedef struct cuda_dev {
    hearth_dev dev;           /* first: a hearth_dev * is a cuda_dev * */
    int ordinal;
    char name[24];            /* "cuda:0" */
} cuda_dev;

static cuda_dev cdevs[HEARTH_GPU_MAX];
extern const hearth_dev_ops hearth_cuda_ops;

int hearth_dev_cuda_ordinal(const hearth_dev *dev)
{
    return dev && dev->ops == &hearth_cuda_ops ? ((const cuda_dev *)dev)->ordinal : -1;
}

/* HEARTH_CUDA_RUN_GRAPH=0: a run of greedy passes is recorded pass by
 * pass, each replay launched on its own with its draw after it, not as one
 * record of the whole run (caps.graph_runs). */
static bool graph_runs_on(void)
{
    const char *e = getenv("HEARTH_CUDA_RUN_GRAPH");
    return !(e && strcmp(e, "0") == 0);
}

int hearth_dev_cuda_list(hearth_dev **out, int max)
{
    hearth_gpu_list l;
    hearth_gpu_probe(&l);
    int n = 0;
    for (int i = 0; i < l.n && n < max && n < HEARTH_GPU_MAX; i++) {
        if (!l.gpus[i].usable)
            continue;
        cuda_dev *d = &cdevs[n];
        d->ordinal = l.gpus[i].index;
        snprintf(d->name, sizeof d->name, "cuda:%d", d->ordinal);
        d->dev.ops = &hearth_cuda_ops;
        d->dev.caps.name = d->name;
        d->dev.caps.head_dim_max = CU_HEAD_DIM_MAX;
        d->dev.caps.matmul_group_max = MM_GROUP_MAX;
        d->dev.caps.fused_rows_max = cu_fused_rows_max(); /* mm.cu: the epilogues of batched steps too */
        d->dev.caps.host_memory = false;
        d->dev.caps.graph_runs = graph_runs_on();
        /* rows of X on tensor cores: rounded to bfloat16 for BF16 weights
         * (7 fraction bits: half an ulp is 2^-8 of the value; until
         * 2026-12-03 this said 2^-9, which test_dev_ops first caught at 12
         * rows of a 7-wide BF16 weight), to half for the rest (2^-11, and
         * 2^-11 more for a weight dequantized to half) */
        d->dev.caps.matmul_round = 1.0 / 256;
        d->dev.ctx = d;
        out[n++] = &d->dev;
    }
    return n;
}

static int ordinal_of(const hearth_dev *dev)
{
    return ((const cuda_dev *)dev)->ordinal;
}

/* cudaSetDevice when this thread's current device differs (the call is
 * cheap but not free, and every op makes it). */
static int use_device(int ordinal)
{
    if (cur_ordinal == ordinal)
        return 0;
    int rc = cu_fail("cudaSetDevice", cudaSetDevice(ordinal));
    if (!rc)
        cur_ordinal = ordinal;
    return rc;
}

/* ---- per-thread contexts ---- */

typedef struct graph_rec {
    hearth_graph_key key;
    int state;                /* 1: seen once (ran plain); 2: recorded (exec); -1: not recordable */
    cudaGraphExec_t exec;
    uint64_t used;            /* for eviction: the context's tick when last used */
} graph_rec;

typedef struct thread_ctx {
    cu_ctx c;
    void *arena;              /* device memory */
    size_t arena_bytes;
    void *staging;            /* pinned host memory */
    size_t staging_bytes;
    graph_rec graphs[GRAPH_MAX];
    int n_graphs;
    uint64_t tick;
    graph_rec *capturing;     /* the record being captured, or NULL */
    struct replay_times *rt;  /* HEARTH_CUDA_REPLAY_TIMES's sums, or NULL */
} thread_ctx;

/* HEARTH_CUDA_REPLAY_TIMES=1: how much of a replayed pass is the GPU's.
 * Each replay is bracketed by two events; at the next replay (the walk has
 * synced since; in a run of steps this waits for it, so the run's passes
 * are timed one after another) its GPU time is added up with the host
 * time from one replay's launch to the next, and every 256 replays both
 * means are logged: their difference is what the host spends per step
 * between passes (the download, the sampler, the next upload). A
 * diagnostic asked for by name, so it logs as a warning (`hearth run`
 * shows no info lines); the events cost a little themselves. */
typedef struct replay_times {
    cudaEvent_t e0, e1;
    bool pending;
    uint64_t last_ns;
    double gpu_us, wall_us;
    int n;
} replay_times;
static bool replay_times_on = false;

static void replay_times_launch(thread_ctx *t)
{
    if (!t->rt) {
        t->rt = (replay_times *)calloc(1, sizeof *t->rt);
        if (!t->rt || cudaEventCreate(&t->rt->e0) != cudaSuccess || cudaEventCreate(&t->rt->e1) != cudaSuccess) {
            replay_times_on = false;
            return;
        }
    }
    replay_times *r = t->rt;
    const uint64_t now = hearth_now_ns();
    float ms = 0;
    if (r->pending && cudaEventSynchronize(r->e1) == cudaSuccess && cudaEventElapsedTime(&ms, r->e0, r->e1) == cudaSuccess) {
        r->gpu_us += ms * 1e3;
        r->wall_us += (double)(now - r->last_ns) / 1e3;
        if (++r->n == 256) {
            hearth_log(HEARTH_LOG_WARN, "cuda: %d replays: %.1f us on the GPU each, %.1f us from one launch to the next",
                       r->n, r->gpu_us / r->n, r->wall_us / r->n);
            r->n = 0;
            r->gpu_us = r->wall_us = 0;
        }
    }
    r->last_ns = now;
    r->pending = true;
}

static pthread_key_t ctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static bool graphs_on = true;
/* HEARTH_CUDA_GRAPH_LOG=1: each record's first sight, capture and
 * instantiation (with its time) and each eviction logged as a warning (a
 * diagnostic asked for by name: `hearth run` shows no info lines), to see
 * whether a workload keeps recording. */
static bool graph_log_on = false;

static void graphs_drop(thread_ctx *t)
{
    for (int i = 0; i < t->n_graphs; i++)
        if (t->graphs[i].state == 2)
            cudaGraphExecDestroy(t->graphs[i].exec);
    t->n_graphs = 0;
}

static void ctx_free(thread_ctx *t)
{
    if (!t)
        return;
    cudaSetDevice(t->c.ordinal);
    cur_ordinal = t->c.ordinal;
    if (t->c.s)
        cudaStreamSynchronize(t->c.s);
    graphs_drop(t);
    if (t->rt) {
        cudaEventDestroy(t->rt->e0);
        cudaEventDestroy(t->rt->e1);
        free(t->rt);
    }
    cu_mm_ctx_free(&t->c);
    cu_vis_ctx_free(&t->c);
    cudaFree(t->arena);
    cudaFreeHost(t->staging);
    if (t->c.s)
        cudaStreamDestroy(t->c.s);
    free(t);
}

/* At a thread's end: its contexts, one per device. */
static void ctxs_free(void *p)
{
    thread_ctx **tab = (thread_ctx **)p;
    for (int i = 0; i < HEARTH_GPU_MAX; i++)
        ctx_free(tab[i]);
    free(tab);
}

static void ctx_key_make(void)
{
    pthread_key_create(&ctx_key, ctxs_free);
    const char *g = getenv("HEARTH_CUDA_GRAPHS");
    graphs_on = !(g && strcmp(g, "0") == 0);
    const char *rt = getenv("HEARTH_CUDA_REPLAY_TIMES");
    replay_times_on = rt && strcmp(rt, "1") == 0;
    const char *gl = getenv("HEARTH_CUDA_GRAPH_LOG");
    graph_log_on = gl && strcmp(gl, "1") == 0;
}

/* This thread's context on st's device, made on first use. */
static thread_ctx *ctx_of(hearth_stream *st)
{
    if (st->impl) {
        thread_ctx *t = (thread_ctx *)st->impl;
        return use_device(t->c.ordinal) ? NULL : t;
    }
    pthread_once(&ctx_once, ctx_key_make);
    int ord = ordinal_of(st->dev);
    if (ord < 0 || ord >= HEARTH_GPU_MAX || use_device(ord))
        return NULL;
    thread_ctx **tab = (thread_ctx **)pthread_getspecific(ctx_key);
    if (!tab) {
        tab = (thread_ctx **)calloc(HEARTH_GPU_MAX, sizeof *tab);
        if (!tab || pthread_setspecific(ctx_key, tab)) {
            free(tab);
            return NULL;
        }
    }
    if (!tab[ord]) {
        thread_ctx *t = (thread_ctx *)calloc(1, sizeof *t);
        if (!t)
            return NULL;
        t->c.ordinal = ord;
        if (cu_fail("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&t->c.s, cudaStreamNonBlocking))) {
            free(t);
            return NULL;
        }
        tab[ord] = t;
    }
    st->impl = tab[ord];
    return tab[ord];
}

/* The calling thread's context on st's device, for the kernel families
 * outside this file (vision.cu): NULL when the device cannot be used. */
cu_ctx *cu_stream_ctx(hearth_stream *st)
{
    thread_ctx *t = ctx_of(st);
    return t ? &t->c : NULL;
}

#define CTX(st)                                                                                                      \
    thread_ctx *t_ = ctx_of(st);                                                                                     \
    if (!t_)                                                                                                         \
        return HEARTH_EDEVICE;                                                                                       \
    cu_ctx *c = &t_->c

/* ---- memory ---- */

static void *cuda_alloc(hearth_dev *dev, size_t bytes, hearth_err *err)
{
    int ord = ordinal_of(dev);
    void *p = NULL;
    if (use_device(ord)) {
        hearth_err_set(err, HEARTH_EDEVICE, "%s: cannot select the device", dev->caps.name);
        return NULL;
    }
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        hearth_err_set(err, HEARTH_ENOMEM, "%s: out of device memory: %zu bytes wanted, %zu of %zu free (%s)",
                       dev->caps.name, bytes, free_b, total_b, cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

/* Pinned and portable: a frame's inputs are filled on a handler thread and
 * copied by the model's thread, whatever device each has current. */
static void *cuda_host_alloc(hearth_dev *dev, size_t bytes, hearth_err *err)
{
    void *p = NULL;
    if (use_device(ordinal_of(dev))) {
        hearth_err_set(err, HEARTH_EDEVICE, "%s: cannot select the device", dev->caps.name);
        return NULL;
    }
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        cudaGetLastError();
        hearth_err_set(err, HEARTH_ENOMEM, "%s: cannot pin %zu bytes of host memory (%s)", dev->caps.name, bytes,
                       cudaGetErrorString(e));
        return NULL;
    }
    return p;
}

static void cuda_host_free(hearth_dev *dev, void *p)
{
    (void)dev;
    if (p)
        cudaFreeHost(p);
}

static void cuda_free(hearth_dev *dev, void *p)
{
    if (!p)
        return;
    if (!use_device(ordinal_of(dev)))
        cu_fail("cudaFree", cudaFree(p));
}

static int cuda_upload(hearth_stream *st, void *dst, const void *src, size_t bytes)
{
    CTX(st);
    return bytes ? cu_fail("cudaMemcpyAsync (upload)", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->s))
                 : 0;
}

static int cuda_download(hearth_stream *st, void *dst, const void *src, size_t bytes)
{
    CTX(st);
    return bytes ? cu_fail("cudaMemcpyAsync (download)",
                           cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->s))
                 : 0;
}

static int cuda_copy(hearth_stream *st, void *dst, const void *src, size_t bytes)
{
    CTX(st);
    return bytes && dst != src
               ? cu_fail("cudaMemcpyAsync (copy)", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->s))
               : 0;
}

static int cuda_sync(hearth_stream *st)
{
    CTX(st);
    return cu_fail("cudaStreamSynchronize", cudaStreamSynchronize(c->s));
}

static int cuda_scratch(hearth_stream *st, size_t bytes, size_t staging_bytes)
{
    CTX(st);
    thread_ctx *t = t_;
    if (c->recording)
        return HEARTH_EINVAL;
    bytes = (bytes + 63) & ~(size_t)63;
    if (t->arena_bytes < bytes || t->staging_bytes < staging_bytes) {
        /* the work in flight may still read them */
        int rc = cu_fail("cudaStreamSynchronize", cudaStreamSynchronize(c->s));
        if (rc)
            return rc;
        graphs_drop(t);
    }
    if (t->arena_bytes < bytes) {
        cudaFree(t->arena);
        t->arena = NULL;
        t->arena_bytes = 0;
        if (cudaMalloc(&t->arena, bytes) != cudaSuccess) {
            cudaGetLastError();
            t->arena = NULL;
            return HEARTH_ENOMEM;
        }
        t->arena_bytes = bytes;
    }
    if (t->staging_bytes < staging_bytes) {
        cudaFreeHost(t->staging);
        t->staging = NULL;
        t->staging_bytes = 0;
        if (cudaMallocHost(&t->staging, staging_bytes) != cudaSuccess) {
            cudaGetLastError();
            t->staging = NULL;
            return HEARTH_ENOMEM;
        }
        t->staging_bytes = staging_bytes;
    }
    st->scratch = t->arena;
    st->scratch_bytes = t->arena_bytes;
    st->staging = t->staging;
    st->staging_bytes = t->staging_bytes;
    return 0;
}

static void cuda_stream_deinit(hearth_stream *st)
{
    /* the context stays with the thread (see the header comment) */
    st->impl = NULL;
}

/* ---- graphs ---- */

static bool key_eq(const hearth_graph_key *a, const hearth_graph_key *b)
{
    return a->model == b->model && a->cache == b->cache && a->rows == b->rows && a->out_rows == b->out_rows &&
           a->steps == b->steps;
}

static graph_rec *graph_find(thread_ctx *t, const hearth_graph_key *key)
{
    for (int i = 0; i < t->n_graphs; i++)
        if (key_eq(&t->graphs[i].key, key))
            return &t->graphs[i];
    return NULL;
}

/* A slot for a new record: a free one, or the least recently used. */
static graph_rec *graph_add(thread_ctx *t, const hearth_graph_key *key)
{
    graph_rec *r;
    if (t->n_graphs < GRAPH_MAX) {
        r = &t->graphs[t->n_graphs++];
    } else {
        r = &t->graphs[0];
        for (int i = 1; i < GRAPH_MAX; i++)
            if (t->graphs[i].used < r->used)
                r = &t->graphs[i];
        if (r->state == 2)
            cudaGraphExecDestroy(r->exec);
        if (graph_log_on)
            hearth_log(HEARTH_LOG_WARN, "cuda graph: evicted %lld rows x %lld steps", (long long)r->key.rows,
                       (long long)r->key.steps);
    }
    memset(r, 0, sizeof *r);
    r->key = *key;
    return r;
}

static int cuda_graph_begin(hearth_stream *st, const hearth_graph_key *key)
{
    CTX(st);
    thread_ctx *t = t_;
    if (!graphs_on || c->recording)
        return 0;
    graph_rec *r = graph_find(t, key);
    bool first = !r;
    if (first) {
        r = graph_add(t, key);
        r->state = 1;
    }
    r->used = ++t->tick;
    if (graph_log_on && first)
        hearth_log(HEARTH_LOG_WARN, "cuda graph: first sight of %lld rows x %lld steps", (long long)key->rows,
                   (long long)key->steps);
    if (first || r->state == -1)
        return 0; /* plain: a first run sizes the workspaces */
    if (r->state == 2) {
        if (replay_times_on)
            replay_times_launch(t);
        if (replay_times_on)
            cudaEventRecord(t->rt->e0, c->s);
        cudaError_t e = cudaGraphLaunch(r->exec, c->s);
        if (replay_times_on)
            cudaEventRecord(t->rt->e1, c->s);
        return cu_fail("cudaGraphLaunch", e) ? HEARTH_EDEVICE : 1;
    }
    /* seen before: record this run */
    cudaError_t e = cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        cudaGetLastError();
        hearth_log(HEARTH_LOG_WARN, "cuda: cannot record a pass as a graph: %s; running it plain", cudaGetErrorString(e));
        r->state = -1;
        return 0;
    }
    c->recording = true;
    t->capturing = r;
    return 0;
}

static int cuda_graph_end(hearth_stream *st, const hearth_graph_key *key, int status)
{
    CTX(st);
    thread_ctx *t = t_;
    graph_rec *r = t->capturing;
    if (!c->recording || !r)
        return status; /* a plain run: its work is already enqueued */
    c->recording = false;
    t->capturing = NULL;
    cudaGraph_t g = NULL;
    const uint64_t t0 = graph_log_on ? hearth_now_ns() : 0;
    cudaError_t e = cudaStreamEndCapture(c->s, &g);
    if (e == cudaSuccess && status == 0)
        e = cudaGraphInstantiate(&r->exec, g, 0);
    if (graph_log_on)
        hearth_log(HEARTH_LOG_WARN, "cuda graph: recorded %lld rows x %lld steps, instantiated in %.2f ms",
                   (long long)key->rows, (long long)key->steps, (double)(hearth_now_ns() - t0) / 1e6);
    if (g)
        cudaGraphDestroy(g);
    if (e != cudaSuccess || status != 0) {
        /* the captured work never ran: the walk enqueues it again, plain,
         * and this key is not recorded again */
        hearth_log(HEARTH_LOG_WARN, "cuda: a pass of %lld rows could not be recorded as a graph (%s); running it plain",
                   (long long)key->rows, e != cudaSuccess ? cudaGetErrorString(e) : hearth_status_name(status));
        cudaGetLastError();
        r->state = -1;
        r->exec = NULL;
        return HEARTH_EAGAIN;
    }
    r->state = 2;
    return cu_fail("cudaGraphLaunch", cudaGraphLaunch(r->exec, c->s));
}

/* ---- weights and capabilities ---- */

static hearth_weight *cuda_weight_new(hearth_dev *dev, const hearth_weight_desc *d, hearth_err *err)
{
    cu_weight *w = (cu_weight *)calloc(1, sizeof *w);
    if (!w) {
        hearth_err_set(err, HEARTH_ENOMEM, "%s: out of host memory for %s", dev->caps.name, d->name ? d->name : "?");
        return NULL;
    }
    if (use_device(ordinal_of(dev)) || cu_weight_place(w, d, ordinal_of(dev), err)) {
        if (err && !err->code)
            hearth_err_set(err, HEARTH_EDEVICE, "%s: cannot place %s", dev->caps.name, d->name ? d->name : "?");
        free(w);
        return NULL;
    }
    return (hearth_weight *)w;
}

static void cuda_weight_free(hearth_weight *hw)
{
    cu_weight *w = (cu_weight *)hw;
    if (!w)
        return;
    if (!use_device(w->ordinal))
        cu_weight_release(w);
    free(w);
}

static bool cuda_weight_reads_host(const hearth_weight *w)
{
    return false;
}

static void cuda_weight_chain(hearth_weight *w, const hearth_weight *next)
{
}

static double cuda_copy_gbps(hearth_dev *dev, size_t bytes, hearth_err *err)
{
    void *a = NULL, *b = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double best = 0;
    const char *what = "cudaMalloc";
    cudaError_t e = use_device(ordinal_of(dev)) ? cudaErrorInvalidDevice : cudaMalloc(&a, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&b, bytes);
    if (e == cudaSuccess) {
        what = "cudaMemset";
        e = cudaMemset(a, 1, bytes);
    }
    if (e == cudaSuccess) {
        what = "cudaEventCreate";
        e = cudaEventCreate(&e0);
        if (e == cudaSuccess)
            e = cudaEventCreate(&e1);
    }
    for (int i = 0; i < 6 && e == cudaSuccess; i++) {
        what = "cudaMemcpy (device to device)";
        cudaEventRecord(e0, 0);
        e = cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(e1);
        float ms = 0;
        if (e == cudaSuccess && i > 0 && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms > 0) {
            double gbps = 2.0 * (double)bytes / (ms * 1e-3) / 1e9;
            best = gbps > best ? gbps : best;
        }
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        hearth_err_set(err, HEARTH_EDEVICE, "%s: %s failed: %s", dev->caps.name, what, cudaGetErrorString(e));
        best = 0;
    }
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return best;
}

static int cuda_mem_info(hearth_dev *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    size_t f = 0, t = 0;
    int rc = use_device(ordinal_of(dev));
    if (!rc)
        rc = cu_fail("cudaMemGetInfo", cudaMemGetInfo(&f, &t));
    *free_bytes = f;
    *total_bytes = t;
    return rc;
}

static bool cuda_lost(const hearth_dev *dev)
{
    int o = ordinal_of(dev);
    return o >= 0 && o < HEARTH_GPU_MAX && ctx_lost[o];
}

/* HEARTH_CUDA_ARGMAX=0: the device says it has no argmax, so greedy steps
 * download their logits rows and draw on the host, as before stop 35
 * (read once). */
static bool argmax_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_ARGMAX", "0");
}

/* HEARTH_CUDA_FEED=0: no argmax_feed, so a run of greedy passes uploads
 * each pass's block and copies the last draws into it, as before stop 42
 * (read once). */
static bool feed_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_FEED", "0");
}

static bool cuda_supports(const hearth_dev *dev, hearth_op op, hearth_dtype t)
{
    switch (op) {
    case HEARTH_OP_MATMUL:
    case HEARTH_OP_EMBED: return cu_mm_type_ok(t);
    case HEARTH_OP_QK_ROPE_STORE:
    case HEARTH_OP_ATTN_CACHED: return t == HEARTH_F32 || t == HEARTH_F16;
    case HEARTH_OP_ARGMAX: return t == HEARTH_F32 && argmax_on();
    case HEARTH_OP_ARGMAX_FEED: return t == HEARTH_F32 && argmax_on() && feed_on();
    default: return (int)op >= 0 && op < HEARTH_OP_COUNT_ && t == HEARTH_F32;
    }
}

/* ---- launch policy (cuda_int.h): programmatic dependent launches ---- */

bool cu_env_is(int *seen, const char *name, const char *value)
{
    if (*seen < 0) {
        const char *e = getenv(name);
        *seen = e && strcmp(e, value) == 0;
    }
    return *seen == 1;
}

/* HEARTH_CUDA_PDL=0: no programmatic dependent launches (cuda_int.h). */
bool cu_pdl_on(void)
{
    static int seen = -1;
    return !cu_env_is(&seen, "HEARTH_CUDA_PDL", "0");
}

bool cu_pdl_rows(int64_t rows)
{
    static int most = -1; /* the most rows that launch as dependents */
    if (most < 0) {
        const char *e = getenv("HEARTH_CUDA_PDL_ROWS");
        most = !cu_pdl_on() || (e && strcmp(e, "0") == 0) ? 0
               : e && strcmp(e, "all") == 0               ? INT_MAX
               : e && strcmp(e, "1") == 0                 ? 1
                                                          : 8;
    }
    return rows <= most;
}

/* ---- ops: argument checks here, kernels in mm.cu and ops.cu ---- */

/* matmul's and matmul_fused's argument checks: n weights of one width that
 * X's and each Y's strides cover, into cw. */
static bool mm_args_ok(const hearth_weight *const *ws, int n, int64_t x_stride, int64_t M, const int64_t *y_strides,
                       const cu_weight **cw)
{
    if (!ws || n < 1 || n > MM_GROUP_MAX || M < 0)
        return false;
    for (int i = 0; i < n; i++) {
        cw[i] = (const cu_weight *)ws[i];
        if (!cw[i] || cw[i]->n_in != cw[0]->n_in || x_stride < cw[i]->n_in || y_strides[i] < cw[i]->n_out)
            return false;
    }
    return true;
}

static int cuda_matmul(hearth_stream *st, const hearth_weight *const *ws, int n, const float *X, int64_t x_stride,
                       int64_t M, float *const *ys, const int64_t *y_strides)
{
    const cu_weight *cw[MM_GROUP_MAX];
    if (!mm_args_ok(ws, n, x_stride, M, y_strides, cw))
        return HEARTH_EINVAL;
    if (M == 0)
        return 0;
    CTX(st);
    return cu_matmul(c, cw, n, X, x_stride, M, ys, y_strides);
}

static int cuda_matmul_fused(hearth_stream *st, const hearth_weight *const *ws, int n, const float *X,
                             int64_t x_stride, int64_t M, float *const *ys, const int64_t *y_strides,
                             const hearth_mm_fuse *f)
{
    const cu_weight *cw[MM_GROUP_MAX];
    if (!f || !mm_args_ok(ws, n, x_stride, M, y_strides, cw))
        return HEARTH_EINVAL;
    if ((f->pre == HEARTH_MM_PRE_RMSNORM && !f->norm_w) || (f->post == HEARTH_MM_SWIGLU && n != 2) ||
        (f->post == HEARTH_MM_QK_ROPE_STORE && (n != 3 || !f->qk || !f->kv || !f->b)) ||
        f->pre < HEARTH_MM_PRE_NONE || f->pre > HEARTH_MM_PRE_RMSNORM || f->post < HEARTH_MM_STORE ||
        f->post > HEARTH_MM_QK_ROPE_STORE)
        return HEARTH_EINVAL;
    if (M == 0)
        return 0;
    CTX(st);
    return cu_matmul_fused(c, cw, n, X, x_stride, M, ys, y_strides, f);
}

static int cuda_embed(hearth_stream *st, float *Y, const hearth_weight *table, const hearth_batch *b,
                      const float *pos_tab, const float *type_row, const float *ln_w, const float *ln_b, float eps)
{
    if (!table || !b || b->n < 0)
        return HEARTH_EINVAL;
    if (b->n == 0)
        return 0;
    CTX(st);
    const cu_weight *w = (const cu_weight *)table;
    int rc = cu_embed_rows(c, Y, w, b->token, b->n);
    if (rc || !pos_tab)
        return rc;
    return cu_embed_finish(c, Y, b, w->n_in, pos_tab, type_row, ln_w, ln_b, eps);
}

static int cuda_rmsnorm(hearth_stream *st, float *Y, const float *X, const int32_t *rows, int64_t n_rows, int64_t n,
                        const float *w, float eps)
{
    if (n_rows < 0 || n < 1)
        return HEARTH_EINVAL;
    if (n_rows == 0)
        return 0;
    CTX(st);
    return cu_rmsnorm(c, Y, X, rows, n_rows, n, w, eps);
}

static int cuda_add(hearth_stream *st, float *X, const float *A, int64_t rows, int64_t n)
{
    if (rows < 0 || n < 0)
        return HEARTH_EINVAL;
    if (rows == 0 || n == 0)
        return 0;
    CTX(st);
    return cu_add(c, X, A, rows, n);
}

static int cuda_add_rmsnorm(hearth_stream *st, float *X, float *H, int64_t rows, int64_t n, const float *w, float eps)
{
    if (rows < 0 || n < 1)
        return HEARTH_EINVAL;
    if (rows == 0)
        return 0;
    CTX(st);
    return cu_add_rmsnorm(c, X, H, rows, n, w, eps);
}

static int cuda_argmax_rows(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n)
{
    CTX(st);
    return cu_argmax_rows(c, ids, X, rows, n, NULL, NULL, 0);
}

static int cuda_argmax_feed(hearth_stream *st, int32_t *ids, const float *X, int64_t rows, int64_t n, int32_t *next,
                            const int32_t *src, int64_t words)
{
    CTX(st);
    return cu_argmax_rows(c, ids, X, rows, n, next, src, words);
}

static int cuda_swiglu(hearth_stream *st, float *G, const float *U, int64_t rows, int64_t n)
{
    if (rows < 0 || n < 0)
        return HEARTH_EINVAL;
    if (rows == 0 || n == 0)
        return 0;
    CTX(st);
    return cu_swiglu(c, G, U, rows, n);
}

static bool heads_ok(int64_t n_head, int64_t n_head_kv, int64_t hd)
{
    return n_head >= 1 && n_head_kv >= 1 && n_head % n_head_kv == 0 && hd >= 1 && hd <= CU_HEAD_DIM_MAX;
}

static int cuda_qk_rope_store(hearth_stream *st, float *Q, float *K, float *V, const hearth_qk *qk,
                              const hearth_dev_kv *kv, int64_t layer, const hearth_batch *b)
{
    if (!qk || !kv || !b || !heads_ok(qk->n_head, qk->n_head_kv, qk->hd) || qk->n_rot < 0 || qk->n_rot > qk->hd ||
        qk->n_rot % 2 || layer < 0 || layer >= kv->n_layer || kv->kv_dim != qk->n_head_kv * qk->hd ||
        (kv->type != HEARTH_F32 && kv->type != HEARTH_F16))
        return HEARTH_EINVAL;
    if (b->n == 0)
        return 0;
    CTX(st);
    return cu_qk_rope_store(c, Q, K, V, qk, kv, layer, b);
}

static int cuda_attn_cached(hearth_stream *st, float *out, const float *Q, const hearth_dev_kv *kv, int64_t layer,
                            const hearth_batch *b, int64_t n_head, int64_t n_head_kv, int64_t hd, float scale)
{
    if (!kv || !b || !heads_ok(n_head, n_head_kv, hd) || layer < 0 || layer >= kv->n_layer ||
        kv->kv_dim != n_head_kv * hd || (kv->type != HEARTH_F32 && kv->type != HEARTH_F16))
        return HEARTH_EINVAL;
    if (b->n == 0)
        return 0;
    CTX(st);
    return cu_attn_cached(c, out, Q, kv, layer, b, n_head, n_head_kv, hd, scale);
}

static int cuda_add_layernorm(hearth_stream *st, float *X, float *Y, const float *bias, int64_t rows, int64_t n,
                              const float *g, const float *beta, float eps)
{
    if (rows < 0 || n < 1)
        return HEARTH_EINVAL;
    if (rows == 0)
        return 0;
    CTX(st);
    return cu_add_layernorm(c, X, Y, bias, rows, n, g, beta, eps);
}

static int cuda_bias_gelu(hearth_stream *st, float *Y, const float *bias, int64_t rows, int64_t n)
{
    if (rows < 0 || n < 0)
        return HEARTH_EINVAL;
    if (rows == 0 || n == 0)
        return 0;
    CTX(st);
    return cu_bias_gelu(c, Y, bias, rows, n);
}

static int cuda_attn_packed(hearth_stream *st, float *ctx, float *QKV, const float *bq, const float *bk,
                            const float *bv, const hearth_batch *b, int64_t n_head, int64_t hd, float scale)
{
    if (!b || b->n_seqs < 0 || !heads_ok(n_head, n_head, hd))
        return HEARTH_EINVAL;
    if (b->n == 0 || b->n_seqs == 0)
        return 0;
    CTX(st);
    return cu_attn_packed(c, ctx, QKV, bq, bk, bv, b, n_head, hd, scale);
}

static int cuda_pool(hearth_stream *st, float *out, const float *X, int64_t n, const hearth_batch *b, int kind, bool l2,
                     const bool *all_rows)
{
    if (!b || n < 1 || b->n_seqs < 0 || kind < HEARTH_DEV_POOL_MEAN || kind > HEARTH_DEV_POOL_LAST)
        return HEARTH_EINVAL;
    if (b->n_seqs == 0)
        return 0;
    CTX(st);
    return cu_pool(c, out, X, n, b, kind, l2, all_rows);
}

extern const hearth_dev_ops hearth_cuda_ops = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .sync = cuda_sync,
    .scratch = cuda_scratch,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_deinit = cuda_stream_deinit,
    .graph_begin = cuda_graph_begin,
    .graph_end = cuda_graph_end,
    .weight_new = cuda_weight_new,
    .weight_free = cuda_weight_free,
    .weight_reads_host = cuda_weight_reads_host,
    .weight_chain = cuda_weight_chain,
    .copy_gbps = cuda_copy_gbps,
    .mem_info = cuda_mem_info,
    .lost = cuda_lost,
    .supports = cuda_supports,
    .matmul = cuda_matmul,
    .matmul_fused = cuda_matmul_fused,
    .embed = cuda_embed,
    .rmsnorm = cuda_rmsnorm,
    .add = cuda_add,
    .add_rmsnorm = cuda_add_rmsnorm,
    .swiglu = cuda_swiglu,
    .argmax_rows = cuda_argmax_rows,
    .argmax_feed = cuda_argmax_feed,
    .qk_rope_store = cuda_qk_rope_store,
    .attn_cached = cuda_attn_cached,
    .add_layernorm = cuda_add_layernorm,
    .bias_gelu = cuda_bias_gelu,
    .attn_packed = cuda_attn_packed,
    .pool = cuda_pool,
    .vision = &cu_vision_ops,
};

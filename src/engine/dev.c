/* dev.c: the device registry, the per-step block's layout and the stream's
 * lifecycle; the device-neutral half of dev.h.
 *
 * How: the registry is a fixed array: the CPU first, at once, then the GPUs
 * of the backend compiled in (engine/cuda/, with HEARTH_CUDA), probed once
 * (pthread_once) on the first call that asks beyond the CPU: counting,
 * getting device 1 and on, or finding one by name. hearth_dev_default never
 * probes, so a process that only uses the CPU (a supervisor that will fork
 * workers, where CUDA must not be touched) creates no GPU context. A backend
 * with no device found adds nothing. hearth_batch_layout carves one
 * block in a fixed order, each array 64-byte aligned, so the host staging
 * copy and the device copy share offsets and a pass uploads it in one call.
 *
 * Rejected: a registry that probes on every call (a GPU probe costs
 * milliseconds and is not thread-safe in every runtime); a batch of separate
 * arrays, each uploaded (one transfer per array per step, and no fixed
 * address to capture a step against). */
#include "engine/dev.h"
#include "engine/cpu/dev_cpu.h"
#if HEARTH_CUDA
#include "engine/cuda/dev_cuda.h"
#endif

#include "engine/gpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEV_MAX 8

static hearth_dev *devs[DEV_MAX];
static int n_devs;
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;

static void devs_probe(void)
{
    devs[0] = hearth_dev_cpu();
    n_devs = 1;
#if HEARTH_CUDA
    n_devs += hearth_dev_cuda_list(devs + n_devs, DEV_MAX - n_devs);
#endif
}

int hearth_dev_count(void)
{
    pthread_once(&devs_once, devs_probe);
    return n_devs;
}

hearth_dev *hearth_dev_get(int i)
{
    if (i == 0)
        return hearth_dev_cpu();
    pthread_once(&devs_once, devs_probe);
    return i > 0 && i < n_devs ? devs[i] : NULL;
}

hearth_dev *hearth_dev_default(void)
{
    return hearth_dev_cpu();
}

hearth_dev *hearth_dev_find(const char *name, hearth_err *err)
{
    if (!name || !*name || strcmp(name, "cpu") == 0)
        return hearth_dev_cpu();
    const char *want = name;
    char buf[32];
    if (strcmp(name, "cuda") == 0)
        want = "cuda:0";
    else if (strncmp(name, "cuda:", 5) != 0) {
        hearth_err_set(err, HEARTH_EINVAL, "device '%s': want cpu, cuda or cuda:N", name);
        return NULL;
    } else {
        char *end;
        long n = strtol(name + 5, &end, 10);
        if (end == name + 5 || *end || n < 0 || n > 64) {
            hearth_err_set(err, HEARTH_EINVAL, "device '%s': want cuda:N with N a GPU's index", name);
            return NULL;
        }
        snprintf(buf, sizeof buf, "cuda:%ld", n);
        want = buf;
    }
#if !HEARTH_CUDA
    (void)want;
    hearth_err_set(err, HEARTH_EUNSUPPORTED,
                   "device '%s': this hearth was built without CUDA (build it with make CUDA=1)", name);
    return NULL;
#else
    pthread_once(&devs_once, devs_probe);
    for (int i = 1; i < n_devs; i++)
        if (strcmp(devs[i]->caps.name, want) == 0)
            return devs[i];
    hearth_gpu_list l;
    hearth_gpu_probe(&l);
    const char *why = l.why[0] ? l.why : "no such device";
    for (int i = 0; i < l.n; i++)
        if (l.gpus[i].index == atoi(want + 5) && !l.gpus[i].usable)
            why = l.gpus[i].why;
    hearth_err_set(err, HEARTH_ENOTFOUND, "device '%s' is not usable: %s (%d GPU%s found; hearth doctor lists them)",
                   name, why, l.n, l.n == 1 ? "" : "s");
    return NULL;
#endif
}

uint64_t hearth_dev_uid(void)
{
    static _Atomic uint64_t next = 1;
    return next++;
}

const char *hearth_op_name(hearth_op op)
{
    static const char *const names[HEARTH_OP_COUNT_] = {
        "matmul", "embed", "rmsnorm", "add", "add_rmsnorm", "swiglu", "qk_rope_store",
        "attn_cached", "add_layernorm", "bias_gelu", "attn_packed", "pool", "argmax", "argmax_feed",
    };
    return (int)op >= 0 && op < HEARTH_OP_COUNT_ ? names[op] : "?";
}

static size_t carve(size_t *at, size_t bytes)
{
    size_t off = (*at + 63) & ~(size_t)63;
    *at = off + bytes;
    return off;
}

size_t hearth_batch_layout(hearth_batch *b, void *base, int64_t n, int64_t rope_stride, int n_seqs)
{
    memset(b, 0, sizeof *b);
    size_t at = 0, un = (size_t)(n > 0 ? n : 0);
    size_t o_tok = carve(&at, un * sizeof(int32_t));
    size_t o_pos = carve(&at, un * sizeof(int64_t));
    size_t o_slot = carve(&at, un * sizeof(int32_t));
    size_t o_rope = carve(&at, un * (size_t)rope_stride * sizeof(float));
    size_t o_out = carve(&at, un * sizeof(int32_t));
    size_t o_seq = carve(&at, ((size_t)n_seqs + 1) * sizeof(int64_t));
    at = (at + 63) & ~(size_t)63;
    b->n = n;
    b->rope_stride = rope_stride;
    b->n_seqs = n_seqs;
    if (base) {
        char *p = base;
        b->token = (int32_t *)(p + o_tok);
        b->pos = (int64_t *)(p + o_pos);
        b->slot = (int32_t *)(p + o_slot);
        b->rope_cs = (float *)(p + o_rope);
        b->out_src = (int32_t *)(p + o_out);
        b->seq_start = (int64_t *)(p + o_seq);
    }
    return at;
}

int hearth_stream_init(hearth_stream *st, hearth_dev *dev, hearth_pool *pool, hearth_err *err)
{
    memset(st, 0, sizeof *st);
    if (!dev)
        return hearth_err_set(err, HEARTH_EINVAL, "stream: no device");
    st->dev = dev;
    st->pool = pool;
    return 0;
}

void hearth_stream_deinit(hearth_stream *st)
{
    if (st->dev && st->dev->ops->stream_deinit)
        st->dev->ops->stream_deinit(st);
    memset(st, 0, sizeof *st);
}

/* scratch.c: the per-thread scratch of scratch.h.
 *
 * Each thread has a _Thread_local array of (pointer, capacity) per slot.
 * Growth frees the old block and allocates max(request, 1.5 x old) rounded
 * to 64 KiB, so a thread settles after a few calls and then never
 * allocates. Freeing: a pthread key whose destructor frees the blocks when
 * the thread exits (the pool's workers, at hearth_pool_free); a thread that
 * never exits (the main thread) keeps its blocks until the process ends,
 * reachable from its TLS, so LeakSanitizer does not count them, or frees
 * them early with hearth_cpu_matmul_release_scratch().
 *
 * Rejected: a process-wide free list (a lock per call, and blocks would
 * wander between cores); malloc's own caching (glibc returns blocks above
 * the mmap threshold to the kernel, so every call page-faulted them back). */
#include "engine/cpu/scratch.h"
#include "engine/cpu/matmul.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct scratch {
    void *p[HEARTH_SCRATCH_SLOTS_];
    size_t cap[HEARTH_SCRATCH_SLOTS_];
} scratch;

static _Thread_local scratch tls;
static pthread_key_t g_key;
static int g_key_ok;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void release(scratch *s)
{
    for (int i = 0; i < HEARTH_SCRATCH_SLOTS_; i++) {
        free(s->p[i]);
        s->p[i] = NULL;
        s->cap[i] = 0;
    }
}

static void on_thread_exit(void *v)
{
    release(v);
}

static void make_key(void)
{
    g_key_ok = pthread_key_create(&g_key, on_thread_exit) == 0;
}

void *hearth_cpu_scratch(int slot, size_t bytes)
{
    scratch *s = &tls;
    if (bytes <= s->cap[slot])
        return s->p[slot];
    if (bytes > HEARTH_SCRATCH_MAX)
        return NULL;
    pthread_once(&g_once, make_key);
    /* the key's value only marks that this thread has blocks to free */
    if (g_key_ok && !pthread_getspecific(g_key))
        pthread_setspecific(g_key, s);
    size_t want = s->cap[slot] + s->cap[slot] / 2;
    want = want > bytes ? want : bytes;
    want = want > HEARTH_SCRATCH_MAX ? HEARTH_SCRATCH_MAX : want;
    want = (want + 65535) & ~(size_t)65535;
    free(s->p[slot]);
    s->p[slot] = aligned_alloc(64, want);
    s->cap[slot] = s->p[slot] ? want : 0;
    return s->p[slot];
}

void *hearth_cpu_pass_scratch(size_t bytes)
{
    return bytes <= HEARTH_PASS_SCRATCH_MAX ? hearth_cpu_scratch(HEARTH_SCRATCH_PASS, bytes) : NULL;
}

void hearth_cpu_matmul_release_scratch(void)
{
    release(&tls);
}

/* panel_mem.c: prepacked panels carved from huge-page chunks (panel_mem.h).
 *
 * How: chunks of CHUNK_BYTES (or a larger request rounded up to 2 MiB)
 * allocated on a 2 MiB boundary and advised MADV_HUGEPAGE (THP "madvise"
 * mode, as on the Zen 5 machine); runs are cut from a chunk front to back,
 * 64-byte aligned, and a chunk counts its live runs. Freed runs are not
 * reused: panel sets are made when a model opens and freed when it closes,
 * so a chunk empties as a whole and is then given back. Untouched chunk
 * pages cost nothing until written; the tail of the last chunk costs at
 * most the 2 MiB page it sits in.
 *
 * Why: each panel set had its own allocation, huge pages only from 2 MiB
 * up, so MiniLM's 24 Q/K/V/O sets (576 KiB each) and the 0.36 MiB tails of
 * its FFN sets, 18 of its 42 MiB of panels, were in 4 KiB pages, read
 * front to back every pass. All in huge pages (a throwaway build rounding
 * every set up to 2 MiB): `hearth embed --bench -t 1`, two processes at
 * once, 8 interleaved rounds, batch 1 / 8 / 32 +1.7% / +1.9% / +1.5%;
 * with these chunks (AnonHugePages 43 MB served, against 24.5; RSS 93.5 MB
 * against 89.8) +3.2% / +0.5% / +0.3% in the same test. Opening the 110M
 * F16 llama (`hearth run`, 4 tokens) took 0.78-0.84 s with 4 KiB pages
 * (page faults under the hypervisor), 0.42-0.62 s with a huge-page
 * allocation per set from 2 MiB up, and 0.15 s with chunks (0.45-0.46
 * with per-set allocations the same minute; the first, cold run 0.49).
 *
 * Rejected: reusing freed runs (no caller frees a few sets and keeps the
 * rest); one allocation per model passed in by the caller (the same pages
 * for every caller without any of them sizing an arena). */
#include "engine/cpu/panel_mem.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_BYTES ((size_t)2 << 20)
#define CHUNK_BYTES ((size_t)32 << 20)

typedef struct chunk {
    char *base;
    size_t size, used;
    size_t live; /* runs handed out and not freed */
    struct chunk *next;
} chunk;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk *g_chunks;

static chunk *chunk_new(size_t bytes)
{
    size_t size = bytes > CHUNK_BYTES ? (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES : CHUNK_BYTES;
    chunk *c = calloc(1, sizeof *c);
    void *p = NULL;
    if (!c || posix_memalign(&p, HUGE_BYTES, size) != 0) {
        free(c);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE); /* advice: without it, 4 KiB pages */
#endif
    *c = (chunk){.base = p, .size = size};
    return c;
}

void *hearth_cpu_panel_alloc(size_t bytes)
{
    if (bytes == 0 || bytes > SIZE_MAX / 2)
        return NULL;
    bytes = (bytes + 63) / 64 * 64;
    pthread_mutex_lock(&g_lock);
    chunk *c = g_chunks;
    while (c && c->size - c->used < bytes)
        c = c->next;
    if (!c && (c = chunk_new(bytes))) {
        c->next = g_chunks;
        g_chunks = c;
    }
    void *p = NULL;
    if (c) {
        p = c->base + c->used;
        c->used += bytes;
        c->live++;
    }
    pthread_mutex_unlock(&g_lock);
    return p;
}

void hearth_cpu_panel_free(void *p)
{
    if (!p)
        return;
    chunk *gone = NULL;
    pthread_mutex_lock(&g_lock);
    chunk **at = &g_chunks;
    while (*at && !((char *)p >= (*at)->base && (char *)p < (*at)->base + (*at)->size))
        at = &(*at)->next;
    if (*at && --(*at)->live == 0) {
        gone = *at;
        *at = gone->next;
    }
    pthread_mutex_unlock(&g_lock);
    if (gone) {
        free(gone->base);
        free(gone);
    }
}

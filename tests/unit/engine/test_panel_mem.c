/* Unit tests for the panel memory (src/engine/cpu/panel_mem.c): runs are
 * 64-byte aligned, hold what is written to them, and small runs share a
 * chunk that starts on a 2 MiB boundary (what puts them in huge pages); a
 * chunk is given back when its last run is freed. */
#include "harness.h"

#include "engine/cpu/panel_mem.h"

#include <stdint.h>
#include <string.h>

#define MIB ((size_t)1 << 20)

static void runs_share_aligned_chunks(void)
{
    enum { N = 40 };
    /* 576 KiB (MiniLM's Q/K/V/O sets), odd sizes, and one past a chunk */
    size_t sizes[N];
    for (int i = 0; i < N; i++)
        sizes[i] = i == 7 ? 40 * MIB : i % 3 == 0 ? 576 * 1024 : (size_t)(1000 + 37 * i);
    unsigned char *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = hearth_cpu_panel_alloc(sizes[i]);
        CHECK_MSG(p[i] && (uintptr_t)p[i] % 64 == 0, "run %d of %zu bytes at %p", i, sizes[i], (void *)p[i]);
        if (p[i])
            memset(p[i], i + 1, sizes[i]);
    }
    /* the first run starts a chunk; the next small ones follow it in place */
    CHECK((uintptr_t)p[0] % (2 * MIB) == 0);
    CHECK(p[1] == p[0] + (576 * 1024));
    CHECK(p[2] == p[1] + (1000 + 37 + 63) / 64 * 64);
    /* the 40 MiB run got a chunk of its own, on a 2 MiB boundary */
    CHECK((uintptr_t)p[7] % (2 * MIB) == 0);
    for (int i = 0; i < N; i++) {
        int bad = 0;
        for (size_t b = 0; p[i] && b < sizes[i]; b += 4093)
            bad += p[i][b] != (unsigned char)(i + 1);
        CHECK_MSG(bad == 0 && (!p[i] || p[i][sizes[i] - 1] == (unsigned char)(i + 1)), "run %d overwritten", i);
    }
    for (int i = 0; i < N; i++)
        hearth_cpu_panel_free(p[i]);
    /* every chunk was given back: the next run starts a fresh one */
    unsigned char *q = hearth_cpu_panel_alloc(1000);
    CHECK(q && (uintptr_t)q % (2 * MIB) == 0);
    hearth_cpu_panel_free(q);
    hearth_cpu_panel_free(NULL);
    CHECK(hearth_cpu_panel_alloc(0) == NULL);
    CHECK(hearth_cpu_panel_alloc(SIZE_MAX) == NULL);
}

int main(void)
{
    RUN(runs_share_aligned_chunks);
    TEST_EXIT();
}

/* panel_mem.h: memory for prepacked weight panels (matmul.c), private to
 * src/engine/cpu: runs cut from chunks that start on 2 MiB boundaries and
 * are asked for huge pages, so a model's many panel sets share huge pages
 * instead of each set under 2 MiB sitting in 4 KiB ones. Thread-safe. */
#ifndef HEARTH_ENGINE_CPU_PANEL_MEM_H
#define HEARTH_ENGINE_CPU_PANEL_MEM_H

#include <stddef.h>

/* At least bytes (> 0) of 64-byte aligned memory, or NULL when memory is
 * short. */
void *hearth_cpu_panel_alloc(size_t bytes);
/* Gives back a run from hearth_cpu_panel_alloc (NULL: nothing). A chunk's
 * memory goes back to the system when its last run is freed. */
void hearth_cpu_panel_free(void *p);

#endif

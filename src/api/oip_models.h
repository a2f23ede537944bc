/* oip_models.h: the frame models the Open Inference Protocol API serves.
 *
 * For now a registry of its own inside oip.c, filled by the loader through
 * hearth_api_oip_add_model. The lead moves hearth_frame_entry and
 * hearth_api_find_frame into models.h (with frame_models[] and n_frame in
 * hearth_api_state) and then defines HEARTH_API_FRAME_ENTRY in models.h so
 * this header's copy of the type steps aside. Private to the api layer. */
#ifndef HEARTH_API_OIP_MODELS_H
#define HEARTH_API_OIP_MODELS_H

#include "api.h"

#include "engine/frame_queue.h"
#include "models/frame.h"

#include <stdint.h>

#ifndef HEARTH_API_FRAME_ENTRY
#define HEARTH_API_FRAME_ENTRY
/* A served frame model. */
typedef struct hearth_frame_entry {
    hearth_api_model *info;      /* its /v1/models entry (name) */
    hearth_frame_model *model;
    hearth_frame_queue *queue;   /* runs model's frames */
    uint64_t deadline_ns;        /* --deadline-ms default, 0 none */
    uint64_t spin_ns;            /* --frame-spin-us on a GPU, else 0: the I/O thread polls through a frame and
                                    this long after its expected end (oip.c) */
    uint64_t seq_idle_ns;        /* --sequence-timeout-ms: an idle sequence expires (its /config says it) */
} hearth_frame_entry;
#endif

/* The frame model named name (NULL: the first); NULL when none matches.
 * Any thread. */
hearth_frame_entry *hearth_api_find_frame(hearth_api *api, const char *name);
/* Adds a loaded frame model (e is copied) to api's registry; called by the
 * loader (any thread, before or while serving). 0, or HEARTH_ELIMIT past
 * HEARTH_API_MAX_MODELS, HEARTH_EINVAL for an entry without info, model or
 * queue. */
int hearth_api_oip_add_model(hearth_api *api, const hearth_frame_entry *e);
/* Empties api's registry (the loader closes the models and queues). */
void hearth_api_oip_clear(hearth_api *api);

#endif

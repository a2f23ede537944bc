/* oip.h: the Open Inference Protocol (KServe v2 REST, as NVIDIA Triton
 * serves it) for fixed-shape frame models: the routes are registered by
 * hearth_api_register_oip (api.h); this header holds what the api layer's
 * other files call. */
#ifndef HEARTH_API_OIP_H
#define HEARTH_API_OIP_H

#include "api.h"

#include "base/buf.h"
#include "net/server.h"

/* Appends the frame models' Prometheus metrics to out: per model
 * hearth_frames_total, hearth_frame_misses_total, hearth_frame_late_total,
 * hearth_frame_failed_total, hearth_frame_sequences_live, the
 * hearth_frame_latency_seconds histogram (submit to end of run), and
 * hearth_frame_paced_windows_total / _hits_total (frame_queue.h's Cadence:
 * windows the frame thread polled through, frames met in them). Nothing
 * when no frame model is served. 0, or out's HEARTH_ELIMIT/ENOMEM. */
int hearth_api_oip_metrics(hearth_api *api, hearth_buf *out);
/* Answers req with status and Triton's error body {"error": msg} (oip.c;
 * oip_shm.c's routes answer through it too). */
void hearth_oip_respond_error(hearth_request *req, int status, const char *msg);

#endif

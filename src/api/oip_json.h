/* oip_json.h: the Open Inference Protocol's JSON answers for a fixed-shape
 * model: infer responses (JSON data, or the binary tensor data extension's
 * JSON header then raw outputs), model and server metadata, and Triton's
 * error body. Private to the api layer; sees no request, so it can be
 * unit-tested. */
#ifndef HEARTH_API_OIP_JSON_H
#define HEARTH_API_OIP_JSON_H

#include "oip_parse.h"

#include "base/buf.h"
#include "models/frame.h"

#include <stddef.h>

/* The infer response for r (parsed by hearth_oip_parse against m, answered
 * by model name): {"model_name", "model_version": "1", "id" (when the
 * request had one), "outputs": [{"name", "datatype", "shape", "data" |
 * "parameters": {"binary_data_size": N}}]} with the outputs in r's order,
 * then the binary outputs' raw bytes in that order. out[j] holds
 * m->outputs[j]. *json_len: the JSON's bytes (the rest of b is binary; equal
 * to b->len when nothing is binary). Floats as "%.9g" (they read back as
 * themselves; NaN and infinities as 0). 0, or HEARTH_ELIMIT / HEARTH_ENOMEM
 * from b. */
int hearth_oip_format_infer(const hearth_frame_info *m, const char *name, const hearth_oip_request *r, void *const *out,
                            hearth_buf *b, size_t *json_len);
/* GET /v2/models/{m}: {"name", "versions": ["1"], "platform", "inputs": [...],
 * "outputs": [...]} each {"name", "datatype", "shape"}. */
int hearth_oip_format_model(const hearth_frame_info *m, const char *name, hearth_buf *b);
/* GET /v2/models/{m}/config: Triton's model configuration as JSON
 * (tritonclient's get_model_config, perf_analyzer): {"name", "platform",
 * "backend": "hearth", "version_policy", "max_batch_size": 0, "input" and
 * "output": [{"name", "data_type": "TYPE_FP32".., "format", "dims"}],
 * "sequence_batching": {"max_sequence_idle_microseconds"} for a model
 * with state, "instance_group": [{"kind": KIND_GPU with "gpus" | KIND_CPU,
 * "count": 1}]}. */
int hearth_oip_format_config(const hearth_frame_info *m, const char *name, uint64_t seq_idle_us, hearth_buf *b);
/* GET /v2: {"name": "hearth", "version", "extensions": [...]}. */
int hearth_oip_format_server(hearth_buf *b, const char *version);
/* Triton's error body {"error": msg}. */
int hearth_oip_format_error(hearth_buf *b, const char *msg);

#endif

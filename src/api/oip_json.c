/* oip_json.c: the Open Inference Protocol's answers written as text (see
 * oip_json.h), straight into a bounded buffer.
 *
 * Written by hand rather than built as a cJSON tree and printed: an output
 * of a detector is tens of thousands of floats (UltraFace's boxes: 17,680),
 * and a tree costs a node per number and cJSON prints doubles with "%1.15g"
 * then re-reads them to check the round trip. FP32 goes through
 * hearth_fmt_f32 ("%.9g" without glibc's slow path, numfmt.h), FP64 through
 * "%.17g": both read back as the value sent.
 *
 * Binary outputs are the raw little-endian bytes of the output, appended
 * after the JSON in the order the JSON lists them, as tritonclient reads
 * them (it walks "outputs" summing binary_data_size). */
#include "oip_json.h"
#include "oip_shm.h"

#include "base/numfmt.h"
#include "models/onnx.h"
#include "net/server.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int shape_json(hearth_buf *b, const int64_t *dims, int ndim)
{
    int rc = hearth_buf_append(b, "[", 1);
    for (int i = 0; i < ndim && !rc; i++)
        rc = hearth_buf_printf(b, "%s%lld", i ? "," : "", (long long)dims[i]);
    return rc ? rc : hearth_buf_append(b, "]", 1);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0 && man == 0) {
        bits = sign;
    } else if (exp == 0) { /* subnormal: normalize */
        exp = 127 - 15 + 1;
        while (!(man & 1024)) {
            man <<= 1;
            exp--;
        }
        bits = sign | exp << 23 | (man & 1023) << 13;
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The elements of io held at p as a flat JSON list. */
static int data_json(hearth_buf *b, const hearth_frame_io *io, const void *p)
{
    int64_t n = 1;
    for (int i = 0; i < io->ndim; i++)
        n *= io->dims[i];
    int rc = hearth_buf_reserve(b, (size_t)n * 26 + 2); /* the longest element: "%.17g" of a double, 24, and a comma */
    if (rc)
        return rc;
    char *w = b->data + b->len;
    const unsigned char *s = p;
    *w++ = '[';
    for (int64_t i = 0; i < n; i++) {
        if (i)
            *w++ = ',';
        switch (io->dtype) {
        case HEARTH_ONNX_FLOAT: {
            float v;
            memcpy(&v, s + i * 4, 4);
            w += hearth_fmt_f32(w, v);
            break;
        }
        case HEARTH_ONNX_FLOAT16: {
            uint16_t h;
            memcpy(&h, s + i * 2, 2);
            w += hearth_fmt_f32(w, f16_to_f32(h));
            break;
        }
        case HEARTH_ONNX_DOUBLE: {
            double v;
            memcpy(&v, s + i * 8, 8);
            if (v != v || v - v != 0) /* NaN, infinities: JSON has neither */
                v = 0;
            w += snprintf(w, 26, "%.17g", v);
            break;
        }
        case HEARTH_ONNX_INT64: {
            int64_t v;
            memcpy(&v, s + i * 8, 8);
            w += snprintf(w, 26, "%lld", (long long)v);
            break;
        }
        case HEARTH_ONNX_INT32: {
            int32_t v;
            memcpy(&v, s + i * 4, 4);
            w += snprintf(w, 26, "%d", v);
            break;
        }
        case HEARTH_ONNX_INT8:
            w += snprintf(w, 26, "%d", (int)(signed char)s[i]);
            break;
        case HEARTH_ONNX_UINT8:
            w += snprintf(w, 26, "%u", (unsigned)s[i]);
            break;
        case HEARTH_ONNX_BOOL:
            w += snprintf(w, 26, "%s", s[i] ? "true" : "false");
            break;
        default:
            *w++ = '0';
            break;
        }
    }
    *w++ = ']';
    b->len = (size_t)(w - b->data);
    b->data[b->len] = 0;
    return 0;
}

static size_t io_bytes(const hearth_frame_io *io)
{
    int64_t n = 1;
    for (int i = 0; i < io->ndim; i++)
        n *= io->dims[i];
    return (size_t)n * hearth_oip_dtype_size(io->dtype);
}

static int io_head(hearth_buf *b, const hearth_frame_io *io)
{
    const char *dt = hearth_oip_datatype(io->dtype);
    int rc = hearth_buf_appends(b, "{\"name\":");
    if (!rc)
        rc = hearth_json_quote(b, io->name, strlen(io->name));
    if (!rc)
        rc = hearth_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":", dt ? dt : "BYTES");
    if (!rc)
        rc = shape_json(b, io->dims, io->ndim);
    return rc;
}

int hearth_oip_format_infer(const hearth_frame_info *m, const char *name, const hearth_oip_request *r, void *const *out,
                            hearth_buf *b, size_t *json_len)
{
    int rc = hearth_buf_appends(b, "{\"model_name\":");
    if (!rc)
        rc = hearth_json_quote(b, name, strlen(name));
    if (!rc)
        rc = hearth_buf_appends(b, ",\"model_version\":\"1\"");
    if (!rc && r->has_id) {
        rc = hearth_buf_appends(b, ",\"id\":");
        if (!rc)
            rc = hearth_json_quote(b, r->id, strlen(r->id));
    }
    if (!rc)
        rc = hearth_buf_appends(b, ",\"outputs\":[");
    for (int k = 0; k < r->n_out && !rc; k++) {
        const hearth_frame_io *io = &m->outputs[r->out[k]];
        if (k)
            rc = hearth_buf_append(b, ",", 1);
        if (!rc)
            rc = io_head(b, io);
        if (!rc && r->out_at[k]) {
            /* written into a shared memory region (oip.c): name, datatype and
             * shape only, as Triton answers it; Triton's C++ client (and
             * perf_analyzer) reads an output with "parameters" as binary and
             * fails where binary_data_size is missing */
            rc = hearth_buf_append(b, "}", 1);
        } else if (!rc && r->out_binary[k])
            rc = hearth_buf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", io_bytes(io));
        else if (!rc) {
            rc = hearth_buf_appends(b, ",\"data\":");
            if (!rc)
                rc = data_json(b, io, out[r->out[k]]);
            if (!rc)
                rc = hearth_buf_append(b, "}", 1);
        }
    }
    if (!rc)
        rc = hearth_buf_appends(b, "]}");
    *json_len = b->len;
    for (int k = 0; k < r->n_out && !rc; k++)
        if (r->out_binary[k])
            rc = hearth_buf_append(b, out[r->out[k]], io_bytes(&m->outputs[r->out[k]]));
    return rc;
}

static int io_list_json(hearth_buf *b, const hearth_frame_io *ios, int n)
{
    int rc = hearth_buf_append(b, "[", 1);
    for (int i = 0; i < n && !rc; i++) {
        if (i)
            rc = hearth_buf_append(b, ",", 1);
        if (!rc)
            rc = io_head(b, &ios[i]);
        if (!rc)
            rc = hearth_buf_append(b, "}", 1);
    }
    return rc ? rc : hearth_buf_append(b, "]", 1);
}

int hearth_oip_format_model(const hearth_frame_info *m, const char *name, hearth_buf *b)
{
    const char *platform = m->platform ? m->platform : "onnxruntime_onnx";
    int rc = hearth_buf_appends(b, "{\"name\":");
    if (!rc)
        rc = hearth_json_quote(b, name, strlen(name));
    if (!rc)
        rc = hearth_buf_appends(b, ",\"versions\":[\"1\"],\"platform\":");
    if (!rc)
        rc = hearth_json_quote(b, platform, strlen(platform));
    if (!rc)
        rc = hearth_buf_appends(b, ",\"inputs\":");
    if (!rc)
        rc = io_list_json(b, m->inputs, m->n_inputs);
    if (!rc)
        rc = hearth_buf_appends(b, ",\"outputs\":");
    if (!rc)
        rc = io_list_json(b, m->outputs, m->n_outputs);
    return rc ? rc : hearth_buf_append(b, "}", 1);
}

/* Triton's data_type names: "TYPE_" and the datatype, BYTES as TYPE_STRING */
static int config_io_list(hearth_buf *b, const hearth_frame_io *ios, int n)
{
    int rc = hearth_buf_append(b, "[", 1);
    for (int i = 0; i < n && !rc; i++) {
        const char *dt = hearth_oip_datatype(ios[i].dtype);
        rc = hearth_buf_appends(b, i ? ",{\"name\":" : "{\"name\":");
        if (!rc)
            rc = hearth_json_quote(b, ios[i].name, strlen(ios[i].name));
        if (!rc)
            rc = hearth_buf_printf(b, ",\"data_type\":\"TYPE_%s\",\"format\":\"FORMAT_NONE\",\"dims\":",
                                   dt && strcmp(dt, "BYTES") != 0 ? dt : "STRING");
        if (!rc)
            rc = shape_json(b, ios[i].dims, ios[i].ndim);
        if (!rc)
            rc = hearth_buf_appends(b, ",\"is_shape_tensor\":false}");
    }
    return rc ? rc : hearth_buf_append(b, "]", 1);
}

int hearth_oip_format_config(const hearth_frame_info *m, const char *name, uint64_t seq_idle_us, hearth_buf *b)
{
    const char *platform = m->platform ? m->platform : "onnxruntime_onnx";
    const char *dev = m->device ? m->device : "cpu";
    const bool gpu = strncmp(dev, "cuda", 4) == 0;
    int rc = hearth_buf_appends(b, "{\"name\":");
    if (!rc)
        rc = hearth_json_quote(b, name, strlen(name));
    if (!rc)
        rc = hearth_buf_appends(b, ",\"platform\":");
    if (!rc)
        rc = hearth_json_quote(b, platform, strlen(platform));
    /* shapes are whole (the model's batch dimension fixed, frames never
     * batched together): max_batch_size 0, as Triton has it for such models */
    if (!rc)
        rc = hearth_buf_appends(b, ",\"backend\":\"hearth\",\"version_policy\":{\"latest\":{\"num_versions\":1}},"
                                   "\"max_batch_size\":0,\"input\":");
    if (!rc)
        rc = config_io_list(b, m->inputs, m->n_inputs);
    if (!rc)
        rc = hearth_buf_appends(b, ",\"output\":");
    if (!rc)
        rc = config_io_list(b, m->outputs, m->n_outputs);
    /* a model with state takes Triton's sequence flags; its state inputs and
     * outputs are the server's (Triton's implicit state), not the client's */
    if (!rc && m->n_slots > 0)
        rc = hearth_buf_printf(b, ",\"sequence_batching\":{\"max_sequence_idle_microseconds\":%llu}",
                               (unsigned long long)seq_idle_us);
    if (!rc)
        rc = hearth_buf_appends(b, ",\"instance_group\":[{\"name\":");
    if (!rc)
        rc = hearth_json_quote(b, name, strlen(name));
    if (!rc)
        rc = hearth_buf_printf(b, ",\"kind\":\"%s\",\"count\":1", gpu ? "KIND_GPU" : "KIND_CPU");
    if (!rc && gpu)
        rc = hearth_buf_printf(b, ",\"gpus\":[%d]", dev[4] == ':' ? atoi(dev + 5) : 0);
    return rc ? rc : hearth_buf_appends(b, "}]}");
}

int hearth_oip_format_server(hearth_buf *b, const char *version)
{
    int rc = hearth_buf_appends(b, "{\"name\":\"hearth\",\"version\":");
    if (!rc)
        rc = hearth_json_quote(b, version, strlen(version));
    return rc ? rc : hearth_buf_appends(b, ",\"extensions\":[\"binary_tensor_data\",\"sequence\",\"parameters\",\"system_shared_memory\",\"model_configuration\",\"statistics\"]}");
}

int hearth_oip_format_error(hearth_buf *b, const char *msg)
{
    int rc = hearth_buf_appends(b, "{\"error\":");
    if (!rc)
        rc = hearth_json_quote(b, msg, strlen(msg));
    return rc ? rc : hearth_buf_append(b, "}", 1);
}

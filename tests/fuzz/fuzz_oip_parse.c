/* fuzz_oip_parse: Open Inference Protocol infer requests (api/oip_parse.c)
 * against a small fixed-shape model of two inputs (FP32 [1,2,3], INT32 [2])
 * and two outputs, with and without the binary tensor data extension: when
 * the first byte of an input is below 0x80, it and the next byte (big-endian)
 * are taken as the Inference-Header-Content-Length (the JSON header's
 * length; the body follows them), else the rest after it is all JSON. Every body must be answered with
 * success or a 400 and a message, never a crash, leak or read past the
 * body; a success must hold every input, valid output indexes, and format
 * (api/oip_json.c) into an answer whose JSON header parses. */
#include "api/oip_json.h"
#include "api/oip_parse.h"
#include "models/onnx.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const hearth_frame_io IN[2] = {
    {"x", HEARTH_ONNX_FLOAT, 3, {1, 2, 3}, 24},
    {"n", HEARTH_ONNX_INT32, 1, {2}, 8},
};
static const hearth_frame_io OUT[2] = {
    {"y", HEARTH_ONNX_FLOAT, 2, {1, 2}, 8},
    {"z", HEARTH_ONNX_INT64, 1, {3}, 24},
};
static const hearth_frame_info MODEL = {"fuzz.onnx", "onnxruntime_onnx", 13, 2, 2, IN, OUT, 0, 0, "cpu"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    char hl[16];
    const char *header = NULL;
    size_t skip = 1;
    if (data[0] < 0x80) {
        snprintf(hl, sizeof hl, "%u", (unsigned)data[0] << 8 | data[1]);
        header = hl;
        skip = 2;
    }
    const char *body = (const char *)data + skip;
    size_t len = size - skip;
    char *copy = malloc(len ? len : 1); /* exactly len bytes: ASan sees a read past the body */
    memcpy(copy, body, len);
    hearth_oip_request r;
    char msg[512];
    msg[0] = 0;
    int st = hearth_oip_parse(&MODEL, "fuzz", copy, len, header, &r, msg, sizeof msg);
    free(copy);
    if (st) {
        if (st != 400 || !msg[0])
            abort();
        return 0;
    }
    if (!r.in[0] || !r.in[1] || r.n_out < 1 || r.n_out > 2)
        abort();
    for (int k = 0; k < r.n_out; k++)
        if (r.out[k] < 0 || r.out[k] > 1)
            abort();
    float y[2] = {1.5f, -0.0f};
    int64_t z[3] = {1, 2, 3};
    void *out[2] = {y, z};
    hearth_buf b;
    hearth_buf_init(&b, 1 << 20);
    size_t jl = 0;
    if (hearth_oip_format_infer(&MODEL, "fuzz", &r, out, &b, &jl) != 0)
        abort();
    cJSON *doc = cJSON_ParseWithLength(b.data, jl);
    if (!doc)
        abort();
    cJSON_Delete(doc);
    hearth_buf_deinit(&b);
    hearth_oip_request_free(&r);
    return 0;
}

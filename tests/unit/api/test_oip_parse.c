/* Unit tests for api/oip_parse and api/oip_json: Open Inference Protocol
 * infer requests against a fake two-input, two-output model: JSON data flat
 * and nested, the binary tensor data extension (the JSON header cut at
 * Inference-Header-Content-Length, raw bytes after it), every refusal with
 * the tensor it names, sequence and timeout parameters, the outputs asked
 * for, and the answers written back (JSON data that reads back as the same
 * floats, binary outputs after the JSON header, model and server metadata).
 * Bodies are placed against a guard page so a read past the end faults. */
#include "harness.h"

#include "api/oip_json.h"
#include "api/oip_parse.h"
#include "models/onnx.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* inputs: x FP32 [1,2,3], n INT32 [2]; outputs: y FP32 [1,2], z INT64 [3] */
static const hearth_frame_io IN[2] = {
    {"x", HEARTH_ONNX_FLOAT, 3, {1, 2, 3}, 24},
    {"n", HEARTH_ONNX_INT32, 1, {2}, 8},
};
static const hearth_frame_io OUT[2] = {
    {"y", HEARTH_ONNX_FLOAT, 2, {1, 2}, 8},
    {"z", HEARTH_ONNX_INT64, 1, {3}, 24},
};
static const hearth_frame_info MODEL = {"fake.onnx", "onnxruntime_onnx", 13, 2, 2, IN, OUT, 0, 0, "cpu"};

/* A copy of body[0..len) ending right before a PROT_NONE page. */
typedef struct guarded {
    char *map;
    size_t map_len;
    char *p;
} guarded;

static guarded guard(const void *body, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (len + page - 1) / page + 1;
    guarded g = {0};
    g.map_len = (pages + 1) * page;
    g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.map == MAP_FAILED) {
        g.map = NULL;
        return g;
    }
    mprotect(g.map + pages * page, page, PROT_NONE);
    g.p = g.map + pages * page - len;
    memcpy(g.p, body, len);
    return g;
}

static void unguard(guarded *g)
{
    if (g->map)
        munmap(g->map, g->map_len);
}

static char g_msg[1024];

/* Parses body (len bytes; header_len as the header's text, or NULL). */
static int parse_n(const void *body, size_t len, const char *header_len, hearth_oip_request *r)
{
    guarded g = guard(body, len);
    CHECK(g.map != NULL);
    g_msg[0] = 0;
    int st = hearth_oip_parse(&MODEL, "fake", g.p, len, header_len, r, g_msg, sizeof g_msg);
    unguard(&g);
    return st;
}

static int parse(const char *json, hearth_oip_request *r)
{
    return parse_n(json, strlen(json), NULL, r);
}

#define N_OK "{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2],\"data\":[7,-8]}"

/* Expects a 400 whose message holds every needle. */
static void refused(const char *json, const char *a, const char *b)
{
    hearth_oip_request r;
    int st = parse(json, &r);
    CHECK_MSG(st == 400, "%s -> %d", json, st);
    CHECK_MSG(strstr(g_msg, a) != NULL, "'%s' not in: %s", a, g_msg);
    if (b)
        CHECK_MSG(strstr(g_msg, b) != NULL, "'%s' not in: %s", b, g_msg);
}

static void test_json_flat_and_nested(void)
{
    const char *bodies[2] = {
        "{\"id\":\"req-1\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[0.5,1,2,3,4,-1e-3]}," N_OK "]}",
        "{\"inputs\":[" N_OK ",{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[[[0.5,1,2],[3,4,-1e-3]]]}]}",
    };
    for (int k = 0; k < 2; k++) {
        hearth_oip_request r;
        CHECK_EQ_INT(parse(bodies[k], &r), 0);
        const float *x = r.in[0];
        const int32_t *n = r.in[1];
        CHECK(x && n);
        if (!x || !n)
            continue;
        CHECK_NEAR(x[0], 0.5, 0);
        CHECK_NEAR(x[4], 4, 0);
        CHECK(x[5] == (float)-1e-3);
        CHECK_EQ_INT(n[0], 7);
        CHECK_EQ_INT(n[1], -8);
        CHECK_EQ_INT(r.has_id, k == 0);
        if (k == 0)
            CHECK_EQ_STR(r.id, "req-1");
        CHECK(!r.has_seq);
        CHECK_EQ_INT(r.timeout_us, 0);
        CHECK_EQ_INT(r.n_out, 2); /* none listed: all, as JSON */
        CHECK(r.out[0] == 0 && r.out[1] == 1 && !r.out_binary[0] && !r.out_binary[1]);
        hearth_oip_request_free(&r);
    }
}

/* JSON header, then x's 24 bytes and n's 8 (x binary, n binary too). */
static size_t binary_body(char *buf, size_t cap, const char *json, size_t extra)
{
    size_t jl = strlen(json);
    float x[6] = {1.5f, -2, 3, 4, 5, 6.25f};
    int32_t n[2] = {42, -1};
    CHECK(jl + 32 + extra <= cap);
    memcpy(buf, json, jl);
    memcpy(buf + jl, x, 24);
    memcpy(buf + jl + 24, n, 8);
    memset(buf + jl + 32, 0xab, extra);
    return jl + 32 + extra;
}

static const char BIN_JSON[] =
    "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"parameters\":{\"binary_data_size\":24}},"
    "{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2],\"parameters\":{\"binary_data_size\":8}}],"
    "\"parameters\":{\"binary_data_output\":true}}";

static void test_binary(void)
{
    char body[1024], hl[32];
    size_t len = binary_body(body, sizeof body, BIN_JSON, 0);
    snprintf(hl, sizeof hl, "%zu", strlen(BIN_JSON));
    hearth_oip_request r;
    CHECK_MSG(parse_n(body, len, hl, &r) == 0, "%s", g_msg);
    const float *x = r.in[0];
    const int32_t *n = r.in[1];
    CHECK(x && n && x[0] == 1.5f && x[5] == 6.25f && n[0] == 42 && n[1] == -1);
    CHECK_EQ_INT(r.n_out, 2);
    CHECK(r.out_binary[0] && r.out_binary[1]); /* binary_data_output */
    hearth_oip_request_free(&r);

    /* one binary, one JSON: the binary bytes are only x's */
    const char *mixed = "{\"inputs\":[" N_OK ",{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],"
                        "\"parameters\":{\"binary_data_size\":24}}]}";
    char b2[512];
    size_t ml = strlen(mixed);
    memcpy(b2, mixed, ml);
    float xs[6] = {9, 8, 7, 6, 5, 4};
    memcpy(b2 + ml, xs, 24);
    snprintf(hl, sizeof hl, " %zu ", ml); /* spaces around: header values may carry them */
    CHECK_MSG(parse_n(b2, ml + 24, hl, &r) == 0, "%s", g_msg);
    CHECK(((float *)r.in[0])[0] == 9 && ((int32_t *)r.in[1])[1] == -8);
    hearth_oip_request_free(&r);

    /* extra bytes after the tensors */
    len = binary_body(body, sizeof body, BIN_JSON, 3);
    snprintf(hl, sizeof hl, "%zu", strlen(BIN_JSON));
    CHECK_EQ_INT(parse_n(body, len, hl, &r), 400);
    CHECK_MSG(strstr(g_msg, "35 bytes follow the JSON header") && strstr(g_msg, "add up to 32"), "%s", g_msg);
    /* too few bytes: n's are cut */
    len = binary_body(body, sizeof body, BIN_JSON, 0);
    CHECK_EQ_INT(parse_n(body, len - 4, hl, &r), 400);
    CHECK_MSG(strstr(g_msg, "input 'n'") && strstr(g_msg, "only 4 bytes"), "%s", g_msg);
    /* a header length past the body */
    snprintf(hl, sizeof hl, "%zu", len + 1);
    CHECK_EQ_INT(parse_n(body, len, hl, &r), 400);
    CHECK_MSG(strstr(g_msg, "Inference-Header-Content-Length") && strstr(g_msg, "only"), "%s", g_msg);
    CHECK_EQ_INT(parse_n(body, len, "12abc", &r), 400);
    CHECK_MSG(strstr(g_msg, "not a number of bytes"), "%s", g_msg);
    CHECK_EQ_INT(parse_n(body, len, "-5", &r), 400);
    /* header length cutting the JSON short */
    CHECK_EQ_INT(parse_n(body, len, "20", &r), 400);
    CHECK_MSG(strstr(g_msg, "JSON header"), "%s", g_msg);
    /* binary size not the tensor's */
    const char *wrong = "{\"inputs\":[" N_OK ",{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],"
                        "\"parameters\":{\"binary_data_size\":20}}]}";
    ml = strlen(wrong);
    memcpy(b2, wrong, ml);
    memset(b2 + ml, 0, 20);
    snprintf(hl, sizeof hl, "%zu", ml);
    CHECK_EQ_INT(parse_n(b2, ml + 20, hl, &r), 400);
    CHECK_MSG(strstr(g_msg, "input 'x': binary_data_size 20 but FP32 [1,2,3] is 24 bytes"), "%s", g_msg);
}

static void test_input_errors(void)
{
    const char *X = "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}";
    char b[1024];
    refused("{\"inputs\":[", "JSON", NULL);
    refused("", "JSON", NULL);
    refused("[1]", "JSON", NULL);
    refused("{\"inputs\":5}", "\"inputs\"", NULL);
    refused("{}", "\"inputs\"", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s]}", X);
    refused(b, "takes input 'n' INT32 [2]", "has none");
    snprintf(b, sizeof b, "{\"inputs\":[%s,%s,%s]}", X, N_OK, X);
    refused(b, "input 'x' is given twice", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,%s,{\"name\":\"q\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", X, N_OK);
    refused(b, "input 'q' is not an input of model 'fake'", "'x' FP32 [1,2,3], 'n' INT32 [2]");
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"datatype\":\"INT32\"}]}", X);
    refused(b, "inputs[1]", "\"name\"");
    /* datatypes */
    const char *dts[] = {"FP64", "FP16", "INT64", "UINT8", "BOOL", "BYTES", "fp32"};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"%s\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}]}",
                 N_OK, dts[i]);
        char want[64];
        snprintf(want, sizeof want, "input 'x': datatype %s but the model takes FP32", dts[i]);
        refused(b, want, NULL);
    }
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"n\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1,2]}]}", X);
    refused(b, "input 'n': datatype FP32 but the model takes INT32", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"n\",\"shape\":[2],\"data\":[1,2]}]}", X);
    refused(b, "input 'n': \"datatype\" is missing", "INT32");
    /* shapes */
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,3],\"data\":[1,2,3,4,5,6]}]}", N_OK);
    refused(b, "input 'x': shape [2,3] but the model takes [1,2,3]", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3,2],\"data\":[1,2,3,4,5,6]}]}", N_OK);
    refused(b, "input 'x': shape [1,3,2] but the model takes [1,2,3]", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3,1,1,1,1,1,1,1,1],\"data\":[1]}]}",
             N_OK);
    refused(b, "input 'x': shape", "the model takes [1,2,3]");
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,-2,3],\"data\":[1]}]}", N_OK);
    refused(b, "input 'x': \"shape\" must be a list of whole numbers", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"data\":[1]}]}", N_OK);
    refused(b, "input 'x': \"shape\" is missing", "[1,2,3]");
    /* element counts */
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5]}]}", N_OK);
    refused(b, "input 'x': 5 elements in \"data\" but shape [1,2,3] holds 6", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[[1,2,3],[4,5,6],[7]]}]}",
             N_OK);
    refused(b, "input 'x': 7 elements", "holds 6");
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[]}]}", N_OK);
    refused(b, "input 'x': 0 elements", NULL);
    /* non-numeric data */
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,\"3\",4,5,6]}]}",
             N_OK);
    refused(b, "input 'x': data[2] is a string, not a number", "FP32");
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,null,6]}]}",
             N_OK);
    refused(b, "input 'x': data[4] is null", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,{},6]}]}", N_OK);
    refused(b, "input 'x': data[4] is an object", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2],\"data\":[1,2.5]}]}", X);
    refused(b, "input 'n': data[1] is 2.5, not a INT32 value", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2],\"data\":[1,3000000000]}]}", X);
    refused(b, "input 'n': data[1] is 3000000000", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2],\"data\":[true,1]}]}", X);
    refused(b, "input 'n': data[0] is a boolean", NULL);
    /* neither or both of data and binary_data_size */
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2]}]}", X);
    refused(b, "input 'n' has no \"data\"", NULL);
    snprintf(b, sizeof b,
             "{\"inputs\":[%s,{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2],\"data\":[1,2],\"parameters\":{\"binary_data_size\":8}}]}",
             X);
    refused(b, "input 'n' has both", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s,{\"name\":\"n\",\"datatype\":\"INT32\",\"shape\":[2],\"data\":[1,2],\"parameters\":3}]}", X);
    refused(b, "input 'n': \"parameters\" must be an object", NULL);
}

static void test_outputs_and_parameters(void)
{
    char b[1024];
    const char *IN2 = "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}," N_OK;
    hearth_oip_request r;
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"outputs\":[{\"name\":\"z\",\"parameters\":{\"binary_data\":true}}]}", IN2);
    CHECK_EQ_INT(parse(b, &r), 0);
    CHECK(r.n_out == 1 && r.out[0] == 1 && r.out_binary[0]);
    hearth_oip_request_free(&r);
    snprintf(b, sizeof b,
             "{\"inputs\":[%s],\"parameters\":{\"binary_data_output\":true},\"outputs\":[{\"name\":\"z\"},{\"name\":\"y\","
             "\"parameters\":{\"binary_data\":false}}]}",
             IN2);
    CHECK_EQ_INT(parse(b, &r), 0);
    CHECK(r.n_out == 2 && r.out[0] == 1 && r.out_binary[0] && r.out[1] == 0 && !r.out_binary[1]);
    hearth_oip_request_free(&r);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"outputs\":[{\"name\":\"w\"}]}", IN2);
    refused(b, "output 'w' is not an output of model 'fake'", "'y' FP32 [1,2], 'z' INT64 [3]");
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"outputs\":[{\"name\":\"y\"},{\"name\":\"y\"}]}", IN2);
    refused(b, "output 'y' is asked for twice", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"outputs\":[{\"name\":\"y\",\"parameters\":{\"binary_data\":1}}]}", IN2);
    refused(b, "'y'", "binary_data must be true or false");
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"outputs\":5}", IN2);
    refused(b, "\"outputs\" must be a list", NULL);

    /* sequences */
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":42,\"sequence_start\":true,\"sequence_end\":false,"
                          "\"timeout\":50000,\"priority\":1}}",
             IN2);
    CHECK_EQ_INT(parse(b, &r), 0);
    CHECK(r.has_seq && r.seq_start && !r.seq_end);
    CHECK_EQ_STR(r.seq_id, "42");
    CHECK_EQ_INT(r.timeout_us, 50000);
    hearth_oip_request_free(&r);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":\"cam-7\",\"sequence_end\":true}}", IN2);
    CHECK_EQ_INT(parse(b, &r), 0);
    CHECK(r.has_seq && !r.seq_start && r.seq_end);
    CHECK_EQ_STR(r.seq_id, "cam-7");
    hearth_oip_request_free(&r);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":0}}", IN2); /* tritonclient's "no sequence" */
    CHECK_EQ_INT(parse(b, &r), 0);
    CHECK(!r.has_seq);
    hearth_oip_request_free(&r);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":0,\"sequence_start\":true}}", IN2);
    refused(b, "sequence_start is set but no sequence_id", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":1.5}}", IN2);
    refused(b, "sequence_id is 1.5", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":[1]}}", IN2);
    refused(b, "sequence_id must be a number or a string", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":\"%070d\"}}", IN2, 0);
    refused(b, "sequence_id is 70 bytes long", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"sequence_id\":3,\"sequence_end\":\"yes\"}}", IN2);
    refused(b, "sequence_end must be true or false", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"timeout\":-1}}", IN2);
    refused(b, "parameters.timeout", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":{\"binary_data_output\":\"x\"}}", IN2);
    refused(b, "binary_data_output must be true or false", NULL);
    snprintf(b, sizeof b, "{\"inputs\":[%s],\"parameters\":[]}", IN2);
    refused(b, "\"parameters\" must be an object", NULL);
    snprintf(b, sizeof b, "{\"id\":5,\"inputs\":[%s]}", IN2);
    refused(b, "\"id\" must be a string", NULL);
}

static void test_format_infer(void)
{
    hearth_oip_request r;
    char b[1024];
    snprintf(b, sizeof b,
             "{\"id\":\"q\\\"1\",\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}," N_OK
             "],\"outputs\":[{\"name\":\"z\",\"parameters\":{\"binary_data\":true}},{\"name\":\"y\"}]}");
    CHECK_EQ_INT(parse(b, &r), 0);
    float y[2] = {0.1f, -3.4028235e38f};
    int64_t z[3] = {1, -2, (int64_t)1 << 40};
    void *out[2] = {y, z};
    hearth_buf buf;
    hearth_buf_init(&buf, 1 << 20);
    size_t jl = 0;
    CHECK_EQ_INT(hearth_oip_format_infer(&MODEL, "fake", &r, out, &buf, &jl), 0);
    CHECK_EQ_INT(buf.len, jl + 24);
    CHECK(memcmp(buf.data + jl, z, 24) == 0);
    cJSON *doc = cJSON_ParseWithLength(buf.data, jl);
    CHECK(doc != NULL);
    if (doc) {
        CHECK_EQ_STR(cJSON_GetObjectItem(doc, "model_name")->valuestring, "fake");
        CHECK_EQ_STR(cJSON_GetObjectItem(doc, "model_version")->valuestring, "1");
        CHECK_EQ_STR(cJSON_GetObjectItem(doc, "id")->valuestring, "q\"1");
        cJSON *outs = cJSON_GetObjectItem(doc, "outputs");
        CHECK_EQ_INT(cJSON_GetArraySize(outs), 2);
        cJSON *o0 = cJSON_GetArrayItem(outs, 0), *o1 = cJSON_GetArrayItem(outs, 1);
        CHECK_EQ_STR(cJSON_GetObjectItem(o0, "name")->valuestring, "z");
        CHECK_EQ_STR(cJSON_GetObjectItem(o0, "datatype")->valuestring, "INT64");
        CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(o0, "parameters"), "binary_data_size")->valueint, 24);
        CHECK(cJSON_GetObjectItem(o0, "data") == NULL);
        CHECK_EQ_STR(cJSON_GetObjectItem(o1, "name")->valuestring, "y");
        CHECK_EQ_STR(cJSON_GetObjectItem(o1, "datatype")->valuestring, "FP32");
        cJSON *shape = cJSON_GetObjectItem(o1, "shape");
        CHECK(cJSON_GetArraySize(shape) == 2 && cJSON_GetArrayItem(shape, 1)->valueint == 2);
        cJSON *data = cJSON_GetObjectItem(o1, "data");
        CHECK(cJSON_GetArraySize(data) == 2);
        CHECK((float)cJSON_GetArrayItem(data, 0)->valuedouble == y[0]); /* reads back as itself */
        CHECK((float)cJSON_GetArrayItem(data, 1)->valuedouble == y[1]);
        cJSON_Delete(doc);
    }
    hearth_buf_deinit(&buf);
    hearth_oip_request_free(&r);

    /* all JSON: no binary tail, INT64 as integers */
    snprintf(b, sizeof b,
             "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}," N_OK "]}");
    CHECK_EQ_INT(parse(b, &r), 0);
    hearth_buf_init(&buf, 1 << 20);
    CHECK_EQ_INT(hearth_oip_format_infer(&MODEL, "fake", &r, out, &buf, &jl), 0);
    CHECK_EQ_INT(buf.len, jl);
    CHECK_MSG(strstr(buf.data, "\"data\":[1,-2,1099511627776]") != NULL, "%s", buf.data);
    CHECK(strstr(buf.data, "\"id\"") == NULL);
    hearth_buf_deinit(&buf);
    /* a bound too small: an error, not a cut answer */
    hearth_buf_init(&buf, 40);
    CHECK(hearth_oip_format_infer(&MODEL, "fake", &r, out, &buf, &jl) != 0);
    hearth_buf_deinit(&buf);
    hearth_oip_request_free(&r);
}

static void test_format_metadata(void)
{
    hearth_buf b;
    hearth_buf_init(&b, 1 << 16);
    CHECK_EQ_INT(hearth_oip_format_model(&MODEL, "fake", &b), 0);
    cJSON *doc = cJSON_Parse(b.data);
    CHECK(doc != NULL);
    if (doc) {
        CHECK_EQ_STR(cJSON_GetObjectItem(doc, "name")->valuestring, "fake");
        CHECK_EQ_STR(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "versions"), 0)->valuestring, "1");
        CHECK_EQ_STR(cJSON_GetObjectItem(doc, "platform")->valuestring, "onnxruntime_onnx");
        cJSON *in = cJSON_GetObjectItem(doc, "inputs");
        CHECK_EQ_INT(cJSON_GetArraySize(in), 2);
        CHECK_EQ_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(in, 1), "datatype")->valuestring, "INT32");
        cJSON *outs = cJSON_GetObjectItem(doc, "outputs");
        CHECK_EQ_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(outs, 1), "name")->valuestring, "z");
        CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(outs, 0), "shape")), 2);
        cJSON_Delete(doc);
    }
    hearth_buf_reset(&b, 0);
    CHECK_EQ_INT(hearth_oip_format_server(&b, "v1"), 0);
    CHECK_MSG(strstr(b.data, "\"name\":\"hearth\"") && strstr(b.data, "\"binary_tensor_data\"") && strstr(b.data, "\"sequence\""),
              "%s", b.data);
    hearth_buf_reset(&b, 0);
    CHECK_EQ_INT(hearth_oip_format_error(&b, "bad \"x\""), 0);
    CHECK_EQ_STR(b.data, "{\"error\":\"bad \\\"x\\\"\"}");
    hearth_buf_deinit(&b);
    CHECK_EQ_STR(hearth_oip_datatype(HEARTH_ONNX_FLOAT), "FP32");
    CHECK_EQ_STR(hearth_oip_datatype(HEARTH_ONNX_DOUBLE), "FP64");
    CHECK(hearth_oip_datatype(999) == NULL);
    CHECK_EQ_INT(hearth_oip_dtype_size(HEARTH_ONNX_INT64), 8);
}

/* hearth_oip_parse_into writes the inputs into the caller's buffers (a GPU
 * model's pinned sets), still checks every input is there, and freeing the
 * request leaves those buffers alone (ASan would report a free of them). */
static void test_parse_into(void)
{
    float x_buf[6];
    int32_t n_buf[2];
    void *dst[2] = {x_buf, n_buf};
    const char *body = "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}," N_OK "]}";
    hearth_oip_request r;
    CHECK_EQ_INT(hearth_oip_parse_into(&MODEL, "fake", body, strlen(body), NULL, dst, &r, g_msg, sizeof g_msg), 0);
    CHECK(r.in[0] == (void *)x_buf && r.in[1] == (void *)n_buf);
    CHECK_NEAR(x_buf[5], 6, 0);
    CHECK_EQ_INT(n_buf[1], -8);
    hearth_oip_request_free(&r);
    CHECK(r.in[0] == NULL);
    /* a missing input is still refused, and nothing of dst is freed */
    const char *only_n = "{\"inputs\":[" N_OK "]}";
    CHECK_EQ_INT(hearth_oip_parse_into(&MODEL, "fake", only_n, strlen(only_n), NULL, dst, &r, g_msg, sizeof g_msg), 400);
    CHECK(strstr(g_msg, "takes input") != NULL);
    CHECK_EQ_INT(n_buf[0], 7); /* written before the refusal, into the caller's buffer */
}

int main(void)
{
    RUN(test_json_flat_and_nested);
    RUN(test_binary);
    RUN(test_input_errors);
    RUN(test_outputs_and_parameters);
    RUN(test_format_infer);
    RUN(test_format_metadata);
    RUN(test_parse_into);
    TEST_EXIT();
}

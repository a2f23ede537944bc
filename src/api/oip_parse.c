/* oip_parse.c: an infer request of the Open Inference Protocol checked
 * against a fixed-shape model (see oip_parse.h).
 *
 * The JSON header is parsed with cJSON through hearth_json_body_parse (one
 * object, nothing after it, no NUL in a string), cut at
 * Inference-Header-Content-Length when the binary tensor data extension is
 * used; the raw bytes after it belong, in input order, to the inputs whose
 * parameters carry binary_data_size. Every input tensor is copied into a
 * buffer of its own (new, or the caller's: a GPU model's pinned set,
 * hearth_oip_parse_into): the request's body dies with the handler, the
 * frame runs later on the model's thread, and a copy also aligns the bytes;
 * unless its bytes were received there already (hearth_oip_parse_split:
 * oip.c's infer_sink has the connection put them into the input set).
 * A tensor whose parameters name a system shared memory region
 * (shared_memory_region, _byte_size, _offset: oip_shm.h) is not copied: an
 * input is read where it is, an output's place is kept for the answer; the
 * request holds a reference on each region it names until it is freed.
 *
 * Checks, each a 400 naming the tensor, what came and what the model takes:
 * an input the model lacks, one given twice, one missing; a datatype other
 * than the model's; a shape other than the model's (the models are fixed
 * shape: no batch dimension is added or dropped); JSON data whose element
 * count is not the shape's, or holding a non-number (a non-integer for an
 * integer type, a non-boolean for BOOL); binary_data_size not the tensor's
 * bytes; binary bytes left over or missing; a header length longer than the
 * body; an output asked for that the model lacks, or twice; a region not
 * registered, a shared_memory_byte_size other than an input's bytes (or
 * less than an output's), bytes past the region's end, an input in a
 * region that also carries data.
 *
 * JSON data may be flat or nested to any depth up to MAX_NEST (Triton takes
 * both, row-major); the nesting is not checked against the shape, the count
 * is. Unknown request parameters (priority, custom ones) are ignored, as
 * Triton passes them to backends that may ignore them.
 *
 * Rejected: pointing the job at the binary bytes inside the body (the body
 * is gone before the frame runs); FP16 from JSON numbers (no model served
 * today takes FP16 inputs; binary FP16 is taken as is). */
#include "oip_parse.h"
#include "oip_shm.h"
#include "json_body.h"

#include "models/onnx.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 32

typedef struct dtype_row {
    int onnx;
    const char *name;
    size_t size;
} dtype_row;

static const dtype_row DTYPES[] = {
    {HEARTH_ONNX_FLOAT, "FP32", 4},  {HEARTH_ONNX_UINT8, "UINT8", 1},   {HEARTH_ONNX_INT8, "INT8", 1},
    {HEARTH_ONNX_INT32, "INT32", 4}, {HEARTH_ONNX_INT64, "INT64", 8},   {HEARTH_ONNX_BOOL, "BOOL", 1},
    {HEARTH_ONNX_FLOAT16, "FP16", 2}, {HEARTH_ONNX_DOUBLE, "FP64", 8},
};

static const dtype_row *dtype_of(int onnx)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (DTYPES[i].onnx == onnx)
            return &DTYPES[i];
    return NULL;
}

const char *hearth_oip_datatype(int onnx_dtype)
{
    const dtype_row *d = dtype_of(onnx_dtype);
    return d ? d->name : NULL;
}

size_t hearth_oip_dtype_size(int onnx_dtype)
{
    const dtype_row *d = dtype_of(onnx_dtype);
    return d ? d->size : 0;
}

void hearth_oip_shape_text(const int64_t *dims, int ndim, char *out, size_t n)
{
    size_t k = 0;
    k += (size_t)snprintf(out, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < n)
        snprintf(out + k, n - k, "]");
}

void hearth_oip_request_free(hearth_oip_request *r)
{
    if (!r)
        return;
    for (int i = 0; i < HEARTH_FRAME_MAX_IO; i++) {
        if (r->in[i] != r->dst[i])
            free(r->in[i]);
        r->in[i] = NULL;
    }
    for (int k = 0; k < r->n_shm; k++)
        hearth_oip_shm_put(r->shm[k]);
    r->n_shm = 0;
}

static int fail(char *msg, size_t n, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t n, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return status;
}

static int64_t elements_of(const hearth_frame_io *io)
{
    int64_t n = 1;
    for (int i = 0; i < io->ndim; i++)
        n *= io->dims[i];
    return n;
}

/* "Input3 FP32 [1,1,28,28]" for messages. */
static void io_text(const hearth_frame_io *io, char *out, size_t n)
{
    char shape[160];
    hearth_oip_shape_text(io->dims, io->ndim, shape, sizeof shape);
    const char *dt = hearth_oip_datatype(io->dtype);
    snprintf(out, n, "'%s' %s %s", io->name, dt ? dt : "?", shape);
}

/* The model's inputs (or outputs) listed for a message. */
static void io_list(const hearth_frame_io *ios, int n_io, char *out, size_t n)
{
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n_io && k + 1 < n; i++) {
        char one[256];
        io_text(&ios[i], one, sizeof one);
        k += (size_t)snprintf(out + k, n - k, "%s%s", i ? ", " : "", one);
    }
}

/* ---- JSON data ---- */

typedef struct flat {
    const hearth_frame_io *io;
    const char *dt;
    unsigned char *dst;
    size_t esize;
    int64_t want, count;
    char *msg;
    size_t msg_size;
    int status;
} flat;

/* Stores one JSON scalar as element f->count of the tensor (when it fits). */
static int put(flat *f, const cJSON *v)
{
    int64_t i = f->count++;
    bool store = i < f->want;
    unsigned char *p = f->dst + (size_t)(store ? i : 0) * f->esize;
    int dt = f->io->dtype;
    if (dt == HEARTH_ONNX_BOOL) {
        if (!cJSON_IsBool(v))
            return fail(f->msg, f->msg_size, 400, "input '%s': data[%lld] is not a boolean (the model takes BOOL)",
                        f->io->name, (long long)i);
        if (store)
            *p = cJSON_IsTrue(v) ? 1 : 0;
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return fail(f->msg, f->msg_size, 400, "input '%s': data[%lld] is %s, not a number (the model takes %s)", f->io->name,
                    (long long)i,
                    cJSON_IsString(v)   ? "a string"
                    : cJSON_IsNull(v)   ? "null"
                    : cJSON_IsBool(v)   ? "a boolean"
                    : cJSON_IsObject(v) ? "an object"
                                        : "not a scalar",
                    f->dt);
    double x = v->valuedouble;
    if (dt == HEARTH_ONNX_FLOAT) {
        float y = (float)x;
        if (store)
            memcpy(p, &y, 4);
        return 0;
    }
    if (dt == HEARTH_ONNX_DOUBLE) {
        if (store)
            memcpy(p, &x, 8);
        return 0;
    }
    double lo, hi;
    switch (dt) {
    case HEARTH_ONNX_UINT8: lo = 0, hi = 255; break;
    case HEARTH_ONNX_INT8: lo = -128, hi = 127; break;
    case HEARTH_ONNX_INT32: lo = -2147483648.0, hi = 2147483647.0; break;
    case HEARTH_ONNX_INT64: lo = -9007199254740992.0, hi = 9007199254740992.0; break; /* exact in a double */
    default:
        return fail(f->msg, f->msg_size, 400, "input '%s': %s tensors are taken as binary data only (binary_data_size)",
                    f->io->name, f->dt);
    }
    if (x != floor(x) || x < lo || x > hi)
        return fail(f->msg, f->msg_size, 400, "input '%s': data[%lld] is %.17g, not a %s value (%.0f..%.0f)", f->io->name,
                    (long long)i, x, f->dt, lo, hi);
    if (store) {
        if (dt == HEARTH_ONNX_UINT8)
            *p = (unsigned char)x;
        else if (dt == HEARTH_ONNX_INT8)
            *(signed char *)p = (signed char)x;
        else if (dt == HEARTH_ONNX_INT32) {
            int32_t y = (int32_t)x;
            memcpy(p, &y, 4);
        } else {
            int64_t y = (int64_t)x;
            memcpy(p, &y, 8);
        }
    }
    return 0;
}

static int flatten(flat *f, const cJSON *v, int depth)
{
    if (!cJSON_IsArray(v))
        return put(f, v);
    if (depth >= MAX_NEST)
        return fail(f->msg, f->msg_size, 400, "input '%s': data is nested deeper than %d lists", f->io->name, MAX_NEST);
    for (const cJSON *e = v->child; e; e = e->next) {
        int st = flatten(f, e, depth + 1);
        if (st)
            return st;
    }
    return 0;
}

/* ---- parameters ---- */

static int read_params(const cJSON *params, hearth_oip_request *r, char *msg, size_t n)
{
    if (!params)
        return 0;
    if (!cJSON_IsObject(params))
        return fail(msg, n, 400, "\"parameters\" must be an object");
    const cJSON *sid = cJSON_GetObjectItemCaseSensitive(params, "sequence_id");
    if (sid && !cJSON_IsNull(sid)) {
        if (cJSON_IsString(sid)) {
            size_t len = strlen(sid->valuestring);
            if (len >= sizeof r->seq_id)
                return fail(msg, n, 400, "parameters.sequence_id is %zu bytes long; the most is %zu", len, sizeof r->seq_id - 1);
            if (len) {
                r->has_seq = true;
                memcpy(r->seq_id, sid->valuestring, len + 1);
            }
        } else if (cJSON_IsNumber(sid)) {
            double x = sid->valuedouble;
            if (x != floor(x) || x < 0 || x > 9007199254740992.0)
                return fail(msg, n, 400,
                            "parameters.sequence_id is %.17g: a number must be a whole number in 0..2^53 (send a larger id as "
                            "a string)",
                            x);
            if (x != 0) {
                r->has_seq = true;
                snprintf(r->seq_id, sizeof r->seq_id, "%llu", (unsigned long long)x);
            }
        } else {
            return fail(msg, n, 400, "parameters.sequence_id must be a number or a string");
        }
    }
    const char *flags[2] = {"sequence_start", "sequence_end"};
    bool *dst[2] = {&r->seq_start, &r->seq_end};
    for (int k = 0; k < 2; k++) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(params, flags[k]);
        if (!b || cJSON_IsNull(b))
            continue;
        if (!cJSON_IsBool(b))
            return fail(msg, n, 400, "parameters.%s must be true or false", flags[k]);
        *dst[k] = cJSON_IsTrue(b);
    }
    if ((r->seq_start || r->seq_end) && !r->has_seq)
        return fail(msg, n, 400, "parameters.%s is set but no sequence_id is given (a non-zero number or a non-empty string)",
                    r->seq_start ? "sequence_start" : "sequence_end");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(params, "timeout");
    if (t && !cJSON_IsNull(t)) {
        if (!cJSON_IsNumber(t) || t->valuedouble != floor(t->valuedouble) || t->valuedouble < 0 ||
            t->valuedouble > 3.6e12)
            return fail(msg, n, 400, "parameters.timeout must be a whole number of microseconds in 0..3600000000000");
        r->timeout_us = (uint64_t)t->valuedouble;
    }
    return 0;
}

/* The bool a parameters object holds under key (false when absent); -1 when not a bool. */
static int param_bool(const cJSON *params, const char *key)
{
    const cJSON *b = cJSON_IsObject(params) ? cJSON_GetObjectItemCaseSensitive(params, key) : NULL;
    if (!b || cJSON_IsNull(b))
        return 0;
    return cJSON_IsBool(b) ? cJSON_IsTrue(b) : -1;
}

/* ---- the request ---- */

int hearth_oip_header_len(const char *text, size_t len, size_t *out, char *msg, size_t n)
{
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p < '0' || *p > '9')
        return fail(msg, n, 400, "Inference-Header-Content-Length is '%.40s', not a number of bytes", text);
    errno = 0;
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    while (*end == ' ' || *end == '\t')
        end++;
    if (errno || *end)
        return fail(msg, n, 400, "Inference-Header-Content-Length is '%.40s', not a number of bytes", text);
    if (v > len)
        return fail(msg, n, 400, "Inference-Header-Content-Length is %llu but the body is only %zu bytes", v, len);
    *out = (size_t)v;
    return 0;
}

/* A tensor's system shared memory parameters (shared_memory_region, _byte_size,
 * _offset): *at the bytes in the region (need: the tensor's size, at least
 * that many must be given: an input's exactly), or 0 when the parameters
 * name no region; else the status with msg naming what (what: "input 'x'"). */
static int shm_param(const cJSON *params, const char *what, size_t need, bool exact, hearth_oip_request *r, char **at,
                     hearth_oip_shm **region, uint64_t *given, char *msg, size_t n)
{
    const cJSON *rg = params ? cJSON_GetObjectItemCaseSensitive(params, "shared_memory_region") : NULL;
    *at = NULL;
    if (!rg || cJSON_IsNull(rg))
        return 0;
    if (!cJSON_IsString(rg))
        return fail(msg, n, 400, "%s: parameters.shared_memory_region must be a region's name", what);
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(params, "shared_memory_byte_size");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(params, "shared_memory_offset");
    if (!cJSON_IsNumber(bs) || bs->valuedouble != floor(bs->valuedouble) || bs->valuedouble < 0)
        return fail(msg, n, 400, "%s: parameters.shared_memory_byte_size must be a whole number of bytes", what);
    if (of && !cJSON_IsNull(of) && (!cJSON_IsNumber(of) || of->valuedouble != floor(of->valuedouble) || of->valuedouble < 0))
        return fail(msg, n, 400, "%s: parameters.shared_memory_offset must be a whole number of bytes", what);
    double size = bs->valuedouble, off = of && cJSON_IsNumber(of) ? of->valuedouble : 0;
    if (exact ? size != (double)need : size < (double)need)
        return fail(msg, n, 400, "%s: shared_memory_byte_size %.0f but the tensor is %zu bytes", what, size, need);
    if (r->n_shm >= (int)(sizeof r->shm / sizeof r->shm[0]))
        return fail(msg, n, 400, "%s: too many shared memory tensors", what);
    hearth_oip_shm *reg = hearth_oip_shm_get(rg->valuestring);
    if (!reg)
        return fail(msg, n, 400, "%s: Unable to find system shared memory region: '%.128s' (register it with POST "
                                 "/v2/systemsharedmemory/region/%.128s/register)", what, rg->valuestring, rg->valuestring);
    r->shm[r->n_shm++] = reg; /* put back by hearth_oip_request_free */
    char *p = off <= 9007199254740992.0 && size <= 9007199254740992.0
                  ? hearth_oip_shm_at(reg, (uint64_t)off, (uint64_t)size) : NULL;
    if (!p)
        return fail(msg, n, 400, "%s: offset %.0f + %.0f bytes is past the end of shared memory region '%s' (%llu bytes)",
                    what, off, size, hearth_oip_shm_name(reg), (unsigned long long)hearth_oip_shm_size(reg));
    *at = p;
    *region = reg;
    *given = (uint64_t)size;
    return 0;
}

static int parse_outputs(const hearth_frame_info *m, const char *name, const cJSON *outputs, bool binary_default,
                         hearth_oip_request *r, char *msg, size_t n)
{
    if (!outputs || cJSON_IsNull(outputs) || (cJSON_IsArray(outputs) && !outputs->child)) {
        r->n_out = m->n_outputs;
        for (int j = 0; j < m->n_outputs; j++) {
            r->out[j] = j;
            r->out_binary[j] = binary_default;
        }
        return 0;
    }
    if (!cJSON_IsArray(outputs))
        return fail(msg, n, 400, "\"outputs\" must be a list of {\"name\": ...}");
    int k = 0;
    for (const cJSON *o = outputs->child; o; o = o->next, k++) {
        const cJSON *nm = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "name") : NULL;
        if (!cJSON_IsString(nm))
            return fail(msg, n, 400, "outputs[%d] must be an object with a \"name\" string", k);
        int j = 0;
        while (j < m->n_outputs && strcmp(m->outputs[j].name, nm->valuestring) != 0)
            j++;
        if (j == m->n_outputs) {
            char list[1024];
            io_list(m->outputs, m->n_outputs, list, sizeof list);
            return fail(msg, n, 400, "output '%.128s' is not an output of model '%s' (its outputs: %s)", nm->valuestring, name,
                        list);
        }
        for (int i = 0; i < r->n_out; i++)
            if (r->out[i] == j)
                return fail(msg, n, 400, "output '%s' is asked for twice", m->outputs[j].name);
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(o, "parameters");
        if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
            return fail(msg, n, 400, "outputs[%d] ('%s'): \"parameters\" must be an object", k, m->outputs[j].name);
        const cJSON *bd = params ? cJSON_GetObjectItemCaseSensitive(params, "binary_data") : NULL;
        bool binary = binary_default;
        if (bd && !cJSON_IsNull(bd)) {
            if (!cJSON_IsBool(bd))
                return fail(msg, n, 400, "outputs[%d] ('%s'): parameters.binary_data must be true or false", k,
                            m->outputs[j].name);
            binary = cJSON_IsTrue(bd);
        }
        if (r->n_out >= HEARTH_FRAME_MAX_IO)
            return fail(msg, n, 400, "more than %d outputs asked for", HEARTH_FRAME_MAX_IO);
        char what[160];
        snprintf(what, sizeof what, "output '%s'", m->outputs[j].name);
        int k2 = r->n_out;
        hearth_oip_shm *reg; /* the answer names neither, as Triton's (oip_json.c) */
        uint64_t given;
        int st = shm_param(params, what, m->outputs[j].bytes, false, r, &r->out_at[k2], &reg, &given, msg, n);
        if (st)
            return st;
        r->out[r->n_out] = j;
        r->out_binary[r->n_out++] = binary && !r->out_at[k2];
    }
    return 0;
}

/* One entry of "inputs": checked and copied into r->in[its index]. *bin_off
 * walks the binary bytes. */
static int parse_input(const hearth_frame_info *m, const char *name, const cJSON *t, int k, const char *bin, size_t bin_len,
                       size_t *bin_off, hearth_oip_request *r, char *msg, size_t n)
{
    const cJSON *nm = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "name") : NULL;
    if (!cJSON_IsString(nm))
        return fail(msg, n, 400, "inputs[%d] must be an object with a \"name\" string", k);
    int i = 0;
    while (i < m->n_inputs && strcmp(m->inputs[i].name, nm->valuestring) != 0)
        i++;
    if (i == m->n_inputs) {
        char list[1024];
        io_list(m->inputs, m->n_inputs, list, sizeof list);
        return fail(msg, n, 400, "input '%.128s' is not an input of model '%s' (its inputs: %s)", nm->valuestring, name, list);
    }
    const hearth_frame_io *io = &m->inputs[i];
    if (r->in[i])
        return fail(msg, n, 400, "input '%s' is given twice", io->name);
    const char *want_dt = hearth_oip_datatype(io->dtype);
    char want_shape[160];
    hearth_oip_shape_text(io->dims, io->ndim, want_shape, sizeof want_shape);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "datatype");
    if (!cJSON_IsString(dt))
        return fail(msg, n, 400, "input '%s': \"datatype\" is missing or not a string (the model takes %s)", io->name,
                    want_dt ? want_dt : "?");
    if (!want_dt || strcmp(dt->valuestring, want_dt) != 0)
        return fail(msg, n, 400, "input '%s': datatype %.32s but the model takes %s", io->name, dt->valuestring,
                    want_dt ? want_dt : "a type this protocol cannot name");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    if (!cJSON_IsArray(shape))
        return fail(msg, n, 400, "input '%s': \"shape\" is missing or not a list (the model takes %s)", io->name, want_shape);
    int64_t got[HEARTH_FRAME_MAX_DIMS + 1];
    int nd = 0;
    bool shape_ok = true;
    for (const cJSON *d = shape->child; d; d = d->next) {
        if (!cJSON_IsNumber(d) || d->valuedouble != floor(d->valuedouble) || d->valuedouble < 0 || d->valuedouble > 1e15)
            return fail(msg, n, 400, "input '%s': \"shape\" must be a list of whole numbers >= 0 (the model takes %s)", io->name,
                        want_shape);
        if (nd < HEARTH_FRAME_MAX_DIMS + 1)
            got[nd] = (int64_t)d->valuedouble;
        nd++;
    }
    if (nd != io->ndim)
        shape_ok = false;
    for (int d = 0; shape_ok && d < nd; d++)
        shape_ok = got[d] == io->dims[d];
    if (!shape_ok) {
        char got_shape[160];
        if (nd <= HEARTH_FRAME_MAX_DIMS + 1)
            hearth_oip_shape_text(got, nd, got_shape, sizeof got_shape);
        else
            snprintf(got_shape, sizeof got_shape, "(%d dimensions)", nd);
        return fail(msg, n, 400, "input '%s': shape %s but the model takes %s", io->name, got_shape, want_shape);
    }
    size_t esize = hearth_oip_dtype_size(io->dtype);
    int64_t elems = elements_of(io);
    size_t bytes = (size_t)elems * esize;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(t, "parameters");
    if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
        return fail(msg, n, 400, "input '%s': \"parameters\" must be an object", io->name);
    const cJSON *bsize = params ? cJSON_GetObjectItemCaseSensitive(params, "binary_data_size") : NULL;
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(t, "data");
    if (bsize && !cJSON_IsNull(bsize) && data)
        return fail(msg, n, 400, "input '%s' has both \"data\" and parameters.binary_data_size: send one", io->name);
    {
        char what[160], *at;
        hearth_oip_shm *reg;
        uint64_t given;
        snprintf(what, sizeof what, "input '%s'", io->name);
        int st = shm_param(params, what, bytes, true, r, &at, &reg, &given, msg, n);
        if (st)
            return st;
        if (at) {
            if (data || (bsize && !cJSON_IsNull(bsize)))
                return fail(msg, n, 400, "input '%s' names a shared memory region and also carries its data: send one",
                            io->name);
            r->in[i] = r->dst[i] = at; /* read where it is; not freed */
            return 0;
        }
    }
    if (!(r->in[i] = r->dst[i] ? r->dst[i] : malloc(bytes ? bytes : 1)))
        return fail(msg, n, 503, "out of memory for input '%s' (%zu bytes)", io->name, bytes);
    if (bsize && !cJSON_IsNull(bsize)) {
        if (!cJSON_IsNumber(bsize) || bsize->valuedouble != floor(bsize->valuedouble) || bsize->valuedouble < 0)
            return fail(msg, n, 400, "input '%s': parameters.binary_data_size must be a whole number of bytes", io->name);
        double got_b = bsize->valuedouble;
        if (got_b != (double)bytes)
            return fail(msg, n, 400, "input '%s': binary_data_size %.0f but %s %s is %zu bytes", io->name, got_b, want_dt,
                        want_shape, bytes);
        if (bin_len - *bin_off < bytes)
            return fail(msg, n, 400,
                        "input '%s': binary_data_size %zu but only %zu bytes of binary data are left after the JSON header "
                        "(Inference-Header-Content-Length)",
                        io->name, bytes, bin_len - *bin_off);
        if (r->in[i] != bin + *bin_off) /* else received where it goes (hearth_oip_parse_split) */
            memcpy(r->in[i], bin + *bin_off, bytes);
        *bin_off += bytes;
        return 0;
    }
    if (!data)
        return fail(msg, n, 400, "input '%s' has no \"data\" and no parameters.binary_data_size", io->name);
    flat f = {io, want_dt, r->in[i], esize, elems, 0, msg, n, 0};
    int st = flatten(&f, data, 0);
    if (st)
        return st;
    if (f.count != elems)
        return fail(msg, n, 400, "input '%s': %lld elements in \"data\" but shape %s holds %lld", io->name, (long long)f.count,
                    want_shape, (long long)elems);
    return 0;
}

int hearth_oip_parse(const hearth_frame_info *m, const char *name, const char *body, size_t len, const char *header_len,
                     hearth_oip_request *r, char *msg, size_t msg_size)
{
    return hearth_oip_parse_into(m, name, body, len, header_len, NULL, r, msg, msg_size);
}

int hearth_oip_parse_into(const hearth_frame_info *m, const char *name, const char *body, size_t len,
                          const char *header_len, void *const *dst, hearth_oip_request *r, char *msg, size_t msg_size)
{
    size_t json_len = len;
    int st;
    if (header_len && (st = hearth_oip_header_len(header_len, len, &json_len, msg, msg_size)) != 0) {
        memset(r, 0, sizeof *r);
        return st;
    }
    return hearth_oip_parse_split(m, name, body, json_len, header_len != NULL, body + json_len, len - json_len, dst, r,
                                  msg, msg_size);
}

int hearth_oip_parse_split(const hearth_frame_info *m, const char *name, const char *json, size_t json_len,
                           bool header, const char *bin, size_t bin_len, void *const *dst, hearth_oip_request *r,
                           char *msg, size_t msg_size)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; dst && i < m->n_inputs && i < HEARTH_FRAME_MAX_IO; i++)
        r->dst[i] = dst[i];
    const size_t len = json_len + bin_len;
    int st;
    char jmsg[384];
    cJSON *doc = hearth_json_body_parse(json, json_len, jmsg, sizeof jmsg);
    if (!doc)
        return fail(msg, msg_size, 400, "the request's JSON%s: %s", header ? " header" : "", jmsg);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
    if (id && !cJSON_IsNull(id)) {
        if (!cJSON_IsString(id)) {
            st = fail(msg, msg_size, 400, "\"id\" must be a string");
            goto out;
        }
        if (strlen(id->valuestring) >= sizeof r->id) {
            st = fail(msg, msg_size, 400, "\"id\" is longer than %zu bytes", sizeof r->id - 1);
            goto out;
        }
        r->has_id = true;
        snprintf(r->id, sizeof r->id, "%s", id->valuestring);
    }
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(doc, "parameters");
    if ((st = read_params(params, r, msg, msg_size)) != 0)
        goto out;
    int bin_default = param_bool(params, "binary_data_output");
    if (bin_default < 0) {
        st = fail(msg, msg_size, 400, "parameters.binary_data_output must be true or false");
        goto out;
    }
    const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(doc, "inputs");
    if (!cJSON_IsArray(inputs)) {
        st = fail(msg, msg_size, 400, "\"inputs\" is missing or not a list");
        goto out;
    }
    size_t bin_off = 0;
    int k = 0;
    for (const cJSON *t = inputs->child; t; t = t->next, k++)
        if ((st = parse_input(m, name, t, k, bin, bin_len, &bin_off, r, msg, msg_size)) != 0)
            goto out;
    for (int i = 0; i < m->n_inputs; i++) {
        if (!r->in[i]) {
            char one[256];
            io_text(&m->inputs[i], one, sizeof one);
            st = fail(msg, msg_size, 400, "model '%s' takes input %s and the request has none", name, one);
            goto out;
        }
    }
    if (bin_off != bin_len) {
        st = fail(msg, msg_size, 400,
                  "%zu bytes follow the JSON header but the inputs' binary_data_size add up to %zu (Inference-Header-Content-Length "
                  "%zu of a %zu-byte body)",
                  bin_len, bin_off, json_len, len);
        goto out;
    }
    st = parse_outputs(m, name, cJSON_GetObjectItemCaseSensitive(doc, "outputs"), bin_default == 1, r, msg, msg_size);
out:
    cJSON_Delete(doc);
    if (st)
        hearth_oip_request_free(r);
    return st;
}

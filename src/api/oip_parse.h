/* oip_parse.h: an Open Inference Protocol (KServe v2, as Triton serves it)
 * infer request read and checked against a fixed-shape model: the JSON
 * header, the binary tensor data extension's raw bytes after it, the
 * sequence and timeout parameters and the outputs asked for. Private to the
 * api layer; sees no request object, so it can be unit-tested and fuzzed. */
#ifndef HEARTH_API_OIP_PARSE_H
#define HEARTH_API_OIP_PARSE_H

#include "engine/frame_queue.h"
#include "models/frame.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEARTH_OIP_ID_MAX 256

typedef struct hearth_oip_request {
    bool has_id;
    char id[HEARTH_OIP_ID_MAX];        /* "id", echoed in the answer */
    bool has_seq;                      /* parameters.sequence_id given, and not 0 or "" */
    char seq_id[HEARTH_FRAME_SEQ_ID_MAX]; /* a number as its decimal text (so 5 and "5" are one sequence) */
    bool seq_start, seq_end;
    uint64_t timeout_us;               /* parameters.timeout; 0: none given (or 0: the model's default) */
    void *in[HEARTH_FRAME_MAX_IO];     /* model->inputs[i].bytes each, in the model's order: owned, or dst's */
    void *dst[HEARTH_FRAME_MAX_IO];    /* hearth_oip_parse_into's buffers (not freed here), else NULL */
    int n_out;                         /* outputs to answer with: those listed, in their order, else all */
    int out[HEARTH_FRAME_MAX_IO];      /* indexes into model->outputs */
    bool out_binary[HEARTH_FRAME_MAX_IO]; /* answered as raw bytes after the JSON header */
    /* The system shared memory extension (oip_shm.h): an input read from a
     * region is in[i] == dst[i] inside it; an output k written into one goes
     * to out_at[k]. Each region named holds a reference until
     * hearth_oip_request_free. */
    struct hearth_oip_shm *shm[2 * HEARTH_FRAME_MAX_IO];
    int n_shm;
    char *out_at[HEARTH_FRAME_MAX_IO];
} hearth_oip_request;

/* Reads body[0..len) (borrowed) as an infer request for model m, named name
 * in messages. header_len: the Inference-Header-Content-Length header's
 * value as sent (NULL when absent: the whole body is JSON). Returns 0 with
 * *r filled (free it with hearth_oip_request_free), or the HTTP status to
 * answer (400; 503 out of memory) with msg saying, for a tensor, its name,
 * what came and what the model takes. On error *r holds nothing to free.
 * Thread-safe. */
int hearth_oip_parse(const hearth_frame_info *m, const char *name, const char *body, size_t len, const char *header_len,
                     hearth_oip_request *r, char *msg, size_t msg_size);
/* As hearth_oip_parse, with the inputs written into dst[i] (the caller's,
 * model->inputs[i].bytes each: an input set the model keeps, a GPU's pinned
 * so that it copies from them without staging) instead of new buffers;
 * dst NULL: new. */
int hearth_oip_parse_into(const hearth_frame_info *m, const char *name, const char *body, size_t len,
                          const char *header_len, void *const *dst, hearth_oip_request *r, char *msg, size_t msg_size);
/* The same with the body in its two parts: the JSON header (json_len bytes;
 * header: an Inference-Header-Content-Length said so, for the messages) and
 * the binary tensor data (bin_len bytes at bin). An input whose bytes are
 * already where dst puts them (bin + its offset == dst[i]: received there,
 * net/server.h's body sink) is not copied. */
int hearth_oip_parse_split(const hearth_frame_info *m, const char *name, const char *json, size_t json_len,
                           bool header, const char *bin, size_t bin_len, void *const *dst, hearth_oip_request *r,
                           char *msg, size_t msg_size);
/* The JSON header's bytes an Inference-Header-Content-Length value says
 * (text as sent, blanks around it allowed) for a body of len bytes: 0 with
 * *out set, or 400 with msg (n bytes; NULL with n 0: none) saying why. */
int hearth_oip_header_len(const char *text, size_t len, size_t *out, char *msg, size_t n);
/* Frees the input buffers (not dst's). NULL or a zeroed request: no-op. */
void hearth_oip_request_free(hearth_oip_request *r);

/* Triton's datatype name of an ONNX element type ("FP32", "INT64", ...),
 * NULL for a type the protocol has no fixed-size name for. */
const char *hearth_oip_datatype(int onnx_dtype);
/* Bytes per element (0: unknown). */
size_t hearth_oip_dtype_size(int onnx_dtype);
/* "[1,3,240,320]" into out (cut to n). */
void hearth_oip_shape_text(const int64_t *dims, int ndim, char *out, size_t n);

#endif

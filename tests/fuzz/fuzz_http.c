/* fuzz_http.c: libFuzzer target for the HTTP request-head parser and the
 * chunked decoder.
 *
 * The input is parsed as a request head with the default limits; when the
 * head is complete and chunked, the rest is decoded into a 1 MiB-bounded
 * buffer. Beyond "no crash, no sanitizer report" it traps on broken
 * invariants: a prefix of the input must give HEARTH_EAGAIN or the whole
 * input's answer; statuses must be among those documented; and decoding in
 * one call must agree exactly with decoding in small pieces. */
#include "base/buf.h"
#include "net/http_parse.h"

#include <stdint.h>
#include <string.h>

#define BODY_MAX (1u << 20)

static void check_status(long rc, int status)
{
    if (rc >= 0 || rc == HEARTH_EAGAIN)
        return;
    if (status != 400 && status != 417 && status != 431 && status != 501 && status != 505)
        __builtin_trap();
}

typedef struct {
    long consumed;  /* or the error */
    int status;
    bool done;
    hearth_buf out;
} decoded;

/* Decodes data[0..n) in pieces whose sizes cycle through `step` (0: one call). */
static void decode(const char *data, size_t n, size_t step, decoded *d)
{
    hearth_http_chunked c;
    hearth_http_chunked_init(&c);
    hearth_buf_init(&d->out, BODY_MAX);
    d->consumed = 0;
    d->status = 0;
    d->done = false;
    size_t off = 0, k = 0;
    do {
        size_t piece = n - off;
        if (step && piece > 1 + k % step)
            piece = 1 + k % step;
        k++;
        hearth_err err;
        long rc = hearth_http_chunked_decode(&c, data + off, piece, &d->out, &d->done, &d->status, &err);
        if (rc < 0) {
            if (d->status != 400 && d->status != 413 && d->status != 500)
                __builtin_trap();
            d->consumed = rc;
            return;
        }
        if ((size_t)rc > piece || (!d->done && (size_t)rc != piece))
            __builtin_trap();
        off += (size_t)rc;
    } while (off < n && !d->done);
    d->consumed = (long)off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hearth_http_request req, preq;
    hearth_http_limits lim;
    hearth_http_limits_default(&lim);
    const char *buf = (const char *)data;
    int status = 0, pstatus = 0;
    hearth_err err, perr;
    err.msg[0] = perr.msg[0] = 0;

    long rc = hearth_http_parse_request(buf, size, &lim, &req, &status, &err);
    check_status(rc, status);
    if (rc >= 0 && ((size_t)rc > size || (size_t)rc > lim.max_header_bytes || req.n_headers > lim.max_headers))
        __builtin_trap();

    /* two prefixes: half, and all but the last byte */
    size_t cuts[2] = {size / 2, size ? size - 1 : 0};
    for (int i = 0; i < 2; i++) {
        long prc = hearth_http_parse_request(buf, cuts[i], &lim, &preq, &pstatus, &perr);
        if (prc == HEARTH_EAGAIN)
            continue;
        if (prc != rc)
            __builtin_trap();
        if (prc < 0 && (pstatus != status || strcmp(perr.msg, err.msg) != 0))
            __builtin_trap();
    }

    if (rc < 0 || !req.chunked)
        return 0;
    const char *body = buf + rc;
    size_t n = size - (size_t)rc;
    decoded whole, pieces;
    decode(body, n, 0, &whole);
    decode(body, n, 7, &pieces);
    if (whole.consumed != pieces.consumed || whole.done != pieces.done || whole.status != pieces.status ||
        whole.out.len != pieces.out.len ||
        (whole.out.len && memcmp(whole.out.data, pieces.out.data, whole.out.len) != 0))
        __builtin_trap();
    hearth_buf_deinit(&whole.out);
    hearth_buf_deinit(&pieces.out);
    return 0;
}

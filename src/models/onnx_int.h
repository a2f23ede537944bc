/* onnx_int.h: private to the ONNX loader's files (onnx.c, onnx_tensor.c,
 * onnx_wire.c): the loader's own state behind hearth_onnx.impl and the
 * helpers the files share. */
#ifndef HEARTH_MODELS_ONNX_INT_H
#define HEARTH_MODELS_ONNX_INT_H

#include "models/onnx.h"
#include "models/onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

/* Bounds on counts read from a file (each refused by name when passed):
 * far above any vision model (RFB-320: 242 nodes), low enough that the
 * plain-C copies stay small and every count fits an int. */
#define ONNX_MAX_NODES (1 << 20)
#define ONNX_MAX_INITS (1 << 20)
#define ONNX_MAX_VALUES (1 << 16)        /* graph inputs, outputs */
#define ONNX_MAX_NODE_IO (1 << 16)       /* one node's inputs, outputs */
#define ONNX_MAX_ATTRS (1 << 12)         /* one node's attributes */
#define ONNX_MAX_FILE ((size_t)1 << 31)  /* protobuf's own limit on a message: 2 GiB */
/* The most elements a tensor may claim (its bytes must also be in a file
 * of at most 2 GiB, checked against the data actually present). */
#define ONNX_MAX_ELEMS ((int64_t)1 << 40)

/* A loader-owned allocation, freed at close: blocks are chained. */
typedef struct onnx_block {
    struct onnx_block *next;
    _Alignas(16) unsigned char data[];
} onnx_block;

typedef struct onnx_impl {
    Onnx__ModelProto *pb;                /* the unpacked file: strings and tensor data point into it */
    onnx_block *blocks;
    const hearth_onnx_tensor **by_name;  /* initializers sorted by name (hearth_onnx_init_find) */
} onnx_impl;

/* n zeroed bytes, 16-byte aligned, owned by im (freed at close); NULL when
 * out of memory. */
void *onnx_alloc(onnx_impl *im, size_t n);

/* Converts t into out (data used in place where it is aligned, else copied
 * into im; int32_data narrow types packed to their size). what names the
 * tensor's place for messages when t has no name ("initializer #3", "node
 * 'conv1' attribute 'value'"); file is the model's path. Returns 0 or a
 * negative status with err set ("onnx: FILE: tensor 'X': ..."). */
int onnx_tensor_read(onnx_impl *im, const Onnx__TensorProto *t, const char *what, const char *file,
                     hearth_onnx_tensor *out, hearth_err *err);

/* Walks data[0, len) as a message of desc and locates the first malformed
 * field (a bad varint, a length past the end of its message, a wire type
 * that protobuf-c does not read or that the field's declared type cannot
 * have, a broken packed array, a nested message of a known field that is
 * itself malformed). Returns 0 when nothing is found, else -1 with *off the
 * field's byte offset in data and why (why_n bytes) saying what and where
 * ("GraphProto.node > NodeProto.attribute: length 300 runs past the end
 * (12 bytes left)"). Reads no byte outside data; recursion is bounded. */
int onnx_wire_check(const uint8_t *data, size_t len, const ProtobufCMessageDescriptor *desc, uint64_t *off,
                    char *why, size_t why_n);

#endif

/* onnx.h: an ONNX model file read into plain C: the graph's nodes with their
 * attributes, its initializers (constant tensors) and its inputs and
 * outputs. Structure only: shapes are inferred, constants folded and nodes
 * checked against the ops hearth runs by the planner (onnx_plan.h), which
 * names an unsupported node with its op type and opset.
 *
 * The protobuf is read with libprotobuf-c, from code generated at build time
 * out of onnx.proto (hearth's subset of ONNX's schema: the messages and
 * fields hearth reads, with ONNX's field numbers). Everything here borrows
 * from the model: strings and tensor data live until hearth_onnx_close. */
#ifndef HEARTH_MODELS_ONNX_H
#define HEARTH_MODELS_ONNX_H

#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most dimensions a tensor may have here (ONNX allows more; a file with
 * more is refused naming the tensor). */
#define HEARTH_ONNX_MAX_DIMS 8

/* ONNX's TensorProto.DataType numbers, the ones hearth reads. */
enum hearth_onnx_dtype {
    HEARTH_ONNX_FLOAT = 1,
    HEARTH_ONNX_UINT8 = 2,
    HEARTH_ONNX_INT8 = 3,
    HEARTH_ONNX_INT32 = 6,
    HEARTH_ONNX_INT64 = 7,
    HEARTH_ONNX_BOOL = 9,
    HEARTH_ONNX_FLOAT16 = 10,
    HEARTH_ONNX_DOUBLE = 11,
};
/* "FLOAT", "INT64", ... ("?" for others). */
const char *hearth_onnx_dtype_name(int dtype);
/* Bytes of one element of dtype (0: a type hearth does not read). */
size_t hearth_onnx_dtype_size(int dtype);

/* A constant tensor: an initializer, or a Constant node's / a TENSOR
 * attribute's value. data holds n elements of dtype, little-endian, C order,
 * 4-byte aligned at least (8 for INT64/DOUBLE); for FLOAT16, BOOL, INT8 and
 * UINT8 stored in ONNX's int32_data, the loader has packed them to their own
 * size. */
typedef struct hearth_onnx_tensor {
    const char *name;
    int dtype;                           /* enum hearth_onnx_dtype */
    int ndim;
    int64_t dims[HEARTH_ONNX_MAX_DIMS];
    int64_t n;                           /* elements (1 for a scalar, ndim 0) */
    const void *data;
    size_t bytes;                        /* n * hearth_onnx_dtype_size(dtype) */
} hearth_onnx_tensor;

/* ONNX's AttributeProto.AttributeType numbers. */
enum hearth_onnx_attr_type {
    HEARTH_ONNX_ATTR_FLOAT = 1,
    HEARTH_ONNX_ATTR_INT = 2,
    HEARTH_ONNX_ATTR_STRING = 3,
    HEARTH_ONNX_ATTR_TENSOR = 4,
    HEARTH_ONNX_ATTR_FLOATS = 6,
    HEARTH_ONNX_ATTR_INTS = 7,
    HEARTH_ONNX_ATTR_STRINGS = 8,
};

typedef struct hearth_onnx_attr {
    const char *name;
    int type;                            /* enum hearth_onnx_attr_type (others: kept, type as the file says) */
    float f;                             /* FLOAT */
    int64_t i;                           /* INT */
    const char *s;                       /* STRING, NUL-terminated (a string with a NUL inside is refused) */
    const float *floats;                 /* FLOATS (n of them) */
    const int64_t *ints;                 /* INTS (n of them) */
    const char *const *strings;          /* STRINGS (n of them), each NUL-terminated as s is */
    int64_t n;
    const hearth_onnx_tensor *t;         /* TENSOR */
} hearth_onnx_attr;

typedef struct hearth_onnx_node {
    const char *name;                    /* the file's, or "#<index>" when it has none */
    const char *op_type;
    const char *domain;                  /* "" for the default domain (ai.onnx) */
    int n_in, n_out;
    const char *const *in;               /* value names; "" for an optional input left out */
    const char *const *out;
    int n_attr;
    const hearth_onnx_attr *attr;
} hearth_onnx_node;

/* A graph input or output as the file declares it. */
typedef struct hearth_onnx_value {
    const char *name;
    int dtype;                           /* elem_type (0: not declared) */
    int ndim;                            /* -1: shape not declared */
    int64_t dims[HEARTH_ONNX_MAX_DIMS];  /* -1 for a dimension without a value */
    const char *dim_param[HEARTH_ONNX_MAX_DIMS]; /* its symbolic name ("height"), or NULL */
} hearth_onnx_value;

typedef struct hearth_onnx {
    const char *path;                    /* as given to open (or the parse name) */
    int64_t ir_version;
    int64_t opset;                       /* the default domain's (ai.onnx) version */
    const char *producer;                /* producer_name, "" when absent */
    int n_nodes;
    const hearth_onnx_node *nodes;       /* in the file's order (ONNX requires topological) */
    int n_inits;
    const hearth_onnx_tensor *inits;
    int n_inputs;                        /* graph inputs that are not initializers */
    const hearth_onnx_value *inputs;
    int n_outputs;
    const hearth_onnx_value *outputs;
    void *impl;                          /* the loader's own */
} hearth_onnx;

/* The opsets of the default domain hearth reads (files outside are refused
 * at load, naming the version and this range). */
#define HEARTH_ONNX_OPSET_MIN 7
#define HEARTH_ONNX_OPSET_MAX 21

/* Reads an ONNX model file. NULL with err set naming the file and what is
 * wrong (with the byte offset where the protobuf itself is malformed; the
 * tensor for a tensor whose data is short, of an unknown type or stored
 * outside the file (external data: refused); the opset when out of range). */
hearth_onnx *hearth_onnx_open(const char *path, hearth_err *err);
/* The same from bytes in memory (copied); name stands for the file in
 * messages. */
hearth_onnx *hearth_onnx_parse(const void *data, size_t len, const char *name, hearth_err *err);
/* NULL is a no-op. */
void hearth_onnx_close(hearth_onnx *m);

/* The attribute of node by name, or NULL. */
const hearth_onnx_attr *hearth_onnx_attr_find(const hearth_onnx_node *node, const char *name);
/* The initializer by name, or NULL. */
const hearth_onnx_tensor *hearth_onnx_init_find(const hearth_onnx *m, const char *name);

#endif

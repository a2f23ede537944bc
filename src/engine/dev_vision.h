/* dev_vision.h: the device ops of fixed-shape conv nets (ONNX frames).
 *
 * A frame model's walk is its node list, planned once at load (shapes
 * inferred, constants folded, BatchNormalization folded into the Conv before
 * it, one static memory plan): each step is one call below, over device
 * pointers into the plan's arena. The table hangs off dev.h's as
 * hearth_dev_ops.vision (NULL on a device without it).
 *
 * Layouts: activations are f32, NCHW, contiguous (C order). Geometry is
 * fixed at load, so a conv carries its whole shape (input H, W included) and
 * may be laid out for one kernel choice; the other ops take a small
 * descriptor by pointer (read during the call: a GPU copies it into the
 * launch, so a recorded graph keeps it).
 *
 * Every op returns 0 or a negative status (HEARTH_EINVAL: a shape it cannot
 * take; HEARTH_EUNSUPPORTED: an op or mode the device lacks) and never
 * aborts. Outputs must not overlap inputs unless the op says so.
 *
 * Rejected: one generic "run ONNX node" entry (that is a graph interpreter
 * in every backend); im2col buffers owned by the op (the plan owns every
 * byte, so a frame allocates nothing). */
#ifndef HEARTH_ENGINE_DEV_VISION_H
#define HEARTH_ENGINE_DEV_VISION_H

#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_dev hearth_dev;
typedef struct hearth_stream hearth_stream;

/* The most dimensions a strided copy or a broadcast binary op takes. */
#define HEARTH_VIS_DIMS 6
/* Lanes and marks a device with lanes offers (lane_use below). */
#define HEARTH_VIS_LANES 4
#define HEARTH_VIS_MARKS 1024

/* An activation fused into the conv's output (after the bias). */
typedef enum hearth_act {
    HEARTH_ACT_NONE = 0,
    HEARTH_ACT_RELU,
    HEARTH_ACT_CLIP,       /* min(max(x, act_min), act_max) (ReLU6 is CLIP 0..6) */
    HEARTH_ACT_SIGMOID,
    HEARTH_ACT_LEAKY_RELU, /* x < 0 ? act_min * x : x (act_min is alpha) */
} hearth_act;

/* A 2-D convolution, ONNX Conv's semantics (cross-correlation), NCHW. */
typedef struct hearth_conv_desc {
    int64_t n, c_in, h, w;          /* input (n, c_in, h, w) */
    int64_t c_out, kh, kw;          /* weight (c_out, c_in / groups, kh, kw) */
    int64_t stride_h, stride_w;     /* >= 1 */
    int64_t dil_h, dil_w;           /* >= 1 */
    int64_t pad_t, pad_l, pad_b, pad_r; /* >= 0 (explicit: the planner resolves auto_pad) */
    int64_t groups;                 /* divides c_in and c_out; groups == c_in == c_out is depthwise */
    int64_t h_out, w_out;           /* set by hearth_conv_desc_finish */
    hearth_act act;
    float act_min, act_max;         /* CLIP's bounds; LEAKY_RELU's alpha in act_min */
    const char *name;               /* the node's, for messages */
} hearth_conv_desc;

/* Validates d (every count >= 1 as above, groups dividing both channel
 * counts, an output of at least 1x1) and sets h_out, w_out. 0 or
 * HEARTH_EINVAL with err naming d->name and the field. */
int hearth_conv_desc_finish(hearth_conv_desc *d, hearth_err *err);

/* A conv placed on a device: its geometry and weights laid out for its
 * kernels. Opaque; made by conv_new. */
typedef struct hearth_conv hearth_conv;

typedef enum hearth_pool_kind { HEARTH_POOL_MAX = 0, HEARTH_POOL_AVG } hearth_pool_kind;

/* MaxPool / AveragePool / GlobalAveragePool (kh = h, kw = w, no pads),
 * NCHW. A window is clipped to the input: MAX takes the largest element
 * inside it (padding is never a candidate); AVG divides by the elements
 * inside it, or with count_include_pad by the window's positions inside the
 * padded input (h + pad_t + pad_b, w + pad_l + pad_r), as ONNX does with
 * ceil_mode. The planner sets h_out, w_out (ceil_mode is its business). */
typedef struct hearth_pool2d_desc {
    hearth_pool_kind kind;
    int64_t n, c, h, w;
    int64_t kh, kw, stride_h, stride_w, dil_h, dil_w;
    int64_t pad_t, pad_l, pad_b, pad_r;
    int64_t h_out, w_out;
    bool count_include_pad;
} hearth_pool2d_desc;

typedef enum hearth_binary_op {
    HEARTH_BIN_ADD = 0,
    HEARTH_BIN_SUB,
    HEARTH_BIN_MUL,
    HEARTH_BIN_DIV,
    HEARTH_BIN_MAX,
    HEARTH_BIN_MIN,
    HEARTH_BIN_POW,
} hearth_binary_op;

/* Y = A op B elementwise with broadcasting, spelled as strides: Y is
 * contiguous (ndim dims, the last fastest); A's element at index (i0..) is
 * A[sum i_k * a_stride[k]], likewise B (a stride of 0 broadcasts). Strides
 * count elements. Y may equal A (or B) when that operand's strides are Y's
 * own (contiguous, none 0). ndim 1 .. HEARTH_VIS_DIMS. */
typedef struct hearth_binary_desc {
    hearth_binary_op op;
    int ndim;
    int64_t dims[HEARTH_VIS_DIMS];
    int64_t a_stride[HEARTH_VIS_DIMS];
    int64_t b_stride[HEARTH_VIS_DIMS];
} hearth_binary_desc;

typedef enum hearth_unary_op {
    HEARTH_UN_RELU = 0,
    HEARTH_UN_SIGMOID,
    HEARTH_UN_EXP,
    HEARTH_UN_TANH,
    HEARTH_UN_CLIP,        /* min(max(x, a), b) */
    HEARTH_UN_LEAKY_RELU,  /* x < 0 ? a * x : x */
    HEARTH_UN_HARD_SIGMOID, /* max(0, min(1, a * x + b)) */
    HEARTH_UN_HARD_SWISH,  /* x * max(0, min(1, x / 6 + 0.5)) */
    HEARTH_UN_NEG,
    HEARTH_UN_SQRT,
    HEARTH_UN_ABS,
    HEARTH_UN_LOG,
} hearth_unary_op;

/* A copy of ndim dims (the last fastest) of elem_bytes elements (1, 2, 4
 * or 8): dst[sum i_k * dst_stride[k]] = src[sum i_k * src_stride[k]], strides
 * in elements (src strides may be 0 or negative; dst strides never alias).
 * Transpose, Concat (one copy per input into a slice of the output), Slice,
 * Gather along an axis by a constant index, Expand. */
typedef struct hearth_strided_desc {
    int ndim;
    int elem_bytes;
    int64_t dims[HEARTH_VIS_DIMS];
    int64_t src_stride[HEARTH_VIS_DIMS];
    int64_t dst_stride[HEARTH_VIS_DIMS];
} hearth_strided_desc;

typedef enum hearth_resize_mode { HEARTH_RESIZE_NEAREST = 0, HEARTH_RESIZE_LINEAR } hearth_resize_mode;
/* ONNX Resize's coordinate_transformation_mode: how an output coordinate
 * x_out maps to the input's (scale = out / in as given, or from sizes). */
typedef enum hearth_resize_coord {
    HEARTH_COORD_HALF_PIXEL = 0,      /* (x_out + 0.5) / scale - 0.5 */
    HEARTH_COORD_ASYMMETRIC,          /* x_out / scale */
    HEARTH_COORD_PYTORCH_HALF_PIXEL,  /* out > 1 ? (x_out + 0.5) / scale - 0.5 : 0 */
    HEARTH_COORD_ALIGN_CORNERS,       /* out > 1 ? x_out * (in - 1) / (out - 1) : 0 */
} hearth_resize_coord;
/* ONNX Resize's nearest_mode (how NEAREST rounds the mapped coordinate). */
typedef enum hearth_resize_round {
    HEARTH_ROUND_PREFER_FLOOR = 0,    /* ONNX's default "round_prefer_floor" */
    HEARTH_ROUND_PREFER_CEIL,
    HEARTH_ROUND_FLOOR,
    HEARTH_ROUND_CEIL,
} hearth_resize_round;

/* Resize over the last two dims of (n, c, h, w) to (n, c, h_out, w_out);
 * LINEAR is bilinear with the mapped coordinate clamped to [0, in - 1], as
 * onnxruntime does. The nearest index is clamped to [0, in - 1]. */
typedef struct hearth_resize_desc {
    hearth_resize_mode mode;
    hearth_resize_coord coord;
    hearth_resize_round round;
    int64_t n, c, h, w, h_out, w_out;
    float scale_h, scale_w;           /* out / in, as the model gives it (scales) or as sizes make it */
} hearth_resize_desc;

typedef struct hearth_dev_vision_ops {
    /* Places a conv: w (c_out, c_in / groups, kh, kw) f32 and bias (c_out)
     * or NULL, host memory, borrowed for the call. d must have been
     * finished. NULL with err set (naming d->name) on failure. */
    hearth_conv *(*conv_new)(hearth_dev *dev, const hearth_conv_desc *d, const float *w, const float *bias,
                             hearth_err *err);
    void (*conv_free)(hearth_conv *c); /* NULL: no-op */
    /* Device memory the conv needs as work space per call (im2col, packed
     * panels; 0 when none): the plan gives it a region of its arena. */
    size_t (*conv_work_bytes)(const hearth_conv *c);
    /* Y (n, c_out, h_out, w_out) = act(conv(X (n, c_in, h, w)) + bias);
     * work: conv_work_bytes of device memory, 64-byte aligned (NULL when 0). */
    int (*conv)(hearth_stream *st, const hearth_conv *c, const float *X, float *Y, void *work);
    int (*pool2d)(hearth_stream *st, const hearth_pool2d_desc *d, const float *X, float *Y);
    int (*binary)(hearth_stream *st, const hearth_binary_desc *d, const float *A, const float *B, float *Y);
    /* Y[i] = op(X[i]) for i < n with parameters a, b (see the enum); Y may equal X. */
    int (*unary)(hearth_stream *st, hearth_unary_op op, const float *X, float *Y, int64_t n, float a, float b);
    /* Softmax over the middle dim of X viewed as (outer, len, inner); Y may equal X. */
    int (*softmax)(hearth_stream *st, const float *X, float *Y, int64_t outer, int64_t len, int64_t inner);
    int (*strided_copy)(hearth_stream *st, const hearth_strided_desc *d, const void *src, void *dst);
    int (*resize)(hearth_stream *st, const hearth_resize_desc *d, const float *X, float *Y);
    /* Makes the device fold a little work (microseconds) into its queue:
     * the frame keep-alive between frames, so a GPU does not clock down.
     * Optional (NULL: nothing to keep warm, as on the CPU). */
    int (*keepalive)(hearth_stream *st);
    /* Lanes: a frame's independent branches run side by side. Optional
     * (all three NULL: one op at a time in call order, as on the CPU).
     * lane_use(st, k) sends the ops after it to lane k: 0 is the stream
     * itself (what uploads, downloads, syncs and a recorded graph use),
     * 1 .. HEARTH_VIS_LANES - 1 are the context's others, each in order.
     * lane_mark(st, k) sets mark k (0 .. HEARTH_VIS_MARKS - 1) at the point
     * the current lane has reached; lane_after(st, k): the current lane's
     * later ops wait for mark k's last setting before the call. A lane's
     * first op must come after a mark (lane 0's work before the walk: the
     * upload), and a walk ends on lane 0, after lane_after of a mark set at
     * the end of every other lane it used: a graph recorded meanwhile then
     * holds every lane's work, and a sync of the stream waits for it all. */
    int (*lane_use)(hearth_stream *st, int lane);
    int (*lane_mark)(hearth_stream *st, int mark);
    int (*lane_after)(hearth_stream *st, int mark);
} hearth_dev_vision_ops;

#endif

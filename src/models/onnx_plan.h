/* onnx_plan.h: an ONNX graph planned for fixed shapes, before any device
 * sees it. Private to models/ (frame_model.c places a plan on a device).
 *
 * Planning walks the nodes once, in the file's (topological) order:
 *   - every value gets a shape (graph inputs from the file or --shape);
 *   - a node whose inputs are all constant is evaluated on the host
 *     (onnx_fold.c): Shape, Gather, Unsqueeze, Concat ... chains vanish;
 *   - the rest lower to steps, one device op each (dev_vision.h), with the
 *     named fusions: Conv + BatchNormalization (folded into the weights) +
 *     an activation; Reshape, Flatten, Squeeze, Unsqueeze, Identity and
 *     Dropout become views of their input's storage, never a copy;
 *   - a copy whose output only another copy moves whole (a Transpose into
 *     a Concat) is composed with it into one copy (onnx_compose.c);
 *   - one static memory plan: every runtime value's storage gets an offset
 *     in one arena, reusing bytes of values no longer live.
 * A node the planner cannot run is an error naming it, its op type and the
 * model's opset. */
#ifndef HEARTH_MODELS_ONNX_PLAN_H
#define HEARTH_MODELS_ONNX_PLAN_H

#include "engine/dev_vision.h"
#include "models/onnx.h"

#define PLAN_MAX_DIMS HEARTH_ONNX_MAX_DIMS
/* Every value's dims lie in [0, PLAN_DIM_MAX] and its elements (counting
 * only non-zero dims) within PLAN_ELEMS_MAX: then any product of some of a
 * value's dims, a stride, or a sum of a few of them fits in int64 with room
 * to spare, and shape arithmetic never overflows. A file that breaks it is
 * refused, naming the node. */
#define PLAN_DIM_MAX ((int64_t)1 << 31)
#define PLAN_ELEMS_MAX ((int64_t)1 << 32)

enum plan_io { PLAN_INTERNAL = 0, PLAN_INPUT, PLAN_OUTPUT, PLAN_STATE_IN, PLAN_STATE_OUT };

typedef struct plan_value {
    const char *name;
    int dtype;                       /* ONNX numbering */
    int ndim;
    int64_t dims[PLAN_MAX_DIMS];
    int64_t n;                       /* elements */
    bool is_const;
    void *data;                      /* constants: host data (the plan's, or borrowed from the model) */
    int root;                        /* the value whose storage this one views (itself when it owns storage) */
    int64_t off;                     /* roots: byte offset in the arena (-1: none yet) */
    int def, last;                   /* first step writing it, last step reading it (roots: over every view) */
    enum plan_io io;
    int io_index;                    /* which input / output / state pair */
    int64_t const_off;               /* constants read by steps: byte offset in the constant block (-1: none) */
} plan_value;

enum plan_step_kind { STEP_CONV, STEP_POOL, STEP_BINARY, STEP_UNARY, STEP_SOFTMAX, STEP_COPY, STEP_RESIZE, STEP_MATMUL };

typedef struct plan_step {
    enum plan_step_kind kind;
    int node;                        /* the node it came from (messages) */
    int a, b, y;                     /* value ids (b: -1 when none) */
    int64_t a_off, y_off;            /* element offsets into a and y (STEP_COPY) */
    union {
        struct { hearth_conv_desc d; float *w, *bias; } conv;   /* folded host weights (the plan's) */
        hearth_pool2d_desc pool;
        hearth_binary_desc bin;
        struct { hearth_unary_op op; float a, b; } un;
        struct { int64_t outer, len, inner; } sm;
        hearth_strided_desc cp;
        hearth_resize_desc rs;
        struct { float *wt; float *bias; int64_t m, n, k; } mm;  /* Y (m, n) = A (m, k) wt^T (n, k) + bias (n) */
    } u;
} plan_step;

typedef struct hearth_plan {
    const hearth_onnx *model;
    plan_value *v;                   /* sized once for the model: never moves while planning */
    int n_v, cap_v;
    plan_step *steps;
    int n_steps, cap_steps;
    int inputs[HEARTH_ONNX_MAX_DIMS * 4], n_inputs;       /* request inputs (value ids), state excluded */
    int outputs[HEARTH_ONNX_MAX_DIMS * 4], n_outputs;     /* response outputs, state excluded */
    int state_in[8], state_out[8], n_states;
    size_t arena_bytes;              /* activations */
    size_t const_bytes;              /* constants steps read on the device */
    size_t work_bytes;               /* the largest conv work space (its own region) */
    const char *bad_shape;           /* a value whose shape left PLAN_DIM_MAX / PLAN_ELEMS_MAX (checked per node) */
    void **allocs;                   /* host memory the plan owns */
    int n_allocs, cap_allocs;
} hearth_plan;

/* Plans m. shapes: "name=1x3x320x320[,...]" for inputs with dynamic dims (or
 * to check declared ones); states: "IN=OUT[,...]" state pairs (NULL: none).
 * 0 or a negative status with err set. p is zeroed first; free it with
 * hearth_plan_free in every case. */
int hearth_plan_build(hearth_plan *p, const hearth_onnx *m, const char *shapes, const char *states, hearth_err *err);
void hearth_plan_free(hearth_plan *p);

/* A plan's steps spread over lanes that run side by side (onnx_lanes.c;
 * a device's lanes: dev_vision.h's lane_use). Step i runs on lane[i] in
 * step order, after the marks waits[wait_at[i] .. wait_at[i + 1]) and, on
 * a lane other than 0, after the walk's start (mark 0, set on lane 0 before
 * the first step, which a lane's first step waits for unless it waits for
 * another mark); mark[i] >= 0 is set after step i. The walk ends on lane 0
 * after end[0 .. n_end). hb: bitsets of words 64-bit words a step, bit j of
 * step i set when step j is done before step i starts under that schedule:
 * the order plan_memory's arena respects. */
typedef struct plan_lanes {
    int n_steps, n_lanes, n_marks, n_end;
    int end[HEARTH_VIS_LANES];
    signed char *lane;
    int *mark, *wait_at, *waits;
    uint64_t *hb;
    int words;
    int chain;                        /* steps on the longest chain of hb (the critical path, in steps) */
} plan_lanes;

/* Schedules p's steps on at most max_lanes lanes (1 .. HEARTH_VIS_LANES):
 * a step depends on the steps that write what it reads or what it writes
 * (copies into disjoint parts of one value excepted) and on those that read
 * what it writes; it joins the lane whose last step it depends on, else a
 * free lane, else the lane that has been busy least recently. 0, or
 * HEARTH_ENOMEM / HEARTH_ELIMIT (more marks than HEARTH_VIS_MARKS) with err
 * set. Free it with plan_lanes_free in every case. */
int plan_lanes_build(plan_lanes *l, const hearth_plan *p, int max_lanes, hearth_err *err);
void plan_lanes_free(plan_lanes *l);
/* The storage root of value id, or -1 when it has none a step writes (no
 * value, a constant). */
static inline int plan_root(const hearth_plan *p, int id)
{
    return id < 0 || p->v[id].is_const ? -1 : p->v[id].root;
}

/* Bit j of a step's hb bitset. */
static inline bool plan_hb(const plan_lanes *l, int i, int j)
{
    return (l->hb[(size_t)i * (size_t)l->words + (size_t)(j / 64)] >> (j % 64)) & 1;
}

/* Lays the arena out again so that two values share bytes only where every
 * step touching one is done before any step writing the other starts, by
 * l's order (NULL: step order, as hearth_plan_build lays it out). */
int plan_arena(hearth_plan *p, const plan_lanes *l, hearth_err *err);

/* Internal to the planner's files. */
void *plan_alloc(hearth_plan *p, size_t bytes);           /* zeroed, owned by the plan; NULL on ENOMEM */
int plan_find(const hearth_plan *p, const char *name);   /* value id or -1 */
/* Evaluates node (every input constant) on the host, setting its outputs'
 * shapes and data. HEARTH_EUNSUPPORTED when the folder lacks the op (the
 * caller then lowers it as a step). */
int plan_fold(hearth_plan *p, int node, const int *in, int n_in, const int *out, int n_out, hearth_err *err);
/* Lays out the arena (onnx_plan_mem.c). */
int plan_memory(hearth_plan *p, hearth_err *err);
/* Integer element i of a constant INT64 or INT32 value (or FLOAT, truncated). */
int64_t plan_ival(const plan_value *v, int64_t i);

#endif

/* frame.h: a fixed-shape model (an ONNX conv net) made ready to run frames
 * on a device: its node list planned once at load (onnx_plan.c: shapes
 * inferred, constants folded, BatchNormalization folded into convs, one
 * static memory plan), weights placed, and per-sequence state buffers. A
 * frame allocates nothing.
 *
 * Inputs and outputs as clients see them exclude state: a state pair
 * (--state IN=OUT, or the model's .state file beside it) is a model input
 * fed from the slot's last output, double-buffered on the device (the
 * output of frame t is the input of frame t + 1 without a copy). */
#ifndef HEARTH_MODELS_FRAME_H
#define HEARTH_MODELS_FRAME_H

#include "base/err.h"
#include "base/pool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_dev hearth_dev;

#define HEARTH_FRAME_MAX_DIMS 8
#define HEARTH_FRAME_MAX_IO 32

typedef struct hearth_frame_io {
    const char *name;
    int dtype;                        /* ONNX's numbering (models/onnx.h): HEARTH_ONNX_FLOAT today */
    int ndim;
    int64_t dims[HEARTH_FRAME_MAX_DIMS];
    size_t bytes;                     /* of one frame's tensor */
} hearth_frame_io;

typedef struct hearth_frame_info {
    const char *path;
    const char *platform;             /* "onnxruntime_onnx", as Triton names ONNX models */
    int64_t opset;
    int n_inputs, n_outputs;          /* request inputs and response outputs (state excluded) */
    const hearth_frame_io *inputs;
    const hearth_frame_io *outputs;
    int n_states;                     /* state pairs */
    int n_slots;                      /* sequences held at once (0: stateless) */
    const char *device;               /* "cpu", "cuda:0" */
    bool keepalive;                   /* the device has a keep-alive (a GPU): hearth_frame_model_keepalive does work */
} hearth_frame_info;

typedef struct hearth_frame_opts {
    const char *device;               /* "cpu" (NULL), "cuda", "cuda:N" */
    hearth_dev *dev;                  /* a device the caller holds, used instead of device's (NULL: device's) */
    hearth_pool *pool;                /* CPU threads the frames run on (borrowed; NULL: the caller alone) */
    const char *shapes;               /* values for dynamic dims: "input=1x3x320x320[,name=...]" (NULL: none) */
    const char *states;               /* state pairs "IN=OUT[,IN2=OUT2]" (NULL: the .state file beside the model, if any) */
    int n_slots;                      /* sequence states held at once when the model has state (0: 16) */
} hearth_frame_opts;

typedef struct hearth_frame_model hearth_frame_model;

/* Opens and plans path. NULL with err set: the loader's errors, or a node
 * the planner cannot run named with its op type and opset, or a shape that
 * does not fit. */
hearth_frame_model *hearth_frame_model_open(const char *path, const hearth_frame_opts *o, hearth_err *err);
void hearth_frame_model_close(hearth_frame_model *m);
const hearth_frame_info *hearth_frame_model_info(const hearth_frame_model *m);
/* One frame (the frame queue's runner, engine/frame_queue.h): in[i] host
 * bytes of info->inputs[i], out[j] host room for info->outputs[j]; slot the
 * sequence's state (-1: none; the model must then be stateless, or its
 * state starts from zeros and is dropped); reset: the state starts from
 * zeros. One thread at a time. 0 or a negative status with err set. */
int hearth_frame_model_run(hearth_frame_model *m, int slot, bool reset, const void *const *in, void *const *out,
                           hearth_err *err);
/* Runs the frames whose first-time costs a served frame should not pay (a
 * GPU's graph recordings, for every sequence slot of a model with state)
 * on zero inputs; a server calls it once after open, before the first
 * request, on the thread that will run the frames (a GPU's records are that
 * thread's). The states stay as a sequence's start finds them. 0, or a
 * run's error. */
int hearth_frame_model_warm_up(hearth_frame_model *m, hearth_err *err);
/* A set of input buffers the model keeps, for a caller to fill before it
 * runs the frame (a GPU's are pinned: hearth_frame_model_run uploads from
 * them with no staging copy; the CPU's it reads in place): in[i] gets
 * info->inputs[i].bytes for each input. Returns the set's number, or -1
 * when every set is taken or none could be allocated (the caller uses its
 * own buffers). Thread-safe. */
int hearth_frame_model_inputs_take(hearth_frame_model *m, void **in);
/* Returns set (from take; -1: no-op) once the frame that read it has run. */
void hearth_frame_model_inputs_give(hearth_frame_model *m, int set);
/* The device's keep-alive (0 when it has none). */
int hearth_frame_model_keepalive(hearth_frame_model *m);

#endif

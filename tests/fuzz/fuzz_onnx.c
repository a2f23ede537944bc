/* libFuzzer target for the ONNX loader and the frame planner: parses the
 * input from memory, reads every byte range the loader hands out (tensor
 * data's first and last byte, every attribute list's ends, every name), then
 * plans the graph for its declared shapes, so anything the loader accepted is
 * proven safe to plan. Seeds in tests/fuzz/corpus/onnx/ are the small models
 * tests/ref/frame_models.py exports with torch (each op family once). */
#include "base/log.h"
#include "models/onnx.h"
#include "models/onnx_plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void touch_str(const char *s)
{
    if (!s)
        abort(); /* the loader promises "" for absent strings, never NULL */
    sink += strlen(s);
}

static void touch_tensor(const hearth_onnx_tensor *t)
{
    touch_str(t->name);
    if (t->bytes != (size_t)t->n * hearth_onnx_dtype_size(t->dtype))
        abort();
    if (t->bytes)
        sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->bytes - 1];
}

static void touch_model(const hearth_onnx *m)
{
    touch_str(m->producer);
    for (int i = 0; i < m->n_nodes; i++) {
        const hearth_onnx_node *nd = &m->nodes[i];
        touch_str(nd->name);
        touch_str(nd->op_type);
        touch_str(nd->domain);
        for (int k = 0; k < nd->n_in; k++)
            touch_str(nd->in[k]);
        for (int k = 0; k < nd->n_out; k++)
            touch_str(nd->out[k]);
        for (int k = 0; k < nd->n_attr; k++) {
            const hearth_onnx_attr *a = &nd->attr[k];
            touch_str(a->name);
            if (hearth_onnx_attr_find(nd, a->name) == NULL)
                abort();
            if (a->type == HEARTH_ONNX_ATTR_STRING)
                touch_str(a->s);
            if (a->type == HEARTH_ONNX_ATTR_TENSOR && a->t)
                touch_tensor(a->t);
            if (a->n > 0 && a->type == HEARTH_ONNX_ATTR_FLOATS)
                sink += (uint64_t)(a->floats[0] == a->floats[a->n - 1]);
            if (a->n > 0 && a->type == HEARTH_ONNX_ATTR_INTS)
                sink += (uint64_t)(a->ints[0] + a->ints[a->n - 1]);
            if (a->n > 0 && a->type == HEARTH_ONNX_ATTR_STRINGS) {
                touch_str(a->strings[0]);
                touch_str(a->strings[a->n - 1]);
            }
        }
    }
    for (int i = 0; i < m->n_inits; i++) {
        touch_tensor(&m->inits[i]);
        if (hearth_onnx_init_find(m, m->inits[i].name) == NULL)
            abort();
    }
    for (int i = 0; i < m->n_inputs; i++)
        touch_str(m->inputs[i].name);
    for (int i = 0; i < m->n_outputs; i++)
        touch_str(m->outputs[i].name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        hearth_log_set_level(HEARTH_LOG_OFF);
        quiet = 1;
    }
    hearth_err err;
    hearth_onnx *m = hearth_onnx_parse(data, size, "fuzz.onnx", &err);
    if (!m)
        return 0;
    touch_model(m);
    hearth_plan p;
    hearth_plan_build(&p, m, NULL, NULL, &err);
    hearth_plan_free(&p);
    hearth_onnx_close(m);
    return 0;
}

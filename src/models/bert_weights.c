/* bert_weights.c: converting a loaded model's linear weights, once at open,
 * to bf16 or int8 (GGUF's Q8_0: blocks of 32 int8 with an fp16 scale, so
 * effectively a per-32-element scale, finer than a per-row one).
 *
 * How: each weight row is widened to f32 (whatever it was stored as) and
 * narrowed with the kernels' own quantize_row, into one buffer per matrix
 * that the model owns; the matmul then reads the new type as it reads any
 * GGUF weight. Embeddings, biases and norms stay f32: they are a small part
 * of the bytes and none of the FLOPs.
 *
 * Placing the weights on the model's device (bert_place_weights) is here
 * too: on the CPU, f32 weights are packed once into the GEMM's panels (an encoder runs
 * the same weights on short batches all day; each call used to convert and
 * transpose every weight again): 4 bytes more per weight held in memory
 * (MiniLM-L6: ~43 MB), for +43% sentences/s at batch 1 (13 tokens) and
 * +9-13% served (batches of ~80 and ~750 rows), measured on the Zen 5
 * (bench/RESULTS.md, matmul.c's PANEL_COPY_MIN_M). Opening
 * the model reads every weight to pack it: MiniLM-L6 loads in ~180 ms
 * instead of ~30 (single-threaded; a once-per-start cost).
 *
 * Rejected: a per-row int8 format of our own (the matmul has no kernel for
 * it; Q8_0 has integer-dot kernels already, and a finer scale). */
#include "models/bert_int.h"

#include "engine/quant.h"

#include <stdio.h>
#include <stdlib.h>

static int convert(hearth_bert *m, bert_mat *w, hearth_dtype to, const char *what, int64_t layer, hearth_err *err)
{
    if (w->type == to)
        return HEARTH_OK;
    size_t row_bytes;
    if (!hearth_dtype_row_bytes(to, w->cols, &row_bytes))
        return hearth_err_set(err, HEARTH_EUNSUPPORTED,
                              "bert: %s: layer %lld %s: rows of %lld elements cannot be stored as %s (blocks of %lld)",
                              m->path, (long long)layer, what, (long long)w->cols, hearth_dtype_get(to)->name,
                              (long long)hearth_dtype_get(to)->block);
    uint8_t *dst = bert_alloc(m, row_bytes * (size_t)w->rows, err);
    float *tmp = malloc((size_t)w->cols * sizeof *tmp);
    if (!dst || !tmp) {
        free(tmp);
        return hearth_err_set(err, HEARTH_ENOMEM, "bert: %s: out of memory", m->path);
    }
    int rc = HEARTH_OK;
    for (int64_t r = 0; r < w->rows && rc == 0; r++) {
        const uint8_t *src = (const uint8_t *)w->data + (size_t)r * w->row_bytes;
        rc = hearth_quant_dequantize_row(w->type, src, tmp, w->cols);
        if (rc == 0)
            rc = hearth_quant_quantize_row(to, tmp, dst + (size_t)r * row_bytes, w->cols);
    }
    free(tmp);
    if (rc)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: layer %lld %s: cannot convert type %d to %s", m->path,
                              (long long)layer, what, (int)w->type, hearth_dtype_get(to)->name);
    *w = (bert_mat){.type = to, .data = dst, .row_bytes = row_bytes, .rows = w->rows, .cols = w->cols};
    return HEARTH_OK;
}

/* The six linear weights of a layer, in the order of bert_convert_weights'
 * names, for the loops below. */
static bert_mat *layer_mats(bert_layer *l, int k)
{
    bert_mat *mats[6] = {&l->q, &l->k, &l->v, &l->o, &l->up, &l->down};
    return mats[k];
}

static int place(hearth_bert *m, bert_mat *w, enum hearth_weight_place place, const char *what, hearth_err *err)
{
    hearth_weight_desc d = {w->type, w->data, w->row_bytes, w->rows, w->cols, place, what};
    w->w = m->dev->ops->weight_new(m->dev, &d, err);
    if (!w->w) {
        hearth_err_prefix(err, "bert: %s", m->path);
        return err ? err->code : HEARTH_ENOMEM;
    }
    return HEARTH_OK;
}

/* Each weight is chained to the one the forward pass multiplies by next
 * (layer_mats' order is the pass's), the last to the first: a pass on one
 * thread fetches each weight's start during the one before (matmul.c,
 * "Fetching ahead"), and the next pass's during its last. */
int bert_place_weights(hearth_bert *m, hearth_err *err)
{
    const hearth_dev *dev = m->dev;
    const hearth_dev_ops *D = dev->ops;
    static const char *const names[6] = {"query", "key", "value", "attention output", "ffn up", "ffn down"};
    if (m->n_head > 0 && m->hidden / m->n_head > dev->caps.head_dim_max)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: head size %lld (hidden %lld / %lld heads) > %lld, the largest device %s runs",
                              m->path, (long long)(m->hidden / m->n_head), (long long)m->hidden, (long long)m->n_head,
                              (long long)dev->caps.head_dim_max, dev->caps.name);
    if (!D->supports(dev, HEARTH_OP_EMBED, m->tok_embd.type))
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: token embeddings of type %s: device %s cannot read them",
                              m->path, hearth_dtype_get(m->tok_embd.type) ? hearth_dtype_get(m->tok_embd.type)->name : "?",
                              dev->caps.name);
    int rc = place(m, &m->tok_embd, HEARTH_WEIGHT_AS_STORED, "token embeddings", err);
    if (rc)
        return rc;
    hearth_weight *first = NULL, *prev = NULL;
    for (int64_t i = 0; i < m->n_layer; i++)
        for (int k = 0; k < 6; k++) {
            bert_mat *w = layer_mats(&m->layers[i], k);
            char what[64];
            snprintf(what, sizeof what, "layer %lld's %s weight", (long long)i, names[k]);
            if (!D->supports(dev, HEARTH_OP_MATMUL, w->type))
                return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: %s: device %s has no matmul for type %s",
                                      m->path, what, dev->caps.name,
                                      hearth_dtype_get(w->type) ? hearth_dtype_get(w->type)->name : "?");
            if (!w->w && (rc = place(m, w, HEARTH_WEIGHT_FAST, what, err)))
                return rc;
            if (prev)
                D->weight_chain(prev, w->w);
            first = first ? first : w->w;
            prev = w->w;
        }
    if (prev)
        D->weight_chain(prev, first);
    return HEARTH_OK;
}

void bert_free_weights(hearth_bert *m)
{
    if (!m->dev)
        return;
    for (int64_t i = 0; m->layers && i < m->n_layer; i++)
        for (int k = 0; k < 6; k++) {
            bert_mat *w = layer_mats(&m->layers[i], k);
            m->dev->ops->weight_free(w->w);
            w->w = NULL;
        }
    m->dev->ops->weight_free(m->tok_embd.w);
    m->tok_embd.w = NULL;
}

int bert_convert_weights(hearth_bert *m, hearth_dtype to, hearth_err *err)
{
    if (to != HEARTH_BF16 && to != HEARTH_Q8_0)
        return hearth_err_set(err, HEARTH_EUNSUPPORTED, "bert: %s: weights cannot be converted to type %d", m->path,
                              (int)to);
    static const char *const what[6] = {"query", "key", "value", "attention output", "ffn up", "ffn down"};
    for (int64_t i = 0; i < m->n_layer; i++)
        for (int k = 0; k < 6; k++) {
            int rc = convert(m, layer_mats(&m->layers[i], k), to, what[k], i, err);
            if (rc)
                return rc;
        }
    return HEARTH_OK;
}

/* frame_models.c: frame models in a serving process: an .onnx --model
 * opened and planned on its device (models/frame.h), given its own frame
 * queue (engine/frame_queue.h: deadlines, sequences, keep-alive) and its
 * own CPU threads, and registered with the Open Inference Protocol API
 * (oip.c), which answers /v2/models/{m}/infer from it.
 *
 * Frames get threads of their own rather than the shared compute pool:
 * a pool runs one job at a time, so a frame arriving during an embedding
 * pass would otherwise wait for it or run on one thread; and while frame
 * models are served, the batch work's threads (embeddings, generation) run
 * at a lower priority (base/pool.h's nice), so a frame is scheduled ahead
 * of them on a busy machine. */
#include "models.h"
#include "oip_models.h"

#include "base/clock.h"
#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The niceness of batch work while frame models are served (see add). */
#define BATCH_NICE 10

static int frame_run(void *model, int slot, bool reset, const void *const *in, void *const *out, hearth_err *err)
{
    return hearth_frame_model_run(model, slot, reset, in, out, err);
}

static int frame_keepalive(void *model)
{
    return hearth_frame_model_keepalive(model);
}

static int frame_warm_up(void *model, hearth_err *err)
{
    return hearth_frame_model_warm_up(model, err);
}

bool hearth_api_is_frame_path(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".onnx") == 0;
}

int hearth_api_add_frame(hearth_api *api, const char *name, const char *path, hearth_err *err)
{
    hearth_api_state *st = api->state;
    if (api->n_models >= HEARTH_API_MAX_MODELS)
        return hearth_err_set(err, HEARTH_ELIMIT, "at most %d models", HEARTH_API_MAX_MODELS);
    for (int i = 0; i < api->n_models; i++)
        if (!strcmp(api->models[i].name, name))
            return hearth_err_set(err, HEARTH_EINVAL, "two models are named '%s': name one with --model NAME=PATH", name);
    if (st->n_frame >= HEARTH_API_MAX_MODELS)
        return hearth_err_set(err, HEARTH_ELIMIT, "at most %d frame models", HEARTH_API_MAX_MODELS);
    uint64_t t0 = hearth_now_ns();
    const hearth_api_config *c = &api->cfg;
    if (!st->frame_pool_made) {
        int n = c->frame_threads > 0 ? c->frame_threads : c->compute_threads;
        st->frame_pool = n == 1 ? NULL : hearth_pool_new(n);
        st->frame_pool_made = true;
        /* Nice 10 weighs a batch thread at ~1/10 of a frame thread under Linux's fair scheduler
         * (weights 110 vs 1024): a frame that meets an embedding pass on a full machine gets the
         * cores first, and the pass still gets every idle cycle. */
        hearth_pool_set_nice(st->pool, BATCH_NICE);
        for (int i = 0; i < st->n_embed_pools; i++)
            hearth_pool_set_nice(st->embed_pools[i], BATCH_NICE);
    }
    const char *dev = c->device && *c->device ? c->device : "cpu";
    char one[32];
    if (strchr(dev, ',')) { /* a list: this worker's entry, as generation models take it */
        int idx = c->worker_index > 0 ? c->worker_index : 0, k = 0;
        const char *s = dev;
        for (; k < idx && strchr(s, ','); k++)
            s = strchr(s, ',') + 1;
        size_t len = strcspn(s, ",");
        snprintf(one, sizeof one, "%.*s", (int)len, s);
        dev = one;
    }
    hearth_frame_opts fo = {.device = dev, .pool = st->frame_pool, .shapes = c->frame_shapes,
                            .states = c->frame_states, .n_slots = c->frame_slots};
    hearth_frame_model *m = hearth_frame_model_open(path, &fo, err);
    if (!m)
        return err ? err->code : HEARTH_EINVAL;
    /* a device without a keep-alive (the CPU) gets none: no wake-ups between frames;
     * the warm-up runs on the queue's thread, before the first request, which would pay for it */
    hearth_frame_runner r = {.model = m, .n_slots = hearth_frame_model_info(m)->n_slots, .run = frame_run,
                             .keepalive = hearth_frame_model_info(m)->keepalive ? frame_keepalive : NULL,
                             .warm_up = frame_warm_up};
    hearth_frame_queue_opts qo;
    hearth_frame_queue_opts_default(&qo);
    qo.max_jobs = c->max_concurrent > 0 ? c->max_concurrent : qo.max_jobs;
    qo.seq_idle_ns = c->seq_timeout_ms * 1000000ull;
    qo.keepalive = c->keepalive;
    /* spinning pays where a frame takes a fraction of a millisecond (a GPU):
     * a CPU's frame of milliseconds would have the threads burn a core
     * beside the compute threads for nothing */
    const uint64_t spin_ns = r.keepalive && c->frame_spin_us > 0 ? (uint64_t)c->frame_spin_us * 1000u : 0;
    qo.spin_ns = spin_ns;
    qo.lead_ns = spin_ns && c->frame_lead_us > 0 ? (uint64_t)c->frame_lead_us * 1000u : 0;
    hearth_frame_queue *q = hearth_frame_queue_new(&r, &qo, err);
    if (!q) {
        hearth_frame_model_close(m);
        return err ? err->code : HEARTH_ENOMEM;
    }
    hearth_api_model *info = &api->models[api->n_models];
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", name);
    snprintf(info->family, sizeof info->family, "vision");
    snprintf(info->source, sizeof info->source, "%s", path);
    info->created = hearth_unix_time();
    hearth_frame_entry *e = &st->frame_models[st->n_frame];
    *e = (hearth_frame_entry){.info = info, .model = m, .queue = q,
                              .deadline_ns = c->deadline_ms > 0 ? (uint64_t)(c->deadline_ms * 1e6) : 0,
                              .spin_ns = spin_ns, .seq_idle_ns = qo.seq_idle_ns};
    int rc = hearth_api_oip_add_model(api, e);
    if (rc) {
        hearth_frame_queue_free(q);
        hearth_frame_model_close(m);
        return hearth_err_set(err, rc, "model '%s': the inference API cannot take it", name);
    }
    api->n_models++;
    st->n_frame++;
    const hearth_frame_info *fi = hearth_frame_model_info(m);
    HLOG_INFO("model '%s': frames of %s on %s, %d input%s, %d output%s, %d state pair%s; deadline %s; loaded in %.0f ms",
              name, path, fi->device, fi->n_inputs, fi->n_inputs == 1 ? "" : "s", fi->n_outputs,
              fi->n_outputs == 1 ? "" : "s", fi->n_states, fi->n_states == 1 ? "" : "s",
              c->deadline_ms > 0 ? "per --deadline-ms" : "none by default", (double)(hearth_now_ns() - t0) / 1e6);
    return 0;
}

void hearth_api_unload_frames(hearth_api *api)
{
    hearth_api_state *st = api->state;
    hearth_api_oip_clear(api);
    for (int i = 0; i < st->n_frame; i++) {
        hearth_frame_queue_free(st->frame_models[i].queue);
        hearth_frame_model_close(st->frame_models[i].model);
    }
    st->n_frame = 0;
    if (st->frame_pool_made)
        hearth_pool_free(st->frame_pool);
    st->frame_pool = NULL;
    st->frame_pool_made = false;
}

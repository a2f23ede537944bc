/* frame_model.c: a planned ONNX model placed on a device and run a frame at
 * a time (frame.h).
 *
 * At open: the loader reads the file, the planner (onnx_plan.c) lowers it
 * to steps over one arena, and each step's weights are placed on the device
 * once (convs through the device's vision table, Gemm/MatMul weights as f32
 * matmul weights); the arena, the constants steps read and every state
 * buffer are allocated once. A frame is: upload the inputs into the arena,
 * walk the steps (on a GPU: recorded once per (state slot, parity) and
 * replayed as one graph, dev.h's graph_begin), download the outputs. It
 * allocates nothing. Where the device has lanes (dev_vision.h), the steps
 * are spread over them at open (onnx_lanes.c: a conv net's branches side
 * by side) and the arena is laid out again for that order; each lane has
 * its own conv work space.
 *
 * State: each slot holds two buffers per state pair; frame t reads
 * buf[parity] as the state input and writes buf[!parity] as the state
 * output, then the parity flips, so the output becomes the next input
 * without a copy. Slot n_slots is a scratch slot for frames that belong to
 * no sequence (reset every time).
 *
 * Rejected: walking the ONNX nodes at run time (an interpreter: every frame
 * would pay for lookups the plan does once); one graph for all slots with
 * the state copied into fixed buffers (a copy per frame, per state). */
#include "models/frame.h"
#include "models/onnx_plan.h"

#include "base/clock.h"
#include "base/log.h"
#include "engine/dev.h"

#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Input sets a model keeps (hearth_frame_model_inputs_take): enough for
 * the frame running, the next one parsed, and a few handlers parsing
 * meanwhile; a request that finds none taken uses its own buffer (and, on a
 * GPU, the staging copy), as before sets existed. On a GPU they are pinned
 * (the upload copies from them); on the CPU plain memory the walk reads in
 * place, kept so that a frame's input is not a fresh malloc each time
 * (RFB-320's 0.9 MB, malloc'd and freed per frame, took its handler 635 us
 * on the loop thread, page faults included; 2-core EPYC, 2026-12-06). */
#define IN_SETS 8

struct hearth_frame_model {
    hearth_onnx *onnx;
    hearth_plan plan;
    hearth_dev *dev;
    const hearth_dev_ops *ops;
    const hearth_dev_vision_ops *vo;
    hearth_pool *pool;
    void *arena, *consts, *work;
    hearth_conv **convs;          /* per step (STEP_CONV) */
    hearth_weight **mms;          /* per step (STEP_MATMUL) */
    int n_slots;                  /* sequence slots (+1 scratch slot allocated) */
    void **state;                 /* [(slot * n_states + pair) * 2 + parity] */
    unsigned char *parity;        /* per slot */
    uint64_t uid, *slot_uid;
    void *zeros;                  /* host zeros, the largest state's bytes */
    size_t zeros_bytes;
    hearth_frame_io ins[HEARTH_FRAME_MAX_IO], outs[HEARTH_FRAME_MAX_IO];
    hearth_frame_info info;
    char device_name[32];
    size_t io_bytes;              /* inputs and outputs, each 64-byte aligned: the pinned staging a GPU copies through */
    bool profile;                 /* HEARTH_FRAME_PROFILE=1: time the phases (with a sync between), logged at close */
    uint64_t prof_ns[3], prof_frames; /* upload, walk, download */
    uint64_t *prof_step_ns;       /* HEARTH_FRAME_PROFILE=steps: also each step (a sync after each, no graphs), per step */
    const void *const *in_place;  /* during a run on host memory: the caller's inputs, read where they are */
    char *in_sets;                /* IN_SETS sets of inputs (each input 64-byte aligned; pinned on a GPU), or NULL */
    size_t in_set_bytes;
    _Atomic unsigned in_free;     /* bit s: set s is not taken */
    plan_lanes lanes;             /* the steps' lanes where the device has lanes (n_lanes 0: none, one at a time) */
    size_t work_bytes;            /* a lane's share of work (each lane its own, so convs side by side never share it) */
};

const hearth_frame_info *hearth_frame_model_info(const hearth_frame_model *m)
{
    return &m->info;
}

static void io_of(const plan_value *v, hearth_frame_io *io)
{
    io->name = v->name;
    io->dtype = v->dtype;
    io->ndim = v->ndim;
    for (int k = 0; k < v->ndim; k++)
        io->dims[k] = v->dims[k];
    io->bytes = (size_t)v->n * sizeof(float);
}

/* "x.onnx" -> "x.state": the state pairs beside the model, one line
 * "IN=OUT[,IN2=OUT2]" (NULL when there is no such file). */
static char *state_file(const char *path)
{
    char sp[4096];
    const char *dot = strrchr(path, '.');
    size_t base = dot && !strchr(dot, '/') ? (size_t)(dot - path) : strlen(path);
    if (base + 7 > sizeof sp)
        return NULL;
    snprintf(sp, sizeof sp, "%.*s.state", (int)base, path);
    FILE *f = fopen(sp, "r");
    if (!f)
        return NULL;
    char line[1024];
    char *r = NULL;
    if (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n \t")] = 0;
        if (line[0])
            r = strdup(line);
    }
    fclose(f);
    return r;
}

/* The slowest steps of HEARTH_FRAME_PROFILE=steps, at most 24, slowest
 * first, each with its node, op and share of the walk. */
static void log_step_profile(const hearth_frame_model *m)
{
    const hearth_plan *p = &m->plan;
    if (p->n_steps <= 0)
        return;
    uint64_t total = 0;
    for (int i = 0; i < p->n_steps; i++)
        total += m->prof_step_ns[i];
    bool *shown = calloc((size_t)p->n_steps, sizeof *shown);
    if (!shown || !total) {
        free(shown);
        return;
    }
    HLOG_INFO("frame: %s: %d steps, %.1f us per frame in all (synced after each)", m->info.path, p->n_steps,
              total / 1e3 / m->prof_frames);
    for (int k = 0; k < 24 && k < p->n_steps; k++) {
        int best = -1;
        for (int i = 0; i < p->n_steps; i++)
            if (!shown[i] && (best < 0 || m->prof_step_ns[i] > m->prof_step_ns[best]))
                best = i;
        shown[best] = true;
        const hearth_onnx_node *nd = &p->model->nodes[p->steps[best].node];
        HLOG_INFO("  step %3d %-18s %-22.22s %8.1f us %5.1f%%", best, nd->op_type, nd->name,
                  m->prof_step_ns[best] / 1e3 / m->prof_frames, 100.0 * (double)m->prof_step_ns[best] / (double)total);
    }
    free(shown);
}

void hearth_frame_model_close(hearth_frame_model *m)
{
    if (!m)
        return;
    if (m->profile && m->prof_frames)
        HLOG_INFO("frame: %s: per frame over %llu frames: upload %.1f us, walk %.1f us, download %.1f us",
                  m->info.path, (unsigned long long)m->prof_frames, m->prof_ns[0] / 1e3 / m->prof_frames,
                  m->prof_ns[1] / 1e3 / m->prof_frames, m->prof_ns[2] / 1e3 / m->prof_frames);
    hearth_plan *p = &m->plan;
    if (m->prof_step_ns && m->prof_frames)
        log_step_profile(m);
    free(m->prof_step_ns);
    if (m->ops) {
        for (int i = 0; i < p->n_steps; i++) {
            if (m->convs && m->convs[i])
                m->vo->conv_free(m->convs[i]);
            if (m->mms && m->mms[i])
                m->ops->weight_free(m->mms[i]);
        }
        if (m->state)
            for (int i = 0; i < (m->n_slots + 1) * p->n_states * 2; i++)
                m->ops->free(m->dev, m->state[i]);
        m->ops->free(m->dev, m->arena);
        m->ops->free(m->dev, m->consts);
        m->ops->free(m->dev, m->work);
        if (m->in_sets)
            m->ops->host_free(m->dev, m->in_sets);
    }
    plan_lanes_free(&m->lanes);
    free(m->convs);
    free(m->mms);
    free(m->state);
    free(m->parity);
    free(m->slot_uid);
    free(m->zeros);
    hearth_plan_free(p);
    hearth_onnx_close(m->onnx);
    free(m);
}

/* HEARTH_FRAME_LANES: the most lanes a frame's steps spread over on a
 * device that has them (default HEARTH_VIS_LANES; 1: one at a time, for
 * A/B runs; counts outside 1 .. HEARTH_VIS_LANES are clamped, anything
 * else is warned about and ignored). Read at each model's open. */
static int lanes_max(void)
{
    const char *e = getenv("HEARTH_FRAME_LANES");
    if (!e || !*e)
        return HEARTH_VIS_LANES;
    char *end;
    long n = strtol(e, &end, 10);
    if (*end) {
        HLOG_WARN("frame: HEARTH_FRAME_LANES=%s is not a count: %d lanes", e, HEARTH_VIS_LANES);
        return HEARTH_VIS_LANES;
    }
    return n < 1 ? 1 : n > HEARTH_VIS_LANES ? HEARTH_VIS_LANES : (int)n;
}

/* Where the device has lanes: the steps scheduled on them and the arena
 * laid out again for that order (onnx_lanes.c); kept only when the
 * schedule uses two lanes or more. A schedule that cannot be made (out of
 * memory, more marks than the device has) leaves the steps one at a time
 * over the arena as planned, with a warning: slower, not wrong. */
static void lanes_plan(hearth_frame_model *m)
{
    int most = lanes_max();
    if (!m->vo->lane_use || !m->vo->lane_mark || !m->vo->lane_after || most < 2)
        return;
    hearth_err e = {0};
    int rc = plan_lanes_build(&m->lanes, &m->plan, most, &e);
    if (!rc && m->lanes.n_lanes > 1)
        rc = plan_arena(&m->plan, &m->lanes, &e); /* fails before it moves anything */
    if (rc)
        HLOG_WARN("frame: %d steps run one at a time: %s", m->plan.n_steps, e.msg);
    if (rc || m->lanes.n_lanes < 2)
        plan_lanes_free(&m->lanes);
}

static int place(hearth_frame_model *m, hearth_err *err)
{
    hearth_plan *p = &m->plan;
    m->convs = calloc((size_t)p->n_steps + 1, sizeof *m->convs);
    m->mms = calloc((size_t)p->n_steps + 1, sizeof *m->mms);
    if (!m->convs || !m->mms)
        return hearth_err_set(err, HEARTH_ENOMEM, "frame: out of memory");
    size_t work = 0;
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *s = &p->steps[i];
        if (s->kind == STEP_CONV) {
            m->convs[i] = m->vo->conv_new(m->dev, &s->u.conv.d, s->u.conv.w, s->u.conv.bias, err);
            if (!m->convs[i])
                return err ? err->code : HEARTH_EINVAL;
            size_t wb = m->vo->conv_work_bytes(m->convs[i]);
            if (wb > work)
                work = wb;
        } else if (s->kind == STEP_MATMUL) {
            hearth_weight_desc d = {.type = HEARTH_F32, .data = s->u.mm.wt, .row_bytes = (size_t)s->u.mm.k * sizeof(float),
                                    .n_out = s->u.mm.n, .n_in = s->u.mm.k, .place = HEARTH_WEIGHT_FAST,
                                    .name = p->model->nodes[s->node].name};
            m->mms[i] = m->ops->weight_new(m->dev, &d, err);
            if (!m->mms[i])
                return err ? err->code : HEARTH_EINVAL;
        }
    }
    p->work_bytes = work;
    m->work_bytes = (work + 63) / 64 * 64;
    lanes_plan(m);
    int n_lanes = m->lanes.n_lanes > 1 ? m->lanes.n_lanes : 1;
    m->arena = m->ops->alloc(m->dev, p->arena_bytes ? p->arena_bytes : 64, err);
    m->consts = m->ops->alloc(m->dev, p->const_bytes ? p->const_bytes : 64, err);
    m->work = work ? m->ops->alloc(m->dev, m->work_bytes * (size_t)n_lanes, err) : NULL;
    if (!m->arena || !m->consts || (work && !m->work))
        return err ? err->code : HEARTH_ENOMEM;
    /* state buffers: two per pair per slot, and the scratch slot */
    int ns = p->n_states;
    if (ns) {
        m->state = calloc((size_t)(m->n_slots + 1) * ns * 2, sizeof *m->state);
        m->parity = calloc((size_t)m->n_slots + 1, 1);
        m->slot_uid = calloc((size_t)m->n_slots + 1, sizeof *m->slot_uid);
        if (!m->state || !m->parity || !m->slot_uid)
            return hearth_err_set(err, HEARTH_ENOMEM, "frame: out of memory");
        for (int s = 0; s <= m->n_slots; s++) {
            m->slot_uid[s] = hearth_dev_uid();
            for (int k = 0; k < ns; k++) {
                size_t b = (size_t)p->v[p->state_in[k]].n * sizeof(float);
                if (b > m->zeros_bytes)
                    m->zeros_bytes = b;
                for (int par = 0; par < 2; par++)
                    if (!(m->state[(s * ns + k) * 2 + par] = m->ops->alloc(m->dev, b, err)))
                        return err ? err->code : HEARTH_ENOMEM;
            }
        }
        if (!(m->zeros = calloc(1, m->zeros_bytes)))
            return hearth_err_set(err, HEARTH_ENOMEM, "frame: out of memory");
    }
    /* constants the steps read */
    hearth_stream st;
    int rc = hearth_stream_init(&st, m->dev, m->pool, err);
    if (rc)
        return rc;
    for (int i = 0; i < p->n_v && !rc; i++)
        if (p->v[i].is_const && p->v[i].const_off >= 0)
            rc = m->ops->upload(&st, (char *)m->consts + p->v[i].const_off, p->v[i].data,
                                (size_t)p->v[i].n * sizeof(float));
    if (!rc)
        rc = m->ops->sync(&st);
    hearth_stream_deinit(&st);
    if (rc)
        return hearth_err_set(err, rc, "frame: uploading the constants to %s failed", m->dev->caps.name);
    /* every slot's first frame reads zeros */
    for (int s = 0; s <= m->n_slots && ns; s++)
        m->parity[s] = 0;
    return 0;
}

hearth_frame_model *hearth_frame_model_open(const char *path, const hearth_frame_opts *o, hearth_err *err)
{
    hearth_frame_opts def = {0};
    if (!o)
        o = &def;
    hearth_frame_model *m = calloc(1, sizeof *m);
    char *states_owned = NULL;
    if (!m) {
        hearth_err_set(err, HEARTH_ENOMEM, "frame: out of memory");
        return NULL;
    }
    m->pool = o->pool;
    m->uid = hearth_dev_uid();
    m->dev = o->dev ? o->dev : hearth_dev_find(o->device ? o->device : "cpu", err);
    if (!m->dev)
        goto fail;
    m->ops = m->dev->ops;
    m->vo = m->ops->vision;
    if (!m->vo) {
        hearth_err_set(err, HEARTH_EUNSUPPORTED, "frame: device %s has no conv-net ops", m->dev->caps.name);
        m->ops = NULL;
        goto fail;
    }
    if (!(m->onnx = hearth_onnx_open(path, err)))
        goto fail;
    const char *states = o->states;
    if (!states)
        states = states_owned = state_file(path);
    if (hearth_plan_build(&m->plan, m->onnx, o->shapes, states, err))
        goto fail;
    hearth_plan *p = &m->plan;
    if (p->n_inputs > HEARTH_FRAME_MAX_IO || p->n_outputs > HEARTH_FRAME_MAX_IO) {
        hearth_err_set(err, HEARTH_ELIMIT, "frame: %s: more than %d inputs or outputs", path, HEARTH_FRAME_MAX_IO);
        goto fail;
    }
    m->n_slots = p->n_states ? (o->n_slots > 0 ? o->n_slots : 16) : 0;
    if (place(m, err))
        goto fail;
    for (int i = 0; i < p->n_inputs; i++) {
        io_of(&p->v[p->inputs[i]], &m->ins[i]);
        m->io_bytes += (m->ins[i].bytes + 63) / 64 * 64;
    }
    for (int i = 0; i < p->n_outputs; i++) {
        io_of(&p->v[p->outputs[i]], &m->outs[i]);
        m->io_bytes += (m->outs[i].bytes + 63) / 64 * 64;
    }
    if (m->ops->host_alloc) {
        size_t set = 0;
        for (int i = 0; i < p->n_inputs; i++)
            set += (m->ins[i].bytes + 63) / 64 * 64;
        hearth_err e = {0};
        /* none: every frame gets its own buffer (and stages it: slower, not wrong) */
        if (set && (m->in_sets = m->ops->host_alloc(m->dev, set * IN_SETS, &e))) {
            m->in_set_bytes = set;
            atomic_store(&m->in_free, (1u << IN_SETS) - 1);
        } else if (set) {
            HLOG_WARN("frame: %s: no input buffers kept (%s): each frame gets its own", path, e.msg);
        }
    }
    const char *prof = getenv("HEARTH_FRAME_PROFILE");
    m->profile = prof && *prof && strcmp(prof, "0") != 0;
    if (prof && !strcmp(prof, "steps"))
        m->prof_step_ns = calloc((size_t)(p->n_steps > 0 ? p->n_steps : 1), sizeof *m->prof_step_ns);
    snprintf(m->device_name, sizeof m->device_name, "%s", o->dev ? o->dev->caps.name : o->device ? o->device : "cpu");
    m->info = (hearth_frame_info){.path = path, .platform = "onnxruntime_onnx", .opset = m->onnx->opset,
                                  .n_inputs = p->n_inputs, .n_outputs = p->n_outputs, .inputs = m->ins,
                                  .outputs = m->outs, .n_states = p->n_states, .n_slots = m->n_slots,
                                  .device = m->device_name, .keepalive = m->vo->keepalive != NULL};
    int n_conv = 0;
    for (int i = 0; i < p->n_steps; i++)
        n_conv += p->steps[i].kind == STEP_CONV;
    char lanes[96] = "";
    if (m->lanes.n_lanes > 1)
        snprintf(lanes, sizeof lanes, ", on %d lanes (the longest chain %d steps, %d marks)", m->lanes.n_lanes,
                 m->lanes.chain, m->lanes.n_marks);
    HLOG_INFO("frame: %s: %d nodes planned as %d steps (%d convs) on %s%s; arena %.1f MB, %d state pair%s", path,
              m->onnx->n_nodes, p->n_steps, n_conv, m->device_name, lanes, (double)p->arena_bytes / 1e6, p->n_states,
              p->n_states == 1 ? "" : "s");
    free(states_owned);
    return m;
fail:
    free(states_owned);
    hearth_frame_model_close(m);
    return NULL;
}

/* The device pointer of value id for this frame. */
static void *vptr(const hearth_frame_model *m, int id, int slot)
{
    const hearth_plan *p = &m->plan;
    const plan_value *v = &p->v[id];
    if (v->is_const)
        return (char *)m->consts + v->const_off;
    const plan_value *r = &p->v[v->root];
    int ns = p->n_states;
    if (r->io == PLAN_INPUT && m->in_place)
        return (void *)m->in_place[r->io_index];
    if (r->io == PLAN_STATE_IN)
        return m->state[(slot * ns + r->io_index) * 2 + m->parity[slot]];
    if (r->io == PLAN_STATE_OUT)
        return m->state[(slot * ns + r->io_index) * 2 + !m->parity[slot]];
    return (char *)m->arena + r->off;
}

/* Before step i on lanes (l->n_lanes > 1): its lane, its waits. */
static int lane_enter(const hearth_frame_model *m, hearth_stream *st, int i, int *cur)
{
    const plan_lanes *l = &m->lanes;
    int rc = 0;
    if (l->lane[i] != *cur && !(rc = m->vo->lane_use(st, l->lane[i])))
        *cur = l->lane[i];
    for (int w = l->wait_at[i]; w < l->wait_at[i + 1] && !rc; w++)
        rc = m->vo->lane_after(st, l->waits[w]);
    return rc;
}

/* The walk's end on lanes: back on lane 0, after every other lane. */
static int lanes_join(const hearth_frame_model *m, hearth_stream *st, int cur)
{
    int rc = cur != 0 ? m->vo->lane_use(st, 0) : 0;
    for (int k = 0; k < m->lanes.n_end && !rc; k++)
        rc = m->vo->lane_after(st, m->lanes.end[k]);
    return rc;
}

/* Step i's op, enqueued on the current lane. */
static int run_step(hearth_frame_model *m, hearth_stream *st, int i, int slot, void *work)
{
    const hearth_plan *p = &m->plan;
    const hearth_dev_vision_ops *vo = m->vo;
    const plan_step *s = &p->steps[i];
    float *a = vptr(m, s->a, slot), *y = vptr(m, s->y, slot);
    switch (s->kind) {
    case STEP_CONV: return vo->conv(st, m->convs[i], a, y, work);
    case STEP_POOL: return vo->pool2d(st, &s->u.pool, a, y);
    case STEP_BINARY: return vo->binary(st, &s->u.bin, a, vptr(m, s->b, slot), y);
    case STEP_UNARY: return vo->unary(st, s->u.un.op, a, y, p->v[s->y].n, s->u.un.a, s->u.un.b);
    case STEP_SOFTMAX: return vo->softmax(st, a, y, s->u.sm.outer, s->u.sm.len, s->u.sm.inner);
    case STEP_COPY: return vo->strided_copy(st, &s->u.cp, a + s->a_off, y + s->y_off);
    case STEP_RESIZE: return vo->resize(st, &s->u.rs, a, y);
    case STEP_MATMUL: {
        const hearth_weight *w = m->mms[i];
        int64_t ys = s->u.mm.n;
        return m->ops->matmul(st, &w, 1, a, s->u.mm.k, s->u.mm.m, &y, &ys);
    }
    }
    return HEARTH_EINVAL;
}

static int walk(hearth_frame_model *m, hearth_stream *st, int slot, hearth_err *err)
{
    const hearth_plan *p = &m->plan;
    const hearth_dev_vision_ops *vo = m->vo;
    uint64_t t_step = m->prof_step_ns ? hearth_now_ns() : 0;
    /* the step profile syncs after each step: one lane (the arena's order holds for step order too) */
    const bool lanes = m->lanes.n_lanes > 1 && !m->prof_step_ns;
    int cur = 0;
    int rc = lanes ? vo->lane_mark(st, 0) : 0; /* the walk's start */
    if (rc)
        return hearth_err_set(err, rc, "frame: marking the walk's start failed on %s (status %d)", m->dev->caps.name,
                              rc);
    for (int i = 0; i < p->n_steps && !rc; i++) {
        void *work = m->work ? (char *)m->work + (lanes ? (size_t)m->lanes.lane[i] * m->work_bytes : 0) : NULL;
        rc = lanes ? lane_enter(m, st, i, &cur) : 0;
        if (!rc)
            rc = run_step(m, st, i, slot, work);
        if (!rc && lanes && m->lanes.mark[i] >= 0)
            rc = vo->lane_mark(st, m->lanes.mark[i]);
        if (!rc && m->prof_step_ns && !(rc = m->ops->sync(st))) {
            uint64_t now = hearth_now_ns();
            m->prof_step_ns[i] += now - t_step;
            t_step = now;
        }
        if (rc) {
            const hearth_onnx_node *nd = &p->model->nodes[p->steps[i].node];
            hearth_err_set(err, rc, "frame: step %d (node '%s', %s) failed on %s (status %d)", i, nd->name,
                           nd->op_type, m->dev->caps.name, rc);
        }
    }
    if (lanes) {
        int jr = rc ? vo->lane_use(st, 0) : lanes_join(m, st, cur); /* failed: lane 0 again, whatever else */
        if (!rc && jr)
            rc = hearth_err_set(err, jr, "frame: joining the lanes failed on %s (status %d)", m->dev->caps.name, jr);
    }
    return rc;
}

int hearth_frame_model_run(hearth_frame_model *m, int slot, bool reset, const void *const *in, void *const *out,
                           hearth_err *err)
{
    const hearth_plan *p = &m->plan;
    int ns = p->n_states;
    if (slot < 0 || !ns) {
        slot = m->n_slots; /* the scratch slot */
        reset = true;
    } else if (slot >= m->n_slots)
        return hearth_err_set(err, HEARTH_EINVAL, "frame: slot %d of %d", slot, m->n_slots);
    if (!ns)
        slot = 0;
    hearth_stream st;
    int rc = hearth_stream_init(&st, m->dev, m->pool, err);
    if (rc)
        return rc;
    /* A GPU copies through the stream's pinned staging: a DMA at full speed,
     * where a copy from pageable memory goes through the driver's bounce
     * buffer at a fraction of it (a 921 KB frame). The CPU reads the
     * caller's bytes directly. */
    char *stage = NULL;
    if (!m->dev->caps.host_memory) {
        if ((rc = m->ops->scratch(&st, 64, m->io_bytes))) {
            hearth_err_set(err, rc, "frame: no pinned staging of %zu bytes on %s", m->io_bytes, m->dev->caps.name);
            goto done;
        }
        stage = st.staging;
    }
    uint64_t t0 = m->profile ? hearth_now_ns() : 0, t1 = 0, t2 = 0;
    for (int k = 0; k < ns && reset && !rc; k++)
        rc = m->ops->upload(&st, m->state[(slot * ns + k) * 2 + m->parity[slot]], m->zeros,
                            (size_t)p->v[p->state_in[k]].n * sizeof(float));
    size_t at = 0;
    /* on host memory the steps read the caller's inputs where they are (no copy) */
    m->in_place = m->dev->caps.host_memory ? in : NULL;
    /* inputs in a pinned set (hearth_frame_model_inputs_take) are copied from where they are */
    bool pinned = m->in_sets && p->n_inputs > 0 && (const char *)in[0] >= m->in_sets &&
                  (const char *)in[0] < m->in_sets + m->in_set_bytes * IN_SETS;
    for (int i = 0; i < p->n_inputs && !rc && !m->in_place; i++) {
        const void *src = in[i];
        if (pinned) {
            at += (m->ins[i].bytes + 63) / 64 * 64; /* the outputs' place in the staging stays where it was */
        } else if (stage) {
            memcpy(stage + at, in[i], m->ins[i].bytes);
            src = stage + at;
            at += (m->ins[i].bytes + 63) / 64 * 64;
        }
        rc = m->ops->upload(&st, vptr(m, p->inputs[i], slot), src, m->ins[i].bytes);
    }
    if (rc) {
        hearth_err_set(err, rc, "frame: uploading the inputs to %s failed", m->dev->caps.name);
        goto done;
    }
    if (m->profile && !(rc = m->ops->sync(&st)))
        t1 = hearth_now_ns();
    /* a pass is recorded per (slot, parity): the state buffers it reads differ */
    hearth_graph_key key = {.model = m->uid, .cache = ns ? m->slot_uid[slot] : 0, .rows = ns ? m->parity[slot] : 0,
                            .out_rows = 0};
    for (int attempt = 0; attempt < 2 && !rc; attempt++) {
        /* the step profile syncs after each step, which a graph cannot hold: it walks unrecorded */
        bool graphs = m->ops->graph_begin && m->ops->graph_end && !m->prof_step_ns;
        int g = graphs ? m->ops->graph_begin(&st, &key) : 0;
        if (g < 0) {
            rc = hearth_err_set(err, g, "frame: graph launch on %s failed", m->dev->caps.name);
            goto done;
        }
        if (g == 1) {
            rc = 0;
            break;
        }
        rc = walk(m, &st, slot, err);
        if (graphs)
            rc = m->ops->graph_end(&st, &key, rc);
        if (rc != HEARTH_EAGAIN)
            break;
        rc = 0;
    }
    if (rc)
        goto done;
    if (m->profile && !(rc = m->ops->sync(&st)))
        t2 = hearth_now_ns();
    for (int j = 0; j < p->n_outputs && !rc; j++) {
        void *dst = out[j];
        if (stage) {
            dst = stage + at;
            at += (m->outs[j].bytes + 63) / 64 * 64;
        }
        rc = m->ops->download(&st, dst, vptr(m, p->outputs[j], slot), m->outs[j].bytes);
    }
    if (!rc)
        rc = m->ops->sync(&st);
    if (rc) {
        hearth_err_set(err, rc, "frame: reading the outputs from %s failed", m->dev->caps.name);
        goto done;
    }
    if (stage) {
        at = 0;
        for (int i = 0; i < p->n_inputs; i++)
            at += (m->ins[i].bytes + 63) / 64 * 64;
        for (int j = 0; j < p->n_outputs; j++) {
            memcpy(out[j], stage + at, m->outs[j].bytes);
            at += (m->outs[j].bytes + 63) / 64 * 64;
        }
    }
    if (m->profile) {
        uint64_t t3 = hearth_now_ns();
        m->prof_ns[0] += t1 - t0;
        m->prof_ns[1] += t2 - t1;
        m->prof_ns[2] += t3 - t2;
        m->prof_frames++;
    }
    if (ns)
        m->parity[slot] ^= 1;
done:
    m->in_place = NULL;
    hearth_stream_deinit(&st);
    return rc;
}

/* A served model's first frames cost what later ones do not: on a GPU a
 * graph key's first run walks plain (its launches load the kernels, CUDA's
 * lazy module loading) and its second records and instantiates the graph.
 * Served without this, the first two frames after a load took 5.97 and
 * 3.15 ms against ~0.35 (hearth serve's access log, H100, RFB-320, stop 43).
 * Those records are the calling thread's (dev_cuda.cu's per-thread
 * contexts): it must be the thread that runs the frames (the frame queue's
 * runner warm_up); warmed on the loading thread, the served frames still
 * took 1.4-3.6 ms each (stop 44). So every key runs twice and replays once:
 * stateless, the one; with state, each slot's two parities and the scratch
 * slot's. Without graphs (the CPU) one frame warms the caches and the
 * buffers. The inputs are zeros; a slot's state is left at its starting
 * parity (an even number of runs) and a sequence's start resets it. */
int hearth_frame_model_warm_up(hearth_frame_model *m, hearth_err *err)
{
    const hearth_plan *p = &m->plan;
    const bool graphs = m->ops->graph_begin && m->ops->graph_end;
    const int ns = p->n_states, slots = ns && graphs ? m->n_slots : 0, runs = !graphs ? 1 : ns ? 4 : 3;
    void *in[HEARTH_FRAME_MAX_IO] = {0}, *out[HEARTH_FRAME_MAX_IO] = {0};
    int rc = 0;
    /* zeros in an input set, as a served frame's inputs come (a GPU's pinned) */
    const int set = hearth_frame_model_inputs_take(m, in);
    for (int i = 0; i < p->n_inputs && !rc; i++)
        if (set >= 0)
            memset(in[i], 0, m->ins[i].bytes);
        else if (!(in[i] = calloc(1, m->ins[i].bytes ? m->ins[i].bytes : 1)))
            rc = hearth_err_set(err, HEARTH_ENOMEM, "frame: no memory to warm the model up");
    for (int j = 0; j < p->n_outputs && !rc; j++)
        if (!(out[j] = malloc(m->outs[j].bytes ? m->outs[j].bytes : 1)))
            rc = hearth_err_set(err, HEARTH_ENOMEM, "frame: no memory to warm the model up");
    /* slot -1: the scratch slot (a stateless model's only one) */
    for (int slot = -1; slot < slots && !rc; slot++)
        for (int k = 0; k < runs && !rc; k++)
            rc = hearth_frame_model_run(m, slot, true, (const void *const *)in, out, err);
    hearth_frame_model_inputs_give(m, set);
    for (int i = 0; i < HEARTH_FRAME_MAX_IO; i++) {
        if (set < 0)
            free(in[i]);
        free(out[i]);
    }
    return rc;
}

int hearth_frame_model_inputs_take(hearth_frame_model *m, void **in)
{
    if (!m->in_sets)
        return -1;
    unsigned f = atomic_load(&m->in_free);
    while (f) {
        int s = __builtin_ctz(f);
        if (atomic_compare_exchange_weak(&m->in_free, &f, f & ~(1u << s))) {
            char *at = m->in_sets + (size_t)s * m->in_set_bytes;
            for (int i = 0; i < m->plan.n_inputs; i++) {
                in[i] = at;
                at += (m->ins[i].bytes + 63) / 64 * 64;
            }
            return s;
        }
    }
    return -1;
}

void hearth_frame_model_inputs_give(hearth_frame_model *m, int set)
{
    if (set >= 0 && set < IN_SETS)
        atomic_fetch_or(&m->in_free, 1u << set);
}

int hearth_frame_model_keepalive(hearth_frame_model *m)
{
    if (!m->vo->keepalive)
        return 0;
    hearth_stream st;
    int rc = hearth_stream_init(&st, m->dev, m->pool, NULL);
    if (rc)
        return rc;
    rc = m->vo->keepalive(&st);
    hearth_stream_deinit(&st);
    return rc;
}

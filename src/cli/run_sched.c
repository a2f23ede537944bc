/* run_sched.c: `hearth run` drives the server's scheduler (engine/gen_sched.h).
 *
 * There is one generation loop in hearth, the batching scheduler; `hearth
 * run` and `hearth run --bench` are its clients with a KV cache of one slot
 * (P slots for --bench --parallel P). This file is the thin part they share:
 * the scheduler's model table over a hearth_llama with its cache and pool,
 * and a blocking "submit these requests and wait for their ends", since the
 * command line has nothing else to do meanwhile.
 *
 * The table is built here and not taken from src/api (which builds the same
 * one for `hearth serve`) because cli/run needs no HTTP layer, and because
 * `hearth run` starts SentencePiece text at the start of a line when the
 * prompt is only BOS (the server always continues a prompt).
 *
 * Rejected: keeping a second, single-sequence loop for the command line
 * (engine/generate.c until 2026-12-02): it decoded, sampled, checked end ids
 * and stop strings exactly as the scheduler does, so every fix had to be made
 * twice, and a scheduler step of one sequence is the same forward passes (a
 * prompt in chunks of n_batch, then one token per pass). */
#include "run.h"

#include "base/log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static int adapt_forward(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want,
                         float *logits, hearth_err *err)
{
    run_model *rm = ctx;
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = slots, .want_logits = want};
    return hearth_llama_forward(rm->m, rm->kv, rm->pool, &b, logits, err);
}

static int adapt_forward_argmax(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want,
                                int32_t *ids, hearth_err *err)
{
    run_model *rm = ctx;
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = slots, .want_logits = want, .argmax = ids};
    return hearth_llama_forward(rm->m, rm->kv, rm->pool, &b, NULL, err);
}

static int adapt_forward_steps(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, int steps,
                               int32_t *ids, hearth_err *err)
{
    run_model *rm = ctx;
    hearth_llama_batch b = {.n = n, .tokens = tokens, .slot = slots, .argmax = ids, .steps = steps};
    return hearth_llama_forward(rm->m, rm->kv, rm->pool, &b, NULL, err);
}

static int64_t adapt_truncate(void *ctx, int slot, int64_t n)
{
    run_model *rm = ctx;
    return hearth_kv_truncate(rm->kv, slot, n);
}

static void adapt_detok_init(void *ctx, void *state)
{
    run_model *rm = ctx;
    hearth_detok_init(state, hearth_llama_tokenizer(rm->m), rm->from_start, false);
}

static int adapt_detok_push(void *ctx, void *state, int32_t id, hearth_buf *out)
{
    (void)ctx;
    return hearth_detok_push(state, id, out);
}

static int adapt_detok_flush(void *ctx, void *state, hearth_buf *out)
{
    (void)ctx;
    return hearth_detok_flush(state, out);
}

void run_model_table(run_model *rm, int n_slots, int64_t n_ctx, hearth_gen_batch_model *out)
{
    const hearth_llama_hparams *hp = hearth_llama_hparams_get(rm->m);
    const hearth_vocab *voc = hearth_llama_vocab(rm->m);
    memset(out, 0, sizeof *out);
    out->ctx = rm;
    out->n_vocab = (int32_t)hp->n_vocab;
    out->n_slots = n_slots;
    out->n_ctx = n_ctx;
    if (voc->eos >= 0)
        out->end_ids[out->n_end_ids++] = voc->eos;
    if (voc->eot >= 0 && voc->eot != voc->eos)
        out->end_ids[out->n_end_ids++] = voc->eot;
    out->forward = adapt_forward;
    if (hearth_llama_argmax_on_device(rm->m)) {
        out->forward_argmax = adapt_forward_argmax;
        out->forward_steps = adapt_forward_steps;
        out->steps_max = HEARTH_LLAMA_STEPS_MAX;
    }
    out->records = rm->kv && rm->kv->dev && rm->kv->dev->ops->graph_begin; /* a GPU's graphs, as a served model's */
    out->truncate = adapt_truncate;
    out->detok_size = sizeof(hearth_detok);
    out->detok_init = adapt_detok_init;
    out->detok_push = adapt_detok_push;
    out->detok_flush = adapt_detok_flush;
}

/* Counts the ends still to come; the submitting thread waits for zero. */
typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int left;
} waiter;

static void on_done(hearth_gen_req *req, int status, const char *msg, const hearth_gen_stats *st)
{
    run_end *e = req->user;
    e->status = status;
    e->have_stats = st != NULL;
    if (st)
        e->stats = *st;
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "");
    e->done_ns = hearth_now_ns();
    waiter *w = e->waiter;
    pthread_mutex_lock(&w->lock);
    w->left--;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int run_sched_wait(hearth_gen_sched *s, hearth_gen_req *const *reqs, run_end *ends, int n, hearth_err *err)
{
    waiter w = {.left = n};
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    for (int i = 0; i < n; i++) {
        memset(&ends[i], 0, sizeof ends[i]);
        ends[i].waiter = &w;
        reqs[i]->user = &ends[i];
        reqs[i]->on_done = on_done;
    }
    int rc = hearth_gen_sched_submit_all(s, reqs, n, err);
    if (rc == 0) {
        pthread_mutex_lock(&w.lock);
        while (w.left > 0)
            pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
    }
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
    return rc;
}

hearth_gen_sched *run_sched_new(const hearth_gen_batch_model *m, const run_opts *o, hearth_pool *pool, hearth_err *err)
{
    /* The scheduler logs each admission ("slot 0: kept 0 of N positions") for
     * the server's operators; `hearth run` keeps stderr to its own lines. */
    if (hearth_log_get_level() < HEARTH_LOG_WARN)
        hearth_log_set_level(HEARTH_LOG_WARN);
    /* warm_up: the shapes of the steps to come recorded before the first
     * one, as `hearth serve` does (gen_sched.h), so the bench times what a
     * served model runs after its warm-up */
    hearth_gen_sched_config cfg = {.n_parallel = m->n_slots,
                                   .max_queue = m->n_slots,
                                   .n_batch = o->n_batch,
                                   .pool = pool,
                                   .decode_steps = o->decode_steps,
                                   .warm_up = true};
    return hearth_gen_sched_new(m, &cfg, err);
}

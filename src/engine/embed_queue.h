/* embed_queue.h: dynamic batching for encoder models.
 *
 * Requests (jobs) of one or more token sequences wait in a bounded queue; a
 * scheduler thread (a lane; a model may have several, each running its
 * own passes) packs sequences from the head of the queue into
 * a batch of at most max_batch_tokens tokens (at least one sequence), runs it
 * as one forward pass through the compute callback, and hands each job its
 * vectors when all its sequences are done. There is no wait window: an idle
 * scheduler starts the moment a job arrives, and jobs that arrive during a
 * forward pass form the next batch, so batching grows with load and costs an
 * idle server nothing. A pass that has spent less than a pass's fixed cost
 * (fitted to recent passes) is given up and started over with the work that
 * arrived meanwhile; with several lanes, those waiting share what is
 * queued: see embed_queue.c.
 *
 * The lane knows nothing of models or HTTP: the model is reached through
 * the compute callback, the client through the job's done callback. */
#ifndef HEARTH_ENGINE_EMBED_QUEUE_H
#define HEARTH_ENGINE_EMBED_QUEUE_H

#include "base/err.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The scheduler's question to a running forward pass, asked at its
 * checkpoints (between layers): done of total steps are behind it; true
 * means give the pass up. Cheap (a short walk of the queue under its lock). */
typedef struct hearth_embed_restart {
    bool (*check)(void *ctx, int64_t done, int64_t total);
    void *ctx;
} hearth_embed_restart;

/* Runs n sequences as one forward pass, writing each one's vectors to out in
 * sequence order: dim pooled (unnormalized) floats, or, where all_tokens[i]
 * is set, lens[i] x dim floats, every token's (all_tokens NULL: every
 * sequence pooled). Returns 0, HEARTH_EAGAIN when restart->check said to
 * give up (out undefined), or a negative status with err set. restart may
 * be NULL. */
typedef int (*hearth_embed_compute_fn)(void *model, int n, const int32_t *const *ids, const int32_t *lens,
                                       const bool *all_tokens, float *out, const hearth_embed_restart *restart,
                                       hearth_err *err);

typedef struct hearth_embed_job hearth_embed_job;

/* Called once per job on the scheduler thread, after its last sequence is
 * computed (status 0, job->out filled), when it failed (status < 0, msg says
 * why), or when it was cancelled before finishing (status HEARTH_ENOTFOUND).
 * The queue does not touch the job after calling it. */
typedef void (*hearth_embed_done_fn)(hearth_embed_job *job, int status, const char *msg);

struct hearth_embed_job {
    /* filled by the submitter; owned by it */
    int n;                    /* sequences */
    const int32_t *const *ids;
    const int32_t *lens;
    bool normalize;           /* L2-normalize each vector (not with all_tokens) */
    bool all_tokens;          /* every token's vector, not one pooled per sequence (TEI's /embed_all) */
    const size_t *rows;       /* with all_tokens: rows[i] = the first row of sequence i in out */
    float *out;               /* n x dim; with all_tokens (sum of lens) x dim */
    hearth_embed_done_fn done;
    void *user;
    _Atomic int cancelled;    /* set by the submitter (any thread); remaining sequences are skipped */
    /* private to the queue */
    int next;                 /* next sequence to schedule */
    int finished;             /* sequences computed */
    int status;
    bool completed;
    hearth_embed_job *link;
};

typedef struct hearth_embed_queue hearth_embed_queue;

typedef struct hearth_embed_queue_stats {
    uint64_t batches, sequences, tokens, jobs_done, jobs_failed, jobs_cancelled;
    uint64_t restarts;        /* passes given up to start over with more work */
    double pass_fixed_ns;     /* the fitted fixed cost of a pass (0: not known yet) */
    int queued_jobs;
    uint64_t busy_ns;         /* time spent in forward passes, summed over the lanes */
} hearth_embed_queue_stats;

/* Starts one scheduler thread (one lane). max_jobs bounds the queue (past
 * it, submit says HEARTH_ELIMIT: the caller answers 429). */
hearth_embed_queue *hearth_embed_queue_new(hearth_embed_compute_fn compute, void *model, int64_t dim,
                                           size_t max_batch_tokens, int max_jobs, hearth_err *err);
/* Most lanes per queue. */
#define HEARTH_EMBED_LANES_MAX 64
/* n_lanes scheduler threads on one queue, each running its own passes at
 * once with the others: lane i calls compute(models[i], ...), so each can
 * hold its own thread pool. See "Engines" in embed_queue.c. */
hearth_embed_queue *hearth_embed_queue_new_lanes(hearth_embed_compute_fn compute, void *const *models,
                                                   int n_lanes, int64_t dim, size_t max_batch_tokens, int max_jobs,
                                                   hearth_err *err);
/* With several lanes: a pass picked while every other lane waits and
 * nothing else is queued (a lone request) runs as compute(wide_model, ...),
 * which may use every thread; the other lanes start nothing until it
 * ends, and it is not restarted. NULL (the default) turns this off. Call
 * before the first submit. */
void hearth_embed_queue_set_wide(hearth_embed_queue *q, void *wide_model);
/* Stops the threads; jobs still queued get done(HEARTH_ENOTFOUND). NULL is a no-op. */
void hearth_embed_queue_free(hearth_embed_queue *q);
/* Any thread. The job must stay valid until its done callback has run. */
int hearth_embed_queue_submit(hearth_embed_queue *q, hearth_embed_job *job);
/* Fixes the fixed cost of a pass that restarts are weighed against (tests;
 * 0: never restart), or with ns < 0 goes back to fitting it. */
void hearth_embed_queue_pin_pass_cost(hearth_embed_queue *q, int64_t ns);
void hearth_embed_queue_get_stats(hearth_embed_queue *q, hearth_embed_queue_stats *out);

#endif

/* embed_queue.h: dynamic batching for encoder models.
 *
 * Requests (jobs) of one or more token sequences wait in a bounded queue; one
 * scheduler thread per model packs sequences from the head of the queue into
 * a batch of at most max_batch_tokens tokens (at least one sequence), runs it
 * as one forward pass through the compute callback, and hands each job its
 * vectors when all its sequences are done. There is no wait window: an idle
 * scheduler starts the moment a job arrives, and jobs that arrive during a
 * forward pass form the next batch, so batching grows with load and costs an
 * idle server nothing.
 *
 * The engine knows nothing of models or HTTP: the model is reached through
 * the compute callback, the client through the job's done callback. */
#ifndef HEARTH_ENGINE_EMBED_QUEUE_H
#define HEARTH_ENGINE_EMBED_QUEUE_H

#include "base/err.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Runs n sequences as one forward pass, writing n x dim pooled (unnormalized)
 * floats to out. Returns 0 or a negative status with err set. */
typedef int (*hearth_embed_compute_fn)(void *model, int n, const int32_t *const *ids, const int32_t *lens, float *out,
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
    bool normalize;           /* L2-normalize each vector */
    float *out;               /* n x dim */
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
    int queued_jobs;
    uint64_t busy_ns;         /* time spent in forward passes */
} hearth_embed_queue_stats;

/* Starts the scheduler thread. max_jobs bounds the queue (past it, submit says
 * HEARTH_ELIMIT: the caller answers 429). */
hearth_embed_queue *hearth_embed_queue_new(hearth_embed_compute_fn compute, void *model, int64_t dim,
                                           size_t max_batch_tokens, int max_jobs, hearth_err *err);
/* Stops the thread; jobs still queued get done(HEARTH_ENOTFOUND). NULL is a no-op. */
void hearth_embed_queue_free(hearth_embed_queue *q);
/* Any thread. The job must stay valid until its done callback has run. */
int hearth_embed_queue_submit(hearth_embed_queue *q, hearth_embed_job *job);
void hearth_embed_queue_get_stats(hearth_embed_queue *q, hearth_embed_queue_stats *out);

#endif

/* frame_queue.h: frames of a fixed-shape model, run one at a time in arrival
 * order by the model's own scheduler thread, under deadlines, with sequences
 * whose state the model keeps between frames.
 *
 * Deadlines: a job may carry an absolute deadline (hearth_now_ns clock). A
 * frame that can no longer make it (its deadline, less the run time the queue
 * expects from recent frames, has passed when its turn comes, or passes
 * while it waits) is answered at once with HEARTH_FRAME_LATE and never run;
 * a frame that ran and still finished past its deadline is answered with its
 * outputs and counted as a miss.
 *
 * Sequences (Triton's sequence_id / sequence_start / sequence_end): the
 * model holds n_slots states; a sequence takes a slot at its start frame
 * (state reset to zeros), keeps it while frames arrive and gives it back at
 * its end frame, or when idle longer than seq_idle_ns (expired). A frame for
 * a sequence that is not live is refused (HEARTH_FRAME_NO_SEQUENCE) with a
 * message saying whether it expired, ended, or was never started.
 *
 * Cadence: frames from a paced client (a camera) come at a steady gap.
 * When the last CADENCE_N gaps agree (within an eighth of the gap, or
 * 250 us), the queue expects the next frame one gap after the last, and,
 * with lead_ns set, its scheduler polls through a window of lead_ns plus
 * the gaps' spread either side of that time instead of sleeping through
 * it, so the frame meets no sleeping thread; the submitter may open the
 * same window on its own thread (hearth_frame_queue_window).
 *
 * Keep-alive: while frames arrive, the idle scheduler calls the runner's
 * keepalive every keepalive_period_ns so a GPU does not clock down between
 * frames; it stops keepalive_stop_ns after the last frame.
 *
 * The queue knows nothing of models or HTTP: the model is reached through
 * the runner, the client through the job's done callback. */
#ifndef HEARTH_ENGINE_FRAME_QUEUE_H
#define HEARTH_ENGINE_FRAME_QUEUE_H

#include "base/err.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Statuses a job's done callback may see besides 0 and the runner's own. */
enum {
    HEARTH_FRAME_LATE = -100,        /* answered without running: it could not make its deadline */
    HEARTH_FRAME_NO_SEQUENCE = -101, /* the sequence is not live (msg says why) */
    HEARTH_FRAME_SEQ_FULL = -102,    /* a start frame found every state slot taken */
};

/* The model as the queue runs it. */
typedef struct hearth_frame_runner {
    void *model;
    int n_slots;   /* states the model holds at once (0: stateless; sequence parameters are then ignored) */
    /* Runs one frame: in[i] the bytes of the model's i-th request input,
     * out[j] room for its j-th output (sizes: the model's). slot: the
     * sequence's state slot (-1 stateless); reset: the slot's state starts
     * from zeros. 0 or a negative status with err set. */
    int (*run)(void *model, int slot, bool reset, const void *const *in, void *const *out, hearth_err *err);
    /* A little device work to keep clocks up (NULL: none). */
    int (*keepalive)(void *model);
    /* Run once on the scheduler thread before its first frame (NULL:
     * none): a GPU's stream, memory and recorded graphs belong to the host
     * thread that made them, so only the thread that will run the frames
     * can warm them. hearth_frame_queue_new waits for it and fails with
     * its error. */
    int (*warm_up)(void *model, hearth_err *err);
} hearth_frame_runner;

typedef struct hearth_frame_job hearth_frame_job;

/* Called once per job on the scheduler thread (or on the submitting thread
 * when submit answers at once, or on the queue's timer thread for a queued
 * frame answered late or cancelled while another frame runs), with 0
 * (outputs written), a HEARTH_FRAME_* status, HEARTH_ENOTFOUND (cancelled
 * before it ran, or the queue freed) or the runner's error, and a message
 * for errors (NULL with 0). Never with the queue's lock held: done may
 * submit again. The queue does not touch the job after calling it.
 * A late frame is as if never sent: a late start frame does not start its
 * sequence, a late end frame does not end it. */
typedef void (*hearth_frame_done_fn)(hearth_frame_job *job, int status, const char *msg);

#define HEARTH_FRAME_SEQ_ID_MAX 64

struct hearth_frame_job {
    /* filled by the submitter; owned by it */
    const void *const *in;
    void *const *out;
    uint64_t deadline_ns;          /* absolute (hearth_now_ns), 0: none */
    bool has_seq;                  /* a sequence frame (seq_id set) */
    char seq_id[HEARTH_FRAME_SEQ_ID_MAX]; /* Triton's id, a number or a string, as text */
    bool seq_start, seq_end;
    hearth_frame_done_fn done;
    void *user;
    _Atomic int cancelled;         /* set by the submitter (any thread): skipped if not yet running */
    /* set by the queue before done */
    uint64_t submit_ns;            /* when submit took it */
    uint64_t start_ns, end_ns;     /* the run's (0 when it did not run) */
    bool missed;                   /* ran, and ended past its deadline */
    /* private to the queue */
    hearth_frame_job *link;
    bool swept_cancelled;          /* sweep's verdict: cancelled (else late), counted when it was made */
};

typedef struct hearth_frame_queue_opts {
    int max_jobs;                  /* waiting jobs; past it submit says HEARTH_ELIMIT (the API: 429) */
    uint64_t seq_idle_ns;          /* a sequence idle this long expires (0: never; default 60 s) */
    bool keepalive;                /* call runner->keepalive between frames (when it has one) */
    uint64_t keepalive_period_ns;  /* how often (0: 200 us) */
    uint64_t keepalive_stop_ns;    /* stop this long after the last frame (0: 1 s) */
    uint64_t spin_ns;              /* after a frame, poll for the next this long before sleeping (0: sleep at
                                      once): a frame that comes within it starts without a thread's wake-up */
    uint64_t lead_ns;              /* a paced stream's window (Cadence above): its half-width beyond the gaps'
                                      spread (0: none; the scheduler sleeps between frames) */
} hearth_frame_queue_opts;

void hearth_frame_queue_opts_default(hearth_frame_queue_opts *o);

/* Latency histogram buckets (upper bounds in ms, then +Inf), for /metrics. */
#define HEARTH_FRAME_HIST_N 16
extern const double hearth_frame_hist_ms[HEARTH_FRAME_HIST_N];

typedef struct hearth_frame_queue_stats {
    uint64_t frames;               /* run to the end (misses included) */
    uint64_t misses;               /* ran, ended past their deadline */
    uint64_t late;                 /* answered HEARTH_FRAME_LATE, not run */
    uint64_t failed, cancelled, refused; /* runner errors; cancelled before running; sequence refusals */
    uint64_t seq_started, seq_ended, seq_expired;
    int seq_live, queued;
    uint64_t keepalives;
    uint64_t paced_windows;        /* cadence windows the scheduler polled through */
    uint64_t paced_hits;           /* frames that came while it polled in one */
    uint64_t hist[HEARTH_FRAME_HIST_N + 1]; /* submit-to-end latency of frames run (misses included),
                                             * one count per bucket (not cumulative: /metrics sums
                                             * them); hist[i] counts latencies <= hearth_frame_hist_ms[i]
                                             * and above the bound before; the last: above them all */
    double latency_sum_s;
    uint64_t run_ns_expected;      /* the run time the deadline check assumes now: the p90 of the
                                    * last 32 runs (0 before the first) */
} hearth_frame_queue_stats;

typedef struct hearth_frame_queue hearth_frame_queue;

/* Starts the scheduler thread (and the timer thread that answers late
 * frames while another runs), and returns once the runner's warm_up has run
 * there. r and o are copied (o NULL: the defaults; max_jobs <= 0: 64).
 * r->n_slots 0..65536. NULL with err set (the warm-up's error, if it failed). */
hearth_frame_queue *hearth_frame_queue_new(const hearth_frame_runner *r, const hearth_frame_queue_opts *o,
                                           hearth_err *err);
/* Stops the thread; jobs still queued get done(HEARTH_ENOTFOUND). NULL: no-op. */
void hearth_frame_queue_free(hearth_frame_queue *q);
/* Any thread. 0 (done will be called, perhaps before this returns), or
 * HEARTH_ELIMIT when the queue is full (done is not called). The job must
 * stay valid until its done callback has run. */
int hearth_frame_queue_submit(hearth_frame_queue *q, hearth_frame_job *job);
/* The run time the deadline check assumes now (stats' run_ns_expected),
 * without copying the rest of the stats. Any thread. */
uint64_t hearth_frame_queue_expected_ns(hearth_frame_queue *q);
/* The window where the next frame of a paced stream is expected (Cadence
 * above): true with *from_ns, *until_ns set (hearth_now_ns's clock), false
 * while the arrivals show no steady gap or lead_ns is 0. Any thread. */
bool hearth_frame_queue_window(hearth_frame_queue *q, uint64_t *from_ns, uint64_t *until_ns);
void hearth_frame_queue_get_stats(hearth_frame_queue *q, hearth_frame_queue_stats *out);

#endif

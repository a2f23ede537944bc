/* gen_sched.h: continuous batching for decoder models.
 *
 * One scheduler thread per model owns the model's KV cache, which holds
 * n_slots sequences. Every step it builds one batch: one decode token for
 * every live sequence, plus a chunk of prompt tokens from sequences still
 * being prefilled (so a long prompt does not freeze running streams), and
 * runs it as one forward pass, which reads the weights once for all of them.
 * Each request samples with its own sampler (seeded streams give the same
 * text alone or batched), and a request with a grammar with its own
 * matcher, made at admission and freed when it ends. A step's draws run on
 * the config's pool when it has several rows (the samplers being separate,
 * any thread draws the same token); everything after a draw (the grammar,
 * stop strings, the client's callbacks) stays on the scheduler thread.
 *
 * Prefix reuse: a slot keeps its tokens after its request ends. A new
 * request takes the idle slot whose cached tokens share the longest prefix
 * with its prompt (any idle slot, not only the last one used) and processes
 * only the rest; with no useful match it takes the least recently used idle
 * slot, evicting that cache. So n_slots bounds both the live sequences
 * (--parallel) and, with the idle ones, the cached prefixes kept (the KV
 * memory budget). The log says "kept X of Y positions" per request.
 *
 * A request with context_shift does not end when its sequence fills the
 * context: the slot keeps the first n_keep positions, drops half of the rest
 * and computes the tail that stays again (gen_sched.c says why not a cache
 * rotation), and the stats count the shifts.
 *
 * GET /slots reads a snapshot of every slot (hearth_gen_sched_slots), copied
 * under the scheduler's lock from fields the thread updates under it; the
 * slot actions (save, restore, erase) run as jobs on the scheduler thread
 * (hearth_gen_sched_slot_job), between steps, on an idle slot only.
 *
 * Runs of steps (config decode_steps, a model with forward_steps): while
 * every live sequence decodes greedily with nothing else to keep and no
 * request or slot job waits, one call runs up to decode_steps steps, the
 * device feeding each row its own last draw, and the scheduler then takes
 * the draws step by step exactly as single steps would (stop strings, end
 * ids, lengths, cancellations), truncating the positions a sequence that
 * ended inside the run was fed after its end. The text is the same; the
 * tokens of a run reach the client together. A run never crosses a
 * context limit (its last step meets it as a single step would), runs
 * past the longest n_predict left among its rows, or lasts longer than
 * about 5 ms by the last pass's time (a request arriving meanwhile waits
 * for its end: on a GPU a lone sequence's steps run 8 at a time, 64
 * sequences' one at a time).
 *
 * Warm-up (config warm_up, on a model whose device records passes): before
 * hearth_gen_sched_new returns, the scheduler thread runs one prompt chunk
 * of n_batch tokens (the device sizes its scratch for the largest pass and
 * opens its GEMM library) and then decode steps of 1 .. n_parallel rows
 * (at most 64) twice each (the first runs plain, the second is recorded),
 * then runs of one row of 2 .. decode_steps passes twice each (a device may
 * record a lone sequence's run whole, keyed by its length: 3.5-4.3 ms to
 * instantiate an 8-pass record of the 1.04B on the H100, which a request
 * would otherwise wait out), and empties the caches it used. On the H100 a
 * served burst of 4 streams without it met first-sight steps of 54 and
 * 107 ms (stop 31).
 *
 * The engine knows nothing of models or HTTP: the model comes in through
 * hearth_gen_batch_model (function pointers), the client through the
 * request's callbacks, which run on the scheduler thread and must not block. */
#ifndef HEARTH_ENGINE_GEN_SCHED_H
#define HEARTH_ENGINE_GEN_SCHED_H

#include "base/buf.h"
#include "base/err.h"
#include "engine/genstop.h"
#include "engine/grammar.h"
#include "base/pool.h"
#include "engine/sampler.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* A model with a multi-slot KV cache. All functions receive ctx and are
 * called from the scheduler thread only. */
typedef struct hearth_gen_batch_model {
    void *ctx;
    int32_t n_vocab;
    int n_slots;                 /* KV-cache sequences */
    int64_t n_ctx;               /* positions per slot */
    int32_t end_ids[HEARTH_GEN_MAX_END_IDS];
    int n_end_ids;
    /* Appends tokens[i] to slot slots[i] for i in [0, n) (a slot's tokens in
     * order), writing one row of n_vocab logits per token with want[i] set,
     * in batch order. */
    int (*forward)(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want, float *logits,
                   hearth_err *err);
    /* Optional (NULL: never): forward, but writing for each token with
     * want[i] its greedy draw (sampler.h's hearth_logits_argmax of its
     * logits) into ids, in batch order, instead of the row: a step whose
     * every row draws greedily with nothing else to keep takes it, so a
     * GPU hands back 4 bytes a row instead of the logits. */
    int (*forward_argmax)(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, const bool *want,
                          int32_t *ids, hearth_err *err);
    /* Optional (NULL: never; needs forward_argmax): a run of steps (2 ..
     * steps_max) greedy passes of a decode batch, n rows of n slots, every
     * row wanted: pass j > 0 feeds each row the draw of pass j - 1 without
     * the host, and ids gets steps x n draws, pass by pass. Every slot's
     * cache grows by steps positions; the scheduler truncates those of a
     * sequence that ended inside the run. A GPU then waits on the host once
     * a run instead of once a step. */
    int (*forward_steps)(void *ctx, int32_t n, const int32_t *tokens, const int32_t *slots, int steps, int32_t *ids,
                         hearth_err *err);
    int steps_max;
    /* The device records a pass on its second sight and replays it after
     * (CUDA graphs): the first steps of each shape cost more, which the
     * config's warm_up pays before serving. */
    bool records;
    /* Keeps at most the first n positions of slot (prefix reuse drops the
     * rest) and returns how many it kept: a cache that rolls back only to
     * checkpoints keeps fewer, and the prompt is then re-fed from there. */
    int64_t (*truncate)(void *ctx, int slot, int64_t n);
    /* Streaming detokenizer: the state of one sequence lives in a buffer of
     * detok_size bytes that the scheduler owns. */
    size_t detok_size;
    void (*detok_init)(void *ctx, void *state);
    int (*detok_push)(void *ctx, void *state, int32_t id, hearth_buf *out);
    int (*detok_flush)(void *ctx, void *state, hearth_buf *out);
} hearth_gen_batch_model;

typedef struct hearth_gen_req hearth_gen_req;

/* What a finished request reports. */
typedef struct hearth_gen_stats {
    enum hearth_gen_finish finish;
    int stop_index;           /* which stop string matched, or -1 */
    int64_t n_prompt;         /* prompt tokens */
    int64_t n_cached;         /* of them, reused from the slot's cache (not recomputed) */
    int64_t n_gen;            /* tokens sampled (an end id included) */
    int n_shifts;             /* times the context was shifted (context_shift) */
    double queue_ms;          /* waiting for a slot */
    double prompt_ms;         /* from admission to the first sampled token */
    double gen_ms;            /* from the first sampled token to the end */
    int slot;
} hearth_gen_stats;

/* One token's top candidates, for llama-server's n_probs. */
typedef struct hearth_gen_probs {
    int n;
    int32_t ids[16];
    float probs[16];
    float token_prob;         /* post_sampling_probs: the sampled token's, found among all candidates; else -1 */
} hearth_gen_probs;

/* Text that became final: whole UTF-8 characters, stop strings held back.
 * token is the id sampled last (-1 for text released at the end); probs is
 * non-NULL when the request asked for n_probs. */
typedef void (*hearth_gen_text_cb)(hearth_gen_req *req, const char *text, size_t n, int32_t token,
                                   const hearth_gen_probs *probs);
/* Called exactly once. status 0: finished as stats says. HEARTH_ENOTFOUND:
 * cancelled. Other negative: failed, msg says why. The scheduler does not
 * touch the request afterwards. */
typedef void (*hearth_gen_done_cb)(hearth_gen_req *req, int status, const char *msg, const hearth_gen_stats *stats);

struct hearth_gen_req {
    /* filled by the submitter, which owns the memory */
    const int32_t *prompt;        /* n_prompt >= 1 ids, special tokens included */
    int64_t n_prompt;
    hearth_sampler_params sampling;
    int32_t n_predict;            /* < 0: until an end id or the context is full */
    const char *const *stop;      /* borrowed until done */
    int n_stop;
    bool cache_prompt;            /* reuse a cached prefix (llama-server's cache_prompt; default true) */
    /* llama-server's id_slot: with pin_slot, the request runs in slot id_slot
     * (0..n_slots-1) and waits in the queue while that slot is busy; requests
     * behind it are admitted meanwhile. Without, the scheduler picks. */
    bool pin_slot;
    int id_slot;
    bool ignore_eos;              /* keep going past end ids (llama-server's ignore_eos; benchmarks) */
    int n_probs;                  /* 0..16 */
    bool post_sampling_probs;     /* n_probs after the sampler chain (llama-server's), not the raw softmax */
    /* Context shift (llama-server's --context-shift): when the sequence
     * fills the context, keep its first n_keep positions (the caller counts
     * a BOS in them), drop n_discard of the rest (0: half) and go on. Off: it
     * ends there with "length". */
    bool context_shift;
    int64_t n_keep;
    int64_t n_discard;
    /* Grammar-constrained sampling (llama-server's grammar / json_schema):
     * with grammar set, every token is one the grammar allows after the
     * text so far (an end id only once the text is a whole sentence); a
     * sampled token the grammar refuses is sampled again over the allowed
     * ones. Both are borrowed until done; token_texts covers the model's
     * vocabulary. When nothing is allowed the request ends as at an end id. */
    const hearth_grammar *grammar;
    const hearth_token_texts *token_texts;
    hearth_gen_text_cb on_text;
    hearth_gen_done_cb on_done;
    void *user;
    _Atomic int cancelled;        /* any thread: the sequence stops at the next step and its slot is freed */
    /* private to the scheduler */
    struct hearth_gen_req *link;
    uint64_t submitted_ns;
};

typedef struct hearth_gen_sched hearth_gen_sched;

/* decode_steps's default (`--decode-steps`): on an H100, 1.04B llama, a
 * step's host work between two passes was 32 us of 580 (stop 35). */
#define HEARTH_GEN_DECODE_STEPS 8

typedef struct hearth_gen_sched_config {
    int n_parallel;               /* live sequences at once (<= model n_slots) */
    int max_queue;                /* waiting requests; past it submit says HEARTH_ELIMIT (503) */
    int32_t n_batch;              /* tokens per forward pass (decode rows + prompt chunk), e.g. 512 */
    hearth_pool *pool;            /* draws a step's tokens in parallel (NULL: the scheduler thread
                                     alone); free then even when it runs the model's forward passes */
    bool warm_up;                 /* where the model's device records passes (its records): run the
                                     shapes of the steps to come before hearth_gen_sched_new returns */
    int decode_steps;             /* the longest run of greedy decode steps one call takes (the model's
                                     forward_steps, at most its steps_max); <= 1: a call a step */
} hearth_gen_sched_config;

typedef struct hearth_gen_sched_metrics {
    uint64_t prompt_tokens;       /* evaluated (not counting reused ones) */
    uint64_t prompt_tokens_cached;/* reused from a slot's cache */
    uint64_t gen_tokens;
    uint64_t requests_done, requests_cancelled, requests_failed;
    uint64_t prefix_hits;         /* requests that reused at least one cached position */
    uint64_t steps;
    int queued, live;
    int64_t kv_positions_used;    /* over all slots, idle caches included */
    int64_t kv_positions_total;
    /* histograms: seconds; buckets as hearth_gen_sched_hist_bounds, the last +Inf */
    uint64_t ttft_bucket[12], itl_bucket[12];
    double ttft_sum, itl_sum;
    uint64_t ttft_count, itl_count;
} hearth_gen_sched_metrics;

extern const double hearth_gen_sched_hist_bounds[12];

hearth_gen_sched *hearth_gen_sched_new(const hearth_gen_batch_model *m, const hearth_gen_sched_config *cfg, hearth_err *err);
/* Stops the thread; live and queued requests get on_done(HEARTH_ENOTFOUND). NULL is a no-op. */
void hearth_gen_sched_free(hearth_gen_sched *s);
/* Any thread. HEARTH_ELIMIT when the queue is full; HEARTH_EINVAL (err says
 * why) for a prompt longer than the context or bad parameters. The request
 * must stay valid until on_done. */
int hearth_gen_sched_submit(hearth_gen_sched *s, hearth_gen_req *req, hearth_err *err);
/* Submits reqs[0..n) at once, in order: all are queued, or none (the
 * errors of hearth_gen_sched_submit, HEARTH_ELIMIT when the n do not fit
 * the queue). Requests queued together are admitted in the same step when
 * slots allow, so `hearth run --bench --parallel` starts every sequence in
 * the first forward pass. */
int hearth_gen_sched_submit_all(hearth_gen_sched *s, hearth_gen_req *const *reqs, int n, hearth_err *err);
/* Wakes the scheduler so it notices a cancellation at once (any thread). */
void hearth_gen_sched_poke(hearth_gen_sched *s);
void hearth_gen_sched_get_metrics(hearth_gen_sched *s, hearth_gen_sched_metrics *out);

/* One slot as llama-server's GET /slots shows it, copied at one instant. */
typedef struct hearth_gen_slot_info {
    int id;
    bool processing;              /* a request holds it */
    bool used;                    /* a request has held it: the fields below are that request's */
    int64_t n_ctx;                /* positions it may hold */
    int64_t n_cached;             /* positions its cache holds now (kept for reuse when idle) */
    /* the live request's, or the last one's when idle (zero when never used): */
    hearth_sampler_params sampling;
    int32_t n_predict;
    int n_probs;
    bool cache_prompt;
    int64_t n_decoded;            /* tokens sampled */
    int32_t *prompt;              /* processing: an owned copy of its prompt ids (free()); else NULL */
    int64_t n_prompt;
    char *grammar;                /* an owned copy of its grammar's text (free()), or NULL for none */
} hearth_gen_slot_info;

/* Any thread: fills out[0..n) with the first n = min(max, n_slots) slots, in
 * id order, and returns n; HEARTH_ENOMEM when a copy fails (nothing to free
 * then). Free each entry's prompt and grammar. */
int hearth_gen_sched_slots(hearth_gen_sched *s, hearth_gen_slot_info *out, int max);
/* Slots of the KV cache (live and idle ones: ids 0..n-1). */
int hearth_gen_sched_n_slots(const hearth_gen_sched *s);

/* Work on one slot's cache run by the scheduler thread between steps, while
 * no request holds the slot (llama-server's slot save, restore, erase). */
typedef struct hearth_gen_slot_job hearth_gen_slot_job;
struct hearth_gen_slot_job {
    int slot;
    /* Scheduler thread. tokens[0..*n) are the ids the slot's cache holds
     * (room for cap); the job may rewrite them and set *n to what the cache
     * holds after it (it has truncated or filled the cache to match).
     * Returns 0, or a negative status with msg (msg_size bytes) saying why. */
    int (*run)(hearth_gen_slot_job *job, int32_t *tokens, int64_t *n, int64_t cap, char *msg, size_t msg_size);
    /* Called exactly once, on the scheduler thread: run's status and msg;
     * HEARTH_ELIMIT when a request held the slot (run was not called);
     * HEARTH_ENOTFOUND when the scheduler stopped first. */
    void (*on_done)(hearth_gen_slot_job *job, int status, const char *msg);
    void *user;
    hearth_gen_slot_job *link;    /* private to the scheduler */
};

/* Any thread: queues job (valid until on_done). HEARTH_EINVAL for a slot
 * out of range (err says so), HEARTH_ELIMIT when the scheduler stops. */
int hearth_gen_sched_slot_job(hearth_gen_sched *s, hearth_gen_slot_job *job, hearth_err *err);

#endif

/* run.h: what the parts of `hearth run` share (private to src/cli). */
#ifndef HEARTH_CLI_RUN_H
#define HEARTH_CLI_RUN_H

#include "base/clock.h"
#include "base/pool.h"
#include "engine/dev.h"
#include "engine/gen_sched.h"
#include "models/llama.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct run_opts {
    const char *model;
    const char *prompt;      /* text; in --bench mode the prompt length */
    int n_predict;           /* RUN_UNSET when not given */
    int threads;
    int ctx_size;
    int n_batch;
    int decode_steps;        /* greedy decode steps one call may run (engine/gen_sched.h's runs) */
    int reps;
    int parallel;            /* --bench: sequences decoded at once (0, 1: only tg) */
    bool bench;
    bool no_bos;
    const char *dump_logits;
    const char *tokens;
    hearth_dtype kv_type;    /* --cache-type: HEARTH_F16 or HEARTH_F32 */
    hearth_dev *dev;         /* --device: where the model runs (the CPU by default) */
} run_opts;

#define RUN_UNSET (-1000)

/* The scheduler's view of a llama model with its cache (run_sched.c). */
typedef struct run_model {
    hearth_llama *m;
    hearth_kv *kv;           /* n_slots sequences of n_ctx positions */
    hearth_pool *pool;
    bool from_start;         /* the text starts a text (prompt of BOS only): SPM drops the first space */
} run_model;

/* Fills *out: forward and truncate over rm's cache, end ids and the
 * streaming detokenizer from the model's vocabulary. rm is borrowed for the
 * scheduler's life. */
void run_model_table(run_model *rm, int n_slots, int64_t n_ctx, hearth_gen_batch_model *out);
/* A scheduler with every slot live at once and room to queue one request
 * per slot, drawing a step's tokens on pool (may be NULL); quietens the
 * scheduler's per-request info lines. NULL with err. */
hearth_gen_sched *run_sched_new(const hearth_gen_batch_model *m, const run_opts *o, hearth_pool *pool, hearth_err *err);

/* How one request ended (filled on the scheduler thread, read after the wait). */
typedef struct run_end {
    int status;              /* 0, HEARTH_ENOTFOUND (cancelled) or an error */
    bool have_stats;
    hearth_gen_stats stats;
    char msg[256];
    uint64_t done_ns;        /* hearth_now_ns() at the end */
    void *waiter;            /* private */
} run_end;

/* Submits reqs[0..n) together (their user and on_done are taken over; set
 * on_text) and blocks until every one has ended. 0 with ends[i] filled, or
 * the submit error (nothing ran). */
int run_sched_wait(hearth_gen_sched *s, hearth_gen_req *const *reqs, run_end *ends, int n, hearth_err *err);

/* `hearth run --bench`: the llama-bench style table on stdout. Exit status. */
int run_bench(const run_opts *o, hearth_llama *m, hearth_pool *pool);

/* `hearth run --dump-logits OUT --tokens LIST`: float32 logits of every
 * position, row-major [n_tokens][n_vocab], little-endian. Exit status. */
int run_dump_logits(const run_opts *o, hearth_llama *m, hearth_pool *pool);

#endif

/* run.h: what the parts of `hearth run` share (private to src/cli). */
#ifndef HEARTH_CLI_RUN_H
#define HEARTH_CLI_RUN_H

#include "base/pool.h"
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
    int reps;
    int parallel;            /* --bench: sequences decoded at once (0, 1: only tg) */
    bool bench;
    bool no_bos;
    const char *dump_logits;
    const char *tokens;
    hearth_dtype kv_type;    /* --cache-type: HEARTH_F16 or HEARTH_F32 */
} run_opts;

#define RUN_UNSET (-1000)

/* `hearth run --bench`: the llama-bench style table on stdout. Exit status. */
int run_bench(const run_opts *o, hearth_llama *m, hearth_pool *pool);

/* `hearth run --dump-logits OUT --tokens LIST`: float32 logits of every
 * position, row-major [n_tokens][n_vocab], little-endian. Exit status. */
int run_dump_logits(const run_opts *o, hearth_llama *m, hearth_pool *pool);

#endif

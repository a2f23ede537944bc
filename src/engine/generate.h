/* generate.h: single-sequence text generation, independent of any front end.
 *
 *   prompt ids -> prefill in chunks of n_batch -> loop { sample, detokenize,
 *   check stop strings, hand final text to a callback, decode one token }
 *
 * The model is reached through hearth_gen_model, a table of function
 * pointers with a context pointer, not through models/llama.h: the engine
 * sits below models in the dependency order (engine depends on base only, so
 * the kernels and the sampler can be tested and reused without a model
 * format), and the same loop then drives a llama model from `hearth run`, a
 * fake model in the unit tests, and, piece by piece, the server's scheduler.
 * The caller (src/cli/run.c) fills the table from a hearth_llama and its
 * tokenizer.
 *
 * The stop-string matcher and the finish reasons are in genstop.h. */
#ifndef HEARTH_ENGINE_GENERATE_H
#define HEARTH_ENGINE_GENERATE_H

#include "base/buf.h"
#include "base/err.h"
#include "engine/genstop.h"
#include "engine/sampler.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One sequence of a model. All callbacks receive ctx. */
typedef struct hearth_gen_model {
    void *ctx;
    int32_t n_vocab;
    int64_t n_ctx;                              /* positions the sequence may hold */
    int32_t end_ids[HEARTH_GEN_MAX_END_IDS];    /* sampling one of these ends generation */
    int n_end_ids;
    /* Appends tokens[0..n) to the sequence (positions continue from its
     * length) and writes the logits of the last one, n_vocab floats, to
     * logits. Returns 0 or a negative status with err set. */
    int (*forward)(void *ctx, const int32_t *tokens, int32_t n, float *logits, hearth_err *err);
    /* Appends the text of token id to out, as a streaming detokenizer does
     * (state such as a held partial character lives in ctx). Output that
     * ends inside a UTF-8 character is tolerated: the loop holds such bytes
     * back itself. Returns 0 or a negative status. */
    int (*detok)(void *ctx, int32_t id, hearth_buf *out);
    /* Ends the text stream (may append a replacement for held bytes); may be NULL. */
    int (*detok_flush)(void *ctx, hearth_buf *out);
} hearth_gen_model;

/* ---- the loop ---- */

/* Receives each piece of final text (whole UTF-8 characters), in order.
 * Returns 0 to go on, non-zero to cancel the generation. */
typedef int (*hearth_gen_text_fn)(void *user, const char *text, size_t n);

typedef struct hearth_gen_params {
    int32_t n_predict;          /* most tokens to generate; < 0: until an end or the context is full */
    int32_t n_batch;            /* prefill chunk in tokens; <= 0: 512 */
    const char *const *stop;    /* borrowed */
    int n_stop;
} hearth_gen_params;

typedef struct hearth_gen_result {
    enum hearth_gen_finish finish;
    int stop_index;             /* which stop string matched, or -1 */
    int64_t n_prompt;           /* prompt tokens evaluated */
    int64_t n_gen;              /* tokens sampled, an end id included */
    double prompt_ms;           /* the prefill */
    double gen_ms;              /* from the end of the prefill to the end */
} hearth_gen_result;

/* Runs the prompt prompt[0..n_prompt) (n_prompt >= 1) through m, then
 * samples with s (borrowed; the prompt ids are accepted into its penalty
 * history first) until an end id, a stop string, n_predict tokens or a full
 * context, handing the text to on_text. The sequence must be empty: the
 * prompt starts at position 0.
 * Returns 0 with *res filled (also for an empty result), or:
 * HEARTH_ELIMIT when the prompt is longer than m->n_ctx (err names both
 * lengths); HEARTH_EINVAL for an empty prompt, bad stop strings or a model
 * table with missing functions; HEARTH_ENOMEM; or the model's own error
 * (res then holds what was done). */
int hearth_generate(const hearth_gen_model *m, hearth_sampler *s, const int32_t *prompt, int64_t n_prompt,
                    const hearth_gen_params *p, hearth_gen_text_fn on_text, void *user, hearth_gen_result *res,
                    hearth_err *err);

#endif

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
 * The stop-string matcher (hearth_stopper) is public on its own because the
 * server streams text the same way but runs the decode steps itself. */
#ifndef HEARTH_ENGINE_GENERATE_H
#define HEARTH_ENGINE_GENERATE_H

#include "base/buf.h"
#include "base/err.h"
#include "engine/sampler.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most ids that end generation (EOS, EOT, ...). */
#define HEARTH_GEN_MAX_END_IDS 8
/* Most stop strings, and the longest one in bytes. */
#define HEARTH_GEN_MAX_STOP 16
#define HEARTH_GEN_MAX_STOP_LEN 256

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

/* ---- stop strings ---- */

/* Holds back the text that could still turn into a stop string, so a
 * partial stop string is never emitted and a complete one never is: text is
 * final once no stop string can begin inside it. Also holds back a trailing
 * incomplete UTF-8 character, so every piece it releases is whole
 * characters. */
typedef struct hearth_stopper {
    const char *stop[HEARTH_GEN_MAX_STOP]; /* borrowed, NUL-terminated, non-empty */
    size_t stop_len[HEARTH_GEN_MAX_STOP];
    int n_stop;
    int matched;                            /* index of the stop string found, or -1 */
    hearth_buf pending;                     /* text not yet released */
} hearth_stopper;

/* stop[0..n_stop) are borrowed for the stopper's life. HEARTH_EINVAL: more
 * than HEARTH_GEN_MAX_STOP strings, an empty one or one longer than
 * HEARTH_GEN_MAX_STOP_LEN (err names it). Nothing to deinit on failure. */
int hearth_stopper_init(hearth_stopper *s, const char *const *stop, int n_stop, hearth_err *err);
void hearth_stopper_deinit(hearth_stopper *s);
/* Adds text[0..n) and appends to out the text that became final. Returns 1
 * when a stop string is now complete (out then received the text before it;
 * the stop string and anything after it are dropped, and later pushes are
 * ignored), 0 otherwise, or HEARTH_ELIMIT / HEARTH_ENOMEM from out. */
int hearth_stopper_push(hearth_stopper *s, const char *text, size_t n, hearth_buf *out);
/* End of the stream: appends the held text (nothing after a match). A
 * trailing incomplete character becomes U+FFFD. */
int hearth_stopper_finish(hearth_stopper *s, hearth_buf *out);

/* ---- the loop ---- */

enum hearth_gen_finish {
    HEARTH_GEN_NONE = 0,
    HEARTH_GEN_EOS,       /* an end id was sampled (it is not emitted) */
    HEARTH_GEN_STOP,      /* a stop string matched (it is not emitted) */
    HEARTH_GEN_LENGTH,    /* n_predict tokens, or the context is full */
    HEARTH_GEN_CANCELLED, /* the text callback asked to stop */
};
/* "stop" for EOS and stop strings, "length", "cancelled" (OpenAI's finish_reason words). */
const char *hearth_gen_finish_name(enum hearth_gen_finish f);

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

/* genstop.h: what ends a generation, and the stop-string matcher.
 *
 * The scheduler (gen_sched.h) streams text a token at a time and ends a
 * sequence on an end id, a stop string, a length limit or a cancellation;
 * the words for those ends and the hold-back that keeps a stop string from
 * ever being emitted live here, on their own, so a front end (the HTTP API,
 * `hearth run`) can name a finish reason or size its stop-string table
 * without the scheduler, and the stopper can be tested without a model. */
#ifndef HEARTH_ENGINE_GENSTOP_H
#define HEARTH_ENGINE_GENSTOP_H

#include "base/buf.h"
#include "base/err.h"

#include <stddef.h>

/* Most ids that end generation (EOS, EOT, ...). */
#define HEARTH_GEN_MAX_END_IDS 8
/* Most stop strings, and the longest one in bytes. */
#define HEARTH_GEN_MAX_STOP 16
#define HEARTH_GEN_MAX_STOP_LEN 256

enum hearth_gen_finish {
    HEARTH_GEN_NONE = 0,
    HEARTH_GEN_EOS,       /* an end id was sampled (it is not emitted) */
    HEARTH_GEN_STOP,      /* a stop string matched (it is not emitted) */
    HEARTH_GEN_LENGTH,    /* n_predict tokens, or the context is full */
    HEARTH_GEN_CANCELLED, /* the client asked to stop */
};
/* "stop" for EOS and stop strings, "length", "cancelled" (OpenAI's finish_reason words). */
const char *hearth_gen_finish_name(enum hearth_gen_finish f);

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

#endif

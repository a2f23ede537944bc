/* sampler.h: picks the next token from a logits vector, as llama-server does.
 *
 * The chain is llama.cpp's default order: penalties (repeat, presence,
 * frequency) over the last repeat_last_n accepted tokens, then top_k, top_p,
 * min_p (each on the temperature-1 distribution of what is left), then
 * temperature, then one draw from the sampler's own generator. top_p and
 * min_p are measured before temperature, so temperature only reshapes the
 * survivors, exactly as in llama.cpp.
 *
 * The generator is llama.cpp's: std::mt19937 seeded with the low 32 bits of
 * the seed, drawn as libstdc++'s std::discrete_distribution draws (two
 * outputs a draw; none when one candidate is left), over probabilities
 * computed in llama.cpp's float arithmetic, so a seed gives llama-server's
 * tokens from the same logits. Each sampler owns its state and nothing is
 * global, so sequences batched together sample exactly as they would alone,
 * and the same seed, parameters, accepted tokens and logits give the same
 * tokens on every IEEE-754 machine with the same libm expf().
 *
 * A sampler is used by one thread at a time (it keeps scratch between calls). */
#ifndef HEARTH_ENGINE_SAMPLER_H
#define HEARTH_ENGINE_SAMPLER_H

#include "base/err.h"

#include <stdbool.h>
#include <stdint.h>

/* Largest repeat_last_n accepted (tokens of history kept for penalties). */
#define HEARTH_SAMPLER_MAX_LAST_N (1 << 20)
/* seed value meaning "draw a seed from the OS" (llama-server's -1). */
#define HEARTH_SAMPLER_SEED_RANDOM UINT64_MAX

typedef struct hearth_sampler_params {
    float temperature;       /* <= 0: greedy (argmax of the penalized logits) */
    int top_k;               /* <= 0 or >= n_vocab: off */
    float top_p;             /* >= 1: off; 0 keeps the single most likely token */
    float min_p;             /* <= 0: off; keep p >= min_p * p_max; at most 1 */
    float repeat_penalty;    /* 1: off; > 0: positive logits divided by it, negative multiplied */
    int repeat_last_n;       /* history window for all penalties; 0: off. The caller maps
                                llama-server's -1 (the context size) to a number. */
    float presence_penalty;  /* 0: off; subtracted once from every token in the window */
    float frequency_penalty; /* 0: off; subtracted once per occurrence in the window */
    uint64_t seed;           /* HEARTH_SAMPLER_SEED_RANDOM: from the OS (32 bits); only the low 32 bits are used */
} hearth_sampler_params;

/* llama-server's defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * repeat_penalty 1.0, repeat_last_n 64, presence/frequency 0, random seed. */
void hearth_sampler_params_default(hearth_sampler_params *p);

typedef struct hearth_sampler hearth_sampler;

/* A sampler for vocabularies of n_vocab tokens, with a copy of p. NULL on
 * failure, with err saying why: HEARTH_EINVAL for a NaN or infinite float,
 * top_p < 0, min_p > 1, repeat_penalty <= 0, repeat_last_n < 0 or above
 * HEARTH_SAMPLER_MAX_LAST_N, n_vocab < 1; HEARTH_ENOMEM. */
hearth_sampler *hearth_sampler_new(const hearth_sampler_params *p, int32_t n_vocab, hearth_err *err);
/* NULL is a no-op. */
void hearth_sampler_free(hearth_sampler *s);

/* The seed in use: p->seed, or the one drawn from the OS (for llama-server's
 * "seed" in generation_settings, so a run can be repeated). */
uint64_t hearth_sampler_seed(const hearth_sampler *s);

/* Adds token to the penalty history (prompt tokens too, as llama-server does).
 * Ids outside [0, n_vocab) are ignored. */
void hearth_sampler_accept(hearth_sampler *s, int32_t token);
/* Forgets the history; the generator state is kept. */
void hearth_sampler_reset_history(hearth_sampler *s);

/* The next token for logits[0..n_vocab) (borrowed, not modified). NaN logits
 * count as -inf, +inf as the largest float. Does not accept the token: call
 * hearth_sampler_accept with it when it is kept. Ties in greedy mode and in
 * the candidate order go to the lowest id. */
int32_t hearth_sampler_sample(hearth_sampler *s, const float *logits);

/* Whether hearth_sampler_sample would return hearth_logits_argmax of the
 * logits, with nothing else to keep (greedy, no penalties): such a draw may
 * be made where the logits are (a GPU's argmax_rows) and the token given
 * to hearth_sampler_accept as usual. */
bool hearth_sampler_is_plain_argmax(const hearth_sampler *s);

/* The greedy draw over x[0..n): the index of the largest value, NaN
 * counting as -inf and +inf as the largest float, the lowest index of
 * equals (0 when n <= 0). */
int32_t hearth_logits_argmax(const float *x, int32_t n);

/* The same with every token whose allowed[id] is 0 taken out first (its
 * logit -inf before the penalties, as llama.cpp's grammar sampler sets it):
 * a constrained sample. allowed has n_vocab entries (borrowed). The
 * generator draws as for an unmasked sample, so a constrained request that
 * samples, is refused and samples again masked (llama.cpp's order) draws
 * twice, as llama-server does. -1 when no token is allowed. */
int32_t hearth_sampler_sample_masked(hearth_sampler *s, const float *logits, const uint8_t *allowed);

/* The n most likely tokens of the last sample's final distribution, most
 * likely first, into ids[] and probs[]; returns how many were written (fewer
 * than n when fewer tokens survived the filters, 0 before any sample).
 * After a greedy sample the distribution is the softmax of the penalized
 * logits at temperature 1, which is what llama-server reports for n_probs. */
int hearth_sampler_top_probs(hearth_sampler *s, int n, int32_t *ids, float *probs);
/* The same after the whole chain (llama-server's post_sampling_probs): a
 * greedy sample's distribution is one-hot, so the n best by logit come with
 * 1 for the chosen and 0 for the rest; a drawn sample's are its surviving
 * candidates (fewer than n when the filters kept fewer). */
int hearth_sampler_top_probs_post(hearth_sampler *s, int n, int32_t *ids, float *probs);
/* The probability of id after the whole chain in the last sample (0 when it
 * did not survive the filters; -1 before any sample). */
float hearth_sampler_post_prob(const hearth_sampler *s, int32_t id);

#endif

/* pass_fit.h: a forward pass's cost as c0 + c1 * tokens, fitted to recent
 * passes, for the embedding scheduler's restart decisions (embed_queue.c).
 *
 * Least squares over the passes seen, each one's weight decaying by
 * HEARTH_PASS_FIT_DECAY per later pass (about the last 64 count), so the fit
 * follows a machine whose speed drifts. */
#ifndef HEARTH_ENGINE_PASS_FIT_H
#define HEARTH_ENGINE_PASS_FIT_H

#define HEARTH_PASS_FIT_DECAY (1.0 - 1.0 / 64)

typedef struct hearth_pass_fit {
    double w, sx, sy, sxx, sxy; /* decayed sums of 1, x, y, x^2, xy */
} hearth_pass_fit;            /* zeroed: no passes */

void hearth_pass_fit_add(hearth_pass_fit *f, double tokens, double ns);
/* c0, the fixed cost of a pass in ns, or 0 when the fit cannot tell: fewer
 * than 8 passes' weight, sizes varying by less than 10% of their mean (the
 * intercept would be an extrapolation of noise), or a slope or intercept that
 * is not positive. */
double hearth_pass_fit_c0(const hearth_pass_fit *f);

#endif

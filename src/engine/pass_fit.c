/* pass_fit.c: see pass_fit.h. */
#include "pass_fit.h"

#define MIN_PASSES 8.0
#define MIN_SPREAD 0.1

void hearth_pass_fit_add(hearth_pass_fit *f, double tokens, double ns)
{
    const double d = HEARTH_PASS_FIT_DECAY;
    f->w = f->w * d + 1;
    f->sx = f->sx * d + tokens;
    f->sy = f->sy * d + ns;
    f->sxx = f->sxx * d + tokens * tokens;
    f->sxy = f->sxy * d + tokens * ns;
}

double hearth_pass_fit_c0(const hearth_pass_fit *f)
{
    if (f->w < MIN_PASSES)
        return 0;
    double mx = f->sx / f->w, my = f->sy / f->w;
    double var = f->sxx / f->w - mx * mx, cov = f->sxy / f->w - mx * my;
    if (var <= 0 || var < (MIN_SPREAD * mx) * (MIN_SPREAD * mx))
        return 0;
    double c1 = cov / var, c0 = my - c1 * mx;
    return c1 > 0 && c0 > 0 ? c0 : 0;
}

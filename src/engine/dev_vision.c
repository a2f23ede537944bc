/* dev_vision.c: what every device's conv-net ops share: the conv's
 * geometry, checked once at load so no kernel meets a shape it cannot take
 * (the output size formula is ONNX Conv's, with explicit pads). */
#include "engine/dev_vision.h"

int hearth_conv_desc_finish(hearth_conv_desc *d, hearth_err *err)
{
    const char *name = d->name ? d->name : "conv";
    struct { const char *field; int64_t v, min; } chk[] = {
        {"n", d->n, 1}, {"c_in", d->c_in, 1}, {"h", d->h, 1}, {"w", d->w, 1},
        {"c_out", d->c_out, 1}, {"kh", d->kh, 1}, {"kw", d->kw, 1},
        {"stride_h", d->stride_h, 1}, {"stride_w", d->stride_w, 1},
        {"dil_h", d->dil_h, 1}, {"dil_w", d->dil_w, 1}, {"groups", d->groups, 1},
        {"pad_t", d->pad_t, 0}, {"pad_l", d->pad_l, 0}, {"pad_b", d->pad_b, 0}, {"pad_r", d->pad_r, 0},
    };
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++)
        if (chk[i].v < chk[i].min)
            return hearth_err_set(err, HEARTH_EINVAL, "conv '%s': %s = %lld, must be >= %lld", name, chk[i].field,
                                  (long long)chk[i].v, (long long)chk[i].min);
    if (d->c_in % d->groups || d->c_out % d->groups)
        return hearth_err_set(err, HEARTH_EINVAL, "conv '%s': %lld groups do not divide %lld input and %lld output channels",
                              name, (long long)d->groups, (long long)d->c_in, (long long)d->c_out);
    /* out = floor((in + pads - dil * (k - 1) - 1) / stride) + 1 */
    int64_t eh = d->h + d->pad_t + d->pad_b - d->dil_h * (d->kh - 1) - 1;
    int64_t ew = d->w + d->pad_l + d->pad_r - d->dil_w * (d->kw - 1) - 1;
    if (eh < 0 || ew < 0)
        return hearth_err_set(err, HEARTH_EINVAL, "conv '%s': a %lldx%lld kernel (dilation %lld, %lld) does not fit a "
                              "%lldx%lld input with its pads", name, (long long)d->kh, (long long)d->kw,
                              (long long)d->dil_h, (long long)d->dil_w, (long long)d->h, (long long)d->w);
    d->h_out = eh / d->stride_h + 1;
    d->w_out = ew / d->stride_w + 1;
    if (d->act != HEARTH_ACT_NONE && d->act != HEARTH_ACT_RELU && d->act != HEARTH_ACT_CLIP &&
        d->act != HEARTH_ACT_SIGMOID && d->act != HEARTH_ACT_LEAKY_RELU)
        return hearth_err_set(err, HEARTH_EINVAL, "conv '%s': activation %d unknown", name, (int)d->act);
    return 0;
}

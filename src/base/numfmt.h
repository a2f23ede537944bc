/* numfmt.h: floats as JSON number text, fast.
 *
 * Embedding responses are hundreds of floats per sentence, and printf's
 * "%.9g" (glibc formats through multi-precision arithmetic) took ~3% of the
 * CPU of a served MiniLM at one sentence per request, on the thread that
 * runs the next batch. */
#ifndef HEARTH_BASE_NUMFMT_H
#define HEARTH_BASE_NUMFMT_H

/* Longest text hearth_fmt_f32 writes, without the NUL: "-1.23456789e-38". */
#define HEARTH_FMT_F32_MAX 15

/* Writes v as printf's "%.9g" would (9 significant digits, the shorter of
 * fixed and exponent form, trailing zeros dropped: enough digits for any
 * float to read back as itself), NUL-terminated; returns the length. Differs
 * from glibc only where v * 10^k lands within ~1e-16 of a rounding tie and
 * double rounding picks the other neighbour (the text still reads back as
 * v). Not-finite values are written as "0": JSON has no NaN or Infinity. */
int hearth_fmt_f32(char out[HEARTH_FMT_F32_MAX + 1], float v);

#endif

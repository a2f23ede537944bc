/* numfmt.c: see numfmt.h.
 *
 * How: the decimal exponent e from log10, then |v| scaled by 10^(8-e) in
 * double and rounded half-to-even to a 9-digit integer (e corrected by one
 * when log10 or the rounding lands on the next decade). A float has 24
 * significant bits, so for 0 <= 8-e <= 22 (10^k exact in double) the product
 * is exact whenever it is a tie, and rounds as glibc does; elsewhere it is
 * within an ulp of the exact value. An off-by-one in the 9th digit would still
 * read back as v: 9 digits are spaced at most 1e-8 apart relative to v,
 * half a float ulp is more than 2.9e-8. The digits are then laid out as %g
 * does: exponent form when e < -4 or e >= 9.
 *
 * Rejected: a shortest-digits algorithm (Ryu, Grisu): more code and tables
 * for ~2 fewer characters per number; clients parse either. */
#include "numfmt.h"

#include <math.h>
#include <stdint.h>

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* d * 10^k, with one rounding where 10^|k| is exact in double. */
static double scale10(double d, int k)
{
    while (k > 22) {
        d *= 1e22;
        k -= 22;
    }
    while (k < -22) {
        d /= 1e22;
        k += 22;
    }
    return k >= 0 ? d * pow10_exact[k] : d / pow10_exact[-k];
}

int hearth_fmt_f32(char out[HEARTH_FMT_F32_MAX + 1], float v)
{
    char *p = out;
    if (!isfinite(v) || v == 0) {
        if (signbit(v) && v == 0)
            *p++ = '-';
        *p++ = '0';
        *p = 0;
        return (int)(p - out);
    }
    if (v < 0)
        *p++ = '-';
    double d = fabs((double)v);
    int e = (int)floor(log10(d));
    uint64_t n = 0;
    for (int tries = 0; tries < 3; tries++) {
        n = (uint64_t)nearbyint(scale10(d, 8 - e));
        if (n >= 1000000000u)
            e++;
        else if (n < 100000000u)
            e--;
        else
            break;
    }
    char dig[9];
    for (int i = 8; i >= 0; i--) {
        dig[i] = (char)('0' + n % 10);
        n /= 10;
    }
    int nd = 9;
    while (nd > 1 && dig[nd - 1] == '0')
        nd--;
    if (e < -4 || e >= 9) {
        *p++ = dig[0];
        if (nd > 1) {
            *p++ = '.';
            for (int i = 1; i < nd; i++)
                *p++ = dig[i];
        }
        *p++ = 'e';
        *p++ = e < 0 ? '-' : '+';
        int a = e < 0 ? -e : e;
        *p++ = (char)('0' + a / 10);
        *p++ = (char)('0' + a % 10);
    } else if (e >= 0) {
        for (int i = 0; i <= e; i++)
            *p++ = i < nd ? dig[i] : '0';
        if (nd > e + 1) {
            *p++ = '.';
            for (int i = e + 1; i < nd; i++)
                *p++ = dig[i];
        }
    } else {
        *p++ = '0';
        *p++ = '.';
        for (int i = -1; i > e; i--)
            *p++ = '0';
        for (int i = 0; i < nd; i++)
            *p++ = dig[i];
    }
    *p = 0;
    return (int)(p - out);
}

/* tok_utf8.h: private to the tokenizers (bpe.c, detok.c): strict UTF-8
 * scanning, one sequence at a time.
 *
 * Strict means what PCRE2's UTF mode and every JSON encoder require: no
 * overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629). */
#ifndef HEARTH_TEXT_TOK_UTF8_H
#define HEARTH_TEXT_TOK_UTF8_H

#include <stddef.h>
#include <stdint.h>

enum { UTF8_INVALID = 0, UTF8_VALID = 1, UTF8_INCOMPLETE = 2 };

/* Looks at s[0..n), n >= 1. VALID: *len is the sequence's length.
 * INVALID: *len is the maximal subpart to replace by one U+FFFD (>= 1).
 * INCOMPLETE: all n bytes are a valid start of a longer sequence. */
static inline int utf8_scan(const uint8_t *s, size_t n, size_t *len)
{
    uint8_t c = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c < 0x80) {
        *len = 1;
        return UTF8_VALID;
    } else if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        *len = 1;
        return UTF8_INVALID;
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= n) {
            *len = n;
            return UTF8_INCOMPLETE;
        }
        uint8_t b = s[i];
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xbf)) {
            *len = i;
            return UTF8_INVALID;
        }
    }
    *len = need;
    return UTF8_VALID;
}

#endif

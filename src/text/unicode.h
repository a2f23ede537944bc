/* unicode.h: UTF-8 decoding and the character classes the tokenizers need.
 *
 * Code points are int32_t. The classes follow Hugging Face's BERT tokenizers
 * (transformers' BasicTokenizer and tokenizers' BertNormalizer /
 * BertPreTokenizer), with the Unicode tables of libutf8proc. Every function is
 * pure and thread-safe. */
#ifndef HEARTH_TEXT_UNICODE_H
#define HEARTH_TEXT_UNICODE_H

#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes the code point at s[*i] (i < n) and advances *i past it. Strict
 * UTF-8: overlong forms, surrogates, values past U+10FFFF and truncated
 * sequences are invalid; then returns -1 and leaves *i unchanged. */
int32_t hearth_utf8_decode(const char *s, size_t n, size_t *i);

/* HEARTH_OK when s[0..n) is valid UTF-8; else HEARTH_EINVAL with a message
 * naming the byte offset of the first bad sequence ("utf-8: invalid byte 0xff
 * at offset 12"). */
int hearth_utf8_validate(const char *s, size_t n, hearth_err *err);

/* Writes cp as UTF-8 into out and returns its length (1..4), or 0 when cp is
 * not a Unicode scalar value (a surrogate, negative, or past U+10FFFF). */
size_t hearth_utf8_encode(int32_t cp, char out[4]);

/* Unicode's White_Space property (Rust's char::is_whitespace, which
 * tokenizers' BertPreTokenizer splits on): \t \n \v \f \r, U+0085, every Zs,
 * U+2028 and U+2029. After control characters are cleaned away this is the
 * same set as transformers' ' ', \t, \n, \r or Zs followed by str.split(). */
bool hearth_uc_is_whitespace(int32_t cp);

/* HF's control test: general category C* (Cc, Cf, Cs, Co, Cn), except \t \n \r,
 * which BERT treats as whitespace. */
bool hearth_uc_is_control(int32_t cp);

/* HF's punctuation test: ASCII 33-47, 58-64, 91-96, 123-126 (so $ + < = > ^ `
 * | ~ count though Unicode calls them symbols), or any P* category. */
bool hearth_uc_is_punct(int32_t cp);

/* HF's "Chinese character" blocks: CJK Unified Ideographs and its extensions
 * A-E, and the two compatibility ideograph blocks. */
bool hearth_uc_is_cjk(int32_t cp);

/* General category Mn (what BERT's strip-accents drops after NFD). */
bool hearth_uc_is_nonspacing_mark(int32_t cp);

/* Lowercases cp as Python's str.lower does for one code point (full case
 * mapping, without the context-dependent final sigma): writes 1 or 2 code
 * points into out and returns the count. U+0130 is the only code point whose
 * lowercase is two (i + U+0307). */
int hearth_uc_lower(int32_t cp, int32_t out[2]);

/* Canonical decomposition (NFD) of one code point, recursively, Hangul
 * syllables included. Writes at most cap code points and returns how many
 * the full decomposition has (at most HEARTH_UC_NFD_MAX for valid input);
 * a negative status for a bad code point. */
#define HEARTH_UC_NFD_MAX 4
int hearth_uc_nfd(int32_t cp, int32_t *out, int cap);

/* Canonical ordering (the reordering step of NFD): stable-sorts each run of
 * code points with a non-zero combining class by that class, in place. */
void hearth_uc_reorder(int32_t *cps, size_t n);

#endif

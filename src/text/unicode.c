/* unicode.c: strict UTF-8 decoding and BERT's character classes.
 *
 * The decoder is hand-written (a few lines, and it must name the offset of
 * the first bad byte, which utf8proc_iterate cannot). Categories, case
 * mapping, combining classes and canonical decompositions come from
 * libutf8proc's tables. Rejected: utf8proc_map/utf8proc_decompose on whole
 * strings, because they allocate or need a buffer sized for the whole text,
 * while the tokenizers normalise one word at a time in bounded memory; and
 * UTF8PROC_STRIPMARK, which drops Mc and Me too where BERT drops only Mn. */
#include "text/unicode.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

int32_t hearth_utf8_decode(const char *s, size_t n, size_t *i)
{
    const uint8_t *p = (const uint8_t *)s + *i;
    size_t left = n - *i;
    uint32_t c = p[0];
    size_t len;
    uint32_t min;
    if (c < 0x80) {
        *i += 1;
        return (int32_t)c;
    } else if (c >= 0xC2 && c <= 0xDF) {
        len = 2, min = 0x80, c &= 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, min = 0x800, c &= 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, min = 0x10000, c &= 0x07;
    } else {
        return -1; /* a continuation byte, C0/C1 (always overlong) or F5..FF */
    }
    if (left < len)
        return -1;
    for (size_t k = 1; k < len; k++) {
        if ((p[k] & 0xC0) != 0x80)
            return -1;
        c = (c << 6) | (p[k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return -1;
    *i += len;
    return (int32_t)c;
}

int hearth_utf8_validate(const char *s, size_t n, hearth_err *err)
{
    size_t i = 0;
    while (i < n) {
        if (hearth_utf8_decode(s, n, &i) < 0)
            return hearth_err_set(err, HEARTH_EINVAL, "utf-8: invalid byte 0x%02x at offset %zu",
                                  (unsigned)(uint8_t)s[i], i);
    }
    return HEARTH_OK;
}

size_t hearth_utf8_encode(int32_t cp, char out[4])
{
    uint32_t c = (uint32_t)cp;
    if (cp < 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return 0;
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xC0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xE0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        out[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    out[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

bool hearth_uc_is_whitespace(int32_t cp)
{
    if ((cp >= '\t' && cp <= '\r') || cp == ' ' || cp == 0x85)
        return true;
    if (cp < 0x80)
        return false;
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

bool hearth_uc_is_control(int32_t cp)
{
    if (cp == '\t' || cp == '\n' || cp == '\r')
        return false;
    if (cp >= 0x20 && cp < 0x7F)
        return false;
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat == UTF8PROC_CATEGORY_CN || cat >= UTF8PROC_CATEGORY_CC;
}

bool hearth_uc_is_punct(int32_t cp)
{
    if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126))
        return true;
    if (cp < 0x80)
        return false;
    utf8proc_category_t cat = utf8proc_category(cp);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

bool hearth_uc_is_cjk(int32_t cp)
{
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool hearth_uc_is_nonspacing_mark(int32_t cp)
{
    return cp >= 0x300 && utf8proc_category(cp) == UTF8PROC_CATEGORY_MN;
}

int hearth_uc_lower(int32_t cp, int32_t out[2])
{
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    /* SpecialCasing.txt's one unconditional lowercase expansion; utf8proc
     * has only the simple (one code point) mapping, which drops the dot. */
    if (cp == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    out[0] = utf8proc_tolower(cp);
    return 1;
}

int hearth_uc_nfd(int32_t cp, int32_t *out, int cap)
{
    if (cp < 0xC0) { /* nothing below U+00C0 decomposes canonically */
        if (cap > 0)
            out[0] = cp;
        return 1;
    }
    int boundclass = 0;
    utf8proc_ssize_t r = utf8proc_decompose_char(cp, out, cap, UTF8PROC_DECOMPOSE, &boundclass);
    if (r < 0)
        return HEARTH_EINVAL;
    return (int)r;
}

static int ccc(int32_t cp)
{
    return cp < 0x300 ? 0 : utf8proc_get_property(cp)->combining_class;
}

/* Insertion sort of one run of non-starters: moving a code point left only
 * past code points of a strictly greater class keeps it stable. */
static void reorder_short(int32_t *cps, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        int32_t c = cps[i];
        int cc = ccc(c);
        size_t j = i;
        while (j > 0 && ccc(cps[j - 1]) > cc) {
            cps[j] = cps[j - 1];
            j--;
        }
        cps[j] = c;
    }
}

/* A long run by counting sort on the class (1..254): stable and linear. An
 * insertion sort is quadratic, and a word may buffer up to a million marks
 * (they do not count toward max_input_chars_per_word): 2 MB of alternating
 * classes in one request would have cost ~1e11 steps. */
static void reorder_long(int32_t *cps, size_t n)
{
    int32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        reorder_short(cps, n); /* slow but correct */
        return;
    }
    size_t at[257] = {0};
    for (size_t i = 0; i < n; i++)
        at[ccc(cps[i]) + 1]++;
    for (int c = 1; c < 257; c++)
        at[c] += at[c - 1];
    for (size_t i = 0; i < n; i++)
        tmp[at[ccc(cps[i])]++] = cps[i];
    memcpy(cps, tmp, n * sizeof *tmp);
    free(tmp);
}

void hearth_uc_reorder(int32_t *cps, size_t n)
{
    /* class-0 code points (starters) never move, so each run of
     * non-starters between them is sorted on its own */
    size_t i = 0;
    while (i < n) {
        if (ccc(cps[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < n && ccc(cps[j]) != 0)
            j++;
        if (j - i <= 32)
            reorder_short(cps + i, j - i);
        else
            reorder_long(cps + i, j - i);
        i = j;
    }
}

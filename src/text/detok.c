/* detok.c: from token ids back to text: one token's bytes (its "piece"), and
 * a streaming decoder that only ever emits whole UTF-8 characters.
 *
 * Pieces follow llama.cpp's token_to_piece: SPM texts turn U+2581 into ' ',
 * BPE texts are mapped back through GPT-2's byte-to-unicode table, <0xNN>
 * tokens give one byte, control and unknown tokens give nothing unless asked.
 * A byte-level token may hold part of a character (an emoji is often four
 * byte tokens), so the streamer keeps the incomplete tail of a character
 * until a later token completes it, and turns malformed bytes into U+FFFD so
 * what reaches a client (JSON, SSE) is always valid UTF-8.
 *
 * Not done: llama.cpp's clean_spaces post-pass of llama_detokenize (" ." ->
 * "."), which it applies to whole texts for some BPE vocabularies: it is
 * lossy, its own server streams token_to_piece without it, and round trips
 * must be exact.
 * Rejected: a per-token piece cache built at init (llama.cpp keeps one): the
 * conversion is a short loop over a token's text, far cheaper than the model
 * step that produced the token. */
#include "text/tokenizer.h"

#include "text/tok_utf8.h"

#include <stdlib.h>
#include <string.h>

/* Appends n bytes at p to buf[*j..cap); 0, or HEARTH_ELIMIT when it does not fit. */
static int put(char *buf, size_t cap, size_t *j, const char *p, size_t n)
{
    if (n > cap - *j)
        return HEARTH_ELIMIT;
    memcpy(buf + *j, p, n);
    *j += n;
    return HEARTH_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* SPM normal token: U+2581 -> ' '. */
static int piece_spm(const char *s, size_t n, char *buf, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
            if (put(buf, cap, &j, " ", 1))
                return HEARTH_ELIMIT;
            i += 3;
            continue;
        }
        if (put(buf, cap, &j, s + i, 1))
            return HEARTH_ELIMIT;
        i++;
    }
    return (int)j;
}

/* BPE normal token: each character back to the byte it stands for; a
 * character that stands for no byte (or a malformed byte) is copied as is. */
static int piece_bpe(const char *s, size_t n, char *buf, size_t cap)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t j = 0, len;
    for (size_t i = 0; i < n; i += len) {
        int byte = -1;
        if (utf8_scan(u + i, n - i, &len) == UTF8_VALID) {
            uint32_t cp = len == 1 ? u[i] : len == 2 ? ((u[i] & 0x1fu) << 6) | (u[i + 1] & 0x3fu) : 0x110000;
            byte = hearth_bpe_cp_to_byte(cp);
        } else {
            len = 1;
        }
        char c = (char)byte;
        if (byte >= 0 ? put(buf, cap, &j, &c, 1) : put(buf, cap, &j, s + i, len))
            return HEARTH_ELIMIT;
    }
    return (int)j;
}

static int piece(const hearth_tokenizer *t, int32_t id, bool special, char *buf, size_t cap)
{
    const hearth_vocab *v = t->vocab;
    if (id < 0 || id >= v->n_tokens)
        return HEARTH_EINVAL;
    uint8_t kind = v->kind ? v->kind[id] : HEARTH_TOK_NORMAL;
    const char *s = v->text[id];
    size_t n = v->len[id], j = 0;
    switch (kind) {
    case HEARTH_TOK_CONTROL:
    case HEARTH_TOK_UNKNOWN:
        if (!special)
            return 0;
        /* fall through */
    case HEARTH_TOK_USER_DEFINED:
        return put(buf, cap, &j, s, n) ? HEARTH_ELIMIT : (int)n;
    case HEARTH_TOK_NORMAL:
        return t->kind == HEARTH_TOKENIZER_SPM ? piece_spm(s, n, buf, cap) : piece_bpe(s, n, buf, cap);
    case HEARTH_TOK_BYTE: {
        int hi = n == 6 ? hexval(s[3]) : -1, lo = n == 6 ? hexval(s[4]) : -1;
        if (hi < 0 || lo < 0 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
            return 0; /* a byte token not spelled <0xNN> stands for nothing we know */
        char c = (char)(hi * 16 + lo);
        return put(buf, cap, &j, &c, 1) ? HEARTH_ELIMIT : 1;
    }
    default: /* unused, undefined: llama.cpp renders them as nothing too */
        return 0;
    }
}

int hearth_tokenizer_piece(const hearth_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    return piece(t, id, false, buf, cap);
}

int hearth_tokenizer_piece_special(const hearth_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    return piece(t, id, true, buf, cap);
}

void hearth_detok_init(hearth_detok *d, const hearth_tokenizer *t, bool from_start, bool render_special)
{
    memset(d, 0, sizeof *d);
    d->t = t;
    d->render_special = render_special;
    d->strip_space = from_start && t->add_space_prefix;
}

/* Converts held + p[0..n) into whole characters at o (room for 3 bytes per
 * input byte); returns the output length and stores the new incomplete tail
 * in held/n_held. */
static size_t stream_bytes(const uint8_t *held, size_t n_held, const char *p, size_t n, char *o,
                           uint8_t new_held[3], size_t *new_n_held)
{
    size_t total = n_held + n, i = 0, j = 0, len;
    uint8_t window[4];
    *new_n_held = 0;
    /* the held bytes plus up to 3 more may form one character across the seam */
    while (i < n_held) {
        size_t w = 0;
        for (size_t k = i; k < total && w < 4; k++, w++)
            window[w] = k < n_held ? held[k] : (uint8_t)p[k - n_held];
        int r = utf8_scan(window, w, &len);
        if (r == UTF8_INCOMPLETE) {
            memcpy(new_held, window, w);
            *new_n_held = w;
            return j;
        }
        if (r == UTF8_VALID) {
            memcpy(o + j, window, len);
            j += len;
        } else {
            memcpy(o + j, "\xef\xbf\xbd", 3);
            j += 3;
        }
        i += len;
    }
    const uint8_t *u = (const uint8_t *)p;
    for (size_t k = i - n_held; k < n; k += len) {
        int r = utf8_scan(u + k, n - k, &len);
        if (r == UTF8_INCOMPLETE) {
            memcpy(new_held, u + k, len);
            *new_n_held = len;
            break;
        }
        if (r == UTF8_VALID) {
            memcpy(o + j, u + k, len);
            j += len;
        } else {
            memcpy(o + j, "\xef\xbf\xbd", 3);
            j += 3;
        }
    }
    return j;
}

int hearth_detok_push(hearth_detok *d, int32_t id, hearth_buf *out)
{
    const hearth_vocab *v = d->t->vocab;
    if (id < 0 || id >= v->n_tokens)
        return HEARTH_EINVAL;
    char small[256 * 4];
    size_t cap = v->len[id];
    /* one buffer: the piece (at most len bytes), then the output (3 per input byte) */
    size_t need = cap + 3 * (cap + d->n_held);
    char *mem = need <= sizeof small ? small : malloc(need);
    if (!mem)
        return HEARTH_ENOMEM;
    int n = piece(d->t, id, d->render_special, mem, cap);
    int rc = HEARTH_OK;
    if (n < 0) {
        rc = n;
        goto done;
    }
    const char *p = mem;
    bool stripped = d->strip_space && n > 0;
    if (stripped && p[0] == ' ') {
        p++;
        n--;
    }
    uint8_t held[3];
    size_t n_held;
    char *o = mem + cap;
    size_t on = stream_bytes(d->held, d->n_held, p, (size_t)n, o, held, &n_held);
    if (on > 0 && (rc = hearth_buf_append(out, o, on)))
        goto done;
    memcpy(d->held, held, n_held);
    d->n_held = n_held;
    if (stripped)
        d->strip_space = false;
done:
    if (mem != small)
        free(mem);
    return rc;
}

int hearth_detok_flush(hearth_detok *d, hearth_buf *out)
{
    if (d->n_held == 0)
        return HEARTH_OK;
    int rc = hearth_buf_append(out, "\xef\xbf\xbd", 3);
    if (rc == HEARTH_OK)
        d->n_held = 0;
    return rc;
}

int hearth_tokenizer_decode(const hearth_tokenizer *t, const int32_t *ids, size_t n, bool render_special,
                            hearth_buf *out)
{
    hearth_detok d;
    hearth_detok_init(&d, t, true, render_special);
    for (size_t i = 0; i < n; i++) {
        int rc = hearth_detok_push(&d, ids[i], out);
        if (rc)
            return rc;
    }
    return hearth_detok_flush(&d, out);
}

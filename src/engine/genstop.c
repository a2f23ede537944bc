/* genstop.c: stop strings over streamed text, with a hold-back.
 *
 * Text arrives a token's worth at a time. Everything not yet released stays
 * in one pending buffer; after each push the earliest complete stop string
 * in it ends the stream, otherwise the longest suffix that is a prefix of
 * some stop string (and any unfinished UTF-8 character) is held and the rest
 * released. Pending therefore stays shorter than the longest stop string
 * plus one push, and each search is over a few hundred bytes at most.
 *
 * Rejected: matching on token ids (a stop string rarely tokenizes the same
 * way inside generated text as alone) and an Aho-Corasick automaton (at most
 * 16 short strings over a tiny buffer: memmem and a suffix scan are simpler
 * and not measurably slower). */
#include "engine/genstop.h"

#include <string.h>

/* Bound on the pending text: a stop string plus a push never comes close. */
#define PENDING_MAX (16u << 20)

const char *hearth_gen_finish_name(enum hearth_gen_finish f)
{
    switch (f) {
    case HEARTH_GEN_EOS:
    case HEARTH_GEN_STOP: return "stop";
    case HEARTH_GEN_LENGTH: return "length";
    case HEARTH_GEN_CANCELLED: return "cancelled";
    case HEARTH_GEN_NONE: break;
    }
    return "none";
}

int hearth_stopper_init(hearth_stopper *s, const char *const *stop, int n_stop, hearth_err *err)
{
    memset(s, 0, sizeof *s);
    s->matched = -1;
    if (n_stop < 0 || n_stop > HEARTH_GEN_MAX_STOP)
        return hearth_err_set(err, HEARTH_EINVAL, "stop strings: %d given, at most %d", n_stop, HEARTH_GEN_MAX_STOP);
    for (int i = 0; i < n_stop; i++) {
        size_t len = stop[i] ? strlen(stop[i]) : 0;
        if (len == 0)
            return hearth_err_set(err, HEARTH_EINVAL, "stop string %d is empty", i);
        if (len > HEARTH_GEN_MAX_STOP_LEN)
            return hearth_err_set(err, HEARTH_EINVAL, "stop string %d: %zu bytes > %d", i, len,
                                  HEARTH_GEN_MAX_STOP_LEN);
        s->stop[i] = stop[i];
        s->stop_len[i] = len;
    }
    s->n_stop = n_stop;
    hearth_buf_init(&s->pending, PENDING_MAX);
    return 0;
}

void hearth_stopper_deinit(hearth_stopper *s)
{
    hearth_buf_deinit(&s->pending);
}

/* Bytes at the end of p[0..n) that start a UTF-8 character but do not finish it. */
static size_t incomplete_tail(const char *p, size_t n)
{
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)p[n - back];
        if ((c & 0xC0) == 0x80)
            continue;
        size_t need = c >= 0xF0 && c <= 0xF7 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (c >= 0xF8)
            need = 1;
        return back < need ? back : 0;
    }
    return 0;
}

/* Longest k < len(stop) with p's last k bytes equal to stop's first k, over all stop strings. */
static size_t partial_match(const hearth_stopper *s, const char *p, size_t n)
{
    size_t best = 0;
    for (int i = 0; i < s->n_stop; i++) {
        size_t k = s->stop_len[i] - 1 < n ? s->stop_len[i] - 1 : n;
        for (; k > best; k--)
            if (memcmp(p + n - k, s->stop[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

int hearth_stopper_push(hearth_stopper *s, const char *text, size_t n, hearth_buf *out)
{
    if (s->matched >= 0)
        return 1;
    int rc = hearth_buf_append(&s->pending, text, n);
    if (rc)
        return rc;
    const char *p = s->pending.data;
    size_t len = s->pending.len;
    if (len == 0)
        return 0;
    size_t first = len;
    for (int i = 0; i < s->n_stop; i++) {
        const char *hit = memmem(p, len, s->stop[i], s->stop_len[i]);
        if (hit && (size_t)(hit - p) < first) {
            first = (size_t)(hit - p);
            s->matched = i;
        }
    }
    if (s->matched >= 0) {
        rc = hearth_buf_append(out, p, first);
        hearth_buf_reset(&s->pending, 0);
        return rc ? rc : 1;
    }
    size_t hold = partial_match(s, p, len);
    size_t tail = incomplete_tail(p, len);
    if (tail > hold)
        hold = tail;
    size_t emit = len - hold;
    /* A held stop prefix starts where its string starts, on a character
     * boundary when the stop string is valid UTF-8; for one that is not,
     * step back so no character is split. */
    for (int step = 0; step < 3 && emit > 0 && emit < len && ((unsigned char)p[emit] & 0xC0) == 0x80; step++)
        emit--;
    rc = hearth_buf_append(out, p, emit);
    if (rc)
        return rc;
    hearth_buf_consume(&s->pending, emit);
    return 0;
}

int hearth_stopper_finish(hearth_stopper *s, hearth_buf *out)
{
    if (s->matched >= 0 || s->pending.len == 0)
        return 0;
    size_t tail = incomplete_tail(s->pending.data, s->pending.len);
    int rc = hearth_buf_append(out, s->pending.data, s->pending.len - tail);
    if (!rc && tail)
        rc = hearth_buf_append(out, "\xEF\xBF\xBD", 3);
    hearth_buf_reset(&s->pending, 0);
    return rc;
}

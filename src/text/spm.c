/* spm.c: SentencePiece BPE with byte fallback, matching llama.cpp's
 * llm_tokenizer_spm token for token (the golden files come from it).
 *
 * How: escape spaces to U+2581, cut the text into UTF-8 characters (by lead
 * byte only, so malformed input still tokenizes), keep them as a linked list
 * of symbols, and seed a max-heap with every adjacent pair whose concatenation
 * is a vocabulary token, keyed by that token's score. Pop the best pair, merge
 * it, push the two pairs it now forms, until the heap is empty. Each surviving
 * symbol is then a token, or is emitted as <0xNN> byte tokens.
 *
 * Rejected: llama.cpp's rev_merge table, which re-splits a final symbol that
 * is not a token into the pair that formed it. A merged symbol is always a
 * token (that is the merge condition), and an unmerged one is a single
 * character, which no pair of symbols can spell, so the table never fires.
 * Rejected: filtering merges by token kind. llama.cpp merges into any token
 * whose text matches, control tokens included, and the goldens follow it. */
#include "text/spm.h"

#include "text/bigram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hearth_spm_init(hearth_spm *s, const hearth_vocab *v, hearth_err *err)
{
    if (!v->hash_slots)
        return hearth_err_set(err, HEARTH_EINVAL, "spm: vocabulary is not finished");
    s->vocab = v;
    s->unk = v->unk;
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = hearth_vocab_find(v, hex, 6);
        if (id < 0) {
            char c = (char)b;
            id = hearth_vocab_find(v, &c, 1);
        }
        s->byte_tok[b] = id;
    }
    return HEARTH_OK;
}

/* llama.cpp's unicode_len_utf8: the sequence length a lead byte announces;
 * continuation and invalid bytes count as 1. */
static size_t lead_len(uint8_t c)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

typedef struct spm_run {
    const hearth_spm *s;
    const char *text;  /* escaped */
    bigram_sym *sym;
    bigram_heap heap;
} spm_run;

static int try_pair(spm_run *r, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return HEARTH_OK;
    size_t size = r->sym[left].n + r->sym[right].n;
    int32_t id = hearth_vocab_find(r->s->vocab, r->text + r->sym[left].off, size);
    if (id < 0)
        return HEARTH_OK;
    bigram b = {
        .prio = r->s->vocab->score ? (double)r->s->vocab->score[id] : 0.0,
        .left = left,
        .right = right,
        .size = size,
    };
    return bigram_heap_push(&r->heap, b);
}

/* Replaces ' ' by U+2581 and optionally prepends one. */
static char *escape_spaces(const char *text, size_t n, bool prefix_space, size_t *out_len)
{
    size_t spaces = 0;
    for (size_t i = 0; i < n; i++)
        spaces += text[i] == ' ';
    if (n > (SIZE_MAX - 4) / 3)
        return NULL;
    size_t len = n + 2 * spaces + (prefix_space ? 3 : 0);
    char *esc = malloc(len + 1);
    if (!esc)
        return NULL;
    size_t j = 0;
    if (prefix_space) {
        memcpy(esc, "\xe2\x96\x81", 3);
        j = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (text[i] == ' ') {
            memcpy(esc + j, "\xe2\x96\x81", 3);
            j += 3;
        } else {
            esc[j++] = text[i];
        }
    }
    *out_len = len;
    return esc;
}

static int emit(const hearth_spm *s, const char *piece, size_t n, hearth_ids *out, hearth_err *err)
{
    int32_t id = hearth_vocab_find(s->vocab, piece, n);
    if (id >= 0)
        return hearth_ids_push(out, id);
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)piece[i];
        id = s->byte_tok[b] >= 0 ? s->byte_tok[b] : s->unk;
        if (id < 0)
            return hearth_err_set(err, HEARTH_EINVAL, "spm: byte 0x%02x has no token and the vocabulary no unknown token", b);
        int rc = hearth_ids_push(out, id);
        if (rc)
            return rc;
    }
    return HEARTH_OK;
}

int hearth_spm_encode(const hearth_spm *s, const char *text, size_t n, bool prefix_space,
                      hearth_ids *out, hearth_err *err)
{
    size_t n0 = out->n;
    spm_run r = {.s = s};
    int rc = HEARTH_OK;
    size_t len = 0;
    char *esc = escape_spaces(text, n, prefix_space, &len);
    if (!esc) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "spm: out of memory for %zu bytes of text", n);
        goto fail;
    }
    if (len > INT32_MAX) {
        rc = hearth_err_set(err, HEARTH_ELIMIT, "spm: text of %zu bytes is over the 2 GiB limit", n);
        goto fail;
    }
    r.text = esc;
    if (len == 0)
        goto done;
    r.sym = malloc(len * sizeof *r.sym);
    if (!r.sym) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "spm: out of memory for %zu symbols", len);
        goto fail;
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < len; n_sym++) {
        size_t cl = lead_len((uint8_t)esc[off]);
        if (cl > len - off)
            cl = len - off;
        r.sym[n_sym] = (bigram_sym){.off = off, .n = cl, .prev = n_sym - 1, .next = n_sym + 1};
        off += cl;
    }
    r.sym[n_sym - 1].next = -1;

    for (int32_t i = 1; i < n_sym; i++)
        if ((rc = try_pair(&r, i - 1, i)))
            goto nomem;
    while (r.heap.n > 0) {
        bigram b;
        bigram_heap_pop(&r.heap, &b);
        bigram_sym *l = &r.sym[b.left], *rt = &r.sym[b.right];
        if (l->n == 0 || rt->n == 0 || l->n + rt->n != b.size)
            continue;
        l->n += rt->n;
        rt->n = 0;
        l->next = rt->next;
        if (rt->next >= 0)
            r.sym[rt->next].prev = b.left;
        if ((rc = try_pair(&r, l->prev, b.left)) || (rc = try_pair(&r, b.left, l->next)))
            goto nomem;
    }
    for (int32_t i = 0; i >= 0; i = r.sym[i].next) {
        rc = emit(s, esc + r.sym[i].off, r.sym[i].n, out, err);
        if (rc == HEARTH_ELIMIT)
            rc = hearth_err_set(err, HEARTH_ELIMIT, "spm: more than %zu tokens", out->max);
        else if (rc == HEARTH_ENOMEM)
            rc = hearth_err_set(err, HEARTH_ENOMEM, "spm: out of memory for the token list");
        if (rc)
            goto fail;
    }
done:
    free(r.heap.v);
    free(r.sym);
    free(esc);
    return HEARTH_OK;
nomem:
    hearth_err_set(err, HEARTH_ENOMEM, "spm: out of memory for the merge queue");
fail:
    free(r.heap.v);
    free(r.sym);
    free(esc);
    out->n = n0;
    return rc;
}

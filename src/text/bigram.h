/* bigram.h: private to the SentencePiece and BPE tokenizers (spm.c, bpe.c).
 *
 * Both merge adjacent symbols of a doubly linked list, best pair first: SPM by
 * the highest vocabulary score of the merged text, BPE by the lowest merge
 * rank. One binary max-heap serves both by folding the order into one number
 * (prio = score, or prio = -rank, which a double holds exactly) with ties
 * broken by the leftmost pair, which is llama.cpp's order for both.
 *
 * Stale entries are not removed from the heap; the caller drops them when it
 * pops one whose symbols no longer have the recorded combined size (a symbol
 * only ever grows by absorbing its right neighbour, or drops to size 0 when
 * absorbed, so an unchanged size means an unchanged pair). */
#ifndef HEARTH_TEXT_BIGRAM_H
#define HEARTH_TEXT_BIGRAM_H

#include "base/err.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* One symbol: a byte range of the text being tokenized, linked to its
 * neighbours by index (-1 at either end). n == 0 once merged away. */
typedef struct bigram_sym {
    size_t off, n;
    int32_t prev, next;
} bigram_sym;

typedef struct bigram {
    double prio;     /* larger merges first */
    int32_t left, right;
    size_t size;     /* bytes of left + right when pushed */
} bigram;

typedef struct bigram_heap {
    bigram *v;
    size_t n, cap;
} bigram_heap;

static inline int bigram_before(const bigram *a, const bigram *b)
{
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

static inline int bigram_heap_push(bigram_heap *h, bigram b)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *p = realloc(h->v, cap * sizeof *p);
        if (!p)
            return HEARTH_ENOMEM;
        h->v = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = b;
    return HEARTH_OK;
}

/* Removes the best entry into *out; the heap must not be empty. */
static inline void bigram_heap_pop(bigram_heap *h, bigram *out)
{
    *out = h->v[0];
    bigram last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && bigram_before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!bigram_before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n > 0)
        h->v[i] = last;
}

#endif

/* bpe.c: byte-level BPE, matching llama.cpp's llm_tokenizer_bpe token for
 * token (the golden files come from it).
 *
 * How: replace malformed UTF-8 by U+FFFD, split with the vocabulary's
 * pre-tokenizer regexes (pretok.c), spell each piece's bytes with GPT-2's
 * byte-to-unicode characters, then merge adjacent symbols lowest rank first
 * (ties: leftmost) with a heap, and look the surviving symbols up in the
 * vocabulary. A symbol that is not a token (only possible with a merge list
 * that makes texts the vocabulary lacks) is emitted byte by byte where a
 * one-byte token exists, and dropped otherwise, as llama.cpp does.
 *
 * Merge ranks live in a hash keyed by the merge's own "left right" text; a
 * lookup builds "left right" from the two symbols. Byte-encoded text never
 * holds a raw space (0x20 is spelled U+0120), so the first space splits the
 * key exactly where llama.cpp splits the merge line.
 * Rejected: ranking by pairs of token ids, which is faster but differs from
 * llama.cpp when a merge side is not itself a token. */
#include "text/bpe.h"

#include "text/bigram.h"
#include "text/tok_utf8.h"

#include <stdlib.h>
#include <string.h>

uint32_t hearth_bpe_byte_to_cp(uint8_t c)
{
    if ((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae)
        return c;
    /* the 68 others, in byte order: 0x00-0x20, 0x7f-0xa0, 0xad */
    if (c <= 0x20)
        return 0x100u + c;
    if (c >= 0x7f && c <= 0xa0)
        return 0x100u + 0x21u + (uint32_t)(c - 0x7f);
    return 0x100u + 0x43u; /* 0xad */
}

int hearth_bpe_cp_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xac) || (cp >= 0xae && cp <= 0xff))
        return (int)cp;
    if (cp < 0x100 || cp > 0x143)
        return -1;
    uint32_t k = cp - 0x100;
    if (k <= 0x20)
        return (int)k;
    if (k <= 0x42)
        return (int)(0x7f + (k - 0x21));
    return 0xad;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int32_t merge_rank(const hearth_bpe *b, const char *key, size_t n)
{
    size_t mask = b->merge_cap - 1;
    for (size_t i = fnv1a(key, n) & mask;; i = (i + 1) & mask) {
        int32_t r = b->merge_slots[i];
        if (r < 0)
            return -1;
        if (b->merge_len[r] == n && memcmp(b->vocab->merges[r], key, n) == 0)
            return r;
    }
}

int hearth_bpe_init(hearth_bpe *b, const hearth_vocab *v, hearth_err *err)
{
    memset(b, 0, sizeof *b);
    if (!v->hash_slots)
        return hearth_err_set(err, HEARTH_EINVAL, "bpe: vocabulary is not finished");
    if (v->n_merges <= 0 || !v->merges)
        return hearth_err_set(err, HEARTH_EINVAL, "bpe: vocabulary has no merges (tokenizer.ggml.merges)");
    b->vocab = v;
    int rc = hearth_pretok_init(&b->pre, v->pre, err);
    if (rc)
        return rc;
    size_t cap = 16;
    while (cap < (size_t)v->n_merges * 2)
        cap *= 2;
    b->merge_cap = cap;
    b->merge_slots = malloc(cap * sizeof *b->merge_slots);
    b->merge_len = malloc((size_t)v->n_merges * sizeof *b->merge_len);
    if (!b->merge_slots || !b->merge_len) {
        hearth_bpe_deinit(b);
        return hearth_err_set(err, HEARTH_ENOMEM, "bpe: out of memory for %d merges", (int)v->n_merges);
    }
    memset(b->merge_slots, 0xff, cap * sizeof *b->merge_slots);
    for (int32_t r = 0; r < v->n_merges; r++) {
        const char *m = v->merges[r] ? v->merges[r] : "";
        size_t n = strlen(m);
        b->merge_len[r] = (uint32_t)n;
        if (merge_rank(b, m, n) >= 0)
            continue; /* listed twice: the first rank wins, as in llama.cpp */
        size_t i = fnv1a(m, n) & (cap - 1);
        while (b->merge_slots[i] >= 0)
            i = (i + 1) & (cap - 1);
        b->merge_slots[i] = r;
    }
    return HEARTH_OK;
}

void hearth_bpe_deinit(hearth_bpe *b)
{
    hearth_pretok_deinit(&b->pre);
    free(b->merge_slots);
    free(b->merge_len);
    memset(b, 0, sizeof *b);
}

/* Scratch shared by the pieces of one call, sized for the whole text. */
typedef struct bpe_run {
    const hearth_bpe *b;
    char *word;        /* the current piece, byte-encoded */
    char *key;         /* "left right" */
    bigram_sym *sym;
    bigram_heap heap;
} bpe_run;

static int try_pair(bpe_run *r, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return HEARTH_OK;
    const bigram_sym *l = &r->sym[left], *rt = &r->sym[right];
    memcpy(r->key, r->word + l->off, l->n);
    r->key[l->n] = ' ';
    memcpy(r->key + l->n + 1, r->word + rt->off, rt->n);
    int32_t rank = merge_rank(r->b, r->key, l->n + 1 + rt->n);
    if (rank < 0)
        return HEARTH_OK;
    bigram bg = {.prio = -(double)rank, .left = left, .right = right, .size = l->n + rt->n};
    return bigram_heap_push(&r->heap, bg);
}

static size_t put_utf8(char *p, uint32_t cp)
{
    if (cp < 0x80) {
        p[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        p[0] = (char)(0xc0 | (cp >> 6));
        p[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    p[0] = (char)(0xe0 | (cp >> 12));
    p[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    p[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
}

/* Merges one byte-encoded word of wn bytes in r->word and appends its ids. */
static int encode_word(bpe_run *r, size_t wn, hearth_ids *out)
{
    const hearth_vocab *v = r->b->vocab;
    int rc;
    if (r->b->pre.ignore_merges) {
        int32_t id = hearth_vocab_find(v, r->word, wn);
        if (id >= 0)
            return hearth_ids_push(out, id);
    }
    int32_t n_sym = 0;
    for (size_t off = 0; off < wn; n_sym++) {
        size_t cl = (uint8_t)r->word[off] < 0x80 ? 1 : 2; /* byte-encoded: U+0021..U+0143 */
        r->sym[n_sym] = (bigram_sym){.off = off, .n = cl, .prev = n_sym - 1, .next = n_sym + 1};
        off += cl;
    }
    r->sym[n_sym - 1].next = -1;
    r->heap.n = 0;
    for (int32_t i = 1; i < n_sym; i++)
        if ((rc = try_pair(r, i - 1, i)))
            return rc;
    while (r->heap.n > 0) {
        bigram bg;
        bigram_heap_pop(&r->heap, &bg);
        bigram_sym *l = &r->sym[bg.left], *rt = &r->sym[bg.right];
        if (l->n == 0 || rt->n == 0 || l->n + rt->n != bg.size)
            continue;
        l->n += rt->n;
        rt->n = 0;
        l->next = rt->next;
        if (rt->next >= 0)
            r->sym[rt->next].prev = bg.left;
        if ((rc = try_pair(r, l->prev, bg.left)) || (rc = try_pair(r, bg.left, l->next)))
            return rc;
    }
    for (int32_t i = 0; i >= 0; i = r->sym[i].next) {
        const char *t = r->word + r->sym[i].off;
        int32_t id = hearth_vocab_find(v, t, r->sym[i].n);
        if (id >= 0) {
            if ((rc = hearth_ids_push(out, id)))
                return rc;
            continue;
        }
        for (size_t k = 0; k < r->sym[i].n; k++) {
            id = hearth_vocab_find(v, t + k, 1);
            if (id >= 0 && (rc = hearth_ids_push(out, id)))
                return rc;
        }
    }
    return HEARTH_OK;
}

/* Copies text with every byte that starts no valid sequence replaced by
 * U+FFFD, or returns NULL with *clean_n = n when text is already valid. */
static char *sanitize(const char *text, size_t n, size_t *clean_n, int *rc)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0, len;
    while (i < n && utf8_scan(s + i, n - i, &len) == UTF8_VALID)
        i += len;
    *clean_n = n;
    *rc = HEARTH_OK;
    if (i == n)
        return NULL;
    if (n > SIZE_MAX / 3) {
        *rc = HEARTH_ENOMEM;
        return NULL;
    }
    char *c = malloc(3 * n);
    if (!c) {
        *rc = HEARTH_ENOMEM;
        return NULL;
    }
    memcpy(c, text, i);
    size_t j = i;
    while (i < n) {
        if (utf8_scan(s + i, n - i, &len) == UTF8_VALID) {
            memcpy(c + j, text + i, len);
            j += len;
            i += len;
        } else {
            memcpy(c + j, "\xef\xbf\xbd", 3);
            j += 3;
            i += 1;
        }
    }
    *clean_n = j;
    return c;
}

int hearth_bpe_encode(const hearth_bpe *b, const char *text, size_t n, hearth_ids *out, hearth_err *err)
{
    size_t n0 = out->n, n_pieces = 0, cn;
    hearth_span *pieces = NULL;
    bpe_run r = {.b = b};
    int rc;
    char *clean = sanitize(text, n, &cn, &rc);
    if (rc)
        goto nomem;
    const char *src = clean ? clean : text;
    if (cn > INT32_MAX / 4) {
        rc = hearth_err_set(err, HEARTH_ELIMIT, "bpe: text of %zu bytes is over the 512 MiB limit", n);
        goto fail;
    }
    if ((rc = hearth_pretok_split(&b->pre, src, cn, &pieces, &n_pieces, err)))
        goto fail;
    size_t longest = 0;
    for (size_t i = 0; i < n_pieces; i++)
        if (pieces[i].len > longest)
            longest = pieces[i].len;
    if (longest > 0) {
        r.word = malloc(2 * longest);
        r.key = malloc(2 * longest + 1);
        r.sym = malloc(longest * sizeof *r.sym);
        if (!r.word || !r.key || !r.sym)
            goto nomem;
    }
    for (size_t i = 0; i < n_pieces; i++) {
        size_t wn = 0;
        for (size_t k = 0; k < pieces[i].len; k++)
            wn += put_utf8(r.word + wn, hearth_bpe_byte_to_cp((uint8_t)src[pieces[i].off + k]));
        rc = encode_word(&r, wn, out);
        if (rc == HEARTH_ELIMIT) {
            rc = hearth_err_set(err, HEARTH_ELIMIT, "bpe: more than %zu tokens", out->max);
            goto fail;
        }
        if (rc)
            goto nomem;
    }
    free(r.heap.v);
    free(r.sym);
    free(r.key);
    free(r.word);
    free(pieces);
    free(clean);
    return HEARTH_OK;
nomem:
    rc = hearth_err_set(err, HEARTH_ENOMEM, "bpe: out of memory tokenizing %zu bytes", n);
fail:
    free(r.heap.v);
    free(r.sym);
    free(r.key);
    free(r.word);
    free(pieces);
    free(clean);
    out->n = n0;
    return rc;
}

/* wordpiece.c: BERT's normalizer, pre-tokenizer and WordPiece model in one pass.
 *
 * The text is validated, then streamed one code point at a time: cleaned,
 * CJK ideographs spaced out, lowercased and decomposed (NFD), and each
 * resulting code point either ends the current word (whitespace), is a word
 * of its own (punctuation) or joins the word. At a word's end its accents
 * are put in canonical order and the nonspacing marks dropped, then greedy
 * longest-match-first finds its pieces in the vocab's hash. Splitting after
 * decomposition matters: U+2260 decomposes to '=' + U+0338, a punctuation
 * word, exactly as in Hugging Face, where normalisation precedes splitting.
 *
 * Offsets (encode_spans) follow tokenizers' alignments: every buffered code
 * point carries the byte range of the input code point it came from, so a
 * lowercase or NFD expansion shares its source's range, and a piece runs
 * from the start of its first code point's range to the end of its last's.
 * Cleaned-away and stripped code points leave nothing behind: "e" + U+0301
 * is one token of 1 byte, the "e"; a control character inside a word falls
 * inside a piece only because the piece runs past it. One quirk is copied:
 * tokenizers hands out ranges by position after NFD's canonical reordering
 * (see follow_reorder), which matters only for marks that survive stripping
 * (non-Mn marks of non-zero class, such as U+302E or U+1B44). A word past
 * max_input_chars_per_word is not stored, so its [UNK] runs from the first
 * to the last surviving code point's own range, without that quirk.
 *
 * Rejected: normalising the whole text into a buffer first (memory grows
 * with the text; here it grows only with the longest word, and a word past
 * max_input_chars_per_word stops being stored since it is [UNK] anyway);
 * a trie over the vocab (the hash lookups are bounded by the longest token,
 * about 20 per character, and need no second copy of the vocab); rewriting
 * the GGUF vocab into "##" spelling (the lookup key just takes the other prefix). */
#include "text/wordpiece.h"

#include "text/unicode.h"

#include <stdlib.h>
#include <string.h>

#define SPELL_GGUF_WORD "\xE2\x96\x81" /* U+2581, llama.cpp's word-start mark */
#define SPELL_HF_CONT "##"
#define PREFIX_MAX 3

void hearth_wordpiece_opts_default(hearth_wordpiece_opts *o)
{
    o->clean_text = true;
    o->lowercase = true;
    o->strip_accents = -1;
    o->handle_chinese_chars = true;
    o->max_input_chars_per_word = 100;
}

static int32_t special_id(const hearth_vocab *v, int32_t given, const char *text)
{
    if (given >= 0 && given < v->n_tokens)
        return given;
    return hearth_vocab_find(v, text, strlen(text));
}

int hearth_wordpiece_init(hearth_wordpiece *wp, const hearth_vocab *v, const hearth_wordpiece_opts *o,
                          hearth_err *err)
{
    hearth_wordpiece_opts def;
    if (!o) {
        hearth_wordpiece_opts_default(&def);
        o = &def;
    }
    memset(wp, 0, sizeof *wp);
    if (o->max_input_chars_per_word < 1 || o->max_input_chars_per_word > HEARTH_WORDPIECE_MAX_WORD_CHARS)
        return hearth_err_set(err, HEARTH_EINVAL, "wordpiece: max_input_chars_per_word %d out of range (1..%d)",
                              o->max_input_chars_per_word, HEARTH_WORDPIECE_MAX_WORD_CHARS);
    if (!v->hash_slots)
        return hearth_err_set(err, HEARTH_EINVAL, "wordpiece: the vocab's lookup hash is not built");
    wp->vocab = v;
    wp->lowercase = o->lowercase;
    wp->strip_accents = o->strip_accents < 0 ? o->lowercase : o->strip_accents != 0;
    wp->clean_text = o->clean_text;
    wp->chinese = o->handle_chinese_chars;
    wp->max_chars = o->max_input_chars_per_word;
    wp->gguf_spelling = strcmp(v->model, "bert") == 0 && hearth_vocab_find(v, SPELL_GGUF_WORD "the", 6) >= 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->len[id] > wp->max_token_bytes)
            wp->max_token_bytes = v->len[id];
    wp->unk = special_id(v, v->unk, "[UNK]");
    wp->cls = special_id(v, v->cls, "[CLS]");
    wp->sep = special_id(v, v->sep, "[SEP]");
    wp->pad = special_id(v, v->pad, "[PAD]");
    wp->mask = special_id(v, v->mask, "[MASK]");
    if (wp->unk < 0)
        return hearth_err_set(err, HEARTH_EINVAL, "wordpiece: the vocab (%d tokens) has no [UNK] token",
                              (int)v->n_tokens);
    return HEARTH_OK;
}

int32_t hearth_wordpiece_cls(const hearth_wordpiece *wp) { return wp->cls; }
int32_t hearth_wordpiece_sep(const hearth_wordpiece *wp) { return wp->sep; }
int32_t hearth_wordpiece_pad(const hearth_wordpiece *wp) { return wp->pad; }
int32_t hearth_wordpiece_unk(const hearth_wordpiece *wp) { return wp->unk; }
int32_t hearth_wordpiece_mask(const hearth_wordpiece *wp) { return wp->mask; }

/* Where a buffered code point came from: the input bytes of its source, and
 * whether it is the first code point that source normalised to. cp is the
 * code point as appended, to see whether canonical reordering moved it. */
typedef struct origin {
    hearth_tok_span span;
    int32_t cp;
    bool first;
} origin;

/* Per-call state: the word being gathered and room to match its pieces. */
typedef struct scratch {
    const hearth_wordpiece *wp;
    hearth_ids *out;
    hearth_err *err;
    size_t at;        /* input byte offset, for error messages */
    hearth_tok_span cur;  /* the input bytes of the code point being fed */
    bool first;       /* the code point being split is the first cur normalised to */
    int32_t *cps;     /* the word's code points, decomposed, marks included */
    origin *src;      /* where each came from, cap; NULL when no spans are wanted */
    size_t n, cap;
    size_t n_chars;   /* code points that survive accent stripping */
    bool too_long;    /* past max_chars (or the buffer's bound): the word is [UNK] */
    /* The whole word's input bytes, for a too-long [UNK] (its code points are
     * no longer stored): from the first to the last code point that survives
     * stripping, or of all of them when none does. */
    hearth_tok_span word, kept;
    bool any_kept;
    char *utf8;       /* the word as UTF-8, max_chars * 4 bytes */
    size_t *off;      /* byte offset of each character in utf8, max_chars + 1 */
    int32_t *pieces;  /* the word's piece ids, max_chars */
    size_t *cut;      /* piece k is code points cut[k]..cut[k+1], max_chars + 1 */
    char *key;        /* prefix + candidate piece, max_token_bytes + 1 */
    hearth_tok_span *spans; /* the caller's, n_spans; NULL when not wanted */
    size_t n_spans;
    size_t out0;      /* out->n when the call began */
} scratch;

static int emit(scratch *s, int32_t id, hearth_tok_span span)
{
    size_t k = s->out->n - s->out0;
    if (s->spans && k == s->n_spans)
        return hearth_err_set(s->err, HEARTH_ELIMIT, "wordpiece: span limit of %zu tokens reached at input byte %zu",
                              s->n_spans, s->at);
    int rc = hearth_ids_push(s->out, id);
    if (rc == HEARTH_ELIMIT)
        return hearth_err_set(s->err, rc, "wordpiece: output limit of %zu ids reached at input byte %zu",
                              s->out->max, s->at);
    if (rc)
        return hearth_err_set(s->err, rc, "wordpiece: out of memory for %zu ids", s->out->n + 1);
    if (s->spans)
        s->spans[k] = span;
    return HEARTH_OK;
}

/* The input bytes of the word's code points from..to-1 (to > from). */
static hearth_tok_span cps_span(const scratch *s, size_t from, size_t to)
{
    if (!s->src)
        return (hearth_tok_span){0, 0};
    return (hearth_tok_span){s->src[from].span.start, s->src[to - 1].span.stop};
}

static int32_t lookup(const scratch *s, bool first, size_t from, size_t to)
{
    const hearth_wordpiece *wp = s->wp;
    const char *prefix = wp->gguf_spelling ? (first ? SPELL_GGUF_WORD : "") : (first ? "" : SPELL_HF_CONT);
    size_t plen = strlen(prefix), len = to - from;
    if (plen + len > wp->max_token_bytes)
        return -1;
    memcpy(s->key, prefix, plen);
    memcpy(s->key + plen, s->utf8 + from, len);
    return hearth_vocab_find(wp->vocab, s->key, plen + len);
}

/* Greedy longest-match-first over the gathered word (n_chars code points). */
static int match_word(scratch *s)
{
    size_t m = s->n, bytes = 0;
    for (size_t k = 0; k < m; k++) {
        s->off[k] = bytes;
        bytes += hearth_utf8_encode(s->cps[k], s->utf8 + bytes);
    }
    s->off[m] = bytes;
    size_t n_pieces = 0;
    for (size_t start = 0; start < m;) {
        int32_t id = -1;
        size_t end = m;
        for (; end > start; end--) {
            id = lookup(s, start == 0, s->off[start], s->off[end]);
            if (id >= 0)
                break;
        }
        if (id < 0)
            return emit(s, s->wp->unk, cps_span(s, 0, m));
        s->pieces[n_pieces] = id;
        s->cut[n_pieces++] = start;
        start = end;
    }
    s->cut[n_pieces] = m;
    for (size_t k = 0; k < n_pieces; k++) {
        int rc = emit(s, s->pieces[k], cps_span(s, s->cut[k], s->cut[k + 1]));
        if (rc)
            return rc;
    }
    return HEARTH_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Canonical reordering moved some of the word's code points: redo their
 * ranges as tokenizers does. Its NFD yields (code point, first of its
 * source) in canonical order, then hands out ranges by position: each first
 * code point takes the next source's range, any other the latest source's
 * (NormalizedString::transform_range). The reordering is a stable sort, so
 * the k-th copy of a code point after it is the k-th copy before it:
 * sorting (code point, index) keys on both sides pairs them up. (Carrying
 * the ranges through the sort itself would need a second copy of
 * hearth_uc_reorder; this runs only for the rare words it changed.) */
static int follow_reorder(scratch *s)
{
    size_t n = s->n;
    uint64_t *was = malloc(n * sizeof *was), *now = malloc(n * sizeof *now);
    origin *o = malloc(n * sizeof *o);
    int rc = HEARTH_OK;
    if (!was || !now || !o) {
        rc = hearth_err_set(s->err, HEARTH_ENOMEM, "wordpiece: out of memory reordering a word of %zu code points", n);
        goto done;
    }
    for (size_t k = 0; k < n; k++) {
        was[k] = (uint64_t)(uint32_t)s->src[k].cp << 32 | k;
        now[k] = (uint64_t)(uint32_t)s->cps[k] << 32 | k;
    }
    qsort(was, n, sizeof *was, cmp_u64);
    qsort(now, n, sizeof *now, cmp_u64);
    for (size_t j = 0; j < n; j++)
        o[(uint32_t)now[j]] = s->src[(uint32_t)was[j]];
    /* sources in input order are the first code points in the old order */
    size_t next = 0;
    const origin *latest = NULL;
    for (size_t k = 0; k < n; k++) {
        if (o[k].first) {
            while (!s->src[next].first)
                next++;
            latest = &s->src[next++];
        }
        if (latest)
            o[k].span = latest->span;
        o[k].cp = s->cps[k];
    }
    memcpy(s->src, o, n * sizeof *o);
done:
    free(was);
    free(now);
    free(o);
    return rc;
}

static int flush_word(scratch *s)
{
    if (s->n == 0 && !s->too_long)
        return HEARTH_OK;
    if (s->too_long) {
        s->n = s->n_chars = 0;
        s->too_long = false;
        return emit(s, s->wp->unk, s->any_kept ? s->kept : s->word);
    }
    if (s->wp->strip_accents) {
        hearth_uc_reorder(s->cps, s->n);
        for (size_t k = 0; s->src && k < s->n; k++)
            if (s->cps[k] != s->src[k].cp) {
                int rc = follow_reorder(s);
                if (rc)
                    return rc;
                break;
            }
        size_t kept = 0;
        for (size_t k = 0; k < s->n; k++)
            if (!hearth_uc_is_nonspacing_mark(s->cps[k])) {
                if (s->src)
                    s->src[kept] = s->src[k];
                s->cps[kept++] = s->cps[k];
            }
        s->n = kept;
    }
    int rc = s->n ? match_word(s) : HEARTH_OK;
    s->n = s->n_chars = 0;
    return rc;
}

static int word_append(scratch *s, int32_t cp)
{
    bool counts = !(s->wp->strip_accents && hearth_uc_is_nonspacing_mark(cp));
    if (s->n == 0 && !s->too_long) {
        s->word = s->cur;
        s->any_kept = false;
    }
    s->word.stop = s->cur.stop;
    if (counts) {
        if (!s->any_kept)
            s->kept.start = s->cur.start;
        s->kept.stop = s->cur.stop;
        s->any_kept = true;
    }
    if (s->too_long)
        return HEARTH_OK;
    if (counts && s->n_chars == (size_t)s->wp->max_chars) {
        s->too_long = true;
        return HEARTH_OK;
    }
    if (s->n == s->cap) {
        if (s->cap == HEARTH_WORDPIECE_MAX_WORD_CPS) {
            s->too_long = true;
            return HEARTH_OK;
        }
        size_t cap = s->cap * 2;
        if (cap > HEARTH_WORDPIECE_MAX_WORD_CPS)
            cap = HEARTH_WORDPIECE_MAX_WORD_CPS;
        int32_t *p = realloc(s->cps, cap * sizeof *p);
        if (!p)
            return hearth_err_set(s->err, HEARTH_ENOMEM, "wordpiece: out of memory for a word of %zu code points", cap);
        s->cps = p;
        if (s->src) {
            origin *q = realloc(s->src, cap * sizeof *q);
            if (!q)
                return hearth_err_set(s->err, HEARTH_ENOMEM, "wordpiece: out of memory for a word of %zu code points",
                                      cap);
            s->src = q;
        }
        s->cap = cap;
    }
    if (s->src)
        s->src[s->n] = (origin){s->cur, cp, s->first};
    s->cps[s->n++] = cp;
    s->n_chars += counts;
    return HEARTH_OK;
}

/* One normalised code point: ends the word, is a word, or joins the word. */
static int split(scratch *s, int32_t cp)
{
    if (hearth_uc_is_whitespace(cp))
        return flush_word(s);
    if (hearth_uc_is_punct(cp)) {
        int rc = flush_word(s);
        if (!rc)
            rc = word_append(s, cp);
        if (!rc)
            rc = flush_word(s);
        return rc;
    }
    return word_append(s, cp);
}

/* Lowercase and decompose one cleaned code point, then split. */
static int normalize(scratch *s, int32_t cp)
{
    int32_t lower[2], dec[HEARTH_UC_NFD_MAX];
    int n_lower = 1;
    lower[0] = cp;
    if (s->wp->lowercase)
        n_lower = hearth_uc_lower(cp, lower);
    for (int i = 0; i < n_lower; i++) {
        int n_dec = 1;
        dec[0] = lower[i];
        if (s->wp->strip_accents) {
            n_dec = hearth_uc_nfd(lower[i], dec, HEARTH_UC_NFD_MAX);
            if (n_dec < 1 || n_dec > HEARTH_UC_NFD_MAX) {
                n_dec = 1;
                dec[0] = lower[i];
            }
        }
        for (int k = 0; k < n_dec; k++) {
            s->first = i == 0 && k == 0;
            int rc = split(s, dec[k]);
            if (rc)
                return rc;
        }
    }
    return HEARTH_OK;
}

static int feed(scratch *s, int32_t cp)
{
    const hearth_wordpiece *wp = s->wp;
    if (wp->clean_text) {
        if (cp == 0 || cp == 0xFFFD || hearth_uc_is_control(cp))
            return HEARTH_OK;
        if (hearth_uc_is_whitespace(cp))
            cp = ' ';
    }
    if (wp->chinese && hearth_uc_is_cjk(cp)) {
        int rc = flush_word(s);
        if (!rc)
            rc = normalize(s, cp);
        if (!rc)
            rc = flush_word(s);
        return rc;
    }
    return normalize(s, cp);
}

int hearth_wordpiece_encode(const hearth_wordpiece *wp, const char *text, size_t n, hearth_ids *out,
                            hearth_err *err)
{
    return hearth_wordpiece_encode_spans(wp, text, n, out, NULL, 0, err);
}

int hearth_wordpiece_encode_spans(const hearth_wordpiece *wp, const char *text, size_t n, hearth_ids *out,
                                  hearth_tok_span *spans, size_t n_spans, hearth_err *err)
{
    if (n > UINT32_MAX)
        return hearth_err_set(err, HEARTH_EINVAL, "wordpiece: input of %zu bytes is past the 4 GiB limit of offsets",
                              n);
    int rc = hearth_utf8_validate(text, n, err);
    if (rc) {
        hearth_err_prefix(err, "wordpiece");
        return rc;
    }
    size_t max_chars = (size_t)wp->max_chars;
    scratch s = {.wp = wp, .out = out, .err = err, .cap = max_chars + 16,
                 .spans = spans, .n_spans = n_spans, .out0 = out->n};
    s.cps = malloc(s.cap * sizeof *s.cps);
    s.utf8 = malloc(max_chars * 4 + 1);
    s.off = malloc((max_chars + 1) * sizeof *s.off);
    s.pieces = malloc(max_chars * sizeof *s.pieces);
    s.cut = malloc((max_chars + 1) * sizeof *s.cut);
    s.key = malloc(wp->max_token_bytes + PREFIX_MAX + 1);
    if (spans)
        s.src = malloc(s.cap * sizeof *s.src);
    if (!s.cps || !s.utf8 || !s.off || !s.pieces || !s.cut || !s.key || (spans && !s.src)) {
        rc = hearth_err_set(err, HEARTH_ENOMEM, "wordpiece: out of memory for scratch");
        goto done;
    }
    for (size_t i = 0; i < n;) {
        s.at = i;
        int32_t cp = hearth_utf8_decode(text, n, &i);
        s.cur = (hearth_tok_span){(uint32_t)s.at, (uint32_t)i};
        rc = feed(&s, cp);
        if (rc)
            goto done;
    }
    s.at = n;
    rc = flush_word(&s);
done:
    free(s.cps);
    free(s.src);
    free(s.utf8);
    free(s.off);
    free(s.pieces);
    free(s.cut);
    free(s.key);
    return rc;
}

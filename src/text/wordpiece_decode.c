/* wordpiece_decode.c: token ids back to text, as Hugging Face's WordPiece
 * decoder (tokenizers' decoders::WordPiece, prefix "##", cleanup on: what
 * a BERT tokenizer.json names and what TEI's /decode runs).
 *
 * Token by token, as tokenizers' decode_chain: every token but the first
 * either continues the word before it (its "##" dropped) or starts a new one
 * after a space; then, within that token's own text, the cleanup rules
 * (" ." -> ".", " n't" -> "n't", ...) are applied in their order. Because
 * the rules see one token at a time, the ones that span two tokens
 * (" ' " and " do not") never fire on BERT's vocabularies; that is
 * tokenizers' behaviour since 0.13, and it is copied, not corrected.
 *
 * A GGUF vocab spells pieces as llama.cpp's converter does ("\u2581the" for a
 * word start, "ing" for a continuation, "[CLS]" as is): each token is read
 * back into the Hugging Face spelling before the rules above, so both
 * vocabularies decode alike.
 *
 * Rejected: joining all tokens first and cleaning the whole string (the
 * tokenizers < 0.13 behaviour: "don ' t" became "don't"); TEI runs a
 * current tokenizers, and a client comparing the two would see a
 * difference. */
#include "text/wordpiece.h"

#include <string.h>

#define GGUF_WORD "\xE2\x96\x81" /* U+2581 */
#define GGUF_WORD_LEN 3

/* tokenizers' cleanup, in its order: (from, to) */
static const char *const rules[][2] = {
    {" .", "."},   {" ?", "?"},     {" !", "!"},   {" ,", ","},   {" ' ", "'"},  {" n't", "n't"},
    {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
};

/* Replaces every from in s[0..*n) by to, in place (to is never longer). */
static void replace_all(char *s, size_t *n, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), r = 0, w = 0;
    while (r < *n) {
        if (*n - r >= fl && !memcmp(s + r, from, fl)) {
            memmove(s + w, to, tl);
            w += tl;
            r += fl;
        } else {
            s[w++] = s[r++];
        }
    }
    *n = w;
}

static bool is_special(const hearth_wordpiece *wp, int32_t id)
{
    const hearth_vocab *v = wp->vocab;
    if (id == wp->cls || id == wp->sep || id == wp->pad || id == wp->mask || id == wp->unk)
        return true;
    return v->kind && (v->kind[id] == HEARTH_TOK_CONTROL || v->kind[id] == HEARTH_TOK_UNKNOWN);
}

int hearth_wordpiece_decode(const hearth_wordpiece *wp, const int32_t *ids, size_t n, bool skip_special,
                            hearth_buf *out, hearth_err *err)
{
    const hearth_vocab *v = wp->vocab;
    for (size_t k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= v->n_tokens)
            return hearth_err_set(err, HEARTH_EINVAL, "wordpiece: id %zu is %lld, not an id in 0..%d", k,
                                  (long long)ids[k], (int)v->n_tokens - 1);
    /* one token's text as the rules see it: a space or "##", and the token */
    char piece[2 + HEARTH_WORDPIECE_DECODE_MAX_TOKEN];
    size_t i = 0; /* tokens kept so far: the first gets no space */
    int rc = hearth_buf_reserve(out, 1);
    for (size_t k = 0; k < n && !rc; k++) {
        int32_t id = ids[k];
        bool special = is_special(wp, id);
        if (special && skip_special)
            continue;
        const char *t = v->text[id];
        size_t tl = v->len[id];
        bool cont;
        if (special) {
            cont = false;
        } else if (wp->gguf_spelling) {
            bool word = tl >= GGUF_WORD_LEN && !memcmp(t, GGUF_WORD, GGUF_WORD_LEN);
            bool bracket = tl >= 2 && t[0] == '[' && t[tl - 1] == ']';
            cont = !word && !bracket;
            if (word) {
                t += GGUF_WORD_LEN;
                tl -= GGUF_WORD_LEN;
            }
        } else {
            cont = tl >= 2 && t[0] == '#' && t[1] == '#';
            if (cont) {
                t += 2;
                tl -= 2;
            }
        }
        if (tl > HEARTH_WORDPIECE_DECODE_MAX_TOKEN)
            return hearth_err_set(err, HEARTH_EINVAL, "wordpiece: token %d is %zu bytes (at most %d decode)", (int)id, tl,
                                  HEARTH_WORDPIECE_DECODE_MAX_TOKEN);
        size_t pn = 0;
        if (i > 0 && !cont)
            piece[pn++] = ' ';
        if (i == 0 && cont) { /* a continuation first keeps its "##", as in tokenizers */
            piece[pn++] = '#';
            piece[pn++] = '#';
        }
        memcpy(piece + pn, t, tl);
        pn += tl;
        for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
            replace_all(piece, &pn, rules[r][0], rules[r][1]);
        rc = hearth_buf_append(out, piece, pn);
        i++;
    }
    if (rc)
        return hearth_err_set(err, rc, "wordpiece: the decoded text is longer than %zu bytes", out->max);
    return HEARTH_OK;
}

/* wordpiece.h: BERT's WordPiece tokenizer, as Hugging Face runs it.
 *
 * Text goes through BertNormalizer (clean control characters, space out CJK
 * ideographs, lowercase, NFD + drop nonspacing marks), BertPreTokenizer (split
 * on whitespace, each punctuation character its own word) and WordPiece
 * (greedy longest-match-first per word; a word with an unmatchable position,
 * or longer than max_input_chars_per_word characters, becomes one [UNK]).
 * The ids match transformers' BertTokenizer and tokenizers' BertTokenizerFast
 * for bert-base-uncased-style vocabularies. Special tokens written in the
 * text ("[CLS]") are not recognised: they are tokenized as plain text. */
#ifndef HEARTH_TEXT_WORDPIECE_H
#define HEARTH_TEXT_WORDPIECE_H

#include "base/buf.h"
#include "base/err.h"
#include "text/vocab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Upper bound accepted for max_input_chars_per_word. */
#define HEARTH_WORDPIECE_MAX_WORD_CHARS 1024
/* Code points (accents included) buffered for one word; a longer word is
 * [UNK], as it is far past any max_input_chars_per_word. */
#define HEARTH_WORDPIECE_MAX_WORD_CPS ((size_t)1 << 20)

typedef struct hearth_wordpiece_opts {
    bool clean_text;              /* drop U+0000, U+FFFD, controls; whitespace -> ' ' */
    bool lowercase;
    int strip_accents;            /* 1 / 0, or -1: follow lowercase (HF's default) */
    bool handle_chinese_chars;    /* each CJK ideograph its own word */
    int max_input_chars_per_word; /* longer words become [UNK]; 1..HEARTH_WORDPIECE_MAX_WORD_CHARS */
} hearth_wordpiece_opts;

/* bert-base-uncased's settings: clean_text, lowercase, strip_accents -1,
 * handle_chinese_chars, max_input_chars_per_word 100. */
void hearth_wordpiece_opts_default(hearth_wordpiece_opts *o);

typedef struct hearth_wordpiece {
    const hearth_vocab *vocab; /* borrowed; must outlive the tokenizer */
    bool lowercase, strip_accents, clean_text, chinese;
    int max_chars;
    /* How the vocab spells pieces: Hugging Face's ("the", "##ing") or
     * llama.cpp's GGUF ("\u2581the", "ing"). */
    bool gguf_spelling;
    size_t max_token_bytes; /* longest token text: longer candidates are not looked up */
    int32_t unk, cls, sep, pad, mask; /* -1 when the vocab has none (unk never is) */
} hearth_wordpiece;

/* Sets up wp over v (borrowed, read-only, already finished) with options o
 * (NULL: defaults). The special ids come from v's fields when set, else from
 * the texts "[UNK]" "[CLS]" "[SEP]" "[PAD]" "[MASK]". The GGUF spelling is
 * detected by v->model "bert" plus a token "\u2581the". HEARTH_EINVAL when v
 * has no [UNK] or an option is out of range. Nothing is allocated, so there
 * is no deinit. */
int hearth_wordpiece_init(hearth_wordpiece *wp, const hearth_vocab *v, const hearth_wordpiece_opts *o,
                          hearth_err *err);

/* Tokenizes text[0..n) and appends the ids to out, without [CLS]/[SEP].
 * Returns HEARTH_OK; HEARTH_EINVAL for invalid UTF-8 (err names the byte
 * offset; nothing is appended) or n of 2^32 or more; HEARTH_ELIMIT when
 * out->max is reached (out holds the ids that fit: the caller decides
 * whether to truncate or refuse); HEARTH_ENOMEM. Thread-safe: wp is only
 * read, scratch is per call. */
int hearth_wordpiece_encode(const hearth_wordpiece *wp, const char *text, size_t n, hearth_ids *out,
                            hearth_err *err);

/* The bytes of the input one token came from: text[start, stop). */
typedef struct hearth_tok_span {
    uint32_t start, stop;
} hearth_tok_span;

/* As hearth_wordpiece_encode, and, when spans is not NULL, spans[k] for the
 * k-th id this call appends: the byte range of text it came from, mapped
 * back through normalization as Hugging Face's tokenizers map offsets
 * (every piece of a word covers the original bytes of the code points it
 * was made from; a ## continuation starts where the previous piece
 * stopped; an [UNK] word covers the whole word). spans must have room for
 * n_spans entries; HEARTH_ELIMIT when more tokens than that come out (out
 * and spans then hold those that fit, as for out->max). Inputs of 2^32
 * bytes or more: HEARTH_EINVAL. */
int hearth_wordpiece_encode_spans(const hearth_wordpiece *wp, const char *text, size_t n, hearth_ids *out,
                                  hearth_tok_span *spans, size_t n_spans, hearth_err *err);

/* Longest token text hearth_wordpiece_decode takes (BERT's are < 30 bytes). */
#define HEARTH_WORDPIECE_DECODE_MAX_TOKEN 1024

/* Appends the text of ids[0..n) to out as Hugging Face's WordPiece decoder
 * writes it (tokens joined by spaces, "##" continuations joined to the word
 * before, the decoder's cleanup of spaces before punctuation; see
 * wordpiece_decode.c). skip_special leaves out [CLS] [SEP] [PAD] [MASK]
 * [UNK] and tokens the vocab marks as control. Returns HEARTH_OK;
 * HEARTH_EINVAL naming the position of an id outside the vocab (nothing is
 * appended) or a token longer than HEARTH_WORDPIECE_DECODE_MAX_TOKEN (out
 * then holds the text before it); HEARTH_ELIMIT or HEARTH_ENOMEM when out
 * cannot grow (out then holds a prefix). Thread-safe. */
int hearth_wordpiece_decode(const hearth_wordpiece *wp, const int32_t *ids, size_t n, bool skip_special,
                            hearth_buf *out, hearth_err *err);

/* The special ids, -1 when the vocab has none. */
int32_t hearth_wordpiece_cls(const hearth_wordpiece *wp);
int32_t hearth_wordpiece_sep(const hearth_wordpiece *wp);
int32_t hearth_wordpiece_pad(const hearth_wordpiece *wp);
int32_t hearth_wordpiece_unk(const hearth_wordpiece *wp);
int32_t hearth_wordpiece_mask(const hearth_wordpiece *wp);

#endif

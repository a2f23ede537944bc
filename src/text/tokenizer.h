/* tokenizer.h: the generation models' tokenizers, behind one facade.
 *
 * A hearth_tokenizer wraps a finished hearth_vocab (read from GGUF metadata)
 * and picks the algorithm from vocab->model: "llama" is SentencePiece BPE
 * (spm.h), "gpt2" is byte-level BPE (bpe.h). Both reproduce llama.cpp's
 * llama_tokenize token for token, special-token handling included.
 *
 * Thread-safety: after init the tokenizer is read-only; every function here
 * may be called from any number of threads on one shared tokenizer (scratch
 * memory is allocated per call). A hearth_detok is per stream, not shared.
 *
 * Invalid UTF-8 input is never rejected, it is handled as llama.cpp handles
 * it: the BPE tokenizer replaces each byte that starts no valid sequence by
 * U+FFFD before splitting (so such input does not round-trip); the SPM
 * tokenizer keeps the bytes as <0xNN> byte tokens (so it does). Rejecting
 * would make hearth refuse prompts llama.cpp accepts; the HTTP layer sees
 * only JSON strings, which are valid UTF-8 already. */
#ifndef HEARTH_TEXT_TOKENIZER_H
#define HEARTH_TEXT_TOKENIZER_H

#include "base/buf.h"
#include "base/err.h"
#include "text/bpe.h"
#include "text/spm.h"
#include "text/vocab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hearth_tokenizer_kind {
    HEARTH_TOKENIZER_SPM = 1,
    HEARTH_TOKENIZER_BPE = 2,
};

typedef struct hearth_tokenizer {
    const hearth_vocab *vocab;  /* borrowed; must outlive the tokenizer */
    int kind;                   /* enum hearth_tokenizer_kind */
    /* options resolved from the metadata, with llama.cpp's defaults where it
     * says nothing (SPM: add_bos, add_space_prefix; BPE: add_bos for the llama3 family) */
    bool add_bos, add_eos, add_space_prefix;
    int32_t bos, eos;           /* -1 when absent */
    /* control, user-defined and unknown tokens, longest text first: matched
     * in the input before the algorithm runs */
    int32_t *special;
    int32_t n_special;
    hearth_spm spm;
    hearth_bpe bpe;
} hearth_tokenizer;

/* Prepares t over v (finished; borrowed for t's lifetime).
 * HEARTH_EUNSUPPORTED: a model other than "llama"/"gpt2" ("bert" is WordPiece,
 * handled elsewhere) or an unknown BPE pre-tokenizer, named in err;
 * HEARTH_EINVAL: add_bos/add_eos asked for without the id, or a BPE
 * vocabulary without merges; HEARTH_ENOMEM. On failure t needs no deinit. */
int hearth_tokenizer_init(hearth_tokenizer *t, const hearth_vocab *v, hearth_err *err);
/* Frees what init allocated; safe on a zeroed tokenizer. */
void hearth_tokenizer_deinit(hearth_tokenizer *t);

/* Appends the ids of text[0..n) to out.
 * add_special: put BOS/EOS around the text as the vocabulary's add_bos/add_eos say.
 * parse_special: texts of control and unknown tokens in the input become those
 * tokens (longest first). User-defined tokens are matched either way, as in
 * llama.cpp and Hugging Face tokenizers. With parse_special false a control
 * token's text is tokenized as ordinary text.
 * SPM prepends a space (U+2581) to the text and to every text run that
 * follows a special token, when add_space_prefix.
 * On failure out keeps what it held at entry.
 * HEARTH_ELIMIT: more ids than out->max allows; HEARTH_ENOMEM;
 * HEARTH_EINVAL: text is NULL with n > 0, or a tokenizer-level failure (err says). */
int hearth_tokenizer_encode(const hearth_tokenizer *t, const char *text, size_t n, bool add_special,
                            bool parse_special, hearth_ids *out, hearth_err *err);

/* Writes the bytes token id stands for into buf: SPM turns U+2581 into ' ';
 * BPE undoes the byte-to-unicode map; byte tokens (<0xNN>) give their byte;
 * user-defined tokens give their text; control and unknown tokens give
 * nothing (hearth_tokenizer_piece_special renders their text), and so do
 * unused and undefined ones. A piece is never longer than the token's text,
 * so cap >= vocab->len[id] always suffices.
 * Returns the byte count (>= 0), HEARTH_EINVAL for an id out of range, or
 * HEARTH_ELIMIT when cap is too small (buf then holds an unspecified prefix). Pieces need not be
 * whole UTF-8 characters: use hearth_detok to stream text. */
int hearth_tokenizer_piece(const hearth_tokenizer *t, int32_t id, char *buf, size_t cap);
int hearth_tokenizer_piece_special(const hearth_tokenizer *t, int32_t id, char *buf, size_t cap);

/* Streaming detokenizer: turns ids, one at a time, into valid UTF-8 text,
 * never splitting a character across two pushes. */
typedef struct hearth_detok {
    const hearth_tokenizer *t;  /* borrowed */
    bool render_special;        /* control/unknown tokens show their text */
    bool strip_space;           /* the next non-empty piece loses one leading ' ' */
    uint8_t held[3];            /* the start of a character still incomplete */
    size_t n_held;
} hearth_detok;

/* from_start: the ids begin the text (SPM with add_space_prefix then drops
 * the space the encoder added, from the first piece that has any bytes; a
 * BOS or other empty piece before it does not count, unlike llama.cpp's
 * llama_detokenize, which keeps the space after a BOS). Pass false when
 * continuing text, e.g. decoding generated tokens after a prompt. */
void hearth_detok_init(hearth_detok *d, const hearth_tokenizer *t, bool from_start, bool render_special);
/* Appends to out the text that id completes: whole characters only; an
 * incomplete multi-byte sequence at the end is held for the next push.
 * Malformed bytes become U+FFFD (one per maximal invalid subpart, the
 * Unicode/WHATWG practice). HEARTH_EINVAL: id out of range (nothing appended,
 * stream unchanged); HEARTH_ELIMIT / HEARTH_ENOMEM from out. */
int hearth_detok_push(hearth_detok *d, int32_t id, hearth_buf *out);
/* Ends the stream: a held incomplete sequence is appended as one U+FFFD. */
int hearth_detok_flush(hearth_detok *d, hearth_buf *out);

/* Convenience: the whole text of ids[0..n) (a detok from the start, pushed and
 * flushed), appended to out. Same codes as hearth_detok_push. */
int hearth_tokenizer_decode(const hearth_tokenizer *t, const int32_t *ids, size_t n, bool render_special,
                            hearth_buf *out);

#endif

/* bpe.h: byte-level BPE (GGUF tokenizer model "gpt2"), as llama.cpp's
 * llm_tokenizer_bpe does it: regex pre-tokenization (pretok.h), GPT-2's
 * byte-to-unicode map, then merges by rank.
 *
 * Used through tokenizer.h; exposed for tests. */
#ifndef HEARTH_TEXT_BPE_H
#define HEARTH_TEXT_BPE_H

#include "base/err.h"
#include "text/pretok.h"
#include "text/vocab.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_bpe {
    const hearth_vocab *vocab;  /* borrowed; must outlive the bpe */
    hearth_pretok pre;
    /* private: open-addressing hash of merge text ("left right") -> rank, -1 = empty */
    int32_t *merge_slots;
    uint32_t *merge_len;
    size_t merge_cap;
} hearth_bpe;

/* Compiles the pre-tokenizer named by v->pre (see hearth_pretok_init: an
 * unknown name is HEARTH_EUNSUPPORTED) and hashes v's merges; a merge listed
 * twice keeps its first (lowest) rank. v must be finished. On failure b needs
 * no deinit. HEARTH_EINVAL: no merges; HEARTH_ENOMEM. */
int hearth_bpe_init(hearth_bpe *b, const hearth_vocab *v, hearth_err *err);
void hearth_bpe_deinit(hearth_bpe *b);

/* Appends the ids of text[0..n) to out. Bytes that do not start a valid UTF-8
 * sequence are each replaced by U+FFFD first, as llama.cpp does (overlong
 * forms and surrogates, which llama.cpp lets through, are replaced too).
 * On failure out keeps what it held at entry. HEARTH_ELIMIT: out is full;
 * HEARTH_ENOMEM; HEARTH_EINVAL: the regex engine failed.
 * Thread-safe: b is only read; scratch is per call. */
int hearth_bpe_encode(const hearth_bpe *b, const char *text, size_t n, hearth_ids *out, hearth_err *err);

/* GPT-2's byte-to-unicode map: the code point that stands for byte c in
 * token texts (printable Latin-1 bytes stand for themselves, the other 68
 * are moved to U+0100..U+0143). */
uint32_t hearth_bpe_byte_to_cp(uint8_t c);
/* Its inverse: the byte, or -1 when cp stands for no byte. */
int hearth_bpe_cp_to_byte(uint32_t cp);

#endif

/* spm.h: SentencePiece-style BPE over a scored vocabulary (GGUF tokenizer
 * model "llama"), as llama.cpp's llm_tokenizer_spm does it.
 *
 * Used through tokenizer.h; exposed for tests. */
#ifndef HEARTH_TEXT_SPM_H
#define HEARTH_TEXT_SPM_H

#include "base/err.h"
#include "text/vocab.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hearth_spm {
    const hearth_vocab *vocab;  /* borrowed; must outlive the spm */
    int32_t byte_tok[256];      /* byte fallback: "<0xNN>", else the 1-byte token, else -1 */
    int32_t unk;                /* used for a byte with no token at all; -1 = error instead */
} hearth_spm;

/* Prepares the byte-fallback table. v must be finished (hearth_vocab_finish).
 * Allocates nothing, so there is no deinit. */
int hearth_spm_init(hearth_spm *s, const hearth_vocab *v, hearth_err *err);

/* Appends the ids of text[0..n) to out. Every ' ' becomes U+2581 first, and
 * one U+2581 is prepended when prefix_space. The text is cut into UTF-8
 * characters by their lead byte (invalid bytes are not rejected: they end up
 * as <0xNN> byte tokens, so nothing is lost); then the adjacent pair whose
 * concatenation is a token with the highest score is merged (ties: leftmost)
 * until no pair is a token; a piece that is not a token is emitted byte by byte.
 * On failure out keeps what it held at entry.
 * HEARTH_ELIMIT: out is full; HEARTH_ENOMEM; HEARTH_EINVAL: a byte with no
 * token and no unknown token. Thread-safe: s is only read; scratch is per call. */
int hearth_spm_encode(const hearth_spm *s, const char *text, size_t n, bool prefix_space,
                      hearth_ids *out, hearth_err *err);

#endif

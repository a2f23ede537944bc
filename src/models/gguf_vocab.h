/* gguf_vocab.h: a tokenizer vocabulary from GGUF metadata (tokenizer.ggml.*). */
#ifndef HEARTH_MODELS_GGUF_VOCAB_H
#define HEARTH_MODELS_GGUF_VOCAB_H

#include "models/gguf.h"
#include "text/vocab.h"

/* Fills v (caller-owned storage, overwritten) from g's tokenizer.ggml.tokens
 * (required), scores, token_type and merges (optional; when present their
 * counts must match), the special ids (bos, eos, eot, unknown, separator in
 * both llama.cpp's "seperator" spelling and the correct one, padding, cls,
 * mask), add_bos_token / add_eos_token / add_space_prefix, model and pre, and
 * then builds the lookup hash (hearth_vocab_finish). Token strings are copied
 * exactly as stored. A special id that is u32 -1 or not a valid token id is
 * treated as absent (llama.cpp does the same; converters write 0xffffffff).
 * On failure v is left deinitialized and err names the file and key.
 * HEARTH_ENOTFOUND: no token list; HEARTH_EINVAL: malformed; HEARTH_ENOMEM. */
int hearth_gguf_load_vocab(const hearth_gguf *g, hearth_vocab *v, hearth_err *err);

#endif

/* vocab_txt.h: loads a BERT vocab.txt (one WordPiece token per line). */
#ifndef HEARTH_TEXT_VOCAB_TXT_H
#define HEARTH_TEXT_VOCAB_TXT_H

#include "base/err.h"
#include "text/vocab.h"

/* Limits on what a vocab.txt may hold; past them loading fails with HEARTH_ELIMIT. */
#define HEARTH_VOCAB_TXT_MAX_BYTES ((size_t)64 << 20)
#define HEARTH_VOCAB_TXT_MAX_TOKEN 1024 /* bytes in one token */

/* Fills v (caller storage, previous contents ignored) from the vocab.txt at
 * path: token id = 0-based line number, the line's bytes without its "\n" and
 * a trailing "\r"; a last line without "\n" still counts, an empty file is an
 * error. Tokens must be valid UTF-8. Sets v->model to "bert", every score to
 * 0, and unk/cls/sep/pad/mask to the ids of "[UNK]" "[CLS]" "[SEP]" "[PAD]"
 * "[MASK]" when present (else -1); the lookup hash is built. Returns HEARTH_OK,
 * or a negative status with err naming the path and line; on failure v is
 * left deinitialized. Release with hearth_vocab_deinit. */
int hearth_vocab_load_txt(hearth_vocab *v, const char *path, hearth_err *err);

#endif

/* pretok.h: the regex pre-tokenizers of byte-level BPE vocabularies, chosen
 * by GGUF's tokenizer.ggml.pre, as llama.cpp splits text before merging.
 *
 * Used by bpe.c; exposed for tests. */
#ifndef HEARTH_TEXT_PRETOK_H
#define HEARTH_TEXT_PRETOK_H

#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>

#define HEARTH_PRETOK_MAX_RE 4

typedef struct hearth_pretok {
    char name[64];          /* the pre name resolved ("default" for "") */
    int n_re;
    void *re[HEARTH_PRETOK_MAX_RE];  /* pcre2_code *, kept opaque so pcre2.h stays in pretok.c */
    bool ignore_merges;     /* llama3 family: a piece that is a whole token skips merging */
    bool add_bos;           /* llama.cpp's add_bos default for this pre (metadata overrides) */
} hearth_pretok;

/* A piece of text: bytes [off, off + len) of the split string. */
typedef struct hearth_span {
    size_t off, len;
} hearth_span;

/* Compiles the regexes of pre (UTF + UCP, JIT when the library has it).
 * Known: "gpt-2" (and phi-2, mpt, olmo, jais, roberta-bpe, exaone4), "llama3"
 * (llama-v3, llama-bpe, falcon3, falcon-h1, pixtral, midm-2.0, lfm2),
 * "dbrx", "smaug-bpe", "qwen2" (deepseek-r1-qwen, megrez, stablelm2,
 * hunyuan), "starcoder" (refact, command-r, smollm, codeshell, exaone,
 * minerva-7b), "falcon", and "default" (also used for ""). Anything else:
 * HEARTH_EUNSUPPORTED naming it. On failure p needs no deinit. */
int hearth_pretok_init(hearth_pretok *p, const char *pre, hearth_err *err);
void hearth_pretok_deinit(hearth_pretok *p);

/* Splits text[0..n), which must be valid UTF-8, into pieces covering it in
 * order: each regex in turn splits every piece the previous one left, and the
 * text between two matches becomes a piece of its own (llama.cpp's
 * unicode_regex_split). *pieces is malloc'ed (free it; NULL when n == 0).
 * HEARTH_ENOMEM; HEARTH_EINVAL when the regex engine fails (match limit).
 * Thread-safe: p is only read; match data is per call. */
int hearth_pretok_split(const hearth_pretok *p, const char *text, size_t n, hearth_span **pieces,
                        size_t *n_pieces, hearth_err *err);

#endif

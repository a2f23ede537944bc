/* vocab.h: a tokenizer's vocabulary: token strings, scores, kinds, special ids.
 *
 * Filled by a loader (models/ reads GGUF metadata or vocab.txt / tokenizer.json)
 * and then read-only, shared by every thread. Token text is stored as given by
 * the file (SentencePiece's U+2581 for spaces, GPT-2's byte-to-unicode map,
 * WordPiece's "##" prefix): each tokenizer knows its own convention. */
#ifndef HEARTH_TEXT_VOCAB_H
#define HEARTH_TEXT_VOCAB_H

#include "base/err.h"

#include <stddef.h>
#include <stdint.h>

/* GGUF's tokenizer.ggml.token_type values. */
enum hearth_token_kind {
    HEARTH_TOK_UNDEFINED = 0,
    HEARTH_TOK_NORMAL = 1,
    HEARTH_TOK_UNKNOWN = 2,
    HEARTH_TOK_CONTROL = 3,
    HEARTH_TOK_USER_DEFINED = 4,
    HEARTH_TOK_UNUSED = 5,
    HEARTH_TOK_BYTE = 6,
};

typedef struct hearth_vocab {
    int32_t n_tokens;
    char **text;        /* n_tokens NUL-terminated strings, owned */
    uint32_t *len;      /* byte length of each text */
    float *score;       /* n_tokens scores (SentencePiece), or NULL */
    uint8_t *kind;      /* n_tokens hearth_token_kind values, or NULL (all NORMAL) */
    /* BPE merges as "left right" strings, in rank order (rank = index); owned */
    int32_t n_merges;
    char **merges;
    /* special ids, -1 when absent */
    int32_t bos, eos, eot, unk, sep, pad, cls, mask;
    /* fill-in-the-middle markers (code models; llama-server's /infill): prefix,
     * suffix, middle, repository and file separator; -1 when absent */
    int32_t fim_pre, fim_suf, fim_mid, fim_rep, fim_sep;
    /* tokenizer options read from metadata */
    int add_bos, add_eos;     /* 1/0; -1 when the file does not say */
    int add_space_prefix;     /* SentencePiece's leading-space rule; -1 unknown */
    char model[32];           /* "llama", "gpt2", "bert", ... */
    char pre[64];             /* tokenizer.ggml.pre (BPE pre-tokenizer name) or "" */
    /* private: open-addressing hash of text -> id */
    int32_t *hash_slots;
    size_t hash_cap;
} hearth_vocab;

/* Allocates the arrays for n tokens (text/len/score/kind zeroed, special ids -1). */
int hearth_vocab_init(hearth_vocab *v, int32_t n_tokens, hearth_err *err);
/* Copies s (n bytes) as token id's text. */
int hearth_vocab_set_token(hearth_vocab *v, int32_t id, const char *s, size_t n, hearth_err *err);
/* Builds the lookup hash; call once after every token is set. Duplicate texts keep the lowest id. */
int hearth_vocab_finish(hearth_vocab *v, hearth_err *err);
/* The fill-in-the-middle markers a file names none of, found by their texts
 * as llama.cpp finds them (its vocabulary loader at c392e50): prefix
 * "<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>"; suffix
 * "<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>"; middle
 * "<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>"; repository
 * "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"; file separator
 * "<|file_sep|>" (the first of each list present wins). A token found so is
 * made a control token, as there. After finish. */
void hearth_vocab_guess_fim(hearth_vocab *v);
/* Id of the token whose text is exactly s[0..n), or -1. Thread-safe after finish. */
int32_t hearth_vocab_find(const hearth_vocab *v, const char *s, size_t n);
/* Frees everything; safe on a zeroed or half-built vocab. */
void hearth_vocab_deinit(hearth_vocab *v);

/* A growable list of token ids with a hard maximum (the tokenizers' output). */
typedef struct hearth_ids {
    int32_t *v;
    size_t n, cap, max;
} hearth_ids;

void hearth_ids_init(hearth_ids *ids, size_t max);
void hearth_ids_deinit(hearth_ids *ids);
/* HEARTH_ELIMIT past max, HEARTH_ENOMEM when allocation fails. */
int hearth_ids_push(hearth_ids *ids, int32_t id);

#endif

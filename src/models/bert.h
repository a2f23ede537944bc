/* bert.h: BERT-family sentence encoders (all-MiniLM-L6-v2, bge, e5) on the CPU.
 *
 * Opened from a Hugging Face sentence-transformers folder (config.json,
 * model.safetensors, tokenizer files, pooling config) or from a GGUF file of
 * the `bert` architecture (llama.cpp's tensor names). Weights are mmapped.
 * hearth_bert_embed runs a batch of sequences of different lengths as one
 * forward pass (padding masked with a large finite negative, never -inf) and
 * pools each as the model's config says; a sequence gives the same vector in
 * any batch as alone. */
#ifndef HEARTH_MODELS_BERT_H
#define HEARTH_MODELS_BERT_H

#include "base/err.h"
#include "base/pool.h"
#include "models/hf_folder.h" /* hearth_pooling */
#include "text/vocab.h"
#include "text/wordpiece.h" /* hearth_tok_span */

#include <stdbool.h>
#include <stdint.h>

/* Weight storage chosen at open: fp32 as stored, or converted once (bf16, int8). */
enum hearth_bert_dtype { HEARTH_BERT_F32, HEARTH_BERT_BF16, HEARTH_BERT_INT8 };

typedef struct hearth_bert hearth_bert;

int hearth_bert_open(hearth_bert **out, const char *path, enum hearth_bert_dtype dtype, hearth_err *err);
void hearth_bert_close(hearth_bert *m); /* NULL is a no-op */

int64_t hearth_bert_dim(const hearth_bert *m);         /* embedding size */
int64_t hearth_bert_max_tokens(const hearth_bert *m);  /* longest sequence, [CLS] and [SEP] included */
hearth_pooling hearth_bert_pooling(const hearth_bert *m);
/* Pools by p from now on, whatever the model's config says (llama-server's
 * --pooling). Call before the model embeds anything. */
void hearth_bert_set_pooling(hearth_bert *m, hearth_pooling p);
bool hearth_bert_normalizes(const hearth_bert *m);      /* the model's own config has a Normalize module */
const hearth_vocab *hearth_bert_vocab(const hearth_bert *m);
/* The text of the model's prompt called name (sentence-transformers'
 * "prompts" in config_sentence_transformers.json: put before an input that
 * asks for it), with its length; NULL when the model has no such prompt. */
const char *hearth_bert_prompt(const hearth_bert *m, const char *name, size_t *len);
/* The name of the prompt the model's config says to use by default
 * ("default_prompt_name"), or NULL. */
const char *hearth_bert_default_prompt(const hearth_bert *m);
/* The prompts' names, ", "-separated, for messages ("" when there are none). */
void hearth_bert_prompt_names(const hearth_bert *m, char *out, size_t cap);
/* FLOPs of one forward pass over sequences of these lengths (for the FLOP-rate report). */
double hearth_bert_flops(const hearth_bert *m, int n_seqs, const int32_t *lens);

/* What to do with a text longer than the model's limit (TEI's "truncate"
 * and "truncation_direction"): refuse it, keep its first tokens, or keep its
 * last ones (as Hugging Face's truncation_side "left" does: the tokens are
 * cut before [CLS] and [SEP] are added, so both stay); or, only to count or
 * show them (TEI's /tokenize), keep every token whatever the limit. */
enum hearth_bert_truncate {
    HEARTH_BERT_NO_TRUNCATE,
    HEARTH_BERT_TRUNCATE_RIGHT,
    HEARTH_BERT_TRUNCATE_LEFT,
    HEARTH_BERT_NO_LIMIT,
};

/* Tokenizes text with [CLS] ... [SEP] into out. A text longer than the model's
 * limit is cut to fit as trunc says, or with HEARTH_BERT_NO_TRUNCATE gives
 * HEARTH_ELIMIT with a message naming both lengths. Invalid UTF-8:
 * HEARTH_EINVAL naming the byte offset. Thread-safe. */
int hearth_bert_tokenize(const hearth_bert *m, const char *text, size_t n, enum hearth_bert_truncate trunc,
                         hearth_ids *out, hearth_err *err);
/* The same, and spans[k] = the input bytes of out's k-th id ({0, 0} for
 * [CLS] and [SEP]); spans has room for n + 2 entries. */
int hearth_bert_tokenize_spans(const hearth_bert *m, const char *text, size_t n, enum hearth_bert_truncate trunc,
                               hearth_ids *out, hearth_tok_span *spans, hearth_err *err);

/* Appends the text of ids[0..n) to out, as the model's Hugging Face tokenizer
 * decodes them (hearth_wordpiece_decode); skip_special leaves out [CLS],
 * [SEP] and the other special tokens. HEARTH_EINVAL naming an id outside
 * the vocabulary. Thread-safe. */
int hearth_bert_decode(const hearth_bert *m, const int32_t *ids, size_t n, bool skip_special, hearth_buf *out,
                       hearth_err *err);

/* Embeds n_seqs token sequences (each with [CLS]/[SEP], at most max_tokens
 * long) in one forward pass; writes n_seqs x dim floats to out, pooled and,
 * when normalize is set, L2-normalized. Not thread-safe on one model (one
 * scheduler thread per model calls it). */
int hearth_bert_embed(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids, const int32_t *lens,
                      bool normalize, float *out, hearth_err *err);
/* The same, asking stop(ctx, layers done, layers) after each layer but the
 * last: when it says true, returns HEARTH_EAGAIN at once, out undefined (a
 * batching scheduler gives up a pass it would rather start over bigger).
 * Where all_tokens[s] is set (all_tokens may be NULL), sequence s writes
 * its last layer's vector of every token (lens[s] x dim floats, never
 * normalized) instead of one pooled vector; out holds the sequences' rows
 * in order. */
int hearth_bert_embed_stoppable(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids,
                                const int32_t *lens, const bool *all_tokens, bool normalize, float *out,
                                bool (*stop)(void *ctx, int64_t done, int64_t total), void *ctx, hearth_err *err);

/* Cross-encoders (rerankers): a model that also has BertForSequenceClassification's
 * head (pooler + a one-label classifier; GGUF: bert.pooling_type 4 with
 * cls.* and cls.output.*) scores (query, document) pairs. */

/* Whether m has the head; when not, why (a sentence naming the model). */
bool hearth_bert_is_reranker(const hearth_bert *m);
const char *hearth_bert_no_rerank_reason(const hearth_bert *m);

/* Tokenizes a pair as [CLS] query [SEP] document [SEP] into out (token types
 * are implied: 0 up to the first [SEP], 1 after it; WordPiece never makes a
 * [SEP] from text, so that boundary is exact). Too long for the model: the
 * document is cut at its end first (transformers' "only_second");
 * HEARTH_ELIMIT only when the query alone, with its 3 specials, does not
 * fit, naming both lengths. *doc_cut = document tokens dropped (may be
 * NULL). Invalid UTF-8: HEARTH_EINVAL. Thread-safe. */
int hearth_bert_tokenize_pair(const hearth_bert *m, const char *query, size_t qn, const char *doc, size_t dn,
                              hearth_ids *out, size_t *doc_cut, hearth_err *err);

/* Scores n_seqs pair sequences (as hearth_bert_tokenize_pair makes them) in
 * one forward pass: out[s] = the classifier's logit for sequence s (raw,
 * no sigmoid). stop/ctx as hearth_bert_embed_stoppable's (NULL: never).
 * HEARTH_EUNSUPPORTED when m has no head. Not thread-safe on one model. */
int hearth_bert_rerank_stoppable(hearth_bert *m, hearth_pool *pool, int n_seqs, const int32_t *const *ids,
                                 const int32_t *lens, float *out, bool (*stop)(void *ctx, int64_t done, int64_t total),
                                 void *ctx, hearth_err *err);

#endif

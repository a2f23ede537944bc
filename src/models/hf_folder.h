/* hf_folder.h: a Hugging Face sentence-transformers folder (all-MiniLM-L6-v2,
 * bge, e5) opened for serving a BERT encoder.
 *
 * Reads, from dir:
 *   config.json                 the BertModel shape (required)
 *   model.safetensors           the weights (required), kept open and mapped
 *   tokenizer.json              WordPiece vocab and normalizer options (preferred)
 *   vocab.txt + tokenizer_config.json   the fallback when tokenizer.json is absent
 *   modules.json                the module list: Transformer, Pooling, Normalize (optional)
 *   1_Pooling/config.json       the pooling mode, or the folder modules.json names (optional)
 *   sentence_bert_config.json   max_seq_length (optional)
 *   config_sentence_transformers.json   prompts and default_prompt_name (optional)
 * Every value is checked; an absent, mistyped, out-of-range or unsupported
 * value is an error naming the file and the key. */
#ifndef HEARTH_MODELS_HF_FOLDER_H
#define HEARTH_MODELS_HF_FOLDER_H

#include "base/err.h"
#include "models/safetensors.h"
#include "text/vocab.h"
#include "text/wordpiece.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct hearth_bert_config {
    int64_t vocab_size;              /* rows of embeddings.word_embeddings.weight */
    int64_t hidden_size;
    int64_t num_hidden_layers;
    int64_t num_attention_heads;     /* divides hidden_size */
    int64_t intermediate_size;
    int64_t max_position_embeddings;
    int64_t type_vocab_size;         /* default 2 when absent (BertConfig's) */
    float layer_norm_eps;            /* default 1e-12 when absent */
    char hidden_act[16];             /* "gelu" only (erf GELU); default "gelu" */
    char model_type[32];             /* "bert" only; required */
} hearth_bert_config;

typedef enum hearth_pooling {
    HEARTH_POOL_MEAN = 0, /* mean of the non-padding tokens; the default */
    HEARTH_POOL_CLS = 1,  /* the [CLS] token's vector */
    HEARTH_POOL_LAST = 2, /* the last non-padding token's vector */
} hearth_pooling;

/* A named prompt of config_sentence_transformers.json ("query": "query: "):
 * text sentence-transformers puts before the input when asked by name. */
#define HEARTH_HF_MAX_PROMPTS 32
#define HEARTH_HF_PROMPT_NAME_MAX 64     /* bytes, NUL included */
#define HEARTH_HF_PROMPT_TEXT_MAX 4096   /* bytes, NUL excluded */
typedef struct hearth_hf_prompt {
    char name[HEARTH_HF_PROMPT_NAME_MAX];
    char *text;                      /* owned */
    size_t len;
} hearth_hf_prompt;

typedef struct hearth_hf_folder {
    char *dir;                       /* owned copy */
    hearth_bert_config config;
    hearth_pooling pooling;
    bool normalize;                  /* modules.json lists sentence_transformers.models.Normalize */
    int64_t max_seq_len;             /* tokens per sequence, [CLS] and [SEP] included */
    hearth_vocab vocab;              /* finished; special ids set */
    hearth_wordpiece_opts wp_opts;   /* for hearth_wordpiece_init(&wp, &f->vocab, &f->wp_opts) */
    char vocab_source[32];           /* "tokenizer.json" or "vocab.txt" */
    hearth_st st;                    /* model.safetensors, open */
    char prefix[16];                 /* "", "bert." or "model.": what the tensor names start with */
    hearth_hf_prompt prompts[HEARTH_HF_MAX_PROMPTS];
    int n_prompts;
    int default_prompt;              /* index of default_prompt_name, or -1 */
} hearth_hf_folder;

/* Opens the folder. On failure f is closed (hearth_hf_folder_close is still
 * safe) and err names the file and the key or tensor. HEARTH_ENOTFOUND: a
 * required file or key is absent; HEARTH_EINVAL: a malformed or out-of-range
 * value; HEARTH_EUNSUPPORTED: a valid setting hearth does not implement
 * (hidden_act "relu", max pooling, a Dense module, ...); HEARTH_EIO. */
int hearth_hf_folder_open(hearth_hf_folder *f, const char *dir, hearth_err *err);
/* Frees everything and unmaps; safe on a zeroed, half-open or closed f. */
void hearth_hf_folder_close(hearth_hf_folder *f);

/* The tensor called prefix + name ("encoder.layer.0.output.dense.weight"),
 * checked as hearth_st_get checks it (n_dims -1 skips the shape check). */
int hearth_hf_folder_tensor(const hearth_hf_folder *f, const char *name, int n_dims, const int64_t *shape,
                            const hearth_st_tensor **out, hearth_err *err);

/* Parses config.json text (len bytes; path is for messages) into c. */
int hearth_bert_config_parse(hearth_bert_config *c, const char *json, size_t len, const char *path,
                             hearth_err *err);

#endif

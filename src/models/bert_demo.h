/* bert_demo.h: writes a complete sentence-transformers BERT folder with
 * deterministic random weights, for tests, benchmarks and demos that must not
 * depend on downloading a model.
 *
 * Weights (all F32): every tensor has its own stream, so its values depend
 * only on the seed and its unprefixed name (the same with or without a
 * "bert." prefix, and independent of the order tensors are written):
 *   state  = seed ^ fnv1a64(name)          (FNV-1a, 64-bit, over the name's bytes)
 *   x      = splitmix64(&state)            (state += 0x9e3779b97f4a7c15; then the
 *                                           usual xor-shift-multiply finalizer)
 *   u      = (x >> 40) / 2^24              (24 bits: exact in a float, in [0, 1))
 *   r      = (2u - 1) * a                  (uniform in [-a, a))
 * with, per kind of tensor:
 *   Linear weight [out, in]            a = 1 / sqrt(in)
 *   Linear bias, LayerNorm bias        a = 0.02
 *   LayerNorm weight                   1 + r with a = 0.1
 *   word / position / token-type embeddings   a = 1 / sqrt(hidden)
 * so a Python script can regenerate any tensor exactly. */
#ifndef HEARTH_MODELS_BERT_DEMO_H
#define HEARTH_MODELS_BERT_DEMO_H

#include "base/err.h"
#include "models/hf_folder.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct hearth_bert_demo_shape {
    int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
    int64_t max_position_embeddings, type_vocab_size;
    float layer_norm_eps;
    int64_t max_seq_len;       /* sentence_bert_config.json's max_seq_length; 0: max_position_embeddings */
    const char *vocab_path;    /* vocab.txt to copy (at most vocab_size lines); NULL: a synthetic vocab */
    const char *tensor_prefix; /* NULL or "": BertModel's bare names; "bert.": BertFor*'s */
    bool tokenizer_json;       /* also write tokenizer.json (BertNormalizer, WordPiece, the same vocab) */
    hearth_pooling pooling;
    bool normalize;            /* list a Normalize module in modules.json */
    /* a cross-encoder (BertForSequenceClassification, one label): the
     * encoder and "pooler.dense.{weight,bias}" under "bert." whatever
     * tensor_prefix says, and "classifier.{weight,bias}" ([1, hidden], [1])
     * unprefixed; their streams are named without the prefix, as above */
    bool reranker;
} hearth_bert_demo_shape;

/* all-MiniLM-L6-v2: 6 layers, 384 hidden, 12 heads, 1536 FFN, vocab 30522,
 * 512 positions, 2 token types, eps 1e-12, max_seq_len 256, mean pooling,
 * normalized, tokenizer.json written; vocab_path NULL (set it to the real
 * bert-base-uncased vocab.txt for real tokenization). */
void hearth_bert_demo_shape_minilm(hearth_bert_demo_shape *s);

/* Writes the folder into dir (created if absent; files in it are replaced):
 * config.json, model.safetensors, modules.json, 1_Pooling/config.json,
 * sentence_bert_config.json, tokenizer_config.json, vocab.txt and, when
 * asked, tokenizer.json. The synthetic vocab is [PAD] [UNK] [CLS] [SEP]
 * [MASK], then single characters, "##" + each, a few words and "[unused<i>]"
 * to fill vocab_size (at least 5). HEARTH_EINVAL for a shape hearth's loader
 * would refuse or a vocab file longer than vocab_size; HEARTH_EIO. */
int hearth_bert_demo_write(const char *dir, const hearth_bert_demo_shape *shape, uint64_t seed, hearth_err *err);

#endif
